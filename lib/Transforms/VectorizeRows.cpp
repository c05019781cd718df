//===- VectorizeRows.cpp - rpe-vectorize-rows -----------------------------===//
//
// Vectorizes, with upstream's linalg::vectorize, each linalg op on tensors
// whose loops have extent 1 but the last (as rpe-tile-rows leaves them),
// when the row is at most `max-row-elements` long, every operand is read
// and written contiguously along it (indexed by the last loop in its last
// dimension, or broadcast along it) and every op of its body has a vector
// lowering to LLVM. Gathers (tensor.extract in the body, as
// rpe-fold-data-movement writes them) become contiguous reads where their
// last index is the row's.
//
// Then upstream patterns bring the vectors to the 1-D form that the LLVM
// lowering takes: leading unit dimensions are cast away, an elementwise op
// of broadcast values (a row's mean and inverse standard deviation) is
// computed once before the broadcast, and reductions along the row become
// vector.reduction, marked `reassoc`: LLVM adds the halves of the row lane
// by lane before the final horizontal step. That reorders the sum (the last
// bits may differ from a sequential sum; sums the importer keeps in f64
// stay f64). An f32 math.erf on a vector (a GELU that no GEMM epilogue
// took) becomes upstream's polynomial approximation rather than a libm call
// per element; f64 and scalar ones stay libm calls. Ops that do not
// qualify are left for convert-linalg-to-loops.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/Transforms/LoweringPatterns.h"
#include "mlir/Dialect/Vector/Transforms/VectorRewritePatterns.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::rpe {
#define GEN_PASS_DEF_RPEVECTORIZEROWS
#include "Rpe/Passes.h.inc"
} // namespace mlir::rpe

using namespace mlir;

/// Whether every op of `op`'s body has a lowering to LLVM on vectors in
/// `rpe-cpu-pipeline`: math ops without an LLVM intrinsic (`math.tanh`, an
/// f64 `math.erf`) become libm calls, element by element, after the vector
/// lowering, so a body with them stays scalar. An f32 `math.erf` (a GELU)
/// takes upstream's polynomial approximation on vectors.
static bool hasVectorLowering(linalg::LinalgOp op) {
  return op->walk([](Operation *inner) {
             if (inner->getDialect() &&
                 inner->getDialect()->getNamespace() != "math")
               return WalkResult::advance();
             if (auto erf = dyn_cast<math::ErfOp>(inner);
                 erf && erf.getType().isF32())
               return WalkResult::advance();
             if (isa<math::AbsFOp, math::CeilOp, math::CopySignOp, math::CosOp,
                     math::ExpOp, math::Exp2Op, math::ExpM1Op, math::FloorOp,
                     math::FmaOp, math::LogOp, math::Log10Op, math::Log1pOp,
                     math::Log2Op, math::PowFOp, math::RoundEvenOp,
                     math::RoundOp, math::RsqrtOp, math::SinOp, math::SqrtOp,
                     math::TruncOp>(inner))
               return WalkResult::advance();
             return WalkResult::interrupt();
           }).wasInterrupted() == false;
}

/// Whether `op` computes one row that is short enough to be held in vectors
/// and that it reads and writes contiguously: every loop but the last has
/// extent 1, and each operand is indexed along the last loop in its last
/// dimension or not at all (a broadcast).
static bool isVectorizableRow(linalg::LinalgOp op, int64_t maxElements) {
  if (!op.hasPureTensorSemantics() || op.hasDynamicShape() ||
      op.getNumLoops() == 0)
    return false;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (ranges.back() > maxElements ||
      llvm::any_of(ArrayRef(ranges).drop_back(),
                   [](int64_t range) { return range != 1; }))
    return false;
  unsigned last = op.getNumLoops() - 1;
  for (OpOperand &operand : op->getOpOperands()) {
    AffineMap map = op.getMatchingIndexingMap(&operand);
    for (auto [position, result] : llvm::enumerate(map.getResults()))
      if (result.isFunctionOfDim(last) &&
          (position + 1 != map.getNumResults() ||
           result != getAffineDimExpr(last, op.getContext())))
        return false;
  }
  return linalg::hasVectorizationImpl(op) && hasVectorLowering(op);
}

namespace {
/// Forwards the value of a one-element `vector.transfer_write` to a
/// `vector.transfer_read` of the written tensor at the same indices (a
/// row's reduction written, then read back broadcast by its consumer).
/// Upstream forwards only reads of the written vector's type; this one
/// takes any shape of one element.
struct ForwardOneElementWrite : OpRewritePattern<vector::TransferReadOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(vector::TransferReadOp read,
                                PatternRewriter &rewriter) const override {
    auto write = read.getBase().getDefiningOp<vector::TransferWriteOp>();
    if (!write || read.getMask() || write.getMask() ||
        read.hasOutOfBoundsDim() || write.hasOutOfBoundsDim() ||
        read.getVectorType().getNumElements() != 1 ||
        write.getVectorType().getNumElements() != 1 ||
        read.getIndices() != write.getIndices())
      return failure();
    rewriter.replaceOpWithNewOp<vector::ShapeCastOp>(read, read.getVectorType(),
                                                     write.getVector());
    return success();
  }
};

