// A product whose result two consumers read: it stays a 256 KiB temporary
// that @twice mallocs and frees on every call (module-temporaries.test).
#map = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func @twice(%x: tensor<256x256xf32>, %w: tensor<256x256xf32>) -> (tensor<256x256xf32>, tensor<256x256xf32>) {
    %zero = arith.constant 0.0 : f32
    %one = arith.constant 1.0 : f32
    %two = arith.constant 2.0 : f32
    %e = tensor.empty() : tensor<256x256xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e : tensor<256x256xf32>) -> tensor<256x256xf32>
    %y = linalg.matmul ins(%x, %w : tensor<256x256xf32>, tensor<256x256xf32>) outs(%init : tensor<256x256xf32>) -> tensor<256x256xf32>
    %a = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<256x256xf32>) outs(%e : tensor<256x256xf32>) {
    ^bb0(%in: f32, %out: f32):
      %r = arith.addf %in, %one : f32
      linalg.yield %r : f32
    } -> tensor<256x256xf32>
    %e2 = tensor.empty() : tensor<256x256xf32>
    %b = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<256x256xf32>) outs(%e2 : tensor<256x256xf32>) {
    ^bb0(%in: f32, %out: f32):
      %r = arith.mulf %in, %two : f32
      linalg.yield %r : f32
    } -> tensor<256x256xf32>
    return %a, %b : tensor<256x256xf32>, tensor<256x256xf32>
  }
}
