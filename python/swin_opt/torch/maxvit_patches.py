"""timm MaxViT, CoAtNet and MaxxViT (``timm.models.maxxvit``): ``AttentionCl.forward``
(channels last) and ``Attention2d.forward`` (NCHW), window layout, and
``PartitionAttentionCl._partition_attn`` (the partition, the attention and its
reverse), token layout.

Both modules compute ``softmax(scale q k^T + B) v`` over the ``N`` tokens of what
they are given, with ``B`` from their ``rel_pos`` module; the partition happens
outside them:

* block attention (``PartitionAttentionCl`` / ``PartitionAttention2d`` with
  ``partition_type="block"``, MaxxViT v2's ``ParallelPartitionAttention``):
  non-overlapping ``Wh x Ww`` windows, no shift (timm's ``window_partition``);
* grid attention (``partition_type="grid"``): the "window" gathers the tokens
  ``(g0 * H/Gh + i, g1 * W/Gw + j)`` of one ``(i, j)``, strided across the map
  (``grid_partition``), in row-major ``(g0, g1)`` order;
* CoAtNet's ``TransformerBlock2d``: the whole feature map, one window per image.

In each case the bias is Swin's relative position bias of the tokens'
coordinates inside the partition (for grid attention, their grid coordinates),
so the module's input is a batch of Swin windows and the kernel is the plain
window-layout one (:func:`.windows.run_windows`, no mask).  The bias table
comes from either ``rel_pos`` class (:func:`swin_table`):

* ``RelPosBias``: Swin's ``[(2Wh-1)(2Ww-1), heads]`` table and index (checked
  once against Swin's index, as for every Swin patch);
* ``RelPosBiasTf`` (the ``*_tf_*`` models, TensorFlow's layout): a ``[heads,
  2Wh-1, 2Ww-1]`` table looked up by two one-hot einsums, which give
  ``B[h, i, j] = T[h, r_j - r_i + Wh - 1, c_j - c_i + Ww - 1]``: key minus
  query, the opposite sign of Swin's ``r_i - r_j``.  Swin's table is then ``T``
  flipped along both spatial axes, heads last (a small copy made per call, by
  differentiable operators: under autograd the kernel's table gradient reaches
  ``T``).  The one-hot lookups are checked once against the
  ones ``RelPosBiasTf`` builds.

The qkv channels are ``[3, heads, dim_head]`` (``head_first=False``, the TF
models) or ``[heads, 3, dim_head]`` (``head_first=True``, timm's own configs);
:func:`.projections.qkv_windows` reads both.  The projections stay the
module's own (``nn.Linear`` through :func:`.projections.project`; the 1x1
``nn.Conv2d`` of ``Attention2d`` as they are).  Training and autograd run the
kernels' backward like every window-layout patch; attention dropout in training
falls back (:meth:`.patching.Patch.common_checks`).  Left unpatched, with the
reason (:func:`supported`): ``RelPosMlp`` (the ``*_rmlp_*`` models), no
``rel_pos``, a class token (``prefix_tokens``).

Where the attention's input is the whole map, ``PartitionAttentionCl``'s
``_partition_attn`` (timm's ``grid_partition`` or ``window_partition``, the
attention, and the reverse) runs as one token-layout kernel
(:class:`MaxxVitPartitionAttention`, ``partition="grid"`` or ``"block"``): the
kernel reads the partitions out of the map's packed qkv where they lie, without
the partition's and the reverse's copies.  Its calls that the kernel does not take
fall back to timm's method, whose ``AttentionCl`` runs the window-layout patch."""

from __future__ import annotations

import sys
from typing import Optional

import numpy as np

from .fallback import Fallback
from .patching import Patch
from .projections import project, qkv_packed, qkv_windows
from .tracing import trace_constant
from .windows import run_windows

try:
    import torch
except ImportError:  # swin_opt.torch imports without PyTorch; its entry points need it
    torch = None

__all__ = ["MaxxVitAttention", "MaxxVitAttention2d", "MaxxVitPartitionAttention", "supported",
           "swin_table"]


