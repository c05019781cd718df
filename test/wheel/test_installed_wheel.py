"""The installed wheel as a user gets it: scripts/wheel.sh builds it, installs it
into a fresh venv beside torch, torchvision, timm and transformers, and runs
this file there with /usr/lib/llvm-22 and /usr/local/cuda hidden (empty
directories mounted over them in a private mount namespace), so that any
dependency on the build machine's LLVM or CUDA fails. Elsewhere the first
test fails: it checks that it runs in that setting.

Not part of lit (test/lit.cfg.py takes .mlir and .test files) nor of the
python/tests suite, which tests the checkout's package.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import swin_opt
from swin_opt import testing, tools

#: The checkout this file is in: only its examples/ are read.
ROOT = Path(__file__).resolve().parents[2]
HIDDEN = ("/usr/lib/llvm-22", "/usr/local/cuda")
#: What the wheel's tools may load: glibc, zlib and zstd.
TOOL_LIBRARIES = {"linux-vdso.so.1", "libc.so.6", "libm.so.6", "libz.so.1", "libzstd.so.1",
                  "ld-linux-x86-64.so.2"}
#: What a CPU kernel may load: libgomp (the system's, or the copy torch loaded) and libm.
KERNEL_LIBRARIES = {"linux-vdso.so.1", "libc.so.6", "libm.so.6", "libgomp.so.1",
                    "ld-linux-x86-64.so.2"}
RTOL = 1e-4
#: Gradients of a whole Swin-T in float32, swapped against original: the bias
#: tables' are sums over every window, as rounded differently (transformers'
#: init gives gradients of 1e-9 whose float32 noise reaches 1e-4).
GRAD_RTOL = 1e-3


def _run(cmd, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, **kwargs)


def _libraries(path: Path) -> set:
    """The shared libraries ``path`` loads here (``ldd``); fails on one not found."""
    proc = _run(["ldd", path])
    assert proc.returncode == 0, proc.stderr
    assert "not found" not in proc.stdout, proc.stdout
    return {Path(line.split()[0]).name for line in proc.stdout.splitlines() if line.strip()}


def test_runs_as_a_user_would():
    """The package is the venv's copy, and LLVM, CUDA and $SWIN_AOT are out of reach."""
    package = Path(swin_opt.__file__).resolve().parent
    assert package == Path(sysconfig.get_paths()["platlib"]).resolve() / "swin_opt", package
    assert Path(sys.prefix) != Path(sys.base_prefix)  # a venv
    for hidden in HIDDEN:
        assert not os.path.exists(hidden) or not os.listdir(hidden), f"{hidden} is visible"
    assert "SWIN_AOT" not in os.environ


def test_the_package_runs_its_own_static_tools():
    package = Path(swin_opt.__file__).resolve().parent
    for name in ("swin-aot", "swin-opt"):
        path = tools.bundled_tool(name)
        assert path == package / "bin" / name
        assert _libraries(path) <= TOOL_LIBRARIES, _libraries(path)
    assert swin_opt.find_swin_aot() == package / "bin" / "swin-aot"


def test_console_scripts():
    bindir = Path(sys.prefix) / "bin"
    for name in ("swin-aot", "swin-opt", "swin-opt-py"):
        assert Path(shutil.which(name)) == bindir / name, name
    version = _run(["swin-aot", "--version"])
    assert version.returncode == 0, version.stderr
    assert re.match(r"swin-aot \d+\.\d+\.\d+ \(kernel ABI \d+\)", version.stdout), version.stdout
    assert _run(["swin-opt", "--version"]).returncode == 0
    lowered = _run(["swin-opt", ROOT / "examples" / "window_attention.mlir", "--rpe-cpu-pipeline"])
    assert lowered.returncode == 0, lowered.stderr
    assert "llvm.func" in lowered.stdout
    # The tool's exit status and error come through the wrapper.
    bad = _run(["swin-aot", "--heads=3"])
    assert bad.returncode != 0 and "swin-aot" in bad.stderr, bad


def test_python_m_swin_opt_help():
    for args in (["--help"], ["compile", "--help"]):
        proc = _run([sys.executable, "-m", "swin_opt", *args])
        assert proc.returncode == 0, proc.stderr
        assert "compile" in proc.stdout


@pytest.mark.parametrize("count,options", [
    (8, dict(resolution=(14, 14), shift=3)),  # 2 images of 4 windows
    (2, dict(resolution=(14, 14), shift=3, layout="tokens", dtype="bf16")),
], ids=["windows-f32", "tokens-bf16"])
def test_compile_matches_the_reference(tmp_path, count, options):
    kernel = swin_opt.compile((7, 7), heads=3, head_dim=32, cache_dir=tmp_path, **options)
    check = testing.check_against_reference(kernel, count)
    assert check.passed, (check.error, check.allowed)
    # Linked by the wheel's swin-aot: it loads libgomp and libm, nothing of LLVM.
    assert _libraries(kernel.library) <= KERNEL_LIBRARIES, _libraries(kernel.library)


