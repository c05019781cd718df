"""transformers' BEiT (``BeitModel``, transformers 5) and data2vec-vision
(``Data2VecVisionModel``) through ``swin_opt.torch.swap_attention``: the
class-token kernels on the tables their patched bias modules hand on
(:mod:`swin_opt.torch.table_bias`), per layer or shared (issue 28).

Small random models of the real classes (2 layers, 4x4 / 5x3 patch grids and the
class token, eager and SDPA attention) are compared with their own forward
(float32, 1e-4 relative to the largest output) and, in training, with their own
gradients (the input's and every parameter's, tables included; 1e-4 relative
to each gradient's largest magnitude).  Weights are redrawn by
:func:`swin_opt.testing.sharpen_weights` (tables N(0, 1): the models
zero-initialise them, with which the comparison could not fail); a test checks
that the tables matter.  No ``torch.inference_mode`` here: transformers caches
the relative position index (``lru_cache``), and one built in inference mode
breaks every later training forward of the process.
"""

from __future__ import annotations

import warnings

import pytest

from swin_opt import torch as st
from swin_opt.testing import sharpen_weights, weighted_gradients

pytestmark = pytest.mark.aot

RTOL = 1e-4


@pytest.fixture(scope="module")
def hf(torch):
    transformers = pytest.importorskip("transformers")
    return transformers


def _model(hf, family, shared, img=(32, 32), attn="sdpa", **kw):
    import torch

    config_cls, model_cls = {"beit": (hf.BeitConfig, hf.BeitModel),
                             "data2vec": (hf.Data2VecVisionConfig, hf.Data2VecVisionModel)}[family]
    torch.manual_seed(0)
    config = config_cls(image_size=list(img), patch_size=8, hidden_size=24, num_hidden_layers=2,
                        num_attention_heads=3, intermediate_size=37, layer_scale_init_value=0.1,
                        use_relative_position_bias=shared != "only",
                        use_shared_relative_position_bias=shared is not False,
                        attn_implementation=attn, drop_path_rate=0.0, hidden_dropout_prob=0.0,
                        **kw)
    return sharpen_weights(model_cls(config), seed=1)


def _rel_err(got, want):
    return ((got - want).abs().max() / want.abs().max()).item()


def _stats(model):
    stats = st.patch_stats(model)
    kernel = sum(s["kernel_calls"] for s in stats if s["kind"] == "attention")
    reasons = {r for s in stats for r in s["fallback_reasons"]}
    return kernel, reasons


CASES = [("beit", False), ("beit", "only"), ("beit", True),
         ("data2vec", False), ("data2vec", "only"), ("data2vec", True)]


@pytest.mark.parametrize("family,shared", CASES)
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_eval_matches_transformers(torch, hf, opts, family, shared, attn):
    """Per-layer tables, the shared one ("only") and both, on a 4x4 grid."""
    model = _model(hf, family, shared, attn=attn).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        want = model(x).last_hidden_state
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing left unpatched
        assert st.swap_attention(model, mlp=False, **opts) == 2
    try:
        with torch.no_grad():
            got = model(x).last_hidden_state
        assert st.unpatched(model) == []
        assert _stats(model) == (2, set())
    finally:
        assert st.restore_attention(model) == 2
    assert _rel_err(got, want) <= RTOL


@pytest.mark.parametrize("family", ["beit", "data2vec"])
def test_tables_matter(torch, hf, opts, family):
    """Changing either table (the class rows included) changes the model's output
    far above the tolerance, and the swapped model follows."""
    model = _model(hf, family, True).eval()
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        before = model(x).last_hidden_state
        for name, p in model.named_parameters():
            if name.endswith("relative_position_bias_table"):
                p[-3:] += 2.0
                p[:-3] += torch.randn_like(p[:-3])
        want = model(x).last_hidden_state
    assert _rel_err(before, want) > 100 * RTOL
    st.swap_attention(model, mlp=False, **opts)
    try:
        with torch.no_grad():
            got = model(x).last_hidden_state
        assert _stats(model) == (2, set())
    finally:
        st.restore_attention(model)
    assert _rel_err(got, want) <= RTOL


