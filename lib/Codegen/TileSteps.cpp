//===- TileSteps.cpp - what the CPU tiles kernels share -------------------===//
//
// The steps of TileSteps.h that are not the softmax: the terms the scores
// add (the reversed tables, the shift's region labels), the packing of kᵀ
// and of token rows, the scores' micro-kernel and the row combinations.
//
//===----------------------------------------------------------------------===//

#include "TileSteps.h"

#include "Rpe/WindowGeometry.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;
using namespace mlir::rpe;
using namespace mlir::rpe::detail;

namespace mlir::rpe::detail {

FailureOr<TileSteps::ScoreTerms> TileSteps::emitScoreTerms() {
  ScoreTerms terms;
  terms.rtab = emitReversedTables();
  if (op.hasShiftMask()) {
    terms.labels = emitRegionLabels();
    if (!terms.labels)
      return failure();
  }
  if (Value mask = op.getMask())
    flatMask = flatten(b, b.getLoc(), mask);
  return terms;
}
/// R[h, t] = table[T - 1 - t, h] for t < T, 0 on the padding after it: one
/// contiguous, per-head copy of the compact table (H x (T + Wpad) floats),
/// made once per call and shared by every window. With a class token, the
/// class token's three stretches follow (KernelGeometry): table[T, h] in
/// every lane of the first, table[T + 1, h] and table[T + 2, h] in lane 0
/// of the others, zeros elsewhere.
Value TileSteps::emitReversedTables() {
  auto type = MemRefType::get({g.heads, g.reversedTableColumns}, f32);
  Value rtab = memref::AllocaOp::create(b, type);
  Value table = op.getTable();
  Value log2e = arith::ConstantOp::create(b, b.getF32FloatAttr(kLog2E));
  auto biasLog2 = [&](Value row, Value h) -> Value {
    return arith::MulFOp::create(b, loadScalar(table, {row, h}), log2e);
  };
  forLoop(index(0), index(g.heads), 1, {}, [&](Value h, ValueRange) {
    forLoop(index(0), index(g.gridTableRows), 1, {}, [&](Value t, ValueRange) {
      Value row = arith::SubIOp::create(b, index(g.gridTableRows - 1), t);
      memref::StoreOp::create(b, biasLog2(row, h), rtab, ValueRange{h, t});
      return SmallVector<Value>{};
    });
    Value zero = arith::ConstantOp::create(b, b.getF32FloatAttr(0.0));
    forLoop(index(g.gridTableRows), index(g.reversedTableColumns), 1, {},
            [&](Value t, ValueRange) {
              memref::StoreOp::create(b, zero, rtab, ValueRange{h, t});
              return SmallVector<Value>{};
            });
    if (!g.classToken)
      return SmallVector<Value>{};
    Value classToToken = biasLog2(index(g.gridTableRows), h);
    forLoop(index(g.classToTokenOffset),
            index(g.classToTokenOffset + g.paddedRowLength), 1, {},
            [&](Value t, ValueRange) {
              memref::StoreOp::create(b, classToToken, rtab, ValueRange{h, t});
              return SmallVector<Value>{};
            });
    memref::StoreOp::create(b, biasLog2(index(g.gridTableRows + 1), h), rtab,
                            ValueRange{h, index(g.tokenToClassOffset)});
    memref::StoreOp::create(b, biasLog2(index(g.gridTableRows + 2), h), rtab,
                            ValueRange{h, index(g.classToClassOffset)});
    return SmallVector<Value>{};
  });
  return rtab;
}

TileSteps::QueryBias TileSteps::queryBias(Value i) {
  if (!g.classToken)
    return {arith::SubIOp::create(b, index(g.center), tableOffset(i)), Value()};
  // Grid token i - 1; the class token's base is never read (a select
  // below), so it takes grid token 0's.
  Value gridToken = arith::SubIOp::create(
      b, arith::MaxUIOp::create(b, i, index(1)), index(1));
  return {arith::SubIOp::create(b, index(g.center), tableOffset(gridToken)),
          compare(arith::CmpIPredicate::eq, i, index(0))};
}

Value TileSteps::keyRowBias(const QueryBias &query, bool classRow,
                            Value rowOffset) {
  if (classRow)
    return select(query.isClass, index(g.classToClassOffset),
                  index(g.tokenToClassOffset));
  Value grid = add(query.base, rowOffset);
  if (!query.isClass)
    return grid;
  return select(query.isClass, index(g.classToTokenOffset), grid);
}
/// The shift mask as data: a constant [nW, N'] table of region labels in
/// the padded key layout, rows extended to the micro-kernels' score columns
/// (padding lanes -1). The mask of (i, j) is mask_value where the labels of
/// i and j differ.
Value TileSteps::emitRegionLabels() {
  ArrayRef<int64_t> resolution = *op.getResolution();
  ArrayRef<int64_t> shift = *op.getShift();
  int64_t numWindows = getNumWindows(resolution, g.window);
  if (numWindows * g.scoreColumns > kMaxConstantElements) {
    op.emitOpError() << "needs region labels for " << numWindows
                     << " windows, too many to materialize";
    return nullptr;
  }
  SmallVector<int32_t> labels;
  labels.reserve(numWindows * g.scoreColumns);
  for (int64_t w = 0; w < numWindows; ++w)
    for (int64_t column = 0; column < g.scoreColumns; ++column) {
      std::optional<int64_t> key = g.keyOfColumn(column);
      labels.push_back(
          key ? getShiftRegionLabel(resolution, g.window, shift, w, *key) : -1);
    }

  return constantTable("__rpe_region_labels", {numWindows, g.scoreColumns},
                       labels);
}
/// Transposes 8 vectors of 8 lanes in registers: 24 two-input shuffles
/// (unpack, 4-lane shuffle, 128-bit permute on AVX), portable as shuffles.
void transpose8x8(ImplicitLocOpBuilder &b, MutableArrayRef<Value> rows) {
  auto shuffle = [&](Value x, Value y, ArrayRef<int64_t> mask) -> Value {
    return vector::ShuffleOp::create(b, x, y, mask);
  };
  SmallVector<Value, 8> t(8), u(8);
  for (int k = 0; k < 8; k += 2) {
    t[k] = shuffle(rows[k], rows[k + 1], {0, 8, 1, 9, 4, 12, 5, 13});
    t[k + 1] = shuffle(rows[k], rows[k + 1], {2, 10, 3, 11, 6, 14, 7, 15});
  }
  for (int k = 0; k < 8; k += 4)
    for (int half = 0; half < 2; ++half) {
      u[k + 2 * half] =
          shuffle(t[k + half], t[k + half + 2], {0, 1, 8, 9, 4, 5, 12, 13});
      u[k + 2 * half + 1] =
          shuffle(t[k + half], t[k + half + 2], {2, 3, 10, 11, 6, 7, 14, 15});
    }
  for (int k = 0; k < 4; ++k) {
    rows[k] = shuffle(u[k], u[k + 4], {0, 1, 2, 3, 8, 9, 10, 11});
    rows[k + 4] = shuffle(u[k], u[k + 4], {4, 5, 6, 7, 12, 13, 14, 15});
  }
}
/// Kt[e, j'] = scale * x[w, h, j, e] for the rows x of `which` (the keys,
/// or the values for the gradient); padding columns are zero. With 8 lanes
/// and whole vectors of head channels, 8 keys x 8 channels at a time,
/// transposed in registers; else one element at a time.
void TileSteps::emitPackTransposed(Input which, Value w, Value h,
                                            Value kt, double scaleFactor) {
  Value scale = arith::ConstantOp::create(b, b.getF32FloatAttr(scaleFactor));
  // Cosine attention normalizes each key as it is packed, and folds the
  // head's logit scale into kᵀ with the constant scale: the scores
  // micro-kernel is the plain one, and q's norm scales its results.
  Value headScale = which == Input::Key ? cosineHeadScale(h) : Value();
  if (headScale)
    scale = arith::MulFOp::create(b, scale, headScale);
  auto keyScale = [&](Row key) -> Value {
    if (!headScale)
      return scale;
    return arith::MulFOp::create(b, scale, reciprocalRowNorm(key));
  };
  if (g.lanes == 8 && g.headDim % 8 == 0) {
    Value scaleVector = broadcast(scale);
    Value zeros = splat(0.0);
    // The class token's row is packed apart (it has one key); the grid's
    // row r holds keys from firstGridRow + (r - firstGridRow) * Wx on.
    if (g.classToken)
      emitPackClassKey(which, w, h, kt, scale, /*zerosOnly=*/false);
    int64_t firstKeyShift = g.firstGridRow * (1 - g.rowLength);
    forLoop(
        index(g.firstGridRow), index(g.keyRows), 1, {},
        [&](Value r, ValueRange) {
          for (int64_t v = 0; v < g.rowVectors; ++v) {
            // The keys of this vector of the padded row; lanes past the row
            // are padding.
            SmallVector<std::optional<Row>> keys;
            for (int64_t lane = 0; lane < 8; ++lane) {
              int64_t x = v * 8 + lane;
              keys.push_back(x < g.rowLength
                                 ? std::optional<Row>(
                                       inputRow(which, w, h,
                                                add(mulConst(r, g.rowLength),
                                                    index(x + firstKeyShift))))
                                 : std::nullopt);
            }
            Value column = add(mulConst(r, g.paddedRowLength), index(v * 8));
            SmallVector<Value, 8> keyScales;
            for (const std::optional<Row> &key : keys)
              keyScales.push_back(key && headScale ? broadcast(keyScale(*key))
                                                   : scaleVector);
            forLoop(
                index(0), index(g.headDim), 8, {}, [&](Value e0, ValueRange) {
                  SmallVector<Value, 8> block;
                  for (auto [key, keyScaleVector] : llvm::zip(keys, keyScales))
                    block.push_back(
                        key ? arith::MulFOp::create(
                                  b,
                                  loadVector(key->memref,
                                             {add(key->offset, e0)}, 8, 8),
                                  keyScaleVector)
                                  .getResult()
                            : zeros);
                  transpose8x8(b, block);
                  for (int64_t lane = 0; lane < 8; ++lane)
                    vector::StoreOp::create(
                        b, block[lane], kt,
                        ValueRange{add(e0, index(lane)), column});
                  return SmallVector<Value>{};
                });
          }
          return SmallVector<Value>{};
        });
    zeroExtraKeyColumns(kt);
    return;
  }
  forLoop(index(0), index(g.tokens), 1, {}, [&](Value j, ValueRange) {
    Value jp = paddedPosition(j);
    Row key = inputRow(which, w, h, j);
    Value factor = keyScale(key);
    forLoop(index(0), index(g.headDim), 1, {}, [&](Value e, ValueRange) {
      Value scaled = arith::MulFOp::create(b, loadElement(key, e), factor);
      memref::StoreOp::create(b, scaled, kt, ValueRange{e, jp});
      return SmallVector<Value>{};
    });
    return SmallVector<Value>{};
  });
  if (g.classToken)
    emitPackClassKey(which, w, h, kt, scale, /*zerosOnly=*/true);
  if (g.paddedRowLength == g.rowLength) {
    zeroExtraKeyColumns(kt);
    return;
  }
  Value zero = arith::ConstantOp::create(b, b.getF32FloatAttr(0.0));
  forLoop(index(0), index(g.keyRows), 1, {}, [&](Value r, ValueRange) {
    Value rowStart = mulConst(r, g.paddedRowLength);
    forLoop(index(g.rowLength), index(g.paddedRowLength), 1, {},
            [&](Value x, ValueRange) {
              Value jp = add(rowStart, x);
              forLoop(index(0), index(g.headDim), 1, {},
                      [&](Value e, ValueRange) {
                        memref::StoreOp::create(b, zero, kt, ValueRange{e, jp});
                        return SmallVector<Value>{};
                      });
              return SmallVector<Value>{};
            });
    return SmallVector<Value>{};
  });
  zeroExtraKeyColumns(kt);
}
void TileSteps::emitPackClassKey(Input which, Value w, Value h, Value kt,
                                 Value scale, bool zerosOnly) {
  Row key = inputRow(which, w, h, index(0));
  Value zero = arith::ConstantOp::create(b, b.getF32FloatAttr(0.0));
  forLoop(index(0), index(g.headDim), 1, {}, [&](Value e, ValueRange) {
    if (!zerosOnly)
      memref::StoreOp::create(
          b, arith::MulFOp::create(b, loadElement(key, e), scale), kt,
          ValueRange{e, index(0)});
    for (int64_t x = 1; x < g.paddedRowLength; ++x)
      memref::StoreOp::create(b, zero, kt, ValueRange{e, index(x)});
    return SmallVector<Value>{};
  });
}
/// Columns of kᵀ past the padded keys, up to a whole vector of the
/// micro-kernel, are zero: their scores are computed and never read.
void TileSteps::zeroExtraKeyColumns(Value kt) {
  if (g.scoreColumns == g.paddedTokens)
    return;
  Value zero = arith::ConstantOp::create(b, b.getF32FloatAttr(0.0));
  forLoop(index(0), index(g.headDim), 1, {}, [&](Value e, ValueRange) {
    forLoop(index(g.paddedTokens), index(g.scoreColumns), 1, {},
            [&](Value column, ValueRange) {
              memref::StoreOp::create(b, zero, kt, ValueRange{e, column});
              return SmallVector<Value>{};
            });
    return SmallVector<Value>{};
  });
}
/// Copies the rows `row(j)` of the window's tokens into contiguous f32
/// scratch, [N, d]: the token layout's rows are scattered over the map (and
/// some are padding), while the micro-kernels stream them in order.
Value TileSteps::emitPackRows(function_ref<Row(Value)> row,
                                       Value scratch) {
  int64_t width = g.computeLanes;
  int64_t tailLanes = g.headDim - (g.valueVectors - 1) * width;
  forLoop(index(0), index(g.tokens), 1, {}, [&](Value j, ValueRange) {
    Row source = row(j);
    Value base = mulConst(j, g.headDim);
    for (int64_t c = 0; c < g.valueVectors; ++c) {
      int64_t lanes = c == g.valueVectors - 1 ? tailLanes : width;
      Value values = loadVector(
          source.memref, {add(source.offset, index(c * width))}, lanes, width);
      storeVector(values, scratch, {add(base, index(c * width))}, lanes, width);
    }
    return SmallVector<Value>{};
  });
  return scratch;
}

/// j' = j + (j / Wx) * (Wpad - Wx): the padded position of token j; with a
/// class token, 0 for the class token and Wpad + (j - 1)' for the grid's.
Value TileSteps::paddedPosition(Value token) {
  auto gridPosition = [&](Value t) {
    if (g.paddedRowLength == g.rowLength)
      return t;
    return add(
        t, mulConst(divConst(t, g.rowLength), g.paddedRowLength - g.rowLength));
  };
  if (!g.classToken)
    return gridPosition(token);
  Value gridToken = arith::SubIOp::create(
      b, arith::MaxUIOp::create(b, token, index(1)), index(1));
  return select(compare(arith::CmpIPredicate::eq, token, index(0)), index(0),
                add(index(g.paddedRowLength), gridPosition(gridToken)));
}

Value TileSteps::reciprocalRowNorm(Row row) {
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

Value TileSteps::queryBlockRows(Value qb) {
  if (g.queryBlock == g.tokens)
    return index(g.tokens);
  return arith::MinUIOp::create(
      b, index(g.queryBlock), arith::SubIOp::create(b, index(g.tokens), qb));
}

SmallVector<SmallVector<Value>> TileSteps::splitRows(ArrayRef<Value> acc,
                                                     int64_t mr) {
  SmallVector<SmallVector<Value>> rows;
  int64_t n = acc.size() / mr;
  for (int64_t m = 0; m < mr; ++m)
    rows.emplace_back(acc.slice(m * n, n));
  return rows;
}
/// S[lr, :] = x_(qb + lr) · Kt for the rows of one query block, x_i the
/// row `leftRow(i)` (q's, or dout's for the gradient): an outer-product
/// micro-kernel over blocks of `mr` rows x `nc` vectors of accumulators,
/// reduced over e; with `keyPadding`, -inf on the padding keys' lanes.
void TileSteps::emitScores(function_ref<Row(Value)> leftRow, Value kt,
                                    Value scores, Value qb, Value rows,
                                    bool keyPadding) {
  // Registers: mr * nc accumulators and mr broadcasts (the key vectors are
  // memory operands); at most 8 vectors (AVX2: 7) per block.
  int64_t chunk = g.registers == 16
                      ? (g.computeKeyVectors <= 7 ? g.computeKeyVectors : 4)
                      : std::min<int64_t>(g.computeKeyVectors, 8);
  int64_t blockRows = scoreBlockRows(chunk);
  // Chunks outside, rows inside: a chunk's columns of kᵀ (d x chunk
  // vectors, 32 KiB at d = 64 on AVX-512) stay in L1 while every row of the
  // block reads them. The other order streams all of kᵀ once per block of
  // rows, from L2 where it outgrows L1 (BEiT's 240 columns: 61 KiB; the
  // order cost its scores 1.4x).
  for (int64_t c0 = 0; c0 < g.computeKeyVectors; c0 += chunk) {
    int64_t nc = std::min(chunk, g.computeKeyVectors - c0);
    forRowBlocks(rows, blockRows, [&](Value lr, int64_t mr) {
      Value i = add(qb, lr);
      SmallVector<Row> queries;
      for (int64_t m = 0; m < mr; ++m)
        queries.push_back(leftRow(add(i, index(m))));
      SmallVector<Value> acc = emitScoreBlock(queries, kt, c0, nc, keyPadding);
      for (int64_t m = 0; m < mr; ++m)
        for (int64_t c = 0; c < nc; ++c)
          vector::StoreOp::create(
              b, acc[m * nc + c], scores,
              ValueRange{add(lr, index(m)), index((c0 + c) * g.computeLanes)});
    });
  }
}
/// Rows of the scores micro-kernel: the queries' products with vectors
/// [c0, c0 + nc) of Kt, reduced over e (mr * nc accumulators, row-major),
/// and scaled by 1 / |q| for cosine attention. With `keyPadding` the
/// accumulators start at scoreInit: -inf on the lanes of padding keys.
SmallVector<Value> TileSteps::emitScoreBlock(ArrayRef<Row> queries,
                                                      Value kt, int64_t c0,
                                                      int64_t nc,
                                                      bool keyPadding) {
  int64_t mr = queries.size();
  SmallVector<Value> init = scoreInit(mr, c0, nc, keyPadding);
  ValueRange acc = forLoop(
      index(0), index(g.headDim), 1, init, [&](Value e, ValueRange acc) {
        SmallVector<Value> next(acc);
        SmallVector<Value> qs;
        for (const Row &query : queries)
          qs.push_back(broadcast(loadElement(query, e), computeType));
        for (int64_t c = 0; c < nc; ++c) {
          Value keys = vector::LoadOp::create(
              b, computeType, kt,
              ValueRange{e, index((c0 + c) * g.computeLanes)});
          for (int64_t m = 0; m < mr; ++m)
            next[m * nc + c] =
                vector::FMAOp::create(b, qs[m], keys, next[m * nc + c]);
        }
        return next;
      });
  SmallVector<Value> result(acc);
  // Cosine attention: q · k̂ of a row, times 1 / |q|, is q̂ · k̂. (The
  // gradient, whose op has no cosine form, also runs dout · vᵀ here.)
  if (op.isCosine())
    for (int64_t m = 0; m < mr; ++m) {
      Value norm = broadcast(reciprocalRowNorm(queries[m]), computeType);
      for (int64_t c = 0; c < nc; ++c)
        result[m * nc + c] = arith::MulFOp::create(b, result[m * nc + c], norm);
    }
  return result;
}
/// The initial accumulators of a block of mr rows x score vectors [c0, c0 +
/// nc): zero, or with `keyPadding` -inf on the lanes of padding keys (and
/// of the columns past them), so that their scores are -inf from the
/// start, the softmax gives them probability 0, and no instruction adds the
/// padding afterwards. -inf plus the finite products, times the positive
/// scale, plus the bias stays -inf; a NaN product (an infinite q) makes it
/// NaN, as it would any score.
SmallVector<Value> TileSteps::scoreInit(int64_t mr, int64_t c0,
                                                 int64_t nc, bool keyPadding) {
  const float negInf = -std::numeric_limits<float>::infinity();
  SmallVector<Value> columns;
  for (int64_t c = c0; c < c0 + nc; ++c) {
    SmallVector<float> lanes;
    for (int64_t lane = 0; lane < g.computeLanes; ++lane)
      lanes.push_back(!keyPadding || g.keyOfColumn(c * g.computeLanes + lane)
                          ? 0.0f
                          : negInf);
    columns.push_back(arith::ConstantOp::create(
        b, DenseElementsAttr::get(computeType, ArrayRef<float>(lanes))));
  }
  SmallVector<Value> init;
  for (int64_t m = 0; m < mr; ++m)
    llvm::append_range(init, columns);
  return init;
}
/// The micro-kernels' rows per block of scores of `vectors` vectors: as
/// many rows of accumulators and a broadcast as the registers hold (AVX2:
/// 2 x 7 for N' = 56, else 3 x 4; AVX-512: at most 6 rows).
int64_t TileSteps::scoreBlockRows(int64_t vectors) {
  if (g.registers == 16)
    return g.computeKeyVectors <= 7 ? 2 : 3;
  return std::clamp<int64_t>((g.registers - 2 - vectors) / (vectors + 1), 1, 6);
}
/// C[r, :] = sum_{x < count} coefficient(r, x) * B_x for the `rows` rows r,
/// B_x the f32 row of d channels at `matrix[base + x * d]`: a micro-kernel
/// over blocks of `mr` rows x `nc` vectors of head channels (mr * nc
/// accumulators and mr broadcast coefficients in registers), reduced over
/// x. `finish(r, c, lanes, acc)` consumes vector c (`lanes` valid) of row r.
void TileSteps::emitRowCombination(
    Value rows, Value count, function_ref<Value(Value, Value)> coefficient,
    Value matrix, Value base,
    function_ref<void(Value, int64_t, int64_t, Value)> finish) {
  int64_t chunk = std::min<int64_t>(g.valueVectors, 4);
  int64_t blockRows = std::min<int64_t>(g.registers == 16 ? 4 : 8,
                                        (g.registers - 2) / (chunk + 1));
  int64_t width = g.computeLanes;
  int64_t tailLanes = g.headDim - (g.valueVectors - 1) * width;
  forRowBlocks(rows, blockRows, [&](Value r0, int64_t mr) {
    for (int64_t c0 = 0; c0 < g.valueVectors; c0 += chunk) {
      int64_t nc = std::min(chunk, g.valueVectors - c0);
      auto lanesOf = [&](int64_t c) {
        return c0 + c == g.valueVectors - 1 ? tailLanes : width;
      };
      SmallVector<Value> init(mr * nc, splat(0.0, computeType));
      ValueRange acc =
          forLoop(index(0), count, 1, init, [&](Value x, ValueRange acc) {
            SmallVector<Value> next(acc);
            Value rowBase = add(base, mulConst(x, g.headDim));
            SmallVector<Value> coefficients;
            for (int64_t m = 0; m < mr; ++m)
              coefficients.push_back(
                  broadcast(coefficient(add(r0, index(m)), x), computeType));
            for (int64_t c = 0; c < nc; ++c) {
              Value row =
                  loadVector(matrix, {add(rowBase, index((c0 + c) * width))},
                             lanesOf(c), width);
              for (int64_t m = 0; m < mr; ++m)
                next[m * nc + c] = vector::FMAOp::create(b, coefficients[m],
                                                         row, next[m * nc + c]);
            }
            return next;
          });
      for (int64_t m = 0; m < mr; ++m)
        for (int64_t c = 0; c < nc; ++c)
          finish(add(r0, index(m)), c0 + c, lanesOf(c), acc[m * nc + c]);
    }
  });
}

} // namespace mlir::rpe::detail
