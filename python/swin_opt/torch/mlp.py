"""The MLP of Swin blocks through compiled kernels: the operator
``torch.ops.swin_opt.mlp`` and the patches of the frameworks' MLP modules.

Schema::

    swin_opt::mlp(Tensor x, Tensor w1, Tensor? b1, Tensor w2, Tensor? b2,
                  Tensor? residual, str config) -> Tensor

computes ``fc2(GELU(fc1(x))) (+ residual)`` with GELU's exact (erf) form,
``w1`` ``[hidden, C]`` and ``w2`` ``[out, hidden]`` as ``nn.Linear`` holds
them, on float32 CPU tensors of any leading shape (``x`` ``[..., C]``, the
result ``[..., out]``), through a :class:`swin_opt.mlp.MlpKernel`: one
library per ``(C, hidden, out)`` and CPU (:func:`swin_opt.mlp.compile_mlp`,
built on first use, then from the disk cache) for every row count. ``config``
names it (:func:`mlp_key`), so graphs captured by ``torch.compile`` and
``torch.export`` hold a string; the operator has a fake implementation, and
no backward (under autograd the patches run the module's own code).

The kernel takes its weights packed in panels. The operator packs each
weight tensor it meets once per version: the packed copy is cached with the
tensor's ``_version``, which every in-place change of it bumps
(``load_state_dict``, optimizer steps, ``copy_``, ``torch.nn.init``); a new
tensor (``module.weight = ...``) is packed anew. Writing through ``.data``
does not bump the version: after ``w.data.copy_(...)``, call
:func:`forget_packed_weights`. The packed copies hold as much memory again
as the MLP weights.

Patched (by :func:`swin_opt.torch.swap_attention`, unless ``mlp=False``), the
MLP of each block of:

=============  ================================================================
timm           ``Mlp`` of ``SwinTransformerBlock``, ``SwinTransformerV2Block``
               and ``SwinTransformerV2CrBlock`` (``fc1``, ``act``, ``drop1``,
               ``norm``, ``fc2``, ``drop2``)
torchvision    ``MLP`` of ``SwinTransformerBlock`` and ``...V2`` (a Sequential
               ``Linear, GELU, Dropout, Linear, Dropout``)
transformers   ``SwinMLP`` of ``SwinLayer`` (``fc1``, ``activation_fn``, ``fc2``)
=============  ================================================================

where the activation is GELU's erf form (``nn.GELU()``, timm's ``GELU``,
transformers' ``"gelu"``), the layers are ``nn.Linear`` and there is no norm
between them; others are left alone and listed by
:func:`swin_opt.torch.unpatched` with the reason. transformers' SwinV2 splits
its MLP over two modules (``Swinv2Intermediate``: fc1 and the activation;
``Swinv2Output``: fc2, dropout): their layers run through oneDNN instead
(:mod:`.linears`).

A patched MLP runs the kernel on float32 CPU tensors without autograd (no
grad mode, or nothing that requires grad), in eval mode or with dropout 0.
Otherwise it runs its own code, counted and said once per reason as for the
attention (:func:`swin_opt.torch.patch_stats`, ``kind`` ``"mlp"``); with
``fallback=False`` it raises :class:`~.fallback.KernelUnavailable` instead.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import NamedTuple, Optional

from ..errors import CompileError, SwinAotNotFoundError
from ..mlp import compile_mlp
from .fallback import Fallback
from .ops import _no_grad_error
from .patching import Patch, _items
from .tensors import once, require_torch
from .tracing import apply_trace_constants, trace_constant

try:
    import torch
except ImportError:  # swin_opt.torch imports without PyTorch; its entry points need it
    torch = None

__all__ = ["mlp", "mlp_key", "register", "kernel_for", "forget_packed_weights", "TimmMlp",
           "TorchvisionMlp", "TransformersMlp", "mlp_sites"]

_lock = threading.Lock()
_kernels: dict = {}  # config string -> MlpKernel
#: weight tensor -> (what the copy is valid for: _stamp, packed copy)
_packed = None
#: resolve's arguments -> its MlpSpec (failures too: a build is not retried)
_specs: dict = {}
#: hidden/out width -> zeros, the bias of a layer without one
_zeros: dict = {}

#: The compile options of swap_attention an MLP kernel takes.
_OPTIONS = ("cpu", "parallel", "cache_dir")


# --------------------------------------------------------------------------- #
# Kernels
# --------------------------------------------------------------------------- #
def mlp_key(channels: int, hidden: int, out: int, **options) -> str:
    """The operator's ``config`` string of the kernel for ``(channels, hidden,
    out)`` and :func:`swin_opt.mlp.compile_mlp`'s ``options`` (cpu, parallel,
    cache_dir)."""
    spec = {"mlp": [int(channels), int(hidden), int(out)],
            "options": {k: (str(v) if k == "cache_dir" else v) for k, v in sorted(options.items())
                        if v is not None and k in _OPTIONS}}
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))


def kernel_for(key: str):
    """The :class:`swin_opt.mlp.MlpKernel` a config string names (compiled on first use)."""
    kern = _kernels.get(key)
    if kern is None:
        try:
            spec = json.loads(key)
            channels, hidden, out = spec["mlp"]
            options = dict(spec["options"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"swin_opt: malformed MLP kernel configuration {key!r}: {exc}") from None
        kern = compile_mlp(channels, hidden, out, **options)
        with _lock:
            kern = _kernels.setdefault(key, kern)
    return kern


class MlpSpec(NamedTuple):
    """The patches' view of a kernel: its config string, or why there is none."""

    key: str
    error: Optional[str]


