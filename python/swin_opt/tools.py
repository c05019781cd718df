"""Finding ``swin-aot`` and checking its version.

:func:`find_swin_aot` locates the tool; :func:`tool_info` runs its
``--version`` once per binary (path, size, mtime) and refuses a tool that
predates this package or builds kernels of another ABI
(:data:`swin_opt.abi.KERNEL_ABI`). :func:`run_tool` is how every command of
the package is run (no stdin, output captured).

The wheel (the repository's ``pyproject.toml``) carries statically linked
``swin-aot`` and ``swin-opt`` in ``swin_opt/bin`` (:func:`bundled_tool`);
its ``swin-aot`` and ``swin-opt`` commands are :func:`swin_aot_main` and
:func:`swin_opt_main`, which become those tools.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Optional, Sequence, Tuple

from .abi import KERNEL_ABI
from .errors import CompileError, SwinAotNotFoundError, SwinAotVersionError

__all__ = ["find_swin_aot", "bundled_tool", "source_checkout", "ToolInfo", "tool_info",
           "clear_tool_cache", "run_tool", "last_line"]

#: Where the wheel puts its tools, inside the package (CMake's SWIN_PYTHON_WHEEL).
BUNDLED_TOOLS_DIR = Path(__file__).resolve().parent / "bin"


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def bundled_tool(name: str) -> Optional[Path]:
    """``swin_opt/bin/<name>`` (``swin-aot`` or ``swin-opt``) of an installed wheel,
    or None where the package carries no tools (a source checkout, a pure-Python
    install of ``python/``)."""
    path = BUNDLED_TOOLS_DIR / name
    return path if _executable(path) else None


def source_checkout() -> Optional[Path]:
    """The root of the swin-opt source checkout this package sits in (as
    ``<root>/python/swin_opt``, beside ``<root>/CMakeLists.txt`` and
    ``<root>/tools/swin-aot``), or None for an installed copy."""
    package = Path(__file__).resolve().parent
    root = package.parents[1]
    if (package.parent.name == "python" and (root / "CMakeLists.txt").is_file()
            and (root / "tools" / "swin-aot").is_dir()):
        return root
    return None


def find_swin_aot() -> Path:
    """Locate ``swin-aot``: ``$SWIN_AOT`` (an explicit choice wins), else the
    wheel's own (:func:`bundled_tool`), else, in a source checkout,
    ``<checkout>/build/bin/swin-aot``, else ``PATH``."""
    env = os.environ.get("SWIN_AOT")
    if env:
        path = Path(env).expanduser()
        if _executable(path):
            return path.resolve()
        raise SwinAotNotFoundError(f"SWIN_AOT={env!r} is not an executable file")
    bundled = bundled_tool("swin-aot")
    if bundled is not None:
        return bundled
    root = source_checkout()
    candidate = root / "build" / "bin" / "swin-aot" if root is not None else None
    if candidate is not None and _executable(candidate):
        return candidate
    found = shutil.which("swin-aot")
    if found:
        return Path(found).resolve()
    if candidate is not None:
        build = f"build this checkout (scripts/setup.sh, or cmake) into {candidate}, "
    else:
        # An installed copy without the wheel's tools (pip install of python/ alone,
        # or a wheel whose swin_opt/bin went missing).
        build = ("install the swin-opt wheel, which carries swin-aot (`pip install .` in a "
                 "swin-opt checkout builds it), ")
    raise SwinAotNotFoundError(
        f"swin-aot not found: set SWIN_AOT to the path of a swin-aot executable, {build}"
        "or put swin-aot on PATH")


def _exec_bundled(name: str) -> None:
    """Become the wheel's ``name`` with this process's arguments (the console
    scripts ``swin-aot`` and ``swin-opt``); exit 127 with a message if it is missing."""
    path = bundled_tool(name)
    if path is None:
        sys.stderr.write(f"{name}: this swin_opt ({Path(__file__).resolve().parent}) carries "
                         f"no {BUNDLED_TOOLS_DIR.name}/{name}: reinstall the swin-opt wheel\n")
        sys.exit(127)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(path, [str(path), *sys.argv[1:]])


def swin_aot_main() -> None:
    """The wheel's ``swin-aot`` command."""
    _exec_bundled("swin-aot")


def swin_opt_main() -> None:
    """The wheel's ``swin-opt`` command."""
    _exec_bundled("swin-opt")


@dataclasses.dataclass(frozen=True)
class ToolInfo:
    """A checked ``swin-aot``: its path, ``--version`` and the file's identity."""

    path: Path
    version: str  # the whole --version output (part of the cache key)
    semver: str
    kernel_abi: int
    size: int
    mtime_ns: int


#: The first line of ``swin-aot --version``: ``swin-aot <semver> (kernel ABI <n>)``.
_VERSION_LINE = re.compile(
    r"swin-aot (\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?) \(kernel ABI (\d+)\)")


def _parse_version(path: Path, text: str) -> Tuple[str, int]:
    """``(semver, kernel ABI)`` from ``--version``; SwinAotVersionError when the
    tool predates ABI reporting or speaks another ABI than this package."""
    first = text.splitlines()[0].strip() if text.strip() else ""
    match = _VERSION_LINE.fullmatch(first)
    rebuild = ("rebuild swin-aot (scripts/setup.sh) from the same checkout as this Python "
               "package, or point SWIN_AOT at one that matches")
    if match is None:
        raise SwinAotVersionError(
            f"{path} is too old for this swin_opt: `--version` does not start with "
            f"'swin-aot <version> (kernel ABI <n>)' (got {first!r}); {rebuild}",
            command=[str(path), "--version"])
    abi = int(match.group(2))
    if abi != KERNEL_ABI:
        raise SwinAotVersionError(
            f"{path} ({match.group(1)}) builds kernels of ABI {abi}, but this swin_opt calls "
            f"ABI {KERNEL_ABI}; {rebuild}", command=[str(path), "--version"])
    return match.group(1), abi


_tool_lock = threading.Lock()
_tool_cache: dict = {}


def run_tool(cmd: Sequence[str]) -> subprocess.CompletedProcess:
    """Run ``cmd`` without stdin, capturing its output as text; never raises on failure."""
    return subprocess.run([str(c) for c in cmd], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, check=False)


def tool_info(path: Path) -> ToolInfo:
    """The checked ``swin-aot`` at ``path`` (``--version`` run once per path, size and
    mtime): CompileError when it fails, SwinAotVersionError for another kernel ABI."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _tool_lock:
        info = _tool_cache.get(key)
    if info is not None:
        return info
    ver = run_tool([path, "--version"])
    if ver.returncode != 0:
        raise CompileError(f"`{path} --version` failed (exit {ver.returncode}): "
                           f"{last_line(ver.stderr or ver.stdout)}",
                           command=[str(path), "--version"], returncode=ver.returncode,
                           stderr=ver.stderr)
    semver, kernel_abi = _parse_version(path, ver.stdout)
    info = ToolInfo(path=path, version=(ver.stdout + ver.stderr).strip(), semver=semver,
                     kernel_abi=kernel_abi, size=st.st_size, mtime_ns=st.st_mtime_ns)
    with _tool_lock:
        _tool_cache[key] = info
    return info


def clear_tool_cache() -> None:
    """Forget the ``--version`` results :func:`tool_info` remembered."""
    with _tool_lock:
        _tool_cache.clear()


def last_line(text: str) -> str:
    """The last non-blank line of a tool's output (its error, for the one-line messages)."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"
