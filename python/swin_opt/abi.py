"""The C ABI of a kernel, as ``swin-aot`` describes it.

Beside every header (``--emit=obj|so|ptx|cubin|fatbin``) ``swin-aot`` writes
``<output>.json``, the kernel's arguments in order with their role, C
type, element type and shape (format ``swin-opt-kernel-abi``, version 1)::

    {"format": "swin-opt-kernel-abi", "version": 1, "name": "swin_window_attention",
     "target": "cpu", "dtype": "f32", "layout": "windows", "packed_qkv": false,
     "returns": "int32",
     "arguments": [
       {"name": "q", "role": "input", "ctype": "const float *", "dtype": "f32",
        "shape": ["num_windows", 3, 49, 32], "nullable": false},
       ...
       {"name": "num_windows", "role": "count", "ctype": "int64_t"}]}

A GPU kernel's entry points also list their launches as the host runtime
makes them (``"launches"``: kernel symbol, block size, items per block, fixed
grid, ``dynamic_shared_bytes``: the dynamic shared memory per block, 0 where
the kernel's shared memory is static).

The tool is the one place that knows the ABI; this module turns the
description into what Python needs (``ctypes`` argument types, the expected
shape and storage dtype of each buffer for a given count, the call's argument
order), so that the CPU :class:`swin_opt.Kernel` and the GPU
:class:`swin_opt.cuda.GpuKernel` never re-derive it from the configuration.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import json
from pathlib import Path
from typing import Any, Dict, Iterable, Optional, Sequence, Tuple, Union

import numpy as np

from .dtypes import STORAGE

__all__ = ["AbiError", "Argument", "Launch", "KernelAbi", "load", "parse", "check_no_overlap",
           "FORMAT", "VERSION", "KERNEL_ABI", "STORAGE", "GEOMETRY_KEYS"]

FORMAT = "swin-opt-kernel-abi"
#: Version of the JSON description this module reads.
VERSION = 1
#: The description's keys that say which attention the kernel computes.
GEOMETRY_KEYS = ("window", "heads", "head_dim", "resolution", "shift", "padding", "partition",
                 "class_token", "cosine", "table_rows")
#: The kernel ABI this package calls (``swin-aot --version``: ``(kernel ABI n)``).
KERNEL_ABI = 1


#: C type -> ctypes type. Host pointers travel as void pointers (None is NULL),
#: device pointers as 64-bit integers, streams as opaque handles.
_CTYPES = {
    "const float *": ctypes.c_void_p,
    "float *": ctypes.c_void_p,
    "const uint16_t *": ctypes.c_void_p,
    "uint16_t *": ctypes.c_void_p,
    "int64_t": ctypes.c_int64,
    "CUdeviceptr": ctypes.c_uint64,
    "CUstream": ctypes.c_void_p,
}
_BUFFER_CTYPES = {"const float *", "float *", "const uint16_t *", "uint16_t *", "CUdeviceptr"}
_BUFFER_ROLES = ("input", "table", "logit_scale", "output", "padding",
                 # the backward (``swin-aot --grad``): dout, dq/dk/dv (or dqkv), dtable
                 "output_gradient", "input_gradient", "table_gradient")
#: The buffers a forward / backward entry point writes.
WRITTEN_ROLES = {"forward": ("output",), "backward": ("input_gradient", "table_gradient")}
_ROLES = _BUFFER_ROLES + ("count", "stream")
_REBUILD = "rebuild swin-aot from the same checkout as this Python package (scripts/setup.sh)"


class AbiError(RuntimeError):
    """A kernel's ABI description is missing, malformed, or not one this package can call."""


@dataclasses.dataclass(frozen=True)
class Argument:
    """One C argument of a kernel."""

    name: str
    role: str  # input | table | logit_scale | output | padding | count | stream | *_gradient
    ctype: str
    #: Element type of a buffer ("f32", "f16", "bf16"); None for scalars.
    dtype: Optional[str] = None
    #: Shape of a buffer: ints and the name of the count argument.
    shape: Optional[Tuple[Union[int, str], ...]] = None
    #: Whether NULL (None / 0) may be passed.
    nullable: bool = False

    @property
    def is_buffer(self) -> bool:
        return self.role in _BUFFER_ROLES

    @property
    def storage(self) -> np.dtype:
        """NumPy storage dtype of the buffer's elements."""
        return STORAGE[self.dtype]

    @property
    def ctypes_type(self):
        return _CTYPES[self.ctype]

    def shape_for(self, count: int) -> Tuple[int, ...]:
        """The buffer's shape when the count argument is ``count``."""
        return tuple(count if isinstance(e, str) else e for e in self.shape)

    def shape_doc(self) -> str:
        """The shape as written in the description, e.g. ``[num_windows, 3, 49, 32]``."""
        return "[" + ", ".join(str(e) for e in self.shape) + "]"


@dataclasses.dataclass(frozen=True)
class Launch:
    """One launch of a GPU entry point, as its host runtime makes it."""

    symbol: str
    block_size: int
    #: (window, head) items per block; 0: a fixed grid of ``grid`` blocks.
    items_per_block: int
    grid: int
    #: Bytes of dynamic shared memory per block (0: static shared memory only);
    #: above 48 KiB the runtime opts the function in to them.
    dynamic_shared_bytes: int = 0


