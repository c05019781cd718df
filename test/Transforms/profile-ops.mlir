// RUN: swin-opt %s --rpe-profile-ops -split-input-file -verify-diagnostics | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>

// Each op that does work at the top level of a public function is timed:
// linalg and rpe ops, copies, loop nests. Allocations, views, constants
// and deallocations are not.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.*]]: memref<4x8xf32>, %[[W:.*]]: memref<1x8x48xf32>, %[[T:.*]]: memref<8x8xf32>)
// CHECK:      %[[A:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK-NEXT: %[[ID0:.*]] = arith.constant 0 : i32
// CHECK-NEXT: call @swin_prof_begin(%[[ID0]]) : (i32) -> ()
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: call @swin_prof_end(%[[ID0]]) : (i32) -> ()
// CHECK-NEXT: %[[ID1:.*]] = arith.constant 1 : i32
// CHECK-NEXT: call @swin_prof_begin(%[[ID1]])
// CHECK-NEXT: linalg.matmul
// CHECK-NEXT: call @swin_prof_end(%[[ID1]])
// CHECK-NEXT: %[[ID2:.*]] = arith.constant 2 : i32
// CHECK-NEXT: call @swin_prof_begin(%[[ID2]])
// CHECK-NEXT: rpe.matmul
// CHECK:      rpe.yield
// CHECK-NEXT: }
// CHECK-NEXT: call @swin_prof_end(%[[ID2]])
// The loop nests: the calls go around the whole nest.
// CHECK:      call @swin_prof_begin(%{{.*}})
// CHECK-NEXT: scf.forall
// CHECK:      linalg.yield
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: call @swin_prof_end
// CHECK-NEXT: %[[ID4:.*]] = arith.constant 4 : i32
// CHECK-NEXT: call @swin_prof_begin(%[[ID4]])
// CHECK-NEXT: scf.for
// CHECK:      vector.reduction
// CHECK-NEXT: memref.store
// CHECK-NEXT: }
// CHECK-NEXT: call @swin_prof_end(%[[ID4]])
// CHECK:      call @swin_prof_begin
// CHECK-NEXT: scf.parallel
// CHECK:      call @swin_prof_end
// CHECK:      call @swin_prof_begin
// CHECK-NEXT: scf.for
// CHECK:      call @swin_prof_end
// CHECK-NEXT: %[[B:.*]] = memref.collapse_shape %[[A]]
// CHECK-NEXT: %[[C:.*]] = memref.alloc() : memref<32xf32>
// CHECK-NEXT: %[[ID7:.*]] = arith.constant 7 : i32
// CHECK-NEXT: call @swin_prof_begin(%[[ID7]])
// CHECK-NEXT: memref.copy %[[B]], %[[C]]
// CHECK-NEXT: call @swin_prof_end(%[[ID7]])
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK-NEXT: return %[[C]]
func.func @forward(%x: memref<4x8xf32>, %w: memref<1x8x48xf32>, %t: memref<8x8xf32>) -> memref<32xf32> {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %a = memref.alloc() : memref<4x8xf32>
  linalg.fill ins(%zero : f32) outs(%a : memref<4x8xf32>)
  linalg.matmul ins(%x, %t : memref<4x8xf32>, memref<8x8xf32>) outs(%a : memref<4x8xf32>) loc("/models/swin/model.mlir":12:5)
  rpe.matmul ins(%x, %w : memref<4x8xf32>, memref<1x8x48xf32>) outs(%a : memref<4x8xf32>) {
  ^bb0(%acc: f32):
    rpe.yield %acc : f32
  } loc(callsite("/torch/nn/modules/linear.py":134:0 at callsite("/timm/layers/mlp.py":48:0 at "/timm/models/swin_transformer.py":301:0)))
  // A row loop of linalg ops: named after the last one.
  scf.forall (%i) in (4) {
    %row = memref.subview %a[%i, 0] [1, 8] [1, 1] : memref<4x8xf32> to memref<1x8xf32, strided<[8, 1], offset: ?>>
    linalg.fill ins(%zero : f32) outs(%row : memref<1x8xf32, strided<[8, 1], offset: ?>>)
    linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%row : memref<1x8xf32, strided<[8, 1], offset: ?>>) {
    ^bb0(%o: f32):
      %s = arith.mulf %o, %o : f32
      linalg.yield %s : f32
    }
  } loc(fused["/models/swin/model.mlir":20:3, "/models/swin/model.mlir":21:3])
  // Row loops the row passes vectorized: a reduction (a LayerNorm, say),
  // float arithmetic, a gather.
  scf.for %i = %c0 to %c4 step %c1 {
    %v = vector.transfer_read %a[%i, %c0], %zero {in_bounds = [true]} : memref<4x8xf32>, vector<8xf32>
    %s = vector.reduction <add>, %v : vector<8xf32> into f32
    memref.store %s, %x[%i, %c0] : memref<4x8xf32>
  } loc("norm1")
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    %v = vector.transfer_read %a[%i, %c0], %zero {in_bounds = [true]} : memref<4x8xf32>, vector<8xf32>
    %s = arith.addf %v, %v : vector<8xf32>
    vector.transfer_write %s, %x[%i, %c0] {in_bounds = [true]} : vector<8xf32>, memref<4x8xf32>
  } loc(fused[unknown, "/models/swin/model.mlir":30:3])
  scf.for %i = %c0 to %c4 step %c1 {
    %j = arith.subi %c4, %i : index
    %p = arith.cmpi ult, %j, %c4 : index
    %k = arith.select %p, %j, %i : index
    %v = vector.transfer_read %a[%k, %c0], %zero {in_bounds = [true]} : memref<4x8xf32>, vector<8xf32>
    vector.transfer_write %v, %x[%i, %c0] {in_bounds = [true]} : vector<8xf32>, memref<4x8xf32>
  } loc("/models/swin/model.mlir":40:3)
  %b = memref.collapse_shape %a [[0, 1]] : memref<4x8xf32> into memref<32xf32>
  %c = memref.alloc() : memref<32xf32>
  memref.copy %b, %c : memref<32xf32> to memref<32xf32> loc(unknown)
  memref.dealloc %a : memref<4x8xf32>
  return %c : memref<32xf32>
}

