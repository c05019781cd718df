// RUN: swin-opt %s --rpe-lower-fused-attention="kernel=warps target=gpu" --canonicalize --cse -split-input-file | FileCheck %s --check-prefix=WARPS
// RUN: swin-opt %s --rpe-lower-fused-attention="kernel=rows" --canonicalize --cse -split-input-file | FileCheck %s --check-prefix=ROWS
// RUN: swin-opt %s --rpe-lower-fused-attention="kernel=warps target=gpu" --canonicalize --cse -split-input-file | FileCheck %s --check-prefix=GRAD

// BEiT's class token in the GPU kernels (and the rows kernel on the host),
// on a 2x2 grid: N = 5, Swin's T = 9 table rows, then class -> token (9),
// token -> class (10) and class -> class (11). Grid pairs read the entry of
// their grid positions; a select per score takes the class token's rows.

// The warp kernel (f16): the table is staged with its 12 rows per warp
// (four warps per block), and each score's entry is Swin's P(i) - P(j) + c,
// or T, T + 1, T + 2 of the warp's table slot where the key or the row is
// the class token.
// WARPS: memref.global "private" @__rpe_shared_table : memref<48xf32, #gpu.address_space<workgroup>>
// WARPS-LABEL: func @class_token_warps
// WARPS-DAG: %[[C9:.*]] = arith.constant 9 : index
// WARPS-DAG: %[[C10:.*]] = arith.constant 10 : index
// WARPS-DAG: %[[C11:.*]] = arith.constant 11 : index
// WARPS: %[[ST:.*]] = memref.get_global @__rpe_shared_table
// WARPS: nvvm.mma.sync
// WARPS: %[[KEYCLS:.*]] = arith.cmpi eq, %{{.*}}, %c0 : index
// WARPS: %[[GRID:.*]] = arith.index_cast %{{.*}} : i32 to index
// WARPS-NEXT: %[[CT:.*]] = arith.addi %[[BASE:.*]], %[[C9]] : index
// WARPS-NEXT: %[[CC:.*]] = arith.addi %[[BASE]], %[[C11]] : index
// WARPS-NEXT: %[[CLSROW:.*]] = arith.select %[[KEYCLS]], %[[CC]], %[[CT]] : index
// WARPS-NEXT: %[[TC:.*]] = arith.addi %[[BASE]], %[[C10]] : index
// WARPS-NEXT: %[[TOKROW:.*]] = arith.select %[[KEYCLS]], %[[TC]], %[[GRID]] : index
// WARPS-NEXT: %[[ENTRY:.*]] = arith.select %{{.*}}, %[[CLSROW]], %[[TOKROW]] : index
// WARPS-NEXT: memref.load %[[ST]][%[[ENTRY]]] : memref<48xf32, #gpu.address_space<workgroup>>
func.func @class_token_warps(%q: memref<?x2x5x16xf16>, %t: memref<12x2xf32>, %o: memref<?x5x32xf16>) {
  rpe.fused_window_attention ins(%q, %q, %q, %t : memref<?x2x5x16xf16>, memref<?x2x5x16xf16>, memref<?x2x5x16xf16>, memref<12x2xf32>)
    outs(%o : memref<?x5x32xf16>) {window = array<i64: 2, 2>, scale = 0.25 : f32, class_token}
  return
}

// -----

// Without a class token the entry is Swin's alone: no select before the
// table's load.
// WARPS-LABEL: func @swin_warps
// WARPS: %[[ST:.*]] = memref.get_global @__rpe_shared_table
// WARPS: nvvm.mma.sync
// WARPS: arith.index_cast %{{.*}} : i32 to index
// WARPS-NEXT: memref.load %[[ST]][%{{.*}}] : memref<36xf32, #gpu.address_space<workgroup>>
func.func @swin_warps(%q: memref<?x2x4x16xf16>, %t: memref<9x2xf32>, %o: memref<?x4x32xf16>) {
  rpe.fused_window_attention ins(%q, %q, %q, %t : memref<?x2x4x16xf16>, memref<?x2x4x16xf16>, memref<?x2x4x16xf16>, memref<9x2xf32>)
    outs(%o : memref<?x4x32xf16>) {window = array<i64: 2, 2>, scale = 0.25 : f32}
  return
}

// -----

