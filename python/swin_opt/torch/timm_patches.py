"""timm: ``WindowAttention.forward`` (window layout) and the blocks'
``_attn`` (token layout, packed qkv), for swin_transformer and swin_transformer_v2;
``WindowMultiHeadAttention.forward`` (window layout) and the blocks'
``_shifted_window_attn`` (token layout) for swin_transformer_v2_cr; BEiT's
``Attention.forward`` (beit: BEiT, BEiT v2; the class-token kernels, the shared
table of :mod:`.table_bias`)."""

from __future__ import annotations

import numpy as np

from .. import reference as _ref
from .fallback import Fallback
from .masks import NO_MASK, cached_match
from .patching import Patch, ResidualBlock, cosine_kernel_scale, drops
from .projections import (cosine_packed, cosine_qk, linear, packed_inputs, pad_rows, project,
                          qkv_packed, qkv_windows)
from .table_bias import TableBias, TableBiasConsumer, class_token_table
from .tracing import trace_constant
from .windows import run_windows

try:
    import torch
except ImportError:  # swin_opt.torch imports without PyTorch; its entry points need it
    torch = None

__all__ = ["TimmAttention", "TimmBlock", "TimmResidual", "TimmCrAttention", "TimmCrBlock",
           "TimmBeitAttention"]


def _timm_qkv_bias(attn):
    """timm's qkv bias: ``qkv.bias`` (V1) or ``cat(q_bias, k_bias, v_bias)`` (V2)."""
    if getattr(attn, "q_bias", None) is None:
        return attn.qkv.bias
    return torch.cat((attn.q_bias, attn.k_bias, attn.v_bias))


class TimmAttention(Patch):
    """``WindowAttention.forward(x, mask=None)`` of timm's swin_transformer and (SwinV2)
    swin_transformer_v2 (window layout)."""

    framework = "timm"

    def run(self, m, x, mask=None):
        dtype = self.common_checks(m, x)
        b, n, _ = x.shape
        window = tuple(int(s) for s in m.window_size)
        heads = m.num_heads
        attn_dim = m.qkv.out_features // 3
        head_dim = attn_dim // heads
        if n != window[0] * window[1]:
            raise Fallback(f"{n} tokens per window, window is {window}")
        table, scale, qkv_bias, logit_scale = self.attention_core(
            m, window, heads, x.dtype, _timm_qkv_bias(m), getattr(m, "scale", None))
        qkv = linear(x, m.qkv.weight, qkv_bias)
        q, k, v = qkv_windows(qkv, b, n, heads, head_dim)
        # SwinV2: the cosine kernel normalizes q and k itself, or they are prepared here
        cosine = cosine_kernel_scale(logit_scale, x, *m.parameters())
        if cosine is None:
            q, k = cosine_qk(q, k, logit_scale, head_axis=1)
        # run_windows also takes the masks of always_partition's one-window maps
        out = run_windows(self, q, k, v, table, window, scale, dtype, mask, logit_scale=cosine)
        return m.proj_drop(project(m.proj, out))


def _block_input(x):
    """``(B, H, W, C)`` of a timm block's feature map."""
    if x.dim() != 4:
        raise Fallback("expected [B, H, W, C]")
    return x.shape


def _block_window(blk):
    """The window of a timm block (Swin, SwinV2 or SwinV2-CR), the same as its attention's."""
    window = tuple(int(s) for s in blk.window_size)
    if window != tuple(int(s) for s in blk.attn.window_size):
        raise Fallback("block and attention window sizes differ")
    return window


