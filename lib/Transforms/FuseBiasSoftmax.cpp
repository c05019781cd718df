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
//===----------------------------------------------------------------------===//

#include "Rpe/Passes.h"
#include "Rpe/WindowGeometry.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
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
};

static FailureOr<FusibleBias> matchBias(WindowAttentionOp op,
                                        PatternRewriter &rewriter,
                                        int64_t maxScratchBytes) {
  FusibleBias bias;
  bias.lookup = op.getBias().getDefiningOp<LookupOp>();
  if (!bias.lookup)
    return rewriter.notifyMatchFailure(op, "bias is not an rpe.lookup");
  if (Value mask = op.getMask()) {
    bias.shiftMask = mask.getDefiningOp<ShiftMaskOp>();
    if (!bias.shiftMask)
      return rewriter.notifyMatchFailure(op, "mask is not an rpe.shift_mask");
    if (bias.shiftMask.getWindow() != bias.lookup.getWindow())
      return rewriter.notifyMatchFailure(op, "mask and bias windows differ");
    if (isZeroShift(bias.shiftMask.getShift()))
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
    dynamicSizes.push_back(tensor::DimOp::create(rewriter, loc, dynamicSource, 0));
  return tensor::EmptyOp::create(rewriter, loc, type, dynamicSizes);
}

/// Windows layout: the attention alone.
struct FuseWindowAttention : public OpRewritePattern<WindowAttentionOp> {
  FuseWindowAttention(MLIRContext *context, int64_t maxScratchBytes)
      : OpRewritePattern(context), maxScratchBytes(maxScratchBytes) {}

  LogicalResult matchAndRewrite(WindowAttentionOp op,
                                PatternRewriter &rewriter) const override {
    FailureOr<FusibleBias> bias = matchBias(op, rewriter, maxScratchBytes);
    if (failed(bias))
      return failure();
    RankedTensorType resultType = op.getResult().getType();
    Value init = emptyLike(rewriter, op.getLoc(), resultType, op.getQuery());
    DenseI64ArrayAttr resolution, shift;
    if (bias->shiftMask) {
      resolution = bias->shiftMask.getResolutionAttr();
      shift = bias->shiftMask.getShiftAttr();
    }
    rewriter.replaceOpWithNewOp<FusedWindowAttentionOp>(
        op, TypeRange{resultType}, op.getQuery(), op.getKey(), op.getValue(),
        bias->lookup.getTable(), ValueRange{}, init,
        bias->lookup.getWindowAttr(),
        rewriter.getF32FloatAttr(op.getEffectiveScale()), resolution, shift,
        bias->shiftMask ? bias->shiftMask.getMaskValueAttr()
                        : rewriter.getF64FloatAttr(-100.0),
        /*image=*/nullptr, /*padding=*/nullptr);
    return success();
  }

  int64_t maxScratchBytes;
};

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
      return partition && partition.getResolution() == reverse.getResolution() &&
             partition.getWindow() == reverse.getWindow() &&
             partition.getShift() == reverse.getShift() &&
             partition.getPadding() == reverse.getPadding();
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
    if (bias->lookup.getWindow() != reverse.getWindow())
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
    if (llvm::any_of(partitions, [](WindowPartitionOp p) { return p.getPad(); })) {
      auto inputType = partitions[0].getInput().getType();
      auto padType = RankedTensorType::get({inputType.getDimSize(2)},
                                           inputType.getElementType());
      for (WindowPartitionOp partition : partitions)
        pads.push_back(partition.getPad()
                           ? partition.getPad()
                           : arith::ConstantOp::create(
                                 rewriter, loc,
                                 DenseElementsAttr::get(
                                     padType, rewriter.getFloatAttr(
                                                  padType.getElementType(), 0.0)))
                                 .getResult());
    }
    RankedTensorType resultType = reverse.getResult().getType();
    Value init =
        emptyLike(rewriter, loc, resultType, partitions[0].getInput());
    rewriter.replaceOpWithNewOp<FusedWindowAttentionOp>(
        reverse, TypeRange{resultType}, partitions[0].getInput(),
        partitions[1].getInput(), partitions[2].getInput(),
        bias->lookup.getTable(), pads, init, bias->lookup.getWindowAttr(),
        rewriter.getF32FloatAttr(attention.getEffectiveScale()),
        rewriter.getDenseI64ArrayAttr(padded), reverse.getShiftAttr(),
        bias->shiftMask ? bias->shiftMask.getMaskValueAttr()
                        : rewriter.getF64FloatAttr(-100.0),
        reverse.getResolutionAttr(), reverse.getPaddingAttr());
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
    if (failed(applyPatternsGreedily(getOperation(), std::move(windows),
                                     config)))
      signalPassFailure();
  }
};

} // namespace
