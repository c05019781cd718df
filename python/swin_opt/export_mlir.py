"""Export Swin attention modules to MLIR with torch-mlir, as an MLIR user would.

``swin-opt`` must find Swin attention in IR written by an importer, not only
in IR written for it. This script produces such IR: it exports timm's
``WindowAttention`` and ``SwinTransformerBlock`` (small dimensions) with
torch-mlir's FX importer to linalg-on-tensors, saves each module with the
torch inputs and outputs beside it (``<name>.mlir`` and ``<name>.npz``:
``arg0``, ``arg1``, ... and ``result``), and, with ``--check``, compiles the
module with ``swin-opt --rpe-cpu-pipeline`` and compares its ``@forward``
with torch's output.

Usage (torch-mlir installed, e.g. ``pip install torch-mlir==20261001``)::

    python -m swin_opt.export_mlir -o test/Transforms/Inputs/raise
    python -m swin_opt.export_mlir --check --swin-opt build/bin/swin-opt \\
        test/Transforms/Inputs/raise/timm_window_attention.mlir

Two workarounds for torch-mlir ``20261001``, both value-preserving:

* timm's index, mask and coordinate tables are non-persistent buffers, which
  the importer cannot map ("Could not find state mapping for buffer"): they
  are re-registered as persistent buffers before the export.
* ``@forward`` gets ``llvm.emit_c_interface`` so that the compiled module
  has the ``_mlir_ciface_forward`` entry point this script (and the tests)
  call.

torchvision's and transformers' Swin blocks build their shift mask with
slice assignments, which this importer rejects ("Heterogeneous lists are not
supported"); their attention modules are tried by ``--all`` and reported.

Exit status: 1 when ``-o`` cannot import torch, timm or torch-mlir (one
error line, nothing written), when one of timm's modules does not export,
or when a ``--check`` fails.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np

# Tolerance of the compiled module against torch (float32 everywhere; the
# fused kernel's base-2 polynomial exponential is accurate to ~1e-6
# relative, the rest is the same arithmetic in another order).
ATOL = 2e-4
RTOL = 2e-4


def make_buffers_persistent(module) -> None:
    """Re-registers every non-persistent buffer as persistent (same values)."""
    for sub in module.modules():
        for name in list(getattr(sub, "_non_persistent_buffers_set", ())):
            sub._non_persistent_buffers_set.discard(name)


def add_c_interface(text: str, func: str = "forward") -> str:
    """Marks ``@func`` with ``llvm.emit_c_interface``."""
    pattern = re.compile(r"(func\.func @%s\([^\n]*\))( -> [^\n{]*)? \{" % re.escape(func))
    match = pattern.search(text)
    if not match:
        raise ValueError(f"no func.func @{func} in the exported module")
    start, end = match.span()
    head = text[start:end - 2]
    return text[:start] + head + " attributes {llvm.emit_c_interface} {" + text[end:]


def export(module, inputs: Sequence, func: str = "forward") -> str:
    """torch-mlir's FX import of ``module(*inputs)`` to linalg-on-tensors."""
    from torch_mlir import fx  # imported lazily: torch-mlir is optional

    make_buffers_persistent(module)
    imported = fx.export_and_import(module, *inputs, output_type="linalg-on-tensors", func_name=func)
    return add_c_interface(str(imported), func)


def _timm_cases() -> Dict[str, Callable[[], Tuple[object, List]]]:
    import torch
    from timm.models.swin_transformer import SwinTransformerBlock, WindowAttention

    def redraw_tables(module) -> None:
        # timm draws the table with std 0.02: a wrong bias would hide in the
        # tolerance. Unit-variance entries make every gather visible.
        with torch.no_grad():
            for sub in module.modules():
                if hasattr(sub, "relative_position_bias_table"):
                    sub.relative_position_bias_table.normal_(0.0, 1.0)

    def attention(window, windows=2, dim=16, heads=2):
        def build():
            torch.manual_seed(0)
            m = WindowAttention(dim=dim, num_heads=heads, window_size=window).eval()
            redraw_tables(m)
            n = window[0] * window[1]
            return m, [torch.randn(windows, n, dim)]

        return build

    def attention_with_mask():
        # timm's WindowAttention.forward(x, mask): the mask is a run-time
        # operand [nW, N, N], window b reading mask[b % nW].
        torch.manual_seed(0)
        m = WindowAttention(dim=16, num_heads=2, window_size=(4, 4)).eval()
        redraw_tables(m)
        mask = -4.0 * torch.rand(2, 16, 16)
        return m, [torch.randn(4, 16, 16), mask]

    def block(shift, resolution=8):
        def build():
            torch.manual_seed(0)
            m = SwinTransformerBlock(dim=16, input_resolution=(resolution, resolution), num_heads=2,
                                     window_size=4, shift_size=shift).eval()
            redraw_tables(m)
            return m, [torch.randn(1, resolution, resolution, 16)]

        return build

    return {
        "timm_window_attention": attention((4, 4)),
        "timm_window_attention_4x2": attention((4, 2), windows=3),
        "timm_window_attention_mask": attention_with_mask,
        "timm_swin_block_shifted": block(2),
        # Swin-T's stage 4 at batch 1: the map is one window, not shifted.
        "timm_swin_block_single_window": block(0, resolution=4),
    }


