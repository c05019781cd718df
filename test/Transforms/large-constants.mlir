// Indices and masks too large to materialize are neither folded nor
// lowered to constants: a located error, not an exhausted memory.
// RUN: swin-opt %s --canonicalize -split-input-file | FileCheck %s
// RUN: swin-opt %s --convert-rpe-to-linalg -split-input-file -verify-diagnostics

// CHECK-LABEL: func @huge_index
// CHECK: rpe.relative_index
func.func @huge_index() -> tensor<65536x65536xi32> {
  // expected-error @below {{failed to legalize operation 'rpe.relative_index'}}
  %0 = rpe.relative_index {window = array<i64: 256, 256>} : tensor<65536x65536xi32>
  return %0 : tensor<65536x65536xi32>
}

// -----

// CHECK-LABEL: func @huge_lookup
// CHECK: rpe.lookup
func.func @huge_lookup(%t: tensor<261121x1xf32>) -> tensor<1x65536x65536xf32> {
  // expected-error @below {{has a 65536x65536 relative index, too large to materialize (fuse it into the attention instead)}}
  // expected-error @below {{failed to legalize operation 'rpe.lookup'}}
  %b = rpe.lookup %t {window = array<i64: 256, 256>} : tensor<261121x1xf32> -> tensor<1x65536x65536xf32>
  return %b : tensor<1x65536x65536xf32>
}

// -----

// CHECK-LABEL: func @huge_mask
// CHECK: rpe.shift_mask
func.func @huge_mask() -> tensor<1048576x64x64xf32> {
  // expected-error @below {{failed to legalize operation 'rpe.shift_mask'}}
  %m = rpe.shift_mask {resolution = array<i64: 8192, 8192>, window = array<i64: 8, 8>, shift = array<i64: 4, 4>} : tensor<1048576x64x64xf32>
  return %m : tensor<1048576x64x64xf32>
}
