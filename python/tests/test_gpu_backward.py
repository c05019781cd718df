"""The GPU's backward (``swin-aot --grad --target=nvptx``), run on the host.

``kernel="warps"`` with ``grad=True`` compiles the gradient's warp program
(lib/Codegen/GpuBackwardKernel.cpp) for the CPU: each warp emulated by
vectors of its 32 lanes, the blocks of its two kernels (one per (window,
head) item; the reduction of the table's gradient over the items' partials)
by loops. It is the program the GPU runs but for the primitives of Warp.h, so
these tests check its indexing, masks, layouts and sums against the float64
backward of :mod:`swin_opt.reference` without a GPU: every layout, shifted and
not, f32, f16 and bf16, square, non-square and 3-D windows, head_dims that
give a row to 1, 2 or 4 lanes (evenly split or not).

Two forms are checked: f16 and bf16 with head_dim a multiple of 16 (the cases
of 16, 32, 48 and 64 channels; f32 with ``f32_mma``) run the tensor-core form
(tiles of 16 tokens, the rows padded with zeros: 49 -> 64, 20 -> 32; 16 and
144 need none; blocks of one to four warps, each with its share of the tiles),
the others the lane form (f32, head_dims 5, 8, 17 and 24).

The inputs (q, k, v, table, dout, and out, the reference's forward) are
rounded to the kernel's dtype first; the reference runs on those values.
Tolerances, ``max |got - ref| <= TOLERANCE[dtype] * max |ref|`` per gradient:

* f32 1e-5: f32 FMAs over N keys (or queries) and d channels, the table's
  over every window, against rounding of about 1e-7 relative;
* f16 2e-3 and bf16 1.6e-2 (the forward's): dq, dk, dv are rounded once to
  the type, and out, as the backward reads it, was rounded once too (D_i =
  dout_i · out_i); the tensor-core form also rounds P and dS to the type as
  the operands of their products (Swin-T stage 1: 5e-4 in f16, 4.8e-3 in
  bf16); everything else is f32, dtable included.

A wrong index, sign, mask or layout gives errors of order 1.
"""

import functools

import numpy as np
import pytest

import swin_opt
from swin_opt import reference as ref
from swin_opt import testing as T

pytestmark = pytest.mark.aot

DTYPES = ["f32", "f16", "bf16"]


@pytest.fixture(scope="module")
def build_grad(build):
    """conftest's ``build`` with the GPU's backward, emulated."""
    return functools.partial(build, kernel="warps", grad=True)


def _random(rng, shape, dtype):
    """Standard normal values in the kernel's storage (bf16 as raw bits)."""
    return T.to_storage(rng.standard_normal(shape, dtype=np.float32), dtype)


def _check(got, want, dtype, what, tolerance=None):
    scale = float(np.abs(want).max())
    err = float(np.abs(T.to_float64(got, dtype) - want).max())
    tol = (tolerance or T.TOLERANCE[dtype]) * scale
    assert err <= tol, f"{what}: max error {err:.3g} > {tol:.3g} (max |ref| {scale:.3g})"


WINDOW_CASES = [
    # window, heads, head_dim, resolution, shift, scale
    ((7, 7), 3, 32, (14, 14), (3, 3), None),  # Swin-T stage 1, shifted
    ((7, 7), 2, 32, None, None, 0.3),  # no mask, explicit scale: two rounds of rows
    ((3, 5), 2, 5, (6, 10), (1, 2), None),  # non-square, odd head_dim: a lane per row
    ((5, 4), 2, 17, (10, 8), (2, 2), None),  # 2 lanes per row, 9 + 8 channels
    ((4, 4), 2, 48, None, None, None),  # 4 lanes per row, 12 channels each
    ((2, 3, 3), 2, 8, (4, 6, 6), (1, 1, 1), None),  # 3-D (Video Swin), shifted
    # Swin-B/L at 384, shifted: 144 tokens, 82,580 bytes of shared memory in
    # f32, beyond the static 48 KiB: dynamic shared memory on the GPU.
    ((12, 12), 2, 32, (24, 24), (6, 6), None),
]


def _case_id(case):
    window, _, d, _, shift, _ = case
    return "x".join(map(str, window)) + f"-d{d}" + ("-shifted" if shift else "")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", WINDOW_CASES, ids=_case_id)
def test_windows_layout(build_grad, case, dtype):
    window, heads, d, resolution, shift, scale = case
    kernel = build_grad(window, heads, d, resolution=resolution, shift=shift, scale=scale,
                        dtype=dtype)
    _check_windows_layout(kernel, case, dtype)


