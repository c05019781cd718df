//===- swin-opt-fuzz.cpp - libFuzzer target over the rpe front end --------===//
//
// Feeds arbitrary bytes through what swin-opt does with a user's .mlir file
// before code generation: the parser, the verifiers (rpe's and those of the
// dialects rpe IR uses), then, for modules that verify, the rpe folders and
// the target-independent rpe passes. Rejecting an input with a diagnostic is
// the expected outcome for almost every input, so diagnostics are swallowed;
// a crash, an assertion or a sanitizer report is a finding.
//
// Only the dialects rpe IR is written in are registered: the fuzzer then
// spends its time on inputs our code sees, not on upstream dialects.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Passes.h"
#include "Rpe/RpeDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <cstddef>
#include <cstdint>

using namespace mlir;

static const DialectRegistry &getRegistry() {
  static const DialectRegistry registry = [] {
    DialectRegistry r;
    r.insert<arith::ArithDialect, bufferization::BufferizationDialect,
             func::FuncDialect, linalg::LinalgDialect, math::MathDialect,
             memref::MemRefDialect, rpe::RpeDialect, scf::SCFDialect,
             tensor::TensorDialect>();
    return r;
  }();
  return registry;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // MLIR 22.1's parser (upstream, not ours) crashes on a dense array of
  // `index` (`array<index: 1>`: mlir-opt-22 too). The fuzzer would find it
  // again and again; such inputs are skipped. Remove this when the packaged
  // MLIR parses them.
  StringRef text(reinterpret_cast<const char *>(data), size);
  if (text.contains("array<index"))
    return -1;
  // So does its linalg.transpose / broadcast / reduce parser on a malformed
  // `permutation = [...]` or `dimensions = [...]` (`[0, !]`: a null
  // attribute is added; mlir-opt-22 crashes too). The raise tests' imported
  // linalg brings these ops into the seeds; skip them the same way.
  if (text.contains("permutation") || text.contains("dimensions"))
    return -1;

  // A fresh context per input: nothing (uniqued attributes, loaded dialects)
  // carries over, so every finding reproduces from its input alone. Threading
  // off: one input is small, and a single thread keeps reports readable.
  MLIRContext context(getRegistry(), MLIRContext::Threading::DISABLED);
  ScopedDiagnosticHandler swallow(&context,
                                  [](Diagnostic &) { return success(); });

  // The lexer relies on the terminating NUL that MemoryBuffer guarantees;
  // libFuzzer's bytes have none, so parse a copy.
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          StringRef(reinterpret_cast<const char *>(data), size), "input"),
      llvm::SMLoc());
  ParserConfig config(&context, /*verifyAfterParse=*/false);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, config);
  if (!module || failed(verify(*module)))
    return 0;

  // swin-opt's own order: folding first, fusion of what matches, cleanup,
  // then the unfused lowering of the rest. The verifier runs after each pass
  // so that a pass producing invalid IR is caught where it happens.
  PassManager pm(&context);
  pm.enableVerifier(true);
  pm.addPass(rpe::createRpeFoldRelativeIndex());
  pm.addPass(rpe::createRpeFuseBiasSoftmax());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(rpe::createConvertRpeToLinalg());
  (void)pm.run(*module);
  return 0;
}
