"""Which CUDA toolkit GPU kernels are compiled with (swin_opt.cuda_toolkit).

Without a system toolkit, a pip-installed PyTorch still brings libdevice,
ptxas and cuda.h in Triton's wheel: GPU kernels (PTX, cubin) and their host
runtime then build from those. Here the system toolkit is hidden by pointing
``SYSTEM_TOOLKIT`` at an empty directory; the real swin-aot and ptxas run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import swin_opt
from swin_opt import cuda_toolkit as tk


@pytest.fixture
def no_system_toolkit(monkeypatch, tmp_path):
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setattr(tk, "SYSTEM_TOOLKIT", tmp_path / "no-cuda")
    monkeypatch.setenv("SWIN_OPT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def test_cuda_home_wins_even_incomplete(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    assert tk.cuda_toolkit() == tmp_path


def test_without_any_toolkit_the_system_path_is_named(no_system_toolkit, monkeypatch):
    monkeypatch.setattr(tk, "triton_pieces", lambda: None)
    assert tk.cuda_toolkit() == no_system_toolkit / "no-cuda"


def test_triton_pieces_take_the_toolkit_shape(no_system_toolkit):
    nvidia = tk.triton_pieces()
    if nvidia is None:
        pytest.skip("no Triton with libdevice, ptxas and cuda.h here")
    toolkit = tk.cuda_toolkit()
    assert toolkit.parent == no_system_toolkit / "cache"
    assert (toolkit / tk.LIBDEVICE).resolve() == (nvidia / "lib" / "libdevice.10.bc").resolve()
    assert (toolkit / tk.PTXAS).resolve() == (nvidia / "bin" / "ptxas").resolve()
    assert (toolkit / "include" / "cuda.h").is_file()
    assert tk.cuda_toolkit() == toolkit  # made once
    assert [p.name for p in toolkit.parent.iterdir()] == [toolkit.name]  # no staging left


@pytest.mark.parametrize("emit", ["ptx", "cubin"])
def test_gpu_kernels_build_from_tritons_pieces(no_system_toolkit, aot_path, emit):
    if tk.triton_pieces() is None:
        pytest.skip("no Triton with libdevice, ptxas and cuda.h here")
    kernel = swin_opt.compile((7, 7), 3, 32, resolution=(14, 14), shift=3, dtype="f16",
                              target="nvptx", emit=emit, chip="sm_80",
                              cache_dir=no_system_toolkit / "kernels")
    assert kernel.image.suffix == f".{emit}" and kernel.image.stat().st_size > 0
    assert kernel.library.is_file()  # the host runtime, built against Triton's cuda.h
    if emit == "ptx":  # libdevice linked in: no call is left unresolved
        assert "__nv_" not in kernel.image.read_text()


def test_fatbin_still_needs_a_real_toolkit(no_system_toolkit, aot_path, monkeypatch):
    if tk.triton_pieces() is None:
        pytest.skip("no Triton with libdevice, ptxas and cuda.h here")
    # Nor a fatbinary on PATH (this machine has a toolkit, and wrappers of it).
    path = os.environ["PATH"].split(os.pathsep)
    monkeypatch.setenv("PATH", os.pathsep.join(d for d in path
                                               if not (Path(d) / "fatbinary").exists()))
    with pytest.raises(swin_opt.CompileError, match="fatbinary"):
        swin_opt.compile((7, 7), 3, 32, dtype="f16", target="nvptx", emit="fatbin",
                         chip="sm_80", cache_dir=no_system_toolkit / "kernels")
