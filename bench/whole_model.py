#!/usr/bin/env python3
"""Whole-model benchmark: timm Swin-T exported by torch-mlir, every compiler.

One command, one table::

    python bench/whole_model.py [--quick] [--today] [--json out.json]

Swin-T (timm ``swin_tiny_patch4_window7_224``, seeded random weights,
224x224, f32) at batch 1 and 8 on ``--threads`` threads (default 2), through

* ``eager``: PyTorch eager (``torch.inference_mode``, ``torch.set_num_threads``),
* ``compile``: ``torch.compile(model, dynamic=False)`` (compile time: the
  first call at each batch),
* ``swapped`` and ``swapped-compile``: the same after
  ``swin_opt.torch.swap_attention`` (attention, MLPs and patch-merging layers on
  swin-opt's kernels), eager and compiled: what a PyTorch user runs (compile
  time: the first call, which builds the kernels, or loads them from the
  kernel cache),
* ``iree``: IREE: ``iree-compile`` of the torch-mlir export (llvm-cpu, host
  CPU, data tiling), run with ``iree.runtime`` on ``local-task`` with
  ``--task_topology_max_group_count=T``,
* ``openvino``: OpenVINO: ``convert_model`` of the torch module, compiled for
  ``CPU`` with ``INFERENCE_NUM_THREADS=T`` and f32 inference precision,
* ``today`` (only with ``--today``: minutes and ~3.5 GB for Swin-T): the
  export through ``swin-opt --rpe-cpu-pipeline | mlir-translate-22
  --mlir-to-llvmir | clang-22 -O3 -shared``, the library cached in
  ``--work-dir`` per module, tools and level (its compile time then reads
  ``cached``),
* ``aot``: ``swin-aot --input=<export> --emit=so``, the in-process
  whole-module path, where ``swin-aot --help`` lists ``--input`` (else n/a).

Both swin-opt libraries are called through their ``_mlir_ciface_forward``.
All paths run in this one process and are timed alternately: every round
times one call of each path at each batch, with a pause between calls (so
that the previous runtime's threads stop spinning); a path's time is its
best round (the median is in ``--json``). With ``--separate`` each path runs
in a process of its own instead (the same rounds, alternating within the
path; the x-eager column then compares processes): no runtime's idle thread
pool shares the cores with another's, as when one compiler's output is
deployed. A path whose calls at a batch have
taken ``--cell-seconds`` stops there (after one call at least). Every path's
output is compared with torch eager's before it is timed: more than 1e-4
relative to the largest output is a failure, reported loudly; the run then
exits 1.

The per-op profile of swin-opt's module: where ``swin-aot --help`` lists
``--profile``, the run builds a profiling library of the export at batch 1,
calls it once and prints its profile; ``--print-profile FILE`` prints one
made elsewhere (the ``swin-opt-profile/1`` JSON of ``swin_opt.whole_model``;
see bench/README.md, "Whole models").

Exports (``--work-dir``, default build/whole-model) are reused while made
the same way; torch-mlir, IREE and OpenVINO come from the whole-model venv
(``swin_wm_bench_venv_ensure`` in scripts/python-env.sh).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path.insert(0, str(REPO / "python"))

from swin_opt import export_mlir, whole_model  # noqa: E402  (needs the path above)

PATHS = ("eager", "compile", "swapped", "swapped-compile", "iree", "openvino", "today", "aot")
TITLES = {
    "eager": "torch eager",
    "compile": "torch.compile",
    "swapped": "torch, swapped",
    "swapped-compile": "torch.compile, swapped",
    "iree": "IREE (llvm-cpu)",
    "openvino": "OpenVINO (CPU)",
    "today": "swin-opt today",
    "aot": "swin-aot whole module",
}
#: Pause after each timed call, longer than the OpenMP runtimes' spin-wait
#: (libgomp's GOMP_SPINCOUNT, libomp's KMP_BLOCKTIME: 200 ms; IREE and
#: OpenVINO have their own pools).
PAUSE_S = 0.25

IREE_FLAGS = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
              "--iree-llvmcpu-target-cpu=host", "--iree-opt-data-tiling=true"]


class Unavailable(Exception):
    """A path that cannot run here (not installed, not built yet): its cells read n/a."""


def _tool(name: str, env: str, default: Path) -> str:
    value = os.environ.get(env)
    if value:
        return value
    return str(default) if default.is_file() else (shutil.which(name) or name)


# --------------------------------------------------------------------------- #
# The paths: prepare(batch) compiles (returns seconds or None), call(batch) runs
# --------------------------------------------------------------------------- #
class Runner:
    def __init__(self, args, model, inputs: Dict[int, "object"], exports: Dict[int, whole_model.Export]):
        self.args = args
        self.model = model
        self.inputs = inputs                     # batch -> torch tensor
        self.arrays = {b: x.numpy() for b, x in inputs.items()}
        self.exports = exports                   # batch -> Export
        self.calls: Dict[int, Callable[[], np.ndarray]] = {}

    def prepare(self, batch: int) -> Optional[float]:
        raise NotImplementedError

    def __call__(self, batch: int) -> np.ndarray:
        return self.calls[batch]()


class Eager(Runner):
    def module(self):
        return self.model

    def prepare(self, batch):
        import torch

        model = self.module()

        def call():
            with torch.inference_mode():
                return model(self.inputs[batch]).numpy()

        self.calls[batch] = call
        return None


class Compiled(Eager):
    def prepare(self, batch):
        import torch

        if not hasattr(self, "compiled"):
            self.compiled = torch.compile(self.module(), dynamic=False)

        def call():
            with torch.inference_mode():
                return self.compiled(self.inputs[batch]).numpy()

        start = time.perf_counter()
        call()  # compiles for this shape
        self.calls[batch] = call
        return time.perf_counter() - start


def swapped_copy(model):
    """A copy of ``model`` after :func:`swin_opt.torch.swap_attention` (attention,
    MLPs and dense layers on swin-opt's kernels), its kernels built."""
    import copy

    from swin_opt import torch as swapping

    if shutil.which(os.environ.get("SWIN_AOT", "swin-aot")) is None:
        raise Unavailable(f"swin-aot not found ({os.environ.get('SWIN_AOT', 'swin-aot')})")
    swapped = copy.deepcopy(model)
    swapping.swap_attention(swapped)
    return swapped


class Swapped(Eager):
    """What a PyTorch user runs: the model swapped (kernel builds: its compile time)."""

    def module(self):
        if not hasattr(self, "swapped"):
            self.swapped = swapped_copy(self.model)
        return self.swapped

    def prepare(self, batch):
        super().prepare(batch)
        start = time.perf_counter()
        self.calls[batch]()  # builds the kernels of this batch's shapes
        return time.perf_counter() - start


class SwappedCompiled(Compiled):
    module = Swapped.module


class Iree(Runner):
    def prepare(self, batch):
        try:
            import iree.runtime as rt
        except ImportError as exc:
            raise Unavailable(f"iree.runtime not importable ({exc})")
        compiler = Path(sys.executable).parent / "iree-compile"
        if not compiler.is_file():
            compiler = shutil.which("iree-compile")
            if compiler is None:
                raise Unavailable("iree-compile not found")
        if not getattr(Iree, "flags_set", False):
            # Before the first device exists: its task executor's worker count.
            rt.flags.parse_flags(f"--task_topology_max_group_count={self.args.threads}")
            Iree.flags_set = True
        mlir = self.exports[batch].mlir
        vmfb = mlir.with_suffix(".vmfb")
        start = time.perf_counter()
        subprocess.run([str(compiler), *IREE_FLAGS, str(mlir), "-o", str(vmfb)], check=True)
        seconds = time.perf_counter() - start
        module = rt.load_vm_flatbuffer_file(str(vmfb), driver="local-task")
        x = self.arrays[batch]
        self.calls[batch] = lambda: module.forward(x).to_host()
        return seconds


class OpenVino(Runner):
    def prepare(self, batch):
        try:
            import openvino as ov
        except ImportError as exc:
            raise Unavailable(f"openvino not importable ({exc})")
        start = time.perf_counter()
        converted = ov.convert_model(self.model, example_input=self.inputs[batch])
        compiled = ov.Core().compile_model(converted, "CPU", {
            "INFERENCE_NUM_THREADS": self.args.threads, "INFERENCE_PRECISION_HINT": "f32",
            "PERFORMANCE_HINT": "LATENCY"})
        seconds = time.perf_counter() - start
        request = compiled.create_infer_request()
        output = compiled.output(0)
        x = self.arrays[batch]
        self.calls[batch] = lambda: request.infer([x])[output]
        return seconds


class SwinOpt(Runner):
    """A library exporting ``_mlir_ciface_forward``: today's pipeline or swin-aot's."""

    def build(self, mlir: Path):
        raise NotImplementedError

    def prepare(self, batch):
        library, seconds = self.build(self.exports[batch].mlir)
        forward = export_mlir.ForwardLibrary(library)
        x = self.arrays[batch]
        shape = self.exports[batch].arrays()[1].shape
        self.calls[batch] = lambda: forward([x], shape)
        return seconds


class Today(SwinOpt):
    def build(self, mlir):
        swin_opt = self.args.swin_opt
        if shutil.which(swin_opt) is None:
            raise Unavailable(f"swin-opt not found ({swin_opt})")
        return whole_model.compile_today(mlir, swin_opt, self.args.work_dir, self.args.today_opt_level)


class Aot(SwinOpt):
    def build(self, mlir):
        swin_aot = self.args.swin_aot
        if shutil.which(swin_aot) is None:
            raise Unavailable(f"swin-aot not found ({swin_aot})")
        if not whole_model.aot_accepts_input(swin_aot):
            raise Unavailable("swin-aot has no --input (whole modules) yet")
        return whole_model.compile_aot(mlir, swin_aot, self.args.work_dir)


RUNNERS = {"eager": Eager, "compile": Compiled, "swapped": Swapped, "swapped-compile": SwappedCompiled,
           "iree": Iree, "openvino": OpenVino, "today": Today, "aot": Aot}


# --------------------------------------------------------------------------- #
# Per-op profile
# --------------------------------------------------------------------------- #
def profile_with_aot(args, export: whole_model.Export) -> Optional[Dict]:
    """Builds a ``swin-aot --profile`` library of ``export``, calls it once and
    returns its profile; None when that swin-aot cannot profile."""
    swin_aot = args.swin_aot
    if shutil.which(swin_aot) is None or not whole_model.aot_accepts_input(swin_aot):
        return None
    help_text = subprocess.run([swin_aot, "--help"], capture_output=True, text=True).stdout
    if not any(line.strip().startswith("--profile") for line in help_text.splitlines()):
        return None
    library, _ = whole_model.compile_aot(export.mlir, swin_aot, args.work_dir, extra=["--profile"])
    forward = export_mlir.ForwardLibrary(library)
    inputs, want = export.arrays()
    forward(inputs, want.shape)  # warm-up, then one profiled call
    lib = ctypes.CDLL(str(library.resolve()))
    lib.swin_profile_reset()
    forward(inputs, want.shape)
    out = library.with_suffix(".profile.json")
    if lib.swin_profile_write(str(out).encode()) != 0:
        raise RuntimeError(f"{library}: swin_profile_write({out}) failed")
    return whole_model.load_profile(out)


# --------------------------------------------------------------------------- #
# Measuring
# --------------------------------------------------------------------------- #
def machine() -> Dict:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)),
            "loadavg": list(os.getloadavg()), "python": platform.python_version()}


