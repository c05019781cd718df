"""GPU kernels (``swin-aot --target=nvptx``) against the NumPy reference.

These run only where a CUDA driver and a GPU are present and skip with a
clear message elsewhere. Without a GPU, the same kernels are tested on the
host (lit: Execution/window-attention.test with kernel=rows and
kernel=warps; python/tests/test_warp_kernel.py: the tensor-core kernel with
each warp emulated by 32-lane vectors), and every PTX is assembled by ptxas
(lit: GPU/ptxas.test).

Tolerances: f32 1e-5 * max(1, max|ref|) (fp32 FMAs and libdevice's expf, an
online softmax over <= 784 keys); f16 2e-3 and bf16 1.6e-2 on inputs rounded
to the type (the probabilities and the output are rounded once each).

The backward (``grad=True``: dq, dk, dv and the table's gradient, summed
without atomics) is checked the same way, each gradient against
``TOLERANCE[dtype] * max|ref|`` (dtable is f32 whatever the dtype), and run
twice for the same bits; on the host, python/tests/test_gpu_backward.py runs
its program with the warps emulated.
"""

import numpy as np
import pytest

from swin_opt import cuda
from swin_opt import reference as ref
from swin_opt import testing as T

pytestmark = pytest.mark.aot

_DEVICE = cuda.available()
requires_gpu = pytest.mark.skipif(_DEVICE is None, reason="no CUDA driver or GPU on this machine")


@pytest.fixture(scope="module")
def driver():
    return cuda.Driver()


def _run(driver, kernel, arrays, out_shape, dtype, count, pad=None):
    pointers = [driver.to_device(a) for a in arrays]
    out = driver.alloc(int(np.prod(out_shape)) * np.dtype(dtype).itemsize)
    pad_pointer = driver.to_device(pad) if pad is not None else 0
    try:
        kernel(*pointers, out, count, pad_qkv=pad_pointer)
        driver.synchronize()
        return driver.to_host(out, out_shape, dtype)
    finally:
        for p in pointers + [out] + ([pad_pointer] if pad_pointer else []):
            driver.free(p)


CASES = [
    dict(window=(7, 7), heads=3, head_dim=32, resolution=(14, 14), shift=(3, 3)),
    dict(window=(7, 7), heads=3, head_dim=32),
    dict(window=(8, 8), heads=4, head_dim=64),
    dict(window=(12, 12), heads=2, head_dim=32, resolution=(24, 24), shift=(6, 6)),
    dict(window=(4, 6), heads=2, head_dim=16, resolution=(8, 18), shift=(2, 3)),
    dict(window=(2, 3, 3), heads=2, head_dim=8, resolution=(4, 6, 6), shift=(1, 1, 1)),
]


def _random(rng, shape, dtype):
    """Standard normal values in the kernel's storage (bf16 as raw bits)."""
    return T.to_storage(rng.standard_normal(shape, dtype=np.float32), dtype)


@requires_gpu
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c["window"])))
@pytest.mark.parametrize("dtype,kernel", [("f32", "rows"), ("f16", "rows"), ("f16", "warps"),
                                          ("bf16", "warps")])
def test_windows_layout(driver, tmp_path, case, dtype, kernel):
    kernel = cuda.compile_gpu(dtype=dtype, kernel=kernel, cache_dir=tmp_path, **case)
    rng = np.random.default_rng(0)
    window, heads, d = case["window"], case["heads"], case["head_dim"]
    n = int(np.prod(window))
    per_image = ref.windows_per_image(case["resolution"], window) if "resolution" in case else 1
    windows = 2 * per_image
    q, k, v = (_random(rng, (windows, heads, n, d), dtype) for _ in range(3))
    table = _random(rng, (ref.table_rows(window), heads), dtype)
    out = _run(driver, kernel, [q, k, v, table], (windows, n, heads * d), q.dtype, windows)
    mask = ref.shift_mask(case["resolution"], window, case["shift"]) if "shift" in case else None
    q64, k64, v64, t64 = (T.to_float64(a, dtype) for a in (q, k, v, table))
    expected = ref.window_attention(q64, k64, v64, bias=ref.lookup(t64, window), mask=mask)
    err, tol = T.compare(out, expected, dtype)
    assert err <= tol, err


