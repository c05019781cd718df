//===- WarpKernel.cpp - the tensor-core form of the fused attention -------===//
//
// One warp computes the attention of one (window b, head h), N tokens of d
// channels, on m16n8k16 tensor-core tiles (mma.sync, f16 or bf16 operands,
// f32 accumulators). With P(t) the table offset of token t and the softmax
// in base 2 (log2 e folded into the scale, the table and the mask value):
//
//   shared: K, V (N' x d, zero rows past N), R = table[:, h] * log2 e
//   for each tile of 16 query rows I:
//     m = lowest finite, l = 0, O = 0                        per row of I
//     for each block J of keys:
//       S   = q_I kᵀ_J                           mma.sync, m16n8k16
//       S   = S * scale * log2 e + R[P(i) - P(j) + (T-1)/2]
//             (+ mask * log2 e where labels differ) (-inf where j >= N)
//       m'  = max(m, max_J S)                    quad shuffles (xor 1, 2)
//       P   = 2^(S - m'),  c = 2^(m - m')
//       O   = O c + P v_J                        mma.sync, P stays in
//                                                registers (C -> A layout)
//       l   = l c + P 1                          mma.sync against ones
//       m   = m'
//     out_I = O / l                              via shared, a row at a time
//
// A warp issues ~20-30 instructions per score against 1/16 of an mma (at
// Swin-T stage 1 an item's instructions take about as long at the SMs'
// issue rate as its bytes at the memory's full bandwidth), so the steps
// spend as few per score as they can:
//   - l comes from the tensor cores: P times an 8-column tile of ones
//     gives each lane its rows' sums, summed as P v is (so the weights
//     normalized are those P v used), for one mma per 16 keys instead of
//     a widening and an add per score and the quad's shuffles at the end;
//   - where a block's keys are known at compile time, only its score tiles
//     that reach past N select -inf;
//   - the shift mask is a branch of the warp's own that windows of one
//     region (all but the last row and column of a map's windows) skip.
// Per query tile of Swin-T stage 1 (f16, PTX): 759 -> 616 instructions
// unshifted, 877 -> 615 in a shifted window of one region, 741 in others.
//
// SwinV2's cosine attention scales each score instead of the operands,
// which the tiles keep as they are:
//
//   S   = q_I kᵀ_J * (s_h log2 e / |q_i|) / |k_j|
//   s_h = exp(min(logit_scale[h], ln 100))
//
// 1 / |k_j| staged with the keys' offsets, the factor of the lane's two
// rows computed from the staged query tile (|x| as F.normalize's
// max(|x|, 1e-12)).
//
// f32 q, k, v (f32-mma=bf16x3 or bf16x6) are staged as f32 and split, as
// each fragment is loaded, into terms of the bf16 operand type:
//
//   x  = x0 + x1 (+ x2),  xi = bf16(x - x0 - .. - x(i-1))
//   AB = sum over i + j < terms of Ai Bj  (3 or 6 mma.sync, small first)
//
// two terms hold 16 of f32's 24 significant bits (the products' error is
// 2^-16, TF32's 2^-11), three all of them; P is split as the operands are.
//
// BEiT's class token (token 0; grid token t - 1 is token t): P is that of
// the grid positions, and a select per score takes R[T], R[T + 1] or
// R[T + 2] (class -> token, token -> class, class -> class) for the class
// token's row and column; R stages the T + 3 rows.
//
// Fragments follow PTX's mma.m16n8k16 layouts (MmaLayout in Warp.h, the one
// place they are written; the GPU's loads and the host's emulated mma.sync
// both read them). With lane = 4 g + t:
//   A (16 x 16, row major) a0..a7: row g (+8 for a2, a3, a6, a7),
//                                  column 2t + (i & 1) (+8 for a4..a7)
//   B (16 x 8)             b0..b3: row 2t + (i & 1) (+8 for b2, b3), column g
//   C (16 x 8)             c0..c3: row g (+8 for c2, c3), column 2t + (i & 1)
// so the C fragments of two adjacent 8-key tiles of S are, rounded, the A
// fragment of P for those 16 keys: no shuffle between the two products.
//
// Memory: token rows move between global and shared memory as 16-byte
// vectors, d / 8 lanes per row, eight steps' loads issued before their
// stores (the loads' latency is long: bytes in flight are what count);
// rows sit in shared memory with a stride of d + 8 elements, so that the
// 8 rows x 4 column pairs of a fragment load hit distinct banks. Small
// windows put several warps in a block (up to 48 KiB of static shared
// memory); larger ones take the row kernel, or with an explicit
// warps-per-block dynamic shared memory up to the chip's limit. The host
// runtime sizes the grid from rpe.items_per_block.
//
// The same code runs on the host with each warp emulated by vectors of its
// 32 lanes (SIMT as SIMD): lane values are vector<32x...>, shared memory is
// stack scratch, loads and stores are gathers and scatters, shuffles are
// vector shuffles and mma.sync is its definition as lane permutations and
// FMAs. That is how the kernel's numbers are tested without a GPU; only
// the primitives of the Warp class differ between the two (and the host
// stages rows in a loop rather than in unrolled batches).
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"
#include "Warp.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"

#include <limits>

using namespace mlir;
using namespace mlir::rpe;
using namespace mlir::rpe::detail;

/// Several (window, head) items per block for small windows: a block of
/// one warp would cap an SM at 32 resident warps.
static constexpr int64_t kMaxWarpsPerBlock = 4;

