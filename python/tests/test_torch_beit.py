"""timm's BEiT (``timm.models.beit``) through ``swin_opt.torch.swap_attention``: the
class-token kernels (issue 28).

Small random BEiTs (``beit_base_patch16_224``'s class, 2 layers, a small embedding
and image) are swapped and compared with their own forward (float32, 1e-4
relative, as test_torch_models.py) and, in training, their own gradients (the
input's and every parameter's, 1e-4 relative to each gradient's largest
magnitude); every attention layer must have run the kernel (``patch_stats``).
Weights are redrawn by :func:`swin_opt.testing.sharpen_weights` (bias tables
N(0, 1), the class token's three rows included; BEiT zero-initialises its
tables and q/v biases, with which a comparison could not fail), so a wrong bias
shows far above the tolerance; the test also checks that the class rows matter.
``use_shared_rel_pos_bias`` models hand the model's one table to every block
(:mod:`swin_opt.torch.table_bias`).
"""

from __future__ import annotations

import warnings

import pytest

from swin_opt import torch as st
from swin_opt.testing import sharpen_weights, weighted_gradients

pytestmark = pytest.mark.aot

RTOL = 1e-4


@pytest.fixture(scope="module")
def timm_beit(torch):
    pytest.importorskip("timm")
    return pytest.importorskip("timm.models.beit")


def _beit(torch, img=32, patch=8, embed=32, heads=4, depth=2, **kw):
    import timm

    torch.manual_seed(0)
    model = timm.create_model("beit_base_patch16_224", pretrained=False, img_size=img,
                              patch_size=patch, embed_dim=embed, depth=depth, num_heads=heads,
                              num_classes=5, **kw)
    return sharpen_weights(model, seed=1)


def _rel_err(got, want):
    return ((got - want).abs().max() / want.abs().max()).item()


def _kernel_calls(model):
    return sum(s["kernel_calls"] for s in st.patch_stats(model) if s["kind"] == "attention")


@pytest.mark.parametrize("img,patch,heads,embed", [(32, 8, 4, 32), (48, 8, 2, 32),
                                                   (40, 8, 3, 15)])
