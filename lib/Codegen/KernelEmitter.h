//===- KernelEmitter.h - emitter of the fused attention kernels --*- C++
//-*-===//
//
// The geometry and the emitter shared by the kernels of
// rpe.fused_window_attention: the CPU tiles (TilesKernel.cpp), the
// row-parallel form (RowsKernel.cpp) and the warp-level tensor-core form
// (WarpKernel.cpp); the steps they share are in KernelEmitter.cpp. Private
// to lib/Codegen: the rest of the compiler sees Rpe/Codegen.h.
//
//===----------------------------------------------------------------------===//

#ifndef RPE_CODEGEN_KERNELEMITTER_H
#define RPE_CODEGEN_KERNELEMITTER_H

#include "Rpe/Codegen.h"
#include "Rpe/FeatureMapAddressing.h"
#include "Rpe/Passes.h"
#include "Rpe/RpeOps.h"
#include "Rpe/WindowGeometry.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

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
  int64_t center; // (T - 1) / 2

  KernelGeometry(FusedAttentionOpInterface op, int64_t width,
                 int64_t scoreBlockBytes)
      : window(op.getWindow()), heads(op.getNumHeads()),
        tokens(op.getNumTokens()), headDim(op.getHeadDim()),
        tableRows(getNumTableRows(op.getWindow())),
        lanes(std::min<int64_t>(width, 8)), computeLanes(width) {
    // 16 lanes means AVX-512 and its 32 registers; else AVX2's 16.
    registers = computeLanes >= 16 ? 32 : 16;
    rowLength = window.back();
    paddedRowLength = llvm::divideCeil(rowLength, lanes) * lanes;
    keyRows = tokens / rowLength;
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
    center = (tableRows - 1) / 2;
  }

  /// The key at column `column` of the padded key layout (row r = column /
  /// Wpad, x = column % Wpad: key r * Wx + x), or none for the padding at
  /// the end of each row and the columns past the last row.
  std::optional<int64_t> keyOfColumn(int64_t column) const {
    int64_t r = column / paddedRowLength, x = column % paddedRowLength;
    if (r >= keyRows || x >= rowLength)
      return std::nullopt;
    return r * rowLength + x;
  }

  /// P(t) of a token known at compile time (FusedKernelEmitter::tableOffset
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

/// Compile-time shape of the warp-level (tensor-core) kernel; see
/// WarpKernel.cpp.
struct WarpTileShape {
  Type element;          // f16 or bf16: the mma.sync operand type
  int64_t queryTiles;    // ceil(N / 16): m16 tiles of query rows
  int64_t paddedTokens;  // 16 * queryTiles: keys and values, zero padded
  int64_t keyBlock;      // keys per online-softmax step (16..64)
  int64_t rowStride;     // elements per q, k, v row in shared memory
  int64_t warpsPerBlock; // (window, head) items per GPU block
  int64_t sharedBytes;   // shared memory per warp
};

/// Tile sizes of the warp kernel a user may fix; 0 lets the kernel choose.
struct WarpTileOptions {
  int64_t keyBlock = 0;      // keys per online-softmax step
  int64_t warpsPerBlock = 0; // (window, head) items per block
};

/// The warp kernel's shape for `op`. Nothing when the op does not qualify
/// (it gets the row kernel): f16/bf16 operands, head_dim a multiple of 16
/// (at most 256), and one warp's keys, values, query tile and table within
/// a block's 48 KiB of static shared memory. Failure, with an error on the
/// op, when `options` ask for tiles the op cannot have.
FailureOr<std::optional<WarpTileShape>>
getWarpTileShape(FusedWindowAttentionOp op, const WarpTileOptions &options);

/// What a caller of the tiles kernel's softmax step adds to its rows.
struct SoftmaxRowOptions {
  /// Work for query row i, interleaved with the row's.
  function_ref<void(Value)> eachRow;
  /// The scores' factor (a vector), applied with the bias: S * f + bias.
  Value scoreScale;
  /// A flat bf16 [rows, denseProbabilityRow()] buffer that takes the
  /// probabilities (rounded; keys unpadded) instead of the scores buffer.
  Value bf16Probabilities;
  /// The scores of rows lr0 .. lr0 + mr - 1 (blocks of producedRows), in
  /// registers, instead of loads from the scores buffer.
  function_ref<SmallVector<SmallVector<Value>>(Value, int64_t)> produceScores;
  int64_t producedRows = 1;
};

