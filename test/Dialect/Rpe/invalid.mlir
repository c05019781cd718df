// RUN: swin-opt %s -split-input-file -verify-diagnostics

// expected-error @below {{window must have 2 or 3 extents, got 1}}
%0 = rpe.relative_index {window = array<i64: 7>} : tensor<7x7xi64>

// -----

// expected-error @below {{window extents must be in [1, 1024], got 0}}
%0 = rpe.relative_index {window = array<i64: 7, 0>} : tensor<0x0xi64>

// -----

// expected-error @below {{window extents must be in [1, 1024], got -3}}
%0 = rpe.relative_index {window = array<i64: -3, 7>} : tensor<49x49xi64>

// -----

// expected-error @below {{window has 1048576 tokens, more than the supported 65536}}
%0 = rpe.relative_index {window = array<i64: 1024, 1024>} : tensor<49x49xi64>

// -----

// expected-error @below {{expects result of shape 49x49, got 48x49}}
%0 = rpe.relative_index {window = array<i64: 7, 7>} : tensor<48x49xi64>

// -----

// expected-error @below {{must be ranked tensor of 32-bit signless integer or 64-bit signless integer or index values}}
%0 = rpe.relative_index {window = array<i64: 7, 7>} : tensor<49x49xf32>

// -----

// expected-error @below {{requires attribute 'window'}}
%0 = rpe.relative_index : tensor<49x49xi64>

// -----

func.func @lookup_rank(%t: tensor<169xf32>) {
  // expected-error @below {{expects a table of rank 2 ([rows, heads]), got rank 1}}
  %b = rpe.lookup %t {window = array<i64: 7, 7>} : tensor<169xf32> -> tensor<3x49x49xf32>
  return
}

// -----

func.func @lookup_dynamic(%t: tensor<?x3xf32>) {
  // expected-error @below {{expects a table of static shape, got ?x3}}
  %b = rpe.lookup %t {window = array<i64: 7, 7>} : tensor<?x3xf32> -> tensor<3x49x49xf32>
  return
}

// -----

func.func @lookup_rows(%t: tensor<168x3xf32>) {
  // expected-error @below {{expects a table of 169 rows for window 7x7, got 168}}
  %b = rpe.lookup %t {window = array<i64: 7, 7>} : tensor<168x3xf32> -> tensor<3x49x49xf32>
  return
}

// -----

func.func @lookup_result(%t: tensor<169x3xf32>) {
  // expected-error @below {{expects result of shape 3x49x49, got 4x49x49}}
  %b = rpe.lookup %t {window = array<i64: 7, 7>} : tensor<169x3xf32> -> tensor<4x49x49xf32>
  return
}

// -----

func.func @lookup_element(%t: tensor<169x3xf32>) {
  // expected-error @below {{expects the table and the result to have the same element type, got 'f32' and 'f16'}}
  %b = rpe.lookup %t {window = array<i64: 7, 7>} : tensor<169x3xf32> -> tensor<3x49x49xf16>
  return
}

// -----

func.func @lookup_window(%t: tensor<169x3xf32>) {
  // expected-error @below {{window must have 2 or 3 extents, got 4}}
  %b = rpe.lookup %t {window = array<i64: 7, 7, 1, 1>} : tensor<169x3xf32> -> tensor<3x49x49xf32>
  return
}

// -----

func.func @lookup_int(%t: tensor<169x3xi32>) {
  // expected-error @below {{operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float values}}
  %b = rpe.lookup %t {window = array<i64: 7, 7>} : tensor<169x3xi32> -> tensor<3x49x49xf32>
  return
}

// -----

// expected-error @below {{resolution 15 along axis 0 is not a positive multiple of the window extent 7}}
%0 = rpe.shift_mask {resolution = array<i64: 15, 14>, window = array<i64: 7, 7>, shift = array<i64: 3, 3>} : tensor<4x49x49xf32>

// -----

// expected-error @below {{shift 7 along axis 1 must be in [0, 7)}}
%0 = rpe.shift_mask {resolution = array<i64: 14, 14>, window = array<i64: 7, 7>, shift = array<i64: 3, 7>} : tensor<4x49x49xf32>

// -----

// expected-error @below {{shift -1 along axis 0 must be in [0, 7)}}
%0 = rpe.shift_mask {resolution = array<i64: 14, 14>, window = array<i64: 7, 7>, shift = array<i64: -1, 3>} : tensor<4x49x49xf32>

// -----

// expected-error @below {{resolution (2 extents), window (2) and shift (3) must have the same rank}}
%0 = rpe.shift_mask {resolution = array<i64: 14, 14>, window = array<i64: 7, 7>, shift = array<i64: 3, 3, 3>} : tensor<4x49x49xf32>

// -----

// expected-error @below {{resolution 140737488355328 along axis 0 has too many windows}}
%0 = rpe.shift_mask {resolution = array<i64: 140737488355328, 2>, window = array<i64: 2, 2>, shift = array<i64: 1, 1>} : tensor<4x4x4xf32>

// -----

// Each axis has few enough windows, but nW * N * N overflows int64_t (the
// folder used to compute the mask from the wrapped size).
// expected-error @below {{the mask of 4294967296 windows of 65536 x 65536 has too many elements}}
%0 = rpe.shift_mask {resolution = array<i64: 16777216, 16777216>, window = array<i64: 256, 256>, shift = array<i64: 3, 3>} : tensor<4294967296x65536x65536xf32>

// -----

// expected-error @below {{expects result of shape 4x49x49, got 1x49x49}}
%0 = rpe.shift_mask {resolution = array<i64: 14, 14>, window = array<i64: 7, 7>, shift = array<i64: 3, 3>} : tensor<1x49x49xf32>

