//===- EntryPoint.cpp - the C entry point of a CPU kernel -----------------===//
//
// The rpe module is lowered by rpe-cpu-pipeline to the LLVM dialect; then
// an entry point with the ABI's C signature is added. It rejects invalid
// arguments (a NULL buffer that may not be NULL, a negative count, a count
// whose buffers would exceed 2^63 - 1 bytes, shifted windows that are not
// whole images, an output that overlaps another buffer) by returning 1
// before anything is written, expands each buffer into the memref
// descriptor of its shape, and calls the kernel. Past those checks no
// product of the count wraps: the items, the buffers' extents and every
// index into them are at most a buffer's size in bytes.
//
// A fused kernel computes a range of (window, head) items
// (rpe-item-range): the entry point runs it on the calling thread's GNU
// OpenMP team, each thread on its share of the items, or on the calling
// thread alone for every item. Every other function becomes internal.
//
// With --grad, NAME_backward calls the gradient's kernel the same way. The
// items add to one table gradient: on a team, each thread writes its own
// (in a buffer the entry point allocates: one [T, heads] per thread), and
// after a barrier the team sums them into dtable, each thread a range of
// its entries, in a fixed order: no atomics, the same sums on every call.
//
//===----------------------------------------------------------------------===//

#include "LLVMHelpers.h"

#include "Rpe/Aot.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/TargetParser/Host.h"

#include <limits>

using namespace mlir;
using namespace mlir::rpe;

int64_t mlir::rpe::getCountLimit(const KernelConfig &config,
                                 Direction direction) {
  int64_t limit = getKernelAbi(config, direction).getMaxCount();
  // Temporaries of f32 per unit of the count, each extent a factor.
  auto temporary = [&](ArrayRef<int64_t> factors) {
    int64_t bytesPerCount = 4;
    for (int64_t factor : factors)
      if (llvm::MulOverflow(bytesPerCount, factor, bytesPerCount))
        return int64_t(0);
    return std::numeric_limits<int64_t>::max() / bytesPerCount;
  };
  int64_t n = config.numTokens();
  int64_t windowsPerCount =
      config.hasTokenLayout() ? config.windowsPerImage() : 1;
  // The unfused lowering allocates, per window, the scores [heads, N, N]
  // in f32 and the windows of q, k, v [heads, N, head_dim].
  if (!config.fuse)
    limit = std::min(limit, temporary({windowsPerCount, config.heads, n,
                                       std::max(n, config.headDim)}));
  // The GPU's backward: the items' partial table gradients [items, T].
  if (direction == Direction::Backward && config.hasWarpGradient())
    limit = std::min(limit, temporary({windowsPerCount, config.heads,
                                       config.numTableRows()}));
  return limit;
}

namespace {
/// Builds the C entry point of a lowered kernel and, for the GNU OpenMP
/// runtime, the worker each thread of the team runs.
class EntryPointBuilder : EntryPointBuilderBase {
public:
  EntryPointBuilder(ModuleOp module, const KernelConfig &config,
                    Direction direction, LLVM::LLVMFuncOp kernel)
      : EntryPointBuilderBase(module, kernel.getLoc()), module(module),
        config(config), abi(getKernelAbi(config, direction)), kernel(kernel) {}

  LogicalResult build();

private:
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
  /// Whether two buffers of the ABI arguments `arguments` that must be
  /// disjoint (KernelAbi::getDisjointBuffers) overlap.
  Value anyOverlap(ValueRange arguments);
  /// Calls the kernel on the ABI arguments `arguments`; for a kernel of
  /// rpe-item-range, on the items [begin, end); with `tableGradient`
  /// writing the table's gradient there instead of to dtable.
  void callKernel(ValueRange arguments, Value begin, Value end,
                  Value tableGradient = Value());
  /// `GOMP_parallel(worker, &arguments, 0, 0)`: the team of the calling
  /// thread (its OMP_NUM_THREADS, or torch.set_num_threads in PyTorch)
  /// splits the items evenly. Backward: the threads' partial table
  /// gradients are summed by the team; nothing runs, and 2 is returned,
  /// when their buffer cannot be allocated.
  void runOnTeam(ValueRange arguments);
  /// [t q + min(t, r), ...): the first of `total` things thread `thread`
  /// of `threads` takes, q = total / threads, r = total % threads.
  Value firstOfShare(Value total, Value threads, Value thread);
  /// Backward, in the worker: dtable[e] = sum of the `threads` partial
  /// gradients at `partials`, for this thread's share of the entries.
  void sumTableGradients(ValueRange arguments, Value partials, Value thread,
                         Value threads);
  int64_t tableEntries() const { return config.numTableRows() * config.heads; }

