// RUN: swin-opt %s --rpe-lower-matmul=vector-width=16 -split-input-file -verify-diagnostics
// RUN: not swin-opt %s --rpe-lower-matmul=vector-width=3 -split-input-file 2>&1 | FileCheck %s --check-prefix=BAD

// RUN: not swin-opt %s --rpe-lower-matmul="vector-width=32 bf16-dot=true" -split-input-file 2>&1 | FileCheck %s --check-prefix=BADDOT

// BAD: error: vector-width must be a power of two up to 64, got 3
// BADDOT: error: bf16-dot needs a vector-width of 4, 8 or 16, got 32

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

// -----

// Weights packed in pairs of k are the bf16-dot kernel's alone.
func.func @pairs_without_dot(%x: memref<4x8xbf16>, %w: memref<1x4x16x2xbf16>, %o: memref<4x16xf32>) {
  // expected-error @below {{has weights packed in pairs of k, which only the kernel of bf16-dot reads}}
  rpe.matmul ins(%x, %w : memref<4x8xbf16>, memref<1x4x16x2xbf16>) outs(%o : memref<4x16xf32>) {
  ^bb0(%acc: f32):
    rpe.yield %acc : f32
  }
  return
}

// -----

// A pair of k is the 32-bit lane of a bf16 dot product: f32 has none.
func.func @f32_pairs(%x: memref<4x8xf32>, %w: memref<1x4x16x2xf32>, %o: memref<4x16xf32>) {
  // expected-error @below {{expects rhs packed in pairs of k only in bf16, got 'f32'}}
  rpe.matmul ins(%x, %w : memref<4x8xf32>, memref<1x4x16x2xf32>) outs(%o : memref<4x16xf32>) {
  ^bb0(%acc: f32):
    rpe.yield %acc : f32
  }
  return
}

// -----

// K = 5 is three pairs, the last with a zero row.
func.func @pair_count(%x: memref<4x5xbf16>, %w: memref<1x2x16x2xbf16>, %o: memref<4x16xf32>) {
  // expected-error @below {{expects rhs of shape [1, 3, 16, 2] for K = 5 and N = 16, got [1, 2, 16, 2]}}
  rpe.matmul ins(%x, %w : memref<4x5xbf16>, memref<1x2x16x2xbf16>) outs(%o : memref<4x16xf32>) {
  ^bb0(%acc: f32):
    rpe.yield %acc : f32
  }
  return
}

// -----

// The pair is the innermost extent, of 2.
func.func @pair_extent(%x: memref<4x6xbf16>, %w: memref<1x3x16x3xbf16>, %o: memref<4x16xf32>) {
  // expected-error @below {{expects rhs of shape [1, 3, 16, 2] for K = 6 and N = 16, got [1, 3, 16, 3]}}
  rpe.matmul ins(%x, %w : memref<4x6xbf16>, memref<1x3x16x3xbf16>) outs(%o : memref<4x16xf32>) {
  ^bb0(%acc: f32):
    rpe.yield %acc : f32
  }
  return
}
