"""NaN and infinities propagate through every kernel as through PyTorch's
``softmax(q kᵀ * scale + bias + mask) v`` in float32, and no further.

Each case puts one non-finite value into window 1, head 1 (or into head 1 of
the table, which every window gathers from) and states, from IEEE
arithmetic, which outputs are NaN:

* NaN in query row i: its scores, hence row i of (window, head).
* NaN in key row j: column j of the scores, in every row's max and sum:
  every row of (window, head).
* NaN in value row j, channel e: p_ij * NaN in every row, channel e only.
* +inf at a table entry: the rows that gather it have a +inf score, their
  max is +inf and inf - inf = NaN; every window, that head.
* -inf at the entries one row gathers for its first 16 keys (the first
  key block of the warp kernel, the first key of the row kernel's online
  softmax): exp(-inf) = 0, nothing is NaN.
* -inf at every entry one row gathers: that row's max is -inf, and
  -inf - -inf = NaN; every window, that head, that row.

The expected NaN positions are checked against the NumPy reference (float64,
IEEE like PyTorch), and the kernel must give NaN exactly there and match the
reference everywhere else (swin_opt.testing's tolerances). Kernels: the CPU
tiles kernel (f32), the row kernel (f32) and the warp kernel's host emulation
(f16, bf16) through ``swin_opt.compile``, and the unfused lowering
(``swin-aot --unfused``).
"""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

import swin_opt
from swin_opt import reference as ref
from swin_opt import testing as T

pytestmark = pytest.mark.aot

WINDOW, HEAD = 1, 1  # where the non-finite value goes
ROW, KEY, CHANNEL = 5, 7, 3

# Shifted, so that the -100 mask takes part; four windows per image.
TILES = dict(window=(7, 7), heads=2, head_dim=32, resolution=(14, 14), shift=3)
# N = 100: seven blocks of 16 keys in the warp kernel.
WARPS = dict(window=(10, 10), heads=2, head_dim=16, resolution=(20, 20), shift=5)

KERNELS = {
    "tiles-f32": dict(TILES),
    # AVX2: the exponentials at 8 lanes, as the max (else 16 where the host
    # has AVX-512).
    "tiles-f32-avx2": dict(TILES, cpu="haswell"),
    "rows-f32": dict(TILES, kernel="rows"),
    "warps-f16": dict(WARPS, kernel="warps", dtype="float16"),
    "warps-bf16": dict(WARPS, kernel="warps", dtype="bfloat16"),
    # N' = 64 keys, 15 of them padding.
    "warps-f16-7x7": dict(TILES, kernel="warps", dtype="float16"),
    # AVX512-BF16 dot products where the host has them; f16 widened to f32.
    "tiles-bf16": dict(TILES, dtype="bfloat16"),
    "tiles-f16": dict(TILES, dtype="float16"),
}


class _Unfused:
    """``swin-aot --unfused`` (convert-rpe-to-linalg), windows layout, f32."""

    def __init__(self, aot_path, directory, case):
        window = ",".join(map(str, case["window"]))
        resolution = ",".join(map(str, case["resolution"]))
        lib = directory / "unfused.so"
        subprocess.run([str(aot_path), f"--window={window}", f"--heads={case['heads']}",
                        f"--head-dim={case['head_dim']}", f"--resolution={resolution}",
                        f"--shift={case['shift']}", "--unfused", "--emit=so", "-o", str(lib)],
                       check=True)
        self.fn = ctypes.CDLL(str(lib)).swin_window_attention
        self.fn.restype = ctypes.c_int
        self.fn.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int64]

    def __call__(self, q, k, v, table):
        windows, heads, n, d = q.shape
        out = np.zeros((windows, n, heads * d), np.float32)
        args = [np.ascontiguousarray(x, dtype=np.float32) for x in (q, k, v, table)]
        assert self.fn(*(x.ctypes.data for x in args), out.ctypes.data, windows) == 0
        return out


def _gathering_rows(window, entries):
    """Rows i of the bias that gather a table entry in `entries` (any key)."""
    return np.isin(ref.relative_index(window), list(entries)).any(axis=1)


def _case(name, window, heads, head_dim, windows, q, k, v, table):
    """Puts case `name`'s non-finite value into the inputs (float32, in place)
    and returns the NaN positions IEEE arithmetic gives the output
    [windows, N, heads * head_dim]."""
    n = q.shape[2]
    idx = ref.relative_index(window)
    expected = np.zeros((windows, n, heads, head_dim), bool)
    if name == "nan-query":
        q[WINDOW, HEAD, ROW, CHANNEL] = np.nan
        expected[WINDOW, ROW, HEAD] = True
    elif name == "nan-key":
        k[WINDOW, HEAD, KEY, CHANNEL] = np.nan
        expected[WINDOW, :, HEAD] = True
    elif name == "nan-value":
        v[WINDOW, HEAD, KEY, CHANNEL] = np.nan
        expected[WINDOW, :, HEAD, CHANNEL] = True
    elif name == "inf-table":
        entry = idx[ROW, KEY]
        table[entry, HEAD] = np.inf
        expected[:, _gathering_rows(window, [entry]), HEAD] = True
    elif name == "neg-inf-first-keys":
        table[idx[ROW, :16], HEAD] = -np.inf
    elif name == "neg-inf-row":
        table[idx[ROW], HEAD] = -np.inf
        expected[:, ROW, HEAD] = True
    else:
        raise AssertionError(name)
    return expected.reshape(windows, n, heads * head_dim)


