// RUN: swin-opt %s --rpe-lower-matmul=vector-width=16 -split-input-file -verify-diagnostics
// RUN: not swin-opt %s --rpe-lower-matmul=vector-width=3 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: vector-width must be a power of two up to 64, got 3

func.func @tensors(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %o: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @below {{must be bufferized before its kernel is emitted}}
  %r = rpe.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%o : tensor<4x16xf32>) {
  ^bb0(%acc: f32):
    rpe.yield %acc : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

// Panels of 24 columns do not split into vectors of 16 lanes.
func.func @panel_width(%x: memref<4x8xf32>, %w: memref<1x8x24xf32>, %o: memref<4x24xf32>) {
  // expected-error @below {{has panels of 24 columns, not a multiple of the kernel's 16 lanes}}
  rpe.matmul ins(%x, %w : memref<4x8xf32>, memref<1x8x24xf32>) outs(%o : memref<4x24xf32>) {
  ^bb0(%acc: f32):
    rpe.yield %acc : f32
  }
  return
}