# f32 on the tensor cores (f32_mma, which the swap builds where TF32 is
# allowed): bf16x3's products keep 16 of f32's 24 bits (2^-16; measured 1.2e-5
# of the gradients at Swin-T stage 1), bf16x6's all of them (5e-7). One term
# alone (bf16) would be off by 4e-3.
F32_MMA_CASES = [
    ("bf16x3", WINDOW_CASES[0], 4e-5),
    ("bf16x6", ((4, 4), 2, 16, None, None, None), 1e-5),
]


@pytest.mark.parametrize("f32_mma,case,tolerance", F32_MMA_CASES, ids=lambda c: str(c)[:8])
def test_f32_on_tensor_cores(build_grad, f32_mma, case, tolerance):
    window, heads, d, resolution, shift, scale = case
    kernel = build_grad(window, heads, d, resolution=resolution, shift=shift, scale=scale,
                        dtype="f32", f32_mma=f32_mma)
    _check_windows_layout(kernel, case, "f32", tolerance)


def _check_windows_layout(kernel, case, dtype, tolerance=None):
    """``kernel``'s gradients on random inputs of ``case`` against the float64
    reference."""
    window, heads, d, resolution, shift, scale = case
    rng = np.random.default_rng(len(window) * 100 + d)
    n = int(np.prod(window))
    windows = 2 * (ref.windows_per_image(resolution, window) if resolution else 2)
    q, k, v = (_random(rng, (windows, heads, n, d), dtype) for _ in range(3))
    table = _random(rng, (ref.table_rows(window), heads), dtype)
    q64, k64, v64, t64 = (T.to_float64(a, dtype) for a in (q, k, v, table))
    mask = ref.shift_mask(resolution, window, shift) if shift else None
    out64 = ref.window_attention(q64, k64, v64, bias=ref.lookup(t64, window), mask=mask,
                                 scale=scale)
    out = T.to_storage(out64.astype(np.float32), dtype)
    dout = _random(rng, out.shape, dtype)
    got = kernel.backward(q, k, v, table, out, dout)
    assert got[3].dtype == np.float32  # dtable: a sum over every window, in f32
    want = ref.window_attention_backward(q64, k64, v64, t64, T.to_float64(dout, dtype), window,
                                         mask=mask, scale=scale)
    for name, g, w in zip(("dq", "dk", "dv", "dtable"), got, want):
        _check(g, w, "f32" if name == "dtable" and dtype == "f32" else dtype, name, tolerance)


TOKEN_CASES = [
    # resolution, window, shift, padding, packed, dtype
    ((14, 14), (7, 7), 3, None, False, "f16"),
    ((14, 14), (7, 7), 3, None, True, "bf16"),
    ((10, 13), (4, 6), (2, 3), "shift_then_pad", True, "f32"),  # timm: roll, then pad
    ((10, 13), (4, 6), (2, 3), "pad_then_shift", False, "f16"),  # torchvision / HF
]


@pytest.mark.parametrize("resolution,window,shift,padding,packed,dtype", TOKEN_CASES)
def test_token_layout(build_grad, resolution, window, shift, padding, packed, dtype):
    """The adjoint addressing: every image token gets its window token's gradient;
    padded tokens are zeros (no pad_qkv) and get none."""
    heads, head_dim, batch = 2, 16, 2
    kernel = build_grad(window, heads, head_dim, resolution=resolution, shift=shift,
                        padding=padding, layout="tokens", packed_qkv=packed, dtype=dtype)
    rng = np.random.default_rng(sum(resolution))
    tokens, c = int(np.prod(resolution)), heads * head_dim
    table = _random(rng, (ref.table_rows(window), heads), dtype)
    if packed:
        qkv = _random(rng, (batch, tokens, 3, heads, head_dim), dtype)
        q, k, v = (qkv[:, :, i].reshape(batch, tokens, c) for i in range(3))
    else:
        q, k, v = (_random(rng, (batch, tokens, c), dtype) for _ in range(3))
    q64, k64, v64, t64 = (T.to_float64(a, dtype) for a in (q, k, v, table))
    geometry = dict(resolution=resolution, window=window, shift=shift, padding=padding)
    out64 = ref.swin_block_attention_tokens(q64, k64, v64, t64, **geometry)
    out = T.to_storage(out64.astype(np.float32), dtype)
    dout = _random(rng, out.shape, dtype)
    if packed:
        dqkv, dtable = kernel.backward(qkv, table, out, dout)
        dq, dk, dv = (dqkv[:, :, i].reshape(batch, tokens, c) for i in range(3))
    else:
        dq, dk, dv, dtable = kernel.backward(q, k, v, table, out, dout)
    want = ref.swin_block_attention_tokens_backward(q64, k64, v64, t64, T.to_float64(dout, dtype),
                                                    **geometry)
    for name, g, w in zip(("dq", "dk", "dv", "dtable"), (dq, dk, dv, dtable), want):
        _check(g, w, "f32" if name == "dtable" and dtype == "f32" else dtype, name)