CASES = ["nan-query", "nan-key", "nan-value", "inf-table", "neg-inf-first-keys",
         "neg-inf-row"]


@pytest.fixture(scope="module")
def kernels(build, aot_path, tmp_path_factory):
    cache = {}

    def get(name):
        if name not in cache:
            if name == "unfused-f32":
                cache[name] = _Unfused(aot_path, tmp_path_factory.mktemp("unfused"), TILES)
            else:
                cache[name] = build(**KERNELS[name])
        return cache[name]

    return get


class _Setup:
    """One kernel's configuration and random inputs (rounded to its dtype),
    the reference on them, and the kernel called on them (float64 out)."""

    def __init__(self, kernels, kernel_name, seed):
        self.kernel_name, self.kernel = kernel_name, kernels(kernel_name)
        spec = TILES if kernel_name == "unfused-f32" else KERNELS[kernel_name]
        self.dtype = {"float16": "f16", "bfloat16": "bf16"}.get(spec.get("dtype"), "f32")
        self.window, self.heads, self.head_dim = spec["window"], spec["heads"], spec["head_dim"]
        self.windows = 2 * ref.windows_per_image(spec["resolution"], self.window)
        self.n = int(np.prod(self.window))
        rng = np.random.default_rng(seed)
        shape = (self.windows, self.heads, self.n, self.head_dim)
        self.q, self.k, self.v = (T.round_to_dtype(rng.standard_normal(shape), self.dtype)
                                  for _ in range(3))
        self.table = T.round_to_dtype(
            rng.standard_normal((ref.table_rows(self.window), self.heads)), self.dtype)
        self.mask = ref.shift_mask(spec["resolution"], self.window, (spec["shift"],) * 2)

    def reference(self, table=None):
        table = self.table if table is None else table
        return ref.window_attention(*(x.astype(np.float64) for x in (self.q, self.k, self.v)),
                                    bias=ref.lookup(table.astype(np.float64), self.window),
                                    mask=self.mask, scale=self.head_dim ** -0.5)

    def run(self, table=None):
        table = self.table if table is None else table
        qkvt = (self.q, self.k, self.v, table)
        if self.kernel_name != "unfused-f32":  # takes float32 arrays as they are
            qkvt = tuple(T.to_storage(x, self.dtype) for x in qkvt)
        return T.to_float64(self.kernel(*qkvt), self.dtype)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("kernel_name", [*KERNELS, "unfused-f32"])
def test_non_finite_inputs(kernels, kernel_name, case):
    s = _Setup(kernels, kernel_name, seed=0)
    expected_nan = _case(case, s.window, s.heads, s.head_dim, s.windows, s.q, s.k, s.v, s.table)

    with np.errstate(invalid="ignore"):  # inf - inf is the point
        expected = s.reference()
    # The reference follows IEEE: NaN exactly where the case says.
    np.testing.assert_array_equal(np.isnan(expected), expected_nan)

    got = s.run()
    wrong = np.argwhere(np.isnan(got) != expected_nan)
    assert wrong.size == 0, (f"{len(wrong)} outputs NaN where they should not be or the "
                             f"reverse, first [window, row, channel] {wrong[:4].tolist()}")
    finite = ~expected_nan
    assert np.all(np.isfinite(got[finite]))
    error = np.abs(got[finite] - expected[finite]).max()
    allowed = T.TOLERANCE[s.dtype] * max(1.0, np.abs(expected[finite]).max())
    assert error <= allowed, f"max abs error {error:.3g} > {allowed:.3g}"


@pytest.mark.parametrize("kernel_name", [*KERNELS, "unfused-f32"])
def test_inf_at_every_table_entry(kernels, kernel_name):
    """+inf at table entry t, for every t: NaN in exactly the rows that
    gather t (every window, that head), PyTorch's pattern. A kernel that
    reads table entries for lanes that hold no key (the padding of a window
    row, a reduction over grouped rows) turns other rows NaN as well: with
    +inf at entry 0 (query 0 -> key 48 of a 7x7 window) the tiles kernel
    once also made row 1 NaN, through its padding lane of key row 6."""
    s = _Setup(kernels, kernel_name, seed=1)
    expected = s.reference()
    allowed = T.TOLERANCE[s.dtype] * max(1.0, np.abs(expected).max())

    wrong_entries = []
    for entry in range(s.table.shape[0]):
        poisoned = s.table.copy()
        poisoned[entry, HEAD] = np.inf
        expected_nan = np.zeros((s.windows, s.n, s.heads, s.head_dim), bool)
        expected_nan[:, _gathering_rows(s.window, [entry]), HEAD] = True
        expected_nan = expected_nan.reshape(s.windows, s.n, s.heads * s.head_dim)
        got = s.run(poisoned)
        # Rows that do not gather the entry are the finite table's outputs.
        if (not np.array_equal(np.isnan(got), expected_nan)
                or np.abs(got[~expected_nan] - expected[~expected_nan]).max() > allowed):
            wrong_entries.append(entry)
    assert not wrong_entries, (f"+inf at table entries {wrong_entries[:8]} (of "
                               f"{len(wrong_entries)}) gives other outputs than PyTorch's")
