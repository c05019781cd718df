//===- swin-aot.cpp - Swin window-attention kernels ahead of time ---------===//
//
//   swin-aot --window=7,7 --heads=3 --head-dim=32 [--scale=F]
//            [--resolution=H,W --shift=S|SH,SW] [--layout=windows|tokens]
//            [--table=FILE] [--cosine [--cpb-mlp=FILE --cpb-hidden=H
//            [--pretrained-window=Ph,Pw]]] [--class-token]
//            [--dtype=f32|f16|bf16]
//            [--target=cpu|nvptx] [--grad] [--codegen-threads=N]
//            [--name=NAME] --emit=mlir|llvm|obj|so|ptx|cubin|fatbin -o PATH
//   swin-aot --input=MODEL.mlir [--cpu=CPU] [--no-parallel]
//            [--pipeline-options=OPTIONS] [--profile] [--codegen-threads=N]
//            [--name=PREFIX] --emit=mlir|llvm|obj|so -o PATH
//
// Everything runs in-process: building the rpe module (or parsing the
// given one), the pipelines, LLVM's optimizer and code generator, lld for
// shared libraries, and the GPU serialization. Beside a kernel or module
// (obj, so, ptx, cubin, fatbin) at PATH it writes the C header (PATH.h),
// the description of its C ABI (PATH.json) and, for a GPU kernel, the
// host runtime (PATH.c); all of them or none. --timing reports where the
// time goes.
//
//===----------------------------------------------------------------------===//

#include "OutputFiles.h"

#include "Rpe/Aot.h"
#include "Rpe/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/Timing.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/BuryPointer.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/StringSaver.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/WithColor.h"

#include <algorithm>
#include <cstring>
#include <optional>

using namespace mlir;
using namespace mlir::rpe;
namespace cl = llvm::cl;

namespace {

/// What swin-aot writes.
enum class Emit { Mlir, Llvm, Obj, So, Ptx, Cubin, Fatbin };

/// The first error found while parsing an option's value, in the tool's
/// words. LLVM's parsers print theirs to stderr themselves (`for the
/// --heads option: '' value invalid for integer argument!`); the parsers
/// below record theirs instead, and main prints one line.
std::string optionError;

bool recordOptionError(cl::Option &option, const llvm::Twine &message) {
  if (optionError.empty())
    optionError = ("--" + option.ArgStr + " " + message).str();
  return true;
}

/// Enum options: a bad value reads `--dtype must be one of f32, f16,
/// bf16; got 'f64'`.
template <typename T> class ChoiceParser : public cl::parser<T> {
public:
  using cl::parser<T>::parser;
  bool parse(cl::Option &option, StringRef name, StringRef value, T &result) {
    SmallVector<StringRef> names;
    for (const auto &choice : this->Values) {
      if (choice.Name == value) {
        result = choice.V.getValue();
        return false;
      }
      names.push_back(choice.Name);
    }
    return recordOptionError(option, "must be one of " +
                                         llvm::join(names, ", ") + "; got '" +
                                         value + "'");
  }
};

template <typename T> using EnumOpt = cl::opt<T, false, ChoiceParser<T>>;

/// swin-aot spells the cases of an enum with hyphens (`shift-then-pad`)
/// where MLIR spells them with underscores (`#rpe.padding<shift_then_pad>`).
/// Called while the options are constructed, before main.
llvm::StringRef hyphenated(llvm::StringRef name) {
  static llvm::BumpPtrAllocator allocator;
  static llvm::StringSaver names(allocator);
  std::string spelled = name.str();
  std::replace(spelled.begin(), spelled.end(), '_', '-');
  return names.save(spelled);
}
// Integers are read as text and parsed by readConfig: LLVM's integer
// parser prints its own error (`'' value invalid for long argument!`).
using IntegerOpt = cl::opt<std::string>;
using IntegerList = cl::list<std::string>;

} // namespace

static cl::OptionCategory category("swin-aot options");

static IntegerList windowOpt("window", cl::CommaSeparated,
                             cl::desc("Window extents: Wh,Ww or Wd,Wh,Ww"),
                             cl::cat(category));
static IntegerOpt headsOpt("heads", cl::desc("Number of attention heads"),
                           cl::cat(category));
static IntegerOpt headDimOpt("head-dim", cl::desc("Channels per head"),
                             cl::cat(category));
static cl::opt<std::string>
    scaleOpt("scale", cl::desc("Scale applied to q (default head_dim ** -0.5)"),
             cl::cat(category));
static IntegerList
    resolutionOpt("resolution", cl::CommaSeparated,
                  cl::desc("Feature map H,W (or D,H,W) for the shift mask"),
                  cl::cat(category));
static IntegerList
    shiftOpt("shift", cl::CommaSeparated,
             cl::desc("Cyclic shift: S for every axis, or one per axis"),
             cl::cat(category));
static cl::opt<std::string>
    tableOpt("table",
             cl::desc("Bake this table into the kernel: raw little-endian "
                      "f32 [T, heads]"),
             cl::cat(category));
