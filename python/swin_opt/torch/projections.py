"""The q/k/v and output projections around the kernels, and the preparation of
q, k and v the framework adapters share: :func:`linear` (oneDNN for float32
CPU projections), the qkv splits for window- and token-layout kernels, the
padding rows of token-layout kernels, and SwinV2's cosine attention on a
plain kernel (:func:`cosine_qk`)."""

from __future__ import annotations

import math
import os

from .dense import linear_inference

try:
    import torch
except ImportError:  # swin_opt.torch imports without PyTorch; its entry points need it
    torch = None

__all__ = ["linear", "project", "linear_backend", "qkv_windows", "heads_first", "qkv_packed",
           "pad_rows", "cosine_qk", "cosine_packed", "autograd_records", "packed_inputs"]


def linear(x, weight, bias=None, residual=None):
    """``x @ weightᵀ + bias (+ residual)``, the q/k/v and output projections around
    the kernels and the other dense layers the swap runs (:mod:`.linears`);
    ``residual`` (``x``'s leading shape, ``weight``'s rows) is added in the
    kernel's epilogue where a compiled kernel runs, else by torch.

    float32 CPU tensors go through whichever of these is fastest, by
    :func:`linear_backend` (``SWIN_OPT_LINEAR``):

    * ``"swin"`` (the default): at inference (nothing requires grad, or grad
      mode off), the layer's compiled kernel (:mod:`swin_opt.dense`, the
      ``rpe.matmul`` of the MLPs: 0.9-1.4x oneDNN per Swin-T layer through
      the operator, Zen 5, 2 threads, ``bench/dense.py``; the swapped Swin-T
      1-11% faster for it), ``swin_opt::dense`` under
      ``torch.compile``; under autograd and where the layer has no kernel,
      oneDNN as below;
    * ``"onednn"``: ``torch.ops.mkldnn._linear_pointwise``, 2.2-2.5x
      ``F.linear``'s MKL ``addmm`` on AMD EPYC; while ``torch.compile`` traces
      and under autograd wrapped in the custom op ``swin_opt::linear``, which
      inductor calls as it is (it lowers ``mkldnn._linear_pointwise`` itself
      only for frozen, constant weights), and whose backward runs ``dx``
      through oneDNN and ``dW`` through torch;
    * ``"torch"``: ``F.linear``.

    Every other device and dtype takes ``F.linear``.
    """
    backend = linear_backend()
    if (backend != "torch" and x.dtype == torch.float32 and weight.dtype == torch.float32
            and x.device.type == "cpu"):
        differentiating = torch.is_grad_enabled() and (
            x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad))
        if backend == "swin" and not differentiating:
            out = linear_inference(x, weight, bias, residual)
            if out is not None:
                return out
        if differentiating or torch.compiler.is_compiling():
            out = torch.ops.swin_opt.linear(x, weight, bias)
        else:
            out = torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
    else:
        out = torch.nn.functional.linear(x, weight, bias)
    return out if residual is None else out + residual


def project(layer, x, residual=None):
    """``layer(x) (+ residual)`` for a projection module: :func:`linear` for a plain
    ``nn.Linear``."""
    if type(layer) is torch.nn.Linear:
        return linear(x, layer.weight, layer.bias, residual)
    out = layer(x)
    return out if residual is None else out + residual


_BACKEND = None
_BACKENDS = ("swin", "onednn", "torch")


def linear_backend() -> str:
    """How :func:`linear` runs float32 CPU layers: ``"swin"``, ``"onednn"`` or
    ``"torch"`` (see there): ``$SWIN_OPT_LINEAR`` (default ``"swin"``), ``"torch"``
    where this torch has no oneDNN linear.

    Decided once per process, by the first call. Every patch makes that call
    when it is created (:meth:`.patching.Patch._setup`), i.e. at swap time:
    were the first call made while ``torch.compile`` or strict
    ``torch.export`` traces, dynamo would refuse it
    (``torch.backends.mkldnn.is_available`` is marked as skipped) and the
    whole-graph compile or the export would fail."""
    global _BACKEND
    if _BACKEND is None:
        wanted = os.environ.get("SWIN_OPT_LINEAR", "swin")
        if wanted not in _BACKENDS:
            raise ValueError(f"SWIN_OPT_LINEAR must be one of {', '.join(_BACKENDS)}, got {wanted!r}")
        onednn = (torch.backends.mkldnn.is_available()
                  and hasattr(torch.ops.mkldnn, "_linear_pointwise"))
        _BACKEND = wanted if onednn else "torch"
    return _BACKEND


def qkv_windows(qkv, b, n, heads, head_dim, *, head_first: bool = False):
    """``[B_, N, 3*A]`` fused qkv -> three contiguous ``[B_, heads, N, head_dim]`` views (one copy).

    The channels are ``[3, heads, head_dim]`` (Swin's), or with ``head_first``
    ``[heads, 3, head_dim]`` (timm's MaxViT / CoAtNet configs).  ``qkv`` may be any
    view whose last axis can be split (a transposed NCHW map, say)."""
    if head_first:
        t = qkv.view(b, n, heads, 3, head_dim).permute(3, 0, 2, 1, 4).contiguous()
    else:
        t = qkv.view(b, n, 3, heads, head_dim).permute(2, 0, 3, 1, 4).contiguous()
    return t[0], t[1], t[2]


