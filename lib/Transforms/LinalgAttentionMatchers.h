//===- LinalgAttentionMatchers.h - Swin attention spelled in linalg -*- C++
//-*-===//
//
// The one place where Swin's window attention is recognised in upstream ops:
//
//   P   = softmax(scale · q kᵀ + bias [+ mask])   over the keys
//   out = P v
//
// as an importer writes it (torch-mlir's linalg-on-tensors: head-merged
// linalg.batch_matmul, a gather through a constant index, a decomposed
// softmax) or as a framework lowers it around rpe ops (linalg.generic
// contractions on [B, H, N, *], rpe.lookup, rpe.shift_mask, linalg.softmax).
// Each part may take any of its spellings. The matchers read structure
// only; whether a gathered index is Swin's relative position index, or a
// constant mask Swin's shifted-window mask, is proved by their user
// (rpe-raise-window-attention), which rewrites what matched into rpe ops.
//
//===----------------------------------------------------------------------===//

#ifndef RPE_TRANSFORMS_LINALGATTENTIONMATCHERS_H
#define RPE_TRANSFORMS_LINALGATTENTIONMATCHERS_H

#include "Rpe/RpeOps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/PatternMatch.h"

#include <optional>

namespace mlir::rpe {

//===----------------------------------------------------------------------===//
// Accesses, reshapes, constants
//===----------------------------------------------------------------------===//

/// In the loop lists of `readsAt`: the constant index 0 of a broadcast unit
/// extent.
constexpr int64_t kUnitIndex = -1;

/// True if `op` indexes `operand` at `loops` (loop positions, or kUnitIndex),
/// one entry per dimension of the operand. A dimension of static extent 1
/// can only be read at 0 in valid IR, whatever its map says: the importer
/// writes 0, or the loop itself when that loop has extent 1 (the number of
/// windows at batch 1 with one window, the images of a batch of 1), and
/// both are taken.
bool readsAt(linalg::LinalgOp op, OpOperand &operand, ArrayRef<int64_t> loops);

/// [B*H, ...] <-> [B, H, ...] on rank-4 tensors.
extern const SmallVector<ReassociationIndices> kMergeHeads;

/// The source of `value` if it is a tensor.collapse_shape with
/// `reassociation`, else null.
Value collapsedFrom(Value value, ArrayRef<ReassociationIndices> reassociation);

/// The source of `value` if it is a tensor.expand_shape with
/// `reassociation`, else null.
Value expandedFrom(Value value, ArrayRef<ReassociationIndices> reassociation);

/// A scalar float constant, possibly truncated or extended (torch-mlir
/// spells Python's float scale as an f64 constant truncated in the body).
std::optional<double> readScalarConstant(Value value);

//===----------------------------------------------------------------------===//
// The parts
//===----------------------------------------------------------------------===//

/// A batched product with one row, one column and one reduction loop,
/// written into a zero-filled init:
///
///   out[batch..., m, n] = scale · sum_k lhs[batch..., m, k] · rhs[batch..., k,
///   n]
///
/// (`rhs` read `[batch..., n, k]` when `rhsTransposed`): linalg.batch_matmul
/// (any maps), or a linalg.generic contraction, whose body may carry a
/// constant factor on one operand (`acc + (a · c) · b`, where a framework
/// puts the attention's scale).
struct BatchedProduct {
  Value lhs, rhs;
  unsigned numBatchLoops = 0;
  bool rhsTransposed = false;
  double scale = 1.0;
};

/// The constant factor of a product body `acc + x · y`, where {x, y} are
/// the two inputs' block arguments, either possibly multiplied by a
/// constant; nothing for any other body (linalg::isaContractionOpInterface
/// also takes `acc + (-x) · y`).
std::optional<double> readProductBody(linalg::LinalgOp op);

/// Matches a BatchedProduct. The loops come from upstream's
/// linalg::inferContractionDims. The body is read here:
/// linalg::isaContractionOpInterface would take bodies that feed the
/// factors through unary ops (`acc + (-a) · b`, `acc + exp(a) · b`), which
/// are not this product, and refuse the constant factor.
std::optional<BatchedProduct> matchBatchedProduct(linalg::LinalgOp op);

/// `value = input · c` (or `input / c`) elementwise with a constant scalar
/// `c`: returns the input and the factor; otherwise `value` and 1.
std::pair<Value, double> peelScaling(Value value);

/// P = softmax(S) over the last of 4 dimensions, as linalg.softmax or
/// decomposed the way torch-mlir writes it: max (possibly with an argmax
/// beside it), sub, exp, sum from zero, div. Returns S, or null.
Value matchSoftmax(Value probabilities);

/// Swin's bias gather in linalg: `[H, N, N]` = transpose [2, 0, 1] of the
/// `[N, N, H]` expansion of `out[p, h] = table[idx[p], h]` over the
/// flattened pairs `p`, idx read with or without the wrap of negative
/// indices (`idx < 0 ? idx + T : idx`, a no-op on a proved index).
struct TableGather {
  Value table;
  Value index; // [N*N], or [N, N] when the gather reads its collapse
};
std::optional<TableGather> matchTableGather(Value bias);

//===----------------------------------------------------------------------===//
// The attention
//===----------------------------------------------------------------------===//

/// What a matched attention is made of, in the operands of
/// rpe.window_attention.
struct LinalgAttention {
  /// [B, H, N, d].
  Value query;
  /// k, [B, H, N, d], is `key` permuted by `keyPermutation` (empty: `key`
  /// itself). kᵀ often arrives as a transpose of a view: [0, 1, 3, 2] of
  /// [B, H, N, d] (timm), [0, 2, 3, 1] of [B, N, H, d] (transformers).
  Value key;
  SmallVector<int64_t> keyPermutation;
  /// [B, H, N, dv], or [B*H, N, dv] when `mergedHeads`.
  Value value;
  /// The P·v product is over merged heads (`[B*H, N, dv]`, torch-mlir's
  /// batch_matmul) rather than `[B, H, N, dv]`.
  bool mergedHeads = false;
  double scale = 1.0;
  /// The bias: an rpe.lookup, or a gather in linalg (its index unproved).
  LookupOp lookup;
  std::optional<TableGather> gather;
  /// `[nW, N, N]`, window b reading `mask[b mod nW]`; or null.
  Value mask;
};

/// The attention whose P·v product is `product`, or a reason it is not
/// one (reported through `rewriter`). Shapes and element types are checked
/// for rpe.window_attention; the gathered index and a constant mask are not.
FailureOr<LinalgAttention> matchLinalgAttention(linalg::LinalgOp product,
                                                PatternRewriter &rewriter);

} // namespace mlir::rpe

#endif // RPE_TRANSFORMS_LINALGATTENTIONMATCHERS_H
