"""PyTorch integration (swin_opt.torch).

* Shift-mask identification (``match_shift_mask``): NumPy only, always runs.
* Tensor calls: zero-copy on CPU torch tensors (needs torch and swin-aot).
* ``swap_attention`` on small random Swin models of timm, torchvision and
  transformers (each skipped when the framework is not importable): the
  model's output with the kernels must match its own forward to 1e-4
  relative (float32 kernels: ~1e-6 is typical), and every attention layer
  must actually have run the kernel (checked through ``patch_stats``).

Weights are re-drawn with larger variances than the frameworks' inits
(bias tables ~ N(0, 1), linear weights ~ N(0, 4/fan_in)) so that the
attention is sharp and a missing/misplaced bias or mask would show up far
above the tolerance.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from swin_opt import reference as ref
from swin_opt import torch as st
from swin_opt.testing import sharpen_weights

RTOL = 1e-4


# --------------------------------------------------------------------------- #
# The package layout (no torch needed)
# --------------------------------------------------------------------------- #
def test_public_names_import_without_torch():
    """swin_opt.torch is a package split by concern; its public names stay where
    they were, and every submodule imports without torch."""
    import importlib
    import importlib.util

    for name in ("tracing", "fallback", "tensors", "masks", "ops", "projections", "patching",
                 "windows", "timm_patches", "torchvision_patches", "transformers_patches",
                 "maxvit_patches", "swap", "warmup"):
        importlib.import_module(f"swin_opt.torch.{name}")
    for name in ("attention", "compile_kernel", "match_shift_mask", "swap_attention",
                 "restore_attention", "patch_stats", "KernelUnavailable", "NO_MASK",
                 "warmup", "build_kernels"):
        assert hasattr(st, name) and name in st.__all__
    if importlib.util.find_spec("torch") is None:
        with pytest.raises(ImportError, match="needs PyTorch"):
            st.swap_attention(object())


def test_swap_attention_refuses_gpu_targets():
    pytest.importorskip("torch")
    with pytest.raises(ValueError, match="target must be 'cpu'"):
        st.swap_attention(object(), target="nvptx")


# --------------------------------------------------------------------------- #
# Mask identification (no torch needed)
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("res,window,shift", [
    ((56, 56), (7, 7), (3, 3)),
    ((14, 14), (7, 7), (3, 3)),
    ((16, 12), (4, 4), (2, 2)),
    ((12, 16), (4, 4), (1, 3)),
    ((12, 16), (4, 4), (0, 2)),   # shift on one axis only
    ((8, 30), (4, 6), (2, 3)),    # non-square window
    ((21, 21), (7, 7), (3, 3)),   # padded 16x16 map (both conventions mask the padded map)
])
def test_match_shift_mask(res, window, shift):
    mask = ref.shift_mask(res, window, shift)
    assert st.match_shift_mask(mask, window) == (res, shift)
    assert st.match_shift_mask(mask.astype(np.float32), window) == (res, shift)


def test_match_shift_mask_rejects():
    w = (4, 4)
    assert st.match_shift_mask(np.zeros((4, 16, 16)), w) is st.NO_MASK
    assert st.match_shift_mask(np.random.default_rng(0).standard_normal((4, 16, 16)), w) is None
    mask = ref.shift_mask((8, 8), w, 2)
    assert st.match_shift_mask(mask * 2, w) is None          # not Swin's -100
    assert st.match_shift_mask(mask[:, :, :8], w) is None     # wrong shape
    assert st.match_shift_mask(mask, (2, 8)) is None          # wrong window
    # a map one window high with a shift on that axis (timm's always_partition):
    # a kernel zeroes that shift (Swin's small-map rule), so it cannot reproduce it
    assert st.match_shift_mask(ref.shift_mask((4, 8), w, 2), w) is None


# --------------------------------------------------------------------------- #
# Fixtures
# --------------------------------------------------------------------------- #
def _logits(y):
    return getattr(y, "logits", y)


def _rel_err(got, want):
    return ((got - want).abs().max() / want.abs().max()).item()


def _attention_stats(model):
    """patch_stats of the attention patches (swap_attention swaps the blocks' MLPs
    too; test_mlp_swap.py checks those)."""
    return [s for s in st.patch_stats(model) if s["kind"] == "attention"]


def _compare_model(torch, model, x, n_layers, opts, *, layout="auto"):
    """Swap, run, compare with the model's own output; return the stats."""
    model.eval()
    with torch.inference_mode():
        want = _logits(model(x))
    assert st.swap_attention(model, layout=layout, **opts) == n_layers
    try:
        with torch.inference_mode():
            got = _logits(model(x))
        stats = st.patch_stats(model)
    finally:
        assert st.restore_attention(model) == n_layers
    err = _rel_err(got, want)
    assert err <= RTOL, err
    # (the blocks' MLPs are swapped too: test_mlp_swap.py checks them)
    used = sum(s["kernel_calls"] for s in stats if s["kind"] == "attention")
    fallbacks = {r: c for s in stats for r, c in s["fallback_reasons"].items()}
    assert used == n_layers and not fallbacks, (used, fallbacks)
    return stats


