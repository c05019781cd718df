"""The kernels as a torch operator (swin_opt.torch.ops) and a swapped model's
everyday behaviour: torch.compile / torch.export keep the kernel, tracing and
scripting do not break, autograd runs the gradient kernels (issue 13) with
the gradients of PyTorch's own attention, copies and checkpoints stay
swapped, warmup builds kernels concurrently.

One small random timm Swin (56x56 input, window 7, two stages: three kernel
configurations) serves every model test; one torch.compile and one strict
torch.export of it are the slow parts (~20 s together).
"""

from __future__ import annotations

import copy
import io
import json

import numpy as np
import pytest

from swin_opt import reference as ref
from swin_opt import torch as st
from swin_opt.testing import sharpen_weights

RTOL = 1e-4
N_LAYERS = 4


@pytest.fixture(scope="module")
def ops(torch):
    from swin_opt.torch import ops

    ops.register()
    return ops


@pytest.fixture
def timm_model(torch):
    swin = pytest.importorskip("timm.models.swin_transformer")
    torch.manual_seed(0)
    model = swin.SwinTransformer(img_size=56, patch_size=4, window_size=7, embed_dim=32,
                                 depths=(2, 2), num_heads=(2, 4), num_classes=10)
    return sharpen_weights(model).eval()


@pytest.fixture(scope="module")
def img(torch):
    return torch.randn(2, 3, 56, 56, generator=torch.Generator().manual_seed(1))


def _rel_err(got, want):
    return ((got - want).abs().max() / want.abs().max()).item()


def _attention_stats(model):
    """patch_stats of the attention patches (swap_attention swaps the blocks' MLPs
    too: test_mlp_swap.py checks those)."""
    return [s for s in st.patch_stats(model) if s["kind"] == "attention"]


def _kernel_calls(model):
    return sum(s["kernel_calls"] for s in _attention_stats(model))


def _fallbacks(model):
    return sum(s["fallback_calls"] for s in _attention_stats(model))


# --------------------------------------------------------------------------- #
# The operator
# --------------------------------------------------------------------------- #
def _qkv(torch, shape, heads, window, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(shape, generator=gen) for _ in range(3))
    return q, k, v, torch.randn((ref.table_rows(window), heads), generator=gen)


@pytest.mark.aot
def test_op_window_layout(torch, ops, kernel_cache):
    window = (4, 4)
    key = ops.kernel_key(window, 2, 8, resolution=(8, 8), shift=(2, 2), dtype="float32",
                         cache_dir=kernel_cache)
    q, k, v, table = _qkv(torch, (8, 2, 16, 8), 2, window)
    out = torch.ops.swin_opt.window_attention(q, k, v, table, None, key)
    assert out.shape == (8, 16, 16)
    bias = ref.lookup(table.numpy(), window)
    want = ref.window_attention(q.numpy(), k.numpy(), v.numpy(), bias,
                                ref.shift_mask((8, 8), window, 2))
    assert np.abs(out.numpy() - want).max() <= 1e-5 * max(1, np.abs(want).max())
    # the op names its kernel by the string alone: a process that has not built it
    # (here: the in-process caches emptied) resolves it again at run time
    ops.forget_kernels()
    again = torch.ops.swin_opt.window_attention(q, k, v, table, None, key)
    assert torch.equal(again, out)
    # non-contiguous inputs are made contiguous by the op (inductor may pass any strides)
    qt = q.transpose(2, 3).contiguous().transpose(2, 3)
    assert torch.equal(torch.ops.swin_opt.window_attention(qt, k, v, table, None, key), out)
    # the fake implementation gives the shape and dtype without running anything
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        fq, fk, fv, ft = (mode.from_tensor(t) for t in (q, k, v, table))
        fake = torch.ops.swin_opt.window_attention(fq, fk, fv, ft, None, key)
    assert fake.shape == out.shape and fake.dtype == out.dtype
    torch.library.opcheck(torch.ops.swin_opt.window_attention.default,
                          (q, k, v, table, None, key))