@requires_gpu
@pytest.mark.parametrize("padding", ["pad_then_shift", "shift_then_pad"])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_tokens_layout(driver, tmp_path, padding, dtype):
    """A padded token map; f16 runs the tensor-core kernel. pad_qkv is in the
    element type (the GPU ABI)."""
    cfg = dict(window=(7, 7), heads=3, head_dim=32, resolution=(17, 23), shift=(3, 3))
    kernel = cuda.compile_gpu(layout="tokens", padding=padding, dtype=dtype, cache_dir=tmp_path,
                              **cfg)
    rng = np.random.default_rng(1)
    c = cfg["heads"] * cfg["head_dim"]
    tokens = 17 * 23
    q, k, v = (_random(rng, (2, tokens, c), dtype) for _ in range(3))
    table = _random(rng, (ref.table_rows(cfg["window"]), cfg["heads"]), dtype)
    pad = _random(rng, (3, c), dtype)
    out = _run(driver, kernel, [q, k, v, table], (2, tokens, c), q.dtype, 2, pad=pad)
    q64, k64, v64, t64, pad64 = (T.to_float64(a, dtype) for a in (q, k, v, table, pad))
    expected = ref.swin_block_attention_tokens(q64, k64, v64, t64, resolution=cfg["resolution"],
                                               window=cfg["window"], shift=cfg["shift"],
                                               padding=padding, pad_qkv=pad64)
    err, tol = T.compare(out, expected, dtype)
    assert err <= tol, err


@requires_gpu
def test_invalid_arguments_are_reported(driver, tmp_path):
    kernel = cuda.compile_gpu(window=(7, 7), heads=3, head_dim=32, resolution=(14, 14),
                              shift=(3, 3), cache_dir=tmp_path)
    with pytest.raises(cuda.CudaError, match="invalid arguments"):
        kernel(0, 0, 0, 0, 0, 4)


@requires_gpu
def test_tokens_layout_packed_qkv(driver, tmp_path):
    """The qkv projection's output as it is, [batch, L, 3, heads, d], f16."""
    cfg = dict(window=(7, 7), heads=3, head_dim=32, resolution=(14, 14), shift=(3, 3))
    kernel = cuda.compile_gpu(layout="tokens", packed_qkv=True, dtype="f16",
                              cache_dir=tmp_path, **cfg)
    rng = np.random.default_rng(4)
    c, tokens = 96, 196
    qkv = rng.standard_normal((2, tokens, 3, 3, 32)).astype(np.float16)
    table = rng.standard_normal((ref.table_rows(cfg["window"]), 3)).astype(np.float16)
    pointers = [driver.to_device(a) for a in (qkv, table)]
    out = driver.alloc(2 * tokens * c * 2)
    try:
        kernel.call_packed(pointers[0], pointers[1], out, 2)
        driver.synchronize()
        got = driver.to_host(out, (2, tokens, c), np.float16)
    finally:
        for p in pointers + [out]:
            driver.free(p)
    q, k, v = (qkv[:, :, i].reshape(2, tokens, c).astype(np.float64) for i in range(3))
    expected = ref.swin_block_attention_tokens(q, k, v, table.astype(np.float64),
                                               resolution=cfg["resolution"],
                                               window=cfg["window"], shift=cfg["shift"])
    assert np.abs(got.astype(np.float64) - expected).max() <= 2e-3 * max(1.0, np.abs(expected).max())


@requires_gpu
def test_misaligned_buffers_are_reported(driver, tmp_path):
    """Rows move in 16-byte vectors: an unaligned buffer is an error, not a fault."""
    kernel = cuda.compile_gpu(window=(7, 7), heads=3, head_dim=32, dtype="f16",
                              cache_dir=tmp_path)
    buffers = [driver.alloc(3 * 49 * 32 * 2 + 16) for _ in range(5)]
    try:
        with pytest.raises(cuda.CudaError, match="16-byte aligned"):
            kernel(buffers[0] + 2, buffers[1], buffers[2], buffers[3], buffers[4], 1)
    finally:
        for p in buffers:
            driver.free(p)


