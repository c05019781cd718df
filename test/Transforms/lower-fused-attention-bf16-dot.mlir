// RUN: swin-opt %s --rpe-lower-fused-attention="vector-width=16 bf16-dot=true" -split-input-file | FileCheck %s
// RUN: swin-opt %s --rpe-lower-fused-attention="vector-width=16" -split-input-file | FileCheck %s --check-prefix=NODOT
// RUN: swin-opt %s --rpe-cpu-pipeline="vector-width=16 bf16-dot=true" -split-input-file | mlir-translate --mlir-to-llvmir -split-input-file | FileCheck %s --check-prefix=LLVM

// AVX512-BF16: Swin-T stage 1 (bf16, shifted) on vdpbf16ps. kᵀ packed as
// 32-bit pairs of channels [d/2, 2 x 64 columns], transposed 8 x 8 in
// registers; v as pairs of consecutive keys [ceil(N/2) = 25, 2d], two rows
// interleaved; P rounded to bf16 per query row, stored with the keys
// unpadded ([49 rows, 64]).
// CHECK-LABEL: func @stage1_bf16
// CHECK: %[[KP:.*]] = memref.alloca() {alignment = 64 : i64} : memref<16x128xbf16>
// CHECK: %[[VP:.*]] = memref.alloca() {alignment = 64 : i64} : memref<25x64xbf16>
// CHECK: memref.alloca() {alignment = 64 : i64} : memref<3136xbf16>
// CHECK: vector.bitcast %{{.*}} : vector<16xbf16> to vector<8xi32>
// CHECK-COUNT-24: vector.shuffle {{.*}} : vector<8xi32>, vector<8xi32>
// CHECK: vector.bitcast %{{.*}} : vector<8xi32> to vector<16xbf16>
// CHECK: vector.store %{{.*}}, %[[KP]]
// The value pairs: rows 2p and 2p + 1 interleaved, 16 channels at a time.
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 16, 1, 17, 2, 18, {{.*}}, 15, 31] : vector<16xbf16>, vector<16xbf16>
// CHECK: vector.store %{{.*}}, %[[VP]]
// CHECK: %[[SCALE:.*]] = arith.constant dense<0.180336878> : vector<16xf32>
// Scores: a broadcast pair of q's channels times 16 columns' pairs, 5 rows
// x 4 vectors of f32 accumulators.
// CHECK: vector.bitcast %{{.*}} : vector<2xbf16> to vector<1xi32>
// CHECK: vector.broadcast %{{.*}} : vector<1xi32> to vector<16xi32>
// CHECK: vector.load %[[KP]]{{.*}} : memref<16x128xbf16>, vector<32xbf16>
// CHECK-COUNT-5: x86vector.avx512.dot %{{.*}} : vector<32xbf16> -> vector<16xf32>
// The scale (times log2 e) is applied in f32 with the bias.
// CHECK: math.fma %{{.*}}, %[[SCALE]], %{{.*}} : vector<16xf32>
// 2^x on AVX-512: f = x - floor(x) by vreduceps, 2^f * 2^floor(x) by
// vscalefps; degree 3 in f for probabilities rounded to bf16.
// CHECK: %[[X0:.*]] = arith.subf
// CHECK: %[[F0:.*]] = llvm.call_intrinsic "llvm.x86.avx512.mask.reduce.ps.512"(%[[X0]],
// CHECK-COUNT-3: math.fma %{{.*}}, %[[F0]], %{{.*}}
// CHECK: %[[E0:.*]] = x86vector.avx512.mask.scalef %{{.*}}, %[[X0]], %{{.*}}
// CHECK: %[[E1:.*]] = x86vector.avx512.mask.scalef
// CHECK: %[[E2:.*]] = x86vector.avx512.mask.scalef
// CHECK: %[[E3:.*]] = x86vector.avx512.mask.scalef
// Each pair of vectors: one rounding to bf16 (the first in the low lanes),
// one dot product with ones for the row's sum.
// CHECK: %[[ONES:.*]] = arith.constant dense<1.000000e+00> : vector<32xbf16>
// CHECK: %[[P01:.*]] = llvm.call_intrinsic "llvm.x86.avx512bf16.cvtne2ps2bf16.512"(%[[E1]], %[[E0]]) : (vector<16xf32>, vector<16xf32>) -> vector<32xbf16>
// CHECK: %[[SUM:.*]] = x86vector.avx512.dot %{{.*}}, %[[P01]], %[[ONES]] : vector<32xbf16> -> vector<16xf32>
// CHECK: %[[P23:.*]] = llvm.call_intrinsic "llvm.x86.avx512bf16.cvtne2ps2bf16.512"(%[[E3]], %[[E2]])
// CHECK: x86vector.avx512.dot %[[SUM]], %[[P23]], %[[ONES]]
// Keys unpadded: 2 vectors (4 key rows of 7 and a padding lane each) give
// keys 0-27 in one permutation and store; the next two, keys 28-48 and
// padding lanes (lane 7: key row 4's padding).
// CHECK: %[[D0:.*]] = vector.shuffle %[[P01]], %[[P01]] [0, 1, 2, 3, 4, 5, 6, 8, 9, {{.*}}, 29, 30, 7, 7, 7, 7] : vector<32xbf16>, vector<32xbf16>
// CHECK: vector.store %[[D0]], %{{.*}} : memref<?xbf16, strided<[1], offset: ?>>, vector<32xbf16>
// CHECK: %[[D1:.*]] = vector.shuffle %[[P23]], %[[P23]] [0, 1, 2, 3, 4, 5, 6, 8, 9, {{.*}}, 21, 22, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7] : vector<32xbf16>, vector<32xbf16>
// CHECK: vector.store %[[D1]], %{{.*}} : memref<?xbf16, strided<[1], offset: ?>>, vector<32xbf16>
// P·v: pairs of keys, 2 vectors of 16 channels per row; the result rounded
// by the conversion instruction.
// CHECK: vector.load %[[VP]]{{.*}} : memref<25x64xbf16>, vector<32xbf16>
// CHECK: x86vector.avx512.dot
// CHECK: x86vector.avx512.cvt.packed.f32_to_bf16
// CHECK-NOT: arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// NODOT-LABEL: func @stage1_bf16
// NODOT-NOT: x86vector
// NODOT: arith.extf %{{.*}} : vector<16xbf16> to vector<16xf32>
// LLVM-LABEL: define void @stage1_bf16
// LLVM: call <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float>
// vreduceps(x, imm 9: round down, no precision exception), then
// vscalefps(2^f, x): the polynomial first, the exponent second (the
// intrinsic's operand order, not the x86vector op's).
// LLVM: %[[F:.*]] = call <16 x float> @llvm.x86.avx512.mask.reduce.ps.512(<16 x float> %[[X:.*]], i32 9, <16 x float> %[[X]], i16 -1, i32 4)
// LLVM: %[[P1:.*]] = call <16 x float> @llvm.fma.v16f32(<16 x float> {{.*}}, <16 x float> %[[F]],
// LLVM: %[[P2:.*]] = call <16 x float> @llvm.fma.v16f32(<16 x float> %[[P1]], <16 x float> %[[F]],
// LLVM: %[[P3:.*]] = call <16 x float> @llvm.fma.v16f32(<16 x float> %[[P2]], <16 x float> %[[F]],
// LLVM: call <16 x float> @llvm.x86.avx512.mask.scalef.ps.512(<16 x float> %[[P3]], <16 x float> %[[X]], <16 x float> %{{.*}}, i16 -1, i32 4)
// LLVM: call <32 x bfloat> @llvm.x86.avx512bf16.cvtne2ps2bf16.512(<16 x float>
func.func @stage1_bf16(%q: memref<?x3x49x32xbf16>, %k: memref<?x3x49x32xbf16>, %v: memref<?x3x49x32xbf16>,
                       %t: memref<169x3xbf16>, %o: memref<?x49x96xbf16>) {
  rpe.fused_window_attention ins(%q, %k, %v, %t : memref<?x3x49x32xbf16>, memref<?x3x49x32xbf16>, memref<?x3x49x32xbf16>, memref<169x3xbf16>)
    outs(%o : memref<?x49x96xbf16>) {window = array<i64: 7, 7>, scale = 0.125 : f32, resolution = array<i64: 14, 14>, shift = array<i64: 3, 3>}
  return
}