SmallVector<SharedBuffer, 7>
mlir::rpe::detail::getWarpSharedBuffers(const WarpTileShape &shape,
                                        int64_t warps, MLIRContext *context) {
  // 16-byte aligned for the rows' vector accesses.
  int64_t tokenElements = shape.paddedTokens * shape.rowStride;
  Type f32 = Float32Type::get(context), i32 = IntegerType::get(context, 32);
  SmallVector<SharedBuffer, 7> buffers = {
      {"queries", warps * 16 * shape.rowStride, shape.element, kChunkBytes},
      {"keys", warps * tokenElements, shape.element, kChunkBytes},
      {"values", warps * tokenElements, shape.element, kChunkBytes},
      {"table", warps * shape.tableRows, f32, kChunkBytes},
      {"key_offsets", warps * shape.paddedTokens, i32, kChunkBytes},
      {"key_labels", warps * shape.paddedTokens, i32, kChunkBytes}};
  if (shape.cosine)
    buffers.push_back(
        {"key_scales", warps * shape.paddedTokens, f32, kChunkBytes});
  return buffers;
}

FailureOr<std::optional<WarpTileShape>>
mlir::rpe::detail::getWarpTileShape(FusedWindowAttentionOp op,
                                    const WarpTileOptions &options) {
  std::optional<WarpTileShape> none;
  Type element = getElementTypeOrSelf(op.getQuery().getType());
  WarpTileShape shape;
  shape.element = element;
  shape.operand = element;
  shape.operandTerms = 1;
  shape.cosine = op.isCosine();
  if (element.isF32() && options.f32Mma != F32Mma::None) {
    shape.operand = BFloat16Type::get(op.getContext());
    shape.operandTerms = options.f32Mma == F32Mma::Bf16x3 ? 2 : 3;
  } else if (!element.isF16() && !element.isBF16()) {
    return none;
  }
  for (Value operand : {op.getKey(), op.getValue(), op.getInit()})
    if (getElementTypeOrSelf(operand.getType()) != element)
      return none;
  // Rows move in 16-byte chunks, a row's within one warp step: at most 32
  // chunks (256 channels of 16 bits, 128 of f32).
  int64_t d = op.getHeadDim();
  int64_t elementBytes = element.getIntOrFloatBitWidth() / 8;
  if (d % 16 != 0 || d * elementBytes > kWarpSize * kChunkBytes)
    return none;
  shape.queryTiles = llvm::divideCeil(op.getNumTokens(), 16);
  shape.paddedTokens = 16 * shape.queryTiles;
  // The largest block of <= 64 keys that tiles N': then every block holds
  // at least one real key (N' - N < 16), so the running max is finite.
  int64_t tiles = shape.queryTiles;
  shape.keyBlock = 16 * (tiles % 4 == 0   ? 4
                         : tiles % 3 == 0 ? 3
                         : tiles % 2 == 0 ? 2
                                          : 1);
  if (options.keyBlock) {
    if (shape.paddedTokens % options.keyBlock != 0)
      return op.emitOpError("key-block=")
             << options.keyBlock << " does not divide the "
             << shape.paddedTokens
             << " keys of its window (N rounded up to 16)";
    shape.keyBlock = options.keyBlock;
  }
  // Rows of q, k, v in shared memory are padded by 16 bytes: with a stride
  // of d + 8 16-bit elements the 8 rows x 4 column pairs of a fragment load
  // fall in distinct banks (a stride of 64 bytes would put rows g and g + 2
  // in the same bank); f32 rows (d + 4) leave two-way conflicts.
  shape.rowStride = d + kChunkBytes / elementBytes;
  shape.tableRows = getNumTableRows(op.getWindow(), op.getClassToken());
  auto blockBytes = [&](int64_t warps) {
    return layoutSharedBuffers(
               getWarpSharedBuffers(shape, warps, op.getContext()))
        .bytes;
  };
  // A window whose one warp exceeds what a block may have on the chip gets
  // the row kernel, whatever the options.
  if (blockBytes(1) > options.maxSharedBytes)
    return none;
  if (options.warpsPerBlock) {
    int64_t bytes = blockBytes(options.warpsPerBlock);
    if (bytes > options.maxSharedBytes)
      return op.emitOpError("warps-per-block=")
             << options.warpsPerBlock << " needs " << bytes
             << " bytes of shared memory, more than the "
             << options.maxSharedBytes << " a block may have on sm_"
             << options.smVersion;
    shape.warpsPerBlock = options.warpsPerBlock;
  } else {
    // As many warps as fit the static 48 KiB (at most 4). A window whose
    // one warp needs more takes the row kernel unless warps-per-block asks
    // for warps in dynamic shared memory: at 80+ KiB a block, an SM holds
    // two or three such warps, and no GPU run has shown yet that this beats
    // the rows.
    if (blockBytes(1) > kStaticSharedBytesPerBlock)
      return none;
    shape.warpsPerBlock = 1;
    while (shape.warpsPerBlock < kMaxWarpsPerBlock &&
           blockBytes(shape.warpsPerBlock + 1) <= kStaticSharedBytesPerBlock)
      ++shape.warpsPerBlock;
  }
  shape.sharedBytes = blockBytes(shape.warpsPerBlock);
  return std::optional<WarpTileShape>(shape);
}

namespace mlir::rpe::detail {

/// The shared memory of one warp: a query tile (16 x d, reused for the
/// output tile), the keys and values (N' x d), the head's table (T, f32),
/// and per key its table offset P(j) and region label (-1: padding), i32,
/// and for the cosine form 1 / |k_j| (f32; else null). On the GPU the
/// buffers are the block's and `*Base` the warp's offsets.
struct WarpScratch {
  Value queries, keys, values, table, keyOffsets, keyLabels, keyScales;
  Value queryBase, tokenBase, tableBase, keyBase;
};

struct WarpItem;
struct QueryTile;
struct OnlineSoftmaxState;

/// The warp kernel: one warp per (window, head), in the steps of
/// emitWarpItem.
class WarpKernel : public KernelEmitter {
public:
  WarpKernel(ImplicitLocOpBuilder &b, FusedAttentionOpInterface op,
             const KernelGeometry &g, const WarpTileShape &shape)
      : KernelEmitter(b, op, g), shape(shape) {}

