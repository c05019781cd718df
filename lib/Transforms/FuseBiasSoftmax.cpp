//===- FuseBiasSoftmax.cpp - rpe-fuse-bias-softmax ------------------------===//
//
// window_attention(q, k, v, lookup(table) [, shift_mask]) ->
// fused_window_attention(q, k, v, table): the bias gather and the mask move
// inside the attention, where the lowering computes them from the compact
// table and the region labels instead of reading N x N tensors.
//
// On feature maps, window_reverse(window_attention(window_partition(q), ...))
// fuses whole: the fused op then reads q, k, v and writes the output in
// image order, the shift, padding and partition becoming addressing.
//
// Only rpe ops fuse: attention spelled in linalg is recognised by
// rpe-raise-window-attention, which raises it into these ops first.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Passes.h"
#include "Rpe/WindowGeometry.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::rpe {
#define GEN_PASS_DEF_RPEFUSEBIASSOFTMAX
#include "Rpe/Passes.h.inc"
} // namespace mlir::rpe

using namespace mlir;
using namespace mlir::rpe;

namespace {

static bool isZeroShift(ArrayRef<int64_t> shift) {
  return llvm::all_of(shift, [](int64_t s) { return s == 0; });
}

/// What the bias and the mask of an attention fuse into: the table, and the
/// shift mask's geometry when there is a (non-trivial) one.
struct FusibleBias {
  LookupOp lookup;
  ShiftMaskOp shiftMask; // null: no mask, or a mask of shift 0
  /// A mask that is not rpe.shift_mask (a runtime one, or any other
  /// constant): read by the kernel as it is (windows layout only).
  Value explicitMask;

  // The mask as the fused op's builders take it: no geometry and Swin's
  // value when there is none.
  ArrayRef<int64_t> maskResolution() {
    return shiftMask ? shiftMask.getResolution() : ArrayRef<int64_t>();
  }
  ArrayRef<int64_t> maskShift() {
    return shiftMask ? shiftMask.getShift() : ArrayRef<int64_t>();
  }
  double maskValue() {
    return shiftMask ? shiftMask.getMaskValue().convertToDouble()
                     : kSwinMaskValue;
  }
};

static FailureOr<FusibleBias> matchBias(WindowAttentionOp op,
                                        PatternRewriter &rewriter,
                                        int64_t maxScratchBytes,
                                        bool allowExplicitMask = false) {
  FusibleBias bias;
  bias.lookup = op.getBias().getDefiningOp<LookupOp>();
  if (!bias.lookup)
    return rewriter.notifyMatchFailure(op, "bias is not an rpe.lookup");
  // BEiT's class token: global attention over the grid, never masked.
  if (bias.lookup.getClassToken() && (op.getMask() || op.getLogitScale()))
    return rewriter.notifyMatchFailure(
        op, "the fused class token takes no mask and no logit scale");
  if (Value mask = op.getMask()) {
    bias.shiftMask = mask.getDefiningOp<ShiftMaskOp>();
    if (!bias.shiftMask) {
      auto maskType = cast<ShapedType>(mask.getType());
      if (!allowExplicitMask || ShapedType::isDynamic(maskType.getDimSize(0)))
        return rewriter.notifyMatchFailure(
            op, "mask is not an rpe.shift_mask (nor, in the windows layout, "
                "a mask of a static number of windows)");
      bias.explicitMask = mask;
    }
    if (bias.shiftMask && bias.shiftMask.getWindow() != bias.lookup.getWindow())
      return rewriter.notifyMatchFailure(op, "mask and bias windows differ");
    if (bias.shiftMask && isZeroShift(bias.shiftMask.getShift()))
      bias.shiftMask = nullptr;
  }
  // The kernel keeps k transposed (d x N, padded) per thread.
  if (op.getHeadDim() * op.getNumTokens() * 2 * 4 > maxScratchBytes)
    return rewriter.notifyMatchFailure(op, "scratch would be too large");
  return bias;
}

static Value emptyLike(PatternRewriter &rewriter, Location loc,
                       RankedTensorType type, Value dynamicSource) {
  SmallVector<Value> dynamicSizes;
  if (type.isDynamicDim(0))
    dynamicSizes.push_back(
        tensor::DimOp::create(rewriter, loc, dynamicSource, 0));
  return tensor::EmptyOp::create(rewriter, loc, type, dynamicSizes);
}

/// Windows layout: the attention alone.
struct FuseWindowAttention : public OpRewritePattern<WindowAttentionOp> {
  FuseWindowAttention(MLIRContext *context, int64_t maxScratchBytes)
      : OpRewritePattern(context), maxScratchBytes(maxScratchBytes) {}

