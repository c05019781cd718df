//===- MatmulKernel.cpp - the CPU kernel of rpe.matmul --------------------===//
//
// out = epilogue(A B) for A [M, K] and B [K, N] packed in panels of NR
// columns, Bp[p, k, r] = B[k, p NR + r] (zero past N), emitted after
// bufferization as an scf.parallel over vector code:
//
//   for each item (panel p, block of MR rows from m0), in parallel:
//     sum[r][v] = 0
//     for each chunk [k0, k1) of at most 256 k in [0, K):
//       acc[r][v] = 0                            MR x NR / L vector registers
//       for k in [k0, k1):
//         prefetch a K-th of the next row block's A (and residual)
//         b[v]       = Bp[p, k, v L : v L + L]   NR / L vector loads
//         acc[r][v] += A[m0 + r, k] * b[v]       a broadcast per row, FMAs
//       sum[r][v] += acc[r][v]
//     out[m0 + r, p NR + v L : ...] = epilogue(sum[r][v], inputs at the
//                                     same (m, n))
//
// The chunks bound the rounding error: one chain of K f32 additions errs
// as sqrt(K) roundings (typically), twice oneDNN's at a Swin or MaxViT
// fc2's K = 2048 .. 3072 (enough to take a swapped MaxViT-T past its
// tolerance); chunks of C make it sqrt(C) + sqrt(K / C), as oneDNN's k
// blocks do. A K of at most one chunk is a single loop, as before.
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
// dynamic M's last rows take tiles of one row; columns past N, in the last
// panel, are neither computed nor stored. Weights that are not packed at
// compile time (rpe-form-matmul packs constant ones) are packed here, once per
// call, into a buffer the kernel frees on exit.
//
// bf16 on AVX512-BF16 (`bf16-dot`): vdpbf16ps (x86vector.avx512.dot) adds
// to each f32 lane the products of a pair of bf16,
//
//   acc[l] += a[2l] * b[2l] + a[2l + 1] * b[2l + 1]
//
// twice an FMA's multiply-adds. The k loop then takes k in pairs, against
// B packed in pairs of k, Bp[p, j, r, h] = B[2j + h, p NR + r] (zero past
// N, and at k = K for an odd K), so that lane r of a panel's vector holds
// column r's two k:
//
//     for j in [0, K / 2):
//       b[v]       = Bp[p, j, v L : v L + L, 0 : 2]  2 L bf16 per vector
//       a[r]       = A[m0 + r, 2j : 2j + 2]          one 32-bit broadcast
//       acc[r][v]  = dot(acc[r][v], a[r], b[v])
//     if K is odd: the same for j = K / 2 with a[r] = (A[m0 + r, K - 1], 0)
//
// The last k of an odd K is read alone, as a bf16 whose partner is zero:
// reading A[m0 + r, K] would pass the end of the last row. The products
// are exact in f32 and accumulate in f32 as the FMAs' do; only their order
// (two k summed before each add) differs.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Codegen.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::rpe;

