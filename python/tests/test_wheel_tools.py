"""What the wheel adds to the package (no compiler needed): the tools it carries in
``swin_opt/bin`` are found (after ``$SWIN_AOT``, before the build tree and PATH),
and its ``swin-aot`` / ``swin-opt`` commands become them.

The wheel itself is built, installed and tested with LLVM hidden by
``scripts/wheel.sh`` (``test/wheel/test_installed_wheel.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import swin_opt

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
