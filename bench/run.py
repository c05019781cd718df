#!/usr/bin/env python3
"""Benchmark swin-opt's fused window-attention kernels against four baselines.

One command, one table::

    python3 bench/run.py [--quick] [--repeat N] [--png out.png] [--json out.json]

For every configuration (Swin-T at batch 32 / 224x224, stages 1-4; windows 8,
12, 16 and 24; with and without the shifted-window mask) it prints the fused
kernel's time and GFLOP/s and how it compares with

* (a) the unfused lowering of the same compiler (``swin-aot --unfused``),
* (b) a plain C++ loop (``bench/naive_attention.cpp``, -O3 -march=native,
  OpenMP over windows x heads),
* (c) PyTorch eager, Swin's own code path (when ``torch`` is importable),
* (d) the machine's f32 FMA peak, measured by ``bench/fma_peak.cpp`` in the
  same run,

plus the parallel speed-up of the fused kernel (the same kernel on one
thread, and its ``--no-parallel`` build) and the same fused kernel compiled
for bfloat16 storage (``dtype="bfloat16"``; ``--no-bf16`` skips it).  The
Swin-T stages are also timed at batch 1 (``Swin-T s1 b1`` ...: latency).
Every implementation's output is checked against the float64 NumPy reference
(``swin_opt.reference``) once per configuration; the run aborts when one
differs by more than 1e-4 relative to the largest output (bf16: 2e-2, against
the reference of the bf16-rounded inputs).

FLOPs are counted as ``4 * N^2 * d`` per (window, head): ``2 N^2 d`` for
``q kᵀ`` and ``2 N^2 d`` for ``P v``; scale, bias, mask and softmax are not
counted.

Each implementation runs in its own worker process (``--worker``) so that the
OpenMP runtimes of the implementations (the unfused kernel's and the C++
loop's LLVM libomp, the fused kernels' and PyTorch's GNU libgomp) never share a
process; the rows are timed one after the other, all implementations of
a row back to back.  Times are the median of ``--repeat`` calls after warm-up on
fixed random inputs (calls shorter than 20 ms are timed in groups of
back-to-back calls, each sample the group's time / its calls).  See
bench/README.md.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import dataclasses
import json
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path.insert(0, str(REPO / "python"))

import swin_opt  # noqa: E402  (needs the path above)
from swin_opt import reference as ref  # noqa: E402

#: Relative error (max |out - ref| / max |ref|) above which the run aborts.
TOLERANCE = 1e-4
#: The same for the bf16 kernel, against the reference of its bf16-rounded inputs
#: (its output is rounded to bf16: 2^-9 relative, and so are P and v inside).
BF16_TOLERANCE = 2e-2
#: Implementations in the order they are timed; "torch" only when importable,
#: "bf16" unless --no-bf16.
IMPLS = ("fused", "bf16", "fused1t", "serial", "unfused", "naive", "torch")
IMPL_TITLES = {
    "fused": "swin-opt fused (parallel)",
    "bf16": "swin-opt fused bf16 (parallel)",
    "fused1t": "swin-opt fused, 1 thread",
    "serial": "swin-opt fused --no-parallel",
    "unfused": "swin-opt --unfused",
    "naive": "plain C++ loop",
    "torch": "PyTorch eager",
}
#: A timing sample lasts at least this long: shorter calls are timed in groups.
MIN_SAMPLE_S = 0.02


def tolerance(impl: str) -> float:
    return BF16_TOLERANCE if impl == "bf16" else TOLERANCE


# --------------------------------------------------------------------------- #
# Configurations
# --------------------------------------------------------------------------- #
@dataclasses.dataclass(frozen=True)
class Config:
    """One benchmark row: a window-attention call on ``batch`` images."""

    name: str
    window: int       # square window Wh = Ww
    heads: int
    head_dim: int
    resolution: int   # square feature map (per image) the windows tile
    batch: int        # images; num_windows = batch * nW
    shift: int        # 0: no mask (W-MSA); > 0: shifted windows (SW-MSA)
    note: str = ""    # printed under the table (e.g. reduced batch)

    @property
    def n(self) -> int:
        return self.window * self.window

    @property
    def windows_per_image(self) -> int:
        return (self.resolution // self.window) ** 2

    @property
    def num_windows(self) -> int:
        return self.batch * self.windows_per_image

    @property
    def flops(self) -> float:
        return 4.0 * self.n * self.n * self.head_dim * self.num_windows * self.heads

    @property
    def scale(self) -> float:
        return self.head_dim ** -0.5

    @property
    def key(self) -> str:
        return f"{self.name}-s{self.shift}".replace(" ", "_")

    @property
    def label(self) -> str:
        return self.name + (" SW" if self.shift else "")

    @property
    def check_windows(self) -> int:
        """Windows compared with the reference: whole images, at least 64 windows."""
        nw = self.windows_per_image
        return min(self.num_windows, nw * max(1, math.ceil(64 / nw)))


def configurations(quick: bool) -> List[Config]:
    """The benchmark's rows.

    Swin-T at 224x224, batch 32: stage s has a (56 / 2^(s-1))^2 feature map,
    3 * 2^(s-1) heads, 7x7 windows, head_dim 32 and shift 3 in every second
    block; stage 4 (7x7 map = one window) has no shifted blocks (Swin turns
    the shift off when the window covers the map, and swin-aot refuses it).
    Larger windows use Swin(V2)-T stage-1 shapes (3 heads, head_dim 32) with
    shift W/2; for N >= 144 the batch is reduced so that one call stays at
    3-4 GFLOP (see the notes printed under the table).  The Swin-T stages
    come again at batch 1 ("Swin-T s1 b1" ...: one image, the latency case).
    """
    rows = []
    stages = [(56, 3), (28, 6), (14, 12), (7, 24)]
    for batch, suffix in ((32, ""), (1, " b1")):
        for stage, (res, heads) in enumerate(stages, start=1):
            for shift in (0, 3):
                if shift and res == 7:
                    continue
                rows.append(Config(f"Swin-T s{stage}{suffix}", 7, heads, 32, res, batch, shift))
    # window, feature map (SwinV2 stage 1 at 256/192/256/384 px), batch
    for window, res, batch in [(8, 64, 32), (12, 48, 16), (16, 64, 8), (24, 96, 2)]:
        note = f"batch {batch} (not 32) to bound the run time" if batch != 32 else ""
        for shift in (0, window // 2):
            rows.append(Config(f"win {window}", window, 3, 32, res, batch, shift, note))
    if quick:
        keep = {"Swin-T s1", "Swin-T s3", "Swin-T s4", "win 16", "Swin-T s1 b1", "Swin-T s4 b1"}
        rows = [c for c in rows if c.name in keep]
    return rows


def make_inputs(cfg: Config, seed: int):
    """Fixed random q, k, v ``[B_, heads, N, d]`` and table ``[(2W-1)^2, heads]`` (float32)."""
    rng = np.random.default_rng([seed, zlib.crc32(cfg.key.encode())])
    shape = (cfg.num_windows, cfg.heads, cfg.n, cfg.head_dim)
    q, k, v = (rng.standard_normal(shape, dtype=np.float32) for _ in range(3))
    table = rng.standard_normal(((2 * cfg.window - 1) ** 2, cfg.heads), dtype=np.float32)
    return q, k, v, table


def mask_of(cfg: Config) -> Optional[np.ndarray]:
    """Swin's shifted-window mask ``[nW, N, N]`` (float32), or None without shift."""
    if not cfg.shift:
        return None
    res, win = (cfg.resolution,) * 2, (cfg.window,) * 2
    return ref.shift_mask(res, win, (cfg.shift,) * 2).astype(np.float32)


