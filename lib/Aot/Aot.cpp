//===- Aot.cpp - ahead-of-time kernels from a Swin configuration ---------===//

#include "Rpe/Aot.h"
#include "Rpe/Passes.h"
#include "Rpe/RpeOps.h"
#include "Rpe/WindowGeometry.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "lld/Common/Driver.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/MC/MCSubtargetInfo.h"
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
int64_t KernelConfig::numMaskWindows() const {
  return hasShiftMask() ? getNumWindows(resolution, window) : 1;
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
  if (config.hasShiftMask()) {
    if (auto error = checkShift(config.resolution, config.window, config.shift))
      return configError("--resolution/--shift: " + *error);
    for (size_t axis = 0; axis < config.window.size(); ++axis)
      if (config.shift[axis] != 0 &&
          config.resolution[axis] == config.window[axis])
        return configError(llvm::formatv(
            "--shift: the resolution equals the window along axis {0}, where "
            "Swin turns the shift off; pass a shift of 0 there",
            axis));
  }
  if (config.table &&
      static_cast<int64_t>(config.table->size()) !=
          config.numTableRows() * config.heads)
    return configError(llvm::formatv(
        "--table holds {0} floats, expected {1} ([{2}, {3}] for window {4})",
        config.table->size(), config.numTableRows() * config.heads,
        config.numTableRows(), config.heads,
        llvm::join(llvm::map_range(config.window,
                                   [](int64_t w) { return std::to_string(w); }),
                   "x")));
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
  context.loadDialect<arith::ArithDialect, bufferization::BufferizationDialect,
                      func::FuncDialect, memref::MemRefDialect, RpeDialect,
                      tensor::TensorDialect>();
  OpBuilder b(&context);
  Location loc = NameLoc::get(b.getStringAttr(config.name));
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());

  Type element = getElementType(context, config.elementKind);
  int64_t h = config.heads, n = config.numTokens(), d = config.headDim;
  int64_t rows = config.numTableRows();
  int64_t dyn = ShapedType::kDynamic;
  auto qkvType = MemRefType::get({dyn, h, n, d}, element);
  auto tableType = MemRefType::get({rows, h}, element);
  auto outType = MemRefType::get({dyn, n, h * d}, element);

  SmallVector<Type> argTypes = {qkvType, qkvType, qkvType};
  if (!config.table)
    argTypes.push_back(tableType);
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
        b, loc, RankedTensorType::get(type.getShape(), element), memref,
        /*restrict=*/true, /*writable=*/false);
  };
  Value q = toTensor(entry->getArgument(0));
  Value k = toTensor(entry->getArgument(1));
  Value v = toTensor(entry->getArgument(2));
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
    table = arith::ConstantOp::create(b, loc,
                                      DenseElementsAttr::get(type, values));
  } else {
    table = toTensor(entry->getArgument(3));
  }
  Value out = entry->getArguments().back();

  auto window = b.getDenseI64ArrayAttr(config.window);
  Value bias = LookupOp::create(
      b, loc, RankedTensorType::get({h, n, n}, element), table, window);
  Value mask;
  if (config.hasShiftMask() &&
      llvm::any_of(config.shift, [](int64_t s) { return s != 0; }))
    mask = ShiftMaskOp::create(
        b, loc,
        RankedTensorType::get({config.numMaskWindows(), n, n}, b.getF32Type()),
        b.getDenseI64ArrayAttr(config.resolution), window,
        b.getDenseI64ArrayAttr(config.shift), b.getF64FloatAttr(-100.0));
  Value attention = WindowAttentionOp::create(
      b, loc, RankedTensorType::get({dyn, n, h * d}, element), q, k, v, bias,
      mask, b.getF32FloatAttr(config.effectiveScale()));
  bufferization::MaterializeInDestinationOp::create(
      b, loc, TypeRange{}, attention, out, /*restrict=*/true,
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

/// Emits `i32 @<name>(ptr q, ptr k, ptr v, ptr table, ptr out, i64 windows)`
/// which checks its arguments and calls the lowered kernel.
static LogicalResult emitEntryPoint(ModuleOp module,
                                    const KernelConfig &config) {
  MLIRContext *context = module.getContext();
  auto kernel =
      module.lookupSymbol<LLVM::LLVMFuncOp>(config.name + "_kernel");
  if (!kernel)
    return module.emitError("lowered kernel function not found");
  for (auto func : module.getOps<LLVM::LLVMFuncOp>())
    if (!func.isExternal())
      func.setLinkage(LLVM::Linkage::Internal);

  OpBuilder b(context);
  Location loc = kernel.getLoc();
  b.setInsertionPointToEnd(module.getBody());
  Type ptr = LLVM::LLVMPointerType::get(context);
  Type i64 = b.getI64Type(), i32 = b.getI32Type(), i1 = b.getI1Type();
  auto entryType =
      LLVM::LLVMFunctionType::get(i32, {ptr, ptr, ptr, ptr, ptr, i64});
  auto entryPoint = LLVM::LLVMFuncOp::create(b, loc, config.name, entryType);
  Block *entry = entryPoint.addEntryBlock(b);
  Block *invalid = b.createBlock(&entryPoint.getBody());
  Block *valid = b.createBlock(&entryPoint.getBody());

  // Invalid: a null buffer, a negative number of windows, or (shifted
  // windows) a number that is not a whole number of images.
  b.setInsertionPointToStart(entry);
  Value windows = entry->getArgument(5);
  Value null = LLVM::ZeroOp::create(b, loc, ptr);
  Value bad = LLVM::ICmpOp::create(
      b, loc, LLVM::ICmpPredicate::slt, windows,
      LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(0)));
  for (unsigned i : {0u, 1u, 2u, 3u, 4u}) {
    if (i == 3 && config.table)
      continue; // a baked table needs no argument
    Value isNull = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq,
                                        entry->getArgument(i), null);
    bad = LLVM::OrOp::create(b, loc, i1, bad, isNull);
  }
  if (int64_t perImage = config.numMaskWindows(); perImage > 1) {
    Value remainder = LLVM::SRemOp::create(
        b, loc, windows,
        LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(perImage)));
    Value partial = LLVM::ICmpOp::create(
        b, loc, LLVM::ICmpPredicate::ne, remainder,
        LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(0)));
    bad = LLVM::OrOp::create(b, loc, i1, bad, partial);
  }
  LLVM::CondBrOp::create(b, loc, bad, invalid, valid);

  b.setInsertionPointToStart(invalid);
  LLVM::ReturnOp::create(
      b, loc,
      ValueRange{LLVM::ConstantOp::create(b, loc, i32, b.getI32IntegerAttr(1))});

  b.setInsertionPointToStart(valid);
  int64_t h = config.heads, n = config.numTokens(), d = config.headDim;
  int64_t dyn = ShapedType::kDynamic;
  SmallVector<Value> args;
  for (unsigned i : {0u, 1u, 2u})
    appendDescriptor(b, loc, entry->getArgument(i), windows, {dyn, h, n, d},
                     args);
  if (!config.table)
    appendDescriptor(b, loc, entry->getArgument(3), windows,
                     {config.numTableRows(), h}, args);
  appendDescriptor(b, loc, entry->getArgument(4), windows, {dyn, n, h * d},
                   args);
  if (args.size() != kernel.getNumArguments())
    return kernel.emitError("unexpected kernel signature: ")
           << kernel.getNumArguments() << " arguments, " << args.size()
           << " expected";
  LLVM::CallOp::create(b, loc, kernel, args);
  LLVM::ReturnOp::create(
      b, loc,
      ValueRange{LLVM::ConstantOp::create(b, loc, i32, b.getI32IntegerAttr(0))});
  return success();
}