@dataclasses.dataclass(frozen=True)
class KernelAbi:
    """A kernel's C ABI: its arguments in call order."""

    name: str
    target: str
    dtype: str
    layout: str
    packed_qkv: bool
    arguments: Tuple[Argument, ...]
    source: str = "<memory>"
    #: "forward", or "backward" for the gradient's entry point.
    direction: str = "forward"
    #: The gradient's entry point (``swin-aot --grad``), or None.
    backward: Optional["KernelAbi"] = None
    #: A GPU entry point's launches, in order (empty for a CPU kernel).
    launches: Tuple[Launch, ...] = ()
    #: The geometry the kernel was built for, as described (:data:`GEOMETRY_KEYS`
    #: that the description has; lists as tuples), for checks against a
    #: configuration: the call ABI does not depend on it.
    geometry: Dict[str, Any] = dataclasses.field(default_factory=dict, compare=False)

    @property
    def written_roles(self) -> Tuple[str, ...]:
        return WRITTEN_ROLES[self.direction]

    # Lookups by name and role, built once: every kernel call makes several.
    @functools.cached_property
    def _by_name(self) -> Dict[str, Argument]:
        return {arg.name: arg for arg in self.arguments}

    @functools.cached_property
    def _by_role(self) -> Dict[str, Tuple[Argument, ...]]:
        roles: Dict[str, list] = {}
        for arg in self.arguments:
            roles.setdefault(arg.role, []).append(arg)
        return {role: tuple(args) for role, args in roles.items()}

    def __getitem__(self, name: str) -> Argument:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(name) from None

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def role(self, role: str) -> Tuple[Argument, ...]:
        """The arguments of one role, in call order."""
        return self._by_role.get(role, ())

    @property
    def count(self) -> Argument:
        """The count argument (``num_windows`` or ``batch``)."""
        return self.role("count")[0]

    @functools.cached_property
    def buffers(self) -> Tuple[Argument, ...]:
        return tuple(arg for arg in self.arguments if arg.is_buffer)

    def argtypes(self) -> list:
        """``ctypes`` argument types in call order."""
        return [arg.ctypes_type for arg in self.arguments]

    def bind(self, library: Union[str, Path], what: str) -> tuple:
        """``(ctypes function, library handle)`` of this entry point in the shared
        library ``library``, typed from the description (``what`` names the kernel in
        errors). Keep the handle alive as long as the function."""
        try:
            lib = ctypes.CDLL(str(library))
        except OSError as exc:
            raise OSError(f"cannot load kernel library for {what}: {exc}") from exc
        try:
            fn = getattr(lib, self.name)
        except AttributeError:
            raise RuntimeError(f"{library} does not export {self.name!r}") from None
        fn.restype = ctypes.c_int32
        fn.argtypes = self.argtypes()
        return fn, lib

    @functools.cached_property
    def _shapes_by_count(self) -> Dict[int, Dict[str, Tuple[int, ...]]]:
        return {}

    def shapes(self, count: int) -> Dict[str, Tuple[int, ...]]:
        """Expected shape of every buffer argument for ``count`` windows / images
        (a new dict; the shapes of the last few counts are kept)."""
        cache = self._shapes_by_count
        shapes = cache.get(count)
        if shapes is None:
            if len(cache) >= 16:
                cache.clear()
            shapes = cache[count] = {arg.name: arg.shape_for(count) for arg in self.buffers}
        return dict(shapes)

    def nbytes(self, name: str, count: int) -> int:
        arg = self[name]
        return int(np.prod(arg.shape_for(count), dtype=np.int64)) * arg.storage.itemsize

    def count_of(self, name: str, shape: Sequence[int]) -> int:
        """Read the count from the shape of buffer ``name`` (ValueError on a wrong rank)."""
        arg = self[name]
        if len(shape) != len(arg.shape):
            raise ValueError(f"{name} must have shape {arg.shape_doc()}, got {tuple(shape)}")
        return int(shape[arg.shape.index(self.count.name)])

    def call_args(self, values: Dict[str, Any]) -> list:
        """Positional C arguments from ``values`` by name (missing ones are NULL / 0)."""
        args = []
        for arg in self.arguments:
            value = values.get(arg.name)
            # Device pointers and counts are integers to ctypes: NULL is 0.
            args.append(0 if value is None and arg.ctypes_type is not ctypes.c_void_p else value)
        return args


def _fail(source: str, what: str) -> AbiError:
    return AbiError(f"{source}: {what}; {_REBUILD}")