class Warp;
struct WarpScratch;
struct WarpItem;
struct QueryTile;
struct OnlineSoftmaxState;
struct LaneCoordinate;

/// A lane's elements of one mma.sync operand or accumulator.
using Fragment = SmallVector<Value, 8>;

/// Builds the kernel. Holds the builder, the operands and the geometry; each
/// step of the algorithm is one method.
class FusedKernelEmitter {
public:
  FusedKernelEmitter(ImplicitLocOpBuilder &b, FusedAttentionOpInterface op,
                     const KernelGeometry &g)
      : b(b), op(op), g(g), f32(b.getF32Type()),
        vecType(VectorType::get({g.lanes}, b.getF32Type())),
        computeType(VectorType::get({g.computeLanes}, b.getF32Type())) {}

  /// The CPU kernel: register-blocked tiles (the steps above), with its
  /// scratch allocated once (`hoistScratch`) or per (window, head). With
  /// `bf16Dot`, bf16 operands take AVX512-BF16 dot products
  /// (PairedBf16.cpp) where the shape allows; with `avx512` (or
  /// `bf16Dot`), 16-lane exponentials take AVX-512's rounding and scaling.
  LogicalResult emit(const FusedKernelOptions &options);
  /// The row-parallel form: one online softmax per query row, as nested
  /// scf.parallel loops (host) or one gpu.launch (block = (window, head),
  /// thread = query row).
  LogicalResult emitRowParallel(bool gpuLaunch);
  /// The warp-level form (WarpKernel.cpp): one warp per (window, head),
  /// scores and P·v on m16n8k16 tensor-core tiles (mma.sync), an online
  /// softmax over blocks of keys with quad shuffles for the row max and
  /// sum. On the host (`gpuLaunch` false) each warp is emulated by
  /// vectors of its 32 lanes, which is how its numbers are tested; its
  /// scratch is allocated as `emit`'s is.
  LogicalResult emitWarpTiles(const WarpTileShape &shape, bool gpuLaunch,
                              bool hoistScratch);
  /// The gradient's CPU kernel (BackwardKernel.cpp), for an
  /// rpe.fused_window_attention_grad op: the forward's tiles, recomputed,
  /// and the products of the backward on the same micro-kernels. Its item
  /// loop is sequential (the items add to one table gradient); its scratch
  /// is allocated once.
  LogicalResult emitBackward();

private:
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
  Value convertFloat(Value value, Type element) {
    Type type = value.getType();
    Type target = element;
    if (auto vector = dyn_cast<VectorType>(type))
      target = vector.clone(element);
    Type from = getElementTypeOrSelf(type);
    if (from == element)
      return value;
    if (from.getIntOrFloatBitWidth() < element.getIntOrFloatBitWidth())
      return arith::ExtFOp::create(b, target, value);
    return arith::TruncFOp::create(b, target, value);
  }
  Value toF32(Value v) { return convertFloat(v, f32); }
  /// An index (or the lanes of one) as i32.
  Value toI32(Value v) {
    Type type = b.getI32Type();
    if (auto lanes = dyn_cast<VectorType>(v.getType()))
      type = lanes.clone(type);
    return arith::IndexCastOp::create(b, type, v);
  }
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

  /// `for iv in [lb, ub) step step` carrying `init`.
  ValueRange forLoop(Value lb, Value ub, int64_t step, ValueRange init,
                     function_ref<SmallVector<Value>(Value, ValueRange)> body);
  /// Runs `body(localRow, rows)` on blocks of `blockRows` rows of [0, count),
  /// then on the remaining rows one at a time; a constant count is split
  /// into blocks of even size (at most `blockRows`) and one of the rest.
  void forRowBlocks(Value count, int64_t blockRows,
                    function_ref<void(Value, int64_t)> body);
  /// Query rows of the block starting at row `qb`: min(block, N - qb), a
  /// constant when one block holds every row.
  Value queryBlockRows(Value qb) {
    if (g.queryBlock == g.tokens)
      return index(g.tokens);
    return arith::MinUIOp::create(
        b, index(g.queryBlock), arith::SubIOp::create(b, index(g.tokens), qb));
  }
  /// j' = j + (j / Wx) * (Wpad - Wx): the padded position of token j.
  Value paddedPosition(Value token);
  /// P(t) for a token index `t`.
  Value tableOffset(Value token);

