//===- PairedBf16.cpp - the tiles kernel on AVX512-BF16 dot products ------===//
//
// The bf16 form of the tiles kernel's two products, for CPUs with
// AVX512-BF16. Its instruction, vdpbf16ps (x86vector.avx512.dot), adds to
// each of 16 f32 lanes the products of one *pair* of bf16 elements:
//
//   acc[l] += a[2l] * b[2l] + a[2l + 1] * b[2l + 1]
//
// twice the multiply-adds of an FMA on half the bytes. A product
// C[r, l] = sum_x A[r, x] * B[x, l] then runs over pairs of x: a is A's row
// r pair (x, x + 1), one 32-bit broadcast to every lane, and b holds B's
// rows x and x + 1 interleaved, so that lane l's pair is (B[x, l],
// B[x + 1, l]). The operands are packed accordingly, once per (window,
// head):
//
//   scores  S[i, j'] = sum_e q[i, e] k[j, e]: a = q's rows as stored (pairs
//           of channels), b = Kp[e / 2, j', e % 2], kᵀ transposed as 32-bit
//           pairs of channels (the f32 kernel's 8 x 8 register transpose);
//           the scale (times log2 e) multiplies S in the softmax's bias step.
//   output  out[i, e] = sum_j P[i, j] v[j, e]: a = the row of P, rounded
//           to bf16 by the softmax and stored with the keys unpadded (pairs
//           of consecutive keys), b = Vp[j / 2, e, j % 2], two rows of v
//           interleaved (an odd N's last pair: a zero row).
//
// Accumulation, the softmax and the row sums stay f32; only the operands of
// the products are bf16 (q, k and v as given, and P).
//
//===----------------------------------------------------------------------===//

#include "TileSteps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"

using namespace mlir;
using namespace mlir::rpe;
using namespace mlir::rpe::detail;

