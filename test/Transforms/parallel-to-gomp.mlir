// RUN: swin-opt %s -split-input-file -rpe-parallel-to-gomp -verify-diagnostics | FileCheck %s

// The loop becomes a GOMP_parallel call of a worker that loads what the
// body uses from a frame on the caller's stack: the memref as its
// descriptor, the index as i64. Constants are cloned into the worker, not
// passed.

// CHECK-LABEL: func.func @one_dim(
// CHECK-SAME:      %[[OUT:.*]]: memref<?xf32>, %[[N:.*]]: index)
// CHECK:         %[[ONE:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK:         %[[FRAME:.*]] = llvm.alloca %[[ONE]] x !llvm.struct<(i64, struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>)>
// CHECK:         %[[N64:.*]] = builtin.unrealized_conversion_cast %[[N]] : index to i64
// CHECK:         %[[SLOT0:.*]] = llvm.getelementptr %[[FRAME]][0, 0]
// CHECK:         llvm.store %[[N64]], %[[SLOT0]] : i64, !llvm.ptr
// CHECK:         %[[DESC:.*]] = builtin.unrealized_conversion_cast %[[OUT]] : memref<?xf32> to !llvm.struct
// CHECK:         %[[SLOT1:.*]] = llvm.getelementptr %[[FRAME]][0, 1]
// CHECK:         llvm.store %[[DESC]], %[[SLOT1]]
// CHECK:         %[[WORKER:.*]] = constant @one_dim.par0.line[[# @LINE + 46]] : (!llvm.ptr) -> ()
// CHECK:         %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK:         call @GOMP_parallel(%[[WORKER]], %[[FRAME]], %[[ZERO]], %[[ZERO]])
// CHECK-NOT:     scf.parallel
// CHECK:         return

// CHECK-LABEL: func.func private @one_dim.par0.line{{[0-9]+}}(
// CHECK-SAME:      %[[F:.*]]: !llvm.ptr) attributes {llvm.linkage = #llvm.linkage<internal>}
// CHECK-DAG:     %[[X:.*]] = arith.constant 2.000000e+00 : f32
// CHECK:         %[[L0:.*]] = llvm.load %{{.*}} : !llvm.ptr -> i64
// CHECK:         %[[UB:.*]] = builtin.unrealized_conversion_cast %[[L0]] : i64 to index
// CHECK:         %[[L1:.*]] = llvm.load %{{.*}} : !llvm.ptr -> !llvm.struct
// CHECK:         %[[BUF:.*]] = builtin.unrealized_conversion_cast %[[L1]] : {{.*}} to memref<?xf32>
// CHECK:         %[[T32:.*]] = call @omp_get_thread_num() : () -> i32
// CHECK:         %[[T:.*]] = arith.index_cast %[[T32]] : i32 to index
// CHECK:         %[[NT32:.*]] = call @omp_get_num_threads() : () -> i32
// CHECK:         %[[NT:.*]] = arith.index_cast %[[NT32]] : i32 to index
// Trip count max(ub - 0, 0) / 1; the shares: t q + min(t, r).
// CHECK:         %[[TOTAL:.*]] = arith.maxsi %[[UB]], %{{.*}} : index
// CHECK:         %[[Q:.*]] = arith.divui %[[TOTAL]], %[[NT]] : index
// CHECK:         %[[R:.*]] = arith.remui %[[TOTAL]], %[[NT]] : index
// CHECK:         %[[NEXT:.*]] = arith.addi %[[T]], %{{.*}} : index
// CHECK:         %[[TQ:.*]] = arith.muli %[[T]], %[[Q]] : index
// CHECK:         %[[TR:.*]] = arith.minui %[[T]], %[[R]] : index
// CHECK:         %[[BEGIN:.*]] = arith.addi %[[TQ]], %[[TR]] : index
// CHECK:         %[[NQ:.*]] = arith.muli %[[NEXT]], %[[Q]] : index
// CHECK:         %[[NR:.*]] = arith.minui %[[NEXT]], %[[R]] : index
// CHECK:         %[[END:.*]] = arith.addi %[[NQ]], %[[NR]] : index
// CHECK:         cf.br ^[[HEADER:.*]](%[[BEGIN]] : index)
// CHECK:       ^[[HEADER]](%[[I:.*]]: index):
// CHECK:         %[[MORE:.*]] = arith.cmpi ult, %[[I]], %[[END]] : index
// CHECK:         cf.cond_br %[[MORE]], ^[[BODY:.*]], ^[[EXIT:.*]]
// CHECK:       ^[[BODY]]:
// CHECK:         memref.store %[[X]], %[[BUF]][%[[I]]] : memref<?xf32>
// CHECK:         %[[INC:.*]] = arith.addi %[[I]], %{{.*}} : index
// CHECK:         cf.br ^[[HEADER]](%[[INC]] : index)
// CHECK:       ^[[EXIT]]:
// CHECK:         return

