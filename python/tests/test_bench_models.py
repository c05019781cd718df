"""bench/models.py's random-weight models: its 1e-4 gate (swapped against
original) can only fail if the attention reaches the output and every weight
is random. Frameworks' inits leave norm scales at 1 and biases at 0, and
timm's SwinV2 zero-initialises its post-norms, so that its attention
contributes nothing: no parameter of the benchmarked models may be constant.
"""

from __future__ import annotations

import importlib.util
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
