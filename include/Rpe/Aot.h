//===- Aot.h - ahead-of-time kernels from a Swin configuration --*- C++ -*-===//
//
// The library behind swin-aot: a Swin attention configuration becomes an rpe
// module, then LLVM IR, an object file or a shared library with a C ABI and
// its header. Everything runs in-process.
//
//===----------------------------------------------------------------------===//

#ifndef RPE_AOT_H
#define RPE_AOT_H

#include "Rpe/Passes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace mlir::rpe {

enum class ElementKind { F32, F16, BF16 };

/// Where q, k, v and the output live.
enum class Layout {
  /// [num_windows, heads, N, head_dim] in, [num_windows, N, C] out: the
  /// caller has shifted and partitioned the map.
  Windows,
  /// [batch, L, C] feature maps in image order: the kernel shifts, pads and
  /// partitions by addressing.
  Tokens,
};

/// A Swin window-attention layer as the kernel sees it.
struct KernelConfig {
  llvm::SmallVector<int64_t> window;
  int64_t heads = 0;
  int64_t headDim = 0;
  /// Applied to q; head_dim ** -0.5 when unset.
  std::optional<float> scale;
  /// Both empty, or both of the window's rank. Windows layout: the map the
  /// shifted-window mask is built for (a multiple of the window). Tokens
  /// layout: the feature map, padded to whole windows as `shiftThenPad`
  /// says.
  llvm::SmallVector<int64_t> resolution;
  llvm::SmallVector<int64_t> shift;
  Layout layout = Layout::Windows;
  /// timm's padding order (roll, then pad) rather than pad, then roll.
  bool shiftThenPad = false;
  /// Tokens layout: q, k, v as one [batch, L, 3 * C] map, the qkv
  /// projection's output ([batch, L, 3, heads, head_dim]).
  bool packedQkv = false;
  /// A table baked into the kernel, [T, heads] row-major, as f32.
  std::optional<std::vector<float>> table;
  ElementKind elementKind = ElementKind::F32;
  std::string name = "swin_window_attention";
  /// "cpu", or "nvptx" for an NVIDIA GPU kernel plus its host runtime.
  std::string target = "cpu";
  /// Host CPU to generate code for ("native" for this machine).
  std::string cpu = "native";
  /// The fused kernel: "tiles" (CPU), "warps" (GPU tensor cores) or
  /// "rows" (GPU, a thread per query row); empty: the target's default.
  /// The GPU kernels also compile for the CPU, to test them on the host.
  std::string kernel;
  /// GPU architecture and PTX features (nvptx); empty features: the least
  /// PTX version the chip needs (Rpe/NvptxTarget.h).
  std::string chip = "sm_90";
  std::string ptxFeatures;
  /// CUDA toolkit for libdevice and ptxas (nvptx).
  std::string cudaToolkit = SWIN_CUDA_TOOLKIT_DEFAULT;
  /// Run windows x heads on all cores (OpenMP).
  bool parallel = true;
  /// f32 lanes of the CPU micro-kernels; 0: 16 where the CPU has AVX-512
  /// (cpu=native), else 8.
  int64_t vectorWidth = 0;
  /// Fuse the bias gather and the mask into the softmax (false: the unfused
  /// reference lowering, for comparison).
  bool fuse = true;

  bool hasResolution() const { return !resolution.empty(); }
  /// A non-zero shift: the kernel applies Swin's shifted-window mask.
  bool isShifted() const;
  int64_t numTokens() const;
  int64_t numTableRows() const;
  int64_t channels() const { return heads * headDim; }
  /// The map the windows tile: the resolution padded to whole windows.
  llvm::SmallVector<int64_t> paddedResolution() const;
  /// Tokens layout on a map that needs padding.
  bool isPadded() const;
  /// Windows per image; 1 without a resolution.
  int64_t windowsPerImage() const;
  /// Tokens per image (L); tokens layout only.
  int64_t tokensPerImage() const;
  float effectiveScale() const;
};

/// Swin's rule for small maps: along an axis where the resolution is not
/// larger than the window, the window shrinks to the resolution and the
/// shift is 0 (the table must then be the effective window's).
void applySmallMapRule(KernelConfig &config);

/// Checks a configuration; the error is one line naming the bad option.
llvm::Error validate(const KernelConfig &config);

/// Builds the rpe-level module: `func @<name>_kernel(q, k, v, [table,] out)`
/// on memrefs, whose body is rpe ops on tensors.
OwningOpRef<ModuleOp> buildKernelModule(MLIRContext &context,
                                        const KernelConfig &config);

/// Lowers the module of buildKernelModule to the LLVM dialect and adds the
/// C ABI entry point `int <name>(q, k, v, table, out, num_windows)` (tokens
/// layout: `int <name>(q, k, v, table, out, batch, pad_qkv)`); every other
/// function becomes internal.
LogicalResult lowerToLLVMDialect(ModuleOp module, const KernelConfig &config);

/// Translates the LLVM-dialect module to optimized (O3) LLVM IR for the
/// configured CPU.
llvm::Expected<std::unique_ptr<llvm::Module>>
translateAndOptimize(ModuleOp module, llvm::LLVMContext &llvmContext,
                     const KernelConfig &config);

/// Writes an ELF object file of `module`.
llvm::Error emitObjectFile(llvm::Module &module, const KernelConfig &config,
                           llvm::StringRef path);

/// Links an object file into a shared library (with lld, in-process).
llvm::Error linkSharedLibrary(llvm::StringRef objectPath,
                              llvm::StringRef libraryPath);

/// Writes the C header declaring the entry point, with the layouts.
void emitHeader(const KernelConfig &config, llvm::raw_ostream &os);

/// A GPU kernel and what its launcher needs to know.
struct GpuKernel {
  /// PTX text, cubin or fatbin.
  std::string image;
  /// The kernel's symbol in the image.
  std::string symbol;
  /// A memref parameter of the kernel: a view of an argument of the C entry
  /// point (0 q, 1 k, 2 v, 3 table, 4 out, 6 pad_qkv).
  struct Param {
    unsigned argument;
    int64_t offset;
    /// A dynamic extent is the window or image count.
    llvm::SmallVector<int64_t> shape, strides;
  };
  /// The memref parameters, in the kernel's order.
  llvm::SmallVector<Param> params;
  /// Threads per block; the grid is (windows * heads).
  int64_t blockSize = 0;
  /// (window, head) items per block: the grid is ceil(items / this).
  int64_t itemsPerBlock = 1;
};

/// Compiles the module of buildKernelModule into a GPU kernel: `format` is
/// isa (PTX), bin (cubin) or fatbin.
llvm::Expected<GpuKernel> compileGpuKernel(ModuleOp module,
                                           const KernelConfig &config,
                                           llvm::StringRef format);

/// Writes the host runtime (C, CUDA driver API) that embeds the kernel and
/// launches it; `headerName` is the file it includes.
void emitGpuRuntime(const KernelConfig &config, const GpuKernel &kernel,
                    llvm::StringRef headerName, llvm::raw_ostream &os);

} // namespace mlir::rpe

#endif // RPE_AOT_H
