//===- TileSteps.h - the steps of the CPU tiles kernels ---------*- C++ -*-===//
//
// The CPU kernels of the fused attention work on register-blocked tiles:
// the forward (TilesKernel.cpp, with the AVX512-BF16 products of
// PairedBf16.cpp) and the gradient (BackwardKernel.cpp), which recomputes
// the forward's scores and softmax. The steps they share are here: what
// the scores add (the reversed tables, the shift's region labels), the
// packing of kᵀ and of token rows, the scores' micro-kernel, the softmax
// (TileSoftmax.cpp) and the row combinations (P·v and the gradient's
// sums). TilesKernel.cpp's header describes the algorithm.
//
//===----------------------------------------------------------------------===//

#ifndef RPE_CODEGEN_TILESTEPS_H
#define RPE_CODEGEN_TILESTEPS_H

#include "KernelEmitter.h"

namespace mlir::rpe::detail {

/// What a caller of the tiles kernels' softmax step adds to its rows.
struct SoftmaxRowOptions {
  /// Work for query row i, interleaved with the row's.
  function_ref<void(Value)> eachRow;
  /// The scores' factor (a vector), applied with the bias: S * f + bias.
  Value scoreScale;
  /// Takes row `lr`'s probabilities (f32 vectors of the padded key
  /// layout) instead of the scores buffer, and returns their sum per lane.
  function_ref<Value(ArrayRef<Value>, Value)> storeProbabilities;
  /// The exponentials need no more than bf16's accuracy (the probabilities
  /// are rounded to bf16).
  bool bf16Exponentials = false;
  /// The scores of rows lr0 .. lr0 + mr - 1 (blocks of producedRows), in
  /// registers, instead of loads from the scores buffer.
  function_ref<SmallVector<SmallVector<Value>>(Value, int64_t)> produceScores;
  int64_t producedRows = 1;
};

/// The steps the CPU tiles kernels (forward and gradient) share.
class TileSteps : public KernelEmitter {
protected:
  using KernelEmitter::KernelEmitter;

  //===--- what the scores add (TileSteps.cpp) ---------------------------===//
  /// What the tiles kernels add to the scores, made once per call: the
  /// reversed tables and the shift's region labels (null without a shift);
  /// an explicit mask operand's flat view goes to `flatMask`.
  struct ScoreTerms {
    Value rtab, labels;
  };
  FailureOr<ScoreTerms> emitScoreTerms();
  Value emitReversedTables();
  Value emitRegionLabels();
  /// Where query row i's bias stretches are in the reversed table: `base`
  /// = center - P(i) (of the grid token, with a class token), and, with a
  /// class token, whether i is the class token (i1; null without one).
  struct QueryBias {
    Value base, isClass;
  };
  QueryBias queryBias(Value i);
  /// The reversed table's column of the first key of a row of keys, for
  /// query `query`: the class token's row (`classRow`), or a row of the
  /// grid whose first key has table offset `rowOffset`. The backward adds
  /// dS at the same columns of G.
  Value keyRowBias(const QueryBias &query, bool classRow, Value rowOffset);

  //===--- packing (TileSteps.cpp) -----------------------------------------===//
  /// j' = j + (j / Wx) * (Wpad - Wx): the padded position of token j.
  Value paddedPosition(Value token);
  void emitPackTransposed(Input which, Value w, Value h, Value kt,
                          double scale);
  /// The class token's key row of kᵀ: column 0 the scaled row of token 0,
  /// columns [1, Wpad) zero (or, with `zerosOnly`, only the zeros).
  void emitPackClassKey(Input which, Value w, Value h, Value kt, Value scale,
                        bool zerosOnly);
  void zeroExtraKeyColumns(Value kt);
  Value emitPackRows(function_ref<Row(Value)> row, Value scratch);
  /// reciprocalNorm of a q or k row's head_dim channels, read as vectors of
  /// the micro-kernels' width.
  Value reciprocalRowNorm(Row row);

  //===--- micro-kernels (TileSteps.cpp) -----------------------------------===//
  /// Query rows of the block starting at row `qb`: min(block, N - qb), a
  /// constant when one block holds every row.
  Value queryBlockRows(Value qb);
  void emitScores(function_ref<Row(Value)> leftRow, Value kt, Value scores,
                  Value qb, Value rows, bool keyPadding);
  SmallVector<Value> emitScoreBlock(ArrayRef<Row> queries, Value kt, int64_t c0,
                                    int64_t nc, bool keyPadding);
  SmallVector<Value> scoreInit(int64_t mr, int64_t c0, int64_t nc,
                               bool keyPadding);
  int64_t scoreBlockRows(int64_t vectors);
  /// A micro-kernel block's mr * n accumulators as mr rows of n.
  static SmallVector<SmallVector<Value>> splitRows(ArrayRef<Value> acc,
                                                   int64_t mr);
  void
  emitRowCombination(Value rows, Value count,
                     function_ref<Value(Value, Value)> coefficient,
                     Value matrix, Value base,
                     function_ref<void(Value, int64_t, int64_t, Value)> finish);

