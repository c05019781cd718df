"""Shared fixtures.

Kernel tests use the ``build`` fixture, which needs ``swin-aot`` (found like
:func:`swin_opt.find_swin_aot`: ``$SWIN_AOT``, ``build/bin/swin-aot``, ``PATH``).
Without it they are skipped, unless ``SWIN_REQUIRE_AOT`` is set (CI), in
which case they fail.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

import swin_opt

HERE = Path(__file__).resolve().parent


def aot_required() -> bool:
    return os.environ.get("SWIN_REQUIRE_AOT", "").strip().lower() not in ("", "0", "false", "no")


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
    """A kernel cache shared by the tests of one module (never the user's cache)."""
    return tmp_path_factory.mktemp("kernel-cache")


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
