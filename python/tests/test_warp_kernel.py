"""The GPU's tensor-core kernel (``--kernel=warps``), run on the host.

``rpe-lower-fused-attention{strategy=warps}`` emits one program for a warp of
32 lanes; with ``target=host`` each lane value is a vector of the warp's 32
lanes, shuffles are vector shuffles and ``mma.sync`` is computed from its
definition (PTX's m16n8k16 fragment layouts). The GPU kernel differs only in
those primitives, so these tests check its tiling, fragment indexing, online
softmax over key blocks, bias and mask addressing, padding of N to whole
tiles and the token-layout addressing against the independent NumPy
reference, without a GPU.

The cases cover each shape of the key loop: N' = 16 * ceil(N / 16) keys in
blocks of 64 (7x7: one block, 4 of its keys padding; 16x16: four blocks), 48
(12x12: three) and 16 (10x10 and 2x7x7: seven, N' / 16 prime), head_dim 16 to
64 (one to four 16-channel k-steps; rows move in 16-byte chunks, d / 8
lanes per row: 48 leaves two lanes of the warp idle).

Tolerances: swin_opt.testing's (f16 2e-3, bf16 1.6e-2, relative to
max(1, max|ref|)). The kernel rounds the probabilities to the operand type
before ``P v`` and normalises by the sum of the rounded values, so its error
is that of one rounding of p and one of the output.
"""

import functools

import numpy as np
import pytest

import swin_opt
from swin_opt import testing as T

pytestmark = pytest.mark.aot


@pytest.fixture(scope="module")
def build_warps(build):
    """conftest's ``build`` with ``kernel="warps"``."""
    return functools.partial(build, kernel="warps")


def _check(kernel, n, seed=0):
    check = T.check_against_reference(kernel, n, seed=seed)
    assert check.passed, (f"{swin_opt.describe(kernel.config)} n={n}: max abs error "
                          f"{check.error:.3g} > {check.allowed:.3g}")


WINDOWS = [
    dict(window=(7, 7), heads=3, head_dim=32),
    dict(window=(7, 7), heads=2, head_dim=32, resolution=(14, 14), shift=3),
    dict(window=(8, 8), heads=2, head_dim=64),
    dict(window=(10, 10), heads=2, head_dim=16, resolution=(20, 20), shift=5),
    dict(window=(12, 12), heads=2, head_dim=32, resolution=(24, 24), shift=6),
    dict(window=(16, 16), heads=1, head_dim=32),
    dict(window=(4, 4), heads=2, head_dim=48),
    dict(window=(4, 6), heads=2, head_dim=16, resolution=(8, 18), shift=(2, 3)),
    dict(window=(2, 7, 7), heads=2, head_dim=32, resolution=(4, 14, 14), shift=(1, 3, 3)),
    dict(window=(1, 1), heads=1, head_dim=16),
]


def _id(case):
    extra = "-shifted" if case.get("shift") else ""
    return "x".join(map(str, case["window"])) + f"-d{case['head_dim']}" + extra


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", WINDOWS, ids=_id)
def test_windows_layout(build_warps, case, dtype):
    kernel = build_warps(dtype=dtype, **case)
    windows = 1
    if case.get("resolution"):
        windows = kernel.config.windows_per_image
    _check(kernel, windows)
    _check(kernel, 2 * windows, seed=1)


@pytest.mark.parametrize("padding", ["pad_then_shift", "shift_then_pad"])
def test_tokens_layout_padded(build_warps, padding):
    """Swin-T's 7x7 windows on a padded 10x13 map, batch 2, both conventions."""
    kernel = build_warps(layout="tokens", window=(7, 7), heads=3, head_dim=32, resolution=(10, 13),
                   shift=3, padding=padding, dtype="float16")
    _check(kernel, 2, seed=3)


