"""What the wheel adds to the package (no compiler needed): the tools it carries in
``swin_opt/bin`` are found (after ``$SWIN_AOT``, before the build tree and PATH),
its ``swin-aot`` / ``swin-opt`` commands become them, and ``swap_attention``
warns once about framework versions outside the supported ranges.

The wheel itself is built, installed and tested with LLVM hidden by
``scripts/wheel.sh`` (``test/wheel/test_installed_wheel.py``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import types
import warnings
from pathlib import Path

import pytest

import swin_opt
from swin_opt.torch import swap

REPO = Path(__file__).resolve().parents[2]

#: A stand-in tool: prints its name and arguments, exits with status 3.
FAKE_TOOL = '#!/bin/sh\necho "${0##*/} $*"\nexit 3\n'


def _installed_copy(tmp_path: Path, tools=("swin-aot", "swin-opt")) -> Path:
    """A copy of the package in a site-packages directory (not a checkout), carrying
    stand-ins for ``tools`` in ``swin_opt/bin`` like the wheel; returns the directory."""
    site = tmp_path / "prefix" / "lib" / "python3" / "site-packages"
    shutil.copytree(Path(swin_opt.__file__).parent, site / "swin_opt",
                    ignore=shutil.ignore_patterns("__pycache__", "bin"))
    for name in tools:
        tool = site / "swin_opt" / "bin" / name
        tool.parent.mkdir(exist_ok=True)
        tool.write_text(FAKE_TOOL)
        tool.chmod(0o755)
    return site


def _python(site: Path, code: str, tmp_path: Path, argv=(), **env) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter that imports the copy in ``site``, without
    $SWIN_AOT and with ``env`` (PATH: an empty directory unless given)."""
    full = {k: v for k, v in os.environ.items() if k != "SWIN_AOT"}
    full.update(PYTHONPATH=str(site), PATH=str(tmp_path / "empty-path"))
    full.update(env)
    return subprocess.run([sys.executable, "-c", code, *argv], env=full, capture_output=True,
                          text=True)


_FIND = "import swin_opt\nprint(swin_opt.find_swin_aot())\n"


def test_the_bundled_tool_is_found_first(tmp_path):
    site = _installed_copy(tmp_path)
    on_path = tmp_path / "on-path"
    on_path.mkdir()
    (on_path / "swin-aot").write_text(FAKE_TOOL)
    (on_path / "swin-aot").chmod(0o755)
    proc = _python(site, _FIND, tmp_path, PATH=str(on_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(site / "swin_opt" / "bin" / "swin-aot")


def test_swin_aot_overrides_the_bundled_tool(tmp_path):
    """An explicit $SWIN_AOT wins (a tool under development, a stand-in)."""
    site = _installed_copy(tmp_path)
    other = tmp_path / "other-swin-aot"
    other.write_text(FAKE_TOOL)
    other.chmod(0o755)
    proc = _python(site, _FIND, tmp_path, SWIN_AOT=str(other))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(other)


def test_hint_of_an_installed_copy_without_tools(tmp_path):
    """A pure-Python install (python/ alone): the hint names the wheel, not a build tree."""
    site = _installed_copy(tmp_path, tools=())
    code = ("import swin_opt\ntry:\n    swin_opt.find_swin_aot()\n"
            "except swin_opt.SwinAotNotFoundError as exc:\n    print(exc)\n")
    message = _python(site, code, tmp_path).stdout.strip()
    assert "wheel" in message and "pip install" in message, message
    assert "SWIN_AOT" in message and "PATH" in message, message
    assert "build/bin" not in message, message


@pytest.mark.parametrize("name,main", [("swin-aot", "swin_aot_main"),
                                       ("swin-opt", "swin_opt_main")])
def test_console_scripts_become_the_bundled_tools(tmp_path, name, main):
    site = _installed_copy(tmp_path)
    code = f"from swin_opt.tools import {main}\n{main}()\n"
    proc = _python(site, code, tmp_path, argv=["--version", "a b"])
    # the tool's own output and exit status, with the arguments as given
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == f"{name} --version a b\n"


def test_console_script_without_the_tool(tmp_path):
    site = _installed_copy(tmp_path, tools=())
    proc = _python(site, "from swin_opt.tools import swin_aot_main\nswin_aot_main()\n", tmp_path)
    assert proc.returncode == 127
    assert "carries no bin/swin-aot" in proc.stderr and "reinstall" in proc.stderr, proc.stderr


# --------------------------------------------------------------------------- #
# Supported framework versions
# --------------------------------------------------------------------------- #
def _pins() -> dict:
    text = (REPO / "python" / "requirements-torch.txt").read_text()
    return dict(re.findall(r"^(torch|torchvision|timm|transformers|monai)==(\S+)", text, re.M))


def test_the_tested_pins_are_supported():
    pins = _pins()
    assert sorted(pins) == sorted(swap.SUPPORTED_VERSIONS)
    for package, version in pins.items():
        low, high = swap.SUPPORTED_VERSIONS[package]
        assert low <= swap._version_tuple(version) < high, (package, version)


@pytest.mark.parametrize("text,parsed", [("2.15.0+cu130", (2, 15, 0)), ("1.0.31", (1, 0, 31)),
                                         ("5.24.0.dev0", (5, 24, 0)), ("2.7.0rc1", (2, 7, 0)),
                                         ("0.29", (0, 29))])
def test_version_tuple(text, parsed):
    assert swap._version_tuple(text) == parsed


def test_one_warning_outside_the_supported_versions(monkeypatch):
    monkeypatch.setattr(swap, "_version_warned", set())
    for name, version in (("torch", "1.13.1"), ("timm", "0.9.16"), ("transformers", "5.24.0")):
        monkeypatch.setitem(sys.modules, name, types.SimpleNamespace(__version__=version))
    with pytest.warns(UserWarning) as record:
        swap._check_versions({"timm", "transformers"})
    assert len(record) == 1
    message = str(record[0].message)
    assert "torch 1.13.1 (supported: >=2.7,<3)" in message, message
    assert "timm 0.9.16 (supported: >=1.0,<2)" in message, message
    assert "transformers" not in message, message
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        swap._check_versions({"timm", "transformers"})  # once per process
        monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__="2.15.0"))
        monkeypatch.setitem(sys.modules, "timm", types.SimpleNamespace(__version__="1.0.31"))
        swap._check_versions({"timm", "transformers"})  # all supported
