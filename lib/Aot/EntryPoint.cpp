//===- EntryPoint.cpp - the C entry point of a CPU kernel -----------------===//
//
// The rpe module is lowered by rpe-cpu-pipeline to the LLVM dialect; then
// an entry point with the ABI's C signature is added. It rejects invalid
// arguments (a NULL buffer that may not be NULL, a negative count, shifted
// windows that are not whole images) by returning 1 before anything is
// written, expands each buffer into the memref descriptor of its shape, and
// calls the kernel. A fused kernel computes a range of (window, head) items
// (rpe-item-range): the entry point runs it on the calling thread's GNU
// OpenMP team, each thread on its share of the items, or on the calling
// thread alone for every item. Every other function becomes internal.
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

namespace {
/// Builds the C entry point of a lowered kernel and, for the GNU OpenMP
/// runtime, the worker each thread of the team runs.
class EntryPointBuilder {
public:
  EntryPointBuilder(ModuleOp module, const KernelConfig &config,
                    LLVM::LLVMFuncOp kernel)
      : module(module), config(config), abi(getKernelAbi(config)),
        kernel(kernel), b(module.getContext()), loc(kernel.getLoc()) {
    b.setInsertionPointToEnd(module.getBody());
    ptr = LLVM::LLVMPointerType::get(module.getContext());
    i64 = b.getI64Type();
    i32 = b.getI32Type();
  }

  LogicalResult build();

private:
  Value constant(Type type, int64_t v) {
    return LLVM::ConstantOp::create(b, loc, type, b.getIntegerAttr(type, v));
  }
  Value select(Value condition, Value x, Value y) {
    return LLVM::SelectOp::create(b, loc, condition, x, y);
  }
  /// The (window, head) items of `count` (windows, or images of tokens).
  Value itemsOf(Value count) {
    int64_t perCount = config.heads;
    if (config.hasTokenLayout())
      perCount *= config.windowsPerImage();
    return LLVM::MulOp::create(b, loc, count, constant(i64, perCount));
  }
  LLVM::LLVMFuncOp declare(StringRef name, Type result, ArrayRef<Type> params);
  /// Returns 1 from `entry` unless its arguments are valid; continues in a
  /// new block of valid arguments.
  void checkArguments(Block *entry);
  /// Calls the kernel on the ABI arguments `arguments`; for a kernel of
  /// rpe-item-range, on the items [begin, end).
  void callKernel(ValueRange arguments, Value begin, Value end);
  /// `GOMP_parallel(worker, &arguments, 0, 0)`: the team of the calling
  /// thread (its OMP_NUM_THREADS, or torch.set_num_threads in PyTorch)
  /// splits the items evenly.
  void runOnTeam(ValueRange arguments);

  ModuleOp module;
  const KernelConfig &config;
  KernelAbi abi;
  LLVM::LLVMFuncOp kernel;
  OpBuilder b;
  Location loc;
  Type ptr, i64, i32;
  LLVM::GlobalOp zeroPadding;
};
} // namespace

LLVM::LLVMFuncOp EntryPointBuilder::declare(StringRef name, Type result,
                                            ArrayRef<Type> params) {
  if (auto existing = module.lookupSymbol<LLVM::LLVMFuncOp>(name))
    return existing;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(module.getBody());
  return LLVM::LLVMFuncOp::create(b, loc, name,
                                  LLVM::LLVMFunctionType::get(result, params));
}

void EntryPointBuilder::checkArguments(Block *entry) {
  // Invalid: a NULL buffer that may not be NULL, a negative count, or
  // (shifted windows) a number of windows that is not a whole number of
  // images.
  Region &body = *entry->getParent();
  Block *invalid = b.createBlock(&body);
  Block *valid = b.createBlock(&body);
  b.setInsertionPointToStart(entry);
  Type i1 = b.getI1Type();
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
}

void EntryPointBuilder::callKernel(ValueRange arguments, Value begin,
                                   Value end) {
  Value count = arguments[abi.countIndex()];
  SmallVector<Value> args;
  for (const AbiArgument *operand : abi.kernelOperands()) {
    Value buffer =
        arguments[abi.argumentOfKernelOperand(*operand->kernelOperand)];
    if (operand->role == ArgumentRole::Padding) {
      // A NULL pad_qkv means zeros: a constant passed instead.
      Value isNull =
          LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, buffer,
                               LLVM::ZeroOp::create(b, loc, ptr));
      Value zeros = LLVM::AddressOfOp::create(b, loc, zeroPadding);
      buffer = select(isNull, zeros, buffer);
    }
    appendDescriptor(b, loc, buffer, count, operand->getOperandShape(), args);
  }
  if (begin)
    args.append({begin, end});
  LLVM::CallOp::create(b, loc, kernel, args);
}

