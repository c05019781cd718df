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

#include "Rpe/Passes.h"
#include "Rpe/RpeOps.h"

#include "mlir/IR/PatternMatch.h"

namespace mlir::rpe {

/// How to emit the kernel of one op: the options of
/// rpe-lower-fused-attention, whose fields and defaults Passes.td declares
/// (KernelStrategy and KernelTarget are in Rpe/KernelEnums.h). The
/// pipelines build it; the pass fills it from its command line. (The field
/// `strategy` is the option `kernel=`.)
using FusedKernelOptions = RpeLowerFusedAttentionOptions;

/// Replaces the bufferized `op` (a fused attention or its gradient) by its
/// kernel, built where the op is. Fails, with an error on the op, when the
/// options ask for a kernel the op cannot have. The gradient has two: the
/// CPU tiles form and the GPU's warp program (for the GPU, and on the host
/// with `strategy` warps, emulated); `strategy` otherwise chooses among the
/// forward's.
LogicalResult emitFusedKernel(RewriterBase &rewriter,
                              FusedAttentionOpInterface op,
                              const FusedKernelOptions &options);

/// Replaces the bufferized `op` by its CPU kernel (MatmulKernel.cpp) on
/// vectors of `vectorWidth` f32 lanes, built where the op is; with
/// `bf16Dot`, bf16 operands take AVX512-BF16 dot products on pairs of k
/// (`vectorWidth` 4, 8 or 16). Fails, with an error on the op, when its
/// panels do not fit the vectors, or its weights are packed in pairs of k
/// without `bf16Dot`.
LogicalResult emitMatmulKernel(RewriterBase &rewriter, MatmulOp op,
                               int64_t vectorWidth, bool bf16Dot = false);

} // namespace mlir::rpe

#endif // RPE_CODEGEN_H
