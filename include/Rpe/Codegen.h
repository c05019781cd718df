//===- Codegen.h - kernels of the fused window attention --------*- C++ -*-===//
//
// The kernel emitters of rpe.fused_window_attention (lib/Codegen): given the
// bufferized op, they build the loops, vectors, GPU launches and tensor-core
// tiles that compute it. They are not passes: rpe-lower-fused-attention
// (lib/Transforms) chooses one per op and calls it.
//
//===----------------------------------------------------------------------===//

#ifndef RPE_CODEGEN_H
#define RPE_CODEGEN_H

#include "Rpe/NvptxTarget.h"
#include "Rpe/RpeOps.h"

#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace mlir::rpe {

/// Which kernel computes a fused window attention.
enum class KernelStrategy {
  /// The CPU kernel: register-blocked FMA tiles over a packed kᵀ.
  Tiles,
  /// One online softmax per query row (the GPU: a thread per row).
  Rows,
  /// A warp per (window, head) on tensor-core tiles (rows where the op does
  /// not qualify).
  Warps,
};

/// Where the emitted kernel runs.
enum class KernelTarget {
  /// scf.parallel loops on the host; warps emulated by 32-lane vectors.
  Host,
  /// One gpu.launch.
  Gpu,
};

llvm::StringRef stringifyKernelStrategy(KernelStrategy strategy);
std::optional<KernelStrategy> symbolizeKernelStrategy(llvm::StringRef name);

/// How to emit the kernel of one op; see rpe-lower-fused-attention's
/// options.
struct FusedKernelOptions {
  KernelStrategy strategy = KernelStrategy::Tiles;
  KernelTarget target = KernelTarget::Host;
  /// f32 lanes of the CPU micro-kernels.
  int64_t vectorWidth = 8;
  /// bf16 operands of the CPU kernel take AVX512-BF16 dot products.
  bool bf16Dot = false;
  /// The CPU has AVX-512F (x86vector's AVX-512 ops may be used).
  bool avx512 = false;
  /// Bytes of scores the CPU kernel keeps per query block.
  int64_t scoreBlockBytes = 32768;
  /// Allocate the CPU kernel's scratch once, outside the (window, head)
  /// loop (a loop that will run sequentially).
  bool hoistScratch = false;
  /// Warps: keys per online-softmax step and items per block (0: chosen).
  int64_t keyBlock = 0;
  int64_t warpsPerBlock = 0;
  /// SM version of the GPU the kernel is for: the warp kernel needs
  /// tensor-core m16n8k16 tiles (hasMmaM16N8K16), older chips get rows.
  unsigned smVersion = kMmaM16N8K16MinSmVersion;
};

/// Replaces the bufferized `op` (a fused attention or its gradient) by its
/// kernel, built where the op is. Fails, with an error on the op, when the
/// options ask for a kernel the op cannot have. The gradient has one
/// kernel, the CPU tiles form: `strategy` chooses among the forward's.
LogicalResult emitFusedKernel(RewriterBase &rewriter,
                              FusedAttentionOpInterface op,
                              const FusedKernelOptions &options);

/// Replaces the bufferized `op` by its CPU kernel (MatmulKernel.cpp) on
/// vectors of `vectorWidth` f32 lanes, built where the op is. Fails, with
/// an error on the op, when its panels do not fit the vectors.
LogicalResult emitMatmulKernel(RewriterBase &rewriter, MatmulOp op,
                               int64_t vectorWidth);

} // namespace mlir::rpe

#endif // RPE_CODEGEN_H
