"""The MLP of Swin (and BEiT, MaxViT) blocks through compiled kernels: the operator
``torch.ops.swin_opt.mlp`` and the patches of the frameworks' MLP modules.

Schema::

    swin_opt::mlp(Tensor x, Tensor w1, Tensor? b1, Tensor w2, Tensor? b2,
                  Tensor? residual, str config) -> Tensor

computes ``fc2(GELU(fc1(x))) (+ residual)`` with GELU's exact (erf) form (or,
for a ``config`` that says so, its tanh form),
``w1`` ``[hidden, C]`` and ``w2`` ``[out, hidden]`` as ``nn.Linear`` holds
them, on float32 CPU tensors of any leading shape (``x`` ``[..., C]``, the
result ``[..., out]``), through a :class:`swin_opt.dense.DenseKernel` of
the widths ``(C, hidden, out)``: one library per widths and CPU, for every
row count. ``config`` names it (:func:`mlp_key`); the weights are packed
once per version. Both as :mod:`.dense` says for every dense operator; the
operator has a fake implementation, and no backward (under autograd the
patches run the module's own code).

Patched (by :func:`swin_opt.torch.swap_attention`, unless ``mlp=False``), the
MLP of each block of:

=============  ================================================================
timm           ``Mlp`` of ``SwinTransformerBlock``, ``SwinTransformerV2Block``,
               ``SwinTransformerV2CrBlock``, BEiT's ``Block`` and MaxViT's
               channels-last ``PartitionAttentionCl`` and
               ``ParallelPartitionAttention`` (``fc1``, ``act``, ``drop1``,
               ``norm``, ``fc2``, ``drop2``)
torchvision    ``MLP`` of ``SwinTransformerBlock`` and ``...V2`` (a Sequential
               ``Linear, GELU, Dropout, Linear, Dropout``)
transformers   ``SwinMLP`` of ``SwinLayer`` and ``BeitMLP`` of ``BeitLayer``
               (``fc1``, ``activation_fn``, ``fc2``)
monai          ``MLPBlock`` of Swin-UNETR's ``SwinTransformerBlock``
               (``linear1``, ``fn``, ``linear2``; 2-D and 3-D)
=============  ================================================================

where the activation is GELU, erf form (``nn.GELU()``, timm's ``GELU``,
transformers' ``"gelu"``) or tanh form (``nn.GELU(approximate="tanh")``,
timm's ``GELUTanh``, MaxViT's TensorFlow ports; transformers'
``"gelu_pytorch_tanh"``, ``"gelu_new"``, ``"gelu_fast"``), the layers are ``nn.Linear`` and
there is no norm between them; others are left alone and listed by
:func:`swin_opt.torch.unpatched` with the reason. transformers' SwinV2 and
data2vec-vision split their MLP over two modules (``...Intermediate``: fc1
and the activation; ``...Output``: fc2, dropout): their layers run as the
projections do instead (:mod:`.linears`).

A patched MLP runs the kernel on float32 CPU tensors without autograd (no
grad mode, or nothing that requires grad), in eval mode or with dropout 0.
Otherwise it runs its own code, counted and said once per reason as for the
attention (:func:`swin_opt.torch.patch_stats`, ``kind`` ``"mlp"``); with
``fallback=False`` it raises :class:`~.fallback.KernelUnavailable` instead.
On another device (a GPU) it runs its own code without a word: the kernel
is the CPU's (:class:`~.fallback.Declined`).
"""

from __future__ import annotations

import sys
from typing import Optional, Tuple

from . import dense
from .dense import forget_packed_weights, kernel_for
from .fallback import Declined, Fallback
from .ops import _no_grad_error
from .patching import Patch, _items, drops
from .tensors import once, require_torch
from .tracing import apply_trace_constants

try:
    import torch
except ImportError:  # swin_opt.torch imports without PyTorch; its entry points need it
    torch = None

__all__ = ["mlp", "mlp_key", "register", "kernel_for", "forget_packed_weights", "TimmMlp",
           "TorchvisionMlp", "TransformersMlp", "MonaiMlp", "mlp_sites"]


def mlp_key(channels: int, hidden: int, out: int, activation: str = "gelu", **options) -> str:
    """The operator's ``config`` string of the kernel for ``(channels, hidden,
    out)``, GELU's ``activation`` form (``"gelu"``: erf, ``"gelu_tanh"``) and
    :func:`swin_opt.dense.compile_dense`'s ``options`` (cpu, parallel,
    cache_dir): :func:`.dense.dense_key` of the MLP's widths."""
    return dense.dense_key((channels, hidden, out), activation, **options)


