"""Compiled dense layers (:mod:`swin_opt.dense`) as torch operators: the MLP
of Swin blocks (``swin_opt::mlp``, :mod:`.mlp`) and one linear layer
(``swin_opt::dense``, the projections' inference path,
:func:`.projections.linear`). This module holds what both share: the
kernels' configuration strings, their builds, the packed weights and the
call.

Schema::

    swin_opt::dense(Tensor x, Tensor weight, Tensor? bias, Tensor? residual,
                    str config) -> Tensor

computes ``x weightᵀ + bias (+ residual)`` on float32 CPU tensors of any
leading shape, through the :class:`swin_opt.dense.DenseKernel` that
``config`` names (:func:`dense_key`: the layers' widths and the build
options, one library per configuration and CPU for every row count, built
on first use, then from the disk cache). Configuration strings keep graphs
captured by ``torch.compile`` and ``torch.export`` free of Python objects;
the operators have fake implementations and no backward (under autograd
their callers run torch's code or ``swin_opt::linear``).

The kernels take their weights packed in panels. Each weight tensor met is
packed once per version: the packed copy is cached with the tensor's
``_version``, which every in-place change of it bumps (``load_state_dict``,
optimizer steps, ``copy_``, ``torch.nn.init``), and its memory, which a
conversion (``module.half()``, ``.float()``, ``.to(...)``) replaces; a new
tensor (``module.weight = ...``) is packed anew (:class:`.tensors.WeightStamp`).
Writing through ``.data`` in place bumps nothing: after
``w.data.copy_(...)``, call :func:`forget_packed_weights`. The packed copies
hold as much memory again as the weights they pack (and, after a
conversion, the old weights' until their next call).
"""

from __future__ import annotations

import json
import threading
from typing import NamedTuple, Optional, Sequence, Tuple

from ..dense import compile_dense
from ..errors import CompileError, SwinAotNotFoundError
from .tensors import WeightStamp, once, require_torch
from .tracing import apply_trace_constants, trace_constant

try:
    import torch
except ImportError:  # swin_opt.torch imports without PyTorch; its entry points need it
    torch = None

__all__ = ["dense_key", "kernel_for", "DenseSpec", "resolve", "packed_weight",
           "forget_packed_weights", "run", "linear_inference", "register", "OPTIONS"]

#: The compile options of swap_attention a dense kernel takes.
OPTIONS = ("cpu", "parallel", "cache_dir")

_lock = threading.Lock()
_kernels: dict = {}  # config string -> DenseKernel
#: weight tensor -> (panel width, WeightStamp of the weight, packed copy)
_packed = None
#: resolve's arguments -> its DenseSpec (failures too: a build is not retried)
_specs: dict = {}
#: width -> zeros, the bias of a layer without one
_zeros: dict = {}


# --------------------------------------------------------------------------- #
# Kernels
# --------------------------------------------------------------------------- #
def dense_key(widths: Sequence[int], activation: str = "gelu", **options) -> str:
    """The operators' ``config`` string of the kernel of the layers ``widths`` with
    ``activation`` between them (:class:`swin_opt.dense.DenseConfig`) and
    :func:`swin_opt.dense.compile_dense`'s ``options`` (cpu, parallel, cache_dir;
    others are ignored)."""
    spec = {"dense": [int(w) for w in widths],
            "options": {k: (str(v) if k == "cache_dir" else v) for k, v in sorted(options.items())
                        if v is not None and k in OPTIONS}}
    if activation != "gelu":
        spec["activation"] = activation
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))


def kernel_for(key: str):
    """The :class:`swin_opt.dense.DenseKernel` a config string names (compiled on first use)."""
    kern = _kernels.get(key)
    if kern is None:
        try:
            spec = json.loads(key)
            widths = [int(w) for w in spec["dense"]]
            options = dict(spec["options"], activation=spec.get("activation", "gelu"))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"swin_opt: malformed dense kernel configuration {key!r}: {exc}") from None
        kern = compile_dense(widths, **options)
        with _lock:
            kern = _kernels.setdefault(key, kern)
    return kern


class DenseSpec(NamedTuple):
    """The callers' view of a kernel: its config string, or why there is none."""

    key: str
    error: Optional[str]


@trace_constant
def resolve(widths: Tuple[int, ...], options: tuple, activation: str = "gelu") -> DenseSpec:
    """The kernel of ``widths`` (``activation`` between the layers) and
    swap_attention's compile ``options`` (sorted pairs), built once per process;
    never raises (a configuration without a kernel has ``error`` set). A
    :func:`~.tracing.trace_constant`: dynamo runs it at trace time only."""
    memo = (widths, options, activation)
    spec = _specs.get(memo)
    if spec is not None:
        return spec
    key = dense_key(widths, activation, **dict(options))
    try:
        kernel_for(key)
        spec = DenseSpec(key, None)
    except (CompileError, SwinAotNotFoundError, ValueError, OSError) as exc:
        spec = DenseSpec(key, f"no dense kernel: {exc}")
    with _lock:
        return _specs.setdefault(memo, spec)


