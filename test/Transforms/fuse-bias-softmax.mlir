// RUN: swin-opt %s --rpe-fuse-bias-softmax -split-input-file | FileCheck %s
// RUN: swin-opt %s --rpe-fuse-bias-softmax=max-scratch-bytes=1024 -split-input-file | FileCheck %s --check-prefix=SMALL

// A lookup and a shift mask fuse: the table and the shift become operands
// and attributes of one op; nothing N x N is left.
// CHECK-LABEL: func @lookup_and_shift_mask
// CHECK-SAME: (%[[Q:.*]]: tensor<?x3x49x32xf32>, %[[K:.*]]: tensor<?x3x49x32xf32>, %[[V:.*]]: tensor<?x3x49x32xf32>, %[[T:.*]]: tensor<169x3xf32>)
// CHECK: %[[N:.*]] = tensor.dim %[[Q]], %c0
// CHECK: %[[INIT:.*]] = tensor.empty(%[[N]]) : tensor<?x49x96xf32>
// CHECK: %[[R:.*]] = rpe.fused_window_attention ins(%[[Q]], %[[K]], %[[V]], %[[T]] : {{.*}}) outs(%[[INIT]] : tensor<?x49x96xf32>)
// CHECK-SAME: resolution = array<i64: 14, 14>, scale = 0.176776692 : f32, shift = array<i64: 3, 3>, window = array<i64: 7, 7>
// CHECK: return %[[R]]
// CHECK-NOT: rpe.lookup
// CHECK-NOT: rpe.shift_mask
// SMALL-LABEL: func @lookup_and_shift_mask
// SMALL: rpe.window_attention
func.func @lookup_and_shift_mask(%q: tensor<?x3x49x32xf32>, %k: tensor<?x3x49x32xf32>, %v: tensor<?x3x49x32xf32>,
                                 %t: tensor<169x3xf32>) -> tensor<?x49x96xf32> {
  %b = rpe.lookup %t {window = array<i64: 7, 7>} : tensor<169x3xf32> -> tensor<3x49x49xf32>
  %m = rpe.shift_mask {resolution = array<i64: 14, 14>, window = array<i64: 7, 7>, shift = array<i64: 3, 3>} : tensor<4x49x49xf32>
  %0 = rpe.window_attention ins(%q, %k, %v : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>)
         bias(%b : tensor<3x49x49xf32>) mask(%m : tensor<4x49x49xf32>) -> tensor<?x49x96xf32>
  return %0 : tensor<?x49x96xf32>
}

// -----

// Without a mask (and with a mask of shift 0, which is no mask).
// CHECK-LABEL: func @lookup_only
// CHECK: rpe.fused_window_attention ins({{.*}}) outs(%{{.*}} : tensor<4x2x24x8xf16>) {scale = 5.000000e-01 : f32, window = array<i64: 4, 6>} -> tensor<4x2x24x8xf16>
// CHECK: rpe.fused_window_attention
// CHECK-NOT: resolution
// CHECK-SAME: -> tensor<4x2x24x8xf16>
func.func @lookup_only(%q: tensor<4x2x24x8xf16>, %t: tensor<77x2xf16>) -> (tensor<4x2x24x8xf16>, tensor<4x2x24x8xf16>) {
  %b = rpe.lookup %t {window = array<i64: 4, 6>} : tensor<77x2xf16> -> tensor<2x24x24xf16>
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<4x2x24x8xf16>, tensor<4x2x24x8xf16>, tensor<4x2x24x8xf16>)
         bias(%b : tensor<2x24x24xf16>) {scale = 0.5 : f32} -> tensor<4x2x24x8xf16>
  %m = rpe.shift_mask {resolution = array<i64: 8, 12>, window = array<i64: 4, 6>, shift = array<i64: 0, 0>} : tensor<4x24x24xf32>
  %1 = rpe.window_attention ins(%q, %q, %q : tensor<4x2x24x8xf16>, tensor<4x2x24x8xf16>, tensor<4x2x24x8xf16>)
         bias(%b : tensor<2x24x24xf16>) mask(%m : tensor<4x24x24xf32>) -> tensor<4x2x24x8xf16>
  return %0, %1 : tensor<4x2x24x8xf16>, tensor<4x2x24x8xf16>
}

// -----

