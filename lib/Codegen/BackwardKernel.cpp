//===- BackwardKernel.cpp - the CPU kernel of the attention's gradient ----===//
//
// The kernel of rpe.fused_window_attention_grad, emitted after
// bufferization as scf loops over vector ops. Per (window b, head h) and
// block of query rows (one block for Swin's windows):
//
//   Kt[e, j'] = scale log2(e) k_j[e],  Vt[e, j'] = v_j[e]    packed (keys
//                                                            padded per row)
//   S, l      = the forward's scores and softmax, recomputed (base 2: S
//               holds 2^(s - m), l the row sums)
//   dP        = dout · Vt                                    the scores'
//                                                            micro-kernel
//   D_i       = dout_i · out_i
//   P         = S / l,  dS = P (dP - D),                     in place, one
//   G_h      += dS at the bias's addresses                   pass (the
//                                                            reversed
//                                                            table's layout)
//   dq_i      = scale sum_j dS[i, j'] k_j                    written
//   dv_j     += sum_i P[i, j'] dout_i                        f32 scratch
//   dk_j     += sum_i dS[i, j'] q_i                          f32 scratch
//
// then dk (times scale) and dv go to their rows. The three sums are the
// forward's P·v micro-kernel (emitRowCombination) with other coefficients
// and rows. After the item loop, dtable[t, h] = G_h[T - 1 - t].
//
// P is recomputed rather than saved: a window's scores are a few KiB that
// the q·kᵀ micro-kernel recomputes at a fraction of the backward's cost,
// where saving them (or even the log-sum-exp) would widen the forward's
// ABI and write N x N per window to memory.
//
// G needs no N x N index and no atomics: dS[i, j] adds to the table entry
// whose bias the forward read at R_h[P(j) - P(i) + (T - 1) / 2], so for a
// query row and a row of keys it is one vector add on a contiguous stretch
// of G_h. The items add into one G, so the item loop is sequential (an
// scf.for marked rpe.item_loop); callers that run ranges of items on
// threads (rpe-item-range, swin-aot's entry point) give each range its own
// dtable and sum them.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"
#include "TileSteps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::rpe;
using namespace mlir::rpe::detail;

namespace mlir::rpe::detail {

/// The gradient's CPU kernel: the steps of this file's header on the
/// forward's tile steps.
class BackwardKernel : public TileSteps {
public:
  using TileSteps::TileSteps;

  LogicalResult emit();

private:
  struct Scratch;
  Scratch allocateScratch();
  /// Row `token` of (w, h) in the gradient of q, k or v: the input's
  /// address in the gradient's buffer; padding tokens write `discard`.
  Row gradientRow(Input which, Value w, Value h, Value token, Value discard);
  void emitItem(Value w, Value h, Value image, const ScoreTerms &terms,
                const Scratch &scratch);
  void emitScoreGradients(Value w, Value h, const Scratch &scratch, Value qb,
                          Value rows);
  void storeTableGradient(Value tableGradient);