# --------------------------------------------------------------------------- #
# Tensor calls
# --------------------------------------------------------------------------- #
def _inputs(torch, shape, heads, window, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(shape, generator=gen) for _ in range(3))
    table = torch.randn((ref.table_rows(window), heads), generator=gen)
    return q, k, v, table


def _expected(q, k, v, table, window, mask=None):
    bias = ref.lookup(table.numpy(), window)
    return ref.window_attention(q.numpy(), k.numpy(), v.numpy(), bias, mask)


@pytest.mark.aot
def test_attention_zero_copy(torch, build):
    window = (4, 4)
    kern = build(window, 2, 8, resolution=(8, 8), shift=2)
    q, k, v, table = _inputs(torch, (8, 2, 16, 8), 2, window)
    out = torch.empty(8, 16, 16)
    got = st.attention(q, k, v, table, kern, out=out)
    assert got is out                                   # written in place
    want = _expected(q, k, v, table, window, ref.shift_mask((8, 8), window, 2))
    assert np.abs(out.numpy() - want).max() <= 1e-5 * max(1, np.abs(want).max())

    # inputs are read in place: a view into a bigger buffer (storage offset) ...
    big = torch.randn(3, 8, 2, 16, 8)
    got = st.attention(big[0], big[1], big[2], table, kern)
    want = _expected(big[0], big[1], big[2], table, window, ref.shift_mask((8, 8), window, 2))
    assert np.abs(got.numpy() - want).max() <= 1e-5 * max(1, np.abs(want).max())
    # ... and an in-place update of it is seen by the next call (no stale copy)
    big[2].mul_(-1.0)
    again = st.attention(big[0], big[1], big[2], table, kern)
    assert torch.allclose(again, -got, atol=1e-6)

    # the Kernel object itself takes and returns tensors, too
    res = kern(q, k, v, table)
    assert isinstance(res, torch.Tensor) and torch.equal(res, out)


@pytest.mark.aot
def test_attention_compiles_for_shape(torch, aot_path, kernel_cache):
    q, k, v, table = _inputs(torch, (5, 3, 9, 4), 3, (3, 3))
    got = st.attention(q, k, v, table, cache_dir=kernel_cache)      # window 3x3 from N=9
    want = _expected(q, k, v, table, (3, 3))
    assert np.abs(got.numpy() - want).max() <= 1e-5 * max(1, np.abs(want).max())
    q, k, v, table = _inputs(torch, (5, 3, 8, 4), 3, (2, 4))
    with pytest.raises(ValueError, match="window"):
        st.attention(q, k, v, table, cache_dir=kernel_cache)       # N=8 is not square
    got = st.attention(q, k, v, table, window=(2, 4), cache_dir=kernel_cache)
    want = _expected(q, k, v, table, (2, 4))
    assert np.abs(got.numpy() - want).max() <= 1e-5 * max(1, np.abs(want).max())


@pytest.mark.aot
def test_attention_errors(torch, build):
    window = (4, 4)
    kern = build(window, 2, 8)
    q, k, v, table = _inputs(torch, (4, 2, 16, 8), 2, window)
    with pytest.raises(ValueError, match="contiguous"):
        st.attention(q.transpose(2, 3).contiguous().transpose(2, 3), k, v, table, kern)
    with pytest.raises(TypeError, match="dtype"):
        st.attention(q.double(), k.double(), v.double(), table.double(), kern)
    with pytest.raises(TypeError, match="torch.Tensor"):
        st.attention(q.numpy(), k, v, table, kern)
    with pytest.raises(TypeError, match="compiled for"):
        st.attention(q.half(), k.half(), v.half(), table.half(), kern)
    qg = q.clone().requires_grad_()
    with pytest.raises(RuntimeError, match="grad"):
        st.attention(qg, k, v, table, kern)
    with torch.no_grad():
        st.attention(qg, k, v, table, kern)
    with pytest.raises(ValueError, match="shape"):
        st.attention(q, k, v, table, kern, out=torch.empty(4, 16, 15))


