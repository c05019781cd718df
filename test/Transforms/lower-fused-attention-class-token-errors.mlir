// RUN: swin-opt %s --rpe-lower-fused-attention=kernel=rows -verify-diagnostics
// RUN: not swin-opt %s --rpe-lower-fused-attention="kernel=warps target=gpu" 2>&1 | FileCheck %s --check-prefix=GPU

// BEiT's class token is addressed by the CPU tiles kernels alone: the rows
// and warps kernels, and the GPU, refuse it.
// GPU: error: 'rpe.fused_window_attention' op has a class token, which only the CPU tiles kernels (kernel=tiles) address yet
func.func @class_token_rows(%q: memref<?x3x5x8xf32>, %t: memref<12x3xf32>, %o: memref<?x5x24xf32>) {
  // expected-error @below {{has a class token, which only the CPU tiles kernels (kernel=tiles) address yet}}
  rpe.fused_window_attention ins(%q, %q, %q, %t : memref<?x3x5x8xf32>, memref<?x3x5x8xf32>, memref<?x3x5x8xf32>, memref<12x3xf32>)
    outs(%o : memref<?x5x24xf32>) {window = array<i64: 2, 2>, scale = 0.35355339 : f32, class_token}
  return
}
