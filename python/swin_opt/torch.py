"""PyTorch integration: call kernels on torch tensors and swap the attention core of Swin models.

Nothing here imports :mod:`torch` at module import time; every entry point
imports it on first use.

Tensors
-------
:func:`attention` runs a kernel on CPU torch tensors without copying them
(contiguous tensors of the kernel's dtype are passed by pointer; anything else
is an error, never a silent copy) and returns a torch tensor (optionally the
``out`` tensor you pass).

Models
------
:func:`swap_attention` walks a model (or a single module) and replaces the
attention core ``softmax(scale * q k^T + bias (+ shift mask)) v`` of every Swin
window-attention module it recognises with a compiled kernel, keeping the qkv
and output projections in torch:

=====================  ==========================================================
framework              modules patched
=====================  ==========================================================
timm                   ``timm.models.swin_transformer.WindowAttention`` (window
                       layout; the shift mask it is given is identified as
                       Swin's ``(resolution, shift)`` mask) and, when
                       ``layout="auto"``, its parent ``SwinTransformerBlock._attn``
                       (token layout: roll/pad/partition done by the kernel)
timm (SwinV2)          ``timm.models.swin_transformer_v2.WindowAttention`` and
                       ``SwinTransformerV2Block._attn``, as for timm above
torchvision            ``torchvision.models.swin_transformer.ShiftedWindowAttention``
                       and ``...V2``; token layout when the map is at least one
                       window on both axes, else window layout with torch-side
                       pad/roll/partition
transformers (>= 5)    ``transformers.models.swin.modeling_swin.SwinAttention``
transformers (4.x)     ``transformers.models.swin.modeling_swin.SwinSelfAttention``
=====================  ==========================================================

SwinV2 modules (cosine attention, continuous position bias) run a scale-1
kernel on ``s_h q/|q|`` and ``k/|k|`` with the table their ``cpb_mlp`` gives
(see :func:`_cosine_qk`).

Patched modules fall back to their original forward (or raise, with
``fallback=False``) whenever the kernel does not apply: training mode,
autograd (run under :func:`torch.no_grad` / :func:`torch.inference_mode`),
non-CPU tensors, dtypes other than float32/float16/bfloat16, scripting /
tracing / ``torch.compile``, a mask that is not a Swin shift mask, requested
attention probabilities or head masks (transformers).  :func:`patch_stats`
reports how often each module used the kernel and why it fell back;
:func:`restore_attention` undoes the patch.

:func:`swap_attention` sets ``KMP_BLOCKTIME=0`` unless already set, so that
the kernels' OpenMP threads (LLVM libomp) do not spin on the cores torch's
own OpenMP threads need next.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import os
import sys
import threading
import types
import warnings
import weakref
from typing import Any, Dict, List, Optional

import numpy as np

from . import compiler as _compiler
from . import reference as _ref

__all__ = [
    "attention",
    "compile_kernel",
    "match_shift_mask",
    "swap_attention",
    "restore_attention",
    "patch_stats",
    "KernelUnavailable",
]

_TORCH_DTYPES = ("float32", "float16", "bfloat16")
_COMPILE_OPTIONS = ("cpu", "parallel", "cache_dir", "target")


def _torch():
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - exercised only without torch
        raise ImportError("swin_opt.torch needs PyTorch (pip install torch)") from exc
    return torch


class KernelUnavailable(RuntimeError):
    """Raised by patched modules with ``fallback=False`` when the kernel cannot be used."""


# --------------------------------------------------------------------------- #
# Tensor-level helpers
# --------------------------------------------------------------------------- #
def _dtype_name(torch, dtype) -> Optional[str]:
    return {torch.float32: "float32", torch.float16: "float16",
            torch.bfloat16: "bfloat16"}.get(dtype)


def _check_tensor(torch, x, name: str) -> None:
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


_kernel_cache: Dict[tuple, "_compiler.Kernel"] = {}
_kernel_lock = threading.Lock()


def compile_kernel(window, heads: int, head_dim: int, **options) -> "_compiler.Kernel":
    """:func:`swin_opt.compile` with an in-process cache (one :class:`Kernel` per configuration).

    ``options`` are those of :func:`swin_opt.compile` (``table`` excepted, since
    a baked table would make the cache key depend on weights).
    """
    if "table" in options:
        raise TypeError("compile_kernel does not bake tables; use swin_opt.compile(table=...)")
    key = (_ref.normalize_window(window), int(heads), int(head_dim),
           tuple(sorted((k, _freeze(v)) for k, v in options.items())))
    with _kernel_lock:
        kern = _kernel_cache.get(key)
    if kern is None:
        kern = _compiler.compile(window, heads, head_dim, **options)
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
    torch = _torch()
    for name, x in (("q", q), ("k", k), ("v", v)):
        _check_tensor(torch, x, name)
    if q.dtype != k.dtype or q.dtype != v.dtype:
        raise TypeError(f"q, k, v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    dname = _dtype_name(torch, q.dtype)
    if dname is None:
        raise TypeError(f"unsupported dtype {q.dtype}; expected float32, float16 or bfloat16")
    for name, x in (("table", table), ("out", out), ("pad_qkv", pad_qkv)):
        if x is not None:
            _check_tensor(torch, x, name)
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
    if _compiler.normalize_dtype(dname) != kernel.config.dtype:
        raise TypeError(f"tensors are {q.dtype} but the kernel was compiled for "
                        f"{kernel.config.dtype}")
    if kernel.config.layout == "tokens":
        return kernel(q, k, v, table, pad_qkv=pad_qkv, out=out)
    return kernel(q, k, v, table, out=out)


# --------------------------------------------------------------------------- #
# Shift-mask identification
# --------------------------------------------------------------------------- #
#: Returned by :func:`match_shift_mask` for an all-zero mask (plain W-MSA).
NO_MASK = "no-mask"


def _divisors(n: int):
    return [d for d in range(1, n + 1) if n % d == 0]


def match_shift_mask(mask, window) -> Any:
    """Identify a ``[nW, N, N]`` attention mask as Swin's shifted-window mask.

    Returns ``((Hp, Wp), (sh, sw))`` such that a kernel compiled with
    ``resolution=(Hp, Wp), shift=(sh, sw)`` (2-D ``window``) applies exactly
    this mask (compared element by element with
    :func:`swin_opt.reference.shift_mask`), :data:`NO_MASK` for an all-zero
    mask, or ``None`` when it is not such a mask.
    """
    w = _ref.normalize_window(window)
    if len(w) != 2:
        raise ValueError("match_shift_mask handles 2-D windows")
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(mask, torch.Tensor):
        m = mask.detach().to("cpu").double().numpy()
    else:
        m = np.asarray(mask, dtype=np.float64)
    n = w[0] * w[1]
    if m.ndim != 3 or m.shape[1:] != (n, n) or m.shape[0] < 1:
        return None
    if not m.any():
        return NO_MASK
    wh, ww = w
    last = m[-1]  # bottom-right window: it is split wherever any window is
    rows = np.flatnonzero(last[0, ::ww][:wh])
    cols = np.flatnonzero(last[0, :ww])
    sh = wh - int(rows[0]) if rows.size else 0
    sw = ww - int(cols[0]) if cols.size else 0
    if sh >= wh or sw >= ww:  # token 0 masked from itself: not a shift mask
        return None
    nw_total = m.shape[0]
    for nh in _divisors(nw_total):
        res = (nh * wh, (nw_total // nh) * ww)
        # the shift the compiled kernel will actually use (Swin's small-map rule)
        eff = tuple(0 if r <= ws else s for r, ws, s in zip(res, w, (sh, sw)))
        if eff != (sh, sw) or not any(eff):
            continue
        if np.array_equal(_ref.shift_mask(res, w, eff), m):
            return res, eff
    return None


class _MaskMatcher:
    """Caches :func:`match_shift_mask` by tensor identity and by content."""

    def __init__(self, limit: int = 64):
        self._lock = threading.Lock()
        self._by_id: Dict[int, tuple] = {}
        self._by_content: "collections.OrderedDict" = collections.OrderedDict()
        self._limit = limit

    def match(self, mask, window):
        torch = _torch()
        window = tuple(window)
        key = id(mask)
        with self._lock:
            hit = self._by_id.get(key)
            if hit is not None:
                ref, version, win, result = hit
                if ref() is mask and version is not None and version == _version(mask) \
                        and win == window:
                    return result
            for (shape, dtype, win), entries in self._by_content.items():
                if shape == tuple(mask.shape) and dtype == mask.dtype and win == window:
                    for stored, result in entries:
                        if torch.equal(stored, mask):
                            self._remember(mask, window, result)
                            return result
        result = match_shift_mask(mask, window)
        with self._lock:
            ckey = (tuple(mask.shape), mask.dtype, window)
            entries = self._by_content.setdefault(ckey, [])
            entries.append((mask.detach().to("cpu").clone(), result))
            del entries[:-8]
            while len(self._by_content) > self._limit:
                self._by_content.popitem(last=False)
            self._remember(mask, window, result)
        return result

    def _remember(self, mask, window, result):
        try:
            ref = weakref.ref(mask)
        except TypeError:  # pragma: no cover
            return
        if len(self._by_id) > 4 * self._limit:
            self._by_id = {k: v for k, v in self._by_id.items() if v[0]() is not None}
        self._by_id[id(mask)] = (ref, _version(mask), window, result)


def _version(t) -> Optional[int]:
    """In-place modification counter (``None`` for inference tensors, which have none)."""
    try:
        return t._version
    except RuntimeError:
        return None


_matcher = _MaskMatcher()


# --------------------------------------------------------------------------- #
# Patches
# --------------------------------------------------------------------------- #
class _Fallback(Exception):
    """Internal: the kernel does not apply to this call (the message says why)."""


@dataclasses.dataclass
class _Options:
    layout: str = "auto"
    fallback: bool = True
    compile_options: Dict[str, Any] = dataclasses.field(default_factory=dict)


class _Patch:
    framework = ""
    attr = "forward"  # the method replaced on the instance

    def __init__(self, module, name: str, options: _Options):
        self.name = name
        self.options = options
        self.kernel_calls = 0
        self.fallback_calls = 0
        self.fallback_reasons: "collections.Counter" = collections.Counter()
        self.had_instance_attr = self.attr in module.__dict__
        self.saved_attr = module.__dict__.get(self.attr)
        self._checked_index = set()
        self._warned = False

    # -- helpers shared by the adapters -------------------------------------- #
    def original(self, module):
        if self.had_instance_attr:
            return self.saved_attr
        return getattr(type(module), self.attr).__get__(module, type(module))

    def kernel(self, window, heads, head_dim, scale, dtype, **config):
        opts = dict(self.options.compile_options)
        default = head_dim ** -0.5
        if scale is not None and abs(float(scale) - default) <= 1e-7 * default:
            scale = None  # the kernel's default; no need for a separate build
        try:
            return compile_kernel(window, heads, head_dim,
                                  scale=None if scale is None else float(scale),
                                  dtype=dtype, **config, **opts)
        except (_compiler.CompileError, _compiler.SwinAotNotFoundError, NotImplementedError,
                ValueError) as exc:
            if not self._warned:
                self._warned = True
                warnings.warn(f"swin_opt: {self.framework} module {self.name or '<root>'} runs "
                              f"its original forward: {exc}", stacklevel=4)
            raise _Fallback(f"no kernel: {exc}") from None

    def common_checks(self, torch, module, x) -> str:
        """Return the dtype name for the kernel or raise _Fallback."""
        if torch.jit.is_scripting() or torch.jit.is_tracing():
            raise _Fallback("scripting/tracing")
        compiler_mod = getattr(torch, "compiler", None)
        if compiler_mod is not None and getattr(compiler_mod, "is_compiling", lambda: False)():
            raise _Fallback("torch.compile")
        if module.training:
            raise _Fallback("training mode")
        if torch.is_grad_enabled() and (x.requires_grad or
                                        any(p.requires_grad for p in module.parameters())):
            raise _Fallback("autograd enabled (use torch.no_grad()/inference_mode())")
        if x.device.type != "cpu":
            raise _Fallback(f"device {x.device}")
        name = _dtype_name(torch, x.dtype)
        if name is None:
            raise _Fallback(f"dtype {x.dtype}")
        return name

    def table(self, table, window, heads, index, dtype):
        """The bias table as a contiguous tensor of ``dtype``, after checking the index once."""
        window = tuple(int(w) for w in window)
        if tuple(table.shape) != (_ref.table_rows(window), heads):
            raise _Fallback(f"bias table shape {tuple(table.shape)} does not match window "
                            f"{window} and {heads} heads")
        if window not in self._checked_index:
            if index is not None:
                want = _ref.relative_index(window).reshape(-1)
                got = index.detach().to("cpu").reshape(-1).numpy()
                if got.shape != want.shape or not np.array_equal(got, want):
                    raise _Fallback("relative_position_index is not Swin's standard index")
            self._checked_index.add(window)
        t = table.detach()
        if t.dtype != dtype:
            t = t.to(dtype)
        return t.contiguous()

    def cpb_table(self, torch, m, window, heads, index, dtype):
        """SwinV2's continuous position bias ``16 * sigmoid(cpb_mlp(relative_coords_table))``
        as a ``[T, heads]`` table (the sigmoid is element-wise, so applying it before the
        gather equals SwinV2 applying it after).  Recomputed per call: the MLP is tiny."""
        table = m.cpb_mlp(m.relative_coords_table).reshape(-1, heads)
        return self.table(16.0 * torch.sigmoid(table), window, heads, index, dtype)

    def attention_core(self, torch, m, window, heads, dtype, qkv_bias, scale):
        """``(table, scale, qkv_bias, logit_scale)`` of a Swin (V1) or SwinV2 attention module.

        V1: its learned table, ``scale`` and ``qkv_bias`` as given, no logit
        scale.  V2: the continuous position bias table, scale 1 (the kernel
        then runs on q/k prepared by :func:`_cosine_qk` with ``logit_scale``)
        and the key third of ``qkv_bias`` zeroed, as both timm and torchvision
        V2 do.
        """
        index = getattr(m, "relative_position_index", None)
        if not _is_swinv2(m):
            table = self.table(m.relative_position_bias_table, window, heads, index, dtype)
            return table, scale, qkv_bias, None
        if qkv_bias is not None:
            qkv_bias = qkv_bias.detach().clone()
            third = qkv_bias.numel() // 3
            qkv_bias[third:2 * third] = 0
        return self.cpb_table(torch, m, window, heads, index, dtype), 1.0, qkv_bias, m.logit_scale

    def mask_config(self, mask, window, num_windows) -> dict:
        """``resolution``/``shift`` kwargs for a window-layout kernel applying ``mask``."""
        if mask is None:
            return {}
        result = _matcher.match(mask, window)
        if result is None:
            raise _Fallback("mask is not a Swin shift mask this kernel reproduces")
        if result == NO_MASK:
            return {}
        if num_windows % mask.shape[0]:
            raise _Fallback("number of windows is not a multiple of the mask's")
        res, shift = result
        return {"resolution": res, "shift": shift}

    # -- dispatch ------------------------------------------------------------- #
    def __call__(self, module, *args, **kwargs):
        torch = _torch()
        try:
            out = self.run(torch, module, *args, **kwargs)
        except _Fallback as why:
            reason = str(why)
            self.fallback_calls += 1
            self.fallback_reasons[reason] += 1
            if not self.options.fallback:
                raise KernelUnavailable(f"swin_opt: {self.framework} module {self.name or '<root>'}"
                                        f" cannot use the kernel: {reason}") from None
            return self.original(module)(*args, **kwargs)
        self.kernel_calls += 1
        return out

    def run(self, torch, module, *args, **kwargs):  # pragma: no cover - abstract
        raise NotImplementedError

    def stats(self) -> dict:
        return {"name": self.name, "framework": self.framework, "method": self.attr,
                "kernel_calls": self.kernel_calls, "fallback_calls": self.fallback_calls,
                "fallback_reasons": dict(self.fallback_reasons)}


def _qkv_windows(torch, qkv, b, n, heads, head_dim):
    """``[B_, N, 3*A]`` fused qkv -> three contiguous ``[B_, heads, N, head_dim]`` views (one copy)."""
    t = qkv.view(b, n, 3, heads, head_dim).permute(2, 0, 3, 1, 4).contiguous()
    return t[0], t[1], t[2]


def _heads_first(x, b, n, heads, head_dim):
    return x.view(b, n, heads, head_dim).transpose(1, 2).contiguous()


def _qkv_packed(torch, x, weight, bias, heads, head_dim):
    """``x`` ``[B, L, C]`` -> the qkv projection ``[B, L, 3, heads, head_dim]``: one GEMM,
    no copy; packed-qkv kernels read q, k and v out of it where they lie."""
    qkv = torch.nn.functional.linear(x, weight, bias)
    b, n, _ = qkv.shape
    return qkv.view(b, n, 3, heads, head_dim)


def _pad_rows(torch, bias, channels):
    """q/k/v of a zero (padded) token: the qkv bias as ``[3, C]`` float32."""
    if bias is None:
        return torch.zeros((3, channels), dtype=torch.float32)
    return bias.detach().float().reshape(3, channels).contiguous()


def _cosine_qk(torch, q, k, logit_scale, head_axis: int) -> None:
    """SwinV2's cosine attention as the kernel's plain attention with scale 1, in place.

    SwinV2 computes ``cos(q_i, k_j) * s_h`` with ``s_h = exp(min(logit_scale_h,
    log 100))``; that is the dot product of ``s_h q_i / |q_i|`` and
    ``k_j / |k_j|``.  ``q``/``k`` are views whose axis ``head_axis`` is the
    head (they may be slices of the packed qkv, which is then changed in
    place); the bias table and the shift mask are added after the product in
    both forms, so a scale-1 kernel on the normalised q/k is exact.  Nothing
    to do when ``logit_scale`` is None (Swin V1).
    """
    if logit_scale is None:
        return
    heads = q.shape[head_axis]
    s = torch.clamp(logit_scale.detach().float(), max=math.log(100.0)).exp()
    s = s.reshape((heads,) + (1,) * (q.dim() - head_axis - 1)).to(q.dtype)
    # F.normalize is x / max(|x|, 1e-12); divide in place (no copy), the scale folded in
    q.div_(torch.linalg.vector_norm(q, dim=-1, keepdim=True).clamp_min_(1e-12).div_(s))
    k.div_(torch.linalg.vector_norm(k, dim=-1, keepdim=True).clamp_min_(1e-12))


def _packed_inputs(torch, x, weight, bias, heads, head_dim, logit_scale):
    """Packed qkv ``[B, L, 3, heads, head_dim]``, prepared for cosine attention when
    ``logit_scale`` is given (SwinV2), and the padded tokens' ``[3, C]`` q/k/v.

    The padded rows need no normalisation: SwinV2's key bias is zero, so a
    padded key is 0 either way, and a padded query only gives outputs that are
    cropped."""
    qkv = _qkv_packed(torch, x, weight, bias, heads, head_dim)
    _cosine_qk(torch, qkv[:, :, 0], qkv[:, :, 1], logit_scale, head_axis=2)
    return qkv, _pad_rows(torch, bias, heads * head_dim)


def _timm_qkv_bias(torch, attn):
    """timm's qkv bias: ``qkv.bias`` (V1) or ``cat(q_bias, k_bias, v_bias)`` (V2)."""
    if getattr(attn, "q_bias", None) is None:
        return attn.qkv.bias
    return torch.cat((attn.q_bias, attn.k_bias, attn.v_bias))


