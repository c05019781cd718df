"""The benchmarks' own code, where a run would be the first to find it wrong.

bench/models.py's random-weight models: its 1e-4 gate (swapped against
original) can only fail if the attention reaches the output and every weight
is random. Frameworks' inits leave norm scales at 1 and biases at 0, and
timm's SwinV2 zero-initialises its post-norms, so that its attention
contributes nothing: no parameter of the benchmarked models may be constant.

bench/gpu_bench.py ``--model`` runs only on the rare GPU machine, for
minutes: its code runs here on the CPU first (``--device cpu``, small
batches), so that the GPU run does not fail on it.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "models.py"
FRAMEWORK = {"timm": "timm", "torchvision": "torchvision", "transformers": "transformers",
             "timm-swinv2": "timm", "timm-maxvit": "timm", "timm-coatnet": "timm",
             "monai-swinunetr": "monai"}


@pytest.fixture(scope="module")
def models():
    spec = importlib.util.spec_from_file_location("bench_models", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", sorted(FRAMEWORK))
def test_random_models_have_no_constant_parameter(torch, models, name):
    pytest.importorskip(FRAMEWORK[name])
    assert set(FRAMEWORK) == set(models.ALL_MODELS)
    model = models.random_model(torch, name)
    constant = [n for n, p in model.named_parameters()
                if p.numel() > 1 and bool((p == p.flatten()[0]).all())]
    assert not constant, f"{name}: constant parameters {constant[:8]} ({len(constant)})"
    assert not model.training


@pytest.mark.aot
def test_gpu_bench_model_figures_run_on_the_cpu(torch):
    pytest.importorskip("timm")
    script = BENCH.parent / "gpu_bench.py"
    proc = subprocess.run([sys.executable, str(script), "--model", "--device", "cpu",
                           "--model-batch", "1", "--train-batch", "2", "--repeat", "1",
                           "--model-dtypes", "bf16"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.split() for line in proc.stdout.splitlines()
            if line.startswith(("bf16 inference", "train bf16 step"))]
    assert [row[:3] for row in rows] == [["bf16", "inference", "eager"],
                                         ["train", "bf16", "step"]], proc.stdout
    for row in rows:  # the speed-up column, and kernels called in each
        assert any(cell.endswith("x") for cell in row), row
        kernels, _ = row[-1].split("/")
        assert int(kernels) > 0, row