static EnumOpt<Layout> layoutOpt(
    "layout", cl::init(Layout::Windows),
    cl::desc("Where q, k, v live: windows (q, k, v [num_windows, heads, N, "
             "head_dim]) or tokens ([batch, H*W, heads*head_dim] feature "
             "maps in image order, shifted, padded and partitioned by the "
             "kernel)"),
    enumOptionValues(symbolizeLayout), cl::cat(category));
static EnumOpt<PaddingOrder> paddingOpt(
    "padding", cl::init(PaddingOrder::PadThenShift),
    cl::desc("Tokens layout, resolution not a multiple of the window: "
             "pad-then-shift (pad, then roll: HF, torchvision, Video Swin) "
             "or shift-then-pad (roll, then pad: timm)"),
    enumOptionValues(symbolizePaddingOrder, hyphenated), cl::cat(category));
static EnumOpt<Partition> partitionOpt(
    "partition", cl::init(Partition::Block),
    cl::desc("Tokens layout: which tokens form a window: block (Swin, "
             "MaxViT's block attention) or grid (MaxViT's grid attention, "
             "windows strided across the map; no shift, no padding)"),
    enumOptionValues(symbolizePartition), cl::cat(category));
static cl::opt<bool> packedQkvOpt(
    "packed-qkv",
    cl::desc("Tokens layout: one qkv argument [batch, H*W, 3, heads, "
             "head_dim], the qkv projection's output as it is"),
    cl::cat(category));
static cl::opt<std::string> cpbMlpOpt(
    "cpb-mlp",
    cl::desc("SwinV2 (--cosine): compute the table at compile time from the "
             "continuous position bias MLP, raw little-endian f32 fc1.weight "
             "[H, rank], fc1.bias [H], fc2.weight [heads, H]"),
    cl::cat(category));
static IntegerOpt cpbHiddenOpt("cpb-hidden",
                               cl::desc("Hidden size H of the --cpb-mlp MLP"),
                               cl::cat(category));
static IntegerList pretrainedWindowOpt(
    "pretrained-window", cl::CommaSeparated,
    cl::desc("--cpb-mlp: the window the MLP was trained with (SwinV2's "
             "pretrained_window_size; default: the window)"),
    cl::cat(category));
static cl::opt<bool> cosineOpt(
    "cosine",
    cl::desc("SwinV2's scaled cosine attention: a logit_scale [heads] "
             "argument after the table, q and k L2-normalized, no head_dim "
             "scale"),
    cl::cat(category));
static cl::opt<int64_t> warpsPerBlockOpt(
    "warps-per-block", cl::init(0),
    cl::desc("The warp kernel (--kernel=warps): (window, head) items per "
             "block, in dynamic shared memory where they need more than "
             "48 KiB (0, the default: as many as fit 48 KiB, at most 4; the "
             "row kernel for a window whose one warp needs more)"),
    cl::cat(category));
static EnumOpt<F32Mma> f32MmaOpt(
    "f32-mma", cl::init(F32Mma::None),
    cl::desc("The warp kernel (--kernel=warps) on --dtype=f32: none (the "
             "default: f32 takes the row kernel), bf16x3 (q, k, v and the "
             "probabilities as two bf16 terms each, three tensor-core "
             "products: 2^-16 of each product, finer than TF32) or bf16x6 "
             "(three terms, six products: f32's precision); with --grad, "
             "the backward's products too"),
    enumOptionValues(symbolizeF32Mma), cl::cat(category));
static cl::opt<bool> classTokenOpt(
    "class-token",
    cl::desc("BEiT's class token: global attention over the --window grid "
             "plus a class token first (N = Wh*Ww + 1), its table [T + 3, "
             "heads] with the class -> token, token -> class and class -> "
             "class rows after Swin's T"),
    cl::cat(category));
static EnumOpt<ElementKind> dtypeOpt("dtype", cl::init(ElementKind::F32),
                                     cl::desc("Element type: f32, f16 or bf16"),
                                     enumOptionValues(symbolizeElementKind),
                                     cl::cat(category));
static EnumOpt<Target> targetOpt(
    "target", cl::init(Target::Cpu),
    cl::desc("What to compile for: cpu (host code, C ABI) or nvptx (NVIDIA "
             "GPU kernel, header and a CUDA driver API host runtime in C)"),
    enumOptionValues(symbolizeTarget), cl::cat(category));
static cl::opt<std::string> chipOpt("chip", cl::init("sm_90"),
                                    cl::desc("GPU architecture (nvptx)"),
                                    cl::cat(category));
