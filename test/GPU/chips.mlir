// Every chip of Rpe/NvptxTarget.h compiles, with the least PTX version it
// needs, and ptxas (format=bin) assembles the result for that chip: sm_75
// gets the row kernel, later chips the tensor-core kernel for f16.
// REQUIRES: ptxas
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_75 format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=BIN -DCHIP=sm_75 -DFEATURES=+ptx63
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_80 format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=BIN -DCHIP=sm_80 -DFEATURES=+ptx70
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_86 format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=BIN -DCHIP=sm_86 -DFEATURES=+ptx71
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_87 format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=BIN -DCHIP=sm_87 -DFEATURES=+ptx74
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_88 format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=BIN -DCHIP=sm_88 -DFEATURES=+ptx90
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_89 format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=BIN -DCHIP=sm_89 -DFEATURES=+ptx78
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_90 format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=BIN -DCHIP=sm_90 -DFEATURES=+ptx78
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_90a format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=BIN -DCHIP=sm_90a -DFEATURES=+ptx80
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_100 format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=BIN -DCHIP=sm_100 -DFEATURES=+ptx86
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_100a format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=BIN -DCHIP=sm_100a -DFEATURES=+ptx86
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_100f format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=BIN -DCHIP=sm_100f -DFEATURES=+ptx88
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_103 format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=BIN -DCHIP=sm_103 -DFEATURES=+ptx88
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_103a format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=BIN -DCHIP=sm_103a -DFEATURES=+ptx88
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_103f format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=BIN -DCHIP=sm_103f -DFEATURES=+ptx88
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_110 format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=BIN -DCHIP=sm_110 -DFEATURES=+ptx90
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_110a format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=BIN -DCHIP=sm_110a -DFEATURES=+ptx90
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_110f format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=BIN -DCHIP=sm_110f -DFEATURES=+ptx90
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_120 format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=BIN -DCHIP=sm_120 -DFEATURES=+ptx87
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_120a format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=BIN -DCHIP=sm_120a -DFEATURES=+ptx87
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_120f format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=BIN -DCHIP=sm_120f -DFEATURES=+ptx88
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_121 format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=BIN -DCHIP=sm_121 -DFEATURES=+ptx88
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_121a format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=BIN -DCHIP=sm_121a -DFEATURES=+ptx88
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_121f format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=BIN -DCHIP=sm_121f -DFEATURES=+ptx88
// BIN: gpu.binary @f16_kernel  [#gpu.object<#nvvm.target<O = 3, chip = "[[CHIP]]", features = "[[FEATURES]]">, {{.*}}bin = "\7FELF
// BIN: gpu.binary @f32_kernel  [#gpu.object<#nvvm.target<O = 3, chip = "[[CHIP]]", features = "[[FEATURES]]">, {{.*}}bin = "\7FELF

// The PTX: sm_75 has no m16n8k16 mma.sync (LLVM could not select it), so
// both kernels are row kernels; sm_80 and later use it for f16.
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_75 toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=SM75
// SM75: gpu.binary @f16_kernel {{.*}}assembly = "{{.*}}.version 6.3{{.*}}.target sm_75
// SM75-NOT: mma.sync
// SM75: gpu.binary @f32_kernel
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_120 toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=SM120
// SM120: gpu.binary @f16_kernel {{.*}}assembly = "{{.*}}.version 8.7{{.*}}.target sm_120{{.*}}mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32

// The kernel choice follows the chip in the NVVM dialect too.
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_75 format=none" | FileCheck %s --check-prefix=ROWS
// ROWS: gpu.module @f16_kernel [#nvvm.target<O = 3, chip = "sm_75", features = "+ptx63">]
// ROWS-NOT: nvvm.mma.sync
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_80 format=none" | FileCheck %s --check-prefix=WARPS
// WARPS: gpu.module @f16_kernel [#nvvm.target<O = 3, chip = "sm_80", features = "+ptx70">]
// WARPS: nvvm.mma.sync

// Given features are used as they are, above the chip's least version.
// RUN: swin-opt %s --rpe-gpu-pipeline="chip=sm_90 features=+ptx86 format=none" | FileCheck %s --check-prefix=FEATURES
// FEATURES: gpu.module @f16_kernel [#nvvm.target<O = 3, chip = "sm_90", features = "+ptx86">]

func.func @f16(%q: tensor<?x2x16x16xf16>, %k: tensor<?x2x16x16xf16>, %v: tensor<?x2x16x16xf16>,
               %t: tensor<49x2xf16>) -> tensor<?x16x32xf16> {
  %b = rpe.lookup %t {window = array<i64: 4, 4>} : tensor<49x2xf16> -> tensor<2x16x16xf16>
  %0 = rpe.window_attention ins(%q, %k, %v : tensor<?x2x16x16xf16>, tensor<?x2x16x16xf16>, tensor<?x2x16x16xf16>)
         bias(%b : tensor<2x16x16xf16>) -> tensor<?x16x32xf16>
  return %0 : tensor<?x16x32xf16>
}

func.func @f32(%q: tensor<?x2x16x16xf32>, %k: tensor<?x2x16x16xf32>, %v: tensor<?x2x16x16xf32>,
               %t: tensor<49x2xf32>) -> tensor<?x16x32xf32> {
  %b = rpe.lookup %t {window = array<i64: 4, 4>} : tensor<49x2xf32> -> tensor<2x16x16xf32>
  %0 = rpe.window_attention ins(%q, %k, %v : tensor<?x2x16x16xf32>, tensor<?x2x16x16xf32>, tensor<?x2x16x16xf32>)
         bias(%b : tensor<2x16x16xf32>) -> tensor<?x16x32xf32>
  return %0 : tensor<?x16x32xf32>
}