  //===--- the softmax (TileSoftmax.cpp) -----------------------------------===//
  void emitSoftmaxRows(Value h, Value image, const ScoreTerms &terms,
                       Value scores, Value invSums, Value qb, Value rows,
                       const SoftmaxRowOptions &extra = SoftmaxRowOptions());
  /// 2^x on a vector of x <= 0, -inf included (to f32's accuracy, or
  /// bf16's).
  Value exp2(Value x, bool bf16Accuracy = false);

  /// AVX-512F instructions may be used (x86vector): the exponentials take
  /// vreduceps and vscalefps.
  bool avx512 = false;
  /// A 1-D view of the op's explicit mask operand, if any.
  Value flatMask;

private:
  struct SoftmaxCall;
  struct SoftmaxRow;
  /// The keys of lanes [x0, x0 + L) of window row `row` of the padded key
  /// layout (row >= keyRows: padding past the last row); `keys` of them
  /// are keys, the rest the row's padding.
  struct Segment {
    int64_t row, x0, keys;
  };
  Segment segmentOf(int64_t c, int64_t t);
  Value joinSegments(ArrayRef<Value> segments);
  /// The bias and mask segments of one score vector.
  struct VectorTerms {
    SmallVector<Value> biases, masks;
  };
  VectorTerms loadVectorTerms(const SoftmaxCall &call, Value i,
                              const QueryBias &query, int64_t c);
  void addBiasAndMask(const SoftmaxCall &call, SoftmaxRow &row,
                      ArrayRef<Value> produced);
  void reduceRowMaxima(MutableArrayRef<SoftmaxRow> rows);
  void exponentiate(const SoftmaxCall &call, SoftmaxRow &row);
  void storeInverseSums(ArrayRef<SoftmaxRow> rows, Value invSums);
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
};

/// The CPU forward kernel (TilesKernel.cpp; its AVX512-BF16 products in
/// PairedBf16.cpp).
class TilesKernel : public TileSteps {
public:
  TilesKernel(ImplicitLocOpBuilder &b, FusedAttentionOpInterface op,
              const KernelGeometry &g, const FusedKernelOptions &options);

  LogicalResult emit();

private:
  struct Scratch;
  struct Item;
  Scratch allocateScratch();
  void emitItem(Value itemIndex, Value items, const ScoreTerms &terms,
                const Scratch &scratch);
  void packOperands(Item &item);
  Row queryRow(const Item &item, Value i);
  SmallVector<Value> scoreBlock(const Item &item, ArrayRef<Row> queries);
  void storeScores(const Item &item, Value qb, Value rows);
  void emitOutputRows(const Item &item, Value qb, Value rows);
  void emitQueryBlock(const Item &item, const ScoreTerms &terms, Value qb);
  void emitOutput(Value w, Value h, Value scores, Value invSums, Value values,
                  Value valueBase, Value discard, Value qb, Value rows);
  void emitPrefetchRows(Value w, Value h, Value token);

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
  Value storeDenseProbabilities(ArrayRef<Value> probabilities, Value buffer,
                                Value lr);
  Value broadcastPair(Row row, Value x);
  void emitPackKeyPairs(Value w, Value h, Value kp);
  void emitPackValuePairs(Value w, Value h, Value vp);
  void emitPairDotProducts(Value rows, function_ref<Row(Value)> leftRow,
                           Value right, int64_t vectors, bool keyPadding,
                           function_ref<void(Value, int64_t, Value)> finish);
  SmallVector<Value> emitPairDotBlock(ArrayRef<Row> lefts, Value right,
                                      int64_t c0, int64_t nc, bool keyPadding);
  void storePairedOutputRow(const Item &item, Value qb, Value lr, int64_t c,
                            Value acc);

  const FusedKernelOptions &options;
  /// bf16 operands take AVX512-BF16 dot products (PairedBf16.cpp).
  bool pairs;
  /// f16 and bf16 rows the FMA products read are widened to f32 once per
  /// item, into scratch.
  bool widen;
};

/// Transposes 8 vectors of 8 lanes (of any 32-bit element) in registers.
void transpose8x8(ImplicitLocOpBuilder &b, MutableArrayRef<Value> rows);

} // namespace mlir::rpe::detail

#endif // RPE_CODEGEN_TILESTEPS_H