def heads_first(x, b, n, heads, head_dim):
    """``[B_, N, heads*head_dim]`` -> contiguous ``[B_, heads, N, head_dim]``."""
    return x.view(b, n, heads, head_dim).transpose(1, 2).contiguous()


def qkv_packed(x, weight, bias, heads, head_dim):
    """``x`` ``[B, L, C]`` -> the qkv projection ``[B, L, 3, heads, head_dim]``: one GEMM,
    no copy; packed-qkv kernels read q, k and v out of it where they lie."""
    qkv = linear(x, weight, bias)
    b, n, _ = qkv.shape
    return qkv.view(b, n, 3, heads, head_dim)


def pad_rows(bias, channels):
    """q/k/v of a zero (padded) token: the qkv bias as ``[3, C]`` float32."""
    if bias is None:
        return torch.zeros((3, channels), dtype=torch.float32)
    return bias.detach().float().reshape(3, channels).contiguous()


def cosine_qk(q, k, logit_scale, head_axis: int):
    """SwinV2's cosine attention as the kernel's plain attention with scale 1:
    returns ``(q, k)`` prepared for it.

    SwinV2 computes ``cos(q_i, k_j) * s_h`` with ``s_h = exp(min(logit_scale_h,
    log 100))`` (timm's swinv2 and swinv2_cr, torchvision and transformers all
    clamp at ``log(1 / 0.01)`` and normalise with ``F.normalize``'s
    ``x / max(|x|, 1e-12)``); that is the dot product of ``s_h q_i / |q_i|`` and
    ``k_j / |k_j|``.  ``q``/``k`` are views whose axis ``head_axis`` is the
    head.  The bias table and the shift mask are added after the product in
    both forms, so a scale-1 kernel on the prepared q/k is exact.  ``q`` and
    ``k`` are returned as they are when ``logit_scale`` is None (Swin V1).

    Where autograd records the call (anything requiring grad, grad mode on)
    the result is computed out of place with torch's differentiable operators,
    ``logit_scale`` included, so that autograd gives dq, dk and dlogit_scale
    (the clamp's gradient is torch's, as in the frameworks).  Otherwise (inference)
    ``q`` and ``k`` are changed in place, without a copy (they may be slices
    of the packed qkv, which then holds the result), and returned.
    """
    if logit_scale is None:
        return q, k
    heads = q.shape[head_axis]
    per_head = (heads,) + (1,) * (q.dim() - head_axis - 1)
    if autograd_records(q, k, logit_scale):
        s = torch.clamp(logit_scale.float(), max=math.log(100.0)).exp()
        s = s.reshape(per_head).to(q.dtype)
        F = torch.nn.functional
        # .to: under CUDA autocast F.normalize's norm is float32, the kernel's dtype q's
        return ((F.normalize(q, dim=-1) * s).to(q.dtype),
                F.normalize(k, dim=-1).to(k.dtype))
    s = torch.clamp(logit_scale.detach().float(), max=math.log(100.0)).exp()
    s = s.reshape(per_head).to(q.dtype)
    # F.normalize is x / max(|x|, 1e-12); divide in place (no copy), the scale folded in
    q.div_(torch.linalg.vector_norm(q, dim=-1, keepdim=True).clamp_min_(1e-12).div_(s))
    k.div_(torch.linalg.vector_norm(k, dim=-1, keepdim=True).clamp_min_(1e-12))
    return q, k


def cosine_packed(qkv, logit_scale):
    """:func:`cosine_qk` on the packed qkv ``[B, L, 3, heads, head_dim]``: the packed
    qkv with q and k prepared (the same tensor, changed in place, at inference;
    a new one, q/k/v stacked again, where autograd records the call)."""
    q, k = cosine_qk(qkv[:, :, 0], qkv[:, :, 1], logit_scale, head_axis=2)
    if logit_scale is None or not autograd_records(qkv, logit_scale):
        return qkv  # prepared in place
    return torch.stack((q, k, qkv[:, :, 2]), dim=2)


def autograd_records(*tensors) -> bool:
    """Whether autograd records an operation on ``tensors`` (None entries skipped):
    grad mode is on and one of them requires grad."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def packed_inputs(x, weight, bias, heads, head_dim, logit_scale):
    """Packed qkv ``[B, L, 3, heads, head_dim]``, prepared for cosine attention when
    ``logit_scale`` is given (SwinV2 on the plain kernel; None for a cosine
    kernel, which normalizes them itself), and the padded tokens' ``[3, C]`` q/k/v.

    The padded rows need no normalisation: SwinV2's key bias is zero, so a
    padded key is 0 either way, and a padded query only gives outputs that are
    cropped."""
    qkv = cosine_packed(qkv_packed(x, weight, bias, heads, head_dim), logit_scale)
    return qkv, pad_rows(bias, heads * head_dim)
