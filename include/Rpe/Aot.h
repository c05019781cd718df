//===- Aot.h - ahead-of-time kernels from a Swin configuration --*- C++ -*-===//
//
// The library behind swin-aot: a Swin attention configuration becomes an rpe
// module, then LLVM IR, an object file or a shared library with a C ABI and
// its header. Everything runs in-process.
//
//===----------------------------------------------------------------------===//

#ifndef RPE_AOT_H
#define RPE_AOT_H

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

/// A Swin window-attention layer as the kernel sees it.
struct KernelConfig {
  llvm::SmallVector<int64_t> window;
  int64_t heads = 0;
  int64_t headDim = 0;
  /// Applied to q; head_dim ** -0.5 when unset.
  std::optional<float> scale;
  /// Both empty, or both of the window's rank: the kernel applies the
  /// shifted-window mask of this feature map itself.
  llvm::SmallVector<int64_t> resolution;
  llvm::SmallVector<int64_t> shift;
  /// A table baked into the kernel, [T, heads] row-major, as f32.
  std::optional<std::vector<float>> table;
  ElementKind elementKind = ElementKind::F32;
  std::string name = "swin_window_attention";
  /// Host CPU to generate code for ("native" for this machine).
  std::string cpu = "native";
  /// Run windows x heads on all cores (OpenMP).
  bool parallel = true;
  /// Fuse the bias gather and the mask into the softmax (false: the unfused
  /// reference lowering, for comparison).
  bool fuse = true;

  bool hasShiftMask() const { return !resolution.empty(); }
  int64_t numTokens() const;
  int64_t numTableRows() const;
  /// Windows per image of the mask; 1 without a mask.
  int64_t numMaskWindows() const;
  float effectiveScale() const;
};

/// Checks a configuration; the error is one line naming the bad option.
llvm::Error validate(const KernelConfig &config);

/// Builds the rpe-level module: `func @<name>_kernel(q, k, v, [table,] out)`
/// on memrefs, whose body is rpe ops on tensors.
OwningOpRef<ModuleOp> buildKernelModule(MLIRContext &context,
                                        const KernelConfig &config);

/// Lowers the module of buildKernelModule to the LLVM dialect and adds the
/// C ABI entry point `int <name>(q, k, v, table, out, num_windows)`; every
/// other function becomes internal.
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

} // namespace mlir::rpe

#endif // RPE_AOT_H
