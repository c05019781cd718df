"""SwinV2 swaps run the cosine kernels at inference (issue 15).

At inference the patched SwinV2 modules (timm ``swin_transformer_v2``,
torchvision ``SwinTransformerBlockV2``, transformers ``Swinv2``) hand q and k
to the cosine kernels as they are: ``cosine_qk`` (q and k normalized in
torch for the plain kernel) must not run, except where the kernel cannot take
the cosine form (transformers' doubled mask, whose region channels widen q
and k).  The training/grad path keeps ``cosine_qk`` and the plain kernel.
The continuous position bias table is computed once per weight version.

Outputs are compared with the models' own forward at 1e-4 relative (as in
test_torch), with weights re-drawn large (swin_opt.testing.sharpen_weights:
SwinV2 logit scales up to 200, above the clamp at 100).
"""

from __future__ import annotations

import contextlib
from unittest import mock

import pytest

from swin_opt import torch as st
from swin_opt.torch import projections
from swin_opt.testing import sharpen_weights

RTOL = 1e-4

pytestmark = pytest.mark.aot


def _logits(y):
    for attr in ("logits", "last_hidden_state"):
        if hasattr(y, attr):
            return getattr(y, attr)
    return y


@contextlib.contextmanager
def _no_torch_side_normalization():
    """Record the cosine_qk calls that normalize in torch (a logit scale given)."""
    calls = []
    real = projections.cosine_qk

    def refuse(q, k, logit_scale, head_axis):
        if logit_scale is not None:
            calls.append(tuple(q.shape))
        real(q, k, logit_scale, head_axis)

    mods = ("timm_patches", "torchvision_patches", "transformers_patches", "windows",
            "projections")
    with contextlib.ExitStack() as stack:
        for name in mods:
            stack.enter_context(mock.patch(f"swin_opt.torch.{name}.cosine_qk", refuse,
                                           create=False))
        yield calls


def _run(torch, model, x, opts, **swap):
    model.eval()
    with torch.inference_mode():
        want = _logits(model(x))
    n = st.swap_attention(model, **swap, **opts)
    try:
        with _no_torch_side_normalization() as calls, torch.inference_mode():
            got = _logits(model(x))
        stats = st.patch_stats(model)
    finally:
        st.restore_attention(model)
    err = ((got - want).abs().max() / want.abs().max()).item()
    assert err <= RTOL, err
    assert sum(s["kernel_calls"] for s in stats if s["kind"] == "attention") == n and n > 0, stats
    return calls


@pytest.mark.parametrize("layout", ["auto", "windows"])
@pytest.mark.parametrize("img,window", [(64, 4), (40, 4)])
def test_timm_v2_uses_cosine_kernels(torch, opts, layout, img, window):
    timm_v2 = pytest.importorskip("timm.models.swin_transformer_v2")
    torch.manual_seed(0)
    model = timm_v2.SwinTransformerV2(img_size=img, patch_size=4, window_size=window,
                                      embed_dim=32, depths=(2, 2), num_heads=(2, 4),
                                      num_classes=10)
    sharpen_weights(model)
    assert _run(torch, model, torch.randn(2, 3, img, img), opts, layout=layout) == []


@pytest.mark.parametrize("layout", ["auto", "windows"])
def test_torchvision_v2_uses_cosine_kernels(torch, opts, layout):
    tv_swin = pytest.importorskip("torchvision.models.swin_transformer")
    torch.manual_seed(0)
    model = tv_swin.SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2],
                                    num_heads=[2, 4], window_size=[4, 4], num_classes=10,
                                    block=tv_swin.SwinTransformerBlockV2,
                                    downsample_layer=tv_swin.PatchMergingV2)
    sharpen_weights(model)
    assert _run(torch, model, torch.randn(2, 3, 40, 40), opts, layout=layout) == []


def test_transformers_swinv2_unshifted_uses_cosine_kernels(torch, opts):
    """Swinv2's unshifted blocks take the cosine kernel; its shifted blocks add
    the mask twice (region channels widen q and k): normalized in torch."""
    hf = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = hf.Swinv2Config(image_size=32, patch_size=4, window_size=4, embed_dim=32,
                             depths=[2, 2], num_heads=[2, 4])
    model = hf.Swinv2Model(config)
    sharpen_weights(model)
    calls = _run(torch, model, torch.randn(2, 3, 32, 32), opts)
    # one cosine_qk per shifted block that has a real shift (8x8 map: 1; 4x4: none)
    assert len(calls) == 1, calls


def test_grad_path_keeps_torch_normalization(torch):
    """With autograd recording the call the cosine kernel (no backward) is not chosen."""
    ls = torch.zeros(3, 1, 1, requires_grad=True)
    x = torch.zeros(2, 3)
    with torch.no_grad():
        assert projections.cosine_kernel_scale(ls, x) is ls
    assert projections.cosine_kernel_scale(ls, x) is None
    assert projections.cosine_kernel_scale(ls.detach(), x.requires_grad_()) is None
    assert projections.cosine_kernel_scale(ls.detach(), x.detach()) is not None
    assert projections.cosine_kernel_scale(None, x) is None


def test_cpb_table_cached_per_weight_version(torch, opts):
    """The MLP runs once per weight version: again after an in-place update
    (whose result must then match the model's own again), not otherwise."""
    timm_v2 = pytest.importorskip("timm.models.swin_transformer_v2")
    torch.manual_seed(0)
    model = timm_v2.SwinTransformerV2(img_size=32, patch_size=4, window_size=4, embed_dim=32,
                                      depths=(2,), num_heads=(2,), num_classes=10)
    sharpen_weights(model).eval()
    mlp = model.layers[0].blocks[0].attn.cpb_mlp
    runs = []
    mlp.register_forward_hook(lambda *args: runs.append(1))
    x = torch.randn(1, 3, 32, 32)
    st.swap_attention(model, **opts)
    try:
        with torch.inference_mode():
            model(x)
            model(x)
        assert len(runs) == 1
        with torch.no_grad():
            mlp[0].weight.mul_(1.5)
        with torch.inference_mode():
            got = model(x)
        assert len(runs) == 2
    finally:
        st.restore_attention(model)
    with torch.inference_mode():
        want = model(x)
    assert len(runs) == 3
    assert ((got - want).abs().max() / want.abs().max()).item() <= RTOL


def test_weights_converted_under_inference_mode(torch, opts):
    """Weights converted inside inference_mode are inference tensors, without a
    version counter: the table is computed per call rather than cached."""
    timm_v2 = pytest.importorskip("timm.models.swin_transformer_v2")
    torch.manual_seed(0)
    model = timm_v2.SwinTransformerV2(img_size=32, patch_size=4, window_size=4, embed_dim=32,
                                      depths=(2,), num_heads=(2,), num_classes=10)
    sharpen_weights(model)
    x = torch.randn(1, 3, 32, 32)
    st.swap_attention(model, mlp=False, **opts)
    try:
        with torch.inference_mode():
            model.double().float()
            got = model(x)
    finally:
        st.restore_attention(model)
    with torch.inference_mode():
        want = model(x)
    assert ((got - want).abs().max() / want.abs().max()).item() <= RTOL
