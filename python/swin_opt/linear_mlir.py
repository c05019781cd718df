"""Linear layers as torch-mlir writes them, in MLIR text, for the GEMM
tests and benchmarks.

torch-mlir's FX importer exports ``F.linear(x, w, b)`` (and what follows it
in a Swin block) as ``linalg.matmul`` of the input and
``linalg.transpose`` of the ``[N, K]`` weight, the bias broadcast by one
``linalg.generic`` and added by another, GELU as a generic with
``math.erf``, the residual as an add. :func:`linear_module` writes that
form for any shape, with the weights as constants (``dense_resource``
blobs, as the importer writes them) or as arguments, and the result
written into the caller's buffer: ``@<name>(x[, w][, residual], out)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Sequence

import numpy as np

__all__ = ["Linear", "linear_module", "reference"]

#: The epilogue steps :func:`linear_module` writes after the product.
STEPS = ("bias", "gelu", "residual")


@dataclass
class Linear:
    """``out = steps(x [M, K] @ wᵀ)`` with ``w`` [N, K] (or [K, N] with
    ``transposed_weight=False``); `m` may be None (a dynamic M)."""

    m: Optional[int]
    k: int
    n: int
    steps: Sequence[str] = ()
    constant_weight: bool = True
    transposed_weight: bool = True
    name: str = "linear"

    def __post_init__(self):
        unknown = set(self.steps) - set(STEPS)
        if unknown:
            raise ValueError(f"unknown epilogue steps {sorted(unknown)}")


def _blob(values: np.ndarray) -> str:
    """A dense_resource blob: its alignment (4, little endian), then the bytes."""
    return "0x04000000" + np.ascontiguousarray(values, np.float32).tobytes().hex().upper()


def linear_module(layer: Linear, weight: np.ndarray, bias: Optional[np.ndarray] = None) -> str:
    """The module of `layer`; `weight` [N, K] (or [K, N]) and `bias` [N]
    are baked in when the layer says so (the bias always is)."""
    m = "?" if layer.m is None else str(layer.m)
    k, n = layer.k, layer.n
    mn = f"tensor<{m}x{n}xf32>"
    wshape = f"{n}x{k}" if layer.transposed_weight else f"{k}x{n}"
    identity = "affine_map<(d0, d1) -> (d0, d1)>"
    column = "affine_map<(d0, d1) -> (d1)>"
    args = [f"%x: tensor<{m}x{k}xf32>"]
    if not layer.constant_weight:
        args.append(f"%w: tensor<{wshape}xf32>")
    if "residual" in layer.steps:
        args.append(f"%res: {mn}")
    args.append(f"%out: memref<{m}x{n}xf32>")
    empty = "tensor.empty() : " + mn if layer.m is not None else (
        f"tensor.empty(%rows) : {mn}")
    lines = ["  %zero = arith.constant 0.000000e+00 : f32"]
    if layer.m is None:
        lines += ["  %c0 = arith.constant 0 : index",
                  f"  %rows = tensor.dim %x, %c0 : tensor<{m}x{k}xf32>"]
    if layer.constant_weight:
        lines.append(f"  %w = arith.constant dense_resource<weight> : tensor<{wshape}xf32>")
    rhs = "%w"
    if layer.transposed_weight:
        lines += [f"  %wt0 = tensor.empty() : tensor<{k}x{n}xf32>",
                  f"  %wt = linalg.transpose ins(%w : tensor<{n}x{k}xf32>) outs(%wt0 : tensor<{k}x{n}xf32>)"
                  " permutation = [1, 0]"]
        rhs = "%wt"
    lines += [f"  %e = {empty}",
              f"  %f = linalg.fill ins(%zero : f32) outs(%e : {mn}) -> {mn}",
              f"  %v0 = linalg.matmul ins(%x, {rhs} : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>)"
              f" outs(%f : {mn}) -> {mn}"]

    def generic(index: int, extra: List[str], maps: List[str], body: List[str]) -> None:
        ins = [f"%v{index}"] + extra
        types = [mn] * len(ins)
        all_maps = ", ".join([identity, *maps, identity])
        block_args = ", ".join(f"%a{i}: f32" for i in range(len(ins)))
        lines.append(f"  %v{index + 1} = linalg.generic {{indexing_maps = [{all_maps}], iterator_types ="
                     f" [\"parallel\", \"parallel\"]}} ins({', '.join(ins)} : {', '.join(types)})"
                     f" outs(%e : {mn}) {{")
        lines.append(f"  ^bb0({block_args}, %o: f32):")
        lines.extend("    " + b for b in body)
        lines.append(f"  }} -> {mn}")

    for index, step in enumerate(layer.steps):
        if step == "bias":
            # As torch-mlir writes it: broadcast, then add.
            lines.append(f"  %b = arith.constant dense_resource<bias> : tensor<{n}xf32>")
            lines.append(f"  %bb = linalg.generic {{indexing_maps = [{column}, {identity}], iterator_types ="
                         f" [\"parallel\", \"parallel\"]}} ins(%b : tensor<{n}xf32>) outs(%e : {mn}) {{")
            lines += ["  ^bb0(%in: f32, %o: f32):", "    linalg.yield %in : f32", f"  }} -> {mn}"]
            generic(index, ["%bb"], [identity], ["%s = arith.addf %a0, %a1 : f32",
                                                 "linalg.yield %s : f32"])
        elif step == "gelu":
            generic(index, [], [], [
                "%half = arith.constant 5.000000e-01 : f32",
                "%rsqrt2 = arith.constant 0.707106769 : f32",
                "%one = arith.constant 1.000000e+00 : f32",
                "%t = arith.mulf %a0, %rsqrt2 : f32", "%erf = math.erf %t : f32",
                "%p = arith.addf %erf, %one : f32", "%h = arith.mulf %a0, %half : f32",
                "%r = arith.mulf %h, %p : f32", "linalg.yield %r : f32"])
        elif step == "residual":
            generic(index, ["%res"], [identity], ["%s = arith.addf %a0, %a1 : f32",
                                                  "linalg.yield %s : f32"])
    resources = []
    if layer.constant_weight:
        resources.append(f"      weight: \"{_blob(weight)}\"")
    if "bias" in layer.steps:
        resources.append(f"      bias: \"{_blob(bias)}\"")
    # The result goes into the caller's buffer (empty-tensor elimination
    # makes it the last op's destination): no copy, no allocation.
    text = (f"func.func @{layer.name}({', '.join(args)}) attributes {{llvm.emit_c_interface}} {{\n"
            + "\n".join(lines)
            + f"\n  bufferization.materialize_in_destination %v{len(layer.steps)} in restrict writable"
            f" %out : ({mn}, memref<{m}x{n}xf32>) -> ()\n  return\n}}\n")
    if resources:
        text += "{-#\n  dialect_resources: {\n    builtin: {\n" + ",\n".join(resources) + "\n    }\n  }\n#-}\n"
    return text


def reference(layer: Linear, x: np.ndarray, weight: np.ndarray, bias: Optional[np.ndarray] = None,
              residual: Optional[np.ndarray] = None) -> np.ndarray:
    """The layer in float64."""
    import math

    w = weight.astype(np.float64)
    y = x.astype(np.float64) @ (w.T if layer.transposed_weight else w)
    for step in layer.steps:
        if step == "bias":
            y = y + bias
        elif step == "gelu":
            y = 0.5 * y * (1.0 + np.vectorize(math.erf)(y / math.sqrt(2.0)))
        elif step == "residual":
            y = y + residual
    return y
