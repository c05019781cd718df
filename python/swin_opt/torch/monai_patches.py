"""MONAI: Swin-UNETR's ``SwinTransformerBlock.forward_part1`` (token layout,
2-D and 3-D) and its ``WindowAttention.forward`` (window layout), of
``monai.networks.nets.swin_unetr`` (``SwinUNETR``, ``SwinTransformer``).

MONAI's block normalises its input (``norm1``), pads the map to a multiple of
the window, rolls it by the shift, partitions it into windows, runs
``WindowAttention`` on them with the shift mask its ``BasicLayer`` built
(``compute_mask`` at the padded size), and undoes the partition, roll and
padding: the pad-then-shift order of torchvision, which the packed-qkv
token-layout kernel (``padding="pad_then_shift"``) does inside.  Like Video
Swin, MONAI shrinks the window to the map and zeroes the shift along axes where
the map is not larger than the window (``get_window_size``), and looks the bias
of the shrunk window up as ``relative_position_index[:n, :n]`` of the full one
(:meth:`.patching.Patch.window_table`).
"""

from __future__ import annotations

import math

from .fallback import Fallback
from .masks import divisors
from .patching import Patch
from .projections import autograd_records, linear, packed_inputs, project, qkv_windows
from .windows import pad_shift_windows, region_labels, run_windows

try:
    import torch
except ImportError:  # swin_opt.torch imports without PyTorch; its entry points need it
    torch = None

__all__ = ["MonaiAttention", "MonaiBlock", "monai_window"]

#: mask windows compared per step by :func:`_is_shift_mask` (bounds its temporary)
_MASK_CHECK_ELEMENTS = 1 << 22


def monai_window(window_size, shift_size, size):
    """MONAI's ``get_window_size``: the ``(window, shift)`` a block uses on a map of
    ``size``, the window shrunk to the map and the shift zeroed along axes where the
    map is not larger than the window."""
    window = tuple(min(int(w), int(s)) for w, s in zip(window_size, size))
    shift = tuple(0 if int(s) <= int(w) else int(sh)
                  for w, s, sh in zip(window_size, size, shift_size))
    return window, shift


