"""MONAI's Swin-UNETR through ``swin_opt.torch.swap_attention`` (issue 28):
``SwinTransformerBlock.forward_part1`` in the token layout (norm1, then pad,
roll and partition inside the kernel) and ``WindowAttention`` in the window
layout, 2-D and 3-D.

Models are small ``SwinUNETR`` of the real class, every parameter re-drawn
(:func:`swin_opt.testing.sharpen_weights`: bias tables ~ N(0, 1), where MONAI
starts them near zero).  The configurations make every case of MONAI's block
matter: non-cubic windows on non-cubic maps not a multiple of the window
(padding and shift on the same axes, MONAI's pad-then-shift order), a last
stage where the map is not larger than the window along the leading axis
(MONAI's ``get_window_size`` shrinks the window and zeroes the shift; its bias
is then rows of the full table) and along the last (a window the map's own
size, no shift).  Tolerances: forward 1e-4 of the largest output, gradients
(of the Swin encoder, see :func:`test_model_gradients`) 1e-4 of each
gradient's largest entry (float32, against MONAI's own forward and backward).
Every attention layer must have run its kernel.
"""

from __future__ import annotations

import copy
import warnings

import pytest

from swin_opt import torch as st
from swin_opt.testing import sharpen_weights

RTOL = 1e-4

#: name -> (SwinUNETR arguments, input shape [B, C, *map])
MODELS = {
    # maps 16x32x16 .. 2x4x2 against a 3x3x2 window: D and H padded at every stage
    # (18, 33; 9, 18; 6, 9; 6), shift (1, 1, 1); the last stage shrinks the window
    # to 2x3x2 (D: sub-table of the full bias table) and shifts H only
    "3d": (dict(spatial_dims=3, window_size=(3, 3, 2)), (1, 1, 32, 64, 32)),
    # maps 16x32x16 .. 2x4x2, multiples of a 2x2x2 window: the token layout's
    # backward (training elsewhere runs the window layout on maps torch pads); the
    # last stage's map is the window along D and W (no shift there)
    "3d_unpadded": (dict(spatial_dims=3, window_size=2), (1, 1, 32, 64, 32)),
    # maps 32x48 .. 4x6 against a 3x5 window: padded on both axes at every stage
    "2d": (dict(spatial_dims=2, window_size=(3, 5)), (2, 1, 64, 96)),
}

#: attention layers of a SwinUNETR with the default depths (2, 2, 2, 2)
LAYERS = 8


@pytest.fixture(scope="module")
def monai(torch):
    monai = pytest.importorskip("monai")
    pytest.importorskip("monai.networks.nets.swin_unetr")
    pytest.importorskip("einops")  # SwinUNETR's rearrange
    return monai


def _model(monai, torch, name, **extra):
    from monai.networks.nets import SwinUNETR

    torch.manual_seed(0)
    cfg = dict(MODELS[name][0], **extra)
    return sharpen_weights(SwinUNETR(in_channels=1, out_channels=2, feature_size=24,
                                     num_heads=(3, 6, 12, 24), **cfg))


def _input(torch, name):
    gen = torch.Generator().manual_seed(1)
    return torch.randn(MODELS[name][1], generator=gen)


def _rel_err(got, want):
    return ((got - want).abs().max() / want.abs().max()).item()


def _attention_stats(model):
    return [s for s in st.patch_stats(model) if s["kind"] == "attention"]


def _kernel_calls(model):
    """Kernel calls of each attention layer (a block's and its WindowAttention's,
    which runs only where the block falls back); no call may fall back."""
    calls = {}
    for s in _attention_stats(model):
        assert s["fallback_calls"] == 0, s
        layer = s["name"].removesuffix(".attn")
        calls[layer] = calls.get(layer, 0) + s["kernel_calls"]
    return calls


def _check_all_kernel(model, layers=LAYERS):
    calls = _kernel_calls(model)
    assert len(calls) == layers and all(n >= 1 for n in calls.values()), calls