// -----

// expected-error @below {{window extents must be in [1, 1024], got 0}}
%0 = rpe.shift_mask {resolution = array<i64: 14, 14>, window = array<i64: 0, 7>, shift = array<i64: 0, 3>} : tensor<4x49x49xf32>

// -----

// expected-error @below {{expects a mask_value that is not NaN}}
%0 = rpe.shift_mask {resolution = array<i64: 14, 14>, window = array<i64: 7, 7>, shift = array<i64: 3, 3>, mask_value = 0x7FF8000000000000 : f64} : tensor<4x49x49xf32>

// -----

func.func @attention_rank(%q: tensor<3x49x32xf32>, %k: tensor<?x3x49x32xf32>, %b: tensor<3x49x49xf32>) {
  // expected-error @below {{expects query of rank 4 ([windows, heads, tokens, head_dim]), got rank 3}}
  %0 = rpe.window_attention ins(%q, %k, %k : tensor<3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>)
         bias(%b : tensor<3x49x49xf32>) -> tensor<?x3x49x32xf32>
  return
}

// -----

func.func @attention_dynamic(%q: tensor<?x?x49x32xf32>, %b: tensor<3x49x49xf32>) {
  // expected-error @below {{expects query to have static heads, tokens and head_dim, got ?x?x49x32}}
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x?x49x32xf32>, tensor<?x?x49x32xf32>, tensor<?x?x49x32xf32>)
         bias(%b : tensor<3x49x49xf32>) -> tensor<?x3x49x32xf32>
  return
}

// -----

func.func @attention_kv_shape(%q: tensor<?x3x49x32xf32>, %k: tensor<?x3x49x16xf32>, %b: tensor<3x49x49xf32>) {
  // expected-error @below {{expects query, key and value of the same shape, got ?x3x49x32 and ?x3x49x16}}
  %0 = rpe.window_attention ins(%q, %k, %q : tensor<?x3x49x32xf32>, tensor<?x3x49x16xf32>, tensor<?x3x49x32xf32>)
         bias(%b : tensor<3x49x49xf32>) -> tensor<?x3x49x32xf32>
  return
}

// -----

func.func @attention_batch(%q: tensor<4x3x49x32xf32>, %v: tensor<8x3x49x32xf32>, %b: tensor<3x49x49xf32>) {
  // expected-error @below {{expects query, key and value of the same shape, got 4x3x49x32 and 8x3x49x32}}
  %0 = rpe.window_attention ins(%q, %q, %v : tensor<4x3x49x32xf32>, tensor<4x3x49x32xf32>, tensor<8x3x49x32xf32>)
         bias(%b : tensor<3x49x49xf32>) -> tensor<4x3x49x32xf32>
  return
}

// -----

func.func @attention_element(%q: tensor<?x3x49x32xf32>, %k: tensor<?x3x49x32xf16>, %b: tensor<3x49x49xf32>) {
  // expected-error @below {{expects query, key and value of the same element type, got 'f32' and 'f16'}}
  %0 = rpe.window_attention ins(%q, %k, %q : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf16>, tensor<?x3x49x32xf32>)
         bias(%b : tensor<3x49x49xf32>) -> tensor<?x3x49x32xf32>
  return
}

// -----

func.func @attention_empty(%q: tensor<?x3x0x32xf32>, %b: tensor<3x0x0xf32>) {
  // expected-error @below {{expects non-empty heads, tokens and head_dim, got ?x3x0x32}}
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x3x0x32xf32>, tensor<?x3x0x32xf32>, tensor<?x3x0x32xf32>)
         bias(%b : tensor<3x0x0xf32>) -> tensor<?x3x0x32xf32>
  return
}

// -----

// heads * head_dim = 2^62 * 4 wraps around to 0, which used to verify.
func.func @attention_channels_overflow(%q: tensor<1x4611686018427387904x49x4xf32>, %b: tensor<4611686018427387904x49x49xf32>) {
  // expected-error @below {{expects heads * head_dim to fit in int64_t, got 4611686018427387904 * 4}}
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<1x4611686018427387904x49x4xf32>, tensor<1x4611686018427387904x49x4xf32>, tensor<1x4611686018427387904x49x4xf32>)
         bias(%b : tensor<4611686018427387904x49x49xf32>) -> tensor<1x49x0xf32>
  return
}

// -----

func.func @attention_bias(%q: tensor<?x3x49x32xf32>, %b: tensor<169x3xf32>) {
  // expected-error @below {{expects bias of shape 3x49x49, got 169x3}}
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>)
         bias(%b : tensor<169x3xf32>) -> tensor<?x3x49x32xf32>
  return
}

// -----

func.func @attention_mask_rank(%q: tensor<?x3x49x32xf32>, %b: tensor<3x49x49xf32>, %m: tensor<49x49xf32>) {
  // expected-error @below {{expects mask of shape [windows_per_image, 49, 49] with a static first extent, got 49x49}}
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>)
         bias(%b : tensor<3x49x49xf32>) mask(%m : tensor<49x49xf32>) -> tensor<?x3x49x32xf32>
  return
}

// -----

func.func @attention_mask_shape(%q: tensor<?x3x49x32xf32>, %b: tensor<3x49x49xf32>, %m: tensor<4x49x48xf32>) {
  // expected-error @below {{expects mask of shape 4x49x49, got 4x49x48}}
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>)
         bias(%b : tensor<3x49x49xf32>) mask(%m : tensor<4x49x48xf32>) -> tensor<?x3x49x32xf32>
  return
}

// -----

