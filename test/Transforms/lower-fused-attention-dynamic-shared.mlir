// RUN: swin-opt %s --rpe-lower-fused-attention="kernel=warps warps-per-block=1 target=gpu sm=90" -split-input-file | FileCheck %s --check-prefix=GPU
// RUN: swin-opt %s --rpe-lower-fused-attention="kernel=warps warps-per-block=1 sm=90" -split-input-file | FileCheck %s --check-prefix=HOST
// RUN: not swin-opt %s --rpe-lower-fused-attention="kernel=warps warps-per-block=1 target=gpu sm=86" -split-input-file 2>&1 | FileCheck %s --check-prefix=SM86

// Kernels whose shared memory exceeds the 48 KiB a block has without
// opting in take it as dynamic shared memory, up to what the chip lets a
// block opt in to (227 KiB on sm_90, 99 KiB on sm_86): one
// gpu.dynamic_shared_memory, a memref.view per buffer at its 16-byte
// aligned byte offset, and the layout's size on the gpu.launch.

// The GPU backward of Swin-B/L at 384 (12x12 windows, N = 144, f32, d =
// 32): q, k, v and dout as rows of 33 floats (19,008 bytes each), the
// table (529 f32), P(t), labels, lse and D (144 each), G (529 f32): 82,580
// bytes. The reduction's sums stay a static global.
// GPU-LABEL: memref.global "private" @__rpe_shared_grad_table_sums : memref<256xf32, #gpu.address_space<workgroup>>
// GPU-NOT: memref.global "private" @__rpe_shared_grad_queries
// GPU-LABEL: func @window12_grad_f32
// GPU: %[[SIZE:.*]] = arith.constant 82580 : i32
// GPU: gpu.launch blocks({{.*}}) in ({{.*}}) threads({{.*}}) in ({{.*}} = %c32{{.*}}) dynamic_shared_memory_size %[[SIZE]]
// GPU: %[[SHARED:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// GPU: memref.view %[[SHARED]][%c0{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<4752xf32, #gpu.address_space<workgroup>>
// GPU: memref.view %[[SHARED]][%c19008{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<4752xf32, #gpu.address_space<workgroup>>
// GPU: memref.view %[[SHARED]][%c38016{{.*}}][] : {{.*}} to memref<4752xf32, #gpu.address_space<workgroup>>
// GPU: memref.view %[[SHARED]][%c57024{{.*}}][] : {{.*}} to memref<4752xf32, #gpu.address_space<workgroup>>
// GPU: memref.view %[[SHARED]][%c76032{{.*}}][] : {{.*}} to memref<529xf32, #gpu.address_space<workgroup>>
// The next offset is aligned up: 76,032 + 2,116 -> 78,160.
// GPU: memref.view %[[SHARED]][%c78160{{.*}}][] : {{.*}} to memref<144xi32, #gpu.address_space<workgroup>>
// GPU: memref.view %[[SHARED]][%c78736{{.*}}][] : {{.*}} to memref<144xi32, #gpu.address_space<workgroup>>
// GPU: memref.view %[[SHARED]][%c79312{{.*}}][] : {{.*}} to memref<144xf32, #gpu.address_space<workgroup>>
// GPU: memref.view %[[SHARED]][%c79888{{.*}}][] : {{.*}} to memref<144xf32, #gpu.address_space<workgroup>>
// GPU: memref.view %[[SHARED]][%c80464{{.*}}][] : {{.*}} to memref<529xf32, #gpu.address_space<workgroup>>
// GPU: gpu.terminator
// GPU: gpu.launch blocks({{.*}}) in ({{.*}}) threads({{.*}}) in ({{.*}} = %c256{{.*}}) {
// GPU: memref.get_global @__rpe_shared_grad_table_sums
// The host's emulation keeps its scratch on the stack, whatever its size.
// HOST-LABEL: func @window12_grad_f32
// HOST-NOT: gpu.dynamic_shared_memory
// HOST: memref.alloca() : memref<4752xf32>
// On sm_86 it fits too (82,580 <= 101,376).
// SM86-NOT: error: {{.*}}144 tokens
func.func @window12_grad_f32(%q: memref<?x2x144x32xf32>, %k: memref<?x2x144x32xf32>, %v: memref<?x2x144x32xf32>, %t: memref<529x2xf32>, %o: memref<?x2x144x32xf32>, %do: memref<?x2x144x32xf32>, %dq: memref<?x2x144x32xf32>, %dk: memref<?x2x144x32xf32>, %dv: memref<?x2x144x32xf32>, %dt: memref<529x2xf32>) {
  rpe.fused_window_attention_grad ins(%q, %k, %v, %t, %o, %do : memref<?x2x144x32xf32>, memref<?x2x144x32xf32>, memref<?x2x144x32xf32>, memref<529x2xf32>, memref<?x2x144x32xf32>, memref<?x2x144x32xf32>)
    outs(%dq, %dk, %dv, %dt : memref<?x2x144x32xf32>, memref<?x2x144x32xf32>, memref<?x2x144x32xf32>, memref<529x2xf32>) {window = array<i64: 12, 12>, scale = 0.1767767 : f32}
  return
}