# --------------------------------------------------------------------------- #
# Building
# --------------------------------------------------------------------------- #
def find_cxx() -> str:
    for name in ("clang++-22", "clang++", "g++"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("bench: no C++ compiler found (tried clang++-22, clang++, g++)")


def run_checked(cmd: List[str], what: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"bench: {what} failed (exit {proc.returncode}):\n  {' '.join(map(str, cmd))}\n"
                 f"{proc.stderr.strip()}")
    return proc


def build_cpp(cxx: str, out: Path) -> dict:
    """Compile fma_peak (executable) and naive_attention (shared library); return their paths."""
    flags = ["-O3", "-march=native", "-std=c++17"]
    fma = out / "fma_peak"
    naive = out / "naive_attention.so"
    jobs = [
        ([cxx, *flags, "-pthread", BENCH_DIR / "fma_peak.cpp", "-o", fma], "building fma_peak"),
        ([cxx, *flags, "-fopenmp", "-shared", "-fPIC", BENCH_DIR / "naive_attention.cpp",
          "-o", naive], "building naive_attention"),
    ]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda job: run_checked(*job), jobs))
    return {"fma_peak": fma, "naive": naive, "cxx_flags": " ".join(flags + ["-fopenmp"])}


def aot_args(cfg: Config) -> List[str]:
    args = [f"--window={cfg.window},{cfg.window}", f"--heads={cfg.heads}",
            f"--head-dim={cfg.head_dim}"]
    if cfg.shift:
        args += [f"--resolution={cfg.resolution},{cfg.resolution}", f"--shift={cfg.shift}"]
    return args


