"""The kernels as PyTorch operators: ``torch.ops.swin_opt.window_attention`` and
``torch.ops.swin_opt.window_attention_packed``, and the oneDNN projections
around them, ``torch.ops.swin_opt.linear``.

Schemas::

    swin_opt::window_attention(Tensor q, Tensor k, Tensor v, Tensor? table,
                               Tensor? pad_qkv, str config) -> Tensor
    swin_opt::window_attention_packed(Tensor qkv, Tensor? table, Tensor? pad_qkv,
                                      str config) -> Tensor
    swin_opt::window_attention_backward(Tensor q, Tensor k, Tensor v, Tensor? table,
                                        Tensor out, Tensor dout, str config)
        -> (Tensor dq, Tensor dk, Tensor dv, Tensor dtable)
    swin_opt::window_attention_packed_backward(Tensor qkv, Tensor? table, Tensor out,
                                               Tensor dout, str config)
        -> (Tensor dqkv, Tensor dtable)
    swin_opt::linear(Tensor x, Tensor weight, Tensor? bias) -> Tensor
    swin_opt::window_attention_cosine(Tensor q, Tensor k, Tensor v, Tensor? table,
                                      Tensor logit_scale, Tensor? pad_qkv,
                                      str config) -> Tensor
    swin_opt::window_attention_packed_cosine(Tensor qkv, Tensor? table,
                                             Tensor logit_scale, Tensor? pad_qkv,
                                             str config) -> Tensor

The ``_cosine`` ops run SwinV2's cosine kernels (``cosine=True``): q and k are
normalized inside the kernel and ``logit_scale`` is the raw ``[heads]``
float32 parameter.

``config`` names the kernel: a canonical JSON object of the arguments of
:func:`swin_opt.torch.compile_kernel` (window, heads, head_dim and the
compile options; see :func:`kernel_key`).  It is resolved at run time to a
compiled kernel through the in-process cache (compiling it, through the
on-disk cache, the first time a process sees it), so graphs captured by
``torch.compile``/``torch.export`` hold a string, never a pointer.

Each op has a fake (meta) implementation giving the output's shape and dtype
(window layout ``[num_windows, N, C]``, token layout ``[batch, L, C]``) and an
autograd formula: the attention ops save q, k, v (or qkv), the table and
their output, and their backward is the ``*_backward`` operator, the compiled
gradient kernel (``swin-aot --grad``, float32; built on first use under a
config with ``"grad": true``), which returns dq, dk, dv (or dqkv) and the
table's gradient.  Being operators with fake implementations, the backward
kernels are traced by AOTAutograd, so ``torch.compile`` trains through them
too.  Padding tokens count as zeros in the backward, so the patches do
not use the kernels for padded maps under autograd (the padding rows are
the qkv bias, whose gradient would be lost); ``linear`` has no backward (the
patches use ``F.linear`` under autograd).

:func:`resolve_spec` and :func:`index_ok` are trace constants
(:func:`.tracing.trace_constant`), as are the data-dependent checks of the
other modules: while ``torch.compile`` traces a patched module they run
once, eagerly, on the real module buffers (the data dependent checks, the
kernel build), and their results are constants of the graph.

This module also keeps the process's state of kernels: those loaded
(:func:`kernel_for`, :func:`loaded`), and :func:`recording`, in which the
patches record the configurations they need instead of building them
(:mod:`.warmup`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

from .. import build, log
from .. import reference as _ref
from ..config import make_config
from ..errors import CompileError, SwinAotNotFoundError
from .fallback import Fallback
from .tensors import compile_kernel, require_torch
from .tracing import apply_trace_constants, trace_constant

try:
    import torch
except ImportError:  # swin_opt.torch imports without PyTorch; its entry points need it
    torch = None

_lock = threading.Lock()
_registered = False
_kernels: Dict[str, Any] = {}  # config string -> Kernel


class KernelSpec(NamedTuple):
    """What the patches know of a kernel before calling it: ``kern.config`` of a
    :class:`KernelCall`, with the fields of :class:`swin_opt.KernelConfig` the
    patches read.  All Python constants (dynamo keeps it as one; it cannot read
    the properties of a frozen dataclass)."""

    key: str  # the op's config string
    window: Tuple[int, ...]  # after Swin's small-map rule
    shift: Optional[Tuple[int, ...]]
    resolution: Optional[Tuple[int, ...]]
    layout: str
    packed_qkv: bool
    windows_per_image: Optional[int]
    dtype: str  # f32 / f16 / bf16
    error: Optional[str]  # why there is no kernel (None: there is one)
    pending: bool  # recorded for a later (concurrent) build; not built yet
    # the other KernelConfig fields and properties, as plain values
    heads: int = 0
    head_dim: int = 0
    scale: Optional[float] = None
    padding: Optional[str] = None
    padded_resolution: Optional[Tuple[int, ...]] = None
    tokens_per_window: int = 0
    table_rows: int = 0
    channels: int = 0
    cosine: bool = False


# --------------------------------------------------------------------------- #
# Kernel identification
# --------------------------------------------------------------------------- #
def _plain(v):
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return float(v)
    return str(v)


def kernel_key(window, heads: int, head_dim: int, **options) -> str:
    """The op's ``config`` string for ``compile_kernel(window, heads, head_dim, **options)``."""
    spec = {"window": _plain(tuple(window)), "heads": int(heads), "head_dim": int(head_dim),
            "options": {k: _plain(v) for k, v in options.items() if v is not None}}
    if "cache_dir" in spec["options"]:
        spec["options"]["cache_dir"] = str(options["cache_dir"])
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))


