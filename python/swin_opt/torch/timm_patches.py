"""timm: ``WindowAttention.forward`` (window layout) and the blocks'
``_attn`` (token layout, packed qkv), for swin_transformer and swin_transformer_v2."""

from __future__ import annotations

from .masks import NO_MASK, _matcher
from .patching import _Fallback, _Patch, _cosine_qk, _packed_inputs, _qkv_windows


def _timm_qkv_bias(torch, attn):
    """timm's qkv bias: ``qkv.bias`` (V1) or ``cat(q_bias, k_bias, v_bias)`` (V2)."""
    if getattr(attn, "q_bias", None) is None:
        return attn.qkv.bias
    return torch.cat((attn.q_bias, attn.k_bias, attn.v_bias))



class _TimmAttention(_Patch):
    """``WindowAttention.forward(x, mask=None)`` of timm's swin_transformer and (SwinV2)
    swin_transformer_v2 (window layout)."""

    framework = "timm"

    def run(self, torch, m, x, mask=None):
        dtype = self.common_checks(torch, m, x)
        b, n, _ = x.shape
        window = tuple(int(s) for s in m.window_size)
        heads = m.num_heads
        attn_dim = m.qkv.out_features // 3
        head_dim = attn_dim // heads
        if n != window[0] * window[1]:
            raise _Fallback(f"{n} tokens per window, window is {window}")
        cfg = self.mask_config(mask, window, b)
        table, scale, qkv_bias, logit_scale = self.attention_core(
            torch, m, window, heads, x.dtype, _timm_qkv_bias(torch, m), getattr(m, "scale", None))
        kern = self.kernel(window, heads, head_dim, scale, dtype, **cfg)
        qkv = torch.nn.functional.linear(x, m.qkv.weight, qkv_bias)
        q, k, v = _qkv_windows(torch, qkv, b, n, heads, head_dim)
        _cosine_qk(torch, q, k, logit_scale, head_axis=1)
        out = kern(q, k, v, table)
        return m.proj_drop(m.proj(out))


class _TimmBlock(_Patch):
    """``SwinTransformerBlock._attn(x)`` of timm's swin_transformer and (SwinV2)
    swin_transformer_v2 (token layout)."""

    framework = "timm"
    attr = "_attn"

    def run(self, torch, blk, x):
        attn = blk.attn
        dtype = self.common_checks(torch, blk, x)
        if x.dim() != 4:
            raise _Fallback("expected [B, H, W, C]")
        b, h, w, c = x.shape
        window = tuple(int(s) for s in blk.window_size)
        shift = tuple(int(s) for s in blk.shift_size)
        if window != tuple(attn.window_size):
            raise _Fallback("block and attention window sizes differ")
        padded = tuple(-(-r // s) * s for r, s in zip((h, w), window))
        if not getattr(blk, "dynamic_mask", False):
            # timm applies its stored mask; make sure it is the one the kernel builds
            mask = getattr(blk, "attn_mask", None)
            want = NO_MASK if not any(shift) else (padded, shift)
            got = NO_MASK if mask is None else _matcher.match(mask, window)
            if got != want:
                raise _Fallback("stored attn_mask does not match the block's resolution/shift")
        heads = attn.num_heads
        attn_dim = attn.qkv.out_features // 3
        head_dim = attn_dim // heads
        table, scale, qkv_bias, logit_scale = self.attention_core(
            torch, attn, window, heads, x.dtype, _timm_qkv_bias(torch, attn),
            getattr(attn, "scale", None))
        kern = self.kernel(window, heads, head_dim, scale, dtype, layout="tokens",
                           resolution=(h, w), shift=shift, packed_qkv=True,
                           padding="shift_then_pad" if padded != (h, w) else None)
        if kern.config.window != window or kern.config.shift != shift:
            raise _Fallback("Swin's small-map rule changes this block's window")
        qkv, pad_qkv = _packed_inputs(torch, x.reshape(b, h * w, c), attn.qkv.weight, qkv_bias,
                                      heads, head_dim, logit_scale)
        out = kern(qkv, table, pad_qkv=pad_qkv)
        out = attn.proj_drop(attn.proj(out))
        return out.view(b, h, w, -1)