  LogicalResult emit(KernelTarget target, bool hoistScratch);

private:
  /// The work of one warp: (window, head) `itemIndex`, in the steps below.
  void emitWarpItem(Warp &warp, Value itemIndex, const WarpScratch &scratch);
  void stageTableAndKeys(WarpItem &item);
  QueryTile loadQueryTile(WarpItem &item, Value tile);
  SmallVector<Fragment> emitScoreTile(WarpItem &item, const QueryTile &tile,
                                      Value key0);
  void addBiasAndMask(WarpItem &item, const QueryTile &tile, Value key0,
                      MutableArrayRef<Fragment> scores);
  void addShiftMask(WarpItem &item, const QueryTile &tile, Value key0,
                    MutableArrayRef<Fragment> scores);
  void
  forEachElementByKey(WarpItem &item, Value key0, int64_t nj,
                      function_ref<void(int64_t i, Value key, Value at)> body);
  SmallVector<Fragment> updateOnlineSoftmax(WarpItem &item,
                                            OnlineSoftmaxState &state,
                                            ArrayRef<Fragment> scores);
  void accumulateValues(WarpItem &item, Value key0,
                        ArrayRef<Fragment> probabilities,
                        OnlineSoftmaxState &state);
  void storeOutputTile(WarpItem &item, const QueryTile &tile,
                       const OnlineSoftmaxState &state);
  /// sum_c x[c]² of a staged row, in each lane.
  Value sumOfSquares(Warp &warp, Value memref, Value row);
  /// A fragment of q, k, v or P as the mma operand's terms: the fragment
  /// itself (f16, bf16), or f32's bf16 terms.
  OperandTerms splitIntoTerms(Warp &warp, const Fragment &values) {
    return warp.splitIntoTerms(values, shape.operand, shape.operandTerms);
  }
  /// A lane's row or column in an mma fragment, plus `offset`.
  Value laneIndex(const WarpItem &item, const LaneCoordinate &coordinate,
                  int64_t offset);
  /// A 16-byte chunk of a token row of q, k or v (its padding row for a
  /// padding token), in the shape's element type.
  SmallVector<Value> loadInputChunk(Warp &warp, Input which, RowAddress row,
                                    Value h, Value column);
  /// Copies `count` token rows of q, k or v from `first` on into `dest`
  /// at `destBase` (element type of the shape), then zeros up to `total`.
  void stageTokenRows(Warp &warp, Input which, Value w, Value h, Value first,
                      Value count, int64_t total, Value dest, Value destBase);

  const WarpTileShape &shape;
};

} // namespace mlir::rpe::detail

LogicalResult WarpKernel::emit(KernelTarget target, bool hoistScratch) {
  // A block of `warps` warps, one (window, head) each, each with its own
  // slice of the block's buffers.
  int64_t warps = shape.warpsPerBlock;
  SmallVector<SharedBuffer, 7> buffers =
      getWarpSharedBuffers(shape, warps, b.getContext());
  auto scratchAt = [&](ArrayRef<Value> memrefs, Value slot) {
    auto sliceOf = [&](int64_t i) {
      return mulConst(slot, buffers[i].elements / warps);
    };
    Value keyScales = memrefs.size() > 6 ? memrefs[6] : Value();
    return WarpScratch{memrefs[0], memrefs[1], memrefs[2], memrefs[3],
                       memrefs[4], memrefs[5], keyScales, sliceOf(0),
                       sliceOf(1), sliceOf(3), sliceOf(4)};
  };

  if (target == KernelTarget::Host) {
    // The host keeps the block's layout: item i works in slot i mod warps
    // of stack buffers sized for the block, so that the slot offsets run
    // here too.
    SmallVector<Value, 7> memrefs;
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
          emitWarpItem(warp, item, scratchAt(memrefs, remConst(item, warps)));
        });
    return success();
  }

  // On the GPU the buffers are the block's shared memory.
  SharedMemory shared = createSharedBuffers(buffers);
  std::optional<WarpScratch> scratch;
  emitItemLaunch(
      warps, kWarpSize,
      [&](Value slot) { scratch = scratchAt(getSharedBuffers(shared), slot); },
      [&](Value item, Value) {
        Warp warp(b, /*emulated=*/false);
        emitWarpItem(warp, item, *scratch);
      },
      shared.dynamicBytes);
  return success();
}

/// Lanes move token rows in chunks of 16 bytes (8 16-bit elements, 4 f32):
/// d / width lanes per row, 32 / (d / width) rows per step of the warp.
struct ChunkLayout {
  int64_t width, lanesPerRow, rowsPerStep, activeLanes;
  ChunkLayout(int64_t headDim, Type element)
      : width(kChunkBytes * 8 / element.getIntOrFloatBitWidth()),
        lanesPerRow(headDim / width), rowsPerStep(kWarpSize / lanesPerRow),
        activeLanes(rowsPerStep * lanesPerRow) {}
};

/// Chunks of one step loaded before any is stored, so that this many
/// 16-byte loads per lane are in flight.
static constexpr int64_t kStepsInFlight = 8;

SmallVector<Value> WarpKernel::loadInputChunk(Warp &warp, Input which,
                                              RowAddress row, Value h,
                                              Value column) {
  int64_t width = ChunkLayout(g.headDim, shape.element).width;
  SmallVector<Value> chunk = warp.loadChunk(flatInputs[static_cast<int>(which)],
                                            add(row.offset, column), width);
  if (!row.valid)
    return chunk;
  // Padding tokens read their padding row, or zeros.
  SmallVector<Value> padding;
  if (paddingRows.empty()) {
    for (Value part : chunk)
      padding.push_back(arith::ConstantOp::create(
          b, cast<TypedAttr>(b.getZeroAttr(part.getType()))));
  } else {
    for (Value part :
         warp.loadChunk(paddingRows[static_cast<int>(which)],
                        add(mulConst(h, g.headDim), column), width))
      padding.push_back(convertFloat(part, shape.element));
  }
  for (auto [part, pad] : llvm::zip(chunk, padding))
    part = select(row.valid, part, pad);
  return chunk;
}