def test_eval_matches_timm(torch, timm_beit, opts, img, patch, heads, embed):
    """4x4, 6x6 and 5x5 patch grids and their class token (head_dim 8, 16 and the
    odd 5), every layer on the kernel."""
    model = _beit(torch, img=img, patch=patch, heads=heads, embed=embed)
    x = torch.randn(2, 3, img, img)
    with torch.inference_mode():
        want = model(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing left unpatched, nothing patched-nothing
        assert st.swap_attention(model, mlp=False, **opts) == 2
    try:
        with torch.inference_mode():
            got = model(x)
        assert st.unpatched(model) == []
        assert _kernel_calls(model) == 2
        assert not any(s["fallback_calls"] for s in st.patch_stats(model))
    finally:
        assert st.restore_attention(model) == 2
    assert _rel_err(got, want) <= RTOL


def test_class_rows_matter(torch, timm_beit, opts):
    """Moving the class token's three table rows changes timm's output, and the
    swapped model follows it (so the comparison above covers them)."""
    model = _beit(torch)
    x = torch.randn(1, 3, 32, 32)
    with torch.inference_mode():
        before = model(x)
        for blk in model.blocks:
            blk.attn.relative_position_bias_table[-3:] += 2.0
        want = model(x)
    assert _rel_err(before, want) > 100 * RTOL
    st.swap_attention(model, mlp=False, **opts)
    try:
        with torch.inference_mode():
            got = model(x)
        assert _kernel_calls(model) == 2
    finally:
        st.restore_attention(model)
    assert _rel_err(got, want) <= RTOL


def _assert_same_gradients(got, want):
    """:func:`weighted_gradients`'s ``(out, dx, grads)`` within RTOL of timm's, every
    parameter that has a gradient in both."""
    (got_out, got_dx, got_grads), (want_out, want_dx, want_grads) = got, want
    assert _rel_err(got_out, want_out) <= RTOL
    assert _rel_err(got_dx, want_dx) <= RTOL
    assert set(got_grads) == set(want_grads)
    for name, g in want_grads.items():
        if g.abs().max() > 0:
            assert _rel_err(got_grads[name], g) <= RTOL, name


def test_training_gradients_match_timm(torch, timm_beit, opts):
    """Training mode (no dropout): the kernels' forward and backward, against timm's
    own gradients of the input and of every parameter (the tables included)."""
    model = _beit(torch)
    model.train()
    x = torch.randn(2, 3, 32, 32)

    def grads():
        return weighted_gradients(model, x)

    want_out, want_dx, want = grads()
    st.swap_attention(model, mlp=False, **opts)
    try:
        got_out, got_dx, got = grads()
        assert _kernel_calls(model) == 2
        assert not any(s["fallback_calls"] for s in st.patch_stats(model))
    finally:
        st.restore_attention(model)
    _assert_same_gradients((got_out, got_dx, got), (want_out, want_dx, want))
    table = "blocks.0.attn.relative_position_bias_table"
    assert want[table][-3:].abs().min() > 0  # the class rows' gradients are checked too


@pytest.mark.parametrize("own", [False, True])
def test_shared_table(torch, timm_beit, opts, own):
    """``use_shared_rel_pos_bias``: the model's one ``RelativePositionBias`` hands its
    table to every block's kernel (with ``own``, added to each block's own table).
    Eval output, and in training the input's and every parameter's gradients, the
    shared table's (the sum over the blocks, class rows included) among them."""
    model = _beit(torch, use_abs_pos_emb=False, use_rel_pos_bias=own,
                  use_shared_rel_pos_bias=True)
    x = torch.randn(2, 3, 32, 32)

    def grads():
        return weighted_gradients(model, x)

    model.eval()
    with torch.no_grad():
        want_eval = model(x)
    model.train()
    want_out, want_dx, want = grads()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert st.swap_attention(model, mlp=False, **opts) == 2
    try:
        model.eval()
        with torch.no_grad():
            got_eval = model(x)
        model.train()
        got_out, got_dx, got = grads()
        assert _kernel_calls(model) == 4
        assert not any(s["fallback_calls"] for s in st.patch_stats(model))
    finally:
        assert st.restore_attention(model) == 2
    assert _rel_err(got_eval, want_eval) <= RTOL
    _assert_same_gradients((got_out, got_dx, got), (want_out, want_dx, want))
    assert want["rel_pos_bias.relative_position_bias_table"][-3:].abs().min() > 0


def test_fallbacks_are_reported(torch, timm_beit, opts):
    """A ``shared_rel_pos_bias`` tensor (computed by unpatched code), BEiT without any
    relative position bias, and attention dropout in training run timm's forward,
    with the reason."""
    shared = _beit(torch, use_abs_pos_emb=False, use_rel_pos_bias=False,
                   use_shared_rel_pos_bias=True).eval()
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        want = shared(x)
    st.swap_attention(shared, mlp=False, **opts)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", st.FallbackWarning)
            with torch.no_grad():
                tokens = shared.patch_embed(x)
                tokens = torch.cat((shared.cls_token.expand(1, -1, -1), tokens), dim=1)
                bias = shared.rel_pos_bias.__class__.forward(shared.rel_pos_bias)  # a tensor
                got = shared.blocks[0](tokens, shared_rel_pos_bias=bias)
        reasons = {r for s in st.patch_stats(shared) for r in s["fallback_reasons"]}
        assert any("shared_rel_pos_bias is a tensor" in r for r in reasons), reasons
        assert got.shape == tokens.shape
    finally:
        st.restore_attention(shared)
    with torch.no_grad():
        assert torch.equal(shared(x), want)

    plain = _beit(torch, use_rel_pos_bias=False)
    st.swap_attention(plain, mlp=False, **opts)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", st.FallbackWarning)
            with torch.no_grad():
                plain(x)
        reasons = {r for s in st.patch_stats(plain) for r in s["fallback_reasons"]}
        assert any("no relative position bias" in r for r in reasons), reasons
    finally:
        st.restore_attention(plain)

    dropped = _beit(torch, attn_drop_rate=0.1)
    st.swap_attention(dropped, mlp=False, **opts)
    try:
        dropped.train()
        with warnings.catch_warnings():  # warned once per process and reason
            warnings.simplefilter("ignore", st.FallbackWarning)
            dropped(torch.randn(1, 3, 32, 32))
        reasons = {r for s in st.patch_stats(dropped) for r in s["fallback_reasons"]}
        assert any("attention dropout" in r for r in reasons), reasons
        assert _kernel_calls(dropped) == 0
    finally:
        st.restore_attention(dropped)
