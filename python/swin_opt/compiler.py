"""Build, cache and call ``swin-aot`` window-attention kernels.

:func:`compile` turns a configuration into ``swin-aot``'s outputs (for the
CPU a shared library, for ``target="nvptx"`` PTX/cubin/fatbin plus a host
runtime built into a shared library), caches them on disk and returns a
:class:`Kernel` (CPU) or :class:`swin_opt.cuda.GpuKernel` that calls the C
function through :mod:`ctypes`.  Every compile -- CPU or GPU, the Python API
or the command line -- goes through the same configuration, command line,
cache and error path here.

The C ABI of a kernel is not re-derived here: ``swin-aot`` writes a
machine-readable description beside every header (``<output>.json``, see
:mod:`swin_opt.abi`), and the kernels build their ``ctypes`` argument types,
argument order and shape checks from it.  ``swin-aot --version`` must report
the kernel ABI this package speaks (:data:`swin_opt.abi.KERNEL_ABI`).

The kernels use OpenMP: ``OMP_NUM_THREADS`` (read when the library is first
loaded) sets the thread count.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import hashlib
import json
import logging
import math
import numbers
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from . import abi as _abi
from . import reference as _ref

__all__ = [
    "Artifacts",
    "Kernel",
    "KernelConfig",
    "CompileError",
    "SwinAotNotFoundError",
    "SwinAotVersionError",
    "compile",
    "find_swin_aot",
    "make_config",
    "get_cache_dir",
    "clear_cache",
    "cache_entries",
    "prune_cache",
    "describe",
    "normalize_dtype",
    "float32_to_bf16_bits",
    "bf16_bits_to_float32",
]

#: Bumped whenever the cache layout or the meaning of a cache key changes.
#: 2: one directory per (configuration, emit), with the ABI description.
#: 3: side files named after the whole output (kernel.so.h).
_CACHE_FORMAT = 3
_DEFAULT_NAME = "swin_window_attention"
#: Stem of swin-aot's outputs in a cache directory: kernel.<ext>, kernel.<ext>.h,
#: kernel.<ext>.json (the ABI) and, for nvptx, kernel.<ext>.c (the host runtime).
_STEM = "kernel"
#: The nvptx host runtime, built from kernel.<ext>.c.
_RUNTIME_LIB = "runtime.so"
_META_FILE = "config.json"
#: Output extension of each --emit, per target (swin-aot refuses other pairs).
_EMITS = {
    "cpu": {"so": ".so", "obj": ".o", "llvm": ".ll", "mlir": ".mlir"},
    "nvptx": {"ptx": ".ptx", "cubin": ".cubin", "fatbin": ".fatbin", "mlir": ".mlir"},
}
#: Emits beside whose header swin-aot writes the ABI description.
_ABI_EMITS = ("obj", "so", "ptx", "cubin", "fatbin")
_DEFAULT_EMIT = {"cpu": "so", "nvptx": "ptx"}
_DEFAULT_CHIP = "sm_90"

_DTYPE_ALIASES = {
    "float32": "f32", "f32": "f32", "fp32": "f32", "float": "f32",
    "float16": "f16", "f16": "f16", "fp16": "f16", "half": "f16",
    "bfloat16": "bf16", "bf16": "bf16",
}
_DTYPE_NAMES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
_STORAGE = _abi.STORAGE
_CLI_PADDING = {"pad_then_shift": "pad-then-shift", "shift_then_pad": "shift-then-pad"}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_log = logging.getLogger("swin_opt")


class SwinAotNotFoundError(FileNotFoundError):
    """The ``swin-aot`` executable could not be located."""


class CompileError(RuntimeError):
    """``swin-aot`` rejected a configuration or failed to build it."""

    def __init__(self, message: str, *, command: Sequence[str] = (), returncode: int = 0,
                 stderr: str = ""):
        super().__init__(message)
        self.command = list(command)
        self.returncode = returncode
        self.stderr = stderr


class SwinAotVersionError(CompileError):
    """``swin-aot`` is older than this package or speaks another kernel ABI: rebuild it."""


# --------------------------------------------------------------------------- #
# bfloat16 helpers
# --------------------------------------------------------------------------- #
def float32_to_bf16_bits(x) -> np.ndarray:
    """Round float32 values to bfloat16 (nearest, ties to even); return the raw ``uint16`` bits.

    NaNs stay (quiet) NaNs; values that round past the largest bfloat16 become
    infinities, as IEEE rounding prescribes.
    """
    arr = np.asarray(x, dtype=np.float32)
    bits = np.ascontiguousarray(arr).view(np.uint32).astype(np.uint64)
    lsb = (bits >> np.uint64(16)) & np.uint64(1)
    rounded = (bits + np.uint64(0x7FFF) + lsb) >> np.uint64(16)
    nan = (bits & np.uint64(0x7FFFFFFF)) > np.uint64(0x7F800000)
    quiet = (bits >> np.uint64(16)) | np.uint64(0x0040)
    return np.where(nan, quiet, rounded).astype(np.uint16).reshape(arr.shape)


def bf16_bits_to_float32(bits) -> np.ndarray:
    """Widen raw bfloat16 bits (``uint16``) to float32 (exact)."""
    bits = np.asarray(bits)
    if bits.dtype != np.uint16:
        if bits.dtype.name == "bfloat16":  # e.g. ml_dtypes.bfloat16
            bits = bits.view(np.uint16)
        else:
            raise TypeError(f"expected uint16 bfloat16 bits, got dtype {bits.dtype}")
    wide = np.ascontiguousarray(bits).astype(np.uint32) << np.uint32(16)
    return wide.view(np.float32).reshape(bits.shape)


def normalize_dtype(dtype: Any) -> str:
    """Map ``"float32"``/``np.float16``/``torch.bfloat16``/... to ``"f32"``/``"f16"``/``"bf16"``."""
    if isinstance(dtype, str):
        name = dtype
    elif isinstance(dtype, type) and issubclass(dtype, np.generic) or isinstance(dtype, np.dtype):
        name = np.dtype(dtype).name
    else:
        name = str(dtype)  # torch.float16 -> "torch.float16"
    key = name.strip().lower()
    if key.startswith("torch."):
        key = key[len("torch."):]
    try:
        return _DTYPE_ALIASES[key]
    except KeyError:
        raise ValueError(f"unsupported dtype {dtype!r}; expected float32, float16 or bfloat16") from None


# --------------------------------------------------------------------------- #
# Configuration
# --------------------------------------------------------------------------- #
def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what} must be an int, got {value!r}")
    if value < 1:
        raise ValueError(f"{what} must be positive, got {value}")
    return int(value)


def _csv(values: Sequence[int]) -> str:
    return ",".join(str(v) for v in values)


@dataclasses.dataclass(frozen=True)
class KernelConfig:
    """A normalised kernel configuration (everything but a baked table)."""

    window: Tuple[int, ...]
    heads: int
    head_dim: int
    scale: Optional[float] = None
    resolution: Optional[Tuple[int, ...]] = None
    shift: Optional[Tuple[int, ...]] = None
    padding: Optional[str] = None
    layout: str = "windows"
    dtype: str = "f32"
    target: str = "cpu"
    name: str = _DEFAULT_NAME
    cpu: Optional[str] = None
    parallel: bool = True
    #: Token layout: q, k, v as one ``[batch, L, 3, heads, head_dim]`` qkv map.
    packed_qkv: bool = False
    #: ``swin-aot --kernel``: None (the target's default), ``"tiles"``, or the
    #: GPU's ``"warps"``/``"rows"`` (on the CPU: emulated, to test them).
    kernel: Optional[str] = None
    #: ``swin-aot --chip`` (``target="nvptx"`` only).
    chip: Optional[str] = None
    #: ``swin-aot --grad``: also the gradient's entry point (:meth:`Kernel.backward`).
    grad: bool = False
    #: ``swin-aot --cosine``: SwinV2's scaled cosine attention; the kernel
    #: takes the raw per-head ``logit_scale`` after the table.
    cosine: bool = False

    @property
    def tokens_per_window(self) -> int:
        """``N``: tokens in one window."""
        return math.prod(self.window)

    @property
    def table_rows(self) -> int:
        """Rows of the bias table, ``prod(2W - 1)``."""
        return math.prod(2 * w - 1 for w in self.window)

    @property
    def channels(self) -> int:
        """``heads * head_dim``."""
        return self.heads * self.head_dim

    @property
    def effective_scale(self) -> float:
        """The q scale the kernel applies (``head_dim ** -0.5`` unless given; 1 for cosine)."""
        if self.scale is not None:
            return self.scale
        return 1.0 if self.cosine else self.head_dim ** -0.5

    @property
    def padded_resolution(self) -> Optional[Tuple[int, ...]]:
        """Resolution rounded up to whole windows (``None`` without a resolution)."""
        if self.resolution is None:
            return None
        return _ref.padded_resolution(self.resolution, self.window)

    @property
    def windows_per_image(self) -> Optional[int]:
        """``nW`` of the (padded) resolution, or ``None`` without a resolution."""
        if self.resolution is None:
            return None
        return _ref.windows_per_image(self.resolution, self.window)

    @property
    def storage_dtype(self) -> np.dtype:
        """NumPy dtype of q/k/v/table/out buffers (``uint16`` bits for bfloat16)."""
        return _STORAGE[self.dtype]

    def aot_args(self) -> list:
        """``swin-aot`` flags for this configuration (without table, emit and output)."""
        args = [
            f"--window={_csv(self.window)}",
            f"--heads={self.heads}",
            f"--head-dim={self.head_dim}",
        ]
        if self.scale is not None:
            args.append(f"--scale={self.scale!r}")
        if self.resolution is not None:
            # For window layout with padding the kernel sees the padded map.
            res = self.resolution if self.layout == "tokens" else self.padded_resolution
            args.append(f"--resolution={_csv(res)}")
            args.append(f"--shift={_csv(self.shift)}")
        if self.layout != "windows":
            args.append(f"--layout={self.layout}")
            if self.padding is not None:
                args.append(f"--padding={_CLI_PADDING[self.padding]}")
            if self.packed_qkv:
                args.append("--packed-qkv")
        if self.cosine:
            args.append("--cosine")
        args += [f"--dtype={self.dtype}", f"--target={self.target}"]
        if self.name != _DEFAULT_NAME:
            args.append(f"--name={self.name}")
        if self.cpu is not None:
            args.append(f"--cpu={self.cpu}")
        if not self.parallel:
            args.append("--no-parallel")
        if self.kernel is not None:
            args.append(f"--kernel={self.kernel}")
        if self.chip is not None:
            args.append(f"--chip={self.chip}")
        if self.grad:
            args.append("--grad")
        return args


def make_config(window, heads: int, head_dim: int, *, scale: Optional[float] = None,
                resolution=None, shift=None, padding: Optional[str] = None,
                layout: str = "windows", dtype: Any = "float32", target: str = "cpu",
                name: Optional[str] = None, cpu: Optional[str] = None,
                parallel: bool = True, packed_qkv: bool = False,
                kernel: Optional[str] = None, chip: Optional[str] = None,
                cosine: bool = False, grad: bool = False) -> KernelConfig:
    """Validate and normalise a configuration (the arguments of :func:`compile` but the table).

    Only structural checks happen here (types, ranks, positivity, names, divisibility
    of the resolution); semantic limits such as ``shift < window`` are left to
    ``swin-aot``, whose error is raised as :class:`CompileError`.
    """
    try:
        win = _ref.normalize_window(window)
    except TypeError as exc:
        raise TypeError(str(exc)) from None
    if len(win) not in (2, 3):
        raise ValueError(f"window must have 2 or 3 axes, got {win}")
    heads = _positive_int(heads, "heads")
    head_dim = _positive_int(head_dim, "head_dim")
    if scale is not None:
        if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
            raise TypeError(f"scale must be a real number, got {scale!r}")
        scale = float(scale)
        if not math.isfinite(scale):
            raise ValueError(f"scale must be finite, got {scale}")
    if layout not in ("windows", "tokens"):
        raise ValueError(f"layout must be 'windows' or 'tokens', got {layout!r}")
    pad = _ref.normalize_padding(padding)
    if resolution is None:
        if shift is not None and any(_ref.normalize_shift(shift, len(win))):
            raise ValueError("shift requires resolution (the mask depends on the feature-map size)")
        if pad is not None:
            raise ValueError("padding requires resolution")
        if layout == "tokens":
            raise ValueError("layout='tokens' requires resolution")
        res = sft = None
    else:
        if isinstance(resolution, numbers.Integral):
            resolution = (resolution,) * len(win)
        res = tuple(_positive_int(r, "resolution entry") for r in resolution)
        if len(res) != len(win):
            raise ValueError(f"resolution {res} must have as many axes as window {win}")
        sft = _ref.normalize_shift(shift, len(win))
        # Swin's rule (and swin-aot's): along an axis where the map is not
        # larger than the window, the window shrinks to the map and the
        # shift is 0. The table is then the effective window's.
        win = tuple(min(w, r) for w, r in zip(win, res))
        sft = tuple(0 if r <= w else s for s, w, r in zip(sft, win, res))
        if pad is None and any(r % w for r, w in zip(res, win)):
            raise ValueError(
                f"resolution {res} is not divisible by window {win}; pass padding="
                "'pad_then_shift' (HF/torchvision) or 'shift_then_pad' (timm)"
            )
    if cpu is not None and (not isinstance(cpu, str) or not cpu or "=" in cpu):
        raise ValueError(f"cpu must be a CPU name such as 'native' or 'x86-64-v3', got {cpu!r}")
    if target not in _EMITS:
        raise ValueError(f"target must be one of {sorted(_EMITS)}, got {target!r}")
    if target == "nvptx":
        if chip is None:
            chip = _DEFAULT_CHIP
        if not isinstance(chip, str) or not re.fullmatch(r"sm_\d+[a-z]?", chip):
            raise ValueError(f"chip must be an NVIDIA architecture such as 'sm_90', got {chip!r}")
        if cpu is not None:
            raise ValueError("cpu applies to target='cpu' only")
    elif chip is not None:
        raise ValueError("chip applies to target='nvptx' only")
    if name is None:
        name = _DEFAULT_NAME
    if not isinstance(name, str) or not _IDENT.match(name):
        raise ValueError(f"name must be a C identifier, got {name!r}")
    if packed_qkv and layout != "tokens":
        raise ValueError("packed_qkv requires layout='tokens'")
    if cosine and target != "cpu":
        raise ValueError("cosine=True kernels are built for target='cpu' only (the GPU "
                         "kernels have no cosine attention yet)")
    if kernel is not None and kernel not in ("tiles", "warps", "rows"):
        raise ValueError(f"kernel must be 'tiles', 'warps' or 'rows', got {kernel!r}")
    dtype = normalize_dtype(dtype)
    if grad and (target != "cpu" or dtype != "f32" or cosine):
        raise ValueError("grad=True (the backward kernel) needs target='cpu', float32 and "
                         "no cosine attention")
    return KernelConfig(window=win, heads=heads, head_dim=head_dim, scale=scale, resolution=res,
                        shift=sft, padding=pad, layout=layout, dtype=dtype,
                        target=target, name=name, cpu=cpu, parallel=bool(parallel),
                        packed_qkv=bool(packed_qkv), kernel=kernel, chip=chip,
                        cosine=bool(cosine), grad=bool(grad))


# --------------------------------------------------------------------------- #
# Tool discovery
# --------------------------------------------------------------------------- #
def _repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def find_swin_aot() -> Path:
    """Locate ``swin-aot``: ``$SWIN_AOT``, else ``<repo>/build/bin/swin-aot``, else ``PATH``."""
    env = os.environ.get("SWIN_AOT")
    if env:
        path = Path(env).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            return path.resolve()
        raise SwinAotNotFoundError(f"SWIN_AOT={env!r} is not an executable file")
    candidate = _repo_root() / "build" / "bin" / "swin-aot"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    found = shutil.which("swin-aot")
    if found:
        return Path(found).resolve()
    raise SwinAotNotFoundError(
        "swin-aot not found: set SWIN_AOT to its path, build it into "
        f"{candidate}, or put it on PATH"
    )


@dataclasses.dataclass(frozen=True)
class _ToolInfo:
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
    if abi != _abi.KERNEL_ABI:
        raise SwinAotVersionError(
            f"{path} ({match.group(1)}) builds kernels of ABI {abi}, but this swin_opt calls "
            f"ABI {_abi.KERNEL_ABI}; {rebuild}", command=[str(path), "--version"])
    return match.group(1), abi


_tool_lock = threading.Lock()
_tool_cache: dict = {}


def _run_tool(cmd: Sequence[str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, check=False)


def _tool_info(path: Path) -> _ToolInfo:
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _tool_lock:
        info = _tool_cache.get(key)
    if info is not None:
        return info
    ver = _run_tool([path, "--version"])
    if ver.returncode != 0:
        raise CompileError(f"`{path} --version` failed (exit {ver.returncode}): "
                           f"{_last_line(ver.stderr or ver.stdout)}",
                           command=[str(path), "--version"], returncode=ver.returncode,
                           stderr=ver.stderr)
    semver, kernel_abi = _parse_version(path, ver.stdout)
    info = _ToolInfo(path=path, version=(ver.stdout + ver.stderr).strip(), semver=semver,
                     kernel_abi=kernel_abi, size=st.st_size, mtime_ns=st.st_mtime_ns)
    with _tool_lock:
        _tool_cache[key] = info
    return info


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"


# --------------------------------------------------------------------------- #
# Cache
# --------------------------------------------------------------------------- #
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
        meta = entry / _META_FILE
        try:
            last = meta.stat().st_mtime
        except OSError:
            last = entry.stat().st_mtime
        try:
            info = json.loads(meta.read_text())
            cfg = dict(info["config"])
            for name in ("window", "resolution", "shift"):
                if isinstance(cfg.get(name), list):
                    cfg[name] = tuple(cfg[name])
            desc = f"{describe(KernelConfig(**cfg))} emit={info.get('emit', '?')}"
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


def _touch(path: Path) -> None:
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


def _toolkit_args(cfg: KernelConfig) -> list:
    """``--cuda-toolkit`` when ``$CUDA_HOME`` overrides the toolkit swin-aot was configured with."""
    home = os.environ.get("CUDA_HOME")
    return [f"--cuda-toolkit={home}"] if cfg.target == "nvptx" and home else []


def _cache_key(cfg: KernelConfig, emit: str, table_bytes: Optional[bytes],
               info: _ToolInfo) -> str:
    payload = {
        "format": _CACHE_FORMAT,
        "args": cfg.aot_args() + _toolkit_args(cfg),
        "emit": emit,
        "table_sha256": hashlib.sha256(table_bytes).hexdigest() if table_bytes is not None else None,
        "tool_version": info.version,
        "tool_size": info.size,
        "tool_mtime_ns": info.mtime_ns,
        # Code generated for the build machine's CPU must not be reused on another
        # machine sharing the cache directory.
        "host_cpu": _host_cpu() if cfg.target == "cpu" and cfg.cpu in (None, "native") else None,
    }
    blob = json.dumps(payload, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()


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
        main = directory / (_STEM + _EMITS[cfg.target][emit])  # side files: <main>.h, ...
        return cls(
            config=cfg, emit=emit, main=main,
            header=Path(f"{main}.h") if emit not in ("mlir", "llvm") else None,
            abi=Path(f"{main}.json") if emit in _ABI_EMITS else None,
            runtime=Path(f"{main}.c") if gpu_binary else None,
            library=(directory / _RUNTIME_LIB if gpu_binary
                     else directory / (_STEM + ".so") if emit == "so" else None))

    @property
    def files(self) -> list:
        """Every output path, once (the main output first; for ``so`` it is the library)."""
        return list(dict.fromkeys(f for f in (self.main, self.header, self.runtime, self.abi,
                                              self.library) if f is not None))

    def load_abi(self) -> "_abi.KernelAbi":
        if self.abi is None:
            raise ValueError(f"--emit={self.emit} has no C ABI description")
        return _abi.load(self.abi)


def _check_abi(art: Artifacts) -> None:
    """The ABI description must exist and describe the configuration that was asked for."""
    cfg = art.config
    try:
        desc = art.load_abi()
    except _abi.AbiError as exc:
        raise CompileError(str(exc)) from None
    want = {"name": cfg.name, "target": cfg.target, "dtype": cfg.dtype, "layout": cfg.layout,
            "packed_qkv": cfg.packed_qkv, "grad": cfg.grad}
    got = {key: getattr(desc, key) for key in want if key != "grad"}
    got["grad"] = desc.backward is not None
    if got != want:
        raise CompileError(f"{art.abi} describes {got}, but {want} was built; rebuild swin-aot "
                           "from the same checkout as this Python package")


def _build(info: _ToolInfo, cfg: KernelConfig, emit: str, table_bytes: Optional[bytes],
           root: Path, final: Path) -> None:
    """Run swin-aot (and, for GPU binaries, build the host runtime) into a temporary
    directory, check every expected output, then publish it as ``final`` atomically."""
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    try:
        art = Artifacts.in_directory(cfg, emit, tmp)
        cmd = [str(info.path), *cfg.aot_args(), *_toolkit_args(cfg)]
        if table_bytes is not None:
            table_file = tmp / "table.f32"
            table_file.write_bytes(table_bytes)
            cmd.append(f"--table={table_file}")
        cmd += [f"--emit={emit}", "-o", str(art.main)]
        start = time.perf_counter()
        proc = _run_tool(cmd)
        if proc.returncode != 0:
            raise CompileError(
                f"swin-aot rejected {describe(cfg)} (exit {proc.returncode}): "
                f"{_last_line(proc.stderr or proc.stdout)}",
                command=cmd, returncode=proc.returncode, stderr=proc.stderr,
            )
        for produced in (art.main, art.header, art.runtime):
            if produced is not None and not produced.is_file():
                raise CompileError(f"swin-aot exited 0 but did not write {produced.name}",
                                   command=cmd, stderr=proc.stderr)
        if art.abi is not None:
            _check_abi(art)
        if art.runtime is not None:
            from . import cuda  # the GPU module; nothing in it needs a GPU to build

            cuda.build_runtime(art.runtime, art.library)
        meta = {"config": dataclasses.asdict(cfg), "emit": emit, "command": cmd,
                "tool_version": info.version,
                "build_seconds": round(time.perf_counter() - start, 3)}
        _log.info("swin_opt: built %s (--emit=%s) in %.1f s", describe(cfg), emit,
                  meta["build_seconds"])
        (tmp / _META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
        try:
            os.rename(tmp, final)  # atomic publish
        except OSError:
            if not (final / _META_FILE).is_file():
                raise
            # Another process published the same kernel first; use theirs.
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def describe(cfg: KernelConfig) -> str:
    """Short human-readable description of a configuration."""
    parts = [f"window={'x'.join(map(str, cfg.window))}", f"heads={cfg.heads}",
             f"head_dim={cfg.head_dim}", f"dtype={_DTYPE_NAMES[cfg.dtype]}"]
    if cfg.resolution is not None:
        parts += [f"resolution={'x'.join(map(str, cfg.resolution))}",
                  f"shift={_csv(cfg.shift)}"]
    if cfg.padding:
        parts.append(f"padding={cfg.padding}")
    if cfg.layout != "windows":
        parts.append(f"layout={cfg.layout}")
    if cfg.packed_qkv:
        parts.append("packed_qkv")
    if cfg.cosine:
        parts.append("cosine")
    if cfg.scale is not None:
        parts.append(f"scale={cfg.scale!r}")
    if cfg.target != "cpu":
        parts.append(f"target={cfg.target}:{cfg.chip}")
    return " ".join(parts)


def compile(  # noqa: A001 - the public name is part of the API
    window,
    heads: int,
    head_dim: int,
    *,
    scale: Optional[float] = None,
    resolution=None,
    shift=None,
    padding: Optional[str] = None,
    layout: str = "windows",
    dtype: Any = "float32",
    target: str = "cpu",
    table=None,
    name: Optional[str] = None,
    cpu: Optional[str] = None,
    parallel: bool = True,
    packed_qkv: bool = False,
    kernel: Optional[str] = None,
    chip: Optional[str] = None,
    cosine: bool = False,
    grad: bool = False,
    emit: Optional[str] = None,
    cache_dir: Optional[os.PathLike] = None,
):
    """Compile (or fetch from the cache) a window-attention kernel.

    Returns a :class:`Kernel` for the CPU (``emit="so"``, the default), a
    :class:`swin_opt.cuda.GpuKernel` for ``target="nvptx"`` (``emit="ptx"``,
    the default, ``"cubin"`` or ``"fatbin"``), and the :class:`Artifacts` of
    any other ``emit`` (``"mlir"``, ``"llvm"``, ``"obj"``).

    Parameters
    ----------
    window:
        ``(Wh, Ww)`` or ``(Wd, Wh, Ww)``; an int means a square 2-D window.
    heads, head_dim:
        Attention heads and per-head channels.
    scale:
        Factor applied to q before ``q @ k^T``; default ``head_dim ** -0.5``.
    resolution, shift:
        Feature-map size and cyclic shift (int or per-axis) for shifted-window
        blocks: the kernel then builds and applies Swin's mask itself and
        ``num_windows`` must be a multiple of ``nW``.  ``shift`` defaults to 0.
    padding:
        ``"pad_then_shift"`` (HF/torchvision/Video Swin) or ``"shift_then_pad"``
        (timm) when ``resolution`` is not divisible by ``window``.  With
        ``layout="windows"`` the caller partitions the padded map, so the kernel
        is built for the rounded-up resolution (both conventions mask it the same
        way).
    layout:
        ``"windows"`` (inputs ``[num_windows, heads, N, head_dim]``) or
        ``"tokens"`` (inputs ``[batch, L, C]``).
    dtype:
        ``float32``, ``float16`` or ``bfloat16`` (q/k/v/table/out storage).
    target:
        ``"cpu"`` or ``"nvptx"`` (NVIDIA GPUs; compiling needs no GPU, running does).
    table:
        ``[prod(2W-1), heads]`` bias table to bake into the kernel (rounded to
        float32); the kernel then takes no table argument.
    name:
        Name of the C symbol (default ``swin_window_attention``).
    cpu:
        ``swin-aot --cpu`` (e.g. ``"x86-64-v3"``); default: the tool's default,
        ``native``.  Kernels for ``native`` are cached per host CPU.
    parallel:
        ``False`` passes ``--no-parallel`` (single-threaded kernel, no OpenMP).
    packed_qkv:
        Token layout only: the kernel takes one ``qkv`` map ``[batch, L, 3,
        heads, head_dim]`` (the qkv projection's output as it is) and is
        called as ``kernel(qkv, table, pad_qkv=...)``.
    kernel:
        ``swin-aot --kernel``: ``"tiles"`` (the CPU's, the default), or the GPU
        kernels ``"warps"`` (tensor-core tiles, each warp emulated by 32-lane
        vectors) and ``"rows"`` run on the host, to test them.  On the GPU:
        ``"warps"`` (swin-aot's default for f16/bf16) or ``"rows"``.
    chip:
        ``target="nvptx"`` only: the GPU architecture (default ``"sm_90"``).
    cosine:
        SwinV2's scaled cosine attention: ``softmax(cos(q, k) *
        min(exp(logit_scale[h]), 100) + table[idx] (+ mask)) v``, with q and k
        L2-normalized inside the kernel; ``scale`` then defaults to 1.  The
        kernel is called with ``logit_scale=`` (the raw ``[heads]``
        parameter, float32); ``table`` is SwinV2's final bias (``16 *
        sigmoid`` of the CPB MLP).  CPU only.
    grad:
        Also compile the gradient (``swin-aot --grad``; CPU, float32): see
        :meth:`Kernel.backward`.
    emit:
        ``swin-aot --emit``; see above for what is returned.
    cache_dir:
        Override the cache directory (default :func:`get_cache_dir`).

    Raises
    ------
    SwinAotNotFoundError
        ``swin-aot`` is not available.
    SwinAotVersionError
        ``swin-aot`` is older than this package or builds another kernel ABI.
    CompileError
        ``swin-aot`` rejected the configuration (its one-line error is included).
    """
    cfg = make_config(window, heads, head_dim, scale=scale, resolution=resolution, shift=shift,
                      padding=padding, layout=layout, dtype=dtype, target=target, name=name,
                      cpu=cpu, parallel=parallel, packed_qkv=packed_qkv, kernel=kernel,
                      chip=chip, cosine=cosine, grad=grad)
    if emit is None:
        emit = _DEFAULT_EMIT[cfg.target]
    if emit not in _EMITS[cfg.target]:
        raise ValueError(f"emit must be one of {sorted(_EMITS[cfg.target])} for "
                         f"target={cfg.target!r}, got {emit!r}")
    baked = None
    table_bytes = None
    if table is not None:
        baked = _to_numpy_f32(table, "table")
        if baked.shape != (cfg.table_rows, cfg.heads):
            raise ValueError(f"table must have shape [{cfg.table_rows}, {cfg.heads}] for "
                             f"window {cfg.window}, got {tuple(baked.shape)}")
        baked = np.ascontiguousarray(baked, dtype="<f4")
        baked.setflags(write=False)
        table_bytes = baked.tobytes()

    info = _tool_info(find_swin_aot())
    root = Path(cache_dir) if cache_dir is not None else get_cache_dir()
    final = root / f"k-{_cache_key(cfg, emit, table_bytes, info)[:40]}"
    if not (final / _META_FILE).is_file():
        _build(info, cfg, emit, table_bytes, root, final)
    else:
        _touch(final / _META_FILE)
    art = Artifacts.in_directory(cfg, emit, final)
    if emit == "so":
        return Kernel(cfg, art.library, art.header, baked, abi=art.load_abi(), artifacts=art)
    if art.runtime is not None:
        from .cuda import GpuKernel

        return GpuKernel(art, art.load_abi(), baked)
    return art


def _to_numpy_f32(x, what: str) -> np.ndarray:
    if _is_torch(x):
        x = x.detach().cpu().float().numpy()
    arr = np.asarray(x)
    if arr.dtype == np.uint16:
        raise TypeError(f"{what}: pass real values (float32), not raw bfloat16 bits")
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"{what} must be numeric, got dtype {arr.dtype}")
    return arr.astype(np.float32)


# --------------------------------------------------------------------------- #
# Calling kernels
# --------------------------------------------------------------------------- #
def _is_torch(x) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _torch_dtype(code: str):
    import torch  # only reached when a tensor was passed, so torch is importable

    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[code]


@dataclasses.dataclass
class _Buffer:
    obj: Any  # keeps the memory alive
    ptr: int
    shape: Tuple[int, ...]
    nbytes: int


def _buffer(name: str, x, code: str, shape: Tuple[int, ...], doc: str = "") -> _Buffer:
    """Validate an argument (kind, dtype, shape, then layout) and return its data pointer.

    Never copies: a wrong dtype or a non-contiguous array is an error.
    """
    doc = f"{doc} = " if doc else ""
    if _is_torch(x):
        want = _torch_dtype(code)
        if x.device.type != "cpu":
            raise ValueError(f"{name} must be a CPU tensor, got device {x.device}")
        if x.dtype != want:
            raise TypeError(f"{name} must have dtype {want}, got {x.dtype}")
        if tuple(x.shape) != shape:
            raise ValueError(f"{name} must have shape {doc}{shape}, got {tuple(x.shape)}")
        if not x.is_contiguous():
            raise ValueError(f"{name} must be contiguous (call .contiguous())")
        return _Buffer(x, x.data_ptr() if x.numel() else 0, tuple(x.shape),
                       x.numel() * x.element_size())
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray or torch.Tensor, got {type(x).__name__}")
    want = _STORAGE[code]
    ok = x.dtype == want or (code == "bf16" and x.dtype.name == "bfloat16")
    if not ok:
        hint = " (raw bfloat16 bits; see float32_to_bf16_bits)" if want == np.uint16 else ""
        raise TypeError(f"{name} must have dtype {want}{hint}, got {x.dtype}")
    if not x.dtype.isnative:
        raise TypeError(f"{name} must be in native byte order")
    if x.shape != shape:
        raise ValueError(f"{name} must have shape {doc}{shape}, got {x.shape}")
    if not x.flags.c_contiguous or not x.flags.aligned:
        raise ValueError(f"{name} must be C-contiguous and aligned (use numpy.ascontiguousarray)")
    return _Buffer(x, x.ctypes.data if x.size else 0, x.shape, x.nbytes)


class Kernel:
    """A compiled window-attention kernel for the CPU.

    Call it as ``kernel(q, k, v, table)`` (``table`` omitted for kernels with a
    baked table); see :meth:`__call__`.  The shared library is loaded lazily on
    the first call.  Argument order, C types, element types and shapes come
    from the ABI description swin-aot wrote (:attr:`abi`).
    """

    def __init__(self, config: KernelConfig, library: Path, header: Path,
                 table: Optional[np.ndarray] = None, *, abi: Optional[_abi.KernelAbi] = None,
                 artifacts: Optional[Artifacts] = None):
        self.config = config
        #: Every file of the kernel in the cache (None when constructed by hand).
        self.artifacts = artifacts
        self.library = Path(library)
        self.header = Path(header)
        #: The C ABI (:class:`swin_opt.abi.KernelAbi`), from ``<library>.json``.
        self.abi = abi if abi is not None else _abi.load(Path(f"{self.library}.json"))
        #: The baked table as float32 ``[T, heads]`` (read-only), or ``None``.
        self.table = table
        self._lock = threading.Lock()
        self._functions: Dict[str, Any] = {}  # entry point name -> ctypes function

    def __repr__(self) -> str:
        baked = " baked-table" if self.table is not None else ""
        return f"<swin_opt.Kernel {self.config.name}: {describe(self.config)}{baked} at {self.library}>"

    @property
    def cfunc(self):
        """The raw :mod:`ctypes` function (loads the library). No argument checking!"""
        return self._function(self.abi)

    def _function(self, abi):
        """The :mod:`ctypes` function of entry point ``abi`` (loaded once)."""
        fn = self._functions.get(abi.name)
        if fn is None:
            with self._lock:
                fn = self._functions.get(abi.name)
                if fn is None:
                    fn, self._lib = _load_function(self.library, abi, describe(self.config))
                    self._functions[abi.name] = fn
        return fn

    # Shapes -------------------------------------------------------------- #
    def input_shape(self, n: int) -> Tuple[int, ...]:
        """Shape of each input for ``n`` windows (window layout) or ``n`` images (token layout)."""
        return self.abi.role("input")[0].shape_for(n)

    def output_shape(self, n: int) -> Tuple[int, ...]:
        """Shape of the output for ``n`` windows / images."""
        return self.abi.role("output")[0].shape_for(n)

    @property
    def table_shape(self) -> Tuple[int, int]:
        return self.abi["table"].shape_for(0)

    # Call ---------------------------------------------------------------- #
    def __call__(self, q, k=None, v=None, table=None, pad_qkv=None, *, logit_scale=None,
                 out=None):
        """Run the kernel and return ``out``.

        ``q, k, v``: ``[num_windows, heads, N, head_dim]`` (token layout:
        ``[batch, L, heads*head_dim]``), C-contiguous, of the kernel's storage
        dtype: ``float32``, ``float16``, or ``uint16`` bfloat16 bits (CPU torch
        tensors of the matching dtype are used without copies).  A packed-qkv
        kernel is called as ``kernel(qkv, table, pad_qkv=...)``.  ``table``:
        ``[prod(2W-1), heads]`` of the same dtype; must be omitted when the
        table is baked.  ``pad_qkv`` (token layout only): ``[3, C]`` float32,
        default zeros.  ``logit_scale`` (cosine kernels only, required there):
        SwinV2's raw ``[heads]`` parameter, float32.  ``out`` optionally
        supplies the output buffer; it must not overlap an input.  The result
        has the kind (numpy/torch) of ``q``.
        """
        if self.config.packed_qkv:
            if v is not None or table is not None:
                raise TypeError("a packed_qkv kernel is called as kernel(qkv, table, pad_qkv=...)")
            given = {"qkv": q, "table": k}
        else:
            given = {"q": q, "k": k, "v": v, "table": table}
        given["pad_qkv"] = pad_qkv
        given["logit_scale"] = logit_scale
        return self._run(given, out)

    def _read_buffers(self, abi, given: dict, read: list):
        """The checked buffers the entry point ``abi`` reads: the arguments ``read``
        (all numpy or all torch; the count from the first one's shape) and the
        table. Returns ``(buffers, count, shapes, first, torch_io)``."""
        cfg = self.config
        for arg in read:
            x = given[arg.name]
            if not (_is_torch(x) or isinstance(x, np.ndarray)):
                raise TypeError(f"{arg.name} must be a numpy.ndarray or torch.Tensor, "
                                f"got {type(x).__name__}")
        first = given[read[0].name]
        torch_io = _is_torch(first)
        if any(_is_torch(given[arg.name]) != torch_io for arg in read):
            raise TypeError(f"{', '.join(a.name for a in read)} must all be numpy arrays or "
                            "all torch tensors")
        n = abi.count_of(read[0].name, first.shape)
        shapes = abi.shapes(n)
        bufs = {arg.name: _buffer(arg.name, given[arg.name], arg.dtype, shapes[arg.name],
                                  arg.shape_doc()) for arg in read}
        nw = cfg.windows_per_image
        if cfg.layout == "windows" and nw is not None and n % nw:
            raise ValueError(f"num_windows ({n}) must be a multiple of the {nw} windows per "
                             f"{'x'.join(map(str, cfg.padded_resolution))} image")
        table = self._table_buffer(given["table"])
        if table is not None:
            bufs["table"] = table
        return bufs, n, shapes, first, torch_io

    def _call(self, abi, bufs: dict, n: int) -> None:
        """Runs the entry point ``abi`` on ``bufs`` and ``n``; RuntimeError unless it
        returns 0."""
        values = {name: (b.ptr or None) for name, b in bufs.items()}
        values[abi.count.name] = n
        rc = self._function(abi)(*abi.call_args(values))
        if rc != 0:
            why = "out of memory" if rc == 2 else "invalid arguments"
            raise RuntimeError(f"kernel {abi.name} returned {rc} ({why}: "
                               f"{abi.count.name}={n})")

    def _run(self, given: dict, out):
        abi = self.abi
        bufs, n, shapes, first, torch_io = self._read_buffers(abi, given,
                                                              list(abi.role("input")))
        padding = {arg.name: arg for arg in abi.role("padding")}
        for name, arg in padding.items():
            if given.get(name) is not None:
                bufs[name] = _buffer(name, given[name], arg.dtype, shapes[name])
            elif not arg.nullable:
                bufs[name] = _buffer(name, np.zeros(shapes[name], arg.storage), arg.dtype,
                                     shapes[name])
        if given.get("pad_qkv") is not None and "pad_qkv" not in padding:
            raise ValueError("pad_qkv is only accepted by layout='tokens' kernels")
        for arg in abi.role("logit_scale"):
            if given.get(arg.name) is None:
                raise ValueError(f"{arg.name} {arg.shape_doc()} is required (a cosine "
                                 "attention kernel)")
            bufs[arg.name] = _buffer(arg.name, given[arg.name], arg.dtype, shapes[arg.name],
                                     "[heads]")
        if given.get("logit_scale") is not None and not abi.role("logit_scale"):
            raise ValueError("logit_scale is only accepted by cosine=True kernels")

        out_arg = abi.role("output")[0]
        out = self._output(out, shapes[out_arg.name], first, torch_io)
        bufs[out_arg.name] = _buffer(out_arg.name, out, out_arg.dtype, shapes[out_arg.name])
        if not torch_io and not out.flags.writeable:
            raise ValueError(f"{out_arg.name} must be writeable")
        _abi.check_no_overlap((abi[name], b.ptr, b.nbytes) for name, b in bufs.items())
        if n == 0:
            return out
        self._call(abi, bufs, n)
        return out

    def backward(self, q, k=None, v=None, table=None, out=None, dout=None, *, grads=None):
        """The gradients of the attention (a ``grad=True`` kernel).

        Called with the forward's inputs, its output ``out`` and the output's
        gradient ``dout`` (``out``'s shape): ``kernel.backward(q, k, v, table,
        out, dout)`` returns ``(dq, dk, dv, dtable)``; a packed-qkv kernel,
        ``kernel.backward(qkv, table, out, dout)``, returns ``(dqkv, dtable)``.
        ``dtable`` ``[T, heads]`` sums every window. The buffers are float32,
        C-contiguous, all numpy or all CPU torch tensors; ``grads`` optionally
        supplies the result buffers by name (``dq``, ``dk``, ``dv``/``dqkv``,
        ``dtable``). Padding tokens count as zeros (no ``pad_qkv``).
        """
        abi = self.abi.backward
        if abi is None:
            raise ValueError("this kernel has no backward: compile it with grad=True")
        if self.config.packed_qkv:
            if out is not None or dout is not None:
                raise TypeError("a packed_qkv kernel's backward is backward(qkv, table, out, dout)")
            given = {"qkv": q, "table": k, "out": v, "dout": table}
        else:
            given = {"q": q, "k": k, "v": v, "table": table, "out": out, "dout": dout}
        read = [arg for arg in abi.arguments
                if arg.role in ("input", "output", "output_gradient")]
        bufs, n, shapes, first, torch_io = self._read_buffers(abi, given, read)
        grads = dict(grads or {})
        results = []
        for arg in abi.arguments:
            if arg.role not in abi.written_roles:
                continue
            buf = self._output(grads.pop(arg.name, None), shapes[arg.name], first, torch_io)
            bufs[arg.name] = _buffer(arg.name, buf, arg.dtype, shapes[arg.name], arg.shape_doc())
            if not torch_io and not buf.flags.writeable:
                raise ValueError(f"{arg.name} must be writeable")
            results.append(buf)
        if grads:
            raise TypeError(f"unknown gradient buffers {sorted(grads)}")
        _abi.check_no_overlap(((abi[name], b.ptr, b.nbytes) for name, b in bufs.items()),
                              abi.written_roles)
        if n == 0:
            for buf in results:
                buf[...] = 0
            return tuple(results)
        self._call(abi, bufs, n)
        return tuple(results)

    def _table_buffer(self, table) -> Optional[_Buffer]:
        """The table argument: None for a baked table, else a checked buffer."""
        arg = self.abi["table"]
        if self.table is not None:
            if table is not None:
                raise ValueError("this kernel has a baked-in table; do not pass table")
            return None
        if table is None:
            raise ValueError(f"table {list(arg.shape)} is required "
                             "(the kernel was compiled without a baked table)")
        return _buffer("table", table, arg.dtype, arg.shape_for(0), "[prod(2W-1), heads]")

    @staticmethod
    def _output(out, shape, like, torch_io: bool):
        """``out``, allocated like ``like`` when None (large ones in huge pages)."""
        if out is None:
            if torch_io:
                import torch

                out = torch.empty(shape, dtype=like.dtype)
                _advise_huge_pages(out.data_ptr(), out.numel() * out.element_size())
                return out
            out = np.empty(shape, dtype=like.dtype)
            _advise_huge_pages(out.ctypes.data, out.nbytes)
            return out
        if _is_torch(out) != torch_io:
            raise TypeError("out must be of the same kind (numpy/torch) as the inputs")
        return out


#: Output buffers the kernels allocate from this size on get transparent huge pages.
_HUGE_PAGE_MIN_BYTES = 8 << 20
_HUGE_PAGE_BYTES = 2 << 20
_MADV_HUGEPAGE = 14
_libc = None


def _advise_huge_pages(address: int, nbytes: int) -> None:
    """``madvise(MADV_HUGEPAGE)`` on the whole 2 MiB pages of a freshly allocated output.

    A kernel writes its output once, into memory the allocator has just mapped;
    in 4 KiB pages that is a page fault per 4 KiB. For Swin-T stage 1's
    gradients (3 x 19 MB, 28k faults) the faults took 20 ms beside the
    kernel's 28 ms; in 2 MiB pages, 2 ms. Where transparent huge pages are
    ``madvise``-only (Debian's default) the advice is what enables them, as
    PyTorch's ``THP_MEM_ALLOC_ENABLE`` does for its own tensors. Only the
    buffer's own pages are advised. ``SWIN_OPT_HUGE_PAGES=0`` turns it off.
    """
    global _libc
    if nbytes < _HUGE_PAGE_MIN_BYTES or not sys.platform.startswith("linux"):
        return
    if _libc is None:
        _libc = False
        if os.environ.get("SWIN_OPT_HUGE_PAGES", "1") != "0":
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
                _libc = libc
            except (OSError, AttributeError):
                pass
    if not _libc:
        return
    start = (address + _HUGE_PAGE_BYTES - 1) & ~(_HUGE_PAGE_BYTES - 1)
    end = (address + nbytes) & ~(_HUGE_PAGE_BYTES - 1)
    if end > start:
        _libc.madvise(start, end - start, _MADV_HUGEPAGE)  # advice: a failure changes nothing


def _load_function(library: Path, abi: "_abi.KernelAbi", what: str):
    """``(ctypes function, library handle)`` of ``abi.name`` in ``library``, typed from the ABI."""
    try:
        lib = ctypes.CDLL(str(library))
    except OSError as exc:
        raise OSError(f"cannot load kernel library for {what}: {exc}") from exc
    try:
        fn = getattr(lib, abi.name)
    except AttributeError:
        raise RuntimeError(f"{library} does not export {abi.name!r}") from None
    fn.restype = ctypes.c_int32
    fn.argtypes = abi.argtypes()
    return fn, lib