static cl::opt<std::string> featuresOpt(
    "features",
    cl::desc("PTX features, e.g. +ptx87 (nvptx; default: the least PTX "
             "version the chip needs)"),
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
static IntegerOpt vectorWidthOpt(
    "vector-width", cl::init("0"),
    cl::desc(
        "f32 lanes of the CPU micro-kernels: 8 (AVX2), 16 (AVX-512); "
        "default: 16 when the --cpu has AVX-512, else 8. bf16 kernels at 16 "
        "lanes use AVX512-BF16 dot products where the --cpu runs them at "
        "twice the FMA rate (AMD Zen 4 and later)"),
    cl::cat(category));
static cl::opt<bool> gradOpt(
    "grad",
    cl::desc("Also write the gradient's entry point, NAME_backward: dq, dk, "
             "dv and the table's gradient (f32) from out and dout. The CPU's "
             "takes f32; the GPU's (--target=nvptx, or --kernel=warps on the "
             "CPU, emulated) f32, f16 and bf16"),
    cl::cat(category));
static cl::opt<bool> unfusedOpt(
    "unfused",
    cl::desc("Use the unfused reference lowering (materialized bias and "
             "mask, step-by-step softmax) instead of the fused kernel"),
    cl::cat(category));
static EnumOpt<KernelStrategy> kernelOpt(
    "kernel",
    cl::desc("The fused kernel: tiles (the CPU's FMA tiles), warps (a warp "
             "per (window, head) on tensor cores; rows where a window does "
             "not qualify) or rows (a thread per query row). Default: tiles "
             "on the CPU, warps on the GPU; the GPU's kernels also run on the "
             "host, to test them"),
    enumOptionValues(symbolizeKernelStrategy), cl::cat(category));
static cl::opt<std::string> inputOpt(
    "input",
    cl::desc("Compile this MLIR module (a whole model: linalg on tensors, as "
             "torch-mlir exports it; '-': standard input) instead of a "
             "kernel. Each public function gets MLIR's C interface "
             "(_mlir_ciface_F) and a plain C entry point (NAME_F)"),
    cl::value_desc("path"), cl::cat(category));
static cl::opt<std::string> pipelineOptionsOpt(
    "pipeline-options",
    cl::desc("--input: options of rpe-cpu-pipeline as swin-opt takes them "
             "(e.g. 'matmul=false fuse=false'; see swin-opt --help). "
             "vector-width, bf16-dot and avx512 default to what the --cpu "
             "has, parallel to !--no-parallel, profile to --profile"),
    cl::value_desc("options"), cl::cat(category));
static cl::opt<bool> profileOpt(
    "profile",
    cl::desc("--input: time each op of the public functions (rpe-cpu-"
             "pipeline's profile=true) and link the profiling runtime: the "
             "library exports swin_profile_reset() and "
             "swin_profile_write(path), which writes the per-op profile "
             "(JSON, format swin-opt-profile/1)"),
    cl::cat(category));
static IntegerOpt codegenThreadsOpt(
    "codegen-threads",
    cl::desc("cpu: split the LLVM module (--input's, or a kernel's: the "
             "forward and --grad's backward) into N partitions, each "
             "optimized and compiled by LLVM on a thread of its own, and "
             "link their objects (--emit=obj: into one relocatable object, ld.lld -r). "
             "1: the whole module on one thread. --emit=llvm writes the whole "
             "module. Default: the hardware threads swin-aot may run on"),
    cl::value_desc("N"), cl::cat(category));
static cl::opt<std::string>
    nameOpt("name", cl::init("swin_window_attention"),
            cl::desc("Name of the C entry point (--input: the prefix of the "
                     "entry points; default: the input file's name)"),
            cl::cat(category));
static cl::opt<bool>
    timingOpt("timing",
              cl::desc("Report the time of each step (parsing, each pass, "
                       "translation, LLVM's optimizer, code generation, "
                       "linking) on standard error"),
              cl::cat(category));
static EnumOpt<Emit> emitOpt(
    "emit", cl::desc("What to write"),
    cl::values(
        clEnumValN(Emit::Mlir, "mlir",
                   "the rpe-level module (--input: the LLVM-dialect module "
                   "with its entry points)"),
        clEnumValN(Emit::Llvm, "llvm", "cpu: LLVM IR"),
        clEnumValN(Emit::Obj, "obj", "cpu: object file (+ .h, .json)"),
        clEnumValN(Emit::So, "so", "cpu: shared library (+ .h, .json)"),
        clEnumValN(Emit::Ptx, "ptx", "nvptx: PTX (+ .h, .json, runtime .c)"),
        clEnumValN(Emit::Cubin, "cubin", "nvptx: cubin (+ .h, .json, .c)"),
        clEnumValN(Emit::Fatbin, "fatbin", "nvptx: fatbin (+ .h, .json, .c)")),
    cl::cat(category));
static cl::opt<std::string> outputOpt("o",
                                      cl::desc("Output file ('-': standard "
                                               "output, for mlir and llvm)"),
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

/// A command line that does not parse: the recorded option error, or
/// LLVM's messages (an unknown option, say) as one line in the words of the
/// tool's own errors.
static int failCommandLine(StringRef messages) {
  if (!optionError.empty()) {
    fail(optionError);
    return 2;
  }
  SmallVector<StringRef> lines;
  messages.trim().split(lines, '\n', -1, /*KeepEmpty=*/false);
  std::string message;
  for (StringRef line : lines) {
    line = line.trim();
    line.consume_front("swin-aot: ");
    line = line.split("  Try:").first.trim();
    if (line.empty() || line.starts_with("Try:") ||
        line.starts_with("Did you mean"))
      continue;
    std::string text = line.str();
    llvm::Regex option("^for the (-+[A-Za-z0-9-]+) option: (.*)$");
    SmallVector<StringRef> groups;
    if (option.match(text, &groups)) {
      text = groups[1].str() + " " + StringRef(groups[2]).rtrim("!").str();
    } else {
      text = StringRef(text).rtrim(".! ").str();
    }
    message += (message.empty() ? "" : "; ") + text;
  }
  if (message.empty())
    message = "invalid command line";
  fail(message + " (see swin-aot --help)");
  return 2;
}

/// Reads the options into a configuration; errors name the option.
/// The raw little-endian f32 values of file `path`, given by option
/// `option`.
static llvm::Expected<std::vector<float>> readFloats(llvm::StringRef option,
                                                     llvm::StringRef path) {
  auto error = [&](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "--" + option + ": " + message);
  };
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
  if (!buffer)
    return error("cannot read '" + path + "': " + buffer.getError().message());
  llvm::StringRef bytes = (*buffer)->getBuffer();
  if (bytes.size() % sizeof(float) != 0)
    return error("'" + path + "' is not a whole number of f32 values");
  std::vector<float> values(bytes.size() / sizeof(float));
  // An empty file has no data pointer to copy from.
  if (!values.empty())
    std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

static llvm::Expected<KernelConfig> readConfig() {
  KernelConfig config;
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  auto integer = [&](StringRef option, StringRef text,
                     int64_t &value) -> llvm::Error {
    if (text.trim().getAsInteger(0, value))
      return error("--" + option + " expects an integer, got '" + text + "'");
    return llvm::Error::success();
  };
  auto integers = [&](StringRef option, ArrayRef<std::string> texts,
                      SmallVectorImpl<int64_t> &values) -> llvm::Error {
    for (const std::string &text : texts)
      if (llvm::Error e = integer(option, text, values.emplace_back()))
        return e;
    return llvm::Error::success();
  };
  if (llvm::Error e = integers("window", windowOpt, config.window))
    return std::move(e);
  if (llvm::Error e = integer("heads", headsOpt, config.heads))
    return std::move(e);
  if (llvm::Error e = integer("head-dim", headDimOpt, config.headDim))
    return std::move(e);
  if (llvm::Error e =
          integer("vector-width", vectorWidthOpt, config.vectorWidth))
    return std::move(e);
  if (llvm::Error e = integers("resolution", resolutionOpt, config.resolution))
    return std::move(e);
  if (llvm::Error e = integers("shift", shiftOpt, config.shift))
    return std::move(e);
  config.name = nameOpt;
  config.cpu = cpuOpt;
  config.parallel = !noParallelOpt;
  config.fuse = !unfusedOpt;
  config.grad = gradOpt;
  config.packedQkv = packedQkvOpt;
  config.cosine = cosineOpt;
  config.classToken = classTokenOpt;
  config.elementKind = dtypeOpt;
  config.layout = layoutOpt;
  config.padding = paddingOpt;
  config.partition = partitionOpt;
  config.target = targetOpt;
  config.chip = chipOpt;
  config.ptxFeatures = featuresOpt;
  config.cudaToolkit = cudaOpt;
  if (kernelOpt.getNumOccurrences())
    config.kernel = kernelOpt;
  config.warpsPerBlock = warpsPerBlockOpt;
  config.f32Mma = f32MmaOpt;
  if (!scaleOpt.empty()) {
    char *end = nullptr;
    config.scale = std::strtof(scaleOpt.c_str(), &end);
    if (end == scaleOpt.c_str() || *end != '\0')
      return error("--scale: not a number: '" + scaleOpt + "'");
  }

  if (!config.resolution.empty() && config.shift.empty())
    config.shift.assign(config.window.size(), 0);
  if (config.shift.size() == 1 && config.window.size() > 1)
    config.shift.assign(config.window.size(), config.shift.front());
  if (!config.shift.empty() && config.resolution.empty())
    return error("--shift needs --resolution (the feature map the mask is "
                 "built for)");

  if (!tableOpt.empty()) {
    auto values = readFloats("table", tableOpt);
    if (!values)
      return values.takeError();
    config.table = std::move(*values);
  }
  if (!pretrainedWindowOpt.empty() && cpbMlpOpt.empty())
    return error("--pretrained-window needs --cpb-mlp (it shapes the MLP's "
                 "coordinates)");
  if (cpbHiddenOpt.getNumOccurrences() && cpbMlpOpt.empty())
    return error("--cpb-hidden needs --cpb-mlp");
  if (!cpbMlpOpt.empty()) {
    KernelConfig::CpbMlp mlp;
    if (!cpbHiddenOpt.getNumOccurrences())
      return error("--cpb-mlp needs --cpb-hidden (the MLP's hidden size)");
    if (llvm::Error e = integer("cpb-hidden", cpbHiddenOpt, mlp.hidden))
      return std::move(e);
    if (llvm::Error e = integers("pretrained-window", pretrainedWindowOpt,
                                 mlp.pretrainedWindow))
      return std::move(e);
    auto weights = readFloats("cpb-mlp", cpbMlpOpt);
    if (!weights)
      return weights.takeError();
    mlp.weights = std::move(*weights);
    config.cpbMlp = std::move(mlp);
  }
  // Swin shrinks the window (and drops the shift) along axes where the map
  // is not larger than it.
  applySmallMapRule(config);
  if (llvm::Error invalid = validate(config))
    return std::move(invalid);
  return config;
}

/// A file that belongs to `output` (its header, description or runtime):
/// the whole output name with `extension` appended (stage1.so.h), so that
/// kernels whose outputs share a stem (stage1.so, stage1.ptx) never
/// overwrite each other's.
static std::string besideOutput(llvm::StringRef output,
                                llvm::StringRef extension) {
  return (output + "." + extension).str();
}

/// The header and the ABI description, beside the kernel (a GPU kernel's
/// launches with it).
static llvm::Error writeInterface(swin_aot::OutputFiles &files,
                                  const KernelConfig &config,
                                  llvm::StringRef output,
                                  const GpuKernel *gpuKernel = nullptr) {
  if (llvm::Error error =
          files.write(besideOutput(output, "h"), [&](llvm::raw_ostream &os) {
            emitHeader(config, os);
            return llvm::Error::success();
          }))
    return error;
  return files.write(besideOutput(output, "json"), [&](llvm::raw_ostream &os) {
    writeAbiDescription(config, os, gpuKernel);
    return llvm::Error::success();
  });
}

/// What a GPU kernel needs of the CUDA toolkit, checked before compiling so
/// that a machine without one gets a line that says so: libdevice, whose
/// math functions every kernel calls (without it the PTX would call them
/// unresolved), and for cubin and fatbin ptxas (and fatbinary), which
/// MLIR's NVVM target takes from the toolkit's bin/ or from PATH.
static llvm::Error checkCudaToolkit(const KernelConfig &config, Emit emit) {
  llvm::StringRef toolkit = config.cudaToolkit;
  llvm::SmallString<256> libdevice(toolkit);
  llvm::sys::path::append(libdevice, "nvvm", "libdevice", "libdevice.10.bc");
  if (!llvm::sys::fs::is_regular_file(libdevice))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "--target=nvptx needs a CUDA toolkit: no libdevice at " + libdevice +
            " (install the CUDA toolkit, or point --cuda-toolkit at one)");
  if (emit == Emit::Ptx)
    return llvm::Error::success();
  llvm::StringRef emitName = emit == Emit::Cubin ? "cubin" : "fatbin";
  for (llvm::StringRef tool : {"ptxas", "fatbinary"}) {
    if (tool == "fatbinary" && emit != Emit::Fatbin)
      continue;
    llvm::SmallString<256> path(toolkit);
    llvm::sys::path::append(path, "bin", tool);
    if (llvm::sys::fs::can_execute(path) || llvm::sys::findProgramByName(tool))
      continue;
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "--emit=" + emitName + " needs " + tool +
            " from the CUDA toolkit: not in " + toolkit +
            "/bin nor on PATH (install the toolkit, or point --cuda-toolkit "
            "at one; --emit=ptx needs no " +
            tool + ")");
  }
  return llvm::Error::success();
}

