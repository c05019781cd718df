//===- KernelEnums.h - the choices of the kernel builders -------*- C++ -*-===//
//
// The enums of KernelEnums.td (KernelStrategy, KernelTarget,
// GpuBinaryFormat, OpenMPRuntime, ElementKind, Layout, Target, ArgumentRole)
// with their generated stringifyX and symbolizeX, defined in lib/Rpe
// (MLIRRpe), which every other library links; and enumOptionValues, which
// gives a command-line option of such an enum exactly those spellings.
//
//===----------------------------------------------------------------------===//

#ifndef RPE_KERNELENUMS_H
#define RPE_KERNELENUMS_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/DenseMapInfo.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>

#include "Rpe/KernelEnums.h.inc"

namespace mlir::rpe {

/// The values of a command-line option of an ODS enum (a pass, pipeline or
/// tool option): its cases, each under the name its stringify function
/// gives, so that options, IR and files spell a case one way. A modifier
/// in place of `llvm::cl::values(clEnumValN(...), ...)`:
///
///   Option<KernelStrategy> kernel{*this, "kernel", ...,
///                                 enumOptionValues(symbolizeKernelStrategy)};
///
/// `symbolize` is the enum's generated integer-to-case function; the cases
/// are those numbered densely from 0 (as this project's enums are).
/// `spell`, where given, renames each case for a tool whose options spell
/// names differently (swin-aot's `--padding=shift-then-pad`); the names it
/// returns must outlive the option.
template <typename EnumT> struct EnumOptionValues {
  std::optional<EnumT> (*symbolize)(uint32_t);
  llvm::StringRef (*spell)(llvm::StringRef) = nullptr;

  /// Called by the option's constructor (llvm::cl's modifier protocol).
  template <typename Opt> void apply(Opt &option) const {
    for (uint32_t i = 0; std::optional<EnumT> value = symbolize(i); ++i) {
      llvm::StringRef name = stringifyEnum(*value);
      option.getParser().addLiteralOption(spell ? spell(name) : name, *value,
                                          /*HelpStr=*/"");
    }
  }
};

template <typename EnumT>
EnumOptionValues<EnumT>
enumOptionValues(std::optional<EnumT> (*symbolize)(uint32_t),
                 llvm::StringRef (*spell)(llvm::StringRef) = nullptr) {
  return {symbolize, spell};
}

} // namespace mlir::rpe

#endif // RPE_KERNELENUMS_H