void WarpKernel::stageTokenRows(Warp &warp, Input which, Value w, Value h,
                                Value first, Value count, int64_t total,
                                Value dest, Value destBase) {
  ChunkLayout layout(g.headDim, shape.element);
  Value lane = warp.laneId();
  Value rowInStep = divConst(lane, layout.lanesPerRow);
  Value column = mulConst(remConst(lane, layout.lanesPerRow), layout.width);
  Value activeLane =
      layout.activeLanes < kWarpSize
          ? compare(arith::CmpIPredicate::ult, lane, index(layout.activeLanes))
          : Value();
  Value lastToken = add(first, arith::SubIOp::create(b, count, index(1)));
  int64_t steps = llvm::divideCeil(total, layout.rowsPerStep);
  // Rows past `count` load the last real row (an address that exists) and
  // keep zeros; rows past `total` (a partial last step) store nothing.
  auto loadStep = [&](Value step) {
    Value r = add(rowInStep, mulConst(step, layout.rowsPerStep));
    Value isRow = compare(arith::CmpIPredicate::ult, r, count);
    Value token = select(isRow, add(first, r), lastToken);
    SmallVector<Value> chunk = loadInputChunk(
        warp, which, rowAddress(w, h, token, which), h, column);
    for (Value &part : chunk)
      part = select(isRow, part,
                    arith::ConstantOp::create(
                        b, cast<TypedAttr>(b.getZeroAttr(part.getType()))));
    return chunk;
  };
  auto storeStep = [&](Value step, ArrayRef<Value> chunk) {
    Value r = add(rowInStep, mulConst(step, layout.rowsPerStep));
    Value mask = activeLane;
    if (total % layout.rowsPerStep != 0) {
      Value inside = compare(arith::CmpIPredicate::ult, r, index(total));
      mask = mask ? arith::AndIOp::create(b, mask, inside).getResult() : inside;
    }
    warp.storeChunk(chunk, dest,
                    add(destBase, add(mulConst(r, shape.rowStride), column)),
                    mask);
  };
  if (warp.isEmulated()) {
    // The host needs no loads in flight: a loop keeps the emulation small.
    forLoop(index(0), index(steps), 1, {}, [&](Value step, ValueRange) {
      storeStep(step, loadStep(step));
      return SmallVector<Value>{};
    });
    return;
  }
  for (int64_t step0 = 0; step0 < steps; step0 += kStepsInFlight) {
    int64_t stepEnd = std::min(steps, step0 + kStepsInFlight);
    SmallVector<SmallVector<Value>> chunks;
    for (int64_t step = step0; step < stepEnd; ++step)
      chunks.push_back(loadStep(index(step)));
    for (int64_t step = step0; step < stepEnd; ++step)
      storeStep(index(step), chunks[step - step0]);
  }
}

//===----------------------------------------------------------------------===//
// One warp's (window, head): the steps of emitWarpItem.
//===----------------------------------------------------------------------===//

namespace mlir::rpe::detail {

/// What the steps of one warp's item share.
struct WarpItem {
  WarpItem(Warp &warp, const WarpScratch &scratch)
      : warp(warp), scratch(scratch) {}

  Warp &warp;
  const WarpScratch &scratch;
  Value table; // the compact table, flat
  Value w, h;
  /// lane = 4 g + t; g and 2t, the terms of its fragments' coordinates.
  Value lane, group, pair;
  /// The window's position in its image, for the shift mask (else null),
  /// and whether the window holds one region only (i1).
  Value windowInImage, oneRegion;
  /// Lane constants (f32): the score scale and the mask value in base 2
  /// (the cosine form: scaleLog2e times the head's s_h).
  Value zero, minusInf, scaleLog2e, maskLog2e;
};

/// One tile of 16 query rows: q's A fragments (one per 16 channels, as
/// their terms) and,
/// per row of the lane's C fragments (g and g + 8, by the offset 0 or 8
/// MmaLayout::c gives them), the row's table offset P(i) + (T - 1) / 2 in
/// the warp's table slot (BEiT: of its grid position), its region label
/// (i32), with a class token whether it is the class token (i1), and for
/// the cosine form its scores' factor s_h scale log2 e / |q_i| (f32).
struct QueryTile {
  Value first, rows; // the tile's first token and its count of real rows
  SmallVector<OperandTerms> queries;
  DenseMap<int64_t, Value> tableOffset, label, isClass, scoreScale;
};

/// The online softmax of one query tile, in each lane: for each of the
/// lane's two rows (MmaLayout::rowHalf: g, g + 8), the running max m (base
/// 2; the quad's four lanes agree on it); l, the rows' sums of 2^(s - m),
/// as the C fragment of P times ones (each element holds its row's sum);
/// and O, the output accumulator, a C fragment per 8 channels.
struct OnlineSoftmaxState {
  std::array<Value, 2> max;
  Fragment rowSums;
  SmallVector<Fragment> out;

  /// The loop-carried values: m, l, then O's fragments.
  SmallVector<Value> flatten() const {
    SmallVector<Value> values(max.begin(), max.end());
    llvm::append_range(values, rowSums);
    for (const Fragment &fragment : out)
      llvm::append_range(values, fragment);
    return values;
  }
  static OnlineSoftmaxState unflatten(ValueRange values, int64_t channelTiles) {
    auto fragmentAt = [&](int64_t i) {
      ValueRange fragment =
          values.slice(2 + i * MmaLayout::cElements, MmaLayout::cElements);
      return Fragment(fragment.begin(), fragment.end());
    };
    OnlineSoftmaxState state;
    state.max = {values[0], values[1]};
    state.rowSums = fragmentAt(0);
    for (int64_t nt = 0; nt < channelTiles; ++nt)
      state.out.push_back(fragmentAt(1 + nt));
    return state;
  }

