"""swin_opt: drive ``swin-aot`` to build Swin window-attention kernels and call them.

Quick start::

    import numpy as np
    import swin_opt

    kern = swin_opt.compile((7, 7), heads=3, head_dim=32, resolution=(56, 56), shift=3)
    q = k = v = np.random.randn(64, 3, 49, 32).astype(np.float32)
    table = np.random.randn(169, 3).astype(np.float32)
    out = kern(q, k, v, table)          # [64, 49, 96]

The independent NumPy reference lives in :mod:`swin_opt.reference`.

Modules, each importing only those listed before it (checked by
``python/tests/test_layout.py``): :mod:`.errors`, :mod:`.dtypes` (element
types, bfloat16 bits), :mod:`.geometry` (window/shift/resolution arguments),
:mod:`.abi` (the C ABI description), :mod:`.reference` (the NumPy oracle),
:mod:`.config` (:class:`KernelConfig`), :mod:`.log` (what the package tells
its user), :mod:`.tools` (finding and checking ``swin-aot``), :mod:`.cache`
(the on-disk cache), :mod:`.kernel` (the CPU :class:`Kernel`),
:mod:`.gpu_kernel` (the GPU kernel), :mod:`.build` (:func:`compile`),
:mod:`.cuda` (GPU driver, torch tensors on the GPU), :mod:`.testing`,
:mod:`.linear_mlir` (linear layers, Swin MLPs and projections as MLIR modules),
:mod:`.dense` (compiled dense layers: MLPs, projections); the command lines (``python -m
swin_opt``, :mod:`.export_mlir`) and :mod:`.torch` (PyTorch integration) on
top.
"""

from . import abi, reference
from .build import compile
from .cache import Artifacts, cache_entries, clear_cache, get_cache_dir, prune_cache
from .config import KernelConfig, describe, make_config
from .dtypes import bf16_bits_to_float32, float32_to_bf16_bits, normalize_dtype
from .errors import CompileError, SwinAotNotFoundError, SwinAotVersionError
from .kernel import Kernel
from .tools import find_swin_aot

__version__ = "0.1.0"

__all__ = [
    "Artifacts",
    "CompileError",
    "Kernel",
    "KernelConfig",
    "SwinAotNotFoundError",
    "SwinAotVersionError",
    "abi",
    "bf16_bits_to_float32",
    "cache_entries",
    "clear_cache",
    "compile",
    "describe",
    "find_swin_aot",
    "float32_to_bf16_bits",
    "get_cache_dir",
    "make_config",
    "normalize_dtype",
    "prune_cache",
    "reference",
    "__version__",
]
