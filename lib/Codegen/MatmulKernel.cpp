//===- MatmulKernel.cpp - the CPU kernel of rpe.matmul --------------------===//
//
// out = epilogue(A B) for A [M, K] and B [K, N] packed in panels of NR
// columns, Bp[p, k, r] = B[k, p NR + r] (zero past N), emitted after
// bufferization as an scf.parallel over vector code:
//
//   for each item (panel p, block of MR rows from m0), in parallel:
//     acc[r][v] = 0                              MR x NR / L vector registers
//     for k in [0, K):
//       b[v]       = Bp[p, k, v L : v L + L]     NR / L vector loads
//       acc[r][v] += A[m0 + r, k] * b[v]         a broadcast per row, FMAs
//     out[m0 + r, p NR + v L : ...] = epilogue(acc[r][v], inputs at the
//                                     same (m, n))
//
// The tile of the product never leaves the registers until the epilogue
// (bias, GELU, residual: the op's region, run on vectors) has made it the
// result, which is stored once. A is read in place, row by row (its rows
// are broadcast one element at a time, so they need no packing); B's
// panel, NR x K floats, is read contiguously.
//
// The order of the items decides what stays in cache. Where all of packed
// B fits in half an L2 (Swin's K = 96 .. 384 projections: 37 .. 590 KB),
// a thread takes a block of rows against every panel in turn: the block's
// MR x K floats of A stay in L1 and B in L2, so that A, the large operand
// of a tall product (25,088 x 96 at batch 8), is read from memory once
// instead of once per panel. Otherwise the items of one panel sweep the
// rows: the panel stays in cache and A streams.
//
// The tile: with L lanes and R vector registers (AVX-512: 16 and 32; AVX2:
// 8 and 16) a panel is NR / L vectors, and the tile has as many rows as
// leave a register for each of B's vectors and one for A's broadcast: 8
// rows of 3 zmm (24 accumulators) on AVX-512, 4 rows of 3 ymm on AVX2.
// Each k then issues MR * NR / L FMAs against NR / L + MR loads. A known M
// that MR does not divide takes tiles of a size down to MR / 2 that does
// (49 rows: 7 x 7), else its last rows a tile of their own size; a
// dynamic M's last rows take tiles of one row; columns past N, in the last panel, are neither computed
// nor stored. Weights that are not packed at compile time (rpe-form-matmul
// packs constant ones) are packed here, once per call, into a buffer the
// kernel frees on exit.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Codegen.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::rpe;

namespace {

/// Emits the kernel of one bufferized rpe.matmul where the op is.
class MatmulKernel {
public:
  MatmulKernel(ImplicitLocOpBuilder &b, MatmulOp op, int64_t lanes)
      : b(b), op(op), lanes(lanes), k(op.getReductionSize()),
        n(op.getColumns()) {
    panelWidth = op.hasPackedRhs() ? op.getPanelWidth() : 3 * lanes;
    panels = llvm::divideCeil(n, panelWidth);
    int64_t registers = lanes >= 16 ? 32 : 16;
    int64_t panelVectors = panelWidth / lanes;
    tileRows = std::clamp<int64_t>((registers - panelVectors - 1) /
                                       panelVectors,
                                   1, 8);
    // A known M splits into tiles of one size where a size a little
    // smaller divides it: 49 rows are 7 tiles of 7, not 6 of 8 and a
    // single row whose tile would load as much as it computes.
    int64_t m = cast<ShapedType>(op.getLhs().getType()).getDimSize(0);
    if (!ShapedType::isDynamic(m) && m % tileRows != 0)
      for (int64_t rows = tileRows - 1; 2 * rows >= tileRows; --rows)
        if (m % rows == 0) {
          tileRows = rows;
          break;
        }
    // Half of Zen 4's (and most x86 cores') 1 MB L2 for B: the rest holds
    // the output rows and the epilogue's inputs.
    constexpr int64_t kPackedRhsBudget = 512 * 1024;
    int64_t elementBytes =
        getElementTypeOrSelf(op.getRhs().getType()).getIntOrFloatBitWidth() /
        8;
    rowBlockMajor = panels * panelWidth * k * elementBytes <= kPackedRhsBudget;
  }

  LogicalResult emit();

private:
  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value packAtRunTime();
  void emitItem(Value rhs, Value item, Value rows, Value rowBlocks);
  void emitRowBlocks(Value rhs, Value panel, Value m0, Value rows,
                     bool lastPanel);
  void emitTile(Value rhs, Value panel, Value m0, int64_t tileRows,
                bool lastPanel);
  Value loadEpilogueInput(unsigned input, Value row, Value column,
                          int64_t validLanes);
  Value applyEpilogue(Value product, Value row, Value column,
                      int64_t validLanes);

