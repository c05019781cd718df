//===- KernelAbi.cpp - the C ABI of an ahead-of-time kernel ---------------===//
//
//   windows layout: int NAME(q, k, v, table, out, int64_t num_windows)
//   token layout:   int NAME(q, k, v, table, out, int64_t batch, pad_qkv)
//   packed qkv:     int NAME(qkv, table, out, int64_t batch, pad_qkv)
//   cosine:         logit_scale follows the table in each of them
//   nvptx:          the same on CUdeviceptr, plus CUstream stream
//
// The kernel function of the rpe module takes the buffers it reads in the
// order q, k, v (or qkv), [table], [pad_qkv], out: a baked table and the
// padding rows of a map that needs none are not passed.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Aot/KernelAbi.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace mlir::rpe;

StringRef mlir::rpe::stringifyArgumentRole(ArgumentRole role) {
  switch (role) {
  case ArgumentRole::Input:
    return "input";
  case ArgumentRole::Table:
    return "table";
  case ArgumentRole::LogitScale:
    return "logit_scale";
  case ArgumentRole::Padding:
    return "padding";
  case ArgumentRole::Output:
    return "output";
  case ArgumentRole::Count:
    return "count";
  case ArgumentRole::Stream:
    return "stream";
  }
  llvm_unreachable("unknown argument role");
}

KernelAbi mlir::rpe::getKernelAbi(const KernelConfig &config) {
  KernelAbi abi;
  abi.name = config.name;
  abi.target = config.target;
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
  if (config.packedQkv) {
    buffer("qkv", ArgumentRole::Input, {dyn, config.tokensPerImage(), 3, h, d})
        .flatShape = {dyn, config.tokensPerImage(), 3 * c};
  } else {
    SmallVector<int64_t> shape =
        tokens ? mapShape : SmallVector<int64_t>{dyn, h, n, d};
    for (StringRef name : {"q", "k", "v"})
      buffer(name, ArgumentRole::Input, shape);
  }
  buffer("table", ArgumentRole::Table, {config.numTableRows(), h},
         /*passed=*/!config.hasCompileTimeTable())
      .nullable = config.hasCompileTimeTable();
  // Callers keep the logit scale, a parameter, in f32 whatever the element
  // type of the activations.
  if (config.cosine)
    buffer("logit_scale", ArgumentRole::LogitScale, {h}).element =
        ElementKind::F32;
  buffer("out", ArgumentRole::Output,
         tokens ? mapShape : SmallVector<int64_t>{dyn, n, c});
  AbiArgument count;
  count.name = tokens ? "batch" : "num_windows";
  count.role = ArgumentRole::Count;
  abi.arguments.push_back(count);
  if (tokens) {
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
  // logit scale, padding, output.
  unsigned next = 0;
  for (ArgumentRole role :
       {ArgumentRole::Input, ArgumentRole::Table, ArgumentRole::LogitScale,
        ArgumentRole::Padding, ArgumentRole::Output})
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
                             argument.role == ArgumentRole::Padding
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

void mlir::rpe::writeAbiDescription(const KernelConfig &config,
                                    llvm::raw_ostream &os) {
  KernelAbi abi = getKernelAbi(config);
  auto extents = [](ArrayRef<int64_t> values) {
    llvm::json::Array array;
    for (int64_t v : values)
      array.push_back(v);
    return array;
  };
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
  llvm::json::Object description{
      {"format", "swin-opt-kernel-abi"},
      {"version", kKernelAbiVersion},
      {"name", config.name},
      {"target", config.isGpu() ? "nvptx" : "cpu"},
      {"dtype", stringifyElementKind(config.elementKind)},
      {"layout", config.hasTokenLayout() ? "tokens" : "windows"},
      {"packed_qkv", config.packedQkv},
      {"kernel", stringifyKernelStrategy(config.effectiveKernel())},
      {"window", extents(config.window)},
      {"heads", config.heads},
      {"head_dim", config.headDim},
      {"scale", static_cast<double>(config.effectiveScale())},
      {"resolution", extents(config.resolution)},
      {"shift", extents(config.shift)},
      {"padding", stringifyPaddingOrder(config.padding)},
      {"windows_per_image", config.windowsPerImage()},
      {"table_rows", config.numTableRows()},
      {"baked_table", config.hasCompileTimeTable()},
      {"cpb_mlp", config.cpbMlp.has_value()},
      {"cosine", config.cosine},
      {"count_multiple", abi.countMultiple},
      {"returns", "int32"},
      {"arguments", std::move(arguments)}};
  if (config.hasTokenLayout())
    description["tokens_per_image"] = config.tokensPerImage();
  if (config.isGpu())
    description["chip"] = config.chip;
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(description)))
     << "\n";
}
