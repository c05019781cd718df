//===- RpeOps.td - rpe dialect operations -------------------*- tablegen -*-===//

#ifndef RPE_OPS_TD
#define RPE_OPS_TD

include "Rpe/RpeAttrs.td"
include "Rpe/RpeDialect.td"
include "Rpe/RpeInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Rpe_FloatElement : AnyTypeOf<[F16, BF16, F32]>;
def Rpe_FloatTensor : RankedTensorOf<[F16, BF16, F32]>;
def Rpe_IndexTensor : RankedTensorOf<[I32, I64, Index]>;

//===----------------------------------------------------------------------===//
// rpe.relative_index
//===----------------------------------------------------------------------===//

def Rpe_RelativeIndexOp : Rpe_Op<"relative_index", [Pure]> {
  let summary = "Swin's N x N relative position index of a window";
  let description = [{
    Produces `idx[i, j]`, the row of the compact bias table that the pair of
    tokens `(i, j)` of a `window` reads. For a 2-D window `Wh x Ww`, with
    token `t = y * Ww + x`:

    ```
    idx(i, j) = (yi - yj + Wh - 1) * (2Ww - 1) + (xi - xj + Ww - 1)
    ```

    For a 3-D window `Wd x Wh x Ww` the depth offset `(zi - zj + Wd - 1)` is
    the outermost digit, multiplied by `(2Wh - 1)(2Ww - 1)`. Values lie in
    `[0, T)`, `T = (2Wh-1)(2Ww-1)`. The op depends only on its attributes:
    it folds to a constant.

    With `class_token` it is BEiT's index (BEiT, BEiT v2, data2vec-vision):
    global attention over the `window` grid of patches plus a class token
    at position 0, so `N = Wh * Ww + 1` and the grid's tokens are `1..N-1`.
    Pairs of grid tokens read Swin's index of their grid positions; the
    pairs with the class token read three rows past Swin's:

    ```
    idx(i, j) = i == 0 ? (j == 0 ? T + 2 : T)       class -> class, class -> token
                       : (j == 0 ? T + 1            token -> class
                                 : swin(i - 1, j - 1))
    ```

    Example:

    ```mlir
    %idx = rpe.relative_index {window = array<i64: 7, 7>} : tensor<49x49xi64>
    // BEiT-base at 224x224: a 14x14 grid and the class token.
    %cls = rpe.relative_index {window = array<i64: 14, 14>, class_token}
             : tensor<197x197xi64>
    ```
  }];
  let arguments = (ins DenseI64ArrayAttr:$window, UnitAttr:$class_token);
  let results = (outs Rpe_IndexTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// rpe.lookup
//===----------------------------------------------------------------------===//

def Rpe_LookupOp : Rpe_Op<"lookup", [Pure]> {
  let summary = "Gathers the per-head bias from the compact relative position table";
  let description = [{
    Turns Swin's `relative_position_bias_table`, `T x H` with
    `T = (2Wh-1)(2Ww-1)` (3-D: `(2Wd-1)(2Wh-1)(2Ww-1)`) rows and `H` heads
    (heads last, as Swin stores it), into the bias `H x N x N` added to the
    attention scores, `N = Wh * Ww (* Wd)`:

    ```
    result[h, i, j] = table[idx(i, j), h]
    ```

    with `idx` the index of `rpe.relative_index` for the same `window`. This
    is the heart of the dialect: frameworks materialize `idx` and the gathered
    bias in memory, the passes of this project fold `idx` into constant
    addresses and fuse the gather into the softmax of the attention.

    With `class_token` the lookup is BEiT's (`rpe.relative_index` with
    `class_token`): the table has `T + 3` rows, Swin's `T` then the
    class -> token, token -> class and class -> class rows, and the bias is
    `H x N x N` with `N = Wh * Ww + 1`, the class token first.

    Example:

    ```mlir
    %b = rpe.lookup %table {window = array<i64: 7, 7>} : tensor<169x3xf32> -> tensor<3x49x49xf32>
    // BEiT: 729 + 3 rows for a 14x14 grid and its class token.
    %c = rpe.lookup %btable {window = array<i64: 14, 14>, class_token}
           : tensor<732x12xf32> -> tensor<12x197x197xf32>
    ```
  }];
  let arguments = (ins Rpe_FloatTensor:$table, DenseI64ArrayAttr:$window,
                       UnitAttr:$class_token);
  let results = (outs Rpe_FloatTensor:$result);
  let assemblyFormat = "$table attr-dict `:` type($table) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// rpe.continuous_position_bias
//===----------------------------------------------------------------------===//

def Rpe_ContinuousPositionBiasOp : Rpe_Op<"continuous_position_bias", [Pure]> {
  let summary = "SwinV2's continuous position bias table from its MLP";
  let description = [{
    The compact bias table `T x H` of SwinV2 (the table `rpe.lookup`
    gathers, with the same row order), computed by its two-layer MLP from
    log-spaced relative coordinates:

    ```
    c[t, a]  = sign(x) * log2(1 + |x|) / log2(8),
               x = 8 * d_a(t) / (P_a - 1),  d_a(t) in [-(W_a - 1), W_a - 1]
    result   = 16 * sigmoid(relu(c · fc1_weightᵀ + fc1_bias) · fc2_weightᵀ)
    ```

    with `W` the `window`, `P` the `pretrained_window` (the window when
    absent; an extent of 1 leaves `d` unscaled), `fc1_weight` `[hidden,
    rank]`, `fc1_bias` `[hidden]` and `fc2_weight` `[H, hidden]` in
    PyTorch's `Linear` layout (SwinV2's second layer has no bias). The
    sigmoid is element-wise, so applying it before the gather is SwinV2
    applying it after.

    At inference the weights are constants and so is the table: the op
    folds to it (computed in double precision). Otherwise
    `convert-rpe-to-linalg` lowers it to a small MLP over a constant
    coordinate table.

    Example:

    ```mlir
    %t = rpe.continuous_position_bias %w1, %b1, %w2
           {window = array<i64: 8, 8>, pretrained_window = array<i64: 12, 12>}
           : tensor<512x2xf32>, tensor<512xf32>, tensor<3x512xf32> -> tensor<225x3xf32>
    ```
  }];
  let arguments = (ins Rpe_FloatTensor:$fc1_weight, Rpe_FloatTensor:$fc1_bias,
                       Rpe_FloatTensor:$fc2_weight, DenseI64ArrayAttr:$window,
                       OptionalAttr<DenseI64ArrayAttr>:$pretrained_window);
  let results = (outs Rpe_FloatTensor:$result);
  let assemblyFormat = [{
    $fc1_weight `,` $fc1_bias `,` $fc2_weight attr-dict `:` type($fc1_weight)
    `,` type($fc1_bias) `,` type($fc2_weight) `->` type($result)
  }];
  let extraClassDeclaration = [{
    /// The pretrained window, or the window itself.
    ArrayRef<int64_t> getEffectivePretrainedWindow() {
      return getPretrainedWindow() ? *getPretrainedWindow() : getWindow();
    }
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// rpe.shift_mask
//===----------------------------------------------------------------------===//

def Rpe_ShiftMaskOp : Rpe_Op<"shift_mask", [Pure]> {
  let summary = "Additive attention mask of shifted windows (SW-MSA)";
  let description = [{
    Swin's `attn_mask` for a feature map of size `resolution`, cut into
    windows of size `window` after a cyclic shift of `shift` tokens per axis.
    Along each axis of extent `n` the rolled map is labelled by region:
    `[0, n-w) -> 0`, `[n-w, n-s) -> 1`, `[n-s, n) -> 2`; a token's label is
    `3 * row_label + col_label` (3-D: `9 * depth + 3 * row + col`). For
    window `w` (windows row-major over the map) and tokens `i`, `j`:

    ```
    result[w, i, j] = label(i) == label(j) ? 0.0 : mask_value
    ```

    `mask_value` is Swin's `-100.0` by default (`rpe::kSwinMaskValue`): an
    additive value, not `-inf`. Window `b` of a batch of `B * nW` windows uses `result[b % nW]`.
    The op depends only on its attributes and folds to a constant.

    Example:

    ```mlir
    %m = rpe.shift_mask {resolution = array<i64: 14, 14>, window = array<i64: 7, 7>,
                         shift = array<i64: 3, 3>} : tensor<4x49x49xf32>
    ```
  }];
  let arguments = (ins DenseI64ArrayAttr:$resolution,
                       DenseI64ArrayAttr:$window,
                       DenseI64ArrayAttr:$shift,
                       DefaultValuedAttr<F64Attr,
                           "::mlir::rpe::kSwinMaskValue">:$mask_value);
  let results = (outs Rpe_FloatTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let builders = [
    // Swin's mask unless told otherwise: callers name only the geometry.
    OpBuilder<(ins "Type":$result, "ArrayRef<int64_t>":$resolution,
                   "ArrayRef<int64_t>":$window, "ArrayRef<int64_t>":$shift,
                   CArg<"double", "::mlir::rpe::kSwinMaskValue">:$maskValue), [{
      build($_builder, $_state, result, resolution, window, shift,
            ::llvm::APFloat(maskValue));
    }]>
  ];
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// rpe.window_attention
//===----------------------------------------------------------------------===//

def Rpe_WindowAttentionOp : Rpe_Op<"window_attention",
    [Pure, AttrSizedOperandSegments]> {
  let summary = "Window attention with an additive bias and optional mask";
  let description = [{
    The attention core of a Swin block, per window `b` and head `h`:

    ```
    S[i, j]   = (scale * q[b, h, i, :]) · k[b, h, j, :] + bias[h, i, j]
                (+ mask[b mod nW, i, j])
    P[i, :]   = softmax(S[i, :])
    out[b, h] = P · v[b, h]
    ```

    `q`, `k`, `v` are `B_ x H x N x d` (Swin's layout after the qkv split,
    `B_ = batch * nW` windows; `B_` may be dynamic). `bias` is `H x N x N`
    (typically an `rpe.lookup`), `mask` is `nW x N x N` (typically an
    `rpe.shift_mask`) and window `b` reads `mask[b mod nW]`. `scale` defaults
    to `d ** -0.5` and multiplies `q` before the product, as Swin does; the
    bias and the mask are never scaled.

    The result is either `B_ x H x N x d`, or `B_ x N x (H*d)`: Swin's layout
    before the output projection, `out[b, i, h * d + e]`.

    Element types: `q`, `k`, `v` and the result share `f32`, `f16` or `bf16`;
    the computation runs in `f32`.

    With `logit_scale` (`[H]`, SwinV2's raw per-head parameter) the
    attention is SwinV2's scaled cosine attention: q and k rows are L2
    normalized, with PyTorch's `F.normalize` guard, and the per-head scale
    is clamped at 100 as Swin does:

    ```
    S[i, j] = scale * exp(min(logit_scale[h], ln 100))
              * (q_i / max(|q_i|, 1e-12)) · (k_j / max(|k_j|, 1e-12))
              + bias[h, i, j] (+ mask[b mod nW, i, j])
    ```

    `scale` then defaults to 1 (SwinV2 has no `d ** -0.5`).

    Example:

    ```mlir
    %o = rpe.window_attention ins(%q, %k, %v : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>)
           bias(%b : tensor<3x49x49xf32>) mask(%m : tensor<4x49x49xf32>)
           {scale = 0.1767767 : f32} -> tensor<?x49x96xf32>

    // SwinV2: cosine attention with a per-head logit scale.
    %c = rpe.window_attention ins(%q, %k, %v : tensor<?x3x64x32xf32>, tensor<?x3x64x32xf32>, tensor<?x3x64x32xf32>)
           bias(%b2 : tensor<3x64x64xf32>) logit_scale(%ls : tensor<3xf32>)
           -> tensor<?x64x96xf32>
    ```
  }];
  let arguments = (ins Rpe_FloatTensor:$query, Rpe_FloatTensor:$key,
                       Rpe_FloatTensor:$value, Rpe_FloatTensor:$bias,
                       Optional<Rpe_FloatTensor>:$mask,
                       Optional<Rpe_FloatTensor>:$logit_scale,
                       OptionalAttr<F32Attr>:$scale);
  let results = (outs Rpe_FloatTensor:$result);
  let assemblyFormat = [{
    `ins` `(` $query `,` $key `,` $value `:` type($query) `,` type($key) `,` type($value) `)`
    `bias` `(` $bias `:` type($bias) `)`
    (`mask` `(` $mask^ `:` type($mask) `)`)?
    (`logit_scale` `(` $logit_scale^ `:` type($logit_scale) `)`)?
    attr-dict `->` type($result)
  }];
  let extraClassDeclaration = [{
    /// The scale applied to q: the `scale` attribute, or `head_dim ** -0.5`
    /// (1 for cosine attention).
    float getEffectiveScale();
    /// SwinV2's scaled cosine attention: q and k are normalized and each
    /// head's scores scaled by its clamped `exp(logit_scale)`.
    bool isCosine() { return static_cast<bool>(getLogitScale()); }
    int64_t getNumHeads() { return getQuery().getType().getDimSize(1); }
    int64_t getNumTokens() { return getQuery().getType().getDimSize(2); }
    int64_t getHeadDim() { return getQuery().getType().getDimSize(3); }
    /// True when the result is `B_ x N x (H*d)` rather than `B_ x H x N x d`.
    bool hasMergedHeadsResult() { return getResult().getType().getRank() == 3; }
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// rpe.window_partition, rpe.window_reverse
//===----------------------------------------------------------------------===//

/// The padding order of an op that pads a feature map: HF's, torchvision's
/// and Video Swin's unless the op says timm's.
def Rpe_DefaultPaddingOrder : DefaultValuedAttr<Rpe_PaddingOrderAttr,
    "::mlir::rpe::PaddingOrder::PadThenShift">;

/// The partition of an op's feature map: Swin's contiguous windows unless
/// the op says MaxViT's grid.
def Rpe_DefaultPartition : DefaultValuedAttr<Rpe_PartitionAttr,
    "::mlir::rpe::Partition::Block">;

class Rpe_FeatureMapOp<string mnemonic, list<Trait> traits = []>
    : Rpe_Op<mnemonic, !listconcat([Pure], traits)> {
  code featureMapDeclarations = [{
    /// True for timm's order (roll, then pad), false for pad, then roll.
    bool isShiftThenPad() {
      return getPadding() == PaddingOrder::ShiftThenPad;
    }
    /// MaxViT's grid: windows strided across the map.
    bool isGrid() { return getPartition() == Partition::Grid; }
  }];
}

def Rpe_WindowPartitionOp : Rpe_FeatureMapOp<"window_partition"> {
  let summary = "Shift, pad and partition a token-layout feature map into windows";
  let description = [{
    Swin's `roll(-shift)`, padding and `window_partition`, plus the split of
    channels into heads, as one op. `input` is `[batch, L, C]` with
    `L = prod(resolution)` tokens in image order (row-major, depth
    outermost); the result is `[batch * nW, heads, N, C / heads]`, windows
    row-major over the padded map and image-major over the batch (window
    `b = image * nW + w`).

    When `resolution` is not a multiple of `window`, the map is padded at
    the end of each axis to `ceil(resolution / window) * window`. `padding`
    (`#rpe.padding<...>`) selects the order of the two data movements, as
    Swin implementations differ:

    * `pad_then_shift` (HF transformers, torchvision, Video Swin), the
      default: pad, then roll the padded map;
    * `shift_then_pad` (timm): roll the map, then pad it.

    Padded tokens take the value `pad` (`[C]`; zeros when absent): in Swin
    they are the qkv projection of a zero vector, the projection's bias.

    `partition` (`#rpe.partition<...>`) says which tokens form a window:
    Swin's contiguous blocks (the default), or MaxViT's `grid`, whose window
    `(wy, wx)` holds the tokens at `(ty * H / Gh + wy, tx * W / Gw + wx)`
    for a `window` of `Gh x Gw` (timm's `grid_partition`); a grid has no
    shift and no padding.

    Example:

    ```mlir
    %qw = rpe.window_partition %q pad(%qbias : tensor<96xf32>)
            {resolution = array<i64: 54, 54>, window = array<i64: 7, 7>,
             shift = array<i64: 3, 3>, padding = #rpe.padding<shift_then_pad>}
            : tensor<?x2916x96xf32> -> tensor<?x3x49x32xf32>
    ```
  }];
  let arguments = (ins Rpe_FloatTensor:$input,
                       Optional<Rpe_FloatTensor>:$pad,
                       DenseI64ArrayAttr:$resolution,
                       DenseI64ArrayAttr:$window,
                       DenseI64ArrayAttr:$shift,
                       Rpe_DefaultPaddingOrder:$padding,
                       Rpe_DefaultPartition:$partition);
  let results = (outs Rpe_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`pad` `(` $pad^ `:` type($pad) `)`)? attr-dict `:` type($input)
    `->` type($result)
  }];
  let extraClassDeclaration = featureMapDeclarations;
  let hasVerifier = 1;
}

def Rpe_WindowReverseOp : Rpe_FeatureMapOp<"window_reverse"> {
  let summary = "Reverse a window partition: windows back to a token-layout map";
  let description = [{
    The inverse of `rpe.window_partition` with the same attributes, on the
    merged-heads attention output: `input` is `[batch * nW, N, C]`, the
    result `[batch, L, C]` in image order. Swin's `window_reverse`, the crop
    of the padding and `roll(+shift)`, in the order `padding` names, or
    timm's `grid_reverse` with `partition = #rpe.partition<grid>`.

    Example:

    ```mlir
    %x = rpe.window_reverse %o {resolution = array<i64: 54, 54>,
           window = array<i64: 7, 7>, shift = array<i64: 3, 3>,
           padding = #rpe.padding<shift_then_pad>}
           : tensor<?x49x96xf32> -> tensor<?x2916x96xf32>
    ```
  }];
  let arguments = (ins Rpe_FloatTensor:$input,
                       DenseI64ArrayAttr:$resolution,
                       DenseI64ArrayAttr:$window,
                       DenseI64ArrayAttr:$shift,
                       Rpe_DefaultPaddingOrder:$padding,
                       Rpe_DefaultPartition:$partition);
  let results = (outs Rpe_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let extraClassDeclaration = featureMapDeclarations;
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// rpe.fused_window_attention
//===----------------------------------------------------------------------===//

def Rpe_FusedWindowAttentionOp : Rpe_Op<"fused_window_attention", [
    AttrSizedOperandSegments, DestinationStyleOpInterface,
    Rpe_FusedAttentionOpInterface,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DeclareOpInterfaceMethods<BufferizableOpInterface,
        ["bufferizesToMemoryRead", "bufferizesToMemoryWrite",
         "getAliasingValues", "bufferize"]>]> {
  let summary = "Window attention with the bias gathered inside the softmax";
  let description = [{
    `rpe.window_attention` whose bias is `rpe.lookup` of `table` and whose
    mask, if any, is the `rpe.shift_mask` of `resolution` and `shift`:

    ```
    S[i, j] = (scale * q[b, h, i]) · k[b, h, j] + table[idx(i, j), h]
              (+ mask_value if label_b(i) != label_b(j))
    out[b, h, i] = softmax_j(S[i, :]) · v[b, h]
    ```

    No bias, index or mask tensor exists: the lowering reads the compact
    table at addresses that are index arithmetic on the loop variables,
    and derives the mask from per-token region labels of the window's
    position in the image (`b mod nW`). The mask applies when `shift` has a
    non-zero entry.

    Two layouts:

    * windows (no `image`): `q`, `k`, `v` are `[B_, H, N, d]`, the
      destination `[B_, N, H*d]` or `[B_, H, N, d]`;
    * tokens (`image` given): `q`, `k`, `v` and the destination are
      `[batch, L, H*d]` feature maps in image order, `L = prod(image)`. The
      kernel applies the shift, the padding to `resolution` (in the order
      `padding` names), the window partition, and their inverses, by
      addressing alone: it is `rpe.window_reverse` of the attention of
      `rpe.window_partition`s. `padding_values`, when given, are the three
      `[H*d]` rows (q, k, v) that padded tokens take; zeros otherwise.
      With `partition = #rpe.partition<grid>` the windows are MaxViT's
      grid (no shift, no padding): the kernel reads its strided tokens
      where they lie, without timm's `grid_partition` copies.

    With `logit_scale` (`[H]`) the scores are SwinV2's scaled cosine
    attention, as in `rpe.window_attention`: `scale *
    exp(min(logit_scale[h], ln 100)) * q̂ · k̂` with rows normalized by
    `max(|x|, 1e-12)`. The kernels normalize q and k while they pack them.

    With `class_token` the bias is BEiT's (`rpe.lookup` with
    `class_token`): global attention over the `window` grid plus a class
    token first, `N = prod(window) + 1`, and a table of `T + 3` rows. Only
    the windows layout, without a mask or `logit_scale`, has it; every
    kernel (CPU tiles, rows, warps, GPU) reads the class token's row and
    column of the bias as a select on `i == 0` and `j == 0`.

    It is produced by `rpe-fuse-bias-softmax` and lowered, after
    bufferization, by `rpe-lower-fused-attention`. The op is in
    destination-passing style: on tensors it returns the result; on memrefs
    it writes `outs` and has no result.

    Example:

    ```mlir
    %o = rpe.fused_window_attention
           ins(%q, %k, %v, %table : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>,
                                    tensor<?x3x49x32xf32>, tensor<169x3xf32>)
           outs(%init : tensor<?x49x96xf32>)
           {window = array<i64: 7, 7>, scale = 0.1767767 : f32,
            resolution = array<i64: 56, 56>, shift = array<i64: 3, 3>}
           -> tensor<?x49x96xf32>

    // timm's block on a 54x54 map: rolled, then padded to 56x56.
    %y = rpe.fused_window_attention
           ins(%xq, %xk, %xv, %table : tensor<?x2916x96xf32>, tensor<?x2916x96xf32>,
                                       tensor<?x2916x96xf32>, tensor<169x3xf32>)
           outs(%init2 : tensor<?x2916x96xf32>)
           {window = array<i64: 7, 7>, scale = 0.1767767 : f32,
            image = array<i64: 54, 54>, resolution = array<i64: 56, 56>,
            shift = array<i64: 3, 3>, padding = #rpe.padding<shift_then_pad>}
           -> tensor<?x2916x96xf32>
    ```
  }];
  let arguments = (ins AnyShaped:$query, AnyShaped:$key, AnyShaped:$value,
                       AnyShaped:$table, Variadic<AnyShaped>:$padding_values,
                       Optional<AnyShaped>:$logit_scale,
                       Optional<AnyShaped>:$mask,
                       AnyShaped:$init,
                       DenseI64ArrayAttr:$window, F32Attr:$scale,
                       OptionalAttr<DenseI64ArrayAttr>:$resolution,
                       OptionalAttr<DenseI64ArrayAttr>:$shift,
                       DefaultValuedAttr<F64Attr,
                           "::mlir::rpe::kSwinMaskValue">:$mask_value,
                       OptionalAttr<DenseI64ArrayAttr>:$image,
                       Rpe_DefaultPaddingOrder:$padding,
                       Rpe_DefaultPartition:$partition,
                       UnitAttr:$packed_qkv,
                       UnitAttr:$class_token);
  let results = (outs Variadic<AnyRankedTensor>:$result);
  // Both derive the result from `init` (one result on tensors, none on
  // memrefs) and the mask value defaults to Swin's, so that a call states
  // the attention it builds and nothing the verifier could infer.
  let builders = [
    // Windows layout. A non-empty `resolution` and `shift` are the geometry
    // of the shifted-window mask (rpe.shift_mask) that the attention adds;
    // without them there is no mask. `classToken`: BEiT's bias.
    OpBuilder<(ins "Value":$query, "Value":$key, "Value":$value,
                   "Value":$table, "Value":$init,
                   "ArrayRef<int64_t>":$window, "float":$scale,
                   CArg<"ArrayRef<int64_t>", "{}">:$resolution,
                   CArg<"ArrayRef<int64_t>", "{}">:$shift,
                   CArg<"double", "::mlir::rpe::kSwinMaskValue">:$maskValue,
                   CArg<"Value", "nullptr">:$logitScale,
                   CArg<"Value", "nullptr">:$mask,
                   CArg<"bool", "false">:$classToken)>,
    // Token layout on `image`-sized maps; the mask (a non-zero `shift`) is
    // built on the image padded to whole windows, which the builder
    // computes. `packedQkv`: query, key and value are one `[batch, L, 3C]`
    // map. `partition`: Swin's blocks or MaxViT's grid.
    OpBuilder<(ins "Value":$query, "Value":$key, "Value":$value,
                   "Value":$table, "ValueRange":$paddingValues,
                   "Value":$init, "ArrayRef<int64_t>":$window,
                   "float":$scale, "ArrayRef<int64_t>":$image,
                   "ArrayRef<int64_t>":$shift,
                   CArg<"PaddingOrder", "PaddingOrder::PadThenShift">:$padding,
                   CArg<"double", "::mlir::rpe::kSwinMaskValue">:$maskValue,
                   CArg<"bool", "false">:$packedQkv,
                   CArg<"Value", "nullptr">:$logitScale,
                   CArg<"Partition", "Partition::Block">:$partition)>
  ];
  let assemblyFormat = [{
    `ins` `(` $query `,` $key `,` $value `,` $table `:` type($query) `,`
      type($key) `,` type($value) `,` type($table) `)`
    (`pads` `(` $padding_values^ `:` type($padding_values) `)`)?
    (`logit_scale` `(` $logit_scale^ `:` type($logit_scale) `)`)?
    (`mask` `(` $mask^ `:` type($mask) `)`)?
    `outs` `(` $init `:` type($init) `)`
    attr-dict (`->` type($result)^)?
  }];
  let extraClassDeclaration = [{
    MutableOperandRange getDpsInitsMutable() { return getInitMutable(); }
    ::mlir::Value getAttentionOutput() { return getInit(); }
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// rpe.fused_window_attention_grad
//===----------------------------------------------------------------------===//

def Rpe_FusedWindowAttentionGradOp : Rpe_Op<"fused_window_attention_grad", [
    Rpe_FusedAttentionOpInterface,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "Gradients of a fused window attention: q, k, v and the "
                "compact table";
  let description = [{
    The backward of `rpe.fused_window_attention` with the same attributes
    and layouts: given the forward's operands, its output `out` and the
    output's gradient `dout` (both in the output's layout), it writes the
    gradients of q, k, v (in their layout) and of the compact table:

    ```
    P       = softmax_j(S),  S[i, j] = scale q_i · k_j + table[idx(i, j), h]
                                        (+ mask_value between regions)
    D_i     = dout_i · out_i
    dS[i,j] = P[i, j] (dout_i · v_j - D_i)
    dq_i    = scale sum_j dS[i, j] k_j      dv_j = sum_i P[i, j] dout_i
    dk_j    = scale sum_i dS[i, j] q_i
    dtable[t, h] = sum over windows and (i, j) with idx(i, j) = t of dS[i, j]
    ```

    With `class_token` (BEiT), `dtable`'s three rows past Swin's `T` sum
    `dS` over the class token's row (`T`), its column (`T + 1`) and their
    corner (`T + 2`).

    `dtable` is overwritten with the sum over every window of the operands,
    in the table's type or in f32 (a sum of many terms, kept in f32 where
    the table is f16 or bf16). The mask is a constant and has no gradient. In the token layout the
    shift, padding and partition are addressing, and so is their adjoint:
    every image token is one window token, whose gradient row it receives;
    padded tokens are zeros (no padding values) and get no gradient. With
    `packed_qkv`, q, k, v are one `[batch, L, 3C]` map and so are dq, dk,
    dv.

    P is recomputed from q, k and the table (a window's scores fit in
    cache), so the forward saves nothing but its output. The op is on
    buffers only: it is built by `swin-aot --grad` and lowered by
    `rpe-lower-fused-attention`: the CPU tiles kernel (f32), or with
    `strategy=warps` (and on the GPU) the warp program of the GPU backward,
    which sums the table's gradient without atomics in a fixed order.

    Example:

    ```mlir
    rpe.fused_window_attention_grad
        ins(%q, %k, %v, %table, %out, %dout
            : memref<?x3x49x32xf32>, memref<?x3x49x32xf32>,
              memref<?x3x49x32xf32>, memref<169x3xf32>,
              memref<?x49x96xf32>, memref<?x49x96xf32>)
        outs(%dq, %dk, %dv, %dtable
             : memref<?x3x49x32xf32>, memref<?x3x49x32xf32>,
               memref<?x3x49x32xf32>, memref<169x3xf32>)
        {window = array<i64: 7, 7>, scale = 0.1767767 : f32,
         resolution = array<i64: 56, 56>, shift = array<i64: 3, 3>}
    ```
  }];
  let arguments = (ins AnyMemRef:$query, AnyMemRef:$key, AnyMemRef:$value,
                       AnyMemRef:$table, AnyMemRef:$out, AnyMemRef:$dout,
                       AnyMemRef:$dquery, AnyMemRef:$dkey, AnyMemRef:$dvalue,
                       AnyMemRef:$dtable,
                       DenseI64ArrayAttr:$window, F32Attr:$scale,
                       OptionalAttr<DenseI64ArrayAttr>:$resolution,
                       OptionalAttr<DenseI64ArrayAttr>:$shift,
                       DefaultValuedAttr<F64Attr,
                           "::mlir::rpe::kSwinMaskValue">:$mask_value,
                       OptionalAttr<DenseI64ArrayAttr>:$image,
                       Rpe_DefaultPaddingOrder:$padding,
                       Rpe_DefaultPartition:$partition,
                       UnitAttr:$packed_qkv,
                       UnitAttr:$class_token);
  let assemblyFormat = [{
    `ins` `(` $query `,` $key `,` $value `,` $table `,` $out `,` $dout `:`
      type($query) `,` type($key) `,` type($value) `,` type($table) `,`
      type($out) `,` type($dout) `)`
    `outs` `(` $dquery `,` $dkey `,` $dvalue `,` $dtable `:` type($dquery) `,`
      type($dkey) `,` type($dvalue) `,` type($dtable) `)`
    attr-dict
  }];
  let extraClassDeclaration = [{
    ::mlir::Value getAttentionOutput() { return getOut(); }
    /// Padded tokens are zeros: the gradient of padding rows is not
    /// computed, so the op takes none.
    ::mlir::OperandRange getPaddingValues() {
      return getOperation()->getOperands().take_front(0);
    }
    /// The gradient of the cosine form is not implemented: no logit scale.
    ::mlir::Value getLogitScale() { return nullptr; }
    /// Nor that of an explicit mask operand.
    ::mlir::Value getMask() { return nullptr; }
  }];
  let hasVerifier = 1;
}


//===----------------------------------------------------------------------===//
// rpe.matmul
//===----------------------------------------------------------------------===//

def Rpe_MatmulOp : Rpe_Op<"matmul", [
    DestinationStyleOpInterface, SingleBlock,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DeclareOpInterfaceMethods<BufferizableOpInterface,
        ["bufferizesToMemoryRead", "bufferizesToMemoryWrite",
         "getAliasingValues", "bufferize"]>]> {
  let summary = "A matrix product with weights packed in panels and an "
                "elementwise epilogue";
  let description = [{
    The dense linear algebra of a model (its linear layers and patch
    merging) in the form its CPU kernel computes it:

    ```
    out[m, n] = epilogue(sum_k lhs[m, k] * B[k, n], e_0[map_0(m, n)], ...)
    ```

    `lhs` is `[M, K]`. The weights `B` (`K x N`, `N` the destination's last
    extent) come as `rhs` in one of four layouts:

    * packed `[P, K, NR]`: `rhs[p, k, r] = B[k, p * NR + r]`, zero past
      `N`, so that the kernel's register tile reads `NR` consecutive
      columns of a row of `B` at one address. `rpe-form-matmul` packs
      constant weights so at compile time;
    * packed in pairs of `k`, bf16 only, `[P, ceil(K / 2), NR, 2]`:
      `rhs[p, j, r, h] = B[2 j + h, p * NR + r]`, zero past `N` and, for an
      odd `K`, at `k = K`: the two bf16 of one f32 lane of an AVX512-BF16
      dot product (`vdpbf16ps`) are consecutive `k` of one column. Only
      the `bf16-dot` kernel reads it (`rpe-form-matmul` packs constant bf16
      weights so with `bf16-dot`);
    * `[K, N]`, or `[N, K]` with `transpose_rhs` (a linear layer's
      weight): packed by the kernel at run time.

    The `epilogue` region maps the product's value (its first argument) and
    one element of each `epilogue_inputs` operand to the result element: a
    bias, GELU, a residual, all applied while the product is in registers.
    Its ops must be elementwise (arith, math): the kernel runs them on
    vectors. `epilogue_maps` give each input's element for `(m, n)`; a
    result is `m`, `n` or `0`. The product does not accumulate into the
    destination's contents.

    It is produced by `rpe-form-matmul` from linalg contractions and their
    elementwise consumers, bufferized like any destination-style op and
    lowered, after bufferization, by `rpe-lower-matmul`.

    Example:

    ```mlir
    %y = rpe.matmul ins(%x, %w : tensor<3136x96xf32>, tensor<8x96x48xf32>)
                    epilogue(%bias : tensor<384xf32>)
                    outs(%init : tensor<3136x384xf32>)
                    {epilogue_maps = [affine_map<(m, n) -> (n)>]} {
    ^bb0(%acc: f32, %b: f32):
      %0 = arith.addf %acc, %b : f32
      rpe.yield %0 : f32
    } -> tensor<3136x384xf32>
    ```
  }];
  let arguments = (ins AnyShaped:$lhs, AnyShaped:$rhs,
                       Variadic<AnyShaped>:$epilogue_inputs,
                       AnyShaped:$init,
                       DefaultValuedAttr<AffineMapArrayAttr, "{}">:$epilogue_maps,
                       UnitAttr:$transpose_rhs);
  let results = (outs Variadic<AnyRankedTensor>:$result);
  let regions = (region SizedRegion<1>:$epilogue);
  let assemblyFormat = [{
    `ins` `(` $lhs `,` $rhs `:` type($lhs) `,` type($rhs) `)`
    (`epilogue` `(` $epilogue_inputs^ `:` type($epilogue_inputs) `)`)?
    `outs` `(` $init `:` type($init) `)`
    attr-dict-with-keyword $epilogue (`->` type($result)^)?
  }];
  let builders = [
    // An identity epilogue: out = lhs · B. On tensors the result is
    // `init`'s type; on memrefs there is none.
    OpBuilder<(ins "Value":$lhs, "Value":$rhs, "Value":$init,
                   CArg<"bool", "false">:$transposeRhs)>
  ];
  let extraClassDeclaration = [{
    MutableOperandRange getDpsInitsMutable() { return getInitMutable(); }
    /// Whether `rhs` is packed in panels ([P, K, NR] or, in pairs of k,
    /// [P, ceil(K / 2), NR, 2]).
    bool hasPackedRhs();
    /// Whether `rhs` is packed in panels of pairs of k
    /// ([P, ceil(K / 2), NR, 2]).
    bool hasPairedRhs();
    /// The panel width NR of a packed `rhs`.
    int64_t getPanelWidth();
    /// K, and N (the destination's last extent).
    int64_t getReductionSize();
    int64_t getColumns();
  }];
  let hasVerifier = 1;
}

def Rpe_YieldOp : Rpe_Op<"yield", [Pure, Terminator,
                                   HasParent<"MatmulOp">]> {
  let summary = "The result of rpe.matmul's epilogue";
  let description = [{
    Ends the `epilogue` region of `rpe.matmul` with the element it computes,
    of the destination's element type.
  }];
  let arguments = (ins AnyType:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

#endif // RPE_OPS_TD