void EntryPointBuilder::runOnTeam(ValueRange arguments) {
  MLIRContext *context = module.getContext();
  SmallVector<Type> fields(arguments.getTypes());
  auto frame = LLVM::LLVMStructType::getLiteral(context, fields);

  // The caller stores its arguments in a frame on its stack ...
  Value address = LLVM::AllocaOp::create(b, loc, ptr, frame, constant(i64, 1));
  for (auto [i, argument] : llvm::enumerate(arguments)) {
    Value field =
        LLVM::GEPOp::create(b, loc, ptr, frame, address,
                            ArrayRef<LLVM::GEPArg>{0, static_cast<int32_t>(i)});
    LLVM::StoreOp::create(b, loc, argument, field);
  }
  auto voidType = LLVM::LLVMVoidType::get(context);
  auto parallel = declare("GOMP_parallel", voidType, {ptr, ptr, i32, i32});
  auto threadNum = declare("omp_get_thread_num", i32, {});
  auto numThreads = declare("omp_get_num_threads", i32, {});

  // ... which each thread of the team reads in the worker.
  LLVM::LLVMFuncOp worker;
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(module.getBody());
    worker = LLVM::LLVMFuncOp::create(
        b, loc, config.name + "_worker",
        LLVM::LLVMFunctionType::get(voidType, {ptr}), LLVM::Linkage::Internal);
    Block *body = worker.addEntryBlock(b);
    b.setInsertionPointToStart(body);
    SmallVector<Value> loaded;
    for (auto [i, type] : llvm::enumerate(fields)) {
      Value field = LLVM::GEPOp::create(
          b, loc, ptr, frame, body->getArgument(0),
          ArrayRef<LLVM::GEPArg>{0, static_cast<int32_t>(i)});
      loaded.push_back(LLVM::LoadOp::create(b, loc, type, field));
    }
    // Thread t of n takes items [t q + min(t, r), (t + 1) q + min(t + 1, r))
    // of the windows x heads, q = items / n, r = items % n.
    Value items = itemsOf(loaded[abi.countIndex()]);
    auto call = [&](LLVM::LLVMFuncOp f) {
      Value v = LLVM::CallOp::create(b, loc, f, ValueRange{}).getResult();
      return LLVM::SExtOp::create(b, loc, i64, v).getResult();
    };
    Value t = call(threadNum), n = call(numThreads);
    Value q = LLVM::UDivOp::create(b, loc, items, n);
    Value r = LLVM::URemOp::create(b, loc, items, n);
    auto firstItem = [&](Value thread) -> Value {
      Value below =
          LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ult, thread, r);
      return LLVM::AddOp::create(b, loc, LLVM::MulOp::create(b, loc, thread, q),
                                 select(below, thread, r));
    };
    Value next = LLVM::AddOp::create(b, loc, t, constant(i64, 1));
    callKernel(loaded, firstItem(t), firstItem(next));
    LLVM::ReturnOp::create(b, loc, ValueRange{});
  }
  Value function = LLVM::AddressOfOp::create(b, loc, worker);
  LLVM::CallOp::create(
      b, loc, parallel,
      ValueRange{function, address, constant(i32, 0), constant(i32, 0)});
}

LogicalResult EntryPointBuilder::build() {
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
  checkArguments(entry);

  // The fused kernels compute a range of items (rpe-item-range); the
  // unfused lowering takes the buffers only.
  bool ranged = config.fuse;
  size_t descriptorArgs = 0;
  for (const AbiArgument *operand : abi.kernelOperands())
    descriptorArgs += 3 + 2 * operand->getOperandShape().size();
  size_t expected = descriptorArgs + (ranged ? 2 : 0);
  if (kernel.getNumArguments() != expected)
    return kernel.emitError("unexpected kernel signature: ")
           << kernel.getNumArguments() << " arguments, " << expected
           << " expected";

  ValueRange arguments = entry->getArguments();
  if (ranged && config.threadRuntime() == ThreadRuntime::GnuOpenMP) {
    runOnTeam(arguments);
  } else if (ranged) {
    callKernel(arguments, constant(i64, 0),
               itemsOf(arguments[abi.countIndex()]));
  } else {
    callKernel(arguments, Value(), Value());
  }
  LLVM::ReturnOp::create(b, loc, ValueRange{constant(i32, 0)});
  return success();
}

static LogicalResult emitEntryPoint(ModuleOp module,
                                    const KernelConfig &config) {
  auto kernel = module.lookupSymbol<LLVM::LLVMFuncOp>(config.name + "_kernel");
  if (!kernel)
    return module.emitError("lowered kernel function not found");
  for (auto func : module.getOps<LLVM::LLVMFuncOp>())
    if (!func.isExternal())
      func.setLinkage(LLVM::Linkage::Internal);
  return EntryPointBuilder(module, config, kernel).build();
}

LogicalResult mlir::rpe::lowerToLLVMDialect(ModuleOp module,
                                            const KernelConfig &config) {
  PassManager pm(module.getContext());
  CpuPipelineOptions options;
  options.parallel = config.threadRuntime() == ThreadRuntime::LlvmOpenMP;
  options.itemRange = config.fuse;
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