  LogicalResult matchAndRewrite(WindowAttentionOp op,
                                PatternRewriter &rewriter) const override {
    FailureOr<FusibleBias> bias =
        matchBias(op, rewriter, maxScratchBytes, /*allowExplicitMask=*/true);
    if (failed(bias))
      return failure();
    Value init = emptyLike(rewriter, op.getLoc(), op.getResult().getType(),
                           op.getQuery());
    rewriter.replaceOpWithNewOp<FusedWindowAttentionOp>(
        op, op.getQuery(), op.getKey(), op.getValue(), bias->lookup.getTable(),
        init, bias->lookup.getWindow(), op.getEffectiveScale(),
        bias->maskResolution(), bias->maskShift(), bias->maskValue(),
        op.getLogitScale(), bias->explicitMask, bias->lookup.getClassToken());
    return success();
  }

  int64_t maxScratchBytes;
};

/// The `[batch, L, 3C]` map whose channel slices [0, C), [C, 2C), [2C, 3C)
/// are q, k and v (the qkv projection's output), or null.
static Value matchPackedQkv(ArrayRef<Value> maps) {
  Value source;
  for (auto [part, map] : llvm::enumerate(maps)) {
    auto slice = map.getDefiningOp<tensor::ExtractSliceOp>();
    if (!slice || (source && slice.getSource() != source))
      return nullptr;
    source = slice.getSource();
    RankedTensorType sourceType = slice.getSourceType();
    auto type = cast<RankedTensorType>(map.getType());
    if (sourceType.getRank() != 3 || type.getRank() != 3 ||
        ShapedType::isDynamic(type.getDimSize(2)))
      return nullptr;
    int64_t channels = type.getDimSize(2);
    SmallVector<int64_t> offsets = {0, 0,
                                    static_cast<int64_t>(part) * channels};
    if (sourceType.getDimSize(2) != 3 * channels ||
        slice.getStaticOffsets() != ArrayRef<int64_t>(offsets) ||
        !llvm::all_of(slice.getStaticStrides(),
                      [](int64_t s) { return s == 1; }) ||
        slice.getStaticSizes().drop_front() !=
            ArrayRef<int64_t>{type.getDimSize(1), channels})
      return nullptr;
    // All images: a static batch equal to the source's, or its tensor.dim.
    OpFoldResult batch = slice.getMixedSizes()[0];
    if (auto value = dyn_cast<Value>(batch)) {
      auto dim = value.getDefiningOp<tensor::DimOp>();
      std::optional<int64_t> index =
          dim ? getConstantIntValue(dim.getIndex()) : std::nullopt;
      if (!dim || dim.getSource() != source || index != 0)
        return nullptr;
    } else if (getConstantIntValue(batch) != sourceType.getDimSize(0)) {
      return nullptr;
    }
  }
  return source;
}

/// Token layout: reverse(attention(partition(q), partition(k),
/// partition(v))) with one geometry throughout.
struct FuseFeatureMapAttention : public OpRewritePattern<WindowReverseOp> {
  FuseFeatureMapAttention(MLIRContext *context, int64_t maxScratchBytes)
      : OpRewritePattern(context, /*benefit=*/2),
        maxScratchBytes(maxScratchBytes) {}

