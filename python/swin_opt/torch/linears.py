"""The dense layers of Swin models outside the attention and the MLP kernel:
the patch-merging reductions (and the MLP of transformers' SwinV2 and
data2vec-vision, which they split over two modules), run as the projections are (:func:`.projections.linear`:
their compiled kernels at inference, oneDNN under autograd).

``F.linear`` computes these on MKL, whose code on AMD EPYC runs at a third
to a half of oneDNN's rate; on Zen 5, 2 threads, Swin-T's three reductions
(``4C -> 2C``, no bias) take 0.96, 0.74, 1.64 ms through ``F.linear`` and
0.39, 0.34, 0.45 ms through oneDNN at batch 1 (6.6, 5.7, 7.8 against 2.9,
3.0, 2.6 ms at batch 8). The swapped Swin-T (attention and MLPs on our
kernels) is 5% faster for it at batch 1 and 14% at batch 8 (44.6 against
46.9 ms, 286 against 332 ms; alternating, best of 7). The layers keep their parameters and autograd
(``swin_opt::linear`` has a backward); devices and dtypes other than float32
CPU take ``F.linear`` as before.

Patched (by :func:`swin_opt.torch.swap_attention`, unless ``linear=False``):

=============  ================================================================
timm           ``PatchMerging.reduction`` (swin_transformer, swin_transformer_v2)
torchvision    ``PatchMerging.reduction``, ``PatchMergingV2.reduction``
transformers   ``SwinPatchMerging.reduction``, ``Swinv2PatchMerging.reduction``,
               ``Swinv2Intermediate.dense``, ``Swinv2Output.dense``,
               ``Data2VecVisionIntermediate.dense``, ``Data2VecVisionOutput.dense``
monai          ``PatchMerging.reduction``, ``PatchMergingV2.reduction``
               (``monai.networks.nets.swin_unetr``, 2-D and 3-D)
=============  ================================================================

where the layer is a plain ``nn.Linear``; others are listed by
:func:`swin_opt.torch.unpatched`.
"""

from __future__ import annotations

import sys

from .fallback import Fallback
from .patching import Patch
from .projections import linear

try:
    import torch
except ImportError:  # swin_opt.torch imports without PyTorch; its entry points need it
    torch = None

__all__ = ["LinearPatch", "TimmLinear", "TorchvisionLinear", "TransformersLinear", "MonaiLinear",
           "linear_sites"]


class LinearPatch(Patch):
    """``forward(x)`` of an ``nn.Linear``: :func:`.projections.linear` (oneDNN for
    float32 CPU tensors, ``F.linear`` otherwise)."""

    kind = "linear"

    def run(self, m, x):
        if torch.jit.is_scripting() or torch.jit.is_tracing():
            raise Fallback("scripting/tracing")
        return linear(x, m.weight, m.bias)


class TimmLinear(LinearPatch):
    framework = "timm"


class TorchvisionLinear(LinearPatch):
    framework = "torchvision"


class TransformersLinear(LinearPatch):
    framework = "transformers"


class MonaiLinear(LinearPatch):
    framework = "monai"


_PATCHES = {p.framework: p for p in (TimmLinear, TorchvisionLinear, TransformersLinear,
                                     MonaiLinear)}

#: (framework, module, class, attribute holding the nn.Linear)
_SITES = (
    ("timm", "timm.models.swin_transformer", "PatchMerging", "reduction"),
    ("timm", "timm.models.swin_transformer_v2", "PatchMerging", "reduction"),
    ("torchvision", "torchvision.models.swin_transformer", "PatchMerging", "reduction"),
    ("torchvision", "torchvision.models.swin_transformer", "PatchMergingV2", "reduction"),
    ("transformers", "transformers.models.swin.modeling_swin", "SwinPatchMerging", "reduction"),
    ("transformers", "transformers.models.swinv2.modeling_swinv2", "Swinv2PatchMerging",
     "reduction"),
    ("transformers", "transformers.models.swinv2.modeling_swinv2", "Swinv2Intermediate", "dense"),
    ("transformers", "transformers.models.swinv2.modeling_swinv2", "Swinv2Output", "dense"),
    ("transformers", "transformers.models.data2vec.modeling_data2vec_vision",
     "Data2VecVisionIntermediate", "dense"),
    ("transformers", "transformers.models.data2vec.modeling_data2vec_vision",
     "Data2VecVisionOutput", "dense"),
    ("monai", "monai.networks.nets.swin_unetr", "PatchMerging", "reduction"),
    ("monai", "monai.networks.nets.swin_unetr", "PatchMergingV2", "reduction"),
)


def linear_sites(model):
    """``(name, layer, framework, patch type, reason)`` for every dense layer of
    :data:`_SITES` in ``model`` whose framework is imported: ``reason`` None where
    the layer is a plain ``nn.Linear``, else what it is."""
    owners = []
    for framework, module_name, cls_name, attr in _SITES:
        cls = getattr(sys.modules.get(module_name), cls_name, None)
        if isinstance(cls, type):
            owners.append((cls, framework, attr))
    if not owners:
        return
    for name, module in model.named_modules():
        for cls, framework, attr in owners:
            if type(module) is not cls:
                continue
            layer = getattr(module, attr, None)
            if isinstance(layer, torch.nn.Module):
                why = (None if type(layer) is torch.nn.Linear else
                       f"{attr} is a {type(layer).__name__}, not nn.Linear")
                yield (f"{name}.{attr}" if name else attr, layer, framework, _PATCHES[framework],
                       why)
            break
