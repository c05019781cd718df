//===- RpeInterfaces.td - rpe dialect interfaces ------------*- tablegen -*-===//

#ifndef RPE_INTERFACES_TD
#define RPE_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Rpe_FusedAttentionOpInterface : OpInterface<"FusedAttentionOpInterface"> {
  let description = [{
    The configuration of a fused window attention, shared by the forward
    (`rpe.fused_window_attention`) and its gradient
    (`rpe.fused_window_attention_grad`): the q, k, v operands and their
    layout, the compact table, the window, the scale, and the shifted
    windows' geometry. The kernel emitters (lib/Codegen) read an op through
    this interface, so that both directions address the same rows, table
    entries and region labels with the same code.
  }];
  let cppNamespace = "::mlir::rpe";
  let methods = [
    InterfaceMethod<"q: `[B_, H, N, d]` windows or a `[batch, L, (3 *) C]` map",
                    "::mlir::Value", "getQuery">,
    InterfaceMethod<"k, in q's layout", "::mlir::Value", "getKey">,
    InterfaceMethod<"v, in q's layout", "::mlir::Value", "getValue">,
    InterfaceMethod<"The compact table `[T, H]`", "::mlir::Value", "getTable">,
    InterfaceMethod<"The padding rows of q, k, v (token layout), or none",
                    "::mlir::OperandRange", "getPaddingValues">,
    InterfaceMethod<[{The operand laid out as the attention's output: the
                      forward's destination, the gradient's `out`}],
                    "::mlir::Value", "getAttentionOutput">,
    InterfaceMethod<"", "::llvm::ArrayRef<int64_t>", "getWindow">,
    InterfaceMethod<"", "::llvm::APFloat", "getScale">,
    InterfaceMethod<"", "std::optional<::llvm::ArrayRef<int64_t>>",
                    "getResolution">,
    InterfaceMethod<"", "std::optional<::llvm::ArrayRef<int64_t>>", "getShift">,
    InterfaceMethod<"", "::llvm::APFloat", "getMaskValue">,
    InterfaceMethod<"", "std::optional<::llvm::ArrayRef<int64_t>>", "getImage">,
    InterfaceMethod<"", "::mlir::rpe::PaddingOrder", "getPadding">,
    InterfaceMethod<"Swin's blocks or MaxViT's grid (token layout)",
                    "::mlir::rpe::Partition", "getPartition">,
    InterfaceMethod<"", "bool", "getPackedQkv">,
    InterfaceMethod<"BEiT's class token: token 0 of each window, the grid's "
                    "tokens after it, the table's three rows past Swin's",
                    "bool", "getClassToken">,
    InterfaceMethod<"SwinV2's raw per-head logit scale `[H]` (cosine "
                    "attention), or null", "::mlir::Value", "getLogitScale">,
    InterfaceMethod<"An explicit additive mask `[nW, N, N]` (window `b` adds "
                    "`mask[b mod nW]`), or null", "::mlir::Value", "getMask">,
  ];
  let extraSharedClassDeclaration = [{
    ::mlir::ShapedType getQueryType() {
      return ::llvm::cast<::mlir::ShapedType>($_op.getQuery().getType());
    }
    int64_t getNumHeads() {
      return ::llvm::cast<::mlir::ShapedType>($_op.getTable().getType())
          .getDimSize(1);
    }
    int64_t getNumTokens() {
      return ::mlir::rpe::getNumTokens($_op.getWindow(), $_op.getClassToken());
    }
    int64_t getHeadDim() {
      ::mlir::ShapedType qType = getQueryType();
      return hasTokenLayout() ? qType.getDimSize(2) / getNumHeads() /
                                    ($_op.getPackedQkv() ? 3 : 1)
                              : qType.getDimSize(3);
    }
    /// q, k, v and the output are token-layout feature maps.
    bool hasTokenLayout() { return $_op.getImage().has_value(); }
    /// The shifted-window mask applies: a non-zero shift.
    bool hasShiftMask() {
      std::optional<::llvm::ArrayRef<int64_t>> shift = $_op.getShift();
      return shift && ::llvm::any_of(*shift, [](int64_t s) { return s != 0; });
    }
    bool isShiftThenPad() {
      return $_op.getPadding() == ::mlir::rpe::PaddingOrder::ShiftThenPad;
    }
    /// MaxViT's grid partition: windows strided across the map.
    bool isGrid() {
      return $_op.getPartition() == ::mlir::rpe::Partition::Grid;
    }
    /// SwinV2's scaled cosine attention (a `logit_scale` operand).
    bool isCosine() { return static_cast<bool>($_op.getLogitScale()); }
    /// The output is `[B_, N, H*d]` (heads merged), not `[B_, H, N, d]`.
    bool hasMergedHeadsResult() {
      return ::llvm::cast<::mlir::ShapedType>(
                 $_op.getAttentionOutput().getType()).getRank() == 3;
    }
  }];
}

#endif // RPE_INTERFACES_TD