namespace {

/// Where a tile is: rows m0 .. m0 + MR of A and the output, and the
/// columns of panel p.
struct Tile {
  Value panel;
  SmallVector<Value> rowIndices; // m0 + r for r in [0, MR)
  Value panelStart;              // p NR, the first column
  int64_t columns;               // NR, or fewer in the last panel
  int64_t vectors;               // ceil(columns / L)
};

/// Emits the kernel of one bufferized rpe.matmul where the op is.
class MatmulKernel {
public:
  MatmulKernel(ImplicitLocOpBuilder &b, MatmulOp op, int64_t lanes,
               bool bf16Dot)
      : b(b), op(op), lanes(lanes), k(op.getReductionSize()),
        n(op.getColumns()) {
    // Pairs of k where B is packed so, or is packed here: weights packed
    // one k per row at compile time widen to f32 as without bf16-dot.
    pairs = bf16Dot && getElementTypeOrSelf(op.getLhs().getType()).isBF16() &&
            (op.hasPairedRhs() || !op.hasPackedRhs());
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
  std::pair<Value, Value> packAtRunTime();
  Value viewPairsAsRows(Value packed);
  void emitItem(Value rhs, Value item, Value rows, Value rowBlocks);
  void emitRowBlocks(Value rhs, Value panel, Value m0, Value rows,
                     bool lastPanel);
  void emitTile(Value rhs, Value panel, Value m0, int64_t tileRows,
                bool lastPanel);
  SmallVector<Value> sumInChunks(
      int64_t steps, int64_t chunk, ValueRange zeros,
      function_ref<SmallVector<Value>(Value, Value, ValueRange)> sumSteps);
  SmallVector<Value> emitProducts(Value rhs, const Tile &tile);
  SmallVector<Value> emitPairProducts(Value rhs, const Tile &tile);
  void prefetchNextRowBlock(const Tile &tile, Value step, int64_t steps);
  Value broadcastPair(Value row, Value pair);
  Value broadcastLastAlone(Value row);
  Value loadEpilogueInput(unsigned input, Value row, Value column,
                          int64_t validLanes);
  Value applyEpilogue(Value product, Value row, Value column,
                      int64_t validLanes);

  ImplicitLocOpBuilder &b;
  MatmulOp op;
  int64_t lanes, k, n;
  int64_t panelWidth, panels, tileRows;
  /// bf16 dot products on pairs of k (B packed in pairs).
  bool pairs;
  /// The items of one row block are consecutive (B stays in L2), rather
  /// than those of one panel.
  bool rowBlockMajor;
};

} // namespace

/// Bp[p, k, r] = B[k, p NR + r] (or B[p NR + r, k] transposed), zero past
/// N, into a new buffer; in pairs of k, Bp[p, j, r, h] = B[2j + h, p NR +
/// r], zero past N and K. Returns Bp and the allocation to free.
std::pair<Value, Value> MatmulKernel::packAtRunTime() {
  Value rhs = op.getRhs();
  Type element = getElementTypeOrSelf(rhs.getType());
  int64_t rows = pairs ? llvm::divideCeil(k, 2) : k;
  auto type = pairs ? MemRefType::get({panels, rows, panelWidth, 2}, element)
                    : MemRefType::get({panels, rows, panelWidth}, element);
  Value packed, allocation, written;
  Type moved = element;
  if (element.isF32()) {
    packed = allocation = written = memref::AllocOp::create(b, type);
  } else {
    // A 16-bit float moves as its bits, written through an integer view of
    // the buffer: as a value (the select of the element or zero), x86
    // without AVX512-BF16 would round it back to bf16 through a libcall
    // (__truncsfbf2); LLVM folds bits cast back to bf16 into that value.
    unsigned bits = element.getIntOrFloatBitWidth();
    moved = b.getIntegerType(bits);
    allocation = memref::AllocOp::create(
        b, MemRefType::get({type.getNumElements() * bits / 8}, b.getI8Type()));
    packed =
        memref::ViewOp::create(b, type, allocation, index(0), ValueRange{});
    written = memref::ViewOp::create(b, type.clone(moved), allocation, index(0),
                                     ValueRange{});
  }
  Value zero = arith::ConstantOp::create(b, b.getZeroAttr(moved));
  auto loop = [&](int64_t count, function_ref<void(Value)> body) {
    auto forOp = scf::ForOp::create(b, index(0), index(count), index(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(forOp.getBody()->getTerminator());
    body(forOp.getInductionVar());
  };
  // packed[at] = B[kk, column] where `inside`, else zero.
  auto packElement = [&](Value kk, Value column, Value inside, ValueRange at) {
    auto ifInside = scf::IfOp::create(b, moved, inside,
                                      /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&ifInside.getThenRegion().front());
      SmallVector<Value> from = {kk, column};
      if (op.getTransposeRhs())
        std::swap(from[0], from[1]);
      Value value = memref::LoadOp::create(b, rhs, from);
      if (moved != element)
        value = arith::BitcastOp::create(b, moved, value);
      scf::YieldOp::create(b, value);
      b.setInsertionPointToStart(&ifInside.getElseRegion().front());
      scf::YieldOp::create(b, zero);
    }
    memref::StoreOp::create(b, ifInside.getResult(0), written, at);
  };
  loop(panels, [&](Value p) {
    loop(rows, [&](Value j) {
      loop(panelWidth, [&](Value r) {
        Value column = arith::AddIOp::create(
            b, arith::MulIOp::create(b, p, index(panelWidth)), r);
        Value inside = arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                             column, index(n));
        if (!pairs) {
          packElement(j, column, inside, ValueRange{p, j, r});
          return;
        }
        for (int64_t h = 0; h < 2; ++h) {
          // k = 2j + h; only the second of an odd K's last pair is past K.
          Value kk = arith::AddIOp::create(
              b, arith::MulIOp::create(b, j, index(2)), index(h));
          Value valid = inside;
          if (h == 1 && k % 2 == 1)
            valid = arith::AndIOp::create(
                b, inside,
                arith::CmpIOp::create(b, arith::CmpIPredicate::ult, kk,
                                      index(k)));
          packElement(kk, column, valid, ValueRange{p, j, r, index(h)});
        }
      });
    });
  });
  return {packed, allocation};
}

/// Bp [P, K / 2, NR, 2] as [P, K / 2, 2 NR]: the 2 L bf16 of a vector of
/// pairs at one index.
Value MatmulKernel::viewPairsAsRows(Value packed) {
  SmallVector<ReassociationIndices> reassociation = {{0}, {1}, {2, 3}};
  auto type = cast<MemRefType>(packed.getType());
  if (!memref::CollapseShapeOp::isGuaranteedCollapsible(type, reassociation))
    return Value();
  return memref::CollapseShapeOp::create(b, packed, reassociation);
}

LogicalResult MatmulKernel::emit() {
  if (panelWidth % lanes != 0)
    return op.emitOpError() << "has panels of " << panelWidth
                            << " columns, not a multiple of the kernel's "
                            << lanes << " lanes";
  if (op.hasPairedRhs() && !pairs)
    return op.emitOpError() << "has weights packed in pairs of k, which only "
                               "the kernel of bf16-dot reads";
  bool packHere = !op.hasPackedRhs();
  auto [packed, allocation] =
      packHere ? packAtRunTime() : std::pair<Value, Value>(op.getRhs(), {});
  Value rhs = packed;
  if (pairs && !(rhs = viewPairsAsRows(packed)))
    return op.emitOpError() << "expects weights packed in pairs of k with "
                               "each panel's pairs contiguous, got "
                            << packed.getType();
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
    memref::DeallocOp::create(b, allocation);
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
  Tile tile;
  tile.panel = panel;
  for (int64_t r = 0; r < rowCount; ++r)
    tile.rowIndices.push_back(arith::AddIOp::create(b, m0, index(r)));
  tile.panelStart = arith::MulIOp::create(b, panel, index(panelWidth));
  tile.columns = lastPanel ? n - (panels - 1) * panelWidth : panelWidth;
  tile.vectors = llvm::divideCeil(tile.columns, lanes);
  SmallVector<Value> products =
      pairs ? emitPairProducts(rhs, tile) : emitProducts(rhs, tile);

  Value out = op.getInit();
  ArrayRef<Value> rowIndices = tile.rowIndices;
  Value panelStart = tile.panelStart;
  int64_t columns = tile.columns, vectors = tile.vectors;
  for (int64_t r = 0; r < rowCount; ++r)
    for (int64_t v = 0; v < vectors; ++v) {
      int64_t validLanes = std::min(lanes, columns - v * lanes);
      Value column = arith::AddIOp::create(b, panelStart, index(v * lanes));
      Value result = applyEpilogue(products[r * vectors + v], rowIndices[r],
                                   column, validLanes);
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

/// The k a tile sums in registers before adding them to the sums of the
/// k before (the file's header says why).
constexpr int64_t kStepsPerChunk = 256;

/// The sums over steps [0, steps) that `sumSteps(begin, end, init)` emits
/// for the steps [begin, end), added to `init`: one range when there are
/// at most `chunk` steps, else a loop over chunks (the last may be short),
/// each summed from `zeros` and added to the chunks' before it. Those sums
/// are loop-carried values the register allocator keeps on the stack while
/// a chunk runs: a load, an add and a store per accumulator every `chunk`
/// steps.
SmallVector<Value> MatmulKernel::sumInChunks(
    int64_t steps, int64_t chunk, ValueRange zeros,
    function_ref<SmallVector<Value>(Value, Value, ValueRange)> sumSteps) {
  if (steps <= chunk)
    return sumSteps(index(0), index(steps), zeros);
  auto chunks =
      scf::ForOp::create(b, index(0), index(steps), index(chunk), zeros);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(chunks.getBody());
  Value begin = chunks.getInductionVar();
  Value end = arith::MinUIOp::create(
      b, arith::AddIOp::create(b, begin, index(chunk)), index(steps));
  SmallVector<Value> sums;
  for (auto [before, chunkSum] : llvm::zip(chunks.getRegionIterArgs(),
                                           sumSteps(begin, end, zeros)))
    sums.push_back(arith::AddFOp::create(b, before, chunkSum));
  scf::YieldOp::create(b, sums);
  return SmallVector<Value>(chunks.getResults());
}

/// acc[r][v] = sum_k A[row r, k] * Bp[p, k, v L : v L + L]: a broadcast of
/// A per row and k, FMAs on f32 (bf16 widened), in chunks of k.
SmallVector<Value> MatmulKernel::emitProducts(Value rhs, const Tile &tile) {
  Value lhs = op.getLhs();
  Value panel = tile.panel;
  ArrayRef<Value> rowIndices = tile.rowIndices;
  int64_t vectors = tile.vectors;
  Type element = getElementTypeOrSelf(lhs.getType());
  auto f32Vector = VectorType::get({lanes}, b.getF32Type());
  int64_t rowCount = rowIndices.size();
  Value zeros = arith::ConstantOp::create(
      b, DenseElementsAttr::get(f32Vector, b.getF32FloatAttr(0.0)));
  auto widen = [&](Value v) -> Value {
    Type type = v.getType();
    Type f32 = isa<VectorType>(type)
                   ? Type(cast<VectorType>(type).clone(b.getF32Type()))
                   : b.getF32Type();
    return element.isF32() ? v : arith::ExtFOp::create(b, f32, v);
  };
  auto sumSteps = [&](Value begin, Value end, ValueRange init) {
    auto loop = scf::ForOp::create(b, begin, end, index(1), init);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value kk = loop.getInductionVar();
    prefetchNextRowBlock(tile, kk, k);
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
    return SmallVector<Value>(loop.getResults());
  };
  SmallVector<Value> init(rowCount * vectors, zeros);
  return sumInChunks(k, kStepsPerChunk, init, sumSteps);
}

/// Step `step` of the `steps` of the k loop prefetches a part of what the
/// tile below this one (the next row block, same panel) will read: A's
/// MR x K and the MR x NR of every epilogue input read at (m, n), such as
/// a residual. A tall A streams from L3 or DRAM (batch 8: 25,088 rows), and
/// a row block's rows are too short (K = 96: 6 lines) for the hardware
/// prefetchers to run ahead of the tile that reads them: on one Zen 5 core
/// this takes Swin-T's batch-8 stage-1 GEMMs from 59-80% of the FMA peak
/// to 80-97% (a residual's: 83 to 93%). Prefetching the output's lines for
/// writing as well changed nothing measurable. The parts are elements
/// `step * ceil(size / steps)` of each (a line is touched more than once
/// where that is under 16 floats); rows past A's last are prefetched as
/// the last.
void MatmulKernel::prefetchNextRowBlock(const Tile &tile, Value step,
                                        int64_t steps) {
  Value lhs = op.getLhs();
  Value m0 = tile.rowIndices.front();
  int64_t rowCount = tile.rowIndices.size();
  Value lastRow = arith::SubIOp::create(b, memref::DimOp::create(b, lhs, 0),
                                        index(1));
  // Element `step * ceil(rows * columns / steps)` of the next block's rows
  // x `columns`, as (row, column from its first).
  auto elementOfNext = [&](int64_t columns) -> std::pair<Value, Value> {
    int64_t size = rowCount * columns;
    Value flat = arith::MinUIOp::create(
        b,
        arith::MulIOp::create(
            b, step,
            index(llvm::divideCeil(size, std::max<int64_t>(steps, 1)))),
        index(size - 1));
    Value row = arith::AddIOp::create(
        b, m0,
        arith::AddIOp::create(b, index(rowCount),
                              arith::DivUIOp::create(b, flat, index(columns))));
    return {arith::MinUIOp::create(b, row, lastRow),
            arith::RemUIOp::create(b, flat, index(columns))};
  };
  auto [row, column] = elementOfNext(k);
  memref::PrefetchOp::create(b, lhs, ValueRange{row, column},
                             /*isWrite=*/false, /*localityHint=*/3,
                             /*isDataCache=*/true);

  // Epilogue inputs at (m, n): the tile's columns of the next rows.
  AffineMap atRowAndColumn =
      AffineMap::getMultiDimIdentityMap(2, b.getContext());
  Value inputRow, inputColumn;
  for (auto [input, map] :
       llvm::zip(op.getEpilogueInputs(), op.getEpilogueMaps())) {
    if (cast<AffineMapAttr>(map).getValue() != atRowAndColumn)
      continue;
    if (!inputRow) {
      Value offset;
      std::tie(inputRow, offset) = elementOfNext(tile.columns);
      inputColumn = arith::AddIOp::create(b, tile.panelStart, offset);
    }
    memref::PrefetchOp::create(b, input, ValueRange{inputRow, inputColumn},
                               /*isWrite=*/false, /*localityHint=*/3,
                               /*isDataCache=*/true);
  }
}

/// acc[r][v] = sum_k A[row r, k] * B[k, columns of vector v] over the pairs
/// of k, one dot product per (row, vector) and pair, `rhs` the pairs of
/// each panel as rows, [P, K / 2, 2 NR]; an odd K's last k after the loop.
SmallVector<Value> MatmulKernel::emitPairProducts(Value rhs, const Tile &tile) {
  Value panel = tile.panel;
  ArrayRef<Value> rowIndices = tile.rowIndices;
  int64_t vectors = tile.vectors;
  auto f32Vector = VectorType::get({lanes}, b.getF32Type());
  auto pairVector = VectorType::get({2 * lanes}, b.getBF16Type());
  int64_t rowCount = rowIndices.size();
  // acc[r][v] = dot(acc[r][v], a[r], Bp[p, j, v L : v L + L, 0 : 2]) for
  // the broadcast pairs a[r] of A's rows.
  auto step = [&](Value j, ValueRange acc, ArrayRef<Value> a) {
    SmallVector<Value> columnsOfB;
    for (int64_t v = 0; v < vectors; ++v)
      columnsOfB.push_back(vector::LoadOp::create(
          b, pairVector, rhs, ValueRange{panel, j, index(2 * v * lanes)}));
    SmallVector<Value> next;
    for (int64_t r = 0; r < rowCount; ++r)
      for (int64_t v = 0; v < vectors; ++v)
        next.push_back(x86vector::DotBF16Op::create(
            b, f32Vector, acc[r * vectors + v], a[r], columnsOfB[v]));
    return next;
  };

  Value zeros = arith::ConstantOp::create(
      b, DenseElementsAttr::get(f32Vector, b.getF32FloatAttr(0.0)));
  SmallVector<Value> init(rowCount * vectors, zeros);
  auto sumPairs = [&](Value begin, Value end, ValueRange init) {
    auto loop = scf::ForOp::create(b, begin, end, index(1), init);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value j = loop.getInductionVar();
    prefetchNextRowBlock(tile, j, k / 2);
    SmallVector<Value> a;
    for (Value row : rowIndices)
      a.push_back(broadcastPair(row, j));
    scf::YieldOp::create(b, step(j, loop.getRegionIterArgs(), a));
    return SmallVector<Value>(loop.getResults());
  };
  SmallVector<Value> acc =
      sumInChunks(k / 2, kStepsPerChunk / 2, init, sumPairs);
  if (k % 2 == 0)
    return acc;
  // The last k, whose pair in Bp has a zero second row.
  SmallVector<Value> a;
  for (Value row : rowIndices)
    a.push_back(broadcastLastAlone(row));
  return step(index(k / 2), acc, a);
}

/// (A[row, 2j], A[row, 2j + 1]) as one 32-bit value in every lane: the
/// `a` operand of a dot product.
Value MatmulKernel::broadcastPair(Value row, Value pair) {
  auto i32 = b.getI32Type();
  Value twoK = vector::LoadOp::create(
      b, VectorType::get({2}, b.getBF16Type()), op.getLhs(),
      ValueRange{row, arith::MulIOp::create(b, pair, index(2))});
  Value bits = vector::BitCastOp::create(b, VectorType::get({1}, i32), twoK);
  Value lanesOfBits =
      vector::BroadcastOp::create(b, VectorType::get({lanes}, i32), bits);
  return vector::BitCastOp::create(
      b, VectorType::get({2 * lanes}, b.getBF16Type()), lanesOfBits);
}

/// (A[row, K - 1], 0) in every lane, the last k of an odd K: the bf16's
/// bits zero-extended to 32 (x86 is little-endian: the low half is the
/// pair's first element). Nothing past the row is read.
Value MatmulKernel::broadcastLastAlone(Value row) {
  auto i32 = b.getI32Type();
  Value last =
      memref::LoadOp::create(b, op.getLhs(), ValueRange{row, index(k - 1)});
  Value bits = arith::ExtUIOp::create(
      b, i32, arith::BitcastOp::create(b, b.getI16Type(), last));
  Value lanesOfBits =
      vector::BroadcastOp::create(b, VectorType::get({lanes}, i32), bits);
  return vector::BitCastOp::create(
      b, VectorType::get({2 * lanes}, b.getBF16Type()), lanesOfBits);
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
                                          int64_t vectorWidth, bool bf16Dot) {
  if (op->getNumResults() != 0)
    return op.emitOpError("must be bufferized before its kernel is emitted");
  rewriter.setInsertionPoint(op);
  // Located at the op, under its name: the item loop's outlined body (a
  // profile's symbol) says which op it computes.
  ImplicitLocOpBuilder b(
      NameLoc::get(op->getName().getIdentifier(), op.getLoc()), rewriter);
  if (failed(MatmulKernel(b, op, vectorWidth, bf16Dot).emit()))
    return failure();
  rewriter.eraseOp(op);
  return success();
}
