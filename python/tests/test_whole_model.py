"""Whole timm Swin models through swin-opt, against torch (swin_opt.whole_model).

The regression tests of whole-model compilation: a small Swin (two stages,
shifted and single-window attention, patch merging, head) and one shifted
Swin block, exported by torch-mlir at test time, compiled by today's textual
pipeline (``swin-opt --rpe-cpu-pipeline | mlir-translate-22 | clang-22``)
and by the in-process whole-module path (``swin-aot --input``);
``_mlir_ciface_forward`` must match torch within 1e-4 relative to the
output's largest magnitude.

They need torch, timm and torch-mlir (the whole-model venv,
``swin_wm_venv_ensure`` in scripts/python-env.sh): without them they skip,
unless SWIN_REQUIRE_TORCH is set (scripts/test.sh, CI), where a missing one
fails. Without swin-opt, mlir-translate-22 or clang-22 they skip unless
SWIN_REQUIRE_AOT is set. Swin-T itself (a ~218 MiB export, minutes through
today's pipeline) runs only with SWIN_WHOLE_MODEL_SLOW=1.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import _env_flag, aot_required, torch_required
from swin_opt import export_mlir, whole_model

ROOT = Path(__file__).resolve().parents[2]

# Correctness, not speed, is tested: clang's -O0 takes ~1 s on these
# modules where -O2 takes ~20 s of CPU.
OPT_LEVEL = "-O0"


def _require_module(module: str, what: str):
    try:
        return __import__(module)
    except ImportError as exc:
        message = f"{what} is not importable ({exc}); scripts/python-env.sh's swin_wm_venv_ensure installs it"
        if torch_required():
            pytest.fail(f"SWIN_REQUIRE_TORCH is set but {message}", pytrace=False)
        pytest.skip(message)


@pytest.fixture(scope="module")
def exporter():
    """torch, timm and torch-mlir, or a skip (a failure under SWIN_REQUIRE_TORCH)."""
    pytest.importorskip("torch")
    pytest.importorskip("timm")
    _require_module("torch_mlir.fx", "torch-mlir")


def _require_tool(path: str, what: str) -> str:
    found = shutil.which(path)
    if found is None:
        if aot_required():
            pytest.fail(f"SWIN_REQUIRE_AOT is set but {what} ({path}) is not found", pytrace=False)
        pytest.skip(f"{what} ({path}) not found")
    return found


@pytest.fixture(scope="module")
def swin_opt_tool() -> str:
    """swin-opt ($SWIN_OPT, else build/bin/swin-opt), with mlir-translate-22 and clang-22 present."""
    _require_tool("mlir-translate-22", "MLIR 22's mlir-translate")
    _require_tool("clang-22", "clang 22")
    return _require_tool(os.environ.get("SWIN_OPT", str(ROOT / "build/bin/swin-opt")), "swin-opt")


@pytest.fixture(scope="module")
def whole_aot() -> str:
    """A swin-aot that compiles whole modules, else a skip (a failure under
    SWIN_REQUIRE_AOT)."""
    try:
        import swin_opt

        path = str(swin_opt.find_swin_aot())
    except Exception as exc:  # SwinAotNotFoundError; the name moves between modules
        if aot_required():
            pytest.fail(f"SWIN_REQUIRE_AOT is set but {exc}", pytrace=False)
        pytest.skip(str(exc))
    if not whole_model.aot_accepts_input(path):
        if aot_required():
            pytest.fail(f"SWIN_REQUIRE_AOT is set but {path} has no --input (whole modules)", pytrace=False)
        pytest.skip(f"{path} has no --input (whole modules)")
    return path


@pytest.fixture(scope="module")
def exports(exporter, tmp_path_factory):
    """The small cases, exported once for the module: {name: Export}."""
    out = tmp_path_factory.mktemp("whole-model")
    return {name: whole_model.export_case(name, batch, out) for name, batch in (("swin_mini", 1), ("swin_block", 1))}


SMALL_CASES = ["swin_mini", "swin_block"]


@pytest.mark.parametrize("name", SMALL_CASES)
def test_export_writes_module_inputs_and_torch_output(exports, name):
    made = exports[name]
    text = made.mlir.read_text()
    assert "attributes {llvm.emit_c_interface}" in text
    inputs, result = made.arrays()
    assert len(inputs) == 1
    shape = "x".join(map(str, inputs[0].shape))
    assert f"func.func @forward(%arg0: tensor<{shape}xf32>)" in text
    assert np.all(np.isfinite(result)) and np.max(np.abs(result)) > 0.1
    meta = json.loads(made.mlir.with_suffix(".json").read_text())
    assert meta["mlir_bytes"] == made.mlir.stat().st_size and meta["export_seconds"] > 0


def test_export_is_reused_only_when_made_the_same_way(exports):
    made = exports["swin_block"]
    again = whole_model.ensure_export("swin_block", 1, made.mlir.parent)
    assert again.mlir == made.mlir and again.meta == made.meta
    meta = dict(made.meta, seed=made.meta["seed"] + 1)
    made.mlir.with_suffix(".json").write_text(json.dumps(meta))
    try:
        redone = whole_model.ensure_export("swin_block", 1, made.mlir.parent)
        assert redone.meta["seed"] == whole_model.SEED
        assert json.loads(made.mlir.with_suffix(".json").read_text())["seed"] == whole_model.SEED
    finally:
        made.mlir.with_suffix(".json").write_text(json.dumps(made.meta))


def _check_against_torch(made, library):
    inputs, want = made.arrays()
    got = export_mlir.ForwardLibrary(library)(inputs, want.shape)
    error = whole_model.relative_error(got, want)
    assert error <= whole_model.TOLERANCE, f"{made.mlir.name}: relative error {error:.2e}"


@pytest.mark.parametrize("name", SMALL_CASES)
def test_today_pipeline_matches_torch(exports, swin_opt_tool, tmp_path, name):
    library, _ = whole_model.compile_today(exports[name].mlir, swin_opt_tool, tmp_path, OPT_LEVEL)
    _check_against_torch(exports[name], library)


@pytest.mark.parametrize("name", SMALL_CASES)
def test_whole_module_aot_matches_torch(exports, whole_aot, tmp_path, name):
    library, _ = whole_model.compile_aot(exports[name].mlir, whole_aot, tmp_path)
    _check_against_torch(exports[name], library)


@pytest.mark.parametrize("batch", [1, 8])
def test_row_passes_keep_the_numbers(exports, swin_opt_tool, tmp_path, batch):
    """A shifted Swin block through rpe-cpu-pipeline with its row passes
    (``vectorize=true``, the default: LayerNorms, residual adds, rolls and
    window partitions row by row in vectors, at batch 8 in threads) and
    without them: both match torch and each other, and only the first
    computes its rows' sums as vector reductions."""
    made = whole_model.ensure_export("swin_block", batch, exports["swin_block"].mlir.parent)
    inputs, want = made.arrays()
    got = {}
    reductions = {}
    for vectorize in ("true", "false"):
        work = tmp_path / f"vectorize-{vectorize}"
        work.mkdir()
        library = export_mlir.compile_module(made.mlir, swin_opt_tool, work,
                                             pipeline=f"rpe-cpu-pipeline=vectorize={vectorize}", opt_level=OPT_LEVEL)
        got[vectorize] = export_mlir.ForwardLibrary(library)(inputs, want.shape)
        reductions[vectorize] = (work / f"{made.mlir.stem}.ll").read_text().count("@llvm.vector.reduce.fadd")
    for vectorize, result in got.items():
        error = whole_model.relative_error(result, want)
        assert error <= whole_model.TOLERANCE, f"vectorize={vectorize}: relative error {error:.2e}"
    assert whole_model.relative_error(got["true"], got["false"]) <= whole_model.TOLERANCE
    assert reductions["true"] > reductions["false"]


