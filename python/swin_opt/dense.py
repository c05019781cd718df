"""Compiled dense layers: a Swin block's MLP, ``fc2(GELU(fc1(x)))`` with the
biases, or one projection ``x Wᵀ + b``, optionally with a residual added, as
one library per configuration.

:func:`compile_dense` writes the module of :func:`swin_opt.linear_mlir.dense_module`
for the layers' widths (``(C, hidden, out)`` for an MLP: :func:`compile_mlp`;
``(K, N)`` for one layer: :func:`compile_linear`) and compiles it with
``swin-aot --input`` (``rpe.matmul``: register-tiled FMA kernels, bias and
GELU applied to the product's tiles in registers) into the on-disk kernel
cache (:mod:`swin_opt.cache`: a ``k-<hash>`` directory keyed by the module's
text, ``swin-aot``'s options, the tool and the host CPU), and loads it with
:mod:`ctypes` as a :class:`DenseKernel`.

One library serves every row count M (every batch size and feature map of
a width): its functions take a dynamic M, through MLIR's C interface
(``_mlir_ciface_dense`` and ``_mlir_ciface_dense_residual``), and write into
the caller's ``[M, out]`` buffer. The weights are arguments, not
constants: a model may load or train other weights. They are passed
packed in the kernel's panels (:meth:`DenseKernel.pack`, once per weight
version in :mod:`swin_opt.torch.dense`), which costs a copy of the weights
when they change instead of on every call.

The library's parallel loops run on the calling thread's GNU libgomp team
(``swin-aot --input`` lowers them with ``rpe-parallel-to-gomp``): in a
PyTorch process torch's own pool, one set of threads. A call keeps the
team in step with its caller (:class:`_OpenMP`): its size is set to the
``threads`` the caller passes (the torch operator passes
``torch.get_num_threads()``, what torch set already). A library built with
``thread-runtime=omp`` calls LLVM's libomp instead; then its idle threads
are also told to sleep at once instead of spinning for 200 ms
(``kmp_set_blocktime(0)``) on the cores torch's pool runs the rest of the
model on.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Optional, Sequence, Tuple

import numpy as np

from . import cache, log
from .errors import CompileError
from .linear_mlir import DenseStack, dense_module, pack_weight
from .tools import find_swin_aot, last_line, run_tool, tool_info

__all__ = ["DenseConfig", "DenseKernel", "compile_dense", "compile_mlp", "compile_linear", "builds",
           "host_cpu_flags", "host_vector_width"]

#: The C interfaces of the library's two functions.
ENTRY = "_mlir_ciface_dense"
ENTRY_RESIDUAL = "_mlir_ciface_dense_residual"

_builds = 0
_builds_lock = threading.Lock()


def builds() -> int:
    """How many dense libraries this process has built (cache hits are not builds)."""
    return _builds


@functools.lru_cache(maxsize=None)
def host_cpu_flags() -> frozenset:
    """This machine's x86 feature flags (``/proc/cpuinfo``: avx2, avx512f,
    avx512_bf16, ...); empty where there are none to read."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def host_vector_width() -> int:
    """f32 lanes of this machine's vectors as ``swin-aot --cpu=native`` uses
    them: 16 with AVX-512, else 8."""
    return 16 if "avx512f" in host_cpu_flags() else 8


