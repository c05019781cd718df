"""Helpers shared by the tests, ``python -m swin_opt verify``, the examples and
the benchmarks.

They generate random inputs for a kernel configuration, compute the float64
reference for them with :mod:`swin_opt.reference`, and compare; and they
redraw a PyTorch model's weights so that comparing a swapped model with its
original can fail (:func:`sharpen_weights`; torch is imported there only).

Tolerances (``max|out - ref| <= TOLERANCE[dtype] * max(1, max|ref|)``):

* float32: ``1e-5``. The kernel computes in float32 (unit roundoff 6e-8);
  logits, the softmax normalisation and the ``p @ v`` sums each lose a few ulps.
* float16: ``2e-3``. Inputs are rounded to float16 *before* computing the
  reference, so only the kernel's own rounding counts: the output is stored as
  float16 (half an ulp = 2**-11 ~ 4.9e-4 relative) and kernels may keep the
  probabilities in float16 as well (another ~2**-11 of ``max|v|``); 2e-3 is about
  4 float16 ulps at 1.0.
* bfloat16: ``1.6e-2``, the same reasoning with bfloat16's 8-bit significand
  (half an ulp = 2**-9 ~ 3.9e-3): about 4 bfloat16 ulps at 1.0.

The output of attention is a convex combination of rows of ``v``, so
``max|ref|`` bounds the magnitude of every output and the error budget scales
with it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Tuple

import numpy as np

from . import reference as ref
from .config import KernelConfig
from .dtypes import bf16_bits_to_float32, float32_to_bf16_bits
from .kernel import Kernel, is_torch_tensor

__all__ = [
    "TOLERANCE",
    "Inputs",
    "to_float64",
    "to_storage",
    "round_to_dtype",
    "random_table",
    "random_inputs",
    "reference_output",
    "compare",
    "Check",
    "check_against_reference",
    "sharpen_weights",
    "weighted_gradients",
]

#: Relative tolerance per kernel dtype, see the module docstring.
TOLERANCE = {"f32": 1e-5, "f16": 2e-3, "bf16": 1.6e-2}


def to_storage(x32, code: str) -> np.ndarray:
    """Convert real values to the kernel's NumPy storage (``uint16`` bits for bf16)."""
    x32 = np.asarray(x32, dtype=np.float32)
    if code == "f32":
        return np.ascontiguousarray(x32)
    if code == "f16":
        return np.ascontiguousarray(x32.astype(np.float16))
    if code == "bf16":
        return float32_to_bf16_bits(x32)
    raise ValueError(f"unknown dtype code {code!r}")


def to_float64(x, code: str) -> np.ndarray:
    """Decode kernel storage (NumPy or torch) to float64."""
    if is_torch_tensor(x):
        return x.detach().cpu().double().numpy()
    x = np.asarray(x)
    if code == "bf16" and (x.dtype == np.uint16 or x.dtype.name == "bfloat16"):
        return bf16_bits_to_float32(x).astype(np.float64)
    return x.astype(np.float64)


def round_to_dtype(x32, code: str) -> np.ndarray:
    """float32 values rounded to ``code`` and widened back to float32 (exact in both)."""
    return to_float64(to_storage(x32, code), code).astype(np.float32)


def random_table(config: KernelConfig, *, seed: int = 0, std: float = 1.0) -> np.ndarray:
    """A float32 bias table whose values are exactly representable in the kernel dtype.

    (So it does not matter whether a kernel rounds a baked float32 table to its
    storage type.)  ``std=1`` is much larger than trained Swin tables, which makes
    indexing mistakes visible.
    """
    rng = np.random.default_rng(seed + 7919)
    t = (rng.standard_normal(config.table_rows * config.heads) * std).astype(np.float32)
    return round_to_dtype(t.reshape(config.table_rows, config.heads), config.dtype)


@dataclasses.dataclass
class Inputs:
    """Kernel arguments plus their exact float64 values."""

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    table: Optional[np.ndarray]  # kernel storage, None for baked tables
    table64: np.ndarray
    pad_qkv: Optional[np.ndarray] = None  # float32 [3, C] (token layout only)
    #: The kernel takes one qkv map ``[batch, L, 3, heads, head_dim]`` built from q, k, v.
    packed_qkv: bool = False

    def args(self) -> tuple:
        if self.packed_qkv:
            batch, tokens, _ = self.q.shape
            heads = self.table64.shape[1]
            qkv = np.stack([self.q, self.k, self.v], axis=2).reshape(batch, tokens, 3, heads, -1)
            return (qkv,) if self.table is None else (qkv, self.table)
        return (self.q, self.k, self.v) if self.table is None else (self.q, self.k, self.v, self.table)


