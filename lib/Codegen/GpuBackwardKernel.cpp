//===- GpuBackwardKernel.cpp - the GPU kernel of the attention's gradient -===//
//
// The gradient of the fused attention (rpe.fused_window_attention_grad) on
// the GPU. One block computes one (window b, head h), N tokens of d
// channels: it keeps the window in shared memory and recomputes the
// forward's probabilities from q, k and the table. Two forms: f16 and bf16
// (and f32 with f32-mma, as bf16 terms) with head_dim a multiple of 16 take
// the products on tensor cores, a block of up to four warps (the
// tensor-core form: GpuBackwardTiles.cpp); f32, other head_dims, sm_75 and
// windows whose tiles do not fit the shared memory take the lane form, a
// block of one warp, the one described here. This file has what the two
// share too: the launches, the staging and the table gradient's reduction.
// In base 2, as the forward (log2 e folded into the scale, the table and
// the mask value), with P(t) the table offset of token t and c = (T - 1) / 2:
//
//   shared: q, k, v, dout (N x d, the element type), R = table[:, h] log2 e,
//           per token P(t) and its region label, G = 0 (T, f32)
//   a lane per query row i (L lanes, below):       softmaxStatistics
//     s_ij  = scale log2 e (q_i · k_j) + R[P(i) - P(j) + c]
//             (+ mask log2 e where the labels of i and j differ)
//     lse_i = m + log2 sum_j 2^(s_ij - m)      online: m the running max
//     D_i   = dout_i · out_i                   D = rowsum(dout ∘ out)
//   the same lane, for j = 0 .. N-1 in order:      gradientOfQueriesAndTable
//     p_ij  = 2^(s_ij - lse_i)                 the forward's P
//     dp_ij = dout_i · v_j                     dP = dout vᵀ
//     ds_ij = p_ij (dp_ij - D_i)               dS = P ∘ (dP - D)
//     dq_i += ds_ij k_j, then dq_i *= scale    dq = scale dS k
//     G[P(i) - P(j) + c] += ds_ij              the table's gradient
//   a lane per key j, for i = 0 .. N-1 in order:   gradientOfKeysAndValues
//     p_ij, ds_ij as above (the same operations on the same operands)
//     dv_j += p_ij dout_i                      dv = Pᵀ dout
//     dk_j += ds_ij q_i, then dk_j *= scale    dk = scale dSᵀ q
//   partials[b H + h, :] = G                       storeTableGradient
//
// and a second kernel sums the items' partials per table entry, over the
// windows in a fixed order (reduceTableGradients):
//
//   dtable[t, h] = sum_b partials[b H + h, t]          (f32)
//
// With BEiT's class token (token 0) P is that of the grid positions, and
// the class token's row and column read and add to R and G at T, T + 1
// and T + 2 (class -> token, token -> class, class -> class:
// KernelEmitter::classTokenEntry); the partials have the T + 3 rows.
//
// The table's gradient without atomics, the same bits on every run: for a
// fixed j the warp's lanes hold different rows i (one lane of each row
// adds), and P is one-to-one, so they add to different entries of G; the
// steps of the j loop are ordered by the warp's barrier. Each entry of G
// thus receives its terms in one order (by rounds of rows, then by j; the
// class key's column, whose rows share T + 1, by a fixed sum over the warp
// first: addToTableGradient), and
// each entry of dtable its partials: each warp of a reduction block sums a
// fixed range of windows in order, then the block's first warp sums the
// warps' results in order.
//
// Nothing N x N is kept: the key pass recomputes s, p and ds (2d FMAs per
// pair more than storing P and dS, whose 2 N^2 floats would take the shared
// memory of a Swin-T block), so that a window of 144 tokens (82 KB in f32)
// still fits a block: in static shared memory up to 48 KiB, beyond it in
// dynamic shared memory up to the chip's opt-in limit (227 KiB on sm_90). lse
// and D, N floats each, carry the rows' softmax from the query pass to the key
// pass.
//
// "A lane per row" is L lanes per row (or key) where d > 16: each holds
// ceil(d / L) of the channels, and the dot products end in a butterfly of
// L - 1 shuffles, which gives all L lanes the same bits; the row's first
// lane writes what they share. A lane's rows and sums (6d / L floats in the
// key pass) then fit its registers, and the loops over rows and keys are
// kept rolled (ptxas would unroll and interleave them, and spill). Every
// product is a lane's f32 FMA. q, k, v and dout sit in
// shared memory as they are (f16, bf16 or f32), in rows of an odd number of
// 32-bit words, so that lanes reading the same word of different rows hit
// different banks; a row the whole warp reads is a broadcast.
//
// The same program runs on the host with each warp emulated by a vector of
// its 32 lanes (Warp.h): the items in the item loop (rpe-item-range gives a
// caller's thread a range of them; the other items' partials stay zero), a
// block's warps one after another in each pass (forEachWarp: where the GPU
// has a block barrier between passes), the reduction's blocks and warps in
// loops, the partials in a buffer of the host's.
//
//===----------------------------------------------------------------------===//

#include "GpuBackwardKernel.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <limits>

using namespace mlir;
using namespace mlir::rpe;
using namespace mlir::rpe::detail;

/// Warps of a block of the reduction, each summing a range of the windows.
static constexpr int64_t kReductionWarps = 8;
/// Warps of a block of the tensor-core form, at most: one item's, sharing
/// its staged window.
static constexpr int64_t kMaxBackwardWarps = 4;

/// The shared buffers of a backward of `shape`'s form and row layout.
static SmallVector<SharedBuffer, 12>
getGpuBackwardBuffers(const GpuBackwardShape &shape, FusedAttentionOpInterface op) {
  int64_t n = shape.paddedTokens;
  int64_t tableRows = getNumTableRows(op.getWindow(), op.getClassToken());
  int64_t rows = n * shape.rowStride;
  Type f32 = Float32Type::get(op.getContext());
  Type i32 = IntegerType::get(op.getContext(), 32);
  // The tensor-core form keeps per warp two partial table gradients (a
  // half-warp each) and a tile of dS.
  int64_t tableGradients =
      shape.tensorCores ? 2 * shape.warps * tableRows : tableRows;
  SmallVector<SharedBuffer, 12> buffers = {
      {"grad_queries", rows, shape.element, 16},
      {"grad_keys", rows, shape.element, 16},
      {"grad_values", rows, shape.element, 16},
      {"grad_output_gradients", rows, shape.element, 16},
      {"grad_table", tableRows, f32, 16},
      {"grad_token_offsets", n, i32, 16},
      {"grad_token_labels", n, i32, 16},
      {"grad_log_sum_exp", n, f32, 16},
      {"grad_delta", n, f32, 16},
      {"grad_table_gradient", tableGradients, f32, 16}};
  if (shape.tensorCores)
    buffers.push_back({"grad_score_gradients",
                       shape.warps * 16 * kScoreTileStride, f32, 16});
  if (shape.keepsScoreGradients)
    buffers.push_back({"grad_window_score_gradients",
                       n * shape.windowScoreStride, shape.element, 16});
  return buffers;
}

