//===- GpuBackwardTiles.cpp - the GPU backward on tensor cores -----------===//
//
// The tensor-core form of the GPU backward (GpuBackwardKernel.h), on
// m16n8k16 mma.sync tiles: f16 and bf16 with head_dim a multiple of 16 on
// chips from sm_80. The window's rows padded to
// N' = 16 tiles with zeros, the products on tensor cores (f32
// accumulators), the softmax in base 2 as the lane form's (f32 with
// f32-mma: rows staged as f32, each operand fragment, P and dS split into
// bf16 terms as the forward's, Warp::splitIntoTerms). A block of W warps
// (up to 4) shares the item's staged window; in each pass warp w takes the
// tiles w, w + W, ..., and a block barrier ends the pass:
//
//   stage q, k, v, dout, R, P(t), labels; G = 0      stageWindow
//   per query tile I:                                tileSoftmaxStatistics
//     S_I   = q_I kᵀ + bias                          mma; keys past N: -inf
//     lse_I = m + log2 sum_j 2^(s_Ij - m)            online per 16 keys, per
//                                                    lane, then merged over
//                                                    the quad
//     D_I   = rowsum(dout_I ∘ out_I)                 (lse = +inf past N)
//   per key tile J, dk_J and dv_J in registers:      gradientOfKeyTile
//     per query tile I:                              pairGradientTile
//       Sᵀ   = k_J q_Iᵀ,  dPᵀ = v_J doutᵀ_I          mma, keys as the rows:
//       Pᵀ   = 2^(Sᵀ + biasᵀ - lse_I)                Pᵀ and dSᵀ, C fragments
//       dSᵀ  = Pᵀ ∘ (dPᵀ - D_I)                      of 8 queries, are the A
//       dv_J += Pᵀ dout_I,  dk_J += dSᵀ q_I          operands of the next
//                                                    products as they are
//       G[P(i) - P(j) + c] += ds_ij                  addTileToTableGradient
//       dS_IJ -> the window's dS (kept)              keepScoreGradients
//     dk_J scale, dv_J -> their rows                 storeGradientTile
//   per query tile I, dq_I in registers:             gradientOfQueryTile
//     per key tile J: dS_IJ from the window's dS as the A operand (kept),
//     or S, dP, P, dS again, queries as the rows, so that dS is the A
//     operand as it is; dq_I += dS k_J
//     dq_I scale -> its rows
//   partials[item] = the warps' copies of G, summed  storeTableGradient
//
// dq has a pass of its own rather than adding the key tiles' dS k to shared
// f32 sums: no warp writes what another reads within a pass, and the block
// needs no N' x d floats. Where the block stays within the static 48 KiB
// with it (every Swin-T stage: N' x (N' + 8) f16, 9 KB at N' = 64), the key
// pass keeps the window's dS, rounded as the operand it becomes, and the
// query pass reads it: 24 mma.sync per pair of tiles at d = 32, not 32, and
// no exponentials. Larger windows recompute S and dP (8 more mma.sync per
// pair) rather than give up resident blocks for the N'² elements. P and dS
// are rounded to the element type as mma operands
// (FlashAttention's backward does the same); their f32 values make dS and
// the table's gradient. The table's gradient stays deterministic without
// atomics: dS goes to the warp's shared tile, from which lane 16 h + r takes
// query row r and the keys 8 h .. 8 h + 7 in order, adding to the warp's
// copy G_h (two per warp: the half-warps' keys differ, and for one key the
// rows' entries differ as P is one-to-one; BEiT's class key, whose rows
// share T + 1, is summed over the half-warp first); the 2 W copies are
// summed in order when the item stores its partial. (The class token's bias
// and entries are the lane form's: tableEntry, classTokenEntry.)
//
// Shared memory at Swin-T stage 1 (N' = 64, d = 32, 4 warps): 41 KB a block
// (the rows 20 KB, the window's dS 9.2 KB, G's copies 5.4 KB, the dS tiles
// 4.4 KB); 96 registers, which limit an SM to five blocks before shared
// memory does (on sm_90; on sm_80's 164 KB, to four).
// BEiT-base in f16 (13 tiles: 4 warps, the last tile alone) takes 154 KB,
// within sm_80's 163 KiB.
//
//===----------------------------------------------------------------------===//

