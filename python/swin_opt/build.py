"""Building kernels: :func:`compile` turns a configuration into ``swin-aot``'s
outputs (for the CPU a shared library; for ``target="nvptx"`` PTX/cubin/fatbin
plus a host runtime, built here into a shared library with the system C
compiler), caches them on disk (:mod:`swin_opt.cache`) and returns a
:class:`swin_opt.Kernel` (CPU), a :class:`swin_opt.cuda.GpuKernel` or the
:class:`swin_opt.cache.Artifacts` of another ``emit``.  Every compile -- CPU
or GPU, the Python API or the command line -- goes through the same
configuration, command line, cache and error path here.

The C ABI of a kernel is not re-derived here: ``swin-aot`` writes a
machine-readable description beside every header (``<output>.json``, see
:mod:`swin_opt.abi`), which is checked against the configuration asked for.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np

from . import abi as _abi
from . import cache, log
from .cache import Artifacts
from .cuda_toolkit import cuda_toolkit
from .config import DEFAULT_EMIT, EMITS, KernelConfig, describe, make_config
from .errors import CompileError
from .gpu_kernel import GpuKernel
from .kernel import Kernel, is_torch_tensor
from .tools import ToolInfo, find_swin_aot, last_line, run_tool, tool_info

__all__ = ["compile", "build_runtime", "builds"]

_builds = 0
_builds_lock = threading.Lock()


def builds() -> int:
    """How many kernels this process has built (cache hits are not builds)."""
    return _builds


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
    class_token: bool = False,
    partition: Optional[str] = None,
    warps_per_block: int = 0,
    f32_mma: str = "none",
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
    warps_per_block:
        The warp kernel (``kernel="warps"``, the GPU's default; emulated on
        the CPU): (window, head) items per block, in dynamic shared memory
        where they need more than 48 KiB (``swin-aot --warps-per-block``); 0,
        the default: the kernel's choice, which gives a window whose one warp
        needs more the row kernel.
    f32_mma:
        The warp kernel on float32 (``swin-aot --f32-mma``): ``"none"``, the
        default (the row kernel's f32 FMAs), ``"bf16x3"`` (each operand as
        two bf16 terms, three tensor-core products: 2^-16 of each product,
        finer than the TF32 that ``torch.backends.cuda.matmul.allow_tf32``
        allows) or ``"bf16x6"`` (three terms, six products: f32's precision).
    cosine:
        SwinV2's scaled cosine attention: ``softmax(cos(q, k) *
        min(exp(logit_scale[h]), 100) + table[idx] (+ mask)) v``, with q and k
        L2-normalized inside the kernel; ``scale`` then defaults to 1.  The
        kernel is called with ``logit_scale=`` (the raw ``[heads]``
        parameter, float32); ``table`` is SwinV2's final bias (``16 *
        sigmoid`` of the CPB MLP).  CPU only.
    class_token:
        BEiT's relative position bias (BEiT, BEiT v2, data2vec-vision):
        global attention over the ``window`` patch grid plus a class token
        first, ``N = prod(window) + 1``; ``table`` (or the table argument)
        is ``[prod(2W-1) + 3, heads]``, Swin's rows then class -> token,
        token -> class and class -> class. Windows layout, CPU tiles kernel.
    partition:
        Token layout: ``"block"`` (the default, Swin's windows) or ``"grid"``,
        MaxViT's grid attention: ``window`` is the grid ``(Gh, Gw)`` and window
        ``(wy, wx)`` holds the tokens at ``(ty * H / Gh + wy, tx * W / Gw +
        wx)`` (timm's ``grid_partition``), read from the map in place. No shift,
        and ``resolution`` a multiple of ``window``.
    grad:
        Also compile the gradient (``swin-aot --grad``): see
        :meth:`Kernel.backward` and, for ``target="nvptx"``,
        :meth:`swin_opt.cuda.GpuKernel.backward`. The CPU's takes float32;
        the GPU's (also on the CPU with ``kernel="warps"``, emulated)
        float32, float16 and bfloat16. ``dtable`` is float32.
    emit:
        ``swin-aot --emit``; see above for what is returned.
    cache_dir:
        Override the cache directory (default :func:`swin_opt.get_cache_dir`).

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
                      chip=chip, cosine=cosine, grad=grad, class_token=class_token,
                      partition=partition, warps_per_block=warps_per_block,
                      f32_mma=f32_mma)
    if emit is None:
        emit = DEFAULT_EMIT[cfg.target]
    if emit not in EMITS[cfg.target]:
        raise ValueError(f"emit must be one of {sorted(EMITS[cfg.target])} for "
                         f"target={cfg.target!r}, got {emit!r}")
    baked = None
    table_bytes = None
    if table is not None:
        baked = _to_numpy_f32(table, "table")
        if baked.shape != (cfg.table_rows, cfg.heads):
            raise ValueError(f"table must have shape [{cfg.table_rows}, {cfg.heads}] for "
                             f"window {cfg.window}{' and a class token' if cfg.class_token else ''}"
                             f", got {tuple(baked.shape)}")
        baked = np.ascontiguousarray(baked, dtype="<f4")
        baked.setflags(write=False)
        table_bytes = baked.tobytes()

    info = tool_info(find_swin_aot())
    root = Path(cache_dir) if cache_dir is not None else cache.get_cache_dir()
    host_specific = cfg.target == "cpu" and cfg.cpu in (None, "native")
    final = root / cache.entry_name(cfg.aot_args() + toolkit_args(cfg), emit, table_bytes, info,
                                    host_specific)
    if not (final / cache.META_FILE).is_file():
        _build(info, cfg, emit, table_bytes, root, final)
    else:
        cache.touch(final / cache.META_FILE)
    art = Artifacts.in_directory(cfg, emit, final)
    if emit == "so":
        return Kernel(cfg, art.library, art.header, baked, abi=art.load_abi(), artifacts=art)
    if art.runtime is not None:
        return GpuKernel(art, art.load_abi(), baked)
    return art


def _to_numpy_f32(x, what: str) -> np.ndarray:
    if is_torch_tensor(x):
        x = x.detach().cpu().float().numpy()
    arr = np.asarray(x)
    if arr.dtype == np.uint16:
        raise TypeError(f"{what}: pass real values (float32), not raw bfloat16 bits")
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"{what} must be numeric, got dtype {arr.dtype}")
    return arr.astype(np.float32)



def cuda_stub_dir() -> Optional[Path]:
    """The toolkit's directory with the stub ``libcuda.so`` (link-time only), if any."""
    toolkit = cuda_toolkit()
    for sub in ("lib64/stubs", "lib/stubs", "targets/x86_64-linux/lib/stubs"):
        if (toolkit / sub / "libcuda.so").is_file():
            return toolkit / sub
    return None


