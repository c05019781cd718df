#!/usr/bin/env python3
"""Runs the functions of test/Transforms/raise-window-attention.mlir that have
a C interface, compiled by swin-opt, and compares each with a float64 NumPy
evaluation of the attention it spells: raised (fused, or unfused with an
explicit mask) or refused (lowered as written), every function must compute
the same numbers.

What each function spells is read from its text, so the expectation follows
the constants as written (the scrambled index, the non-shift mask):

* arguments: random, of the shapes of the signature (%q, %k, %v, %table or
  %t, and %bias when the bias is an argument);
* the scale: the %scale constant (f64, truncated to f32 as the body does, or
  f32);
* k: given as `[B, H, N, d]`, or transposed by the permutation of the
  `linalg.transpose ins(%k ...)` that makes kᵀ;
* the bias: gathered through the %idx constant, an rpe.lookup of its window,
  or the %bias argument; read transposed where the add reads it at
  `(d0, d1, d3, d2)`;
* the mask: the %mask constant, or an rpe.shift_mask, window b reading
  `mask[b mod nW]`;
* v and the result: head-merged `[B*H, N, d]` or `[B, H, N, d]`.

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
from swin_opt import reference as ref


def functions(text):
    """name -> text of every func.func with a C interface in the file."""
    starts = [(m.group(1), m.start()) for m in re.finditer(r"func\.func @(\w+)\(", text)]
    bodies = {}
    for i, (name, start) in enumerate(starts):
        end = starts[i + 1][1] if i + 1 < len(starts) else len(text)
        body = text[start:end]
        if "llvm.emit_c_interface" in body.splitlines()[0]:
            bodies[name] = body
    return bodies


def shape(type_text):
    return tuple(int(x) for x in type_text.split("x")[:-1])


def signature(body):
    """[(argument name, shape)] and the result shape."""
    header = body.splitlines()[0]
    args = [(name, shape(t)) for name, t in re.findall(r"%(\w+): tensor<([0-9x]+x?f32)>", header)]
    result = shape(re.search(r"\) -> tensor<([0-9x]+xf32)>", header).group(1))
    return args, result


def constant(body, name):
    match = re.search(r"%" + name + r" = arith\.constant dense<(.*?)> : tensor<", body)
    return np.array(json.loads(match.group(1)), dtype=np.float64) if match else None


def ints(text):
    return [int(x) for x in text.split(",")]


def expected(body, arrays, result_shape):
    q = arrays["q"]
    windows, heads, tokens, _ = q.shape
    scale = re.search(r"%scale = arith\.constant ([0-9.e+-]+) : f(64|32)", body).group(1)
    scale = float(np.float32(float(scale)))

    transpose = re.search(r"linalg\.transpose ins\(%k : .*? permutation = \[([0-9, ]+)\]", body)
    key_t = (arrays["k"].transpose(ints(transpose.group(1))) if transpose
             else np.swapaxes(arrays["k"], -1, -2))
    scores = np.einsum("bhid,bhdj->bhij", q * scale, key_t)

    table = arrays.get("table", arrays.get("t"))
    lookup = re.search(r"rpe\.lookup %\w+ \{window = array<i64: ([0-9, ]+)>\}", body)
    if "tensor.extract %table" in body:
        bias = table[constant(body, "idx").astype(np.int64)].transpose(2, 0, 1)
    elif lookup:
        bias = ref.lookup(table, ints(lookup.group(1)))
    else:
        bias = arrays.get("bias")
    if bias is not None:
        if "-> (d0, d1, d3, d2)>" in body:
            bias = np.swapaxes(bias, -1, -2)
        scores = scores + bias[None]

    mask = constant(body, "mask")
    shift = re.search(r"rpe\.shift_mask \{resolution = array<i64: ([0-9, ]+)>, "
                      r"window = array<i64: ([0-9, ]+)>, shift = array<i64: ([0-9, ]+)>\}", body)
    if shift:
        mask = ref.shift_mask(*(ints(shift.group(i)) for i in (1, 2, 3)))
    if mask is not None:
        scores = scores + mask[np.arange(windows) % mask.shape[0]][:, None]

    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = np.einsum("bhij,bhjd->bhid", p, arrays["v"].reshape(windows, heads, tokens, -1))
    return out.reshape(result_shape)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mlir", type=Path)
    parser.add_argument("--swin-opt", required=True)
    parser.add_argument("--translate", required=True)
    parser.add_argument("--clang", required=True)
    parser.add_argument("--pipeline", default="rpe-cpu-pipeline")
    args = parser.parse_args()

    text = args.mlir.read_text()
    status = 0
    with tempfile.TemporaryDirectory() as tmp:
        library = export_mlir.compile_module(args.mlir, args.swin_opt, Path(tmp), args.pipeline,
                                             args.translate, args.clang)
        for name, body in functions(text).items():
            rng = np.random.default_rng(0)
            arg_shapes, result_shape = signature(body)
            inputs = [rng.standard_normal(s).astype(np.float32) for _, s in arg_shapes]
            arrays = {n: a.astype(np.float64) for (n, _), a in zip(arg_shapes, inputs)}
            want = expected(body, arrays, result_shape)
            got = export_mlir.run_forward(library, inputs, want.shape, func=name)
            error = np.max(np.abs(got - want))
            ok = np.allclose(got, want, atol=1e-5, rtol=1e-5)
            print(f"{'PASS' if ok else 'FAIL'} {name}: max |error| {error:.2e}")
            status |= not ok
    return status


if __name__ == "__main__":
    sys.exit(main())
