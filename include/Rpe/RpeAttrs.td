//===- RpeAttrs.td - rpe dialect attributes ----------------*- tablegen -*-===//
//
// Attributes of the rpe dialect: the choices that Swin implementations make
// differently, as typed values instead of strings, so that the parser rejects
// a misspelt choice and the C++ code switches over an enum.
//
//===----------------------------------------------------------------------===//

#ifndef RPE_ATTRS_TD
#define RPE_ATTRS_TD

include "Rpe/RpeDialect.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// PaddingOrder
//===----------------------------------------------------------------------===//

def Rpe_PaddingOrder : I32EnumAttr<"PaddingOrder",
    "order of the roll and the padding of a feature map", [
      I32EnumAttrCase<"PadThenShift", 0, "pad_then_shift">,
      I32EnumAttrCase<"ShiftThenPad", 1, "shift_then_pad">
    ]> {
  // The attribute is the EnumAttr below, which prints as a dialect attribute
  // rather than as an integer.
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::rpe";
}

def Rpe_PaddingOrderAttr : EnumAttr<Rpe_Dialect, Rpe_PaddingOrder, "padding"> {
  let summary = "Order of Swin's cyclic shift and padding of a feature map";
  let description = [{
    When a feature map is not a multiple of the window, Swin implementations
    pad it at the end of each axis to whole windows, but they disagree on
    whether the cyclic shift of shifted-window blocks happens before or after
    the padding, which changes which tokens share a window:

    * `pad_then_shift` (HF transformers, torchvision, Video Swin, MONAI): pad,
      then roll the padded map; the default;
    * `shift_then_pad` (timm): roll the unpadded map, then pad it.

    Both build the shifted-window mask on the padded map. Without padding the
    two orders are the same.

    Example:

    ```mlir
    padding = #rpe.padding<shift_then_pad>
    ```
  }];
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Partition
//===----------------------------------------------------------------------===//

def Rpe_Partition : I32EnumAttr<"Partition",
    "which tokens of a feature map form a window", [
      I32EnumAttrCase<"Block", 0, "block">,
      I32EnumAttrCase<"Grid", 1, "grid">
    ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::rpe";
}

def Rpe_PartitionAttr : EnumAttr<Rpe_Dialect, Rpe_Partition, "partition"> {
  let summary = "Which tokens of a feature map form a window";
  let description = [{
    Along each axis of a map of `n` tokens cut into windows of `w` tokens
    (`g = n / w` windows), window coordinate `c` and token coordinate `t`
    address the map position:

    * `block` (Swin, MaxViT's block attention): `c * w + t`, contiguous
      windows; the default;
    * `grid` (MaxViT's and CoAtNet's grid attention, timm's
      `grid_partition`): `t * g + c`, windows whose tokens are strided by
      `g` across the whole map.

    Either way the tokens of a window are numbered row-major by `t` and the
    relative position bias is that of their `t` coordinates: the same table
    and index as a block window of the same size. MaxViT divides the map
    into whole grids and does not shift them, so `grid` requires a zero
    shift and no padding.

    Example:

    ```mlir
    partition = #rpe.partition<grid>
    ```
  }];
  let assemblyFormat = "`<` $value `>`";
}

#endif // RPE_ATTRS_TD
