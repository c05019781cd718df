// RUN: swin-opt %s --rpe-form-matmul=panel-width=2 -split-input-file --mlir-print-elementsattrs-with-hex-if-larger=-1 | FileCheck %s
// RUN: swin-opt %s --rpe-form-matmul=panel-width=48 -split-input-file | FileCheck %s --check-prefix=WIDE
// RUN: swin-opt %s --rpe-form-matmul="panel-width=2 bf16-dot=true" -split-input-file --mlir-print-elementsattrs-with-hex-if-larger=-1 | FileCheck %s --check-prefix=DOT

#col = affine_map<(d0, d1) -> (d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>

// A linear layer as torch-mlir writes it: the transposed constant weight,
// the bias broadcast, then added. The weight is packed at compile time,
// [N, K] = [3, 2] into panels of 2 columns: [2, 2, 2], zero past N; the
// bias add becomes the epilogue, the bias read at (n).
// CHECK-LABEL: func @linear_bias
// CHECK-SAME: (%[[X:.*]]: tensor<5x2xf32>)
// CHECK-DAG: %[[W:.*]] = arith.constant dense_resource<rpe_packed_weights> : tensor<2x2x2xf32>
// CHECK-DAG: %[[B:.*]] = arith.constant dense<[1.000000e-01, 2.000000e-01, 3.000000e-01]> : tensor<3xf32>
// CHECK-NOT: linalg.transpose
// CHECK-NOT: linalg.matmul
// CHECK: %[[R:.*]] = rpe.matmul ins(%[[X]], %[[W]] : tensor<5x2xf32>, tensor<2x2x2xf32>) epilogue(%[[B]] : tensor<3xf32>) outs(%{{.*}} : tensor<5x3xf32>) attributes {epilogue_maps = [#map]} {
// CHECK-NEXT: ^bb0(%[[ACC:.*]]: f32, %[[BIAS:.*]]: f32):
// CHECK-NEXT:   %[[S:.*]] = arith.addf %[[ACC]], %[[BIAS]] : f32
// CHECK-NEXT:   rpe.yield %[[S]] : f32
// CHECK: return %[[R]]
// B[k, n] = W[n, k]; panel p holds columns 2p, 2p + 1 of each k:
// [[1, 3], [2, 4]], then [[5, 0], [6, 0]].
// CHECK: rpe_packed_weights: "0x040000000000803F0000404000000040000080400000A040000000000000C04000000000"
// f32 weights are packed as without bf16-dot.
// DOT-LABEL: func @linear_bias
// DOT: rpe.matmul ins(%{{.*}}, %{{.*}} : tensor<5x2xf32>, tensor<2x2x2xf32>)
// DOT: rpe_packed_weights: "0x040000000000803F0000404000000040000080400000A040000000000000C04000000000"
func.func @linear_bias(%x: tensor<5x2xf32>) -> tensor<5x3xf32> {
  %zero = arith.constant 0.0 : f32
  %w = arith.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %b = arith.constant dense<[0.1, 0.2, 0.3]> : tensor<3xf32>
  %t0 = tensor.empty() : tensor<2x3xf32>
  %t = linalg.transpose ins(%w : tensor<3x2xf32>) outs(%t0 : tensor<2x3xf32>) permutation = [1, 0]
  %e = tensor.empty() : tensor<5x3xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<5x3xf32>) -> tensor<5x3xf32>
  %mm = linalg.matmul ins(%x, %t : tensor<5x2xf32>, tensor<2x3xf32>) outs(%f : tensor<5x3xf32>) -> tensor<5x3xf32>
  %bb = linalg.generic {indexing_maps = [#col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b : tensor<3xf32>) outs(%e : tensor<5x3xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  } -> tensor<5x3xf32>
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %bb : tensor<5x3xf32>, tensor<5x3xf32>) outs(%e : tensor<5x3xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<5x3xf32>
  return %y : tensor<5x3xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// fc1 and GELU (erf), then fc2 and the residual: each product keeps its
// elementwise consumers as its epilogue; the residual is read at (m, n).
// WIDE-LABEL: func @mlp
// WIDE-SAME: (%[[X:.*]]: tensor<49x96xf32>, %[[W1:.*]]: tensor<96x384xf32>, %[[W2:.*]]: tensor<384x96xf32>)
// WIDE: %[[H:.*]] = rpe.matmul ins(%[[X]], %[[W1]] : tensor<49x96xf32>, tensor<96x384xf32>) outs(%{{.*}} : tensor<49x384xf32>) {
// WIDE: math.erf
// WIDE: rpe.yield
// WIDE: rpe.matmul ins(%[[H]], %[[W2]] : tensor<49x384xf32>, tensor<384x96xf32>) epilogue(%[[X]] : tensor<49x96xf32>) outs(%{{.*}} : tensor<49x96xf32>) attributes {epilogue_maps = [#map]} {
// WIDE-NEXT: ^bb0(%[[ACC:.*]]: f32, %[[RES:.*]]: f32):
// WIDE-NEXT:   %[[S:.*]] = arith.addf %[[ACC]], %[[RES]] : f32
// WIDE-NEXT:   rpe.yield %[[S]] : f32
// WIDE-NOT: linalg.generic
// WIDE: return
func.func @mlp(%x: tensor<49x96xf32>, %w1: tensor<96x384xf32>, %w2: tensor<384x96xf32>) -> tensor<49x96xf32> {
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<49x384xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<49x384xf32>) -> tensor<49x384xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<49x96xf32>, tensor<96x384xf32>) outs(%f1 : tensor<49x384xf32>) -> tensor<49x384xf32>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%h : tensor<49x384xf32>) outs(%e1 : tensor<49x384xf32>) {
  ^bb0(%a: f32, %o: f32):
    %half = arith.constant 0.5 : f32
    %rsqrt2 = arith.constant 0.707106769 : f32
    %one = arith.constant 1.0 : f32
    %t = arith.mulf %a, %rsqrt2 : f32
    %erf = math.erf %t : f32
    %p = arith.addf %erf, %one : f32
    %hh = arith.mulf %a, %half : f32
    %r = arith.mulf %hh, %p : f32
    linalg.yield %r : f32
  } -> tensor<49x384xf32>
  %e2 = tensor.empty() : tensor<49x96xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<49x96xf32>) -> tensor<49x96xf32>
  %y = linalg.matmul ins(%g, %w2 : tensor<49x384xf32>, tensor<384x96xf32>) outs(%f2 : tensor<49x96xf32>) -> tensor<49x96xf32>
  %z = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %x : tensor<49x96xf32>, tensor<49x96xf32>) outs(%e2 : tensor<49x96xf32>) {
  ^bb0(%a: f32, %r: f32, %o: f32):
    %s = arith.addf %a, %r : f32
    linalg.yield %s : f32
  } -> tensor<49x96xf32>
  return %z : tensor<49x96xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

