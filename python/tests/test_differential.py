"""Randomized differential test: swin-aot kernels against the NumPy reference.

A seeded generator draws kernel configurations -- window (2-D, square or
not, and 3-D), heads, head_dim, scale, layout (windows, windows of a shifted
map, tokens, packed qkv), resolution (divisible or padded, in either order,
or smaller than the window), shift, dtype and kernel (the CPU's tiles, and
the GPU's rows and warps run on the host) -- compiles each and runs it on
random inputs, comparing with the float64 reference at
``swin_opt.testing.TOLERANCE`` (f32 1e-5, f16 2e-3, bf16 1.6e-2, relative to
``max(1, max|ref|)``; see that module for why).

Compiling a kernel costs 0.3-1 s (the emulated warp kernel up to 10 s),
running one on a small batch milliseconds, so kernels are shared: each
drawn kernel runs ``CASES_PER_KERNEL`` cases that differ in batch size and
data. The default, 100 kernels, takes about 70 CPU seconds.

Environment:

* ``SWIN_DIFF_CASES``: cases in all (default 300, i.e. 100 kernels x 3).
* ``SWIN_DIFF_SEED``: the generator's seed (default 0, so that CI is
  reproducible); any other value draws other configurations.

A failure prints the seed, the kernel's index and configuration (as
``swin_opt.compile`` arguments and ``swin-aot`` flags) and each failing
case's batch and data seed; ``-k k<index>`` with the same environment reruns
exactly that kernel.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import swin_opt
from swin_opt import testing as T

pytestmark = pytest.mark.aot

CASES = int(os.environ.get("SWIN_DIFF_CASES", "300"))
SEED = int(os.environ.get("SWIN_DIFF_SEED", "0"))
CASES_PER_KERNEL = 3
KERNELS = math.ceil(CASES / CASES_PER_KERNEL)


def _pick(rng, choices, p=None):
    """One of ``choices`` as a Python object (not a NumPy scalar)."""
    return choices[int(rng.choice(len(choices), p=p))]


def _draw_resolution(rng, window, allow_padding):
    """Per axis: whole windows, a padded remainder, or (rarely) a map no
    larger than the window, where Swin shrinks the window to the map."""
    res = []
    for w in window:
        r = w * int(rng.integers(1, 3 if len(window) == 3 else 4))
        if allow_padding and rng.random() < 0.4:
            r += int(rng.integers(1, w)) if w > 1 else 0
        if rng.random() < 0.08:
            r = int(rng.integers(1, w + 1))
        res.append(r)
    return tuple(res)


def _draw_shift(rng, window):
    kind = _pick(rng, ["none", "half", "random"], p=[0.25, 0.4, 0.35])
    if kind == "none":
        return tuple(0 for _ in window)
    if kind == "half":
        return tuple(w // 2 for w in window)
    return tuple(int(rng.integers(0, w)) for w in window)


def draw_config(rng) -> dict:
    """``swin_opt.compile`` keyword arguments of one random kernel."""
    if rng.random() < 0.2:
        window = (int(rng.integers(1, 4)), int(rng.integers(2, 6)), int(rng.integers(2, 6)))
    elif rng.random() < 0.2:
        window = (7, 7)
    else:
        window = (int(rng.integers(1, 9)), int(rng.integers(1, 9)))
    dtype = _pick(rng, ["float32", "float16", "bfloat16"], p=[0.5, 0.25, 0.25])
    if dtype == "float32":
        kernel = _pick(rng, ["tiles", "rows"], p=[0.8, 0.2])
    else:
        kernel = _pick(rng, ["tiles", "rows", "warps"], p=[0.45, 0.15, 0.4])
    # The warp kernel takes head_dim in 16-channel steps (else it is rows).
    head_dims = [16, 32, 48] if kernel == "warps" else [4, 8, 12, 16, 24, 32]
    config = dict(window=window, heads=int(rng.integers(1, 5)), head_dim=_pick(rng, head_dims),
                  dtype=dtype, kernel=kernel)
    if rng.random() < 0.25:
        config["scale"] = round(float(rng.uniform(0.05, 1.0)), 4)
    # Single-threaded kernels (--no-parallel) take another loop structure.
    if rng.random() < 0.15:
        config["parallel"] = False
    layout = _pick(rng, ["windows", "shifted windows", "tokens", "packed qkv"],
                   p=[0.2, 0.25, 0.35, 0.2])
    if layout == "windows":
        return config
    resolution = _draw_resolution(rng, window, allow_padding=True)
    config.update(resolution=resolution, shift=_draw_shift(rng, window))
    if any(r % min(w, r) for r, w in zip(resolution, window)):
        config["padding"] = _pick(rng, ["pad_then_shift", "shift_then_pad"])
    if layout != "shifted windows":
        config["layout"] = "tokens"
        config["packed_qkv"] = layout == "packed qkv"
    return config


def draw_cases(rng, kernel, count):
    """``(n, data_seed)`` per case: n windows (a multiple of the windows per
    image when the kernel masks) or n images (token layout)."""
    per_image = kernel.config.windows_per_image
    cases = []
    for _ in range(count):
        if kernel.config.layout == "tokens":
            n = int(rng.integers(1, 3))
        elif per_image is not None:
            n = per_image * int(rng.integers(1, 3))
        else:
            n = int(rng.integers(1, 9))
        cases.append((n, int(rng.integers(0, 2**31))))
    return cases


def _reproduce(index, options, kernel=None) -> str:
    lines = [f"SWIN_DIFF_SEED={SEED} SWIN_DIFF_CASES={CASES} "
             f"python3 -m pytest python/tests/test_differential.py -k k{index:03d}",
             f"swin_opt.compile(**{options!r})"]
    if kernel is not None:
        lines.append(f"swin-aot {' '.join(kernel.config.aot_args())}")
    return "\n  ".join(lines)


@pytest.mark.parametrize("index", range(KERNELS), ids=lambda i: f"k{i:03d}")
def test_kernel_matches_reference(build, index):
    rng = np.random.default_rng([SEED, index])
    options = draw_config(rng)
    error = None
    try:
        kernel = build(**options)
    except swin_opt.CompileError as exc:
        error = f"{exc}\n  {_reproduce(index, options)}"
    if error:  # failed outside the handler: no chained traceback
        pytest.fail(error, pytrace=False)
    count = min(CASES_PER_KERNEL, CASES - index * CASES_PER_KERNEL)
    failures = []
    for n, data_seed in draw_cases(rng, kernel, count):
        case = f"T.check_against_reference(kernel, {n}, seed={data_seed})"
        try:
            check = T.check_against_reference(kernel, n, seed=data_seed)
        except Exception as exc:  # a refused call is reported with the rest
            failures.append(f"{case}: {type(exc).__name__}: {exc}")
            continue
        if not check.passed:
            failures.append(f"{case}: max abs error {check.error:.3g} > {check.allowed:.3g}")
    if failures:
        pytest.fail(f"{swin_opt.describe(kernel.config)} kernel={options['kernel']}\n  "
                    + "\n  ".join(failures) + f"\n  {_reproduce(index, options, kernel)}",
                    pytrace=False)
