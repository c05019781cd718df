//===- KernelEmitter.h - what the fused attention kernels share -*- C++ -*-===//
//
// The compile-time geometry of a fused attention and the context every
// kernel of it is emitted in: the builder, the op, its operands' flat views
// and the addressing of their token rows, table offsets and region labels,
// loops, and the loop (CPU) or launch (GPU) over the op's (window, head)
// items. Each kernel is a class of its own on top of it (Kernels.h lists
// them). Private to lib/Codegen: the rest of the compiler sees
// Rpe/Codegen.h.
//
//===----------------------------------------------------------------------===//

#ifndef RPE_CODEGEN_KERNELEMITTER_H
#define RPE_CODEGEN_KERNELEMITTER_H

#include "Rpe/Codegen.h"
#include "Rpe/FeatureMapAddressing.h"
#include "Rpe/NvptxTarget.h"
#include "Rpe/RpeOps.h"
#include "Rpe/WindowGeometry.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/TypeUtilities.h"

#include <limits>
#include <optional>

namespace mlir::rpe::detail {

/// The tiles and warp kernels compute their softmax in base 2: log2(e) is
/// folded into the scale of the scores, into the table and into the mask
/// value (all three, or the scores would mix bases), and exp(s - m) becomes
/// 2^(s' - m').
constexpr double kLog2E = 1.4426950408889634;

/// The running max an online softmax (rows and warps kernels) starts from:
/// the lowest finite float, not -inf. Keys whose scores are -inf then get
/// p = exp(-inf - m) = 0 and leave the correction exp(m - m') = 1, where
/// from -inf they would give exp(-inf - -inf) = NaN: a row stays finite
/// unless all of its scores are -inf (then l = 0 and out = 0 / 0 = NaN, as
/// in PyTorch). NaN and +inf scores still make m NaN or +inf.
constexpr float kOnlineSoftmaxInitialMax = -std::numeric_limits<float>::max();

/// Compile-time shape of one fused kernel.
struct KernelGeometry {
  SmallVector<int64_t> window;
  int64_t heads, tokens, headDim, tableRows;
  int64_t lanes;             // L: f32 lanes of the softmax, min(width, 8)
  int64_t computeLanes;      // Lc: f32 lanes of the micro-kernels (the width)
  int64_t registers;         // vector registers the micro-kernels block for
  int64_t rowLength;         // Wx: innermost window extent
  int64_t paddedRowLength;   // Wpad = roundup(Wx, L)
  int64_t keyRows;           // R = N / Wx
  int64_t paddedTokens;      // N' = R * Wpad
  int64_t scoreColumns;      // roundup(N', Lc): columns of kᵀ and the scores
  int64_t keyVectors;        // N' / L
  int64_t computeKeyVectors; // scoreColumns / Lc
  int64_t rowVectors;        // Wpad / L
  int64_t valueVectors;      // ceil(d / Lc)
  int64_t queryBlock;        // query rows per block of scores
  /// P(t) = sum_a coord_a(t) * tableStride[a]: the table offset of a token.
  SmallVector<int64_t> tableStrides;
  int64_t center; // (T - 1) / 2, T = gridTableRows
  /// BEiT's class token (op.getClassToken()): token 0, alone at column 0 of
  /// a key row of its own (row 0) before the grid's rows; grid token t is
  /// token t + 1. The table has T + 3 rows (tableRows), Swin's T first.
  bool classToken;
  int64_t gridTableRows; // T = prod(2w - 1)
  int64_t firstGridRow;  // the grid's first key row (and token): 0 or 1
  /// The class token's stretches of the tiles kernels' reversed table (and
  /// of the gradient's G), Wpad columns each after Swin's T + Wpad:
  /// class -> token (table[T] in every lane), token -> class (table[T + 1])
  /// and class -> class (table[T + 2]) in lane 0.
  int64_t classToTokenOffset, tokenToClassOffset, classToClassOffset;
  /// Columns of the reversed table: T + Wpad (+ 3 Wpad).
  int64_t reversedTableColumns;

