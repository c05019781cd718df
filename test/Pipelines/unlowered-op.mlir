// A pipeline that cannot lower an op fails at it, rather than exiting 0
// with IR that mlir-translate rejects: the unfused pipeline has no lowering
// of the fused op.
// RUN: not swin-opt %s --rpe-cpu-pipeline=fuse=false 2>&1 | FileCheck %s

// CHECK: unlowered-op.mlir:[[# @LINE + 3]]:3: error: 'rpe.fused_window_attention' remains after lowering to the builtin, llvm, omp dialects
func.func @fused(%q: memref<5x2x64x12xf16>, %t: memref<225x2xf16>,
                 %o: memref<5x2x64x12xf16>) {
  rpe.fused_window_attention ins(%q, %q, %q, %t : memref<5x2x64x12xf16>, memref<5x2x64x12xf16>, memref<5x2x64x12xf16>, memref<225x2xf16>)
    outs(%o : memref<5x2x64x12xf16>) {window = array<i64: 8, 8>, scale = 0.25 : f32}
  return
}