@pytest.mark.aot
def test_op_packed_tokens(torch, ops, kernel_cache):
    window, heads, d = (4, 4), 2, 8
    key = ops.kernel_key(window, heads, d, resolution=(8, 12), shift=(2, 2), layout="tokens",
                         packed_qkv=True, dtype="float32", cache_dir=kernel_cache)
    gen = torch.Generator().manual_seed(3)
    qkv = torch.randn(2, 96, 3, heads, d, generator=gen)
    table = torch.randn(ref.table_rows(window), heads, generator=gen)
    out = torch.ops.swin_opt.window_attention_packed(qkv, table, None, key)
    assert out.shape == (2, 96, heads * d)
    kern = ops.kernel_for(key)
    assert torch.equal(out, kern(qkv, table))
    torch.library.opcheck(torch.ops.swin_opt.window_attention_packed.default,
                          (qkv, table, None, key))


def test_op_linear(torch, ops):
    """swin_opt::linear (the oneDNN projections, opaque to inductor) is F.linear's numbers."""
    ops.register()
    if not torch.backends.mkldnn.is_available():
        pytest.skip("torch built without oneDNN")
    gen = torch.Generator().manual_seed(4)
    x, w, b = (torch.randn(*s, generator=gen) for s in ((3, 5, 24), (40, 24), (40,)))
    with torch.no_grad():
        out = torch.ops.swin_opt.linear(x, w, b)
        want = torch.nn.functional.linear(x, w, b)
    assert out.shape == (3, 5, 40)
    assert (out - want).abs().max().item() <= 1e-5 * want.abs().max().item()
    torch.library.opcheck(torch.ops.swin_opt.linear.default, (x, w, None))
    # its backward (dx through oneDNN, dW and db through torch) is F.linear's
    primal = [t.clone().requires_grad_() for t in (x, w, b)]
    eager = [t.clone().requires_grad_() for t in (x, w, b)]
    dy = torch.randn(3, 5, 40, generator=gen)
    torch.ops.swin_opt.linear(*primal).backward(dy)
    torch.nn.functional.linear(*eager).backward(dy)
    for name, got, expected in zip(("x", "weight", "bias"), primal, eager):
        assert _rel_err(got.grad, expected.grad) <= 1e-5, name
    torch.library.opcheck(torch.ops.swin_opt.linear.default, tuple(primal))


def _eager_attention(torch, q, k, v, table, window, scale, mask=None):
    """Swin's own attention in torch ops (autograd's reference): ``[nW, N, C]``."""
    n, heads = q.shape[2], q.shape[1]
    index = torch.from_numpy(ref.relative_index(window).reshape(-1))
    bias = table[index].view(n, n, heads).permute(2, 0, 1)
    s = (q * scale) @ k.transpose(-2, -1) + bias
    if mask is not None:
        nw = mask.shape[0]
        s = (s.view(-1, nw, heads, n, n) + mask.unsqueeze(1)).view(-1, heads, n, n)
    return (s.softmax(-1) @ v).transpose(1, 2).reshape(q.shape[0], n, -1)


@pytest.mark.aot
@pytest.mark.parametrize("shifted", [False, True])
def test_op_backward_matches_autograd(torch, ops, kernel_cache, shifted):
    """The op's backward (the gradient kernel) against autograd through Swin's
    attention written in torch: dq, dk, dv and the table's gradient."""
    window, heads, head_dim = (4, 4), 2, 8
    extra = dict(resolution=(8, 8), shift=(2, 2)) if shifted else {}
    key = ops.kernel_key(window, heads, head_dim, dtype="float32", cache_dir=kernel_cache,
                         **extra)
    q, k, v, table = _qkv(torch, (8, heads, 16, head_dim), heads, window)
    mask = torch.from_numpy(ref.shift_mask((8, 8), window, (2, 2))).float() if shifted else None
    primal = [t.clone().requires_grad_() for t in (q, k, v, table)]
    eager = [t.clone().requires_grad_() for t in (q, k, v, table)]
    out = torch.ops.swin_opt.window_attention(*primal, None, key)
    want = _eager_attention(torch, *eager, window, head_dim ** -0.5, mask)
    assert _rel_err(out, want) <= RTOL
    dout = torch.randn_like(out)
    out.backward(dout)
    want.backward(dout)
    for name, got, expected in zip(("q", "k", "v", "table"), primal, eager):
        assert _rel_err(got.grad, expected.grad) <= RTOL, name
    torch.library.opcheck(torch.ops.swin_opt.window_attention.default,
                          (*primal, None, key), test_utils=("test_schema",
                                                            "test_autograd_registration",
                                                            "test_faketensor"))
    torch.library.opcheck(torch.ops.swin_opt.window_attention_backward.default,
                          (q, k, v, table, out.detach(), dout, key))


