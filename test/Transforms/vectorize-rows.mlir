// RUN: swin-opt %s --pass-pipeline='builtin.module(func.func(rpe-vectorize-rows))' -split-input-file | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>

// A row of a residual add: one vector of 16 lanes.
// CHECK-LABEL: func @add_row
// CHECK-SAME: (%[[X:.*]]: tensor<1x16xf32>, %[[Y:.*]]: tensor<1x16xf32>)
// CHECK-NOT: linalg.generic
// CHECK-DAG: %[[XV:.*]] = vector.transfer_read %[[X]][%c0, %c0], %{{.*}} {in_bounds = [true]} : tensor<1x16xf32>, vector<16xf32>
// CHECK-DAG: %[[YV:.*]] = vector.transfer_read %[[Y]][%c0, %c0], %{{.*}} {in_bounds = [true]} : tensor<1x16xf32>, vector<16xf32>
// CHECK: %[[S:.*]] = arith.addf %[[XV]], %[[YV]] : vector<16xf32>
// CHECK: %[[R:.*]] = vector.transfer_write %[[S]], %{{.*}}[%c0, %c0] {in_bounds = [true]} : vector<16xf32>, tensor<1x16xf32>
// CHECK: return %[[R]]
func.func @add_row(%x: tensor<1x16xf32>, %y: tensor<1x16xf32>) -> tensor<1x16xf32> {
  %e = tensor.empty() : tensor<1x16xf32>
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %y : tensor<1x16xf32>, tensor<1x16xf32>) outs(%e : tensor<1x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.addf %a, %b : f32
    linalg.yield %0 : f32
  } -> tensor<1x16xf32>
  return %r : tensor<1x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#ch = affine_map<(d0, d1) -> (d1)>

