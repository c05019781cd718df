// RUN: swin-opt %s --rpe-lower-fused-attention -split-input-file -verify-diagnostics
// RUN: not swin-opt %s --rpe-lower-fused-attention=kernel=bogus 2>&1 | FileCheck %s --check-prefix=KERNEL
// RUN: not swin-opt %s --rpe-lower-fused-attention=vector-width=3 2>&1 | FileCheck %s --check-prefix=WIDTH
// RUN: not swin-opt %s --rpe-lower-fused-attention=target=tpu 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not swin-opt %s --rpe-lower-fused-attention="kernel=tiles target=gpu" 2>&1 | FileCheck %s --check-prefix=TILES

// KERNEL: for the --kernel option: Cannot find option named 'bogus'
// WIDTH: error: vector-width must be a power of two up to 64, got 3
// WIDTH-NOT: func.func
// TARGET: for the --target option: Cannot find option named 'tpu'
// TILES: error: kernel=tiles is the CPU kernel; the GPU takes rows or warps

func.func @on_tensors(%q: tensor<?x3x49x32xf32>, %t: tensor<169x3xf32>, %o: tensor<?x49x96xf32>) -> tensor<?x49x96xf32> {
  // expected-error @below {{must be bufferized before rpe-lower-fused-attention}}
  %r = rpe.fused_window_attention ins(%q, %q, %q, %t : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<169x3xf32>)
         outs(%o : tensor<?x49x96xf32>) {window = array<i64: 7, 7>, scale = 1.0 : f32} -> tensor<?x49x96xf32>
  return %r : tensor<?x49x96xf32>
}
