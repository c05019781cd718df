//===- KernelConfig.cpp - configurations of ahead-of-time kernels ---------===//
//
// The derived quantities of a configuration (tokens, table rows, windows
// per image, the padded map) and its validation, whose errors name the
// swin-aot option at fault.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Aot/KernelConfig.h"
#include "Rpe/NvptxTarget.h"
#include "Rpe/WindowGeometry.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace mlir::rpe;

int64_t KernelConfig::numTokens() const {
  return getNumTokens(window, classToken);
}
int64_t KernelConfig::numTableRows() const {
  return getNumTableRows(window, classToken);
}
bool KernelConfig::isShifted() const {
  return llvm::any_of(shift, [](int64_t s) { return s != 0; });
}
SmallVector<int64_t> KernelConfig::paddedResolution() const {
  return getPaddedResolution(resolution, window);
}
bool KernelConfig::isPadded() const {
  return hasTokenLayout() && paddedResolution() != resolution;
}
int64_t KernelConfig::windowsPerImage() const {
  return hasResolution() ? getNumWindows(paddedResolution(), window) : 1;
}
int64_t KernelConfig::tokensPerImage() const {
  int64_t count = 1;
  for (int64_t n : resolution)
    count *= n;
  return count;
}
float KernelConfig::effectiveScale() const {
  if (scale)
    return *scale;
  return cosine ? 1.0f : 1.0f / std::sqrt(static_cast<float>(headDim));
}
int64_t KernelConfig::numCpbWeights() const {
  int64_t hidden = cpbMlp ? cpbMlp->hidden : 0;
  return hidden * static_cast<int64_t>(window.size()) + hidden + heads * hidden;
}
KernelStrategy KernelConfig::effectiveKernel() const {
  if (kernel)
    return *kernel;
  return isGpu() ? KernelStrategy::Warps : KernelStrategy::Tiles;
}

ThreadRuntime KernelConfig::threadRuntime() const {
  if (!parallel)
    return ThreadRuntime::None;
  return fuse ? ThreadRuntime::GnuOpenMP : ThreadRuntime::LlvmOpenMP;
}

void mlir::rpe::applySmallMapRule(KernelConfig &config) {
  if (config.resolution.size() != config.window.size() ||
      config.shift.size() != config.window.size())
    return;
  for (size_t axis = 0; axis < config.window.size(); ++axis)
    if (config.resolution[axis] > 0 &&
        config.resolution[axis] <= config.window[axis]) {
      config.window[axis] = config.resolution[axis];
      config.shift[axis] = 0;
    }
}

