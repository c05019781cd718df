//===- ExpandMemrefCopy.cpp - rpe-expand-memref-copy ----------------------===//

#include "Rpe/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::rpe {
#define GEN_PASS_DEF_RPEEXPANDMEMREFCOPY
#include "Rpe/Passes.h.inc"
} // namespace mlir::rpe

using namespace mlir;

namespace {
struct RpeExpandMemrefCopyPass
    : public rpe::impl::RpeExpandMemrefCopyBase<RpeExpandMemrefCopyPass> {
  void runOnOperation() override {
    SmallVector<memref::CopyOp> copies;
    getOperation()->walk([&](memref::CopyOp copy) { copies.push_back(copy); });
    IRRewriter rewriter(&getContext());
    for (memref::CopyOp copy : copies) {
      rewriter.setInsertionPoint(copy);
      rewriter.replaceOpWithNewOp<linalg::CopyOp>(copy, copy.getSource(),
                                                  copy.getTarget());
    }
  }
};
} // namespace