def test_tokens_layout_packed_qkv(build_warps):
    kernel = build_warps(layout="tokens", window=(7, 7), heads=2, head_dim=32, resolution=(14, 14),
                   shift=3, packed_qkv=True, dtype="float16")
    rng = np.random.default_rng(4)
    qkv = T.to_storage(rng.standard_normal((2, 196, 3, 2, 32), dtype=np.float32), "f16")
    t32 = T.random_table(kernel.config, seed=4)
    out = kernel(qkv, T.to_storage(t32, "f16"))
    q, k, v = (qkv[:, :, i].reshape(2, 196, 64) for i in range(3))
    want = T.reference_output(kernel.config, q, k, v, t32.astype(np.float64))
    err, tol = T.compare(out, want, "f16")
    assert err <= tol, err


def test_f32_falls_back_to_rows(build_warps):
    """f32 operands have no m16n8k16 tensor-core form: the rows kernel runs."""
    _check(build_warps(window=(7, 7), heads=2, head_dim=32, dtype="float32"), 2)


#: f32 on the tensor cores (``f32_mma``): the tolerance of each mode, relative to
#: max(1, max|ref|). bf16x3 keeps 16 of f32's 24 bits of each operand (its terms'
#: products lose 2^-16 of each product at most; on these inputs the outputs err by
#: ~6e-6); bf16x6 keeps all 24 (~6e-7, f32's own tolerance).
F32_MMA_TOLERANCE = {"bf16x3": 3e-5, "bf16x6": T.TOLERANCE["f32"]}

# f32 rows move in chunks of 4: 16 channels take 4 lanes a row, 48 leave 8 of
# the warp's lanes idle. (64 channels: the emulation of bf16x6 takes LLVM
# minutes to compile; ptxas.test assembles that kernel.)
F32_MMA_CASES = [
    dict(window=(7, 7), heads=3, head_dim=32),
    dict(window=(12, 12), heads=2, head_dim=16, resolution=(24, 24), shift=6),
    dict(window=(4, 4), heads=2, head_dim=48),
    dict(window=(2, 2), heads=2, head_dim=16, class_token=True),
    dict(layout="tokens", window=(7, 7), heads=3, head_dim=32, resolution=(10, 13), shift=3,
         padding="shift_then_pad"),
]


def _f32_mma_id(case):
    return ("tokens-" if case.get("layout") else "") + _id(case) + (
        "-cls" if case.get("class_token") else "")


@pytest.mark.parametrize("case", F32_MMA_CASES, ids=_f32_mma_id)
def test_f32_on_tensor_cores(build_warps, case):
    """``f32_mma``: float32 q, k, v and the probabilities split into bf16 terms on
    the emulated tensor cores, against the reference within each mode's
    tolerance. The third term must show: bf16x6 errs at most a third of bf16x3
    (the row kernel, were either to fall back to it, would err alike in both)."""
    errors = {}
    for mode, tolerance in F32_MMA_TOLERANCE.items():
        kernel = build_warps(dtype="float32", f32_mma=mode, **case)
        windows = (kernel.config.windows_per_image or 1) if case.get("layout") is None else 1
        check = T.check_against_reference(kernel, 2 * windows, seed=3)
        scale = max(1.0, float(np.abs(check.expected).max()))
        assert check.error <= tolerance * scale, (mode, check.error, tolerance * scale)
        errors[mode] = check.error
    assert errors["bf16x6"] * 3 <= errors["bf16x3"], errors


def test_f32_mma_needs_f32_and_warps(build):
    """``f32_mma`` is the warp kernel's, on float32: refused elsewhere, before
    anything is built."""
    with pytest.raises(ValueError, match="f32_mma must be one of"):
        swin_opt.make_config((7, 7), 3, 32, kernel="warps", f32_mma="tf32")
    for kwargs in (dict(dtype="float16", kernel="warps"), dict(dtype="float32"),
                   dict(dtype="float32", kernel="rows", target="nvptx")):
        with pytest.raises(ValueError, match="f32_mma puts float32 operands"):
            swin_opt.make_config((7, 7), 3, 32, f32_mma="bf16x3", **kwargs)
    cfg = swin_opt.make_config((7, 7), 3, 32, f32_mma="bf16x3", target="nvptx")
    assert "--f32-mma=bf16x3" in cfg.aot_args()


