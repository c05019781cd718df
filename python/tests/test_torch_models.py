"""Model coverage of ``swin_opt.torch.swap_attention`` (issue 12).

Each model family is swapped, run under ``torch.inference_mode()`` in eval
mode, and compared with its own forward (float32, 1e-4 relative); every
attention layer must have run the kernel (``patch_stats``), and
``unpatched(model)`` must be empty.  Families (each skipped when its framework
is not importable):

* torchvision Video Swin ``swin3d_t/s/b`` (3-D token-layout kernels), plus a
  small ``SwinTransformer3d`` with a shift along the depth and padding on all
  three axes, and the maps where torchvision's bias is not a relative position
  bias (reported fallback);
* transformers ``Swinv2Model``, ``DonutSwinModel``, ``MaskFormerSwinModel``
  (single-window maps that still shift), ``Swin2SRModel``, ``SwinBackbone``
  (``always_partition=True``), and ``Swinv2SelfAttention`` on an input where
  its doubled mask (-200) differs from a single one;
* timm ``swinv2_cr`` (its meta-MLP bias, logit scale, shift-then-pad), also
  with ``always_partition``;
* the report of what ``swap_attention`` leaves unpatched.

Weights are re-drawn with larger variances than the frameworks' inits (bias
tables ~ N(0, 1), linear weights ~ N(0, 4/fan_in), SwinV2 logit scales in
[2, 200]) so that a wrong bias or mask shows far above the tolerance.  Models
are small (few layers, small embeddings and images); the swin3d models run
on two 200x200 frames, the smallest size where no stage's map is below the 7x7
window (below it torchvision's bias is not Swin's; see the fallback test).
"""

from __future__ import annotations

import math
import warnings
from unittest import mock

import pytest

from swin_opt import torch as st
from swin_opt.testing import sharpen_weights

RTOL = 1e-4


def _tensor(y):
    """The output tensor(s) of a model, flattened into one."""
    torch = pytest.importorskip("torch")
    if isinstance(y, torch.Tensor):
        return y
    for attr in ("feature_maps", "last_hidden_state", "logits"):
        v = getattr(y, attr, None)
        if v is not None:
            return torch.cat([t.flatten() for t in v]) if isinstance(v, tuple) else v
    raise AssertionError(f"no output tensor in {type(y).__name__}")


def _rel_err(got, want):
    return ((got - want).abs().max() / want.abs().max()).item()


