//===- GpuModuleToBinary.cpp - rpe-gpu-module-to-binary -------------------===//
//
// Upstream gpu-module-to-binary reports failures of LLVM, libdevice and
// ptxas on the gpu.module, and MLIR then prints the whole module with the
// message. This pass runs it as a nested pipeline and re-emits those
// diagnostics without the operation.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Passes.h"

#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

namespace mlir::rpe {
#define GEN_PASS_DEF_RPEGPUMODULETOBINARY
#include "Rpe/Passes.h.inc"
} // namespace mlir::rpe

using namespace mlir;
using namespace mlir::rpe;

namespace {

/// The note Operation::emitError attaches when the context prints the
/// operation on diagnostics.
bool isOperationNote(Diagnostic &note) {
  return StringRef(note.str()).starts_with("see current operation");
}

/// A diagnostic held back while the serialization runs, to be emitted again
/// once the handler that holds it is gone.
struct HeldDiagnostic {
  Location loc;
  DiagnosticSeverity severity;
  std::string message;
  SmallVector<std::pair<Location, std::string>> notes;
};

struct RpeGpuModuleToBinaryPass
    : public rpe::impl::RpeGpuModuleToBinaryBase<RpeGpuModuleToBinaryPass> {
  using Base::Base;

  LogicalResult initialize(MLIRContext *context) override {
    serialize = OpPassManager(ModuleOp::getOperationName());
    if (format == GpuBinaryFormat::None)
      return success();
    GpuModuleToBinaryPassOptions binary;
    binary.toolkitPath = toolkit;
    binary.compilationTarget = stringifyGpuBinaryFormat(format).str();
    serialize.addPass(createGpuModuleToBinaryPass(binary));
    return success();
  }

  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<gpu::GPUDialect>();
  }

  void runOnOperation() override {
    SmallVector<HeldDiagnostic> held;
    LogicalResult result = success();
    {
      ScopedDiagnosticHandler handler(
          &getContext(), [&](Diagnostic &diag) -> LogicalResult {
            // All are held, to keep their order.
            HeldDiagnostic &copy = held.emplace_back(HeldDiagnostic{
                diag.getLocation(), diag.getSeverity(), diag.str(), {}});
            for (Diagnostic &note : diag.getNotes())
              if (!isOperationNote(note))
                copy.notes.emplace_back(note.getLocation(), note.str());
            return success();
          });
      result = runPipeline(serialize, getOperation());
    }
    for (HeldDiagnostic &diag : held) {
      std::optional<InFlightDiagnostic> emitted;
      switch (diag.severity) {
      case DiagnosticSeverity::Error:
        emitted.emplace(emitError(diag.loc, diag.message));
        break;
      case DiagnosticSeverity::Warning:
        emitted.emplace(emitWarning(diag.loc, diag.message));
        break;
      case DiagnosticSeverity::Remark:
      case DiagnosticSeverity::Note:
        emitted.emplace(emitRemark(diag.loc, diag.message));
        break;
      }
      for (auto &[loc, message] : diag.notes)
        emitted->attachNote(loc) << message;
    }
    if (failed(result))
      signalPassFailure();
  }

  /// gpu-module-to-binary, or nothing for format=none.
  OpPassManager serialize{ModuleOp::getOperationName()};
};

} // namespace
