//===- ItemRange.cpp - rpe-item-range -------------------------------------===//
//
// Gives a fused kernel's function a `[begin, end)` range of (window, head)
// items to compute, so that the caller's thread pool schedules the work.
// The item loop that rpe-lower-fused-attention marks rpe.item_loop (the
// forward kernels' scf.parallel, the gradient's scf.for) runs from 0 to
// `items` by 1; the function gets `begin` and `end` as its last two
// arguments and the loop runs from `begin` to min(end, items), so that a
// range past the end computes nothing extra. The marker goes; the body and
// the loop's lowering (sequential, without OpenMP) are the pipeline's.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Passes.h"
#include "Rpe/RpeDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

namespace mlir::rpe {
#define GEN_PASS_DEF_RPEITEMRANGE
#include "Rpe/Passes.h.inc"
} // namespace mlir::rpe

using namespace mlir;
using namespace mlir::rpe;

/// The bounds of an item loop: an scf.parallel (the forward kernels, whose
/// items are independent) or an scf.for (the gradient's, whose items add
/// to one table gradient).
struct ItemLoopBounds {
  Operation *loop = nullptr;
  Value lower, upper, step;
  bool oneDimensional = true;

  static ItemLoopBounds of(Operation *op) {
    ItemLoopBounds bounds;
    bounds.loop = op;
    if (auto parallel = dyn_cast<scf::ParallelOp>(op)) {
      bounds.oneDimensional = parallel.getNumLoops() == 1;
      bounds.lower = parallel.getLowerBound()[0];
      bounds.upper = parallel.getUpperBound()[0];
      bounds.step = parallel.getStep()[0];
    } else if (auto loop = dyn_cast<scf::ForOp>(op)) {
      bounds.lower = loop.getLowerBound();
      bounds.upper = loop.getUpperBound();
      bounds.step = loop.getStep();
    }
    return bounds;
  }

  void setRange(Value begin, Value end) {
    if (auto parallel = dyn_cast<scf::ParallelOp>(loop)) {
      parallel.getLowerBoundMutable().assign(begin);
      parallel.getUpperBoundMutable().assign(end);
      return;
    }
    auto forLoop = cast<scf::ForOp>(loop);
    forLoop.getLowerBoundMutable().assign(begin);
    forLoop.getUpperBoundMutable().assign(end);
  }
};

/// Appends `begin` and `end` to `func` and restricts its one item loop
/// (from 0 to `items` by 1) to them.
static LogicalResult restrictToRange(func::FuncOp func, Operation *loop) {
  ItemLoopBounds bounds = ItemLoopBounds::of(loop);
  if (!bounds.step || !bounds.oneDimensional ||
      !matchPattern(bounds.lower, m_Zero()) ||
      !matchPattern(bounds.step, m_One()))
    return loop->emitOpError("marked 'rpe.item_loop' must be one loop from 0 "
                             "by 1");
  MLIRContext *context = func.getContext();
  Type index = IndexType::get(context);
  unsigned first = func.getNumArguments();
  if (failed(func.insertArguments(
          {first, first}, {index, index},
          {DictionaryAttr::get(context), DictionaryAttr::get(context)},
          {loop->getLoc(), loop->getLoc()})))
    return failure();
  Value begin = func.getArgument(first), end = func.getArgument(first + 1);
  OpBuilder b(loop);
  // min(end, items): a caller's range past the end computes nothing extra;
  // a begin at or past the upper bound runs no iteration.
  Value upper = arith::MinUIOp::create(b, loop->getLoc(), end, bounds.upper);
  bounds.setRange(begin, upper);
  RpeDialect::ItemLoopAttrHelper(context).removeAttr(loop);
  return success();
}

namespace {
struct RpeItemRangePass : public rpe::impl::RpeItemRangeBase<RpeItemRangePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    RpeDialect::ItemLoopAttrHelper itemLoop(&getContext());
    for (auto func : module.getOps<func::FuncOp>()) {
      SmallVector<Operation *> loops;
      func.walk([&](Operation *op) {
        if (itemLoop.isAttrPresent(op))
          loops.push_back(op);
      });
      if (loops.empty())
        continue;
      if (loops.size() > 1) {
        func.emitOpError("holds ")
            << loops.size()
            << " item loops; rpe-item-range gives a function one range";
        return signalPassFailure();
      }
      if (!SymbolTable::symbolKnownUseEmpty(func, module)) {
        func.emitOpError("is called in the module; rpe-item-range would "
                         "change its signature under its callers");
        return signalPassFailure();
      }
      if (failed(restrictToRange(func, loops.front())))
        return signalPassFailure();
    }
  }
};
} // namespace