# --------------------------------------------------------------------------- #
# timm
# --------------------------------------------------------------------------- #
@pytest.fixture(scope="module")
def timm_swin(torch):
    pytest.importorskip("timm")
    return pytest.importorskip("timm.models.swin_transformer")


def _timm_model(timm_swin, torch, img, window, depths=(2, 2), heads=(2, 4), **kw):
    torch.manual_seed(0)
    model = timm_swin.SwinTransformer(img_size=img, patch_size=4, window_size=window,
                                      embed_dim=32, depths=depths, num_heads=heads,
                                      num_classes=10, **kw)
    return sharpen_weights(model).eval()


@pytest.mark.parametrize("layout", ["auto", "windows"])
@pytest.mark.parametrize("img,window", [
    (56, 7),   # 14x14 (shift 3) then 7x7 (= window: shift dropped)
    (64, 4),   # 16x16, 8x8
    (40, 4),   # 10x10 and 5x5: padded (timm shifts, then pads)
    (48, 7),   # 12x12 padded to 14, 6x6: window shrinks to the map
])
@pytest.mark.aot
def test_timm_model(torch, timm_swin, opts, img, window, layout):
    model = _timm_model(timm_swin, torch, img, window)
    stats = _compare_model(torch, model, torch.randn(2, 3, img, img), 4, opts, layout=layout)
    block_level = [s for s in stats if s["method"] == "_attn"]
    assert len(block_level) == (4 if layout == "auto" else 0)


@pytest.mark.aot
def test_timm_dynamic_size(torch, timm_swin, opts):
    model = _timm_model(timm_swin, torch, 56, 4, dynamic_img_size=True)
    for size in (56, 64, 44):     # masks are built per input size; kernels per resolution
        _compare_model(torch, model, torch.randn(1, 3, size, size), 4, opts)


@pytest.mark.aot
def test_timm_window_attention_module(torch, timm_swin, opts):
    """A bare WindowAttention: the mask it gets decides the kernel."""
    attn = sharpen_weights(timm_swin.WindowAttention(32, num_heads=4, window_size=4)).eval()
    x = torch.randn(2 * 12, 16, 32)
    mask = torch.from_numpy(ref.shift_mask((12, 16), (4, 4), 2)).float()
    with torch.no_grad():
        want_masked, want_plain = attn(x, mask), attn(x)
    assert st.swap_attention(attn, **opts) == 1
    odd = torch.randn(12, 16, 16)    # not a Swin mask: the original forward runs
    with torch.no_grad():
        got_masked, got_plain, got_odd = attn(x, mask), attn(x), attn(x, odd)
    (stats,) = st.patch_stats(attn)
    assert st.restore_attention(attn) == 1
    with torch.no_grad():
        assert torch.equal(got_odd, attn(x, odd))
    assert stats["kernel_calls"] == 2 and stats["fallback_calls"] == 1, stats
    assert _rel_err(got_masked, want_masked) <= RTOL
    assert _rel_err(got_plain, want_plain) <= RTOL
    assert _rel_err(want_masked, want_plain) > 10 * RTOL   # the mask matters


@pytest.mark.aot
def test_timm_always_partition_virtual_windows(torch, timm_swin, opts):
    # 48/4 -> 12x12, 6x6, 3x3 maps with 7x7 windows always partitioned: the
    # shifted blocks of the two small stages split their single window with a
    # mask no token-layout kernel reproduces (small-map rule), so the block's
    # _attn falls back and WindowAttention runs a window-layout kernel on a
    # virtual map two windows wide (swin_opt.torch.windows); the rest use
    # token-layout kernels.
    model = _timm_model(timm_swin, torch, 48, 7, depths=(2, 2, 2), heads=(2, 4, 4),
                        always_partition=True)
    x = torch.randn(1, 3, 48, 48)
    with torch.inference_mode():
        want = model(x)
    assert st.swap_attention(model, **opts) == 6
    with torch.inference_mode():
        got = model(x)
    stats = {(s["name"], s["method"]): s for s in _attention_stats(model)}
    st.restore_attention(model)
    assert _rel_err(got, want) <= RTOL
    for stage in (1, 2):
        block = stats[(f"layers.{stage}.blocks.1", "_attn")]
        assert block["fallback_calls"] == 1 and block["kernel_calls"] == 0, block
        attn = stats[(f"layers.{stage}.blocks.1.attn", "forward")]
        assert attn["fallback_calls"] == 0 and attn["kernel_calls"] == 1, attn
    assert sum(s["kernel_calls"] for s in stats.values()) == 6


