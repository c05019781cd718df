//===- GpuKernel.cpp - an ahead-of-time GPU kernel ------------------------===//
//
// The rpe module goes through the GPU pipeline's kernel half (fusion,
// bufferization, the fused op as one gpu.launch, outlining); the launch
// then says what the host must pass: each kernel operand is an argument of
// the kernel function, or a static view of one, and the ABI says which C
// argument that is. The device half lowers to NVVM and serializes.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Aot.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace mlir::rpe;

static llvm::Error gpuError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The launch's geometry and the C argument behind each kernel operand.
static llvm::Error describeLaunch(gpu::LaunchFuncOp launch,
                                  const KernelAbi &abi, GpuKernel &kernel) {
  kernel.symbol = launch.getKernelName().getValue().str();
  APInt blockSize;
  if (!matchPattern(launch.getBlockSizeX(), m_ConstantInt(&blockSize)))
    return gpuError("the GPU block size is not a constant");
  kernel.blockSize = blockSize.getSExtValue();
  auto host = launch->getParentOfType<FunctionOpInterface>();
  auto itemsPerBlock =
      host ? RpeDialect::ItemsPerBlockAttrHelper(launch.getContext())
                 .getAttr(host)
           : nullptr;
  if (!itemsPerBlock || itemsPerBlock.getInt() < 1)
    return gpuError("the GPU launch does not say how many items a block "
                    "takes");
  kernel.itemsPerBlock = itemsPerBlock.getInt();
  unsigned numOperands = abi.kernelOperands().size();
  for (Value operand : launch.getKernelOperands()) {
    // A kernel operand is an argument of the kernel function or a static
    // view of one (a row of pad_qkv).
    Value source = operand;
    while (auto view = source.getDefiningOp<memref::SubViewOp>())
      source = view.getSource();
    auto argument = dyn_cast<BlockArgument>(source);
    auto type = dyn_cast<MemRefType>(operand.getType());
    if (!argument || !type || argument.getArgNumber() >= numOperands)
      return gpuError("unexpected GPU kernel operand");
    GpuKernel::Param param;
    param.argument = abi.argumentOfKernelOperand(argument.getArgNumber());
    for (int64_t extent : type.getShape())
      param.shape.push_back(ShapedType::isDynamic(extent) ? kDynamicExtent
                                                          : extent);
    if (failed(type.getStridesAndOffset(param.strides, param.offset)) ||
        ShapedType::isDynamic(param.offset) ||
        llvm::any_of(param.strides, ShapedType::isDynamic))
      return gpuError("GPU kernel operand with a dynamic layout");
    kernel.params.push_back(param);
  }
  return llvm::Error::success();
}

llvm::Expected<GpuKernel>
mlir::rpe::compileGpuKernel(ModuleOp module, const KernelConfig &config,
                            GpuBinaryFormat format) {
  GpuPipelineOptions options;
  options.chip = config.chip;
  options.features = config.ptxFeatures;
  options.toolkit = config.cudaToolkit;
  options.format = format;
  options.kernel = config.effectiveKernel();
  llvm::Expected<NvptxTarget> target = checkGpuPipelineOptions(options);
  if (!target)
    return target.takeError();

  PassManager kernelPm(module.getContext());
  buildGpuKernelPipeline(kernelPm, options, *target);
  if (failed(kernelPm.run(module)))
    return gpuError("lowering to a GPU kernel failed");

  SmallVector<gpu::LaunchFuncOp> launches;
  module.walk([&](gpu::LaunchFuncOp launch) { launches.push_back(launch); });
  if (launches.size() != 1)
    return gpuError("expected one GPU launch, found " +
                    std::to_string(launches.size()));
  GpuKernel kernel;
  if (llvm::Error error =
          describeLaunch(launches.front(), getKernelAbi(config), kernel))
    return std::move(error);

  PassManager devicePm(module.getContext());
  buildGpuDevicePipeline(devicePm, options, *target);
  addGpuSerializationPass(devicePm, options);
  if (failed(devicePm.run(module)))
    return gpuError("compiling the GPU kernel for " + config.chip + " failed");
  SmallVector<gpu::BinaryOp> binaries;
  module.walk([&](gpu::BinaryOp binary) { binaries.push_back(binary); });
  if (binaries.size() != 1 || binaries.front().getObjects().size() != 1)
    return gpuError("expected one GPU binary with one object");
  auto object = cast<gpu::ObjectAttr>(binaries.front().getObjects()[0]);
  kernel.image = object.getObject().getValue().str();
  return kernel;
}
