//===- FoldDataMovement.cpp - rpe-fold-data-movement ----------------------===//
//
// Between the GEMMs and the attention, an imported Swin block moves its
// tokens around: the cyclic shift (torch.roll: per dimension, two
// tensor.extract_slice cast to a dynamic extent and joined by a
// tensor.concat), the window partition and reverse (tensor.expand_shape,
// linalg.transpose, tensor.collapse_shape), the split of the fused qkv
// projection into heads and their merge. Each transpose and concatenation
// writes a whole tensor that the next op reads back.
//
// A chain of such ops that copies (holds a transpose or a concatenation)
// becomes one elementwise linalg.generic over the chain's result whose body
// reads each element from the chain's source with tensor.extract, at
// indices traced back through the chain from linalg.index: divisions and
// remainders for a collapse, a linearization for an expand, a permutation
// for a transpose, offsets for a slice, a select for a concatenation of
// pieces of one source. The gather is one copy instead of several, and
// fuses into its consumer like any elementwise op (rpe-fuse-elementwise,
// rpe-tile-rows).
//
// A chain is folded only where each row of its result (the innermost
// dimension) is a contiguous run of the source's innermost dimension, so
// that rpe-vectorize-rows reads it with one vector load; a final collapse
// that merges the innermost dimension with others (the merge of heads), or
// a final cast to a dynamic shape, is applied to the gather's result
// instead. Chains of views alone (reshapes, slices) are left as they are.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::rpe {
#define GEN_PASS_DEF_RPEFOLDDATAMOVEMENT
#include "Rpe/Passes.h.inc"
} // namespace mlir::rpe

using namespace mlir;

/// The static extent of `value` along `dim`, seen through a cast to a
/// dynamic extent (ShapedType::kDynamic where there is none).
static int64_t staticDimSize(Value value, int64_t dim) {
  if (auto cast = value.getDefiningOp<tensor::CastOp>())
    return cast.getSource().getType().getDimSize(dim);
  return cast<RankedTensorType>(value.getType()).getDimSize(dim);
}

/// Whether `op` moves data without computing, on static shapes: a link of
/// a chain. (The importer casts the static slices of a roll to dynamic
/// extents before concatenating them; a cast from a static type qualifies.)
static bool isMovement(Operation *op) {
  if (!op || op->getNumResults() != 1)
    return false;
  if (auto cast = dyn_cast<tensor::CastOp>(op))
    return cast.getSource().getType().hasStaticShape();
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!type || !type.hasStaticShape())
    return false;
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op))
    return !ShapedType::isDynamicShape(slice.getStaticOffsets()) &&
           !ShapedType::isDynamicShape(slice.getStaticStrides());
  // Where each input starts along the concatenated dimension must be known.
  if (auto concat = dyn_cast<tensor::ConcatOp>(op))
    return llvm::none_of(concat.getInputs(), [&](Value input) {
      return ShapedType::isDynamic(staticDimSize(input, concat.getDim()));
    });
  return isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp,
             linalg::TransposeOp>(op);
}

/// Whether `op` writes a copy of its input (what folding saves).
static bool isCopy(Operation *op) {
  return isa<linalg::TransposeOp, tensor::ConcatOp>(op);
}

/// The value a movement op reads.
static Value movedValue(Operation *op) {
  if (auto transpose = dyn_cast<linalg::TransposeOp>(op))
    return transpose.getInput();
  return op->getOperand(0);
}

namespace {
/// Emits, inside the gather's body, where an element of a chain's value
/// comes from: the chain's source and its indices there.
class ChainTracer {
public:
  ChainTracer(OpBuilder &builder, Location loc) : b(builder), loc(loc) {}

  /// The value that `value`'s elements are read from (through the chain).
  static Value source(Value value) {
    Operation *op = value.getDefiningOp();
    if (!isMovement(op))
      return value;
    if (auto concat = dyn_cast<tensor::ConcatOp>(op)) {
      Value common = source(concat.getInputs().front());
      for (Value input : concat.getInputs().drop_front())
        if (source(input) != common)
          return value;
      return common;
    }
    return source(movedValue(op));
  }