def _is_swinv2(module) -> bool:
    return all(hasattr(module, a) for a in ("logit_scale", "cpb_mlp", "relative_coords_table"))


# ---- timm ------------------------------------------------------------------ #
class _TimmAttention(_Patch):
    """``WindowAttention.forward(x, mask=None)`` of timm's swin_transformer and (SwinV2)
    swin_transformer_v2 (window layout)."""

    framework = "timm"

    def run(self, torch, m, x, mask=None):
        dtype = self.common_checks(torch, m, x)
        b, n, _ = x.shape
        window = tuple(int(s) for s in m.window_size)
        heads = m.num_heads
        attn_dim = m.qkv.out_features // 3
        head_dim = attn_dim // heads
        if n != window[0] * window[1]:
            raise _Fallback(f"{n} tokens per window, window is {window}")
        cfg = self.mask_config(mask, window, b)
        table, scale, qkv_bias, logit_scale = self.attention_core(
            torch, m, window, heads, x.dtype, _timm_qkv_bias(torch, m), getattr(m, "scale", None))
        kern = self.kernel(window, heads, head_dim, scale, dtype, **cfg)
        qkv = torch.nn.functional.linear(x, m.qkv.weight, qkv_bias)
        q, k, v = _qkv_windows(torch, qkv, b, n, heads, head_dim)
        _cosine_qk(torch, q, k, logit_scale, head_axis=1)
        out = kern(q, k, v, table)
        return m.proj_drop(m.proj(out))