  ModuleOp module;
  const KernelConfig &config;
  KernelAbi abi;
  LLVM::LLVMFuncOp kernel;
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

Value EntryPointBuilder::anyOverlap(ValueRange arguments) {
  Value count = arguments[abi.countIndex()];
  // Each buffer's first byte and size, as integers. (Where one count's
  // buffer does not fit in int64_t, the count limit is 0.)
  DenseMap<unsigned, std::pair<Value, Value>> spans;
  auto span = [&](unsigned i) {
    auto [it, inserted] = spans.try_emplace(i);
    if (inserted) {
      const AbiArgument &argument = abi.arguments[i];
      Value start = LLVM::PtrToIntOp::create(b, loc, i64, arguments[i]);
      Value bytes = constant(i64, argument.getSizeInBytes(1).value_or(0));
      Value size = argument.hasCountExtent()
                       ? LLVM::MulOp::create(b, loc, count, bytes)
                       : bytes;
      it->second = {start, size};
    }
    return it->second;
  };
  Value any = constant(i1, 0);
  for (auto [i, j] : abi.getDisjointBuffers()) {
    auto [x, m] = span(i);
    auto [y, n] = span(j);
    Value overlap = createRangesOverlap(b, loc, x, m, y, n);
    // A NULL pad_qkv is zeros of the entry point's own.
    Value null = LLVM::ZeroOp::create(b, loc, ptr);
    for (unsigned k : {i, j})
      if (abi.arguments[k].nullable)
        overlap = LLVM::AndOp::create(
            b, loc, i1, overlap,
            LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne, arguments[k],
                                 null));
    any = LLVM::OrOp::create(b, loc, i1, any, overlap);
  }
  return any;
}

void EntryPointBuilder::checkArguments(Block *entry) {
  // Invalid: a NULL buffer that may not be NULL, a negative count, a count
  // above the limit (buffers of more than 2^63 - 1 bytes, whose extents
  // would wrap), (shifted windows) a number of windows that is not a whole
  // number of images, or an output that overlaps another buffer.
  Region &body = *entry->getParent();
  Block *invalid = b.createBlock(&body);
  Block *valid = b.createBlock(&body);
  b.setInsertionPointToStart(entry);
  Value count = entry->getArgument(abi.countIndex());
  Value null = LLVM::ZeroOp::create(b, loc, ptr);
  Value bad = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::slt, count,
                                   constant(i64, 0));
  Value tooLarge =
      LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::sgt, count,
                           constant(i64, getCountLimit(config, abi.direction)));
  bad = LLVM::OrOp::create(b, loc, i1, bad, tooLarge);
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
  bad = LLVM::OrOp::create(b, loc, i1, bad, anyOverlap(entry->getArguments()));
  LLVM::CondBrOp::create(b, loc, bad, invalid, valid);

  b.setInsertionPointToStart(invalid);
  LLVM::ReturnOp::create(b, loc, ValueRange{constant(i32, 1)});
  b.setInsertionPointToStart(valid);
}