static llvm::Error configError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Error mlir::rpe::validate(const KernelConfig &config) {
  if (auto error = checkWindow(config.window))
    return configError("--window: " + *error);
  constexpr int64_t kMaxHeads = 4096, kMaxHeadDim = 4096;
  if (config.heads < 1 || config.heads > kMaxHeads)
    return configError(llvm::formatv("--heads must be in [1, {0}], got {1}",
                                     kMaxHeads, config.heads));
  if (config.headDim < 1 || config.headDim > kMaxHeadDim)
    return configError(llvm::formatv("--head-dim must be in [1, {0}], got {1}",
                                     kMaxHeadDim, config.headDim));
  if (config.scale && (!std::isfinite(*config.scale) || *config.scale == 0.0f))
    return configError("--scale must be finite and non-zero");
  if (config.shift.empty() != config.resolution.empty())
    return configError("--shift and --resolution go together");
  if (config.packedQkv && !config.hasTokenLayout())
    return configError("--packed-qkv needs --layout=tokens");
  if (config.hasTokenLayout()) {
    if (!config.hasResolution())
      return configError("--layout=tokens needs --resolution (the feature "
                         "map)");
    if (auto error =
            checkFeatureMap(config.resolution, config.window, config.shift))
      return configError("--resolution/--shift: " + *error);
    if (config.partition == Partition::Grid)
      if (auto error = checkGridPartition(config.resolution, config.window,
                                          config.shift))
        return configError("--partition=grid: " + *error);
  } else if (config.partition == Partition::Grid) {
    return configError("--partition=grid needs --layout=tokens (the kernel "
                       "reads the grid from the map)");
  } else if (config.hasResolution()) {
    if (auto error = checkShift(config.resolution, config.window, config.shift))
      return configError("--resolution/--shift: " + *error +
                         " (--layout=tokens pads the map)");
  }
  if (config.table && static_cast<int64_t>(config.table->size()) !=
                          config.numTableRows() * config.heads)
    return configError(llvm::formatv(
        "--table holds {0} floats, expected {1} ([{2}, {3}] for window "
        "{4}{5})",
        config.table->size(), config.numTableRows() * config.heads,
        config.numTableRows(), config.heads,
        llvm::join(llvm::map_range(config.window,
                                   [](int64_t w) { return std::to_string(w); }),
                   "x"),
        config.classToken ? " and a class token" : ""));
  if (config.cpbMlp) {
    const KernelConfig::CpbMlp &mlp = *config.cpbMlp;
    if (!config.cosine)
      return configError("--cpb-mlp is SwinV2's bias: it needs --cosine");
    if (config.table)
      return configError("--table and --cpb-mlp both give the table; pass one");
    constexpr int64_t kMaxHidden = 1 << 16;
    if (mlp.hidden < 1 || mlp.hidden > kMaxHidden)
      return configError(llvm::formatv(
          "--cpb-hidden must be in [1, {0}], got {1}", kMaxHidden, mlp.hidden));
    if (static_cast<int64_t>(mlp.weights.size()) != config.numCpbWeights())
      return configError(llvm::formatv(
          "--cpb-mlp holds {0} floats, expected {1} (fc1.weight [{2}, {3}], "
          "fc1.bias [{2}], fc2.weight [{4}, {2}])",
          mlp.weights.size(), config.numCpbWeights(), mlp.hidden,
          config.window.size(), config.heads));
    if (!mlp.pretrainedWindow.empty() &&
        (mlp.pretrainedWindow.size() != config.window.size() ||
         llvm::any_of(mlp.pretrainedWindow, [](int64_t p) { return p < 1; })))
      return configError(llvm::formatv(
          "--pretrained-window must have {0} positive extents, like --window",
          config.window.size()));
  }
  if (config.vectorWidth && config.vectorWidth != 4 &&
      config.vectorWidth != 8 && config.vectorWidth != 16)
    return configError(llvm::formatv(
        "--vector-width must be 4, 8 or 16, got {0}", config.vectorWidth));
  if (config.isGpu() && config.kernel == KernelStrategy::Tiles)
    return configError("--kernel must be warps or rows for --target=nvptx, "
                       "got 'tiles'");
  if (config.warpsPerBlock < 0 || config.warpsPerBlock > 32)
    return configError(llvm::formatv(
        "--warps-per-block must be 1 to 32 (0: the kernel's choice), got {0}",
        config.warpsPerBlock));
  if (config.warpsPerBlock &&
      config.effectiveKernel() != KernelStrategy::Warps)
    return configError("--warps-per-block sizes the blocks of the GPU's warp "
                       "kernel: it takes --kernel=warps (--target=nvptx's "
                       "default; on the CPU, the warps emulated)");
  if (config.f32Mma != F32Mma::None &&
      (config.elementKind != ElementKind::F32 ||
       config.effectiveKernel() != KernelStrategy::Warps))
    return configError("--f32-mma puts f32 operands on the warp kernel's "
                       "tensor cores: it takes --dtype=f32 and --kernel=warps "
                       "(--target=nvptx's default; on the CPU, the warps "
                       "emulated)");
  if (config.isGpu()) {
    // The chip and its PTX features, checked before anything is built.
    llvm::Expected<NvptxTarget> target =
        parseNvptxTarget(config.chip, config.ptxFeatures);
    if (!target)
      return configError("--chip/--features: " +
                         llvm::toString(target.takeError()));
  }
  if (config.isGpu() && config.hasCompileTimeTable())
    return configError("--table/--cpb-mlp bake the table into a CPU kernel; "
                       "the GPU kernels take it as an argument (omit them)");
  if (config.classToken) {
    // BEiT attends globally over its patch grid: no windows of a map.
    if (config.hasTokenLayout() || config.hasResolution())
      return configError("--class-token is global attention over the window "
                         "grid: it takes the windows layout, no --resolution "
                         "or --shift");
    if (config.cosine)
      return configError("--class-token: the cosine attention (--cosine) has "
                         "no class-token form");
  }
  if (config.isGpu() && config.numTokens() > 1024)
    return configError(llvm::formatv(
        "--target=nvptx: a window of {0} tokens exceeds the 1024 threads of "
        "a GPU block",
        config.numTokens()));
  if (config.grad) {
    // The CPU tiles gradient takes f32 operands; the GPU's warp program
    // (also emulated on the CPU) f32, f16 and bf16.
    if (config.elementKind != ElementKind::F32 && !config.hasWarpGradient())
      return configError("--grad needs --dtype=f32 on the CPU, got " +
                         stringifyElementKind(config.elementKind) +
                         " (--kernel=warps runs the GPU's backward, which "
                         "takes f16 and bf16)");
    if (!config.fuse)
      return configError("--grad has no unfused form; drop --unfused");
    if (config.cosine)
      return configError("--grad: the cosine attention (--cosine) has no "
                         "backward kernel yet");
  }
  auto isIdentifierChar = [](char c) { return llvm::isAlnum(c) || c == '_'; };
  if (config.name.empty() || llvm::isDigit(config.name[0]) ||
      !llvm::all_of(config.name, isIdentifierChar))
    return configError("--name must be a C identifier, got '" + config.name +
                       "'");
  return llvm::Error::success();
}
