//===- ConvertRpeToLinalg.cpp - convert-rpe-to-linalg ---------------------===//
//
// The unfused reference lowering of the rpe dialect to linalg on tensors.
// Window attention is written as the sequence of steps a framework runs,
// one linalg.generic per step, on the N x N tile of one (window, head):
//
//   S  = (scale * q) kᵀ             scores
//   S += bias (+ mask[b mod nW])    relative position bias and SW-MSA mask
//   m  = max_j S                    row max
//   E  = exp(S - m), l = sum_j E    exponentials and their row sum
//   P  = E / l                      probabilities
//   O  = P v                        output tile, written in the result layout
//
//===----------------------------------------------------------------------===//

#include "Rpe/FeatureMapAddressing.h"
#include "Rpe/Passes.h"
#include "Rpe/WindowGeometry.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Transforms/DialectConversion.h"

#include <cmath>
#include <limits>

namespace mlir::rpe {
#define GEN_PASS_DEF_CONVERTRPETOLINALG
#include "Rpe/Passes.h.inc"
} // namespace mlir::rpe

using namespace mlir;
using namespace mlir::rpe;

namespace {

using utils::IteratorType;
constexpr IteratorType kPar = IteratorType::parallel;
constexpr IteratorType kRed = IteratorType::reduction;

/// Builds linalg.generic ops over a fixed number of loop dimensions with
/// maps written as lists of loop dimensions, e.g. {0, 2} for (d0, d1, d2) ->
/// (d0, d2).
struct GenericBuilder {
  ImplicitLocOpBuilder &b;
  unsigned numLoops;

  AffineMap map(ArrayRef<unsigned> dims) const {
    return AffineMap::getMultiDimMapWithTargets(numLoops, dims, b.getContext());
  }

  /// One-result generic: `inputs` read through `inputDims`, the result
  /// initialized from `init` and indexed by `outputDims`.
  Value build(ValueRange inputs, ArrayRef<SmallVector<unsigned>> inputDims,
              Value init, ArrayRef<unsigned> outputDims,
              ArrayRef<IteratorType> iterators,
              function_ref<Value(OpBuilder &, Location, ValueRange)> body) {
    SmallVector<AffineMap> maps;
    for (ArrayRef<unsigned> dims : inputDims)
      maps.push_back(map(dims));
    maps.push_back(map(outputDims));
    auto generic = linalg::GenericOp::create(
        b, init.getType(), inputs, init, maps, iterators,
        [&](OpBuilder &nested, Location loc, ValueRange args) {
          linalg::YieldOp::create(nested, loc, body(nested, loc, args));
        });
    return generic.getResult(0);
  }
};

/// Widens a 16-bit float to f32; f32 values pass through.
Value toF32(OpBuilder &b, Location loc, Value v) {
  if (v.getType().isF32())
    return v;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), v);
}

/// A tensor of `shape` and `elementType` filled with `value`.
Value filledTensor(ImplicitLocOpBuilder &b, ArrayRef<int64_t> shape,
                   Type elementType, double value) {
  Value empty = tensor::EmptyOp::create(b, shape, elementType);
  Value fill = arith::ConstantOp::create(b, b.getFloatAttr(elementType, value));
  return linalg::FillOp::create(b, fill, empty).getResult(0);
}

/// The rank-reduced tile `source[lead..., :, :]` of a tensor whose trailing
/// two dimensions are kept.
Value extractTile(ImplicitLocOpBuilder &b, Value source,
                  ArrayRef<OpFoldResult> leadingOffsets) {
  auto type = cast<RankedTensorType>(source.getType());
  int64_t rank = type.getRank();
  SmallVector<OpFoldResult> offsets(leadingOffsets);
  SmallVector<OpFoldResult> sizes(leadingOffsets.size(), b.getIndexAttr(1));
  for (int64_t d = leadingOffsets.size(); d < rank; ++d) {
    offsets.push_back(b.getIndexAttr(0));
    sizes.push_back(b.getIndexAttr(type.getDimSize(d)));
  }
  SmallVector<OpFoldResult> strides(rank, b.getIndexAttr(1));
  auto tileType = RankedTensorType::get(type.getShape().take_back(2),
                                        type.getElementType());
  return tensor::ExtractSliceOp::create(b, tileType, source, offsets, sizes,
                                        strides);
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

/// rpe.relative_index, rpe.shift_mask -> arith.constant.
template <typename OpTy> struct FoldToConstant : public OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    return replaceWithFoldedConstant(rewriter, op);
  }
};

