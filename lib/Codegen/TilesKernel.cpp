//===- TilesKernel.cpp - the CPU kernel of the fused attention ------------===//
//
// The fused CPU kernel of rpe.fused_window_attention, emitted after
// bufferization as scf loops over vector ops. Per (window b, head h):
//
//   Kt[e, j']  = scale * k[b, h, j, e]                      pack (keys padded
//                                                           per window row)
//                (cosine: times s_h / |k_j|, and S[i, :] / |q_i| below)
//   S[i, j']   = sum_e q[b, h, i, e] * Kt[e, j']            scores, FMA tiles
//                (-inf on padding keys: the accumulators start there)
//   S[i, j']  += R_h[idx(j, i)] (+ mask)                    bias: one vector
//                                                           load per key row
//   m_i        = max_j' S[i, j']
//   S[i, j']   = exp(S[i, j'] - m_i),  l_i = sum_j' S[i, j'] probabilities
//                (in base 2: log2(e) folded into kᵀ, the table and the mask)
//   out[i, :]  = (sum_j S[i, j'] * v[b, h, j, :]) / l_i     FMA tiles
//
// Keys are laid out one window row per ceil(Ww / L) vectors of L lanes: key
// j = (row r, column x) sits at j' = r * Wpad + x. Then the bias of a query
// i against the keys of row r is contiguous in R_h, the head's table
// reversed (R_h[t] = table[T - 1 - t, h]): since idx(i, j) + idx(j, i) =
// T - 1 and idx(j, i) = P(j) - P(i) + (T - 1) / 2 with P linear in the
// coordinates, bias(i, j) = R_h[P(r, 0) - P(i) + (T - 1) / 2 + x]. No N x N
// index, bias or mask exists anywhere.
//
// On AVX-512 the scores of a block of query rows go from the micro-kernel's
// accumulators straight into the softmax (bias, max, exponentials) when a
// row's vectors fit the registers, and each softmax row prefetches one
// token's rows of q, k, v and out of the next (window, head), so that at
// large batches the items do not wait for memory. bf16 operands on CPUs
// with AVX512-BF16 take dot products instead of FMAs (PairedBf16.cpp).
//
// q, k, v and out are read and written through flat views, one row (the
// head_dim channels of one token and head) at a time: the windows layout
// addresses rows as [b, h, t] (or [b, t, h] for out), the token layout as
// the image position that the shift, padding and partition give window
// token (b, t) (FeatureMapAddressing.h), read from a constant table of
// those positions per window of an image. Padding tokens read their
// padding value row and write nowhere.
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"

#include "Rpe/WindowGeometry.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"

#include <functional>
#include <limits>

using namespace mlir;
using namespace mlir::rpe;
using namespace mlir::rpe::detail;