#include "GpuBackwardKernel.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <limits>

using namespace mlir;
using namespace mlir::rpe;
using namespace mlir::rpe::detail;

Value GpuBackwardKernel::laneIndex(Item &item,
                                   const LaneCoordinate &coordinate,
                                   int64_t offset) {
  Value term =
      coordinate.term == LaneCoordinate::Term::Group ? item.group : item.pair;
  return add(term, index(coordinate.offset + offset));
}

Fragment GpuBackwardKernel::loadOperand(Item &item, bool isA, Value rows,
                                        int64_t stride, bool tokenIsRow,
                                        Value token0, Value channel0) {
  int64_t count = isA ? MmaLayout::aElements : MmaLayout::bElements;
  Fragment fragment;
  for (int64_t i = 0; i < count; ++i) {
    FragmentElement e = isA ? MmaLayout::a(i) : MmaLayout::b(i);
    Value r = laneIndex(item, e.row, 0), c = laneIndex(item, e.column, 0);
    Value token = add(token0, tokenIsRow ? r : c);
    Value channel = add(channel0, tokenIsRow ? c : r);
    fragment.push_back(convertFloat(
        item.warp.load(rows, add(mulConst(token, stride), channel)),
        shape.element));
  }
  return fragment;
}

SmallVector<Fragment> GpuBackwardKernel::productTile(Item &item,
                                                     ArrayRef<OperandTerms> x,
                                                     Value rows, Value token0) {
  SmallVector<Fragment> tile;
  for (int64_t nt = 0; nt < 2; ++nt) {
    Fragment acc(MmaLayout::cElements, item.zero);
    for (auto [kk, rowsOfX] : llvm::enumerate(x)) {
      // B(channel, token) = rows[token, channel].
      Fragment y = loadOperand(item, /*isA=*/false, rows, shape.rowStride,
                               /*tokenIsRow=*/false, add(token0, index(8 * nt)),
                               index(16 * kk));
      acc = item.warp.mmaOfTerms(rowsOfX, splitIntoTerms(item, y), acc);
    }
    tile.push_back(acc);
  }
  return tile;
}

OperandTerms GpuBackwardKernel::splitIntoTerms(Item &item,
                                               const Fragment &values) {
  return item.warp.splitIntoTerms(values, shape.operand, shape.operandTerms);
}

SmallVector<OperandTerms>
GpuBackwardKernel::loadRowTile(Item &item, Value rows, Value token0) {
  SmallVector<OperandTerms> tile;
  for (int64_t kk = 0; kk < g.headDim / 16; ++kk)
    tile.push_back(splitIntoTerms(
        item, loadOperand(item, /*isA=*/true, rows, shape.rowStride,
                          /*tokenIsRow=*/true, token0, index(16 * kk))));
  return tile;
}

