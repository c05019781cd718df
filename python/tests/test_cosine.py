"""SwinV2's cosine attention kernels (``cosine=True``) against the NumPy reference.

``softmax(cos(q, k) * min(exp(logit_scale[h]), 100) + table[idx] (+ mask)) v``
with q and k L2-normalized inside the kernel (PyTorch's ``F.normalize``
guard ``max(|x|, 1e-12)``): ``reference.swinv2_window_attention`` and, for
feature maps, ``reference.swin_block_attention_tokens(logit_scale=...)``.

Logit scales cycle through below, near and above the clamp at ln 100 (4.605)
and a negative one, so every head's factor differs and one is clamped.

Tolerance: the scores are multiplied by up to 100 and their float32 rounding
with them (SwinV2's float32 error is ~10x v1's): f32 max |error| <= 1e-4 *
max(1, max |ref|); f16/bf16 storage as in test_kernel (2e-3, 1.6e-2) on
inputs rounded to the storage type.
"""

import numpy as np
import pytest

import swin_opt
from swin_opt import reference as ref

pytestmark = pytest.mark.aot

F32_TOL = 1e-4


def logit_scales(heads):
    values = [np.log(10.0), 5.5, -0.5, 4.5]
    return np.array([values[i % len(values)] for i in range(heads)], dtype=np.float32)


def _assert_close(out, expected, tol):
    error = np.abs(np.asarray(out, dtype=np.float64) - expected).max()
    allowed = tol * max(1.0, np.abs(expected).max())
    assert error <= allowed, f"max |error| {error:.3g} > {allowed:.3g}"


def _windows_case(kernel, n, *, window, heads, head_dim, resolution=None, shift=0,
                  seed=0, dtype=np.float32, tol=F32_TOL):
    rng = np.random.default_rng(seed)
    tokens = int(np.prod(window))
    q, k, v = (rng.standard_normal((n, heads, tokens, head_dim)).astype(dtype)
               for _ in range(3))
    # SwinV2's table: 16 * sigmoid(...), in (0, 16).
    table = (16 / (1 + np.exp(-rng.standard_normal((ref.table_rows(window), heads))))).astype(dtype)
    ls = logit_scales(heads)
    out = kernel(q, k, v, table, logit_scale=ls)
    mask = ref.shift_mask(resolution, window, ref.normalize_shift(shift, len(window))) \
        if resolution is not None and any(ref.normalize_shift(shift, len(window))) else None
    expected = ref.swinv2_window_attention(
        q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), ls,
        bias=ref.lookup(table.astype(np.float64), window), mask=mask)
    _assert_close(out, expected, tol)
    return out


@pytest.fixture(scope="module")
def build(aot_path, tmp_path_factory):
    cache = tmp_path_factory.mktemp("cosine-kernels")

    def _build(*args, **kwargs):
        return swin_opt.compile(*args, cosine=True, cache_dir=cache, **kwargs)
    return _build


@pytest.mark.parametrize("kernel", [None, "rows"])
def test_swinv2_t_stage1_shifted(build, kernel):
    """Swin-V2-T stage 1's window (8x8, 3 heads, head_dim 32), shifted on a
    16x16 map: two images of 4 windows."""
    k = build((8, 8), 3, 32, resolution=(16, 16), shift=4, kernel=kernel)
    assert k.config.effective_scale == 1.0
    _windows_case(k, 8, window=(8, 8), heads=3, head_dim=32, resolution=(16, 16), shift=4)


@pytest.mark.parametrize("window,heads,head_dim", [((8, 8), 4, 32), ((7, 7), 6, 16),
                                                   ((4, 6), 5, 12), ((2, 3, 3), 2, 8)])
def test_unshifted(build, window, heads, head_dim):
    k = build(window, heads, head_dim)
    for n, seed in ((1, 0), (3, 1)):
        _windows_case(k, n, window=window, heads=heads, head_dim=head_dim, seed=seed)


def test_f16_and_bf16(build):
    k16 = build((8, 8), 2, 16, dtype="float16")
    _windows_case(k16, 2, window=(8, 8), heads=2, head_dim=16, dtype=np.float16, tol=2e-3)
    # bf16: round the inputs to bf16 and compare against them.
    kb = build((8, 8), 2, 16, dtype="bfloat16")
    rng = np.random.default_rng(5)
    shape = (2, 2, 64, 16)
    q, k, v = (swin_opt.float32_to_bf16_bits(rng.standard_normal(shape)) for _ in range(3))
    table = swin_opt.float32_to_bf16_bits(16 / (1 + np.exp(-rng.standard_normal((225, 2)))))
    ls = logit_scales(2)
    out = swin_opt.bf16_bits_to_float32(kb(q, k, v, table, logit_scale=ls))
    f = [swin_opt.bf16_bits_to_float32(x).astype(np.float64) for x in (q, k, v, table)]
    expected = ref.swinv2_window_attention(f[0], f[1], f[2], ls, bias=ref.lookup(f[3], (8, 8)))
    _assert_close(out, expected, 1.6e-2)