# --------------------------------------------------------------------------- #
# MONAI's helpers against the kernel's conventions (no kernel)
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("padded, window, shift", [
    ((6, 9, 4), (3, 3, 2), (1, 1, 1)), ((6, 10), (3, 5), (1, 2)),
    ((6, 9, 4), (2, 3, 2), (0, 1, 0)), ((6, 9, 4), (2, 3, 2), (0, 0, 0))])
def test_region_labels_give_monais_mask(torch, monai, padded, window, shift):
    """The mask :class:`MonaiBlock` accepts (its region labels) is MONAI's
    ``compute_mask``, also with a zero shift on some axes; a changed mask is not."""
    from monai.networks.nets.swin_unetr import compute_mask

    from swin_opt.torch import monai_patches as mp

    want = compute_mask(list(padded), window, shift, None)
    assert mp._is_shift_mask(want, padded, window, shift)
    assert mp.match_mask(want, window) == ((padded, shift) if any(shift) else None)
    changed = want.clone()
    changed[-1, 0, -1] = -100.0 - changed[-1, 0, -1]
    assert not mp._is_shift_mask(changed, padded, window, shift)
    assert mp.match_mask(changed, window) is None


def test_monai_window_is_get_window_size(monai):
    from monai.networks.nets.swin_unetr import get_window_size

    from swin_opt.torch.monai_patches import monai_window

    for size in [(2, 4, 2), (3, 3, 9), (7, 8, 1), (16, 32)]:
        window, shift = (3, 3, 2)[:len(size)], (1, 1, 1)[:len(size)]
        assert monai_window(window, shift, size) == get_window_size(size, window, shift)


@pytest.mark.parametrize("size, window, shift", [
    ((5, 7), (3, 2), (1, 1)), ((4, 5, 7), (2, 3, 3), (1, 0, 1)), ((4, 6), (2, 3), (0, 0))])
