//===- CpuCodegen.cpp - LLVM IR, object files and shared libraries --------===//
//
// The LLVM-dialect module of a CPU kernel becomes optimized LLVM IR for the
// configured CPU, an ELF object file, and (linked in-process by lld against
// the OpenMP runtime and libm) a shared library. A whole model's module may
// be split into partitions that are optimized and compiled on threads of
// their own, into one object file each.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Aot.h"
#include "Rpe/Aot/LinkConfig.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "lld/Common/Driver.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/SwapByteOrder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/CodeExtractor.h"

#include <optional>
#include <thread>

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

llvm::Expected<std::unique_ptr<llvm::Module>>
mlir::rpe::translateToLLVMIR(ModuleOp module, llvm::LLVMContext &llvmContext,
                             StringRef name, const CpuCodegenOptions &options,
                             TimingScope &timing) {
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
  // Before the loop below: its functions are compiled for the same CPU.
  if (options.linkProfileRuntime)
    if (llvm::Error error = linkProfileRuntime(*llvmModule))
      return std::move(error);
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
  return llvmModule;
}

/// Runs LLVM's optimizer on `module` for `machine` at the options' level.
static llvm::Error optimize(llvm::Module &module, llvm::TargetMachine &machine,
                            const CpuCodegenOptions &options,
                            TimingScope &timing) {
  TimingScope optimization = timing.nest("LLVM optimization");
  auto transform =
      makeOptimizingTransformer(options.optLevel, /*sizeLevel=*/0, &machine);
  return transform(&module);
}

llvm::Error mlir::rpe::optimizeModule(llvm::Module &module,
                                      const CpuCodegenOptions &options,
                                      TimingScope &timing) {
  auto machine = createTargetMachine(options);
  if (!machine)
    return machine.takeError();
  return optimize(module, **machine, options, timing);
}

/// Appends the bytes of `constant`, numbers in (nested) arrays, to `bytes`
/// as the host lays them out; false for any other constant.
static bool appendArrayBytes(const llvm::Constant *constant,
                             const llvm::DataLayout &layout,
                             SmallVectorImpl<char> &bytes) {
  // Its elements (i8 to i64, half to double) have no padding.
  if (auto *data = dyn_cast<llvm::ConstantDataArray>(constant)) {
    StringRef raw = data->getRawDataValues();
    bytes.append(raw.begin(), raw.end());
    return true;
  }
  if (isa<llvm::ConstantAggregateZero>(constant)) {
    bytes.append(layout.getTypeAllocSize(constant->getType()), 0);
    return true;
  }
  auto *array = dyn_cast<llvm::ConstantArray>(constant);
  if (!array)
    return false;
  for (const llvm::Use &element : array->operands())
    if (!appendArrayBytes(cast<llvm::Constant>(element), layout, bytes))
      return false;
  return true;
}

/// Makes the initializer of every global array of numbers one array of
/// bytes, at the alignment the array had: the same bytes in the object
/// file, but the AsmPrinter writes an i8 array at once where it writes
/// other arrays an element at a time, through an APFloat each. For
/// Swin-T's weights (28 M floats in arrays of 48) that was a second of
/// code generation.
static void emitConstantDataAsBytes(llvm::Module &module) {
  const llvm::DataLayout &layout = module.getDataLayout();
  // The bytes are the host's; the object file's are the target's.
  if (layout.isLittleEndian() != llvm::sys::IsLittleEndianHost)
    return;
  for (llvm::GlobalVariable &global : module.globals()) {
    if (!global.hasDefinitiveInitializer() ||
        !isa<llvm::ArrayType>(global.getValueType()))
      continue;
    SmallVector<char> bytes;
    if (!appendArrayBytes(global.getInitializer(), layout, bytes))
      continue;
    // A byte array ending in its only zero would be a C string, which an
    // unnamed_addr global places in a section of mergeable strings.
    if (!bytes.empty() && bytes.back() == 0 && llvm::count(bytes, 0) == 1)
      continue;
    global.setAlignment(layout.getPreferredAlign(&global));
    global.replaceInitializer(llvm::ConstantDataArray::get(
        module.getContext(),
        llvm::ArrayRef(reinterpret_cast<const uint8_t *>(bytes.data()),
                       bytes.size())));
  }
}

