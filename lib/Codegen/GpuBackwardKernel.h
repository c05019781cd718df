//===- GpuBackwardKernel.h - the GPU backward's two forms -------*- C++ -*-===//
//
// What the two forms of the GPU backward share: its shape, the kernel class
// with the shared memory and the context of one item. GpuBackwardKernel.cpp
// has the shape's choice, the launches, the staging, the lane form and the
// reduction of the table's gradient; GpuBackwardTiles.cpp the tensor-core
// form. Private to lib/Codegen.
//
//===----------------------------------------------------------------------===//

#ifndef RPE_CODEGEN_GPUBACKWARDKERNEL_H
#define RPE_CODEGEN_GPUBACKWARDKERNEL_H

#include "Kernels.h"
#include "Warp.h"

#include <functional>

namespace mlir::rpe::detail {

/// Compile-time shape of the GPU backward.
struct GpuBackwardShape {
  Type element;         // of q, k, v, out, dout and their gradients
  /// The tensor-core form (f16 and bf16, or f32 as bf16 terms with
  /// f32-mma; head_dim a multiple of 16) or the lane form.
  bool tensorCores;
  /// The tensor-core form's mma operands: the element type, or f32's bf16
  /// terms (2 for bf16x3, 3 for bf16x6; Warp::splitIntoTerms).
  Type operand;
  int64_t operandTerms = 1;
  int64_t paddedTokens; // N' (the tensor-core form: N rounded up to 16)
  /// Warps per block, sharing the item's staged window (the tensor-core
  /// form; the lane form has one).
  int64_t warps = 1;
  int64_t rowStride;    // elements per token row in shared memory
  /// The tensor-core form: whether the key pass keeps the window's dS
  /// (N' x N', the element type, windowScoreStride per query) for the query
  /// pass, which then reads it instead of recomputing S, dP and dS; where
  /// the block stays within the static 48 KiB with it (every Swin-T stage),
  /// since more shared memory per block costs larger windows resident warps.
  bool keepsScoreGradients = false;
  int64_t windowScoreStride = 0;
  /// The block's shared buffers (see GpuBackwardKernel::Scratch) and the
  /// bytes they take (layoutSharedBuffers).
  SmallVector<SharedBuffer, 12> sharedBuffers;
  int64_t sharedBytes;
  int64_t lanesPerRow;  // L: lanes sharing a row's (or key's) channels
  int64_t rowsPerRound; // 32 / L rows (or keys) per round of the warp
  int64_t laneChannels; // ceil(d / L) channels per lane
};

/// Elements per row of the tensor-core form's tile of dS (16 x 16 f32):
/// an odd stride, so that the lanes reading a column of it (the table's
/// gradient, the A fragment of dS) hit different banks.
inline constexpr int64_t kScoreTileStride = 17;

/// The GPU backward: a warp per (window, head) in the steps of emitItem,
/// then the reduction of the table's gradient.
class GpuBackwardKernel : public KernelEmitter {
public:
  GpuBackwardKernel(ImplicitLocOpBuilder &b, FusedAttentionOpInterface op,
                    const KernelGeometry &g, const GpuBackwardShape &shape)
      : KernelEmitter(b, op, g), shape(shape),
        grad(cast<FusedWindowAttentionGradOp>(op.getOperation())) {}

  LogicalResult emit(KernelTarget target, bool hoistScratch);

private:
  struct Scratch;
  struct Item;
  struct QueryRow;
  struct KeyColumn;
  struct PairOperands;
  struct PairGradient {
    Value p, ds;
  };

  /// The work of one item, (window, head) `itemIndex`: of its one warp
  /// (the lane form), or of the block's warps (the tensor-core form; on the
  /// GPU `warpIndex` is the thread's warp, on the host null: the warps in
  /// turn).
  void emitItem(Warp &warp, Value itemIndex, const Scratch &scratch,
                Value partials, Value warpIndex);
  void emitViews(Value partials);
  void stageWindow(Item &item);
  /// A token's row of an operand: its flat view and address.
  using RowSource = std::function<std::pair<Value, RowAddress>(Value token)>;
  void stageRows(Item &item, Value dest, const RowSource &source);
  void stageRowChunks(Item &item,
                      ArrayRef<std::pair<Value, RowSource>> destsAndSources);
  QueryRow loadQueryRow(Item &item, Value round);
  void softmaxStatistics(Item &item, QueryRow &row);
  void gradientOfQueriesAndTable(Item &item, const QueryRow &row);
  KeyColumn loadKeyColumn(Item &item, Value round);
  PairOperands pairOfRow(Item &item, const KeyColumn &column, Value i,
                         ArrayRef<Value> query, ArrayRef<Value> outputGradient);
  void gradientOfKeysAndValues(Item &item, Value round);
  void storeTableGradient(Item &item, Value itemIndex);
  void reduceTableGradients(Value partials, KernelTarget target);