/// The shape of the GPU backward of `op`; failure, with an error on the op,
/// when its window does not fit the shared memory a block may have on
/// chips of SM version `smVersion`.
static FailureOr<GpuBackwardShape>
getGpuBackwardShape(FusedAttentionOpInterface op, unsigned smVersion,
                    F32Mma f32Mma) {
  GpuBackwardShape shape;
  shape.element = getElementTypeOrSelf(op.getQuery().getType());
  int64_t bytes = shape.element.getIntOrFloatBitWidth() / 8;
  int64_t n = op.getNumTokens(), d = op.getHeadDim();
  // Up to 48 KiB static shared memory, beyond it dynamic (createSharedBuffers)
  // up to what the chip lets a block opt in to.
  int64_t limit = getMaxSharedBytesPerBlock(smVersion);
  // Up to 16 channels per lane: a lane's rows and sums (6 of them in the
  // query pass) then stay in its registers.
  shape.lanesPerRow = d <= 16 ? 1 : d <= 32 ? 2 : 4;
  shape.rowsPerRound = kWarpSize / shape.lanesPerRow;
  shape.laneChannels = llvm::divideCeil(d, shape.lanesPerRow);

  // The tensor-core form: rows padded to 16 tokens with zeros, a stride of
  // d + 8 elements (the forward's: the 8 rows x 4 column pairs of a
  // fragment load fall in distinct banks; f32 rows, d + 4, leave two-way
  // conflicts). Chips without m16n8k16 tiles (sm_75) take the lane form.
  shape.operand = shape.element;
  if (shape.element.isF32() && f32Mma != F32Mma::None) {
    shape.operand = BFloat16Type::get(op.getContext());
    shape.operandTerms = f32Mma == F32Mma::Bf16x3 ? 2 : 3;
  }
  shape.tensorCores = hasMmaM16N8K16(smVersion) &&
                      (shape.operand.isF16() || shape.operand.isBF16()) &&
                      d % 16 == 0;
  if (shape.tensorCores) {
    shape.paddedTokens = llvm::alignTo(n, 16);
    shape.rowStride = d + kChunkBytes / bytes;
    // Up to 4 warps, each with its share of the tiles in every pass: an
    // even share where 4 or 3 warps give one.
    int64_t tiles = shape.paddedTokens / 16;
    shape.warps = std::min<int64_t>(tiles, kMaxBackwardWarps);
    if (tiles % shape.warps != 0 && tiles % 3 == 0)
      shape.warps = 3;
    // The window's dS kept for the query pass where the block then stays
    // within the static 48 KiB; a stride of N' + 8 elements (N' + 4 in f32)
    // as the rows', for the A fragments' loads.
    shape.windowScoreStride = shape.paddedTokens + kChunkBytes / bytes;
    for (bool keep : {true, false}) {
      shape.keepsScoreGradients = keep;
      shape.sharedBuffers = getGpuBackwardBuffers(shape, op);
      shape.sharedBytes = layoutSharedBuffers(shape.sharedBuffers).bytes;
      if (keep ? shape.sharedBytes <= kStaticSharedBytesPerBlock
               : shape.sharedBytes <= limit)
        return shape;
    }
    shape.windowScoreStride = 0;
    shape.tensorCores = false;
    shape.warps = 1;
  }

  // The lane form: an odd number of 32-bit words per row, so that lanes
  // reading word e of different rows hit different banks.
  shape.paddedTokens = n;
  int64_t words = llvm::divideCeil(d * bytes, 4);
  if (words % 2 == 0)
    ++words;
  shape.rowStride = words * 4 / bytes;
  shape.sharedBuffers = getGpuBackwardBuffers(shape, op);
  shape.sharedBytes = layoutSharedBuffers(shape.sharedBuffers).bytes;
  if (shape.sharedBytes > limit)
    return op.emitOpError("has no GPU backward: its window's q, k, v and "
                          "dout (")
           << n << " tokens of " << d << " channels) take " << shape.sharedBytes
           << " bytes of shared memory, more than the " << limit
           << " a block may have on sm_" << smVersion;
  return shape;
}

namespace mlir::rpe::detail {

/// Query row i = lane + 32 r of a lane: its q and dout (f32), its table
/// offset P(i) and label, lse_i and D_i. Rows past N compute row N - 1
/// (`token`) and store nothing (`isRow`).
struct GpuBackwardKernel::QueryRow {
  Value isRow, token;
  SmallVector<Value> query, outputGradient;
  Value tableOffset, label, logSumExp, delta;
  Value isClass; // BEiT: row i is the class token (i1; null without one)
};

} // namespace mlir::rpe::detail