/// Whether --emit can go to `output`.
static llvm::Error checkOutput(Emit emit, llvm::StringRef output) {
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  if (output.empty())
    return error("-o: the output path is empty");
  if (output == "-" && emit != Emit::Mlir && emit != Emit::Llvm)
    return error("-o -: only --emit=mlir and --emit=llvm go to standard "
                 "output");
  return llvm::Error::success();
}

/// --emit=mlir: writes `module` to `output`.
static llvm::Error writeModule(swin_aot::OutputFiles &files, ModuleOp module,
                               llvm::StringRef output) {
  if (llvm::Error e = files.write(output, [&](llvm::raw_ostream &os) {
        module.print(os);
        return llvm::Error::success();
      }))
    return e;
  return files.commit();
}

/// Optimizes LLVM IR (from translateToLLVMIR) and writes it as --emit
/// asks: as text (llvm), as an object file (obj), or as a shared library
/// linked against the threads' `runtime` (so); to be committed by the
/// caller. Object files and libraries are compiled in `partitions` pieces
/// in parallel (emitObjectFiles); several objects become one relocatable
/// object (obj) or are all linked into the library (so).
static llvm::Error
writeCpuCode(swin_aot::OutputFiles &files, llvm::Module &llvmModule, Emit emit,
             llvm::StringRef output, const CpuCodegenOptions &codegen,
             unsigned partitions, ThreadRuntime runtime, TimingScope &timing) {
  if (emit == Emit::Llvm || (emit == Emit::Obj && partitions == 1)) {
    if (llvm::Error e = optimizeModule(llvmModule, codegen, timing))
      return e;
    if (emit == Emit::Llvm)
      return files.write(output, [&](llvm::raw_ostream &os) {
        llvmModule.print(os, nullptr);
        return llvm::Error::success();
      });
    TimingScope generation = timing.nest("Code generation");
    return files.write(
        output,
        [&](llvm::raw_pwrite_stream &os) {
          return emitObjectFile(llvmModule, codegen, os);
        },
        /*binary=*/true);
  }

  // Object files in a temporary place, linked, then removed.
  SmallVector<std::string> objectPaths;
  llvm::scope_exit removeObjects([&] {
    for (const std::string &path : objectPaths)
      llvm::sys::fs::remove(path);
  });
  for (unsigned i = 0; i < partitions; ++i) {
    llvm::SmallString<256> objectPath;
    if (std::error_code ec =
            llvm::sys::fs::createTemporaryFile("swin-aot", "o", objectPath))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "cannot create a temporary object file: " +
                                         ec.message());
    objectPaths.push_back(objectPath.str().str());
  }
  if (llvm::Error e = emitObjectFiles(llvmModule, codegen, objectPaths, timing))
    return e;
  TimingScope linking = timing.nest("Linking");
  auto linked = files.reserve(output);
  if (!linked)
    return linked.takeError();
  if (emit == Emit::Obj)
    return linkRelocatableObject(objectPaths, *linked);
  return linkSharedLibrary(objectPaths, *linked, runtime);
}

