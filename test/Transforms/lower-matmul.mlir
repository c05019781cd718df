// RUN: swin-opt %s --rpe-lower-matmul=vector-width=16 -split-input-file | FileCheck %s
// RUN: swin-opt %s --rpe-lower-matmul=vector-width=8 -split-input-file | FileCheck %s --check-prefix=AVX2

// Packed panels of 48 columns: 2 panels of N = 96, M = 16 rows in blocks of
// 8 (AVX-512: 8 x 3 vectors of accumulators), items (panel, block) in
// parallel. Per k: a prefetch of the next row block's A (element 8 k of
// its 8 x 32), 3 loads of the panel, 8 broadcasts of A, 24 FMAs. The
// epilogue (a bias read at n) runs on each vector before its store.
// CHECK-LABEL: func @packed_bias
// CHECK-SAME: (%[[X:.*]]: memref<16x32xf32>, %[[W:.*]]: memref<2x32x48xf32>, %[[B:.*]]: memref<96xf32>, %[[O:.*]]: memref<16x96xf32>)
// CHECK: %[[ITEMS:.*]] = arith.muli %{{.*}}, %c2{{.*}} : index
// CHECK: scf.parallel (%[[ITEM:.*]]) = (%{{.*}}) to (%[[ITEMS]])
// Packed B (12 KB) fits in L2: the items of a row block are consecutive.
// CHECK: %[[BLOCK:.*]] = arith.divui %[[ITEM]], %c2{{.*}} : index
// CHECK: arith.remui %[[ITEM]], %c2{{.*}} : index
// CHECK: arith.muli %[[BLOCK]], %c8{{.*}} : index
// CHECK: scf.for %[[K:.*]] = %{{.*}} to %c32{{.*}} step %c1{{.*}} iter_args({{.*}}) -> (vector<16xf32>, {{.*}}vector<16xf32>) {
// CHECK: %[[STEP:.*]] = arith.muli %[[K]], %c8{{.*}} : index
// CHECK: %[[FLAT:.*]] = arith.minui %[[STEP]], %c255 : index
// CHECK: %[[NEXT:.*]] = arith.divui %[[FLAT]], %c32{{.*}} : index
// CHECK: arith.addi %c8{{.*}}, %[[NEXT]] : index
// CHECK: %[[ROW:.*]] = arith.minui
// CHECK: %[[COLUMN:.*]] = arith.remui %[[FLAT]], %c32{{.*}} : index
// CHECK: memref.prefetch %[[X]][%[[ROW]], %[[COLUMN]]], read, locality<3>, data : memref<16x32xf32>
// CHECK-COUNT-3: vector.load %[[W]][%{{.*}}, %[[K]], %{{.*}}] : memref<2x32x48xf32>, vector<16xf32>
// CHECK: memref.load %[[X]][%{{.*}}, %[[K]]] : memref<16x32xf32>
// CHECK-NEXT: vector.broadcast %{{.*}} : f32 to vector<16xf32>
// CHECK-COUNT-3: vector.fma
// CHECK-COUNT-7: vector.broadcast
// CHECK: scf.yield
// CHECK: %[[BV:.*]] = vector.load %[[B]][%{{.*}}] : memref<96xf32>, vector<16xf32>
// CHECK-NEXT: %[[S:.*]] = arith.addf %{{.*}}, %[[BV]] : vector<16xf32>
// CHECK-NEXT: vector.store %[[S]], %[[O]][%{{.*}}, %{{.*}}] : memref<16x96xf32>, vector<16xf32>
// CHECK-NOT: vector.maskedstore
// With AVX2's 16 registers a panel of 48 columns is 6 vectors: one row
// per tile (the pipeline packs AVX2's panels 24 wide instead).
// AVX2-LABEL: func @packed_bias
// AVX2: scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
func.func @packed_bias(%x: memref<16x32xf32>, %w: memref<2x32x48xf32>, %b: memref<96xf32>, %o: memref<16x96xf32>) {
  rpe.matmul ins(%x, %w : memref<16x32xf32>, memref<2x32x48xf32>) epilogue(%b : memref<96xf32>)
             outs(%o : memref<16x96xf32>) attributes {epilogue_maps = [affine_map<(m, n) -> (n)>]} {
  ^bb0(%acc: f32, %bias: f32):
    %s = arith.addf %acc, %bias : f32
    rpe.yield %s : f32
  }
  return
}

// -----

