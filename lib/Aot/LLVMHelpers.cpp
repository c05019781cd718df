//===- LLVMHelpers.cpp - LLVM-dialect pieces of the entry points ----------===//

#include "LLVMHelpers.h"

#include "Rpe/Aot/KernelAbi.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace mlir::rpe;

EntryPointBuilderBase::EntryPointBuilderBase(ModuleOp module, Location loc)
    : b(module.getContext()), loc(loc),
      ptr(LLVM::LLVMPointerType::get(module.getContext())), i64(b.getI64Type()),
      i32(b.getI32Type()), i1(b.getI1Type()) {
  b.setInsertionPointToEnd(module.getBody());
}

Value EntryPointBuilderBase::constant(Type type, int64_t v) {
  return LLVM::ConstantOp::create(b, loc, type, b.getIntegerAttr(type, v));
}

void mlir::rpe::appendDescriptor(OpBuilder &b, Location loc, Value ptr,
                                 Value count, ArrayRef<int64_t> shape,
                                 SmallVectorImpl<Value> &args) {
  Type i64 = b.getI64Type();
  auto constant = [&](int64_t v) -> Value {
    return LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(v));
  };
  args.append({ptr, ptr, constant(0)});
  for (int64_t extent : shape)
    args.push_back(extent == kDynamicExtent ? count : constant(extent));
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = shape.size() - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  for (int64_t stride : strides)
    args.push_back(constant(stride));
}

Value mlir::rpe::createRangesOverlap(OpBuilder &b, Location loc, Value x,
                                     Value m, Value y, Value n) {
  auto ult = [&](Value lhs, Value rhs) {
    return LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ult, lhs, rhs);
  };
  Value xFirst = ult(x, y);
  return LLVM::SelectOp::create(b, loc, xFirst,
                                ult(LLVM::SubOp::create(b, loc, y, x), m),
                                ult(LLVM::SubOp::create(b, loc, x, y), n));
}
