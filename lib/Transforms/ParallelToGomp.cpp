//===- ParallelToGomp.cpp - rpe-parallel-to-gomp --------------------------===//
//
// Runs each outermost scf.parallel of a function on the calling thread's
// GNU OpenMP team, as swin-aot's kernel entry points run their items
// (lib/Aot/EntryPoint.cpp). The loop becomes
//
//   GOMP_parallel(@worker, &frame, 0, 0)
//
// where `frame`, on the caller's stack, is a struct of the values the body
// uses from outside the loop (its captures, bounds included), and the
// worker, a private function of the loop's body, is what every thread of
// the team runs:
//
//   func.func private @F.parK.OP.lineL(%frame: !llvm.ptr) {
//     the captures, loaded from %frame
//     t = omp_get_thread_num(), n = omp_get_num_threads()
//     total = the product of the loop's trip counts
//     for %i = first(t) to first(t + 1) {     t's contiguous share of
//       ivs = lower bounds + delinearized %i * steps   [0, total),
//       body                                           in blocks
//     }
//   }
//
// first(t) = t q + min(t, r), q = total / n, r = total % n: the shares
// differ by at most one iteration, as the kernels' items do. libgomp is
// the runtime that PyTorch's intra-op pool is; in a torch process a module
// and torch then keep one pool, where upstream's convert-scf-to-openmp
// (LLVM's libomp, __kmpc_fork_call) would start a second that spins beside
// it.
//
// What the frame holds and what it does not: a value defined outside the
// loop by an op without operands or memory effects (a constant,
// memref.get_global, ub.poison) is cloned into the worker, which then sees
// the constant (bounds, strides, vectors of coefficients, the weights'
// addresses) as the loop did; everything else is stored in the frame as
// its LLVM type (memrefs as their descriptors, indices as integers, through
// unrealized conversion casts that the conversions to LLVM resolve).
//
// An iteration of scf.parallel is an allocation scope: where its body
// allocates on the stack, the worker's iteration gets a memref.alloca_scope,
// so that a thread's stack does not grow with its share. Parallel loops
// nested in the body stay there and run sequentially on their thread
// (scf-to-cf lowers them as loops), and so does a parallel loop in a
// function that a worker calls: libgomp runs a nested region on a team of
// one (unless OMP_MAX_ACTIVE_LEVELS says otherwise).
//
// The worker is named after what the loop's location says it came from:
// the op that became the loop (the lowering that builds a loop gives it a
// name location, `rpe.matmul` -> matmul) and the source line, so that a
// profile names the op: @forward.par6.matmul.line413.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Passes.h"

#include "mlir/Analysis/DataLayoutAnalysis.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::rpe {
#define GEN_PASS_DEF_RPEPARALLELTOGOMP
#include "Rpe/Passes.h.inc"
} // namespace mlir::rpe

using namespace mlir;
using namespace mlir::rpe;

/// The longest op name a worker's name takes from a location.
static constexpr size_t kMaxOriginLength = 48;

/// What the loop at `loc` came from, for its worker's name: the name of a
/// name location (an op's without its dialect), then `line` and the line
/// of a file location; "" where the location says neither.
static std::string describeOrigin(Location loc) {
  std::string name;
  std::optional<unsigned> line;
  loc->walk([&](Location nested) {
    if (auto named = dyn_cast<NameLoc>(nested); named && name.empty())
      name = named.getName().str();
    else if (auto file = dyn_cast<FileLineColRange>(nested); file && !line)
      line = file.getStartLine();
    return WalkResult::advance();
  });
  // An op's name goes without its dialect; other names stay whole.
  auto [dialect, opName] = StringRef(name).split('.');
  if (!opName.empty() &&
      llvm::is_contained(loc->getContext()->getAvailableDialects(), dialect))
    name = opName.str();
  // Symbol characters only: a name location may hold any text.
  for (char &c : name)
    if (!llvm::isAlnum(c) && c != '_' && c != '.')
      c = '_';
  name.resize(std::min(name.size(), kMaxOriginLength));
  std::string origin;
  if (!name.empty())
    origin += "." + name;
  if (line)
    origin += ".line" + std::to_string(*line);
  return origin;
}

/// Whether `op` can be cloned into a worker in place of a capture: it
/// needs nothing (no operands, no regions) and does nothing (no memory
/// effects).
static bool isSinkable(Operation *op) {
  return op && op->getNumOperands() == 0 && op->getNumRegions() == 0 &&
         op->getNumResults() == 1 && isMemoryEffectFree(op);
}

