//===- EntryPoint.cpp - the C entry point of a CPU kernel -----------------===//
//
// The rpe module is lowered by rpe-cpu-pipeline to the LLVM dialect; then
// an entry point with the ABI's C signature is added. It rejects invalid
// arguments (a NULL buffer that may not be NULL, a negative count, shifted
// windows that are not whole images) by returning 1 before anything is
// written, expands each buffer into the memref descriptor of its shape, and
// calls the kernel. Every other function becomes internal.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Aot.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/TargetParser/Host.h"

using namespace mlir;
using namespace mlir::rpe;

/// Appends the expanded memref descriptor of a contiguous row-major buffer
/// at `ptr` of `shape` (the dynamic extent is `count`): allocated and
/// aligned pointers, offset, sizes, strides.
static void appendDescriptor(OpBuilder &b, Location loc, Value ptr, Value count,
                             ArrayRef<int64_t> shape,
                             SmallVectorImpl<Value> &args) {
  Type i64 = b.getI64Type();
  auto constant = [&](int64_t v) -> Value {
    return LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(v));
  };
  args.append({ptr, ptr, constant(0)});
  for (int64_t extent : shape)
    args.push_back(extent == kDynamicExtent ? count : constant(extent));
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = shape.size() - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  for (int64_t stride : strides)
    args.push_back(constant(stride));
}

static LogicalResult emitEntryPoint(ModuleOp module,
                                    const KernelConfig &config) {
  MLIRContext *context = module.getContext();
  auto kernel = module.lookupSymbol<LLVM::LLVMFuncOp>(config.name + "_kernel");
  if (!kernel)
    return module.emitError("lowered kernel function not found");
  for (auto func : module.getOps<LLVM::LLVMFuncOp>())
    if (!func.isExternal())
      func.setLinkage(LLVM::Linkage::Internal);

  KernelAbi abi = getKernelAbi(config);
  OpBuilder b(context);
  Location loc = kernel.getLoc();
  b.setInsertionPointToEnd(module.getBody());
  Type ptr = LLVM::LLVMPointerType::get(context);
  Type i64 = b.getI64Type(), i32 = b.getI32Type(), i1 = b.getI1Type();
  auto constant = [&](Type type, int64_t v) -> Value {
    return LLVM::ConstantOp::create(b, loc, type, b.getIntegerAttr(type, v));
  };

  // A NULL pad_qkv means zeros: a constant the entry point passes instead.
  LLVM::GlobalOp zeroPadding;
  if (config.isPadded()) {
    auto arrayType =
        LLVM::LLVMArrayType::get(b.getF32Type(), 3 * config.channels());
    zeroPadding = LLVM::GlobalOp::create(
        b, loc, arrayType, /*isConstant=*/true, LLVM::Linkage::Internal,
        config.name + "_zero_padding",
        b.getZeroAttr(
            RankedTensorType::get({3 * config.channels()}, b.getF32Type())));
  }

  SmallVector<Type> params;
  for (const AbiArgument &argument : abi.arguments)
    params.push_back(argument.role == ArgumentRole::Count ? i64 : ptr);
  auto entryPoint = LLVM::LLVMFuncOp::create(
      b, loc, config.name, LLVM::LLVMFunctionType::get(i32, params));
  Block *entry = entryPoint.addEntryBlock(b);
  Block *invalid = b.createBlock(&entryPoint.getBody());
  Block *valid = b.createBlock(&entryPoint.getBody());

  // Invalid: a NULL buffer that may not be NULL, a negative count, or
  // (shifted windows) a number of windows that is not a whole number of
  // images.
  b.setInsertionPointToStart(entry);
  Value count = entry->getArgument(abi.countIndex());
  Value null = LLVM::ZeroOp::create(b, loc, ptr);
  Value bad = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::slt, count,
                                   constant(i64, 0));
  for (auto [i, argument] : llvm::enumerate(abi.arguments)) {
    if (!argument.isBuffer() || argument.nullable)
      continue;
    Value isNull = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq,
                                        entry->getArgument(i), null);
    bad = LLVM::OrOp::create(b, loc, i1, bad, isNull);
  }
  if (abi.countMultiple > 1) {
    Value remainder =
        LLVM::SRemOp::create(b, loc, count, constant(i64, abi.countMultiple));
    Value partial = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne,
                                         remainder, constant(i64, 0));
    bad = LLVM::OrOp::create(b, loc, i1, bad, partial);
  }
  LLVM::CondBrOp::create(b, loc, bad, invalid, valid);

  b.setInsertionPointToStart(invalid);
  LLVM::ReturnOp::create(b, loc, ValueRange{constant(i32, 1)});

  b.setInsertionPointToStart(valid);
  SmallVector<Value> args;
  for (const AbiArgument *operand : abi.kernelOperands()) {
    Value buffer = entry->getArgument(
        abi.argumentOfKernelOperand(*operand->kernelOperand));
    if (operand->role == ArgumentRole::Padding) {
      Value isNull =
          LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, buffer, null);
      Value zeros = LLVM::AddressOfOp::create(b, loc, zeroPadding);
      buffer = LLVM::SelectOp::create(b, loc, isNull, zeros, buffer);
    }
    appendDescriptor(b, loc, buffer, count, operand->getOperandShape(), args);
  }
  if (args.size() != kernel.getNumArguments())
    return kernel.emitError("unexpected kernel signature: ")
           << kernel.getNumArguments() << " arguments, " << args.size()
           << " expected";
  LLVM::CallOp::create(b, loc, kernel, args);
  LLVM::ReturnOp::create(b, loc, ValueRange{constant(i32, 0)});
  return success();
}

LogicalResult mlir::rpe::lowerToLLVMDialect(ModuleOp module,
                                            const KernelConfig &config) {
  PassManager pm(module.getContext());
  CpuPipelineOptions options;
  options.parallel = config.parallel;
  options.fuse = config.fuse;
  options.kernel = config.effectiveKernel();
  options.vectorWidth = config.vectorWidth;
  if (!config.vectorWidth) {
    bool avx512 = false;
    if (config.cpu == "native") {
      llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
      avx512 = features.lookup("avx512f");
    }
    options.vectorWidth = avx512 ? 16 : 8;
  }
  buildCpuPipeline(pm, options);
  if (failed(pm.run(module)))
    return failure();
  return emitEntryPoint(module, config);
}
