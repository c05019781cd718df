//===- NoPolly.cpp - Polly's plugin entry point, without Polly ------------===//
//
// Debian's LLVM links Polly into its tools: LLVMExtensions (the pass
// builder's static plugins, which MLIR's LLVM optimizer reaches) calls
// getPollyPluginInfo(), and Debian ships no static Polly library. The
// wheel's static tools (cmake/PythonWheel.cmake) get this plugin, which
// registers nothing: Polly only acts when asked to (-polly), which swin-opt
// and swin-aot never are.
//
//===----------------------------------------------------------------------===//

#include "llvm/Config/llvm-config.h"
#include "llvm/Plugins/PassPlugin.h"

llvm::PassPluginLibraryInfo getPollyPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "Polly (not in this build)",
          LLVM_VERSION_STRING, [](llvm::PassBuilder &) {}};
}
