//===- ProfileRuntime.cpp - the profiling runtime, linked into a module ---===//
//
// runtime/ProfileRuntime.c, compiled to LLVM bitcode when swin-aot is built
// (lib/Aot/CMakeLists.txt) and embedded here, is linked into a module that
// rpe-profile-ops instrumented, before LLVM optimizes it: the library then
// carries its own runtime, and swin-aot needs no C compiler.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Aot.h"

#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/IR/Module.h"
#include "llvm/Linker/Linker.h"
#include "llvm/Support/MemoryBuffer.h"

static const unsigned char kProfileRuntimeBitcode[] = {
#include "ProfileRuntimeBitcode.inc"
};

llvm::Error mlir::rpe::linkProfileRuntime(llvm::Module &module) {
  if (!module.getNamedGlobal("swin_prof_ops"))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "the module has no profile table: rpe-profile-ops did not run");
  llvm::StringRef bytes(reinterpret_cast<const char *>(kProfileRuntimeBitcode),
                        sizeof(kProfileRuntimeBitcode));
  llvm::Expected<std::unique_ptr<llvm::Module>> runtime =
      llvm::parseBitcodeFile(llvm::MemoryBufferRef(bytes, "ProfileRuntime.bc"),
                             module.getContext());
  if (!runtime)
    return runtime.takeError();
  // The module's target, not the host's defaults clang compiled for.
  (*runtime)->setDataLayout(module.getDataLayout());
  (*runtime)->setTargetTriple(module.getTargetTriple());
  if (llvm::Linker::linkModules(module, std::move(*runtime)))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot link the profiling runtime");
  return llvm::Error::success();
}
