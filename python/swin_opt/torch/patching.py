"""The base of every framework patch: :class:`_Patch` (fallback, kernel and
table lookup, SwinV1/V2 attention cores, mask configuration, statistics) and
the q/k/v preparation the framework adapters share."""

from __future__ import annotations

import collections
import dataclasses
import math
import os
from typing import Any, Dict

from .masks import NO_MASK, _matcher
from . import ops as _ops
from .tensors import KernelUnavailable, _dtype_name, _torch


class _Fallback(Exception):
    """Internal: the kernel does not apply to this call (the message says why)."""


class _StandIn:
    """An object without attributes, for :meth:`_Patch._restore`."""


class _Recording(_Fallback):
    """Internal: :func:`swin_opt.torch.warmup` is recording configurations; run the original."""


@dataclasses.dataclass
class _Options:
    layout: str = "auto"
    fallback: bool = True
    compile_options: Dict[str, Any] = dataclasses.field(default_factory=dict)


class _Patch:
    framework = ""
    attr = "forward"  # the method replaced on the instance

    def __init__(self, module, name: str, options: _Options):
        self._setup(name, options, self.attr in module.__dict__, module.__dict__.get(self.attr))

    @classmethod
    def _restore(cls, name: str, options: _Options, had_instance_attr: bool, saved_attr):
        """The patch of an unpickled / deep-copied module, built by the patch type's own
        ``__init__`` on a stand-in (the module has no state yet while it is unpickled)."""
        self = cls(_StandIn(), name, options)
        self.had_instance_attr = had_instance_attr
        self.saved_attr = saved_attr
        return self

    def _setup(self, name, options, had_instance_attr, saved_attr):
        self.name = name
        self.options = options
        self.kernel_calls = 0
        self.fallback_calls = 0
        self.fallback_reasons: "collections.Counter" = collections.Counter()
        self.had_instance_attr = had_instance_attr
        self.saved_attr = saved_attr
        self._checked_index = set()
        # SwinV2's folded bias tables: id(module) -> (weight versions, table).
        self._cpb_tables: Dict[int, tuple] = {}
        self.compiled_fallback_reasons: set = set()
        # Calls made by torch.compile'd code are counted in tensors (a Python
        # int attribute would be guarded by dynamo and force a recompile).
        torch = _torch()
        self._compiled_counts = torch.zeros(2, dtype=torch.int64)  # [kernel, fallback]
        _ops.register()

    # -- helpers shared by the adapters -------------------------------------- #
    def original(self, module):
        if self.had_instance_attr:
            return self.saved_attr
        return getattr(type(module), self.attr).__get__(module, type(module))

    def kernel(self, window, heads, head_dim, scale, dtype, **config):
        """The kernel for this configuration, as an :class:`ops.KernelCall` (called like a
        :class:`swin_opt.Kernel`, through the ``swin_opt::`` custom ops), or _Fallback."""
        default = head_dim ** -0.5
        if scale is not None and abs(float(scale) - default) <= 1e-7 * default:
            scale = None  # the kernel's default; no need for a separate build
        spec = _ops.resolve_spec(
            tuple(int(w) for w in window), int(heads), int(head_dim),
            None if scale is None else float(scale), dtype, _items(config),
            _items(self.options.compile_options))
        if spec.error is not None:
            raise _Fallback(spec.error)
        if spec.pending:
            raise _Recording("recording kernel configurations")
        return _ops.KernelCall(spec)

    def common_checks(self, torch, module, x) -> str:
        """Return the dtype name for the kernel or raise _Fallback.

        Only Python and tensor metadata: dynamo traces this (``torch.compile``
        keeps the kernel).  Scripting and ``torch.jit.trace`` use the original
        forward."""
        if torch.jit.is_scripting() or torch.jit.is_tracing():
            raise _Fallback("scripting/tracing")
        if torch.compiler.is_compiling() and not torch.compiler.is_dynamo_compiling():
            # non-strict torch.export runs this code on fake tensors: the data-dependent
            # checks (shift mask, relative index) cannot be done
            raise _Fallback("non-strict torch.export (use strict=True to export the kernel)")
        differentiating = torch.is_grad_enabled() and (
            x.requires_grad or any(p.requires_grad for p in module.parameters()))
        if module.training or differentiating:
            # Training runs the kernels' forward and backward (float32 Swin V1).
            if _is_swinv2(module) or _is_swinv2(getattr(module, "attn", None)) or \
                    _is_swinv2(getattr(module, "attention", None)):
                raise _Fallback("training SwinV2 (its cosine attention has no backward kernel)")
            if x.dtype != torch.float32:
                raise _Fallback(f"training in {x.dtype} (the backward kernels are float32)")
            if module.training and _attention_dropout(torch, module) > 0:
                raise _Fallback("attention dropout > 0 in training mode (the kernels have "
                                "no dropout)")
        if x.device.type != "cpu":
            raise _Fallback(f"device {x.device}")
        name = _dtype_name(torch, x.dtype)
        if name is None:
            raise _Fallback(f"dtype {x.dtype}")
        return name

    def table(self, table, window, heads, index, dtype):
        """The bias table as a contiguous tensor of ``dtype``, after checking the index once."""
        window = tuple(int(w) for w in window)
        rows = 1
        for w in window:  # _ref.table_rows, in a form dynamo traces (no math.prod(genexpr))
            rows *= 2 * w - 1
        if tuple(table.shape) != (rows, heads):
            raise _Fallback(f"bias table shape {tuple(table.shape)} does not match window "
                            f"{window} and {heads} heads")
        if _torch().compiler.is_compiling():
            # dynamo: checked once at trace time on the real buffer (a constant of the graph)
            if index is not None and not _ops.index_ok(index, window):
                raise _Fallback("relative_position_index is not Swin's standard index")
        elif window not in self._checked_index:
            if index is not None and not _ops.index_ok(index, window):
                raise _Fallback("relative_position_index is not Swin's standard index")
            self._checked_index.add(window)
        # Not detached: under autograd the table's gradient is the kernel's.
        t = table
        if t.dtype != dtype:
            t = t.to(dtype)
        return t.contiguous()

    def cpb_table(self, torch, m, window, heads, index, dtype):
        """SwinV2's continuous position bias ``16 * sigmoid(cpb_mlp(relative_coords_table))``
        as a ``[T, heads]`` table (the sigmoid is element-wise, so applying it before the
        gather equals SwinV2 applying it after); see :meth:`folded_cpb_table`."""
        return self.folded_cpb_table(torch, m, m.cpb_mlp, m.relative_coords_table, window,
                                     heads, index, dtype)

    def folded_cpb_table(self, torch, m, mlp, coords, window, heads, index, dtype):
        """``16 * sigmoid(mlp(coords))`` as a checked ``[T, heads]`` table of ``dtype``.

        At inference it is a constant of the weights, so it is computed once
        per weight version: the cache key holds each parameter's (and the
        coordinate buffer's) identity and ``_version``, which in-place updates
        (``load_state_dict``, optimizer steps, ``copy_``) bump.  While
        ``torch.compile`` traces, the MLP is part of the graph instead.  With
        grad enabled on the MLP's parameters the table is not cached (autograd
        must see it computed)."""
        tensors = [coords, *mlp.parameters()]
        cacheable = (not torch.compiler.is_compiling()
                     and not (torch.is_grad_enabled() and any(t.requires_grad for t in tensors)))
        if cacheable:
            key = (tuple((id(t), t._version) for t in tensors), tuple(window), heads, dtype)
            cached = self._cpb_tables.get(id(m))
            if cached is not None and cached[0] == key:
                return cached[1]
        table = 16.0 * torch.sigmoid(mlp(coords).reshape(-1, heads))
        table = self.table(table, window, heads, index, dtype)
        if cacheable:
            self._cpb_tables[id(m)] = (key, table)
        return table

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
        compiling = torch.compiler.is_compiling()
        try:
            out = self.run(torch, module, *args, **kwargs)
        except _Recording:
            _ops._muted += 1  # the modules inside the original forward are not needed
            try:
                return self.original(module)(*args, **kwargs)
            finally:
                _ops._muted -= 1
        except _Fallback as why:
            reason = str(why)
            if not self.options.fallback:
                raise KernelUnavailable(f"swin_opt: {self.framework} module {self.name or '<root>'}"
                                        f" cannot use the kernel: {reason}") from None
            if compiling:
                _note_reason(self, reason)  # at trace time
                if not torch.compiler.is_exporting():
                    self._compiled_counts[1].add_(1)
            else:
                self.fallback_calls += 1
                self.fallback_reasons[reason] += 1
            return self.original(module)(*args, **kwargs)
        if compiling:
            if not torch.compiler.is_exporting():
                self._compiled_counts[0].add_(1)
        else:
            self.kernel_calls += 1
        return out

    def run(self, torch, module, *args, **kwargs):  # pragma: no cover - abstract
        raise NotImplementedError

    def stats(self) -> dict:
        """Counts: eager calls plus those of torch.compile'd code (whose fallback reasons
        are those seen while compiling)."""
        compiled_kernel, compiled_fallback = (int(n) for n in self._compiled_counts.tolist())
        return {"name": self.name, "framework": self.framework, "method": self.attr,
                "kernel_calls": self.kernel_calls + compiled_kernel,
                "fallback_calls": self.fallback_calls + compiled_fallback,
                "fallback_reasons": dict(self.fallback_reasons),
                "compiled_fallback_reasons": sorted(self.compiled_fallback_reasons)}