def build_runtime(source: Path, library: Path) -> None:
    """Build swin-aot's host runtime ``source`` (C, CUDA driver API) into ``library``.

    Needs ``cuda.h`` (:func:`swin_opt.cuda_toolkit.cuda_toolkit`'s ``include``) but no driver: the library is
    linked against the toolkit's stub ``libcuda.so`` (so it records the
    dependency on ``libcuda.so.1``), or, without a stub, leaves the ``cu*``
    symbols undefined for the driver loaded by :func:`swin_opt.gpu_kernel.driver_library`.
    """
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or "clang"
    include = cuda_toolkit() / "include"
    if not (include / "cuda.h").is_file():
        raise CompileError(
            f"cannot build the GPU runtime: no {include / 'cuda.h'} (set CUDA_HOME to the CUDA "
            "toolkit)")
    stubs = cuda_stub_dir()
    link = [f"-L{stubs}", "-lcuda"] if stubs is not None else []
    cmd = [cc, "-O2", "-shared", "-fPIC", str(source), f"-I{include}", "-o", str(library), *link]
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CompileError(
            f"building the GPU runtime {source.name} failed (exit {proc.returncode}): "
            f"{last_line(proc.stderr or proc.stdout)}",
            command=cmd, returncode=proc.returncode, stderr=proc.stderr)


