"""The per-op profile of a module compiled by ``swin-aot --input --profile``.

A checked-in timm block (a shifted window attention with its MLP, as
torch-mlir exports it) is compiled with ``--profile``, called twice through
its MLIR C interface, and its profile written by the library's
``swin_profile_write`` is read by :func:`swin_opt.whole_model.load_profile`
and printed by :func:`~swin_opt.whole_model.profile_table`, as
``bench/whole_model.py`` does. Profiling does not change the numbers.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

from swin_opt import export_mlir, whole_model

pytestmark = pytest.mark.aot

ROOT = Path(__file__).resolve().parents[2]
BLOCK = ROOT / "test/Transforms/Inputs/raise/timm_swin_block_shifted.mlir"


@pytest.fixture(scope="module")
def profiled(aot_path, tmp_path_factory):
    """(library, profile path): the block compiled with --profile, called twice."""
    out = tmp_path_factory.mktemp("profile")
    library, _ = whole_model.compile_aot(BLOCK, str(aot_path), out, extra=["--profile"])
    saved = np.load(BLOCK.with_suffix(".npz"))
    inputs = [saved[f"arg{i}"] for i in range(len(saved.files) - 1)]
    want = saved["result"]
    forward = export_mlir.ForwardLibrary(library)
    lib = ctypes.CDLL(str(library.resolve()))
    lib.swin_profile_write.argtypes = [ctypes.c_char_p]
    lib.swin_profile_reset()
    for _ in range(2):
        got = forward(inputs, want.shape)
        assert whole_model.relative_error(got, want) <= whole_model.TOLERANCE
    path = out / "profile.json"
    assert lib.swin_profile_write(str(path).encode()) == 0
    return lib, path


def test_profile_counts_each_op_of_each_call(profiled):
    _, path = profiled
    profile = whole_model.load_profile(path)
    assert profile["function"] == "forward" and profile["calls"] == 2
    ops = profile["ops"]
    assert [op["id"] for op in ops] == list(range(len(ops)))
    assert all(op["count"] == 2 and op["ns"] > 0 for op in ops)
    names = {op["name"] for op in ops}
    # The block's linear layers, its fused attention, its LayerNorms.
    assert {"rpe.matmul", "rpe.fused_window_attention", "rows.reduction"} <= names
    assert all(op["loc"].startswith(f"{BLOCK.name}:") for op in ops)


def test_profile_table_prints_the_library_profile(profiled):
    _, path = profiled
    profile = whole_model.load_profile(path)
    table = whole_model.profile_table(profile)
    print(table)
    lines = table.splitlines()
    assert f"in {len(profile['ops'])} ops, 2 call(s)" in lines[0]
    kinds = [line.split()[0] for line in lines[2:lines.index(next(l for l in lines if l.startswith("costliest")))]]
    assert sorted(kinds) == sorted({op["name"] for op in profile["ops"]})
    assert "rpe.fused_window_attention" in kinds


def test_profile_write_refuses_a_path_it_cannot_write(profiled, tmp_path):
    lib, _ = profiled
    missing = tmp_path / "missing" / "profile.json"
    assert lib.swin_profile_write(str(missing).encode()) != 0
    assert not missing.parent.exists()