def _parse_key(key: str) -> tuple:
    try:
        spec = json.loads(key)
        opts = dict(spec["options"])
        for name in ("resolution", "shift", "window"):
            if isinstance(opts.get(name), list):
                opts[name] = tuple(opts[name])
        return tuple(spec["window"]), spec["heads"], spec["head_dim"], opts
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"swin_opt: malformed kernel configuration {key!r}: {exc}") from None


def loaded(key: str) -> bool:
    """Whether this process has the kernel ``key`` names (built or loaded)."""
    return key in _kernels


def loaded_keys() -> set:
    """The keys of the kernels this process has."""
    with _lock:
        return set(_kernels)


def forget_kernels() -> None:
    """Drop this process's kernels: the next call of each resolves its key again
    (through the in-process and the disk cache)."""
    with _lock:
        _kernels.clear()


def kernel_for(key: str):
    """The compiled :class:`swin_opt.Kernel` a config string names (compiled on first use)."""
    kern = _kernels.get(key)
    if kern is None:
        window, heads, head_dim, opts = _parse_key(key)
        kern = compile_kernel(window, heads, head_dim, **opts)
        with _lock:
            kern = _kernels.setdefault(key, kern)
    return kern


# Recording (warmup): the keys seen while recording, built later all at once.
_recording: Optional[Dict[str, None]] = None
#: > 0 while a recording patch runs its original forward: the modules nested in
#: it (timm's WindowAttention in a block) are not run by the swapped model.
_muted = 0
_specs: Dict[tuple, KernelSpec] = {}
_hinted = False  # the warmup hint of _kernel_first_use was given


class _Recorder(dict):
    """The ordered set of recorded keys, calling ``on_key`` for each new one."""

    def __init__(self, on_key):
        super().__init__()
        self._on_key = on_key

    def setdefault(self, key, default=None):
        if key not in self:
            super().__setitem__(key, default)
            if self._on_key is not None:
                self._on_key(key)
        return default