// As the importer writes a Swin block's MLP: each product goes on as a
// [B, L, N] view (tensor.expand_shape) to GELU and to the residual add,
// whose other operand is [B, L, C] too. Both generics are rewritten on the
// [B * L, N] product and become its epilogue; the residual is collapsed to
// [B * L, C] and read at (m, n); the block's result is the expanded product.
// WIDE-LABEL: func @mlp_expanded
// WIDE-SAME: (%[[X:.*]]: tensor<2x49x96xf32>, %[[W1:.*]]: tensor<96x384xf32>, %[[W2:.*]]: tensor<384x96xf32>)
// WIDE: %[[X2:.*]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1], [2]] : tensor<2x49x96xf32> into tensor<98x96xf32>
// WIDE: %[[H:.*]] = rpe.matmul ins(%[[X2]], %[[W1]] : tensor<98x96xf32>, tensor<96x384xf32>) outs(%{{.*}} : tensor<98x384xf32>) {
// WIDE: math.erf
// WIDE: rpe.yield
// WIDE: %[[R:.*]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1], [2]] : tensor<2x49x96xf32> into tensor<98x96xf32>
// WIDE: %[[Y:.*]] = rpe.matmul ins(%{{.*}}, %[[W2]] : tensor<98x384xf32>, tensor<384x96xf32>) epilogue(%[[R]] : tensor<98x96xf32>) outs(%{{.*}} : tensor<98x96xf32>) attributes {epilogue_maps = [#map]} {
// WIDE-NEXT: ^bb0(%[[ACC:.*]]: f32, %[[RES:.*]]: f32):
// WIDE-NEXT:   %[[S:.*]] = arith.addf %[[RES]], %[[ACC]] : f32
// WIDE-NEXT:   rpe.yield %[[S]] : f32
// WIDE-NOT: linalg.generic
// WIDE: %[[OUT:.*]] = tensor.expand_shape %[[Y]] {{\[}}[0, 1], [2]] output_shape [2, 49, 96]
// WIDE: return %[[OUT]]
func.func @mlp_expanded(%x: tensor<2x49x96xf32>, %w1: tensor<96x384xf32>, %w2: tensor<384x96xf32>) -> tensor<2x49x96xf32> {
  %zero = arith.constant 0.0 : f32
  %x2 = tensor.collapse_shape %x [[0, 1], [2]] : tensor<2x49x96xf32> into tensor<98x96xf32>
  %e1 = tensor.empty() : tensor<98x384xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<98x384xf32>) -> tensor<98x384xf32>
  %h = linalg.matmul ins(%x2, %w1 : tensor<98x96xf32>, tensor<96x384xf32>) outs(%f1 : tensor<98x384xf32>) -> tensor<98x384xf32>
  %h3 = tensor.expand_shape %h [[0, 1], [2]] output_shape [2, 49, 384] : tensor<98x384xf32> into tensor<2x49x384xf32>
  %e13 = tensor.empty() : tensor<2x49x384xf32>
  %g3 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%h3 : tensor<2x49x384xf32>) outs(%e13 : tensor<2x49x384xf32>) {
  ^bb0(%a: f32, %o: f32):
    %sqrt2 = arith.constant 1.41421354 : f32
    %one = arith.constant 1.0 : f32
    %half = arith.constant 0.5 : f32
    %t = arith.divf %a, %sqrt2 : f32
    %erf = math.erf %t : f32
    %p = arith.addf %erf, %one : f32
    %q = arith.mulf %p, %half : f32
    %r = arith.mulf %a, %q : f32
    linalg.yield %r : f32
  } -> tensor<2x49x384xf32>
  %g = tensor.collapse_shape %g3 [[0, 1], [2]] : tensor<2x49x384xf32> into tensor<98x384xf32>
  %e2 = tensor.empty() : tensor<98x96xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<98x96xf32>) -> tensor<98x96xf32>
  %y = linalg.matmul ins(%g, %w2 : tensor<98x384xf32>, tensor<384x96xf32>) outs(%f2 : tensor<98x96xf32>) -> tensor<98x96xf32>
  %y3 = tensor.expand_shape %y [[0, 1], [2]] output_shape [2, 49, 96] : tensor<98x96xf32> into tensor<2x49x96xf32>
  %e23 = tensor.empty() : tensor<2x49x96xf32>
  %z = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %y3 : tensor<2x49x96xf32>, tensor<2x49x96xf32>) outs(%e23 : tensor<2x49x96xf32>) {
  ^bb0(%r: f32, %a: f32, %o: f32):
    %s = arith.addf %r, %a : f32
    linalg.yield %s : f32
  } -> tensor<2x49x96xf32>
  return %z : tensor<2x49x96xf32>
}

