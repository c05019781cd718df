"""The base of every framework patch: :class:`Patch` (fallback, kernel and
table lookup, SwinV1/V2 attention cores, mask configuration, statistics).
The q/k/v preparation the adapters share is in :mod:`.projections`."""

from __future__ import annotations

import collections
import dataclasses
import math
from typing import Any, Dict, NamedTuple

import numpy as np

from .. import reference as _ref
from . import dense, ops
from .fallback import Declined, Fallback, KernelUnavailable, warn_fallback
from .masks import NO_MASK, cached_match
from .projections import autograd_records, linear_backend
from .tensors import WeightStamp, dtype_name
from .tracing import trace_constant

try:
    import torch
except ImportError:  # swin_opt.torch imports without PyTorch; its entry points need it
    torch = None

__all__ = ["Patch", "PatchOptions", "ResidualBlock", "GpuDtype", "kernel_target",
           "cosine_kernel_scale", "is_swinv2", "attention_dropout", "drops", "fuses_residual"]


class _StandIn:
    """An object without attributes, for :meth:`Patch._restore`."""


class _Recording(Fallback):
    """:func:`swin_opt.torch.warmup` is recording configurations; run the original."""


class GpuDtype(NamedTuple):
    """What a call on a CUDA device builds its kernel for (:func:`kernel_target`):
    the kernel's dtype name and the device's chip (``"sm_90"``)."""

    dtype: str
    chip: str


def kernel_target(device, dtype):
    """What the kernel of a call on ``device`` with inputs of ``dtype`` is built
    for, or :class:`Fallback`: the dtype name (``"float16"``) on the CPU, a
    :class:`GpuDtype` on a CUDA device (the GPU kernel of the device's chip, run
    by the operators' CUDA implementations, :mod:`.ops`).  Under CUDA
    autocast the q/k/v projections give autocast's dtype, which the kernel is
    then built for.  Other devices fall back."""
    if device.type == "cuda":
        if torch.is_autocast_enabled("cuda") and dtype in (torch.float32, torch.float16,
                                                           torch.bfloat16):
            dtype = torch.get_autocast_dtype("cuda")
        name = dtype_name(dtype)
        if name is None:
            raise Fallback(f"dtype {dtype}")
        return GpuDtype(name, ops.cuda_chip(device.index))
    if device.type != "cpu":
        raise Fallback(f"device {device}")
    name = dtype_name(dtype)
    if name is None:
        raise Fallback(f"dtype {dtype}")
    chip = ops.recording_chip()  # GPU kernels recorded on the CPU (warmup(chip=...))
    return name if chip is None else GpuDtype(name, chip)


def cosine_kernel_scale(logit_scale, *tensors):
    """``logit_scale`` when SwinV2's cosine kernel (q and k normalised inside it)
    computes this call, else None: the call then prepares q and k in torch
    (:func:`.projections.cosine_qk`) for the plain kernel with scale 1, which is
    exact (the bias and mask are added after the product).  ``tensors``: the
    call's input and the module's parameters (one of them trainable while
    ``logit_scale`` is frozen, the cosine kernel's q, k or table would still need
    a backward). The device does not enter: every device has both kernels.

    This is the one place that chooses between the two forms:

    * where autograd records the call (training) never the cosine kernel: the
      cosine kernels have no backward, while the plain kernel's operator has
      one and autograd differentiates the preparation (``dlogit_scale``
      included);
    * otherwise (inference, on the CPU or a CUDA device) the cosine kernel,
      which saves the normalisation's pass over q and k in torch (on the GPU
      the warp kernel scales each score by ``s_h / (|q_i| |k_j|)``).
    """
    if logit_scale is None:
        return None
    if autograd_records(logit_scale, *tensors):
        return None
    return logit_scale


@dataclasses.dataclass
class PatchOptions:
    """The options of :func:`swin_opt.torch.swap_attention` every patch keeps."""

    layout: str = "auto"
    fallback: bool = True
    compile_options: Dict[str, Any] = dataclasses.field(default_factory=dict)


