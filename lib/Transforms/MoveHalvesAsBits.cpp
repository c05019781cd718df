//===- MoveHalvesAsBits.cpp - rpe-move-halves-as-bits ---------------------===//
//
// Gathers and scatters of f16 and bf16 vectors, rewritten on their 16-bit
// integer bits. The pass's description (Passes.td) says why.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::rpe {
#define GEN_PASS_DEF_RPEMOVEHALVESASBITS
#include "Rpe/Passes.h.inc"
} // namespace mlir::rpe

using namespace mlir;

/// The vector of 16-bit integers with `type`'s shape, where `type` is a
/// vector of f16 or bf16; else null.
static VectorType bitsOf(Type type) {
  auto vector = dyn_cast<VectorType>(type);
  if (!vector || !isa<Float16Type, BFloat16Type>(vector.getElementType()))
    return nullptr;
  return vector.clone(IntegerType::get(type.getContext(), 16));
}

namespace {
struct RpeMoveHalvesAsBitsPass
    : public rpe::impl::RpeMoveHalvesAsBitsBase<RpeMoveHalvesAsBitsPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    // Post-order: the walk may erase the op it visits.
    getOperation()->walk([&](Operation *op) {
      rewriter.setInsertionPoint(op);
      auto asBits = [&](Value value) -> Value {
        return LLVM::BitcastOp::create(rewriter, op->getLoc(),
                                       bitsOf(value.getType()), value);
      };
      if (auto gather = dyn_cast<LLVM::masked_gather>(op)) {
        VectorType bits = bitsOf(gather.getType());
        if (!bits)
          return;
        // gather(ptrs, mask, passThru) = bitcast(gather_i16(ptrs, mask,
        // bitcast(passThru))).
        SmallVector<Value, 1> passThru =
            llvm::map_to_vector(gather.getPassThru(), asBits);
        Value loaded = LLVM::masked_gather::create(
            rewriter, gather.getLoc(), bits, gather.getPtrs(),
            gather.getMask(), passThru, gather.getAlignmentAttr());
        rewriter.replaceOpWithNewOp<LLVM::BitcastOp>(gather, gather.getType(),
                                                     loaded);
      } else if (auto scatter = dyn_cast<LLVM::masked_scatter>(op)) {
        if (!bitsOf(scatter.getValue().getType()))
          return;
        rewriter.modifyOpInPlace(scatter, [&] {
          scatter.getValueMutable().assign(asBits(scatter.getValue()));
        });
      }
    });
  }
};
} // namespace
