"""Token-layout kernels (``layout="tokens"``) against the NumPy reference.

The kernel reads q, k, v as ``[batch, H*W, C]`` feature maps in image order
and applies the cyclic shift, the padding (both conventions), the window
partition (Swin's blocks or MaxViT's grid) and their inverses by addressing. The reference composes the same
steps with explicit NumPy rolls, pads and reshapes
(``reference.swin_block_attention_tokens``).

Tolerance: f32 max |error| <= 1e-5 * max(1, max |ref|), as for the window
layout (the arithmetic is the same kernel); f16 2e-3 on inputs rounded to
f16 (see swin_opt.testing).
"""

import numpy as np
import pytest

import swin_opt
from swin_opt import reference as ref

pytestmark = pytest.mark.aot


def _random(shape, rng, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def _check(kernel, *, window, heads, head_dim, resolution, shift, padding,
           batch, seed, pad_values=True, dtype=np.float32, tol=1e-5, partition=None):
    rng = np.random.default_rng(seed)
    channels = heads * head_dim
    tokens = int(np.prod(resolution))
    q, k, v = (_random((batch, tokens, channels), rng, dtype) for _ in range(3))
    table = _random((ref.table_rows(window), heads), rng, dtype)
    pad_qkv = _random((3, channels), rng) if pad_values else None
    out = kernel(q, k, v, table, pad_qkv=pad_qkv)
    expected = ref.swin_block_attention_tokens(
        q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
        table.astype(np.float64), resolution=resolution, window=window,
        shift=shift, padding=padding, partition=partition,
        pad_qkv=None if pad_qkv is None else pad_qkv.astype(dtype).astype(np.float64))
    error = np.abs(out.astype(np.float64) - expected).max()
    assert error <= tol * max(1.0, np.abs(expected).max()), error


@pytest.fixture(scope="module")
def build(aot_path, tmp_path_factory):
    cache = tmp_path_factory.mktemp("token-kernels")

    def _build(**kwargs):
        return swin_opt.compile(layout="tokens", cache_dir=cache, **kwargs)
    return _build


@pytest.mark.parametrize("padding", ["pad_then_shift", "shift_then_pad"])
@pytest.mark.parametrize("shift", [0, 1, 2, 3])
def test_every_shift_odd_map(build, padding, shift):
    """4x4 windows on a 7x10 map: padded on both axes, every shift."""
    cfg = dict(window=(4, 4), heads=2, head_dim=8, resolution=(7, 10),
               shift=(shift, shift), padding=padding)
    kernel = build(**cfg)
    _check(kernel, **cfg, batch=2, seed=shift)


@pytest.mark.parametrize("shift", range(7))
def test_every_shift_swin_t(build, shift):
    """Swin-T's 7x7 windows on a 14x14 map (stage 3 at 224 / 2): no padding."""
    cfg = dict(window=(7, 7), heads=3, head_dim=32, resolution=(14, 14),
               shift=(shift, shift), padding=None)
    kernel = build(**cfg)
    _check(kernel, **cfg, batch=2, seed=10 + shift, pad_values=False)


@pytest.mark.parametrize("padding", ["pad_then_shift", "shift_then_pad"])
@pytest.mark.parametrize("shift", [(2, 3), (3, 5), (0, 4)])
def test_non_square(build, padding, shift):
    cfg = dict(window=(4, 6), heads=2, head_dim=12, resolution=(9, 13),
               shift=shift, padding=padding)
    kernel = build(**cfg)
    _check(kernel, **cfg, batch=3, seed=20)


@pytest.mark.parametrize("padding", ["pad_then_shift", "shift_then_pad"])
def test_video_3d(build, padding):
    """Video Swin: a 2x3x3 window on a 3x5x7 map, 27-region mask."""
    cfg = dict(window=(2, 3, 3), heads=2, head_dim=8, resolution=(3, 5, 7),
               shift=(1, 1, 2), padding=padding)
    kernel = build(**cfg)
    _check(kernel, **cfg, batch=2, seed=30)


def test_zero_padding_rows_by_default(build):
    cfg = dict(window=(4, 4), heads=1, head_dim=8, resolution=(6, 6),
               shift=(2, 2), padding="pad_then_shift")
    kernel = build(**cfg)
    _check(kernel, **cfg, batch=1, seed=40, pad_values=False)


def test_small_map_shrinks_the_window(build):
    """Swin: a map not larger than the window along an axis shrinks the
    window there and turns that axis's shift off (the table is then the
    effective window's)."""
    kernel = build(window=(7, 7), heads=2, head_dim=8, resolution=(5, 14),
                   shift=(3, 3), padding="pad_then_shift")
    assert kernel.config.window == (5, 7) and kernel.config.shift == (0, 3)
    _check(kernel, window=(5, 7), heads=2, head_dim=8, resolution=(5, 14),
           shift=(0, 3), padding="pad_then_shift", batch=2, seed=50)


def test_f16(build):
    cfg = dict(window=(4, 6), heads=2, head_dim=16, resolution=(9, 13),
               shift=(2, 3), padding="shift_then_pad")
    kernel = build(dtype="float16", **cfg)
    _check(kernel, **cfg, batch=2, seed=60, dtype=np.float16, tol=2e-3)


def _run_unfused(aot_path, tmp_path, options, q, k, v, table, pad, batch):
    """The token-layout kernel ``swin-aot --unfused`` builds (the unfused lowering's
    gathers for partition and reverse) with ``options``, run through its C entry
    point; returns its output."""
    import ctypes
    import subprocess

    lib = tmp_path / "unfused.so"
    subprocess.run([str(aot_path), *options, "--layout=tokens", "--unfused", "--emit=so",
                    "-o", str(lib)], check=True)
    fn = ctypes.CDLL(str(lib)).swin_window_attention
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int64, ctypes.c_void_p]
    out = np.zeros_like(q)
    assert fn(q.ctypes.data, k.ctypes.data, v.ctypes.data, table.ctypes.data,
              out.ctypes.data, batch, pad.ctypes.data) == 0
    return out


