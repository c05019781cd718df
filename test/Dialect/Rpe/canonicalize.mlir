// RUN: swin-opt %s --canonicalize -split-input-file | FileCheck %s

// A shift of zero makes the mask vanish from the attention.
// CHECK-LABEL: func @drop_unshifted_mask
// CHECK-NOT: rpe.shift_mask
// CHECK: rpe.window_attention
// CHECK-NOT: mask(
// CHECK-SAME: -> tensor<?x3x49x32xf32>
func.func @drop_unshifted_mask(%q: tensor<?x3x49x32xf32>, %b: tensor<3x49x49xf32>) -> tensor<?x3x49x32xf32> {
  %m = rpe.shift_mask {resolution = array<i64: 14, 14>, window = array<i64: 7, 7>, shift = array<i64: 0, 0>} : tensor<4x49x49xf32>
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>)
         bias(%b : tensor<3x49x49xf32>) mask(%m : tensor<4x49x49xf32>) -> tensor<?x3x49x32xf32>
  return %0 : tensor<?x3x49x32xf32>
}

// -----

// CHECK-LABEL: func @drop_zero_constant_mask
// CHECK: rpe.window_attention
// CHECK-NOT: mask(
func.func @drop_zero_constant_mask(%q: tensor<?x3x49x32xf32>, %b: tensor<3x49x49xf32>) -> tensor<?x3x49x32xf32> {
  %m = arith.constant dense<0.0> : tensor<1x49x49xf32>
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>)
         bias(%b : tensor<3x49x49xf32>) mask(%m : tensor<1x49x49xf32>) -> tensor<?x3x49x32xf32>
  return %0 : tensor<?x3x49x32xf32>
}

// -----

// A real shift keeps its mask (folded to a constant by the canonicalizer).
// CHECK-LABEL: func @keep_shifted_mask
// CHECK: %[[M:.*]] = arith.constant dense<{{.*}}> : tensor<4x49x49xf32>
// CHECK: rpe.window_attention {{.*}} mask(%[[M]] : tensor<4x49x49xf32>)
func.func @keep_shifted_mask(%q: tensor<?x3x49x32xf32>, %b: tensor<3x49x49xf32>) -> tensor<?x3x49x32xf32> {
  %m = rpe.shift_mask {resolution = array<i64: 14, 14>, window = array<i64: 7, 7>, shift = array<i64: 3, 3>} : tensor<4x49x49xf32>
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>)
         bias(%b : tensor<3x49x49xf32>) mask(%m : tensor<4x49x49xf32>) -> tensor<?x3x49x32xf32>
  return %0 : tensor<?x3x49x32xf32>
}

// -----

// CHECK-LABEL: func @fold_index
// CHECK: arith.constant dense<{{\[}}[1, 0], [2, 1]]> : tensor<2x2xi64>
func.func @fold_index() -> tensor<2x2xi64> {
  %0 = rpe.relative_index {window = array<i64: 2, 1>} : tensor<2x2xi64>
  return %0 : tensor<2x2xi64>
}

// -----

// SwinV2's bias table of a tiny MLP (hidden 2, one head, window 2x2) folds
// to its values: swin_opt.reference.swinv2_cpb_table of the same weights
// (coordinates by swinv2_relative_coords_table) gives 8, 8, 2.5796404,
// 9.2464075, 8.199959, 2.0577989, 11.183801, 10.0125, 2.149133 and, for a
// pretrained window 4x4, 8, 8, 4.646406, 8.821913, 8.199959, 4.1486893,
// 10.029191, 9.433984, 4.3041763. Rows 0 and 1 are relu-dead (exactly 8),
// row 4 is the centre (no offset: the pretrained window changes nothing).
// CHECK-LABEL: func @continuous_position_bias_folds
// CHECK-NOT: rpe.continuous_position_bias
// CHECK-DAG: arith.constant dense<{{\[}}[8.000000e+00], [8.000000e+00], [2.57964039], [9.2464075], [8.1999588], [2.05779886], [11.1838007], [1.001250e+01], [2.14913297]]> : tensor<9x1xf32>
// CHECK-DAG: arith.constant dense<{{\[}}[8.000000e+00], [8.000000e+00], [4.64640617], [8.82191276], [8.1999588], [4.14868927], [10.0291901], [9.43398475], [4.30417633]]> : tensor<9x1xf32>
// f16 tables are rounded once, from the double-precision values.
// CHECK-DAG: arith.constant dense<{{\[}}[8.000000e+00], [8.000000e+00], [2.580080e+00], [9.250000e+00], [8.203130e+00], [2.058590e+00], [1.118750e+01], [1.001560e+01], [2.148440e+00]]> : tensor<9x1xf16>
func.func @continuous_position_bias_folds() -> (tensor<9x1xf32>, tensor<9x1xf32>, tensor<9x1xf16>) {
  %w1 = arith.constant dense<[[1.0, -0.5], [0.25, 2.0]]> : tensor<2x2xf32>
  %b1 = arith.constant dense<[0.1, -0.2]> : tensor<2xf32>
  %w2 = arith.constant dense<[[0.5, -1.0]]> : tensor<1x2xf32>
  %t = rpe.continuous_position_bias %w1, %b1, %w2 {window = array<i64: 2, 2>} : tensor<2x2xf32>, tensor<2xf32>, tensor<1x2xf32> -> tensor<9x1xf32>
  %p = rpe.continuous_position_bias %w1, %b1, %w2 {window = array<i64: 2, 2>, pretrained_window = array<i64: 4, 4>} : tensor<2x2xf32>, tensor<2xf32>, tensor<1x2xf32> -> tensor<9x1xf32>
  %h = rpe.continuous_position_bias %w1, %b1, %w2 {window = array<i64: 2, 2>} : tensor<2x2xf32>, tensor<2xf32>, tensor<1x2xf32> -> tensor<9x1xf16>
  return %t, %p, %h : tensor<9x1xf32>, tensor<9x1xf32>, tensor<9x1xf16>
}

// -----

// Weights that are not constants: nothing to fold.
// CHECK-LABEL: func @continuous_position_bias_of_arguments
// CHECK: rpe.continuous_position_bias
func.func @continuous_position_bias_of_arguments(%w1: tensor<2x2xf32>, %b1: tensor<2xf32>, %w2: tensor<1x2xf32>) -> tensor<9x1xf32> {
  %t = rpe.continuous_position_bias %w1, %b1, %w2 {window = array<i64: 2, 2>} : tensor<2x2xf32>, tensor<2xf32>, tensor<1x2xf32> -> tensor<9x1xf32>
  return %t : tensor<9x1xf32>
}