def test_deterministic(build_grad):
    """No atomics: the table's gradient is summed in a fixed order (per item, then
    over the items' partials), so two runs give the same bits."""
    kernel = build_grad((7, 7), 3, 32, resolution=(28, 28), shift=3, dtype="bf16")
    rng = np.random.default_rng(7)
    q, k, v, out, dout = (_random(rng, shape, "bf16") for shape in
                          [(32, 3, 49, 32)] * 3 + [(32, 49, 96)] * 2)
    table = _random(rng, (169, 3), "bf16")
    first = kernel.backward(q, k, v, table, out, dout)
    second = kernel.backward(q, k, v, table, out, dout)
    for name, a, b in zip(("dq", "dk", "dv", "dtable"), first, second):
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), name


# BEiT's class token: 3x4 (N = 13, odd) with a row to one lane (5 channels)
# and to two (24: 12 each); BEiT-base (14x14 grid: N = 197, seven rounds of
# 32 rows; 12 heads of 64, four lanes per row). The class key's column adds
# all of a round's rows to the one entry T + 1 (a sum over the warp first).
# In f32 BEiT-base's window takes 213,984 bytes of shared memory: more than
# the 163 KiB of sm_80, the emulation's chip (sm_90 takes it:
# test/GPU/backward.test), so f32 has the 14x14 grid with 32 channels.
# BEiT-base runs in f16 only: its emulated backward takes ~2 minutes of LLVM
# code generation on an AVX2 machine, and bf16 differs from f16 only in its
# conversions, which the smaller bf16 cases below check with the class token.
CLASS_TOKEN_CASES = [(w, h, d, dtype) for w, h, d in (((3, 4), 2, 5), ((3, 4), 2, 24))
                     for dtype in DTYPES]
CLASS_TOKEN_CASES += [((14, 14), 12, 64, "f16"), ((14, 14), 4, 32, "f32")]
# The tensor-core form with a class token: 3x4 (N = 13 in one tile of 16)
# and 7x7 (N = 50: the class key in the first of four key tiles, its column
# summed over the half-warp), as BEiT-base's f16 above (13 tiles on four
# warps, 154 KB of shared memory).
CLASS_TOKEN_CASES += [((3, 4), 2, 32, "f16"), ((3, 4), 2, 16, "bf16"),
                      ((7, 7), 3, 32, "f16"), ((7, 7), 2, 32, "bf16")]


@pytest.mark.parametrize("window,heads,d,dtype", CLASS_TOKEN_CASES,
                         ids=lambda c: "x".join(map(str, c)) if isinstance(c, tuple) else str(c))
def test_class_token(build_grad, window, heads, d, dtype):
    kernel = build_grad(window, heads, d, class_token=True, dtype=dtype)
    rng = np.random.default_rng(sum(window) + d)
    n, windows = int(np.prod(window)) + 1, 3
    q, k, v = (_random(rng, (windows, heads, n, d), dtype) for _ in range(3))
    table = _random(rng, (ref.table_rows(window) + 3, heads), dtype)
    q64, k64, v64, t64 = (T.to_float64(a, dtype) for a in (q, k, v, table))
    out64 = ref.window_attention(q64, k64, v64, bias=ref.class_token_lookup(t64, window))
    out = T.to_storage(out64.astype(np.float32), dtype)
    dout = _random(rng, out.shape, dtype)
    got = kernel.backward(q, k, v, table, out, dout)
    want = ref.window_attention_backward(q64, k64, v64, t64, T.to_float64(dout, dtype), window,
                                         class_token=True)
    for name, g, w in zip(("dq", "dk", "dv", "dtable"), got, want):
        _check(g, w, "f32" if name == "dtable" and dtype == "f32" else dtype, name)
    # The class rows (class -> token: a row's sum, which cancels to about
    # -ds_00 as dS's rows sum to 0; token -> class: a column's; class ->
    # class: one pair per item) are checked above against the tolerance of
    # the whole dtable. In f32 each is far larger than that tolerance: a
    # class row that were missing or misplaced would fail it.
    if dtype == "f32":
        tol = T.TOLERANCE["f32"] * float(np.abs(want[3]).max())
        for row in (-3, -2, -1):
            assert np.abs(want[3][row]).max() > 100 * tol, row


def test_dtypes_of_the_cpu_backward():
    """The CPU's own backward takes f32 only: f16 and bf16 gradients need the GPU's
    program (kernel='warps')."""
    with pytest.raises(ValueError, match="kernel='warps'"):
        swin_opt.make_config((7, 7), 3, 32, dtype="float16", grad=True)
    assert swin_opt.make_config((7, 7), 3, 32, dtype="float16", grad=True, kernel="warps").grad
    assert swin_opt.make_config((7, 7), 3, 32, dtype="bfloat16", grad=True, target="nvptx").grad
