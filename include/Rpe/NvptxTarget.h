//===- NvptxTarget.h - the NVIDIA chips the compiler targets ----*- C++ -*-===//
//
// The one place that knows NVIDIA chips: which `sm_*` names are accepted,
// the least PTX ISA version each needs, whether it has the tensor-core
// instruction of the warp kernel, and how much shared memory a block may
// opt in to. The GPU pipeline, the kernel choice and
// swin-aot ask here rather than compare chip names themselves.
//
// The chips are those both LLVM 22's NVPTX backend and CUDA 13's ptxas
// target (sm_75 and later; CUDA 13 dropped older chips and renamed sm_101 to
// sm_110). The PTX versions are the least LLVM 22 accepts for each chip,
// which are also the least ptxas accepts.
//
//===----------------------------------------------------------------------===//

#ifndef RPE_NVPTXTARGET_H
#define RPE_NVPTXTARGET_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace mlir::rpe {

/// The least SM version with `mma.sync.m16n8k16` on f16 and bf16 operands,
/// the warp kernel's tensor-core tile.
inline constexpr unsigned kMmaM16N8K16MinSmVersion = 80;

/// Whether chips of SM version `smVersion` run `mma.sync.m16n8k16` on f16
/// and bf16 operands.
inline bool hasMmaM16N8K16(unsigned smVersion) {
  return smVersion >= kMmaM16N8K16MinSmVersion;
}

/// Shared memory a block may use without opting in: all that static
/// `__shared__` arrays can take. A kernel that needs more takes it as
/// dynamic shared memory, and its launcher opts in per function
/// (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES).
inline constexpr int64_t kStaticSharedBytesPerBlock = 48 * 1024;

/// The most shared memory (static and dynamic) a block may opt in to on
/// chips of SM version `smVersion`; kStaticSharedBytesPerBlock for an SM
/// version that no chip of the table has (a kernel then stays static).
int64_t getMaxSharedBytesPerBlock(unsigned smVersion);

/// An NVIDIA chip and the PTX to generate for it.
struct NvptxTarget {
  /// The chip as LLVM and ptxas spell it: sm_90, sm_90a, sm_100f.
  std::string chip;
  /// Its SM version: 90 for sm_90 and sm_90a.
  unsigned smVersion = 0;
  /// The PTX ISA version of the output, times ten (78: PTX 7.8).
  unsigned ptxVersion = 0;
  /// LLVM target features of the NVVM target: `+ptx<ptxVersion>` when none
  /// were given, else the given ones.
  std::string features;
  /// Whether the warp kernel's `mma.sync.m16n8k16` runs on the chip; chips
  /// without it get the row kernel.
  bool hasMmaM16N8K16 = false;
  /// getMaxSharedBytesPerBlock(smVersion).
  int64_t maxSharedBytesPerBlock = kStaticSharedBytesPerBlock;
};

/// Resolves a chip name and LLVM target features. Empty `features` select
/// the least PTX version the chip needs; given ones are used as they are,
/// after checking that the PTX version they name (`+ptxNN`, at most one) is
/// one LLVM knows and not below the chip's. Fails with a one-line message
/// for an unknown chip (`unknown NVIDIA chip 'bogus' (expected ...)`) or
/// such features.
llvm::Expected<NvptxTarget> parseNvptxTarget(llvm::StringRef chip,
                                             llvm::StringRef features = "");

/// The accepted chips, for messages and help texts:
/// "sm_75, sm_80, ..., sm_90[a], sm_100[a|f], ...".
std::string getSupportedNvptxChips();

} // namespace mlir::rpe

#endif // RPE_NVPTXTARGET_H
