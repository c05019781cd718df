//===- RaiseWindowAttention.cpp - rpe-raise-window-attention --------------===//
//
// Finds Swin's window attention spelled in linalg, as an importer writes
// it (torch-mlir's linalg-on-tensors) or as a framework lowers it around rpe
// ops, with the matchers of LinalgAttentionMatchers.h, and rewrites it as
// rpe.window_attention over an rpe.lookup (and an rpe.shift_mask): the form
// rpe-fuse-bias-softmax fuses, which matches rpe ops only. Nothing is raised
// on faith: a gathered index must be Swin's relative position index of a
// window (or BEiT's, of a grid and its class token), and a constant mask is an
// rpe.shift_mask only when it is Swin's mask of some resolution and shift.
//
//===----------------------------------------------------------------------===//

#include "LinalgAttentionMatchers.h"

#include "Rpe/Passes.h"
#include "Rpe/WindowGeometry.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::rpe {
#define GEN_PASS_DEF_RPERAISEWINDOWATTENTION
#include "Rpe/Passes.h.inc"
} // namespace mlir::rpe

using namespace mlir;
using namespace mlir::rpe;

namespace {

//===----------------------------------------------------------------------===//
// Constants, dense or dense_resource
//===----------------------------------------------------------------------===//

/// The values of an integer constant tensor: `dense<...>` or a
/// `dense_resource` blob (read in place, as importers store weights).
static std::optional<SmallVector<int64_t>> readIntegerConstant(Value value) {
  Attribute attr;
  if (!matchPattern(value, m_Constant(&attr)))
    return std::nullopt;
  if (auto dense = dyn_cast<DenseIntElementsAttr>(attr)) {
    SmallVector<int64_t> values;
    for (const APInt &element : dense.getValues<APInt>())
      values.push_back(element.getSExtValue());
    return values;
  }
  if (auto blob = dyn_cast<DenseI64ResourceElementsAttr>(attr))
    if (std::optional<ArrayRef<int64_t>> data = blob.tryGetAsArrayRef())
      return SmallVector<int64_t>(*data);
  if (auto blob = dyn_cast<DenseI32ResourceElementsAttr>(attr))
    if (std::optional<ArrayRef<int32_t>> data = blob.tryGetAsArrayRef())
      return SmallVector<int64_t>(data->begin(), data->end());
  return std::nullopt;
}

/// The values of an f32 constant tensor, dense or dense_resource.
static std::optional<SmallVector<float>> readF32Constant(Value value) {
  Attribute attr;
  if (!matchPattern(value, m_Constant(&attr)))
    return std::nullopt;
  if (auto dense = dyn_cast<DenseFPElementsAttr>(attr)) {
    if (!dense.getElementType().isF32())
      return std::nullopt;
    return SmallVector<float>(dense.getValues<float>());
  }
  if (auto blob = dyn_cast<DenseF32ResourceElementsAttr>(attr))
    if (std::optional<ArrayRef<float>> data = blob.tryGetAsArrayRef())
      return SmallVector<float>(*data);
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Proofs: Swin's index and Swin's mask
//===----------------------------------------------------------------------===//

/// The window (and whether BEiT's class token comes first) whose relative
/// position index is `index` (N x N, row-major) for a table of `rows` rows,
/// or nothing: Swin's index of an N-token window, or BEiT's of an (N - 1)-
/// token grid and its class token (T + 3 rows). 2-D windows are tried
/// before 3-D ones; at most one window of each rank can match.
struct IndexedWindow {
  SmallVector<int64_t> window;
  bool classToken;
};
static std::optional<IndexedWindow>
findWindowOfIndex(ArrayRef<int64_t> index, int64_t tokens, int64_t rows) {
  if (static_cast<int64_t>(index.size()) != tokens * tokens)
    return std::nullopt;
  for (bool classToken : {false, true}) {
    int64_t grid = classToken ? tokens - 1 : tokens;
    SmallVector<SmallVector<int64_t>> candidates;
    for (int64_t h = 1; h <= grid; ++h)
      if (grid % h == 0)
        candidates.push_back({h, grid / h});
    for (int64_t d = 2; d <= grid; ++d)
      for (int64_t h = 1; d * h <= grid; ++h)
        if (grid % (d * h) == 0)
          candidates.push_back({d, h, grid / (d * h)});
    for (ArrayRef<int64_t> window : candidates)
      if (!checkWindow(window) && getNumTableRows(window, classToken) == rows &&
          ArrayRef<int64_t>(computeRelativeIndex(window, classToken)) == index)
        return IndexedWindow{SmallVector<int64_t>(window), classToken};
  }
  return std::nullopt;
}

/// The geometry of a shifted-window mask.
struct ShiftGeometry {
  SmallVector<int64_t> resolution, shift;
  double maskValue;
};

/// Calls `fn` with every way of writing `count` as an ordered product of
/// `rank` positive factors.
static void forEachFactorization(int64_t count, int64_t rank,
                                 SmallVectorImpl<int64_t> &prefix,
                                 function_ref<void(ArrayRef<int64_t>)> fn) {
  if (rank == 1) {
    prefix.push_back(count);
    fn(prefix);
    prefix.pop_back();
    return;
  }
  for (int64_t f = 1; f <= count; ++f) {
    if (count % f != 0)
      continue;
    prefix.push_back(f);
    forEachFactorization(count / f, rank - 1, prefix, fn);
    prefix.pop_back();
  }
}

/// The resolution and shift whose Swin mask (rpe.shift_mask) is `mask`
/// ([nW, N, N], row-major) for `window`, or nothing.
static std::optional<ShiftGeometry> findShiftOfMask(ArrayRef<float> mask,
                                                    ArrayRef<int64_t> window,
                                                    int64_t windowsPerImage) {
  int64_t tokens = getNumTokens(window);
  if (static_cast<int64_t>(mask.size()) != windowsPerImage * tokens * tokens)
    return std::nullopt;
  // The one non-zero value a Swin mask holds (-100 in Swin).
  float maskValue = static_cast<float>(kSwinMaskValue);
  for (float x : mask)
    if (x != 0.0f) {
      maskValue = x;
      break;
    }
  std::optional<ShiftGeometry> found;
  SmallVector<int64_t> prefix;
  int64_t rank = window.size();
  forEachFactorization(
      windowsPerImage, rank, prefix, [&](ArrayRef<int64_t> counts) {
        if (found)
          return;
        SmallVector<int64_t> resolution, shift(rank, 0);
        for (int64_t axis = 0; axis < rank; ++axis)
          resolution.push_back(counts[axis] * window[axis]);
        // Every shift 0 <= s < w per axis, as an odometer.
        while (!found) {
          if (!checkShift(resolution, window, shift) &&
              ArrayRef<float>(computeShiftMask(resolution, window, shift,
                                               maskValue)) == mask)
            found = ShiftGeometry{resolution, shift, maskValue};
          int64_t axis = rank - 1;
          while (axis >= 0 && ++shift[axis] == window[axis])
            shift[axis--] = 0;
          if (axis < 0)
            break;
        }
      });
  return found;
}

//===----------------------------------------------------------------------===//
// The rewrite
//===----------------------------------------------------------------------===//

/// `value` transposed by `permutation` (none: `value`).
static Value permute(PatternRewriter &rewriter, Location loc, Value value,
                     ArrayRef<int64_t> permutation) {
  if (permutation.empty())
    return value;
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape;
  for (int64_t dim : permutation)
    shape.push_back(type.getDimSize(dim));
  Value init =
      tensor::EmptyOp::create(rewriter, loc, shape, type.getElementType());
  return linalg::TransposeOp::create(rewriter, loc, value, init, permutation)
      .getResult()[0];
}

/// `v` as `[B, H, N, d]`: the source of its head merge, or an expand_shape.
static Value splitHeads(PatternRewriter &rewriter, Location loc, Value value,
                        RankedTensorType queryType) {
  if (Value heads = collapsedFrom(value, kMergeHeads))
    if (cast<RankedTensorType>(heads.getType()).getShape() ==
        queryType.getShape())
      return heads;
  auto type = cast<RankedTensorType>(value.getType());
  auto split =
      RankedTensorType::get({queryType.getDimSize(0), queryType.getDimSize(1),
                             type.getDimSize(1), type.getDimSize(2)},
                            type.getElementType());
  return tensor::ExpandShapeOp::create(rewriter, loc, split, value,
                                       kMergeHeads);
}

/// Rewrites the P·v product of a Swin attention spelled in linalg
/// (LinalgAttentionMatchers.h) into `rpe.window_attention` over an
/// `rpe.lookup` (and an `rpe.shift_mask`), once its gathered index is
/// proved Swin's; the ops that computed it in linalg are left dead.
struct RaiseLinalgAttention
    : public OpInterfaceRewritePattern<linalg::LinalgOp> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;

  LogicalResult matchAndRewrite(linalg::LinalgOp product,
                                PatternRewriter &rewriter) const override {
    FailureOr<LinalgAttention> attention =
        matchLinalgAttention(product, rewriter);
    if (failed(attention))
      return failure();
    auto queryType = cast<RankedTensorType>(attention->query.getType());
    int64_t heads = queryType.getDimSize(1), tokens = queryType.getDimSize(2);

    // The proofs, before anything is created: the gathered index is Swin's
    // relative position index of some window, and a constant mask that is
    // Swin's shifted-window mask becomes rpe.shift_mask (which fuses).
    SmallVector<int64_t> window;
    bool classToken = false;
    if (attention->lookup) {
      window = SmallVector<int64_t>(attention->lookup.getWindow());
      classToken = attention->lookup.getClassToken();
    } else {
      auto tableType =
          cast<RankedTensorType>(attention->gather->table.getType());
      std::optional<SmallVector<int64_t>> index =
          readIntegerConstant(attention->gather->index);
      if (!index)
        return rewriter.notifyMatchFailure(product,
                                           "the index is not constant");
      std::optional<IndexedWindow> found =
          findWindowOfIndex(*index, tokens, tableType.getDimSize(0));
      if (!found)
        return rewriter.notifyMatchFailure(
            product, "the index is not Swin's (nor BEiT's) relative position "
                     "index");
      window = found->window;
      classToken = found->classToken;
    }
    Value mask = attention->mask;
    std::optional<ShiftGeometry> shift;
    // (BEiT's attention is global: no window's shift mask.)
    if (mask && !mask.getDefiningOp<ShiftMaskOp>() && !classToken)
      if (std::optional<SmallVector<float>> values = readF32Constant(mask))
        shift = findShiftOfMask(
            *values, window,
            cast<RankedTensorType>(mask.getType()).getDimSize(0));

    Location loc = product.getLoc();
    Value bias;
    if (attention->lookup) {
      bias = attention->lookup.getResult();
    } else {
      auto tableType =
          cast<RankedTensorType>(attention->gather->table.getType());
      bias = LookupOp::create(rewriter, loc,
                              RankedTensorType::get({heads, tokens, tokens},
                                                    tableType.getElementType()),
                              attention->gather->table, window, classToken);
    }
    if (shift)
      mask =
          ShiftMaskOp::create(rewriter, loc, mask.getType(), shift->resolution,
                              window, shift->shift, shift->maskValue);
    Value key =
        permute(rewriter, loc, attention->key, attention->keyPermutation);
    Value value = attention->value;
    if (attention->mergedHeads)
      value = splitHeads(rewriter, loc, value, queryType);
    auto valueType = cast<RankedTensorType>(value.getType());
    auto resultType = RankedTensorType::get(
        {queryType.getDimSize(0), heads, tokens, valueType.getDimSize(3)},
        queryType.getElementType());
    Value raised = WindowAttentionOp::create(
        rewriter, loc, resultType, attention->query, key, value, bias, mask,
        /*logit_scale=*/Value(),
        rewriter.getF32FloatAttr(static_cast<float>(attention->scale)));
    if (attention->mergedHeads)
      rewriter.replaceOpWithNewOp<tensor::CollapseShapeOp>(
          product, product->getResult(0).getType(), raised, kMergeHeads);
    else
      rewriter.replaceOp(product, raised);
    return success();
  }
};

struct RpeRaiseWindowAttentionPass
    : public rpe::impl::RpeRaiseWindowAttentionBase<
          RpeRaiseWindowAttentionPass> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseLinalgAttention>(&getContext());
    // Folding is left to the passes after: it would fold the constant
    // lookups and masks this pass creates back into anonymous constants.
    GreedyRewriteConfig config;
    config.enableFolding(false);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      signalPassFailure();
  }
};

} // namespace
