//===- FormMatmul.cpp - rpe-form-matmul
//------------------------------------===//
//
// The dense linear algebra of an imported model (its linear layers, the
// patch merging's reduction, the classifier) arrives as linalg
// contractions with a transposed constant weight, followed by generics that
// add the bias, apply GELU or add the residual. This pass turns each
// contraction into rpe.matmul, whose CPU kernel (rpe-lower-matmul) keeps a
// register tile of the product and applies the elementwise work to it
// before it is stored:
//
//   1. fuseElementwiseProducers: upstream's elementwise fusion, so that a
//      bias broadcast and its add (or GELU's five generics) are one generic;
//   2. ContractionToMatmul: C = A B with A [M, K] row-major and B [K, N] or
//      its transpose, in f32 or bf16 (widened to an f32 product); a
//      constant B (through linalg.transpose) is packed in panels
//      [N / NR, K, NR] here, at compile time, so that neither the transpose
//      nor the packing runs when the model does; with bf16-dot, bf16 B in
//      panels of pairs of k, [N / NR, ceil(K / 2), NR, 2] (the layout of
//      the kernel's AVX512-BF16 dot products; an odd K's last pair ends in
//      a zero row);
//   3. FuseEpilogue: an elementwise generic that is the product's only user
//      moves into the rpe.matmul's epilogue, its other inputs becoming
//      epilogue inputs (a bias read at (n), a residual at (m, n)).
//      The importer hands the product to what follows through a
//      tensor.expand_shape ([B * L, N] -> [B, L, N]: GELU after fc1, the
//      residual add after fc2), so a generic on such a view of a product is
//      first rewritten on the product itself (upstream's reshape folding by
//      collapsing: its other operands collapsed, its result expanded).
//
//===----------------------------------------------------------------------===//

#include "LinalgAttentionMatchers.h"

#include "Rpe/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cstring>

namespace mlir::rpe {
#define GEN_PASS_DEF_RPEFORMMATMUL
#include "Rpe/Passes.h.inc"
} // namespace mlir::rpe

using namespace mlir;
using namespace mlir::rpe;

namespace {

/// The values of an f32 constant tensor, dense or a resource blob (as
/// torch-mlir writes its weights); none for anything else.
std::optional<ArrayRef<float>> getFloatValues(Attribute attr,
                                              SmallVectorImpl<float> &storage) {
  if (auto resource = dyn_cast<DenseF32ResourceElementsAttr>(attr))
    return resource.tryGetAsArrayRef();
  auto dense = dyn_cast<DenseFPElementsAttr>(attr);
  if (!dense || !dense.getElementType().isF32())
    return std::nullopt;
  storage.assign(dense.getValues<float>().begin(),
                 dense.getValues<float>().end());
  return ArrayRef<float>(storage);
}

/// The bits of a bf16 constant tensor, dense or a resource blob; none for
/// anything else.
std::optional<ArrayRef<uint16_t>>
getBf16Bits(Attribute attr, SmallVectorImpl<uint16_t> &storage) {
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
    ShapedType type = resource.getType();
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!type.getElementType().isBF16() || !blob ||
        blob->getData().size() != 2 * size_t(type.getNumElements()))
      return std::nullopt;
    storage.resize(type.getNumElements());
    std::memcpy(storage.data(), blob->getData().data(), blob->getData().size());
    return ArrayRef<uint16_t>(storage);
  }
  auto dense = dyn_cast<DenseFPElementsAttr>(attr);
  if (!dense || !dense.getElementType().isBF16())
    return std::nullopt;
  storage.clear();
  for (const APFloat &value : dense.getValues<APFloat>())
    storage.push_back(value.bitcastToAPInt().getZExtValue());
  return ArrayRef<uint16_t>(storage);
}

/// The weights of a contraction as stored: B [K, N], or its transpose
/// [N, K] (`transposed`), possibly the constant `values` behind a
/// linalg.transpose.
struct Weights {
  Value tensor;
  bool transposed = false;
  Attribute constant;
};

/// `value` as the contraction's B, looking through transposes of a
/// constant.
Weights findWeights(Value value, bool transposed) {
  Weights weights{value, transposed, Attribute()};
  while (auto transpose = value.getDefiningOp<linalg::TransposeOp>()) {
    if (transpose.getPermutation() != ArrayRef<int64_t>{1, 0})
      break;
    value = transpose.getInput();
    transposed = !transposed;
  }
  Attribute constant;
  if (matchPattern(value, m_Constant(&constant)))
    weights = {value, transposed, constant};
  return weights;
}