namespace mlir::rpe::detail {

/// R[h, t] = table[T - 1 - t, h] for t < T, 0 on the padding after it: one
/// contiguous, per-head copy of the compact table (H x (T + Wpad) floats),
/// made once per call and shared by every window.
Value FusedKernelEmitter::emitReversedTables() {
  auto type = MemRefType::get({g.heads, g.tableRows + g.paddedRowLength}, f32);
  Value rtab = memref::AllocaOp::create(b, type);
  Value table = op.getTable();
  forLoop(index(0), index(g.heads), 1, {}, [&](Value h, ValueRange) {
    forLoop(index(0), index(g.tableRows), 1, {}, [&](Value t, ValueRange) {
      Value row = arith::SubIOp::create(b, index(g.tableRows - 1), t);
      Value biasLog2 = arith::MulFOp::create(
          b, loadScalar(table, {row, h}),
          arith::ConstantOp::create(b, b.getF32FloatAttr(kLog2E)));
      memref::StoreOp::create(b, biasLog2, rtab, ValueRange{h, t});
      return SmallVector<Value>{};
    });
    Value zero = arith::ConstantOp::create(b, b.getF32FloatAttr(0.0));
    forLoop(index(g.tableRows), index(g.tableRows + g.paddedRowLength), 1, {},
            [&](Value t, ValueRange) {
              memref::StoreOp::create(b, zero, rtab, ValueRange{h, t});
              return SmallVector<Value>{};
            });
    return SmallVector<Value>{};
  });
  return rtab;
}

/// The shift mask as data: a constant [nW, N'] table of region labels in
/// the padded key layout, rows extended to the micro-kernels' score columns
/// (padding lanes -1). The mask of (i, j) is mask_value where the labels of
/// i and j differ.
Value FusedKernelEmitter::emitRegionLabels() {
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

/// A constant i32 table as a private global of the module (one per
/// distinct table, found again by its contents), read by memref.get_global.
Value FusedKernelEmitter::constantTable(StringRef prefix,
                                        ArrayRef<int64_t> shape,
                                        ArrayRef<int32_t> values) {
  auto module = op->getParentOfType<ModuleOp>();
  auto type = MemRefType::get(shape, b.getI32Type());
  auto tensorType =
      RankedTensorType::get(type.getShape(), type.getElementType());
  auto value = DenseElementsAttr::get(tensorType, values);
  for (auto global : module.getOps<memref::GlobalOp>())
    if (global.getType() == type && global.getConstant() &&
        global.getInitialValueAttr() == value)
      return memref::GetGlobalOp::create(b, type, global.getSymName());
  std::string name = prefix.str();
  for (int suffix = 1; module.lookupSymbol(name); ++suffix)
    name = (prefix + "_" + Twine(suffix)).str();
  memref::GlobalOp global;
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    global = memref::GlobalOp::create(b, name, b.getStringAttr("private"), type,
                                      value, /*constant=*/true,
                                      b.getI64IntegerAttr(64));
  }
  return memref::GetGlobalOp::create(b, type, global.getSymName());
}

/// The image position of every window token of a feature map, a constant
/// [windows per image, N] table (-1: padding), so that the many row
/// addresses of the kernel (q's rows in the products, four prefetched rows
/// and the output row per query row, the packed k and v) are a load, not
/// the shift, padding and partition arithmetic; that arithmetic where the
/// table would be too large.
void FusedKernelEmitter::emitTokenPositions() {
  if (!featureMap ||
      featureMap->windowsPerImage() * g.tokens > kMaxConstantElements)
    return;
  SmallVector<int32_t> positions =
      tokenPositions(b.getContext(), *featureMap);
  if (positions.empty())
    return;
  tokenPositionTable =
      constantTable("__rpe_token_positions",
                    {featureMap->windowsPerImage(), g.tokens}, positions);
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
void FusedKernelEmitter::emitPackTransposed(Input which, Value w, Value h,
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
    forLoop(index(0), index(g.keyRows), 1, {}, [&](Value r, ValueRange) {
      for (int64_t v = 0; v < g.rowVectors; ++v) {
        // The keys of this vector of the padded row; lanes past the row
        // are padding.
        SmallVector<std::optional<Row>> keys;
        for (int64_t lane = 0; lane < 8; ++lane) {
          int64_t x = v * 8 + lane;
          keys.push_back(
              x < g.rowLength
                  ? std::optional<Row>(inputRow(
                        which, w, h, add(mulConst(r, g.rowLength), index(x))))
                  : std::nullopt);
        }
        Value column = add(mulConst(r, g.paddedRowLength), index(v * 8));
        SmallVector<Value, 8> keyScales;
        for (const std::optional<Row> &key : keys)
          keyScales.push_back(key && headScale ? broadcast(keyScale(*key))
                                               : scaleVector);
        forLoop(index(0), index(g.headDim), 8, {}, [&](Value e0, ValueRange) {
          SmallVector<Value, 8> block;
          for (auto [key, keyScaleVector] : llvm::zip(keys, keyScales))
            block.push_back(
                key ? arith::MulFOp::create(
                          b,
                          loadVector(key->memref, {add(key->offset, e0)}, 8, 8),
                          keyScaleVector)
                          .getResult()
                    : zeros);
          transpose8x8(b, block);
          for (int64_t lane = 0; lane < 8; ++lane)
            vector::StoreOp::create(b, block[lane], kt,
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

/// Columns of kᵀ past the padded keys, up to a whole vector of the
/// micro-kernel, are zero: their scores are computed and never read.
void FusedKernelEmitter::zeroExtraKeyColumns(Value kt) {
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
/// S[lr, :] = x_(qb + lr) · Kt for the rows of one query block, x_i the
/// row `leftRow(i)` (q's, or dout's for the gradient): an outer-product
/// micro-kernel over blocks of `mr` rows x `nc` vectors of accumulators,
/// reduced over e; with `keyPadding`, -inf on the padding keys' lanes.
void FusedKernelEmitter::emitScores(function_ref<Row(Value)> leftRow, Value kt,
                                    Value scores, Value qb, Value rows,
                                    bool keyPadding) {
  // Registers: mr * nc accumulators and mr broadcasts (the key vectors are
  // memory operands); at most 8 vectors (AVX2: 7) per block.
  int64_t chunk = g.registers == 16
                      ? (g.computeKeyVectors <= 7 ? g.computeKeyVectors : 4)
                      : std::min<int64_t>(g.computeKeyVectors, 8);
  int64_t blockRows = scoreBlockRows(chunk);
  forRowBlocks(rows, blockRows, [&](Value lr, int64_t mr) {
    Value i = add(qb, lr);
    SmallVector<Row> queries;
    for (int64_t m = 0; m < mr; ++m)
      queries.push_back(leftRow(add(i, index(m))));
    for (int64_t c0 = 0; c0 < g.computeKeyVectors; c0 += chunk) {
      int64_t nc = std::min(chunk, g.computeKeyVectors - c0);
      SmallVector<Value> acc = emitScoreBlock(queries, kt, c0, nc, keyPadding);
      for (int64_t m = 0; m < mr; ++m)
        for (int64_t c = 0; c < nc; ++c)
          vector::StoreOp::create(
              b, acc[m * nc + c], scores,
              ValueRange{add(lr, index(m)), index((c0 + c) * g.computeLanes)});
    }
  });
}

/// Rows of the scores micro-kernel: the queries' products with vectors
/// [c0, c0 + nc) of Kt, reduced over e (mr * nc accumulators, row-major),
/// and scaled by 1 / |q| for cosine attention. With `keyPadding` the
/// accumulators start at scoreInit: -inf on the lanes of padding keys.
SmallVector<Value> FusedKernelEmitter::emitScoreBlock(ArrayRef<Row> queries,
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
SmallVector<Value> FusedKernelEmitter::scoreInit(int64_t mr, int64_t c0,
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
int64_t FusedKernelEmitter::scoreBlockRows(int64_t vectors) {
  if (g.registers == 16)
    return g.computeKeyVectors <= 7 ? 2 : 3;
  return std::clamp<int64_t>((g.registers - 2 - vectors) / (vectors + 1), 1, 6);
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
Value FusedKernelEmitter::exp2(Value x, bool bf16Accuracy) {
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

/// How a row of probabilities, rounded to bf16, is stored with the keys
/// unpadded (P·v pairs consecutive keys): each pair of the row's vectors of
/// Lc lanes (padded key layout) is one permutation of its 2 Lc lanes
/// (vpermt2w), its keys in order and then padding lanes, stored at its
/// first key. The next pair's store overwrites the lanes past the keys;
/// after the last key a padding lane's probability (0: its score is -inf)
/// stays, the partner of an odd last key.
SmallVector<FusedKernelEmitter::DenseStore>
FusedKernelEmitter::denseProbabilityStores() {
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

int64_t FusedKernelEmitter::denseProbabilityRow() {
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
Value FusedKernelEmitter::storeDenseProbabilities(ArrayRef<Value> probabilities,
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

/// Per row: S += bias (+ mask) (the scores of padding keys are -inf from
/// the products: scoreInit), the row max, then
/// S = exp(S - max) and 1 / sum(S); `extra` adds to this (see
/// SoftmaxRowOptions).
///
/// Everything runs at the micro-kernels' width Lc. A vector of Lc lanes
/// holds Lc / L segments of the padded key layout, segment s being vector
/// s % (Wpad / L) of window row s / (Wpad / L), or padding past the last
/// row; which keys a lane holds is therefore known at compile time, and the
/// bias of each segment is one contiguous load from the reversed table. The
/// row's vectors are unrolled: a row of at most kRegisterRowVectors vectors
/// stays in registers from the scores to the probabilities; longer rows
/// are stored and reloaded at the same width (so that each load is
/// forwarded from a single store, which narrower stores would prevent).
void FusedKernelEmitter::emitSoftmaxRows(Value h, Value image, Value rtab,
                                         Value labels, Value scores,
                                         Value invSums, Value qb, Value rows,
                                         const SoftmaxRowOptions &extra) {
  constexpr int64_t kRegisterRowVectors = 12, kInterleavedRows = 4;
  const int64_t width = g.computeLanes;
  const int64_t segmentsPerVector = width / g.lanes;
  const bool inRegisters = g.computeKeyVectors <= kRegisterRowVectors;
  auto intType = VectorType::get({width}, b.getI32Type());
  auto segmentType = vecType; // L lanes

  // The keys of a segment: window row r (>= keyRows: padding), the first
  // padded column x0 of the segment within the row, and how many of its
  // lanes are keys.
  struct Segment {
    int64_t row, x0, keys;
  };
  auto segmentOf = [&](int64_t c, int64_t t) {
    int64_t s = c * segmentsPerVector + t;
    Segment seg{s / g.rowVectors, (s % g.rowVectors) * g.lanes, 0};
    if (seg.row < g.keyRows)
      seg.keys = std::clamp<int64_t>(g.rowLength - seg.x0, 0, g.lanes);
    return seg;
  };
  // Joins the segments of a vector (one segment: itself).
  auto join = [&](ArrayRef<Value> segments) {
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
  };

  Value log2e, maskValue, zeroVector;
  if (flatMask)
    log2e = splat(kLog2E, computeType);
  if (labels) {
    maskValue =
        splat(op.getMaskValue().convertToDouble() * kLog2E, computeType);
    zeroVector = splat(0.0, computeType);
  }
  // exp2 takes -inf (padding lanes, a -inf mask) and keeps NaN: a NaN in q
  // or k, a +inf in the table (+inf - +inf) or a row of -inf (-inf - -inf)
  // makes s - max, the row's sum and so the whole row NaN, as in PyTorch.

  // Rows in groups, each step done for every row of the group before the
  // next step: the max, the exponentials and the sum of one row are a chain
  // of dependent instructions, and the rows of a group are independent
  // chains for the core to overlap.
  // A caller that computes the scores block by block hands each block to
  // its softmax in registers (extra.produceScores): S is never stored, and
  // the softmax of one block overlaps the products of the next.
  int64_t groupRows = extra.produceScores ? extra.producedRows
                      : inRegisters       ? kInterleavedRows
                                          : 1;
  forRowBlocks(rows, groupRows, [&](Value lr0, int64_t mr) {
    SmallVector<Value> lrs, maxes;
    SmallVector<SmallVector<Value>> produced;
    if (extra.produceScores)
      produced = extra.produceScores(lr0, mr);
    SmallVector<SmallVector<Value>> rowScores(mr);
    for (int64_t m = 0; m < mr; ++m) {
      Value lr = add(lr0, index(m));
      lrs.push_back(lr);
      Value i = add(qb, lr);
      if (extra.eachRow)
        extra.eachRow(i);
      // bias(i, j) = R_h[P(j) - P(i) + center]; P(j) = P(row r, x = 0) + x.
      Value queryBase =
          arith::SubIOp::create(b, index(g.center), tableOffset(i));
      Value queryLabel;
      if (labels)
        queryLabel = vector::BroadcastOp::create(
            b, intType,
            memref::LoadOp::create(b, labels,
                                   ValueRange{image, paddedPosition(i)}));
      Value max;
      for (int64_t c = 0; c < g.computeKeyVectors; ++c) {
        Value column = index(c * width);
        SmallVector<Value> biases, masks;
        for (int64_t t = 0; t < segmentsPerVector; ++t) {
          Segment seg = segmentOf(c, t);
          if (seg.row >= g.keyRows) {
            biases.push_back(splat(0.0));
            masks.push_back(splat(0.0));
            continue;
          }
          biases.push_back(vector::LoadOp::create(
              b, segmentType, rtab,
              ValueRange{h, add(queryBase,
                                index(g.tableOffsetOf(seg.row * g.rowLength) +
                                      seg.x0))}));
          if (flatMask) {
            // mask[image, i, r * Wx + x] (unpadded keys).
            Value at =
                add(mulConst(add(mulConst(image, g.tokens), i), g.tokens),
                    index(seg.row * g.rowLength + seg.x0));
            masks.push_back(loadVector(flatMask, {at}, seg.keys, g.lanes));
          }
        }
        Value s = produced.empty()
                      ? vector::LoadOp::create(b, computeType, scores,
                                               ValueRange{lr, column})
                            .getResult()
                      : produced[m][c];
        s = extra.scoreScale
                ? math::FmaOp::create(b, s, extra.scoreScale, join(biases))
                      .getResult()
                : arith::AddFOp::create(b, s, join(biases)).getResult();
        if (flatMask)
          s = math::FmaOp::create(b, join(masks), log2e, s);
        if (labels) {
          Value keyLabels = vector::LoadOp::create(b, intType, labels,
                                                   ValueRange{image, column});
          Value differ = arith::CmpIOp::create(b, arith::CmpIPredicate::ne,
                                               keyLabels, queryLabel);
          s = arith::AddFOp::create(
              b, s, arith::SelectOp::create(b, differ, maskValue, zeroVector));
        }
        if (inRegisters)
          rowScores[m].push_back(s);
        else
          vector::StoreOp::create(b, s, scores, ValueRange{lr, column});
        // The first vector starts the max (a NaN in it may then make the
        // max, and its row, NaN, as the NaN score itself would).
        max = max ? maxSkippingNaN(s, max) : s;
      }
      maxes.push_back(max);
    }
    // The rows' maxima, each broadcast to a whole vector, reduced up to
    // three rows together: fewer shuffles than one row at a time, and
    // sooner than the whole group, whose exponentials all wait for it
    // (measured at stage 1 against 1 and 5 rows: +1.5% for both f32 and
    // bf16 against the group of 5; f32 as fast as, bf16 1% faster than
    // single rows).
    constexpr int64_t kMaxRowsPerMaxReduction = 3;
    reduceRows(
        SmallVector<Value>(maxes), kMaxRowsPerMaxReduction,
        [&](Value x, Value y) { return maxSkippingNaN(x, y); },
        [&](int64_t first, const ReducedRows &reduced) {
          for (int64_t m = 0; m < reduced.rows; ++m)
            maxes[first + m] = reduced.broadcast(b, m);
        });
    SmallVector<Value> sums;
    for (int64_t m = 0; m < mr; ++m) {
      Value sum;
      SmallVector<Value> probabilities;
      for (int64_t c = 0; c < g.computeKeyVectors; ++c) {
        Value column = index(c * width);
        Value s = inRegisters
                      ? rowScores[m][c]
                      : vector::LoadOp::create(b, computeType, scores,
                                               ValueRange{lrs[m], column})
                            .getResult();
        // Probabilities rounded to bf16 need no more than bf16's accuracy.
        Value p = exp2(arith::SubFOp::create(b, s, maxes[m]),
                       /*bf16Accuracy=*/bool(extra.bf16Probabilities));
        if (extra.bf16Probabilities) {
          probabilities.push_back(p);
          continue;
        }
        vector::StoreOp::create(b, p, scores, ValueRange{lrs[m], column});
        sum = sum ? arith::AddFOp::create(b, sum, p).getResult() : p;
      }
      if (extra.bf16Probabilities)
        sum = storeDenseProbabilities(probabilities, extra.bf16Probabilities,
                                      lrs[m]);
      sums.push_back(sum);
    }
    // 1 / sum for all rows of the group at once. The order of the sum is
    // within the tolerance of any f32 softmax; it is NaN when a score is.
    reduceRows(
        sums, mr,
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
                invSums, ValueRange{lrs[first + m]});
        });
  });
}

/// s > max ? s : max, one vmaxps: it skips a NaN s. In the softmax the max
/// of the row's other scores then shifts a NaN score, which reaches the row
/// through its own s - max.
Value FusedKernelEmitter::maxSkippingNaN(Value s, Value max) {
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
void FusedKernelEmitter::reduceRows(
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
FusedKernelEmitter::ReducedRows FusedKernelEmitter::reduceRowsInOneVector(
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
Value FusedKernelEmitter::ReducedRows::broadcast(OpBuilder &b,
                                                 int64_t row) const {
  int64_t width = cast<VectorType>(value.getType()).getNumElements();
  if (segment == width)
    return value;
  SmallVector<int64_t> lanes;
  for (int64_t l = 0; l < width; ++l)
    lanes.push_back(row * segment + l % segment);
  return vector::ShuffleOp::create(b, value.getLoc(), value, value, lanes);
}

/// Copies the rows `row(j)` of the window's tokens into contiguous f32
/// scratch, [N, d]: the token layout's rows are scattered over the map (and
/// some are padding), while the micro-kernels stream them in order.
Value FusedKernelEmitter::emitPackRows(function_ref<Row(Value)> row,
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

/// C[r, :] = sum_{x < count} coefficient(r, x) * B_x for the `rows` rows r,
/// B_x the f32 row of d channels at `matrix[base + x * d]`: a micro-kernel
/// over blocks of `mr` rows x `nc` vectors of head channels (mr * nc
/// accumulators and mr broadcast coefficients in registers), reduced over
/// x. `finish(r, c, lanes, acc)` consumes vector c (`lanes` valid) of row r.
void FusedKernelEmitter::emitRowCombination(
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

/// out[w, i, h*d + e] = (sum_j P[i, j'] * v[w, h, j, e]) / l_i, reduced
/// over the (unpadded) keys. Value row j is at `values[valueBase + j * d]`.
void FusedKernelEmitter::emitOutput(Value w, Value h, Value scores,
                                    Value invSums, Value values,
                                    Value valueBase, Value discard, Value qb,
                                    Value rows) {
  int64_t width = g.computeLanes;
  emitRowCombination(
      rows, index(g.tokens),
      [&](Value lr, Value j) -> Value {
        return memref::LoadOp::create(b, scores,
                                      ValueRange{lr, paddedPosition(j)});
      },
      values, valueBase,
      [&](Value lr, int64_t c, int64_t lanes, Value acc) {
        Row out = outputRow(w, h, add(qb, lr), discard);
        Value inv =
            broadcast(memref::LoadOp::create(b, invSums, lr), computeType);
        storeVector(arith::MulFOp::create(b, acc, inv), out.memref,
                    {add(out.offset, index(c * width))}, lanes, width);
      });
}

/// Prefetches token `token`'s rows of q, k, v and out in item (w, h) into
/// the cache, one prefetch per cache line. The kernel prefetches the next
/// item's rows, one token per query row of its softmax, while it computes:
/// without it each item waits for its rows from memory (the hardware's stream
/// prefetchers stop at every 4 KiB page, and an item's rows span one or two
/// pages per operand), and prefetches issued all at once would overflow the
/// core's queue of misses.
void FusedKernelEmitter::emitPrefetchRows(Value w, Value h, Value token) {
  int64_t bytes =
      getElementTypeOrSelf(op.getQuery().getType()).getIntOrFloatBitWidth() / 8;
  int64_t lineElements = 64 / bytes;
  int64_t lines = llvm::divideCeil(g.headDim * bytes, 64);
  for (Input which : {Input::Query, Input::Key, Input::Value}) {
    Row row = inputRow(which, w, h, token);
    for (int64_t line = 0; line < lines; ++line)
      memref::PrefetchOp::create(
          b, row.memref,
          ValueRange{add(row.offset, index(line * lineElements))},
          /*isWrite=*/false, /*localityHint=*/3, /*isDataCache=*/true);
  }
  // The output row too, for writing: its lines are then owned by the
  // time the row is stored, instead of each store waiting for its line to
  // be read (a padding token's row, cropped, prefetches row 0).
  RowAddress out = outputAddress(w, h, token);
  Value offset =
      out.valid ? select(out.valid, out.offset, index(0)) : out.offset;
  for (int64_t line = 0; line < lines; ++line)
    memref::PrefetchOp::create(
        b, flatOutput, ValueRange{add(offset, index(line * lineElements))},
        /*isWrite=*/true, /*localityHint=*/3, /*isDataCache=*/true);
}

/// Stack scratch of one (window, head) of the tiles kernel.
struct Scratch {
  Value kt, scores, invSums, queries, values, discard;
  Value probabilities; // bf16 P (AVX512-BF16 products)
};

FailureOr<FusedKernelEmitter::ScoreTerms> FusedKernelEmitter::emitScoreTerms() {
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

LogicalResult FusedKernelEmitter::emit(const FusedKernelOptions &options) {
  const bool hoistScratch = options.hoistScratch;
  avx512 = options.avx512 || options.bf16Dot;
  bool pairs = options.bf16Dot && canPairBf16();
  // f16 and bf16 rows the FMA products read are widened to f32 once per
  // item, into scratch: the micro-kernels read each q element once per
  // row and each v row once per block of rows, and a conversion there
  // costs as much as the FMA it feeds.
  const bool widen =
      !pairs && !getElementTypeOrSelf(op.getQuery().getType()).isF32();
  emitFlatViews();
  FailureOr<ScoreTerms> terms = emitScoreTerms();
  if (failed(terms))
    return failure();
  Value rtab = terms->rtab, labels = terms->labels;
  emitTokenPositions();
  Value items = mulConst(countWindows(), g.heads);
  auto parallel = createItemLoop(items);
  OpBuilder::InsertionGuard guard(b);

  // Scratch on the stack: kᵀ, one block of scores, the row sums' inverses
  // (and, for maps, the packed values and a row for cropped outputs). Per
  // iteration, released at its end, when iterations run on threads; once
  // for a sequential loop, since an alloca scope cannot survive its
  // lowering to sequential loops.
  auto allocateScratch = [&] {
    Scratch scratch;
    auto alloc = [&](ArrayRef<int64_t> shape, Type element) -> Value {
      return memref::AllocaOp::create(b, MemRefType::get(shape, element),
                                      b.getI64IntegerAttr(64));
    };
    if (pairs) {
      Type bf16 = b.getBF16Type();
      scratch.kt = alloc({g.headDim / 2, 2 * g.scoreColumns}, bf16);
      scratch.values = alloc({(g.tokens + 1) / 2, 2 * g.headDim}, bf16);
      scratch.probabilities = flatten(
          b, b.getLoc(), alloc({g.queryBlock * denseProbabilityRow()}, bf16));
    } else {
      scratch.kt = alloc({g.headDim, g.scoreColumns}, f32);
    }
    scratch.scores = memref::AllocaOp::create(
        b, MemRefType::get({g.queryBlock, g.scoreColumns}, f32),
        b.getI64IntegerAttr(64));
    scratch.invSums =
        memref::AllocaOp::create(b, MemRefType::get({g.queryBlock}, f32));
    if ((featureMap || widen) && !pairs)
      scratch.values = alloc({g.tokens * g.headDim}, f32);
    if (widen)
      scratch.queries = alloc({g.tokens * g.headDim}, f32);
    if (featureMap && featureMap->isPadded()) {
      Type element = getElementTypeOrSelf(op.getAttentionOutput().getType());
      scratch.discard = flatten(
          b, b.getLoc(),
          memref::AllocaOp::create(b, MemRefType::get({g.headDim}, element)));
    }
    return scratch;
  };
  Scratch scratch;
  if (hoistScratch) {
    b.setInsertionPoint(parallel);
    scratch = allocateScratch();
  }
  b.setInsertionPointToStart(parallel.getBody());
  Value item = parallel.getInductionVars()[0];
  Value w = divConst(item, g.heads), h = remConst(item, g.heads);
  memref::AllocaScopeOp scope;
  if (!hoistScratch) {
    scope = memref::AllocaScopeOp::create(b, TypeRange{});
    scope.getBodyRegion().push_back(new Block());
    b.setInsertionPointToStart(&scope.getBodyRegion().front());
    scratch = allocateScratch();
  }
  Value kt = scratch.kt, scores = scratch.scores, invSums = scratch.invSums;
  // The next item (the last item: itself), whose rows are prefetched.
  Value next = arith::MinUIOp::create(
      b, add(item, index(1)), arith::SubIOp::create(b, items, index(1)));
  Value nextW = divConst(next, g.heads), nextH = remConst(next, g.heads);
  Value image = maskWindow(w);
  // The scores go from the micro-kernel's registers to the softmax when a
  // row's vectors fit the registers (AVX-512, N' up to 128 columns).
  bool fuseScores = g.registers == 32 && g.computeKeyVectors <= 8;
  SoftmaxRowOptions softmax;
  auto prefetchNext = [&](Value i) { emitPrefetchRows(nextW, nextH, i); };
  softmax.eachRow = prefetchNext;
  Value discard = scratch.discard;
  std::function<Row(Value)> queryRow = [&](Value i) {
    return inputRow(Input::Query, w, h, i);
  };

  // The two forms differ in their products only: FMAs on f32 (kᵀ packed
  // with the scale), or AVX512-BF16 dot products on pairs (PairedBf16.cpp:
  // kᵀ and v packed in pairs, the scale applied to the f32 scores, P
  // rounded to bf16 for P·v). Each gives a block of scores in registers,
  // all scores of a query block into `scores`, and the output of a block.
  std::function<SmallVector<Value>(ArrayRef<Row>)> scoreBlock;
  std::function<void(Value, Value)> storeScores, emitOutputRows;
  Value values, valueBase;
  if (pairs) {
    emitPackKeyPairs(w, h, kt);
    emitPackValuePairs(w, h, scratch.values);
    softmax.scoreScale =
        splat(op.getScale().convertToDouble() * kLog2E, computeType);
    softmax.bf16Probabilities = scratch.probabilities;
    scoreBlock = [&](ArrayRef<Row> queries) {
      return emitPairDotBlock(queries, kt, 0, g.computeKeyVectors,
                              /*keyPadding=*/true);
    };
    storeScores = [&](Value qb, Value rows) {
      emitPairDotProducts(
          rows, [&](Value lr) { return queryRow(add(qb, lr)); }, kt,
          g.computeKeyVectors, /*keyPadding=*/true,
          [&](Value lr, int64_t c, Value acc) {
            vector::StoreOp::create(b, acc, scores,
                                    ValueRange{lr, index(c * g.computeLanes)});
          });
    };
    emitOutputRows = [&](Value qb, Value rows) {
      emitPairDotProducts(
          rows,
          [&](Value lr) {
            return Row{scratch.probabilities,
                       mulConst(lr, denseProbabilityRow())};
          },
          scratch.values, g.headDim / 16, /*keyPadding=*/false,
          [&](Value lr, int64_t c, Value acc) {
            Row out = outputRow(w, h, add(qb, lr), discard);
            Value inv =
                broadcast(memref::LoadOp::create(b, invSums, lr), computeType);
            Value result = arith::MulFOp::create(b, acc, inv);
            Value at = add(out.offset, index(c * 16));
            // bf16 is rounded by the CPU's conversion instruction, not the
            // integer arithmetic of arith.truncf's expansion.
            if (getElementTypeOrSelf(out.memref.getType()).isBF16())
              vector::StoreOp::create(
                  b,
                  x86vector::CvtPackedF32ToBF16Op::create(
                      b, VectorType::get({16}, b.getBF16Type()), result),
                  out.memref, at);
            else
              storeVector(result, out.memref, {at}, 16, 16);
          });
    };
  } else {
    emitPackTransposed(Input::Key, w, h, kt,
                       op.getScale().convertToDouble() * kLog2E);
    // Values: read in place from the windows layout, packed from a map
    // (and widened).
    values = flatInputs[2];
    valueBase = mulConst(add(mulConst(w, g.heads), h), g.tokens * g.headDim);
    if (featureMap || widen) {
      values =
          emitPackRows([&](Value j) { return inputRow(Input::Value, w, h, j); },
                       scratch.values);
      valueBase = index(0);
    }
    if (widen) {
      emitPackRows([&](Value i) { return inputRow(Input::Query, w, h, i); },
                   scratch.queries);
      queryRow = [&](Value i) {
        return Row{scratch.queries, mulConst(i, g.headDim)};
      };
    }
    scoreBlock = [&](ArrayRef<Row> queries) {
      return emitScoreBlock(queries, kt, 0, g.computeKeyVectors,
                            /*keyPadding=*/true);
    };
    storeScores = [&](Value qb, Value rows) {
      emitScores(queryRow, kt, scores, qb, rows, /*keyPadding=*/true);
    };
    emitOutputRows = [&](Value qb, Value rows) {
      emitOutput(w, h, scores, invSums, values, valueBase, discard, qb, rows);
    };
  }

  forLoop(index(0), index(g.tokens), g.queryBlock, {},
          [&](Value qb, ValueRange) {
            Value rows = queryBlockRows(qb);
            SoftmaxRowOptions fused = softmax;
            auto produce = [&](Value lr0, int64_t mr) {
              SmallVector<Row> queries;
              for (int64_t m = 0; m < mr; ++m)
                queries.push_back(queryRow(add(qb, add(lr0, index(m)))));
              return splitRows(scoreBlock(queries), mr);
            };
            if (fuseScores) {
              fused.produceScores = produce;
              fused.producedRows = scoreBlockRows(g.computeKeyVectors);
            } else {
              storeScores(qb, rows);
            }
            emitSoftmaxRows(h, image, rtab, labels, scores, invSums, qb, rows,
                            fused);
            emitOutputRows(qb, rows);
            return SmallVector<Value>{};
          });
  if (scope)
    memref::AllocaScopeReturnOp::create(b, ValueRange{});
  return success();
}

} // namespace mlir::rpe::detail
