// RUN: swin-opt %s --pass-pipeline='builtin.module(func.func(rpe-tile-rows{parallel=false}))' -split-input-file | FileCheck %s
// RUN: swin-opt %s --pass-pipeline='builtin.module(func.func(rpe-tile-rows{min-parallel-elements=32}))' -split-input-file | FileCheck %s --check-prefix=PAR

#id = affine_map<(d0, d1) -> (d0, d1)>

// A residual add: one loop over the rows, each iteration adding a row of 8.
// CHECK-LABEL: func @residual_add
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[Y:.*]]: tensor<4x8xf32>)
// CHECK: %[[R:.*]] = scf.for %[[I:.*]] = %c0 to %c4 step %c1 iter_args(%[[ACC:.*]] = %{{.*}}) -> (tensor<4x8xf32>)
// CHECK-DAG: %[[XR:.*]] = tensor.extract_slice %[[X]][%[[I]], 0] [1, 8] [1, 1] : tensor<4x8xf32> to tensor<1x8xf32>
// CHECK-DAG: %[[YR:.*]] = tensor.extract_slice %[[Y]][%[[I]], 0] [1, 8] [1, 1]
// CHECK: %[[S:.*]] = linalg.generic {{.*}} ins(%[[XR]], %[[YR]] : tensor<1x8xf32>, tensor<1x8xf32>)
// CHECK: tensor.insert_slice %[[S]] into %[[ACC]][%[[I]], 0] [1, 8] [1, 1]
// CHECK: return %[[R]]
// PAR-LABEL: func @residual_add
// PAR: scf.forall (%{{.*}}) in (4) shared_outs
// PAR: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<1x8xf32>, tensor<1x8xf32>)
// PAR: scf.forall.in_parallel
func.func @residual_add(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %y : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.addf %a, %b : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#ch = affine_map<(d0, d1) -> (d1)>
#vec = affine_map<(d0) -> (d0)>

// A row's sum, then the row centred on its mean and scaled by a weight
// (broadcast along the rows): the sum fuses into the loop of its consumer,
// one row each; the weight's producer, which every row reads whole, is
// computed once before the loop.
// CHECK-LABEL: func @centre_rows
// CHECK: %[[W2:.*]] = linalg.generic {{.*}} iterator_types = ["parallel"]} ins(%{{.*}} : tensor<8xf32>)
// CHECK: linalg.yield
// CHECK-NOT: linalg.{{generic|fill}}
// CHECK: scf.for %[[I:.*]] = %c0 to %c4
// CHECK: %[[Z:.*]] = linalg.fill {{.*}} -> tensor<1xf32>
// CHECK: %[[S:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : tensor<1x8xf32>) outs(%[[Z]] : tensor<1xf32>)
// CHECK: %[[WS:.*]] = tensor.extract_slice %[[W2]][0] [8] [1]
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[S]], %[[WS]] : tensor<1x8xf32>, tensor<1xf32>, tensor<8xf32>)
// CHECK-NOT: linalg.{{generic|fill}}
// CHECK: return
// PAR-LABEL: func @centre_rows
// PAR: scf.forall
// PAR: iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : tensor<1x8xf32>)
// PAR: scf.forall.in_parallel
func.func @centre_rows(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 8.0 : f32
  %we = tensor.empty() : tensor<8xf32>
  %w2 = linalg.generic {indexing_maps = [#vec, #vec], iterator_types = ["parallel"]} ins(%w : tensor<8xf32>) outs(%we : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = arith.mulf %a, %a : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %se = tensor.empty() : tensor<4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%se : tensor<4xf32>) -> tensor<4xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x8xf32>) outs(%z : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = arith.addf %a, %o : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#id, #row, #ch, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %s, %w2 : tensor<4x8xf32>, tensor<4xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %sum: f32, %wt: f32, %o: f32):
    %0 = arith.divf %sum, %n : f32
    %1 = arith.subf %a, %0 : f32
    %2 = arith.mulf %1, %wt : f32
    linalg.yield %2 : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// A producer with a user outside the loop is not fused (it would be
// computed twice): it is tiled as a loop of its own.
// CHECK-LABEL: func @shared_producer
// CHECK: %[[P:.*]] = scf.for
// CHECK: math.exp
// CHECK: %[[Q:.*]] = scf.for
// CHECK: tensor.extract_slice %[[P]]
// CHECK-NOT: math.exp
// CHECK: return %[[P]], %[[Q]]
// PAR-LABEL: func @shared_producer
// PAR-COUNT-2: scf.forall (
func.func @shared_producer(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %p = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = math.exp %a : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  %q = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%p : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = arith.addf %a, %a : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  return %p, %q : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#ch = affine_map<(d0, d1) -> (d1)>

// A mean over the rows (the pooling before a classifier): no parallel loop
// outside the row; the reduction over the rows becomes a loop that adds one
// row each iteration.
// CHECK-LABEL: func @sum_rows
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[ACC:.*]]: tensor<8xf32>)
// CHECK: scf.for %[[I:.*]] = %c0 to %c4 step %c1 iter_args(%[[SUM:.*]] = %[[ACC]]) -> (tensor<8xf32>)
// CHECK: %[[ROW:.*]] = tensor.extract_slice %[[X]][%[[I]], 0] [1, 8] [1, 1]
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]} ins(%[[ROW]] : tensor<1x8xf32>)
// PAR-LABEL: func @sum_rows
// PAR-NOT: scf.forall
// PAR: scf.for
func.func @sum_rows(%x: tensor<4x8xf32>, %acc: tensor<8xf32>) -> tensor<8xf32> {
  %r = linalg.generic {indexing_maps = [#id, #ch], iterator_types = ["reduction", "parallel"]} ins(%x : tensor<4x8xf32>) outs(%acc : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = arith.addf %a, %o : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// Products and dynamic shapes are not this pass's: left as they are.
// CHECK-LABEL: func @left_alone
// CHECK-NOT: scf.
// CHECK: linalg.matmul
// CHECK: linalg.add
// CHECK-NOT: scf.
// PAR-LABEL: func @left_alone
// PAR-NOT: scf.
func.func @left_alone(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>, %d: tensor<?x16xf32>) -> (tensor<4x16xf32>, tensor<?x16xf32>) {
  %m = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  %s = linalg.add ins(%d, %d : tensor<?x16xf32>, tensor<?x16xf32>) outs(%d : tensor<?x16xf32>) -> tensor<?x16xf32>
  return %m, %s : tensor<4x16xf32>, tensor<?x16xf32>
}
