"""Command line: ``python -m swin_opt {compile,verify,bench,cache} ...``.

Examples::

    python -m swin_opt compile --window=7,7 --heads=3 --head-dim=32 \\
        --resolution=56,56 --shift=3 -o /tmp/attn.so
    python -m swin_opt compile --window=7,7 --heads=3 --head-dim=32 --dtype=f16 \\
        --target=nvptx --emit=ptx --chip=sm_90 -o /tmp/gpu/
    python -m swin_opt verify --window=7,7 --heads=3 --head-dim=32 --dtype=f16
    python -m swin_opt bench --window=7,7 --heads=3 --head-dim=32 --batch=8
    python -m swin_opt cache list
    python -m swin_opt cache prune --older-than=30 --max-size=2G
    python -m swin_opt cache clear

Usage errors (a bad option value, an unreadable --table) exit with status 2
like argparse's own; a configuration swin-aot rejects, a failed build or a
failed check exits with 1.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, List, Optional

import numpy as np

from . import build, cache, testing
from .cache import Artifacts
from .config import EMITS, describe
from .dtypes import DTYPE_ALIASES
from .errors import CompileError, SwinAotNotFoundError
from .geometry import PADDING_ALIASES
from .kernel import Kernel


def _ints(text: str) -> List[int]:
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _shift(text: str):
    vals = _ints(text)
    return vals[0] if len(vals) == 1 else vals


def _at_least(low: int) -> Callable[[str], int]:
    """An int option that must be >= ``low`` (NumPy fails obscurely on 0 or -1)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    parse.__name__ = f"integer >= {low}"
    return parse


def _readable_file(text: str) -> Path:
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"no such file: {text!r}")
    return path


def _spellings(names) -> List[str]:
    """Every accepted spelling: the names and their dashed forms."""
    return sorted(set(names) | {n.replace("_", "-") for n in names})


# The documented names are shown; every alias compile() accepts is allowed.
_DTYPES = sorted(DTYPE_ALIASES)
_PADDINGS = _spellings(PADDING_ALIASES)
_TARGETS = sorted(EMITS)
_EMITS = sorted({e for emits in EMITS.values() for e in emits})


def _config_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("kernel configuration")
    g.add_argument("--window", type=_ints, required=True, help="Wh,Ww or Wd,Wh,Ww")
    g.add_argument("--heads", type=_at_least(1), required=True)
    g.add_argument("--head-dim", type=_at_least(1), required=True)
    g.add_argument("--scale", type=float, help="q scale (default head_dim**-0.5)")
    g.add_argument("--resolution", type=_ints, help="feature map H,W (D,H,W) for shifted blocks")
    g.add_argument("--shift", type=_shift, help="S or SH,SW (needs --resolution)")
    g.add_argument("--padding", choices=_PADDINGS, metavar="{pad_then_shift,shift_then_pad}",
                   help="pad_then_shift (hf/torchvision) or shift_then_pad (timm); "
                        "aliases: hf, torchvision, timm, ...")
    g.add_argument("--layout", default="windows", choices=["windows", "tokens"])
    g.add_argument("--partition", default="block", choices=["block", "grid"],
                   help="token layout: Swin's windows (block) or MaxViT's grid")
    g.add_argument("--dtype", default="f32", choices=_DTYPES, metavar="{f32,f16,bf16}",
                   help="also float32, float16, bfloat16, fp16, half, ...")
    g.add_argument("--target", default="cpu", choices=_TARGETS)
    g.add_argument("--chip", help="GPU architecture for --target=nvptx (default sm_90)")
    g.add_argument("--kernel", choices=["tiles", "warps", "rows"],
                   help="swin-aot --kernel (default: the target's)")
    g.add_argument("--name", help="C symbol name")
    g.add_argument("--table", type=_readable_file,
                   help="bias table to bake in: .npy, or raw little-endian float32 [T, heads]")
    return p


def _load_table(args) -> Optional[np.ndarray]:
    if args.table is None:
        return None
    if args.table.suffix == ".npy":
        return np.load(args.table)
    raw = np.fromfile(args.table, dtype="<f4")
    if raw.size % args.heads:
        raise ValueError(f"{raw.size} floats is not a multiple of heads={args.heads}")
    return raw.reshape(-1, args.heads)


