//===- GpuRuntime.cpp - the host runtime of an ahead-of-time GPU kernel ---===//
//
// NAME.c is the checked-in runtime (runtime/GpuRuntime.c, embedded at build
// time) followed by the kernel's data: its image, then per entry point
// (NAME; NAME_backward with --grad) the checks on each C argument, their
// sizes and the pairs that must not overlap (the ABI's), its launches with
// their parameter tables (which C argument, or the scratch, each memref
// parameter views, with what shape and strides) and grids, and the scratch
// it needs; then the entry point with the ABI's signature, which only
// gathers its device pointers and calls swin_rt_launch.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Aot.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::rpe;

/// The text of runtime/GpuRuntime.c.
static const char kGpuRuntimeSource[] =
#include "GpuRuntimeSource.inc"
    ;

/// `{a, b, c}` of int64 values.
static std::string braced(ArrayRef<int64_t> values) {
  return "{" +
         llvm::join(llvm::map_range(
                        values, [](int64_t v) { return std::to_string(v); }),
                    ", ") +
         "}";
}

/// The runtime's checks on a device-pointer argument.
static std::string getArgumentChecks(const AbiArgument &argument) {
  SmallVector<StringRef> checks;
  if (!argument.nullable)
    checks.push_back("SWIN_RT_NONNULL");
  // The kernels move q, k, v, out and the padding rows in 16-byte vectors.
  if (argument.role != ArgumentRole::Table)
    checks.push_back("SWIN_RT_ALIGNED");
  if (argument.role == ArgumentRole::Padding && argument.kernelOperand)
    checks.push_back("SWIN_RT_ZEROS_IF_NULL");
  return checks.empty() ? "SWIN_RT_UNCHECKED" : llvm::join(checks, " | ");
}

