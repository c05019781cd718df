"""Self-tests of the NumPy backward reference (no compiler needed).

The backward formulas of :func:`swin_opt.reference.window_attention_backward`
and :func:`swin_opt.reference.swin_block_attention_tokens_backward` are checked
against central finite differences of the forward reference, in float64:
``d/dx sum(forward(x) * dout)`` for random ``dout``, at a few random entries of
each input and along one random direction of all entries at once.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from swin_opt import reference as R

EPS = 1e-6
#: Relative tolerance of an analytic gradient against the central difference;
#: the difference's own error is ~EPS**2 (truncation) + 1e-16/EPS (rounding).
RTOL = 1e-6


def _seed(*case) -> int:
    """A seed per test case, stable across runs (``hash`` of a str is not)."""
    return zlib.crc32(repr(case).encode())


def _assert_close_fd(analytic: float, numeric: float, size: float, what: str):
    """``|analytic - numeric| <= RTOL * max(|numeric|, size)``; ``size`` (the gradients'
    largest entry) keeps entries that are ~0 from demanding an absolute 1e-22."""
    err = abs(analytic - numeric)
    assert err <= RTOL * max(abs(numeric), size), (
        f"{what}: analytic {analytic!r} vs finite difference {numeric!r} (error {err:.3g})")


def _check_gradients(loss, inputs: dict, grads: dict, rng, entries: int = 4):
    """Central differences of ``loss(**inputs)`` at ``entries`` random entries of every
    input, plus the directional derivative along one random direction of them all.

    Errors are relative to the largest gradient entry of all inputs: a gradient
    that is ~0 (timm's padded tokens, masked from every real token, have
    ``dpad_qkv ~ exp(-100)``) is then compared with an absolute tolerance."""
    size = max(float(np.abs(g).max()) for g in grads.values())
    assert size > 0, "all gradients are zero: the check would be vacuous"
    for name, x in inputs.items():
        g = grads[name]
        assert g.shape == x.shape, f"d{name} has shape {g.shape}, {name} {x.shape}"
        for flat in rng.choice(x.size, size=min(entries, x.size), replace=False):
            pos = np.unravel_index(flat, x.shape)
            values = []
            for sign in (1, -1):
                moved = dict(inputs)
                moved[name] = x.copy()
                moved[name][pos] += sign * EPS
                values.append(loss(**moved))
            numeric = (values[0] - values[1]) / (2 * EPS)
            _assert_close_fd(g[pos], numeric, size, f"d{name}{tuple(int(i) for i in pos)}")
    direction = {name: rng.standard_normal(x.shape) for name, x in inputs.items()}
    plus = loss(**{n: x + EPS * direction[n] for n, x in inputs.items()})
    minus = loss(**{n: x - EPS * direction[n] for n, x in inputs.items()})
    numeric = (plus - minus) / (2 * EPS)
    analytic = sum(float((grads[n] * direction[n]).sum()) for n in inputs)
    _assert_close_fd(analytic, numeric, abs(analytic), "directional derivative")


# --------------------------------------------------------------------------- #
# Window layout
# --------------------------------------------------------------------------- #
#: (window, map the shift mask is built on, shift): nW = prod(map / window)
WINDOW_CASES = [((3, 3), (6, 6), 1), ((2, 3), (4, 6), (1, 1)), ((2, 2, 2), (4, 4, 2), (1, 1, 1))]


@pytest.mark.parametrize("window,mask_map,shift", WINDOW_CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("heads,head_dim", [(1, 4), (2, 5)], ids=["h1d4", "h2d5"])
@pytest.mark.parametrize("masked", [False, True], ids=["nomask", "mask"])
@pytest.mark.parametrize("scale", [None, 0.37], ids=["defscale", "scale"])
def test_window_backward_finite_differences(window, mask_map, shift, heads, head_dim, masked,
                                            scale):
    rng = np.random.default_rng(_seed(window, heads, head_dim, masked, scale))
    n = math.prod(window)
    mask = R.shift_mask(mask_map, window, shift) if masked else None
    b_ = 2 * (mask.shape[0] if masked else 2)  # two images of nW windows
    q, k, v = (rng.standard_normal((b_, heads, n, head_dim)) for _ in range(3))
    table = rng.standard_normal((R.table_rows(window), heads))
    dout = rng.standard_normal((b_, n, heads * head_dim))

    def loss(q, k, v, table):
        out = R.window_attention(q, k, v, bias=R.lookup(table, window), mask=mask, scale=scale)
        return float((out * dout).sum())

    dq, dk, dv, dtable = R.window_attention_backward(q, k, v, table, dout, window, mask=mask,
                                                     scale=scale)
    _check_gradients(loss, dict(q=q, k=k, v=v, table=table),
                     dict(q=dq, k=dk, v=dv, table=dtable), rng)


def test_window_backward_without_table():
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((3, 2, 4, 3)) for _ in range(3))
    dout = rng.standard_normal((3, 4, 6))
    dq, dk, dv, dtable = R.window_attention_backward(q, k, v, None, dout, (2, 2))
    assert dtable is None

    def loss(q, k, v):
        return float((R.window_attention(q, k, v) * dout).sum())

    _check_gradients(loss, dict(q=q, k=k, v=v), dict(q=dq, k=dk, v=dv), rng)


def _brute_force_dtable(q, k, v, table, dout, window, mask, scale):
    """dtable by explicit loops, through the softmax Jacobian ``diag(p) - p p^T`` of each
    row (not the ``rowsum(dO * O)`` shortcut of the reference)."""
    b_, heads, n, d = q.shape
    idx = R.relative_index(window)
    dtable = np.zeros_like(table)
    for b in range(b_):
        for h in range(heads):
            for i in range(n):
                logits = np.array([scale * q[b, h, i] @ k[b, h, j] + table[idx[i, j], h]
                                   + (mask[b % mask.shape[0], i, j] if mask is not None else 0)
                                   for j in range(n)])
                p = np.exp(logits - logits.max())
                p /= p.sum()
                do = dout[b, i, h * d:(h + 1) * d]
                dp = np.array([do @ v[b, h, j] for j in range(n)])
                ds = (np.diag(p) - np.outer(p, p)) @ dp
                for j in range(n):
                    dtable[idx[i, j], h] += ds[j]
    return dtable


@pytest.mark.parametrize("masked", [False, True], ids=["nomask", "mask"])
def test_dtable_brute_force(masked):
    rng = np.random.default_rng(2)
    window, heads, d = (2, 3), 2, 3
    mask = R.shift_mask((4, 3), window, (1, 1)) if masked else None  # nW = 2
    q, k, v = (rng.standard_normal((4, heads, 6, d)) for _ in range(3))
    table = rng.standard_normal((R.table_rows(window), heads))
    dout = rng.standard_normal((4, 6, heads * d))
    got = R.window_attention_backward(q, k, v, table, dout, window, mask=mask, scale=0.5)[3]
    want = _brute_force_dtable(q, k, v, table, dout, window, mask, 0.5)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_window_backward_rejects_bad_shapes():
    q = np.zeros((2, 1, 9, 4))
    with pytest.raises(ValueError, match="window"):
        R.window_attention_backward(q, q, q, None, np.zeros((2, 9, 4)), (2, 2))
    with pytest.raises(ValueError, match="dout"):
        R.window_attention_backward(q, q, q, None, np.zeros((2, 9, 5)), (3, 3))
    with pytest.raises(ValueError, match="table"):
        R.window_attention_backward(q, q, q, np.zeros((25, 2)), np.zeros((2, 9, 4)), (3, 3))


# --------------------------------------------------------------------------- #
# Token layout
# --------------------------------------------------------------------------- #
TOKEN_CASES = [
    ((6, 6), (3, 3), (1, 1), None),
    ((6, 6), (3, 3), (0, 0), None),
    ((5, 5), (3, 3), (1, 1), "pad_then_shift"),
    ((5, 5), (3, 3), (1, 1), "shift_then_pad"),
    ((5, 4), (2, 3), (1, 2), "shift_then_pad"),
    ((3, 5, 4), (2, 3, 2), (1, 1, 1), "pad_then_shift"),
    ((3, 5, 4), (2, 3, 2), (1, 1, 1), "shift_then_pad"),
]


@pytest.mark.parametrize("res,win,shift,padding", TOKEN_CASES, ids=str)
def test_tokens_backward_finite_differences(res, win, shift, padding):
    rng = np.random.default_rng(_seed(res, win, shift, padding))
    heads, d, batch = 2, 3, 2
    L, c = math.prod(res), heads * d
    q, k, v = (rng.standard_normal((batch, L, c)) for _ in range(3))
    table = rng.standard_normal((R.table_rows(win), heads))
    pad_qkv = rng.standard_normal((3, c))  # Swin's qkv bias: padded tokens are not zero
    dout = rng.standard_normal((batch, L, c))
    kw = dict(resolution=res, window=win, shift=shift, padding=padding)

    def loss(q, k, v, table, pad_qkv):
        return float((R.swin_block_attention_tokens(q, k, v, table, pad_qkv=pad_qkv, **kw)
                      * dout).sum())

    dq, dk, dv, dtable, dpad = R.swin_block_attention_tokens_backward(
        q, k, v, table, dout, pad_qkv=pad_qkv, pad_grad=True, **kw)
    inputs = dict(q=q, k=k, v=v, table=table)
    grads = dict(q=dq, k=dk, v=dv, table=dtable)
    if R.padded_resolution(res, win) != tuple(res):
        inputs["pad_qkv"], grads["pad_qkv"] = pad_qkv, dpad
    else:
        assert not dpad.any()  # nothing is padded
    _check_gradients(lambda **x: loss(**{"pad_qkv": pad_qkv, **x}), inputs, grads, rng)


def test_tokens_backward_equals_window_backward_without_shift_or_pad():
    # no shift, no pad: the token layout is a permutation of the window layout
    rng = np.random.default_rng(4)
    res, win, heads, d = (4, 6), (2, 3), 2, 2
    q, k, v, dout = (rng.standard_normal((1, 24, heads * d)) for _ in range(4))
    table = rng.standard_normal((R.table_rows(win), heads))
    got = R.swin_block_attention_tokens_backward(q, k, v, table, dout, resolution=res, window=win)

    def windows(t):
        return R.window_partition(t.reshape(1, *res, heads * d), win)

    def heads_of(t):
        return windows(t).reshape(4, 6, heads, d).transpose(0, 2, 1, 3)

    want = R.window_attention_backward(heads_of(q), heads_of(k), heads_of(v), table,
                                       windows(dout), win)
    for g, w in zip(got[:3], want[:3]):
        back = R.window_reverse(w.transpose(0, 2, 1, 3).reshape(4, 6, heads * d), win, res)
        np.testing.assert_allclose(g, back.reshape(1, 24, heads * d), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(got[3], want[3], rtol=1e-13, atol=1e-13)


def test_tokens_backward_rejects_bad_input():
    q = np.zeros((1, 25, 4))
    table = np.zeros((R.table_rows((3, 3)), 2))
    with pytest.raises(ValueError, match="not divisible"):
        R.swin_block_attention_tokens_backward(q, q, q, table, q, resolution=(5, 5), window=3)
    with pytest.raises(ValueError, match="dout"):
        R.swin_block_attention_tokens_backward(q, q, q, table, np.zeros((1, 25, 2)),
                                               resolution=(5, 5), window=3, padding="timm")
    with pytest.raises(ValueError, match="heads is required"):
        R.swin_block_attention_tokens_backward(q, q, q, None, q, resolution=(5, 5), window=3,
                                               padding="timm")


def test_tokens_backward_no_table():
    rng = np.random.default_rng(5)
    q, k, v, dout = (rng.standard_normal((1, 16, 4)) for _ in range(4))
    kw = dict(resolution=(4, 4), window=(2, 2), shift=1, heads=2)
    dq, dk, dv, dtable = R.swin_block_attention_tokens_backward(q, k, v, None, dout, **kw)
    assert dtable is None

    def loss(q, k, v):
        return float((R.swin_block_attention_tokens(q, k, v, None, **kw) * dout).sum())

    _check_gradients(loss, dict(q=q, k=k, v=v), dict(q=dq, k=dk, v=dv), rng)


def test_finite_difference_check_can_fail():
    # a wrong gradient (dK with the transposes of dQ) must be caught
    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal((2, 1, 4, 3)) for _ in range(3))
    dout = rng.standard_normal((2, 4, 3))
    dq, dk, dv, _ = R.window_attention_backward(q, k, v, None, dout, (2, 2))

    def loss(q, k, v):
        return float((R.window_attention(q, k, v) * dout).sum())

    assert not np.allclose(dk, dq)
    with pytest.raises(AssertionError, match="dk"):
        _check_gradients(loss, dict(q=q, k=k, v=v), dict(q=dq, k=dq, v=dv), rng)
