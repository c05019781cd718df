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

On a CUDA device
----------------
Each operator also has a CUDA implementation (:data:`CUDA_IMPLEMENTATIONS`,
registered with the operators).  The forward runs the configuration's GPU
kernel (``swin-aot --target=nvptx``, config :func:`gpu_key`) for the chip of
the tensors' device (:func:`cuda_chip`: ``sm_XY`` of its compute
capability), built once per configuration and chip and cached like every
kernel (on disk, and in this process by :func:`kernel_for`), on the CUDA
tensors in place (:func:`swin_opt.cuda.torch_arguments`,
:func:`swin_opt.cuda.torch_launch`): on torch's current stream of that
device, the device made current (the host runtime loads its module once per
device's context), the output from ``torch.empty``.  Nothing on that path
waits for the device or allocates outside torch, so the calls can be captured
in CUDA graphs once a first call has loaded the kernel on the device.  The
layouts are the CPU's; float16 and bfloat16 run the tensor-core warp kernel,
float32 the row kernel (or, where the user allows TF32, the warp kernel on
bf16 terms: :func:`gpu_key`); the table and ``pad_qkv`` are converted to q's dtype
(the GPU kernels take them in the element type; under autocast the patches
hand a float32 table).  Where there is no GPU kernel for the configuration
(``swin-aot`` or the CUDA toolkit missing; a configuration ``swin-aot``
refuses, such as a window of more than 1024 tokens) the operator
computes the same with torch's operators on the device
(:mod:`.attention_math`) and warns once per reason; the patches find that out
before calling (:func:`resolve_spec` with the chip) and run the module's
original forward instead.  The backward operators run the GPU's backward
kernel (the configuration compiled with ``grad=True``; ``swin-aot --grad
--target=nvptx``) the same way: dq, dk, dv (or dqkv) in the inputs' dtype and
the table's gradient summed in float32 per block and then over the blocks in
a fixed order (deterministic, no atomics), handed back in the inputs' dtype
as the operator's contract says.  Where that kernel cannot be built, torch's
operators compute the gradients on the device (:func:`.attention_math.backward`:
the attention recomputed in float32, the table's gradient summed per row in a
fixed order, deterministic too).
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

from .. import build, log
from .. import cuda as _cuda
from .. import reference as _ref
from ..config import make_config
from ..dtypes import normalize_dtype
from ..errors import CompileError, SwinAotNotFoundError
from . import attention_math as _attention_math
from .fallback import Fallback, warn_fallback
from .tensors import compile_kernel, once, require_torch
from .tracing import apply_trace_constants, trace_constant

try:
    import torch
except ImportError:  # swin_opt.torch imports without PyTorch; its entry points need it
    torch = None

_lock = threading.Lock()
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
    #: the key of the kernel built for it: ``key``, or its GPU kernel's (:func:`gpu_key`)
    build_key: str = ""


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
#: The chip of a :func:`recording` of GPU kernels on the CPU, else None.
_recording_chip: Optional[str] = None
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
def recording(on_key=None, chip: Optional[str] = None):
    """Within the block, patched modules record the kernel configurations they need
    (and run their original forward) instead of building kernels; ``on_key(key)`` is
    called for each new one as it is met.  Yields the list of recorded config
    strings (filled when the block exits).  ``chip`` (``"sm_90"``): calls on CPU
    tensors record the GPU kernels of that chip, those a CUDA device of it would
    need (:func:`.patching.kernel_target`), so that they are built without it."""
    global _recording, _recording_chip
    keys: List[str] = []
    with _lock:
        if _recording is not None:
            raise RuntimeError("swin_opt: warmup is already recording in this process")
        _recording = _Recorder(on_key)
        _recording_chip = chip
    try:
        yield keys
    finally:
        with _lock:
            keys.extend(_recording)
            _recording = None
            _recording_chip = None


def recording_chip() -> Optional[str]:
    """The ``chip`` of the :func:`recording` under way, else None."""
    return _recording_chip


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


#: What a kernel build may fail with (the patches then fall back).
BUILD_ERRORS = (CompileError, SwinAotNotFoundError, NotImplementedError, ValueError, OSError)


@trace_constant
def resolve_spec(window, heads, head_dim, scale, dtype, config, options,
                 chip=None) -> KernelSpec:
    """The :class:`KernelSpec` of a kernel configuration; builds the kernel (once per
    process) unless :func:`swin_opt.torch.warmup` is recording.

    ``config`` and ``options`` are sorted ``(name, value)`` tuples (the
    configuration and :func:`swap_attention`'s compile options).  ``chip``
    (``"sm_90"``): the call is on a CUDA device of that chip, and the kernel
    built is the configuration's GPU kernel (:func:`gpu_key`, as
    :func:`tf32_allowed` says now), not the CPU's.
    Never raises: a configuration without a kernel gives a spec with
    ``error`` set.  A :func:`~.tracing.trace_constant`: dynamo runs it at
    trace time only.
    """
    allow_tf32 = chip is not None and tf32_allowed()
    memo = (window, heads, head_dim, scale, dtype, config, options, chip, allow_tf32)
    spec = _specs.get(memo)
    if spec is not None and not (spec.pending and _recording is None):
        if spec.pending and _recording is not None and not _muted:
            _recording.setdefault(spec.build_key, None)
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
    build_key = key if chip is None else gpu_key(key, chip, allow_tf32)
    pending = False
    error = None
    if _recording is not None and build_key not in _kernels:
        if not _muted:
            _recording.setdefault(build_key, None)
        pending = True
    else:
        try:
            _kernel_first_use(build_key)
        except BUILD_ERRORS as exc:  # the patches fall back, and warn once
            error = f"no kernel: {exc}" if chip is None else f"no GPU kernel for {chip}: {exc}"
    spec = KernelSpec(key=key, window=cfg.window, shift=cfg.shift, resolution=cfg.resolution,
                      layout=cfg.layout, packed_qkv=cfg.packed_qkv,
                      windows_per_image=cfg.windows_per_image, dtype=cfg.dtype, error=error,
                      pending=pending, heads=cfg.heads, head_dim=cfg.head_dim, scale=cfg.scale,
                      padding=cfg.padding, padded_resolution=cfg.padded_resolution,
                      tokens_per_window=cfg.tokens_per_window, table_rows=cfg.table_rows,
                      channels=cfg.channels, cosine=cfg.cosine, build_key=build_key)
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
def index_ok(index, window, class_token=False) -> bool:
    """Whether ``index`` is Swin's standard relative position index for ``window``
    (with ``class_token``: BEiT's, :func:`swin_opt.reference.class_token_relative_index`)."""
    make = _ref.class_token_relative_index if class_token else _ref.relative_index
    want = make(tuple(window)).reshape(-1)
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


# --------------------------------------------------------------------------- #
# The operators' CUDA implementations (module docstring: "On a CUDA device")
# --------------------------------------------------------------------------- #
#: The options of a config string that its GPU kernel's key drops or replaces.
_REPLACED_FOR_GPU = ("cpu", "parallel", "grad", "target", "chip")


def tf32_allowed() -> bool:
    """Whether the user lets float32 matmuls on CUDA round their operands
    (``torch.backends.cuda.matmul.allow_tf32``, which
    ``torch.set_float32_matmul_precision("high")`` sets: TF32, or "each float32
    number as the sum of two bfloat16 numbers" in torch's words)."""
    return bool(torch.backends.cuda.matmul.allow_tf32)


@functools.lru_cache(maxsize=None)
def gpu_key(key: str, chip: str, allow_tf32: bool = False) -> str:
    """The config string of the GPU kernel (``swin-aot --target=nvptx --chip=chip``)
    of the configuration ``key`` names: what the CUDA implementations run, built
    and cached as every kernel is (:func:`kernel_for`: on disk and in this
    process). The GPU takes the warp kernel for float16/bfloat16; for float32
    the row kernel (exact f32), or with ``allow_tf32`` (:func:`tf32_allowed`) the
    warp kernel on two bf16 terms per operand (``f32_mma="bf16x3"``: 2^-16 of
    each product, finer than TF32's 2^-11), as does its backward (:func:`grad_key`
    of this key: the backward's products, P and dS included, on the same terms)."""
    spec = json.loads(key)
    options = {k: v for k, v in spec["options"].items() if k not in _REPLACED_FOR_GPU}
    if options.get("kernel") == "tiles":
        del options["kernel"]  # the CPU's kernel
    if allow_tf32 and normalize_dtype(options.get("dtype", "float32")) == "f32":
        options["f32_mma"] = "bf16x3"
    spec["options"] = dict(options, target="nvptx", chip=chip)
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))