// A bias that is not a lookup of the compact table does not fuse.
// CHECK-LABEL: func @arbitrary_bias
// CHECK-NOT: rpe.fused_window_attention
// CHECK: rpe.window_attention
func.func @arbitrary_bias(%q: tensor<?x3x49x32xf32>, %b: tensor<3x49x49xf32>) -> tensor<?x3x49x32xf32> {
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>)
         bias(%b : tensor<3x49x49xf32>) -> tensor<?x3x49x32xf32>
  return %0 : tensor<?x3x49x32xf32>
}

// -----

// BEiT's class-token lookup fuses with its class token: the kernel reads
// the class row and column of the table as it reads Swin's.
// CHECK-LABEL: func @class_token_bias
// CHECK-SAME: (%[[Q:.*]]: tensor<?x3x5x32xf32>, %[[T:.*]]: tensor<12x3xf32>)
// CHECK-NOT: rpe.lookup
// CHECK: rpe.fused_window_attention ins(%[[Q]], %[[Q]], %[[Q]], %[[T]]
// CHECK-SAME: class_token
// CHECK-SAME: window = array<i64: 2, 2>
func.func @class_token_bias(%q: tensor<?x3x5x32xf32>, %t: tensor<12x3xf32>) -> tensor<?x3x5x32xf32> {
  %b = rpe.lookup %t {window = array<i64: 2, 2>, class_token} : tensor<12x3xf32> -> tensor<3x5x5xf32>
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x3x5x32xf32>, tensor<?x3x5x32xf32>, tensor<?x3x5x32xf32>)
         bias(%b : tensor<3x5x5xf32>) -> tensor<?x3x5x32xf32>
  return %0 : tensor<?x3x5x32xf32>
}

// -----

// With a mask the class token does not fuse (BEiT's attention has none).
// CHECK-LABEL: func @class_token_masked
// CHECK-NOT: rpe.fused_window_attention
// CHECK: rpe.window_attention
func.func @class_token_masked(%q: tensor<?x3x5x32xf32>, %t: tensor<12x3xf32>, %m: tensor<1x5x5xf32>) -> tensor<?x3x5x32xf32> {
  %b = rpe.lookup %t {window = array<i64: 2, 2>, class_token} : tensor<12x3xf32> -> tensor<3x5x5xf32>
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x3x5x32xf32>, tensor<?x3x5x32xf32>, tensor<?x3x5x32xf32>)
         bias(%b : tensor<3x5x5xf32>) mask(%m : tensor<1x5x5xf32>) -> tensor<?x3x5x32xf32>
  return %0 : tensor<?x3x5x32xf32>
}

// -----

// A mask that is not Swin's shift mask (here a runtime one, as timm's
// WindowAttention.forward(x, mask) takes) fuses as the kernel's mask
// operand, read as it is; the bias still comes from the table.
// CHECK-LABEL: func @arbitrary_mask
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<?x3x49x32xf32>, %[[T:[a-z0-9]+]]: tensor<169x3xf32>, %[[M:[a-z0-9]+]]: tensor<4x49x49xf32>
// CHECK-NOT: rpe.lookup
// CHECK: rpe.fused_window_attention ins(%[[Q]], %[[Q]], %[[Q]], %[[T]] : {{.*}}) mask(%[[M]] : tensor<4x49x49xf32>) outs({{.*}}) {scale = 0.176776692 : f32, window = array<i64: 7, 7>}
// CHECK-NOT: rpe.window_attention
func.func @arbitrary_mask(%q: tensor<?x3x49x32xf32>, %t: tensor<169x3xf32>, %m: tensor<4x49x49xf32>) -> tensor<?x3x49x32xf32> {
  %b = rpe.lookup %t {window = array<i64: 7, 7>} : tensor<169x3xf32> -> tensor<3x49x49xf32>
  %0 = rpe.window_attention ins(%q, %q, %q : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>)
         bias(%b : tensor<3x49x49xf32>) mask(%m : tensor<4x49x49xf32>) -> tensor<?x3x49x32xf32>
  return %0 : tensor<?x3x49x32xf32>
}

// -----

