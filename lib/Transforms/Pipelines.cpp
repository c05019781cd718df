//===- Pipelines.cpp - named pipelines of swin-opt ------------------------===//

#include "Rpe/Codegen.h"
#include "Rpe/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::rpe {
#define GEN_PASS_DEF_RPECHECKLOWERED
#include "Rpe/Passes.h.inc"
} // namespace mlir::rpe

using namespace mlir;
using namespace mlir::rpe;

namespace {
struct RpeCheckLoweredPass
    : public rpe::impl::RpeCheckLoweredBase<RpeCheckLoweredPass> {
  using Base::Base;

  void runOnOperation() override {
    llvm::StringSet<> lowered(llvm::from_range, dialects);
    lowered.insert(BuiltinDialect::getDialectNamespace());
    llvm::StringSet<> reported;
    getOperation()->walk([&](Operation *op) {
      bool unresolved = isa<UnrealizedConversionCastOp>(op);
      if (!unresolved && lowered.contains(op->getName().getDialectNamespace()))
        return;
      signalPassFailure();
      if (!reported.insert(op->getName().getStringRef()).second)
        return;
      // mlir::emitError, not Operation::emitError: the latter would attach
      // the op, a whole loop nest for an scf.for.
      InFlightDiagnostic error = emitError(op->getLoc())
                                 << "'" << op->getName()
                                 << "' remains after lowering";
      if (unresolved)
        error << ": a conversion left its types unresolved";
      else
        error << " to the builtin, " << llvm::join(dialects, ", ")
              << " dialects";
    });
  }
};
} // namespace

