// rpe-gpu-pipeline refuses chips, features and levels it cannot compile for
// with one line, located at the module, before any IR is touched (they were
// LLVM fatal errors, or PTX for an uninitialised SM version, or the whole
// module printed with gpu-module-to-binary's error).
// RUN: not swin-opt %s --rpe-gpu-pipeline="chip=bogus" 2>&1 | FileCheck %s --check-prefix=BOGUS --implicit-check-not=module
// RUN: not swin-opt %s --rpe-gpu-pipeline="chip=bogus" 2>&1 | count 1
// BOGUS: pipeline-errors.mlir:0:0: error: unknown NVIDIA chip 'bogus' (expected sm_75, sm_80, sm_86, sm_87, sm_88, sm_89, sm_90[a], sm_100[a|f], sm_103[a|f], sm_110[a|f], sm_120[a|f], sm_121[a|f])
// RUN: not swin-opt %s --rpe-gpu-pipeline="chip=sm_" 2>&1 | FileCheck %s --check-prefix=EMPTY
// EMPTY: error: unknown NVIDIA chip 'sm_' (expected sm_75,
// RUN: not swin-opt %s --rpe-gpu-pipeline="chip=sm_1000" 2>&1 | FileCheck %s --check-prefix=BIG
// BIG: error: unknown NVIDIA chip 'sm_1000' (expected sm_75,
// RUN: not swin-opt %s --rpe-gpu-pipeline="chip=gfx90a" 2>&1 | FileCheck %s --check-prefix=AMD
// AMD: error: unknown NVIDIA chip 'gfx90a' (expected sm_75,
// CUDA 13's ptxas no longer takes Volta; sm_101 is sm_110 there.
// RUN: not swin-opt %s --rpe-gpu-pipeline="chip=sm_70" 2>&1 | FileCheck %s --check-prefix=VOLTA
// VOLTA: error: unknown NVIDIA chip 'sm_70' (expected sm_75,
// RUN: not swin-opt %s --rpe-gpu-pipeline="chip=sm_101" 2>&1 | FileCheck %s --check-prefix=THOR
// THOR: error: unknown NVIDIA chip 'sm_101' (expected sm_75,

// A PTX version below the chip's (LLVM: "PTX version 6.0 does not support
// target 'sm_90'", a fatal error), one LLVM ignores, or two.
// RUN: not swin-opt %s --rpe-gpu-pipeline="chip=sm_90 features=+ptx60" 2>&1 | FileCheck %s --check-prefix=OLD --implicit-check-not=module
// RUN: not swin-opt %s --rpe-gpu-pipeline="chip=sm_90 features=+ptx60" 2>&1 | count 1
// OLD: pipeline-errors.mlir:0:0: error: features '+ptx60' select PTX 6.0, but sm_90 needs PTX 7.8 or later (+ptx78)
// RUN: not swin-opt %s --rpe-gpu-pipeline="chip=sm_100 features=+ptx80" 2>&1 | FileCheck %s --check-prefix=SM100
// SM100: error: features '+ptx80' select PTX 8.0, but sm_100 needs PTX 8.6 or later (+ptx86)
// RUN: not swin-opt %s --rpe-gpu-pipeline="chip=sm_90 features=+ptx99" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: error: unknown PTX version '+ptx99' in features '+ptx99' (LLVM 22 knows +ptx32 to +ptx90)
// RUN: not swin-opt %s --rpe-gpu-pipeline="chip=sm_90 features=+ptx80,+ptx86" 2>&1 | FileCheck %s --check-prefix=TWO
// TWO: error: features '+ptx80,+ptx86' name more than one PTX version

// An optimization level nvvm-attach-target takes and gpu-module-to-binary
// refuses, with the whole gpu.module attached.
// RUN: not swin-opt %s --rpe-gpu-pipeline="opt-level=9" 2>&1 | FileCheck %s --check-prefix=LEVEL --implicit-check-not=module
// LEVEL: pipeline-errors.mlir:0:0: error: opt-level must be 0, 1, 2 or 3, got 9

// The format is an enum: cl's own line, no module (it was the whole
// module with gpu-module-to-binary's "Invalid format specified.").
// RUN: not swin-opt %s --rpe-gpu-pipeline="format=bogus" 2>&1 | FileCheck %s --check-prefix=FORMAT --implicit-check-not=module
// FORMAT: for the --format option: Cannot find option named 'bogus'!

// Failures inside gpu-module-to-binary (LLVM, libdevice, ptxas) are
// reported on the gpu.module: their messages, without the module. A toolkit
// whose ptxas fails, and one without libdevice.
// RUN: rm -rf %t && mkdir -p %t/bin
// RUN: printf '#!/bin/sh\necho "ptxas fatal   : out of luck"\necho "ptxas fatal   : out of luck" >&2\nexit 1\n' > %t/bin/ptxas
// RUN: chmod +x %t/bin/ptxas
// RUN: not swin-opt %s --rpe-gpu-pipeline="format=bin toolkit=%t" 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not="see current operation" --implicit-check-not=gpu.module --implicit-check-not=llvm.func
// PTXAS: pipeline-errors.mlir:{{[0-9]+}}:8: error: LibDevice path: {{.*}}libdevice.10.bc does not exist or is not a file.
// PTXAS: pipeline-errors.mlir:{{[0-9]+}}:8: error: `ptxas` invocation failed. Log:
// PTXAS-NEXT: ptxas fatal   : out of luck
// PTXAS: error: An error happened while serializing the module.

func.func @attention(%q: tensor<?x2x16x16xf16>, %k: tensor<?x2x16x16xf16>, %v: tensor<?x2x16x16xf16>,
                     %t: tensor<49x2xf16>) -> tensor<?x16x32xf16> {
  %b = rpe.lookup %t {window = array<i64: 4, 4>} : tensor<49x2xf16> -> tensor<2x16x16xf16>
  %0 = rpe.window_attention ins(%q, %k, %v : tensor<?x2x16x16xf16>, tensor<?x2x16x16xf16>, tensor<?x2x16x16xf16>)
         bias(%b : tensor<2x16x16xf16>) -> tensor<?x16x32xf16>
  return %0 : tensor<?x16x32xf16>
}