def test_whole_module_aot_plain_entry_point(exports, whole_aot, tmp_path):
    """The plain C entry point, called as its JSON description says: torch's
    numbers in the caller's buffer, and 1 (nothing written) for NULL."""
    import ctypes

    made = exports["swin_block"]
    library, _ = whole_model.compile_aot(made.mlir, whole_aot, tmp_path)
    description = json.loads(Path(f"{library}.json").read_text())
    assert description["format"] == "swin-opt-module-abi"
    (forward,) = description["functions"]
    inputs, want = made.arrays()
    assert forward["function"] == "forward" and forward["c_interface"] == "_mlir_ciface_forward"
    assert [(a["role"], a["dtype"], tuple(a["shape"])) for a in forward["arguments"]] == [
        ("input", "f32", inputs[0].shape), ("result", "f32", want.shape)]
    entry = getattr(ctypes.CDLL(str(library)), forward["entry_point"])
    entry.restype = ctypes.c_int
    x = np.ascontiguousarray(inputs[0], dtype=np.float32)
    got = np.full(want.shape, np.nan, dtype=np.float32)
    x_ptr, got_ptr = (a.ctypes.data_as(ctypes.c_void_p) for a in (x, got))
    assert entry(x_ptr, None) == 1
    assert np.all(np.isnan(got))
    assert entry(x_ptr, got_ptr) == 0
    error = whole_model.relative_error(got, want)
    assert error <= whole_model.TOLERANCE, f"relative error {error:.2e}"


