"""Window-layout kernel calls shared by the adapters whose modules receive
partitioned windows and a ``[nW, N, N]`` mask (transformers, timm's
swinv2_cr): :func:`match_window_mask` identifies the mask (also the masks of
maps only one window high or wide that still shift, which no kernel grid
reproduces directly) and :func:`run_windows` runs the kernel.

Two cases need more than a plain window-layout call:

* A map of one window along an axis with a shift on that axis
  (``always_partition`` in transformers' ``SwinBackbone`` and timm, or
  MaskFormer's small maps): Swin's mask still splits that window, but a kernel
  applies the small-map rule (the map is not larger than the window there, so
  no shift).  The split is the one the *last* window of a map two windows long
  has, so the kernel is compiled for that "virtual" map and each real window is
  placed where the virtual map's last window along that axis is; the other
  (zero) windows of the virtual grid are computed and dropped.
* transformers' ``Swinv2SelfAttention`` / ``Swin2SRSelfAttention`` add the
  shift mask twice (-200 across regions, not the -100 every other Swin and the
  kernel use).  The kernel reproduces that exactly with one-hot region channels
  appended to q and k: ``q_i . k_j`` gains ``100`` when i and j share a region,
  which (softmax is invariant to adding a constant to a row) is the same as a
  second ``-100`` across regions.  v gets zero channels, dropped from the output.
"""

from __future__ import annotations

import collections
import math
import threading
from typing import NamedTuple, Optional, Tuple

import numpy as np

from .. import reference as _ref
from .fallback import Fallback
from .masks import NO_MASK, cached_match, divisors
from .projections import cosine_qk
from .tracing import trace_constant

try:
    import torch
except ImportError:  # swin_opt.torch imports without PyTorch; its entry points need it
    torch = None


class WindowMask(NamedTuple):
    """A mask identified as the windows ``offset:`` of the ``grid`` of Swin's mask of
    the map ``resolution`` shifted by ``shift`` (``grid == real_grid`` for an ordinary
    shift mask)."""

    resolution: Tuple[int, int]
    shift: Tuple[int, int]
    real_grid: Tuple[int, int]
    grid: Tuple[int, int]
    offset: Tuple[int, int]


