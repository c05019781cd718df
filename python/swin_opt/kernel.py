"""The CPU kernel: :class:`Kernel` calls a compiled ``swin-aot`` shared library
through :mod:`ctypes` on NumPy arrays or CPU torch tensors, without copies.

Argument order, C types, element types and shapes come from the ABI
description ``swin-aot`` wrote (:mod:`swin_opt.abi`); every buffer is
checked against it (kind, dtype, shape, contiguity, overlap) before the call.

The kernels use OpenMP: ``OMP_NUM_THREADS`` (read when the library is first
loaded) sets the thread count.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
import threading
from pathlib import Path
from typing import Any, Dict, NamedTuple, Optional, Tuple

import numpy as np

from . import abi as _abi
from .cache import Artifacts
from .config import KernelConfig, describe
from .dtypes import STORAGE

__all__ = ["Kernel", "is_torch_tensor"]


def is_torch_tensor(x) -> bool:
    """Whether ``x`` is a torch tensor (never imports torch: without it loaded, nothing is)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


@functools.lru_cache(maxsize=None)
def _torch_dtype(code: str):
    import torch  # only reached when a tensor was passed, so torch is importable

    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[code]


class _Buffer(NamedTuple):
    obj: Any  # keeps the memory alive
    ptr: int
    shape: Tuple[int, ...]
    nbytes: int


def _buffer(name: str, x, code: str, shape: Tuple[int, ...], doc="") -> _Buffer:
    """Validate an argument (kind, dtype, shape, then layout) and return its data pointer.

    Never copies: a wrong dtype or a non-contiguous array is an error. ``doc``
    names the shape in errors: a string, or a function giving one (made only
    for an error: every call validates its buffers).
    """
    if x.__class__ is not np.ndarray and is_torch_tensor(x):
        want = _torch_dtype(code)
        if not x.is_cpu:
            raise ValueError(f"{name} must be a CPU tensor, got device {x.device}")
        if x.dtype != want:
            raise TypeError(f"{name} must have dtype {want}, got {x.dtype}")
        if x.shape != shape:  # a torch.Size equals the tuple of its extents
            raise ValueError(f"{name} must have shape {_shape_doc(doc)}{shape}, "
                             f"got {tuple(x.shape)}")
        if not x.is_contiguous():
            raise ValueError(f"{name} must be contiguous (call .contiguous())")
        nbytes = x.nbytes
        return _Buffer(x, x.data_ptr() if nbytes else 0, shape, nbytes)
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray or torch.Tensor, got {type(x).__name__}")
    want = STORAGE[code]
    ok = x.dtype == want or (code == "bf16" and x.dtype.name == "bfloat16")
    if not ok:
        hint = " (raw bfloat16 bits; see float32_to_bf16_bits)" if want == np.uint16 else ""
        raise TypeError(f"{name} must have dtype {want}{hint}, got {x.dtype}")
    if not x.dtype.isnative:
        raise TypeError(f"{name} must be in native byte order")
    if x.shape != shape:
        raise ValueError(f"{name} must have shape {_shape_doc(doc)}{shape}, got {x.shape}")
    if not x.flags.c_contiguous or not x.flags.aligned:
        raise ValueError(f"{name} must be C-contiguous and aligned (use numpy.ascontiguousarray)")
    return _Buffer(x, x.ctypes.data if x.size else 0, x.shape, x.nbytes)


def _shape_doc(doc) -> str:
    """``doc = `` for a shape error's message (``doc`` as :func:`_buffer` takes it)."""
    doc = doc() if callable(doc) else doc
    return f"{doc} = " if doc else ""


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
                    fn, self._lib = abi.bind(self.library, describe(self.config))
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
            if not (is_torch_tensor(x) or isinstance(x, np.ndarray)):
                raise TypeError(f"{arg.name} must be a numpy.ndarray or torch.Tensor, "
                                f"got {type(x).__name__}")
        first = given[read[0].name]
        torch_io = is_torch_tensor(first)
        if any(is_torch_tensor(given[arg.name]) != torch_io for arg in read):
            raise TypeError(f"{', '.join(a.name for a in read)} must all be numpy arrays or "
                            "all torch tensors")
        n = abi.count_of(read[0].name, first.shape)
        shapes = abi.shapes(n)
        bufs = {arg.name: _buffer(arg.name, given[arg.name], arg.dtype, shapes[arg.name],
                                  arg.shape_doc) for arg in read}
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
        ``dtable`` ``[T, heads]`` sums every window, in float32. The other
        buffers are of the kernel's storage dtype (float32; a ``kernel="warps"``
        kernel, the GPU's backward emulated, also float16 and bfloat16 bits),
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
            buf = self._output(grads.pop(arg.name, None), shapes[arg.name], first, torch_io,
                               arg.dtype)
            bufs[arg.name] = _buffer(arg.name, buf, arg.dtype, shapes[arg.name], arg.shape_doc)
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
    def _output(out, shape, like, torch_io: bool, code: Optional[str] = None):
        """``out``, allocated like ``like`` (of the ABI's dtype ``code`` where given) when
        None (large ones in huge pages)."""
        if out is None:
            if torch_io:
                import torch

                dtype = _torch_dtype(code) if code else like.dtype
                out = torch.empty(shape, dtype=dtype)
                _advise_huge_pages(out.data_ptr(), out.numel() * out.element_size())
                return out
            out = np.empty(shape, dtype=STORAGE[code] if code else like.dtype)
            _advise_huge_pages(out.ctypes.data, out.nbytes)
            return out
        if is_torch_tensor(out) != torch_io:
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