/// B (`values` of type `element`) packed in panels of `width` columns:
/// packed[p, k, r] = B[k, p * width + r], zero past N; in pairs of k
/// (`pairs`), packed[p, j, r, h] = B[2 j + h, p * width + r], zero past N
/// and K. As a resource blob (no uniquing of megabytes).
template <typename T>
Value packConstantWeights(OpBuilder &b, Location loc, ArrayRef<T> values,
                          Type element, bool transposed, int64_t k, int64_t n,
                          int64_t width, bool pairs) {
  int64_t panels = llvm::divideCeil(n, width);
  int64_t pair = pairs ? 2 : 1;
  int64_t rows = llvm::divideCeil(k, pair);
  std::vector<T> packed(panels * rows * width * pair, T(0));
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t r = 0; r < width && p * width + r < n; ++r) {
        int64_t column = p * width + r;
        packed[((p * rows + kk / pair) * width + r) * pair + kk % pair] =
            transposed ? values[column * k + kk] : values[kk * n + column];
      }
  SmallVector<int64_t> shape = {panels, rows, width};
  if (pairs)
    shape.push_back(2);
  auto type = RankedTensorType::get(shape, element);
  auto blob =
      HeapAsmResourceBlob::allocateAndCopyInferAlign(ArrayRef<T>(packed));
  auto attr = DenseResourceElementsAttr::get(type, "rpe_packed_weights",
                                             std::move(blob));
  return arith::ConstantOp::create(b, loc, type, attr);
}

/// Whether the body of `op` is acc + extf(a) * extf(b): a product of bf16
/// in f32, as linalg.matmul of bf16 operands into f32 writes it.
bool isWidenedProduct(linalg::LinalgOp op) {
  Block *body = op.getBlock();
  if (body->getNumArguments() != 3)
    return false;
  auto yield = dyn_cast<linalg::YieldOp>(body->getTerminator());
  auto add = yield && yield.getNumOperands() == 1
                 ? yield.getValues()[0].getDefiningOp<arith::AddFOp>()
                 : nullptr;
  if (!add)
    return false;
  Value acc = body->getArgument(2);
  Value product = add.getLhs() == acc   ? add.getRhs()
                  : add.getRhs() == acc ? add.getLhs()
                                        : Value();
  auto mul = product ? product.getDefiningOp<arith::MulFOp>() : nullptr;
  if (!mul)
    return false;
  auto widened = [](Value value) {
    auto ext = value.getDefiningOp<arith::ExtFOp>();
    return ext ? ext.getIn() : Value();
  };
  Value x = widened(mul.getLhs()), y = widened(mul.getRhs());
  Value a = body->getArgument(0), b = body->getArgument(1);
  return (x == a && y == b) || (x == b && y == a);
}

/// Whether `op` is a contraction C[m, n] += A[m, k] B[k, n] (or B[n, k])
/// with static K and N, that rpe.matmul computes: in f32, or bf16 A and B
/// into f32; its loops from upstream's inferContractionDims, its body a
/// plain product (the shared reader; upstream's isaContractionOpInterface
/// would also take `acc + (-a) · b`) or one of widened bf16.
struct Contraction {
  Value lhs, rhs, init;
  bool transposedRhs;
};
std::optional<Contraction> matchContraction(linalg::LinalgOp op) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      op.getNumLoops() != 3 || !op.hasPureTensorSemantics())
    return std::nullopt;
  bool widened = isWidenedProduct(op);
  std::optional<double> factor = widened ? 1.0 : readProductBody(op);
  if (!factor || *factor != 1.0)
    return std::nullopt;
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  if (failed(dims) || !dims->batch.empty() || dims->m.size() != 1 ||
      dims->n.size() != 1 || dims->k.size() != 1)
    return std::nullopt;
  MLIRContext *context = op->getContext();
  AffineExpr m = getAffineDimExpr(dims->m[0], context);
  AffineExpr n = getAffineDimExpr(dims->n[0], context);
  AffineExpr k = getAffineDimExpr(dims->k[0], context);
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  auto mapIs = [&](AffineMap map, ArrayRef<AffineExpr> results) {
    return map.getResults() == results;
  };
  // A is read row by row: [M, K], row-major.
  if (!mapIs(maps[0], {m, k}) || !mapIs(maps[2], {m, n}))
    return std::nullopt;
  bool transposed = mapIs(maps[1], {n, k});
  if (!transposed && !mapIs(maps[1], {k, n}))
    return std::nullopt;
  Value lhs = op.getDpsInputOperand(0)->get();
  Value rhs = op.getDpsInputOperand(1)->get();
  Value init = op.getDpsInitOperand(0)->get();
  // f32 operands, or bf16 ones widened; an f32 product.
  for (Value v : {lhs, rhs, init}) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    bool f32 = v == init || !widened;
    if (!type || (f32 ? !type.getElementType().isF32()
                      : !type.getElementType().isBF16()))
      return std::nullopt;
  }
  auto initType = cast<RankedTensorType>(init.getType());
  auto lhsType = cast<RankedTensorType>(lhs.getType());
  if (initType.isDynamicDim(1) || lhsType.isDynamicDim(1))
    return std::nullopt;
  return Contraction{lhs, rhs, init, transposed};
}

