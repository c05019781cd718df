// RUN: swin-opt %s --rpe-item-range --split-input-file --verify-diagnostics

// expected-error @+1 {{holds 2 item loops; rpe-item-range gives a function one range}}
func.func @two(%out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    memref.store %zero, %out[%i] : memref<4xf32>
  } {rpe.item_loop}
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    memref.store %zero, %out[%i] : memref<4xf32>
  } {rpe.item_loop}
  return
}

// -----

// expected-error @+1 {{is called in the module; rpe-item-range would change its signature under its callers}}
func.func @callee(%out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    memref.store %zero, %out[%i] : memref<4xf32>
  } {rpe.item_loop}
  return
}

func.func @caller(%out: memref<4xf32>) {
  func.call @callee(%out) : (memref<4xf32>) -> ()
  return
}

// -----

func.func @two_dimensional(%out: memref<4x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  // expected-error @+1 {{marked 'rpe.item_loop' must be one loop from 0 by 1}}
  scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c4) step (%c1, %c1) {
    memref.store %zero, %out[%i, %j] : memref<4x4xf32>
  } {rpe.item_loop}
  return
}

// -----

func.func @not_unit() {
  // expected-error @+1 {{expects 'rpe.item_loop' to be a unit attribute, got 1 : i64}}
  %c0 = arith.constant {rpe.item_loop = 1 : i64} 0 : index
  return
}