@pytest.mark.aot
def test_packed_op_backward(torch, ops, kernel_cache):
    """The packed op's gradient is one dqkv, as its input is one qkv."""
    window, heads, head_dim = (4, 4), 2, 8
    key = ops.kernel_key(window, heads, head_dim, dtype="float32", cache_dir=kernel_cache,
                         resolution=(8, 8), shift=(2, 2), layout="tokens", packed_qkv=True)
    qkv = torch.randn(2, 64, 3, heads, head_dim, requires_grad=True)
    table = torch.randn(49, heads, requires_grad=True)
    out = torch.ops.swin_opt.window_attention_packed(qkv, table, None, key)
    out.square().sum().backward()
    assert qkv.grad.shape == qkv.shape and table.grad.shape == table.shape
    want = ref.swin_block_attention_tokens_backward(
        *(qkv.detach()[:, :, i].reshape(2, 64, -1).numpy() for i in range(3)),
        table.detach().numpy(), 2 * out.detach().numpy(), resolution=(8, 8), window=window,
        shift=2)
    got = [qkv.grad[:, :, i].reshape(2, 64, -1).numpy() for i in range(3)]
    for g, w in zip(got + [table.grad.numpy()], want):
        assert np.abs(g - w).max() <= RTOL * np.abs(w).max()


def test_op_malformed_config(torch, ops):
    q = torch.zeros(1, 1, 4, 2)
    with pytest.raises(ValueError, match="malformed kernel configuration"):
        torch.ops.swin_opt.window_attention(q, q, q, None, None, "not json")


# --------------------------------------------------------------------------- #
# A swapped model
# --------------------------------------------------------------------------- #
@pytest.mark.aot
def test_training_runs_the_kernels_with_the_same_gradients(torch, timm_model, img, opts):
    """Train mode and autograd: every block runs the kernels forward and backward,
    and every parameter's gradient (the bias tables' included) is the original's."""
    ref_model = copy.deepcopy(timm_model).train()
    assert st.swap_attention(timm_model, **opts) == N_LAYERS
    timm_model.train()
    x1, x2 = img.clone().requires_grad_(), img.clone().requires_grad_()
    ref_model(x1).square().sum().backward()
    timm_model(x2).square().sum().backward()
    # each block's _attn runs the token-layout kernel (its WindowAttention is not called)
    assert _kernel_calls(timm_model) == N_LAYERS and _fallbacks(timm_model) == 0
    assert _rel_err(x2.grad, x1.grad) <= RTOL
    for (name, p), q in zip(ref_model.named_parameters(), timm_model.parameters()):
        assert q.grad is not None and _rel_err(q.grad, p.grad) <= RTOL, name
    # eval mode with grad enabled: the kernels too
    timm_model.eval()
    timm_model(img).sum().backward()
    assert _kernel_calls(timm_model) == 2 * N_LAYERS and _fallbacks(timm_model) == 0


@pytest.mark.aot
def test_torch_compile_trains_through_the_kernels(torch, timm_model, img, opts, run_alone):
    """Under torch.compile the backward operators are traced (AOTAutograd): one
    graph, the kernels forward and backward, the original's gradients. In a fresh
    process: there the first call of everything the patches decide once (oneDNN's
    availability among them) happens while dynamo traces."""
    if run_alone():
        return
    torch._dynamo.reset()
    ref_model = copy.deepcopy(timm_model).train()
    st.swap_attention(timm_model, **opts)
    timm_model.train()
    compiled = torch.compile(timm_model, fullgraph=True)
    ref_model(img).square().sum().backward()
    compiled(img).square().sum().backward()
    assert _kernel_calls(timm_model) == N_LAYERS and _fallbacks(timm_model) == 0
    for (name, p), q in zip(ref_model.named_parameters(), timm_model.parameters()):
        assert _rel_err(q.grad, p.grad) <= RTOL, name
    torch._dynamo.reset()


@pytest.mark.aot
def test_attention_dropout_falls_back_in_training(torch, timm_model, img, opts):
    """The kernels have no dropout: attention dropout > 0 keeps torch's code in train
    mode, with the reason reported; in eval mode (no dropout) the kernels run."""
    for block in (b for layer in timm_model.layers for b in layer.blocks):
        block.attn.attn_drop.p = 0.1
    st.swap_attention(timm_model, **opts)
    timm_model.train()
    timm_model(img).sum().backward()
    reasons = {r for s in st.patch_stats(timm_model) for r in s["fallback_reasons"]}
    assert any("attention dropout" in r for r in reasons), reasons
    assert _kernel_calls(timm_model) == 0
    timm_model.eval()
    with torch.no_grad():
        timm_model(img)
    assert _kernel_calls(timm_model) == N_LAYERS


