"""Kernel configurations: :class:`KernelConfig`, built and checked by
:func:`make_config`, turned into ``swin-aot`` flags (:meth:`KernelConfig.aot_args`)
and described in one line (:func:`describe`).

Only structural checks happen here (types, ranks, positivity, names,
divisibility of the resolution); semantic limits such as ``shift < window``
are ``swin-aot``'s, whose error is raised as :class:`swin_opt.CompileError`.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from . import geometry
from .dtypes import DTYPE_NAMES, STORAGE, normalize_dtype

__all__ = ["KernelConfig", "make_config", "describe", "EMITS", "DEFAULT_EMIT", "DEFAULT_NAME"]

DEFAULT_NAME = "swin_window_attention"
#: Output extension of each --emit, per target (swin-aot refuses other pairs).
EMITS = {
    "cpu": {"so": ".so", "obj": ".o", "llvm": ".ll", "mlir": ".mlir"},
    "nvptx": {"ptx": ".ptx", "cubin": ".cubin", "fatbin": ".fatbin", "mlir": ".mlir"},
}
DEFAULT_EMIT = {"cpu": "so", "nvptx": "ptx"}
DEFAULT_CHIP = "sm_90"
#: swin-aot --f32-mma: how the warp kernel takes float32 operands.
F32_MMA = ("none", "bf16x3", "bf16x6")
_CLI_PADDING = {"pad_then_shift": "pad-then-shift", "shift_then_pad": "shift-then-pad"}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what} must be an int, got {value!r}")
    if value < 1:
        raise ValueError(f"{what} must be positive, got {value}")
    return int(value)


def _csv(values: Sequence[int]) -> str:
    return ",".join(str(v) for v in values)


@dataclasses.dataclass(frozen=True)
class KernelConfig:
    """A normalised kernel configuration (everything but a baked table)."""

    window: Tuple[int, ...]
    heads: int
    head_dim: int
    scale: Optional[float] = None
    resolution: Optional[Tuple[int, ...]] = None
    shift: Optional[Tuple[int, ...]] = None
    padding: Optional[str] = None
    layout: str = "windows"
    dtype: str = "f32"
    target: str = "cpu"
    name: str = DEFAULT_NAME
    cpu: Optional[str] = None
    parallel: bool = True
    #: Token layout: q, k, v as one ``[batch, L, 3, heads, head_dim]`` qkv map.
    packed_qkv: bool = False
    #: ``swin-aot --kernel``: None (the target's default), ``"tiles"``, or the
    #: GPU's ``"warps"``/``"rows"`` (on the CPU: emulated, to test them).
    kernel: Optional[str] = None
    #: ``swin-aot --chip`` (``target="nvptx"`` only).
    chip: Optional[str] = None
    #: ``swin-aot --grad``: also the gradient's entry point (:meth:`Kernel.backward`,
    #: :meth:`swin_opt.cuda.GpuKernel.backward`).
    grad: bool = False
    #: ``swin-aot --cosine``: SwinV2's scaled cosine attention; the kernel
    #: takes the raw per-head ``logit_scale`` after the table.
    cosine: bool = False
    #: ``swin-aot --class-token``: BEiT's global attention over the ``window``
    #: grid plus a class token first; the table has three more rows.
    class_token: bool = False
    #: ``swin-aot --partition`` (token layout): ``"block"``, Swin's windows, or
    #: ``"grid"``, MaxViT's grid attention, whose ``window``-sized windows take
    #: tokens strided across the map.
    partition: str = "block"
    #: ``swin-aot --warps-per-block`` (the GPU's warp kernel): (window, head)
    #: items per block, in dynamic shared memory where they need more than
    #: 48 KiB; 0: the kernel's choice (the row kernel for a window whose one
    #: warp needs more).
    warps_per_block: int = 0
    #: ``swin-aot --f32-mma`` (the GPU's warp kernel on float32): ``"none"``
    #: (f32 takes the row kernel), ``"bf16x3"`` (q, k, v and the
    #: probabilities as two bf16 terms, three tensor-core products: 2^-16 of
    #: each product, finer than TF32) or ``"bf16x6"`` (three terms, six
    #: products: f32's precision).
    f32_mma: str = "none"

    @property
    def tokens_per_window(self) -> int:
        """``N``: tokens in one window (with a class token, the grid's and it)."""
        return math.prod(self.window) + int(self.class_token)

    @property
    def table_rows(self) -> int:
        """Rows of the bias table, ``prod(2W - 1)`` (``+ 3`` with a class token)."""
        return math.prod(2 * w - 1 for w in self.window) + 3 * int(self.class_token)

    @property
    def channels(self) -> int:
        """``heads * head_dim``."""
        return self.heads * self.head_dim

    @property
    def effective_scale(self) -> float:
        """The q scale the kernel applies (``head_dim ** -0.5`` unless given; 1 for cosine)."""
        if self.scale is not None:
            return self.scale
        return 1.0 if self.cosine else self.head_dim ** -0.5

    @property
    def padded_resolution(self) -> Optional[Tuple[int, ...]]:
        """Resolution rounded up to whole windows (``None`` without a resolution)."""
        if self.resolution is None:
            return None
        return geometry.padded_resolution(self.resolution, self.window)

    @property
    def windows_per_image(self) -> Optional[int]:
        """``nW`` of the (padded) resolution, or ``None`` without a resolution."""
        if self.resolution is None:
            return None
        return geometry.windows_per_image(self.resolution, self.window)

    @property
    def storage_dtype(self) -> np.dtype:
        """NumPy dtype of q/k/v/table/out buffers (``uint16`` bits for bfloat16)."""
        return STORAGE[self.dtype]

    def aot_args(self) -> list:
        """``swin-aot`` flags for this configuration (without table, emit and output)."""
        args = [
            f"--window={_csv(self.window)}",
            f"--heads={self.heads}",
            f"--head-dim={self.head_dim}",
        ]
        if self.scale is not None:
            args.append(f"--scale={self.scale!r}")
        if self.resolution is not None:
            # For window layout with padding the kernel sees the padded map.
            res = self.resolution if self.layout == "tokens" else self.padded_resolution
            args.append(f"--resolution={_csv(res)}")
            args.append(f"--shift={_csv(self.shift)}")
        if self.layout != "windows":
            args.append(f"--layout={self.layout}")
            if self.padding is not None:
                args.append(f"--padding={_CLI_PADDING[self.padding]}")
            if self.packed_qkv:
                args.append("--packed-qkv")
            if self.partition != "block":
                args.append(f"--partition={self.partition}")
        if self.cosine:
            args.append("--cosine")
        if self.class_token:
            args.append("--class-token")
        args += [f"--dtype={self.dtype}", f"--target={self.target}"]
        if self.name != DEFAULT_NAME:
            args.append(f"--name={self.name}")
        if self.cpu is not None:
            args.append(f"--cpu={self.cpu}")
        if not self.parallel:
            args.append("--no-parallel")
        if self.kernel is not None:
            args.append(f"--kernel={self.kernel}")
        if self.chip is not None:
            args.append(f"--chip={self.chip}")
        if self.warps_per_block:
            args.append(f"--warps-per-block={self.warps_per_block}")
        if self.f32_mma != "none":
            args.append(f"--f32-mma={self.f32_mma}")
        if self.grad:
            args.append("--grad")
        return args


def make_config(window, heads: int, head_dim: int, *, scale: Optional[float] = None,
                resolution=None, shift=None, padding: Optional[str] = None,
                layout: str = "windows", dtype: Any = "float32", target: str = "cpu",
                name: Optional[str] = None, cpu: Optional[str] = None,
                parallel: bool = True, packed_qkv: bool = False,
                kernel: Optional[str] = None, chip: Optional[str] = None,
                cosine: bool = False, grad: bool = False,
                class_token: bool = False, partition: Optional[str] = None,
                warps_per_block: int = 0, f32_mma: str = "none") -> KernelConfig:
    """Validate and normalise a configuration (the arguments of
    :func:`swin_opt.compile` but the table; see the module docstring for what is
    checked here)."""
    try:
        win = geometry.normalize_window(window)
    except TypeError as exc:
        raise TypeError(str(exc)) from None
    if len(win) not in (2, 3):
        raise ValueError(f"window must have 2 or 3 axes, got {win}")
    heads = _positive_int(heads, "heads")
    head_dim = _positive_int(head_dim, "head_dim")
    if scale is not None:
        if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
            raise TypeError(f"scale must be a real number, got {scale!r}")
        scale = float(scale)
        if not math.isfinite(scale):
            raise ValueError(f"scale must be finite, got {scale}")
    if layout not in ("windows", "tokens"):
        raise ValueError(f"layout must be 'windows' or 'tokens', got {layout!r}")
    pad = geometry.normalize_padding(padding)
    if resolution is None:
        if shift is not None and any(geometry.normalize_shift(shift, len(win))):
            raise ValueError("shift requires resolution (the mask depends on the feature-map size)")
        if pad is not None:
            raise ValueError("padding requires resolution")
        if layout == "tokens":
            raise ValueError("layout='tokens' requires resolution")
        res = sft = None
    else:
        if isinstance(resolution, numbers.Integral):
            resolution = (resolution,) * len(win)
        res = tuple(_positive_int(r, "resolution entry") for r in resolution)
        if len(res) != len(win):
            raise ValueError(f"resolution {res} must have as many axes as window {win}")
        sft = geometry.normalize_shift(shift, len(win))
        # Swin's rule (and swin-aot's): along an axis where the map is not
        # larger than the window, the window shrinks to the map and the
        # shift is 0. The table is then the effective window's.
        win = tuple(min(w, r) for w, r in zip(win, res))
        sft = tuple(0 if r <= w else s for s, w, r in zip(sft, win, res))
        if pad is None and any(r % w for r, w in zip(res, win)):
            raise ValueError(
                f"resolution {res} is not divisible by window {win}; pass padding="
                "'pad_then_shift' (HF/torchvision) or 'shift_then_pad' (timm)"
            )
    if cpu is not None and (not isinstance(cpu, str) or not cpu or "=" in cpu):
        raise ValueError(f"cpu must be a CPU name such as 'native' or 'x86-64-v3', got {cpu!r}")
    if target not in EMITS:
        raise ValueError(f"target must be one of {sorted(EMITS)}, got {target!r}")
    if target == "nvptx":
        if chip is None:
            chip = DEFAULT_CHIP
        if not isinstance(chip, str) or not re.fullmatch(r"sm_\d+[a-z]?", chip):
            raise ValueError(f"chip must be an NVIDIA architecture such as 'sm_90', got {chip!r}")
        if cpu is not None:
            raise ValueError("cpu applies to target='cpu' only")
    elif chip is not None:
        raise ValueError("chip applies to target='nvptx' only")
    if name is None:
        name = DEFAULT_NAME
    if not isinstance(name, str) or not _IDENT.match(name):
        raise ValueError(f"name must be a C identifier, got {name!r}")
    if packed_qkv and layout != "tokens":
        raise ValueError("packed_qkv requires layout='tokens'")
    partition = geometry.normalize_partition(partition, res, win, sft)
    if partition != "block" and layout != "tokens":
        raise ValueError(f"partition={partition!r} requires layout='tokens' (the kernel "
                         "reads the windows from the feature map)")
    if kernel is not None and kernel not in ("tiles", "warps", "rows"):
        raise ValueError(f"kernel must be 'tiles', 'warps' or 'rows', got {kernel!r}")
    dtype = normalize_dtype(dtype)
    if grad and cosine:
        raise ValueError("grad=True: the cosine attention has no backward kernel yet")
    if class_token:
        if resolution is not None or layout != "windows":
            raise ValueError("class_token=True is global attention over the window grid: "
                             "layout='windows', no resolution or shift")
        if cosine:
            raise ValueError("class_token=True has no cosine form")
    # The kernel swin-aot builds: the one asked for, else its target's default.
    effective_kernel = kernel or ("warps" if target == "nvptx" else "tiles")
    if warps_per_block:
        if not 1 <= int(warps_per_block) <= 32:
            raise ValueError(f"warps_per_block must be 1 to 32 (0: the kernel's choice), "
                             f"got {warps_per_block!r}")
        if effective_kernel != "warps":
            raise ValueError("warps_per_block sizes the blocks of the GPU's warp kernel: it "
                             "takes kernel='warps' (target='nvptx''s default; on the CPU, "
                             "the warps emulated)")
    if f32_mma not in F32_MMA:
        raise ValueError(f"f32_mma must be one of {', '.join(F32_MMA)}, got {f32_mma!r}")
    if f32_mma != "none" and (dtype != "f32" or effective_kernel != "warps"):
        raise ValueError("f32_mma puts float32 operands on the warp kernel's tensor cores: it "
                         "takes dtype float32 and kernel='warps' (target='nvptx''s default; on "
                         "the CPU, the warps emulated)")
    if grad and target == "cpu" and dtype != "f32" and kernel != "warps":
        raise ValueError("grad=True on the CPU needs float32, or kernel='warps' (the GPU's "
                         "backward, emulated), which takes float16 and bfloat16 too")
    return KernelConfig(window=win, heads=heads, head_dim=head_dim, scale=scale, resolution=res,
                        shift=sft, padding=pad, layout=layout, dtype=dtype,
                        target=target, name=name, cpu=cpu, parallel=bool(parallel),
                        packed_qkv=bool(packed_qkv), kernel=kernel, chip=chip,
                        cosine=bool(cosine), grad=bool(grad),
                        class_token=bool(class_token), partition=partition,
                        warps_per_block=int(warps_per_block), f32_mma=f32_mma)


def describe(cfg: KernelConfig) -> str:
    """Short human-readable description of a configuration: every field that
    changes what is built but the table (two cache entries of different
    configurations are described differently)."""
    parts = [f"window={'x'.join(map(str, cfg.window))}", f"heads={cfg.heads}",
             f"head_dim={cfg.head_dim}", f"dtype={DTYPE_NAMES[cfg.dtype]}"]
    if cfg.resolution is not None:
        parts += [f"resolution={'x'.join(map(str, cfg.resolution))}",
                  f"shift={_csv(cfg.shift)}"]
    if cfg.padding:
        parts.append(f"padding={cfg.padding}")
    if cfg.layout != "windows":
        parts.append(f"layout={cfg.layout}")
    if cfg.packed_qkv:
        parts.append("packed_qkv")
    if cfg.partition != "block":
        parts.append(f"partition={cfg.partition}")
    if cfg.cosine:
        parts.append("cosine")
    if cfg.class_token:
        parts.append("class_token")
    if cfg.scale is not None:
        parts.append(f"scale={cfg.scale!r}")
    if cfg.target != "cpu":
        parts.append(f"target={cfg.target}:{cfg.chip}")
    if cfg.cpu is not None:
        parts.append(f"cpu={cfg.cpu}")
    if cfg.kernel is not None:
        parts.append(f"kernel={cfg.kernel}")
    if cfg.warps_per_block:
        parts.append(f"warps_per_block={cfg.warps_per_block}")
    if cfg.f32_mma != "none":
        parts.append(f"f32_mma={cfg.f32_mma}")
    if not cfg.parallel:
        parts.append("no-parallel")
    if cfg.grad:
        parts.append("grad")  # also the gradient's entry point (a different library)
    if cfg.name != DEFAULT_NAME:
        parts.append(f"name={cfg.name}")
    return " ".join(parts)