@contextlib.contextmanager
def recording(on_key=None):
    """Within the block, patched modules record the kernel configurations they need
    (and run their original forward) instead of building kernels; ``on_key(key)`` is
    called for each new one as it is met.  Yields the list of recorded config
    strings (filled when the block exits)."""
    global _recording
    keys: List[str] = []
    with _lock:
        if _recording is not None:
            raise RuntimeError("swin_opt: warmup is already recording in this process")
        _recording = _Recorder(on_key)
    try:
        yield keys
    finally:
        with _lock:
            keys.extend(_recording)
            _recording = None


@contextlib.contextmanager
def muted():
    """While a recording patch runs its original forward: the patched modules nested
    in it do not record (the swapped model does not run them)."""
    global _muted
    _muted += 1
    try:
        yield
    finally:
        _muted -= 1


@trace_constant
def resolve_spec(window, heads, head_dim, scale, dtype, config, options) -> KernelSpec:
    """The :class:`KernelSpec` of a kernel configuration; builds the kernel (once per
    process) unless :func:`swin_opt.torch.warmup` is recording.

    ``config`` and ``options`` are sorted ``(name, value)`` tuples (the
    configuration and :func:`swap_attention`'s compile options).  Never
    raises: a configuration without a kernel gives a spec with ``error`` set.
    A :func:`~.tracing.trace_constant`: dynamo runs it at trace time only.
    """
    memo = (window, heads, head_dim, scale, dtype, config, options)
    spec = _specs.get(memo)
    if spec is not None and not (spec.pending and _recording is None):
        if spec.pending and _recording is not None and not _muted:
            _recording.setdefault(spec.key, None)
        return spec
    kwargs = dict(config)
    kwargs.update(options)
    kwargs["scale"] = scale
    kwargs["dtype"] = dtype
    known = {k: v for k, v in kwargs.items() if k != "cache_dir"}
    try:
        cfg = make_config(window, heads, head_dim, **known)
    except (ValueError, TypeError, NotImplementedError) as exc:
        return _remember(memo, _error_spec(f"no kernel: {exc}"))
    key = kernel_key(window, heads, head_dim, **kwargs)
    pending = False
    error = None
    if _recording is not None and key not in _kernels:
        if not _muted:
            _recording.setdefault(key, None)
        pending = True
    else:
        try:
            _kernel_first_use(key)
        except (CompileError, SwinAotNotFoundError, NotImplementedError,
                ValueError, OSError) as exc:
            error = f"no kernel: {exc}"  # the patches fall back, and warn once
    spec = KernelSpec(key=key, window=cfg.window, shift=cfg.shift, resolution=cfg.resolution,
                      layout=cfg.layout, packed_qkv=cfg.packed_qkv,
                      windows_per_image=cfg.windows_per_image, dtype=cfg.dtype, error=error,
                      pending=pending, heads=cfg.heads, head_dim=cfg.head_dim, scale=cfg.scale,
                      padding=cfg.padding, padded_resolution=cfg.padded_resolution,
                      tokens_per_window=cfg.tokens_per_window, table_rows=cfg.table_rows,
                      channels=cfg.channels, cosine=cfg.cosine)
    return _remember(memo, spec)


def _kernel_first_use(key: str) -> None:
    """:func:`kernel_for` from a patched module's call. Each build says so itself
    (:func:`swin_opt.log.info`); the first time a model's call builds one, a line
    also says how to build them all ahead of time."""
    global _hinted
    if key in _kernels:
        return
    before = build.builds()
    kernel_for(key)
    if not _hinted and build.builds() > before:
        _hinted = True
        log.info("swin_opt: kernels are built when a swapped model first needs them; "
                 "swin_opt.torch.warmup(model, example) builds them ahead of time, "
                 "concurrently")


def _error_spec(error: str) -> KernelSpec:
    return KernelSpec("", (), None, None, "windows", False, None, "f32", error, False)


def _remember(memo, spec: KernelSpec) -> KernelSpec:
    with _lock:
        _specs[memo] = spec
    return spec


