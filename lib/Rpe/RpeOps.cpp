//===- RpeOps.cpp - rpe dialect: ops, verifiers, folders -----------------===//

#include "Rpe/RpeOps.h"
#include "Rpe/WindowGeometry.h"

#include "DestinationStyle.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <cmath>

using namespace mlir;
using namespace mlir::rpe;

#include "Rpe/RpeOpsDialect.cpp.inc"

#include "Rpe/RpeEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "Rpe/RpeAttrs.cpp.inc"

void RpeDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "Rpe/RpeOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "Rpe/RpeAttrs.cpp.inc"
      >();
}

LogicalResult RpeDialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attribute) {
  // Other rpe.* names pass: a pass may add one before the dialect knows it.
  if (attribute.getName() == ItemLoopAttrHelper::getNameStr()) {
    if (!isa<UnitAttr>(attribute.getValue()))
      return op->emitError()
             << "expects '" << attribute.getName().getValue()
             << "' to be a unit attribute, got " << attribute.getValue();
    return success();
  }
  if (attribute.getName() != ItemsPerBlockAttrHelper::getNameStr())
    return success();
  // The host runtime divides the grid by it.
  auto items = dyn_cast<IntegerAttr>(attribute.getValue());
  if (!items || !items.getType().isSignlessInteger(64) || items.getInt() < 1)
    return op->emitError() << "expects '" << attribute.getName().getValue()
                           << "' to be a positive i64, got "
                           << attribute.getValue();
  return success();
}

Operation *RpeDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                           Type type, Location loc) {
  return arith::ConstantOp::materialize(builder, value, type, loc);
}

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

/// Prints a shape as `AxBxC` for diagnostics.
static std::string formatShape(ArrayRef<int64_t> shape) {
  std::string result;
  llvm::raw_string_ostream os(result);
  llvm::interleave(
      shape, os,
      [&](int64_t d) {
        if (ShapedType::isDynamic(d))
          os << '?';
        else
          os << d;
      },
      "x");
  return result;
}

/// Emits an error unless `type` has exactly the static shape `expected`.
static LogicalResult verifyStaticShape(Operation *op, StringRef what,
                                       RankedTensorType type,
                                       ArrayRef<int64_t> expected) {
  if (type.getShape() == expected)
    return success();
  return op->emitOpError() << "expects " << what << " of shape "
                           << formatShape(expected) << ", got "
                           << formatShape(type.getShape());
}

static LogicalResult verifyWindowAttr(Operation *op, ArrayRef<int64_t> window) {
  if (auto error = checkWindow(window))
    return op->emitOpError() << *error;
  return success();
}

//===----------------------------------------------------------------------===//
// RelativeIndexOp
//===----------------------------------------------------------------------===//

LogicalResult RelativeIndexOp::verify() {
  if (failed(verifyWindowAttr(*this, getWindow())))
    return failure();
  int64_t n = getNumTokens(getWindow(), getClassToken());
  return verifyStaticShape(*this, "result", getResult().getType(), {n, n});
}

OpFoldResult RelativeIndexOp::fold(FoldAdaptor) {
  auto type = getResult().getType();
  if (type.getNumElements() > kMaxConstantElements)
    return {};
  unsigned width = type.getElementType().isIndex()
                       ? IndexType::kInternalStorageBitWidth
                       : type.getElementType().getIntOrFloatBitWidth();
  SmallVector<APInt> values;
  for (int64_t index : computeRelativeIndex(getWindow(), getClassToken()))
    values.emplace_back(width, index);
  return DenseElementsAttr::get(type, values);
}

//===----------------------------------------------------------------------===//
// LookupOp
//===----------------------------------------------------------------------===//

LogicalResult LookupOp::verify() {
  if (failed(verifyWindowAttr(*this, getWindow())))
    return failure();
  RankedTensorType tableType = getTable().getType();
  RankedTensorType resultType = getResult().getType();
  if (tableType.getRank() != 2)
    return emitOpError() << "expects a table of rank 2 ([rows, heads]), got "
                            "rank "
                         << tableType.getRank();
  if (!tableType.hasStaticShape())
    return emitOpError() << "expects a table of static shape, got "
                         << formatShape(tableType.getShape());
  int64_t rows = getNumTableRows(getWindow(), getClassToken());
  int64_t heads = tableType.getDimSize(1);
  if (tableType.getDimSize(0) != rows)
    return emitOpError() << "expects a table of " << rows << " rows for window "
                         << formatShape(getWindow())
                         << (getClassToken() ? " and a class token" : "")
                         << ", got " << tableType.getDimSize(0);
  int64_t n = getNumTokens(getWindow(), getClassToken());
  if (failed(verifyStaticShape(*this, "result", resultType, {heads, n, n})))
    return failure();
  if (tableType.getElementType() != resultType.getElementType())
    return emitOpError() << "expects the table and the result to have the "
                            "same element type, got "
                         << tableType.getElementType() << " and "
                         << resultType.getElementType();
  return success();
}