def _is_shift_mask(mask, padded, window, shift) -> bool:
    """Whether ``mask`` is exactly the ``[nW, N, N]`` shift mask (0 within a region,
    -100 across) of the ``padded`` map that the token-layout kernel builds itself:
    MONAI's ``BasicLayer`` hands its blocks ``compute_mask``'s, but a block may be
    called with any mask.  Compared a few windows at a time (a full expected mask of
    Swin-UNETR's first stage at 96^3 would be ~160 MB)."""
    n = math.prod(window)
    labels = torch.from_numpy(region_labels(padded, window, shift)).to(mask.device)
    if tuple(mask.shape) != (labels.shape[0], n, n):
        return False
    step = max(1, _MASK_CHECK_ELEMENTS // (n * n))
    for start in range(0, labels.shape[0], step):
        lab = labels[start:start + step]
        want = torch.where(lab[:, :, None] == lab[:, None, :], 0.0, -100.0).to(mask.dtype)
        if not torch.equal(mask[start:start + step], want):
            return False
    return True


def _factorizations(count, dims):
    """Every ``dims``-tuple of positive integers whose product is ``count``."""
    if dims == 1:
        return [(count,)]
    return [(d,) + rest for d in divisors(count) for rest in _factorizations(count // d, dims - 1)]


def match_mask(mask, window):
    """``(padded map, shift)`` whose shift mask (:func:`_is_shift_mask`) is ``mask``
    ``[nW, N, N]``, for windows of any rank, or None.  The shift is read from the last
    window (split wherever any window is): along each axis, the first token masked
    from the window's first token; the grid from the factorizations of ``nW`` (axes
    one window long do not shift, as MONAI's ``get_window_size`` zeroes them)."""
    window = tuple(int(w) for w in window)
    n = math.prod(window)
    if mask.dim() != 3 or tuple(mask.shape[1:]) != (n, n):
        return None
    first_row = mask[-1, 0].reshape(window).detach().to("cpu")
    shift = []
    for axis, w in enumerate(window):
        line = first_row[(0,) * axis + (slice(None),) + (0,) * (len(window) - axis - 1)]
        masked = torch.nonzero(line != 0).flatten()
        shift.append(w - int(masked[0]) if masked.numel() else 0)
    shift = tuple(shift)
    if not any(shift) or any(s >= w for s, w in zip(shift, window)):
        return None
    for grid in _factorizations(int(mask.shape[0]), len(window)):
        if any(g == 1 and s for g, s in zip(grid, shift)):
            continue
        padded = tuple(g * w for g, w in zip(grid, window))
        if _is_shift_mask(mask, padded, window, shift):
            return padded, shift
    return None


class MonaiBlock(Patch):
    """``SwinTransformerBlock.forward_part1(x, mask_matrix)``, x ``[B, D, H, W, C]`` or
    ``[B, H, W, C]``: ``norm1`` in torch, then one packed-qkv token-layout kernel with
    the block's (shrunk) window, shift and MONAI's pad-then-shift order, then the
    output projection.  The mask a shifted block receives is checked to be the shift
    mask that kernel builds (in eager mode; under ``torch.compile`` it is an
    activation of the graph and only its shape is checked).

    Under autograd on a map that is not a multiple of the window, the token
    kernel's backward does not give the padded rows' gradient (the qkv bias's):
    torch then pads, rolls and partitions as MONAI does
    (:func:`.windows.pad_shift_windows`) around a window-layout kernel that builds
    the same shift mask, with its backward.  Where this falls back MONAI's own
    ``forward_part1`` runs, handing windows to :class:`MonaiAttention`."""

    framework = "monai"
    attr = "forward_part1"

    def run(self, blk, x, mask_matrix):
        attn = blk.attn
        dtype = self.common_checks(blk, x)
        if x.dim() not in (4, 5) or x.dim() - 2 != len(blk.window_size):
            raise Fallback(f"expected a [B, *map, C] input of {len(blk.window_size)} map axes")
        b, *size, c = x.shape
        size = tuple(size)
        window, shift = monai_window(blk.window_size, blk.shift_size, size)
        padded = tuple(-(-s // w) * w for s, w in zip(size, window))
        n = math.prod(window)
        if any(shift):
            # (a list: dynamo cannot hand math.prod a generator, and would break the graph)
            nw = math.prod([p // w for p, w in zip(padded, window)])
            if mask_matrix is None or tuple(mask_matrix.shape) != (nw, n, n):
                raise Fallback("the shifted block's mask is not a [nW, N, N] mask of its map")
            if not torch.compiler.is_compiling() and not _is_shift_mask(
                    mask_matrix, padded, window, shift):
                raise Fallback("mask_matrix is not the shift mask of the block's padded map")
        heads = attn.num_heads
        head_dim = c // heads
        table = self.window_table(attn, window, heads, x.dtype)
        if padded != size and autograd_records(x, *blk.norm1.parameters(),
                                               *attn.parameters()):
            cfg = {"resolution": padded, "shift": shift} if any(shift) else {}
            kern = self.kernel(window, heads, head_dim, attn.scale, dtype, **cfg)
        else:
            kern = self.kernel(window, heads, head_dim, attn.scale, dtype, layout="tokens",
                               resolution=size, shift=shift, packed_qkv=True,
                               padding="pad_then_shift" if padded != size else None)
        got_shift = tuple(kern.config.shift) if kern.config.shift else (0,) * len(window)
        if tuple(kern.config.window) != window or got_shift != shift:
            raise Fallback("the kernel's small-map rule differs from MONAI's get_window_size")
        xn = blk.norm1(x)
        if kern.config.layout != "tokens":

            def attend(xw):
                q, k, v = qkv_windows(linear(xw, attn.qkv.weight, attn.qkv.bias),
                                      xw.shape[0], n, heads, head_dim)
                return attn.proj_drop(project(attn.proj, kern(q, k, v, table)))

            return pad_shift_windows(xn, window, shift, attend)
        qkv, pad_qkv = packed_inputs(xn.reshape(b, -1, c), attn.qkv.weight, attn.qkv.bias,
                                     heads, head_dim, None)
        out = attn.proj_drop(project(attn.proj, kern(qkv, table, pad_qkv=pad_qkv)))
        return out.view(b, *size, c)


class MonaiAttention(Patch):
    """``WindowAttention.forward(x, mask)`` (window layout), for the calls of MONAI's
    own ``forward_part1`` (``layout="windows"``, or where :class:`MonaiBlock` falls
    back): 2-D and 3-D windows with or
    without a shift mask (identified by :func:`.windows.run_windows` in 2-D, by
    :func:`match_mask` in 3-D).  Falls back for shrunk windows (fewer tokens than
    the module's window: the block knows the map, this module does not)."""

    framework = "monai"

    def run(self, m, x, mask):
        dtype = self.common_checks(m, x)
        b, n, c = x.shape
        window = tuple(int(w) for w in m.window_size)
        if n != math.prod(window):
            raise Fallback(f"{n} tokens per window, window is {window} (a shrunk window)")
        heads = m.num_heads
        head_dim = c // heads
        table = self.window_table(m, window, heads, x.dtype)
        q, k, v = qkv_windows(linear(x, m.qkv.weight, m.qkv.bias), b, n, heads, head_dim)
        if mask is None or len(window) == 2:
            out = run_windows(self, q, k, v, table, window, m.scale, dtype, mask)
        else:
            out = self._run_3d(q, k, v, table, window, m.scale, dtype, mask)
        return m.proj_drop(project(m.proj, out))

    def _run_3d(self, q, k, v, table, window, scale, dtype, mask):
        """A window-layout kernel applying the 3-D shift ``mask`` (:func:`match_mask`;
        :func:`.windows.run_windows` identifies 2-D masks only)."""
        if torch.compiler.is_compiling():
            raise Fallback("a 3-D shift mask under torch.compile (identified in eager "
                           "mode only)")
        found = match_mask(mask, window)
        if found is None:
            raise Fallback("mask is not a Swin shift mask this kernel reproduces")
        padded, shift = found
        if q.shape[0] % mask.shape[0]:
            raise Fallback("number of windows is not a multiple of the mask's")
        kern = self.kernel(window, q.shape[1], q.shape[3], scale, dtype, resolution=padded,
                           shift=shift)
        if tuple(kern.config.window) != window or tuple(kern.config.shift) != shift:
            raise Fallback("Swin's small-map rule changes this kernel's window or shift")
        return kern(q, k, v, table)