/// Writes an ELF object file of `module` for `machine` to `os`.
static llvm::Error emitObject(llvm::Module &module,
                              llvm::TargetMachine &machine,
                              llvm::raw_pwrite_stream &os) {
  emitConstantDataAsBytes(module);
  llvm::legacy::PassManager pm;
  if (machine.addPassesToEmitFile(pm, os, nullptr,
                                  llvm::CodeGenFileType::ObjectFile))
    return codegenError("the target cannot emit object files");
  pm.run(module);
  return llvm::Error::success();
}

llvm::Error mlir::rpe::emitObjectFile(llvm::Module &module,
                                      const CpuCodegenOptions &options,
                                      llvm::raw_pwrite_stream &os) {
  auto machine = createTargetMachine(options);
  if (!machine)
    return machine.takeError();
  return emitObject(module, **machine, os);
}

/// Optimizes `module` for `machine` and writes its object file to `path`:
/// the work of one partition, on the thread that owns its context.
static llvm::Error compileToObjectFile(llvm::Module &module,
                                       llvm::TargetMachine &machine,
                                       const CpuCodegenOptions &options,
                                       StringRef path, TimingScope &timing) {
  if (llvm::Error error = optimize(module, machine, options, timing))
    return error;
  TimingScope generation = timing.nest("Code generation");
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return codegenError("cannot write " + path + ": " + ec.message());
  llvm::Error emitted = emitObject(module, machine, os);
  os.close();
  // Taken here, or the stream's destructor would make it a fatal error.
  std::error_code written = os.error();
  os.clear_error();
  if (emitted)
    return emitted;
  if (written)
    return codegenError("cannot write " + path + ": " + written.message());
  return llvm::Error::success();
}

//===--- Partitions -------------------------------------------------------===//

/// The partition each function definition of a module goes to; everything
/// else a module defines (global variables: the weights) goes to partition
/// 0.
using PartitionMap = llvm::DenseMap<const llvm::GlobalValue *, unsigned>;

/// Spreads the function definitions of `module` over `count` partitions of
/// about equal numbers of instructions: the largest group first, each to
/// the partition with the fewest so far. A group is what must stay
/// together: a local function that may be inlined stays with its callers
/// (the allocation cache's malloc and free, which the optimizer inlines
/// into the function that allocates), and a function that an alias, an
/// ifunc or a comdat ties to other definitions stays in partition 0 beside
/// the global variables. The outlined loop nests, noinline, travel alone.
static PartitionMap assignPartitions(llvm::Module &module, unsigned count) {
  llvm::EquivalenceClasses<const llvm::Function *> groups;
  llvm::SmallPtrSet<const llvm::Function *, 4> pinned;
  for (llvm::Function &function : module) {
    if (function.isDeclaration())
      continue;
    groups.insert(&function);
    if (function.hasComdat())
      pinned.insert(&function);
    if (!function.hasLocalLinkage() ||
        function.hasFnAttribute(llvm::Attribute::NoInline))
      continue;
    for (llvm::Use &use : function.uses())
      if (auto *call = dyn_cast<llvm::CallBase>(use.getUser()))
        if (call->isCallee(&use))
          groups.unionSets(&function, call->getFunction());
  }
  for (llvm::GlobalAlias &alias : module.aliases())
    if (auto *function =
            dyn_cast_or_null<llvm::Function>(alias.getAliaseeObject()))
      pinned.insert(function);
  for (llvm::GlobalIFunc &ifunc : module.ifuncs())
    pinned.insert(ifunc.getResolverFunction());

  // The groups in the module's order, for a deterministic split.
  struct Group {
    SmallVector<const llvm::Function *> members;
    uint64_t size = 0;
    bool pinned = false;
    unsigned order = 0;
  };
  SmallVector<Group> list;
  llvm::DenseMap<const llvm::Function *, unsigned> groupOfLeader;
  for (llvm::Function &function : module) {
    if (function.isDeclaration())
      continue;
    auto [entry, inserted] = groupOfLeader.try_emplace(
        groups.getLeaderValue(&function), list.size());
    if (inserted)
      list.emplace_back().order = entry->second;
    Group &group = list[entry->second];
    group.members.push_back(&function);
    group.size += function.getInstructionCount();
    group.pinned |= pinned.contains(&function);
  }
  llvm::sort(list, [](const Group &a, const Group &b) {
    if (a.pinned != b.pinned)
      return a.pinned;
    return a.size != b.size ? a.size > b.size : a.order < b.order;
  });
  SmallVector<uint64_t> sizes(count, 0);
  PartitionMap partitionOf;
  for (const Group &group : list) {
    unsigned partition =
        group.pinned ? 0 : llvm::min_element(sizes) - sizes.begin();
    sizes[partition] += group.size;
    for (const llvm::Function *function : group.members)
      partitionOf[function] = partition;
  }
  return partitionOf;
}

