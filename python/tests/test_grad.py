"""The gradient kernels (``swin-aot --grad``, :meth:`swin_opt.Kernel.backward`)
against the independent float64 backward of :mod:`swin_opt.reference`.

Tolerance: relative 1e-5 of each gradient's largest magnitude. The kernels
compute in float32 with sums over N keys or queries (and, for the table,
over every window), where the rounding is about 1e-7 relative; a wrong
index, sign or layout gives errors of order 1.
"""

import ctypes

import numpy as np
import pytest

from swin_opt import reference as ref

pytestmark = pytest.mark.aot

RTOL = 1e-5


def _close(got, want, what):
    scale = max(1e-30, float(np.abs(want).max()))
    err = float(np.abs(np.asarray(got, np.float64) - want).max()) / scale
    assert err <= RTOL, f"{what}: relative error {err:.3g}"


def _random(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


WINDOW_CASES = [
    # window, heads, head_dim, resolution, shift, scale
    ((7, 7), 3, 32, (14, 14), (3, 3), None),  # Swin-T stage 1, shifted
    ((7, 7), 4, 24, None, None, 0.3),  # no mask, explicit scale
    ((3, 5), 2, 5, (6, 10), (1, 2), None),  # non-square, odd head_dim
    ((2, 3, 3), 2, 8, None, None, None),  # 3-D (Video Swin)
    ((12, 12), 2, 32, (24, 24), (6, 6), None),  # several query blocks
]


@pytest.mark.parametrize("window,heads,head_dim,resolution,shift,scale", WINDOW_CASES)
def test_window_layout(build, window, heads, head_dim, resolution, shift, scale):
    kernel = build(window, heads, head_dim, resolution=resolution, shift=shift, scale=scale,
                   grad=True)
    rng = np.random.default_rng(len(window) * 100 + head_dim)
    n, windows = int(np.prod(window)), 8
    q, k, v = (_random(rng, windows, heads, n, head_dim) for _ in range(3))
    table = _random(rng, ref.table_rows(window), heads)
    out = kernel(q, k, v, table)
    dout = _random(rng, *out.shape)
    dq, dk, dv, dtable = kernel.backward(q, k, v, table, out, dout)
    mask = ref.shift_mask(resolution, window, shift) if shift else None
    want = ref.window_attention_backward(q, k, v, table, dout, window, mask=mask, scale=scale)
    for name, got, expected in zip(("dq", "dk", "dv", "dtable"), (dq, dk, dv, dtable), want):
        _close(got, expected, name)


TOKEN_CASES = [
    # resolution, window, shift, padding, packed, partition
    ((14, 14), (7, 7), 3, None, False, None),
    ((14, 14), (7, 7), 3, None, True, None),
    ((10, 13), (4, 6), (2, 3), "shift_then_pad", True, None),  # timm: roll, then pad
    ((10, 13), (4, 6), (2, 3), "pad_then_shift", False, None),  # torchvision / HF
    ((14, 14), (7, 7), 0, None, False, "grid"),  # MaxViT's grid attention
    ((8, 12), (2, 3), 0, None, True, "grid"),
]


@pytest.mark.parametrize("resolution,window,shift,padding,packed,partition", TOKEN_CASES)
def test_token_layout(build, resolution, window, shift, padding, packed, partition):
    """The adjoint addressing: every image token gets its window token's gradient;
    padded tokens are zeros (no pad_qkv) and get none."""
    heads, head_dim, batch = 2, 8, 2
    kernel = build(window, heads, head_dim, resolution=resolution, shift=shift, padding=padding,
                   layout="tokens", packed_qkv=packed, partition=partition, grad=True)
    rng = np.random.default_rng(sum(resolution))
    tokens, c = int(np.prod(resolution)), heads * head_dim
    table = _random(rng, ref.table_rows(window), heads)
    if packed:
        qkv = _random(rng, batch, tokens, 3, heads, head_dim)
        q, k, v = (qkv[:, :, i].reshape(batch, tokens, c) for i in range(3))
        out = kernel(qkv, table)
        dout = _random(rng, *out.shape)
        dqkv, dtable = kernel.backward(qkv, table, out, dout)
        dq, dk, dv = (dqkv[:, :, i].reshape(batch, tokens, c) for i in range(3))
    else:
        q, k, v = (_random(rng, batch, tokens, c) for _ in range(3))
        out = kernel(q, k, v, table)
        dout = _random(rng, *out.shape)
        dq, dk, dv, dtable = kernel.backward(q, k, v, table, out, dout)
    want = ref.swin_block_attention_tokens_backward(
        q, k, v, table, dout, resolution=resolution, window=window, shift=shift,
        padding=padding, partition=partition)
    for name, got, expected in zip(("dq", "dk", "dv", "dtable"), (dq, dk, dv, dtable), want):
        _close(got, expected, name)


@pytest.mark.parametrize("threads", [1, 3, 7, 64])
def test_table_gradient_on_any_team(build, team, threads):
    """Each thread of the team sums its items into its own table gradient and the
    team adds them up: the result must not depend on the team's size, even
    with more threads than items (36 here) or than table entries per thread."""
    kernel = build((7, 7), 3, 16, resolution=(14, 21), shift=3, grad=True)
    rng = np.random.default_rng(threads)
    q, k, v = (_random(rng, 12, 3, 49, 16) for _ in range(3))
    table = _random(rng, 169, 3)
    out = kernel(q, k, v, table)
    dout = _random(rng, *out.shape)
    team.omp_set_num_threads(threads)
    got = kernel.backward(q, k, v, table, out, dout)
    want = ref.window_attention_backward(q, k, v, table, dout, (7, 7),
                                         mask=ref.shift_mask((14, 21), (7, 7), (3, 3)))
    for name, g, w in zip(("dq", "dk", "dv", "dtable"), got, want):
        _close(g, w, name)


def test_zero_windows(build):
    kernel = build((7, 7), 3, 16, grad=True)
    empty = np.zeros((0, 3, 49, 16), np.float32)
    table = np.ones((169, 3), np.float32)
    dq, dk, dv, dtable = kernel.backward(empty, empty, empty, table,
                                         np.zeros((0, 49, 48), np.float32),
                                         np.zeros((0, 49, 48), np.float32))
    assert dq.shape == (0, 3, 49, 16) and not dtable.any()


def test_bad_arguments(build):
    """Wrong shapes, dtypes, layouts or overlapping outputs: an exception, nothing run."""
    kernel = build((7, 7), 3, 16, grad=True)
    rng = np.random.default_rng(0)
    q = _random(rng, 4, 3, 49, 16)
    table = _random(rng, 169, 3)
    out = kernel(q, q, q, table)
    with pytest.raises(ValueError, match="dout must have shape"):
        kernel.backward(q, q, q, table, out, out[:, :, :40].copy())
    with pytest.raises(TypeError, match="dout must have dtype"):
        kernel.backward(q, q, q, table, out, out.astype(np.float64))
    with pytest.raises(ValueError, match="contiguous"):
        kernel.backward(q, q, q, table, out, np.asfortranarray(out))
    with pytest.raises(ValueError, match="dtable must have shape"):
        kernel.backward(q, q, q, table, out, out, grads={"dtable": np.zeros((168, 3), np.float32)})
    with pytest.raises(ValueError, match="overlaps"):
        kernel.backward(q, q, q, table, out, out, grads={"dq": q})
    plain = build((7, 7), 3, 16)
    with pytest.raises(ValueError, match="grad=True"):
        plain.backward(q, q, q, table, out, out)


def test_c_entry_point_rejects_invalid_arguments(build):
    """The C ABI: NULL buffers, a negative count or overlapping gradients return 1 and
    write nothing."""
    kernel = build((7, 7), 3, 16, resolution=(14, 14), shift=3, grad=True)
    lib = ctypes.CDLL(str(kernel.library))
    fn = lib.swin_window_attention_backward
    fn.restype = ctypes.c_int
    rng = np.random.default_rng(1)
    bufs = [_random(rng, 4, 3, 49, 16) for _ in range(3)] + [_random(rng, 169, 3)] + \
        [_random(rng, 4, 49, 48) for _ in range(2)]
    dq, dk, dv = (np.full((4, 3, 49, 16), 7.0, np.float32) for _ in range(3))
    dtable = np.full((169, 3), 7.0, np.float32)
    ptr = [b.ctypes.data_as(ctypes.c_void_p) for b in bufs]
    outs = [g.ctypes.data_as(ctypes.c_void_p) for g in (dq, dk, dv, dtable)]
    assert fn(*ptr, *outs, ctypes.c_int64(-1)) == 1
    assert fn(*ptr[:5], None, *outs, ctypes.c_int64(4)) == 1
    assert fn(*ptr, *outs, ctypes.c_int64(3)) == 1  # not whole images of 4 windows
    assert fn(*ptr, outs[0], outs[0], outs[0], outs[3], ctypes.c_int64(4)) == 1  # dq = dk = dv
    assert all((g == 7.0).all() for g in (dq, dk, dv, dtable))
    assert fn(*ptr, *outs, ctypes.c_int64(4)) == 0