def test_today_library_is_cached_per_module_and_level(exports, swin_opt_tool, tmp_path):
    mlir = exports["swin_block"].mlir
    first, seconds = whole_model.compile_today(mlir, swin_opt_tool, tmp_path, OPT_LEVEL)
    assert seconds is not None
    again, seconds = whole_model.compile_today(mlir, swin_opt_tool, tmp_path, OPT_LEVEL)
    assert again == first and seconds is None
    # Only the library stays: the intermediate files went with their temporary directory.
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.name]


def test_benchmark_runs_end_to_end(exports, swin_opt_tool, tmp_path):
    """bench/whole_model.py on the small Swin (torch eager against today's
    pipeline, one round): its table, its JSON, and the cached export reused."""
    made = exports["swin_mini"]
    out = tmp_path / "bench.json"
    env = dict(os.environ, SWIN_OPT=swin_opt_tool, PYTHONPATH=str(ROOT / "python"))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench/whole_model.py"), "--model", "swin_mini", "--batch", "1",
         "--rounds", "1", "--paths", "eager,today", f"--today-opt-level={OPT_LEVEL}",
         "--work-dir", str(made.mlir.parent), "--json", str(out)],
        env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "swin-opt today" in proc.stdout and "torch eager" in proc.stdout
    report = json.loads(out.read_text())
    assert report["batches"] == [1]
    today = report["paths"]["today"]["1"]
    assert today["relative_error"] <= whole_model.TOLERANCE and today["best_ms"] > 0
    # The export the fixture made was reused, not made again.
    assert report["exports"]["1"]["export_seconds"] == made.meta["export_seconds"]


def test_benchmark_separate_processes_and_the_swapped_model(exports, aot_path, tmp_path):
    """``--separate``: each path in a child process, one merged table and JSON; the
    ``swapped`` path (swap_attention's model) checked against torch like the others."""
    made = exports["swin_mini"]
    out = tmp_path / "bench.json"
    env = dict(os.environ, SWIN_AOT=str(aot_path), PYTHONPATH=str(ROOT / "python"),
               SWIN_OPT_CACHE_DIR=str(tmp_path / "kernels"))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench/whole_model.py"), "--model", "swin_mini", "--batch", "1",
         "--rounds", "1", "--paths", "eager,swapped", "--separate",
         "--work-dir", str(made.mlir.parent), "--json", str(out)],
        env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("in a process of its own") >= 3, proc.stdout  # 2 children, the table
    report = json.loads(out.read_text())
    assert report["separate"] and set(report["paths"]) == {"eager", "swapped"}
    swapped = report["paths"]["swapped"]["1"]
    assert swapped["relative_error"] <= whole_model.TOLERANCE and swapped["best_ms"] > 0


