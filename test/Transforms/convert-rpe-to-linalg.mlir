// RUN: swin-opt %s --convert-rpe-to-linalg --mlir-print-elementsattrs-with-hex-if-larger=-1 -split-input-file | FileCheck %s

// The gather reads the table at a constant index; nothing computes it.
// CHECK-LABEL: func @lookup
// CHECK-SAME: (%[[T:.*]]: tensor<9x2xf16>)
// CHECK: %[[IDX:.*]] = arith.constant dense<{{\[}}[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]> : tensor<4x4xi32>
// CHECK: linalg.generic {{.*}} ins(%[[IDX]] : tensor<4x4xi32>) outs(%{{.*}} : tensor<2x4x4xf16>)
// CHECK:   %[[ROW:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK:   %[[HEAD:.*]] = linalg.index 0 : index
// CHECK:   tensor.extract %[[T]][%[[ROW]], %[[HEAD]]] : tensor<9x2xf16>
// CHECK-NOT: rpe.
func.func @lookup(%t: tensor<9x2xf16>) -> tensor<2x4x4xf16> {
  %b = rpe.lookup %t {window = array<i64: 2, 2>} : tensor<9x2xf16> -> tensor<2x4x4xf16>
  return %b : tensor<2x4x4xf16>
}

// -----

// BEiT's class token: the same gather at the class-token index, row and
// column 0 reading the table's three rows past Swin's 9.
// CHECK-LABEL: func @lookup_class_token
// CHECK-SAME: (%[[T:.*]]: tensor<12x2xf32>)
// CHECK: %[[IDX:.*]] = arith.constant dense<{{\[}}[11, 9, 9, 9, 9], [10, 4, 3, 1, 0], [10, 5, 4, 2, 1], [10, 7, 6, 4, 3], [10, 8, 7, 5, 4]]> : tensor<5x5xi32>
// CHECK: linalg.generic {{.*}} ins(%[[IDX]] : tensor<5x5xi32>) outs(%{{.*}} : tensor<2x5x5xf32>)
// CHECK:   tensor.extract %[[T]][%{{.*}}, %{{.*}}] : tensor<12x2xf32>
// CHECK-NOT: rpe.
func.func @lookup_class_token(%t: tensor<12x2xf32>) -> tensor<2x5x5xf32> {
  %b = rpe.lookup %t {window = array<i64: 2, 2>, class_token} : tensor<12x2xf32> -> tensor<2x5x5xf32>
  return %b : tensor<2x5x5xf32>
}

// -----

