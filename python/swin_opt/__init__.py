"""swin_opt: drive ``swin-aot`` to build Swin window-attention kernels and call them.

Quick start::

    import numpy as np
    import swin_opt

    kern = swin_opt.compile((7, 7), heads=3, head_dim=32, resolution=(56, 56), shift=3)
    q = k = v = np.random.randn(64, 3, 49, 32).astype(np.float32)
    table = np.random.randn(169, 3).astype(np.float32)
    out = kern(q, k, v, table)          # [64, 49, 96]

The independent NumPy reference lives in :mod:`swin_opt.reference`.
"""

from . import abi, reference
from .compiler import (
    Artifacts,
    CompileError,
    Kernel,
    KernelConfig,
    SwinAotNotFoundError,
    SwinAotVersionError,
    bf16_bits_to_float32,
    clear_cache,
    compile,
    describe,
    find_swin_aot,
    float32_to_bf16_bits,
    get_cache_dir,
    make_config,
    normalize_dtype,
)

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
    "clear_cache",
    "compile",
    "describe",
    "find_swin_aot",
    "float32_to_bf16_bits",
    "get_cache_dir",
    "make_config",
    "normalize_dtype",
    "reference",
    "__version__",
]
