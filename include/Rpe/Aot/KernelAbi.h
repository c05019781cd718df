//===- KernelAbi.h - the C ABI of an ahead-of-time kernel -------*- C++ -*-===//
//
// The one description of a kernel's C entry point: its arguments in order,
// each with its role, C type and shape. Everything that depends on the ABI
// is derived from it: the kernel function of the rpe module (its memref
// arguments), the LLVM entry point that checks its arguments and calls it,
// the C header, the GPU host runtime's parameter table, and the JSON
// description that the Python package reads. A new ABI (a backward kernel,
// say) is a new table, not seven edits.
//
//===----------------------------------------------------------------------===//

#ifndef RPE_AOT_KERNELABI_H
#define RPE_AOT_KERNELABI_H

#include "Rpe/Aot/KernelConfig.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace mlir::rpe {

/// Bumped whenever the entry points or the description change in a way a
/// caller built against an older one would get wrong.
inline constexpr int kKernelAbiVersion = 1;

/// Which entry point of a kernel: the attention, or its gradient
/// (`swin-aot --grad`, `NAME_backward`).
enum class Direction { Forward, Backward };

/// One argument of the C entry point. (Its ArgumentRole, spelled `role` in
/// the description: Rpe/KernelEnums.td.)
struct AbiArgument {
  std::string name;
  ArgumentRole role;
  /// Buffers: their element type and row-major extents, where
  /// `kDynamicExtent` is the count argument's value.
  ElementKind element = ElementKind::F32;
  llvm::SmallVector<int64_t> shape;
  /// The shape of the kernel function's memref where it is not `shape`:
  /// the packed qkv map is [batch, L, 3, heads, head_dim] to callers and
  /// [batch, L, 3 * C] to the kernel.
  llvm::SmallVector<int64_t> flatShape;
  /// May be NULL: a baked table, or pad_qkv (zeros).
  bool nullable = false;
  /// The memref argument of the kernel function this buffer is passed as;
  /// none for scalars and for buffers the kernel does not read (a baked
  /// table, pad_qkv of a map that needs no padding).
  std::optional<unsigned> kernelOperand;

  bool isBuffer() const {
    return role != ArgumentRole::Count && role != ArgumentRole::Stream;
  }
  /// The entry point writes it: the forward's out, the backward's
  /// gradients (the backward reads out).
  bool written = false;
  bool isWritten() const { return written; }
  llvm::ArrayRef<int64_t> getOperandShape() const {
    return flatShape.empty() ? shape : flatShape;
  }
  /// Whether one of its extents is the count's value.
  bool hasCountExtent() const;
  /// Its size in bytes where the count is `count`; none where that exceeds
  /// int64_t.
  std::optional<int64_t> getSizeInBytes(int64_t count) const;
};

inline constexpr int64_t kDynamicExtent = -1;

/// The C entry point of a kernel.
struct KernelAbi {
  std::string name;
  Target target;
  Direction direction = Direction::Forward;
  /// In the order of the C parameters.
  llvm::SmallVector<AbiArgument> arguments;
  /// The count must be a multiple of this: shifted windows come in whole
  /// images (the mask of window b is b % windows per image).
  int64_t countMultiple = 1;

  /// The count argument (num_windows or batch).
  const AbiArgument &count() const;
  unsigned countIndex() const;
  /// The arguments passed to the kernel function, in its order.
  llvm::SmallVector<const AbiArgument *> kernelOperands() const;
  /// The C argument index of kernel operand `operand`.
  unsigned argumentOfKernelOperand(unsigned operand) const;
  /// The argument's C type, e.g. `const float *`, `int64_t`, `CUdeviceptr`.
  std::string cType(const AbiArgument &argument) const;
  /// The C declaration `int NAME(...)`, without the semicolon; a new line
  /// starts at the table and at pad_qkv.
  std::string cDeclaration() const;
  /// The largest count for which every buffer's size in bytes fits in
  /// int64_t (and so in size_t, and in the index arithmetic of a kernel
  /// that stays inside its buffers).
  int64_t getMaxCount() const;
  /// The pairs of buffers (argument indices) that must not overlap: each
  /// buffer the entry point writes, with every other buffer the kernel
  /// reads or writes. Inputs may alias each other, and a buffer the kernel
  /// does not read (a baked table, pad_qkv of a map without padding) may
  /// be anything.
  llvm::SmallVector<std::pair<unsigned, unsigned>> getDisjointBuffers() const;
};

/// The ABI of `config`'s entry point in `direction`.
KernelAbi getKernelAbi(const KernelConfig &config,
                       Direction direction = Direction::Forward);

/// The C name of the entry point: NAME, or NAME_backward.
std::string getEntryPointName(const KernelConfig &config, Direction direction);

struct GpuKernel;

/// Writes the machine-readable description of the kernel (JSON): the
/// configuration, the ABI version and the arguments with their roles, C
/// types, element types and shapes (the count's name where it is dynamic);
/// with `--grad`, the backward's arguments too (`backward`). For a GPU
/// kernel (`gpuKernel`), each entry point's launches as its host runtime
/// makes them (`launches`: kernel symbol, block size, items per block,
/// fixed grid, dynamic shared memory in bytes).
void writeAbiDescription(const KernelConfig &config, llvm::raw_ostream &os,
                         const GpuKernel *gpuKernel = nullptr);

} // namespace mlir::rpe

#endif // RPE_AOT_KERNELABI_H