/// Builds and writes what --emit asks for; a CPU kernel library is compiled
/// in `codegenThreads` partitions (a --grad library's forward and backward
/// kernels are each a large function: on two threads, the build takes about
/// the time of the larger).
static llvm::Error run(MLIRContext &context, const KernelConfig &config,
                       Emit emit, llvm::StringRef output,
                       unsigned codegenThreads, TimingScope &timing) {
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  if (llvm::Error e = checkOutput(emit, output))
    return e;
  OwningOpRef<ModuleOp> module = buildKernelModule(context, config);
  if (failed(module->verify()))
    return error("the generated rpe module does not verify");

  swin_aot::OutputFiles files;
  if (emit == Emit::Mlir)
    return writeModule(files, *module, output);

  if (config.isGpu()) {
    if (llvm::Error e = checkCudaToolkit(config, emit))
      return e;
    GpuBinaryFormat format = emit == Emit::Ptx     ? GpuBinaryFormat::Isa
                             : emit == Emit::Cubin ? GpuBinaryFormat::Bin
                                                   : GpuBinaryFormat::Fatbin;
    auto kernel = compileGpuKernel(*module, config, format);
    if (!kernel)
      return kernel.takeError();
    if (llvm::Error e = files.write(
            output,
            [&](llvm::raw_ostream &os) {
              os << kernel->image;
              return llvm::Error::success();
            },
            /*binary=*/format != GpuBinaryFormat::Isa))
      return e;
    if (llvm::Error e = writeInterface(files, config, output, &*kernel))
      return e;
    std::string headerName =
        llvm::sys::path::filename(besideOutput(output, "h")).str();
    if (llvm::Error e =
            files.write(besideOutput(output, "c"), [&](llvm::raw_ostream &os) {
              emitGpuRuntime(config, *kernel, headerName, os);
              return llvm::Error::success();
            }))
      return e;
    return files.commit();
  }

  // An unknown --cpu stops here, before any lowering.
  CpuCodegenOptions codegen{config.cpu};
  auto features = getCpuVectorFeatures(codegen);
  if (!features)
    return features.takeError();
  TimingScope pipeline = timing.nest("rpe-cpu-pipeline");
  if (failed(lowerToLLVMDialect(*module, config, *features, pipeline)))
    return error("lowering to the LLVM dialect failed");
  pipeline.stop();
  llvm::LLVMContext llvmContext;
  auto llvmModule =
      translateToLLVMIR(*module, llvmContext, config.name, codegen, timing);
  if (!llvmModule)
    return llvmModule.takeError();
  if (llvm::Error e =
          writeCpuCode(files, **llvmModule, emit, output, codegen,
                       codegenThreads, config.threadRuntime(), timing))
    return e;
  if (emit != Emit::Llvm)
    if (llvm::Error e = writeInterface(files, config, output))
      return e;
  return files.commit();
}

