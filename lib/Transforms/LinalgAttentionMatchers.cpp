//===- LinalgAttentionMatchers.cpp - Swin attention spelled in linalg -----===//
//
// The matchers of LinalgAttentionMatchers.h: each reads one part of the
// attention in the spellings it takes and checks every indexing map and
// body it relies on, so that what matches computes what rpe ops compute.
//
//===----------------------------------------------------------------------===//

#include "LinalgAttentionMatchers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SmallBitVector.h"

using namespace mlir;
using namespace mlir::rpe;

//===----------------------------------------------------------------------===//
// Accesses, reshapes, constants
//===----------------------------------------------------------------------===//

/// True if `op` indexes `operand` at `expected`, one expression per
/// dimension; dimensions of static extent 1 match anything (see readsAt).
static bool readsAtExprs(linalg::LinalgOp op, OpOperand &operand,
                         ArrayRef<AffineExpr> expected) {
  auto type = dyn_cast<RankedTensorType>(operand.get().getType());
  AffineMap map = op.getMatchingIndexingMap(&operand);
  if (!type || type.getRank() != static_cast<int64_t>(expected.size()) ||
      map.getNumResults() != expected.size())
    return false;
  for (auto [dim, expr] : llvm::enumerate(expected))
    if (type.getDimSize(dim) != 1 && map.getResult(dim) != expr)
      return false;
  return true;
}

bool mlir::rpe::readsAt(linalg::LinalgOp op, OpOperand &operand,
                        ArrayRef<int64_t> loops) {
  MLIRContext *context = op.getContext();
  SmallVector<AffineExpr> expected;
  for (int64_t loop : loops) {
    if (loop == kUnitIndex) {
      // A broadcast reads a unit extent only.
      auto type = dyn_cast<RankedTensorType>(operand.get().getType());
      if (!type || expected.size() >= static_cast<size_t>(type.getRank()) ||
          type.getDimSize(expected.size()) != 1)
        return false;
      expected.push_back(getAffineConstantExpr(0, context));
    } else {
      expected.push_back(getAffineDimExpr(loop, context));
    }
  }
  return readsAtExprs(op, operand, expected);
}

const SmallVector<ReassociationIndices> mlir::rpe::kMergeHeads = {
    {0, 1}, {2}, {3}};

Value mlir::rpe::collapsedFrom(Value value,
                               ArrayRef<ReassociationIndices> reassociation) {
  auto collapse = value.getDefiningOp<tensor::CollapseShapeOp>();
  if (!collapse || collapse.getReassociationIndices() != reassociation)
    return nullptr;
  return collapse.getSrc();
}

Value mlir::rpe::expandedFrom(Value value,
                              ArrayRef<ReassociationIndices> reassociation) {
  auto expand = value.getDefiningOp<tensor::ExpandShapeOp>();
  if (!expand || expand.getReassociationIndices() != reassociation)
    return nullptr;
  return expand.getSrc();
}

