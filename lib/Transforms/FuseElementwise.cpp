//===- FuseElementwise.cpp - rpe-fuse-elementwise -------------------------===//
//
// Upstream's elementwise fusion with a control of our own: a producer is
// fused where it then disappears (every user is a generic it fuses into),
// or where recomputing it costs less than reading it back (a cast or a
// copy). Unit dimensions are folded first, so that the reductions of a
// LayerNorm (`[.., 1]` results) and their elementwise consumers meet on the
// same shapes.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::rpe {
#define GEN_PASS_DEF_RPEFUSEELEMENTWISE
#include "Rpe/Passes.h.inc"
} // namespace mlir::rpe

using namespace mlir;

/// Whether fusing the producer of `operand` into its owner would recompute
/// the producer's elements over a loop of the owner's that is a product
/// (a matmul or a convolution spelled as a generic: the loops that the
/// operand's map leaves out are parallel, the owner accumulates). A
/// broadcast operand of an elementwise op or of a reduction over the
/// missing loop is fine: vectorized, the broadcast value is computed once.
static bool recomputesPerProduct(linalg::GenericOp owner, OpOperand *operand) {
  AffineMap map = owner.getMatchingIndexingMap(operand);
  if (!map.isProjectedPermutation())
    return true;
  if (owner.getNumReductionLoops() == 0)
    return false;
  SmallVector<utils::IteratorType> iterators = owner.getIteratorTypesArray();
  for (unsigned loop = 0; loop < owner.getNumLoops(); ++loop)
    if (!map.isFunctionOfDim(loop) &&
        iterators[loop] == utils::IteratorType::parallel)
      return true;
  return false;
}

/// Whether the body of `producer` is so cheap (casts and nothing else) that
/// recomputing it in a consumer costs less than reading its result back.
static bool isCheapToRecompute(linalg::GenericOp producer) {
  return llvm::all_of(producer.getBody()->without_terminator(),
                      [](Operation &op) {
                        return isa<arith::ExtFOp, arith::TruncFOp,
                                   arith::ExtSIOp, arith::ExtUIOp,
                                   arith::TruncIOp>(op);
                      });
}

/// The control of the fusion of `fusedOperand`'s producer into its owner.
static bool shouldFuse(OpOperand *fusedOperand) {
  auto producer = fusedOperand->get().getDefiningOp<linalg::GenericOp>();
  auto consumer = dyn_cast<linalg::GenericOp>(fusedOperand->getOwner());
  if (!producer || !consumer || recomputesPerProduct(consumer, fusedOperand))
    return false;
  if (isCheapToRecompute(producer))
    return true;
  // Otherwise only where the producer goes away: each of its uses takes it
  // (the patterns fuse it into them one at a time). A producer that stays
  // for another user would be computed twice.
  for (OpResult result : producer->getResults())
    for (OpOperand &use : result.getUses()) {
      auto user = dyn_cast<linalg::GenericOp>(use.getOwner());
      if (!user || !user.isDpsInput(&use) || recomputesPerProduct(user, &use))
        return false;
    }
  return true;
}

namespace {
struct RpeFuseElementwisePass
    : public rpe::impl::RpeFuseElementwiseBase<RpeFuseElementwisePass> {
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    Operation *root = getOperation();

    // Unit dimensions away first: the folding patterns must not run with
    // other patterns in the same greedy driver (see Transforms.h).
    RewritePatternSet unitDims(context);
    linalg::ControlDropUnitDims unitDimOptions;
    linalg::populateFoldUnitExtentDimsPatterns(unitDims, unitDimOptions);
    if (failed(applyPatternsGreedily(root, std::move(unitDims))))
      return signalPassFailure();

    RewritePatternSet fusion(context);
    linalg::populateElementwiseOpsFusionPatterns(fusion, shouldFuse);
    // Fusion leaves generics with repeated operands and dead results.
    linalg::populateEraseUnusedOperandsAndResultsPatterns(fusion);
    linalg::populateFoldUnitExtentDimsCanonicalizationPatterns(fusion,
                                                               unitDimOptions);
    tensor::populateFoldTensorEmptyPatterns(fusion);
    if (failed(applyPatternsGreedily(root, std::move(fusion))))
      return signalPassFailure();
  }
};
} // namespace
