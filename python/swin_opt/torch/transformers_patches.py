"""Hugging Face transformers: ``SwinAttention`` (swin, >= 5), ``SwinSelfAttention``
(swin, 4.x) and the per-model copies of the 4.x layout in donut
(``DonutSwinSelfAttention``), maskformer (``MaskFormerSwinSelfAttention``),
swinv2 (``Swinv2SelfAttention``) and swin2sr (``Swin2SRSelfAttention``):
window layout, the mask passed in identified as Swin's (see
:mod:`.windows`).  BEiT (``BeitAttention``, transformers 5) and data2vec-vision
(``Data2VecVisionSelfAttention`` and its SDPA subclass): the class-token kernels
on the table their patched bias modules hand on (:mod:`.table_bias`)."""

from __future__ import annotations

import inspect

from .fallback import Fallback
from .patching import Patch, cosine_kernel_scale
from .projections import cosine_qk, heads_first, project
from .table_bias import TableBias, TableBiasConsumer, class_token_table
from .windows import run_windows

__all__ = ["HFAttention", "HFSelfAttention", "HFBeitAttention", "HFData2VecSelfAttention",
           "is_hf_swinv2"]

#: Attention classes of transformers that add the shift mask to the scores twice
#: (-200 across regions); :func:`.windows.run_windows` reproduces that.  Checked
#: against transformers 5.24; the model tests compare with the models' own output.
_MASK_ADDED_TWICE = frozenset({"Swinv2SelfAttention", "Swin2SRSelfAttention"})


class HFAttention(Patch):
    """transformers >= 5: ``SwinAttention.forward(hidden_states, attention_mask=None, **kw)``."""

    framework = "transformers"

    def run(self, m, hidden_states, attention_mask=None, **kwargs):
        if kwargs.get("output_attentions"):
            raise Fallback("attention probabilities requested")
        rpb = m.relative_position_bias
        out = _hf_attention(self, m, hidden_states, attention_mask, rpb.window_size,
                            m.num_attention_heads, m.head_dim, m.scaling,
                            rpb.relative_position_bias_table,
                            getattr(rpb, "relative_position_index", None),
                            (m.q_proj, m.k_proj, m.v_proj))
        return project(m.o_proj, out), None


def _hf_attention(patch, m, hidden_states, attention_mask, window_size, heads, head_dim,
                  scale, table, index, projections, *, cpb=False, mask_repeats=1):
    """The attention core shared by transformers' Swin modules: windows of
    ``hidden_states`` [B_, N, C] through the kernel, heads merged.  ``cpb``:
    SwinV2 (cosine attention, ``16 * sigmoid(continuous_position_bias_mlp)`` table,
    scale 1 on the normalised q/k)."""
    dtype = patch.common_checks(m, hidden_states)
    window = tuple(int(s) for s in window_size)
    b, n, _ = hidden_states.shape
    if n != window[0] * window[1]:
        raise Fallback(f"{n} tokens per window, window is {window}")
    if cpb:
        table = patch.folded_cpb_table(m, m.continuous_position_bias_mlp,
                                       m.relative_coords_table, window, heads, index,
                                       hidden_states.dtype)
    else:
        table = patch.table(table, window, heads, index, hidden_states.dtype)
    q, k, v = (heads_first(project(p, hidden_states), b, n, heads, head_dim)
               for p in projections)
    cosine = None
    if cpb:
        # the cosine kernel normalizes q and k itself, or they are prepared here
        cosine = cosine_kernel_scale(m.logit_scale, hidden_states, *m.parameters())
        if cosine is None:
            q, k = cosine_qk(q, k, m.logit_scale, head_axis=1)
        scale = 1.0
    return run_windows(patch, q, k, v, table, window, scale, dtype, attention_mask,
                       mask_repeats=mask_repeats, logit_scale=cosine)


def is_hf_swinv2(m) -> bool:
    """Whether ``m`` is a transformers SwinV2 self-attention (cosine attention, the
    continuous position bias MLP)."""
    return all(hasattr(m, a) for a in ("logit_scale", "continuous_position_bias_mlp",
                                       "relative_coords_table"))


