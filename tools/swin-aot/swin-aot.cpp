//===- swin-aot.cpp - Swin window-attention kernels ahead of time ---------===//
//
//   swin-aot --window=7,7 --heads=3 --head-dim=32 [--scale=F]
//            [--resolution=H,W --shift=S|SH,SW] [--table=FILE]
//            [--dtype=f32|f16|bf16] [--target=cpu] [--name=NAME]
//            --emit=mlir|llvm|obj|so -o PATH
//
// Everything runs in-process: building the rpe module, the CPU pipeline,
// LLVM's optimizer and code generator, and lld for shared libraries.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Aot.h"
#include "Rpe/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

#include <cstring>

using namespace mlir;
using namespace mlir::rpe;
namespace cl = llvm::cl;

static cl::OptionCategory category("swin-aot options");

static cl::list<int64_t>
    windowOpt("window", cl::CommaSeparated, cl::Required,
              cl::desc("Window extents: Wh,Ww or Wd,Wh,Ww"), cl::cat(category));
static cl::opt<int64_t> headsOpt("heads", cl::Required,
                                 cl::desc("Number of attention heads"),
                                 cl::cat(category));
static cl::opt<int64_t> headDimOpt("head-dim", cl::Required,
                                   cl::desc("Channels per head"),
                                   cl::cat(category));
static cl::opt<std::string>
    scaleOpt("scale", cl::desc("Scale applied to q (default head_dim ** -0.5)"),
             cl::cat(category));
static cl::list<int64_t>
    resolutionOpt("resolution", cl::CommaSeparated,
                  cl::desc("Feature map H,W (or D,H,W) for the shift mask"),
                  cl::cat(category));
static cl::list<int64_t>
    shiftOpt("shift", cl::CommaSeparated,
             cl::desc("Cyclic shift: S for every axis, or one per axis"),
             cl::cat(category));
static cl::opt<std::string>
    tableOpt("table",
             cl::desc("Bake this table into the kernel: raw little-endian "
                      "f32 [T, heads]"),
             cl::cat(category));
static cl::opt<std::string> layoutOpt(
    "layout", cl::init("windows"),
    cl::desc("windows: q, k, v [num_windows, heads, N, head_dim]; tokens: "
             "[batch, H*W, heads*head_dim] feature maps in image order, "
             "shifted, padded and partitioned by the kernel"),
    cl::cat(category));
static cl::opt<std::string> paddingOpt(
    "padding", cl::init("pad-then-shift"),
    cl::desc("Tokens layout, resolution not a multiple of the window: "
             "pad-then-shift (HF, torchvision, Video Swin) or shift-then-pad "
             "(timm)"),
    cl::cat(category));
static cl::opt<bool> packedQkvOpt(
    "packed-qkv",
    cl::desc("Tokens layout: one qkv argument [batch, H*W, 3, heads, "
             "head_dim], the qkv projection's output as it is"),
    cl::cat(category));
static cl::opt<std::string> dtypeOpt("dtype", cl::init("f32"),
                                     cl::desc("Element type: f32, f16, bf16"),
                                     cl::cat(category));
static cl::opt<std::string> targetOpt(
    "target", cl::init("cpu"),
    cl::desc("cpu (host code, C ABI) or nvptx (NVIDIA GPU kernel, header and "
             "a CUDA driver API host runtime in C)"),
    cl::cat(category));
static cl::opt<std::string> chipOpt("chip", cl::init("sm_90"),
                                    cl::desc("GPU architecture (nvptx)"),
                                    cl::cat(category));
static cl::opt<std::string>
    cudaOpt("cuda-toolkit", cl::init(SWIN_CUDA_TOOLKIT_DEFAULT),
            cl::desc("CUDA toolkit: libdevice and ptxas (nvptx)"),
            cl::cat(category));
static cl::opt<std::string>
    cpuOpt("cpu", cl::init("native"),
           cl::desc("CPU to generate code for (native = this machine; e.g. "
                    "x86-64-v3 for any AVX2 machine)"),
           cl::cat(category));
static cl::opt<bool>
    noParallelOpt("no-parallel",
                  cl::desc("Run on the calling thread only (no OpenMP)"),
                  cl::cat(category));
static cl::opt<int64_t> vectorWidthOpt(
    "vector-width", cl::init(0),
    cl::desc("f32 lanes of the CPU micro-kernels: 8 (AVX2), 16 (AVX-512); "
             "default: 16 when --cpu=native has AVX-512, else 8"),
    cl::cat(category));
static cl::opt<bool> unfusedOpt(
    "unfused",
    cl::desc("Use the unfused reference lowering (materialized bias and "
             "mask, step-by-step softmax) instead of the fused kernel"),
    cl::cat(category));