/// lse and D of the query rows query0 .. query0 + 15, to shared memory.
void GpuBackwardKernel::tileSoftmaxStatistics(Item &item, Value query0) {
  Warp &warp = item.warp;
  const Scratch &scratch = item.scratch;
  const int64_t d = g.headDim, stride = shape.rowStride;
  // D_i: lane 16 h + r sums row r's channels [h d / 2, (h + 1) d / 2), the
  // half-warps' sums added by a shuffle (the same bits in both).
  {
    Value row = add(query0, remConst(item.lane, 16));
    Value half = divConst(item.lane, 16);
    Value isRow = compare(arith::CmpIPredicate::ult, row, index(g.tokens));
    RowAddress out = outputAddress(item.w, item.h, minConst(row, g.tokens - 1));
    Value mask = out.valid ? arith::AndIOp::create(b, isRow, out.valid) : isRow;
    Value sum = item.zero;
    for (int64_t e = 0; e < d / 2; ++e) {
      Value channel = add(mulConst(half, d / 2), index(e));
      Value o = toF32(warp.load(flatOutput, add(out.offset, channel), mask));
      Value dout = toF32(warp.load(scratch.outputGradients,
                                   add(mulConst(row, stride), channel)));
      sum = math::FmaOp::create(b, o, dout, sum);
    }
    sum = arith::AddFOp::create(b, sum, warp.shuffleXor(sum, 16));
    warp.store(sum, scratch.delta, row,
               compare(arith::CmpIPredicate::eq, half, index(0)));
  }

  // lse_i: the lane's rows g and g + 8 (rowHalf), their keys' columns 2t,
  // 2t + 1 of each 8-key tile; a running max and sum per lane, merged over
  // the quad (lanes 4g .. 4g + 3) at the end.
  SmallVector<OperandTerms> queries =
      loadRowTile(item, scratch.queries, query0);
  std::array<Value, 2> rows, rowOffsets, rowLabels, rowIsClass;
  for (int64_t half = 0; half < 2; ++half) {
    rows[half] = add(query0, add(item.group, index(8 * half)));
    rowOffsets[half] = warp.load(scratch.tokenOffsets, rows[half]);
    rowLabels[half] = warp.load(scratch.tokenLabels, rows[half]);
    rowIsClass[half] = isClassToken(rows[half]);
  }
  Value initialMax = warp.constant(kOnlineSoftmaxInitialMax, f32);
  Value minusInf = warp.constant(-std::numeric_limits<double>::infinity(), f32);
  Value zeroLabel = toI32(index(0));
  ValueRange state = rolledLoop(
      index(0), index(shape.paddedTokens / 16),
      {initialMax, initialMax, item.zero, item.zero},
      [&](Value tile, ValueRange carried) {
        Value key0 = mulConst(tile, 16);
        SmallVector<Fragment> scores =
            productTile(item, queries, scratch.keys, key0);
        std::array<Value, 2> max = {carried[0], carried[1]};
        std::array<Value, 2> sum = {carried[2], carried[3]};
        SmallVector<PairOperands> pairs;
        SmallVector<Value> tileScores;
        for (auto [nt, fragment] : llvm::enumerate(scores))
          for (int64_t i = 0; i < MmaLayout::cElements; ++i) {
            int64_t half = MmaLayout::rowHalf(i);
            Value key =
                add(key0, laneIndex(item, MmaLayout::c(i).column, 8 * nt));
            PairOperands &pair = pairs.emplace_back();
            pair.rowOffset = rowOffsets[half];
            pair.rowLabel = rowLabels[half];
            pair.rowIsClass = rowIsClass[half];
            pair.keyOffset = warp.load(scratch.tokenOffsets, key);
            pair.keyLabel = warp.load(scratch.tokenLabels, key);
            pair.keyIsClass = isClassToken(key);
            tileScores.push_back(biasedScore(item, pair, fragment[i]));
          }
        tileScores = addShiftMask(item, pairs, tileScores);
        std::array<SmallVector<Value>, 2> rowScores;
        for (auto [e, s] : llvm::enumerate(tileScores))
          rowScores[MmaLayout::rowHalf(e % MmaLayout::cElements)].push_back(
              select(compare(arith::CmpIPredicate::slt, pairs[e].keyLabel,
                             zeroLabel),
                     minusInf, s));
        // One rescale per row and tile: m' = max(m, max_j s_j),
        // l' = l 2^(m - m') + sum_j 2^(s_j - m').
        for (int64_t half = 0; half < 2; ++half) {
          Value next = max[half];
          for (Value s : rowScores[half])
            next = arith::MaximumFOp::create(b, next, s);
          Value part = item.zero;
          for (Value s : rowScores[half])
            part = arith::AddFOp::create(
                b, part,
                math::Exp2Op::create(b, arith::SubFOp::create(b, s, next)));
          Value correction = math::Exp2Op::create(
              b, arith::SubFOp::create(b, max[half], next));
          sum[half] = math::FmaOp::create(b, sum[half], correction, part);
          max[half] = next;
        }
        return SmallVector<Value>{max[0], max[1], sum[0], sum[1]};
      });
  Value plusInf = warp.constant(std::numeric_limits<double>::infinity(), f32);
  Value isWriter = compare(arith::CmpIPredicate::eq, item.pair, index(0));
  for (int64_t half = 0; half < 2; ++half) {
    // (m1, l1) and (m2, l2) merge to (m, l1 2^(m1 - m) + l2 2^(m2 - m)),
    // m = max(m1, m2): the same bits in both lanes of an exchange.
    Value max = state[half], sum = state[2 + half];
    for (int64_t offset = 1; offset < 4; offset *= 2) {
      Value otherMax = warp.shuffleXor(max, offset);
      Value otherSum = warp.shuffleXor(sum, offset);
      Value merged = arith::MaximumFOp::create(b, max, otherMax);
      auto rescale = [&](Value l, Value m) -> Value {
        return arith::MulFOp::create(
            b, l,
            math::Exp2Op::create(b, arith::SubFOp::create(b, m, merged)));
      };
      sum = arith::AddFOp::create(b, rescale(sum, max),
                                  rescale(otherSum, otherMax));
      max = merged;
    }
    Value lse = arith::AddFOp::create(b, max, math::Log2Op::create(b, sum));
    // Rows past N: +inf, so that their p are 0.
    lse = select(compare(arith::CmpIPredicate::uge, rows[half],
                         index(g.tokens)),
                 plusInf, lse);
    warp.store(lse, scratch.logSumExp, rows[half], isWriter);
  }
}

