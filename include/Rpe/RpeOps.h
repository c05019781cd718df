//===- RpeOps.h - rpe dialect operations ------------------------*- C++ -*-===//

#ifndef RPE_RPEOPS_H
#define RPE_RPEOPS_H

#include "Rpe/RpeDialect.h"
#include "Rpe/WindowGeometry.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "Rpe/RpeInterfaces.h.inc"

#define GET_OP_CLASSES
#include "Rpe/RpeOps.h.inc"

#endif // RPE_RPEOPS_H
