// RUN: swin-opt %s --rpe-lower-fused-attention="kernel=rows target=gpu" -verify-diagnostics

// A thread per query row: windows of more than 1024 tokens do not fit a block.
func.func @too_many_tokens(%q: memref<?x1x1089x8xf32>, %t: memref<4225x1xf32>, %o: memref<?x1089x8xf32>) {
  // expected-error @below {{has 1089 tokens per window, more than a GPU block's 1024 threads}}
  rpe.fused_window_attention ins(%q, %q, %q, %t : memref<?x1x1089x8xf32>, memref<?x1x1089x8xf32>, memref<?x1x1089x8xf32>, memref<4225x1xf32>)
    outs(%o : memref<?x1089x8xf32>) {window = array<i64: 33, 33>, scale = 1.0 : f32}
  return
}
