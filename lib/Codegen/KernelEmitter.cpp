//===- KernelEmitter.cpp - what the fused kernels share -------------------===//
//
// The emitter's shared steps: flat views of the operands, vector loads and
// stores in the element type, loops, and the addressing of token rows,
// table offsets and region labels that every kernel (tiles, rows, warps)
// computes the same way.
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"

#include "Rpe/FeatureMapAddressing.h"
#include "Rpe/WindowGeometry.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace mlir::rpe;
using namespace mlir::rpe::detail;

namespace mlir::rpe::detail {

Value flatten(OpBuilder &b, Location loc, Value memref) {
  auto type = cast<MemRefType>(memref.getType());
  ReassociationIndices all =
      llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
  Value flat = memref::CollapseShapeOp::create(
      b, loc, memref, ArrayRef<ReassociationIndices>{all});
  auto dynamic = MemRefType::get(
      {ShapedType::kDynamic}, type.getElementType(),
      StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, {1}));
  return memref::CastOp::create(b, loc, dynamic, flat);
}

void FusedKernelEmitter::emitFlatViews() {
  emitOperandViews(/*withPaddingRows=*/false);
  if (!op.hasTokenLayout())
    return;
  featureMap.emplace(*op.getImage(), g.window, *op.getShift(), op.getPadding());
  if (!featureMap->isPadded())
    return;
  if (!op.getPaddingValues().empty()) {
    for (Value pad : op.getPaddingValues())
      paddingRows.push_back(flatten(b, b.getLoc(), pad));
    return;
  }
  // No padding values: padded tokens are zeros.
  Type element = getElementTypeOrSelf(op.getQuery().getType());
  int64_t channels = g.heads * g.headDim;
  Value zeros =
      memref::AllocaOp::create(b, MemRefType::get({channels}, element));
  Value zero = arith::ConstantOp::create(b, b.getFloatAttr(element, 0.0));
  forLoop(index(0), index(channels), 1, {}, [&](Value c, ValueRange) {
    memref::StoreOp::create(b, zero, zeros, ValueRange{c});
    return SmallVector<Value>{};
  });
  Value row = flatten(b, b.getLoc(), zeros);
  paddingRows.assign(3, row);
}

FusedKernelEmitter::Row FusedKernelEmitter::inputRow(Input which, Value w,
                                                     Value h, Value token) {
  Value flat = flatInputs[static_cast<int>(which)];
  RowAddress address = rowAddress(w, h, token, which);
  if (!address.valid)
    return {flat, address.offset};
  // Padding tokens read their padding row.
  return {arith::SelectOp::create(b, address.valid, flat,
                                  paddingRows[static_cast<int>(which)]),
          arith::SelectOp::create(b, address.valid, address.offset,
                                  mulConst(h, g.headDim))};
}

FusedKernelEmitter::Row FusedKernelEmitter::outputRow(Value w, Value h,
                                                      Value token,
                                                      Value discard,
                                                      Value flat) {
  if (!flat)
    flat = flatOutput;
  RowAddress address = outputAddress(w, h, token);
  if (!address.valid)
    return {flat, address.offset};
  // Padding tokens are cropped: their rows go to a scratch row.
  return {arith::SelectOp::create(b, address.valid, flat, discard),
          arith::SelectOp::create(b, address.valid, address.offset, index(0))};
}

Value FusedKernelEmitter::loadVector(Value memref, ValueRange indices,
                                     int64_t validLanes, int64_t width) {
  Type element = cast<MemRefType>(memref.getType()).getElementType();
  auto type = VectorType::get({width}, element);
  if (validLanes >= width)
    return toF32(vector::LoadOp::create(b, type, memref, indices));
  Value mask =
      vector::CreateMaskOp::create(b, VectorType::get({width}, b.getI1Type()),
                                   ValueRange{index(validLanes)});
  Value zero = arith::ConstantOp::create(
      b, DenseElementsAttr::get(type, b.getFloatAttr(element, 0.0)));
  return toF32(
      vector::MaskedLoadOp::create(b, type, memref, indices, mask, zero));
}

void FusedKernelEmitter::storeVector(Value value, Value memref,
                                     ValueRange indices, int64_t validLanes,
                                     int64_t width) {
  Type element = cast<MemRefType>(memref.getType()).getElementType();
  if (!element.isF32())
    value =
        arith::TruncFOp::create(b, VectorType::get({width}, element), value);
  if (validLanes >= width) {
    vector::StoreOp::create(b, value, memref, indices);
    return;
  }
  Value mask =
      vector::CreateMaskOp::create(b, VectorType::get({width}, b.getI1Type()),
                                   ValueRange{index(validLanes)});
  vector::MaskedStoreOp::create(b, memref, indices, mask, value);
}

