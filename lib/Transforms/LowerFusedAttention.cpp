//===- LowerFusedAttention.cpp - rpe-lower-fused-attention ----------------===//
//
// Replaces each bufferized rpe.fused_window_attention by the kernel its
// options ask for. The kernels themselves are built by lib/Codegen
// (Rpe/Codegen.h); this pass checks the options and walks the ops.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Codegen.h"
#include "Rpe/Passes.h"

namespace mlir::rpe {
#define GEN_PASS_DEF_RPELOWERFUSEDATTENTION
#include "Rpe/Passes.h.inc"
} // namespace mlir::rpe

using namespace mlir;
using namespace mlir::rpe;

namespace {

struct RpeLowerFusedAttentionPass
    : public rpe::impl::RpeLowerFusedAttentionBase<RpeLowerFusedAttentionPass> {
  using Base::Base;

  /// The options as the struct that the kernel emitters take (and that
  /// the pipelines create this pass from).
  FusedKernelOptions getKernelOptions() const {
    FusedKernelOptions options;
    options.strategy = strategy;
    options.target = target;
    options.vectorWidth = vectorWidth;
    options.bf16Dot = bf16Dot;
    options.avx512 = avx512;
    options.hoistScratch = hoistScratch;
    options.scoreBlockBytes = scoreBlockBytes;
    options.keyBlock = keyBlock;
    options.warpsPerBlock = warpsPerBlock;
    options.f32Mma = f32Mma;
    options.smVersion = smVersion;
    return options;
  }

  /// Options are checked before any IR is touched; the error names the
  /// option, located at the pass's operation.
  LogicalResult checkOptions(const FusedKernelOptions &options) {
    auto fail = [&](const Twine &message) {
      return emitError(getOperation()->getLoc()) << message;
    };
    if (options.vectorWidth < 1 || options.vectorWidth > 64 ||
        !llvm::isPowerOf2_64(options.vectorWidth))
      return fail("vector-width must be a power of two up to 64, got " +
                  Twine(options.vectorWidth));
    if (options.keyBlock < 0 || options.keyBlock > 64 ||
        options.keyBlock % 16 != 0)
      return fail("key-block must be 16, 32, 48 or 64 (or 0: chosen per "
                  "window), got " +
                  Twine(options.keyBlock));
    if (options.warpsPerBlock < 0 || options.warpsPerBlock > 32)
      return fail("warps-per-block must be in [1, 32] (or 0: chosen per "
                  "window), got " +
                  Twine(options.warpsPerBlock));
    if (options.scoreBlockBytes < 4)
      return fail("score-block-bytes must be at least 4, got " +
                  Twine(options.scoreBlockBytes));
    if (options.strategy == KernelStrategy::Tiles &&
        options.target == KernelTarget::Gpu)
      return fail("kernel=tiles is the CPU kernel; the GPU takes rows or "
                  "warps");
    return success();
  }

  void runOnOperation() override {
    FusedKernelOptions options = getKernelOptions();
    if (failed(checkOptions(options)))
      return signalPassFailure();
    // Lower each op where it is (walk, not greedy: the emitted loops must
    // not be folded while they are built).
    SmallVector<FusedAttentionOpInterface> ops;
    getOperation()->walk(
        [&](FusedAttentionOpInterface op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (FusedAttentionOpInterface op : ops) {
      if (op->getNumResults() != 0) {
        op.emitOpError("must be bufferized before rpe-lower-fused-attention");
        return signalPassFailure();
      }
      if (failed(emitFusedKernel(rewriter, op, options)))
        return signalPassFailure();
    }
  }
};

} // namespace