  KernelGeometry(FusedAttentionOpInterface op, int64_t width,
                 int64_t scoreBlockBytes)
      : window(op.getWindow()), heads(op.getNumHeads()),
        tokens(op.getNumTokens()), headDim(op.getHeadDim()),
        tableRows(getNumTableRows(op.getWindow(), op.getClassToken())),
        lanes(std::min<int64_t>(width, 8)), computeLanes(width),
        classToken(op.getClassToken()),
        gridTableRows(getNumTableRows(op.getWindow())),
        firstGridRow(classToken ? 1 : 0) {
    // 16 lanes means AVX-512 and its 32 registers; else AVX2's 16.
    registers = computeLanes >= 16 ? 32 : 16;
    rowLength = window.back();
    paddedRowLength = llvm::divideCeil(rowLength, lanes) * lanes;
    keyRows = (tokens - firstGridRow) / rowLength + firstGridRow;
    paddedTokens = keyRows * paddedRowLength;
    scoreColumns = llvm::divideCeil(paddedTokens, computeLanes) * computeLanes;
    keyVectors = paddedTokens / lanes;
    computeKeyVectors = scoreColumns / computeLanes;
    rowVectors = paddedRowLength / lanes;
    valueVectors = llvm::divideCeil(headDim, computeLanes);
    int64_t rowsPerBlock = scoreBlockBytes / (scoreColumns * 4);
    queryBlock = std::clamp<int64_t>(rowsPerBlock, 1, tokens);
    tableStrides.assign(window.size(), 1);
    for (int64_t a = window.size() - 2; a >= 0; --a)
      tableStrides[a] = tableStrides[a + 1] * (2 * window[a + 1] - 1);
    center = (gridTableRows - 1) / 2;
    classToTokenOffset = gridTableRows + paddedRowLength;
    tokenToClassOffset = classToTokenOffset + paddedRowLength;
    classToClassOffset = tokenToClassOffset + paddedRowLength;
    reversedTableColumns = classToken ? classToClassOffset + paddedRowLength
                                      : gridTableRows + paddedRowLength;
  }

  /// The key at column `column` of the padded key layout (row r = column /
  /// Wpad, x = column % Wpad: key r * Wx + x; with a class token, the class
  /// token at column 0 and key 1 + (r - 1) * Wx + x), or none for the
  /// padding at the end of each row and the columns past the last row.
  std::optional<int64_t> keyOfColumn(int64_t column) const {
    int64_t r = column / paddedRowLength, x = column % paddedRowLength;
    if (r >= keyRows)
      return std::nullopt;
    if (r < firstGridRow)
      return x == 0 ? std::optional<int64_t>(0) : std::nullopt;
    if (x >= rowLength)
      return std::nullopt;
    return firstGridRow + (r - firstGridRow) * rowLength + x;
  }

