//===- Aot.cpp - ahead-of-time kernels from a Swin configuration ---------===//

#include "Rpe/Aot.h"
#include "Rpe/Passes.h"
#include "Rpe/RpeOps.h"
#include "Rpe/WindowGeometry.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "lld/Common/Driver.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"

#include <cmath>

LLD_HAS_DRIVER(elf)

using namespace mlir;
using namespace mlir::rpe;

//===----------------------------------------------------------------------===//
// Configuration
//===----------------------------------------------------------------------===//

int64_t KernelConfig::numTokens() const { return getNumTokens(window); }
int64_t KernelConfig::numTableRows() const { return getNumTableRows(window); }
bool KernelConfig::isShifted() const {
  return llvm::any_of(shift, [](int64_t s) { return s != 0; });
}
SmallVector<int64_t> KernelConfig::paddedResolution() const {
  return getPaddedResolution(resolution, window);
}
bool KernelConfig::isPadded() const {
  return layout == Layout::Tokens && paddedResolution() != resolution;
}
int64_t KernelConfig::windowsPerImage() const {
  return hasResolution() ? getNumWindows(paddedResolution(), window) : 1;
}
int64_t KernelConfig::tokensPerImage() const {
  int64_t count = 1;
  for (int64_t n : resolution)
    count *= n;
  return count;
}

void mlir::rpe::applySmallMapRule(KernelConfig &config) {
  if (config.resolution.size() != config.window.size() ||
      config.shift.size() != config.window.size())
    return;
  for (size_t axis = 0; axis < config.window.size(); ++axis)
    if (config.resolution[axis] > 0 &&
        config.resolution[axis] <= config.window[axis]) {
      config.window[axis] = config.resolution[axis];
      config.shift[axis] = 0;
    }
}
float KernelConfig::effectiveScale() const {
  return scale ? *scale : 1.0f / std::sqrt(static_cast<float>(headDim));
}

