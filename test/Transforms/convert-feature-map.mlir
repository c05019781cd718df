// RUN: swin-opt %s --convert-rpe-to-linalg --canonicalize -split-input-file | FileCheck %s

// The unfused partition is a gather: window b = image * 6 + (wy, wx) of the
// 6x9 padded map, token t = (ty, tx); the rolled position p = (3 wy + ty,
// 3 wx + tx) reads the padded map at (p + shift) mod (6, 9) (pad, then
// shift), real when inside the 5x7 image, else the padding row.
// CHECK-LABEL: func @partition
// CHECK-SAME: (%[[X:.*]]: tensor<?x35x8xf32>, %[[P:.*]]: tensor<8xf32>)
// CHECK: %[[N:.*]] = tensor.dim %[[X]], %c0
// CHECK: %[[W:.*]] = arith.muli %[[N]], %c6
// CHECK: tensor.empty(%[[W]]) : tensor<?x2x9x4xf32>
// CHECK: linalg.generic
// CHECK: %[[B:.*]] = linalg.index 0
// CHECK: %[[H:.*]] = linalg.index 1
// CHECK: %[[T:.*]] = linalg.index 2
// CHECK: %[[HD:.*]] = arith.muli %[[H]], %c4
// CHECK: %[[C:.*]] = arith.addi %[[HD]], %{{.*}}
// CHECK: %[[IMG:.*]] = arith.divui %[[B]], %c6
// CHECK: %[[PY:.*]] = arith.addi %{{.*}}, %c1 : index
// CHECK: %[[UY:.*]] = arith.remui %[[PY]], %c6
// CHECK: %[[VY:.*]] = arith.cmpi ult, %[[UY]], %c5
// CHECK: %[[PX:.*]] = arith.addi %{{.*}}, %c2 : index
// CHECK: %[[UX:.*]] = arith.remui %[[PX]], %c9
// CHECK: %[[VX:.*]] = arith.cmpi ult, %[[UX]], %c7
// CHECK: %[[V:.*]] = arith.andi %[[VY]], %[[VX]]
// CHECK: %[[ROW:.*]] = arith.muli %[[UY]], %c7
// CHECK: %[[POS:.*]] = arith.addi %[[UX]], %[[ROW]]
// CHECK: %[[SAFE:.*]] = arith.select %[[V]], %[[POS]], %c0
// CHECK: %[[REAL:.*]] = tensor.extract %[[X]][%[[IMG]], %[[SAFE]], %[[C]]]
// CHECK: %[[PAD:.*]] = tensor.extract %[[P]][%[[C]]]
// CHECK: arith.select %[[V]], %[[REAL]], %[[PAD]] : f32
func.func @partition(%x: tensor<?x35x8xf32>, %p: tensor<8xf32>) -> tensor<?x2x9x4xf32> {
  %w = rpe.window_partition %x pad(%p : tensor<8xf32>) {resolution = array<i64: 5, 7>, window = array<i64: 3, 3>, shift = array<i64: 1, 2>} : tensor<?x35x8xf32> -> tensor<?x2x9x4xf32>
  return %w : tensor<?x2x9x4xf32>
}

// -----

