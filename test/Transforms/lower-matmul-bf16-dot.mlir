// RUN: swin-opt %s --rpe-lower-matmul="vector-width=16 bf16-dot=true" -split-input-file | FileCheck %s

// rpe-lower-matmul with bf16-dot: bf16 operands on AVX512-BF16 dot products
// (lib/Codegen/MatmulKernel.cpp). Without bf16-dot (lower-matmul.mlir) bf16
// widens to f32, and weights packed in pairs are refused
// (lower-matmul-errors.mlir).

// f32 operands keep their FMAs: 8 rows x 3 vectors per k.
// CHECK-LABEL: func @f32_unchanged
// CHECK-NOT: x86vector
// CHECK-COUNT-24: vector.fma
// CHECK-NOT: x86vector
// CHECK: return
func.func @f32_unchanged(%x: memref<16x32xf32>, %w: memref<2x32x48xf32>, %o: memref<16x96xf32>) {
  rpe.matmul ins(%x, %w : memref<16x32xf32>, memref<2x32x48xf32>) outs(%o : memref<16x96xf32>) {
  ^bb0(%acc: f32):
    rpe.yield %acc : f32
  }
  return
}

// -----

// bf16 weights packed in pairs of k (K = 5: pairs (0, 1), (2, 3) and (4, a
// zero row)) take AVX512-BF16 dot products with bf16-dot: each panel's
// pairs read as rows of 2 NR bf16 (a prefetch of the next row block's A
// at 20 of its 8 x 5 bf16 per pair), one 32-bit broadcast of A's pair per row
// and one dot product per (row, vector) and pair; the odd K's last k is
// read alone after the loop (its bits zero-extended: the pair (a, 0)), not
// with the element past the row.
// CHECK-LABEL: func @paired_constant
// CHECK-SAME: (%[[X:.*]]: memref<9x5xbf16>, %[[W:.*]]: memref<1x3x48x2xbf16>, %[[O:.*]]: memref<9x40xf32>)
// CHECK: %[[PAIRS:.*]] = memref.collapse_shape %[[W]] {{\[}}[0], [1], [2, 3]] : memref<1x3x48x2xbf16> into memref<1x3x96xbf16>
// CHECK: scf.parallel
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %c2{{.*}} step %c1{{.*}} iter_args({{.*}}) -> (vector<16xf32>, {{.*}}vector<16xf32>) {
// CHECK: arith.muli %[[J]], %c20{{.*}} : index
// CHECK: memref.prefetch %[[X]][%{{.*}}, %{{.*}}], read, locality<3>, data : memref<9x5xbf16>
// CHECK: %[[TWO:.*]] = vector.load %[[X]][%{{.*}}, %{{.*}}] : memref<9x5xbf16>, vector<2xbf16>
// CHECK-NEXT: %[[BITS:.*]] = vector.bitcast %[[TWO]] : vector<2xbf16> to vector<1xi32>
// CHECK-NEXT: %[[SPLAT:.*]] = vector.broadcast %[[BITS]] : vector<1xi32> to vector<16xi32>
// CHECK-NEXT: vector.bitcast %[[SPLAT]] : vector<16xi32> to vector<32xbf16>
// CHECK-COUNT-3: vector.load %[[PAIRS]][%{{.*}}, %[[J]], %{{.*}}] : memref<1x3x96xbf16>, vector<32xbf16>
// CHECK-COUNT-3: x86vector.avx512.dot {{.*}} : vector<32xbf16> -> vector<16xf32>
// CHECK: scf.yield
// CHECK: %[[LAST:.*]] = memref.load %[[X]][%{{.*}}, %c4{{.*}}] : memref<9x5xbf16>
// CHECK-NEXT: %[[LASTBITS:.*]] = arith.bitcast %[[LAST]] : bf16 to i16
// CHECK-NEXT: arith.extui %[[LASTBITS]] : i16 to i32
// CHECK: vector.load %[[PAIRS]][%{{.*}}, %c2{{.*}}, %{{.*}}] : memref<1x3x96xbf16>, vector<32xbf16>
// CHECK: x86vector.avx512.dot
// CHECK-NOT: vector.fma
// CHECK: vector.maskedstore %[[O]]
func.func @paired_constant(%x: memref<9x5xbf16>, %w: memref<1x3x48x2xbf16>, %o: memref<9x40xf32>) {
  rpe.matmul ins(%x, %w : memref<9x5xbf16>, memref<1x3x48x2xbf16>) outs(%o : memref<9x40xf32>) {
  ^bb0(%acc: f32):
    rpe.yield %acc : f32
  }
  return
}

// -----

// With bf16-dot, bf16 run-time weights [N, K] are packed by the kernel in
// pairs of k: the second of the last pair of an odd K (k = 3) is zero.
// CHECK-LABEL: func @runtime_pairs
// CHECK-SAME: (%[[X:.*]]: memref<?x3xbf16>, %[[W:.*]]: memref<20x3xbf16>, %[[O:.*]]: memref<?x20xf32>)
// CHECK: %[[BUF:.*]] = memref.alloc() : memref<384xi8>
// CHECK: %[[P:.*]] = memref.view %[[BUF]][%{{.*}}][] : memref<384xi8> to memref<1x2x48x2xbf16>
// CHECK: %[[PBITS:.*]] = memref.view %[[BUF]][%{{.*}}][] : memref<384xi8> to memref<1x2x48x2xi16>
// CHECK: %[[INSIDE:.*]] = arith.cmpi ult, %{{.*}}, %c20{{.*}} : index
// CHECK: memref.store %{{.*}}, %[[PBITS]][%{{.*}}, %{{.*}}, %{{.*}}, %c0{{.*}}] : memref<1x2x48x2xi16>
// CHECK: %[[BELOWK:.*]] = arith.cmpi ult, %{{.*}}, %c3{{.*}} : index
// CHECK-NEXT: arith.andi %[[INSIDE]], %[[BELOWK]] : i1
// CHECK: memref.store %{{.*}}, %[[PBITS]][%{{.*}}, %{{.*}}, %{{.*}}, %c1{{.*}}] : memref<1x2x48x2xi16>
// CHECK: memref.collapse_shape %[[P]] {{\[}}[0], [1], [2, 3]] : memref<1x2x48x2xbf16> into memref<1x2x96xbf16>
// CHECK: x86vector.avx512.dot
// CHECK: memref.dealloc %[[BUF]] : memref<384xi8>
func.func @runtime_pairs(%x: memref<?x3xbf16>, %w: memref<20x3xbf16>, %o: memref<?x20xf32>) {
  rpe.matmul ins(%x, %w : memref<?x3xbf16>, memref<20x3xbf16>) outs(%o : memref<?x20xf32>) attributes {transpose_rhs} {
  ^bb0(%acc: f32):
    rpe.yield %acc : f32
  }
  return
}

// -----

// bf16 weights packed one k per row (without bf16-dot at compile time) are
// widened to f32 FMAs, with bf16-dot too.
// CHECK-LABEL: func @bf16_panels_widen
// CHECK-NOT: x86vector
// CHECK: arith.extf %{{.*}} : vector<16xbf16> to vector<16xf32>
// CHECK: vector.fma
func.func @bf16_panels_widen(%x: memref<8x4xbf16>, %w: memref<1x4x48xbf16>, %o: memref<8x48xf32>) {
  rpe.matmul ins(%x, %w : memref<8x4xbf16>, memref<1x4x48xbf16>) outs(%o : memref<8x48xf32>) {
  ^bb0(%acc: f32):
    rpe.yield %acc : f32
  }
  return
}
