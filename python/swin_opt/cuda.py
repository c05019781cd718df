"""GPU kernels from ``swin-aot --target=nvptx``, driven through the CUDA driver API.

``swin-aot --target=nvptx --emit=ptx -o k.ptx`` writes the kernel, a header
``k.ptx.h``, a host runtime ``k.ptx.c`` (CUDA driver API) and the ABI description
``k.ptx.json``.  ``swin_opt.compile(..., target="nvptx")`` (or its shorthand
:func:`compile_gpu`) runs it through the same configuration, cache and error
path as CPU kernels, builds the runtime into a shared library with the system
C compiler (:func:`build_runtime`) and returns a :class:`GpuKernel` that runs
on device buffers.  :class:`Driver` is a minimal ctypes binding of ``libcuda``
(allocation, copies, events) so that the tests and the GPU benchmark need
nothing but NumPy.

Only running needs a GPU: importing this module, compiling kernels and
building their runtime work without a driver (the runtime links against the
toolkit's stub ``libcuda``, or leaves ``cu*`` to be resolved at load time).
The driver is loaded on a kernel's first call, which raises
:class:`CudaError` without one.  :func:`available` says whether a GPU can be
used (a driver is loadable and reports a device).
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from . import abi as _abi
from . import compiler as _compiler

CUDA_HOME = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))


class CudaError(RuntimeError):
    """A CUDA driver call failed, or there is no driver to call."""


@functools.lru_cache(maxsize=None)
def _driver_library() -> ctypes.CDLL:
    """``libcuda.so.1``, loaded globally so that runtimes built without the stub
    (``cu*`` left undefined) resolve against it. CudaError when absent."""
    try:
        return ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)
    except OSError as exc:
        raise CudaError(f"no CUDA driver on this machine ({exc}); GPU kernels compile without "
                        "one, but running them needs an NVIDIA driver and GPU") from None


class Driver:
    """The few driver API calls the tests and benchmarks need."""

    def __init__(self):
        self.lib = _driver_library()
        self._check(self.lib.cuInit(0), "cuInit")
        count = ctypes.c_int()
        self._check(self.lib.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
        if count.value < 1:
            raise CudaError("no CUDA device")
        device = ctypes.c_int()
        self._check(self.lib.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
        self.context = ctypes.c_void_p()
        self._check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.context), device),
                    "cuDevicePrimaryCtxRetain")
        self._check(self.lib.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        name = ctypes.create_string_buffer(256)
        self.lib.cuDeviceGetName(name, 256, device)
        self.name = name.value.decode()

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorString(status, ctypes.byref(text))
            raise CudaError(f"{what}: {text.value.decode() if text.value else status}")

    def alloc(self, nbytes: int) -> int:
        pointer = ctypes.c_uint64()
        self._check(self.lib.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(max(nbytes, 1))),
                    "cuMemAlloc")
        return pointer.value

    def free(self, pointer: int) -> None:
        self.lib.cuMemFree_v2(ctypes.c_uint64(pointer))

    def to_device(self, array: np.ndarray) -> int:
        array = np.ascontiguousarray(array)
        pointer = self.alloc(array.nbytes)
        self._check(self.lib.cuMemcpyHtoD_v2(ctypes.c_uint64(pointer), array.ctypes.data_as(ctypes.c_void_p),
                                             ctypes.c_size_t(array.nbytes)), "cuMemcpyHtoD")
        return pointer

    def to_host(self, pointer: int, shape, dtype) -> np.ndarray:
        out = np.empty(shape, dtype=dtype)
        self._check(self.lib.cuMemcpyDtoH_v2(out.ctypes.data_as(ctypes.c_void_p), ctypes.c_uint64(pointer),
                                             ctypes.c_size_t(out.nbytes)), "cuMemcpyDtoH")
        return out

    def synchronize(self) -> None:
        self._check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize")

    def copy_device(self, dst: int, src: int, nbytes: int) -> None:
        """Device-to-device copy (the bandwidth yardstick of the benchmark)."""
        self._check(self.lib.cuMemcpyDtoD_v2(ctypes.c_uint64(dst), ctypes.c_uint64(src),
                                             ctypes.c_size_t(nbytes)), "cuMemcpyDtoD")

    def time_ms(self, fn, repeat: int = 20) -> float:
        """Median milliseconds of ``fn()`` (which queues work) over ``repeat`` runs, by events."""
        start, stop = ctypes.c_void_p(), ctypes.c_void_p()
        self._check(self.lib.cuEventCreate(ctypes.byref(start), 0), "cuEventCreate")
        self._check(self.lib.cuEventCreate(ctypes.byref(stop), 0), "cuEventCreate")
        fn()
        self.synchronize()
        times = []
        for _ in range(repeat):
            self.lib.cuEventRecord(start, None)
            fn()
            self.lib.cuEventRecord(stop, None)
            self._check(self.lib.cuEventSynchronize(stop), "cuEventSynchronize")
            ms = ctypes.c_float()
            self.lib.cuEventElapsedTime(ctypes.byref(ms), start, stop)
            times.append(ms.value)
        return float(np.median(times))


def available() -> Optional[str]:
    """The device's name when a CUDA driver and a device are usable, else None."""
    try:
        return Driver().name
    except CudaError:
        return None


