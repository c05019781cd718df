#!/usr/bin/env python3
"""The GEMMs of Swin-T as rpe-cpu-pipeline compiles them, against the FMA peak.

Each shape is a linear layer as torch-mlir exports it (``linalg.matmul`` of
the input and the transposed constant weight, then the bias, and GELU for
fc1 or the residual for fc2, as generics), compiled by ``swin-opt
--rpe-cpu-pipeline`` (weights packed at compile time, the epilogue fused:
``rpe.matmul``), and timed through its ``_mlir_ciface_gemm`` entry point
writing into a preallocated output. Beside it, in the same process and
alternating: PyTorch's ``F.linear`` (+ the same epilogue) on the same data,
and the measured FMA peak of the machine (``bench/fma_peak.cpp``).

    python3 bench/gemm.py                  # Swin-T, batch 1 and 8
    python3 bench/gemm.py --batch 1 --only fc1
    python3 bench/gemm.py --json gemm.json
    python3 bench/gemm.py --dtype bf16     # bf16 x and weights, f32 out
    python3 bench/gemm.py --cold           # also with the caches evicted before each call

Every output is checked against float64 NumPy (relative 1e-4; bf16: on the
values rounded to bf16) before it is timed. With ``--dtype bf16`` the input
and the weight are bf16 and the product f32 (on AVX512-BF16 dot products
where the CPU has them: ``bf16-dot``), against torch's bf16 ``F.linear``;
the percentage is still of the f32 FMA peak, which vdpbf16ps can double.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(BENCH_DIR))

import run as attention_bench  # noqa: E402  (the FMA peak and its build)
from swin_opt import linear_mlir  # noqa: E402
from swin_opt.export_mlir import _descriptor  # noqa: E402

LLVM = Path("/usr/lib/llvm-22/bin")


#: The epilogue of each of Swin-T's layers, as linear_mlir's steps.
STEPS = {"bias": ("bias",), "gelu": ("bias", "gelu"), "residual": ("bias", "residual"), "none": ()}


@dataclass
class Shape:
    name: str     # e.g. "s1.fc1"
    m: int
    k: int
    n: int
    epilogue: str  # a key of STEPS
    dtype: str = "f32"  # of x and the weight: f32 or bf16

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.k * self.n

    @property
    def layer(self) -> linear_mlir.Linear:
        return linear_mlir.Linear(self.m, self.k, self.n, STEPS[self.epilogue], name="gemm",
                                  dtype=self.dtype)


def swin_t_shapes(batch: int) -> List[Shape]:
    shapes = []
    for stage in range(4):
        c = 96 << stage
        tokens = batch * 3136 >> (2 * stage)
        shapes += [Shape(f"s{stage + 1}.qkv", tokens, c, 3 * c, "bias"),
                   Shape(f"s{stage + 1}.proj", tokens, c, c, "bias"),
                   Shape(f"s{stage + 1}.fc1", tokens, c, 4 * c, "gelu"),
                   Shape(f"s{stage + 1}.fc2", tokens, 4 * c, c, "residual")]
        if stage < 3:
            shapes.append(Shape(f"s{stage + 1}.merge", tokens // 4, 4 * c, 2 * c, "none"))
    return shapes


def compile_gemm(shape: Shape, text: str, swin_opt: Path, work: Path, pipeline: str) -> Path:
    """swin-opt's pipeline, mlir-translate, clang: the layer's shared library."""
    src = work / f"{shape.name}.mlir"
    src.write_text(text)
    llvm_dialect, ir, lib = (work / f"{shape.name}{ext}" for ext in (".llvm.mlir", ".ll", ".so"))
    subprocess.run([str(swin_opt), str(src), f"--{pipeline}", "-o", str(llvm_dialect)], check=True)
    subprocess.run([str(LLVM / "mlir-translate"), "--mlir-to-llvmir", str(llvm_dialect), "-o", str(ir)],
                   check=True)
    subprocess.run([str(LLVM / "clang"), "-O3", "-march=native", "-shared", "-fPIC", "-fopenmp",
                    "-Wno-override-module", str(ir), "-o", str(lib), "-lm"], check=True)
    return lib


class Compiled:
    def __init__(self, lib: Path, shape: Shape, inputs: List[np.ndarray], out: np.ndarray):
        self.fn = ctypes.CDLL(str(lib))._mlir_ciface_gemm
        self.fn.restype = None
        self.descriptors = [_descriptor(a) for a in [*inputs, out]]
        self.args = [ctypes.byref(d) for d in self.descriptors]
        self.keep = inputs + [out]

    def __call__(self):
        self.fn(*self.args)


def best_time(fn, budget_s: float = 0.4, rounds: int = 5) -> float:
    """Best seconds per call over `rounds` samples of enough calls for 20 ms."""
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    calls = max(1, int(0.02 / once))
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


class ColdCaches:
    """Evicts the caches before a call: writes a buffer larger than the L3, so
    that the weights (and the input) come from memory as in a whole model's
    forward, where each layer's weights are read once per call and the 28 M
    weights of Swin-T do not fit any cache."""

    def __init__(self, megabytes: int = 128):
        self.buffer = np.zeros(megabytes << 18, np.float32)

    def __call__(self) -> None:
        self.buffer += 1.0


def best_cold_time(fn, evict: ColdCaches, rounds: int = 10) -> float:
    """Best seconds of one call after the caches were evicted (not timed)."""
    best = float("inf")
    for _ in range(rounds):
        evict()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--only", nargs="*", default=None, help="layer names (qkv, proj, fc1, fc2, merge)")
    parser.add_argument("--stages", type=int, nargs="*", default=[1, 2, 3, 4])
    parser.add_argument("--swin-opt", default=str(ROOT / "build" / "bin" / "swin-opt"))
    parser.add_argument("--pipeline", default=None, help="default: rpe-cpu-pipeline for this CPU")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dtype", choices=["f32", "bf16"], default="f32",
                        help="of the input and the weights (bf16: an f32 product)")
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--cold", action="store_true",
                        help="also time each layer with its weights evicted from the caches first "
                             "(as in a whole model's forward)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    flags = Path("/proc/cpuinfo").read_text()
    avx512 = "avx512f" in flags
    bf16_dot = args.dtype == "bf16" and avx512 and "avx512_bf16" in flags
    pipeline = args.pipeline or (f"rpe-cpu-pipeline=vector-width={16 if avx512 else 8}"
                                 + (" bf16-dot=true" if bf16_dot else ""))
    torch = None
    if not args.no_torch:
        try:
            import torch
            torch.set_num_threads(args.threads)
        except ImportError:
            torch = None

    rows = []
    evict = ColdCaches() if args.cold else None
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cpp = attention_bench.build_cpp(attention_bench.find_cxx(), work)
        peak = attention_bench.measure_peak(cpp["fma_peak"], args.threads)
        peak_gflops = max(r["gflops"] for r in peak["results"] if r["threads"] == args.threads)
        rng = np.random.default_rng(0)
        for batch in args.batch:
            for shape in swin_t_shapes(batch):
                stage = int(shape.name[1])
                if stage not in args.stages or (args.only and shape.name.split(".")[1] not in args.only):
                    continue
                shape.name = f"b{batch}.{shape.name}"
                shape.dtype = args.dtype
                x = rng.standard_normal((shape.m, shape.k), dtype=np.float32)
                weight = rng.standard_normal((shape.n, shape.k), dtype=np.float32)
                weight /= np.float32(math.sqrt(shape.k))
                # bf16: the module takes the bits; everything else the
                # values they stand for.
                x_in, weight_in = x, weight
                if args.dtype == "bf16":
                    x_in, weight_in = linear_mlir.to_bf16(x), linear_mlir.to_bf16(weight)
                    x, weight = linear_mlir.from_bf16(x_in), linear_mlir.from_bf16(weight_in)
                bias = rng.standard_normal(shape.n, dtype=np.float32)
                residual = rng.standard_normal((shape.m, shape.n), dtype=np.float32)
                inputs = [x_in] + ([residual] if shape.epilogue == "residual" else [])
                out = np.zeros((shape.m, shape.n), np.float32)
                lib = compile_gemm(shape, linear_mlir.linear_module(shape.layer, weight_in, bias),
                                   Path(args.swin_opt), work, pipeline)
                ours = Compiled(lib, shape, inputs, out)
                ours()
                expected = linear_mlir.reference(shape.layer, x, weight, bias, residual)
                error = np.abs(out - expected).max() / max(1.0, np.abs(expected).max())
                if error > 1e-4:
                    print(f"{shape.name}: error {error:.2e} > 1e-4", file=sys.stderr)
                    return 1
                timings = {"ours": []}
                if torch is not None:
                    tx, tw, tb, tr = (torch.from_numpy(a) for a in (x, weight, bias, residual))
                    if args.dtype == "bf16":  # torch's bf16 matmul (exact: x, w are bf16)
                        tx, tw, tb, tr = (t.to(torch.bfloat16) for t in (tx, tw, tb, tr))
                    gelu = torch.nn.functional.gelu

                    def torch_call():
                        y = torch.nn.functional.linear(tx, tw, tb if shape.epilogue != "none" else None)
                        if shape.epilogue == "gelu":
                            y = gelu(y)
                        elif shape.epilogue == "residual":
                            y = y + tr
                        return y
                    timings["torch"] = []
                if evict is not None:
                    timings.update({f"{impl}_cold": [] for impl in list(timings)})
                for _ in range(3):  # alternate the contenders
                    timings["ours"].append(best_time(ours))
                    if evict is not None:
                        timings["ours_cold"].append(best_cold_time(ours, evict))
                    if torch is not None:
                        with torch.inference_mode():
                            timings["torch"].append(best_time(torch_call))
                            if evict is not None:
                                timings["torch_cold"].append(best_cold_time(torch_call, evict))
                row = {"shape": shape.name, "m": shape.m, "k": shape.k, "n": shape.n,
                       "epilogue": shape.epilogue, "error": error}
                for impl, ts in timings.items():
                    row[impl + "_ms"] = 1e3 * min(ts)
                    row[impl + "_gflops"] = shape.flops / min(ts) / 1e9
                row["peak_pct"] = 100 * row["ours_gflops"] / peak_gflops
                rows.append(row)
                torch_txt = f"  torch {row['torch_ms']:8.3f} ms {row['torch_gflops']:6.1f}" if torch else ""
                cold_txt = ""
                if evict is not None:
                    row["ours_cold_pct"] = 100 * row["ours_cold_gflops"] / peak_gflops
                    cold_txt = f"  cold: ours {row['ours_cold_ms']:8.3f} ms {row['ours_cold_pct']:5.1f}%"
                    if torch is not None:
                        cold_txt += f" torch {row['torch_cold_ms']:8.3f} ms"
                print(f"{shape.name:14s} M={shape.m:6d} K={shape.k:5d} N={shape.n:5d} {shape.epilogue:8s}"
                      f"  ours {row['ours_ms']:8.3f} ms {row['ours_gflops']:6.1f} GF/s {row['peak_pct']:5.1f}%"
                      f"{torch_txt}{cold_txt}", flush=True)
    print(f"FMA peak ({args.threads} threads): {peak_gflops:.1f} GFLOP/s")
    if args.json:
        Path(args.json).write_text(json.dumps({"peak_gflops": peak_gflops, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
