"""timm MaxViT, CoAtNet and MaxxViT through ``swin_opt.torch.swap_attention``
(issue 28): ``AttentionCl`` (channels last) and ``Attention2d`` (NCHW) of
``timm.models.maxxvit``, in block, grid and (CoAtNet) whole-map attention,
with ``RelPosBias`` (Swin's table) and ``RelPosBiasTf`` (TensorFlow's
``[heads, 2Wh-1, 2Ww-1]`` table, flipped into Swin's).

Models are small configurations of the real timm models (``create_model``
with a 64x64 or 96x96 image, two or four stages, 16-32 channels, head_dim 8),
their weights re-drawn (:func:`swin_opt.testing.sharpen_weights`: the bias
tables ~ N(0, 1), where timm starts them near zero).  The MaxViT windows are
not square (block 4x2, grid 2x4, against a 16x16 and an 8x8 map), so a
transposed or mirrored bias, or a block/grid mix-up, shows far above the
tolerances: forward 1e-4 of the largest output, gradients 1e-4 of each
gradient's largest entry (float32, against the model's own forward and
backward).  Every attention layer must have run its kernel (``patch_stats``):
the window-layout one, or, for ``PartitionAttentionCl``'s block and grid
attention, the token-layout kernel of its ``_partition_attn`` on the whole map.
"""

from __future__ import annotations

import copy
import functools
import json
import warnings

import numpy as np
import pytest

from swin_opt import reference as ref
from swin_opt import torch as st
from swin_opt.testing import sharpen_weights

RTOL = 1e-4

_SMALL = dict(img_size=64, embed_dim=(16, 16), depths=(1, 1), stem_width=16,
              transformer_dim_head=8, num_classes=10)
_RECT = dict(transformer_window_size=(4, 2), transformer_grid_size=(2, 4))

#: name -> (timm model, its small configuration, attention layers)
MODELS = {
    # RelPosBiasTf, head_first=False, AttentionCl: block and grid
    "maxvit_tf": ("maxvit_tiny_tf_224", dict(_SMALL, **_RECT), 4),
    # RelPosBias, head_first=True
    "maxvit_rw": ("maxvit_nano_rw_256", dict(_SMALL, **_RECT), 4),
    # Attention2d on the NCHW block and grid partitions, both tables
    "maxvit_tf_nchw": ("maxvit_tiny_tf_224",
                       dict(_SMALL, **_RECT, transformer_use_nchw_attn=True), 4),
    "maxvit_rw_nchw": ("maxvit_nano_rw_256",
                       dict(_SMALL, **_RECT, transformer_use_nchw_attn=True), 4),
    # MaxxViT v2's ParallelPartitionAttention (two AttentionCl of half width)
    "maxvit_pm": ("maxvit_tiny_pm_256", dict(_SMALL, embed_dim=(32, 32),
                                             transformer_window_size=4), 4),
    # MaxxViT v2: grid attention only (no_block_attn)
    "maxxvitv2": ("maxxvitv2_nano_rw_256", dict(_SMALL, transformer_window_size=4), 2),
    # CoAtNet: Attention2d over the whole 6x6 and 3x3 maps
    "coatnet": ("coatnet_0_rw_224", dict(_SMALL, img_size=96, embed_dim=(16, 16, 16, 32),
                                         depths=(1, 1, 1, 2)), 3),
}


@pytest.fixture(scope="module")
def timm(torch):
    timm = pytest.importorskip("timm")
    pytest.importorskip("timm.models.maxxvit")
    return timm


def _model(timm, torch, name):
    arch, cfg, _ = MODELS[name]
    torch.manual_seed(0)
    return sharpen_weights(timm.create_model(arch, pretrained=False, **cfg))


def _input(torch, name, requires_grad=False):
    size = MODELS[name][1]["img_size"]
    gen = torch.Generator().manual_seed(1)
    return torch.randn(2, 3, size, size, generator=gen).requires_grad_(requires_grad)


def _rel_err(got, want):
    return ((got - want).abs().max() / want.abs().max()).item()