/// On tensors: the raising of imported attention, its fusion, the model's
/// contractions as rpe.matmul (with a non-zero `panelWidth`; constant bf16
/// weights packed for `bf16Dot`), the unfused lowering of what does not
/// fuse.
static void addAttentionAndMatmulPasses(OpPassManager &pm, bool fuse,
                                        bool raise, int64_t panelWidth,
                                        bool bf16Dot = false) {
  // Imported modules spell the attention in linalg: raise it to rpe ops
  // first, so that it fuses (or, unfused, lowers as rpe's reference).
  if (raise)
    pm.addPass(createRpeRaiseWindowAttention());
  // Fused: window attention over a table lookup (and a shift mask) becomes
  // one op that gathers the bias inside its softmax. Unfused (and whatever
  // does not fuse): rpe -> linalg on tensors, index and mask as constants.
  if (fuse)
    pm.addPass(createRpeFuseBiasSoftmax());
  // The model's own contractions (not the unfused attention's, which
  // convert-rpe-to-linalg makes next) become rpe.matmul.
  if (panelWidth)
    pm.addPass(createRpeFormMatmul(RpeFormMatmulOptions{panelWidth, bf16Dot}));
  pm.addPass(createRpeFoldRelativeIndex());
  pm.addPass(createConvertRpeToLinalg());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

/// Tensors -> buffers.
static void addBufferizationPasses(OpPassManager &pm) {
  // A result written into a destination (the `out` buffer of the C ABI) is
  // computed in place rather than in a temporary that is then copied.
  // Function boundaries take plain identity-layout memrefs, the form the C
  // interface of the kernels expects.
  pm.addPass(bufferization::createEmptyTensorEliminationPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  pm.addPass(createRpeOrderGlobals());
  bufferization::BufferDeallocationPipelineOptions deallocation;
  bufferization::buildBufferDeallocationPipeline(pm, deallocation);
  // A function that returns a buffer it does not own (a constant's global)
  // returns a clone of it, which the deallocation pipeline leaves as
  // bufferization.clone: an allocation and a copy.
  pm.addPass(createConvertBufferizationToMemRefPass());
  pm.addPass(createRpeExpandMemrefCopy());
}

void mlir::rpe::buildBufferizationPipeline(OpPassManager &pm, bool fuse,
                                           bool raise, int64_t panelWidth) {
  addAttentionAndMatmulPasses(pm, fuse, raise, panelWidth);
  addBufferizationPasses(pm);
}

/// The linalg ops around the attention (LayerNorms, residual adds, rolls,
/// window partitions, pooling), on tensors: elementwise chains fused, then
/// row by row (threads where `parallel`), vectorized along the rows.
static void addRowPasses(OpPassManager &pm, bool parallel) {
  OpPassManager &func = pm.nest<func::FuncOp>();
  func.addPass(createRpeFoldDataMovement());
  func.addPass(createRpeFuseElementwise());
  RpeTileRowsOptions tile;
  tile.parallel = parallel;
  func.addPass(createRpeTileRows(tile));
  func.addPass(createRpeVectorizeRows());
  func.addPass(createCanonicalizerPass());
  func.addPass(createCSEPass());
}

/// Memrefs go to LLVM before the sequential loops go to control flow:
/// convert-scf-to-openmp (and rpe-parallel-to-gomp, where an iteration
/// allocates) wraps each parallel iteration in a memref.alloca_scope, whose
/// region must stay a single block, and the memref lowering inlines it
/// (with stacksave/stackrestore).
static void addMemrefsAndLoopsToLLVMPasses(OpPassManager &pm) {
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createSCFToControlFlowPass());
}

void mlir::rpe::buildCpuPipeline(OpPassManager &pm,
                                 const CpuPipelineOptions &options) {
  // OpenMP threads of the kernel's own, unless its caller runs the items.
  bool openMP = options.parallel && !options.itemRange;
  // Panels of three vectors: 8 x 3 zmm accumulators on AVX-512, 4 x 3 ymm
  // on AVX2 (MatmulKernel.cpp).
  int64_t panelWidth = options.matmul ? 3 * options.vectorWidth : 0;
  addAttentionAndMatmulPasses(pm, options.fuse, options.raise, panelWidth,
                              options.bf16Dot);
  // After rpe-form-matmul: the contractions (and the elementwise ops their
  // epilogues took) are rpe.matmul by now, not rows.
  if (options.vectorize)
    addRowPasses(pm, openMP);
  addBufferizationPasses(pm);
  // On buffers, where the timed ops write memory, and before they become
  // loops.
  if (options.profile)
    pm.addPass(createRpeProfileOps());
  if (options.matmul)
    pm.addPass(createRpeLowerMatmul(
        RpeLowerMatmulOptions{options.vectorWidth, options.bf16Dot}));
  if (options.fuse) {
    FusedKernelOptions kernel;
    kernel.strategy = options.kernel;
    kernel.vectorWidth = options.vectorWidth;
    kernel.bf16Dot = options.bf16Dot;
    kernel.avx512 = options.avx512;
    kernel.hoistScratch = !openMP;
    kernel.warpsPerBlock = options.warpsPerBlock;
    kernel.f32Mma = options.f32Mma;
    pm.addPass(createRpeLowerFusedAttention(kernel));
    // No canonicalization here: it would inline the kernel's per-iteration
    // memref.alloca_scope into the scf.parallel (an allocation scope), and
    // a sequential lowering of that loop then grows the stack with every
    // iteration.
    if (options.itemRange)
      pm.addPass(createRpeItemRange());
  }

  // Loops. The (window, head) forall becomes the one parallel loop; linalg
  // ops inside become sequential loops.
  if (openMP)
    pm.addNestedPass<func::FuncOp>(createForallToParallelLoopPass());
  else
    pm.addNestedPass<func::FuncOp>(createForallToForLoopPass());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  // The parallel loops on GNU libgomp's team (GOMP_parallel: in PyTorch,
  // torch's pool), or through the OpenMP dialect on LLVM's libomp.
  bool gnuOpenMP = options.threadRuntime == OpenMPRuntime::Gnu;
  if (openMP && gnuOpenMP)
    pm.addPass(createRpeParallelToGomp());
  else if (openMP)
    pm.addPass(createConvertSCFToOpenMPPass());

  addMemrefsAndLoopsToLLVMPasses(pm);

  // Everything else -> LLVM. bf16 conversions become integer arithmetic,
  // which every x86 CPU runs without a libcall.
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  // x86vector: the AVX-512 ops of avx512 and bf16-dot kernels.
  ConvertVectorToLLVMPassOptions vectorToLLVM;
  vectorToLLVM.x86Vector = true;
  pm.addPass(createConvertVectorToLLVMPass(vectorToLLVM));
  // The emulated warps' gathers and scatters of f16 and bf16: x86 would
  // round each element through f32, bf16 by a libcall.
  pm.addPass(createRpeMoveHalvesAsBits());
  pm.addPass(createConvertMathToLLVMPass());
  // What has no LLVM intrinsic (math.erf of an imported GELU, tan, ...)
  // calls libm, which the kernels link anyway.
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertOpenMPToLLVMPass());
  pm.addPass(createUBToLLVMConversionPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
  // OpenMP's dialect translates to LLVM IR as it is; GOMP_parallel is a
  // call.
  SmallVector<std::string> lowered = {"llvm"};
  if (!gnuOpenMP)
    lowered.push_back("omp");
  pm.addPass(createRpeCheckLowered(RpeCheckLoweredOptions{lowered}));
}

llvm::Expected<NvptxTarget>
mlir::rpe::checkGpuPipelineOptions(const GpuPipelineOptions &options) {
  // nvvm-attach-target takes any level and gpu-module-to-binary then fails
  // with the whole gpu.module attached to its error.
  if (options.optLevel > 3)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "opt-level must be 0, 1, 2 or 3, got " +
                                       Twine(options.optLevel));
  return parseNvptxTarget(options.chip, options.features);
}