func.func @attention_mask_empty(%q: tensor<?x3x49x32xf32>, %b: tensor<3x49x49xf32>, %m: tensor<0x49x49xf32>) {
  // expected-error @below {{expects a mask with at least one window}}
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>)
         bias(%b : tensor<3x49x49xf32>) mask(%m : tensor<0x49x49xf32>) -> tensor<?x3x49x32xf32>
  return
}

// -----

func.func @attention_mask_windows(%q: tensor<6x3x49x32xf32>, %b: tensor<3x49x49xf32>, %m: tensor<4x49x49xf32>) {
  // expected-error @below {{expects the number of windows (6) to be a multiple of the mask's windows (4)}}
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<6x3x49x32xf32>, tensor<6x3x49x32xf32>, tensor<6x3x49x32xf32>)
         bias(%b : tensor<3x49x49xf32>) mask(%m : tensor<4x49x49xf32>) -> tensor<6x3x49x32xf32>
  return
}

// -----

func.func @attention_result_element(%q: tensor<?x3x49x32xf32>, %b: tensor<3x49x49xf32>) {
  // expected-error @below {{expects the result to have the element type of query, got 'f16'}}
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>)
         bias(%b : tensor<3x49x49xf32>) -> tensor<?x3x49x32xf16>
  return
}

// -----

func.func @attention_result_shape(%q: tensor<?x3x49x32xf32>, %b: tensor<3x49x49xf32>) {
  // expected-error @below {{expects a result of shape ?x3x49x32 or ?x49x96, got ?x49x32}}
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>)
         bias(%b : tensor<3x49x49xf32>) -> tensor<?x49x32xf32>
  return
}

// -----

func.func @attention_result_rank(%q: tensor<?x3x49x32xf32>, %b: tensor<3x49x49xf32>) {
  // expected-error @below {{expects a result of shape ?x3x49x32 or ?x49x96, got ?x4704}}
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>)
         bias(%b : tensor<3x49x49xf32>) -> tensor<?x4704xf32>
  return
}

// -----

func.func @attention_scale(%q: tensor<?x3x49x32xf32>, %b: tensor<3x49x49xf32>) {
  // expected-error @below {{expects a finite, non-zero scale}}
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>)
         bias(%b : tensor<3x49x49xf32>) {scale = 0.0 : f32} -> tensor<?x3x49x32xf32>
  return
}

// -----

func.func @attention_scale_type(%q: tensor<?x3x49x32xf32>, %b: tensor<3x49x49xf32>) {
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>)
  // expected-error @below {{attribute 'scale' failed to satisfy constraint: 32-bit float attribute}}
         bias(%b : tensor<3x49x49xf32>) {scale = 1 : i32} -> tensor<?x3x49x32xf32>
  return
}

// -----

