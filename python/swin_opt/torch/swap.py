"""The model-level entry points: :func:`swap_attention` (find the supported
modules of every framework, Swin's, timm's MaxViT family and MONAI's
Swin-UNETR, and install patches on the instances),
:func:`restore_attention` and :func:`patch_stats`."""

from __future__ import annotations

import re
import sys
import warnings
import weakref
from typing import List, Optional

from . import maxvit_patches
from .maxvit_patches import MaxxVitAttention, MaxxVitAttention2d, MaxxVitPartitionAttention
from .linears import linear_sites
from .mlp import mlp_sites
from .monai_patches import MonaiAttention, MonaiBlock
from .patching import Patch, PatchOptions, is_swinv2
from .table_bias import HFBiasTable, TimmBiasTable
from .tensors import require_torch
from .timm_patches import (TimmAttention, TimmBeitAttention, TimmBlock, TimmCrAttention,
                           TimmCrBlock, TimmResidual)
from .torchvision_patches import TorchvisionAttention, TorchvisionAttention3d, TorchvisionResidual
from .transformers_patches import (HFAttention, HFBeitAttention, HFData2VecSelfAttention,
                                   HFSelfAttention, is_hf_swinv2)

_COMPILE_OPTIONS = ("cpu", "parallel", "cache_dir", "target")


_FRAMEWORKS = ("timm", "torchvision", "transformers", "monai")

#: The versions swap_attention supports, ``(lowest, first unsupported)``: torch
#: 2.7 brought ``torch.compiler.is_exporting`` (the patches' export check),
#: torchvision 0.22 is its torchvision; transformers 4.x (``SwinSelfAttention``)
#: and 5.x (``SwinAttention``) each have their patch. Tested (python/tests,
#: scripts/wheel.sh): the pins of python/requirements-torch.txt.
SUPPORTED_VERSIONS = {
    "torch": ((2, 7), (3,)),
    "torchvision": ((0, 22), (1,)),
    "timm": ((1, 0), (2,)),
    "transformers": ((4, 40), (6,)),
    "monai": ((1, 6), (2,)),
}

#: the unsupported ``(package, version)`` sets already warned about
_version_warned: set = set()


def _version_tuple(text: str) -> tuple:
    """``"2.15.0+cu130"`` -> ``(2, 15, 0)``: the leading numeric release."""
    return tuple(int(p) for p in re.findall(r"\d+", text.split("+")[0].split("rc")[0])[:3])


def _range_text(low: tuple, high: tuple) -> str:
    return ">=" + ".".join(map(str, low)) + ",<" + ".".join(map(str, high))


def _check_versions(frameworks) -> None:
    """One warning (once per process and set of versions) naming every package among
    torch and ``frameworks`` whose installed version is outside
    :data:`SUPPORTED_VERSIONS`."""
    outside = []
    for package in ("torch", *sorted(set(frameworks))):
        module = sys.modules.get(package)
        version = getattr(module, "__version__", None)
        if not isinstance(version, str):
            continue
        low, high = SUPPORTED_VERSIONS[package]
        if not low <= _version_tuple(version) < high:
            outside.append((package, version, _range_text(low, high)))
    key = frozenset(outside)
    if not outside or key in _version_warned:
        return
    _version_warned.add(key)
    what = "; ".join(f"{p} {v} (supported: {r})" for p, v, r in outside)
    warnings.warn(f"swin_opt: swap_attention does not support {what}: patched modules may "
                  "fall back or fail; install a supported version", stacklevel=3)


class _Dispatch:
    """The instance attribute a patch installs (``module.forward`` / ``module._attn`` /
    ``module._shifted_window_attn``): calls the patch with the module, like a bound
    method.

    It is the record of the patch too (:func:`patch_stats`, :func:`restore_attention`
    find patches by it), so a copy of the module carries its patch: ``copy.deepcopy``
    and ``torch.save``/``torch.load(weights_only=False)`` re-create it (with fresh
    statistics) through :meth:`__reduce__`."""

    def __init__(self, module, patch: Patch):
        self.module = module
        self.patch = patch

    def __call__(self, *args, **kwargs):
        return self.patch(self.module, *args, **kwargs)

    def __reduce__(self):
        p = self.patch
        return (_repatch, (self.module, type(p), p.name, p.options, p.had_instance_attr,
                           p.saved_attr))

    def __repr__(self) -> str:
        return f"<swin_opt patch of {type(self.module).__name__}.{self.patch.attr}>"