  //===--- rows of q, k, v and out ------------------------------------===//
  /// A token's head_dim channels: element e at `memref[offset + e]`.
  struct Row {
    Value memref, offset;
  };
  enum class Input { Query = 0, Key = 1, Value = 2 };
  /// Flat views and, for the token layout, padding rows; once per call.
  void emitFlatViews();
  Row inputRow(Input which, Value w, Value h, Value token);
  /// Row `token` of (w, h) in the output's layout, in `flat` (default: the
  /// output's view); padding tokens get `discard`.
  Row outputRow(Value w, Value h, Value token, Value discard,
                Value flat = Value());
  Value loadElement(Row row, Value e) {
    return toF32(memref::LoadOp::create(b, row.memref, add(row.offset, e)));
  }

  //===--- SwinV2's cosine attention ------------------------------------===//
  /// exp(min(logit_scale[h], ln 100)), the factor of head h's cosine
  /// scores (f32 scalar); null for the plain attention.
  Value cosineHeadScale(Value h);
  /// 1 / max(sqrt(sumOfSquares), 1e-12): the inverse of the divisor of
  /// PyTorch's F.normalize, for a scalar sum of squares.
  Value reciprocalNorm(Value sumOfSquares);
  /// reciprocalNorm of a q or k row's head_dim channels, read as vectors of
  /// the micro-kernels' width.
  Value reciprocalRowNorm(Row row);

  //===--- the row-parallel form ---------------------------------------===//
  /// Element e of token `token`'s row of q, k or v (f32): a padding token
  /// reads its padding row, or zero.
  struct RowAddress {
    Value offset, valid;
  };
  RowAddress rowAddress(Value w, Value h, Value token,
                        Input which = Input::Query);
  /// A token's row in a feature map of `parts` rows of H*d channels per
  /// token (3 for packed q, k, v), row `part`.
  RowAddress mapRowAddress(Value w, Value h, Value token, int64_t parts,
                           int64_t part);
  /// The same for the output row (merged heads: [b, t, h * d + e]).
  RowAddress outputAddress(Value w, Value h, Value token);
  Value loadInputElement(Input which, RowAddress row, Value h, int64_t e);
  /// Swin's region label of token `token` of the image's window `wi`, in
  /// closed form: per axis [0, n-w) -> 0, [n-w, n-s) -> 1, [n-s, n) -> 2.
  Value regionLabel(Value wi, Value token);
  /// 2^x on a vector of x <= 0, -inf included (to f32's accuracy, or
  /// bf16's).
  Value exp2(Value x, bool bf16Accuracy = false);
  Value storeDenseProbabilities(ArrayRef<Value> probabilities, Value buffer,
                                Value lr);
  /// Window `w`'s index into its mask, in every kernel: into the shift's
  /// region labels (per image) or the explicit mask operand, or null.
  Value maskWindow(Value w);
  /// Windows of the op's batch: q's first extent, or images times windows
  /// per image.
  Value countWindows();
  /// The flat views of q, k, v, out (and the padding rows), made where a
  /// GPU kernel's body starts so that the outlined kernel captures only the
  /// operands themselves.
  void emitOperandViews(bool withPaddingRows = true);
  /// The work of query row `i` of (window w, head h).
  void emitRow(Value w, Value h, Value i);

  /// The host loop over the op's (window, head) items, `item = w * heads +
  /// h`: one scf.parallel marked `rpe.item_loop`, so that `rpe-item-range`
  /// can hand each of a caller's threads a range of items.
  scf::ParallelOp createItemLoop(Value items);

  /// Records on the enclosing function how many (window, head) items a
  /// block of the GPU kernel takes: hosts that launch the kernel
  /// themselves (swin-aot's runtime) size the grid from it.
  void setItemsPerBlock(int64_t items) {
    RpeDialect::ItemsPerBlockAttrHelper(b.getContext())
        .setAttr(op->getParentOfType<FunctionOpInterface>(),
                 b.getI64IntegerAttr(items));
  }