class Patch:
    """A patched method of one module (``attr``, called with the module): runs
    :meth:`run` (an adapter's kernel path) or, when it raises :class:`Fallback`, the
    module's original method; counts both (:meth:`stats`)."""

    framework = ""
    attr = "forward"  # the method replaced on the instance
    #: what it computes: "attention", "mlp" (.mlp), "linear" (.linears), "bias"
    #: (.table_bias) or "residual" (a block's residual adds, :class:`ResidualBlock`)
    kind = "attention"
    #: Whether :meth:`run` takes ``residual=`` (a tensor to add to its result, which it
    #: adds in its kernels' epilogue; a "residual" patch passes it). Where the patch
    #: falls back, the original method's result gets the residual added.
    fuses_residual = False
    #: Whether falling back loses kernels: then ``fallback=False`` raises and each
    #: reason is warned about. A "residual" patch's original forward still calls the
    #: patched attention and MLP: its fallbacks are only counted.
    required = True

    def __init__(self, module, name: str, options: PatchOptions):
        self._setup(name, options, self.attr in module.__dict__, module.__dict__.get(self.attr))

    @classmethod
    def _restore(cls, name: str, options: PatchOptions, had_instance_attr: bool, saved_attr):
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
        self._checked = set()  # the keys of check_once
        # Constants of the weights (weight_constant): (id(module), what) -> (extra, stamp, value).
        self._weight_constants: Dict[tuple, tuple] = {}
        # window_table's rows of shrunk windows: window -> int64 rows, or False.
        self._sub_rows: Dict[tuple, Any] = {}
        self.compiled_fallback_reasons: set = set()
        # Calls made by torch.compile'd code are counted in tensors (a Python
        # int attribute would be guarded by dynamo and force a recompile).
        self._compiled_counts = torch.zeros(2, dtype=torch.int64)  # [kernel, fallback]
        ops.register()
        linear_backend()  # decided now, not while dynamo traces (see its docstring)
        dense.register()

    # -- helpers shared by the adapters -------------------------------------- #
    def original(self, module):
        if self.had_instance_attr:
            return self.saved_attr
        return getattr(type(module), self.attr).__get__(module, type(module))

    def kernel(self, window, heads, head_dim, scale, dtype, **config):
        """The kernel for this configuration, as an :class:`ops.KernelCall` (called like a
        :class:`swin_opt.Kernel`, through the ``swin_opt::`` custom ops), or Fallback.
        ``dtype``: what :meth:`common_checks` returned (a :class:`GpuDtype` on a CUDA
        device: the GPU kernel is built, and its absence is the Fallback)."""
        default = head_dim ** -0.5
        if scale is not None and abs(float(scale) - default) <= 1e-7 * default:
            scale = None  # the kernel's default; no need for a separate build
        chip = None
        if isinstance(dtype, GpuDtype):
            dtype, chip = dtype.dtype, dtype.chip
        spec = ops.resolve_spec(
            tuple(int(w) for w in window), int(heads), int(head_dim),
            None if scale is None else float(scale), dtype, _items(config),
            _items(self.options.compile_options), chip)
        if spec.error is not None:
            raise Fallback(spec.error)
        if spec.pending:
            raise _Recording("recording kernel configurations")
        return ops.KernelCall(spec)

    def common_checks(self, module, x):
        """Return what the kernel is built for (:func:`kernel_target`: the dtype name,
        or a :class:`GpuDtype` on a CUDA device) or raise Fallback.

        Only Python and tensor metadata: dynamo traces this (``torch.compile``
        keeps the kernel).  Scripting and ``torch.jit.trace`` use the original
        forward.  Training on a CUDA device keeps the GPU forward in every dtype
        (the backward is the GPU's, :mod:`.ops`)."""
        if torch.jit.is_scripting() or torch.jit.is_tracing():
            raise Fallback("scripting/tracing")
        if torch.compiler.is_compiling() and not torch.compiler.is_dynamo_compiling():
            # non-strict torch.export runs this code on fake tensors: the data-dependent
            # checks (shift mask, relative index) cannot be done
            raise Fallback("non-strict torch.export (use strict=True to export the kernel)")
        differentiating = torch.is_grad_enabled() and (
            x.requires_grad or any(p.requires_grad for p in module.parameters()))
        if module.training or differentiating:
            # Training runs the kernels' forward and backward (SwinV2 on the plain
            # kernel: cosine_kernel_scale, whose preparation autograd differentiates).
            if x.dtype != torch.float32 and x.device.type == "cpu":
                raise Fallback(f"training in {x.dtype} (the backward kernels are float32)")
            if module.training and attention_dropout(module) > 0:
                raise Fallback("attention dropout > 0 in training mode (the kernels have "
                               "no dropout)")
        return kernel_target(x.device, x.dtype)

    def check_once(self, key, is_ok, reason: str) -> None:
        """Fallback(``reason``) unless ``is_ok()``, a check of a module's constant
        buffers: made once per ``key`` in eager mode, and at each trace while dynamo
        compiles (``is_ok`` then reads the real buffer at trace time, and its answer is
        a constant of the graph)."""
        compiling = torch.compiler.is_compiling()
        if compiling or key not in self._checked:
            if not is_ok():
                raise Fallback(reason)
            if not compiling:
                self._checked.add(key)

    def table(self, table, window, heads, index, dtype, class_token=False):
        """The bias table as a contiguous tensor of ``dtype``, after checking the index once
        (``class_token``: BEiT's table of three more rows, and its index)."""
        window = tuple(int(w) for w in window)
        rows = 3 if class_token else 0
        grid_rows = 1
        for w in window:  # _ref.table_rows, in a form dynamo traces (no math.prod(genexpr))
            grid_rows *= 2 * w - 1
        rows += grid_rows
        if tuple(table.shape) != (rows, heads):
            raise Fallback(f"bias table shape {tuple(table.shape)} does not match window "
                           f"{window}{' and a class token' if class_token else ''} and "
                           f"{heads} heads")
        if index is not None:
            kind = "BEiT's" if class_token else "Swin's standard"
            self.check_once(("index", window, class_token),
                            lambda: ops.index_ok(index, window, class_token),
                            f"relative_position_index is not {kind} index")
        # Not detached: under autograd the table's gradient is the kernel's.
        t = table
        if t.dtype != dtype:
            t = t.to(dtype)
        return t.contiguous()

    def window_table(self, m, window, heads, dtype):
        """The bias table of ``m`` (``relative_position_bias_table`` and
        ``relative_position_index`` of its full ``m.window_size``) for the
        possibly smaller ``window`` that Video Swin (torchvision) and MONAI use
        where the map is not larger than the window.  Both then look the bias up
        as ``relative_position_index[:n, :n]`` of the full window: where the
        shrunk window's tokens are the first ``n`` of the full one (only the
        leading axis shrinks) that is the relative position bias of the smaller
        window, a slice of the table's rows (checked once against the buffer);
        otherwise it is no function of the relative position and this raises
        Fallback."""
        full = tuple(int(s) for s in m.window_size)
        window = tuple(int(w) for w in window)
        if window == full:
            return self.table(m.relative_position_bias_table, window, heads,
                              getattr(m, "relative_position_index", None), dtype)
        compiling = torch.compiler.is_compiling()
        rows = None if compiling else self._sub_rows.get(window)
        if rows is None:  # under torch.compile: a constant of the graph (a trace constant)
            found = _checked_sub_rows(m.relative_position_index, full, window)
            rows = False if found is None else torch.tensor(found, dtype=torch.int64)
            if not compiling:
                self._sub_rows[window] = rows
        if rows is False:
            raise Fallback(f"window {full} shrunk to {window}: the module's bias "
                           "(relative_position_index[:n, :n] of the full window) is not a "
                           "relative position bias of the smaller window")
        return self.table(m.relative_position_bias_table[rows], window, heads, None, dtype)

    def cpb_table(self, m, window, heads, index, dtype):
        """SwinV2's continuous position bias ``16 * sigmoid(cpb_mlp(relative_coords_table))``
        as a ``[T, heads]`` table (the sigmoid is element-wise, so applying it before the
        gather equals SwinV2 applying it after); see :meth:`folded_cpb_table`."""
        return self.folded_cpb_table(m, m.cpb_mlp, m.relative_coords_table, window,
                                     heads, index, dtype)

    def folded_cpb_table(self, m, mlp, coords, window, heads, index, dtype):
        """``16 * sigmoid(mlp(coords))`` as a checked ``[T, heads]`` table of ``dtype``,
        computed once per weight version at inference (:meth:`weight_constant`)."""
        def make():
            table = 16.0 * torch.sigmoid(mlp(coords).reshape(-1, heads))
            return self.table(table, window, heads, index, dtype)

        return self.weight_constant(m, "cpb_table", [coords, *mlp.parameters()],
                                    (tuple(window), heads, dtype), make)

    def weight_constant(self, m, what: str, tensors, extra, make):
        """``make()``, a function of ``tensors`` (weights, buffers; None entries
        skipped) and ``extra``, computed once per version of them at inference:
        the cache key is a :class:`.tensors.WeightStamp` of them (their memory,
        which conversions such as ``module.half()`` replace, and ``_version``,
        which in-place updates such as ``load_state_dict``, optimizer steps and
        ``copy_`` bump).  While
        ``torch.compile`` traces, ``make`` is part of the graph instead.  With grad
        enabled on one of the tensors nothing is cached (autograd must see the
        value computed), nor for inference tensors (weights converted under
        ``torch.inference_mode``), which have no version counter."""
        tensors = [t for t in tensors if t is not None]
        cacheable = (not torch.compiler.is_compiling()
                     and not (torch.is_grad_enabled() and any(t.requires_grad for t in tensors))
                     and not any(t.is_inference() for t in tensors))
        if cacheable:
            cached = self._weight_constants.get((id(m), what))
            if cached is not None and cached[0] == extra and cached[1].matches(tensors):
                return cached[2]
        value = make()
        if cacheable:
            self._weight_constants[(id(m), what)] = (extra, WeightStamp(tensors), value)
        return value

    def attention_core(self, m, window, heads, dtype, qkv_bias, scale):
        """``(table, scale, qkv_bias, logit_scale)`` of a Swin (V1) or SwinV2 attention module.

        V1: its learned table, ``scale`` and ``qkv_bias`` as given, no logit
        scale.  V2: the continuous position bias table, scale 1 (the plain
        kernel then runs on q/k prepared by :func:`.projections.cosine_qk` with
        ``logit_scale``, or the cosine kernel takes it: :func:`cosine_kernel_scale`)
        and the key third of ``qkv_bias`` zeroed, as both timm and torchvision
        V2 do.
        """
        index = getattr(m, "relative_position_index", None)
        if not is_swinv2(m):
            table = self.table(m.relative_position_bias_table, window, heads, index, dtype)
            return table, scale, qkv_bias, None
        if qkv_bias is not None:
            # a clone, not detached: under autograd q's and v's bias get their gradient
            qkv_bias = qkv_bias.clone()
            third = qkv_bias.numel() // 3
            qkv_bias[third:2 * third] = 0
        return self.cpb_table(m, window, heads, index, dtype), 1.0, qkv_bias, m.logit_scale

    def mask_config(self, mask, window, num_windows) -> dict:
        """``resolution``/``shift`` kwargs for a window-layout kernel applying ``mask``."""
        if mask is None:
            return {}
        result = cached_match(mask, window)
        if result is None:
            raise Fallback("mask is not a Swin shift mask this kernel reproduces")
        if result == NO_MASK:
            return {}
        if num_windows % mask.shape[0]:
            raise Fallback("number of windows is not a multiple of the mask's")
        res, shift = result
        return {"resolution": res, "shift": shift}

    # -- dispatch ------------------------------------------------------------- #
    def __call__(self, module, *args, **kwargs):
        compiling = torch.compiler.is_compiling()
        try:
            out = self.run(module, *args, **kwargs)
        except _Recording:
            with ops.muted():  # the modules inside the original forward are not needed
                return self._run_original(module, args, kwargs)
        except Fallback as why:
            reason = str(why)
            said = self.required and not isinstance(why, Declined)
            if not self.options.fallback and said:
                raise KernelUnavailable(f"swin_opt: {self.describe()} cannot use the kernel: "
                                        f"{reason}") from None
            if compiling:
                _note_reason(self, reason, said)  # at trace time
                if not torch.compiler.is_exporting():
                    self._compiled_counts[1].add_(1)
            else:
                self.fallback_calls += 1
                self.fallback_reasons[reason] += 1
                if said:
                    warn_fallback(reason, self.describe())
            return self._run_original(module, args, kwargs)
        if compiling:
            if not torch.compiler.is_exporting():
                self._compiled_counts[0].add_(1)
        else:
            self.kernel_calls += 1
        return out

    def _run_original(self, module, args, kwargs):
        """The original method on the call's arguments, plus the residual a "residual"
        patch passed (which the original does not take)."""
        args, kwargs = self.original_args(args, kwargs)
        residual = kwargs.pop("residual", None) if self.fuses_residual else None
        out = self.original(module)(*args, **kwargs)
        return out if residual is None else out + residual

    def original_args(self, args, kwargs):
        """The arguments of the original method where this patch falls back: the
        call's own, unless the patch receives stand-ins of swin_opt's that the
        original would not take (:class:`.table_bias.TableBiasConsumer`)."""
        return args, kwargs

    def describe(self) -> str:
        """The patched module, for messages: framework, name and method."""
        return f"{self.framework} module {self.name or '<root>'} ({self.attr})"

    def run(self, module, *args, **kwargs):  # pragma: no cover - abstract
        raise NotImplementedError

    def stats(self) -> dict:
        """Counts: eager calls plus those of torch.compile'd code (whose fallback reasons
        are those seen while compiling)."""
        compiled_kernel, compiled_fallback = (int(n) for n in self._compiled_counts.tolist())
        return {"name": self.name, "framework": self.framework, "kind": self.kind,
                "method": self.attr, "kernel_calls": self.kernel_calls + compiled_kernel,
                "fallback_calls": self.fallback_calls + compiled_fallback,
                "fallback_reasons": dict(self.fallback_reasons),
                "compiled_fallback_reasons": sorted(self.compiled_fallback_reasons)}