def _attention_stats(model):
    return [s for s in st.patch_stats(model) if s["kind"] == "attention"]


def _check_stats(model, n_layers, partitions=None):
    """Every attention layer ran a kernel without a fallback: its own, or that of the
    ``PartitionAttentionCl._partition_attn`` holding it, which then runs it whole
    (``partitions``: how many such patches there must be, if given)."""
    stats = _attention_stats(model)
    owners = {s["name"]: s for s in stats if s["method"] == "_partition_attn"}
    if partitions is not None:
        assert len(owners) == partitions, owners
    layers = [s for s in stats if s["method"] == "forward"]
    assert len(layers) == n_layers
    for s in layers:
        ran = owners.pop(s["name"].rsplit(".", 1)[0], s)
        assert ran["kernel_calls"] >= 1, (ran, s)
        assert ran["fallback_calls"] == 0 and s["fallback_calls"] == 0, (ran, s)
    assert not owners, owners


# --------------------------------------------------------------------------- #
# The bias tables (no kernel)
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("kind", ["RelPosBias", "RelPosBiasTf"])
def test_swin_table_is_timms_bias(torch, timm, kind):
    """Swin's gather of :func:`swin_table` (the NumPy reference's index) is the bias
    timm's module adds, on a non-square window; the TF table's lookups are
    recognised, and a changed lookup is not."""
    from timm.layers import pos_embed_rel

    from swin_opt.torch import maxvit_patches as mp

    window, heads = (3, 5), 2
    rel_pos = getattr(pos_embed_rel, kind)(window, heads)
    with torch.no_grad():
        rel_pos.relative_position_bias_table.normal_()
    table, index = mp.swin_table(rel_pos)
    assert tuple(table.shape) == ((2 * 3 - 1) * (2 * 5 - 1), heads)
    gather = torch.from_numpy(ref.relative_index(window).reshape(-1))
    n = window[0] * window[1]
    want = rel_pos.get_bias().reshape(heads, n, n)
    got = table[gather].reshape(n, n, heads).permute(2, 0, 1)
    assert torch.equal(got, want)
    if kind == "RelPosBias":
        assert np.array_equal(index.numpy(), gather.numpy())
        return
    assert index is None
    assert mp.tf_lookups_ok(rel_pos.height_lookup, rel_pos.width_lookup, window)
    flipped = rel_pos.width_lookup.flip(0)
    assert not mp.tf_lookups_ok(rel_pos.height_lookup, flipped, window)