def _block_kernel(patch, blk, resolution, window, heads, head_dim, scale, dtype, *,
                  cosine=False):
    """The packed-qkv token-layout kernel of a timm block (shift, then pad) on a map
    of ``resolution``, after checking that the mask timm stored for the block is the
    shift mask the kernel builds and that Swin's small-map rule keeps the window."""
    shift = tuple(int(s) for s in blk.shift_size)
    padded = tuple(-(-r // s) * s for r, s in zip(resolution, window))
    if not getattr(blk, "dynamic_mask", False):
        # timm applies its stored mask; make sure it is the one the kernel builds
        mask = getattr(blk, "attn_mask", None)
        want = NO_MASK if not any(shift) else (padded, shift)
        got = NO_MASK if mask is None else cached_match(mask, window)
        if got != want:
            raise Fallback("stored attn_mask does not match the block's resolution/shift")
    kern = patch.kernel(window, heads, head_dim, scale, dtype, layout="tokens",
                        resolution=resolution, shift=shift, packed_qkv=True,
                        padding="shift_then_pad" if padded != tuple(resolution) else None,
                        **({"cosine": True} if cosine else {}))
    if tuple(kern.config.window) != window or tuple(kern.config.shift) != shift:
        raise Fallback("Swin's small-map rule changes this block's window")
    return kern


class TimmBlock(Patch):
    """``SwinTransformerBlock._attn(x)`` of timm's swin_transformer and (SwinV2)
    swin_transformer_v2 (token layout)."""

    framework = "timm"
    attr = "_attn"
    fuses_residual = True

    def run(self, blk, x, residual=None):
        attn = blk.attn
        dtype = self.common_checks(blk, x)
        b, h, w, c = _block_input(x)
        window = _block_window(blk)
        heads = attn.num_heads
        attn_dim = attn.qkv.out_features // 3
        head_dim = attn_dim // heads
        table, scale, qkv_bias, logit_scale = self.attention_core(
            attn, window, heads, x.dtype, _timm_qkv_bias(attn), getattr(attn, "scale", None))
        cosine = cosine_kernel_scale(logit_scale, x, *attn.parameters())
        kern = _block_kernel(self, blk, (h, w), window, heads, head_dim, scale, dtype,
                             cosine=cosine is not None)
        qkv, pad_qkv = packed_inputs(x.reshape(b, h * w, c), attn.qkv.weight, qkv_bias,
                                     heads, head_dim, None if cosine is not None else logit_scale)
        out = kern(qkv, table, pad_qkv=pad_qkv, logit_scale=cosine)
        if residual is not None and not drops(attn.proj_drop):
            out = project(attn.proj, out, residual.reshape(b, h * w, -1))
        else:
            out = attn.proj_drop(project(attn.proj, out))
            if residual is not None:
                out = out + residual.reshape(b, h * w, -1)
        return out.view(b, h, w, -1)


class TimmResidual(ResidualBlock):
    """timm's ``SwinTransformerBlock.forward(x)`` (swin_transformer, V1; pre-norm)
    with its residual adds in the epilogues (:class:`.patching.ResidualBlock`), its
    attention the token-layout :class:`TimmBlock` (``_attn``). (timm reshapes the map
    to ``[B, L, C]`` around its MLP; the MLP and the add take either shape.)"""

    framework = "timm"

    @staticmethod
    def parts(blk):
        return blk.norm1, blk._attn, blk.norm2, blk.mlp, (blk.drop_path1, blk.drop_path2)


def _cr_table(patch, m, window, heads, dtype):
    """The ``[T, heads]`` bias table of a swinv2_cr ``WindowMultiHeadAttention`` ``m``:
    its meta MLP run on one pair of each relative position (``patch._pairs`` caches the
    pairs per window, or False when the buffer is not a function of the relative
    position; under torch.compile they are a constant of the graph)."""
    if m.meta_mlp.training and any(isinstance(d, torch.nn.Dropout) and d.p > 0
                                   for d in m.meta_mlp.modules()):
        # timm's meta MLP drops hidden units of each (i, j) pair's row: its bias is
        # then no function of the relative position, and no table holds it
        raise Fallback("the meta MLP's dropout in training mode (its bias is then not a "
                       "relative position bias)")
    coords = m.relative_coordinates_log
    if torch.compiler.is_compiling():
        found = _cr_pairs(coords, window)  # run once, at trace time (a trace constant)
        pairs = False if found is None else torch.tensor(found, dtype=torch.int64)
    else:
        pairs = patch._pairs.get(window)
        if pairs is None:
            found = _cr_pairs(coords, window)
            pairs = False if found is None else torch.tensor(found, dtype=torch.int64)
            patch._pairs[window] = pairs
    if pairs is False:
        raise Fallback("relative_coordinates_log is not a function of the relative position")
    return patch.table(m.meta_mlp(coords[pairs]), window, heads, None, dtype)


@trace_constant
def _cr_pairs(coords, window):
    """One ``(i, j)`` pair index per relative position (the first in row-major order) as
    a tuple, or None when ``coords`` is not a function of Swin's relative index.
    NumPy on the buffer's data: a :func:`~.tracing.trace_constant`."""
    n = window[0] * window[1]
    index = _ref.relative_index(window).reshape(-1)
    first = np.full(_ref.table_rows(window), -1, dtype=np.int64)
    order = np.arange(index.size)[::-1]
    first[index[order]] = order
    pairs = torch.from_numpy(first)
    got = coords.detach().to("cpu")
    ok = tuple(got.shape) == (n * n, 2) and torch.equal(got, got[pairs][index])
    return tuple(int(i) for i in first) if ok else None


class TimmCrAttention(Patch):
    """``timm.models.swin_transformer_v2_cr.WindowMultiHeadAttention.forward(x, mask=None)``
    (window layout).

    What the kernel computes exactly: ``softmax(s_h cos(q_i, k_j) + B_h(i, j) + mask) v``
    with ``s_h = exp(min(logit_scale_h, log 100))`` (timm's own logit scale, the same
    clamp as SwinV2) folded into the normalised q (:func:`.projections.cosine_qk`,
    scale-1 kernel), and the bias of the "meta" MLP.  That MLP maps each pair's log-spaced relative
    coordinates (``relative_coordinates_log``, ``[N*N, 2]``) to one value per head; a
    pair's coordinates depend only on its relative position, so the MLP is run on one
    pair per relative position, giving the kernel's compact ``[T, heads]`` table (checked
    once against the buffer: it must be a function of Swin's relative index).  The
    qkv and output projections (and the q/k normalisation) stay in torch.  The
    cyclic shift, padding (timm pads after shifting) and window partition stay in the
    block's ``_shifted_window_attn`` (patched by :class:`TimmCrBlock` when
    ``layout="auto"``; this module then runs only where that one falls back),
    which hands this module windows and its mask; masks of maps a single window
    long on a shifted axis (``always_partition``) go through
    :func:`.windows.run_windows`'s virtual map.  Kept in torch: training mode
    (the meta MLP's dropout, :func:`_cr_table`); under autograd in eval mode the
    kernel runs, with its backward.  ``sequential_attn`` is not read by this forward."""

    framework = "timm"

    def __init__(self, module, name, options):
        super().__init__(module, name, options)
        self._pairs = {}

    def _table(self, m, window, heads, dtype):
        return _cr_table(self, m, window, heads, dtype)

    def run(self, m, x, mask=None):
        dtype = self.common_checks(m, x)
        b, n, c = x.shape
        window = tuple(int(s) for s in m.window_size)
        heads = m.num_heads
        head_dim = c // heads
        if n != window[0] * window[1]:
            raise Fallback(f"{n} tokens per window, window is {window}")
        table = self._table(m, window, heads, x.dtype)
        q, k, v = qkv_windows(project(m.qkv, x), b, n, heads, head_dim)
        q, k = cosine_qk(q, k, m.logit_scale, head_axis=1)
        out = run_windows(self, q, k, v, table, window, 1.0, dtype, mask)
        return m.proj_drop(project(m.proj, out))


class TimmCrBlock(Patch):
    """``SwinTransformerV2CrBlock._shifted_window_attn(x)``, x ``[B, H, W, C]`` (timm
    swinv2_cr; token layout, packed qkv): the cyclic shift, padding (after the
    shift, as timm does), window partition and their inverses run in the kernel.

    Unlike timm's SwinV2, swinv2_cr has a key bias, so the padded tokens' q/k (the
    qkv bias, the kernel's ``pad_qkv``) are normalised per head like every other
    token's (scaled by ``s_h`` for q).  The bias table is :func:`_cr_table`'s.  Falls
    back (to the block's own method, whose ``WindowMultiHeadAttention`` is patched
    in window layout) where the kernel's small-map rule differs from the block
    (``always_partition`` maps of one window that still shift) or the block's
    stored mask is not the one of its resolution and shift."""

    framework = "timm"
    attr = "_shifted_window_attn"

    def __init__(self, module, name, options):
        super().__init__(module, name, options)
        self._pairs = {}

    def run(self, blk, x):
        attn = blk.attn
        dtype = self.common_checks(blk, x)
        b, h, w, c = _block_input(x)
        window = _block_window(blk)
        heads = attn.num_heads
        head_dim = c // heads
        table = _cr_table(self, attn, window, heads, x.dtype)
        kern = _block_kernel(self, blk, (h, w), window, heads, head_dim, 1.0, dtype)
        qkv = cosine_packed(qkv_packed(x.reshape(b, h * w, c), attn.qkv.weight, attn.qkv.bias,
                                       heads, head_dim), attn.logit_scale)
        pad_qkv = pad_rows(attn.qkv.bias, c)
        per_head = pad_qkv.view(3, heads, head_dim)
        # in place (detached: the padding rows have no gradient; padded maps fall
        # back under autograd, ops.KernelCall)
        cosine_qk(per_head[0], per_head[1], attn.logit_scale.detach(), head_axis=0)
        out = kern(qkv, table, pad_qkv=pad_qkv)
        return attn.proj_drop(project(attn.proj, out)).view(b, h, w, c)


class TimmBeitAttention(TableBiasConsumer, Patch):
    """``timm.models.beit.Attention.forward(x, shared_rel_pos_bias=None)`` of BEiT and
    BEiT v2: global attention over the patch grid (``window_size``) and the class
    token, ``x`` ``[B, Wh*Ww + 1, C]``, on the class-token kernels
    (``class_token=True``: the table's three rows past Swin's are the class token's
    row, column and corner, checked once against the module's
    ``relative_position_index``).  The table is the module's own, or the model's
    shared one (``use_shared_rel_pos_bias``: the patched ``RelativePositionBias``
    hands it on as a :class:`.table_bias.TableBias`), or their sum.  The qkv
    projection (BEiT's ``q_bias``, zero ``k_bias`` and ``v_bias``) and the output
    projection stay in torch.  Falls back for a ``shared_rel_pos_bias`` tensor
    (computed by code swin_opt did not patch), without any table, and where
    :meth:`Patch.common_checks` does."""

    framework = "timm"

    def run(self, m, x, shared_rel_pos_bias=None):
        bias = shared_rel_pos_bias
        if bias is not None and not isinstance(bias, TableBias):
            raise Fallback("shared_rel_pos_bias is a tensor, not the table of a patched "
                           "RelativePositionBias")
        dtype = self.common_checks(m, x)
        b, n, _ = x.shape
        heads = m.num_heads
        head_dim = m.qkv.out_features // 3 // heads
        if m.relative_position_bias_table is not None:
            window = tuple(int(s) for s in m.window_size)
            if n != window[0] * window[1] + 1:
                raise Fallback(f"{n} tokens, not the {window} grid and a class token")
            table = self.table(m.relative_position_bias_table, window, heads,
                               m.relative_position_index, x.dtype, class_token=True)
            if bias is not None:
                shared_window, shared = class_token_table(self, bias, n, heads, x.dtype)
                if shared_window != window:
                    raise Fallback(f"own table of the {window} grid, shared one of "
                                   f"{shared_window}")
                table = table + shared
        elif bias is not None:
            window, table = class_token_table(self, bias, n, heads, x.dtype)
        else:
            raise Fallback("no relative position bias (neither its own table nor a shared one)")
        kern = self.kernel(window, heads, head_dim, m.scale, dtype, class_token=True)
        q, k, v = qkv_windows(linear(x, m.qkv.weight, _timm_qkv_bias(m)), b, n, heads, head_dim)
        out = kern(q, k, v, table)
        return m.proj_drop(project(m.proj, out))
