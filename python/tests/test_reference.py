"""Self-tests of the NumPy reference (no compiler needed)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from swin_opt import reference as R

WINDOWS_2D = [(1, 1), (2, 2), (3, 3), (7, 7), (4, 6), (6, 4), (1, 5)]
WINDOWS_3D = [(2, 2, 2), (2, 7, 7), (3, 2, 4), (1, 3, 3)]


# --------------------------------------------------------------------------- #
# Relative position index and bias lookup
# --------------------------------------------------------------------------- #
def test_relative_index_3x3_first_row():
    assert R.relative_index((3, 3))[0].tolist() == [12, 11, 10, 7, 6, 5, 2, 1, 0]


def test_relative_index_7x7_known_entries():
    idx = R.relative_index((7, 7))
    assert idx.shape == (49, 49)
    assert idx[0, 0] == 84  # (6, 6) in a 13x13 grid: the centre
    assert idx[0, 48] == 0  # i=(0,0), j=(6,6): deltas (-6, -6)
    assert idx[48, 0] == 168  # deltas (+6, +6): the last row of the table


def _brute_force_index(window):
    """Direct transcription of the formula with explicit loops over tokens."""
    n = math.prod(window)
    coords = list(itertools.product(*[range(w) for w in window]))  # row-major
    idx = np.zeros((n, n), dtype=np.int64)
    for i, ci in enumerate(coords):
        for j, cj in enumerate(coords):
            value = 0
            for a, w in enumerate(window):
                value = value * (2 * w - 1) + (ci[a] - cj[a] + w - 1)
            idx[i, j] = value
    return idx


@pytest.mark.parametrize("window", WINDOWS_2D + WINDOWS_3D, ids=str)
def test_relative_index_brute_force_and_properties(window):
    idx = R.relative_index(window)
    np.testing.assert_array_equal(idx, _brute_force_index(window))
    t = R.table_rows(window)
    assert idx.min() >= 0 and idx.max() <= t - 1
    assert np.all(np.diag(idx) == (t - 1) // 2)  # zero offset is the centre row
    np.testing.assert_array_equal(idx + idx.T, t - 1)  # (i, j) and (j, i) are mirrored
    # every table row is used when the window has more than one token
    assert len(np.unique(idx)) == t


def test_relative_index_3d_hand_values():
    idx = R.relative_index((2, 2, 2))  # tokens t = (z*2 + r)*2 + c, table 3*3*3 = 27 rows
    assert idx[0, 7] == 0  # (0,0,0) - (1,1,1) = (-1,-1,-1) -> (0,0,0)
    assert idx[7, 0] == 26
    assert idx[0, 1] == 1 * 9 + 1 * 3 + 0  # dc = -1
    assert idx[0, 2] == 1 * 9 + 0 * 3 + 1  # dr = -1
    assert idx[0, 4] == 0 * 9 + 1 * 3 + 1  # dz = -1
    assert idx[5, 2] == 2 * 9 + 0 * 3 + 2  # (1,0,1) - (0,1,0) = (1,-1,1) -> (2,0,2)


@pytest.mark.parametrize("window", [(3, 3), (4, 6), (2, 3, 3)], ids=str)
def test_lookup(window):
    rng = np.random.default_rng(0)
    heads = 3
    table = rng.standard_normal((R.table_rows(window), heads))
    bias = R.lookup(table, window)
    n = R.window_tokens(window)
    assert bias.shape == (heads, n, n)
    idx = _brute_force_index(window)
    for h, i, j in [(0, 0, 0), (1, 0, n - 1), (2, n - 1, 0), (1, n // 2, 1)]:
        assert bias[h, i, j] == table[idx[i, j], h]


def test_lookup_rejects_bad_table():
    with pytest.raises(ValueError, match="table must have shape"):
        R.lookup(np.zeros((10, 2)), (3, 3))


# --------------------------------------------------------------------------- #
# Partition / reverse / roll / pad
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize(
    "resolution,window",
    [((8, 12), (4, 3)), ((7, 7), (7, 7)), ((6, 4), (1, 1)), ((4, 6, 8), (2, 3, 4))],
    ids=str,
)
def test_partition_reverse_round_trip(resolution, window):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2,) + resolution + (5,))
    w = R.window_partition(x, window)
    nw = R.windows_per_image(resolution, window)
    assert w.shape == (2 * nw, math.prod(window), 5)
    np.testing.assert_array_equal(R.window_reverse(w, window, resolution), x)
    # also accepts Swin's [B*nW, *window, C] shape
    np.testing.assert_array_equal(
        R.window_reverse(w.reshape((2 * nw,) + window + (5,)), window, resolution), x
    )


def test_partition_order():
    """Window b = img * nW + row-major window id, tokens row-major inside a window."""
    b, hh, ww, wh, wwin = 2, 6, 8, 3, 4
    x = np.arange(b * hh * ww).reshape(b, hh, ww, 1)
    win = R.window_partition(x, (wh, wwin))
    nw = (hh // wh) * (ww // wwin)
    for img, r, c in itertools.product(range(b), range(hh), range(ww)):
        widx = img * nw + (r // wh) * (ww // wwin) + c // wwin
        tok = (r % wh) * wwin + c % wwin
        assert win[widx, tok, 0] == x[img, r, c, 0]


def test_partition_rejects_indivisible():
    with pytest.raises(ValueError, match="not divisible"):
        R.window_partition(np.zeros((1, 7, 8, 1)), (2, 2))


def test_cyclic_shift():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 6, 5, 3))
    y = R.cyclic_shift(x, (2, 1))
    np.testing.assert_array_equal(y, np.roll(x, (-2, -1), axis=(1, 2)))
    assert y[0, 0, 0, 0] == x[0, 2, 1, 0]
    np.testing.assert_array_equal(R.reverse_cyclic_shift(y, (2, 1)), x)
    np.testing.assert_array_equal(R.cyclic_shift(x, 3), np.roll(x, (-3, -3), axis=(1, 2)))


def test_pad_spatial():
    x = np.ones((1, 2, 3, 2))
    y = R.pad_spatial(x, (3, 4), fill=np.array([5.0, 6.0]))
    assert y.shape == (1, 3, 4, 2)
    np.testing.assert_array_equal(y[0, :2, :3], 1.0)
    np.testing.assert_array_equal(y[0, 2, :, 1], 6.0)
    np.testing.assert_array_equal(y[0, :, 3, 0], 5.0)


# --------------------------------------------------------------------------- #
# Shifted-window mask
# --------------------------------------------------------------------------- #
MASK_CASES_POSITIVE = [
    ((4, 4), (2, 2), 1),
    ((8, 8), (4, 4), 2),
    ((9, 6), (3, 3), 1),
    ((9, 6), (3, 3), 2),
    ((14, 14), (7, 7), 3),
    ((56, 56), (7, 7), 3),
    ((16, 24), (8, 8), 4),
    ((24, 24), (12, 12), 6),
    ((32, 32), (16, 16), 8),
    ((8, 12), (4, 6), (2, 3)),
    ((12, 8), (6, 4), (3, 2)),
    ((12, 8), (6, 4), (5, 1)),
    ((7, 7), (7, 7), 3),  # one window: everything but the shift regions is masked
    ((4, 8, 8), (2, 4, 4), (1, 2, 2)),
    ((8, 14, 21), (4, 7, 7), (2, 3, 3)),
    ((6, 6, 9), (3, 2, 3), (1, 1, 2)),
]


@pytest.mark.parametrize("resolution,window,shift", MASK_CASES_POSITIVE, ids=str)
def test_mask_closed_form_matches_swin_code(resolution, window, shift):
    a = R.shift_mask(resolution, window, shift)
    b = R.shift_mask_closed_form(resolution, window, shift)
    nw = R.windows_per_image(resolution, window)
    n = R.window_tokens(window)
    assert a.shape == (nw, n, n)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("resolution,window,shift", MASK_CASES_POSITIVE, ids=str)
def test_mask_properties(resolution, window, shift):
    m = R.shift_mask(resolution, window, shift)
    assert set(np.unique(m)) <= {0.0, R.MASK_VALUE}
    np.testing.assert_array_equal(m, m.transpose(0, 2, 1))
    assert np.all(np.diagonal(m, axis1=1, axis2=2) == 0)
    # Only windows touching the last window row/column on some axis are masked.
    counts = [r // w for r, w in zip(resolution, window)]
    for widx, pos in enumerate(itertools.product(*[range(c) for c in counts])):
        s = R.normalize_shift(shift, len(window))
        interior = all(p < c - 1 or ss == 0 for p, c, ss in zip(pos, counts, s))
        assert (not m[widx].any()) == interior


def test_mask_swin_t_stage1_counts():
    m = R.shift_mask((56, 56), (7, 7), 3)
    masked = [w for w in range(64) if m[w].any()]
    assert len(masked) == 15  # last window row (8) + last column (8) - corner
    assert 63 in masked and 7 in masked and 56 in masked and 0 not in masked


def test_mask_zero_shift_axes():
    """Swin-code construction with s == 0 (slice(-0, None) is the whole axis)."""
    assert not R.shift_mask((14, 14), (7, 7), 0).any()
    # Shift only along columns == closed form (labels on a zero-shift axis never
    # differ inside one window, so the closed form stays valid there).
    a = R.shift_mask((14, 21), (7, 7), (0, 3))
    np.testing.assert_array_equal(a, R.shift_mask_closed_form((14, 21), (7, 7), (0, 3)))
    # ... and every window of the last column is masked, no other.
    masked = [w for w in range(6) if a[w].any()]
    assert masked == [2, 5]


def test_mask_hand_example():
    # 1 x 4 map, window 1 x 2, shift (0, 1): window 1 holds columns 2, 3 of the
    # rolled map; column 3 wrapped around (label 2) vs column 2 (label 1).
    m = R.shift_mask((1, 4), (1, 2), (0, 1))
    np.testing.assert_array_equal(m[0], 0.0)
    np.testing.assert_array_equal(m[1], [[0.0, -100.0], [-100.0, 0.0]])


def test_mask_rejects_bad_shift():
    with pytest.raises(ValueError, match="smaller than the window"):
        R.shift_mask((14, 14), (7, 7), 7)


# --------------------------------------------------------------------------- #
# Attention
# --------------------------------------------------------------------------- #
def _rand_qkv(rng, b, h, n, d):
    return tuple(rng.standard_normal((b, h, n, d)) for _ in range(3))


def test_attention_rows_sum_to_one():
    rng = np.random.default_rng(3)
    q, k, _ = _rand_qkv(rng, 8, 2, 9, 4)
    bias = rng.standard_normal((2, 9, 9))
    mask = R.shift_mask((6, 6), (3, 3), 1)
    p = R.attention_weights(q, k, bias=bias, mask=np.tile(mask, (2, 1, 1)))
    np.testing.assert_allclose(p.sum(-1), 1.0, rtol=0, atol=1e-12)
    assert np.all(p >= 0)


def test_attention_tiny_hand_computed():
    # one window of 2 tokens, 1 head, head_dim 1, scale 1
    q = np.array([1.0, 0.0]).reshape(1, 1, 2, 1)
    k = np.array([1.0, 2.0]).reshape(1, 1, 2, 1)
    v = np.array([10.0, 20.0]).reshape(1, 1, 2, 1)
    out = R.window_attention(q, k, v, scale=1.0)
    e = math.e
    assert out.shape == (1, 2, 1)
    assert out[0, 0, 0] == pytest.approx(10 / (1 + e) + 20 * e / (1 + e), abs=1e-14)
    assert out[0, 1, 0] == pytest.approx(15.0, abs=1e-14)
    # bias (not scaled) shifts logits: token 1 gets logits [0 + 0.5, 0 - 0.5]
    bias = np.array([[[0.0, 0.0], [0.5, -0.5]]])
    out = R.window_attention(q, k, v, bias=bias, scale=3.0)
    p0 = 1 / (1 + math.exp(-1))  # logits 0.5 and -0.5
    assert out[0, 1, 0] == pytest.approx(10 * p0 + 20 * (1 - p0), abs=1e-14)
    # scale 3 on q: token 0 logits [3, 6]
    assert out[0, 0, 0] == pytest.approx((10 + 20 * math.exp(3)) / (1 + math.exp(3)), abs=1e-12)
    # mask -100 isolates the tokens
    mask = np.array([[[0.0, -100.0], [-100.0, 0.0]]])
    out = R.window_attention(q, k, v, mask=mask, scale=1.0)
    np.testing.assert_allclose(out[0, :, 0], [10.0, 20.0], rtol=1e-40, atol=1e-30)


def test_attention_output_layout_and_default_scale():
    rng = np.random.default_rng(4)
    b, h, n, d = 3, 2, 4, 5
    q, k, v = _rand_qkv(rng, b, h, n, d)
    out = R.window_attention(q, k, v)
    assert out.shape == (b, n, h * d)
    manual = R.window_attention(q * d ** -0.5, k, v, scale=1.0)
    np.testing.assert_allclose(out, manual, rtol=1e-13)
    # head h occupies channels [h*d, (h+1)*d)
    single = R.window_attention(q[:, 1:2], k[:, 1:2], v[:, 1:2])
    np.testing.assert_allclose(out[:, :, d:2 * d], single, rtol=1e-13)


def test_attention_mask_cycles_over_windows():
    """Window b uses mask[b % nW]: the mask repeats for every image of the batch."""
    rng = np.random.default_rng(5)
    mask = R.shift_mask((6, 6), (3, 3), 1)  # nW = 4
    q, k, v = _rand_qkv(rng, 8, 1, 9, 3)
    both = R.window_attention(q, k, v, mask=mask)
    first = R.window_attention(q[:4], k[:4], v[:4], mask=mask)
    second = R.window_attention(q[4:], k[4:], v[4:], mask=mask)
    np.testing.assert_array_equal(both, np.concatenate([first, second]))
    with pytest.raises(ValueError, match="multiple of nW"):
        R.window_attention(q[:5], k[:5], v[:5], mask=mask)


def test_masked_attention_equals_attention_within_regions():
    """-100 masking == attention restricted to tokens with the same region label."""
    rng = np.random.default_rng(6)
    res, win, shift = (8, 12), (4, 6), (2, 3)
    mask = R.shift_mask(res, win, shift)
    nw, n, _ = mask.shape
    q, k, v = _rand_qkv(rng, nw, 2, n, 4)
    bias = R.lookup(rng.standard_normal((R.table_rows(win), 2)), win)
    out = R.window_attention(q, k, v, bias=bias, mask=mask)
    for w in range(nw):
        groups = {}
        for t in range(n):
            groups.setdefault(tuple(mask[w, t]), []).append(t)
        for toks in groups.values():
            sel = np.array(toks)
            sub = R.window_attention(q[w:w + 1][:, :, sel], k[w:w + 1][:, :, sel],
                                     v[w:w + 1][:, :, sel], bias=bias[:, sel][:, :, sel])
            np.testing.assert_allclose(out[w, sel], sub[0], rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- #
# Token layout block attention
# --------------------------------------------------------------------------- #
def _brute_force_tokens(q, k, v, table, res, win, shift, padding, pad_qkv):
    """Per-token definition: each image token's position in the processed map decides
    its window and region; it attends to every token (real or pad) of the same window
    and region."""
    rank = len(win)
    padded = R.padded_resolution(res, win)
    b, L, c = q.shape
    heads = table.shape[1]
    d = c // heads
    img_coords = list(itertools.product(*[range(n) for n in res]))

    def position(u):  # image coordinate -> coordinate in the processed (padded) map
        if padding == "shift_then_pad":
            return tuple((x - s) % n for x, s, n in zip(u, shift, res))
        return tuple((x - s) % p for x, s, p in zip(u, shift, padded))

    def label(p):
        lab = 0
        for x, n, w, s in zip(p, padded, win, shift):
            lab = lab * 3 + (0 if x < n - w else (1 if x < n - s else 2))
        return lab if any(shift) else 0

    where = {}  # processed position -> flat image index
    for flat, u in enumerate(img_coords):
        where[position(u)] = flat
    idx_fn = lambda p1, p2: R.relative_index(win)[  # noqa: E731
        np.ravel_multi_index(tuple(x % w for x, w in zip(p1, win)), win),
        np.ravel_multi_index(tuple(x % w for x, w in zip(p2, win)), win)]
    scale = d ** -0.5
    out = np.zeros_like(q)
    for flat, u in enumerate(img_coords):
        p = position(u)
        wpos = tuple(x // w for x, w in zip(p, win))
        keys = [pp for pp in itertools.product(*[range(wp * w, wp * w + w) for wp, w in zip(wpos, win)])
                if label(pp) == label(p)]
        for h in range(heads):
            hs = slice(h * d, (h + 1) * d)
            for img in range(b):
                kv = [(k[img, where[pp], hs], v[img, where[pp], hs]) if pp in where
                      else (pad_qkv[1, hs], pad_qkv[2, hs]) for pp in keys]
                logits = np.array([scale * q[img, flat, hs] @ kk + table[idx_fn(p, pp), h]
                                   for (kk, _), pp in zip(kv, keys)])
                pr = np.exp(logits - logits.max())
                pr /= pr.sum()
                out[img, flat, hs] = sum(pi * vv for pi, (_, vv) in zip(pr, kv))
    assert rank == len(res)
    return out


TOKEN_CASES = [
    ((6, 6), (3, 3), (0, 0), None),
    ((6, 6), (3, 3), (1, 1), None),
    ((6, 8), (3, 4), (1, 2), None),
    ((7, 5), (3, 3), (1, 1), "pad_then_shift"),
    ((7, 5), (3, 3), (1, 1), "shift_then_pad"),
    ((9, 13), (4, 6), (2, 3), "pad_then_shift"),
    ((9, 13), (4, 6), (2, 3), "shift_then_pad"),
    ((5, 5), (3, 3), (0, 0), "pad_then_shift"),
    ((3, 5, 4), (2, 3, 2), (1, 1, 1), "pad_then_shift"),
    ((3, 5, 4), (2, 3, 2), (1, 1, 1), "shift_then_pad"),
]


@pytest.mark.parametrize("res,win,shift,padding", TOKEN_CASES, ids=str)
def test_block_attention_tokens_vs_brute_force(res, win, shift, padding):
    rng = np.random.default_rng(7)
    heads, d, b = 2, 3, 2
    L, c = math.prod(res), heads * d
    q, k, v = (rng.standard_normal((b, L, c)) for _ in range(3))
    table = rng.standard_normal((R.table_rows(win), heads))
    pad = rng.standard_normal((3, c))
    got = R.swin_block_attention_tokens(q, k, v, table, resolution=res, window=win, shift=shift,
                                        padding=padding, pad_qkv=pad)
    want = _brute_force_tokens(q, k, v, table, res, win, shift, padding, pad)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-11)


def test_block_attention_tokens_matches_manual_pipeline():
    rng = np.random.default_rng(8)
    res, win, shift, heads, d = (8, 12), (4, 6), (2, 3), 3, 4
    L, c = 96, heads * d
    q, k, v = (rng.standard_normal((2, L, c)) for _ in range(3))
    table = rng.standard_normal((R.table_rows(win), heads))

    def windows(t):
        x = R.cyclic_shift(t.reshape(2, *res, c), shift)
        return R.window_partition(x, win).reshape(-1, 24, heads, d).transpose(0, 2, 1, 3)

    out = R.window_attention(windows(q), windows(k), windows(v), bias=R.lookup(table, win),
                             mask=R.shift_mask(res, win, shift))
    manual = R.reverse_cyclic_shift(R.window_reverse(out, win, res), shift).reshape(2, L, c)
    got = R.swin_block_attention_tokens(q, k, v, table, resolution=res, window=win, shift=shift)
    np.testing.assert_allclose(got, manual, rtol=1e-13, atol=1e-13)


def test_padding_conventions():
    rng = np.random.default_rng(9)
    q, k, v = (rng.standard_normal((1, 9 * 13, 4)) for _ in range(3))
    table = rng.standard_normal((R.table_rows((4, 6)), 2))
    kw = dict(resolution=(9, 13), window=(4, 6), shift=(2, 3))
    hf = R.swin_block_attention_tokens(q, k, v, table, padding="hf", **kw)
    timm = R.swin_block_attention_tokens(q, k, v, table, padding="timm", **kw)
    assert np.abs(hf - timm).max() > 1e-3  # the conventions really differ here
    with pytest.raises(ValueError, match="not divisible"):
        R.swin_block_attention_tokens(q, k, v, table, **kw)
    # Without a shift both conventions are plain zero padding.
    a = R.swin_block_attention_tokens(q, k, v, table, resolution=(9, 13), window=(4, 6),
                                      padding="pad-then-shift")
    b = R.swin_block_attention_tokens(q, k, v, table, resolution=(9, 13), window=(4, 6),
                                      padding="shift-then-pad")
    np.testing.assert_array_equal(a, b)


def test_normalize_padding():
    assert R.normalize_padding("timm") == "shift_then_pad"
    assert R.normalize_padding("torchvision") == "pad_then_shift"
    assert R.normalize_padding("Pad-Then-Shift") == "pad_then_shift"
    assert R.normalize_padding(None) is None
    with pytest.raises(ValueError, match="unknown padding"):
        R.normalize_padding("reflect")


# --------------------------------------------------------------------------- #
# SwinV2 helpers
# --------------------------------------------------------------------------- #
def test_swinv2_coords_and_table():
    coords = R.swinv2_relative_coords_table((3, 4))
    assert coords.shape == (5 * 7, 2)
    np.testing.assert_allclose(coords + coords[::-1], 0.0, atol=1e-15)  # odd symmetry
    np.testing.assert_array_equal(coords[(5 * 7 - 1) // 2], [0.0, 0.0])  # centre
    np.testing.assert_allclose(np.abs(coords).max(), np.log2(9) / 3)
    coords_ft = R.swinv2_relative_coords_table((12, 12), pretrained_window=(8, 8))
    assert np.abs(coords_ft).max() > np.log2(9) / 3  # extrapolates beyond pre-training range
    rng = np.random.default_rng(10)
    table = R.swinv2_cpb_table(coords, rng.standard_normal((16, 2)), rng.standard_normal(16),
                               rng.standard_normal((3, 16)))
    assert table.shape == (35, 3)
    assert np.all((table > 0) & (table < 16))


def test_swinv2_window_attention_elementwise():
    """Cosine attention, one logit at a time from its definition."""
    rng = np.random.default_rng(12)
    q, k, v = (rng.standard_normal((2, 2, 4, 3)) for _ in range(3))
    q[0, 1, 2] = 0.0  # F.normalize's eps: a zero query gives all-zero logits
    logit_scale = np.log([7.0, 500.0])  # the second is clamped to 100
    bias = rng.standard_normal((2, 4, 4))
    got = R.swinv2_window_attention(q, k, v, logit_scale, bias)
    want = np.empty((2, 4, 2 * 3))
    for b in range(2):
        for h, s in enumerate((7.0, 100.0)):
            for i in range(4):
                logits = np.array([
                    s * q[b, h, i] @ k[b, h, j]
                    / (max(np.linalg.norm(q[b, h, i]), 1e-12) * np.linalg.norm(k[b, h, j]))
                    + bias[h, i, j] for j in range(4)])
                p = np.exp(logits - logits.max())
                want[b, i, h * 3:(h + 1) * 3] = (p / p.sum()) @ v[b, h]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="one value per head"):
        R.swinv2_window_attention(q, k, v, [1.0])


# --------------------------------------------------------------------------- #
# MaxViT's grid partition
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("grid,resolution", [((2, 3), (8, 12)), ((7, 7), (14, 21)),
                                             ((2, 2, 3), (4, 6, 6))])
def test_grid_partition_formula(grid, resolution):
    """Window w (row-major over resolution / grid) holds, at token t (row-major
    over the grid), the map's token t * (resolution / grid) + w per axis."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, *resolution, 3))
    windows = R.grid_partition(x, grid)
    strides = [r // g for r, g in zip(resolution, grid)]
    assert windows.shape == (2 * math.prod(strides), math.prod(grid), 3)
    for b, w, t in itertools.product(range(2), range(math.prod(strides)),
                                     range(math.prod(grid))):
        wc = np.unravel_index(w, strides)
        tc = np.unravel_index(t, grid)
        pos = tuple(tt * s + ww for tt, s, ww in zip(tc, strides, wc))
        np.testing.assert_array_equal(windows[b * math.prod(strides) + w, t], x[(b, *pos)])
    np.testing.assert_array_equal(R.grid_reverse(windows, grid, resolution), x)


def test_grid_partition_is_timms():
    torch = pytest.importorskip("torch")
    maxxvit = pytest.importorskip("timm.models.maxxvit")
    x = np.random.default_rng(1).standard_normal((2, 8, 12, 5))
    want = maxxvit.grid_partition(torch.from_numpy(x), (2, 3)).reshape(-1, 6, 5).numpy()
    np.testing.assert_array_equal(R.grid_partition(x, (2, 3)), want)
    back = maxxvit.grid_reverse(torch.from_numpy(want.reshape(-1, 2, 3, 5)), (2, 3), (8, 12))
    np.testing.assert_array_equal(R.grid_reverse(want, (2, 3), (8, 12)), back.numpy())


def test_grid_attention_differs_from_block():
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 96, 8)) for _ in range(3))
    table = rng.standard_normal((R.table_rows((2, 3)), 2))
    kw = dict(resolution=(8, 12), window=(2, 3))
    grid = R.swin_block_attention_tokens(q, k, v, table, partition="grid", **kw)
    block = R.swin_block_attention_tokens(q, k, v, table, **kw)
    assert np.abs(grid - block).max() > 1e-3


@pytest.mark.parametrize("kwargs,message", [
    (dict(shift=1), "has no shift"),
    (dict(resolution=(9, 12), padding="timm"), "needs whole grids"),
    (dict(partition="strided"), "partition must be one of"),
])
def test_grid_attention_errors(kwargs, message):
    q = np.zeros((1, 96, 8))
    kw = dict(resolution=(8, 12), window=(2, 3), partition="grid")
    kw.update(kwargs)
    if "resolution" in kwargs:
        q = np.zeros((1, math.prod(kw["resolution"]), 8))
    with pytest.raises(ValueError, match=message):
        R.swin_block_attention_tokens(q, q, q, np.zeros((R.table_rows((2, 3)), 2)), **kw)