def _other_cases() -> Dict[str, Callable[[], Tuple[object, List]]]:
    """Attention modules of torchvision and transformers, tried by --all."""
    import torch

    cases = {}

    def transformers_attention():
        from transformers.models.swin.configuration_swin import SwinConfig
        from transformers.models.swin.modeling_swin import SwinAttention

        torch.manual_seed(0)
        config = SwinConfig(embed_dim=16, num_heads=[2], window_size=4)
        # The eager attention: the decomposed matmul/softmax an exporter sees
        # (sdpa would hide the bias inside one attention op).
        config._attn_implementation = "eager"
        m = SwinAttention(config, hidden_size=16, num_attention_heads=2, window_size=4).eval()
        with torch.no_grad():
            m.relative_position_bias.relative_position_bias_table.normal_(0.0, 1.0)

        class Wrapper(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, x):
                return self.inner(x)[0]

        return Wrapper(m), [torch.randn(2, 16, 16)]

    def torchvision_attention():
        from torchvision.models.swin_transformer import ShiftedWindowAttention

        torch.manual_seed(0)
        m = ShiftedWindowAttention(dim=16, window_size=[4, 4], shift_size=[0, 0], num_heads=2).eval()
        with torch.no_grad():
            m.relative_position_bias_table.normal_(0.0, 1.0)
        return m, [torch.randn(1, 8, 8, 16)]

    cases["transformers_swin_self_attention"] = transformers_attention
    cases["torchvision_shifted_window_attention"] = torchvision_attention
    return cases


def save_case(name: str, build, out_dir: Path) -> Path:
    import torch

    module, inputs = build()
    with torch.no_grad():
        result = module(*inputs)
    text = export(module, inputs)
    path = out_dir / f"{name}.mlir"
    path.write_text(text)
    arrays = {f"arg{i}": t.detach().numpy() for i, t in enumerate(inputs)}
    arrays["result"] = result.detach().numpy()
    np.savez(out_dir / f"{name}.npz", **arrays)
    return path


#===----------------------------------------------------------------------===#
# Compiling and running an exported module
#===----------------------------------------------------------------------===#


class _MemRef(ctypes.Structure):
    """Base of the ranked memref descriptors of MLIR's C interface."""