  /// P(t) of a token known at compile time (KernelEmitter::tableOffset
  /// emits it for a runtime token).
  int64_t tableOffsetOf(int64_t token) const {
    int64_t offset = 0;
    for (int64_t a = window.size() - 1; a >= 0; --a) {
      offset += (a == 0 ? token : token % window[a]) * tableStrides[a];
      token /= window[a];
    }
    return offset;
  }
};

/// A buffer of a GPU block's shared memory: `elements` of `element`,
/// aligned to `alignment` bytes.
struct SharedBuffer {
  StringRef name;
  int64_t elements;
  Type element;
  int64_t alignment;
};

/// Where a block's shared buffers sit: each buffer's byte offset, in order,
/// aligned to its alignment, and the bytes they take in all.
struct SharedLayout {
  SmallVector<int64_t> offsets;
  int64_t bytes = 0;
};

/// The layout of `buffers` in one block: the one computation of their
/// offsets and size, from which the kernels check what a block may have,
/// the views of dynamic shared memory are made and the launch is sized.
SharedLayout layoutSharedBuffers(ArrayRef<SharedBuffer> buffers);

/// A block's shared memory as KernelEmitter::createSharedBuffers made it:
/// a global per buffer (static), or none and `dynamicBytes`, the layout's
/// size, of dynamic shared memory that the buffers view.
struct SharedMemory {
  SmallVector<SharedBuffer> buffers;
  SharedLayout layout;
  SmallVector<memref::GlobalOp> globals;
  int64_t dynamicBytes = 0;
};

/// The context a kernel of one fused attention op is emitted in: the
/// builder, the op, its geometry, small builders, the flat views of the
/// operands and the addressing of their rows, and the loop or launch over
/// the op's (window, head) items. The kernels derive from it.
class KernelEmitter {
public:
  KernelEmitter(ImplicitLocOpBuilder &b, FusedAttentionOpInterface op,
                const KernelGeometry &g);

protected:
  //===--- small builders ---------------------------------------------===//
  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value splat(double v, VectorType type = {}) {
    return arith::ConstantOp::create(
        b, DenseElementsAttr::get(type ? type : vecType, b.getF32FloatAttr(v)));
  }
  // Index arithmetic is lane-polymorphic: an operand may be a uniform
  // scalar or the 32 lanes of an emulated warp (vector<32xindex>, see
  // WarpKernel.cpp); mixed operands broadcast the scalar. The address
  // helpers below (tableOffset, regionLabel) thus serve both.
  template <typename OpTy> Value binary(Value x, Value y) {
    matchLanes(x, y);
    return OpTy::create(b, x, y);
  }
  Value add(Value x, Value y) { return binary<arith::AddIOp>(x, y); }
  Value mul(Value x, Value y) { return binary<arith::MulIOp>(x, y); }
  Value mulConst(Value x, int64_t c) { return c == 1 ? x : mul(x, index(c)); }
  Value divConst(Value x, int64_t c) {
    return c == 1 ? x : binary<arith::DivUIOp>(x, index(c));
  }
  Value remConst(Value x, int64_t c) {
    return binary<arith::RemUIOp>(x, index(c));
  }
  Value minConst(Value x, int64_t c) {
    return binary<arith::MinUIOp>(x, index(c));
  }
  Value select(Value condition, Value x, Value y) {
    matchLanes(x, y);
    matchLanes(condition, x);
    matchLanes(x, y);
    return arith::SelectOp::create(b, condition, x, y);
  }
  Value compare(arith::CmpIPredicate predicate, Value x, Value y) {
    matchLanes(x, y);
    return arith::CmpIOp::create(b, predicate, x, y);
  }
  void matchLanes(Value &x, Value &y) { rpe::matchLanes(b, b.getLoc(), x, y); }
  /// `value` (a scalar or a vector of floats) with `element` elements:
  /// extended or truncated.
  Value convertFloat(Value value, Type element);
  Value toF32(Value v) { return convertFloat(v, f32); }
  /// An index (or the lanes of one) as i32.
  Value toI32(Value v);
  Value broadcast(Value scalar, VectorType type = {}) {
    return vector::BroadcastOp::create(b, type ? type : vecType, scalar);
  }
  Value loadScalar(Value memref, ValueRange indices) {
    return toF32(memref::LoadOp::create(b, memref, indices));
  }
  /// Loads `width` lanes as f32; `validLanes` < width masks the tail
  /// (zeros).
  Value loadVector(Value memref, ValueRange indices, int64_t validLanes,
                   int64_t width);
  /// Stores `width` f32 lanes in the memref's element type.
  void storeVector(Value value, Value memref, ValueRange indices,
                   int64_t validLanes, int64_t width);
  /// A private constant global of the module holding `values` (one per
  /// distinct table, found again by its contents), read by
  /// memref.get_global.
  Value constantTable(StringRef prefix, ArrayRef<int64_t> shape,
                      ArrayRef<int32_t> values);

  //===--- loops -------------------------------------------------------===//
  /// `for iv in [lb, ub) step step` carrying `init`.
  ValueRange forLoop(Value lb, Value ub, int64_t step, ValueRange init,
                     function_ref<SmallVector<Value>(Value, ValueRange)> body);
  /// Runs `body(localRow, rows)` on blocks of `blockRows` rows of [0, count),
  /// then on the remaining rows one at a time; a constant count is split
  /// into blocks of even size (at most `blockRows`) and one of the rest.
  void forRowBlocks(Value count, int64_t blockRows,
                    function_ref<void(Value, int64_t)> body);

