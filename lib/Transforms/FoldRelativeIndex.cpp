//===- FoldRelativeIndex.cpp - rpe-fold-relative-index --------------------===//
//
// Replaces the rpe ops whose value is known at compile time by constants.
// The values come from the ops' own folders (RpeOps.cpp), so the pass, the
// canonicalizer and the lowering agree by construction.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Passes.h"

#include "mlir/IR/PatternMatch.h"

namespace mlir::rpe {
#define GEN_PASS_DEF_RPEFOLDRELATIVEINDEX
#include "Rpe/Passes.h.inc"
} // namespace mlir::rpe

using namespace mlir;
using namespace mlir::rpe;

LogicalResult mlir::rpe::replaceWithFoldedConstant(RewriterBase &rewriter,
                                                   Operation *op) {
  // Operands are already constants or not: `fold` with the constant operand
  // attributes decides, e.g. a lookup of a non-constant table does not fold.
  SmallVector<Attribute> operandConstants(op->getNumOperands());
  for (auto [i, operand] : llvm::enumerate(op->getOperands()))
    matchPattern(operand, m_Constant(&operandConstants[i]));
  SmallVector<OpFoldResult> results;
  if (op->getNumResults() != 1 || failed(op->fold(operandConstants, results)) ||
      results.size() != 1)
    return failure();
  auto value = llvm::dyn_cast_if_present<Attribute>(results.front());
  if (!value)
    return failure();
  rewriter.setInsertionPoint(op);
  Operation *constant = op->getDialect()->materializeConstant(
      rewriter, value, op->getResult(0).getType(), op->getLoc());
  if (!constant)
    return failure();
  rewriter.replaceOp(op, constant->getResults());
  return success();
}

namespace {
struct RpeFoldRelativeIndexPass
    : public rpe::impl::RpeFoldRelativeIndexBase<RpeFoldRelativeIndexPass> {
  void runOnOperation() override {
    SmallVector<Operation *> candidates;
    getOperation()->walk([&](Operation *op) {
      if (isa<RelativeIndexOp, ShiftMaskOp, LookupOp>(op))
        candidates.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (Operation *op : candidates)
      (void)replaceWithFoldedConstant(rewriter, op);
  }
};
} // namespace
