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
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Matchers.h"
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
        op.getLogitScale(), bias->explicitMask);
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
        /*packedQkv=*/static_cast<bool>(packed), attention.getLogitScale());
    return success();
  }

  int64_t maxScratchBytes;
};

//===----------------------------------------------------------------------===//
// The attention spelled out in linalg
//===----------------------------------------------------------------------===//

/// The affine map over `numLoops` loops selecting `dims`.
static AffineMap dimsMap(MLIRContext *context, unsigned numLoops,
                         ArrayRef<unsigned> dims) {
  SmallVector<AffineExpr> exprs;
  for (unsigned d : dims)
    exprs.push_back(getAffineDimExpr(d, context));
  return AffineMap::get(numLoops, 0, exprs, context);
}

static bool isZeroFill(Value init) {
  auto fill = init.getDefiningOp<linalg::FillOp>();
  APFloat zero(0.0f);
  return fill && matchPattern(fill.getInputs()[0], m_ConstantFloat(&zero)) &&
         zero.isZero();
}

/// Matches a 5-loop contraction `out[o] += lhs[l] * rhs[r]` (reduction on
/// the last loop) from a zero-filled init, where one factor may carry a
/// constant scale: `out += (lhs * c) * rhs`. Returns the scale (1 when
/// none), or nothing.
static std::optional<float> matchContraction(linalg::GenericOp op,
                                             ArrayRef<unsigned> lhsDims,
                                             ArrayRef<unsigned> rhsDims,
                                             ArrayRef<unsigned> outDims) {
  MLIRContext *context = op.getContext();
  using utils::IteratorType;
  if (op.getNumLoops() != 5 || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1 ||
      op.getIteratorTypesArray() !=
          SmallVector<IteratorType>{
              IteratorType::parallel, IteratorType::parallel,
              IteratorType::parallel, IteratorType::parallel,
              IteratorType::reduction} ||
      op.getIndexingMapsArray() !=
          SmallVector<AffineMap>{dimsMap(context, 5, lhsDims),
                                 dimsMap(context, 5, rhsDims),
                                 dimsMap(context, 5, outDims)} ||
      !isZeroFill(op.getDpsInits()[0]))
    return std::nullopt;
  Block &body = op.getRegion().front();
  Value lhs = body.getArgument(0), rhs = body.getArgument(1),
        acc = body.getArgument(2);
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto sum = yield.getValues()[0].getDefiningOp<arith::AddFOp>();
  if (!sum)
    return std::nullopt;
  Value product = sum.getLhs() == acc ? sum.getRhs() : sum.getLhs();
  if ((sum.getLhs() == acc) == (sum.getRhs() == acc))
    return std::nullopt;
  auto mul = product.getDefiningOp<arith::MulFOp>();
  if (!mul)
    return std::nullopt;
  float scale = 1.0f;
  auto operandIs = [&](Value v, Value arg) -> bool {
    if (v == arg)
      return true;
    // A scaled factor: arg * c or c * arg.
    auto scaled = v.getDefiningOp<arith::MulFOp>();
    APFloat c(0.0f);
    if (!scaled)
      return false;
    if (scaled.getLhs() == arg &&
        matchPattern(scaled.getRhs(), m_ConstantFloat(&c))) {
      scale *= c.convertToFloat();
      return true;
    }
    if (scaled.getRhs() == arg &&
        matchPattern(scaled.getLhs(), m_ConstantFloat(&c))) {
      scale *= c.convertToFloat();
      return true;
    }
    return false;
  };
  if (!((operandIs(mul.getLhs(), lhs) && operandIs(mul.getRhs(), rhs)) ||
        (operandIs(mul.getLhs(), rhs) && operandIs(mul.getRhs(), lhs))))
    return std::nullopt;
  return scale;
}

/// Matches `out = scores + bias[h, i, j] (+ mask[b mod nW, i, j])` and
/// returns the bias and mask operands.
static std::optional<std::pair<Value, Value>> matchBiasAdd(linalg::GenericOp op,
                                                           Value scores) {
  MLIRContext *context = op.getContext();
  if (op.getNumLoops() != 4 || op.getNumParallelLoops() != 4 ||
      op.getNumDpsInits() != 1 || op.getNumDpsInputs() < 2 ||
      op.getNumDpsInputs() > 3 ||
      op.getIndexingMapsArray().back() != dimsMap(context, 4, {0, 1, 2, 3}))
    return std::nullopt;
  Value bias, mask;
  AffineMap maskMap;
  bool hasScores = false;
  for (OpOperand *input : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(input);
    if (input->get() == scores && map == dimsMap(context, 4, {0, 1, 2, 3})) {
      hasScores = true;
    } else if (map == dimsMap(context, 4, {1, 2, 3})) {
      bias = input->get();
    } else if (map.getNumResults() == 3 &&
               map.getResult(1) == getAffineDimExpr(2, context) &&
               map.getResult(2) == getAffineDimExpr(3, context)) {
      mask = input->get(); // (b mod nW, i, j): checked below
      maskMap = map;
    } else {
      return std::nullopt;
    }
  }
  if (!hasScores || !bias)
    return std::nullopt;
  // The body adds up its inputs, nothing else.
  Block &body = op.getRegion().front();
  SmallVector<Value> pending = {
      cast<linalg::YieldOp>(body.getTerminator()).getValues()[0]};
  unsigned leaves = 0;
  while (!pending.empty()) {
    Value v = pending.pop_back_val();
    if (auto add = v.getDefiningOp<arith::AddFOp>()) {
      pending.append({add.getLhs(), add.getRhs()});
      continue;
    }
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg || arg.getOwner() != &body ||
        arg.getArgNumber() >= op.getNumDpsInputs())
      return std::nullopt;
    ++leaves;
  }
  if (leaves != op.getNumDpsInputs())
    return std::nullopt;
  if (mask) {
    auto shiftMask = mask.getDefiningOp<ShiftMaskOp>();
    if (!shiftMask)
      return std::nullopt;
    int64_t perImage =
        getNumWindows(shiftMask.getResolution(), shiftMask.getWindow());
    if (maskMap.getResult(0) != getAffineDimExpr(0, context) % perImage)
      return std::nullopt;
  }
  return std::make_pair(bias, mask);
}

