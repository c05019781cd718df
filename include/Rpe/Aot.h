//===- Aot.h - kernels and whole modules compiled ahead of time -*- C++ -*-===//
//
// The library behind swin-aot. A configuration (Rpe/Aot/KernelConfig.h)
// becomes an rpe module, then either
//   CPU:  the LLVM dialect with a C entry point, optimized LLVM IR, an
//         object file, a shared library;
//   GPU:  a PTX/cubin/fatbin kernel and the C host runtime that launches it;
// plus, for both, the C header and the JSON description of the entry point,
// all derived from one ABI table (Rpe/Aot/KernelAbi.h). A whole module (a
// model exported by torch-mlir) takes the CPU's way with entry points of
// its own, described by a table of its own (Rpe/Aot/ModuleAbi.h).
// Everything runs in-process. One file per step in lib/Aot.
//
//===----------------------------------------------------------------------===//

#ifndef RPE_AOT_H
#define RPE_AOT_H

#include "Rpe/Aot/KernelAbi.h"
#include "Rpe/Aot/KernelConfig.h"
#include "Rpe/Aot/ModuleAbi.h"
#include "Rpe/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>

namespace llvm {
class LLVMContext;
class Module;
class raw_pwrite_stream;
} // namespace llvm

namespace mlir::rpe {

//===--- The rpe module (KernelModule.cpp) ------------------------------===//

/// The MLIR type of an element kind.
Type getElementType(MLIRContext &context, ElementKind kind);
/// The memref type the kernel function takes for an ABI buffer.
MemRefType getKernelOperandType(MLIRContext &context,
                                const AbiArgument &argument);

/// Builds the rpe-level module: `func @<name>_kernel(<kernel operands>)` on
/// memrefs, whose body is rpe ops on tensors.
OwningOpRef<ModuleOp> buildKernelModule(MLIRContext &context,
                                        const KernelConfig &config);

//===--- CPU: entry point and code generation ---------------------------===//

/// The module's function that sums the threads' partial table gradients
/// (`--grad`): `NAME_backward_sum_tables`.
std::string getTableGradientSumName(const KernelConfig &config);

/// The largest count the entry point in `direction` accepts (CPU and GPU;
/// EntryPoint.cpp): every buffer's size in bytes fits in int64_t
/// (KernelAbi::getMaxCount), and so do the unfused lowering's per-window
/// intermediates. A larger count is an invalid argument: no machine holds
/// its buffers, and the products of the count would wrap.
int64_t getCountLimit(const KernelConfig &config, Direction direction);

/// How LLVM generates code: for which CPU, how hard it optimizes.
struct CpuCodegenOptions {
  /// An LLVM CPU name (znver4, x86-64-v3), or "native" for this machine.
  std::string cpu = "native";
  /// LLVM's optimization level, 0 to 3 (the optimizer's and the code
  /// generator's).
  unsigned optLevel = 3;
  /// Before optimizing, move each outermost loop of a function with
  /// several into a function of its own (translateToLLVMIR).
  bool outlineLoops = false;
  /// Route the module's malloc and free through a per-thread cache of large
  /// freed blocks, so that a function called again reuses its temporaries
  /// (cacheLargeAllocations).
  bool cacheAllocations = false;
  /// Link the profiling runtime into the module (linkProfileRuntime), which
  /// rpe-profile-ops instrumented.
  bool linkProfileRuntime = false;
};

/// Makes `module`'s calls of malloc and free go through a per-thread cache
/// of large freed blocks (CachedAllocations.cpp). Blocks stay plain malloc
/// blocks: one may leave the module and be freed by its caller.
void cacheLargeAllocations(llvm::Module &module);

/// Links the profiling runtime (lib/Aot/runtime/ProfileRuntime.c, compiled
/// to bitcode when swin-aot is built) into `module`, which rpe-profile-ops
/// instrumented; it then exports swin_profile_reset and swin_profile_write
/// (ProfileRuntime.cpp).
llvm::Error linkProfileRuntime(llvm::Module &module);

/// What a CPU has that the generated code depends on.
struct CpuVectorFeatures {
  bool avx512 = false; // avx512f: 16-lane micro-kernels by default
  /// vdpbf16ps (AVX512-BF16) doing twice the FMA's multiply-adds per cycle:
  /// bf16 products as dot products. AMD's Zen 4 and 5 run it on both FMA
  /// pipes; Intel's cores (Cooper Lake, Sapphire Rapids and later) on one,
  /// where it only matches the FMAs and the bf16 kernel measured 0.7x the
  /// f32 one (1 core of a Sapphire Rapids-class Xeon), so they widen bf16.
  bool fastBf16Dot = false;
};

/// The CpuVectorFeatures of the `options`' CPU (CpuCodegen.cpp); an error for
/// an unknown CPU, as codegen gives.
llvm::Expected<CpuVectorFeatures>
getCpuVectorFeatures(const CpuCodegenOptions &options);

/// Sets the options of rpe-cpu-pipeline that depend on the CPU, for one
/// with `features`: `vectorWidth` f32 lanes (0: 16 where the CPU has
/// AVX-512, else 8), its AVX-512, and AVX512-BF16 dot products where they
/// are fast, at 16 lanes, for code that may have `bf16` operands
/// (CpuCodegen.cpp). Kernels and modules derive them alike.
void setCpuPipelineTarget(CpuPipelineOptions &options,
                          const CpuVectorFeatures &features,
                          int64_t vectorWidth, bool bf16);

/// Lowers the module of buildKernelModule to the LLVM dialect for a CPU
/// with `features` and adds the C entry point of the ABI (EntryPoint.cpp);
/// every other function becomes internal. The pipeline's passes are timed
/// in `timing`.
LogicalResult lowerToLLVMDialect(ModuleOp module, const KernelConfig &config,
                                 const CpuVectorFeatures &features,
                                 TimingScope &timing);

/// Translates an LLVM-dialect module to LLVM IR named `name` for the
/// `options`' CPU and prepares it for LLVM's optimizer as they say (the
/// allocation cache, loop outlining) (CpuCodegen.cpp), each step timed in
/// `timing`.
llvm::Expected<std::unique_ptr<llvm::Module>>
translateToLLVMIR(ModuleOp module, llvm::LLVMContext &llvmContext,
                  StringRef name, const CpuCodegenOptions &options,
                  TimingScope &timing);

/// Runs LLVM's optimizer on `module` at the `options`' level.
llvm::Error optimizeModule(llvm::Module &module,
                           const CpuCodegenOptions &options,
                           TimingScope &timing);

/// Writes an ELF object file of `module` (optimized) to `os`.
llvm::Error emitObjectFile(llvm::Module &module,
                           const CpuCodegenOptions &options,
                           llvm::raw_pwrite_stream &os);

/// Optimizes `module` (from translateToLLVMIR) and writes it as one ELF
/// object file per path, each step timed in `timing`. One path: the whole
/// module, on the calling thread. Several: the module's functions are split
/// into as many partitions of about equal size, each optimized and compiled
/// on a thread of its own in an LLVMContext of its own; partition 0, which
/// keeps every global variable (the weights), is `module` itself, on the
/// calling thread. The locals that partitions share become hidden symbols
/// prefixed with the module's name. `module` is left as partition 0.
llvm::Error emitObjectFiles(llvm::Module &module,
                            const CpuCodegenOptions &options,
                            ArrayRef<std::string> objectPaths,
                            TimingScope &timing);

/// Links object files into a shared library (with lld, in-process),
/// against libm and the threads' runtime library.
llvm::Error linkSharedLibrary(ArrayRef<std::string> objectPaths,
                              llvm::StringRef libraryPath,
                              ThreadRuntime runtime);

/// Links object files into one relocatable object file (`ld.lld -r`,
/// in-process).
llvm::Error linkRelocatableObject(ArrayRef<std::string> objectPaths,
                                  llvm::StringRef outputPath);

//===--- The C header (Header.cpp) --------------------------------------===//

/// Writes the C header declaring the entry point, with the layouts.
void emitHeader(const KernelConfig &config, llvm::raw_ostream &os);

//===--- Whole modules (ModuleEntryPoint.cpp, ModuleHeader.cpp) ---------===//

/// Lowers a whole module (linalg on tensors, as torch-mlir exports it) to
/// the LLVM dialect with rpe-cpu-pipeline's `options`, giving every
/// function of `abi` (getModuleAbi of the module before lowering) MLIR's C
/// interface and a plain C entry point. Every function but those becomes
/// internal. The pipeline's passes are timed in `timing`.
LogicalResult lowerModuleToLLVMDialect(ModuleOp module, const ModuleAbi &abi,
                                       const CpuPipelineOptions &options,
                                       TimingScope &timing);

/// Writes the C header of a compiled module: both entry points of every
/// function of `abi`, with the memref descriptor types of MLIR's C
/// interface; `threads` says who runs its parallel loops.
void emitModuleHeader(const ModuleAbi &abi, ThreadRuntime threads,
                      llvm::raw_ostream &os);

//===--- GPU: kernel and host runtime -----------------------------------===//

/// A GPU kernel and what its launcher needs to know: one image, the
/// launches of each entry point.
struct GpuKernel {
  /// PTX text, cubin or fatbin, with every kernel function.
  std::string image;
  /// A memref parameter of a kernel function: a static view of a buffer
  /// argument of the C entry point, or of the entry point's scratch.
  struct Param {
    /// The index of the argument in the ABI (KernelAbi::arguments), or
    /// kScratch.
    unsigned argument;
    int64_t offset;
    /// kDynamicExtent is the count; kItemsExtent the (window, head) items.
    llvm::SmallVector<int64_t> shape, strides;
  };
  static constexpr unsigned kScratch = ~0u;
  static constexpr int64_t kItemsExtent = -2;
  /// One launch of a kernel function.
  struct Launch {
    /// The kernel function's symbol in the image.
    std::string symbol;
    /// The memref parameters, in the kernel's order.
    llvm::SmallVector<Param> params;
    /// Threads per block.
    int64_t blockSize = 0;
    /// (window, head) items per block: the grid is ceil(items / this); 0:
    /// a grid of `grid` blocks, whatever the count.
    int64_t itemsPerBlock = 1;
    int64_t grid = 0;
    /// Bytes of dynamic shared memory per block (0: the kernel's shared
    /// memory is static). The launcher passes them to each launch and,
    /// above the static 48 KiB, opts the function in to them once.
    int64_t dynamicSharedBytes = 0;
  };
  /// What an entry point queues on its stream: its launches, in order, and
  /// the device scratch they share (bytes per (window, head) item; 0:
  /// none), allocated on the stream before them and freed after.
  struct EntryPoint {
    Direction direction;
    llvm::SmallVector<Launch> launches;
    int64_t scratchBytesPerItem = 0;
  };
  /// The forward, then (--grad) the backward.
  llvm::SmallVector<EntryPoint> entryPoints;
};

/// Compiles the module of buildKernelModule into a GPU kernel serialized as
/// `format` (not None): every kernel function in one image (GpuKernel.cpp).
llvm::Expected<GpuKernel> compileGpuKernel(ModuleOp module,
                                           const KernelConfig &config,
                                           GpuBinaryFormat format);

/// Writes the host runtime (C, CUDA driver API) that embeds the kernel and
/// launches it: lib/Aot/runtime/GpuRuntime.c followed by the kernel's data
/// and entry point (GpuRuntime.cpp). `headerName` is the file it includes.
void emitGpuRuntime(const KernelConfig &config, const GpuKernel &kernel,
                    llvm::StringRef headerName, llvm::raw_ostream &os);

} // namespace mlir::rpe

#endif // RPE_AOT_H