/// One entry point's tables, its kernel description and its function.
static void emitEntryPoint(const KernelConfig &config,
                           const GpuKernel::EntryPoint &entryPoint,
                           llvm::raw_ostream &os) {
  KernelAbi abi = getKernelAbi(config, entryPoint.direction);
  const std::string &name = abi.name;
  // The entry point's device pointers: the ABI's buffers, in order.
  SmallVector<const AbiArgument *> pointers;
  SmallVector<int> pointerOfArgument(abi.arguments.size(), -1);
  for (auto [i, argument] : llvm::enumerate(abi.arguments))
    if (argument.isBuffer()) {
      pointerOfArgument[i] = pointers.size();
      pointers.push_back(&argument);
    }
  os << "/*===--- entry point " << name << " ---===*/\n\n"
     << "static const char *const " << name << "_argument_names[] = {"
     << llvm::join(llvm::map_range(pointers,
                                   [](const AbiArgument *argument) {
                                     return "\"" + argument->name + "\"";
                                   }),
                   ", ")
     << "};\n"
     << "static const int " << name << "_argument_checks[] = {"
     << llvm::join(llvm::map_range(pointers,
                                   [](const AbiArgument *argument) {
                                     return getArgumentChecks(*argument);
                                   }),
                   ", ")
     << "};\n";
  // Each buffer's size: per unit of the count, or in all. (Where one
  // count's buffer does not fit in int64_t, the count limit is 0.)
  os << "static const struct swin_rt_size " << name << "_argument_sizes[] = {";
  for (auto [i, argument] : llvm::enumerate(pointers))
    os << (i ? ", " : "") << "{" << argument->getSizeInBytes(1).value_or(0)
       << ", " << (argument->hasCountExtent() ? 1 : 0) << "}";
  os << "};\n";
  SmallVector<std::pair<unsigned, unsigned>> disjoint =
      abi.getDisjointBuffers();
  os << "static const struct swin_rt_pair " << name << "_disjoint[] = {";
  for (auto [i, pair] : llvm::enumerate(disjoint))
    os << (i ? ", " : "") << "{" << pointerOfArgument[pair.first] << ", "
       << pointerOfArgument[pair.second] << "}";
  os << "};\n";
  for (auto [l, launch] : llvm::enumerate(entryPoint.launches)) {
    os << "static const struct swin_rt_param " << name << "_params_" << l
       << "[] = {\n";
    for (const GpuKernel::Param &param : launch.params) {
      bool scratch = param.argument == GpuKernel::kScratch;
      os << "    {"
         << (scratch ? "SWIN_RT_SCRATCH"
                     : std::to_string(pointerOfArgument[param.argument]))
         << ", " << param.offset << ", " << param.shape.size() << ", "
         << braced(param.shape) << ", " << braced(param.strides) << "}, /* "
         << (scratch ? "scratch" : abi.arguments[param.argument].name)
         << " */\n";
    }
    os << "};\n";
  }
  os << "static const struct swin_rt_launch_info " << name
     << "_launches[] = {\n";
  for (auto [l, launch] : llvm::enumerate(entryPoint.launches)) {
    os << "    {.symbol = \"" << launch.symbol << "\",\n"
       << "     .num_params = " << launch.params.size() << ",\n"
       << "     .params = " << name << "_params_" << l << ",\n"
       << "     .block_size = " << launch.blockSize << ",\n"
       << "     .items_per_block = " << launch.itemsPerBlock << ",\n"
       << "     .grid = " << launch.grid;
    // Static shared memory leaves the field at 0, unwritten.
    if (launch.dynamicSharedBytes)
      os << ",\n     .dynamic_shared_bytes = " << launch.dynamicSharedBytes;
    os << "},\n";
  }
  os << "};\n\n";

  int64_t zeroBytes = 0;
  if (config.isPadded() && entryPoint.direction == Direction::Forward)
    zeroBytes = 3 * config.channels() *
                (config.elementKind == ElementKind::F32 ? 4 : 2);
  int64_t windowsPerCount =
      config.hasTokenLayout() ? config.windowsPerImage() : 1;
  os << "static const struct swin_rt_kernel " << name << "_kernel = {\n"
     << "    .name = \"" << name << "\",\n"
     << "    .image = " << config.name << "_image,\n"
     << "    .num_arguments = " << pointers.size() << ",\n"
     << "    .argument_names = " << name << "_argument_names,\n"
     << "    .argument_checks = " << name << "_argument_checks,\n"
     << "    .argument_sizes = " << name << "_argument_sizes,\n"
     << "    .num_disjoint = " << disjoint.size() << ",\n"
     << "    .disjoint = " << name << "_disjoint,\n"
     << "    .zero_bytes = " << zeroBytes << ",\n"
     << "    .max_count = " << getCountLimit(config, entryPoint.direction)
     << ",\n"
     << "    .count_multiple = " << abi.countMultiple << ",\n"
     << "    .windows_per_count = " << windowsPerCount << ",\n"
     << "    .heads = " << config.heads << ",\n"
     << "    .scratch_bytes_per_item = " << entryPoint.scratchBytesPerItem
     << ",\n"
     << "    .num_launches = " << entryPoint.launches.size() << ",\n"
     << "    .launches = " << name << "_launches,\n"
     << "};\n"
     << "static struct swin_rt_state " << name << "_state = SWIN_RT_STATE_INIT("
     << config.name << "_error);\n\n"
     << abi.cDeclaration() << " {\n"
     << "  CUdeviceptr arguments[] = {"
     << llvm::join(llvm::map_range(pointers,
                                   [](const AbiArgument *argument) {
                                     return argument->name;
                                   }),
                   ", ")
     << "};\n"
     << "  return swin_rt_launch(&" << name << "_kernel, &" << name
     << "_state, arguments, " << abi.count().name << ", stream);\n"
     << "}\n\n";
}

void mlir::rpe::emitGpuRuntime(const KernelConfig &config,
                               const GpuKernel &kernel,
                               llvm::StringRef headerName,
                               llvm::raw_ostream &os) {
  const std::string &name = config.name;
  os << "/* Generated by swin-aot. Do not edit.\n"
     << " * Host runtime of " << name << " (CUDA driver API): loads the "
     << config.chip << " kernel embedded below\n"
     << " * once per CUDA context (device) and launches it. Build with\n"
     << " *   cc -c " << name << ".c -I<cuda>/include    (link -lcuda)\n"
     << " */\n"
     << "#include \"" << headerName << "\"\n\n"
     << kGpuRuntimeSource << "\n"
     << "/*===--- " << name << " ---===*/\n\n"
     << "static const unsigned char " << name << "_image[] = {";
  for (size_t i = 0; i < kernel.image.size(); ++i)
    os << (i % 16 ? " " : "\n    ")
       << llvm::formatv("0x{0:x-2},",
                        static_cast<unsigned char>(kernel.image[i]));
  os << "\n    0x00};\n\n"
     << "static char " << name << "_error[SWIN_RT_ERROR_BYTES];\n\n"
     << "const char *" << name << "_last_error(void) { return " << name
     << "_error; }\n\n";
  for (const GpuKernel::EntryPoint &entryPoint : kernel.entryPoints)
    emitEntryPoint(config, entryPoint, os);
}
