//===- FuseBiasSoftmax.cpp - rpe-fuse-bias-softmax ------------------------===//
//
// window_attention(q, k, v, lookup(table) [, shift_mask]) ->
// fused_window_attention(q, k, v, table): the bias gather and the mask move
// inside the attention, where the lowering computes them from the compact
// table and the region labels instead of reading N x N tensors.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Passes.h"
#include "Rpe/WindowGeometry.h"

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

struct FuseLookupIntoAttention : public OpRewritePattern<WindowAttentionOp> {
  FuseLookupIntoAttention(MLIRContext *context, int64_t maxScratchBytes)
      : OpRewritePattern(context), maxScratchBytes(maxScratchBytes) {}

  LogicalResult matchAndRewrite(WindowAttentionOp op,
                                PatternRewriter &rewriter) const override {
    auto lookup = op.getBias().getDefiningOp<LookupOp>();
    if (!lookup)
      return rewriter.notifyMatchFailure(op, "bias is not an rpe.lookup");
    ShiftMaskOp shiftMask;
    if (Value mask = op.getMask()) {
      shiftMask = mask.getDefiningOp<ShiftMaskOp>();
      if (!shiftMask)
        return rewriter.notifyMatchFailure(op, "mask is not an rpe.shift_mask");
      if (shiftMask.getWindow() != lookup.getWindow())
        return rewriter.notifyMatchFailure(op, "mask and bias windows differ");
    }
    // The kernel keeps k transposed (d x N, padded) per thread.
    int64_t scratch = op.getHeadDim() * op.getNumTokens() * 2 * 4;
    if (scratch > maxScratchBytes)
      return rewriter.notifyMatchFailure(op, "scratch would be too large");

    RankedTensorType resultType = op.getResult().getType();
    SmallVector<Value> dynamicSizes;
    if (resultType.isDynamicDim(0))
      dynamicSizes.push_back(
          tensor::DimOp::create(rewriter, op.getLoc(), op.getQuery(), 0));
    Value init = tensor::EmptyOp::create(rewriter, op.getLoc(), resultType,
                                         dynamicSizes);
    DenseI64ArrayAttr resolution, shift;
    // A shift of zero masks nothing.
    if (shiftMask && llvm::all_of(shiftMask.getShift(),
                                  [](int64_t s) { return s == 0; }))
      shiftMask = nullptr;
    if (shiftMask) {
      resolution = shiftMask.getResolutionAttr();
      shift = shiftMask.getShiftAttr();
    }
    rewriter.replaceOpWithNewOp<FusedWindowAttentionOp>(
        op, TypeRange{resultType}, op.getQuery(), op.getKey(), op.getValue(),
        lookup.getTable(), init, lookup.getWindowAttr(),
        rewriter.getF32FloatAttr(op.getEffectiveScale()), resolution, shift,
        shiftMask ? shiftMask.getMaskValueAttr()
                  : rewriter.getF64FloatAttr(-100.0));
    return success();
  }

  int64_t maxScratchBytes;
};

struct RpeFuseBiasSoftmaxPass
    : public rpe::impl::RpeFuseBiasSoftmaxBase<RpeFuseBiasSoftmaxPass> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseLookupIntoAttention>(&getContext(), maxScratchBytes);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
