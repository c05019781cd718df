// RUN: swin-opt %s | swin-opt | FileCheck %s
// RUN: swin-opt %s --mlir-print-op-generic | swin-opt | FileCheck %s

// CHECK-LABEL: func @relative_index
func.func @relative_index() -> (tensor<49x49xi64>, tensor<24x24xi32>, tensor<18x18xindex>) {
  // CHECK: rpe.relative_index {window = array<i64: 7, 7>} : tensor<49x49xi64>
  %0 = rpe.relative_index {window = array<i64: 7, 7>} : tensor<49x49xi64>
  // CHECK: rpe.relative_index {window = array<i64: 4, 6>} : tensor<24x24xi32>
  %1 = rpe.relative_index {window = array<i64: 4, 6>} : tensor<24x24xi32>
  // CHECK: rpe.relative_index {window = array<i64: 2, 3, 3>} : tensor<18x18xindex>
  %2 = rpe.relative_index {window = array<i64: 2, 3, 3>} : tensor<18x18xindex>
  return %0, %1, %2 : tensor<49x49xi64>, tensor<24x24xi32>, tensor<18x18xindex>
}

// CHECK-LABEL: func @lookup
func.func @lookup(%t: tensor<169x3xf32>, %t16: tensor<77x2xf16>, %t3: tensor<75x4xbf16>)
    -> (tensor<3x49x49xf32>, tensor<2x24x24xf16>, tensor<4x18x18xbf16>) {
  // CHECK: rpe.lookup %{{.*}} {window = array<i64: 7, 7>} : tensor<169x3xf32> -> tensor<3x49x49xf32>
  %b = rpe.lookup %t {window = array<i64: 7, 7>} : tensor<169x3xf32> -> tensor<3x49x49xf32>
  // CHECK: rpe.lookup %{{.*}} {window = array<i64: 4, 6>} : tensor<77x2xf16> -> tensor<2x24x24xf16>
  %b16 = rpe.lookup %t16 {window = array<i64: 4, 6>} : tensor<77x2xf16> -> tensor<2x24x24xf16>
  // CHECK: rpe.lookup %{{.*}} {window = array<i64: 2, 3, 3>} : tensor<75x4xbf16> -> tensor<4x18x18xbf16>
  %b3 = rpe.lookup %t3 {window = array<i64: 2, 3, 3>} : tensor<75x4xbf16> -> tensor<4x18x18xbf16>
  return %b, %b16, %b3 : tensor<3x49x49xf32>, tensor<2x24x24xf16>, tensor<4x18x18xbf16>
}

// CHECK-LABEL: func @shift_mask
func.func @shift_mask() -> (tensor<4x49x49xf32>, tensor<6x24x24xf16>, tensor<8x18x18xf32>) {
  // CHECK: rpe.shift_mask {resolution = array<i64: 14, 14>, shift = array<i64: 3, 3>, window = array<i64: 7, 7>} : tensor<4x49x49xf32>
  %0 = rpe.shift_mask {resolution = array<i64: 14, 14>, window = array<i64: 7, 7>, shift = array<i64: 3, 3>} : tensor<4x49x49xf32>
  // CHECK: rpe.shift_mask {mask_value = -1.000000e+04 : f64, resolution = array<i64: 8, 18>, shift = array<i64: 2, 0>, window = array<i64: 4, 6>} : tensor<6x24x24xf16>
  %1 = rpe.shift_mask {resolution = array<i64: 8, 18>, window = array<i64: 4, 6>, shift = array<i64: 2, 0>, mask_value = -1.0e4 : f64} : tensor<6x24x24xf16>
  // CHECK: rpe.shift_mask {resolution = array<i64: 4, 6, 6>, shift = array<i64: 1, 1, 1>, window = array<i64: 2, 3, 3>} : tensor<8x18x18xf32>
  %2 = rpe.shift_mask {resolution = array<i64: 4, 6, 6>, window = array<i64: 2, 3, 3>, shift = array<i64: 1, 1, 1>} : tensor<8x18x18xf32>
  return %0, %1, %2 : tensor<4x49x49xf32>, tensor<6x24x24xf16>, tensor<8x18x18xf32>
}

