// RUN: swin-opt %s --rpe-gpu-pipeline="format=none" | FileCheck %s --check-prefix=NVVM
// RUN: swin-opt %s --rpe-gpu-pipeline="toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=PTX
// RUN: swin-opt %s --rpe-gpu-pipeline="kernel=rows format=none" | FileCheck %s --check-prefix=ROWS

// f16 Swin-T stage 1 attention through rpe-gpu-pipeline: the tensor-core
// kernel, three warps (one (window, head) each) per block of 96 threads, its
// shared memory as workgroup globals, mma.sync, quad shuffles, 2^x from
// libdevice.
// NVVM: llvm.func @attention(
// NVVM: gpu.launch_func @attention_kernel::@attention_kernel
// NVVM: gpu.module @attention_kernel
// NVVM: llvm.func @__nv_exp2f(f32) -> f32
// NVVM: llvm.func @attention_kernel(
// NVVM-SAME: known_block_size = array<i32: 96, 1, 1>
// NVVM: llvm.mlir.addressof @{{.*}} : !llvm.ptr<3>
// NVVM: nvvm.mma.sync
// NVVM: nvvm.shfl.sync  bfly
// NVVM: llvm.call @__nv_exp2f

// PTX: assembly = "{{.*}}shfl.sync.bfly.b32
// PTX-SAME: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32

// ROWS: known_block_size = array<i32: 64, 1, 1>
// ROWS-NOT: nvvm.mma.sync

func.func @attention(%q: tensor<?x3x49x32xf16>, %k: tensor<?x3x49x32xf16>, %v: tensor<?x3x49x32xf16>,
                     %t: tensor<169x3xf16>) -> tensor<?x49x96xf16> {
  %b = rpe.lookup %t {window = array<i64: 7, 7>} : tensor<169x3xf16> -> tensor<3x49x49xf16>
  %m = rpe.shift_mask {resolution = array<i64: 14, 14>, window = array<i64: 7, 7>, shift = array<i64: 3, 3>} : tensor<4x49x49xf16>
  %0 = rpe.window_attention ins(%q, %k, %v : tensor<?x3x49x32xf16>, tensor<?x3x49x32xf16>, tensor<?x3x49x32xf16>)
         bias(%b : tensor<3x49x49xf16>) mask(%m : tensor<4x49x49xf16>) -> tensor<?x49x96xf16>
  return %0 : tensor<?x49x96xf16>
}
