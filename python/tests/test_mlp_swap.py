"""The MLP of Swin blocks through compiled kernels (swin_opt.dense,
swin_opt.torch.mlp): the ``swin_opt::mlp`` operator against torch's float64
MLP, one library for every row count, and swap_attention's MLP patches in
timm and torchvision models (eager, torch.compile, training, ``mlp=False``,
restore, an activation the kernel does not compute).

Tolerance of the operator: ``1e-5 * max(1, max|reference|)``, the GEMM
tests' (test_matmul.py: float32 products of up to 3072 terms, GELU's erf
polynomial within 4.2e-7); of whole models: test_torch.py's 1e-4 relative.
Kernel builds (a second or two each): the four Swin-T widths, one small odd
configuration, and the tiny models' two widths (32 and 64 channels).
"""

from __future__ import annotations

import copy
import warnings

import pytest

from swin_opt import cache_entries
from swin_opt import dense as dense_kernels
from swin_opt import torch as st
from swin_opt.testing import sharpen_weights

pytestmark = pytest.mark.aot

TOLERANCE = 1e-5
RTOL = 1e-4


@pytest.fixture(scope="module")
def ops(torch):
    from swin_opt.torch import mlp

    mlp.register()
    return mlp


def _reference(torch, x, w1, b1, w2, b2, residual=None):
    """The MLP in float64, as torch computes it (nn.GELU's erf form)."""
    F = torch.nn.functional
    d = [None if t is None else t.double() for t in (x, w1, b1, w2, b2, residual)]
    y = F.linear(F.gelu(F.linear(d[0], d[1], d[2])), d[3], d[4])
    return y if residual is None else y + d[5]


def _check(torch, got, want):
    assert got.dtype == torch.float32 and got.shape == want.shape
    error = (got.double() - want).abs().max().item()
    allowed = TOLERANCE * max(1.0, want.abs().max().item())
    assert error <= allowed, f"max |error| {error:.3g} > {allowed:.3g}"


def _check_op(torch, key, x, w1, b1, w2, b2, residual=None):
    """swin_opt::mlp of ``key`` against the float64 reference."""
    _check(torch, torch.ops.swin_opt.mlp(x, w1, b1, w2, b2, residual, key),
           _reference(torch, x, w1, b1, w2, b2, residual))


def _layers(torch, channels, hidden, out, seed, bias=True):
    gen = torch.Generator().manual_seed(seed)
    w1 = torch.randn(hidden, channels, generator=gen) / channels ** 0.5
    w2 = torch.randn(out, hidden, generator=gen) / hidden ** 0.5
    b1 = torch.randn(hidden, generator=gen) if bias else None
    b2 = torch.randn(out, generator=gen) if bias else None
    return w1, b1, w2, b2, gen


# --------------------------------------------------------------------------- #
# The operator
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("channels", [96, 192, 384, 768])
def test_op_at_swin_t_widths(torch, ops, kernel_cache, channels):
    """Swin-T's MLPs (hidden = 4C) at an odd row count, with and without the
    residual."""
    w1, b1, w2, b2, gen = _layers(torch, channels, 4 * channels, channels, channels)
    key = ops.mlp_key(channels, 4 * channels, channels, cache_dir=kernel_cache)
    x = torch.randn(53, channels, generator=gen)
    residual = torch.randn(53, channels, generator=gen)
    with torch.no_grad():
        _check_op(torch, key, x, w1, b1, w2, b2)
        _check_op(torch, key, x, w1, b1, w2, b2, residual)


def test_op_one_library_for_every_row_count(torch, ops, tmp_path):
    """An odd configuration (C 13, hidden 37, out 11: partial panels, K not a
    multiple of anything), rows around the kernel's tiles, leading axes of any
    shape, a layer without bias: one build, one cache entry."""
    before = dense_kernels.builds()
    w1, _, w2, b2, gen = _layers(torch, 13, 37, 11, 0)
    key = ops.mlp_key(13, 37, 11, cache_dir=tmp_path)
    with torch.no_grad():
        for shape in [(1,), (2,), (7,), (8,), (9,), (31,), (2, 3, 5), (4, 49)]:
            x = torch.randn(*shape, 13, generator=gen)
            residual = torch.randn(*shape, 11, generator=gen)
            _check_op(torch, key, x, w1, None, w2, b2)
            _check_op(torch, key, x, w1, None, w2, b2, residual)
        empty = torch.ops.swin_opt.mlp(torch.zeros(0, 13), w1, None, w2, b2, None, key)
    assert empty.shape == (0, 11)
    assert dense_kernels.builds() == before + 1
    (entry,) = cache_entries(tmp_path)
    assert entry.description.startswith("mlp 13->37->11 f32"), entry.description


