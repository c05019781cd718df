// A whole exported timm block (test/Transforms/Inputs/raise) through
// rpe-gpu-pipeline: the raised, fused attention becomes the one kernel
// (rows: f32), everything else stays on the host (GELU's erf calls libm),
// and ptxas (format=bin) assembles the kernel.
// REQUIRES: ptxas
// RUN: swin-opt %S/../Transforms/Inputs/raise/timm_swin_block_shifted.mlir --rpe-gpu-pipeline="format=none toolkit=%cuda_toolkit" | FileCheck %s
// CHECK: llvm.func @forward(
// CHECK: gpu.launch_func @forward_kernel::@forward_kernel
// CHECK: llvm.call @erff(
// CHECK: gpu.module @forward_kernel
// CHECK-NOT: gpu.module
// RUN: swin-opt %S/../Transforms/Inputs/raise/timm_swin_block_shifted.mlir --rpe-gpu-pipeline="format=bin toolkit=%cuda_toolkit" | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=BIN
// BIN: define void @_mlir_ciface_forward(

// timm's WindowAttention with a run-time mask: the fused kernel reads the
// mask operand (rows), and ptxas assembles it.
// RUN: swin-opt %S/../Transforms/Inputs/raise/timm_window_attention_mask.mlir --rpe-gpu-pipeline="format=bin toolkit=%cuda_toolkit" | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=MASK
// MASK: define void @_mlir_ciface_forward(