OpFoldResult LookupOp::fold(FoldAdaptor adaptor) {
  auto table = llvm::dyn_cast_if_present<DenseElementsAttr>(adaptor.getTable());
  if (!table)
    return {};
  int64_t heads = getTable().getType().getDimSize(1);
  int64_t n = getNumTokens(getWindow(), getClassToken());
  if (getResult().getType().getNumElements() > kMaxConstantElements)
    return {};
  if (table.isSplat())
    return SplatElementsAttr::get(getResult().getType(),
                                  table.getSplatValue<Attribute>());
  auto tableValues = llvm::to_vector(table.getValues<APFloat>());
  SmallVector<int64_t> index =
      computeRelativeIndex(getWindow(), getClassToken());
  SmallVector<APFloat> bias;
  bias.reserve(heads * n * n);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t ij = 0; ij < n * n; ++ij)
      bias.push_back(tableValues[index[ij] * heads + h]);
  return DenseElementsAttr::get(getResult().getType(), bias);
}

//===----------------------------------------------------------------------===//
// ContinuousPositionBiasOp
//===----------------------------------------------------------------------===//

LogicalResult ContinuousPositionBiasOp::verify() {
  if (failed(verifyWindowAttr(*this, getWindow())))
    return failure();
  int64_t rank = getWindow().size();
  if (std::optional<ArrayRef<int64_t>> pretrained = getPretrainedWindow())
    if (pretrained->size() != getWindow().size() ||
        llvm::any_of(*pretrained, [](int64_t p) { return p < 1; }))
      return emitOpError() << "expects a pretrained_window of " << rank
                           << " positive extents, got "
                           << formatShape(*pretrained);
  RankedTensorType fc1Type = getFc1Weight().getType();
  if (fc1Type.getRank() != 2 || fc1Type.isDynamicDim(0) ||
      fc1Type.getDimSize(0) < 1 || fc1Type.getDimSize(1) != rank)
    return emitOpError() << "expects fc1_weight of shape [hidden, " << rank
                         << "], got " << formatShape(fc1Type.getShape());
  int64_t hidden = fc1Type.getDimSize(0);
  if (failed(verifyStaticShape(*this, "fc1_bias", getFc1Bias().getType(),
                               {hidden})))
    return failure();
  RankedTensorType fc2Type = getFc2Weight().getType();
  if (fc2Type.getRank() != 2 || fc2Type.isDynamicDim(0) ||
      fc2Type.getDimSize(0) < 1 || fc2Type.getDimSize(1) != hidden)
    return emitOpError() << "expects fc2_weight of shape [heads, " << hidden
                         << "], got " << formatShape(fc2Type.getShape());
  return verifyStaticShape(
      *this, "result", getResult().getType(),
      {getNumTableRows(getWindow()), fc2Type.getDimSize(0)});
}

/// The values of a constant float tensor in double precision, or nothing.
static std::optional<SmallVector<double>> getDoubles(Attribute attribute) {
  auto elements = llvm::dyn_cast_if_present<DenseElementsAttr>(attribute);
  if (!elements)
    return std::nullopt;
  SmallVector<double> values;
  values.reserve(elements.getNumElements());
  for (const APFloat &value : elements.getValues<APFloat>())
    values.push_back(value.convertToDouble());
  return values;
}

OpFoldResult ContinuousPositionBiasOp::fold(FoldAdaptor adaptor) {
  std::optional<SmallVector<double>> fc1Weight =
      getDoubles(adaptor.getFc1Weight());
  std::optional<SmallVector<double>> fc1Bias = getDoubles(adaptor.getFc1Bias());
  std::optional<SmallVector<double>> fc2Weight =
      getDoubles(adaptor.getFc2Weight());
  if (!fc1Weight || !fc1Bias || !fc2Weight)
    return {};
  RankedTensorType type = getResult().getType();
  const llvm::fltSemantics &semantics =
      cast<FloatType>(type.getElementType()).getFloatSemantics();
  SmallVector<APFloat> values;
  for (double v : computeContinuousPositionBias(
           getWindow(), getPretrainedWindow().value_or(ArrayRef<int64_t>()),
           *fc1Weight, *fc1Bias, *fc2Weight)) {
    APFloat value(v);
    bool losesInfo;
    value.convert(semantics, APFloat::rmNearestTiesToEven, &losesInfo);
    values.push_back(value);
  }
  return DenseElementsAttr::get(type, values);
}

//===----------------------------------------------------------------------===//
// ShiftMaskOp
//===----------------------------------------------------------------------===//

