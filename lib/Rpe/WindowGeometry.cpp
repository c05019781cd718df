//===- WindowGeometry.cpp - Swin window arithmetic ------------------------===//

#include "Rpe/WindowGeometry.h"

#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <limits>

using namespace mlir::rpe;
using llvm::ArrayRef;
using llvm::SmallVector;

int64_t mlir::rpe::getNumTokens(ArrayRef<int64_t> window, bool classToken) {
  int64_t n = 1;
  for (int64_t w : window)
    n *= w;
  return classToken ? n + 1 : n;
}

int64_t mlir::rpe::getNumTableRows(ArrayRef<int64_t> window, bool classToken) {
  int64_t t = 1;
  for (int64_t w : window)
    t *= 2 * w - 1;
  return classToken ? t + 3 : t;
}

int64_t mlir::rpe::getRelativeIndex(ArrayRef<int64_t> window, int64_t i,
                                    int64_t j) {
  // Peel coordinates off the innermost axis; `stride` is the weight of that
  // axis's digit in the index.
  int64_t index = 0, stride = 1;
  for (int64_t axis = window.size() - 1; axis >= 0; --axis) {
    int64_t w = window[axis];
    int64_t ci = i % w, cj = j % w;
    i /= w;
    j /= w;
    index += (ci - cj + w - 1) * stride;
    stride *= 2 * w - 1;
  }
  return index;
}

int64_t mlir::rpe::getClassTokenRelativeIndex(ArrayRef<int64_t> window,
                                              int64_t i, int64_t j) {
  if (i > 0 && j > 0)
    return getRelativeIndex(window, i - 1, j - 1);
  int64_t grid = getNumTableRows(window);
  if (i == 0 && j == 0)
    return grid + 2;
  return i == 0 ? grid : grid + 1;
}

