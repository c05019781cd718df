"""BEiT's class token (``class_token=True``, ``swin-aot --class-token``): global
attention over a patch grid plus a class token first, its bias from a table of
``prod(2W - 1) + 3`` rows, against the independent float64 reference
(:func:`swin_opt.reference.class_token_lookup`, built as timm's BEiT builds its
index).

Tolerances: the forward's are :data:`swin_opt.testing.TOLERANCE` (see there);
the gradients', relative 1e-5 of each gradient's largest magnitude, as in
test_grad.py (float32 sums over N keys, queries or windows; a wrong index gives
errors of order 1). Every table is random N(0, 1) (the three class-token rows
included), so each entry moves the softmax well above the tolerances.
"""

import subprocess

import numpy as np
import pytest

import swin_opt
from swin_opt import reference as ref
from swin_opt import testing
from swin_opt.kernel import Kernel

pytestmark = pytest.mark.aot

GRAD_RTOL = 1e-5

CASES = [
    # window, heads, head_dim
    ((2, 2), 2, 8),  # the smallest grid: one padded key row per grid row
    ((3, 5), 3, 5),  # non-square, odd head_dim
    ((7, 7), 2, 16),
    ((8, 8), 2, 8),  # rows of whole vectors (no padding after a grid row)
    ((14, 14), 2, 16),  # BEiT-base's grid at 224x224: several query blocks
]


def test_reference_index_is_timms():
    """The reference's index is BEiT's: Swin's between grid tokens, L, L + 1, L + 2."""
    idx = ref.class_token_relative_index((2, 3))
    rows = 3 * 5
    assert idx.shape == (7, 7)
    np.testing.assert_array_equal(idx[1:, 1:], ref.relative_index((2, 3)))
    assert (idx[0, 1:] == rows).all() and (idx[1:, 0] == rows + 1).all() and idx[0, 0] == rows + 2


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("window,heads,head_dim", CASES)
def test_forward(build, window, heads, head_dim, dtype):
    kernel = build(window, heads, head_dim, dtype=dtype, class_token=True)
    assert kernel.input_shape(3) == (3, heads, int(np.prod(window)) + 1, head_dim)
    check = testing.check_against_reference(kernel, 3, seed=sum(window) + head_dim)
    assert check.passed, f"error {check.error:.3g} > {check.allowed:.3g}"


def test_baked_table_and_scale(build):
    """A baked table (its three class-token rows too) and an explicit scale."""
    window, heads, head_dim = (4, 4), 3, 8
    cfg = swin_opt.make_config(window, heads, head_dim, class_token=True)
    table = testing.random_table(cfg, seed=5)
    kernel = build(window, heads, head_dim, class_token=True, table=table, scale=0.3)
    inp = testing.random_inputs(kernel, 2, seed=5)
    out = kernel(*inp.args())
    want = ref.window_attention(inp.q, inp.k, inp.v, bias=ref.class_token_lookup(table, window),
                                scale=0.3)
    err, allowed = testing.compare(out, want, "f32")
    assert err <= allowed


def test_each_class_row_matters(build):
    """Changing one of the three class-token rows changes the output (the kernel
    reads them), and the grid's rows are not read in their place."""
    window, heads, head_dim = (3, 3), 1, 4
    kernel = build(window, heads, head_dim, class_token=True)
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 1, 10, 4)).astype(np.float32) for _ in range(3))
    table = rng.standard_normal((28, 1)).astype(np.float32)
    base = kernel(q, k, v, table)
    for row in (25, 26, 27):
        moved = table.copy()
        moved[row] += 3.0
        want = ref.window_attention(q, k, v, bias=ref.class_token_lookup(moved, window))
        got = kernel(q, k, v, moved)
        err, allowed = testing.compare(got, want, "f32")
        assert err <= allowed, f"row {row}"
        assert np.abs(got - base).max() > 1e-2, f"row {row} is not read"


def _close(got, want, what):
    scale = max(1e-30, float(np.abs(want).max()))
    err = float(np.abs(np.asarray(got, np.float64) - want).max()) / scale
    assert err <= GRAD_RTOL, f"{what}: relative error {err:.3g}"