def _repatch(module, patch_type, name, options, had_instance_attr, saved_attr):
    """Unpickling / deep copy of a :class:`_Dispatch` (the module may not have its state
    yet: the patch is rebuilt without reading it)."""
    return _Dispatch(module, patch_type._restore(name, options, had_instance_attr, saved_attr))


def _dispatchers(module) -> dict:
    """``{attr: _Dispatch}`` of the patches installed on ``module``."""
    return {k: v for k, v in vars(module).items() if isinstance(v, _Dispatch)}


#: token-layout patches of blocks whose attention module is patched too (window layout,
#: where the block's patch falls back); installed with layout="auto" only, not counted
_BLOCK_PATCHES = (TimmBlock, TimmCrBlock, MonaiBlock, MaxxVitPartitionAttention)


#: ``(framework, module, class, patch type)`` of the supported classes, in the order
#: their patches are installed (transformers' own Swin attention: :func:`_classes`)
_CLASSES = (
    ("timm", "timm.models.swin_transformer", "WindowAttention", TimmAttention),
    ("timm", "timm.models.swin_transformer", "SwinTransformerBlock", TimmBlock),
    ("timm", "timm.models.swin_transformer_v2", "WindowAttention", TimmAttention),
    ("timm", "timm.models.swin_transformer_v2", "SwinTransformerV2Block", TimmBlock),
    ("torchvision", "torchvision.models.swin_transformer", "ShiftedWindowAttention",
     TorchvisionAttention),
    ("torchvision", "torchvision.models.video.swin_transformer", "ShiftedWindowAttention3d",
     TorchvisionAttention3d),
    # the per-model copies of transformers 4.x's query/key/value layout
    ("transformers", "transformers.models.donut.modeling_donut_swin", "DonutSwinSelfAttention",
     HFSelfAttention),
    ("transformers", "transformers.models.maskformer.modeling_maskformer_swin",
     "MaskFormerSwinSelfAttention", HFSelfAttention),
    ("transformers", "transformers.models.swinv2.modeling_swinv2", "Swinv2SelfAttention",
     HFSelfAttention),
    ("transformers", "transformers.models.swin2sr.modeling_swin2sr", "Swin2SRSelfAttention",
     HFSelfAttention),
    # CLAP's audio encoder (HTS-AT) is a Swin
    ("transformers", "transformers.models.clap.modeling_clap", "ClapAudioSelfAttention",
     HFSelfAttention),
    ("timm", "timm.models.swin_transformer_v2_cr", "WindowMultiHeadAttention", TimmCrAttention),
    ("timm", "timm.models.swin_transformer_v2_cr", "SwinTransformerV2CrBlock", TimmCrBlock),
    # MaxViT, CoAtNet, MaxxViT: block, grid and global attention
    ("timm", "timm.models.maxxvit", "AttentionCl", MaxxVitAttention),
    ("timm", "timm.models.maxxvit", "Attention2d", MaxxVitAttention2d),
    ("timm", "timm.models.maxxvit", "PartitionAttentionCl", MaxxVitPartitionAttention),
    ("timm", "timm.models.beit", "Attention", TimmBeitAttention),
    ("timm", "timm.models.beit", "RelativePositionBias", TimmBiasTable),
    # Swin-UNETR (2-D and 3-D)
    ("monai", "monai.networks.nets.swin_unetr", "WindowAttention", MonaiAttention),
    ("monai", "monai.networks.nets.swin_unetr", "SwinTransformerBlock", MonaiBlock),
    # BEiT and data2vec-vision: their bias modules hand on the table (.table_bias)
    ("transformers", "transformers.models.beit.modeling_beit", "BeitAttention", HFBeitAttention),
    ("transformers", "transformers.models.beit.modeling_beit", "BeitRelativePositionBias",
     HFBiasTable),
    ("transformers", "transformers.models.data2vec.modeling_data2vec_vision",
     "Data2VecVisionSelfAttention", HFData2VecSelfAttention),
    ("transformers", "transformers.models.data2vec.modeling_data2vec_vision",
     "Data2VecVisionRelativePositionBias", HFBiasTable),
)