def _bench_module():
    spec = importlib.util.spec_from_file_location("whole_model_bench", ROOT / "bench/whole_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_fails_loudly_on_a_wrong_path(exports, monkeypatch, capsys):
    """A path 1e-3 (relative) off torch eager: not timed, WRONG in the table,
    named on stderr, exit status 1."""
    import torch

    bench = _bench_module()

    class OffByOnePerMille(bench.Eager):
        def prepare(self, batch):
            super().prepare(batch)
            right = self.calls[batch]
            self.calls[batch] = lambda: right() * np.float32(1.001)
            return 0.0

    monkeypatch.setitem(bench.RUNNERS, "today", OffByOnePerMille)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # main sets it; restored afterwards
    threads = torch.get_num_threads()
    try:
        status = bench.main(["--model", "swin_block", "--batch", "1", "--rounds", "1", "--paths", "eager,today",
                             "--work-dir", str(exports["swin_block"].mlir.parent)])
    finally:
        torch.set_num_threads(threads)
    out, err = capsys.readouterr()
    assert status == 1
    assert "FAILED: swin-opt today at batch 1: relative error 1.00e-03 > 0.0001" in err
    today = next(line for line in out.splitlines() if line.startswith("swin-opt today"))
    assert "WRONG" in today


def test_profile_table_sums_per_kind_and_lists_costliest_ops(tmp_path):
    profile = {"format": whole_model.PROFILE_FORMAT, "function": "forward", "calls": 2, "ops": [
        {"id": 0, "name": "linalg.matmul", "loc": "m.mlir:10:5", "count": 2, "ns": 6_000_000},
        {"id": 1, "name": "linalg.generic", "loc": "m.mlir:11:5", "count": 2, "ns": 1_000_000},
        {"id": 2, "name": "linalg.matmul", "loc": "m.mlir:12:5", "count": 2, "ns": 3_000_000},
    ]}
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(profile))
    table = whole_model.profile_table(whole_model.load_profile(path), top=2).splitlines()
    assert "5.00 ms a call in 3 ops" in table[0]
    kinds = [line.split() for line in table[2:4]]
    assert kinds == [["linalg.matmul", "2", "4.500", "90.0%"], ["linalg.generic", "1", "0.500", "10.0%"]]
    costliest = [line.split() for line in table[5:]]
    assert [row[1] for row in costliest] == ["0", "2"] and costliest[0][-1] == "m.mlir:10:5"


def test_profile_of_another_format_is_refused(tmp_path):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"format": "perf", "ops": []}))
    with pytest.raises(ValueError, match="not a swin-opt-profile/1 profile"):
        whole_model.load_profile(path)


def test_relative_error_is_relative_to_the_largest_output():
    want = np.array([[10.0, -2.0], [0.5, 0.0]], dtype=np.float32)
    got = want + np.array([[0.0, 1e-3], [0.0, 0.0]], dtype=np.float32)
    assert whole_model.relative_error(got, want) == pytest.approx(1e-4, rel=1e-3)
    assert whole_model.relative_error(np.full_like(want, np.nan), want) == float("inf")
    with pytest.raises(ValueError, match="shape"):
        whole_model.relative_error(want[0], want)


@pytest.mark.skipif(not _env_flag("SWIN_WHOLE_MODEL_SLOW"),
                    reason="Swin-T through today's pipeline takes minutes and ~3.5 GB: SWIN_WHOLE_MODEL_SLOW=1")
def test_swin_t_matches_torch(exporter, tmp_path_factory):
    """Swin-T at batch 1: through swin-aot's whole-module path where it exists,
    else today's pipeline (~5 min, clang -O1)."""
    out = Path(os.environ.get("SWIN_WHOLE_MODEL_DIR", str(tmp_path_factory.mktemp("swin-t"))))
    made = whole_model.ensure_export("swin_t", 1, out)
    try:
        import swin_opt

        aot = str(swin_opt.find_swin_aot())
    except Exception:
        aot = None
    if aot and whole_model.aot_accepts_input(aot):
        library, _ = whole_model.compile_aot(made.mlir, aot, out)
    else:
        tool = os.environ.get("SWIN_OPT", str(ROOT / "build/bin/swin-opt"))
        library, _ = whole_model.compile_today(made.mlir, _require_tool(tool, "swin-opt"), out, "-O1")
    _check_against_torch(made, library)
