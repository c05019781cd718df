// RUN: swin-opt %s --rpe-fold-data-movement --cse --canonicalize -split-input-file | FileCheck %s

// torch.roll(x, (-2, -2), (1, 2)) as torch-mlir imports it: per dimension,
// two slices cast to a dynamic extent and concatenated in the other order.
// Both concatenations become one gather from %x; the row (the channels)
// stays the last index.
// CHECK-LABEL: func @roll
// CHECK-SAME: (%[[X:.*]]: tensor<1x8x8x16xf32>)
// CHECK-NOT: tensor.concat
// CHECK: %[[G:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<1x8x8x16xf32>)
// CHECK-DAG: %[[H:.*]] = linalg.index 1
// CHECK-DAG: %[[W:.*]] = linalg.index 2
// CHECK-DAG: %[[C:.*]] = linalg.index 3
// CHECK-DAG: %[[INH:.*]] = arith.cmpi ult, %[[H]], %c6
// CHECK-DAG: %[[SH:.*]] = arith.select %[[INH]], %{{.*}}, %{{.*}} : index
// CHECK-DAG: %[[INW:.*]] = arith.cmpi ult, %[[W]], %c6
// CHECK-DAG: %[[SW:.*]] = arith.select %[[INW]], %{{.*}}, %{{.*}} : index
// CHECK: tensor.extract %[[X]][%c0, %[[SH]], %[[SW]], %[[C]]]
// CHECK-NOT: tensor.concat
// CHECK: return %[[G]]
func.func @roll(%x: tensor<1x8x8x16xf32>) -> tensor<1x8x8x16xf32> {
  %a = tensor.extract_slice %x[0, 2, 0, 0] [1, 6, 8, 16] [1, 1, 1, 1] : tensor<1x8x8x16xf32> to tensor<1x6x8x16xf32>
  %ac = tensor.cast %a : tensor<1x6x8x16xf32> to tensor<1x?x8x16xf32>
  %b = tensor.extract_slice %x[0, 0, 0, 0] [1, 2, 8, 16] [1, 1, 1, 1] : tensor<1x8x8x16xf32> to tensor<1x2x8x16xf32>
  %bc = tensor.cast %b : tensor<1x2x8x16xf32> to tensor<1x?x8x16xf32>
  %c = tensor.concat dim(1) %ac, %bc : (tensor<1x?x8x16xf32>, tensor<1x?x8x16xf32>) -> tensor<1x8x8x16xf32>
  %d = tensor.extract_slice %c[0, 0, 2, 0] [1, 8, 6, 16] [1, 1, 1, 1] : tensor<1x8x8x16xf32> to tensor<1x8x6x16xf32>
  %dc = tensor.cast %d : tensor<1x8x6x16xf32> to tensor<1x8x?x16xf32>
  %e = tensor.extract_slice %c[0, 0, 0, 0] [1, 8, 2, 16] [1, 1, 1, 1] : tensor<1x8x8x16xf32> to tensor<1x8x2x16xf32>
  %ec = tensor.cast %e : tensor<1x8x2x16xf32> to tensor<1x8x?x16xf32>
  %r = tensor.concat dim(2) %dc, %ec : (tensor<1x8x?x16xf32>, tensor<1x8x?x16xf32>) -> tensor<1x8x8x16xf32>
  return %r : tensor<1x8x8x16xf32>
}

// -----

// Window partition (windows of 4x4 on an 8x8 map): expand, transpose,
// collapse to [tokens, channels]; one gather.
// CHECK-LABEL: func @window_partition
// CHECK-SAME: (%[[X:.*]]: tensor<1x8x8x16xf32>)
// CHECK-NOT: linalg.transpose
// CHECK: %[[G:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<64x16xf32>)
// CHECK: %[[T:.*]] = linalg.index 0
// CHECK: %[[C:.*]] = linalg.index 1
// CHECK: arith.remui %[[T]], %c4
// CHECK: tensor.extract %[[X]][%{{.*}}, %{{.*}}, %{{.*}}, %[[C]]]
// CHECK-NOT: linalg.transpose
// CHECK: return %[[G]]
func.func @window_partition(%x: tensor<1x8x8x16xf32>) -> tensor<64x16xf32> {
  %e = tensor.expand_shape %x [[0], [1, 2], [3, 4], [5]] output_shape [1, 2, 4, 2, 4, 16] : tensor<1x8x8x16xf32> into tensor<1x2x4x2x4x16xf32>
  %i = tensor.empty() : tensor<1x2x2x4x4x16xf32>
  %t = linalg.transpose ins(%e : tensor<1x2x4x2x4x16xf32>) outs(%i : tensor<1x2x2x4x4x16xf32>) permutation = [0, 1, 3, 2, 4, 5]
  %c = tensor.collapse_shape %t [[0, 1, 2, 3, 4], [5]] : tensor<1x2x2x4x4x16xf32> into tensor<64x16xf32>
  return %c : tensor<64x16xf32>
}