def _classes():
    """``(framework, class, patch type)`` for every importable supported class."""
    found = []
    hf_swin = sys.modules.get("transformers.models.swin.modeling_swin")
    if hf_swin is not None:
        if hasattr(hf_swin, "SwinSelfAttention"):  # transformers 4.x
            found.append(("transformers", hf_swin.SwinSelfAttention, HFSelfAttention))
        else:  # transformers >= 5: SwinAttention holds q/k/v/o projections and the bias
            found.append(("transformers", getattr(hf_swin, "SwinAttention", None), HFAttention))
    for framework, module_name, cls_name, patch_type in _CLASSES:
        cls = getattr(sys.modules.get(module_name), cls_name, None)
        found.append((framework, cls, patch_type))
    return [(fw, cls, p) for fw, cls, p in found if isinstance(cls, type)]


def _supported(patch_type, module) -> Optional[str]:
    """None if ``module`` can be patched by ``patch_type``, else why not."""
    if patch_type in (TorchvisionAttention, TimmAttention) and is_swinv2(module):
        mlp_out = getattr(module.cpb_mlp[-1], "out_features", None)
        if mlp_out != module.num_heads:
            return f"cpb_mlp gives {mlp_out} columns for {module.num_heads} heads"
        return None
    if patch_type in (TorchvisionAttention, TorchvisionAttention3d, TimmAttention,
                      MonaiAttention):
        if not hasattr(module, "relative_position_bias_table"):
            return "neither Swin's relative_position_bias_table nor SwinV2's cpb_mlp"
        table, heads = module.relative_position_bias_table, module.num_heads
    elif patch_type in _BLOCK_PATCHES:
        if not callable(getattr(type(module), patch_type.attr, None)):
            return (f"this timm version's {type(module).__name__} has no {patch_type.attr} "
                    "method")
        if patch_type is MaxxVitPartitionAttention:
            if not hasattr(module, "partition_size"):
                return f"this timm version's {type(module).__name__} has no partition_size"
            return maxvit_patches.supported(module.attn)  # the attention's own conditions
        return None
    elif patch_type is HFAttention:
        if not (hasattr(module, "q_proj") and hasattr(module, "relative_position_bias")):
            return "not the transformers >= 5 SwinAttention layout"
        table, heads = (module.relative_position_bias.relative_position_bias_table,
                        module.num_attention_heads)
    elif patch_type is HFSelfAttention:
        heads = module.num_attention_heads
        if is_hf_swinv2(module):
            mlp_out = getattr(module.continuous_position_bias_mlp[-1], "out_features", None)
            if mlp_out != heads:
                return f"continuous_position_bias_mlp gives {mlp_out} columns for {heads} heads"
            return None
        if not hasattr(module, "relative_position_bias_table"):
            return "no relative_position_bias_table"
        table = module.relative_position_bias_table
    elif patch_type in (MaxxVitAttention, MaxxVitAttention2d):
        return maxvit_patches.supported(module)
    elif patch_type is HFBeitAttention and not hasattr(module, "q_proj"):
        return "not the transformers >= 5 BeitAttention layout"
    elif patch_type in (TimmBeitAttention, HFBeitAttention, HFData2VecSelfAttention,
                        TimmBiasTable, HFBiasTable):
        # BEiT: the table is the attention's own (timm), or comes with the call
        # (shared tables, transformers' bias modules: .table_bias); checked per call
        return None
    elif patch_type is TimmCrAttention:
        mlp_out = getattr(getattr(module.meta_mlp, "fc2", None), "out_features", None)
        if mlp_out != module.num_heads:
            return f"meta_mlp gives {mlp_out} columns for {module.num_heads} heads"
        return None
    else:  # pragma: no cover
        return "unknown"
    if table.dim() != 2 or table.shape[1] != heads:
        return f"bias table {tuple(table.shape)} does not have one column per head ({heads})"
    return None