def _compile(args, emit: Optional[str] = None):
    return build.compile(
        args.window, args.heads, args.head_dim, scale=args.scale, resolution=args.resolution,
        shift=args.shift, padding=args.padding, layout=args.layout,
        partition=args.partition, dtype=args.dtype,
        target=args.target, table=args.table_data, name=args.name, chip=args.chip,
        kernel=args.kernel, emit=emit)


def _count(kernel: Kernel, batch: int) -> int:
    """Windows (window layout) or images (token layout) for ``batch`` images/windows."""
    nw = kernel.config.windows_per_image
    if kernel.config.layout == "tokens" or nw is None:
        return batch
    return batch * nw


def _cpu_kernel(args) -> Kernel:
    if args.target != "cpu":
        raise ValueError(f"{args.command} runs kernels on this machine's CPU (--target=cpu); "
                         "GPU kernels are checked by python/tests/test_gpu.py")
    return _compile(args)


def _destinations(art: Artifacts, output: str) -> List[Path]:
    """Where each of ``art.files`` goes: into directory ``output`` (an existing one, or
    a path ending in a separator) as ``<name>.<ext>``, else beside file ``output``."""
    if output.endswith(os.sep) or Path(output).is_dir():
        main = Path(output) / (art.config.name + art.main.suffix)
    else:
        main = Path(output)
    stem = main.with_suffix("")
    names = {art.main: main}
    for f in (art.header, art.runtime, art.abi):
        if f is not None:
            names[f] = Path(f"{main}{f.suffix}")  # swin-aot's naming: <main>.h, ...
    if art.library is not None and art.library != art.main:
        names[art.library] = stem.parent / f"lib{stem.name}.so"  # the GPU runtime, built
    return [names[f] for f in art.files]


def cmd_compile(args) -> int:
    result = _compile(args, args.emit)
    art = result if isinstance(result, Artifacts) else result.artifacts
    if args.output is None:
        print(art.main)
        return 0
    targets = _destinations(art, args.output)
    targets[0].parent.mkdir(parents=True, exist_ok=True)
    for src, dst in zip(art.files, targets):
        shutil.copyfile(src, dst)
    print(f"wrote {', '.join(map(str, targets))} ({describe(art.config)})")
    return 0


def cmd_verify(args) -> int:
    kernel = _cpu_kernel(args)
    n = _count(kernel, args.batch)
    check = testing.check_against_reference(kernel, n, seed=args.seed)
    status = "PASS" if check.passed else "FAIL"
    print(f"{describe(kernel.config)} n={n}")
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
    kernel = _cpu_kernel(args)
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
    print(f"{describe(cfg)} n={n}")
    print(f"kernel:    median {k_med * 1e3:9.3f} ms  min {min(kt) * 1e3:9.3f} ms  "
          f"{flops / k_med / 1e9:8.2f} GFLOP/s")
    print(f"reference: median {r_med * 1e3:9.3f} ms  (NumPy float64)  speedup {r_med / k_med:.1f}x")
    return 0