/// The prefix of a module's entry points when --name is not given: the
/// input file's name as a C identifier (`swin_t_b1` for swin-t.b1.mlir).
static std::string getDefaultPrefix(StringRef input) {
  std::string prefix =
      input == "-" ? "module" : llvm::sys::path::stem(input).str();
  for (char &c : prefix)
    if (!llvm::isAlnum(c))
      c = '_';
  if (prefix.empty() || llvm::isDigit(prefix.front()))
    prefix.insert(prefix.begin(), '_');
  return prefix;
}

/// The options of rpe-cpu-pipeline for a module: the CPU's, as a kernel's
/// (setCpuPipelineTarget), --no-parallel, and the GNU OpenMP runtime for
/// its parallel loops, as the kernels' (the runtime PyTorch's pool is, and
/// the one the wheel's libraries link), then --pipeline-options on top of
/// them.
static llvm::Expected<std::unique_ptr<CpuPipelineOptions>>
readModulePipelineOptions(const CpuVectorFeatures &features) {
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "--pipeline-options: " + message);
  };
  auto options = std::make_unique<CpuPipelineOptions>();
  options->parallel = !noParallelOpt;
  options->profile = profileOpt;
  options->threadRuntime = OpenMPRuntime::Gnu;
  // Any function of the module may compute in bf16.
  setCpuPipelineTarget(*options, features, /*vectorWidth=*/0, /*bf16=*/true);
  std::string parseErrors;
  llvm::raw_string_ostream parseErrorStream(parseErrors);
  if (failed(options->parseFromString(pipelineOptionsOpt, parseErrorStream)))
    return error(StringRef(parseErrors).trim());
  // AVX512-BF16's dot products take 16 lanes.
  options->bf16Dot = options->bf16Dot && options->vectorWidth == 16;
  if (options->itemRange)
    return error("item-range=true leaves a kernel's items to its caller: "
                 "a module's functions run all of theirs");
  return options;
}