def test_numpy_kernel(torch, kernel_cache):
    """swin_opt.dense without torch's operator: packed NumPy weights, ``out`` in place."""
    import numpy as np

    from swin_opt import linear_mlir

    kern = dense_kernels.compile_mlp(13, 37, 11, cache_dir=kernel_cache)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((10, 13), dtype=np.float32)
    w1, w2 = (rng.standard_normal(s, dtype=np.float32) / 6 for s in ((37, 13), (11, 37)))
    b1, b2, residual = (rng.standard_normal(s, dtype=np.float32) for s in (37, 11, (10, 11)))
    out = np.full((10, 11), np.nan, np.float32)
    assert kern(x, [(kern.pack(w1), b1), (kern.pack(w2), b2)], residual, out=out) is out
    want = linear_mlir.dense_reference(x, [(w1, b1), (w2, b2)], residual)
    assert np.abs(out - want).max() <= TOLERANCE * max(1.0, np.abs(want).max())
    with pytest.raises(ValueError, match=r"layer 1 weight \(packed\) must have shape \[1, 37, "):
        kern(x, [(kern.pack(w1), b1), (w2, b2)])


def test_numpy_kernel_from_several_threads(torch, kernel_cache):
    """Each thread calls with its own argument descriptors (DenseKernel keeps one set
    per thread and entry point): concurrent calls of different row counts, with and
    without the residual, each get their own result."""
    import threading

    import numpy as np

    from swin_opt import linear_mlir

    kern = dense_kernels.compile_mlp(13, 37, 11, cache_dir=kernel_cache)
    rng = np.random.default_rng(5)
    w1, w2 = (rng.standard_normal(s, dtype=np.float32) / 6 for s in ((37, 13), (11, 37)))
    b1, b2 = rng.standard_normal(37, dtype=np.float32), rng.standard_normal(11, dtype=np.float32)
    w1p, w2p = kern.pack(w1), kern.pack(w2)
    errors = []

    def work(rows, residual):
        x = rng_x[rows]
        res = x[:, :11].copy() if residual else None
        want = linear_mlir.dense_reference(x, [(w1, b1), (w2, b2)], res)
        for _ in range(200):
            got = kern(x, [(w1p, b1), (w2p, b2)], res, threads=1)
            if np.abs(got - want).max() > TOLERANCE * max(1.0, np.abs(want).max()):
                errors.append((rows, residual))
                return

    rng_x = {rows: rng.standard_normal((rows, 13), dtype=np.float32) for rows in (3, 17, 64)}
    threads = [threading.Thread(target=work, args=(rows, residual))
               for rows, residual in ((3, False), (17, True), (64, False), (64, True))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_op_packs_updated_weights_again(torch, ops, kernel_cache):
    """The packed copy of a weight follows its in-place updates (its version) and
    its replacement; forget_packed_weights covers writes through .data; weights
    without a version (inference tensors) are packed on every call."""
    w1, b1, w2, b2, gen = _layers(torch, 13, 37, 11, 1)
    key = ops.mlp_key(13, 37, 11, cache_dir=kernel_cache)
    x = torch.randn(5, 13, generator=gen)

    def check():  # w1 and w2 are rebound below
        _check_op(torch, key, x, w1, b1, w2, b2)

    with torch.no_grad():
        check()
        w1.mul_(-2.0)
        check()
        w2 = torch.randn(11, 37, generator=gen)
        check()
        w2.data.add_(1.0)  # not versioned
        ops.forget_packed_weights()
        check()
    with torch.inference_mode():  # inference tensors keep no version: packed every call
        w1 = torch.randn(37, 13, generator=gen)
        check()
        w1.mul_(-1.0)
        check()


def test_op_packs_converted_weights_again(torch, ops, kernel_cache):
    """A conversion (``module.bfloat16()`` then ``.float()``, ``.to(dtype)``)
    replaces a weight's memory through ``.data``, keeping the tensor and its
    version: its packed copy is made again, though the new memory could take the
    old one's address (the bfloat16 copy is made while the old memory is alive,
    the float32 one right after it is freed: glibc's allocator may give the same
    block back), which the packed copy's stamp keeps taken. Twenty round trips:
    without the stamp's hold, some take the old address (seen: one in three)."""
    w1, b1, w2, b2, gen = _layers(torch, 32, 96, 32, 4)
    key = ops.mlp_key(32, 96, 32, cache_dir=kernel_cache)
    x = torch.randn(5, 32, generator=gen)
    with torch.no_grad():
        _check_op(torch, key, x, w1, b1, w2, b2)
        for _ in range(20):
            for w in (w1, w2):
                before = w.data_ptr()
                w.mul_(1.0 + 2.0 ** -6)  # a new value to round away (bumps the version)
                _check_op(torch, key, x, w1, b1, w2, b2)
                w.data = w.data.bfloat16()  # bf16 rounding: 4e-3, far above TOLERANCE
                w.data = w.data.float()
                _check_op(torch, key, x, w1, b1, w2, b2)
                assert w.data_ptr() != before


def test_op_runs_on_torchs_thread_count(torch, ops, kernel_cache):
    """The library's OpenMP runtime (libomp or libgomp) gets the calling thread's
    torch thread count on each call."""
    import ctypes

    w1, b1, w2, b2, gen = _layers(torch, 13, 37, 11, 3)
    key = ops.mlp_key(13, 37, 11, cache_dir=kernel_cache)
    runtime = ctypes.CDLL(str(ops.kernel_for(key).library))  # its omp_* are its runtime's
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            with torch.no_grad():
                torch.ops.swin_opt.mlp(torch.randn(9, 13, generator=gen), w1, b1, w2, b2, None,
                                       key)
            assert runtime.omp_get_max_threads() == threads
    finally:
        torch.set_num_threads(before)


def test_op_refuses_wrong_shapes_and_autograd(torch, ops, kernel_cache):
    w1, b1, w2, b2, _ = _layers(torch, 13, 37, 11, 2)
    key = ops.mlp_key(13, 37, 11, cache_dir=kernel_cache)
    with pytest.raises(ValueError, match="w1 must be a float32 CPU tensor of shape"):
        torch.ops.swin_opt.mlp(torch.zeros(2, 13), w1.t(), b1, w2, b2, None, key)
    with pytest.raises(ValueError, match="malformed dense kernel configuration"):
        torch.ops.swin_opt.mlp(torch.zeros(2, 13), w1, b1, w2, b2, None, "{}")
    with pytest.raises(RuntimeError, match="has no backward"):
        torch.ops.swin_opt.mlp(torch.zeros(2, 13, requires_grad=True), w1, b1, w2, b2, None, key)


# --------------------------------------------------------------------------- #
# Swapped models
# --------------------------------------------------------------------------- #
@pytest.fixture
def timm_model(torch):
    swin = pytest.importorskip("timm.models.swin_transformer")
    torch.manual_seed(0)
    # (no stochastic depth: training runs must compare with the original's)
    model = swin.SwinTransformer(img_size=56, patch_size=4, window_size=7, embed_dim=32,
                                 depths=(2, 2), num_heads=(2, 4), num_classes=10,
                                 drop_path_rate=0.0)
    return sharpen_weights(model).eval()


@pytest.fixture(scope="module")
def img(torch):
    return torch.randn(3, 3, 56, 56, generator=torch.Generator().manual_seed(1))


def _rel_err(got, want):
    return ((got - want).abs().max() / want.abs().max()).item()


def _mlp_stats(model):
    return [s for s in st.patch_stats(model) if s["kind"] == "mlp"]


def test_timm_model_eager_and_compiled(torch, timm_model, img, opts):
    torch._dynamo.reset()
    with torch.inference_mode():
        want = timm_model(img)
    # the MLP matters: without it the output is far off
    without = copy.deepcopy(timm_model)
    for block in (b for layer in without.layers for b in layer.blocks):
        block.mlp.fc2.weight.data.zero_()
    with torch.inference_mode():
        assert _rel_err(without(img), want) > 100 * RTOL
    assert st.swap_attention(timm_model, **opts) == 4
    stats = _mlp_stats(timm_model)
    assert [s["name"] for s in stats] == [f"layers.{i}.blocks.{j}.mlp" for i in (0, 1)
                                          for j in (0, 1)]
    assert all(s["framework"] == "timm" and s["method"] == "forward" for s in stats)
    with torch.inference_mode():
        assert _rel_err(timm_model(img), want) <= RTOL
    compiled = torch.compile(timm_model, fullgraph=True)
    with torch.inference_mode():
        assert _rel_err(compiled(img), want) <= RTOL
    stats = _mlp_stats(timm_model)
    assert all(s["kernel_calls"] == 2 and s["fallback_calls"] == 0 for s in stats), stats
    torch._dynamo.reset()


def test_timm_training_falls_back(torch, timm_model, img, opts):
    """Under autograd the MLPs run torch's code (the kernel has no backward), say
    why, and train as the original; fallback=False makes it an error."""
    ref_model = copy.deepcopy(timm_model).train()
    st.swap_attention(timm_model, **opts)
    timm_model.train()
    ref_model(img).square().sum().backward()
    timm_model(img).square().sum().backward()
    for s in _mlp_stats(timm_model):
        assert s["kernel_calls"] == 0 and s["fallback_calls"] == 1, s
        (reason,) = s["fallback_reasons"]
        assert reason.startswith("autograd: the MLP kernel has no backward"), reason
    for (name, p), q in zip(ref_model.named_parameters(), timm_model.parameters()):
        assert _rel_err(q.grad, p.grad) <= RTOL, name
    with torch.no_grad():  # train mode without autograd, dropout 0: the kernel
        timm_model(img)
    assert all(s["kernel_calls"] == 1 for s in _mlp_stats(timm_model))
    st.swap_attention(timm_model, fallback=False, **opts)
    with pytest.raises(st.KernelUnavailable, match="mlp .*no backward"):
        timm_model(img)


def test_another_device_is_declined_quietly(torch, timm_model, opts):
    """The MLP kernel is the CPU's: on another device (a GPU; here "meta") the
    module runs its own code, counted, without a warning and, with
    ``fallback=False``, without an error (the model runs there by choice)."""
    st.swap_attention(timm_model, fallback=False, **opts)
    mlp = copy.deepcopy(timm_model.layers[0].blocks[0].mlp).to("meta")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with torch.no_grad():
            out = mlp(torch.empty(2, 49, 32, device="meta"))
    assert out.device.type == "meta" and out.shape == (2, 49, 32)
    (stats,) = [s for s in st.patch_stats(mlp) if s["kind"] == "mlp"]
    assert stats["kernel_calls"] == 0 and stats["fallback_calls"] == 1, stats
    assert list(stats["fallback_reasons"]) == ["device meta (the MLP kernel is the CPU's)"]


def test_mlp_false_and_restore(torch, timm_model, img, opts):
    mlps = [b.mlp for layer in timm_model.layers for b in layer.blocks]
    assert st.swap_attention(timm_model, mlp=False, **opts) == 4
    assert _mlp_stats(timm_model) == [] and st.unpatched(timm_model) == []
    assert not any("forward" in vars(m) for m in mlps)
    assert st.swap_attention(timm_model, **opts) == 4
    assert all("forward" in vars(m) for m in mlps)
    assert st.swap_attention(timm_model, mlp=False, **opts) == 4  # undoes the MLP patches
    assert not any("forward" in vars(m) for m in mlps)
    st.swap_attention(timm_model, **opts)
    assert st.restore_attention(timm_model) == 4  # attention layers; the MLPs go too
    assert st.patch_stats(timm_model) == [] and not any("forward" in vars(m) for m in mlps)


def test_tanh_gelu_runs_its_kernel_and_others_stay(torch, timm_model, img, opts):
    """GELU's tanh form gets a kernel of its own (it differs from the erf form by
    up to 5e-4 per element: the erf kernel would fail the comparison); an
    activation the kernel does not compute keeps torch's code and says why."""
    tanh_block, relu_block = timm_model.layers[1].blocks
    tanh_block.mlp.act = torch.nn.GELU(approximate="tanh")
    relu_block.mlp.act = torch.nn.ReLU()
    with torch.inference_mode():
        want = timm_model(img)
    with pytest.warns(UserWarning, match="not patching timm .*Mlp .*ReLU"):
        st.swap_attention(timm_model, **opts)
    (left,) = st.unpatched(timm_model)
    assert left["name"] == "layers.1.blocks.1.mlp" and "ReLU" in left["reason"], left
    assert "forward" not in vars(relu_block.mlp) and len(_mlp_stats(timm_model)) == 3
    with torch.inference_mode():
        assert _rel_err(timm_model(img), want) <= RTOL
    assert all(s["kernel_calls"] == 1 for s in _mlp_stats(timm_model))


def _activations(torch):
    """``(name, module)`` of the GELUs the frameworks make, and one that is not."""
    acts = [("nn.GELU", torch.nn.GELU()), ("nn.GELU(tanh)", torch.nn.GELU(approximate="tanh")),
            ("nn.ReLU", torch.nn.ReLU())]
    timm_acts = pytest.importorskip("timm.layers.activations")
    acts += [("timm GELU", timm_acts.GELU()), ("timm GELUTanh", timm_acts.GELUTanh())]
    hf = pytest.importorskip("transformers.activations")
    acts += [(f"transformers {name}", hf.ACT2FN[name])
             for name in ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast")]
    return acts


def test_gelu_forms_are_what_the_modules_compute(torch):
    """Each activation the MLP patch maps to a kernel form computes that form (to
    float32 rounding); the others are refused with their name."""
    from swin_opt.torch.mlp import _gelu_form

    x = 6 * torch.randn(4096, generator=torch.Generator().manual_seed(7))
    F = torch.nn.functional
    exact = {"gelu": F.gelu(x.double()), "gelu_tanh": F.gelu(x.double(), approximate="tanh")}
    for name, act in _activations(torch):
        form, why = _gelu_form(act)
        if name == "nn.ReLU":
            assert form is None and "ReLU" in why
            continue
        assert form is not None, (name, why)
        error = (act(x).double() - exact[form]).abs().max().item()
        assert error <= 1e-5, (name, form, error)


def test_op_tanh_gelu(torch, ops, kernel_cache):
    """The tanh form's kernel against torch's float64 ``gelu(approximate="tanh")``
    (inputs of up to ~8 in magnitude: tanh saturates, the cubic matters)."""
    w1, b1, w2, b2, gen = _layers(torch, 40, 72, 24, 5)
    x = 4 * torch.randn(29, 40, generator=gen)
    key = ops.mlp_key(40, 72, 24, "gelu_tanh", cache_dir=kernel_cache)
    assert key != ops.mlp_key(40, 72, 24, cache_dir=kernel_cache)
    F = torch.nn.functional
    d = [t.double() for t in (x, w1, b1, w2, b2)]
    want = F.linear(F.gelu(F.linear(d[0], d[1], d[2]), approximate="tanh"), d[3], d[4])
    with torch.no_grad():
        _check(torch, torch.ops.swin_opt.mlp(x, w1, b1, w2, b2, None, key), want)
    from swin_opt import linear_mlir

    numpy_want = linear_mlir.dense_reference(x.numpy(), [(w1.numpy(), b1.numpy()),
                                                        (w2.numpy(), b2.numpy())],
                                             activation="gelu_tanh")
    assert abs(numpy_want - want.numpy()).max() <= 1e-9 * abs(want).max().item()


def test_torchvision_model(torch, opts):
    tv_swin = pytest.importorskip("torchvision.models.swin_transformer")
    torch.manual_seed(0)
    model = tv_swin.SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2],
                                    num_heads=[2, 4], window_size=[7, 7], num_classes=10)
    sharpen_weights(model)
    x = torch.randn(2, 3, 56, 56, generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        want = model(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert st.swap_attention(model, **opts) == 4
    with torch.inference_mode():
        assert _rel_err(model(x), want) <= RTOL
    stats = _mlp_stats(model)
    assert [s["name"] for s in stats] == [f"features.{i}.{j}.mlp" for i in (1, 3) for j in (0, 1)]
    assert all(s["framework"] == "torchvision" and s["kernel_calls"] == 1 for s in stats), stats


# --------------------------------------------------------------------------- #
# The other families' MLPs: BEiT, MaxViT, data2vec-vision
# --------------------------------------------------------------------------- #
_MAXVIT_SMALL = dict(img_size=64, embed_dim=(16, 16), depths=(1, 1), stem_width=16,
                     transformer_dim_head=8, num_classes=10, transformer_window_size=4,
                     transformer_grid_size=4)


def _family_model(torch, family):
    """``(model, input, MLP sites patched, dense layers patched)``: small random
    configurations of the real classes."""
    torch.manual_seed(0)
    if family in ("timm_beit", "maxvit_rw", "maxvit_pm", "maxvit_tf"):
        timm = pytest.importorskip("timm")
        if family == "timm_beit":
            model = timm.create_model("beit_base_patch16_224", pretrained=False, img_size=32,
                                      patch_size=8, embed_dim=32, depth=2, num_heads=4,
                                      num_classes=5)
            mlps, linears, size = [f"blocks.{i}.mlp" for i in (0, 1)], [], 32
        else:
            arch = {"maxvit_rw": "maxvit_nano_rw_256", "maxvit_pm": "maxvit_tiny_pm_256",
                    "maxvit_tf": "maxvit_tiny_tf_224"}[family]
            model = timm.create_model(arch, pretrained=False, **_MAXVIT_SMALL)
            # block and grid attention of each stage's one block ("pm": one parallel MLP)
            per_block = ("attn.mlp",) if family == "maxvit_pm" else ("attn_block.mlp",
                                                                     "attn_grid.mlp")
            mlps = [f"stages.{i}.blocks.0.{part}" for i in (0, 1) for part in per_block]
            linears, size = [], 64
    else:
        hf = pytest.importorskip("transformers")
        config_cls, model_cls = {"hf_beit": (hf.BeitConfig, hf.BeitModel),
                                 "data2vec": (hf.Data2VecVisionConfig,
                                              hf.Data2VecVisionModel)}[family]
        model = model_cls(config_cls(image_size=32, patch_size=8, hidden_size=24,
                                     num_hidden_layers=2, num_attention_heads=3,
                                     intermediate_size=37, use_relative_position_bias=True,
                                     layer_scale_init_value=0.1, hidden_dropout_prob=0.0))
        size = 32
        if family == "hf_beit":
            mlps, linears = [f"layers.{i}.mlp" for i in (0, 1)], []
        else:
            mlps = []
            linears = [f"encoder.layer.{i}.{part}.dense" for i in (0, 1)
                       for part in ("intermediate", "output")]
    x = torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(2))
    return sharpen_weights(model, seed=1).eval(), x, mlps, linears


@pytest.mark.parametrize("family", ["timm_beit", "maxvit_rw", "maxvit_pm", "maxvit_tf",
                                    "hf_beit", "data2vec"])
def test_other_families(torch, opts, family):
    """BEiT's and MaxViT's MLPs run the MLP kernel (MaxViT's TensorFlow ports the
    tanh form's), data2vec-vision's split MLP the dense kernels, and the model
    computes what it did."""
    model, x, mlps, linears = _family_model(torch, family)
    # no_grad, not inference_mode: transformers caches BEiT's index made in the
    # first forward, and an inference tensor there would break later training
    with torch.no_grad():
        want = model(x)
    want = getattr(want, "last_hidden_state", want)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing left unpatched
        st.swap_attention(model, **opts)
    with torch.no_grad():
        got = model(x)
    assert _rel_err(getattr(got, "last_hidden_state", got), want) <= RTOL
    stats = st.patch_stats(model)
    ran = {s["name"]: s["kernel_calls"] for s in stats if s["kind"] in ("mlp", "linear")}
    for name in mlps + linears:
        assert ran.get(name, 0) == 1, (name, ran)
    assert sorted(s["name"] for s in stats if s["kind"] == "mlp") == sorted(mlps)
    assert st.unpatched(model) == []
