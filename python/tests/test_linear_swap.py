"""The linear layers around the kernels (swin_opt.torch.projections.linear): at
inference on their compiled kernels (``swin_opt::dense``, swin_opt.torch.dense)
against float64, oneDNN under autograd and where a layer has no kernel,
``SWIN_OPT_LINEAR``; and the dense layers swap_attention patches to run through
it (swin_opt.torch.linears): the patch-merging reductions of timm, torchvision
and transformers Swin models and transformers' MLP layers, in eval and training,
``linear=False`` and restore, and a reduction that is not a plain ``nn.Linear``
left alone with its reason.

Tolerance: the dense kernel against float64, ``1e-5 * max(1, max|reference|)``
(test_mlp_swap.py's); test_torch.py's 1e-4 relative on whole models (the
kernels, oneDNN and MKL sum the products in different orders); gradients 1e-4
relative to each one's largest value.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from typing import NamedTuple

import pytest

from swin_opt import torch as st
from swin_opt.testing import sharpen_weights

pytestmark = pytest.mark.aot

RTOL = 1e-4
TOLERANCE = 1e-5


def _rel_err(got, want):
    return ((got - want).abs().max() / want.abs().max()).item()


def _check(got, want):
    error = (got.double() - want).abs().max().item()
    allowed = TOLERANCE * max(1.0, want.abs().max().item())
    assert error <= allowed, f"max |error| {error:.3g} > {allowed:.3g}"


class DenseCall(NamedTuple):
    op: str  # "dense" or "mlp"
    widths: tuple
    fused: bool  # given a residual to add


@pytest.fixture
def dense_calls(torch, monkeypatch):
    """Every dense kernel run while the test runs (:class:`DenseCall`), in order."""
    from swin_opt.torch import dense

    calls = []
    run = dense.run

    def spy(op, x, layers, residual, config):
        calls.append(DenseCall(op, tuple(dense.kernel_for(config).config.widths),
                               residual is not None))
        return run(op, x, layers, residual, config)

    monkeypatch.setattr(dense, "run", spy)
    return calls


def _widths(calls):
    return [c.widths for c in calls]


def _fused(calls):
    return [c.op for c in calls if c.fused]


@pytest.mark.parametrize("bias", [True, False])
def test_linear_runs_the_layers_kernel_at_inference(torch, dense_calls, bias):
    """Odd widths (partial panels), row counts around the kernel's tiles, leading
    axes: the layer's kernel, one per widths, against float64; the residual form
    through the operator."""
    from swin_opt.torch import dense, ops
    from swin_opt.torch.projections import linear, linear_backend

    if linear_backend() != "swin":
        pytest.skip(f"SWIN_OPT_LINEAR={linear_backend()}")
    dense.register()
    ops.register()  # swin_opt::linear, autograd's path
    gen = torch.Generator().manual_seed(3)
    w = torch.randn(37, 13, generator=gen) / 4
    b = torch.randn(37, generator=gen) if bias else None
    with torch.no_grad():
        for shape in [(1,), (7,), (9,), (2, 3, 5), (4, 49)]:
            x = torch.randn(*shape, 13, generator=gen)
            want = torch.nn.functional.linear(x.double(), w.double(),
                                              None if b is None else b.double())
            _check(linear(x, w, b), want)
            residual = torch.randn(*shape, 37, generator=gen)
            key = dense.resolve((13, 37), ()).key
            _check(torch.ops.swin_opt.dense(x, w, b, residual, key), want + residual.double())
    assert _widths(dense_calls) == [(13, 37)] * 10
    # under autograd: oneDNN (swin_opt::linear), whose backward gives the gradients
    x = torch.randn(5, 13, generator=gen, requires_grad=True)
    linear(x, w, b).sum().backward()
    assert len(dense_calls) == 10
    assert _rel_err(x.grad, w.sum(0).expand(5, 13)) <= RTOL


def test_linear_under_torch_compile_calls_the_operator(torch, dense_calls):
    """Compiled, the inference path is ``swin_opt::dense`` in the graph (no graph break)."""
    from swin_opt.torch import dense, ops
    from swin_opt.torch.projections import linear, linear_backend

    if linear_backend() != "swin":
        pytest.skip(f"SWIN_OPT_LINEAR={linear_backend()}")
    dense.register()
    ops.register()
    gen = torch.Generator().manual_seed(5)
    w, b = torch.randn(37, 13, generator=gen) / 4, torch.randn(37, generator=gen)
    x = torch.randn(3, 11, 13, generator=gen)
    torch._dynamo.reset()
    fn = torch.compile(lambda t: torch.relu(linear(t, w, b)), fullgraph=True)
    with torch.no_grad():
        _check(fn(x), torch.relu(torch.nn.functional.linear(x.double(), w.double(), b.double())))
    assert _widths(dense_calls) == [(13, 37)]


def test_linear_without_a_kernel_takes_onednn(torch, dense_calls, monkeypatch):
    from swin_opt.torch import dense, ops
    from swin_opt.torch.projections import linear

    ops.register()
    monkeypatch.setattr(dense, "resolve", lambda widths, options: dense.DenseSpec(
        "", "no dense kernel: refused for the test"))
    gen = torch.Generator().manual_seed(4)
    x, w, b = torch.randn(6, 13, generator=gen), torch.randn(37, 13, generator=gen), None
    with torch.no_grad():
        _check(linear(x, w, b), torch.nn.functional.linear(x.double(), w.double()))
    assert dense_calls == []


def test_swin_opt_linear_selects_the_backend(torch, aot_path, kernel_cache):
    """``SWIN_OPT_LINEAR`` (read at swap time): ``onednn`` builds and runs no dense
    kernel for the projections (the MLPs still run theirs); a bad value is refused."""
    script = """