def _sub_table_rows(full, window):
    """Rows of the ``full`` window's bias table holding the relative positions of the
    smaller ``window``, in ``window``'s own table order (int64 ``[T_window]``)."""
    rows = np.zeros((), dtype=np.int64)
    for f, w in zip(full, window):
        offsets = np.arange(-(w - 1), w) + (f - 1)  # the delta, as a row along this axis of full
        rows = rows[..., None] * (2 * f - 1) + offsets
    return rows.reshape(-1)


@trace_constant
def _checked_sub_rows(index, full, window):
    """:func:`_sub_table_rows` as a tuple when ``index[:n, :n]`` is the smaller window's
    relative position index in those rows, else None.  NumPy on the buffer's data:
    a :func:`~.tracing.trace_constant`."""
    rows = _sub_table_rows(full, window)
    n = math.prod(window)
    if tuple(index.shape) != (math.prod(full),) * 2:
        return None
    got = index[:n, :n].detach().to("cpu").numpy()
    if not np.array_equal(got, rows[_ref.relative_index(window)]):
        return None
    return tuple(int(r) for r in rows)


def _items(mapping) -> tuple:
    """``mapping`` as sorted ``(name, value)`` pairs of plain (hashable) Python values."""
    return tuple(sorted((k, _freeze(v)) for k, v in mapping.items()))