def _rel_pos_kind(rel_pos) -> Optional[str]:
    """``"swin"`` (``RelPosBias``), ``"tf"`` (``RelPosBiasTf``) or None (another class)."""
    layers = sys.modules.get("timm.layers.pos_embed_rel")  # imported with timm's maxxvit
    if layers is None:
        return None
    if isinstance(rel_pos, layers.RelPosBias):
        return "swin"
    if isinstance(rel_pos, layers.RelPosBiasTf):
        return "tf"
    return None


def supported(module) -> Optional[str]:
    """None if the kernels take ``module`` (an ``AttentionCl`` or ``Attention2d``),
    else why not (:func:`swin_opt.torch.unpatched` reports it)."""
    rel_pos = getattr(module, "rel_pos", None)
    if rel_pos is None:
        return "no rel_pos (no relative position bias table)"
    kind = _rel_pos_kind(rel_pos)
    if kind is None:
        return (f"rel_pos is {type(rel_pos).__name__}, not RelPosBias or RelPosBiasTf "
                "(a bias table)")
    if getattr(rel_pos, "prefix_tokens", 0):
        return "rel_pos has a class token (prefix_tokens), which the kernels do not take"
    heads = module.num_heads
    window = tuple(int(w) for w in rel_pos.window_size)
    rows = (2 * window[0] - 1, 2 * window[1] - 1)
    shape = tuple(rel_pos.relative_position_bias_table.shape)
    want = (rows[0] * rows[1], heads) if kind == "swin" else (heads,) + rows
    if shape != want:
        return f"bias table {shape} is not {want} for window {window} and {heads} heads"
    return None


def swin_table(rel_pos):
    """``rel_pos``'s table in Swin's layout, ``[(2Wh-1)(2Ww-1), heads]`` (not detached,
    not yet checked), and its Swin index (None for ``RelPosBiasTf``, whose lookups
    :meth:`MaxxVitAttention._table` checks).  See the module docstring for the flip."""
    table = rel_pos.relative_position_bias_table
    if _rel_pos_kind(rel_pos) == "swin":
        return table, rel_pos.relative_position_index
    heads = table.shape[0]
    return table.flip(1, 2).permute(1, 2, 0).reshape(-1, heads), None


@trace_constant
def tf_lookups_ok(height_lookup, width_lookup, window) -> bool:
    """Whether ``RelPosBiasTf``'s one-hot lookups are the ones it builds for ``window``:
    ``L[i, x, v] = 1`` iff ``v = x - i + W - 1`` (NumPy on the buffers' data: a
    :func:`~.tracing.trace_constant`)."""
    for lookup, w in zip((height_lookup, width_lookup), window):
        i, x, v = np.ogrid[:w, :w, :2 * w - 1]
        want = (v == x - i + w - 1).astype(np.float64)
        got = lookup.detach().to("cpu", torch.float64).numpy()
        if got.shape != want.shape or not np.array_equal(got, want):
            return False
    return True


class MaxxVitAttention(Patch):
    """``timm.models.maxxvit.AttentionCl.forward(x, shared_rel_pos=None)``, x
    ``[B, ..., C]``: the ``N`` tokens of each of the ``B`` partitions (block, grid)."""

    framework = "timm"

    def _table(self, m, window, heads, dtype):
        """The checked Swin-layout table of ``m.rel_pos`` (:func:`swin_table`)."""
        table, index = swin_table(m.rel_pos)
        if index is None:  # RelPosBiasTf: its one-hot lookups, once (as Patch.table the index)
            rel_pos = m.rel_pos
            self.check_once(("tf_lookups", window),
                            lambda: tf_lookups_ok(rel_pos.height_lookup, rel_pos.width_lookup,
                                                  window),
                            "RelPosBiasTf's height/width lookups are not its one-hot relative "
                            "position lookups")
        return self.table(table, window, heads, index, dtype)

    def _prepare(self, m, x, n):
        """``(dtype, window, table)`` of a call on ``n`` tokens per partition, or
        Fallback: every check is made before the projection runs."""
        dtype = self.common_checks(m, x)
        window = tuple(int(w) for w in m.rel_pos.window_size)
        if n != window[0] * window[1]:
            raise Fallback(f"{n} tokens per partition, rel_pos window is {window}")
        return dtype, window, self._table(m, window, m.num_heads, x.dtype)

    def _attention(self, m, prepared, qkv, b, n):
        """``[b, n, heads * dim_head]``: the attention of ``m`` on its fused ``qkv``
        ``[b, n, 3 * heads * dim_head]`` (channels in ``m``'s order)."""
        dtype, window, table = prepared
        q, k, v = qkv_windows(qkv, b, n, m.num_heads, m.dim_head, head_first=m.head_first)
        return run_windows(self, q, k, v, table, window, m.scale, dtype, None)

    def run(self, m, x, shared_rel_pos=None):
        # shared_rel_pos: timm adds it only to modules without a rel_pos (never patched)
        if x.dim() < 3:
            raise Fallback("expected [B, ..., C]")
        b, c = x.shape[0], x.shape[-1]
        n = 1
        for s in x.shape[1:-1]:
            n *= s
        prepared = self._prepare(m, x, n)
        out = self._attention(m, prepared, project(m.qkv, x.reshape(b, n, c)), b, n)
        return m.proj_drop(project(m.proj, out)).view(*x.shape[:-1], -1)