namespace {
/// Fails with an error about the pipeline's options, located at the
/// operation the pipeline runs on. A pipeline builder registered with
/// mlir-opt cannot fail with a message of its own (the registry adds an
/// unlocated "failed to add" line); this reports bad options the way the
/// passes report theirs, before any IR is touched.
struct PipelineOptionErrorPass
    : public PassWrapper<PipelineOptionErrorPass, OperationPass<>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(PipelineOptionErrorPass)

  explicit PipelineOptionErrorPass(std::string message)
      : message(std::move(message)) {}

  StringRef getArgument() const final { return "rpe-pipeline-option-error"; }
  StringRef getDescription() const final {
    return "Fail with an error about the pipeline's options";
  }

  void runOnOperation() override {
    // mlir::emitError, not Operation::emitError: the latter attaches the
    // whole operation (the module) to the message.
    emitError(getOperation()->getLoc()) << message;
    signalPassFailure();
  }

  std::string message;
};
} // namespace

void mlir::rpe::buildGpuKernelPipeline(OpPassManager &pm,
                                       const GpuPipelineOptions &options,
                                       const NvptxTarget &target) {
  buildBufferizationPipeline(pm, /*fuse=*/true, options.raise);
  // Unfused leftovers run on the host as loops; an rpe.matmul in the input
  // on the host's vectors (8 lanes: any x86-64).
  pm.addPass(createRpeLowerMatmul());
  pm.addNestedPass<func::FuncOp>(createForallToForLoopPass());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());

  // The fused attention as one gpu.launch: a warp per (window, head) on
  // tensor cores, or a block per (window, head) and a thread per row.
  FusedKernelOptions kernel;
  kernel.strategy = options.kernel;
  kernel.target = KernelTarget::Gpu;
  kernel.keyBlock = options.keyBlock;
  kernel.warpsPerBlock = options.warpsPerBlock;
  kernel.f32Mma = options.f32Mma;
  kernel.smVersion = target.smVersion;
  pm.addPass(createRpeLowerFusedAttention(kernel));
  pm.addPass(createGpuKernelOutliningPass());
  // Outlining copies the kernel's shared-memory globals into its module;
  // the host's copies are left unused.
  pm.addPass(createSymbolDCEPass());
}

void mlir::rpe::buildGpuDevicePipeline(OpPassManager &pm,
                                       const GpuPipelineOptions &options,
                                       const NvptxTarget &target) {
  GpuNVVMAttachTargetOptions attach;
  attach.chip = target.chip;
  attach.features = target.features;
  attach.optLevel = options.optLevel;
  pm.addPass(createGpuNVVMAttachTarget(attach));

  // Device code: NVVM; math.exp becomes libdevice's __nv_expf.
  OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
  device.addPass(createLowerAffinePass());
  device.addPass(memref::createExpandStridedMetadataPass());
  device.addPass(createSCFToControlFlowPass());
  device.addPass(createConvertGpuOpsToNVVMOps());
  device.addPass(createCanonicalizerPass());
}

void mlir::rpe::addGpuSerializationPass(OpPassManager &pm,
                                        const GpuPipelineOptions &options) {
  if (options.format == GpuBinaryFormat::None)
    return;
  RpeGpuModuleToBinaryOptions binary;
  binary.format = options.format;
  binary.toolkit = options.toolkit;
  pm.addPass(createRpeGpuModuleToBinary(binary));
}

void mlir::rpe::buildGpuPipeline(OpPassManager &pm,
                                 const GpuPipelineOptions &options) {
  llvm::Expected<NvptxTarget> target = checkGpuPipelineOptions(options);
  if (!target) {
    pm.addPass(std::make_unique<PipelineOptionErrorPass>(
        llvm::toString(target.takeError())));
    return;
  }
  buildGpuKernelPipeline(pm, options, *target);
  buildGpuDevicePipeline(pm, options, *target);

  // Host code: LLVM, with the launch as gpu-to-llvm's runtime calls. An
  // imported module's GELU (math.erf) runs on the host and calls libm.
  addMemrefsAndLoopsToLLVMPasses(pm);
  // The host's vectors: an rpe.matmul's kernel.
  pm.addPass(createConvertVectorToLLVMPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createGpuToLLVMConversionPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  addGpuSerializationPass(pm, options);
  // The host launches a gpu.binary (format=none: a gpu.module of LLVM and
  // NVVM ops).
  pm.addPass(
      createRpeCheckLowered(RpeCheckLoweredOptions{{"llvm", "gpu", "nvvm"}}));
}

void mlir::rpe::registerRpePassesAndPipelines() {
  registerRpePasses();
  PassPipelineRegistration<CpuPipelineOptions>(
      "rpe-cpu-pipeline",
      "Lower rpe window attention to the LLVM dialect for the host CPU",
      buildCpuPipeline);
  PassPipelineRegistration<GpuPipelineOptions>(
      "rpe-gpu-pipeline",
      "Lower rpe window attention to an NVVM kernel (PTX, cubin or fatbin in "
      "a gpu.binary) and a host module that launches it",
      buildGpuPipeline);
}
