"""Whole timm Swin models exported to MLIR, compiled by swin-opt and run.

Where :mod:`swin_opt.export_mlir` exports the attention that ``swin-opt``
raises, this module exports whole models as an MLIR user would: timm's
``swin_tiny_patch4_window7_224`` (Swin-T, 28 M weights, a ~218 MiB module)
at a given batch size, and two small modules for fast tests, each with
fixed-seed random weights (never downloaded) whose norms, biases and
relative position tables are redrawn so that a wrong gather or epilogue
shows:

* ``swin_t``: Swin-T, input ``[B, 3, 224, 224]``, 1000 classes.
* ``swin_mini``: timm's ``SwinTransformer`` with embed dim 24, depths (2, 2),
  heads (2, 4), window 7, on 56x56 images (``[B, 3, 56, 56]``, 10 classes):
  stage 1 has shifted and unshifted 7x7 windows on a 14x14 map, stage 2 is
  Swin-T's stage-4 form (the map is one window, no shift; at batch 1 the
  importer writes its bias add with identity maps). Two heads at least: a
  single head is imported in a form ``swin-opt`` does not raise.
* ``swin_block``: one shifted ``SwinTransformerBlock`` (dim 32, 2 heads,
  window 7, shift 3) on a 14x14 map (``[B, 14, 14, 32]``).

Each export is written as ``<case>_b<batch>.mlir`` with ``.npz`` (``arg0``,
``result``: torch's output) and ``.json`` (what made it: the seed, the
versions, the export time and size) beside it; :func:`ensure_export` reuses a
previous export made the same way.

A module compiles two ways: :func:`compile_today`, the textual pipeline
``swin-opt --rpe-cpu-pipeline | mlir-translate-22 --mlir-to-llvmir | clang-22
-shared`` (minutes for Swin-T), and :func:`compile_aot`, ``swin-aot
--input=<module> --emit=so`` where that ``swin-aot`` has ``--input``
(:func:`aot_accepts_input`). Both libraries export ``_mlir_ciface_forward``,
called through :class:`swin_opt.export_mlir.ForwardLibrary`.

Command line (torch-mlir installed: ``swin_wm_venv_ensure`` in
``scripts/python-env.sh``)::

    python -m swin_opt.whole_model -o build/whole-model swin_t --batch 1 8
    python -m swin_opt.whole_model -o /tmp/wm swin_mini swin_block --check
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from swin_opt import export_mlir

#: Largest |compiled - torch| allowed, relative to the largest |torch output|,
#: for f32 paths.
TOLERANCE = 1e-4

#: Seed of every case's weights and input.
SEED = 0

#: Bumped when a case or the export changes what it writes, so that
#: :func:`ensure_export` does not reuse an older file.
EXPORT_FORMAT = 2


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max |want| (NaN anywhere in ``got``: infinity)."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        raise ValueError(f"shape {got.shape} is not the reference's {want.shape}")
    if not np.all(np.isfinite(got)):
        return float("inf")
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), np.finfo(np.float32).tiny))


#===----------------------------------------------------------------------===#
# The models
#===----------------------------------------------------------------------===#


def redraw_weights(model) -> None:
    """Redraws what timm initializes to constants or near zero, in place.

    LayerNorm's weight 1 and bias 0, zero Linear biases and a table drawn
    with std 0.02 would let a compiled module that drops one of them (or
    gathers the wrong table entry) pass a comparison with torch.
    """
    import torch

    with torch.no_grad():
        for sub in model.modules():
            if isinstance(sub, torch.nn.LayerNorm) and sub.elementwise_affine:
                sub.weight.normal_(1.0, 0.2)
                sub.bias.normal_(0.0, 0.2)
            elif isinstance(sub, (torch.nn.Linear, torch.nn.Conv2d)) and sub.bias is not None:
                sub.bias.normal_(0.0, 0.1)
            if hasattr(sub, "relative_position_bias_table"):
                sub.relative_position_bias_table.normal_(0.0, 1.0)


@dataclasses.dataclass(frozen=True)
class Case:
    """A model to export: how to build it and its input's shape per batch."""

    name: str
    description: str
    build: Callable[[], object]
    input_shape: Callable[[int], Tuple[int, ...]]


def _swin_t():
    import timm

    # pretrained=False: random weights, nothing is downloaded.
    return timm.create_model("swin_tiny_patch4_window7_224", pretrained=False)


def _swin_mini():
    from timm.models.swin_transformer import SwinTransformer

    return SwinTransformer(img_size=56, patch_size=4, embed_dim=24, depths=(2, 2), num_heads=(2, 4),
                           window_size=7, num_classes=10)


def _swin_block():
    from timm.models.swin_transformer import SwinTransformerBlock

    return SwinTransformerBlock(dim=32, input_resolution=(14, 14), num_heads=2, window_size=7, shift_size=3)


