//===- KernelAbi.cpp - the C ABI of an ahead-of-time kernel ---------------===//
//
//   windows layout: int NAME(q, k, v, table, out, int64_t num_windows)
//   token layout:   int NAME(q, k, v, table, out, int64_t batch, pad_qkv)
//   packed qkv:     int NAME(qkv, table, out, int64_t batch, pad_qkv)
//   cosine:         logit_scale follows the table in each of them
//   nvptx:          the same on CUdeviceptr, plus CUstream stream
//
// and with --grad (padding tokens are zeros; dtable is f32):
//
//   windows layout: int NAME_backward(q, k, v, table, out, dout,
//                                     dq, dk, dv, dtable, int64_t num_windows)
//   token layout:   the same on maps, int64_t batch
//   packed qkv:     int NAME_backward(qkv, table, out, dout, dqkv, dtable,
//                                     int64_t batch)
//   nvptx:          the same on CUdeviceptr, plus CUstream stream
//
// The kernel function of the rpe module takes the buffers it reads in the
// order q, k, v (or qkv), [table], [pad_qkv], out: a baked table and the
// padding rows of a map that needs none are not passed.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Aot/KernelAbi.h"
#include "Rpe/Aot.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

using namespace mlir;
using namespace mlir::rpe;

std::string mlir::rpe::getEntryPointName(const KernelConfig &config,
                                         Direction direction) {
  return direction == Direction::Forward ? config.name
                                         : config.name + "_backward";
}

KernelAbi mlir::rpe::getKernelAbi(const KernelConfig &config,
                                  Direction direction) {
  KernelAbi abi;
  abi.name = getEntryPointName(config, direction);
  abi.target = config.target;
  abi.direction = direction;
  bool backward = direction == Direction::Backward;
  if (!config.hasTokenLayout() && config.isShifted())
    abi.countMultiple = config.windowsPerImage();
  int64_t h = config.heads, n = config.numTokens(), d = config.headDim;
  int64_t c = config.channels(), dyn = kDynamicExtent;
  bool tokens = config.hasTokenLayout();
  ElementKind element = config.elementKind;
  // A buffer the kernel function reads is marked here and numbered below.
  auto buffer = [&](StringRef name, ArgumentRole role,
                    SmallVector<int64_t> shape,
                    bool passed = true) -> AbiArgument & {
    AbiArgument argument;
    argument.name = name.str();
    argument.role = role;
    argument.element = element;
    argument.shape = std::move(shape);
    if (passed)
      argument.kernelOperand = 0;
    abi.arguments.push_back(std::move(argument));
    return abi.arguments.back();
  };

  SmallVector<int64_t> mapShape = {dyn, config.tokensPerImage(), c};
  // q, k, v (or qkv), or their gradients, named with `prefix`.
  auto inputs = [&](StringRef prefix, ArgumentRole role) {
    if (config.packedQkv) {
      buffer((prefix + "qkv").str(), role,
             {dyn, config.tokensPerImage(), 3, h, d})
          .flatShape = {dyn, config.tokensPerImage(), 3 * c};
      return;
    }
    SmallVector<int64_t> shape =
        tokens ? mapShape : SmallVector<int64_t>{dyn, h, n, d};
    for (StringRef name : {"q", "k", "v"})
      buffer((prefix + name).str(), role, shape);
  };
  SmallVector<int64_t> outShape =
      tokens ? mapShape : SmallVector<int64_t>{dyn, n, c};
  inputs("", ArgumentRole::Input);
  buffer("table", ArgumentRole::Table, {config.numTableRows(), h},
         /*passed=*/!config.hasCompileTimeTable())
      .nullable = config.hasCompileTimeTable();
  // Callers keep the logit scale, a parameter, in f32 whatever the element
  // type of the activations. (The gradient has no cosine form.)
  if (config.cosine && !backward)
    buffer("logit_scale", ArgumentRole::LogitScale, {h}).element =
        ElementKind::F32;
  buffer("out", ArgumentRole::Output, outShape).written = !backward;
  if (backward) {
    buffer("dout", ArgumentRole::OutputGradient, outShape);
    inputs("d", ArgumentRole::InputGradient);
    // A sum over every window: f32 whatever the element type.
    buffer("dtable", ArgumentRole::TableGradient, {config.numTableRows(), h})
        .element = ElementKind::F32;
    for (AbiArgument &argument : abi.arguments)
      argument.written = argument.role == ArgumentRole::InputGradient ||
                         argument.role == ArgumentRole::TableGradient;
  }
  AbiArgument count;
  count.name = tokens ? "batch" : "num_windows";
  count.role = ArgumentRole::Count;
  abi.arguments.push_back(count);
  if (tokens && !backward) {
    AbiArgument &pad = buffer("pad_qkv", ArgumentRole::Padding, {3, c},
                              /*passed=*/config.isPadded());
    pad.nullable = true;
    // The CPU entry point takes the padding rows in f32 whatever the
    // element type (they are the qkv bias, which callers keep in f32); the
    // GPU runtime takes device buffers of the element type as they are.
    if (!config.isGpu())
      pad.element = ElementKind::F32;
  }
  // The kernel function takes what it reads in the order inputs, table,
  // logit scale, padding, output (forward) or inputs, table, out, dout,
  // the input gradients, dtable (backward): the C order, without what it
  // does not read.
  unsigned next = 0;
  for (ArgumentRole role :
       {ArgumentRole::Input, ArgumentRole::Table, ArgumentRole::LogitScale,
        ArgumentRole::Padding, ArgumentRole::Output,
        ArgumentRole::OutputGradient, ArgumentRole::InputGradient,
        ArgumentRole::TableGradient})
    for (AbiArgument &argument : abi.arguments)
      if (argument.role == role && argument.kernelOperand)
        argument.kernelOperand = next++;
  if (config.isGpu()) {
    AbiArgument stream;
    stream.name = "stream";
    stream.role = ArgumentRole::Stream;
    abi.arguments.push_back(stream);
  }
  return abi;
}

