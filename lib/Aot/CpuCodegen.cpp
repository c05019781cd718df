//===- CpuCodegen.cpp - LLVM IR, object files and shared libraries --------===//
//
// The LLVM-dialect module of a CPU kernel becomes optimized LLVM IR for the
// configured CPU, an ELF object file, and (linked in-process by lld against
// the OpenMP runtime and libm) a shared library.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Aot.h"
#include "Rpe/Aot/LinkConfig.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "lld/Common/Driver.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Transforms/Utils/CodeExtractor.h"

LLD_HAS_DRIVER(elf)

using namespace mlir;
using namespace mlir::rpe;

static llvm::Error codegenError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// LLVM's code generation level for an optimization level 0-3.
static llvm::CodeGenOptLevel
getCodeGenOptLevel(const CpuCodegenOptions &options) {
  return llvm::CodeGenOpt::getLevel(options.optLevel)
      .value_or(llvm::CodeGenOptLevel::Aggressive);
}

static llvm::Expected<std::unique_ptr<llvm::TargetMachine>>
createTargetMachine(const CpuCodegenOptions &options) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getProcessTriple());
  std::string error;
  const llvm::Target *llvmTarget =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!llvmTarget)
    return codegenError("no LLVM target for " + triple.str() + ": " + error);
  std::string cpu = options.cpu;
  std::string features;
  if (cpu == "native") {
    cpu = llvm::sys::getHostCPUName().str();
    SmallVector<std::string> enabled;
    for (const auto &feature : llvm::sys::getHostCPUFeatures())
      enabled.push_back((feature.second ? "+" : "-") + feature.first().str());
    features = llvm::join(enabled, ",");
  }
  std::unique_ptr<llvm::TargetMachine> machine(llvmTarget->createTargetMachine(
      triple, cpu, features, llvm::TargetOptions(), llvm::Reloc::PIC_,
      std::nullopt, getCodeGenOptLevel(options)));
  if (!machine)
    return codegenError("cannot create a target machine for CPU '" + cpu + "'");
  if (!machine->getMCSubtargetInfo()->isCPUStringValid(cpu))
    return codegenError("--cpu: unknown CPU '" + cpu + "'");
  return machine;
}

llvm::Expected<CpuVectorFeatures>
mlir::rpe::getCpuVectorFeatures(const CpuCodegenOptions &options) {
  auto machine = createTargetMachine(options);
  if (!machine)
    return machine.takeError();
  const llvm::MCSubtargetInfo &subtarget = *(*machine)->getMCSubtargetInfo();
  CpuVectorFeatures features;
  features.avx512 = subtarget.checkFeatures("+avx512f");
  features.fastBf16Dot = subtarget.checkFeatures("+avx512bf16") &&
                         (*machine)->getTargetCPU().starts_with("znver");
  return features;
}

void mlir::rpe::setCpuPipelineTarget(CpuPipelineOptions &options,
                                     const CpuVectorFeatures &features,
                                     int64_t vectorWidth, bool bf16) {
  // 16 lanes where the target CPU has AVX-512, else AVX2's 8.
  options.vectorWidth = vectorWidth ? vectorWidth : features.avx512 ? 16 : 8;
  // bf16 products on AVX512-BF16 where it is fast (AMD Zen 4 and later);
  // else bf16 is widened to f32 once per item.
  options.bf16Dot = bf16 && options.vectorWidth == 16 && features.fastBf16Dot;
  options.avx512 = features.avx512;
}

/// Moves each outermost loop of a function with several into an internal
/// function of its own, which the inliner leaves alone. A whole model
/// lowers to one function of a thousand loop nests, on which LLVM's loop
/// passes take time quadratic in its size (each IndVarSimplify,
/// LoopVectorize or LoopUnroll of one loop walks the function), and so
/// does the code generator: minutes for Swin-T, where a function per loop
/// nest takes seconds. A loop nest is what a linalg op or an rpe kernel
/// becomes, and nothing crosses from one to the next that a call does not
/// carry: its buffers are the call's arguments. A function of one loop nest
/// (the worker of a parallel loop, rpe-parallel-to-gomp) stays whole, where
/// LLVM's LoopExtractor would move its inner loops out (a matmul's
/// reduction loop, then called once per tile).
static void outlineLoops(llvm::Module &module) {
  SmallVector<llvm::Function *> functions;
  for (llvm::Function &function : module)
    if (!function.isDeclaration())
      functions.push_back(&function);
  for (llvm::Function *function : functions) {
    llvm::DominatorTree dominators(*function);
    llvm::LoopInfo loops(dominators);
    if (loops.empty() || std::next(loops.begin()) == loops.end())
      continue;
    SmallVector<llvm::Loop *> outermost(loops.begin(), loops.end());
    llvm::CodeExtractorAnalysisCache cache(*function);
    for (llvm::Loop *loop : outermost) {
      llvm::CodeExtractor extractor(loop->getBlocks(), &dominators);
      if (llvm::Function *outlined = extractor.extractCodeRegion(cache))
        outlined->addFnAttr(llvm::Attribute::NoInline);
    }
  }
}

