"""Driver tests (cache, ctypes calls, argument checking, CLI) against the fake swin-aot.

tests/fake_swin_aot.py implements the swin-aot contract with a naive C kernel,
so these tests run everywhere a C compiler exists.  The numerics of the real
compiler are tested in test_kernel.py.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

import swin_opt
from swin_opt import build, gpu_kernel, tools
from swin_opt import testing as T

PYTHON_DIR = Path(__file__).resolve().parents[1]


@pytest.fixture
def fake(fake_aot, monkeypatch, tmp_path):
    """Point SWIN_AOT at the fake; return a dict with the cache dir and a build log."""
    log = tmp_path / "builds.log"
    monkeypatch.setenv("SWIN_AOT", str(fake_aot))
    monkeypatch.setenv("FAKE_SWIN_AOT_LOG", str(log))
    monkeypatch.delenv("FAKE_SWIN_AOT_VERSION", raising=False)
    monkeypatch.delenv("FAKE_SWIN_AOT_NO_ABI", raising=False)
    tools.clear_tool_cache()  # the fake's --version depends on the environment
    cache = tmp_path / "cache"

    def builds() -> int:
        return len(log.read_text().splitlines()) if log.exists() else 0

    def compile_(*args, **kwargs):
        return swin_opt.compile(*args, cache_dir=cache, **kwargs)

    return dict(cache=cache, builds=builds, compile=compile_, path=fake_aot, log=log)


def _check(kernel, n, seed=0):
    check = T.check_against_reference(kernel, n, seed=seed)
    assert check.passed, f"{kernel}: max error {check.error:.3g} > {check.allowed:.3g}"
    return check.out


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(window=(3, 3), heads=2, head_dim=8),
        dict(window=(4, 6), heads=2, head_dim=8, resolution=(8, 12), shift=(2, 3)),
        dict(window=(7, 7), heads=3, head_dim=16, resolution=(14, 14), shift=3, dtype="float16"),
        dict(window=(3, 3), heads=2, head_dim=8, resolution=(9, 6), shift=1, dtype="bfloat16"),
        dict(window=(2, 4, 4), heads=2, head_dim=8, resolution=(4, 8, 8), shift=(1, 2, 2)),
        dict(window=(4, 6), heads=2, head_dim=8, resolution=(9, 13), shift=(2, 3), padding="hf"),
    ],
    ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()).replace(" ", ""),
)
def test_fake_kernels_match_reference(fake, kwargs):
    kernel = fake["compile"](**kwargs)
    nw = kernel.config.windows_per_image or 3
    _check(kernel, nw)
    _check(kernel, 2 * nw, seed=1)
    assert kernel(*T.random_inputs(kernel, 0).args()).shape == kernel.output_shape(0)


def test_cache_hits_and_keys(fake):
    k1 = fake["compile"]((3, 3), 2, 8)
    assert fake["builds"]() == 1
    k2 = fake["compile"]((3, 3), 2, 8)
    assert fake["builds"]() == 1 and k2.library == k1.library
    assert (k1.library.parent / "config.json").is_file() and k1.header.is_file()
    fake["compile"]((3, 3), 2, 8, scale=0.5)
    assert fake["builds"]() == 2
    t = np.ones((25, 2), np.float32)
    kt = fake["compile"]((3, 3), 2, 8, table=t)
    fake["compile"]((3, 3), 2, 8, table=t.astype(np.float64))  # same float32 bytes
    assert fake["builds"]() == 3
    kt2 = fake["compile"]((3, 3), 2, 8, table=t * 2)
    assert fake["builds"]() == 4 and kt2.library != kt.library
    # a rebuilt binary (new mtime) invalidates the cache
    st = fake["path"].stat()
    os.utime(fake["path"], ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    fake["compile"]((3, 3), 2, 8)
    assert fake["builds"]() == 5
    assert not list(fake["cache"].glob(".build-*"))  # temporaries are cleaned up


def _stderr_of_compiles(fake, setup: str = "") -> str:
    """stderr of a fresh interpreter (nothing configures logging there) that runs
    ``setup``, compiles two configurations, one of them twice."""
    code = (f"{setup}\nimport swin_opt\n"
            f"for scale in (None, None, 0.5):\n"
            f"    swin_opt.compile((3, 3), 2, 8, scale=scale, cache_dir={str(fake['cache'])!r})\n")
    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def test_each_build_says_so_on_stderr_when_logging_is_not_configured(fake):
    lines = _stderr_of_compiles(fake).splitlines()
    assert len(lines) == 2 and fake["builds"]() == 2, lines  # the cache hit builds nothing
    assert lines[0].startswith("swin_opt: built window=3x3 heads=2 head_dim=8") and \
        lines[0].endswith(" s"), lines
    assert "scale=0.5" in lines[1], lines


def test_builds_go_to_the_logger_when_logging_is_configured(fake, caplog):
    setup = "import logging\nlogging.basicConfig(level=logging.WARNING)"
    assert _stderr_of_compiles(fake, setup) == ""  # the application's choice
    with caplog.at_level(logging.INFO, logger="swin_opt"):
        fake["compile"]((3, 3), 2, 8, scale=0.25)
    built = [r for r in caplog.records if r.name == "swin_opt" and "built" in r.getMessage()]
    assert len(built) == 1 and built[0].levelno == logging.INFO, caplog.records


def test_cache_key_includes_version(fake, monkeypatch):
    fake["compile"]((2, 2), 1, 8)
    monkeypatch.setenv("FAKE_SWIN_AOT_VERSION", "swin-aot 9.9.0 (kernel ABI 1)")
    tools.clear_tool_cache()  # version is memoised per (path, size, mtime)
    fake["compile"]((2, 2), 1, 8)
    assert fake["builds"]() == 2


def test_clear_cache(fake):
    fake["compile"]((2, 2), 1, 8)
    kernel = fake["compile"]((2, 2), 1, 16)
    _check(kernel, 2)  # load before clearing: keeps working afterwards
    assert swin_opt.clear_cache(fake["cache"]) == 2
    assert not any(fake["cache"].iterdir())
    _check(kernel, 2)
    fake["compile"]((2, 2), 1, 8)
    assert fake["builds"]() == 3


def test_default_cache_dir_from_env(fake, monkeypatch, tmp_path):
    monkeypatch.setenv("SWIN_OPT_CACHE_DIR", str(tmp_path / "envcache"))
    kernel = swin_opt.compile((2, 2), 1, 8)
    assert kernel.library.parent.parent == tmp_path / "envcache"
    assert swin_opt.clear_cache() == 1


def test_concurrent_builds_of_one_kernel(fake):
    results, errors = [], []

    def work():
        try:
            results.append(fake["compile"]((3, 3), 1, 8, scale=0.3).library)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(results)) == 1
    assert not list(fake["cache"].glob(".build-*"))


def test_bad_config_reports_tool_error(fake):
    with pytest.raises(swin_opt.CompileError, match="shift must satisfy") as info:
        fake["compile"]((7, 7), 3, 32, resolution=(14, 14), shift=7)
    assert info.value.returncode != 0 and "swin-aot" in str(info.value)
    assert isinstance(info.value, RuntimeError)


def test_baked_table_and_name(fake):
    cfg_table = T.random_table(swin_opt.make_config((4, 6), 2, 8))
    kernel = fake["compile"]((4, 6), 2, 8, resolution=(8, 12), shift=(2, 3), table=cfg_table,
                             name="my_attn")
    assert "my_attn" in kernel.header.read_text()
    np.testing.assert_array_equal(kernel.table, cfg_table)
    _check(kernel, 4)
    inp = T.random_inputs(kernel, 4)
    with pytest.raises(ValueError, match="baked-in table"):
        kernel(inp.q, inp.k, inp.v, cfg_table)
    with pytest.raises(ValueError, match=r"table must have shape \[77, 2\]"):
        fake["compile"]((4, 6), 2, 8, table=np.zeros((77, 3)))


def test_argument_errors(fake):
    kernel = fake["compile"]((4, 6), 2, 8, resolution=(8, 12), shift=(2, 3))
    inp = T.random_inputs(kernel, 4)
    q, k, v, t = inp.args()
    with pytest.raises(ValueError, match="q must have shape"):
        kernel(q[:, :1], k, v, t)
    with pytest.raises(ValueError, match="k must have shape"):
        kernel(q, np.ascontiguousarray(k[:3]), v, t)
    with pytest.raises(ValueError, match="v must have shape"):
        kernel(q, k, v.reshape(4, 2, 8, 24), t)
    with pytest.raises(ValueError, match="q must have shape"):
        kernel(q.reshape(4, 2, -1), k, v, t)
    with pytest.raises(TypeError, match="float32"):
        kernel(q.astype(np.float64), k, v, t)
    with pytest.raises(TypeError, match="numpy.ndarray or torch.Tensor"):
        kernel(q.tolist(), k, v, t)
    with pytest.raises(ValueError, match="C-contiguous"):
        kernel(np.asfortranarray(q), k, v, t)
    with pytest.raises(ValueError, match=r"table \[77, 2\] is required"):
        kernel(q, k, v)
    with pytest.raises(ValueError, match="table must have shape"):
        kernel(q, k, v, np.zeros((77, 3), np.float32))
    with pytest.raises(ValueError, match="multiple of the 4 windows"):
        kernel(q[:3].copy(), k[:3].copy(), v[:3].copy(), t)
    with pytest.raises(ValueError, match="pad_qkv"):
        kernel(q, k, v, t, pad_qkv=np.zeros((3, 16), np.float32))
    out = np.empty(kernel.output_shape(4), np.float32)
    assert kernel(q, k, v, t, out=out) is out
    with pytest.raises(ValueError, match="out must have shape"):
        kernel(q, k, v, t, out=np.empty((4, 24, 15), np.float32))
    # The C function itself rejects a bad window count without writing anything.
    sentinel = np.full(kernel.output_shape(3), 7.0, np.float32)
    rc = kernel.cfunc(q.ctypes.data, k.ctypes.data, v.ctypes.data, t.ctypes.data,
                      sentinel.ctypes.data, 3)
    assert rc != 0 and np.all(sentinel == 7.0)


def test_half_precision_dtypes(fake):
    k16 = fake["compile"]((3, 3), 2, 8, dtype="float16")
    inp = T.random_inputs(k16, 2)
    assert inp.q.dtype == np.float16
    assert _check(k16, 2).dtype == np.float16
    with pytest.raises(TypeError, match="float16"):
        k16(inp.q.astype(np.float32), inp.k, inp.v, inp.table)
    kb = fake["compile"]((3, 3), 2, 8, dtype="bfloat16")
    assert _check(kb, 2).dtype == np.uint16
    with pytest.raises(TypeError, match="bfloat16 bits"):
        kb(inp.q, inp.k, inp.v, inp.table)


@pytest.mark.parametrize("padding", [None, "pad_then_shift", "shift_then_pad"])
def test_layout_tokens(fake, padding):
    res = (14, 14) if padding is None else (9, 13)
    win = (7, 7) if padding is None else (4, 6)
    kernel = fake["compile"](win, 2, 8, resolution=res, shift=(3, 3) if padding is None else (2, 3),
                             layout="tokens", padding=padding)
    assert kernel.input_shape(2) == (2, res[0] * res[1], 16)
    _check(kernel, 2)
    inp = T.random_inputs(kernel, 1)
    with pytest.raises(ValueError, match=r"pad_qkv must have shape \(3, 16\)"):
        kernel(*inp.args(), pad_qkv=np.zeros((2, 16), np.float32))


def test_torch_tensors(fake):
    torch = pytest.importorskip("torch")
    kernel = fake["compile"]((3, 3), 2, 8, resolution=(6, 6), shift=1)
    inp = T.random_inputs(kernel, 8)
    tq, tk, tv, tt = (torch.from_numpy(a) for a in inp.args())
    out = kernel(tq, tk, tv, tt)
    assert isinstance(out, torch.Tensor) and out.shape == kernel.output_shape(8)
    np.testing.assert_array_equal(out.numpy(), kernel(*inp.args()))
    with pytest.raises(TypeError, match="torch.float32"):
        kernel(tq.double(), tk, tv, tt)
    with pytest.raises(ValueError, match="contiguous"):
        kernel(tq.transpose(2, 3).contiguous().transpose(2, 3), tk, tv, tt)  # right shape, strided
    kb = fake["compile"]((3, 3), 2, 8, dtype="bfloat16")
    x = torch.randn(2, 2, 9, 8, dtype=torch.bfloat16)
    table = torch.randn(25, 2, dtype=torch.bfloat16)
    out = kb(x, x, x, table)
    assert out.dtype == torch.bfloat16
    ref = T.reference_output(kb.config, x, x, x, table.double().numpy())
    err, tol = T.compare(out, ref, "bf16")
    assert err <= tol


def _run_cli(fake, *args):
    env = dict(os.environ, SWIN_OPT_CACHE_DIR=str(fake["cache"]),
               PYTHONPATH=str(PYTHON_DIR) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "swin_opt", *args], capture_output=True,
                          text=True, env=env, timeout=300)


def test_cli_compile_verify_bench(fake, tmp_path):
    out = tmp_path / "out" / "attn.so"
    r = _run_cli(fake, "compile", "--window=4,6", "--heads=2", "--head-dim=8",
                 "--resolution=8,12", "--shift=2,3", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.is_file() and Path(f"{out}.h").is_file() and Path(f"{out}.json").is_file()
    r = _run_cli(fake, "verify", "--window=3,3", "--heads=2", "--head-dim=8", "--dtype=f16",
                 "--resolution=6,6", "--shift=1", "--batch=2")
    assert r.returncode == 0, r.stderr
    assert "max abs error" in r.stdout and "PASS" in r.stdout
    r = _run_cli(fake, "bench", "--window=3,3", "--heads=2", "--head-dim=8", "--batch=8",
                 "--repeat=2", "--warmup=1")
    assert r.returncode == 0, r.stderr
    assert "reference" in r.stdout and "kernel" in r.stdout
    r = _run_cli(fake, "verify", "--window=7,7", "--heads=2", "--head-dim=8",
                 "--resolution=14,14", "--shift=9")
    assert r.returncode != 0 and "shift must satisfy" in r.stderr


# --------------------------------------------------------------------------- #
# swin-aot --version: the kernel ABI
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("version,match", [
    ("Debian LLVM version 22.1.8\n  Optimized build.\nswin-aot 0.1.0 (rpe dialect, LLVM 22.1.8)",
     "too old"),
    ("swin-aot 0.4.0", "too old"),
    ("swin-aot 0.5.0 (kernel ABI 2)", r"builds kernels of ABI 2, but this swin_opt calls ABI 1"),
])
def test_tool_version_must_report_our_abi(fake, monkeypatch, version, match):
    monkeypatch.setenv("FAKE_SWIN_AOT_VERSION", version)
    with pytest.raises(swin_opt.SwinAotVersionError, match=match) as info:
        fake["compile"]((3, 3), 2, 8)
    assert "rebuild swin-aot" in str(info.value)
    assert isinstance(info.value, swin_opt.CompileError)  # callers catching CompileError see it
    assert fake["builds"]() == 0


def test_tool_version_semver_forms(fake, monkeypatch):
    for version in ("swin-aot 0.4.0 (kernel ABI 1)", "swin-aot 1.2.3-rc.1+g1234abc (kernel ABI 1)\n"
                    "LLVM 22.1.8"):
        monkeypatch.setenv("FAKE_SWIN_AOT_VERSION", version)
        tools.clear_tool_cache()
        info = tools.tool_info(fake["path"])
        assert info.kernel_abi == 1 and info.semver == version.split()[1]


def test_help_is_not_consulted(fake, monkeypatch, tmp_path):
    """Features follow from the version, not from grepping --help."""
    wrapper = tmp_path / "swin-aot"
    wrapper.write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = --help ] && exit 3; done\n'
                       f'exec "{fake["path"]}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("SWIN_AOT", str(wrapper))
    kernel = fake["compile"]((4, 6), 2, 8, resolution=(9, 13), shift=(2, 3), layout="tokens",
                             padding="shift_then_pad", cpu="x86-64-v3", parallel=False)
    _check(kernel, 1)


# --------------------------------------------------------------------------- #
# The ABI description (<output>.json)
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("described", [{"heads": 3}, {"window": [3, 4]}, {"partition": "grid"},
                                       {"class_token": True}])
def test_abi_description_of_another_attention_is_refused(fake, monkeypatch, described):
    """A tool that ignored an option (an older one) builds another attention than
    asked for: its description says so, and the build is refused, not cached."""
    monkeypatch.setenv("FAKE_SWIN_AOT_DESCRIBE", json.dumps(described))
    with pytest.raises(swin_opt.CompileError, match="describes .* rebuild swin-aot"):
        fake["compile"]((3, 3), 2, 8)
    assert not list(fake["cache"].glob("k-*"))


def test_missing_abi_description_is_a_clear_error(fake, monkeypatch):
    monkeypatch.setenv("FAKE_SWIN_AOT_NO_ABI", "1")
    with pytest.raises(swin_opt.CompileError, match=r"kernel\.so\.json is missing.*rebuild swin-aot"):
        fake["compile"]((3, 3), 2, 8)
    assert not list(fake["cache"].glob("k-*"))  # nothing half-built is cached


@pytest.mark.parametrize("kwargs", [
    dict(),
    dict(resolution=(9, 13), shift=(2, 3), layout="tokens", padding="pad_then_shift",
         dtype="bfloat16"),
])
def test_kernel_is_typed_from_the_abi_description(fake, kwargs):
    kernel = fake["compile"]((4, 6), 2, 8, **kwargs)
    desc = swin_opt.abi.load(Path(f"{kernel.library}.json"))
    assert kernel.abi == desc
    assert kernel.cfunc.argtypes == desc.argtypes()
    count = desc.count.name
    assert [a.name for a in desc.arguments][:5] == ["q", "k", "v", "table", "out"]
    assert kernel.input_shape(3) == desc["q"].shape_for(3) and desc["q"].shape[0] == count
    assert kernel.output_shape(3) == desc["out"].shape_for(3)


def test_shape_checks_follow_the_description(fake):
    """A description that says 3 heads makes the 2-head arrays wrong: nothing is re-derived."""
    kernel = fake["compile"]((3, 3), 2, 8)
    data = json.loads(Path(f"{kernel.library}.json").read_text())
    for arg in data["arguments"]:
        if arg["name"] in ("q", "k", "v"):
            arg["shape"][1] = 3
    other = swin_opt.Kernel(kernel.config, kernel.library, kernel.header,
                            abi=swin_opt.abi.parse(data))
    inp = T.random_inputs(kernel, 2)
    with pytest.raises(ValueError, match=r"q must have shape \[num_windows, 3, 9, 8\]"):
        other(*inp.args())


# --------------------------------------------------------------------------- #
# An output that overlaps an input
# --------------------------------------------------------------------------- #
def test_output_overlapping_an_input_is_refused(fake):
    kernel = fake["compile"]((3, 3), 2, 8)
    inp = T.random_inputs(kernel, 4)
    q, k, v, t = inp.args()
    with pytest.raises(ValueError, match="out overlaps q"):
        kernel(q, k, v, t, out=q.reshape(kernel.output_shape(4)))  # the same memory
    size = q.size
    buf = np.zeros(2 * size, np.float32)
    q2 = buf[:size].reshape(q.shape)
    q2[...] = q
    with pytest.raises(ValueError, match="out overlaps q"):  # a partial overlap
        kernel(q2, k, v, t, out=buf[size // 2:size // 2 + size].reshape(kernel.output_shape(4)))
    big = np.zeros(size + t.size, np.float32)
    t2 = big[-t.size:].reshape(t.shape)
    t2[...] = t
    with pytest.raises(ValueError, match="out overlaps table"):
        kernel(q, k, v, t2, out=big[t.size:].reshape(kernel.output_shape(4)))
    # Adjacent, not overlapping: fine, and the same numbers as a fresh buffer.
    out = buf[size:].reshape(kernel.output_shape(4))
    np.testing.assert_array_equal(kernel(q2, k, v, t, out=out), kernel(q, k, v, t))
    # Inputs may alias one another (they are only read).
    kernel(q, q, q, t)


def test_output_overlapping_an_input_is_refused_torch(fake):
    torch = pytest.importorskip("torch")
    kernel = fake["compile"]((4, 6), 2, 8, resolution=(9, 13), shift=(2, 3), layout="tokens",
                             padding="shift_then_pad")
    inp = T.random_inputs(kernel, 2)
    q, k, v, t = (torch.from_numpy(a) for a in inp.args())
    with pytest.raises(ValueError, match="out overlaps k"):
        kernel(q, k, v, t, out=k)
    storage = torch.zeros(2 * q.numel())
    with pytest.raises(ValueError, match="out overlaps v"):
        kernel(q, k, storage[:q.numel()].view(q.shape),
               t, out=storage[5:5 + q.numel()].view(q.shape))


# --------------------------------------------------------------------------- #
# GPU kernels: one driver path, and no GPU needed to compile
# --------------------------------------------------------------------------- #
@pytest.fixture
def cuda_toolkit():
    from swin_opt import cuda
    from swin_opt.cuda_toolkit import cuda_toolkit as find_toolkit

    if not (find_toolkit() / "include" / "cuda.h").is_file():
        pytest.skip(f"no CUDA toolkit at {find_toolkit()}")
    return cuda


def _needs_libcuda(library) -> Optional[bool]:
    """Whether ``library`` records a dependency on libcuda.so.1 (None without readelf)."""
    if shutil.which("readelf") is None:
        return None
    out = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True).stdout
    return "libcuda.so.1" in out


def _has_driver(cuda) -> bool:
    try:
        gpu_kernel.driver_library()
        return True
    except cuda.CudaError:
        return False


def test_compile_gpu_accepts_compile_spellings(fake, cuda_toolkit, tmp_path):
    """compile_gpu is compile(target="nvptx"): the same dtype names, config, cache and errors."""
    cuda = cuda_toolkit
    kernel = cuda.compile_gpu((7, 7), 3, 32, resolution=(14, 14), shift=3, dtype="float16",
                              cache_dir=fake["cache"])
    assert isinstance(kernel, cuda.GpuKernel)
    assert kernel.config == swin_opt.make_config((7, 7), 3, 32, resolution=(14, 14), shift=3,
                                                 dtype="f16", target="nvptx", chip="sm_90")
    again = swin_opt.compile((7, 7), 3, 32, resolution=(14, 14), shift=3, dtype=np.float16,
                             target="nvptx", cache_dir=fake["cache"])
    assert again.image == kernel.image and fake["builds"]() == 1  # one cache
    with pytest.raises(swin_opt.CompileError, match="shift must satisfy"):
        cuda.compile_gpu((7, 7), 3, 32, resolution=(14, 14), shift=7, cache_dir=fake["cache"])
    with pytest.raises(ValueError, match="unsupported dtype"):
        cuda.compile_gpu((7, 7), 3, 32, dtype="int8", cache_dir=fake["cache"])


@pytest.mark.parametrize("emit", ["ptx", "cubin", "fatbin"])
def test_gpu_kernel_compiles_without_a_gpu(fake, cuda_toolkit, emit):
    cuda = cuda_toolkit
    kernel = swin_opt.compile((4, 6), 2, 16, resolution=(9, 13), shift=(2, 3), layout="tokens",
                              padding="pad_then_shift", dtype="bf16", target="nvptx", emit=emit,
                              chip="sm_80", cache_dir=fake["cache"])
    assert kernel.image.suffix == f".{emit}" and kernel.image.is_file()
    assert kernel.header.suffix == ".h" and kernel.runtime.suffix == ".c"
    assert kernel.library.is_file() and kernel.abi.target == "nvptx"
    if build.cuda_stub_dir() is not None:
        assert _needs_libcuda(kernel.library) in (True, None)  # linked against the stub
    assert "--target=nvptx" in fake["log"].read_text() and "--chip=sm_80" in fake["log"].read_text()
    assert [a.ctype for a in kernel.abi.arguments][-1] == "CUstream"
    if not _has_driver(cuda):
        with pytest.raises(cuda.CudaError, match="no CUDA driver"):
            kernel(16, 32, 48, 64, 1 << 20, 1)


def test_gpu_runtime_builds_without_the_stub(fake, cuda_toolkit, monkeypatch):
    """No stub libcuda: cu* stay undefined, resolved against the driver at load."""
    cuda = cuda_toolkit
    monkeypatch.setattr(build, "cuda_stub_dir", lambda: None)
    kernel = cuda.compile_gpu((3, 3), 2, 8, cache_dir=fake["cache"])
    assert kernel.library.is_file() and _needs_libcuda(kernel.library) in (False, None)
    if not _has_driver(cuda):
        with pytest.raises(cuda.CudaError, match="no CUDA driver"):
            kernel(16, 32, 48, 64, 1 << 20, 1)


def test_gpu_output_overlap_is_refused_before_launch(fake, cuda_toolkit):
    """Checked from the ABI's shapes on raw device pointers: needs no GPU."""
    kernel = cuda_toolkit.compile_gpu((3, 3), 2, 8, dtype="f16", cache_dir=fake["cache"])
    nbytes = kernel.abi.nbytes("q", 4)
    base = 1 << 32
    with pytest.raises(ValueError, match="out overlaps k"):
        kernel(base, base + nbytes, base + 2 * nbytes, base + 3 * nbytes, base + nbytes + 16, 4)
    with pytest.raises(ValueError, match="out overlaps table"):
        kernel(base, base + nbytes, base + 2 * nbytes, base + 4 * nbytes + 64, base + 4 * nbytes, 4)