def build_kernels(cfgs: List[Config], out: Path, bf16: bool) -> Dict[str, Dict[str, str]]:
    """Build fused (through swin_opt.compile), serial, unfused and (``bf16``) bf16 kernels."""
    aot = swin_opt.find_swin_aot()
    kdir = out / "kernels"
    kdir.mkdir(parents=True, exist_ok=True)

    def fused(cfg: Config, parallel: bool, dtype: str = "float32") -> str:
        win = (cfg.window, cfg.window)
        kw = {}
        if cfg.shift:
            kw = {"resolution": (cfg.resolution,) * 2, "shift": cfg.shift}
        kern = swin_opt.compile(win, cfg.heads, cfg.head_dim, parallel=parallel, dtype=dtype,
                                cache_dir=kdir / "cache", **kw)
        return str(kern.library)

    def unfused(cfg: Config) -> str:
        # swin_opt.compile has no switch for the unfused lowering: call swin-aot.
        lib = kdir / f"unfused-{cfg.key}.so"
        run_checked([aot, *aot_args(cfg), "--unfused", "--emit=so", "-o", lib],
                    f"swin-aot --unfused for {cfg.label}")
        return str(lib)

    jobs = {}
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        for cfg in cfgs:
            jobs[(cfg.key, "fused")] = pool.submit(fused, cfg, True)
            jobs[(cfg.key, "serial")] = pool.submit(fused, cfg, False)
            jobs[(cfg.key, "unfused")] = pool.submit(unfused, cfg)
            if bf16:
                jobs[(cfg.key, "bf16")] = pool.submit(fused, cfg, True, "bfloat16")
    libs: Dict[str, Dict[str, str]] = {}
    for (key, impl), fut in jobs.items():
        libs.setdefault(key, {})[impl] = fut.result()
    return libs


def measure_peak(exe: Path, threads: int) -> dict:
    """Run fma_peak: ``{"results": [{"isa", "threads", "gflops"}, ...], ...}``."""
    proc = run_checked([exe, "--threads", str(threads)], "fma_peak")
    return json.loads(proc.stdout)


def best_peak(a: dict, b: dict, threads: int) -> dict:
    """Merge two fma_peak runs (best per ISA and thread count) into the numbers used.

    ``peak_all``/``peak_1t``/``peak_isa``: the widest-vector (best) peak on
    ``threads``/1 threads; ``ymm_all``/``ymm_1t``: the 8-lane AVX2 peak.
    """
    best: Dict[tuple, float] = {}
    for r in a["results"] + b["results"]:
        key = (r["isa"], r["threads"])
        best[key] = max(best.get(key, 0.0), r["gflops"])
    isa = max({i for i, _ in best}, key=lambda i: best.get((i, threads), 0.0))
    ymm = "avx2" if ("avx2", threads) in best else isa
    return {"threads": threads, "peak_isa": isa, "peak_all": best[(isa, threads)],
            "peak_1t": best[(isa, 1)], "ymm_all": best[(ymm, threads)], "ymm_1t": best[(ymm, 1)],
            "results": [{"isa": i, "threads": t, "gflops": g} for (i, t), g in best.items()]}


# --------------------------------------------------------------------------- #
# Worker: times one implementation on every configuration (own process)
# --------------------------------------------------------------------------- #
def calls_per_sample(fn, min_s: float = MIN_SAMPLE_S) -> int:
    """Back-to-back calls that take at least ``min_s`` (1 for calls that long).

    Doubles the count until the group takes a quarter of ``min_s``, then
    scales it up; the calls also finish the warm-up.
    """
    calls = 1
    while True:
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        elapsed = time.perf_counter() - t
        if elapsed >= min_s:
            return calls
        if elapsed >= min_s / 4:
            return max(1, math.ceil(calls * min_s / elapsed))
        calls *= 2


def time_calls(fn, repeat: int, budget_s: float):
    """Warm up, then take up to ``repeat`` samples (at least 3 when over ``budget_s``).

    A sample is ``calls`` back-to-back calls, as many as take at least
    MIN_SAMPLE_S (one for longer calls); returns the per-call times (each
    sample's time / ``calls``) and ``calls``.
    """
    t0 = time.perf_counter()
    fn()  # warm-up: page faults, thread pool start, caches
    cold = time.perf_counter() - t0
    if cold < 0.05:
        fn()
    # A call that took 0.25 s cold is not a short call: skip the calibration.
    calls = 1 if cold >= 0.25 else calls_per_sample(fn)
    times: List[float] = []
    start = time.perf_counter()
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t) / calls)
        if len(times) >= 3 and time.perf_counter() - start > budget_s:
            break
    return times, calls


def _ptr(a: np.ndarray) -> int:
    return a.ctypes.data