ValueRange FusedKernelEmitter::forLoop(
    Value lb, Value ub, int64_t step, ValueRange init,
    function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  auto loop = scf::ForOp::create(b, lb, ub, index(step), init);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  SmallVector<Value> next =
      body(loop.getInductionVar(), loop.getRegionIterArgs());
  if (loop.getBody()->mightHaveTerminator())
    loop.getBody()->getTerminator()->erase();
  b.setInsertionPointToEnd(loop.getBody());
  scf::YieldOp::create(b, next);
  return loop.getResults();
}

void FusedKernelEmitter::forRowBlocks(Value count, int64_t blockRows,
                                      function_ref<void(Value, int64_t)> body) {
  Value zero = index(0);
  Value full = count;
  std::optional<int64_t> known = getConstantIntValue(count);
  // A known count is split into blocks of even size: 49 rows in blocks of
  // at most 8 are 7 x 7, not 6 x 8 and a single row, whose micro-kernel
  // would be one long chain of dependent FMAs.
  if (known && *known > 0)
    blockRows = llvm::divideCeil(*known, llvm::divideCeil(*known, blockRows));
  if (blockRows > 1)
    full = known ? index(*known - *known % blockRows)
                 : arith::SubIOp::create(b, count, remConst(count, blockRows));
  forLoop(zero, full, blockRows, {}, [&](Value row, ValueRange) {
    body(row, blockRows);
    return SmallVector<Value>{};
  });
  if (blockRows == 1)
    return;
  // A known count's remainder is one block of its own size (a micro-kernel
  // of fewer rows, not that many single rows).
  if (known) {
    if (*known % blockRows)
      body(full, *known % blockRows);
    return;
  }
  forLoop(full, count, 1, {}, [&](Value row, ValueRange) {
    body(row, 1);
    return SmallVector<Value>{};
  });
}

Value FusedKernelEmitter::cosineHeadScale(Value h) {
  if (!op.isCosine())
    return nullptr;
  // Swin clamps the learned scale at ln(1 / 0.01) before the exponential:
  // the scores' factor never exceeds 100. minimumf keeps a NaN scale NaN,
  // as torch.clamp does.
  Value logitScale = loadScalar(op.getLogitScale(), {h});
  Value clamped = arith::MinimumFOp::create(
      b, logitScale,
      arith::ConstantOp::create(b, b.getF32FloatAttr(std::log(100.0))));
  return math::ExpOp::create(b, clamped);
}

Value FusedKernelEmitter::reciprocalNorm(Value sumOfSquares) {
  // F.normalize divides by max(|x|, eps): a zero row (a padding token
  // without padding values, say) stays zero instead of becoming NaN.
  Value norm = arith::MaximumFOp::create(
      b, math::SqrtOp::create(b, sumOfSquares),
      arith::ConstantOp::create(b, b.getF32FloatAttr(1e-12)));
  return arith::DivFOp::create(
      b, arith::ConstantOp::create(b, b.getF32FloatAttr(1.0)), norm);
}

Value FusedKernelEmitter::reciprocalRowNorm(Row row) {
  int64_t width = g.computeLanes;
  int64_t chunks = llvm::divideCeil(g.headDim, width);
  Value sum = splat(0.0, computeType);
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t lanes = std::min(width, g.headDim - c * width);
    Value x = loadVector(row.memref, {add(row.offset, index(c * width))}, lanes,
                         width);
    sum = vector::FMAOp::create(b, x, x, sum);
  }
  return reciprocalNorm(
      vector::ReductionOp::create(b, vector::CombiningKind::ADD, sum));
}

Value FusedKernelEmitter::paddedPosition(Value token) {
  if (g.paddedRowLength == g.rowLength)
    return token;
  return add(token, mulConst(divConst(token, g.rowLength),
                             g.paddedRowLength - g.rowLength));
}

Value FusedKernelEmitter::tableOffset(Value token) {
  Value offset = index(0);
  for (int64_t a = g.window.size() - 1; a >= 0; --a) {
    Value coord = a == 0 ? token : remConst(token, g.window[a]);
    offset = add(offset, mulConst(coord, g.tableStrides[a]));
    if (a > 0)
      token = divConst(token, g.window[a]);
  }
  return offset;
}

FusedKernelEmitter::RowAddress
FusedKernelEmitter::rowAddress(Value w, Value h, Value token, Input which) {
  if (!featureMap) // [b, h, t, e]
    return {
        mulConst(add(mulConst(add(mulConst(w, g.heads), h), g.tokens), token),
                 g.headDim),
        Value()};
  bool packed = op.getPackedQkv();
  return mapRowAddress(w, h, token, packed ? 3 : 1,
                       packed ? static_cast<int64_t>(which) : 0);
}

