//===- KernelConfig.h - a Swin attention layer as swin-aot sees it -*- C++
//-*-===//
//
// What one ahead-of-time kernel computes and for which machine: the Swin
// configuration (window, heads, resolution, shift, layout), the element
// type, and the code generation choices. Filled from swin-aot's options or
// by a library user; `validate` checks it before anything is built.
//
//===----------------------------------------------------------------------===//

#ifndef RPE_AOT_KERNELCONFIG_H
#define RPE_AOT_KERNELCONFIG_H

#include "Rpe/KernelEnums.h"
#include "Rpe/RpeDialect.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

#ifndef SWIN_CUDA_TOOLKIT_DEFAULT
#define SWIN_CUDA_TOOLKIT_DEFAULT "/usr/local/cuda"
#endif

namespace mlir::rpe {

// ElementKind, Layout, Target and KernelStrategy, with their spellings in
// options and in the ABI description: Rpe/KernelEnums.td.

/// Which threads run a CPU kernel's (window, head) items, or a module's
/// parallel loops.
enum class ThreadRuntime {
  /// The calling thread only.
  None,
  /// The GNU OpenMP runtime's team (libgomp, the pool PyTorch runs on):
  /// the entry point gives each thread a range of items (rpe-item-range);
  /// a module's loops call GOMP_parallel (rpe-parallel-to-gomp).
  GnuOpenMP,
  /// LLVM's OpenMP runtime (libomp) through upstream's OpenMP lowering:
  /// the unfused reference lowering, whose loops are not one item loop (and
  /// a module compiled with thread-runtime=omp).
  LlvmOpenMP,
};

/// A Swin window-attention layer as the kernel sees it.
struct KernelConfig {
  llvm::SmallVector<int64_t> window;
  int64_t heads = 0;
  int64_t headDim = 0;
  /// Applied to q; head_dim ** -0.5 when unset (1 for cosine attention).
  std::optional<float> scale;
  /// Both empty, or both of the window's rank. Windows layout: the map the
  /// shifted-window mask is built for (a multiple of the window). Tokens
  /// layout: the feature map, padded to whole windows in the order
  /// `padding` says.
  llvm::SmallVector<int64_t> resolution;
  llvm::SmallVector<int64_t> shift;
  Layout layout = Layout::Windows;
  /// Pad, then roll (HF, torchvision, Video Swin), or timm's roll, then pad.
  PaddingOrder padding = PaddingOrder::PadThenShift;
  /// Tokens layout: Swin's blocks, or MaxViT's grid of strided windows
  /// (no shift, no padding), read from the map in place.
  Partition partition = Partition::Block;
  /// Tokens layout: q, k, v as one [batch, L, 3 * C] map, the qkv
  /// projection's output ([batch, L, 3, heads, head_dim]).
  bool packedQkv = false;
  /// A table baked into the kernel, [T, heads] row-major, as f32.
  std::optional<std::vector<float>> table;
  /// SwinV2's continuous position bias MLP, [H, rank] fc1 weight, [H] fc1
  /// bias and [heads, H] fc2 weight (no bias), f32: the table is computed
  /// at compile time (rpe.continuous_position_bias) and baked.
  struct CpbMlp {
    int64_t hidden = 0;
    std::vector<float> weights;
    /// Empty: the window.
    llvm::SmallVector<int64_t> pretrainedWindow;
  };
  std::optional<CpbMlp> cpbMlp;
  /// SwinV2's scaled cosine attention: the entry point takes the raw
  /// per-head `logit_scale` after the table, and `scale` defaults to 1.
  bool cosine = false;
  /// BEiT's class token (windows layout): global attention over the
  /// `window` grid plus a class token first, N = prod(window) + 1, and a
  /// table of T + 3 rows (rpe.lookup's `class_token`).
  bool classToken = false;
  ElementKind elementKind = ElementKind::F32;
  std::string name = "swin_window_attention";
  Target target = Target::Cpu;
  /// Host CPU to generate code for ("native" for this machine).
  std::string cpu = "native";
  /// The fused kernel; unset: the target's default (tiles on the CPU,
  /// warps on the GPU). The GPU kernels also compile for the CPU, to test
  /// them on the host.
  std::optional<KernelStrategy> kernel;
  /// The GPU warp kernel's (window, head) items per block; 0: as many as
  /// fit 48 KiB of static shared memory (at most 4), and the row kernel for
  /// a window whose one warp needs more. Given, the warp kernel takes
  /// dynamic shared memory where it needs it, up to the chip's limit (to
  /// measure it against the row kernel on a GPU; kernel warps on the CPU
  /// emulates those blocks).
  int64_t warpsPerBlock = 0;
  /// Whether the warp kernel takes f32 q, k, v, as bf16 terms on the tensor
  /// cores (bf16x3: 2^-16 of each product, what a user who allows TF32
  /// allows; bf16x6: f32's precision), or leaves f32 to the row kernel
  /// (none).
  F32Mma f32Mma = F32Mma::None;
  /// GPU architecture and PTX features (nvptx); empty features: the least
  /// PTX version the chip needs.
  std::string chip = "sm_90";
  std::string ptxFeatures;
  /// CUDA toolkit for libdevice and ptxas (nvptx).
  std::string cudaToolkit = SWIN_CUDA_TOOLKIT_DEFAULT;
  /// Run windows x heads on all cores (OpenMP; see threadRuntime).
  bool parallel = true;
  /// f32 lanes of the CPU micro-kernels; 0: 16 where the CPU has AVX-512,
  /// else 8. bf16 kernels at 16 lanes take AVX512-BF16 dot products where
  /// the CPU has them.
  int64_t vectorWidth = 0;
  /// Fuse the bias gather and the mask into the softmax (false: the unfused
  /// reference lowering, for comparison).
  bool fuse = true;
  /// Also the gradient's entry point, NAME_backward (fused): the CPU tiles
  /// kernel (f32), or the GPU's warp program (nvptx, and on the CPU with
  /// kernel warps, emulated; f32, f16, bf16).
  bool grad = false;