def test_stage1_unfused_path_agrees(aot_path, tmp_path):
    """The unfused lowering (gathers for partition and reverse) gives the
    same answer as the fused kernel."""
    rng = np.random.default_rng(70)
    q, k, v = (_random((2, 117, 16), rng) for _ in range(3))
    table = _random((ref.table_rows((4, 6)), 2), rng)
    pad = _random((3, 16), rng)
    out = _run_unfused(aot_path, tmp_path, ["--window=4,6", "--heads=2", "--head-dim=8",
                                            "--resolution=9,13", "--shift=2,3",
                                            "--padding=shift-then-pad"],
                       q, k, v, table, pad, 2)
    expected = ref.swin_block_attention_tokens(
        q, k, v, table, resolution=(9, 13), window=(4, 6), shift=(2, 3),
        padding="shift_then_pad", pad_qkv=pad)
    assert np.abs(out - expected).max() <= 1e-5 * max(1.0, np.abs(expected).max())


@pytest.mark.parametrize("padding", ["pad_then_shift", "shift_then_pad"])
def test_packed_qkv(build, padding):
    """One qkv argument, the qkv projection's output [batch, L, 3, heads, d]
    as it is: the kernel reads q, k and v out of it by addressing."""
    cfg = dict(window=(4, 6), heads=2, head_dim=8, resolution=(9, 13), shift=(2, 3),
               padding=padding)
    kernel = build(packed_qkv=True, **cfg)
    rng = np.random.default_rng(80)
    qkv = rng.standard_normal((2, 9 * 13, 3, 2, 8)).astype(np.float32)
    table = _random((ref.table_rows((4, 6)), 2), rng)
    pad = _random((3, 16), rng)
    out = kernel(qkv, table, pad_qkv=pad)
    q, k, v = (qkv[:, :, i].reshape(2, 9 * 13, 16) for i in range(3))
    expected = ref.swin_block_attention_tokens(q, k, v, table, resolution=(9, 13), window=(4, 6),
                                               shift=(2, 3), padding=padding, pad_qkv=pad)
    assert np.abs(out - expected).max() <= 1e-5 * max(1.0, np.abs(expected).max())
    with pytest.raises(ValueError, match="qkv must have shape"):
        kernel(qkv[:, :, 0], table)


# MaxViT's grid attention: window (wy, wx) of a (Gh, Gw) grid holds the map's
# tokens (ty * H / Gh + wy, tx * W / Gw + wx); the kernel reads them in place.
GRID_CASES = [
    # grid, resolution: MaxViT's 7x7 grid on a 14x14 map (224 / 16), a
    # non-square grid, and a grid as large as the map (one window: global).
    ((7, 7), (14, 14)),
    ((2, 3), (8, 12)),
    ((4, 6), (4, 6)),
    ((2, 2, 3), (4, 6, 6)),  # 3-D: the same addressing per axis
]


@pytest.mark.parametrize("grid,resolution", GRID_CASES)
def test_grid_partition(build, grid, resolution):
    cfg = dict(window=grid, heads=2, head_dim=8, resolution=resolution, shift=0, padding=None)
    kernel = build(partition="grid", **cfg)
    _check(kernel, **cfg, partition="grid", batch=3, seed=90)


