// RUN: swin-opt %s --rpe-item-range --split-input-file | FileCheck %s

// The marked loop runs [begin, min(end, items)); the function takes begin
// and end last, and the mark is consumed.
// CHECK-LABEL: func.func @items(
// CHECK-SAME: %[[OUT:.*]]: memref<12xf32>, %[[BEGIN:.*]]: index, %[[END:.*]]: index)
// CHECK: %[[C12:.*]] = arith.constant 12 : index
// CHECK: %[[UPPER:.*]] = arith.minui %[[END]], %[[C12]] : index
// CHECK: scf.parallel (%[[I:.*]]) = (%[[BEGIN]]) to (%[[UPPER]])
// CHECK: memref.store %{{.*}}, %[[OUT]][%[[I]]]
// CHECK-NOT: rpe.item_loop
func.func @items(%out: memref<12xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c12 = arith.constant 12 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%c12) step (%c1) {
    memref.store %zero, %out[%i] : memref<12xf32>
  } {rpe.item_loop}
  return
}

// -----

// A dynamic number of items, and functions without an item loop, which
// keep their signature.
// CHECK-LABEL: func.func @dynamic(
// CHECK-SAME: %[[OUT:.*]]: memref<?xf32>, %[[BEGIN:.*]]: index, %[[END:.*]]: index)
// CHECK: %[[N:.*]] = memref.dim %[[OUT]]
// CHECK: %[[UPPER:.*]] = arith.minui %[[END]], %[[N]] : index
// CHECK: scf.parallel (%{{.*}}) = (%[[BEGIN]]) to (%[[UPPER]])
// CHECK-LABEL: func.func @plain(%{{.*}}: memref<?xf32>) {
func.func @dynamic(%out: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %n = memref.dim %out, %c0 : memref<?xf32>
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %zero, %out[%i] : memref<?xf32>
  } {rpe.item_loop}
  return
}

func.func @plain(%out: memref<?xf32>) {
  return
}