// -----

// Window 16 in f32 (N = 256): 146,964 bytes, within sm_90's 232,448; on
// sm_86 the op is refused, with both numbers.
// GPU-LABEL: func @window16_grad_f32
// GPU: arith.constant 146964 : i32
// SM86: error: 'rpe.fused_window_attention_grad' op has no GPU backward: its window's q, k, v and dout (256 tokens of 32 channels) take 146964 bytes of shared memory, more than the 101376 a block may have on sm_86
func.func @window16_grad_f32(%q: memref<?x2x256x32xf32>, %k: memref<?x2x256x32xf32>, %v: memref<?x2x256x32xf32>, %t: memref<961x2xf32>, %o: memref<?x2x256x32xf32>, %do: memref<?x2x256x32xf32>, %dq: memref<?x2x256x32xf32>, %dk: memref<?x2x256x32xf32>, %dv: memref<?x2x256x32xf32>, %dt: memref<961x2xf32>) {
  rpe.fused_window_attention_grad ins(%q, %k, %v, %t, %o, %do : memref<?x2x256x32xf32>, memref<?x2x256x32xf32>, memref<?x2x256x32xf32>, memref<961x2xf32>, memref<?x2x256x32xf32>, memref<?x2x256x32xf32>)
    outs(%dq, %dk, %dv, %dt : memref<?x2x256x32xf32>, memref<?x2x256x32xf32>, memref<?x2x256x32xf32>, memref<961x2xf32>) {window = array<i64: 16, 16>, scale = 0.1767767 : f32}
  return
}

// -----

// The warp forward of a 24x24 window (N = 576, f16, d = 32): one warp's
// query tile, keys, values (rows of 40 f16), table (2,209 f32), key offsets
// and labels take 106,896 bytes: with warps-per-block=1 (by default such a
// window takes the row kernel) a block of one warp, in dynamic shared memory.
// GPU-LABEL: func @window24_warps
// GPU-SAME: attributes {rpe.items_per_block = 1 : i64}
// GPU: %[[SIZE:.*]] = arith.constant 106896 : i32
// GPU: gpu.launch blocks({{.*}}) in ({{.*}}) threads({{.*}}) in ({{.*}} = %c32{{.*}}) dynamic_shared_memory_size %[[SIZE]]
// GPU: %[[SHARED:.*]] = gpu.dynamic_shared_memory
// GPU: memref.view %[[SHARED]][%c0{{.*}}][] : {{.*}} to memref<640xf16, #gpu.address_space<workgroup>>
// GPU: memref.view %[[SHARED]][%c1280{{.*}}][] : {{.*}} to memref<23040xf16, #gpu.address_space<workgroup>>
// GPU: nvvm.mma.sync
func.func @window24_warps(%q: memref<?x1x576x32xf16>, %t: memref<2209x1xf16>, %o: memref<?x1x576x32xf16>) {
  rpe.fused_window_attention ins(%q, %q, %q, %t : memref<?x1x576x32xf16>, memref<?x1x576x32xf16>, memref<?x1x576x32xf16>, memref<2209x1xf16>)
    outs(%o : memref<?x1x576x32xf16>) {window = array<i64: 24, 24>, scale = 0.1767767 : f32}
  return
}