// Window attention: a forall over (window, head), the unfused steps on
// N x N tiles in f32, the mask of window w read at w mod nW, the tile
// written to columns h*d of the merged-heads result.
// CHECK-DAG: #[[QK_Q:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[QK_K:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[ROW:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG: #[[PV_V:.*]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-LABEL: func @attention
// CHECK-SAME: (%[[Q:.*]]: tensor<?x2x4x8xf16>, %[[B:.*]]: tensor<2x4x4xf16>)
// CHECK: %[[MASK:.*]] = arith.constant dense<{{.*}}> : tensor<4x4x4xf32>
// CHECK: %[[NW:.*]] = tensor.dim %[[Q]], %c0
// CHECK: scf.forall (%[[W:.*]], %[[H:.*]]) in (%[[NW]], 2) shared_outs(%[[OUT:.*]] = %{{.*}}) -> (tensor<?x4x16xf16>)
// CHECK:   %[[QT:.*]] = tensor.extract_slice %[[Q]][%[[W]], %[[H]], 0, 0] [1, 1, 4, 8] [1, 1, 1, 1] : tensor<?x2x4x8xf16> to tensor<4x8xf16>
// CHECK:   %[[BT:.*]] = tensor.extract_slice %[[B]][%[[H]], 0, 0] [1, 4, 4] [1, 1, 1] : tensor<2x4x4xf16> to tensor<4x4xf16>
// CHECK:   %[[MW:.*]] = arith.remui %[[W]], %c4
// CHECK:   %[[MT:.*]] = tensor.extract_slice %[[MASK]][%[[MW]], 0, 0] [1, 4, 4] [1, 1, 1]
// CHECK:   %[[SCALE:.*]] = arith.constant 5.000000e-01 : f32
// S = (scale * q) kᵀ
// CHECK:   linalg.generic {indexing_maps = [#[[QK_Q]], #[[QK_K]], #{{.*}}], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK:     arith.extf
// CHECK:     arith.mulf %{{.*}}, %[[SCALE]] : f32
// CHECK:     arith.mulf
// CHECK:     arith.addf
// S + bias + mask
// CHECK:   linalg.generic {{.*}} ins(%{{.*}}, %[[BT]], %[[MT]] : tensor<4x4xf32>, tensor<4x4xf16>, tensor<4x4xf32>)
// CHECK:     arith.addf
// CHECK:     arith.addf
// Softmax: max, exp(s - max), sum, divide.
// CHECK:   linalg.generic {indexing_maps = [#{{.*}}, #[[ROW]]], iterator_types = ["parallel", "reduction"]}
// CHECK:     arith.maximumf
// CHECK:   linalg.generic
// CHECK:     arith.subf
// CHECK:     math.exp
// CHECK:   linalg.generic {indexing_maps = [#{{.*}}, #[[ROW]]], iterator_types = ["parallel", "reduction"]}
// CHECK:     arith.addf
// CHECK:   linalg.generic
// CHECK:     arith.divf
// P v
// CHECK:   linalg.generic {indexing_maps = [#[[QK_Q]], #[[PV_V]], #{{.*}}], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK:   linalg.generic
// CHECK:     arith.truncf %{{.*}} : f32 to f16
// CHECK:   %[[COL:.*]] = arith.muli %[[H]], %c8
// CHECK:   scf.forall.in_parallel
// CHECK:     tensor.parallel_insert_slice %{{.*}} into %[[OUT]][%[[W]], 0, %[[COL]]] [1, 4, 8] [1, 1, 1] : tensor<4x8xf16> into tensor<?x4x16xf16>
// CHECK-NOT: rpe.
func.func @attention(%q: tensor<?x2x4x8xf16>, %b: tensor<2x4x4xf16>) -> tensor<?x4x16xf16> {
  %m = rpe.shift_mask {resolution = array<i64: 4, 4>, window = array<i64: 2, 2>, shift = array<i64: 1, 1>} : tensor<4x4x4xf32>
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x2x4x8xf16>, tensor<?x2x4x8xf16>, tensor<?x2x4x8xf16>)
         bias(%b : tensor<2x4x4xf16>) mask(%m : tensor<4x4x4xf32>) {scale = 0.5 : f32} -> tensor<?x4x16xf16>
  return %0 : tensor<?x4x16xf16>
}

// -----

// Without a scale attribute the scale is head_dim ** -0.5; f32 needs no
// conversions; the head-major result is written at [w, h].
// CHECK-LABEL: func @attention_default_scale
// CHECK: arith.constant 2.500000e-01 : f32
// CHECK-NOT: arith.extf
// CHECK-NOT: arith.truncf
// CHECK: tensor.parallel_insert_slice %{{.*}} into %{{.*}}[%{{.*}}, %{{.*}}, 0, 0] [1, 1, 9, 16] [1, 1, 1, 1] : tensor<9x16xf32> into tensor<5x3x9x16xf32>
func.func @attention_default_scale(%q: tensor<5x3x9x16xf32>, %b: tensor<3x9x9xf32>) -> tensor<5x3x9x16xf32> {
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<5x3x9x16xf32>, tensor<5x3x9x16xf32>, tensor<5x3x9x16xf32>)
         bias(%b : tensor<3x9x9xf32>) -> tensor<5x3x9x16xf32>
  return %0 : tensor<5x3x9x16xf32>
}