static llvm::Error configError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Error mlir::rpe::validate(const KernelConfig &config) {
  if (auto error = checkWindow(config.window))
    return configError("--window: " + *error);
  constexpr int64_t kMaxHeads = 4096, kMaxHeadDim = 4096;
  if (config.heads < 1 || config.heads > kMaxHeads)
    return configError(llvm::formatv("--heads must be in [1, {0}], got {1}",
                                     kMaxHeads, config.heads));
  if (config.headDim < 1 || config.headDim > kMaxHeadDim)
    return configError(llvm::formatv("--head-dim must be in [1, {0}], got {1}",
                                     kMaxHeadDim, config.headDim));
  if (config.scale && (!std::isfinite(*config.scale) || *config.scale == 0.0f))
    return configError("--scale must be finite and non-zero");
  if (config.shift.empty() != config.resolution.empty())
    return configError("--shift and --resolution go together");
  if (config.packedQkv && config.layout != Layout::Tokens)
    return configError("--packed-qkv needs --layout=tokens");
  if (config.layout == Layout::Tokens) {
    if (!config.hasResolution())
      return configError("--layout=tokens needs --resolution (the feature "
                         "map)");
    if (auto error =
            checkFeatureMap(config.resolution, config.window, config.shift))
      return configError("--resolution/--shift: " + *error);
  } else if (config.hasResolution()) {
    if (auto error = checkShift(config.resolution, config.window, config.shift))
      return configError("--resolution/--shift: " + *error +
                         " (--layout=tokens pads the map)");
  }
  if (config.table && static_cast<int64_t>(config.table->size()) !=
                          config.numTableRows() * config.heads)
    return configError(llvm::formatv(
        "--table holds {0} floats, expected {1} ([{2}, {3}] for window {4})",
        config.table->size(), config.numTableRows() * config.heads,
        config.numTableRows(), config.heads,
        llvm::join(llvm::map_range(config.window,
                                   [](int64_t w) { return std::to_string(w); }),
                   "x")));
  if (config.vectorWidth && config.vectorWidth != 4 &&
      config.vectorWidth != 8 && config.vectorWidth != 16)
    return configError(llvm::formatv(
        "--vector-width must be 4, 8 or 16, got {0}", config.vectorWidth));
  if (!config.kernel.empty() && config.kernel != "warps" &&
      config.kernel != "rows" &&
      (config.kernel != "tiles" || config.target == "nvptx"))
    return configError(
        "--kernel must be " +
        std::string(config.target == "nvptx" ? "warps or rows"
                                             : "tiles, warps or rows") +
        " for --target=" + config.target + ", got '" + config.kernel + "'");
  if (config.target == "nvptx" && config.numTokens() > 1024)
    return configError(llvm::formatv(
        "--target=nvptx: a window of {0} tokens exceeds the 1024 threads of "
        "a GPU block",
        config.numTokens()));
  auto isIdentifierChar = [](char c) { return llvm::isAlnum(c) || c == '_'; };
  if (config.name.empty() || llvm::isDigit(config.name[0]) ||
      !llvm::all_of(config.name, isIdentifierChar))
    return configError("--name must be a C identifier, got '" + config.name +
                       "'");
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// The rpe module
//===----------------------------------------------------------------------===//

static Type getElementType(MLIRContext &context, ElementKind kind) {
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

OwningOpRef<ModuleOp> mlir::rpe::buildKernelModule(MLIRContext &context,
                                                   const KernelConfig &config) {
  context
      .loadDialect<arith::ArithDialect, bufferization::BufferizationDialect,
                   func::FuncDialect, linalg::LinalgDialect,
                   memref::MemRefDialect, RpeDialect, tensor::TensorDialect>();
  OpBuilder b(&context);
  Location loc = NameLoc::get(b.getStringAttr(config.name));
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());

  Type element = getElementType(context, config.elementKind);
  int64_t h = config.heads, n = config.numTokens(), d = config.headDim;
  int64_t c = config.channels();
  int64_t rows = config.numTableRows();
  int64_t dyn = ShapedType::kDynamic;
  bool tokens = config.layout == Layout::Tokens;
  auto mapType = MemRefType::get({dyn, config.tokensPerImage(), c}, element);
  auto qkvType = tokens ? mapType : MemRefType::get({dyn, h, n, d}, element);
  auto outType = tokens ? mapType : MemRefType::get({dyn, n, c}, element);
  auto tableType = MemRefType::get({rows, h}, element);
  // The CPU ABI takes the padding rows in f32 whatever the element type;
  // the GPU runtime takes device buffers of the element type as they are.
  Type padElement = config.target == "nvptx" ? element : b.getF32Type();
  auto padType = MemRefType::get({3, c}, padElement);

  // Arguments: q, k, v (or the packed qkv), [table,] [pad_qkv,] out.
  SmallVector<Type> argTypes = {qkvType, qkvType, qkvType};
  if (config.packedQkv)
    argTypes = {
        MemRefType::get({dyn, config.tokensPerImage(), 3 * c}, element)};
  if (!config.table)
    argTypes.push_back(tableType);
  if (config.isPadded())
    argTypes.push_back(padType);
  argTypes.push_back(outType);
  auto func = func::FuncOp::create(b, loc, config.name + "_kernel",
                                   b.getFunctionType(argTypes, {}));
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);

  // The caller's buffers do not alias: `restrict` lets bufferization write
  // the result straight into `out`.
  auto toTensor = [&](Value memref) -> Value {
    auto type = cast<MemRefType>(memref.getType());
    return bufferization::ToTensorOp::create(
        b, loc, RankedTensorType::get(type.getShape(), type.getElementType()),
        memref, /*restrict=*/true, /*writable=*/false);
  };
  // Argument positions after q, k, v (one packed argument, or three).
  unsigned next = config.packedQkv ? 1 : 3;
  Value q, k, v;
  if (config.packedQkv) {
    // The three channel slices of the qkv output; the fusion reads them as
    // one map again.
    Value qkv = toTensor(entry->getArgument(0));
    Value batch = tensor::DimOp::create(b, loc, qkv, 0);
    auto slice = [&](int64_t part) -> Value {
      return tensor::ExtractSliceOp::create(
          b, loc,
          RankedTensorType::get({dyn, config.tokensPerImage(), c}, element),
          qkv,
          ArrayRef<OpFoldResult>{b.getIndexAttr(0), b.getIndexAttr(0),
                                 b.getIndexAttr(part * c)},
          ArrayRef<OpFoldResult>{batch, b.getIndexAttr(config.tokensPerImage()),
                                 b.getIndexAttr(c)},
          ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1),
                                 b.getIndexAttr(1)});
    };
    q = slice(0);
    k = slice(1);
    v = slice(2);
  } else {
    q = toTensor(entry->getArgument(0));
    k = toTensor(entry->getArgument(1));
    v = toTensor(entry->getArgument(2));
  }
  Value table;
  if (config.table) {
    auto type = RankedTensorType::get({rows, h}, element);
    const llvm::fltSemantics &semantics =
        cast<FloatType>(element).getFloatSemantics();
    SmallVector<APFloat> values;
    for (float f : *config.table) {
      APFloat value(f);
      bool losesInfo;
      value.convert(semantics, APFloat::rmNearestTiesToEven, &losesInfo);
      values.push_back(value);
    }
    table =
        arith::ConstantOp::create(b, loc, DenseElementsAttr::get(type, values));
  } else {
    table = toTensor(entry->getArgument(next));
  }
  Value out = entry->getArguments().back();

  auto window = b.getDenseI64ArrayAttr(config.window);
  Value bias = LookupOp::create(
      b, loc, RankedTensorType::get({h, n, n}, element), table, window);
  Value mask;
  if (config.isShifted())
    mask = ShiftMaskOp::create(
        b, loc,
        RankedTensorType::get({config.windowsPerImage(), n, n}, b.getF32Type()),
        b.getDenseI64ArrayAttr(config.paddedResolution()), window,
        b.getDenseI64ArrayAttr(config.shift), b.getF64FloatAttr(-100.0));
  auto attentionType = RankedTensorType::get({dyn, n, c}, element);
  Value result;
  if (!tokens) {
    result =
        WindowAttentionOp::create(b, loc, attentionType, q, k, v, bias, mask,
                                  b.getF32FloatAttr(config.effectiveScale()));
  } else {
    // Padding rows of q, k and v, in the element type of the maps.
    SmallVector<Value> pads(3);
    if (config.isPadded()) {
      Value padRows = toTensor(entry->getArgument(argTypes.size() - 2));
      for (int64_t i = 0; i < 3; ++i) {
        auto rowType = RankedTensorType::get({c}, padElement);
        Value row = tensor::ExtractSliceOp::create(
            b, loc, rowType, padRows,
            ArrayRef<OpFoldResult>{b.getIndexAttr(i), b.getIndexAttr(0)},
            ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(c)},
            ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
        if (padElement != element) {
          Value init = tensor::EmptyOp::create(b, loc, {c}, element);
          AffineMap identity = b.getMultiDimIdentityMap(1);
          row =
              linalg::GenericOp::create(
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
        pads[i] = row;
      }
    }
    auto resolution = b.getDenseI64ArrayAttr(config.resolution);
    auto shift = b.getDenseI64ArrayAttr(config.shift);
    auto padding = PaddingOrderAttr::get(
        b.getContext(), config.shiftThenPad ? PaddingOrder::ShiftThenPad
                                            : PaddingOrder::PadThenShift);
    auto windowsType = RankedTensorType::get({dyn, h, n, d}, element);
    auto partition = [&](Value map, Value pad) -> Value {
      return WindowPartitionOp::create(b, loc, windowsType, map, pad,
                                       resolution, window, shift, padding);
    };
    Value attention = WindowAttentionOp::create(
        b, loc, attentionType, partition(q, pads[0]), partition(k, pads[1]),
        partition(v, pads[2]), bias, mask,
        b.getF32FloatAttr(config.effectiveScale()));
    result = WindowReverseOp::create(
        b, loc, RankedTensorType::get(mapType.getShape(), element), attention,
        resolution, window, shift, padding);
  }
  bufferization::MaterializeInDestinationOp::create(b, loc, TypeRange{}, result,
                                                    out, /*restrict=*/true,
                                                    /*writable=*/true);
  func::ReturnOp::create(b, loc);
  return module;
}

//===----------------------------------------------------------------------===//
// Lowering and the C ABI entry point
//===----------------------------------------------------------------------===//

/// Appends the expanded memref descriptor of a contiguous row-major buffer
/// at `ptr` of `shape` (one dynamic leading extent `leading`): allocated
/// and aligned pointers, offset, sizes, strides.
static void appendDescriptor(OpBuilder &b, Location loc, Value ptr,
                             Value leading, ArrayRef<int64_t> shape,
                             SmallVectorImpl<Value> &args) {
  Type i64 = b.getI64Type();
  auto constant = [&](int64_t v) -> Value {
    return LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(v));
  };
  args.append({ptr, ptr, constant(0)});
  for (auto [i, extent] : llvm::enumerate(shape))
    args.push_back(ShapedType::isDynamic(extent) ? leading : constant(extent));
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = shape.size() - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  for (int64_t stride : strides)
    args.push_back(constant(stride));
}

