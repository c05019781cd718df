// RUN: swin-opt %s --rpe-lower-fused-attention --canonicalize --cse -split-input-file | FileCheck %s

// BEiT's class token on a 2x2 grid, 8 lanes: the class token has a key row
// of its own before the grid's two (3 x Wpad = 24 padded key columns), and
// the reversed table holds Swin's T = 9 rows, their padding, then the class
// token's three stretches of Wpad = 8: class -> token (table[9] in every
// lane) at 17, token -> class (table[10]) at 25, class -> class (table[11])
// at 33: 9 + 8 + 3 * 8 = 41 columns. (The canonicalizer folds the query
// rows of this one-block window to constants, so that the selects on
// i == 0 fold to the stretches each row reads.)
// CHECK-LABEL: func @class_token_forward
// CHECK-SAME: %[[T:[a-z0-9]+]]: memref<12x3xf32>
// CHECK-DAG: %[[C9:.*]] = arith.constant 9 : index
// CHECK-DAG: %[[C10:.*]] = arith.constant 10 : index
// CHECK-DAG: %[[C11:.*]] = arith.constant 11 : index
// CHECK-DAG: %[[C17:.*]] = arith.constant 17 : index
// CHECK-DAG: %[[C25:.*]] = arith.constant 25 : index
// CHECK-DAG: %[[C33:.*]] = arith.constant 33 : index
// CHECK: %[[R:.*]] = memref.alloca() : memref<3x41xf32>
// CHECK: memref.load %[[T]][%[[C9]], %{{.*}}] : memref<12x3xf32>
// CHECK: memref.load %[[T]][%[[C10]], %{{.*}}] : memref<12x3xf32>
// CHECK: memref.store %{{.*}}, %[[R]][%{{.*}}, %[[C25]]] : memref<3x41xf32>
// CHECK: memref.load %[[T]][%[[C11]], %{{.*}}] : memref<12x3xf32>
// CHECK: memref.store %{{.*}}, %[[R]][%{{.*}}, %[[C33]]] : memref<3x41xf32>
// kᵀ spans the class row and the grid's rows.
// CHECK: memref.alloca() {alignment = 64 : i64} : memref<8x24xf32>
// The class token's query: class -> class for its own key (one lane), then
// class -> token for every key of the grid's rows.
// CHECK: vector.maskedload %[[R]][%{{.*}}, %[[C33]]]
// CHECK: vector.maskedload %[[R]][%{{.*}}, %[[C17]]]
// A grid token's query: token -> class for the class key.
// CHECK: vector.maskedload %[[R]][%{{.*}}, %[[C25]]]
// CHECK-NOT: rpe.fused_window_attention
func.func @class_token_forward(%q: memref<?x3x5x8xf32>, %t: memref<12x3xf32>, %o: memref<?x5x24xf32>) {
  rpe.fused_window_attention ins(%q, %q, %q, %t : memref<?x3x5x8xf32>, memref<?x3x5x8xf32>, memref<?x3x5x8xf32>, memref<12x3xf32>)
    outs(%o : memref<?x5x24xf32>) {window = array<i64: 2, 2>, scale = 0.35355339 : f32, class_token}
  return
}

// -----

// The gradient: G has the reversed table's columns; after the items, dtable's
// three class rows are the class -> token stretch summed over a grid row's
// two keys (row 9), and lane 0 of the other two stretches (rows 10, 11).
// CHECK-LABEL: func @class_token_grad
// CHECK-SAME: %[[DT:[a-z0-9]+]]: memref<12x3xf32>)
// CHECK-DAG: %[[C9:.*]] = arith.constant 9 : index
// CHECK-DAG: %[[C10:.*]] = arith.constant 10 : index
// CHECK-DAG: %[[C11:.*]] = arith.constant 11 : index
// CHECK-DAG: %[[C17:.*]] = arith.constant 17 : index
// CHECK-DAG: %[[C18:.*]] = arith.constant 18 : index
// CHECK-DAG: %[[C25:.*]] = arith.constant 25 : index
// CHECK-DAG: %[[C33:.*]] = arith.constant 33 : index
// CHECK: %[[G:.*]] = memref.alloca() {alignment = 64 : i64} : memref<3x41xf32>
// CHECK: } {rpe.item_loop}
// CHECK: %[[A:.*]] = memref.load %[[G]][%{{.*}}, %[[C17]]]
// CHECK: %[[B:.*]] = memref.load %[[G]][%{{.*}}, %[[C18]]]
// CHECK: %[[SUM:.*]] = arith.addf %[[A]], %[[B]] : f32
// CHECK: %[[TC:.*]] = memref.load %[[G]][%{{.*}}, %[[C25]]]
// CHECK: %[[CC:.*]] = memref.load %[[G]][%{{.*}}, %[[C33]]]
// CHECK: memref.store %[[SUM]], %[[DT]][%[[C9]], %{{.*}}] : memref<12x3xf32>
// CHECK: memref.store %[[TC]], %[[DT]][%[[C10]], %{{.*}}] : memref<12x3xf32>
// CHECK: memref.store %[[CC]], %[[DT]][%[[C11]], %{{.*}}] : memref<12x3xf32>
func.func @class_token_grad(%q: memref<?x3x5x8xf32>, %t: memref<12x3xf32>, %o: memref<?x5x24xf32>,
                            %dq: memref<?x3x5x8xf32>, %dt: memref<12x3xf32>) {
  rpe.fused_window_attention_grad
      ins(%q, %q, %q, %t, %o, %o : memref<?x3x5x8xf32>, memref<?x3x5x8xf32>, memref<?x3x5x8xf32>,
                                   memref<12x3xf32>, memref<?x5x24xf32>, memref<?x5x24xf32>)
      outs(%dq, %dq, %dq, %dt : memref<?x3x5x8xf32>, memref<?x3x5x8xf32>, memref<?x3x5x8xf32>, memref<12x3xf32>)
      {window = array<i64: 2, 2>, scale = 0.35355339 : f32, class_token}
  return
}