# --------------------------------------------------------------------------- #
# Packed weights
# --------------------------------------------------------------------------- #
def _pack(weight, panel_width: int):
    """``[N, K]`` -> ``[ceil(N / NR), K, NR]``, zero past N (float32, contiguous)."""
    n, k = weight.shape
    panels = -(-n // panel_width)
    padded = weight.new_zeros((panels * panel_width, k))
    padded[:n] = weight
    return padded.view(panels, panel_width, k).transpose(1, 2).contiguous()


def packed_weight(weight, panel_width: int):
    """``weight`` in the kernel's panels, from the cache when it has not changed
    (:class:`.tensors.WeightStamp`; see the module docstring). An inference
    tensor keeps no version: it is packed on every call."""
    global _packed
    versioned = not weight.is_inference()
    with _lock:
        if _packed is None:
            from torch.utils.weak import WeakIdKeyDictionary

            _packed = WeakIdKeyDictionary()
        cached = _packed.get(weight) if versioned else None
    if cached is not None and cached[0] == panel_width and cached[1].matches([weight]):
        return cached[2]
    packed = _pack(weight.detach(), panel_width)
    if versioned:
        with _lock:
            _packed[weight] = (panel_width, WeightStamp([weight]), packed)
    return packed


def forget_packed_weights() -> None:
    """Drop the packed copies of the weights: each is packed again on its next
    call (after writing a weight through ``.data``, which keeps its version)."""
    with _lock:
        if _packed is not None:
            _packed.clear()


def _bias(bias, width: int):
    if bias is not None:
        return bias.detach().contiguous()
    with _lock:
        return _zeros.setdefault(width, torch.zeros(width))


# --------------------------------------------------------------------------- #
# The call
# --------------------------------------------------------------------------- #
def _check(op: str, name: str, t, shape) -> None:
    if t.dtype != torch.float32 or t.device.type != "cpu" or tuple(t.shape) != tuple(shape):
        raise ValueError(f"swin_opt::{op}: {name} must be a float32 CPU tensor of shape "
                         f"{list(shape)}, got {t.dtype} {list(t.shape)} on {t.device}")


def run(op: str, x, layers: Sequence[Tuple[str, object, object]], residual, config: str):
    """The operators' implementation: the kernel ``config`` names on ``x`` [..., widths[0]]
    and ``layers``, each ``(name of its weight, weight [N, K], bias [N] or None)``,
    plus ``residual`` [..., widths[-1]] (or None); returns [..., widths[-1]]. ``op``
    names the operator in errors."""
    kern = kernel_for(config)
    cfg = kern.config
    widths = cfg.widths
    if len(layers) != len(widths) - 1:
        raise ValueError(f"swin_opt::{op}: the kernel {config!r} has {len(widths) - 1} layers, "
                         f"given {len(layers)}")
    if x.dim() < 1:
        raise ValueError(f"swin_opt::{op}: x must have a channel axis")
    lead = tuple(x.shape[:-1])
    x2 = x.detach().reshape(-1, x.shape[-1]).contiguous()
    rows = x2.shape[0]
    _check(op, "x", x2, (rows, widths[0]))
    for i, (name, weight, bias) in enumerate(layers):
        _check(op, name, weight, (widths[i + 1], widths[i]))
        if bias is not None:
            _check(op, f"{name}'s bias", bias, (widths[i + 1],))
    res = None
    if residual is not None:
        res = residual.detach().reshape(-1, residual.shape[-1]).contiguous()
        _check(op, "residual", res, (rows, widths[-1]))
    out = torch.empty((rows, widths[-1]), dtype=torch.float32)
    if rows:
        pw = cfg.panel_width
        arguments = []
        keep = []  # the packed weights and biases live until the call returns
        for i, (_, weight, bias) in enumerate(layers):
            w, b = packed_weight(weight, pw), _bias(bias, widths[i + 1])
            keep += (w, b)
            arguments.append((w.data_ptr(), b.data_ptr()))
        kern.call_addresses(rows, x2.data_ptr(), arguments, None if res is None else res.data_ptr(),
                            out.data_ptr(), threads=torch.get_num_threads())
    return out.view(*lead, widths[-1])


def linear_inference(x, weight, bias, residual=None):
    """``x weightᵀ + bias (+ residual)`` on the layer's kernel (default build
    options: this CPU, parallel, the default kernel cache), or None where it has
    none (the build failed: said once by the caller's fallback). Float32 CPU
    tensors, no autograd (the caller's checks); under ``torch.compile`` the
    call is ``swin_opt::dense``."""
    spec = resolve((int(weight.shape[1]), int(weight.shape[0])), ())
    if spec.error is not None:
        return None
    if torch.compiler.is_compiling():
        return torch.ops.swin_opt.dense(x, weight, bias, residual, spec.key)
    return run("dense", x, (("weight", weight, bias),), residual, spec.key)


@once
def register() -> None:
    """Define ``swin_opt::dense`` (once per process; needs torch)."""
    require_torch()
    from .ops import _no_grad_error

    @torch.library.custom_op("swin_opt::dense", mutates_args=(), schema=(
        "(Tensor x, Tensor weight, Tensor? bias, Tensor? residual, str config) -> Tensor"))
    def dense_op(x, weight, bias, residual, config):
        return run("dense", x, (("weight", weight, bias),), residual, config)

    @dense_op.register_fake
    def _(x, weight, bias, residual, config):
        return x.new_empty((*x.shape[:-1], weight.shape[0]))

    setup, backward = _no_grad_error("dense")
    dense_op.register_autograd(backward, setup_context=setup)
    apply_trace_constants()