def random_inputs(kernel: Kernel, n: int, *, seed: int = 0) -> Inputs:
    """Random q/k/v (standard normal, rounded to the kernel dtype) for ``n`` windows/images."""
    cfg = kernel.config
    rng = np.random.default_rng(seed)
    # A packed kernel's one input is [batch, L, 3, heads, head_dim]: q, k and v
    # are maps of the output's shape, packed by Inputs.args.
    shape = kernel.output_shape(n) if cfg.packed_qkv else kernel.input_shape(n)
    q, k, v = (to_storage(rng.standard_normal(shape, dtype=np.float32), cfg.dtype) for _ in range(3))
    if kernel.table is not None:
        table, table64 = None, kernel.table.astype(np.float64)
    else:
        t32 = random_table(cfg, seed=seed)
        table, table64 = to_storage(t32, cfg.dtype), t32.astype(np.float64)
    pad = None
    if cfg.layout == "tokens":
        pad = rng.standard_normal((3, cfg.channels), dtype=np.float32)
        pad = round_to_dtype(pad, cfg.dtype)
    return Inputs(q, k, v, table, table64, pad, packed_qkv=cfg.packed_qkv)


def reference_output(config: KernelConfig, q, k, v, table64, pad_qkv=None) -> np.ndarray:
    """Float64 reference for a kernel configuration (inputs in kernel storage)."""
    q64, k64, v64 = (to_float64(t, config.dtype) for t in (q, k, v))
    if config.layout == "tokens":
        return ref.swin_block_attention_tokens(
            q64, k64, v64, table64, resolution=config.resolution, window=config.window,
            shift=config.shift, scale=config.scale, padding=config.padding,
            partition=config.partition, pad_qkv=None if pad_qkv is None else np.asarray(pad_qkv, dtype=np.float64))
    if config.class_token:
        bias = ref.class_token_lookup(table64, config.window)
    else:
        bias = ref.lookup(table64, config.window)
    mask = None
    if config.resolution is not None and any(config.shift):
        mask = ref.shift_mask(config.padded_resolution, config.window, config.shift)
    return ref.window_attention(q64, k64, v64, bias=bias, mask=mask, scale=config.scale)


def compare(out, expected: np.ndarray, code: str) -> Tuple[float, float]:
    """Return ``(max_abs_error, allowed)`` for a kernel output vs the float64 reference."""
    got = to_float64(out, code)
    if got.shape != expected.shape:
        raise AssertionError(f"output shape {got.shape} != reference shape {expected.shape}")
    err = float(np.max(np.abs(got - expected))) if got.size else 0.0
    if math.isnan(err) or not np.all(np.isfinite(got)):
        err = math.inf
    scale = max(1.0, float(np.max(np.abs(expected)))) if expected.size else 1.0
    return err, TOLERANCE[code] * scale


@dataclasses.dataclass
class Check:
    """A kernel's output on random inputs, its reference and the comparison."""

    out: np.ndarray
    expected: np.ndarray
    error: float
    allowed: float

    @property
    def passed(self) -> bool:
        return self.error <= self.allowed


def check_against_reference(kernel: Kernel, n: int, *, seed: int = 0) -> Check:
    """Runs ``kernel`` on :func:`random_inputs` for ``n`` windows/images and compares
    the output with :func:`reference_output` (see :func:`compare`)."""
    inp = random_inputs(kernel, n, seed=seed)
    out = kernel(*inp.args(), pad_qkv=inp.pad_qkv)
    expected = reference_output(kernel.config, inp.q, inp.k, inp.v, inp.table64, inp.pad_qkv)
    error, allowed = compare(out, expected, kernel.config.dtype)
    return Check(out, expected, error, allowed)


def sharpen_weights(model, seed: int = 0):
    """Redraw every parameter of a torch ``model`` in place (seeded), with larger
    variances than the frameworks' inits; returns it in eval mode.

    Bias tables ~ N(0, 1), linear weights ~ N(0, 4/fan_in), biases ~ N(0, 1/4),
    SwinV2 logit scales with ``exp`` in [2, 200] (clamped at 100 by the
    models), norm scales in [0.5, 1.5]: the attention is sharp, so a missing or
    misplaced bias or mask shows far above the tolerances. No parameter keeps
    a constant init: the frameworks start norm scales at 1 and biases at 0,
    and timm's SwinV2 zero-initialises the post-norms of its residual
    branches, which would keep the attention from reaching the output at all
    (a comparison with the original could then not fail).
    """
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "relative_position_bias_table" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
            elif name.endswith("logit_scale"):  # SwinV2: s_h = exp(.) in [2, 200]
                p.copy_(torch.empty(p.shape).uniform_(math.log(2), math.log(200), generator=gen))
            elif p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=gen) * (2.0 / p.shape[1] ** 0.5))
            elif "bias" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
            elif p.dim() == 1 and name.endswith("weight"):  # norm scales
                p.copy_(torch.empty(p.shape).uniform_(0.5, 1.5, generator=gen))
            elif p.numel() > 1 and bool((p == p.flatten()[0]).all()):  # another constant init
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    return model.eval()


def weighted_gradients(model, x, output=None):
    """``(out, dx, grads)`` of ``sum(w * out)`` for a torch ``model`` on a copy of
    ``x``: ``w`` runs from -1 to 1 over the output's elements, so each element
    weighs differently (a permuted or misplaced output cannot pass), ``dx`` is the
    input's gradient and ``grads`` maps each parameter name to its gradient
    (parameters without one are left out). ``output`` picks the tensor from the
    model's result (e.g. ``lambda r: r.last_hidden_state``)."""
    import torch

    model.zero_grad()
    xi = x.detach().clone().requires_grad_()
    out = model(xi)
    if output is not None:
        out = output(out)
    (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out.detach(), xi.grad.clone(), grads
