"""The main job's demo (``scripts/demo.sh`` runs ``python/examples/swin_block.py``):
it checks the kernel against the reference and prints timings that can be
trusted. NumPy's BLAS threads and the kernels' OpenMP team must not spin
against each other while the kernel is timed: the demo runs NumPy on one
BLAS thread (unless the caller chose a count), says how many threads each
side had, and gives the minimum and the median of its repeats. (The figures
themselves are not tested: this machine's load decides them.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "python" / "examples" / "swin_block.py"

pytestmark = pytest.mark.aot


def _demo(aot_path, kernel_cache, **env):
    environ = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    environ.update(SWIN_AOT=str(aot_path), SWIN_OPT_CACHE_DIR=str(kernel_cache),
                   PYTHONPATH=str(ROOT / "python"), OMP_NUM_THREADS="2", **env)
    proc = subprocess.run([sys.executable, str(DEMO), "--resolution=14", "--heads=2",
                           "--head-dim=16", "--batch=1", "--repeat=3"],
                          env=environ, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_demo_reports_min_median_and_threads(aot_path, kernel_cache):
    out = _demo(aot_path, kernel_cache)
    assert out.rstrip().endswith("OK"), out
    assert re.search(r"^threads: kernels 2 \(OpenMP\), NumPy BLAS 1\b", out, re.M), out
    timed = re.findall(r"min [0-9.]+ ms, median [0-9.]+ ms", out)
    assert len(timed) == 6, out  # kernel, block and reference, for both blocks


def test_demo_keeps_a_blas_thread_count_the_caller_chose(aot_path, kernel_cache):
    out = _demo(aot_path, kernel_cache, OPENBLAS_NUM_THREADS="2")
    assert re.search(r"^threads: kernels 2 \(OpenMP\), NumPy BLAS 2\b", out, re.M), out
