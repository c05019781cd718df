//===- MatmulOp.cpp - rpe.matmul: builder, verifier, bufferization --------===//

#include "Rpe/RpeOps.h"

#include "DestinationStyle.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::rpe;

void MatmulOp::build(OpBuilder &builder, OperationState &state, Value lhs,
                     Value rhs, Value init, bool transposeRhs) {
  Type resultType = init.getType();
  build(builder, state,
        isa<RankedTensorType>(resultType) ? TypeRange{resultType}
                                          : TypeRange{},
        lhs, rhs, /*epilogue_inputs=*/ValueRange{}, init,
        builder.getAffineMapArrayAttr({}), transposeRhs);
  // The identity epilogue: the product, in the destination's type.
  OpBuilder::InsertionGuard guard(builder);
  Region *region = state.regions.front().get();
  Block *block = builder.createBlock(region, region->end(),
                                     TypeRange{builder.getF32Type()},
                                     {state.location});
  Value product = block->getArgument(0);
  Type element = getElementTypeOrSelf(init.getType());
  if (element != product.getType())
    product = arith::TruncFOp::create(builder, state.location, element,
                                      product);
  YieldOp::create(builder, state.location, product);
}

bool MatmulOp::hasPackedRhs() {
  return cast<ShapedType>(getRhs().getType()).getRank() >= 3;
}

bool MatmulOp::hasPairedRhs() {
  return cast<ShapedType>(getRhs().getType()).getRank() == 4;
}

int64_t MatmulOp::getPanelWidth() {
  return cast<ShapedType>(getRhs().getType()).getDimSize(2);
}

int64_t MatmulOp::getReductionSize() {
  return cast<ShapedType>(getLhs().getType()).getDimSize(1);
}

int64_t MatmulOp::getColumns() {
  return cast<ShapedType>(getInit().getType()).getDimSize(1);
}

/// The shape `rhs` must have for K x N weights: [P, K, NR] packed, or
/// [P, ceil(K / 2), NR, 2] packed in pairs of k, else [K, N] or,
/// transposed, [N, K].
static SmallVector<int64_t> expectedRhsShape(MatmulOp op, int64_t k,
                                             int64_t n) {
  if (op.hasPackedRhs()) {
    int64_t width = op.getPanelWidth();
    auto panels = static_cast<int64_t>(llvm::divideCeil(n, width));
    if (op.hasPairedRhs())
      return {panels, static_cast<int64_t>(llvm::divideCeil(k, 2)), width, 2};
    return {panels, k, width};
  }
  if (op.getTransposeRhs())
    return {n, k};
  return {k, n};
}