def make_runner(impl: str, cfg: Config, entry: dict, inputs, out: np.ndarray):
    """A no-argument callable that runs ``impl`` once, writing ``out``."""
    q, k, v, table = inputs
    if impl in ("fused", "fused1t", "serial", "unfused", "bf16"):
        lib = ctypes.CDLL(entry["libs"]["fused" if impl == "fused1t" else impl])
        fn = lib.swin_window_attention
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int64]
        args = (_ptr(q), _ptr(k), _ptr(v), _ptr(table), _ptr(out), cfg.num_windows)

        def run():
            if fn(*args) != 0:
                raise RuntimeError(f"{impl} kernel returned an error for {cfg.label}")
        return run

    if impl == "naive":
        lib = ctypes.CDLL(entry["naive"])
        fn = lib.naive_window_attention
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p] * 6 + [ctypes.c_int64, ctypes.c_void_p] + \
            [ctypes.c_int64] * 4 + [ctypes.c_float]
        index = np.ascontiguousarray(ref.relative_index((cfg.window,) * 2), dtype=np.int64)
        mask = mask_of(cfg)
        args = (_ptr(q), _ptr(k), _ptr(v), _ptr(table), _ptr(index),
                _ptr(mask) if mask is not None else None,
                mask.shape[0] if mask is not None else 0, _ptr(out), cfg.num_windows,
                cfg.heads, cfg.n, cfg.head_dim, cfg.scale)

        def run():
            if fn(*args) != 0:
                raise RuntimeError(f"naive baseline rejected {cfg.label}")
        run.keep_alive = (index, mask)  # args only holds their addresses
        return run

    if impl == "torch":
        import torch

        tq, tk, tv, ttable = (torch.from_numpy(a) for a in (q, k, v, table))
        index = torch.from_numpy(ref.relative_index((cfg.window,) * 2))
        mask = mask_of(cfg)
        tmask = torch.from_numpy(mask) if mask is not None else None
        tout = torch.from_numpy(out)

        def run():
            with torch.inference_mode():
                tout.copy_(torch_window_attention(tq, tk, tv, ttable, index, tmask, cfg.scale))
        return run

    raise ValueError(f"unknown implementation {impl!r}")


def torch_window_attention(q, k, v, table, index, mask, scale):
    """Swin's WindowAttention.forward after the qkv split (PyTorch eager)."""
    b_, heads, n, d = q.shape
    attn = (q * scale) @ k.transpose(-2, -1)
    bias = table[index.view(-1)].view(n, n, heads).permute(2, 0, 1).contiguous()
    attn = attn + bias.unsqueeze(0)
    if mask is not None:
        nw = mask.shape[0]
        attn = attn.view(b_ // nw, nw, heads, n, n) + mask.unsqueeze(1).unsqueeze(0)
        attn = attn.view(-1, heads, n, n)
    attn = attn.softmax(dim=-1)
    return (attn @ v).transpose(1, 2).reshape(b_, n, heads * d)


def worker(impl: str, plan_path: Path) -> None:
    """Serve timing requests for one implementation (``--worker IMPL``).

    Protocol (one JSON object per line): the worker first writes
    ``{"info": {...}}``; then, for each ``{"key": CONFIG_KEY}`` read from
    stdin, it times the configuration, saves the first ``check_windows``
    output windows to an .npy file (float32; the bf16 worker's widened from
    its bf16 bits) and answers ``{"times": [...], "calls": C, "sample":
    PATH}`` (``times``: per call; C: calls per sample).  End of input ends it.
    Nothing else may go to stdout.  The bf16 worker runs on the bf16-rounded
    inputs (raw ``uint16`` bits).
    """
    plan = json.loads(plan_path.read_text())
    entries = {Config(**e["config"]).key: e for e in plan["configs"]}
    info = {}
    if impl == "torch":
        import torch

        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", plan["threads"])))
        info = {"torch": torch.__version__, "torch_threads": torch.get_num_threads(),
                "blas": _torch_blas(torch)}
    print(json.dumps({"info": info}), flush=True)
    for line in sys.stdin:
        entry = entries[json.loads(line)["key"]]
        cfg = Config(**entry["config"])
        inputs = make_inputs(cfg, plan["seed"])
        dtype = np.float32
        if impl == "bf16":
            inputs = tuple(swin_opt.float32_to_bf16_bits(a) for a in inputs)
            dtype = np.uint16
        out = np.zeros((cfg.num_windows, cfg.n, cfg.heads * cfg.head_dim), dtype=dtype)
        run = make_runner(impl, cfg, {**entry, "naive": plan["naive"]}, inputs, out)
        times, calls = time_calls(run, plan["repeat"], plan["budget_s"])
        sample = Path(plan["dir"]) / f"out-{impl}-{cfg.key}.npy"
        kept = out[: cfg.check_windows]
        np.save(sample, swin_opt.bf16_bits_to_float32(kept) if impl == "bf16" else kept)
        del inputs, out, run
        print(json.dumps({"times": times, "calls": calls, "sample": str(sample)}), flush=True)


class Workers:
    """One persistent worker process per implementation, driven one at a time.

    Every implementation lives in its own process, so the OpenMP runtimes of
    the implementations (LLVM libomp, GNU libgomp) never share one;
    the rows are still timed interleaved (all implementations of a
    configuration back to back), so a change in background load affects all
    columns of a row alike.
    """

    #: Pause after each timing so that the previous implementation's OpenMP
    #: threads stop spin-waiting (LLVM libomp spins for KMP_BLOCKTIME = 200 ms).
    SETTLE_S = 0.25

    def __init__(self, impls: List[str], plan_path: Path, threads: int, out: Path):
        self.procs: Dict[str, subprocess.Popen] = {}
        self.logs: Dict[str, Path] = {}
        self.info: Dict[str, dict] = {}
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "python"),
                                                          env.get("PYTHONPATH")]))
        for impl in impls:
            env["OMP_NUM_THREADS"] = "1" if impl == "fused1t" else str(threads)
            self.logs[impl] = out / f"worker-{impl}.log"
            with open(self.logs[impl], "w") as log:
                self.procs[impl] = subprocess.Popen(
                    [sys.executable, __file__, "--worker", impl, "--plan", str(plan_path)],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                    env=env, preexec_fn=_worker_setup)
        for impl in impls:
            self.info[impl] = self._read(impl)["info"]

    def _read(self, impl: str) -> dict:
        line = self.procs[impl].stdout.readline()
        if not line:
            code = self.procs[impl].wait()
            log = self.logs[impl].read_text().strip()
            raise RuntimeError(f"the {IMPL_TITLES[impl]} worker died (exit {code}):\n{log}")
        return json.loads(line)

    def time(self, impl: str, cfg: Config) -> dict:
        proc = self.procs[impl]
        proc.stdin.write(json.dumps({"key": cfg.key}) + "\n")
        proc.stdin.flush()
        reply = self._read(impl)
        time.sleep(self.SETTLE_S)
        return reply

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.stdin and not proc.stdin.closed:
                proc.stdin.close()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _torch_blas(torch) -> str:
    cfg = torch.__config__.show()
    for line in cfg.splitlines():
        if "BLAS_INFO=" in line:
            return line.split("BLAS_INFO=")[1].split(",")[0]
    return "unknown"