LogicalResult ShiftMaskOp::verify() {
  if (auto error = checkShift(getResolution(), getWindow(), getShift()))
    return emitOpError() << *error;
  if (std::isnan(getMaskValue().convertToDouble()))
    return emitOpError() << "expects a mask_value that is not NaN";
  int64_t numWindows = rpe::getNumWindows(getResolution(), getWindow());
  int64_t n = getNumTokens(getWindow());
  return verifyStaticShape(*this, "result", getResult().getType(),
                           {numWindows, n, n});
}

OpFoldResult ShiftMaskOp::fold(FoldAdaptor) {
  auto type = getResult().getType();
  auto elementType = llvm::cast<FloatType>(type.getElementType());
  if (llvm::all_of(getShift(), [](int64_t s) { return s == 0; }))
    return SplatElementsAttr::get(type, FloatAttr::get(elementType, 0.0));
  if (type.getNumElements() > kMaxConstantElements)
    return {};
  SmallVector<APFloat> values;
  for (float v : computeShiftMask(getResolution(), getWindow(), getShift(),
                                  getMaskValue().convertToDouble())) {
    APFloat value(v);
    bool losesInfo;
    value.convert(elementType.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                  &losesInfo);
    values.push_back(value);
  }
  return DenseElementsAttr::get(type, values);
}

//===----------------------------------------------------------------------===//
// WindowAttentionOp
//===----------------------------------------------------------------------===//

float WindowAttentionOp::getEffectiveScale() {
  if (std::optional<APFloat> scale = getScale())
    return scale->convertToFloat();
  // SwinV2's cosine attention has its per-head logit scale instead.
  if (isCosine())
    return 1.0f;
  return 1.0f / std::sqrt(static_cast<float>(getHeadDim()));
}

/// Verifies a cosine attention's `logit_scale`: one static `[heads]` vector
/// of floats.
static LogicalResult verifyLogitScale(Operation *op, Value logitScale,
                                      int64_t heads) {
  if (!logitScale)
    return success();
  auto type = cast<ShapedType>(logitScale.getType());
  if (!type.hasRank() || type.getShape() != ArrayRef<int64_t>{heads} ||
      !isa<FloatType>(type.getElementType()))
    return op->emitOpError() << "expects logit_scale of shape [" << heads
                             << "] (one per head), got "
                             << (type.hasRank() ? formatShape(type.getShape())
                                                : std::string("unranked"));
  return success();
}

/// Verifies q, k, v of an attention op: rank 4 `[windows, heads, tokens,
/// head_dim]`, static but for `windows`, one shape and one element type.
static LogicalResult verifyQueryKeyValue(Operation *op, ShapedType qType,
                                         ShapedType kType, ShapedType vType) {
  for (auto [name, type] : {std::pair<StringRef, ShapedType>{"query", qType},
                            {"key", kType},
                            {"value", vType}}) {
    if (!type.hasRank() || type.getRank() != 4)
      return op->emitOpError() << "expects " << name
                               << " of rank 4 ([windows, heads, tokens, "
                                  "head_dim]), got rank "
                               << (type.hasRank() ? type.getRank() : -1);
    if (llvm::any_of(type.getShape().drop_front(), ShapedType::isDynamic))
      return op->emitOpError()
             << "expects " << name
             << " to have static heads, tokens and head_dim, got "
             << formatShape(type.getShape());
    if (type.getShape().drop_front() != qType.getShape().drop_front() ||
        failed(verifyCompatibleShape(type.getShape().take_front(),
                                     qType.getShape().take_front())))
      return op->emitOpError()
             << "expects query, key and value of the same shape, got "
             << formatShape(qType.getShape()) << " and "
             << formatShape(type.getShape());
    if (type.getElementType() != qType.getElementType())
      return op->emitOpError()
             << "expects query, key and value of the same "
                "element type, got "
             << qType.getElementType() << " and " << type.getElementType();
  }
  if (llvm::any_of(qType.getShape().drop_front(),
                   [](int64_t extent) { return extent == 0; }))
    return op->emitOpError()
           << "expects non-empty heads, tokens and head_dim, got "
           << formatShape(qType.getShape());
  return success();
}

/// Verifies the result (or destination) of an attention op: the element
/// type of q, and `[windows, heads, tokens, head_dim]` or `[windows, tokens,
/// heads * head_dim]`.
static LogicalResult verifyAttentionResult(Operation *op, ShapedType qType,
                                           ShapedType resultType,
                                           StringRef what) {
  if (resultType.getElementType() != qType.getElementType())
    return op->emitOpError() << "expects the " << what
                             << " to have the element type of query, got "
                             << resultType.getElementType();
  int64_t windows = qType.getDimSize(0), heads = qType.getDimSize(1),
          n = qType.getDimSize(2), d = qType.getDimSize(3);
  // Extents of user-written types go up to 2^63 - 1: products of them are
  // checked here and below (a wrapped product could match the other side).
  std::optional<int64_t> channels = llvm::checkedMul(heads, d);
  if (!channels)
    return op->emitOpError() << "expects heads * head_dim to fit in int64_t, "
                             << "got " << heads << " * " << d;
  bool rank3 = resultType.hasRank() && resultType.getRank() == 3;
  bool rank4 = resultType.hasRank() && resultType.getRank() == 4;
  SmallVector<int64_t> expected =
      rank3 ? SmallVector<int64_t>{windows, n, *channels}
            : SmallVector<int64_t>{windows, heads, n, d};
  if ((!rank3 && !rank4) ||
      failed(verifyCompatibleShape(resultType.getShape(), expected)))
    return op->emitOpError()
           << "expects a " << what << " of shape "
           << formatShape({windows, heads, n, d}) << " or "
           << formatShape({windows, n, *channels}) << ", got "
           << (resultType.hasRank() ? formatShape(resultType.getShape())
                                    : std::string("unranked"));
  return success();
}