void EntryPointBuilder::callKernel(ValueRange arguments, Value begin, Value end,
                                   Value tableGradient) {
  Value count = arguments[abi.countIndex()];
  SmallVector<Value> args;
  for (const AbiArgument *operand : abi.kernelOperands()) {
    Value buffer =
        arguments[abi.argumentOfKernelOperand(*operand->kernelOperand)];
    if (operand->role == ArgumentRole::TableGradient && tableGradient)
      buffer = tableGradient;
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

Value EntryPointBuilder::firstOfShare(Value total, Value threads,
                                      Value thread) {
  Value q = LLVM::UDivOp::create(b, loc, total, threads);
  Value r = LLVM::URemOp::create(b, loc, total, threads);
  Value below =
      LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ult, thread, r);
  return LLVM::AddOp::create(b, loc, LLVM::MulOp::create(b, loc, thread, q),
                             select(below, thread, r));
}

void EntryPointBuilder::sumTableGradients(ValueRange arguments, Value partials,
                                          Value thread, Value threads) {
  auto sum =
      module.lookupSymbol<LLVM::LLVMFuncOp>(getTableGradientSumName(config));
  Value entries = constant(i64, tableEntries());
  Value next = LLVM::AddOp::create(b, loc, thread, constant(i64, 1));
  SmallVector<Value> args;
  // partials: memref<threads x entries>, dtable: memref<entries>.
  appendDescriptor(b, loc, partials, threads, {kDynamicExtent, tableEntries()},
                   args);
  Value dtable;
  for (auto [i, argument] : llvm::enumerate(abi.arguments))
    if (argument.role == ArgumentRole::TableGradient)
      dtable = arguments[i];
  appendDescriptor(b, loc, dtable, Value(), {tableEntries()}, args);
  args.push_back(firstOfShare(entries, threads, thread));
  args.push_back(firstOfShare(entries, threads, next));
  LLVM::CallOp::create(b, loc, sum, args);
}

void EntryPointBuilder::runOnTeam(ValueRange arguments) {
  MLIRContext *context = module.getContext();
  bool backward = abi.direction == Direction::Backward;
  auto voidType = LLVM::LLVMVoidType::get(context);
  auto parallel = declare("GOMP_parallel", voidType, {ptr, ptr, i32, i32});
  auto threadNum = declare("omp_get_thread_num", i32, {});
  auto numThreads = declare("omp_get_num_threads", i32, {});
  auto toI64 = [&](Value v) {
    return LLVM::SExtOp::create(b, loc, i64, v).getResult();
  };

  // Backward: a [T, heads] table gradient per thread of a team of at most
  // omp_get_max_threads() threads (the team is asked for that many).
  SmallVector<Value> fields(arguments);
  Value teamSize = constant(i32, 0), partials;
  if (backward) {
    auto maxThreads = declare("omp_get_max_threads", i32, {});
    auto malloc = declare("malloc", ptr, {i64});
    teamSize =
        LLVM::CallOp::create(b, loc, maxThreads, ValueRange{}).getResult();
    Block *current = b.getInsertionBlock();
    Region &body = *current->getParent();
    Block *failed = b.createBlock(&body);
    LLVM::ReturnOp::create(b, loc, ValueRange{constant(i32, 2)});
    Block *sized = b.createBlock(&body);
    Block *allocated = b.createBlock(&body);
    // A team whose partial gradients exceed 2^63 - 1 bytes cannot have
    // them either.
    b.setInsertionPointToEnd(current);
    int64_t partialBytes = tableEntries() * 4;
    Value tooLarge = LLVM::ICmpOp::create(
        b, loc, LLVM::ICmpPredicate::sgt, toI64(teamSize),
        constant(i64, std::numeric_limits<int64_t>::max() / partialBytes));
    LLVM::CondBrOp::create(b, loc, tooLarge, failed, sized);
    b.setInsertionPointToStart(sized);
    Value bytes = LLVM::MulOp::create(b, loc, toI64(teamSize),
                                      constant(i64, partialBytes));
    partials =
        LLVM::CallOp::create(b, loc, malloc, ValueRange{bytes}).getResult();
    Value isNull =
        LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, partials,
                             LLVM::ZeroOp::create(b, loc, ptr));
    LLVM::CondBrOp::create(b, loc, isNull, failed, allocated);
    b.setInsertionPointToStart(allocated);
    fields.push_back(partials);
  }
  SmallVector<Type> fieldTypes(ValueRange(fields).getTypes());
  auto frame = LLVM::LLVMStructType::getLiteral(context, fieldTypes);

  // The caller stores its arguments in a frame on its stack ...
  Value address = LLVM::AllocaOp::create(b, loc, ptr, frame, constant(i64, 1));
  for (auto [i, field] : llvm::enumerate(fields)) {
    Value slot =
        LLVM::GEPOp::create(b, loc, ptr, frame, address,
                            ArrayRef<LLVM::GEPArg>{0, static_cast<int32_t>(i)});
    LLVM::StoreOp::create(b, loc, field, slot);
  }

  // ... which each thread of the team reads in the worker.
  LLVM::LLVMFuncOp worker;
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(module.getBody());
    worker = LLVM::LLVMFuncOp::create(
        b, loc, abi.name + "_worker",
        LLVM::LLVMFunctionType::get(voidType, {ptr}), LLVM::Linkage::Internal);
    Block *body = worker.addEntryBlock(b);
    b.setInsertionPointToStart(body);
    SmallVector<Value> loaded;
    for (auto [i, type] : llvm::enumerate(fieldTypes)) {
      Value slot = LLVM::GEPOp::create(
          b, loc, ptr, frame, body->getArgument(0),
          ArrayRef<LLVM::GEPArg>{0, static_cast<int32_t>(i)});
      loaded.push_back(LLVM::LoadOp::create(b, loc, type, slot));
    }
    // Thread t of n takes its even share of the windows x heads.
    Value items = itemsOf(loaded[abi.countIndex()]);
    auto call = [&](LLVM::LLVMFuncOp f) {
      return toI64(LLVM::CallOp::create(b, loc, f, ValueRange{}).getResult());
    };
    Value t = call(threadNum), n = call(numThreads);
    Value next = LLVM::AddOp::create(b, loc, t, constant(i64, 1));
    Value begin = firstOfShare(items, n, t), end = firstOfShare(items, n, next);
    if (!backward) {
      callKernel(loaded, begin, end);
    } else {
      Value teamPartials = loaded.back();
      Value own =
          LLVM::GEPOp::create(b, loc, ptr, b.getF32Type(), teamPartials,
                              ValueRange{LLVM::MulOp::create(
                                  b, loc, t, constant(i64, tableEntries()))});
      callKernel(loaded, begin, end, own);
      // Every partial is written before any is summed.
      LLVM::CallOp::create(b, loc, declare("GOMP_barrier", voidType, {}),
                           ValueRange{});
      sumTableGradients(loaded, teamPartials, t, n);
    }
    LLVM::ReturnOp::create(b, loc, ValueRange{});
  }
  Value function = LLVM::AddressOfOp::create(b, loc, worker);
  LLVM::CallOp::create(
      b, loc, parallel,
      ValueRange{function, address, teamSize, constant(i32, 0)});
  if (backward)
    LLVM::CallOp::create(b, loc, declare("free", voidType, {ptr}),
                         ValueRange{partials});
}

