#!/usr/bin/env python3
"""Attention of a Swin block end to end with a swin-aot kernel.

Runs the non-shifted and the shifted block of a Swin stage with random
weights: LayerNorm -> qkv projection -> (cyclic shift) -> window partition ->
**compiled window attention** -> window reverse -> (reverse shift) -> output
projection, and compares with the float64 NumPy reference
(``swin_opt.reference.swin_block_attention_tokens``), printing the max error
and timings: the minimum and the median of ``--repeat`` runs, and the
threads each side had.

NumPy runs on one BLAS thread here (unless ``OPENBLAS_NUM_THREADS`` /
``MKL_NUM_THREADS`` say otherwise): after each call OpenBLAS's threads
spin-wait for the next one, as the kernels' OpenMP team does, and the two
pools took each other's cores -- the same 1 ms kernel timed at 0.8, 4.9 and
7.9 ms. ``OMP_NUM_THREADS`` sets the kernels' threads (default: every core).

    PYTHONPATH=python python3 python/examples/swin_block.py
    PYTHONPATH=python python3 python/examples/swin_block.py --resolution=28 --heads=6 --batch=4
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import time

# Before NumPy loads its BLAS (see the docstring).
for _var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

import swin_opt  # noqa: E402
from swin_opt import reference as ref  # noqa: E402


def layer_norm(x: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps)


def to_windows(t: np.ndarray, res, window, shift, heads) -> np.ndarray:
    """[B, L, C] token layout -> [B*nW, heads, N, head_dim] kernel layout (float32)."""
    b, _, c = t.shape
    x = ref.cyclic_shift(t.reshape(b, *res, c), shift)
    w = ref.window_partition(x, window)  # [B*nW, N, C]
    w = w.reshape(w.shape[0], w.shape[1], heads, c // heads).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(w, dtype=np.float32)


def from_windows(out: np.ndarray, res, window, shift, batch) -> np.ndarray:
    """[B*nW, N, C] kernel output -> [B, L, C] token layout in image order."""
    x = ref.reverse_cyclic_shift(ref.window_reverse(out, window, res), shift)
    return x.reshape(batch, -1, out.shape[-1])


def timings(fn, repeat: int) -> str:
    """``min ... ms, median ... ms`` of ``repeat`` calls of ``fn`` (after one warm-up)."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return f"min {min(times) * 1e3:.2f} ms, median {statistics.median(times) * 1e3:.2f} ms"


def kernel_threads() -> int:
    """The kernels' team size: that of the GNU OpenMP runtime their library loaded."""
    return ctypes.CDLL("libgomp.so.1").omp_get_max_threads()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--resolution", type=int, default=56)
    p.add_argument("--window", type=int, default=7)
    p.add_argument("--heads", type=int, default=3)
    p.add_argument("--head-dim", type=int, default=32)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    res, window = (args.resolution,) * 2, (args.window,) * 2
    heads, c = args.heads, args.heads * args.head_dim
    rng = np.random.default_rng(args.seed)
    x = rng.standard_normal((args.batch, res[0] * res[1], c)).astype(np.float32)
    w_qkv = (rng.standard_normal((3 * c, c)) * c ** -0.5).astype(np.float32)
    b_qkv = (rng.standard_normal(3 * c) * 0.1).astype(np.float32)
    w_proj = (rng.standard_normal((c, c)) * c ** -0.5).astype(np.float32)
    table = (rng.standard_normal((ref.table_rows(window), heads)) * 0.5).astype(np.float32)

    qkv = layer_norm(x) @ w_qkv.T + b_qkv  # [B, L, 3C] (float32)
    q, k, v = (np.ascontiguousarray(qkv[..., i * c:(i + 1) * c]) for i in range(3))

    print(f"Swin block attention: batch={args.batch} resolution={res} window={window} "
          f"heads={heads} head_dim={args.head_dim}")
    print(f"threads: kernels {kernel_threads()} (OpenMP), NumPy BLAS "
          f"{os.environ['OPENBLAS_NUM_THREADS']}; times of {args.repeat} runs")
    worst = 0.0
    for shift in (0, args.window // 2):
        try:
            kernel = swin_opt.compile(window, heads, args.head_dim, resolution=res, shift=shift)
        except (swin_opt.SwinAotNotFoundError, swin_opt.CompileError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        qw, kw, vw = (to_windows(t, res, window, shift, heads) for t in (q, k, v))

        def run_kernel():
            return from_windows(kernel(qw, kw, vw, table), res, window, shift, args.batch) @ w_proj.T

        def run_reference():
            attn = ref.swin_block_attention_tokens(q, k, v, table, resolution=res, window=window,
                                                   shift=shift)
            return attn @ w_proj.T.astype(np.float64)

        got, want = run_kernel(), run_reference()
        err = float(np.abs(got - want).max())
        rel = err / max(1.0, float(np.abs(want).max()))
        worst = max(worst, rel)
        label = "shifted" if shift else "regular"
        print(f"  {label} block, shift={shift}: max abs error {err:.2e} (relative {rel:.2e})")
        print(f"    kernel call      {timings(lambda: kernel(qw, kw, vw, table), args.repeat)}")
        print(f"    block            {timings(run_kernel, args.repeat)} (kernel, layout, "
              "projection)")
        print(f"    NumPy reference  {timings(run_reference, max(1, args.repeat // 5))} "
              "(float64)")
    ok = worst <= 1e-5
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