  /// The gradient's 1-D views of dq, dk, dv and of dout.
  SmallVector<Value, 3> flatGradients;
  Value flatOutputGradient;
};

/// The gradient kernel's scratch, allocated once per call.
struct BackwardKernel::Scratch {
  /// [d, N'']: scaled kᵀ, and vᵀ.
  Value keysT, valuesT;
  /// [query block, N'']: S, then P; dP, then dS.
  Value probabilities, scoreGradients;
  Value invSums;
  /// [N * d] f32 rows of q, k and dout; the dk and dv sums.
  Value queries, keys, outputGradients, keyGradients, valueGradients;
  /// Token layout on a padded map: a row that padding tokens' gradients
  /// are written to, and a zero row they read as their output.
  Value discard, zeroRow;
  /// G[h, t]: the table's gradient in the reversed table's layout.
  Value tableGradient;
};

BackwardKernel::Row BackwardKernel::gradientRow(Input which, Value w,
                                                        Value h, Value token,
                                                        Value discard) {
  Value flat = flatGradients[static_cast<int>(which)];
  RowAddress address = rowAddress(w, h, token, which);
  if (!address.valid)
    return {flat, address.offset};
  return {arith::SelectOp::create(b, address.valid, flat, discard),
          arith::SelectOp::create(b, address.valid, address.offset, index(0))};
}

/// Per query row i: D_i = dout_i · out_i; then, per row of keys, at the
/// bias's width and addresses: P = S / l, dS = P (dP - D_i), and
/// G[h, P(j) - P(i) + center] += dS, the bias's contiguous stretch of the
/// reversed table. Only the padded keys' columns are computed (the micro-
/// kernels' extra columns are never read); the lanes past a window row are
/// zeroed before they reach G (their dS is 0 or, without AVX-512, 2^-115
/// small) and land on the stretch's padding.
void BackwardKernel::emitScoreGradients(Value w, Value h,
                                        const Scratch &scratch, Value qb,
                                        Value rows) {
  Value tableGradient = scratch.tableGradient;
  int64_t width = g.computeLanes;
  int64_t tailLanes = g.headDim - (g.valueVectors - 1) * width;
  SmallVector<bool> keepLanes(g.lanes, true);
  for (int64_t lane = 0; lane < g.lanes; ++lane)
    keepLanes[lane] = (g.rowVectors - 1) * g.lanes + lane < g.rowLength;
  bool hasPadding = g.paddedRowLength != g.rowLength;
  Value keep, zeros = splat(0.0);
  if (hasPadding)
    keep = arith::ConstantOp::create(
        b, DenseElementsAttr::get(VectorType::get({g.lanes}, b.getI1Type()),
                                  ArrayRef<bool>(keepLanes)));
  forLoop(index(0), rows, 1, {}, [&](Value lr, ValueRange) {
    Value i = add(qb, lr);
    Row out = outputRow(w, h, i, scratch.zeroRow);
    Value doutBase = mulConst(i, g.headDim);
    Value dot = splat(0.0, computeType);
    for (int64_t c = 0; c < g.valueVectors; ++c) {
      int64_t lanes = c == g.valueVectors - 1 ? tailLanes : width;
      Value o = loadVector(out.memref, {add(out.offset, index(c * width))},
                           lanes, width);
      Value dout = loadVector(scratch.outputGradients,
                              {add(doutBase, index(c * width))}, lanes, width);
      dot = vector::FMAOp::create(b, o, dout, dot);
    }
    Value delta = broadcast(vector::ReductionOp::create(
        b, vector::CombiningKind::ADD, dot, arith::FastMathFlags::reassoc));
    Value inv = broadcast(memref::LoadOp::create(b, scratch.invSums, lr));
    QueryBias query = queryBias(i);
    // One row of keys: r, at G's column keyRowBase (keyRowBias).
    auto keyRow = [&](Value r, Value keyRowBase) {
      Value rowStart = mulConst(r, g.paddedRowLength);
      for (int64_t v = 0; v < g.rowVectors; ++v) {
        Value column = add(rowStart, index(v * g.lanes));
        Value p = arith::MulFOp::create(
            b,
            vector::LoadOp::create(b, vecType, scratch.probabilities,
                                   ValueRange{lr, column}),
            inv);
        Value dp = vector::LoadOp::create(b, vecType, scratch.scoreGradients,
                                          ValueRange{lr, column});
        Value ds =
            arith::MulFOp::create(b, p, arith::SubFOp::create(b, dp, delta));
        vector::StoreOp::create(b, p, scratch.probabilities,
                                ValueRange{lr, column});
        vector::StoreOp::create(b, ds, scratch.scoreGradients,
                                ValueRange{lr, column});
        if (hasPadding && v == g.rowVectors - 1)
          ds = arith::SelectOp::create(b, keep, ds, zeros);
        Value at = add(keyRowBase, index(v * g.lanes));
        Value sum = arith::AddFOp::create(
            b,
            vector::LoadOp::create(b, vecType, tableGradient,
                                   ValueRange{h, at}),
            ds);
        vector::StoreOp::create(b, sum, tableGradient, ValueRange{h, at});
      }
    };
    if (g.classToken)
      keyRow(index(0), keyRowBias(query, /*classRow=*/true, Value()));
    forLoop(
        index(g.firstGridRow), index(g.keyRows), 1, {},
        [&](Value r, ValueRange) {
          Value gridRow = arith::SubIOp::create(b, r, index(g.firstGridRow));
          keyRow(r, keyRowBias(query, /*classRow=*/false,
                               tableOffset(mulConst(gridRow, g.rowLength))));
          return SmallVector<Value>{};
        });
    return SmallVector<Value>{};
  });
}

/// dtable[t, h] = G[h, T - 1 - t], in the table's element type. With a
/// class token, its three rows: the class -> token stretch summed over the
/// grid row's Wx keys (every row of keys added into it), then lane 0 of
/// the token -> class and class -> class stretches (their other lanes
/// hold the padding keys' dS, never read).
void BackwardKernel::storeTableGradient(Value tableGradient) {
  auto grad = cast<FusedWindowAttentionGradOp>(op.getOperation());
  Value dtable = grad.getDtable();
  Type element = getElementTypeOrSelf(dtable.getType());
  forLoop(index(0), index(g.gridTableRows), 1, {}, [&](Value t, ValueRange) {
    Value reversed = arith::SubIOp::create(b, index(g.gridTableRows - 1), t);
    forLoop(index(0), index(g.heads), 1, {}, [&](Value h, ValueRange) {
      Value sum =
          memref::LoadOp::create(b, tableGradient, ValueRange{h, reversed});
      memref::StoreOp::create(b, convertFloat(sum, element), dtable,
                              ValueRange{t, h});
      return SmallVector<Value>{};
    });
    return SmallVector<Value>{};
  });
  if (!g.classToken)
    return;
  forLoop(index(0), index(g.heads), 1, {}, [&](Value h, ValueRange) {
    auto load = [&](int64_t column) -> Value {
      return memref::LoadOp::create(b, tableGradient,
                                    ValueRange{h, index(column)});
    };
    Value classToToken = load(g.classToTokenOffset);
    for (int64_t x = 1; x < g.rowLength; ++x)
      classToToken = arith::AddFOp::create(b, classToToken,
                                           load(g.classToTokenOffset + x));
    std::pair<Value, int64_t> rows[] = {
        {classToToken, g.gridTableRows},
        {load(g.tokenToClassOffset), g.gridTableRows + 1},
        {load(g.classToClassOffset), g.gridTableRows + 2}};
    for (auto [sum, row] : rows)
      memref::StoreOp::create(b, convertFloat(sum, element), dtable,
                              ValueRange{index(row), h});
    return SmallVector<Value>{};
  });
}

void BackwardKernel::emitItem(Value w, Value h, Value image,
                              const ScoreTerms &terms, const Scratch &s) {
  double scale = op.getScale().convertToDouble();
  int64_t width = g.computeLanes;
  emitPackTransposed(Input::Key, w, h, s.keysT, scale * kLog2E);
  emitPackTransposed(Input::Value, w, h, s.valuesT, 1.0);
  emitPackRows([&](Value j) { return inputRow(Input::Query, w, h, j); },
               s.queries);
  emitPackRows([&](Value j) { return inputRow(Input::Key, w, h, j); }, s.keys);
  // dout rows are where out's are; padding tokens read a zero row.
  emitPackRows(
      [&](Value j) {
        return outputRow(w, h, j, s.zeroRow, flatOutputGradient);
      },
      s.outputGradients);
  int64_t sumElements = llvm::alignTo(g.tokens * g.headDim, width);
  forLoop(index(0), index(sumElements), width, {}, [&](Value e, ValueRange) {
    Value zeros = splat(0.0, computeType);
    vector::StoreOp::create(b, zeros, s.keyGradients, e);
    vector::StoreOp::create(b, zeros, s.valueGradients, e);
    return SmallVector<Value>{};
  });

  auto packedRow = [&](Value rowsBuffer) {
    return [this, rowsBuffer](Value i) {
      return Row{rowsBuffer, mulConst(i, g.headDim)};
    };
  };
  // Adds a row combination's vector to the f32 sum of row j.
  auto accumulateInto = [&](Value sums) {
    return [this, sums, width](Value j, int64_t c, int64_t lanes, Value acc) {
      Value at = add(mulConst(j, g.headDim), index(c * width));
      Value sum =
          arith::AddFOp::create(b, loadVector(sums, {at}, lanes, width), acc);
      storeVector(sum, sums, {at}, lanes, width);
    };
  };
  auto coefficientOf = [&](Value matrix) {
    // (j, lr) -> matrix[lr, j']: a column of P or dS.
    return [this, matrix](Value j, Value lr) -> Value {
      return memref::LoadOp::create(b, matrix,
                                    ValueRange{lr, paddedPosition(j)});
    };
  };
  Value scaleVector = splat(scale, computeType);

  forLoop(
      index(0), index(g.tokens), g.queryBlock, {}, [&](Value qb, ValueRange) {
        Value rows = queryBlockRows(qb);
        emitScores(packedRow(s.queries), s.keysT, s.probabilities, qb, rows,
                   /*keyPadding=*/true);
        emitSoftmaxRows(h, image, terms, s.probabilities, s.invSums, qb, rows);
        emitScores(packedRow(s.outputGradients), s.valuesT, s.scoreGradients,
                   qb, rows, /*keyPadding=*/false);
        emitScoreGradients(w, h, s, qb, rows);
        // dq_i = scale sum_j dS[i, j'] k_j
        emitRowCombination(
            rows, index(g.tokens),
            [&](Value lr, Value j) -> Value {
              return memref::LoadOp::create(b, s.scoreGradients,
                                            ValueRange{lr, paddedPosition(j)});
            },
            s.keys, index(0),
            [&](Value lr, int64_t c, int64_t lanes, Value acc) {
              Row dq = gradientRow(Input::Query, w, h, add(qb, lr), s.discard);
              storeVector(arith::MulFOp::create(b, acc, scaleVector), dq.memref,
                          {add(dq.offset, index(c * width))}, lanes, width);
            });
        // dv_j += sum_i P[i, j'] dout_i;  dk_j += sum_i dS[i, j'] q_i
        Value blockBase = mulConst(qb, g.headDim);
        emitRowCombination(index(g.tokens), rows,
                           coefficientOf(s.probabilities), s.outputGradients,
                           blockBase, accumulateInto(s.valueGradients));
        emitRowCombination(index(g.tokens), rows,
                           coefficientOf(s.scoreGradients), s.queries,
                           blockBase, accumulateInto(s.keyGradients));
        return SmallVector<Value>{};
      });

  // The sums of dk (times scale) and dv go to their rows.
  int64_t tailLanes = g.headDim - (g.valueVectors - 1) * width;
  forLoop(index(0), index(g.tokens), 1, {}, [&](Value j, ValueRange) {
    Row dk = gradientRow(Input::Key, w, h, j, s.discard);
    Row dv = gradientRow(Input::Value, w, h, j, s.discard);
    for (int64_t c = 0; c < g.valueVectors; ++c) {
      int64_t lanes = c == g.valueVectors - 1 ? tailLanes : width;
      Value at = add(mulConst(j, g.headDim), index(c * width));
      Value keySum = loadVector(s.keyGradients, {at}, lanes, width);
      storeVector(arith::MulFOp::create(b, keySum, scaleVector), dk.memref,
                  {add(dk.offset, index(c * width))}, lanes, width);
      storeVector(loadVector(s.valueGradients, {at}, lanes, width), dv.memref,
                  {add(dv.offset, index(c * width))}, lanes, width);
    }
    return SmallVector<Value>{};
  });
}

/// The scratch, allocated once per call: packed kᵀ and vᵀ, a block of
/// P and of dS, f32 rows of q, k and dout, the dk and dv sums, and G.
BackwardKernel::Scratch BackwardKernel::allocateScratch() {
  auto alloc = [&](ArrayRef<int64_t> shape, Type element = {}) -> Value {
    return memref::AllocaOp::create(
        b, MemRefType::get(shape, element ? element : f32),
        b.getI64IntegerAttr(64));
  };
  int64_t rowElements = llvm::alignTo(g.tokens * g.headDim, g.computeLanes);
  Scratch scratch;
  scratch.keysT = alloc({g.headDim, g.scoreColumns});
  scratch.valuesT = alloc({g.headDim, g.scoreColumns});
  scratch.probabilities = alloc({g.queryBlock, g.scoreColumns});
  scratch.scoreGradients = alloc({g.queryBlock, g.scoreColumns});
  scratch.invSums = alloc({g.queryBlock});
  for (Value *rows : {&scratch.queries, &scratch.keys, &scratch.outputGradients,
                      &scratch.keyGradients, &scratch.valueGradients})
    *rows = alloc({rowElements});
  if (featureMap && featureMap->isPadded()) {
    Type element = getElementTypeOrSelf(op.getAttentionOutput().getType());
    scratch.discard = flatten(b, b.getLoc(), alloc({g.headDim}, element));
    Value zeroRow = alloc({g.headDim}, element);
    Value zero = arith::ConstantOp::create(b, b.getFloatAttr(element, 0.0));
    forLoop(index(0), index(g.headDim), 1, {}, [&](Value e, ValueRange) {
      memref::StoreOp::create(b, zero, zeroRow, ValueRange{e});
      return SmallVector<Value>{};
    });
    scratch.zeroRow = flatten(b, b.getLoc(), zeroRow);
  }
  // G: the reversed table's layout, with room for a stretch's padding.
  int64_t gradientColumns = g.reversedTableColumns;
  scratch.tableGradient = alloc({g.heads, gradientColumns});
  Value zero = arith::ConstantOp::create(b, b.getF32FloatAttr(0.0));
  forLoop(index(0), index(g.heads), 1, {}, [&](Value h, ValueRange) {
    forLoop(index(0), index(gradientColumns), 1, {}, [&](Value t, ValueRange) {
      memref::StoreOp::create(b, zero, scratch.tableGradient, ValueRange{h, t});
      return SmallVector<Value>{};
    });
    return SmallVector<Value>{};
  });
  return scratch;
}

LogicalResult BackwardKernel::emit() {
  auto grad = cast<FusedWindowAttentionGradOp>(op.getOperation());
  emitFlatViews();
  for (Value gradient : {grad.getDquery(), grad.getDkey(), grad.getDvalue()})
    flatGradients.push_back(flatten(b, b.getLoc(), gradient));
  flatOutputGradient = flatten(b, b.getLoc(), grad.getDout());
  FailureOr<ScoreTerms> terms = emitScoreTerms();
  if (failed(terms))
    return failure();
  // The items add to one G: a sequential loop, its scratch allocated once.
  Scratch scratch;
  emitItemLoop(
      ItemLoop::Sequential, [&] { scratch = allocateScratch(); },
      [&](Value item, Value) {
        Value w = divConst(item, g.heads), h = remConst(item, g.heads);
        emitItem(w, h, maskWindow(w), *terms, scratch);
      });
  storeTableGradient(scratch.tableGradient);
  return success();
}

LogicalResult emitBackwardKernel(ImplicitLocOpBuilder &b,
                                 FusedAttentionOpInterface op,
                                 const KernelGeometry &g) {
  return BackwardKernel(b, op, g).emit();
}

} // namespace mlir::rpe::detail