def torch_available() -> bool:
    try:
        import importlib.util

        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


# --------------------------------------------------------------------------- #
# Reporting
# --------------------------------------------------------------------------- #
def rel_error(out: np.ndarray, expected: np.ndarray) -> float:
    return float(np.max(np.abs(out.astype(np.float64) - expected)) / np.max(np.abs(expected)))


def check_outputs(cfg: Config, seed: int, samples: Dict[str, str]) -> Dict[str, float]:
    """Relative error of every implementation on the first ``check_windows`` windows.

    The bf16 kernel is compared with the reference computed (in float64) from
    the bf16-rounded inputs it was given.
    """
    cw = cfg.check_windows
    win = (cfg.window,) * 2
    mask = mask_of(cfg)

    def expected(round_bf16: bool) -> np.ndarray:
        q, k, v, table = make_inputs(cfg, seed)
        q, k, v = q[:cw], k[:cw], v[:cw]
        if round_bf16:
            q, k, v, table = (swin_opt.bf16_bits_to_float32(swin_opt.float32_to_bf16_bits(a))
                              for a in (q, k, v, table))
        return ref.window_attention(q, k, v, bias=ref.lookup(table, win), mask=mask,
                                    scale=cfg.scale)

    refs: Dict[bool, np.ndarray] = {}
    errors = {}
    for impl, path in samples.items():
        bf16 = impl == "bf16"
        if bf16 not in refs:
            refs[bf16] = expected(bf16)
        errors[impl] = rel_error(np.load(path), refs[bf16])
    return errors


def fmt_ratio(num: Optional[float], den: float) -> str:
    return f"{num / den:.2f}x" if num else "n/a"


def fmt_ms(ms: float) -> str:
    """Milliseconds: 3 decimals, 4 below 1 ms (the batch-1 rows take ~0.05 ms)."""
    return f"{ms:.3f}" if ms >= 1 else f"{ms:.4f}"


def print_table(rows: List[dict], peak: dict, impls: List[str]) -> None:
    head = ["config", "N", "windows", "heads", "shift", "fused ms", "GFLOP/s", "%peak",
            "%ymm pk", "x unfused", "x naive", "x torch", "x 1thr", "x nopar", "max rel err", "bg cpu"]
    bf16 = "bf16" in impls
    if bf16:
        head += ["bf16 ms", "bf16 GFLOP/s", "bf16 %peak", "x f32", "bf16 err"]
    table = []
    for r in rows:
        c: Config = r["config"]
        t = r["ms"]
        gflops = c.flops / (t["fused"] * 1e-3) * 1e-9
        table.append([
            c.name, str(c.n), str(c.num_windows), str(c.heads), str(c.shift) if c.shift else "-",
            fmt_ms(t["fused"]), f"{gflops:.1f}",
            f"{100 * gflops / peak['peak_all']:.1f}%",
            f"{100 * gflops / peak['ymm_all']:.1f}%",
            fmt_ratio(t.get("unfused"), t["fused"]),
            fmt_ratio(t.get("naive"), t["fused"]),
            fmt_ratio(t.get("torch"), t["fused"]),
            fmt_ratio(t.get("fused1t"), t["fused"]),
            fmt_ratio(t.get("serial"), t["fused"]),
            f"{r['errors']['fused']:.1e}",
            "?" if r["background"] is None else f"{100 * r['background']:.0f}%",
        ])
        if bf16:
            g16 = c.flops / (t["bf16"] * 1e-3) * 1e-9
            table[-1] += [fmt_ms(t["bf16"]), f"{g16:.1f}", f"{100 * g16 / peak['peak_all']:.1f}%",
                          fmt_ratio(t["fused"], t["bf16"]), f"{r['errors']['bf16']:.1e}"]
    widths = [max(len(h), *(len(row[i]) for row in table)) for i, h in enumerate(head)]
    left = {0}
    line = lambda cells: "  ".join(  # noqa: E731
        cell.ljust(w) if i in left else cell.rjust(w) for i, (cell, w) in enumerate(zip(cells, widths)))
    print(line(head))
    print(line(["-" * w for w in widths]))
    for row in table:
        print(line(row))


