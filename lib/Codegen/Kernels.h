//===- Kernels.h - the kernels of the fused attention -----------*- C++ -*-===//
//
// The kernels emitFusedKernel (FusedKernel.cpp) chooses from, each a class
// of its own in its file, on the context of KernelEmitter.h:
//
//   TilesKernel.cpp     the CPU forward: register-blocked FMA (or, with
//                       PairedBf16.cpp, AVX512-BF16 dot product) tiles
//   BackwardKernel.cpp  the CPU gradient, on the same tile steps
//                       (TileSteps.h)
//   GpuBackwardKernel.cpp  the GPU gradient: a block per (window, head),
//                       the table's gradient reduced without atomics; its
//                       lane form (lanes' FMAs) and, GpuBackwardTiles.cpp,
//                       its tensor-core form; on the host, warps emulated
//                       by vectors
//   RowsKernel.cpp      one online softmax per query row: the GPU's
//                       fallback, nested parallel loops on the host
//   WarpKernel.cpp      a warp per (window, head) on tensor-core tiles; on
//                       the host, warps emulated by vectors
//
//===----------------------------------------------------------------------===//

#ifndef RPE_CODEGEN_KERNELS_H
#define RPE_CODEGEN_KERNELS_H

#include "KernelEmitter.h"

namespace mlir::rpe::detail {

/// The CPU forward kernel (TilesKernel.cpp).
LogicalResult emitTilesKernel(ImplicitLocOpBuilder &b,
                              FusedAttentionOpInterface op,
                              const KernelGeometry &g,
                              const FusedKernelOptions &options);

/// The CPU gradient kernel of an rpe.fused_window_attention_grad op
/// (BackwardKernel.cpp).
LogicalResult emitBackwardKernel(ImplicitLocOpBuilder &b,
                                 FusedAttentionOpInterface op,
                                 const KernelGeometry &g);

/// The GPU kernel of an rpe.fused_window_attention_grad op
/// (GpuBackwardKernel.cpp): two gpu.launch on the GPU (the items, then the
/// reduction of the table's gradient); on the host, an item loop of
/// emulated warps (its scratch hoisted where `hoistScratch`) and the
/// reduction's loops. Fails, with an error on the op, when its window does
/// not fit the shared memory a block may have on chips of SM version
/// `smVersion` (the emulation keeps the GPU's limit).
LogicalResult emitGpuBackwardKernel(ImplicitLocOpBuilder &b,
                                    FusedAttentionOpInterface op,
                                    const KernelGeometry &g,
                                    KernelTarget target, bool hoistScratch,
                                    unsigned smVersion, F32Mma f32Mma);

/// The row-parallel kernel (RowsKernel.cpp): nested scf.parallel loops on
/// the host, one gpu.launch on the GPU.
LogicalResult emitRowsKernel(ImplicitLocOpBuilder &b,
                             FusedAttentionOpInterface op,
                             const KernelGeometry &g, KernelTarget target);

/// Compile-time shape of the warp-level (tensor-core) kernel; see
/// WarpKernel.cpp.
struct WarpTileShape {
  Type element;          // q, k, v's, as staged: f16, bf16 or f32
  Type operand;          // the mma.sync operand type: f16 or bf16
  int64_t operandTerms;  // operand terms per element (f32: 2 or 3 bf16)
  bool cosine;           // SwinV2's cosine attention (per-key norms staged)
  int64_t queryTiles;    // ceil(N / 16): m16 tiles of query rows
  int64_t paddedTokens;  // 16 * queryTiles: keys and values, zero padded
  int64_t keyBlock;      // keys per online-softmax step (16..64)
  int64_t rowStride;     // elements per q, k, v row in shared memory
  int64_t tableRows;     // rows of the table, as KernelGeometry's
  int64_t warpsPerBlock; // (window, head) items per GPU block
  int64_t sharedBytes;   // shared memory per block (layoutSharedBuffers)
};

/// Tile sizes of the warp kernel a user may fix; 0 lets the kernel choose.
struct WarpTileOptions {
  int64_t keyBlock = 0;         // keys per online-softmax step
  int64_t warpsPerBlock = 0;    // (window, head) items per block
  F32Mma f32Mma = F32Mma::None; // f32 q, k, v on the tensor cores
  /// The chip's SM version and the shared memory a block may have on it
  /// (getMaxSharedBytesPerBlock).
  unsigned smVersion = kMmaM16N8K16MinSmVersion;
  int64_t maxSharedBytes = kStaticSharedBytesPerBlock;
};

/// The warp kernel's shape for `op`. Nothing when the op does not qualify
/// (it gets the row kernel): f16/bf16 operands (or f32 with `f32Mma`),
/// head_dim a multiple of 16 (at most 256; f32: 128), and one warp's keys,
/// values, query tile and table within the shared memory a block may have on
/// the chip (static up to 48 KiB, dynamic beyond). Failure, with an error on
/// the op, when `options` ask for tiles the op cannot have.
FailureOr<std::optional<WarpTileShape>>
getWarpTileShape(FusedWindowAttentionOp op, const WarpTileOptions &options);

/// The shared buffers of a block of `warps` warps of the warp kernel: the
/// query tiles, keys, values, tables, key offsets and labels (and for the
/// cosine form the keys' inverse norms), each holding
/// the warps' slices one after the other. The one list from which the
/// shape sizes a block and the kernel makes its buffers.
SmallVector<SharedBuffer, 7> getWarpSharedBuffers(const WarpTileShape &shape,
                                                  int64_t warps,
                                                  MLIRContext *context);

/// The warp kernel (WarpKernel.cpp): one gpu.launch on the GPU; on the
/// host, an item loop of emulated warps whose scratch is hoisted as the
/// tiles kernel's is.
LogicalResult emitWarpKernel(ImplicitLocOpBuilder &b,
                             FusedAttentionOpInterface op,
                             const KernelGeometry &g,
                             const WarpTileShape &shape, KernelTarget target,
                             bool hoistScratch);

} // namespace mlir::rpe::detail

#endif // RPE_CODEGEN_KERNELS_H
