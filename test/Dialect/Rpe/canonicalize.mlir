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