namespace mlir::rpe::detail {

bool TilesKernel::canPairBf16() {
  // 16 f32 lanes per dot product, key rows padded to 8 (the transpose's
  // width), whole vectors of 16 channels; the cosine form normalizes q and
  // k in f32 and keeps the f32 products.
  return getElementTypeOrSelf(op.getQuery().getType()).isBF16() &&
         g.computeLanes == 16 && g.lanes == 8 && g.headDim % 16 == 0 &&
         !op.isCosine();
}

Value TilesKernel::broadcastPair(Row row, Value x) {
  // The bf16 pair at row[x], x even, as one 32-bit lane, in all 16 lanes.
  auto bf16 = b.getBF16Type();
  auto i32 = b.getI32Type();
  Value pair = vector::LoadOp::create(b, VectorType::get({2}, bf16), row.memref,
                                      add(row.offset, x));
  Value bits = vector::BitCastOp::create(b, VectorType::get({1}, i32), pair);
  Value lanes =
      vector::BroadcastOp::create(b, VectorType::get({16}, i32), bits);
  return vector::BitCastOp::create(b, VectorType::get({32}, bf16), lanes);
}

/// Kp[e / 2, 2 j' + e % 2] = k[w, h, j, e]; padding columns zero. Eight
/// keys x eight pairs of channels at a time: a pair is 32 bits, and the
/// pairs transpose in registers as the f32 kernel's floats do.
void TilesKernel::emitPackKeyPairs(Value w, Value h, Value kp) {
  auto bf16Type = VectorType::get({16}, b.getBF16Type());
  auto pairsType = VectorType::get({8}, b.getI32Type());
  Value zeros = arith::ConstantOp::create(
      b, DenseElementsAttr::get(pairsType, b.getI32IntegerAttr(0)));
  forLoop(index(0), index(g.keyRows), 1, {}, [&](Value r, ValueRange) {
    for (int64_t v = 0; v < g.rowVectors; ++v) {
      SmallVector<std::optional<Row>> keys;
      for (int64_t lane = 0; lane < 8; ++lane) {
        int64_t x = v * 8 + lane;
        keys.push_back(x < g.rowLength
                           ? std::optional<Row>(inputRow(
                                 Input::Key, w, h,
                                 add(mulConst(r, g.rowLength), index(x))))
                           : std::nullopt);
      }
      Value column = add(mulConst(r, g.paddedRowLength), index(v * 8));
      forLoop(index(0), index(g.headDim / 2), 8, {}, [&](Value p0, ValueRange) {
        SmallVector<Value, 8> block;
        for (const std::optional<Row> &key : keys)
          block.push_back(key ? vector::BitCastOp::create(
                                    b, pairsType,
                                    vector::LoadOp::create(
                                        b, bf16Type, key->memref,
                                        add(key->offset, mulConst(p0, 2))))
                                    .getResult()
                              : zeros);
        transpose8x8(b, block);
        for (int64_t lane = 0; lane < 8; ++lane)
          vector::StoreOp::create(
              b, vector::BitCastOp::create(b, bf16Type, block[lane]), kp,
              ValueRange{add(p0, index(lane)), mulConst(column, 2)});
        return SmallVector<Value>{};
      });
    }
    return SmallVector<Value>{};
  });
  // Columns past the padded keys, up to whole vectors: zero.
  Value zeroPairs = arith::ConstantOp::create(
      b, DenseElementsAttr::get(bf16Type, b.getFloatAttr(b.getBF16Type(), 0)));
  for (int64_t column = g.paddedTokens; column < g.scoreColumns; column += 8)
    forLoop(index(0), index(g.headDim / 2), 1, {}, [&](Value p, ValueRange) {
      vector::StoreOp::create(b, zeroPairs, kp,
                              ValueRange{p, index(2 * column)});
      return SmallVector<Value>{};
    });
}

/// Vp[j / 2, 2 e + j % 2] = v[w, h, j, e] over the keys j (unpadded; an
/// odd N's last pair ends in a zero row).
void TilesKernel::emitPackValuePairs(Value w, Value h, Value vp) {
  auto halfType = VectorType::get({16}, b.getBF16Type());
  Value zeros = arith::ConstantOp::create(
      b, DenseElementsAttr::get(halfType, b.getFloatAttr(b.getBF16Type(), 0)));
  SmallVector<int64_t> interleave;
  for (int64_t l = 0; l < 16; ++l)
    interleave.append({l, l + 16});
  auto packPair = [&](Value p, Row first, std::optional<Row> second) {
    for (int64_t c = 0; c < g.headDim / 16; ++c) {
      Value a = vector::LoadOp::create(b, halfType, first.memref,
                                       add(first.offset, index(16 * c)));
      Value bValues =
          second ? vector::LoadOp::create(b, halfType, second->memref,
                                          add(second->offset, index(16 * c)))
                       .getResult()
                 : zeros;
      vector::StoreOp::create(
          b, vector::ShuffleOp::create(b, a, bValues, interleave), vp,
          ValueRange{p, index(32 * c)});
    }
  };
  forLoop(index(0), index(g.tokens / 2), 1, {}, [&](Value p, ValueRange) {
    Value j = mulConst(p, 2);
    packPair(p, inputRow(Input::Value, w, h, j),
             inputRow(Input::Value, w, h, add(j, index(1))));
    return SmallVector<Value>{};
  });
  if (g.tokens % 2)
    packPair(index(g.tokens / 2),
             inputRow(Input::Value, w, h, index(g.tokens - 1)), std::nullopt);
}

/// C[r, :] = sum_x left_r[x] * right[x, :] for the `rows` rows r, over
/// the pairs of x: left_r the bf16 row `leftRow(r)`, right packed in pairs
/// as [pairs, 2 * vectors * 16]. A micro-kernel over blocks of `mr` rows x
/// `nc` vectors of 16 f32 accumulators (the right's vectors are memory
/// operands), which start at scoreInit(keyPadding): -inf on the padding
/// keys' lanes when right is kᵀ. `finish(r, c, acc)` consumes vector c of
/// row r.
void TilesKernel::emitPairDotProducts(
    Value rows, function_ref<Row(Value)> leftRow, Value right, int64_t vectors,
    bool keyPadding, function_ref<void(Value, int64_t, Value)> finish) {
  int64_t chunk = std::min<int64_t>(vectors, 8);
  int64_t blockRows =
      std::clamp<int64_t>((g.registers - 2 - chunk) / (chunk + 1), 1, 12);
  forRowBlocks(rows, blockRows, [&](Value r0, int64_t mr) {
    SmallVector<Row> lefts;
    for (int64_t m = 0; m < mr; ++m)
      lefts.push_back(leftRow(add(r0, index(m))));
    for (int64_t c0 = 0; c0 < vectors; c0 += chunk) {
      int64_t nc = std::min(chunk, vectors - c0);
      SmallVector<Value> acc =
          emitPairDotBlock(lefts, right, c0, nc, keyPadding);
      for (int64_t m = 0; m < mr; ++m)
        for (int64_t c = 0; c < nc; ++c)
          finish(add(r0, index(m)), c0 + c, acc[m * nc + c]);
    }
  });
}

/// One block of emitPairDotProducts: the rows `lefts` times vectors
/// [c0, c0 + nc) of `right`, over all of right's pairs (mr * nc
/// accumulators, row-major).
SmallVector<Value> TilesKernel::emitPairDotBlock(ArrayRef<Row> lefts,
                                                        Value right, int64_t c0,
                                                        int64_t nc,
                                                        bool keyPadding) {
  auto accType = VectorType::get({16}, f32);
  auto pairsType = VectorType::get({32}, b.getBF16Type());
  int64_t mr = lefts.size();
  int64_t pairs = cast<MemRefType>(right.getType()).getDimSize(0);
  SmallVector<Value> init = scoreInit(mr, c0, nc, keyPadding);
  ValueRange acc =
      forLoop(index(0), index(pairs), 1, init, [&](Value x, ValueRange acc) {
        SmallVector<Value> next(acc);
        SmallVector<Value> broadcasts;
        for (const Row &left : lefts)
          broadcasts.push_back(broadcastPair(left, mulConst(x, 2)));
        for (int64_t c = 0; c < nc; ++c) {
          Value columns = vector::LoadOp::create(
              b, pairsType, right, ValueRange{x, index(32 * (c0 + c))});
          for (int64_t m = 0; m < mr; ++m)
            next[m * nc + c] = x86vector::DotBF16Op::create(
                b, accType, next[m * nc + c], broadcasts[m], columns);
        }
        return next;
      });
  return SmallVector<Value>(acc);
}

/// How a row of probabilities, rounded to bf16, is stored with the keys
/// unpadded (P·v pairs consecutive keys): each pair of the row's vectors of
/// Lc lanes (padded key layout) is one permutation of its 2 Lc lanes
/// (vpermt2w), its keys in order and then padding lanes, stored at its
/// first key. The next pair's store overwrites the lanes past the keys;
/// after the last key a padding lane's probability (0: its score is -inf)
/// stays, the partner of an odd last key.
SmallVector<TilesKernel::DenseStore>
TilesKernel::denseProbabilityStores() {
  const int64_t width = g.computeLanes;
  SmallVector<DenseStore> stores;
  for (int64_t c = 0; c < g.computeKeyVectors; c += 2) {
    DenseStore store{c, std::min<int64_t>(2, g.computeKeyVectors - c), -1, {}};
    SmallVector<int64_t> padLanes;
    for (int64_t lane = 0; lane < store.vectors * width; ++lane) {
      if (std::optional<int64_t> key = g.keyOfColumn(c * width + lane)) {
        if (store.first < 0)
          store.first = *key;
        store.lanes.push_back(lane);
      } else {
        padLanes.push_back(lane);
      }
    }
    if (store.lanes.empty())
      continue;
    int64_t fill = padLanes.empty() ? store.lanes.back() : padLanes.front();
    store.lanes.resize(store.vectors * width, fill);
    stores.push_back(std::move(store));
  }
  return stores;
}
int64_t TilesKernel::denseProbabilityRow() {
  int64_t end = 0;
  for (const DenseStore &store : denseProbabilityStores())
    end = std::max<int64_t>(end, store.first + store.lanes.size());
  return llvm::alignTo(end, 16);
}
/// Rounds row `lr` of the probabilities (the row's f32 vectors) to bf16,
/// stores it in the bf16 `buffer` as denseProbabilityStores says, and
/// returns the row's sum, per lane: the sum of the rounded probabilities
/// that P·v multiplies, so that the output is their weighted mean.
///
/// Each pair of vectors is rounded by one vcvtne2ps2bf16 (the first vector
/// in the low lanes, as the stores number them), permuted by one vpermw,
/// and summed by one dot product with ones (vdpbf16ps: two keys per lane).
Value TilesKernel::storeDenseProbabilities(ArrayRef<Value> probabilities,
                                                  Value buffer, Value lr) {
  auto pairType = VectorType::get({32}, b.getBF16Type());
  Value ones = arith::ConstantOp::create(
      b, DenseElementsAttr::get(pairType, b.getFloatAttr(b.getBF16Type(), 1)));
  Value sum = splat(0.0, computeType);
  SmallVector<Value> pairs;
  for (size_t c = 0; c < probabilities.size(); c += 2) {
    Value high = c + 1 < probabilities.size() ? probabilities[c + 1]
                                              : splat(0.0, computeType);
    // llvm.x86.avx512bf16.cvtne2ps2bf16.512(a, b): b in the low lanes.
    Value pair = LLVM::CallIntrinsicOp::create(
                     b, pairType,
                     b.getStringAttr("llvm.x86.avx512bf16.cvtne2ps2bf16.512"),
                     ValueRange{high, probabilities[c]})
                     .getResult(0);
    sum = x86vector::DotBF16Op::create(b, computeType, sum, pair, ones);
    pairs.push_back(pair);
  }
  Value rowStart = mulConst(lr, denseProbabilityRow());
  for (const DenseStore &store : denseProbabilityStores()) {
    Value pair = pairs[store.vector / 2];
    Value dense = vector::ShuffleOp::create(b, pair, pair, store.lanes);
    vector::StoreOp::create(b, dense, buffer,
                            add(rowStart, index(store.first)));
  }
  return sum;
}

} // namespace mlir::rpe::detail
