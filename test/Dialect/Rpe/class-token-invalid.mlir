// RUN: swin-opt %s -split-input-file -verify-diagnostics

// With a class token the index is (Wh * Ww + 1) square.
// expected-error @below {{expects result of shape 50x50, got 49x49}}
%0 = rpe.relative_index {window = array<i64: 7, 7>, class_token} : tensor<49x49xi64>

// -----

// ... and without one it is not.
// expected-error @below {{expects result of shape 49x49, got 50x50}}
%0 = rpe.relative_index {window = array<i64: 7, 7>} : tensor<50x50xi64>

// -----

// BEiT's table has Swin's rows and three more.
func.func @lookup_swin_table(%t: tensor<169x3xf32>) {
  // expected-error @below {{expects a table of 172 rows for window 7x7 and a class token, got 169}}
  %b = rpe.lookup %t {window = array<i64: 7, 7>, class_token} : tensor<169x3xf32> -> tensor<3x50x50xf32>
  return
}

// -----

func.func @lookup_beit_table_without_class_token(%t: tensor<172x3xf32>) {
  // expected-error @below {{expects a table of 169 rows for window 7x7, got 172}}
  %b = rpe.lookup %t {window = array<i64: 7, 7>} : tensor<172x3xf32> -> tensor<3x49x49xf32>
  return
}

// -----

// The bias covers the class token's row and column.
func.func @lookup_grid_result(%t: tensor<172x3xf32>) {
  // expected-error @below {{expects result of shape 3x50x50, got 3x49x49}}
  %b = rpe.lookup %t {window = array<i64: 7, 7>, class_token} : tensor<172x3xf32> -> tensor<3x49x49xf32>
  return
}

// -----

// expected-error @below {{window must have 2 or 3 extents, got 1}}
%0 = rpe.relative_index {window = array<i64: 7>, class_token} : tensor<8x8xi64>

// -----

// The fused forms: the table's rows and BEiT's geometry (one window per
// image, no map, no mask).
func.func @fused_table(%q: tensor<?x3x5x8xf32>, %t: tensor<9x3xf32>, %o: tensor<?x5x24xf32>) -> tensor<?x5x24xf32> {
  // expected-error @below {{expects a table of shape 12x<heads> (with a class token), got 9x3}}
  %r = rpe.fused_window_attention ins(%q, %q, %q, %t : tensor<?x3x5x8xf32>, tensor<?x3x5x8xf32>, tensor<?x3x5x8xf32>, tensor<9x3xf32>)
         outs(%o : tensor<?x5x24xf32>) {window = array<i64: 2, 2>, scale = 1.0 : f32, class_token} -> tensor<?x5x24xf32>
  return %r : tensor<?x5x24xf32>
}

// -----

func.func @fused_grid_tokens(%q: tensor<?x3x4x8xf32>, %t: tensor<12x3xf32>, %o: tensor<?x4x24xf32>) -> tensor<?x4x24xf32> {
  // expected-error @below {{expects query of shape [windows, 3, 5, head_dim], got ?x3x4x8}}
  %r = rpe.fused_window_attention ins(%q, %q, %q, %t : tensor<?x3x4x8xf32>, tensor<?x3x4x8xf32>, tensor<?x3x4x8xf32>, tensor<12x3xf32>)
         outs(%o : tensor<?x4x24xf32>) {window = array<i64: 2, 2>, scale = 1.0 : f32, class_token} -> tensor<?x4x24xf32>
  return %r : tensor<?x4x24xf32>
}

// -----

func.func @fused_shifted(%q: tensor<?x3x5x8xf32>, %t: tensor<12x3xf32>, %o: tensor<?x5x24xf32>) -> tensor<?x5x24xf32> {
  // expected-error @below {{expects a class token only in the windows layout, without resolution and shift}}
  %r = rpe.fused_window_attention ins(%q, %q, %q, %t : tensor<?x3x5x8xf32>, tensor<?x3x5x8xf32>, tensor<?x3x5x8xf32>, tensor<12x3xf32>)
         outs(%o : tensor<?x5x24xf32>) {window = array<i64: 2, 2>, scale = 1.0 : f32, class_token,
                                        resolution = array<i64: 4, 4>, shift = array<i64: 1, 1>} -> tensor<?x5x24xf32>
  return %r : tensor<?x5x24xf32>
}

// -----

func.func @fused_masked(%q: tensor<?x3x5x8xf32>, %t: tensor<12x3xf32>, %m: tensor<1x5x5xf32>, %o: tensor<?x5x24xf32>) -> tensor<?x5x24xf32> {
  // expected-error @below {{expects a class token without a mask or logit_scale}}
  %r = rpe.fused_window_attention ins(%q, %q, %q, %t : tensor<?x3x5x8xf32>, tensor<?x3x5x8xf32>, tensor<?x3x5x8xf32>, tensor<12x3xf32>)
         mask(%m : tensor<1x5x5xf32>)
         outs(%o : tensor<?x5x24xf32>) {window = array<i64: 2, 2>, scale = 1.0 : f32, class_token} -> tensor<?x5x24xf32>
  return %r : tensor<?x5x24xf32>
}
