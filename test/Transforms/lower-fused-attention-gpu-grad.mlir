// RUN: swin-opt %s --rpe-lower-fused-attention="kernel=warps target=gpu" | FileCheck %s --check-prefix=GPU
// RUN: swin-opt %s --rpe-lower-fused-attention="kernel=rows target=gpu" | FileCheck %s --check-prefix=GPU
// RUN: swin-opt %s --rpe-lower-fused-attention="kernel=warps" | FileCheck %s --check-prefix=HOST
// RUN: swin-opt %s --rpe-lower-fused-attention="kernel=warps" --rpe-item-range | FileCheck %s --check-prefix=RANGE
// RUN: swin-opt %s --rpe-lower-fused-attention="kernel=warps" --mlir-print-local-scope | FileCheck %s --check-prefix=NOATOMICS

// The GPU's backward of Swin-T stage 1 in f16 (shifted; the table's
// gradient in f32), whatever the kernel the forward takes: the tensor-core
// form. A block of four warps per (window, head), one per tile of 16 tokens
// in each pass; q, k, v and dout in shared memory as f16 rows of 40 (d + 8,
// the forward's stride), padded to 64 tokens; per warp two copies of the
// table's gradient (a half-warp each) and a 16 x 17 tile of dS; then a
// second launch that sums the items' partial table gradients.
// GPU-DAG: memref.global "private" @__rpe_shared_grad_table_sums : memref<256xf32, #gpu.address_space<workgroup>>
// GPU-DAG: memref.global "private" @__rpe_shared_grad_queries : memref<2560xf16, #gpu.address_space<workgroup>>
// GPU-DAG: memref.global "private" @__rpe_shared_grad_output_gradients : memref<2560xf16, #gpu.address_space<workgroup>>
// GPU-DAG: memref.global "private" @__rpe_shared_grad_log_sum_exp : memref<64xf32, #gpu.address_space<workgroup>>
// GPU-DAG: memref.global "private" @__rpe_shared_grad_table_gradient : memref<1352xf32, #gpu.address_space<workgroup>>
// GPU-DAG: memref.global "private" @__rpe_shared_grad_score_gradients : memref<1088xf32, #gpu.address_space<workgroup>>
// The window's dS, 64 queries of 72 (N' + 8) f16, which the key pass keeps
// for the query pass: the block stays within the static 48 KiB with it.
// GPU-DAG: memref.global "private" @__rpe_shared_grad_window_score_gradients : memref<4608xf16, #gpu.address_space<workgroup>>
// f32 takes the lane form: rows of 33 words (lanes reading their own rows
// spread over the banks), 49 tokens, one table gradient.
// GPU-DAG: memref.global "private" @__rpe_shared_grad_queries_{{[0-9]+}} : memref<1617xf32, #gpu.address_space<workgroup>>
// GPU-DAG: memref.global "private" @__rpe_shared_grad_table_gradient_{{[0-9]+}} : memref<169xf32, #gpu.address_space<workgroup>>
// GPU-LABEL: func @stage1_grad(
// GPU-SAME: attributes {rpe.items_per_block = 1 : i64}
// The partials [items, T] in device memory, for the two launches.
// GPU: %[[WAIT:.*]] = gpu.wait async
// GPU: %[[PARTIALS:.*]], %[[ALLOCATED:.*]] = gpu.alloc async [%[[WAIT]]] (%{{.*}}) : memref<?x169xf32>
// GPU: gpu.wait [%[[ALLOCATED]]]
// GPU: gpu.launch blocks({{.*}}) in ({{.*}} = %{{.*}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c128
// GPU: gpu.lane_id
// Whether the window holds one region: then the passes skip the mask.
// GPU: %[[ONEREGION:.*]] = arith.cmpi eq, %{{[0-9]+}}, %{{[0-9]+}} : index
// The staging, shared by the warps; the loops stay rolled (ptxas would
// unroll and spill); a block barrier after each pass.
// GPU: memref.store %{{.*}} : memref<1352xf32, #gpu.address_space<workgroup>>
// GPU: } {loop_annotation = #loop_annotation}
// GPU: gpu.barrier
// Per query tile: D by half-warps (a shuffle xor 16), S = q kᵀ on tensor
// cores (4 mma) and the mask in a branch (8 scores per lane and 16 keys),
// lse merged over the quad (shuffles xor 1, 2).
// GPU: gpu.shuffle  xor %{{.*}}, %c16_i32
// GPU-COUNT-4: nvvm.mma.sync
// GPU: scf.if %[[ONEREGION]] -> (f32, f32, f32, f32, f32, f32, f32, f32) {
// GPU-NEXT: scf.yield
// GPU-NEXT: } else {
// GPU: gpu.shuffle  xor %{{.*}}, %c1_i32
// GPU: gpu.shuffle  xor %{{.*}}, %c2_i32
// GPU: gpu.barrier
// Per key tile and query tile: Sᵀ and dPᵀ (4 + 4 mma), the mask in a
// branch, dv and dk (4 + 4), dS to the warp's tile; G_h += dS a key at a
// time, a warp barrier per key; dS, rounded to f16, to the window's.
// GPU-COUNT-8: nvvm.mma.sync
// GPU: scf.if %[[ONEREGION]] -> (f32, f32, f32, f32, f32, f32, f32, f32) {
// GPU-COUNT-8: nvvm.mma.sync
// GPU: nvvm.bar.warp.sync
// GPU: nvvm.bar.warp.sync
// GPU: memref.load %{{.*}} : memref<1352xf32, #gpu.address_space<workgroup>>
// GPU: memref.store %{{.*}} : memref<1352xf32, #gpu.address_space<workgroup>>
// GPU: nvvm.bar.warp.sync
// GPU: memref.store %{{.*}} : memref<4608xf16, #gpu.address_space<workgroup>>
// GPU: gpu.barrier
// Per query tile and key tile: dS read back as the A operand, dq += dS k
// (4 mma) in registers; S and dP are not recomputed.
// GPU: memref.load %{{.*}} : memref<4608xf16, #gpu.address_space<workgroup>>
// GPU-COUNT-4: nvvm.mma.sync
// GPU-NOT: nvvm.mma.sync
// GPU: gpu.barrier
// The warps' copies of G, summed in order, to the item's partial.
// GPU: memref.load %{{.*}} : memref<1352xf32, #gpu.address_space<workgroup>>
// GPU: gpu.terminator
// The reduction: 3 heads x 6 blocks of 32 entries, 8 warps each.
// GPU: gpu.launch blocks({{.*}}) in ({{.*}} = %c18, {{.*}}) threads({{.*}}) in ({{.*}} = %c256
// GPU: memref.get_global @__rpe_shared_grad_table_sums
// GPU: scf.for
// GPU: gpu.barrier
// GPU: scf.if
// GPU: memref.store %{{.*}} : memref<?xf32, strided<[1], offset: ?>>
// GPU: gpu.terminator
// GPU: gpu.dealloc async [%{{.*}}] %[[PARTIALS]] : memref<?x169xf32>
// GPU-NOT: rpe.fused_window_attention_grad