  //===--- the warp-level form (WarpKernel.cpp) --------------------------===//
  /// The work of one warp: (window, head) `itemIndex`, in the steps below.
  void emitWarpItem(Warp &warp, const WarpTileShape &shape, Value itemIndex,
                    const WarpScratch &scratch);
  void stageTableAndKeys(WarpItem &item);
  QueryTile loadQueryTile(WarpItem &item, Value tile);
  SmallVector<Fragment> emitScoreTile(WarpItem &item, const QueryTile &tile,
                                      Value key0);
  void addBiasAndMask(WarpItem &item, const QueryTile &tile, Value key0,
                      MutableArrayRef<Fragment> scores);
  SmallVector<Fragment> updateOnlineSoftmax(WarpItem &item,
                                            OnlineSoftmaxState &state,
                                            ArrayRef<Fragment> scores);
  void accumulateValues(WarpItem &item, Value key0,
                        ArrayRef<Fragment> probabilities,
                        MutableArrayRef<Fragment> out);
  void storeOutputTile(WarpItem &item, const QueryTile &tile,
                       const OnlineSoftmaxState &state);
  /// A lane's row or column in an mma fragment, plus `offset`.
  Value laneIndex(const WarpItem &item, const LaneCoordinate &coordinate,
                  int64_t offset);
  /// A 16-byte chunk of a token row of q, k or v (its padding row for a
  /// padding token), in the shape's element type.
  SmallVector<Value> loadInputChunk(Warp &warp, const WarpTileShape &shape,
                                    Input which, RowAddress row, Value h,
                                    Value column);
  /// Copies `count` token rows of q, k or v from `first` on into `dest`
  /// at `destBase` (element type of the shape), then zeros up to `total`.
  void stageTokenRows(Warp &warp, const WarpTileShape &shape, Input which,
                      Value w, Value h, Value first, Value count, int64_t total,
                      Value dest, Value destBase);

  //===--- the gradient (BackwardKernel.cpp) ------------------------------===//
  struct BackwardScratch;
  /// Row `token` of (w, h) in the gradient of q, k or v: the input's
  /// address in the gradient's buffer; padding tokens write `discard`.
  Row gradientRow(Input which, Value w, Value h, Value token, Value discard);
  void emitBackwardItem(Value w, Value h, Value image, Value rtab, Value labels,
                        Value tableGradient, const BackwardScratch &scratch);
  void emitScoreGradients(Value w, Value h, const BackwardScratch &scratch,
                          Value tableGradient, Value qb, Value rows);
  void storeTableGradient(Value tableGradient);