@trace_constant
def index_ok(index, window) -> bool:
    """Whether ``index`` is Swin's standard relative position index for ``window``."""
    want = _ref.relative_index(tuple(window)).reshape(-1)
    got = index.detach().to("cpu").reshape(-1).numpy()
    return bool(got.shape == want.shape and np.array_equal(got, want))


# --------------------------------------------------------------------------- #
# The operators
# --------------------------------------------------------------------------- #
class KernelCall:
    """What :meth:`.patching.Patch.kernel` returns: called like the kernel
    (``kern(q, k, v, table)``, ``kern(qkv, table, pad_qkv=...)``), dispatching
    through the custom ops.  ``config`` is the :class:`KernelSpec`."""

    def __init__(self, spec: KernelSpec):
        self.config = spec
        self.key = spec.key

    def __call__(self, q, k=None, v=None, table=None, pad_qkv=None, logit_scale=None):
        ops = torch.ops.swin_opt
        spec = self.config
        padded = spec.layout == "tokens" and spec.padded_resolution != spec.resolution
        if padded and pad_qkv is not None and torch.is_grad_enabled() and any(
                t is not None and t.requires_grad for t in (q, k, v, table)):
            raise Fallback("autograd on a padded map (the padding rows' gradient, the qkv "
                            "bias's, is not computed by the backward kernel)")
        if self.config.cosine:
            if logit_scale is None:
                raise TypeError("a cosine kernel takes logit_scale=")
            if self.config.packed_qkv:
                return ops.window_attention_packed_cosine(q, k, logit_scale, pad_qkv, self.key)
            return ops.window_attention_cosine(q, k, v, table, logit_scale, pad_qkv, self.key)
        if self.config.packed_qkv:
            if v is not None or table is not None:
                raise TypeError("a packed_qkv kernel is called as kern(qkv, table, pad_qkv=...)")
            return ops.window_attention_packed(q, k, pad_qkv, self.key)
        return ops.window_attention(q, k, v, table, pad_qkv, self.key)


@functools.lru_cache(maxsize=None)
def grad_key(key: str) -> str:
    """The config string of ``key``'s kernel compiled with its backward (``grad=True``)."""
    spec = json.loads(key)
    spec["options"]["grad"] = True
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))


def _attention_setup(ctx, inputs, output):
    """Saves the primal inputs (q, k, v, or qkv; the table) and the output."""
    *tensors, pad_qkv, config = inputs
    ctx.config = config
    ctx.has_table = tensors[-1] is not None
    ctx.save_for_backward(*tensors[:-1], tensors[-1] if ctx.has_table else None, output)


def _attention_backward(ctx, dout):
    """``(dq, dk, dv | dqkv, dtable, None, None)`` through the backward operators
    (``swin_opt::window_attention_backward[_packed]``: operators, not a direct call,
    so that AOTAutograd traces them under ``torch.compile``)."""
    *inputs, table, out = ctx.saved_tensors
    ops = torch.ops.swin_opt
    if len(inputs) == 1:
        grads = ops.window_attention_packed_backward(inputs[0], table, out, dout, ctx.config)
    else:
        grads = ops.window_attention_backward(*inputs, table, out, dout, ctx.config)
    dtable = grads[-1] if ctx.has_table else None
    return (*grads[:-1], dtable, None, None)


def _linear_setup(ctx, inputs, output):
    x, weight, bias = inputs
    ctx.has_bias = bias is not None
    ctx.save_for_backward(x, weight)


