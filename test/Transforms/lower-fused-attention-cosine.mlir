// RUN: swin-opt %s --rpe-lower-fused-attention -split-input-file | FileCheck %s
// RUN: swin-opt %s --rpe-lower-fused-attention=kernel=rows -split-input-file | FileCheck %s --check-prefix=ROWS

// SwinV2's cosine attention in the tiles kernel: per (window, head) the
// head's logit scale, clamped at ln 100, joins the constant scale of kᵀ;
// each key's 1 / max(|k|, 1e-12) scales it as it is packed, and each query
// row's scales its scores.
// CHECK-LABEL: func @cosine
// CHECK-SAME: %[[LS:[a-z0-9]+]]: memref<3xf32>
// CHECK: scf.parallel
// CHECK: %[[RAW:.*]] = memref.load %[[LS]][%{{.*}}] : memref<3xf32>
// CHECK: %[[LN100:.*]] = arith.constant 4.60517025 : f32
// CHECK: %[[CLAMPED:.*]] = arith.minimumf %[[RAW]], %[[LN100]] : f32
// CHECK: %[[HEAD:.*]] = math.exp %[[CLAMPED]] : f32
// CHECK: %[[KSCALE:.*]] = arith.mulf %{{.*}}, %[[HEAD]] : f32
// The pack: a key's sum of squares, its reciprocal norm, its factor.
// CHECK: %[[SQ:.*]] = vector.reduction <add>, %{{.*}} : vector<8xf32> into f32
// CHECK: %[[NORM:.*]] = math.sqrt %[[SQ]] : f32
// CHECK: %[[EPS:.*]] = arith.constant 9.99999996E-13 : f32
// CHECK: %[[GUARDED:.*]] = arith.maximumf %[[NORM]], %[[EPS]] : f32
// CHECK: %[[INV:.*]] = arith.divf %{{.*}}, %[[GUARDED]] : f32
// CHECK: arith.mulf %[[KSCALE]], %[[INV]] : f32
// The scores: q · k̂ times q's reciprocal norm, stored.
// CHECK: math.sqrt
// CHECK: scf.for
// CHECK: vector.fma
// CHECK: %[[SCORE:.*]] = arith.mulf %{{.*}}#0, %{{.*}} : vector<8xf32>
// CHECK: vector.store %[[SCORE]], %{{.*}} : memref<64x64xf32>, vector<8xf32>

// The rows kernel: q's norm from the row it loads, each key's summed with
// its dot product.
// ROWS-LABEL: func @cosine
// ROWS: arith.minimumf
// ROWS: math.exp
// ROWS: math.sqrt
// ROWS: scf.for
// ROWS: math.fma
// ROWS: math.sqrt
// ROWS: arith.maximumf
// ROWS: arith.divf
func.func @cosine(%q: memref<?x3x64x32xf32>, %t: memref<225x3xf32>, %ls: memref<3xf32>, %o: memref<?x64x96xf32>) {
  rpe.fused_window_attention ins(%q, %q, %q, %t : memref<?x3x64x32xf32>, memref<?x3x64x32xf32>, memref<?x3x64x32xf32>, memref<225x3xf32>)
    logit_scale(%ls : memref<3xf32>) outs(%o : memref<?x64x96xf32>) {window = array<i64: 8, 8>, scale = 1.0 : f32}
  return
}

// -----

// The plain attention has none of it.
// CHECK-LABEL: func @plain
// CHECK-NOT: math.sqrt
// CHECK-NOT: arith.minimumf
// ROWS-LABEL: func @plain
// ROWS-NOT: math.sqrt
func.func @plain(%q: memref<?x3x64x32xf32>, %t: memref<225x3xf32>, %o: memref<?x64x96xf32>) {
  rpe.fused_window_attention ins(%q, %q, %q, %t : memref<?x3x64x32xf32>, memref<?x3x64x32xf32>, memref<?x3x64x32xf32>, memref<225x3xf32>)
    outs(%o : memref<?x64x96xf32>) {window = array<i64: 8, 8>, scale = 1.0 : f32}
  return
}
