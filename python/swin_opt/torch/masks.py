"""Identifying the ``[nW, N, N]`` masks frameworks pass to their attention
modules as Swin's shifted-window mask (:func:`match_shift_mask`), with a cache
by tensor identity and content for the patched modules (:func:`cached_match`)."""

from __future__ import annotations

import collections
import threading
import weakref
from typing import Any, Dict, Optional

import numpy as np

from .. import reference as _ref
from .tracing import is_fake, trace_constant

try:
    import torch
except ImportError:  # swin_opt.torch imports without PyTorch; its entry points need it
    torch = None


#: Returned by :func:`match_shift_mask` for an all-zero mask (plain W-MSA).
NO_MASK = "no-mask"


def divisors(n: int):
    """The divisors of ``n``, ascending (the candidate window-grid heights of a mask)."""
    return [d for d in range(1, n + 1) if n % d == 0]


def match_shift_mask(mask, window) -> Any:
    """Identify a ``[nW, N, N]`` attention mask as Swin's shifted-window mask.

    Returns ``((Hp, Wp), (sh, sw))`` such that a kernel compiled with
    ``resolution=(Hp, Wp), shift=(sh, sw)`` (2-D ``window``) applies exactly
    this mask (compared element by element with
    :func:`swin_opt.reference.shift_mask`), :data:`NO_MASK` for an all-zero
    mask, or ``None`` when it is not such a mask.
    """
    w = _ref.normalize_window(window)
    if len(w) != 2:
        raise ValueError("match_shift_mask handles 2-D windows")
    if torch is not None and isinstance(mask, torch.Tensor):
        m = mask.detach().to("cpu").double().numpy()
    else:
        m = np.asarray(mask, dtype=np.float64)
    n = w[0] * w[1]
    if m.ndim != 3 or m.shape[1:] != (n, n) or m.shape[0] < 1:
        return None
    if not m.any():
        return NO_MASK
    wh, ww = w
    last = m[-1]  # bottom-right window: it is split wherever any window is
    rows = np.flatnonzero(last[0, ::ww][:wh])
    cols = np.flatnonzero(last[0, :ww])
    sh = wh - int(rows[0]) if rows.size else 0
    sw = ww - int(cols[0]) if cols.size else 0
    if sh >= wh or sw >= ww:  # token 0 masked from itself: not a shift mask
        return None
    nw_total = m.shape[0]
    for nh in divisors(nw_total):
        res = (nh * wh, (nw_total // nh) * ww)
        # the shift the compiled kernel will actually use (Swin's small-map rule)
        eff = tuple(0 if r <= ws else s for r, ws, s in zip(res, w, (sh, sw)))
        if eff != (sh, sw) or not any(eff):
            continue
        if np.array_equal(_ref.shift_mask(res, w, eff), m):
            return res, eff
    return None


class _MaskMatcher:
    """Caches :func:`match_shift_mask` by tensor identity and by content."""

    def __init__(self, limit: int = 64):
        self._lock = threading.Lock()
        self._by_id: Dict[int, tuple] = {}
        self._by_content: "collections.OrderedDict" = collections.OrderedDict()
        self._limit = limit

    def match(self, mask, window):
        if torch.compiler.is_compiling():
            # dynamo: run once at trace time on the real tensor (see tracing.trace_constant)
            return constant_match(mask, tuple(int(w) for w in window))
        return self._match(mask, tuple(window))

    def _match(self, mask, window):
        key = id(mask)
        with self._lock:
            hit = self._by_id.get(key)
            if hit is not None:
                ref, version, win, result = hit
                if ref() is mask and version is not None and version == _version(mask) \
                        and win == window:
                    return result
            host = None  # the stored masks are on the CPU (a model may have moved since)
            for (shape, dtype, win), entries in self._by_content.items():
                if shape == tuple(mask.shape) and dtype == mask.dtype and win == window:
                    for stored, result in entries:
                        if host is None:
                            host = mask.detach().to("cpu")
                        if torch.equal(stored, host):
                            self._remember(mask, window, result)
                            return result
        result = match_shift_mask(mask, window)
        with self._lock:
            ckey = (tuple(mask.shape), mask.dtype, window)
            entries = self._by_content.setdefault(ckey, [])
            entries.append((mask.detach().to("cpu").clone(), result))
            del entries[:-8]
            while len(self._by_content) > self._limit:
                self._by_content.popitem(last=False)
            self._remember(mask, window, result)
        return result

    def _remember(self, mask, window, result):
        try:
            ref = weakref.ref(mask)
        except TypeError:  # pragma: no cover
            return
        if len(self._by_id) > 4 * self._limit:
            self._by_id = {k: v for k, v in self._by_id.items() if v[0]() is not None}
        self._by_id[id(mask)] = (ref, _version(mask), window, result)


def _version(t) -> Optional[int]:
    """In-place modification counter (``None`` for inference tensors, which have none)."""
    try:
        return t._version
    except RuntimeError:
        return None


_matcher = _MaskMatcher()


def cached_match(mask, window):
    """:func:`match_shift_mask` of a mask tensor, remembered by identity (and in-place
    version) and by content: frameworks pass the same mask, or rebuild an equal one,
    on every call.  Under ``torch.compile``, :func:`constant_match`."""
    return _matcher.match(mask, window)


@trace_constant
def constant_match(mask, window):
    """:func:`cached_match` for ``torch.compile``, a :func:`~.tracing.trace_constant`:
    dynamo calls it at trace time on the real mask and keeps the result as a
    constant.  A fake tensor (non-strict ``torch.export``) has no contents to
    identify: ``None`` (the module then runs its original forward)."""
    if is_fake(mask):
        return None
    return _matcher._match(mask, tuple(window))
