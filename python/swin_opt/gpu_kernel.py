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
    or ``kernel.call_packed(qkv, table, out, batch[, pad_qkv])`` for a packed-qkv kernel; with
    ``grad=True`` also :meth:`backward` (:meth:`backward_packed`).

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
        self._functions = {}  # entry point name -> ctypes function
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
        return self._function(self.abi)

    def _function(self, abi):
        """The C function of entry point ``abi`` (loads the driver and the library once)."""
        fn = self._functions.get(abi.name)
        if fn is None:
            with self._lock:
                fn = self._functions.get(abi.name)
                if fn is None:
                    driver_library()
                    fn, lib = abi.bind(self.library, describe(self.config))
                    last_error = getattr(lib, f"{self.abi.name}_last_error")
                    last_error.restype = ctypes.c_char_p
                    self._lib, self._last_error = lib, last_error
                    self._functions[abi.name] = fn
        return fn

    def last_error(self) -> bytes:
        """The runtime's description of its last failure (either entry point's)."""
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

    def backward(self, q, k, v, table, out, dout, dq, dk, dv, dtable, count,
                 stream=None) -> None:
        """The gradient (a ``grad=True`` kernel) on device pointers: from the forward's
        ``q, k, v, table``, its ``out`` and the output's gradient ``dout`` (``out``'s
        layout), writes ``dq, dk, dv`` (the inputs' layout and dtype) and overwrites
        ``dtable`` ``[T, heads]`` (float32) with the table's gradient summed over every
        window, deterministically. Queued on ``stream``; nothing is written when the
        arguments are invalid (CudaError)."""
        if self.packed:
            raise TypeError("a packed-qkv kernel's backward is "
                            "kernel.backward_packed(qkv, table, out, dout, dqkv, dtable, batch)")
        self._run(dict(q=q, k=k, v=v, table=table, out=out, dout=dout, dq=dq, dk=dk, dv=dv,
                       dtable=dtable), count, stream, self._backward_abi())

    def backward_packed(self, qkv, table, out, dout, dqkv, dtable, batch, stream=None) -> None:
        """:meth:`backward` for a packed-qkv kernel: ``dqkv`` in ``qkv``'s layout."""
        if not self.packed:
            raise TypeError("backward_packed needs a kernel compiled with packed_qkv=True")
        self._run(dict(qkv=qkv, table=table, out=out, dout=dout, dqkv=dqkv, dtable=dtable),
                  batch, stream, self._backward_abi())

    def _backward_abi(self):
        if self.abi.backward is None:
            raise ValueError("this kernel has no backward: compile it with grad=True")
        return self.abi.backward

    def _run(self, pointers: dict, count: int, stream, abi=None) -> None:
        """Call entry point ``abi`` (default: the forward) with device pointers by
        argument name; the ABI gives order and sizes."""
        abi = abi or self.abi
        unknown = [name for name, ptr in pointers.items() if ptr and name not in abi]
        if unknown:
            raise ValueError(f"{unknown[0]} is not an argument of this kernel "
                             f"({', '.join(a.name for a in abi.arguments)})")
        _abi.check_no_overlap(((abi[name], ptr or 0, abi.nbytes(name, count))
                               for name, ptr in pointers.items() if name in abi),
                              abi.written_roles)
        values = dict(pointers, stream=stream)
        values[abi.count.name] = count
        if self._function(abi)(*abi.call_args(values)) != 0:
            raise CudaError(self.last_error().decode())