/// Whether `init` is zero-filled: the contraction starts from nothing.
bool isZeroFilled(Value init) {
  auto fill = init.getDefiningOp<linalg::FillOp>();
  return fill && matchPattern(fill.getInputs()[0], m_AnyZeroFloat());
}

/// linalg contraction -> rpe.matmul, packing constant weights.
struct ContractionToMatmul
    : public OpInterfaceRewritePattern<linalg::LinalgOp> {
  ContractionToMatmul(MLIRContext *context, int64_t panelWidth, bool bf16Dot)
      : OpInterfaceRewritePattern(context), panelWidth(panelWidth),
        bf16Dot(bf16Dot) {}

  LogicalResult matchAndRewrite(linalg::LinalgOp op,
                                PatternRewriter &rewriter) const override {
    std::optional<Contraction> contraction = matchContraction(op);
    if (!contraction)
      return rewriter.notifyMatchFailure(op, "not a 2-D f32 or bf16 "
                                             "contraction");
    Location loc = op.getLoc();
    auto initType = cast<RankedTensorType>(contraction->init.getType());
    int64_t k = cast<RankedTensorType>(contraction->lhs.getType()).getDimSize(1);
    int64_t n = initType.getDimSize(1);

    Weights weights = findWeights(contraction->rhs, contraction->transposedRhs);
    Value rhs = contraction->rhs;
    bool transposeRhs = contraction->transposedRhs;
    if (Value packed = packConstant(rewriter, loc, weights, k, n)) {
      rhs = packed;
      transposeRhs = false;
    }
    // A zero-filled destination is only a destination; any other one is
    // accumulated into, as an epilogue input.
    bool accumulate = !isZeroFilled(contraction->init);
    Value destination =
        accumulate
            ? tensor::EmptyOp::create(
                  rewriter, loc,
                  tensor::getMixedSizes(rewriter, loc, contraction->init),
                  initType.getElementType())
                  .getResult()
            : contraction->init.getDefiningOp<linalg::FillOp>().getOutputs()[0];
    auto matmul = MatmulOp::create(rewriter, loc, contraction->lhs, rhs,
                                   destination, transposeRhs);
    if (accumulate) {
      // out = product + init
      MatmulOp::Properties properties = matmul.getProperties();
      properties.epilogue_maps = rewriter.getAffineMapArrayAttr(
          {rewriter.getMultiDimIdentityMap(2)});
      auto accumulating = MatmulOp::create(
          rewriter, loc, TypeRange{initType},
          ValueRange{contraction->lhs, rhs, contraction->init, destination},
          properties);
      Block *body = rewriter.createBlock(
          &accumulating.getEpilogue(), {},
          {rewriter.getF32Type(), rewriter.getF32Type()}, {loc, loc});
      YieldOp::create(rewriter, loc,
                      arith::AddFOp::create(rewriter, loc,
                                            body->getArgument(0),
                                            body->getArgument(1))
                          .getResult());
      rewriter.eraseOp(matmul);
      rewriter.replaceOp(op, accumulating.getResult());
      return success();
    }
    rewriter.replaceOp(op, matmul.getResult());
    return success();
  }

  /// The constant weights packed for the kernel: f32 in panels, bf16 in
  /// panels of pairs of k with bf16-dot; null where they are not constant.
  Value packConstant(OpBuilder &b, Location loc, const Weights &weights,
                     int64_t k, int64_t n) const {
    if (!weights.constant)
      return Value();
    SmallVector<float> floats;
    if (std::optional<ArrayRef<float>> values =
            getFloatValues(weights.constant, floats))
      return packConstantWeights(b, loc, *values, b.getF32Type(),
                                 weights.transposed, k, n, panelWidth,
                                 /*pairs=*/false);
    SmallVector<uint16_t> bits;
    if (std::optional<ArrayRef<uint16_t>> values =
            getBf16Bits(weights.constant, bits))
      return packConstantWeights(b, loc, *values, b.getBF16Type(),
                                 weights.transposed, k, n, panelWidth,
                                 /*pairs=*/bf16Dot);
    return Value();
  }

  int64_t panelWidth;
  bool bf16Dot;
};