def _items(mapping) -> tuple:
    """``mapping`` as sorted ``(name, value)`` pairs of plain (hashable) Python values."""
    return tuple(sorted((k, _freeze(v)) for k, v in mapping.items()))


def _freeze(v):
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, bool) or v is None or isinstance(v, (str, float)):
        return v
    if isinstance(v, int) or isinstance(v, _torch().SymInt):
        return int(v)  # a SymInt (dynamic shape) is specialised: kernels are per shape
    return str(v)  # e.g. a Path (cache_dir)


def _note_reason(patch, reason: str) -> None:
    """Record a fallback reason seen while torch.compile traces.  Marked
    ``assume_constant_result`` (ops.register): runs at trace time only, and
    dynamo does not guard on the set it fills."""
    patch.compiled_fallback_reasons.add(reason)

def _linear(torch, x, weight, bias=None):
    """``x @ weightᵀ + bias``, the q/k/v and output projections around the kernels.

    float32 CPU tensors in eager mode go through oneDNN
    (``torch.ops.mkldnn._linear_pointwise``): on the projections of a Swin
    block it runs 2.2-2.5x faster than ``F.linear``'s MKL ``addmm`` on AMD
    EPYC (about 480 against 190 GFLOP/s on 2 cores, the same numbers to
    rounding), and no slower elsewhere. While ``torch.compile`` traces, the
    same call is wrapped in the custom op ``swin_opt::linear``, which
    inductor calls as it is (it lowers ``mkldnn._linear_pointwise`` itself
    only for frozen, constant weights). Everything else is ``F.linear``;
    ``SWIN_OPT_ONEDNN=0`` turns the oneDNN path off. Under autograd
    (training) the custom op is called in eager mode too: its backward runs
    ``dx`` through oneDNN and ``dW`` through torch.
    """
    if (_onednn_linear(torch) and x.dtype == torch.float32 and weight.dtype == torch.float32
            and x.device.type == "cpu"):
        differentiating = torch.is_grad_enabled() and (
            x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad))
        if differentiating or torch.compiler.is_compiling():
            return torch.ops.swin_opt.linear(x, weight, bias)
        return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
    return torch.nn.functional.linear(x, weight, bias)