func.func @partition_padding(%x: tensor<?x117x96xf32>) {
  // expected-error @below {{expected ::mlir::rpe::PaddingOrder to be one of: pad_then_shift, shift_then_pad}}
  // expected-error @below {{failed to parse Rpe_PaddingOrderAttr parameter 'value'}}
  %w = rpe.window_partition %x {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 0, 0>, padding = #rpe.padding<pad_only>} : tensor<?x117x96xf32> -> tensor<?x3x24x32xf32>
  return
}

// -----

// The string spelling that preceded #rpe.padding.
func.func @partition_padding_string(%x: tensor<?x117x96xf32>) {
  // expected-error @below {{attribute 'padding' failed to satisfy constraint: Order of Swin's cyclic shift and padding of a feature map}}
  %w = rpe.window_partition %x {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 0, 0>, padding = "shift_then_pad"} : tensor<?x117x96xf32> -> tensor<?x3x24x32xf32>
  return
}

// -----

func.func @partition_kind(%x: tensor<?x96x8xf32>) {
  // expected-error @below {{expected ::mlir::rpe::Partition to be one of: block, grid}}
  // expected-error @below {{failed to parse Rpe_PartitionAttr parameter 'value'}}
  %w = rpe.window_partition %x {resolution = array<i64: 8, 12>, window = array<i64: 2, 3>, shift = array<i64: 0, 0>, partition = #rpe.partition<strided>} : tensor<?x96x8xf32> -> tensor<?x2x6x4xf32>
  return
}

// -----

// MaxViT does not shift its grid.
func.func @grid_partition_shift(%x: tensor<?x96x8xf32>) {
  // expected-error @below {{'rpe.window_partition' op a grid partition has no shift, got 1 along axis 1}}
  %w = rpe.window_partition %x {resolution = array<i64: 8, 12>, window = array<i64: 2, 3>, shift = array<i64: 0, 1>, partition = #rpe.partition<grid>} : tensor<?x96x8xf32> -> tensor<?x2x6x4xf32>
  return
}

// -----

// Nor pads it: timm asserts that the map is whole grids.
func.func @grid_reverse_padded(%o: tensor<?x6x8xf32>) {
  // expected-error @below {{'rpe.window_reverse' op a grid partition needs whole grids: resolution 7 along axis 0 is not a multiple of the window 2}}
  %y = rpe.window_reverse %o {resolution = array<i64: 7, 12>, window = array<i64: 2, 3>, shift = array<i64: 0, 0>, partition = #rpe.partition<grid>} : tensor<?x6x8xf32> -> tensor<?x84x8xf32>
  return
}

// -----

func.func @partition_shift(%x: tensor<?x117x96xf32>) {
  // expected-error @below {{shift 6 along axis 1 must be in [0, 6)}}
  %w = rpe.window_partition %x {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 0, 6>} : tensor<?x117x96xf32> -> tensor<?x3x24x32xf32>
  return
}

// -----

func.func @partition_resolution(%x: tensor<?x117x96xf32>) {
  // expected-error @below {{resolution 0 along axis 0 must be in [1, 65536]}}
  %w = rpe.window_partition %x {resolution = array<i64: 0, 13>, window = array<i64: 4, 6>, shift = array<i64: 0, 0>} : tensor<?x117x96xf32> -> tensor<?x3x24x32xf32>
  return
}

// -----

func.func @partition_tokens(%x: tensor<?x116x96xf32>) {
  // expected-error @below {{expects a feature map of shape [batch, 117, channels] with static channels, got ?x116x96}}
  %w = rpe.window_partition %x {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 0, 0>} : tensor<?x116x96xf32> -> tensor<?x3x24x32xf32>
  return
}

// -----

func.func @partition_pad(%x: tensor<?x117x96xf32>, %p: tensor<32xf32>) {
  // expected-error @below {{expects pad of shape 96, got 32}}
  %w = rpe.window_partition %x pad(%p : tensor<32xf32>) {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 0, 0>} : tensor<?x117x96xf32> -> tensor<?x3x24x32xf32>
  return
}

// -----

func.func @partition_pad_type(%x: tensor<?x117x96xf32>, %p: tensor<96xf16>) {
  // expected-error @below {{expects pad of the input's element type, got 'f16'}}
  %w = rpe.window_partition %x pad(%p : tensor<96xf16>) {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 0, 0>} : tensor<?x117x96xf32> -> tensor<?x3x24x32xf32>
  return
}

// -----

func.func @partition_heads(%x: tensor<?x117x96xf32>) {
  // expected-error @below {{expects a result of shape [windows, heads, 24, head_dim] with heads * head_dim = 96, got ?x3x24x16}}
  %w = rpe.window_partition %x {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 0, 0>} : tensor<?x117x96xf32> -> tensor<?x3x24x16xf32>
  return
}

// -----

func.func @partition_windows(%x: tensor<2x117x96xf32>) {
  // expected-error @below {{expects 9 windows per image: 2 images and 16 windows}}
  %w = rpe.window_partition %x {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 0, 0>} : tensor<2x117x96xf32> -> tensor<16x3x24x32xf32>
  return
}

// -----

// Products of type extents are checked: here 4 * (2^62 + 24) wraps around to
// the 96 channels, which used to verify.
func.func @partition_heads_overflow(%x: tensor<2x117x96xf32>) {
  // expected-error @below {{expects a result of shape [windows, heads, 24, head_dim] with heads * head_dim = 96, got 18x4611686018427387928x24x4}}
  %w = rpe.window_partition %x {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 0, 0>} : tensor<2x117x96xf32> -> tensor<18x4611686018427387928x24x4xf32>
  return
}

// -----

// 2^62 images of 9 windows: the product wraps around to 2^62.
func.func @partition_batch_overflow(%x: tensor<4611686018427387904x117x96xf32>) {
  // expected-error @below {{expects 9 windows per image: 4611686018427387904 images and 4611686018427387904 windows}}
  %w = rpe.window_partition %x {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 0, 0>} : tensor<4611686018427387904x117x96xf32> -> tensor<4611686018427387904x3x24x32xf32>
  return
}

// -----

func.func @partition_element(%x: tensor<2x117x96xf32>) {
  // expected-error @below {{expects the result to have the input's element type}}
  %w = rpe.window_partition %x {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 0, 0>} : tensor<2x117x96xf32> -> tensor<18x3x24x32xf16>
  return
}

// -----

func.func @reverse_input(%o: tensor<?x24x32xf32>) {
  // expected-error @below {{expects an input of shape [windows, 24, 96], got ?x24x32}}
  %y = rpe.window_reverse %o {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 0, 0>} : tensor<?x24x32xf32> -> tensor<?x117x96xf32>
  return
}

// -----

func.func @reverse_windows(%o: tensor<?x24x96xf32>) {
  // expected-error @below {{expects 9 windows per image: 2 images and ? windows}}
  %y = rpe.window_reverse %o {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 0, 0>} : tensor<?x24x96xf32> -> tensor<2x117x96xf32>
  return
}

// -----

func.func @reverse_map(%o: tensor<?x24x96xf32>) {
  // expected-error @below {{expects a feature map of shape [batch, 117, channels] with static channels, got ?x120x96}}
  %y = rpe.window_reverse %o {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 0, 0>} : tensor<?x24x96xf32> -> tensor<?x120x96xf32>
  return
}

// -----

func.func @reverse_element(%o: tensor<?x24x96xf32>) {
  // expected-error @below {{expects the result to have the input's element type}}
  %y = rpe.window_reverse %o {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 0, 0>} : tensor<?x24x96xf32> -> tensor<?x117x96xbf16>
  return
}

// -----

func.func @fused_mixed(%q: tensor<?x3x49x32xf32>, %t: memref<169x3xf32>, %o: tensor<?x49x96xf32>) {
  // expected-error @below {{expects all operands to be ranked tensors or all memrefs}}
  %r = rpe.fused_window_attention ins(%q, %q, %q, %t : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, memref<169x3xf32>)
         outs(%o : tensor<?x49x96xf32>) {window = array<i64: 7, 7>, scale = 1.0 : f32} -> tensor<?x49x96xf32>
  return
}

// -----

func.func @fused_memref_result(%q: memref<?x3x49x32xf32>, %t: memref<169x3xf32>, %o: memref<?x49x96xf32>) {
  // expected-error @below {{expects one result on tensors and none on memrefs}}
  %r = rpe.fused_window_attention ins(%q, %q, %q, %t : memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<169x3xf32>)
         outs(%o : memref<?x49x96xf32>) {window = array<i64: 7, 7>, scale = 1.0 : f32} -> tensor<?x49x96xf32>
  return
}

// -----

func.func @fused_table(%q: tensor<?x3x49x32xf32>, %t: tensor<168x3xf32>, %o: tensor<?x49x96xf32>) {
  // expected-error @below {{expects a table of shape 169x<heads>, got 168x3}}
  %r = rpe.fused_window_attention ins(%q, %q, %q, %t : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<168x3xf32>)
         outs(%o : tensor<?x49x96xf32>) {window = array<i64: 7, 7>, scale = 1.0 : f32} -> tensor<?x49x96xf32>
  return
}

// -----

func.func @fused_tokens(%q: tensor<?x3x64x32xf32>, %t: tensor<169x3xf32>, %o: tensor<?x64x96xf32>) {
  // expected-error @below {{expects query of shape [windows, 3, 49, head_dim], got ?x3x64x32}}
  %r = rpe.fused_window_attention ins(%q, %q, %q, %t : tensor<?x3x64x32xf32>, tensor<?x3x64x32xf32>, tensor<?x3x64x32xf32>, tensor<169x3xf32>)
         outs(%o : tensor<?x64x96xf32>) {window = array<i64: 7, 7>, scale = 1.0 : f32} -> tensor<?x64x96xf32>
  return
}

// -----

func.func @fused_result(%q: tensor<?x3x49x32xf32>, %t: tensor<169x3xf32>, %o: tensor<?x49x96xf32>) {
  // expected-error @below {{expects the result type to be the destination's}}
  %r = rpe.fused_window_attention ins(%q, %q, %q, %t : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<169x3xf32>)
         outs(%o : tensor<?x49x96xf32>) {window = array<i64: 7, 7>, scale = 1.0 : f32} -> tensor<?x3x49x32xf32>
  return
}

// -----

func.func @fused_shift_alone(%q: tensor<?x3x49x32xf32>, %t: tensor<169x3xf32>, %o: tensor<?x49x96xf32>) {
  // expected-error @below {{expects resolution and shift together}}
  %r = rpe.fused_window_attention ins(%q, %q, %q, %t : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<169x3xf32>)
         outs(%o : tensor<?x49x96xf32>) {window = array<i64: 7, 7>, scale = 1.0 : f32, shift = array<i64: 3, 3>} -> tensor<?x49x96xf32>
  return
}

// -----

func.func @fused_windows_pads(%q: tensor<?x3x49x32xf32>, %t: tensor<169x3xf32>, %p: tensor<96xf32>, %o: tensor<?x49x96xf32>) {
  // expected-error @below {{expects padding values only in the token layout}}
  %r = rpe.fused_window_attention ins(%q, %q, %q, %t : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<169x3xf32>)
         pads(%p, %p, %p : tensor<96xf32>, tensor<96xf32>, tensor<96xf32>) outs(%o : tensor<?x49x96xf32>) {window = array<i64: 7, 7>, scale = 1.0 : f32} -> tensor<?x49x96xf32>
  return
}

// -----

func.func @fused_windows_shift(%q: tensor<?x3x49x32xf32>, %t: tensor<169x3xf32>, %o: tensor<?x49x96xf32>) {
  // expected-error @below {{resolution 15 along axis 0 is not a positive multiple of the window extent 7}}
  %r = rpe.fused_window_attention ins(%q, %q, %q, %t : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<169x3xf32>)
         outs(%o : tensor<?x49x96xf32>) {window = array<i64: 7, 7>, scale = 1.0 : f32, resolution = array<i64: 15, 14>, shift = array<i64: 3, 3>} -> tensor<?x49x96xf32>
  return
}

// -----

func.func @fused_image_resolution(%x: tensor<2x117x96xf32>, %t: tensor<77x3xf32>) {
  // expected-error @below {{expects resolution and shift with an image}}
  %r = rpe.fused_window_attention ins(%x, %x, %x, %t : tensor<2x117x96xf32>, tensor<2x117x96xf32>, tensor<2x117x96xf32>, tensor<77x3xf32>)
         outs(%x : tensor<2x117x96xf32>) {window = array<i64: 4, 6>, scale = 1.0 : f32, image = array<i64: 9, 13>} -> tensor<2x117x96xf32>
  return
}

// -----

func.func @fused_padded_resolution(%x: tensor<2x117x96xf32>, %t: tensor<77x3xf32>) {
  // expected-error @below {{expects resolution 12x18, the image padded to whole windows, got 9x13}}
  %r = rpe.fused_window_attention ins(%x, %x, %x, %t : tensor<2x117x96xf32>, tensor<2x117x96xf32>, tensor<2x117x96xf32>, tensor<77x3xf32>)
         outs(%x : tensor<2x117x96xf32>) {window = array<i64: 4, 6>, scale = 1.0 : f32, image = array<i64: 9, 13>, resolution = array<i64: 9, 13>, shift = array<i64: 0, 0>} -> tensor<2x117x96xf32>
  return
}

// -----

func.func @fused_map_shape(%x: tensor<2x117x96xf32>, %y: tensor<2x117x90xf32>, %t: tensor<77x3xf32>) {
  // expected-error @below {{expects query, key, value and destination of shape [batch, 117, 3 * head_dim] and one element type, got 2x117x90}}
  %r = rpe.fused_window_attention ins(%x, %y, %x, %t : tensor<2x117x96xf32>, tensor<2x117x90xf32>, tensor<2x117x96xf32>, tensor<77x3xf32>)
         outs(%x : tensor<2x117x96xf32>) {window = array<i64: 4, 6>, scale = 1.0 : f32, image = array<i64: 9, 13>, resolution = array<i64: 12, 18>, shift = array<i64: 0, 0>} -> tensor<2x117x96xf32>
  return
}

// -----

func.func @fused_pad_count(%x: tensor<2x117x96xf32>, %p: tensor<96xf32>, %t: tensor<77x3xf32>) {
  // expected-error @below {{expects three padding values (q, k, v) or none}}
  %r = rpe.fused_window_attention ins(%x, %x, %x, %t : tensor<2x117x96xf32>, tensor<2x117x96xf32>, tensor<2x117x96xf32>, tensor<77x3xf32>)
         pads(%p : tensor<96xf32>) outs(%x : tensor<2x117x96xf32>) {window = array<i64: 4, 6>, scale = 1.0 : f32, image = array<i64: 9, 13>, resolution = array<i64: 12, 18>, shift = array<i64: 0, 0>} -> tensor<2x117x96xf32>
  return
}

// -----

func.func @fused_pad_shape(%x: tensor<2x117x96xf32>, %p: tensor<32xf32>, %t: tensor<77x3xf32>) {
  // expected-error @below {{expects padding values of shape [96] and the query's element type}}
  %r = rpe.fused_window_attention ins(%x, %x, %x, %t : tensor<2x117x96xf32>, tensor<2x117x96xf32>, tensor<2x117x96xf32>, tensor<77x3xf32>)
         pads(%p, %p, %p : tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) outs(%x : tensor<2x117x96xf32>) {window = array<i64: 4, 6>, scale = 1.0 : f32, image = array<i64: 9, 13>, resolution = array<i64: 12, 18>, shift = array<i64: 0, 0>} -> tensor<2x117x96xf32>
  return
}

// -----

// Windows are cut already: a partition is the token layout's.
func.func @fused_grid_windows(%q: tensor<?x2x6x4xf32>, %t: tensor<15x2xf32>, %o: tensor<?x6x8xf32>) {
  // expected-error @below {{expects a grid partition only in the token layout}}
  %r = rpe.fused_window_attention ins(%q, %q, %q, %t : tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>, tensor<15x2xf32>)
         outs(%o : tensor<?x6x8xf32>) {window = array<i64: 2, 3>, scale = 1.0 : f32, partition = #rpe.partition<grid>} -> tensor<?x6x8xf32>
  return
}

// -----

func.func @fused_grid_shift(%x: tensor<2x96x8xf32>, %t: tensor<15x2xf32>) {
  // expected-error @below {{'rpe.fused_window_attention' op a grid partition has no shift, got 1 along axis 0}}
  %r = rpe.fused_window_attention ins(%x, %x, %x, %t : tensor<2x96x8xf32>, tensor<2x96x8xf32>, tensor<2x96x8xf32>, tensor<15x2xf32>)
         outs(%x : tensor<2x96x8xf32>) {window = array<i64: 2, 3>, scale = 1.0 : f32, image = array<i64: 8, 12>, resolution = array<i64: 8, 12>, shift = array<i64: 1, 0>, partition = #rpe.partition<grid>} -> tensor<2x96x8xf32>
  return
}

// -----

func.func @fused_grad_grid_padded(%x: memref<2x70x8xf32>, %t: memref<15x2xf32>) {
  // expected-error @below {{'rpe.fused_window_attention_grad' op a grid partition needs whole grids: resolution 5 along axis 0 is not a multiple of the window 2}}
  rpe.fused_window_attention_grad
      ins(%x, %x, %x, %t, %x, %x : memref<2x70x8xf32>, memref<2x70x8xf32>, memref<2x70x8xf32>, memref<15x2xf32>, memref<2x70x8xf32>, memref<2x70x8xf32>)
      outs(%x, %x, %x, %t : memref<2x70x8xf32>, memref<2x70x8xf32>, memref<2x70x8xf32>, memref<15x2xf32>)
      {window = array<i64: 2, 3>, scale = 1.0 : f32, image = array<i64: 5, 14>, resolution = array<i64: 6, 15>, shift = array<i64: 0, 0>, partition = #rpe.partition<grid>}
  return
}

// -----

func.func @fused_scale(%q: tensor<?x3x49x32xf32>, %t: tensor<169x3xf32>, %o: tensor<?x49x96xf32>) {
  // expected-error @below {{expects a finite, non-zero scale}}
  %r = rpe.fused_window_attention ins(%q, %q, %q, %t : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<169x3xf32>)
         outs(%o : tensor<?x49x96xf32>) {window = array<i64: 7, 7>, scale = 0x7F800000 : f32} -> tensor<?x49x96xf32>
  return
}

// -----

func.func @fused_float_table(%q: tensor<?x3x49x32xf32>, %t: tensor<169x3xi32>, %o: tensor<?x49x96xf32>) {
  // expected-error @below {{expects a floating-point table}}
  %r = rpe.fused_window_attention ins(%q, %q, %q, %t : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<169x3xi32>)
         outs(%o : tensor<?x49x96xf32>) {window = array<i64: 7, 7>, scale = 1.0 : f32} -> tensor<?x49x96xf32>
  return
}

// -----

// expected-error @below {{expects 'rpe.items_per_block' to be a positive i64, got "3"}}
func.func @items_per_block_string() attributes {rpe.items_per_block = "3"} {
  return
}

// -----

// expected-error @below {{expects 'rpe.items_per_block' to be a positive i64, got 0 : i64}}
func.func @items_per_block_zero() attributes {rpe.items_per_block = 0 : i64} {
  return
}

// -----

// 3 * heads overflows (UBSan caught it; the wrapped value happened to be
// refused).
func.func @fused_packed_heads_overflow(%qkv: tensor<?x117x48xf32>, %t: tensor<77x4611686018427387904xf32>, %o: tensor<?x117x16xf32>) {
  // expected-error @below {{expects query, key, value and destination of shape [batch, 117, 3 * 4611686018427387904 * head_dim] and one element type, got ?x117x48}}
  %r = rpe.fused_window_attention ins(%qkv, %qkv, %qkv, %t : tensor<?x117x48xf32>, tensor<?x117x48xf32>, tensor<?x117x48xf32>, tensor<77x4611686018427387904xf32>)
         outs(%o : tensor<?x117x16xf32>) {image = array<i64: 9, 13>, packed_qkv, resolution = array<i64: 12, 18>, scale = 1.0 : f32, shift = array<i64: 0, 0>, window = array<i64: 4, 6>} -> tensor<?x117x16xf32>
  return
}

// -----

func.func @grad_dtable_type(%q: memref<?x3x49x32xf32>, %t: memref<169x3xf32>, %o: memref<?x49x96xf32>, %dt: memref<169x4xf32>) {
  // expected-error @below {{expects dtable of type 'memref<169x3xf32>' or of its shape in f32, got 'memref<169x4xf32>'}}
  rpe.fused_window_attention_grad
      ins(%q, %q, %q, %t, %o, %o : memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<169x3xf32>, memref<?x49x96xf32>, memref<?x49x96xf32>)
      outs(%q, %q, %q, %dt : memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<169x4xf32>)
      {window = array<i64: 7, 7>, scale = 0.125 : f32}
  return
}

// -----

func.func @grad_dtable_f16(%q: memref<?x3x49x32xf32>, %t: memref<169x3xf32>, %o: memref<?x49x96xf32>, %dt: memref<169x3xf16>) {
  // expected-error @below {{expects dtable of type 'memref<169x3xf32>' or of its shape in f32, got 'memref<169x3xf16>'}}
  rpe.fused_window_attention_grad
      ins(%q, %q, %q, %t, %o, %o : memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<169x3xf32>, memref<?x49x96xf32>, memref<?x49x96xf32>)
      outs(%q, %q, %q, %dt : memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<169x3xf16>)
      {window = array<i64: 7, 7>, scale = 0.125 : f32}
  return
}

// -----

func.func @grad_dout_type(%q: memref<?x3x49x32xf32>, %t: memref<169x3xf32>, %o: memref<?x49x96xf32>, %do: memref<?x3x49x32xf32>) {
  // expected-error @below {{expects dout of type 'memref<?x49x96xf32>', got 'memref<?x3x49x32xf32>'}}
  rpe.fused_window_attention_grad
      ins(%q, %q, %q, %t, %o, %do : memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<169x3xf32>, memref<?x49x96xf32>, memref<?x3x49x32xf32>)
      outs(%q, %q, %q, %t : memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<169x3xf32>)
      {window = array<i64: 7, 7>, scale = 0.125 : f32}
  return
}

// -----

func.func @grad_out_shape(%q: memref<?x3x49x32xf32>, %t: memref<169x3xf32>, %o: memref<?x49x64xf32>) {
  // expected-error @below {{out}}
  rpe.fused_window_attention_grad
      ins(%q, %q, %q, %t, %o, %o : memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<169x3xf32>, memref<?x49x64xf32>, memref<?x49x64xf32>)
      outs(%q, %q, %q, %t : memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<169x3xf32>)
      {window = array<i64: 7, 7>, scale = 0.125 : f32}
  return
}

// -----

func.func @grad_packed_gradients(%qkv: memref<2x196x288xf32>, %t: memref<169x3xf32>, %o: memref<2x196x96xf32>, %d1: memref<2x196x288xf32>, %d2: memref<2x196x288xf32>) {
  // expected-error @below {{expects packed dq, dk, dv as one operand}}
  rpe.fused_window_attention_grad
      ins(%qkv, %qkv, %qkv, %t, %o, %o : memref<2x196x288xf32>, memref<2x196x288xf32>, memref<2x196x288xf32>, memref<169x3xf32>, memref<2x196x96xf32>, memref<2x196x96xf32>)
      outs(%d1, %d2, %d1, %t : memref<2x196x288xf32>, memref<2x196x288xf32>, memref<2x196x288xf32>, memref<169x3xf32>)
      {window = array<i64: 7, 7>, scale = 0.125 : f32, image = array<i64: 14, 14>, resolution = array<i64: 14, 14>, shift = array<i64: 3, 3>, packed_qkv}
  return
}

// -----

func.func @grad_on_tensors(%q: tensor<?x3x49x32xf32>, %t: memref<169x3xf32>, %o: memref<?x49x96xf32>) {
  // expected-error @+2 {{invalid kind of type specified: expected builtin.memref}}
  rpe.fused_window_attention_grad
      ins(%q, %q, %q, %t, %o, %o : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, memref<169x3xf32>, memref<?x49x96xf32>, memref<?x49x96xf32>)
      outs(%o, %o, %o, %t : memref<?x49x96xf32>, memref<?x49x96xf32>, memref<?x49x96xf32>, memref<169x3xf32>)
      {window = array<i64: 7, 7>, scale = 0.125 : f32}
  return
}

// -----

// -----

func.func @cosine_logit_scale_shape(%q: tensor<?x3x64x32xf32>, %b: tensor<3x64x64xf32>, %ls: tensor<4xf32>) -> tensor<?x64x96xf32> {
  // expected-error @below {{expects logit_scale of shape [3] (one per head), got 4}}
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x3x64x32xf32>, tensor<?x3x64x32xf32>, tensor<?x3x64x32xf32>)
         bias(%b : tensor<3x64x64xf32>) logit_scale(%ls : tensor<4xf32>) -> tensor<?x64x96xf32>
  return %0 : tensor<?x64x96xf32>
}

// -----

func.func @fused_logit_scale_shape(%q: memref<?x3x49x32xf32>, %t: memref<169x3xf32>, %ls: memref<3x1xf32>, %o: memref<?x49x96xf32>) {
  // expected-error @below {{expects logit_scale of shape [3] (one per head), got 3x1}}
  rpe.fused_window_attention ins(%q, %q, %q, %t : memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<169x3xf32>)
    logit_scale(%ls : memref<3x1xf32>) outs(%o : memref<?x49x96xf32>) {window = array<i64: 7, 7>, scale = 1.0 : f32}
  return
}

// -----

func.func @cpb_fc1(%w1: tensor<4x3xf32>, %b1: tensor<4xf32>, %w2: tensor<2x4xf32>) -> tensor<9x2xf32> {
  // expected-error @below {{expects fc1_weight of shape [hidden, 2], got 4x3}}
  %t = rpe.continuous_position_bias %w1, %b1, %w2 {window = array<i64: 2, 2>} : tensor<4x3xf32>, tensor<4xf32>, tensor<2x4xf32> -> tensor<9x2xf32>
  return %t : tensor<9x2xf32>
}

// -----

func.func @cpb_fc2(%w1: tensor<4x2xf32>, %b1: tensor<4xf32>, %w2: tensor<2x5xf32>) -> tensor<9x2xf32> {
  // expected-error @below {{expects fc2_weight of shape [heads, 4], got 2x5}}
  %t = rpe.continuous_position_bias %w1, %b1, %w2 {window = array<i64: 2, 2>} : tensor<4x2xf32>, tensor<4xf32>, tensor<2x5xf32> -> tensor<9x2xf32>
  return %t : tensor<9x2xf32>
}

// -----

func.func @cpb_bias(%w1: tensor<4x2xf32>, %b1: tensor<3xf32>, %w2: tensor<2x4xf32>) -> tensor<9x2xf32> {
  // expected-error @below {{fc1_bias}}
  %t = rpe.continuous_position_bias %w1, %b1, %w2 {window = array<i64: 2, 2>} : tensor<4x2xf32>, tensor<3xf32>, tensor<2x4xf32> -> tensor<9x2xf32>
  return %t : tensor<9x2xf32>
}

// -----

func.func @cpb_result(%w1: tensor<4x2xf32>, %b1: tensor<4xf32>, %w2: tensor<2x4xf32>) -> tensor<9x3xf32> {
  // expected-error @below {{result}}
  %t = rpe.continuous_position_bias %w1, %b1, %w2 {window = array<i64: 2, 2>} : tensor<4x2xf32>, tensor<4xf32>, tensor<2x4xf32> -> tensor<9x3xf32>
  return %t : tensor<9x3xf32>
}

// -----

func.func @cpb_pretrained(%w1: tensor<4x2xf32>, %b1: tensor<4xf32>, %w2: tensor<2x4xf32>) -> tensor<9x2xf32> {
  // expected-error @below {{expects a pretrained_window of 2 positive extents, got 0x4}}
  %t = rpe.continuous_position_bias %w1, %b1, %w2 {window = array<i64: 2, 2>, pretrained_window = array<i64: 0, 4>} : tensor<4x2xf32>, tensor<4xf32>, tensor<2x4xf32> -> tensor<9x2xf32>
  return %t : tensor<9x2xf32>
}

// -----

func.func @fused_mask_and_shift(%q: tensor<?x3x49x32xf32>, %t: tensor<169x3xf32>, %m: tensor<4x49x49xf32>, %o: tensor<?x49x96xf32>) {
  // expected-error @below {{expects either a shift or a mask operand, not both}}
  %r = rpe.fused_window_attention ins(%q, %q, %q, %t : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<169x3xf32>)
         mask(%m : tensor<4x49x49xf32>) outs(%o : tensor<?x49x96xf32>)
         {window = array<i64: 7, 7>, scale = 1.0 : f32, resolution = array<i64: 14, 14>, shift = array<i64: 3, 3>} -> tensor<?x49x96xf32>
  return
}

// -----

func.func @fused_mask_shape(%q: tensor<?x3x49x32xf32>, %t: tensor<169x3xf32>, %m: tensor<4x49x48xf32>, %o: tensor<?x49x96xf32>) {
  // expected-error @below {{expects a float mask of shape [windows, 49, 49], got 4x49x48}}
  %r = rpe.fused_window_attention ins(%q, %q, %q, %t : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<169x3xf32>)
         mask(%m : tensor<4x49x48xf32>) outs(%o : tensor<?x49x96xf32>)
         {window = array<i64: 7, 7>, scale = 1.0 : f32} -> tensor<?x49x96xf32>
  return
}

// -----

func.func @fused_mask_tokens(%x: tensor<2x196x96xf32>, %t: tensor<169x3xf32>, %m: tensor<4x49x49xf32>) {
  // expected-error @below {{expects a mask operand only in the windows layout}}
  %r = rpe.fused_window_attention ins(%x, %x, %x, %t : tensor<2x196x96xf32>, tensor<2x196x96xf32>, tensor<2x196x96xf32>, tensor<169x3xf32>)
         mask(%m : tensor<4x49x49xf32>) outs(%x : tensor<2x196x96xf32>)
         {window = array<i64: 7, 7>, scale = 1.0 : f32, image = array<i64: 14, 14>, resolution = array<i64: 14, 14>, shift = array<i64: 0, 0>} -> tensor<2x196x96xf32>
  return
}