  /// l of the lane's row in `half`.
  Value rowSum(int64_t half) const {
    for (int64_t i = 0; i < MmaLayout::cElements; ++i)
      if (MmaLayout::rowHalf(i) == half)
        return rowSums[i];
    llvm_unreachable("a C fragment holds both halves");
  }
};

} // namespace mlir::rpe::detail

Value WarpKernel::laneIndex(const WarpItem &item,
                                    const LaneCoordinate &coordinate,
                                    int64_t offset) {
  Value term =
      coordinate.term == LaneCoordinate::Term::Group ? item.group : item.pair;
  return add(term, index(coordinate.offset + offset));
}

/// The head's table times log2 e, and per key its table offset
/// P(j) and region label (-1 past N: the softmax's -inf), computed once here
/// rather than in every query tile; then the window's keys and values.
void WarpKernel::stageTableAndKeys(WarpItem &item) {
  Warp &warp = item.warp;
  const WarpScratch &scratch = item.scratch;
  const int64_t n = g.tokens;
  // The warp's lanes take elements t = lane + 32 k of [0, count); `valid`
  // masks the lanes past the end in the last step (null where none are).
  auto forEachLaneElement = [&](int64_t count,
                                function_ref<void(Value t, Value valid)> body) {
    for (int64_t t0 = 0; t0 < count; t0 += kWarpSize) {
      Value t = add(item.lane, index(t0));
      Value valid = t0 + kWarpSize > count
                        ? compare(arith::CmpIPredicate::ult, t, index(count))
                        : Value();
      body(t, valid);
    }
  };
  Value log2e = warp.constant(kLog2E, f32);
  forEachLaneElement(g.tableRows, [&](Value t, Value valid) {
    Value entry =
        toF32(warp.load(item.table, add(mulConst(t, g.heads), item.h), valid));
    warp.store(arith::MulFOp::create(b, entry, log2e), scratch.table,
               add(scratch.tableBase, t), valid);
  });
  int64_t imageWindows =
      op.getResolution() ? getNumWindows(*op.getResolution(), g.window) : 1;
  if (op.hasShiftMask()) {
    item.windowInImage = remConst(item.w, imageWindows);
    item.oneRegion = holdsOneRegion(item.windowInImage);
  }
  forEachLaneElement(shape.paddedTokens, [&](Value t, Value valid) {
    Value clamped = minConst(t, n - 1);
    Value label = item.windowInImage ? regionLabel(item.windowInImage, clamped)
                                     : index(0);
    if (shape.paddedTokens != n)
      label = select(compare(arith::CmpIPredicate::uge, t, index(n)), index(-1),
                     label);
    Value at = add(scratch.keyBase, t);
    warp.store(toI32(gridTableOffset(clamped)), scratch.keyOffsets, at, valid);
    warp.store(toI32(label), scratch.keyLabels, at, valid);
  });
  stageTokenRows(warp, Input::Key, item.w, item.h, index(0), index(n),
                 shape.paddedTokens, scratch.keys, scratch.tokenBase);
  stageTokenRows(warp, Input::Value, item.w, item.h, index(0), index(n),
                 shape.paddedTokens, scratch.values, scratch.tokenBase);
  warp.sync();
  if (!scratch.keyScales)
    return;
  // The cosine form: 1 / |k_j| from the staged rows (padding rows are zero:
  // their scale is 1e12, their scores -inf).
  forEachLaneElement(shape.paddedTokens, [&](Value t, Value valid) {
    Value key = minConst(t, shape.paddedTokens - 1);
    Value row = add(scratch.tokenBase, mulConst(key, shape.rowStride));
    Value at = add(scratch.keyBase, t);
    warp.store(reciprocalNorm(sumOfSquares(warp, scratch.keys, row)),
               scratch.keyScales, at, valid);
  });
  warp.sync();
}

/// sum_c x[c]² over the d channels of the row of `memref` from `row` on,
/// in f32.
Value WarpKernel::sumOfSquares(Warp &warp, Value memref, Value row) {
  Value sum = warp.constant(0.0, f32);
  for (int64_t c = 0; c < g.headDim; ++c) {
    Value x = toF32(warp.load(memref, add(row, index(c))));
    sum = math::FmaOp::create(b, x, x, sum);
  }
  return sum;
}

/// The tile's 16 query rows into shared memory, then their A
/// fragments, and the table offsets and labels of the lane's rows (clamped
/// into the window: rows past N are computed, then dropped).
QueryTile WarpKernel::loadQueryTile(WarpItem &item, Value tile) {
  Warp &warp = item.warp;
  const WarpScratch &scratch = item.scratch;
  const int64_t n = g.tokens;
  QueryTile result;
  result.first = mulConst(tile, 16);
  result.rows = arith::MinUIOp::create(
      b, index(16), arith::SubIOp::create(b, index(n), result.first));
  stageTokenRows(warp, Input::Query, item.w, item.h, result.first,
                 result.rows, 16, scratch.queries, scratch.queryBase);
  warp.sync();
  for (int64_t kk = 0; kk < g.headDim / 16; ++kk) {
    Fragment fragment;
    for (int64_t i = 0; i < MmaLayout::aElements; ++i) {
      FragmentElement e = MmaLayout::a(i);
      Value row = laneIndex(item, e.row, 0);
      Value column = laneIndex(item, e.column, 16 * kk);
      fragment.push_back(
          warp.load(scratch.queries,
                    add(scratch.queryBase,
                        add(mulConst(row, shape.rowStride), column))));
    }
    result.queries.push_back(splitIntoTerms(warp, fragment));
  }
  for (int64_t i = 0; i < MmaLayout::cElements; ++i) {
    LaneCoordinate rowInTile = MmaLayout::c(i).row;
    if (result.tableOffset.count(rowInTile.offset))
      continue;
    Value row =
        minConst(add(result.first, laneIndex(item, rowInTile, 0)), n - 1);
    result.tableOffset[rowInTile.offset] = toI32(
        add(gridTableOffset(row), add(scratch.tableBase, index(g.center))));
    if (g.classToken)
      result.isClass[rowInTile.offset] =
          compare(arith::CmpIPredicate::eq, row, index(0));
    if (item.windowInImage)
      result.label[rowInTile.offset] =
          toI32(regionLabel(item.windowInImage, row));
    if (shape.cosine)
      result.scoreScale[rowInTile.offset] = arith::MulFOp::create(
          b, item.scaleLog2e,
          reciprocalNorm(sumOfSquares(
              warp, scratch.queries,
              add(scratch.queryBase,
                  mulConst(laneIndex(item, rowInTile, 0), shape.rowStride)))));
  }
  return result;
}