llvm::Expected<std::unique_ptr<llvm::Module>> mlir::rpe::translateAndOptimize(
    ModuleOp module, llvm::LLVMContext &llvmContext, StringRef name,
    const CpuCodegenOptions &options, TimingScope &timing) {
  DialectRegistry registry;
  registerAllToLLVMIRTranslations(registry);
  module.getContext()->appendDialectRegistry(registry);

  auto machine = createTargetMachine(options);
  if (!machine)
    return machine.takeError();
  TimingScope translation = timing.nest("Translation to LLVM IR");
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, name);
  if (!llvmModule)
    return codegenError("translation to LLVM IR failed");
  llvmModule->setDataLayout((*machine)->createDataLayout());
  llvmModule->setTargetTriple((*machine)->getTargetTriple());
  for (llvm::Function &function : *llvmModule) {
    if (function.isDeclaration())
      continue;
    function.addFnAttr("target-cpu", (*machine)->getTargetCPU());
    function.addFnAttr("target-features", (*machine)->getTargetFeatureString());
  }
  translation.stop();
  if (options.cacheAllocations)
    cacheLargeAllocations(*llvmModule);
  if (options.outlineLoops) {
    TimingScope outlining = timing.nest("Loop outlining");
    outlineLoops(*llvmModule);
  }
  TimingScope optimization = timing.nest("LLVM optimization");
  auto optimize = makeOptimizingTransformer(options.optLevel, /*sizeLevel=*/0,
                                            machine->get());
  if (llvm::Error error = optimize(llvmModule.get()))
    return std::move(error);
  return llvmModule;
}

llvm::Error mlir::rpe::emitObjectFile(llvm::Module &module,
                                      const CpuCodegenOptions &options,
                                      llvm::raw_pwrite_stream &os) {
  auto machine = createTargetMachine(options);
  if (!machine)
    return machine.takeError();
  llvm::legacy::PassManager pm;
  if ((*machine)->addPassesToEmitFile(pm, os, nullptr,
                                      llvm::CodeGenFileType::ObjectFile))
    return codegenError("the target cannot emit object files");
  pm.run(module);
  return llvm::Error::success();
}

llvm::Error mlir::rpe::linkSharedLibrary(llvm::StringRef objectPath,
                                         llvm::StringRef libraryPath,
                                         ThreadRuntime runtime) {
  // The kernels call into libm and their threads' runtime. libgomp is
  // named by its path: the library then needs it by its soname,
  // libgomp.so.1, which in a PyTorch process is the copy torch has loaded,
  // so that kernels and torch share one thread pool. libomp gets an rpath
  // to LLVM's directory, so that the library loads from anywhere. Where
  // they are is the build's knowledge (Rpe/Aot/LinkConfig.h).
  std::string object = objectPath.str(), output = libraryPath.str();
  SmallVector<std::string> storage = {"ld.lld", "-shared", "-o", output,
                                      object};
  for (StringRef dir : llvm::split(SWIN_KERNEL_LIBRARY_DIRS, ';'))
    if (!dir.empty())
      storage.push_back(("-L" + dir).str());
  switch (runtime) {
  case ThreadRuntime::None:
    break;
  case ThreadRuntime::GnuOpenMP:
    storage.push_back(SWIN_GNU_OPENMP_LIBRARY);
    break;
  case ThreadRuntime::LlvmOpenMP:
    storage.append({"-lomp", "-rpath", SWIN_OPENMP_LIBRARY_DIR});
    break;
  }
  storage.append({"-lm", "-z", "noexecstack", "--as-needed", "-O1"});
  SmallVector<const char *> args;
  for (const std::string &arg : storage)
    args.push_back(arg.c_str());
  std::string messages;
  llvm::raw_string_ostream messageStream(messages);
  lld::Result result = lld::lldMain(args, messageStream, messageStream,
                                    {{lld::Gnu, &lld::elf::link}});
  if (result.retCode != 0)
    return codegenError("linking " + libraryPath +
                        " failed: " + StringRef(messages).trim());
  return llvm::Error::success();
}
