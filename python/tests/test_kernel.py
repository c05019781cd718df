"""Kernels built by the real swin-aot, compared against the NumPy reference.

Skipped when swin-aot is absent, unless SWIN_REQUIRE_AOT is set (then they
fail).  About 40 compiles; kernels are cached in a per-module directory.

Accuracy criterion: ``max|out - ref| <= tol * max(1, max|ref|)`` with
tol = 1e-5 (float32), 2e-3 (float16), 1.6e-2 (bfloat16); for the low-precision
kernels the reference is computed from the inputs already rounded to the
storage type, so the budget only covers the kernel's own rounding (output
storage ~ 2**-11 / 2**-9 relative, plus possibly rounded probabilities) — see
swin_opt/testing.py for the justification.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import swin_opt
from swin_opt import reference as R
from swin_opt import testing as T
from swin_opt.dense import host_cpu_flags

pytestmark = pytest.mark.aot


def _id(value) -> str:
    if isinstance(value, dict):
        return "-".join(f"{k}={_id(v)}" for k, v in value.items())
    if isinstance(value, (tuple, list)):
        return "x".join(map(str, value))
    return str(value)


def _check(kernel, n, seed=0):
    check = T.check_against_reference(kernel, n, seed=seed)
    out = check.out
    assert out.shape == kernel.output_shape(n) and out.dtype == kernel.config.storage_dtype
    assert check.passed, (f"{swin_opt.describe(kernel.config)} n={n}: max abs error "
                          f"{check.error:.3g} > {check.allowed:.3g}")
    return out


# window, heads, head_dim: every window size of interest, heads 1..8, head_dim 8..64
UNSHIFTED = [
    ((1, 1), 1, 8),
    ((2, 2), 2, 16),
    ((3, 3), 3, 24),
    ((7, 7), 3, 32),
    ((8, 8), 4, 64),
    ((12, 12), 6, 32),
    ((16, 16), 8, 16),
    ((4, 6), 5, 40),
    ((6, 4), 7, 8),
]


@pytest.mark.parametrize("window,heads,head_dim", UNSHIFTED, ids=_id)
def test_unshifted_f32(build, window, heads, head_dim):
    kernel = build(window, heads, head_dim)
    for n, seed in ((1, 0), (2, 1), (5, 2)):
        _check(kernel, n, seed)


# window, heads, head_dim, resolution, shift
SHIFTED = [
    ((2, 2), 1, 8, (4, 4), 1),
    ((3, 3), 2, 16, (9, 6), 1),
    ((7, 7), 3, 32, (56, 56), 3),  # Swin-T stage 1
    ((7, 7), 4, 32, (14, 21), (0, 3)),  # shift along one axis only
    ((8, 8), 4, 64, (16, 24), 4),
    ((12, 12), 6, 32, (24, 24), 6),
    ((16, 16), 8, 16, (32, 32), 8),
    ((4, 6), 5, 40, (8, 12), (2, 3)),
    ((6, 4), 7, 8, (12, 16), (3, 2)),
    ((7, 7), 2, 8, (14, 14), 0),  # resolution without shift: no mask, nW still enforced
]


@pytest.mark.parametrize("window,heads,head_dim,resolution,shift", SHIFTED, ids=_id)
def test_shifted_f32(build, window, heads, head_dim, resolution, shift):
    kernel = build(window, heads, head_dim, resolution=resolution, shift=shift)
    nw = math.prod(r // w for r, w in zip(resolution, window))
    assert kernel.config.windows_per_image == nw
    _check(kernel, nw)
    _check(kernel, 3 * nw, seed=1)


WINDOWS_3D = [
    dict(window=(2, 7, 7), heads=3, head_dim=32),
    dict(window=(2, 4, 4), heads=2, head_dim=16, resolution=(4, 8, 8), shift=(1, 2, 2)),
    dict(window=(1, 3, 3), heads=1, head_dim=8, resolution=(2, 6, 6), shift=(0, 1, 1)),
]


@pytest.mark.parametrize("kwargs", WINDOWS_3D, ids=_id)
def test_3d_windows_f32(build, kwargs):
    kernel = build(**kwargs)
    nw = kernel.config.windows_per_image or 2
    _check(kernel, nw)
    _check(kernel, 2 * nw, seed=3)


def test_explicit_scale(build):
    kernel = build((7, 7), 3, 32, resolution=(14, 14), shift=3, scale=0.1)
    assert kernel.config.effective_scale == 0.1
    _check(kernel, 8)


def test_swinv2_cosine_attention(build):
    """SwinV2 (what swin_opt.torch does for its modules): a scale-1 kernel fed
    ``s_h q/|q|`` and ``k/|k|`` with the continuous position bias table equals
    the independent cosine-attention reference."""
    window, heads, d = (4, 4), 3, 16
    kernel = build(window, heads, d, resolution=(8, 8), shift=2, scale=1.0)
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((8, heads, 16, d)) for _ in range(3))
    logit_scale = np.log([2.0, 30.0, 300.0])  # the last is clamped to 100
    table = R.swinv2_cpb_table(R.swinv2_relative_coords_table(window),
                               rng.standard_normal((64, 2)), rng.standard_normal(64),
                               rng.standard_normal((heads, 64)))
    s = np.minimum(np.exp(logit_scale), 100.0)[:, None, None]
    qn = q / np.linalg.norm(q, axis=-1, keepdims=True) * s
    kn = k / np.linalg.norm(k, axis=-1, keepdims=True)
    out = kernel(*(np.ascontiguousarray(x, dtype=np.float32) for x in (qn, kn, v, table)))
    want = R.swinv2_window_attention(q, k, v, logit_scale, R.lookup(table, window),
                                     R.shift_mask((8, 8), window, 2))
    err, tol = T.compare(out, want, kernel.config.dtype)
    assert err <= tol, err


@pytest.mark.parametrize(
    "kwargs",
    [dict(window=(7, 7), heads=3, head_dim=32),
     dict(window=(4, 6), heads=2, head_dim=16, resolution=(8, 12), shift=(2, 3))],
    ids=_id,
)
def test_baked_table_f32(build, kwargs):
    cfg = swin_opt.make_config(**kwargs)
    table = T.random_table(cfg, seed=11)
    kernel = build(**kwargs, table=table)
    assert kernel.table is not None
    nw = kernel.config.windows_per_image or 3
    _check(kernel, nw)
    _check(kernel, 2 * nw, seed=5)
    # the table argument may be NULL: the raw C call with a null table works too
    inp = T.random_inputs(kernel, nw, seed=6)
    out = np.zeros(kernel.output_shape(nw), np.float32)
    rc = kernel.cfunc(inp.q.ctypes.data, inp.k.ctypes.data, inp.v.ctypes.data, None,
                      out.ctypes.data, nw)
    assert rc == 0
    np.testing.assert_array_equal(out, kernel(inp.q, inp.k, inp.v))


def test_custom_name(build):
    kernel = build((3, 3), 2, 8, name="my_swin_attn")
    assert "my_swin_attn" in kernel.header.read_text()
    _check(kernel, 2)


LOW_PRECISION = [
    dict(window=(7, 7), heads=3, head_dim=32),
    dict(window=(7, 7), heads=3, head_dim=32, resolution=(14, 14), shift=3),
    dict(window=(4, 6), heads=2, head_dim=16, resolution=(8, 12), shift=(2, 3)),
    dict(window=(2, 4, 4), heads=2, head_dim=16, resolution=(4, 8, 8), shift=(1, 2, 2)),
]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("kwargs", LOW_PRECISION, ids=_id)
def test_low_precision(build, kwargs, dtype):
    kernel = build(**kwargs, dtype=dtype)
    nw = kernel.config.windows_per_image or 3
    out = _check(kernel, nw)
    assert out.dtype == (np.float16 if dtype == "float16" else np.uint16)
    _check(kernel, 2 * nw, seed=1)


# x86-64-v4's AVX-512 subsets; without them its code stops at the first
# AVX-512 instruction (SIGILL): an AVX2 machine (Zen 3) skips those cases.
_NO_AVX512 = pytest.mark.skipif(
    not {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"} <= host_cpu_flags(),
    reason="x86-64-v4 code needs AVX-512 (F, BW, CD, DQ, VL), which this CPU lacks")


# Other CPUs' code, run here: AVX2's 8 lanes (the 16-register micro-kernels,
# the softmax through memory), and AVX-512 without AVX512-BF16 (bf16 widened
# to f32 at 16 lanes).
@pytest.mark.parametrize("cpu,kwargs", [
    ("x86-64-v3", dict(window=(7, 7), heads=3, head_dim=32, resolution=(14, 14), shift=3)),
    ("x86-64-v3", dict(window=(12, 12), heads=2, head_dim=24)),
    ("x86-64-v3", dict(window=(2, 4, 4), heads=2, head_dim=16, dtype="bfloat16")),
    pytest.param("x86-64-v4", dict(window=(7, 7), heads=3, head_dim=32, resolution=(14, 14),
                                   shift=3, dtype="bfloat16"), marks=_NO_AVX512),
    pytest.param("x86-64-v4", dict(window=(24, 24), heads=1, head_dim=32), marks=_NO_AVX512),
], ids=lambda v: v if isinstance(v, str) else _id(v))
def test_other_cpus(build, cpu, kwargs):
    kernel = build(**kwargs, cpu=cpu)
    _check(kernel, kernel.config.windows_per_image or 2)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_baked_table(build, dtype):
    code = swin_opt.normalize_dtype(dtype)
    rng = np.random.default_rng(12)
    table = T.round_to_dtype(rng.standard_normal((25, 2)).astype(np.float32), code)
    kernel = build((3, 3), 2, 8, dtype=dtype, table=table)
    _check(kernel, 4)


def test_cache_reuse(build):
    first = build((2, 2), 2, 16)
    mtime = first.library.stat().st_mtime_ns
    again = build((2, 2), 2, 16)
    assert again.library == first.library and again.library.stat().st_mtime_ns == mtime
    assert build((2, 2), 2, 16, scale=0.5).library != first.library


# --------------------------------------------------------------------------- #
# Errors
# --------------------------------------------------------------------------- #
def test_argument_errors(build):
    kernel = build((7, 7), 3, 32, resolution=(56, 56), shift=3)
    inp = T.random_inputs(kernel, 64)
    q, k, v, t = inp.args()
    with pytest.raises(ValueError, match="must have shape"):
        kernel(q.reshape(64, 3, 32, 49), k, v, t)
    with pytest.raises(ValueError, match="must have shape"):
        kernel(q, k[:, :2].copy(), v, t)
    with pytest.raises(ValueError, match="must have shape"):
        kernel(q[..., :16].copy(), k, v, t)
    with pytest.raises(ValueError, match="must have shape"):
        kernel(q, k, v, t[:100].copy())
    with pytest.raises(ValueError, match="table"):
        kernel(q, k, v)
    with pytest.raises(TypeError, match="dtype"):
        kernel(q.astype(np.float64), k, v, t)
    with pytest.raises(TypeError, match="dtype"):
        kernel(q, k, v, t.astype(np.float16))
    with pytest.raises(ValueError, match="contiguous"):
        kernel(q.transpose(0, 1, 3, 2).copy().transpose(0, 1, 3, 2), k, v, t)
    with pytest.raises(ValueError, match="multiple"):
        kernel(q[:63].copy(), k[:63].copy(), v[:63].copy(), t)


def test_kernel_rejects_bad_num_windows(build):
    """The C function itself returns non-zero (and writes nothing) for num_windows % nW != 0."""
    kernel = build((7, 7), 3, 32, resolution=(56, 56), shift=3)
    inp = T.random_inputs(kernel, 64)
    out = np.full(kernel.output_shape(64), 3.0, np.float32)
    rc = kernel.cfunc(inp.q.ctypes.data, inp.k.ctypes.data, inp.v.ctypes.data,
                      inp.table.ctypes.data, out.ctypes.data, 63)
    assert rc != 0
    assert np.all(out == 3.0)


@pytest.mark.parametrize(
    "kwargs",
    [dict(window=(7, 7), heads=3, head_dim=32, resolution=(14, 14), shift=7),  # shift >= window
     dict(window=(7, 7), heads=3, head_dim=32, resolution=(14, 14), shift=(3, 9))],
    ids=_id,
)
def test_bad_config_is_a_compile_error(build, kwargs):
    with pytest.raises(swin_opt.CompileError) as info:
        build(**kwargs)
    assert info.value.returncode != 0
    assert "swin-aot" in str(info.value) and info.value.stderr.strip()


def test_tokens_layout(build):
    """Token layout with both padding conventions."""
    cases = [dict(window=(7, 7), heads=3, head_dim=32, resolution=(14, 14), shift=3),
             dict(window=(4, 6), heads=2, head_dim=16, resolution=(9, 13), shift=(2, 3),
                  padding="pad_then_shift"),
             dict(window=(4, 6), heads=2, head_dim=16, resolution=(9, 13), shift=(2, 3),
                  padding="shift_then_pad")]
    for kwargs in cases:
        kernel = build(layout="tokens", **kwargs)
        _check(kernel, 1)
        _check(kernel, 2, seed=1)


def test_cli_verify_and_emit(aot_path, kernel_cache, tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = dict(os.environ, SWIN_OPT_CACHE_DIR=str(kernel_cache), SWIN_AOT=str(aot_path),
               PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    run = lambda *a: subprocess.run([sys.executable, "-m", "swin_opt", *a],  # noqa: E731
                                    capture_output=True, text=True, env=env, timeout=300)
    r = run("verify", "--window=7,7", "--heads=3", "--head-dim=32", "--resolution=14,14",
            "--shift=3", "--dtype=bf16")
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout + r.stderr
    mlir = tmp_path / "k.mlir"
    r = run("compile", "--window=3,3", "--heads=2", "--head-dim=8", "--emit=mlir", "-o", str(mlir))
    assert r.returncode == 0, r.stderr
    assert mlir.stat().st_size > 0
    if (Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include" / "cuda.h").is_file():
        gpu = tmp_path / "gpu"
        r = run("compile", "--window=7,7", "--heads=3", "--head-dim=32", "--dtype=float16",
                "--target=nvptx", "--emit=ptx", "-o", f"{gpu}{os.sep}")
        assert r.returncode == 0, r.stderr
        assert {p.suffix for p in gpu.iterdir()} == {".ptx", ".h", ".c", ".json", ".so"}