/// The pairs of a tile of 16 rows and 16 columns, keys as the rows (the
/// key pass: Sᵀ) or queries (the query pass: S): p and ds, two C fragments
/// each (f32).
struct GpuBackwardKernel::PairTile {
  SmallVector<Fragment> p, ds;
};

GpuBackwardKernel::PairTile GpuBackwardKernel::pairGradientTile(
    Item &item, ArrayRef<OperandTerms> x, ArrayRef<OperandTerms> y, Value row0,
    Value column0, bool keysAreRows) {
  Warp &warp = item.warp;
  const Scratch &scratch = item.scratch;
  // keys as rows: x, y = k_J, v_J and S = k qᵀ, dP = v doutᵀ; queries as
  // rows: x, y = q_I, dout_I and S = q kᵀ, dP = dout vᵀ.
  SmallVector<Fragment> scores = productTile(
      item, x, keysAreRows ? scratch.queries : scratch.keys, column0);
  SmallVector<Fragment> dp = productTile(
      item, y, keysAreRows ? scratch.outputGradients : scratch.values, column0);
  // What a pair needs of its query and of its key, loaded once per token
  // of the lane: its rows g and g + 8, its columns 2t and 2t + 1 of each
  // 8-column fragment.
  Value zeroLabel = toI32(index(0));
  auto loadToken = [&](Value token, bool isQuery, PairOperands &pair) {
    Value offset = warp.load(scratch.tokenOffsets, token);
    Value label = warp.load(scratch.tokenLabels, token);
    if (isQuery) {
      pair.rowOffset = offset;
      pair.rowLabel = label;
      pair.rowIsClass = isClassToken(token);
      pair.logSumExp = warp.load(scratch.logSumExp, token);
      pair.delta = warp.load(scratch.delta, token);
    } else {
      pair.keyOffset = offset;
      pair.keyLabel = label;
      pair.keyIsClass = isClassToken(token);
    }
  };
  std::array<PairOperands, 2> rowTokens;
  for (int64_t half = 0; half < 2; ++half)
    loadToken(add(row0, add(item.group, index(8 * half))), !keysAreRows,
              rowTokens[half]);
  // The tile's scores, then the mask (a branch), then p and ds.
  SmallVector<PairOperands> pairs;
  SmallVector<Value> tileScores;
  for (int64_t nt = 0; nt < 2; ++nt) {
    std::array<std::optional<PairOperands>, 2> columnTokens;
    for (int64_t i = 0; i < MmaLayout::cElements; ++i) {
      FragmentElement e = MmaLayout::c(i);
      std::optional<PairOperands> &column = columnTokens[e.column.offset];
      if (!column) {
        column.emplace();
        loadToken(add(column0, laneIndex(item, e.column, 8 * nt)), keysAreRows,
                  *column);
      }
      const PairOperands &query =
          keysAreRows ? *column : rowTokens[MmaLayout::rowHalf(i)];
      const PairOperands &key =
          keysAreRows ? rowTokens[MmaLayout::rowHalf(i)] : *column;
      PairOperands &pair = pairs.emplace_back(query);
      pair.keyOffset = key.keyOffset;
      pair.keyLabel = key.keyLabel;
      pair.keyIsClass = key.keyIsClass;
      tileScores.push_back(biasedScore(item, pair, scores[nt][i]));
    }
  }
  tileScores = addShiftMask(item, pairs, tileScores);
  PairTile tile;
  for (int64_t nt = 0; nt < 2; ++nt) {
    Fragment p, ds;
    for (int64_t i = 0; i < MmaLayout::cElements; ++i) {
      int64_t e = nt * MmaLayout::cElements + i;
      const PairOperands &pair = pairs[e];
      // Keys past N: p = 0; queries past N have lse = +inf, so p = 0.
      Value probability = select(
          compare(arith::CmpIPredicate::slt, pair.keyLabel, zeroLabel),
          item.zero,
          math::Exp2Op::create(
              b, arith::SubFOp::create(b, tileScores[e], pair.logSumExp)));
      p.push_back(probability);
      ds.push_back(arith::MulFOp::create(
          b, probability, arith::SubFOp::create(b, dp[nt][i], pair.delta)));
    }
    tile.p.push_back(p);
    tile.ds.push_back(ds);
  }
  return tile;
}