/// rpe.lookup -> linalg.generic gathering table[idx[i, j], h] with `idx` a
/// constant tensor.
struct LowerLookup : public OpRewritePattern<LookupOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(LookupOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    int64_t n = getNumTokens(op.getWindow(), op.getClassToken());
    if (n * n > kMaxConstantElements)
      return op.emitOpError() << "has a " << n << "x" << n
                              << " relative index, too large to materialize "
                                 "(fuse it into the attention instead)";
    auto indexType = RankedTensorType::get({n, n}, b.getI32Type());
    SmallVector<int32_t> index32;
    for (int64_t v : computeRelativeIndex(op.getWindow(), op.getClassToken()))
      index32.push_back(static_cast<int32_t>(v));
    Value index = arith::ConstantOp::create(
        b, DenseElementsAttr::get(indexType, ArrayRef<int32_t>(index32)));

    RankedTensorType resultType = op.getResult().getType();
    Value init = tensor::EmptyOp::create(b, resultType.getShape(),
                                         resultType.getElementType());
    Value table = op.getTable();
    GenericBuilder g{b, 3}; // (h, i, j)
    Value bias =
        g.build(index, {{1, 2}}, init, {0, 1, 2}, {kPar, kPar, kPar},
                [&](OpBuilder &nb, Location loc, ValueRange args) -> Value {
                  Value row = arith::IndexCastOp::create(
                      nb, loc, nb.getIndexType(), args[0]);
                  Value head = linalg::IndexOp::create(nb, loc, 0);
                  return tensor::ExtractOp::create(nb, loc, table,
                                                   ValueRange{row, head});
                });
    rewriter.replaceOp(op, bias);
    return success();
  }
};

/// The feature map of a partition or a reverse.
template <typename OpTy> FeatureMap getFeatureMap(OpTy op) {
  return FeatureMap(op.getResolution(), op.getWindow(), op.getShift(),
                    op.getPadding(), op.getPartition());
}

/// An empty tensor of `type` whose dynamic leading extent (windows or
/// images) is `source`'s leading extent scaled by `factor` (windows per
/// image), multiplied or divided.
Value emptyRescaled(ImplicitLocOpBuilder &b, RankedTensorType type,
                    Value source, int64_t factor, bool divide) {
  SmallVector<Value> dynamicSizes;
  if (type.isDynamicDim(0)) {
    Value extent = tensor::DimOp::create(b, source, 0);
    Value scale = arith::ConstantIndexOp::create(b, factor);
    dynamicSizes.push_back(
        divide ? arith::DivUIOp::create(b, extent, scale).getResult()
               : arith::MulIOp::create(b, extent, scale).getResult());
  }
  return tensor::EmptyOp::create(b, type, dynamicSizes);
}

/// rpe.window_partition -> linalg.generic over the windows that gathers
/// each token from where the shift and the padding put it (or the padding
/// value).
struct LowerWindowPartition : public OpRewritePattern<WindowPartitionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(WindowPartitionOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    FeatureMap map = getFeatureMap(op);
    RankedTensorType resultType = op.getResult().getType();
    int64_t headDim = resultType.getDimSize(3);
    Value init = emptyRescaled(b, resultType, op.getInput(),
                               map.windowsPerImage(), /*divide=*/false);
    Value input = op.getInput(), pad = op.getPad();
    GenericBuilder g{b, 4}; // (window, head, token, channel of head)
    Value windows = g.build(
        {}, {}, init, {0, 1, 2, 3}, {kPar, kPar, kPar, kPar},
        [&](OpBuilder &nb, Location loc, ValueRange) -> Value {
          Value window = linalg::IndexOp::create(nb, loc, 0);
          Value head = linalg::IndexOp::create(nb, loc, 1);
          Value token = linalg::IndexOp::create(nb, loc, 2);
          Value channel = arith::AddIOp::create(
              nb, loc,
              arith::MulIOp::create(
                  nb, loc, head,
                  arith::ConstantIndexOp::create(nb, loc, headDim)),
              linalg::IndexOp::create(nb, loc, 3));
          TokenSource source = locateToken(nb, loc, map, window, token);
          Value value = tensor::ExtractOp::create(
              nb, loc, input,
              ValueRange{source.image, source.position, channel});
          if (!source.valid)
            return value;
          Value padValue =
              pad ? tensor::ExtractOp::create(nb, loc, pad, ValueRange{channel})
                        .getResult()
                  : arith::ConstantOp::create(
                        nb, loc, nb.getFloatAttr(value.getType(), 0.0))
                        .getResult();
          return arith::SelectOp::create(nb, loc, source.valid, value,
                                         padValue);
        });
    rewriter.replaceOp(op, windows);
    return success();
  }
};