// -----

// A head_dim that is not a multiple of 16, and f32 operands, keep the FMA
// products.
// CHECK-LABEL: func @head_dim_12
// CHECK-NOT: x86vector
// CHECK: vector.fma
// LLVM-LABEL: define void @head_dim_12
// LLVM-NOT: dpbf16ps
func.func @head_dim_12(%q: memref<5x2x64x12xbf16>, %t: memref<225x2xbf16>, %o: memref<5x2x64x12xbf16>) {
  rpe.fused_window_attention ins(%q, %q, %q, %t : memref<5x2x64x12xbf16>, memref<5x2x64x12xbf16>, memref<5x2x64x12xbf16>, memref<225x2xbf16>)
    outs(%o : memref<5x2x64x12xbf16>) {window = array<i64: 8, 8>, scale = 0.25 : f32}
  return
}

// -----

// CHECK-LABEL: func @f32
// CHECK-NOT: x86vector
// CHECK: vector.fma
// LLVM-LABEL: define void @f32
// LLVM-NOT: dpbf16ps
func.func @f32(%q: memref<5x2x64x32xf32>, %t: memref<225x2xf32>, %o: memref<5x2x64x32xf32>) {
  rpe.fused_window_attention ins(%q, %q, %q, %t : memref<5x2x64x32xf32>, memref<5x2x64x32xf32>, memref<5x2x64x32xf32>, memref<225x2xf32>)
    outs(%o : memref<5x2x64x32xf32>) {window = array<i64: 8, 8>, scale = 0.25 : f32}
  return
}