def print_legend(cfgs, impls, peak: dict, threads: int, cxx: str, cxx_flags: str,
                 torch_info: dict) -> None:
    lines = [
        "fused ms: median wall time of one call over all windows; GFLOP/s: 4*N^2*d per "
        "window-head / time.",
        f"%peak: of the {threads}-thread {peak['peak_isa']} FMA peak measured in this run "
        f"({peak['peak_all']:.1f} GFLOP/s; 1 thread {peak['peak_1t']:.1f}); %ymm pk: of the "
        f"8-lane avx2 FMA peak ({peak['ymm_all']:.1f}; 1 thread {peak['ymm_1t']:.1f}).",
        "x unfused / x naive / x torch: that implementation's time / the fused time "
        "(> 1: the fused kernel is faster).",
        f"x 1thr: the fused kernel with OMP_NUM_THREADS=1 / with {threads}; x nopar: its "
        "--no-parallel build / the parallel kernel.",
        "max rel err: max |fused - reference| / max |reference| (float64 NumPy reference).",
        f"calls shorter than {1e3 * MIN_SAMPLE_S:.0f} ms are timed {MIN_SAMPLE_S * 1e3:.0f} ms "
        "at a time (back-to-back calls per sample; the cell is still the median time per call).",
        "bg cpu: CPU time other processes took while the row was timed, as a share of all "
        "CPUs (more than a few %: that row is disturbed).",
        f"naive: {cxx} {cxx_flags}, OpenMP over windows x heads, {threads} threads.",
    ]
    if "bf16" in impls:
        lines.append(
            "bf16: the fused kernel compiled with dtype=bfloat16 (q, k, v, table, out as bf16), "
            f"{threads} threads, on the bf16-rounded inputs; bf16 GFLOP/s: the same FLOP count; "
            "bf16 %peak: of the same f32 FMA peak (bf16 dot-product instructions, 2 products "
            "per f32 lane, could pass 100%); x f32: fused f32 time / bf16 time (> 1: bf16 is "
            "faster); bf16 err: against the float64 reference of the bf16-rounded inputs "
            f"(tolerance {BF16_TOLERANCE:g}; f32: {TOLERANCE:g}).")
    else:
        lines.append("bf16: skipped (--no-bf16).")
    if "torch" in impls:
        lines.append(f"torch: {torch_info.get('torch')} eager, "
                     f"{torch_info.get('torch_threads')} threads, BLAS {torch_info.get('blas')}.")
    else:
        lines.append("torch: not importable (or --no-torch): x torch is n/a.")
    lines += [f"note: {n}" for n in dict.fromkeys(f"{c.name}: {c.note}" for c in cfgs if c.note)]
    if any(c.name.startswith("Swin-T s4") for c in cfgs):
        lines.append("note: Swin-T s4 has no shifted row (its 7x7 map is one window, where Swin "
                     "turns the shift off)")
    if any(c.name.endswith(" b1") for c in cfgs):
        lines.append("note: Swin-T ... b1: the same stage at batch 1 (one 224x224 image): the "
                     "latency of one call")
    print("\n".join(lines))


