//===- KernelModule.cpp - the rpe module of an ahead-of-time kernel -------===//
//
// A configuration becomes `func @<name>_kernel(<the ABI's buffers>)` on
// memrefs whose body is rpe ops on tensors: a lookup of the table, the
// shift mask, the window attention (between window partitions and the
// reverse for the token layout), materialized in `out`. The compiler's
// passes do the rest, exactly as for a module a user writes.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Aot.h"
#include "Rpe/RpeOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace mlir::rpe;

Type mlir::rpe::getElementType(MLIRContext &context, ElementKind kind) {
  switch (kind) {
  case ElementKind::F32:
    return Float32Type::get(&context);
  case ElementKind::F16:
    return Float16Type::get(&context);
  case ElementKind::BF16:
    return BFloat16Type::get(&context);
  }
  llvm_unreachable("unknown element kind");
}

MemRefType mlir::rpe::getKernelOperandType(MLIRContext &context,
                                           const AbiArgument &argument) {
  SmallVector<int64_t> shape = llvm::to_vector(
      llvm::map_range(argument.getOperandShape(), [](int64_t extent) {
        return extent == kDynamicExtent ? ShapedType::kDynamic : extent;
      }));
  return MemRefType::get(shape, getElementType(context, argument.element));
}

/// The rows of pad_qkv ([3, C]) as three [C] tensors of `element`.
static SmallVector<Value> splitPaddingRows(OpBuilder &b, Location loc,
                                           Value rows, Type element) {
  auto type = cast<RankedTensorType>(rows.getType());
  int64_t c = type.getDimSize(1);
  SmallVector<Value> split;
  for (int64_t i = 0; i < 3; ++i) {
    Value row = tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get({c}, type.getElementType()), rows,
        ArrayRef<OpFoldResult>{b.getIndexAttr(i), b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(c)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
    if (type.getElementType() != element) {
      Value init = tensor::EmptyOp::create(b, loc, {c}, element);
      AffineMap identity = b.getMultiDimIdentityMap(1);
      row = linalg::GenericOp::create(
                b, loc, TypeRange{init.getType()}, row, init,
                ArrayRef<AffineMap>{identity, identity},
                ArrayRef<utils::IteratorType>{utils::IteratorType::parallel},
                [&](OpBuilder &nb, Location nloc, ValueRange args) {
                  Value narrow =
                      arith::TruncFOp::create(nb, nloc, element, args[0]);
                  linalg::YieldOp::create(nb, nloc, narrow);
                })
                .getResult(0);
    }
    split.push_back(row);
  }
  return split;
}

/// The baked table as a constant of `element`.
static Value createTableConstant(OpBuilder &b, Location loc,
                                 const KernelConfig &config, Type element) {
  auto type =
      RankedTensorType::get({config.numTableRows(), config.heads}, element);
  const llvm::fltSemantics &semantics =
      cast<FloatType>(element).getFloatSemantics();
  SmallVector<APFloat> values;
  for (float f : *config.table) {
    APFloat value(f);
    bool losesInfo;
    value.convert(semantics, APFloat::rmNearestTiesToEven, &losesInfo);
    values.push_back(value);
  }
  return arith::ConstantOp::create(b, loc,
                                   DenseElementsAttr::get(type, values));
}

/// `func @ABI_NAME_kernel(...)` whose arguments are the ABI's kernel
/// `operands`, at the builder's point; the builder is left at the start of
/// its body, which is returned.
static Block *createKernelFunction(OpBuilder &b, Location loc,
                                   const KernelAbi &abi,
                                   ArrayRef<const AbiArgument *> operands) {
  SmallVector<Type> argTypes;
  for (const AbiArgument *operand : operands)
    argTypes.push_back(getKernelOperandType(*b.getContext(), *operand));
  auto func = func::FuncOp::create(b, loc, abi.name + "_kernel",
                                   b.getFunctionType(argTypes, {}));
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  return entry;
}

/// `func @NAME_backward_kernel(<the backward ABI's buffers>)`: the gradient
/// op on them as they are (it exists on buffers only); a baked table is a
/// constant global.
static void buildBackwardKernel(OpBuilder &b, ModuleOp module,
                                const KernelConfig &config) {
  MLIRContext &context = *b.getContext();
  Location loc = NameLoc::get(b.getStringAttr(config.name + "_backward"));
  KernelAbi abi = getKernelAbi(config, Direction::Backward);
  SmallVector<const AbiArgument *> operands = abi.kernelOperands();
  OpBuilder::InsertionGuard guard(b);
  Block *entry = createKernelFunction(b, loc, abi, operands);

  SmallVector<Value> inputs, gradients;
  Value table, out, dout, dtable;
  for (auto [argument, value] : llvm::zip(operands, entry->getArguments())) {
    switch (argument->role) {
    case ArgumentRole::Input:
      inputs.push_back(value);
      break;
    case ArgumentRole::InputGradient:
      gradients.push_back(value);
      break;
    case ArgumentRole::Table:
      table = value;
      break;
    case ArgumentRole::Output:
      out = value;
      break;
    case ArgumentRole::OutputGradient:
      dout = value;
      break;
    case ArgumentRole::TableGradient:
      dtable = value;
      break;
    default:
      llvm_unreachable("not an operand of the backward kernel");
    }
  }
  if (config.table) {
    auto tensorType = RankedTensorType::get(
        {config.numTableRows(), config.heads}, b.getF32Type());
    auto type = MemRefType::get(tensorType.getShape(), b.getF32Type());
    {
      OpBuilder::InsertionGuard moduleGuard(b);
      b.setInsertionPoint(entry->getParentOp());
      memref::GlobalOp::create(
          b, loc, config.name + "_backward_table", b.getStringAttr("private"),
          type,
          DenseElementsAttr::get(tensorType, ArrayRef<float>(*config.table)),
          /*constant=*/true, b.getI64IntegerAttr(64));
    }
    table = memref::GetGlobalOp::create(b, loc, type,
                                        config.name + "_backward_table");
  }
  // Packed: q, k, v are one map, and so are their gradients.
  if (inputs.size() == 1) {
    inputs.assign(3, inputs.front());
    gradients.assign(3, gradients.front());
  }
  bool tokens = config.hasTokenLayout();
  DenseI64ArrayAttr resolution, shift, image;
  if (config.hasResolution()) {
    resolution = b.getDenseI64ArrayAttr(config.paddedResolution());
    shift = b.getDenseI64ArrayAttr(config.shift);
  }
  if (tokens)
    image = b.getDenseI64ArrayAttr(config.resolution);
  FusedWindowAttentionGradOp::create(
      b, loc, inputs[0], inputs[1], inputs[2], table, out, dout, gradients[0],
      gradients[1], gradients[2], dtable, b.getDenseI64ArrayAttr(config.window),
      b.getF32FloatAttr(config.effectiveScale()), resolution, shift,
      b.getF64FloatAttr(kSwinMaskValue), image,
      PaddingOrderAttr::get(&context, config.padding),
      PartitionAttr::get(&context, config.partition),
      config.packedQkv ? b.getUnitAttr() : nullptr,
      config.classToken ? b.getUnitAttr() : nullptr);
  func::ReturnOp::create(b, loc);
}

/// `func @NAME_backward_sum_tables(%partials: memref<?xTHxf32>,
/// %dtable: memref<THxf32>, %begin, %end)`: dtable[e] = sum_p
/// partials[p, e] for e in [begin, end). The entry point's threads each
/// write a partial table gradient, then sum a range of its entries.
static void buildTableGradientSum(OpBuilder &b, ModuleOp module,
                                  const KernelConfig &config) {
  Location loc = NameLoc::get(b.getStringAttr(config.name + "_backward"));
  int64_t entries = config.numTableRows() * config.heads;
  Type f32 = b.getF32Type(), index = b.getIndexType();
  auto partialsType = MemRefType::get({ShapedType::kDynamic, entries}, f32);
  auto tableType = MemRefType::get({entries}, f32);
  auto func = func::FuncOp::create(
      b, loc, getTableGradientSumName(config),
      b.getFunctionType({partialsType, tableType, index, index}, {}));
  Block *entry = func.addEntryBlock();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  Value partials = entry->getArgument(0), dtable = entry->getArgument(1);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value count = memref::DimOp::create(b, loc, partials, 0);
  Value initial = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0));
  scf::ForOp::create(
      b, loc, entry->getArgument(2), entry->getArgument(3), one, ValueRange{},
      [&](OpBuilder &nb, Location nloc, Value e, ValueRange) {
        auto sum = scf::ForOp::create(
            nb, nloc, zero, count, one, ValueRange{initial},
            [&](OpBuilder &ib, Location iloc, Value p, ValueRange acc) {
              Value partial =
                  memref::LoadOp::create(ib, iloc, partials, ValueRange{p, e});
              Value next = arith::AddFOp::create(ib, iloc, acc[0], partial);
              scf::YieldOp::create(ib, iloc, next);
            });
        memref::StoreOp::create(nb, nloc, sum.getResult(0), dtable, e);
        scf::YieldOp::create(nb, nloc);
      });
  func::ReturnOp::create(b, loc);
}