// CHECK-LABEL: func @window_attention
func.func @window_attention(%q: tensor<?x3x49x32xf32>, %b: tensor<3x49x49xf32>, %m: tensor<4x49x49xf32>)
    -> (tensor<?x3x49x32xf32>, tensor<?x49x96xf32>) {
  // CHECK: rpe.window_attention ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>) bias(%{{.*}} : tensor<3x49x49xf32>) -> tensor<?x3x49x32xf32>
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>)
         bias(%b : tensor<3x49x49xf32>) -> tensor<?x3x49x32xf32>
  // CHECK: rpe.window_attention ins({{.*}}) bias(%{{.*}} : tensor<3x49x49xf32>) mask(%{{.*}} : tensor<4x49x49xf32>) {scale = 1.250000e-01 : f32} -> tensor<?x49x96xf32>
  %1 = rpe.window_attention ins(%q, %q, %q : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>)
         bias(%b : tensor<3x49x49xf32>) mask(%m : tensor<4x49x49xf32>) {scale = 0.125 : f32} -> tensor<?x49x96xf32>
  return %0, %1 : tensor<?x3x49x32xf32>, tensor<?x49x96xf32>
}

// CHECK-LABEL: func @window_attention_half
func.func @window_attention_half(%q: tensor<8x2x24x16xbf16>, %b: tensor<2x24x24xbf16>, %m: tensor<4x24x24xf32>)
    -> tensor<8x2x24x16xbf16> {
  // CHECK: rpe.window_attention {{.*}} -> tensor<8x2x24x16xbf16>
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<8x2x24x16xbf16>, tensor<8x2x24x16xbf16>, tensor<8x2x24x16xbf16>)
         bias(%b : tensor<2x24x24xbf16>) mask(%m : tensor<4x24x24xf32>) -> tensor<8x2x24x16xbf16>
  return %0 : tensor<8x2x24x16xbf16>
}

// The form of the issue that started the dialect, verbatim.
// CHECK-LABEL: func @seed
func.func @seed(%table: tensor<169x3xf32>) -> tensor<3x49x49xf32> {
  // CHECK: %[[B:.*]] = rpe.lookup %{{.*}} {window = array<i64: 7, 7>} : tensor<169x3xf32> -> tensor<3x49x49xf32>
  %b = rpe.lookup %table {window = array<i64: 7, 7>} : tensor<169x3xf32> -> tensor<3x49x49xf32>
  return %b : tensor<3x49x49xf32>
}