@dataclasses.dataclass(frozen=True)
class DenseConfig:
    """What one dense library computes and is built for.

    ``widths``: the layers' channels (:class:`swin_opt.linear_mlir.DenseStack`:
    ``(C, hidden, out)`` for an MLP, ``(K, N)`` for one layer).
    ``activation``: between the layers, GELU's erf (``"gelu"``) or tanh
    (``"gelu_tanh"``) form (:data:`swin_opt.linear_mlir.ACTIVATIONS`).
    ``vector_width``: the kernels' f32 lanes (8: AVX2, 16: AVX-512); the
    weights are packed in panels of three vectors. ``cpu``: ``swin-aot
    --cpu`` (None: the tool's default, this machine). ``parallel``: OpenMP
    loops (False: ``--no-parallel``)."""

    widths: Tuple[int, ...]
    vector_width: int = 8
    cpu: Optional[str] = None
    parallel: bool = True
    activation: str = "gelu"

    def __post_init__(self):
        object.__setattr__(self, "widths", tuple(int(w) for w in self.widths))
        if self.vector_width not in (8, 16):
            raise ValueError(f"vector_width must be 8 or 16, got {self.vector_width}")
        self.stack  # positive extents, at least one layer

    @property
    def stack(self) -> DenseStack:
        return DenseStack(self.widths, self.panel_width, self.activation)

    @property
    def panel_width(self) -> int:
        return 3 * self.vector_width

    def describe(self) -> str:
        kind = "mlp" if len(self.widths) == 3 else "linear" if len(self.widths) == 2 else "dense"
        cpu = self.cpu or "native"
        threads = "" if self.parallel else " no-parallel"
        # (the erf form unnamed, as before there was a choice)
        activation = (f" activation={self.activation}"
                      if len(self.widths) > 2 and self.activation != "gelu" else "")
        return (f"{kind} {'->'.join(map(str, self.widths))} f32 "
                f"vector-width={self.vector_width} cpu={cpu}{threads}{activation}")

    def aot_args(self) -> list:
        """``swin-aot``'s options (beside ``--input``, ``--emit`` and ``-o``)."""
        args = ["--name=dense", f"--pipeline-options=vector-width={self.vector_width}"]
        if self.cpu is not None:
            args.append(f"--cpu={self.cpu}")
        if not self.parallel:
            args.append("--no-parallel")
        return args


class _Descriptor(ctypes.Structure):
    """Base of the ranked memref descriptors of MLIR's C interface."""