def _project(torch, layer, x):
    """``layer(x)`` for a projection module: :func:`_linear` for a plain ``nn.Linear``."""
    if type(layer) is torch.nn.Linear:
        return _linear(torch, x, layer.weight, layer.bias)
    return layer(x)


_ONEDNN = None


def _onednn_linear(torch) -> bool:
    global _ONEDNN
    if _ONEDNN is None:
        _ONEDNN = (os.environ.get("SWIN_OPT_ONEDNN", "1") != "0"
                   and torch.backends.mkldnn.is_available()
                   and hasattr(torch.ops.mkldnn, "_linear_pointwise"))
    return _ONEDNN


def _qkv_windows(torch, qkv, b, n, heads, head_dim):
    """``[B_, N, 3*A]`` fused qkv -> three contiguous ``[B_, heads, N, head_dim]`` views (one copy)."""
    t = qkv.view(b, n, 3, heads, head_dim).permute(2, 0, 3, 1, 4).contiguous()
    return t[0], t[1], t[2]


def _heads_first(x, b, n, heads, head_dim):
    return x.view(b, n, heads, head_dim).transpose(1, 2).contiguous()


def _qkv_packed(torch, x, weight, bias, heads, head_dim):
    """``x`` ``[B, L, C]`` -> the qkv projection ``[B, L, 3, heads, head_dim]``: one GEMM,
    no copy; packed-qkv kernels read q, k and v out of it where they lie."""
    qkv = _linear(torch, x, weight, bias)
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
    ``logit_scale`` is given (SwinV2 on the plain kernel; None for a cosine
    kernel, which normalizes them itself), and the padded tokens' ``[3, C]`` q/k/v.

    The padded rows need no normalisation: SwinV2's key bias is zero, so a
    padded key is 0 either way, and a padded query only gives outputs that are
    cropped."""
    qkv = _qkv_packed(torch, x, weight, bias, heads, head_dim)
    _cosine_qk(torch, qkv[:, :, 0], qkv[:, :, 1], logit_scale, head_axis=2)
    return qkv, _pad_rows(torch, bias, heads * head_dim)


def _attention_dropout(torch, module) -> float:
    """The probability of the dropout applied to the attention weights in ``module``
    (a block or an attention module of timm, torchvision or transformers): timm's
    ``attn_drop``, torchvision's ``attention_dropout``, transformers' self-attention
    ``dropout``; 0 when there is none."""
    p = float(getattr(module, "attention_dropout", 0.0) or 0.0)
    for name, child in module.named_modules():
        leaf = name.rsplit(".", 1)[-1]
        if isinstance(child, torch.nn.Dropout) and (
                leaf == "attn_drop" or (leaf == "dropout" and ("self" in name or name == "dropout"))):
            p = max(p, float(child.p))
        p = max(p, float(getattr(child, "attention_dropout", 0.0) or 0.0)
                if isinstance(getattr(child, "attention_dropout", None), float) else p)
    return p


def _cosine_kernel_scale(torch, logit_scale, *tensors):
    """``logit_scale`` when SwinV2's cosine kernel (q and k normalized inside it)
    computes this call, else None: the call then normalizes q and k in torch
    (:func:`_cosine_qk`) for the plain kernel.

    The cosine kernels have no backward: they take only calls that autograd
    does not record (no grad mode, or nothing requiring grad), i.e.
    inference. The training path keeps :func:`_cosine_qk`."""
    if logit_scale is None:
        return None
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad
                                       for t in (logit_scale, *tensors)):
        return None
    return logit_scale


def _is_swinv2(module) -> bool:
    return all(hasattr(module, a) for a in ("logit_scale", "cpb_mlp", "relative_coords_table"))