def test_grid_is_not_block(build):
    """The grid's windows differ from the blocks' of the same geometry: each
    kernel matches its own reference and not the other's."""
    cfg = dict(window=(2, 3), heads=2, head_dim=8, resolution=(8, 12), shift=0, padding=None)
    kernel = build(partition="grid", **cfg)
    _check(kernel, **cfg, partition="grid", batch=2, seed=91)
    with pytest.raises(AssertionError):
        _check(kernel, **cfg, batch=2, seed=91)


def test_grid_packed_qkv(build):
    cfg = dict(window=(2, 3), heads=2, head_dim=8, resolution=(8, 12))
    kernel = build(packed_qkv=True, partition="grid", **cfg)
    rng = np.random.default_rng(92)
    qkv = rng.standard_normal((2, 96, 3, 2, 8)).astype(np.float32)
    table = _random((ref.table_rows((2, 3)), 2), rng)
    out = kernel(qkv, table)
    q, k, v = (qkv[:, :, i].reshape(2, 96, 16) for i in range(3))
    expected = ref.swin_block_attention_tokens(q, k, v, table, resolution=(8, 12),
                                               window=(2, 3), partition="grid")
    assert np.abs(out - expected).max() <= 1e-5 * max(1.0, np.abs(expected).max())


def test_grid_f16(build):
    cfg = dict(window=(7, 7), heads=2, head_dim=16, resolution=(14, 14), shift=0, padding=None)
    kernel = build(dtype="float16", partition="grid", **cfg)
    _check(kernel, **cfg, partition="grid", batch=2, seed=93, dtype=np.float16, tol=2e-3)


@pytest.mark.parametrize("kernel", ["warps", "rows"])
@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float16, 2e-3)])
def test_grid_gpu_kernels_on_the_host(build, kernel, dtype, tol):
    """The GPU's kernels (emulated on the CPU) address the grid through the same
    token positions: forward, and the warp program's backward."""
    cfg = dict(window=(2, 3), heads=2, head_dim=16, resolution=(8, 12), shift=0, padding=None)
    kern = build(partition="grid", kernel=kernel, dtype=dtype, grad=kernel == "warps", **cfg)
    _check(kern, **cfg, partition="grid", batch=2, seed=95, dtype=dtype, tol=tol,
           pad_values=False)
    if kernel != "warps":
        return
    rng = np.random.default_rng(96)
    q, k, v, dout = (_random((2, 96, 32), rng, dtype) for _ in range(4))
    table = _random((ref.table_rows((2, 3)), 2), rng, dtype)
    got = kern.backward(q, k, v, table, kern(q, k, v, table), dout)
    want = ref.swin_block_attention_tokens_backward(
        *(t.astype(np.float64) for t in (q, k, v, table, dout)), resolution=(8, 12),
        window=(2, 3), partition="grid")
    for name, g, w in zip(("dq", "dk", "dv", "dtable"), got, want):
        error = np.abs(np.asarray(g, dtype=np.float64) - w).max()
        assert error <= 5 * tol * max(1.0, np.abs(w).max()), (name, error)


def test_grid_unfused_path_agrees(aot_path, tmp_path):
    """The unfused lowering of the grid (rpe.window_partition / window_reverse
    gathers) against the reference."""
    rng = np.random.default_rng(94)
    q, k, v = (_random((2, 96, 16), rng) for _ in range(3))
    table = _random((ref.table_rows((2, 3)), 2), rng)
    pad = np.zeros((3, 16), np.float32)  # a grid has no padding: never read
    out = _run_unfused(aot_path, tmp_path, ["--window=2,3", "--heads=2", "--head-dim=8",
                                            "--resolution=8,12", "--partition=grid"],
                       q, k, v, table, pad, 2)
    expected = ref.swin_block_attention_tokens(q, k, v, table, resolution=(8, 12),
                                               window=(2, 3), partition="grid")
    assert np.abs(out - expected).max() <= 1e-5 * max(1.0, np.abs(expected).max())


@pytest.mark.parametrize("kwargs,message", [
    (dict(shift=1), "partition='grid' has no shift"),
    (dict(resolution=(9, 12), padding="shift_then_pad"), "needs whole grids"),
    (dict(layout="windows"), "requires layout='tokens'"),
    (dict(partition="strided"), "partition must be one of"),
])
def test_grid_config_errors(kwargs, message):
    cfg = dict(window=(2, 3), heads=2, head_dim=8, resolution=(8, 12), layout="tokens",
               partition="grid")
    cfg.update(kwargs)
    with pytest.raises(ValueError, match=message):
        swin_opt.make_config(**cfg)
