// Lowering must be complete: a partial conversion exits 0 and leaves ops
// behind, so check the dialects left and that LLVM IR translation succeeds.
// RUN: swin-opt %s --rpe-cpu-pipeline | FileCheck %s --check-prefix=MLIR
// RUN: swin-opt %s --rpe-cpu-pipeline | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=LLVM
// RUN: swin-opt %s --rpe-cpu-pipeline=parallel=false | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=SEQ
// RUN: swin-opt %s --rpe-cpu-pipeline=fuse=false | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=UNFUSED
// RUN: swin-opt %s --rpe-cpu-pipeline=vector-width=16 | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=LLVM
// RUN: swin-opt %s --rpe-cpu-pipeline=thread-runtime=gomp | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=GOMP
// RUN: swin-opt %s --rpe-cpu-pipeline="thread-runtime=gomp fuse=false" | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=GOMP-UNFUSED

// MLIR-NOT: {{[^.a-z_](affine|arith|bufferization|cf|func|index|linalg|math|memref|rpe|scf|tensor|ub|vector)\.[a-z_]+}}
// MLIR: llvm.func @attention_f32
// MLIR-NOT: {{[^.a-z_](affine|arith|bufferization|cf|func|index|linalg|math|memref|rpe|scf|tensor|ub|vector)\.[a-z_]+}}

// LLVM-LABEL: define {{.*}} @attention_f32(
// LLVM: call void {{.*}} @__kmpc_fork_call
// LLVM-LABEL: define {{.*}} @attention_bf16(
// LLVM-LABEL: define {{.*}} @attention_3d_f16(

// SEQ-NOT: __kmpc_fork_call

// thread-runtime=gomp: the (window, head) loop runs on GNU libgomp's team
// (rpe-parallel-to-gomp), its body a function named after the op that
// became the loop.
// GOMP-NOT: __kmpc
// GOMP-LABEL: define {{.*}} @attention_f32(
// GOMP: call void @GOMP_parallel(ptr @attention_f32.par0.fused_window_attention.line{{[0-9]+}},
// GOMP-NOT: __kmpc
// GOMP-UNFUSED-LABEL: define {{.*}} @attention_f32(
// GOMP-UNFUSED: call void @GOMP_parallel(ptr @attention_f32.par0.window_attention.line{{[0-9]+}},

// The fused kernel computes exp in registers; the unfused path calls libm.
// LLVM-NOT: call {{.*}} @llvm.exp.
// UNFUSED-LABEL: define {{.*}} @attention_f32(
// UNFUSED: @llvm.exp.f32

func.func @attention_f32(%q: tensor<?x3x49x32xf32>, %k: tensor<?x3x49x32xf32>, %v: tensor<?x3x49x32xf32>,
                         %t: tensor<169x3xf32>) -> tensor<?x49x96xf32> {
  %b = rpe.lookup %t {window = array<i64: 7, 7>} : tensor<169x3xf32> -> tensor<3x49x49xf32>
  %m = rpe.shift_mask {resolution = array<i64: 14, 14>, window = array<i64: 7, 7>, shift = array<i64: 3, 3>} : tensor<4x49x49xf32>
  %0 = rpe.window_attention ins(%q, %k, %v : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>)
         bias(%b : tensor<3x49x49xf32>) mask(%m : tensor<4x49x49xf32>) -> tensor<?x49x96xf32>
  return %0 : tensor<?x49x96xf32>
}

func.func @attention_bf16(%q: tensor<8x2x24x16xbf16>, %t: tensor<77x2xbf16>) -> tensor<8x2x24x16xbf16> {
  %b = rpe.lookup %t {window = array<i64: 4, 6>} : tensor<77x2xbf16> -> tensor<2x24x24xbf16>
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<8x2x24x16xbf16>, tensor<8x2x24x16xbf16>, tensor<8x2x24x16xbf16>)
         bias(%b : tensor<2x24x24xbf16>) -> tensor<8x2x24x16xbf16>
  return %0 : tensor<8x2x24x16xbf16>
}

func.func @attention_3d_f16(%q: tensor<?x1x18x8xf16>, %t: tensor<75x1xf16>) -> tensor<?x18x8xf16> {
  %b = rpe.lookup %t {window = array<i64: 2, 3, 3>} : tensor<75x1xf16> -> tensor<1x18x18xf16>
  %m = rpe.shift_mask {resolution = array<i64: 4, 6, 6>, window = array<i64: 2, 3, 3>, shift = array<i64: 1, 1, 1>} : tensor<8x18x18xf16>
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x1x18x8xf16>, tensor<?x1x18x8xf16>, tensor<?x1x18x8xf16>)
         bias(%b : tensor<1x18x18xf16>) mask(%m : tensor<8x18x18xf16>) -> tensor<?x18x8xf16>
  return %0 : tensor<?x18x8xf16>
}

// Element-wise math without an LLVM intrinsic (erf in f64) becomes a libm
// call; GELU's erf in f32 on a row's vector takes a polynomial
// (rpe-vectorize-rows), not erff.
// LLVM-LABEL: define {{.*}} @erf_f64(
// LLVM: call double @erf(double
// LLVM-LABEL: define {{.*}} @gelu_erf(
// LLVM-NOT: call float @erff(
// LLVM: ret
func.func @erf_f64(%x: tensor<4x8xf64>) -> tensor<4x8xf64> {
  %init = tensor.empty() : tensor<4x8xf64>
  %0 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf64>) outs(%init : tensor<4x8xf64>) {
  ^bb0(%in: f64, %out: f64):
    %e = math.erf %in : f64
    linalg.yield %e : f64
  } -> tensor<4x8xf64>
  return %0 : tensor<4x8xf64>
}

func.func @gelu_erf(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %init = tensor.empty() : tensor<4x8xf32>
  %0 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %e = math.erf %in : f32
    linalg.yield %e : f32
  } -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
