// RUN: swin-opt %s --rpe-lower-fused-attention | FileCheck %s
// RUN: swin-opt %s --rpe-lower-fused-attention --rpe-item-range | FileCheck %s --check-prefix=RANGE
// RUN: swin-opt %s --rpe-lower-fused-attention="kernel=rows" | FileCheck %s

// The CPU's kernel, for tiles and rows; the GPU's backward (target=gpu, or
// kernel=warps emulated): lower-fused-attention-gpu-grad.mlir.

// The gradient of Swin-T stage 1 with a shifted window (8 lanes): scratch
// once per call, then one sequential loop over the (window, head) items,
// since every item adds to the one table gradient, kept in the reversed
// table's layout [heads, T + Wpad] and written to dtable after the loop.
// CHECK-LABEL: func @stage1_grad
// CHECK-SAME: %[[DT:[a-z0-9]+]]: memref<169x3xf32>)
// CHECK-NOT: scf.parallel
// CHECK: memref.get_global @__rpe_region_labels : memref<4x56xi32>
// kᵀ and vᵀ; P and dS per block of queries; packed rows of q, k, dout and
// the sums of dk and dv.
// CHECK-COUNT-2: memref.alloca() {alignment = 64 : i64} : memref<32x56xf32>
// CHECK-COUNT-2: memref.alloca() {alignment = 64 : i64} : memref<49x56xf32>
// CHECK: memref.alloca() {alignment = 64 : i64} : memref<49xf32>
// CHECK-COUNT-5: memref.alloca() {alignment = 64 : i64} : memref<1568xf32>
// CHECK: %[[G:.*]] = memref.alloca() {alignment = 64 : i64} : memref<3x177xf32>
// CHECK: scf.for %[[ITEM:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// The scores, recomputed, and dP on the same micro-kernel.
// CHECK: vector.fma
// dS added along a stretch of the table gradient: one vector per key row.
// CHECK: %[[OLD:.*]] = vector.load %[[G]][%{{.*}}, %{{.*}}] : memref<3x177xf32>, vector<8xf32>
// CHECK: %[[NEW:.*]] = arith.addf %[[OLD]], %{{.*}} : vector<8xf32>
// CHECK: vector.store %[[NEW]], %[[G]][%{{.*}}, %{{.*}}] : memref<3x177xf32>, vector<8xf32>
// CHECK: } {rpe.item_loop}
// dtable[t, h] = G[h, T - 1 - t].
// CHECK: memref.load %[[G]]
// CHECK: memref.store %{{.*}}, %[[DT]][%{{.*}}, %{{.*}}] : memref<169x3xf32>
// CHECK-NOT: rpe.fused_window_attention_grad

// rpe-item-range gives the sequential loop a caller's range too.
// RANGE-LABEL: func @stage1_grad
// RANGE-SAME: %[[BEGIN:[a-z0-9]+]]: index, %[[END:[a-z0-9]+]]: index)
// RANGE: %[[UPPER:.*]] = arith.minui %[[END]], %{{.*}} : index
// RANGE: scf.for %{{.*}} = %[[BEGIN]] to %[[UPPER]] step
// RANGE-NOT: rpe.item_loop
func.func @stage1_grad(%q: memref<?x3x49x32xf32>, %k: memref<?x3x49x32xf32>, %v: memref<?x3x49x32xf32>, %t: memref<169x3xf32>, %o: memref<?x49x96xf32>, %do: memref<?x49x96xf32>, %dq: memref<?x3x49x32xf32>, %dk: memref<?x3x49x32xf32>, %dv: memref<?x3x49x32xf32>, %dt: memref<169x3xf32>) {
  rpe.fused_window_attention_grad
      ins(%q, %k, %v, %t, %o, %do : memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<169x3xf32>, memref<?x49x96xf32>, memref<?x49x96xf32>)
      outs(%dq, %dk, %dv, %dt : memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<169x3xf32>)
      {window = array<i64: 7, 7>, scale = 0.125 : f32, resolution = array<i64: 14, 14>, shift = array<i64: 3, 3>}
  return
}