  /// Rewrites `indices` of `value` into indices of `source(value)`.
  SmallVector<Value> trace(Value value, SmallVector<Value> indices) {
    Operation *op = value.getDefiningOp();
    if (!isMovement(op) || source(value) == value)
      return indices;
    if (auto cast = dyn_cast<tensor::CastOp>(op))
      return trace(cast.getSource(), indices);
    if (auto transpose = dyn_cast<linalg::TransposeOp>(op)) {
      // Result dimension k is input dimension permutation[k].
      SmallVector<Value> inputIndices(indices.size());
      for (auto [k, dim] : llvm::enumerate(transpose.getPermutation()))
        inputIndices[dim] = indices[k];
      return trace(transpose.getInput(), inputIndices);
    }
    if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op)) {
      ArrayRef<int64_t> shape = expand.getResultType().getShape();
      SmallVector<Value> srcIndices;
      for (ReassociationIndices group : expand.getReassociationIndices())
        srcIndices.push_back(linearize(group, indices, shape));
      return trace(expand.getSrc(), srcIndices);
    }
    if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op)) {
      ArrayRef<int64_t> shape = collapse.getSrcType().getShape();
      SmallVector<Value> srcIndices;
      for (auto [index, group] :
           llvm::zip_equal(indices, collapse.getReassociationIndices()))
        delinearize(index, group, shape, srcIndices);
      return trace(collapse.getSrc(), srcIndices);
    }
    if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
      llvm::SmallBitVector dropped = slice.getDroppedDims();
      SmallVector<Value> srcIndices;
      auto result = indices.begin();
      for (auto [dim, offset, stride] : llvm::enumerate(
               slice.getStaticOffsets(), slice.getStaticStrides())) {
        Value index = dropped.test(dim) ? constant(0) : *result++;
        if (stride != 1)
          index = arith::MulIOp::create(b, loc, index, constant(stride));
        srcIndices.push_back(add(constant(offset), index));
      }
      return trace(slice.getSource(), srcIndices);
    }
    auto concat = cast<tensor::ConcatOp>(op);
    return traceConcat(concat, indices);
  }

private:
  /// A concatenation of inputs of one source (a roll: two slices of a
  /// tensor in the other order): each input's indices, selected by which
  /// input the index along the concatenated dimension falls into.
  SmallVector<Value> traceConcat(tensor::ConcatOp concat,
                                 ArrayRef<Value> indices) {
    int64_t dim = concat.getDim();
    SmallVector<SmallVector<Value>> perInput;
    SmallVector<Value> ends;
    int64_t offset = 0;
    for (Value input : concat.getInputs()) {
      SmallVector<Value> inputIndices(indices);
      inputIndices[dim] = add(constant(-offset), indices[dim]);
      perInput.push_back(trace(input, inputIndices));
      offset += staticDimSize(input, dim);
      ends.push_back(constant(offset));
    }
    SmallVector<Value> result = perInput.back();
    for (int64_t i = static_cast<int64_t>(perInput.size()) - 2; i >= 0; --i) {
      Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                           indices[dim], ends[i]);
      for (auto [selected, candidate] : llvm::zip_equal(result, perInput[i]))
        if (selected != candidate)
          selected =
              arith::SelectOp::create(b, loc, inside, candidate, selected);
    }
    return result;
  }

  Value constant(int64_t value) {
    return arith::ConstantIndexOp::create(b, loc, value);
  }

  /// `lhs + rhs`, with the row's own index last (the form in which the
  /// vectorizer recognizes a contiguous read: an addition to the trailing
  /// index).
  Value add(Value lhs, Value rhs) {
    if (matchPattern(lhs, m_Zero()))
      return rhs;
    return arith::AddIOp::create(b, loc, lhs, rhs);
  }

  Value linearize(ReassociationIndices group, ArrayRef<Value> indices,
                  ArrayRef<int64_t> shape) {
    // ((i0 * s1 + i1) * s2 + i2) ..., the innermost index added last.
    Value linear = constant(0);
    for (int64_t dim : group) {
      if (!matchPattern(linear, m_Zero()))
        linear = arith::MulIOp::create(b, loc, linear, constant(shape[dim]));
      linear = add(linear, indices[dim]);
    }
    return linear;
  }

  void delinearize(Value index, ReassociationIndices group,
                   ArrayRef<int64_t> shape, SmallVectorImpl<Value> &out) {
    SmallVector<Value> parts(group.size());
    for (int64_t i = static_cast<int64_t>(group.size()) - 1; i >= 0; --i) {
      int64_t size = shape[group[i]];
      if (i == 0) {
        parts[i] = index;
        break;
      }
      if (size == 1) {
        parts[i] = constant(0);
        continue;
      }
      parts[i] = arith::RemUIOp::create(b, loc, index, constant(size));
      index = arith::DivUIOp::create(b, loc, index, constant(size));
    }
    llvm::append_range(out, parts);
  }

  OpBuilder &b;
  Location loc;
};
} // namespace

/// Whether `value` is computed (inside the gather's body) from `index`.
static bool dependsOn(Value value, Value index) {
  if (value == index)
    return true;
  Operation *def = value.getDefiningOp();
  return def && llvm::any_of(def->getOperands(), [&](Value operand) {
           return dependsOn(operand, index);
         });
}

