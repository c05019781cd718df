"""PyTorch on CUDA: the ``swin_opt::`` operators' CUDA implementations
(swin_opt.torch.ops) and swapped models on a GPU.

Without a GPU (every machine this project is built on) these tests exercise:

* the registration: every ``swin_opt::`` operator has a CUDA kernel in the
  dispatcher's table;
* the patches' decision (``patching.kernel_target``) on devices that need no
  tensor: a CUDA device gives the GPU kernel of its chip (``sm_XY`` of its
  compute capability), under CUDA autocast in autocast's dtype; other devices
  fall back; a swapped module called with a stand-in CUDA input asks for the
  GPU kernel (also in training, in every dtype);
* the configuration -> GPU kernel path: the Swin-T stage-1 configurations
  built for the chip string the operator picks on an H200 (sm_90): swin-aot,
  the host runtime built with cc, the PTX assembled by ptxas; nothing runs.
  SwinV2's cosine kernels too (the warp kernel for float16). Where there is no
  GPU kernel (no swin-aot, no toolkit, a window past 1024 tokens) the patch
  gets a fallback with its reason, never an error (SwinV2 picks its form,
  cosine at inference and plain in training, the same on every device:
  ``patching.cosine_kernel_scale``, tested in test_torch_cosine.py, and the
  simulated SwinV2 runs below);
* the CUDA implementation itself on CPU tensors standing in for CUDA ones,
  with the chip and the launch replaced (``swin_opt.cuda.torch_launch``):
  the kernel it picks, the tensors it hands over (in place, the table and
  padding rows in q's dtype, the output from ``torch.empty``) and the count;
  ``torch_launch`` with torch's device guard and stream replaced: the device
  made current, the pointers and the stream handle given to the runtime.
  Not exercised here: the driver, a real device's stream, the numbers the
  GPU computes (lit's GPU/runtime*.test run the host runtime on a stand-in
  driver);
* a swapped timm model through that whole path, the launch simulated by
  computing the kernel's configuration with torch into the output it is
  handed (in a process of its own): eval in float32 and bfloat16, training
  (autograd through the CUDA backward), ``torch.compile(fullgraph=True)``;
  a swapped timm SwinV2 the same way (eval on the cosine kernels, training
  with ``dlogit_scale`` on the plain ones);
  small timm MaxViT (block and grid, TF table) and CoAtNet (NCHW whole-map
  attention) models the same way (eval in both dtypes, training); small
  BEiTs (timm's, transformers' BeitModel and Data2VecVisionModel: the
  class-token GPU kernels) the same way (eval in both dtypes, training);
* the torch computation of the CUDA backward and of the operators' fallback
  (swin_opt.torch.attention_math) against the CPU kernels, forward and
  gradients, for every layout, and its backward against autograd of its
  forward: CPU tensors, the same torch code the GPU runs.

With a GPU (``requires_gpu``; scripts/device/check.sh runs them on the lent
machine, from kernels recorded here by ``python3 test_torch_cuda.py --record``,
see scripts/device/record.py): the operators' numbers against the float64
reference for float16, bfloat16 and float32 in the window, token (shifted,
padded both ways) and packed layouts, and float32 with TF32 allowed (the warp
kernel on bf16 terms); their gradients; the cosine operator in each dtype; a swapped timm model
(swapped then moved, moved then swapped; float32 and both autocast dtypes)
against the original, also in training (gradients), under
``torch.compile(fullgraph=True)`` and in a captured CUDA graph; CPU and GPU
calls of one model in turn; a second device when there is one; a swapped timm
SwinV2 (the cosine GPU kernels in eval, the plain ones on q/k prepared in
torch in training) against the original; the BEiT-base operator (class token, N = 197) and the small
BEiTs against the original, eval and training.
"""

from __future__ import annotations

import contextlib
import copy
import json
import types
import warnings

import numpy as np
import pytest

from swin_opt import cuda
from swin_opt import reference as ref
from swin_opt.testing import sharpen_weights

torch = pytest.importorskip("torch")

from swin_opt import torch as st  # noqa: E402
from swin_opt.torch import attention_math, ops  # noqa: E402
from swin_opt.torch.fallback import Fallback, FallbackWarning  # noqa: E402
from swin_opt.torch.patching import GpuDtype, kernel_target  # noqa: E402

ops.register()

_GPU = torch.cuda.is_available() and cuda.available() is not None
requires_gpu = pytest.mark.skipif(not _GPU, reason="no CUDA GPU for torch on this machine")

#: The chip the GPU tests' kernels are recorded for (scripts/device: an H200).
RECORDED_CHIP = "sm_90"
#: The CPU the GPU tests that also run CPU kernels build them for: one whose
#: kernels recorded here run on the GPU machine (a "native" one would be this
#: machine's). The checks of the native CPU kernels have "cpu_kernel" in their
#: names: scripts/device/check.sh leaves them out.
PORTABLE_CPU = "x86-64-v3"
TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16,
                "bfloat16": torch.bfloat16}

# The operator configurations the GPU tests run (also recorded for them).
OP_CASES = {
    "windows-shifted": dict(window=(7, 7), heads=3, head_dim=32, resolution=(14, 14),
                            shift=(3, 3)),
    "windows-8x8": dict(window=(8, 8), heads=4, head_dim=64),
    "tokens-shift-then-pad": dict(window=(7, 7), heads=3, head_dim=32, resolution=(17, 23),
                                  shift=(3, 3), layout="tokens", padding="shift_then_pad"),
    "tokens-pad-then-shift": dict(window=(7, 7), heads=3, head_dim=32, resolution=(17, 23),
                                  shift=(3, 3), layout="tokens", padding="pad_then_shift"),
    "packed": dict(window=(7, 7), heads=3, head_dim=32, resolution=(14, 14), shift=(3, 3),
                   layout="tokens", packed_qkv=True),
    # BEiT-base: global attention over the 14x14 grid and a class token (N = 197)
    "beit-base": dict(window=(14, 14), heads=12, head_dim=64, class_token=True),
}

#: BEiT's families (issue 28): timm's, transformers' BeitModel and
#: Data2VecVisionModel; on the 56x56 images of _img with 8x8 patches, a 7x7 grid
#: and its class token (N = 50).
BEIT_FAMILIES = ["timm", "transformers-beit", "transformers-data2vec"]


def op_key(case: dict, dtype: str, cache_dir=None) -> str:
    """The operator's config string of an OP_CASES entry (its kernels built in
    ``cache_dir``: the swin-aot command, which aot-replay.py keys on, is the same)."""
    opts = {k: v for k, v in case.items() if k not in ("window", "heads", "head_dim")}
    return ops.kernel_key(case["window"], case["heads"], case["head_dim"], dtype=dtype,
                          cache_dir=cache_dir, **opts)


def op_inputs(cfg, dtype, device="cpu", batch=2, seed=0, requires_grad=False):
    """Random inputs of an operator of ``cfg``: ``(inputs, table, pad_qkv)``, inputs
    being ``[q, k, v]`` or ``[qkv]`` in its layout."""
    g = torch.Generator().manual_seed(seed)
    n, c = cfg.tokens_per_window, cfg.channels

    def rand(*shape):
        t = torch.randn(*shape, generator=g).to(device=device, dtype=dtype)
        return t.requires_grad_(requires_grad)

    table = rand(cfg.table_rows, cfg.heads)
    if cfg.layout == "tokens":
        tokens = int(np.prod(cfg.resolution))
        pad = None if cfg.padded_resolution == tuple(cfg.resolution) else \
            torch.randn(3, c, generator=g).to(device)
        if cfg.packed_qkv:
            return [rand(batch, tokens, 3, cfg.heads, cfg.head_dim)], table, pad
        return [rand(batch, tokens, c) for _ in range(3)], table, pad
    windows = batch * (cfg.windows_per_image or 1)
    return [rand(windows, cfg.heads, n, cfg.head_dim) for _ in range(3)], table, None