// -----

// SwinV2's cosine attention as PyTorch computes it: q and k tiles
// normalized (sum of squares, then x / max(sqrt, 1e-12)), the head's
// logit scale clamped at ln 100 and exponentiated as the scores' scale.
// CHECK-LABEL: func @cosine
// CHECK-SAME: %[[LS:[a-z0-9]+]]: tensor<3xf32>
// CHECK: scf.forall (%{{.*}}, %[[H:.*]]) in
// CHECK: math.fma %[[X:.*]], %[[X]], %{{.*}} : f32
// CHECK: math.sqrt
// CHECK: arith.maximumf %{{.*}}, %{{.*}} : f32
// CHECK: arith.divf
// CHECK: math.fma
// CHECK: math.sqrt
// CHECK: %[[RAW:.*]] = tensor.extract %[[LS]][%[[H]]] : tensor<3xf32>
// CHECK: %[[CLAMPED:.*]] = arith.minimumf %[[RAW]], %{{.*}} : f32
// CHECK: %[[HEAD:.*]] = math.exp %[[CLAMPED]] : f32
// CHECK: %[[SCALE:.*]] = arith.mulf %{{.*}}, %[[HEAD]] : f32
// CHECK: linalg.generic
// CHECK: arith.mulf %{{.*}}, %[[SCALE]] : f32
func.func @cosine(%q: tensor<?x3x64x32xf32>, %b: tensor<3x64x64xf32>, %ls: tensor<3xf32>) -> tensor<?x64x96xf32> {
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x3x64x32xf32>, tensor<?x3x64x32xf32>, tensor<?x3x64x32xf32>)
         bias(%b : tensor<3x64x64xf32>) logit_scale(%ls : tensor<3xf32>) -> tensor<?x64x96xf32>
  return %0 : tensor<?x64x96xf32>
}

// -----

// SwinV2's bias table of weights that are not constants: a constant
// coordinate table and the MLP as generics (fc1 with its bias, relu folded
// into the fc2 contraction, 16 * sigmoid).
// CHECK-LABEL: func @continuous_position_bias
// CHECK-SAME: (%[[W1:.*]]: tensor<4x2xf32>, %[[B1:.*]]: tensor<4xf32>, %[[W2:.*]]: tensor<3x4xf32>)
// CHECK: %[[COORDS:.*]] = arith.constant dense<{{.*}}> : tensor<15x2xf32>
// CHECK: %[[BIAS:.*]] = linalg.generic {{.*}} ins(%[[B1]] : tensor<4xf32>)
// CHECK: %[[PRE:.*]] = linalg.generic {{.*}} ins(%[[COORDS]], %[[W1]] : tensor<15x2xf32>, tensor<4x2xf32>) outs(%[[BIAS]] : tensor<15x4xf32>)
// CHECK: math.fma
// CHECK: %[[LOGITS:.*]] = linalg.generic {{.*}} ins(%[[PRE]], %[[W2]] : tensor<15x4xf32>, tensor<3x4xf32>)
// CHECK: arith.maximumf
// CHECK: math.fma
// CHECK: linalg.generic {{.*}} ins(%[[LOGITS]] : tensor<15x3xf32>)
// CHECK: math.exp
// CHECK: arith.divf
// CHECK-NOT: rpe.continuous_position_bias
func.func @continuous_position_bias(%w1: tensor<4x2xf32>, %b1: tensor<4xf32>, %w2: tensor<3x4xf32>) -> tensor<15x3xf32> {
  %t = rpe.continuous_position_bias %w1, %b1, %w2 {window = array<i64: 2, 3>} : tensor<4x2xf32>, tensor<4xf32>, tensor<3x4xf32> -> tensor<15x3xf32>
  return %t : tensor<15x3xf32>
}
