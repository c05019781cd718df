"""The fused kernels' threads: the GNU OpenMP team of the calling thread.

The entry point splits the (window, head) items of a call evenly over the
team (``GOMP_parallel``); each thread runs its range. The numbers must not
depend on how many threads there are, nor on thread counts that do not
divide the items, exceed them, or leave some threads without work. The
team size is set in-process through ``omp_set_num_threads`` of the very
libgomp the kernels load (their ``libgomp.so.1``), as PyTorch's
``torch.set_num_threads`` does.
"""

import numpy as np
import pytest

import swin_opt
from swin_opt import reference as ref

pytestmark = pytest.mark.aot


@pytest.mark.parametrize("threads", [1, 3, 7, 64])
def test_window_layout_on_any_team(aot_path, tmp_path, team, threads):
    kernel = swin_opt.compile((7, 7), 3, 16, resolution=(14, 21), shift=3, cache_dir=tmp_path)
    rng = np.random.default_rng(threads)
    windows = 2 * 6  # two images of 6 windows: 36 items
    q, k, v = (rng.standard_normal((windows, 3, 49, 16)).astype(np.float32) for _ in range(3))
    table = rng.standard_normal((169, 3)).astype(np.float32)
    team.omp_set_num_threads(threads)
    assert team.omp_get_max_threads() == threads
    out = kernel(q, k, v, table)
    expected = ref.window_attention(q, k, v, bias=ref.lookup(table, (7, 7)),
                                    mask=ref.shift_mask((14, 21), (7, 7), (3, 3)))
    assert np.abs(out - expected).max() <= 1e-5 * max(1.0, np.abs(expected).max())


@pytest.mark.parametrize("threads", [1, 5])
def test_token_layout_on_any_team(aot_path, tmp_path, team, threads):
    """The token layout counts images; every window of every image is an item."""
    kernel = swin_opt.compile((7, 7), 2, 16, resolution=(20, 20), shift=3, layout="tokens",
                              padding="shift_then_pad", cache_dir=tmp_path)
    rng = np.random.default_rng(threads)
    q, k, v = (rng.standard_normal((3, 400, 32)).astype(np.float32) for _ in range(3))
    table = rng.standard_normal((169, 2)).astype(np.float32)
    pad = rng.standard_normal((3, 32)).astype(np.float32)
    team.omp_set_num_threads(threads)
    out = kernel(q, k, v, table, pad_qkv=pad)
    expected = ref.swin_block_attention_tokens(q, k, v, table, resolution=(20, 20),
                                               window=(7, 7), shift=3,
                                               padding="shift_then_pad", pad_qkv=pad)
    assert np.abs(out - expected).max() <= 1e-5 * max(1.0, np.abs(expected).max())


def test_zero_windows_write_nothing(aot_path, tmp_path, team):
    kernel = swin_opt.compile((4, 4), 2, 8, cache_dir=tmp_path)
    empty = np.zeros((0, 2, 16, 8), np.float32)
    table = np.zeros((49, 2), np.float32)
    team.omp_set_num_threads(3)
    assert kernel(empty, empty, empty, table).shape == (0, 16, 16)