def plot(rows: List[dict], peak: dict, impls: List[str], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"(matplotlib not importable: no PNG written to {path})")
        return False
    labels = [f"{r['config'].label}\nN={r['config'].n}" for r in rows]
    shown = [i for i in ("fused", "bf16", "unfused", "naive", "torch", "fused1t") if i in impls]
    x = np.arange(len(rows))
    width = 0.8 / len(shown)
    fig, ax = plt.subplots(figsize=(max(10, 0.9 * len(rows)), 6))
    for j, impl in enumerate(shown):
        vals = [r["config"].flops / (r["ms"][impl] * 1e-3) * 1e-9 if r["ms"].get(impl) else 0
                for r in rows]
        ax.bar(x + (j - (len(shown) - 1) / 2) * width, vals, width, label=IMPL_TITLES[impl])
    ax.axhline(peak["peak_all"], color="k", ls="--", lw=1,
               label=f"FMA peak {peak['peak_isa']} ({peak['peak_all']:.0f})")
    ax.axhline(peak["ymm_all"], color="gray", ls=":", lw=1,
               label=f"FMA peak avx2 ({peak['ymm_all']:.0f})")
    ax.set_yscale("log")
    ax.set_ylim(bottom=1)
    ax.set_ylabel(f"GFLOP/s (4·N²·d per window-head), {peak['threads']} threads")
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_title("Swin window attention with relative position bias (f32 unless bf16); "
                 "SW = shifted windows")
    ax.legend(fontsize=8, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.13))
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------- #
# Main
# --------------------------------------------------------------------------- #
def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a subset of the rows (about a minute)")
    p.add_argument("--repeat", type=int, default=None,
                   help="timed calls per implementation and row (default 7, --quick 3)")
    p.add_argument("--threads", type=int, default=None,
                   help="threads for every implementation and the all-core peak (default: all cores)")
    p.add_argument("--json", type=Path, help="write all measurements to this file")
    p.add_argument("--png", type=Path, help="write a bar chart (needs matplotlib)")
    p.add_argument("--build-dir", type=Path,
                   help="where to build (default: a temporary directory, removed afterwards)")
    p.add_argument("--no-torch", action="store_true", help="skip the PyTorch baseline")
    p.add_argument("--no-bf16", action="store_true",
                   help="skip the bf16 build of the fused kernel (the bf16 columns)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--plan", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.repeat is not None and args.repeat < 1:
        p.error("--repeat must be at least 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker:
        worker(args.worker, args.plan)
        return 0

    # Turn SIGTERM into SystemExit so that the build directory is still removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    t_start = time.perf_counter()
    threads = args.threads or len(os.sched_getaffinity(0))
    repeat = args.repeat or (3 if args.quick else 7)
    cfgs = configurations(args.quick)
    impls = [i for i in IMPLS if (i != "torch" or (not args.no_torch and torch_available()))
             and (i != "bf16" or not args.no_bf16)]

    tmp = None
    if args.build_dir:
        out = args.build_dir.resolve()
        out.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="swin-bench-")
        out = Path(tmp.name)
    try:
        return _run(args, cfgs, impls, threads, repeat, out, t_start)
    finally:
        if tmp is not None:
            tmp.cleanup()


def _run(args, cfgs, impls, threads, repeat, out: Path, t_start: float) -> int:
    cxx = find_cxx()
    print(f"swin-opt benchmark: {len(cfgs)} configurations, {threads} threads, "
          f"median of {repeat} samples (calls under {1e3 * MIN_SAMPLE_S:.0f} ms in groups); "
          f"build dir {out}")
    probe = CpuMonitor()
    time.sleep(0.5)
    busy = probe.foreign_share()
    if busy is not None and busy > 0.1:
        print(f"WARNING: other processes are using {100 * busy:.0f}% of the CPUs: "
              "numbers will be noisy")
    monitor = CpuMonitor()
    cpp = build_cpp(cxx, out)
    libs = build_kernels(cfgs, out, "bf16" in impls)
    t_built = time.perf_counter()

    first_peak = measure_peak(cpp["fma_peak"], threads)
    print("FMA peak (f32, measured now): " + ", ".join(
        f"{r['isa']} {r['threads']} thr {r['gflops']:.1f}" for r in first_peak["results"]) +
        " GFLOP/s")

    plan = {
        "threads": threads, "repeat": repeat, "seed": args.seed, "dir": str(out),
        "budget_s": 2.0 if args.quick else 4.0, "naive": str(cpp["naive"]),
        "configs": [{"config": dataclasses.asdict(c), "libs": libs[c.key]} for c in cfgs],
    }
    plan_path = out / "plan.json"
    plan_path.write_text(json.dumps(plan))
    workers = Workers(impls, plan_path, threads, out)
    rows = []
    try:
        for i, cfg in enumerate(cfgs, start=1):
            row_monitor = CpuMonitor([p.pid for p in workers.procs.values()])
            res = {impl: workers.time(impl, cfg) for impl in impls}
            background = row_monitor.foreign_share()
            errors = check_outputs(cfg, args.seed, {impl: r["sample"] for impl, r in res.items()})
            ms = {impl: 1e3 * statistics.median(r["times"]) for impl, r in res.items()}
            print(f"  [{i:2}/{len(cfgs)}] {cfg.label:<16} " + "  ".join(
                f"{impl} {ms[impl]:.1f} ms" if ms[impl] >= 1 else f"{impl} {ms[impl]:.3f} ms"
                for impl in impls), flush=True)
            failures = [f"{cfg.label}: {IMPL_TITLES[impl]} differs from the NumPy reference "
                        f"by {err:.2e} (relative) > {tolerance(impl):g}"
                        for impl, err in errors.items() if not err <= tolerance(impl)]
            if failures:
                print("\nMISMATCH - aborting:\n  " + "\n  ".join(failures), file=sys.stderr)
                return 1
            rows.append({"config": cfg, "ms": ms, "errors": errors, "background": background,
                         "times_s": {impl: r["times"] for impl, r in res.items()},
                         "calls": {impl: r["calls"] for impl, r in res.items()}})
    finally:
        workers.close()

    # The peak is what the machine can do: measure again after the timings and
    # keep the better of the two (background load only ever lowers it).
    peak = best_peak(first_peak, measure_peak(cpp["fma_peak"], threads), threads)
    foreign = monitor.foreign_share()
    torch_info = workers.info.get("torch", {})
    print()
    print_table(rows, peak, impls)
    print()
    print_legend(cfgs, impls, peak, threads, cxx, cpp["cxx_flags"], torch_info)
    if foreign is not None:
        print(f"other processes used {100 * foreign:.1f}% of the CPU time during the run"
              + (" - WARNING: the numbers are disturbed" if foreign > 0.05 else ""))
    worst = max(e for r in rows for i, e in r["errors"].items() if i != "bf16")
    msg = f"all outputs match the NumPy float64 reference (worst relative error {worst:.1e}"
    if "bf16" in impls:
        worst16 = max(r["errors"]["bf16"] for r in rows)
        msg += f"; bf16 {worst16:.1e}, tolerance {BF16_TOLERANCE:g}"
    print(msg + ").")

    if args.png and plot(rows, peak, impls, args.png):
        print(f"wrote {args.png}")
    if args.json:
        doc = {
            "machine": {"cpu": _cpu_model(), "threads": threads, "platform": platform.platform(),
                        "foreign_cpu_share": foreign},
            "peak": peak, "compiler": cxx, "torch": torch_info, "repeat": repeat,
            "min_sample_s": MIN_SAMPLE_S,
            "tolerance": {"f32": TOLERANCE, "bf16": BF16_TOLERANCE},
            "build_seconds": round(t_built - t_start, 1),
            "rows": [json_row(r, peak) for r in rows],
        }
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {args.json}")
    print(f"total {time.perf_counter() - t_start:.0f} s")
    return 0


def json_row(r: dict, peak: dict) -> dict:
    """One row of --json: the config, every implementation's times, errors and GFLOP/s.

    ``times_s`` are per call (each sample's time / ``calls_per_sample``);
    ``bf16`` (when measured) sums up the bf16 columns of the table.
    """
    c: Config = r["config"]
    gflops = {i: c.flops / (ms * 1e-3) * 1e-9 for i, ms in r["ms"].items()}
    row = {**dataclasses.asdict(c), "n": c.n, "num_windows": c.num_windows, "flops": c.flops,
           "ms": r["ms"], "times_s": r["times_s"], "calls_per_sample": r["calls"],
           "rel_errors": r["errors"], "background_cpu_share": r["background"],
           "gflops": gflops}
    if "bf16" in r["ms"]:
        row["bf16"] = {"ms": r["ms"]["bf16"], "gflops": gflops["bf16"],
                       "pct_peak": 100 * gflops["bf16"] / peak["peak_all"],
                       "x_f32": r["ms"]["fused"] / r["ms"]["bf16"],
                       "rel_error": r["errors"]["bf16"], "tolerance": BF16_TOLERANCE}
    return row


class CpuMonitor:
    """CPU time used by *other* processes while the benchmark runs (Linux only).

    Busy time of all CPUs comes from /proc/stat; this process's own CPU time
    and that of its finished children (builds, fma_peak, the workers, all
    waited for) from getrusage, that of live workers from /proc/PID/stat.
    The difference is what other processes took.
    """

    def __init__(self, pids: Sequence[int] = ()):
        self.pids = list(pids)  # live children whose CPU time is ours too (the workers)
        self.start = self._snapshot()

    @staticmethod
    def _busy_seconds() -> Optional[float]:
        try:
            with open("/proc/stat", encoding="ascii") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        busy = sum(fields[:8]) - idle  # user..steal, without guest (counted in user)
        return busy / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _own_seconds() -> float:
        import resource

        total = 0.0
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
            ru = resource.getrusage(who)
            total += ru.ru_utime + ru.ru_stime
        return total

    def _live_seconds(self) -> float:
        total = 0.0
        for pid in self.pids:
            try:
                with open(f"/proc/{pid}/stat", encoding="ascii") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])  # utime, stime
            except (OSError, ValueError, IndexError):
                pass
        return total / os.sysconf("SC_CLK_TCK")

    def _snapshot(self):
        return (time.perf_counter(), self._busy_seconds(),
                self._own_seconds() + self._live_seconds())

    def foreign_share(self) -> Optional[float]:
        """Other processes' CPU time since the start, as a share of all CPUs' time."""
        t0, busy0, own0 = self.start
        t1, busy1, own1 = self._snapshot()
        if busy0 is None or busy1 is None or t1 <= t0:
            return None
        foreign = max(0.0, (busy1 - busy0) - (own1 - own0))
        return foreign / ((t1 - t0) * (os.cpu_count() or 1))


def _worker_setup() -> None:
    """Runs in each worker process before exec: SIGTERM it when the driver dies (Linux)."""
    try:
        ctypes.CDLL(None).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
