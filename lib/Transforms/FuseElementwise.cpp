//===- FuseElementwise.cpp - rpe-fuse-elementwise -------------------------===//
//
// torch-mlir writes a LayerNorm as about ten generics (the f32 -> f64
// extension, the mean and the variance as reductions over the channels,
// the centring, rsqrt, the scale and the shift), each a whole tensor
// written and read back. Unit dimensions are folded first
// (linalg-fold-unit-extent-dims), so that the `[.., 1]` results of the
// reductions and their elementwise consumers meet on the same shapes; then
// upstream's elementwise fusion runs under a control of ours. An
// elementwise producer fuses into a generic consumer
//
//  * always where its body is only casts (or a copy or broadcast), which
//    cost less to recompute than to read back;
//  * else only where every use of it is an input of a generic that takes
//    it, so that the producer goes away rather than being computed twice.
//
// Nothing fuses into a product (a matmul or convolution spelled as a
// generic): the producer would be recomputed for every element of the other
// factor. A LayerNorm becomes its reductions and one elementwise generic;
// the numerics (f64 where the importer wrote f64) are unchanged. It runs
// after rpe-form-matmul, whose epilogues took the products' elementwise
// consumers, and before rpe-tile-rows.
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
  return llvm::all_of(
      producer.getBody()->without_terminator(), [](Operation &op) {
        return isa<arith::ExtFOp, arith::TruncFOp, arith::ExtSIOp,
                   arith::ExtUIOp, arith::TruncIOp>(op);
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
