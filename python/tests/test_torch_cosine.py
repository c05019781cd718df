"""SwinV2 swaps: the cosine kernels at inference on the CPU (issue 15), the
plain kernel with its backward in training (issue 26).

At inference the patched SwinV2 modules (timm ``swin_transformer_v2``,
torchvision ``SwinTransformerBlockV2``, transformers ``Swinv2``) hand q and k
to the cosine kernels as they are: ``cosine_qk`` (q and k normalized in
torch for the plain kernel) must not run, except where the kernel cannot take
the cosine form (transformers' doubled mask, whose region channels widen q
and k).  The training/grad path keeps ``cosine_qk`` (out of place there, so
that autograd differentiates it, ``logit_scale`` included) and the plain
kernel, whose operator's backward is the gradient kernel: every parameter's
gradient must be the original model's.  The continuous position bias table
is computed once per weight version.

Outputs are compared with the models' own forward at 1e-4 relative (as in
test_torch), with weights re-drawn large (swin_opt.testing.sharpen_weights:
SwinV2 logit scales up to 200, above the clamp at 100).
"""

from __future__ import annotations

import contextlib
import copy
import math
import warnings
from unittest import mock

import pytest

from swin_opt import torch as st
from swin_opt.torch import projections
from swin_opt.torch.fallback import FallbackWarning
from swin_opt.torch.patching import cosine_kernel_scale
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
        return real(q, k, logit_scale, head_axis)

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
        assert cosine_kernel_scale(ls, x) is ls
    assert cosine_kernel_scale(ls, x) is None
    assert cosine_kernel_scale(ls.detach(), x.requires_grad_()) is None
    assert cosine_kernel_scale(ls.detach(), x.detach()) is not None
    assert cosine_kernel_scale(None, x) is None


@pytest.mark.parametrize("grad", [False, True])
def test_cosine_qk_is_swinv2s_cosine_attention(torch, grad):
    """The prepared q/k's product is SwinV2's scaled cosine (logit scales on both
    sides of the clamp at log 100, a zero row: F.normalize's eps): in place
    without autograd, out of place with it, where autograd gives dq, dk and
    dlogit_scale as for the frameworks' own formula."""
    F = torch.nn.functional
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(2, 3, 5, 8, generator=g, dtype=torch.float64) for _ in range(2))
    q[0, 0, 0] = 0
    ls = torch.tensor([0.5, 4.0, 5.2]).reshape(3, 1, 1)  # float32, as the frameworks
    leaves = [t.clone().requires_grad_(grad) for t in (q, k, ls)]
    q0, k0 = leaves[0].clone(), leaves[1].clone()
    got_q, got_k = projections.cosine_qk(q0, k0, leaves[2], head_axis=1)
    assert (got_q is q0 and got_k is k0) == (not grad)  # in place only without autograd
    got = got_q @ got_k.transpose(-2, -1)
    want_leaves = [t.clone().requires_grad_(grad) for t in (q, k, ls)]
    wq, wk, wls = want_leaves
    want = (F.normalize(wq, dim=-1) @ F.normalize(wk, dim=-1).transpose(-2, -1)
            * torch.clamp(wls, max=math.log(1.0 / 0.01)).exp().double())
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)
    if grad:
        w = torch.randn(got.shape, generator=g, dtype=torch.float64)
        (got * w).sum().backward()
        (want * w).sum().backward()
        for a, b in zip(leaves, want_leaves):
            assert torch.allclose(a.grad, b.grad, rtol=1e-10, atol=1e-12)
        assert leaves[2].grad[2].item() == 0 and leaves[2].grad[1].item() != 0  # the clamp


def test_cpb_table_cached_per_weight_version(torch, opts):
    """The MLP runs once per weight version: again after an in-place update
    and after a conversion, which replaces the weights' memory but keeps their
    tensors and versions (whose result must then match the model's own again),
    not otherwise."""
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
            model(x)
        assert len(runs) == 2
        with torch.no_grad():
            mlp.bfloat16()
            mlp.float()
        with torch.inference_mode():
            got = model(x)
        assert len(runs) == 3
    finally:
        st.restore_attention(model)
    with torch.inference_mode():
        want = model(x)
    assert len(runs) == 4
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


# --------------------------------------------------------------------------- #
# Training (float32 on the CPU): the plain kernel and its backward
# --------------------------------------------------------------------------- #
#: forward and per-parameter gradient tolerance (relative to the largest entry of
#: the original's; 1e-3 floors gradients that are rounding noise, such as the
#: bias of the last layer of a position-bias MLP, which softmax cancels)
GRAD_RTOL = 2e-4


def _train_step(torch, model, x, train=True):
    model.train(train)
    model.zero_grad()
    y = _logits(model(x))
    y.square().mean().backward()
    return y.detach(), {n: p.grad for n, p in model.named_parameters()
                        if p.requires_grad}