  //===--- the steps --------------------------------------------------===//
  /// What the tiles kernels add to the scores, made once per call: the
  /// reversed tables and the shift's region labels (null without a shift);
  /// an explicit mask operand's flat view goes to `flatMask`.
  struct ScoreTerms {
    Value rtab, labels;
  };
  FailureOr<ScoreTerms> emitScoreTerms();
  Value emitReversedTables();
  Value emitPackRows(function_ref<Row(Value)> row, Value scratch);
  Value emitRegionLabels();
  Value constantTable(StringRef prefix, ArrayRef<int64_t> shape,
                      ArrayRef<int32_t> values);
  void emitTokenPositions();
  void emitPackTransposed(Input which, Value w, Value h, Value kt,
                          double scale);
  void emitPrefetchRows(Value w, Value h, Value token);
  void zeroExtraKeyColumns(Value kt);
  void emitScores(function_ref<Row(Value)> leftRow, Value kt, Value scores,
                  Value qb, Value rows, bool keyPadding);
  SmallVector<Value> emitScoreBlock(ArrayRef<Row> queries, Value kt, int64_t c0,
                                    int64_t nc, bool keyPadding);
  SmallVector<Value> scoreInit(int64_t mr, int64_t c0, int64_t nc,
                               bool keyPadding);
  int64_t scoreBlockRows(int64_t vectors);
  /// A micro-kernel block's mr * n accumulators as mr rows of n.
  static SmallVector<SmallVector<Value>> splitRows(ArrayRef<Value> acc,
                                                   int64_t mr) {
    SmallVector<SmallVector<Value>> rows;
    int64_t n = acc.size() / mr;
    for (int64_t m = 0; m < mr; ++m)
      rows.emplace_back(acc.slice(m * n, n));
    return rows;
  }
  void
  emitRowCombination(Value rows, Value count,
                     function_ref<Value(Value, Value)> coefficient,
                     Value matrix, Value base,
                     function_ref<void(Value, int64_t, int64_t, Value)> finish);
  void emitSoftmaxRows(Value h, Value image, Value rtab, Value labels,
                       Value scores, Value invSums, Value qb, Value rows,
                       const SoftmaxRowOptions &extra = SoftmaxRowOptions());
  Value maxSkippingNaN(Value s, Value max);
  /// Per-row reductions of a group of rows in one vector (reduceRows): row
  /// r's result fills segment r, lanes [r * segment, (r + 1) * segment).
  struct ReducedRows {
    Value value;
    int64_t segment;
    int64_t rows;
    int64_t lane(int64_t row) const { return row * segment; }
    Value broadcast(OpBuilder &b, int64_t row) const;
  };
  void reduceRows(ArrayRef<Value> rows, int64_t maxRows,
                  function_ref<Value(Value, Value)> combine,
                  function_ref<void(int64_t, const ReducedRows &)> done);
  ReducedRows reduceRowsInOneVector(ArrayRef<Value> rows,
                                    function_ref<Value(Value, Value)> combine);

  //===--- AVX512-BF16 products (PairedBf16.cpp) ------------------------===//
  bool canPairBf16();
  /// One store of a row of bf16 probabilities (denseProbabilityStores):
  /// `vectors` of the row's vectors from `vector` on, permuted to `lanes`,
  /// stored at key `first`.
  struct DenseStore {
    int64_t vector, vectors, first;
    SmallVector<int64_t> lanes;
  };
  SmallVector<DenseStore> denseProbabilityStores();
  /// bf16 elements per row of P for the paired P·v: the N keys, then what
  /// the last store writes past them, rounded to 16.
  int64_t denseProbabilityRow();
  Value broadcastPair(Row row, Value x);
  void emitPackKeyPairs(Value w, Value h, Value kp);
  void emitPackValuePairs(Value w, Value h, Value vp);
  void emitPairDotProducts(Value rows, function_ref<Row(Value)> leftRow,
                           Value right, int64_t vectors, bool keyPadding,
                           function_ref<void(Value, int64_t, Value)> finish);
  SmallVector<Value> emitPairDotBlock(ArrayRef<Row> lefts, Value right,
                                      int64_t c0, int64_t nc, bool keyPadding);
  void emitOutput(Value w, Value h, Value scores, Value invSums, Value values,
                  Value valueBase, Value discard, Value qb, Value rows);

  ImplicitLocOpBuilder &b;
  FusedAttentionOpInterface op;
  const KernelGeometry &g;
  Type f32;
  VectorType vecType, computeType;
  /// AVX-512F instructions may be used (x86vector): see emit().
  bool avx512 = false;
  /// 1-D views of q, k, v, out; padding value rows (token layout).
  SmallVector<Value, 3> flatInputs, paddingRows;
  Value flatOutput;
  /// A 1-D view of the op's explicit mask operand, if any.
  Value flatMask;
  /// The gradient's 1-D views of dq, dk, dv and of dout.
  SmallVector<Value, 3> flatGradients;
  Value flatOutputGradient;
  std::optional<FeatureMap> featureMap;
  /// The tiles kernel's constant table of token positions
  /// (emitTokenPositions), which mapRowAddress reads when it is set.
  Value tokenPositionTable;
};

/// Transposes 8 vectors of 8 lanes (of any 32-bit element) in registers.
void transpose8x8(ImplicitLocOpBuilder &b, MutableArrayRef<Value> rows);

/// A 1-D view of a contiguous memref, of one type for all (any size and
/// offset), so that rows of different buffers can be selected between.
Value flatten(OpBuilder &b, Location loc, Value memref);

} // namespace mlir::rpe::detail

#endif // RPE_CODEGEN_KERNELEMITTER_H