// Run-time weights [N, K] are packed into a buffer first (freed after),
// and N = 20 of a panel of 48 leaves the last vector with 4 columns:
// masked. A dynamic M ends in single rows; its residual is read at (m, n),
// and prefetched there for the next row block (its 8 x 20 of 160 elements
// over the 8 steps of k: 20 per step) after A (64 elements: 8 per step).
// GELU's erf becomes x P(x^2) / Q(x^2).
// CHECK-LABEL: func @runtime_weights
// CHECK-SAME: (%[[X:.*]]: memref<?x8xf32>, %[[W:.*]]: memref<20x8xf32>, %[[R:.*]]: memref<?x20xf32>, %[[O:.*]]: memref<?x20xf32>)
// CHECK: %[[P:.*]] = memref.alloc() : memref<1x8x48xf32>
// CHECK: memref.load %[[W]]
// CHECK: memref.store %{{.*}}, %[[P]]
// CHECK: scf.parallel
// CHECK: scf.for %[[K:.*]] = %{{.*}} to %c8{{.*}} step %c1{{.*}} iter_args
// CHECK: arith.muli %[[K]], %c8{{.*}} : index
// CHECK: memref.prefetch %[[X]]
// CHECK: %[[STEP:.*]] = arith.muli %[[K]], %c20{{.*}} : index
// CHECK: arith.minui %[[STEP]], %c159 : index
// CHECK: memref.prefetch %[[R]][%{{.*}}, %{{.*}}], read, locality<3>, data : memref<?x20xf32>
// CHECK-NOT: math.erf
// CHECK: arith.divf {{.*}} : vector<16xf32>
// CHECK: vector.maskedstore %[[O]]
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c1
// CHECK: memref.dealloc %[[P]] : memref<1x8x48xf32>
func.func @runtime_weights(%x: memref<?x8xf32>, %w: memref<20x8xf32>, %r: memref<?x20xf32>, %o: memref<?x20xf32>) {
  rpe.matmul ins(%x, %w : memref<?x8xf32>, memref<20x8xf32>) epilogue(%r : memref<?x20xf32>)
             outs(%o : memref<?x20xf32>) attributes {epilogue_maps = [affine_map<(m, n) -> (m, n)>], transpose_rhs} {
  ^bb0(%acc: f32, %res: f32):
    %e = math.erf %acc : f32
    %s = arith.addf %e, %res : f32
    rpe.yield %s : f32
  }
  return
}

// -----

// Packed B of 3 x 1024 x 48 floats (576 KB) does not fit in half an L2:
// the items of a panel are consecutive (the panel stays in cache while A
// streams): panel = item / row blocks, row block = item % row blocks.
// K = 1024 is summed in chunks of 256 k, each from zero in the registers,
// then added to the chunks' before (the rounding error of a long chain).
// CHECK-LABEL: func @large_weights
// CHECK: %[[BLOCKS:.*]] = arith.ceildivui
// CHECK: scf.parallel (%[[ITEM:.*]]) =
// CHECK: arith.divui %[[ITEM]], %[[BLOCKS]] : index
// CHECK: %[[BLOCK:.*]] = arith.remui %[[ITEM]], %[[BLOCKS]] : index
// CHECK: arith.muli %[[BLOCK]], %c8{{.*}} : index
// CHECK: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<16xf32>
// CHECK: %[[SUMS:.*]]:24 = scf.for %[[K0:.*]] = %{{.*}} to %c1024{{.*}} step %c256{{.*}} iter_args(%[[BEFORE:[^ ]*]] = %[[ZERO]],
// CHECK: %[[K1:.*]] = arith.minui %{{.*}}, %c1024{{.*}} : index
// CHECK: %[[CHUNK:.*]]:24 = scf.for %{{.*}} = %[[K0]] to %[[K1]] step %c1{{.*}} iter_args(%{{[^ ]*}} = %[[ZERO]],
// CHECK-COUNT-24: vector.fma
// CHECK: scf.yield
// CHECK: arith.addf %[[BEFORE]], %[[CHUNK]]#0 : vector<16xf32>
// CHECK-COUNT-23: arith.addf
// CHECK: scf.yield
// CHECK: vector.store %[[SUMS]]#0
func.func @large_weights(%x: memref<64x1024xf32>, %w: memref<3x1024x48xf32>, %o: memref<64x144xf32>) {
  rpe.matmul ins(%x, %w : memref<64x1024xf32>, memref<3x1024x48xf32>) outs(%o : memref<64x144xf32>) {
  ^bb0(%acc: f32):
    rpe.yield %acc : f32
  }
  return
}

// -----

// bf16 without bf16-dot: run-time weights packed one k per row, both
// operands widened to f32 FMAs (lower-matmul-bf16-dot.mlir: with it). The
// packing writes bf16 as its bits (i16), through an integer view of the
// buffer: as a bf16 value, x86 without AVX512-BF16 would round it again
// through a libcall (__truncsfbf2).
// CHECK-LABEL: func @bf16_widened
// CHECK: %[[BUF:.*]] = memref.alloc() : memref<288xi8>
// CHECK: %[[P:.*]] = memref.view %[[BUF]][%{{.*}}][] : memref<288xi8> to memref<1x3x48xbf16>
// CHECK: %[[PBITS:.*]] = memref.view %[[BUF]][%{{.*}}][] : memref<288xi8> to memref<1x3x48xi16>
// CHECK: %[[ZERO:.*]] = arith.constant 0 : i16
// CHECK: %[[BITS:.*]] = scf.if %{{.*}} -> (i16) {
// CHECK: %[[B:.*]] = memref.load %{{.*}} : memref<20x3xbf16>
// CHECK-NEXT: %[[BBITS:.*]] = arith.bitcast %[[B]] : bf16 to i16
// CHECK-NEXT: scf.yield %[[BBITS]] : i16
// CHECK: scf.yield %[[ZERO]] : i16
// CHECK: memref.store %[[BITS]], %[[PBITS]]
// CHECK-NOT: x86vector
// CHECK: vector.load %[[P]]{{.*}} : memref<1x3x48xbf16>, vector<16xbf16>
// CHECK-NEXT: arith.extf %{{.*}} : vector<16xbf16> to vector<16xf32>
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: vector.fma
// CHECK: memref.dealloc %[[BUF]] : memref<288xi8>
func.func @bf16_widened(%x: memref<?x3xbf16>, %w: memref<20x3xbf16>, %o: memref<?x20xf32>) {
  rpe.matmul ins(%x, %w : memref<?x3xbf16>, memref<20x3xbf16>) outs(%o : memref<?x20xf32>) attributes {transpose_rhs} {
  ^bb0(%acc: f32):
    rpe.yield %acc : f32
  }
  return
}
