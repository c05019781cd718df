// A small module in the form torch-mlir's FX importer writes (linalg on
// tensors, a weight as a dense_resource blob, @forward marked
// llvm.emit_c_interface as swin_opt.export_mlir marks it), for swin-aot
// --input. Every public function is exported, marked or not.
// Inputs/call_module.c computes the same functions in C.
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d1)>
#map2 = affine_map<(d0, d1) -> (d0)>
#map3 = affine_map<(d0) -> (d0)>
module {
  // y = gelu(x w + b) with GELU's erf form, and the sum of each row of y.
  func.func @forward(%arg0: tensor<2x3xf32>) -> (tensor<2x4xf32>, tensor<2xf32>) attributes {llvm.emit_c_interface} {
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant 5.000000e-01 : f32
    %cst_1 = arith.constant 1.000000e+00 : f32
    %cst_2 = arith.constant 0.707106769 : f32
    %w = arith.constant dense_resource<torch_tensor_3_4_torch.float32> : tensor<3x4xf32>
    %b = arith.constant dense<[5.000000e-01, -1.000000e+00, 2.000000e+00, 2.500000e-01]> : tensor<4xf32>
    %0 = tensor.empty() : tensor<2x4xf32>
    %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = linalg.matmul ins(%arg0, %w : tensor<2x3xf32>, tensor<3x4xf32>) outs(%1 : tensor<2x4xf32>) -> tensor<2x4xf32>
    %3 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%2, %b : tensor<2x4xf32>, tensor<4xf32>) outs(%0 : tensor<2x4xf32>) {
    ^bb0(%in: f32, %in_3: f32, %out: f32):
      %s = arith.addf %in, %in_3 : f32
      %t = arith.mulf %s, %cst_2 : f32
      %e = math.erf %t : f32
      %p = arith.addf %e, %cst_1 : f32
      %h = arith.mulf %s, %cst_0 : f32
      %g = arith.mulf %h, %p : f32
      linalg.yield %g : f32
    } -> tensor<2x4xf32>
    %4 = tensor.empty() : tensor<2xf32>
    %5 = linalg.fill ins(%cst : f32) outs(%4 : tensor<2xf32>) -> tensor<2xf32>
    %6 = linalg.generic {indexing_maps = [#map, #map2], iterator_types = ["parallel", "reduction"]} ins(%3 : tensor<2x4xf32>) outs(%5 : tensor<2xf32>) {
    ^bb0(%in: f32, %out: f32):
      %a = arith.addf %in, %out : f32
      linalg.yield %a : f32
    } -> tensor<2xf32>
    return %3, %6 : tensor<2x4xf32>, tensor<2xf32>
  }
  // Other element types: r = x * y (as f64). Public, not marked.
  func.func @scale(%arg0: tensor<5xf64>, %arg1: tensor<5xi64>) -> tensor<5xf64> {
    %0 = tensor.empty() : tensor<5xf64>
    %1 = linalg.generic {indexing_maps = [#map3, #map3, #map3], iterator_types = ["parallel"]} ins(%arg0, %arg1 : tensor<5xf64>, tensor<5xi64>) outs(%0 : tensor<5xf64>) {
    ^bb0(%in: f64, %in_0: i64, %out: f64):
      %f = arith.sitofp %in_0 : i64 to f64
      %m = arith.mulf %in, %f : f64
      linalg.yield %m : f64
    } -> tensor<5xf64>
    return %1 : tensor<5xf64>
  }
  // Results the function does not compute: its argument, and one constant
  // twice.
  func.func @passthrough(%arg0: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) attributes {llvm.emit_c_interface} {
    %c = arith.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>
    return %arg0, %c, %c : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
  }
  // Private: compiled, but not exported.
  func.func private @helper(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    return %arg0 : tensor<3xf32>
  }
}

{-#
  dialect_resources: {
    builtin: {
      torch_tensor_3_4_torch.float32: "0x04000000000040C0000000C0000080BF000000000000803F0000004000004040000040C0000000C0000080BF000000000000803F"
    }
  }
#-}