static LogicalResult verifyScale(Operation *op, std::optional<APFloat> scale) {
  if (scale && !scale->isFiniteNonZero())
    return op->emitOpError() << "expects a finite, non-zero scale";
  return success();
}

LogicalResult WindowAttentionOp::verify() {
  RankedTensorType qType = getQuery().getType();
  if (failed(verifyQueryKeyValue(*this, qType, getKey().getType(),
                                 getValue().getType())))
    return failure();
  int64_t windows = qType.getDimSize(0);
  int64_t heads = getNumHeads(), n = getNumTokens();

  if (failed(
          verifyStaticShape(*this, "bias", getBias().getType(), {heads, n, n})))
    return failure();

  if (Value mask = getMask()) {
    auto maskType = llvm::cast<RankedTensorType>(mask.getType());
    if (maskType.getRank() != 3 ||
        ShapedType::isDynamic(maskType.getDimSize(0)))
      return emitOpError() << "expects mask of shape [windows_per_image, " << n
                           << ", " << n << "] with a static first extent,"
                           << " got " << formatShape(maskType.getShape());
    int64_t maskWindows = maskType.getDimSize(0);
    if (failed(verifyStaticShape(*this, "mask", maskType, {maskWindows, n, n})))
      return failure();
    if (maskWindows == 0)
      return emitOpError() << "expects a mask with at least one window";
    if (!ShapedType::isDynamic(windows) && windows % maskWindows != 0)
      return emitOpError() << "expects the number of windows (" << windows
                           << ") to be a multiple of the mask's windows ("
                           << maskWindows << ")";
  }

  if (failed(
          verifyAttentionResult(*this, qType, getResult().getType(), "result")))
    return failure();
  if (failed(verifyLogitScale(*this, getLogitScale(), heads)))
    return failure();
  return verifyScale(*this, getScale());
}

namespace {
/// A mask that adds zero everywhere is no mask: Swin's non-shifted blocks
/// (shift = 0) produce one when a model is written uniformly.
struct DropZeroMask : public OpRewritePattern<WindowAttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(WindowAttentionOp op,
                                PatternRewriter &rewriter) const override {
    Value mask = op.getMask();
    if (!mask)
      return rewriter.notifyMatchFailure(op, "no mask");
    bool isZero = false;
    if (auto shiftMask = mask.getDefiningOp<ShiftMaskOp>())
      isZero =
          llvm::all_of(shiftMask.getShift(), [](int64_t s) { return s == 0; });
    DenseElementsAttr constant;
    if (matchPattern(mask, m_Constant(&constant)) && constant.isSplat())
      isZero = constant.getSplatValue<APFloat>().isZero();
    if (!isZero)
      return rewriter.notifyMatchFailure(op, "mask is not known to be zero");
    rewriter.modifyOpInPlace(op, [&] { op.getMaskMutable().clear(); });
    return success();
  }
};
} // namespace

void WindowAttentionOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                                    MLIRContext *context) {
  results.add<DropZeroMask>(context);
}

//===----------------------------------------------------------------------===//
// WindowPartitionOp, WindowReverseOp
//===----------------------------------------------------------------------===//

/// Verifies the feature-map attributes, those of a grid partition too, and
/// that `mapType` is [batch, L, C] with L the resolution's token count and C
/// static.
static LogicalResult
verifyFeatureMap(Operation *op, ArrayRef<int64_t> resolution,
                 ArrayRef<int64_t> window, ArrayRef<int64_t> shift,
                 Partition partition, RankedTensorType mapType) {
  if (auto error = checkFeatureMap(resolution, window, shift))
    return op->emitOpError() << *error;
  if (partition == Partition::Grid)
    if (auto error = checkGridPartition(resolution, window, shift))
      return op->emitOpError() << *error;
  int64_t tokens = 1;
  for (int64_t n : resolution)
    tokens *= n;
  if (mapType.getRank() != 3 || mapType.getDimSize(1) != tokens ||
      ShapedType::isDynamic(mapType.getDimSize(2)))
    return op->emitOpError()
           << "expects a feature map of shape [batch, " << tokens
           << ", channels] with static channels, got "
           << formatShape(mapType.getShape());
  return success();
}