import timm, torch
from swin_opt import torch as st
from swin_opt.torch import dense
from swin_opt.testing import sharpen_weights
model = sharpen_weights(timm.models.swin_transformer.SwinTransformer(
    img_size=56, embed_dim=32, depths=(2, 2), num_heads=(2, 4), num_classes=10)).eval()
x = torch.randn(1, 3, 56, 56)
with torch.inference_mode():
    want = model(x)
    st.swap_attention(model)
    err = ((model(x) - want).abs().max() / want.abs().max()).item()
print(sorted(memo[0] for memo in dense._specs), err)
"""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, SWIN_AOT=str(aot_path), SWIN_OPT_CACHE_DIR=str(kernel_cache),
               PYTHONPATH=root)
    for value, widths in (("onednn", [(32, 128, 32), (64, 256, 64)]),
                          ("swin", [(32, 32), (32, 96), (32, 128, 32), (64, 64), (64, 192),
                                    (64, 256, 64), (128, 64)])):
        proc = subprocess.run([sys.executable, "-c", script], env=dict(env, SWIN_OPT_LINEAR=value),
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        got, err = proc.stdout.strip().splitlines()[-1].rsplit(" ", 1)
        assert got == str(widths) and float(err) <= RTOL, (value, proc.stdout)
    proc = subprocess.run([sys.executable, "-c", script], env=dict(env, SWIN_OPT_LINEAR="mkl"),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0 and "SWIN_OPT_LINEAR must be one of swin, onednn, torch" in proc.stderr


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


# --------------------------------------------------------------------------- #
# Blocks' residual adds in the kernels' epilogues (patching.ResidualBlock)
# --------------------------------------------------------------------------- #
def test_timm_block_residuals_fused(torch, opts, dense_calls):
    """Each timm block's two shortcuts are added by the output projection's and
    fc2's kernels (``residual``): same output, one "residual" patch per block; with
    ``mlp=False`` the projection still fuses its add and torch adds the MLP's."""
    original = _timm_model(torch)
    x = _img(torch)
    with torch.inference_mode():
        want = original(x)
    for mlp in (True, False):
        model = copy.deepcopy(original)
        st.swap_attention(model, mlp=mlp, **opts)
        stats = [s for s in st.patch_stats(model) if s["kind"] == "residual"]
        assert [s["name"] for s in stats] == [f"layers.{i}.blocks.{j}" for i in range(3)
                                              for j in (0, 1)]
        dense_calls.clear()
        with torch.inference_mode():
            assert _rel_err(model(x), want) <= RTOL
        assert all(s["kernel_calls"] == 1 and s["fallback_calls"] == 0
                   for s in st.patch_stats(model) if s["kind"] == "residual")
        assert _fused(dense_calls) == (["dense", "mlp"] if mlp else ["dense"]) * 6, dense_calls
        st.restore_attention(model)
        assert st.patch_stats(model) == []


def test_timm_block_residuals_with_stochastic_depth(torch, opts):
    """Training with drop_path > 0 runs timm's block forward (the shortcut is added
    after the drop); without it the fused blocks train with the original's gradients."""
    swin = pytest.importorskip("timm.models.swin_transformer")
    x = _img(torch)
    for rate in (0.0, 0.3):
        torch.manual_seed(0)
        original = sharpen_weights(swin.SwinTransformer(
            img_size=56, patch_size=4, window_size=7, embed_dim=32, depths=(2, 2),
            num_heads=(2, 4), num_classes=10, drop_path_rate=rate)).train()
        model = copy.deepcopy(original)
        st.swap_attention(model, **opts)
        grads = []
        for m in (original, model):
            torch.manual_seed(1)  # the same paths dropped
            m.zero_grad()
            m(x).square().sum().backward()
            grads.append({n: p.grad for n, p in m.named_parameters()})
        for name, g in grads[0].items():
            assert _rel_err(grads[1][name], g) <= RTOL, (rate, name)
        stats = [s for s in st.patch_stats(model) if s["kind"] == "residual"]
        # block 0 of stage 0 has drop_path 0 (timm's linear ramp starts at 0)
        dropping = [s for s in stats if s["fallback_calls"]]
        if rate:
            assert len(dropping) == 3 and all(
                "stochastic depth" in r for s in dropping for r in s["fallback_reasons"]), stats
        else:
            assert dropping == [] and all(s["kernel_calls"] == 1 for s in stats), stats


def test_torchvision_block_residuals_fused(torch, opts, dense_calls):
    """torchvision's V1 blocks fuse both adds (TorchvisionResidual); its V2 blocks
    (post-norm, a subclass) keep their forward."""
    tv_swin = pytest.importorskip("torchvision.models.swin_transformer")
    x = _img(torch)
    for v2 in (False, True):
        torch.manual_seed(0)
        extra = ({"block": tv_swin.SwinTransformerBlockV2,
                  "downsample_layer": tv_swin.PatchMergingV2} if v2 else {})
        model = sharpen_weights(tv_swin.SwinTransformer(
            patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=[7, 7],
            num_classes=10, **extra)).eval()
        with torch.inference_mode():
            want = model(x)
        st.swap_attention(model, **opts)
        dense_calls.clear()
        with torch.inference_mode():
            assert _rel_err(model(x), want) <= RTOL
        stats = [s for s in st.patch_stats(model) if s["kind"] == "residual"]
        fused = _fused(dense_calls)
        if v2:
            assert stats == [] and fused == []
        else:
            assert [s["name"] for s in stats] == ["features.1.0", "features.1.1", "features.3.0",
                                                  "features.3.1"]
            assert all(s["kernel_calls"] == 1 for s in stats), stats
            assert fused == ["dense", "mlp"] * 4, dense_calls