def versions() -> Dict[str, str]:
    import importlib.metadata as metadata

    out = {}
    for package in ("torch", "timm", "torch-mlir", "iree-base-compiler", "iree-base-runtime", "openvino", "numpy"):
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            out[package] = "absent"
    return out


def measure(args) -> Dict:
    import torch

    torch.set_num_threads(args.threads)
    batches = args.batch
    model = whole_model.build_model(args.model)
    inputs = {b: whole_model.make_input(args.model, b) for b in batches}
    report: Dict = {"model": args.model, "description": whole_model.CASES[args.model].description,
                    "threads": args.threads, "batches": batches, "rounds": args.rounds,
                    "cell_seconds": args.cell_seconds, "tolerance": whole_model.TOLERANCE,
                    "machine_before": machine(), "versions": versions(), "exports": {}, "paths": {}}

    exports = {}
    for b in batches if {"iree", "today", "aot"} & set(args.paths) else ():
        made = whole_model.ensure_export(args.model, b, args.work_dir)
        if not np.array_equal(made.arrays()[0][0], inputs[b].numpy()):
            raise SystemExit(f"error: {made.mlir}'s saved input is not this run's input")
        exports[b] = made
        report["exports"][str(b)] = made.meta
        print(f"export {made.mlir.name}: {made.meta['mlir_bytes'] / 2**20:.1f} MiB "
              f"(exported in {made.meta['export_seconds']:.1f} s)", flush=True)

    with torch.inference_mode():
        reference = {b: model(inputs[b]).numpy() for b in batches}

    runners: Dict[str, Runner] = {}
    cells: Dict[str, Dict[int, Dict]] = {}
    failed: List[str] = []
    for key in args.paths:
        runner = RUNNERS[key](args, model, inputs, exports)
        cells[key] = {}
        for b in batches:
            cell: Dict = {"status": "ok", "samples_ms": []}
            cells[key][b] = cell
            try:
                seconds = runner.prepare(b)
                cell["compile_seconds"] = seconds
                out = runner(b)  # warm-up and the output checked
            except Unavailable as why:
                cell.update(status="n/a", reason=str(why))
                print(f"{TITLES[key]} b{b}: n/a: {why}", flush=True)
                continue
            except Exception as exc:  # a compiler that fails is reported, not fatal to the others
                cell.update(status="error", reason=f"{type(exc).__name__}: {exc}")
                failed.append(f"{TITLES[key]} at batch {b} failed: {type(exc).__name__}: {exc}")
                print(f"FAIL {failed[-1]}", file=sys.stderr, flush=True)
                continue
            error = whole_model.relative_error(out, reference[b])
            cell["relative_error"] = error
            if error > whole_model.TOLERANCE:
                cell["status"] = "wrong"
                failed.append(f"{TITLES[key]} at batch {b}: relative error {error:.2e} > {whole_model.TOLERANCE:g}")
                print(f"FAIL {failed[-1]}", file=sys.stderr, flush=True)
                continue
            compiled = "-" if seconds is None else f"{seconds:.1f} s"
            print(f"{TITLES[key]} b{b}: ready (compile {compiled}, relative error {error:.1e})", flush=True)
        runners[key] = runner

    # Alternating rounds: every path at every batch once a round.
    for round_ in range(args.rounds):
        for b in batches:
            for key in args.paths:
                cell = cells[key][b]
                if cell["status"] != "ok":
                    continue
                if cell["samples_ms"] and sum(cell["samples_ms"]) / 1e3 >= args.cell_seconds:
                    continue
                start = time.perf_counter()
                runners[key](b)
                cell["samples_ms"].append((time.perf_counter() - start) * 1e3)
                time.sleep(PAUSE_S)
        print(f"round {round_ + 1}/{args.rounds} done", flush=True)

    for key in args.paths:
        for b in batches:
            cell = cells[key][b]
            if cell["samples_ms"]:
                cell["best_ms"] = min(cell["samples_ms"])
                cell["median_ms"] = statistics.median(cell["samples_ms"])
    report["paths"] = {key: {str(b): cell for b, cell in per.items()} for key, per in cells.items()}
    report["failures"] = failed
    report["machine_after"] = machine()
    return report