LogicalResult EntryPointBuilder::build() {
  if (config.isPadded() && abi.direction == Direction::Forward) {
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
      b, loc, abi.name, LLVM::LLVMFunctionType::get(i32, params));
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

static LogicalResult emitEntryPoints(ModuleOp module,
                                     const KernelConfig &config) {
  for (auto func : module.getOps<LLVM::LLVMFuncOp>())
    if (!func.isExternal())
      func.setLinkage(LLVM::Linkage::Internal);
  SmallVector<Direction, 2> directions = {Direction::Forward};
  if (config.grad)
    directions.push_back(Direction::Backward);
  for (Direction direction : directions) {
    std::string name = getEntryPointName(config, direction);
    auto kernel = module.lookupSymbol<LLVM::LLVMFuncOp>(name + "_kernel");
    if (!kernel)
      return module.emitError("lowered kernel function not found");
    if (failed(EntryPointBuilder(module, config, direction, kernel).build()))
      return failure();
  }
  return success();
}

LogicalResult mlir::rpe::lowerToLLVMDialect(ModuleOp module,
                                            const KernelConfig &config,
                                            const CpuVectorFeatures &features,
                                            TimingScope &timing) {
  PassManager pm(module.getContext());
  CpuPipelineOptions options;
  options.parallel = config.threadRuntime() == ThreadRuntime::LlvmOpenMP;
  options.itemRange = config.fuse;
  options.fuse = config.fuse;
  options.kernel = config.effectiveKernel();
  options.warpsPerBlock = config.warpsPerBlock;
  options.f32Mma = config.f32Mma;
  setCpuPipelineTarget(options, features, config.vectorWidth,
                       config.elementKind == ElementKind::BF16);
  buildCpuPipeline(pm, options);
  pm.enableTiming(timing);
  if (failed(pm.run(module)))
    return failure();
  return emitEntryPoints(module, config);
}
