//===- RpeDialect.td - Relative-position-bias dialect ------*- tablegen -*-===//
//
// The `rpe` dialect: Swin-style windowed attention with a 2-D (or 3-D)
// relative position bias gathered from a compact table.
//
//===----------------------------------------------------------------------===//

#ifndef RPE_DIALECT_TD
#define RPE_DIALECT_TD

include "mlir/IR/OpBase.td"

def Rpe_Dialect : Dialect {
  let name = "rpe";
  let cppNamespace = "::mlir::rpe";
  let summary = "Windowed attention with relative position bias (Swin Transformer)";
  let description = [{
    The `rpe` dialect expresses the window attention of Swin Transformers and
    its parts at the level a Swin user reasons about them:

    * `rpe.relative_index`: the `N x N` relative position index of a window,
    * `rpe.lookup`: the gather of the per-head bias `B[h, i, j] =
      table[idx(i, j), h]` from the compact `(2Wh-1)(2Ww-1) x heads` table,
    * `rpe.shift_mask`: the additive mask of shifted windows (SW-MSA),
    * `rpe.window_attention`: `softmax(scale * q kᵀ + B [+ mask]) v`.

    Tokens of a window are numbered row-major, `t = y * Ww + x` (3-D windows:
    `t = (z * Wh + y) * Ww + x`), and the relative index is Swin's:
    `idx(i, j) = (yi - yj + Wh - 1) * (2Ww - 1) + (xi - xj + Ww - 1)`
    (3-D windows put the depth offset outermost).

    Everything an op needs to know about the window geometry is an attribute,
    so the relative index is a compile-time constant: the passes of this
    project fold it away and never compute it at run time.

    The dialect also verifies the attribute its passes leave on other ops:
    `rpe.items_per_block`, a positive `i64` that `rpe-lower-fused-attention`
    puts on the function launching a GPU kernel, is the number of (window,
    head) items one block computes; the host runtime sizes the grid from it.
    `rpe.item_loop`, a unit attribute, marks the host loop of a fused kernel
    over its (window, head) items, the loop `rpe-item-range` restricts to a
    range the caller gives.

    Example:

    ```mlir
    func.func @launch() attributes {rpe.items_per_block = 3 : i64} {
      return
    }
    ```
  }];
  let hasConstantMaterializer = 1;
  // The attributes (RpeAttrs.td) print as `#rpe.<mnemonic><...>`.
  let useDefaultAttributePrinterParser = 1;
  // A typed name for each attribute the passes put on other dialects' ops,
  // checked by verifyOperationAttribute wherever it appears.
  let discardableAttrs = (ins "::mlir::IntegerAttr":$items_per_block,
                              "::mlir::UnitAttr":$item_loop);
  let hasOperationAttrVerify = 1;
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

class Rpe_Op<string mnemonic, list<Trait> traits = []>
    : Op<Rpe_Dialect, mnemonic, traits>;

#endif // RPE_DIALECT_TD
