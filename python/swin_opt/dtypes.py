"""Element types of the kernels: their names (``f32``/``f16``/``bf16`` and the
spellings accepted for them), their NumPy storage, and bfloat16 as raw bits.

NumPy has no bfloat16: bfloat16 buffers are ``uint16`` arrays holding the
upper halves of float32 values (:func:`float32_to_bf16_bits`,
:func:`bf16_bits_to_float32`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "DTYPE_ALIASES",
    "DTYPE_NAMES",
    "STORAGE",
    "normalize_dtype",
    "float32_to_bf16_bits",
    "bf16_bits_to_float32",
]

#: Every accepted spelling of an element type -> its code.
DTYPE_ALIASES = {
    "float32": "f32", "f32": "f32", "fp32": "f32", "float": "f32",
    "float16": "f16", "f16": "f16", "fp16": "f16", "half": "f16",
    "bfloat16": "bf16", "bf16": "bf16",
}
#: Code -> the NumPy/PyTorch name.
DTYPE_NAMES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
#: NumPy storage dtype of each element type (bfloat16 is passed as raw bits).
STORAGE = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16), "bf16": np.dtype(np.uint16)}


def float32_to_bf16_bits(x) -> np.ndarray:
    """Round float32 values to bfloat16 (nearest, ties to even); return the raw ``uint16`` bits.

    NaNs stay (quiet) NaNs; values that round past the largest bfloat16 become
    infinities, as IEEE rounding prescribes.
    """
    arr = np.asarray(x, dtype=np.float32)
    bits = np.ascontiguousarray(arr).view(np.uint32).astype(np.uint64)
    lsb = (bits >> np.uint64(16)) & np.uint64(1)
    rounded = (bits + np.uint64(0x7FFF) + lsb) >> np.uint64(16)
    nan = (bits & np.uint64(0x7FFFFFFF)) > np.uint64(0x7F800000)
    quiet = (bits >> np.uint64(16)) | np.uint64(0x0040)
    return np.where(nan, quiet, rounded).astype(np.uint16).reshape(arr.shape)


def bf16_bits_to_float32(bits) -> np.ndarray:
    """Widen raw bfloat16 bits (``uint16``) to float32 (exact)."""
    bits = np.asarray(bits)
    if bits.dtype != np.uint16:
        if bits.dtype.name == "bfloat16":  # e.g. ml_dtypes.bfloat16
            bits = bits.view(np.uint16)
        else:
            raise TypeError(f"expected uint16 bfloat16 bits, got dtype {bits.dtype}")
    wide = np.ascontiguousarray(bits).astype(np.uint32) << np.uint32(16)
    return wide.view(np.float32).reshape(bits.shape)


def normalize_dtype(dtype: Any) -> str:
    """Map ``"float32"``/``np.float16``/``torch.bfloat16``/... to ``"f32"``/``"f16"``/``"bf16"``."""
    if isinstance(dtype, str):
        name = dtype
    elif isinstance(dtype, type) and issubclass(dtype, np.generic) or isinstance(dtype, np.dtype):
        name = np.dtype(dtype).name
    else:
        name = str(dtype)  # torch.float16 -> "torch.float16"
    key = name.strip().lower()
    if key.startswith("torch."):
        key = key[len("torch."):]
    try:
        return DTYPE_ALIASES[key]
    except KeyError:
        raise ValueError(f"unsupported dtype {dtype!r}; expected float32, float16 or bfloat16") from None