def measure_separately(args, argv: Optional[List[str]]) -> Dict:
    """:func:`measure` of each path in a child process of this script (its own
    ``--paths``), merged into one report. A runtime's idle threads then never
    share the cores with another's (IREE's, OpenVINO's and libgomp's pools all
    wait for work by spinning for a while), as a deployment that runs one
    compiler's output meets it; the rounds alternate within a path only."""
    forwarded, skip = [], False
    for arg in sys.argv[1:] if argv is None else argv:  # all but --paths/--json/--separate
        if skip:
            skip = False
        elif arg in ("--paths", "--json"):
            skip = True
        elif arg != "--separate" and not arg.startswith(("--paths=", "--json=")):
            forwarded.append(arg)
    merged: Dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for key in args.paths:
            out = Path(tmp) / f"{key}.json"
            print(f"--- {TITLES[key]}, in a process of its own", flush=True)
            subprocess.run([sys.executable, __file__, *forwarded, "--paths", key, "--only-paths",
                            "--json", str(out)], check=False)
            if not out.exists():
                raise SystemExit(f"error: the process of {TITLES[key]} wrote no report")
            child = json.loads(out.read_text())
            if not merged:
                merged = dict(child, paths={}, failures=[])
            merged["paths"].update(child["paths"])
            merged["failures"] += child["failures"]
            merged["machine_after"] = child["machine_after"]
    merged["separate"] = True
    return merged