// Private functions are not timed, nor public ones without work.
// CHECK-LABEL: func.func private @helper
// CHECK-NOT:   swin_prof
// CHECK:       return
func.func private @helper(%x: memref<4xf32>, %y: memref<4xf32>) {
  memref.copy %x, %y : memref<4xf32> to memref<4xf32>
  return
}
// CHECK-LABEL: func.func @view
// CHECK-NOT:   swin_prof
// CHECK:       return
func.func @view(%x: memref<4x8xf32>) -> memref<32xf32> {
  %b = memref.collapse_shape %x [[0, 1]] : memref<4x8xf32> into memref<32xf32>
  return %b : memref<32xf32>
}

// The ids go on through the module's functions.
// CHECK-LABEL: func.func @second
// CHECK:       %[[ID8:.*]] = arith.constant 8 : i32
// CHECK-NEXT:  call @swin_prof_begin(%[[ID8]])
// CHECK-NEXT:  memref.copy
// CHECK-NEXT:  call @swin_prof_end(%[[ID8]])
func.func @second(%x: memref<4xf32>, %y: memref<4xf32>) {
  memref.copy %x, %y : memref<4xf32> to memref<4xf32>
  return
}

// The runtime's functions, and the table: the first profiled function;
// each op's name and location (a file without its directory; a call site
// as its innermost frame and that frame's caller; a name; the first known
// part of a fused location; nothing for an unknown one); the number of
// ops; their counters.
// CHECK:      func.func private @swin_prof_begin(i32)
// CHECK-NEXT: func.func private @swin_prof_end(i32)
// CHECK-NEXT: llvm.mlir.global external hidden constant @swin_prof_function("forward\00")
// CHECK-NEXT: llvm.mlir.global external hidden constant @swin_prof_ops(
// CHECK-SAME:   "linalg.fill\00profile-ops.mlir:{{[0-9]+}}:3\00
// CHECK-SAME:   linalg.matmul\00model.mlir:12:5\00
// CHECK-SAME:   rpe.matmul\00linear.py:134 at mlp.py:48\00
// CHECK-SAME:   linalg.generic\00model.mlir:20:3\00
// CHECK-SAME:   rows.reduction\00norm1\00
// CHECK-SAME:   rows.elementwise\00model.mlir:30:3\00
// CHECK-SAME:   rows.gather\00model.mlir:40:3\00
// CHECK-SAME:   memref.copy\00\00
// CHECK-SAME:   memref.copy\00profile-ops.mlir:{{[0-9]+}}:3\00")
// CHECK-NEXT: llvm.mlir.global external hidden constant @swin_prof_op_count(9 : i32)
// CHECK-NEXT: llvm.mlir.global external hidden @swin_prof_counters(#llvm.zero)
// CHECK-SAME:   !llvm.array<9 x struct<(i64, i64)>>

// -----

// Nothing to time: an empty table, which the runtime reports as such.
// CHECK-LABEL: func.func @nothing
// CHECK-NOT:   call
// CHECK:       llvm.mlir.global external hidden constant @swin_prof_function("\00")
// CHECK-NEXT:  llvm.mlir.global external hidden constant @swin_prof_ops("")
// CHECK-NEXT:  llvm.mlir.global external hidden constant @swin_prof_op_count(0 : i32)
// CHECK-NEXT:  llvm.mlir.global external hidden @swin_prof_counters(#llvm.zero)
// CHECK-SAME:    !llvm.array<0 x struct<(i64, i64)>>
func.func @nothing(%x: memref<4xf32>) -> memref<4xf32> {
  return %x : memref<4xf32>
}

// -----

// A module that has one of the runtime's symbols already cannot be
// profiled.
func.func @forward(%x: memref<4xf32>, %y: memref<4xf32>) {
  memref.copy %x, %y : memref<4xf32> to memref<4xf32>
  return
}
// expected-error @+1 {{@swin_prof_counters is the profiling runtime's: the module cannot be profiled}}
llvm.mlir.global external @swin_prof_counters(0 : i64) : i64