/// Whether a partition other than `home` refers to `value`: an instruction
/// of one of its functions, or one of its globals, directly or through
/// constant expressions.
static bool isUsedOutside(const llvm::GlobalValue &value, unsigned home,
                          const PartitionMap &partitionOf) {
  SmallVector<const llvm::User *> users(value.users());
  while (!users.empty()) {
    const llvm::User *user = users.pop_back_val();
    if (auto *instruction = dyn_cast<llvm::Instruction>(user)) {
      if (partitionOf.lookup(instruction->getFunction()) != home)
        return true;
    } else if (auto *global = dyn_cast<llvm::GlobalValue>(user)) {
      if (partitionOf.lookup(global) != home)
        return true;
    } else {
      users.append(user->user_begin(), user->user_end());
    }
  }
  return false;
}

/// Makes every local symbol that another partition refers to a hidden
/// global one, as llvm::SplitModule does without PreserveLocals, but only
/// those: the others stay local, for the optimizer to see all their uses.
/// The module's name prefixes them, so that they cannot clash with another
/// module's when objects are linked together (--emit=obj).
static void exposeAcrossPartitions(llvm::Module &module,
                                   const PartitionMap &partitionOf) {
  for (llvm::GlobalValue &value : module.global_values()) {
    if (!value.hasLocalLinkage() ||
        !isUsedOutside(value, partitionOf.lookup(&value), partitionOf))
      continue;
    value.setName(module.getModuleIdentifier() + "." +
                  (value.hasName() ? value.getName() : "unnamed"));
    value.setLinkage(llvm::GlobalValue::ExternalLinkage);
    value.setVisibility(llvm::GlobalValue::HiddenVisibility);
  }
}

/// The bitcode of partition `index` (not 0) of `module`: its function
/// definitions; everything else declared.
static SmallString<0> writePartitionBitcode(const llvm::Module &module,
                                            const PartitionMap &partitionOf,
                                            unsigned index) {
  llvm::ValueToValueMapTy map;
  std::unique_ptr<llvm::Module> partition =
      llvm::CloneModule(module, map, [&](const llvm::GlobalValue *value) {
        return partitionOf.lookup(value) == index;
      });
  // Module-level assembly stays with partition 0.
  partition->setModuleInlineAsm("");
  SmallString<0> bitcode;
  llvm::raw_svector_ostream os(bitcode);
  llvm::WriteBitcodeToFile(*partition, os);
  return bitcode;
}