def test_clamp_and_zero_rows(build):
    """Logit scales far above ln 100 give the factor 100 exactly, and an all-zero
    q or k row normalizes to zero (F.normalize's guard), not NaN."""
    k = build((4, 4), 2, 8)
    rng = np.random.default_rng(3)
    q, kk, v = (rng.standard_normal((2, 2, 16, 8)).astype(np.float32) for _ in range(3))
    q[0, 0, 3] = 0.0
    kk[1, 1, 5] = 0.0
    table = rng.standard_normal((49, 2)).astype(np.float32)
    huge = np.array([50.0, 4.60517], dtype=np.float32)
    out = k(q, kk, v, table, logit_scale=huge)
    assert np.isfinite(out).all()
    expected = ref.swinv2_window_attention(q, kk, v, huge, bias=ref.lookup(table, (4, 4)))
    _assert_close(out, expected, F32_TOL)
    # The same factor (100) for both heads: 50 is clamped to ln 100.
    same = k(q, kk, v, table, logit_scale=np.array([np.log(100.0)] * 2, dtype=np.float32))
    np.testing.assert_allclose(out, same, rtol=0, atol=1e-4)


def test_unfused_reference_lowering_agrees(aot_path, tmp_path):
    """swin-aot --unfused: the step-by-step lowering computes the same."""
    import subprocess

    from swin_opt import Kernel

    lib = tmp_path / "unfused.so"
    subprocess.run([str(aot_path), "--window=8,8", "--heads=3", "--head-dim=32",
                    "--resolution=16,16", "--shift=4", "--cosine", "--unfused",
                    "--emit=so", "-o", str(lib)], check=True)
    cfg = swin_opt.make_config((8, 8), 3, 32, resolution=(16, 16), shift=4, cosine=True)
    k = Kernel(cfg, lib, lib.with_name(lib.name + ".h"))
    _windows_case(k, 4, window=(8, 8), heads=3, head_dim=32, resolution=(16, 16), shift=4)


@pytest.mark.parametrize("padding", ["pad_then_shift", "shift_then_pad"])
@pytest.mark.parametrize("packed", [False, True])
def test_tokens_padded_and_shifted(build, padding, packed):
    """Token layout on a 13x10 map (padded to 16x16 with 8x8 windows),
    shifted by 4, padding rows of their own; q, k, v separate or packed."""
    window, heads, d, res = (8, 8), 3, 16, (13, 10)
    kernel = build(window, heads, d, resolution=res, shift=4, padding=padding,
                   layout="tokens", packed_qkv=packed)
    rng = np.random.default_rng(11)
    c, tokens, batch = heads * d, res[0] * res[1], 2
    qkv = rng.standard_normal((batch, tokens, 3, heads, d)).astype(np.float32)
    q, k, v = (np.ascontiguousarray(qkv[:, :, i]).reshape(batch, tokens, c) for i in range(3))
    table = rng.standard_normal((ref.table_rows(window), heads)).astype(np.float32)
    pad = rng.standard_normal((3, c)).astype(np.float32)
    ls = logit_scales(heads)
    out = (kernel(qkv, table, pad_qkv=pad, logit_scale=ls) if packed
           else kernel(q, k, v, table, pad_qkv=pad, logit_scale=ls))
    expected = ref.swin_block_attention_tokens(q, k, v, table, resolution=res, window=window,
                                               shift=4, padding=padding, pad_qkv=pad,
                                               logit_scale=ls)
    _assert_close(out, expected, F32_TOL)


def test_arguments(build, aot_path, tmp_path):
    k = build((4, 4), 2, 8)
    assert [a.name for a in k.abi.arguments] == [
        "q", "k", "v", "table", "logit_scale", "out", "num_windows"]
    assert k.abi["logit_scale"].dtype == "f32"
    assert "const float *logit_scale" in k.header.read_text()
    x = np.zeros((1, 2, 16, 8), np.float32)
    table = np.zeros((49, 2), np.float32)
    with pytest.raises(ValueError, match=r"logit_scale \[2\] is required"):
        k(x, x, x, table)
    with pytest.raises(ValueError, match="logit_scale must have shape"):
        k(x, x, x, table, logit_scale=np.zeros(3, np.float32))
    plain = swin_opt.compile((4, 4), 2, 8, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="only accepted by cosine=True"):
        plain(x, x, x, table, logit_scale=np.zeros(2, np.float32))
    # The GPU kernel takes the same arguments (its warp kernel: 16 channels).
    gpu = swin_opt.compile((4, 4), 2, 16, cosine=True, target="nvptx", dtype="float16",
                           cache_dir=tmp_path)
    assert [a.name for a in gpu.abi.arguments][:5] == ["q", "k", "v", "table", "logit_scale"]
    assert "mma.sync" in gpu.image.read_text()