/// `count` C fragments from `values` (a flat loop-carried range) on,
/// fragment `first` first.
static SmallVector<Fragment> fragmentsOf(ValueRange values, int64_t first,
                                         int64_t count) {
  SmallVector<Fragment> fragments;
  for (int64_t nt = 0; nt < count; ++nt) {
    ValueRange slice = values.slice((first + nt) * MmaLayout::cElements,
                                    MmaLayout::cElements);
    fragments.emplace_back(slice.begin(), slice.end());
  }
  return fragments;
}

OperandTerms GpuBackwardKernel::pairAsOperand(Item &item,
                                              ArrayRef<Fragment> pair) {
  assert(MmaLayout::cPairIsA() && "two C fragments must be an A fragment");
  Fragment a;
  for (const Fragment &fragment : pair)
    for (Value x : fragment)
      a.push_back(convertFloat(x, shape.element));
  return splitIntoTerms(item, a);
}

/// Key tile J: dk_J and dv_J over every query tile, and the table's
/// gradient of its pairs.
void GpuBackwardKernel::gradientOfKeyTile(Item &item, Value key0) {
  Warp &warp = item.warp;
  const Scratch &scratch = item.scratch;
  const int64_t stride = shape.rowStride, channelTiles = g.headDim / 8;
  SmallVector<OperandTerms> keyRows = loadRowTile(item, scratch.keys, key0);
  SmallVector<OperandTerms> valueRows =
      loadRowTile(item, scratch.values, key0);
  // dk's C fragments, then dv's, a fragment per 8 channels.
  SmallVector<Value> initial(2 * channelTiles * MmaLayout::cElements,
                             item.zero);
  Value tileBase = mulConst(item.warpIndex, 16 * kScoreTileStride);
  ValueRange sums = rolledLoop(
      index(0), index(shape.paddedTokens / 16), initial,
      [&](Value queryTile, ValueRange carried) {
        Value query0 = mulConst(queryTile, 16);
        PairTile tile = pairGradientTile(item, keyRows, valueRows, key0,
                                         query0, /*keysAreRows=*/true);
        OperandTerms p = pairAsOperand(item, tile.p);
        OperandTerms ds = pairAsOperand(item, tile.ds);
        SmallVector<Fragment> dk = fragmentsOf(carried, 0, channelTiles);
        SmallVector<Fragment> dv =
            fragmentsOf(carried, channelTiles, channelTiles);
        for (int64_t nt = 0; nt < channelTiles; ++nt) {
          // B(query, channel) = rows[query, channel].
          auto rowsOf = [&](Value rows) {
            return splitIntoTerms(
                item, loadOperand(item, /*isA=*/false, rows, stride,
                                  /*tokenIsRow=*/true, query0, index(8 * nt)));
          };
          dv[nt] = warp.mmaOfTerms(p, rowsOf(scratch.outputGradients), dv[nt]);
          dk[nt] = warp.mmaOfTerms(ds, rowsOf(scratch.queries), dk[nt]);
        }
        // dS to the warp's shared tile, [key][query], once the previous
        // tile's readers are done.
        warp.sync();
        for (auto [nt, fragment] : llvm::enumerate(tile.ds))
          for (int64_t i = 0; i < MmaLayout::cElements; ++i) {
            FragmentElement e = MmaLayout::c(i);
            warp.store(fragment[i], scratch.scoreGradients,
                       add(tileBase,
                           add(mulConst(laneIndex(item, e.row, 0),
                                        kScoreTileStride),
                               laneIndex(item, e.column, 8 * nt))));
          }
        warp.sync();
        addTileToTableGradient(item, key0, query0);
        if (scratch.windowScoreGradients)
          keepScoreGradients(item, key0, query0, tile.ds);
        SmallVector<Value> next;
        for (const Fragment &fragment : llvm::concat<Fragment>(dk, dv))
          llvm::append_range(next, fragment);
        return next;
      });
  storeGradientTile(item, Input::Key, key0, fragmentsOf(sums, 0, channelTiles),
                    op.getScale().convertToDouble());
  storeGradientTile(item, Input::Value, key0,
                    fragmentsOf(sums, channelTiles, channelTiles), 1.0);
}