@functools.lru_cache(maxsize=None)
def _descriptor_type(rank: int):
    fields = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p), ("offset", ctypes.c_int64),
              ("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
    return type(f"Descriptor{rank}D", (_Descriptor,), {"_fields_": fields})


def _descriptor(address: int, shape: Sequence[int]):
    """The descriptor of a contiguous row-major f32 buffer at ``address``."""
    desc = _descriptor_type(len(shape))()
    desc.allocated = desc.aligned = address
    stride = 1
    for i in reversed(range(len(shape))):
        desc.sizes[i] = shape[i]
        desc.strides[i] = stride
        stride *= shape[i]
    return desc


class _OpenMP:
    """The OpenMP runtime a library calls (found through its dependencies: libomp
    or libgomp; none for a serial library), set up per calling thread before a
    call: its team size, and, for libomp, no spinning after the call (see the
    module docstring)."""

    def __init__(self, lib: ctypes.CDLL):
        def symbol(name):
            try:
                fn = lib[name]
            except AttributeError:
                return None
            fn.restype = None
            fn.argtypes = [ctypes.c_int]
            return fn

        self._set_threads = symbol("omp_set_num_threads")
        self._set_blocktime = symbol("kmp_set_blocktime")
        self._thread = threading.local()

    def prepare(self, threads: Optional[int]) -> None:
        state = self._thread
        if self._set_blocktime is not None and not getattr(state, "blocktime", False):
            self._set_blocktime(0)
            state.blocktime = True
        if (threads is not None and self._set_threads is not None
                and getattr(state, "threads", None) != threads):
            self._set_threads(int(threads))
            state.threads = threads


@dataclasses.dataclass
class _Frame:
    """The argument descriptors of a call of one entry point (:meth:`DenseKernel._frame`)."""

    descriptors: list
    row_major: list  # those whose first extent is the call's row count
    arguments: list  # ctypes.byref of each descriptor


class DenseKernel:
    """A compiled dense library: ``out = L_n(... GELU(L_1(x)) ...) (+ residual)``,
    ``L_i(y) = y W_iᵀ + b_i`` (:class:`swin_opt.linear_mlir.DenseStack`).

    Call it with NumPy arrays (:meth:`__call__`) or with the addresses of
    contiguous float32 buffers (:meth:`call_addresses`, what the torch
    operators do). Weights are passed packed (:meth:`pack`)."""

    def __init__(self, config: DenseConfig, library: Path, directory: Optional[Path] = None):
        self.config = config
        self.library = Path(library)
        self.directory = directory
        self._lib = ctypes.CDLL(str(self.library.resolve()))
        self._entries = {False: self._lib[ENTRY], True: self._lib[ENTRY_RESIDUAL]}
        for entry in self._entries.values():
            entry.restype = None
        self._openmp = _OpenMP(self._lib)
        self._frames = threading.local()

    def __repr__(self) -> str:
        return f"<DenseKernel {self.config.describe()} at {self.library}>"

    def pack(self, weight) -> np.ndarray:
        """A ``[N, K]`` weight in this kernel's panels (:func:`swin_opt.linear_mlir.pack_weight`)."""
        return pack_weight(weight, self.config.panel_width)

    def call_addresses(self, rows: int, x: int, layers: Sequence[Tuple[int, int]],
                       residual: Optional[int], out: int, threads: Optional[int] = None) -> None:
        """Runs the kernel on buffers at these addresses: ``x`` [rows, widths[0]],
        each layer's ``(packed weight, bias [N])``, ``residual`` (or None) and
        ``out`` [rows, widths[-1]], all contiguous float32 (not checked), on
        ``threads`` OpenMP threads (None: the runtime's setting)."""
        self._openmp.prepare(threads)
        with_residual = residual is not None
        frame = self._frame(with_residual)
        descriptors = frame.descriptors
        descriptors[0].allocated = descriptors[0].aligned = x
        i = 1
        for weight, bias in layers:
            descriptors[i].allocated = descriptors[i].aligned = weight
            descriptors[i + 1].allocated = descriptors[i + 1].aligned = bias
            i += 2
        if with_residual:
            descriptors[i].allocated = descriptors[i].aligned = residual
        descriptors[-1].allocated = descriptors[-1].aligned = out
        for desc in frame.row_major:
            desc.sizes[0] = rows
        self._entries[with_residual](*frame.arguments)

    def _frame(self, with_residual: bool) -> "_Frame":
        """This thread's descriptors of one entry point's arguments, made once: a
        call sets their addresses and row count (a few field writes, where
        building the descriptors took most of a small call's time)."""
        frames = self._frames.__dict__
        frame = frames.get(with_residual)
        if frame is None:
            stack = self.config.stack
            widths = stack.widths
            shapes = [(1, widths[0])]
            for i in range(stack.layers):
                shapes += [stack.weight_shape(i), (widths[i + 1],)]
            shapes += [(1, widths[-1])] * (2 if with_residual else 1)
            descriptors = [_descriptor(0, shape) for shape in shapes]
            # x, (residual,) out: [rows, ...]
            row_major = [descriptors[0], *descriptors[1 + 2 * stack.layers:]]
            frame = frames[with_residual] = _Frame(
                descriptors, row_major, [ctypes.byref(d) for d in descriptors])
        return frame

    def __call__(self, x, layers, residual=None, out=None, threads: Optional[int] = None) -> np.ndarray:
        """NumPy: ``x`` [M, widths[0]] float32, each layer's ``(packed weight,
        bias)`` and ``residual`` [M, widths[-1]] (optional); returns ``out`` [M,
        widths[-1]] (written in place when given). ``threads``: as for
        :meth:`call_addresses`."""
        stack = self.config.stack
        widths = stack.widths
        x = _f32(x, "x", (None, widths[0]))
        rows, n = x.shape[0], widths[-1]
        if len(layers) != stack.layers:
            raise ValueError(f"{stack.layers} layers expected, got {len(layers)}")
        arrays = [(_f32(w, f"layer {i} weight (packed)", stack.weight_shape(i)),
                   _f32(b, f"layer {i} bias", (widths[i + 1],))) for i, (w, b) in enumerate(layers)]
        res = None if residual is None else _f32(residual, "residual", (rows, n))
        if out is None:
            out = np.empty((rows, n), np.float32)
        elif not (isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == (rows, n)
                  and out.flags.c_contiguous and out.flags.writeable):
            raise ValueError(f"out must be a writable contiguous float32 array of shape {(rows, n)}")
        if rows:
            self.call_addresses(rows, x.ctypes.data, [(w.ctypes.data, b.ctypes.data) for w, b in arrays],
                                None if res is None else res.ctypes.data, out.ctypes.data, threads)
        return out


def _f32(a, name: str, shape: tuple) -> np.ndarray:
    """``a`` as a contiguous float32 array of ``shape`` (None: any extent)."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    if a.ndim != len(shape) or any(s is not None and s != d for s, d in zip(shape, a.shape)):
        want = "[" + ", ".join("M" if s is None else str(s) for s in shape) + "]"
        raise ValueError(f"{name} must have shape {want}, got {list(a.shape)}")
    return a


_loaded: dict = {}
_loaded_lock = threading.Lock()


def compile_dense(widths: Sequence[int], *, vector_width: Optional[int] = None,
                  cpu: Optional[str] = None, parallel: bool = True, activation: str = "gelu",
                  cache_dir: Optional[os.PathLike] = None) -> DenseKernel:
    """The :class:`DenseKernel` of the layers ``widths`` (see :class:`DenseConfig`),
    from this process, the disk cache, or built by ``swin-aot --input`` (well
    under a second) into it.

    ``vector_width`` defaults to this machine's (:func:`host_vector_width`)
    for ``cpu`` None or ``"native"``, else to 8 (AVX2: every x86-64 CPU with
    FMA; pass 16 for an AVX-512 ``cpu``).

    Raises :class:`swin_opt.SwinAotNotFoundError` without ``swin-aot`` and
    :class:`swin_opt.CompileError` when it fails."""
    if vector_width is None:
        vector_width = host_vector_width() if cpu in (None, "native") else 8
    config = DenseConfig(tuple(int(w) for w in widths), int(vector_width),
                         None if cpu in (None, "native") else str(cpu), bool(parallel),
                         str(activation))
    root = Path(cache_dir) if cache_dir is not None else cache.get_cache_dir()
    memo = (config, str(root))
    with _loaded_lock:
        kern = _loaded.get(memo)
    if kern is not None:
        return kern
    info = tool_info(find_swin_aot())
    text = dense_module(config.stack)
    final = root / cache.entry_name(config.aot_args(), "so", text.encode(), info,
                                    host_specific=config.cpu is None)
    if not (final / cache.META_FILE).is_file():
        _build(info, config, text, root, final)
    else:
        cache.touch(final / cache.META_FILE)
    kern = DenseKernel(config, final / (cache.STEM + ".so"), final)
    with _loaded_lock:
        return _loaded.setdefault(memo, kern)


def compile_mlp(channels: int, hidden: int, out: Optional[int] = None, **options) -> DenseKernel:
    """A Swin MLP's kernel, ``(channels, hidden, out)`` (``out`` defaults to
    ``channels``); ``options`` as :func:`compile_dense`'s."""
    return compile_dense((channels, hidden, channels if out is None else out), **options)