// CHECK-DAG:   func.func private @GOMP_parallel((!llvm.ptr) -> (), !llvm.ptr, i32, i32)
// CHECK-DAG:   func.func private @omp_get_thread_num() -> i32
// CHECK-DAG:   func.func private @omp_get_num_threads() -> i32
func.func @one_dim(%out: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 2.0 : f32
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %x, %out[%i] : memref<?xf32>
    scf.reduce
  }
  return
}

// -----

// Two dimensions, linearized: the innermost fastest, each induction
// variable its lower bound plus its position times its step.

// CHECK-LABEL: func.func private @two_dims.par0.line{{[0-9]+}}(
// CHECK:         %[[C1:.*]] = arith.constant 1 : index
// CHECK:         %[[C2:.*]] = arith.constant 2 : index
// CHECK:         %[[C3:.*]] = arith.constant 3 : index
// CHECK:         %[[C15:.*]] = arith.constant 15 : index
// Trip counts 5 and ceil((7 - 1) / 2) = 3: 15 iterations.
// CHECK:         arith.divui %[[C15]], %{{.*}} : index
// CHECK:       ^{{.*}}(%[[I:.*]]: index):
// CHECK:       ^{{.*}}:
// CHECK:         %[[J0:.*]] = arith.remui %[[I]], %[[C3]] : index
// CHECK:         %[[I0:.*]] = arith.divui %[[I]], %[[C3]] : index
// CHECK:         %[[J1:.*]] = arith.muli %[[J0]], %[[C2]] : index
// CHECK:         %[[J:.*]] = arith.addi %[[J1]], %[[C1]] : index
// CHECK:         memref.store %{{.*}}, %{{.*}}[%[[I0]], %[[J]]] : memref<5x7xf32>
func.func @two_dims(%out: memref<5x7xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c5 = arith.constant 5 : index
  %c7 = arith.constant 7 : index
  %x = arith.constant 2.0 : f32
  scf.parallel (%i, %j) = (%c0, %c1) to (%c5, %c7) step (%c1, %c2) {
    memref.store %x, %out[%i, %j] : memref<5x7xf32>
    scf.reduce
  }
  return
}

// -----

// The worker's name: the function, the loop's number in it, then what its
// location says it came from: an op's name without its dialect (the name
// location a lowering gives a loop), any other name in symbol characters,
// the source line.

// CHECK-LABEL: func.func @named(
// CHECK:         constant @named.par0.matmul.line7 :
// CHECK:         constant @named.par1.layer_norm.line20 :
// CHECK:         constant @named.par2 :
// CHECK-LABEL: func.func private @named.par0.matmul.line7(
// CHECK-LABEL: func.func private @named.par1.layer_norm.line20(
// CHECK-LABEL: func.func private @named.par2(
func.func @named(%out: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %x = arith.constant 2.0 : f32
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    memref.store %x, %out[%i] : memref<8xf32>
    scf.reduce
  } loc("rpe.matmul"("model.mlir":7:3))
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    memref.store %x, %out[%i] : memref<8xf32>
    scf.reduce
  } loc(fused["layer norm", "model.mlir":20:5])
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    memref.store %x, %out[%i] : memref<8xf32>
    scf.reduce
  } loc(unknown)
  return
}

// -----

// Only the outermost loop runs on the team: a loop nested in its body runs
// sequentially on its thread.