def call_op(key, inputs, table, pad):
    """The forward operator of ``key`` on ``inputs`` (``[q, k, v]`` or ``[qkv]``)."""
    if len(inputs) == 1:
        return torch.ops.swin_opt.window_attention_packed(inputs[0], table, pad, key)
    return torch.ops.swin_opt.window_attention(*inputs, table, pad, key)


def reference_output(cfg, inputs, table, pad):
    """The float64 reference (swin_opt.reference) of an operator call."""
    f64 = [t.detach().double().cpu().numpy() for t in inputs]
    t64 = table.detach().double().cpu().numpy()
    if cfg.class_token:
        return ref.window_attention(*f64, bias=ref.class_token_lookup(t64, cfg.window))
    if cfg.layout != "tokens":
        mask = ref.shift_mask(cfg.padded_resolution, cfg.window, cfg.shift) \
            if cfg.resolution is not None and any(cfg.shift) else None
        return ref.window_attention(*f64, bias=ref.lookup(t64, cfg.window), mask=mask)
    if cfg.packed_qkv:
        f64 = [a.reshape(a.shape[0], a.shape[1], -1) for a in np.split(f64[0], 3, axis=2)]
    return ref.swin_block_attention_tokens(
        *f64, t64, resolution=cfg.resolution, window=cfg.window, shift=cfg.shift,
        padding=cfg.padding,  # the kernels take the padding rows in q's dtype
        pad_qkv=None if pad is None else pad.to(inputs[0].dtype).double().cpu().numpy())


def rel_err(got, want) -> float:
    got = got.detach().double().cpu().numpy() if isinstance(got, torch.Tensor) else got
    return float(np.abs(got - want).max() / max(1.0, np.abs(want).max()))