/// S = q kᵀ for the block's keys from `key0` on, a C fragment per 8 keys,
/// k = 16 channels per mma: B(channel, key) = K[key, channel].
SmallVector<Fragment> WarpKernel::emitScoreTile(WarpItem &item,
                                                        const QueryTile &tile,
                                                        Value key0) {
  SmallVector<Fragment> scores;
  for (int64_t nj = 0; nj < shape.keyBlock / 8; ++nj) {
    Fragment acc(MmaLayout::cElements, item.zero);
    for (int64_t kk = 0; kk < g.headDim / 16; ++kk) {
      Fragment keys;
      for (int64_t i = 0; i < MmaLayout::bElements; ++i) {
        FragmentElement e = MmaLayout::b(i);
        Value key = add(key0, laneIndex(item, e.column, 8 * nj));
        Value row = add(item.scratch.tokenBase, mulConst(key, shape.rowStride));
        keys.push_back(item.warp.load(
            item.scratch.keys, add(row, laneIndex(item, e.row, 16 * kk))));
      }
      acc = item.warp.mmaOfTerms(tile.queries[kk],
                                 splitIntoTerms(item.warp, keys), acc);
    }
    scores.push_back(acc);
  }
  return scores;
}

/// Runs `body(i, key, at)` for the elements i of score tile `nj` of the
/// block from `key0`, those of one key in turn: `key` and `at`, its index
/// in the key buffers, are given (non-null) at the first element of each
/// key, so that what is loaded per key is loaded once for the rows that
/// share it.
void WarpKernel::forEachElementByKey(
    WarpItem &item, Value key0, int64_t nj,
    function_ref<void(int64_t i, Value key, Value at)> body) {
  std::optional<int64_t> loadedKey;
  for (int64_t i : MmaLayout::cElementsByColumn()) {
    FragmentElement e = MmaLayout::c(i);
    Value key, at;
    if (loadedKey != e.column.offset) {
      loadedKey = e.column.offset;
      key = add(key0, laneIndex(item, e.column, 8 * nj));
      at = add(item.scratch.keyBase, key);
    }
    body(i, key, at);
  }
}

/// s = S scale log2 e + R[P(i) - P(j) + (T - 1) / 2] (+ mask log2 e where
/// the labels of i and j differ: addShiftMask) (-inf where j >= N, in the
/// tiles whose keys may reach past N), for each element of the score
/// fragments (row and key from MmaLayout::c); the cosine form
/// scales S by s_h scale log2 e / (|q_i| |k_j|) instead. With BEiT's class
/// token P is of the grid positions, and a select per element takes the
/// class token's rows of R (T, T + 1, T + 2: classTokenEntry) instead.
void WarpKernel::addBiasAndMask(WarpItem &item, const QueryTile &tile,
                                Value key0, MutableArrayRef<Fragment> scores) {
  Warp &warp = item.warp;
  const WarpScratch &scratch = item.scratch;
  std::optional<int64_t> firstKey = getConstantIntValue(key0);
  for (auto [nj, fragment] : llvm::enumerate(scores)) {
    // Whether the tile's 8 keys may reach past N.
    int64_t tileEnd = 8 * (static_cast<int64_t>(nj) + 1);
    bool padded = shape.paddedTokens != g.tokens &&
                  (!firstKey || *firstKey + tileEnd > g.tokens);
    Value keyOffset, isPadding, isClassKey, keyScale;
    forEachElementByKey(item, key0, nj, [&](int64_t i, Value key, Value at) {
      if (at) {
        keyOffset = warp.load(scratch.keyOffsets, at);
        if (scratch.keyScales)
          keyScale = warp.load(scratch.keyScales, at);
        if (g.classToken)
          isClassKey = compare(arith::CmpIPredicate::eq, key, index(0));
        if (padded)
          isPadding =
              compare(arith::CmpIPredicate::slt,
                      warp.load(scratch.keyLabels, at), toI32(index(0)));
      }
      LaneCoordinate row = MmaLayout::c(i).row;
      Value &s = fragment[i];
      Value entry = arith::IndexCastOp::create(
          b, warp.laneType(b.getIndexType()),
          arith::SubIOp::create(b, tile.tableOffset.lookup(row.offset),
                                keyOffset));
      if (g.classToken)
        entry = classTokenEntry(tile.isClass.lookup(row.offset), isClassKey,
                                entry, scratch.tableBase);
      Value bias = warp.load(scratch.table, entry);
      Value scale = keyScale
                        ? arith::MulFOp::create(
                              b, tile.scoreScale.lookup(row.offset), keyScale)
                        : item.scaleLog2e;
      s = math::FmaOp::create(b, s, scale, bias);
      if (isPadding)
        s = select(isPadding, item.minusInf, s);
    });
  }
  if (item.windowInImage)
    addShiftMask(item, tile, key0, scores);
}