LogicalResult GpuBackwardKernel::emit(KernelTarget target, bool hoistScratch) {
  ArrayRef<SharedBuffer> buffers = shape.sharedBuffers;
  auto scratchOf = [](ArrayRef<Value> m) {
    Scratch scratch{m[0], m[1], m[2], m[3], m[4],
                    m[5], m[6], m[7], m[8], m[9], Value(), Value()};
    if (m.size() > 10)
      scratch.scoreGradients = m[10];
    if (m.size() > 11)
      scratch.windowScoreGradients = m[11];
    return scratch;
  };
  // The items' partial table gradients, [items, T] f32.
  auto partialsType = MemRefType::get({ShapedType::kDynamic, g.tableRows}, f32);

  if (target == KernelTarget::Host) {
    Value partials =
        memref::AllocOp::create(b, partialsType, ValueRange{countItems()});
    // A caller that runs a range of the items (rpe-item-range) leaves the
    // others' partials at zero.
    Value zero = arith::ConstantOp::create(b, b.getF32FloatAttr(0.0));
    forLoop(
        index(0), memref::DimOp::create(b, partials, 0), 1, {},
        [&](Value item, ValueRange) {
          forLoop(
              index(0), index(g.tableRows), 1, {}, [&](Value t, ValueRange) {
                memref::StoreOp::create(b, zero, partials, ValueRange{item, t});
                return SmallVector<Value>{};
              });
          return SmallVector<Value>{};
        });
    SmallVector<Value> memrefs;
    emitItemLoop(
        hoistScratch ? ItemLoop::ParallelHoistedScratch : ItemLoop::Parallel,
        [&] {
          memrefs.clear();
          for (const SharedBuffer &buffer : buffers)
            memrefs.push_back(memref::AllocaOp::create(
                b, MemRefType::get({buffer.elements}, buffer.element)));
        },
        [&](Value item, Value) {
          Warp warp(b, /*emulated=*/true);
          emitItem(warp, item, scratchOf(memrefs), partials, Value());
        });
    reduceTableGradients(partials, target);
    memref::DeallocOp::create(b, partials);
    return success();
  }

  // The partials in device memory, by the asynchronous forms of gpu.alloc
  // and gpu.dealloc that gpu-to-llvm lowers (each waited for at once).
  // swin-aot's host runtime allocates them itself, on the caller's stream.
  SharedMemory shared = createSharedBuffers(buffers);
  Type token = gpu::AsyncTokenType::get(b.getContext());
  auto allocation = gpu::AllocOp::create(
      b, partialsType, token,
      ValueRange{gpu::WaitOp::create(b, token, ValueRange{}).getAsyncToken()},
      ValueRange{countItems()}, ValueRange{});
  gpu::WaitOp::create(b, Type(), ValueRange{allocation.getAsyncToken()});
  Value partials = allocation.getMemref();
  std::optional<Scratch> scratch;
  emitItemLaunch(
      /*itemsPerBlock=*/1, shape.warps * kWarpSize,
      [&](Value) { scratch = scratchOf(getSharedBuffers(shared)); },
      [&](Value item, Value thread) {
        Warp warp(b, /*emulated=*/false);
        emitItem(warp, item, *scratch, partials, divConst(thread, kWarpSize));
      },
      shared.dynamicBytes);
  reduceTableGradients(partials, target);
  auto deallocation = gpu::DeallocOp::create(
      b, token,
      ValueRange{gpu::WaitOp::create(b, token, ValueRange{}).getAsyncToken()},
      partials);
  gpu::WaitOp::create(b, Type(), ValueRange{deallocation.getAsyncToken()});
  return success();
}

void GpuBackwardKernel::emitViews(Value partials) {
  flatInputs.clear();
  emitOperandViews(/*withPaddingRows=*/false);
  Value table = op.getTable();
  // A baked table (a constant global) is read where the kernel is, so that
  // the outlined kernel refers to the global rather than taking it.
  if (auto global = table.getDefiningOp<memref::GetGlobalOp>())
    table = b.clone(*global)->getResult(0);
  flatTable = flatten(b, b.getLoc(), table);
  flatOutputGradient = flatten(b, b.getLoc(), grad.getDout());
  flatGradients.clear();
  for (Value gradient : {grad.getDquery(), grad.getDkey(), grad.getDvalue()})
    flatGradients.push_back(flatten(b, b.getLoc(), gradient));
  flatPartials = flatten(b, b.getLoc(), partials);
}

void GpuBackwardKernel::forEachLaneElement(
    Item &item, int64_t count, function_ref<void(Value, Value)> body) {
  // The block's W warps take turns: element lane + 32 (w + W s) in step s.
  int64_t warps = shape.warps;
  rolledLoop(index(0), index(llvm::divideCeil(count, kWarpSize * warps)), {},
             [&](Value step, ValueRange) {
               Value slot = add(item.warpIndex, mulConst(step, warps));
               Value t = add(item.lane, mulConst(slot, kWarpSize));
               body(t, compare(arith::CmpIPredicate::ult, t, index(count)));
               return SmallVector<Value>{};
             });
}

ValueRange GpuBackwardKernel::rolledLoop(
    Value lb, Value ub, ValueRange init,
    function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  ValueRange results = forLoop(lb, ub, 1, init, body);
  Operation *loop = results.empty() ? &*std::prev(b.getInsertionPoint())
                                    : results.front().getDefiningOp();
  MLIRContext *context = b.getContext();
  auto unroll = LLVM::LoopUnrollAttr::get(context, b.getBoolAttr(true), {}, {},
                                          {}, {}, {}, {});
  // scf-to-cf puts the loop's attributes on its back edge, where llvm.br
  // takes this one as its loop annotation (LLVM's !llvm.loop).
  loop->setAttr("loop_annotation", LLVM::LoopAnnotationAttr::get(
                                       context, {}, {}, {}, unroll, {}, {}, {},
                                       {}, {}, {}, {}, {}, {}, {}, {}));
  return results;
}

void GpuBackwardKernel::forEachRound(function_ref<void(Value)> body) {
  rolledLoop(index(0), index(llvm::divideCeil(g.tokens, shape.rowsPerRound)),
             {}, [&](Value round, ValueRange) {
               body(round);
               return SmallVector<Value>{};
             });
}

Value GpuBackwardKernel::dot(Item &item, ArrayRef<Value> x, ArrayRef<Value> y) {
  Value sum = item.zero;
  for (auto [a, c] : llvm::zip_equal(x, y))
    sum = math::FmaOp::create(b, a, c, sum);
  // Addition commutes: the two lanes of each exchange add the same values.
  for (int64_t offset = 1; offset < shape.lanesPerRow; offset *= 2)
    sum = arith::AddFOp::create(b, sum, item.warp.shuffleXor(sum, offset));
  return sum;
}

Value GpuBackwardKernel::laneChannel(Item &item, int64_t e) {
  return add(mulConst(item.part, shape.laneChannels), index(e));
}

Value GpuBackwardKernel::isChannel(Item &item, int64_t e) {
  // Only the last share of an uneven split runs past d.
  if (shape.laneChannels * shape.lanesPerRow == g.headDim)
    return Value();
  return compare(arith::CmpIPredicate::ult, laneChannel(item, e),
                 index(g.headDim));
}

