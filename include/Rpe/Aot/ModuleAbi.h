//===- ModuleAbi.h - C ABI of a module compiled ahead of time ---*- C++ -*-===//
//-*-===//
//
// `swin-aot --input=model.mlir` compiles a whole module (a model exported
// by torch-mlir, say) into a library whose entry points are its public
// functions, each twice: MLIR's C interface
// (`_mlir_ciface_F`, memref descriptors, a result the caller frees) and a
// plain C function (`PREFIX_F`, one pointer per tensor, results written
// into the caller's buffers). A function the plain entry point cannot
// take (a dynamic extent, or a memref argument: a buffer the caller
// passes to be read or written in place) has MLIR's C interface only. This
// table is the one description of them:
// the entry points the lowering adds (ModuleEntryPoint.cpp), the C header
// (ModuleHeader.cpp) and the JSON description are all derived from it.
//
//===----------------------------------------------------------------------===//

#ifndef RPE_AOT_MODULEABI_H
#define RPE_AOT_MODULEABI_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mlir::rpe {

/// Bumped whenever the entry points or the description change in a way a
/// caller built against an older one would get wrong.
inline constexpr int kModuleAbiVersion = 1;

/// Whether a tensor is passed to a function or returned by it, or a
/// buffer (a memref argument) is passed for the function to read or write
/// in place.
enum class ModuleValueRole { Input, Result, Buffer };

/// The spelling of a role in the description: `input`, `result`,
/// `buffer`.
StringRef stringifyModuleValueRole(ModuleValueRole role);

/// A tensor an exported function takes or returns, or a buffer it takes: a
/// contiguous row-major buffer; its extents are static where the plain
/// entry point takes it.
struct ModuleAbiValue {
  /// `argN` (the function's N-th argument) or `resultN`.
  std::string name;
  ModuleValueRole role;
  /// The element type as the description spells it (`f32`, `bf16`, `i64`)
  /// and as C does (`float`, `uint16_t`, `int64_t`), and its size.
  std::string dtype;
  std::string cElementType;
  int64_t elementBytes = 0;
  /// A dynamic extent is ShapedType::kDynamic.
  SmallVector<int64_t> shape;

  bool hasStaticShape() const;
  /// The number of elements of a static shape.
  int64_t getNumElements() const;
  int64_t getSizeInBytes() const { return getNumElements() * elementBytes; }
  /// The parameter type of a pointer to it: `const float *` for an input,
  /// `float *` for a result or a buffer.
  std::string cType() const;
};

/// A public function of the module.
struct ModuleFunctionAbi {
  /// Its symbol in the module.
  std::string function;
  /// The plain C entry point: `PREFIX_FUNCTION`; empty when the function
  /// has a dynamic extent or a buffer argument (MLIR's C interface only).
  std::string entryPoint;
  /// The arguments (inputs and buffers, in order), then the results (in
  /// order): the plain entry point's parameters.
  SmallVector<ModuleAbiValue> values;

  bool hasEntryPoint() const { return !entryPoint.empty(); }
  /// MLIR's C interface of the function: `_mlir_ciface_FUNCTION`.
  std::string getCInterfaceName() const;
  /// The arguments: inputs and buffers.
  SmallVector<const ModuleAbiValue *> arguments() const;
  SmallVector<const ModuleAbiValue *> inputs() const;
  SmallVector<const ModuleAbiValue *> results() const;
  /// The plain entry point's C declaration `int PREFIX_F(...)`, without
  /// the semicolon.
  std::string cDeclaration() const;
};

/// What a compiled module exports.
struct ModuleAbi {
  /// The prefix of the plain entry points, of the header's macros and
  /// types (in upper case for the macros).
  std::string name;
  /// The public functions (those with a body), in the module's order.
  SmallVector<ModuleFunctionAbi> functions;
};

/// Whether `name` is a C identifier (and so a possible symbol of an entry
/// point).
bool isCIdentifier(StringRef name);

/// The ABI of `module`'s public functions, with plain entry points named
/// `prefix_FUNCTION` (`prefix` a C identifier) for those whose arguments
/// and results are all tensors of a static shape. Fails with an error
/// located at the culprit where there is no such function, a function's
/// name is not a C identifier, an entry point's name is taken, or an
/// argument is neither a ranked tensor nor a memref of the identity layout,
/// a result not a ranked tensor, or either of an element type C does not
/// have (C has f16, bf16, f32, f64, i8, i16, i32, i64).
FailureOr<ModuleAbi> getModuleAbi(ModuleOp module, StringRef prefix);

/// Writes the machine-readable description of the module's entry points
/// (JSON, format `swin-opt-module-abi`).
void writeModuleAbiDescription(const ModuleAbi &abi, llvm::raw_ostream &os);

} // namespace mlir::rpe

#endif // RPE_AOT_MODULEABI_H