// CHECK-LABEL: func @feature_map
func.func @feature_map(%x: tensor<?x117x96xf32>, %p: tensor<96xf32>, %t: tensor<77x3xf32>) -> tensor<?x117x96xf32> {
  // CHECK: %[[W:.*]] = rpe.window_partition %{{.*}} pad(%{{.*}} : tensor<96xf32>) {padding = #rpe.padding<shift_then_pad>, resolution = array<i64: 9, 13>, shift = array<i64: 2, 3>, window = array<i64: 4, 6>} : tensor<?x117x96xf32> -> tensor<?x3x24x32xf32>
  %w = rpe.window_partition %x pad(%p : tensor<96xf32>) {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 2, 3>, padding = #rpe.padding<shift_then_pad>} : tensor<?x117x96xf32> -> tensor<?x3x24x32xf32>
  // CHECK: rpe.window_partition %{{.*}} {resolution = array<i64: 9, 13>, shift = array<i64: 2, 3>, window = array<i64: 4, 6>} : tensor<?x117x96xf32> -> tensor<?x3x24x32xf32>
  %w2 = rpe.window_partition %x {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 2, 3>} : tensor<?x117x96xf32> -> tensor<?x3x24x32xf32>
  // The default order is not printed.
  // CHECK: rpe.window_partition %{{.*}} {resolution = array<i64: 9, 13>, shift = array<i64: 2, 3>, window = array<i64: 4, 6>} : tensor<?x117x96xf32> -> tensor<?x3x24x32xf32>
  %w3 = rpe.window_partition %x {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 2, 3>, padding = #rpe.padding<pad_then_shift>} : tensor<?x117x96xf32> -> tensor<?x3x24x32xf32>
  %b = rpe.lookup %t {window = array<i64: 4, 6>} : tensor<77x3xf32> -> tensor<3x24x24xf32>
  %o = rpe.window_attention ins(%w, %w2, %w3 : tensor<?x3x24x32xf32>, tensor<?x3x24x32xf32>, tensor<?x3x24x32xf32>)
         bias(%b : tensor<3x24x24xf32>) -> tensor<?x24x96xf32>
  // CHECK: rpe.window_reverse %{{.*}} {padding = #rpe.padding<shift_then_pad>, resolution = array<i64: 9, 13>, shift = array<i64: 2, 3>, window = array<i64: 4, 6>} : tensor<?x24x96xf32> -> tensor<?x117x96xf32>
  %y = rpe.window_reverse %o {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 2, 3>, padding = #rpe.padding<shift_then_pad>} : tensor<?x24x96xf32> -> tensor<?x117x96xf32>
  return %y : tensor<?x117x96xf32>
}

// CHECK-LABEL: func @fused
func.func @fused(%x: tensor<2x117x96xf16>, %p: tensor<96xf16>, %t: tensor<77x3xf16>, %q: memref<?x3x24x32xf32>, %tm: memref<77x3xf32>, %o: memref<?x24x96xf32>) -> tensor<2x117x96xf16> {
  // CHECK: rpe.fused_window_attention ins({{.*}}) pads(%{{.*}}, %{{.*}}, %{{.*}} : tensor<96xf16>, tensor<96xf16>, tensor<96xf16>) outs(%{{.*}} : tensor<2x117x96xf16>) {image = array<i64: 9, 13>, resolution = array<i64: 12, 18>, scale = 1.250000e-01 : f32, shift = array<i64: 2, 3>, window = array<i64: 4, 6>} -> tensor<2x117x96xf16>
  %r = rpe.fused_window_attention ins(%x, %x, %x, %t : tensor<2x117x96xf16>, tensor<2x117x96xf16>, tensor<2x117x96xf16>, tensor<77x3xf16>)
         pads(%p, %p, %p : tensor<96xf16>, tensor<96xf16>, tensor<96xf16>) outs(%x : tensor<2x117x96xf16>)
         {window = array<i64: 4, 6>, scale = 0.125 : f32, image = array<i64: 9, 13>, resolution = array<i64: 12, 18>, shift = array<i64: 2, 3>} -> tensor<2x117x96xf16>
  // CHECK: rpe.fused_window_attention {{.*}} {image = array<i64: 9, 13>, padding = #rpe.padding<shift_then_pad>, resolution = array<i64: 12, 18>, scale = 1.250000e-01 : f32, shift = array<i64: 2, 3>, window = array<i64: 4, 6>} -> tensor<2x117x96xf16>
  %r2 = rpe.fused_window_attention ins(%r, %r, %r, %t : tensor<2x117x96xf16>, tensor<2x117x96xf16>, tensor<2x117x96xf16>, tensor<77x3xf16>)
         outs(%x : tensor<2x117x96xf16>)
         {window = array<i64: 4, 6>, scale = 0.125 : f32, image = array<i64: 9, 13>, resolution = array<i64: 12, 18>, shift = array<i64: 2, 3>, padding = #rpe.padding<shift_then_pad>} -> tensor<2x117x96xf16>
  // CHECK: rpe.fused_window_attention ins({{.*}} : memref<?x3x24x32xf32>, memref<?x3x24x32xf32>, memref<?x3x24x32xf32>, memref<77x3xf32>) outs(%{{.*}} : memref<?x24x96xf32>) {scale = 1.000000e+00 : f32, window = array<i64: 4, 6>}
  // CHECK-NOT: ->
  rpe.fused_window_attention ins(%q, %q, %q, %tm : memref<?x3x24x32xf32>, memref<?x3x24x32xf32>, memref<?x3x24x32xf32>, memref<77x3xf32>)
    outs(%o : memref<?x24x96xf32>) {window = array<i64: 4, 6>, scale = 1.0 : f32}
  return %r2 : tensor<2x117x96xf16>
}

// MaxViT's grid partition of an 8x12 map into 2x3 windows (4x4 of them),
// printed when it is not the default block.
// CHECK-LABEL: func @grid
func.func @grid(%x: tensor<?x96x8xf32>, %t: tensor<15x2xf32>, %m: tensor<2x96x8xf32>, %q: memref<2x96x8xf32>, %tm: memref<15x2xf32>) -> (tensor<?x96x8xf32>, tensor<2x96x8xf32>) {
  // CHECK: rpe.window_partition %{{.*}} {partition = #rpe.partition<grid>, resolution = array<i64: 8, 12>, shift = array<i64: 0, 0>, window = array<i64: 2, 3>} : tensor<?x96x8xf32> -> tensor<?x2x6x4xf32>
  %w = rpe.window_partition %x {resolution = array<i64: 8, 12>, window = array<i64: 2, 3>, shift = array<i64: 0, 0>, partition = #rpe.partition<grid>} : tensor<?x96x8xf32> -> tensor<?x2x6x4xf32>
  // The default partition is not printed.
  // CHECK: rpe.window_partition %{{.*}} {resolution = array<i64: 8, 12>, shift = array<i64: 0, 0>, window = array<i64: 2, 3>} : tensor<?x96x8xf32> -> tensor<?x2x6x4xf32>
  %w2 = rpe.window_partition %x {resolution = array<i64: 8, 12>, window = array<i64: 2, 3>, shift = array<i64: 0, 0>, partition = #rpe.partition<block>} : tensor<?x96x8xf32> -> tensor<?x2x6x4xf32>
  %b = rpe.lookup %t {window = array<i64: 2, 3>} : tensor<15x2xf32> -> tensor<2x6x6xf32>
  %o = rpe.window_attention ins(%w, %w2, %w : tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>)
         bias(%b : tensor<2x6x6xf32>) -> tensor<?x6x8xf32>
  // CHECK: rpe.window_reverse %{{.*}} {partition = #rpe.partition<grid>, resolution = array<i64: 8, 12>, shift = array<i64: 0, 0>, window = array<i64: 2, 3>} : tensor<?x6x8xf32> -> tensor<?x96x8xf32>
  %y = rpe.window_reverse %o {resolution = array<i64: 8, 12>, window = array<i64: 2, 3>, shift = array<i64: 0, 0>, partition = #rpe.partition<grid>} : tensor<?x6x8xf32> -> tensor<?x96x8xf32>
  // CHECK: rpe.fused_window_attention {{.*}} {image = array<i64: 8, 12>, partition = #rpe.partition<grid>, resolution = array<i64: 8, 12>, scale = 5.000000e-01 : f32, shift = array<i64: 0, 0>, window = array<i64: 2, 3>} -> tensor<2x96x8xf32>
  %r = rpe.fused_window_attention ins(%m, %m, %m, %t : tensor<2x96x8xf32>, tensor<2x96x8xf32>, tensor<2x96x8xf32>, tensor<15x2xf32>)
         outs(%m : tensor<2x96x8xf32>)
         {window = array<i64: 2, 3>, scale = 0.5 : f32, image = array<i64: 8, 12>, resolution = array<i64: 8, 12>, shift = array<i64: 0, 0>, partition = #rpe.partition<grid>} -> tensor<2x96x8xf32>
  // CHECK: rpe.fused_window_attention_grad {{.*}} {image = array<i64: 8, 12>, partition = #rpe.partition<grid>, resolution = array<i64: 8, 12>, scale = 5.000000e-01 : f32, shift = array<i64: 0, 0>, window = array<i64: 2, 3>}
  rpe.fused_window_attention_grad
      ins(%q, %q, %q, %tm, %q, %q : memref<2x96x8xf32>, memref<2x96x8xf32>, memref<2x96x8xf32>, memref<15x2xf32>, memref<2x96x8xf32>, memref<2x96x8xf32>)
      outs(%q, %q, %q, %tm : memref<2x96x8xf32>, memref<2x96x8xf32>, memref<2x96x8xf32>, memref<15x2xf32>)
      {window = array<i64: 2, 3>, scale = 0.5 : f32, image = array<i64: 8, 12>, resolution = array<i64: 8, 12>, shift = array<i64: 0, 0>, partition = #rpe.partition<grid>}
  return %y, %r : tensor<?x96x8xf32>, tensor<2x96x8xf32>
}

// SwinV2's cosine attention: a per-head logit scale on both ops.
// CHECK-LABEL: func @cosine
func.func @cosine(%q: tensor<?x3x64x32xf32>, %b: tensor<3x64x64xf32>, %ls: tensor<3xf32>, %t: tensor<225x3xf32>,
                  %x: tensor<2x144x96xf32>) -> (tensor<?x64x96xf32>, tensor<2x144x96xf32>) {
  // CHECK: rpe.window_attention ins({{.*}}) bias(%{{.*}} : tensor<3x64x64xf32>) logit_scale(%{{.*}} : tensor<3xf32>) -> tensor<?x64x96xf32>
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x3x64x32xf32>, tensor<?x3x64x32xf32>, tensor<?x3x64x32xf32>)
         bias(%b : tensor<3x64x64xf32>) logit_scale(%ls : tensor<3xf32>) -> tensor<?x64x96xf32>
  // CHECK: rpe.fused_window_attention ins({{.*}}) logit_scale(%{{.*}} : tensor<3xf32>) outs(%{{.*}} : tensor<2x144x96xf32>) {image = array<i64: 12, 12>, resolution = array<i64: 16, 16>, scale = 1.000000e+00 : f32, shift = array<i64: 4, 4>, window = array<i64: 8, 8>} -> tensor<2x144x96xf32>
  %1 = rpe.fused_window_attention ins(%x, %x, %x, %t : tensor<2x144x96xf32>, tensor<2x144x96xf32>, tensor<2x144x96xf32>, tensor<225x3xf32>)
         logit_scale(%ls : tensor<3xf32>) outs(%x : tensor<2x144x96xf32>)
         {window = array<i64: 8, 8>, scale = 1.0 : f32, image = array<i64: 12, 12>, resolution = array<i64: 16, 16>, shift = array<i64: 4, 4>} -> tensor<2x144x96xf32>
  return %0, %1 : tensor<?x64x96xf32>, tensor<2x144x96xf32>
}

// CHECK-LABEL: func @continuous_position_bias
func.func @continuous_position_bias(%w1: tensor<512x2xf32>, %b1: tensor<512xf32>, %w2: tensor<3x512xf32>) -> tensor<225x3xf32> {
  // CHECK: rpe.continuous_position_bias %{{.*}}, %{{.*}}, %{{.*}} {pretrained_window = array<i64: 12, 12>, window = array<i64: 8, 8>} : tensor<512x2xf32>, tensor<512xf32>, tensor<3x512xf32> -> tensor<225x3xf32>
  %t = rpe.continuous_position_bias %w1, %b1, %w2 {window = array<i64: 8, 8>, pretrained_window = array<i64: 12, 12>}
         : tensor<512x2xf32>, tensor<512xf32>, tensor<3x512xf32> -> tensor<225x3xf32>
  return %t : tensor<225x3xf32>
}

// CHECK-LABEL: func @items_per_block
// CHECK-SAME: attributes {rpe.items_per_block = 3 : i64}
func.func @items_per_block() attributes {rpe.items_per_block = 3 : i64} {
  return
}

// The gradient, on buffers: windows layout with a shifted-window mask, and
// packed qkv (one map and one gradient map) in the token layout.
// CHECK-LABEL: func @fused_grad
func.func @fused_grad(%q: memref<?x3x49x32xf32>, %t: memref<169x3xf32>, %o: memref<?x49x96xf32>, %dq: memref<?x3x49x32xf32>, %dk: memref<?x3x49x32xf32>, %dv: memref<?x3x49x32xf32>, %dt: memref<169x3xf32>,
                         %qkv: memref<2x196x288xf32>, %om: memref<2x196x96xf32>, %dqkv: memref<2x196x288xf32>) {
  // CHECK: rpe.fused_window_attention_grad ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<169x3xf32>, memref<?x49x96xf32>, memref<?x49x96xf32>) outs(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<169x3xf32>) {resolution = array<i64: 14, 14>, scale = 1.250000e-01 : f32, shift = array<i64: 3, 3>, window = array<i64: 7, 7>}
  rpe.fused_window_attention_grad
      ins(%q, %q, %q, %t, %o, %o : memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<169x3xf32>, memref<?x49x96xf32>, memref<?x49x96xf32>)
      outs(%dq, %dk, %dv, %dt : memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<169x3xf32>)
      {window = array<i64: 7, 7>, scale = 0.125 : f32, resolution = array<i64: 14, 14>, shift = array<i64: 3, 3>}
  // CHECK: rpe.fused_window_attention_grad {{.*}} {image = array<i64: 14, 14>, packed_qkv, resolution = array<i64: 14, 14>, scale = 1.250000e-01 : f32, shift = array<i64: 3, 3>, window = array<i64: 7, 7>}
  rpe.fused_window_attention_grad
      ins(%qkv, %qkv, %qkv, %t, %om, %om : memref<2x196x288xf32>, memref<2x196x288xf32>, memref<2x196x288xf32>, memref<169x3xf32>, memref<2x196x96xf32>, memref<2x196x96xf32>)
      outs(%dqkv, %dqkv, %dqkv, %dt : memref<2x196x288xf32>, memref<2x196x288xf32>, memref<2x196x288xf32>, memref<169x3xf32>)
      {window = array<i64: 7, 7>, scale = 0.125 : f32, image = array<i64: 14, 14>, resolution = array<i64: 14, 14>, shift = array<i64: 3, 3>, packed_qkv}
  return
}

// f16 operands and table; the table's gradient, a sum over every window,
// in f32.
// CHECK-LABEL: func @fused_grad_f16
func.func @fused_grad_f16(%q: memref<?x3x49x32xf16>, %t: memref<169x3xf16>, %o: memref<?x49x96xf16>, %dt: memref<169x3xf32>) {
  // CHECK: rpe.fused_window_attention_grad {{.*}} outs({{.*}} : memref<?x3x49x32xf16>, memref<?x3x49x32xf16>, memref<?x3x49x32xf16>, memref<169x3xf32>)
  rpe.fused_window_attention_grad
      ins(%q, %q, %q, %t, %o, %o : memref<?x3x49x32xf16>, memref<?x3x49x32xf16>, memref<?x3x49x32xf16>, memref<169x3xf16>, memref<?x49x96xf16>, memref<?x49x96xf16>)
      outs(%q, %q, %q, %dt : memref<?x3x49x32xf16>, memref<?x3x49x32xf16>, memref<?x3x49x32xf16>, memref<169x3xf32>)
      {window = array<i64: 7, 7>, scale = 0.125 : f32}
  return
}