/// Broadcasts a 0-D vector's element rather than the vector, so that an
/// elementwise op of it and of a broadcast scalar sinks below the
/// broadcasts (upstream's sinking wants sources of one type).
struct BroadcastZeroDAsScalar : OpRewritePattern<vector::BroadcastOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(vector::BroadcastOp broadcast,
                                PatternRewriter &rewriter) const override {
    auto source = dyn_cast<VectorType>(broadcast.getSourceType());
    if (!source || source.getRank() != 0)
      return failure();
    Value element =
        vector::ExtractOp::create(rewriter, broadcast.getLoc(),
                                  broadcast.getSource(), ArrayRef<int64_t>{});
    rewriter.replaceOpWithNewOp<vector::BroadcastOp>(
        broadcast, broadcast.getResultVectorType(), element);
    return success();
  }
};
} // namespace

namespace {
struct RpeVectorizeRowsPass
    : public rpe::impl::RpeVectorizeRowsBase<RpeVectorizeRowsPass> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *context = &getContext();
    SmallVector<linalg::LinalgOp> rows;
    getOperation()->walk([&](linalg::LinalgOp op) {
      if (isVectorizableRow(op, maxRowElements))
        rows.push_back(op);
    });
    // Reductions that were there before are not this pass's to reassociate.
    llvm::DenseSet<Operation *> earlierReductions;
    getOperation()->walk(
        [&](vector::ReductionOp op) { earlierReductions.insert(op); });
    IRRewriter rewriter(context);
    for (linalg::LinalgOp op : rows) {
      rewriter.setInsertionPoint(op);
      // Gathers (tensor.extract in the body) read a row where their last
      // index is the row's: vectorizeNDExtract lets the vectorizer find it.
      FailureOr<linalg::VectorizationResult> vectorized = linalg::vectorize(
          rewriter, op, /*inputVectorSizes=*/{}, /*inputScalableVecDims=*/{},
          /*vectorizeNDExtract=*/true);
      if (failed(vectorized))
        continue;
      rewriter.replaceOp(op, vectorized->replacements);
    }

    // The erfs now on vectors (GELUs): upstream's polynomial, in vectors,
    // rather than a libm call per element. Scalar ones are left as they are.
    SmallVector<Operation *> vectorErfs;
    getOperation()->walk([&](math::ErfOp erf) {
      if (isa<VectorType>(erf.getType()))
        vectorErfs.push_back(erf);
    });
    RewritePatternSet erfPatterns(context);
    populatePolynomialApproximateErfPattern(erfPatterns);
    if (failed(applyOpPatternsGreedily(vectorErfs, std::move(erfPatterns))))
      return signalPassFailure();

    RewritePatternSet patterns(context);
    vector::populateCastAwayVectorLeadingOneDimPatterns(patterns);
    vector::populateDropUnitDimWithShapeCastPatterns(patterns);
    // An elementwise op of broadcast values (the mean and the inverse
    // standard deviation of a row) is computed once, then broadcast.
    vector::populateSinkVectorOpsPatterns(patterns);
    patterns.add<ForwardOneElementWrite, BroadcastZeroDAsScalar>(context);
    vector::populateVectorMultiReductionLoweringPatterns(
        patterns, vector::VectorMultiReductionLowering::InnerReduction);
    // Reads of a value broadcast along the row (a row's mean): a read of
    // the value, then a broadcast, which the LLVM lowering takes.
    vector::populateVectorTransferPermutationMapLoweringPatterns(patterns);
    vector::populateVectorToVectorCanonicalizationPatterns(patterns);
    // The vector ops' own canonicalizations (a broadcast extracted from,
    // a write read back) clean up after the patterns above.
    for (RegisteredOperationName name : context->getRegisteredOperations())
      if (name.getDialectNamespace() ==
          vector::VectorDialect::getDialectNamespace())
        name.getCanonicalizationPatterns(patterns, context);
    tensor::ExtractSliceOp::getCanonicalizationPatterns(patterns, context);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();

    // A row's sum is one horizontal reduction of its vector, which LLVM
    // splits into halves added lane by lane: the additions are reassociated
    // (the result may differ from the sequential sum in the last bits, well
    // within the f32 tolerance; the f64 sums of a LayerNorm stay f64).
    getOperation()->walk([&](vector::ReductionOp reduction) {
      if (!isa<FloatType>(reduction.getType()) ||
          earlierReductions.contains(reduction))
        return;
      reduction.setFastmath(reduction.getFastmath() |
                            arith::FastMathFlags::reassoc);
    });
  }
};
} // namespace
