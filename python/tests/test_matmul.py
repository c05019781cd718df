"""rpe.matmul's kernels against float64 NumPy, for every shape class.

Linear layers written as torch-mlir exports them (swin_opt.linear_mlir) go
through ``swin-opt --rpe-cpu-pipeline`` (rpe-form-matmul, rpe-lower-matmul),
``mlir-translate`` and clang, and their output is compared with the
float64 reference: odd and even M, K and N (N below, at and past a panel;
a single row, a single column), constant weights (packed at compile time)
and run-time ones (packed by the kernel), a transposed weight and a plain
one, the epilogues (bias, GELU, residual) and a dynamic M, on AVX2's
vectors (8 lanes, every x86-64 CPU with FMA) and AVX-512's (16 lanes,
where the host has it). Tolerance: relative 1e-5 of max |reference| (f32
products of K terms, GELU's erf within 4.2e-7).

bf16 layers (bf16 input and weight, an f32 product) run widened to f32 FMAs
and, where the host has AVX512-BF16, on its dot products (``bf16-dot``:
weights packed in pairs of k, at compile time or by the kernel; an odd K's
last k alone). The reference is float64 on the values rounded to bf16: the
products of two bf16 are exact in f32 and the sums f32 in both forms, so the
tolerance is the f32 one.
"""

from __future__ import annotations

import ctypes
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

from swin_opt import linear_mlir
from swin_opt.dense import host_cpu_flags
from swin_opt.export_mlir import _descriptor

pytestmark = pytest.mark.aot

LLVM_BIN = Path("/usr/lib/llvm-22/bin")
AVX512 = "avx512f" in host_cpu_flags()
AVX512_BF16 = "avx512_bf16" in host_cpu_flags()
WIDTHS = [8, 16] if AVX512 else [8]


@pytest.fixture(scope="module")
def swin_opt(aot_path):
    tool = Path(aot_path).with_name("swin-opt")
    if not tool.exists():
        pytest.skip(f"no swin-opt beside {aot_path}")
    return tool


def compile_layer(swin_opt: Path, work: Path, layer: linear_mlir.Linear, weight, bias,
                  width: int, bf16_dot: bool = False):
    text = linear_mlir.linear_module(layer, weight, bias)
    source = work / "layer.mlir"
    source.write_text(text)
    llvm_dialect, ir, library = (work / name for name in ("layer.llvm.mlir", "layer.ll", "layer.so"))
    options = f"vector-width={width}" + (" bf16-dot=true" if bf16_dot else "")
    subprocess.run([str(swin_opt), str(source), f"--rpe-cpu-pipeline={options}",
                    "-o", str(llvm_dialect)], check=True)
    subprocess.run([str(LLVM_BIN / "mlir-translate"), "--mlir-to-llvmir", str(llvm_dialect),
                    "-o", str(ir)], check=True)
    cpu = ["-march=x86-64-v4"] if width == 16 else ["-march=x86-64-v3"]
    cpu += ["-mavx512bf16"] if bf16_dot else []
    subprocess.run([str(LLVM_BIN / "clang"), "-O2", *cpu, "-shared", "-fPIC", "-fopenmp",
                    "-Wno-override-module", str(ir), "-o", str(library), "-lm"], check=True)
    return ctypes.CDLL(str(library))[f"_mlir_ciface_{layer.name}"]


def run_layer(entry, layer: linear_mlir.Linear, x, weight, residual):
    m = x.shape[0]
    out = np.full((m, layer.n), np.nan, np.float32)
    operand = np.uint16 if layer.dtype == "bf16" else np.float32
    arrays = [np.ascontiguousarray(x, operand)]
    arrays += [] if layer.constant_weight else [np.ascontiguousarray(weight, operand)]
    arrays += [residual] if "residual" in layer.steps else []
    # The converted arrays must outlive the call: the descriptors point
    # into them.
    arrays = [a if a.dtype == np.uint16 else np.ascontiguousarray(a, np.float32) for a in arrays]
    descriptors = [_descriptor(a) for a in arrays + [out]]
    entry.restype = None
    entry(*[ctypes.byref(d) for d in descriptors])
    return out