@pytest.mark.aot
def test_timm_training_runs_the_kernels(torch, timm_swin, opts):
    """Training (float32 Swin V1) runs the kernels forward and backward; what the
    backward kernels cannot do falls back with its reason: a padded map (the
    padding rows' gradient), here at 40x40 (10x10 and 5x5 maps, window 4)."""
    model = _timm_model(timm_swin, torch, 32, 4)
    x = torch.randn(1, 3, 32, 32)
    st.swap_attention(model, **opts)
    try:
        model.train()
        model(x).sum().backward()
        assert model.layers[0].blocks[0].attn.relative_position_bias_table.grad is not None
        assert sum(s["kernel_calls"] for s in _attention_stats(model)) == 4
        assert not any(s["fallback_calls"] for s in _attention_stats(model))
    finally:
        st.restore_attention(model)
    padded = _timm_model(timm_swin, torch, 40, 4)
    st.swap_attention(padded, **opts)
    try:
        padded.train()
        padded(torch.randn(1, 3, 40, 40)).sum().backward()
        reasons = {r for s in st.patch_stats(padded) for r in s["fallback_reasons"]}
        assert any("padded map" in r for r in reasons), reasons
        st.swap_attention(padded, fallback=False, **opts)
        with pytest.raises(st.KernelUnavailable, match="padded map"):
            padded(torch.randn(1, 3, 40, 40))
        with torch.no_grad():
            padded(torch.randn(1, 3, 40, 40))
    finally:
        st.restore_attention(padded)


@pytest.mark.aot
def test_timm_restore(torch, timm_swin, opts):
    model = _timm_model(timm_swin, torch, 32, 4)
    blk = model.layers[0].blocks[1]
    assert st.swap_attention(model, **opts) == 4
    assert "forward" in vars(blk.attn) and "_attn" in vars(blk)
    assert st.swap_attention(model, layout="windows", **opts) == 4      # re-patch
    assert "_attn" not in vars(blk)
    assert st.restore_attention(model) == 4
    assert "forward" not in vars(blk.attn) and st.patch_stats(model) == []
    assert st.restore_attention(model) == 0


@pytest.mark.aot
def test_timm_bfloat16(torch, timm_swin, opts):
    model = _timm_model(timm_swin, torch, 32, 4)
    x = torch.randn(2, 3, 32, 32)
    with torch.inference_mode():
        want = model(x)                         # float32 model as the yardstick
    model = model.to(torch.bfloat16)
    with torch.inference_mode():
        torch_bf16 = model(x.bfloat16()).float()
    st.swap_attention(model, **opts)
    with torch.inference_mode():
        got = model(x.bfloat16()).float()
    stats = _attention_stats(model)
    st.restore_attention(model)
    assert sum(s["kernel_calls"] for s in stats) == 4
    # the kernel's bf16 error is of the order of torch's own bf16 error
    assert _rel_err(got, want) <= 2 * _rel_err(torch_bf16, want) + 2e-2


@pytest.mark.parametrize("img,window", [
    (64, 4),   # 16x16 (shift 2), 8x8
    (40, 4),   # 10x10 and 5x5: padded (timm shifts, then pads)
    (56, 7),   # 14x14, 7x7
])
@pytest.mark.parametrize("layout", ["auto", "windows"])
@pytest.mark.aot
def test_timm_v2_model(torch, opts, img, window, layout):
    """SwinV2: cosine attention and the continuous position bias (cpb_mlp)."""
    pytest.importorskip("timm")
    timm_v2 = pytest.importorskip("timm.models.swin_transformer_v2")
    torch.manual_seed(0)
    model = timm_v2.SwinTransformerV2(img_size=img, patch_size=4, window_size=window,
                                      embed_dim=32, depths=(2, 2), num_heads=(2, 4),
                                      num_classes=10)
    sharpen_weights(model).eval()
    stats = _compare_model(torch, model, torch.randn(2, 3, img, img), 4, opts, layout=layout)
    block_level = [s for s in stats if s["method"] == "_attn"]
    assert len(block_level) == (4 if layout == "auto" else 0)