/// The most --codegen-threads: beyond any machine's cores, more threads
/// only cost memory.
constexpr unsigned kMaxCodegenThreads = 256;

/// --codegen-threads, or the hardware threads this process may run on (its
/// CPU affinity).
static llvm::Expected<unsigned> readCodegenThreads() {
  if (!codegenThreadsOpt.getNumOccurrences())
    return llvm::hardware_concurrency().compute_thread_count();
  unsigned threads = 0;
  if (StringRef(codegenThreadsOpt).trim().getAsInteger(10, threads) ||
      threads < 1 || threads > kMaxCodegenThreads)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "--codegen-threads expects an integer from 1 to " +
            llvm::Twine(kMaxCodegenThreads) + ", got '" + codegenThreadsOpt +
            "'");
  return threads;
}

/// --input: compiles the module at `input` and writes what --emit asks for.
static llvm::Error runModule(MLIRContext &context, llvm::SourceMgr &sourceMgr,
                             StringRef input, StringRef prefix, Emit emit,
                             StringRef output, unsigned codegenThreads,
                             TimingScope &timing) {
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  if (llvm::Error e = checkOutput(emit, output))
    return e;
  if (!isCIdentifier(prefix))
    return error("--name must be a C identifier, got '" + prefix + "'");
  CpuCodegenOptions codegen;
  codegen.cpu = cpuOpt;
  // A whole model is a thousand loop nests in one function: LLVM takes
  // minutes on it, seconds on a function per nest.
  codegen.outlineLoops = true;
  // And allocates its intermediate tensors anew on every call.
  codegen.cacheAllocations = true;
  // An unknown --cpu stops here, before the input is read.
  auto features = getCpuVectorFeatures(codegen);
  if (!features)
    return features.takeError();

  TimingScope parsing = timing.nest("Parsing");
  auto buffer = llvm::MemoryBuffer::getFileOrSTDIN(input, /*IsText=*/false);
  if (!buffer)
    return error("cannot read '" + input + "': " + buffer.getError().message());
  sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(sourceMgr, ParserConfig(&context));
  if (!module)
    return error("cannot parse '" + input + "'");
  parsing.stop();

  FailureOr<ModuleAbi> abi = getModuleAbi(*module, prefix);
  if (failed(abi))
    return error("cannot export the functions of '" + input + "'");
  auto readOptions = readModulePipelineOptions(*features);
  if (!readOptions)
    return readOptions.takeError();
  std::unique_ptr<CpuPipelineOptions> options = std::move(*readOptions);
  ThreadRuntime threads = ThreadRuntime::None;
  if (options->parallel)
    threads = options->threadRuntime == OpenMPRuntime::Gnu
                  ? ThreadRuntime::GnuOpenMP
                  : ThreadRuntime::LlvmOpenMP;
  codegen.linkProfileRuntime = options->profile;
  TimingScope pipeline = timing.nest("rpe-cpu-pipeline");
  if (failed(lowerModuleToLLVMDialect(*module, *abi, *options, pipeline)))
    return error("lowering '" + input + "' to the LLVM dialect failed");
  pipeline.stop();

  swin_aot::OutputFiles files;
  if (emit == Emit::Mlir)
    return writeModule(files, *module, output);
  auto llvmContext = std::make_unique<llvm::LLVMContext>();
  auto llvmModule =
      translateToLLVMIR(*module, *llvmContext, prefix, codegen, timing);
  if (!llvmModule)
    return llvmModule.takeError();
  // The LLVM module holds what code generation needs (the weights too).
  module = nullptr;
  if (llvm::Error e = writeCpuCode(files, **llvmModule, emit, output, codegen,
                                   codegenThreads, threads, timing))
    return e;
  // The process ends soon: the LLVM module and its context are left to
  // its end, unfreed (as clang leaves its own). Freeing the constants of a
  // whole model's weights took 0.4 s of CPU for Swin-T.
  llvm::BuryPointer(std::move(*llvmModule));
  llvm::BuryPointer(std::move(llvmContext));
  if (emit != Emit::Llvm) {
    if (llvm::Error e =
            files.write(besideOutput(output, "h"), [&](llvm::raw_ostream &os) {
              emitModuleHeader(*abi, threads, os);
              return llvm::Error::success();
            }))
      return e;
    if (llvm::Error e = files.write(besideOutput(output, "json"),
                                    [&](llvm::raw_ostream &os) {
                                      writeModuleAbiDescription(*abi, os);
                                      return llvm::Error::success();
                                    }))
      return e;
  }
  return files.commit();
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    // The first line is what swin_opt parses (python/swin_opt/tools.py):
    // the module ABI goes on a line of its own.
    os << "swin-aot " << SWIN_VERSION << " (kernel ABI " << kKernelAbiVersion
       << ")\n  module ABI " << kModuleAbiVersion
       << " (--input)\n  rpe dialect; LLVM " LLVM_VERSION_STRING "\n";
  });
  std::string cliErrors;
  llvm::raw_string_ostream cliErrorStream(cliErrors);
  if (!cl::ParseCommandLineOptions(
          argc, argv,
          "swin-aot: Swin window-attention kernels and whole modules ahead "
          "of time\n",
          &cliErrorStream))
    return failCommandLine(cliErrors);
  auto optionName = [](const cl::Option &option) {
    return (option.ArgStr.size() > 1 ? "--" : "-") + option.ArgStr.str();
  };
  // Checked here rather than by cl::Required, whose message goes straight
  // to stderr in LLVM's words.
  // (cl::list overloads operator&: hence std::addressof.)
  bool compileModule = inputOpt.getNumOccurrences();
  SmallVector<cl::Option *> required = {&emitOpt, &outputOpt};
  if (!compileModule)
    required.insert(required.begin(),
                    {std::addressof(windowOpt), &headsOpt, &headDimOpt});
  for (cl::Option *option : required)
    if (!option->getNumOccurrences()) {
      fail(optionName(*option) + " is required (see swin-aot --help)");
      return 2;
    }
  // A module says what it computes: the options that describe a kernel
  // have nothing to describe.
  if (compileModule)
    for (cl::Option *option : std::initializer_list<cl::Option *>{
             std::addressof(windowOpt),
             &headsOpt,
             &headDimOpt,
             &scaleOpt,
             std::addressof(resolutionOpt),
             std::addressof(shiftOpt),
             &tableOpt,
             &layoutOpt,
             &paddingOpt,
             &partitionOpt,
             &packedQkvOpt,
             &cpbMlpOpt,
             &cpbHiddenOpt,
             std::addressof(pretrainedWindowOpt),
             &cosineOpt,
             &classTokenOpt,
             &dtypeOpt,
             &targetOpt,
             &chipOpt,
             &featuresOpt,
             &cudaOpt,
             &vectorWidthOpt,
             &gradOpt,
             &unfusedOpt,
             &kernelOpt,
             &warpsPerBlockOpt,
             &f32MmaOpt})
      if (option->getNumOccurrences()) {
        fail(optionName(*option) +
             " configures a kernel: it does not go with --input (a "
             "module's pipeline takes --pipeline-options)");
        return 2;
      }
  if (!compileModule && pipelineOptionsOpt.getNumOccurrences()) {
    fail("--pipeline-options goes with --input: a kernel's pipeline follows "
         "its configuration");
    return 2;
  }
  if (!compileModule && profileOpt.getNumOccurrences()) {
    fail("--profile goes with --input: it times the ops of a module");
    return 2;
  }

  // lld resets LLVM's command-line options when it runs in-process: keep
  // copies of what is needed after linking.
  const std::string output = outputOpt;
  const Emit emit = emitOpt;
  const bool timingEnabled = timingOpt;
  bool gpuEmit =
      emit == Emit::Ptx || emit == Emit::Cubin || emit == Emit::Fatbin;
  std::optional<KernelConfig> config;
  auto codegenThreads = readCodegenThreads();
  if (!codegenThreads) {
    fail(codegenThreads.takeError());
    return 2;
  }
  if (compileModule) {
    if (gpuEmit)
      return fail("--input compiles for the CPU: --emit must be mlir, llvm, "
                  "obj or so");
  } else {
    auto read = readConfig();
    if (!read)
      return fail(read.takeError());
    config = std::move(*read);
    if (!config->isGpu() && gpuEmit)
      return fail("--emit=ptx, cubin and fatbin need --target=nvptx");
    if (config->isGpu() &&
        (emit == Emit::Llvm || emit == Emit::Obj || emit == Emit::So))
      return fail("--emit must be mlir, ptx, cubin or fatbin for "
                  "--target=nvptx");
  }

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
  DefaultTimingManager timingManager;
  timingManager.setEnabled(timingEnabled);
  timingManager.setDisplayMode(DefaultTimingManager::DisplayMode::Tree);
  llvm::Error error = llvm::Error::success();
  {
    TimingScope timing = timingManager.getRootScope();
    if (compileModule) {
      const std::string input = inputOpt;
      const std::string prefix =
          nameOpt.getNumOccurrences() ? nameOpt : getDefaultPrefix(input);
      error = runModule(context, sourceMgr, input, prefix, emit, output,
                        *codegenThreads, timing);
    } else {
      error = run(context, *config, emit, output, *codegenThreads, timing);
    }
  }
  timingManager.print();
  // Printed: the manager would print an empty report when destroyed.
  timingManager.setEnabled(false);
  if (error)
    return fail(std::move(error));
  return 0;
}
