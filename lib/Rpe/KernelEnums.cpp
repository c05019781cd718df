//===- KernelEnums.cpp - the choices of the kernel builders ---------------===//
//
// The generated stringifyX and symbolizeX of KernelEnums.td. They live in
// the lowest library, so that swin-aot's description code (lib/Aot) and
// the passes name a kernel without linking the code generators.
//
//===----------------------------------------------------------------------===//

#include "Rpe/KernelEnums.h"

#include "llvm/ADT/StringSwitch.h"

#include "Rpe/KernelEnums.cpp.inc"