def _assert_trains_like_original(torch, original, x, opts, train=True, **swap):
    """Swapped vs original: forward and every parameter's gradient, the swapped
    model's attention on the kernels (calls > 0, no fallback, no warning).
    Returns the original's gradients."""
    model = copy.deepcopy(original)
    n = st.swap_attention(model, mlp=False, **swap, **opts)
    want_y, want = _train_step(torch, original, x, train)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        got_y, got = _train_step(torch, model, x, train)
    stats = [s for s in st.patch_stats(model) if s["kind"] == "attention"]
    assert n > 0 and sum(s["kernel_calls"] for s in stats) >= n, stats
    assert not any(s["fallback_calls"] for s in stats), stats
    assert ((got_y - want_y).abs().max() / want_y.abs().max()).item() <= GRAD_RTOL
    assert set(got) == set(want)
    for name, g in want.items():
        assert got[name] is not None, name
        err = (got[name] - g).abs().max().item() / max(g.abs().max().item(), 1e-3)
        assert err <= GRAD_RTOL, (name, err)
    return want


def _timm_v2(torch, img=32, window=4):
    timm_v2 = pytest.importorskip("timm.models.swin_transformer_v2")
    torch.manual_seed(0)
    model = timm_v2.SwinTransformerV2(img_size=img, patch_size=4, window_size=window,
                                      embed_dim=32, depths=(2, 2), num_heads=(2, 4),
                                      num_classes=10, drop_path_rate=0.0)
    return sharpen_weights(model)


@pytest.mark.parametrize("layout", ["auto", "windows"])
def test_timm_v2_fine_tuning_only_the_projections_keeps_the_plain_kernel(torch, opts,
                                                                         layout):
    """Only the attention's qkv weights trainable (logit scales, cpb MLP and
    everything before frozen, so neither the input nor logit_scale requires
    grad): the call is still differentiated, so it must not take the cosine
    kernel, which has no backward."""
    model = _timm_v2(torch)
    for name, p in model.named_parameters():
        p.requires_grad_(name.endswith("attn.qkv.weight"))
    want = _assert_trains_like_original(torch, model, torch.randn(2, 3, 32, 32), opts,
                                        layout=layout)
    assert want and all(name.endswith("attn.qkv.weight") for name in want)


@pytest.mark.parametrize("layout", ["auto", "windows"])
def test_timm_v2_training_gradients_match_the_original(torch, opts, layout):
    """Every parameter's gradient: logit_scale (heads on both sides of the clamp:
    sharpen_weights), the cpb MLP (through the table's gradient), q/v bias, qkv,
    proj, and everything before the attention (through dq, dk, dv)."""
    want = _assert_trains_like_original(torch, _timm_v2(torch), torch.randn(2, 3, 32, 32),
                                        opts, layout=layout)
    ls = want["layers.0.blocks.0.attn.logit_scale"]
    assert ls.abs().max() > 1e-3  # the logit scale's gradient is compared, not zero


def test_torchvision_v2_training_gradients_match_the_original(torch, opts):
    tv_swin = pytest.importorskip("torchvision.models.swin_transformer")
    torch.manual_seed(0)
    model = tv_swin.SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2],
                                    num_heads=[2, 4], window_size=[4, 4], num_classes=10,
                                    stochastic_depth_prob=0.0,
                                    block=tv_swin.SwinTransformerBlockV2,
                                    downsample_layer=tv_swin.PatchMergingV2)
    _assert_trains_like_original(torch, sharpen_weights(model), torch.randn(2, 3, 32, 32),
                                 opts)


def test_transformers_swinv2_training_gradients_match_the_original(torch, opts):
    """transformers' shifted blocks (the mask added twice: region channels) too."""
    hf = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = hf.Swinv2Config(image_size=32, patch_size=4, window_size=4, embed_dim=32,
                             depths=[2, 2], num_heads=[2, 4], drop_path_rate=0.0)
    _assert_trains_like_original(torch, sharpen_weights(hf.Swinv2Model(config)),
                                 torch.randn(2, 3, 32, 32), opts)


def _timm_v2_cr(torch):
    cr = pytest.importorskip("timm.models.swin_transformer_v2_cr")
    torch.manual_seed(0)
    model = cr.SwinTransformerV2Cr(img_size=(32, 32), patch_size=4, window_size=4,
                                   embed_dim=32, depths=(2, 2), num_heads=(2, 4),
                                   num_classes=10, drop_path_rate=0.0)
    return sharpen_weights(model)


def test_timm_v2_cr_gradients_in_eval_mode_match_the_original(torch, opts):
    """swinv2_cr under autograd in eval mode (its meta MLP without dropout)."""
    _assert_trains_like_original(torch, _timm_v2_cr(torch), torch.randn(2, 3, 32, 32), opts,
                                 train=False)


def test_timm_v2_cr_training_mode_falls_back_for_the_meta_mlp_dropout(torch, opts,
                                                                       monkeypatch):
    """In training mode swinv2_cr's meta MLP drops hidden units per (i, j) pair:
    no table holds that bias, so the modules run their own forward, saying why."""
    from swin_opt.torch import fallback

    monkeypatch.setattr(fallback, "warned_reasons", set())
    model = _timm_v2_cr(torch)
    st.swap_attention(model, mlp=False, **opts)
    with pytest.warns(FallbackWarning, match="meta MLP's dropout"):
        _train_step(torch, model, torch.randn(1, 3, 32, 32))
    stats = [s for s in st.patch_stats(model) if s["kind"] == "attention"]
    assert sum(s["kernel_calls"] for s in stats) == 0
    reasons = {r for s in stats for r in s["fallback_reasons"]}
    assert any("meta MLP's dropout" in r for r in reasons), reasons