// -----

// Run-time weights stay unpacked (the kernel packs them), transposed as
// given; a destination that is not zero-filled is accumulated into.
// CHECK-LABEL: func @runtime_transposed_accumulating
// CHECK-SAME: (%[[X:.*]]: tensor<?x8xf32>, %[[W:.*]]: tensor<4x8xf32>, %[[C:.*]]: tensor<?x4xf32>)
// CHECK: rpe.matmul ins(%[[X]], %[[W]] : tensor<?x8xf32>, tensor<4x8xf32>) epilogue(%[[C]] : tensor<?x4xf32>) outs(%{{.*}} : tensor<?x4xf32>) attributes {epilogue_maps = [#map], transpose_rhs} {
// CHECK-NEXT: ^bb0(%[[ACC:.*]]: f32, %[[INIT:.*]]: f32):
// CHECK-NEXT:   %[[S:.*]] = arith.addf %[[ACC]], %[[INIT]] : f32
func.func @runtime_transposed_accumulating(%x: tensor<?x8xf32>, %w: tensor<4x8xf32>, %c: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %r = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>,
                                      affine_map<(m, n, k) -> (m, n)>]
         ins(%x, %w : tensor<?x8xf32>, tensor<4x8xf32>) outs(%c : tensor<?x4xf32>) -> tensor<?x4xf32>
  return %r : tensor<?x4xf32>
}