/// s += mask log2 e where the labels of the row and the key differ, in a
/// branch of the warp's own that windows of one region skip (on a shifted
/// map all but its last row and column of windows): three instructions
/// per score. Padding keys' -inf stays -inf.
void WarpKernel::addShiftMask(WarpItem &item, const QueryTile &tile, Value key0,
                              MutableArrayRef<Fragment> scores) {
  Warp &warp = item.warp;
  SmallVector<Value> unmasked;
  for (const Fragment &fragment : scores)
    llvm::append_range(unmasked, fragment);
  SmallVector<Value> results =
      maskedUnlessOneRegion(item.oneRegion, unmasked, [&](ValueRange flat) {
        SmallVector<Value> masked(flat);
        for (int64_t nj = 0; nj < static_cast<int64_t>(scores.size()); ++nj) {
          Value keyLabel;
          forEachElementByKey(item, key0, nj, [&](int64_t i, Value, Value at) {
            if (at)
              keyLabel = warp.load(item.scratch.keyLabels, at);
            Value rowLabel = tile.label.lookup(MmaLayout::c(i).row.offset);
            Value &s = masked[nj * MmaLayout::cElements + i];
            s = arith::AddFOp::create(
                b, s,
                select(compare(arith::CmpIPredicate::ne, rowLabel, keyLabel),
                       item.maskLog2e, item.zero));
          });
        }
        return masked;
      });
  for (auto [nj, fragment] : llvm::enumerate(scores))
    for (int64_t i = 0; i < MmaLayout::cElements; ++i)
      fragment[i] = results[nj * MmaLayout::cElements + i];
}

/// The online-softmax update of one block of scores, per row of the lane:
///   m' = max(m, max_j s_j)        the block's row max: the lane's elements,
///                                 then the quad's (lanes 4g..4g+3 share a
///                                 row: shuffles xor 1 and 2)
///   c  = 2^(m - m')               rescales what was summed against m
///   p  = 2^(s - m'), rounded to the mma operand type (f32: as it is)
///   l' = l c,  O' = O c           (P·1 and P·v are added next)
/// Returns P, as C fragments of the score tiles.
SmallVector<Fragment> WarpKernel::updateOnlineSoftmax(
    WarpItem &item, OnlineSoftmaxState &state, ArrayRef<Fragment> scores) {
  Warp &warp = item.warp;
  auto fmax = [&](Value x, Value y) -> Value {
    return arith::MaximumFOp::create(b, x, y);
  };
  auto exp2 = [&](Value x) -> Value { return math::Exp2Op::create(b, x); };
  std::array<Value, 2> newMax, correction;
  for (int64_t half = 0; half < 2; ++half) {
    Value rowMax = state.max[half];
    for (const Fragment &fragment : scores)
      for (int64_t i = 0; i < MmaLayout::cElements; ++i)
        if (MmaLayout::rowHalf(i) == half)
          rowMax = fmax(rowMax, fragment[i]);
    rowMax = fmax(rowMax, warp.shuffleXor(rowMax, 1));
    rowMax = fmax(rowMax, warp.shuffleXor(rowMax, 2));
    newMax[half] = rowMax;
    correction[half] = exp2(arith::SubFOp::create(b, state.max[half], rowMax));
  }
  SmallVector<Fragment> probabilities;
  for (const Fragment &fragment : scores) {
    Fragment p;
    for (int64_t i = 0; i < MmaLayout::cElements; ++i)
      p.push_back(
          convertFloat(exp2(arith::SubFOp::create(
                           b, fragment[i], newMax[MmaLayout::rowHalf(i)])),
                       shape.element));
    probabilities.push_back(p);
  }
  state.max = newMax;
  auto rescale = [&](Fragment &fragment) {
    for (int64_t i = 0; i < MmaLayout::cElements; ++i)
      fragment[i] = arith::MulFOp::create(b, fragment[i],
                                          correction[MmaLayout::rowHalf(i)]);
  };
  rescale(state.rowSums);
  for (Fragment &fragment : state.out)
    rescale(fragment);
  return probabilities;
}

/// O += P v and l += P 1, 16 keys per mma: P's A fragment is the C
/// fragments of two adjacent 8-key score tiles (MmaLayout::cPairIsA);
/// B(key, channel) = V[key, channel], a fragment per 8 channels; the ones,
/// exact in any operand type, one term.
void WarpKernel::accumulateValues(WarpItem &item, Value key0,
                                  ArrayRef<Fragment> probabilities,
                                  OnlineSoftmaxState &state) {
  assert(MmaLayout::cPairIsA() && "P must be in the A layout");
  const WarpScratch &scratch = item.scratch;
  OperandTerms ones = {
      Fragment(MmaLayout::bElements, item.warp.constant(1.0, shape.operand))};
  for (int64_t kk = 0; kk < shape.keyBlock / 16; ++kk) {
    Fragment p(probabilities[2 * kk]);
    llvm::append_range(p, probabilities[2 * kk + 1]);
    OperandTerms pTerms = splitIntoTerms(item.warp, p);
    state.rowSums = item.warp.mmaOfTerms(pTerms, ones, state.rowSums);
    for (auto [nt, acc] : llvm::enumerate(state.out)) {
      Fragment values;
      for (int64_t i = 0; i < MmaLayout::bElements; ++i) {
        FragmentElement e = MmaLayout::b(i);
        Value key = add(key0, laneIndex(item, e.row, 16 * kk));
        values.push_back(item.warp.load(
            scratch.values,
            add(scratch.tokenBase, add(mulConst(key, shape.rowStride),
                                       laneIndex(item, e.column, 8 * nt)))));
      }
      acc = item.warp.mmaOfTerms(pTerms, splitIntoTerms(item.warp, values),
                                 acc);
    }
  }
}