  /// How the host loop over the (window, head) items runs (emitItemLoop).
  enum class ItemLoop {
    /// An scf.parallel, its iterations on threads: each allocates its
    /// scratch in a memref.alloca_scope of its own.
    Parallel,
    /// An scf.parallel that will run sequentially (no OpenMP, or a caller
    /// running item ranges: rpe-item-range): the scratch is allocated once
    /// before it, since an alloca scope would not survive the loop's
    /// lowering to a sequential one.
    ParallelHoistedScratch,
    /// An scf.for: the items depend on each other (the gradient's table
    /// sum); the scratch is allocated once before it.
    Sequential,
  };
  /// The host loop over the op's (window, head) items, `item = w * heads +
  /// h`, marked `rpe.item_loop` so that `rpe-item-range` can hand each of
  /// a caller's threads a range of items. `allocateScratch` (null: the
  /// kernel has none) runs where the kind of loop puts the scratch (see
  /// ItemLoop), then `body(item, items)` in the loop (`items`: the loop's
  /// bound).
  void emitItemLoop(ItemLoop kind, function_ref<void()> allocateScratch,
                    function_ref<void(Value, Value)> body);
  /// One gpu.launch over the op's items: blocks of `itemsPerBlock` items
  /// of `threadsPerItem` threads each, so ceil(items / itemsPerBlock)
  /// blocks; the host runtime reads the items per block from the
  /// function's `rpe.items_per_block`. In every thread, `inBlock(slot)`
  /// (if given) first runs for the item slot of the block the thread is
  /// in (where the slot's share of the block's memory is), then
  /// `body(item, thread)` for the items that exist (with one item per
  /// block, all of them: no check). `thread` is the thread's index in the
  /// block.
  /// `dynamicSharedBytes` (SharedMemory::dynamicBytes) is the launch's
  /// dynamic shared memory.
  void emitItemLaunch(int64_t itemsPerBlock, int64_t threadsPerItem,
                      function_ref<void(Value)> inBlock,
                      function_ref<void(Value, Value)> body,
                      int64_t dynamicSharedBytes = 0);

  /// The buffers as a block's shared memory. When their layout fits the
  /// 48 KB a block has without opting in, as private globals of the module
  /// in the workgroup address space (CUDA's static __shared__ arrays),
  /// `__rpe_shared_<name>` (renamed if taken), in order at the start of the
  /// module; kernel outlining copies them into the kernel's module. (Launch
  /// attributions would only be aligned to their element type.) Beyond it,
  /// as views at the layout's offsets of the block's dynamic shared memory,
  /// whose size the launch (emitItemLaunch) passes: static arrays cannot
  /// take more than 48 KB, and the chip's opt-in limit is for the kernel's
  /// shape to check (layoutSharedBuffers gives the bytes).
  SharedMemory createSharedBuffers(ArrayRef<SharedBuffer> buffers);
  /// The buffers of createSharedBuffers, made where a kernel's body starts.
  SmallVector<Value> getSharedBuffers(const SharedMemory &shared);

  //===--- operands and their rows --------------------------------------===//
  /// A token's head_dim channels: element e at `memref[offset + e]`.
  struct Row {
    Value memref, offset;
  };
  enum class Input { Query = 0, Key = 1, Value = 2 };
  /// Where a token's row of q, k, v or out is: `offset` in the operand's
  /// flat view, and, for the token layout of a padded map, whether it is a
  /// real token (`valid`, i1; null where every token is real).
  struct RowAddress {
    Value offset, valid;
  };

  /// The flat views of q, k, v, out and the padding rows, as operand
  /// views; padded maps without padding values get a row of zeros.
  void emitFlatViews();
  /// The flat views of q, k, v, out (and the padding rows), made where a
  /// GPU kernel's body starts so that the outlined kernel captures only the
  /// operands themselves.
  void emitOperandViews(bool withPaddingRows = true);
  /// Reads the image position of every window token from a constant table
  /// (when the map has one of a reasonable size) instead of computing the
  /// shift, padding and partition arithmetic at each row address.
  void emitTokenPositions();

