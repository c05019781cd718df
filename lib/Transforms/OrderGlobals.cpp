//===- OrderGlobals.cpp - rpe-order-globals -------------------------------===//
//
// The module's memref.globals at its start, sorted by symbol name, so that
// the order in which bufferization happened to create them (which varies
// from run to run) does not reach the compiled library.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace mlir::rpe {
#define GEN_PASS_DEF_RPEORDERGLOBALS
#include "Rpe/Passes.h.inc"
} // namespace mlir::rpe

using namespace mlir;

namespace {
struct RpeOrderGlobalsPass
    : public rpe::impl::RpeOrderGlobalsBase<RpeOrderGlobalsPass> {
  void runOnOperation() override {
    Block *body = getOperation().getBody();
    auto range = body->getOps<memref::GlobalOp>();
    SmallVector<memref::GlobalOp> globals(range.begin(), range.end());
    // Symbol names are unique in the module: the order is total.
    llvm::sort(globals, [](memref::GlobalOp a, memref::GlobalOp b) {
      return a.getSymName() < b.getSymName();
    });
    for (memref::GlobalOp global : llvm::reverse(globals))
      global->moveBefore(body, body->begin());
  }
};
} // namespace
