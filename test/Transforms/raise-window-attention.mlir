// RUN: swin-opt %s --rpe-raise-window-attention -split-input-file | FileCheck %s
// RUN: swin-opt %s --rpe-raise-window-attention --rpe-fuse-bias-softmax -split-input-file | FileCheck %s --check-prefix=FUSED

// Swin attention as torch-mlir writes it (linalg-on-tensors), hand-reduced
// to a 2x2 window, 2 heads, head_dim 2 and 2 windows so that the index and
// the masks can be read: q, k, v arrive split by heads, v head-merged; then
// the single-window form, and the attention spelled out in linalg around rpe
// ops as a framework lowers it (@spelled...). The exported modules are in
// raise-imported.mlir. Every function with a C interface is also compiled
// and run against NumPy by test/Execution/raise-handwritten.test (whose
// helper restates the index and mask constants used here); the near misses
// without one are checked here only.

// CHECK-LABEL: func @swin
// CHECK-SAME: (%[[Q:.*]]: tensor<2x2x4x2xf32>, %[[K:.*]]: tensor<2x2x4x2xf32>, %[[V:.*]]: tensor<4x4x2xf32>, %[[T:.*]]: tensor<9x2xf32>)
// CHECK: %[[B:.*]] = rpe.lookup %[[T]] {window = array<i64: 2, 2>} : tensor<9x2xf32> -> tensor<2x4x4xf32>
// CHECK: %[[V4:.*]] = tensor.expand_shape %[[V]] {{\[}}[0, 1], [2], [3]] output_shape [2, 2, 4, 2]
// CHECK: %[[A:.*]] = rpe.window_attention ins(%[[Q]], %[[K]], %[[V4]] : {{.*}}) bias(%[[B]] : tensor<2x4x4xf32>) {scale = 0.707106769 : f32} -> tensor<2x2x4x2xf32>
// CHECK: %[[R:.*]] = tensor.collapse_shape %[[A]] {{\[}}[0, 1], [2], [3]] : tensor<2x2x4x2xf32> into tensor<4x4x2xf32>
// CHECK: return %[[R]]
// CHECK-NOT: linalg.batch_matmul
// FUSED-LABEL: func @swin
// FUSED: rpe.fused_window_attention
// FUSED-SAME: {scale = 0.707106769 : f32, window = array<i64: 2, 2>}
// FUSED-NOT: rpe.window_attention
// timm's spelling: wrapped gather, decomposed softmax with an argmax.
func.func @swin(%q: tensor<2x2x4x2xf32>, %k: tensor<2x2x4x2xf32>, %v: tensor<4x4x2xf32>, %table: tensor<9x2xf32>) -> tensor<4x4x2xf32> attributes {llvm.emit_c_interface} {
  %c0_i64 = arith.constant 0 : i64
  %c9_i64 = arith.constant 9 : i64
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.70710678118654757 : f64
  %idx = arith.constant dense<[[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]> : tensor<4x4xi64>
  %e_q = tensor.empty() : tensor<2x2x4x2xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<2x2x4x2xf32>) outs(%e_q : tensor<2x2x4x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %scale : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x4x2xf32>
  %e_kt = tensor.empty() : tensor<2x2x2x4xf32>
  %kt = linalg.transpose ins(%k : tensor<2x2x4x2xf32>) outs(%e_kt : tensor<2x2x2x4xf32>) permutation = [0, 1, 3, 2]
  %qc = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<2x2x4x2xf32> into tensor<4x4x2xf32>
  %kc = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<2x2x2x4xf32> into tensor<4x2x4xf32>
  %e_s = tensor.empty() : tensor<4x4x4xf32>
  %f_s = linalg.fill ins(%zero : f32) outs(%e_s : tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %s = linalg.batch_matmul ins(%qc, %kc : tensor<4x4x2xf32>, tensor<4x2x4xf32>) outs(%f_s : tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %s4 = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape [2, 2, 4, 4] : tensor<4x4x4xf32> into tensor<2x2x4x4xf32>
  %e44 = tensor.empty() : tensor<2x2x4x4xf32>
  %ic = tensor.collapse_shape %idx [[0, 1]] : tensor<4x4xi64> into tensor<16xi64>
  %e_g = tensor.empty() : tensor<16x2xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%ic : tensor<16xi64>) outs(%e_g : tensor<16x2xf32>) {
  ^bb0(%in: i64, %out: f32):
    %neg = arith.cmpi slt, %in, %c0_i64 : i64
    %wrapped = arith.addi %in, %c9_i64 : i64
    %row = arith.select %neg, %wrapped, %in : i64
    %i = arith.index_cast %row : i64 to index
    %h = linalg.index 1 : index
    %x = tensor.extract %table[%i, %h] : tensor<9x2xf32>
    linalg.yield %x : f32
  } -> tensor<16x2xf32>
  %g3 = tensor.expand_shape %g [[0, 1], [2]] output_shape [4, 4, 2] : tensor<16x2xf32> into tensor<4x4x2xf32>
  %e_b = tensor.empty() : tensor<2x4x4xf32>
  %b = linalg.transpose ins(%g3 : tensor<4x4x2xf32>) outs(%e_b : tensor<2x4x4xf32>) permutation = [2, 0, 1]
  %b4 = tensor.expand_shape %b [[0, 1], [2], [3]] output_shape [1, 2, 4, 4] : tensor<2x4x4xf32> into tensor<1x2x4x4xf32>
  %sb = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %b4 : tensor<2x2x4x4xf32>, tensor<1x2x4x4xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.addf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %e_i = tensor.empty() : tensor<2x2x4xi64>
  %f_i = linalg.fill ins(%c0_i64 : i64) outs(%e_i : tensor<2x2x4xi64>) -> tensor<2x2x4xi64>
  %e_m = tensor.empty() : tensor<2x2x4xf32>
  %f_m = linalg.fill ins(%ninf : f32) outs(%e_m : tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  %max:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%sb : tensor<2x2x4x4xf32>) outs(%f_m, %f_i : tensor<2x2x4xf32>, tensor<2x2x4xi64>) {
  ^bb0(%in: f32, %out: f32, %out_1: i64):
    %j = linalg.index 3 : index
    %ji = arith.index_cast %j : index to i64
    %mx = arith.maximumf %in, %out : f32
    %gt = arith.cmpf ogt, %in, %out : f32
    %am = arith.select %gt, %ji, %out_1 : i64
    linalg.yield %mx, %am : f32, i64
  } -> (tensor<2x2x4xf32>, tensor<2x2x4xi64>)
  %maxe = tensor.expand_shape %max#0 [[0], [1], [2, 3]] output_shape [2, 2, 4, 1] : tensor<2x2x4xf32> into tensor<2x2x4x1xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sb, %maxe : tensor<2x2x4x4xf32>, tensor<2x2x4x1xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.subf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sub : tensor<2x2x4x4xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = math.exp %in : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %e_1 = tensor.empty() : tensor<2x2x4x1xf32>
  %f_1 = linalg.fill ins(%zero : f32) outs(%e_1 : tensor<2x2x4x1xf32>) -> tensor<2x2x4x1xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%exp : tensor<2x2x4x4xf32>) outs(%f_1 : tensor<2x2x4x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.addf %in, %out : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x1xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x2x4x4xf32>, tensor<2x2x4x1xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.divf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %pc = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<2x2x4x4xf32> into tensor<4x4x4xf32>
  %e_o = tensor.empty() : tensor<4x4x2xf32>
  %f_o = linalg.fill ins(%zero : f32) outs(%e_o : tensor<4x4x2xf32>) -> tensor<4x4x2xf32>
  %o = linalg.batch_matmul ins(%pc, %v : tensor<4x4x4xf32>, tensor<4x4x2xf32>) outs(%f_o : tensor<4x4x2xf32>) -> tensor<4x4x2xf32>
  return %o : tensor<4x4x2xf32>
}

// -----

// CHECK-LABEL: func @nowrap_linalg_softmax
// CHECK: rpe.lookup %{{.*}} {window = array<i64: 2, 2>}
// CHECK: rpe.window_attention
// CHECK-NOT: linalg.softmax
// FUSED-LABEL: func @nowrap_linalg_softmax
// FUSED: rpe.fused_window_attention
// A gather without the negative-index wrap, linalg.softmax.
func.func @nowrap_linalg_softmax(%q: tensor<2x2x4x2xf32>, %k: tensor<2x2x4x2xf32>, %v: tensor<4x4x2xf32>, %table: tensor<9x2xf32>) -> tensor<4x4x2xf32> attributes {llvm.emit_c_interface} {
  %c0_i64 = arith.constant 0 : i64
  %c9_i64 = arith.constant 9 : i64
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.70710678118654757 : f64
  %idx = arith.constant dense<[[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]> : tensor<4x4xi64>
  %e_q = tensor.empty() : tensor<2x2x4x2xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<2x2x4x2xf32>) outs(%e_q : tensor<2x2x4x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %scale : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x4x2xf32>
  %e_kt = tensor.empty() : tensor<2x2x2x4xf32>
  %kt = linalg.transpose ins(%k : tensor<2x2x4x2xf32>) outs(%e_kt : tensor<2x2x2x4xf32>) permutation = [0, 1, 3, 2]
  %qc = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<2x2x4x2xf32> into tensor<4x4x2xf32>
  %kc = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<2x2x2x4xf32> into tensor<4x2x4xf32>
  %e_s = tensor.empty() : tensor<4x4x4xf32>
  %f_s = linalg.fill ins(%zero : f32) outs(%e_s : tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %s = linalg.batch_matmul ins(%qc, %kc : tensor<4x4x2xf32>, tensor<4x2x4xf32>) outs(%f_s : tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %s4 = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape [2, 2, 4, 4] : tensor<4x4x4xf32> into tensor<2x2x4x4xf32>
  %e44 = tensor.empty() : tensor<2x2x4x4xf32>
  %ic = tensor.collapse_shape %idx [[0, 1]] : tensor<4x4xi64> into tensor<16xi64>
  %e_g = tensor.empty() : tensor<16x2xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%ic : tensor<16xi64>) outs(%e_g : tensor<16x2xf32>) {
  ^bb0(%in: i64, %out: f32):
    %i = arith.index_cast %in : i64 to index
    %h = linalg.index 1 : index
    %x = tensor.extract %table[%i, %h] : tensor<9x2xf32>
    linalg.yield %x : f32
  } -> tensor<16x2xf32>
  %g3 = tensor.expand_shape %g [[0, 1], [2]] output_shape [4, 4, 2] : tensor<16x2xf32> into tensor<4x4x2xf32>
  %e_b = tensor.empty() : tensor<2x4x4xf32>
  %b = linalg.transpose ins(%g3 : tensor<4x4x2xf32>) outs(%e_b : tensor<2x4x4xf32>) permutation = [2, 0, 1]
  %b4 = tensor.expand_shape %b [[0, 1], [2], [3]] output_shape [1, 2, 4, 4] : tensor<2x4x4xf32> into tensor<1x2x4x4xf32>
  %sb = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %b4 : tensor<2x2x4x4xf32>, tensor<1x2x4x4xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.addf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %p = linalg.softmax dimension(3) ins(%sb : tensor<2x2x4x4xf32>) outs(%e44 : tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %pc = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<2x2x4x4xf32> into tensor<4x4x4xf32>
  %e_o = tensor.empty() : tensor<4x4x2xf32>
  %f_o = linalg.fill ins(%zero : f32) outs(%e_o : tensor<4x4x2xf32>) -> tensor<4x4x2xf32>
  %o = linalg.batch_matmul ins(%pc, %v : tensor<4x4x4xf32>, tensor<4x4x2xf32>) outs(%f_o : tensor<4x4x2xf32>) -> tensor<4x4x2xf32>
  return %o : tensor<4x4x2xf32>
}

// -----

// CHECK-LABEL: func @shift_mask
// CHECK: %[[B:.*]] = rpe.lookup
// CHECK: %[[M:.*]] = rpe.shift_mask {resolution = array<i64: 2, 4>, shift = array<i64: 1, 1>, window = array<i64: 2, 2>} : tensor<2x4x4xf32>
// CHECK: rpe.window_attention ins({{.*}}) bias(%[[B]] : tensor<2x4x4xf32>) mask(%[[M]] : tensor<2x4x4xf32>)
// FUSED-LABEL: func @shift_mask
// FUSED: rpe.fused_window_attention
// FUSED-SAME: resolution = array<i64: 2, 4>, scale = 0.707106769 : f32, shift = array<i64: 1, 1>, window = array<i64: 2, 2>
// A constant mask that is Swin's for a 2x4 map shifted by 1.
func.func @shift_mask(%q: tensor<2x2x4x2xf32>, %k: tensor<2x2x4x2xf32>, %v: tensor<4x4x2xf32>, %table: tensor<9x2xf32>) -> tensor<4x4x2xf32> attributes {llvm.emit_c_interface} {
  %c0_i64 = arith.constant 0 : i64
  %c9_i64 = arith.constant 9 : i64
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.70710678118654757 : f64
  %idx = arith.constant dense<[[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]> : tensor<4x4xi64>
  %e_q = tensor.empty() : tensor<2x2x4x2xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<2x2x4x2xf32>) outs(%e_q : tensor<2x2x4x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %scale : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x4x2xf32>
  %e_kt = tensor.empty() : tensor<2x2x2x4xf32>
  %kt = linalg.transpose ins(%k : tensor<2x2x4x2xf32>) outs(%e_kt : tensor<2x2x2x4xf32>) permutation = [0, 1, 3, 2]
  %qc = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<2x2x4x2xf32> into tensor<4x4x2xf32>
  %kc = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<2x2x2x4xf32> into tensor<4x2x4xf32>
  %e_s = tensor.empty() : tensor<4x4x4xf32>
  %f_s = linalg.fill ins(%zero : f32) outs(%e_s : tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %s = linalg.batch_matmul ins(%qc, %kc : tensor<4x4x2xf32>, tensor<4x2x4xf32>) outs(%f_s : tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %s4 = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape [2, 2, 4, 4] : tensor<4x4x4xf32> into tensor<2x2x4x4xf32>
  %e44 = tensor.empty() : tensor<2x2x4x4xf32>
  %ic = tensor.collapse_shape %idx [[0, 1]] : tensor<4x4xi64> into tensor<16xi64>
  %e_g = tensor.empty() : tensor<16x2xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%ic : tensor<16xi64>) outs(%e_g : tensor<16x2xf32>) {
  ^bb0(%in: i64, %out: f32):
    %neg = arith.cmpi slt, %in, %c0_i64 : i64
    %wrapped = arith.addi %in, %c9_i64 : i64
    %row = arith.select %neg, %wrapped, %in : i64
    %i = arith.index_cast %row : i64 to index
    %h = linalg.index 1 : index
    %x = tensor.extract %table[%i, %h] : tensor<9x2xf32>
    linalg.yield %x : f32
  } -> tensor<16x2xf32>
  %g3 = tensor.expand_shape %g [[0, 1], [2]] output_shape [4, 4, 2] : tensor<16x2xf32> into tensor<4x4x2xf32>
  %e_b = tensor.empty() : tensor<2x4x4xf32>
  %b = linalg.transpose ins(%g3 : tensor<4x4x2xf32>) outs(%e_b : tensor<2x4x4xf32>) permutation = [2, 0, 1]
  %b4 = tensor.expand_shape %b [[0, 1], [2], [3]] output_shape [1, 2, 4, 4] : tensor<2x4x4xf32> into tensor<1x2x4x4xf32>
  %sb = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %b4 : tensor<2x2x4x4xf32>, tensor<1x2x4x4xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.addf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %sb5 = tensor.expand_shape %sb [[0, 1], [2], [3], [4]] output_shape [1, 2, 2, 4, 4] : tensor<2x2x4x4xf32> into tensor<1x2x2x4x4xf32>
  %mask = arith.constant dense<[[[0.0, 0.0, -100.0, -100.0], [0.0, 0.0, -100.0, -100.0], [-100.0, -100.0, 0.0, 0.0], [-100.0, -100.0, 0.0, 0.0]], [[0.0, -100.0, -100.0, -100.0], [-100.0, 0.0, -100.0, -100.0], [-100.0, -100.0, 0.0, -100.0], [-100.0, -100.0, -100.0, 0.0]]]> : tensor<2x4x4xf32>
  %m5 = tensor.expand_shape %mask [[0, 1], [2, 3], [4]] output_shape [1, 2, 1, 4, 4] : tensor<2x4x4xf32> into tensor<1x2x1x4x4xf32>
  %e5 = tensor.empty() : tensor<1x2x2x4x4xf32>
  %sm5 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (0, d1, 0, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%sb5, %m5 : tensor<1x2x2x4x4xf32>, tensor<1x2x1x4x4xf32>) outs(%e5 : tensor<1x2x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.addf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<1x2x2x4x4xf32>
  %sm = tensor.collapse_shape %sm5 [[0, 1], [2], [3], [4]] : tensor<1x2x2x4x4xf32> into tensor<2x2x4x4xf32>
  %e_i = tensor.empty() : tensor<2x2x4xi64>
  %f_i = linalg.fill ins(%c0_i64 : i64) outs(%e_i : tensor<2x2x4xi64>) -> tensor<2x2x4xi64>
  %e_m = tensor.empty() : tensor<2x2x4xf32>
  %f_m = linalg.fill ins(%ninf : f32) outs(%e_m : tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  %max:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%sm : tensor<2x2x4x4xf32>) outs(%f_m, %f_i : tensor<2x2x4xf32>, tensor<2x2x4xi64>) {
  ^bb0(%in: f32, %out: f32, %out_1: i64):
    %j = linalg.index 3 : index
    %ji = arith.index_cast %j : index to i64
    %mx = arith.maximumf %in, %out : f32
    %gt = arith.cmpf ogt, %in, %out : f32
    %am = arith.select %gt, %ji, %out_1 : i64
    linalg.yield %mx, %am : f32, i64
  } -> (tensor<2x2x4xf32>, tensor<2x2x4xi64>)
  %maxe = tensor.expand_shape %max#0 [[0], [1], [2, 3]] output_shape [2, 2, 4, 1] : tensor<2x2x4xf32> into tensor<2x2x4x1xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sm, %maxe : tensor<2x2x4x4xf32>, tensor<2x2x4x1xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.subf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sub : tensor<2x2x4x4xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = math.exp %in : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %e_1 = tensor.empty() : tensor<2x2x4x1xf32>
  %f_1 = linalg.fill ins(%zero : f32) outs(%e_1 : tensor<2x2x4x1xf32>) -> tensor<2x2x4x1xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%exp : tensor<2x2x4x4xf32>) outs(%f_1 : tensor<2x2x4x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.addf %in, %out : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x1xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x2x4x4xf32>, tensor<2x2x4x1xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.divf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %pc = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<2x2x4x4xf32> into tensor<4x4x4xf32>
  %e_o = tensor.empty() : tensor<4x4x2xf32>
  %f_o = linalg.fill ins(%zero : f32) outs(%e_o : tensor<4x4x2xf32>) -> tensor<4x4x2xf32>
  %o = linalg.batch_matmul ins(%pc, %v : tensor<4x4x4xf32>, tensor<4x4x2xf32>) outs(%f_o : tensor<4x4x2xf32>) -> tensor<4x4x2xf32>
  return %o : tensor<4x4x2xf32>
}

// -----

// CHECK-LABEL: func @other_mask
// CHECK: %[[M:.*]] = arith.constant dense<{{.*}}-5.000000e+01{{.*}}> : tensor<2x4x4xf32>
// CHECK-NOT: rpe.shift_mask
// CHECK: rpe.window_attention ins({{.*}}) bias(%{{.*}} : tensor<2x4x4xf32>) mask(%[[M]] : tensor<2x4x4xf32>)
// FUSED-LABEL: func @other_mask
// FUSED: %[[FM:.*]] = arith.constant dense<{{.*}}-5.000000e+01{{.*}}> : tensor<2x4x4xf32>
// FUSED: rpe.fused_window_attention {{.*}} mask(%[[FM]] : tensor<2x4x4xf32>)
// FUSED-NOT: rpe.window_attention
// A constant mask that is not a shift mask: an explicit operand, of the
// fused kernel too.
func.func @other_mask(%q: tensor<2x2x4x2xf32>, %k: tensor<2x2x4x2xf32>, %v: tensor<4x4x2xf32>, %table: tensor<9x2xf32>) -> tensor<4x4x2xf32> attributes {llvm.emit_c_interface} {
  %c0_i64 = arith.constant 0 : i64
  %c9_i64 = arith.constant 9 : i64
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.70710678118654757 : f64
  %idx = arith.constant dense<[[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]> : tensor<4x4xi64>
  %e_q = tensor.empty() : tensor<2x2x4x2xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<2x2x4x2xf32>) outs(%e_q : tensor<2x2x4x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %scale : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x4x2xf32>
  %e_kt = tensor.empty() : tensor<2x2x2x4xf32>
  %kt = linalg.transpose ins(%k : tensor<2x2x4x2xf32>) outs(%e_kt : tensor<2x2x2x4xf32>) permutation = [0, 1, 3, 2]
  %qc = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<2x2x4x2xf32> into tensor<4x4x2xf32>
  %kc = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<2x2x2x4xf32> into tensor<4x2x4xf32>
  %e_s = tensor.empty() : tensor<4x4x4xf32>
  %f_s = linalg.fill ins(%zero : f32) outs(%e_s : tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %s = linalg.batch_matmul ins(%qc, %kc : tensor<4x4x2xf32>, tensor<4x2x4xf32>) outs(%f_s : tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %s4 = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape [2, 2, 4, 4] : tensor<4x4x4xf32> into tensor<2x2x4x4xf32>
  %e44 = tensor.empty() : tensor<2x2x4x4xf32>
  %ic = tensor.collapse_shape %idx [[0, 1]] : tensor<4x4xi64> into tensor<16xi64>
  %e_g = tensor.empty() : tensor<16x2xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%ic : tensor<16xi64>) outs(%e_g : tensor<16x2xf32>) {
  ^bb0(%in: i64, %out: f32):
    %neg = arith.cmpi slt, %in, %c0_i64 : i64
    %wrapped = arith.addi %in, %c9_i64 : i64
    %row = arith.select %neg, %wrapped, %in : i64
    %i = arith.index_cast %row : i64 to index
    %h = linalg.index 1 : index
    %x = tensor.extract %table[%i, %h] : tensor<9x2xf32>
    linalg.yield %x : f32
  } -> tensor<16x2xf32>
  %g3 = tensor.expand_shape %g [[0, 1], [2]] output_shape [4, 4, 2] : tensor<16x2xf32> into tensor<4x4x2xf32>
  %e_b = tensor.empty() : tensor<2x4x4xf32>
  %b = linalg.transpose ins(%g3 : tensor<4x4x2xf32>) outs(%e_b : tensor<2x4x4xf32>) permutation = [2, 0, 1]
  %b4 = tensor.expand_shape %b [[0, 1], [2], [3]] output_shape [1, 2, 4, 4] : tensor<2x4x4xf32> into tensor<1x2x4x4xf32>
  %sb = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %b4 : tensor<2x2x4x4xf32>, tensor<1x2x4x4xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.addf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %sb5 = tensor.expand_shape %sb [[0, 1], [2], [3], [4]] output_shape [1, 2, 2, 4, 4] : tensor<2x2x4x4xf32> into tensor<1x2x2x4x4xf32>
  %mask = arith.constant dense<[[[0.0, 0.0, -100.0, -100.0], [0.0, 0.0, -100.0, -100.0], [-100.0, -100.0, 0.0, 0.0], [-100.0, -100.0, 0.0, 0.0]], [[0.0, -50.0, -100.0, -100.0], [-100.0, 0.0, -100.0, -100.0], [-100.0, -100.0, 0.0, -100.0], [-100.0, -100.0, -100.0, 0.0]]]> : tensor<2x4x4xf32>
  %m5 = tensor.expand_shape %mask [[0, 1], [2, 3], [4]] output_shape [1, 2, 1, 4, 4] : tensor<2x4x4xf32> into tensor<1x2x1x4x4xf32>
  %e5 = tensor.empty() : tensor<1x2x2x4x4xf32>
  %sm5 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (0, d1, 0, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%sb5, %m5 : tensor<1x2x2x4x4xf32>, tensor<1x2x1x4x4xf32>) outs(%e5 : tensor<1x2x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.addf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<1x2x2x4x4xf32>
  %sm = tensor.collapse_shape %sm5 [[0, 1], [2], [3], [4]] : tensor<1x2x2x4x4xf32> into tensor<2x2x4x4xf32>
  %e_i = tensor.empty() : tensor<2x2x4xi64>
  %f_i = linalg.fill ins(%c0_i64 : i64) outs(%e_i : tensor<2x2x4xi64>) -> tensor<2x2x4xi64>
  %e_m = tensor.empty() : tensor<2x2x4xf32>
  %f_m = linalg.fill ins(%ninf : f32) outs(%e_m : tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  %max:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%sm : tensor<2x2x4x4xf32>) outs(%f_m, %f_i : tensor<2x2x4xf32>, tensor<2x2x4xi64>) {
  ^bb0(%in: f32, %out: f32, %out_1: i64):
    %j = linalg.index 3 : index
    %ji = arith.index_cast %j : index to i64
    %mx = arith.maximumf %in, %out : f32
    %gt = arith.cmpf ogt, %in, %out : f32
    %am = arith.select %gt, %ji, %out_1 : i64
    linalg.yield %mx, %am : f32, i64
  } -> (tensor<2x2x4xf32>, tensor<2x2x4xi64>)
  %maxe = tensor.expand_shape %max#0 [[0], [1], [2, 3]] output_shape [2, 2, 4, 1] : tensor<2x2x4xf32> into tensor<2x2x4x1xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sm, %maxe : tensor<2x2x4x4xf32>, tensor<2x2x4x1xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.subf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sub : tensor<2x2x4x4xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = math.exp %in : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %e_1 = tensor.empty() : tensor<2x2x4x1xf32>
  %f_1 = linalg.fill ins(%zero : f32) outs(%e_1 : tensor<2x2x4x1xf32>) -> tensor<2x2x4x1xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%exp : tensor<2x2x4x4xf32>) outs(%f_1 : tensor<2x2x4x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.addf %in, %out : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x1xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x2x4x4xf32>, tensor<2x2x4x1xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.divf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %pc = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<2x2x4x4xf32> into tensor<4x4x4xf32>
  %e_o = tensor.empty() : tensor<4x4x2xf32>
  %f_o = linalg.fill ins(%zero : f32) outs(%e_o : tensor<4x4x2xf32>) -> tensor<4x4x2xf32>
  %o = linalg.batch_matmul ins(%pc, %v : tensor<4x4x4xf32>, tensor<4x4x2xf32>) outs(%f_o : tensor<4x4x2xf32>) -> tensor<4x4x2xf32>
  return %o : tensor<4x4x2xf32>
}

// -----

// CHECK-LABEL: func @scrambled_index
// CHECK-NOT: rpe.
// CHECK: linalg.batch_matmul
// CHECK: tensor.extract
// CHECK: linalg.batch_matmul
// FUSED-LABEL: func @scrambled_index
// FUSED-NOT: rpe.
// Two index entries swapped: not Swin's index, left as it is.
func.func @scrambled_index(%q: tensor<2x2x4x2xf32>, %k: tensor<2x2x4x2xf32>, %v: tensor<4x4x2xf32>, %table: tensor<9x2xf32>) -> tensor<4x4x2xf32> attributes {llvm.emit_c_interface} {
  %c0_i64 = arith.constant 0 : i64
  %c9_i64 = arith.constant 9 : i64
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.70710678118654757 : f64
  %idx = arith.constant dense<[[4, 1, 3, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]> : tensor<4x4xi64>
  %e_q = tensor.empty() : tensor<2x2x4x2xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<2x2x4x2xf32>) outs(%e_q : tensor<2x2x4x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %scale : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x4x2xf32>
  %e_kt = tensor.empty() : tensor<2x2x2x4xf32>
  %kt = linalg.transpose ins(%k : tensor<2x2x4x2xf32>) outs(%e_kt : tensor<2x2x2x4xf32>) permutation = [0, 1, 3, 2]
  %qc = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<2x2x4x2xf32> into tensor<4x4x2xf32>
  %kc = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<2x2x2x4xf32> into tensor<4x2x4xf32>
  %e_s = tensor.empty() : tensor<4x4x4xf32>
  %f_s = linalg.fill ins(%zero : f32) outs(%e_s : tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %s = linalg.batch_matmul ins(%qc, %kc : tensor<4x4x2xf32>, tensor<4x2x4xf32>) outs(%f_s : tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %s4 = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape [2, 2, 4, 4] : tensor<4x4x4xf32> into tensor<2x2x4x4xf32>
  %e44 = tensor.empty() : tensor<2x2x4x4xf32>
  %ic = tensor.collapse_shape %idx [[0, 1]] : tensor<4x4xi64> into tensor<16xi64>
  %e_g = tensor.empty() : tensor<16x2xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%ic : tensor<16xi64>) outs(%e_g : tensor<16x2xf32>) {
  ^bb0(%in: i64, %out: f32):
    %neg = arith.cmpi slt, %in, %c0_i64 : i64
    %wrapped = arith.addi %in, %c9_i64 : i64
    %row = arith.select %neg, %wrapped, %in : i64
    %i = arith.index_cast %row : i64 to index
    %h = linalg.index 1 : index
    %x = tensor.extract %table[%i, %h] : tensor<9x2xf32>
    linalg.yield %x : f32
  } -> tensor<16x2xf32>
  %g3 = tensor.expand_shape %g [[0, 1], [2]] output_shape [4, 4, 2] : tensor<16x2xf32> into tensor<4x4x2xf32>
  %e_b = tensor.empty() : tensor<2x4x4xf32>
  %b = linalg.transpose ins(%g3 : tensor<4x4x2xf32>) outs(%e_b : tensor<2x4x4xf32>) permutation = [2, 0, 1]
  %b4 = tensor.expand_shape %b [[0, 1], [2], [3]] output_shape [1, 2, 4, 4] : tensor<2x4x4xf32> into tensor<1x2x4x4xf32>
  %sb = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %b4 : tensor<2x2x4x4xf32>, tensor<1x2x4x4xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.addf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %e_i = tensor.empty() : tensor<2x2x4xi64>
  %f_i = linalg.fill ins(%c0_i64 : i64) outs(%e_i : tensor<2x2x4xi64>) -> tensor<2x2x4xi64>
  %e_m = tensor.empty() : tensor<2x2x4xf32>
  %f_m = linalg.fill ins(%ninf : f32) outs(%e_m : tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  %max:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%sb : tensor<2x2x4x4xf32>) outs(%f_m, %f_i : tensor<2x2x4xf32>, tensor<2x2x4xi64>) {
  ^bb0(%in: f32, %out: f32, %out_1: i64):
    %j = linalg.index 3 : index
    %ji = arith.index_cast %j : index to i64
    %mx = arith.maximumf %in, %out : f32
    %gt = arith.cmpf ogt, %in, %out : f32
    %am = arith.select %gt, %ji, %out_1 : i64
    linalg.yield %mx, %am : f32, i64
  } -> (tensor<2x2x4xf32>, tensor<2x2x4xi64>)
  %maxe = tensor.expand_shape %max#0 [[0], [1], [2, 3]] output_shape [2, 2, 4, 1] : tensor<2x2x4xf32> into tensor<2x2x4x1xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sb, %maxe : tensor<2x2x4x4xf32>, tensor<2x2x4x1xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.subf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sub : tensor<2x2x4x4xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = math.exp %in : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %e_1 = tensor.empty() : tensor<2x2x4x1xf32>
  %f_1 = linalg.fill ins(%zero : f32) outs(%e_1 : tensor<2x2x4x1xf32>) -> tensor<2x2x4x1xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%exp : tensor<2x2x4x4xf32>) outs(%f_1 : tensor<2x2x4x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.addf %in, %out : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x1xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x2x4x4xf32>, tensor<2x2x4x1xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.divf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %pc = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<2x2x4x4xf32> into tensor<4x4x4xf32>
  %e_o = tensor.empty() : tensor<4x4x2xf32>
  %f_o = linalg.fill ins(%zero : f32) outs(%e_o : tensor<4x4x2xf32>) -> tensor<4x4x2xf32>
  %o = linalg.batch_matmul ins(%pc, %v : tensor<4x4x4xf32>, tensor<4x4x2xf32>) outs(%f_o : tensor<4x4x2xf32>) -> tensor<4x4x2xf32>
  return %o : tensor<4x4x2xf32>
}

// -----

// CHECK-LABEL: func @no_bias
// CHECK-NOT: rpe.
// CHECK: linalg.batch_matmul
// CHECK: linalg.batch_matmul
// FUSED-LABEL: func @no_bias
// FUSED-NOT: rpe.
// No bias: not Swin's attention, left as it is.
func.func @no_bias(%q: tensor<2x2x4x2xf32>, %k: tensor<2x2x4x2xf32>, %v: tensor<4x4x2xf32>, %table: tensor<9x2xf32>) -> tensor<4x4x2xf32> attributes {llvm.emit_c_interface} {
  %c0_i64 = arith.constant 0 : i64
  %c9_i64 = arith.constant 9 : i64
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.70710678118654757 : f64
  %idx = arith.constant dense<[[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]> : tensor<4x4xi64>
  %e_q = tensor.empty() : tensor<2x2x4x2xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<2x2x4x2xf32>) outs(%e_q : tensor<2x2x4x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %scale : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x4x2xf32>
  %e_kt = tensor.empty() : tensor<2x2x2x4xf32>
  %kt = linalg.transpose ins(%k : tensor<2x2x4x2xf32>) outs(%e_kt : tensor<2x2x2x4xf32>) permutation = [0, 1, 3, 2]
  %qc = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<2x2x4x2xf32> into tensor<4x4x2xf32>
  %kc = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<2x2x2x4xf32> into tensor<4x2x4xf32>
  %e_s = tensor.empty() : tensor<4x4x4xf32>
  %f_s = linalg.fill ins(%zero : f32) outs(%e_s : tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %s = linalg.batch_matmul ins(%qc, %kc : tensor<4x4x2xf32>, tensor<4x2x4xf32>) outs(%f_s : tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %s4 = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape [2, 2, 4, 4] : tensor<4x4x4xf32> into tensor<2x2x4x4xf32>
  %e44 = tensor.empty() : tensor<2x2x4x4xf32>
  %e_i = tensor.empty() : tensor<2x2x4xi64>
  %f_i = linalg.fill ins(%c0_i64 : i64) outs(%e_i : tensor<2x2x4xi64>) -> tensor<2x2x4xi64>
  %e_m = tensor.empty() : tensor<2x2x4xf32>
  %f_m = linalg.fill ins(%ninf : f32) outs(%e_m : tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  %max:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%s4 : tensor<2x2x4x4xf32>) outs(%f_m, %f_i : tensor<2x2x4xf32>, tensor<2x2x4xi64>) {
  ^bb0(%in: f32, %out: f32, %out_1: i64):
    %j = linalg.index 3 : index
    %ji = arith.index_cast %j : index to i64
    %mx = arith.maximumf %in, %out : f32
    %gt = arith.cmpf ogt, %in, %out : f32
    %am = arith.select %gt, %ji, %out_1 : i64
    linalg.yield %mx, %am : f32, i64
  } -> (tensor<2x2x4xf32>, tensor<2x2x4xi64>)
  %maxe = tensor.expand_shape %max#0 [[0], [1], [2, 3]] output_shape [2, 2, 4, 1] : tensor<2x2x4xf32> into tensor<2x2x4x1xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %maxe : tensor<2x2x4x4xf32>, tensor<2x2x4x1xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.subf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sub : tensor<2x2x4x4xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = math.exp %in : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %e_1 = tensor.empty() : tensor<2x2x4x1xf32>
  %f_1 = linalg.fill ins(%zero : f32) outs(%e_1 : tensor<2x2x4x1xf32>) -> tensor<2x2x4x1xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%exp : tensor<2x2x4x4xf32>) outs(%f_1 : tensor<2x2x4x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.addf %in, %out : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x1xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x2x4x4xf32>, tensor<2x2x4x1xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.divf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %pc = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<2x2x4x4xf32> into tensor<4x4x4xf32>
  %e_o = tensor.empty() : tensor<4x4x2xf32>
  %f_o = linalg.fill ins(%zero : f32) outs(%e_o : tensor<4x4x2xf32>) -> tensor<4x4x2xf32>
  %o = linalg.batch_matmul ins(%pc, %v : tensor<4x4x4xf32>, tensor<4x4x2xf32>) outs(%f_o : tensor<4x4x2xf32>) -> tensor<4x4x2xf32>
  return %o : tensor<4x4x2xf32>
}

// -----

// CHECK-LABEL: func @single_window
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x4x2xf32>, %[[K:.*]]: tensor<1x2x4x2xf32>, %[[V:.*]]: tensor<2x4x2xf32>, %[[T:.*]]: tensor<9x2xf32>)
// CHECK: %[[B:.*]] = rpe.lookup %[[T]] {window = array<i64: 2, 2>} : tensor<9x2xf32> -> tensor<2x4x4xf32>
// CHECK: %[[V4:.*]] = tensor.expand_shape %[[V]] {{\[}}[0, 1], [2], [3]] output_shape [1, 2, 4, 2]
// CHECK: %[[A:.*]] = rpe.window_attention ins(%[[Q]], %[[K]], %[[V4]] : {{.*}}) bias(%[[B]] : tensor<2x4x4xf32>) {scale = 0.707106769 : f32} -> tensor<1x2x4x2xf32>
// CHECK: %[[R:.*]] = tensor.collapse_shape %[[A]] {{\[}}[0, 1], [2], [3]] : tensor<1x2x4x2xf32> into tensor<2x4x2xf32>
// CHECK: return %[[R]]
// FUSED-LABEL: func @single_window
// FUSED: rpe.fused_window_attention
// FUSED-SAME: {scale = 0.707106769 : f32, window = array<i64: 2, 2>}
// FUSED-NOT: rpe.window_attention
// One window (stage 4 of Swin-T at batch 1: a 7x7 map, window 7): the
// importer reads the [1, H, N, N] bias like the scores, through the
// identity map; with one window that loop has extent 1, so it is the
// broadcast.
func.func @single_window(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<2x4x2xf32>, %table: tensor<9x2xf32>) -> tensor<2x4x2xf32> attributes {llvm.emit_c_interface} {
  %zero = arith.constant 0.000000e+00 : f32
  %scale = arith.constant 0.70710678118654757 : f64
  %idx = arith.constant dense<[[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]> : tensor<4x4xi64>
  %e_q = tensor.empty() : tensor<1x2x4x2xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<1x2x4x2xf32>) outs(%e_q : tensor<1x2x4x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %scale : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<1x2x4x2xf32>
  %e_kt = tensor.empty() : tensor<1x2x2x4xf32>
  %kt = linalg.transpose ins(%k : tensor<1x2x4x2xf32>) outs(%e_kt : tensor<1x2x2x4xf32>) permutation = [0, 1, 3, 2]
  %qc = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<1x2x4x2xf32> into tensor<2x4x2xf32>
  %kc = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<1x2x2x4xf32> into tensor<2x2x4xf32>
  %e_s = tensor.empty() : tensor<2x4x4xf32>
  %f_s = linalg.fill ins(%zero : f32) outs(%e_s : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %s = linalg.batch_matmul ins(%qc, %kc : tensor<2x4x2xf32>, tensor<2x2x4xf32>) outs(%f_s : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %s4 = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape [1, 2, 4, 4] : tensor<2x4x4xf32> into tensor<1x2x4x4xf32>
  %e44 = tensor.empty() : tensor<1x2x4x4xf32>
  %ic = tensor.collapse_shape %idx [[0, 1]] : tensor<4x4xi64> into tensor<16xi64>
  %e_g = tensor.empty() : tensor<16x2xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%ic : tensor<16xi64>) outs(%e_g : tensor<16x2xf32>) {
  ^bb0(%in: i64, %out: f32):
    %i = arith.index_cast %in : i64 to index
    %h = linalg.index 1 : index
    %x = tensor.extract %table[%i, %h] : tensor<9x2xf32>
    linalg.yield %x : f32
  } -> tensor<16x2xf32>
  %g3 = tensor.expand_shape %g [[0, 1], [2]] output_shape [4, 4, 2] : tensor<16x2xf32> into tensor<4x4x2xf32>
  %e_b = tensor.empty() : tensor<2x4x4xf32>
  %b = linalg.transpose ins(%g3 : tensor<4x4x2xf32>) outs(%e_b : tensor<2x4x4xf32>) permutation = [2, 0, 1]
  %b4 = tensor.expand_shape %b [[0, 1], [2], [3]] output_shape [1, 2, 4, 4] : tensor<2x4x4xf32> into tensor<1x2x4x4xf32>
  %sb = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %b4 : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) outs(%e44 : tensor<1x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.addf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<1x2x4x4xf32>
  %p = linalg.softmax dimension(3) ins(%sb : tensor<1x2x4x4xf32>) outs(%e44 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %pc = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<1x2x4x4xf32> into tensor<2x4x4xf32>
  %e_o = tensor.empty() : tensor<2x4x2xf32>
  %f_o = linalg.fill ins(%zero : f32) outs(%e_o : tensor<2x4x2xf32>) -> tensor<2x4x2xf32>
  %o = linalg.batch_matmul ins(%pc, %v : tensor<2x4x4xf32>, tensor<2x4x2xf32>) outs(%f_o : tensor<2x4x2xf32>) -> tensor<2x4x2xf32>
  return %o : tensor<2x4x2xf32>
}

// -----

// BEiT's attention spelled in linalg (one image: a 2x2 grid and its class
// token, N = 5): the gathered index is BEiT's, Swin's between the grid's
// tokens and rows 9, 10, 11 of the table for the class token's row, column
// and corner, so it raises to a class-token lookup, which fuses.
// CHECK-LABEL: func @class_token
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x5x2xf32>, %[[K:.*]]: tensor<1x2x5x2xf32>, %[[V:.*]]: tensor<2x5x2xf32>, %[[T:.*]]: tensor<12x2xf32>)
// CHECK: %[[B:.*]] = rpe.lookup %[[T]] {class_token, window = array<i64: 2, 2>} : tensor<12x2xf32> -> tensor<2x5x5xf32>
// CHECK: rpe.window_attention ins(%[[Q]], %[[K]], %{{.*}} : {{.*}}) bias(%[[B]] : tensor<2x5x5xf32>) {scale = 0.707106769 : f32} -> tensor<1x2x5x2xf32>
// FUSED-LABEL: func @class_token
// FUSED: rpe.fused_window_attention
// FUSED-SAME: {class_token, scale = 0.707106769 : f32, window = array<i64: 2, 2>}
// FUSED-NOT: rpe.window_attention
func.func @class_token(%q: tensor<1x2x5x2xf32>, %k: tensor<1x2x5x2xf32>, %v: tensor<2x5x2xf32>, %table: tensor<12x2xf32>) -> tensor<2x5x2xf32> attributes {llvm.emit_c_interface} {
  %zero = arith.constant 0.000000e+00 : f32
  %scale = arith.constant 0.70710678118654757 : f64
  %idx = arith.constant dense<[[11, 9, 9, 9, 9], [10, 4, 3, 1, 0], [10, 5, 4, 2, 1], [10, 7, 6, 4, 3], [10, 8, 7, 5, 4]]> : tensor<5x5xi64>
  %e_q = tensor.empty() : tensor<1x2x5x2xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<1x2x5x2xf32>) outs(%e_q : tensor<1x2x5x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %scale : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<1x2x5x2xf32>
  %e_kt = tensor.empty() : tensor<1x2x2x5xf32>
  %kt = linalg.transpose ins(%k : tensor<1x2x5x2xf32>) outs(%e_kt : tensor<1x2x2x5xf32>) permutation = [0, 1, 3, 2]
  %qc = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<1x2x5x2xf32> into tensor<2x5x2xf32>
  %kc = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<1x2x2x5xf32> into tensor<2x2x5xf32>
  %e_s = tensor.empty() : tensor<2x5x5xf32>
  %f_s = linalg.fill ins(%zero : f32) outs(%e_s : tensor<2x5x5xf32>) -> tensor<2x5x5xf32>
  %s = linalg.batch_matmul ins(%qc, %kc : tensor<2x5x2xf32>, tensor<2x2x5xf32>) outs(%f_s : tensor<2x5x5xf32>) -> tensor<2x5x5xf32>
  %s4 = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape [1, 2, 5, 5] : tensor<2x5x5xf32> into tensor<1x2x5x5xf32>
  %e44 = tensor.empty() : tensor<1x2x5x5xf32>
  %ic = tensor.collapse_shape %idx [[0, 1]] : tensor<5x5xi64> into tensor<25xi64>
  %e_g = tensor.empty() : tensor<25x2xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%ic : tensor<25xi64>) outs(%e_g : tensor<25x2xf32>) {
  ^bb0(%in: i64, %out: f32):
    %i = arith.index_cast %in : i64 to index
    %h = linalg.index 1 : index
    %x = tensor.extract %table[%i, %h] : tensor<12x2xf32>
    linalg.yield %x : f32
  } -> tensor<25x2xf32>
  %g3 = tensor.expand_shape %g [[0, 1], [2]] output_shape [5, 5, 2] : tensor<25x2xf32> into tensor<5x5x2xf32>
  %e_b = tensor.empty() : tensor<2x5x5xf32>
  %b = linalg.transpose ins(%g3 : tensor<5x5x2xf32>) outs(%e_b : tensor<2x5x5xf32>) permutation = [2, 0, 1]
  %b4 = tensor.expand_shape %b [[0, 1], [2], [3]] output_shape [1, 2, 5, 5] : tensor<2x5x5xf32> into tensor<1x2x5x5xf32>
  %sb = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %b4 : tensor<1x2x5x5xf32>, tensor<1x2x5x5xf32>) outs(%e44 : tensor<1x2x5x5xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.addf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<1x2x5x5xf32>
  %p = linalg.softmax dimension(3) ins(%sb : tensor<1x2x5x5xf32>) outs(%e44 : tensor<1x2x5x5xf32>) -> tensor<1x2x5x5xf32>
  %pc = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<1x2x5x5xf32> into tensor<2x5x5xf32>
  %e_o = tensor.empty() : tensor<2x5x2xf32>
  %f_o = linalg.fill ins(%zero : f32) outs(%e_o : tensor<2x5x2xf32>) -> tensor<2x5x2xf32>
  %o = linalg.batch_matmul ins(%pc, %v : tensor<2x5x5xf32>, tensor<2x5x2xf32>) outs(%f_o : tensor<2x5x2xf32>) -> tensor<2x5x2xf32>
  return %o : tensor<2x5x2xf32>
}

// -----

// CHECK-LABEL: func @single_window_bias_first
// CHECK: rpe.lookup
// CHECK: rpe.window_attention
// FUSED-LABEL: func @single_window_bias_first
// FUSED: rpe.fused_window_attention
// The same with the bias as the first operand of the add: scores and bias
// are read alike, the bias is the operand that is a table's gather.
func.func @single_window_bias_first(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<2x4x2xf32>, %table: tensor<9x2xf32>) -> tensor<2x4x2xf32> attributes {llvm.emit_c_interface} {
  %zero = arith.constant 0.000000e+00 : f32
  %scale = arith.constant 0.70710678118654757 : f64
  %idx = arith.constant dense<[[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]> : tensor<4x4xi64>
  %e_q = tensor.empty() : tensor<1x2x4x2xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<1x2x4x2xf32>) outs(%e_q : tensor<1x2x4x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %scale : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<1x2x4x2xf32>
  %e_kt = tensor.empty() : tensor<1x2x2x4xf32>
  %kt = linalg.transpose ins(%k : tensor<1x2x4x2xf32>) outs(%e_kt : tensor<1x2x2x4xf32>) permutation = [0, 1, 3, 2]
  %qc = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<1x2x4x2xf32> into tensor<2x4x2xf32>
  %kc = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<1x2x2x4xf32> into tensor<2x2x4xf32>
  %e_s = tensor.empty() : tensor<2x4x4xf32>
  %f_s = linalg.fill ins(%zero : f32) outs(%e_s : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %s = linalg.batch_matmul ins(%qc, %kc : tensor<2x4x2xf32>, tensor<2x2x4xf32>) outs(%f_s : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %s4 = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape [1, 2, 4, 4] : tensor<2x4x4xf32> into tensor<1x2x4x4xf32>
  %e44 = tensor.empty() : tensor<1x2x4x4xf32>
  %ic = tensor.collapse_shape %idx [[0, 1]] : tensor<4x4xi64> into tensor<16xi64>
  %e_g = tensor.empty() : tensor<16x2xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%ic : tensor<16xi64>) outs(%e_g : tensor<16x2xf32>) {
  ^bb0(%in: i64, %out: f32):
    %i = arith.index_cast %in : i64 to index
    %h = linalg.index 1 : index
    %x = tensor.extract %table[%i, %h] : tensor<9x2xf32>
    linalg.yield %x : f32
  } -> tensor<16x2xf32>
  %g3 = tensor.expand_shape %g [[0, 1], [2]] output_shape [4, 4, 2] : tensor<16x2xf32> into tensor<4x4x2xf32>
  %e_b = tensor.empty() : tensor<2x4x4xf32>
  %b = linalg.transpose ins(%g3 : tensor<4x4x2xf32>) outs(%e_b : tensor<2x4x4xf32>) permutation = [2, 0, 1]
  %b4 = tensor.expand_shape %b [[0, 1], [2], [3]] output_shape [1, 2, 4, 4] : tensor<2x4x4xf32> into tensor<1x2x4x4xf32>
  %sb = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%b4, %s4 : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) outs(%e44 : tensor<1x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.addf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<1x2x4x4xf32>
  %p = linalg.softmax dimension(3) ins(%sb : tensor<1x2x4x4xf32>) outs(%e44 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %pc = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<1x2x4x4xf32> into tensor<2x4x4xf32>
  %e_o = tensor.empty() : tensor<2x4x2xf32>
  %f_o = linalg.fill ins(%zero : f32) outs(%e_o : tensor<2x4x2xf32>) -> tensor<2x4x2xf32>
  %o = linalg.batch_matmul ins(%pc, %v : tensor<2x4x4xf32>, tensor<2x4x2xf32>) outs(%f_o : tensor<2x4x2xf32>) -> tensor<2x4x2xf32>
  return %o : tensor<2x4x2xf32>
}

// -----

// CHECK-LABEL: func @single_window_transposed_bias
// CHECK-NOT: rpe.
// CHECK: linalg.softmax
// FUSED-LABEL: func @single_window_transposed_bias
// FUSED-NOT: rpe.
// One window, but the bias read transposed ([h, j, i]): not Swin's bias,
// left as it is. Only the unit window loop may read the bias's unit extent.
func.func @single_window_transposed_bias(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<2x4x2xf32>, %table: tensor<9x2xf32>) -> tensor<2x4x2xf32> attributes {llvm.emit_c_interface} {
  %zero = arith.constant 0.000000e+00 : f32
  %scale = arith.constant 0.70710678118654757 : f64
  %idx = arith.constant dense<[[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]> : tensor<4x4xi64>
  %e_q = tensor.empty() : tensor<1x2x4x2xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<1x2x4x2xf32>) outs(%e_q : tensor<1x2x4x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %scale : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<1x2x4x2xf32>
  %e_kt = tensor.empty() : tensor<1x2x2x4xf32>
  %kt = linalg.transpose ins(%k : tensor<1x2x4x2xf32>) outs(%e_kt : tensor<1x2x2x4xf32>) permutation = [0, 1, 3, 2]
  %qc = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<1x2x4x2xf32> into tensor<2x4x2xf32>
  %kc = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<1x2x2x4xf32> into tensor<2x2x4xf32>
  %e_s = tensor.empty() : tensor<2x4x4xf32>
  %f_s = linalg.fill ins(%zero : f32) outs(%e_s : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %s = linalg.batch_matmul ins(%qc, %kc : tensor<2x4x2xf32>, tensor<2x2x4xf32>) outs(%f_s : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %s4 = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape [1, 2, 4, 4] : tensor<2x4x4xf32> into tensor<1x2x4x4xf32>
  %e44 = tensor.empty() : tensor<1x2x4x4xf32>
  %ic = tensor.collapse_shape %idx [[0, 1]] : tensor<4x4xi64> into tensor<16xi64>
  %e_g = tensor.empty() : tensor<16x2xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%ic : tensor<16xi64>) outs(%e_g : tensor<16x2xf32>) {
  ^bb0(%in: i64, %out: f32):
    %i = arith.index_cast %in : i64 to index
    %h = linalg.index 1 : index
    %x = tensor.extract %table[%i, %h] : tensor<9x2xf32>
    linalg.yield %x : f32
  } -> tensor<16x2xf32>
  %g3 = tensor.expand_shape %g [[0, 1], [2]] output_shape [4, 4, 2] : tensor<16x2xf32> into tensor<4x4x2xf32>
  %e_b = tensor.empty() : tensor<2x4x4xf32>
  %b = linalg.transpose ins(%g3 : tensor<4x4x2xf32>) outs(%e_b : tensor<2x4x4xf32>) permutation = [2, 0, 1]
  %b4 = tensor.expand_shape %b [[0, 1], [2], [3]] output_shape [1, 2, 4, 4] : tensor<2x4x4xf32> into tensor<1x2x4x4xf32>
  %sb = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %b4 : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) outs(%e44 : tensor<1x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.addf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<1x2x4x4xf32>
  %p = linalg.softmax dimension(3) ins(%sb : tensor<1x2x4x4xf32>) outs(%e44 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %pc = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<1x2x4x4xf32> into tensor<2x4x4xf32>
  %e_o = tensor.empty() : tensor<2x4x2xf32>
  %f_o = linalg.fill ins(%zero : f32) outs(%e_o : tensor<2x4x2xf32>) -> tensor<2x4x2xf32>
  %o = linalg.batch_matmul ins(%pc, %v : tensor<2x4x4xf32>, tensor<2x4x2xf32>) outs(%f_o : tensor<2x4x2xf32>) -> tensor<2x4x2xf32>
  return %o : tensor<2x4x2xf32>
}

// -----

// CHECK-LABEL: func @per_window_bias
// CHECK-NOT: rpe.
// CHECK: linalg.softmax
// FUSED-LABEL: func @per_window_bias
// FUSED-NOT: rpe.
// Two windows, the bias materialized per window [B, H, N, N] and read
// through the identity map: not the single-window form (the bias's leading
// extent is not 1), left as it is.
func.func @per_window_bias(%q: tensor<2x2x4x2xf32>, %k: tensor<2x2x4x2xf32>, %v: tensor<4x4x2xf32>, %table: tensor<9x2xf32>) -> tensor<4x4x2xf32> attributes {llvm.emit_c_interface} {
  %zero = arith.constant 0.000000e+00 : f32
  %scale = arith.constant 0.70710678118654757 : f64
  %idx = arith.constant dense<[[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]> : tensor<4x4xi64>
  %e_q = tensor.empty() : tensor<2x2x4x2xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<2x2x4x2xf32>) outs(%e_q : tensor<2x2x4x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %scale : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x4x2xf32>
  %e_kt = tensor.empty() : tensor<2x2x2x4xf32>
  %kt = linalg.transpose ins(%k : tensor<2x2x4x2xf32>) outs(%e_kt : tensor<2x2x2x4xf32>) permutation = [0, 1, 3, 2]
  %qc = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<2x2x4x2xf32> into tensor<4x4x2xf32>
  %kc = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<2x2x2x4xf32> into tensor<4x2x4xf32>
  %e_s = tensor.empty() : tensor<4x4x4xf32>
  %f_s = linalg.fill ins(%zero : f32) outs(%e_s : tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %s = linalg.batch_matmul ins(%qc, %kc : tensor<4x4x2xf32>, tensor<4x2x4xf32>) outs(%f_s : tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %s4 = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape [2, 2, 4, 4] : tensor<4x4x4xf32> into tensor<2x2x4x4xf32>
  %e44 = tensor.empty() : tensor<2x2x4x4xf32>
  %ic = tensor.collapse_shape %idx [[0, 1]] : tensor<4x4xi64> into tensor<16xi64>
  %e_g = tensor.empty() : tensor<16x2xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%ic : tensor<16xi64>) outs(%e_g : tensor<16x2xf32>) {
  ^bb0(%in: i64, %out: f32):
    %i = arith.index_cast %in : i64 to index
    %h = linalg.index 1 : index
    %x = tensor.extract %table[%i, %h] : tensor<9x2xf32>
    linalg.yield %x : f32
  } -> tensor<16x2xf32>
  %g3 = tensor.expand_shape %g [[0, 1], [2]] output_shape [4, 4, 2] : tensor<16x2xf32> into tensor<4x4x2xf32>
  %e_b = tensor.empty() : tensor<2x4x4xf32>
  %b = linalg.transpose ins(%g3 : tensor<4x4x2xf32>) outs(%e_b : tensor<2x4x4xf32>) permutation = [2, 0, 1]
  %e_bw = tensor.empty() : tensor<2x2x4x4xf32>
  %bw = linalg.broadcast ins(%b : tensor<2x4x4xf32>) outs(%e_bw : tensor<2x2x4x4xf32>) dimensions = [0]
  %sb = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %bw : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.addf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %p = linalg.softmax dimension(3) ins(%sb : tensor<2x2x4x4xf32>) outs(%e44 : tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %pc = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<2x2x4x4xf32> into tensor<4x4x4xf32>
  %e_o = tensor.empty() : tensor<4x4x2xf32>
  %f_o = linalg.fill ins(%zero : f32) outs(%e_o : tensor<4x4x2xf32>) -> tensor<4x4x2xf32>
  %o = linalg.batch_matmul ins(%pc, %v : tensor<4x4x4xf32>, tensor<4x4x2xf32>) outs(%f_o : tensor<4x4x2xf32>) -> tensor<4x4x2xf32>
  return %o : tensor<4x4x2xf32>
}

// -----

// CHECK-LABEL: func @transposed_heads_key
// CHECK-SAME: (%[[Q:.*]]: tensor<2x2x4x2xf32>, %[[K:.*]]: tensor<2x4x2x2xf32>,
// CHECK: %[[KE:.*]] = tensor.empty() : tensor<2x2x4x2xf32>
// CHECK: %[[K4:.*]] = linalg.transpose ins(%[[K]] : tensor<2x4x2x2xf32>) outs(%[[KE]] : tensor<2x2x4x2xf32>) permutation = [0, 2, 1, 3]
// CHECK: rpe.window_attention ins(%[[Q]], %[[K4]], %{{.*}} : {{.*}}) bias(
// FUSED-LABEL: func @transposed_heads_key
// FUSED: rpe.fused_window_attention
// kᵀ as transformers' Swin gets it: one transpose [0, 2, 3, 1] of the
// projection's [B, N, H, d] view. k is that view transposed [0, 2, 1, 3].
func.func @transposed_heads_key(%q: tensor<2x2x4x2xf32>, %k: tensor<2x4x2x2xf32>, %v: tensor<4x4x2xf32>, %table: tensor<9x2xf32>) -> tensor<4x4x2xf32> attributes {llvm.emit_c_interface} {
  %zero = arith.constant 0.000000e+00 : f32
  %scale = arith.constant 0.70710678118654757 : f64
  %idx = arith.constant dense<[[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]> : tensor<4x4xi64>
  %e_q = tensor.empty() : tensor<2x2x4x2xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<2x2x4x2xf32>) outs(%e_q : tensor<2x2x4x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %scale : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x4x2xf32>
  %e_kt = tensor.empty() : tensor<2x2x2x4xf32>
  %kt = linalg.transpose ins(%k : tensor<2x4x2x2xf32>) outs(%e_kt : tensor<2x2x2x4xf32>) permutation = [0, 2, 3, 1]
  %qc = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<2x2x4x2xf32> into tensor<4x4x2xf32>
  %kc = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<2x2x2x4xf32> into tensor<4x2x4xf32>
  %e_s = tensor.empty() : tensor<4x4x4xf32>
  %f_s = linalg.fill ins(%zero : f32) outs(%e_s : tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %s = linalg.batch_matmul ins(%qc, %kc : tensor<4x4x2xf32>, tensor<4x2x4xf32>) outs(%f_s : tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %s4 = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape [2, 2, 4, 4] : tensor<4x4x4xf32> into tensor<2x2x4x4xf32>
  %e44 = tensor.empty() : tensor<2x2x4x4xf32>
  %ic = tensor.collapse_shape %idx [[0, 1]] : tensor<4x4xi64> into tensor<16xi64>
  %e_g = tensor.empty() : tensor<16x2xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%ic : tensor<16xi64>) outs(%e_g : tensor<16x2xf32>) {
  ^bb0(%in: i64, %out: f32):
    %i = arith.index_cast %in : i64 to index
    %h = linalg.index 1 : index
    %x = tensor.extract %table[%i, %h] : tensor<9x2xf32>
    linalg.yield %x : f32
  } -> tensor<16x2xf32>
  %g3 = tensor.expand_shape %g [[0, 1], [2]] output_shape [4, 4, 2] : tensor<16x2xf32> into tensor<4x4x2xf32>
  %e_b = tensor.empty() : tensor<2x4x4xf32>
  %b = linalg.transpose ins(%g3 : tensor<4x4x2xf32>) outs(%e_b : tensor<2x4x4xf32>) permutation = [2, 0, 1]
  %b4 = tensor.expand_shape %b [[0, 1], [2], [3]] output_shape [1, 2, 4, 4] : tensor<2x4x4xf32> into tensor<1x2x4x4xf32>
  %sb = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %b4 : tensor<2x2x4x4xf32>, tensor<1x2x4x4xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.addf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %p = linalg.softmax dimension(3) ins(%sb : tensor<2x2x4x4xf32>) outs(%e44 : tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %pc = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<2x2x4x4xf32> into tensor<4x4x4xf32>
  %e_o = tensor.empty() : tensor<4x4x2xf32>
  %f_o = linalg.fill ins(%zero : f32) outs(%e_o : tensor<4x4x2xf32>) -> tensor<4x4x2xf32>
  %o = linalg.batch_matmul ins(%pc, %v : tensor<4x4x4xf32>, tensor<4x4x2xf32>) outs(%f_o : tensor<4x4x2xf32>) -> tensor<4x4x2xf32>
  return %o : tensor<4x4x2xf32>
}

// -----

// CHECK-LABEL: func @sum_from_one
// CHECK-NOT: rpe.
// CHECK: linalg.batch_matmul
// CHECK: linalg.batch_matmul
// FUSED-LABEL: func @sum_from_one
// FUSED-NOT: rpe.
// The decomposed softmax's row sum starts from 1, not 0: P = E / (1 +
// sum(E)) is not a softmax, left as it is.
func.func @sum_from_one(%q: tensor<2x2x4x2xf32>, %k: tensor<2x2x4x2xf32>, %v: tensor<4x4x2xf32>, %table: tensor<9x2xf32>) -> tensor<4x4x2xf32> {
  %c0_i64 = arith.constant 0 : i64
  %c9_i64 = arith.constant 9 : i64
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.70710678118654757 : f64
  %idx = arith.constant dense<[[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]> : tensor<4x4xi64>
  %e_q = tensor.empty() : tensor<2x2x4x2xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<2x2x4x2xf32>) outs(%e_q : tensor<2x2x4x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %scale : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x4x2xf32>
  %e_kt = tensor.empty() : tensor<2x2x2x4xf32>
  %kt = linalg.transpose ins(%k : tensor<2x2x4x2xf32>) outs(%e_kt : tensor<2x2x2x4xf32>) permutation = [0, 1, 3, 2]
  %qc = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<2x2x4x2xf32> into tensor<4x4x2xf32>
  %kc = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<2x2x2x4xf32> into tensor<4x2x4xf32>
  %e_s = tensor.empty() : tensor<4x4x4xf32>
  %f_s = linalg.fill ins(%zero : f32) outs(%e_s : tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %s = linalg.batch_matmul ins(%qc, %kc : tensor<4x4x2xf32>, tensor<4x2x4xf32>) outs(%f_s : tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %s4 = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape [2, 2, 4, 4] : tensor<4x4x4xf32> into tensor<2x2x4x4xf32>
  %e44 = tensor.empty() : tensor<2x2x4x4xf32>
  %ic = tensor.collapse_shape %idx [[0, 1]] : tensor<4x4xi64> into tensor<16xi64>
  %e_g = tensor.empty() : tensor<16x2xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%ic : tensor<16xi64>) outs(%e_g : tensor<16x2xf32>) {
  ^bb0(%in: i64, %out: f32):
    %neg = arith.cmpi slt, %in, %c0_i64 : i64
    %wrapped = arith.addi %in, %c9_i64 : i64
    %row = arith.select %neg, %wrapped, %in : i64
    %i = arith.index_cast %row : i64 to index
    %h = linalg.index 1 : index
    %x = tensor.extract %table[%i, %h] : tensor<9x2xf32>
    linalg.yield %x : f32
  } -> tensor<16x2xf32>
  %g3 = tensor.expand_shape %g [[0, 1], [2]] output_shape [4, 4, 2] : tensor<16x2xf32> into tensor<4x4x2xf32>
  %e_b = tensor.empty() : tensor<2x4x4xf32>
  %b = linalg.transpose ins(%g3 : tensor<4x4x2xf32>) outs(%e_b : tensor<2x4x4xf32>) permutation = [2, 0, 1]
  %b4 = tensor.expand_shape %b [[0, 1], [2], [3]] output_shape [1, 2, 4, 4] : tensor<2x4x4xf32> into tensor<1x2x4x4xf32>
  %sb = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %b4 : tensor<2x2x4x4xf32>, tensor<1x2x4x4xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.addf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %e_i = tensor.empty() : tensor<2x2x4xi64>
  %f_i = linalg.fill ins(%c0_i64 : i64) outs(%e_i : tensor<2x2x4xi64>) -> tensor<2x2x4xi64>
  %e_m = tensor.empty() : tensor<2x2x4xf32>
  %f_m = linalg.fill ins(%ninf : f32) outs(%e_m : tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  %max:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%sb : tensor<2x2x4x4xf32>) outs(%f_m, %f_i : tensor<2x2x4xf32>, tensor<2x2x4xi64>) {
  ^bb0(%in: f32, %out: f32, %out_1: i64):
    %j = linalg.index 3 : index
    %ji = arith.index_cast %j : index to i64
    %mx = arith.maximumf %in, %out : f32
    %gt = arith.cmpf ogt, %in, %out : f32
    %am = arith.select %gt, %ji, %out_1 : i64
    linalg.yield %mx, %am : f32, i64
  } -> (tensor<2x2x4xf32>, tensor<2x2x4xi64>)
  %maxe = tensor.expand_shape %max#0 [[0], [1], [2, 3]] output_shape [2, 2, 4, 1] : tensor<2x2x4xf32> into tensor<2x2x4x1xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sb, %maxe : tensor<2x2x4x4xf32>, tensor<2x2x4x1xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.subf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sub : tensor<2x2x4x4xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = math.exp %in : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %e_1 = tensor.empty() : tensor<2x2x4x1xf32>
  %f_1 = linalg.fill ins(%one : f32) outs(%e_1 : tensor<2x2x4x1xf32>) -> tensor<2x2x4x1xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%exp : tensor<2x2x4x4xf32>) outs(%f_1 : tensor<2x2x4x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.addf %in, %out : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x1xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x2x4x4xf32>, tensor<2x2x4x1xf32>) outs(%e44 : tensor<2x2x4x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.divf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x2x4x4xf32>
  %pc = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<2x2x4x4xf32> into tensor<4x4x4xf32>
  %e_o = tensor.empty() : tensor<4x4x2xf32>
  %f_o = linalg.fill ins(%zero : f32) outs(%e_o : tensor<4x4x2xf32>) -> tensor<4x4x2xf32>
  %o = linalg.batch_matmul ins(%pc, %v : tensor<4x4x4xf32>, tensor<4x4x2xf32>) outs(%f_o : tensor<4x4x2xf32>) -> tensor<4x4x2xf32>
  return %o : tensor<4x4x2xf32>
}

// -----

// The attention spelled out in linalg around rpe.lookup, as a framework
// lowers it: the q·kᵀ and P·v contractions as generics on [B, H, N, *], the
// scale a constant factor of q in the q·kᵀ body, linalg.softmax. Raised
// with the lookup as its bias, head-major like the P·v it replaces; the
// fused op takes the table.
// CHECK-LABEL: func @spelled
// CHECK-SAME: (%[[Q:.*]]: tensor<8x3x49x32xf32>, %[[K:.*]]: tensor<8x3x49x32xf32>, %[[V:.*]]: tensor<8x3x49x32xf32>, %[[T:.*]]: tensor<169x3xf32>)
// CHECK: %[[B:.*]] = rpe.lookup %[[T]] {window = array<i64: 7, 7>}
// CHECK: %[[A:.*]] = rpe.window_attention ins(%[[Q]], %[[K]], %[[V]] : {{.*}}) bias(%[[B]] : tensor<3x49x49xf32>) {scale = 0.176776692 : f32} -> tensor<8x3x49x32xf32>
// CHECK: return %[[A]]
// FUSED-LABEL: func @spelled
// FUSED-SAME: (%[[Q:.*]]: tensor<8x3x49x32xf32>, %[[K:.*]]: tensor<8x3x49x32xf32>, %[[V:.*]]: tensor<8x3x49x32xf32>, %[[T:.*]]: tensor<169x3xf32>)
// FUSED: %[[R:.*]] = rpe.fused_window_attention ins(%[[Q]], %[[K]], %[[V]], %[[T]] : {{.*}}) outs(%{{.*}} : tensor<8x3x49x32xf32>) {scale = 0.176776692 : f32, window = array<i64: 7, 7>} -> tensor<8x3x49x32xf32>
// FUSED: return %[[R]]
func.func @spelled(%q: tensor<8x3x49x32xf32>, %k: tensor<8x3x49x32xf32>, %v: tensor<8x3x49x32xf32>, %t: tensor<169x3xf32>) -> tensor<8x3x49x32xf32> attributes {llvm.emit_c_interface} {
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant 0.17677669 : f32
  %bias = rpe.lookup %t {window = array<i64: 7, 7>} : tensor<169x3xf32> -> tensor<3x49x49xf32>
  %e0 = tensor.empty() : tensor<8x3x49x49xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<8x3x49x49xf32>) -> tensor<8x3x49x49xf32>
  %scores = linalg.generic {indexing_maps = [affine_map<(b, h, i, j, e) -> (b, h, i, e)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>, affine_map<(b, h, i, j, e) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<8x3x49x32xf32>, tensor<8x3x49x32xf32>) outs(%f0 : tensor<8x3x49x49xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %qs = arith.mulf %a, %scale : f32
    %m = arith.mulf %qs, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<8x3x49x49xf32>
  %e1 = tensor.empty() : tensor<8x3x49x49xf32>
  %biased = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%scores, %bias : tensor<8x3x49x49xf32>, tensor<3x49x49xf32>) outs(%e1 : tensor<8x3x49x49xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<8x3x49x49xf32>
  %e2 = tensor.empty() : tensor<8x3x49x49xf32>
  %probs = linalg.softmax dimension(3) ins(%biased : tensor<8x3x49x49xf32>) outs(%e2 : tensor<8x3x49x49xf32>) -> tensor<8x3x49x49xf32>
  %e3 = tensor.empty() : tensor<8x3x49x32xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<8x3x49x32xf32>) -> tensor<8x3x49x32xf32>
  %out = linalg.generic {indexing_maps = [affine_map<(b, h, i, e, j) -> (b, h, i, j)>, affine_map<(b, h, i, e, j) -> (b, h, j, e)>, affine_map<(b, h, i, e, j) -> (b, h, i, e)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%probs, %v : tensor<8x3x49x49xf32>, tensor<8x3x49x32xf32>) outs(%f3 : tensor<8x3x49x32xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<8x3x49x32xf32>
  return %out : tensor<8x3x49x32xf32>
}

// -----

// Spelled out, but the bias is an argument: nothing to raise.
// CHECK-LABEL: func @spelled_arbitrary_bias
// CHECK-NOT: rpe.window_attention
// CHECK: linalg.softmax
// FUSED-LABEL: func @spelled_arbitrary_bias
// FUSED-NOT: rpe.fused_window_attention
// FUSED: linalg.softmax
func.func @spelled_arbitrary_bias(%q: tensor<8x3x49x32xf32>, %k: tensor<8x3x49x32xf32>, %v: tensor<8x3x49x32xf32>, %t: tensor<169x3xf32>, %bias: tensor<3x49x49xf32>) -> tensor<8x3x49x32xf32> attributes {llvm.emit_c_interface} {
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant 0.17677669 : f32
  %e0 = tensor.empty() : tensor<8x3x49x49xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<8x3x49x49xf32>) -> tensor<8x3x49x49xf32>
  %scores = linalg.generic {indexing_maps = [affine_map<(b, h, i, j, e) -> (b, h, i, e)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>, affine_map<(b, h, i, j, e) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<8x3x49x32xf32>, tensor<8x3x49x32xf32>) outs(%f0 : tensor<8x3x49x49xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %qs = arith.mulf %a, %scale : f32
    %m = arith.mulf %qs, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<8x3x49x49xf32>
  %e1 = tensor.empty() : tensor<8x3x49x49xf32>
  %biased = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%scores, %bias : tensor<8x3x49x49xf32>, tensor<3x49x49xf32>) outs(%e1 : tensor<8x3x49x49xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<8x3x49x49xf32>
  %e2 = tensor.empty() : tensor<8x3x49x49xf32>
  %probs = linalg.softmax dimension(3) ins(%biased : tensor<8x3x49x49xf32>) outs(%e2 : tensor<8x3x49x49xf32>) -> tensor<8x3x49x49xf32>
  %e3 = tensor.empty() : tensor<8x3x49x32xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<8x3x49x32xf32>) -> tensor<8x3x49x32xf32>
  %out = linalg.generic {indexing_maps = [affine_map<(b, h, i, e, j) -> (b, h, i, j)>, affine_map<(b, h, i, e, j) -> (b, h, j, e)>, affine_map<(b, h, i, e, j) -> (b, h, i, e)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%probs, %v : tensor<8x3x49x49xf32>, tensor<8x3x49x32xf32>) outs(%f3 : tensor<8x3x49x32xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<8x3x49x32xf32>
  return %out : tensor<8x3x49x32xf32>
}

// -----

// A shift mask added in the same generic, read at window b mod nW.
// CHECK-LABEL: func @spelled_shift_mask
// CHECK: %[[B:.*]] = rpe.lookup
// CHECK: %[[M:.*]] = rpe.shift_mask
// CHECK: rpe.window_attention ins({{.*}}) bias(%[[B]] : tensor<2x4x4xf32>) mask(%[[M]] : tensor<2x4x4xf32>) {scale = 0.707106769 : f32} -> tensor<4x2x4x2xf32>
// FUSED-LABEL: func @spelled_shift_mask
// FUSED: rpe.fused_window_attention
// FUSED-SAME: resolution = array<i64: 2, 4>, scale = 0.707106769 : f32, shift = array<i64: 1, 1>, window = array<i64: 2, 2>
func.func @spelled_shift_mask(%q: tensor<4x2x4x2xf32>, %k: tensor<4x2x4x2xf32>, %v: tensor<4x2x4x2xf32>, %t: tensor<9x2xf32>) -> tensor<4x2x4x2xf32> attributes {llvm.emit_c_interface} {
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant 0.70710678 : f32
  %bias = rpe.lookup %t {window = array<i64: 2, 2>} : tensor<9x2xf32> -> tensor<2x4x4xf32>
  %mask = rpe.shift_mask {resolution = array<i64: 2, 4>, window = array<i64: 2, 2>, shift = array<i64: 1, 1>} : tensor<2x4x4xf32>
  %e0 = tensor.empty() : tensor<4x2x4x4xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x2x4x4xf32>) -> tensor<4x2x4x4xf32>
  %scores = linalg.generic {indexing_maps = [affine_map<(b, h, i, j, e) -> (b, h, i, e)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>, affine_map<(b, h, i, j, e) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<4x2x4x2xf32>, tensor<4x2x4x2xf32>) outs(%f0 : tensor<4x2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %qs = arith.mulf %a, %scale : f32
    %m = arith.mulf %qs, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<4x2x4x4xf32>
  %e1 = tensor.empty() : tensor<4x2x4x4xf32>
  %biased = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (h, i, j)>, affine_map<(b, h, i, j) -> (b mod 2, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%scores, %bias, %mask : tensor<4x2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) outs(%e1 : tensor<4x2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    %r2 = arith.addf %r, %c : f32
    linalg.yield %r2 : f32
  } -> tensor<4x2x4x4xf32>
  %e2 = tensor.empty() : tensor<4x2x4x4xf32>
  %probs = linalg.softmax dimension(3) ins(%biased : tensor<4x2x4x4xf32>) outs(%e2 : tensor<4x2x4x4xf32>) -> tensor<4x2x4x4xf32>
  %e3 = tensor.empty() : tensor<4x2x4x2xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<4x2x4x2xf32>) -> tensor<4x2x4x2xf32>
  %out = linalg.generic {indexing_maps = [affine_map<(b, h, i, e, j) -> (b, h, i, j)>, affine_map<(b, h, i, e, j) -> (b, h, j, e)>, affine_map<(b, h, i, e, j) -> (b, h, i, e)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%probs, %v : tensor<4x2x4x4xf32>, tensor<4x2x4x2xf32>) outs(%f3 : tensor<4x2x4x2xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<4x2x4x2xf32>
  return %out : tensor<4x2x4x2xf32>
}

// -----

// The mask read at b floordiv 2, not b mod 2: not Swin's, left as it is.
// CHECK-LABEL: func @spelled_mask_of_image_pairs
// CHECK-NOT: rpe.window_attention
// CHECK: linalg.softmax
// FUSED-LABEL: func @spelled_mask_of_image_pairs
// FUSED-NOT: rpe.fused_window_attention
func.func @spelled_mask_of_image_pairs(%q: tensor<4x2x4x2xf32>, %k: tensor<4x2x4x2xf32>, %v: tensor<4x2x4x2xf32>, %t: tensor<9x2xf32>) -> tensor<4x2x4x2xf32> {
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant 0.70710678 : f32
  %bias = rpe.lookup %t {window = array<i64: 2, 2>} : tensor<9x2xf32> -> tensor<2x4x4xf32>
  %mask = rpe.shift_mask {resolution = array<i64: 2, 4>, window = array<i64: 2, 2>, shift = array<i64: 1, 1>} : tensor<2x4x4xf32>
  %e0 = tensor.empty() : tensor<4x2x4x4xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x2x4x4xf32>) -> tensor<4x2x4x4xf32>
  %scores = linalg.generic {indexing_maps = [affine_map<(b, h, i, j, e) -> (b, h, i, e)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>, affine_map<(b, h, i, j, e) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<4x2x4x2xf32>, tensor<4x2x4x2xf32>) outs(%f0 : tensor<4x2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %qs = arith.mulf %a, %scale : f32
    %m = arith.mulf %qs, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<4x2x4x4xf32>
  %e1 = tensor.empty() : tensor<4x2x4x4xf32>
  %biased = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (h, i, j)>, affine_map<(b, h, i, j) -> (b floordiv 2, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%scores, %bias, %mask : tensor<4x2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) outs(%e1 : tensor<4x2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    %r2 = arith.addf %r, %c : f32
    linalg.yield %r2 : f32
  } -> tensor<4x2x4x4xf32>
  %e2 = tensor.empty() : tensor<4x2x4x4xf32>
  %probs = linalg.softmax dimension(3) ins(%biased : tensor<4x2x4x4xf32>) outs(%e2 : tensor<4x2x4x4xf32>) -> tensor<4x2x4x4xf32>
  %e3 = tensor.empty() : tensor<4x2x4x2xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<4x2x4x2xf32>) -> tensor<4x2x4x2xf32>
  %out = linalg.generic {indexing_maps = [affine_map<(b, h, i, e, j) -> (b, h, i, j)>, affine_map<(b, h, i, e, j) -> (b, h, j, e)>, affine_map<(b, h, i, e, j) -> (b, h, i, e)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%probs, %v : tensor<4x2x4x4xf32>, tensor<4x2x4x2xf32>) outs(%f3 : tensor<4x2x4x2xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<4x2x4x2xf32>
  return %out : tensor<4x2x4x2xf32>
}

// -----

// q·(-k)ᵀ: a unary op on a factor (which isaContractionOpInterface would
// look through) is not the product: left as it is.
// CHECK-LABEL: func @spelled_negated_key
// CHECK-NOT: rpe.window_attention
// CHECK: linalg.softmax
// FUSED-LABEL: func @spelled_negated_key
// FUSED-NOT: rpe.fused_window_attention
func.func @spelled_negated_key(%q: tensor<4x2x4x2xf32>, %k: tensor<4x2x4x2xf32>, %v: tensor<4x2x4x2xf32>, %t: tensor<9x2xf32>) -> tensor<4x2x4x2xf32> {
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant 0.70710678 : f32
  %bias = rpe.lookup %t {window = array<i64: 2, 2>} : tensor<9x2xf32> -> tensor<2x4x4xf32>
  %e0 = tensor.empty() : tensor<4x2x4x4xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x2x4x4xf32>) -> tensor<4x2x4x4xf32>
  %scores = linalg.generic {indexing_maps = [affine_map<(b, h, i, j, e) -> (b, h, i, e)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>, affine_map<(b, h, i, j, e) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<4x2x4x2xf32>, tensor<4x2x4x2xf32>) outs(%f0 : tensor<4x2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %kn = arith.negf %b : f32
    %qs = arith.mulf %a, %scale : f32
    %m = arith.mulf %qs, %kn : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<4x2x4x4xf32>
  %e1 = tensor.empty() : tensor<4x2x4x4xf32>
  %biased = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%scores, %bias : tensor<4x2x4x4xf32>, tensor<2x4x4xf32>) outs(%e1 : tensor<4x2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x2x4x4xf32>
  %e2 = tensor.empty() : tensor<4x2x4x4xf32>
  %probs = linalg.softmax dimension(3) ins(%biased : tensor<4x2x4x4xf32>) outs(%e2 : tensor<4x2x4x4xf32>) -> tensor<4x2x4x4xf32>
  %e3 = tensor.empty() : tensor<4x2x4x2xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<4x2x4x2xf32>) -> tensor<4x2x4x2xf32>
  %out = linalg.generic {indexing_maps = [affine_map<(b, h, i, e, j) -> (b, h, i, j)>, affine_map<(b, h, i, e, j) -> (b, h, j, e)>, affine_map<(b, h, i, e, j) -> (b, h, i, e)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%probs, %v : tensor<4x2x4x4xf32>, tensor<4x2x4x2xf32>) outs(%f3 : tensor<4x2x4x2xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<4x2x4x2xf32>
  return %out : tensor<4x2x4x2xf32>
}

// -----

// A constant factor in the P·v body scales the output, not the scores:
// left as it is.
// CHECK-LABEL: func @spelled_scaled_output
// CHECK-NOT: rpe.window_attention
// CHECK: linalg.softmax
// FUSED-LABEL: func @spelled_scaled_output
// FUSED-NOT: rpe.fused_window_attention
func.func @spelled_scaled_output(%q: tensor<4x2x4x2xf32>, %k: tensor<4x2x4x2xf32>, %v: tensor<4x2x4x2xf32>, %t: tensor<9x2xf32>) -> tensor<4x2x4x2xf32> {
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant 0.70710678 : f32
  %bias = rpe.lookup %t {window = array<i64: 2, 2>} : tensor<9x2xf32> -> tensor<2x4x4xf32>
  %e0 = tensor.empty() : tensor<4x2x4x4xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x2x4x4xf32>) -> tensor<4x2x4x4xf32>
  %scores = linalg.generic {indexing_maps = [affine_map<(b, h, i, j, e) -> (b, h, i, e)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>, affine_map<(b, h, i, j, e) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<4x2x4x2xf32>, tensor<4x2x4x2xf32>) outs(%f0 : tensor<4x2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %qs = arith.mulf %a, %scale : f32
    %m = arith.mulf %qs, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<4x2x4x4xf32>
  %e1 = tensor.empty() : tensor<4x2x4x4xf32>
  %biased = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%scores, %bias : tensor<4x2x4x4xf32>, tensor<2x4x4xf32>) outs(%e1 : tensor<4x2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x2x4x4xf32>
  %e2 = tensor.empty() : tensor<4x2x4x4xf32>
  %probs = linalg.softmax dimension(3) ins(%biased : tensor<4x2x4x4xf32>) outs(%e2 : tensor<4x2x4x4xf32>) -> tensor<4x2x4x4xf32>
  %e3 = tensor.empty() : tensor<4x2x4x2xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<4x2x4x2xf32>) -> tensor<4x2x4x2xf32>
  %out = linalg.generic {indexing_maps = [affine_map<(b, h, i, e, j) -> (b, h, i, j)>, affine_map<(b, h, i, e, j) -> (b, h, j, e)>, affine_map<(b, h, i, e, j) -> (b, h, i, e)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%probs, %v : tensor<4x2x4x4xf32>, tensor<4x2x4x2xf32>) outs(%f3 : tensor<4x2x4x2xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %as = arith.mulf %a, %scale : f32
    %m = arith.mulf %as, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<4x2x4x2xf32>
  return %out : tensor<4x2x4x2xf32>
}
