//===- GpuKernel.cpp - an ahead-of-time GPU kernel ------------------------===//
//
// The rpe module goes through the GPU pipeline's kernel half (fusion,
// bufferization, each fused op as its gpu.launch ops, outlining); the
// kernel functions are gathered in one gpu.module, and each launch says
// what the host must pass: each kernel operand is an argument of the
// kernel function, or a static view of one, and the ABI says which C
// argument that is; or the scratch the host function allocates on the
// device (the backward's partial table gradients). The device half lowers
// to NVVM and serializes the one image.
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

/// Moves the kernel functions of every gpu.module (and the globals they
/// use) into the first, renaming what collides, so that one image holds
/// them all; the launches refer to their kernels' new places.
static void mergeGpuModules(ModuleOp module) {
  SmallVector<gpu::GPUModuleOp> gpuModules(module.getOps<gpu::GPUModuleOp>());
  if (gpuModules.size() < 2)
    return;
  gpu::GPUModuleOp target = gpuModules.front();
  SymbolTable targetSymbols(target);
  MLIRContext *context = module.getContext();
  for (gpu::GPUModuleOp source : llvm::drop_begin(gpuModules)) {
    // The source's symbols take names the target does not have; their uses
    // in the source follow.
    SymbolTable sourceSymbols(source);
    DenseMap<StringAttr, StringAttr> renamed;
    for (Operation &op : source.getBody()->without_terminator()) {
      auto symbol = dyn_cast<SymbolOpInterface>(op);
      if (!symbol || !targetSymbols.lookup(symbol.getNameAttr()))
        continue;
      StringAttr name = symbol.getNameAttr();
      unsigned suffix = 0;
      SmallString<64> newName = SymbolTable::generateSymbolName<64>(
          name.getValue(),
          [&](StringRef candidate) {
            return targetSymbols.lookup(candidate) ||
                   sourceSymbols.lookup(candidate);
          },
          suffix);
      StringAttr newAttr = StringAttr::get(context, newName);
      (void)SymbolTable::replaceAllSymbolUses(&op, newAttr,
                                              &source.getBodyRegion());
      symbol.setName(newAttr);
      renamed[name] = newAttr;
    }
    module.walk([&](gpu::LaunchFuncOp launch) {
      if (launch.getKernelModuleName() != source.getNameAttr())
        return;
      StringAttr kernel = launch.getKernelName();
      if (StringAttr newName = renamed.lookup(kernel))
        kernel = newName;
      launch.setKernelAttr(SymbolRefAttr::get(
          target.getNameAttr(), {FlatSymbolRefAttr::get(kernel)}));
    });
    for (Operation &op :
         llvm::make_early_inc_range(source.getBody()->without_terminator())) {
      op.remove();
      targetSymbols.insert(&op);
    }
    source.erase();
  }
}