/// The checks shared by both directions between a feature map and its
/// windows: one element type, and `batch * nW` windows (either count may be
/// dynamic, but not only one of them).
static LogicalResult verifyMapAndWindows(Operation *op,
                                         RankedTensorType mapType,
                                         RankedTensorType windowsType,
                                         ArrayRef<int64_t> resolution,
                                         ArrayRef<int64_t> window) {
  if (mapType.getElementType() != windowsType.getElementType())
    return op->emitOpError() << "expects the result to have the input's "
                                "element type";
  int64_t perImage =
      rpe::getNumWindows(getPaddedResolution(resolution, window), window);
  int64_t batch = mapType.getDimSize(0), windows = windowsType.getDimSize(0);
  if (ShapedType::isDynamic(batch) != ShapedType::isDynamic(windows) ||
      (!ShapedType::isDynamic(batch) &&
       llvm::checkedMul(batch, perImage) != windows))
    return op->emitOpError()
           << "expects " << perImage << " windows per image: "
           << (ShapedType::isDynamic(batch) ? std::string("?")
                                            : std::to_string(batch))
           << " images and "
           << (ShapedType::isDynamic(windows) ? std::string("?")
                                              : std::to_string(windows))
           << " windows";
  return success();
}

LogicalResult WindowPartitionOp::verify() {
  RankedTensorType inputType = getInput().getType();
  if (failed(verifyFeatureMap(*this, getResolution(), getWindow(), getShift(),
                              getPartition(), inputType)))
    return failure();
  int64_t channels = inputType.getDimSize(2);
  if (Value pad = getPad()) {
    auto padType = cast<RankedTensorType>(pad.getType());
    if (failed(verifyStaticShape(*this, "pad", padType, {channels})))
      return failure();
    if (padType.getElementType() != inputType.getElementType())
      return emitOpError() << "expects pad of the input's element type, got "
                           << padType.getElementType();
  }
  RankedTensorType resultType = getResult().getType();
  int64_t n = rpe::getNumTokens(getWindow());
  if (resultType.getRank() != 4 || resultType.getDimSize(2) != n ||
      ShapedType::isDynamic(resultType.getDimSize(1)) ||
      ShapedType::isDynamic(resultType.getDimSize(3)) ||
      llvm::checkedMul(resultType.getDimSize(1), resultType.getDimSize(3)) !=
          channels)
    return emitOpError() << "expects a result of shape [windows, heads, " << n
                         << ", head_dim] with heads * head_dim = " << channels
                         << ", got " << formatShape(resultType.getShape());
  return verifyMapAndWindows(*this, inputType, resultType, getResolution(),
                             getWindow());
}

LogicalResult WindowReverseOp::verify() {
  RankedTensorType resultType = getResult().getType();
  if (failed(verifyFeatureMap(*this, getResolution(), getWindow(), getShift(),
                              getPartition(), resultType)))
    return failure();
  RankedTensorType inputType = getInput().getType();
  int64_t n = rpe::getNumTokens(getWindow());
  int64_t channels = resultType.getDimSize(2);
  if (inputType.getRank() != 3 || inputType.getDimSize(1) != n ||
      inputType.getDimSize(2) != channels)
    return emitOpError() << "expects an input of shape [windows, " << n << ", "
                         << channels << "], got "
                         << formatShape(inputType.getShape());
  return verifyMapAndWindows(*this, resultType, inputType, getResolution(),
                             getWindow());
}

//===----------------------------------------------------------------------===//
// FusedWindowAttentionOp
//===----------------------------------------------------------------------===//

/// The results of a fused attention writing `init`: the destination's type
/// on tensors, none on memrefs (destination-passing style).
static SmallVector<Type, 1> getDestinationResultTypes(Value init) {
  if (isa<RankedTensorType>(init.getType()))
    return {init.getType()};
  return {};
}

void FusedWindowAttentionOp::build(
    OpBuilder &builder, OperationState &state, Value query, Value key,
    Value value, Value table, Value init, ArrayRef<int64_t> window, float scale,
    ArrayRef<int64_t> resolution, ArrayRef<int64_t> shift, double maskValue,
    Value logitScale, Value mask, bool classToken) {
  auto optionalArray = [&](ArrayRef<int64_t> values) {
    return values.empty() ? nullptr : builder.getDenseI64ArrayAttr(values);
  };
  // No image: q, k, v are windows already, nothing is padded.
  build(builder, state, getDestinationResultTypes(init), query, key, value,
        table, /*padding_values=*/ValueRange(), logitScale, mask, init,
        builder.getDenseI64ArrayAttr(window), builder.getF32FloatAttr(scale),
        optionalArray(resolution), optionalArray(shift),
        builder.getF64FloatAttr(maskValue), /*image=*/nullptr,
        PaddingOrderAttr::get(builder.getContext(), PaddingOrder::PadThenShift),
        PartitionAttr::get(builder.getContext(), Partition::Block),
        /*packed_qkv=*/nullptr, classToken ? builder.getUnitAttr() : nullptr);
}

