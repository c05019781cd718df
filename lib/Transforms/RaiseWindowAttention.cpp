//===- RaiseWindowAttention.cpp - rpe-raise-window-attention --------------===//
//
// Finds Swin's window attention in IR written by an importer (torch-mlir's
// linalg-on-tensors: batch_matmul, a gather through a constant index, a
// decomposed softmax) and rewrites it as rpe.window_attention over an
// rpe.lookup (and an rpe.shift_mask), the form rpe-fuse-bias-softmax fuses.
// Nothing is raised on faith: the index constant must be Swin's relative
// position index of a window, and a constant mask is an rpe.shift_mask only
// when it is Swin's mask of some resolution and shift.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Passes.h"
#include "Rpe/WindowGeometry.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
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

/// A scalar float constant, possibly truncated or extended (torch-mlir
/// spells Python's float scale as an f64 constant truncated in the body).
static std::optional<double> readScalarConstant(Value value) {
  if (auto trunc = value.getDefiningOp<arith::TruncFOp>())
    value = trunc.getIn();
  else if (auto ext = value.getDefiningOp<arith::ExtFOp>())
    value = ext.getIn();
  APFloat constant(0.0);
  if (!matchPattern(value, m_ConstantFloat(&constant)))
    return std::nullopt;
  return constant.convertToDouble();
}

//===----------------------------------------------------------------------===//
// Proofs: Swin's index and Swin's mask
//===----------------------------------------------------------------------===//