  LogicalResult matchAndRewrite(WindowReverseOp reverse,
                                PatternRewriter &rewriter) const override {
    auto attention = reverse.getInput().getDefiningOp<WindowAttentionOp>();
    if (!attention || !attention.hasMergedHeadsResult())
      return rewriter.notifyMatchFailure(reverse, "not a merged attention");
    auto sameGeometry = [&](WindowPartitionOp partition) {
      return partition &&
             partition.getResolution() == reverse.getResolution() &&
             partition.getWindow() == reverse.getWindow() &&
             partition.getShift() == reverse.getShift() &&
             partition.getPadding() == reverse.getPadding() &&
             partition.getPartition() == reverse.getPartition();
    };
    SmallVector<WindowPartitionOp> partitions;
    for (Value operand :
         {attention.getQuery(), attention.getKey(), attention.getValue()})
      partitions.push_back(operand.getDefiningOp<WindowPartitionOp>());
    if (!llvm::all_of(partitions, sameGeometry))
      return rewriter.notifyMatchFailure(reverse, "q, k, v not partitioned "
                                                  "like the output");
    FailureOr<FusibleBias> bias =
        matchBias(attention, rewriter, maxScratchBytes);
    if (failed(bias))
      return failure();
    if (bias->lookup.getWindow() != reverse.getWindow() ||
        bias->lookup.getClassToken())
      return rewriter.notifyMatchFailure(reverse, "bias of another window");
    // The shift mask must be the partition's, built on the padded map; a
    // shift without a mask is not Swin's attention.
    SmallVector<int64_t> padded =
        getPaddedResolution(reverse.getResolution(), reverse.getWindow());
    bool shifted = !isZeroShift(reverse.getShift());
    if (shifted != static_cast<bool>(bias->shiftMask))
      return rewriter.notifyMatchFailure(reverse, "mask does not match shift");
    if (bias->shiftMask &&
        (bias->shiftMask.getResolution() != ArrayRef<int64_t>(padded) ||
         bias->shiftMask.getShift() != reverse.getShift()))
      return rewriter.notifyMatchFailure(reverse, "mask of another shift");

    Location loc = reverse.getLoc();
    SmallVector<Value> pads;
    if (llvm::any_of(partitions,
                     [](WindowPartitionOp p) { return p.getPad(); })) {
      auto inputType = partitions[0].getInput().getType();
      auto padType = RankedTensorType::get({inputType.getDimSize(2)},
                                           inputType.getElementType());
      for (WindowPartitionOp partition : partitions)
        pads.push_back(
            partition.getPad()
                ? partition.getPad()
                : arith::ConstantOp::create(
                      rewriter, loc,
                      DenseElementsAttr::get(
                          padType,
                          rewriter.getFloatAttr(padType.getElementType(), 0.0)))
                      .getResult());
    }
    RankedTensorType resultType = reverse.getResult().getType();
    Value init = emptyLike(rewriter, loc, resultType, partitions[0].getInput());
    SmallVector<Value> maps = {partitions[0].getInput(),
                               partitions[1].getInput(),
                               partitions[2].getInput()};
    // q, k, v sliced from one qkv projection output: read it as it is.
    Value packed = matchPackedQkv(maps);
    if (packed)
      maps.assign(3, packed);
    rewriter.replaceOpWithNewOp<FusedWindowAttentionOp>(
        reverse, maps[0], maps[1], maps[2], bias->lookup.getTable(), pads, init,
        bias->lookup.getWindow(), attention.getEffectiveScale(),
        /*image=*/reverse.getResolution(), reverse.getShift(),
        reverse.getPadding(), bias->maskValue(),
        /*packedQkv=*/static_cast<bool>(packed), attention.getLogitScale(),
        reverse.getPartition());
    return success();
  }

  int64_t maxScratchBytes;
};

struct RpeFuseBiasSoftmaxPass
    : public rpe::impl::RpeFuseBiasSoftmaxBase<RpeFuseBiasSoftmaxPass> {
  using Base::Base;
  void runOnOperation() override {
    // No folding: it would turn the shift masks the patterns match into
    // anonymous constants.
    GreedyRewriteConfig config;
    config.enableFolding(false);
    // Whole feature-map attentions first: fusing their inner attention
    // alone would hide the pattern.
    RewritePatternSet featureMaps(&getContext());
    featureMaps.add<FuseFeatureMapAttention>(&getContext(), maxScratchBytes);
    if (failed(applyPatternsGreedily(getOperation(), std::move(featureMaps),
                                     config)))
      return signalPassFailure();
    RewritePatternSet windows(&getContext());
    windows.add<FuseWindowAttention>(&getContext(), maxScratchBytes);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(windows), config)))
      signalPassFailure();
  }
};

} // namespace