bool AbiArgument::hasCountExtent() const {
  return llvm::is_contained(shape, kDynamicExtent);
}

std::optional<int64_t> AbiArgument::getSizeInBytes(int64_t count) const {
  int64_t bytes = element == ElementKind::F32 ? 4 : 2;
  for (int64_t extent : shape)
    if (llvm::MulOverflow(bytes, extent == kDynamicExtent ? count : extent,
                          bytes))
      return std::nullopt;
  return bytes;
}

int64_t KernelAbi::getMaxCount() const {
  constexpr int64_t kMaxBytes = std::numeric_limits<int64_t>::max();
  int64_t maxCount = kMaxBytes;
  for (const AbiArgument &argument : arguments) {
    if (!argument.isBuffer() || !argument.hasCountExtent())
      continue;
    // Where one count's buffer does not fit, only none do.
    std::optional<int64_t> bytesPerCount = argument.getSizeInBytes(1);
    maxCount =
        std::min(maxCount, bytesPerCount ? kMaxBytes / *bytesPerCount : 0);
  }
  return maxCount;
}

SmallVector<std::pair<unsigned, unsigned>>
KernelAbi::getDisjointBuffers() const {
  SmallVector<std::pair<unsigned, unsigned>> pairs;
  for (auto [i, written] : llvm::enumerate(arguments)) {
    if (!written.isWritten())
      continue;
    for (auto [j, other] : llvm::enumerate(arguments))
      // Two written buffers are one pair.
      if (j != i && other.kernelOperand && !(other.isWritten() && j < i))
        pairs.push_back({static_cast<unsigned>(i), static_cast<unsigned>(j)});
  }
  return pairs;
}

const AbiArgument &KernelAbi::count() const { return arguments[countIndex()]; }

unsigned KernelAbi::countIndex() const {
  for (auto [i, argument] : llvm::enumerate(arguments))
    if (argument.role == ArgumentRole::Count)
      return i;
  llvm_unreachable("every ABI has a count");
}

SmallVector<const AbiArgument *> KernelAbi::kernelOperands() const {
  SmallVector<const AbiArgument *> operands;
  for (const AbiArgument &argument : arguments)
    if (argument.kernelOperand)
      operands.push_back(&argument);
  llvm::sort(operands, [](const AbiArgument *a, const AbiArgument *b) {
    return *a->kernelOperand < *b->kernelOperand;
  });
  return operands;
}

unsigned KernelAbi::argumentOfKernelOperand(unsigned operand) const {
  for (auto [i, argument] : llvm::enumerate(arguments))
    if (argument.kernelOperand == operand)
      return i;
  llvm_unreachable("no such kernel operand");
}

std::string KernelAbi::cType(const AbiArgument &argument) const {
  bool gpu = target == Target::Nvptx;
  switch (argument.role) {
  case ArgumentRole::Count:
    return "int64_t";
  case ArgumentRole::Stream:
    return "CUstream";
  default:
    break;
  }
  if (gpu)
    return "CUdeviceptr";
  std::string element =
      argument.element == ElementKind::F32 ? "float" : "uint16_t";
  return argument.isWritten() ? element + " *" : "const " + element + " *";
}