/// dSᵀ of key tile J and query tile I (C fragments, keys as the rows),
/// rounded to the element type, to the window's dS as [query][key], where
/// the query pass reads it as the A operand of dq.
void GpuBackwardKernel::keepScoreGradients(Item &item, Value key0,
                                           Value query0,
                                           ArrayRef<Fragment> transposed) {
  for (auto [nt, fragment] : llvm::enumerate(transposed))
    for (int64_t i = 0; i < MmaLayout::cElements; ++i) {
      FragmentElement e = MmaLayout::c(i);
      Value key = add(key0, laneIndex(item, e.row, 0));
      Value query = add(query0, laneIndex(item, e.column, 8 * nt));
      item.warp.store(
          convertFloat(fragment[i], shape.element),
          item.scratch.windowScoreGradients,
          add(mulConst(query, shape.windowScoreStride), key));
    }
}

/// Query tile I: dq_I = scale sum_J dS_IJ k_J, dS_IJ as dq's A operand:
/// read from the window's dS that the key pass kept, or recomputed with the
/// queries as the rows, so that its C fragments are that operand.
void GpuBackwardKernel::gradientOfQueryTile(Item &item, Value query0) {
  Warp &warp = item.warp;
  const Scratch &scratch = item.scratch;
  const int64_t channelTiles = g.headDim / 8;
  SmallVector<OperandTerms> queryRows, outputGradientRows;
  if (!scratch.windowScoreGradients) {
    queryRows = loadRowTile(item, scratch.queries, query0);
    outputGradientRows = loadRowTile(item, scratch.outputGradients, query0);
  }
  SmallVector<Value> initial(channelTiles * MmaLayout::cElements, item.zero);
  ValueRange sums = rolledLoop(
      index(0), index(shape.paddedTokens / 16), initial,
      [&](Value keyTile, ValueRange carried) {
        Value key0 = mulConst(keyTile, 16);
        OperandTerms ds;
        if (scratch.windowScoreGradients) {
          // A(query, key) = dS[query][key].
          ds = splitIntoTerms(
              item, loadOperand(item, /*isA=*/true,
                                scratch.windowScoreGradients,
                                shape.windowScoreStride, /*tokenIsRow=*/true,
                                query0, key0));
        } else {
          PairTile tile =
              pairGradientTile(item, queryRows, outputGradientRows, query0,
                               key0, /*keysAreRows=*/false);
          ds = pairAsOperand(item, tile.ds);
        }
        SmallVector<Value> next;
        for (const auto &[nt, acc] :
             llvm::enumerate(fragmentsOf(carried, 0, channelTiles))) {
          // B(key, channel) = K[key, channel].
          OperandTerms keys = splitIntoTerms(
              item,
              loadOperand(item, /*isA=*/false, scratch.keys, shape.rowStride,
                          /*tokenIsRow=*/true, key0, index(8 * nt)));
          llvm::append_range(next, warp.mmaOfTerms(ds, keys, acc));
        }
        return next;
      });
  storeGradientTile(item, Input::Query, query0,
                    fragmentsOf(sums, 0, channelTiles),
                    op.getScale().convertToDouble());
}

