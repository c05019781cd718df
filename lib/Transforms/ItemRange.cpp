//===- ItemRange.cpp - rpe-item-range -------------------------------------===//
//
// Gives a fused kernel's function a `[begin, end)` range of (window, head)
// items to compute, so that the caller's thread pool schedules the work
// (see the pass description in Passes.td).
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

/// Appends `begin` and `end` to `func` and restricts `loop` (its one item
/// loop, from 0 to `items` by 1) to them.
static LogicalResult restrictToRange(func::FuncOp func, scf::ParallelOp loop) {
  if (loop.getNumLoops() != 1 ||
      !matchPattern(loop.getLowerBound()[0], m_Zero()) ||
      !matchPattern(loop.getStep()[0], m_One()))
    return loop.emitOpError("marked 'rpe.item_loop' must be one loop from 0 "
                            "by 1");
  MLIRContext *context = func.getContext();
  Type index = IndexType::get(context);
  unsigned first = func.getNumArguments();
  if (failed(func.insertArguments(
          {first, first}, {index, index},
          {DictionaryAttr::get(context), DictionaryAttr::get(context)},
          {loop.getLoc(), loop.getLoc()})))
    return failure();
  Value begin = func.getArgument(first), end = func.getArgument(first + 1);
  OpBuilder b(loop);
  // min(end, items): a caller's range past the end computes nothing extra;
  // a begin at or past the upper bound runs no iteration.
  Value upper =
      arith::MinUIOp::create(b, loop.getLoc(), end, loop.getUpperBound()[0]);
  loop.getLowerBoundMutable().assign(begin);
  loop.getUpperBoundMutable().assign(upper);
  RpeDialect::ItemLoopAttrHelper(context).removeAttr(loop);
  return success();
}

namespace {
struct RpeItemRangePass : public rpe::impl::RpeItemRangeBase<RpeItemRangePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    RpeDialect::ItemLoopAttrHelper itemLoop(&getContext());
    for (auto func : module.getOps<func::FuncOp>()) {
      SmallVector<scf::ParallelOp> loops;
      func.walk([&](scf::ParallelOp loop) {
        if (itemLoop.isAttrPresent(loop))
          loops.push_back(loop);
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
