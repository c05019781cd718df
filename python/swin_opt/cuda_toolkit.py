"""The CUDA toolkit that GPU kernels are compiled with, found without asking.

A GPU kernel needs three pieces of a toolkit: libdevice (the math functions
every kernel calls; ``swin-aot`` links it into the PTX), ``ptxas`` for cubin,
and ``cuda.h`` to build the host runtime. A PyTorch user who installed torch
with pip has no toolkit, but has all three: Triton's wheel, which every CUDA
build of torch depends on, ships them for its own compiler
(``triton/backends/nvidia/{lib/libdevice.10.bc,bin/ptxas,include/cuda.h}``).

:func:`cuda_toolkit` takes, in order: ``$CUDA_HOME`` (an explicit choice
wins, complete or not: swin-aot then says what it misses), the system's
``/usr/local/cuda`` when it holds libdevice, and Triton's pieces, linked into
a directory of the toolkit's shape under the kernel cache (``swin-aot
--cuda-toolkit`` takes that shape). Without any, ``/usr/local/cuda``: swin-aot
names what is missing. Triton ships no ``fatbinary``: ``emit="fatbin"`` still
needs a real toolkit.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from pathlib import Path
from typing import Optional

from . import cache

#: Where a system-wide toolkit lives.
SYSTEM_TOOLKIT = Path("/usr/local/cuda")
#: The toolkit-relative paths of what a kernel needs, as swin-aot reads them.
LIBDEVICE = Path("nvvm/libdevice/libdevice.10.bc")
PTXAS = Path("bin/ptxas")
INCLUDE = Path("include")


def triton_pieces() -> Optional[Path]:
    """Triton's ``backends/nvidia`` directory when it has libdevice, ptxas and
    ``cuda.h`` (located without importing Triton, which would import torch)."""
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        return None
    nvidia = Path(list(spec.submodule_search_locations)[0]) / "backends" / "nvidia"
    needed = (nvidia / "lib" / "libdevice.10.bc", nvidia / "bin" / "ptxas",
              nvidia / "include" / "cuda.h")
    return nvidia if all(p.is_file() for p in needed) else None


def toolkit_from(nvidia: Path, root: Optional[Path] = None) -> Path:
    """A directory of the toolkit's shape whose pieces link to Triton's
    ``nvidia`` directory; made once per Triton installation, atomically."""
    key = hashlib.sha256(str(nvidia.resolve()).encode()).hexdigest()[:16]
    root = cache.get_cache_dir() if root is None else root
    toolkit = root / f"cuda-toolkit-{key}"
    if (toolkit / LIBDEVICE).is_file():
        return toolkit
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".cuda-toolkit-", dir=root))
    for link, target in ((LIBDEVICE, nvidia / "lib" / "libdevice.10.bc"),
                         (PTXAS, nvidia / "bin" / "ptxas"),
                         (INCLUDE, nvidia / "include")):
        (staging / link).parent.mkdir(parents=True, exist_ok=True)
        (staging / link).symlink_to(target)
    try:
        os.rename(staging, toolkit)
    except OSError:  # another process made it first
        for link in (LIBDEVICE, PTXAS, INCLUDE):
            (staging / link).unlink()
        for sub in ("nvvm/libdevice", "nvvm", "bin", ""):
            (staging / sub).rmdir()
    return toolkit


def cuda_toolkit() -> Path:
    """The toolkit to compile GPU kernels and build their runtime with."""
    home = os.environ.get("CUDA_HOME")
    if home:
        return Path(home)
    if (SYSTEM_TOOLKIT / LIBDEVICE).is_file():
        return SYSTEM_TOOLKIT
    nvidia = triton_pieces()
    return toolkit_from(nvidia) if nvidia is not None else SYSTEM_TOOLKIT