// -----

// The merge of heads: [windows, heads, tokens, d] -> [windows, tokens,
// heads, d] -> [windows * tokens, heads * d]. The gather keeps the rows of
// d; the last collapse, which merges them with the heads, stays a view.
// CHECK-LABEL: func @merge_heads
// CHECK-SAME: (%[[X:.*]]: tensor<4x2x16x8xf32>)
// CHECK: %[[G:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4x16x2x8xf32>)
// CHECK: %[[I0:.*]] = linalg.index 0
// CHECK: %[[I1:.*]] = linalg.index 1
// CHECK: %[[I2:.*]] = linalg.index 2
// CHECK: %[[I3:.*]] = linalg.index 3
// CHECK: tensor.extract %[[X]][%[[I0]], %[[I2]], %[[I1]], %[[I3]]]
// CHECK: %[[C:.*]] = tensor.collapse_shape %[[G]] {{\[\[}}0, 1], [2, 3]]
// CHECK: return %[[C]]
func.func @merge_heads(%x: tensor<4x2x16x8xf32>) -> tensor<64x16xf32> {
  %i = tensor.empty() : tensor<4x16x2x8xf32>
  %t = linalg.transpose ins(%x : tensor<4x2x16x8xf32>) outs(%i : tensor<4x16x2x8xf32>) permutation = [0, 2, 1, 3]
  %c = tensor.collapse_shape %t [[0, 1], [2, 3]] : tensor<4x16x2x8xf32> into tensor<64x16xf32>
  return %c : tensor<64x16xf32>
}

// -----

// The split of a fused qkv projection into q, k and v per head: one gather
// per slice, each reading its third of %x.
// CHECK-LABEL: func @split_qkv
// CHECK-SAME: (%[[X:.*]]: tensor<64x48xf32>)
// CHECK-NOT: linalg.transpose
// CHECK: %[[Q:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4x2x16x8xf32>)
// CHECK: %[[D:.*]] = linalg.index 3
// CHECK: %[[QC:.*]] = arith.addi %{{.*}}, %[[D]] : index
// CHECK: tensor.extract %[[X]][%{{.*}}, %[[QC]]] : tensor<64x48xf32>
// CHECK: %[[K:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4x2x16x8xf32>)
// CHECK: tensor.extract %[[X]]
// CHECK: return %[[Q]], %[[K]]
func.func @split_qkv(%x: tensor<64x48xf32>) -> (tensor<4x2x16x8xf32>, tensor<4x2x16x8xf32>) {
  %e = tensor.expand_shape %x [[0, 1], [2, 3, 4]] output_shape [4, 16, 3, 2, 8] : tensor<64x48xf32> into tensor<4x16x3x2x8xf32>
  %i = tensor.empty() : tensor<3x4x2x16x8xf32>
  %t = linalg.transpose ins(%e : tensor<4x16x3x2x8xf32>) outs(%i : tensor<3x4x2x16x8xf32>) permutation = [2, 0, 3, 1, 4]
  %q = tensor.extract_slice %t[0, 0, 0, 0, 0] [1, 4, 2, 16, 8] [1, 1, 1, 1, 1] : tensor<3x4x2x16x8xf32> to tensor<1x4x2x16x8xf32>
  %k = tensor.extract_slice %t[1, 0, 0, 0, 0] [1, 4, 2, 16, 8] [1, 1, 1, 1, 1] : tensor<3x4x2x16x8xf32> to tensor<1x4x2x16x8xf32>
  %qc = tensor.collapse_shape %q [[0, 1], [2], [3], [4]] : tensor<1x4x2x16x8xf32> into tensor<4x2x16x8xf32>
  %kc = tensor.collapse_shape %k [[0, 1], [2], [3], [4]] : tensor<1x4x2x16x8xf32> into tensor<4x2x16x8xf32>
  return %qc, %kc : tensor<4x2x16x8xf32>, tensor<4x2x16x8xf32>
}

