// RUN: swin-opt %s --rpe-fold-relative-index --mlir-print-elementsattrs-with-hex-if-larger=-1 -split-input-file | FileCheck %s

// Swin's index for a 3x3 window: token 0 = (0,0) against token 8 = (2,2)
// reads table row (0-2+2)*5 + (0-2+2) = 0; against itself the centre 12.
// CHECK-LABEL: func @index_3x3
// CHECK: arith.constant dense<{{\[}}[12, 11, 10, 7, 6, 5, 2, 1, 0],
// CHECK-SAME: [13, 12, 11, 8, 7, 6, 3, 2, 1],
// CHECK-SAME: [24, 23, 22, 19, 18, 17, 14, 13, 12]]> : tensor<9x9xi64>
// CHECK-NOT: rpe.relative_index
func.func @index_3x3() -> tensor<9x9xi64> {
  %0 = rpe.relative_index {window = array<i64: 3, 3>} : tensor<9x9xi64>
  return %0 : tensor<9x9xi64>
}

// -----

// Non-square 2x3 window: rows of the table are (dy + 1) * 5 + (dx + 2).
// CHECK-LABEL: func @index_2x3
// CHECK: arith.constant dense<{{\[}}[7, 6, 5, 2, 1, 0], [8, 7, 6, 3, 2, 1], [9, 8, 7, 4, 3, 2], [12, 11, 10, 7, 6, 5], [13, 12, 11, 8, 7, 6], [14, 13, 12, 9, 8, 7]]> : tensor<6x6xi32>
func.func @index_2x3() -> tensor<6x6xi32> {
  %0 = rpe.relative_index {window = array<i64: 2, 3>} : tensor<6x6xi32>
  return %0 : tensor<6x6xi32>
}

// -----

// 3-D 2x1x2 window: depth outermost, idx = (dz+1)*3 + (dy+0)*3 + (dx+1),
// tokens (z, x) = (0,0), (0,1), (1,0), (1,1).
// CHECK-LABEL: func @index_3d
// CHECK: arith.constant dense<{{\[}}[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]> : tensor<4x4xindex>
func.func @index_3d() -> tensor<4x4xindex> {
  %0 = rpe.relative_index {window = array<i64: 2, 1, 2>} : tensor<4x4xindex>
  return %0 : tensor<4x4xindex>
}

// -----

// 4x4 map, 2x2 windows, shift 1: window 0 lies in one region (no masking);
// window 1 (top right) has columns in regions 1 and 2; window 3 (bottom
// right) has four regions, one token each.
// CHECK-LABEL: func @shift_mask
// CHECK: arith.constant dense<
// CHECK-SAME: {{\[}}[0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00], [0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00], [0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00], [0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00]],
// CHECK-SAME: {{\[}}[0.000000e+00, -1.000000e+02, 0.000000e+00, -1.000000e+02], [-1.000000e+02, 0.000000e+00, -1.000000e+02, 0.000000e+00], [0.000000e+00, -1.000000e+02, 0.000000e+00, -1.000000e+02], [-1.000000e+02, 0.000000e+00, -1.000000e+02, 0.000000e+00]],
// CHECK-SAME: {{\[}}[0.000000e+00, 0.000000e+00, -1.000000e+02, -1.000000e+02], [0.000000e+00, 0.000000e+00, -1.000000e+02, -1.000000e+02], [-1.000000e+02, -1.000000e+02, 0.000000e+00, 0.000000e+00], [-1.000000e+02, -1.000000e+02, 0.000000e+00, 0.000000e+00]],
// CHECK-SAME: {{\[}}[0.000000e+00, -1.000000e+02, -1.000000e+02, -1.000000e+02], [-1.000000e+02, 0.000000e+00, -1.000000e+02, -1.000000e+02], [-1.000000e+02, -1.000000e+02, 0.000000e+00, -1.000000e+02], [-1.000000e+02, -1.000000e+02, -1.000000e+02, 0.000000e+00]]]> : tensor<4x4x4xf32>
// CHECK-NOT: rpe.shift_mask
func.func @shift_mask() -> tensor<4x4x4xf32> {
  %0 = rpe.shift_mask {resolution = array<i64: 4, 4>, window = array<i64: 2, 2>, shift = array<i64: 1, 1>} : tensor<4x4x4xf32>
  return %0 : tensor<4x4x4xf32>
}

// -----

// Without a shift the mask is zero: a splat.
// CHECK-LABEL: func @shift_mask_zero
// CHECK: arith.constant dense<0.000000e+00> : tensor<4x49x49xf16>
func.func @shift_mask_zero() -> tensor<4x49x49xf16> {
  %0 = rpe.shift_mask {resolution = array<i64: 14, 14>, window = array<i64: 7, 7>, shift = array<i64: 0, 0>} : tensor<4x49x49xf16>
  return %0 : tensor<4x49x49xf16>
}

// -----

// A constant table folds to the constant bias: 2x1 window, table rows
// (dy + 1), two heads. bias[h, i, j] = table[idx(i, j), h], idx = [[1, 0], [2, 1]].
// CHECK-LABEL: func @lookup_constant
// CHECK: arith.constant dense<{{\[}}[{{\[}}2.000000e+00, 1.000000e+00], [3.000000e+00, 2.000000e+00]], {{\[}}[2.000000e+01, 1.000000e+01], [3.000000e+01, 2.000000e+01]]]> : tensor<2x2x2xf32>
// CHECK-NOT: rpe.lookup
func.func @lookup_constant() -> tensor<2x2x2xf32> {
  %t = arith.constant dense<[[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]]> : tensor<3x2xf32>
  %b = rpe.lookup %t {window = array<i64: 2, 1>} : tensor<3x2xf32> -> tensor<2x2x2xf32>
  return %b : tensor<2x2x2xf32>
}

// -----

// A table that is an argument stays: its index is folded by the lowering.
// CHECK-LABEL: func @lookup_argument
// CHECK: rpe.lookup
func.func @lookup_argument(%t: tensor<169x3xf32>) -> tensor<3x49x49xf32> {
  %b = rpe.lookup %t {window = array<i64: 7, 7>} : tensor<169x3xf32> -> tensor<3x49x49xf32>
  return %b : tensor<3x49x49xf32>
}
