//===- FeatureMapAddressing.cpp - tokens of windows in a feature map -----===//
//
// Per axis, with p the position in the rolled and padded map that windows
// tile (p = window coordinate * window + token coordinate):
//
//   pad, then shift (HF, torchvision, Video Swin):
//     u = (p + s) mod padded,  real iff u < image
//   shift, then pad (timm):
//     real iff p < image,      u = (p + s) mod image
//
// and the inverse on real tokens p = (u - s) mod padded (resp. image).
//
// Window coordinate c and token coordinate t give p = c * window + t for
// Swin's blocks and p = t * (padded / window) + c for MaxViT's grid, whose
// windows take every (padded / window)-th token; a grid has no shift and
// no padding, so u = p there.
//
//===----------------------------------------------------------------------===//

#include "Rpe/FeatureMapAddressing.h"
#include "Rpe/WindowGeometry.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

using namespace mlir;
using namespace mlir::rpe;

FeatureMap::FeatureMap(ArrayRef<int64_t> image, ArrayRef<int64_t> window,
                       ArrayRef<int64_t> shift, PaddingOrder padding,
                       Partition partition)
    : image(image), window(window), shift(shift), padding(padding),
      partition(partition) {
  for (auto [n, w] : llvm::zip_equal(image, window))
    padded.push_back((n + w - 1) / w * w);
  assert((!isGrid() || !checkGridPartition(image, window, shift)) &&
         "a grid partition is neither shifted nor padded (verified)");
}

int64_t FeatureMap::tokensPerImage() const {
  int64_t count = 1;
  for (int64_t n : image)
    count *= n;
  return count;
}

int64_t FeatureMap::windowsPerImage() const {
  int64_t count = 1;
  for (auto [n, w] : llvm::zip_equal(padded, window))
    count *= n / w;
  return count;
}

namespace {
/// Index arithmetic with constants folded in as they are created.
struct IndexMath {
  OpBuilder &b;
  Location loc;
  Value c(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  // Folded where the operands are constants: tokenPositions() evaluates
  // locateToken at compile time that way.
  template <typename OpTy> Value binary(Value x, Value y) {
    matchLanes(b, loc, x, y);
    return b.createOrFold<OpTy>(loc, x, y);
  }
  Value add(Value x, Value y) { return binary<arith::AddIOp>(x, y); }
  Value addConst(Value x, int64_t v) { return v ? add(x, c(v)) : x; }
  Value mulConst(Value x, int64_t v) {
    return v == 1 ? x : binary<arith::MulIOp>(x, c(v));
  }
  Value div(Value x, int64_t v) {
    return v == 1 ? x : binary<arith::DivUIOp>(x, c(v));
  }
  Value rem(Value x, int64_t v) {
    return v == 1 ? c(0) : binary<arith::RemUIOp>(x, c(v));
  }
  /// (x + s) mod period, and x itself without a roll (s = 0): no modulo for
  /// the unshifted maps, MaxViT's grid among them. Equal for x < period;
  /// otherwise x is a padding token's, whose position is not read.
  Value roll(Value x, int64_t s, int64_t period) {
    return s ? rem(addConst(x, s), period) : x;
  }
  Value less(Value x, int64_t v) {
    Value y = c(v);
    matchLanes(b, loc, x, y);
    return b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, x, y);
  }
  Value select(Value condition, Value x, Value y) {
    matchLanes(b, loc, x, y);
    matchLanes(b, loc, condition, x);
    matchLanes(b, loc, x, y);
    return b.createOrFold<arith::SelectOp>(loc, condition, x, y);
  }
  /// Row-major coordinates of `linear` over `extents` (first outermost).
  SmallVector<Value> delinearize(Value linear, ArrayRef<int64_t> extents) {
    SmallVector<Value> coords(extents.size());
    for (int64_t a = extents.size() - 1; a >= 0; --a) {
      coords[a] = a == 0 ? linear : rem(linear, extents[a]);
      if (a > 0)
        linear = div(linear, extents[a]);
    }
    return coords;
  }
  Value linearize(ArrayRef<Value> coords, ArrayRef<int64_t> extents) {
    Value linear = c(0);
    int64_t stride = 1;
    for (int64_t a = extents.size() - 1; a >= 0; --a) {
      linear = add(linear, mulConst(coords[a], stride));
      stride *= extents[a];
    }
    return linear;
  }
};
} // namespace

/// Windows of the padded map along axis `a`.
static int64_t windowsAlong(const FeatureMap &map, int64_t a) {
  return map.padded[a] / map.window[a];
}

/// Position p along axis `a` of the rolled, padded map of token coordinate
/// `token` in window coordinate `window`: the partition.
static Value partitionPosition(IndexMath &m, const FeatureMap &map, int64_t a,
                               Value window, Value token) {
  if (map.isGrid())
    return m.add(m.mulConst(token, windowsAlong(map, a)), window);
  return m.add(m.mulConst(window, map.window[a]), token);
}

