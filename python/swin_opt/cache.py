"""The on-disk kernel cache: one directory per built configuration and
``--emit`` (``k-<hash>``, see :func:`entry_name`), published atomically by
:mod:`swin_opt.build` (and, for the dense libraries, :mod:`swin_opt.dense`); its
location (:func:`get_cache_dir`), listing (:func:`cache_entries`), pruning
and clearing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

from .abi import KernelAbi
from .abi import load as read_abi
from .config import EMITS, KernelConfig, describe
from .tools import ToolInfo

__all__ = ["get_cache_dir", "clear_cache", "CacheEntry", "cache_entries", "prune_cache",
           "entry_name", "touch", "Artifacts", "META_FILE"]

#: Bumped whenever the cache layout or the meaning of a cache key changes.
#: 2: one directory per (configuration, emit), with the ABI description.
#: 3: side files named after the whole output (kernel.so.h).
FORMAT = 3
#: The metadata of an entry (its configuration, --emit, command, tool version and
#: build time); written last, so an entry with it is complete. Its mtime is the
#: entry's last use.
META_FILE = "config.json"
#: Stem of swin-aot's outputs in an entry: kernel.<ext>, kernel.<ext>.h,
#: kernel.<ext>.json (the ABI) and, for nvptx, kernel.<ext>.c (the host runtime).
STEM = "kernel"
#: The nvptx host runtime, built from kernel.<ext>.c.
RUNTIME_LIB = "runtime.so"
#: Emits beside whose header swin-aot writes the ABI description.
ABI_EMITS = ("obj", "so", "ptx", "cubin", "fatbin")


def get_cache_dir() -> Path:
    """The kernel cache: ``$SWIN_OPT_CACHE_DIR``, else ``$XDG_CACHE_HOME/swin_opt``,
    else ``~/.cache/swin_opt``."""
    env = os.environ.get("SWIN_OPT_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "swin_opt"


def clear_cache(directory: Optional[os.PathLike] = None) -> int:
    """Delete every cached kernel (in ``directory`` or :func:`get_cache_dir`); return how many.

    Kernels already loaded in this process keep working.
    """
    root = Path(directory) if directory is not None else get_cache_dir()
    if not root.is_dir():
        return 0
    removed = 0
    for entry in root.iterdir():
        if entry.is_dir() and (entry.name.startswith("k-") or entry.name.startswith(".build-")):
            shutil.rmtree(entry, ignore_errors=True)
            removed += entry.name.startswith("k-")
    return removed


@dataclasses.dataclass(frozen=True)
class CacheEntry:
    """One cached kernel directory (see :func:`cache_entries`)."""

    path: Path
    size: int  # bytes, all files
    last_used: float  # seconds since the epoch: build, or last compile() that found it
    description: str  # the configuration (describe()) and --emit, from its metadata

    @property
    def key(self) -> str:
        return self.path.name


def _dir_size(path: Path) -> int:
    total = 0
    for f in path.rglob("*"):
        try:
            if f.is_file() and not f.is_symlink():
                total += f.stat().st_size
        except OSError:
            pass
    return total


def _describe_entry(info: dict) -> str:
    """What an entry's metadata says it holds: a kernel's configuration, or the
    description a dense library (:mod:`swin_opt.dense`) gives itself."""
    if "config" not in info and "description" in info:
        return str(info["description"])
    cfg = dict(info["config"])
    for name in ("window", "resolution", "shift"):
        if isinstance(cfg.get(name), list):
            cfg[name] = tuple(cfg[name])
    return describe(KernelConfig(**cfg))


def cache_entries(directory: Optional[os.PathLike] = None) -> list:
    """The kernels in the cache (``directory`` or :func:`get_cache_dir`) as
    :class:`CacheEntry`, least recently used first.  Entries being built
    (``.build-*``) are not listed."""
    root = Path(directory) if directory is not None else get_cache_dir()
    if not root.is_dir():
        return []
    out = []
    for entry in root.iterdir():
        if not (entry.is_dir() and entry.name.startswith("k-")):
            continue
        meta = entry / META_FILE
        try:
            last = meta.stat().st_mtime
        except OSError:
            last = entry.stat().st_mtime
        try:
            info = json.loads(meta.read_text())
            desc = f"{_describe_entry(info)} emit={info.get('emit', '?')}"
        except (OSError, ValueError, KeyError, TypeError):
            desc = "(incomplete: no readable metadata)"
        out.append(CacheEntry(entry, _dir_size(entry), last, desc))
    return sorted(out, key=lambda e: (e.last_used, e.key))


def prune_cache(directory: Optional[os.PathLike] = None, *, older_than_days: Optional[float] = None,
                max_size: Optional[int] = None, dry_run: bool = False) -> list:
    """Delete cached kernels not used for ``older_than_days`` days, then the least
    recently used ones until the cache holds at most ``max_size`` bytes.  Returns the
    removed :class:`CacheEntry` list (what would be removed with ``dry_run``).
    Kernels already loaded in a process keep working."""
    entries = cache_entries(directory)
    removed = []
    if older_than_days is not None:
        limit = time.time() - older_than_days * 86400.0
        removed = [e for e in entries if e.last_used < limit]
    if max_size is not None:
        kept = [e for e in entries if e not in removed]
        total = sum(e.size for e in kept)
        for e in kept:  # least recently used first
            if total <= max_size:
                break
            removed.append(e)
            total -= e.size
    if not dry_run:
        for e in removed:
            shutil.rmtree(e.path, ignore_errors=True)
    return removed


@contextlib.contextmanager
def staging(root: Path):
    """A fresh directory in ``root`` (created if missing) for a build to write
    into before :func:`publish` renames it, removed on leaving when it was not
    published (a failed build, or another process's entry kept)."""
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    try:
        yield tmp
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def publish(staging: Path, final: Path, meta: dict) -> None:
    """Writes ``meta`` into ``staging`` (a directory built beside ``final``)
    and renames it to ``final``, atomically: a reader sees the whole entry or
    none. When another process published the same entry first, theirs is
    kept (``staging`` is left for the caller to remove)."""
    (staging / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    try:
        os.rename(staging, final)
    except OSError:
        if not (final / META_FILE).is_file():
            raise


def touch(path: Path) -> None:
    """Mark a cache entry as used (its metadata's mtime) for :func:`prune_cache`."""
    try:
        os.utime(path)
    except OSError:
        pass


@functools.lru_cache(maxsize=None)
def _host_cpu() -> str:
    """A fingerprint of this machine's CPU (model and feature flags)."""
    parts = [platform.machine(), platform.processor()]
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key = line.split(":", 1)[0].strip()
                if key in ("model name", "flags", "Features", "CPU implementer", "CPU part"):
                    parts.append(line.strip())
                elif not line.strip() and len(parts) > 2:
                    break  # first processor block is enough
    except OSError:
        pass
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()



def entry_name(command: Sequence[str], emit: str, table_bytes: Optional[bytes], tool: ToolInfo,
               host_specific: bool) -> str:
    """The cache directory name of a build: ``k-`` and a hash of everything that
    determines its files (``swin-aot``'s flags ``command``, ``emit``, a baked table
    or an ``--input`` module's text as ``table_bytes``, the tool's version and file
    identity and, for code built for this machine's CPU (``host_specific``), the
    CPU)."""
    payload = {
        "format": FORMAT,
        "args": list(command),
        "emit": emit,
        "table_sha256": hashlib.sha256(table_bytes).hexdigest() if table_bytes is not None else None,
        "tool_version": tool.version,
        "tool_size": tool.size,
        "tool_mtime_ns": tool.mtime_ns,
        # Code generated for the build machine's CPU must not be reused on another
        # machine sharing the cache directory.
        "host_cpu": _host_cpu() if host_specific else None,
    }
    blob = json.dumps(payload, sort_keys=True).encode()
    return "k-" + hashlib.sha256(blob).hexdigest()[:40]


@dataclasses.dataclass(frozen=True)
class Artifacts:
    """The files of one compiled configuration and ``--emit`` (in the cache).

    ``main`` is swin-aot's ``-o`` output; ``header`` the C header (not for
    ``mlir`` and ``llvm``); ``abi`` the ABI description (``obj``/``so``/``ptx``/``cubin``/
    ``fatbin``); ``runtime`` the GPU host runtime ``.c`` (nvptx binaries);
    ``library`` what :mod:`ctypes` loads: the CPU ``.so``, or the runtime
    built into a shared library.
    """

    config: KernelConfig
    emit: str
    main: Path
    header: Optional[Path]
    abi: Optional[Path]
    runtime: Optional[Path]
    library: Optional[Path]

    @classmethod
    def in_directory(cls, cfg: KernelConfig, emit: str, directory: Path) -> "Artifacts":
        gpu_binary = cfg.target == "nvptx" and emit != "mlir"
        main = directory / (STEM + EMITS[cfg.target][emit])  # side files: <main>.h, ...
        return cls(
            config=cfg, emit=emit, main=main,
            header=Path(f"{main}.h") if emit not in ("mlir", "llvm") else None,
            abi=Path(f"{main}.json") if emit in ABI_EMITS else None,
            runtime=Path(f"{main}.c") if gpu_binary else None,
            library=(directory / RUNTIME_LIB if gpu_binary
                     else directory / (STEM + ".so") if emit == "so" else None))

    @property
    def files(self) -> list:
        """Every output path, once (the main output first; for ``so`` it is the library)."""
        return list(dict.fromkeys(f for f in (self.main, self.header, self.runtime, self.abi,
                                              self.library) if f is not None))

    def load_abi(self) -> KernelAbi:
        """The ABI description of the kernel (ValueError for emits without one)."""
        if self.abi is None:
            raise ValueError(f"--emit={self.emit} has no C ABI description")
        return read_abi(self.abi)