@contextlib.contextmanager
def no_fallback():
    """FallbackWarning as an error: the call must not compute with torch's operators."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        yield


@pytest.fixture
def chip(monkeypatch):
    """Every CUDA device is an sm_90 (what the operators would ask an H200)."""
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: (9, 0))
    monkeypatch.setattr(ops, "_chips", {})
    return "sm_90"


@pytest.fixture
def launches(monkeypatch):
    """Replaces the GPU launch of the CUDA implementations: records (kernel,
    tensors, count, entry point's ABI or None for the forward) instead."""
    calls = []
    monkeypatch.setattr(cuda, "torch_launch",
                        lambda k, t, c, abi=None: calls.append((k, t, c, abi)))
    return calls


# --------------------------------------------------------------------------- #
# Registration and the patches' decision (no swin-aot, no GPU)
# --------------------------------------------------------------------------- #
def test_every_operator_has_a_cuda_kernel():
    # Every attention operator; not swin_opt::mlp and ::dense, CPU float32 kernels
    # whose callers take torch's path on other devices before calling them.
    names = [n for n in torch._C._dispatch_get_all_op_names()
             if n.startswith("swin_opt::") and n not in ("swin_opt::mlp", "swin_opt::dense")]
    assert {f"swin_opt::{n}" for n in ops.CUDA_IMPLEMENTATIONS} <= set(names)
    for name in names:
        assert torch._C._dispatch_has_kernel_for_dispatch_key(name, "CUDA"), name


def test_kernel_target_on_each_device(monkeypatch):
    asked = []
    monkeypatch.setattr(ops, "cuda_chip", lambda index: asked.append(index) or "sm_90")
    assert kernel_target(torch.device("cpu"), torch.float32) == "float32"
    assert kernel_target(torch.device("cuda", 1), torch.float16) == GpuDtype("float16", "sm_90")
    assert asked == [1]
    assert kernel_target(torch.device("cuda"), torch.bfloat16) == GpuDtype("bfloat16", "sm_90")
    for device, dtype, why in ((torch.device("meta"), torch.float32, "device meta"),
                               (torch.device("cuda"), torch.float64, "dtype torch.float64"),
                               (torch.device("cpu"), torch.float64, "dtype torch.float64")):
        with pytest.raises(Fallback, match=why):
            kernel_target(device, dtype)
    # CUDA autocast: the projections give autocast's dtype, the kernel's
    monkeypatch.setattr(torch, "is_autocast_enabled", lambda device_type=None:
                        device_type == "cuda")
    monkeypatch.setattr(torch, "get_autocast_dtype", lambda device_type: torch.bfloat16)
    assert kernel_target(torch.device("cuda"), torch.float32) == GpuDtype("bfloat16", "sm_90")
    assert kernel_target(torch.device("cpu"), torch.float32) == "float32"


def test_recording_for_a_chip_records_gpu_kernels_on_the_cpu():
    with ops.recording(chip="sm_80"):
        assert kernel_target(torch.device("cpu"), torch.float16) == GpuDtype("float16", "sm_80")
    assert kernel_target(torch.device("cpu"), torch.float16) == "float16"


@pytest.fixture
def timm_block():
    swin = pytest.importorskip("timm.models.swin_transformer")
    torch.manual_seed(0)
    block = swin.SwinTransformerBlock(dim=96, input_resolution=(56, 56), num_heads=3,
                                      window_size=7, shift_size=3)
    return block.eval()


def test_patched_module_takes_cuda_inputs(monkeypatch, timm_block):
    """The patch's checks on a stand-in CUDA input (only its device, dtype and
    requires_grad are read): no more "device cuda" fallback; training on a CUDA
    device keeps the kernel in every dtype (the backward is torch's there)."""
    monkeypatch.setattr(ops, "cuda_chip", lambda index: "sm_90")
    st.swap_attention(timm_block)
    patch = timm_block._attn.patch
    x = types.SimpleNamespace(device=torch.device("cuda", 0), dtype=torch.float16,
                              requires_grad=False)
    assert patch.common_checks(timm_block, x) == GpuDtype("float16", "sm_90")
    timm_block.train()
    assert patch.common_checks(timm_block, x) == GpuDtype("float16", "sm_90")
    cpu = types.SimpleNamespace(device=torch.device("cpu"), dtype=torch.float16,
                                requires_grad=False)
    with pytest.raises(Fallback, match="training in torch.float16"):
        patch.common_checks(timm_block, cpu)


# --------------------------------------------------------------------------- #
# The configuration -> GPU kernel path (swin-aot, cc, ptxas; nothing runs)
# --------------------------------------------------------------------------- #
SWIN_T_STAGE1 = dict(layout="tokens", resolution=(56, 56), shift=(3, 3), packed_qkv=True)


@pytest.mark.aot
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float32-tf32"])
def test_swin_t_stage1_gpu_kernel_builds_for_the_device_chip(opts, chip, timm_block, dtype):
    """What a swapped Swin-T stage-1 block asks for on an H200: its configuration's
    sm_90 kernel, built once (swin-aot, the runtime with cc), its PTX assembled by
    ptxas; the warp kernel (tensor cores) for float16/bfloat16, rows for float32,
    and for float32 where the user allows TF32 the warp kernel on bf16 terms
    (f32_mma="bf16x3")."""
    tf32 = dtype.endswith("-tf32")
    dtype = dtype.removesuffix("-tf32")
    st.swap_attention(timm_block, **opts)
    target = GpuDtype(dtype, ops.cuda_chip(0))
    assert target.chip == "sm_90"
    allowed = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        kern = timm_block._attn.patch.kernel((7, 7), 3, 32, None, target, **SWIN_T_STAGE1)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allowed
    spec = kern.config
    assert spec.error is None and spec.build_key == ops.gpu_key(spec.key, "sm_90", tf32)
    assert ops.loaded(spec.build_key)
    gpu = ops.kernel_for(spec.build_key)
    assert isinstance(gpu, cuda.GpuKernel) and gpu.library.is_file()
    assert (gpu.config.target, gpu.config.chip, gpu.config.dtype) == (
        "nvptx", "sm_90", {"float16": "f16", "bfloat16": "bf16", "float32": "f32"}[dtype])
    ptx = gpu.image.read_text()
    assert ".target sm_90" in ptx
    assert ("mma.sync" in ptx) == (dtype != "float32" or tf32)
    assert gpu.config.f32_mma == ("bf16x3" if tf32 else "none")
    ptxas = _ptxas()
    if ptxas is None:
        pytest.skip("no ptxas in the CUDA toolkit")
    import subprocess
    proc = subprocess.run([str(ptxas), "-arch=sm_90", str(gpu.image), "-o", "/dev/null"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def _ptxas():
    from swin_opt.cuda_toolkit import PTXAS, cuda_toolkit

    path = cuda_toolkit() / PTXAS
    return path if path.is_file() else None


@pytest.mark.aot
def test_cosine_gpu_kernel_builds(chip, timm_block):
    """SwinV2's cosine form on an H200, what its patch asks for at inference: the
    warp kernel for float16 (each score scaled by s_h / (|q_i| |k_j|)), its PTX
    taking logit_scale after the table."""
    st.swap_attention(timm_block)
    kern = timm_block._attn.patch.kernel((8, 8), 3, 32, 1.0, GpuDtype("float16", "sm_90"),
                                         cosine=True, layout="tokens", resolution=(16, 16),
                                         shift=(4, 4), packed_qkv=True)
    assert kern.config.error is None and kern.config.cosine
    gpu = ops.kernel_for(kern.config.build_key)
    assert [a.name for a in gpu.abi.arguments][:3] == ["qkv", "table", "logit_scale"]
    assert "mma.sync" in gpu.image.read_text()


@pytest.mark.aot
@pytest.mark.parametrize("missing", ["swin-aot", "toolkit"])
def test_missing_compiler_or_toolkit_is_a_fallback(aot_path, monkeypatch, tmp_path, timm_block,
                                                   missing):
    st.swap_attention(timm_block, cache_dir=tmp_path / "cache")
    if missing == "swin-aot":
        monkeypatch.setenv("SWIN_AOT", str(tmp_path / "no-swin-aot"))
        why = "no GPU kernel for sm_90: SWIN_AOT="
    else:  # swin-aot misses libdevice (or, replayed by aot-replay.py, the runtime cuda.h)
        monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-toolkit"))
        why = "no GPU kernel for sm_90: (swin-aot rejected|cannot build the GPU runtime)"
    with pytest.raises(Fallback, match=why):
        timm_block._attn.patch.kernel((7, 7), 3, 32, None, GpuDtype("float16", "sm_90"),
                                      **SWIN_T_STAGE1)


# --------------------------------------------------------------------------- #
# The CUDA implementation on stand-in tensors (the launch replaced)
# --------------------------------------------------------------------------- #
@pytest.mark.aot
@pytest.mark.parametrize("case,dtype", [("windows-shifted", "float32"),
                                        ("tokens-shift-then-pad", "float16"),
                                        ("packed", "bfloat16")])
def test_cuda_implementation_hands_the_kernel_its_tensors(kernel_cache, aot_path, chip,
                                                          launches, case, dtype):
    """The CUDA forward on CPU tensors standing in for CUDA ones: it takes the
    configuration's sm_90 kernel and launches it once on the inputs as they lie
    (no copy), the table and padding rows in q's dtype, an output from
    torch.empty that it returns, and the count of windows or images."""
    key = op_key(OP_CASES[case], dtype, kernel_cache)
    cfg = attention_math.config_of(key)
    inputs, table, pad = op_inputs(cfg, TORCH_DTYPES[dtype])
    table = table.float()  # under autocast the patches hand a float32 table
    if len(inputs) == 1:
        out = ops._cuda_window_attention_packed(inputs[0], table, pad, key)
    else:
        out = ops._cuda_window_attention(*inputs, table, pad, key)
    (kern, tensors, count, abi), = launches
    assert kern is ops.kernel_for(ops.gpu_key(key, "sm_90")) and abi is None
    names = ["qkv"] if len(inputs) == 1 else ["q", "k", "v"]
    for name, t in zip(names, inputs):
        assert tensors[name].data_ptr() == t.data_ptr()
    assert tensors["table"].dtype == TORCH_DTYPES[dtype]
    assert torch.equal(tensors["table"], table.to(TORCH_DTYPES[dtype]))
    if pad is None:
        assert "pad_qkv" not in tensors
    else:
        assert torch.equal(tensors["pad_qkv"], pad.to(TORCH_DTYPES[dtype]))
    assert tensors["out"] is out and out.dtype == TORCH_DTYPES[dtype]
    assert out.shape == attention_math.forward(cfg, *(attention_math.split_packed(inputs[0])
                                               if len(inputs) == 1 else inputs),
                                               table, pad).shape
    assert count == inputs[0].shape[0]
    assert all(t.data_ptr() % 16 == 0 for name, t in tensors.items() if name != "table")


@pytest.mark.aot
def test_cuda_implementation_aligns_and_skips_cpu_zero_rows(kernel_cache, aot_path, chip,
                                                            launches):
    """A view at an odd offset is copied (the kernels move 16-byte rows); the
    all-zero padding rows the patches make on the CPU for a projection without
    bias become the runtime's own zeros (NULL), not a host-to-device copy."""
    key = op_key(OP_CASES["tokens-pad-then-shift"], "float16", kernel_cache)
    cfg = attention_math.config_of(key)
    (q, k, v), table, _ = op_inputs(cfg, torch.float16)
    odd = torch.empty(q.numel() + 1, dtype=torch.float16)[1:].view(q.shape)
    odd.copy_(q)
    ops._cuda_window_attention(odd, k, v, table, torch.zeros(3, cfg.channels), key)
    (_, tensors, _, _), = launches
    assert tensors["q"].data_ptr() % 16 == 0 and torch.equal(tensors["q"], q)
    assert "pad_qkv" not in tensors


@pytest.mark.aot
@pytest.mark.parametrize("case,dtype", [("windows-shifted", "float32"),
                                        ("tokens-shift-then-pad", "float16"),
                                        ("packed", "bfloat16")])
def test_cuda_backward_hands_the_grad_kernel_its_tensors(kernel_cache, aot_path, chip,
                                                         launches, case, dtype):
    """The CUDA backward on stand-in tensors: it takes the configuration's sm_90
    kernel compiled with its backward and launches the backward entry point once
    on q, k, v (or qkv), the table in q's dtype, out and dout as they lie; the
    gradients come from torch.empty in the inputs' dtype, the table's float32
    [T, heads] (the kernel's sum) handed back in the operator's dtype."""
    key = op_key(OP_CASES[case], dtype, kernel_cache)
    cfg = attention_math.config_of(key)
    torch_dtype = TORCH_DTYPES[dtype]
    inputs, table, _ = op_inputs(cfg, torch_dtype)
    shapes = ops.kernel_for(ops.gpu_key(key, "sm_90")).abi.shapes(inputs[0].shape[0])
    out = torch.randn(shapes["out"]).to(torch_dtype)
    dout = torch.randn(shapes["out"]).to(torch_dtype)
    if len(inputs) == 1:
        grads = ops._cuda_window_attention_packed_backward(inputs[0], table.float(), out,
                                                           dout, key)
    else:
        grads = ops._cuda_window_attention_backward(*inputs, table.float(), out, dout, key)
    (kern, tensors, count, abi), = launches
    assert kern is ops.kernel_for(ops.grad_key(ops.gpu_key(key, "sm_90")))
    assert abi is kern.abi.backward and count == inputs[0].shape[0]
    names = ["qkv"] if len(inputs) == 1 else ["q", "k", "v"]
    for name, t in zip(names, inputs):
        assert tensors[name].data_ptr() == t.data_ptr()
    assert tensors["out"].data_ptr() == out.data_ptr()
    assert tensors["dout"].data_ptr() == dout.data_ptr()
    assert torch.equal(tensors["table"], table.to(torch_dtype))
    written = ["d" + name for name in names]
    assert [a.name for a in abi.role("input_gradient")] == written
    for name, got, t in zip(written, grads, inputs):
        assert got is tensors[name] and got.dtype == torch_dtype and got.shape == t.shape
    assert tensors["dtable"].dtype == torch.float32
    assert tensors["dtable"].shape == (cfg.table_rows, cfg.heads)
    assert grads[-1].dtype == torch_dtype and grads[-1].shape == (cfg.table_rows, cfg.heads)


@pytest.mark.aot
def test_torch_call_refuses_cpu_tensors(kernel_cache, aot_path):
    """torch_call (the checks torch_arguments shares) takes CUDA tensors only."""
    kern = cuda.compile_gpu((7, 7), 3, 32, dtype="f16", cache_dir=kernel_cache)
    q, k, v = (torch.zeros(2, 3, 49, 32, dtype=torch.float16) for _ in range(3))
    with pytest.raises(TypeError, match="q must be a CUDA torch tensor"):
        cuda.torch_call(kern, q, k, v, torch.zeros(169, 3, dtype=torch.float16))
    with pytest.raises(TypeError, match="q must be a CUDA torch tensor"):
        cuda.torch_call(kern, None, k, v, None)


def test_torch_launch_uses_the_device_and_its_current_stream(monkeypatch):
    """torch_launch makes the tensors' device current (the runtime loads its
    module into that device's context) and launches on that device's current
    stream, with the tensors' addresses."""
    entered, streams, runs = [], [], []

    @contextlib.contextmanager
    def device(d):
        entered.append(d)
        yield

    def current_stream(d):
        streams.append(d)
        return types.SimpleNamespace(cuda_stream=0x5EED)

    monkeypatch.setattr(torch.cuda, "device", device)
    monkeypatch.setattr(torch.cuda, "current_stream", current_stream)
    kernel = types.SimpleNamespace(_run=lambda pointers, count, stream, abi:
                                   runs.append((pointers, count, stream, abi)))
    q, out = torch.zeros(4, 8), torch.zeros(4, 8)
    cuda.torch_launch(kernel, {"q": q, "out": out}, 4)
    assert entered == [q.device] and streams == [q.device]
    assert runs == [({"q": q.data_ptr(), "out": out.data_ptr()}, 4, 0x5EED, None)]
    backward = object()  # the entry point's ABI is handed through
    cuda.torch_launch(kernel, {"q": q, "out": out}, 4, backward)
    assert runs[-1][3] is backward


def test_without_a_gpu_kernel_the_operator_computes_with_torch(chip, monkeypatch):
    from swin_opt.torch import fallback

    monkeypatch.setattr(fallback, "warned_reasons", set())
    """An operator on CUDA whose configuration has no GPU kernel (a window of
    1,089 tokens: more than a block's 1024 threads): the same attention with
    torch's operators on the device, said once (FallbackWarning); the build is
    not attempted again on the next call."""
    key = ops.kernel_key((33, 33), 1, 8, dtype="float32")
    cfg = attention_math.config_of(key)
    (q, k, v), table, _ = op_inputs(cfg, torch.float32)
    with pytest.warns(FallbackWarning, match="computes with torch's operators: no GPU kernel "
                                             "for sm_90: .*1089 tokens"):
        out = ops._cuda_window_attention(q, k, v, table, None, key)
    want = ref.window_attention(q.double().numpy(), k.double().numpy(), v.double().numpy(),
                                bias=ref.lookup(table.double().numpy(), (33, 33)),
                                scale=8 ** -0.5)
    assert rel_err(out, want) < 1e-5
    built = []
    monkeypatch.setattr(ops, "kernel_for", lambda key: built.append(key))
    ops._cuda_window_attention(q, k, v, table, None, key)
    assert built == []


def _simulate_the_gpu(monkeypatch) -> list:
    """Everything a GPU run takes but the GPU, for the rest of this process (a
    run_alone test's): the CUDA implementations registered for the CPU too,
    the patches deciding for CPU inputs as for an sm_90 device
    (``kernel_target``), the launch computing the kernel's configuration with
    torch (attention_math) into the output it is handed. Returns the list of
    launches (the kernel's dtype, or "backward"), filled as they happen."""
    from swin_opt.torch import patching

    for name, fn in ops.CUDA_IMPLEMENTATIONS.items():
        if name != "linear":
            torch.library.register_kernel(f"swin_opt::{name}", "cpu", fn)
    launched = []

    def launch(kern, tensors, count, abi=None):
        cfg = kern.config
        assert (cfg.target, cfg.chip) == ("nvptx", "sm_90")
        assert count == next(iter(tensors.values())).shape[0]
        if abi is not None:  # the backward entry point
            assert abi is kern.abi.backward
            if cfg.packed_qkv:
                grads = attention_math.packed_backward(cfg, tensors["qkv"], tensors["table"],
                                                       tensors["dout"])
            else:
                grads = attention_math.backward(cfg, tensors["q"], tensors["k"], tensors["v"],
                                                tensors["table"], tensors["dout"])
            names = [a.name for a in abi.role("input_gradient")] + ["dtable"]
            for name, grad in zip(names, grads):
                tensors[name].copy_(grad)
            launched.append("backward")
            return
        if cfg.packed_qkv:
            out = attention_math.packed_forward(cfg, tensors["qkv"], tensors["table"],
                                                tensors.get("pad_qkv"),
                                                tensors.get("logit_scale"))
        else:
            out = attention_math.forward(cfg, tensors["q"], tensors["k"], tensors["v"],
                                         tensors["table"], tensors.get("pad_qkv"),
                                         tensors.get("logit_scale"))
        tensors["out"].copy_(out)
        launched.append(cfg.dtype + ("-cosine" if cfg.cosine else ""))

    monkeypatch.setattr(cuda, "torch_launch", launch)
    decide = patching.kernel_target
    monkeypatch.setattr(patching, "kernel_target", lambda device, dtype: GpuDtype(
        decide(device, dtype), "sm_90"))
    return launched


def _assert_eval_like_original(original, model, x, bf16_against_float64=False):
    """The swapped ``model`` against ``original`` at inference in float32 and bfloat16
    (under no_grad, not inference_mode: transformers caches BEiT's index made in
    the first forward, and an inference tensor there breaks later training).
    ``bf16_against_float64``: in bfloat16, both against the original in float64, the
    swapped within 3e-2 or the original's own error (a kernel that keeps what
    bfloat16 rounds in float32, such as SwinV2's cosine kernel, is nearer the
    float64 result than to the original's bfloat16 one)."""
    if bf16_against_float64:
        with torch.no_grad():
            exact = copy.deepcopy(original).double()(x.double()).numpy()
    for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 3e-2)):
        with torch.no_grad():
            want = original.to(dtype)(x.to(dtype)).float()
            got = model.to(dtype)(x.to(dtype)).float()
        if dtype == torch.bfloat16 and bf16_against_float64:
            tol = max(tol, rel_err(want, exact))
            assert rel_err(got, exact) <= tol, (dtype, rel_err(got, exact), tol)
        else:
            assert rel_err(got, want.double().numpy()) <= tol, dtype
    original.float()
    model.float()


def _assert_trains_like_original(original, model, x, rtol):
    """One training step of each in float32: every parameter's gradient within
    ``rtol`` of the original's largest (1e-3 floors rounding noise)."""
    original.train()
    model.train()
    grads = []
    for m in (original, model):
        m(x).square().mean().backward()
        grads.append({n: p.grad for n, p in m.named_parameters()})
    for name, want in grads[0].items():
        got = grads[1][name]
        if want is None:  # not on the output's path (transformers' pooler)
            assert got is None, name
            continue
        assert got is not None, name
        assert (got - want).abs().max() <= rtol * max(want.abs().max().item(), 1e-3), name
    return grads[0]


@pytest.mark.aot
def test_swapped_model_through_the_cuda_path_simulated_on_the_cpu(run_alone, opts, chip,
                                                                   monkeypatch):
    """A swapped timm model through everything a GPU run takes but the GPU, in a
    process of its own (:func:`_simulate_the_gpu`). Exercised: the patches'
    GPU decision, the GPU kernels' builds, the CUDA forward's arguments, autograd
    through the CUDA backward (training), ``torch.compile(fullgraph=True)``
    tracing it all. Not: the GPU kernels' numbers, the device, the stream."""
    if run_alone():
        return
    launched = _simulate_the_gpu(monkeypatch)
    original = _timm_model()
    model = copy.deepcopy(original)
    # The attention's CUDA path: the MLP kernel is CPU float32 only.
    st.swap_attention(model, mlp=False, **opts)
    x = _img()
    with no_fallback():
        _assert_eval_like_original(original, model, x)
        assert sorted(set(launched)) == ["bf16", "f32"]
        launched.clear()
        _assert_trains_like_original(original, model, x, 1e-4)
        assert "backward" in launched
        original.eval()
        model.eval()
        calls = len(launched)
        with torch.inference_mode():
            got = torch.compile(model, fullgraph=True)(x)
            assert rel_err(got, original(x).double().numpy()) <= 1e-5
        assert len(launched) > calls
    assert _calls(model)[1] == 0


@pytest.mark.aot
def test_swapped_swinv2_through_the_cuda_path_simulated_on_the_cpu(run_alone, opts, chip,
                                                                   monkeypatch):
    """A swapped timm SwinV2 on the simulated GPU (:func:`_simulate_the_gpu`) at
    inference: the cosine GPU kernels, with the module's logit_scale, in float32
    and bfloat16, each attention on a kernel."""
    if run_alone():
        return
    launched = _simulate_the_gpu(monkeypatch)
    original = _timm_model(v2=True)
    model = copy.deepcopy(original)
    n = st.swap_attention(model, mlp=False, **opts)
    with no_fallback():
        _assert_eval_like_original(original, model, _img(), bf16_against_float64=True)
    assert sorted(set(launched)) == ["bf16-cosine", "f32-cosine"]
    kernel_calls, fallbacks, reasons = _calls(model)
    assert kernel_calls == 2 * n and fallbacks == 0, reasons


@pytest.mark.aot
def test_swinv2_training_through_the_cuda_path_simulated_on_the_cpu(run_alone, opts, chip,
                                                                    monkeypatch):
    """Training a swapped timm SwinV2 on the simulated GPU: the plain GPU forward
    and backward; autograd differentiates the preparation of q and k, so every
    gradient is the original's: logit_scale (its clamp included), the cpb MLP
    (through the table's gradient), the q/v biases, everything before."""
    if run_alone():
        return
    launched = _simulate_the_gpu(monkeypatch)
    original = _timm_model(v2=True)
    model = copy.deepcopy(original)
    st.swap_attention(model, mlp=False, **opts)
    with no_fallback():
        want = _assert_trains_like_original(original, model, _img(), 2e-4)
    assert "backward" in launched and "f32" in launched
    assert want["layers.0.blocks.0.attn.logit_scale"].abs().max() > 1e-3
    kernel_calls, fallbacks, reasons = _calls(model)
    assert kernel_calls > 0 and fallbacks == 0, reasons


#: small timm MaxViT-family models (issue 28): block and grid AttentionCl with
#: the TF table on non-square windows, CoAtNet's whole-map NCHW Attention2d
_MAXVIT_SMALL = {
    # (no stem conv bias: a batch norm follows it, its gradient is rounding noise)
    "maxvit_tiny_tf_224": dict(img_size=64, transformer_window_size=(4, 2),
                               transformer_grid_size=(2, 4), embed_dim=(16, 16), depths=(1, 1),
                               stem_bias=False),
    "coatnet_0_rw_224": dict(img_size=96, embed_dim=(16, 16, 16, 32), depths=(1, 1, 1, 2)),
}


@pytest.mark.aot
@pytest.mark.parametrize("arch", sorted(_MAXVIT_SMALL))
def test_swapped_maxvit_through_the_cuda_path_simulated_on_the_cpu(run_alone, opts, chip,
                                                                   monkeypatch, arch):
    """timm's MaxViT family on the simulated GPU (:func:`_simulate_the_gpu`): the
    window-layout GPU kernels in float32 and bfloat16, and one float32 training
    step through the CUDA backward (every gradient the original's), each
    attention on a kernel."""
    if run_alone():
        return
    timm = pytest.importorskip("timm")
    launched = _simulate_the_gpu(monkeypatch)
    cfg = _MAXVIT_SMALL[arch]
    torch.manual_seed(0)
    original = sharpen_weights(timm.create_model(arch, pretrained=False, num_classes=10,
                                                 stem_width=16, transformer_dim_head=8, **cfg))
    model = copy.deepcopy(original)
    n = st.swap_attention(model, mlp=False, **opts)  # the attention's GPU kernels
    x = _img(size=cfg["img_size"])
    with no_fallback():
        _assert_eval_like_original(original, model, x)
        assert sorted(set(launched)) == ["bf16", "f32"]
        _assert_trains_like_original(original, model, x, 1e-4)
    assert "backward" in launched
    kernel_calls, fallbacks, reasons = _calls(model)
    assert kernel_calls == 3 * n and fallbacks == 0, reasons


@pytest.mark.aot
@pytest.mark.parametrize("family", BEIT_FAMILIES)
def test_swapped_beit_through_the_cuda_path_simulated_on_the_cpu(run_alone, opts, chip,
                                                                 monkeypatch, family):
    """BEiT (timm; transformers' BeitModel and Data2VecVisionModel) on the simulated
    GPU (:func:`_simulate_the_gpu`): the class-token GPU kernels in float32 and
    bfloat16 and one float32 training step through the CUDA backward (every
    gradient the original's, the tables' class rows included), each attention on
    a kernel."""
    if run_alone():
        return
    launched = _simulate_the_gpu(monkeypatch)
    original = _beit_model(family)
    model = copy.deepcopy(original)
    n = st.swap_attention(model, mlp=False, **opts)
    x = _img()
    with no_fallback():
        _assert_eval_like_original(original, model, x)
        assert sorted(set(launched)) == ["bf16", "f32"]
        want = _assert_trains_like_original(original, model, x, 1e-4)
    assert "backward" in launched
    tables = [g for name, g in want.items() if name.endswith("relative_position_bias_table")]
    assert tables and all(t[-3:].abs().max() > 1e-6 for t in tables)
    kernel_calls, fallbacks, reasons = _calls(model)
    assert kernel_calls == 3 * n and fallbacks == 0, reasons


# --------------------------------------------------------------------------- #
# The torch computation of the CUDA backward and fallback, on CPU tensors
# --------------------------------------------------------------------------- #
MATH_CASES = dict(OP_CASES, **{
    "windows-padded": dict(window=(7, 7), heads=2, head_dim=16, resolution=(17, 23),
                           shift=(3, 3), padding="pad_then_shift"),
    "3d-tokens": dict(window=(2, 3, 3), heads=2, head_dim=8, resolution=(4, 6, 6),
                      shift=(1, 1, 1), layout="tokens"),
    # MaxViT's grid (non-square, so that swapped axes would show)
    "tokens-grid": dict(window=(2, 3), heads=2, head_dim=8, resolution=(8, 12),
                        layout="tokens", partition="grid"),
    "packed-grid": dict(window=(4, 2), heads=2, head_dim=8, resolution=(8, 8),
                        layout="tokens", packed_qkv=True, partition="grid"),
    # BEiT's class token on a small grid (N = 13, odd)
    "class-token": dict(window=(3, 4), heads=2, head_dim=8, class_token=True),
})


@pytest.mark.aot
@pytest.mark.parametrize("case", sorted(MATH_CASES))
def test_attention_math_matches_the_cpu_kernels(kernel_cache, aot_path, case):
    """attention_math against the CPU kernels (float32): the forward with the
    padding rows, the backward (padded tokens as zeros, as the backward kernels
    take them) against the gradient kernels."""
    key = op_key(MATH_CASES[case], "float32", kernel_cache)
    cfg = attention_math.config_of(key)
    inputs, table, pad = op_inputs(cfg, torch.float32)
    unpack = attention_math.split_packed if cfg.packed_qkv else (lambda *t: t)
    got = attention_math.forward(cfg, *unpack(*inputs), table, pad)
    assert rel_err(got, call_op(key, inputs, table, pad).double().numpy()) < 1e-5
    out = call_op(key, inputs, table, None)
    dout = torch.randn_like(out)
    if cfg.packed_qkv:
        want = torch.ops.swin_opt.window_attention_packed_backward(inputs[0], table, out,
                                                                  dout, key)
        got = attention_math.packed_backward(cfg, inputs[0], table, dout)
    else:
        want = torch.ops.swin_opt.window_attention_backward(*inputs, table, out, dout, key)
        got = attention_math.backward(cfg, *inputs, table, dout)
    for g, w in zip(got, want):
        assert g.shape == w.shape and rel_err(g, w.double().numpy()) < 1e-4


@pytest.mark.aot
def test_attention_math_cosine_matches_the_cpu_kernel(kernel_cache, aot_path):
    key = ops.kernel_key((7, 7), 3, 32, dtype="float32", cosine=True, layout="tokens",
                         resolution=(14, 14), shift=(3, 3), packed_qkv=True,
                         cache_dir=kernel_cache)
    cfg = attention_math.config_of(key)
    (qkv,), table, _ = op_inputs(cfg, torch.float32)
    logit_scale = torch.tensor([0.5, 2.0, 4.0])
    want = torch.ops.swin_opt.window_attention_packed_cosine(qkv, table, logit_scale, None,
                                                             key)
    got = attention_math.packed_forward(cfg, qkv, table, None, logit_scale)
    assert rel_err(got, want.double().numpy()) < 1e-5


@pytest.mark.parametrize("case", ["windows-shifted", "tokens-shift-then-pad", "packed",
                                  "3d-tokens", "class-token"])
def test_attention_math_backward_is_the_gradient_of_its_forward(case):
    """No kernels: the closed-form backward against autograd through the forward."""
    cfg = attention_math.config_of(op_key(MATH_CASES[case], "float32"))
    inputs, table, _ = op_inputs(cfg, torch.float32, requires_grad=True)
    if cfg.packed_qkv:
        out = attention_math.packed_forward(cfg, inputs[0], table)
    else:
        out = attention_math.forward(cfg, *inputs, table)
    dout = torch.randn_like(out)
    want = torch.autograd.grad(out, [*inputs, table], dout)
    with torch.no_grad():
        if cfg.packed_qkv:
            got = attention_math.packed_backward(cfg, inputs[0], table, dout)
        else:
            got = attention_math.backward(cfg, *inputs, table, dout)
    for g, w in zip(got, want):
        assert rel_err(g, w.double().numpy()) < 1e-4


# --------------------------------------------------------------------------- #
# On a GPU (skipped without one)
# --------------------------------------------------------------------------- #
#: Tolerances against the float64 reference, relative to max(1, max|ref|), on
#: inputs already in the dtype: test_gpu.py's, with room for the table rounded.
TOLERANCE = {"float32": 1e-5, "float16": 4e-3, "bfloat16": 3e-2}


@requires_gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("case", sorted(OP_CASES))
def test_gpu_operators_match_the_reference(kernel_cache, aot_path, case, dtype):
    key = op_key(OP_CASES[case], dtype, kernel_cache)
    cfg = attention_math.config_of(key)
    inputs, table, pad = op_inputs(cfg, TORCH_DTYPES[dtype], device="cuda")
    with no_fallback():
        out = call_op(key, inputs, table, pad)
    assert ops.loaded(ops.gpu_key(key, ops.cuda_chip(0)))
    assert out.device.type == "cuda" and out.dtype == TORCH_DTYPES[dtype]
    assert rel_err(out, reference_output(cfg, inputs, table, pad)) <= TOLERANCE[dtype]


@requires_gpu
@pytest.mark.parametrize("case", sorted(OP_CASES))
def test_gpu_float32_with_tf32_allowed(kernel_cache, aot_path, case):
    """float32 where the user allows TF32: the warp kernel on two bf16 terms per
    operand (f32_mma="bf16x3"; BEiT-base's window takes the rows), within 3e-5 of
    the float64 reference (test_warp_kernel's bound; TF32 itself errs ~1e-3)."""
    key = op_key(OP_CASES[case], "float32", kernel_cache)
    cfg = attention_math.config_of(key)
    inputs, table, pad = op_inputs(cfg, torch.float32, device="cuda")
    allowed = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        with no_fallback():
            out = call_op(key, inputs, table, pad)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allowed
    assert ops.loaded(ops.gpu_key(key, ops.cuda_chip(0), True))
    assert rel_err(out, reference_output(cfg, inputs, table, pad)) <= 3e-5


#: The cosine operators' GPU configuration (SwinV2-T stage 1 tokens, packed).
COSINE_CASE = dict(window=(8, 8), heads=3, head_dim=32, resolution=(16, 16), shift=(4, 4),
                   layout="tokens", packed_qkv=True, cosine=True)


@requires_gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_gpu_cosine_operator_matches_the_reference(kernel_cache, aot_path, dtype):
    """SwinV2's cosine operator on the GPU (the warp kernel for float16 and
    bfloat16, the rows for float32) against torch's float32 computation of it on
    the inputs in float64 (attention_math, checked against the CPU cosine kernel),
    within the dtype's tolerance times 10 (the scores are multiplied by up to
    100)."""
    key = op_key(COSINE_CASE, dtype, kernel_cache)
    cfg = attention_math.config_of(key)
    (qkv,), table, _ = op_inputs(cfg, TORCH_DTYPES[dtype], device="cuda")
    logit_scale = torch.tensor([0.5, 2.0, 5.0], device="cuda")
    with no_fallback():
        out = torch.ops.swin_opt.window_attention_packed_cosine(qkv, table, logit_scale, None,
                                                                key)
    want = attention_math.packed_forward(cfg, qkv.double().cpu(), table.double().cpu(), None,
                                         logit_scale.double().cpu())
    assert rel_err(out, want.numpy()) <= 10 * TOLERANCE[dtype]


def _reference_grads(cfg, inputs, table, dout):
    f64 = [t.detach().double().cpu().numpy() for t in inputs]
    t64 = table.detach().double().cpu().numpy()
    d64 = dout.double().cpu().numpy()
    if cfg.layout != "tokens":
        mask = ref.shift_mask(cfg.padded_resolution, cfg.window, cfg.shift) \
            if cfg.resolution is not None and any(cfg.shift) else None
        return ref.window_attention_backward(*f64, t64, d64, cfg.window, mask=mask,
                                             class_token=cfg.class_token)
    packed = cfg.packed_qkv
    if packed:
        f64 = [a.reshape(a.shape[0], a.shape[1], -1) for a in np.split(f64[0], 3, axis=2)]
    dq, dk, dv, dtable = ref.swin_block_attention_tokens_backward(
        *f64, t64, d64, resolution=cfg.resolution, window=cfg.window, shift=cfg.shift,
        padding=cfg.padding)
    if packed:
        return np.stack([dq, dk, dv], axis=2).reshape(inputs[0].shape), dtable
    return dq, dk, dv, dtable


@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("case", ["windows-shifted", "tokens-shift-then-pad", "packed",
                                  "beit-base"])
def test_gpu_operator_gradients_match_the_reference(kernel_cache, aot_path, case, dtype):
    """Autograd through a CUDA operator: our forward and the GPU's backward kernel
    (no fallback to torch's operators), against the float64 reference."""
    key = op_key(OP_CASES[case], dtype, kernel_cache)
    cfg = attention_math.config_of(key)
    inputs, table, _ = op_inputs(cfg, TORCH_DTYPES[dtype], device="cuda", requires_grad=True)
    with no_fallback():
        out = call_op(key, inputs, table, None)
        dout = torch.randn_like(out)
        grads = torch.autograd.grad(out, [*inputs, table], dout)
    tol = {"float32": 1e-4, "bfloat16": 5e-2}[dtype]
    for got, want in zip(grads, _reference_grads(cfg, inputs, table, dout)):
        assert rel_err(got, want) <= tol


@requires_gpu
def test_gpu_operators_and_cpu_operators_in_turn(kernel_cache, aot_path):
    """One configuration called with CPU and CUDA tensors: each device its kernel."""
    key = op_key(dict(OP_CASES["windows-shifted"], cpu=PORTABLE_CPU), "float32", kernel_cache)
    cfg = attention_math.config_of(key)
    inputs, table, _ = op_inputs(cfg, torch.float32)
    want = reference_output(cfg, inputs, table, None)
    for device in ("cpu", "cuda", "cpu", "cuda"):
        with no_fallback():
            out = call_op(key, [t.to(device) for t in inputs], table.to(device), None)
        assert out.device.type == device and rel_err(out, want) <= 1e-5


def _timm_model(v2=False):
    module = "timm.models.swin_transformer_v2" if v2 else "timm.models.swin_transformer"
    swin = pytest.importorskip(module)
    cls = swin.SwinTransformerV2 if v2 else swin.SwinTransformer
    torch.manual_seed(0)
    # no drop path: the training tests compare two models' gradients
    model = cls(img_size=56, patch_size=4, window_size=7, embed_dim=32, depths=(2, 2),
                num_heads=(2, 4), num_classes=10, drop_path_rate=0.0)
    return sharpen_weights(model).eval()


class _LastHiddenState(torch.nn.Module):
    """A transformers vision model as a module returning a tensor."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(pixel_values=x).last_hidden_state


def _beit_model(family):
    torch.manual_seed(0)
    if family == "timm":
        timm = pytest.importorskip("timm")
        model = timm.create_model("beit_base_patch16_224", pretrained=False, img_size=56,
                                  patch_size=8, embed_dim=32, depth=2, num_heads=4,
                                  num_classes=10, drop_path_rate=0.0)
    else:
        hf = pytest.importorskip("transformers")
        config_cls, model_cls = {
            "transformers-beit": (hf.BeitConfig, hf.BeitModel),
            "transformers-data2vec": (hf.Data2VecVisionConfig, hf.Data2VecVisionModel),
        }[family]
        config = config_cls(image_size=56, patch_size=8, hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=4, intermediate_size=48,
                            layer_scale_init_value=0.1, use_relative_position_bias=True,
                            drop_path_rate=0.0, hidden_dropout_prob=0.0)
        model = _LastHiddenState(model_cls(config))
    return sharpen_weights(model, seed=1).eval()


def _img(batch=2, device="cpu", size=56):
    return torch.randn(batch, 3, size, size,
                       generator=torch.Generator().manual_seed(1)).to(device)


def _calls(model):
    """(attention kernel calls, fallbacks of any patch, their reasons)."""
    stats = st.patch_stats(model)
    return (sum(s["kernel_calls"] for s in stats if s["kind"] == "attention"),
            sum(s["fallback_calls"] for s in stats),
            sorted({r for s in stats for r in s["fallback_reasons"]}))


#: the model tests' dtypes: the autocast dtype (None: none, float32)
AUTOCAST = {"float32": None, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _run(model, x, dtype):
    autocast = AUTOCAST[dtype]
    with torch.inference_mode(), torch.autocast("cuda", dtype=autocast or torch.float16,
                                                enabled=autocast is not None):
        return model(x).float()


def assert_like_original(got, want32, torch_lowp=None):
    """``got`` within 1e-4 of the float32 original's ``want32``; in float16/bfloat16
    (``torch_lowp``: the original in that precision) no further from it than twice
    torch's own error there, plus 2e-2 (test_torch.py's bfloat16 yardstick)."""
    want = want32.double().cpu().numpy()
    if torch_lowp is None:
        assert rel_err(got, want) <= 1e-4
    else:
        assert rel_err(got, want) <= 2 * rel_err(torch_lowp, want) + 2e-2


def assert_swapped_runs_like_original(model, original, dtype):
    """The swapped ``model`` on a CUDA image: every attention on a kernel (no
    fallback), its output like the ``original``'s (:func:`assert_like_original`)."""
    x = _img(device="cuda")
    with no_fallback():
        got = _run(model, x, dtype)
    kernel_calls, fallbacks, reasons = _calls(model)
    assert kernel_calls > 0 and fallbacks == 0, reasons
    assert_like_original(got, _run(original, x, "float32"),
                         None if dtype == "float32" else _run(original, x, dtype))