llvm::Error mlir::rpe::emitObjectFiles(llvm::Module &module,
                                       const CpuCodegenOptions &options,
                                       ArrayRef<std::string> objectPaths,
                                       TimingScope &timing) {
  unsigned count = objectPaths.size();
  // A target machine per thread, all made here: making one initializes
  // LLVM's target registry.
  SmallVector<std::unique_ptr<llvm::TargetMachine>> machines;
  for (unsigned i = 0; i < count; ++i) {
    auto machine = createTargetMachine(options);
    if (!machine)
      return machine.takeError();
    machines.push_back(std::move(*machine));
  }
  if (count == 1)
    return compileToObjectFile(module, *machines.front(), options,
                               objectPaths.front(), timing);

  TimingScope splitting = timing.nest("Splitting into partitions");
  PartitionMap partitionOf = assignPartitions(module, count);
  exposeAcrossPartitions(module, partitionOf);
  // Partitions 1 to count-1 go through bitcode into an LLVMContext of their
  // own (a context is not thread-safe), each compiled on a thread of its
  // own that starts as soon as its bitcode is written.
  std::string name = module.getModuleIdentifier();
  std::vector<SmallString<0>> bitcodes(count);
  std::vector<std::optional<llvm::Error>> results(count);
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < count; ++i) {
    bitcodes[i] = writePartitionBitcode(module, partitionOf, i);
    threads.emplace_back([&, i] {
      llvm::LLVMContext context;
      auto partition = llvm::parseBitcodeFile(
          llvm::MemoryBufferRef(bitcodes[i], name), context);
      if (!partition) {
        results[i] = partition.takeError();
        return;
      }
      results[i] = compileToObjectFile(**partition, *machines[i], options,
                                       objectPaths[i], timing);
    });
  }
  // Partition 0 is the module itself, less the other partitions' function
  // bodies: the weights stay where they are, never copied.
  for (llvm::Function &function : module)
    if (!function.isDeclaration() && partitionOf.lookup(&function) != 0)
      function.deleteBody();
  splitting.stop();
  results[0] = compileToObjectFile(module, *machines[0], options,
                                   objectPaths[0], timing);
  for (std::thread &thread : threads)
    thread.join();
  llvm::Error error = llvm::Error::success();
  for (std::optional<llvm::Error> &result : results)
    error = llvm::joinErrors(std::move(error), std::move(*result));
  return error;
}

/// Runs lld (ELF) in-process on `arguments`, which write `output`.
static llvm::Error runLld(ArrayRef<std::string> arguments,
                          llvm::StringRef output) {
  SmallVector<const char *> args;
  for (const std::string &arg : arguments)
    args.push_back(arg.c_str());
  std::string messages;
  llvm::raw_string_ostream messageStream(messages);
  lld::Result result = lld::lldMain(args, messageStream, messageStream,
                                    {{lld::Gnu, &lld::elf::link}});
  if (result.retCode != 0)
    return codegenError("linking " + output +
                        " failed: " + StringRef(messages).trim());
  return llvm::Error::success();
}

llvm::Error mlir::rpe::linkSharedLibrary(ArrayRef<std::string> objectPaths,
                                         llvm::StringRef libraryPath,
                                         ThreadRuntime runtime) {
  // The kernels call into libm and their threads' runtime. libgomp is
  // named by its path: the library then needs it by its soname,
  // libgomp.so.1, which in a PyTorch process is the copy torch has loaded,
  // so that kernels and torch share one thread pool. libomp gets an rpath
  // to LLVM's directory, so that the library loads from anywhere. Where
  // they are is the build's knowledge (Rpe/Aot/LinkConfig.h).
  SmallVector<std::string> storage = {"ld.lld", "-shared", "-o",
                                      libraryPath.str()};
  storage.append(objectPaths.begin(), objectPaths.end());
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
  return runLld(storage, libraryPath);
}

llvm::Error mlir::rpe::linkRelocatableObject(ArrayRef<std::string> objectPaths,
                                             llvm::StringRef outputPath) {
  SmallVector<std::string> storage = {"ld.lld", "-r", "-o", outputPath.str()};
  storage.append(objectPaths.begin(), objectPaths.end());
  return runLld(storage, outputPath);
}