class MaxxVitAttention2d(MaxxVitAttention):
    """``timm.models.maxxvit.Attention2d.forward(x, shared_rel_pos=None)``, x
    ``[B, C, H, W]``: CoAtNet's whole map, or the NCHW partitions of
    ``PartitionAttention2d`` (``use_nchw_attn``).  The 1x1 convolutions are the
    module's own; the tokens are read out of the NCHW qkv with one copy
    (:func:`.projections.qkv_windows` on its transposed view)."""

    def run(self, m, x, shared_rel_pos=None):
        # shared_rel_pos: as for AttentionCl, ignored next to rel_pos
        if x.dim() != 4:
            raise Fallback("expected [B, C, H, W]")
        b, _, h, w = x.shape
        prepared = self._prepare(m, x, h * w)
        out = self._attention(m, prepared, m.qkv(x).flatten(2).transpose(1, 2), b, h * w)
        out = out.transpose(1, 2).reshape(b, -1, h, w)  # channel h * dim_head + e, as timm's
        return m.proj_drop(m.proj(out))


class MaxxVitPartitionAttention(MaxxVitAttention):
    """``timm.models.maxxvit.PartitionAttentionCl._partition_attn(x)``, x ``[B, H, W,
    C]`` (channels last, the whole map): MaxViT's grid or block attention as one
    token-layout kernel on the map (``partition`` the block's), with the attention
    module's projections and table."""

    attr = "_partition_attn"

    def run(self, blk, x):
        m = blk.attn
        if x.dim() != 4:
            raise Fallback("expected [B, H, W, C]")
        b, h, w, c = x.shape
        window = tuple(int(s) for s in blk.partition_size)
        if tuple(int(s) for s in m.rel_pos.window_size) != window:
            raise Fallback(f"partition size {window} is not rel_pos's window "
                           f"{tuple(m.rel_pos.window_size)}")
        if h % window[0] or w % window[1]:
            raise Fallback(f"map {h}x{w} is not whole partitions of {window}")
        prepared = self._prepare(m, x, window[0] * window[1])
        dtype, _, table = prepared
        heads, head_dim = m.num_heads, m.dim_head
        weight, bias = m.qkv.weight, m.qkv.bias
        if m.head_first:
            # channels [heads, 3, dim_head]: the rows reordered to the packed kernel's
            # [3, heads, dim_head] (a copy of the weights, not of the map; once per
            # weight version at inference, which the dense kernel then packs once)
            def reorder():
                w = weight.view(heads, 3, head_dim, -1).transpose(0, 1).reshape(weight.shape)
                b_ = None if bias is None else (
                    bias.view(heads, 3, head_dim).transpose(0, 1).reshape(bias.shape))
                return w, b_

            weight, bias = self.weight_constant(m, "qkv_head_first", [weight, bias], None,
                                                reorder)
        kern = self.kernel(window, heads, head_dim, m.scale, dtype, layout="tokens",
                           resolution=(h, w), shift=(0, 0), packed_qkv=True,
                           partition="block" if blk.partition_block else "grid")
        qkv = qkv_packed(x.reshape(b, h * w, c), weight, bias, heads, head_dim)
        out = kern(qkv, table)
        return m.proj_drop(project(m.proj, out)).view(b, h, w, -1)