Value GpuBackwardKernel::firstOfShare(Value total, int64_t parts, Value part) {
  Value quotient = divConst(total, parts);
  Value remainder = remConst(total, parts);
  return add(mul(part, quotient),
             arith::MinUIOp::create(b, part, remainder).getResult());
}

/// Copies the window's N token rows into `dest` (a row per rowStride
/// elements), the lanes over its N x d elements; `source(token)` gives a
/// token's row: its flat view and address (padding tokens read zeros).
/// kLoadsInFlight steps of the warp per iteration of the (rolled) loop,
/// their loads issued before their stores: with one load in flight per
/// lane the staging would wait on memory's latency at every step.
void GpuBackwardKernel::stageRows(Item &item, Value dest,
                                  const RowSource &source) {
  static constexpr int64_t kLoadsInFlight = 8;
  const int64_t d = g.headDim, count = g.tokens * d;
  // Element lane + 32 (w + W s) in step s, as forEachLaneElement's.
  int64_t steps = llvm::divideCeil(count, kWarpSize * shape.warps);
  int64_t groups = llvm::divideCeil(steps, kLoadsInFlight);
  rolledLoop(index(0), index(groups), {}, [&](Value group, ValueRange) {
    struct Loaded {
      Value element, at, valid;
    };
    SmallVector<Loaded, kLoadsInFlight> loaded;
    for (int64_t s = 0; s < kLoadsInFlight; ++s) {
      Value step = add(mulConst(group, kLoadsInFlight), index(s));
      Value slot = add(item.warpIndex, mulConst(step, shape.warps));
      Value f = add(item.lane, mulConst(slot, kWarpSize));
      Value valid = compare(arith::CmpIPredicate::ult, f, index(count));
      Value token = minConst(divConst(f, d), g.tokens - 1);
      Value e = remConst(f, d);
      auto [flat, row] = source(token);
      Value mask =
          row.valid ? arith::AndIOp::create(b, valid, row.valid) : valid;
      loaded.push_back({item.warp.load(flat, add(row.offset, e), mask),
                        add(mulConst(token, shape.rowStride), e), valid});
    }
    for (const Loaded &element : loaded)
      item.warp.store(element.element, dest, element.at, element.valid);
    return SmallVector<Value>{};
  });
}

/// Copies the window's N token rows of each source into its destination
/// (a row per rowStride elements) in 16-byte chunks: d / width lanes per
/// row, the block's warps taking turns, the loads of up to
/// kChunksInFlight (source, step) pairs issued before their stores (the
/// kernel waits on memory: what counts is the bytes in flight). Padding
/// tokens read zeros.
void GpuBackwardKernel::stageRowChunks(
    Item &item, ArrayRef<std::pair<Value, RowSource>> destsAndSources) {
  static constexpr int64_t kChunksInFlight = 8;
  Warp &warp = item.warp;
  const int64_t n = g.tokens;
  int64_t width = kChunkBytes * 8 / shape.element.getIntOrFloatBitWidth();
  int64_t lanesPerRow = g.headDim / width;
  int64_t rowsPerStep = kWarpSize / lanesPerRow;
  Value rowInStep = divConst(item.lane, lanesPerRow);
  Value column = mulConst(remConst(item.lane, lanesPerRow), width);
  // Lanes past the last whole row of a step (32 not a multiple of d /
  // width) move nothing.
  Value activeLane =
      rowsPerStep * lanesPerRow < kWarpSize
          ? compare(arith::CmpIPredicate::ult, item.lane,
                    index(rowsPerStep * lanesPerRow))
          : Value();
  int64_t steps = llvm::divideCeil(n, rowsPerStep * shape.warps);
  struct Move {
    Value dest, row, isRow;
    SmallVector<Value> chunk;
  };
  SmallVector<std::pair<int64_t, int64_t>> work; // (source, step)
  for (int64_t source = 0; source < int64_t(destsAndSources.size()); ++source)
    for (int64_t step = 0; step < steps; ++step)
      work.push_back({source, step});
  for (size_t first = 0; first < work.size(); first += kChunksInFlight) {
    SmallVector<Move> moves;
    for (auto [source, step] : ArrayRef(work).slice(
             first, std::min<size_t>(kChunksInFlight, work.size() - first))) {
      const auto &[dest, rowOf] = destsAndSources[source];
      Move move;
      move.dest = dest;
      move.row = add(rowInStep,
                     mulConst(add(item.warpIndex, index(step * shape.warps)),
                              rowsPerStep));
      move.isRow = compare(arith::CmpIPredicate::ult, move.row, index(n));
      if (activeLane)
        move.isRow = arith::AndIOp::create(b, move.isRow, activeLane);
      auto [flat, address] = rowOf(minConst(move.row, n - 1));
      Value mask = address.valid
                       ? arith::AndIOp::create(b, move.isRow, address.valid)
                       : move.isRow;
      move.chunk =
          warp.loadChunk(flat, add(address.offset, column), width, mask);
      moves.push_back(std::move(move));
    }
    for (const Move &move : moves)
      warp.storeChunk(move.chunk, move.dest,
                      add(mulConst(move.row, shape.rowStride), column),
                      move.isRow);
  }
}

