"""GPU kernels from ``swin-aot --target=nvptx``, driven through the CUDA driver API.

``swin-aot --target=nvptx --emit=ptx -o k.ptx`` writes the kernel, a header
``k.ptx.h``, a host runtime ``k.ptx.c`` (CUDA driver API) and the ABI description
``k.ptx.json``.  ``swin_opt.compile(..., target="nvptx")`` (or its shorthand
:func:`compile_gpu`) runs it through the same configuration, cache and error
path as CPU kernels, builds the runtime into a shared library with the system
C compiler (:func:`swin_opt.build.build_runtime`) and returns a
:class:`GpuKernel` (:mod:`swin_opt.gpu_kernel`) that runs on device buffers.
:class:`Driver` is a minimal ctypes binding of ``libcuda`` (allocation,
copies, events) so that the tests and the GPU benchmark need nothing but
NumPy; :func:`torch_call` runs a kernel on CUDA torch tensors, :func:`torch_call_backward` its
gradient (``grad=True``: the GPU's deterministic backward).

Only running needs a GPU: importing this module, compiling kernels and
building their runtime work without a driver (the runtime links against the
toolkit's stub ``libcuda``, or leaves ``cu*`` to be resolved at load time).
The driver is loaded on a kernel's first call, which raises
:class:`CudaError` without one.  :func:`available` says whether a GPU can be
used (a driver is loadable and reports a device).
"""

from __future__ import annotations

import ctypes
from typing import Optional, Sequence

import numpy as np

from . import build
from .gpu_kernel import CudaError, GpuKernel, driver_library

__all__ = ["CudaError", "Driver", "GpuKernel", "available", "compile_gpu", "torch_arguments",
           "torch_call", "torch_call_backward", "torch_call_backward_packed", "torch_call_packed",
           "torch_launch"]


class Driver:
    """The few driver API calls the tests and benchmarks need."""

    def __init__(self):
        self.lib = driver_library()
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


def compile_gpu(window: Sequence[int], heads: int, head_dim: int, *, chip: str = "sm_90",
                emit: str = "ptx", **options) -> GpuKernel:
    """``swin_opt.compile(..., target="nvptx")``: a GPU kernel and its runtime.

    ``options`` are those of :func:`swin_opt.compile` (``resolution``,
    ``shift``, ``layout``, ``padding``, ``dtype`` in any accepted spelling,
    ``kernel``: ``"warps"``/``"rows"``, ``packed_qkv``, ``name``, ``table``,
    ``cache_dir``, ...).  Compiling needs no GPU.
    """
    return build.compile(window, heads, head_dim, target="nvptx", chip=chip, emit=emit,
                         **options)


def torch_arguments(kernel: GpuKernel, given: dict, abi=None):
    """The tensors of a call of entry point ``abi`` (default: the forward's) by
    argument name, and its count, checked against its ABI: dtype, shape, one
    device, contiguity. The buffers it writes that are None or missing in
    ``given`` are allocated with ``torch.empty`` on the inputs' device. The
    device type is not checked here (:func:`torch_call` does; the CUDA
    operators of :mod:`swin_opt.torch.ops` pass CUDA tensors by construction)."""
    import torch

    dtypes = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    abi = abi or kernel.abi
    first = abi.role("input")[0].name
    like = given[first]
    for name, t in given.items():
        if t is not None and name not in abi:
            raise ValueError(f"{name} is not an argument of this kernel")
        if (t is None and name in abi and not abi[name].nullable
                and abi[name].role not in abi.written_roles):
            raise TypeError(f"{name} must be a CUDA torch tensor")
    count = abi.count_of(first, like.shape)
    shapes = abi.shapes(count)
    tensors = {name: t for name, t in given.items() if t is not None}
    for arg in abi.arguments:
        if arg.role in abi.written_roles and tensors.get(arg.name) is None:
            tensors[arg.name] = torch.empty(shapes[arg.name], device=like.device,
                                            dtype=dtypes[arg.dtype])
    for name, t in tensors.items():
        want = dtypes[abi[name].dtype]
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a CUDA torch tensor")
        if t.device != like.device or t.dtype != want:
            raise ValueError(f"{name} must be on {like.device} with dtype {want}")
        if tuple(t.shape) != shapes[name]:
            raise ValueError(f"{name} must have shape {abi[name].shape_doc()} = {shapes[name]}, "
                             f"got {tuple(t.shape)}")
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous")
    return tensors, count


def torch_launch(kernel: GpuKernel, tensors: dict, count: int, abi=None) -> None:
    """Launch entry point ``abi`` (default: the forward) on torch's current stream
    of the tensors' device, with that device current: the host runtime loads its
    module into the current CUDA context (one per device), and the stream
    belongs to that context."""
    import torch

    device = next(iter(tensors.values())).device
    with torch.cuda.device(device):
        stream = torch.cuda.current_stream(device).cuda_stream
        kernel._run({name: t.data_ptr() for name, t in tensors.items()}, count, stream, abi)