@pytest.mark.parametrize("emit", ["ptx", "cubin"])
def test_compiles_without_a_gpu(kernel_cache, aot_path, emit):
    """compile_gpu takes compile()'s spellings and needs no driver: the runtime
    links against the toolkit's stub libcuda; only calling loads the driver."""
    kernel = cuda.compile_gpu((7, 7), 3, 32, resolution=(14, 14), shift=3, dtype="float16",
                              layout="tokens", emit=emit, cache_dir=kernel_cache)
    assert kernel.config.dtype == "f16" and kernel.config.chip == "sm_90"
    assert kernel.image.suffix == f".{emit}" and kernel.image.stat().st_size > 0
    if emit == "ptx":
        assert ".target sm_90" in kernel.image.read_text()
    assert "CUdeviceptr" in kernel.header.read_text() and kernel.runtime.suffix == ".c"
    assert kernel.library.is_file()
    assert [a.name for a in kernel.abi.arguments] == ["q", "k", "v", "table", "out", "batch",
                                                      "pad_qkv", "stream"]
    if _DEVICE is None:
        with pytest.raises(cuda.CudaError):
            kernel(16, 32, 48, 64, 1 << 20, 1)


def test_dynamic_shared_memory_is_described(kernel_cache, aot_path):
    """Each entry point's launches come from the JSON as swin-aot wrote them: the
    window-12 backward's item kernel takes its 82,580 bytes (q, k, v, dout as
    rows of 33 floats, the table and G, per-token P(t), labels, lse and D, each
    16-byte aligned) as dynamic shared memory, the runtime's table passes them;
    static kernels (the forward, the reduction, Swin-T stage 1) have none."""
    kernel = cuda.compile_gpu((12, 12), 2, 32, resolution=(24, 24), shift=6, dtype="f32",
                              grad=True, cache_dir=kernel_cache)
    items, reduction = kernel.abi.backward.launches
    assert (items.block_size, items.items_per_block, items.dynamic_shared_bytes) == (32, 1, 82580)
    assert reduction.items_per_block == 0 and reduction.dynamic_shared_bytes == 0
    assert all(launch.dynamic_shared_bytes == 0 for launch in kernel.abi.launches)
    assert ".dynamic_shared_bytes = 82580}" in kernel.runtime.read_text()
    stage1 = cuda.compile_gpu((7, 7), 3, 32, resolution=(14, 14), shift=3, dtype="f16",
                              grad=True, cache_dir=kernel_cache)
    launches = stage1.abi.launches + stage1.abi.backward.launches
    assert len(launches) == 3 and all(l.dynamic_shared_bytes == 0 for l in launches)
    assert ".dynamic_shared_bytes = " not in stage1.runtime.read_text()


def test_gpu_presence_is_reported():
    """Always runs: says which way the GPU tests went."""
    print(f"GPU: {_DEVICE or 'none (GPU execution tests skipped)'}")