def test_pad_shift_windows_is_the_reference_partition(torch, size, window, shift):
    """The windows :func:`~swin_opt.torch.windows.pad_shift_windows` hands to the
    kernel are the NumPy reference's pad, cyclic shift and partition of the map, and
    what comes back is put where MONAI's reverse, unroll and crop put it."""
    import numpy as np

    from swin_opt import reference as ref
    from swin_opt.torch.windows import pad_shift_windows

    x = torch.randn(2, *size, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    seen = []

    def attend(windows):
        seen.append(windows.clone())
        return torch.cat([windows, 2 * windows], dim=-1)  # another channel count

    out = pad_shift_windows(x, window, shift, attend)
    assert torch.equal(out, torch.cat([x, 2 * x], dim=-1))
    padded = [-(-s // w) * w for s, w in zip(size, window)]
    want = ref.window_partition(ref.cyclic_shift(ref.pad_spatial(x.numpy(), padded), shift),
                                window)
    assert np.array_equal(seen[0].numpy(), want)


# --------------------------------------------------------------------------- #
# Whole models: inference
# --------------------------------------------------------------------------- #
@pytest.mark.aot
@pytest.mark.parametrize("layout", ["auto", "windows"])
@pytest.mark.parametrize("name", list(MODELS))
def test_model_forward(torch, monai, opts, name, layout):
    """Eval-mode output within 1e-4 of MONAI's.  ``layout="auto"``: every block
    runs the token-layout kernel.  ``layout="windows"``: the WindowAttention modules
    run window-layout kernels on MONAI's windows and identified shift masks (every
    layer but, in 3-D, the last stage's, whose window shrinks: its reason)."""
    model = _model(monai, torch, name)
    x = _input(torch, name)
    with torch.inference_mode():
        want = model(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "not patching" / "patched nothing" warning
        assert st.swap_attention(model, layout=layout, **opts) == LAYERS
    try:
        assert st.unpatched(model) == []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", st.FallbackWarning)
            with torch.inference_mode():
                got = model(x)
        # every block's MLP and every patch merging on its kernel (swin_opt::mlp, ::dense)
        dense = [s for s in st.patch_stats(model) if s["kind"] in ("mlp", "linear")]
        assert sorted({s["kind"] for s in dense}) == ["linear", "mlp"], dense
        assert all(s["kernel_calls"] == 1 and s["fallback_calls"] == 0 for s in dense), dense
        if layout == "auto" or name != "3d":
            _check_all_kernel(model)
        else:  # 3-D: the last stage's window shrinks, which the block alone knows
            stats = {s["name"]: s for s in _attention_stats(model)}
            assert len(stats) == LAYERS
            for s in stats.values():
                last = s["name"].startswith("swinViT.layers4")
                assert (s["kernel_calls"], s["fallback_calls"]) == (
                    (0, 1) if last else (1, 0)), s
                if last:
                    assert any("shrunk window" in r for r in s["fallback_reasons"]), s
    finally:
        assert st.restore_attention(model) == LAYERS
    assert st.patch_stats(model) == []
    assert _rel_err(got, want) <= RTOL


@pytest.mark.aot
def test_model_under_torch_compile(torch, monai, opts):
    """torch.compile keeps the token-layout kernels: the output within 1e-4 of
    MONAI's eager one, every layer on its kernel, and no graph break in swin_opt's
    code (MONAI's own data-dependent branch breaks the graph, as without the swap)."""
    model = _model(monai, torch, "3d_unpadded").eval()
    x = _input(torch, "3d_unpadded")
    with torch.inference_mode():
        want = model(x)
    st.swap_attention(model, **opts)
    try:
        torch._dynamo.reset()
        with torch.no_grad():
            explained = torch._dynamo.explain(model)(x)
        ours = [r for r in explained.break_reasons
                if any("swin_opt" in frame.filename for frame in r.user_stack)]
        assert ours == [], [r.reason for r in ours]
        torch._dynamo.reset()
        with torch.inference_mode():
            got = torch.compile(model)(x)
        _check_all_kernel(model)
    finally:
        torch._dynamo.reset()
        st.restore_attention(model)
    assert _rel_err(got, want) <= RTOL


# --------------------------------------------------------------------------- #
# Whole models: training (the kernels' backward)
# --------------------------------------------------------------------------- #
def _grads(torch, model, x, weights):
    """The outputs, the input's and every parameter's gradient of
    ``sum(weights[i] * outputs[i])`` in training mode."""
    model.train()
    x = x.detach().clone().requires_grad_(True)
    ys = model(x)
    sum(w.mul(y).sum() for w, y in zip(weights, ys)).backward()
    out = {f"output{i}": y.detach() for i, y in enumerate(ys)}
    out["input"] = x.grad
    for name, p in model.named_parameters():
        out[name] = p.grad
    return out


@pytest.mark.aot
@pytest.mark.parametrize("name", list(MODELS))
def test_model_gradients(torch, monai, opts, name):
    """Training of Swin-UNETR's Swin encoder (``SwinUNETR.swinViT``, MONAI's
    ``SwinTransformer``: its five normalised feature maps, each weighted): outputs,
    the input's and every parameter's gradient (the bias tables included) within
    1e-4.  Every block runs a kernel with its backward: the token layout on maps a
    multiple of the window, the window layout behind torch's padding elsewhere
    (the token kernel's backward does not give the padded rows' gradient).

    The whole SwinUNETR is not compared here: its UNETR decoder
    instance-normalises maps of a few voxels (1x2x1 at the bottleneck of these
    inputs), which amplifies float32 rounding so that MONAI's own float32
    gradients differ from float64 by up to ~3e-2, and any reordering of the
    attention's sums moves some decoder gradients by ~1e-3."""
    model = _model(monai, torch, name).swinViT
    original = copy.deepcopy(model)
    x = _input(torch, name)
    gen = torch.Generator().manual_seed(2)
    with torch.no_grad():
        weights = [torch.randn(y.shape, generator=gen) for y in original(x)]
    want = _grads(torch, original, x, weights)
    assert st.swap_attention(model, **opts) == LAYERS
    try:
        got = _grads(torch, model, x, weights)
        _check_all_kernel(model)
    finally:
        st.restore_attention(model)
    tables = [k for k in want if "relative_position_bias_table" in k]
    assert len(tables) == LAYERS
    assert len(want) == len(weights) + 1 + len(list(model.parameters()))
    for key, w in want.items():
        assert w is not None and bool(w.abs().max() > 0), key
        assert _rel_err(got[key], w) <= RTOL, key


# --------------------------------------------------------------------------- #
# What falls back, and why
# --------------------------------------------------------------------------- #
@pytest.mark.aot
def test_shrunk_trailing_axes_fall_back(torch, monai, opts, monkeypatch):
    """MONAI's default 7x7x7 window on a 32^3 input (Swin-UNETR's Swin encoder: the
    whole model instance-normalises its 1x1x1 bottleneck, which torch refuses): the
    last two stages' maps (4^3,
    2^3) shrink the window along every axis, where MONAI's bias
    (``relative_position_index[:n, :n]`` of the full window) is no relative position
    bias; those blocks run MONAI's forward (their WindowAttention too: a shrunk
    window) with the reason, the first two stages run the kernels, and the output
    is MONAI's."""
    from monai.networks.nets import SwinUNETR

    from swin_opt.torch import fallback

    monkeypatch.setattr(fallback, "warned_reasons", set())  # this process's warnings
    torch.manual_seed(0)
    model = sharpen_weights(SwinUNETR(in_channels=1, out_channels=2, feature_size=24,
                                      spatial_dims=3)).swinViT
    x = torch.randn(1, 1, 32, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        want = torch.cat([y.flatten() for y in model(x)])
    assert st.swap_attention(model, **opts) == LAYERS
    try:
        with pytest.warns(st.FallbackWarning, match="not a relative position bias"):
            with torch.inference_mode():
                got = torch.cat([y.flatten() for y in model(x)])
        for s in _attention_stats(model):
            small = s["name"].startswith(("layers3", "layers4"))
            if s["method"] == "forward_part1":
                assert (s["kernel_calls"], s["fallback_calls"]) == (
                    (0, 1) if small else (1, 0)), s
            else:
                assert s["kernel_calls"] == 0 and s["fallback_calls"] == (1 if small else 0), s
    finally:
        st.restore_attention(model)
    assert _rel_err(got, want) <= RTOL


@pytest.mark.aot
def test_block_checks_its_mask(torch, monai, opts):
    """A shifted block called with a mask other than the shift mask of its padded map
    (here: the mask of a different shift) runs MONAI's forward, which then gives
    a different result; with MONAI's mask the kernel runs."""
    from monai.networks.nets.swin_unetr import SwinTransformerBlock, compute_mask

    torch.manual_seed(0)
    blk = sharpen_weights(SwinTransformerBlock(16, 2, (3, 3), (1, 1)))
    x = torch.randn(2, 7, 8, 16, generator=torch.Generator().manual_seed(1))
    good = compute_mask([9, 9], (3, 3), (1, 1), None)
    bad = compute_mask([9, 9], (3, 3), (2, 1), None)
    assert not torch.equal(good, bad)
    assert st.swap_attention(blk, fallback=False, **opts) == 1
    try:
        with torch.no_grad():
            got = blk(x, good)
            with pytest.raises(st.KernelUnavailable, match="mask_matrix is not the shift mask"):
                blk(x, bad)
    finally:
        st.restore_attention(blk)
    with torch.no_grad():
        assert _rel_err(got, blk(x, good)) <= RTOL


def test_unpatched_reports_excluded_framework(torch, monai):
    from monai.networks.nets.swin_unetr import SwinTransformerBlock

    blk = SwinTransformerBlock(16, 2, (3, 3), (1, 1))
    with pytest.warns(UserWarning, match="patched nothing"):
        assert st.swap_attention(blk, frameworks="timm") == 0
    entries = st.unpatched(blk)
    assert sorted(e["name"] for e in entries) == ["attn", "mlp"], entries
    assert all(e["framework"] == "monai" and e["reason"].startswith("framework 'monai' not selected")
               for e in entries), entries
