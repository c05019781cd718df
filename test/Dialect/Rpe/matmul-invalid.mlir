// RUN: swin-opt %s -split-input-file -verify-diagnostics

func.func @k_mismatch(%x: tensor<4x8xf32>, %w: tensor<2x9x16xf32>, %o: tensor<4x32xf32>) -> tensor<4x32xf32> {
  // expected-error @below {{expects rhs of shape [2, 8, 16] for K = 8 and N = 32, got [2, 9, 16]}}
  %r = rpe.matmul ins(%x, %w : tensor<4x8xf32>, tensor<2x9x16xf32>) outs(%o : tensor<4x32xf32>) {
  ^bb0(%acc: f32):
    rpe.yield %acc : f32
  } -> tensor<4x32xf32>
  return %r : tensor<4x32xf32>
}

// -----

func.func @panels_short_of_n(%x: tensor<4x8xf32>, %w: tensor<1x8x16xf32>, %o: tensor<4x20xf32>) -> tensor<4x20xf32> {
  // expected-error @below {{expects rhs of shape [2, 8, 16] for K = 8 and N = 20, got [1, 8, 16]}}
  %r = rpe.matmul ins(%x, %w : tensor<4x8xf32>, tensor<1x8x16xf32>) outs(%o : tensor<4x20xf32>) {
  ^bb0(%acc: f32):
    rpe.yield %acc : f32
  } -> tensor<4x20xf32>
  return %r : tensor<4x20xf32>
}

// -----

func.func @dynamic_k(%x: tensor<4x?xf32>, %w: tensor<?x16xf32>, %o: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @below {{expects static K and N, got K = ? and N = 16}}
  %r = rpe.matmul ins(%x, %w : tensor<4x?xf32>, tensor<?x16xf32>) outs(%o : tensor<4x16xf32>) {
  ^bb0(%acc: f32):
    rpe.yield %acc : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

func.func @row_mismatch(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %o: tensor<5x16xf32>) -> tensor<5x16xf32> {
  // expected-error @below {{expects lhs and destination of one row count M, got 4 and 5}}
  %r = rpe.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%o : tensor<5x16xf32>) {
  ^bb0(%acc: f32):
    rpe.yield %acc : f32
  } -> tensor<5x16xf32>
  return %r : tensor<5x16xf32>
}

// -----

func.func @transposed_packed(%x: tensor<4x8xf32>, %w: tensor<1x8x16xf32>, %o: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @below {{expects transpose_rhs only on an unpacked rhs}}
  %r = rpe.matmul ins(%x, %w : tensor<4x8xf32>, tensor<1x8x16xf32>) outs(%o : tensor<4x16xf32>) attributes {transpose_rhs} {
  ^bb0(%acc: f32):
    rpe.yield %acc : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

func.func @mixed_elements(%x: tensor<4x8xf16>, %w: tensor<8x16xf32>, %o: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @below {{expects lhs and rhs of one float element type}}
  %r = rpe.matmul ins(%x, %w : tensor<4x8xf16>, tensor<8x16xf32>) outs(%o : tensor<4x16xf32>) {
  ^bb0(%acc: f32):
    rpe.yield %acc : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

func.func @missing_map(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>, %o: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @below {{expects one epilogue map per epilogue input, got 0 for 1}}
  %r = rpe.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) epilogue(%b : tensor<16xf32>) outs(%o : tensor<4x16xf32>) {
  ^bb0(%acc: f32, %bias: f32):
    rpe.yield %acc : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

func.func @map_of_sums(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<20xf32>, %o: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @below {{expects epilogue map 0 to index its input by m, n or 0, got affine_map<(d0, d1) -> (d0 + d1)>}}
  %r = rpe.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) epilogue(%b : tensor<20xf32>) outs(%o : tensor<4x16xf32>)
         attributes {epilogue_maps = [affine_map<(m, n) -> (m + n)>]} {
  ^bb0(%acc: f32, %bias: f32):
    rpe.yield %acc : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

func.func @map_rank(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>, %o: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @below {{expects epilogue map 0 from (m, n) to the 1 indices of its input, got affine_map<(d0, d1) -> (d0, d1)>}}
  %r = rpe.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) epilogue(%b : tensor<16xf32>) outs(%o : tensor<4x16xf32>)
         attributes {epilogue_maps = [affine_map<(m, n) -> (m, n)>]} {
  ^bb0(%acc: f32, %bias: f32):
    rpe.yield %acc : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

func.func @argument_count(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %o: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @below {{expects an epilogue of 1 arguments (the product, then one per input), got 2}}
  %r = rpe.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%o : tensor<4x16xf32>) {
  ^bb0(%acc: f32, %extra: f32):
    rpe.yield %acc : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

func.func @product_type(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %o: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @below {{expects the product (the epilogue's first argument) in f32, got 'f16'}}
  %r = rpe.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%o : tensor<4x16xf32>) {
  ^bb0(%acc: f16):
    %e = arith.extf %acc : f16 to f32
    rpe.yield %e : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

func.func @yield_type(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %o: tensor<4x16xf16>) -> tensor<4x16xf16> {
  %r = rpe.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%o : tensor<4x16xf16>) {
  ^bb0(%acc: f32):
    // expected-error @below {{expects a value of the destination's element type 'f16', got 'f32'}}
    rpe.yield %acc : f32
  } -> tensor<4x16xf16>
  return %r : tensor<4x16xf16>
}

// -----

func.func @mixed_tensors_and_memrefs(%x: tensor<4x8xf32>, %w: memref<8x16xf32>, %o: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @below {{expects all operands to be ranked tensors or all memrefs}}
  %r = rpe.matmul ins(%x, %w : tensor<4x8xf32>, memref<8x16xf32>) outs(%o : tensor<4x16xf32>) {
  ^bb0(%acc: f32):
    rpe.yield %acc : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

func.func @yield_outside(%x: f32) {
  // expected-error @below {{expects parent op 'rpe.matmul'}}
  rpe.yield %x : f32
}
