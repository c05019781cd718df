// RUN: swin-opt %s --rpe-lower-fused-attention="kernel=warps target=gpu" -split-input-file | FileCheck %s --check-prefix=GPU
// RUN: swin-opt %s --rpe-lower-fused-attention="kernel=warps" -split-input-file | FileCheck %s --check-prefix=HOST
// RUN: swin-opt %s --rpe-lower-fused-attention="kernel=warps hoist-scratch=true" -split-input-file | FileCheck %s --check-prefix=HOISTED
// RUN: swin-opt %s --rpe-lower-fused-attention="kernel=warps target=gpu key-block=16 warps-per-block=1" -split-input-file | FileCheck %s --check-prefix=TILES
// RUN: not swin-opt %s --rpe-lower-fused-attention="kernel=warps key-block=48" -split-input-file 2>&1 | FileCheck %s --check-prefix=KEYBLOCK
// RUN: not swin-opt %s --rpe-lower-fused-attention="kernel=warps target=gpu warps-per-block=16" -split-input-file 2>&1 | FileCheck %s --check-prefix=WARPS
// RUN: not swin-opt %s --rpe-lower-fused-attention="kernel=warps key-block=20" 2>&1 | FileCheck %s --check-prefix=BADBLOCK
// RUN: not swin-opt %s --rpe-lower-fused-attention="kernel=warps warps-per-block=33" 2>&1 | FileCheck %s --check-prefix=BADWARPS

// Tile sizes fixed by options: 16 keys per step (four steps over N' = 64),
// one warp per block.
// TILES-LABEL: func @stage1_f16
// TILES-SAME: attributes {rpe.items_per_block = 1 : i64}
// TILES: threads({{.*}}) in ({{.*}} = %c32
// TILES: scf.for %{{.*}} = %c0{{.*}} to %c4{{(_[0-9]+)?}} step %c1{{.*}} iter_args
// Tile sizes the window cannot have are located errors.
// KEYBLOCK: error: 'rpe.fused_window_attention' op key-block=48 does not divide the 64 keys of its window (N rounded up to 16)
// WARPS: lower-fused-attention-warps.mlir:{{[0-9]+}}:3: error: 'rpe.fused_window_attention' op warps-per-block=16 needs 203328 bytes of shared memory, more than the 166912 a block may have on sm_80
// BADBLOCK: error: key-block must be 16, 32, 48 or 64 (or 0: chosen per window), got 20
// BADWARPS: error: warps-per-block must be in [1, 32] (or 0: chosen per window), got 33

