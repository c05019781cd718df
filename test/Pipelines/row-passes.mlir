// The row passes in rpe-cpu-pipeline: after rpe-form-matmul (the linear
// layers are rpe.matmul by then, not rows) and before bufferization; threads
// unless the pipeline has none; off with vectorize=false.
// RUN: swin-opt %s --rpe-cpu-pipeline --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=ORDER
// RUN: swin-opt %s --rpe-cpu-pipeline=parallel=false --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=SEQ
// RUN: swin-opt %s --rpe-cpu-pipeline=vectorize=false --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=OFF
// RUN: swin-opt %s --rpe-cpu-pipeline | FileCheck %s --check-prefix=VEC
// RUN: swin-opt %s --rpe-cpu-pipeline=vectorize=false | FileCheck %s --check-prefix=SCALAR

// ORDER: rpe-form-matmul
// ORDER: func.func(
// ORDER-NEXT: rpe-fold-data-movement,
// ORDER-NEXT: rpe-fuse-elementwise,
// ORDER-NEXT: rpe-tile-rows{{{.*}}parallel=true}
// ORDER-NEXT: rpe-vectorize-rows
// ORDER: one-shot-bufferize
// ORDER: rpe-lower-matmul

// SEQ: rpe-tile-rows{{{.*}}parallel=false}

// OFF-NOT: rpe-fold-data-movement
// OFF-NOT: rpe-tile-rows
// OFF: one-shot-bufferize

// A residual add and a row's sum: the sum is a vector reduction of the row
// with the row passes, a scalar loop without.
// VEC-LABEL: llvm.func @add_and_sum
// VEC: llvm.intr.vector.reduce.fadd
// SCALAR-LABEL: llvm.func @add_and_sum
// SCALAR-NOT: llvm.intr.vector.reduce.fadd
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @add_and_sum(%x: tensor<64x32xf32>, %y: tensor<64x32xf32>) -> tensor<64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x32xf32>
  %a = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %y : tensor<64x32xf32>, tensor<64x32xf32>) outs(%e : tensor<64x32xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %0 = arith.addf %l, %r : f32
    linalg.yield %0 : f32
  } -> tensor<64x32xf32>
  %se = tensor.empty() : tensor<64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%se : tensor<64xf32>) -> tensor<64xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%a : tensor<64x32xf32>) outs(%z : tensor<64xf32>) {
  ^bb0(%in: f32, %o: f32):
    %0 = arith.addf %in, %o : f32
    linalg.yield %0 : f32
  } -> tensor<64xf32>
  return %s : tensor<64xf32>
}