  ImplicitLocOpBuilder &b;
  MatmulOp op;
  int64_t lanes, k, n;
  int64_t panelWidth, panels, tileRows;
  /// The items of one row block are consecutive (B stays in L2), rather
  /// than those of one panel.
  bool rowBlockMajor;
};

} // namespace

/// Bp[p, k, r] = B[k, p NR + r] (or B[p NR + r, k] transposed), zero past
/// N, into a new buffer.
Value MatmulKernel::packAtRunTime() {
  Value rhs = op.getRhs();
  auto type = MemRefType::get({panels, k, panelWidth},
                              getElementTypeOrSelf(rhs.getType()));
  Value packed = memref::AllocOp::create(b, type);
  Value zero = arith::ConstantOp::create(
      b, b.getFloatAttr(type.getElementType(), 0.0));
  auto loop = [&](int64_t count, function_ref<void(Value)> body) {
    auto forOp = scf::ForOp::create(b, index(0), index(count), index(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(forOp.getBody()->getTerminator());
    body(forOp.getInductionVar());
  };
  loop(panels, [&](Value p) {
    loop(k, [&](Value kk) {
      loop(panelWidth, [&](Value r) {
        Value column = arith::AddIOp::create(
            b, arith::MulIOp::create(b, p, index(panelWidth)), r);
        Value inside = arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                             column, index(n));
        auto ifInside = scf::IfOp::create(b, type.getElementType(), inside,
                                          /*withElseRegion=*/true);
        {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(&ifInside.getThenRegion().front());
          SmallVector<Value> at = {kk, column};
          if (op.getTransposeRhs())
            std::swap(at[0], at[1]);
          scf::YieldOp::create(b,
                               memref::LoadOp::create(b, rhs, at).getResult());
          b.setInsertionPointToStart(&ifInside.getElseRegion().front());
          scf::YieldOp::create(b, zero);
        }
        memref::StoreOp::create(b, ifInside.getResult(0), packed,
                                ValueRange{p, kk, r});
      });
    });
  });
  return packed;
}

LogicalResult MatmulKernel::emit() {
  if (panelWidth % lanes != 0)
    return op.emitOpError() << "has panels of " << panelWidth
                            << " columns, not a multiple of the kernel's "
                            << lanes << " lanes";
  bool packHere = !op.hasPackedRhs();
  Value rhs = packHere ? packAtRunTime() : op.getRhs();
  Value rows = memref::DimOp::create(b, op.getLhs(), 0);
  Value rowBlocks = arith::CeilDivUIOp::create(b, rows, index(tileRows));
  // Items (p, row block), in the order of `rowBlockMajor`.
  Value items = arith::MulIOp::create(b, rowBlocks, index(panels));
  auto parallel = scf::ParallelOp::create(b, ValueRange{index(0)},
                                          ValueRange{items},
                                          ValueRange{index(1)});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(parallel.getBody());
    emitItem(rhs, parallel.getInductionVars()[0], rows, rowBlocks);
  }
  if (packHere)
    memref::DeallocOp::create(b, rhs);
  return success();
}

/// Item (p, row block): the panel's columns of the block's rows; the last
/// panel, when N is not a multiple of NR, separately (its columns past N
/// are neither computed nor stored).
void MatmulKernel::emitItem(Value rhs, Value item, Value rows,
                            Value rowBlocks) {
  Value panel, rowBlock;
  if (rowBlockMajor) {
    rowBlock = arith::DivUIOp::create(b, item, index(panels));
    panel = arith::RemUIOp::create(b, item, index(panels));
  } else {
    panel = arith::DivUIOp::create(b, item, rowBlocks);
    rowBlock = arith::RemUIOp::create(b, item, rowBlocks);
  }
  Value m0 = arith::MulIOp::create(b, rowBlock, index(tileRows));
  if (n % panelWidth == 0) {
    emitRowBlocks(rhs, panel, m0, rows, /*lastPanel=*/false);
    return;
  }
  Value isLast = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, panel,
                                       index(panels - 1));
  auto ifLast = scf::IfOp::create(b, isLast, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifLast.getThenRegion().front());
  emitRowBlocks(rhs, panel, m0, rows, /*lastPanel=*/true);
  b.setInsertionPointToStart(&ifLast.getElseRegion().front());
  emitRowBlocks(rhs, panel, m0, rows, /*lastPanel=*/false);
}

