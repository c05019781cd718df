//===- KernelEnums.td - the choices of the kernel builders -*- tablegen -*-===//
//
// The enums that options, generated files and their readers spell: which
// kernel, where it runs, what the GPU pipeline leaves, and what swin-aot's
// configuration and C ABI name. Declared here so that their spellings are
// generated once (stringifyX / symbolizeX, Rpe/KernelEnums.h) and every
// pass option, pipeline option, swin-aot option and JSON field uses them.
//
// They are not attributes of the rpe dialect (that is #rpe.padding, in
// RpeAttrs.td): this file has a TableGen run of its own, so that the
// dialect's documentation does not list them.
//
//===----------------------------------------------------------------------===//

#ifndef RPE_KERNEL_ENUMS_TD
#define RPE_KERNEL_ENUMS_TD

include "mlir/IR/EnumAttr.td"

class Rpe_Enum<string name, string summary, list<EnumCase> cases>
    : I32Enum<name, summary, cases> {
  let cppNamespace = "::mlir::rpe";
}

//===----------------------------------------------------------------------===//
// Code generation: rpe-lower-fused-attention and the pipelines
//===----------------------------------------------------------------------===//

// Spelt `kernel=` by the pipelines and rpe-lower-fused-attention, `--kernel`
// by swin-aot, "kernel" in the ABI description. The order is the one
// swin-aot lists.
def Rpe_KernelStrategy : Rpe_Enum<"KernelStrategy",
    "which kernel computes a fused window attention", [
      // The CPU kernel: register-blocked FMA tiles over a packed kᵀ.
      I32EnumCase<"Tiles", 0, "tiles">,
      // A warp per (window, head) on tensor-core tiles (rows where the op
      // does not qualify).
      I32EnumCase<"Warps", 1, "warps">,
      // One online softmax per query row (the GPU: a thread per row).
      I32EnumCase<"Rows", 2, "rows">
    ]>;

// Spelt `f32-mma=` by the pipelines and rpe-lower-fused-attention,
// `--f32-mma` by swin-aot, "f32_mma" in the ABI description.
def Rpe_F32Mma : Rpe_Enum<"F32Mma",
    "whether the warp kernel takes f32 q, k, v, and how", [
      // It does not: f32 ops take the row kernel (f32 FMAs).
      I32EnumCase<"None", 0, "none">,
      // Each operand the sum of two bf16 terms, x = x0 + x1, and three
      // products per mma (x1 y0 + x0 y1 + x0 y0): 2^-16 of each product,
      // finer than TF32's 2^-11.
      I32EnumCase<"Bf16x3", 1, "bf16x3">,
      // Three bf16 terms, the six products of orders i + j < 3: f32's
      // 2^-24.
      I32EnumCase<"Bf16x6", 2, "bf16x6">
    ]>;

def Rpe_KernelTarget : Rpe_Enum<"KernelTarget",
    "where the emitted kernel runs", [
      // scf.parallel loops on the host; warps emulated by 32-lane vectors.
      I32EnumCase<"Host", 0, "host">,
      // One gpu.launch.
      I32EnumCase<"Gpu", 1, "gpu">
    ]>;

// The spelling is upstream gpu-module-to-binary's `format`.
def Rpe_GpuBinaryFormat : Rpe_Enum<"GpuBinaryFormat",
    "what rpe-gpu-pipeline and rpe-gpu-module-to-binary leave in a "
    "gpu.binary", [
      // PTX.
      I32EnumCase<"Isa", 0, "isa">,
      // A cubin, from the toolkit's ptxas.
      I32EnumCase<"Bin", 1, "bin">,
      // A fatbin (cubin and PTX), from ptxas and fatbinary.
      I32EnumCase<"Fatbin", 2, "fatbin">,
      // No binary: the gpu.module stays in the NVVM dialect.
      I32EnumCase<"None", 3, "none">
    ]>;

// Spelt `thread-runtime=` by rpe-cpu-pipeline.
def Rpe_OpenMPRuntime : Rpe_Enum<"OpenMPRuntime",
    "the OpenMP runtime that runs rpe-cpu-pipeline's parallel loops", [
      // GNU libgomp, the runtime PyTorch's pool is: GOMP_parallel calls
      // (rpe-parallel-to-gomp).
      I32EnumCase<"Gnu", 0, "gomp">,
      // LLVM's libomp, through upstream's OpenMP dialect
      // (convert-scf-to-openmp).
      I32EnumCase<"Llvm", 1, "omp">
    ]>;

//===----------------------------------------------------------------------===//
// swin-aot: the configuration (Rpe/Aot/KernelConfig.h) and the C ABI
// (Rpe/Aot/KernelAbi.h); the JSON description spells them as here.
//===----------------------------------------------------------------------===//

def Rpe_ElementKind : Rpe_Enum<"ElementKind",
    "the element type of q, k, v, the table and the output", [
      I32EnumCase<"F32", 0, "f32">,
      I32EnumCase<"F16", 1, "f16">,
      I32EnumCase<"BF16", 2, "bf16">
    ]>;

def Rpe_Layout : Rpe_Enum<"Layout", "where q, k, v and the output live", [
      // [num_windows, heads, N, head_dim] in, [num_windows, N, C] out: the
      // caller has shifted and partitioned the map.
      I32EnumCase<"Windows", 0, "windows">,
      // [batch, L, C] feature maps in image order: the kernel shifts, pads
      // and partitions by addressing.
      I32EnumCase<"Tokens", 1, "tokens">
    ]>;

def Rpe_Target : Rpe_Enum<"Target", "what a kernel is compiled for", [
      // The host CPU: a C entry point on host pointers.
      I32EnumCase<"Cpu", 0, "cpu">,
      // An NVIDIA GPU: PTX/cubin/fatbin plus a C host runtime on the CUDA
      // driver API.
      I32EnumCase<"Nvptx", 1, "nvptx">
    ]>;

def Rpe_ArgumentRole : Rpe_Enum<"ArgumentRole",
    "what an argument of a kernel's C entry point is", [
      // q, k, v, or the packed qkv map.
      I32EnumCase<"Input", 0, "input">,
      // The compact relative position bias table [T, heads].
      I32EnumCase<"Table", 1, "table">,
      // SwinV2's raw per-head logit scale [heads], f32 (cosine attention).
      I32EnumCase<"LogitScale", 2, "logit_scale">,
      // The q, k and v of padding tokens [3, C] (token layout).
      I32EnumCase<"Padding", 3, "padding">,
      // The result.
      I32EnumCase<"Output", 4, "output">,
      // num_windows (windows layout) or batch (token layout): the dynamic
      // extent of every buffer that has one.
      I32EnumCase<"Count", 5, "count">,
      // The CUDA stream the GPU kernel is queued on.
      I32EnumCase<"Stream", 6, "stream">,
      // Backward: the gradient of the output (read, `out`'s layout).
      I32EnumCase<"OutputGradient", 7, "output_gradient">,
      // Backward: the gradients of q, k, v (or qkv), in their layout.
      I32EnumCase<"InputGradient", 8, "input_gradient">,
      // Backward: the table's gradient [T, heads], summed over all windows.
      I32EnumCase<"TableGradient", 9, "table_gradient">
    ]>;

#endif // RPE_KERNEL_ENUMS_TD