def test_large_logits(build_warps):
    """Scores far from zero: the running max must be subtracted before 2^x."""
    kernel = build_warps(window=(7, 7), heads=2, head_dim=32, dtype="float16", scale=4.0)
    _check(kernel, 3, seed=5)


# BEiT's class token (token 0; the table's rows T, T + 1, T + 2 are class ->
# token, token -> class, class -> class): global attention over the grid.
# 3x4: N = 13, odd, in one query tile; 14x14 with 32 channels: N = 197
# padded to 208, 13 query tiles, keys in blocks of 16, the tensor-core
# kernel; BEiT-base (14x14, 12 heads of 64): a warp's keys and values exceed
# the static 48 KiB, so it takes the rows kernel, as on the GPU. Every table
# is random N(0, 1), its class rows included.
CLASS_TOKEN_CASES = [
    dict(window=(3, 4), heads=2, head_dim=16),
    dict(window=(14, 14), heads=2, head_dim=32),
    dict(window=(14, 14), heads=12, head_dim=64),
]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", CLASS_TOKEN_CASES, ids=_id)
def test_class_token(build_warps, case, dtype):
    kernel = build_warps(dtype=dtype, class_token=True, **case)
    _check(kernel, 2, seed=6)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("case", [dict(window=(3, 4), heads=3, head_dim=5),
                                  dict(window=(14, 14), heads=12, head_dim=64)], ids=_id)
def test_class_token_rows(build, case, dtype):
    """The rows kernel (the GPU's f32 forward, and its fallback) with a class token."""
    kernel = build(dtype=dtype, class_token=True, kernel="rows", **case)
    _check(kernel, 2, seed=7)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_class_token_base_on_tensor_cores(build_warps, dtype):
    """``warps_per_block=1`` puts BEiT-base (64 channels) on the tensor-core kernel,
    which by default takes the rows (a warp's keys and values exceed the static 48
    KiB): the blocks a GPU run compares with the rows, in dynamic shared memory,
    here emulated (32-lane vectors, where the rows have none) and against the
    reference."""
    case = dict(window=(14, 14), heads=12, head_dim=64, dtype=dtype, class_token=True)
    _check(build_warps(warps_per_block=1, **case), 2, seed=6)
    lanes = {wpb: build_warps(warps_per_block=wpb, emit="llvm", **case).main.read_text()
             .count("<32 x") for wpb in (0, 1)}
    assert lanes[1] > 100 * max(lanes[0], 1), lanes


def test_class_token_rows_are_read(build_warps):
    """Each of the three class-token rows reaches the output of the tensor-core
    kernel (at the entries the reference reads), not a grid row in its place."""
    kernel = build_warps(window=(3, 4), heads=1, head_dim=16, dtype="float16", class_token=True)
    inp = T.random_inputs(kernel, 1, seed=8)
    base = T.reference_output(kernel.config, inp.q, inp.k, inp.v, inp.table64)
    rows = kernel.config.table_rows
    # Each move makes the class key win where it did not: class -> token
    # lowered (for the class row, against its own key), token -> class and
    # class -> class raised. (Raising class -> token would shift the class
    # row's grid keys alike, and change little.)
    for row, move in ((rows - 3, -8.0), (rows - 2, 8.0), (rows - 1, 8.0)):
        moved = inp.table64.copy()
        moved[row] += move
        table = T.to_storage(moved.astype(np.float32), "f16")
        got = kernel(inp.q, inp.k, inp.v, table)
        want = T.reference_output(kernel.config, inp.q, inp.k, inp.v, T.to_float64(table, "f16"))
        err, tol = T.compare(got, want, "f16")
        assert err <= tol, f"row {row}: {err:.3g} > {tol:.3g}"
        # The move shows far above the tolerance: the kernel, within it of the
        # moved reference, read the row.
        assert np.abs(want - base).max() > 10 * tol, row