// A row's sum (in f64, as the importer keeps a variance), then the row
// centred on its mean and scaled by a weight: a horizontal reduction that
// may reassociate, and the mean computed once, then broadcast.
// CHECK-LABEL: func @centre_row
// CHECK-SAME: (%[[X:.*]]: tensor<1x16xf64>, %[[W:.*]]: tensor<16xf64>)
// CHECK-NOT: linalg.generic
// CHECK: %[[XV:.*]] = vector.transfer_read %[[X]]{{.*}} : tensor<1x16xf64>, vector<16xf64>
// CHECK: %[[SUM:.*]] = vector.reduction <add>, %[[XV]], %{{.*}} fastmath<reassoc> : vector<16xf64> into f64
// CHECK: %[[MEAN:.*]] = arith.divf %[[SUM]], %{{.*}} : f64
// CHECK: %[[MEANV:.*]] = vector.broadcast %[[MEAN]] : f64 to vector<16xf64>
// CHECK: %[[C:.*]] = arith.subf %{{.*}}, %[[MEANV]] : vector<16xf64>
// CHECK: arith.mulf %[[C]], %{{.*}} : vector<16xf64>
// CHECK: vector.transfer_write {{.*}} : vector<16xf64>, tensor<1x16xf64>
func.func @centre_row(%x: tensor<1x16xf64>, %w: tensor<16xf64>) -> tensor<1x16xf64> {
  %zero = arith.constant 0.0 : f64
  %n = arith.constant 16.0 : f64
  %se = tensor.empty() : tensor<1xf64>
  %z = linalg.fill ins(%zero : f64) outs(%se : tensor<1xf64>) -> tensor<1xf64>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<1x16xf64>) outs(%z : tensor<1xf64>) {
  ^bb0(%a: f64, %o: f64):
    %0 = arith.addf %a, %o : f64
    linalg.yield %0 : f64
  } -> tensor<1xf64>
  %e = tensor.empty() : tensor<1x16xf64>
  %r = linalg.generic {indexing_maps = [#id, #row, #ch, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %s, %w : tensor<1x16xf64>, tensor<1xf64>, tensor<16xf64>) outs(%e : tensor<1x16xf64>) {
  ^bb0(%a: f64, %sum: f64, %wt: f64, %o: f64):
    %0 = arith.divf %sum, %n : f64
    %1 = arith.subf %a, %0 : f64
    %2 = arith.mulf %1, %wt : f64
    linalg.yield %2 : f64
  } -> tensor<1x16xf64>
  return %r : tensor<1x16xf64>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// A row of a gather (as rpe-fold-data-movement writes a roll): the source
// row is read with one contiguous vector read at its offset.
// CHECK-LABEL: func @gather_row
// CHECK-SAME: (%[[SRC:.*]]: tensor<4x32xf32>, %[[I:.*]]: index)
// CHECK-NOT: linalg.generic
// CHECK-NOT: vector.gather
// CHECK: %[[V:.*]] = vector.transfer_read %[[SRC]][%[[I]], %{{.*}}], %{{.*}} {in_bounds = [true]} : tensor<4x32xf32>, vector<16xf32>
// CHECK: vector.transfer_write %[[V]]
func.func @gather_row(%src: tensor<4x32xf32>, %i: index) -> tensor<1x16xf32> {
  %c4 = arith.constant 4 : index
  %e = tensor.empty() : tensor<1x16xf32>
  %r = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<1x16xf32>) {
  ^bb0(%o: f32):
    %j = linalg.index 1 : index
    %k = arith.addi %c4, %j : index
    %v = tensor.extract %src[%i, %k] : tensor<4x32xf32>
    linalg.yield %v : f32
  } -> tensor<1x16xf32>
  return %r : tensor<1x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#t = affine_map<(d0, d1) -> (d1, d0)>

// Not rows, left as they are: more than one row, a row longer than
// max-row-elements, a body with an f64 math.erf (no vector lowering: libm
// calls), an operand read across the row.
// CHECK-LABEL: func @not_rows
// CHECK-NOT: vector.
// CHECK-COUNT-4: linalg.generic
// CHECK-NOT: vector.
func.func @not_rows(%x: tensor<4x16xf32>, %long: tensor<1x8192xf32>, %y: tensor<1x16xf64>, %z: tensor<16x1xf32>)
    -> (tensor<4x16xf32>, tensor<1x8192xf32>, tensor<1x16xf64>, tensor<1x16xf32>) {
  %e = tensor.empty() : tensor<4x16xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%i: f32, %o: f32):
    %0 = arith.addf %i, %i : f32
    linalg.yield %0 : f32
  } -> tensor<4x16xf32>
  %le = tensor.empty() : tensor<1x8192xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%long : tensor<1x8192xf32>) outs(%le : tensor<1x8192xf32>) {
  ^bb0(%i: f32, %o: f32):
    %0 = arith.addf %i, %i : f32
    linalg.yield %0 : f32
  } -> tensor<1x8192xf32>
  %re = tensor.empty() : tensor<1x16xf32>
  %re64 = tensor.empty() : tensor<1x16xf64>
  %c = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<1x16xf64>) outs(%re64 : tensor<1x16xf64>) {
  ^bb0(%i: f64, %o: f64):
    %0 = math.erf %i : f64
    linalg.yield %0 : f64
  } -> tensor<1x16xf64>
  %d = linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]} ins(%z : tensor<16x1xf32>) outs(%re : tensor<1x16xf32>) {
  ^bb0(%i: f32, %o: f32):
    linalg.yield %i : f32
  } -> tensor<1x16xf32>
  return %a, %b, %c, %d : tensor<4x16xf32>, tensor<1x8192xf32>, tensor<1x16xf64>, tensor<1x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// A row of a GELU (erf in f32): upstream's polynomial approximation of erf,
// on the row's vector, instead of a libm call per element.
// CHECK-LABEL: func @gelu_row
// CHECK-NOT: linalg.generic
// CHECK-NOT: math.erf
// CHECK: vector.transfer_read {{.*}} : tensor<1x16xf32>, vector<16xf32>
// CHECK: math.fma {{.*}} : vector<16xf32>
// CHECK-NOT: math.erf
// CHECK: vector.transfer_write {{.*}} : vector<16xf32>, tensor<1x16xf32>
func.func @gelu_row(%x: tensor<1x16xf32>) -> tensor<1x16xf32> {
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %sqrt2 = arith.constant 1.41421354 : f32
  %e = tensor.empty() : tensor<1x16xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<1x16xf32>) outs(%e : tensor<1x16xf32>) {
  ^bb0(%i: f32, %o: f32):
    %0 = arith.divf %i, %sqrt2 : f32
    %1 = math.erf %0 : f32
    %2 = arith.addf %1, %one : f32
    %3 = arith.mulf %2, %half : f32
    %4 = arith.mulf %i, %3 : f32
    linalg.yield %4 : f32
  } -> tensor<1x16xf32>
  return %r : tensor<1x16xf32>
}
