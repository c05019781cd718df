"""bf16 kernels on AVX512-BF16 dot products (vdpbf16ps).

At 16 lanes, bf16 kernels whose head_dim is a multiple of 16 compute both
products on pairs of bf16 operands (lib/Codegen/PairedBf16.cpp) where the
target CPU runs AVX512-BF16's vdpbf16ps at twice the FMA's multiply-adds
(AMD Zen 4 and later), and widen bf16 to f32 elsewhere: on CPUs without
it, and on Intel's, whose single vdpbf16ps port only matches the FMAs. The
code each CPU gets is checked on the LLVM IR (no such CPU needed); the
numbers on this machine, whichever form it gets, against the float64
reference at bf16's tolerance (``swin_opt.testing.TOLERANCE``: 1.6e-2).
"""

from __future__ import annotations

import pytest

import swin_opt
from swin_opt import testing as T


def _llvm(build, cpu, **kwargs):
    art = build((7, 7), 3, 32, emit="llvm", cpu=cpu, **kwargs)
    return art.main.read_text()


@pytest.mark.parametrize("cpu,dot", [("znver4", True), ("znver5", True),
                                     ("sapphirerapids", False), ("cooperlake", False),
                                     ("skylake-avx512", False), ("x86-64-v3", False)])
def test_dot_products_where_the_cpu_has_them(build, cpu, dot):
    ir = _llvm(build, cpu, dtype="bfloat16")
    assert ("llvm.x86.avx512bf16.dpbf16ps.512" in ir) == dot
    # P is rounded by the conversion instruction, not integer arithmetic.
    assert ("llvm.x86.avx512bf16.cvtneps2bf16.512" in ir) == dot


def test_f32_and_f16_keep_fma(build):
    for dtype in ("float32", "float16"):
        assert "dpbf16ps" not in _llvm(build, "znver4", dtype=dtype)


def test_head_dim_not_a_multiple_of_16_widens(build):
    art = build((7, 7), 3, 24, emit="llvm", cpu="znver4", dtype="bfloat16")
    assert "dpbf16ps" not in art.main.read_text()


# Shapes of the paired layout: key rows padded to 8 (7, 4x6: a pair of keys
# is padding), to 16 (12: four padding keys), none (8, 16); 3-D windows;
# head_dim 16 (one vector of channels) to 64; the token layout with
# padding, the shift and packed qkv (rows addressed in the map).
CASES = [
    dict(window=(7, 7), heads=3, head_dim=32),
    dict(window=(7, 7), heads=3, head_dim=32, resolution=(14, 14), shift=3),
    dict(window=(8, 8), heads=2, head_dim=64, resolution=(16, 16), shift=4),
    dict(window=(12, 12), heads=2, head_dim=32),
    dict(window=(16, 16), heads=1, head_dim=16),
    dict(window=(4, 6), heads=2, head_dim=16, resolution=(8, 12), shift=(2, 3)),
    dict(window=(2, 4, 4), heads=2, head_dim=16, resolution=(4, 8, 8), shift=(1, 2, 2)),
    dict(window=(7, 7), heads=2, head_dim=32, resolution=(10, 17), shift=3, layout="tokens",
         padding="pad_then_shift"),
    dict(window=(7, 7), heads=2, head_dim=32, resolution=(10, 17), shift=3, layout="tokens",
         packed_qkv=True, padding="shift_then_pad"),
    # MaxViT's grid attention: 2x3 windows strided across an 8x12 map.
    dict(window=(2, 3), heads=2, head_dim=32, resolution=(8, 12), layout="tokens",
         partition="grid"),
]


def _id(case):
    return "-".join(f"{k}={v}" for k, v in case.items()).replace(" ", "")


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_against_reference(build, case):
    kernel = build(dtype="bfloat16", **case)
    n = kernel.config.windows_per_image or 3
    if case.get("layout") == "tokens":
        n = 2
    for seed in (0, 1):
        check = T.check_against_reference(kernel, n, seed=seed)
        assert check.passed, (f"{swin_opt.describe(kernel.config)}: max abs error "
                              f"{check.error:.3g} > {check.allowed:.3g}")