def _linear_backward(ctx, dy):
    """``dx = dy W`` through oneDNN again (``swin_opt::linear`` of ``dy`` and ``Wᵀ``:
    2.4x MKL's ``mm`` on the projections of a Swin block), ``db`` by torch, and
    ``dW = dyᵀ x`` through oneDNN where that pays for transposing both operands:
    when the rows reduced over are few against the features (measured on Swin-T's
    projections, 2 threads: 1.5-1.9x at stages 3-4, M <= 4 K; 0.45-0.9x at stages
    1-2, M >= 32 K, which keep MKL's ``mm``)."""
    x, weight = ctx.saved_tensors
    dx = dw = db = None
    if ctx.needs_input_grad[0]:
        dx = torch.ops.swin_opt.linear(dy, weight.t().contiguous(), None)
    if ctx.needs_input_grad[1] or (ctx.has_bias and ctx.needs_input_grad[2]):
        dy2 = dy.reshape(-1, dy.shape[-1])
        if ctx.needs_input_grad[1]:
            x2 = x.reshape(-1, x.shape[-1])
            if x2.shape[0] <= 8 * x2.shape[1]:
                dw = torch.ops.swin_opt.linear(dy2.t().contiguous(), x2.t().contiguous(), None)
            else:
                dw = dy2.t().mm(x2)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = dy2.sum(0)
    return dx, dw, db


def _run_backward(inputs: list, table, out, dout, config: str):
    """The gradient kernel of ``config`` (compiled with ``grad=True``) on contiguous
    tensors; a baked table's gradient (no ``table``) is computed and dropped."""
    kern = kernel_for(grad_key(config))
    return kern.backward(*[t.contiguous() for t in inputs],
                         None if table is None else table.contiguous(), out.contiguous(),
                         dout.contiguous())


def _table_shape(config: str) -> tuple:
    window, heads, _, _ = _parse_key(config)
    rows = 1
    for w in window:
        rows *= 2 * w - 1
    return rows, heads


def _no_grad_error(name):
    def setup_context(ctx, inputs, output):
        raise RuntimeError(
            f"swin_opt::{name} has no backward: its inputs require grad, and using the kernel "
            "would cut the autograd graph. Run under torch.no_grad() / torch.inference_mode(), "
            "or let the patched module fall back to its original forward (it does in training "
            "mode and when autograd needs its parameters)")

    def backward(ctx, grad):  # pragma: no cover - setup_context raises first
        raise RuntimeError(f"swin_opt::{name} has no backward")

    return setup_context, backward


def _run(kern, given: list, pad_qkv, **extra):
    args = [None if t is None else t.contiguous() for t in given]
    if pad_qkv is not None:
        pad_qkv = pad_qkv.float().contiguous()
    if kern.config.layout == "tokens":
        return kern(*args, pad_qkv=pad_qkv, **extra)
    return kern(*args, **extra)


def _logit_scale(t):
    """SwinV2's ``logit_scale`` (``[heads, 1, 1]`` in the frameworks) as the kernels'
    contiguous float32 ``[heads]``."""
    return t.detach().reshape(-1).float().contiguous()