// The lane form (f32): a lane per row, a row's 32 channels on two lanes
// (the dot products end in one shuffle); G[P(i) - P(j) + c] += dS by the
// row's first lane, a warp barrier per key; no tensor cores.
// GPU-LABEL: func @stage1_grad_f32(
// GPU: gpu.launch blocks({{.*}}) in ({{.*}} = %{{.*}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c32
// GPU: } {loop_annotation = #loop_annotation}
// GPU: gpu.shuffle  xor %{{.*}}, %c1_i32
// GPU: memref.load %{{.*}} : memref<169xf32, #gpu.address_space<workgroup>>
// GPU: memref.store %{{.*}} : memref<169xf32, #gpu.address_space<workgroup>>
// GPU: nvvm.bar.warp.sync
// GPU-NOT: nvvm.mma.sync
// GPU: gpu.terminator
// GPU: gpu.launch blocks({{.*}}) in ({{.*}} = %c18, {{.*}}) threads({{.*}}) in ({{.*}} = %c256
// GPU-NOT: rpe.fused_window_attention_grad

// A 12 x 12 window (144 tokens, three warps) would pass 48 KiB with its dS
// kept: the query pass recomputes S and dP, queries as the rows (4 + 4
// mma), then dq += dS k (4).
// GPU-LABEL: func @window12_grad(
// GPU: gpu.launch blocks({{.*}}) in ({{.*}} = %{{.*}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c96
// GPU-COUNT-4: nvvm.mma.sync
// GPU: gpu.barrier
// GPU-COUNT-16: nvvm.mma.sync
// GPU: gpu.barrier
// GPU-COUNT-12: nvvm.mma.sync
// GPU-NOT: nvvm.mma.sync
// GPU: gpu.barrier