SmallVector<int64_t> mlir::rpe::computeRelativeIndex(ArrayRef<int64_t> window,
                                                     bool classToken) {
  int64_t n = getNumTokens(window, classToken);
  SmallVector<int64_t> index;
  index.reserve(n * n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      index.push_back(classToken ? getClassTokenRelativeIndex(window, i, j)
                                 : getRelativeIndex(window, i, j));
  return index;
}

int64_t mlir::rpe::getNumWindows(ArrayRef<int64_t> resolution,
                                 ArrayRef<int64_t> window) {
  int64_t count = 1;
  for (auto [n, w] : llvm::zip_equal(resolution, window))
    count *= n / w;
  return count;
}

int64_t mlir::rpe::getShiftRegionLabel(ArrayRef<int64_t> resolution,
                                       ArrayRef<int64_t> window,
                                       ArrayRef<int64_t> shift, int64_t w,
                                       int64_t t) {
  int64_t rank = window.size();
  // Coordinates of the window in the grid and of the token in the window,
  // innermost axis last.
  SmallVector<int64_t> windowCoord(rank), tokenCoord(rank);
  for (int64_t axis = rank - 1; axis >= 0; --axis) {
    int64_t windowsAlongAxis = resolution[axis] / window[axis];
    windowCoord[axis] = w % windowsAlongAxis;
    w /= windowsAlongAxis;
    tokenCoord[axis] = t % window[axis];
    t /= window[axis];
  }
  int64_t label = 0;
  for (int64_t axis = 0; axis < rank; ++axis) {
    int64_t n = resolution[axis], size = window[axis], s = shift[axis];
    int64_t p = windowCoord[axis] * size + tokenCoord[axis];
    int64_t axisLabel = p < n - size ? 0 : (p < n - s ? 1 : 2);
    label = label * 3 + axisLabel;
  }
  return label;
}

SmallVector<float> mlir::rpe::computeShiftMask(ArrayRef<int64_t> resolution,
                                               ArrayRef<int64_t> window,
                                               ArrayRef<int64_t> shift,
                                               float maskValue) {
  int64_t numWindows = getNumWindows(resolution, window);
  int64_t n = getNumTokens(window);
  SmallVector<float> mask;
  mask.reserve(numWindows * n * n);
  SmallVector<int64_t> labels(n);
  for (int64_t w = 0; w < numWindows; ++w) {
    for (int64_t t = 0; t < n; ++t)
      labels[t] = getShiftRegionLabel(resolution, window, shift, w, t);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        mask.push_back(labels[i] == labels[j] ? 0.0f : maskValue);
  }
  return mask;
}

std::optional<std::string> mlir::rpe::checkWindow(ArrayRef<int64_t> window) {
  if (window.size() != 2 && window.size() != 3)
    return llvm::formatv("window must have 2 or 3 extents, got {0}",
                         window.size())
        .str();
  // Bound the extents so that N * N and the table size stay far from
  // overflowing int64_t (and from exhausting memory when folded).
  constexpr int64_t kMaxExtent = 1024;
  for (int64_t w : window)
    if (w <= 0 || w > kMaxExtent)
      return llvm::formatv("window extents must be in [1, {0}], got {1}",
                           kMaxExtent, w)
          .str();
  if (getNumTokens(window) > (1 << 16))
    return llvm::formatv("window has {0} tokens, more than the supported {1}",
                         getNumTokens(window), 1 << 16)
        .str();
  return std::nullopt;
}

/// The checks every shifted map shares: a valid window, one rank for the
/// three, 0 <= shift < window.
static std::optional<std::string> checkShiftedMap(ArrayRef<int64_t> resolution,
                                                  ArrayRef<int64_t> window,
                                                  ArrayRef<int64_t> shift) {
  if (auto error = checkWindow(window))
    return error;
  if (resolution.size() != window.size() || shift.size() != window.size())
    return llvm::formatv("resolution ({0} extents), window ({1}) and shift "
                         "({2}) must have the same rank",
                         resolution.size(), window.size(), shift.size())
        .str();
  for (size_t axis = 0; axis < window.size(); ++axis)
    if (shift[axis] < 0 || shift[axis] >= window[axis])
      return llvm::formatv("shift {0} along axis {1} must be in [0, {2})",
                           shift[axis], axis, window[axis])
          .str();
  return std::nullopt;
}

std::optional<std::string> mlir::rpe::checkShift(ArrayRef<int64_t> resolution,
                                                 ArrayRef<int64_t> window,
                                                 ArrayRef<int64_t> shift) {
  if (auto error = checkShiftedMap(resolution, window, shift))
    return error;
  for (size_t axis = 0; axis < window.size(); ++axis) {
    if (resolution[axis] <= 0 || resolution[axis] % window[axis] != 0)
      return llvm::formatv("resolution {0} along axis {1} is not a positive "
                           "multiple of the window extent {2}",
                           resolution[axis], axis, window[axis])
          .str();
    if (resolution[axis] / window[axis] > (1 << 16))
      return llvm::formatv("resolution {0} along axis {1} has too many windows",
                           resolution[axis], axis)
          .str();
  }
  // The mask's element count, nW * N * N, must fit in int64_t: shapes,
  // folders and lowerings compute it (the bounds above allow 2^80).
  int64_t numWindows = getNumWindows(resolution, window);
  int64_t n = getNumTokens(window);
  if (!llvm::checkedMul(numWindows, n * n))
    return llvm::formatv("the mask of {0} windows of {1} x {1} has too many "
                         "elements",
                         numWindows, n)
        .str();
  return std::nullopt;
}

SmallVector<int64_t>
mlir::rpe::getPaddedResolution(ArrayRef<int64_t> resolution,
                               ArrayRef<int64_t> window) {
  SmallVector<int64_t> padded;
  for (auto [n, w] : llvm::zip_equal(resolution, window))
    padded.push_back((n + w - 1) / w * w);
  return padded;
}

std::optional<std::string>
mlir::rpe::checkFeatureMap(ArrayRef<int64_t> resolution,
                           ArrayRef<int64_t> window, ArrayRef<int64_t> shift) {
  if (auto error = checkShiftedMap(resolution, window, shift))
    return error;
  constexpr int64_t kMaxExtent = 1 << 16;
  for (size_t axis = 0; axis < window.size(); ++axis)
    if (resolution[axis] <= 0 || resolution[axis] > kMaxExtent)
      return llvm::formatv("resolution {0} along axis {1} must be in [1, {2}]",
                           resolution[axis], axis, kMaxExtent)
          .str();
  return std::nullopt;
}

std::optional<std::string>
mlir::rpe::checkGridPartition(ArrayRef<int64_t> resolution,
                              ArrayRef<int64_t> window,
                              ArrayRef<int64_t> shift) {
  for (size_t axis = 0; axis < window.size(); ++axis) {
    if (shift[axis] != 0)
      return llvm::formatv("a grid partition has no shift, got {0} along "
                           "axis {1}",
                           shift[axis], axis)
          .str();
    if (resolution[axis] % window[axis] != 0)
      return llvm::formatv("a grid partition needs whole grids: resolution "
                           "{0} along axis {1} is not a multiple of the "
                           "window {2}",
                           resolution[axis], axis, window[axis])
          .str();
  }
  return std::nullopt;
}

SmallVector<double>
mlir::rpe::computeLogSpacedCoords(ArrayRef<int64_t> window,
                                  ArrayRef<int64_t> pretrainedWindow) {
  int64_t rank = window.size();
  int64_t rows = getNumTableRows(window);
  SmallVector<double> coords(rows * rank);
  for (int64_t row = 0; row < rows; ++row) {
    // Row-major over the axes' 2W - 1 offsets, the last axis fastest.
    int64_t rest = row;
    for (int64_t a = rank - 1; a >= 0; --a) {
      int64_t span = 2 * window[a] - 1;
      double offset = static_cast<double>(rest % span - (window[a] - 1));
      rest /= span;
      int64_t extent =
          pretrainedWindow.empty() ? window[a] : pretrainedWindow[a];
      double x =
          (extent > 1 ? offset / static_cast<double>(extent - 1) : offset) *
          8.0;
      coords[row * rank + a] =
          std::copysign(std::log2(1.0 + std::fabs(x)), x) / 3.0;
    }
  }
  return coords;
}

SmallVector<double> mlir::rpe::computeContinuousPositionBias(
    ArrayRef<int64_t> window, ArrayRef<int64_t> pretrainedWindow,
    ArrayRef<double> fc1Weight, ArrayRef<double> fc1Bias,
    ArrayRef<double> fc2Weight) {
  int64_t rank = window.size();
  int64_t hidden = fc1Bias.size();
  int64_t heads = fc2Weight.size() / hidden;
  SmallVector<double> coords = computeLogSpacedCoords(window, pretrainedWindow);
  int64_t rows = coords.size() / rank;
  SmallVector<double> table(rows * heads, 0.0), activation(hidden);
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t j = 0; j < hidden; ++j) {
      double sum = fc1Bias[j];
      for (int64_t a = 0; a < rank; ++a)
        sum += coords[t * rank + a] * fc1Weight[j * rank + a];
      activation[j] = std::max(sum, 0.0);
    }
    for (int64_t h = 0; h < heads; ++h) {
      double logit = 0.0;
      for (int64_t j = 0; j < hidden; ++j)
        logit += activation[j] * fc2Weight[h * hidden + j];
      table[t * heads + h] = 16.0 / (1.0 + std::exp(-logit));
    }
  }
  return table;
}