/// The head's table times log2 e; per token its table offset P(t) and
/// region label; G = 0; then the window's rows of q, k, v and dout.
void GpuBackwardKernel::stageWindow(Item &item) {
  Warp &warp = item.warp;
  const Scratch &scratch = item.scratch;
  Value log2e = warp.constant(kLog2E, f32);
  forEachLaneElement(item, g.tableRows, [&](Value t, Value valid) {
    Value entry =
        toF32(warp.load(flatTable, add(mulConst(t, g.heads), item.h), valid));
    warp.store(arith::MulFOp::create(b, entry, log2e), scratch.table, t, valid);
    // The tensor-core form's 2 W copies of G.
    int64_t copies = shape.tensorCores ? 2 * shape.warps : 1;
    for (int64_t copy = 0; copy < copies; ++copy)
      warp.store(item.zero, scratch.tableGradient,
                 add(t, index(copy * g.tableRows)), valid);
  });
  // Padding tokens (the tensor-core form's, past N) have the last token's
  // offset and the label -1.
  forEachLaneElement(item, shape.paddedTokens, [&](Value t, Value valid) {
    Value token = minConst(t, g.tokens - 1);
    warp.store(toI32(gridTableOffset(token)), scratch.tokenOffsets, t, valid);
    Value label =
        item.windowInImage ? regionLabel(item.windowInImage, token) : index(0);
    if (shape.paddedTokens != g.tokens)
      label = select(compare(arith::CmpIPredicate::uge, t, index(g.tokens)),
                     index(-1), label);
    warp.store(toI32(label), scratch.tokenLabels, t, valid);
  });
  auto input = [&](Input which) {
    return [&, which](Value token) {
      return std::make_pair(flatInputs[static_cast<int>(which)],
                            rowAddress(item.w, item.h, token, which));
    };
  };
  // dout is in out's layout.
  auto outputGradient = [&](Value token) {
    return std::make_pair(flatOutputGradient,
                          outputAddress(item.w, item.h, token));
  };
  SmallVector<std::pair<Value, RowSource>, 4> rows = {
      {scratch.queries, input(Input::Query)},
      {scratch.keys, input(Input::Key)},
      {scratch.values, input(Input::Value)},
      {scratch.outputGradients, outputGradient}};
  // Rows of whole 16-byte chunks (the tensor-core form's, up to 32 chunks)
  // move a chunk per lane; others an element per lane.
  int64_t rowBytes = g.headDim * shape.element.getIntOrFloatBitWidth() / 8;
  if (shape.tensorCores && rowBytes % kChunkBytes == 0 &&
      rowBytes <= kWarpSize * kChunkBytes)
    stageRowChunks(item, rows);
  else
    for (auto &[dest, source] : rows)
      stageRows(item, dest, source);
  if (shape.tensorCores) {
    // Zero rows past N, which the tiles read.
    const int64_t d = g.headDim;
    Value zero = convertFloat(item.zero, shape.element);
    forEachLaneElement(
        item, (shape.paddedTokens - g.tokens) * d, [&](Value f, Value valid) {
          Value at = add(mulConst(add(divConst(f, d), index(g.tokens)),
                                  shape.rowStride),
                         remConst(f, d));
          for (Value rows : {scratch.queries, scratch.keys, scratch.values,
                             scratch.outputGradients})
            warp.store(zero, rows, at, valid);
        });
  }
  warp.sync();
}

SmallVector<Value> GpuBackwardKernel::loadRow(Item &item, Value rows,
                                              Value token) {
  Value base = mulConst(token, shape.rowStride);
  SmallVector<Value> row;
  for (int64_t e = 0; e < shape.laneChannels; ++e)
    row.push_back(toF32(item.warp.load(rows, add(base, laneChannel(item, e)),
                                       isChannel(item, e))));
  return row;
}

Value GpuBackwardKernel::tableEntry(Item &item, const PairOperands &pair) {
  Value center = item.warp.broadcast(
      arith::ConstantOp::create(b, b.getI32IntegerAttr(g.center)));
  Value entry = arith::SubIOp::create(
      b, arith::AddIOp::create(b, pair.rowOffset, center), pair.keyOffset);
  return classTokenEntry(pair.rowIsClass, pair.keyIsClass,
                         arith::IndexCastOp::create(
                             b, item.warp.laneType(b.getIndexType()), entry),
                         index(0));
}

Value GpuBackwardKernel::isClassToken(Value token) {
  if (!g.classToken)
    return Value();
  return compare(arith::CmpIPredicate::eq, token, index(0));
}

void GpuBackwardKernel::addToTableGradient(Item &item, const QueryRow &row,
                                           const PairOperands &pair, Value ds) {
  Warp &warp = item.warp;
  const Scratch &scratch = item.scratch;
  Value isWriter = arith::AndIOp::create(b, row.isRow, item.isFirstPart);
  // One lane per row adds: the rows' entries differ (P is one-to-one). The
  // barrier orders this step's additions after the previous step's.
  auto addAt = [&](Value entry, Value value, Value mask) {
    Value sum = arith::AddFOp::create(
        b, warp.load(scratch.tableGradient, entry, mask), value);
    warp.store(sum, scratch.tableGradient, entry, mask);
  };
  if (!g.classToken) {
    addAt(tableEntry(item, pair), ds, isWriter);
    warp.sync();
    return;
  }
  // BEiT's class key: every grid row's term goes to the one entry T + 1
  // (token -> class), so the warp sums them first (a butterfly: the same
  // bits in every lane) and its first lane adds the sum; the class row's
  // own term goes to T + 2. Other keys (the shared key is uniform) take
  // the entries of one-to-one P as above, the class row's T.
  auto ifClassKey = scf::IfOp::create(b, pair.keyIsClass,
                                      /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifClassKey.getThenRegion().front());
    Value term =
        select(isWriter, select(row.isClass, item.zero, ds), item.zero);
    for (int64_t offset = 1; offset < kWarpSize; offset *= 2)
      term = arith::AddFOp::create(b, term, warp.shuffleXor(term, offset));
    Value tokenToClass = index(g.gridTableRows + 1);
    Value classToClass = index(g.gridTableRows + 2);
    addAt(warp.broadcast(tokenToClass), term,
          compare(arith::CmpIPredicate::eq, item.lane, index(0)));
    addAt(warp.broadcast(classToClass), ds,
          arith::AndIOp::create(b, isWriter, row.isClass));
    b.setInsertionPointToStart(&ifClassKey.getElseRegion().front());
    addAt(tableEntry(item, pair), ds, isWriter);
  }
  warp.sync();
}

/// s = scale log2 e (q_i · k_j) + R[P(i) - P(j) + c] (+ mask log2 e where
/// the region labels of i and j differ).
Value GpuBackwardKernel::score(Item &item, const PairOperands &pair) {
  return scoreOf(item, pair, dot(item, pair.query, pair.key));
}

Value GpuBackwardKernel::scoreOf(Item &item, const PairOperands &pair,
                                 Value product) {
  Value s = biasedScore(item, pair, product);
  if (item.windowInImage)
    s = arith::AddFOp::create(b, s, maskTerm(item, pair));
  return s;
}

Value GpuBackwardKernel::biasedScore(Item &item, const PairOperands &pair,
                                     Value product) {
  Value bias = item.warp.load(item.scratch.table, tableEntry(item, pair));
  return math::FmaOp::create(b, product, item.scaleLog2e, bias);
}