// On the host: the same program on 32-lane vectors, the partials in a host
// buffer (zeros for the items a caller's range leaves out), the items in
// the marked item loop, the reduction's blocks and warps in loops.
// HOST-LABEL: func @stage1_grad(
// HOST: %[[PARTIALS:.*]] = memref.alloc(%{{.*}}) : memref<?x169xf32>
// HOST: scf.parallel
// HOST: memref.alloca() : memref<2560xf16>
// HOST: vector.gather
// HOST: vector.shuffle %{{.*}}, %{{.*}} [1, 0, 3, 2,
// HOST: } {rpe.item_loop}
// HOST: memref.alloca() : memref<256xf32>
// HOST: scf.for %{{.*}} = %{{.*}} to %c18
// HOST: memref.dealloc %[[PARTIALS]] : memref<?x169xf32>
// HOST-NOT: rpe.fused_window_attention_grad

// rpe-item-range gives the item loop a caller's range.
// RANGE-LABEL: func @stage1_grad(
// RANGE-SAME: %[[BEGIN:[a-z0-9]+]]: index, %[[END:[a-z0-9]+]]: index)
// RANGE: %[[UPPER:.*]] = arith.minui %[[END]], %{{.*}} : index
// RANGE: scf.parallel (%{{.*}}) = (%[[BEGIN]]) to (%[[UPPER]])

// The table's gradient is summed without atomics.
// NOATOMICS-LABEL: func @stage1_grad
// NOATOMICS-NOT: atomic
func.func @stage1_grad(%q: memref<?x3x49x32xf16>, %k: memref<?x3x49x32xf16>, %v: memref<?x3x49x32xf16>, %t: memref<169x3xf16>, %o: memref<?x49x96xf16>, %do: memref<?x49x96xf16>, %dq: memref<?x3x49x32xf16>, %dk: memref<?x3x49x32xf16>, %dv: memref<?x3x49x32xf16>, %dt: memref<169x3xf32>) {
  rpe.fused_window_attention_grad
      ins(%q, %k, %v, %t, %o, %do : memref<?x3x49x32xf16>, memref<?x3x49x32xf16>, memref<?x3x49x32xf16>, memref<169x3xf16>, memref<?x49x96xf16>, memref<?x49x96xf16>)
      outs(%dq, %dk, %dv, %dt : memref<?x3x49x32xf16>, memref<?x3x49x32xf16>, memref<?x3x49x32xf16>, memref<169x3xf32>)
      {window = array<i64: 7, 7>, scale = 0.1767767 : f32, resolution = array<i64: 14, 14>, shift = array<i64: 3, 3>}
  return
}

func.func @stage1_grad_f32(%q: memref<?x3x49x32xf32>, %k: memref<?x3x49x32xf32>, %v: memref<?x3x49x32xf32>, %t: memref<169x3xf32>, %o: memref<?x49x96xf32>, %do: memref<?x49x96xf32>, %dq: memref<?x3x49x32xf32>, %dk: memref<?x3x49x32xf32>, %dv: memref<?x3x49x32xf32>, %dt: memref<169x3xf32>) {
  rpe.fused_window_attention_grad
      ins(%q, %k, %v, %t, %o, %do : memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<169x3xf32>, memref<?x49x96xf32>, memref<?x49x96xf32>)
      outs(%dq, %dk, %dv, %dt : memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<169x3xf32>)
      {window = array<i64: 7, 7>, scale = 0.1767767 : f32, resolution = array<i64: 14, 14>, shift = array<i64: 3, 3>}
  return
}

func.func @window12_grad(%q: memref<?x2x144x32xf16>, %k: memref<?x2x144x32xf16>, %v: memref<?x2x144x32xf16>, %t: memref<529x2xf16>, %o: memref<?x144x64xf16>, %do: memref<?x144x64xf16>, %dq: memref<?x2x144x32xf16>, %dk: memref<?x2x144x32xf16>, %dv: memref<?x2x144x32xf16>, %dt: memref<529x2xf32>) {
  rpe.fused_window_attention_grad
      ins(%q, %k, %v, %t, %o, %do : memref<?x2x144x32xf16>, memref<?x2x144x32xf16>, memref<?x2x144x32xf16>, memref<529x2xf16>, memref<?x144x64xf16>, memref<?x144x64xf16>)
      outs(%dq, %dk, %dv, %dt : memref<?x2x144x32xf16>, memref<?x2x144x32xf16>, memref<?x2x144x32xf16>, memref<529x2xf32>)
      {window = array<i64: 12, 12>, scale = 0.1767767 : f32}
  return
}
