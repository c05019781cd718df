//===- Passes.h - rpe passes and pipelines ----------------------*- C++ -*-===//

#ifndef RPE_PASSES_H
#define RPE_PASSES_H

#include "Rpe/KernelEnums.h"
#include "Rpe/NvptxTarget.h"
#include "Rpe/RpeOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

#ifndef SWIN_CUDA_TOOLKIT_DEFAULT
#define SWIN_CUDA_TOOLKIT_DEFAULT "/usr/local/cuda"
#endif

namespace mlir::rpe {

#define GEN_PASS_DECL
#include "Rpe/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "Rpe/Passes.h.inc"

/// Replaces `op` (an rpe op with a folder) by the constant its folder
/// computes from its constant operands. Fails, leaving the IR untouched,
/// when the value is not known at compile time.
LogicalResult replaceWithFoldedConstant(RewriterBase &rewriter, Operation *op);

/// Options of `rpe-cpu-pipeline`.
struct CpuPipelineOptions : public PassPipelineOptions<CpuPipelineOptions> {
  PassOptions::Option<bool> raise{
      *this, "raise",
      llvm::cl::desc("First raise Swin attention imported as linalg "
                     "(rpe-raise-window-attention)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> fuse{
      *this, "fuse",
      llvm::cl::desc("Fuse the bias gather and the mask into the softmax "
                     "(false: the unfused reference path)"),
      llvm::cl::init(true)};
  PassOptions::Option<int64_t> vectorWidth{
      *this, "vector-width",
      llvm::cl::desc("f32 lanes of the fused kernel's vectors (8 for AVX2, 16 "
                     "for AVX-512)"),
      llvm::cl::init(8)};
  PassOptions::Option<bool> bf16Dot{
      *this, "bf16-dot",
      llvm::cl::desc("bf16 operands take AVX512-BF16 dot products "
                     "(vdpbf16ps; the CPU must have AVX512-BF16) at "
                     "vector-width=16"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> avx512{
      *this, "avx512",
      llvm::cl::desc("The CPU has AVX-512F: 2^x in the 16-lane kernel takes "
                     "vreduceps and vscalefps (implied by bf16-dot)"),
      llvm::cl::init(false)};
  PassOptions::Option<KernelStrategy> kernel{
      *this, "kernel",
      llvm::cl::desc("The fused kernel: tiles (the CPU's), or the GPU's rows "
                     "or warps, run on the host to test them"),
      llvm::cl::init(KernelStrategy::Tiles),
      enumOptionValues(symbolizeKernelStrategy)};
  PassOptions::Option<int64_t> warpsPerBlock{
      *this, "warps-per-block",
      llvm::cl::desc("kernel=warps: (window, head) items per emulated block "
                     "(rpe-gpu-pipeline's option, to test its numbers)"),
      llvm::cl::init(0)};
  PassOptions::Option<F32Mma> f32Mma{
      *this, "f32-mma",
      llvm::cl::desc("kernel=warps: f32 operands on the emulated tensor "
                     "cores (rpe-gpu-pipeline's option, to test its numbers)"),
      llvm::cl::init(F32Mma::None), enumOptionValues(symbolizeF32Mma)};
  PassOptions::Option<bool> parallel{
      *this, "parallel",
      llvm::cl::desc("Run the (window, head) items in parallel through "
                     "OpenMP"),
      llvm::cl::init(true)};
  PassOptions::Option<OpenMPRuntime> threadRuntime{
      *this, "thread-runtime",
      llvm::cl::desc("The OpenMP runtime that runs the parallel loops: omp "
                     "(LLVM's libomp, convert-scf-to-openmp) or gomp (GNU "
                     "libgomp, PyTorch's pool: rpe-parallel-to-gomp)"),
      llvm::cl::init(OpenMPRuntime::Llvm),
      enumOptionValues(symbolizeOpenMPRuntime)};
  PassOptions::Option<bool> matmul{
      *this, "matmul",
      llvm::cl::desc("Compile linalg contractions (linear layers) as "
                     "rpe.matmul: weights packed at compile time, bias, GELU "
                     "and residual fused, register-blocked vector kernels "
                     "(rpe-form-matmul, rpe-lower-matmul)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> vectorize{
      *this, "vectorize",
      llvm::cl::desc("Compile the linalg ops around the attention and the "
                     "GEMMs (LayerNorms, residual adds, rolls, window "
                     "partitions) row by row, in vectors and threads "
                     "(rpe-fold-data-movement, rpe-fuse-elementwise, "
                     "rpe-tile-rows, rpe-vectorize-rows)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> itemRange{
      *this, "item-range",
      llvm::cl::desc("The fused kernel's function takes trailing `begin` and "
                     "`end` indices and computes those (window, head) items "
                     "sequentially, for the caller's threads to split "
                     "(rpe-item-range; overrides `parallel`)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> profile{
      *this, "profile",
      llvm::cl::desc("Time each op of the public functions through calls of "
                     "the profiling runtime, which swin-aot --profile links "
                     "(rpe-profile-ops)"),
      llvm::cl::init(false)};
};

/// Builds `rpe-cpu-pipeline`: rpe ops to the LLVM dialect.
void buildCpuPipeline(OpPassManager &pm, const CpuPipelineOptions &options);

/// Options of `rpe-gpu-pipeline`.
struct GpuPipelineOptions : public PassPipelineOptions<GpuPipelineOptions> {
  PassOptions::Option<bool> raise{
      *this, "raise",
      llvm::cl::desc("First raise Swin attention imported as linalg "
                     "(rpe-raise-window-attention)"),
      llvm::cl::init(true)};
  PassOptions::Option<std::string> chip{
      *this, "chip",
      llvm::cl::desc("NVIDIA GPU architecture: sm_75 (the row kernel), "
                     "sm_80 to sm_121f (tensor cores); see "
                     "Rpe/NvptxTarget.h"),
      llvm::cl::init("sm_90")};
  PassOptions::Option<std::string> features{
      *this, "features",
      llvm::cl::desc("LLVM NVPTX features, such as +ptx86 (empty: the least "
                     "PTX version the chip needs)"),
      llvm::cl::init("")};
  PassOptions::Option<unsigned> optLevel{
      *this, "opt-level", llvm::cl::desc("LLVM optimization level (0 to 3)"),
      llvm::cl::init(3)};
  PassOptions::Option<GpuBinaryFormat> format{
      *this, "format",
      llvm::cl::desc("What the gpu.binary holds: isa (PTX), bin (a cubin, "
                     "from ptxas), fatbin (cubin and PTX, from ptxas and "
                     "fatbinary) or none (no binary: the gpu.module stays in "
                     "the NVVM dialect)"),
      llvm::cl::init(GpuBinaryFormat::Isa),
      enumOptionValues(symbolizeGpuBinaryFormat)};
  PassOptions::Option<KernelStrategy> kernel{
      *this, "kernel",
      llvm::cl::desc("warps (tensor cores, where the op qualifies, else "
                     "rows) or rows (a thread per query row)"),
      llvm::cl::init(KernelStrategy::Warps),
      enumOptionValues(symbolizeKernelStrategy)};
  PassOptions::Option<int64_t> keyBlock{
      *this, "key-block",
      llvm::cl::desc("warps: keys per online-softmax step, 16 to 64, "
                     "dividing N rounded up to 16 (0: the largest that "
                     "does)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> warpsPerBlock{
      *this, "warps-per-block",
      llvm::cl::desc("warps: (window, head) items per block (0: as many as "
                     "fit 48 KiB of shared memory, at most 4)"),
      llvm::cl::init(0)};
  PassOptions::Option<F32Mma> f32Mma{
      *this, "f32-mma",
      llvm::cl::desc("warps: f32 q, k, v on the tensor cores as bf16 terms "
                     "(bf16x3: 2^-16 of each product, finer than TF32; "
                     "bf16x6: f32's precision), or none: f32 takes rows"),
      llvm::cl::init(F32Mma::None), enumOptionValues(symbolizeF32Mma)};
  PassOptions::Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("CUDA toolkit (libdevice, ptxas, fatbinary); passed "
                     "explicitly because test environments are stripped"),
      llvm::cl::init(SWIN_CUDA_TOOLKIT_DEFAULT)};
};

/// Checks the options of rpe-gpu-pipeline that no pass checks (chip,
/// features, opt-level) and resolves the chip: the errors, one line each,
/// that the pipeline would otherwise meet as LLVM's fatal errors.
llvm::Expected<NvptxTarget>
checkGpuPipelineOptions(const GpuPipelineOptions &options);

/// Builds `rpe-gpu-pipeline`: rpe ops to a host module that launches an
/// NVVM kernel serialized into a gpu.binary. It is the three parts below,
/// then the host lowering; swin-aot runs the parts and keeps the kernel.
/// Options that checkGpuPipelineOptions refuses make the pipeline fail with
/// its message, located at the operation it runs on.
void buildGpuPipeline(OpPassManager &pm, const GpuPipelineOptions &options);
/// Fusion, bufferization, the fused op as a gpu.launch (the warp kernel
/// only where `target` has its tensor cores), kernel outlining.
void buildGpuKernelPipeline(OpPassManager &pm,
                            const GpuPipelineOptions &options,
                            const NvptxTarget &target);
/// The NVVM target (`target`'s chip and features, the options' opt-level)
/// and the device lowering of the gpu.module.
void buildGpuDevicePipeline(OpPassManager &pm,
                            const GpuPipelineOptions &options,
                            const NvptxTarget &target);
/// rpe-gpu-module-to-binary in the options' format (nothing for none), with
/// their toolkit.
void addGpuSerializationPass(OpPassManager &pm,
                             const GpuPipelineOptions &options);

/// The target-independent front of both pipelines: the raising of imported
/// attention (`raise`), fusion, with a non-zero `panelWidth` the model's
/// contractions as rpe.matmul with weights in panels of that width, the
/// unfused lowering of what does not fuse, bufferization.
void buildBufferizationPipeline(OpPassManager &pm, bool fuse, bool raise,
                                int64_t panelWidth = 0);

/// Registers the passes and the named pipelines of this project.
void registerRpePassesAndPipelines();

} // namespace mlir::rpe

#endif // RPE_PASSES_H
