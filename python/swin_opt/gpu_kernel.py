"""The GPU kernel: :class:`GpuKernel` calls the host runtime ``swin-aot
--target=nvptx`` wrote for a kernel (built into a shared library by
:mod:`swin_opt.build`) on device pointers, through :mod:`ctypes`.

Only running needs a GPU: the CUDA driver (``libcuda.so.1``) is loaded on a
kernel's first call, which raises :class:`CudaError` without one.
:mod:`swin_opt.cuda` adds what the tests and benchmarks use around it (a
minimal driver binding, torch tensors, :func:`swin_opt.cuda.compile_gpu`).
"""

from __future__ import annotations

import ctypes
import functools
import threading
from typing import Optional

import numpy as np

from . import abi as _abi
from .cache import Artifacts
from .config import describe

__all__ = ["CudaError", "GpuKernel", "driver_library"]


class CudaError(RuntimeError):
    """A CUDA driver call failed, or there is no driver to call."""


@functools.lru_cache(maxsize=None)
def driver_library() -> ctypes.CDLL:
    """``libcuda.so.1``, loaded globally so that runtimes built without the stub
    (``cu*`` left undefined) resolve against it. CudaError when absent."""
    try:
        return ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)
    except OSError as exc:
        raise CudaError(f"no CUDA driver on this machine ({exc}); GPU kernels compile without "
                        "one, but running them needs an NVIDIA driver and GPU") from None


class GpuKernel:
    """A compiled GPU kernel on device pointers: ``kernel(q, k, v, table, out, count[, pad_qkv])``,
    or ``kernel.call_packed(qkv, table, out, batch[, pad_qkv])`` for a packed-qkv kernel.

    ``image``, ``header``, ``runtime`` (the host runtime's C source) and
    ``library`` (that runtime built) are the files in the cache; ``abi`` is
    the C ABI the call is typed and checked by.  The driver and the library
    are loaded on the first call (:class:`CudaError` without a driver).
    """

    def __init__(self, artifacts: Artifacts, abi: "_abi.KernelAbi",
                 table: Optional[np.ndarray] = None):
        self.artifacts = artifacts
        self.config = artifacts.config
        self.abi = abi
        #: The baked table as float32 ``[T, heads]`` (read-only), or ``None``.
        self.table = table
        self._lock = threading.Lock()
        self._fn = None
        self._last_error = None

    image = property(lambda self: self.artifacts.main, doc="The PTX / cubin / fatbin file.")
    header = property(lambda self: self.artifacts.header, doc="The C header.")
    runtime = property(lambda self: self.artifacts.runtime, doc="The host runtime's C source.")
    library = property(lambda self: self.artifacts.library, doc="The host runtime, built.")
    tokens = property(lambda self: self.config.layout == "tokens")
    packed = property(lambda self: self.config.packed_qkv)

    def __repr__(self) -> str:
        return (f"<swin_opt.cuda.GpuKernel {self.config.name}: {describe(self.config)} "
                f"at {self.image}>")

    @property
    def fn(self):
        """The runtime's C function (loads the driver and the library)."""
        if self._fn is None:
            with self._lock:
                if self._fn is None:
                    driver_library()
                    fn, lib = self.abi.bind(self.library, describe(self.config))
                    last_error = getattr(lib, f"{self.abi.name}_last_error")
                    last_error.restype = ctypes.c_char_p
                    self._lib, self._last_error, self._fn = lib, last_error, fn
        return self._fn

    def last_error(self) -> bytes:
        """The runtime's description of its last failure."""
        self.fn  # noqa: B018 - loads the library
        return self._last_error()

    def output_shape(self, count: int):
        return self.abi.role("output")[0].shape_for(count)

    def __call__(self, q, k, v, table, out, count, pad_qkv=0, stream=None) -> None:
        if self.packed:
            raise TypeError("a packed-qkv kernel is called as kernel.call_packed(qkv, table, out, batch)")
        self._run(dict(q=q, k=k, v=v, table=table, out=out, pad_qkv=pad_qkv), count, stream)

    def call_packed(self, qkv, table, out, batch, pad_qkv=0, stream=None) -> None:
        if not self.packed:
            raise TypeError("call_packed needs a kernel compiled with packed_qkv=True")
        self._run(dict(qkv=qkv, table=table, out=out, pad_qkv=pad_qkv), batch, stream)

    def _run(self, pointers: dict, count: int, stream) -> None:
        """Call with device pointers by argument name; the ABI gives order and sizes."""
        abi = self.abi
        unknown = [name for name, ptr in pointers.items() if ptr and name not in abi]
        if unknown:
            raise ValueError(f"{unknown[0]} is not an argument of this kernel "
                             f"({', '.join(a.name for a in abi.arguments)})")
        _abi.check_no_overlap((abi[name], ptr or 0, abi.nbytes(name, count))
                              for name, ptr in pointers.items() if name in abi)
        values = dict(pointers, stream=stream)
        values[abi.count.name] = count
        if self.fn(*abi.call_args(values)) != 0:
            raise CudaError(self.last_error().decode())