def _descriptor_type(rank: int):
    fields = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p), ("offset", ctypes.c_int64)]
    if rank:
        fields += [("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
    return type(f"MemRef{rank}D", (_MemRef,), {"_fields_": fields})


def _descriptor(array: np.ndarray):
    desc = _descriptor_type(array.ndim)()
    desc.allocated = desc.aligned = array.ctypes.data
    desc.offset = 0
    for i, (size, stride) in enumerate(zip(array.shape, array.strides)):
        desc.sizes[i] = size
        desc.strides[i] = stride // array.itemsize
    return desc


def compile_module(mlir: Path, swin_opt: str, work_dir: Path, pipeline: str = "rpe-cpu-pipeline",
                   translate: str = "mlir-translate-22", clang: str = "clang-22", opt_level: str = "-O2") -> Path:
    """``swin-opt --<pipeline> | mlir-translate --mlir-to-llvmir | clang <opt_level> -shared``."""
    llvm_dialect = work_dir / (mlir.stem + ".llvm.mlir")
    llvm_ir = work_dir / (mlir.stem + ".ll")
    library = work_dir / (mlir.stem + ".so")
    subprocess.run([swin_opt, str(mlir), f"--{pipeline}", "-o", str(llvm_dialect)], check=True)
    subprocess.run([translate, "--mlir-to-llvmir", str(llvm_dialect), "-o", str(llvm_ir)], check=True)
    subprocess.run([clang, opt_level, "-shared", "-fPIC", "-fopenmp", str(llvm_ir), "-o", str(library), "-lm"],
                   check=True)
    return library


class ForwardLibrary:
    """``_mlir_ciface_<func>(&result, &arg0, ...)`` of a compiled module, callable.

    The result memref is allocated by the module (and leaked: 4 bytes per
    output element a call); it is copied out.
    """

    def __init__(self, library: Path, func: str = "forward"):
        self.func = func
        self._lib = ctypes.CDLL(str(Path(library).resolve()))
        self._entry = getattr(self._lib, f"_mlir_ciface_{func}")
        self._entry.restype = None

    def __call__(self, inputs: Sequence[np.ndarray], result_shape: Tuple[int, ...]) -> np.ndarray:
        inputs = [np.ascontiguousarray(a, dtype=np.float32) for a in inputs]
        descriptors = [_descriptor(a) for a in inputs]
        result = _descriptor_type(len(result_shape))()
        self._entry(ctypes.byref(result), *[ctypes.byref(d) for d in descriptors])
        count = int(np.prod(result_shape))
        strides = [result.strides[i] for i in range(len(result_shape))]
        sizes = tuple(result.sizes[i] for i in range(len(result_shape)))
        if sizes != tuple(result_shape):
            raise RuntimeError(f"@{self.func} returned a {sizes} memref, expected {tuple(result_shape)}")
        base = ctypes.cast(result.aligned, ctypes.POINTER(ctypes.c_float))
        flat = np.ctypeslib.as_array(base, shape=(result.offset + count * max(1, max(strides)),))
        view = np.lib.stride_tricks.as_strided(flat[result.offset:], shape=sizes,
                                               strides=[s * 4 for s in strides])
        return np.array(view)


def run_forward(library: Path, inputs: Sequence[np.ndarray], result_shape: Tuple[int, ...],
                func: str = "forward") -> np.ndarray:
    """Calls ``_mlir_ciface_<func>(&result, &arg0, ...)`` of a compiled module once."""
    return ForwardLibrary(library, func)(inputs, result_shape)


def check(mlir: Path, swin_opt: str, pipeline: str = "rpe-cpu-pipeline", translate: str = "mlir-translate-22",
          clang: str = "clang-22") -> float:
    """Compiles ``mlir`` and compares its @forward with the saved torch output.

    Returns the largest absolute error; raises AssertionError beyond the
    tolerances (ATOL, RTOL).
    """
    saved = np.load(mlir.with_suffix(".npz"))
    inputs = [saved[f"arg{i}"] for i in range(len(saved.files) - 1)]
    want = saved["result"]
    with tempfile.TemporaryDirectory() as tmp:
        library = compile_module(mlir, swin_opt, Path(tmp), pipeline, translate, clang)
        got = run_forward(library, inputs, want.shape)
    np.testing.assert_allclose(got, want, atol=ATOL, rtol=RTOL)
    return float(np.max(np.abs(got - want)))


def _missing_exporter() -> str:
    """What the export needs and cannot import (torch, timm, torch-mlir), as the
    end of an error message; empty when everything imports."""
    for module, package in (("torch", "torch"), ("timm", "timm"),
                            ("torch_mlir.fx", "torch-mlir==20261001")):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            return (f"needs {package.split('==')[0]} to export, and it cannot be imported "
                    f"({exc}); install it (pip install {package})")
    return ""


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m swin_opt.export_mlir",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", type=Path, help="with --check: exported modules to check")
    parser.add_argument("-o", "--output", type=Path, help="directory to export the cases into")
    parser.add_argument("--all", action="store_true",
                        help="also try torchvision's and transformers' attention modules")
    parser.add_argument("--check", action="store_true", help="compile and compare with torch")
    parser.add_argument("--swin-opt", default=os.environ.get("SWIN_OPT", "swin-opt"))
    parser.add_argument("--pipeline", default="rpe-cpu-pipeline",
                        help="swin-opt pipeline with its options, e.g. rpe-cpu-pipeline=fuse=false")
    parser.add_argument("--translate", default="mlir-translate-22", help="MLIR 22's mlir-translate")
    parser.add_argument("--clang", default="clang-22", help="a clang that reads LLVM 22 IR")
    args = parser.parse_args(argv)

    status = 0
    if args.output:
        missing = _missing_exporter()
        if missing:
            print(f"{parser.prog}: error: -o {missing}", file=sys.stderr)
            return 1
        args.output.mkdir(parents=True, exist_ok=True)
        required = dict(_timm_cases())
        cases = dict(required)
        if args.all:
            cases.update(_other_cases())
        for name, build in cases.items():
            try:
                path = save_case(name, build, args.output)
                print(f"exported {path}")
                args.modules.append(path)
            except Exception as error:  # the importer's refusals are reported
                first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                print(f"not exported {name}: {type(error).__name__}: {first}")
                if name in required:  # timm's modules must export; --all's may not
                    status = 1
    if args.check:
        for path in args.modules:
            try:
                error = check(path, args.swin_opt, args.pipeline, args.translate, args.clang)
                print(f"PASS {path.name}: max |error| {error:.2e}")
            except (AssertionError, subprocess.CalledProcessError, RuntimeError) as failure:
                print(f"FAIL {path.name}: {failure}")
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