LogicalResult MatmulOp::verify() {
  if (failed(detail::verifyTensorsOrMemrefs(*this)))
    return failure();
  auto lhsType = cast<ShapedType>(getLhs().getType());
  auto rhsType = cast<ShapedType>(getRhs().getType());
  auto initType = cast<ShapedType>(getInit().getType());
  if (lhsType.getRank() != 2 || initType.getRank() != 2)
    return emitOpError() << "expects lhs [M, K] and a destination [M, N]";
  int64_t k = lhsType.getDimSize(1), n = initType.getDimSize(1);
  if (ShapedType::isDynamic(k) || ShapedType::isDynamic(n))
    return emitOpError() << "expects static K and N, got K = "
                         << (ShapedType::isDynamic(k) ? "?" : Twine(k).str())
                         << " and N = "
                         << (ShapedType::isDynamic(n) ? "?" : Twine(n).str());
  if (!ShapedType::isDynamic(lhsType.getDimSize(0)) &&
      !ShapedType::isDynamic(initType.getDimSize(0)) &&
      lhsType.getDimSize(0) != initType.getDimSize(0))
    return emitOpError() << "expects lhs and destination of one row count M, "
                         << "got " << lhsType.getDimSize(0) << " and "
                         << initType.getDimSize(0);
  if (rhsType.getRank() < 2 || rhsType.getRank() > 4)
    return emitOpError() << "expects rhs [K, N], [N, K] (transpose_rhs), "
                            "packed [P, K, NR] or packed in pairs of k "
                            "[P, ceil(K / 2), NR, 2]";
  if (hasPackedRhs() && getTransposeRhs())
    return emitOpError() << "expects transpose_rhs only on an unpacked rhs";
  if (hasPackedRhs() &&
      (ShapedType::isDynamic(getPanelWidth()) || getPanelWidth() <= 0))
    return emitOpError() << "expects a static, positive panel width";
  SmallVector<int64_t> expected = expectedRhsShape(*this, k, n);
  if (rhsType.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "expects rhs of shape ["
                         << llvm::make_range(expected.begin(), expected.end())
                         << "] for K = " << k << " and N = " << n << ", got ["
                         << llvm::make_range(rhsType.getShape().begin(),
                                             rhsType.getShape().end())
                         << "]";
  Type element = lhsType.getElementType();
  if (!isa<FloatType>(element) || rhsType.getElementType() != element)
    return emitOpError() << "expects lhs and rhs of one float element type";
  // A pair of k is the 32-bit lane of a bf16 dot product.
  if (hasPairedRhs() && !element.isBF16())
    return emitOpError() << "expects rhs packed in pairs of k only in bf16, "
                            "got "
                         << element;
  if (!isa<FloatType>(initType.getElementType()))
    return emitOpError() << "expects a float destination";

  // The epilogue: (product, one element per input) -> the destination's
  // element.
  SmallVector<AffineMap> epilogueMaps = llvm::to_vector(
      getEpilogueMaps().getAsValueRange<AffineMapAttr>());
  if (epilogueMaps.size() != getEpilogueInputs().size())
    return emitOpError() << "expects one epilogue map per epilogue input, got "
                         << epilogueMaps.size() << " for "
                         << getEpilogueInputs().size();
  for (auto [index, map, input] :
       llvm::enumerate(epilogueMaps, getEpilogueInputs())) {
    auto type = cast<ShapedType>(input.getType());
    if (map.getNumDims() != 2 || map.getNumSymbols() != 0 ||
        map.getNumResults() != type.getRank())
      return emitOpError() << "expects epilogue map " << index
                           << " from (m, n) to the " << type.getRank()
                           << " indices of its input, got "
                           << AffineMapAttr::get(map);
    for (AffineExpr result : map.getResults()) {
      auto constant = dyn_cast<AffineConstantExpr>(result);
      if (!isa<AffineDimExpr>(result) && !(constant && constant.getValue() == 0))
        return emitOpError() << "expects epilogue map " << index
                             << " to index its input by m, n or 0, got "
                             << AffineMapAttr::get(map);
    }
  }
  Block &body = getEpilogue().front();
  if (body.getNumArguments() != 1 + getEpilogueInputs().size())
    return emitOpError() << "expects an epilogue of "
                         << 1 + getEpilogueInputs().size()
                         << " arguments (the product, then one per input), got "
                         << body.getNumArguments();
  if (!body.getArgument(0).getType().isF32())
    return emitOpError() << "expects the product (the epilogue's first "
                            "argument) in f32, got "
                         << body.getArgument(0).getType();
  for (auto [argument, input] :
       llvm::zip(body.getArguments().drop_front(), getEpilogueInputs()))
    if (argument.getType() != getElementTypeOrSelf(input.getType()))
      return emitOpError() << "expects epilogue argument "
                           << argument.getArgNumber() << " of type "
                           << getElementTypeOrSelf(input.getType()) << ", got "
                           << argument.getType();
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError() << "expects the epilogue to end in rpe.yield";
  if (yield.getValue().getType() != initType.getElementType())
    return yield.emitOpError()
           << "expects a value of the destination's element type "
           << initType.getElementType() << ", got "
           << yield.getValue().getType();
  return success();
}

void MatmulOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  detail::getDestinationEffects(*this, effects);
}

bool MatmulOp::bufferizesToMemoryRead(OpOperand &operand,
                                      const bufferization::AnalysisState &) {
  // The destination is only written.
  return !isDpsInit(&operand);
}

bool MatmulOp::bufferizesToMemoryWrite(OpOperand &operand,
                                       const bufferization::AnalysisState &) {
  return isDpsInit(&operand);
}

bufferization::AliasingValueList
MatmulOp::getAliasingValues(OpOperand &operand,
                            const bufferization::AnalysisState &) {
  return detail::getDestinationAliases(*this, operand);
}

LogicalResult
MatmulOp::bufferize(RewriterBase &rewriter,
                    const bufferization::BufferizationOptions &options,
                    bufferization::BufferizationState &state) {
  FailureOr<SmallVector<Value>> buffers =
      detail::getOperandBuffers(*this, rewriter, options, state);
  if (failed(buffers))
    return failure();
  // The same product on the buffers, writing the destination's (the last
  // operand's) buffer; the epilogue moves over.
  auto memrefOp =
      MatmulOp::create(rewriter, getLoc(), /*resultTypes=*/TypeRange{},
                       *buffers, getProperties());
  rewriter.inlineRegionBefore(getEpilogue(), memrefOp.getEpilogue(),
                              memrefOp.getEpilogue().end());
  bufferization::replaceOpWithBufferizedValues(rewriter, *this,
                                               buffers->back());
  return success();
}