def test_gpu_kernels_build_from_tritons_cuda_pieces(tmp_path):
    """No CUDA toolkit, but torch's Triton: its libdevice, ptxas and cuda.h build
    the kernel (cubin) and its host runtime (swin_opt.cuda_toolkit)."""
    from swin_opt import cuda_toolkit

    if cuda_toolkit.triton_pieces() is None:
        pytest.skip("this torch venv has no Triton with libdevice, ptxas and cuda.h")
    kernel = swin_opt.compile((7, 7), 3, 32, dtype="f16", target="nvptx", emit="cubin",
                              chip="sm_90", cache_dir=tmp_path)
    assert kernel.image.stat().st_size > 0 and kernel.library.is_file()


def test_gpu_kernels_say_what_they_need_without_cuda(tmp_path):
    """No CUDA toolkit: --target=nvptx names what is missing and writes nothing."""
    base = ["swin-aot", "--window=7,7", "--heads=3", "--head-dim=32", "--dtype=f16",
            "--target=nvptx", "--chip=sm_90"]
    out = tmp_path / "out"
    out.mkdir()
    ptx = _run([*base, "--emit=ptx", "-o", out / "k.ptx"])
    assert ptx.returncode == 1 and "libdevice" in ptx.stderr, ptx.stderr
    assert "--cuda-toolkit" in ptx.stderr, ptx.stderr
    # A toolkit with libdevice only: cubin names ptxas.
    libdevice = tmp_path / "toolkit" / "nvvm" / "libdevice" / "libdevice.10.bc"
    libdevice.parent.mkdir(parents=True)
    libdevice.touch()
    # Nor on PATH: a machine may keep wrappers that exec the hidden toolkit's
    # (this one has /usr/local/bin/ptxas), which swin-aot would rightly take.
    path = os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep)
                           if not (Path(d) / "ptxas").exists())
    cubin = _run([*base, "--emit=cubin", f"--cuda-toolkit={tmp_path / 'toolkit'}",
                  "-o", out / "k.cubin"], env={**os.environ, "PATH": path})
    assert cubin.returncode == 1 and "needs ptxas" in cubin.stderr, cubin.stderr
    assert list(out.iterdir()) == []


# --------------------------------------------------------------------------- #
# The three frameworks' Swin-T, swapped: inference, then a few training steps
# --------------------------------------------------------------------------- #
def _swin_t(framework: str):
    """Swin-T of ``framework``, random weights (sharpened), no dropout or drop-path."""
    if framework == "timm":
        import timm

        model = timm.create_model("swin_tiny_patch4_window7_224", pretrained=False,
                                  drop_path_rate=0.0)
    elif framework == "torchvision":
        from torchvision.models.swin_transformer import SwinTransformer

        # swin_t's architecture, without its stochastic depth
        model = SwinTransformer(patch_size=[4, 4], embed_dim=96, depths=[2, 2, 6, 2],
                                num_heads=[3, 6, 12, 24], window_size=[7, 7],
                                stochastic_depth_prob=0.0)
    else:
        import transformers

        model = transformers.SwinModel(transformers.SwinConfig(drop_path_rate=0.0))
    return testing.sharpen_weights(model)


def _out(y):
    return y if isinstance(y, torch.Tensor) else y.last_hidden_state


def _rel_err(got, want) -> float:
    return ((got - want).abs().max() / want.abs().max()).item()


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("kernels")


@pytest.mark.parametrize("framework", ["timm", "torchvision", "transformers"])
def test_swapped_swin_t_inference_and_training(framework, cache_dir):
    from swin_opt.torch import patch_stats, swap_attention

    torch.manual_seed(0)
    original = _swin_t(framework)
    swapped = copy.deepcopy(original)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing unpatched, no unsupported version
        assert swap_attention(swapped, cache_dir=cache_dir) == 12  # 2 + 2 + 6 + 2 blocks
    x = torch.randn(1, 3, 224, 224)
    with torch.inference_mode():
        assert _rel_err(_out(swapped(x)), _out(original(x))) <= RTOL

    original.train()
    swapped.train()
    optimizers = [torch.optim.SGD(m.parameters(), lr=1e-4) for m in (original, swapped)]
    for step in range(3):
        losses = []
        for model, optimizer in zip((original, swapped), optimizers):
            optimizer.zero_grad()
            loss = _out(model(x)).square().mean()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        assert np.isfinite(losses[1]) and abs(losses[1] - losses[0]) <= RTOL * abs(losses[0]), \
            (step, losses)
    tables = [dict((n, p.grad) for n, p in m.named_parameters()
                   if "relative_position_bias_table" in n) for m in (original, swapped)]
    assert tables[0].keys() == tables[1].keys() and len(tables[0]) == 12
    for name, grad in tables[0].items():
        assert _rel_err(tables[1][name], grad) <= GRAD_RTOL, name

    stats = patch_stats(swapped)
    assert sum(s["kernel_calls"] for s in stats) >= 12 * 4  # inference + 3 training steps
    # The MLPs run torch's code under autograd (their kernel has no backward).
    assert all(s["fallback_calls"] == 0 for s in stats if s["kind"] == "attention"), stats
    # The kernels' OpenMP runtime is the libgomp torch loaded: one pool.
    maps = Path("/proc/self/maps").read_text().splitlines()
    gomp = {line.split()[-1] for line in maps if "libgomp" in line.split()[-1]}
    assert len(gomp) == 1 and Path(torch.__file__).parent.as_posix() in gomp.pop(), gomp
