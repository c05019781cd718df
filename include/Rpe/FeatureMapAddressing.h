//===- FeatureMapAddressing.h - tokens of windows in a map -*- C++ -*-===//
//
// Index arithmetic between a token-layout feature map ([batch, L, C] in
// image order) and Swin's windows of its shifted, padded version, or
// MaxViT's grid of strided windows. Shared by
// the unfused lowering of rpe.window_partition / rpe.window_reverse and by
// the fused kernel, which reads and writes the map where it lies.
//
//===----------------------------------------------------------------------===//

#ifndef RPE_FEATUREMAPADDRESSING_H
#define RPE_FEATUREMAPADDRESSING_H

#include "Rpe/RpeDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::rpe {

/// A feature map of `image` tokens per axis, padded to `padded` (whole
/// windows), rolled by `shift`, cut into `window`s: Swin's blocks, or
/// MaxViT's grid (no shift, no padding; checkGridPartition).
struct FeatureMap {
  SmallVector<int64_t> image, window, shift, padded;
  /// Pad, then roll; or timm's order: roll the map, then pad it.
  PaddingOrder padding = PaddingOrder::PadThenShift;
  Partition partition = Partition::Block;

  FeatureMap(ArrayRef<int64_t> image, ArrayRef<int64_t> window,
             ArrayRef<int64_t> shift, PaddingOrder padding,
             Partition partition = Partition::Block);

  bool isShiftThenPad() const { return padding == PaddingOrder::ShiftThenPad; }
  bool isGrid() const { return partition == Partition::Grid; }

  int64_t tokensPerImage() const;
  int64_t windowsPerImage() const;
  /// Whether some window tokens are padding.
  bool isPadded() const { return image != padded; }
};

/// Where a window token comes from.
struct TokenSource {
  Value image;    // b / nW
  Value position; // linear position in image order; 0 for padding
  Value valid;    // i1, false for padding; null when the map is not padded
};

/// Broadcasts whichever of `x`, `y` is a scalar when the other is a vector
/// (the lanes of an emulated warp), so that index arithmetic on uniform and
/// per-lane values composes. A no-op for two scalars.
void matchLanes(OpBuilder &b, Location loc, Value &x, Value &y);

/// Locates token `token` of window `window` (b = image * nW + w) in the
/// feature map.
TokenSource locateToken(OpBuilder &b, Location loc, const FeatureMap &map,
                        Value window, Value token);

/// locateToken's position of every token of every window of one image,
/// [windows per image, tokens], -1 for padding (empty if it did not fold).
SmallVector<int32_t> tokenPositions(MLIRContext *context,
                                    const FeatureMap &map);

/// The inverse on real tokens: the window and token that image position
/// `position` of image `image` lands in.
std::pair<Value, Value> locateWindowToken(OpBuilder &b, Location loc,
                                          const FeatureMap &map, Value image,
                                          Value position);

} // namespace mlir::rpe

#endif // RPE_FEATUREMAPADDRESSING_H