// The rows kernel (its loops over items and rows merged by the
// canonicalizer): P of grid token t - 1 (max(t, 1) - 1: the class token
// takes grid token 0's, which the selects replace), then the class token's
// rows of the table operand.
// ROWS-LABEL: func @class_token_rows
// ROWS-SAME: %[[T:[a-z0-9]+]]: memref<12x2xf32>
// ROWS-DAG: %[[C9:.*]] = arith.constant 9 : index
// ROWS-DAG: %[[C10:.*]] = arith.constant 10 : index
// ROWS-DAG: %[[C11:.*]] = arith.constant 11 : index
// ROWS: scf.parallel (%{{[a-z0-9]+}}, %[[I:[a-z0-9]+]]) =
// ROWS: scf.for %[[J:.*]] = %c0 to %c5
// ROWS: %[[JMAX:.*]] = arith.maxui %[[J]], %c1 : index
// ROWS-NEXT: arith.subi %[[JMAX]], %c1 : index
// ROWS: %[[GRID:.*]] = arith.subi
// ROWS-NEXT: %[[ROWCLS:.*]] = arith.cmpi eq, %[[I]], %c0 : index
// ROWS-NEXT: %[[KEYCLS:.*]] = arith.cmpi eq, %[[J]], %c0 : index
// ROWS-NEXT: %[[CLSROW:.*]] = arith.select %[[KEYCLS]], %[[C11]], %[[C9]] : index
// ROWS-NEXT: %[[TOKROW:.*]] = arith.select %[[KEYCLS]], %[[C10]], %[[GRID]] : index
// ROWS-NEXT: %[[ENTRY:.*]] = arith.select %[[ROWCLS]], %[[CLSROW]], %[[TOKROW]] : index
// ROWS-NEXT: memref.load %[[T]][%[[ENTRY]], %{{.*}}] : memref<12x2xf32>
func.func @class_token_rows(%q: memref<?x2x5x5xf32>, %t: memref<12x2xf32>, %o: memref<?x5x10xf32>) {
  rpe.fused_window_attention ins(%q, %q, %q, %t : memref<?x2x5x5xf32>, memref<?x2x5x5xf32>, memref<?x2x5x5xf32>, memref<12x2xf32>)
    outs(%o : memref<?x5x10xf32>) {window = array<i64: 2, 2>, scale = 0.25 : f32, class_token}
  return
}

// -----

// The GPU backward: R and G hold the 12 rows, the partials [items, 12]. In
// the query pass the key j is uniform: for the class key every grid row's
// dS goes to the one entry T + 1, so the warp sums them (a butterfly of
// shuffles) and lane 0 adds the sum; the class row's own dS goes to T + 2.
// Other keys add at their pairs' entries, one lane per row.
// GRAD: memref.global "private" @__rpe_shared_grad_table : memref<12xf32, #gpu.address_space<workgroup>>
// GRAD: memref.global "private" @__rpe_shared_grad_table_gradient : memref<12xf32, #gpu.address_space<workgroup>>
// GRAD-LABEL: func @class_token_grad
// GRAD-DAG: %[[C10:.*]] = arith.constant 10 : index
// GRAD-DAG: %[[C11:.*]] = arith.constant 11 : index
// GRAD: gpu.alloc async {{.*}} : memref<?x12xf32>
// GRAD: %[[G:.*]] = memref.get_global @__rpe_shared_grad_table_gradient
// The query pass, after the rows' log-sum-exp:
// GRAD: math.log2
// GRAD: scf.for %[[J:.*]] = %c0 to %c5
// GRAD: %[[KEYCLS:.*]] = arith.cmpi eq, %[[J]], %c0 : index
// GRAD: scf.if %[[KEYCLS]] {
// GRAD: gpu.shuffle  xor %{{.*}}, %c1_i32, %c32_i32 : f32
// GRAD: gpu.shuffle  xor %{{.*}}, %c16_i32, %c32_i32 : f32
// GRAD: memref.store %{{.*}}, %[[G]][%[[C10]]]
// GRAD: memref.store %{{.*}}, %[[G]][%[[C11]]]
// GRAD: } else {
// GRAD: memref.store %{{.*}}, %[[G]][%{{.*}}]
// GRAD: nvvm.bar.warp.sync
func.func @class_token_grad(%q: memref<?x2x5x8xf32>, %t: memref<12x2xf32>, %o: memref<?x5x16xf32>, %dq: memref<?x2x5x8xf32>, %dt: memref<12x2xf32>) {
  rpe.fused_window_attention_grad
      ins(%q, %q, %q, %t, %o, %o : memref<?x2x5x8xf32>, memref<?x2x5x8xf32>, memref<?x2x5x8xf32>, memref<12x2xf32>, memref<?x5x16xf32>, memref<?x5x16xf32>)
      outs(%dq, %dq, %dq, %dt : memref<?x2x5x8xf32>, memref<?x2x5x8xf32>, memref<?x2x5x8xf32>, memref<12x2xf32>)
      {window = array<i64: 2, 2>, scale = 0.35355339 : f32, class_token}
  return
}
