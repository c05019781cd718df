"""The dense layers swap_attention runs through oneDNN (swin_opt.torch.linears):
the patch-merging reductions of timm, torchvision and transformers Swin models and
transformers' MLP layers, in eval and training, ``linear=False`` and restore, and a
reduction that is not a plain ``nn.Linear`` left alone with its reason.

Tolerance: test_torch.py's 1e-4 relative on whole models (oneDNN and MKL sum the
products in different orders); gradients 1e-4 relative to each one's largest value.
"""

from __future__ import annotations

import copy

import pytest

from swin_opt import torch as st
from swin_opt.testing import sharpen_weights

pytestmark = pytest.mark.aot

RTOL = 1e-4


def _rel_err(got, want):
    return ((got - want).abs().max() / want.abs().max()).item()


def _linear_stats(model):
    return {s["name"]: s for s in st.patch_stats(model) if s["kind"] == "linear"}


def _timm_model(torch):
    swin = pytest.importorskip("timm.models.swin_transformer")
    torch.manual_seed(0)
    model = swin.SwinTransformer(img_size=56, patch_size=4, window_size=7, embed_dim=32,
                                 depths=(2, 2, 2), num_heads=(2, 4, 4), num_classes=10,
                                 drop_path_rate=0.0)
    return sharpen_weights(model).eval()


def _img(torch, size=56):
    return torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(1))


def test_timm_reductions_eval_and_training(torch, opts):
    original = _timm_model(torch)
    model = copy.deepcopy(original)
    x = _img(torch)
    with torch.inference_mode():
        want = original(x)
    assert st.swap_attention(model, **opts) == 6
    with torch.inference_mode():
        assert _rel_err(model(x), want) <= RTOL
    stats = _linear_stats(model)
    assert sorted(stats) == ["layers.1.downsample.reduction", "layers.2.downsample.reduction"]
    assert all(s["framework"] == "timm" and s["kernel_calls"] == 1 and s["fallback_calls"] == 0
               for s in stats.values()), stats
    # training: the reductions' weights get torch's gradients through swin_opt::linear
    for m in (original, model):
        m.train()
        m.zero_grad()
        m(x).square().sum().backward()
    for name, p in original.named_parameters():
        if "reduction" in name:
            got = dict(model.named_parameters())[name].grad
            assert _rel_err(got, p.grad) <= RTOL, name
    assert all(s["kernel_calls"] == 2 for s in _linear_stats(model).values())


def test_linear_false_and_restore(torch, opts):
    model = _timm_model(torch)
    reductions = [layer.downsample.reduction for layer in model.layers[1:]]
    st.swap_attention(model, linear=False, **opts)
    assert _linear_stats(model) == {} and not any("forward" in vars(r) for r in reductions)
    st.swap_attention(model, **opts)
    assert all("forward" in vars(r) for r in reductions)
    st.swap_attention(model, linear=False, **opts)  # undoes the dense-layer patches
    assert not any("forward" in vars(r) for r in reductions)
    st.swap_attention(model, **opts)
    st.restore_attention(model)
    assert st.patch_stats(model) == [] and not any("forward" in vars(r) for r in reductions)


def test_a_reduction_that_is_not_nn_linear_is_left_alone(torch, opts):
    class Scaled(torch.nn.Linear):
        def forward(self, x):
            return 2 * super().forward(x)

    model = _timm_model(torch)
    old = model.layers[1].downsample.reduction
    scaled = Scaled(old.in_features, old.out_features, bias=False)
    scaled.weight.data.copy_(old.weight.data)
    model.layers[1].downsample.reduction = scaled
    x = _img(torch)
    with torch.inference_mode():
        want = model(x)
    with pytest.warns(UserWarning, match="not patching timm .*Scaled, not nn.Linear"):
        st.swap_attention(model, **opts)
    (left,) = st.unpatched(model)
    assert left["name"] == "layers.1.downsample.reduction", left
    with torch.inference_mode():
        assert _rel_err(model(x), want) <= RTOL
    assert sorted(_linear_stats(model)) == ["layers.2.downsample.reduction"]


def test_torchvision_reductions(torch, opts):
    tv_swin = pytest.importorskip("torchvision.models.swin_transformer")
    for v2 in (False, True):
        torch.manual_seed(0)
        build = tv_swin.SwinTransformer
        extra = ({"block": tv_swin.SwinTransformerBlockV2,
                  "downsample_layer": tv_swin.PatchMergingV2} if v2 else {})
        model = sharpen_weights(build(patch_size=[4, 4], embed_dim=32, depths=[2, 2],
                                      num_heads=[2, 4], window_size=[7, 7], num_classes=10,
                                      **extra)).eval()
        x = _img(torch)
        with torch.inference_mode():
            want = model(x)
        st.swap_attention(model, **opts)
        with torch.inference_mode():
            assert _rel_err(model(x), want) <= RTOL
        stats = _linear_stats(model)
        assert list(stats) == ["features.2.reduction"], stats
        assert stats["features.2.reduction"]["framework"] == "torchvision"
        assert stats["features.2.reduction"]["kernel_calls"] == 1


def _swapped_hf_model(torch, opts, config, model):
    """A small random transformers ``model`` (of ``config``'s class name, e.g.
    ``"SwinConfig"``/``"SwinModel"``), swapped, after checking its output against the
    original's (1e-4 relative)."""
    hf = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = getattr(hf, config)(image_size=56, patch_size=4, embed_dim=32, depths=[2, 2],
                              num_heads=[2, 4], window_size=7)
    model = sharpen_weights(getattr(hf, model)(cfg)).eval()
    x = _img(torch)
    with torch.inference_mode():
        want = model(pixel_values=x).last_hidden_state
    st.swap_attention(model, **opts)
    with torch.inference_mode():
        assert _rel_err(model(pixel_values=x).last_hidden_state, want) <= RTOL
    return model


def test_transformers_swin_mlp_kernel_and_reduction(torch, opts):
    """transformers' Swin: the blocks' SwinMLP on the MLP kernel, the merge on oneDNN."""
    model = _swapped_hf_model(torch, opts, "SwinConfig", "SwinModel")
    assert list(_linear_stats(model)) == ["encoder.layers.0.downsample.reduction"]
    mlps = [s for s in st.patch_stats(model) if s["kind"] == "mlp"]
    assert [s["name"] for s in mlps] == [f"encoder.layers.{i}.blocks.{j}.mlp"
                                         for i in (0, 1) for j in (0, 1)]
    assert all(s["framework"] == "transformers" and s["kernel_calls"] == 1
               for s in [*mlps, *_linear_stats(model).values()])


def test_transformers_swinv2_split_mlp_layers(torch, opts):
    """transformers' SwinV2 splits its MLP (Swinv2Intermediate, Swinv2Output): their
    dense layers and the merge run on oneDNN."""
    model = _swapped_hf_model(torch, opts, "Swinv2Config", "Swinv2Model")
    stats = _linear_stats(model)
    blocks = [f"encoder.layers.{i}.blocks.{j}" for i in (0, 1) for j in (0, 1)]
    assert sorted(stats) == sorted(["encoder.layers.0.downsample.reduction",
                                    *(f"{b}.intermediate.dense" for b in blocks),
                                    *(f"{b}.output.dense" for b in blocks)])
    assert all(s["kernel_calls"] == 1 and s["fallback_calls"] == 0 for s in stats.values())
