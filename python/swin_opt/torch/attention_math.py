"""What the ``swin_opt::`` attention operators compute, in torch's operators, on
any device: :func:`forward` and the gradients :func:`backward`, for every
layout a kernel takes (windows, tokens with shift and padding, packed qkv),
BEiT's class token and SwinV2's cosine form (forward only).

The operators' CUDA implementations (:mod:`.ops`) use them where no GPU
kernel does the work: a configuration the GPU kernels do not take (cosine
attention today), or no GPU kernel built (no ``swin-aot`` or CUDA toolkit).
The computation follows :mod:`swin_opt.reference` step for step (Swin's
partition, roll and padding, its shift mask, the bias table gathered by
the relative index), in float32 whatever the inputs' dtype, and is checked
against the CPU kernels (python/tests/test_torch_cuda.py).

The backward recomputes the attention probabilities from q, k, v, the table
and the mask (nothing but the inputs is saved) and applies softmax's
gradient in closed form; the table's gradient is gathered per table row in
a fixed order (no atomics, so it is deterministic).
"""

from __future__ import annotations

import functools
import json
import math
import threading
from typing import Dict, Tuple

import numpy as np

from .. import reference as _ref
from ..config import KernelConfig, make_config

try:
    import torch
except ImportError:  # swin_opt.torch imports without PyTorch; its entry points need it
    torch = None

__all__ = ["config_of", "forward", "backward", "packed_forward", "packed_backward",
           "to_windows", "from_windows", "split_packed", "merge_packed"]


@functools.lru_cache(maxsize=None)
def config_of(key: str) -> KernelConfig:
    """The :class:`~swin_opt.config.KernelConfig` an operator's config string names."""
    spec = json.loads(key)
    opts = {k: v for k, v in spec["options"].items() if k != "cache_dir"}
    for name in ("resolution", "shift"):
        if isinstance(opts.get(name), list):
            opts[name] = tuple(opts[name])
    return make_config(tuple(spec["window"]), spec["heads"], spec["head_dim"], **opts)


# --------------------------------------------------------------------------- #
# Per-device constants: the relative index, the table's gather, the shift mask
# --------------------------------------------------------------------------- #
_lock = threading.Lock()
_constants: Dict[tuple, "torch.Tensor"] = {}


def _constant(what: str, key: tuple, device, make) -> "torch.Tensor":
    """``make()`` (a NumPy array) on ``device``, made once per device: a call after
    the first copies nothing to the device (as CUDA graph capture requires)."""
    full = (what, key, str(device))
    t = _constants.get(full)
    if t is None:
        t = torch.from_numpy(np.ascontiguousarray(make())).to(device)
        with _lock:
            t = _constants.setdefault(full, t)
    return t


def _index_of(cfg: KernelConfig) -> np.ndarray:
    """``[N * N]``: the table row of each (query, key) pair: Swin's index, or with a
    class token BEiT's (its three rows past Swin's ``T``)."""
    make = _ref.class_token_relative_index if cfg.class_token else _ref.relative_index
    return make(cfg.window).reshape(-1).astype(np.int64)


def _relative_index(cfg: KernelConfig, device):
    """:func:`_index_of` on ``device``."""
    return _constant("index", (cfg.window, cfg.class_token), device, lambda: _index_of(cfg))


def _table_gather(cfg: KernelConfig, device):
    """``[T, max pairs per row]``: the pairs of each table row, padded with the
    index ``N * N`` (a zero row): the table's gradient is a sum over each row."""
    def make():
        index = _index_of(cfg)
        order = np.argsort(index, kind="stable")
        counts = np.bincount(index, minlength=cfg.table_rows)
        gather = np.full((counts.size, counts.max()), index.size, dtype=np.int64)
        start = 0
        for row, count in enumerate(counts):
            gather[row, :count] = order[start:start + count]
            start += count
        return gather
    return _constant("gather", (cfg.window, cfg.class_token), device, make)


def _shift_mask(cfg: KernelConfig, device):
    """Swin's ``[nW, N, N]`` mask of the (padded) map, or None without a shift."""
    if cfg.resolution is None or not any(cfg.shift):
        return None
    return _constant("mask", (cfg.padded_resolution, cfg.window, cfg.shift), device,
                     lambda: _ref.shift_mask(cfg.padded_resolution, cfg.window,
                                             cfg.shift).astype(np.float32))