def toolkit_args(cfg: KernelConfig) -> list:
    """``--cuda-toolkit``: the one :func:`swin_opt.cuda_toolkit.cuda_toolkit` finds."""
    return [f"--cuda-toolkit={cuda_toolkit()}"] if cfg.target == "nvptx" else []


def _described_geometry(cfg: KernelConfig) -> dict:
    """What ``swin-aot``'s description of ``cfg``'s kernel must say of its geometry
    (:data:`swin_opt.abi.GEOMETRY_KEYS`; ``padding`` only where the token layout
    asked for one: the tool names its default otherwise, and a windows-layout
    kernel sees the map already padded)."""
    resolution = ()
    if cfg.resolution is not None:
        resolution = tuple(cfg.resolution if cfg.layout == "tokens" else cfg.padded_resolution)
    geometry = {"window": tuple(cfg.window), "heads": cfg.heads, "head_dim": cfg.head_dim,
                "resolution": resolution,
                "shift": tuple(cfg.shift) if cfg.resolution is not None else (),
                "partition": cfg.partition, "class_token": cfg.class_token,
                "cosine": cfg.cosine, "table_rows": cfg.table_rows}
    if cfg.layout == "tokens" and cfg.padding is not None:
        geometry["padding"] = cfg.padding
    return geometry


def _check_abi(art: Artifacts) -> None:
    """The ABI description must exist and describe the configuration that was asked
    for: its entry points and the attention they compute (a tool that ignored an
    option, e.g. an older one, would otherwise hand back another kernel)."""
    cfg = art.config
    try:
        desc = art.load_abi()
    except _abi.AbiError as exc:
        raise CompileError(str(exc)) from None
    want = {"name": cfg.name, "target": cfg.target, "dtype": cfg.dtype, "layout": cfg.layout,
            "packed_qkv": cfg.packed_qkv, "grad": cfg.grad}
    got = {key: getattr(desc, key) for key in want if key != "grad"}
    got["grad"] = desc.backward is not None
    geometry = _described_geometry(cfg)
    want.update({key: value for key, value in geometry.items() if key in desc.geometry})
    got.update({key: desc.geometry[key] for key in geometry if key in desc.geometry})
    if got != want:
        raise CompileError(f"{art.abi} describes {got}, but {want} was built; rebuild swin-aot "
                           "from the same checkout as this Python package")


def _build(info: ToolInfo, cfg: KernelConfig, emit: str, table_bytes: Optional[bytes],
           root: Path, final: Path) -> None:
    """Run swin-aot (and, for GPU binaries, build the host runtime) into a temporary
    directory, check every expected output, then publish it as ``final`` atomically."""
    global _builds
    with cache.staging(root) as tmp:
        art = Artifacts.in_directory(cfg, emit, tmp)
        cmd = [str(info.path), *cfg.aot_args(), *toolkit_args(cfg)]
        if table_bytes is not None:
            table_file = tmp / "table.f32"
            table_file.write_bytes(table_bytes)
            cmd.append(f"--table={table_file}")
        cmd += [f"--emit={emit}", "-o", str(art.main)]
        start = time.perf_counter()
        proc = run_tool(cmd)
        if proc.returncode != 0:
            raise CompileError(
                f"swin-aot rejected {describe(cfg)} (exit {proc.returncode}): "
                f"{last_line(proc.stderr or proc.stdout)}",
                command=cmd, returncode=proc.returncode, stderr=proc.stderr,
            )
        for produced in (art.main, art.header, art.runtime):
            if produced is not None and not produced.is_file():
                raise CompileError(f"swin-aot exited 0 but did not write {produced.name}",
                                   command=cmd, stderr=proc.stderr)
        if art.abi is not None:
            _check_abi(art)
        if art.runtime is not None:
            build_runtime(art.runtime, art.library)
        meta = {"config": dataclasses.asdict(cfg), "emit": emit, "command": cmd,
                "tool_version": info.version,
                "build_seconds": round(time.perf_counter() - start, 3)}
        cache.publish(tmp, final, meta)
    with _builds_lock:
        _builds += 1
    # A build takes seconds: one line for each, also without a terminal (swin_opt.log).
    log.info(f"swin_opt: built {describe(cfg)} (--emit={emit}) in {meta['build_seconds']:.1f} s")