/// Whether `index` is `lastIndex` plus values that do not depend on it:
/// consecutive elements of a row are consecutive in the source, the form in
/// which the vectorizer reads a row with one contiguous load.
static bool isRowIndex(Value index, Value lastIndex) {
  if (index == lastIndex)
    return true;
  auto addi = index.getDefiningOp<arith::AddIOp>();
  return addi && !dependsOn(addi.getLhs(), lastIndex) &&
         isRowIndex(addi.getRhs(), lastIndex);
}

/// Replaces the chain that ends in `end` by a gather from its source.
/// Fails, leaving the IR as it was, where the rows of the result would not
/// be contiguous rows of the source.
static LogicalResult foldChain(RewriterBase &rewriter, Operation *end) {
  Value result = end->getResult(0);
  // A collapse that merges the innermost dimension with others, or a cast
  // to a dynamic shape, is applied to the gather's result (a view): the
  // gather's rows stay the source's, its shape static.
  Value gathered = result;
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(end))
    if (collapse.getReassociationIndices().back().size() > 1)
      gathered = collapse.getSrc();
  if (auto cast = dyn_cast<tensor::CastOp>(end))
    gathered = cast.getSource();
  Value source = ChainTracer::source(gathered);
  if (source == gathered)
    return failure();
  auto type = cast<RankedTensorType>(gathered.getType());
  int64_t rank = type.getRank();
  if (rank == 0)
    return failure();

  Location loc = end->getLoc();
  rewriter.setInsertionPoint(end);
  Value empty = tensor::EmptyOp::create(rewriter, loc, type.getShape(),
                                        type.getElementType());
  SmallVector<AffineMap> maps = {rewriter.getMultiDimIdentityMap(rank)};
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  bool contiguous = true;
  auto gather = linalg::GenericOp::create(
      rewriter, loc, type, /*inputs=*/ValueRange{}, ValueRange{empty}, maps,
      iterators, [&](OpBuilder &b, Location bodyLoc, ValueRange) {
        SmallVector<Value> indices;
        for (int64_t dim = 0; dim < rank; ++dim)
          indices.push_back(linalg::IndexOp::create(b, bodyLoc, dim));
        ChainTracer tracer(b, bodyLoc);
        SmallVector<Value> srcIndices = tracer.trace(gathered, indices);
        Value last = indices.back();
        contiguous =
            isRowIndex(srcIndices.back(), last) &&
            llvm::none_of(ArrayRef(srcIndices).drop_back(),
                          [&](Value index) { return dependsOn(index, last); });
        Value element =
            tensor::ExtractOp::create(b, bodyLoc, source, srcIndices);
        linalg::YieldOp::create(b, bodyLoc, element);
      });
  if (!contiguous) {
    rewriter.eraseOp(gather);
    rewriter.eraseOp(empty.getDefiningOp());
    return failure();
  }
  Value replacement = gather.getResult(0);
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(end);
      collapse && gathered != result)
    replacement = tensor::CollapseShapeOp::create(
        rewriter, loc, result.getType(), replacement,
        collapse.getReassociationIndices());
  else if (isa<tensor::CastOp>(end))
    replacement =
        tensor::CastOp::create(rewriter, loc, result.getType(), replacement);
  rewriter.replaceOp(end, replacement);
  return success();
}

/// Whether the chain ending in `value` copies data (a transpose or a
/// concatenation); a chain of reshapes and slices alone is views.
static bool copies(Value value) {
  Operation *op = value.getDefiningOp();
  return isMovement(op) && (isCopy(op) || copies(movedValue(op)));
}

namespace {
struct RpeFoldDataMovementPass
    : public rpe::impl::RpeFoldDataMovementBase<RpeFoldDataMovementPass> {
  void runOnOperation() override {
    // The ends of chains, consumers first: a movement op with a user that
    // is not one.
    SmallVector<Operation *> ends;
    getOperation()->walk([&](Operation *op) {
      if (!isMovement(op) || !copies(op->getResult(0)))
        return;
      if (llvm::any_of(op->getUsers(),
                       [](Operation *user) { return !isMovement(user); }))
        ends.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (Operation *end : llvm::reverse(ends))
      (void)foldChain(rewriter, end);
    // The links left without users, users first.
    SmallVector<Operation *> links;
    getOperation()->walk([&](Operation *op) {
      if (isMovement(op))
        links.push_back(op);
    });
    for (Operation *link : llvm::reverse(links))
      if (link->use_empty())
        rewriter.eraseOp(link);
  }
};
} // namespace
