// RUN: swin-opt %s --rpe-order-globals | FileCheck %s

// The globals move to the module's start, sorted by name, whatever order
// bufferization created them in; everything else keeps its order.
// CHECK-LABEL: module
// CHECK-NEXT: memref.global "private" constant @__constant_1x4xf32
// CHECK-NEXT: memref.global "private" constant @__constant_3xf32 :
// CHECK-NEXT: memref.global "private" constant @__constant_3xf32_0
// CHECK-NEXT: func.func private @first()
// CHECK-NEXT: func.func private @second()
module {
  func.func private @first()
  memref.global "private" constant @__constant_3xf32_0 : memref<3xf32> = dense<[4.0, 5.0, 6.0]>
  memref.global "private" constant @__constant_3xf32 : memref<3xf32> = dense<[1.0, 2.0, 3.0]>
  func.func private @second()
  memref.global "private" constant @__constant_1x4xf32 : memref<1x4xf32> = dense<0.5>
}