Value GpuBackwardKernel::maskTerm(Item &item, const PairOperands &pair) {
  Value differ = arith::CmpIOp::create(b, arith::CmpIPredicate::ne,
                                       pair.rowLabel, pair.keyLabel);
  return arith::SelectOp::create(b, differ, item.maskLog2e, item.zero);
}

SmallVector<Value> GpuBackwardKernel::addShiftMask(Item &item,
                                                   ArrayRef<PairOperands> pairs,
                                                   ValueRange scores) {
  if (!item.windowInImage)
    return SmallVector<Value>(scores);
  return maskedUnlessOneRegion(item.oneRegion, scores, [&](ValueRange s) {
    SmallVector<Value> masked;
    for (auto [score, pair] : llvm::zip_equal(s, pairs))
      masked.push_back(arith::AddFOp::create(b, score, maskTerm(item, pair)));
    return masked;
  });
}

/// p = 2^(s - lse_i).
Value GpuBackwardKernel::probability(Item &item, const PairOperands &pair) {
  Value s = score(item, pair);
  return math::Exp2Op::create(b, arith::SubFOp::create(b, s, pair.logSumExp));
}

/// p, dp = dout_i · v_j and ds = p (dp - D_i): every pass computes them
/// here, in the same order, so that the key passes' P and dS are the query
/// pass's.
GpuBackwardKernel::PairGradient
GpuBackwardKernel::pairGradient(Item &item, const PairOperands &pair) {
  Value p = probability(item, pair);
  Value dp = dot(item, pair.outputGradient, pair.value);
  Value ds =
      arith::MulFOp::create(b, p, arith::SubFOp::create(b, dp, pair.delta));
  return {p, ds};
}

GpuBackwardKernel::QueryRow GpuBackwardKernel::loadQueryRow(Item &item,
                                                            Value round) {
  Warp &warp = item.warp;
  QueryRow row;
  Value i = add(item.slot, mulConst(round, shape.rowsPerRound));
  row.isRow = compare(arith::CmpIPredicate::ult, i, index(g.tokens));
  row.token = minConst(i, g.tokens - 1);
  row.query = loadRow(item, item.scratch.queries, row.token);
  row.outputGradient = loadRow(item, item.scratch.outputGradients, row.token);
  row.tableOffset = warp.load(item.scratch.tokenOffsets, row.token);
  row.label = warp.load(item.scratch.tokenLabels, row.token);
  row.isClass = isClassToken(row.token);
  return row;
}

/// lse_i = m + log2 sum_j 2^(s_ij - m), by an online softmax over the keys
/// (m the running max, from the lowest finite float as the forward's); D_i
/// = dout_i · out_i, out_i read from the output (zero for padding tokens,
/// whose dout is zero too). Both go to shared memory for the key pass.
void GpuBackwardKernel::softmaxStatistics(Item &item, QueryRow &row) {
  Warp &warp = item.warp;
  RowAddress outRow = outputAddress(item.w, item.h, row.token);
  SmallVector<Value> out;
  for (int64_t e = 0; e < shape.laneChannels; ++e) {
    Value mask = isChannel(item, e);
    if (outRow.valid)
      mask = mask ? arith::AndIOp::create(b, mask, outRow.valid).getResult()
                  : outRow.valid;
    out.push_back(toF32(
        warp.load(flatOutput, add(outRow.offset, laneChannel(item, e)), mask)));
  }
  row.delta = dot(item, row.outputGradient, out);

  Value initialMax = warp.constant(kOnlineSoftmaxInitialMax, f32);
  ValueRange state = rolledLoop(
      index(0), index(g.tokens), {initialMax, item.zero},
      [&](Value j, ValueRange carried) {
        Value max = carried[0], sum = carried[1];
        PairOperands pair;
        SmallVector<Value> key = loadRow(item, item.scratch.keys, j);
        pair.query = row.query;
        pair.key = key;
        pair.rowOffset = row.tableOffset;
        pair.keyOffset = warp.loadUniform(item.scratch.tokenOffsets, j);
        pair.rowLabel = row.label;
        pair.keyLabel = warp.loadUniform(item.scratch.tokenLabels, j);
        pair.rowIsClass = row.isClass;
        pair.keyIsClass = isClassToken(j);
        Value s = score(item, pair);
        Value next = arith::MaximumFOp::create(b, max, s);
        Value correction =
            math::Exp2Op::create(b, arith::SubFOp::create(b, max, next));
        Value p = math::Exp2Op::create(b, arith::SubFOp::create(b, s, next));
        return SmallVector<Value>{next,
                                  math::FmaOp::create(b, sum, correction, p)};
      });
  row.logSumExp =
      arith::AddFOp::create(b, state[0], math::Log2Op::create(b, state[1]));
  Value isWriter = arith::AndIOp::create(b, row.isRow, item.isFirstPart);
  warp.store(row.logSumExp, item.scratch.logSumExp, row.token, isWriter);
  warp.store(row.delta, item.scratch.delta, row.token, isWriter);
}

/// Per key j in order: p, ds; dq_i += ds k_j; G[P(i) - P(j) + c] += ds.
/// Then dq_i (times scale) to its row.
void GpuBackwardKernel::gradientOfQueriesAndTable(Item &item,
                                                  const QueryRow &row) {
  Warp &warp = item.warp;
  SmallVector<Value> initial(shape.laneChannels, item.zero);
  ValueRange dq = rolledLoop(
      index(0), index(g.tokens), initial, [&](Value j, ValueRange carried) {
        SmallVector<Value> key = loadRow(item, item.scratch.keys, j);
        SmallVector<Value> value = loadRow(item, item.scratch.values, j);
        PairOperands pair;
        pair.query = row.query;
        pair.key = key;
        pair.value = value;
        pair.outputGradient = row.outputGradient;
        pair.rowOffset = row.tableOffset;
        pair.keyOffset = warp.loadUniform(item.scratch.tokenOffsets, j);
        pair.rowLabel = row.label;
        pair.keyLabel = warp.loadUniform(item.scratch.tokenLabels, j);
        pair.logSumExp = row.logSumExp;
        pair.delta = row.delta;
        pair.rowIsClass = row.isClass;
        pair.keyIsClass = isClassToken(j);
        PairGradient gradient = pairGradient(item, pair);
        SmallVector<Value> next;
        for (auto [acc, k] : llvm::zip_equal(carried, key))
          next.push_back(math::FmaOp::create(b, gradient.ds, k, acc));
        addToTableGradient(item, row, pair, gradient.ds);
        return next;
      });
  storeGradientRow(item, Input::Query, row.token, row.isRow,
                   llvm::to_vector(dq), op.getScale().convertToDouble());
}