  bool isGpu() const { return target == Target::Nvptx; }
  bool hasTokenLayout() const { return layout == Layout::Tokens; }
  bool hasResolution() const { return !resolution.empty(); }
  /// The table is known at compile time (given, or from the CPB MLP): the
  /// kernel does not read the table argument.
  bool hasCompileTimeTable() const { return table || cpbMlp; }
  /// Floats of the CPB weight file: fc1 weight and bias, fc2 weight.
  int64_t numCpbWeights() const;
  /// A non-zero shift: the kernel applies Swin's shifted-window mask.
  bool isShifted() const;
  int64_t numTokens() const;
  int64_t numTableRows() const;
  int64_t channels() const { return heads * headDim; }
  /// The map the windows tile: the resolution padded to whole windows.
  llvm::SmallVector<int64_t> paddedResolution() const;
  /// Tokens layout on a map that needs padding.
  bool isPadded() const;
  /// Windows per image; 1 without a resolution.
  int64_t windowsPerImage() const;
  /// Tokens per image (L); tokens layout only.
  int64_t tokensPerImage() const;
  float effectiveScale() const;
  /// The kernel that computes the attention: the configured one, else the
  /// target's default.
  KernelStrategy effectiveKernel() const;
  /// The gradient is the GPU's warp program (GpuBackwardKernel.cpp), for
  /// the GPU or emulated on the CPU, rather than the CPU tiles kernel.
  bool hasWarpGradient() const {
    return grad && (isGpu() || effectiveKernel() == KernelStrategy::Warps);
  }
  /// The threads of a CPU kernel: the GNU OpenMP team for the fused
  /// kernels, LLVM's OpenMP for the unfused lowering, none without
  /// `parallel`.
  ThreadRuntime threadRuntime() const;
};

/// Swin's rule for small maps: along an axis where the resolution is not
/// larger than the window, the window shrinks to the resolution and the
/// shift is 0 (the table must then be the effective window's).
void applySmallMapRule(KernelConfig &config);

/// Checks a configuration; the error is one line naming the bad option.
llvm::Error validate(const KernelConfig &config);

} // namespace mlir::rpe

#endif // RPE_AOT_KERNELCONFIG_H