std::string mlir::rpe::getTableGradientSumName(const KernelConfig &config) {
  return config.name + "_backward_sum_tables";
}

/// SwinV2's table from the CPB MLP's weights, as constants: the op folds
/// when the pipeline runs.
static Value createContinuousPositionBias(OpBuilder &b, Location loc,
                                          const KernelConfig &config,
                                          Type element) {
  const KernelConfig::CpbMlp &mlp = *config.cpbMlp;
  int64_t hidden = mlp.hidden, rank = config.window.size();
  ArrayRef<float> weights = mlp.weights;
  auto constant = [&](ArrayRef<int64_t> shape, int64_t offset) -> Value {
    auto type = RankedTensorType::get(shape, b.getF32Type());
    return arith::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(type,
                               weights.slice(offset, type.getNumElements())));
  };
  Value fc1Weight = constant({hidden, rank}, 0);
  Value fc1Bias = constant({hidden}, hidden * rank);
  Value fc2Weight = constant({config.heads, hidden}, hidden * rank + hidden);
  auto pretrained = mlp.pretrainedWindow.empty()
                        ? DenseI64ArrayAttr()
                        : b.getDenseI64ArrayAttr(mlp.pretrainedWindow);
  return ContinuousPositionBiasOp::create(
      b, loc,
      RankedTensorType::get({config.numTableRows(), config.heads}, element),
      fc1Weight, fc1Bias, fc2Weight, b.getDenseI64ArrayAttr(config.window),
      pretrained);
}

