// RUN: swin-opt %s --rpe-lower-fused-attention --mlir-print-elementsattrs-with-hex-if-larger=-1 -split-input-file | FileCheck %s
// RUN: swin-opt %s --rpe-lower-fused-attention=vector-width=16 -split-input-file | FileCheck %s --check-prefix=W16
// RUN: swin-opt %s --rpe-lower-fused-attention="vector-width=16 avx512=true" -split-input-file | FileCheck %s --check-prefix=AVX512

// Swin-T stage 1 with a shifted window: 7x7 window, keys padded per window
// row to 8 lanes (N' = 56), region labels as a constant [nW, N'] table.
// CHECK: memref.global "private" constant @__rpe_region_labels : memref<4x56xi32> = dense<
// Window 0 (top left) is one region; the padding lane of each key row is -1.
// CHECK-SAME: {{\[}}[0, 0, 0, 0, 0, 0, 0, -1, 0,
// Window 3 (bottom right), last key row: rows label 2, columns 1 then 2.
// CHECK-SAME: 7, 7, 7, 7, 8, 8, 8, -1]]>
// CHECK-LABEL: func @stage1
// CHECK-SAME: (%[[Q:.*]]: memref<?x3x49x32xf32>, %[[K:.*]]: memref<?x3x49x32xf32>, %[[V:.*]]: memref<?x3x49x32xf32>, %[[T:.*]]: memref<169x3xf32>, %[[O:.*]]: memref<?x49x96xf32>)
// q, k, v and out are addressed by rows of flat views.
// CHECK: %[[KC:.*]] = memref.collapse_shape %[[K]] {{\[\[}}0, 1, 2, 3]] : memref<?x3x49x32xf32> into memref<?xf32>
// CHECK: %[[KF:.*]] = memref.cast %[[KC]] : memref<?xf32> to memref<?xf32, strided<[1], offset: ?>>
// CHECK: %[[VC:.*]] = memref.collapse_shape %[[V]] {{\[\[}}0, 1, 2, 3]]
// CHECK: %[[VF:.*]] = memref.cast %[[VC]]
// CHECK: %[[OC:.*]] = memref.collapse_shape %[[O]] {{\[\[}}0, 1, 2]] : memref<?x49x96xf32> into memref<?xf32>
// CHECK: %[[OF:.*]] = memref.cast %[[OC]]
// The table, reversed per head (plus one vector of padding), once per call.
// CHECK: %[[R:.*]] = memref.alloca() : memref<3x177xf32>
// CHECK: %[[TV:.*]] = memref.load %[[T]][%{{.*}}, %{{.*}}] : memref<169x3xf32>
// CHECK: arith.mulf %[[TV]], %{{.*}} : f32
// CHECK: %[[LABELS:.*]] = memref.get_global @__rpe_region_labels : memref<4x56xi32>
// One loop over the windows x heads items (marked for rpe-item-range),
// item = w * 3 + h, each with its scratch in an alloca scope.
// CHECK: %[[ITEMS:.*]] = arith.muli %{{.*}}, %c3{{.*}} : index
// CHECK: scf.parallel (%[[ITEM:.*]]) = (%{{.*}}) to (%[[ITEMS]])
// CHECK: memref.alloca_scope
// CHECK: %[[KT:.*]] = memref.alloca() {alignment = 64 : i64} : memref<32x56xf32>
// CHECK: %[[S:.*]] = memref.alloca() {alignment = 64 : i64} : memref<49x56xf32>
// CHECK: %[[H:.*]] = arith.remui %[[ITEM]], %c3{{.*}} : index
// Pack: kᵀ scaled, 8 keys (7 and a zero padding lane) x 8 channels at a
// time, transposed in registers by 24 shuffles.
// CHECK: vector.load %[[KF]]
// CHECK: arith.mulf %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK-COUNT-24: vector.shuffle
// CHECK: vector.store %{{.*}}, %[[KT]]
// Scores: 2 rows x 7 vectors of accumulators, which start at -inf on the
// padding lane of each key row (0 elsewhere): padding keys score -inf from
// the start, and no instruction adds it afterwards.
// CHECK: %[[PAD:.*]] = arith.constant dense<[0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0xFF800000]> : vector<8xf32>
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[PAD]], {{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK: vector.load %[[KT]]
// CHECK: vector.fma
// Bias: one contiguous load of the reversed table per key row, masked to
// the row's 7 keys (the padding lane reads 0, not a table entry, so that
// its -inf stays -inf); mask from labels; running max, the row in
// registers.
// The softmax runs in base 2: the mask value is -100 * log2(e).
// CHECK: %[[MASKV:.*]] = arith.constant dense<-144.269501> : vector<8xf32>
// CHECK: %[[SEVEN:.*]] = vector.create_mask %c7{{.*}} : vector<8xi1>
// CHECK: vector.maskedload %[[R]][%[[H]], %{{.*}}], %[[SEVEN]], %{{.*}} : memref<3x177xf32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
// CHECK: vector.load %[[LABELS]]
// CHECK: arith.cmpi ne
// CHECK: arith.select %{{.*}}, %[[MASKV]]
// CHECK-NOT: 0xFF800000]>
// The running max skips NaN scores (s > max ? s : max); a NaN score
// reaches its row through s - max, the clamp, which keeps NaN (maximumf),
// 2^x and the row's sum.
// CHECK: %[[GT:.*]] = arith.cmpf ogt, %[[SB:.*]], %[[MAX:.*]] : vector<8xf32>
// CHECK: arith.select %[[GT]], %[[SB]], %[[MAX]] : vector<8xi1>, vector<8xf32>
// The row maxima of up to three rows in one vector: each level pairs two
// vectors and halves their segments, then a butterfly within the
// segments, and each row's segment is broadcast. No row is reduced alone
// to a scalar.
// CHECK-NOT: vector.reduction
// CHECK: vector.shuffle %[[M0:.*]], %[[M1:.*]] [0, 1, 2, 3, 8, 9, 10, 11] : vector<8xf32>, vector<8xf32>
// CHECK: vector.shuffle %[[M0]], %[[M1]] [4, 5, 6, 7, 12, 13, 14, 15] : vector<8xf32>, vector<8xf32>
// CHECK: arith.cmpf ogt
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 4, 5, 8, 9, 12, 13] : vector<8xf32>, vector<8xf32>
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [2, 3, 6, 7, 10, 11, 14, 15] : vector<8xf32>, vector<8xf32>
// CHECK: vector.shuffle %[[RM:.*]], %[[RM]] [1, 0, 3, 2, 5, 4, 7, 6] : vector<8xf32>, vector<8xf32>
// CHECK: %[[ROWMAX:.*]] = vector.shuffle %[[RMS:.*]], %[[RMS]] [0, 1, 0, 1, 0, 1, 0, 1] : vector<8xf32>, vector<8xf32>
// CHECK-NOT: vector.reduction
// CHECK: %[[SHIFTED:.*]] = arith.subf %{{.*}}, %[[ROWMAX]] : vector<8xf32>
// CHECK: arith.maximumf %[[SHIFTED]], %{{.*}} : vector<8xf32>
// 2^x is a polynomial and exponent arithmetic in registers, not a call,
// and no float-to-int conversion (poison for NaN).
// CHECK-NOT: math.exp
// CHECK-NOT: arith.fptosi
// CHECK: math.fma
// CHECK: arith.shli
// CHECK: arith.bitcast
// CHECK: arith.mulf
// CHECK-NOT: arith.fptosi
// The row sums likewise, then one division for the group's rows, stored
// per row.
// CHECK-NOT: vector.reduction
// CHECK: %[[INV:.*]] = arith.divf %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK: %[[INV0:.*]] = vector.extract %[[INV]][0] : f32 from vector<8xf32>
// CHECK: memref.store %[[INV0]]
// Output: P · v, normalized once per row, into the merged-heads layout.
// CHECK: vector.load %[[VF]]
// CHECK: vector.fma
// CHECK: vector.store %{{.*}}, %[[OF]]
// CHECK-NOT: rpe.fused_window_attention
// AVX-512 width: rows stay padded to 8 (N' = 56), the micro-kernels' 16-lane
// vectors cover 64 columns (the last 8 zero in kᵀ, -inf in the scores) and
// 5 rows x 4 vectors of accumulators fit the 32 registers. The softmax runs
// at 16 lanes too: the bias of two key rows, two 8-lane loads of the
// reversed table, joined; labels padded to the 64 columns.
// W16-LABEL: func @stage1
// W16: memref.get_global @__rpe_region_labels : memref<4x64xi32>
// W16: memref.alloca() {alignment = 64 : i64} : memref<32x64xf32>
// W16: memref.alloca() {alignment = 64 : i64} : memref<49x64xf32>
// The last vector: key row 6, then 8 columns past the keys, all -inf, where
// the accumulators start.
// W16: %[[PAD3:.*]] = arith.constant dense<[0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000]> : vector<16xf32>
// W16: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %[[PAD3]], {{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// The scores go from the micro-kernel's accumulators to the softmax in
// registers: no store of S between the products and the bias.
// W16-NOT: vector.store %{{.*}} : memref<49x64xf32>, vector<16xf32>
// Each query row of the softmax prefetches one token of the next item: its
// rows of q, k and v, two cache lines each, and its output row for writing.
// W16-COUNT-6: memref.prefetch %{{.*}}[%{{.*}}], read, locality<3>, data
// W16-COUNT-2: memref.prefetch %[[OUT:.*]][%{{.*}}], write, locality<3>, data
// W16: %[[B0:.*]] = vector.maskedload %{{.*}} : memref<3x177xf32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
// W16: %[[B1:.*]] = vector.maskedload %{{.*}} : memref<3x177xf32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
// W16: vector.shuffle %[[B0]], %[[B1]] [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] : vector<8xf32>, vector<8xf32>
// W16: vector.load %{{.*}} : memref<4x64xi32>, vector<16xi32>
// The maxima of rows 0-2 of the 5-row block: segments of 8, then 4 lanes
// (128-bit blocks), a butterfly within them, then a block broadcast.
// W16-NOT: vector.reduction
// W16: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23] : vector<16xf32>, vector<16xf32>
// W16: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27] : vector<16xf32>, vector<16xf32>
// W16: vector.shuffle %{{.*}}, %{{.*}} [2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13] : vector<16xf32>, vector<16xf32>
// W16: vector.shuffle %{{.*}}, %{{.*}} [1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14] : vector<16xf32>, vector<16xf32>
// W16: vector.shuffle %{{.*}}, %{{.*}} [4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7] : vector<16xf32>, vector<16xf32>
// W16-NOT: vector<8xf32>
// W16: arith.shli %{{.*}} : vector<16xi32>
// W16-NOT: vector<8xf32>
// W16-NOT: vector.reduction
// W16: arith.divf %{{.*}}, %{{.*}} : vector<16xf32>
// Without avx512, 2^x is a clamp and exponent arithmetic (above); with it,
// no clamp: f = x - floor(x) is vreduceps (an intrinsic call: no op of
// MLIR's is it), then the degree-5 polynomial on [0, 1), then vscalefps by
// 2^floor(x), which takes x itself (x = -inf: f = 0, 2^-inf = 0).
// AVX512-LABEL: func @stage1
// AVX512-NOT: arith.shli
// AVX512: %[[X:.*]] = arith.subf %{{.*}}, %{{.*}} : vector<16xf32>
// AVX512-NOT: arith.maximumf
// AVX512: %[[F:.*]] = llvm.call_intrinsic "llvm.x86.avx512.mask.reduce.ps.512"(%[[X]], %{{.*}}, %[[X]], %{{.*}}, %{{.*}}) : (vector<16xf32>, i32, vector<16xf32>, i16, i32) -> vector<16xf32>
// AVX512-COUNT-5: math.fma %{{.*}}, %[[F]], %{{.*}} : vector<16xf32>
// AVX512: x86vector.avx512.mask.scalef %[[P:.*]], %[[X]], %[[P]], %{{.*}} : vector<16xf32>
// AVX512-NOT: arith.shli
// AVX512-LABEL: func @unpadded_f16
func.func @stage1(%q: memref<?x3x49x32xf32>, %k: memref<?x3x49x32xf32>, %v: memref<?x3x49x32xf32>,
                  %t: memref<169x3xf32>, %o: memref<?x49x96xf32>) {
  rpe.fused_window_attention ins(%q, %k, %v, %t : memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<169x3xf32>)
    outs(%o : memref<?x49x96xf32>) {window = array<i64: 7, 7>, scale = 0.125 : f32, resolution = array<i64: 14, 14>, shift = array<i64: 3, 3>}
  return
}

// -----

// 8x8 window: rows need no padding, no mask: neither pad lanes nor labels.
// f16 storage is widened on load and narrowed on store: k into kᵀ, v and q
// into f32 scratch once per item (the micro-kernels then read f32); a
// head_dim of 12 ends in a masked vector.
// CHECK-LABEL: func @unpadded_f16
// CHECK-NOT: 0xFF800000]
// CHECK-NOT: memref.get_global
// CHECK: memref.alloca() {alignment = 64 : i64} : memref<12x64xf32>
// CHECK: %[[VW:.*]] = memref.alloca() {alignment = 64 : i64} : memref<768xf32>
// CHECK: %[[QW:.*]] = memref.alloca() {alignment = 64 : i64} : memref<768xf32>
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: vector.maskedload %{{.*}} : memref<?xf16, strided<[1], offset: ?>>, vector<8xi1>, vector<8xf16> into vector<8xf16>
// CHECK: vector.maskedstore %[[VW]]
// CHECK: vector.maskedstore %[[QW]]
// The scores' micro-kernel broadcasts f32 elements of the widened q.
// CHECK: memref.load %[[QW]][%{{.*}}] : memref<768xf32>
// CHECK: vector.broadcast %{{.*}} : f32 to vector<8xf32>
// CHECK: arith.truncf %{{.*}} : vector<8xf32> to vector<8xf16>
// CHECK: vector.maskedstore
func.func @unpadded_f16(%q: memref<5x2x64x12xf16>, %t: memref<225x2xf16>, %o: memref<5x2x64x12xf16>) {
  rpe.fused_window_attention ins(%q, %q, %q, %t : memref<5x2x64x12xf16>, memref<5x2x64x12xf16>, memref<5x2x64x12xf16>, memref<225x2xf16>)
    outs(%o : memref<5x2x64x12xf16>) {window = array<i64: 8, 8>, scale = 0.25 : f32}
  return
}

// -----

// Large windows (24x24, N = 576) score query rows in blocks that fit L1:
// 32 KiB / (576 * 4) = 14 rows.
// CHECK-LABEL: func @large_window
// CHECK: memref.alloca() {alignment = 64 : i64} : memref<14x576xf32>
// CHECK: scf.for %{{.*}} = %{{.*}} to %c576{{.*}} step %c14
func.func @large_window(%q: memref<?x1x576x32xf32>, %t: memref<2209x1xf32>, %o: memref<?x576x32xf32>) {
  rpe.fused_window_attention ins(%q, %q, %q, %t : memref<?x1x576x32xf32>, memref<?x1x576x32xf32>, memref<?x1x576x32xf32>, memref<2209x1xf32>)
    outs(%o : memref<?x576x32xf32>) {window = array<i64: 24, 24>, scale = 0.25 : f32}
  return
}

// -----

// An explicit mask operand ([nW, N, N], here a function argument): window w
// adds mask[w mod nW], one masked 7-lane load per key row of the padded key
// layout, times log2(e) like the bias (base-2 softmax).
// CHECK-LABEL: func @runtime_mask
// CHECK-SAME: %[[M:[a-z0-9]+]]: memref<4x49x49xf32>
// CHECK: %[[MC:.*]] = memref.collapse_shape %[[M]] {{\[\[}}0, 1, 2]] : memref<4x49x49xf32> into memref<9604xf32>
// CHECK: %[[MF:.*]] = memref.cast %[[MC]]
// CHECK: arith.remui %{{.*}}, %c4 : index
// CHECK: %[[LOG2E:.*]] = arith.constant dense<1.44269502> : vector<8xf32>
// CHECK: %[[MV:.*]] = vector.maskedload %[[MF]][%{{.*}}], %{{.*}}, %{{.*}} : memref<?xf32, strided<[1], offset: ?>>, vector<8xi1>, vector<8xf32> into vector<8xf32>
// CHECK: math.fma %[[MV]], %[[LOG2E]], %{{.*}} : vector<8xf32>
func.func @runtime_mask(%q: memref<?x3x49x32xf32>, %t: memref<169x3xf32>, %m: memref<4x49x49xf32>, %o: memref<?x49x96xf32>) {
  rpe.fused_window_attention ins(%q, %q, %q, %t : memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<?x3x49x32xf32>, memref<169x3xf32>)
    mask(%m : memref<4x49x49xf32>) outs(%o : memref<?x49x96xf32>) {window = array<i64: 7, 7>, scale = 1.0 : f32}
  return
}

// -----

// Token layout (a 9x13 map, shift then pad to 12x18, windows 4x6): each
// row address is a load from a constant table of the window tokens' image
// positions (-1: padding), not the roll/pad/partition arithmetic. Window
// 0, token 0 is image position (0 + 2) * 13 + (0 + 3) = 29.
// CHECK: memref.global "private" constant @__rpe_token_positions : memref<9x24xi32> = dense<{{\[\[}}29, 30, 31, 32, 33, 34, 42,
// CHECK-SAME: -1
// CHECK-LABEL: func @tokens
// CHECK: %[[POS:.*]] = memref.get_global @__rpe_token_positions : memref<9x24xi32>
// CHECK: scf.parallel
// CHECK: %[[P:.*]] = memref.load %[[POS]][%{{.*}}, %{{.*}}] : memref<9x24xi32>
// CHECK: %[[VALID:.*]] = arith.cmpi sge, %[[P]], %{{.*}} : i32
// CHECK: arith.index_cast %{{.*}} : i32 to index
func.func @tokens(%x: memref<?x117x96xf32>, %p: memref<96xf32>, %t: memref<77x3xf32>, %o: memref<?x117x96xf32>) {
  rpe.fused_window_attention ins(%x, %x, %x, %t : memref<?x117x96xf32>, memref<?x117x96xf32>, memref<?x117x96xf32>, memref<77x3xf32>)
    pads(%p, %p, %p : memref<96xf32>, memref<96xf32>, memref<96xf32>) outs(%o : memref<?x117x96xf32>)
    {image = array<i64: 9, 13>, padding = #rpe.padding<shift_then_pad>, resolution = array<i64: 12, 18>, shift = array<i64: 2, 3>, window = array<i64: 4, 6>, scale = 0.125 : f32}
  return
}

// -----

// MaxViT's grid on a 4x6 map, windows of 2x3 tokens strided by the 2x2
// grid: window (wy, wx), token (ty, tx) is image position
// (2 ty + wy) * 6 + 2 tx + wx, the same table of positions as the blocks'
// (timm's grid_partition, without its copies). Nothing is padded.
// CHECK: memref.global "private" constant @__rpe_token_positions : memref<4x6xi32> = dense<{{\[\[}}0, 2, 4, 12, 14, 16], [1, 3, 5, 13, 15, 17], [6, 8, 10, 18, 20, 22], [7, 9, 11, 19, 21, 23]]>
// CHECK-LABEL: func @grid_tokens
// CHECK: %[[POS:.*]] = memref.get_global @__rpe_token_positions : memref<4x6xi32>
// CHECK: memref.load %[[POS]][%{{.*}}, %{{.*}}] : memref<4x6xi32>
// CHECK-NOT: arith.cmpi sge
// CHECK: return
func.func @grid_tokens(%x: memref<?x24x8xf32>, %t: memref<15x2xf32>, %o: memref<?x24x8xf32>) {
  rpe.fused_window_attention ins(%x, %x, %x, %t : memref<?x24x8xf32>, memref<?x24x8xf32>, memref<?x24x8xf32>, memref<15x2xf32>)
    outs(%o : memref<?x24x8xf32>)
    {image = array<i64: 4, 6>, partition = #rpe.partition<grid>, resolution = array<i64: 4, 6>, shift = array<i64: 0, 0>, window = array<i64: 2, 3>, scale = 0.5 : f32}
  return
}
