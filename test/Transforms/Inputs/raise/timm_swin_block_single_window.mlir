#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>
#map2 = affine_map<(d0, d1, d2, d3) -> (d3)>
#map3 = affine_map<(d0, d1) -> (d1)>
#map4 = affine_map<(d0, d1) -> (d0, d1)>
#map5 = affine_map<(d0, d1) -> (d0)>
#map6 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#map7 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map8 = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
#map9 = affine_map<(d0, d1, d2) -> (d2)>
module {
  func.func @forward(%arg0: tensor<1x4x4x16xf32>) -> tensor<1x4x4x16xf32> attributes {llvm.emit_c_interface} {
    %c0_i64 = arith.constant 0 : i64
    %cst = arith.constant 0.000000e+00 : f64
    %cst_0 = arith.constant 0.000000e+00 : f32
    %c49_i64 = arith.constant 49 : i64
    %cst_1 = arith.constant 0xFF800000 : f32
    %cst_2 = arith.constant 1.000000e+00 : f32
    %cst_3 = arith.constant 5.000000e-01 : f32
    %cst_4 = arith.constant dense_resource<torch_tensor_16_torch.float32_5> : tensor<16xf32>
    %cst_5 = arith.constant dense_resource<torch_tensor_16_64_torch.float32> : tensor<16x64xf32>
    %cst_6 = arith.constant dense_resource<torch_tensor_64_torch.float32> : tensor<64xf32>
    %cst_7 = arith.constant dense_resource<torch_tensor_64_16_torch.float32> : tensor<64x16xf32>
    %cst_8 = arith.constant dense_resource<torch_tensor_16_torch.float32_4> : tensor<16xf32>
    %cst_9 = arith.constant dense_resource<torch_tensor_16_torch.float32_3> : tensor<16xf32>
    %cst_10 = arith.constant dense_resource<torch_tensor_16_torch.float32_2> : tensor<16xf32>
    %cst_11 = arith.constant dense_resource<torch_tensor_16_16_torch.float32> : tensor<16x16xf32>
    %cst_12 = arith.constant dense_resource<torch_tensor_49_2_torch.float32> : tensor<49x2xf32>
    %cst_13 = arith.constant 0.35355339059327379 : f64
    %cst_14 = arith.constant dense_resource<torch_tensor_48_torch.float32> : tensor<48xf32>
    %cst_15 = arith.constant dense_resource<torch_tensor_48_16_torch.float32> : tensor<48x16xf32>
    %cst_16 = arith.constant dense_resource<torch_tensor_16_torch.float32_1> : tensor<16xf32>
    %cst_17 = arith.constant dense_resource<torch_tensor_16_torch.float32> : tensor<16xf32>
    %cst_18 = arith.constant 1.000000e-05 : f64
    %cst_19 = arith.constant 1.600000e+01 : f64
    %cst_20 = arith.constant 1.600000e+01 : f32
    %cst_21 = arith.constant 1.41421354 : f32
    %cst_22 = arith.constant dense_resource<torch_tensor_16_16_torch.int64> : tensor<16x16xi64>
    %0 = tensor.empty() : tensor<1x4x4x16xf64>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg0 : tensor<1x4x4x16xf32>) outs(%0 : tensor<1x4x4x16xf64>) {
    ^bb0(%in: f32, %out: f64):
      %95 = arith.extf %in : f32 to f64
      linalg.yield %95 : f64
    } -> tensor<1x4x4x16xf64>
    %2 = tensor.empty() : tensor<1x4x4x1xf64>
    %3 = linalg.fill ins(%cst : f64) outs(%2 : tensor<1x4x4x1xf64>) -> tensor<1x4x4x1xf64>
    %4 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%1 : tensor<1x4x4x16xf64>) outs(%3 : tensor<1x4x4x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %95 = arith.addf %in, %out : f64
      linalg.yield %95 : f64
    } -> tensor<1x4x4x1xf64>
    %5 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%4 : tensor<1x4x4x1xf64>) outs(%2 : tensor<1x4x4x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %95 = arith.divf %in, %cst_19 : f64
      linalg.yield %95 : f64
    } -> tensor<1x4x4x1xf64>
    %6 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%1, %5 : tensor<1x4x4x16xf64>, tensor<1x4x4x1xf64>) outs(%0 : tensor<1x4x4x16xf64>) {
    ^bb0(%in: f64, %in_56: f64, %out: f64):
      %95 = arith.subf %in, %in_56 : f64
      linalg.yield %95 : f64
    } -> tensor<1x4x4x16xf64>
    %7 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%6, %6 : tensor<1x4x4x16xf64>, tensor<1x4x4x16xf64>) outs(%0 : tensor<1x4x4x16xf64>) {
    ^bb0(%in: f64, %in_56: f64, %out: f64):
      %95 = arith.mulf %in, %in_56 : f64
      linalg.yield %95 : f64
    } -> tensor<1x4x4x16xf64>
    %8 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%7 : tensor<1x4x4x16xf64>) outs(%3 : tensor<1x4x4x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %95 = arith.addf %in, %out : f64
      linalg.yield %95 : f64
    } -> tensor<1x4x4x1xf64>
    %9 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%8 : tensor<1x4x4x1xf64>) outs(%2 : tensor<1x4x4x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %95 = arith.divf %in, %cst_19 : f64
      linalg.yield %95 : f64
    } -> tensor<1x4x4x1xf64>
    %10 = tensor.empty() : tensor<1x4x4x1xf32>
    %11 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%9 : tensor<1x4x4x1xf64>) outs(%10 : tensor<1x4x4x1xf32>) {
    ^bb0(%in: f64, %out: f32):
      %95 = arith.truncf %in : f64 to f32
      linalg.yield %95 : f32
    } -> tensor<1x4x4x1xf32>
    %12 = linalg.fill ins(%cst_0 : f32) outs(%10 : tensor<1x4x4x1xf32>) -> tensor<1x4x4x1xf32>
    %13 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%arg0 : tensor<1x4x4x16xf32>) outs(%12 : tensor<1x4x4x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %95 = arith.addf %in, %out : f32
      linalg.yield %95 : f32
    } -> tensor<1x4x4x1xf32>
    %14 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%13 : tensor<1x4x4x1xf32>) outs(%10 : tensor<1x4x4x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %95 = arith.divf %in, %cst_20 : f32
      linalg.yield %95 : f32
    } -> tensor<1x4x4x1xf32>
    %15 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%11 : tensor<1x4x4x1xf32>) outs(%10 : tensor<1x4x4x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %95 = arith.truncf %cst_18 : f64 to f32
      %96 = arith.addf %in, %95 : f32
      linalg.yield %96 : f32
    } -> tensor<1x4x4x1xf32>
    %16 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%15 : tensor<1x4x4x1xf32>) outs(%10 : tensor<1x4x4x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %95 = math.rsqrt %in : f32
      linalg.yield %95 : f32
    } -> tensor<1x4x4x1xf32>
    %17 = tensor.empty() : tensor<1x4x4x16xf32>
    %18 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg0, %14 : tensor<1x4x4x16xf32>, tensor<1x4x4x1xf32>) outs(%17 : tensor<1x4x4x16xf32>) {
    ^bb0(%in: f32, %in_56: f32, %out: f32):
      %95 = arith.subf %in, %in_56 : f32
      linalg.yield %95 : f32
    } -> tensor<1x4x4x16xf32>
    %19 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%18, %16 : tensor<1x4x4x16xf32>, tensor<1x4x4x1xf32>) outs(%17 : tensor<1x4x4x16xf32>) {
    ^bb0(%in: f32, %in_56: f32, %out: f32):
      %95 = arith.mulf %in, %in_56 : f32
      linalg.yield %95 : f32
    } -> tensor<1x4x4x16xf32>
    %20 = linalg.generic {indexing_maps = [#map, #map2, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%19, %cst_17 : tensor<1x4x4x16xf32>, tensor<16xf32>) outs(%17 : tensor<1x4x4x16xf32>) {
    ^bb0(%in: f32, %in_56: f32, %out: f32):
      %95 = arith.mulf %in, %in_56 : f32
      linalg.yield %95 : f32
    } -> tensor<1x4x4x16xf32>
    %21 = linalg.generic {indexing_maps = [#map, #map2, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%20, %cst_16 : tensor<1x4x4x16xf32>, tensor<16xf32>) outs(%17 : tensor<1x4x4x16xf32>) {
    ^bb0(%in: f32, %in_56: f32, %out: f32):
      %95 = arith.addf %in, %in_56 : f32
      linalg.yield %95 : f32
    } -> tensor<1x4x4x16xf32>
    %expanded = tensor.expand_shape %21 [[0], [1, 2], [3, 4], [5]] output_shape [1, 1, 4, 1, 4, 16] : tensor<1x4x4x16xf32> into tensor<1x1x4x1x4x16xf32>
    %22 = tensor.empty() : tensor<1x1x1x4x4x16xf32>
    %transposed = linalg.transpose ins(%expanded : tensor<1x1x4x1x4x16xf32>) outs(%22 : tensor<1x1x1x4x4x16xf32>) permutation = [0, 1, 3, 2, 4, 5] 
    %collapsed = tensor.collapse_shape %transposed [[0, 1, 2, 3, 4], [5]] : tensor<1x1x1x4x4x16xf32> into tensor<16x16xf32>
    %23 = tensor.empty() : tensor<16x48xf32>
    %transposed_23 = linalg.transpose ins(%cst_15 : tensor<48x16xf32>) outs(%23 : tensor<16x48xf32>) permutation = [1, 0] 
    %24 = linalg.fill ins(%cst_0 : f32) outs(%23 : tensor<16x48xf32>) -> tensor<16x48xf32>
    %25 = linalg.matmul ins(%collapsed, %transposed_23 : tensor<16x16xf32>, tensor<16x48xf32>) outs(%24 : tensor<16x48xf32>) -> tensor<16x48xf32>
    %26 = linalg.generic {indexing_maps = [#map3, #map4], iterator_types = ["parallel", "parallel"]} ins(%cst_14 : tensor<48xf32>) outs(%23 : tensor<16x48xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<16x48xf32>
    %27 = linalg.generic {indexing_maps = [#map4, #map4, #map4], iterator_types = ["parallel", "parallel"]} ins(%25, %26 : tensor<16x48xf32>, tensor<16x48xf32>) outs(%23 : tensor<16x48xf32>) {
    ^bb0(%in: f32, %in_56: f32, %out: f32):
      %95 = arith.addf %in, %in_56 : f32
      linalg.yield %95 : f32
    } -> tensor<16x48xf32>
    %expanded_24 = tensor.expand_shape %27 [[0, 1], [2, 3, 4]] output_shape [1, 16, 3, 2, 8] : tensor<16x48xf32> into tensor<1x16x3x2x8xf32>
    %28 = tensor.empty() : tensor<3x1x2x16x8xf32>
    %transposed_25 = linalg.transpose ins(%expanded_24 : tensor<1x16x3x2x8xf32>) outs(%28 : tensor<3x1x2x16x8xf32>) permutation = [2, 0, 3, 1, 4] 
    %extracted_slice = tensor.extract_slice %transposed_25[0, 0, 0, 0, 0] [1, 1, 2, 16, 8] [1, 1, 1, 1, 1] : tensor<3x1x2x16x8xf32> to tensor<1x1x2x16x8xf32>
    %extracted_slice_26 = tensor.extract_slice %transposed_25[1, 0, 0, 0, 0] [1, 1, 2, 16, 8] [1, 1, 1, 1, 1] : tensor<3x1x2x16x8xf32> to tensor<1x1x2x16x8xf32>
    %extracted_slice_27 = tensor.extract_slice %transposed_25[2, 0, 0, 0, 0] [1, 1, 2, 16, 8] [1, 1, 1, 1, 1] : tensor<3x1x2x16x8xf32> to tensor<1x1x2x16x8xf32>
    %collapsed_28 = tensor.collapse_shape %extracted_slice [[0, 1], [2], [3], [4]] : tensor<1x1x2x16x8xf32> into tensor<1x2x16x8xf32>
    %collapsed_29 = tensor.collapse_shape %extracted_slice_26 [[0, 1], [2], [3], [4]] : tensor<1x1x2x16x8xf32> into tensor<1x2x16x8xf32>
    %29 = tensor.empty() : tensor<1x2x16x8xf32>
    %30 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%collapsed_28 : tensor<1x2x16x8xf32>) outs(%29 : tensor<1x2x16x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      %95 = arith.truncf %cst_13 : f64 to f32
      %96 = arith.mulf %in, %95 : f32
      linalg.yield %96 : f32
    } -> tensor<1x2x16x8xf32>
    %31 = tensor.empty() : tensor<1x2x8x16xf32>
    %transposed_30 = linalg.transpose ins(%collapsed_29 : tensor<1x2x16x8xf32>) outs(%31 : tensor<1x2x8x16xf32>) permutation = [0, 1, 3, 2] 
    %collapsed_31 = tensor.collapse_shape %30 [[0, 1], [2], [3]] : tensor<1x2x16x8xf32> into tensor<2x16x8xf32>
    %collapsed_32 = tensor.collapse_shape %transposed_30 [[0, 1], [2], [3]] : tensor<1x2x8x16xf32> into tensor<2x8x16xf32>
    %32 = tensor.empty() : tensor<2x16x16xf32>
    %33 = linalg.fill ins(%cst_0 : f32) outs(%32 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
    %34 = linalg.batch_matmul ins(%collapsed_31, %collapsed_32 : tensor<2x16x8xf32>, tensor<2x8x16xf32>) outs(%33 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
    %expanded_33 = tensor.expand_shape %34 [[0, 1], [2], [3]] output_shape [1, 2, 16, 16] : tensor<2x16x16xf32> into tensor<1x2x16x16xf32>
    %collapsed_34 = tensor.collapse_shape %cst_22 [[0, 1]] : tensor<16x16xi64> into tensor<256xi64>
    %35 = tensor.empty() : tensor<256x2xf32>
    %36 = linalg.generic {indexing_maps = [#map5, #map4], iterator_types = ["parallel", "parallel"]} ins(%collapsed_34 : tensor<256xi64>) outs(%35 : tensor<256x2xf32>) {
    ^bb0(%in: i64, %out: f32):
      %95 = arith.cmpi slt, %in, %c0_i64 : i64
      %96 = arith.addi %in, %c49_i64 : i64
      %97 = arith.select %95, %96, %in : i64
      %98 = arith.index_cast %97 : i64 to index
      %99 = linalg.index 1 : index
      %extracted = tensor.extract %cst_12[%98, %99] : tensor<49x2xf32>
      linalg.yield %extracted : f32
    } -> tensor<256x2xf32>
    %expanded_35 = tensor.expand_shape %36 [[0, 1], [2]] output_shape [16, 16, 2] : tensor<256x2xf32> into tensor<16x16x2xf32>
    %transposed_36 = linalg.transpose ins(%expanded_35 : tensor<16x16x2xf32>) outs(%32 : tensor<2x16x16xf32>) permutation = [2, 0, 1] 
    %expanded_37 = tensor.expand_shape %transposed_36 [[0, 1], [2], [3]] output_shape [1, 2, 16, 16] : tensor<2x16x16xf32> into tensor<1x2x16x16xf32>
    %37 = tensor.empty() : tensor<1x2x16x16xf32>
    %38 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded_33, %expanded_37 : tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>) outs(%37 : tensor<1x2x16x16xf32>) {
    ^bb0(%in: f32, %in_56: f32, %out: f32):
      %95 = arith.addf %in, %in_56 : f32
      linalg.yield %95 : f32
    } -> tensor<1x2x16x16xf32>
    %39 = tensor.empty() : tensor<1x2x16xi64>
    %40 = linalg.fill ins(%c0_i64 : i64) outs(%39 : tensor<1x2x16xi64>) -> tensor<1x2x16xi64>
    %41 = tensor.empty() : tensor<1x2x16xf32>
    %42 = linalg.fill ins(%cst_1 : f32) outs(%41 : tensor<1x2x16xf32>) -> tensor<1x2x16xf32>
    %43:2 = linalg.generic {indexing_maps = [#map, #map6, #map6], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%38 : tensor<1x2x16x16xf32>) outs(%42, %40 : tensor<1x2x16xf32>, tensor<1x2x16xi64>) {
    ^bb0(%in: f32, %out: f32, %out_56: i64):
      %95 = linalg.index 3 : index
      %96 = arith.index_cast %95 : index to i64
      %97 = arith.maximumf %in, %out : f32
      %98 = arith.cmpf ogt, %in, %out : f32
      %99 = arith.select %98, %96, %out_56 : i64
      linalg.yield %97, %99 : f32, i64
    } -> (tensor<1x2x16xf32>, tensor<1x2x16xi64>)
    %expanded_38 = tensor.expand_shape %43#0 [[0], [1], [2, 3]] output_shape [1, 2, 16, 1] : tensor<1x2x16xf32> into tensor<1x2x16x1xf32>
    %44 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%38, %expanded_38 : tensor<1x2x16x16xf32>, tensor<1x2x16x1xf32>) outs(%37 : tensor<1x2x16x16xf32>) {
    ^bb0(%in: f32, %in_56: f32, %out: f32):
      %95 = arith.subf %in, %in_56 : f32
      linalg.yield %95 : f32
    } -> tensor<1x2x16x16xf32>
    %45 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%44 : tensor<1x2x16x16xf32>) outs(%37 : tensor<1x2x16x16xf32>) {
    ^bb0(%in: f32, %out: f32):
      %95 = math.exp %in : f32
      linalg.yield %95 : f32
    } -> tensor<1x2x16x16xf32>
    %46 = tensor.empty() : tensor<1x2x16x1xf32>
    %47 = linalg.fill ins(%cst_0 : f32) outs(%46 : tensor<1x2x16x1xf32>) -> tensor<1x2x16x1xf32>
    %48 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%45 : tensor<1x2x16x16xf32>) outs(%47 : tensor<1x2x16x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %95 = arith.addf %in, %out : f32
      linalg.yield %95 : f32
    } -> tensor<1x2x16x1xf32>
    %49 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%45, %48 : tensor<1x2x16x16xf32>, tensor<1x2x16x1xf32>) outs(%37 : tensor<1x2x16x16xf32>) {
    ^bb0(%in: f32, %in_56: f32, %out: f32):
      %95 = arith.divf %in, %in_56 : f32
      linalg.yield %95 : f32
    } -> tensor<1x2x16x16xf32>
    %collapsed_39 = tensor.collapse_shape %49 [[0, 1], [2], [3]] : tensor<1x2x16x16xf32> into tensor<2x16x16xf32>
    %collapsed_40 = tensor.collapse_shape %extracted_slice_27 [[0, 1, 2], [3], [4]] : tensor<1x1x2x16x8xf32> into tensor<2x16x8xf32>
    %50 = tensor.empty() : tensor<2x16x8xf32>
    %51 = linalg.fill ins(%cst_0 : f32) outs(%50 : tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
    %52 = linalg.batch_matmul ins(%collapsed_39, %collapsed_40 : tensor<2x16x16xf32>, tensor<2x16x8xf32>) outs(%51 : tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
    %expanded_41 = tensor.expand_shape %52 [[0, 1], [2], [3]] output_shape [1, 2, 16, 8] : tensor<2x16x8xf32> into tensor<1x2x16x8xf32>
    %53 = tensor.empty() : tensor<1x16x2x8xf32>
    %transposed_42 = linalg.transpose ins(%expanded_41 : tensor<1x2x16x8xf32>) outs(%53 : tensor<1x16x2x8xf32>) permutation = [0, 2, 1, 3] 
    %collapsed_43 = tensor.collapse_shape %transposed_42 [[0, 1], [2, 3]] : tensor<1x16x2x8xf32> into tensor<16x16xf32>
    %54 = tensor.empty() : tensor<16x16xf32>
    %transposed_44 = linalg.transpose ins(%cst_11 : tensor<16x16xf32>) outs(%54 : tensor<16x16xf32>) permutation = [1, 0] 
    %55 = linalg.fill ins(%cst_0 : f32) outs(%54 : tensor<16x16xf32>) -> tensor<16x16xf32>
    %56 = linalg.matmul ins(%collapsed_43, %transposed_44 : tensor<16x16xf32>, tensor<16x16xf32>) outs(%55 : tensor<16x16xf32>) -> tensor<16x16xf32>
    %57 = linalg.generic {indexing_maps = [#map3, #map4], iterator_types = ["parallel", "parallel"]} ins(%cst_10 : tensor<16xf32>) outs(%54 : tensor<16x16xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<16x16xf32>
    %58 = linalg.generic {indexing_maps = [#map4, #map4, #map4], iterator_types = ["parallel", "parallel"]} ins(%56, %57 : tensor<16x16xf32>, tensor<16x16xf32>) outs(%54 : tensor<16x16xf32>) {
    ^bb0(%in: f32, %in_56: f32, %out: f32):
      %95 = arith.addf %in, %in_56 : f32
      linalg.yield %95 : f32
    } -> tensor<16x16xf32>
    %expanded_45 = tensor.expand_shape %58 [[0, 1, 2, 3, 4], [5]] output_shape [1, 1, 1, 4, 4, 16] : tensor<16x16xf32> into tensor<1x1x1x4x4x16xf32>
    %59 = tensor.empty() : tensor<1x1x4x1x4x16xf32>
    %transposed_46 = linalg.transpose ins(%expanded_45 : tensor<1x1x1x4x4x16xf32>) outs(%59 : tensor<1x1x4x1x4x16xf32>) permutation = [0, 1, 3, 2, 4, 5] 
    %collapsed_47 = tensor.collapse_shape %transposed_46 [[0], [1, 2], [3, 4], [5]] : tensor<1x1x4x1x4x16xf32> into tensor<1x4x4x16xf32>
    %60 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg0, %collapsed_47 : tensor<1x4x4x16xf32>, tensor<1x4x4x16xf32>) outs(%17 : tensor<1x4x4x16xf32>) {
    ^bb0(%in: f32, %in_56: f32, %out: f32):
      %95 = arith.addf %in, %in_56 : f32
      linalg.yield %95 : f32
    } -> tensor<1x4x4x16xf32>
    %collapsed_48 = tensor.collapse_shape %60 [[0], [1, 2], [3]] : tensor<1x4x4x16xf32> into tensor<1x16x16xf32>
    %61 = tensor.empty() : tensor<1x16x16xf64>
    %62 = linalg.generic {indexing_maps = [#map7, #map7], iterator_types = ["parallel", "parallel", "parallel"]} ins(%collapsed_48 : tensor<1x16x16xf32>) outs(%61 : tensor<1x16x16xf64>) {
    ^bb0(%in: f32, %out: f64):
      %95 = arith.extf %in : f32 to f64
      linalg.yield %95 : f64
    } -> tensor<1x16x16xf64>
    %63 = tensor.empty() : tensor<1x16x1xf64>
    %64 = linalg.fill ins(%cst : f64) outs(%63 : tensor<1x16x1xf64>) -> tensor<1x16x1xf64>
    %65 = linalg.generic {indexing_maps = [#map7, #map8], iterator_types = ["parallel", "parallel", "reduction"]} ins(%62 : tensor<1x16x16xf64>) outs(%64 : tensor<1x16x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %95 = arith.addf %in, %out : f64
      linalg.yield %95 : f64
    } -> tensor<1x16x1xf64>
    %66 = linalg.generic {indexing_maps = [#map7, #map7], iterator_types = ["parallel", "parallel", "parallel"]} ins(%65 : tensor<1x16x1xf64>) outs(%63 : tensor<1x16x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %95 = arith.divf %in, %cst_19 : f64
      linalg.yield %95 : f64
    } -> tensor<1x16x1xf64>
    %67 = linalg.generic {indexing_maps = [#map7, #map8, #map7], iterator_types = ["parallel", "parallel", "parallel"]} ins(%62, %66 : tensor<1x16x16xf64>, tensor<1x16x1xf64>) outs(%61 : tensor<1x16x16xf64>) {
    ^bb0(%in: f64, %in_56: f64, %out: f64):
      %95 = arith.subf %in, %in_56 : f64
      linalg.yield %95 : f64
    } -> tensor<1x16x16xf64>
    %68 = linalg.generic {indexing_maps = [#map7, #map7, #map7], iterator_types = ["parallel", "parallel", "parallel"]} ins(%67, %67 : tensor<1x16x16xf64>, tensor<1x16x16xf64>) outs(%61 : tensor<1x16x16xf64>) {
    ^bb0(%in: f64, %in_56: f64, %out: f64):
      %95 = arith.mulf %in, %in_56 : f64
      linalg.yield %95 : f64
    } -> tensor<1x16x16xf64>
    %69 = linalg.generic {indexing_maps = [#map7, #map8], iterator_types = ["parallel", "parallel", "reduction"]} ins(%68 : tensor<1x16x16xf64>) outs(%64 : tensor<1x16x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %95 = arith.addf %in, %out : f64
      linalg.yield %95 : f64
    } -> tensor<1x16x1xf64>
    %70 = linalg.generic {indexing_maps = [#map7, #map7], iterator_types = ["parallel", "parallel", "parallel"]} ins(%69 : tensor<1x16x1xf64>) outs(%63 : tensor<1x16x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %95 = arith.divf %in, %cst_19 : f64
      linalg.yield %95 : f64
    } -> tensor<1x16x1xf64>
    %71 = tensor.empty() : tensor<1x16x1xf32>
    %72 = linalg.generic {indexing_maps = [#map7, #map7], iterator_types = ["parallel", "parallel", "parallel"]} ins(%70 : tensor<1x16x1xf64>) outs(%71 : tensor<1x16x1xf32>) {
    ^bb0(%in: f64, %out: f32):
      %95 = arith.truncf %in : f64 to f32
      linalg.yield %95 : f32
    } -> tensor<1x16x1xf32>
    %73 = linalg.fill ins(%cst_0 : f32) outs(%71 : tensor<1x16x1xf32>) -> tensor<1x16x1xf32>
    %74 = linalg.generic {indexing_maps = [#map7, #map8], iterator_types = ["parallel", "parallel", "reduction"]} ins(%collapsed_48 : tensor<1x16x16xf32>) outs(%73 : tensor<1x16x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %95 = arith.addf %in, %out : f32
      linalg.yield %95 : f32
    } -> tensor<1x16x1xf32>
    %75 = linalg.generic {indexing_maps = [#map7, #map7], iterator_types = ["parallel", "parallel", "parallel"]} ins(%74 : tensor<1x16x1xf32>) outs(%71 : tensor<1x16x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %95 = arith.divf %in, %cst_20 : f32
      linalg.yield %95 : f32
    } -> tensor<1x16x1xf32>
    %76 = linalg.generic {indexing_maps = [#map7, #map7], iterator_types = ["parallel", "parallel", "parallel"]} ins(%72 : tensor<1x16x1xf32>) outs(%71 : tensor<1x16x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %95 = arith.truncf %cst_18 : f64 to f32
      %96 = arith.addf %in, %95 : f32
      linalg.yield %96 : f32
    } -> tensor<1x16x1xf32>
    %77 = linalg.generic {indexing_maps = [#map7, #map7], iterator_types = ["parallel", "parallel", "parallel"]} ins(%76 : tensor<1x16x1xf32>) outs(%71 : tensor<1x16x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %95 = math.rsqrt %in : f32
      linalg.yield %95 : f32
    } -> tensor<1x16x1xf32>
    %78 = tensor.empty() : tensor<1x16x16xf32>
    %79 = linalg.generic {indexing_maps = [#map7, #map8, #map7], iterator_types = ["parallel", "parallel", "parallel"]} ins(%collapsed_48, %75 : tensor<1x16x16xf32>, tensor<1x16x1xf32>) outs(%78 : tensor<1x16x16xf32>) {
    ^bb0(%in: f32, %in_56: f32, %out: f32):
      %95 = arith.subf %in, %in_56 : f32
      linalg.yield %95 : f32
    } -> tensor<1x16x16xf32>
    %80 = linalg.generic {indexing_maps = [#map7, #map8, #map7], iterator_types = ["parallel", "parallel", "parallel"]} ins(%79, %77 : tensor<1x16x16xf32>, tensor<1x16x1xf32>) outs(%78 : tensor<1x16x16xf32>) {
    ^bb0(%in: f32, %in_56: f32, %out: f32):
      %95 = arith.mulf %in, %in_56 : f32
      linalg.yield %95 : f32
    } -> tensor<1x16x16xf32>
    %81 = linalg.generic {indexing_maps = [#map7, #map9, #map7], iterator_types = ["parallel", "parallel", "parallel"]} ins(%80, %cst_9 : tensor<1x16x16xf32>, tensor<16xf32>) outs(%78 : tensor<1x16x16xf32>) {
    ^bb0(%in: f32, %in_56: f32, %out: f32):
      %95 = arith.mulf %in, %in_56 : f32
      linalg.yield %95 : f32
    } -> tensor<1x16x16xf32>
    %82 = linalg.generic {indexing_maps = [#map7, #map9, #map7], iterator_types = ["parallel", "parallel", "parallel"]} ins(%81, %cst_8 : tensor<1x16x16xf32>, tensor<16xf32>) outs(%78 : tensor<1x16x16xf32>) {
    ^bb0(%in: f32, %in_56: f32, %out: f32):
      %95 = arith.addf %in, %in_56 : f32
      linalg.yield %95 : f32
    } -> tensor<1x16x16xf32>
    %collapsed_49 = tensor.collapse_shape %82 [[0, 1], [2]] : tensor<1x16x16xf32> into tensor<16x16xf32>
    %83 = tensor.empty() : tensor<16x64xf32>
    %transposed_50 = linalg.transpose ins(%cst_7 : tensor<64x16xf32>) outs(%83 : tensor<16x64xf32>) permutation = [1, 0] 
    %84 = linalg.fill ins(%cst_0 : f32) outs(%83 : tensor<16x64xf32>) -> tensor<16x64xf32>
    %85 = linalg.matmul ins(%collapsed_49, %transposed_50 : tensor<16x16xf32>, tensor<16x64xf32>) outs(%84 : tensor<16x64xf32>) -> tensor<16x64xf32>
    %86 = linalg.generic {indexing_maps = [#map3, #map4], iterator_types = ["parallel", "parallel"]} ins(%cst_6 : tensor<64xf32>) outs(%83 : tensor<16x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<16x64xf32>
    %87 = linalg.generic {indexing_maps = [#map4, #map4, #map4], iterator_types = ["parallel", "parallel"]} ins(%85, %86 : tensor<16x64xf32>, tensor<16x64xf32>) outs(%83 : tensor<16x64xf32>) {
    ^bb0(%in: f32, %in_56: f32, %out: f32):
      %95 = arith.addf %in, %in_56 : f32
      linalg.yield %95 : f32
    } -> tensor<16x64xf32>
    %expanded_51 = tensor.expand_shape %87 [[0, 1], [2]] output_shape [1, 16, 64] : tensor<16x64xf32> into tensor<1x16x64xf32>
    %88 = tensor.empty() : tensor<1x16x64xf32>
    %89 = linalg.generic {indexing_maps = [#map7, #map7], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expanded_51 : tensor<1x16x64xf32>) outs(%88 : tensor<1x16x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %95 = arith.divf %in, %cst_21 : f32
      %96 = math.erf %95 : f32
      %97 = arith.addf %96, %cst_2 : f32
      %98 = arith.mulf %97, %cst_3 : f32
      %99 = arith.mulf %in, %98 : f32
      linalg.yield %99 : f32
    } -> tensor<1x16x64xf32>
    %collapsed_52 = tensor.collapse_shape %89 [[0, 1], [2]] : tensor<1x16x64xf32> into tensor<16x64xf32>
    %90 = tensor.empty() : tensor<64x16xf32>
    %transposed_53 = linalg.transpose ins(%cst_5 : tensor<16x64xf32>) outs(%90 : tensor<64x16xf32>) permutation = [1, 0] 
    %91 = linalg.matmul ins(%collapsed_52, %transposed_53 : tensor<16x64xf32>, tensor<64x16xf32>) outs(%55 : tensor<16x16xf32>) -> tensor<16x16xf32>
    %92 = linalg.generic {indexing_maps = [#map3, #map4], iterator_types = ["parallel", "parallel"]} ins(%cst_4 : tensor<16xf32>) outs(%54 : tensor<16x16xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<16x16xf32>
    %93 = linalg.generic {indexing_maps = [#map4, #map4, #map4], iterator_types = ["parallel", "parallel"]} ins(%91, %92 : tensor<16x16xf32>, tensor<16x16xf32>) outs(%54 : tensor<16x16xf32>) {
    ^bb0(%in: f32, %in_56: f32, %out: f32):
      %95 = arith.addf %in, %in_56 : f32
      linalg.yield %95 : f32
    } -> tensor<16x16xf32>
    %expanded_54 = tensor.expand_shape %93 [[0, 1], [2]] output_shape [1, 16, 16] : tensor<16x16xf32> into tensor<1x16x16xf32>
    %94 = linalg.generic {indexing_maps = [#map7, #map7, #map7], iterator_types = ["parallel", "parallel", "parallel"]} ins(%collapsed_48, %expanded_54 : tensor<1x16x16xf32>, tensor<1x16x16xf32>) outs(%78 : tensor<1x16x16xf32>) {
    ^bb0(%in: f32, %in_56: f32, %out: f32):
      %95 = arith.addf %in, %in_56 : f32
      linalg.yield %95 : f32
    } -> tensor<1x16x16xf32>
    %expanded_55 = tensor.expand_shape %94 [[0], [1, 2], [3]] output_shape [1, 4, 4, 16] : tensor<1x16x16xf32> into tensor<1x4x4x16xf32>
    return %expanded_55 : tensor<1x4x4x16xf32>
  }
}

{-#
  dialect_resources: {
    builtin: {
      torch_tensor_16_torch.float32_5: "0x04000000E015E7BD148EC33DD88FBBBC006964BAA2489DBD7A338BBD30E5843CE037D33DDCAD80BDE085413CA0BBE73D3E6EE53DB032C8BC5EF0EF3D54743A3DC227E93D",
      torch_tensor_16_64_torch.float32: "0x0400000080CF343BB8CE923DB8DADFBC6CB196BD9881433D7099083D7CF1423D407963BCA8E387BCE0C522BC6C01073D9E71C4BD729BEEBD9C963F3D34298CBD90482CBCE8F00D3D28A08F3C9208A53DC03A863C6084FD3C805137BC0827973CECBC3B3D9CA5AE3D2690F2BDC44755BDF8B7E5BDA8214CBD680D9C3D7C8FF2BD7261E5BDDA3A943D702D97BD0A1ABB3D9C881F3D3C85003D9E5ECB3DAE21EDBDB277BB3D580A263D4E8CABBDC826F93CB4B10EBD08834DBD30CE5DBCDC6371BD16DBDF3DFA56DC3DD0795ABCCC03E3BD2093FABBF04F073CA41DAB3D00C9833BFC03153D04DA073D3A4191BD1CCB9EBD1ECEE4BD00A980BADC941E3D609F11BC947DF83D4057C3BC020CA7BDF8AAAA3C542F10BD28618CBC1A0DF83D800C6BBB6EA0DF3D28C0883CA4793EBD54B0BB3D32D391BD2086873B282BE63C98CD653D6A33ECBDA0EEC83B209104BD56FBA53D60422C3D44354D3D2AEC993D1041E5BCE03603BC7E60CD3D4E55CEBDC6F3B0BD50D2153C3CD14ABD0095EA3BE223E23D60696DBC4246DABD64BE68BD161AEB3D40F6E0BC2C8060BDFC76663DE0887D3CC0B5E1BD8231D53DF228903DEA82DE3D040D603D709F2CBD182427BD6420783DA081C6BC40C2C83C9C0FF8BDD0177DBD602E3E3DA0EDC9BBF42476BDEC4CDFBD0EB4A23D60E2CDBC4887FBBD1CFCF63D2027793DA41F99BD3AD6BABD4660F73D00D1083AD2F699BD7A50933D584CD5BC504B0C3CE85B85BDA6D4D8BDF203AABD60E060BCA254B9BDDC50FC3D8053B13A880244BD4C5A4A3D2CF6E2BD26F182BDC84E403D7E83D9BDAC2E7F3D20252C3C6474D5BD0A10FEBD64D1213D9401723D40B4CCBC905EE2BD708B93BD20AB593C4004953B680F033D5810B53C80B2D6BB1619873DD052F83D4833D53DFC9EE83D3CCD2CBDD0C02EBDF08262BC7C53173D283F4F3D008D36BC6C5BA5BDEA26C1BDBA74F63D78A709BDB0698ABC68E49CBD3CD47DBD38E9E03CC0A5573DD8674ABDF8733CBDF2CACA3D22D883BD6AFFBEBD90C29FBC6698F33DA0CFDE3C487D8D3C60007FBCB6F89F3DF4C57DBD2092AD3DF8E9F13C00B4633C68F88C3CB4E19DBD0822BE3D0674863DDA38C8BD5E5BEEBDC0CD03BDFC12AA3DE4127CBD3045ED3DEAB580BDD43EE7BDF038613D4AB69ABDF06BA1BCE0B11FBD80BB22BC4E12DFBDB4CDEABDD0185C3DF01168BC506D9ABD40B050BBD6A8E9BD10E8073D7C26733DE645F83D6A8ED0BDB05578BC0EEE8A3D2C9DEA3D0823B6BDA894593DEC62533DBE559A3D947DB0BD92AFB63D34025FBD9A949DBD9052CB3C2EDED83D5A87A9BD32AE883D708C6ABC1473233DB2B2C73DB4040B3D2285D4BDA0261ABD983DCB3C8AF5D7BD603DAA3CCC7689BD408CCBBCD429373DAA08CEBD0E5BA4BD8086693DC431FDBD1C2DB03D7265C5BD00E803BBE835D23C04084A3D14E49EBD78CD893CF0755C3DDA92DB3D14A7C0BD548D7EBD6827153D207E83BB78C1ACBD6C76D7BD564FE3BDB222B3BD58FE59BD2AC4B1BD4493E0BD60DD1F3C0022963DBC6671BDA0CB4C3C00FAC9BA6C536F3DAA89B1BDC076C23BFAF2EE3D5EC3B63DD4B9FDBD08279ABC00BA983A780F29BD3C30A8BDAC21B2BD881AAA3D18C225BD20CC03BC903C163D5A219DBDC08A363CA245983D20AE95BDBCF5143D40E78BBB0CC28C3D601BAA3D24D6073D0087773B665FDCBDE0DA4B3D12139C3DACF839BD7C31FEBD1274CF3D905CF0BCC0DFCC3C70ED0FBD3842A33DE8ABF93D8078A03DD8F022BDF866B33D34D2793DB0CE473CFC33CEBD6CD95BBD7248FDBDAE38AB3DBC0DFD3DA21F953D0C98233D7803F23CC46FF63D60C981BD34E42BBD5CDBE5BDE0CC4ABCD07B0C3CA8270C3D5C18B2BD40FE6CBCBAF1D2BD963DD0BDD078853C1EE5F9BD9C55083DACD3EBBDA421B2BDD879D4BCC84BF4BDFEC0CE3D56C1D13D5AB785BDF081D63C94F6823D28B3223DB82B89BC4A76F1BDC625BA3D6A89E0BD00A5BDBCC014FE3B849F28BD34443BBDD440DDBDC0AFE13B508A68BC722EDF3DAC8F28BDC2DDC53DA0E7C13B500866BDB886F3BCD06868BC80B5A93AE8B4A8BCA4F2173DF4D1D23DB8F4A03CF473393DD0159E3DA0B9DC3C5C046C3DF448863D909EEF3DAEA3E9BDB4332F3D8098B9BB88E6B7BCC46545BD48E8993D822FEA3D44EBD0BDCA4F8A3D5486B03DF0F7B23C0000C13AA6FFC43D80E1723B1869FFBCD03B17BC7C44243D742C003D00FEDCBB0C9F213D68E4093D0660CFBD3028FF3CD2A19C3D50DE6A3C50EF3ABCA21AC43D92A9DFBD0CB269BD546B67BD8632DD3DD89BF7BDB01D4B3C02FCF7BD20B186BB70D73E3D9077EFBC1C82F83D00A0D0393A8482BDFC06043DEA22853D003482B95600DB3DCA06A2BD98755A3DAE5D913D504E7E3D005040B85C28123DBCD5C8BDC0E5C8BDE097FEBB505780BC2A16BE3D72E3B93D8894AD3D4C836ABD30F8C8BDB220F0BD604C393D54ADE6BDDE8DFFBD986081BD4C24D8BDE0C549BDF629A1BD3E5683BDAC62F33D30F8C0BCA45CD43D80C2353B10AE83BC8CE715BDEAFEB6BDC4AECDBD8E42B13D18C71DBD4498F9BD54F0EA3D40F5173B724DABBDCE3AC9BD28FCD6BD9479E0BDECA8E73DA682B03D9081273CA62EDABD1CEA05BD2C7CF0BD0C72303D30F207BD6021DBBC3CC01FBD4C0D703DF2918A3D2851E03CF83A80BC40644ABC00250FBB4EA2BEBD0ECCF93D10D15CBD4AF1943D58838FBD00FA5B3A88452F3DE00DEBBDB4DA6A3D30F4C3BD38E58E3CF80ECBBCC2BE923D82CEF83D48C6E63C40EA69BBF0AA7DBD60E43E3DE86F76BD847D533D38EA5DBDFEA5AD3D785CC43DB0F99C3D801EA43AD06F6D3D8A46E9BDEE9BCF3D1C0605BD28A73A3D1867ADBC44EC2BBD207070BD3820A53DD0468BBDE893B4BCA423813D50694E3CF465D7BD588FFEBDACEB78BDEE1CEC3DCA05B6BD34178D3DB23FB73D003954BD481A62BDFA2CB8BDA8B99F3CD8268FBCE000C73BE0155E3D40F5563DD48821BDB0A80C3C603FF33C80602E3BB0E9CC3CEC674FBD22D6D13D601052BC180483BC64C3E5BDF690B9BD80D37E3B785D9EBC2EB680BDDC00863D405937BC7810343DC49ED73DF4636BBD00FE7BBD18C5CDBC406D2DBCA80A80BDA0D8F5BC40206CBBCCA9653D7AD7EC3DFC91BD3D00C0583CF00E01BC7426033DA034A7BBF06286BCC80F303D1A48D0BD38B6D9BD00BB043AAC2F1BBD043F7DBD4452EEBDF07BAB3D6033A3BBDE8A89BD688F50BD3C9B063DFEA8B9BDF088033C800BCABA586B2E3DB41B4B3DDE43A7BDB0135D3D6A4FC13D60D9033C9A6B823D38D641BD7865CB3C089B153DD47B6CBD120F9E3D1C0CF2BD605340BD94A096BD9AF897BDA21F9BBDF839F1BD50BCAF3C7890CABC048ED7BD00A057B85094AABCB036533D7085C8BDE00910BD40C6D23CB007593D50EE1A3C48C00A3D04E8FF3DEC5C31BDBA79AE3DF283DC3D3676E2BD20B3F73CD402913D18BB9FBC36498D3D20528B3B74E3C23DC062303B9EE5A3BD906AC23D6045183D06CCD93D8033FE3C16F0873D729E9F3D906DAC3C880BEEBCC87DD33CFA7EB2BDC0EE8B3B709024BDC07B013CB2B0CABDFC6B9C3D5630ECBD74425B3D6A97A83D7A9FEABD704CE73D6A4EBEBD4814C9BC9EA8843D4C5B22BDB424E43DC4DE61BDF81889BCEA57A7BD24886DBD0AD1F93D3C87C03DA0CB163C4064283C8A3DD9BD4044C13DD88699BC548D55BD06BBCBBD787AD23DB4C8723D3A329A3DA00F543CCAB6ADBD9CBB513DB0316C3C74D02B3D10FCFEBCE09E71BD9628D23D84A12B3DC8CC4FBD60E2363CA897DEBC60232FBCEC8D8F3D4EC1CBBD40B0E73D644DAC3D0040E138E86C51BDF0C8D03CD472A9BDF648A63D6A6387BD18A9C33C58DCFBBD102F753D7E4CAD3D0826C03D102B273CE826973D74922E3D7EADAB3D7A76903D4AFBDFBDF0E6573CB48C2EBD607A74BDB430B33D308F92BC48129F3C642FA13DBE51AC3DBC9E883D78C7B2BC7232E4BD90C1F5BDCCEF203D806EC2BA6EBEA1BD709B5F3D5E5EE83D6010943D487490BC385E8A3C164BA3BD0CA9713D0A63C6BD8EBDB03D08DB69BDE0104BBDB66DD6BDD89FF7BCF01946BC24FF6BBDB83BB63D5CEB923DB4EFE1BDF0DC4CBC20242C3DF4FCF63DF8D9F4BC842A9D3D4078E5BBC05F44BD7AA99C3D7C1EE4BD167AD63D3EB3FF3DD8C90BBD50404A3DC848FF3D385C1A3DE039483DD0003C3DE47851BDE8F4F93CF67088BD1C9ADA3D38665BBD7017EA3CC45014BD6606803D0008073B2EC38C3D1CA40ABD4A3996BD184C443D6E1290BD102FD2BD04D1453D6AF799BDA47240BD20B0FFBC606C113C605331BD104538BD70AF00BD1867B33D8C4E193D087F76BD76F4B0BD80CF3D3BE806243D006D2BBB24DC953D0053D73D0410163D50DB283D9A85943D98662FBD80A3B53CD6F8CE3DAC2D75BDE0641F3CCC2B48BD30D8C4BD8698873DD28ECC3DDE4C8ABD14E43F3D68001D3DFCEA473D36EB8C3DD6FFEE3DDA4DC23DAE00E0BDCCB748BD5AF6873DA02492BDC011C93C187F5BBD8860CB3C58D3793D7CED203DB2F7B93D407276BC9AF98A3D1C86253D985B21BDDECDB4BD8835EA3D54A718BD5ED3C03DBC5DA13D60F0A4BB4875D3BD90DF243CE08277BDE83A053D94834BBD0C50C53DF2F8E6BD2CD509BDB87BA13C805F433C3450D23D14C621BD6A5ACCBD4A7EA93D74110F3D62A3A83DD88397BD465C96BD24D24EBD809B113CF47E2D3D921C93BD40D240BC48FBB0BC7295E93DDCA538BD0015F83D34039DBDB4F952BD728CC0BD6498BC3DB40BB0BD0CEF533D10243CBD3C1BFF3D2871903C9050DEBDF03BB03C90FE783CF69AF7BDD881CD3CA03FF43D6857133D00432EBA0847D4BC180F083D9C1A64BD9619FC3D224DDD3D7C306F3D84B53EBD585FF0BD4C5F93BD4EE8F83D16FAEABD9C6EF4BD609B13BC98E4223D78CBFEBD0AADEDBD0027323A04BE2BBD9E59B23D3400133DBA36DEBD34BCE6BDF6CEAF3DA893B5BC64FA5FBD2C45213D8040C9BCD8DC743D90D6013DB8AE5DBD6A2ECDBD66958A3DBCCE99BD608462BC80028C3CC8FB94BD12738B3D3611B4BD4080FB3C10095B3CC0DB3B3D283EFBBD809BEC3B649A793D44E5A3BDD863FD3C0065003A762DD93D28D4D8BC00DE5F3A1CB05EBD285EFCBCE892123DDCE5F6BD1834C23D0217B83D6CD4583D14A4BF3DF4601FBDE83DE93C0062D03BCA05B1BD10D644BDE8C335BD0030FDBCF24FE3BDCE0AB4BDD07B42BC28C69BBC1062E8BDA0CBDA3CFE638B3D4833D53D5873D73D56E2B2BD3C1624BD28E472BDF8CFBB3C2033093D78D3E33C4C99953D540F873D3E6889BD48BDAF3D88B0AC3DD882873CE6B9DEBDE6029DBDA4AE0E3D2005313D0CB5EE3DBC4A823D3092393DC0B38BBB068FAE3D605C3ABD4078503DECDB73BD00EC98BA6E4B973D74EE6A3D58CAE5BC0075CFBA361D8EBD5C286D3DF641AC3DE83D303DB8B8F7BD2A42B7BD7661AB3DF09E92BC8C379D3D0CB3BC3DA0FA15BD683396BDDED7F0BD7CD9433D604C833DD886B1BC0088F8BD6CE4A4BDE0B1DCBBB0AD693DF08F2BBD4243A5BD8838B2BDFE0CE53D2868393DC6D9CFBD3E199EBD2E51D9BD8027943CCCE74FBD00DADDB9B8FEA1BC6816E0BDA8C4E4BD9A8FC6BD546E56BD80449F3C20C870BD400092BBE05075BC4A1FEA3DC86769BD4885F03D1C87C4BDF896D5BDC87F263DA2FD94BD004F833D9EA18DBD4A97C93DFCE1F73DB01C033C60D9DA3C8AACEE3DD0C2973D247CDFBD001E83BB",
      torch_tensor_64_torch.float32: "0x0400000070EACA3C683FF8BDC40B393E7E3E49BE607C543EAC711A3E5A38603E18EE95BD9EEA1CBED4132ABECEE1543E08A8FEBD402AFCBCF8D51DBDA82A303D7C1152BE406C4E3E9C6C3DBE8CCA7B3E6856C8BD7491E4BD58C00CBD9087973D48BB3DBD1A807FBEF410343EA4907D3ECC28013EB2807A3EB88B8B3D107BA0BC1EE74BBECABE5FBE564130BEFCE781BD1212153E343ED3BDE0151FBC803A67BB805727BE40C2DDBB862E773EF29B4C3E7AF9423EA0FCC9BC0049913BA8F30B3E084EAABDB47FCFBDDE075B3EA0D8693C58DA2CBEFAB4573EF0F5293D88F9083EAE565EBE80063E3D20951C3E38BA13BDF68211BEC0D04C3E5824EE3D0CD2913D402C723D",
      torch_tensor_64_16_torch.float32: "0x0400000098243BBD767E473EE064603EB6DC5EBE807731BC6A43163E34B0E13DCAB0513E403BE3BB2A012CBE105A293E8092AFBDA28D043ED8597CBDF0A5D93DC840663E020B6E3E06FA68BEC65629BEECB1D3BD604023BECCA1753E80E0B4BCB0D029BEA8D5E3BDC4670DBEFCE3D03DDA4B5FBEF8B16EBED85A7CBEA86DDC3D2829FD3D0AFF1EBE18EE7D3DACF93C3EE0C9143DD8A858BDA04F973C309ADBBC52E5003EB0D32DBE78D1013EA249103E9A1A1BBE500A513E76707B3E58D8C9BD88688FBD7428FF3D3E8E48BE7879CA3D70E76E3D4A5D213E045D5EBE50AE54BE40F4E53D8C6DB83DB2466EBEC6C20EBE083C6ABE7E6737BEA403E7BD90D9533E00D44BBDAE08133E4A1E733EBC55E93D822C65BE34D3003E644BC33DB26A463EF4867CBEB0711D3EEE8B513E622C6EBE5046D63C528A5A3EDE303ABE40FFA73DC03DE23DAC30863DDC887E3E8A9B513EECA25B3ED046FFBCDEB5563ED4916EBE26250ABEA8035BBDD41798BD42776C3E1C7EF13DEED0243E34222E3EA03B3FBE9033EDBC7887153DD82A853DC0A4033E70BACBBDB8629ABDAE34563EAC6989BD04D431BE04942D3E105A2D3ED88BA0BDD8B74CBDB4E53CBEB4C855BE9089C03DFCB8DABDEACC4B3E8AFB4CBEE08A0DBD40E1B03B0A92033E4C304F3E465D2D3E6061E13D3C01EBBD62D236BE580565BE402E4B3C124A783E488042BD806F2CBC9E083ABE60309D3DBC4C223EFC647CBE5A4134BE069F3D3E6872723DA05E7FBC680C373DE0B01BBD5EEF32BECC366FBE8C5F283E1095F3BC7826BEBDAC2784BDD8A00BBE58A597BD0CC15BBE72933F3E4412D13D361B01BE9CC0AEBDD0B3E53DAC98BDBDDC02873D90F98C3D782621BEBC41803D409C7A3C16965F3E7840B9BD7C9E83BDDC915C3EDA0C51BE00F7933C16A8763E7C90E5BD326C753EC228633EBE2A6E3E306DC3BC0C96673E9C16DFBDA042AFBDB4A7C13D3051583D66200D3E2048733ED24020BEB4DD073E0C4CAB3DB40E073EB8C6F23D1886BFBDC6544ABE04E64C3EF6FA11BEF2AA233E72E073BE882731BD00A72D3B182D313D408BA53C9C55A13DA008E4BC38C87A3D66557D3E34A525BEE0A05FBC3471C3BD3A9F603E6E255B3EC063DFBBD479B1BD7A2C1EBE9A2D373E60088DBC6E1A713EB0FC113EF613603EF8794A3E105C26BE10DD953D2C4ED4BDE672003EA022B8BC904BB13C460D31BE34CB64BE2CCEC03D70F66D3D20E5B13CB2DF2D3E50CCD5BD0CC0B53DB6FE0CBE382C543D18C769BD9C48333E16DE5F3E92575E3E6041383C20F6163E88C77FBE0A2B16BE3803373D00BFB63A8AFA48BEFC9DE2BDB821EFBD96A27DBEC051C33C80832E3E54CDCF3DA044F3BD6E136BBEF0884EBE80F4973B161B303E9058CFBD164D0BBE9A9008BEF04AB1BC921C73BEE2E761BE06017C3E582EF4BD40B138BDACFC88BDC8E560BE308634BD54BB9C3DC8E6CFBD20922EBC00BF9CBA68D97EBE160A3A3E32CA4E3ECE8A2E3ED423A8BDB4C6053E26DA6FBEF0527DBDF84350BD08D0B4BD400AD73DFC4BE9BD005FEDBC7CD793BDBE6770BEA01A29BD34F458BE5046153E90D2083E9AD16F3E58EEABBD604A503C9097483D408B7F3E2EA76A3E787D04BEC2D459BED4BA66BE008FF6BDCA3D573E7CF4AB3D9E00773EA6C03D3E80876D3B9AA91EBEF2FB793E185B4D3EB4AADD3DECD70BBEE8AB493E9066BA3CA046293E18B1D53D2AF0073E44A260BE7AF20DBEA08A193E005655BDFEB65EBE64CE683E0028B1BBD6824E3E0A1848BE4847B03DB8DAC0BD1C75D7BD509355BDC483BDBD1E470C3E208F42BD8E1A423ED8A8693D40391EBD8EDD13BE8C696ABEA05C95BD68106DBE98B73DBD80E4853B20FB83BCC880FBBD28AE313E8E2C103E484A7CBD504BCABDD6F1203EEAB95E3E4A676ABEA03E5DBD100FBEBC0C60B9BDAE8C5A3EA84117BD9A0C593E00FEA13A3026DEBC425315BE483EAABD48FBA43D107AE23D80BC11BC82ED733E9E2F31BEC44EC43DAE92663E380E32BDA03D4B3E400A873B4CB43FBE20720CBE0893BE3D4491DDBD8848763D28F87B3E98EAAD3D00ACBFBC30F47F3D287E13BED41A57BE626F40BE6CCF56BE1025523D4075473D6895D9BD14687ABE2AAD0A3EBC4111BE58F42ABDC0A656BEAC6C10BEFC95D53DA8856EBE3AFB11BE52EE3F3E0E4A03BE6412D5BD94C18FBDECDBDA3DA0ED27BEF057CD3C281AD13DC0AB94BC8828393DFA4943BE9479E73D7859BF3D487100BDC6AD53BE98C9CC3DF60C273E101B33BD2C53F13D08C7BD3D8CC8CCBD402C8EBC0ED57E3E00B39A3A18CE4BBE705B95BC5CB7FE3D0021A7BD201006BE22E3523E506D073E68F82DBDA042513C209AD8BCD0BC6D3DE091113C20EA1ABE88B83D3D8042D63B1069843CF41DC3BD9C2F833D6E034FBE740C993D86B90A3E9063E1BC60DC46BE003C6EBA0010BA39863C5DBE4C1135BEC8C86C3E0C713F3E40E00D3EA258313EDC19C53DEC12103EEA8D293ED8366FBD482C02BD368A363E00D0BCB8649326BE8A8046BEAC2C0F3EBE0C543E10D0463EC0692A3D3AB6303EC80A6BBE427038BEBC5476BE74414E3E804014BB08C2EBBD443FAD3D90A8BFBD222F24BE407AC53D407E3B3D8A5337BE129E28BEB00FF03D0EA8423EC0B8A63CC09500BE503BF73D5897323D6A1F60BE46E625BE4021603D00681E3EB07CA4BDB491F73D488B1EBE9AF9743E4A69363E78CD3F3DF4C8E33D9C41B23D9C1017BE00DE0EBBB887883DA02167BD727D753E2472C5BD36A064BE40C0F3BDF8966DBED2F4523E70D7E5BD601D34BEE062DDBCB67E2CBE44BA05BEEA82023E243440BE8C74F13D60AF3A3E000013BAC458E33D8E660FBE12A2473E64B0783E0857733D6049693E1E407EBE40DFE0BC30764B3D08835EBECC27F93D7021C3BD742EB9BD341D4BBE9050D13DC4453ABE704C59BD4C72E33D4CDB403E608D673D74FFBEBDC8B3DEBD3AB00F3E98FD3D3D7880573EE0CFC03DA23A4E3E7A494EBE3ACE4D3E943DEBBDF40D89BD0021C43A580840BD988D4A3DEC1E643ECAF418BE90339E3D90BF4DBEA8C8203D4EE5523ED49D2C3E943A5B3E3A940A3EF070A9BC74AE853D0CF1D5BD744C593E302E003E1C5F3BBE205A5D3E002073BB801336BC78208CBD141687BDA0014D3CFCF3F9BD0A226EBEFCDD03BEF0C54BBD2651413EE8533C3E0C6219BE80461DBC88C593BDB2F308BE581134BDCCA6B1BD62170F3E98EBFDBD988B1D3DE87610BE3CCC9FBD8087493EFC5BFBBD804B76BC147E743EA83DAF3DC04D02BE04B419BE908BB3BD1855A0BD08EBDE3D20A963BD82E8573E66760CBEB41AA0BDBC68BA3DA2744C3E48E3743E38E6233DA0A62C3CE864E5BD12A5103EE26314BEB89386BDC6F655BE961A76BE78170F3EA0228B3CA4134C3E04B54B3E3A56063E44E6CC3D74DF84BDF0F6073E4C34F63D403EB13D407AECBB60F4183D0063913A26C939BEC0B56D3D7C323CBE506CF83DFA8618BEBC3EA7BD50D1F2BD4C104A3EAC4734BE94B7023E4A64003ED402353EA048803DDE8E0B3E365E4A3E20B4493DCC16AE3DD42C48BE6C5589BD30B2B93CE021F83CE4E3B4BD50C87DBEA02685BDBC03C43D1E6F5C3EEC2C67BE4C72F43D66E972BE32D074BE905120BED84007BD9CFF8E3DDCB042BE8E3B453E7880673E00037C3C4061503E50CAE7BD648BCABD602404BD80C6DF3C049532BE22FD4CBED041CA3D909F933DD46F7A3EC0BFD0BDD0CEB43D989CCEBDA0BFFC3D00E662BC5CC63D3EC0390E3EBC14553EA88E033EE0E2193C1E9D5C3EA85E16BEA674713EEE287A3E6E8C743E782AEFBDCAA407BED092813C886F9F3DA26A003E5C3BD03D36FB593ECC4680BD40F9A7BD5C9FAB3D78AD8E3DF65415BE9017C63C325E42BE7C3496BD3CF2C8BDC467603EC87166BE182617BE7E877ABE1021813D560A45BE20A7A53D08D231BE1CFD23BEBEC802BEB0AB193DC63B6B3E60CC6F3ED0B99ABC4EC07ABEEC26A9BDFC20C3BDE8CC59BD1CA1C33D02D4003E0402E33D1C43923D9C45CFBD00CE2DBB6852023D28C302BEE034B7BC50A6FFBC40DF71BE568C2D3ED00ECFBC3C4D5DBE5A8A4A3E38BF09BE4045B53DE0E07D3E409D3D3CE44D933DAC6ECB3D867B413EE0179DBD5A0E10BE2045A0BC8034483E4017B03C28DF313E00A0F3BA88179D3D606D0E3C4061DE3B569D73BED0CD5FBE2040AA3CF467FD3DFAF72B3EE0B8313CB0D1D73D2C23D63D1AFE5CBEC80161BE147D46BEC0D78C3B7EDF21BEC0D8A3BD703419BD48C3C73D706C6D3D2A7C6D3EDEE8663E225123BE00764EBA0819293DD47C5F3EF8AD9EBD9437C9BD302A22BEEEA23C3EB40D91BDC4C1BFBD8E262D3ED88F6B3E609C2CBCBA7434BEC295503E401BAFBD3CF1EBBD60F933BE203DF6BD827D48BE50C413BE8C3469BED8634EBDCCDCCD3D0C5642BE000CB7B958CEBCBD4CA7F73D22BA5D3E98BE07BD40D800BE84B344BED46716BE84D3933D30F36A3D12DD093ED82718BD988A033E861364BEA8A2893DEE85783EE05C7DBE8AE504BE22E2233EE01920BD887508BE322D1C3EE048893CA06D203C0C839BBD6AE1403EA2000E3EE870373D30461C3D3860043E947D1F3EEC05D2BDC061E0BC90C7E03DB01AF8BD6E5F6F3E1C5C2FBEC842EC3D54E337BED462A43D14CE323EB0E2F63C5044CDBC3CCB223E8AD137BEE4B62CBE1A305ABEA0941DBE009ED43B0C2AE8BDC021643D20380A3CD00E553EE401DEBDEC108CBD1E51293E247681BDD217753E305BCBBD007033BB489D72BD38DFEE3D882EC43DC65308BE66B0283E702282BC2C7981BD003FA5BB8029323EF61E7B3E6822F93DA02E333D0A13273E181AD6BD50C905BEBCDB93BD78B025BEE024DC3D008AC23C3C2CAFBDF0EACFBC006EA2BB92805B3EC885643EC21445BE78A5BB3D24B5C53DB0C5C33D809A0BBD8C0B803D80D6803D1C2A793E865B75BEA44AC2BDC03C2CBE205BF8BDE00C493D56211C3E3E9741BE6481263E5CD6553E505EFCBD40BA323DB66C03BEC0535B3DF85FEDBDBC73C7BDE25E2BBE7A7A55BEAA4A4C3E805001BD8043E3BB8CCEFEBDCA6E323E108712BEA815CFBD5CD647BEF24357BE6E46633E9EAE45BE305F0DBD203494BD108ABB3DB4F1883D4E3F44BE34E8653E88027FBE308FCA3C1019ABBC684D6DBD9C742E3E2425583EC863053D80D6B4BDB6523E3E48D6203E30EB373DB0098CBDE0AF2C3CD82B643E3018DE3C70CB49BD66BE58BE9A2F09BE62E4383E203C10BCF06188BC485AC73DE86D28BE10598ABC940090BDCEF1053EC456503E8EBE203EBCDC3E3EA6C964BEC0C4B5BD1084F23C506F59BE40E48A3DA6CD27BEFC65DB3DB6314F3EB6FE5ABE6483563E60E6EE3DA0F028BE9809753EF8B75DBE20582CBE34B1FEBD406A4FBC40E1373DC84196BD1EA672BE6067ECBC363B423E9C1A453ECC26003E68AC143D20707E3D545A45BE3C54CF3DC6C77EBEC870D3BD588D86BD32FD3B3E40CDEEBB8438E9BDD8E6323DD46B54BE488E87BDACCC8D3DC0A287BC9014D7BCFA751C3EFC7642BECE4201BEFACC773EC0C34B3D00CC25BDBE9A043E70011A3E901C2BBDE844D5BD706127BD58E9B93D10BA02BDFEFD143EA4C350BE1434FBBDB228433E6856063D60344E3DF864A83DD8F671BDB4C0CCBD7CE2923D24B287BD9081D3BDD849073DC0AF773DD0EAB8BCB0212DBEC0D41ABD0E1511BEB2BC063E22A029BE3A1E4C3E70ECCB3D98375BBE54FA3D3EEC2A7DBE80256EBCDED51FBE003B5CBE",
      torch_tensor_16_torch.float32_4: "0x0400000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
      torch_tensor_16_torch.float32_3: "0x040000000000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F",
      torch_tensor_16_torch.float32_2: "0x0400000054DAFD3D107F22BE246E7A3E4E8D7EBEE63B75BE10F971BDB81C513EC00ECD3CA4A1C43D56A63BBE18B8BA3DC0D9E4BCC038CD3D50CC343E688EDE3D2036AEBC",
      torch_tensor_16_16_torch.float32: "0x0400000090C3C9BDE6A4543EA0C786BC084DE83DB8847D3E90809CBDCC1C0B3E6C7292BD289415BDD8892DBD0093CBBADC6AC1BD2003703DC0561A3C9A46223E58434FBDB05FCD3C8475BEBD5E6356BE8C30CF3D6807033D340CCDBD181CADBD20E6853D102839BD324A273EA002683CB466C13D9413DF3D50417BBD4086DD3D32E93C3EC07D3C3CB863483DA0D4143CFE3E313EFC29D8BDF61408BE181BDF3DE8CC5EBE8056833BD876EBBDF6F7283E94586EBE9C381B3E7C467D3E40324F3D907388BC5AFE7B3EECCDDABD101DA4BC1435E0BDB05A0DBD188E5E3D50C4083D706841BD8EF57FBE60BB513CC0A9F2BB180C1A3DFA28443E9CD5783E5CE117BE60677FBC1825CDBDF8F06BBEDE473ABE8A45703E7E43153EBC82093E30450E3EFA624BBE5014D73C50436E3EB8DE0EBE74BC633EC492863D6E1B343EA055DBBD840AEC3DDCF062BEF00982BC38C7AA3DC48B993D0E39563E6A8F7B3ED6E5683E5CE02B3EE0FB333E602004BD02AB46BE7C11BEBDF0EAE5BCC6560ABE18DC023ED8B9B33D7039253DB05B773D40E2603E887CBA3D1A7F60BE52D339BEF0A9E13DC88C0B3DB8B2F93D1CAC7FBE2A416CBE68FC1C3ED2BF233E249B67BE0059C23D68E547BEECDE413E24A9A03D24217D3EF8697CBEF27176BE06152D3E6048633E98D81C3E4A322A3E189F57BEDA4B393EA0B371BE68C3643D5CB027BE345DCBBD8851353DE44EC9BD300522BD9EA472BE246071BE7454C63DF4B7D8BD6CBF1BBEB006CABD2C4C51BE7EA54CBEEE2E193E281C023E8066083DACD70BBEC857AA3D8003383CCCF436BEB85A5C3D6819693EA0CD7BBE7C907EBE3033033D12C6403EFCC51BBEA06B613DD8F6333EA4DB9D3DC89A5D3DF86A7F3EEAC6263E38FB0FBEA005B13C88C8023ED2C4613EECB37EBE18A00A3E60A694BD3EAE7ABE284D633DB25E0BBE001D113D0C3526BEBEA540BE60C6ADBC74FEABBDB2B9153E2093B03CB0D2473E90E63F3DB0A3A4BDBC652D3E80D35F3C4032403DB8ABA4BD00326B3A40E344BD901DAEBC2CA647BE0085C9BAC87D54BE404B5CBD245D143E7A0232BEA88E2CBE68097ABD4C5B8CBDB0592D3D00002A3D14D1013E7A5A30BEA08790BCB62D0F3EC66E5D3E706495BC742014BE4C2E933D44C9113E9CEF1FBE1C8E14BE984DE23DC07E8FBCAACA71BE149B13BE00A2CF3D70A8ADBDDAB2303ED2604A3E10F6143DF0F1A1BCD085A2BD201E4FBCB0633A3DBE8B43BE48BB74BDE8F054BE0A1F1D3EB40723BE02DE693ED8FB83BDF4A712BEF4FDF53D30A8183DCC44313E98BED53D6A9D76BEE4EA213E58D540BD084AE2BDE492223E64B53A3E9A0161BEE02FB9BC983A523E744AC63D12AC573E3476AFBD70380DBE0A235C3ED069D53D6AC1753E54DCD5BD7E5E24BE500DF0BC620B71BEF8B0C83D98D23C3E78D1753D405BCABC",
      torch_tensor_49_2_torch.float32: "0x040000004135A43E96BECB3ED01A2EBF13CF99BF78478A3EEE5E16BD1225B83F0AC24B3EA15F94BFD0A288BC3B3F2ABFF1444F3F219CD7BFA7A74A3D2831C33FA79B833E8F328ABF23459A3EF74A813F62BEF3BD89B5D6BD11A86A3FA5BECF3FF52E17BF994C9CBF3FDD024083792BBF8073033E9AD2A43DD4CFBE3EF83E0D3F3F5D02BEFAA4CABE17564E3C3A9C2EBEBEEF34BF90D25CBFEEB096BF134B903E99F9933FC603A1BFD17CDBBFC866A23E2C5D90BF8A371C3FC225AABF401B3F3F2BC65E3FD0FF1F3E04870B3F31D1A8BE5CFA103F7AE56BBFE2AE2FBF4B2795BF07326A3F8EDED0BEF6B0AC3E5C91413FE8CB963F7CA2C0BEB545F3BDCB055A3EDDC4B7BCC4E1AD3E070587BFAA4F5D3E688AF03F32FC6B3E3C0B7BBFF726523FDC078EBFE0534ABF960E913D7A29B2BFA6549ABF96B30240811D513FDB1A883EEDB979BF0952D73FC6EF813F37E2D9BEEFD8283DF0310BBF468A7D3F35C6DF3FD0D01FBF4A0108BEAF96A33F4ACF883F05E934409FCDC8BE6506943F3A5812BF9636393E89AF563EC14839BF",
      torch_tensor_48_torch.float32: "0x040000007E6944BE5CA595BD08EDA73D1C4760BEB8560C3E9C42053ECAC51E3E4A3623BEECF97E3E38BF17BE3E937F3E46AE75BE9C1664BEF83B1D3EE00AD63CA04B6C3C1CC30DBE7CC5D6BDD0B395BD406279BE20DD543C801A353D00F05DB92057A53DE6E7723EF421883DD86DBBBD40B6D2BD4CCA23BECA7631BE40EA24BD401C35BD04C5E33D00D9DABD8A154C3E50A133BE00443A3A9E1F663E06907E3E884A14BE7067363D50EAF13C540DF0BDB4E4B0BD60AD8A3D740332BEA0F4283D188EDD3D",
      torch_tensor_48_16_torch.float32: "0x040000000054F5BA5E54093E16B352BE80663CBEF432C5BDEC4B893D404FA2BBCEFA4A3E70BFB5BC4C7B873DACBB9ABD704849BDB89174BE528B29BEE80ED3BD00BB173C6069CA3D189B193E8C8D2DBEFCF4DEBD98F7B93D4E94543E48BD52BD5C913F3E400D25BD10B5D83C4ACD673ECE7B6DBE662921BEE09E81BDDC93C7BD282F5D3E1AEF25BEC0B0EBBD1ADA32BE76C26FBE047015BE9E0E5C3EBC76E43D0027F83D406A573C3A3F03BEC03E2D3D9E066FBE1AFA38BEC6F903BE2685213E2619163EC811E3BD20CB13BC40BA233E827F7E3E2434CB3DC8550A3DFEA42B3EC0BB16BEF8D03E3D6C7A46BE186E31BED23E04BE8CAAE73DF8E7CD3D6AA417BEC8AD9A3D6E890C3E203F01BD40641C3C00446D3D00D11E3E48CF753E964745BEECA1BBBD9838C93DD01B543EE8C55E3E22E2613E78CA4B3DF89C5EBE9066BC3CAC2720BE8C946EBE3E74633EF0A6423EFE5D7FBE08AA3F3DC8802CBDB88228BD1C5FEABD8CE4C43D34A117BEDCB1BB3D1676013E5C43373E4871BF3D4A5F7DBE001126BE38A6FF3D1853563D96B347BEE86813BEF2D4703E547F2C3EB03EDFBDD4DC80BD78DD73BE803E93BB78C840BEA27745BE20B061BCA0BF193DF4ADD1BD98E7173E38C91BBE6849683ED06F2F3E64E157BE88DB7EBD80D2383C1867153DD0DD723D5CECC83DE059753CCCD1F9BDD445F23D569175BEA0BB17BE3C2B80BDEC66F9BD5C1DB3BDBAD251BE00D259BDF8E25A3D76C626BE403452BC0042373EF088D2BC80ACE33BC0ADB0BC103D4F3D60C6223EBA7E723E0693223EC40C733E601D94BC66F865BE40BAF2BDCE4F2E3E006BD4BADC7CFEBD022D44BE00946FBEEC1058BE70B44FBD56640C3E74670A3E02E576BE2EB01F3E8A5248BEF07B58BD1C9ACFBDF03C45BD100E49BDBAB865BE440A5DBE283C20BD80E1533BB896E8BDB8DEC03D3A6A66BEC0368ABCA221613E38D7D0BD362B673E386CB93DAE0767BE74F8213EF053ECBC708FE4BD14B64C3E54DF4EBEB0C2DB3CC06456BD16D0363E08EC8E3DCC04F63D40D1B43D003F76BD505A57BD00F752BE4CB60A3E26424B3E5C292F3EAC9334BE60AE363C907634BE88EC0CBE302C15BE34F9AE3DC48D18BE00BAB2BBA04F2C3C0406253EFA8341BE44BF2FBE3CA614BED62E333ECC0BB8BDE0EE573EA024B93D40AA013D00EDF3BA086D4ABD407A003D30D369BD003EE6BAC0A7023D983E48BE7A2D06BED8B74E3E86C14FBE200F93BCC03E7D3E10F4B83DC0F0E73B26DA5DBE2CA2FD3D085836BEA85691BDCCC8ABBD38A417BD8036333B9626533E80ABFF3C204C653E30991C3EC6D821BE54A2E53D24F734BE9CFFD8BD4097963DF00EA93DF20E403E28D2A4BD00D4D1397ACB033E5A9377BE4215393E30B153BE00D0613BE0182EBD0AD406BED857073DF2B0533EE8AA95BD56FC17BE845BBDBDE6BB7DBE1C1DE73D20E5F5BDD0D62ABE627B13BE5230133E2492073E507C443ED8B6B93DC4FCAABDD4138FBD9842973DDE70523E74358B3D1C40F2BDFCADF0BD420A72BEB03B5D3DA8A90FBE503E64BEFA7A603ED03F26BED0FBE8BC48AF923DE07D023CFA412CBE2CEE4EBE980D4C3E30BF263D4662543EA8A4ABBDF8CF963D182A6ABD602736BC52EA1BBEAC28AD3D80E0A13D40FDA8BBC04C66BD58CE1DBE1409313E94923EBEACBFD13D6C29ACBD0C06F7BDE0F4373D22FB04BE40EF6B3D1018493DCA133EBE987E2A3D6413DA3D5CAACA3D58E600BD9ADD51BE90DA1DBD50D2B13D2CD1BABD7458C23D867C2A3EBAAB05BE8093213B24B6D33D9084A03C9012AB3C70B9FF3CFA4049BEE0F2A03CB445313E64AF663ED876163E1838093D7C1CEF3DDC13F9BDEC2454BECA235CBE5A637F3E8E81223EB2F430BEF450C83DAA52413EC2E67F3E58D85F3E4456463EF0C26ABDA0AEB3BD4230523E0A750F3E300E1ABEFE25663E9060F73D008E0B3E6A7420BE88E4923DEC7CB3BDFC06483E584238BDF853C73D80E2353DF8D6D93DE0FDADBDF4A2F93DFECE32BE8846673D20352DBEBA8D7CBE10954DBEB61A4A3E50810A3EE82E703E48164D3EA09E64BECEB32EBEE87525BD324126BEF8C3313EBA8941BE38CEF9BDC45177BEC65711BEE28D523E429A513E2441373E22AA453EBAA1633EB01A83BDF447E13D0414643E1461A93DCAEA7F3E18C7043E58241F3E2C32B3BDF4ABF53D2054EB3C888C74BD4A4F10BE56A50FBEB2FC44BE4EDC2B3E96FF353EA016E9BCC42414BE22DD453E8CB5233E703C983CB8BBF1BDB8466B3EAC60D13D5A5742BE6203753E5266423E8C9EBABD5CE90F3ED67411BEB87920BDB25E593E403E293C400C35BE9420ABBDDCFA8ABD208F45BDB0FEC33CA2C16C3E204D5B3C8C101EBE00F0513C587FF53DFCF8FD3DE0F769BEB03C37BDB83E3EBE8876DABD6078B83D18CB35BEFC52BE3D8649593E3053863CF09E2ABE2071B7BDD89A5F3D462743BEEC5DFE3D246A68BE521776BEC0BE78BE68BB4FBD90242C3E724C72BEAEC8543ECCCFCCBDE8F4953D20CA3A3C10D766BEE84E543E6ED7093E80767E3E9655013E48FA28BE48A7553E20235C3C80CCF23DAC444DBEC84393BD545C7BBE906BC7BDA0E85C3D5C0049BE1035A33D2C6C093E18A70E3D0C492BBE5A7B46BEE4F59DBD20BFE03D7A847C3E1A35133EB09FE6BC0084B33DF0267BBE62A65ABE3CE7EE3D960011BE2C52F63DF8B734BE6499FDBD48DD52BE5A97053E60AED0BC9404453E686E1E3EDCA70D3E20B6033C944C9EBD68A65EBD1817083DA4CDFD3DDC5933BEEADA563EE0ADDEBC9A8356BEC4820ABE6A83623E741E6A3EAA206DBE6E8E343EF84B003EF887173E24B6583EA6F809BE5CADA13D0487D13DE84A97BDA857AB3D2C4F93BD60461E3E880E8EBD14DFBEBD40E5803D689AB53D1026FABD300AB53C745C143EF0C4CBBCA8D19B3DB8F976BDB074B33DE67139BE0E8916BE74F101BE4C446B3E64C589BD00F032BACC0FF8BDF08F7F3E0E077A3E601241BE10884FBED40B42BE00089EBAC48282BD4E9027BEE0A3B7BD1877413DF4C105BE88E6623DC8D16ABDB018F8BDC8AE0C3D847F523E88132DBE00323E3C20CFBCBDE4367B3E26E272BED26A75BE30427C3EF8F721BE2053443D40C1B0BC78B657BD48B564BD3CAC223EC0C6433CCE3E79BED82117BE7C8AAEBDCAD2003E8EAA25BE2E63713E281364BD18DF37BD4297483EE6AA003E6A1E593EEE14143E34519BBD54D929BEA06098BC0EE0533E5CD6ABBD1E686DBE24E2D13D6C35793E00C291BD5AF953BE103568BE904E803DF0129BBCD84601BEA8FB4E3DC06FC23D069A4B3EFCC0463EB04619BD7EBB61BED85367BE48066F3E1055E23D402FDF3D207F5DBE5E0F6D3E1485723EDA21673E30F557BE8830C1BD4A1130BE566C723E04FFDBBD84C1E9BD281F063EE8D8ECBDDC2BFCBD4024B3BC50DAC4BC226B47BE466B553EB4DAE1BD309DB53D24AA5E3EE21A013E50FA103DC4D1593E08A7093D54E1ECBD062D723E605C723D38C679BE18C391BDFE602EBEE272603E001C29BDB25969BE80BE80BC74C5203E9004853D8CE5A13D5034BE3C18E2BE3DE87F79BD78ACCBBD0E496FBEB0DA40BEF0E6DD3DBE9417BEE0E8123D106DA33DA001913C40FA25BEF0D1743E26DD14BE668F523E6EA64BBE585276BD8A410B3E7C31D1BD0E0D573E062B30BE44FB56BEE0DEE6BDB087253DA8B66B3EE46DF4BD0C1BB73DAC5C80BD28115EBDD83C3C3E7A6546BE6086D93CA8BE703EC8B50CBDA6C4463E84AC9DBD00124E3EF6A277BE289513BDA8DC33BD78EEA53D24DFC83DA68F443EC88F18BD606D22BCCA4F2F3E90888ABD106B603EAA722ABE209DDDBC00005CBCA075E43D66052F3ED04E22BD4E1754BE28B1FD3DCC27993D88ABCD3D0AEB1DBEAEC2243EC078723E30B5B13CCC1D6FBE9CB5333EC0CF3DBE98636B3D30CE143D7CA2EFBDB046B23D8AF964BEC839693D9C4A22BE3075DDBC48B7033D08195A3E1C49F4BDBA00243E281502BDBC29F3BDBAEC5EBE7CE26ABE28037A3E98627FBD20974C3C3CCF8A3DEE022E3E487D5A3ED29E4F3E84AA3DBEE00F24BD1E7C17BE1C4412BE68E6723D3C4B703E26154DBEAEEE1A3E3CBA04BEE87247BD92344B3E309967BD707BBA3CCCF332BEECEA593E505F04BD683C3BBE3CEB953D3C0536BE4C234BBE6086793CCCF74A3E48E390BD40FBF03D7AFC5B3E78CB293EA24906BE6080E0BC601EA1BD00DB4DBE00A0D838969F403E1AAF573E7014BF3CF092683DE8A7DDBD5A3D413E2C0CD5BDC4D431BE78B01D3D5271193EB4CE66BE6A6A673EAC2EB83D5C5B33BEC8935CBDB8195E3E",
      torch_tensor_16_torch.float32_1: "0x0400000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
      torch_tensor_16_torch.float32: "0x040000000000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F",
      torch_tensor_16_16_torch.int64: "0x080000001800000000000000170000000000000016000000000000001500000000000000110000000000000010000000000000000F000000000000000E000000000000000A00000000000000090000000000000008000000000000000700000000000000030000000000000002000000000000000100000000000000000000000000000019000000000000001800000000000000170000000000000016000000000000001200000000000000110000000000000010000000000000000F000000000000000B000000000000000A000000000000000900000000000000080000000000000004000000000000000300000000000000020000000000000001000000000000001A0000000000000019000000000000001800000000000000170000000000000013000000000000001200000000000000110000000000000010000000000000000C000000000000000B000000000000000A00000000000000090000000000000005000000000000000400000000000000030000000000000002000000000000001B000000000000001A000000000000001900000000000000180000000000000014000000000000001300000000000000120000000000000011000000000000000D000000000000000C000000000000000B000000000000000A0000000000000006000000000000000500000000000000040000000000000003000000000000001F000000000000001E000000000000001D000000000000001C000000000000001800000000000000170000000000000016000000000000001500000000000000110000000000000010000000000000000F000000000000000E000000000000000A0000000000000009000000000000000800000000000000070000000000000020000000000000001F000000000000001E000000000000001D0000000000000019000000000000001800000000000000170000000000000016000000000000001200000000000000110000000000000010000000000000000F000000000000000B000000000000000A0000000000000009000000000000000800000000000000210000000000000020000000000000001F000000000000001E000000000000001A0000000000000019000000000000001800000000000000170000000000000013000000000000001200000000000000110000000000000010000000000000000C000000000000000B000000000000000A0000000000000009000000000000002200000000000000210000000000000020000000000000001F000000000000001B000000000000001A000000000000001900000000000000180000000000000014000000000000001300000000000000120000000000000011000000000000000D000000000000000C000000000000000B000000000000000A0000000000000026000000000000002500000000000000240000000000000023000000000000001F000000000000001E000000000000001D000000000000001C000000000000001800000000000000170000000000000016000000000000001500000000000000110000000000000010000000000000000F000000000000000E00000000000000270000000000000026000000000000002500000000000000240000000000000020000000000000001F000000000000001E000000000000001D0000000000000019000000000000001800000000000000170000000000000016000000000000001200000000000000110000000000000010000000000000000F000000000000002800000000000000270000000000000026000000000000002500000000000000210000000000000020000000000000001F000000000000001E000000000000001A00000000000000190000000000000018000000000000001700000000000000130000000000000012000000000000001100000000000000100000000000000029000000000000002800000000000000270000000000000026000000000000002200000000000000210000000000000020000000000000001F000000000000001B000000000000001A000000000000001900000000000000180000000000000014000000000000001300000000000000120000000000000011000000000000002D000000000000002C000000000000002B000000000000002A0000000000000026000000000000002500000000000000240000000000000023000000000000001F000000000000001E000000000000001D000000000000001C0000000000000018000000000000001700000000000000160000000000000015000000000000002E000000000000002D000000000000002C000000000000002B00000000000000270000000000000026000000000000002500000000000000240000000000000020000000000000001F000000000000001E000000000000001D0000000000000019000000000000001800000000000000170000000000000016000000000000002F000000000000002E000000000000002D000000000000002C000000000000002800000000000000270000000000000026000000000000002500000000000000210000000000000020000000000000001F000000000000001E000000000000001A0000000000000019000000000000001800000000000000170000000000000030000000000000002F000000000000002E000000000000002D0000000000000029000000000000002800000000000000270000000000000026000000000000002200000000000000210000000000000020000000000000001F000000000000001B000000000000001A0000000000000019000000000000001800000000000000"
    }
  }
#-}
