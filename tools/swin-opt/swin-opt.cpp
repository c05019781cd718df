//===- swin-opt.cpp - the swin-opt driver ---------------------------------===//
//
// An mlir-opt with the rpe dialect, its passes and its pipelines, on top of
// every upstream dialect, pass, extension and LLVM IR translation (the GPU
// pipeline serializes to PTX through the latter).
//
//===----------------------------------------------------------------------===//

#include "Rpe/Passes.h"
#include "Rpe/RpeDialect.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::rpe::registerRpePassesAndPipelines();

  mlir::DialectRegistry registry;
  registry.insert<mlir::rpe::RpeDialect>();
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllToLLVMIRTranslations(registry);

  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "swin-opt: window attention with relative position bias\n",
      registry));
}