/// Key j = lane + 32 r of a lane: its k and v rows (f32), its table offset
/// P(j) and label. Keys past N compute key N - 1 (`token`) and store
/// nothing (`isKey`).
struct GpuBackwardKernel::KeyColumn {
  Value isKey, token;
  SmallVector<Value> key, value;
  Value tableOffset, label;
  Value isClass; // BEiT: key j is the class token (i1; null without one)
};

GpuBackwardKernel::KeyColumn GpuBackwardKernel::loadKeyColumn(Item &item,
                                                              Value round) {
  Warp &warp = item.warp;
  KeyColumn column;
  Value j = add(item.slot, mulConst(round, shape.rowsPerRound));
  column.isKey = compare(arith::CmpIPredicate::ult, j, index(g.tokens));
  column.token = minConst(j, g.tokens - 1);
  column.key = loadRow(item, item.scratch.keys, column.token);
  column.value = loadRow(item, item.scratch.values, column.token);
  column.tableOffset = warp.load(item.scratch.tokenOffsets, column.token);
  column.label = warp.load(item.scratch.tokenLabels, column.token);
  column.isClass = isClassToken(column.token);
  return column;
}

GpuBackwardKernel::PairOperands
GpuBackwardKernel::pairOfRow(Item &item, const KeyColumn &column, Value i,
                             ArrayRef<Value> query,
                             ArrayRef<Value> outputGradient) {
  Warp &warp = item.warp;
  const Scratch &scratch = item.scratch;
  PairOperands pair;
  pair.query = query;
  pair.key = column.key;
  pair.value = column.value;
  pair.outputGradient = outputGradient;
  pair.rowOffset = warp.loadUniform(scratch.tokenOffsets, i);
  pair.keyOffset = column.tableOffset;
  pair.rowLabel = warp.loadUniform(scratch.tokenLabels, i);
  pair.keyLabel = column.label;
  pair.logSumExp = warp.loadUniform(scratch.logSumExp, i);
  pair.delta = warp.loadUniform(scratch.delta, i);
  pair.rowIsClass = isClassToken(i);
  pair.keyIsClass = column.isClass;
  return pair;
}

/// Per query row i in order, p and ds as the query pass had them:
/// dv_j += p_ij dout_i, dk_j += ds_ij q_i. Then dk_j (times scale) and dv_j
/// to their rows.
void GpuBackwardKernel::gradientOfKeysAndValues(Item &item, Value round) {
  const Scratch &scratch = item.scratch;
  KeyColumn column = loadKeyColumn(item, round);
  int64_t channels = shape.laneChannels;
  // dk's sums, then dv's.
  SmallVector<Value> initial(2 * channels, item.zero);
  ValueRange sums = rolledLoop(
      index(0), index(g.tokens), initial, [&](Value i, ValueRange carried) {
        SmallVector<Value> query = loadRow(item, scratch.queries, i);
        SmallVector<Value> outputGradient =
            loadRow(item, scratch.outputGradients, i);
        PairGradient gradient = pairGradient(
            item, pairOfRow(item, column, i, query, outputGradient));
        SmallVector<Value> next(carried);
        for (int64_t e = 0; e < channels; ++e) {
          next[e] = math::FmaOp::create(b, gradient.ds, query[e], carried[e]);
          next[channels + e] = math::FmaOp::create(
              b, gradient.p, outputGradient[e], carried[channels + e]);
        }
        return next;
      });
  storeGradientRow(item, Input::Key, column.token, column.isKey,
                   llvm::to_vector(sums.take_front(channels)),
                   op.getScale().convertToDouble());
  storeGradientRow(item, Input::Value, column.token, column.isKey,
                   llvm::to_vector(sums.drop_front(channels)), 1.0);
}

void GpuBackwardKernel::storeGradientRow(Item &item, Input which, Value token,
                                         Value mask, ArrayRef<Value> row,
                                         double scale) {
  RowAddress address = rowAddress(item.w, item.h, token, which);
  if (address.valid)
    mask = arith::AndIOp::create(b, mask, address.valid);
  Type element = shape.element;
  Value factor = item.warp.constant(scale, f32);
  for (auto [e, value] : llvm::enumerate(row)) {
    Value scaled =
        scale == 1.0 ? value : arith::MulFOp::create(b, value, factor);
    Value channelMask = mask;
    if (Value valid = isChannel(item, e))
      channelMask = arith::AndIOp::create(b, mask, valid);
    item.warp.store(convertFloat(scaled, element),
                    flatGradients[static_cast<int>(which)],
                    add(address.offset, laneChannel(item, e)), channelMask);
  }
}

/// partials[item, t] = G[t] (the tensor-core form: the sum of its 2 W
/// copies, in order).
void GpuBackwardKernel::storeTableGradient(Item &item, Value itemIndex) {
  Warp &warp = item.warp;
  Value base = mulConst(itemIndex, g.tableRows);
  int64_t copies = shape.tensorCores ? 2 * shape.warps : 1;
  forEachLaneElement(item, g.tableRows, [&](Value t, Value valid) {
    Value sum = warp.load(item.scratch.tableGradient, t, valid);
    for (int64_t copy = 1; copy < copies; ++copy)
      sum = arith::AddFOp::create(
          b, sum,
          warp.load(item.scratch.tableGradient,
                    add(t, index(copy * g.tableRows)), valid));
    warp.store(sum, flatPartials, add(base, t), valid);
  });
}

