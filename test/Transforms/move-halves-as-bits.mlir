// RUN: swin-opt %s --rpe-move-halves-as-bits -split-input-file | FileCheck %s

// A bf16 gather reads i16 and casts the bits back; its pass-through value
// goes in as bits.
// CHECK-LABEL: llvm.func @gather_bf16
// CHECK-SAME: (%[[PTRS:.*]]: vector<32x!llvm.ptr>, %[[MASK:.*]]: vector<32xi1>, %[[PASS:.*]]: vector<32xbf16>)
// CHECK: %[[PASS_BITS:.*]] = llvm.bitcast %[[PASS]] : vector<32xbf16> to vector<32xi16>
// CHECK: %[[BITS:.*]] = llvm.intr.masked.gather %[[PTRS]], %[[MASK]], %[[PASS_BITS]] {alignment = 2 : i32} : (vector<32x!llvm.ptr>, vector<32xi1>, vector<32xi16>) -> vector<32xi16>
// CHECK: %[[VALUE:.*]] = llvm.bitcast %[[BITS]] : vector<32xi16> to vector<32xbf16>
// CHECK: llvm.return %[[VALUE]]
llvm.func @gather_bf16(%ptrs: vector<32x!llvm.ptr>, %mask: vector<32xi1>, %pass: vector<32xbf16>) -> vector<32xbf16> {
  %0 = llvm.intr.masked.gather %ptrs, %mask, %pass {alignment = 2 : i32} : (vector<32x!llvm.ptr>, vector<32xi1>, vector<32xbf16>) -> vector<32xbf16>
  llvm.return %0 : vector<32xbf16>
}

// -----

// f16 too; a gather without a pass-through value keeps none.
// CHECK-LABEL: llvm.func @gather_f16
// CHECK: %[[BITS:.*]] = llvm.intr.masked.gather %{{.*}}, %{{.*}} {alignment = 2 : i32} : (vector<8x!llvm.ptr>, vector<8xi1>) -> vector<8xi16>
// CHECK: llvm.bitcast %[[BITS]] : vector<8xi16> to vector<8xf16>
llvm.func @gather_f16(%ptrs: vector<8x!llvm.ptr>, %mask: vector<8xi1>) -> vector<8xf16> {
  %0 = llvm.intr.masked.gather %ptrs, %mask {alignment = 2 : i32} : (vector<8x!llvm.ptr>, vector<8xi1>) -> vector<8xf16>
  llvm.return %0 : vector<8xf16>
}

// -----

// A scatter stores the value's bits.
// CHECK-LABEL: llvm.func @scatter_bf16
// CHECK-SAME: (%[[VALUE:.*]]: vector<32xbf16>, %[[PTRS:.*]]: vector<32x!llvm.ptr>, %[[MASK:.*]]: vector<32xi1>)
// CHECK: %[[BITS:.*]] = llvm.bitcast %[[VALUE]] : vector<32xbf16> to vector<32xi16>
// CHECK: llvm.intr.masked.scatter %[[BITS]], %[[PTRS]], %[[MASK]] {alignment = 2 : i32} : vector<32xi16>, vector<32xi1> into vector<32x!llvm.ptr>
llvm.func @scatter_bf16(%value: vector<32xbf16>, %ptrs: vector<32x!llvm.ptr>, %mask: vector<32xi1>) {
  llvm.intr.masked.scatter %value, %ptrs, %mask {alignment = 2 : i32} : vector<32xbf16>, vector<32xi1> into vector<32x!llvm.ptr>
  llvm.return
}

// -----

// Other element types stay as they are.
// CHECK-LABEL: llvm.func @gather_f32
// CHECK-NOT: llvm.bitcast
// CHECK: llvm.intr.masked.gather {{.*}} -> vector<8xf32>
// CHECK-NOT: llvm.bitcast
// CHECK: llvm.intr.masked.scatter {{.*}} : vector<8xf32>
llvm.func @gather_f32(%ptrs: vector<8x!llvm.ptr>, %mask: vector<8xi1>) -> vector<8xf32> {
  %0 = llvm.intr.masked.gather %ptrs, %mask {alignment = 4 : i32} : (vector<8x!llvm.ptr>, vector<8xi1>) -> vector<8xf32>
  llvm.intr.masked.scatter %0, %ptrs, %mask {alignment = 4 : i32} : vector<8xf32>, vector<8xi1> into vector<8x!llvm.ptr>
  llvm.return %0 : vector<8xf32>
}