def _freeze(v):
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, bool) or v is None or isinstance(v, (str, float)):
        return v
    if isinstance(v, int) or isinstance(v, torch.SymInt):
        return int(v)  # a SymInt (dynamic shape) is specialised: kernels are per shape
    return str(v)  # e.g. a Path (cache_dir)


def drops(module) -> bool:
    """Whether ``module`` (a dropout or stochastic-depth layer, or Identity) changes
    its input in this call: training mode with a positive rate."""
    rate = getattr(module, "p", getattr(module, "drop_prob", 0.0))
    return bool(module.training and rate)


def fuses_residual(fn) -> bool:
    """Whether calling ``fn`` (a patched method, or a module whose ``forward`` is
    patched) runs a patch that takes ``residual=`` (:attr:`Patch.fuses_residual`)."""
    if isinstance(fn, torch.nn.Module):
        fn = vars(fn).get("forward")
    return bool(getattr(getattr(fn, "patch", None), "fuses_residual", False))


class ResidualBlock(Patch):
    """``forward(x)`` of a pre-norm Swin block with its two residual adds moved into
    the kernels' epilogues::

        x = x + drop(attention(norm1(x)))   ->  attention(norm1(x), residual=x)
        x = x + drop(mlp(norm2(x)))         ->  mlp(norm2(x), residual=x)

    The output projection and fc2 then add the shortcut to their product's tiles
    in registers (:func:`.projections.linear`'s and ``swin_opt::mlp``'s
    ``residual``): two passes over the feature map fewer per block. Installed on
    blocks whose attention runs a patch that fuses it (:meth:`installable`); the
    MLP fuses its add where it is patched (:mod:`.mlp`), else torch adds.
    Stochastic depth in training falls back to the block's own forward, which
    calls the patched attention and MLP: counted, not warned about, never
    refused."""

    attr = "forward"
    kind = "residual"
    required = False

    @staticmethod
    def parts(blk):  # pragma: no cover - per framework
        """``(norm1, attention, norm2, mlp, drops)``: ``attention`` what the block
        calls (a method or a module), ``drops`` its stochastic-depth layers."""
        raise NotImplementedError

    @classmethod
    def installable(cls, blk) -> bool:
        return fuses_residual(cls.parts(blk)[1])

    def run(self, blk, x):
        norm1, attention, norm2, mlp, drop_layers = self.parts(blk)
        if any(drops(d) for d in drop_layers):
            raise Fallback("stochastic depth in training (the shortcut is added after it)")
        if not fuses_residual(attention):
            raise Fallback("the block's attention is not patched")
        x = attention(norm1(x), residual=x)
        if fuses_residual(mlp):
            return mlp(norm2(x), residual=x)
        return x + mlp(norm2(x))


@trace_constant
def _note_reason(patch, reason: str, said: bool) -> None:
    """Record (and, ``said``, warn once about) a fallback reason seen while
    torch.compile traces.  A :func:`~.tracing.trace_constant`: runs at trace time
    only, and dynamo does not guard on the set it fills."""
    patch.compiled_fallback_reasons.add(reason)
    if said:
        warn_fallback(reason, patch.describe())


def attention_dropout(module) -> float:
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


def is_swinv2(module) -> bool:
    """Whether ``module`` is a SwinV2 attention module (cosine attention, continuous
    position bias) of timm or torchvision."""
    return all(hasattr(module, a) for a in ("logit_scale", "cpb_mlp", "relative_coords_table"))