@requires_gpu
def test_torch_cuda_tensors(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    kernel = cuda.compile_gpu(window=(7, 7), heads=3, head_dim=32, resolution=(14, 14),
                              shift=(3, 3), cache_dir=tmp_path)
    q, k, v = (torch.randn(8, 3, 49, 32, device="cuda") for _ in range(3))
    table = torch.randn(169, 3, device="cuda")
    out = cuda.torch_call(kernel, q, k, v, table)
    torch.cuda.synchronize()
    expected = ref.window_attention(q.cpu().numpy(), k.cpu().numpy(), v.cpu().numpy(),
                                    bias=ref.lookup(table.cpu().numpy().astype(np.float64), (7, 7)),
                                    mask=ref.shift_mask((14, 14), (7, 7), (3, 3)))
    assert np.abs(out.cpu().numpy() - expected).max() <= 1e-5 * max(1.0, np.abs(expected).max())


@requires_gpu
def test_torch_cuda_packed_qkv(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    kernel = cuda.compile_gpu(window=(7, 7), heads=3, head_dim=32, resolution=(14, 14),
                              shift=(3, 3), layout="tokens", packed_qkv=True, dtype="f16",
                              cache_dir=tmp_path)
    qkv = torch.randn(2, 196, 3 * 96, device="cuda", dtype=torch.float16)
    table = torch.randn(169, 3, device="cuda", dtype=torch.float16)
    out = cuda.torch_call_packed(kernel, qkv, table)
    torch.cuda.synchronize()
    q, k, v = (t.double().cpu().numpy() for t in qkv.split(96, dim=-1))
    expected = ref.swin_block_attention_tokens(q, k, v, table.double().cpu().numpy(),
                                               resolution=(14, 14), window=(7, 7), shift=(3, 3))
    got = out.double().cpu().numpy()
    assert np.abs(got - expected).max() <= 2e-3 * max(1.0, np.abs(expected).max())


@requires_gpu
def test_torch_cuda_output_overlap_is_refused(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    kernel = cuda.compile_gpu(window=(7, 7), heads=3, head_dim=32, cache_dir=tmp_path)
    q, k, v = (torch.randn(8, 3, 49, 32, device="cuda") for _ in range(3))
    table = torch.randn(169, 3, device="cuda")
    with pytest.raises(ValueError, match="out overlaps v"):
        cuda.torch_call(kernel, q, k, v, table, out=v.view(8, 49, 96))
    packed = cuda.compile_gpu(window=(7, 7), heads=3, head_dim=32, resolution=(14, 14),
                              shift=(3, 3), layout="tokens", packed_qkv=True, dtype="f16",
                              cache_dir=tmp_path)
    qkv = torch.randn(2, 196, 3 * 96, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match="out overlaps qkv"):
        cuda.torch_call_packed(packed, qkv, table.half(),
                               out=qkv.view(-1)[:2 * 196 * 96].view(2, 196, 96))


GRAD_CASES = [
    dict(window=(7, 7), heads=3, head_dim=32, resolution=(14, 14), shift=(3, 3)),
    dict(window=(7, 7), heads=3, head_dim=32),
    dict(window=(4, 6), heads=2, head_dim=16, resolution=(8, 18), shift=(2, 3)),
    # 82,580 bytes of shared memory in f32: dynamic, opted in to at load.
    dict(window=(12, 12), heads=2, head_dim=32, resolution=(24, 24), shift=(6, 6)),
]


def _check_gradient(got, want, dtype, what):
    err = float(np.abs(T.to_float64(got, dtype) - want).max())
    tol = T.TOLERANCE[dtype] * float(np.abs(want).max())
    assert err <= tol, f"{what}: max error {err:.3g} > {tol:.3g}"


@requires_gpu
@pytest.mark.parametrize("case", GRAD_CASES, ids=lambda c: "x".join(map(str, c["window"])))
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_backward_windows_layout(driver, tmp_path, case, dtype):
    """The GPU backward against the float64 reference; a second run gives the same bits."""
    kernel = cuda.compile_gpu(dtype=dtype, grad=True, cache_dir=tmp_path, **case)
    rng = np.random.default_rng(2)
    window, heads, d = case["window"], case["heads"], case["head_dim"]
    n = int(np.prod(window))
    per_image = ref.windows_per_image(case["resolution"], window) if "resolution" in case else 1
    windows = 2 * per_image
    q, k, v = (_random(rng, (windows, heads, n, d), dtype) for _ in range(3))
    table = _random(rng, (ref.table_rows(window), heads), dtype)
    q64, k64, v64, t64 = (T.to_float64(a, dtype) for a in (q, k, v, table))
    mask = ref.shift_mask(case["resolution"], window, case["shift"]) if "shift" in case else None
    out = T.to_storage(ref.window_attention(q64, k64, v64, bias=ref.lookup(t64, window),
                                            mask=mask).astype(np.float32), dtype)
    dout = _random(rng, out.shape, dtype)
    inputs = [driver.to_device(a) for a in (q, k, v, table, out, dout)]
    grads = [driver.alloc(q.nbytes) for _ in range(3)] + [driver.alloc(table.size * 4)]
    try:
        runs = []
        for _ in range(2):
            kernel.backward(*inputs, *grads, windows)
            driver.synchronize()
            runs.append([driver.to_host(p, q.shape, q.dtype) for p in grads[:3]]
                        + [driver.to_host(grads[3], table.shape, np.float32)])
    finally:
        for p in inputs + grads:
            driver.free(p)
    want = ref.window_attention_backward(q64, k64, v64, t64, T.to_float64(dout, dtype), window,
                                         mask=mask)
    for name, got, second, expected in zip(("dq", "dk", "dv", "dtable"), runs[0], runs[1], want):
        _check_gradient(got, expected, "f32" if name == "dtable" else dtype, name)
        assert np.array_equal(got, second), f"{name} differs between two runs"


@requires_gpu
@pytest.mark.parametrize("padding", ["pad_then_shift", "shift_then_pad"])
def test_backward_tokens_layout(driver, tmp_path, padding):
    """A padded token map, f16: padding tokens are zeros and get no gradient."""
    cfg = dict(window=(7, 7), heads=3, head_dim=32, resolution=(17, 23), shift=(3, 3))
    kernel = cuda.compile_gpu(layout="tokens", padding=padding, dtype="f16", grad=True,
                              cache_dir=tmp_path, **cfg)
    rng = np.random.default_rng(3)
    c, tokens = 96, 17 * 23
    q, k, v = (_random(rng, (2, tokens, c), "f16") for _ in range(3))
    table = _random(rng, (ref.table_rows(cfg["window"]), 3), "f16")
    q64, k64, v64, t64 = (a.astype(np.float64) for a in (q, k, v, table))
    geometry = dict(resolution=cfg["resolution"], window=cfg["window"], shift=cfg["shift"],
                    padding=padding)
    out = ref.swin_block_attention_tokens(q64, k64, v64, t64, **geometry).astype(np.float16)
    dout = _random(rng, out.shape, "f16")
    inputs = [driver.to_device(a) for a in (q, k, v, table, out, dout)]
    grads = [driver.alloc(q.nbytes) for _ in range(3)] + [driver.alloc(table.size * 4)]
    try:
        kernel.backward(*inputs, *grads, 2)
        driver.synchronize()
        got = [driver.to_host(p, q.shape, np.float16) for p in grads[:3]]
        got.append(driver.to_host(grads[3], table.shape, np.float32))
    finally:
        for p in inputs + grads:
            driver.free(p)
    want = ref.swin_block_attention_tokens_backward(q64, k64, v64, t64, dout.astype(np.float64),
                                                    **geometry)
    for name, g, w in zip(("dq", "dk", "dv", "dtable"), got, want):
        _check_gradient(g, w, "f32" if name == "dtable" else "f16", name)


@requires_gpu
def test_torch_cuda_backward_packed_qkv(tmp_path):
    """torch_call_backward_packed on CUDA tensors, bf16: dqkv in qkv's layout, dtable f32."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    cfg = dict(window=(7, 7), heads=3, head_dim=32, resolution=(14, 14), shift=(3, 3))
    kernel = cuda.compile_gpu(layout="tokens", packed_qkv=True, dtype="bf16", grad=True,
                              cache_dir=tmp_path, **cfg)
    qkv = torch.randn(2, 196, 3 * 96, device="cuda", dtype=torch.bfloat16)
    table = torch.randn(169, 3, device="cuda", dtype=torch.bfloat16)
    q, k, v = (t.double().cpu().numpy() for t in qkv.split(96, dim=-1))
    geometry = dict(resolution=(14, 14), window=(7, 7), shift=(3, 3))
    t64 = table.double().cpu().numpy()
    # The reference's forward, rounded: the backward's error alone.
    out = torch.from_numpy(ref.swin_block_attention_tokens(q, k, v, t64, **geometry)).to(
        device="cuda", dtype=torch.bfloat16)
    dout = torch.randn_like(out)
    dqkv, dtable = cuda.torch_call_backward_packed(kernel, qkv, table, out, dout)
    again = cuda.torch_call_backward_packed(kernel, qkv, table, out, dout)
    torch.cuda.synchronize()
    assert dtable.dtype == torch.float32 and torch.equal(dtable, again[1])
    want = ref.swin_block_attention_tokens_backward(q, k, v, t64, dout.double().cpu().numpy(),
                                                    **geometry)
    got = [t.reshape(2, 196, 96).double().cpu().numpy() for t in dqkv.unbind(2)]
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        _check_gradient(g, w, "bf16", name)
    _check_gradient(dtable.cpu().numpy(), want[3], "f32", "dtable")