def _stub_dir() -> Optional[Path]:
    """The toolkit's directory with the stub ``libcuda.so`` (link-time only), if any."""
    for sub in ("lib64/stubs", "lib/stubs", "targets/x86_64-linux/lib/stubs"):
        if (CUDA_HOME / sub / "libcuda.so").is_file():
            return CUDA_HOME / sub
    return None


def build_runtime(source: Path, library: Path) -> None:
    """Build swin-aot's host runtime ``source`` (C, CUDA driver API) into ``library``.

    Needs ``cuda.h`` (``$CUDA_HOME/include``) but no driver: the library is
    linked against the toolkit's stub ``libcuda.so`` (so it records the
    dependency on ``libcuda.so.1``), or, without a stub, leaves the ``cu*``
    symbols undefined for the driver loaded by :func:`_driver_library`.
    """
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or "clang"
    include = CUDA_HOME / "include"
    if not (include / "cuda.h").is_file():
        raise _compiler.CompileError(
            f"cannot build the GPU runtime: no {include / 'cuda.h'} (set CUDA_HOME to the CUDA "
            "toolkit)")
    stubs = _stub_dir()
    link = [f"-L{stubs}", "-lcuda"] if stubs is not None else []
    cmd = [cc, "-O2", "-shared", "-fPIC", str(source), f"-I{include}", "-o", str(library), *link]
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if proc.returncode != 0:
        raise _compiler.CompileError(
            f"building the GPU runtime {source.name} failed (exit {proc.returncode}): "
            f"{_compiler._last_line(proc.stderr or proc.stdout)}",
            command=cmd, returncode=proc.returncode, stderr=proc.stderr)