/// A launch's geometry (grid, block, dynamic shared memory) and what each
/// of its memref parameters views: a C
/// argument (an argument of the kernel function, or a static view of one)
/// or the entry point's scratch (a gpu.alloc of the host function, per
/// item: its dynamic extent is the items').
static llvm::Error describeLaunch(gpu::LaunchFuncOp launch,
                                  const KernelAbi &abi,
                                  GpuKernel::EntryPoint &entryPoint) {
  GpuKernel::Launch &described = entryPoint.launches.emplace_back();
  described.symbol = launch.getKernelName().getValue().str();
  APInt blockSize, grid;
  if (!matchPattern(launch.getBlockSizeX(), m_ConstantInt(&blockSize)))
    return gpuError("the GPU block size is not a constant");
  described.blockSize = blockSize.getSExtValue();
  if (Value dynamicShared = launch.getDynamicSharedMemorySize()) {
    APInt bytes;
    if (!matchPattern(dynamicShared, m_ConstantInt(&bytes)))
      return gpuError("the GPU launch's dynamic shared memory is not a "
                      "constant");
    described.dynamicSharedBytes = bytes.getSExtValue();
  }
  auto host = launch->getParentOfType<FunctionOpInterface>();
  if (matchPattern(launch.getGridSizeX(), m_ConstantInt(&grid))) {
    described.itemsPerBlock = 0;
    described.grid = grid.getSExtValue();
  } else {
    auto itemsPerBlock =
        host ? RpeDialect::ItemsPerBlockAttrHelper(launch.getContext())
                   .getAttr(host)
             : nullptr;
    if (!itemsPerBlock || itemsPerBlock.getInt() < 1)
      return gpuError("the GPU launch does not say how many items a block "
                      "takes");
    described.itemsPerBlock = itemsPerBlock.getInt();
  }
  unsigned numOperands = abi.kernelOperands().size();
  for (Value operand : launch.getKernelOperands()) {
    Value source = operand;
    while (auto view = source.getDefiningOp<memref::SubViewOp>())
      source = view.getSource();
    auto type = dyn_cast<MemRefType>(operand.getType());
    GpuKernel::Param param;
    auto argument = dyn_cast<BlockArgument>(source);
    auto scratch = source.getDefiningOp<gpu::AllocOp>();
    if (!type || !(argument || scratch) ||
        (argument && argument.getArgNumber() >= numOperands))
      return gpuError("unexpected GPU kernel operand");
    int64_t dynamicExtent = kDynamicExtent;
    if (argument) {
      param.argument = abi.argumentOfKernelOperand(argument.getArgNumber());
    } else {
      param.argument = GpuKernel::kScratch;
      dynamicExtent = GpuKernel::kItemsExtent;
      auto scratchType = scratch.getType();
      if (scratchType.getNumDynamicDims() != 1 ||
          !scratchType.isDynamicDim(0) ||
          !scratchType.getElementType().isIntOrFloat())
        return gpuError("unexpected GPU scratch buffer");
      int64_t bytes = scratchType.getElementTypeBitWidth() / 8;
      for (int64_t extent : scratchType.getShape().drop_front())
        bytes *= extent;
      if (entryPoint.scratchBytesPerItem &&
          entryPoint.scratchBytesPerItem != bytes)
        return gpuError("more than one GPU scratch buffer");
      entryPoint.scratchBytesPerItem = bytes;
    }
    for (int64_t extent : type.getShape())
      param.shape.push_back(ShapedType::isDynamic(extent) ? dynamicExtent
                                                          : extent);
    if (failed(type.getStridesAndOffset(param.strides, param.offset)) ||
        ShapedType::isDynamic(param.offset) ||
        llvm::any_of(param.strides, ShapedType::isDynamic))
      return gpuError("GPU kernel operand with a dynamic layout");
    described.params.push_back(param);
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
  options.warpsPerBlock = config.warpsPerBlock;
  options.f32Mma = config.f32Mma;
  llvm::Expected<NvptxTarget> target = checkGpuPipelineOptions(options);
  if (!target)
    return target.takeError();

  PassManager kernelPm(module.getContext());
  buildGpuKernelPipeline(kernelPm, options, *target);
  if (failed(kernelPm.run(module)))
    return gpuError("lowering to a GPU kernel failed");
  mergeGpuModules(module);

  // Each entry point's launches, in the order its host function makes them.
  GpuKernel kernel;
  SmallVector<Direction, 2> directions = {Direction::Forward};
  if (config.grad)
    directions.push_back(Direction::Backward);
  for (Direction direction : directions) {
    std::string name = getEntryPointName(config, direction) + "_kernel";
    auto host = module.lookupSymbol<FunctionOpInterface>(name);
    if (!host)
      return gpuError("the host function " + name + " is missing");
    GpuKernel::EntryPoint &entryPoint = kernel.entryPoints.emplace_back();
    entryPoint.direction = direction;
    KernelAbi abi = getKernelAbi(config, direction);
    llvm::Error error = llvm::Error::success();
    host->walk([&](gpu::LaunchFuncOp launch) {
      if (!error)
        error = describeLaunch(launch, abi, entryPoint);
    });
    if (error)
      return std::move(error);
    if (entryPoint.launches.empty())
      return gpuError("no GPU launch in " + name);
  }

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