# --------------------------------------------------------------------------- #
# Whole models: inference
# --------------------------------------------------------------------------- #
@pytest.mark.aot
@pytest.mark.parametrize("name", list(MODELS))
def test_model_forward(torch, timm, opts, name):
    model = _model(timm, torch, name)
    x = _input(torch, name)
    n_layers = MODELS[name][2]
    with torch.inference_mode():
        want = model(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "not patching" / "patched nothing" warning
        assert st.swap_attention(model, **opts) == n_layers
    try:
        assert st.unpatched(model) == []
        with torch.inference_mode():
            got = model(x)
        _check_stats(model, n_layers)
    finally:
        assert st.restore_attention(model) == n_layers
    assert _rel_err(got, want) <= RTOL


@pytest.mark.aot
def test_torch_compile_keeps_the_kernels(torch, timm, opts, run_alone):
    """dynamo traces the patches without a graph break (``fullgraph=True``; the TF
    lookups' and the index's checks are trace-time constants) and the compiled
    models call the kernels: channels-last block/grid attention with the TF
    table, CoAtNet's NCHW whole-map attention."""
    if run_alone():
        return
    for name in ("maxvit_tf", "coatnet"):
        model = _model(timm, torch, name)
        x = _input(torch, name)
        n_layers = MODELS[name][2]
        with torch.inference_mode():
            want = model(x)
        st.swap_attention(model, **opts)
        with torch.inference_mode():
            got = torch.compile(model, fullgraph=True, backend="eager")(x)
        _check_stats(model, n_layers)
        st.restore_attention(model)
        assert _rel_err(got, want) <= RTOL, name


# --------------------------------------------------------------------------- #
# Whole models: training (the kernels' backward)
# --------------------------------------------------------------------------- #
def _grads(torch, model, x, weights):
    """The input's and the attention modules' gradients (bias tables, qkv weights)
    of ``sum(weights * model(x))`` in training mode."""
    model.train()
    x = x.detach().clone().requires_grad_(True)
    (model(x) * weights).sum().backward()
    out = {"input": x.grad}
    for name, p in model.named_parameters():
        if "relative_position_bias_table" in name or ".qkv." in name:
            out[name] = p.grad
    return out


@pytest.mark.aot
@pytest.mark.parametrize("name", ["maxvit_tf", "maxvit_rw", "maxvit_rw_nchw", "coatnet"])
def test_model_gradients(torch, timm, opts, name):
    model = _model(timm, torch, name)
    original = copy.deepcopy(model)
    x = _input(torch, name)
    weights = torch.randn(2, 10, generator=torch.Generator().manual_seed(2))
    want = _grads(torch, original, x, weights)
    n_layers = MODELS[name][2]
    assert st.swap_attention(model, **opts) == n_layers
    try:
        got = _grads(torch, model, x, weights)
        _check_stats(model, n_layers)
    finally:
        st.restore_attention(model)
    tables = [k for k in want if "relative_position_bias_table" in k]
    assert len(tables) == n_layers and len(want) == 1 + n_layers + 2 * n_layers
    for key, w in want.items():
        assert w is not None and bool(w.abs().max() > 0), key
        assert _rel_err(got[key], w) <= RTOL, key


@pytest.mark.aot
def test_attention_dropout_falls_back_in_training(torch, timm, opts, monkeypatch):
    """Attention dropout in training mode runs timm's forward (the kernels have no
    dropout), with its reason; in eval mode the kernels run."""
    from swin_opt.torch import fallback

    monkeypatch.setattr(fallback, "warned_reasons", set())  # this process's warnings
    arch, cfg, n_layers = MODELS["maxvit_tf"]
    torch.manual_seed(0)
    model = timm.create_model(arch, pretrained=False, transformer_attn_drop=0.1, **cfg)
    assert st.swap_attention(model, **opts) == n_layers
    try:
        model.train()
        with pytest.warns(st.FallbackWarning, match="attention dropout"):
            model(_input(torch, "maxvit_tf"))
        for s in _attention_stats(model):
            assert s["kernel_calls"] == 0 and s["fallback_calls"] == 1, s
            assert any("attention dropout" in r for r in s["fallback_reasons"]), s
        model.eval()
        with torch.no_grad():
            model(_input(torch, "maxvit_tf"))
        # the partitions' token-layout kernels, their attention layers not called
        assert sorted(s["kernel_calls"] for s in _attention_stats(model)) == [0] * 4 + [1] * 4
    finally:
        st.restore_attention(model)


# --------------------------------------------------------------------------- #
# Grid and block attention on the whole map (token layout)
# --------------------------------------------------------------------------- #
@pytest.mark.aot
@pytest.mark.parametrize("name", ["maxvit_tf", "maxvit_rw"])
def test_partitions_read_the_map(torch, timm, opts, run_alone, name):
    """``PartitionAttentionCl._partition_attn`` runs as one token-layout kernel per
    call, ``partition="grid"`` for the grid attention and ``"block"`` for the
    block's (both qkv channel orders: ``head_first`` False and True); with
    ``layout="windows"`` the attention modules' window-layout kernels run instead,
    after timm's partition copies. Both match the original forward."""
    if run_alone():
        return
    from swin_opt.torch import ops

    model = _model(timm, torch, name)
    x = _input(torch, name)
    n_layers = MODELS[name][2]
    with torch.inference_mode():
        want = model(x)
    before = ops.loaded_keys()
    assert st.swap_attention(model, **opts) == n_layers
    try:
        with torch.inference_mode():
            got = model(x)
        _check_stats(model, n_layers, partitions=n_layers)
    finally:
        st.restore_attention(model)
    assert _rel_err(got, want) <= RTOL
    built = [json.loads(k)["options"] for k in ops.loaded_keys() - before]
    assert sorted(o.get("partition") for o in built) == ["block", "block", "grid", "grid"]
    assert all(o["layout"] == "tokens" and o["packed_qkv"] for o in built), built

    assert st.swap_attention(model, layout="windows", **opts) == n_layers
    try:
        with torch.inference_mode():
            got = model(x)
        _check_stats(model, n_layers, partitions=0)
    finally:
        st.restore_attention(model)
    assert _rel_err(got, want) <= RTOL


@pytest.mark.aot
def test_partition_falls_back_to_the_window_path(torch, timm, opts, monkeypatch):
    """A partition size other than the table's falls back to timm's method, whose
    attention runs its window-layout patch; the fallback says why."""
    from swin_opt.torch import fallback

    monkeypatch.setattr(fallback, "warned_reasons", set())  # this process's warnings
    model = _model(timm, torch, "maxvit_tf")
    blk = next(m for m in model.modules() if type(m).__name__ == "PartitionAttentionCl"
               and not m.partition_block)
    st.swap_attention(blk, **opts)
    try:
        x = torch.randn(2, 8, 8, blk.attn.qkv.in_features)
        with torch.inference_mode():
            got = blk._partition_attn(x)
        stats = {s["method"]: s for s in _attention_stats(blk)}
        assert stats["_partition_attn"]["kernel_calls"] == 1
        window = tuple(blk.partition_size)
        blk.partition_size = (window[1], window[0])  # no longer rel_pos's window
        with torch.inference_mode(), pytest.warns(st.FallbackWarning,
                                                  match="is not rel_pos's window"):
            swapped = blk._partition_attn(x)
        stats = {s["method"]: s for s in _attention_stats(blk)}
        assert stats["_partition_attn"]["fallback_calls"] == 1, stats
        assert any("is not rel_pos's window" in r
                   for r in stats["_partition_attn"]["fallback_reasons"]), stats
    finally:
        blk.partition_size = window
        st.restore_attention(blk)
    with torch.inference_mode():
        want = blk._partition_attn(x)
    assert _rel_err(got, want) <= RTOL
    assert swapped.shape == want.shape


# --------------------------------------------------------------------------- #
# What swap_attention leaves unpatched
# --------------------------------------------------------------------------- #
def test_unpatched_rel_pos_types(torch, timm):
    from timm.layers import pos_embed_rel
    from timm.models import maxxvit

    # RelPosMlp (the *_rmlp_* models): no bias table
    torch.manual_seed(0)
    model = timm.create_model("maxvit_rmlp_nano_rw_256", pretrained=False,
                              **dict(_SMALL, transformer_window_size=4))
    with pytest.warns(UserWarning) as record:
        assert st.swap_attention(model) == 0
    messages = [str(w.message) for w in record]
    assert any("rel_pos is RelPosMlp" in m for m in messages), messages
    assert any("patched nothing" in m for m in messages), messages
    report = st.unpatched(model)
    assert len(report) == 4
    for entry in report:
        assert entry["framework"] == "timm"
        assert entry["class"] == "timm.models.maxxvit.AttentionCl"
        assert entry["reason"].startswith("rel_pos is RelPosMlp")

    # no rel_pos, and a class token
    bare = maxxvit.AttentionCl(16, dim_head=8)
    cls_token = maxxvit.Attention2d(16, dim_head=8, rel_pos_cls=functools.partial(
        pos_embed_rel.RelPosBias, (2, 2), prefix_tokens=1))
    for module, reason in ((bare, "no rel_pos"), (cls_token, "rel_pos has a class token")):
        with pytest.warns(UserWarning) as record:
            assert st.swap_attention(module) == 0
        assert any(reason in str(w.message) for w in record), reason
        (entry,) = st.unpatched(module)
        assert entry["name"] == "" and entry["reason"].startswith(reason)

