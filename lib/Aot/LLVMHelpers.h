//===- LLVMHelpers.h - LLVM-dialect pieces of the entry points --*- C++ -*-===//
//
// What the kernels' entry points (EntryPoint.cpp) and the modules'
// (ModuleEntryPoint.cpp) both build: memref descriptors of the caller's
// buffers, and the test whether two buffers overlap.
//
//===----------------------------------------------------------------------===//

#ifndef RPE_LIB_AOT_LLVMHELPERS_H
#define RPE_LIB_AOT_LLVMHELPERS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::rpe {

/// What the entry-point builders (EntryPoint.cpp, ModuleEntryPoint.cpp)
/// share: a builder at the end of the module's body, the location of the
/// function they wrap, the LLVM types they use and integer constants.
class EntryPointBuilderBase {
protected:
  EntryPointBuilderBase(ModuleOp module, Location loc);

  Value constant(Type type, int64_t v);

  OpBuilder b;
  Location loc;
  Type ptr, i64, i32, i1;
};

/// Appends the expanded memref descriptor of a contiguous row-major buffer
/// at `ptr` of `shape` (the dynamic extent, kDynamicExtent, is `count`):
/// allocated and aligned pointers, offset, sizes, strides.
void appendDescriptor(OpBuilder &b, Location loc, Value ptr, Value count,
                      ArrayRef<int64_t> shape, SmallVectorImpl<Value> &args);

/// Whether the byte ranges [x, x + m) and [y, y + n) (i64 addresses and
/// sizes) overlap: y <= x < y + n or x < y < x + m, tested on differences
/// rather than ends, which cannot wrap. An empty range overlaps nothing.
Value createRangesOverlap(OpBuilder &b, Location loc, Value x, Value m, Value y,
                          Value n);

} // namespace mlir::rpe

#endif // RPE_LIB_AOT_LLVMHELPERS_H