/// Emits the C entry point, which checks its arguments and calls the
/// lowered kernel:
///   windows layout: i32 @<name>(q, k, v, table, out, i64 num_windows)
///   tokens layout:  i32 @<name>(q, k, v, table, out, i64 batch, pad_qkv)
static LogicalResult emitEntryPoint(ModuleOp module,
                                    const KernelConfig &config) {
  MLIRContext *context = module.getContext();
  auto kernel = module.lookupSymbol<LLVM::LLVMFuncOp>(config.name + "_kernel");
  if (!kernel)
    return module.emitError("lowered kernel function not found");
  for (auto func : module.getOps<LLVM::LLVMFuncOp>())
    if (!func.isExternal())
      func.setLinkage(LLVM::Linkage::Internal);

  bool tokens = config.layout == Layout::Tokens;
  OpBuilder b(context);
  Location loc = kernel.getLoc();
  b.setInsertionPointToEnd(module.getBody());
  Type ptr = LLVM::LLVMPointerType::get(context);
  Type i64 = b.getI64Type(), i32 = b.getI32Type(), i1 = b.getI1Type();
  auto constant = [&](Type type, int64_t v) -> Value {
    return LLVM::ConstantOp::create(b, loc, type, b.getIntegerAttr(type, v));
  };

  // pad_qkv may be NULL: padding tokens are then zeros.
  LLVM::GlobalOp zeroPadding;
  if (config.isPadded()) {
    auto arrayType =
        LLVM::LLVMArrayType::get(b.getF32Type(), 3 * config.channels());
    zeroPadding = LLVM::GlobalOp::create(
        b, loc, arrayType, /*isConstant=*/true, LLVM::Linkage::Internal,
        config.name + "_zero_padding",
        b.getZeroAttr(
            RankedTensorType::get({3 * config.channels()}, b.getF32Type())));
  }

  // C arguments: (q, k, v | qkv), table, out, count[, pad_qkv].
  unsigned maps = config.packedQkv ? 1 : 3;
  unsigned tableArg = maps, outArg = maps + 1, countArg = maps + 2,
           padArg = maps + 3;
  SmallVector<Type> params(maps + 2, ptr);
  params.push_back(i64);
  if (tokens)
    params.push_back(ptr);
  auto entryPoint = LLVM::LLVMFuncOp::create(
      b, loc, config.name, LLVM::LLVMFunctionType::get(i32, params));
  Block *entry = entryPoint.addEntryBlock(b);
  Block *invalid = b.createBlock(&entryPoint.getBody());
  Block *valid = b.createBlock(&entryPoint.getBody());

  // Invalid: a null buffer, a negative count, or (shifted windows) a number
  // of windows that is not a whole number of images.
  b.setInsertionPointToStart(entry);
  Value count = entry->getArgument(countArg);
  Value null = LLVM::ZeroOp::create(b, loc, ptr);
  Value bad = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::slt, count,
                                   constant(i64, 0));
  for (unsigned i = 0; i <= outArg; ++i) {
    if (i == tableArg && config.table)
      continue; // a baked table needs no argument
    Value isNull = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq,
                                        entry->getArgument(i), null);
    bad = LLVM::OrOp::create(b, loc, i1, bad, isNull);
  }
  if (int64_t perImage = config.windowsPerImage();
      !tokens && config.isShifted() && perImage > 1) {
    Value remainder =
        LLVM::SRemOp::create(b, loc, count, constant(i64, perImage));
    Value partial = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne,
                                         remainder, constant(i64, 0));
    bad = LLVM::OrOp::create(b, loc, i1, bad, partial);
  }
  LLVM::CondBrOp::create(b, loc, bad, invalid, valid);

  b.setInsertionPointToStart(invalid);
  LLVM::ReturnOp::create(b, loc, ValueRange{constant(i32, 1)});

  b.setInsertionPointToStart(valid);
  int64_t h = config.heads, n = config.numTokens(), d = config.headDim;
  int64_t c = config.channels(), dyn = ShapedType::kDynamic;
  SmallVector<int64_t> qkvShape =
      tokens ? SmallVector<int64_t>{dyn, config.tokensPerImage(), c}
             : SmallVector<int64_t>{dyn, h, n, d};
  SmallVector<int64_t> outShape =
      tokens ? qkvShape : SmallVector<int64_t>{dyn, n, c};
  SmallVector<Value> args;
  if (config.packedQkv)
    appendDescriptor(b, loc, entry->getArgument(0), count,
                     {dyn, config.tokensPerImage(), 3 * c}, args);
  else
    for (unsigned i : {0u, 1u, 2u})
      appendDescriptor(b, loc, entry->getArgument(i), count, qkvShape, args);
  if (!config.table)
    appendDescriptor(b, loc, entry->getArgument(tableArg), count,
                     {config.numTableRows(), h}, args);
  if (config.isPadded()) {
    Value given = entry->getArgument(padArg);
    Value isNull =
        LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, given, null);
    Value zeros = LLVM::AddressOfOp::create(b, loc, zeroPadding);
    Value pad = LLVM::SelectOp::create(b, loc, isNull, zeros, given);
    appendDescriptor(b, loc, pad, count, {3, c}, args);
  }
  appendDescriptor(b, loc, entry->getArgument(outArg), count, outShape, args);
  if (args.size() != kernel.getNumArguments())
    return kernel.emitError("unexpected kernel signature: ")
           << kernel.getNumArguments() << " arguments, " << args.size()
           << " expected";
  LLVM::CallOp::create(b, loc, kernel, args);
  LLVM::ReturnOp::create(b, loc, ValueRange{constant(i32, 0)});
  return success();
}

