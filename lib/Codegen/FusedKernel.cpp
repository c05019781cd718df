//===- FusedKernel.cpp - which kernel computes a fused attention ----------===//
//
// The one entry point of lib/Codegen: picks the emitter that the options
// and the op call for (the warp kernel falls back to rows for the ops and
// the chips it does not take; the gradient has the CPU's tiles kernel and
// the GPU's warp program) and replaces the op by its kernel.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include "Rpe/Codegen.h"

using namespace mlir;
using namespace mlir::rpe;
using namespace mlir::rpe::detail;

/// The kernel that `options` and the op call for, at b's insertion point.
static LogicalResult emitKernel(ImplicitLocOpBuilder &b,
                                FusedAttentionOpInterface op,
                                const KernelGeometry &g,
                                const FusedKernelOptions &options) {
  // The gradient: the GPU's warp program (emulated on the host for
  // strategy=warps), else the CPU tiles kernel.
  if (isa<FusedWindowAttentionGradOp>(op)) {
    if (options.target == KernelTarget::Gpu ||
        options.strategy == KernelStrategy::Warps)
      return emitGpuBackwardKernel(b, op, g, options.target,
                                   options.hoistScratch, options.smVersion,
                                   options.f32Mma);
    return emitBackwardKernel(b, op, g);
  }
  if (options.strategy == KernelStrategy::Tiles)
    return emitTilesKernel(b, op, g, options);
  std::optional<WarpTileShape> warpShape;
  // The chip decides before the op does: without m16n8k16 tensor-core tiles
  // (sm_75) the warp kernel's mma.sync cannot be selected, and every op gets
  // rows.
  if (options.strategy == KernelStrategy::Warps &&
      hasMmaM16N8K16(options.smVersion)) {
    FailureOr<std::optional<WarpTileShape>> shape = getWarpTileShape(
        cast<FusedWindowAttentionOp>(op),
        WarpTileOptions{options.keyBlock, options.warpsPerBlock,
                        options.f32Mma, options.smVersion,
                        getMaxSharedBytesPerBlock(options.smVersion)});
    if (failed(shape))
      return failure();
    warpShape = *shape;
  }
  // Nor does it read an explicit mask: such ops get rows, as the ops it
  // does not take do.
  if (op.getMask())
    warpShape = std::nullopt;
  if (warpShape)
    return emitWarpKernel(b, op, g, *warpShape, options.target,
                          options.hoistScratch);
  return emitRowsKernel(b, op, g, options.target);
}

LogicalResult mlir::rpe::emitFusedKernel(RewriterBase &rewriter,
                                         FusedAttentionOpInterface op,
                                         const FusedKernelOptions &options) {
  if (op->getNumResults() != 0)
    return op.emitOpError("must be bufferized before its kernel is emitted");
  bool gpu = options.target == KernelTarget::Gpu;
  if (options.strategy == KernelStrategy::Tiles && gpu)
    return op.emitOpError(
        "the tiles kernel runs on the CPU; the GPU takes rows or warps");
  KernelGeometry geometry(op, options.vectorWidth, options.scoreBlockBytes);
  rewriter.setInsertionPoint(op);
  // Located at the op, under its name: the item loop's outlined body (a
  // profile's symbol) says which op it computes.
  ImplicitLocOpBuilder b(
      NameLoc::get(op->getName().getIdentifier(), op.getLoc()), rewriter);
  if (failed(emitKernel(b, op, geometry, options)))
    return failure();
  rewriter.eraseOp(op);
  return success();
}
