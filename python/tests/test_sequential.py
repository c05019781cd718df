"""Kernels built without OpenMP (``parallel=False``, ``swin-aot --no-parallel``).

Regression: their per-(window, head) stack scratch must be allocated once,
not once per iteration of the now sequential loop (which overflowed the
stack past ~190 windows).
"""

import numpy as np
import pytest

import swin_opt
from swin_opt import reference as ref
from swin_opt import testing as T

pytestmark = pytest.mark.aot


def test_many_windows_on_one_thread(aot_path, tmp_path):
    kernel = swin_opt.compile((7, 7), 3, 32, resolution=(56, 56), shift=3, parallel=False,
                              cache_dir=tmp_path)
    rng = np.random.default_rng(0)
    windows = 8 * 64
    q, k, v = (rng.standard_normal((windows, 3, 49, 32)).astype(np.float32) for _ in range(3))
    table = rng.standard_normal((169, 3)).astype(np.float32)
    out = kernel(q, k, v, table)
    expected = ref.window_attention(q, k, v, bias=ref.lookup(table, (7, 7)),
                                    mask=ref.shift_mask((56, 56), (7, 7), (3, 3)))
    assert np.abs(out - expected).max() <= 1e-5 * max(1.0, np.abs(expected).max())


def test_feature_maps_on_one_thread(aot_path, tmp_path):
    kernel = swin_opt.compile((7, 7), 2, 16, resolution=(54, 54), shift=3, parallel=False,
                              layout="tokens", padding="shift_then_pad", cache_dir=tmp_path)
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((4, 54 * 54, 32)).astype(np.float32) for _ in range(3))
    table = rng.standard_normal((169, 2)).astype(np.float32)
    pad = rng.standard_normal((3, 32)).astype(np.float32)
    out = kernel(q, k, v, table, pad_qkv=pad)
    expected = ref.swin_block_attention_tokens(q, k, v, table, resolution=(54, 54), window=(7, 7),
                                               shift=3, padding="shift_then_pad", pad_qkv=pad)
    assert np.abs(out - expected).max() <= 1e-5 * max(1.0, np.abs(expected).max())


@pytest.mark.parametrize("kernel", ["warps", "rows"])
def test_gpu_kernels_on_one_thread(aot_path, tmp_path, kernel):
    """The GPU's kernels on the host without OpenMP (the warp emulation once
    failed to lower: its scratch sat in an alloca scope inside the loop)."""
    compiled = swin_opt.compile((7, 7), 2, 16, resolution=(56, 56), shift=3, parallel=False,
                                dtype="float16", kernel=kernel, cache_dir=tmp_path)
    check = T.check_against_reference(compiled, 4 * 64)
    assert check.passed, f"max abs error {check.error:.3g} > {check.allowed:.3g}"