CASES: Dict[str, Case] = {
    case.name: case
    for case in (
        Case("swin_t", "timm swin_tiny_patch4_window7_224, 224x224", _swin_t, lambda b: (b, 3, 224, 224)),
        Case("swin_mini", "timm SwinTransformer embed 24, depths (2, 2), heads (2, 4), 56x56", _swin_mini,
             lambda b: (b, 3, 56, 56)),
        Case("swin_block", "timm SwinTransformerBlock dim 32, 2 heads, window 7, shift 3, 14x14", _swin_block,
             lambda b: (b, 14, 14, 32)),
    )
}


def build_model(name: str):
    """The case's model: eval mode, seeded random weights (the same every call)."""
    import torch

    torch.manual_seed(SEED)
    model = CASES[name].build().eval()
    redraw_weights(model)
    return model


def make_input(name: str, batch: int):
    """The case's seeded random input at ``batch``."""
    import torch

    return torch.randn(*CASES[name].input_shape(batch), generator=torch.Generator().manual_seed(SEED + batch))


#===----------------------------------------------------------------------===#
# Exporting
#===----------------------------------------------------------------------===#


def _versions() -> Dict[str, str]:
    import importlib.metadata as metadata

    out = {}
    for package in ("torch", "timm", "torch-mlir"):
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            out[package] = "absent"
    return out


@dataclasses.dataclass
class Export:
    """An exported case: ``mlir`` with ``npz`` (arg0, result) and ``meta`` beside it."""

    mlir: Path
    meta: Dict

    @property
    def npz(self) -> Path:
        return self.mlir.with_suffix(".npz")

    def arrays(self) -> Tuple[List[np.ndarray], np.ndarray]:
        saved = np.load(self.npz)
        return [saved[f"arg{i}"] for i in range(len(saved.files) - 1)], saved["result"]


def _identity(name: str, batch: int) -> Dict:
    return {"case": name, "batch": batch, "seed": SEED, "format": EXPORT_FORMAT, "versions": _versions()}


def export_case(name: str, batch: int, out_dir: Path) -> Export:
    """Exports the case at ``batch`` into ``out_dir`` (always anew), timing it."""
    import torch

    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{name}_b{batch}"
    start = time.perf_counter()
    model, x = build_model(name), make_input(name, batch)
    with torch.no_grad():
        result = model(x)
    text = export_mlir.export(model, [x])
    seconds = time.perf_counter() - start
    mlir = out_dir / f"{stem}.mlir"
    mlir.write_text(text)
    np.savez(mlir.with_suffix(".npz"), arg0=x.numpy(), result=result.numpy())
    meta = dict(_identity(name, batch), export_seconds=round(seconds, 2), mlir_bytes=mlir.stat().st_size)
    mlir.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n")
    return Export(mlir, meta)


def ensure_export(name: str, batch: int, out_dir: Path) -> Export:
    """The export of ``name`` at ``batch`` in ``out_dir``: reused when it was made
    the same way (case, seed, format, torch/timm/torch-mlir versions)."""
    mlir = out_dir / f"{name}_b{batch}.mlir"
    try:
        meta = json.loads(mlir.with_suffix(".json").read_text())
        if ({k: meta.get(k) for k in _identity(name, batch)} == _identity(name, batch)
                and mlir.is_file() and mlir.with_suffix(".npz").is_file()):
            return Export(mlir, meta)
    except (OSError, ValueError):
        pass
    return export_case(name, batch, out_dir)


#===----------------------------------------------------------------------===#
# Compiling
#===----------------------------------------------------------------------===#


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _tool_digest(tool: str) -> str:
    path = shutil.which(tool) or tool
    return _file_digest(Path(path))


def compile_today(mlir: Path, swin_opt: str, out_dir: Path, opt_level: str = "-O3",
                  translate: str = "mlir-translate-22", clang: str = "clang-22") -> Tuple[Path, Optional[float]]:
    """Today's textual path, cached: ``(library, seconds)``, seconds None when the
    library was already there (same module, swin-opt, tools and level).

    The intermediate files (for Swin-T a ~2 GB LLVM-dialect module and a 740
    MB ``.ll``) are deleted once the library is written.
    """
    key = hashlib.sha256("\0".join([_file_digest(mlir), _tool_digest(swin_opt), _tool_digest(translate),
                                    _tool_digest(clang), opt_level]).encode()).hexdigest()[:16]
    library = out_dir / f"{mlir.stem}.today{opt_level}.{key}.so"
    if library.is_file():
        return library, None
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        built = export_mlir.compile_module(mlir, swin_opt, Path(tmp), translate=translate, clang=clang,
                                           opt_level=opt_level)
        os.replace(built, library)
    return library, time.perf_counter() - start