// Swin-T stage 1, f16, shifted: N = 49 -> N' = 64 keys, one block of 64.
// Shared memory per warp: query tile 16 rows, keys and values 64 rows, of
// 32 + 8 f16 (16 bytes of padding per row keep fragment loads free of bank
// conflicts), table 169 (f32), key offsets and labels 64 each (i32):
// 12.4 KB, so three warps (items) per block of 96 threads; the grid rounds
// up. The buffers are 16-byte aligned workgroup globals (rows move as
// 16-byte vectors).
// GPU: memref.global "private" @__rpe_shared_queries : memref<1920xf16, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// GPU-NEXT: memref.global "private" @__rpe_shared_keys : memref<7680xf16, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// GPU-NEXT: memref.global "private" @__rpe_shared_values : memref<7680xf16, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// GPU-NEXT: memref.global "private" @__rpe_shared_table : memref<507xf32, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// GPU-NEXT: memref.global "private" @__rpe_shared_key_offsets : memref<192xi32, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// GPU-NEXT: memref.global "private" @__rpe_shared_key_labels : memref<192xi32, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// GPU-LABEL: func @stage1_f16
// GPU-SAME: attributes {rpe.items_per_block = 3 : i64}
// GPU: %[[ITEMS:.*]] = arith.muli %{{.*}}, %c3
// GPU: %[[ROUND:.*]] = arith.addi %[[ITEMS]], %c2
// GPU: %[[BLOCKS:.*]] = arith.divui %[[ROUND]], %c3
// GPU: gpu.launch blocks({{.*}}) in ({{.*}} = %[[BLOCKS]], {{.*}}) threads({{.*}}) in ({{.*}} = %c96
// A warp per (window, head): item = block * 3 + thread / 32.
// GPU: %[[SLOT:.*]] = arith.divui %{{.*}}, %c32
// GPU: %[[ST:.*]] = memref.get_global @__rpe_shared_table
// GPU: gpu.lane_id
// The table is staged times log2(e): the softmax runs in base 2.
// GPU: arith.mulf %{{.*}}, %{{.*}} : f32
// GPU: memref.store %{{.*}}, %[[ST]][%{{.*}}] : memref<507xf32, #gpu.address_space<workgroup>>
// Whether the window holds one region: the labels of its first and last
// tokens agree.
// GPU: %[[ONEREGION:.*]] = arith.cmpi eq, %{{[0-9]+}}, %{{[0-9]+}} : index
// Keys and values: 16 bytes per lane (4 lanes per row, 8 rows per step),
// eight steps' loads issued before their stores.
// GPU-COUNT-8: vector.load %{{.*}} {alignment = 16 : i64} : memref<?xf16, strided<[1], offset: ?>>, vector<8xf16>
// GPU: vector.store %{{.*}} {alignment = 16 : i64} : memref<7680xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// GPU: nvvm.bar.warp.sync
// The online softmax starts from the lowest finite max, not -inf: keys
// with -inf scores (a -inf table entry) then give 2^(-inf - m) = 0 instead
// of 2^(-inf - -inf) = NaN when a row's first block of keys has nothing
// else; a row of -inf only still ends as 0 / 0 = NaN.
// The mask value -100 in base 2.
// GPU: %[[MASK:.*]] = arith.constant -144.269501 : f32
// GPU-NEXT: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// GPU-NEXT: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// GPU: %[[M0:.*]] = arith.constant -3.40282347E+38 : f32
// A loop over the query tiles; all 64 keys are one block, not a loop.
// GPU: scf.for
// GPU-NOT: iter_args
// Scores: 8 key tiles x 2 k-steps of m16n8k16, f16 operands, f32 accumulators.
// GPU-COUNT-16: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// Keys 49..63 are padding: -inf in the last two key tiles only (4 elements
// of each per lane).
// GPU-COUNT-8: arith.select %{{.*}}, %[[NEGINF]], %{{.*}} : f32
// GPU-NOT: %[[NEGINF]]
// The shift mask in a branch that windows of one region (whose first and
// last tokens share a label) skip: 32 scores per lane.
// GPU: scf.if %[[ONEREGION]] -> ({{(f32, )+}}f32) {
// GPU-NEXT: scf.yield
// GPU-NEXT: } else {
// GPU-COUNT-32: arith.select %{{.*}}, %[[MASK]], %[[ZERO]] : f32
// GPU: scf.yield
// The row max over a quad of lanes, from the lowest finite value, then 2^x.
// GPU: arith.maximumf %[[M0]], %{{.*}} : f32
// GPU: gpu.shuffle xor %{{.*}}, %c1_i32{{.*}}, %c32_i32{{.*}} : f32
// GPU: gpu.shuffle xor %{{.*}}, %c2_i32{{.*}}, %c32_i32{{.*}} : f32
// GPU: math.exp2
// P·v and the row sums P·1: 4 k-steps of 16 keys x (a tile of ones + 4
// tiles of 8 channels), P straight from the score fragments (rounded to f16).
// GPU: arith.truncf %{{.*}} : f32 to f16
// GPU: %[[ONE:.*]] = arith.constant 1.000000e+00 : f16
// GPU: vector.from_elements %[[ONE]], %[[ONE]] : vector<2xf16>
// GPU-NEXT: vector.from_elements %[[ONE]], %[[ONE]] : vector<2xf16>
// GPU-NEXT: nvvm.mma.sync
// GPU-COUNT-19: nvvm.mma.sync
// GPU-NOT: nvvm.mma.sync
// l comes from the tensor cores: no shuffles after the last max.
// GPU-NOT: gpu.shuffle
// GPU: gpu.terminator

// On the host, each lane value is a vector of the warp's 32 lanes.
// HOST-LABEL: func @stage1_f16
// HOST: scf.parallel
// HOST: memref.alloca_scope
// The block's buffers, the item in slot item mod 3.
// HOST: memref.alloca() : memref<1920xf16>
// HOST: memref.alloca() : memref<7680xf16>
// HOST: arith.remui %{{.*}}, %c3
// HOST: vector.gather %{{.*}} : memref<?xf16, strided<[1], offset: ?>>, vector<32xindex>, vector<32xi1>, vector<32xf16> into vector<32xf16>
// HOST: vector.scatter
// mma.sync by its definition: lanes of A and B permuted, then FMAs.
// HOST: vector.shuffle %{{.*}}, %{{.*}} [0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8,
// HOST: math.fma %{{.*}} : vector<32xf32>
// The quad reduction: lane ^ 1.
// HOST: vector.shuffle %{{.*}}, %{{.*}} [1, 0, 3, 2, 5, 4,
// HOST-NOT: nvvm
// HOST-NOT: gpu.
// For a loop that will run sequentially, the buffers are allocated once,
// before it, and no alloca scope splits its body.
// HOISTED-LABEL: func @stage1_f16
// HOISTED: memref.alloca() : memref<1920xf16>
// HOISTED: scf.parallel
// HOISTED-NOT: memref.alloca
// HOISTED: return
func.func @stage1_f16(%q: memref<?x3x49x32xf16>, %t: memref<169x3xf16>, %o: memref<?x49x96xf16>) {
  rpe.fused_window_attention ins(%q, %q, %q, %t : memref<?x3x49x32xf16>, memref<?x3x49x32xf16>, memref<?x3x49x32xf16>, memref<169x3xf16>)
    outs(%o : memref<?x49x96xf16>) {window = array<i64: 7, 7>, scale = 0.1767767 : f32,
                                     resolution = array<i64: 56, 56>, shift = array<i64: 3, 3>}
  return
}