# --------------------------------------------------------------------------- #
# Printing
# --------------------------------------------------------------------------- #
def table(report: Dict) -> str:
    batches = report["batches"]
    eager = report["paths"].get("eager", {})
    head = f"{'path':<22} {'compile s':>14}"
    for b in batches:
        head += f" {'batch ' + str(b) + ' ms':>12} {'x eager':>8}"
    head += f" {'rel. error':>10}"
    lines = [head, "-" * len(head)]
    notes = []
    for key, per in report["paths"].items():
        compile_cells, row, errors = [], "", []
        for b in batches:
            cell = per[str(b)]
            seconds = cell.get("compile_seconds")
            if cell["status"] == "ok":
                compile_cells.append("-" if seconds is None and key == "eager" else
                                     "cached" if seconds is None else f"{seconds:.1f}")
            if "best_ms" in cell:
                base = eager.get(str(b), {}).get("best_ms")
                speedup = f"{base / cell['best_ms']:.2f}" if base else "-"
                row += f" {cell['best_ms']:>12.1f} {speedup:>8}"
            else:
                row += f" {cell['status'].upper() if cell['status'] != 'n/a' else 'n/a':>12} {'':>8}"
                note = f"{TITLES[key]}: {cell.get('reason')}"
                if cell.get("reason") and note not in notes:
                    notes.append(note)
            if "relative_error" in cell:
                errors.append(cell["relative_error"])
        compile_text = ("n/a" if not compile_cells else "-" if set(compile_cells) == {"-"}
                        else "/".join(compile_cells))
        error_text = f"{max(errors):.1e}" if errors else "-"
        lines.append(f"{TITLES[key]:<22} {compile_text:>14}{row} {error_text:>10}")
    m = report["machine_before"]
    how = ("rounds, each path in a process of its own" if report.get("separate") else
           "alternating rounds")
    title = (f"{report['description']}, f32, {report['threads']} threads, best of up to {report['rounds']} "
             f"{how}; {m['cpu']}, load average {m['loadavg'][0]:.1f} before, "
             f"{report['machine_after']['loadavg'][0]:.1f} after")
    out = [title, ""] + lines
    if len(batches) > 1:
        out.append("(compile s: one value per batch, in the order of the batch columns)")
    out += [f"n/a: {note}" for note in notes]
    if max(m["loadavg"][0], report["machine_after"]["loadavg"][0]) > 0.5 * m["usable_cores"]:
        out.append("warning: the machine was loaded: these times are not a measurement")
    return "\n".join(out)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(whole_model.CASES), default="swin_t")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8], help="batch sizes (default 1 8)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=None, help="timing rounds (default 7, --quick 2)")
    parser.add_argument("--cell-seconds", type=float, default=None,
                        help="stop timing a path at a batch once its calls took this long (default 60, --quick 10)")
    parser.add_argument("--quick", action="store_true", help="2 rounds, 10 s a cell: proves the run works")
    parser.add_argument("--paths", default=None,
                        help=f"comma-separated, of {','.join(PATHS)} (default all but today)")
    parser.add_argument("--today", action="store_true",
                        help="also today's textual swin-opt pipeline (Swin-T: minutes and ~3.5 GB, then cached)")
    parser.add_argument("--today-opt-level", default="-O3", help="clang's level for today's path")
    parser.add_argument("--work-dir", type=Path, default=REPO / "build" / "whole-model",
                        help="exports, compiled modules (default build/whole-model)")
    parser.add_argument("--swin-opt", default=_tool("swin-opt", "SWIN_OPT", REPO / "build/bin/swin-opt"))
    parser.add_argument("--swin-aot", default=_tool("swin-aot", "SWIN_AOT", REPO / "build/bin/swin-aot"))
    parser.add_argument("--print-profile", type=Path, metavar="FILE",
                        help="only print this per-op profile (swin-opt-profile/1 JSON) and exit")
    parser.add_argument("--json", type=Path, help="write everything measured here")
    parser.add_argument("--separate", action="store_true",
                        help="each path in a process of its own (see the module docstring)")
    parser.add_argument("--only-paths", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.print_profile:
        print(whole_model.profile_table(whole_model.load_profile(args.print_profile)))
        return 0
    args.rounds = args.rounds or (2 if args.quick else 7)
    args.cell_seconds = args.cell_seconds or (10.0 if args.quick else 60.0)
    if args.paths is None:
        args.paths = [p for p in PATHS if p != "today" or args.today]
    else:
        args.paths = [p.strip() for p in args.paths.split(",") if p.strip()]
        unknown = sorted(set(args.paths) - set(PATHS))
        if unknown:
            parser.error(f"unknown paths {unknown}; choose from {','.join(PATHS)}")
    if "eager" not in args.paths and not args.only_paths:
        args.paths.insert(0, "eager")  # the reference of the x eager column

    # Before any OpenMP runtime starts (libgomp: torch's and the libraries').
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ.setdefault("SWIN_AOT", args.swin_aot)  # the swapped paths' kernels
    report = measure_separately(args, argv) if args.separate else measure(args)

    profile = None
    if 1 in args.batch and "aot" in args.paths and not args.only_paths:
        profile = profile_with_aot(args, whole_model.ensure_export(args.model, 1, args.work_dir))
    report["profile"] = profile

    print()
    print(table(report))
    if profile:
        print()
        print(whole_model.profile_table(profile))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    if report["failures"]:
        print("\nFAILED: " + "\nFAILED: ".join(report["failures"]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