LogicalResult mlir::rpe::lowerToLLVMDialect(ModuleOp module,
                                            const KernelConfig &config) {
  PassManager pm(module.getContext());
  CpuPipelineOptions options;
  options.parallel = config.parallel;
  options.fuse = config.fuse;
  options.vectorWidth = config.vectorWidth;
  if (!config.kernel.empty())
    options.kernel = *symbolizeKernelStrategy(config.kernel);
  if (!config.vectorWidth) {
    bool avx512 = false;
    if (config.cpu == "native") {
      llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
      avx512 = features.lookup("avx512f");
    }
    options.vectorWidth = avx512 ? 16 : 8;
  }
  buildCpuPipeline(pm, options);
  if (failed(pm.run(module)))
    return failure();
  return emitEntryPoint(module, config);
}

//===----------------------------------------------------------------------===//
// LLVM IR, object file, shared library
//===----------------------------------------------------------------------===//

static llvm::Expected<std::unique_ptr<llvm::TargetMachine>>
createTargetMachine(const KernelConfig &config) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getProcessTriple());
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return configError("no LLVM target for " + triple.str() + ": " + error);
  std::string cpu = config.cpu;
  std::string features;
  if (cpu == "native") {
    cpu = llvm::sys::getHostCPUName().str();
    SmallVector<std::string> enabled;
    for (const auto &feature : llvm::sys::getHostCPUFeatures())
      enabled.push_back((feature.second ? "+" : "-") + feature.first().str());
    features = llvm::join(enabled, ",");
  }
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, cpu, features, llvm::TargetOptions(), llvm::Reloc::PIC_,
      std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!machine)
    return configError("cannot create a target machine for CPU '" + cpu + "'");
  if (!machine->getMCSubtargetInfo()->isCPUStringValid(cpu))
    return configError("--cpu: unknown CPU '" + cpu + "'");
  return machine;
}