def register() -> None:
    """Define the ``swin_opt::`` operators (once per process; needs torch)."""
    global _registered
    if _registered:
        return
    require_torch()
    with _lock:
        if _registered:
            return

        @torch.library.custom_op("swin_opt::window_attention", mutates_args=(), schema=(
            "(Tensor q, Tensor k, Tensor v, Tensor? table, Tensor? pad_qkv, str config) "
            "-> Tensor"))
        def window_attention(q, k, v, table, pad_qkv, config):
            kern = kernel_for(config)
            return _run(kern, [q, k, v, table], pad_qkv)

        @window_attention.register_fake
        def _(q, k, v, table, pad_qkv, config):
            if q.dim() == 4:  # window layout [nW, heads, N, d] -> [nW, N, heads * d]
                return q.new_empty((q.shape[0], q.shape[2], q.shape[1] * q.shape[3]))
            return q.new_empty(q.shape)  # token layout [B, L, C]

        @torch.library.custom_op("swin_opt::window_attention_packed", mutates_args=(), schema=(
            "(Tensor qkv, Tensor? table, Tensor? pad_qkv, str config) -> Tensor"))
        def window_attention_packed(qkv, table, pad_qkv, config):
            kern = kernel_for(config)
            return _run(kern, [qkv, table], pad_qkv)

        @window_attention_packed.register_fake
        def _(qkv, table, pad_qkv, config):  # [B, L, 3, heads, d] -> [B, L, heads * d]
            return qkv.new_empty((qkv.shape[0], qkv.shape[1], qkv.shape[3] * qkv.shape[4]))

        @torch.library.custom_op("swin_opt::window_attention_cosine", mutates_args=(),
                                 schema=("(Tensor q, Tensor k, Tensor v, Tensor? table, "
                                         "Tensor logit_scale, Tensor? pad_qkv, str config) "
                                         "-> Tensor"))
        def window_attention_cosine(q, k, v, table, logit_scale, pad_qkv, config):
            kern = kernel_for(config)
            return _run(kern, [q, k, v, table], pad_qkv, logit_scale=_logit_scale(logit_scale))

        @window_attention_cosine.register_fake
        def _(q, k, v, table, logit_scale, pad_qkv, config):
            if q.dim() == 4:
                return q.new_empty((q.shape[0], q.shape[2], q.shape[1] * q.shape[3]))
            return q.new_empty(q.shape)

        @torch.library.custom_op("swin_opt::window_attention_packed_cosine", mutates_args=(),
                                 schema=("(Tensor qkv, Tensor? table, Tensor logit_scale, "
                                         "Tensor? pad_qkv, str config) -> Tensor"))
        def window_attention_packed_cosine(qkv, table, logit_scale, pad_qkv, config):
            kern = kernel_for(config)
            return _run(kern, [qkv, table], pad_qkv, logit_scale=_logit_scale(logit_scale))

        @window_attention_packed_cosine.register_fake
        def _(qkv, table, logit_scale, pad_qkv, config):
            return qkv.new_empty((qkv.shape[0], qkv.shape[1], qkv.shape[3] * qkv.shape[4]))

        @torch.library.custom_op("swin_opt::linear", mutates_args=(), schema=(
            "(Tensor x, Tensor weight, Tensor? bias) -> Tensor"))
        def linear(x, weight, bias):
            """``x @ weightᵀ + bias`` through oneDNN, opaque to inductor (see
            :func:`swin_opt.torch.projections.linear`)."""
            return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")

        @linear.register_fake
        def _(x, weight, bias):
            return x.new_empty((*x.shape[:-1], weight.shape[0]))

        @torch.library.custom_op("swin_opt::window_attention_backward", mutates_args=(),
                                 schema=("(Tensor q, Tensor k, Tensor v, Tensor? table, "
                                         "Tensor out, Tensor dout, str config) "
                                         "-> (Tensor, Tensor, Tensor, Tensor)"))
        def window_attention_backward(q, k, v, table, out, dout, config):
            return _run_backward([q, k, v], table, out, dout, config)

        @window_attention_backward.register_fake
        def _(q, k, v, table, out, dout, config):
            return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape),
                    q.new_empty(_table_shape(config)))

        @torch.library.custom_op("swin_opt::window_attention_packed_backward", mutates_args=(),
                                 schema=("(Tensor qkv, Tensor? table, Tensor out, Tensor dout, "
                                         "str config) -> (Tensor, Tensor)"))
        def window_attention_packed_backward(qkv, table, out, dout, config):
            return _run_backward([qkv], table, out, dout, config)

        @window_attention_packed_backward.register_fake
        def _(qkv, table, out, dout, config):
            return qkv.new_empty(qkv.shape), qkv.new_empty(_table_shape(config))

        for op in (window_attention, window_attention_packed):
            op.register_autograd(_attention_backward, setup_context=_attention_setup)
        linear.register_autograd(_linear_backward, setup_context=_linear_setup)
        # The cosine kernels have no backward (yet): their autograd refuses.
        for op, name in ((window_attention_cosine, "window_attention_cosine"),
                         (window_attention_packed_cosine, "window_attention_packed_cosine")):
            setup, backward = _no_grad_error(name)
            op.register_autograd(backward, setup_context=setup)

        apply_trace_constants()
        _registered = True
