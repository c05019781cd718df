"""Window geometry arguments: normalising windows, shifts, resolutions, padding
conventions and partitions, and the counts that follow from them (tokens per window, table rows,
the resolution rounded up to whole windows, windows per image).

Both the kernel configuration (:mod:`swin_opt.config`) and the NumPy
reference (:mod:`swin_opt.reference`) import this module; nothing here
imports either of them.

Why one home and not a copy in the reference: the reference must be an
independent check of the *kernels* -- of the relative index, bias gather,
shift masks, cyclic shifts, padding and window partition that ``swin-aot``
compiles (in C++) into them. Every formula that produces an attention value
therefore lives in :mod:`swin_opt.reference` alone and shares no code with
the compiler. What lives here produces no attention value: it turns the
spellings a caller may use (``7`` for ``(7, 7)``, ``"timm"`` for
``"shift_then_pad"``) into tuples and names, and rounds a resolution up to
whole windows. Two copies of that would only be two ways to disagree on what
an argument means; its results are checked against hand-written values by
``python/tests/test_reference.py`` and ``test_helpers.py``.
"""

from __future__ import annotations

import math
import numbers
from typing import Optional, Sequence, Tuple, Union

__all__ = [
    "PADDING_CONVENTIONS",
    "PADDING_ALIASES",
    "Shape",
    "IntOrSeq",
    "int_tuple",
    "normalize_window",
    "normalize_shift",
    "normalize_resolution",
    "normalize_padding",
    "PARTITIONS",
    "normalize_partition",
    "window_tokens",
    "table_rows",
    "padded_resolution",
    "windows_per_image",
]

Shape = Tuple[int, ...]
IntOrSeq = Union[int, Sequence[int]]

#: Canonical padding convention names, see :func:`normalize_padding`.
PADDING_CONVENTIONS = ("pad_then_shift", "shift_then_pad")

#: Every accepted spelling of a padding convention (dashes are accepted too).
PADDING_ALIASES = {
    "pad_then_shift": "pad_then_shift",
    "hf": "pad_then_shift",
    "huggingface": "pad_then_shift",
    "transformers": "pad_then_shift",
    "torchvision": "pad_then_shift",
    "video_swin": "pad_then_shift",
    "shift_then_pad": "shift_then_pad",
    "timm": "shift_then_pad",
}


def int_tuple(value: IntOrSeq, what: str) -> Shape:
    """``value`` as a tuple of ints (an int is a 1-tuple); TypeError for non-integers."""
    if isinstance(value, numbers.Integral):
        return (int(value),)
    try:
        out = tuple(int(v) for v in value)
    except TypeError:
        raise TypeError(f"{what} must be an int or a sequence of ints, got {value!r}") from None
    for v_in, v in zip(value, out):
        if v != v_in:
            raise TypeError(f"{what} must contain integers, got {value!r}")
    return out


def normalize_window(window: IntOrSeq) -> Shape:
    """Return the window as a tuple of positive ints; an int means a square 2-D window."""
    if isinstance(window, numbers.Integral):
        window = (window, window)
    w = int_tuple(window, "window")
    if not w or any(x < 1 for x in w):
        raise ValueError(f"window must be non-empty with positive extents, got {window!r}")
    return w


def normalize_shift(shift: Optional[IntOrSeq], rank: int) -> Shape:
    """Return the shift as a ``rank``-tuple; an int (or ``None`` = 0) applies to every axis."""
    if shift is None:
        shift = 0
    if isinstance(shift, numbers.Integral):
        s = (int(shift),) * rank
    else:
        s = int_tuple(shift, "shift")
    if len(s) != rank:
        raise ValueError(f"shift {shift!r} must have {rank} entries (one per window axis)")
    if any(x < 0 for x in s):
        raise ValueError(f"shift must be non-negative, got {shift!r}")
    return s


def normalize_resolution(resolution: IntOrSeq, window: Shape) -> Shape:
    """``resolution`` as a tuple with as many axes as the (normalised) ``window``."""
    r = int_tuple(resolution, "resolution")
    if len(r) != len(window):
        raise ValueError(
            f"resolution {r} and window {window} must have the same number of axes"
        )
    return r


def normalize_padding(padding: Optional[str]) -> Optional[str]:
    """Map a padding convention name (or alias) to ``"pad_then_shift"``/``"shift_then_pad"``.

    ``pad_then_shift`` is what HuggingFace transformers, torchvision and Video
    Swin do (pad bottom/right, roll the padded map, build the mask at the padded
    size, crop after the reverse roll).  ``shift_then_pad`` is timm (roll at the
    unpadded size, pad, mask at the rounded-up size, crop, roll back).  Aliases:
    ``hf``, ``huggingface``, ``transformers``, ``torchvision``, ``video_swin``,
    ``timm``; dashes are accepted in place of underscores.
    """
    if padding is None:
        return None
    if not isinstance(padding, str):
        raise TypeError(f"padding must be a string or None, got {padding!r}")
    key = padding.strip().lower().replace("-", "_")
    try:
        return PADDING_ALIASES[key]
    except KeyError:
        raise ValueError(
            f"unknown padding convention {padding!r}; expected one of "
            f"{sorted(PADDING_ALIASES)}"
        ) from None


#: Which tokens of a feature map form a window, see :func:`normalize_partition`.
PARTITIONS = ("block", "grid")


def normalize_partition(partition: Optional[str], resolution: Optional[Shape] = None,
                        window: Optional[Shape] = None,
                        shift: Optional[Shape] = None) -> str:
    """Check a partition name, ``"block"`` (``None``) or ``"grid"``.

    ``block`` is Swin's (and MaxViT's block attention): windows of contiguous
    tokens. ``grid`` is MaxViT's grid attention (timm's ``grid_partition``):
    window ``(wy, wx)`` of a ``(Gh, Gw)`` grid holds the tokens at
    ``(ty * H / Gh + wy, tx * W / Gw + wx)``; it is never shifted or padded,
    which is checked against the normalised ``resolution``, ``window`` and
    ``shift`` when they are given.
    """
    if partition is None:
        return "block"
    if partition not in PARTITIONS:
        raise ValueError(f"partition must be one of {PARTITIONS}, got {partition!r}")
    if partition == "grid" and resolution is not None:
        if shift is not None and any(shift):
            raise ValueError(f"partition='grid' has no shift, got {shift}")
        if any(r % w for r, w in zip(resolution, window)):
            raise ValueError(f"partition='grid' needs whole grids: resolution {resolution} "
                             f"is not divisible by the grid {window}")
    return partition


def window_tokens(window: IntOrSeq) -> int:
    """Number of tokens ``N`` in one window."""
    return math.prod(normalize_window(window))


def table_rows(window: IntOrSeq) -> int:
    """Rows of the relative position bias table: ``prod(2 * W - 1)``."""
    return math.prod(2 * w - 1 for w in normalize_window(window))


def padded_resolution(resolution: IntOrSeq, window: IntOrSeq) -> Shape:
    """Resolution rounded up to a multiple of the window on every axis."""
    w = normalize_window(window)
    r = normalize_resolution(resolution, w)
    return tuple(-(-n // ww) * ww for n, ww in zip(r, w))


def windows_per_image(resolution: IntOrSeq, window: IntOrSeq) -> int:
    """``nW``: windows per image (of the padded resolution if it is not divisible)."""
    w = normalize_window(window)
    return math.prod(p // ww for p, ww in zip(padded_resolution(resolution, w), w))
