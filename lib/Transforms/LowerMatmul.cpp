//===- LowerMatmul.cpp - rpe-lower-matmul ---------------------------------===//
//
// Replaces each bufferized rpe.matmul by its CPU kernel (Rpe/Codegen.h,
// lib/Codegen/MatmulKernel.cpp); this pass checks the options and walks
// the ops.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Codegen.h"
#include "Rpe/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::rpe {
#define GEN_PASS_DEF_RPELOWERMATMUL
#include "Rpe/Passes.h.inc"
} // namespace mlir::rpe

using namespace mlir;
using namespace mlir::rpe;

namespace {

/// erf(x) = x P(x^2) / Q(x^2) on x clamped to [-4, 4] (beyond, erf is +-1
/// in f32): the rational minimax form of XLA and Eigen, within 4.2e-7 of
/// erf over the whole line (checked against libm's). One division and 12
/// FMAs a vector, where upstream's piecewise polynomial takes three
/// polynomials' coefficients through 25 selects: GELU's epilogue costs a
/// third as much.
struct ErfAsRational : public OpRewritePattern<math::ErfOp> {
  ErfAsRational(MLIRContext *context)
      : OpRewritePattern(context, /*benefit=*/2) {}

  LogicalResult matchAndRewrite(math::ErfOp op,
                                PatternRewriter &rewriter) const override {
    auto type = dyn_cast<VectorType>(op.getType());
    if (!type || !type.getElementType().isF32())
      return rewriter.notifyMatchFailure(op, "not a vector of f32");
    Location loc = op.getLoc();
    auto constant = [&](double value) -> Value {
      return arith::ConstantOp::create(
          rewriter, loc,
          DenseElementsAttr::get(type, rewriter.getF32FloatAttr(value)));
    };
    // Horner, highest degree first.
    auto polynomial = [&](Value x2, ArrayRef<double> coefficients) {
      Value p = constant(coefficients.front());
      for (double c : coefficients.drop_front())
        p = math::FmaOp::create(rewriter, loc, x2, p, constant(c));
      return p;
    };
    constexpr double kNumerator[] = {
        -2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
        -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
        -1.60960333262415e-02};
    constexpr double kDenominator[] = {
        -1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
        -7.37332916720468e-03, -1.42647390514189e-02};
    // minimumf/maximumf keep a NaN x NaN.
    Value x = arith::MaximumFOp::create(
        rewriter, loc,
        arith::MinimumFOp::create(rewriter, loc, op.getOperand(),
                                  constant(4.0)),
        constant(-4.0));
    Value x2 = arith::MulFOp::create(rewriter, loc, x, x);
    Value p = arith::MulFOp::create(rewriter, loc, x,
                                    polynomial(x2, kNumerator));
    rewriter.replaceOpWithNewOp<arith::DivFOp>(op, p,
                                               polynomial(x2, kDenominator));
    return success();
  }
};

struct RpeLowerMatmulPass
    : public rpe::impl::RpeLowerMatmulBase<RpeLowerMatmulPass> {
  using Base::Base;

  void runOnOperation() override {
    if (vectorWidth < 1 || vectorWidth > 64 ||
        !llvm::isPowerOf2_64(vectorWidth)) {
      emitError(getOperation()->getLoc())
          << "vector-width must be a power of two up to 64, got "
          << static_cast<int64_t>(vectorWidth);
      return signalPassFailure();
    }
    // vdpbf16ps exists on 128, 256 and 512 bits.
    if (bf16Dot && vectorWidth != 4 && vectorWidth != 8 && vectorWidth != 16) {
      emitError(getOperation()->getLoc())
          << "bf16-dot needs a vector-width of 4, 8 or 16, got "
          << static_cast<int64_t>(vectorWidth);
      return signalPassFailure();
    }
    // Walk, not greedy: the emitted loops must not be folded while they
    // are built.
    SmallVector<MatmulOp> ops;
    getOperation()->walk([&](MatmulOp op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    SmallVector<Operation *> mathOps;
    for (MatmulOp op : ops) {
      // The kernel replaces the op between its neighbours.
      Block *block = op->getBlock();
      Operation *before = op->getPrevNode(), *after = op->getNextNode();
      if (failed(emitMatmulKernel(rewriter, op, vectorWidth, bf16Dot)))
        return signalPassFailure();
      auto begin = before ? std::next(before->getIterator()) : block->begin();
      auto end = after ? after->getIterator() : block->end();
      for (Operation &kernel : llvm::make_range(begin, end))
        kernel.walk([&](Operation *nested) {
          if (isa<math::MathDialect>(nested->getDialect()) &&
              nested->getNumResults() == 1 &&
              isa<VectorType>(nested->getResult(0).getType()))
            mathOps.push_back(nested);
        });
    }
    approximateVectorMath(mathOps);
  }

  /// The epilogues' exp, erf, tanh, ... on vectors become polynomials:
  /// LLVM would call libm lane by lane.
  void approximateVectorMath(ArrayRef<Operation *> mathOps) {
    if (mathOps.empty())
      return;
    RewritePatternSet patterns(&getContext());
    patterns.add<ErfAsRational>(&getContext());
    auto all = [](StringRef) { return true; };
    populateMathF32ExpansionPatterns(patterns, all);
    populateMathPolynomialApproximationPatterns(patterns, all);
    GreedyRewriteConfig config;
    config.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
    (void)applyOpPatternsGreedily(mathOps, std::move(patterns), config);
  }
};

} // namespace