def _match_virtual(mask, window) -> Optional[WindowMask]:
    """Identify a shift mask whose map is one window long on a shifted axis."""
    if torch is not None and isinstance(mask, torch.Tensor):
        m = mask.detach().to("cpu").double().numpy()
    else:
        m = np.asarray(mask, dtype=np.float64)
    wh, ww = window
    n = wh * ww
    if m.ndim != 3 or m.shape[1:] != (n, n) or m.shape[0] < 1 or not m.any():
        return None
    last = m[-1]  # the bottom-right window is split wherever any window is
    rows = np.flatnonzero(last[0, ::ww][:wh])
    cols = np.flatnonzero(last[0, :ww])
    shift = (wh - int(rows[0]) if rows.size else 0, ww - int(cols[0]) if cols.size else 0)
    if shift[0] >= wh or shift[1] >= ww:
        return None
    for nh in divisors(m.shape[0]):
        real = (nh, m.shape[0] // nh)
        grid = tuple(g + 1 if g == 1 and s else g for g, s in zip(real, shift))
        if grid == real:
            continue  # an ordinary mask: match_shift_mask's business
        offset = (grid[0] - real[0], grid[1] - real[1])
        res = (grid[0] * wh, grid[1] * ww)
        full = _ref.shift_mask(res, window, shift).reshape(grid + (n, n))
        if np.array_equal(full[offset[0]:, offset[1]:].reshape(-1, n, n), m):
            return WindowMask(res, shift, real, grid, offset)
    return None


class _VirtualMatcher:
    """Content cache for :func:`_match_virtual` (frameworks rebuild their masks per call)."""

    def __init__(self, limit: int = 32):
        self._lock = threading.Lock()
        self._entries: "collections.OrderedDict" = collections.OrderedDict()
        self._limit = limit

    def match(self, mask, window):
        key = (tuple(mask.shape), mask.dtype, tuple(window))
        host = mask.detach().to("cpu")  # the stored masks are on the CPU
        with self._lock:
            for stored, result in self._entries.get(key, ()):
                if torch.equal(stored, host):
                    return result
        result = _match_virtual(mask, window)
        with self._lock:
            entries = self._entries.setdefault(key, [])
            entries.append((host.clone(), result))
            del entries[:-8]
            while len(self._entries) > self._limit:
                self._entries.popitem(last=False)
        return result


_virtual = _VirtualMatcher()


def match_window_mask(mask, window):
    """``None`` (no mask), :data:`NO_MASK` (all zeros), a :class:`WindowMask`, or raise
    :class:`Fallback` when ``mask`` is not a Swin shift mask a kernel reproduces."""
    if mask is None:
        return None
    window = tuple(int(w) for w in window)
    result = cached_match(mask, window)
    if result == NO_MASK:
        return NO_MASK
    if result is not None:
        res, shift = result
        grid = (res[0] // window[0], res[1] // window[1])
        return WindowMask(tuple(res), tuple(shift), grid, grid, (0, 0))
    if torch.compiler.is_compiling():
        virtual = _constant_virtual_match(mask, window)
    else:
        virtual = _virtual.match(mask, window)
    if virtual is None:
        raise Fallback("mask is not a Swin shift mask this kernel reproduces")
    return virtual


@trace_constant
def _constant_virtual_match(mask, window):
    """``_virtual.match`` for torch.compile, a :func:`~.tracing.trace_constant` (run
    once at trace time on the real mask; a graph constant)."""
    return _virtual.match(mask, tuple(window))


def region_labels(padded, window, shift) -> np.ndarray:
    """Swin's shift-region label of each token of each window of a ``padded`` map
    (a multiple of ``window``; any number of axes), ``[nW, N]`` int64: per axis
    ``[0, n-w) -> 0, [n-w, n-s) -> 1, [n-s, n) -> 2`` (0 everywhere on an axis that
    does not shift), combined in base 3, windows row-major as ``window_partition``
    orders them.  Two tokens of a window are in one region iff their labels match."""
    labels = np.zeros((), np.int64)
    for n, w, s in zip(padded, window, shift):
        x = np.arange(n)
        axis = (x >= n - w).astype(np.int64) + (x >= n - s) if s else np.zeros(n, np.int64)
        labels = labels[..., None] * 3 + axis
    grid = [n // w for n, w in zip(padded, window)]
    dims = len(window)
    split = labels.reshape([v for g, w in zip(grid, window) for v in (g, w)])
    order = [2 * i for i in range(dims)] + [2 * i + 1 for i in range(dims)]
    return split.transpose(order).reshape(math.prod(grid), math.prod(window))


@trace_constant
def _region_labels(resolution, shift, window) -> tuple:
    """:func:`region_labels` as nested tuples (a :func:`~.tracing.trace_constant`, so
    plain tuples in and out)."""
    return tuple(tuple(int(v) for v in row) for row in region_labels(resolution, window, shift))


def _region_onehot(wm: WindowMask, window, dtype):
    """``[grid windows, N, 9]``: one-hot of each token's shift region (Swin's labels)."""
    labels = _region_labels(tuple(wm.resolution), tuple(wm.shift), tuple(window))
    win = torch.tensor(labels, dtype=torch.int64)
    return torch.nn.functional.one_hot(win, 9).to(dtype)


def run_windows(patch, q, k, v, table, window, scale, dtype, mask, *,
                mask_repeats: int = 1, logit_scale=None):
    """``softmax(scale q k^T + bias + mask_repeats * mask) v`` of windows ``q, k, v``
    ``[b, heads, N, d]`` (contiguous) through a window-layout kernel; returns
    ``[b, N, heads * d]``.  ``scale`` None means ``d ** -0.5``.  ``logit_scale``:
    SwinV2's cosine attention in the kernel (q and k as they are)."""
    b, heads, n, d = q.shape
    window = tuple(int(w) for w in window)
    wm = match_window_mask(mask, window)
    cfg = {}
    if isinstance(wm, WindowMask):
        per_image = wm.real_grid[0] * wm.real_grid[1]
        if b % per_image:
            raise Fallback("number of windows is not a multiple of the mask's")
        cfg = {"resolution": wm.resolution, "shift": wm.shift}
    if mask_repeats not in (1, 2):
        raise Fallback(f"mask added {mask_repeats} times")
    extra = 9 if cfg and mask_repeats == 2 else 0  # one-hot region channels (module docstring)
    if extra and scale is None:
        scale = d ** -0.5  # explicit: the kernel's default would use the widened head_dim
    if logit_scale is not None and extra:
        # the region channels widen q and k, which the kernel would normalize
        # with them: normalize here and run the plain kernel
        q, k = cosine_qk(q, k, logit_scale, head_axis=1)
        logit_scale = None
    cosine = {"cosine": True} if logit_scale is not None else {}
    kern = patch.kernel(window, heads, d + extra, scale, dtype, **cfg, **cosine)
    if tuple(kern.config.window) != window or (cfg and tuple(kern.config.shift) != wm.shift):
        raise Fallback("Swin's small-map rule changes this kernel's window or shift")
    if not cfg or (wm.grid == wm.real_grid and not extra):
        return kern(q, k, v, table, logit_scale=logit_scale)
    (gh, gw), (rh, rw), (oh, ow) = wm.grid, wm.real_grid, wm.offset
    images = b // (rh * rw)
    onehot = _region_onehot(wm, window, q.dtype).view(1, gh, gw, 1, n, 9) if extra else None

    def embed(x, fill):
        z = x.new_zeros((images, gh, gw, heads, n, d + extra))
        z[:, oh:, ow:, :, :, :d] = x.view(images, rh, rw, heads, n, d)
        if fill:
            z[..., d:] = onehot * fill
        return z.view(images * gh * gw, heads, n, d + extra)

    out = kern(embed(q, 100.0 / float(scale) if extra else 0.0),
               embed(k, 1.0 if extra else 0.0), embed(v, 0.0), table, logit_scale=logit_scale)
    out = out.view(images, gh, gw, n, heads, d + extra)[:, oh:, ow:, :, :, :d]
    return out.reshape(b, n, heads * d)


def pad_shift_windows(x, window, shift, attend):
    """Window attention of the map ``x`` ``[B, *map, C]`` (2-D or 3-D) in the window
    layout, with torch doing what a token-layout kernel does inside, in the
    pad-then-shift order (torchvision, Video Swin, MONAI): pad the map bottom/right
    with zeros to a multiple of ``window``, roll it by ``-shift``, partition it into
    ``[B * nW, N, C]`` windows (image-major, windows row-major, tokens row-major);
    ``attend(windows)`` gives ``[B * nW, N, C']``, which is partitioned back, rolled
    by ``+shift`` and cropped to ``[B, *map, C']``."""
    b, *size, c = x.shape
    dims = len(window)
    padded = [-(-s // w) * w for s, w in zip(size, window)]
    pads = []
    for s, p in zip(reversed(size), reversed(padded)):
        pads += [0, p - s]
    xp = torch.nn.functional.pad(x, [0, 0] + pads) if padded != list(size) else x
    axes = tuple(range(1, dims + 1))
    if any(shift):
        xp = torch.roll(xp, shifts=tuple(-s for s in shift), dims=axes)
    grid = [p // w for p, w in zip(padded, window)]
    split = [v for g, w in zip(grid, window) for v in (g, w)]
    to_windows = [0] + [1 + 2 * i for i in range(dims)] + [2 + 2 * i for i in range(dims)] \
        + [1 + 2 * dims]
    xw = xp.reshape(b, *split, c).permute(to_windows)
    out = attend(xw.reshape(b * math.prod(grid), math.prod(window), c))
    out = out.view(b, *grid, *window, -1)
    to_map = [0] + [v for i in range(dims) for v in (1 + i, 1 + dims + i)] + [1 + 2 * dims]
    out = out.permute(to_map).reshape(b, *padded, out.shape[-1])
    if any(shift):
        out = torch.roll(out, shifts=tuple(shift), dims=axes)
    if padded != list(size):
        out = out[(slice(None),) + tuple(slice(0, s) for s in size)]
    return out.contiguous()