class GpuKernel:
    """A compiled GPU kernel on device pointers: ``kernel(q, k, v, table, out, count[, pad_qkv])``,
    or ``kernel.call_packed(qkv, table, out, batch[, pad_qkv])`` for a packed-qkv kernel.

    ``image``, ``header``, ``runtime`` (the host runtime's C source) and
    ``library`` (that runtime built) are the files in the cache; ``abi`` is
    the C ABI the call is typed and checked by.  The driver and the library
    are loaded on the first call (:class:`CudaError` without a driver).
    """

    def __init__(self, artifacts: "_compiler.Artifacts", abi: "_abi.KernelAbi",
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
        return (f"<swin_opt.cuda.GpuKernel {self.config.name}: {_compiler.describe(self.config)} "
                f"at {self.image}>")

    @property
    def fn(self):
        """The runtime's C function (loads the driver and the library)."""
        if self._fn is None:
            with self._lock:
                if self._fn is None:
                    _driver_library()
                    fn, lib = _compiler._load_function(self.library, self.abi,
                                                       _compiler.describe(self.config))
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


def compile_gpu(window: Sequence[int], heads: int, head_dim: int, *, chip: str = "sm_90",
                emit: str = "ptx", **options) -> GpuKernel:
    """``swin_opt.compile(..., target="nvptx")``: a GPU kernel and its runtime.

    ``options`` are those of :func:`swin_opt.compile` (``resolution``,
    ``shift``, ``layout``, ``padding``, ``dtype`` in any accepted spelling,
    ``kernel``: ``"warps"``/``"rows"``, ``packed_qkv``, ``name``, ``table``,
    ``cache_dir``, ...).  Compiling needs no GPU.
    """
    return _compiler.compile(window, heads, head_dim, target="nvptx", chip=chip, emit=emit,
                             **options)


def _torch_run(kernel: GpuKernel, given: dict, out):
    """Check CUDA torch tensors against the kernel's ABI (dtype, shape, device,
    contiguity), allocate ``out`` when None, and run on torch's current stream."""
    import torch

    dtypes = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    abi = kernel.abi
    first = abi.role("input")[0].name
    like = given[first]
    if not isinstance(like, torch.Tensor) or not like.is_cuda:
        raise TypeError(f"{first} must be a CUDA torch tensor")
    for name, t in given.items():
        if t is not None and name not in abi:
            raise ValueError(f"{name} is not an argument of this kernel")
        if t is None and name in abi and not abi[name].nullable:
            raise TypeError(f"{name} must be a CUDA torch tensor")
    count = abi.count_of(first, like.shape)
    shapes = abi.shapes(count)
    out_arg = abi.role("output")[0]
    if out is None:
        out = torch.empty(shapes[out_arg.name], device=like.device, dtype=dtypes[out_arg.dtype])
    tensors = {name: t for name, t in given.items() if t is not None}
    tensors[out_arg.name] = out
    for name, t in tensors.items():
        want = dtypes[abi[name].dtype]
        if not isinstance(t, torch.Tensor) or not t.is_cuda:
            raise TypeError(f"{name} must be a CUDA torch tensor")
        if t.device != like.device or t.dtype != want:
            raise ValueError(f"{name} must be on {like.device} with dtype {want}")
        if tuple(t.shape) != shapes[name]:
            raise ValueError(f"{name} must have shape {abi[name].shape_doc()} = {shapes[name]}, "
                             f"got {tuple(t.shape)}")
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous")
    stream = torch.cuda.current_stream(like.device).cuda_stream
    kernel._run({name: t.data_ptr() for name, t in tensors.items()}, count, stream)
    return out


def torch_call(kernel: GpuKernel, q, k, v, table, *, out=None, pad_qkv=None):
    """Runs a GPU kernel on CUDA torch tensors, without copies, on torch's current stream.

    ``q, k, v`` (and ``out``) in the kernel's layout, contiguous, on one CUDA
    device, of the kernel's dtype; ``table`` likewise (None for a baked table).
    ``out`` must not overlap an input. Returns ``out``.
    """
    if kernel.packed:
        raise TypeError("a packed-qkv kernel runs through torch_call_packed")
    return _torch_run(kernel, dict(q=q, k=k, v=v, table=table, pad_qkv=pad_qkv), out)


def torch_call_packed(kernel: GpuKernel, qkv, table, *, out=None, pad_qkv=None):
    """:func:`torch_call` for a packed-qkv kernel: ``qkv`` is the qkv projection's
    output ``[batch, L, 3 * C]`` (or ``[batch, L, 3, heads, head_dim]``) as it is;
    ``out`` is ``[batch, L, C]``."""
    if not kernel.packed:
        raise TypeError("torch_call_packed needs a kernel compiled with packed_qkv=True")
    shape = kernel.abi["qkv"].shape
    if qkv.dim() == 3 and qkv.is_contiguous():
        qkv = qkv.view(qkv.shape[0], qkv.shape[1], *shape[2:])  # the same memory
    return _torch_run(kernel, dict(qkv=qkv, table=table, pad_qkv=pad_qkv), out)
