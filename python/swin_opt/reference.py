"""Independent NumPy reference for Swin window attention with relative position bias.

Everything here is written directly from the Swin / Video Swin formulas and is
deliberately independent of the compiler: it is the oracle all kernel tests are
compared against.  All arithmetic that produces attention outputs is done in
float64.  Only the normalisation of its arguments (window, shift, resolution,
padding names) and the rounding of a resolution to whole windows come from
:mod:`swin_opt.geometry`, which the kernel configuration uses too; that
module's docstring says why sharing them keeps this an independent check.

Conventions (2-D shown; 3-D windows ``(Wd, Wh, Ww)`` work the same way with one
more leading axis, and so does any other rank):

* Tokens inside a window are row-major: ``t = r * Ww + c``.
* ``relative_index(window)[i, j] = (r_i - r_j + Wh - 1) * (2 Ww - 1) + (c_i - c_j + Ww - 1)``.
* The bias table is Swin's ``relative_position_bias_table`` of shape
  ``[prod(2 W - 1), heads]`` and ``bias[h, i, j] = table[idx[i, j], h]``.
* Feature maps are ``[batch, *spatial, channels]``; windows are enumerated
  row-major over the image and batched image-major (``b = img * nW + w``).
* Window attention inputs are ``[num_windows, heads, N, head_dim]`` and the
  output is ``[num_windows, N, heads * head_dim]``.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple, Optional, Sequence

import numpy as np

from .geometry import (PADDING_CONVENTIONS, IntOrSeq, Shape, normalize_padding,
                       normalize_partition, normalize_resolution, normalize_shift,
                       normalize_window, padded_resolution, table_rows, window_tokens,
                       windows_per_image)

__all__ = [
    "MASK_VALUE",
    "PADDING_CONVENTIONS",
    "normalize_window",
    "normalize_shift",
    "normalize_padding",
    "window_tokens",
    "table_rows",
    "windows_per_image",
    "padded_resolution",
    "relative_index",
    "lookup",
    "class_token_relative_index",
    "class_token_lookup",
    "window_partition",
    "window_reverse",
    "grid_partition",
    "grid_reverse",
    "cyclic_shift",
    "reverse_cyclic_shift",
    "pad_spatial",
    "shift_mask",
    "shift_mask_closed_form",
    "attention_weights",
    "window_attention",
    "swin_block_attention_tokens",
    "window_attention_backward",
    "swin_block_attention_tokens_backward",
    "swinv2_relative_coords_table",
    "swinv2_cpb_table",
]

#: Value Swin writes into the shifted-window mask between tokens of different
#: regions (it is *not* ``-inf``).
MASK_VALUE = -100.0


# --------------------------------------------------------------------------- #
# Argument checks (their normalisation: swin_opt.geometry)
# --------------------------------------------------------------------------- #
def _check_shift(shift: Shape, window: Shape) -> None:
    if any(ss >= ww for ss, ww in zip(shift, window)):
        raise ValueError(f"shift {shift} must be smaller than the window {window} on every axis")


# --------------------------------------------------------------------------- #
# Relative position index / bias
# --------------------------------------------------------------------------- #
def _window_coords(window: Shape) -> np.ndarray:
    """``[rank, N]`` integer coordinates of the tokens of a window, row-major."""
    grids = np.meshgrid(*[np.arange(w) for w in window], indexing="ij")
    return np.stack(grids).reshape(len(window), -1)


def relative_index(window: IntOrSeq) -> np.ndarray:
    """Swin's ``relative_position_index``: int64 ``[N, N]`` rows into the bias table.

    Each coordinate delta ``a_i - a_j`` is shifted by ``W_a - 1`` into
    ``[0, 2 W_a - 2]`` and the deltas are combined in mixed radix
    ``(2 W_0 - 1, 2 W_1 - 1, ...)`` with the first axis most significant.
    """
    w = normalize_window(window)
    coords = _window_coords(w)
    rel = coords[:, :, None] - coords[:, None, :]  # [rank, N, N]: i - j
    idx = np.zeros(rel.shape[1:], dtype=np.int64)
    for axis, size in enumerate(w):
        idx = idx * (2 * size - 1) + (rel[axis] + size - 1)
    return idx


def lookup(table: np.ndarray, window: IntOrSeq) -> np.ndarray:
    """Gather the bias ``[heads, N, N]`` from a table ``[prod(2W-1), heads]``."""
    table = np.asarray(table)
    rows = table_rows(window)
    if table.ndim != 2 or table.shape[0] != rows:
        raise ValueError(
            f"table must have shape [{rows}, heads] for window {normalize_window(window)}, "
            f"got {table.shape}"
        )
    return np.ascontiguousarray(table[relative_index(window)].transpose(2, 0, 1))


def class_token_relative_index(window: IntOrSeq) -> np.ndarray:
    """BEiT's ``relative_position_index`` of a patch grid ``window`` with a class
    token first: int64 ``[N + 1, N + 1]``, ``N = prod(window)``.

    Built as BEiT builds it (timm's ``gen_relative_position_index``): Swin's
    index between the grid's tokens ``1..N``, then, with ``L = prod(2W - 1)``,
    row 0 (class -> token) set to ``L``, column 0 (token -> class) to ``L + 1``
    and the corner (class -> class) to ``L + 2``, in that order.
    """
    w = normalize_window(window)
    rows = math.prod(2 * size - 1 for size in w)
    n = math.prod(w)
    idx = np.zeros((n + 1, n + 1), dtype=np.int64)
    idx[1:, 1:] = relative_index(w)
    idx[0, :] = rows
    idx[:, 0] = rows + 1
    idx[0, 0] = rows + 2
    return idx


def class_token_lookup(table: np.ndarray, window: IntOrSeq) -> np.ndarray:
    """BEiT's bias ``[heads, N + 1, N + 1]`` from a table ``[prod(2W-1) + 3, heads]``
    (see :func:`class_token_relative_index`)."""
    table = np.asarray(table)
    rows = math.prod(2 * size - 1 for size in normalize_window(window)) + 3
    if table.ndim != 2 or table.shape[0] != rows:
        raise ValueError(
            f"table must have shape [{rows}, heads] for window {normalize_window(window)} "
            f"and a class token, got {table.shape}"
        )
    return np.ascontiguousarray(table[class_token_relative_index(window)].transpose(2, 0, 1))


# --------------------------------------------------------------------------- #
# Partition / reverse / roll / pad
# --------------------------------------------------------------------------- #
def _split_windows(x: np.ndarray, window: IntOrSeq, grid: bool) -> np.ndarray:
    """``[B, *spatial, C]`` -> ``[B * nW, N, C]``: each axis of ``n`` tokens as ``n / w``
    window coordinates and ``w`` token coordinates, the window coordinate outer
    (Swin's blocks) or inner (MaxViT's grid); windows row-major, then tokens."""
    w = normalize_window(window)
    x = np.asarray(x)
    rank = len(w)
    if x.ndim != rank + 2:
        raise ValueError(f"expected [batch, {rank} spatial axes, channels], got shape {x.shape}")
    spatial = x.shape[1:-1]
    if any(n % ww for n, ww in zip(spatial, w)):
        raise ValueError(f"spatial shape {spatial} is not divisible by {'grid' if grid else 'window'} {w}")
    split = [x.shape[0]]
    for n, ww in zip(spatial, w):
        split += [ww, n // ww] if grid else [n // ww, ww]
    split.append(x.shape[-1])
    # [B, <axis 0's two>, <axis 1's two>, ..., C] -> [B, windows..., tokens..., C]
    window_axis, token_axis = (2, 1) if grid else (1, 2)
    perm = ([0] + [window_axis + 2 * a for a in range(rank)]
            + [token_axis + 2 * a for a in range(rank)] + [2 * rank + 1])
    return x.reshape(split).transpose(perm).reshape(-1, math.prod(w), x.shape[-1])


def _merge_windows(windows: np.ndarray, window: IntOrSeq, resolution: IntOrSeq,
                   grid: bool) -> np.ndarray:
    """The inverse of :func:`_split_windows`: ``[B * nW, N, C]`` (or ``[B * nW, *window,
    C]``) back to ``[B, *resolution, C]``."""
    w = normalize_window(window)
    r = normalize_resolution(resolution, w)
    rank = len(w)
    if any(n % ww for n, ww in zip(r, w)):
        raise ValueError(f"resolution {r} is not divisible by {'grid' if grid else 'window'} {w}")
    windows = np.asarray(windows)
    c = windows.shape[-1]
    if windows.size % (math.prod(r) * c):
        raise ValueError(f"windows of shape {windows.shape} do not tile resolution {r}")
    y = windows.reshape([-1] + [n // ww for n, ww in zip(r, w)] + list(w) + [c])
    # [B, windows..., tokens..., C] -> [B, <axis 0's two>, <axis 1's two>, ..., C]
    perm = [0]
    for a in range(rank):
        perm += [1 + rank + a, 1 + a] if grid else [1 + a, 1 + rank + a]
    perm.append(2 * rank + 1)
    return y.transpose(perm).reshape([-1] + list(r) + [c])


def window_partition(x: np.ndarray, window: IntOrSeq) -> np.ndarray:
    """Split ``[B, *spatial, C]`` into windows ``[B * nW, N, C]``.

    Windows are ordered row-major over the image and image-major over the batch;
    tokens inside a window are row-major.  (Swin returns ``[B*nW, Wh, Ww, C]``;
    this is the same memory with the window axes flattened.)
    """
    return _split_windows(x, window, grid=False)


def window_reverse(windows: np.ndarray, window: IntOrSeq, resolution: IntOrSeq) -> np.ndarray:
    """Inverse of :func:`window_partition`: ``[B * nW, N, C]`` (or ``[B*nW, *window, C]``)
    back to ``[B, *resolution, C]``."""
    return _merge_windows(windows, window, resolution, grid=False)


def grid_partition(x: np.ndarray, grid: IntOrSeq) -> np.ndarray:
    """MaxViT's grid partition of ``[B, *spatial, C]`` into ``[B * nW, N, C]``.

    Each axis of ``n`` tokens splits as ``(grid, n / grid)``, token coordinate
    outer: window ``(wy, wx)`` (row-major over ``n / grid``) holds the tokens
    ``(ty * n_y / Gy + wy, tx * n_x / Gx + wx)`` in row-major ``(ty, tx)``
    order, as timm's ``grid_partition`` views and permutes the map.
    """
    return _split_windows(x, grid, grid=True)


def grid_reverse(windows: np.ndarray, grid: IntOrSeq, resolution: IntOrSeq) -> np.ndarray:
    """Inverse of :func:`grid_partition`: ``[B * nW, N, C]`` back to
    ``[B, *resolution, C]`` (timm's ``grid_reverse``)."""
    return _merge_windows(windows, grid, resolution, grid=True)


def _partition(x: np.ndarray, window: Shape, partition: str) -> np.ndarray:
    """The windows of a whole (shifted, padded) map: Swin's blocks or MaxViT's grid."""
    return grid_partition(x, window) if partition == "grid" else window_partition(x, window)


def _reverse(windows: np.ndarray, window: Shape, resolution: Shape, partition: str) -> np.ndarray:
    """The inverse of :func:`_partition`."""
    if partition == "grid":
        return grid_reverse(windows, window, resolution)
    return window_reverse(windows, window, resolution)


def cyclic_shift(x: np.ndarray, shift: IntOrSeq) -> np.ndarray:
    """Swin's cyclic shift of ``[B, *spatial, C]``: roll by ``-shift`` on the spatial axes."""
    x = np.asarray(x)
    s = normalize_shift(shift, x.ndim - 2)
    return np.roll(x, tuple(-v for v in s), axis=tuple(range(1, x.ndim - 1)))


def reverse_cyclic_shift(x: np.ndarray, shift: IntOrSeq) -> np.ndarray:
    """Undo :func:`cyclic_shift`: roll by ``+shift`` on the spatial axes."""
    x = np.asarray(x)
    s = normalize_shift(shift, x.ndim - 2)
    return np.roll(x, s, axis=tuple(range(1, x.ndim - 1)))


def pad_spatial(x: np.ndarray, resolution: Sequence[int], fill=0.0) -> np.ndarray:
    """Pad ``[B, *spatial, C]`` at the end of every spatial axis up to ``resolution``.

    ``fill`` is a scalar or a ``[C]`` vector written into every padded token.
    """
    x = np.asarray(x)
    target = tuple(resolution)
    if len(target) != x.ndim - 2 or any(t < n for t, n in zip(target, x.shape[1:-1])):
        raise ValueError(f"cannot pad spatial shape {x.shape[1:-1]} to {target}")
    out = np.empty((x.shape[0],) + target + (x.shape[-1],), dtype=np.result_type(x, np.asarray(fill)))
    out[...] = fill
    out[(slice(None),) + tuple(slice(0, n) for n in x.shape[1:-1])] = x
    return out


# --------------------------------------------------------------------------- #
# Shifted-window mask
# --------------------------------------------------------------------------- #
def shift_mask(resolution: IntOrSeq, window: IntOrSeq, shift: IntOrSeq) -> np.ndarray:
    """Shifted-window attention mask ``[nW, N, N]`` built exactly as the Swin code does.

    An ``img_mask`` of the (already padded) resolution is filled region by
    region, iterating per axis over ``slice(0, -w), slice(-w, -s), slice(-s, None)``
    with a running counter; it is partitioned into windows, and token pairs
    with different region ids get ``-100``.  With ``s == 0`` on an axis these
    slices degenerate (``slice(-w, -0)`` is empty and ``slice(-0, None)`` is the
    whole axis), which — as in Swin — means no masking along that axis.
    """
    w = normalize_window(window)
    r = normalize_resolution(resolution, w)
    s = normalize_shift(shift, len(w))
    _check_shift(s, w)
    img_mask = np.zeros((1,) + r + (1,))
    per_axis = [(slice(0, -ww), slice(-ww, -ss), slice(-ss, None)) for ww, ss in zip(w, s)]
    cnt = 0
    for region in itertools.product(*per_axis):
        img_mask[(slice(None),) + region + (slice(None),)] = cnt
        cnt += 1
    mask_windows = window_partition(img_mask, w).reshape(-1, math.prod(w))
    diff = mask_windows[:, None, :] - mask_windows[:, :, None]
    return np.where(diff != 0, MASK_VALUE, 0.0)


def shift_mask_closed_form(resolution: IntOrSeq, window: IntOrSeq, shift: IntOrSeq) -> np.ndarray:
    """Same mask from the closed-form region labels (valid for ``shift > 0``).

    On an axis of length ``n`` with window ``w`` and shift ``s`` the label of
    position ``p`` is 0 on ``[0, n-w)``, 1 on ``[n-w, n-s)`` and 2 on
    ``[n-s, n)``; the token label is the base-3 number of its axis labels.
    """
    w = normalize_window(window)
    r = normalize_resolution(resolution, w)
    s = normalize_shift(shift, len(w))
    _check_shift(s, w)
    label = np.zeros(r, dtype=np.int64)
    for axis, (n, ww, ss) in enumerate(zip(r, w, s)):
        p = np.arange(n)
        axis_label = np.where(p < n - ww, 0, np.where(p < n - ss, 1, 2))
        shape = [1] * len(r)
        shape[axis] = n
        label = label * 3 + axis_label.reshape(shape)
    lw = window_partition(label[None, ..., None], w)[..., 0]  # [nW, N]
    return np.where(lw[:, :, None] != lw[:, None, :], MASK_VALUE, 0.0)


# --------------------------------------------------------------------------- #
# Attention
# --------------------------------------------------------------------------- #
def _check_qkv(q, k, v):
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    if q.ndim != 4:
        raise ValueError(f"q must be [num_windows, heads, N, head_dim], got {q.shape}")
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError(f"q, k, v shapes differ: {q.shape}, {k.shape}, {v.shape}")
    return q, k, v


def attention_weights(q, k, bias=None, mask=None, scale=None) -> np.ndarray:
    """Softmax attention probabilities ``[B, heads, N, N]`` in float64.

    ``logits = (q * scale) @ k^T + bias + mask`` where ``scale`` defaults to
    ``head_dim ** -0.5``, ``bias`` is ``[heads, N, N]`` (never scaled) and
    ``mask`` is ``[nW, N, N]`` with window ``b`` using ``mask[b % nW]``.
    """
    q, k, _ = _check_qkv(q, k, k)
    if scale is None:
        scale = q.shape[-1] ** -0.5
    return _biased_softmax((q * scale) @ np.swapaxes(k, -1, -2), bias, mask)


def _biased_softmax(logits, bias, mask) -> np.ndarray:
    """``softmax(logits + bias + mask)`` over the last axis; logits ``[B, heads, N, N]``."""
    b, heads, n, _ = logits.shape
    if bias is not None:
        bias = np.asarray(bias, dtype=np.float64)
        if bias.shape != (heads, n, n):
            raise ValueError(f"bias must be [{heads}, {n}, {n}], got {bias.shape}")
        logits = logits + bias[None]
    if mask is not None:
        mask = np.asarray(mask, dtype=np.float64)
        nw = mask.shape[0]
        if mask.shape != (nw, n, n) or b % nw:
            raise ValueError(
                f"mask must be [nW, {n}, {n}] with num_windows ({b}) a multiple of nW, "
                f"got {mask.shape}"
            )
        logits = (logits.reshape(b // nw, nw, heads, n, n) + mask[None, :, None]).reshape(
            b, heads, n, n
        )
    logits = logits - logits.max(axis=-1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=-1, keepdims=True)
    return p


def swinv2_window_attention(q, k, v, logit_scale, bias=None, mask=None) -> np.ndarray:
    """SwinV2 cosine window attention in float64, ``[num_windows, N, heads * head_dim]``.

    ``logits[h, i, j] = cos(q_i, k_j) * min(exp(logit_scale[h]), 100) + bias + mask``
    with ``cos(a, b) = a.b / (max(|a|, 1e-12) max(|b|, 1e-12))`` (PyTorch's
    ``F.normalize``); ``logit_scale`` has one value per head; ``bias`` is the
    looked-up continuous position bias (see :func:`swinv2_cpb_table`).
    """
    q, k, v = _check_qkv(q, k, v)
    heads = q.shape[1]
    logit_scale = np.asarray(logit_scale, dtype=np.float64).reshape(-1)
    if logit_scale.shape != (heads,):
        raise ValueError(f"logit_scale must have one value per head ({heads}), "
                         f"got {logit_scale.size}")
    qn = np.maximum(np.linalg.norm(q, axis=-1), 1e-12)
    kn = np.maximum(np.linalg.norm(k, axis=-1), 1e-12)
    cos = (q @ np.swapaxes(k, -1, -2)) / (qn[..., :, None] * kn[..., None, :])
    scale = np.minimum(np.exp(logit_scale), 100.0)
    p = _biased_softmax(cos * scale[None, :, None, None], bias, mask)
    out = p @ v
    b, _, n, d = out.shape
    return out.transpose(0, 2, 1, 3).reshape(b, n, heads * d)


def window_attention(q, k, v, bias=None, mask=None, scale=None) -> np.ndarray:
    """Window attention in float64.

    ``q, k, v``: ``[num_windows, heads, N, head_dim]``; returns
    ``[num_windows, N, heads * head_dim]`` (Swin's layout before the output
    projection).  See :func:`attention_weights` for ``bias``/``mask``/``scale``.
    """
    q, k, v = _check_qkv(q, k, v)
    p = attention_weights(q, k, bias=bias, mask=mask, scale=scale)
    out = p @ v  # [B, heads, N, d]
    b, heads, n, d = out.shape
    return out.transpose(0, 2, 1, 3).reshape(b, n, heads * d)


class _TokenProblem(NamedTuple):
    """The checked arguments of a token-layout attention (forward or backward)."""

    window: Shape
    resolution: Shape
    shift: Shape
    padding: Optional[str]
    table: Optional[np.ndarray]
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    pad_qkv: np.ndarray
    padded: Shape
    partition: str
    batch: int
    channels: int
    heads: int
    head_dim: int


def _token_problem(q, k, v, table, resolution, window, shift, padding, pad_qkv,
                   heads, partition) -> _TokenProblem:
    """Normalises and checks what :func:`swin_block_attention_tokens` and its
    backward take: the geometry, the table (its heads), q, k, v (float64,
    ``[batch, L, heads*head_dim]``) and the padding rows (zeros by default)."""
    w = normalize_window(window)
    res = normalize_resolution(resolution, w)
    s = normalize_shift(shift, len(w))
    convention = normalize_padding(padding)
    partition = normalize_partition(partition, res, w, s)
    if table is not None:
        table = np.asarray(table, dtype=np.float64)
        if heads is not None and table.ndim == 2 and table.shape[1] != heads:
            raise ValueError(f"table has {table.shape[1]} heads, expected {heads}")
        heads = table.shape[1] if table.ndim == 2 else heads
    if heads is None:
        raise ValueError("heads is required when table is None")
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    if q.ndim != 3 or q.shape[1] != math.prod(res) or q.shape[2] % heads:
        raise ValueError(
            f"q must be [batch, {math.prod(res)}, heads*head_dim] with heads={heads}, got {q.shape}"
        )
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError(f"q, k, v shapes differ: {q.shape}, {k.shape}, {v.shape}")
    batch, _, c = q.shape
    padded = padded_resolution(res, w)
    if padded != res and convention is None:
        raise ValueError(
            f"resolution {res} is not divisible by window {w}; pass padding="
            "'pad_then_shift' or 'shift_then_pad'"
        )
    pad_qkv = np.zeros((3, c)) if pad_qkv is None else np.asarray(pad_qkv, dtype=np.float64)
    if pad_qkv.shape != (3, c):
        raise ValueError(f"pad_qkv must be [3, {c}], got {pad_qkv.shape}")
    return _TokenProblem(w, res, s, convention, table, q, k, v, pad_qkv, padded, partition,
                         batch, c, heads, c // heads)


def swin_block_attention_tokens(
    q,
    k,
    v,
    table,
    *,
    resolution: IntOrSeq,
    window: IntOrSeq,
    shift: Optional[IntOrSeq] = 0,
    scale: Optional[float] = None,
    padding: Optional[str] = None,
    pad_qkv=None,
    heads: Optional[int] = None,
    logit_scale=None,
    partition: Optional[str] = None,
) -> np.ndarray:
    """Attention part of a (shifted) Swin block on token-layout q, k, v.

    ``q, k, v``: ``[batch, prod(resolution), heads * head_dim]`` in image order
    (Swin's qkv projection output, split).  The result has the same shape: the
    attention output rolled back into image order, before the output
    projection.  ``table`` is ``[prod(2W-1), heads]`` (``None`` = no bias, then
    ``heads`` is required).

    If ``resolution`` is not divisible by ``window`` a ``padding`` convention
    is required (see :func:`normalize_padding`).  Padded tokens take q/k/v
    values ``pad_qkv[0/1/2]`` (shape ``[3, C]``, default zeros — in Swin it is
    the qkv bias since the padded input is zero) and are not masked beyond the
    regular shift mask.  ``logit_scale`` (``[heads]``) makes it SwinV2's cosine
    attention (:func:`swinv2_window_attention`; ``scale`` is then unused).
    ``partition="grid"`` is MaxViT's grid attention (:func:`grid_partition`,
    ``window`` the grid; no shift, no padding).
    """
    t = _token_problem(q, k, v, table, resolution, window, shift, padding, pad_qkv, heads,
                       partition)
    w, res, s, convention, table = t.window, t.resolution, t.shift, t.padding, t.table
    partition = t.partition
    q, k, v, pad_qkv, padded = t.q, t.k, t.v, t.pad_qkv, t.padded
    batch, c, heads, head_dim = t.batch, t.channels, t.heads, t.head_dim

    shifted = any(s)
    bias = lookup(table, w) if table is not None else None
    mask = shift_mask(padded, w, s) if shifted else None

    def to_windows(t, fill):
        x = t.reshape((batch,) + res + (c,))
        if convention == "shift_then_pad":
            x = pad_spatial(cyclic_shift(x, s), padded, fill)
        else:  # pad_then_shift (or no padding needed: both coincide)
            x = cyclic_shift(pad_spatial(x, padded, fill), s)
        xw = _partition(x, w, partition)  # [B*nW, N, C]
        return xw.reshape(xw.shape[0], xw.shape[1], heads, head_dim).transpose(0, 2, 1, 3)

    qw, kw, vw = (to_windows(t, pad_qkv[i]) for i, t in enumerate((q, k, v)))
    if logit_scale is not None:
        out = swinv2_window_attention(qw, kw, vw, logit_scale, bias=bias, mask=mask)
    else:
        out = window_attention(qw, kw, vw, bias=bias, mask=mask, scale=scale)
    x = _reverse(out, w, padded, partition)
    crop = (slice(None),) + tuple(slice(0, n) for n in res) + (slice(None),)
    if convention == "shift_then_pad":
        x = reverse_cyclic_shift(x[crop], s)
    else:
        x = reverse_cyclic_shift(x, s)[crop]
    return np.ascontiguousarray(x).reshape(batch, math.prod(res), c)


# --------------------------------------------------------------------------- #
# Backward (gradients of the attention above, float64)
# --------------------------------------------------------------------------- #
def window_attention_backward(q, k, v, table, dout, window, mask=None, scale=None,
                              class_token=False):
    """Gradients of :func:`window_attention` with the bias looked up from ``table``
    (with ``class_token``: BEiT's, :func:`class_token_lookup`, ``N = prod(window) + 1``).

    ``q, k, v``: ``[B_, H, N, d]``; ``table``: ``[T, H]`` (``None``: no bias,
    then ``dtable`` is ``None``); ``mask``: ``[nW, N, N]`` or ``None`` (window
    ``b`` uses ``mask[b % nW]``); ``dout``: ``[B_, N, H * d]``, the gradient of
    the forward's output (heads merged: ``out[b, i, h*d + e]``).  Returns
    ``(dq, dk, dv, dtable)`` in float64, ``dq/dk/dv`` ``[B_, H, N, d]`` and
    ``dtable`` ``[T, H]``.

    Per window and head, with ``B[i, j] = table[idx(i, j), h]``::

        S  = scale q k^T + B (+ mask)     P = softmax_rows(S)     O = P v
        dV = P^T dO                       dP = dO v^T
        dS = P * (dP - rowsum(dO * O))    (softmax's Jacobian: rowsum(dO * O) = rowsum(P * dP))
        dQ = scale dS k                   dK = scale dS^T q
        dtable[t, h] = sum over windows b and pairs (i, j) with idx(i, j) = t of dS[b, h, i, j]

    The mask is a constant (no gradient); the forward probabilities are
    recomputed here from the inputs.
    """
    q, k, v = _check_qkv(q, k, v)
    b_, heads, n, d = q.shape
    w = normalize_window(window)
    if math.prod(w) + int(bool(class_token)) != n:
        raise ValueError(f"window {w}{' and a class token' if class_token else ''} has "
                         f"{math.prod(w) + int(bool(class_token))} tokens, q has N = {n}")
    index = class_token_relative_index(w) if class_token else relative_index(w)
    dout = np.asarray(dout, dtype=np.float64)
    if dout.shape != (b_, n, heads * d):
        raise ValueError(f"dout must be [{b_}, {n}, {heads * d}], got {dout.shape}")
    if scale is None:
        scale = d ** -0.5
    bias = None
    if table is not None:
        table = np.asarray(table, dtype=np.float64)
        if table.ndim != 2 or table.shape[1] != heads:
            raise ValueError(f"table must be [rows, {heads}], got {table.shape}")
        bias = class_token_lookup(table, w) if class_token else lookup(table, w)

    p = attention_weights(q, k, bias=bias, mask=mask, scale=scale)  # [B_, H, N, N]
    do = dout.reshape(b_, n, heads, d).transpose(0, 2, 1, 3)  # [B_, H, N, d]
    o = p @ v
    dv = np.swapaxes(p, -1, -2) @ do
    dp = do @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (do * o).sum(axis=-1, keepdims=True))
    dq = scale * (ds @ k)
    dk = scale * (np.swapaxes(ds, -1, -2) @ q)
    dtable = None
    if table is not None:
        dtable = np.zeros_like(table)
        # scatter-add of every (i, j) pair's dS, summed over windows, into its table row
        np.add.at(dtable, index.reshape(-1), ds.sum(axis=0).reshape(heads, -1).T)
    return dq, dk, dv, dtable


def swin_block_attention_tokens_backward(
    q,
    k,
    v,
    table,
    dout,
    *,
    resolution: IntOrSeq,
    window: IntOrSeq,
    shift: Optional[IntOrSeq] = 0,
    scale: Optional[float] = None,
    padding: Optional[str] = None,
    pad_qkv=None,
    heads: Optional[int] = None,
    pad_grad: bool = False,
    partition: Optional[str] = None,
):
    """Gradients of :func:`swin_block_attention_tokens` (same arguments, plus ``dout``).

    ``dout`` is ``[batch, prod(resolution), C]``, the gradient of the forward's
    output.  Returns ``(dq, dk, dv, dtable)`` in float64: ``dq/dk/dv`` are
    ``[batch, L, C]`` (the token-layout inputs), ``dtable`` is ``[T, heads]``
    (``None`` when ``table`` is ``None``).  Padded tokens hold the constants
    ``pad_qkv`` (default zeros); with ``pad_grad=True`` a fifth value, the
    gradient w.r.t. ``pad_qkv`` ``[3, C]`` (the sum over every padded token of
    every image; in Swin that flows into the qkv bias), is returned too.

    The forward is ``windows -> window_attention -> tokens`` where ``windows``
    (shift, pad, partition, in the convention's order) and ``tokens``
    (reverse, crop, reverse shift, in the opposite order) are linear maps (plus
    the pad constants), so the backward applies the adjoints of their linear
    parts around :func:`window_attention_backward`:

    * crop -> zero-pad (and pad -> crop), the padded tokens' gradient going to ``pad_qkv``;
    * window_reverse -> window_partition (and partition -> reverse): both are permutations
      (so are MaxViT's grid_reverse and grid_partition);
    * reverse cyclic shift (roll by ``+s``) -> cyclic shift (roll by ``-s``) and vice versa.

    Hence ``d windows = windows(dout with zero fill)`` and ``dq = tokens(d windows)``.
    """
    t = _token_problem(q, k, v, table, resolution, window, shift, padding, pad_qkv, heads,
                       partition)
    w, res, s, convention, table = t.window, t.resolution, t.shift, t.padding, t.table
    partition = t.partition
    q, k, v, pad_qkv, padded = t.q, t.k, t.v, t.pad_qkv, t.padded
    batch, c, heads, head_dim = t.batch, t.channels, t.heads, t.head_dim
    dout = np.asarray(dout, dtype=np.float64)
    if dout.shape != q.shape:
        raise ValueError(f"dout must have the shape of q {q.shape}, got {dout.shape}")
    mask = shift_mask(padded, w, s) if any(s) else None
    crop = (slice(None),) + tuple(slice(0, n) for n in res) + (slice(None),)

    def to_windows(t, fill):  # [batch, L, C] -> [B_, N, C]: the forward's input path
        x = t.reshape((batch,) + res + (c,))
        if convention == "shift_then_pad":
            x = pad_spatial(cyclic_shift(x, s), padded, fill)
        else:
            x = cyclic_shift(pad_spatial(x, padded, fill), s)
        return _partition(x, w, partition)

    def to_heads(xw):  # [B_, N, C] -> [B_, H, N, d]
        return xw.reshape(xw.shape[0], xw.shape[1], heads, head_dim).transpose(0, 2, 1, 3)

    def adjoint_to_windows(g):  # [B_, H, N, d] -> ([batch, L, C], pad gradient [C])
        xw = g.transpose(0, 2, 1, 3).reshape(g.shape[0], g.shape[2], c)
        x = _reverse(xw, w, padded, partition)  # adjoint of the partition
        # the padded map as the pad step left it: pad came last (shift_then_pad) or first
        padded_map = x if convention == "shift_then_pad" else reverse_cyclic_shift(x, s)
        inside = np.zeros(padded, dtype=bool)
        inside[crop[1:-1]] = True
        pad_sum = padded_map[:, ~inside].sum(axis=(0, 1))
        x = padded_map[crop]  # crop is the adjoint of pad
        if convention == "shift_then_pad":
            x = reverse_cyclic_shift(x, s)
        return np.ascontiguousarray(x).reshape(batch, math.prod(res), c), pad_sum

    qw, kw, vw = (to_heads(to_windows(t, pad_qkv[i])) for i, t in enumerate((q, k, v)))
    # adjoint of the output path (reverse shift, crop, window_reverse) = the input path, zero fill
    dwin = to_windows(dout, 0.0)
    dqw, dkw, dvw, dtable = window_attention_backward(qw, kw, vw, table, dwin, w, mask=mask,
                                                      scale=scale)
    grads = [adjoint_to_windows(g) for g in (dqw, dkw, dvw)]
    result = (grads[0][0], grads[1][0], grads[2][0], dtable)
    if pad_grad:
        result += (np.stack([g[1] for g in grads]),)
    return result


# --------------------------------------------------------------------------- #
# SwinV2 continuous position bias (optional helpers)
# --------------------------------------------------------------------------- #
def swinv2_relative_coords_table(
    window: IntOrSeq, pretrained_window: Optional[IntOrSeq] = None
) -> np.ndarray:
    """SwinV2 log-spaced relative coordinates ``[prod(2W-1), rank]``.

    Rows are in the order of the bias table (so :func:`relative_index` applies).
    Each delta ``d in [-(W-1), W-1]`` is normalised by ``Wp - 1`` (``Wp`` the
    pretrained window, default ``W``), multiplied by 8 and mapped to
    ``sign(x) * log2(|x| + 1) / log2(8)``.
    """
    w = normalize_window(window)
    pw = w if pretrained_window is None else normalize_window(pretrained_window)
    if len(pw) != len(w):
        raise ValueError("pretrained_window must have the same rank as window")
    axes = []
    for size, psize in zip(w, pw):
        d = np.arange(-(size - 1), size, dtype=np.float64)
        axes.append(d / (psize - 1) if psize > 1 else d)
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, len(w)) * 8.0
    return np.sign(grid) * np.log2(np.abs(grid) + 1.0) / np.log2(8.0)


def swinv2_cpb_table(coords, w1, b1, w2) -> np.ndarray:
    """SwinV2 continuous position bias table ``16 * sigmoid(MLP(coords))`` ``[T, heads]``.

    ``MLP(x) = relu(x @ w1.T + b1) @ w2.T`` with ``w1 [hidden, rank]``,
    ``b1 [hidden]`` and ``w2 [heads, hidden]`` (PyTorch ``Linear`` layout).
    The sigmoid is element-wise, so applying it to the table before
    :func:`lookup` equals SwinV2 applying it after.  Cosine attention:
    :func:`swinv2_window_attention`.
    """
    coords = np.asarray(coords, dtype=np.float64)
    hidden = np.maximum(coords @ np.asarray(w1, dtype=np.float64).T + np.asarray(b1, dtype=np.float64), 0.0)
    logits = hidden @ np.asarray(w2, dtype=np.float64).T
    return 16.0 / (1.0 + np.exp(-logits))
