// RUN: swin-opt %s --pass-pipeline='builtin.module(func.func(rpe-fuse-elementwise))' -split-input-file | FileCheck %s

#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#row = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
#ch = affine_map<(d0, d1, d2) -> (d2)>

// LayerNorm over 8 channels as torch-mlir writes it: the variance in f64
// (extension, mean, centring, square, mean), the mean in f32, rsqrt of the
// variance plus eps, then centre, scale by it, weight, bias. What remains:
// the three reductions, the f32 -> f64 extension fused into the two that
// read it, and one elementwise op that normalizes.
// CHECK-LABEL: func @layer_norm
// CHECK-SAME: (%[[ARG:.*]]: tensor<1x4x8xf32>, %[[W:.*]]: tensor<8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK: %[[X:.*]] = tensor.collapse_shape %[[ARG]] {{\[\[}}0, 1], [2]] : tensor<1x4x8xf32> into tensor<4x8xf32>
// CHECK: %[[S64:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[X]] : tensor<4x8xf32>) outs(%{{.*}} : tensor<4xf64>)
// CHECK: arith.extf
// CHECK: arith.addf
// CHECK: %[[SS:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[X]], %[[S64]] : tensor<4x8xf32>, tensor<4xf64>) outs(%{{.*}} : tensor<4xf64>)
// CHECK: arith.subf {{.*}} : f64
// CHECK: arith.mulf {{.*}} : f64
// CHECK: %[[S:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : tensor<4x8xf32>) outs(%{{.*}} : tensor<4xf32>)
// CHECK: %[[Y:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} ins(%{{.*}}, %[[S]], %[[SS]], %[[W]], %[[B]] : tensor<4x8xf32>, tensor<4xf32>, tensor<4xf64>, tensor<8xf32>, tensor<8xf32>) outs(%{{.*}} : tensor<4x8xf32>)
// CHECK: math.rsqrt
// CHECK-NOT: linalg.generic
// CHECK: %[[R:.*]] = tensor.expand_shape %[[Y]]
// CHECK: return %[[R]]
func.func @layer_norm(%x: tensor<1x4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<1x4x8xf32> {
  %zero64 = arith.constant 0.0 : f64
  %zero = arith.constant 0.0 : f32
  %n64 = arith.constant 8.0 : f64
  %n = arith.constant 8.0 : f32
  %eps = arith.constant 1.0e-05 : f64
  %e64 = tensor.empty() : tensor<1x4x8xf64>
  %x64 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x : tensor<1x4x8xf32>) outs(%e64 : tensor<1x4x8xf64>) {
  ^bb0(%in: f32, %out: f64):
    %0 = arith.extf %in : f32 to f64
    linalg.yield %0 : f64
  } -> tensor<1x4x8xf64>
  %r64 = tensor.empty() : tensor<1x4x1xf64>
  %z64 = linalg.fill ins(%zero64 : f64) outs(%r64 : tensor<1x4x1xf64>) -> tensor<1x4x1xf64>
  %s64 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x64 : tensor<1x4x8xf64>) outs(%z64 : tensor<1x4x1xf64>) {
  ^bb0(%in: f64, %out: f64):
    %0 = arith.addf %in, %out : f64
    linalg.yield %0 : f64
  } -> tensor<1x4x1xf64>
  %m64 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s64 : tensor<1x4x1xf64>) outs(%r64 : tensor<1x4x1xf64>) {
  ^bb0(%in: f64, %out: f64):
    %0 = arith.divf %in, %n64 : f64
    linalg.yield %0 : f64
  } -> tensor<1x4x1xf64>
  %c64 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x64, %m64 : tensor<1x4x8xf64>, tensor<1x4x1xf64>) outs(%e64 : tensor<1x4x8xf64>) {
  ^bb0(%in: f64, %in_1: f64, %out: f64):
    %0 = arith.subf %in, %in_1 : f64
    linalg.yield %0 : f64
  } -> tensor<1x4x8xf64>
  %sq = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%c64, %c64 : tensor<1x4x8xf64>, tensor<1x4x8xf64>) outs(%e64 : tensor<1x4x8xf64>) {
  ^bb0(%in: f64, %in_1: f64, %out: f64):
    %0 = arith.mulf %in, %in_1 : f64
    linalg.yield %0 : f64
  } -> tensor<1x4x8xf64>
  %ss = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%sq : tensor<1x4x8xf64>) outs(%z64 : tensor<1x4x1xf64>) {
  ^bb0(%in: f64, %out: f64):
    %0 = arith.addf %in, %out : f64
    linalg.yield %0 : f64
  } -> tensor<1x4x1xf64>
  %var64 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ss : tensor<1x4x1xf64>) outs(%r64 : tensor<1x4x1xf64>) {
  ^bb0(%in: f64, %out: f64):
    %0 = arith.divf %in, %n64 : f64
    linalg.yield %0 : f64
  } -> tensor<1x4x1xf64>
  %r = tensor.empty() : tensor<1x4x1xf32>
  %var = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%var64 : tensor<1x4x1xf64>) outs(%r : tensor<1x4x1xf32>) {
  ^bb0(%in: f64, %out: f32):
    %0 = arith.truncf %in : f64 to f32
    linalg.yield %0 : f32
  } -> tensor<1x4x1xf32>
  %z = linalg.fill ins(%zero : f32) outs(%r : tensor<1x4x1xf32>) -> tensor<1x4x1xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x : tensor<1x4x8xf32>) outs(%z : tensor<1x4x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %in, %out : f32
    linalg.yield %0 : f32
  } -> tensor<1x4x1xf32>
  %m = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<1x4x1xf32>) outs(%r : tensor<1x4x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.divf %in, %n : f32
    linalg.yield %0 : f32
  } -> tensor<1x4x1xf32>
  %ve = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%var : tensor<1x4x1xf32>) outs(%r : tensor<1x4x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.truncf %eps : f64 to f32
    %1 = arith.addf %in, %0 : f32
    linalg.yield %1 : f32
  } -> tensor<1x4x1xf32>
  %rs = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ve : tensor<1x4x1xf32>) outs(%r : tensor<1x4x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.rsqrt %in : f32
    linalg.yield %0 : f32
  } -> tensor<1x4x1xf32>
  %e = tensor.empty() : tensor<1x4x8xf32>
  %c = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %m : tensor<1x4x8xf32>, tensor<1x4x1xf32>) outs(%e : tensor<1x4x8xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %0 = arith.subf %in, %in_1 : f32
    linalg.yield %0 : f32
  } -> tensor<1x4x8xf32>
  %nrm = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%c, %rs : tensor<1x4x8xf32>, tensor<1x4x1xf32>) outs(%e : tensor<1x4x8xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %0 = arith.mulf %in, %in_1 : f32
    linalg.yield %0 : f32
  } -> tensor<1x4x8xf32>
  %sc = linalg.generic {indexing_maps = [#id, #ch, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%nrm, %w : tensor<1x4x8xf32>, tensor<8xf32>) outs(%e : tensor<1x4x8xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %0 = arith.mulf %in, %in_1 : f32
    linalg.yield %0 : f32
  } -> tensor<1x4x8xf32>
  %y = linalg.generic {indexing_maps = [#id, #ch, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sc, %b : tensor<1x4x8xf32>, tensor<8xf32>) outs(%e : tensor<1x4x8xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %0 = arith.addf %in, %in_1 : f32
    linalg.yield %0 : f32
  } -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// A producer that another op (not a generic) also reads stays, computed
// once: it is not copied into its consumer.
// CHECK-LABEL: func @shared_producer
// CHECK: %[[P:.*]] = linalg.generic
// CHECK: math.exp
// CHECK: linalg.generic {{.*}} ins(%[[P]]
// CHECK: return
func.func @shared_producer(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x4xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %p = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.exp %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  %q = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%p : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %in, %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  %te = tensor.empty() : tensor<8x4xf32>
  %t = linalg.transpose ins(%p : tensor<4x8xf32>) outs(%te : tensor<8x4xf32>) permutation = [1, 0]
  return %q, %t : tensor<4x8xf32>, tensor<8x4xf32>
}

// -----

#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(d0, d1) -> (d0, d1)>

// Nothing fuses into a product: the exponential would be computed again for
// every column of the result.
// CHECK-LABEL: func @no_fusion_into_product
// CHECK: %[[P:.*]] = linalg.generic
// CHECK: math.exp
// CHECK: linalg.generic {{.*}} ins(%[[P]], %{{.*}} :
// CHECK-NOT: math.exp
func.func @no_fusion_into_product(%x: tensor<4x8xf32>, %y: tensor<8x16xf32>, %acc: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %p = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.exp %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%p, %y : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %0 = arith.mulf %l, %r : f32
    %1 = arith.addf %o, %0 : f32
    linalg.yield %1 : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}
