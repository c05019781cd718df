"""Kernels on CPU torch tensors: :func:`attention` (zero-copy calls) and
:func:`compile_kernel` (an in-process cache of compiled kernels), and the
checks of tensors and of torch itself (:func:`require_torch`) the other
modules of :mod:`swin_opt.torch` share."""

from __future__ import annotations

import functools
import math
import threading
from typing import Dict, Optional

from .. import build
from ..dtypes import normalize_dtype
from ..geometry import normalize_window
from ..kernel import Kernel

try:
    import torch
except ImportError:  # swin_opt.torch imports without PyTorch; its entry points need it
    torch = None


def require_torch() -> None:
    """ImportError with what to install, when PyTorch is not importable."""
    if torch is None:
        raise ImportError("swin_opt.torch needs PyTorch (pip install torch)")


def once(fn):
    """``fn()`` (no arguments) run by the first call that returns, once per process:
    later and concurrent calls return without running it (they wait for the
    first); a call that raises leaves it to the next. The operators' registrations
    use it (:func:`.ops.register`, :func:`.mlp.register`)."""
    lock = threading.Lock()
    done = False

    @functools.wraps(fn)
    def run_once() -> None:
        nonlocal done
        if done:
            return
        with lock:
            if not done:
                fn()
                done = True

    return run_once


# --------------------------------------------------------------------------- #
# Tensor-level helpers
# --------------------------------------------------------------------------- #
class WeightStamp:
    """What a value computed from some tensors (a packed weight, a table) is
    valid for: each tensor's memory, ``_version``, shape, strides and dtype.

    The stamp holds an alias of each tensor (``detach()``), so that the memory
    it was taken of stays allocated while the stamp lives: a tensor that
    replaces one through ``.data`` (``module.half()`` then ``.float()``,
    ``module.to(...)``, ``param.data = ...``), which keeps the tensor's identity
    and ``_version``, cannot take the freed address and pass for the old one.
    An in-place change bumps ``_version``. Writing through ``.data`` changes
    neither: after that, the caches must be dropped by hand
    (:func:`.dense.forget_packed_weights` and the like). The alias costs no
    memory while the tensor is still the one stamped; after a replacement it
    keeps the old memory alive until the stamp is dropped or renewed."""

    __slots__ = ("_aliases", "_marks")

    def __init__(self, tensors):
        tensors = list(tensors)
        self._aliases = [t.detach() for t in tensors]
        self._marks = [self._mark(t) for t in tensors]

    @staticmethod
    def _mark(t) -> tuple:
        return (t.data_ptr(), t._version, tuple(t.shape), tuple(t.stride()), t.dtype, t.device)

    def matches(self, tensors) -> bool:
        """Whether ``tensors`` are, in order, the stamped tensors unchanged."""
        tensors = list(tensors)
        return len(tensors) == len(self._marks) and all(
            self._mark(t) == mark for t, mark in zip(tensors, self._marks))


def dtype_name(dtype) -> Optional[str]:
    """``"float32"``/``"float16"``/``"bfloat16"`` for a torch dtype a kernel takes, else None."""
    return {torch.float32: "float32", torch.float16: "float16",
            torch.bfloat16: "bfloat16"}.get(dtype)


def _check_tensor(x, name: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.device.type != "cpu":
        raise ValueError(f"{name} is on {x.device}; swin_opt kernels run on CPU tensors only")
    if x.layout != torch.strided:
        raise ValueError(f"{name} must be a dense (strided) tensor, got layout {x.layout}")
    if not x.is_contiguous():
        raise ValueError(f"{name} is not contiguous (strides {tuple(x.stride())}); the kernel "
                         "reads memory in place and never copies: call .contiguous() first")
    if x.requires_grad and torch.is_grad_enabled():
        raise RuntimeError(f"{name} requires grad: swin_opt kernels have no backward; run under "
                           "torch.no_grad() / torch.inference_mode() or pass .detach()")


_kernel_cache: Dict[tuple, Kernel] = {}
_kernel_lock = threading.Lock()


def compile_kernel(window, heads: int, head_dim: int, **options) -> Kernel:
    """:func:`swin_opt.compile` with an in-process cache (one :class:`Kernel` per configuration).

    ``options`` are those of :func:`swin_opt.compile` (``table`` excepted, since
    a baked table would make the cache key depend on weights).
    """
    if "table" in options:
        raise TypeError("compile_kernel does not bake tables; use swin_opt.compile(table=...)")
    key = (normalize_window(window), int(heads), int(head_dim),
           tuple(sorted((k, _freeze(v)) for k, v in options.items())))
    with _kernel_lock:
        kern = _kernel_cache.get(key)
    if kern is None:
        kern = build.compile(window, heads, head_dim, **options)
        with _kernel_lock:
            kern = _kernel_cache.setdefault(key, kern)
    return kern


def _freeze(v):
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    return str(v) if not isinstance(v, (int, float, bool, type(None), str)) else v


def attention(q, k, v, table=None, kernel=None, *, window=None, out=None, pad_qkv=None,
              **compile_options):
    """Run window attention on CPU torch tensors, zero-copy.

    ``q, k, v``: ``[num_windows, heads, N, head_dim]`` (or, for a token-layout
    ``kernel``, ``[batch, H*W, C]``), C-contiguous, all of one dtype
    (float32 / float16 / bfloat16), on the CPU.  ``table``: the
    ``[prod(2W-1), heads]`` relative position bias table in the same dtype
    (omit for kernels with a baked table).  ``out`` (optional) is written in
    place and returned.

    ``kernel``: a :class:`swin_opt.Kernel`; when omitted one is compiled (and
    cached) for the window-layout shape of ``q`` with ``window`` (default: the
    square window with ``N`` tokens) and ``compile_options`` (``scale``,
    ``resolution``, ``shift``, ``cpu``, ...; see :func:`swin_opt.compile`).

    Tensors are handed to the kernel by pointer: nothing is copied, and
    non-contiguous, non-CPU or wrongly typed tensors raise instead of being
    converted.  There is no autograd: inputs that require grad raise unless
    grad mode is off.
    """
    require_torch()
    for name, x in (("q", q), ("k", k), ("v", v)):
        _check_tensor(x, name)
    if q.dtype != k.dtype or q.dtype != v.dtype:
        raise TypeError(f"q, k, v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    dname = dtype_name(q.dtype)
    if dname is None:
        raise TypeError(f"unsupported dtype {q.dtype}; expected float32, float16 or bfloat16")
    for name, x in (("table", table), ("out", out), ("pad_qkv", pad_qkv)):
        if x is not None:
            _check_tensor(x, name)
    if kernel is None:
        if q.dim() != 4:
            raise ValueError("without a kernel, q must be [num_windows, heads, N, head_dim], "
                             f"got shape {tuple(q.shape)}")
        _, heads, n, head_dim = q.shape
        if window is None:
            side = math.isqrt(n)
            if side * side != n:
                raise ValueError(f"N={n} is not a square; pass window=(Wh, Ww)")
            window = (side, side)
        kernel = compile_kernel(window, heads, head_dim, dtype=dname, **compile_options)
    elif compile_options or window is not None:
        raise TypeError("window / compile options are only used when no kernel is given")
    if normalize_dtype(dname) != kernel.config.dtype:
        raise TypeError(f"tensors are {q.dtype} but the kernel was compiled for "
                        f"{kernel.config.dtype}")
    if kernel.config.layout == "tokens":
        return kernel(q, k, v, table, pad_qkv=pad_qkv, out=out)
    return kernel(q, k, v, table, out=out)
