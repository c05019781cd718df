"""torchvision: ``ShiftedWindowAttention.forward`` (and V2), token layout when
the map holds a window on both axes, else window layout with torch-side
pad/roll/partition."""

from __future__ import annotations

from .patching import _Fallback, _Patch, _cosine_qk, _packed_inputs, _qkv_windows


class _TorchvisionAttention(_Patch):
    """``torchvision.models.swin_transformer.ShiftedWindowAttention.forward(x)``, x ``[B, H, W, C]``."""

    framework = "torchvision"

    def run(self, torch, m, x):
        F = torch.nn.functional
        dtype = self.common_checks(torch, m, x)
        if x.dim() != 4:
            raise _Fallback("expected [B, H, W, C]")
        b, h, w, c = x.shape
        window = tuple(int(s) for s in m.window_size)
        heads = m.num_heads
        head_dim = c // heads
        pad_h, pad_w = (-(-h // window[0]) * window[0], -(-w // window[1]) * window[1])
        shift = tuple(0 if ws >= p else int(s) for ws, p, s in zip(window, (pad_h, pad_w),
                                                                   m.shift_size))
        table, scale, qkv_bias, logit_scale = self.attention_core(
            torch, m, window, heads, x.dtype, m.qkv.bias, None)
        pads = (pad_h, pad_w) != (h, w)
        if self.options.layout == "auto" and h >= window[0] and w >= window[1]:
            kern = self.kernel(window, heads, head_dim, scale, dtype, layout="tokens",
                               resolution=(h, w), shift=shift, packed_qkv=True,
                               padding="pad_then_shift" if pads else None)
            if kern.config.window == window and kern.config.shift == shift:
                qkv, pad_qkv = _packed_inputs(torch, x.reshape(b, h * w, c), m.qkv.weight,
                                              qkv_bias, heads, head_dim, logit_scale)
                out = kern(qkv, table, pad_qkv=pad_qkv)
                return F.linear(out, m.proj.weight, m.proj.bias).view(b, h, w, c)
        # window layout: pad, roll and partition in torch exactly as torchvision does
        xp = F.pad(x, (0, 0, 0, pad_w - w, 0, pad_h - h))
        if any(shift):
            xp = torch.roll(xp, shifts=(-shift[0], -shift[1]), dims=(1, 2))
        nh, nw = pad_h // window[0], pad_w // window[1]
        xw = xp.view(b, nh, window[0], nw, window[1], c).permute(0, 1, 3, 2, 4, 5)
        n = window[0] * window[1]
        xw = xw.reshape(b * nh * nw, n, c)
        cfg = {"resolution": (pad_h, pad_w), "shift": shift} if any(shift) else {}
        kern = self.kernel(window, heads, head_dim, scale, dtype, **cfg)
        if kern.config.window != window or (any(shift) and kern.config.shift != shift):
            raise _Fallback("kernel configuration differs from torchvision's")
        q, k, v = _qkv_windows(torch, F.linear(xw, m.qkv.weight, qkv_bias), xw.shape[0], n,
                               heads, head_dim)
        _cosine_qk(torch, q, k, logit_scale, head_axis=1)
        out = F.linear(kern(q, k, v, table), m.proj.weight, m.proj.bias)
        out = out.view(b, nh, nw, window[0], window[1], c).permute(0, 1, 3, 2, 4, 5)
        out = out.reshape(b, pad_h, pad_w, c)
        if any(shift):
            out = torch.roll(out, shifts=shift, dims=(1, 2))
        return out[:, :h, :w, :].contiguous()