def mlp(x, w1, b1, w2, b2, residual, config: str):
    """The operator's implementation (see the module docstring)."""
    return dense.run("mlp", x, (("w1", w1, b1), ("w2", w2, b2)), residual, config)


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
def _gelu_form(act) -> Tuple[Optional[str], Optional[str]]:
    """``(form, None)`` when ``act`` is GELU, ``form`` its kernel activation
    (``"gelu"``: the erf form, ``"gelu_tanh"``: the tanh form); else ``(None,
    what it is)``."""
    if type(act) is torch.nn.GELU:
        if act.approximate in ("none", "tanh"):
            return ("gelu" if act.approximate == "none" else "gelu_tanh"), None
        return None, f"GELU(approximate={act.approximate!r})"
    timm_acts = sys.modules.get("timm.layers.activations")
    if timm_acts is not None:
        for name, form in (("GELU", "gelu"), ("GELUTanh", "gelu_tanh")):
            if type(act) is getattr(timm_acts, name, None):
                return form, None
    hf_acts = sys.modules.get("transformers.activations")
    if hf_acts is not None:
        if type(act) is getattr(hf_acts, "GELUActivation", None):
            # nn.functional.gelu, or its erf formula in Python (use_gelu_python)
            if getattr(act, "act", None) in (torch.nn.functional.gelu, act._gelu_python):
                return "gelu", None
            return None, "GELUActivation with a replaced function"
        # "gelu_pytorch_tanh" (GELUTanh, formerly PytorchGELUTanh), and "gelu_new"
        # and "gelu_fast": the tanh formula in Python
        for name in ("GELUTanh", "PytorchGELUTanh", "NewGELUActivation", "FastGELUActivation"):
            if type(act) is getattr(hf_acts, name, None):
                return "gelu_tanh", None
    return None, (f"activation {type(act).__name__} (the kernel computes GELU's erf and tanh "
                  "forms)")


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
    fuses_residual = True

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
        return _linear_pair(fc1, fc2) or _gelu_form(act)[1]

    def run(self, m, x, residual=None):
        if torch.jit.is_scripting() or torch.jit.is_tracing():
            raise Fallback("scripting/tracing")
        fc1, act, fc2, dropouts, _ = self.parts(m)
        if torch.is_grad_enabled() and (x.requires_grad or any(
                p.requires_grad for p in m.parameters())):
            raise Fallback("autograd: the MLP kernel has no backward (it runs under "
                           "torch.no_grad() / torch.inference_mode())")
        if any(drops(d) for d in dropouts):
            raise Fallback("MLP dropout > 0 in training mode (the kernel has no dropout)")
        for t in (x, fc1.weight, fc1.bias, fc2.weight, fc2.bias):
            if t is None:
                continue
            if t.device.type != "cpu":  # the model runs elsewhere: not a kernel's gap
                raise Declined(f"device {t.device} (the MLP kernel is the CPU's)")
            if t.dtype != torch.float32:
                raise Fallback(f"dtype {t.dtype} (the MLP kernel is float32)")
        if x.dim() < 1 or x.shape[-1] != fc1.in_features:
            raise Fallback(f"input of {x.shape[-1] if x.dim() else 0} channels, fc1 takes "
                           f"{fc1.in_features}")
        form, why = _gelu_form(act)
        if form is None:  # the activation was replaced after the swap
            raise Fallback(why)
        spec = dense.resolve((fc1.in_features, fc1.out_features, fc2.out_features),
                             _items({k: v for k, v in self.options.compile_options.items()
                                     if k in dense.OPTIONS}), form)
        if spec.error is not None:
            raise Fallback(spec.error)
        return torch.ops.swin_opt.mlp(x, fc1.weight, fc1.bias, fc2.weight, fc2.bias, residual,
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


class MonaiMlp(MlpPatch):
    """MONAI's ``MLPBlock.forward(x)`` (``linear1``, ``fn``, ``drop1``, ``linear2``,
    ``drop2``) in a Swin-UNETR block (any leading shape: 2-D or 3-D maps). Its
    GEGLU form (``linear1`` twice as wide) is left alone."""

    framework = "monai"

    @staticmethod
    def parts(m):
        return m.linear1, m.fn, m.linear2, (m.drop1, m.drop2), None


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
    ("monai.networks.nets.swin_unetr", "SwinTransformerBlock", MonaiMlp),
    ("timm.models.beit", "Block", TimmMlp),
    ("timm.models.maxxvit", "PartitionAttentionCl", TimmMlp),
    ("timm.models.maxxvit", "ParallelPartitionAttention", TimmMlp),
    ("transformers.models.beit.modeling_beit", "BeitLayer", TransformersMlp),
)


def mlp_sites(model):
    """``(name, module, framework, patch type, reason)`` for the MLP of every block
    of :data:`_BLOCKS` in ``model`` whose framework is imported: ``reason`` None where the
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