@requires_gpu
@pytest.mark.parametrize("dtype", sorted(AUTOCAST))
@pytest.mark.parametrize("order", ["swap-then-move", "move-then-swap"])
def test_gpu_swapped_model_matches_the_original(opts, order, dtype):
    original = _timm_model().cuda()
    model = copy.deepcopy(original).cpu()
    if order == "swap-then-move":
        st.swap_attention(model, mlp=False, **opts)
        model = model.cuda()
    else:
        model = model.cuda()
        st.swap_attention(model, mlp=False, **opts)
    assert_swapped_runs_like_original(model, original, dtype)


@requires_gpu
def test_gpu_warmup_builds_the_gpu_kernels(opts):
    """warmup of a model on the GPU builds its GPU kernels: its forward then builds
    nothing more."""
    from swin_opt import build

    model = _timm_model().cuda()
    st.swap_attention(model, mlp=False, **opts)
    st.warmup(model, (2, 3, 56, 56), progress=False)
    before = build.builds()
    with no_fallback():
        _run(model, _img(device="cuda"), "float32")
    assert build.builds() == before and _calls(model)[0] > 0


@requires_gpu
def test_gpu_model_moved_between_cpu_and_gpu(opts):
    """A swapped model run on the CPU, moved to the GPU, and back: each call runs its
    device's kernel (the shift masks, identified on the CPU, are matched again)."""
    original = _timm_model()
    model = copy.deepcopy(original)
    st.swap_attention(model, cpu=PORTABLE_CPU, mlp=False, **opts)
    x = _img()
    for device in ("cpu", "cuda", "cpu"):
        original.to(device)
        model.to(device)
        want = _run(original, x.to(device), "float32")
        with no_fallback():
            got = _run(model, x.to(device), "float32")
        assert torch.allclose(got.cpu(), want.cpu(), rtol=1e-4, atol=1e-4), device
    assert _calls(model)[1] == 0