class _TimmBlock(_Patch):
    """``SwinTransformerBlock._attn(x)`` of timm's swin_transformer and (SwinV2)
    swin_transformer_v2 (token layout)."""

    framework = "timm"
    attr = "_attn"

    def run(self, torch, blk, x):
        attn = blk.attn
        dtype = self.common_checks(torch, blk, x)
        if x.dim() != 4:
            raise _Fallback("expected [B, H, W, C]")
        b, h, w, c = x.shape
        window = tuple(int(s) for s in blk.window_size)
        shift = tuple(int(s) for s in blk.shift_size)
        if window != tuple(attn.window_size):
            raise _Fallback("block and attention window sizes differ")
        padded = tuple(-(-r // s) * s for r, s in zip((h, w), window))
        if not getattr(blk, "dynamic_mask", False):
            # timm applies its stored mask; make sure it is the one the kernel builds
            mask = getattr(blk, "attn_mask", None)
            want = NO_MASK if not any(shift) else (padded, shift)
            got = NO_MASK if mask is None else _matcher.match(mask, window)
            if got != want:
                raise _Fallback("stored attn_mask does not match the block's resolution/shift")
        heads = attn.num_heads
        attn_dim = attn.qkv.out_features // 3
        head_dim = attn_dim // heads
        table, scale, qkv_bias, logit_scale = self.attention_core(
            torch, attn, window, heads, x.dtype, _timm_qkv_bias(torch, attn),
            getattr(attn, "scale", None))
        kern = self.kernel(window, heads, head_dim, scale, dtype, layout="tokens",
                           resolution=(h, w), shift=shift, packed_qkv=True,
                           padding="shift_then_pad" if padded != (h, w) else None)
        if kern.config.window != window or kern.config.shift != shift:
            raise _Fallback("Swin's small-map rule changes this block's window")
        qkv, pad_qkv = _packed_inputs(torch, x.reshape(b, h * w, c), attn.qkv.weight, qkv_bias,
                                      heads, head_dim, logit_scale)
        out = kern(qkv, table, pad_qkv=pad_qkv)
        out = attn.proj_drop(attn.proj(out))
        return out.view(b, h, w, -1)


# ---- torchvision ----------------------------------------------------------- #
class _TorchvisionAttention(_Patch):
    """``torchvision.models.swin_transformer.ShiftedWindowAttention.forward(x)``, x ``[B, H, W, C]``."""

    framework = "torchvision"

    def run(self, torch, m, x):
        F = torch.nn.functional
        dtype = self.common_checks(torch, m, x)
        if x.dim() != 4:
            raise _Fallback("expected [B, H, W, C]")
        b, h, w, c = x.shape
        window = tuple(int(s) for s in m.window_size)
        heads = m.num_heads
        head_dim = c // heads
        pad_h, pad_w = (-(-h // window[0]) * window[0], -(-w // window[1]) * window[1])
        shift = tuple(0 if ws >= p else int(s) for ws, p, s in zip(window, (pad_h, pad_w),
                                                                   m.shift_size))
        table, scale, qkv_bias, logit_scale = self.attention_core(
            torch, m, window, heads, x.dtype, m.qkv.bias, None)
        pads = (pad_h, pad_w) != (h, w)
        if self.options.layout == "auto" and h >= window[0] and w >= window[1]:
            kern = self.kernel(window, heads, head_dim, scale, dtype, layout="tokens",
                               resolution=(h, w), shift=shift, packed_qkv=True,
                               padding="pad_then_shift" if pads else None)
            if kern.config.window == window and kern.config.shift == shift:
                qkv, pad_qkv = _packed_inputs(torch, x.reshape(b, h * w, c), m.qkv.weight,
                                              qkv_bias, heads, head_dim, logit_scale)
                out = kern(qkv, table, pad_qkv=pad_qkv)
                return F.linear(out, m.proj.weight, m.proj.bias).view(b, h, w, c)
        # window layout: pad, roll and partition in torch exactly as torchvision does
        xp = F.pad(x, (0, 0, 0, pad_w - w, 0, pad_h - h))
        if any(shift):
            xp = torch.roll(xp, shifts=(-shift[0], -shift[1]), dims=(1, 2))
        nh, nw = pad_h // window[0], pad_w // window[1]
        xw = xp.view(b, nh, window[0], nw, window[1], c).permute(0, 1, 3, 2, 4, 5)
        n = window[0] * window[1]
        xw = xw.reshape(b * nh * nw, n, c)
        cfg = {"resolution": (pad_h, pad_w), "shift": shift} if any(shift) else {}
        kern = self.kernel(window, heads, head_dim, scale, dtype, **cfg)
        if kern.config.window != window or (any(shift) and kern.config.shift != shift):
            raise _Fallback("kernel configuration differs from torchvision's")
        q, k, v = _qkv_windows(torch, F.linear(xw, m.qkv.weight, qkv_bias), xw.shape[0], n,
                               heads, head_dim)
        _cosine_qk(torch, q, k, logit_scale, head_axis=1)
        out = F.linear(kern(q, k, v, table), m.proj.weight, m.proj.bias)
        out = out.view(b, nh, nw, window[0], window[1], c).permute(0, 1, 3, 2, 4, 5)
        out = out.reshape(b, pad_h, pad_w, c)
        if any(shift):
            out = torch.roll(out, shifts=shift, dims=(1, 2))
        return out[:, :h, :w, :].contiguous()


# ---- transformers ---------------------------------------------------------- #
class _HFAttention(_Patch):
    """transformers >= 5: ``SwinAttention.forward(hidden_states, attention_mask=None, **kw)``."""

    framework = "transformers"

    def run(self, torch, m, hidden_states, attention_mask=None, **kwargs):
        if kwargs.get("output_attentions"):
            raise _Fallback("attention probabilities requested")
        rpb = m.relative_position_bias
        out = _hf_attention(self, torch, m, hidden_states, attention_mask, rpb.window_size,
                            m.num_attention_heads, m.head_dim, m.scaling,
                            rpb.relative_position_bias_table,
                            getattr(rpb, "relative_position_index", None),
                            (m.q_proj, m.k_proj, m.v_proj))
        return m.o_proj(out), None


def _hf_attention(patch, torch, m, hidden_states, attention_mask, window_size, heads, head_dim,
                  scale, table, index, projections):
    """The attention core shared by transformers' 5.x and 4.x Swin modules:
    windows of ``hidden_states`` [B_, N, C] through the kernel, heads merged."""
    dtype = patch.common_checks(torch, m, hidden_states)
    window = tuple(int(s) for s in window_size)
    b, n, _ = hidden_states.shape
    if n != window[0] * window[1]:
        raise _Fallback(f"{n} tokens per window, window is {window}")
    cfg = patch.mask_config(attention_mask, window, b)
    table = patch.table(table, window, heads, index, hidden_states.dtype)
    kern = patch.kernel(window, heads, head_dim, scale, dtype, **cfg)
    q, k, v = (_heads_first(p(hidden_states), b, n, heads, head_dim) for p in projections)
    return kern(q, k, v, table)


class _HFSelfAttention(_Patch):
    """transformers 4.x: ``SwinSelfAttention.forward(hidden_states, attention_mask, head_mask,
    output_attentions)`` (the output projection lives in ``SwinSelfOutput``)."""

    framework = "transformers"

    def run(self, torch, m, hidden_states, attention_mask=None, head_mask=None,
            output_attentions=False, **kwargs):
        if output_attentions or head_mask is not None or kwargs:
            raise _Fallback("attention probabilities / head mask requested")
        out = _hf_attention(self, torch, m, hidden_states, attention_mask, m.window_size,
                            m.num_attention_heads, m.attention_head_size, None,
                            m.relative_position_bias_table,
                            getattr(m, "relative_position_index", None),
                            (m.query, m.key, m.value))
        return (out,)


# --------------------------------------------------------------------------- #
# Discovery / install
# --------------------------------------------------------------------------- #
_patches: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_FRAMEWORKS = ("timm", "torchvision", "transformers")


def _dispatch_forward(self, *args, **kwargs):
    patch = _patches.get(self, {}).get("forward")
    if patch is None:  # e.g. a deep copy of a patched module: behave like the original
        return type(self).forward(self, *args, **kwargs)
    return patch(self, *args, **kwargs)


def _dispatch_attn(self, *args, **kwargs):
    patch = _patches.get(self, {}).get("_attn")
    if patch is None:
        return type(self)._attn(self, *args, **kwargs)
    return patch(self, *args, **kwargs)


_DISPATCH = {"forward": _dispatch_forward, "_attn": _dispatch_attn}


def _classes():
    """``(framework, class, patch type)`` for every importable supported class."""
    found = []
    timm_swin = sys.modules.get("timm.models.swin_transformer")
    if timm_swin is not None:
        found.append(("timm", getattr(timm_swin, "WindowAttention", None), _TimmAttention))
        found.append(("timm", getattr(timm_swin, "SwinTransformerBlock", None), _TimmBlock))
    timm_swin_v2 = sys.modules.get("timm.models.swin_transformer_v2")
    if timm_swin_v2 is not None:
        found.append(("timm", getattr(timm_swin_v2, "WindowAttention", None), _TimmAttention))
        found.append(("timm", getattr(timm_swin_v2, "SwinTransformerV2Block", None), _TimmBlock))
    tv_swin = sys.modules.get("torchvision.models.swin_transformer")
    if tv_swin is not None:
        found.append(("torchvision", getattr(tv_swin, "ShiftedWindowAttention", None),
                      _TorchvisionAttention))
    hf_swin = sys.modules.get("transformers.models.swin.modeling_swin")
    if hf_swin is not None:
        if hasattr(hf_swin, "SwinSelfAttention"):  # transformers 4.x
            found.append(("transformers", hf_swin.SwinSelfAttention, _HFSelfAttention))
        else:  # transformers >= 5: SwinAttention holds q/k/v/o projections and the bias
            found.append(("transformers", getattr(hf_swin, "SwinAttention", None), _HFAttention))
    return [(fw, cls, p) for fw, cls, p in found if isinstance(cls, type)]


def _supported(patch_type, module) -> Optional[str]:
    """None if ``module`` can be patched by ``patch_type``, else why not."""
    if patch_type in (_TorchvisionAttention, _TimmAttention) and _is_swinv2(module):
        mlp_out = getattr(module.cpb_mlp[-1], "out_features", None)
        if mlp_out != module.num_heads:
            return f"cpb_mlp gives {mlp_out} columns for {module.num_heads} heads"
        return None
    if patch_type in (_TorchvisionAttention, _TimmAttention):
        if not hasattr(module, "relative_position_bias_table"):
            return "neither Swin's relative_position_bias_table nor SwinV2's cpb_mlp"
        table, heads = module.relative_position_bias_table, module.num_heads
    elif patch_type is _TimmBlock:
        if not callable(getattr(type(module), "_attn", None)):
            return "this timm version's SwinTransformerBlock has no _attn method"
        return None
    elif patch_type is _HFAttention:
        if not (hasattr(module, "q_proj") and hasattr(module, "relative_position_bias")):
            return "not the transformers >= 5 SwinAttention layout"
        table, heads = (module.relative_position_bias.relative_position_bias_table,
                        module.num_attention_heads)
    elif patch_type is _HFSelfAttention:
        table, heads = module.relative_position_bias_table, module.num_attention_heads
    else:  # pragma: no cover
        return "unknown"
    if table.dim() != 2 or table.shape[1] != heads:
        return f"bias table {tuple(table.shape)} does not have one column per head ({heads})"
    return None


def swap_attention(model, *, layout: str = "auto", fallback: bool = True, frameworks=None,
                   **compile_options) -> int:
    """Replace the attention core of the Swin window-attention modules in ``model`` with kernels.

    ``model`` may be a whole model or a single attention module / block.
    Modules are patched in place (instance attributes; the class is not
    touched) and keep reading their own parameters on every call, so later
    weight updates are honoured.  Kernels are compiled lazily, per
    configuration (window, heads, head_dim, scale, resolution, shift, dtype),
    on first use and cached.

    Parameters
    ----------
    layout:
        ``"auto"``: token-layout kernels where the framework's block structure
        allows (timm blocks, torchvision), window layout elsewhere;
        ``"windows"``: window-layout kernels only (masks are identified from
        the tensors the modules receive).
    fallback:
        ``True``: calls the kernel cannot handle run the original forward
        (see the module docstring for when); ``False``: they raise
        :class:`KernelUnavailable`.
    frameworks:
        Restrict to some of ``"timm"``, ``"torchvision"``, ``"transformers"``.
    compile_options:
        ``cpu``, ``parallel``, ``cache_dir``, ``target`` for :func:`swin_opt.compile`.

    Returns the number of attention layers patched (a timm block and its
    ``WindowAttention`` count once).  Already patched modules are re-patched
    with the new options.
    """
    _torch()
    if layout not in ("auto", "windows"):
        raise ValueError(f"layout must be 'auto' or 'windows', got {layout!r}")
    unknown = set(compile_options) - set(_COMPILE_OPTIONS)
    if unknown:
        raise TypeError(f"unknown option(s) {sorted(unknown)}; compile options are "
                        f"{list(_COMPILE_OPTIONS)}")
    if frameworks is None:
        frameworks = _FRAMEWORKS
    elif isinstance(frameworks, str):
        frameworks = (frameworks,)
    bad = set(frameworks) - set(_FRAMEWORKS)
    if bad:
        raise ValueError(f"unknown framework(s) {sorted(bad)}; expected some of {_FRAMEWORKS}")
    options = _Options(layout=layout, fallback=bool(fallback), compile_options=dict(compile_options))
    # The kernels' OpenMP runtime (LLVM libomp) spins for 200 ms after each
    # parallel region by default, stealing the cores from torch's own (GNU)
    # OpenMP threads that run the next GEMM.  Ask it to sleep at once; this is
    # read when libomp starts, so it only helps if no kernel was loaded yet.
    os.environ.setdefault("KMP_BLOCKTIME", "0")
    classes = [(fw, cls, p) for fw, cls, p in _classes() if fw in frameworks]
    count = 0
    for name, module in model.named_modules():
        for fw, cls, patch_type in classes:
            if not isinstance(module, cls):
                continue
            if patch_type is _TimmBlock and layout != "auto":
                _unpatched(module, _TimmBlock.attr)  # drop a block patch of an earlier call
                continue
            why = _supported(patch_type, module)
            if why is not None:
                warnings.warn(f"swin_opt: not patching {fw} module {name or '<root>'}: {why}",
                              stacklevel=2)
                continue
            _install(module, patch_type(_unpatched(module, patch_type.attr), name, options))
            if patch_type is not _TimmBlock:
                count += 1
    return count


def _unpatched(module, attr):
    """Remove an existing swin_opt patch of ``attr`` (so the saved original is the real one)."""
    entry = _patches.get(module, {})
    old = entry.pop(attr, None)
    if old is not None:
        _uninstall_attr(module, old)
    return module


def _install(module, patch: _Patch) -> None:
    _patches.setdefault(module, {})[patch.attr] = patch
    object.__setattr__(module, patch.attr, types.MethodType(_DISPATCH[patch.attr], module))


def _uninstall_attr(module, patch: _Patch) -> None:
    if patch.had_instance_attr:
        object.__setattr__(module, patch.attr, patch.saved_attr)
    else:
        module.__dict__.pop(patch.attr, None)


def restore_attention(model) -> int:
    """Undo :func:`swap_attention` on ``model``; returns the number of attention layers restored."""
    count = 0
    for _, module in model.named_modules():
        entry = _patches.pop(module, None)
        if not entry:
            continue
        for attr, patch in entry.items():
            _uninstall_attr(module, patch)
            if attr == "forward":
                count += 1
    return count


def patch_stats(model) -> List[dict]:
    """One dict per patched method in ``model``: name, framework, method, kernel_calls,
    fallback_calls and fallback_reasons (reason -> count)."""
    out = []
    for _, module in model.named_modules():
        for patch in _patches.get(module, {}).values():
            out.append(patch.stats())
    return out