_chips: Dict[Optional[int], str] = {}


@trace_constant
def cuda_chip(index: Optional[int]) -> str:
    """``sm_XY`` of CUDA device ``index`` (None: the current one), from its compute
    capability: the chip its GPU kernels are built for. A
    :func:`~.tracing.trace_constant`, asked once per device."""
    chip = _chips.get(index)
    if chip is None:
        major, minor = torch.cuda.get_device_capability(index)
        chip = _chips.setdefault(index, f"sm_{major}{minor}")
    return chip


#: GPU kernel key -> why it has no kernel (not built again on every call)
_gpu_failed: Dict[str, str] = {}


def gpu_kernel(config: str, device, grad: bool = False) -> Tuple[Optional[Any], Optional[str]]:
    """``(GpuKernel, None)`` for the operator configuration ``config`` on the CUDA
    ``device`` (with its backward: ``grad``), or ``(None, why)`` when it has none
    (a build failure is remembered: it is not attempted again in this process)."""
    chip = cuda_chip(device.index)
    key = gpu_key(config, chip, tf32_allowed())
    if grad:
        key = grad_key(key)
    why = _gpu_failed.get(key)
    if why is not None:
        return None, why
    try:
        return kernel_for(key), None
    except BUILD_ERRORS as exc:
        with _lock:
            why = _gpu_failed.setdefault(key, f"no GPU kernel for {chip}: {exc}")
        return None, why