def swap_attention(model, *, layout: str = "auto", fallback: bool = True, frameworks=None,
                   mlp: bool = True, linear: bool = True, **compile_options) -> int:
    """Replace the attention core of the Swin window-attention modules in ``model`` with kernels.

    Swin, SwinV2 and their relatives in timm, torchvision and transformers
    (see :mod:`swin_opt.torch`), and the attention of timm's MaxViT family
    (MaxViT block and grid attention, MaxxViT, CoAtNet: ``maxxvit.AttentionCl``
    and ``Attention2d`` with a ``RelPosBias`` or ``RelPosBiasTf`` table,
    :mod:`.maxvit_patches`), MONAI's Swin-UNETR (2-D and 3-D
    ``SwinTransformerBlock`` and ``WindowAttention``, :mod:`.monai_patches`), and
    BEiT's (timm's ``beit``, transformers' ``BeitModel`` and
    ``Data2VecVisionModel``: the class-token kernels; the modules that gather its
    bias hand on the table instead, :mod:`.table_bias`).

    ``model`` may be a whole model or a single attention module / block.
    Modules are patched in place (instance attributes; the class is not
    touched) and keep reading their own parameters on every call, so later
    weight updates are honoured.  Kernels are compiled lazily, per
    configuration (window, heads, head_dim, scale, resolution, shift, dtype),
    on first use and cached.  Each call runs on its tensors' device: CPU
    kernels on the CPU, the GPU kernels of the device's chip on a CUDA device
    (swap before or after ``model.cuda()``; see :mod:`.ops`).

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
        Restrict to some of ``"timm"``, ``"torchvision"``, ``"transformers"``,
        ``"monai"``.
    mlp:
        ``True``: also run the MLP of each Swin block (``fc2(GELU(fc1(x)))``)
        through a compiled kernel where it applies (float32 CPU inference;
        see :mod:`.mlp`); ``False``: keep torch's (and undo an earlier swap's
        MLP patches).
    linear:
        ``True``: also run the patch-merging reductions (and the MLP layers of
        transformers' SwinV2) as the projections run (their compiled kernels at
        inference, oneDNN under autograd: 2-3.5x ``F.linear``'s MKL on AMD CPUs; see
        :mod:`.linears`); ``False``: keep ``F.linear``.
    compile_options:
        ``cpu``, ``parallel``, ``cache_dir``, ``target`` for :func:`swin_opt.compile`
        (``cpu`` and ``parallel`` apply to the CPU kernels; ``target`` must be
        ``"cpu"``: the tensors' device chooses between CPU and GPU kernels).

    Returns the number of attention layers patched (a timm block and its
    ``WindowAttention`` count once; BEiT's bias modules, MLPs, dense layers and the
    residual adds of timm's blocks are not counted: :func:`patch_stats` lists them,
    ``kind`` ``"bias"``, ``"mlp"``, ``"linear"`` and ``"residual"``).  Already patched modules are re-patched with the new options.
    Window-attention modules left alone (a supported
    class in a configuration the kernels do not take, a framework excluded by
    ``frameworks``, a class swin_opt does not know) are listed by
    :func:`unpatched` and warned about once per class and reason; patching
    nothing is warned about too.
    """
    require_torch()
    if layout not in ("auto", "windows"):
        raise ValueError(f"layout must be 'auto' or 'windows', got {layout!r}")
    unknown = set(compile_options) - set(_COMPILE_OPTIONS)
    if unknown:
        raise TypeError(f"unknown option(s) {sorted(unknown)}; compile options are "
                        f"{list(_COMPILE_OPTIONS)}")
    if compile_options.get("target", "cpu") != "cpu":
        # each call's device chooses: CPU kernels for CPU tensors, the GPU
        # kernels of the device's chip for CUDA tensors
        raise ValueError(f"swap_attention: the tensors' device chooses the kernels (CPU or "
                         f"CUDA): target must be 'cpu', got {compile_options['target']!r}")
    if frameworks is None:
        frameworks = _FRAMEWORKS
    elif isinstance(frameworks, str):
        frameworks = (frameworks,)
    bad = set(frameworks) - set(_FRAMEWORKS)
    if bad:
        raise ValueError(f"unknown framework(s) {sorted(bad)}; expected some of {_FRAMEWORKS}")
    options = PatchOptions(layout=layout, fallback=bool(fallback),
                           compile_options=dict(compile_options))
    all_classes = _classes()
    classes = [(fw, cls, p) for fw, cls, p in all_classes if fw in frameworks]
    # (the timm blocks' token-layout patch is reported through their WindowAttention)
    excluded = [(fw, cls) for fw, cls, p in all_classes
                if fw not in frameworks and p not in _BLOCK_PATCHES]
    count = 0
    skipped = []  # (name, module, framework, reason)
    for name, module in model.named_modules():
        _skipped.pop(module, None)
        for fw, cls, patch_type in classes:
            if not isinstance(module, cls):
                continue
            if patch_type in _BLOCK_PATCHES and layout != "auto":
                _unpatched(module, patch_type.attr)  # drop a block patch of an earlier call
                continue
            why = _supported(patch_type, module)
            if why is not None:
                if patch_type is not MaxxVitPartitionAttention:
                    # (MaxViT's partition patch: its attention module reports why)
                    skipped.append((name, module, fw, why))
                continue
            _install(module, patch_type(_unpatched(module, patch_type.attr), name, options))
            if patch_type not in _BLOCK_PATCHES and patch_type.kind == "attention":
                count += 1
    sites = [(site, mlp) for site in mlp_sites(model)]
    sites += [(site, linear) for site in linear_sites(model)]
    for (name, module, fw, patch_type, why), wanted in sites:
        _unpatched(module, patch_type.attr)  # re-patched below, or left alone (False)
        if not wanted:
            continue
        if fw not in frameworks:
            why = f"framework {fw!r} not selected (frameworks={tuple(frameworks)})"
        if why is not None:
            skipped.append((name, module, fw, why))
            continue
        _install(module, patch_type(module, name, options))
    _install_residual_patches(model, options)
    patched = {id(m) for _, m in model.named_modules() if _dispatchers(m)}
    for name, module in model.named_modules():
        if id(module) in patched:
            continue
        fw = next((fw for fw, cls in excluded if isinstance(module, cls)), None)
        if fw is not None:
            skipped.append((name, module, fw, f"framework {fw!r} not selected "
                                              f"(frameworks={tuple(frameworks)})"))
            continue
        why = _unknown_attention(module, classes, patched)
        if why is not None:
            skipped.append((name, module, _framework_of(module), why))
    for name, module, fw, why in skipped:
        _skipped[module] = {"name": name, "framework": fw, "class": _class_name(module),
                            "reason": why}
    _warn_skipped(model, count, skipped, frameworks)
    seen = {fw for _, module in model.named_modules() for fw, cls, _ in all_classes
            if isinstance(module, cls)}
    _check_versions(seen)
    return count