/// Whether an iteration of `loop` allocates on the stack in its own scope
/// (the loop's): a sequential loop of such iterations needs a scope per
/// iteration.
static bool allocatesPerIteration(scf::ParallelOp loop) {
  WalkResult result = loop.getRegion().walk([&](Operation *op) {
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    if (!effects ||
        op->getParentWithTrait<OpTrait::AutomaticAllocationScope>() != loop)
      return WalkResult::advance();
    SmallVector<MemoryEffects::EffectInstance> instances;
    effects.getEffects(instances);
    for (const MemoryEffects::EffectInstance &instance : instances)
      if (isa<MemoryEffects::Allocate>(instance.getEffect()) &&
          instance.getResource() ==
              SideEffects::AutomaticAllocationScopeResource::get())
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return result.wasInterrupted();
}

namespace {
/// The GNU OpenMP runtime's functions the loops call.
struct GompFunctions {
  func::FuncOp parallel, threadNum, numThreads;
};

/// Rewrites the outermost parallel loops of one module.
class ParallelToGomp {
public:
  ParallelToGomp(ModuleOp module, const LLVMTypeConverter &converter)
      : module(module), symbols(module), converter(converter),
        ptr(LLVM::LLVMPointerType::get(module.getContext())),
        workerType(FunctionType::get(module.getContext(), {ptr}, {})) {}

  /// Rewrites the outermost parallel loops of `func`.
  LogicalResult convert(func::FuncOp func);

private:
  /// Rewrites `loop`, the `number`-th outermost parallel loop of `func`;
  /// its worker goes after `previous` (the function, or the worker of the
  /// loop before).
  FailureOr<func::FuncOp> convert(scf::ParallelOp loop, func::FuncOp func,
                                  unsigned number, Operation *previous);
  /// The runtime's functions, declared on first use.
  FailureOr<GompFunctions> getGompFunctions(Location loc);
  FailureOr<func::FuncOp> declare(Location loc, StringRef name,
                                  FunctionType type);
  /// The worker of `loop`: its body over the calling thread's share of its
  /// iterations, the `captures` loaded from a frame of `frameType` and the
  /// `sunk` values cloned.
  func::FuncOp buildWorker(scf::ParallelOp loop, Operation *previous,
                           StringRef name, ArrayRef<Value> captures,
                           ArrayRef<Value> sunk, LLVM::LLVMStructType frameType,
                           const GompFunctions &gomp);

  ModuleOp module;
  SymbolTable symbols;
  const LLVMTypeConverter &converter;
  Type ptr;
  FunctionType workerType;
  std::optional<GompFunctions> gompFunctions;
};
} // namespace

FailureOr<func::FuncOp> ParallelToGomp::declare(Location loc, StringRef name,
                                                FunctionType type) {
  if (Operation *existing = symbols.lookup(name)) {
    auto func = dyn_cast<func::FuncOp>(existing);
    if (func && func.getFunctionType() == type)
      return func;
    return existing->emitOpError("is not the GNU OpenMP runtime's @")
           << name << " of type " << type
           << ", which rpe-parallel-to-gomp calls";
  }
  auto func = func::FuncOp::create(loc, name, type);
  func.setPrivate();
  symbols.insert(func);
  return func;
}

FailureOr<GompFunctions> ParallelToGomp::getGompFunctions(Location loc) {
  if (gompFunctions)
    return *gompFunctions;
  MLIRContext *context = module.getContext();
  Type i32 = IntegerType::get(context, 32);
  // void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads,
  //                    unsigned flags); int omp_get_thread_num(void), ...
  auto parallel =
      declare(loc, "GOMP_parallel",
              FunctionType::get(context, {workerType, ptr, i32, i32}, {}));
  auto threadNum =
      declare(loc, "omp_get_thread_num", FunctionType::get(context, {}, i32));
  auto numThreads =
      declare(loc, "omp_get_num_threads", FunctionType::get(context, {}, i32));
  if (failed(parallel) || failed(threadNum) || failed(numThreads))
    return failure();
  gompFunctions = GompFunctions{*parallel, *threadNum, *numThreads};
  return *gompFunctions;
}

/// t q + min(t, r): the first of `total` iterations that thread t of
/// `threads` takes, q = total / threads, r = total % threads (the first r
/// threads take one more).
static Value firstOfShare(OpBuilder &b, Location loc, Value t, Value q,
                          Value r) {
  return b.createOrFold<arith::AddIOp>(
      loc, b.createOrFold<arith::MulIOp>(loc, t, q),
      b.createOrFold<arith::MinUIOp>(loc, t, r));
}

func::FuncOp ParallelToGomp::buildWorker(scf::ParallelOp loop,
                                         Operation *previous, StringRef name,
                                         ArrayRef<Value> captures,
                                         ArrayRef<Value> sunk,
                                         LLVM::LLVMStructType frameType,
                                         const GompFunctions &gomp) {
  Location loc = loop.getLoc();
  MLIRContext *context = module.getContext();
  auto worker = func::FuncOp::create(loc, name, workerType);
  worker.setPrivate();
  // Internal in LLVM too: a module's helpers never collide with another
  // library's.
  worker->setAttr("llvm.linkage",
                  LLVM::LinkageAttr::get(context, LLVM::Linkage::Internal));
  // Beside its function, in the loops' order; the symbol table makes the
  // name unique.
  symbols.insert(worker, std::next(Block::iterator(previous)));

  Block *entry = worker.addEntryBlock();
  auto b = OpBuilder::atBlockBegin(entry);
  IRMapping mapping;
  for (Value value : sunk)
    mapping.map(value, b.clone(*value.getDefiningOp())->getResult(0));
  Value frame = entry->getArgument(0);
  for (auto [i, capture] : llvm::enumerate(captures)) {
    Type type = frameType.getBody()[i];
    Value slot =
        LLVM::GEPOp::create(b, loc, ptr, frameType, frame,
                            ArrayRef<LLVM::GEPArg>{0, static_cast<int32_t>(i)});
    Value loaded = LLVM::LoadOp::create(b, loc, type, slot);
    if (type != capture.getType())
      loaded =
          UnrealizedConversionCastOp::create(b, loc, capture.getType(), loaded)
              .getResult(0);
    mapping.map(capture, loaded);
  }

  // This thread's share of the iterations, linearized.
  Type index = b.getIndexType();
  auto threadIndex = [&](func::FuncOp f) -> Value {
    Value i32 = func::CallOp::create(b, loc, f, ValueRange{}).getResult(0);
    return arith::IndexCastOp::create(b, loc, index, i32);
  };
  Value thread = threadIndex(gomp.threadNum);
  Value threads = threadIndex(gomp.numThreads);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  SmallVector<Value> lowerBounds, steps, tripCounts;
  Value total = one;
  for (auto [lower, upper, step] : llvm::zip_equal(
           loop.getLowerBound(), loop.getUpperBound(), loop.getStep())) {
    lowerBounds.push_back(mapping.lookup(lower));
    steps.push_back(mapping.lookup(step));
    // ceil(max(upper - lower, 0) / step): the steps are positive.
    Value extent = b.createOrFold<arith::SubIOp>(loc, mapping.lookup(upper),
                                                 lowerBounds.back());
    extent = b.createOrFold<arith::MaxSIOp>(loc, extent, zero);
    tripCounts.push_back(
        b.createOrFold<arith::CeilDivUIOp>(loc, extent, steps.back()));
    total = b.createOrFold<arith::MulIOp>(loc, total, tripCounts.back());
  }
  Value q = b.createOrFold<arith::DivUIOp>(loc, total, threads);
  Value r = b.createOrFold<arith::RemUIOp>(loc, total, threads);
  Value nextThread = b.createOrFold<arith::AddIOp>(loc, thread, one);
  Value begin = firstOfShare(b, loc, thread, q, r);
  Value end = firstOfShare(b, loc, nextThread, q, r);
  // The share's loop in blocks, not an scf.for: an iteration's
  // memref.alloca_scope (the body's own, or the one below) becomes blocks
  // when memrefs go to LLVM, which an scf.for's body cannot hold.
  Region &region = worker.getBody();
  Block *header = b.createBlock(&region, region.end(), {index}, {loc});
  Block *iteration = b.createBlock(&region, region.end());
  Block *exit = b.createBlock(&region, region.end());
  b.setInsertionPointToEnd(entry);
  cf::BranchOp::create(b, loc, header, ValueRange{begin});
  b.setInsertionPointToEnd(header);
  Value linear = header->getArgument(0);
  Value more =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, linear, end);
  cf::CondBranchOp::create(b, loc, more, iteration, exit);
  b.setInsertionPointToEnd(exit);
  func::ReturnOp::create(b, loc);

  // Iteration %i: the induction variables of the linear index, the
  // innermost dimension fastest.
  b.setInsertionPointToEnd(iteration);
  Value next = arith::AddIOp::create(b, loc, linear, one);
  cf::BranchOp::create(b, loc, header, ValueRange{next});
  b.setInsertionPoint(next.getDefiningOp());
  Value rest = linear;
  for (int64_t d = loop.getNumLoops() - 1; d >= 0; --d) {
    Value position = rest;
    if (d > 0) {
      position = arith::RemUIOp::create(b, loc, rest, tripCounts[d]);
      rest = arith::DivUIOp::create(b, loc, rest, tripCounts[d]);
    }
    Value offset = b.createOrFold<arith::MulIOp>(loc, position, steps[d]);
    mapping.map(loop.getInductionVars()[d],
                b.createOrFold<arith::AddIOp>(loc, lowerBounds[d], offset));
  }
  if (allocatesPerIteration(loop)) {
    auto scope = memref::AllocaScopeOp::create(b, loc, TypeRange{});
    Block *body = b.createBlock(&scope.getBodyRegion());
    memref::AllocaScopeReturnOp::create(b, loc, ValueRange{});
    b.setInsertionPointToStart(body);
  }
  for (Operation &op : loop.getBody()->without_terminator())
    b.clone(op, mapping);
  // Folding the trip counts leaves constants it did not use.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(*entry)))
    if (isOpTriviallyDead(&op))
      op.erase();
  return worker;
}

FailureOr<func::FuncOp> ParallelToGomp::convert(scf::ParallelOp loop,
                                                func::FuncOp func,
                                                unsigned number,
                                                Operation *previous) {
  if (loop.getNumReductions() != 0)
    return loop.emitOpError("with reductions cannot run on the GNU OpenMP "
                            "team: rpe-parallel-to-gomp splits iterations, "
                            "not reductions");
  FailureOr<GompFunctions> gomp = getGompFunctions(func.getLoc());
  if (failed(gomp))
    return failure();

  // The values the loop uses from outside: its bounds and its body's.
  llvm::SetVector<Value> used;
  used.insert_range(loop.getLowerBound());
  used.insert_range(loop.getUpperBound());
  used.insert_range(loop.getStep());
  getUsedValuesDefinedAbove(loop.getRegion(), used);
  SmallVector<Value> captures, sunk;
  SmallVector<Type> fields;
  for (Value value : used) {
    if (isSinkable(value.getDefiningOp())) {
      sunk.push_back(value);
      continue;
    }
    Type type = value.getType();
    Type field =
        LLVM::isCompatibleType(type) ? type : converter.convertType(type);
    if (!field || !LLVM::isCompatibleType(field))
      return loop.emitOpError("uses a value of type ")
             << type << " from outside, which rpe-parallel-to-gomp cannot "
             << "pass to its threads";
    captures.push_back(value);
    fields.push_back(field);
  }
  auto frameType =
      LLVM::LLVMStructType::getLiteral(module.getContext(), fields);

  std::string name = (func.getSymName() + ".par" + Twine(number) +
                      describeOrigin(loop.getLoc()))
                         .str();
  func::FuncOp worker =
      buildWorker(loop, previous, name, captures, sunk, frameType, *gomp);

  // The frame: allocated once, at the start of the function (an scf.for
  // around the loop is an allocation scope too, but lowers to blocks that
  // would grow the stack on every iteration); filled where the loop was.
  Location loc = loop.getLoc();
  auto b = OpBuilder::atBlockBegin(&func.getBody().front());
  Value count = LLVM::ConstantOp::create(b, loc, b.getI64Type(), 1);
  Value frame = LLVM::AllocaOp::create(b, loc, ptr, frameType, count);
  b.setInsertionPoint(loop);
  for (auto [i, capture] : llvm::enumerate(captures)) {
    Value field = capture;
    if (fields[i] != capture.getType())
      field = UnrealizedConversionCastOp::create(b, loc, fields[i], capture)
                  .getResult(0);
    Value slot =
        LLVM::GEPOp::create(b, loc, ptr, frameType, frame,
                            ArrayRef<LLVM::GEPArg>{0, static_cast<int32_t>(i)});
    LLVM::StoreOp::create(b, loc, field, slot);
  }
  // The team of the calling thread: OMP_NUM_THREADS, or what
  // omp_set_num_threads (torch.set_num_threads) set.
  Value function =
      func::ConstantOp::create(b, loc, workerType, worker.getSymName());
  Value zero = arith::ConstantIntOp::create(b, loc, 0, 32);
  func::CallOp::create(b, loc, gomp->parallel,
                       ValueRange{function, frame, /*num_threads=*/zero,
                                  /*flags=*/zero});
  loop.erase();
  return worker;
}

LogicalResult ParallelToGomp::convert(func::FuncOp func) {
  SmallVector<scf::ParallelOp> loops;
  func.walk<WalkOrder::PreOrder>([&](scf::ParallelOp loop) {
    loops.push_back(loop);
    return WalkResult::skip();
  });
  Operation *previous = func;
  for (auto [number, loop] : llvm::enumerate(loops)) {
    FailureOr<func::FuncOp> worker = convert(loop, func, number, previous);
    if (failed(worker))
      return failure();
    previous = *worker;
  }
  return success();
}

namespace {
struct RpeParallelToGompPass
    : public rpe::impl::RpeParallelToGompBase<RpeParallelToGompPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    LowerToLLVMOptions options(
        &getContext(), getAnalysis<DataLayoutAnalysis>().getAtOrAbove(module));
    LLVMTypeConverter converter(&getContext(), options);
    ParallelToGomp rewriter(module, converter);
    // The functions first: the rewrite adds workers.
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>()))
      if (failed(rewriter.convert(func)))
        return signalPassFailure();
  }
};
} // namespace