def _argument(entry: Any, count_names: Iterable[str], source: str) -> Argument:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise _fail(source, f"argument without a name: {entry!r}")
    name = entry["name"]
    role, ctype = entry.get("role"), entry.get("ctype")
    if role not in _ROLES:
        raise _fail(source, f"argument {name!r} has unknown role {role!r}")
    if ctype not in _CTYPES:
        raise _fail(source, f"argument {name!r} has unknown ctype {ctype!r}")
    if role not in _BUFFER_ROLES:
        return Argument(name=name, role=role, ctype=ctype)
    if ctype not in _BUFFER_CTYPES:
        raise _fail(source, f"buffer argument {name!r} has the scalar ctype {ctype!r}")
    dtype, shape = entry.get("dtype"), entry.get("shape")
    if dtype not in STORAGE:
        raise _fail(source, f"argument {name!r} has unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(
            (isinstance(e, int) and not isinstance(e, bool) and e >= 0) or e in count_names
            for e in shape):
        raise _fail(source, f"argument {name!r} has a bad shape {shape!r}")
    return Argument(name=name, role=role, ctype=ctype, dtype=dtype, shape=tuple(shape),
                    nullable=bool(entry.get("nullable", False)))


def parse(data: Any, source: str = "<memory>") -> KernelAbi:
    """Validate a decoded description and return it as a :class:`KernelAbi`."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise _fail(source, f"not a {FORMAT} description")
    if data.get("version") != VERSION:
        raise _fail(source, f"description version {data.get('version')!r}, this package reads "
                            f"version {VERSION}")
    if data.get("returns") != "int32":
        raise _fail(source, f"kernels returning {data.get('returns')!r} are not supported")
    for key in ("name", "target", "dtype", "layout"):
        if not isinstance(data.get(key), str):
            raise _fail(source, f"missing {key!r}")
    geometry = {key: tuple(data[key]) if isinstance(data[key], list) else data[key]
                for key in GEOMETRY_KEYS if key in data}
    common = dict(target=data["target"], dtype=data["dtype"], layout=data["layout"],
                  packed_qkv=bool(data.get("packed_qkv", False)), source=source,
                  geometry=geometry)
    backward = None
    if "backward" in data:
        entry = data["backward"]
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise _fail(source, "malformed backward entry point")
        backward = KernelAbi(name=entry["name"], direction="backward",
                             arguments=_arguments(entry, source, "output_gradient"),
                             launches=_launches(entry, source), **common)
    return KernelAbi(name=data["name"], arguments=_arguments(data, source, "output"),
                     backward=backward, launches=_launches(data, source), **common)


def _launches(data: dict, source: str) -> Tuple[Launch, ...]:
    """The validated launches of one entry point (none where not described)."""
    entries = data.get("launches", [])
    if not isinstance(entries, list):
        raise _fail(source, "malformed launch list")
    launches = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("symbol"), str):
            raise _fail(source, f"launch without a symbol: {entry!r}")
        sizes = {}
        for key in ("block_size", "items_per_block", "grid", "dynamic_shared_bytes"):
            value = entry.get(key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise _fail(source, f"launch {entry['symbol']!r} has a bad {key} {value!r}")
            sizes[key] = value
        launches.append(Launch(symbol=entry["symbol"], **sizes))
    return tuple(launches)


def _arguments(data: dict, source: str, required_role: str) -> Tuple[Argument, ...]:
    """The validated argument list of one entry point."""
    entries = data.get("arguments")
    if not isinstance(entries, list):
        raise _fail(source, "no argument list")
    counts = [e.get("name") for e in entries if isinstance(e, dict) and e.get("role") == "count"]
    if len(counts) != 1:
        raise _fail(source, f"expected one count argument, found {len(counts)}")
    args = tuple(_argument(e, counts, source) for e in entries)
    names = [a.name for a in args]
    if len(set(names)) != len(names):
        raise _fail(source, f"duplicate argument names in {names}")
    if not any(a.role == required_role for a in args) or not any(a.role == "input" for a in args):
        raise _fail(source, f"no input or no {required_role} argument")
    return args


def load(path: Union[str, Path]) -> KernelAbi:
    """Read ``<output>.json``; :class:`AbiError` when it is missing or malformed."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AbiError(f"{path} is missing: the swin-aot that built this kernel does not describe "
                       f"its C ABI (kernel ABI {KERNEL_ABI}); {_REBUILD}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise _fail(str(path), f"not valid JSON ({exc})") from None
    return parse(data, str(path))


def check_no_overlap(buffers: Iterable[Tuple[Argument, int, int]],
                     written: Tuple[str, ...] = WRITTEN_ROLES["forward"]) -> None:
    """Raise ValueError when a written buffer (roles ``written``) shares memory with another.

    ``buffers``: ``(argument, address, nbytes)`` of contiguous buffers (device
    or host addresses; NULL / empty ones are ignored). The kernels read their
    inputs while writing the output, so an overlap silently gives wrong results.
    """
    spans = [(arg, int(address), int(nbytes)) for arg, address, nbytes in buffers
             if address and nbytes > 0]
    for out, o_start, o_size in spans:
        if out.role not in written:
            continue
        for other, start, size in spans:
            if other is not out and start < o_start + o_size and o_start < start + size:
                raise ValueError(f"{out.name} overlaps {other.name} in memory: the kernel reads "
                                 f"{other.name} while it writes {out.name}; pass a separate "
                                 f"{out.name} buffer")
