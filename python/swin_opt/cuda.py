"""GPU kernels from ``swin-aot --target=nvptx``, driven through the CUDA driver API.

``swin-aot --target=nvptx --emit=ptx -o k.ptx`` writes the kernel, a header
``k.h`` and a host runtime ``k.c`` (CUDA driver API). :func:`compile_gpu`
builds that runtime into a shared library with the system C compiler and
returns a :class:`GpuKernel` that runs on device buffers. :class:`Driver` is a
minimal ctypes binding of ``libcuda`` (allocation, copies, events) so that the
tests and the GPU benchmark need nothing but NumPy.

Nothing here needs a GPU to import; :func:`available` says whether one can be
used (a driver is loadable and reports a device).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from .compiler import find_swin_aot

CUDA_HOME = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))


class CudaError(RuntimeError):
    """A CUDA driver call failed."""


class Driver:
    """The few driver API calls the tests and benchmarks need."""

    def __init__(self):
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise CudaError(f"no CUDA driver: {exc}") from None
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


class GpuKernel:
    """A compiled GPU kernel on device pointers: ``kernel(q, k, v, table, out, count[, pad_qkv])``,
    or ``kernel.call_packed(qkv, table, out, batch[, pad_qkv])`` for a packed-qkv kernel."""

    def __init__(self, library: Path, name: str, tokens: bool, packed: bool = False):
        self.library = ctypes.CDLL(str(library))
        self.fn = getattr(self.library, name)
        self.fn.restype = ctypes.c_int
        inputs = 1 if packed else 3
        self.fn.argtypes = [ctypes.c_uint64] * (inputs + 2) + [ctypes.c_int64] + (
            [ctypes.c_uint64] if tokens else []) + [ctypes.c_void_p]
        self.last_error = getattr(self.library, f"{name}_last_error")
        self.last_error.restype = ctypes.c_char_p
        self.tokens = tokens
        self.packed = packed

    def __call__(self, q, k, v, table, out, count, pad_qkv=0, stream=None) -> None:
        if self.packed:
            raise TypeError("a packed-qkv kernel is called as kernel.call_packed(qkv, table, out, batch)")
        self._run([q, k, v, table, out, count], pad_qkv, stream)

    def call_packed(self, qkv, table, out, batch, pad_qkv=0, stream=None) -> None:
        if not self.packed:
            raise TypeError("call_packed needs a kernel compiled with packed_qkv=True")
        self._run([qkv, table, out, batch], pad_qkv, stream)

    def _run(self, args, pad_qkv, stream) -> None:
        args = args + ([pad_qkv] if self.tokens else []) + [stream]
        if self.fn(*args) != 0:
            raise CudaError(self.last_error().decode())


def compile_gpu(window: Sequence[int], heads: int, head_dim: int, *, resolution=None, shift=None,
                layout: str = "windows", padding: Optional[str] = None, dtype: str = "f32",
                chip: str = "sm_90", name: str = "swin_window_attention",
                kernel: Optional[str] = None, packed_qkv: bool = False,
                cache_dir: Optional[Path] = None) -> GpuKernel:
    """Compiles a GPU kernel and its runtime (``cc`` against the toolkit's ``cuda.h``).

    ``kernel``: ``"warps"`` (tensor cores; swin-aot's default, which falls back to
    rows for f32 or a head_dim not a multiple of 16) or ``"rows"``.
    """
    args = [f"--window={','.join(map(str, window))}", f"--heads={heads}", f"--head-dim={head_dim}",
            f"--dtype={dtype}", "--target=nvptx", f"--chip={chip}", f"--name={name}",
            f"--cuda-toolkit={CUDA_HOME}"]
    if resolution is not None:
        args.append(f"--resolution={','.join(map(str, resolution))}")
        args.append(f"--shift={','.join(map(str, shift or [0] * len(window)))}")
    if layout != "windows":
        args.append(f"--layout={layout}")
        if padding:
            args.append(f"--padding={padding.replace('_', '-')}")
    if packed_qkv:
        args.append("--packed-qkv")
    if kernel is not None:
        args.append(f"--kernel={kernel}")
    aot = find_swin_aot()
    key = hashlib.sha256(("\0".join(args) + str(aot.stat().st_mtime)).encode()).hexdigest()[:16]
    root = Path(cache_dir or tempfile.gettempdir()) / f"swin-gpu-{key}"
    library = root / f"lib{name}.so"
    if not library.exists():
        root.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(aot), *args, "--emit=ptx", "-o", str(root / f"{name}.ptx")],
                       check=True, capture_output=True, text=True)
        cc = shutil.which("cc") or shutil.which("gcc") or "clang"
        subprocess.run([cc, "-O2", "-shared", "-fPIC", str(root / f"{name}.c"),
                        f"-I{CUDA_HOME / 'include'}", "-lcuda", "-o", str(library)],
                       check=True, capture_output=True, text=True)
    return GpuKernel(library, name, layout == "tokens", packed_qkv)


def _check_cuda_tensors(named, like):
    import torch

    for name, t in named:
        if not isinstance(t, torch.Tensor) or not t.is_cuda:
            raise TypeError(f"{name} must be a CUDA torch tensor")
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous")
        if t.device != like.device or t.dtype != like.dtype:
            raise ValueError(f"{name} must be on {like.device} with dtype {like.dtype}")


def _output(out, shape, like):
    import torch

    if out is None:
        return torch.empty(shape, device=like.device, dtype=like.dtype)
    if tuple(out.shape) != tuple(shape) or not out.is_contiguous() or out.dtype != like.dtype:
        raise ValueError(f"out must be a contiguous {like.dtype} tensor of shape {tuple(shape)}")
    return out


def torch_call(kernel: GpuKernel, q, k, v, table, *, out=None, pad_qkv=None):
    """Runs a GPU kernel on CUDA torch tensors, without copies, on torch's current stream.

    ``q, k, v`` (and ``out``) in the kernel's layout, contiguous, on one CUDA
    device, of the kernel's dtype; ``table`` likewise. Returns ``out``.
    """
    import torch

    tensors = [q, k, v, table] + ([pad_qkv] if pad_qkv is not None else [])
    _check_cuda_tensors(zip(("q", "k", "v", "table", "pad_qkv"), tensors), q)
    if kernel.tokens:
        count = q.shape[0]
        out_shape = q.shape
    else:
        count, heads, n, d = q.shape
        out_shape = (count, n, heads * d)
    out = _output(out, out_shape, q)
    stream = torch.cuda.current_stream(q.device).cuda_stream
    kernel(q.data_ptr(), k.data_ptr(), v.data_ptr(), table.data_ptr(), out.data_ptr(), count,
           pad_qkv=pad_qkv.data_ptr() if pad_qkv is not None else 0, stream=stream)
    return out


def torch_call_packed(kernel: GpuKernel, qkv, table, *, out=None, pad_qkv=None):
    """:func:`torch_call` for a packed-qkv kernel: ``qkv`` is the qkv projection's
    output ``[batch, L, 3 * C]`` (or ``[batch, L, 3, heads, head_dim]``) as it is;
    ``out`` is ``[batch, L, C]``."""
    import torch

    if not kernel.packed:
        raise TypeError("torch_call_packed needs a kernel compiled with packed_qkv=True")
    tensors = [qkv, table] + ([pad_qkv] if pad_qkv is not None else [])
    _check_cuda_tensors(zip(("qkv", "table", "pad_qkv"), tensors), qkv)
    batch, tokens = qkv.shape[0], qkv.shape[1]
    channels = qkv[0, 0].numel() // 3
    out = _output(out, (batch, tokens, channels), qkv)
    stream = torch.cuda.current_stream(qkv.device).cuda_stream
    kernel.call_packed(qkv.data_ptr(), table.data_ptr(), out.data_ptr(), batch,
                       pad_qkv=pad_qkv.data_ptr() if pad_qkv is not None else 0, stream=stream)
    return out