// The reverse gathers each real token from its window: shift, then pad
// (timm) rolls back modulo the image, p = (u - shift) mod (5, 7).
// CHECK-LABEL: func @reverse
// CHECK-SAME: (%[[O:.*]]: tensor<12x9x8xf32>)
// CHECK: tensor.empty() : tensor<2x35x8xf32>
// CHECK: linalg.generic
// CHECK: %[[IMG:.*]] = linalg.index 0
// CHECK: %[[U:.*]] = linalg.index 1
// CHECK: %[[UX:.*]] = arith.remui %[[U]], %c7
// CHECK: %[[UY:.*]] = arith.divui %[[U]], %c7
// CHECK: %[[SY:.*]] = arith.addi %[[UY]], %c4
// CHECK: %[[PY:.*]] = arith.remui %[[SY]], %c5
// CHECK: %[[SX:.*]] = arith.addi %[[UX]], %c5
// CHECK: %[[PX:.*]] = arith.remui %[[SX]], %c7
// CHECK: tensor.extract %[[O]][%{{.*}}, %{{.*}}, %{{.*}}] : tensor<12x9x8xf32>
// CHECK-NOT: arith.select
func.func @reverse(%o: tensor<12x9x8xf32>) -> tensor<2x35x8xf32> {
  %y = rpe.window_reverse %o {resolution = array<i64: 5, 7>, window = array<i64: 3, 3>, shift = array<i64: 1, 2>, padding = #rpe.padding<shift_then_pad>} : tensor<12x9x8xf32> -> tensor<2x35x8xf32>
  return %y : tensor<2x35x8xf32>
}

// -----

// MaxViT's grid of a 4x6 map into 2x3 windows, 2x2 of them: window
// b = image * 4 + (wy, wx), token t = (ty, tx) reads position
// (2 ty + wy, 2 tx + wx), with no roll (no modulo) and no padding.
// CHECK-LABEL: func @grid_partition
// CHECK-SAME: (%[[X:.*]]: tensor<?x24x8xf32>)
// CHECK: linalg.generic
// CHECK: %[[B:.*]] = linalg.index 0
// CHECK: %[[T:.*]] = linalg.index 2
// CHECK: %[[IMG:.*]] = arith.divui %[[B]], %c4
// CHECK: %[[W:.*]] = arith.remui %[[B]], %c4
// CHECK: %[[WX:.*]] = arith.remui %[[W]], %c2
// CHECK: %[[WY:.*]] = arith.divui %[[W]], %c2
// CHECK: %[[TX:.*]] = arith.remui %[[T]], %c3
// CHECK: %[[TY:.*]] = arith.divui %[[T]], %c3
// CHECK: %[[SY:.*]] = arith.muli %[[TY]], %c2
// CHECK: %[[Y:.*]] = arith.addi %[[SY]], %[[WY]]
// CHECK: %[[SX:.*]] = arith.muli %[[TX]], %c2
// CHECK: %[[X2:.*]] = arith.addi %[[SX]], %[[WX]]
// CHECK: %[[ROW:.*]] = arith.muli %[[Y]], %c6
// CHECK: %[[POS:.*]] = arith.addi %[[X2]], %[[ROW]]
// CHECK: tensor.extract %[[X]][%[[IMG]], %[[POS]], %{{.*}}]
// CHECK-NOT: arith.select
func.func @grid_partition(%x: tensor<?x24x8xf32>) -> tensor<?x2x6x4xf32> {
  %w = rpe.window_partition %x {resolution = array<i64: 4, 6>, window = array<i64: 2, 3>, shift = array<i64: 0, 0>, partition = #rpe.partition<grid>} : tensor<?x24x8xf32> -> tensor<?x2x6x4xf32>
  return %w : tensor<?x2x6x4xf32>
}

// -----

// The reverse: position (y, x) is token (y / 2, x / 2) of window
// (y mod 2, x mod 2).
// CHECK-LABEL: func @grid_reverse
// CHECK-SAME: (%[[O:.*]]: tensor<8x6x8xf32>)
// CHECK: %[[IMG:.*]] = linalg.index 0
// CHECK: %[[U:.*]] = linalg.index 1
// CHECK: %[[X:.*]] = arith.remui %[[U]], %c6
// CHECK: %[[Y:.*]] = arith.divui %[[U]], %c6
// CHECK: %[[WY:.*]] = arith.remui %[[Y]], %c2
// CHECK: %[[TY:.*]] = arith.divui %[[Y]], %c2
// CHECK: %[[WX:.*]] = arith.remui %[[X]], %c2
// CHECK: %[[TX:.*]] = arith.divui %[[X]], %c2
// CHECK: %[[FIRST:.*]] = arith.muli %[[IMG]], %c4
// CHECK: %[[WROW:.*]] = arith.muli %[[WY]], %c2
// CHECK: %[[WL:.*]] = arith.addi %[[WX]], %[[WROW]]
// CHECK: %[[WIN:.*]] = arith.addi %[[FIRST]], %[[WL]]
// CHECK: %[[TROW:.*]] = arith.muli %[[TY]], %c3
// CHECK: %[[TOK:.*]] = arith.addi %[[TX]], %[[TROW]]
// CHECK: tensor.extract %[[O]][%[[WIN]], %[[TOK]], %{{.*}}] : tensor<8x6x8xf32>
func.func @grid_reverse(%o: tensor<8x6x8xf32>) -> tensor<2x24x8xf32> {
  %y = rpe.window_reverse %o {resolution = array<i64: 4, 6>, window = array<i64: 2, 3>, shift = array<i64: 0, 0>, partition = #rpe.partition<grid>} : tensor<8x6x8xf32> -> tensor<2x24x8xf32>
  return %y : tensor<2x24x8xf32>
}
