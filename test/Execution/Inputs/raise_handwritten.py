#!/usr/bin/env python3
"""Runs the functions of test/Transforms/raise-window-attention.mlir compiled
by swin-opt and compares each with a float64 NumPy evaluation of the
attention it spells: raised (fused, or unfused with an explicit mask) or
refused (lowered as written), every function must compute the same numbers.

The index and mask constants are read from the MLIR file itself, so the
expectation follows the scrambled index and the non-shift mask as written.
Tolerance: float32, |error| <= 1e-5 + 1e-5 |expected|.

Usage: raise_handwritten.py FILE.mlir --swin-opt swin-opt --translate
mlir-translate --clang clang [--pipeline rpe-cpu-pipeline...]
"""

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

from swin_opt import export_mlir


def functions(text):
    """name -> body of every func.func in the file."""
    starts = [(m.group(1), m.start()) for m in re.finditer(r"func\.func @(\w+)\(", text)]
    bodies = {}
    for i, (name, start) in enumerate(starts):
        end = starts[i + 1][1] if i + 1 < len(starts) else len(text)
        bodies[name] = text[start:end]
    return bodies


def constant(body, name):
    match = re.search(r"%" + name + r" = arith\.constant dense<(.*?)> : tensor<", body)
    return np.array(json.loads(match.group(1)), dtype=np.float64) if match else None


def expected(body, q, k, v, table, scale):
    windows, heads, tokens, _ = q.shape
    scores = np.einsum("bhid,bhjd->bhij", q * scale, k)
    if "tensor.extract %table" in body:
        index = constant(body, "idx").astype(np.int64)
        scores = scores + table[index].transpose(2, 0, 1)[None]
    mask = constant(body, "mask")
    if mask is not None:
        scores = scores + mask[np.arange(windows) % mask.shape[0]][:, None]
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = np.einsum("bhij,bhjd->bhid", p, v.reshape(windows, heads, tokens, -1))
    return out.reshape(windows * heads, tokens, -1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mlir", type=Path)
    parser.add_argument("--swin-opt", required=True)
    parser.add_argument("--translate", required=True)
    parser.add_argument("--clang", required=True)
    parser.add_argument("--pipeline", default="rpe-cpu-pipeline")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    q, k = (rng.standard_normal((2, 2, 4, 2)).astype(np.float32) for _ in range(2))
    v = rng.standard_normal((4, 4, 2)).astype(np.float32)
    table = rng.standard_normal((9, 2)).astype(np.float32)
    text = args.mlir.read_text()
    scale = float(np.float32(float(re.search(r"%scale = arith\.constant ([0-9.e+-]+) : f64", text).group(1))))
    status = 0
    with tempfile.TemporaryDirectory() as tmp:
        library = export_mlir.compile_module(args.mlir, args.swin_opt, Path(tmp), args.pipeline,
                                             args.translate, args.clang)
        for name, body in functions(text).items():
            want = expected(body, q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                            table.astype(np.float64), scale)
            got = export_mlir.run_forward(library, [q, k, v, table], want.shape, func=name)
            error = np.max(np.abs(got - want))
            ok = np.allclose(got, want, atol=1e-5, rtol=1e-5)
            print(f"{'PASS' if ok else 'FAIL'} {name}: max |error| {error:.2e}")
            status |= not ok
    return status


if __name__ == "__main__":
    sys.exit(main())