FusedKernelEmitter::RowAddress
FusedKernelEmitter::mapRowAddress(Value w, Value h, Value token, int64_t parts,
                                  int64_t part) {
  // [image, position, (part, h, e)]: `parts` rows of C channels per token.
  TokenSource source;
  if (tokenPositionTable) {
    int64_t perImage = featureMap->windowsPerImage();
    source.image = divConst(w, perImage);
    Value position = memref::LoadOp::create(
        b, tokenPositionTable, ValueRange{remConst(w, perImage), token});
    if (featureMap->isPadded()) {
      Value zero = arith::ConstantOp::create(b, b.getI32IntegerAttr(0));
      source.valid = arith::CmpIOp::create(b, arith::CmpIPredicate::sge,
                                           position, zero);
      position = select(source.valid, position, zero);
    }
    source.position =
        arith::IndexCastOp::create(b, b.getIndexType(), position);
  } else {
    source = locateToken(b, b.getLoc(), *featureMap, w, token);
  }
  int64_t channels = g.heads * g.headDim;
  Value offset =
      add(mulConst(add(mulConst(source.image, featureMap->tokensPerImage()),
                       source.position),
                   parts * channels),
          add(mulConst(h, g.headDim), index(part * channels)));
  return {offset, source.valid};
}

FusedKernelEmitter::RowAddress
FusedKernelEmitter::outputAddress(Value w, Value h, Value token) {
  if (featureMap)
    return mapRowAddress(w, h, token, /*parts=*/1, /*part=*/0);
  if (!op.hasMergedHeadsResult())
    return rowAddress(w, h, token);
  // [b, t, h * d + e]
  return {add(mulConst(add(mulConst(w, g.tokens), token), g.heads * g.headDim),
              mulConst(h, g.headDim)),
          Value()};
}

Value FusedKernelEmitter::loadInputElement(Input which, RowAddress row, Value h,
                                           int64_t e) {
  auto loadAt = [&](Value memref, Value offset) {
    return toF32(memref::LoadOp::create(b, memref, offset));
  };
  Value value =
      loadAt(flatInputs[static_cast<int>(which)], add(row.offset, index(e)));
  if (!row.valid)
    return value;
  Value padding = arith::ConstantOp::create(b, b.getF32FloatAttr(0.0));
  if (!paddingRows.empty())
    padding = loadAt(paddingRows[static_cast<int>(which)],
                     add(mulConst(h, g.headDim), index(e)));
  return select(row.valid, value, padding);
}

Value FusedKernelEmitter::countWindows() {
  Value windows = memref::DimOp::create(b, op.getQuery(), 0);
  if (!featureMap)
    return windows;
  return mulConst(windows, getNumWindows(*op.getResolution(), g.window));
}

Value FusedKernelEmitter::maskWindow(Value w) {
  // The shift's labels repeat per image; an explicit mask per its first
  // extent.
  if (Value mask = op.getMask())
    return remConst(w, cast<ShapedType>(mask.getType()).getDimSize(0));
  if (op.hasShiftMask())
    return remConst(w, getNumWindows(*op.getResolution(), g.window));
  return Value();
}

scf::ParallelOp FusedKernelEmitter::createItemLoop(Value items) {
  auto loop = scf::ParallelOp::create(b, ValueRange{index(0)},
                                      ValueRange{items}, ValueRange{index(1)});
  RpeDialect::ItemLoopAttrHelper(b.getContext()).setAttr(loop, b.getUnitAttr());
  return loop;
}

void FusedKernelEmitter::emitOperandViews(bool withPaddingRows) {
  for (Value input : {op.getQuery(), op.getKey(), op.getValue()})
    flatInputs.push_back(flatten(b, b.getLoc(), input));
  flatOutput = flatten(b, b.getLoc(), op.getAttentionOutput());
  if (withPaddingRows)
    for (Value pad : op.getPaddingValues())
      paddingRows.push_back(flatten(b, b.getLoc(), pad));
}

Value FusedKernelEmitter::regionLabel(Value wi, Value token) {
  ArrayRef<int64_t> resolution = *op.getResolution();
  ArrayRef<int64_t> shift = *op.getShift();
  int64_t rank = g.window.size();
  Value label = index(0);
  Value windowRest = wi, tokenRest = token;
  int64_t weight = 1;
  for (int64_t a = rank - 1; a >= 0; --a) {
    int64_t grid = resolution[a] / g.window[a];
    Value windowCoord = a == 0 ? windowRest : remConst(windowRest, grid);
    Value tokenCoord = a == 0 ? tokenRest : remConst(tokenRest, g.window[a]);
    if (a > 0) {
      windowRest = divConst(windowRest, grid);
      tokenRest = divConst(tokenRest, g.window[a]);
    }
    Value p = add(mulConst(windowCoord, g.window[a]), tokenCoord);
    auto below = [&](int64_t bound) {
      return compare(arith::CmpIPredicate::ult, p, index(bound));
    };
    Value axisLabel =
        select(below(resolution[a] - g.window[a]), index(0),
               select(below(resolution[a] - shift[a]), index(1), index(2)));
    label = add(label, mulConst(axisLabel, weight));
    weight *= 3;
  }
  return label;
}

} // namespace mlir::rpe::detail