def compile_linear(in_features: int, out_features: int, **options) -> DenseKernel:
    """One linear layer's kernel, ``(in_features, out_features)``; ``options`` as
    :func:`compile_dense`'s."""
    return compile_dense((in_features, out_features), **options)


def _build(info, config: DenseConfig, text: str, root: Path, final: Path) -> None:
    """``swin-aot --input`` into a temporary directory of ``root``, published as
    ``final`` atomically (as :mod:`swin_opt.build` publishes kernels)."""
    global _builds
    with cache.staging(root) as tmp:
        source = tmp / "dense.mlir"
        source.write_text(text)
        library = tmp / (cache.STEM + ".so")
        cmd = [str(info.path), f"--input={source}", *config.aot_args(), "--emit=so", "-o", str(library)]
        start = time.perf_counter()
        proc = run_tool(cmd)
        if proc.returncode != 0:
            raise CompileError(f"swin-aot rejected {config.describe()} (exit {proc.returncode}): "
                               f"{last_line(proc.stderr or proc.stdout)}",
                               command=cmd, returncode=proc.returncode, stderr=proc.stderr)
        if not library.is_file():
            raise CompileError(f"swin-aot exited 0 but did not write {library.name}", command=cmd,
                               stderr=proc.stderr)
        meta = {"kind": "dense", "dense": dataclasses.asdict(config), "description": config.describe(),
                "emit": "so", "command": cmd, "tool_version": info.version,
                "module_sha256": hashlib.sha256(text.encode()).hexdigest(),
                "build_seconds": round(time.perf_counter() - start, 3)}
        cache.publish(tmp, final, meta)
    with _builds_lock:
        _builds += 1
    log.info(f"swin_opt: built {config.describe()} in {meta['build_seconds']:.1f} s")