llvm::Expected<std::unique_ptr<llvm::Module>>
mlir::rpe::translateAndOptimize(ModuleOp module, llvm::LLVMContext &llvmContext,
                                const KernelConfig &config) {
  DialectRegistry registry;
  registerAllToLLVMIRTranslations(registry);
  module.getContext()->appendDialectRegistry(registry);

  auto machine = createTargetMachine(config);
  if (!machine)
    return machine.takeError();
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, config.name);
  if (!llvmModule)
    return configError("translation to LLVM IR failed");
  llvmModule->setDataLayout((*machine)->createDataLayout());
  llvmModule->setTargetTriple((*machine)->getTargetTriple());
  for (llvm::Function &function : *llvmModule) {
    if (function.isDeclaration())
      continue;
    function.addFnAttr("target-cpu", (*machine)->getTargetCPU());
    function.addFnAttr("target-features", (*machine)->getTargetFeatureString());
  }
  auto optimize = makeOptimizingTransformer(/*optLevel=*/3, /*sizeLevel=*/0,
                                            machine->get());
  if (llvm::Error error = optimize(llvmModule.get()))
    return std::move(error);
  return llvmModule;
}

llvm::Error mlir::rpe::emitObjectFile(llvm::Module &module,
                                      const KernelConfig &config,
                                      llvm::StringRef path) {
  auto machine = createTargetMachine(config);
  if (!machine)
    return machine.takeError();
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return configError("cannot write " + path + ": " + ec.message());
  llvm::legacy::PassManager pm;
  if ((*machine)->addPassesToEmitFile(pm, os, nullptr,
                                      llvm::CodeGenFileType::ObjectFile))
    return configError("the target cannot emit object files");
  pm.run(module);
  os.flush();
  if (os.has_error())
    return configError("cannot write " + path);
  return llvm::Error::success();
}