# --------------------------------------------------------------------------- #
# Token layout <-> windows
# --------------------------------------------------------------------------- #
def _pad(x, padded, fill):
    """``[B, *res, C]`` padded at the end of each spatial axis to ``padded``; the
    padded tokens hold ``fill`` (``[C]``), or zeros."""
    if tuple(x.shape[1:-1]) == tuple(padded):
        return x
    out = x.new_zeros((x.shape[0], *padded, x.shape[-1]))
    if fill is not None:
        out[...] = fill.to(x.dtype)
    out[(slice(None),) + tuple(slice(0, n) for n in x.shape[1:-1])] = x
    return out


def _roll(x, shift, sign):
    if not any(shift):
        return x
    return torch.roll(x, [sign * s for s in shift], list(range(1, 1 + len(shift))))


def to_windows(x, cfg: KernelConfig, fill=None):
    """Token-layout ``[B, L, C]`` -> windows ``[B * nW, heads, N, head_dim]``: shift
    and pad (in the configuration's order), then partition (Swin's order; MaxViT's
    grid for ``partition="grid"``, which has no shift and no padding)."""
    b, rank = x.shape[0], len(cfg.window)
    res, padded = tuple(cfg.resolution), tuple(cfg.padded_resolution)
    x = x.reshape(b, *res, cfg.channels)
    if cfg.padding == "shift_then_pad":
        x = _pad(_roll(x, cfg.shift, -1), padded, fill)
    else:  # pad_then_shift, or no padding (both orders coincide)
        x = _roll(_pad(x, padded, fill), cfg.shift, -1)
    grid = cfg.partition == "grid"
    split = [b]
    for n, w in zip(padded, cfg.window):
        # each axis as (window coordinate, token coordinate): Swin's blocks, or
        # MaxViT's grid, whose token coordinate is the outer one
        split += [w, n // w] if grid else [n // w, w]
    window_axis, token_axis = (2, 1) if grid else (1, 2)
    perm = ([0] + [window_axis + 2 * a for a in range(rank)]
            + [token_axis + 2 * a for a in range(rank)])
    x = x.reshape(*split, cfg.channels).permute(*perm, 2 * rank + 1)
    x = x.reshape(-1, cfg.tokens_per_window, cfg.heads, cfg.head_dim)
    return x.transpose(1, 2)


def from_windows(x, cfg: KernelConfig):
    """Windows ``[B * nW, heads, N, head_dim]`` -> token layout ``[B, L, C]``: the
    inverse of :func:`to_windows` (reverse, crop and roll back), which is also its
    adjoint for what lies inside the map (the backward's map of gradients)."""
    rank = len(cfg.window)
    padded = tuple(cfg.padded_resolution)
    counts = [n // w for n, w in zip(padded, cfg.window)]
    x = x.transpose(1, 2).reshape(-1, *counts, *cfg.window, cfg.channels)
    perm = [0]
    for a in range(rank):
        perm += [1 + rank + a, 1 + a] if cfg.partition == "grid" else [1 + a, 1 + rank + a]
    x = x.permute(*perm, 2 * rank + 1).reshape(-1, *padded, cfg.channels)
    crop = (slice(None),) + tuple(slice(0, n) for n in cfg.resolution)
    if cfg.padding == "shift_then_pad":
        x = _roll(x[crop], cfg.shift, 1)
    else:
        x = _roll(x, cfg.shift, 1)[crop]
    return x.reshape(x.shape[0], -1, cfg.channels)


def split_packed(qkv):
    """``[B, L, 3, heads, d]`` -> q, k, v ``[B, L, heads * d]``."""
    b, n = qkv.shape[:2]
    return tuple(qkv[:, :, i].reshape(b, n, -1) for i in range(3))


def merge_packed(q, k, v, like):
    """q, k, v ``[B, L, C]`` -> ``[B, L, 3, heads, d]`` of ``like``'s shape."""
    return torch.stack((q, k, v), dim=2).reshape(like.shape)


# --------------------------------------------------------------------------- #
# The attention of windows, forward and backward
# --------------------------------------------------------------------------- #
def _probabilities(cfg: KernelConfig, q, k, table, logit_scale):
    """``softmax(scale q k^T + bias (+ mask))`` of float32 windows ``[B_, H, N, d]``
    (SwinV2: of q and k normalized, q scaled per head by its logit scale)."""
    if logit_scale is not None:
        s = torch.clamp(logit_scale.reshape(-1).float(), max=math.log(100.0)).exp()
        q = torch.nn.functional.normalize(q, dim=-1) * s[:, None, None]
        k = torch.nn.functional.normalize(k, dim=-1)
    logits = (q * cfg.effective_scale) @ k.transpose(-1, -2)
    n, heads = cfg.tokens_per_window, cfg.heads
    if table is not None:
        bias = table.float()[_relative_index(cfg, table.device)]
        logits = logits + bias.reshape(n, n, heads).permute(2, 0, 1)
    mask = _shift_mask(cfg, logits.device)
    if mask is not None:
        nw = mask.shape[0]
        logits = (logits.reshape(-1, nw, heads, n, n) + mask[:, None]).reshape(logits.shape)
    return torch.softmax(logits, dim=-1)


def _window_inputs(cfg: KernelConfig, q, k, v, pad_qkv):
    """q, k, v as float32 windows ``[B_, H, N, d]`` (token layout: partitioned, the
    padded tokens holding ``pad_qkv``'s rows, or zeros)."""
    if cfg.layout != "tokens":
        return q.float(), k.float(), v.float()
    fills = [None] * 3 if pad_qkv is None else [pad_qkv[i].float() for i in range(3)]
    return tuple(to_windows(t.float(), cfg, fill) for t, fill in zip((q, k, v), fills))


def forward(cfg: KernelConfig, q, k, v, table, pad_qkv=None, logit_scale=None):
    """The operator's output (window layout ``[B_, N, C]``, token layout
    ``[B, L, C]``) in q's dtype, from q, k, v in the operator's layout."""
    qw, kw, vw = _window_inputs(cfg, q, k, v, pad_qkv)
    p = _probabilities(cfg, qw, kw, table, logit_scale)
    out = p @ vw
    if cfg.layout == "tokens":
        return from_windows(out, cfg).to(q.dtype)
    return out.transpose(1, 2).reshape(out.shape[0], cfg.tokens_per_window,
                                       cfg.channels).to(q.dtype)


def backward(cfg: KernelConfig, q, k, v, table, dout) -> Tuple:
    """``(dq, dk, dv, dtable)`` of :func:`forward` (no cosine; padded tokens count as
    zeros, as in the backward kernels): dq, dk, dv in the inputs' layout and
    dtypes, dtable ``[T, heads]`` in q's dtype (the bias's gradient, also when
    ``table`` is None: the caller drops it then).

    With ``S = scale q k^T + B (+ mask)``, ``P = softmax(S)``, ``O = P v``:
    ``dv = P^T dO``, ``dS = P * (dP - rowsum(dP * P))`` with ``dP = dO v^T``,
    ``dq = scale dS k``, ``dk = scale dS^T q``, and ``dB`` the sum of ``dS`` over
    windows, gathered per table row."""
    qw, kw, vw = _window_inputs(cfg, q, k, v, None)
    p = _probabilities(cfg, qw, kw, table, None)
    n, heads = cfg.tokens_per_window, cfg.heads
    if cfg.layout == "tokens":
        dow = to_windows(dout.float(), cfg)
    else:
        dow = dout.float().reshape(-1, n, heads, cfg.head_dim).transpose(1, 2)
    dv = p.transpose(-1, -2) @ dow
    dp = dow @ vw.transpose(-1, -2)
    ds = p * (dp - (dp * p).sum(dim=-1, keepdim=True))
    scale = cfg.effective_scale
    dq = (ds @ kw) * scale
    dk = (ds.transpose(-1, -2) @ qw) * scale
    pairs = ds.sum(dim=0).permute(1, 2, 0).reshape(n * n, heads)
    pairs = torch.cat((pairs, pairs.new_zeros((1, heads))))
    dtable = pairs[_table_gather(cfg, pairs.device)].sum(dim=1)
    if cfg.layout == "tokens":
        dq, dk, dv = (from_windows(g, cfg) for g in (dq, dk, dv))
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), dtable.to(q.dtype)


def packed_forward(cfg: KernelConfig, qkv, table, pad_qkv=None, logit_scale=None):
    """:func:`forward` of a packed-qkv operator (``qkv`` ``[B, L, 3, heads, d]``)."""
    return forward(cfg, *split_packed(qkv), table, pad_qkv, logit_scale)


def packed_backward(cfg: KernelConfig, qkv, table, dout):
    """``(dqkv, dtable)`` of :func:`packed_forward`."""
    dq, dk, dv, dtable = backward(cfg, *split_packed(qkv), table, dout)
    return merge_packed(dq, dk, dv, qkv), dtable
