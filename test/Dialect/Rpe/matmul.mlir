// RUN: swin-opt %s -split-input-file | swin-opt -split-input-file | FileCheck %s
// RUN: swin-opt %s -split-input-file --mlir-print-op-generic | swin-opt -split-input-file | FileCheck %s

// Packed weights and an epilogue of a bias and GELU's factor, on tensors.
// CHECK-LABEL: func @packed_with_epilogue
// CHECK: %[[R:.*]] = rpe.matmul ins(%{{.*}}, %{{.*}} : tensor<?x96xf32>, tensor<8x96x48xf32>) epilogue(%{{.*}} : tensor<384xf32>) outs(%{{.*}} : tensor<?x384xf32>) attributes {epilogue_maps = [#map]} {
// CHECK-NEXT: ^bb0(%[[ACC:.*]]: f32, %[[B:.*]]: f32):
// CHECK-NEXT:   %[[S:.*]] = arith.addf %[[ACC]], %[[B]] : f32
// CHECK-NEXT:   rpe.yield %[[S]] : f32
// CHECK-NEXT: } -> tensor<?x384xf32>
func.func @packed_with_epilogue(%x: tensor<?x96xf32>, %w: tensor<8x96x48xf32>, %b: tensor<384xf32>,
                                %init: tensor<?x384xf32>) -> tensor<?x384xf32> {
  %r = rpe.matmul ins(%x, %w : tensor<?x96xf32>, tensor<8x96x48xf32>)
                  epilogue(%b : tensor<384xf32>) outs(%init : tensor<?x384xf32>)
                  attributes {epilogue_maps = [affine_map<(m, n) -> (n)>]} {
  ^bb0(%acc: f32, %bias: f32):
    %s = arith.addf %acc, %bias : f32
    rpe.yield %s : f32
  } -> tensor<?x384xf32>
  return %r : tensor<?x384xf32>
}

// -----

// Unpacked weights, transposed (a linear layer's [N, K]); on memrefs the
// op has no result. No epilogue inputs: no maps printed.
// CHECK-LABEL: func @transposed_on_memrefs
// CHECK: rpe.matmul ins(%{{.*}}, %{{.*}} : memref<5x7xf32>, memref<9x7xf32>) outs(%{{.*}} : memref<5x9xf32>) attributes {transpose_rhs} {
// CHECK-NOT: epilogue_maps
func.func @transposed_on_memrefs(%x: memref<5x7xf32>, %w: memref<9x7xf32>, %out: memref<5x9xf32>) {
  rpe.matmul ins(%x, %w : memref<5x7xf32>, memref<9x7xf32>) outs(%out : memref<5x9xf32>)
             attributes {transpose_rhs} {
  ^bb0(%acc: f32):
    rpe.yield %acc : f32
  }
  return
}