def _size(text: str) -> int:
    """A size in bytes: ``123``, ``500K``, ``20M``, ``1.5G`` (powers of 1024; a
    trailing ``B``/``iB`` is accepted)."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    scale = 1
    if t and t[-1] in "KMGT":
        scale = 1024 ** ("KMGT".index(t[-1]) + 1)
        t = t[:-1]
    try:
        value = float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a size such as 500M or 2G, got {text!r}") \
            from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"size must not be negative, got {text!r}")
    return int(value * scale)


def _human(n: float) -> str:
    for unit in ("B", "K", "M", "G"):
        if n < 1024 or unit == "G":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return f"{n:.1f}G"  # pragma: no cover


def _age(seconds: float) -> str:
    days = seconds / 86400
    if days >= 1:
        return f"{days:.1f}d"
    return f"{seconds / 3600:.1f}h" if seconds >= 3600 else f"{seconds / 60:.0f}m"


def cmd_cache(args) -> int:
    root = Path(args.dir) if args.dir else cache.get_cache_dir()
    action = "clear" if args.clear else args.action
    if action != "prune" and (args.older_than is not None or args.max_size is not None):
        raise _UsageError("--older-than / --max-size go with `cache prune`")
    if action == "clear":
        print(f"removed {cache.clear_cache(root)} kernels from {root}")
    elif action == "list":
        entries = cache.cache_entries(root)
        now = time.time()
        for e in entries:
            print(f"{_human(e.size):>8}  {_age(now - e.last_used):>6} ago  {e.key}  "
                  f"{e.description}")
        print(f"{len(entries)} kernels, {_human(sum(e.size for e in entries))} in {root}")
    elif action == "prune":
        if args.older_than is None and args.max_size is None:
            raise _UsageError("cache prune needs --older-than DAYS and/or --max-size SIZE")
        removed = cache.prune_cache(root, older_than_days=args.older_than,
                                       max_size=args.max_size, dry_run=args.dry_run)
        verb = "would remove" if args.dry_run else "removed"
        for e in removed:
            print(f"{verb} {e.key} ({_human(e.size)}): {e.description}")
        left = cache.cache_entries(root) if not args.dry_run else \
            [e for e in cache.cache_entries(root) if e not in removed]
        print(f"{verb} {len(removed)} kernels ({_human(sum(e.size for e in removed))}); "
              f"{len(left)} left ({_human(sum(e.size for e in left))}) in {root}")
    else:
        print(root)
    return 0


class _UsageError(Exception):
    """A bad combination of options (exit status 2, like argparse's own errors)."""


def _days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of days, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m swin_opt", description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    config = _config_parser()

    p = sub.add_parser("compile", parents=[config], help="build a kernel (cached)")
    p.add_argument("--emit", choices=_EMITS,
                   help="so, obj, llvm, mlir (cpu; default so); ptx, cubin, fatbin, mlir "
                        "(nvptx; default ptx)")
    p.add_argument("-o", "--output", metavar="DIR_OR_FILE",
                   help="copy the outputs (kernel, <kernel>.h, and for nvptx the runtime "
                        "<kernel>.c, lib<stem>.so; the ABI <kernel>.json) into this directory "
                        "or beside this file; default: print the cached kernel's path")
    p.set_defaults(func=cmd_compile)

    for name, func, help_ in (("verify", cmd_verify, "compare a kernel against the reference"),
                              ("bench", cmd_bench, "time a kernel against the reference")):
        p = sub.add_parser(name, parents=[config], help=help_)
        p.add_argument("--batch", type=_at_least(1), default=2,
                       help="images (with --resolution) or windows (default 2)")
        p.add_argument("--seed", type=int, default=0)
        if name == "bench":
            p.add_argument("--repeat", type=_at_least(1), default=20)
            p.add_argument("--warmup", type=_at_least(0), default=3)
        p.set_defaults(func=func)

    p = sub.add_parser("cache", help="the kernel cache: print its directory, list, prune, clear",
                       description="dir (default): print the cache directory; list: every "
                                   "kernel with its size, last use and configuration; prune: "
                                   "remove kernels unused for --older-than DAYS, then the "
                                   "least recently used until at most --max-size remains; "
                                   "clear: remove every kernel")
    p.add_argument("action", nargs="?", default="dir", choices=["dir", "list", "prune", "clear"])
    p.add_argument("--clear", action="store_true", help="same as `cache clear`")
    p.add_argument("--older-than", type=_days, metavar="DAYS",
                   help="prune: remove kernels not used for DAYS days")
    p.add_argument("--max-size", type=_size, metavar="SIZE",
                   help="prune: keep at most SIZE (e.g. 500M, 2G) of the most recently used")
    p.add_argument("--dry-run", action="store_true", help="prune: only say what would go")
    p.add_argument("--dir", help="the cache directory (default: $SWIN_OPT_CACHE_DIR, "
                                 "else $XDG_CACHE_HOME/swin_opt, else ~/.cache/swin_opt)")
    p.set_defaults(func=cmd_cache)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if hasattr(args, "table"):
        try:
            args.table_data = _load_table(args)
        except (OSError, ValueError) as exc:  # an unreadable or malformed file is a usage error
            parser.error(f"argument --table: cannot read {args.table}: {exc}")
    try:
        return args.func(args)
    except _UsageError as exc:
        parser.error(str(exc))
    except (ValueError, TypeError, NotImplementedError, CompileError,
            SwinAotNotFoundError) as exc:
        print(f"swin_opt: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