/// The epilogue's ops run on vectors: elementwise arith and math ops, and
/// constants.
bool isVectorizableEpilogue(Block &body) {
  for (Operation &op : body.without_terminator()) {
    if (isa<arith::ConstantOp>(op))
      continue;
    if (op.getNumRegions() != 0 || op.getNumResults() != 1 ||
        !OpTrait::hasElementwiseMappableTraits(&op))
      return false;
    if (!isa<arith::ArithDialect, math::MathDialect>(op.getDialect()))
      return false;
  }
  return true;
}

/// An input map of the consumer usable as an epilogue map: each result
/// m, n or 0.
bool isEpilogueMap(AffineMap map) {
  if (map.getNumDims() != 2 || map.getNumSymbols() != 0)
    return false;
  return llvm::all_of(map.getResults(), [](AffineExpr expr) {
    auto constant = dyn_cast<AffineConstantExpr>(expr);
    return isa<AffineDimExpr>(expr) || (constant && constant.getValue() == 0);
  });
}

/// generic(rpe.matmul, others...) elementwise -> rpe.matmul with the
/// generic's body appended to the epilogue.
struct FuseEpilogue : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp consumer,
                                PatternRewriter &rewriter) const override {
    if (consumer.getNumLoops() != 2 ||
        consumer.getNumParallelLoops() != 2 || consumer.getNumDpsInits() != 1 ||
        !consumer.hasPureTensorSemantics())
      return rewriter.notifyMatchFailure(consumer, "not elementwise on 2-D");
    OpOperand *out = consumer.getDpsInitOperand(0);
    if (!consumer.getMatchingIndexingMap(out).isIdentity() ||
        consumer.payloadUsesValueFromOperand(out))
      return rewriter.notifyMatchFailure(consumer, "reads its destination");
    // The product: an input at (m, n) whose producer it is the only user of.
    MatmulOp producer;
    for (OpOperand *input : consumer.getDpsInputOperands()) {
      auto matmul = input->get().getDefiningOp<MatmulOp>();
      if (matmul && consumer.getMatchingIndexingMap(input).isIdentity() &&
          llvm::all_of(matmul->getUsers(), [&](Operation *user) {
            return user == consumer.getOperation();
          })) {
        producer = matmul;
        break;
      }
    }
    if (!producer)
      return rewriter.notifyMatchFailure(consumer, "no rpe.matmul input");
    if (!isVectorizableEpilogue(*consumer.getBlock()))
      return rewriter.notifyMatchFailure(consumer, "not elementwise");
    SmallVector<OpOperand *> others;
    for (OpOperand *input : consumer.getDpsInputOperands()) {
      if (input->get() == producer.getResult().front())
        continue;
      if (!isEpilogueMap(consumer.getMatchingIndexingMap(input)))
        return rewriter.notifyMatchFailure(consumer, "input map not (m, n, 0)");
      others.push_back(input);
    }

    SmallVector<Value> inputs(producer.getEpilogueInputs());
    SmallVector<Attribute> maps(producer.getEpilogueMaps().getValue());
    for (OpOperand *input : others) {
      inputs.push_back(input->get());
      maps.push_back(
          AffineMapAttr::get(consumer.getMatchingIndexingMap(input)));
    }
    Value init = out->get();
    SmallVector<Value> operands = {producer.getLhs(), producer.getRhs()};
    llvm::append_range(operands, inputs);
    operands.push_back(init);
    MatmulOp::Properties properties = producer.getProperties();
    properties.epilogue_maps = rewriter.getArrayAttr(maps);
    auto fused = MatmulOp::create(rewriter, consumer.getLoc(),
                                  TypeRange{init.getType()}, operands,
                                  properties);

    // (product, old inputs..., new inputs...): the old epilogue, then the
    // consumer's body on its value.
    Block &oldBody = producer.getEpilogue().front();
    SmallVector<Type> argumentTypes(oldBody.getArgumentTypes());
    SmallVector<Location> locations(argumentTypes.size(), consumer.getLoc());
    for (OpOperand *input : others) {
      argumentTypes.push_back(getElementTypeOrSelf(input->get().getType()));
      locations.push_back(consumer.getLoc());
    }
    Block *body = rewriter.createBlock(&fused.getEpilogue(), {}, argumentTypes,
                                       locations);
    IRMapping mapping;
    for (auto [old, now] :
         llvm::zip(oldBody.getArguments(), body->getArguments()))
      mapping.map(old, now);
    for (Operation &op : oldBody.without_terminator())
      rewriter.clone(op, mapping);
    Value product =
        mapping.lookup(cast<YieldOp>(oldBody.getTerminator()).getValue());
    Block &consumerBody = *consumer.getBlock();
    unsigned next = oldBody.getNumArguments();
    for (OpOperand *input : consumer.getDpsInputOperands()) {
      BlockArgument argument = consumer.getMatchingBlockArgument(input);
      mapping.map(argument, input->get() == producer.getResult().front()
                                ? product
                                : body->getArgument(next++));
    }
    for (Operation &op : consumerBody.without_terminator())
      rewriter.clone(op, mapping);
    auto yield = cast<linalg::YieldOp>(consumerBody.getTerminator());
    YieldOp::create(rewriter, consumer.getLoc(),
                    mapping.lookupOrDefault(yield.getValues()[0]));

    rewriter.replaceOp(consumer, fused.getResult());
    rewriter.eraseOp(producer);
    return success();
  }
};