class HFSelfAttention(Patch):
    """The query/key/value layout (output projection in the sibling ``*SelfOutput``):
    ``SwinSelfAttention`` (transformers 4.x), ``DonutSwinSelfAttention``,
    ``MaskFormerSwinSelfAttention``, ``ClapAudioSelfAttention`` (Swin), ``Swinv2SelfAttention`` and
    ``Swin2SRSelfAttention`` (SwinV2: cosine attention and the continuous position
    bias MLP; the mask added twice).  Their ``forward`` takes ``(hidden_states,
    attention_mask, [head_mask,] output_attentions)`` depending on the class and
    version, so the call is bound to the class's own signature.  Returns
    ``(context,)``."""

    framework = "transformers"

    def run(self, m, hidden_states, *args, **kwargs):
        params = _parameters(type(m))
        try:
            bound = params.bind(m, hidden_states, *args, **kwargs)
        except TypeError as exc:
            raise Fallback(f"unexpected call: {exc}") from None
        given = dict(bound.arguments)
        for name, p in params.parameters.items():
            if p.kind is inspect.Parameter.VAR_KEYWORD:
                given.update(given.pop(name, None) or {})
        if given.get("output_attentions") or given.get("head_mask") is not None:
            raise Fallback("attention probabilities / head mask requested")
        v2 = is_hf_swinv2(m)
        twice = type(m).__name__ in _MASK_ADDED_TWICE
        out = _hf_attention(self, m, hidden_states, given.get("attention_mask"),
                            m.window_size, m.num_attention_heads, m.attention_head_size, None,
                            None if v2 else m.relative_position_bias_table,
                            getattr(m, "relative_position_index", None),
                            (m.query, m.key, m.value), cpb=v2, mask_repeats=2 if twice else 1)
        return (out,)


def _beit_attention(patch, m, hidden_states, bias, heads, head_dim, scale, projections):
    """BEiT's attention core on the class-token kernel: ``bias`` (a
    :class:`.table_bias.TableBias`, else Fallback) gives the table, ``projections``
    q/k/v; returns ``[B, N, heads*head_dim]`` (heads merged)."""
    if not isinstance(bias, TableBias):
        raise Fallback("no relative position bias table (no bias, a mask, or a bias tensor "
                       "computed by code swin_opt did not patch)")
    dtype = patch.common_checks(m, hidden_states)
    b, n, _ = hidden_states.shape
    window, table = class_token_table(patch, bias, n, heads, hidden_states.dtype)
    kern = patch.kernel(window, heads, head_dim, scale, dtype, class_token=True)
    q, k, v = (heads_first(project(p, hidden_states), b, n, heads, head_dim)
               for p in projections)
    return kern(q, k, v, table)


class HFBeitAttention(TableBiasConsumer, Patch):
    """transformers 5: ``BeitAttention.forward(hidden_states, attention_mask=None, **kw)``.
    ``BeitLayer`` passes its bias (its own ``relative_position_bias``, plus
    ``BeitModel``'s shared one) as ``attention_mask``: from the patched
    ``BeitRelativePositionBias`` modules, a :class:`.table_bias.TableBias`.  Falls
    back where attention probabilities are requested (``output_attentions``, as a
    keyword or in the config), for a head mask, a user attention mask, and a
    bias interpolated to another grid.  Returns ``(output, None)``."""

    framework = "transformers"

    def run(self, m, hidden_states, attention_mask=None, **kwargs):
        if kwargs.get("output_attentions") or getattr(m.config, "output_attentions", False):
            raise Fallback("attention probabilities requested")
        if kwargs.get("head_mask") is not None:
            raise Fallback("head mask")
        out = _beit_attention(self, m, hidden_states, attention_mask, m.num_attention_heads,
                              m.head_dim, m.scaling, (m.q_proj, m.k_proj, m.v_proj))
        return project(m.o_proj, out), None


class HFData2VecSelfAttention(TableBiasConsumer, Patch):
    """``Data2VecVisionSelfAttention.forward(hidden_states, output_attentions=False,
    relative_position_bias=None, interpolate_pos_encoding=False, resolution=None)``
    (and its SDPA subclass): the layer's own bias module (called as the original
    does: patched, it hands on its table) plus the encoder's shared one
    (``relative_position_bias``).  The output projection is the sibling
    ``Data2VecVisionSelfOutput``'s.  Falls back where attention probabilities are
    requested and for a bias interpolated to another grid.  Returns ``(context,)``."""

    framework = "transformers"

    def run(self, m, hidden_states, output_attentions=False, relative_position_bias=None,
            interpolate_pos_encoding=False, resolution=None):
        if output_attentions:
            raise Fallback("attention probabilities requested")
        bias = relative_position_bias
        if m.has_relative_position_bias:
            if resolution is None:
                raise Fallback("no resolution for the layer's relative position bias")
            patch_size = m.config.patch_size
            own = m.relative_position_bias(
                (resolution[0] // patch_size, resolution[1] // patch_size),
                interpolate_pos_encoding, dim_size=hidden_states.shape[1])
            bias = own if bias is None else own + bias
        out = _beit_attention(self, m, hidden_states, bias, m.num_attention_heads,
                              m.attention_head_size, None, (m.query, m.key, m.value))
        return (out,)


_signatures = {}


def _parameters(cls):
    sig = _signatures.get(cls)
    if sig is None:
        sig = _signatures[cls] = inspect.signature(cls.forward)
    return sig