# --------------------------------------------------------------------------- #
# CLI: usage errors, choices, GPU outputs
# --------------------------------------------------------------------------- #
_CFG = ("--window=3,3", "--heads=2", "--head-dim=8")


def _usage_error(r, *needles):
    """argparse's contract: exit 2, a usage line and one error line, no traceback."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("python -m swin_opt") and "error:" in last, r.stderr
    for needle in needles:
        assert needle in last, r.stderr


def test_cli_bad_table_is_a_usage_error(fake, tmp_path):
    r = _run_cli(fake, "verify", *_CFG, f"--table={tmp_path / 'missing.npy'}")
    _usage_error(r, "--table", "missing.npy")
    raw = tmp_path / "table.f32"
    np.zeros(7, "<f4").tofile(raw)
    _usage_error(_run_cli(fake, "compile", *_CFG, f"--table={raw}"), "--table",
                 "not a multiple of heads=2")
    bad = tmp_path / "bad.npy"
    bad.write_bytes(b"not numpy")
    _usage_error(_run_cli(fake, "compile", *_CFG, f"--table={bad}"), "--table")


@pytest.mark.parametrize("args,needle", [
    (("verify", "--batch=0"), "must be at least 1"),
    (("verify", "--batch=-1"), "must be at least 1"),
    (("bench", "--repeat=0"), "must be at least 1"),
    (("bench", "--warmup=-1"), "must be at least 0"),
    (("verify", "--dtype=int8"), "invalid choice: 'int8'"),
    (("compile", "--target=gpu"), "invalid choice: 'gpu'"),
    (("compile", "--padding=bogus"), "invalid choice: 'bogus'"),
    (("compile", "--emit=exe"), "invalid choice: 'exe'"),
    (("compile", "--heads=0"), "must be at least 1"),
])
def test_cli_bad_values_are_usage_errors(fake, args, needle):
    _usage_error(_run_cli(fake, args[0], "--window=3,3", "--heads=2", "--head-dim=8", *args[1:]),
                 needle)


def test_cli_lists_choices_and_accepts_documented_spellings(fake):
    r = _run_cli(fake, "compile", "--help")
    for listed in ("{f32,f16,bf16}", "{cpu,nvptx}", "{pad_then_shift,shift_then_pad}"):
        assert listed in r.stdout
    for dtype in ("float16", "bf16", "half"):
        r = _run_cli(fake, "verify", *_CFG, f"--dtype={dtype}", "--batch=1")
        assert r.returncode == 0 and "PASS" in r.stdout, r.stderr
    for padding in ("pad-then-shift", "shift_then_pad", "timm"):
        r = _run_cli(fake, "verify", "--window=4,6", "--heads=2", "--head-dim=8",
                     "--resolution=9,13", "--shift=2,3", f"--padding={padding}", "--batch=1")
        assert r.returncode == 0 and "PASS" in r.stdout, r.stderr


def test_cli_compile_for_the_gpu(fake, cuda_toolkit, tmp_path):
    out = tmp_path / "gpu"
    out.mkdir()
    r = _run_cli(fake, "compile", *_CFG, "--dtype=float16", "--target=nvptx", "--emit=ptx",
                 "--chip=sm_80", "-o", str(out))
    assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in out.iterdir())
    assert names == ["libswin_window_attention.so", "swin_window_attention.ptx",
                     "swin_window_attention.ptx.c", "swin_window_attention.ptx.h",
                     "swin_window_attention.ptx.json"]
    assert json.loads((out / "swin_window_attention.ptx.json").read_text())["dtype"] == "f16"
    r = _run_cli(fake, "compile", *_CFG, "--target=nvptx", "--emit=cubin", "--name=attn",
                 "-o", str(tmp_path / "new" / "k.cubin"))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "new").iterdir()) == [
        "k.cubin", "k.cubin.c", "k.cubin.h", "k.cubin.json", "libk.so"]
    r = _run_cli(fake, "compile", *_CFG, "--target=nvptx")  # default emit, cached path
    assert r.returncode == 0 and r.stdout.strip().endswith("kernel.ptx"), r.stderr
    r = _run_cli(fake, "verify", *_CFG, "--target=nvptx")
    assert r.returncode == 1 and "--target=cpu" in r.stderr and "Traceback" not in r.stderr


def test_cli_old_tool_is_one_line(fake, monkeypatch):
    monkeypatch.setenv("FAKE_SWIN_AOT_VERSION", "swin-aot 0.1.0 (rpe dialect, LLVM 22.1.8)")
    r = _run_cli(fake, "verify", *_CFG)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "rebuild swin-aot" in r.stderr
