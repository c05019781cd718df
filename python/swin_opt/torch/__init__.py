"""PyTorch integration: call kernels on torch tensors and swap the attention core of Swin models.

This package imports without PyTorch installed (its modules import
:mod:`torch` when it is there); its entry points then raise ImportError.

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
timm (SwinV2-CR)       ``timm.models.swin_transformer_v2_cr.WindowMultiHeadAttention``
                       (window layout; meta-MLP bias as a compact table)
timm (MaxViT family)   ``timm.models.maxxvit.AttentionCl`` and ``...Attention2d``
                       (NCHW): MaxViT's block and grid attention, MaxxViT,
                       CoAtNet's whole-map attention; window layout on timm's
                       partitions, ``RelPosBias`` or ``RelPosBiasTf`` tables;
                       ``PartitionAttentionCl._partition_attn``: token layout,
                       the block or grid read from the map
                       (:mod:`.maxvit_patches`)
torchvision            ``torchvision.models.swin_transformer.ShiftedWindowAttention``
                       and ``...V2``; token layout when the map is at least one
                       window on both axes, else window layout with torch-side
                       pad/roll/partition
torchvision (video)    ``torchvision.models.video.swin_transformer.ShiftedWindowAttention3d``
                       (3-D token layout, pad then shift)
transformers (>= 5)    ``transformers.models.swin.modeling_swin.SwinAttention``
transformers (4.x)     ``transformers.models.swin.modeling_swin.SwinSelfAttention``
transformers           ``DonutSwinSelfAttention``, ``MaskFormerSwinSelfAttention``,
                       ``ClapAudioSelfAttention``, ``Swinv2SelfAttention``,
                       ``Swin2SRSelfAttention`` (window layout)
monai (Swin-UNETR)     ``monai.networks.nets.swin_unetr.SwinTransformerBlock.forward_part1``
                       (2-D and 3-D token layout: norm1, then pad, roll and
                       partition in the kernel) and its ``WindowAttention``
                       (window layout, where the block falls back;
                       :mod:`.monai_patches`)
timm (BEiT)            ``timm.models.beit.Attention`` (the class-token kernels) and
                       the shared ``RelativePositionBias``, which hands on its
                       table (:mod:`.table_bias`)
transformers (BEiT)    ``BeitAttention`` (>= 5), ``Data2VecVisionSelfAttention``
                       and their ``*RelativePositionBias`` (per layer or shared),
                       which hand on the table (:mod:`.table_bias`)
=====================  ==========================================================

By default (``mlp=True``) it also runs the MLP of each timm, torchvision and
transformers Swin block, ``fc2(GELU(fc1(x)))``, through a compiled kernel
(``torch.ops.swin_opt.mlp``, :mod:`.mlp`; float32 CPU inference, one
library per width for every batch and map size); ``mlp=False`` keeps
torch's. With ``linear=True`` (the default) the patch-merging reductions and the
MLP layers of transformers' SwinV2 run through oneDNN instead of ``F.linear``'s MKL
(:mod:`.linears`).

Window-layout patches also take the masks of maps a single window long on a
shifted axis (``always_partition``; see :mod:`.windows`).
:func:`unpatched` lists the window-attention modules (and block MLPs) a swap
left alone and why.

SwinV2 modules (cosine attention, continuous position bias) run the table
their ``cpb_mlp`` gives with, at inference (on the CPU or a CUDA device), the
cosine kernel, and in training a scale-1 plain kernel on ``s_h
q/|q|`` and ``k/|k|`` (see :func:`.patching.cosine_kernel_scale` and
:func:`.projections.cosine_qk`, whose preparation autograd differentiates,
``logit_scale`` included).

Patched modules fall back to their original forward (or raise, with
``fallback=False``) whenever the kernel does not apply: training mode or
autograd where the backward kernels do not (dtypes other than float32 on the
CPU, attention dropout, padded maps, swinv2_cr's meta MLP dropout in training
mode), devices other than the CPU and CUDA (on a
CUDA device the GPU kernels run: see :mod:`.ops`), dtypes other than
float32/float16/bfloat16, ``torch.jit.script`` / ``torch.jit.trace``, a mask
that is not a Swin shift mask, requested attention probabilities or head
masks (transformers).  Each reason is warned about once per process
(:class:`FallbackWarning`); :func:`patch_stats` reports how often each module
used the kernel and why it fell back; :func:`restore_attention` undoes the
patch.

torch.compile and torch.export
------------------------------
The patches call the kernels through the custom operators
``torch.ops.swin_opt.window_attention`` / ``window_attention_packed`` (see
:mod:`.ops`), which name their kernel by a configuration string and have
fake implementations, so ``torch.compile`` (inductor) keeps them in its graph
and ``torch.export.export(..., strict=True)`` exports them.  Dynamo traces
the patches without graph breaks: their data-dependent checks (shift-mask
identification, the relative position index) and the kernel builds run once,
at trace time, on the real buffers (:func:`.tracing.trace_constant`);
changing a mask buffer's contents after compiling is not seen.  Non-strict
export sees fake buffers, cannot identify masks and exports the original
attention there.

Copies
------
``copy.deepcopy`` and ``torch.save`` / ``torch.load(weights_only=False)`` of a
swapped model give a swapped model (its patches re-created, statistics
reset; loading needs :mod:`swin_opt` importable).

Kernel builds
-------------
Each distinct configuration is built by ``swin-aot`` on first use (about
1-3 s), and each build says so in one line: on the ``swin_opt`` logger at
INFO, or on stderr when the application configured no logging
(:mod:`swin_opt.log`).  :func:`warmup` builds all of a model's kernels ahead
of time, concurrently.

The kernels run on the calling thread's GNU OpenMP team: in a PyTorch
process that is torch's own intra-op pool (``torch.set_num_threads``), so
kernels and torch's operators never compete for the cores.

Modules, each importing only those listed before it: :mod:`.tracing`
(trace-time constants), :mod:`.fallback` (why a call does not use its
kernel), :mod:`.tensors` (tensor calls, kernel cache), :mod:`.masks` (shift
mask identification), :mod:`.attention_math` (the operators' computation in
torch: the CUDA backward and fallback), :mod:`.ops` (the custom operators and
their CUDA implementations, the process's kernels), :mod:`.dense` (the compiled
dense layers' operators, packed weights), :mod:`.projections` (the projections
and q/k/v preparation the adapters share), :mod:`.patching` (the patch base), :mod:`.windows`
(window-layout calls), :mod:`.table_bias` (BEiT's bias handed on as its table), :mod:`.timm_patches`, :mod:`.torchvision_patches`,
:mod:`.transformers_patches`, :mod:`.maxvit_patches` (one per framework or model
family), :mod:`.mlp` (the MLP
operator and patches), :mod:`.swap` (the model entry points) and
:mod:`.warmup`.
"""

from __future__ import annotations

from .fallback import FallbackWarning, KernelUnavailable
from .masks import NO_MASK, match_shift_mask
from .dense import forget_packed_weights
from .swap import patch_stats, restore_attention, swap_attention, unpatched
from .tensors import attention, compile_kernel
from .warmup import build_kernels, warmup

__all__ = [
    "attention",
    "compile_kernel",
    "match_shift_mask",
    "swap_attention",
    "restore_attention",
    "patch_stats",
    "unpatched",
    "KernelUnavailable",
    "FallbackWarning",
    "NO_MASK",
    "warmup",
    "build_kernels",
    "forget_packed_weights",
]
