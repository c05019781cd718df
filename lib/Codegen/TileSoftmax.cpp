//===- TileSoftmax.cpp - the softmax of the CPU tiles kernels -------------===//
//
// The softmax of a block of query rows, between the scores' micro-kernel
// and P·v, in named steps. For each group of rows, each step runs for
// every row of the group before the next (a row's max, exponentials and
// sum are a chain of dependent instructions; the rows of a group are
// independent chains for the core to overlap):
//
//   addBiasAndMask    S[i, :] += R_h[idx(j, i)] (+ mask), and the row's
//                     partial max over its vectors
//   reduceRowMaxima   m_i = max_j S[i, j], up to three rows per vector
//   exponentiate      P[i, :] = 2^(S[i, :] - m_i), and the partial sum
//   storeInverseSums  1 / l_i, the group's sums reduced together
//
// Everything runs at the micro-kernels' width Lc. A vector of Lc lanes
// holds Lc / L segments of the padded key layout, segment s being vector
// s % (Wpad / L) of window row s / (Wpad / L), or padding past the last
// row; which keys a lane holds is therefore known at compile time, and the
// bias of each segment is one contiguous load from the reversed table.
//
//===----------------------------------------------------------------------===//

#include "TileSteps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"

using namespace mlir;
using namespace mlir::rpe;
using namespace mlir::rpe::detail;