# --------------------------------------------------------------------------- #
# torchvision
# --------------------------------------------------------------------------- #
@pytest.fixture(scope="module")
def tv_swin(torch):
    pytest.importorskip("torchvision")
    return pytest.importorskip("torchvision.models.swin_transformer")


@pytest.mark.parametrize("layout", ["auto", "windows"])
@pytest.mark.parametrize("hw,window,depths", [
    ((56, 56), (7, 7), (2, 2)),
    ((40, 40), (4, 4), (2, 2)),      # 10x10, 5x5: padded (pad, then shift)
    ((48, 48), (7, 7), (2, 2, 2)),   # 12x12, 6x6 and 3x3 maps padded up to one 7x7 window
    ((44, 60), (4, 6), (2, 2)),      # non-square map and window
])
@pytest.mark.aot
def test_torchvision_model(torch, tv_swin, opts, hw, window, depths, layout):
    torch.manual_seed(0)
    model = tv_swin.SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=list(depths),
                                    num_heads=[2, 4, 4][:len(depths)], window_size=list(window),
                                    num_classes=10)
    sharpen_weights(model)
    _compare_model(torch, model, torch.randn(2, 3, *hw), 2 * len(depths), opts, layout=layout)


@pytest.mark.parametrize("layout", ["auto", "windows"])
@pytest.mark.parametrize("hw,window", [
    ((32, 32), (4, 4)),   # 8x8 then 4x4 (= window: shift dropped)
    ((40, 40), (4, 4)),   # 10x10, 5x5: padded (pad, then shift)
])
@pytest.mark.aot
def test_torchvision_v2_model(torch, tv_swin, opts, hw, window, layout):
    """SwinV2: cosine attention and the continuous position bias (cpb_mlp)."""
    torch.manual_seed(0)
    model = tv_swin.SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2],
                                    num_heads=[2, 4], window_size=list(window), num_classes=10,
                                    block=tv_swin.SwinTransformerBlockV2,
                                    downsample_layer=tv_swin.PatchMergingV2)
    sharpen_weights(model)
    _compare_model(torch, model, torch.randn(2, 3, *hw), 4, opts, layout=layout)


# --------------------------------------------------------------------------- #
# Hugging Face transformers (4.x SwinSelfAttention and >= 5 SwinAttention)
# --------------------------------------------------------------------------- #
@pytest.fixture(scope="module")
def hf(torch):
    return pytest.importorskip("transformers")


@pytest.mark.parametrize("img,window", [(56, 7), (64, 4), (40, 4)])
@pytest.mark.aot
def test_transformers_model(torch, hf, opts, img, window):
    torch.manual_seed(0)
    config = hf.SwinConfig(image_size=img, patch_size=4, window_size=window, embed_dim=32,
                           depths=[2, 2], num_heads=[2, 4], num_labels=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = hf.SwinForImageClassification(config)
    sharpen_weights(model)
    _compare_model(torch, model, torch.randn(2, 3, img, img), 4, opts)


# --------------------------------------------------------------------------- #
# The projections around the kernels (oneDNN for float32 in eager mode)
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", [(37, 24), (3, 41, 24)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_projection_matches_linear(torch, dtype, shape, with_bias):
    from swin_opt.torch.projections import linear, project

    dt = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(0)
    layer = torch.nn.Linear(24, 56, bias=with_bias).to(dt)
    x = torch.randn(*shape, generator=gen).to(dt)
    with torch.inference_mode():
        want = torch.nn.functional.linear(x, layer.weight, layer.bias)
        for got in (linear(x, layer.weight, layer.bias), project(layer, x)):
            assert got.shape == want.shape and got.dtype == want.dtype
            tol = 1e-5 if dtype == "float32" else 2e-2
            assert (got - want).abs().max().item() <= tol * want.abs().max().item()


def test_projection_calls_other_modules(torch):
    """A projection that is not a plain nn.Linear (quantized, LoRA, ...) is called as is."""
    from swin_opt.torch.projections import project

    class Doubling(torch.nn.Linear):
        def forward(self, x):
            return 2 * super().forward(x)

    layer = Doubling(8, 8)
    x = torch.randn(4, 8)
    with torch.inference_mode():
        assert torch.equal(project(layer, x), layer(x))
