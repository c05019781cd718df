"""swin_opt.export_mlir: the torch-mlir export of Swin attention.

The checked-in exports are compiled and compared with torch by lit
(test/Execution/raise-imported.test); these tests cover the export's own
steps. The export itself needs torch-mlir (not in the project venv: it
skips without it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from swin_opt import export_mlir

ROOT = Path(__file__).resolve().parents[2]


def test_add_c_interface_marks_only_the_named_function():
    text = ("module {\n  func.func @helper(%a: f32) -> f32 {\n    return %a : f32\n  }\n"
            "  func.func @forward(%arg0: tensor<2x16x16xf32>) -> tensor<2x16x16xf32> {\n"
            "    return %arg0 : tensor<2x16x16xf32>\n  }\n}\n")
    out = export_mlir.add_c_interface(text)
    assert ("func.func @forward(%arg0: tensor<2x16x16xf32>) -> tensor<2x16x16xf32> "
            "attributes {llvm.emit_c_interface} {") in out
    assert "func.func @helper(%a: f32) -> f32 {" in out
    with pytest.raises(ValueError, match="no func.func @main"):
        export_mlir.add_c_interface(text, "main")


def test_persistent_buffers_keep_their_values():
    pytest.importorskip("torch")
    swin = pytest.importorskip("timm.models.swin_transformer")
    block = swin.SwinTransformerBlock(dim=16, input_resolution=(8, 8), num_heads=2, window_size=4, shift_size=2)
    before = {name: buf.clone() for name, buf in block.named_buffers()}
    assert "attn.relative_position_index" not in block.state_dict()
    export_mlir.make_buffers_persistent(block)
    state = block.state_dict()
    for name, value in before.items():
        assert name in state
        assert np.array_equal(state[name].numpy(), value.numpy())


def test_checked_in_exports_have_their_torch_outputs():
    # Every module has its inputs and torch's output beside it, shaped as
    # @forward's signature says.
    inputs = sorted((ROOT / "test/Transforms/Inputs/raise").glob("*.mlir"))
    assert inputs
    for path in inputs:
        saved = np.load(path.with_suffix(".npz"))
        text = path.read_text()
        assert "attributes {llvm.emit_c_interface}" in text
        for i in range(len(saved.files) - 1):
            shape = "x".join(map(str, saved[f"arg{i}"].shape))
            assert f"%arg{i}: tensor<{shape}xf32>" in text


def test_export_and_check_window_attention(tmp_path):
    pytest.importorskip("torch_mlir")
    pytest.importorskip("timm")
    swin_opt = os.environ.get("SWIN_OPT", str(ROOT / "build/bin/swin-opt"))
    path = export_mlir.save_case("wa", export_mlir._timm_cases()["timm_window_attention"], tmp_path)
    assert "dense_resource" in path.read_text()
    if not (Path(swin_opt).exists() and shutil.which("clang-22") and shutil.which("mlir-translate-22")):
        pytest.skip("swin-opt, clang-22 or mlir-translate-22 not found")
    assert export_mlir.check(path, swin_opt) < export_mlir.ATOL


def test_export_without_torch_mlir_fails_clearly(tmp_path):
    """-o without torch-mlir: a non-zero exit and one line saying what is missing,
    not an exit 0 that wrote nothing."""
    blocker = tmp_path / "blocked" / "torch_mlir"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text('raise ImportError("torch_mlir is blocked by the test")\n')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(blocker.parent),
                                                      str(ROOT / "python")]))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "swin_opt.export_mlir", "-o", str(out)],
                          env=env, capture_output=True, text=True)
    assert proc.returncode != 0, proc.stdout
    assert "torch-mlir" in proc.stderr and "pip install" in proc.stderr, proc.stderr
    assert not out.exists() or not any(out.iterdir())