@pytest.mark.parametrize("pretrained", [None, (12, 12)])
def test_cpb_mlp_table_at_compile_time(aot_path, tmp_path, pretrained):
    """swin-aot --cpb-mlp: the kernel's table is SwinV2's, computed by the
    compiler from the MLP's weights (the table argument is NULL)."""
    import subprocess

    from swin_opt import Kernel

    window, heads, d, hidden = (8, 8), 3, 32, 64
    rng = np.random.default_rng(21)
    w1 = rng.standard_normal((hidden, 2)).astype(np.float32)
    b1 = (0.5 * rng.standard_normal(hidden)).astype(np.float32)
    w2 = (rng.standard_normal((heads, hidden)) / 8).astype(np.float32)
    weights = tmp_path / "cpb.f32"
    weights.write_bytes(np.concatenate([w1.ravel(), b1, w2.ravel()]).astype("<f4").tobytes())
    lib = tmp_path / "cpb.so"
    cmd = [str(aot_path), "--window=8,8", f"--heads={heads}", f"--head-dim={d}",
           "--resolution=16,16", "--shift=4", "--cosine", f"--cpb-mlp={weights}",
           f"--cpb-hidden={hidden}", "--emit=so", "-o", str(lib)]
    if pretrained:
        cmd.append(f"--pretrained-window={pretrained[0]},{pretrained[1]}")
    subprocess.run(cmd, check=True)
    table = ref.swinv2_cpb_table(ref.swinv2_relative_coords_table(window, pretrained), w1, b1, w2)
    cfg = swin_opt.make_config(window, heads, d, resolution=(16, 16), shift=4, cosine=True)
    # A kernel whose table is compiled in is called without one.
    kernel = Kernel(cfg, lib, lib.with_name(lib.name + ".h"), table=table.astype(np.float32))
    assert kernel.abi["table"].nullable
    q, k, v = (rng.standard_normal((4, heads, 64, d)).astype(np.float32) for _ in range(3))
    ls = logit_scales(heads)
    out = kernel(q, k, v, logit_scale=ls)
    expected = ref.swinv2_window_attention(q, k, v, ls, bias=ref.lookup(table, window),
                                           mask=ref.shift_mask((16, 16), window, (4, 4)))
    _assert_close(out, expected, F32_TOL)


# The GPU's tensor-core kernel (kernel="warps", emulated on the host) scales
# each score by s_h / (|q_i| |k_j|) rather than normalizing the operands:
# float16 within float16's tolerance, float32 on two bf16 terms (f32_mma) within
# 1e-3 (the scores' factor of up to 100 multiplies bf16x3's 2^-16 of each product:
# 3.9e-4 here; the rows and tiles kernels' f32 within F32_TOL).
WARPS_CASES = {
    "f16": (dict(dtype="float16"), 2e-3),
    "f32-bf16x3": (dict(dtype="float32", f32_mma="bf16x3"), 1e-3),
}


@pytest.mark.parametrize("case", sorted(WARPS_CASES))
def test_warps_swinv2_t_stage1_shifted(build, case):
    """Swin-V2-T stage 1 (8x8, 3 heads, head_dim 32, shifted on a 16x16 map) on
    the warp kernel, which the GPU runs."""
    options, tol = WARPS_CASES[case]
    k = build((8, 8), 3, 32, resolution=(16, 16), shift=4, kernel="warps", **options)
    dtype = np.float16 if options["dtype"] == "float16" else np.float32
    _windows_case(k, 8, window=(8, 8), heads=3, head_dim=32, resolution=(16, 16), shift=4,
                  dtype=dtype, tol=tol, seed=2)


def test_warps_clamp_and_zero_rows(build):
    """The warp kernel keeps F.normalize's guard (a zero q or k row scores zero,
    not NaN) and the clamp of the logit scale at ln 100; 7x7 windows pad N to 64
    keys, whose zero rows must not reach the output either."""
    k = build((7, 7), 2, 16, dtype="float16", kernel="warps")
    rng = np.random.default_rng(4)
    q, kk, v = (rng.standard_normal((2, 2, 49, 16)).astype(np.float16) for _ in range(3))
    q[0, 0, 3] = 0
    kk[1, 1, 5] = 0
    table = rng.standard_normal((169, 2)).astype(np.float16)
    huge = np.array([50.0, -1.0], dtype=np.float32)
    out = k(q, kk, v, table, logit_scale=huge)
    assert np.isfinite(out.astype(np.float32)).all()
    expected = ref.swinv2_window_attention(*(x.astype(np.float64) for x in (q, kk, v)), huge,
                                           bias=ref.lookup(table.astype(np.float64), (7, 7)))
    _assert_close(out, expected, 2e-3)