@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_gpu_training_gradients_match_the_original(opts, dtype):
    """Training on the GPU: our forward, the gradients by torch's operators."""
    original = _timm_model().cuda().train()
    model = copy.deepcopy(original)
    st.swap_attention(model, mlp=False, **opts)
    x = _img(device="cuda")

    def grads(m, autocast):
        m.zero_grad()
        with torch.autocast("cuda", dtype=autocast or torch.float16,
                            enabled=autocast is not None):
            loss = m(x).float().square().mean()
        loss.backward()
        return {n: p.grad.double() for n, p in m.named_parameters()}

    want32 = grads(original, None)
    torch_lowp = grads(original, AUTOCAST[dtype]) if dtype != "float32" else None
    got = grads(model, AUTOCAST[dtype])
    kernel_calls, fallbacks, reasons = _calls(model)
    assert kernel_calls > 0 and fallbacks == 0, reasons
    for name, want in want32.items():  # as assert_like_original, per parameter
        scale = max(want.abs().max().item(), 1e-3)
        err = (got[name] - want).abs().max().item() / scale
        if torch_lowp is None:
            assert err <= 1e-3, name
        else:
            assert err <= 2 * (torch_lowp[name] - want).abs().max().item() / scale + 2e-2, name


@requires_gpu
def test_gpu_torch_compile_fullgraph(opts):
    original = _timm_model().cuda()
    model = copy.deepcopy(original)
    st.swap_attention(model, mlp=False, **opts)
    x = _img(device="cuda")
    compiled = torch.compile(model, fullgraph=True)
    want32 = _run(original, x, "float32")
    assert_like_original(_run(compiled, x, "float32"), want32)
    assert_like_original(_run(compiled, x, "float16"), want32, _run(original, x, "float16"))
    kernel_calls, fallbacks, reasons = _calls(model)
    assert kernel_calls > 0 and fallbacks == 0, reasons


