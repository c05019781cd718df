#!/usr/bin/env python3
"""The CPU kernels built for a named CPU, checked and timed where this runs.

    python3 bench/cross_cpu.py [--cpu sapphirerapids] [--json out.json] [--record]

For Swin-T's four stages at batch 32 and stages 1 and 4 at batch 1 (7x7
windows, head_dim 32, no shift), compiles the kernel for ``--cpu`` in f32,
bf16 and f16, checks each output against the float64 reference of its
(rounded) inputs on the first 16 windows, and prints the median time of 15
samples (calls shorter than 20 ms are timed in groups), GFLOP/s (4 N^2 d per
window-head) and the speed relative to f32. Threads: OMP_NUM_THREADS.

It is the benchmark for a machine that has the CPU but not LLVM, such as
the lent GPU machine's Xeon: ``--record`` only compiles (here), and
scripts/device/check.sh replays the kernels there. bench/run.py is the full
benchmark (baselines, % of peak) on the build machine.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import swin_opt  # noqa: E402
from swin_opt import reference as ref  # noqa: E402
from swin_opt import testing as T  # noqa: E402

# (label, windows, heads)
CONFIGS = [("s1 b32", 2048, 3), ("s2 b32", 512, 6), ("s3 b32", 128, 12), ("s4 b32", 32, 24),
           ("s1 b1", 64, 3), ("s4 b1", 1, 24)]
DTYPES = ["f32", "bf16", "f16"]
N, D = 49, 32


def time_call(fn, samples=15, group_seconds=0.02):
    start = time.perf_counter()
    fn()
    calls = max(1, int(group_seconds / max(1e-6, time.perf_counter() - start)))
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls)
    return float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cpu", default="sapphirerapids")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--record", action="store_true", help="compile only")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for label, windows, heads in CONFIGS:
        kernels = {dt: swin_opt.compile((7, 7), heads, D, dtype=dt, cpu=args.cpu) for dt in DTYPES}
        if args.record:
            continue
        inputs = [rng.standard_normal(shape).astype(np.float32)
                  for shape in [(windows, heads, N, D)] * 3 + [(ref.table_rows((7, 7)), heads)]]
        row = {"config": label}
        for dt, kernel in kernels.items():
            q, k, v, table = (T.to_storage(x, dt) for x in inputs)
            out = kernel(q, k, v, table)
            m = min(windows, 16)
            q64, k64, v64, t64 = (T.to_float64(x, dt) for x in (q[:m], k[:m], v[:m], table))
            expected = ref.window_attention(q64, k64, v64, bias=ref.lookup(t64, (7, 7)))
            err, tol = T.compare(out[:m], expected, dt)
            if err > tol:
                raise SystemExit(f"{label} {dt}: error {err:.3g} > {tol:.3g}")
            seconds = time_call(lambda: kernel(q, k, v, table, out=out))
            row[dt] = {"ms": seconds * 1e3, "gflops": 4 * N * N * D * windows * heads / seconds / 1e9,
                       "error": err}
        rows.append(row)
        print(f"{label:7} " + "  ".join(
            f"{dt} {row[dt]['ms']:8.4f} ms {row[dt]['gflops']:6.1f} GF/s "
            f"x{row['f32']['ms'] / row[dt]['ms']:.2f}" for dt in DTYPES), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"cpu": args.cpu, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