void FusedWindowAttentionOp::build(
    OpBuilder &builder, OperationState &state, Value query, Value key,
    Value value, Value table, ValueRange paddingValues, Value init,
    ArrayRef<int64_t> window, float scale, ArrayRef<int64_t> image,
    ArrayRef<int64_t> shift, PaddingOrder padding, double maskValue,
    bool packedQkv, Value logitScale, Partition partition) {
  // The mask lives on the padded map in both padding orders.
  build(builder, state, getDestinationResultTypes(init), query, key, value,
        table, paddingValues, logitScale, /*mask=*/nullptr, init,
        builder.getDenseI64ArrayAttr(window), builder.getF32FloatAttr(scale),
        builder.getDenseI64ArrayAttr(getPaddedResolution(image, window)),
        builder.getDenseI64ArrayAttr(shift), builder.getF64FloatAttr(maskValue),
        builder.getDenseI64ArrayAttr(image),
        PaddingOrderAttr::get(builder.getContext(), padding),
        PartitionAttr::get(builder.getContext(), partition),
        packedQkv ? builder.getUnitAttr() : nullptr, /*class_token=*/nullptr);
}

/// The checks the forward and the gradient share: the window, the table,
/// the scale, the shifted windows' geometry and the shapes of q, k, v, the
/// padding rows and the operand laid out as the output (`outputName`).
/// `onTensors`: the operands' kind, checked by the caller.
static LogicalResult verifyFusedAttention(FusedAttentionOpInterface op,
                                          StringRef outputName) {
  auto qType = op.getQueryType();
  if (failed(verifyWindowAttr(op, op.getWindow())))
    return failure();
  auto tableType = cast<ShapedType>(op.getTable().getType());
  int64_t tableRows = getNumTableRows(op.getWindow(), op.getClassToken());
  if (tableType.getRank() != 2 || tableType.getDimSize(0) != tableRows ||
      ShapedType::isDynamic(tableType.getDimSize(1)) ||
      tableType.getDimSize(1) < 1)
    return op.emitOpError()
           << "expects a table of shape " << tableRows << "x<heads>"
           << (op.getClassToken() ? " (with a class token)" : "") << ", got "
           << formatShape(tableType.getShape());
  if (!isa<FloatType>(tableType.getElementType()))
    return op.emitOpError() << "expects a floating-point table";
  int64_t heads = op.getNumHeads(), n = op.getNumTokens();
  auto initType = cast<ShapedType>(op.getAttentionOutput().getType());
  if (op.getResolution().has_value() != op.getShift().has_value())
    return op.emitOpError() << "expects resolution and shift together";
  if (failed(verifyScale(op, op.getScale())))
    return failure();
  if (failed(verifyLogitScale(op, op.getLogitScale(), heads)))
    return failure();

  // BEiT attends globally over its grid: one window per image, no map.
  if (op.getClassToken()) {
    if (op.hasTokenLayout() || op.getResolution())
      return op.emitOpError() << "expects a class token only in the windows "
                                 "layout, without resolution and shift";
    if (op.getMask() || op.isCosine())
      return op.emitOpError() << "expects a class token without a mask or "
                                 "logit_scale";
  }
  if (op.getPackedQkv() &&
      (!op.hasTokenLayout() || op.getQuery() != op.getKey() ||
       op.getQuery() != op.getValue()))
    return op.emitOpError() << "expects packed q, k, v as one operand, in the "
                               "token layout";
  if (!op.hasTokenLayout()) {
    // The windows are cut already: only a map has a partition.
    if (op.isGrid())
      return op.emitOpError() << "expects a grid partition only in the token "
                                 "layout";
    if (!op.getPaddingValues().empty())
      return op.emitOpError() << "expects padding values only in the token "
                                 "layout";
    if (failed(verifyQueryKeyValue(op, qType,
                                   cast<ShapedType>(op.getKey().getType()),
                                   cast<ShapedType>(op.getValue().getType()))))
      return failure();
    if (qType.getDimSize(1) != heads || qType.getDimSize(2) != n)
      return op.emitOpError()
             << "expects query of shape [windows, " << heads << ", " << n
             << ", head_dim], got " << formatShape(qType.getShape());
    if (failed(verifyAttentionResult(op, qType, initType, outputName)))
      return failure();
    if (op.getResolution())
      if (auto error =
              checkShift(*op.getResolution(), op.getWindow(), *op.getShift()))
        return op.emitOpError() << *error;
    if (Value mask = op.getMask()) {
      // [nW, N, N] of a float type; window b adds mask[b mod nW].
      auto maskType = cast<ShapedType>(mask.getType());
      if (op.hasShiftMask())
        return op.emitOpError()
               << "expects either a shift or a mask operand, not both";
      if (maskType.getRank() != 3 ||
          ShapedType::isDynamic(maskType.getDimSize(0)) ||
          maskType.getDimSize(0) < 1 || maskType.getDimSize(1) != n ||
          maskType.getDimSize(2) != n ||
          !isa<FloatType>(maskType.getElementType()))
        return op.emitOpError()
               << "expects a float mask of shape [windows, " << n << ", " << n
               << "], got " << formatShape(maskType.getShape());
    }
    return success();
  }
  if (op.getMask())
    return op.emitOpError() << "expects a mask operand only in the windows "
                               "layout (the token layout's mask is the shift)";

  // Token layout: [batch, L, H*d] maps on both sides.
  if (!op.getResolution())
    return op.emitOpError() << "expects resolution and shift with an image";
  ArrayRef<int64_t> image = *op.getImage();
  if (auto error = checkFeatureMap(image, op.getWindow(), *op.getShift()))
    return op.emitOpError() << *error;
  if (op.isGrid())
    if (auto error = checkGridPartition(image, op.getWindow(), *op.getShift()))
      return op.emitOpError() << *error;
  SmallVector<int64_t> padded = getPaddedResolution(image, op.getWindow());
  if (*op.getResolution() != ArrayRef<int64_t>(padded))
    return op.emitOpError() << "expects resolution " << formatShape(padded)
                            << ", the image padded to whole windows, got "
                            << formatShape(*op.getResolution());
  int64_t tokens = 1;
  for (int64_t extent : image)
    tokens *= extent;
  int64_t parts = op.getPackedQkv() ? 3 : 1;
  for (Value map :
       {op.getQuery(), op.getKey(), op.getValue(), op.getAttentionOutput()}) {
    auto type = cast<ShapedType>(map.getType());
    int64_t mapParts = map == op.getAttentionOutput() ? 1 : parts;
    std::optional<int64_t> headParts = llvm::checkedMul(heads, mapParts);
    if (type.getRank() != 3 || type.getDimSize(1) != tokens ||
        ShapedType::isDynamic(type.getDimSize(2)) || !headParts ||
        type.getDimSize(2) % *headParts != 0 || type.getDimSize(2) == 0 ||
        initType.getRank() != 3 ||
        type.getDimSize(2) !=
            llvm::checkedMul(initType.getDimSize(2), mapParts) ||
        failed(verifyCompatibleShape(type.getShape().take_front(2),
                                     qType.getShape().take_front(2))) ||
        type.getElementType() != qType.getElementType())
      return op.emitOpError()
             << "expects query, key, value and " << outputName
             << " of "
                "shape [batch, "
             << tokens << ", " << (parts == 3 ? "3 * " : "") << heads
             << " * head_dim] and one element type, got "
             << formatShape(type.getShape());
  }
  if (!op.getPaddingValues().empty() && op.getPaddingValues().size() != 3)
    return op.emitOpError() << "expects three padding values (q, k, v) or none";
  for (Value pad : op.getPaddingValues()) {
    auto type = cast<ShapedType>(pad.getType());
    if (type.getShape() != ArrayRef<int64_t>{initType.getDimSize(2)} ||
        type.getElementType() != qType.getElementType())
      return op.emitOpError()
             << "expects padding values of shape [" << initType.getDimSize(2)
             << "] and the query's element type";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Destination-style ops that overwrite their destination
//===----------------------------------------------------------------------===//

LogicalResult
mlir::rpe::detail::verifyTensorsOrMemrefs(DestinationStyleOpInterface op) {
  Value init = op.getDpsInits().front();
  bool onTensors = isa<RankedTensorType>(init.getType());
  for (Value operand : op->getOperands())
    if (isa<RankedTensorType>(operand.getType()) != onTensors ||
        !(isa<RankedTensorType>(operand.getType()) ||
          isa<MemRefType>(operand.getType())))
      return op.emitOpError()
             << "expects all operands to be ranked tensors or all memrefs";
  if (onTensors != (op->getNumResults() == 1) || op->getNumResults() > 1)
    return op.emitOpError() << "expects one result on tensors and none on "
                               "memrefs";
  if (onTensors && op->getResult(0).getType() != init.getType())
    return op.emitOpError()
           << "expects the result type to be the destination's";
  return success();
}

void mlir::rpe::detail::getDestinationEffects(
    DestinationStyleOpInterface op,
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  for (OpOperand &operand : op->getOpOperands()) {
    if (!isa<MemRefType>(operand.get().getType()))
      continue;
    if (op.isDpsInit(&operand))
      effects.emplace_back(MemoryEffects::Write::get(), &operand,
                           SideEffects::DefaultResource::get());
    else
      effects.emplace_back(MemoryEffects::Read::get(), &operand,
                           SideEffects::DefaultResource::get());
  }
}

bufferization::AliasingValueList
mlir::rpe::detail::getDestinationAliases(DestinationStyleOpInterface op,
                                         OpOperand &operand) {
  if (!op.isDpsInit(&operand))
    return {};
  return {{op->getResult(0), bufferization::BufferRelation::Equivalent}};
}

FailureOr<SmallVector<Value>> mlir::rpe::detail::getOperandBuffers(
    Operation *op, RewriterBase &rewriter,
    const bufferization::BufferizationOptions &options,
    bufferization::BufferizationState &state) {
  SmallVector<Value> buffers;
  for (Value operand : op->getOperands()) {
    FailureOr<Value> buffer =
        bufferization::getBuffer(rewriter, operand, options, state);
    if (failed(buffer))
      return failure();
    buffers.push_back(*buffer);
  }
  rewriter.setInsertionPoint(op);
  return buffers;
}

LogicalResult FusedWindowAttentionOp::verify() {
  if (failed(detail::verifyTensorsOrMemrefs(*this)))
    return failure();
  return verifyFusedAttention(*this, "destination");
}

void FusedWindowAttentionOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  detail::getDestinationEffects(*this, effects);
}

bool FusedWindowAttentionOp::bufferizesToMemoryRead(
    OpOperand &operand, const bufferization::AnalysisState &) {
  // The destination is only written.
  return !isDpsInit(&operand);
}

bool FusedWindowAttentionOp::bufferizesToMemoryWrite(
    OpOperand &operand, const bufferization::AnalysisState &) {
  return isDpsInit(&operand);
}

bufferization::AliasingValueList FusedWindowAttentionOp::getAliasingValues(
    OpOperand &operand, const bufferization::AnalysisState &) {
  return detail::getDestinationAliases(*this, operand);
}

LogicalResult FusedWindowAttentionOp::bufferize(
    RewriterBase &rewriter, const bufferization::BufferizationOptions &options,
    bufferization::BufferizationState &state) {
  FailureOr<SmallVector<Value>> buffers =
      detail::getOperandBuffers(*this, rewriter, options, state);
  if (failed(buffers))
    return failure();
  // The same attention on the buffers, writing the destination's (the last
  // operand's) buffer instead of returning a tensor.
  FusedWindowAttentionOp::create(rewriter, getLoc(),
                                 /*resultTypes=*/TypeRange{}, *buffers,
                                 getProperties());
  bufferization::replaceOpWithBufferizedValues(rewriter, *this,
                                               buffers->back());
  return success();
}

//===----------------------------------------------------------------------===//
// FusedWindowAttentionGradOp
//===----------------------------------------------------------------------===//

LogicalResult FusedWindowAttentionGradOp::verify() {
  if (failed(verifyFusedAttention(*this, "out")))
    return failure();
  // Each gradient has its primal's type: dout is out's, dtable the table's.
  std::pair<Value, Value> gradients[] = {{getDout(), getOut()},
                                         {getDquery(), getQuery()},
                                         {getDkey(), getKey()},
                                         {getDvalue(), getValue()}};
  StringRef names[] = {"dout", "dquery", "dkey", "dvalue"};
  for (auto [pair, name] : llvm::zip(gradients, names)) {
    auto [gradient, primal] = pair;
    if (gradient.getType() != primal.getType())
      return emitOpError() << "expects " << name << " of type "
                           << primal.getType() << ", got "
                           << gradient.getType();
  }
  // A sum over every window: it may be kept in f32 whatever the table's
  // element type.
  auto tableType = cast<MemRefType>(getTable().getType());
  auto dtableType = cast<MemRefType>(getDtable().getType());
  if (dtableType != tableType &&
      dtableType != tableType.clone(Float32Type::get(getContext())))
    return emitOpError() << "expects dtable of type " << tableType
                         << " or of its shape in f32, got " << dtableType;
  // Packed: one dqkv map, as q, k, v are one map.
  if (getPackedQkv() &&
      (getDquery() != getDkey() || getDquery() != getDvalue()))
    return emitOpError() << "expects packed dq, dk, dv as one operand";
  return success();
}

void FusedWindowAttentionGradOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  // Operands 0-5 (q, k, v, table, out, dout) are read; the gradients,
  // from dquery on, written.
  unsigned firstGradient = getDqueryMutable().getOperandNumber();
  for (OpOperand &operand : getOperation()->getOpOperands()) {
    if (operand.getOperandNumber() >= firstGradient)
      effects.emplace_back(MemoryEffects::Write::get(), &operand,
                           SideEffects::DefaultResource::get());
    else
      effects.emplace_back(MemoryEffects::Read::get(), &operand,
                           SideEffects::DefaultResource::get());
  }
}

#include "Rpe/RpeInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "Rpe/RpeOps.cpp.inc"
