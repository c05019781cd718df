// Parallel loops whose iterations do not split evenly over the threads,
// for swin-aot --input: a linear layer on a run-time weight (rpe.matmul's
// kernel: 49 rows x 96 columns, items of row blocks and column panels) and
// an elementwise op on 7 x 5 rows (rpe-tile-rows: a two-dimensional
// loop). Inputs/call_threads.c computes the same in C.
#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
module {
  func.func @forward(%x: tensor<49x64xf32>, %w: tensor<64x96xf32>, %r: tensor<7x5x1024xf32>) -> (tensor<49x96xf32>, tensor<7x5x1024xf32>) {
    %zero = arith.constant 0.000000e+00 : f32
    %two = arith.constant 2.000000e+00 : f32
    %one = arith.constant 1.000000e+00 : f32
    %0 = tensor.empty() : tensor<49x96xf32>
    %1 = linalg.fill ins(%zero : f32) outs(%0 : tensor<49x96xf32>) -> tensor<49x96xf32>
    %2 = linalg.matmul ins(%x, %w : tensor<49x64xf32>, tensor<64x96xf32>) outs(%1 : tensor<49x96xf32>) -> tensor<49x96xf32>
    %3 = tensor.empty() : tensor<7x5x1024xf32>
    %4 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%r : tensor<7x5x1024xf32>) outs(%3 : tensor<7x5x1024xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %two : f32
      %a = arith.addf %m, %one : f32
      linalg.yield %a : f32
    } -> tensor<7x5x1024xf32>
    return %2, %4 : tensor<49x96xf32>, tensor<7x5x1024xf32>
  }
}