def _check(torch, model, x, opts, n_layers, block_fallbacks=(), **swap):
    """Swap, run, compare; every attention layer ran a kernel (its own patch, or its
    block's token-layout patch), nothing left unpatched.  Block patches may fall back
    (to the attention module's window-layout kernel) only for ``block_fallbacks``
    (names)."""
    with torch.inference_mode():
        want = _tensor(model(x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "not patching" / "patched nothing" warning
        assert st.swap_attention(model, **swap, **opts) == n_layers
    try:
        with torch.inference_mode():
            got = _tensor(model(x))
        stats = [s for s in st.patch_stats(model) if s["kind"] == "attention"]
        assert st.unpatched(model) == []
    finally:
        assert st.restore_attention(model) == n_layers
    assert _rel_err(got, want) <= RTOL
    blocks = {s["name"]: s for s in stats if s["method"] != "forward"}
    layers = [s for s in stats if s["method"] == "forward"]
    assert len(layers) == n_layers
    for s in layers:
        block = blocks.pop(s["name"].rsplit(".", 1)[0], None)
        assert s["fallback_calls"] == 0, s
        if block is None:
            assert s["kernel_calls"] >= 1, s
            continue
        if block["name"] in block_fallbacks:
            assert block["kernel_calls"] == 0 and s["kernel_calls"] >= 1, (block, s)
        else:
            assert block["kernel_calls"] >= 1 and block["fallback_calls"] == 0, block
    assert not blocks, blocks
    return stats


# --------------------------------------------------------------------------- #
# torchvision: Video Swin
# --------------------------------------------------------------------------- #
@pytest.fixture(scope="module")
def tv_video(torch):
    pytest.importorskip("torchvision")
    from torchvision.models.video import swin_transformer
    return swin_transformer


@pytest.mark.aot
@pytest.mark.parametrize("arch,layers", [("swin3d_t", 12), ("swin3d_s", 24), ("swin3d_b", 24)])
def test_torchvision_swin3d(torch, tv_video, opts, arch, layers):
    # 2 frames of 200x200: maps (1, 50, 50) ... (1, 7, 7); the depth (1) is below
    # the 8-frame window (torchvision shrinks it and zeroes that shift: a slice of
    # the table), padding at 50 and 25, shifts (0, 3, 3)
    torch.manual_seed(0)
    with mock.patch.object(torch.nn.init, "trunc_normal_", lambda t, *a, **k: t):
        model = getattr(tv_video, arch)()  # (every weight is re-drawn: skip the slow init)
    _check(torch, sharpen_weights(model), torch.randn(1, 3, 2, 200, 200), opts, layers)


def _small_video_swin(tv_video, torch, **kw):
    args = dict(patch_size=[2, 4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4],
                window_size=[2, 4, 4], stochastic_depth_prob=0.0, num_classes=10)
    args.update(kw)
    torch.manual_seed(0)
    return sharpen_weights(tv_video.SwinTransformer3d(**args))


@pytest.mark.aot
def test_torchvision_swin3d_depth_shift_and_padding(torch, tv_video, opts):
    # 10 frames, 40x44: maps (5, 10, 11) and (5, 5, 6): padding on every axis,
    # shifts (1, 2, 2) including the depth
    model = _small_video_swin(tv_video, torch)
    _check(torch, model, torch.randn(2, 3, 10, 40, 44), opts, 4)


@pytest.mark.aot
def test_torchvision_swin3d_truncated_index_falls_back(torch, tv_video, opts, monkeypatch):
    # maps (2, 8, 8) then (2, 4, 3): the width of the second stage is below the
    # 4-wide window, torchvision shrinks it and takes relative_position_index[:n, :n]
    # of the full window, which is not a relative position bias: those layers keep
    # their own forward, and say why: in patch_stats, and in one warning per reason
    # (two layers, two forwards: one warning)
    from swin_opt.torch import fallback

    monkeypatch.setattr(fallback, "warned_reasons", set())  # this process's warnings
    model = _small_video_swin(tv_video, torch)
    x = torch.randn(1, 3, 4, 32, 24)
    with torch.inference_mode():
        want = model(x)
    assert st.swap_attention(model, **opts) == 4
    with warnings.catch_warnings(record=True) as caught, torch.inference_mode():
        warnings.simplefilter("always")
        got = model(x)
        model(x)
    stats = {s["name"]: s for s in st.patch_stats(model) if s["kind"] == "attention"}
    st.restore_attention(model)
    assert _rel_err(got, want) <= RTOL
    for name, s in stats.items():
        if name.startswith("features.2."):
            assert s["kernel_calls"] == 0 and s["fallback_calls"] == 2, s
            assert "not a relative position bias" in next(iter(s["fallback_reasons"]))
        else:
            assert s["kernel_calls"] == 2 and s["fallback_calls"] == 0, s
    fallbacks = [w for w in caught if issubclass(w.category, st.FallbackWarning)]
    assert len(fallbacks) == 1, [str(w.message) for w in caught]
    message = str(fallbacks[0].message)
    assert "not a relative position bias" in message and "features.2." in message, message


# --------------------------------------------------------------------------- #
# transformers
# --------------------------------------------------------------------------- #
@pytest.fixture(scope="module")
def hf(torch):
    return pytest.importorskip("transformers")


_HF_SMALL = dict(image_size=40, patch_size=4, embed_dim=16, depths=[2, 2], num_heads=[2, 4],
                 window_size=4)


@pytest.mark.aot
@pytest.mark.parametrize("family", ["Swinv2", "DonutSwin"])
def test_transformers_models(torch, hf, opts, family):
    # maps 10x10 (padded to 12, shift 2) and 5x5 (padded to 8)
    torch.manual_seed(0)
    model = getattr(hf, f"{family}Model")(getattr(hf, f"{family}Config")(**_HF_SMALL))
    _check(torch, sharpen_weights(model), torch.randn(2, 3, 40, 40), opts, 4)


@pytest.mark.aot
def test_transformers_maskformer_swin(torch, hf, opts):
    # a third stage of 3x3: MaskFormer pads it to one 4x4 window and still
    # shifts it, a mask run on a virtual map two windows wide
    torch.manual_seed(0)
    cfg = hf.MaskFormerSwinConfig(**dict(_HF_SMALL, depths=[2, 2, 2], num_heads=[2, 2, 4]))
    model = sharpen_weights(hf.MaskFormerSwinModel(cfg))
    _check(torch, model, torch.randn(2, 3, 40, 40), opts, 6)


@pytest.mark.aot
def test_transformers_swin2sr(torch, hf, opts):
    torch.manual_seed(0)
    cfg = hf.Swin2SRConfig(image_size=20, patch_size=1, embed_dim=16, depths=[2, 2],
                           num_heads=[2, 4], window_size=4)
    model = sharpen_weights(hf.Swin2SRModel(cfg))
    _check(torch, model, torch.randn(1, 3, 20, 20), opts, 4)


@pytest.mark.aot
def test_transformers_swin_backbone_always_partition(torch, hf, opts):
    # SwinBackbone runs every stage with always_partition=True: maps 10, 5, 3, 2;
    # stages 3 and 4 are one 4x4 window each, still shifted by 2 in their second layer
    torch.manual_seed(0)
    cfg = hf.SwinConfig(out_features=["stage1", "stage2", "stage3", "stage4"],
                        **dict(_HF_SMALL, depths=[2, 2, 2, 2], num_heads=[2, 2, 4, 4]))
    model = sharpen_weights(hf.SwinBackbone(cfg))
    _check(torch, model, torch.randn(2, 3, 40, 40), opts, 8)


@pytest.mark.aot
@pytest.mark.parametrize("family", ["Swinv2", "Swin2SR"])
def test_transformers_swinv2_double_mask(torch, hf, opts, family):
    """Swinv2/Swin2SR add the shift mask twice.  With k = -q and s_h = 100 the
    cosine scores are -100 within a region and +100 across, so a single -100 mask
    would give a different softmax than their -200."""
    import importlib

    torch.manual_seed(0)
    modeling = importlib.import_module(f"transformers.models.{family.lower()}."
                                       f"modeling_{family.lower()}")
    cfg = getattr(hf, f"{family}Config")(embed_dim=16, num_heads=[2], depths=[1], window_size=4)
    layer = getattr(modeling, f"{family}Layer")(cfg, dim=16, input_resolution=(8, 8),
                                                num_heads=2, shift_size=2)
    m = layer.attention.self.eval()
    with torch.no_grad():
        m.logit_scale.fill_(math.log(100.0))
        m.query.weight.copy_(torch.eye(16))
        m.key.weight.copy_(-torch.eye(16))
        m.query.bias.zero_()
        m.value.weight.copy_(torch.randn(16, 16))
    mask = layer.get_attn_mask(8, 8, dtype=torch.float32)
    # +u in token 0's region, -u elsewhere (plus noise)
    sign = torch.where(mask[:, 0, :] == 0, 1.0, -1.0)
    x = sign[:, :, None] * torch.randn(16) + 0.01 * torch.randn(4, 16, 16)
    with torch.inference_mode():
        want = m(x, mask)[0]
        assert st.swap_attention(m, **opts) == 1
        got = m(x, mask)[0]
    stats = st.patch_stats(m)
    st.restore_attention(m)
    assert stats[0]["kernel_calls"] == 1, stats
    assert _rel_err(got, want) <= RTOL
    # the same call with the mask added once differs far above the tolerance
    with torch.inference_mode():
        once = m(x, mask * 0.5)[0]
    assert _rel_err(once, want) > 100 * RTOL


@pytest.mark.aot
def test_transformers_clap_audio_attention(torch, hf, opts):
    from swin_opt import reference as ref
    from transformers.models.clap import modeling_clap

    cfg = hf.ClapAudioConfig(qkv_bias=True)
    m = sharpen_weights(modeling_clap.ClapAudioSelfAttention(cfg, dim=16, num_heads=2,
                                                             window_size=4))
    mask = torch.from_numpy(ref.shift_mask((8, 8), (4, 4), 2)).float()
    x = torch.randn(8, 16, 16)
    with torch.inference_mode():
        want = m(x, mask)[0]
        assert st.swap_attention(m, **opts) == 1
        got = m(x, mask)[0]
    assert st.patch_stats(m)[0]["kernel_calls"] == 1
    st.restore_attention(m)
    assert _rel_err(got, want) <= RTOL


# --------------------------------------------------------------------------- #
# timm: swinv2_cr
# --------------------------------------------------------------------------- #
@pytest.fixture(scope="module")
def timm_cr(torch):
    pytest.importorskip("timm")
    from timm.models import swin_transformer_v2_cr
    return swin_transformer_v2_cr


@pytest.mark.aot
@pytest.mark.parametrize("layout", ["auto", "windows"])
def test_timm_swinv2_cr(torch, timm_cr, opts, layout):
    import timm

    # maps 10x10 (shift then pad to 12: padded tokens carry the key bias, normalised)
    # and 5x5 (to 8); "auto": the blocks' token-layout kernels, "windows": the
    # attention modules' window-layout kernels
    torch.manual_seed(0)
    model = timm.create_model("swinv2_cr_tiny_224", img_size=(40, 40), embed_dim=16,
                              depths=(2, 2), num_heads=(2, 4), window_size=4, num_classes=10)
    stats = _check(torch, sharpen_weights(model), torch.randn(2, 3, 40, 40), opts, 4,
                   layout=layout)
    assert len(stats) == (8 if layout == "auto" else 4)


@pytest.mark.aot
def test_timm_swinv2_cr_always_partition(torch, timm_cr, opts):
    # the last stage's 3x3 map is one 4x4 window (that still shifts in the second
    # block): a token-layout kernel would shrink that window to the map (small-map
    # rule), so those blocks fall back to the attention modules' window layout (on
    # a virtual map for the shifted one)
    torch.manual_seed(0)
    model = timm_cr.SwinTransformerV2Cr(img_size=(40, 40), embed_dim=16, depths=(2, 2, 2),
                                        num_heads=(2, 2, 4), window_size=4, num_classes=10,
                                        always_partition=True)
    _check(torch, sharpen_weights(model), torch.randn(2, 3, 40, 40), opts, 6,
           block_fallbacks=("stages.2.blocks.0", "stages.2.blocks.1"))


# --------------------------------------------------------------------------- #
# What swap_attention leaves unpatched
# --------------------------------------------------------------------------- #
def test_unpatched_report(torch, timm_cr):
    class MyWindowAttention(torch.nn.Module):  # looks like window attention, unknown
        def forward(self, x):
            return x

    model = timm_cr.SwinTransformerV2Cr(img_size=(16, 16), embed_dim=16, depths=(1,),
                                        num_heads=(2,), window_size=4, num_classes=0)
    model.extra = MyWindowAttention()
    with pytest.warns(UserWarning) as record:
        assert st.swap_attention(model, frameworks="torchvision") == 0
    messages = [str(w.message) for w in record]
    assert any("patched nothing in SwinTransformerV2Cr" in m for m in messages), messages
    assert any("WindowMultiHeadAttention" in m and "not selected" in m for m in messages)
    report = {e["name"]: e for e in st.unpatched(model)}
    assert report["stages.0.blocks.0.attn"]["framework"] == "timm"
    assert report["stages.0.blocks.0.attn"]["class"].endswith(
        "swin_transformer_v2_cr.WindowMultiHeadAttention")
    assert "frameworks=('torchvision',)" in report["stages.0.blocks.0.attn"]["reason"]
    assert report["extra"]["reason"] == "not a window-attention class swin_opt knows"
    # the block's MLP is timm's too (swap_attention swaps Swin MLPs by default)
    assert "frameworks=('torchvision',)" in report["stages.0.blocks.0.mlp"]["reason"]
    assert set(report) == {"stages.0.blocks.0.attn", "stages.0.blocks.0.mlp", "extra"}

    # patched now; only the unknown class is left, and nothing "patched nothing"
    with pytest.warns(UserWarning, match="MyWindowAttention") as record:
        assert st.swap_attention(model) == 1
    assert not any("patched nothing" in str(w.message) for w in record)
    assert [e["name"] for e in st.unpatched(model)] == ["extra"]
    st.restore_attention(model)

    with pytest.warns(UserWarning, match="no Swin window-attention module"):
        assert st.swap_attention(torch.nn.Linear(2, 2)) == 0
    assert st.unpatched(torch.nn.Linear(2, 2)) == []


def test_unpatched_unsupported_configuration(torch, timm_cr):
    # a supported class in a configuration the kernel does not take is reported
    model = timm_cr.SwinTransformerV2Cr(img_size=(16, 16), embed_dim=16, depths=(1,),
                                        num_heads=(2,), window_size=4, num_classes=0)
    attn = model.stages[0].blocks[0].attn
    attn.meta_mlp.fc2 = torch.nn.Linear(attn.meta_mlp.fc2.in_features, 3)
    with pytest.warns(UserWarning) as record:
        assert st.swap_attention(model) == 0
    messages = [str(w.message) for w in record]
    assert any("meta_mlp gives 3 columns for 2 heads" in m for m in messages), messages
    assert any("patched nothing" in m for m in messages), messages
    (entry,) = st.unpatched(model)
    assert entry["name"] == "stages.0.blocks.0.attn" and "3 columns" in entry["reason"]


def test_windows_module_and_unpatched_import_without_torch():
    import importlib

    importlib.import_module("swin_opt.torch.windows")
    assert "unpatched" in st.__all__ and callable(st.unpatched)
