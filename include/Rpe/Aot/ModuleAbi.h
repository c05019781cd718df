//===- ModuleAbi.h - C ABI of a module compiled ahead of time ---*- C++ -*-===//
//-*-===//
//
// `swin-aot --input=model.mlir` compiles a whole module (a model exported
// by torch-mlir, say) into a library whose entry points are its public
// functions, each twice: MLIR's C interface
// (`_mlir_ciface_F`, memref descriptors, a result the caller frees) and a
// plain C function (`PREFIX_F`, one pointer per tensor, results written
// into the caller's buffers). This table is the one description of them:
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

/// Whether a tensor is passed to a function or returned by it.
enum class ModuleValueRole { Input, Result };

/// The spelling of a role in the description: `input`, `result`.
StringRef stringifyModuleValueRole(ModuleValueRole role);

/// A tensor an exported function takes or returns: a contiguous row-major
/// buffer of a static shape.
struct ModuleAbiValue {
  /// `argN` (the function's N-th argument) or `resultN`.
  std::string name;
  ModuleValueRole role;
  /// The element type as the description spells it (`f32`, `bf16`, `i64`)
  /// and as C does (`float`, `uint16_t`, `int64_t`), and its size.
  std::string dtype;
  std::string cElementType;
  int64_t elementBytes = 0;
  SmallVector<int64_t> shape;

  int64_t getNumElements() const;
  int64_t getSizeInBytes() const { return getNumElements() * elementBytes; }
  /// The plain entry point's parameter type: `const float *` for an
  /// input, `float *` for a result.
  std::string cType() const;
};

/// A public function of the module.
struct ModuleFunctionAbi {
  /// Its symbol in the module.
  std::string function;
  /// The plain C entry point: `PREFIX_FUNCTION`.
  std::string entryPoint;
  /// Inputs (in argument order), then results (in result order): the
  /// plain entry point's parameters.
  SmallVector<ModuleAbiValue> values;

  /// MLIR's C interface of the function: `_mlir_ciface_FUNCTION`.
  std::string getCInterfaceName() const;
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
/// `prefix_FUNCTION` (`prefix` a C identifier). Fails with an error located
/// at the culprit where there is no such function, a function's name is
/// not a C identifier, an entry point's name is taken, or an argument or
/// result is not a ranked tensor of a static shape and of an element type
/// C has (f16, bf16, f32, f64, i8, i16, i32, i64).
FailureOr<ModuleAbi> getModuleAbi(ModuleOp module, StringRef prefix);

/// Writes the machine-readable description of the module's entry points
/// (JSON, format `swin-opt-module-abi`).
void writeModuleAbiDescription(const ModuleAbi &abi, llvm::raw_ostream &os);

} // namespace mlir::rpe

#endif // RPE_AOT_MODULEABI_H