def _aligned_16(t):
    """``t`` contiguous and 16-byte aligned (the GPU kernels move rows in 16-byte
    vectors); a copy only where it is not (a view at an odd offset)."""
    t = t.contiguous()
    return t if t.data_ptr() % 16 == 0 else t.clone()


def _cuda_pad_rows(pad_qkv, like):
    """``pad_qkv`` in ``like``'s dtype on its device, or None for zeros (the
    runtime's own). The patches make all-zero rows on the CPU for a projection
    without bias: they are read here, on the host, rather than copied over."""
    if pad_qkv is None or (pad_qkv.device.type == "cpu" and not bool(pad_qkv.any())):
        return None
    return _aligned_16(pad_qkv.to(device=like.device, dtype=like.dtype))


def _cuda_forward(op: str, config: str, inputs: dict, table, pad_qkv, logit_scale=None):
    """A forward operator on CUDA tensors ``inputs`` (q, k, v or qkv by name)."""
    first = next(iter(inputs.values()))
    kern, why = gpu_kernel(config, first.device)
    if kern is None:
        warn_fallback(why, f"operator swin_opt::{op} on {first.device}",
                      runs="computes with torch's operators")
        cfg = _attention_math.config_of(config)
        if cfg.packed_qkv:
            return _attention_math.packed_forward(cfg, inputs["qkv"], table, pad_qkv,
                                                  logit_scale)
        return _attention_math.forward(cfg, inputs["q"], inputs["k"], inputs["v"], table,
                                       pad_qkv, logit_scale)
    given = {name: _aligned_16(t) for name, t in inputs.items()}
    if table is not None:
        given["table"] = table.to(first.dtype).contiguous()
    given["pad_qkv"] = _cuda_pad_rows(pad_qkv, first)
    if logit_scale is not None:  # a GPU cosine kernel: the raw [heads] parameter, float32
        given["logit_scale"] = logit_scale.detach().reshape(-1).float().contiguous()
    tensors, count = _cuda.torch_arguments(kern, given)
    _cuda.torch_launch(kern, tensors, count)
    return tensors[kern.abi.role("output")[0].name]