static cl::opt<std::string> kernelOpt(
    "kernel",
    cl::desc("The fused kernel. nvptx: warps (tensor cores; the default, "
             "rows where a window does not qualify) or rows (a thread per "
             "query row). cpu: tiles (the default), or the GPU's warps or "
             "rows run on the host, to test them"),
    cl::cat(category));
static cl::opt<std::string> nameOpt("name", cl::init("swin_window_attention"),
                                    cl::desc("Name of the C entry point"),
                                    cl::cat(category));
static cl::opt<std::string>
    emitOpt("emit", cl::Required,
            cl::desc("What to write: mlir (rpe-level module); cpu: llvm (LLVM "
                     "IR), obj (object file + header), so (shared library + "
                     "header); nvptx: ptx, cubin or fatbin (+ header + host "
                     "runtime .c)"),
            cl::cat(category));
static cl::opt<std::string> outputOpt("o", cl::Required,
                                      cl::desc("Output file"),
                                      cl::value_desc("path"),
                                      cl::cat(category));

static int fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "swin-aot") << message << "\n";
  return 1;
}

static int fail(llvm::Error error) {
  std::string message = llvm::toString(std::move(error));
  return fail(message);
}

/// Reads the options into a configuration; errors name the option.
static llvm::Expected<KernelConfig> readConfig() {
  KernelConfig config;
  config.window.assign(windowOpt.begin(), windowOpt.end());
  config.heads = headsOpt;
  config.headDim = headDimOpt;
  config.name = nameOpt;
  config.cpu = cpuOpt;
  config.parallel = !noParallelOpt;
  config.fuse = !unfusedOpt;
  config.packedQkv = packedQkvOpt;
  config.vectorWidth = vectorWidthOpt;
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  if (!scaleOpt.empty()) {
    char *end = nullptr;
    config.scale = std::strtof(scaleOpt.c_str(), &end);
    if (end == scaleOpt.c_str() || *end != '\0')
      return error("--scale: not a number: '" + scaleOpt + "'");
  }
  if (dtypeOpt == "f32")
    config.elementKind = ElementKind::F32;
  else if (dtypeOpt == "f16")
    config.elementKind = ElementKind::F16;
  else if (dtypeOpt == "bf16")
    config.elementKind = ElementKind::BF16;
  else
    return error("--dtype must be f32, f16 or bf16, got '" + dtypeOpt + "'");
  if (layoutOpt == "windows")
    config.layout = Layout::Windows;
  else if (layoutOpt == "tokens")
    config.layout = Layout::Tokens;
  else
    return error("--layout must be windows or tokens, got '" + layoutOpt + "'");
  if (paddingOpt == "pad-then-shift")
    config.shiftThenPad = false;
  else if (paddingOpt == "shift-then-pad")
    config.shiftThenPad = true;
  else
    return error("--padding must be pad-then-shift or shift-then-pad, got '" +
                 paddingOpt + "'");
  if (targetOpt != "cpu" && targetOpt != "nvptx")
    return error("--target must be cpu or nvptx, got '" + targetOpt + "'");
  config.target = targetOpt;
  config.chip = chipOpt;
  config.kernel = kernelOpt;
  config.cudaToolkit = cudaOpt;

  config.resolution.assign(resolutionOpt.begin(), resolutionOpt.end());
  config.shift.assign(shiftOpt.begin(), shiftOpt.end());
  if (!config.resolution.empty() && config.shift.empty())
    config.shift.assign(config.window.size(), 0);
  if (config.shift.size() == 1 && config.window.size() > 1)
    config.shift.assign(config.window.size(), config.shift.front());
  if (!config.shift.empty() && config.resolution.empty())
    return error("--shift needs --resolution (the feature map the mask is "
                 "built for)");

  if (!tableOpt.empty()) {
    auto buffer = llvm::MemoryBuffer::getFile(tableOpt, /*IsText=*/false);
    if (!buffer)
      return error("--table: cannot read '" + tableOpt +
                   "': " + buffer.getError().message());
    llvm::StringRef bytes = (*buffer)->getBuffer();
    if (bytes.size() % sizeof(float) != 0)
      return error("--table: '" + tableOpt +
                   "' is not a whole number of f32 values");
    std::vector<float> values(bytes.size() / sizeof(float));
    std::memcpy(values.data(), bytes.data(), bytes.size());
    config.table = std::move(values);
  }
  // Swin shrinks the window (and drops the shift) along axes where the map
  // is not larger than it.
  applySmallMapRule(config);
  if (llvm::Error invalid = validate(config))
    return std::move(invalid);
  return config;
}

