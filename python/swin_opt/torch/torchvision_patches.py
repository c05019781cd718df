"""torchvision: ``ShiftedWindowAttention.forward`` (and V2), token layout when
the map holds a window on both axes, else window layout with torch-side
pad/roll/partition; Video Swin's ``ShiftedWindowAttention3d.forward``, 3-D token
layout."""

from __future__ import annotations

from .fallback import Fallback
from .patching import Patch, ResidualBlock, cosine_kernel_scale
from .projections import cosine_qk, linear, packed_inputs, qkv_windows
from .windows import pad_shift_windows

try:
    import torch
except ImportError:  # swin_opt.torch imports without PyTorch; its entry points need it
    torch = None

__all__ = ["TorchvisionAttention", "TorchvisionResidual", "TorchvisionAttention3d"]


class TorchvisionAttention(Patch):
    """``torchvision.models.swin_transformer.ShiftedWindowAttention.forward(x)``, x ``[B, H, W, C]``."""

    framework = "torchvision"
    fuses_residual = True

    def run(self, m, x, residual=None):
        dtype = self.common_checks(m, x)
        if x.dim() != 4:
            raise Fallback("expected [B, H, W, C]")
        b, h, w, c = x.shape
        window = tuple(int(s) for s in m.window_size)
        heads = m.num_heads
        head_dim = c // heads
        pad_h, pad_w = (-(-h // window[0]) * window[0], -(-w // window[1]) * window[1])
        shift = tuple(0 if ws >= p else int(s) for ws, p, s in zip(window, (pad_h, pad_w),
                                                                   m.shift_size))
        table, scale, qkv_bias, logit_scale = self.attention_core(
            m, window, heads, x.dtype, m.qkv.bias, None)
        pads = (pad_h, pad_w) != (h, w)
        # SwinV2: the cosine kernels normalize q and k themselves, or they are prepared here
        cosine = cosine_kernel_scale(logit_scale, x, *m.parameters())
        cosine_cfg = {"cosine": True} if cosine is not None else {}
        if self.options.layout == "auto" and h >= window[0] and w >= window[1]:
            kern = self.kernel(window, heads, head_dim, scale, dtype, layout="tokens",
                               resolution=(h, w), shift=shift, packed_qkv=True,
                               padding="pad_then_shift" if pads else None, **cosine_cfg)
            if kern.config.window == window and kern.config.shift == shift:
                qkv, pad_qkv = packed_inputs(x.reshape(b, h * w, c), m.qkv.weight, qkv_bias,
                                             heads, head_dim,
                                             None if cosine is not None else logit_scale)
                out = kern(qkv, table, pad_qkv=pad_qkv, logit_scale=cosine)
                return linear(out, m.proj.weight, m.proj.bias,
                              None if residual is None else residual.reshape(b, h * w, c)
                              ).view(b, h, w, c)
        # window layout: pad, roll and partition in torch exactly as torchvision does
        n = window[0] * window[1]
        cfg = {"resolution": (pad_h, pad_w), "shift": shift} if any(shift) else {}
        kern = self.kernel(window, heads, head_dim, scale, dtype, **cfg, **cosine_cfg)
        if kern.config.window != window or (any(shift) and kern.config.shift != shift):
            raise Fallback("kernel configuration differs from torchvision's")

        def attend(xw):
            q, k, v = qkv_windows(linear(xw, m.qkv.weight, qkv_bias), xw.shape[0], n, heads,
                                  head_dim)
            if cosine is None:
                q, k = cosine_qk(q, k, logit_scale, head_axis=1)
            return linear(kern(q, k, v, table, logit_scale=cosine), m.proj.weight, m.proj.bias)

        out = pad_shift_windows(x, window, shift, attend)
        return out if residual is None else out + residual


class TorchvisionResidual(ResidualBlock):
    """torchvision's ``SwinTransformerBlock.forward(x)`` (V1; pre-norm) with its
    residual adds in the epilogues (:class:`.patching.ResidualBlock`), its attention
    a :class:`TorchvisionAttention` (not Video Swin's 3-D one, which does not fuse)."""

    framework = "torchvision"

    @staticmethod
    def parts(blk):
        return blk.norm1, blk.attn, blk.norm2, blk.mlp, (blk.stochastic_depth,)


class TorchvisionAttention3d(Patch):
    """``torchvision.models.video.swin_transformer.ShiftedWindowAttention3d.forward(x)``,
    x ``[B, T, H, W, C]`` (Video Swin): a packed-qkv token-layout kernel with 3-D
    windows and shifts and torchvision's pad-then-shift order, so the padding,
    roll and window partition (and their inverses) happen inside the kernel.

    torchvision shrinks the window to the map (and zeroes the shift) along axes
    where the map is not larger than it, exactly as the kernel's small-map rule
    does; the bias of the shrunk window is then ``relative_position_index[:n, :n]``
    of the full window.  Where the shrunk window's tokens are the first ``n``
    tokens of the full one (only the depth shrinks, the usual case: clips of at
    most 16 frames) that is the relative position bias of the small window, a
    slice of the full table; otherwise (the height or width shrinks: maps under
    7x7) torchvision's bias is not a function of the relative position at all
    and the module runs its own forward."""

    framework = "torchvision"

    def run(self, m, x):
        dtype = self.common_checks(m, x)
        if x.dim() != 5:
            raise Fallback("expected [B, T, H, W, C]")
        b, t, h, w, c = x.shape
        size = (t, h, w)
        # torchvision's (and the kernel's) small-map rule
        window = tuple(min(int(ws), s) for ws, s in zip(m.window_size, size))
        shift = tuple(0 if s <= int(ws) else int(sh)
                      for ws, s, sh in zip(m.window_size, size, m.shift_size))
        heads = m.num_heads
        head_dim = c // heads
        table = self.window_table(m, window, heads, x.dtype)
        pads = any(s % ws for s, ws in zip(size, window))
        kern = self.kernel(window, heads, head_dim, None, dtype, layout="tokens",
                           resolution=size, shift=shift, packed_qkv=True,
                           padding="pad_then_shift" if pads else None)
        if kern.config.window != window or tuple(kern.config.shift) != shift:
            raise Fallback("kernel configuration differs from torchvision's")
        qkv, pad_qkv = packed_inputs(x.reshape(b, t * h * w, c), m.qkv.weight, m.qkv.bias,
                                     heads, head_dim, None)
        out = kern(qkv, table, pad_qkv=pad_qkv)
        return linear(out, m.proj.weight, m.proj.bias).view(b, t, h, w, c)