def aot_accepts_input(swin_aot: str) -> bool:
    """Whether ``swin_aot`` compiles whole modules (its ``--help`` lists ``--input``)."""
    try:
        help_text = subprocess.run([swin_aot, "--help"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return any(line.strip().startswith("--input") for line in help_text.splitlines())


def compile_aot(mlir: Path, swin_aot: str, out_dir: Path, extra: Sequence[str] = ()) -> Tuple[Path, float]:
    """``swin-aot --input=<mlir> --emit=so -o <library>``: ``(library, seconds)``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    options = "." + hashlib.sha256("\0".join(extra).encode()).hexdigest()[:8] if extra else ""
    library = out_dir / f"{mlir.stem}.aot{options}.so"
    start = time.perf_counter()
    subprocess.run([swin_aot, f"--input={mlir}", "--emit=so", "-o", str(library), *extra], check=True)
    return library, time.perf_counter() - start


#===----------------------------------------------------------------------===#
# Per-op profiles
#===----------------------------------------------------------------------===#

#: The per-op profile a compiled module writes (see bench/README.md, "Per-op
#: profile"): ``{"format": PROFILE_FORMAT, "function": "forward", "calls": C,
#: "ops": [{"id": i, "name": "linalg.matmul", "loc": "file:line:col",
#: "count": n, "ns": t}, ...]}``, ``ns`` the time summed over the op's
#: ``count`` executions in the ``calls`` calls.
PROFILE_FORMAT = "swin-opt-profile/1"


def load_profile(path: Path) -> Dict:
    """Reads and checks a per-op profile."""
    data = json.loads(Path(path).read_text())
    if data.get("format") != PROFILE_FORMAT:
        raise ValueError(f"{path}: not a {PROFILE_FORMAT} profile (format {data.get('format')!r})")
    for op in data.get("ops", ()):
        missing = {"id", "name", "ns", "count"} - op.keys()
        if missing:
            raise ValueError(f"{path}: op {op} lacks {sorted(missing)}")
    return data


def profile_table(profile: Dict, top: int = 15) -> str:
    """The profile as text: time per op kind, then the ``top`` costliest ops.

    Times are per call of the function (``ns / calls``), in ms, with their
    share of the total.
    """
    calls = max(int(profile.get("calls", 1)), 1)
    ops = profile.get("ops", [])
    total = sum(op["ns"] for op in ops) or 1
    by_kind: Dict[str, List[int]] = {}
    for op in ops:
        entry = by_kind.setdefault(op["name"], [0, 0, 0])
        entry[0] += op["ns"]
        entry[1] += 1
        entry[2] += op["count"]
    lines = [f"per-op profile of @{profile.get('function', 'forward')} "
             f"({total / calls / 1e6:.2f} ms a call in {len(ops)} ops, {calls} call(s))",
             f"{'op kind':<32} {'ops':>5} {'ms/call':>10} {'share':>7}"]
    for name, (ns, count, _) in sorted(by_kind.items(), key=lambda kv: -kv[1][0]):
        lines.append(f"{name:<32} {count:>5} {ns / calls / 1e6:>10.3f} {100 * ns / total:>6.1f}%")
    lines.append(f"{'costliest ops':<32} {'id':>5} {'ms/call':>10} {'share':>7}  location")
    for op in sorted(ops, key=lambda o: -o["ns"])[:top]:
        lines.append(f"{op['name']:<32} {op['id']:>5} {op['ns'] / calls / 1e6:>10.3f} "
                     f"{100 * op['ns'] / total:>6.1f}%  {op.get('loc', '')}")
    return "\n".join(lines)


#===----------------------------------------------------------------------===#
# Command line
#===----------------------------------------------------------------------===#


def _check(export: Export, library: Path) -> float:
    inputs, want = export.arrays()
    got = export_mlir.ForwardLibrary(library)(inputs, want.shape)
    return relative_error(got, want)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m swin_opt.whole_model",
                                     description="Export whole timm Swin models to linalg-on-tensors MLIR.")
    parser.add_argument("cases", nargs="+", choices=sorted(CASES), help="what to export")
    parser.add_argument("-o", "--output", type=Path, required=True, help="directory of the exports")
    parser.add_argument("--batch", type=int, nargs="+", default=[1], help="batch sizes (default 1)")
    parser.add_argument("--reuse", action="store_true", help="keep an export made the same way")
    parser.add_argument("--check", action="store_true",
                        help="compile each with today's swin-opt pipeline and compare with torch")
    parser.add_argument("--swin-opt", default=os.environ.get("SWIN_OPT", "swin-opt"))
    parser.add_argument("--opt-level", default="-O1", help="clang's level for --check (default -O1)")
    args = parser.parse_args(argv)

    status = 0
    for name in args.cases:
        for batch in args.batch:
            made = (ensure_export if args.reuse else export_case)(name, batch, args.output)
            print(f"{made.mlir}: {made.meta['mlir_bytes'] / 2**20:.1f} MiB, "
                  f"exported in {made.meta['export_seconds']:.1f} s")
            if args.check:
                library, seconds = compile_today(made.mlir, args.swin_opt, args.output, args.opt_level)
                error = _check(made, library)
                verdict = "PASS" if error <= TOLERANCE else "FAIL"
                status |= verdict == "FAIL"
                took = f"compiled in {seconds:.1f} s" if seconds is not None else "compiled before"
                print(f"{verdict} {made.mlir.name}: {took}, relative error {error:.2e}")
    return status


if __name__ == "__main__":
    sys.exit(main())