namespace mlir::rpe::detail {

/// What one call of emitSoftmaxRows gives all of its rows.
struct TileSteps::SoftmaxCall {
  Value h, image, qb;
  const ScoreTerms &terms;
  /// The scores buffer [query block, score columns].
  Value scores;
  const SoftmaxRowOptions &extra;
  /// A row's scores stay in registers from the bias to the exponentials
  /// (else they are stored and reloaded at the same width, so that each
  /// load is forwarded from a single store, which narrower stores would
  /// prevent).
  bool inRegisters;
  /// The explicit mask's factor log2 e; the shift mask's value (times
  /// log2 e) and the zero it selects against.
  Value log2e, maskValue, zeroVector;
};

/// One row of a group: local row `lr` of the block, its scores (in
/// registers when the call keeps them there), its max, its sum.
struct TileSteps::SoftmaxRow {
  Value lr;
  SmallVector<Value> scores;
  Value max, sum;
};

/// The keys of a segment of a score vector: window row `row` (>= keyRows:
/// padding), the first padded column `x0` of the segment within the row,
/// and how many of its lanes are keys.
TileSteps::Segment TileSteps::segmentOf(int64_t c, int64_t t) {
  int64_t s = c * (g.computeLanes / g.lanes) + t;
  Segment seg{s / g.rowVectors, (s % g.rowVectors) * g.lanes, 0};
  // The class token's row has one key, at column 0.
  int64_t rowKeys = seg.row < g.firstGridRow ? 1 : g.rowLength;
  if (seg.row < g.keyRows)
    seg.keys = std::clamp<int64_t>(rowKeys - seg.x0, 0, g.lanes);
  return seg;
}

/// The segments of a vector joined into it (one segment: itself).
Value TileSteps::joinSegments(ArrayRef<Value> segments) {
  SmallVector<Value> parts(segments);
  while (parts.size() > 1) {
    SmallVector<Value> next;
    for (size_t k = 0; k < parts.size(); k += 2) {
      int64_t n = cast<VectorType>(parts[k].getType()).getNumElements();
      next.push_back(vector::ShuffleOp::create(
          b, parts[k], parts[k + 1],
          llvm::to_vector(llvm::seq<int64_t>(0, 2 * n))));
    }
    parts = std::move(next);
  }
  return parts.front();
}

/// Per row: S += bias (+ mask) (the scores of padding keys are -inf from
/// the products: scoreInit), the row max, then S = exp(S - max) and 1 /
/// sum(S), in the steps of this file's header; `extra` adds to this (see
/// SoftmaxRowOptions).
void TileSteps::emitSoftmaxRows(Value h, Value image, const ScoreTerms &terms,
                                Value scores, Value invSums, Value qb,
                                Value rows, const SoftmaxRowOptions &extra) {
  constexpr int64_t kRegisterRowVectors = 12, kInterleavedRows = 4;
  SoftmaxCall call{h,
                   image,
                   qb,
                   terms,
                   scores,
                   extra,
                   g.computeKeyVectors <= kRegisterRowVectors,
                   /*log2e=*/Value(),
                   /*maskValue=*/Value(),
                   /*zeroVector=*/Value()};
  if (flatMask)
    call.log2e = splat(kLog2E, computeType);
  if (terms.labels) {
    call.maskValue =
        splat(op.getMaskValue().convertToDouble() * kLog2E, computeType);
    call.zeroVector = splat(0.0, computeType);
  }
  // exp2 takes -inf (padding lanes, a -inf mask) and keeps NaN: a NaN in q
  // or k, a +inf in the table (+inf - +inf) or a row of -inf (-inf - -inf)
  // makes s - max, the row's sum and so the whole row NaN, as in PyTorch.

  // A caller that computes the scores block by block hands each block to
  // its softmax in registers (extra.produceScores): S is never stored, and
  // the softmax of one block overlaps the products of the next.
  int64_t groupRows = extra.produceScores ? extra.producedRows
                      : call.inRegisters  ? kInterleavedRows
                                          : 1;
  forRowBlocks(rows, groupRows, [&](Value lr0, int64_t mr) {
    SmallVector<SmallVector<Value>> produced;
    if (extra.produceScores)
      produced = extra.produceScores(lr0, mr);
    SmallVector<SoftmaxRow> group(mr);
    for (int64_t m = 0; m < mr; ++m) {
      group[m].lr = add(lr0, index(m));
      addBiasAndMask(call, group[m],
                     produced.empty() ? ArrayRef<Value>() : produced[m]);
    }
    reduceRowMaxima(group);
    for (SoftmaxRow &row : group)
      exponentiate(call, row);
    storeInverseSums(group, invSums);
  });
}

/// The bias of score vector `c` of query row i, one contiguous load per
/// segment from the head's reversed table: bias(i, j) = R_h[P(j) - P(i) +
/// center] with P(j) = P(row r, x = 0) + x (`query.base` = center - P(i)),
/// or the class token's stretches (keyRowBias), masked to the segment's
/// keys; and, with an explicit mask operand, its segments of mask[image,
/// i, :]. Segments past the last row add zeros.
TileSteps::VectorTerms TileSteps::loadVectorTerms(const SoftmaxCall &call,
                                                  Value i,
                                                  const QueryBias &query,
                                                  int64_t c) {
  VectorTerms terms;
  for (int64_t t = 0; t < g.computeLanes / g.lanes; ++t) {
    Segment seg = segmentOf(c, t);
    if (seg.row >= g.keyRows) {
      terms.biases.push_back(splat(0.0));
      terms.masks.push_back(splat(0.0));
      continue;
    }
    // The lanes past the row's keys read zeros, not the table entries past
    // the stretch: -inf (their scores) plus an infinite entry would be NaN
    // in a row whose scores are all finite.
    bool classRow = seg.row < g.firstGridRow;
    Value rowOffset =
        classRow
            ? Value()
            : index(g.tableOffsetOf((seg.row - g.firstGridRow) * g.rowLength));
    Value at = add(keyRowBias(query, classRow, rowOffset), index(seg.x0));
    terms.biases.push_back(
        loadVector(call.terms.rtab, {call.h, at}, seg.keys, g.lanes));
    if (flatMask) {
      // mask[image, i, r * Wx + x] (unpadded keys).
      Value at =
          add(mulConst(add(mulConst(call.image, g.tokens), i), g.tokens),
              index(seg.row * g.rowLength + seg.x0));
      terms.masks.push_back(loadVector(flatMask, {at}, seg.keys, g.lanes));
    }
  }
  return terms;
}

/// Step 1 of a row: S += bias (+ mask) on each of its score vectors, from
/// the micro-kernel's registers (`produced`) or the scores buffer; the
/// row's max over its vectors, lane by lane.
void TileSteps::addBiasAndMask(const SoftmaxCall &call, SoftmaxRow &row,
                               ArrayRef<Value> produced) {
  const SoftmaxRowOptions &extra = call.extra;
  auto intType = VectorType::get({g.computeLanes}, b.getI32Type());
  Value i = add(call.qb, row.lr);
  if (extra.eachRow)
    extra.eachRow(i);
  QueryBias query = queryBias(i);
  Value queryLabel;
  if (call.terms.labels)
    queryLabel = vector::BroadcastOp::create(
        b, intType,
        memref::LoadOp::create(b, call.terms.labels,
                               ValueRange{call.image, paddedPosition(i)}));
  for (int64_t c = 0; c < g.computeKeyVectors; ++c) {
    Value column = index(c * g.computeLanes);
    VectorTerms terms = loadVectorTerms(call, i, query, c);
    Value s = produced.empty()
                  ? vector::LoadOp::create(b, computeType, call.scores,
                                           ValueRange{row.lr, column})
                        .getResult()
                  : produced[c];
    s = extra.scoreScale
            ? math::FmaOp::create(b, s, extra.scoreScale,
                                  joinSegments(terms.biases))
                  .getResult()
            : arith::AddFOp::create(b, s, joinSegments(terms.biases))
                  .getResult();
    if (flatMask)
      s = math::FmaOp::create(b, joinSegments(terms.masks), call.log2e, s);
    if (call.terms.labels) {
      // The shift mask: mask_value where the keys' labels differ from the
      // query's.
      Value keyLabels = vector::LoadOp::create(
          b, intType, call.terms.labels, ValueRange{call.image, column});
      Value differ = arith::CmpIOp::create(b, arith::CmpIPredicate::ne,
                                           keyLabels, queryLabel);
      s = arith::AddFOp::create(
          b, s,
          arith::SelectOp::create(b, differ, call.maskValue, call.zeroVector));
    }
    if (call.inRegisters)
      row.scores.push_back(s);
    else
      vector::StoreOp::create(b, s, call.scores, ValueRange{row.lr, column});
    // The first vector starts the max (a NaN in it may then make the
    // max, and its row, NaN, as the NaN score itself would).
    row.max = row.max ? maxSkippingNaN(s, row.max) : s;
  }
}

/// Step 2: the rows' maxima, each broadcast to a whole vector, reduced up
/// to three rows together: fewer shuffles than one row at a time, and
/// sooner than the whole group, whose exponentials all wait for it
/// (measured at stage 1 against 1 and 5 rows: +1.5% for both f32 and bf16
/// against the group of 5; f32 as fast as, bf16 1% faster than single
/// rows).
void TileSteps::reduceRowMaxima(MutableArrayRef<SoftmaxRow> rows) {
  constexpr int64_t kMaxRowsPerMaxReduction = 3;
  SmallVector<Value> maxes =
      llvm::map_to_vector(rows, [](const SoftmaxRow &row) { return row.max; });
  reduceRows(
      maxes, kMaxRowsPerMaxReduction,
      [&](Value x, Value y) { return maxSkippingNaN(x, y); },
      [&](int64_t first, const ReducedRows &reduced) {
        for (int64_t m = 0; m < reduced.rows; ++m)
          rows[first + m].max = reduced.broadcast(b, m);
      });
}

/// Step 3 of a row: P = 2^(S - max), stored over S (or handed to
/// extra.storeProbabilities), and the row's sum, lane by lane.
void TileSteps::exponentiate(const SoftmaxCall &call, SoftmaxRow &row) {
  const SoftmaxRowOptions &extra = call.extra;
  SmallVector<Value> probabilities;
  for (int64_t c = 0; c < g.computeKeyVectors; ++c) {
    Value column = index(c * g.computeLanes);
    Value s = call.inRegisters
                  ? row.scores[c]
                  : vector::LoadOp::create(b, computeType, call.scores,
                                           ValueRange{row.lr, column})
                        .getResult();
    Value p = exp2(arith::SubFOp::create(b, s, row.max),
                   /*bf16Accuracy=*/extra.bf16Exponentials);
    if (extra.storeProbabilities) {
      probabilities.push_back(p);
      continue;
    }
    vector::StoreOp::create(b, p, call.scores, ValueRange{row.lr, column});
    row.sum = row.sum ? arith::AddFOp::create(b, row.sum, p).getResult() : p;
  }
  if (extra.storeProbabilities)
    row.sum = extra.storeProbabilities(probabilities, row.lr);
}

/// Step 4: 1 / sum for all rows of the group at once. The order of the sum
/// is within the tolerance of any f32 softmax; it is NaN when a score is.
void TileSteps::storeInverseSums(ArrayRef<SoftmaxRow> rows, Value invSums) {
  SmallVector<Value> sums =
      llvm::map_to_vector(rows, [](const SoftmaxRow &row) { return row.sum; });
  reduceRows(
      sums, rows.size(),
      [&](Value x, Value y) -> Value {
        return arith::AddFOp::create(b, x, y);
      },
      [&](int64_t first, const ReducedRows &reduced) {
        Value inverses =
            arith::DivFOp::create(b, splat(1.0, computeType), reduced.value);
        for (int64_t m = 0; m < reduced.rows; ++m)
          memref::StoreOp::create(
              b,
              vector::ExtractOp::create(b, inverses,
                                        ArrayRef<int64_t>{reduced.lane(m)}),
              invSums, ValueRange{rows[first + m].lr});
      });
}
/// 2^x for x <= 0 (-inf included) or NaN, in registers, as 2^n * 2^f
/// with n an integer and 2^f a polynomial: degree 5 (near minimax for the
/// relative error; < 1.6e-7 evaluated in f32) or, for `bf16Accuracy`,
/// degree 3 (< 7.5e-5, far below bf16's rounding, 2^-9). A NaN x gives
/// NaN.
///
/// On AVX-512 (16 lanes) it takes three steps plus the polynomial: f = x -
/// floor(x), in [0, 1), is one vreduceps; 2^f is the polynomial on [0, 1);
/// vscalefps multiplies it by 2^floor(x), taking x itself as the exponent
/// (exact; denormal, then 0, below 2^-126). x = -inf gives f = 0 and
/// 2^-inf = 0: exactly 0, with no clamp. vreduceps has no MLIR op, nor an
/// LLVM IR instruction that selects to it: it is called as its intrinsic.
/// (On Zen 5 vreduceps and vscalefps share one pipe, at one per cycle, as
/// vrndscaleps and the subtraction it replaces do not; still +2% over
/// them, for the clamp that -inf no longer needs.)
///
/// Elsewhere x is first clamped to -115 (2^x underflows long before; the
/// clamp keeps NaN: arith.maximumf), then n is rounded to the nearest
/// integer by adding and subtracting 1.5 * 2^23 + 127, where floats are the
/// integers: the sum's low mantissa bits then hold n + 127, the biased
/// exponent of 2^n itself, so that shifting them into the exponent field
/// gives 2^n with no float-to-int conversion (whose result is poison for
/// NaN), and f = x - n is in [-1/2, 1/2].
Value TileSteps::exp2(Value x, bool bf16Accuracy) {
  VectorType type = cast<VectorType>(x.getType());
  auto constant = [&](double v) {
    return arith::ConstantOp::create(
        b, DenseElementsAttr::get(type, b.getF32FloatAttr(v)));
  };
  auto i32 = [&](int32_t v) {
    return arith::ConstantOp::create(b, b.getI32IntegerAttr(v));
  };
  // Horner, highest degree first: minimax for 2^f on the range of f.
  auto polynomial = [&](Value f, ArrayRef<double> coefficients) {
    Value poly = constant(coefficients.front());
    for (double c : coefficients.drop_front())
      poly = math::FmaOp::create(b, poly, f, constant(c));
    return poly;
  };
  if (avx512 && type.getNumElements() == 16) {
    // imm8 9: keep no fraction bits of the rounded value (bits 7:4 = 0),
    // round down (bits 1:0 = 1), no precision exception (bit 3).
    Value f =
        LLVM::CallIntrinsicOp::create(
            b, type, b.getStringAttr("llvm.x86.avx512.mask.reduce.ps.512"),
            ValueRange{x, i32(9), x,
                       arith::ConstantOp::create(b, b.getI16IntegerAttr(-1)),
                       i32(4)})
            .getResult(0);
    constexpr double kOnUnit5[] = {1.8775767e-3, 8.9893397e-3, 5.5826318e-2,
                                   2.4015361e-1, 6.9315308e-1, 9.9999994e-1};
    constexpr double kOnUnit3[] = {7.8024521e-2, 2.2606716e-1, 6.9583356e-1,
                                   9.9992520e-1};
    Value poly = polynomial(f, bf16Accuracy ? ArrayRef<double>(kOnUnit3)
                                            : ArrayRef<double>(kOnUnit5));
    // MLIR 22's op passes its operands (src, a, b, k, rounding) to
    // llvm.x86.avx512.mask.scalef.ps.512(a, b, passthru, k, rounding) in
    // that order, so its `src` is the scaled value and `a` the exponent;
    // all 16 lanes (k = 0xffff, no passthru), rounding as MXCSR says (4:
    // the current direction). Checked on the LLVM IR by lit
    // (Transforms/lower-fused-attention-bf16-dot.mlir).
    return x86vector::MaskScaleFOp::create(
        b, type, /*src=*/poly, /*a=*/x, /*b=*/poly,
        arith::ConstantOp::create(b, b.getI16IntegerAttr(-1)), i32(4));
  }
  x = arith::MaximumFOp::create(b, x, constant(-115.0));
  Value shifter = constant(12582912.0 + 127.0); // 1.5 * 2^23 + 127
  Value rounded = arith::AddFOp::create(b, x, shifter);
  Value n = arith::SubFOp::create(b, rounded, shifter);
  Value f = arith::SubFOp::create(b, x, n);
  constexpr double kCentered5[] = {1.3276471e-3, 9.6755419e-3, 5.5507131e-2,
                                   2.4022120e-1, 6.9314694e-1, 1.0000001};
  constexpr double kCentered3[] = {5.5171669e-2, 2.4261114e-1, 6.9326097e-1,
                                   9.9992806e-1};
  Value poly = polynomial(f, bf16Accuracy ? ArrayRef<double>(kCentered3)
                                          : ArrayRef<double>(kCentered5));
  // bits(rounded) << 23 = (n + 127) << 23: the bits of 1.5 * 2^23 shift out.
  auto intType = VectorType::get(type.getShape(), b.getI32Type());
  Value twoToN = arith::BitcastOp::create(
      b, type,
      arith::ShLIOp::create(
          b, arith::BitcastOp::create(b, intType, rounded),
          arith::ConstantOp::create(
              b, DenseElementsAttr::get(intType, b.getI32IntegerAttr(23)))));
  return arith::MulFOp::create(b, poly, twoToN);
}
/// s > max ? s : max, one vmaxps: it skips a NaN s. In the softmax the max
/// of the row's other scores then shifts a NaN score, which reaches the row
/// through its own s - max.
Value TileSteps::maxSkippingNaN(Value s, Value max) {
  return arith::SelectOp::create(
      b, arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, s, max), s, max);
}
/// Reduces each of `rows` (vectors of W lanes) across its lanes by
/// `combine` (associative and commutative), up to min(maxRows, W) rows in
/// one vector, which `done(first, reduced)` takes for rows first ..
/// first + reduced.rows - 1: the horizontal reductions of a group of
/// softmax rows share their shuffles instead of reducing each row down to
/// a scalar.
///
/// Each level pairs the vectors and halves their segments: from vectors a
/// and b of segments of S lanes (one row's partial results each), one
/// vector of segments of S / 2 lanes, a's rows then b's, that combines
/// the lower and the upper half of each segment (an odd vector out pairs
/// with itself; its copy is never read). When one vector is left, a
/// butterfly within the segments (lane l with lane l ^ d, d = S/2 .. 1)
/// leaves row r's result in every lane of its segment r. Three rows of 16
/// lanes take 11 shuffles (broadcasts included) and 5 combines, against
/// 15 and 12 for each reduced to a scalar and broadcast back.
void TileSteps::reduceRows(
    ArrayRef<Value> rows, int64_t maxRows,
    function_ref<Value(Value, Value)> combine,
    function_ref<void(int64_t, const ReducedRows &)> done) {
  const int64_t width =
      cast<VectorType>(rows.front().getType()).getNumElements();
  const int64_t chunk = std::min(maxRows, width);
  for (int64_t first = 0; first < static_cast<int64_t>(rows.size());
       first += chunk) {
    ArrayRef<Value> part =
        rows.slice(first, std::min<int64_t>(chunk, rows.size() - first));
    done(first, reduceRowsInOneVector(part, combine));
  }
}
/// One vector of reduceRows: at most W rows.
TileSteps::ReducedRows TileSteps::reduceRowsInOneVector(
    ArrayRef<Value> rows, function_ref<Value(Value, Value)> combine) {
  const int64_t width =
      cast<VectorType>(rows.front().getType()).getNumElements();
  SmallVector<Value> level(rows);
  int64_t segment = width;
  while (level.size() > 1) {
    SmallVector<int64_t> lower, upper;
    for (int64_t source = 0; source < 2; ++source)
      for (int64_t start = 0; start < width; start += segment)
        for (int64_t l = 0; l < segment / 2; ++l) {
          lower.push_back(source * width + start + l);
          upper.push_back(source * width + start + segment / 2 + l);
        }
    SmallVector<Value> next;
    for (size_t k = 0; k < level.size(); k += 2) {
      Value x = level[k], y = k + 1 < level.size() ? level[k + 1] : level[k];
      next.push_back(combine(vector::ShuffleOp::create(b, x, y, lower),
                             vector::ShuffleOp::create(b, x, y, upper)));
    }
    level = std::move(next);
    segment /= 2;
  }
  Value value = level.front();
  for (int64_t d = segment / 2; d >= 1; d /= 2) {
    SmallVector<int64_t> partner;
    for (int64_t l = 0; l < width; ++l)
      partner.push_back(l ^ d);
    value = combine(value, vector::ShuffleOp::create(b, value, value, partner));
  }
  return ReducedRows{value, segment, static_cast<int64_t>(rows.size())};
}
/// Row r's result in every lane: its segment repeated (a broadcast of a
/// 128-bit block when segments are 4 lanes).
Value TileSteps::ReducedRows::broadcast(OpBuilder &b,
                                                 int64_t row) const {
  int64_t width = cast<VectorType>(value.getType()).getNumElements();
  if (segment == width)
    return value;
  SmallVector<int64_t> lanes;
  for (int64_t l = 0; l < width; ++l)
    lanes.push_back(row * segment + l % segment);
  return vector::ShuffleOp::create(b, value.getLoc(), value, value, lanes);
}

} // namespace mlir::rpe::detail
