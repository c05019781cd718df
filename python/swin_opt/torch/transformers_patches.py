"""Hugging Face transformers: ``SwinAttention`` (>= 5) and ``SwinSelfAttention``
(4.x), window layout with the mask passed in identified as Swin's."""

from __future__ import annotations

from .patching import _Fallback, _Patch, _heads_first


class _HFAttention(_Patch):
    """transformers >= 5: ``SwinAttention.forward(hidden_states, attention_mask=None, **kw)``."""

    framework = "transformers"

    def run(self, torch, m, hidden_states, attention_mask=None, **kwargs):
        if kwargs.get("output_attentions"):
            raise _Fallback("attention probabilities requested")
        rpb = m.relative_position_bias
        out = _hf_attention(self, torch, m, hidden_states, attention_mask, rpb.window_size,
                            m.num_attention_heads, m.head_dim, m.scaling,
                            rpb.relative_position_bias_table,
                            getattr(rpb, "relative_position_index", None),
                            (m.q_proj, m.k_proj, m.v_proj))
        return m.o_proj(out), None


def _hf_attention(patch, torch, m, hidden_states, attention_mask, window_size, heads, head_dim,
                  scale, table, index, projections):
    """The attention core shared by transformers' 5.x and 4.x Swin modules:
    windows of ``hidden_states`` [B_, N, C] through the kernel, heads merged."""
    dtype = patch.common_checks(torch, m, hidden_states)
    window = tuple(int(s) for s in window_size)
    b, n, _ = hidden_states.shape
    if n != window[0] * window[1]:
        raise _Fallback(f"{n} tokens per window, window is {window}")
    cfg = patch.mask_config(attention_mask, window, b)
    table = patch.table(table, window, heads, index, hidden_states.dtype)
    kern = patch.kernel(window, heads, head_dim, scale, dtype, **cfg)
    q, k, v = (_heads_first(p(hidden_states), b, n, heads, head_dim) for p in projections)
    return kern(q, k, v, table)


class _HFSelfAttention(_Patch):
    """transformers 4.x: ``SwinSelfAttention.forward(hidden_states, attention_mask, head_mask,
    output_attentions)`` (the output projection lives in ``SwinSelfOutput``)."""

    framework = "transformers"

    def run(self, torch, m, hidden_states, attention_mask=None, head_mask=None,
            output_attentions=False, **kwargs):
        if output_attentions or head_mask is not None or kwargs:
            raise _Fallback("attention probabilities / head mask requested")
        out = _hf_attention(self, torch, m, hidden_states, attention_mask, m.window_size,
                            m.num_attention_heads, m.attention_head_size, None,
                            m.relative_position_bias_table,
                            getattr(m, "relative_position_index", None),
                            (m.query, m.key, m.value))
        return (out,)