  //===--- the tensor-core form (emitTensorCoreItem) -----------------------===//
  struct PairTile;
  void emitTensorCoreItem(Item &item, Value itemIndex);
  /// Runs `body` for each warp of the block (item.warpIndex set): on the
  /// GPU the thread's own, then (`barrier`) the block's barrier; on the
  /// host each in turn.
  void forEachWarp(Item &item, function_ref<void()> body,
                   bool barrier = true);
  /// Runs `body(token0)` for the warp's tiles: w, w + W, ... of the N' / 16.
  void forEachTileOfWarp(Item &item, function_ref<void(Value)> body);
  void tileSoftmaxStatistics(Item &item, Value query0);
  void gradientOfKeyTile(Item &item, Value key0);
  void gradientOfQueryTile(Item &item, Value query0);
  PairTile pairGradientTile(Item &item, ArrayRef<OperandTerms> x,
                            ArrayRef<OperandTerms> y, Value row0,
                            Value column0, bool keysAreRows);
  void addTileToTableGradient(Item &item, Value key0, Value query0);
  void keepScoreGradients(Item &item, Value key0, Value query0,
                          ArrayRef<Fragment> transposed);
  /// scale times 16 token rows of dq, dk or dv (C fragments of 8 channels)
  /// to their rows; tokens past N store nothing.
  void storeGradientTile(Item &item, Input which, Value token0,
                         ArrayRef<Fragment> rows, double scale);
  /// An mma operand fragment (A: 16 x 16, `isA`; B: 16 x 8) read from
  /// token rows of `stride` elements: element (r, c) is rows[t stride + e]
  /// with (t, e) = (token0 + r, channel0 + c) where `tokenIsRow`, else
  /// (token0 + c, channel0 + r); in the element type.
  Fragment loadOperand(Item &item, bool isA, Value rows, int64_t stride,
                       bool tokenIsRow, Value token0, Value channel0);
  /// The A fragments (d / 16) of the 16 token rows of `rows` from `token0`
  /// on.
  SmallVector<OperandTerms> loadRowTile(Item &item, Value rows, Value token0);
  /// The f32 C fragments of two adjacent 8-column tiles as the A operand of
  /// their 16 columns (MmaLayout::cPairIsA): rounded to the element type,
  /// as its terms.
  OperandTerms pairAsOperand(Item &item, ArrayRef<Fragment> pair);
  /// A fragment as the mma operand's terms (Warp::splitIntoTerms).
  OperandTerms splitIntoTerms(Item &item, const Fragment &values);
  /// X Yᵀ for 16 rows of X (d / 16 A fragments) and the 16 token rows of
  /// `rows` from `token0` on: two C fragments of 8 columns.
  SmallVector<Fragment> productTile(Item &item, ArrayRef<OperandTerms> x,
                                    Value rows, Value token0);
  /// The lane's row or column of an mma fragment, plus `offset`.
  Value laneIndex(Item &item, const LaneCoordinate &coordinate, int64_t offset);
  /// s = product scale log2 e + R[P(i) - P(j) + c] (+ the mask's term).
  Value scoreOf(Item &item, const PairOperands &pair, Value product);
  /// s without the mask's term.
  Value biasedScore(Item &item, const PairOperands &pair, Value product);
  /// The mask's term of `pair`: mask log2 e where the labels differ, else 0.
  Value maskTerm(Item &item, const PairOperands &pair);
  /// The tile's scores (of `pairs`, in order) with the mask's terms, in a
  /// branch that windows of one region skip (maskedUnlessOneRegion); as
  /// they are without a shift mask.
  SmallVector<Value> addShiftMask(Item &item, ArrayRef<PairOperands> pairs,
                                  ValueRange scores);

