// RUN: swin-opt %s --rpe-gpu-pipeline="format=none" | FileCheck %s --check-prefix=NVVM
// RUN: swin-opt %s --rpe-gpu-pipeline="toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=PTX
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_80 toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=SM80

// No index, bias or mask exists as data: no constant tables at all.
// NVVM-NOT: global
// The host allocates the result and launches the kernel.
// NVVM: llvm.func @attention(
// NVVM: gpu.launch_func @attention_kernel::@attention_kernel
// The fused kernel in the NVVM dialect, a block per (window, head), a thread per query
// row (49 rows in 64 threads), exp from libdevice.
// NVVM: gpu.module @attention_kernel [#nvvm.target<O = 3, chip = "sm_90", features = "+ptx78">]
// NVVM: llvm.func @__nv_expf(f32) -> f32
// NVVM: llvm.func @attention_kernel(
// NVVM-SAME: known_block_size = array<i32: 64, 1, 1>
// NVVM: nvvm.read.ptx.sreg.ctaid.x
// NVVM: nvvm.read.ptx.sreg.tid.x
// NVVM: llvm.call @__nv_expf

// PTX: gpu.binary @attention_kernel [#gpu.object<#nvvm.target<O = 3, chip = "sm_90", features = "+ptx78">
// PTX-SAME: assembly = "{{.*}}.target sm_90{{.*}}.visible .entry attention_kernel(
// SM80: .target sm_80

func.func @attention(%q: tensor<?x3x49x32xf32>, %k: tensor<?x3x49x32xf32>, %v: tensor<?x3x49x32xf32>,
                     %t: tensor<169x3xf32>) -> tensor<?x49x96xf32> {
  %b = rpe.lookup %t {window = array<i64: 7, 7>} : tensor<169x3xf32> -> tensor<3x49x49xf32>
  %m = rpe.shift_mask {resolution = array<i64: 14, 14>, window = array<i64: 7, 7>, shift = array<i64: 3, 3>} : tensor<4x49x49xf32>
  %0 = rpe.window_attention ins(%q, %k, %v : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>)
         bias(%b : tensor<3x49x49xf32>) mask(%m : tensor<4x49x49xf32>) -> tensor<?x49x96xf32>
  return %0 : tensor<?x49x96xf32>
}