def _torch_run(kernel: GpuKernel, given: dict, abi=None) -> list:
    """Check CUDA torch tensors against entry point ``abi``'s ABI (default: the
    forward's), allocate the buffers it writes that are None, and run on torch's
    current stream. Returns the written buffers, in the ABI's order."""
    import torch

    abi = abi or kernel.abi
    first = abi.role("input")[0].name
    for name, t in given.items():
        if (t is None and name == first) or (
                t is not None and not (isinstance(t, torch.Tensor) and t.is_cuda)):
            raise TypeError(f"{name} must be a CUDA torch tensor")
    tensors, count = torch_arguments(kernel, given, abi)
    torch_launch(kernel, tensors, count, abi)
    return [tensors[arg.name] for arg in abi.arguments if arg.role in abi.written_roles]


def torch_call(kernel: GpuKernel, q, k, v, table, *, out=None, pad_qkv=None):
    """Runs a GPU kernel on CUDA torch tensors, without copies, on torch's current stream.

    ``q, k, v`` (and ``out``) in the kernel's layout, contiguous, on one CUDA
    device, of the kernel's dtype; ``table`` likewise (None for a baked table).
    ``out`` must not overlap an input. Returns ``out``.
    """
    if kernel.packed:
        raise TypeError("a packed-qkv kernel runs through torch_call_packed")
    return _torch_run(kernel, dict(q=q, k=k, v=v, table=table, pad_qkv=pad_qkv, out=out))[0]


def _packed_view(kernel: GpuKernel, qkv):
    """``[batch, L, 3 * C]`` as the ABI's ``[batch, L, 3, heads, head_dim]`` (the same memory)."""
    shape = kernel.abi["qkv"].shape
    if qkv.dim() == 3 and qkv.is_contiguous():
        return qkv.view(qkv.shape[0], qkv.shape[1], *shape[2:])
    return qkv


def torch_call_packed(kernel: GpuKernel, qkv, table, *, out=None, pad_qkv=None):
    """:func:`torch_call` for a packed-qkv kernel: ``qkv`` is the qkv projection's
    output ``[batch, L, 3 * C]`` (or ``[batch, L, 3, heads, head_dim]``) as it is;
    ``out`` is ``[batch, L, C]``."""
    if not kernel.packed:
        raise TypeError("torch_call_packed needs a kernel compiled with packed_qkv=True")
    return _torch_run(kernel, dict(qkv=_packed_view(kernel, qkv), table=table, pad_qkv=pad_qkv,
                                   out=out))[0]


def torch_call_backward(kernel: GpuKernel, q, k, v, table, out, dout, *, grads=None):
    """The gradient of a ``grad=True`` GPU kernel on CUDA torch tensors, on torch's
    current stream: from the forward's inputs, its ``out`` and the output's gradient
    ``dout`` (``out``'s shape), returns ``(dq, dk, dv, dtable)``: the inputs' layout and
    dtype, and ``dtable`` ``[T, heads]`` float32, summed over every window in a fixed
    order (the same bits on every run). ``grads`` optionally supplies the result
    buffers by name (``dq``, ``dk``, ``dv``, ``dtable``); they must not overlap the
    inputs. A packed-qkv kernel: :func:`torch_call_backward_packed`."""
    if kernel.packed:
        raise TypeError("a packed-qkv kernel's backward runs through torch_call_backward_packed")
    given = dict(q=q, k=k, v=v, table=table, out=out, dout=dout)
    given.update(_result_buffers(grads, ("dq", "dk", "dv", "dtable")))
    return tuple(_torch_run(kernel, given, kernel._backward_abi()))


def torch_call_backward_packed(kernel: GpuKernel, qkv, table, out, dout, *, grads=None):
    """:func:`torch_call_backward` for a packed-qkv kernel: returns ``(dqkv, dtable)``,
    ``dqkv`` in the ABI's ``[batch, L, 3, heads, head_dim]``."""
    if not kernel.packed:
        raise TypeError("torch_call_backward_packed needs a kernel compiled with packed_qkv=True")
    given = dict(qkv=_packed_view(kernel, qkv), table=table, out=out, dout=dout)
    given.update(_result_buffers(grads, ("dqkv", "dtable")))
    return tuple(_torch_run(kernel, given, kernel._backward_abi()))


def _result_buffers(grads, names) -> dict:
    grads = dict(grads or {})
    unknown = sorted(set(grads) - set(names))
    if unknown:
        raise TypeError(f"unknown gradient buffers {unknown}")
    return grads
