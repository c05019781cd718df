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
With ``dtype="bf16"`` the input and the weight are bf16 (NumPy arrays of
their bits, :func:`to_bf16`) and the product f32, as ``linalg.matmul`` of
bf16 operands into an f32 destination (widened products).

:func:`dense_module` writes dense layers as the kernels of the PyTorch swap
run them: a Swin block's MLP, ``fc2(GELU(fc1(x)))`` (with the biases,
optionally plus a residual), or one projection, as ``rpe.matmul`` ops whose
weights are run-time arguments already packed in panels
(:func:`pack_weight`), a dynamic row count, the result written into the
caller's buffer (:mod:`swin_opt.dense` compiles it with ``swin-aot
--input``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["Linear", "linear_module", "reference", "DenseStack", "dense_module", "pack_weight",
           "dense_reference", "to_bf16", "from_bf16", "ACTIVATIONS"]

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
    #: The element type of x and the weight: "f32", or "bf16" (an f32 product).
    dtype: str = "f32"

    def __post_init__(self):
        unknown = set(self.steps) - set(STEPS)
        if unknown:
            raise ValueError(f"unknown epilogue steps {sorted(unknown)}")
        if self.dtype not in ("f32", "bf16"):
            raise ValueError(f"dtype must be f32 or bf16, got {self.dtype!r}")


def to_bf16(values: np.ndarray) -> np.ndarray:
    """The bits (uint16) of `values` rounded to bf16, to nearest even."""
    bits = np.ascontiguousarray(values, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16(bits: np.ndarray) -> np.ndarray:
    """The float32 values of bf16 `bits` (uint16)."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def _blob(values: np.ndarray, dtype: str = "f32") -> str:
    """A dense_resource blob: its alignment (the element's size, little
    endian), then the bytes; bf16 `values` are their bits (uint16)."""
    if dtype == "bf16":
        return "0x02000000" + np.ascontiguousarray(values, np.uint16).tobytes().hex().upper()
    return "0x04000000" + np.ascontiguousarray(values, np.float32).tobytes().hex().upper()


def linear_module(layer: Linear, weight: np.ndarray, bias: Optional[np.ndarray] = None) -> str:
    """The module of `layer`; `weight` [N, K] (or [K, N]) and `bias` [N]
    are baked in when the layer says so (the bias always is)."""
    m = "?" if layer.m is None else str(layer.m)
    k, n = layer.k, layer.n
    et = layer.dtype
    mn = f"tensor<{m}x{n}xf32>"
    wshape = f"{n}x{k}" if layer.transposed_weight else f"{k}x{n}"
    identity = "affine_map<(d0, d1) -> (d0, d1)>"
    column = "affine_map<(d0, d1) -> (d1)>"
    args = [f"%x: tensor<{m}x{k}x{et}>"]
    if not layer.constant_weight:
        args.append(f"%w: tensor<{wshape}x{et}>")
    if "residual" in layer.steps:
        args.append(f"%res: {mn}")
    args.append(f"%out: memref<{m}x{n}xf32>")
    empty = "tensor.empty() : " + mn if layer.m is not None else (
        f"tensor.empty(%rows) : {mn}")
    lines = ["  %zero = arith.constant 0.000000e+00 : f32"]
    if layer.m is None:
        lines += ["  %c0 = arith.constant 0 : index",
                  f"  %rows = tensor.dim %x, %c0 : tensor<{m}x{k}x{et}>"]
    if layer.constant_weight:
        lines.append(f"  %w = arith.constant dense_resource<weight> : tensor<{wshape}x{et}>")
    rhs = "%w"
    if layer.transposed_weight:
        lines += [f"  %wt0 = tensor.empty() : tensor<{k}x{n}x{et}>",
                  f"  %wt = linalg.transpose ins(%w : tensor<{n}x{k}x{et}>) outs(%wt0 : tensor<{k}x{n}x{et}>)"
                  " permutation = [1, 0]"]
        rhs = "%wt"
    lines += [f"  %e = {empty}",
              f"  %f = linalg.fill ins(%zero : f32) outs(%e : {mn}) -> {mn}",
              f"  %v0 = linalg.matmul ins(%x, {rhs} : tensor<{m}x{k}x{et}>, tensor<{k}x{n}x{et}>)"
              f" outs(%f : {mn}) -> {mn}"]

    def generic(index: int, extra: List[str], maps: List[str], body: List[str],
                first: str = "%a0") -> None:
        """An elementwise step on %v{index} (block argument ``first``) and ``extra``
        (%a1, ...)."""
        ins = [f"%v{index}"] + extra
        types = [mn] * len(ins)
        all_maps = ", ".join([identity, *maps, identity])
        block_args = ", ".join(f"{first if i == 0 else f'%a{i}'}: f32" for i in range(len(ins)))
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
            generic(index, [], [], ACTIVATIONS["gelu"] + ["linalg.yield %g : f32"], first="%s")
        elif step == "residual":
            generic(index, ["%res"], [identity], ["%s = arith.addf %a0, %a1 : f32",
                                                  "linalg.yield %s : f32"])
    resources = []
    if layer.constant_weight:
        resources.append(f"      weight: \"{_blob(weight, et)}\"")
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


def _gelu(y: np.ndarray) -> np.ndarray:
    """GELU's erf form in float64."""
    return 0.5 * y * (1.0 + np.vectorize(math.erf)(y / math.sqrt(2.0)))


def reference(layer: Linear, x: np.ndarray, weight: np.ndarray, bias: Optional[np.ndarray] = None,
              residual: Optional[np.ndarray] = None) -> np.ndarray:
    """The layer in float64."""
    w = weight.astype(np.float64)
    y = x.astype(np.float64) @ (w.T if layer.transposed_weight else w)
    for step in layer.steps:
        if step == "bias":
            y = y + bias
        elif step == "gelu":
            y = _gelu(y)
        elif step == "residual":
            y = y + residual
    return y


#===----------------------------------------------------------------------===#
# Dense stacks: a Swin block's MLP, a projection
#===----------------------------------------------------------------------===#

#: The activations a dense stack applies between its layers, as torch-mlir
#: writes them on the epilogue's value ``%s`` (result ``%g``): GELU's erf form
#: ``0.5 s (1 + erf(s / sqrt 2))`` (``nn.GELU()``) and its tanh form
#: ``0.5 s (1 + tanh(sqrt(2 / pi) (s + 0.044715 s^3)))``
#: (``nn.GELU(approximate="tanh")``).
ACTIVATIONS = {
    "gelu": [
        "%half = arith.constant 5.000000e-01 : f32",
        "%rsqrt2 = arith.constant 0.707106769 : f32",
        "%one = arith.constant 1.000000e+00 : f32",
        "%t = arith.mulf %s, %rsqrt2 : f32",
        "%erf = math.erf %t : f32",
        "%p = arith.addf %erf, %one : f32",
        "%h = arith.mulf %s, %half : f32",
        "%g = arith.mulf %h, %p : f32",
    ],
    "gelu_tanh": [
        "%half = arith.constant 5.000000e-01 : f32",
        "%sqrt2pi = arith.constant 0.797884583 : f32",
        "%cubic = arith.constant 4.471500e-02 : f32",
        "%one = arith.constant 1.000000e+00 : f32",
        "%s2 = arith.mulf %s, %s : f32",
        "%s3 = arith.mulf %s2, %s : f32",
        "%inner = math.fma %s3, %cubic, %s : f32",
        "%t = arith.mulf %inner, %sqrt2pi : f32",
        "%tanh = math.tanh %t : f32",
        "%p = arith.addf %tanh, %one : f32",
        "%h = arith.mulf %s, %half : f32",
        "%g = arith.mulf %h, %p : f32",
    ],
}


def _activation(y: np.ndarray, activation: str) -> np.ndarray:
    """``activation`` (:data:`ACTIVATIONS`) in float64."""
    if activation == "gelu_tanh":
        return 0.5 * y * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (y + 0.044715 * y ** 3)))
    return _gelu(y)