/// rpe.window_reverse -> linalg.generic over the feature map that gathers
/// each real token from its window (padding is never read: cropped).
struct LowerWindowReverse : public OpRewritePattern<WindowReverseOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(WindowReverseOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    FeatureMap map = getFeatureMap(op);
    RankedTensorType resultType = op.getResult().getType();
    Value init = emptyRescaled(b, resultType, op.getInput(),
                               map.windowsPerImage(), /*divide=*/true);
    Value input = op.getInput();
    GenericBuilder g{b, 3}; // (image, position, channel)
    Value result = g.build(
        {}, {}, init, {0, 1, 2}, {kPar, kPar, kPar},
        [&](OpBuilder &nb, Location loc, ValueRange) -> Value {
          Value image = linalg::IndexOp::create(nb, loc, 0);
          Value position = linalg::IndexOp::create(nb, loc, 1);
          auto [window, token] =
              locateWindowToken(nb, loc, map, image, position);
          return tensor::ExtractOp::create(
              nb, loc, input,
              ValueRange{window, token, linalg::IndexOp::create(nb, loc, 2)});
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// x[i, :] / max(|x[i, :]|, 1e-12) for an n x d tile, in f32: PyTorch's
/// F.normalize along the last axis.
static Value normalizeRows(ImplicitLocOpBuilder &b, GenericBuilder &g2, Value x,
                           int64_t n, int64_t d) {
  Type f32 = b.getF32Type();
  Value squares =
      g2.build(x, {{0, 1}}, filledTensor(b, {n}, f32, 0.0), {0}, {kPar, kRed},
               [&](OpBuilder &nb, Location loc, ValueRange args) -> Value {
                 Value v = toF32(nb, loc, args[0]);
                 return math::FmaOp::create(nb, loc, v, v, args[1]);
               });
  return g2.build(
      {x, squares}, {{0, 1}, {0}}, tensor::EmptyOp::create(b, {n, d}, f32),
      {0, 1}, {kPar, kPar},
      [&](OpBuilder &nb, Location loc, ValueRange args) -> Value {
        Value norm = arith::MaximumFOp::create(
            nb, loc, math::SqrtOp::create(nb, loc, args[1]),
            arith::ConstantOp::create(nb, loc, nb.getF32FloatAttr(1e-12)));
        return arith::DivFOp::create(nb, loc, toF32(nb, loc, args[0]), norm);
      });
}

/// rpe.window_attention -> scf.forall over (window, head) of the unfused
/// steps on N x N tiles.
struct LowerWindowAttention : public OpRewritePattern<WindowAttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(WindowAttentionOp op,
                                PatternRewriter &rewriter) const override {
    // Under the op's name: the (window, head) loop's outlined body says
    // which op it computes.
    ImplicitLocOpBuilder b(
        NameLoc::get(op->getName().getIdentifier(), op.getLoc()), rewriter);
    int64_t heads = op.getNumHeads(), n = op.getNumTokens(),
            d = op.getHeadDim();
    RankedTensorType resultType = op.getResult().getType();
    Type elementType = resultType.getElementType();
    Type f32 = b.getF32Type();

    Value numWindows = tensor::DimOp::create(b, op.getQuery(), 0);
    SmallVector<Value> dynamicSizes;
    if (resultType.isDynamicDim(0))
      dynamicSizes.push_back(numWindows);
    Value init = tensor::EmptyOp::create(b, resultType, dynamicSizes);

    SmallVector<OpFoldResult> upperBounds = {numWindows, b.getIndexAttr(heads)};
    auto forall =
        scf::ForallOp::create(b, upperBounds, ValueRange{init}, std::nullopt);
    b.setInsertionPointToStart(forall.getBody());
    Value w = forall.getInductionVars()[0];
    Value h = forall.getInductionVars()[1];

    Value q = extractTile(b, op.getQuery(), {w, h});
    Value k = extractTile(b, op.getKey(), {w, h});
    Value v = extractTile(b, op.getValue(), {w, h});
    Value bias = extractTile(b, op.getBias(), {h});
    Value mask;
    if (Value fullMask = op.getMask()) {
      int64_t maskWindows =
          cast<RankedTensorType>(fullMask.getType()).getDimSize(0);
      Value maskIndex = arith::RemUIOp::create(
          b, w, arith::ConstantIndexOp::create(b, maskWindows));
      mask = extractTile(b, fullMask, {maskIndex});
    }

    // S[i, j] = sum_e (scale * q[i, e]) * k[j, e]
    Value scale =
        arith::ConstantOp::create(b, b.getF32FloatAttr(op.getEffectiveScale()));
    GenericBuilder g2{b, 2};
    if (Value logitScale = op.getLogitScale()) {
      // SwinV2's cosine attention, step by step as PyTorch computes it:
      // F.normalize(q) and F.normalize(k), then the clamped exp of the
      // head's logit scale as the scale.
      q = normalizeRows(b, g2, q, n, d);
      k = normalizeRows(b, g2, k, n, d);
      Value headLogitScale =
          toF32(b, b.getLoc(), tensor::ExtractOp::create(b, logitScale, h));
      Value clamped = arith::MinimumFOp::create(
          b, headLogitScale,
          arith::ConstantOp::create(b, b.getF32FloatAttr(std::log(100.0))));
      scale = arith::MulFOp::create(b, scale, math::ExpOp::create(b, clamped));
    }
    GenericBuilder g3{b, 3};
    Value scores = g3.build(
        {q, k}, {{0, 2}, {1, 2}}, filledTensor(b, {n, n}, f32, 0.0), {0, 1},
        {kPar, kPar, kRed},
        [&](OpBuilder &nb, Location loc, ValueRange args) -> Value {
          Value scaledQ =
              arith::MulFOp::create(nb, loc, toF32(nb, loc, args[0]), scale);
          Value product =
              arith::MulFOp::create(nb, loc, scaledQ, toF32(nb, loc, args[1]));
          return arith::AddFOp::create(nb, loc, args[2], product);
        });

    // S[i, j] += bias[i, j] (+ mask[i, j]), in Swin's order.
    SmallVector<Value> biasInputs = {scores, bias};
    SmallVector<SmallVector<unsigned>> biasDims = {{0, 1}, {0, 1}};
    if (mask) {
      biasInputs.push_back(mask);
      biasDims.push_back({0, 1});
    }
    Value biased = g2.build(
        biasInputs, biasDims, tensor::EmptyOp::create(b, {n, n}, f32), {0, 1},
        {kPar, kPar},
        [&](OpBuilder &nb, Location loc, ValueRange args) -> Value {
          Value s =
              arith::AddFOp::create(nb, loc, args[0], toF32(nb, loc, args[1]));
          if (mask)
            s = arith::AddFOp::create(nb, loc, s, toF32(nb, loc, args[2]));
          return s;
        });

    // m[i] = max_j S[i, j]
    Value rowMax = g2.build(
        biased, {{0, 1}},
        filledTensor(b, {n}, f32, -std::numeric_limits<double>::infinity()),
        {0}, {kPar, kRed},
        [&](OpBuilder &nb, Location loc, ValueRange args) -> Value {
          return arith::MaximumFOp::create(nb, loc, args[1], args[0]);
        });

    // E[i, j] = exp(S[i, j] - m[i])
    Value exps =
        g2.build({biased, rowMax}, {{0, 1}, {0}},
                 tensor::EmptyOp::create(b, {n, n}, f32), {0, 1}, {kPar, kPar},
                 [&](OpBuilder &nb, Location loc, ValueRange args) -> Value {
                   Value shifted =
                       arith::SubFOp::create(nb, loc, args[0], args[1]);
                   return math::ExpOp::create(nb, loc, shifted);
                 });

    // l[i] = sum_j E[i, j]
    Value rowSum = g2.build(
        exps, {{0, 1}}, filledTensor(b, {n}, f32, 0.0), {0}, {kPar, kRed},
        [&](OpBuilder &nb, Location loc, ValueRange args) -> Value {
          return arith::AddFOp::create(nb, loc, args[1], args[0]);
        });

    // P[i, j] = E[i, j] / l[i]
    Value probs =
        g2.build({exps, rowSum}, {{0, 1}, {0}},
                 tensor::EmptyOp::create(b, {n, n}, f32), {0, 1}, {kPar, kPar},
                 [&](OpBuilder &nb, Location loc, ValueRange args) -> Value {
                   return arith::DivFOp::create(nb, loc, args[0], args[1]);
                 });

    // O[i, e] = sum_j P[i, j] * v[j, e], loops (i, e, j), in the result type.
    Value out =
        g3.build({probs, v}, {{0, 2}, {2, 1}},
                 filledTensor(b, {n, d}, f32, 0.0), {0, 1}, {kPar, kPar, kRed},
                 [&](OpBuilder &nb, Location loc, ValueRange args) -> Value {
                   Value product = arith::MulFOp::create(
                       nb, loc, args[0], toF32(nb, loc, args[1]));
                   return arith::AddFOp::create(nb, loc, args[2], product);
                 });
    if (elementType != f32)
      out = g2.build(
          out, {{0, 1}}, tensor::EmptyOp::create(b, {n, d}, elementType),
          {0, 1}, {kPar, kPar},
          [&](OpBuilder &nb, Location loc, ValueRange args) -> Value {
            return arith::TruncFOp::create(nb, loc, elementType, args[0]);
          });

    // Write the tile: out[w, h, :, :] or, merged heads, out[w, :, h*d : h*d+d].
    SmallVector<OpFoldResult> offsets, sizes;
    if (op.hasMergedHeadsResult()) {
      Value column =
          arith::MulIOp::create(b, h, arith::ConstantIndexOp::create(b, d));
      offsets = {w, b.getIndexAttr(0), column};
      sizes = {b.getIndexAttr(1), b.getIndexAttr(n), b.getIndexAttr(d)};
    } else {
      offsets = {w, h, b.getIndexAttr(0), b.getIndexAttr(0)};
      sizes = {b.getIndexAttr(1), b.getIndexAttr(1), b.getIndexAttr(n),
               b.getIndexAttr(d)};
    }
    SmallVector<OpFoldResult> strides(offsets.size(), b.getIndexAttr(1));
    b.setInsertionPointToStart(forall.getTerminator().getBody());
    tensor::ParallelInsertSliceOp::create(b, out, forall.getRegionIterArgs()[0],
                                          offsets, sizes, strides);
    rewriter.replaceOp(op, forall.getResults());
    return success();
  }
};

/// rpe.continuous_position_bias of weights that are not constants (those
/// fold) -> the MLP as linalg.generics over a constant coordinate table:
/// hidden = relu(coords fc1ᵀ + b1), table = 16 sigmoid(hidden fc2ᵀ).
struct LowerContinuousPositionBias
    : public OpRewritePattern<ContinuousPositionBiasOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ContinuousPositionBiasOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Type f32 = b.getF32Type();
    int64_t rank = op.getWindow().size();
    int64_t hidden = op.getFc1Bias().getType().getDimSize(0);
    RankedTensorType resultType = op.getResult().getType();
    int64_t rows = resultType.getDimSize(0), heads = resultType.getDimSize(1);
    SmallVector<float> coords;
    for (double c : computeLogSpacedCoords(
             op.getWindow(),
             op.getPretrainedWindow().value_or(ArrayRef<int64_t>())))
      coords.push_back(static_cast<float>(c));
    Value coordTable = arith::ConstantOp::create(
        b, DenseElementsAttr::get(RankedTensorType::get({rows, rank}, f32),
                                  ArrayRef<float>(coords)));

    // pre[t, j] = b1[j] + sum_a coords[t, a] * fc1[j, a]: loops (t, j, a).
    GenericBuilder g2{b, 2}, g3{b, 3};
    Value bias = g2.build(
        op.getFc1Bias(), {{1}}, tensor::EmptyOp::create(b, {rows, hidden}, f32),
        {0, 1}, {kPar, kPar},
        [&](OpBuilder &nb, Location loc, ValueRange args) -> Value {
          return toF32(nb, loc, args[0]);
        });
    Value pre =
        g3.build({coordTable, op.getFc1Weight()}, {{0, 2}, {1, 2}}, bias,
                 {0, 1}, {kPar, kPar, kRed},
                 [&](OpBuilder &nb, Location loc, ValueRange args) -> Value {
                   return math::FmaOp::create(nb, loc, args[0],
                                              toF32(nb, loc, args[1]), args[2]);
                 });
    // logits[t, h] = sum_j relu(pre[t, j]) * fc2[h, j]: loops (t, h, j).
    Value logits = g3.build(
        {pre, op.getFc2Weight()}, {{0, 2}, {1, 2}},
        filledTensor(b, {rows, heads}, f32, 0.0), {0, 1}, {kPar, kPar, kRed},
        [&](OpBuilder &nb, Location loc, ValueRange args) -> Value {
          Value relu = arith::MaximumFOp::create(
              nb, loc, args[0],
              arith::ConstantOp::create(nb, loc, nb.getF32FloatAttr(0.0)));
          return math::FmaOp::create(nb, loc, relu, toF32(nb, loc, args[1]),
                                     args[2]);
        });
    // table = 16 / (1 + exp(-logits)), in the result's element type.
    Type element = resultType.getElementType();
    Value table = g2.build(
        logits, {{0, 1}}, tensor::EmptyOp::create(b, {rows, heads}, element),
        {0, 1}, {kPar, kPar},
        [&](OpBuilder &nb, Location loc, ValueRange args) -> Value {
          auto constant = [&](double v) {
            return arith::ConstantOp::create(nb, loc, nb.getF32FloatAttr(v));
          };
          Value decay = math::ExpOp::create(
              nb, loc, arith::NegFOp::create(nb, loc, args[0]));
          Value value = arith::DivFOp::create(
              nb, loc, constant(16.0),
              arith::AddFOp::create(nb, loc, constant(1.0), decay));
          return element.isF32()
                     ? value
                     : arith::TruncFOp::create(nb, loc, element, value)
                           .getResult();
        });
    rewriter.replaceOp(op, table);
    return success();
  }
};

