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
// Query rows are processed in blocks whose scores fit score-block-bytes
// (an L1 budget): the softmax of a row always sees the whole row, so one
// pass suffices and no online rescaling is needed. The steps shared with
// the gradient (BackwardKernel.cpp) are in TileSteps.cpp and, the softmax,
// TileSoftmax.cpp.
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

#include "TileSteps.h"

#include "Kernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"

using namespace mlir;
using namespace mlir::rpe;
using namespace mlir::rpe::detail;

namespace mlir::rpe::detail {

/// Stack scratch of one (window, head) of the tiles kernel.
struct TilesKernel::Scratch {
  Value kt, scores, invSums, queries, values, discard;
  Value probabilities; // bf16 P (AVX512-BF16 products)
};

/// What the steps of one (window, head) item share.
struct TilesKernel::Item {
  explicit Item(const Scratch &scratch) : scratch(scratch) {}

  const Scratch &scratch;
  Value w, h;
  /// The window's index into its mask (maskWindow), or null.
  Value image;
  /// The next item (the last item: itself), whose rows are prefetched.
  Value nextW, nextH;
  /// The FMA form's P·v reads value row j at values[valueBase + j * d]:
  /// in place (windows layout), or packed.
  Value values, valueBase;
  /// The paired form's factor of the f32 scores: scale * log2 e.
  Value scoreScale;
};

TilesKernel::TilesKernel(ImplicitLocOpBuilder &b, FusedAttentionOpInterface op,
                         const KernelGeometry &g,
                         const FusedKernelOptions &options)
    : TileSteps(b, op, g), options(options) {
  avx512 = options.avx512 || options.bf16Dot;
  // The paired products pack keys and values in pairs of tokens of the
  // grid's layout, which has no class token.
  pairs = options.bf16Dot && canPairBf16() && !g.classToken;
  // The micro-kernels read each q element once per row and each v row once
  // per block of rows, and a conversion there costs as much as the FMA it
  // feeds.
  widen = !pairs && !getElementTypeOrSelf(op.getQuery().getType()).isF32();
}

LogicalResult TilesKernel::emit() {
  emitFlatViews();
  FailureOr<ScoreTerms> terms = emitScoreTerms();
  if (failed(terms))
    return failure();
  emitTokenPositions();
  Scratch scratch;
  emitItemLoop(options.hoistScratch ? ItemLoop::ParallelHoistedScratch
                                    : ItemLoop::Parallel,
               [&] { scratch = allocateScratch(); },
               [&](Value item, Value items) {
                 emitItem(item, items, *terms, scratch);
               });
  return success();
}

/// Scratch on the stack: kᵀ, one block of scores, the row sums' inverses
/// (and, for maps, the packed values and a row for cropped outputs; for the
/// paired form, kᵀ and v in pairs and the bf16 probabilities; widened, f32
/// q and v).
TilesKernel::Scratch TilesKernel::allocateScratch() {
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
}

/// One (window, head): its operands packed, then per block of query rows
/// the scores, their softmax and the output rows.
void TilesKernel::emitItem(Value itemIndex, Value items,
                           const ScoreTerms &terms, const Scratch &scratch) {
  Item item(scratch);
  item.w = divConst(itemIndex, g.heads);
  item.h = remConst(itemIndex, g.heads);
  Value next = arith::MinUIOp::create(
      b, add(itemIndex, index(1)), arith::SubIOp::create(b, items, index(1)));
  item.nextW = divConst(next, g.heads);
  item.nextH = remConst(next, g.heads);
  item.image = maskWindow(item.w);
  packOperands(item);
  forLoop(index(0), index(g.tokens), g.queryBlock, {},
          [&](Value qb, ValueRange) {
            emitQueryBlock(item, terms, qb);
            return SmallVector<Value>{};
          });
}

/// The item's operands as the products read them: kᵀ (scaled) and, for
/// maps and widened types, v and q rows in f32 scratch; or, for the paired
/// form, kᵀ and v packed in pairs (PairedBf16.cpp; the scale is then
/// applied to the f32 scores).
void TilesKernel::packOperands(Item &item) {
  const Scratch &scratch = item.scratch;
  if (pairs) {
    emitPackKeyPairs(item.w, item.h, scratch.kt);
    emitPackValuePairs(item.w, item.h, scratch.values);
    item.scoreScale =
        splat(op.getScale().convertToDouble() * kLog2E, computeType);
    return;
  }
  emitPackTransposed(Input::Key, item.w, item.h, scratch.kt,
                     op.getScale().convertToDouble() * kLog2E);
  // Values: read in place from the windows layout, packed from a map (and
  // widened).
  item.values = flatInputs[2];
  item.valueBase = mulConst(add(mulConst(item.w, g.heads), item.h),
                            g.tokens * g.headDim);
  if (featureMap || widen) {
    item.values = emitPackRows(
        [&](Value j) { return inputRow(Input::Value, item.w, item.h, j); },
        scratch.values);
    item.valueBase = index(0);
  }
  if (widen)
    emitPackRows(
        [&](Value i) { return inputRow(Input::Query, item.w, item.h, i); },
        scratch.queries);
}

/// Query row i as the scores' products read it.
TilesKernel::Row TilesKernel::queryRow(const Item &item, Value i) {
  if (widen)
    return Row{item.scratch.queries, mulConst(i, g.headDim)};
  return inputRow(Input::Query, item.w, item.h, i);
}

/// The scores of the rows `queries` against every key, in registers: FMAs
/// on f32, or dot products on bf16 pairs.
SmallVector<Value> TilesKernel::scoreBlock(const Item &item,
                                           ArrayRef<Row> queries) {
  if (pairs)
    return emitPairDotBlock(queries, item.scratch.kt, 0, g.computeKeyVectors,
                            /*keyPadding=*/true);
  return emitScoreBlock(queries, item.scratch.kt, 0, g.computeKeyVectors,
                        /*keyPadding=*/true);
}

/// All scores of the query block from row `qb`, into the scores buffer.
void TilesKernel::storeScores(const Item &item, Value qb, Value rows) {
  Value kt = item.scratch.kt, scores = item.scratch.scores;
  if (!pairs) {
    emitScores([&](Value i) { return queryRow(item, i); }, kt, scores, qb,
               rows, /*keyPadding=*/true);
    return;
  }
  emitPairDotProducts(
      rows, [&](Value lr) { return queryRow(item, add(qb, lr)); }, kt,
      g.computeKeyVectors, /*keyPadding=*/true,
      [&](Value lr, int64_t c, Value acc) {
        vector::StoreOp::create(b, acc, scores,
                                ValueRange{lr, index(c * g.computeLanes)});
      });
}

/// out = P·v / l for the rows of the query block from row `qb`.
void TilesKernel::emitOutputRows(const Item &item, Value qb, Value rows) {
  const Scratch &scratch = item.scratch;
  if (!pairs) {
    emitOutput(item.w, item.h, scratch.scores, scratch.invSums, item.values,
               item.valueBase, scratch.discard, qb, rows);
    return;
  }
  emitPairDotProducts(
      rows,
      [&](Value lr) {
        return Row{scratch.probabilities, mulConst(lr, denseProbabilityRow())};
      },
      scratch.values, g.headDim / 16, /*keyPadding=*/false,
      [&](Value lr, int64_t c, Value acc) {
        storePairedOutputRow(item, qb, lr, c, acc);
      });
}

/// Stores vector c of output row lr (the paired P·v's accumulator) as
/// out = acc / l.
void TilesKernel::storePairedOutputRow(const Item &item, Value qb, Value lr,
                                       int64_t c, Value acc) {
  Row out = outputRow(item.w, item.h, add(qb, lr), item.scratch.discard);
  Value inv = broadcast(memref::LoadOp::create(b, item.scratch.invSums, lr),
                        computeType);
  Value result = arith::MulFOp::create(b, acc, inv);
  Value at = add(out.offset, index(c * 16));
  // bf16 is rounded by the CPU's conversion instruction, not the integer
  // arithmetic of arith.truncf's expansion.
  if (getElementTypeOrSelf(out.memref.getType()).isBF16())
    vector::StoreOp::create(
        b,
        x86vector::CvtPackedF32ToBF16Op::create(
            b, VectorType::get({16}, b.getBF16Type()), result),
        out.memref, at);
  else
    storeVector(result, out.memref, {at}, 16, 16);
}

/// One block of query rows: the scores (from the micro-kernel's registers
/// straight into the softmax when a row's vectors fit the registers:
/// AVX-512, N' up to 128 columns; else through the scores buffer), the
/// softmax, which prefetches the next item's rows, and the output.
void TilesKernel::emitQueryBlock(const Item &item, const ScoreTerms &terms,
                                 Value qb) {
  const Scratch &scratch = item.scratch;
  Value rows = queryBlockRows(qb);
  SoftmaxRowOptions softmax;
  auto prefetchNext = [&](Value i) {
    emitPrefetchRows(item.nextW, item.nextH, i);
  };
  softmax.eachRow = prefetchNext;
  auto storeProbabilities = [&](ArrayRef<Value> probabilities, Value lr) {
    return storeDenseProbabilities(probabilities, scratch.probabilities, lr);
  };
  if (pairs) {
    softmax.scoreScale = item.scoreScale;
    softmax.storeProbabilities = storeProbabilities;
    // Probabilities rounded to bf16 need no more than bf16's accuracy.
    softmax.bf16Exponentials = true;
  }
  auto produce = [&](Value lr0, int64_t mr) {
    SmallVector<Row> queries;
    for (int64_t m = 0; m < mr; ++m)
      queries.push_back(queryRow(item, add(qb, add(lr0, index(m)))));
    return splitRows(scoreBlock(item, queries), mr);
  };
  bool fuseScores = g.registers == 32 && g.computeKeyVectors <= 8;
  if (fuseScores) {
    softmax.produceScores = produce;
    softmax.producedRows = scoreBlockRows(g.computeKeyVectors);
  } else {
    storeScores(item, qb, rows);
  }
  emitSoftmaxRows(item.h, item.image, terms, scratch.scores, scratch.invSums,
                  qb, rows, softmax);
  emitOutputRows(item, qb, rows);
}

/// out[w, i, h*d + e] = (sum_j P[i, j'] * v[w, h, j, e]) / l_i, reduced
/// over the (unpadded) keys. Value row j is at `values[valueBase + j * d]`.
void TilesKernel::emitOutput(Value w, Value h, Value scores,
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
void TilesKernel::emitPrefetchRows(Value w, Value h, Value token) {
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

LogicalResult emitTilesKernel(ImplicitLocOpBuilder &b,
                              FusedAttentionOpInterface op,
                              const KernelGeometry &g,
                              const FusedKernelOptions &options) {
  return TilesKernel(b, op, g, options).emit();
}

} // namespace mlir::rpe::detail
