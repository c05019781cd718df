//===- WindowGeometry.h - Swin window arithmetic ----------------*- C++ -*-===//
//
// The facts of Swin's window attention that depend only on the window
// geometry: token numbering, the relative position index and the regions of
// the shifted-window mask. The verifiers, the folders, the lowerings and
// swin-aot all use these functions, so the conventions live in one place.
//
//===----------------------------------------------------------------------===//

#ifndef RPE_WINDOWGEOMETRY_H
#define RPE_WINDOWGEOMETRY_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace mlir::rpe {

/// The most elements the compiler materializes as one constant (an index, a
/// mask, a folded bias, a table of region labels): larger ones are not
/// folded and their lowerings report an error instead of exhausting memory.
constexpr int64_t kMaxConstantElements = int64_t(1) << 24;

/// What Swin's shifted-window mask adds to the score of two tokens from
/// different regions of a window: -100, not -inf, so that the mask stays
/// additive and a row of one region still has a finite softmax. The default
/// of every mask_value attribute and of every builder that takes one.
constexpr double kSwinMaskValue = -100.0;

/// N = Wh * Ww (* Wd): tokens in a window; with BEiT's class token, one
/// more (the class token is token 0, the grid's tokens follow).
int64_t getNumTokens(llvm::ArrayRef<int64_t> window, bool classToken = false);

/// T = prod(2 * w - 1): rows of the compact relative position table; with
/// BEiT's class token, T + 3 (getClassTokenRelativeIndex).
int64_t getNumTableRows(llvm::ArrayRef<int64_t> window,
                        bool classToken = false);

/// Swin's relative index of the token pair (i, j), tokens numbered row-major
/// (depth outermost): sum over axes of (ci - cj + w - 1) * stride, where the
/// stride of an axis is the product of (2w - 1) of the axes inside it.
int64_t getRelativeIndex(llvm::ArrayRef<int64_t> window, int64_t i, int64_t j);

/// BEiT's relative index of the token pair (i, j) of a grid `window` with a
/// class token at position 0 (timm's `gen_relative_position_index`): grid
/// tokens i, j >= 1 read Swin's index of tokens i - 1 and j - 1; with T =
/// getNumTableRows(window), class -> token (i = 0, j >= 1) reads row T,
/// token -> class (i >= 1, j = 0) row T + 1 and class -> class row T + 2.
int64_t getClassTokenRelativeIndex(llvm::ArrayRef<int64_t> window, int64_t i,
                                   int64_t j);

/// The whole N x N index, row-major (N = getNumTokens(window, classToken)).
llvm::SmallVector<int64_t> computeRelativeIndex(llvm::ArrayRef<int64_t> window,
                                                bool classToken = false);

/// nW = prod(resolution / window): windows of one image.
int64_t getNumWindows(llvm::ArrayRef<int64_t> resolution,
                      llvm::ArrayRef<int64_t> window);

/// Region label (Swin's `img_mask` value) of token `t` of window `w` of the
/// rolled map: per axis [0, n-w) -> 0, [n-w, n-s) -> 1, [n-s, n) -> 2,
/// combined as base-3 digits, the first axis outermost.
int64_t getShiftRegionLabel(llvm::ArrayRef<int64_t> resolution,
                            llvm::ArrayRef<int64_t> window,
                            llvm::ArrayRef<int64_t> shift, int64_t w,
                            int64_t t);

/// The nW x N x N shifted-window mask, row-major: 0 where the two tokens
/// share a region label, `maskValue` elsewhere.
llvm::SmallVector<float> computeShiftMask(llvm::ArrayRef<int64_t> resolution,
                                          llvm::ArrayRef<int64_t> window,
                                          llvm::ArrayRef<int64_t> shift,
                                          float maskValue);

/// Checks a window: rank 2 or 3, every extent positive. Returns a message
/// describing the first problem, or std::nullopt.
std::optional<std::string> checkWindow(llvm::ArrayRef<int64_t> window);

/// Checks a resolution/window/shift triple for a shifted-window mask: same
/// ranks, the resolution a positive multiple of the window, 0 <= shift <
/// window. Returns a message describing the first problem, or std::nullopt.
std::optional<std::string> checkShift(llvm::ArrayRef<int64_t> resolution,
                                      llvm::ArrayRef<int64_t> window,
                                      llvm::ArrayRef<int64_t> shift);

/// ceil(resolution / window) * window per axis: the map Swin partitions
/// after padding.
llvm::SmallVector<int64_t>
getPaddedResolution(llvm::ArrayRef<int64_t> resolution,
                    llvm::ArrayRef<int64_t> window);

/// Checks the geometry of a token-layout feature map: the window, the
/// resolution (positive, any size: it is padded) and 0 <= shift < window.
/// Either padding order (rpe::PaddingOrder) suits any valid geometry.
std::optional<std::string> checkFeatureMap(llvm::ArrayRef<int64_t> resolution,
                                           llvm::ArrayRef<int64_t> window,
                                           llvm::ArrayRef<int64_t> shift);

/// Checks the extra constraints of MaxViT's grid partition
/// (rpe::Partition::Grid) on a valid feature map: no shift, and a resolution
/// of whole windows (no padding).
std::optional<std::string>
checkGridPartition(llvm::ArrayRef<int64_t> resolution,
                   llvm::ArrayRef<int64_t> window,
                   llvm::ArrayRef<int64_t> shift);

/// SwinV2's log-spaced relative coordinates, [T, rank] row-major in the
/// table's row order: per axis the offset d in [-(W-1), W-1], divided by
/// P - 1 (P the pretrained window's extent, the window's when empty; an
/// extent of 1 leaves d as it is), times 8, mapped to
/// sign(x) log2(1 + |x|) / log2(8).
llvm::SmallVector<double>
computeLogSpacedCoords(llvm::ArrayRef<int64_t> window,
                       llvm::ArrayRef<int64_t> pretrainedWindow);

/// SwinV2's continuous position bias table [T, heads] row-major:
/// 16 * sigmoid(relu(coords fc1ᵀ + b1) fc2ᵀ) with fc1 [hidden, rank], b1
/// [hidden] and fc2 [heads, hidden] row-major (PyTorch's Linear layout; fc2
/// has no bias, as in SwinV2). In double precision.
llvm::SmallVector<double> computeContinuousPositionBias(
    llvm::ArrayRef<int64_t> window, llvm::ArrayRef<int64_t> pretrainedWindow,
    llvm::ArrayRef<double> fc1Weight, llvm::ArrayRef<double> fc1Bias,
    llvm::ArrayRef<double> fc2Weight);

} // namespace mlir::rpe

#endif // RPE_WINDOWGEOMETRY_H