/// linalg.softmax (of attention spelled out in linalg that did not fuse)
/// -> its max / exp / sum / divide generics: convert-linalg-to-loops does
/// not lower aggregate ops.
struct DecomposeSoftmax : public OpRewritePattern<linalg::SoftmaxOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::SoftmaxOp op,
                                PatternRewriter &rewriter) const override {
    FailureOr<SmallVector<Value>> results =
        cast<linalg::AggregatedOpInterface>(op.getOperation())
            .decomposeOperation(rewriter);
    if (failed(results))
      return failure();
    rewriter.replaceOp(op, *results);
    return success();
  }
};

struct ConvertRpeToLinalgPass
    : public rpe::impl::ConvertRpeToLinalgBase<ConvertRpeToLinalgPass> {
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    RewritePatternSet patterns(context);
    patterns
        .add<FoldToConstant<RelativeIndexOp>, FoldToConstant<ShiftMaskOp>,
             FoldToConstant<ContinuousPositionBiasOp>, LowerLookup,
             LowerWindowAttention, LowerWindowPartition,
             LowerContinuousPositionBias, LowerWindowReverse, DecomposeSoftmax>(
            context);
    ConversionTarget target(*context);
    target.addIllegalDialect<RpeDialect>();
    // The fused ops are lowered after bufferization.
    target.addLegalOp<FusedWindowAttentionOp, FusedWindowAttentionGradOp,
                      MatmulOp, YieldOp>();
    target.addIllegalOp<linalg::SoftmaxOp>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
