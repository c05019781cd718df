//===- RowsKernel.cpp - the row-parallel form of the fused attention ------===//
//
// One online softmax per query row: the GPU's fallback (a block per
// (window, head), a thread per row) and, on the host, nested scf.parallel
// loops. It needs no scratch and takes any op.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include "Rpe/WindowGeometry.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::rpe;
using namespace mlir::rpe::detail;

namespace {

/// The online softmax of one query row over the keys seen so far: the
/// running max m, the sum l of exp(s_j - m), and the unnormalized output
/// acc[e] = sum_j exp(s_j - m) v_j[e]. It is carried through the key loop as
/// [m, l, acc...].
struct RowSoftmaxState {
  Value m, l;
  SmallVector<Value> acc;

  SmallVector<Value> flatten() const {
    SmallVector<Value> values = {m, l};
    llvm::append_range(values, acc);
    return values;
  }
  static RowSoftmaxState unflatten(ValueRange values) {
    return {values[0], values[1], llvm::to_vector(values.drop_front(2))};
  }
};

} // namespace

namespace mlir::rpe::detail {

/// The row-parallel kernel: the steps of this file's header.
class RowsKernel : public KernelEmitter {
public:
  using KernelEmitter::KernelEmitter;

  LogicalResult emit(KernelTarget target);

private:
  /// What the steps of query row `i` of (window w, head h) share: its
  /// scaled query, table offset P(i), mask window and region label.
  struct QueryRow {
    Value w, h, i;
    SmallVector<Value> query;
    Value tableOffset;
    Value windowInMask, label, maskValue;
  };
  /// The work of query row `i` of (window w, head h).
  void emitRow(Value w, Value h, Value i);
  SmallVector<Value> loadScaledQuery(Value w, Value h, Value i);
  Value score(const QueryRow &row, Value j);
  RowSoftmaxState update(const QueryRow &row, const RowSoftmaxState &previous,
                         Value s, Value j);
  void storeRow(const QueryRow &row, const RowSoftmaxState &state);
};

/// for (b, h) in parallel: for i in parallel:
///   m = lowest finite float, l = 0, acc = 0
///   for j: s = (scale q_i) · k_j + table[idx(i, j), h] (+ mask)
///          (cosine: scale s_h q_i / |q_i| and k_j / |k_j|)
///          m' = max(m, s); c = exp(m - m'); p = exp(s - m')
///          l = l c + p; acc = acc c + p v_j; m = m'
///   out_i = acc / l
LogicalResult RowsKernel::emit(KernelTarget target) {
  if (target == KernelTarget::Host) {
    emitItemLoop(ItemLoop::Parallel, /*allocateScratch=*/nullptr,
                 [&](Value item, Value) {
                   auto rows = scf::ParallelOp::create(
                       b, ValueRange{index(0)}, ValueRange{index(g.tokens)},
                       ValueRange{index(1)});
                   OpBuilder::InsertionGuard guard(b);
                   b.setInsertionPointToStart(rows.getBody());
                   emitRow(divConst(item, g.heads), remConst(item, g.heads),
                           rows.getInductionVars()[0]);
                 });
    return success();
  }
  // One block per (window, head), one thread per query row, rounded up to
  // whole warps.
  int64_t threads = llvm::divideCeil(g.tokens, 32) * 32;
  if (threads > 1024)
    return op.emitOpError("has ")
           << g.tokens
           << " tokens per window, more than a GPU block's 1024 "
              "threads";
  emitItemLaunch(/*itemsPerBlock=*/1, threads, /*inBlock=*/nullptr,
                 [&](Value item, Value i) {
                   Value isRow = arith::CmpIOp::create(
                       b, arith::CmpIPredicate::ult, i, index(g.tokens));
                   auto ifRow = scf::IfOp::create(b, isRow, /*withElse=*/false);
                   OpBuilder::InsertionGuard guard(b);
                   b.setInsertionPointToStart(&ifRow.getThenRegion().front());
                   emitRow(divConst(item, g.heads), remConst(item, g.heads), i);
                 });
  return success();
}

/// Row i's work: its scaled query, then per key the score and the online
/// softmax update, then the output row.
void RowsKernel::emitRow(Value w, Value h, Value i) {
  emitOperandViews();
  QueryRow row;
  row.w = w, row.h = h, row.i = i;
  row.query = loadScaledQuery(w, h, i);
  row.tableOffset = gridTableOffset(i);
  // The window's index into its mask: the shift's labels or the explicit
  // mask [nW, N, N] (window w adds mask[w mod nW]).
  row.windowInMask = maskWindow(w);
  row.label = op.hasShiftMask() ? regionLabel(row.windowInMask, i) : Value();
  row.maskValue = arith::ConstantOp::create(
      b, b.getF32FloatAttr(op.getMaskValue().convertToDouble()));

  Value zero = arith::ConstantOp::create(b, b.getF32FloatAttr(0.0));
  RowSoftmaxState init{
      arith::ConstantOp::create(b, b.getF32FloatAttr(kOnlineSoftmaxInitialMax)),
      zero, SmallVector<Value>(g.headDim, zero)};
  RowSoftmaxState state = RowSoftmaxState::unflatten(forLoop(
      index(0), index(g.tokens), 1, init.flatten(),
      [&](Value j, ValueRange carried) {
        Value s = score(row, j);
        return update(row, RowSoftmaxState::unflatten(carried), s, j)
            .flatten();
      }));
  storeRow(row, state);
}

/// scale * q_i, in registers (cosine: times s_h / |q_i|; each key's norm
/// is summed with its dot product in `score`).
SmallVector<Value> RowsKernel::loadScaledQuery(Value w, Value h, Value i) {
  Value scale = arith::ConstantOp::create(
      b, b.getF32FloatAttr(op.getScale().convertToDouble()));
  RowAddress queryRow = rowAddress(w, h, i);
  SmallVector<Value> query;
  for (int64_t e = 0; e < g.headDim; ++e)
    query.push_back(loadInputElement(Input::Query, queryRow, h, e));
  if (Value headScale = cosineHeadScale(h)) {
    Value squares = arith::ConstantOp::create(b, b.getF32FloatAttr(0.0));
    for (Value x : query)
      squares = math::FmaOp::create(b, x, x, squares);
    scale = arith::MulFOp::create(
        b, scale, arith::MulFOp::create(b, headScale, reciprocalNorm(squares)));
  }
  for (Value &x : query)
    x = arith::MulFOp::create(b, x, scale);
  return query;
}

/// s = (scale q_i) · k_j + table[idx(i, j), h] (+ mask).
Value RowsKernel::score(const QueryRow &row, Value j) {
  RowAddress keyRow = rowAddress(row.w, row.h, j, Input::Key);
  Value s = arith::ConstantOp::create(b, b.getF32FloatAttr(0.0));
  Value keySquares = s;
  for (int64_t e = 0; e < g.headDim; ++e) {
    Value x = loadInputElement(Input::Key, keyRow, row.h, e);
    s = math::FmaOp::create(b, row.query[e], x, s);
    if (op.isCosine())
      keySquares = math::FmaOp::create(b, x, x, keySquares);
  }
  if (op.isCosine())
    s = arith::MulFOp::create(b, s, reciprocalNorm(keySquares));
  // idx(i, j) = P(i) - P(j) + (T - 1) / 2 (BEiT: of the grid positions, or
  // the class token's rows)
  Value idx = arith::SubIOp::create(b, add(row.tableOffset, index(g.center)),
                                    gridTableOffset(j));
  if (g.classToken)
    idx = classTokenEntry(compare(arith::CmpIPredicate::eq, row.i, index(0)),
                          compare(arith::CmpIPredicate::eq, j, index(0)), idx,
                          index(0));
  s = arith::AddFOp::create(
      b, s,
      toF32(memref::LoadOp::create(b, op.getTable(), ValueRange{idx, row.h})));
  if (row.label) {
    Value differ = arith::CmpIOp::create(b, arith::CmpIPredicate::ne, row.label,
                                         regionLabel(row.windowInMask, j));
    s = arith::AddFOp::create(
        b, s,
        arith::SelectOp::create(
            b, differ, row.maskValue,
            arith::ConstantOp::create(b, b.getF32FloatAttr(0.0))));
  }
  if (Value mask = op.getMask())
    s = arith::AddFOp::create(
        b, s,
        toF32(memref::LoadOp::create(b, mask,
                                     ValueRange{row.windowInMask, row.i, j})));
  return s;
}

/// The online softmax's step for key j of score s:
///   m' = max(m, s); c = exp(m - m'); p = exp(s - m')
///   l' = l c + p;   acc'[e] = acc[e] c + p v_j[e]
RowSoftmaxState RowsKernel::update(const QueryRow &row,
                                   const RowSoftmaxState &previous, Value s,
                                   Value j) {
  RowSoftmaxState next;
  next.m = arith::MaximumFOp::create(b, previous.m, s);
  Value correction =
      math::ExpOp::create(b, arith::SubFOp::create(b, previous.m, next.m));
  Value p = math::ExpOp::create(b, arith::SubFOp::create(b, s, next.m));
  next.l = math::FmaOp::create(b, previous.l, correction, p);
  RowAddress valueRow = rowAddress(row.w, row.h, j, Input::Value);
  for (int64_t e = 0; e < g.headDim; ++e)
    next.acc.push_back(math::FmaOp::create(
        b, p, loadInputElement(Input::Value, valueRow, row.h, e),
        arith::MulFOp::create(b, previous.acc[e], correction)));
  return next;
}

/// out_i = acc / l, in the output's layout; padding tokens are cropped.
void RowsKernel::storeRow(const QueryRow &row, const RowSoftmaxState &state) {
  auto store = [&](Value offset) {
    Type element = getElementTypeOrSelf(op.getAttentionOutput().getType());
    for (int64_t e = 0; e < g.headDim; ++e) {
      Value value = arith::DivFOp::create(b, state.acc[e], state.l);
      if (!element.isF32())
        value = arith::TruncFOp::create(b, element, value);
      memref::StoreOp::create(b, value, flatOutput, add(offset, index(e)));
    }
  };
  RowAddress outRow = outputAddress(row.w, row.h, row.i);
  if (!outRow.valid) {
    store(outRow.offset);
    return;
  }
  OpBuilder::InsertionGuard guard(b);
  auto ifReal = scf::IfOp::create(b, outRow.valid, /*withElse=*/false);
  b.setInsertionPointToStart(&ifReal.getThenRegion().front());
  store(outRow.offset);
}

LogicalResult emitRowsKernel(ImplicitLocOpBuilder &b,
                             FusedAttentionOpInterface op,
                             const KernelGeometry &g, KernelTarget target) {
  return RowsKernel(b, op, g).emit(target);
}

} // namespace mlir::rpe::detail