/// The block's rows from m0: a whole tile, or the rows left at the end (one
/// tile of their number when M is known, else a tile per row).
void MatmulKernel::emitRowBlocks(Value rhs, Value panel, Value m0, Value rows,
                                 bool lastPanel) {
  std::optional<int64_t> knownRows = getConstantIntValue(rows);
  if (knownRows && *knownRows % tileRows == 0) {
    emitTile(rhs, panel, m0, tileRows, lastPanel);
    return;
  }
  Value whole = arith::CmpIOp::create(
      b, arith::CmpIPredicate::ule,
      arith::AddIOp::create(b, m0, index(tileRows)), rows);
  auto ifWhole = scf::IfOp::create(b, whole, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifWhole.getThenRegion().front());
  emitTile(rhs, panel, m0, tileRows, lastPanel);
  b.setInsertionPointToStart(&ifWhole.getElseRegion().front());
  if (knownRows) {
    emitTile(rhs, panel, m0, *knownRows % tileRows, lastPanel);
    return;
  }
  auto rest = scf::ForOp::create(b, m0, rows, index(1));
  b.setInsertionPoint(rest.getBody()->getTerminator());
  emitTile(rhs, panel, rest.getInductionVar(), 1, lastPanel);
}

/// The tile of `rowCount` rows from m0 and the panel's columns: the
/// product in registers over K, then the epilogue and the store.
void MatmulKernel::emitTile(Value rhs, Value panel, Value m0, int64_t rowCount,
                            bool lastPanel) {
  Value lhs = op.getLhs();
  Type element = getElementTypeOrSelf(lhs.getType());
  auto f32Vector = VectorType::get({lanes}, b.getF32Type());
  int64_t columns = lastPanel ? n - (panels - 1) * panelWidth : panelWidth;
  int64_t vectors = llvm::divideCeil(columns, lanes);
  SmallVector<Value> rowIndices;
  for (int64_t r = 0; r < rowCount; ++r)
    rowIndices.push_back(arith::AddIOp::create(b, m0, index(r)));

  Value zeros = arith::ConstantOp::create(
      b, DenseElementsAttr::get(f32Vector, b.getF32FloatAttr(0.0)));
  SmallVector<Value> init(rowCount * vectors, zeros);
  auto loop = scf::ForOp::create(b, index(0), index(k), index(1), init);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value kk = loop.getInductionVar();
    auto widen = [&](Value v) -> Value {
      Type type = v.getType();
      Type f32 = isa<VectorType>(type)
                     ? Type(cast<VectorType>(type).clone(b.getF32Type()))
                     : b.getF32Type();
      return element.isF32() ? v : arith::ExtFOp::create(b, f32, v);
    };
    SmallVector<Value> columnsOfB;
    for (int64_t v = 0; v < vectors; ++v)
      columnsOfB.push_back(widen(vector::LoadOp::create(
          b, VectorType::get({lanes}, element), rhs,
          ValueRange{panel, kk, index(v * lanes)})));
    SmallVector<Value> next;
    for (int64_t r = 0; r < rowCount; ++r) {
      Value a = vector::BroadcastOp::create(
          b, f32Vector,
          widen(memref::LoadOp::create(b, lhs, ValueRange{rowIndices[r], kk})));
      for (int64_t v = 0; v < vectors; ++v)
        next.push_back(vector::FMAOp::create(
            b, a, columnsOfB[v], loop.getRegionIterArgs()[r * vectors + v]));
    }
    scf::YieldOp::create(b, next);
  }

  Value out = op.getInit();
  Value panelStart = arith::MulIOp::create(b, panel, index(panelWidth));
  for (int64_t r = 0; r < rowCount; ++r)
    for (int64_t v = 0; v < vectors; ++v) {
      int64_t validLanes = std::min(lanes, columns - v * lanes);
      Value column = arith::AddIOp::create(b, panelStart, index(v * lanes));
      Value result = applyEpilogue(loop.getResult(r * vectors + v),
                                   rowIndices[r], column, validLanes);
      SmallVector<Value> at = {rowIndices[r], column};
      if (validLanes == lanes) {
        vector::StoreOp::create(b, result, out, at);
        continue;
      }
      Value mask = vector::CreateMaskOp::create(
          b, VectorType::get({lanes}, b.getI1Type()),
          ValueRange{index(validLanes)});
      vector::MaskedStoreOp::create(b, out, at, mask, result);
    }
}

