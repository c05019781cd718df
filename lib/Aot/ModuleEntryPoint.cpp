//===- ModuleEntryPoint.cpp - a whole module's C entry points -------------===//
//
// A module's public functions are what callers call: each is marked
// llvm.emit_c_interface (where the module has not marked it), so that
// when rpe-cpu-pipeline lowers the module to the LLVM dialect,
// convert-func-to-llvm gives it MLIR's C interface (`_mlir_ciface_F`).
// Beside it, each whose tensors have static shapes gets a plain C entry
// point from its ABI (Rpe/Aot/ModuleAbi.h):
//
//   int PREFIX_F(const T *arg0, ..., T *result0, ...)
//
// which refuses a NULL pointer and result buffers that overlap (1, nothing
// written), calls the lowered function on memref descriptors of the
// caller's buffers, copies each result it returns into the caller's buffer
// and frees it, and returns 0.
//
// The results are copied rather than computed in place: the function
// allocates its results (torch-mlir's functions return fresh tensors, and
// MLIR's C interface hands them to its callers), and writing them into the
// caller's buffers would take a second, destination-passing copy of the
// function, compiled beside the first. A copy of the results costs their
// size; a model's work is its weights and activations.
//
//===----------------------------------------------------------------------===//

#include "LLVMHelpers.h"

#include "Rpe/Aot.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::rpe;

namespace {
/// Builds the plain C entry point of one exported function.
class ModuleEntryPointBuilder : EntryPointBuilderBase {
public:
  ModuleEntryPointBuilder(ModuleOp module, const ModuleFunctionAbi &abi,
                          LLVM::LLVMFuncOp function)
      : EntryPointBuilderBase(module, function.getLoc()), module(module),
        abi(abi), function(function) {}

  LogicalResult build();

private:
  /// Whether the lowered function takes the inputs as expanded memref
  /// descriptors and returns the results' descriptors (one, or a struct of
  /// them), as convert-func-to-llvm lowers tensors bufferized to
  /// identity-layout memrefs.
  LogicalResult checkSignature();
  /// Returns 1 from `entry` unless its pointers are valid; continues in a
  /// new block of valid arguments.
  void checkArguments(Block *entry);
  /// Copies each result the function returned in `returned` into its
  /// buffer among the entry point's `arguments` and frees it.
  void copyResults(Value returned, ValueRange arguments);

  ModuleOp module;
  const ModuleFunctionAbi &abi;
  LLVM::LLVMFuncOp function;
};
} // namespace

LogicalResult ModuleEntryPointBuilder::checkSignature() {
  auto type = function.getFunctionType();
  size_t expected = 0;
  for (const ModuleAbiValue *input : abi.inputs())
    expected += 3 + 2 * input->shape.size();
  // A descriptor: allocated and aligned pointers, offset, then sizes and
  // strides as arrays (none at rank 0).
  auto isDescriptor = [&](Type type, const ModuleAbiValue &value) {
    auto descriptor = dyn_cast<LLVM::LLVMStructType>(type);
    size_t fields = value.shape.empty() ? 3 : 5;
    return descriptor && descriptor.getBody().size() == fields;
  };
  SmallVector<const ModuleAbiValue *> results = abi.results();
  bool resultsMatch;
  Type returned = type.getReturnType();
  if (results.empty()) {
    resultsMatch = isa<LLVM::LLVMVoidType>(returned);
  } else if (results.size() == 1) {
    resultsMatch = isDescriptor(returned, *results.front());
  } else {
    auto all = dyn_cast<LLVM::LLVMStructType>(returned);
    resultsMatch =
        all && all.getBody().size() == results.size() &&
        llvm::all_of(llvm::zip(all.getBody(), results), [&](auto pair) {
          return isDescriptor(std::get<0>(pair), *std::get<1>(pair));
        });
  }
  if (type.getNumParams() != expected || !resultsMatch)
    return function.emitError("@")
           << abi.function
           << " was lowered to an unexpected signature: " << type
           << " (memref descriptors expected)";
  return success();
}

void ModuleEntryPointBuilder::checkArguments(Block *entry) {
  Region &body = *entry->getParent();
  Block *invalid = b.createBlock(&body);
  Block *valid = b.createBlock(&body);
  b.setInsertionPointToStart(entry);
  Value null = LLVM::ZeroOp::create(b, loc, ptr);
  Value bad = constant(i1, 0);
  for (Value argument : entry->getArguments())
    bad = LLVM::OrOp::create(
        b, loc, bad,
        LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, argument, null));
  // Results are written one after the other: two that overlap would
  // clobber each other. (An input is read before any result is written.)
  SmallVector<std::pair<Value, Value>> results;
  for (auto [value, argument] : llvm::zip(abi.values, entry->getArguments()))
    if (value.role == ModuleValueRole::Result)
      results.push_back({LLVM::PtrToIntOp::create(b, loc, i64, argument),
                         constant(i64, value.getSizeInBytes())});
  for (size_t i = 0; i < results.size(); ++i)
    for (size_t j = i + 1; j < results.size(); ++j)
      bad = LLVM::OrOp::create(
          b, loc, bad,
          createRangesOverlap(b, loc, results[i].first, results[i].second,
                              results[j].first, results[j].second));
  LLVM::CondBrOp::create(b, loc, bad, invalid, valid);

  b.setInsertionPointToStart(invalid);
  LLVM::ReturnOp::create(b, loc, ValueRange{constant(i32, 1)});
  b.setInsertionPointToStart(valid);
}