/// The inverse of partitionPosition: the window and token coordinates of p.
static std::pair<Value, Value>
splitPosition(IndexMath &m, const FeatureMap &map, int64_t a, Value p) {
  if (map.isGrid()) {
    int64_t windows = windowsAlong(map, a);
    return {m.rem(p, windows), m.div(p, windows)};
  }
  return {m.div(p, map.window[a]), m.rem(p, map.window[a])};
}

void mlir::rpe::matchLanes(OpBuilder &b, Location loc, Value &x, Value &y) {
  auto xv = dyn_cast<VectorType>(x.getType());
  auto yv = dyn_cast<VectorType>(y.getType());
  if (xv && !yv)
    y = vector::BroadcastOp::create(b, loc, xv.clone(y.getType()), y);
  else if (yv && !xv)
    x = vector::BroadcastOp::create(b, loc, yv.clone(x.getType()), x);
}

TokenSource mlir::rpe::locateToken(OpBuilder &b, Location loc,
                                   const FeatureMap &map, Value window,
                                   Value token) {
  IndexMath m{b, loc};
  int64_t rank = map.window.size();
  SmallVector<int64_t> grid;
  for (int64_t a = 0; a < rank; ++a)
    grid.push_back(windowsAlong(map, a));
  int64_t perImage = map.windowsPerImage();
  TokenSource source;
  source.image = m.div(window, perImage);
  SmallVector<Value> windowCoord = m.delinearize(m.rem(window, perImage), grid);
  SmallVector<Value> tokenCoord = m.delinearize(token, map.window);
  SmallVector<Value> position(rank);
  for (int64_t a = 0; a < rank; ++a) {
    Value p = partitionPosition(m, map, a, windowCoord[a], tokenCoord[a]);
    Value valid;
    if (map.isShiftThenPad()) {
      position[a] = m.roll(p, map.shift[a], map.image[a]);
      if (map.padded[a] != map.image[a])
        valid = m.less(p, map.image[a]);
    } else {
      position[a] = m.roll(p, map.shift[a], map.padded[a]);
      if (map.padded[a] != map.image[a])
        valid = m.less(position[a], map.image[a]);
    }
    if (valid)
      source.valid =
          source.valid ? m.binary<arith::AndIOp>(source.valid, valid) : valid;
  }
  source.position = m.linearize(position, map.image);
  if (source.valid)
    source.position = m.select(source.valid, source.position, m.c(0));
  return source;
}

SmallVector<int32_t> mlir::rpe::tokenPositions(MLIRContext *context,
                                               const FeatureMap &map) {
  int64_t tokens = 1;
  for (int64_t extent : map.window)
    tokens *= extent;
  // locateToken on constants folds to constants, built in a scratch module
  // and dropped: the table is the kernel's own arithmetic, evaluated.
  Location loc = UnknownLoc::get(context);
  OwningOpRef<ModuleOp> scratch = ModuleOp::create(loc);
  OpBuilder b = OpBuilder::atBlockBegin(scratch->getBody());
  SmallVector<int32_t> positions;
  for (int64_t w = 0; w < map.windowsPerImage(); ++w)
    for (int64_t t = 0; t < tokens; ++t) {
      TokenSource source =
          locateToken(b, loc, map, arith::ConstantIndexOp::create(b, loc, w),
                      arith::ConstantIndexOp::create(b, loc, t));
      std::optional<int64_t> position = getConstantIntValue(source.position);
      std::optional<int64_t> valid =
          source.valid ? getConstantIntValue(source.valid) : 1;
      if (!position || !valid)
        return {};
      positions.push_back(*valid ? static_cast<int32_t>(*position) : -1);
      scratch->getBody()->clear();
      b.setInsertionPointToStart(scratch->getBody());
    }
  return positions;
}

std::pair<Value, Value> mlir::rpe::locateWindowToken(OpBuilder &b, Location loc,
                                                     const FeatureMap &map,
                                                     Value image,
                                                     Value position) {
  IndexMath m{b, loc};
  int64_t rank = map.window.size();
  SmallVector<Value> u = m.delinearize(position, map.image);
  SmallVector<Value> windowCoord(rank), tokenCoord(rank);
  SmallVector<int64_t> grid;
  for (int64_t a = 0; a < rank; ++a) {
    int64_t period = map.isShiftThenPad() ? map.image[a] : map.padded[a];
    Value p = m.roll(u[a], (period - map.shift[a]) % period, period);
    std::tie(windowCoord[a], tokenCoord[a]) = splitPosition(m, map, a, p);
    grid.push_back(windowsAlong(map, a));
  }
  Value window = m.add(m.mulConst(image, map.windowsPerImage()),
                       m.linearize(windowCoord, grid));
  return {window, m.linearize(tokenCoord, map.window)};
}