#: ``(module, block class, its "residual" patch)``: blocks whose residual adds move
#: into their kernels' epilogues where their attention's patch takes the residual
#: (see :class:`.patching.ResidualBlock`)
_RESIDUAL_BLOCKS = (
    ("timm.models.swin_transformer", "SwinTransformerBlock", TimmResidual),
    ("torchvision.models.swin_transformer", "SwinTransformerBlock", TorchvisionResidual),
)


def _install_residual_patches(model, options: PatchOptions) -> None:
    """(Re)install the "residual" patch of each block of :data:`_RESIDUAL_BLOCKS` whose
    attention's patch fuses the residual; drop it elsewhere (an earlier swap's)."""
    blocks = []
    for module_name, cls_name, residual in _RESIDUAL_BLOCKS:
        cls = getattr(sys.modules.get(module_name), cls_name, None)
        if isinstance(cls, type):
            blocks.append((cls, residual))
    for name, module in model.named_modules():
        for cls, residual in blocks:
            if type(module) is not cls:  # a subclass (SwinV2's post-norm blocks) has its own forward
                continue
            _unpatched(module, residual.attr)
            if residual.installable(module):
                _install(module, residual(module, name, options))


#: module -> its entry of :func:`unpatched` (the last swap_attention that saw it)
_skipped: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

#: window-attention classes of the frameworks that swin_opt knows and does not patch
_KNOWN_UNSUPPORTED = (
    ("timm.models.gcvit", "WindowAttentionGlobal",
     "GCViT global-query attention: the queries come from a global token map, not the "
     "window"),
)

_ATTENTION_NAME = re.compile(r"(Window\w*Attention|Swin\w*Attention|WindowMultiHead)")