LogicalResult mlir::rpe::lowerToLLVMDialect(ModuleOp module,
                                            const KernelConfig &config) {
  PassManager pm(module.getContext());
  CpuPipelineOptions options;
  options.parallel = config.parallel;
  options.fuse = config.fuse;
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
    function.addFnAttr("target-features",
                       (*machine)->getTargetFeatureString());
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
  SmallVector<const char *> args = {
      "ld.lld", "-shared", "-o", output.c_str(), object.c_str(),
      lOmp.c_str(), "-L/usr/lib/x86_64-linux-gnu", "-L/lib/x86_64-linux-gnu",
      "-lomp", "-lm", "-rpath", libDir.c_str(), "-z", "noexecstack",
      "--as-needed", "-O1"};
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

void mlir::rpe::emitHeader(const KernelConfig &config, llvm::raw_ostream &os) {
  std::string upper = llvm::StringRef(config.name).upper();
  std::string windowText = llvm::join(
      llvm::map_range(config.window, [](int64_t w) { return std::to_string(w); }),
      "x");
  const char *ctype = config.elementKind == ElementKind::F32 ? "float" : "uint16_t";
  const char *typeName = config.elementKind == ElementKind::F32   ? "f32"
                         : config.elementKind == ElementKind::F16 ? "f16"
                                                                  : "bf16";
  int64_t n = config.numTokens();
  os << "/* Generated by swin-aot. Do not edit.\n"
     << " *\n"
     << " * Swin window attention: window " << windowText << " (N = " << n
     << " tokens), " << config.heads << " heads, head_dim " << config.headDim
     << ", " << typeName << ", scale "
     << llvm::formatv("{0:e}", config.effectiveScale()) << ".\n";
  if (config.hasShiftMask())
    os << " * Shifted windows: resolution "
       << llvm::join(llvm::map_range(config.resolution,
                                     [](int64_t r) { return std::to_string(r); }),
                     "x")
       << ", shift "
       << llvm::join(llvm::map_range(config.shift,
                                     [](int64_t s) { return std::to_string(s); }),
                     ",")
       << "; window b uses mask b % " << config.numMaskWindows()
       << " (-100 across regions).\n";
  os << " *\n"
     << " * q, k, v: [num_windows, heads, N, head_dim] row-major (Swin's layout\n"
     << " *          after the qkv split).\n"
     << " * table:   [(2Wh-1)*(2Ww-1), heads] row-major (Swin's\n"
     << " *          relative_position_bias_table)"
     << (config.table ? "; baked into the kernel: may be NULL.\n" : ".\n")
     << " * out:     [num_windows, N, heads*head_dim] (Swin's layout before the\n"
     << " *          output projection).\n";
  if (config.elementKind != ElementKind::F32)
    os << " * Elements are raw " << typeName
       << " bits; the arithmetic runs in f32.\n";
  os << " * Returns 0, or non-zero when the arguments are invalid (a NULL\n"
     << " * buffer, num_windows < 0"
     << (config.hasShiftMask() ? ", or not a multiple of the windows per image"
                               : "")
     << "); nothing is written then.\n"
     << " * Runs on all cores through OpenMP; OMP_NUM_THREADS sets the number "
        "of threads.\n"
     << " */\n"
     << "#ifndef " << upper << "_H\n#define " << upper << "_H\n\n"
     << "#include <stdint.h>\n\n"
     << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
     << "#define " << upper << "_NUM_TOKENS " << n << "\n"
     << "#define " << upper << "_NUM_HEADS " << config.heads << "\n"
     << "#define " << upper << "_HEAD_DIM " << config.headDim << "\n"
     << "#define " << upper << "_TABLE_ROWS " << config.numTableRows() << "\n"
     << "#define " << upper << "_WINDOWS_PER_IMAGE " << config.numMaskWindows()
     << "\n\n"
     << "int " << config.name << "(const " << ctype << " *q, const " << ctype
     << " *k, const " << ctype << " *v,\n    const " << ctype << " *table, "
     << ctype << " *out, int64_t num_windows);\n\n"
     << "#ifdef __cplusplus\n}\n#endif\n\n#endif /* " << upper << "_H */\n";
}