CASES = {
    # name: (M, K, N, steps, constant weight, transposed weight)
    "tile-multiple": (16, 32, 96, ("bias",), True, True),
    "odd-all": (13, 17, 47, ("bias",), True, True),
    "one-row": (1, 96, 288, ("bias",), True, True),
    "one-column": (9, 5, 1, (), True, True),
    "one-reduction": (7, 1, 50, ("bias",), True, True),
    "past-a-panel": (49, 96, 100, ("bias", "gelu"), True, True),
    "gelu": (64, 96, 384, ("bias", "gelu"), True, True),
    "residual": (61, 384, 96, ("bias", "residual"), True, True),
    "plain-weight": (11, 24, 40, ("bias",), True, False),
    "runtime-transposed": (23, 19, 53, ("residual",), False, True),
    "runtime-plain": (8, 64, 48, (), False, False),
    "dynamic-m": (None, 40, 72, ("bias", "gelu"), True, True),
}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_layer_against_float64(swin_opt, tmp_path, case, width):
    m, k, n, steps, constant, transposed = CASES[case]
    layer = linear_mlir.Linear(m, k, n, steps, constant_weight=constant, transposed_weight=transposed)
    rng = np.random.default_rng(zlib.crc32(case.encode()))
    rows = 29 if m is None else m
    x = rng.standard_normal((rows, k), dtype=np.float32)
    weight = rng.standard_normal((n, k) if transposed else (k, n), dtype=np.float32)
    weight /= np.float32(np.sqrt(k))
    bias = rng.standard_normal(n, dtype=np.float32)
    residual = rng.standard_normal((rows, n), dtype=np.float32)
    entry = compile_layer(swin_opt, tmp_path, layer, weight, bias, width)
    got = run_layer(entry, layer, x, weight, residual)
    expected = linear_mlir.reference(layer, x, weight, bias, residual)
    error = np.abs(got - expected).max()
    allowed = 1e-5 * max(1.0, np.abs(expected).max())
    assert error <= allowed, f"max |error| {error:.3g} > {allowed:.3g}"


def test_dynamic_m_runs_any_row_count(swin_opt, tmp_path):
    """One library, row counts around the tile (8 and 4 rows): every row
    is computed once, the last block's single rows included."""
    layer = linear_mlir.Linear(None, 12, 30, ("bias",))
    rng = np.random.default_rng(3)
    weight = rng.standard_normal((30, 12), dtype=np.float32)
    bias = rng.standard_normal(30, dtype=np.float32)
    entry = compile_layer(swin_opt, tmp_path, layer, weight, bias, WIDTHS[-1])
    for rows in (1, 3, 7, 8, 9, 17, 33):
        x = rng.standard_normal((rows, 12), dtype=np.float32)
        got = run_layer(entry, layer, x, weight, None)
        expected = linear_mlir.reference(layer, x, weight, bias)
        assert np.abs(got - expected).max() <= 1e-5 * max(1.0, np.abs(expected).max()), rows


BF16_CASES = {
    # name: (M, K, N, steps, constant weight, transposed weight)
    "odd-all": (13, 17, 47, ("bias",), True, True),
    "one-reduction": (7, 1, 50, (), True, True),
    "even-k-gelu": (49, 96, 100, ("bias", "gelu"), True, True),
    "plain-weight": (11, 24, 40, ("bias",), True, False),
    "runtime-odd": (23, 19, 53, ("residual",), False, True),
    "runtime-plain": (9, 33, 20, (), False, False),
    "dynamic-m": (None, 41, 72, ("bias", "gelu"), True, True),
}