@pytest.mark.aot
def test_torch_compile_keeps_the_kernel(torch, timm_model, img, opts):
    torch._dynamo.reset()
    with torch.inference_mode():
        want = timm_model(img)
    assert st.swap_attention(timm_model, **opts) == N_LAYERS
    from torch._dynamo.utils import counters

    counters.clear()
    compiled = torch.compile(timm_model)
    with torch.inference_mode():
        got = compiled(img)
        assert _kernel_calls(timm_model) == N_LAYERS
        got2 = compiled(img)
    assert _kernel_calls(timm_model) == 2 * N_LAYERS and _fallbacks(timm_model) == 0
    assert _rel_err(got, want) <= RTOL and torch.equal(got, got2)
    assert not counters["graph_break"], dict(counters["graph_break"])
    assert counters["stats"]["unique_graphs"] == 1
    torch._dynamo.reset()


@pytest.mark.aot
def test_torch_export_strict_keeps_the_kernel(torch, timm_model, img, opts, run_alone):
    """Strict export keeps the custom op; in a fresh process, as above."""
    if run_alone():
        return
    with torch.inference_mode():
        want = timm_model(img)
    st.swap_attention(timm_model, **opts)
    with torch.no_grad():  # with grad enabled, the parameters would need a backward
        ep = torch.export.export(timm_model, (img,), strict=True)
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert "swin_opt.window_attention_packed.default" in targets
    with torch.inference_mode():
        got = ep.module()(img)
    assert _rel_err(got, want) <= RTOL


@pytest.mark.aot
def test_jit_trace_and_script_do_not_break(torch, timm_model, img, opts):
    with torch.inference_mode():
        want = timm_model(img)
    st.swap_attention(timm_model, **opts)
    with torch.no_grad():
        traced = torch.jit.trace(timm_model, img, check_trace=False)
        assert _rel_err(traced(img), want) <= RTOL
    assert {r for s in st.patch_stats(timm_model) for r in s["fallback_reasons"]} == \
        {"scripting/tracing"}
    # scripting compiles the class's methods from source: the instance patch is not
    # involved, and scripting behaves as for the unpatched model
    lin = torch.nn.Linear(4, 4)
    try:
        torch.jit.script(copy.deepcopy(timm_model).eval())
    except Exception as exc:  # timm's Swin is not scriptable; the error must not be ours
        assert "swin_opt" not in repr(exc)
    assert torch.jit.script(lin) is not None