// -----

// Not formed: f16 operands, a batched product, A read column by column, a
// body that negates a factor (upstream's contraction interface takes it).
// CHECK-LABEL: func @left_alone
// CHECK-NOT: rpe.matmul
// CHECK: linalg.matmul
// CHECK: linalg.batch_matmul
// CHECK: linalg.matmul
// CHECK: linalg.generic
// CHECK: arith.negf
// CHECK-NOT: rpe.matmul
func.func @left_alone(%a: tensor<4x8xf16>, %b: tensor<8x16xf16>, %c: tensor<4x16xf16>,
                      %x: tensor<2x4x8xf32>, %y: tensor<2x8x16xf32>, %z: tensor<2x4x16xf32>,
                      %at: tensor<8x4xf32>, %w: tensor<8x16xf32>, %o: tensor<4x16xf32>,
                      %a32: tensor<4x8xf32>)
    -> (tensor<4x16xf16>, tensor<2x4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf16>, tensor<8x16xf16>) outs(%c : tensor<4x16xf16>) -> tensor<4x16xf16>
  %1 = linalg.batch_matmul ins(%x, %y : tensor<2x4x8xf32>, tensor<2x8x16xf32>) outs(%z : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %2 = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>,
                                      affine_map<(m, n, k) -> (m, n)>]
         ins(%at, %w : tensor<8x4xf32>, tensor<8x16xf32>) outs(%o : tensor<4x16xf32>) -> tensor<4x16xf32>
  %3 = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>,
                                        affine_map<(m, n, k) -> (m, n)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a32, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%o : tensor<4x16xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %neg = arith.negf %p : f32
    %prod = arith.mulf %neg, %q : f32
    %sum = arith.addf %acc, %prod : f32
    linalg.yield %sum : f32
  } -> tensor<4x16xf32>
  return %0, %1, %2, %3 : tensor<4x16xf16>, tensor<2x4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// Not fused: a consumer that reduces, and a product with a second user.