/// An elementwise generic into its elementwise consumer, when it has no
/// other user (a bias broadcast into its add; GELU's chain into one
/// generic): upstream's fusion alone, without the rest of its pattern set
/// (which would replace the consumers' destinations, the function's result
/// buffers among them, by empty tensors).
struct FuseElementwiseProducer : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp consumer,
                                PatternRewriter &rewriter) const override {
    for (OpOperand &operand : consumer->getOpOperands()) {
      Operation *producer = operand.get().getDefiningOp();
      if (!producer || !producer->hasOneUse() ||
          !linalg::areElementwiseOpsFusable(&operand))
        continue;
      FailureOr<linalg::ElementwiseOpFusionResult> fused =
          linalg::fuseElementwiseOps(rewriter, &operand);
      if (failed(fused))
        continue;
      // As upstream's pattern: the consumer's uses move to the fused op.
      for (auto [original, replacement] : fused->replacements)
        rewriter.replaceUsesWithIf(original, replacement, [&](OpOperand &use) {
          return use.get().getDefiningOp() != producer;
        });
      rewriter.eraseOp(consumer);
      return success();
    }
    return rewriter.notifyMatchFailure(consumer, "no fusable producer");
  }
};

/// Whether a reshape folding at `operand` brings a generic onto an
/// rpe.matmul's product: a tensor.expand_shape of the product, read only
/// there.
bool isExpandedProduct(OpOperand *operand) {
  auto expand = operand->get().getDefiningOp<tensor::ExpandShapeOp>();
  return expand && expand->hasOneUse() &&
         expand.getSrc().getDefiningOp<MatmulOp>();
}

struct RpeFormMatmulPass
    : public rpe::impl::RpeFormMatmulBase<RpeFormMatmulPass> {
  using Base::Base;

  void runOnOperation() override {
    if (panelWidth < 1 || panelWidth > 256) {
      emitError(getOperation()->getLoc())
          << "panel-width must be in [1, 256], got "
          << static_cast<int64_t>(panelWidth);
      return signalPassFailure();
    }
    MLIRContext *context = &getContext();
    RewritePatternSet patterns(context);
    patterns.add<FuseElementwiseProducer, FuseEpilogue>(context);
    patterns.add<ContractionToMatmul>(context, panelWidth, bf16Dot);
    linalg::populateFoldReshapeOpsByCollapsingPatterns(patterns,
                                                       isExpandedProduct);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