@pytest.mark.parametrize("window,heads,head_dim", CASES)
def test_gradients(build, window, heads, head_dim):
    kernel = build(window, heads, head_dim, class_token=True, grad=True)
    rng = np.random.default_rng(sum(window) * 10 + head_dim)
    n, windows = int(np.prod(window)) + 1, 5
    q, k, v = (rng.standard_normal((windows, heads, n, head_dim)).astype(np.float32)
               for _ in range(3))
    table = rng.standard_normal((ref.table_rows(window) + 3, heads)).astype(np.float32)
    out = kernel(q, k, v, table)
    dout = rng.standard_normal(out.shape).astype(np.float32)
    got = kernel.backward(q, k, v, table, out, dout)
    want = ref.window_attention_backward(q, k, v, table, dout, window, class_token=True)
    for name, g, w in zip(("dq", "dk", "dv", "dtable"), got, want):
        _close(g, w, name)
    # The class rows' gradients are sums over a row, a column and a corner:
    # none is zero, so each is checked above, not only the grid's.
    assert np.abs(want[3][-3:]).min() > 1e-6


@pytest.mark.parametrize("width", [4, 16])
@pytest.mark.parametrize("window", [(3, 5), (4, 4), (7, 7)])
def test_vector_widths(aot_path, tmp_path, width, window):
    """Both vector widths whatever the host (``swin-aot --vector-width``; LLVM splits
    16 lanes on an AVX2 host): 4 lanes pad a grid row to fewer columns; 16
    (AVX-512's) put two key rows' segments, the class row's among them, in one
    score vector, and hand the scores to the softmax in registers. Forward and
    gradients."""
    lib = tmp_path / "k.so"
    subprocess.run([str(aot_path), f"--window={window[0]},{window[1]}", "--heads=3",
                    "--head-dim=8", "--class-token", "--grad", f"--vector-width={width}",
                    "--emit=so", "-o", str(lib)], check=True)
    cfg = swin_opt.make_config(window, 3, 8, class_token=True, grad=True)
    kernel = Kernel(cfg, lib, tmp_path / "k.so.h")
    rng = np.random.default_rng(width)
    n = int(np.prod(window)) + 1
    q, k, v = (rng.standard_normal((5, 3, n, 8)).astype(np.float32) for _ in range(3))
    table = rng.standard_normal((cfg.table_rows, 3)).astype(np.float32)
    out = kernel(q, k, v, table)
    want = ref.window_attention(q, k, v, bias=ref.class_token_lookup(table, window))
    err, allowed = testing.compare(out, want, "f32")
    assert err <= allowed
    dout = rng.standard_normal(out.shape).astype(np.float32)
    got = kernel.backward(q, k, v, table, out, dout)
    expected = ref.window_attention_backward(q, k, v, table, dout, window, class_token=True)
    for name, g, w in zip(("dq", "dk", "dv", "dtable"), got, expected):
        _close(g, w, name)


@pytest.mark.parametrize("threads", [1, 3, 8])
def test_table_gradient_on_any_team(build, team, threads):
    """The entry point's threads each sum a range of windows into a partial
    dtable (the class rows included), then add the partials."""
    window, heads, head_dim = (4, 4), 2, 8
    kernel = build(window, heads, head_dim, class_token=True, grad=True)
    rng = np.random.default_rng(threads)
    q, k, v = (rng.standard_normal((11, heads, 17, head_dim)).astype(np.float32)
               for _ in range(3))
    table = rng.standard_normal((52, heads)).astype(np.float32)
    team.omp_set_num_threads(threads)
    out = kernel(q, k, v, table)
    dout = rng.standard_normal(out.shape).astype(np.float32)
    dtable = kernel.backward(q, k, v, table, out, dout)[3]
    want = ref.window_attention_backward(q, k, v, table, dout, window, class_token=True)[3]
    _close(dtable, want, "dtable")


def test_config_refusals():
    """What has no class token yet is refused before anything is built."""
    with pytest.raises(ValueError, match="layout='windows'"):
        swin_opt.make_config((7, 7), 3, 32, class_token=True, resolution=(14, 14), shift=3)
    with pytest.raises(ValueError, match="cosine"):
        swin_opt.make_config((7, 7), 3, 32, class_token=True, cosine=True)


def test_wrong_table_shape(build):
    with pytest.raises(ValueError, match=r"\[52, 2\] for window \(4, 4\) and a class token"):
        build((4, 4), 2, 8, class_token=True, table=np.zeros((49, 2), np.float32))
