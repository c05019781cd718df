"""Shared fixtures.

Kernel tests use the ``build`` fixture, which needs ``swin-aot`` (found like
:func:`swin_opt.find_swin_aot`: ``$SWIN_AOT``, ``build/bin/swin-aot``, ``PATH``).
Without it they are skipped, unless ``SWIN_REQUIRE_AOT`` is set (CI), in
which case they fail.

PyTorch tests skip (``pytest.importorskip``) without torch, torchvision, timm
or transformers, unless ``SWIN_REQUIRE_TORCH`` is set (``scripts/test.sh`` in
its venv, CI): then a skip for failing to import one of them is a failure.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import swin_opt

HERE = Path(__file__).resolve().parent


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def aot_required() -> bool:
    return _env_flag("SWIN_REQUIRE_AOT")


def torch_required() -> bool:
    return _env_flag("SWIN_REQUIRE_TORCH")


TORCH_STACK = ("torch", "torchvision", "timm", "transformers", "monai")
# pytest.importorskip's reasons: "could not import 'timm.models...': ..." and
# "module 'torch' has __version__ '...', required is: ..."
_IMPORT_SKIP = re.compile(r"^(?:could not import|module) '([A-Za-z_][\w]*)")


def _torch_import_skip(reason: str) -> bool:
    m = _IMPORT_SKIP.match(reason)
    return bool(m) and m.group(1) in TORCH_STACK


def _fail_torch_skip(report, reason: str) -> None:
    report.outcome = "failed"
    report.longrepr = f"SWIN_REQUIRE_TORCH is set but the test skipped: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if (report.skipped and torch_required() and call.excinfo is not None
            and call.excinfo.errisinstance(pytest.skip.Exception)
            and _torch_import_skip(str(call.excinfo.value.msg))):
        _fail_torch_skip(report, call.excinfo.value.msg)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A module-level importorskip of the torch stack (a whole file skipped)."""
    report = (yield).get_result()
    if report.skipped and torch_required() and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        if _torch_import_skip(reason):
            _fail_torch_skip(report, reason)


@pytest.fixture(scope="session")
def aot_path() -> Path:
    """Path of the real swin-aot; skips (or fails under SWIN_REQUIRE_AOT) when absent."""
    try:
        return swin_opt.find_swin_aot()
    except swin_opt.SwinAotNotFoundError as exc:
        if aot_required():
            pytest.fail(f"SWIN_REQUIRE_AOT is set but {exc}", pytrace=False)
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def kernel_cache(tmp_path_factory) -> Path:
    """A kernel cache shared by the tests of one module (never the user's cache; in a
    test run by :func:`run_alone`, the cache of the suite that started it)."""
    inherited = os.environ.get(_FRESH_CACHE)
    if inherited:
        return Path(inherited)
    return tmp_path_factory.mktemp("kernel-cache")


_FRESH = "SWIN_OPT_TEST_FRESH_PROCESS"
_FRESH_CACHE = "SWIN_OPT_TEST_KERNEL_CACHE"


@pytest.fixture
def run_alone(request, kernel_cache):
    """For a test whose outcome could depend on what its process did before (torch
    and swin_opt keep per-process state: dynamo's caches, registered operators,
    loaded kernels, what was decided on a first call): ``if run_alone(): return``
    runs the test again, alone, in a new interpreter (whose failure fails it) and
    returns True; in that interpreter it returns False and the test runs."""

    def run() -> bool:
        if os.environ.get(_FRESH) == request.node.nodeid:
            return False
        env = dict(os.environ, **{_FRESH: request.node.nodeid, _FRESH_CACHE: str(kernel_cache)})
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "--tb=short", "--show-capture=no",
                               request.node.nodeid], cwd=request.config.rootpath, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.fail(f"{request.node.nodeid} failed in a fresh process:\n"
                        f"{(proc.stdout + proc.stderr)[-6000:]}", pytrace=False)
        return True

    return run


@pytest.fixture(scope="module")
def build(aot_path, kernel_cache):
    """``build(window, heads, head_dim, **kw)`` -> Kernel, cached per module."""

    def _build(*args, **kwargs):
        return swin_opt.compile(*args, cache_dir=kernel_cache, **kwargs)

    return _build


@pytest.fixture(scope="session")
def fake_aot(tmp_path_factory) -> Path:
    """An executable wrapper around tests/fake_swin_aot.py (needs a C compiler)."""
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler ({cc}) for the fake swin-aot")
    d = tmp_path_factory.mktemp("fake-aot")
    wrapper = d / "swin-aot"
    wrapper.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" "{HERE / "fake_swin_aot.py"}" "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


@pytest.fixture(scope="module")
def torch():
    """The torch module (the test skips without it)."""
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def opts(aot_path, kernel_cache):
    """Compile options for swap_attention: a per-module kernel cache."""
    return {"cache_dir": kernel_cache}


@pytest.fixture
def team():
    """The GNU OpenMP runtime the kernels run on (``libgomp.so.1``, torch's copy in a
    torch process): tests set its team size with ``omp_set_num_threads``; the size
    it had is restored afterwards."""
    gomp = ctypes.CDLL("libgomp.so.1")
    before = gomp.omp_get_max_threads()
    yield gomp
    gomp.omp_set_num_threads(before)