OwningOpRef<ModuleOp> mlir::rpe::buildKernelModule(MLIRContext &context,
                                                   const KernelConfig &config) {
  context.loadDialect<arith::ArithDialect, bufferization::BufferizationDialect,
                      func::FuncDialect, linalg::LinalgDialect,
                      memref::MemRefDialect, RpeDialect, scf::SCFDialect,
                      tensor::TensorDialect>();
  OpBuilder b(&context);
  Location loc = NameLoc::get(b.getStringAttr(config.name));
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());

  KernelAbi abi = getKernelAbi(config);
  SmallVector<const AbiArgument *> operands = abi.kernelOperands();
  Block *entry = createKernelFunction(b, loc, abi, operands);

  // The caller's buffers do not alias: `restrict` lets bufferization write
  // the result straight into `out`.
  auto toTensor = [&](Value memref) -> Value {
    auto type = cast<MemRefType>(memref.getType());
    return bufferization::ToTensorOp::create(
        b, loc, RankedTensorType::get(type.getShape(), type.getElementType()),
        memref, /*restrict=*/true, /*writable=*/false);
  };
  SmallVector<Value> inputs;
  Value table, logitScale, padRows, out;
  for (auto [argument, value] : llvm::zip(operands, entry->getArguments())) {
    switch (argument->role) {
    case ArgumentRole::Input:
      inputs.push_back(toTensor(value));
      break;
    case ArgumentRole::Table:
      table = toTensor(value);
      break;
    case ArgumentRole::LogitScale:
      logitScale = toTensor(value);
      break;
    case ArgumentRole::Padding:
      padRows = toTensor(value);
      break;
    case ArgumentRole::Output:
      out = value;
      break;
    default:
      llvm_unreachable("scalars are not kernel operands");
    }
  }

  Type element = getElementType(context, config.elementKind);
  int64_t h = config.heads, n = config.numTokens(), d = config.headDim;
  int64_t c = config.channels(), dyn = ShapedType::kDynamic;
  int64_t tokensPerImage = config.tokensPerImage();
  Value q, k, v;
  if (config.packedQkv) {
    // The three channel slices of the qkv output; the fusion reads them as
    // one map again.
    Value qkv = inputs.front();
    Value batch = tensor::DimOp::create(b, loc, qkv, 0);
    auto slice = [&](int64_t part) -> Value {
      return tensor::ExtractSliceOp::create(
          b, loc, RankedTensorType::get({dyn, tokensPerImage, c}, element), qkv,
          ArrayRef<OpFoldResult>{b.getIndexAttr(0), b.getIndexAttr(0),
                                 b.getIndexAttr(part * c)},
          ArrayRef<OpFoldResult>{batch, b.getIndexAttr(tokensPerImage),
                                 b.getIndexAttr(c)},
          ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1),
                                 b.getIndexAttr(1)});
    };
    q = slice(0);
    k = slice(1);
    v = slice(2);
  } else {
    q = inputs[0];
    k = inputs[1];
    v = inputs[2];
  }
  if (config.table)
    table = createTableConstant(b, loc, config, element);
  if (config.cpbMlp)
    table = createContinuousPositionBias(b, loc, config, element);

  auto window = b.getDenseI64ArrayAttr(config.window);
  Value bias =
      LookupOp::create(b, loc, RankedTensorType::get({h, n, n}, element), table,
                       window, config.classToken);
  Value mask;
  if (config.isShifted())
    mask = ShiftMaskOp::create(
        b, loc,
        RankedTensorType::get({config.windowsPerImage(), n, n}, b.getF32Type()),
        b.getDenseI64ArrayAttr(config.paddedResolution()), window,
        b.getDenseI64ArrayAttr(config.shift),
        b.getF64FloatAttr(kSwinMaskValue));
  auto attentionType = RankedTensorType::get({dyn, n, c}, element);
  auto scale = b.getF32FloatAttr(config.effectiveScale());
  Value result;
  if (!config.hasTokenLayout()) {
    result = WindowAttentionOp::create(b, loc, attentionType, q, k, v, bias,
                                       mask, logitScale, scale);
  } else {
    // Padding rows of q, k and v, in the element type of the maps.
    SmallVector<Value> pads(3);
    if (padRows)
      pads = splitPaddingRows(b, loc, padRows, element);
    auto resolution = b.getDenseI64ArrayAttr(config.resolution);
    auto shift = b.getDenseI64ArrayAttr(config.shift);
    auto padding = PaddingOrderAttr::get(&context, config.padding);
    auto partitionKind = PartitionAttr::get(&context, config.partition);
    auto windowsType = RankedTensorType::get({dyn, h, n, d}, element);
    auto partition = [&](Value map, Value pad) -> Value {
      return WindowPartitionOp::create(b, loc, windowsType, map, pad,
                                       resolution, window, shift, padding,
                                       partitionKind);
    };
    Value attention = WindowAttentionOp::create(
        b, loc, attentionType, partition(q, pads[0]), partition(k, pads[1]),
        partition(v, pads[2]), bias, mask, logitScale, scale);
    result = WindowReverseOp::create(
        b, loc, RankedTensorType::get({dyn, tokensPerImage, c}, element),
        attention, resolution, window, shift, padding, partitionKind);
  }
  bufferization::MaterializeInDestinationOp::create(b, loc, TypeRange{}, result,
                                                    out, /*restrict=*/true,
                                                    /*writable=*/true);
  func::ReturnOp::create(b, loc);
  if (config.grad) {
    b.setInsertionPointToEnd(module->getBody());
    buildBackwardKernel(b, *module, config);
    // The CPU entry point's threads sum their partial table gradients with
    // it; the GPU's kernel sums its own.
    if (!config.isGpu())
      buildTableGradientSum(b, *module, config);
  }
  return module;
}