@trace_constant
def resolve(channels: int, hidden: int, out: int, options: tuple) -> MlpSpec:
    """The kernel for ``(channels, hidden, out)`` and swap_attention's compile
    ``options`` (sorted pairs), built once per process; never raises (a
    configuration without a kernel has ``error`` set). A
    :func:`~.tracing.trace_constant`: dynamo runs it at trace time only."""
    memo = (channels, hidden, out, options)
    spec = _specs.get(memo)
    if spec is not None:
        return spec
    key = mlp_key(channels, hidden, out, **dict(options))
    try:
        kernel_for(key)
        spec = MlpSpec(key, None)
    except (CompileError, SwinAotNotFoundError, ValueError, OSError) as exc:
        spec = MlpSpec(key, f"no MLP kernel: {exc}")
    with _lock:
        return _specs.setdefault(memo, spec)


# --------------------------------------------------------------------------- #
# Packed weights
# --------------------------------------------------------------------------- #
def _stamp(weight, panel_width: int):
    """What a packed copy of ``weight`` is valid for; None when the tensor keeps no
    version (an inference tensor): it is then packed on every call."""
    try:
        version = weight._version
    except RuntimeError:
        return None
    return version, weight.data_ptr(), tuple(weight.shape), tuple(weight.stride()), panel_width