def _class_name(module) -> str:
    cls = type(module)
    return f"{cls.__module__}.{cls.__qualname__}"


def _framework_of(module) -> str:
    top = type(module).__module__.split(".")[0]
    return top


def _unknown_attention(module, classes, patched) -> Optional[str]:
    """Why a module that looks like window attention (known unsupported classes, or a
    class name such as ``*WindowAttention*`` / ``*Swin*Attention``) is not patched;
    None for every other module and for wrappers of patched modules."""
    if any(isinstance(module, cls) for _, cls, _ in classes):
        return None
    for mod_name, cls_name, why in _KNOWN_UNSUPPORTED:
        mod = sys.modules.get(mod_name)
        cls = getattr(mod, cls_name, None) if mod is not None else None
        if isinstance(cls, type) and isinstance(module, cls):
            return why
    if not _ATTENTION_NAME.search(type(module).__name__):
        return None
    if any(id(m) in patched for m in module.modules()):
        return None  # a wrapper (e.g. DonutSwinAttention) of a patched module
    return "not a window-attention class swin_opt knows"


def _warn_skipped(model, count, skipped, frameworks) -> None:
    groups = {}
    for name, module, fw, why in skipped:
        groups.setdefault((fw, _class_name(module), why), []).append(name or "<root>")
    for (fw, cls, why), names in groups.items():
        shown = ", ".join(names[:3]) + (f", ... ({len(names)} modules)" if len(names) > 3 else "")
        warnings.warn(f"swin_opt: not patching {fw} {cls} ({shown}): {why}", stacklevel=3)
    if count == 0:
        what = (f"{len(skipped)} window-attention module(s) left unpatched (see "
                "swin_opt.torch.unpatched(model))" if skipped else
                f"no Swin window-attention module of {', '.join(frameworks)} found")
        warnings.warn(f"swin_opt: swap_attention patched nothing in {type(model).__name__}: "
                      f"{what}", stacklevel=3)


def unpatched(model) -> List[dict]:
    """The window-attention modules and Swin blocks' MLPs of ``model`` that the last
    :func:`swap_attention` left alone, one dict each: ``name``, ``framework``,
    ``class`` (qualified) and ``reason``.  Covers supported classes in a
    configuration the kernels do not take (an MLP whose GELU is the tanh form,
    say), classes of frameworks excluded by ``frameworks=``, and window-attention
    classes swin_opt does not know (not the MLPs that ``mlp=False`` keeps).
    Calls that fall back at run time are counted in :func:`patch_stats` and
    warned about once per reason (:class:`~.fallback.FallbackWarning`)."""
    out = []
    for name, module in model.named_modules():
        entry = _skipped.get(module)
        if entry is not None and not _dispatchers(module):
            out.append(dict(entry, name=name))
    return out


def _unpatched(module, attr):
    """Remove an existing swin_opt patch of ``attr`` (so the saved original is the real one)."""
    old = _dispatchers(module).get(attr)
    if old is not None:
        _uninstall_attr(module, old.patch)
    return module


def _install(module, patch: Patch) -> None:
    object.__setattr__(module, patch.attr, _Dispatch(module, patch))


def _uninstall_attr(module, patch: Patch) -> None:
    if patch.had_instance_attr:
        object.__setattr__(module, patch.attr, patch.saved_attr)
    else:
        module.__dict__.pop(patch.attr, None)


def restore_attention(model) -> int:
    """Undo :func:`swap_attention` on ``model`` (its MLP and dense-layer patches too);
    returns the number of attention layers restored."""
    count = 0
    for _, module in model.named_modules():
        for attr, dispatch in _dispatchers(module).items():
            _uninstall_attr(module, dispatch.patch)
            if attr == "forward" and dispatch.patch.kind == "attention":
                count += 1
    return count


def patch_stats(model) -> List[dict]:
    """One dict per patched method in ``model``: name, framework, kind
    (``"attention"``, ``"mlp"``, ``"linear"``, ``"bias"`` or ``"residual"``), method,
    kernel_calls, fallback_calls and fallback_reasons (reason -> count)."""
    out = []
    for _, module in model.named_modules():
        for dispatch in _dispatchers(module).values():
            out.append(dispatch.patch.stats())
    return out