/// The steps of one item: stage the window; a lane per query row: its
/// softmax statistics, then its gradients and the table's; a lane per key:
/// the gradients of k and v; the item's table gradient to its partial.
void GpuBackwardKernel::emitItem(Warp &warp, Value itemIndex,
                                 const Scratch &scratch, Value partials,
                                 Value warpIndex) {
  emitViews(partials);
  Item item(warp, scratch);
  item.warpIndex = warpIndex ? warpIndex : index(0);
  item.w = divConst(itemIndex, g.heads);
  item.h = remConst(itemIndex, g.heads);
  item.lane = warp.laneId();
  item.slot = divConst(item.lane, shape.lanesPerRow);
  item.part = remConst(item.lane, shape.lanesPerRow);
  item.isFirstPart = compare(arith::CmpIPredicate::eq, item.part, index(0));
  item.group = divConst(item.lane, 4);
  item.pair = mulConst(remConst(item.lane, 4), 2);
  item.zero = warp.constant(0.0, f32);
  item.scaleLog2e =
      warp.constant(op.getScale().convertToDouble() * kLog2E, f32);
  item.maskLog2e =
      warp.constant(op.getMaskValue().convertToDouble() * kLog2E, f32);
  if (op.hasShiftMask()) {
    item.windowInImage =
        remConst(item.w, getNumWindows(*op.getResolution(), g.window));
    item.oneRegion = holdsOneRegion(item.windowInImage);
  }
  if (shape.tensorCores) {
    emitTensorCoreItem(item, itemIndex);
    return;
  }
  stageWindow(item);
  forEachRound([&](Value round) {
    QueryRow row = loadQueryRow(item, round);
    softmaxStatistics(item, row);
    gradientOfQueriesAndTable(item, row);
  });
  // The rows' lse and D, for every lane's keys.
  warp.sync();
  forEachRound([&](Value round) { gradientOfKeysAndValues(item, round); });
  warp.sync();
  storeTableGradient(item, itemIndex);
}

/// dtable[t, h] = sum over windows b of partials[b H + h, t], in a fixed
/// order: a block per head and 32 entries, whose warp r sums the windows of
/// its range (the r-th of kReductionWarps even ranges) in order; after the
/// block's barrier, its first warp sums the warps' sums in order.
void GpuBackwardKernel::reduceTableGradients(Value partials,
                                             KernelTarget target) {
  int64_t chunks = llvm::divideCeil(g.tableRows, kWarpSize);
  int64_t blocks = g.heads * chunks;
  Type element = getElementTypeOrSelf(grad.getDtable().getType());
  struct Entry {
    Value h, t, valid;
  };
  auto entryOf = [&](Warp &warp, Value block) {
    Entry entry;
    entry.h = divConst(block, chunks);
    entry.t = add(warp.laneId(), mulConst(remConst(block, chunks), kWarpSize));
    entry.valid =
        compare(arith::CmpIPredicate::ult, entry.t, index(g.tableRows));
    return entry;
  };
  // Warp r: its range of windows, summed into sums[r, lane].
  auto sumWindows = [&](Warp &warp, Value block, Value r, Value sums) {
    Value flat = flatten(b, b.getLoc(), partials);
    Entry entry = entryOf(warp, block);
    Value windows = divConst(memref::DimOp::create(b, partials, 0), g.heads);
    Value first = firstOfShare(windows, kReductionWarps, r);
    Value last = firstOfShare(windows, kReductionWarps, add(r, index(1)));
    Value zero = warp.constant(0.0, f32);
    Value sum = forLoop(first, last, 1, {zero}, [&](Value w, ValueRange acc) {
      Value item = add(mulConst(w, g.heads), entry.h);
      Value at = add(mulConst(item, g.tableRows), entry.t);
      Value partial = warp.load(flat, at, entry.valid);
      return SmallVector<Value>{arith::AddFOp::create(b, acc[0], partial)};
    })[0];
    warp.store(sum, sums, add(mulConst(r, kWarpSize), warp.laneId()));
  };
  // The first warp: the warps' sums, in order, to dtable.
  auto sumWarps = [&](Warp &warp, Value block, Value sums) {
    Entry entry = entryOf(warp, block);
    Value total = warp.load(sums, warp.laneId());
    for (int64_t r = 1; r < kReductionWarps; ++r)
      total = arith::AddFOp::create(
          b, total, warp.load(sums, add(index(r * kWarpSize), warp.laneId())));
    Value dtable = flatten(b, b.getLoc(), grad.getDtable());
    warp.store(convertFloat(total, element), dtable,
               add(mulConst(entry.t, g.heads), entry.h), entry.valid);
  };

  int64_t sumElements = kReductionWarps * kWarpSize;
  if (target == KernelTarget::Host) {
    Value sums =
        memref::AllocaOp::create(b, MemRefType::get({sumElements}, f32));
    forLoop(index(0), index(blocks), 1, {}, [&](Value block, ValueRange) {
      forLoop(index(0), index(kReductionWarps), 1, {},
              [&](Value r, ValueRange) {
                Warp warp(b, /*emulated=*/true);
                sumWindows(warp, block, r, sums);
                return SmallVector<Value>{};
              });
      Warp warp(b, /*emulated=*/true);
      sumWarps(warp, block, sums);
      return SmallVector<Value>{};
    });
    return;
  }
  // A few KiB: always static.
  SharedMemory shared =
      createSharedBuffers({{"grad_table_sums", sumElements, f32, 16}});
  assert(!shared.dynamicBytes && "the reduction's sums are static");
  Value one = index(1);
  auto launch = gpu::LaunchOp::create(b, index(blocks), one, one,
                                      index(sumElements), one, one);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&launch.getBody().front());
  Value sums = getSharedBuffers(shared).front();
  Value block = launch.getBlockIds().x;
  Value r = divConst(launch.getThreadIds().x, kWarpSize);
  Warp warp(b, /*emulated=*/false);
  sumWindows(warp, block, r, sums);
  gpu::BarrierOp::create(b);
  auto first = scf::IfOp::create(
      b, compare(arith::CmpIPredicate::eq, r, index(0)), /*withElse=*/false);
  b.setInsertionPointToStart(&first.getThenRegion().front());
  sumWarps(warp, block, sums);
  b.setInsertionPointToEnd(&launch.getBody().front());
  gpu::TerminatorOp::create(b);
}

LogicalResult mlir::rpe::detail::emitGpuBackwardKernel(
    ImplicitLocOpBuilder &b, FusedAttentionOpInterface op,
    const KernelGeometry &g, KernelTarget target, bool hoistScratch,
    unsigned smVersion, F32Mma f32Mma) {
  FailureOr<GpuBackwardShape> shape =
      getGpuBackwardShape(op, smVersion, f32Mma);
  if (failed(shape))
    return failure();
  return GpuBackwardKernel(b, op, g, *shape).emit(target, hoistScratch);
}
