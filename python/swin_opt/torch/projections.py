"""The q/k/v and output projections around the kernels, and the preparation of
q, k and v the framework adapters share: :func:`linear` (oneDNN for float32
CPU projections), the qkv splits for window- and token-layout kernels, the
padding rows of token-layout kernels, and SwinV2's cosine attention on a
plain kernel (:func:`cosine_qk`)."""

from __future__ import annotations

import math
import os

try:
    import torch
except ImportError:  # swin_opt.torch imports without PyTorch; its entry points need it
    torch = None

__all__ = ["linear", "project", "onednn_linear", "qkv_windows", "heads_first", "qkv_packed",
           "pad_rows", "cosine_qk", "packed_inputs", "cosine_kernel_scale"]


def linear(x, weight, bias=None):
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
    if (onednn_linear() and x.dtype == torch.float32 and weight.dtype == torch.float32
            and x.device.type == "cpu"):
        differentiating = torch.is_grad_enabled() and (
            x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad))
        if differentiating or torch.compiler.is_compiling():
            return torch.ops.swin_opt.linear(x, weight, bias)
        return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
    return torch.nn.functional.linear(x, weight, bias)


def project(layer, x):
    """``layer(x)`` for a projection module: :func:`linear` for a plain ``nn.Linear``."""
    if type(layer) is torch.nn.Linear:
        return linear(x, layer.weight, layer.bias)
    return layer(x)


_ONEDNN = None


def onednn_linear() -> bool:
    """Whether :func:`linear` runs float32 CPU projections through oneDNN.

    Decided once per process, by the first call. Every patch makes that call
    when it is created (:meth:`.patching.Patch._setup`), i.e. at swap time:
    were the first call made while ``torch.compile`` or strict
    ``torch.export`` traces, dynamo would refuse it
    (``torch.backends.mkldnn.is_available`` is marked as skipped) and the
    whole-graph compile or the export would fail."""
    global _ONEDNN
    if _ONEDNN is None:
        _ONEDNN = (os.environ.get("SWIN_OPT_ONEDNN", "1") != "0"
                   and torch.backends.mkldnn.is_available()
                   and hasattr(torch.ops.mkldnn, "_linear_pointwise"))
    return _ONEDNN


def qkv_windows(qkv, b, n, heads, head_dim):
    """``[B_, N, 3*A]`` fused qkv -> three contiguous ``[B_, heads, N, head_dim]`` views (one copy)."""
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


def cosine_qk(q, k, logit_scale, head_axis: int) -> None:
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


def packed_inputs(x, weight, bias, heads, head_dim, logit_scale):
    """Packed qkv ``[B, L, 3, heads, head_dim]``, prepared for cosine attention when
    ``logit_scale`` is given (SwinV2 on the plain kernel; None for a cosine
    kernel, which normalizes them itself), and the padded tokens' ``[3, C]`` q/k/v.

    The padded rows need no normalisation: SwinV2's key bias is zero, so a
    padded key is 0 either way, and a padded query only gives outputs that are
    cropped."""
    qkv = qkv_packed(x, weight, bias, heads, head_dim)
    cosine_qk(qkv[:, :, 0], qkv[:, :, 1], logit_scale, head_axis=2)
    return qkv, pad_rows(bias, heads * head_dim)


def cosine_kernel_scale(logit_scale, *tensors):
    """``logit_scale`` when SwinV2's cosine kernel (q and k normalized inside it)
    computes this call, else None: the call then normalizes q and k in torch
    (:func:`cosine_qk`) for the plain kernel.

    The cosine kernels have no backward: they take only calls that autograd
    does not record (no grad mode, or nothing requiring grad), i.e.
    inference. The training path keeps :func:`cosine_qk`."""
    if logit_scale is None:
        return None
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad
                                       for t in (logit_scale, *tensors)):
        return None
    return logit_scale