// -----

// A transpose of the innermost dimension: a row of the result is a column
// of the source, not a contiguous read; left as it is.
// CHECK-LABEL: func @transpose_innermost
// CHECK: linalg.transpose
// CHECK-NOT: linalg.generic
func.func @transpose_innermost(%x: tensor<8x16xf32>) -> tensor<16x8xf32> {
  %i = tensor.empty() : tensor<16x8xf32>
  %t = linalg.transpose ins(%x : tensor<8x16xf32>) outs(%i : tensor<16x8xf32>) permutation = [1, 0]
  return %t : tensor<16x8xf32>
}

// -----

// Reshapes and slices alone are views: nothing to fold.
// CHECK-LABEL: func @views_only
// CHECK: tensor.expand_shape
// CHECK: tensor.extract_slice
// CHECK-NOT: linalg.generic
func.func @views_only(%x: tensor<64x16xf32>) -> tensor<2x16xf32> {
  %e = tensor.expand_shape %x [[0, 1], [2]] output_shape [8, 8, 16] : tensor<64x16xf32> into tensor<8x8x16xf32>
  %s = tensor.extract_slice %e[0, 0, 0] [1, 2, 16] [1, 1, 1] : tensor<8x8x16xf32> to tensor<2x16xf32>
  return %s : tensor<2x16xf32>
}

// -----

// A concatenation along the row (a roll of the channels): the row is two
// runs of the source; left as it is.
// CHECK-LABEL: func @roll_innermost
// CHECK: tensor.concat
// CHECK-NOT: linalg.generic
func.func @roll_innermost(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %a = tensor.extract_slice %x[0, 4] [4, 12] [1, 1] : tensor<4x16xf32> to tensor<4x12xf32>
  %b = tensor.extract_slice %x[0, 0] [4, 4] [1, 1] : tensor<4x16xf32> to tensor<4x4xf32>
  %c = tensor.concat dim(1) %a, %b : (tensor<4x12xf32>, tensor<4x4xf32>) -> tensor<4x16xf32>
  return %c : tensor<4x16xf32>
}

// -----

// A concatenation of two tensors (not a roll of one): no single source to
// gather from; left as it is.
// CHECK-LABEL: func @concat_two_sources
// CHECK: tensor.concat
// CHECK-NOT: linalg.generic
func.func @concat_two_sources(%x: tensor<2x16xf32>, %y: tensor<2x16xf32>) -> tensor<4x16xf32> {
  %c = tensor.concat dim(0) %x, %y : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<4x16xf32>
  return %c : tensor<4x16xf32>
}

// -----

// A chain that ends in a cast to a dynamic shape: the gather keeps the
// static shape, the cast is applied to its result.
// CHECK-LABEL: func @dynamic_end
// CHECK-NOT: tensor.concat
// CHECK: %[[G:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4x16xf32>)
// CHECK: %[[C:.*]] = tensor.cast %[[G]] : tensor<4x16xf32> to tensor<?x16xf32>
// CHECK: return %[[C]]
func.func @dynamic_end(%x: tensor<4x16xf32>) -> tensor<?x16xf32> {
  %a = tensor.extract_slice %x[1, 0] [3, 16] [1, 1] : tensor<4x16xf32> to tensor<3x16xf32>
  %b = tensor.extract_slice %x[0, 0] [1, 16] [1, 1] : tensor<4x16xf32> to tensor<1x16xf32>
  %c = tensor.concat dim(0) %a, %b : (tensor<3x16xf32>, tensor<1x16xf32>) -> tensor<4x16xf32>
  %d = tensor.cast %c : tensor<4x16xf32> to tensor<?x16xf32>
  return %d : tensor<?x16xf32>
}

// -----

// A concatenation of an input of unknown extent: left as it is.
// CHECK-LABEL: func @dynamic_input
// CHECK: tensor.concat
// CHECK-NOT: linalg.generic
func.func @dynamic_input(%x: tensor<?x16xf32>) -> tensor<4x16xf32> {
  %c = tensor.concat dim(0) %x, %x : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<4x16xf32>
  return %c : tensor<4x16xf32>
}
