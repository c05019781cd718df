// A function that returns a constant tensor returns a buffer it owns: the
// deallocation pipeline clones the constant's global, and the pipelines
// lower that clone (an allocation and a copy) like every other op, so that
// the module translates to LLVM IR.
// RUN: swin-opt %s --rpe-cpu-pipeline | mlir-translate --mlir-to-llvmir | FileCheck %s
// RUN: swin-opt %s --rpe-gpu-pipeline="toolkit=%cuda_toolkit" | mlir-translate --mlir-to-llvmir | FileCheck %s

// CHECK-LABEL: define { ptr, ptr, i64, [2 x i64], [2 x i64] } @index_3x3(
// CHECK: call ptr @malloc
// CHECK-NOT: call {{.*}}@memrefCopy
// CHECK: ret { ptr, ptr, i64, [2 x i64], [2 x i64] }
func.func @index_3x3() -> tensor<9x9xi64> {
  %0 = rpe.relative_index {window = array<i64: 3, 3>} : tensor<9x9xi64>
  return %0 : tensor<9x9xi64>
}

// CHECK-LABEL: define { ptr, ptr, i64, [3 x i64], [3 x i64] } @mask(
// CHECK: call ptr @malloc
// CHECK: ret { ptr, ptr, i64, [3 x i64], [3 x i64] }
func.func @mask() -> tensor<4x4x4xf32> {
  %0 = rpe.shift_mask {resolution = array<i64: 4, 4>, window = array<i64: 2, 2>, shift = array<i64: 1, 1>} : tensor<4x4x4xf32>
  return %0 : tensor<4x4x4xf32>
}