/// G_h[P(i) - P(j) + c] += ds_ij from the shared tile: lane 16 h + r takes
/// query row r, keys 8 h .. 8 h + 7 in order, a warp barrier between keys.
/// BEiT's class key (key 0: the first tile's first key of half 0) sends
/// every grid row's term to T + 1: its column is summed over the half-warp
/// first (a butterfly, the same bits in each lane), which lane 0 adds,
/// with its own class row's term (T + 2); the class row's other terms go to
/// T, one lane per half.
void GpuBackwardKernel::addTileToTableGradient(Item &item, Value key0,
                                               Value query0) {
  Warp &warp = item.warp;
  const Scratch &scratch = item.scratch;
  Value row = remConst(item.lane, 16), half = divConst(item.lane, 16);
  Value query = add(query0, row);
  Value isRow = compare(arith::CmpIPredicate::ult, query, index(g.tokens));
  PairOperands pair;
  pair.rowOffset = warp.load(scratch.tokenOffsets, query);
  pair.rowIsClass = isClassToken(query);
  // The warp's two copies of G, its half-warps'; its tile of dS.
  Value warpCopies = mulConst(item.warpIndex, 2 * g.tableRows);
  Value copy = add(warpCopies, mulConst(half, g.tableRows));
  Value tileBase = mulConst(item.warpIndex, 16 * kScoreTileStride);
  auto addAt = [&](Value entry, Value value, Value mask) {
    Value sum = arith::AddFOp::create(
        b, warp.load(scratch.tableGradient, entry, mask), value);
    warp.store(sum, scratch.tableGradient, entry, mask);
  };
  rolledLoop(index(0), index(8), {}, [&](Value step, ValueRange) {
    Value keyInTile = add(mulConst(half, 8), step);
    Value key = add(key0, keyInTile);
    pair.keyOffset = warp.load(scratch.tokenOffsets, key);
    pair.keyIsClass = isClassToken(key);
    Value mask = arith::AndIOp::create(
        b, isRow, compare(arith::CmpIPredicate::ult, key, index(g.tokens)));
    Value ds = warp.load(
        scratch.scoreGradients,
        add(tileBase, add(mulConst(keyInTile, kScoreTileStride), row)));
    auto addPair = [&](Value pairMask) {
      addAt(add(copy, tableEntry(item, pair)), ds, pairMask);
    };
    if (!g.classToken) {
      addPair(mask);
      warp.sync();
      return SmallVector<Value>{};
    }
    Value isClassStep = arith::AndIOp::create(
        b, compare(arith::CmpIPredicate::eq, key0, index(0)),
        compare(arith::CmpIPredicate::eq, step, index(0)));
    auto classStep = scf::IfOp::create(b, isClassStep, /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&classStep.getThenRegion().front());
      Value isFirstHalf = compare(arith::CmpIPredicate::eq, half, index(0));
      Value isGridRow = arith::AndIOp::create(
          b, mask, compare(arith::CmpIPredicate::ne, query, index(0)));
      Value term = select(arith::AndIOp::create(b, isFirstHalf, isGridRow), ds,
                          item.zero);
      for (int64_t offset = 1; offset < 16; offset *= 2)
        term = arith::AddFOp::create(b, term, warp.shuffleXor(term, offset));
      Value isLaneZero = compare(arith::CmpIPredicate::eq, item.lane, index(0));
      addAt(add(warpCopies, index(g.gridTableRows + 1)), term, isLaneZero);
      addAt(add(warpCopies, index(g.gridTableRows + 2)), ds,
            arith::AndIOp::create(b, isLaneZero,
                                  arith::AndIOp::create(b, mask,
                                                        pair.rowIsClass)));
      addPair(arith::AndIOp::create(
          b, mask, compare(arith::CmpIPredicate::ne, half, index(0))));
      b.setInsertionPointToStart(&classStep.getElseRegion().front());
      addPair(mask);
    }
    warp.sync();
    return SmallVector<Value>{};
  });
}