# (vector width, bf16-dot): widened to f32 FMAs, and AVX512-BF16's dot
# products where the host has them.
BF16_MODES = {"widen-8": (8, False), "dot-16": (16, True)}


@pytest.mark.parametrize("mode", sorted(BF16_MODES))
@pytest.mark.parametrize("case", sorted(BF16_CASES))
def test_bf16_layer_against_float64(swin_opt, tmp_path, case, mode):
    width, dot = BF16_MODES[mode]
    if dot and not AVX512_BF16:
        pytest.skip("the host has no avx512_bf16 (vdpbf16ps)")
    m, k, n, steps, constant, transposed = BF16_CASES[case]
    layer = linear_mlir.Linear(m, k, n, steps, constant_weight=constant, transposed_weight=transposed,
                               dtype="bf16")
    rng = np.random.default_rng(zlib.crc32(("bf16" + case).encode()))
    rows = 29 if m is None else m
    x = linear_mlir.to_bf16(rng.standard_normal((rows, k), dtype=np.float32))
    weight = rng.standard_normal((n, k) if transposed else (k, n), dtype=np.float32)
    weight = linear_mlir.to_bf16(weight / np.float32(np.sqrt(k)))
    bias = rng.standard_normal(n, dtype=np.float32)
    residual = rng.standard_normal((rows, n), dtype=np.float32)
    entry = compile_layer(swin_opt, tmp_path, layer, weight, bias, width, bf16_dot=dot)
    # The dot products run where asked, and only there.
    assert ("dpbf16ps" in (tmp_path / "layer.ll").read_text()) == dot
    got = run_layer(entry, layer, x, weight, residual)
    expected = linear_mlir.reference(layer, linear_mlir.from_bf16(x), linear_mlir.from_bf16(weight),
                                     bias, residual)
    error = np.abs(got - expected).max()
    allowed = 1e-5 * max(1.0, np.abs(expected).max())
    assert error <= allowed, f"max |error| {error:.3g} > {allowed:.3g}"


# (vector width, bf16-dot, dtype) of the long-reduction test.
LONG_K_MODES = {"f32-8": (8, False, "f32"), "f32-16": (16, False, "f32"),
                "bf16-dot-16": (16, True, "bf16")}


@pytest.mark.parametrize("mode", sorted(LONG_K_MODES))
def test_long_reduction_sums_in_chunks(swin_opt, tmp_path, mode):
    """K = 4,100 of positive products (the worst case of a chain of f32
    additions): the kernel sums chunks of 256 k (bf16-dot: 128 pairs) and
    adds them, which keeps the error near sqrt(256) + sqrt(16) roundings
    (2.9e-7 of the result in a float64 model of it) where one chain of
    4,100 errs by 3.2e-6; 1e-6 tells them apart. K is past the last whole
    chunk (4 k more, odd under bf16-dot: 2 pairs and a last k alone)."""
    width, dot, dtype = LONG_K_MODES[mode]
    if width == 16 and not AVX512 or dot and not AVX512_BF16:
        pytest.skip("the host lacks the vectors of this mode")
    k = 4101 if dot else 4100
    layer = linear_mlir.Linear(64, k, 48, (), constant_weight=False, dtype=dtype)
    rng = np.random.default_rng(11)
    x = rng.random((64, k), dtype=np.float32)
    weight = rng.random((48, k), dtype=np.float32)
    if dtype == "bf16":
        x, weight = linear_mlir.to_bf16(x), linear_mlir.to_bf16(weight)
    entry = compile_layer(swin_opt, tmp_path, layer, weight, None, width, bf16_dot=dot)
    got = run_layer(entry, layer, x, weight, None)
    values = (lambda a: linear_mlir.from_bf16(a)) if dtype == "bf16" else (lambda a: a)
    expected = values(x).astype(np.float64) @ values(weight).astype(np.float64).T
    error = np.abs(got - expected).max() / np.abs(expected).max()
    assert error <= 1e-6, f"relative error {error:.3g} > 1e-6"