@dataclass(frozen=True)
class DenseStack:
    """Dense layers in a row: layer ``i`` maps ``widths[i]`` channels to
    ``widths[i + 1]``, adds its bias, and (all but the last) applies
    ``activation`` (:data:`ACTIVATIONS`: GELU's erf or tanh form); the last
    may add a residual. ``x`` is [M, widths[0]], M
    dynamic. Each weight, ``[N, K]`` as ``nn.Linear`` holds it, is packed in
    panels of ``panel_width`` columns (:func:`pack_weight`; the kernel's,
    three vectors of its lanes).

    A Swin block's MLP is ``(C, hidden, out)``: ``fc2(GELU(fc1(x)))``; one
    linear layer (a projection) is ``(K, N)``."""

    widths: Tuple[int, ...]
    panel_width: int
    activation: str = "gelu"

    def __post_init__(self):
        object.__setattr__(self, "widths", tuple(int(w) for w in self.widths))
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, "
                             f"got {self.activation!r}")
        if len(self.widths) < 2:
            raise ValueError(f"a dense stack needs at least 2 widths, got {list(self.widths)}")
        for name, value in [("widths", w) for w in self.widths] + [("panel_width", self.panel_width)]:
            if int(value) < 1:
                raise ValueError(f"{name} must be positive, got {value}")

    @property
    def layers(self) -> int:
        return len(self.widths) - 1

    def weight_shape(self, layer: int) -> tuple:
        """The packed shape of layer ``layer``'s ``[N, K]`` weight."""
        k, n = self.widths[layer], self.widths[layer + 1]
        return (-(-n // self.panel_width), k, self.panel_width)


def pack_weight(weight: np.ndarray, panel_width: int) -> np.ndarray:
    """A linear layer's ``[N, K]`` weight as rpe.matmul's packed operand
    ``[ceil(N / NR), K, NR]``: ``packed[p, k, r] = weight[p NR + r, k]``, zero
    past N (float32, contiguous)."""
    weight = np.asarray(weight, np.float32)
    n, k = weight.shape
    panels = -(-n // panel_width)
    padded = np.zeros((panels * panel_width, k), np.float32)
    padded[:n] = weight
    return np.ascontiguousarray(padded.reshape(panels, panel_width, k).transpose(0, 2, 1))


def _tensor(shape: Sequence[Optional[int]]) -> str:
    return "tensor<" + "x".join("?" if d is None else str(d) for d in shape) + "xf32>"


def dense_module(stack: DenseStack) -> str:
    """A module of two functions, each writing its result into ``%out``
    (MLIR's C interface, one library for every M)::

        @dense(x, w1, b1, ..., wL, bL, out)
        @dense_residual(x, w1, b1, ..., wL, bL, residual, out)

    ``w``s packed by :func:`pack_weight`, ``b``s [N] of their layer, ``x``
    [M, widths[0]], ``residual`` and ``out`` [M, widths[-1]]. Each layer is
    one rpe.matmul whose epilogue adds the bias and applies GELU (the
    residual, in the last), so the product tiles become results in
    registers; the hidden activations are the only temporaries."""
    widths = stack.widths
    column = "affine_map<(m, n) -> (n)>"
    identity = "affine_map<(m, n) -> (m, n)>"
    x_type, out_type = _tensor((None, widths[0])), _tensor((None, widths[-1]))

    def function(name: str, residual: bool) -> str:
        args = [f"%x: {x_type}"]
        for i in range(stack.layers):
            args += [f"%w{i}: {_tensor(stack.weight_shape(i))}", f"%b{i}: {_tensor((widths[i + 1],))}"]
        if residual:
            args.append(f"%res: {out_type}")
        args.append(f"%out: memref<?x{widths[-1]}xf32>")
        lines = [
            f"func.func @{name}({', '.join(args)}) attributes {{llvm.emit_c_interface}} {{",
            "  %c0 = arith.constant 0 : index",
            f"  %rows = tensor.dim %x, %c0 : {x_type}",
        ]
        value, value_type = "%x", x_type
        for i in range(stack.layers):
            last = i == stack.layers - 1
            w_type, b_type = _tensor(stack.weight_shape(i)), _tensor((widths[i + 1],))
            y_type = _tensor((None, widths[i + 1]))
            inputs, types, maps, block = [f"%b{i}"], [b_type], [column], ["%b: f32"]
            body = ["%s = arith.addf %acc, %b : f32"]
            if not last:
                body += ACTIVATIONS[stack.activation] + ["rpe.yield %g : f32"]
            elif residual:
                inputs.append("%res")
                types.append(out_type)
                maps.append(identity)
                block.append("%r: f32")
                body += ["%y = arith.addf %s, %r : f32", "rpe.yield %y : f32"]
            else:
                body.append("rpe.yield %s : f32")
            lines += [
                f"  %e{i} = tensor.empty(%rows) : {y_type}",
                f"  %y{i} = rpe.matmul ins({value}, %w{i} : {value_type}, {w_type})"
                f" epilogue({', '.join(inputs)} : {', '.join(types)}) outs(%e{i} : {y_type})"
                f" attributes {{epilogue_maps = [{', '.join(maps)}]}} {{",
                f"  ^bb0(%acc: f32, {', '.join(block)}):",
                *("    " + line for line in body),
                f"  }} -> {y_type}",
            ]
            value, value_type = f"%y{i}", y_type
        lines += [
            # Empty-tensor elimination makes %out the last product's
            # destination: no copy.
            f"  bufferization.materialize_in_destination {value} in restrict writable %out"
            f" : ({out_type}, memref<?x{widths[-1]}xf32>) -> ()",
            "  return",
            "}",
        ]
        return "\n".join(lines) + "\n"

    return function("dense", residual=False) + function("dense_residual", residual=True)


def dense_reference(x: np.ndarray, layers: Sequence[Tuple[np.ndarray, Optional[np.ndarray]]],
                    residual: Optional[np.ndarray] = None,
                    activation: str = "gelu") -> np.ndarray:
    """A :class:`DenseStack` in float64: ``layers`` are its ``(weight [N, K],
    bias [N] or None)``; ``activation`` after all but the last."""
    y = x.astype(np.float64)
    for i, (w, b) in enumerate(layers):
        y = y @ w.astype(np.float64).T
        if b is not None:
            y = y + b
        if i < len(layers) - 1:
            y = _activation(y, activation)
    return y if residual is None else y + residual