def _cuda_window_attention(q, k, v, table, pad_qkv, config):
    return _cuda_forward("window_attention", config, {"q": q, "k": k, "v": v}, table, pad_qkv)


def _cuda_window_attention_packed(qkv, table, pad_qkv, config):
    return _cuda_forward("window_attention_packed", config, {"qkv": qkv}, table, pad_qkv)


def _cuda_window_attention_cosine(q, k, v, table, logit_scale, pad_qkv, config):
    return _cuda_forward("window_attention_cosine", config, {"q": q, "k": k, "v": v}, table,
                         pad_qkv, logit_scale)


def _cuda_window_attention_packed_cosine(qkv, table, logit_scale, pad_qkv, config):
    return _cuda_forward("window_attention_packed_cosine", config, {"qkv": qkv}, table,
                         pad_qkv, logit_scale)


def _cuda_backward(op: str, config: str, inputs: dict, table, out, dout) -> tuple:
    """A backward operator on CUDA tensors: the GPU's backward kernel (the
    configuration compiled with ``grad=True``: deterministic, the table's gradient
    reduced in a fixed order, no atomics) on torch's current stream, or torch's
    operators where it has none. Returns the inputs' gradients (q, k, v or qkv by
    name, in order) and the table's, in the dtype of the operator's contract (the
    inputs'; the kernel sums it in float32)."""
    first = next(iter(inputs.values()))
    kern, why = gpu_kernel(config, first.device, grad=True)
    if kern is None:
        warn_fallback(why, f"operator swin_opt::{op} on {first.device}",
                      runs="computes with torch's operators")
        cfg = _attention_math.config_of(config)
        if cfg.packed_qkv:
            return _attention_math.packed_backward(cfg, inputs["qkv"], table, dout)
        return _attention_math.backward(cfg, inputs["q"], inputs["k"], inputs["v"], table, dout)
    abi = kern.abi.backward
    given = {name: _aligned_16(t) for name, t in inputs.items()}
    if table is not None:
        given["table"] = table.to(first.dtype).contiguous()
    given["out"] = _aligned_16(out)
    given["dout"] = _aligned_16(dout.to(out.dtype))
    tensors, count = _cuda.torch_arguments(kern, given, abi)
    _cuda.torch_launch(kern, tensors, count, abi)
    grads = [tensors[arg.name] for arg in abi.role("input_gradient")]
    dtable = tensors[abi.role("table_gradient")[0].name]
    return (*grads, dtable.to(first.dtype))


def _cuda_window_attention_backward(q, k, v, table, out, dout, config):
    return _cuda_backward("window_attention_backward", config, {"q": q, "k": k, "v": v},
                          table, out, dout)


def _cuda_window_attention_packed_backward(qkv, table, out, dout, config):
    return _cuda_backward("window_attention_packed_backward", config, {"qkv": qkv}, table,
                          out, dout)


def _cuda_linear(x, weight, bias):
    return torch.nn.functional.linear(x, weight, bias)  # oneDNN is the CPU's


#: operator name -> its CUDA implementation
CUDA_IMPLEMENTATIONS = {
    "window_attention": _cuda_window_attention,
    "window_attention_packed": _cuda_window_attention_packed,
    "window_attention_cosine": _cuda_window_attention_cosine,
    "window_attention_packed_cosine": _cuda_window_attention_packed_cosine,
    "window_attention_backward": _cuda_window_attention_backward,
    "window_attention_packed_backward": _cuda_window_attention_packed_backward,
    "linear": _cuda_linear,
}


def _register_cuda() -> None:
    """Register the CUDA implementations (once the operators are defined; a
    CPU-only torch takes them too)."""
    for name, fn in CUDA_IMPLEMENTATIONS.items():
        torch.library.register_kernel(f"swin_opt::{name}", "cuda", fn)


@once
def register() -> None:
    """Define the ``swin_opt::`` operators (once per process; needs torch)."""
    require_torch()

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

    _register_cuda()
    apply_trace_constants()