  RowAddress rowAddress(Value w, Value h, Value token,
                        Input which = Input::Query);
  /// A token's row in a feature map of `parts` rows of H*d channels per
  /// token (3 for packed q, k, v), row `part`.
  RowAddress mapRowAddress(Value w, Value h, Value token, int64_t parts,
                           int64_t part);
  /// The same for the output row (merged heads: [b, t, h * d + e]).
  RowAddress outputAddress(Value w, Value h, Value token);
  /// A token's row of q, k or v; padding tokens read their padding row.
  Row inputRow(Input which, Value w, Value h, Value token);
  /// Row `token` of (w, h) in the output's layout, in `flat` (default: the
  /// output's view); padding tokens get `discard`.
  Row outputRow(Value w, Value h, Value token, Value discard,
                Value flat = Value());
  Value loadElement(Row row, Value e) {
    return toF32(memref::LoadOp::create(b, row.memref, add(row.offset, e)));
  }
  /// Element e of a token's row of q, k or v (f32): a padding token reads
  /// its padding row, or zero.
  Value loadInputElement(Input which, RowAddress row, Value h, int64_t e);

  //===--- table offsets, masks, windows ----------------------------------===//
  /// P(t) for a token index `t`.
  Value tableOffset(Value token);
  /// P of token t's grid position: P(t), or with a class token P(t - 1),
  /// the class token (t = 0) taking grid token 0's, which classTokenEntry
  /// replaces (the row and warp kernels).
  Value gridTableOffset(Value token);
  /// The table row of pair (i, j) given `grid`, its row for the grid
  /// positions of i and j: with a class token T + 2 where i and j are both
  /// the class token, T where i is (class -> token), T + 1 where j is
  /// (token -> class), each plus `base` (the table's offset where `grid`
  /// has it too); else `grid`. `rowIsClass` and `keyIsClass` are i1 (lanes
  /// or uniform).
  Value classTokenEntry(Value rowIsClass, Value keyIsClass, Value grid,
                        Value base);
  /// Swin's region label of token `token` of the image's window `wi`, in
  /// closed form: per axis [0, n-w) -> 0, [n-w, n-s) -> 1, [n-s, n) -> 2.
  Value regionLabel(Value wi, Value token);
  /// Whether window `wi` holds one region only (i1): a label is a product
  /// of per-axis intervals, so iff its first and last tokens (its corners)
  /// share it. On a shifted map all but the last row and column of windows
  /// do.
  Value holdsOneRegion(Value wi);
  /// `scores`, or `addMask(scores)` (the shift mask's terms added) in
  /// windows of more than one region: a branch on `oneRegion` (uniform:
  /// a warp's own on the GPU) that the others skip.
  SmallVector<Value>
  maskedUnlessOneRegion(Value oneRegion, ValueRange scores,
                        function_ref<SmallVector<Value>(ValueRange)> addMask);
  /// Window `w`'s index into its mask, in every kernel: into the shift's
  /// region labels (per image) or the explicit mask operand, or null.
  Value maskWindow(Value w);
  /// Windows of the op's batch: q's first extent, or images times windows
  /// per image.
  Value countWindows();
  /// The op's (window, head) items.
  Value countItems() { return mulConst(countWindows(), g.heads); }

  //===--- SwinV2's cosine attention ------------------------------------===//
  /// exp(min(logit_scale[h], ln 100)), the factor of head h's cosine
  /// scores (f32 scalar); null for the plain attention.
  Value cosineHeadScale(Value h);
  /// 1 / max(sqrt(sumOfSquares), 1e-12): the inverse of the divisor of
  /// PyTorch's F.normalize, for a sum of squares (or a warp's lanes of them).
  Value reciprocalNorm(Value sumOfSquares);

  ImplicitLocOpBuilder &b;
  FusedAttentionOpInterface op;
  const KernelGeometry &g;
  Type f32;
  VectorType vecType, computeType;
  /// The token layout's feature map (shift, padding, partition); none for
  /// the windows layout.
  std::optional<FeatureMap> featureMap;
  /// 1-D views of q, k, v, out; padding value rows (token layout).
  SmallVector<Value, 3> flatInputs, paddingRows;
  Value flatOutput;
  /// The constant table of token positions (emitTokenPositions), which
  /// mapRowAddress reads when it is set.
  Value tokenPositionTable;
};

/// A 1-D view of a contiguous memref, of one type for all (any size and
/// offset), so that rows of different buffers can be selected between.
Value flatten(OpBuilder &b, Location loc, Value memref);

} // namespace mlir::rpe::detail

#endif // RPE_CODEGEN_KERNELEMITTER_H