void ModuleEntryPointBuilder::copyResults(Value returned,
                                          ValueRange arguments) {
  SmallVector<const ModuleAbiValue *> results = abi.results();
  auto freeFunction = LLVM::lookupOrCreateFreeFn(b, module);
  SmallVector<Value> freed;
  Value null = LLVM::ZeroOp::create(b, loc, ptr);
  for (auto [i, result] : llvm::enumerate(results)) {
    Value descriptor = returned;
    if (results.size() > 1)
      descriptor = LLVM::ExtractValueOp::create(
          b, loc, returned, ArrayRef<int64_t>{static_cast<int64_t>(i)});
    Value allocated = LLVM::ExtractValueOp::create(b, loc, descriptor, 0);
    Value aligned = LLVM::ExtractValueOp::create(b, loc, descriptor, 1);
    Value offset = LLVM::ExtractValueOp::create(b, loc, descriptor, 2);
    // The identity layout: the elements are contiguous from the offset.
    Value first = LLVM::GEPOp::create(
        b, loc, ptr, b.getIntegerType(8 * result->elementBytes), aligned,
        ValueRange{offset});
    Value destination = arguments[abi.inputs().size() + i];
    LLVM::MemcpyOp::create(b, loc, destination, first,
                           constant(i64, result->getSizeInBytes()),
                           /*isVolatile=*/false);
    // A function may return one buffer twice: it is freed once (free(NULL)
    // does nothing).
    Value toFree = allocated;
    for (Value earlier : freed)
      toFree = LLVM::SelectOp::create(
          b, loc,
          LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, allocated,
                               earlier),
          null, toFree);
    LLVM::CallOp::create(b, loc, *freeFunction, ValueRange{toFree});
    freed.push_back(allocated);
  }
}

LogicalResult ModuleEntryPointBuilder::build() {
  if (failed(checkSignature()))
    return failure();
  if (module.lookupSymbol(abi.entryPoint))
    return function.emitError("the C entry point of @")
           << abi.function << ", " << abi.entryPoint
           << ", is a symbol of the lowered module (choose another --name)";
  SmallVector<Type> params(abi.values.size(), ptr);
  auto entryPoint = LLVM::LLVMFuncOp::create(
      b, loc, abi.entryPoint, LLVM::LLVMFunctionType::get(i32, params));
  Block *entry = entryPoint.addEntryBlock(b);
  checkArguments(entry);

  SmallVector<Value> args;
  for (auto [value, argument] : llvm::zip(abi.values, entry->getArguments()))
    if (value.role == ModuleValueRole::Input)
      appendDescriptor(b, loc, argument, Value(), value.shape, args);
  auto call = LLVM::CallOp::create(b, loc, function, args);
  if (!abi.results().empty())
    copyResults(call.getResult(), entry->getArguments());
  LLVM::ReturnOp::create(b, loc, ValueRange{constant(i32, 0)});
  return success();
}

LogicalResult
mlir::rpe::lowerModuleToLLVMDialect(ModuleOp module, const ModuleAbi &abi,
                                    const CpuPipelineOptions &options,
                                    TimingScope &timing) {
  StringRef cInterface = LLVM::LLVMDialect::getEmitCWrapperAttrName();
  for (const ModuleFunctionAbi &function : abi.functions)
    if (auto func = module.lookupSymbol<func::FuncOp>(function.function))
      func->setAttr(cInterface, UnitAttr::get(module.getContext()));
  PassManager pm(module.getContext());
  buildCpuPipeline(pm, options);
  pm.enableTiming(timing);
  // The module is verified once, after the pipeline: verifying a whole
  // model after each of the pipeline's passes took a third of its time
  // (1.5 s of CPU for Swin-T).
  pm.enableVerifier(false);
  if (failed(pm.run(module)))
    return failure();
  TimingScope verification = timing.nest("Verification");
  if (failed(verify(module)))
    return failure();
  verification.stop();

  TimingScope entryPoints = timing.nest("Entry points");
  // The library exports MLIR's C interfaces and the plain entry points
  // only: no helper (buffer-deallocation-pipeline's public dealloc_helper,
  // say) may collide with another library's.
  llvm::StringSet<> exported;
  for (const ModuleFunctionAbi &function : abi.functions)
    exported.insert(function.getCInterfaceName());
  for (auto func : module.getOps<LLVM::LLVMFuncOp>())
    if (!func.isExternal() && !exported.contains(func.getName()))
      func.setLinkage(LLVM::Linkage::Internal);
  for (const ModuleFunctionAbi &function : abi.functions) {
    auto lowered = module.lookupSymbol<LLVM::LLVMFuncOp>(function.function);
    if (!lowered || lowered.isExternal())
      return module.emitError("@")
             << function.function << " is missing from the lowered module";
    if (!function.hasEntryPoint())
      continue;
    if (failed(ModuleEntryPointBuilder(module, function, lowered).build()))
      return failure();
  }
  return success();
}