void GpuBackwardKernel::storeGradientTile(Item &item, Input which,
                                          Value token0,
                                          ArrayRef<Fragment> rows,
                                          double scale) {
  Warp &warp = item.warp;
  Value factor = warp.constant(scale, f32);
  for (auto [nt, fragment] : llvm::enumerate(rows))
    for (int64_t i = 0; i < MmaLayout::cElements; ++i) {
      FragmentElement e = MmaLayout::c(i);
      Value token = add(token0, laneIndex(item, e.row, 0));
      Value mask = compare(arith::CmpIPredicate::ult, token, index(g.tokens));
      RowAddress address =
          rowAddress(item.w, item.h, minConst(token, g.tokens - 1), which);
      if (address.valid)
        mask = arith::AndIOp::create(b, mask, address.valid);
      Value value = scale == 1.0
                        ? fragment[i]
                        : arith::MulFOp::create(b, fragment[i], factor);
      warp.store(convertFloat(value, shape.element),
                 flatGradients[static_cast<int>(which)],
                 add(address.offset, laneIndex(item, e.column, 8 * nt)), mask);
    }
}

void GpuBackwardKernel::forEachWarp(Item &item, function_ref<void()> body,
                                    bool barrier) {
  if (!item.warp.isEmulated()) {
    body();
    if (!barrier)
      return;
    if (shape.warps > 1)
      gpu::BarrierOp::create(b);
    else
      item.warp.sync();
    return;
  }
  Value own = item.warpIndex;
  forLoop(index(0), index(shape.warps), 1, {}, [&](Value w, ValueRange) {
    item.warpIndex = w;
    body();
    return SmallVector<Value>{};
  });
  item.warpIndex = own;
}

void GpuBackwardKernel::forEachTileOfWarp(Item &item,
                                          function_ref<void(Value)> body) {
  int64_t tiles = shape.paddedTokens / 16;
  if (shape.warps == tiles) {
    body(mulConst(item.warpIndex, 16));
    return;
  }
  forLoop(item.warpIndex, index(tiles), shape.warps, {},
          [&](Value tile, ValueRange) {
            body(mulConst(tile, 16));
            return SmallVector<Value>{};
          });
}

/// The item's passes in the tensor-core form (the section's header), each
/// split over the block's warps, a block barrier between them.
void GpuBackwardKernel::emitTensorCoreItem(Item &item, Value itemIndex) {
  forEachWarp(item, [&] { stageWindow(item); });
  forEachWarp(item, [&] {
    forEachTileOfWarp(item, [&](Value query0) {
      tileSoftmaxStatistics(item, query0);
    });
  });
  forEachWarp(item, [&] {
    forEachTileOfWarp(item, [&](Value key0) { gradientOfKeyTile(item, key0); });
  });
  forEachWarp(item, [&] {
    forEachTileOfWarp(item,
                      [&](Value query0) { gradientOfQueryTile(item, query0); });
  });
  forEachWarp(
      item, [&] { storeTableGradient(item, itemIndex); }, /*barrier=*/false);
}

