//===- DestinationStyle.h - what the rpe kernel ops share -------*- C++ -*-===//
//
// rpe.fused_window_attention and rpe.matmul are destination-style ops that
// overwrite their destination: on tensors they return it, on memrefs they
// write it. Their verification, memory effects and bufferization share
// these helpers. Private to lib/Rpe.
//
//===----------------------------------------------------------------------===//

#ifndef RPE_LIB_DESTINATIONSTYLE_H
#define RPE_LIB_DESTINATIONSTYLE_H

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::rpe::detail {

/// All operands ranked tensors (one result, the destination's type) or all
/// memrefs (no result).
LogicalResult verifyTensorsOrMemrefs(DestinationStyleOpInterface op);

/// On memrefs: the destination is written, every other operand read.
void getDestinationEffects(
    DestinationStyleOpInterface op,
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects);

/// The destination is the result's buffer.
bufferization::AliasingValueList
getDestinationAliases(DestinationStyleOpInterface op, OpOperand &operand);

/// The buffers of all operands, in order (the destination's last); the
/// rewriter's insertion point is then before `op`.
FailureOr<SmallVector<Value>>
getOperandBuffers(Operation *op, RewriterBase &rewriter,
                  const bufferization::BufferizationOptions &options,
                  bufferization::BufferizationState &state);

} // namespace mlir::rpe::detail

#endif // RPE_LIB_DESTINATIONSTYLE_H
