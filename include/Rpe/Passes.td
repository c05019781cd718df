//===- Passes.td - rpe passes -------------------------------*- tablegen -*-===//

#ifndef RPE_PASSES_TD
#define RPE_PASSES_TD

include "mlir/Pass/PassBase.td"

def RpeFoldRelativeIndex : Pass<"rpe-fold-relative-index"> {
  let summary = "Fold the relative position index, the shift mask and constant "
                "lookups into constants";
  let description = [{
    Everything about a window's relative position index is known at compile
    time: it depends on the window extents alone. Frameworks still build the
    `N x N` index (and the `nW x N x N` shifted-window mask) as tensors at run
    time. This pass replaces

    * `rpe.relative_index` by an `arith.constant` holding Swin's index,
    * `rpe.shift_mask` by an `arith.constant` holding Swin's mask,
    * `rpe.lookup` of a constant table (inference, SwinV2's continuous
      position bias after constant propagation) by the constant bias,

    so that no index arithmetic is left for run time. An `rpe.lookup` of a
    table that is not constant is left alone: its index is folded into
    constant addresses by the lowering that consumes it.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def ConvertRpeToLinalg : Pass<"convert-rpe-to-linalg"> {
  let summary = "Lower rpe ops to linalg, tensor, arith and math (unfused)";
  let description = [{
    The reference lowering: every `rpe` op becomes upstream tensor-level ops,
    step by step as a framework would run them, with no fusion.

    * `rpe.relative_index` and `rpe.shift_mask` become constants;
    * `rpe.lookup` becomes a `linalg.generic` that gathers
      `table[idx[i, j], h]` with `idx` a constant tensor;
    * `rpe.window_attention` becomes an `scf.forall` over windows and heads
      whose body computes, on `N x N` tiles in f32, the scaled product
      `(scale * q) kᵀ`, adds the bias and the mask, a three-step softmax
      (row max, `exp(s - max)` with its row sum, division) and the product
      with `v`, and writes the result in the layout of the op's result.

    It exists as the correctness baseline of the fused lowering and as the
    "unfused" point of comparison of the benchmarks.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

#endif // RPE_PASSES_TD