// A feature-map attention fuses whole: q, k, v and the output stay in image
// order, the partition's geometry moves to attributes, the padding rows
// become operands (zeros for k, which has none).
// CHECK-LABEL: func @feature_map
// CHECK-SAME: (%[[X:.*]]: tensor<?x117x96xf32>, %[[P:.*]]: tensor<96xf32>, %[[T:.*]]: tensor<77x3xf32>)
// CHECK: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<96xf32>
// CHECK: %[[R:.*]] = rpe.fused_window_attention ins(%[[X]], %[[X]], %[[X]], %[[T]] : {{.*}}) pads(%[[P]], %[[ZERO]], %[[P]] : tensor<96xf32>, tensor<96xf32>, tensor<96xf32>) outs(%{{.*}} : tensor<?x117x96xf32>)
// CHECK-SAME: image = array<i64: 9, 13>, padding = #rpe.padding<shift_then_pad>, resolution = array<i64: 12, 18>
// CHECK-SAME: shift = array<i64: 2, 3>, window = array<i64: 4, 6>
// CHECK-NEXT: return %[[R]]
func.func @feature_map(%x: tensor<?x117x96xf32>, %p: tensor<96xf32>, %t: tensor<77x3xf32>) -> tensor<?x117x96xf32> {
  %q = rpe.window_partition %x pad(%p : tensor<96xf32>) {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 2, 3>, padding = #rpe.padding<shift_then_pad>} : tensor<?x117x96xf32> -> tensor<?x3x24x32xf32>
  %k = rpe.window_partition %x {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 2, 3>, padding = #rpe.padding<shift_then_pad>} : tensor<?x117x96xf32> -> tensor<?x3x24x32xf32>
  %b = rpe.lookup %t {window = array<i64: 4, 6>} : tensor<77x3xf32> -> tensor<3x24x24xf32>
  %m = rpe.shift_mask {resolution = array<i64: 12, 18>, window = array<i64: 4, 6>, shift = array<i64: 2, 3>} : tensor<9x24x24xf32>
  %o = rpe.window_attention ins(%q, %k, %q : tensor<?x3x24x32xf32>, tensor<?x3x24x32xf32>, tensor<?x3x24x32xf32>)
         bias(%b : tensor<3x24x24xf32>) mask(%m : tensor<9x24x24xf32>) -> tensor<?x24x96xf32>
  %y = rpe.window_reverse %o {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 2, 3>, padding = #rpe.padding<shift_then_pad>} : tensor<?x24x96xf32> -> tensor<?x117x96xf32>
  return %y : tensor<?x117x96xf32>
}

// -----

// MaxViT's grid fuses whole like Swin's blocks, the partition an attribute
// of the fused op.
// CHECK-LABEL: func @grid
// CHECK-SAME: (%[[X:.*]]: tensor<?x96x8xf32>, %[[T:.*]]: tensor<15x2xf32>)
// CHECK: %[[R:.*]] = rpe.fused_window_attention ins(%[[X]], %[[X]], %[[X]], %[[T]] : {{.*}}) outs(%{{.*}} : tensor<?x96x8xf32>)
// CHECK-SAME: image = array<i64: 8, 12>, partition = #rpe.partition<grid>, resolution = array<i64: 8, 12>
// CHECK-NEXT: return %[[R]]
func.func @grid(%x: tensor<?x96x8xf32>, %t: tensor<15x2xf32>) -> tensor<?x96x8xf32> {
  %w = rpe.window_partition %x {resolution = array<i64: 8, 12>, window = array<i64: 2, 3>, shift = array<i64: 0, 0>, partition = #rpe.partition<grid>} : tensor<?x96x8xf32> -> tensor<?x2x6x4xf32>
  %b = rpe.lookup %t {window = array<i64: 2, 3>} : tensor<15x2xf32> -> tensor<2x6x6xf32>
  %o = rpe.window_attention ins(%w, %w, %w : tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>)
         bias(%b : tensor<2x6x6xf32>) -> tensor<?x6x8xf32>
  %y = rpe.window_reverse %o {resolution = array<i64: 8, 12>, window = array<i64: 2, 3>, shift = array<i64: 0, 0>, partition = #rpe.partition<grid>} : tensor<?x6x8xf32> -> tensor<?x96x8xf32>
  return %y : tensor<?x96x8xf32>
}

// -----

// Windows of a grid reversed as blocks are not one feature-map attention:
// only the attention fuses.
// CHECK-LABEL: func @grid_reversed_as_blocks
// CHECK: rpe.window_partition
// CHECK: rpe.fused_window_attention
// CHECK-NOT: image =
// CHECK: rpe.window_reverse
func.func @grid_reversed_as_blocks(%x: tensor<?x96x8xf32>, %t: tensor<15x2xf32>) -> tensor<?x96x8xf32> {
  %w = rpe.window_partition %x {resolution = array<i64: 8, 12>, window = array<i64: 2, 3>, shift = array<i64: 0, 0>, partition = #rpe.partition<grid>} : tensor<?x96x8xf32> -> tensor<?x2x6x4xf32>
  %b = rpe.lookup %t {window = array<i64: 2, 3>} : tensor<15x2xf32> -> tensor<2x6x6xf32>
  %o = rpe.window_attention ins(%w, %w, %w : tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>)
         bias(%b : tensor<2x6x6xf32>) -> tensor<?x6x8xf32>
  %y = rpe.window_reverse %o {resolution = array<i64: 8, 12>, window = array<i64: 2, 3>, shift = array<i64: 0, 0>} : tensor<?x6x8xf32> -> tensor<?x96x8xf32>
  return %y : tensor<?x96x8xf32>
}

// -----

// A mask value other than Swin's is the fused op's too, in both layouts.
// CHECK-LABEL: func @mask_value
// CHECK: rpe.fused_window_attention
// CHECK-SAME: {image = array<i64: 8, 12>, mask_value = -1.000000e+04 : f64, resolution = array<i64: 8, 12>
// CHECK: rpe.fused_window_attention
// CHECK-SAME: {mask_value = -1.000000e+04 : f64, resolution = array<i64: 8, 12>
func.func @mask_value(%q: tensor<?x3x24x32xf32>, %x: tensor<?x96x96xf32>, %t: tensor<77x3xf32>) -> (tensor<?x96x96xf32>, tensor<?x24x96xf32>) {
  %b = rpe.lookup %t {window = array<i64: 4, 6>} : tensor<77x3xf32> -> tensor<3x24x24xf32>
  %m = rpe.shift_mask {resolution = array<i64: 8, 12>, window = array<i64: 4, 6>, shift = array<i64: 2, 3>, mask_value = -1.0e4 : f64} : tensor<4x24x24xf32>
  %w = rpe.window_partition %x {resolution = array<i64: 8, 12>, window = array<i64: 4, 6>, shift = array<i64: 2, 3>} : tensor<?x96x96xf32> -> tensor<?x3x24x32xf32>
  %0 = rpe.window_attention ins(%w, %w, %w : tensor<?x3x24x32xf32>, tensor<?x3x24x32xf32>, tensor<?x3x24x32xf32>)
         bias(%b : tensor<3x24x24xf32>) mask(%m : tensor<4x24x24xf32>) -> tensor<?x24x96xf32>
  %y = rpe.window_reverse %0 {resolution = array<i64: 8, 12>, window = array<i64: 4, 6>, shift = array<i64: 2, 3>} : tensor<?x24x96xf32> -> tensor<?x96x96xf32>
  %1 = rpe.window_attention ins(%q, %q, %q : tensor<?x3x24x32xf32>, tensor<?x3x24x32xf32>, tensor<?x3x24x32xf32>)
         bias(%b : tensor<3x24x24xf32>) mask(%m : tensor<4x24x24xf32>) -> tensor<?x24x96xf32>
  return %y, %1 : tensor<?x96x96xf32>, tensor<?x24x96xf32>
}

// -----

// A mask built for another map than the partition's padded one is not
// Swin's: the feature-map form does not fuse (the attention alone does).
// CHECK-LABEL: func @feature_map_wrong_mask
// CHECK: rpe.window_partition
// CHECK: rpe.fused_window_attention
// CHECK-NOT: image =
// CHECK: rpe.window_reverse
func.func @feature_map_wrong_mask(%x: tensor<?x117x96xf32>, %t: tensor<77x3xf32>) -> tensor<?x117x96xf32> {
  %q = rpe.window_partition %x {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 2, 3>} : tensor<?x117x96xf32> -> tensor<?x3x24x32xf32>
  %b = rpe.lookup %t {window = array<i64: 4, 6>} : tensor<77x3xf32> -> tensor<3x24x24xf32>
  %m = rpe.shift_mask {resolution = array<i64: 12, 18>, window = array<i64: 4, 6>, shift = array<i64: 1, 3>} : tensor<9x24x24xf32>
  %o = rpe.window_attention ins(%q, %q, %q : tensor<?x3x24x32xf32>, tensor<?x3x24x32xf32>, tensor<?x3x24x32xf32>)
         bias(%b : tensor<3x24x24xf32>) mask(%m : tensor<9x24x24xf32>) -> tensor<?x24x96xf32>
  %y = rpe.window_reverse %o {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 2, 3>} : tensor<?x24x96xf32> -> tensor<?x117x96xf32>
  return %y : tensor<?x117x96xf32>
}

// -----

// Attention spelled out in linalg around rpe.lookup is not this pass's:
// rpe-raise-window-attention raises it into rpe.window_attention first
// (raise-window-attention.mlir, @spelled).
// CHECK-LABEL: func @spelled_out
// CHECK-NOT: rpe.fused_window_attention
// CHECK: linalg.softmax
func.func @spelled_out(%q: tensor<4x2x4x2xf32>, %k: tensor<4x2x4x2xf32>, %v: tensor<4x2x4x2xf32>, %t: tensor<9x2xf32>) -> tensor<4x2x4x2xf32> {
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant 0.70710678 : f32
  %bias = rpe.lookup %t {window = array<i64: 2, 2>} : tensor<9x2xf32> -> tensor<2x4x4xf32>
  %e0 = tensor.empty() : tensor<4x2x4x4xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x2x4x4xf32>) -> tensor<4x2x4x4xf32>
  %scores = linalg.generic {indexing_maps = [affine_map<(b, h, i, j, e) -> (b, h, i, e)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>, affine_map<(b, h, i, j, e) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<4x2x4x2xf32>, tensor<4x2x4x2xf32>) outs(%f0 : tensor<4x2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %qs = arith.mulf %a, %scale : f32
    %m = arith.mulf %qs, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<4x2x4x4xf32>
  %e1 = tensor.empty() : tensor<4x2x4x4xf32>
  %biased = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%scores, %bias : tensor<4x2x4x4xf32>, tensor<2x4x4xf32>) outs(%e1 : tensor<4x2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x2x4x4xf32>
  %e2 = tensor.empty() : tensor<4x2x4x4xf32>
  %probs = linalg.softmax dimension(3) ins(%biased : tensor<4x2x4x4xf32>) outs(%e2 : tensor<4x2x4x4xf32>) -> tensor<4x2x4x4xf32>
  %e3 = tensor.empty() : tensor<4x2x4x2xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<4x2x4x2xf32>) -> tensor<4x2x4x2xf32>
  %out = linalg.generic {indexing_maps = [affine_map<(b, h, i, e, j) -> (b, h, i, j)>, affine_map<(b, h, i, e, j) -> (b, h, j, e)>, affine_map<(b, h, i, e, j) -> (b, h, i, e)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%probs, %v : tensor<4x2x4x4xf32>, tensor<4x2x4x2xf32>) outs(%f3 : tensor<4x2x4x2xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<4x2x4x2xf32>
  return %out : tensor<4x2x4x2xf32>
}

// -----

// q, k, v sliced from one qkv projection output: the fused op reads that
// map as it is (packed_qkv), no copy of q, k or v.
// CHECK-LABEL: func @packed_qkv
// CHECK-SAME: (%[[QKV:.*]]: tensor<?x117x48xf32>, %[[T:.*]]: tensor<77x2xf32>)
// CHECK: rpe.fused_window_attention ins(%[[QKV]], %[[QKV]], %[[QKV]], %[[T]] : tensor<?x117x48xf32>, tensor<?x117x48xf32>, tensor<?x117x48xf32>, tensor<77x2xf32>) outs(%{{.*}} : tensor<?x117x16xf32>)
// CHECK-SAME: packed_qkv
// CHECK-NOT: tensor.extract_slice
func.func @packed_qkv(%qkv: tensor<?x117x48xf32>, %t: tensor<77x2xf32>) -> tensor<?x117x16xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %qkv, %c0 : tensor<?x117x48xf32>
  %q = tensor.extract_slice %qkv[0, 0, 0] [%n, 117, 16] [1, 1, 1] : tensor<?x117x48xf32> to tensor<?x117x16xf32>
  %k = tensor.extract_slice %qkv[0, 0, 16] [%n, 117, 16] [1, 1, 1] : tensor<?x117x48xf32> to tensor<?x117x16xf32>
  %v = tensor.extract_slice %qkv[0, 0, 32] [%n, 117, 16] [1, 1, 1] : tensor<?x117x48xf32> to tensor<?x117x16xf32>
  %qw = rpe.window_partition %q {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 0, 0>} : tensor<?x117x16xf32> -> tensor<?x2x24x8xf32>
  %kw = rpe.window_partition %k {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 0, 0>} : tensor<?x117x16xf32> -> tensor<?x2x24x8xf32>
  %vw = rpe.window_partition %v {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 0, 0>} : tensor<?x117x16xf32> -> tensor<?x2x24x8xf32>
  %b = rpe.lookup %t {window = array<i64: 4, 6>} : tensor<77x2xf32> -> tensor<2x24x24xf32>
  %o = rpe.window_attention ins(%qw, %kw, %vw : tensor<?x2x24x8xf32>, tensor<?x2x24x8xf32>, tensor<?x2x24x8xf32>)
         bias(%b : tensor<2x24x24xf32>) -> tensor<?x24x16xf32>
  %y = rpe.window_reverse %o {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 0, 0>} : tensor<?x24x16xf32> -> tensor<?x117x16xf32>
  return %y : tensor<?x117x16xf32>
}

// -----

// SwinV2's cosine attention fuses with its logit scale, in both layouts;
// the scale defaults to 1, not head_dim ** -0.5.
// CHECK-LABEL: func @cosine
// CHECK-SAME: %[[LS:[a-z0-9]+]]: tensor<3xf32>
// CHECK: rpe.fused_window_attention ins({{.*}}) logit_scale(%[[LS]] : tensor<3xf32>) outs(%{{.*}} : tensor<?x24x96xf32>)
// CHECK-SAME: scale = 1.000000e+00 : f32
// CHECK: rpe.fused_window_attention ins({{.*}}) logit_scale(%[[LS]] : tensor<3xf32>) outs(%{{.*}} : tensor<?x117x96xf32>)
// CHECK-SAME: image = array<i64: 9, 13>
// CHECK-SAME: scale = 1.000000e+00 : f32
// CHECK-NOT: rpe.window_attention
func.func @cosine(%x: tensor<?x117x96xf32>, %w: tensor<?x3x24x32xf32>, %t: tensor<77x3xf32>, %ls: tensor<3xf32>)
    -> (tensor<?x24x96xf32>, tensor<?x117x96xf32>) {
  %b = rpe.lookup %t {window = array<i64: 4, 6>} : tensor<77x3xf32> -> tensor<3x24x24xf32>
  %plain = rpe.window_attention ins(%w, %w, %w : tensor<?x3x24x32xf32>, tensor<?x3x24x32xf32>, tensor<?x3x24x32xf32>)
         bias(%b : tensor<3x24x24xf32>) logit_scale(%ls : tensor<3xf32>) -> tensor<?x24x96xf32>
  %q = rpe.window_partition %x {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 2, 3>} : tensor<?x117x96xf32> -> tensor<?x3x24x32xf32>
  %m = rpe.shift_mask {resolution = array<i64: 12, 18>, window = array<i64: 4, 6>, shift = array<i64: 2, 3>} : tensor<9x24x24xf32>
  %o = rpe.window_attention ins(%q, %q, %q : tensor<?x3x24x32xf32>, tensor<?x3x24x32xf32>, tensor<?x3x24x32xf32>)
         bias(%b : tensor<3x24x24xf32>) mask(%m : tensor<9x24x24xf32>) logit_scale(%ls : tensor<3xf32>) -> tensor<?x24x96xf32>
  %y = rpe.window_reverse %o {resolution = array<i64: 9, 13>, window = array<i64: 4, 6>, shift = array<i64: 2, 3>} : tensor<?x24x96xf32> -> tensor<?x117x96xf32>
  return %plain, %y : tensor<?x24x96xf32>, tensor<?x117x96xf32>
}