/// The window whose relative position index is `index` (N x N, row-major)
/// for a table of `rows` rows, or nothing. 2-D windows are tried before
/// 3-D ones; at most one window of each rank can match.
static std::optional<SmallVector<int64_t>>
findWindowOfIndex(ArrayRef<int64_t> index, int64_t tokens, int64_t rows) {
  if (static_cast<int64_t>(index.size()) != tokens * tokens)
    return std::nullopt;
  SmallVector<SmallVector<int64_t>> candidates;
  for (int64_t h = 1; h <= tokens; ++h)
    if (tokens % h == 0)
      candidates.push_back({h, tokens / h});
  for (int64_t d = 2; d <= tokens; ++d)
    for (int64_t h = 1; d * h <= tokens; ++h)
      if (tokens % (d * h) == 0)
        candidates.push_back({d, h, tokens / (d * h)});
  for (ArrayRef<int64_t> window : candidates)
    if (!checkWindow(window) && getNumTableRows(window) == rows &&
        ArrayRef<int64_t>(computeRelativeIndex(window)) == index)
      return SmallVector<int64_t>(window);
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
// Reading through the importer's reshapes and elementwise generics
//===----------------------------------------------------------------------===//

static bool hasReassociation(ArrayRef<ReassociationIndices> actual,
                             ArrayRef<ReassociationIndices> expected) {
  return actual == expected;
}

/// The source of `value` if it is a tensor.collapse_shape with
/// `reassociation`, else null.
static Value collapsedFrom(Value value,
                           ArrayRef<ReassociationIndices> reassociation) {
  auto collapse = value.getDefiningOp<tensor::CollapseShapeOp>();
  if (!collapse ||
      !hasReassociation(collapse.getReassociationIndices(), reassociation))
    return nullptr;
  return collapse.getSrc();
}

/// The source of `value` if it is a tensor.expand_shape with
/// `reassociation`, else null.
static Value expandedFrom(Value value,
                          ArrayRef<ReassociationIndices> reassociation) {
  auto expand = value.getDefiningOp<tensor::ExpandShapeOp>();
  if (!expand ||
      !hasReassociation(expand.getReassociationIndices(), reassociation))
    return nullptr;
  return expand.getSrc();
}

/// [B*H, ...] <-> [B, H, ...] on rank-4 tensors.
static const SmallVector<ReassociationIndices> kMergeHeads = {{0, 1}, {2}, {3}};

/// The single-result linalg.generic defining `value` with all loops
/// parallel and `numInputs` inputs, else null.
static linalg::GenericOp getElementwise(Value value, unsigned numInputs) {
  auto generic = value.getDefiningOp<linalg::GenericOp>();
  if (!generic || generic->getNumResults() != 1 ||
      generic.getNumDpsInputs() != numInputs ||
      generic.getNumParallelLoops() != generic.getNumLoops())
    return nullptr;
  return generic;
}

/// The value the body of a single-result generic yields.
static Value getYielded(linalg::GenericOp generic, unsigned result = 0) {
  return cast<linalg::YieldOp>(generic.getBody()->getTerminator())
      .getValues()[result];
}

/// True if `value` is the block argument of `generic`'s input `input`.
static bool isInputArgument(linalg::GenericOp generic, Value value,
                            unsigned input) {
  return value == generic.getBody()->getArgument(input);
}

/// If `op`'s two operands are the generic's block argument `arg` and
/// something else, returns the other operand.
static Value otherOperand(Operation *op, Value arg) {
  if (!op || op->getNumOperands() != 2)
    return nullptr;
  if (op->getOperand(0) == arg)
    return op->getOperand(1);
  if (op->getOperand(1) == arg)
    return op->getOperand(0);
  return nullptr;
}

/// The affine map over `numLoops` loops with the given results (dimension
/// indices, or -1 for the constant 0 of a broadcast unit extent).
static AffineMap makeMap(MLIRContext *context, unsigned numLoops,
                         ArrayRef<int64_t> results) {
  SmallVector<AffineExpr> exprs;
  for (int64_t d : results)
    exprs.push_back(d < 0 ? getAffineConstantExpr(0, context)
                          : getAffineDimExpr(d, context));
  return AffineMap::get(numLoops, 0, exprs, context);
}

/// `value = input * c` (or `input / c`) elementwise with a constant scalar
/// `c`: returns the input and the factor. Otherwise `value` with factor 1.
static std::pair<Value, double> peelScaling(Value value) {
  linalg::GenericOp generic = getElementwise(value, 1);
  if (!generic || !llvm::all_of(generic.getIndexingMapsArray(),
                                [](AffineMap m) { return m.isIdentity(); }))
    return {value, 1.0};
  Value arg = generic.getBody()->getArgument(0);
  Operation *op = getYielded(generic).getDefiningOp();
  if (auto mul = dyn_cast_or_null<arith::MulFOp>(op))
    if (std::optional<double> c = readScalarConstant(otherOperand(mul, arg)))
      return {generic.getDpsInputs()[0], *c};
  if (auto div = dyn_cast_or_null<arith::DivFOp>(op))
    if (div.getLhs() == arg)
      if (std::optional<double> c = readScalarConstant(div.getRhs()))
        return {generic.getDpsInputs()[0], 1.0 / *c};
  return {value, 1.0};
}

/// `[b, h, i, j] -> x[b, h, i]` as a generic reads a per-row value: a
/// rank-3 row tensor, or its expand_shape to `[b, h, i, 1]` read with a 0.
static Value getRowOperand(linalg::GenericOp generic, OpOperand *operand) {
  MLIRContext *context = generic.getContext();
  AffineMap map = generic.getMatchingIndexingMap(operand);
  if (map == makeMap(context, 4, {0, 1, 2}))
    return operand->get();
  if (map == makeMap(context, 4, {0, 1, 2, -1}) ||
      map == makeMap(context, 4, {0, 1, 2, 3}))
    if (Value rows = expandedFrom(operand->get(), {{0}, {1}, {2, 3}}))
      return rows;
  if (map == makeMap(context, 4, {0, 1, 2, -1}))
    return operand->get(); // a [b, h, i, 1] reduction result
  return nullptr;
}

/// A row reduction over the last of 4 loops of `input` whose body combines
/// the element and the accumulator with `Combine`. Returns its generic.
template <typename... Combine>
static linalg::GenericOp matchRowReduction(Value row, Value input) {
  auto generic = row.getDefiningOp<linalg::GenericOp>();
  if (!generic || generic.getNumDpsInputs() != 1 ||
      generic.getDpsInputs()[0] != input || generic.getNumLoops() != 4 ||
      generic.getNumReductionLoops() != 1 ||
      generic.getIteratorTypesArray()[3] != utils::IteratorType::reduction ||
      generic.getMatchingIndexingMap(generic.getDpsInputOperand(0)) !=
          makeMap(generic.getContext(), 4, {0, 1, 2, 3}))
    return nullptr;
  unsigned result = cast<OpResult>(row).getResultNumber();
  Operation *combine = getYielded(generic, result).getDefiningOp();
  Value element = generic.getBody()->getArgument(0);
  Value accumulator = generic.getBody()->getArgument(1 + result);
  if (!combine || !isa<Combine...>(combine) ||
      otherOperand(combine, element) != accumulator)
    return nullptr;
  return generic;
}

/// P = softmax(S) over the keys, as linalg.softmax or decomposed the way
/// torch-mlir writes it: max (possibly with an argmax beside it), sub, exp,
/// sum, div. Returns S.
static Value matchSoftmax(Value probabilities) {
  if (auto softmax = probabilities.getDefiningOp<linalg::SoftmaxOp>())
    return softmax.getDimension() == 3 ? softmax.getInput() : nullptr;

  // P = E / sum(E).
  linalg::GenericOp div = getElementwise(probabilities, 2);
  if (!div || div.getNumLoops() != 4)
    return nullptr;
  auto quotient = getYielded(div).getDefiningOp<arith::DivFOp>();
  if (!quotient || !isInputArgument(div, quotient.getLhs(), 0) ||
      !isInputArgument(div, quotient.getRhs(), 1))
    return nullptr;
  Value exponentials = div.getDpsInputs()[0];
  Value sum = getRowOperand(div, div.getDpsInputOperand(1));
  if (!sum || !matchRowReduction<arith::AddFOp>(sum, exponentials))
    return nullptr;

  // E = exp(S - max(S)).
  linalg::GenericOp exp = getElementwise(exponentials, 1);
  if (!exp || !isa_and_nonnull<math::ExpOp>(getYielded(exp).getDefiningOp()) ||
      getYielded(exp).getDefiningOp()->getOperand(0) !=
          exp.getBody()->getArgument(0))
    return nullptr;
  linalg::GenericOp sub = getElementwise(exp.getDpsInputs()[0], 2);
  if (!sub || sub.getNumLoops() != 4)
    return nullptr;
  auto difference = getYielded(sub).getDefiningOp<arith::SubFOp>();
  if (!difference || !isInputArgument(sub, difference.getLhs(), 0) ||
      !isInputArgument(sub, difference.getRhs(), 1))
    return nullptr;
  Value scores = sub.getDpsInputs()[0];
  Value max = getRowOperand(sub, sub.getDpsInputOperand(1));
  if (!max ||
      !matchRowReduction<arith::MaximumFOp, arith::MaxNumFOp>(max, scores))
    return nullptr;
  return scores;
}

/// A zero-filled `linalg.batch_matmul` (no transposed operand maps)
/// defining `value`, else null.
static linalg::BatchMatmulOp getBatchProduct(Value value) {
  auto product = value.getDefiningOp<linalg::BatchMatmulOp>();
  if (!product || product.hasUserDefinedMaps())
    return nullptr;
  auto fill = product.getDpsInits()[0].getDefiningOp<linalg::FillOp>();
  APFloat zero(0.0);
  if (!fill || !matchPattern(fill.getInputs()[0], m_ConstantFloat(&zero)) ||
      !zero.isZero())
    return nullptr;
  return product;
}

/// The bias gather of Swin: `out[p, h] = table[idx[p], h]` over the
/// flattened N x N pairs `p`, idx read with or without the wrap of negative
/// indices (`idx < 0 ? idx + T : idx`, a no-op on a proved index).
struct Gather {
  Value table;
  Value index; // [N*N] or [N, N] (the collapse's source)
};

static std::optional<Gather> matchGather(Value value) {
  auto generic = value.getDefiningOp<linalg::GenericOp>();
  MLIRContext *context = value.getContext();
  if (!generic || generic->getNumResults() != 1 ||
      generic.getNumDpsInputs() != 1 || generic.getNumLoops() != 2 ||
      generic.getNumParallelLoops() != 2 ||
      generic.getIndexingMapsArray() !=
          SmallVector<AffineMap>{makeMap(context, 2, {0}),
                                 makeMap(context, 2, {0, 1})})
    return std::nullopt;
  auto extract = getYielded(generic).getDefiningOp<tensor::ExtractOp>();
  // The table must be defined outside the body: the lookup replacing the
  // gather reads it there.
  if (!extract || extract.getIndices().size() != 2 ||
      generic.getRegion().isAncestor(extract.getTensor().getParentRegion()))
    return std::nullopt;
  // Column: the head loop.
  auto column = extract.getIndices()[1].getDefiningOp<linalg::IndexOp>();
  if (!column || column.getDim() != 1)
    return std::nullopt;
  // Row: the index element, cast to index, maybe wrapped.
  auto cast = extract.getIndices()[0].getDefiningOp<arith::IndexCastOp>();
  if (!cast)
    return std::nullopt;
  Value element = generic.getBody()->getArgument(0);
  Value row = cast.getIn();
  if (auto select = row.getDefiningOp<arith::SelectOp>()) {
    auto negative = select.getCondition().getDefiningOp<arith::CmpIOp>();
    auto wrapped = select.getTrueValue().getDefiningOp<arith::AddIOp>();
    APInt zero;
    if (!negative || negative.getPredicate() != arith::CmpIPredicate::slt ||
        negative.getLhs() != element ||
        !matchPattern(negative.getRhs(), m_ConstantInt(&zero)) ||
        !zero.isZero() || !wrapped || !otherOperand(wrapped, element) ||
        select.getFalseValue() != element)
      return std::nullopt;
    row = element;
  }
  if (row != element)
    return std::nullopt;
  Value index = generic.getDpsInputs()[0];
  if (Value square = collapsedFrom(index, {{0, 1}}))
    index = square;
  return Gather{extract.getTensor(), index};
}

/// The `[H, N, N]` bias of a gather `[N*N, H]`: expand to `[N, N, H]`,
/// transpose `[2, 0, 1]`.
static std::optional<Gather> matchBiasOfHeads(Value bias) {
  auto transpose = bias.getDefiningOp<linalg::TransposeOp>();
  if (!transpose || transpose.getPermutation() != ArrayRef<int64_t>{2, 0, 1})
    return std::nullopt;
  Value pairs = expandedFrom(transpose.getInput(), {{0, 1}, {2}});
  if (!pairs)
    return std::nullopt;
  return matchGather(pairs);
}

//===----------------------------------------------------------------------===//
// The attention
//===----------------------------------------------------------------------===//

/// What the raised attention is made of.
struct ImportedAttention {
  Value query, key, value; // [B, H, N, d] (value maybe [B*H, N, d])
  double scale = 1.0;
  Value table;
  SmallVector<int64_t> window;
  Value mask; // [nW, N, N], or null
};

/// `scores + bias` where the bias is `[1, H, N, N]` (or `[H, N, N]`),
/// broadcast over the windows. Returns the scores and the bias.
static std::optional<std::pair<Value, Value>> matchBiasAdd(Value biased) {
  linalg::GenericOp add = getElementwise(biased, 2);
  if (!add || add.getNumLoops() != 4)
    return std::nullopt;
  auto sum = getYielded(add).getDefiningOp<arith::AddFOp>();
  if (!sum || !otherOperand(sum, add.getBody()->getArgument(0)) ||
      otherOperand(sum, add.getBody()->getArgument(0)) !=
          add.getBody()->getArgument(1))
    return std::nullopt;
  MLIRContext *context = add.getContext();
  AffineMap identity = makeMap(context, 4, {0, 1, 2, 3});
  for (unsigned scoresInput : {0u, 1u}) {
    OpOperand *scores = add.getDpsInputOperand(scoresInput);
    OpOperand *bias = add.getDpsInputOperand(1 - scoresInput);
    if (add.getMatchingIndexingMap(scores) != identity)
      continue;
    AffineMap biasMap = add.getMatchingIndexingMap(bias);
    if (biasMap == makeMap(context, 4, {1, 2, 3}))
      return std::make_pair(scores->get(), bias->get());
    if (biasMap == makeMap(context, 4, {-1, 1, 2, 3}))
      if (Value heads = expandedFrom(bias->get(), kMergeHeads))
        return std::make_pair(scores->get(), heads);
  }
  return std::nullopt;
}

/// Swin's mask: `(x.view(B/nW, nW, H, N, N) + mask[None, :, None]).view(B,
/// H, N, N)`. Returns x and the `[nW, N, N]` mask.
static std::optional<std::pair<Value, Value>> matchMaskAdd(Value masked) {
  Value sum5d = collapsedFrom(masked, {{0, 1}, {2}, {3}, {4}});
  if (!sum5d)
    return std::nullopt;
  linalg::GenericOp add = getElementwise(sum5d, 2);
  if (!add)
    return std::nullopt;
  auto sum = getYielded(add).getDefiningOp<arith::AddFOp>();
  if (!sum || otherOperand(sum, add.getBody()->getArgument(0)) !=
                  add.getBody()->getArgument(1))
    return std::nullopt;
  MLIRContext *context = add.getContext();
  for (unsigned input : {0u, 1u}) {
    OpOperand *scores = add.getDpsInputOperand(input);
    OpOperand *mask = add.getDpsInputOperand(1 - input);
    // The mask's leading unit extent is read at 0, or at d0 when the batch
    // of images is 1 (the importer keeps the loop then).
    AffineMap maskMap = add.getMatchingIndexingMap(mask);
    if (add.getMatchingIndexingMap(scores) !=
            makeMap(context, 5, {0, 1, 2, 3, 4}) ||
        (maskMap != makeMap(context, 5, {-1, 1, -1, 3, 4}) &&
         maskMap != makeMap(context, 5, {0, 1, -1, 3, 4})))
      continue;
    Value inner = expandedFrom(scores->get(), {{0, 1}, {2}, {3}, {4}});
    Value windows = expandedFrom(mask->get(), {{0, 1}, {2, 3}, {4}});
    if (inner && windows)
      return std::make_pair(inner, windows);
  }
  return std::nullopt;
}

/// The whole attention ending in `product` (P·v), or a reason it is not.
static FailureOr<ImportedAttention>
matchImportedAttention(linalg::BatchMatmulOp product,
                       PatternRewriter &rewriter) {
  ImportedAttention attention;
  Value probabilities = collapsedFrom(product.getDpsInputs()[0], kMergeHeads);
  if (!probabilities)
    return rewriter.notifyMatchFailure(product, "P is not [B, H, N, N]");
  attention.value = product.getDpsInputs()[1];

  Value scores = matchSoftmax(probabilities);
  if (!scores)
    return rewriter.notifyMatchFailure(product, "P is not a softmax");
  if (auto masked = matchMaskAdd(scores)) {
    scores = masked->first;
    attention.mask = masked->second;
  }
  auto biased = matchBiasAdd(scores);
  if (!biased)
    return rewriter.notifyMatchFailure(product, "no bias added to the scores");
  scores = biased->first;
  std::optional<Gather> gather = matchBiasOfHeads(biased->second);
  if (!gather)
    return rewriter.notifyMatchFailure(product,
                                       "the bias is not a table gather");

  // S = (q * scale) · kᵀ, or (q · kᵀ) * scale.
  auto [unscaled, scoreScale] = peelScaling(scores);
  linalg::BatchMatmulOp qk =
      getBatchProduct(expandedFrom(unscaled, kMergeHeads));
  if (!qk)
    return rewriter.notifyMatchFailure(product, "scores are not q · kᵀ");
  Value scaledQuery = collapsedFrom(qk.getDpsInputs()[0], kMergeHeads);
  Value keyT = collapsedFrom(qk.getDpsInputs()[1], kMergeHeads);
  auto transpose =
      keyT ? keyT.getDefiningOp<linalg::TransposeOp>() : linalg::TransposeOp();
  if (!scaledQuery || !transpose ||
      transpose.getPermutation() != ArrayRef<int64_t>{0, 1, 3, 2})
    return rewriter.notifyMatchFailure(product, "scores are not q · kᵀ");
  auto [query, queryScale] = peelScaling(scaledQuery);
  attention.query = query;
  attention.key = transpose.getInput();
  attention.scale = scoreScale * queryScale;

  // Shapes: [B, H, N, d] throughout, one element type.
  auto queryType = cast<RankedTensorType>(attention.query.getType());
  auto keyType = cast<RankedTensorType>(attention.key.getType());
  auto valueType = cast<RankedTensorType>(attention.value.getType());
  auto tableType = dyn_cast<RankedTensorType>(gather->table.getType());
  Type element = queryType.getElementType();
  if (!(element.isF32() || element.isF16() || element.isBF16()) ||
      !queryType.hasStaticShape() || queryType != keyType ||
      !valueType.hasStaticShape() || valueType.getRank() != 3 ||
      valueType.getElementType() != queryType.getElementType() || !tableType ||
      !tableType.hasStaticShape() || tableType.getRank() != 2 ||
      tableType.getElementType() != queryType.getElementType() ||
      tableType.getDimSize(1) != queryType.getDimSize(1) ||
      valueType.getDimSize(0) !=
          queryType.getDimSize(0) * queryType.getDimSize(1) ||
      valueType.getDimSize(1) != queryType.getDimSize(2))
    return rewriter.notifyMatchFailure(product, "unsupported shapes");

  // The proof that the gather is Swin's relative position bias.
  int64_t tokens = queryType.getDimSize(2);
  std::optional<SmallVector<int64_t>> index =
      readIntegerConstant(gather->index);
  if (!index)
    return rewriter.notifyMatchFailure(product, "the index is not constant");
  std::optional<SmallVector<int64_t>> window =
      findWindowOfIndex(*index, tokens, tableType.getDimSize(0));
  if (!window)
    return rewriter.notifyMatchFailure(
        product, "the index is not Swin's relative position index");
  attention.table = gather->table;
  attention.window = *window;

  if (attention.mask) {
    auto maskType = cast<RankedTensorType>(attention.mask.getType());
    if (!maskType.hasStaticShape() || maskType.getRank() != 3 ||
        maskType.getElementType() != queryType.getElementType() ||
        maskType.getDimSize(1) != tokens || maskType.getDimSize(2) != tokens ||
        queryType.getDimSize(0) % maskType.getDimSize(0) != 0)
      return rewriter.notifyMatchFailure(product, "unsupported mask shape");
  }
  return attention;
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

/// Rewrites the `P·v` batch_matmul of an imported Swin attention into
/// `rpe.window_attention` over `rpe.lookup` (+ `rpe.shift_mask`); the
/// importer's index, gather, softmax and products are left dead.
struct RaiseImportedAttention : public OpRewritePattern<linalg::BatchMatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::BatchMatmulOp product,
                                PatternRewriter &rewriter) const override {
    if (!getBatchProduct(product->getResult(0)))
      return rewriter.notifyMatchFailure(product, "not a zero-filled product");
    FailureOr<ImportedAttention> attention =
        matchImportedAttention(product, rewriter);
    if (failed(attention))
      return failure();

    Location loc = product.getLoc();
    auto queryType = cast<RankedTensorType>(attention->query.getType());
    int64_t heads = queryType.getDimSize(1), tokens = queryType.getDimSize(2);
    auto tableType = cast<RankedTensorType>(attention->table.getType());
    Value bias =
        LookupOp::create(rewriter, loc,
                         RankedTensorType::get({heads, tokens, tokens},
                                               tableType.getElementType()),
                         attention->table, attention->window);

    Value mask = attention->mask;
    if (mask) {
      auto maskType = cast<RankedTensorType>(mask.getType());
      std::optional<SmallVector<float>> values = readF32Constant(mask);
      std::optional<ShiftGeometry> shift =
          values ? findShiftOfMask(*values, attention->window,
                                   maskType.getDimSize(0))
                 : std::nullopt;
      // A constant that is Swin's mask becomes rpe.shift_mask, which fuses;
      // anything else stays an explicit operand.
      if (shift)
        mask = ShiftMaskOp::create(rewriter, loc, maskType, shift->resolution,
                                   attention->window, shift->shift,
                                   shift->maskValue);
    }

    Value value = splitHeads(rewriter, loc, attention->value, queryType);
    auto valueType = cast<RankedTensorType>(value.getType());
    auto resultType = RankedTensorType::get(
        {queryType.getDimSize(0), heads, tokens, valueType.getDimSize(3)},
        queryType.getElementType());
    Value raised = WindowAttentionOp::create(
        rewriter, loc, resultType, attention->query, attention->key, value,
        bias, mask, /*logit_scale=*/Value(),
        rewriter.getF32FloatAttr(static_cast<float>(attention->scale)));
    rewriter.replaceOpWithNewOp<tensor::CollapseShapeOp>(
        product, product->getResult(0).getType(), raised, kMergeHeads);
    return success();
  }
};

struct RpeRaiseWindowAttentionPass
    : public rpe::impl::RpeRaiseWindowAttentionBase<
          RpeRaiseWindowAttentionPass> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseImportedAttention>(&getContext());
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