/// out = O / l. The tile goes through the query
/// tile's shared memory so that it is stored a token row at a time, the way
/// the inputs were loaded; rows past the window (or the map) store nothing.
void WarpKernel::storeOutputTile(WarpItem &item, const QueryTile &tile,
                                         const OnlineSoftmaxState &state) {
  Warp &warp = item.warp;
  const WarpScratch &scratch = item.scratch;
  const int64_t stride = shape.rowStride;
  std::array<Value, 2> inverse;
  for (int64_t half = 0; half < 2; ++half)
    inverse[half] =
        arith::DivFOp::create(b, warp.constant(1.0, f32), state.rowSum(half));
  warp.sync();
  for (auto [nt, fragment] : llvm::enumerate(state.out))
    for (int64_t i = 0; i < MmaLayout::cElements; ++i) {
      FragmentElement e = MmaLayout::c(i);
      Value row = laneIndex(item, e.row, 0);
      Value column = laneIndex(item, e.column, 8 * nt);
      Value value =
          arith::MulFOp::create(b, fragment[i], inverse[MmaLayout::rowHalf(i)]);
      warp.store(convertFloat(value, shape.element), scratch.queries,
                 add(scratch.queryBase, add(mulConst(row, stride), column)));
    }
  warp.sync();
  ChunkLayout layout(g.headDim, shape.element);
  Value lane = item.lane;
  Value rowInStep = divConst(lane, layout.lanesPerRow);
  Value column = mulConst(remConst(lane, layout.lanesPerRow), layout.width);
  Value lastToken =
      add(tile.first, arith::SubIOp::create(b, tile.rows, index(1)));
  for (int64_t step = 0; step * layout.rowsPerStep < 16; ++step) {
    Value r = minConst(add(rowInStep, index(step * layout.rowsPerStep)), 15);
    Value isRow =
        compare(arith::CmpIPredicate::ult,
                add(rowInStep, index(step * layout.rowsPerStep)), tile.rows);
    if (layout.activeLanes < kWarpSize)
      isRow = arith::AndIOp::create(
          b, isRow,
          compare(arith::CmpIPredicate::ult, lane, index(layout.activeLanes)));
    RowAddress outRow = outputAddress(
        item.w, item.h, select(isRow, add(tile.first, r), lastToken));
    if (outRow.valid)
      isRow = arith::AndIOp::create(b, isRow, outRow.valid);
    SmallVector<Value> chunk = warp.loadChunk(
        scratch.queries,
        add(scratch.queryBase, add(mulConst(r, stride), column)), layout.width);
    warp.storeChunk(chunk, flatOutput, add(outRow.offset, column), isRow);
  }
  warp.sync();
}

/// The warp's (window, head) `itemIndex`: stage the table, key info, keys
/// and values; then per tile of 16 query rows, an online softmax over
/// blocks of keys (score tile, bias and mask, update, P·V) and the store.
void WarpKernel::emitWarpItem(Warp &warp, Value itemIndex,
                              const WarpScratch &scratch) {
  emitOperandViews();
  WarpItem item(warp, scratch);
  item.table = flatten(b, b.getLoc(), op.getTable());
  item.w = divConst(itemIndex, g.heads);
  item.h = remConst(itemIndex, g.heads);
  item.lane = warp.laneId();
  item.group = divConst(item.lane, 4);
  item.pair = mulConst(remConst(item.lane, 4), 2);
  stageTableAndKeys(item);

  item.scaleLog2e =
      warp.constant(op.getScale().convertToDouble() * kLog2E, f32);
  if (Value headScale = cosineHeadScale(item.h))
    item.scaleLog2e = arith::MulFOp::create(b, item.scaleLog2e,
                                            warp.broadcast(headScale));
  item.maskLog2e =
      warp.constant(op.getMaskValue().convertToDouble() * kLog2E, f32);
  item.zero = warp.constant(0.0, f32);
  item.minusInf = warp.constant(-std::numeric_limits<double>::infinity(), f32);
  Value initialMax = warp.constant(kOnlineSoftmaxInitialMax, f32);
  int64_t channelTiles = g.headDim / 8;

  forLoop(index(0), index(shape.queryTiles), 1, {}, [&](Value t, ValueRange) {
    QueryTile tile = loadQueryTile(item, t);
    OnlineSoftmaxState initial;
    initial.max = {initialMax, initialMax};
    initial.rowSums.assign(MmaLayout::cElements, item.zero);
    initial.out.assign(channelTiles, Fragment(MmaLayout::cElements, item.zero));
    auto keyBlockStep = [&](Value key0, ValueRange carried) {
      SmallVector<Fragment> scores = emitScoreTile(item, tile, key0);
      addBiasAndMask(item, tile, key0, scores);
      OnlineSoftmaxState state =
          OnlineSoftmaxState::unflatten(carried, channelTiles);
      SmallVector<Fragment> probabilities =
          updateOnlineSoftmax(item, state, scores);
      accumulateValues(item, key0, probabilities, state);
      return state.flatten();
    };
    // One block of all the keys (Swin's 7 x 7) is emitted without a loop:
    // its keys are then constants, and addBiasAndMask knows which score
    // tiles hold padding.
    int64_t keyBlocks = shape.paddedTokens / shape.keyBlock;
    SmallVector<Value> final =
        keyBlocks == 1
            ? keyBlockStep(index(0), initial.flatten())
            : SmallVector<Value>(
                  forLoop(index(0), index(keyBlocks), 1, initial.flatten(),
                          [&](Value block, ValueRange carried) {
                            return keyBlockStep(mulConst(block, shape.keyBlock),
                                                carried);
                          }));
    storeOutputTile(item, tile,
                    OnlineSoftmaxState::unflatten(final, channelTiles));
    return SmallVector<Value>{};
  });
}

LogicalResult mlir::rpe::detail::emitWarpKernel(ImplicitLocOpBuilder &b,
                                                FusedAttentionOpInterface op,
                                                const KernelGeometry &g,
                                                const WarpTileShape &shape,
                                                KernelTarget target,
                                                bool hoistScratch) {
  return WarpKernel(b, op, g, shape).emit(target, hoistScratch);
}