@pytest.mark.parametrize("family,shared", CASES)
def test_training_gradients_match(torch, hf, opts, family, shared):
    """Training mode (no dropout): the kernels' forward and backward against the
    model's own gradients of the input and every parameter; each table (the one
    shared table sums every layer's) has nonzero gradients, class rows included."""
    model = _model(hf, family, shared).train()
    x = torch.randn(2, 3, 32, 32)

    def grads():
        return weighted_gradients(model, x, lambda r: r.last_hidden_state)

    want_out, want_dx, want = grads()
    st.swap_attention(model, mlp=False, **opts)
    try:
        got_out, got_dx, got = grads()
        assert _stats(model) == (2, set())
    finally:
        st.restore_attention(model)
    assert _rel_err(got_out, want_out) <= RTOL
    assert _rel_err(got_dx, want_dx) <= RTOL
    assert set(got) == set(want)
    tables = [n for n in want if n.endswith("relative_position_bias_table")]
    assert len(tables) == (1 if shared == "only" else 2 if not shared else 3)
    for name, g in want.items():
        if g.abs().max() > 0:
            assert _rel_err(got[name], g) <= RTOL, name
    for name in tables:
        assert want[name][-3:].abs().min() > 0, name


@pytest.mark.parametrize("family", ["beit", "data2vec"])
def test_fallbacks_are_reported(torch, hf, opts, family):
    """Attention probabilities, another resolution (the table interpolated) and
    attention dropout in training run the original forward, with the reason; the
    outputs still match the original's."""
    model = _model(hf, family, True, attn="eager").eval()
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        want = model(x, output_attentions=True).attentions
    st.swap_attention(model, mlp=False, **opts)
    try:
        with warnings.catch_warnings():  # warned once per process and reason
            warnings.simplefilter("ignore", st.FallbackWarning)
            with torch.no_grad():
                got = model(x, output_attentions=True).attentions
            assert len(got) == len(want) == 2
            for g, w in zip(got, want):
                assert _rel_err(g, w) <= RTOL
            assert _stats(model)[0] == 0
            assert any("attention probabilities" in r for r in _stats(model)[1])
            big = torch.randn(1, 3, 48, 48)
            with torch.no_grad():
                got = model(big, interpolate_pos_encoding=True).last_hidden_state
            assert any("interpolated" in r for r in _stats(model)[1]), _stats(model)
            assert _stats(model)[0] == 0
        st.restore_attention(model)
        with torch.no_grad():
            want = model(big, interpolate_pos_encoding=True).last_hidden_state
        assert _rel_err(got, want) <= RTOL
    finally:
        st.restore_attention(model)

    # a non-square grid: transformers resamples its table even at that grid
    oblong = _model(hf, family, True, img=(32, 40)).eval()
    x = torch.randn(1, 3, 32, 40)
    with torch.no_grad():
        want = oblong(x).last_hidden_state
    st.swap_attention(oblong, mlp=False, **opts)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", st.FallbackWarning)
            with torch.no_grad():
                got = oblong(x).last_hidden_state
        kernel, reasons = _stats(oblong)
        assert kernel == 0 and any("non-square" in r for r in reasons), reasons
    finally:
        st.restore_attention(oblong)
    assert _rel_err(got, want) <= RTOL

    dropped = _model(hf, family, False, attention_probs_dropout_prob=0.1).train()
    st.swap_attention(dropped, mlp=False, **opts)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", st.FallbackWarning)
            dropped(torch.randn(1, 3, 32, 32))
        kernel, reasons = _stats(dropped)
        assert kernel == 0 and any("attention dropout" in r for r in reasons), reasons
    finally:
        st.restore_attention(dropped)


@pytest.mark.parametrize("family", ["beit", "data2vec"])
def test_compiled_keeps_the_kernel(torch, hf, opts, family):
    """Under torch.compile the bias modules' TableBias and the index check (made
    at trace time on the generated index) keep every layer on the kernel."""
    model = _model(hf, family, True).eval()
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        want = model(x).last_hidden_state
    st.swap_attention(model, mlp=False, **opts)
    try:
        torch._dynamo.reset()
        with torch.no_grad():
            got = torch.compile(model)(x).last_hidden_state
        kernel, reasons = _stats(model)
        assert kernel == 2 and reasons == set(), reasons
        assert not any(s["compiled_fallback_reasons"] for s in st.patch_stats(model))
    finally:
        st.restore_attention(model)
    assert _rel_err(got, want) <= RTOL