std::string KernelAbi::cDeclaration() const {
  std::string declaration = "int " + name + "(";
  for (auto [i, argument] : llvm::enumerate(arguments)) {
    if (i > 0)
      declaration += argument.role == ArgumentRole::Table ||
                             argument.role == ArgumentRole::Padding ||
                             argument.role == ArgumentRole::OutputGradient ||
                             argument.role == ArgumentRole::TableGradient
                         ? ",\n    "
                         : ", ";
    std::string type = cType(argument);
    declaration += type;
    if (!StringRef(type).ends_with("*"))
      declaration += " ";
    declaration += argument.name;
  }
  return declaration + ")";
}

/// The JSON description of `abi`'s arguments.
static llvm::json::Array describeArguments(const KernelAbi &abi) {
  llvm::json::Array arguments;
  for (const AbiArgument &argument : abi.arguments) {
    llvm::json::Object object{{"name", argument.name},
                              {"role", stringifyArgumentRole(argument.role)},
                              {"ctype", abi.cType(argument)}};
    if (argument.isBuffer()) {
      object["dtype"] = stringifyElementKind(argument.element);
      llvm::json::Array shape;
      for (int64_t extent : argument.shape)
        shape.push_back(extent == kDynamicExtent
                            ? llvm::json::Value(abi.count().name)
                            : llvm::json::Value(extent));
      object["shape"] = std::move(shape);
      object["nullable"] = argument.nullable;
      object["used"] = argument.kernelOperand.has_value() ||
                       argument.role == ArgumentRole::Table;
    }
    arguments.push_back(std::move(object));
  }
  return arguments;
}

/// The JSON description of a GPU entry point's launches, from the table
/// its host runtime is written from (GpuRuntime.cpp).
static llvm::json::Array
describeLaunches(const GpuKernel::EntryPoint &entryPoint) {
  llvm::json::Array launches;
  for (const GpuKernel::Launch &launch : entryPoint.launches)
    launches.push_back(llvm::json::Object{
        {"symbol", launch.symbol},
        {"block_size", launch.blockSize},
        {"items_per_block", launch.itemsPerBlock},
        {"grid", launch.grid},
        {"dynamic_shared_bytes", launch.dynamicSharedBytes}});
  return launches;
}

void mlir::rpe::writeAbiDescription(const KernelConfig &config,
                                    llvm::raw_ostream &os,
                                    const GpuKernel *gpuKernel) {
  KernelAbi abi = getKernelAbi(config);
  auto extents = [](ArrayRef<int64_t> values) {
    llvm::json::Array array;
    for (int64_t v : values)
      array.push_back(v);
    return array;
  };
  llvm::json::Object description{
      {"format", "swin-opt-kernel-abi"},
      {"version", kKernelAbiVersion},
      {"name", config.name},
      {"target", stringifyTarget(config.target)},
      {"dtype", stringifyElementKind(config.elementKind)},
      {"layout", stringifyLayout(config.layout)},
      {"packed_qkv", config.packedQkv},
      {"kernel", stringifyKernelStrategy(config.effectiveKernel())},
      {"f32_mma", stringifyF32Mma(config.f32Mma)},
      {"window", extents(config.window)},
      {"heads", config.heads},
      {"head_dim", config.headDim},
      {"scale", static_cast<double>(config.effectiveScale())},
      {"resolution", extents(config.resolution)},
      {"shift", extents(config.shift)},
      {"padding", stringifyPaddingOrder(config.padding)},
      {"partition", stringifyPartition(config.partition)},
      {"windows_per_image", config.windowsPerImage()},
      {"table_rows", config.numTableRows()},
      {"baked_table", config.hasCompileTimeTable()},
      {"cpb_mlp", config.cpbMlp.has_value()},
      {"cosine", config.cosine},
      {"class_token", config.classToken},
      {"count_multiple", abi.countMultiple},
      {"returns", "int32"},
      {"arguments", describeArguments(abi)}};
  if (config.grad)
    description["backward"] = llvm::json::Object{
        {"name", getEntryPointName(config, Direction::Backward)},
        {"arguments",
         describeArguments(getKernelAbi(config, Direction::Backward))}};
  if (gpuKernel)
    for (const GpuKernel::EntryPoint &entryPoint : gpuKernel->entryPoints) {
      llvm::json::Object *entry = entryPoint.direction == Direction::Forward
                                      ? &description
                                      : description.getObject("backward");
      if (entry)
        (*entry)["launches"] = describeLaunches(entryPoint);
    }
  if (config.hasTokenLayout())
    description["tokens_per_image"] = config.tokensPerImage();
  if (config.isGpu())
    description["chip"] = config.chip;
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(description)))
     << "\n";
}