def _pack(weight, panel_width: int):
    """``[N, K]`` -> ``[ceil(N / NR), K, NR]``, zero past N (float32, contiguous)."""
    n, k = weight.shape
    panels = -(-n // panel_width)
    padded = weight.new_zeros((panels * panel_width, k))
    padded[:n] = weight
    return padded.view(panels, panel_width, k).transpose(1, 2).contiguous()


def packed_weight(weight, panel_width: int):
    """``weight`` in the kernel's panels, from the cache when its version has not
    changed (see the module docstring)."""
    global _packed
    stamp = _stamp(weight, panel_width)
    with _lock:
        if _packed is None:
            from torch.utils.weak import WeakIdKeyDictionary

            _packed = WeakIdKeyDictionary()
        cached = _packed.get(weight) if stamp is not None else None
    if cached is not None and cached[0] == stamp:
        return cached[1]
    packed = _pack(weight.detach(), panel_width)
    if stamp is not None:
        with _lock:
            _packed[weight] = (stamp, packed)
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


def _check(name, t, shape) -> None:
    if t.dtype != torch.float32 or t.device.type != "cpu" or tuple(t.shape) != tuple(shape):
        raise ValueError(f"swin_opt::mlp: {name} must be a float32 CPU tensor of shape "
                         f"{list(shape)}, got {t.dtype} {list(t.shape)} on {t.device}")


def mlp(x, w1, b1, w2, b2, residual, config: str):
    """The operator's implementation (see the module docstring)."""
    kern = kernel_for(config)
    cfg = kern.config
    c, h, o = cfg.channels, cfg.hidden, cfg.out
    if x.dim() < 1:
        raise ValueError("swin_opt::mlp: x must have a channel axis")
    lead = tuple(x.shape[:-1])
    x2 = x.detach().reshape(-1, x.shape[-1]).contiguous()
    rows = x2.shape[0]
    _check("x", x2, (rows, c))
    _check("w1", w1, (h, c))
    _check("w2", w2, (o, h))
    for name, b, width in (("b1", b1, h), ("b2", b2, o)):
        if b is not None:
            _check(name, b, (width,))
    res = None
    if residual is not None:
        res = residual.detach().reshape(-1, residual.shape[-1]).contiguous()
        _check("residual", res, (rows, o))
    out = torch.empty((rows, o), dtype=torch.float32)
    if rows:
        w1p, w2p = packed_weight(w1, cfg.panel_width), packed_weight(w2, cfg.panel_width)
        b1c, b2c = _bias(b1, h), _bias(b2, o)
        kern.call_addresses(rows, x2.data_ptr(), w1p.data_ptr(), b1c.data_ptr(), w2p.data_ptr(),
                            b2c.data_ptr(), None if res is None else res.data_ptr(), out.data_ptr(),
                            threads=torch.get_num_threads())
    return out.view(*lead, o)


@once
def register() -> None:
    """Define ``swin_opt::mlp`` (once per process; needs torch)."""
    require_torch()

    @torch.library.custom_op("swin_opt::mlp", mutates_args=(), schema=(
        "(Tensor x, Tensor w1, Tensor? b1, Tensor w2, Tensor? b2, Tensor? residual, "
        "str config) -> Tensor"))
    def mlp_op(x, w1, b1, w2, b2, residual, config):
        return mlp(x, w1, b1, w2, b2, residual, config)

    @mlp_op.register_fake
    def _(x, w1, b1, w2, b2, residual, config):
        return x.new_empty((*x.shape[:-1], w2.shape[0]))

    setup, backward = _no_grad_error("mlp")
    mlp_op.register_autograd(backward, setup_context=setup)
    apply_trace_constants()


# --------------------------------------------------------------------------- #
# Patches
# --------------------------------------------------------------------------- #
def _is_exact_gelu(act) -> Optional[str]:
    """None when ``act`` is GELU's erf form, else what it is."""
    if type(act) is torch.nn.GELU:
        if act.approximate == "none":
            return None
        return f"GELU(approximate={act.approximate!r}) (the kernel computes the erf form)"
    timm_act = getattr(sys.modules.get("timm.layers.activations"), "GELU", None)
    if timm_act is not None and type(act) is timm_act:
        return None
    hf_act = getattr(sys.modules.get("transformers.activations"), "GELUActivation", None)
    if hf_act is not None and type(act) is hf_act:
        # nn.functional.gelu, or its erf formula in Python (use_gelu_python)
        if getattr(act, "act", None) in (torch.nn.functional.gelu, act._gelu_python):
            return None
        return "GELUActivation with a replaced function (the kernel computes GELU's erf form)"
    return f"activation {type(act).__name__} (the kernel computes GELU's erf form)"


def _linear_pair(fc1, fc2) -> Optional[str]:
    """None when ``fc1``/``fc2`` are plain ``nn.Linear`` layers that chain, else why not."""
    for name, fc in (("fc1", fc1), ("fc2", fc2)):
        if type(fc) is not torch.nn.Linear:
            return f"{name} is a {type(fc).__name__}, not nn.Linear"
    if fc1.out_features != fc2.in_features:
        return f"fc1 gives {fc1.out_features} features, fc2 takes {fc2.in_features}"
    return None


class MlpPatch(Patch):
    """``forward(x)`` of an MLP module: the kernel (:func:`swin_opt::mlp`), or the
    module's own forward where it does not apply."""

    kind = "mlp"

    @staticmethod
    def parts(m):  # pragma: no cover - per framework
        """``(fc1, act, fc2, dropouts, norm)`` of the module."""
        raise NotImplementedError

    @classmethod
    def supported(cls, m) -> Optional[str]:
        """None when ``m`` computes ``fc2(GELU(fc1(x)))``, else why the kernel does not."""
        try:
            fc1, act, fc2, _, norm = cls.parts(m)
        except (AttributeError, IndexError, TypeError, ValueError):
            return f"not the {cls.framework} Swin MLP layout"
        if norm is not None and not isinstance(norm, torch.nn.Identity):
            return f"a {type(norm).__name__} between fc1 and fc2"
        return _linear_pair(fc1, fc2) or _is_exact_gelu(act)

    def run(self, m, x):
        if torch.jit.is_scripting() or torch.jit.is_tracing():
            raise Fallback("scripting/tracing")
        fc1, _, fc2, dropouts, _ = self.parts(m)
        if torch.is_grad_enabled() and (x.requires_grad or any(
                p.requires_grad for p in m.parameters())):
            raise Fallback("autograd: the MLP kernel has no backward (it runs under "
                           "torch.no_grad() / torch.inference_mode())")
        if m.training and any(d.p > 0 for d in dropouts):
            raise Fallback("MLP dropout > 0 in training mode (the kernel has no dropout)")
        for t in (x, fc1.weight, fc1.bias, fc2.weight, fc2.bias):
            if t is None:
                continue
            if t.device.type != "cpu":
                raise Fallback(f"device {t.device}")
            if t.dtype != torch.float32:
                raise Fallback(f"dtype {t.dtype} (the MLP kernel is float32)")
        if x.dim() < 1 or x.shape[-1] != fc1.in_features:
            raise Fallback(f"input of {x.shape[-1] if x.dim() else 0} channels, fc1 takes "
                           f"{fc1.in_features}")
        spec = resolve(fc1.in_features, fc1.out_features, fc2.out_features,
                       _items({k: v for k, v in self.options.compile_options.items()
                               if k in _OPTIONS}))
        if spec.error is not None:
            raise Fallback(spec.error)
        return torch.ops.swin_opt.mlp(x, fc1.weight, fc1.bias, fc2.weight, fc2.bias, None,
                                      spec.key)

    def _setup(self, *args):
        super()._setup(*args)
        register()


class TimmMlp(MlpPatch):
    """timm's ``Mlp.forward(x)`` (``timm.layers.Mlp``) in a Swin block."""

    framework = "timm"

    @staticmethod
    def parts(m):
        return m.fc1, m.act, m.fc2, (m.drop1, m.drop2), m.norm


class TransformersMlp(MlpPatch):
    """transformers' ``SwinMLP.forward(x)`` (``fc1``, ``activation_fn``, ``fc2``; the
    layer applies its dropout after it)."""

    framework = "transformers"

    @staticmethod
    def parts(m):
        return m.fc1, m.activation_fn, m.fc2, (), None


class TorchvisionMlp(MlpPatch):
    """torchvision's ``MLP.forward(x)`` (``torchvision.ops.misc.MLP``, a Sequential
    ``Linear, GELU, Dropout, Linear, Dropout``) in a Swin block."""

    framework = "torchvision"

    @staticmethod
    def parts(m):
        if len(m) != 5 or not (isinstance(m[2], torch.nn.Dropout)
                               and isinstance(m[4], torch.nn.Dropout)):
            raise ValueError("not Linear, GELU, Dropout, Linear, Dropout")
        return m[0], m[1], m[3], (m[2], m[4]), None


#: (module, class name of a Swin block, the patch of its ``mlp``)
_BLOCKS = (
    ("timm.models.swin_transformer", "SwinTransformerBlock", TimmMlp),
    ("timm.models.swin_transformer_v2", "SwinTransformerV2Block", TimmMlp),
    ("timm.models.swin_transformer_v2_cr", "SwinTransformerV2CrBlock", TimmMlp),
    ("torchvision.models.swin_transformer", "SwinTransformerBlock", TorchvisionMlp),
    ("torchvision.models.swin_transformer", "SwinTransformerBlockV2", TorchvisionMlp),
    ("transformers.models.swin.modeling_swin", "SwinLayer", TransformersMlp),
)


def mlp_sites(model):
    """``(name, module, framework, patch type, reason)`` for the MLP of every Swin
    block in ``model`` whose framework is imported: ``reason`` None where the
    patch applies, else why it does not."""
    blocks = []
    for module_name, cls_name, patch_type in _BLOCKS:
        cls = getattr(sys.modules.get(module_name), cls_name, None)
        if isinstance(cls, type):
            blocks.append((cls, patch_type))
    if not blocks:
        return
    for name, module in model.named_modules():
        for cls, patch_type in blocks:
            if isinstance(module, cls):
                mlp_module = getattr(module, "mlp", None)
                if isinstance(mlp_module, torch.nn.Module):
                    yield (f"{name}.mlp" if name else "mlp", mlp_module, patch_type.framework,
                           patch_type, patch_type.supported(mlp_module))
                break
