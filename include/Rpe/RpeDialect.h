//===- RpeDialect.h - rpe dialect -------------------------------*- C++ -*-===//

#ifndef RPE_RPEDIALECT_H
#define RPE_RPEDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Dialect.h"

#include "Rpe/RpeOpsDialect.h.inc"

#include "Rpe/RpeEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "Rpe/RpeAttrs.h.inc"

#endif // RPE_RPEDIALECT_H