static std::string headerPathFor(llvm::StringRef output) {
  llvm::SmallString<256> path(output);
  llvm::sys::path::replace_extension(path, "h");
  return path.str().str();
}

static int writeHeader(const KernelConfig &config, llvm::StringRef output) {
  std::string path = headerPathFor(output);
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_Text);
  if (ec)
    return fail("cannot write " + path + ": " + ec.message());
  emitHeader(config, os);
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::AddExtraVersionPrinter([](llvm::raw_ostream &os) {
    os << "swin-aot " << SWIN_VERSION
       << " (rpe dialect, LLVM " LLVM_VERSION_STRING << ")\n";
  });
  cl::ParseCommandLineOptions(
      argc, argv, "swin-aot: Swin window-attention kernels ahead of time\n");

  // lld resets LLVM's command-line options when it runs in-process: keep
  // copies of what is needed after linking.
  const std::string output = outputOpt;
  auto config = readConfig();
  if (!config)
    return fail(config.takeError());
  bool gpu = config->target == "nvptx";
  if (!gpu && emitOpt != "mlir" && emitOpt != "llvm" && emitOpt != "obj" &&
      emitOpt != "so")
    return fail("--emit must be mlir, llvm, obj or so, got '" + emitOpt + "'");
  if (gpu && emitOpt != "mlir" && emitOpt != "ptx" && emitOpt != "cubin" &&
      emitOpt != "fatbin")
    return fail("--emit must be mlir, ptx, cubin or fatbin for nvptx, got '" +
                emitOpt + "'");

  // The pipeline bufferizes and lowers upstream ops: their interfaces live
  // in the upstream registrations.
  DialectRegistry registry;
  registry.insert<RpeDialect>();
  registerAllDialects(registry);
  registerAllExtensions(registry);
  // GPU serialization translates gpu.modules to LLVM IR and PTX.
  registerAllToLLVMIRTranslations(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  MLIRContext context(registry);
  // A failing pass reports itself in one line; the module it failed on is
  // thousands of lines of generated code that help no user of swin-aot.
  context.printOpOnDiagnostic(false);
  // Diagnostics are printed once, by the handler, with their locations.
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = buildKernelModule(context, *config);
  if (failed(module->verify()))
    return fail("the generated rpe module does not verify");

  std::string error;
  if (emitOpt == "mlir") {
    auto file = openOutputFile(output, &error);
    if (!file)
      return fail(error);
    module->print(file->os());
    file->keep();
    return 0;
  }

  if (gpu) {
    StringRef format = emitOpt == "ptx"     ? "isa"
                       : emitOpt == "cubin" ? "bin"
                                            : "fatbin";
    auto kernel = compileGpuKernel(*module, *config, format);
    if (!kernel)
      return fail(kernel.takeError());
    auto file = openOutputFile(output, &error);
    if (!file)
      return fail(error);
    file->os() << kernel->image;
    file->keep();
    if (int status = writeHeader(*config, output))
      return status;
    llvm::SmallString<256> runtimePath(output);
    llvm::sys::path::replace_extension(runtimePath, "c");
    auto runtime = openOutputFile(runtimePath, &error);
    if (!runtime)
      return fail(error);
    emitGpuRuntime(*config, *kernel,
                   llvm::sys::path::filename(headerPathFor(output)),
                   runtime->os());
    runtime->keep();
    return 0;
  }

  if (failed(lowerToLLVMDialect(*module, *config)))
    return fail("lowering to the LLVM dialect failed");
  llvm::LLVMContext llvmContext;
  auto llvmModule = translateAndOptimize(*module, llvmContext, *config);
  if (!llvmModule)
    return fail(llvmModule.takeError());

  if (emitOpt == "llvm") {
    auto file = openOutputFile(output, &error);
    if (!file)
      return fail(error);
    (*llvmModule)->print(file->os(), nullptr);
    file->keep();
    return 0;
  }

  if (emitOpt == "obj") {
    if (llvm::Error e = emitObjectFile(**llvmModule, *config, output))
      return fail(std::move(e));
    return writeHeader(*config, output);
  }

  // so: an object file beside the output, linked, then removed.
  llvm::SmallString<256> objectPath;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("swin-aot", "o", objectPath))
    return fail("cannot create a temporary object file: " + ec.message());
  llvm::FileRemover removeObject(objectPath);
  if (llvm::Error e = emitObjectFile(**llvmModule, *config, objectPath))
    return fail(std::move(e));
  if (llvm::Error e = linkSharedLibrary(objectPath, output))
    return fail(std::move(e));
  return writeHeader(*config, output);
}