// CHECK-LABEL: func @not_fused
// CHECK: %[[P:.*]] = rpe.matmul
// CHECK-NEXT: ^bb0(%[[ACC:.*]]: f32):
// CHECK-NEXT:   rpe.yield %[[ACC]] : f32
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}} ins(%[[P]]
// CHECK: %[[Q:.*]] = rpe.matmul
// CHECK-NEXT: ^bb0(%[[ACC2:.*]]: f32):
// CHECK-NEXT:   rpe.yield %[[ACC2]] : f32
// CHECK: linalg.generic {{.*}} ins(%[[Q]]
// CHECK: return {{.*}}%[[Q]]
func.func @not_fused(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> (tensor<4xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %p = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  %e4 = tensor.empty() : tensor<4xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%p : tensor<4x16xf32>) outs(%s0 : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %q = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  %twice = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%q : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %sum, %twice, %q : tensor<4xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// A panel width out of range is refused before the IR is touched.
// RUN: not swin-opt %s --rpe-form-matmul=panel-width=0 -split-input-file 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: panel-width must be in [1, 256], got 0
func.func @nothing() {
  return
}

// -----

// bf16 operands into an f32 product (linalg.matmul's widened body). The
// constant weight [N, K] = [3, 3] is packed at compile time: without
// bf16-dot in panels [2, 3, 2] of bf16, one k per row; with it in pairs of
// k, [2, 2, 2, 2], packed[p, j, r, h] = B[2j + h, 2p + r] = W[2p + r, 2j +
// h], zero past N and at k = 3.
// CHECK-LABEL: func @linear_bf16
// CHECK: %[[W:.*]] = arith.constant dense_resource<rpe_packed_weights> : tensor<2x3x2xbf16>
// CHECK: rpe.matmul ins(%{{.*}}, %[[W]] : tensor<5x3xbf16>, tensor<2x3x2xbf16>) outs(%{{.*}} : tensor<5x3xf32>)
// Panel 0: k 0: (1, 4), k 1: (2, 5), k 2: (3, 6); panel 1: (7, 0), (8, 0),
// (9, 0).
// CHECK: rpe_packed_weights: "0x02000000803F80400040A0404040C040E04000000041000010410000"
// DOT-LABEL: func @linear_bf16
// DOT: %[[W:.*]] = arith.constant dense_resource<rpe_packed_weights> : tensor<2x2x2x2xbf16>
// DOT: rpe.matmul ins(%{{.*}}, %[[W]] : tensor<5x3xbf16>, tensor<2x2x2x2xbf16>) outs(%{{.*}} : tensor<5x3xf32>)
// Panel 0: pair 0: (1, 2), (4, 5); pair 1: (3, 0), (6, 0); panel 1:
// (7, 8), (0, 0); (9, 0), (0, 0).
// DOT: rpe_packed_weights: "0x02000000803F00408040A04040400000C0400000E0400041000000001041000000000000"
func.func @linear_bf16(%x: tensor<5x3xbf16>) -> tensor<5x3xf32> {
  %zero = arith.constant 0.0 : f32
  %w = arith.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]> : tensor<3x3xbf16>
  %t0 = tensor.empty() : tensor<3x3xbf16>
  %t = linalg.transpose ins(%w : tensor<3x3xbf16>) outs(%t0 : tensor<3x3xbf16>) permutation = [1, 0]
  %e = tensor.empty() : tensor<5x3xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<5x3xf32>) -> tensor<5x3xf32>
  %mm = linalg.matmul ins(%x, %t : tensor<5x3xbf16>, tensor<3x3xbf16>) outs(%f : tensor<5x3xf32>) -> tensor<5x3xf32>
  return %mm : tensor<5x3xf32>
}

// -----

// A product of bf16 rounded to bf16 before it is added is not rpe.matmul's.
// CHECK-LABEL: func @bf16_rounded_product
// CHECK-NOT: rpe.matmul
// CHECK: linalg.generic
func.func @bf16_rounded_product(%x: tensor<5x3xbf16>, %w: tensor<3x4xbf16>, %init: tensor<5x4xf32>) -> tensor<5x4xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<5x3xbf16>, tensor<3x4xbf16>) outs(%init : tensor<5x4xf32>) {
  ^bb0(%a: bf16, %b: bf16, %acc: f32):
    %p = arith.mulf %a, %b : bf16
    %pw = arith.extf %p : bf16 to f32
    %s = arith.addf %acc, %pw : f32
    linalg.yield %s : f32
  } -> tensor<5x4xf32>
  return %r : tensor<5x4xf32>
}