/// `P = softmax(q kᵀ · scale + bias (+ mask))`, `out = P v`, all in linalg
/// on `[B, H, N, *]` f32 tensors with the bias an rpe.lookup: the form a
/// framework's attention takes once lowered. Anchored on the `P v`
/// contraction, which the fused op replaces (head-major result).
struct FuseSpelledOutAttention : public OpRewritePattern<linalg::GenericOp> {
  FuseSpelledOutAttention(MLIRContext *context, int64_t maxScratchBytes)
      : OpRewritePattern(context), maxScratchBytes(maxScratchBytes) {}

  LogicalResult matchAndRewrite(linalg::GenericOp output,
                                PatternRewriter &rewriter) const override {
    // out[b, h, i, e] += P[b, h, i, j] * v[b, h, j, e]: loops (b, h, i, e, j).
    std::optional<float> one =
        matchContraction(output, {0, 1, 2, 4}, {0, 1, 4, 3}, {0, 1, 2, 3});
    if (!one || *one != 1.0f)
      return rewriter.notifyMatchFailure(output, "not P · v");
    auto softmax = output.getDpsInputs()[0].getDefiningOp<linalg::SoftmaxOp>();
    if (!softmax || softmax.getDimension() != 3)
      return rewriter.notifyMatchFailure(output,
                                         "P is not a softmax over keys");
    auto biasAdd = softmax.getInput().getDefiningOp<linalg::GenericOp>();
    if (!biasAdd || biasAdd.getNumDpsInputs() < 2)
      return rewriter.notifyMatchFailure(output, "no bias before the softmax");
    auto scoresOp =
        biasAdd.getDpsInputs()[0].getDefiningOp<linalg::GenericOp>();
    if (!scoresOp)
      for (Value input : biasAdd.getDpsInputs())
        if ((scoresOp = input.getDefiningOp<linalg::GenericOp>()))
          break;
    if (!scoresOp)
      return rewriter.notifyMatchFailure(output, "no scores");
    // scores[b, h, i, j] += (q[b, h, i, e] * scale) * k[b, h, j, e].
    std::optional<float> scale =
        matchContraction(scoresOp, {0, 1, 2, 4}, {0, 1, 3, 4}, {0, 1, 2, 3});
    if (!scale)
      return rewriter.notifyMatchFailure(output, "scores are not q · kᵀ");
    auto terms = matchBiasAdd(biasAdd, scoresOp.getResult(0));
    if (!terms)
      return rewriter.notifyMatchFailure(output, "not scores + bias (+ mask)");
    auto lookup = terms->first.getDefiningOp<LookupOp>();
    if (!lookup)
      return rewriter.notifyMatchFailure(output, "bias is not an rpe.lookup");
    ShiftMaskOp shiftMask =
        terms->second ? terms->second.getDefiningOp<ShiftMaskOp>() : nullptr;
    if (shiftMask && shiftMask.getWindow() != lookup.getWindow())
      return rewriter.notifyMatchFailure(output, "mask of another window");
    Value q = scoresOp.getDpsInputs()[0], k = scoresOp.getDpsInputs()[1],
          v = output.getDpsInputs()[1];
    auto qType = cast<RankedTensorType>(q.getType());
    if (!qType.getElementType().isF32() || qType.getRank() != 4 ||
        qType.getDimSize(2) != getNumTokens(lookup.getWindow()) ||
        qType.getDimSize(3) * qType.getDimSize(2) * 2 * 4 > maxScratchBytes)
      return rewriter.notifyMatchFailure(output, "unsupported shapes");

    auto resultType = cast<RankedTensorType>(output.getResult(0).getType());
    Value init = emptyLike(rewriter, output.getLoc(), resultType, q);
    FusibleBias bias{lookup, shiftMask, /*explicitMask=*/nullptr};
    if (shiftMask && isZeroShift(shiftMask.getShift()))
      bias.shiftMask = nullptr;
    rewriter.replaceOpWithNewOp<FusedWindowAttentionOp>(
        output, q, k, v, lookup.getTable(), init, lookup.getWindow(), *scale,
        bias.maskResolution(), bias.maskShift(), bias.maskValue());
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
    windows.add<FuseWindowAttention, FuseSpelledOutAttention>(&getContext(),
                                                              maxScratchBytes);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(windows), config)))
      signalPassFailure();
  }
};

} // namespace