@pytest.mark.aot
def test_save_load_and_deepcopy(torch, timm_model, img, opts):
    with torch.inference_mode():
        want = timm_model(img)
    st.swap_attention(timm_model, **opts)
    buf = io.BytesIO()
    torch.save(timm_model, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    dup = copy.deepcopy(timm_model)
    for model in (loaded, dup):
        assert len(st.patch_stats(model)) == len(st.patch_stats(timm_model))
        with torch.inference_mode():
            assert _rel_err(model(img), want) <= RTOL
        assert _kernel_calls(model) == N_LAYERS
    assert _kernel_calls(timm_model) == 0  # the copies' calls are their own
    # the copies are independent: restoring one leaves the others patched
    assert st.restore_attention(dup) == N_LAYERS
    assert st.patch_stats(dup) == [] and len(_attention_stats(loaded)) == 2 * N_LAYERS
    # and the state dict is unaffected by the patch
    assert set(loaded.state_dict()) == set(timm_model.state_dict())


@pytest.mark.aot
def test_warmup_builds_concurrently(torch, timm_model, img, tmp_path, capfd, ops):
    with torch.inference_mode():
        want = timm_model(img)
    st.swap_attention(timm_model, cache_dir=tmp_path)  # a fresh cache: real builds
    n = st.warmup(timm_model, tuple(img.shape), workers=2, progress=True)
    assert n == 3  # (14x14, shift 0), (14x14, shift 3), (7x7, no shift)
    err = capfd.readouterr().err
    assert "swin_opt: building kernels 3/3" in err
    assert _kernel_calls(timm_model) == 0 and _fallbacks(timm_model) == 0  # a dry run
    built = ops.loaded_keys()
    with torch.inference_mode():
        got = timm_model(img)
    assert _rel_err(got, want) <= RTOL
    assert _kernel_calls(timm_model) == N_LAYERS
    assert ops.loaded_keys() == built  # nothing left to build at the first real call
    assert st.warmup(timm_model, img, progress=False) == 0
    assert "swin_opt" not in capfd.readouterr().err


@pytest.mark.aot
def test_warmup_grad_builds_the_backward_kernels(torch, timm_model, img, tmp_path, ops):
    """``warmup(grad=True)`` also builds each kernel's backward, so that the first
    training step builds nothing."""
    st.swap_attention(timm_model, cache_dir=tmp_path)
    before = ops.loaded_keys()
    assert st.warmup(timm_model, img, progress=False, grad=True) == 6  # 3 forward, 3 backward
    built = ops.loaded_keys()
    assert sum(json.loads(key)["options"].get("grad", False) for key in built - before) == 3
    timm_model.train()
    timm_model(img.clone().requires_grad_()).sum().backward()
    assert _kernel_calls(timm_model) == N_LAYERS and _fallbacks(timm_model) == 0
    assert ops.loaded_keys() == built


@pytest.mark.aot
def test_warmup_grad_builds_both_forms_of_swinv2(torch, img, tmp_path, ops):
    """SwinV2 runs its cosine kernel at inference and the plain kernel on q and k
    normalized in torch in training: ``warmup(grad=True)`` builds both (a dry
    forward without autograd, one with), the plain kernels' backward too, so
    that neither an eval forward nor a training step builds anything."""
    timm_v2 = pytest.importorskip("timm.models.swin_transformer_v2")
    torch.manual_seed(0)
    model = sharpen_weights(timm_v2.SwinTransformerV2(
        img_size=56, patch_size=4, window_size=7, embed_dim=32, depths=(2,), num_heads=(2,),
        num_classes=10)).eval()
    st.swap_attention(model, cache_dir=tmp_path)
    before = ops.loaded_keys()
    st.warmup(model, img, progress=False, grad=True)
    built = ops.loaded_keys() - before
    options = [json.loads(key)["options"] for key in built]
    assert any(o.get("cosine") for o in options)
    assert any(o.get("grad") and not o.get("cosine") for o in options)
    with torch.no_grad():
        model(img)
    model.train()
    model(img).sum().backward()
    assert ops.loaded_keys() == before | built
    assert _kernel_calls(model) == 2 * 2 and _fallbacks(model) == 0  # 2 blocks, 2 forwards


@pytest.mark.aot
def test_torch_export_non_strict_falls_back(torch, timm_model, img, opts):
    """Non-strict export runs the patches on fake tensors: the original attention is
    exported (and says why), never a failure. (The MLP kernel and the patch merge's
    linear kernel have no data-dependent check: their operators are exported.)"""
    with torch.inference_mode():
        want = timm_model(img)
    st.swap_attention(timm_model, **opts)
    with torch.no_grad():
        ep = torch.export.export(timm_model, (img,), strict=False)
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert {t for t in targets if t.startswith("swin_opt.")} == {"swin_opt.mlp.default",
                                                                 "swin_opt.dense.default"}
    reasons = {r for s in st.patch_stats(timm_model) for r in s["compiled_fallback_reasons"]}
    assert reasons == {"non-strict torch.export (use strict=True to export the kernel)"}
    with torch.inference_mode():
        assert _rel_err(ep.module()(img), want) <= RTOL


@pytest.mark.aot
def test_deepcopy_keeps_patch_state_of_subclasses(torch, opts):
    """Patch types with their own state (timm swinv2_cr's per-window pairs) are rebuilt
    by their own __init__ on copies."""
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    model = timm.create_model("swinv2_cr_tiny_224", img_size=(40, 40), embed_dim=16,
                              depths=(2, 2), num_heads=(2, 4), window_size=4,
                              num_classes=10).eval()
    x = torch.randn(2, 3, 40, 40, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        want = model(x)
    st.swap_attention(model, **opts)
    dup = copy.deepcopy(model)
    with torch.inference_mode():
        assert _rel_err(dup(x), want) <= RTOL
    assert _kernel_calls(dup) == N_LAYERS and _fallbacks(dup) == 0