// -----

// bf16 operands go to NVVM as i32 pairs. A 12x12 window (N' = 144) runs
// three blocks of 48 keys; 27 KB of shared memory per warp: one warp per
// block.
// GPU-LABEL: func @window12_bf16
// GPU-SAME: attributes {rpe.items_per_block = 1 : i64}
// GPU: threads({{.*}}) in ({{.*}} = %c32
// GPU: scf.for %{{.*}} = %c0{{.*}} to %c3{{(_[0-9]+)?}} step %c1{{.*}} iter_args
// GPU: llvm.bitcast %{{.*}} : vector<2xbf16> to i32
// GPU: nvvm.mma.sync {{.*}} multiplicandAPtxType = #nvvm.mma_type<bf16>
func.func @window12_bf16(%q: memref<?x2x144x32xbf16>, %t: memref<529x2xbf16>, %o: memref<?x2x144x32xbf16>) {
  rpe.fused_window_attention ins(%q, %q, %q, %t : memref<?x2x144x32xbf16>, memref<?x2x144x32xbf16>, memref<?x2x144x32xbf16>, memref<529x2xbf16>)
    outs(%o : memref<?x2x144x32xbf16>) {window = array<i64: 12, 12>, scale = 0.1767767 : f32}
  return
}

// -----

// What the tensor-core kernel does not take gets the row kernel: f32
// operands, a head_dim that is not a multiple of 16, and a window whose keys
// and values exceed 48 KiB of static shared memory (24x24, N = 576; with an
// explicit warps-per-block it takes dynamic shared memory,
// lower-fused-attention-dynamic-shared.mlir).
// GPU-LABEL: func @f32_rows
// GPU-SAME: attributes {rpe.items_per_block = 1 : i64}
// GPU-NOT: nvvm.mma.sync
// GPU: threads({{.*}}) in ({{.*}} = %c64
// GPU-LABEL: func @head_dim_8_rows
// GPU-NOT: nvvm.mma.sync
// GPU-LABEL: func @window24_rows
// GPU-NOT: nvvm.mma.sync
// GPU: threads({{.*}}) in ({{.*}} = %c576
// HOST-LABEL: func @f32_rows
// HOST-NOT: vector.gather
// HOST: scf.parallel
// HOST: scf.parallel
// The online softmax starts from the lowest finite max, not -inf (see the
// warp kernel), and its max propagates NaN.
// HOST: %[[M0:.*]] = arith.constant -3.40282347E+38 : f32
// HOST: scf.for {{.*}} iter_args(%{{.*}} = %[[M0]],
// HOST: arith.maximumf %{{.*}}, %{{.*}} : f32
func.func @f32_rows(%q: memref<?x3x49x32xf32>, %t: memref<169x3xf32>, %o: memref<?x49x96xf32>) {
  rpe.fused_window_attention ins(%q, %q, %q, %t : memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<169x3xf32>)
    outs(%o : memref<?x49x96xf32>) {window = array<i64: 7, 7>, scale = 0.1767767 : f32}
  return
}
func.func @head_dim_8_rows(%q: memref<?x3x49x8xf16>, %t: memref<169x3xf16>, %o: memref<?x3x49x8xf16>) {
  rpe.fused_window_attention ins(%q, %q, %q, %t : memref<?x3x49x8xf16>, memref<?x3x49x8xf16>, memref<?x3x49x8xf16>, memref<169x3xf16>)
    outs(%o : memref<?x3x49x8xf16>) {window = array<i64: 7, 7>, scale = 0.35 : f32}
  return
}
func.func @window24_rows(%q: memref<?x1x576x32xf16>, %t: memref<2209x1xf16>, %o: memref<?x1x576x32xf16>) {
  rpe.fused_window_attention ins(%q, %q, %q, %t : memref<?x1x576x32xf16>, memref<?x1x576x32xf16>, memref<?x1x576x32xf16>, memref<2209x1xf16>)
    outs(%o : memref<?x1x576x32xf16>) {window = array<i64: 24, 24>, scale = 0.1767767 : f32}
  return
}