// CHECK-LABEL: func.func @nested(
// CHECK:         call @GOMP_parallel
// CHECK-NOT:     call @GOMP_parallel
// CHECK-LABEL: func.func private @nested.par0.line{{[0-9]+}}(
// CHECK:       ^bb2:
// CHECK:         scf.parallel (%{{.*}}) = (%{{.*}}) to (%{{.*}}) step (%{{.*}}) {
// CHECK:           memref.store
// CHECK-NOT:   func.func private @nested.par1
func.func @nested(%out: memref<8x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %x = arith.constant 2.0 : f32
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    scf.parallel (%j) = (%c0) to (%c4) step (%c1) {
      memref.store %x, %out[%i, %j] : memref<8x4xf32>
      scf.reduce
    }
    scf.reduce
  }
  return
}

// -----

// The frame is allocated once, at the start of the function, not on every
// iteration of a loop around the parallel one. An iteration that allocates
// on the stack gets a scope of its own, released at its end.

// CHECK-LABEL: func.func @in_loop(
// CHECK-NEXT:    %[[ONE:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK-NEXT:    %[[FRAME:.*]] = llvm.alloca %[[ONE]] x
// CHECK:         scf.for
// CHECK:           call @GOMP_parallel(%{{.*}}, %[[FRAME]],
// CHECK-LABEL: func.func private @in_loop.par0.line{{[0-9]+}}(
// CHECK:       ^bb2:
// CHECK-NEXT:    memref.alloca_scope {
// CHECK-NEXT:      memref.alloca() : memref<4xf32>
func.func @in_loop(%out: memref<8x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %x = arith.constant 2.0 : f32
  scf.for %k = %c0 to %c8 step %c1 {
    scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
      %tmp = memref.alloca() : memref<4xf32>
      memref.store %x, %tmp[%i] : memref<4xf32>
      %v = memref.load %tmp[%i] : memref<4xf32>
      memref.store %v, %out[%k, %i] : memref<8x4xf32>
      scf.reduce
    }
  }
  return
}

// -----

// Allocations in a scope of the body's own: no second scope.

// CHECK-LABEL: func.func private @scoped.par0.line{{[0-9]+}}(
// CHECK:       ^bb2:
// CHECK-NEXT:    memref.alloca_scope {
// CHECK-NOT:     memref.alloca_scope
// CHECK:         return
func.func @scoped(%out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %x = arith.constant 2.0 : f32
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    memref.alloca_scope {
      %tmp = memref.alloca() : memref<4xf32>
      memref.store %x, %tmp[%i] : memref<4xf32>
      %v = memref.load %tmp[%i] : memref<4xf32>
      memref.store %v, %out[%i] : memref<4xf32>
    }
    scf.reduce
  }
  return
}

// -----

func.func @reduction(%n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %x = arith.constant 2.0 : f32
  // expected-error @+1 {{'scf.parallel' op with reductions cannot run on the GNU OpenMP team}}
  %sum = scf.parallel (%i) = (%c0) to (%n) step (%c1) init (%zero) -> f32 {
    scf.reduce(%x : f32) {
    ^bb0(%a: f32, %b: f32):
      %s = arith.addf %a, %b : f32
      scf.reduce.return %s : f32
    }
  }
  return %sum : f32
}

// -----

func.func @tensor_capture(%t: tensor<8xf32>, %out: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  // expected-error @+1 {{'scf.parallel' op uses a value of type 'tensor<8xf32>' from outside, which rpe-parallel-to-gomp cannot pass to its threads}}
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %v = tensor.extract %t[%i] : tensor<8xf32>
    memref.store %v, %out[%i] : memref<8xf32>
    scf.reduce
  }
  return
}

// -----

// expected-error @+1 {{'func.func' op is not the GNU OpenMP runtime's @GOMP_parallel of type '((!llvm.ptr) -> (), !llvm.ptr, i32, i32) -> ()', which rpe-parallel-to-gomp calls}}
func.func private @GOMP_parallel(!llvm.ptr)

func.func @clash(%out: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %x = arith.constant 2.0 : f32
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    memref.store %x, %out[%i] : memref<8xf32>
    scf.reduce
  }
  return
}
