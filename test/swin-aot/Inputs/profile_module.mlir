// A small module for swin-aot --profile (module-profile.test), located as
// torch-mlir's FX importer locates ops (each op's Python stack as call
// sites, innermost frame first), but for the last op, which keeps the
// parser's location. Inputs/call_profile.c computes it in C.
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d1)>
#map2 = affine_map<(d0, d1) -> (d0)>
module {
  // y = relu(x w + b) (a linear layer: fc1); t = yᵀ; s = the sum of each
  // row of y * y.
  func.func @forward(%arg0: tensor<4x8xf32>) -> (tensor<8x4xf32>, tensor<4xf32>) {
    %cst = arith.constant 0.000000e+00 : f32
    %w = arith.constant dense<5.000000e-01> : tensor<8x8xf32>
    %b = arith.constant dense<[1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 4.0, -4.0]> : tensor<8xf32>
    %0 = tensor.empty() : tensor<4x8xf32>
    %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<4x8xf32>) -> tensor<4x8xf32> loc(#fc1)
    %2 = linalg.matmul ins(%arg0, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%1 : tensor<4x8xf32>) -> tensor<4x8xf32> loc(#fc1)
    %3 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%2, %b : tensor<4x8xf32>, tensor<8xf32>) outs(%0 : tensor<4x8xf32>) {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %s = arith.addf %in, %in_0 : f32
      %r = arith.maximumf %s, %cst : f32
      linalg.yield %r : f32
    } -> tensor<4x8xf32> loc(#fc1)
    %4 = tensor.empty() : tensor<8x4xf32>
    %t = linalg.transpose ins(%3 : tensor<4x8xf32>) outs(%4 : tensor<8x4xf32>) permutation = [1, 0] loc(#transpose)
    %5 = tensor.empty() : tensor<4xf32>
    %6 = linalg.fill ins(%cst : f32) outs(%5 : tensor<4xf32>) -> tensor<4xf32>
    %sums = linalg.generic {indexing_maps = [#map, #map2], iterator_types = ["parallel", "reduction"]} ins(%3 : tensor<4x8xf32>) outs(%6 : tensor<4xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %in : f32
      %a = arith.addf %m, %out : f32
      linalg.yield %a : f32
    } -> tensor<4xf32>
    return %t, %sums : tensor<8x4xf32>, tensor<4xf32>
  }
}
#fc1 = loc(callsite("/site-packages/torch/nn/modules/linear.py":134:0 at callsite("/site-packages/timm/layers/mlp.py":48:0 at "/site-packages/timm/models/swin_transformer.py":301:0)))
#transpose = loc(callsite("/site-packages/timm/models/swin_transformer.py":88:0 at "/site-packages/timm/models/swin_transformer.py":310:0))