/// Input `input` of the epilogue at (row, columns column ..): a vector
/// along its last index where that is n, else one element broadcast
/// (or, for an n elsewhere, gathered element by element).
Value MatmulKernel::loadEpilogueInput(unsigned input, Value row, Value column,
                                      int64_t validLanes) {
  Value memref = op.getEpilogueInputs()[input];
  Type element = getElementTypeOrSelf(memref.getType());
  auto type = VectorType::get({lanes}, element);
  AffineMap map = cast<AffineMapAttr>(op.getEpilogueMaps()[input]).getValue();
  auto indicesAt = [&](Value columnValue) {
    SmallVector<Value> indices;
    for (AffineExpr expr : map.getResults()) {
      auto dim = dyn_cast<AffineDimExpr>(expr);
      indices.push_back(!dim                      ? index(0)
                        : dim.getPosition() == 0 ? row
                                                 : columnValue);
    }
    return indices;
  };
  ArrayRef<AffineExpr> results = map.getResults();
  auto isColumn = [](AffineExpr expr) {
    auto dim = dyn_cast<AffineDimExpr>(expr);
    return dim && dim.getPosition() == 1;
  };
  if (!results.empty() && isColumn(results.back())) {
    SmallVector<Value> at = indicesAt(column);
    if (validLanes == lanes)
      return vector::LoadOp::create(b, type, memref, at);
    Value mask = vector::CreateMaskOp::create(
        b, VectorType::get({lanes}, b.getI1Type()),
        ValueRange{index(validLanes)});
    Value zero = arith::ConstantOp::create(
        b, DenseElementsAttr::get(type, b.getZeroAttr(element)));
    return vector::MaskedLoadOp::create(b, type, memref, at, mask, zero);
  }
  if (llvm::none_of(results, isColumn))
    return vector::BroadcastOp::create(
        b, type, memref::LoadOp::create(b, memref, indicesAt(column)));
  SmallVector<Value> elements;
  for (int64_t lane = 0; lane < lanes; ++lane) {
    Value at = arith::AddIOp::create(
        b, column, index(std::min(lane, validLanes - 1)));
    elements.push_back(memref::LoadOp::create(b, memref, indicesAt(at)));
  }
  return vector::FromElementsOp::create(b, type, elements);
}

/// The epilogue's ops on vectors of `lanes`: its arguments are the
/// product's vector and the inputs' vectors at the same (m, n); scalars
/// from outside the region are broadcast.
Value MatmulKernel::applyEpilogue(Value product, Value row, Value column,
                                  int64_t validLanes) {
  Block &body = op.getEpilogue().front();
  IRMapping mapping;
  mapping.map(body.getArgument(0), product);
  for (unsigned input = 0; input < op.getEpilogueInputs().size(); ++input)
    mapping.map(body.getArgument(input + 1),
                loadEpilogueInput(input, row, column, validLanes));
  auto vectorOf = [&](Type type) -> Type {
    return VectorType::get({lanes}, type);
  };
  auto lookup = [&](Value value) -> Value {
    if (Value mapped = mapping.lookupOrNull(value))
      return mapped;
    // A scalar from outside the region, the same in every lane.
    Value broadcast =
        vector::BroadcastOp::create(b, vectorOf(value.getType()), value);
    mapping.map(value, broadcast);
    return broadcast;
  };
  for (Operation &scalarOp : body.without_terminator()) {
    if (auto constant = dyn_cast<arith::ConstantOp>(scalarOp)) {
      auto type = cast<VectorType>(vectorOf(constant.getType()));
      mapping.map(constant.getResult(),
                  arith::ConstantOp::create(
                      b, DenseElementsAttr::get(type, constant.getValue())));
      continue;
    }
    OperationState state(b.getLoc(), scalarOp.getName());
    for (Value operand : scalarOp.getOperands())
      state.addOperands(lookup(operand));
    for (Type type : scalarOp.getResultTypes())
      state.addTypes(vectorOf(type));
    state.addAttributes(scalarOp.getAttrs());
    Operation *vectorOp = b.create(state);
    mapping.map(scalarOp.getResults(), vectorOp->getResults());
  }
  return lookup(cast<YieldOp>(body.getTerminator()).getValue());
}

LogicalResult mlir::rpe::emitMatmulKernel(RewriterBase &rewriter, MatmulOp op,
                                          int64_t vectorWidth) {
  if (op->getNumResults() != 0)
    return op.emitOpError("must be bufferized before its kernel is emitted");
  rewriter.setInsertionPoint(op);
  // Located at the op, under its name: the item loop's outlined body (a
  // profile's symbol) says which op it computes.
  ImplicitLocOpBuilder b(
      NameLoc::get(op->getName().getIdentifier(), op.getLoc()), rewriter);
  if (failed(MatmulKernel(b, op, vectorWidth).emit()))
    return failure();
  rewriter.eraseOp(op);
  return success();
}