@requires_gpu
def test_gpu_cuda_graph_capture_and_replay(opts):
    """The swapped model's forward captured in a CUDA graph (nothing on its path
    waits for the device or allocates outside torch) and replayed on new input."""
    original32 = _timm_model().cuda()
    original = copy.deepcopy(original32).half()
    model = copy.deepcopy(original)
    st.swap_attention(model, mlp=False, **opts)
    static = _img(device="cuda").half()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.inference_mode():
        for _ in range(2):  # loads the kernels on the device: not capturable
            model(static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.inference_mode():
        with torch.cuda.graph(graph):
            out = model(static)
        fresh = _img(batch=2, device="cuda").half() * 0.5 + 0.25
        static.copy_(fresh)
        graph.replay()
        torch.cuda.synchronize()
        assert_like_original(out.float(), original32(fresh.float()), original(fresh).float())
    assert _calls(model)[1] == 0


@requires_gpu
@pytest.mark.skipif(not _GPU or torch.cuda.device_count() < 2, reason="one CUDA device")
def test_gpu_second_device(opts):
    """cuda:1: the kernel loaded into that device's context too, calls on both
    devices in turn."""
    original = _timm_model()
    model = copy.deepcopy(original)
    st.swap_attention(model, mlp=False, **opts)
    x = _img()
    models = {d: copy.deepcopy(model).to(d) for d in ("cuda:0", "cuda:1")}
    original = original.cuda()
    want32, torch_lowp = (_run(original, x.cuda(), dtype) for dtype in ("float32", "float16"))
    for device in ("cuda:1", "cuda:0", "cuda:1"):
        with no_fallback():
            got = _run(models[device], x.to(device), "float16")
        assert got.device == torch.device(device)
        assert_like_original(got, want32, torch_lowp)


@requires_gpu
@pytest.mark.parametrize("dtype", sorted(AUTOCAST))
def test_gpu_swinv2_matches_the_original(opts, dtype):
    """SwinV2 on the GPU: the plain GPU kernel on q/k prepared in torch (there is
    no cosine GPU kernel), every attention on a kernel."""
    original = _timm_model(v2=True).cuda()
    model = copy.deepcopy(original)
    st.swap_attention(model, mlp=False, **opts)
    assert_swapped_runs_like_original(model, original, dtype)


@requires_gpu
def test_gpu_swinv2_training_gradients_match_the_original(opts):
    """Training SwinV2 on the GPU in float32: the GPU's forward and backward,
    logit_scale's gradient through torch's preparation of q and k."""
    _assert_gpu_trains_like_original(_timm_model(v2=True), opts)


@requires_gpu
@pytest.mark.parametrize("dtype", sorted(AUTOCAST))
@pytest.mark.parametrize("family", BEIT_FAMILIES)
def test_gpu_beit_matches_the_original(opts, family, dtype):
    """BEiT on the GPU: the class-token GPU kernels, every attention on a kernel."""
    original = _beit_model(family).cuda()
    model = copy.deepcopy(original)
    st.swap_attention(model, mlp=False, **opts)
    assert_swapped_runs_like_original(model, original, dtype)


@requires_gpu
@pytest.mark.parametrize("family", BEIT_FAMILIES)
def test_gpu_beit_training_gradients_match_the_original(opts, family):
    """Training BEiT on the GPU in float32: the GPU's forward and backward (the
    tables' class rows included)."""
    _assert_gpu_trains_like_original(_beit_model(family), opts)


def _assert_gpu_trains_like_original(original, opts):
    """One float32 training step of ``original`` and of its swapped copy on the GPU
    (:func:`_assert_trains_like_original`: every gradient within 1e-3 of the
    original's largest), the swapped one's attention all on kernels."""
    original = original.cuda()
    model = copy.deepcopy(original)
    st.swap_attention(model, mlp=False, **opts)
    _assert_trains_like_original(original, model, _img(device="cuda"), 1e-3)
    kernel_calls, fallbacks, reasons = _calls(model)
    assert kernel_calls > 0 and fallbacks == 0, reasons


# --------------------------------------------------------------------------- #
# Recording the GPU tests' kernels on a machine without a GPU
# --------------------------------------------------------------------------- #
def record_kernels(chip: str = RECORDED_CHIP) -> int:
    """Build every kernel the tests above run on a GPU machine, without a GPU: the
    operator configurations and the timm models' (Swin and SwinV2, run once on
    the CPU in each dtype) for ``chip`` (the GPU tests) and sm_90 (the tests of the build path),
    Swin-T stage 1's for sm_90, and the CPU kernels of the GPU tests that run
    some (for PORTABLE_CPU). scripts/device/record.py runs it through
    aot-replay.py."""
    keys = set()
    for gpu in sorted({chip, "sm_90"}):
        for dtype in TORCH_DTYPES:
            keys.update(ops.gpu_key(op_key(case, dtype), gpu) for case in OP_CASES.values())
            keys.add(ops.gpu_key(op_key(COSINE_CASE, dtype), gpu))
            keys.add(ops.gpu_key(ops.kernel_key((7, 7), 3, 32, dtype=dtype, **SWIN_T_STAGE1),
                                 gpu))
        # float32 with TF32 allowed (test_gpu_float32_with_tf32_allowed)
        keys.update(ops.gpu_key(op_key(case, "float32"), gpu, True)
                    for case in OP_CASES.values())
    keys.add(op_key(dict(OP_CASES["windows-shifted"], cpu=PORTABLE_CPU), "float32"))
    for key in sorted(keys):
        ops.kernel_for(key)
    built = len(keys)
    for gpu in sorted({chip, "sm_90"}):
        for dtype in TORCH_DTYPES.values():
            models = [_timm_model(v2) for v2 in (False, True)]
            models += [_beit_model(family) for family in BEIT_FAMILIES]
            for model in models:
                model = model.to(dtype)
                st.swap_attention(model)
                # grad: the training tests' kernels too (SwinV2's plain ones)
                built += st.warmup(model, _img(batch=1).to(dtype), chip=gpu, progress=False,
                                   grad=True)
    # The CUDA backward's kernels (each GPU configuration with grad=True): the GPU
    # tests' gradients and training come from them.
    for key in sorted(ops.loaded_keys()):
        options = json.loads(key)["options"]
        if options.get("target") == "nvptx" and not options.get("grad"):
            try:
                ops.kernel_for(ops.grad_key(key))
                built += 1
            except ops.BUILD_ERRORS as exc:  # e.g. padded maps: the patches keep torch's there
                print(f"record: no backward for {key}: {exc}")
    model = _timm_model()
    st.swap_attention(model, cpu=PORTABLE_CPU)
    built += st.warmup(model, _img(batch=1), progress=False)
    return built


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="record the GPU tests' kernels")
    parser.add_argument("--record", action="store_true", required=True)
    parser.add_argument("--chip", default=RECORDED_CHIP)
    print(f"recorded {record_kernels(parser.parse_args().chip)} GPU kernels")