llvm::Error mlir::rpe::linkSharedLibrary(llvm::StringRef objectPath,
                                         llvm::StringRef libraryPath) {
  // The kernels call into the OpenMP runtime (libomp, beside LLVM's
  // libraries) and libm; the rpath makes the library load from anywhere.
  std::string libDir = SWIN_LLVM_LIBRARY_DIR;
  std::string lOmp = "-L" + libDir;
  std::string object = objectPath.str(), output = libraryPath.str();
  SmallVector<const char *> args = {"ld.lld",
                                    "-shared",
                                    "-o",
                                    output.c_str(),
                                    object.c_str(),
                                    lOmp.c_str(),
                                    "-L/usr/lib/x86_64-linux-gnu",
                                    "-L/lib/x86_64-linux-gnu",
                                    "-lomp",
                                    "-lm",
                                    "-rpath",
                                    libDir.c_str(),
                                    "-z",
                                    "noexecstack",
                                    "--as-needed",
                                    "-O1"};
  std::string messages;
  llvm::raw_string_ostream messageStream(messages);
  lld::Result result = lld::lldMain(args, messageStream, messageStream,
                                    {{lld::Gnu, &lld::elf::link}});
  if (result.retCode != 0)
    return configError("linking " + libraryPath + " failed: " + messages);
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// The C header
//===----------------------------------------------------------------------===//

static std::string joinExtents(ArrayRef<int64_t> values, StringRef separator) {
  return llvm::join(
      llvm::map_range(values, [](int64_t v) { return std::to_string(v); }),
      separator);
}

void mlir::rpe::emitHeader(const KernelConfig &config, llvm::raw_ostream &os) {
  std::string upper = llvm::StringRef(config.name).upper();
  bool tokens = config.layout == Layout::Tokens;
  const char *ctype =
      config.elementKind == ElementKind::F32 ? "float" : "uint16_t";
  const char *typeName = config.elementKind == ElementKind::F32   ? "f32"
                         : config.elementKind == ElementKind::F16 ? "f16"
                                                                  : "bf16";
  int64_t n = config.numTokens();
  os << "/* Generated by swin-aot. Do not edit.\n"
     << " *\n"
     << " * Swin window attention: window " << joinExtents(config.window, "x")
     << " (N = " << n << " tokens), " << config.heads << " heads, head_dim "
     << config.headDim << ", " << typeName << ", scale "
     << llvm::formatv("{0:e}", config.effectiveScale()) << ".\n";
  if (config.hasResolution())
    os << " * Feature map " << joinExtents(config.resolution, "x")
       << (config.isPadded()
               ? " padded to " + joinExtents(config.paddedResolution(), "x") +
                     (config.shiftThenPad ? " after the shift (timm)"
                                          : " before the shift")
               : std::string())
       << ", shift " << joinExtents(config.shift, ",") << ", "
       << config.windowsPerImage() << " windows per image"
       << (config.isShifted() ? "; shifted-window mask -100 across regions"
                              : "")
       << ".\n";
  os << " *\n";
  if (!tokens) {
    os << " * q, k, v: [num_windows, heads, N, head_dim] row-major (Swin's "
          "layout\n"
       << " *          after the qkv split); window b is image b / "
       << config.windowsPerImage() << ", window b % "
       << config.windowsPerImage() << ".\n";
  } else if (config.packedQkv) {
    os << " * qkv:     [batch, " << config.tokensPerImage() << ", 3, "
       << config.heads << ", " << config.headDim
       << "] in image order: the qkv projection's\n"
       << " *          output as it is; the kernel shifts, pads and "
          "partitions by addressing.\n";
  } else {
    os << " * q, k, v: [batch, " << config.tokensPerImage() << ", "
       << config.channels() << "] feature maps in image order (the qkv\n"
       << " *          projection of the un-shifted map, split); the kernel "
          "shifts,\n"
       << " *          pads and partitions by addressing.\n";
  }
  os << " * table:   [(2Wh-1)*(2Ww-1), heads] row-major (Swin's\n"
     << " *          relative_position_bias_table)"
     << (config.table ? "; baked into the kernel: may be NULL.\n" : ".\n");
  if (!tokens)
    os << " * out:     [num_windows, N, heads*head_dim] (Swin's layout before "
          "the\n"
       << " *          output projection).\n";
  else
    os << " * out:     [batch, " << config.tokensPerImage() << ", "
       << config.channels() << "] in image order: shifted back and cropped.\n"
       << " * pad_qkv: [3, " << config.channels() << "] "
       << (config.target == "nvptx" ? "of the element type" : "f32")
       << ", the q, k and v of padding tokens (the qkv\n"
       << " *          bias); NULL means zeros. Unused when the map needs no "
          "padding.\n";
  if (config.elementKind != ElementKind::F32)
    os << " * Elements are raw " << typeName
       << " bits; the arithmetic runs in f32.\n";
  os << " * Returns 0, or non-zero when the arguments are invalid (a NULL\n"
     << " * buffer, a negative count"
     << (config.target == "nvptx" ? ", a device buffer not 16-byte aligned"
                                  : "")
     << (!tokens && config.isShifted()
             ? ", or num_windows not a multiple of the windows per image"
             : "")
     << "); nothing is written then.\n"
     << (config.target == "nvptx"
             ? " * Runs on an NVIDIA GPU (" + config.chip +
                   "): f16/bf16 with head_dim % 16 == 0 on tensor cores (a\n"
                   " * warp per (window, head)), else a thread per query row.\n"
             : std::string(" * Runs on all cores through OpenMP; "
                           "OMP_NUM_THREADS sets the number of threads.\n"))
     << " */\n"
     << "#ifndef " << upper << "_H\n#define " << upper << "_H\n\n"
     << "#include <stdint.h>\n"
     << (config.target == "nvptx" ? "#include <cuda.h>\n" : "") << "\n"
     << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
     << "#define " << upper << "_NUM_TOKENS " << n << "\n"
     << "#define " << upper << "_NUM_HEADS " << config.heads << "\n"
     << "#define " << upper << "_HEAD_DIM " << config.headDim << "\n"
     << "#define " << upper << "_TABLE_ROWS " << config.numTableRows() << "\n"
     << "#define " << upper << "_WINDOWS_PER_IMAGE " << config.windowsPerImage()
     << "\n";
  if (tokens)
    os << "#define " << upper << "_TOKENS_PER_IMAGE " << config.tokensPerImage()
       << "\n";
  os << "\n";
  const char *count = tokens ? "batch" : "num_windows";
  if (config.target == "nvptx") {
    os << "/* Device pointers, the same layouts; the kernel is queued on "
          "`stream`.\n"
       << " * Errors (invalid arguments, or CUDA's) return non-zero; "
       << config.name << "_last_error()\n"
       << " * describes the last one. Never aborts. */\n"
       << "int " << config.name << "("
       << (config.packedQkv ? "CUdeviceptr qkv"
                            : "CUdeviceptr q, CUdeviceptr k, CUdeviceptr v")
       << ",\n    CUdeviceptr table, CUdeviceptr out, int64_t " << count;
    if (tokens)
      os << ",\n    CUdeviceptr pad_qkv";
    os << ", CUstream stream);\n"
       << "const char *" << config.name << "_last_error(void);\n\n";
  } else {
    os << "int " << config.name << "(";
    if (config.packedQkv)
      os << "const " << ctype << " *qkv";
    else
      os << "const " << ctype << " *q, const " << ctype << " *k, const "
         << ctype << " *v";
    os << ",\n    const " << ctype << " *table, " << ctype << " *out, int64_t "
       << count;
    if (tokens)
      os << ",\n    const float *pad_qkv";
    os << ");\n\n";
  }
  os << "#ifdef __cplusplus\n}\n#endif\n\n#endif /* " << upper << "_H */\n";
}

//===----------------------------------------------------------------------===//
// GPU kernels and their host runtime
//===----------------------------------------------------------------------===//

llvm::Expected<GpuKernel>
mlir::rpe::compileGpuKernel(ModuleOp module, const KernelConfig &config,
                            llvm::StringRef format) {
  PassManager kernelPm(module.getContext());
  buildGpuKernelPipeline(kernelPm,
                         config.kernel.empty()
                             ? KernelStrategy::Warps
                             : *symbolizeKernelStrategy(config.kernel));
  if (failed(kernelPm.run(module)))
    return configError("lowering to a GPU kernel failed");

  // The launch tells the launcher what to pass: its operands are arguments
  // of the kernel function, whose C counterparts are known.
  SmallVector<gpu::LaunchFuncOp> launches;
  module.walk([&](gpu::LaunchFuncOp launch) { launches.push_back(launch); });
  if (launches.size() != 1)
    return configError("expected one GPU launch, found " +
                       std::to_string(launches.size()));
  gpu::LaunchFuncOp launch = launches.front();
  GpuKernel kernel;
  kernel.symbol = launch.getKernelName().getValue().str();
  APInt blockSize;
  if (!matchPattern(launch.getBlockSizeX(), m_ConstantInt(&blockSize)))
    return configError("the GPU block size is not a constant");
  kernel.blockSize = blockSize.getSExtValue();
  auto host = launch->getParentOfType<FunctionOpInterface>();
  auto itemsPerBlock =
      host ? host->getAttrOfType<IntegerAttr>(kItemsPerBlockAttr) : nullptr;
  if (!itemsPerBlock || itemsPerBlock.getInt() < 1)
    return configError("the GPU launch does not say how many items a block "
                       "takes");
  kernel.itemsPerBlock = itemsPerBlock.getInt();
  // C arguments: 0 q, 1 k, 2 v, 3 table, 4 out, 6 pad_qkv.
  SmallVector<unsigned> cArgument = {0, 1, 2};
  if (config.packedQkv)
    cArgument = {0}; // qkv
  if (!config.table)
    cArgument.push_back(3);
  if (config.isPadded())
    cArgument.push_back(6);
  cArgument.push_back(4);
  for (Value operand : launch.getKernelOperands()) {
    // A kernel operand is an argument of the kernel function or a static
    // view of one (a row of pad_qkv).
    Value source = operand;
    while (auto view = source.getDefiningOp<memref::SubViewOp>())
      source = view.getSource();
    auto argument = dyn_cast<BlockArgument>(source);
    auto type = dyn_cast<MemRefType>(operand.getType());
    if (!argument || !type || argument.getArgNumber() >= cArgument.size())
      return configError("unexpected GPU kernel operand");
    GpuKernel::Param param;
    param.argument = cArgument[argument.getArgNumber()];
    param.shape = llvm::to_vector(type.getShape());
    if (failed(type.getStridesAndOffset(param.strides, param.offset)) ||
        ShapedType::isDynamic(param.offset) ||
        llvm::any_of(param.strides, ShapedType::isDynamic))
      return configError("GPU kernel operand with a dynamic layout");
    kernel.params.push_back(param);
  }

  GpuPipelineOptions options;
  options.chip = config.chip;
  options.features = config.ptxFeatures;
  options.toolkit = config.cudaToolkit;
  options.format = format.str();
  PassManager devicePm(module.getContext());
  buildGpuDevicePipeline(devicePm, options);
  addGpuSerializationPass(devicePm, options);
  if (failed(devicePm.run(module)))
    return configError("compiling the GPU kernel for " + config.chip +
                       " failed");
  SmallVector<gpu::BinaryOp> binaries;
  module.walk([&](gpu::BinaryOp binary) { binaries.push_back(binary); });
  if (binaries.size() != 1 || binaries.front().getObjects().size() != 1)
    return configError("expected one GPU binary with one object");
  auto object = cast<gpu::ObjectAttr>(binaries.front().getObjects()[0]);
  kernel.image = object.getObject().getValue().str();
  return kernel;
}

void mlir::rpe::emitGpuRuntime(const KernelConfig &config,
                               const GpuKernel &kernel,
                               llvm::StringRef headerName,
                               llvm::raw_ostream &os) {
  const std::string &name = config.name;
  bool tokens = config.layout == Layout::Tokens;
  os << "/* Generated by swin-aot. Do not edit.\n"
     << " * Host runtime of " << name << " (CUDA driver API): loads the "
     << config.chip << " kernel embedded below\n"
     << " * once per process and launches it. Build with\n"
     << " *   cc -c " << name << ".c -I<cuda>/include    (link -lcuda)\n"
     << " */\n"
     << "#include \"" << headerName << "\"\n\n"
     << "#include <pthread.h>\n#include <stdio.h>\n\n"
     << "static const unsigned char " << name << "_image[] = {";
  for (size_t i = 0; i < kernel.image.size(); ++i)
    os << (i % 16 ? " " : "\n    ")
       << llvm::formatv("0x{0:x-2},",
                        static_cast<unsigned char>(kernel.image[i]));
  os << "\n    0x00};\n\n"
     << "static CUfunction " << name << "_function;\n"
     << "static CUresult " << name << "_load_status;\n"
     << "static pthread_once_t " << name << "_once = PTHREAD_ONCE_INIT;\n"
     << "static char " << name << "_error[256];\n";
  if (config.isPadded())
    os << "static CUdeviceptr " << name << "_zeros; /* pad_qkv == 0 */\n";
  os << "\nconst char *" << name << "_last_error(void) { return " << name
     << "_error; }\n\n"
     << "static int " << name << "_fail(CUresult status, const char *what) {\n"
     << "  const char *text = 0;\n"
     << "  cuGetErrorString(status, &text);\n"
     << "  snprintf(" << name << "_error, sizeof " << name << "_error, \""
     << name << ": %s: %s (CUDA error %d)\",\n"
     << "           what, text ? text : \"unknown error\", (int)status);\n"
     << "  return (int)status ? (int)status : 1;\n}\n\n"
     << "/* Loads the module into the current context, or device 0's primary "
        "one. */\n"
     << "static void " << name << "_load(void) {\n"
     << "  CUresult s = cuInit(0);\n"
     << "  CUcontext context = 0;\n"
     << "  if (s == CUDA_SUCCESS) s = cuCtxGetCurrent(&context);\n"
     << "  if (s == CUDA_SUCCESS && !context) {\n"
     << "    CUdevice device;\n"
     << "    s = cuDeviceGet(&device, 0);\n"
     << "    if (s == CUDA_SUCCESS) s = cuDevicePrimaryCtxRetain(&context, "
        "device);\n"
     << "    if (s == CUDA_SUCCESS) s = cuCtxSetCurrent(context);\n"
     << "  }\n"
     << "  CUmodule module;\n"
     << "  if (s == CUDA_SUCCESS) s = cuModuleLoadData(&module, " << name
     << "_image);\n"
     << "  if (s == CUDA_SUCCESS) s = cuModuleGetFunction(&" << name
     << "_function, module, \"" << kernel.symbol << "\");\n";
  if (config.isPadded()) {
    int64_t bytes = 3 * config.channels() *
                    (config.elementKind == ElementKind::F32 ? 4 : 2);
    os << "  if (s == CUDA_SUCCESS) s = cuMemAlloc(&" << name << "_zeros, "
       << bytes << ");\n"
       << "  if (s == CUDA_SUCCESS) s = cuMemsetD8(" << name << "_zeros, 0, "
       << bytes << ");\n";
  }
  os << "  " << name << "_load_status = s;\n}\n\n";

  const char *count = tokens ? "batch" : "num_windows";
  // The q, k, v arguments: one packed qkv map, or three.
  bool packed = config.packedQkv;
  const char *inputs = packed ? "qkv" : "q, k, v";
  os << "int " << name << "("
     << (packed ? "CUdeviceptr qkv"
                : "CUdeviceptr q, CUdeviceptr k, CUdeviceptr v")
     << ",\n    CUdeviceptr table, CUdeviceptr out, int64_t " << count
     << (tokens ? ",\n    CUdeviceptr pad_qkv" : "") << ", CUstream stream) {\n"
     << "  if (" << (packed ? "!qkv" : "!q || !k || !v") << " || !out"
     << (config.table ? "" : " || !table") << " || " << count << " < 0";
  if (!tokens && config.isShifted())
    os << " || " << count << " % " << config.windowsPerImage();
  os << ") {\n"
     << "    snprintf(" << name << "_error, sizeof " << name << "_error, \""
     << name << ": invalid arguments\");\n"
     << "    return 1;\n  }\n"
     // The tensor-core kernel moves rows in 16-byte vectors; one contract
     // for every GPU kernel.
     << "  if ((" << (packed ? "qkv" : "q | k | v") << " | out"
     << (tokens ? " | pad_qkv" : "") << ") % 16) {\n"
     << "    snprintf(" << name << "_error, sizeof " << name << "_error, \""
     << name << ": " << inputs << ", out" << (tokens ? " and pad_qkv" : "")
     << " must be 16-byte aligned\");\n"
     << "    return 1;\n  }\n"
     << "  if (" << count << " == 0) return 0;\n"
     << "  pthread_once(&" << name << "_once, " << name << "_load);\n"
     << "  if (" << name << "_load_status != CUDA_SUCCESS)\n"
     << "    return " << name << "_fail(" << name
     << "_load_status, \"loading the kernel\");\n";
  if (config.isPadded())
    os << "  if (!pad_qkv) pad_qkv = " << name << "_zeros;\n";
  // Windows in the grid: num_windows, or batch * windows per image.
  os << "  int64_t windows = " << count;
  if (tokens)
    os << " * " << config.windowsPerImage();
  os << ";\n";
  const char *cNames[] = {
      packed ? "qkv" : "q", "k", "v", "table", "out", "", "pad_qkv"};
  SmallVector<std::string> params;
  for (auto [i, param] : llvm::enumerate(kernel.params)) {
    // Descriptor: allocated and aligned pointers, offset, sizes, strides.
    os << "  CUdeviceptr p" << i << " = " << cNames[param.argument] << ";\n"
       << "  int64_t d" << i << "[] = {" << param.offset;
    for (int64_t extent : param.shape)
      os << ", "
         << (ShapedType::isDynamic(extent) ? std::string(count)
                                           : std::to_string(extent));
    for (int64_t stride : param.strides)
      os << ", " << stride;
    os << "};\n";
    params.push_back(llvm::formatv("&p{0}", i));
    params.push_back(llvm::formatv("&p{0}", i));
    for (size_t j = 0; j < 1 + 2 * param.shape.size(); ++j)
      params.push_back(llvm::formatv("&d{0}[{1}]", i, j));
  }
  os << "  void *params[] = {" << llvm::join(params, ", ") << "};\n"
     << "  CUresult s = cuLaunchKernel(" << name << "_function, (unsigned)"
     << (kernel.itemsPerBlock == 1
             ? llvm::formatv("(windows * {0})", config.heads).str()
             : llvm::formatv("((windows * {0} + {1}) / {2})", config.heads,
                             kernel.itemsPerBlock - 1, kernel.itemsPerBlock)
                   .str())
     << ", 1, 1, " << kernel.blockSize << ", 1, 1, 0, stream, params, 0);\n"
     << "  if (s != CUDA_SUCCESS) return " << name
     << "_fail(s, \"cuLaunchKernel\");\n"
     << "  return 0;\n}\n";
}
