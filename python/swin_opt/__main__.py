"""Command line: ``python -m swin_opt {compile,verify,bench,cache} ...``.

Examples::

    python -m swin_opt compile --window=7,7 --heads=3 --head-dim=32 \\
        --resolution=56,56 --shift=3 -o /tmp/attn.so
    python -m swin_opt verify --window=7,7 --heads=3 --head-dim=32 --dtype=f16
    python -m swin_opt bench --window=7,7 --heads=3 --head-dim=32 --batch=8
    python -m swin_opt cache --clear
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, List, Optional

import numpy as np

from . import compiler, testing


def _ints(text: str) -> List[int]:
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _shift(text: str):
    vals = _ints(text)
    return vals[0] if len(vals) == 1 else vals


def _config_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("kernel configuration")
    g.add_argument("--window", type=_ints, required=True, help="Wh,Ww or Wd,Wh,Ww")
    g.add_argument("--heads", type=int, required=True)
    g.add_argument("--head-dim", type=int, required=True)
    g.add_argument("--scale", type=float, help="q scale (default head_dim**-0.5)")
    g.add_argument("--resolution", type=_ints, help="feature map H,W (D,H,W) for shifted blocks")
    g.add_argument("--shift", type=_shift, help="S or SH,SW (needs --resolution)")
    g.add_argument("--padding", help="pad_then_shift (hf/torchvision) or shift_then_pad (timm)")
    g.add_argument("--layout", default="windows", choices=["windows", "tokens"])
    g.add_argument("--dtype", default="f32", help="f32, f16 or bf16")
    g.add_argument("--target", default="cpu")
    g.add_argument("--name", help="C symbol name")
    g.add_argument("--table", type=Path,
                   help="bias table to bake in: .npy, or raw little-endian float32 [T, heads]")
    return p


def _load_table(args) -> Optional[np.ndarray]:
    if args.table is None:
        return None
    if args.table.suffix == ".npy":
        return np.load(args.table)
    raw = np.fromfile(args.table, dtype="<f4")
    if raw.size % args.heads:
        raise ValueError(f"{args.table}: {raw.size} floats is not a multiple of heads={args.heads}")
    return raw.reshape(-1, args.heads)


def _compile(args) -> compiler.Kernel:
    return compiler.compile(
        args.window, args.heads, args.head_dim, scale=args.scale, resolution=args.resolution,
        shift=args.shift, padding=args.padding, layout=args.layout, dtype=args.dtype,
        target=args.target, table=_load_table(args), name=args.name)


def _count(kernel: compiler.Kernel, batch: int) -> int:
    """Windows (window layout) or images (token layout) for ``batch`` images/windows."""
    nw = kernel.config.windows_per_image
    if kernel.config.layout == "tokens" or nw is None:
        return batch
    return batch * nw


def cmd_compile(args) -> int:
    if args.emit != "so":
        # Other artefacts are not cached: run swin-aot directly.
        cfg = compiler.make_config(
            args.window, args.heads, args.head_dim, scale=args.scale, resolution=args.resolution,
            shift=args.shift, padding=args.padding, layout=args.layout, dtype=args.dtype,
            target=args.target, name=args.name)
        if args.output is None:
            raise ValueError(f"--emit={args.emit} needs -o")
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [str(compiler.find_swin_aot()), *cfg.aot_args()]
            table = _load_table(args)
            if table is not None:
                path = Path(tmp) / "table.f32"
                np.ascontiguousarray(table, dtype="<f4").tofile(path)
                cmd.append(f"--table={path}")
            cmd += [f"--emit={args.emit}", "-o", str(args.output)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            raise compiler.CompileError(f"swin-aot failed: {proc.stderr.strip()}")
        print(args.output)
        return 0
    kernel = _compile(args)
    if args.output is None:
        print(kernel.library)
        return 0
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(kernel.library, out)
    shutil.copyfile(kernel.header, out.with_suffix(".h"))
    print(f"wrote {out} and {out.with_suffix('.h')} ({compiler.describe(kernel.config)})")
    return 0


def cmd_verify(args) -> int:
    kernel = _compile(args)
    n = _count(kernel, args.batch)
    check = testing.check_against_reference(kernel, n, seed=args.seed)
    status = "PASS" if check.passed else "FAIL"
    print(f"{compiler.describe(kernel.config)} n={n}")
    print(f"max abs error {check.error:.3e} (allowed {check.allowed:.3e}, "
          f"max|ref| {np.abs(check.expected).max():.3g}): {status}")
    return 0 if status == "PASS" else 1


def _time(fn: Callable[[], object], repeat: int, warmup: int) -> List[float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def cmd_bench(args) -> int:
    kernel = _compile(args)
    cfg = kernel.config
    n = _count(kernel, args.batch)
    inp = testing.random_inputs(kernel, n, seed=args.seed)
    out = np.empty(kernel.output_shape(n), dtype=cfg.storage_dtype)
    kt = _time(lambda: kernel(*inp.args(), pad_qkv=inp.pad_qkv, out=out), args.repeat, args.warmup)
    rt = _time(lambda: testing.reference_output(cfg, inp.q, inp.k, inp.v, inp.table64, inp.pad_qkv),
               max(1, min(args.repeat, 3)), 0)
    windows = n if cfg.layout == "windows" else n * cfg.windows_per_image
    flops = 4.0 * windows * cfg.heads * cfg.tokens_per_window ** 2 * cfg.head_dim
    k_med, r_med = statistics.median(kt), statistics.median(rt)
    print(f"{compiler.describe(cfg)} n={n}")
    print(f"kernel:    median {k_med * 1e3:9.3f} ms  min {min(kt) * 1e3:9.3f} ms  "
          f"{flops / k_med / 1e9:8.2f} GFLOP/s")
    print(f"reference: median {r_med * 1e3:9.3f} ms  (NumPy float64)  speedup {r_med / k_med:.1f}x")
    return 0


def cmd_cache(args) -> int:
    if args.clear:
        print(f"removed {compiler.clear_cache()} kernels from {compiler.get_cache_dir()}")
    else:
        print(compiler.get_cache_dir())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m swin_opt", description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    config = _config_parser()

    p = sub.add_parser("compile", parents=[config], help="build a kernel (cached)")
    p.add_argument("--emit", default="so", choices=["so", "obj", "llvm", "mlir"])
    p.add_argument("-o", "--output", help="copy the .so (and .h) here; default: print cache path")
    p.set_defaults(func=cmd_compile)

    for name, func, help_ in (("verify", cmd_verify, "compare a kernel against the reference"),
                              ("bench", cmd_bench, "time a kernel against the reference")):
        p = sub.add_parser(name, parents=[config], help=help_)
        p.add_argument("--batch", type=int, default=2,
                       help="images (with --resolution) or windows (default 2)")
        p.add_argument("--seed", type=int, default=0)
        if name == "bench":
            p.add_argument("--repeat", type=int, default=20)
            p.add_argument("--warmup", type=int, default=3)
        p.set_defaults(func=func)

    p = sub.add_parser("cache", help="print the cache directory or clear it")
    p.add_argument("--clear", action="store_true")
    p.set_defaults(func=cmd_cache)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, NotImplementedError, compiler.CompileError,
            compiler.SwinAotNotFoundError) as exc:
        print(f"swin_opt: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