  /// The table entry of a pair, P(i) - P(j) + c (a lane's index; BEiT:
  /// of the grid positions, or the class token's rows).
  Value tableEntry(Item &item, const PairOperands &pair);
  /// G[entry of (i, j)] += ds for the lane's row i and a key j the lanes
  /// share, each entry's terms in a fixed order.
  void addToTableGradient(Item &item, const QueryRow &row,
                          const PairOperands &pair, Value ds);
  /// Whether `token` (index, uniform or lanes) is BEiT's class token
  /// (token 0); null without one.
  Value isClassToken(Value token);
  /// s_ij, p_ij and ds_ij of one (query row, key) pair.
  Value score(Item &item, const PairOperands &pair);
  Value probability(Item &item, const PairOperands &pair);
  PairGradient pairGradient(Item &item, const PairOperands &pair);
  /// The lane's channels of token `token`'s row of `rows` (shared
  /// memory), f32; channels past d read zero.
  SmallVector<Value> loadRow(Item &item, Value rows, Value token);
  /// Channel e of the lane's share, and whether it is one of the d.
  Value laneChannel(Item &item, int64_t e);
  Value isChannel(Item &item, int64_t e);
  /// Stores scale * `row` (f32) as token `token`'s row of the gradient of
  /// q, k or v, where `mask` holds and the token is a real one.
  void storeGradientRow(Item &item, Input which, Value token, Value mask,
                        ArrayRef<Value> row, double scale);
  /// Runs `body(t, valid)` for the elements t = lane + 32 s of [0, count)
  /// that the warp's lanes take, in a loop over s; `valid` masks the lanes
  /// past the end.
  void forEachLaneElement(Item &item, int64_t count,
                          function_ref<void(Value, Value)> body);
  /// forLoop (step 1) marked for LLVM, and so for the PTX, as not to be
  /// unrolled: ptxas would unroll the row and key loops and interleave
  /// their iterations, which takes more registers than a thread has.
  ValueRange
  rolledLoop(Value lb, Value ub, ValueRange init,
             function_ref<SmallVector<Value>(Value, ValueRange)> body);
  /// Runs `body(round)` for the rounds of rowsPerRound tokens of the
  /// window.
  void forEachRound(function_ref<void(Value)> body);
  /// x · y over the d channels: the lane's share, then the sum of the L
  /// lanes' (a butterfly of shuffles: every lane gets the same bits).
  Value dot(Item &item, ArrayRef<Value> x, ArrayRef<Value> y);
  /// [p q + min(p, r), ...): the first of `total` things part `p` of
  /// `parts` takes (q = total / parts, r = total % parts).
  Value firstOfShare(Value total, int64_t parts, Value part);

  const GpuBackwardShape shape;
  FusedWindowAttentionGradOp grad;
  /// Flat views made where a kernel's body starts: the table, dout, the
  /// gradients of q, k, v and the items' partial table gradients.
  Value flatTable, flatOutputGradient, flatPartials;
  SmallVector<Value, 3> flatGradients;
};

/// The shared memory of one item: the rows of q, k, v and dout (N rows of
/// rowStride elements, the element type); the head's table R (T, f32,
/// times log2 e); per token its table offset P(t) and region label (i32);
/// per query row lse_i and D_i (f32); G, the item's table gradient (T,
/// f32).
struct GpuBackwardKernel::Scratch {
  Value queries, keys, values, outputGradients;
  Value table, tokenOffsets, tokenLabels, logSumExp, delta, tableGradient;
  /// The tensor-core form's tiles of dS (16 x 16, f32, kScoreTileStride
  /// per key), one per warp; null in the lane form.
  Value scoreGradients;
  /// The window's dS (GpuBackwardShape::keepsScoreGradients), else null.
  Value windowScoreGradients;
};

/// What the steps of one item share.
struct GpuBackwardKernel::Item {
  Item(Warp &warp, const Scratch &scratch) : warp(warp), scratch(scratch) {}

  Warp &warp;
  const Scratch &scratch;
  Value w, h, lane;
  /// lane = L slot + part: the lane's row (or key) of a round, and its
  /// share of the channels, [part ceil(d / L), ...).
  Value slot, part;
  /// lane = 4 g + t: g and 2t, the terms of the fragments' coordinates (the
  /// tensor-core form).
  Value group, pair;
  /// The block's warp doing the work (uniform; 0 in the lane form).
  Value warpIndex;
  /// part == 0: the one lane of a row that writes what the row's L lanes
  /// share.
  Value isFirstPart;
  /// The window's position in its image, for the shift mask (else null),
  /// and whether the window holds one region only (i1).
  Value windowInImage, oneRegion;
  /// Lane constants (f32): the score scale and the mask value in base 2.
  Value zero, scaleLog2e, maskLog2e;
};

/// The operands of one (query i, key j) pair, as lane values.
struct GpuBackwardKernel::PairOperands {
  ArrayRef<Value> query, key, value, outputGradient;
  Value rowOffset, keyOffset, rowLabel, keyLabel; // P(i), P(j), labels: i32
  Value logSumExp, delta;
  /// BEiT: whether i and j are the class token (i1; null without one).
  Value rowIsClass, keyIsClass;
};

} // namespace mlir::rpe::detail

#endif // RPE_CODEGEN_GPUBACKWARDKERNEL_H
