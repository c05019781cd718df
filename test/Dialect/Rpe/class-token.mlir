// RUN: swin-opt %s | swin-opt | FileCheck %s --check-prefix=ROUND
// RUN: swin-opt %s --rpe-fold-relative-index --mlir-print-elementsattrs-with-hex-if-larger=-1 | FileCheck %s

// BEiT's class token on a grid: the ops round-trip with `class_token`, and
// fold to timm's gen_relative_position_index (the class token first; T =
// (2Wh-1)(2Ww-1) rows of Swin's, then class -> token = T, token -> class =
// T + 1, class -> class = T + 2).

// ROUND-LABEL: func @index_2x2
// ROUND: rpe.relative_index {class_token, window = array<i64: 2, 2>} : tensor<5x5xi64>
// 2x2 grid: T = 9; Swin's 4x4 index [[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3],
// [8, 7, 5, 4]] in rows and columns 1..4.
// CHECK-LABEL: func @index_2x2
// CHECK: arith.constant dense<{{\[}}[11, 9, 9, 9, 9], [10, 4, 3, 1, 0], [10, 5, 4, 2, 1], [10, 7, 6, 4, 3], [10, 8, 7, 5, 4]]> : tensor<5x5xi64>
// CHECK-NOT: rpe.relative_index
func.func @index_2x2() -> tensor<5x5xi64> {
  %0 = rpe.relative_index {window = array<i64: 2, 2>, class_token} : tensor<5x5xi64>
  return %0 : tensor<5x5xi64>
}

// A non-square 1x2 grid: T = 3, Swin's index [[1, 0], [2, 1]].
// ROUND-LABEL: func @index_1x2
// CHECK-LABEL: func @index_1x2
// CHECK: arith.constant dense<{{\[}}[5, 3, 3], [4, 1, 0], [4, 2, 1]]> : tensor<3x3xindex>
func.func @index_1x2() -> tensor<3x3xindex> {
  %0 = rpe.relative_index {window = array<i64: 1, 2>, class_token} : tensor<3x3xindex>
  return %0 : tensor<3x3xindex>
}

// The lookup of a constant table gathers with that index: rows 3, 4, 5 of
// the table (class -> token, token -> class, class -> class) fill row and
// column 0 of each head.
// ROUND-LABEL: func @lookup_1x2
// ROUND: rpe.lookup %{{.*}} {class_token, window = array<i64: 1, 2>} : tensor<6x2xf32> -> tensor<2x3x3xf32>
// CHECK-LABEL: func @lookup_1x2
// CHECK: arith.constant dense<{{\[}}{{\[}}[5.000000e+00, 3.000000e+00, 3.000000e+00], [4.000000e+00, 1.000000e+00, 0.000000e+00], [4.000000e+00, 2.000000e+00, 1.000000e+00]],
// CHECK-SAME: {{\[}}[1.500000e+01, 1.300000e+01, 1.300000e+01], [1.400000e+01, 1.100000e+01, 1.000000e+01], [1.400000e+01, 1.200000e+01, 1.100000e+01]]]> : tensor<2x3x3xf32>
// CHECK-NOT: rpe.lookup
func.func @lookup_1x2() -> tensor<2x3x3xf32> {
  %t = arith.constant dense<[[0.0, 10.0], [1.0, 11.0], [2.0, 12.0], [3.0, 13.0], [4.0, 14.0], [5.0, 15.0]]> : tensor<6x2xf32>
  %b = rpe.lookup %t {window = array<i64: 1, 2>, class_token} : tensor<6x2xf32> -> tensor<2x3x3xf32>
  return %b : tensor<2x3x3xf32>
}

// BEiT-base's shapes: a 14x14 grid, 729 + 3 rows, 197 tokens; a runtime
// table does not fold.
// ROUND-LABEL: func @lookup_beit_base
// ROUND: rpe.lookup %{{.*}} {class_token, window = array<i64: 14, 14>} : tensor<732x12xf32> -> tensor<12x197x197xf32>
// CHECK-LABEL: func @lookup_beit_base
// CHECK: rpe.lookup %{{.*}} {class_token, window = array<i64: 14, 14>}
func.func @lookup_beit_base(%t: tensor<732x12xf32>) -> tensor<12x197x197xf32> {
  %b = rpe.lookup %t {window = array<i64: 14, 14>, class_token} : tensor<732x12xf32> -> tensor<12x197x197xf32>
  return %b : tensor<12x197x197xf32>
}