std::optional<double> mlir::rpe::readScalarConstant(Value value) {
  if (!value)
    return std::nullopt;
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
// Reading generics
//===----------------------------------------------------------------------===//

namespace {

/// The value the body of `op` yields as its result `result`.
Value getYielded(linalg::LinalgOp op, unsigned result = 0) {
  return op.getBlock()->getTerminator()->getOperand(result);
}

/// True if `value` is the block argument of `op`'s input `input`.
bool isInputArgument(linalg::LinalgOp op, Value value, unsigned input) {
  return value == op.getBlock()->getArgument(input);
}

/// If `op`'s two operands are `arg` and something else, returns the other
/// operand.
Value otherOperand(Operation *op, Value arg) {
  if (!op || op->getNumOperands() != 2)
    return nullptr;
  if (op->getOperand(0) == arg)
    return op->getOperand(1);
  if (op->getOperand(1) == arg)
    return op->getOperand(0);
  return nullptr;
}

/// True if `value` is a linalg.fill of the constant 0.
bool isZeroFilled(Value value) {
  auto fill = value.getDefiningOp<linalg::FillOp>();
  APFloat zero(0.0);
  return fill && matchPattern(fill.getInputs()[0], m_ConstantFloat(&zero)) &&
         zero.isZero();
}

/// The loops 0, 1, ..., rank - 1.
SmallVector<int64_t> identityLoops(int64_t rank) {
  return llvm::to_vector(llvm::seq<int64_t>(0, rank));
}

/// The single-result linalg.generic defining `value`, all loops parallel,
/// with `numInputs` inputs and its result written in loop order; else null.
linalg::GenericOp getElementwise(Value value, unsigned numInputs) {
  auto generic = value.getDefiningOp<linalg::GenericOp>();
  if (!generic || generic->getNumResults() != 1 ||
      generic.getNumDpsInputs() != numInputs ||
      generic.getNumParallelLoops() != generic.getNumLoops() ||
      !readsAt(generic, *generic.getDpsInitOperand(0),
               identityLoops(generic.getNumLoops())))
    return nullptr;
  return generic;
}

/// True if the body of `generic` yields the sum of its inputs' block
/// arguments, each exactly once, in any association.
bool isSumOfInputs(linalg::GenericOp generic) {
  Block *body = generic.getBlock();
  llvm::SmallBitVector seen(generic.getNumDpsInputs());
  SmallVector<Value> pending = {getYielded(generic)};
  while (!pending.empty()) {
    Value term = pending.pop_back_val();
    if (auto add = term.getDefiningOp<arith::AddFOp>()) {
      pending.append({add.getLhs(), add.getRhs()});
      continue;
    }
    auto arg = dyn_cast<BlockArgument>(term);
    if (!arg || arg.getOwner() != body ||
        arg.getArgNumber() >= generic.getNumDpsInputs() ||
        seen.test(arg.getArgNumber()))
      return false;
    seen.set(arg.getArgNumber());
  }
  return seen.all();
}

} // namespace

//===----------------------------------------------------------------------===//
// Products and scaling
//===----------------------------------------------------------------------===//

std::optional<double> mlir::rpe::readProductBody(linalg::LinalgOp op) {
  Block *body = op.getBlock();
  if (body->getNumArguments() != 3)
    return std::nullopt;
  Value lhs = body->getArgument(0), rhs = body->getArgument(1),
        acc = body->getArgument(2);
  Value product = otherOperand(
      getYielded(op).getDefiningOp<arith::AddFOp>().getOperation(), acc);
  auto mul = product ? product.getDefiningOp<arith::MulFOp>() : nullptr;
  if (!mul)
    return std::nullopt;
  // `factor` is `arg`, or `arg · c`: returns 1 or c.
  auto readFactor = [](Value factor, Value arg) -> std::optional<double> {
    if (factor == arg)
      return 1.0;
    auto scaled = factor.getDefiningOp<arith::MulFOp>();
    return readScalarConstant(otherOperand(scaled.getOperation(), arg));
  };
  for (auto [x, y] : {std::pair(mul.getLhs(), mul.getRhs()),
                      std::pair(mul.getRhs(), mul.getLhs())}) {
    std::optional<double> lhsFactor = readFactor(x, lhs);
    std::optional<double> rhsFactor = readFactor(y, rhs);
    if (lhsFactor && rhsFactor)
      return *lhsFactor * *rhsFactor;
  }
  return std::nullopt;
}

std::optional<BatchedProduct>
mlir::rpe::matchBatchedProduct(linalg::LinalgOp op) {
  if (!op || !op.hasPureTensorSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1 || op->getNumResults() != 1)
    return std::nullopt;
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  if (failed(dims) || dims->m.size() != 1 || dims->n.size() != 1 ||
      dims->k.size() != 1 || dims->batch.size() + 3 != op.getNumLoops())
    return std::nullopt;
  SmallVector<int64_t> batch(dims->batch.begin(), dims->batch.end());
  llvm::sort(batch);
  auto batchThen = [&](int64_t a, int64_t b) {
    SmallVector<int64_t> loops = batch;
    loops.append({a, b});
    return loops;
  };
  int64_t m = dims->m[0], n = dims->n[0], k = dims->k[0];
  OpOperand &lhs = *op.getDpsInputOperand(0), &rhs = *op.getDpsInputOperand(1),
            &out = *op.getDpsInitOperand(0);
  BatchedProduct product;
  if (!readsAt(op, lhs, batchThen(m, k)) ||
      !readsAt(op, out, batchThen(m, n)) || !isZeroFilled(out.get()))
    return std::nullopt;
  if (!readsAt(op, rhs, batchThen(k, n))) {
    if (!readsAt(op, rhs, batchThen(n, k)))
      return std::nullopt;
    product.rhsTransposed = true;
  }
  std::optional<double> scale = readProductBody(op);
  if (!scale)
    return std::nullopt;
  product.lhs = lhs.get();
  product.rhs = rhs.get();
  product.numBatchLoops = batch.size();
  product.scale = *scale;
  return product;
}

std::pair<Value, double> mlir::rpe::peelScaling(Value value) {
  linalg::GenericOp generic = getElementwise(value, 1);
  if (!generic || !readsAt(generic, *generic.getDpsInputOperand(0),
                           identityLoops(generic.getNumLoops())))
    return {value, 1.0};
  Value arg = generic.getBlock()->getArgument(0);
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

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

/// `[b, h, i, j] -> x[b, h, i]` as a generic reads a per-row value: a rank-3
/// row tensor, a `[b, h, i, 1]` reduction result, or the expansion of rows
/// to `[b, h, i, 1]`. Returns the rows, or null.
static Value getRowOperand(linalg::GenericOp generic, OpOperand &operand) {
  if (readsAt(generic, operand, {0, 1, 2}))
    return operand.get();
  if (!readsAt(generic, operand, {0, 1, 2, kUnitIndex}))
    return nullptr;
  if (Value rows = expandedFrom(operand.get(), {{0}, {1}, {2, 3}}))
    return rows;
  return operand.get();
}

/// The generic whose result `row` reduces the rows of `input` (the last of
/// 4 loops) combining each element into the accumulator with `Combine`,
/// from a zero-filled init if `fromZero`; else null.
template <typename... Combine>
static linalg::GenericOp matchRowReduction(Value row, Value input,
                                           bool fromZero) {
  auto generic = row.getDefiningOp<linalg::GenericOp>();
  if (!generic || generic.getNumDpsInputs() != 1 ||
      generic.getDpsInputs()[0] != input || generic.getNumLoops() != 4 ||
      generic.getNumReductionLoops() != 1 ||
      generic.getIteratorTypesArray()[3] != utils::IteratorType::reduction ||
      !readsAt(generic, *generic.getDpsInputOperand(0), {0, 1, 2, 3}))
    return nullptr;
  unsigned result = cast<OpResult>(row).getResultNumber();
  OpOperand &init = generic.getDpsInitsMutable()[result];
  if ((!readsAt(generic, init, {0, 1, 2}) &&
       !readsAt(generic, init, {0, 1, 2, kUnitIndex})) ||
      (fromZero && !isZeroFilled(init.get())))
    return nullptr;
  Operation *combine = getYielded(generic, result).getDefiningOp();
  Value element = generic.getBlock()->getArgument(0);
  Value accumulator = generic.getBlock()->getArgument(1 + result);
  if (!combine || !isa<Combine...>(combine) ||
      otherOperand(combine, element) != accumulator)
    return nullptr;
  return generic;
}

/// `x[b, h, i, j] <op> rows[b, h, i]` as a generic with input 0 read in
/// loop order: returns x and the rows, or nothing.
template <typename OpTy>
static std::optional<std::pair<Value, Value>> matchRowwise(Value value) {
  linalg::GenericOp generic = getElementwise(value, 2);
  if (!generic || generic.getNumLoops() != 4)
    return std::nullopt;
  auto op = getYielded(generic).getDefiningOp<OpTy>();
  if (!op || !isInputArgument(generic, op.getLhs(), 0) ||
      !isInputArgument(generic, op.getRhs(), 1) ||
      !readsAt(generic, *generic.getDpsInputOperand(0), {0, 1, 2, 3}))
    return std::nullopt;
  Value rows = getRowOperand(generic, *generic.getDpsInputOperand(1));
  if (!rows)
    return std::nullopt;
  return std::make_pair(generic.getDpsInputs()[0], rows);
}

Value mlir::rpe::matchSoftmax(Value probabilities) {
  if (auto softmax = probabilities.getDefiningOp<linalg::SoftmaxOp>())
    return cast<ShapedType>(softmax.getInput().getType()).getRank() == 4 &&
                   softmax.getDimension() == 3
               ? softmax.getInput()
               : nullptr;

  // P = E / sum(E), the sum from 0: an init would be added to every sum.
  auto quotient = matchRowwise<arith::DivFOp>(probabilities);
  if (!quotient || !matchRowReduction<arith::AddFOp>(
                       quotient->second, quotient->first, /*fromZero=*/true))
    return nullptr;

  // E = exp(S - max(S)). Any row constant would do for the max (softmax does
  // not depend on it), so neither its init nor an argmax beside it matter.
  linalg::GenericOp exp = getElementwise(quotient->first, 1);
  if (!exp || exp.getNumLoops() != 4 ||
      !readsAt(exp, *exp.getDpsInputOperand(0), {0, 1, 2, 3}))
    return nullptr;
  auto exponential = getYielded(exp).getDefiningOp<math::ExpOp>();
  if (!exponential || !isInputArgument(exp, exponential.getOperand(), 0))
    return nullptr;
  auto difference = matchRowwise<arith::SubFOp>(exp.getDpsInputs()[0]);
  if (!difference ||
      !matchRowReduction<arith::MaximumFOp, arith::MaxNumFOp>(
          difference->second, difference->first, /*fromZero=*/false))
    return nullptr;
  return difference->first;
}

//===----------------------------------------------------------------------===//
// Bias and mask
//===----------------------------------------------------------------------===//

/// `out[p, h] = table[idx[p], h]`: the table and idx.
static std::optional<TableGather> matchGather(Value value) {
  auto generic = value.getDefiningOp<linalg::GenericOp>();
  if (!generic || generic->getNumResults() != 1 ||
      generic.getNumDpsInputs() != 1 || generic.getNumLoops() != 2 ||
      generic.getNumParallelLoops() != 2 ||
      !readsAt(generic, *generic.getDpsInputOperand(0), {0}) ||
      !readsAt(generic, *generic.getDpsInitOperand(0), {0, 1}))
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
  Value element = generic.getBlock()->getArgument(0);
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
  return TableGather{extract.getTensor(), index};
}

std::optional<TableGather> mlir::rpe::matchTableGather(Value bias) {
  auto transpose = bias.getDefiningOp<linalg::TransposeOp>();
  if (!transpose || transpose.getPermutation() != ArrayRef<int64_t>{2, 0, 1})
    return std::nullopt;
  Value pairs = expandedFrom(transpose.getInput(), {{0, 1}, {2}});
  if (!pairs)
    return std::nullopt;
  return matchGather(pairs);
}

namespace {

/// The relative position bias `[H, N, N]` of a compact table: an rpe.lookup
/// or a gather in linalg.
struct TableBias {
  LookupOp lookup;
  std::optional<TableGather> gather;
};

std::optional<TableBias> matchTableBias(Value bias) {
  if (auto lookup = bias.getDefiningOp<LookupOp>())
    return TableBias{lookup, std::nullopt};
  if (std::optional<TableGather> gather = matchTableGather(bias))
    return TableBias{LookupOp(), gather};
  return std::nullopt;
}

/// What is added to the scores `[B, H, N, N]` before the softmax.
struct ScoreTerms {
  Value scores;
  TableBias bias;
  Value mask; // [nW, N, N], or null
};

/// The `[H, N, N]` source of a bias that `add` reads at `(h, i, j)`:
/// directly, or through its expansion to `[1, H, N, N]`, broadcast over the
/// windows (or, with a single window, read like the scores). Else null.
Value getHeadsBias(linalg::GenericOp add, OpOperand &operand) {
  if (readsAt(add, operand, {1, 2, 3}))
    return operand.get();
  if (readsAt(add, operand, {kUnitIndex, 1, 2, 3}))
    return expandedFrom(operand.get(), kMergeHeads);
  return nullptr;
}

/// True if `add` reads `operand`, `[nW, N, N]`, at `(b mod nW, i, j)`.
bool readsAsWindowMask(linalg::GenericOp add, OpOperand &operand) {
  auto type = dyn_cast<RankedTensorType>(operand.get().getType());
  if (!type || type.getRank() != 3 || type.isDynamicDim(0))
    return false;
  MLIRContext *context = add.getContext();
  return readsAtExprs(add, operand,
                      {getAffineDimExpr(0, context) % type.getDimSize(0),
                       getAffineDimExpr(2, context),
                       getAffineDimExpr(3, context)});
}

/// `scores + bias (+ mask)` in one generic, the bias read at (h, i, j) and
/// a mask at (b mod nW, i, j).
std::optional<ScoreTerms> matchScoreTerms(Value biased) {
  auto add = biased.getDefiningOp<linalg::GenericOp>();
  if (!add || (add.getNumDpsInputs() != 2 && add.getNumDpsInputs() != 3) ||
      add.getNumLoops() != 4 ||
      getElementwise(biased, add.getNumDpsInputs()) != add ||
      !isSumOfInputs(add))
    return std::nullopt;
  // With a single window, scores and bias are read alike: the bias is the
  // operand that is a table's bias.
  for (OpOperand *candidate : add.getDpsInputOperands()) {
    Value heads = getHeadsBias(add, *candidate);
    std::optional<TableBias> bias =
        heads ? matchTableBias(heads) : std::nullopt;
    if (!bias)
      continue;
    ScoreTerms terms{nullptr, *bias, nullptr};
    bool allRead = true;
    for (OpOperand *other : add.getDpsInputOperands()) {
      if (other == candidate)
        continue;
      if (!terms.scores && readsAt(add, *other, {0, 1, 2, 3}))
        terms.scores = other->get();
      else if (!terms.mask && readsAsWindowMask(add, *other))
        terms.mask = other->get();
      else
        allRead = false;
    }
    if (allRead && terms.scores)
      return terms;
  }
  return std::nullopt;
}

/// Swin's mask as timm writes it: `(x.view(B/nW, nW, H, N, N) +
/// mask[None, :, None]).view(B, H, N, N)`. Returns x and the `[nW, N, N]`
/// mask.
std::optional<std::pair<Value, Value>> matchMaskView(Value masked) {
  Value sum5d = collapsedFrom(masked, {{0, 1}, {2}, {3}, {4}});
  if (!sum5d)
    return std::nullopt;
  linalg::GenericOp add = getElementwise(sum5d, 2);
  if (!add || add.getNumLoops() != 5 || !isSumOfInputs(add))
    return std::nullopt;
  for (unsigned input : {0u, 1u}) {
    OpOperand &scores = *add.getDpsInputOperand(input);
    OpOperand &mask = *add.getDpsInputOperand(1 - input);
    if (!readsAt(add, scores, {0, 1, 2, 3, 4}) ||
        !readsAt(add, mask, {kUnitIndex, 1, kUnitIndex, 3, 4}))
      continue;
    Value inner = expandedFrom(scores.get(), {{0, 1}, {2}, {3}, {4}});
    Value windows = expandedFrom(mask.get(), {{0, 1}, {2, 3}, {4}});
    if (inner && windows)
      return std::make_pair(inner, windows);
  }
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Scores
//===----------------------------------------------------------------------===//

/// S = scale · q kᵀ: the product over merged heads (expanded to
/// [B, H, N, N]) or on [B, H, N, *], the scale on q, in the product's body
/// or on S. Fills query, key (and its permutation) and scale.
LogicalResult matchScores(Value scores, LinalgAttention &attention) {
  auto [unscaled, scoreScale] = peelScaling(scores);
  Value productResult = expandedFrom(unscaled, kMergeHeads);
  bool merged = static_cast<bool>(productResult);
  if (!merged)
    productResult = unscaled;
  std::optional<BatchedProduct> qk =
      matchBatchedProduct(productResult.getDefiningOp<linalg::LinalgOp>());
  if (!qk || qk->numBatchLoops != (merged ? 1u : 2u))
    return failure();
  Value scaledQuery = merged ? collapsedFrom(qk->lhs, kMergeHeads) : qk->lhs;
  Value key = merged ? collapsedFrom(qk->rhs, kMergeHeads) : qk->rhs;
  if (!scaledQuery || !key)
    return failure();
  auto [query, queryScale] = peelScaling(scaledQuery);
  attention.query = query;
  attention.scale = scoreScale * queryScale * qk->scale;
  attention.key = key;
  if (qk->rhsTransposed)
    return success();
  // kᵀ [B, H, d, N]: k is kᵀ transposed [0, 1, 3, 2], or, when kᵀ is itself
  // a transpose of some X, X transposed by the composition.
  SmallVector<int64_t> permutation = {0, 1, 3, 2};
  if (auto transpose = key.getDefiningOp<linalg::TransposeOp>()) {
    ArrayRef<int64_t> p = transpose.getPermutation();
    permutation = {p[0], p[1], p[3], p[2]};
    attention.key = transpose.getInput();
  }
  if (!isIdentityPermutation(permutation))
    attention.keyPermutation = permutation;
  return success();
}

/// The shape of `type` permuted by `permutation` (result dim i = dim
/// permutation[i]).
SmallVector<int64_t> permuteShape(RankedTensorType type,
                                  ArrayRef<int64_t> permutation) {
  if (permutation.empty())
    return SmallVector<int64_t>(type.getShape());
  SmallVector<int64_t> shape;
  for (int64_t dim : permutation)
    shape.push_back(type.getDimSize(dim));
  return shape;
}

/// Shapes and element types rpe.window_attention takes: q, k, v of
/// [B, H, N, *] with H, N, d static (B too over merged heads or when k must
/// be transposed), one element type for q, k, v and the table, the bias of
/// q's heads and tokens, a mask `[nW, N, N]` with nW dividing B, and a scale
/// that is a finite non-zero f32.
LogicalResult checkShapes(LinalgAttention &attention) {
  auto queryType = dyn_cast<RankedTensorType>(attention.query.getType());
  auto keyType = dyn_cast<RankedTensorType>(attention.key.getType());
  auto valueType = dyn_cast<RankedTensorType>(attention.value.getType());
  if (!queryType || !keyType || !valueType || queryType.getRank() != 4 ||
      keyType.getRank() != 4)
    return failure();
  Type element = queryType.getElementType();
  int64_t batch = queryType.getDimSize(0), heads = queryType.getDimSize(1),
          tokens = queryType.getDimSize(2);
  bool staticBatch = attention.mergedHeads || !attention.keyPermutation.empty();
  if (!(element.isF32() || element.isF16() || element.isBF16()) ||
      llvm::any_of(queryType.getShape().drop_front(), ShapedType::isDynamic) ||
      (staticBatch &&
       (!queryType.hasStaticShape() || !keyType.hasStaticShape())) ||
      keyType.getElementType() != element ||
      permuteShape(keyType, attention.keyPermutation) != queryType.getShape() ||
      valueType.getElementType() != element)
    return failure();

  SmallVector<int64_t> valueHeads =
      attention.mergedHeads ? SmallVector<int64_t>{batch * heads, tokens}
                            : SmallVector<int64_t>{batch, heads, tokens};
  if (valueType.getRank() != static_cast<int64_t>(valueHeads.size()) + 1 ||
      valueType.getShape().drop_back() != ArrayRef<int64_t>(valueHeads) ||
      ShapedType::isDynamic(valueType.getShape().back()))
    return failure();

  if (attention.lookup) {
    if (cast<ShapedType>(attention.lookup.getResult().getType()).getShape() !=
        ArrayRef<int64_t>{heads, tokens, tokens})
      return failure();
  } else {
    auto tableType =
        dyn_cast<RankedTensorType>(attention.gather->table.getType());
    if (!tableType || !tableType.hasStaticShape() || tableType.getRank() != 2 ||
        tableType.getElementType() != element ||
        tableType.getDimSize(1) != heads)
      return failure();
  }

  if (Value mask = attention.mask) {
    auto maskType = dyn_cast<RankedTensorType>(mask.getType());
    if (!maskType || !maskType.hasStaticShape() || maskType.getRank() != 3 ||
        !isa<FloatType>(maskType.getElementType()) ||
        maskType.getShape().drop_front() != ArrayRef<int64_t>{tokens, tokens} ||
        maskType.getDimSize(0) == 0 ||
        (!ShapedType::isDynamic(batch) && batch % maskType.getDimSize(0) != 0))
      return failure();
  }
  return success(
      APFloat(static_cast<float>(attention.scale)).isFiniteNonZero());
}

} // namespace

FailureOr<LinalgAttention>
mlir::rpe::matchLinalgAttention(linalg::LinalgOp product,
                                PatternRewriter &rewriter) {
  std::optional<BatchedProduct> pv = matchBatchedProduct(product);
  if (!pv || pv->rhsTransposed || pv->scale != 1.0 ||
      (pv->numBatchLoops != 1 && pv->numBatchLoops != 2))
    return rewriter.notifyMatchFailure(product, "not a P · v product");
  LinalgAttention attention;
  attention.mergedHeads = pv->numBatchLoops == 1;
  attention.value = pv->rhs;
  Value probabilities =
      attention.mergedHeads ? collapsedFrom(pv->lhs, kMergeHeads) : pv->lhs;
  if (!probabilities)
    return rewriter.notifyMatchFailure(product, "P is not [B, H, N, N]");

  Value scores = matchSoftmax(probabilities);
  if (!scores)
    return rewriter.notifyMatchFailure(product, "P is not a softmax");
  if (auto masked = matchMaskView(scores)) {
    scores = masked->first;
    attention.mask = masked->second;
  }
  std::optional<ScoreTerms> terms = matchScoreTerms(scores);
  if (!terms)
    return rewriter.notifyMatchFailure(product,
                                       "no table's bias added to the scores");
  if (terms->mask && attention.mask)
    return rewriter.notifyMatchFailure(product, "two masks");
  if (terms->mask)
    attention.mask = terms->mask;
  attention.lookup = terms->bias.lookup;
  attention.gather = terms->bias.gather;

  if (failed(matchScores(terms->scores, attention)))
    return rewriter.notifyMatchFailure(product, "scores are not q · kᵀ");
  if (failed(checkShapes(attention)))
    return rewriter.notifyMatchFailure(product, "unsupported shapes");
  return attention;
}
