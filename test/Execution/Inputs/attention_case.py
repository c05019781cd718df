#!/usr/bin/env python3
"""Execution tests of rpe window attention through mlir-runner.

`emit` writes an MLIR module whose `main` builds inputs (dense constants
from a seeded generator), runs rpe.lookup / rpe.shift_mask /
rpe.window_attention and prints the result with printMemrefF32.
`check` regenerates the same inputs, computes the expected output with the
independent NumPy reference of python/swin_opt (float64, from the formulas)
and compares it with the numbers mlir-runner printed.

Tolerance: f32 max |error| <= 1e-5 * max(1, max |ref|) (float32 rounding of
scores, exp and the sums over 49..64 keys stays well below it); f16 storage
2e-3 (a few f16 ulps at 1.0: inputs are rounded to f16 before the reference
runs, the output is rounded once more). Cosine attention (--cosine, SwinV2)
multiplies the scores by up to 100, and their f32 rounding with them: f32
1e-4.
"""

import argparse
import re
import sys

import numpy as np

from swin_opt import reference as ref


def parse_args(argv):
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["emit", "check"])
    p.add_argument("--window", required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--head-dim", type=int, required=True)
    p.add_argument("--windows", type=int, required=True)
    p.add_argument("--resolution")
    p.add_argument("--shift")
    p.add_argument("--dtype", default="f32", choices=["f32", "f16"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cosine", action="store_true",
                   help="SwinV2's cosine attention with per-head logit scales, "
                        "some above the clamp at ln 100")
    p.add_argument("--spelled-out", action="store_true",
                   help="write the attention in linalg (contractions, bias add, "
                        "linalg.softmax) around rpe.lookup; head-major result")
    return p.parse_args(argv)


def ints(text):
    return [int(x) for x in text.split(",")] if text else None


def make_inputs(a):
    window = ints(a.window)
    n = int(np.prod(window))
    rows = int(np.prod([2 * w - 1 for w in window]))
    rng = np.random.default_rng(a.seed)
    shape = (a.windows, a.heads, n, a.head_dim)
    q, k, v = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    table = rng.standard_normal((rows, a.heads)).astype(np.float32)
    if a.dtype == "f16":
        q, k, v, table = (x.astype(np.float16).astype(np.float32) for x in (q, k, v, table))
    return window, n, rows, q, k, v, table


def logit_scales(heads):
    """Per-head logit scales cycling through below, near and above the
    clamp at ln 100 (4.605), and a negative one."""
    values = [np.log(10.0), 5.5, -0.5, 4.5]
    return np.array([values[i % len(values)] for i in range(heads)], dtype=np.float32)


def dense(x, elt):
    body = np.array2string(
        x, separator=", ", threshold=sys.maxsize, floatmode="unique",
        max_line_width=sys.maxsize)
    dims = "x".join(str(d) for d in x.shape)
    return f"arith.constant dense<{body}> : tensor<{dims}x{elt}>"


SPELLED_OUT = """
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant {scale} : f32
  %e0 = tensor.empty() : {scores_t}
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : {scores_t}) -> {scores_t}
  %s = linalg.generic {{indexing_maps = [affine_map<(b, h, i, j, e) -> (b, h, i, e)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>, affine_map<(b, h, i, j, e) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}}
      ins(%q, %k : {qkv}, {qkv}) outs(%f0 : {scores_t}) {{
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %xs = arith.mulf %x, %scale : f32
    %xy = arith.mulf %xs, %y : f32
    %r = arith.addf %acc, %xy : f32
    linalg.yield %r : f32
  }} -> {scores_t}
  %e1 = tensor.empty() : {scores_t}
  %sb = linalg.generic {{indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (h, i, j)>{mask_map}, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}}
      ins(%s, %b{mask_operand} : {scores_t}, {bias_t}{mask_t}) outs(%e1 : {scores_t}) {{
  ^bb0(%x: f32, %y: f32{mask_arg}, %o: f32):
    %r = arith.addf %x, %y : f32{mask_add}
    linalg.yield %r{mask_result} : f32
  }} -> {scores_t}
  %e2 = tensor.empty() : {scores_t}
  %p = linalg.softmax dimension(3) ins(%sb : {scores_t}) outs(%e2 : {scores_t}) -> {scores_t}
  %e3 = tensor.empty() : {qkv}
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : {qkv}) -> {qkv}
  %o = linalg.generic {{indexing_maps = [affine_map<(b, h, i, e, j) -> (b, h, i, j)>, affine_map<(b, h, i, e, j) -> (b, h, j, e)>, affine_map<(b, h, i, e, j) -> (b, h, i, e)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}}
      ins(%p, %v : {scores_t}, {qkv}) outs(%f3 : {qkv}) {{
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %xy = arith.mulf %x, %y : f32
    %r = arith.addf %acc, %xy : f32
    linalg.yield %r : f32
  }} -> {qkv}"""


def emit(a):
    window, n, rows, q, k, v, table = make_inputs(a)
    elt = a.dtype
    b, h, d = a.windows, a.heads, a.head_dim
    qkv = f"tensor<{b}x{h}x{n}x{d}x{elt}>"
    out_t = f"tensor<{b}x{n}x{h * d}x{elt}>"
    win = ", ".join(map(str, window))
    lines = [
        "func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}",
        "func.func @main() {",
        f"  %q = {dense(q, elt)}",
        f"  %k = {dense(k, elt)}",
        f"  %v = {dense(v, elt)}",
        f"  %t = {dense(table, elt)}",
        f"  %b = rpe.lookup %t {{window = array<i64: {win}>}} : tensor<{rows}x{h}x{elt}> -> tensor<{h}x{n}x{n}x{elt}>",
    ]
    mask = ""
    if a.resolution:
        res, shift = ints(a.resolution), ints(a.shift)
        nw = ref.windows_per_image(res, window)
        lines.append(
            f"  %m = rpe.shift_mask {{resolution = array<i64: {', '.join(map(str, res))}>, "
            f"window = array<i64: {win}>, shift = array<i64: {', '.join(map(str, shift))}>}} "
            f": tensor<{nw}x{n}x{n}xf32>")
        mask = f" mask(%m : tensor<{nw}x{n}x{n}xf32>)"
    if a.spelled_out:
        masked = bool(a.resolution)
        nw = ref.windows_per_image(ints(a.resolution), window) if masked else 1
        lines.append(SPELLED_OUT.format(
            scale=repr(float(a.head_dim ** -0.5)), qkv=qkv,
            scores_t=f"tensor<{b}x{h}x{n}x{n}xf32>", bias_t=f"tensor<{h}x{n}x{n}xf32>",
            mask_map=f", affine_map<(b, h, i, j) -> (b mod {nw}, i, j)>" if masked else "",
            mask_operand=", %m" if masked else "",
            mask_t=f", tensor<{nw}x{n}x{n}xf32>" if masked else "",
            mask_arg=", %z: f32" if masked else "",
            mask_add="\n    %r2 = arith.addf %r, %z : f32" if masked else "",
            mask_result="2" if masked else ""))
        out_t = qkv
    else:
        cosine = ""
        if a.cosine:
            lines.append(f"  %ls = {dense(logit_scales(h), 'f32')}")
            cosine = f" logit_scale(%ls : tensor<{h}xf32>)"
        lines += [
            f"  %o = rpe.window_attention ins(%q, %k, %v : {qkv}, {qkv}, {qkv}) "
            f"bias(%b : tensor<{h}x{n}x{n}x{elt}>){mask}{cosine} -> {out_t}",
        ]
    if elt != "f32":
        f32_t = f"tensor<{b}x{n}x{h * d}xf32>"
        lines += [
            f"  %e = tensor.empty() : {f32_t}",
            f"  %w = linalg.generic {{indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, "
            f"affine_map<(a, b, c) -> (a, b, c)>], iterator_types = [\"parallel\", \"parallel\", \"parallel\"]}} "
            f"ins(%o : {out_t}) outs(%e : {f32_t}) {{",
            f"  ^bb0(%x: {elt}, %y: f32):",
            f"    %z = arith.extf %x : {elt} to f32",
            "    linalg.yield %z : f32",
            f"  }} -> {f32_t}",
        ]
        result, result_t = "%w", f32_t
    else:
        result, result_t = "%o", out_t
    memref_t = result_t.replace("tensor", "memref")
    lines += [
        f"  %mem = bufferization.to_buffer {result} : {result_t} to {memref_t}",
        f"  %u = memref.cast %mem : {memref_t} to memref<*xf32>",
        "  call @printMemrefF32(%u) : (memref<*xf32>) -> ()",
        "  return",
        "}",
    ]
    print("\n".join(lines))


def check(a):
    window, n, rows, q, k, v, table = make_inputs(a)
    bias = ref.lookup(table, window)
    mask = None
    if a.resolution:
        mask = ref.shift_mask(ints(a.resolution), window, ints(a.shift))
    if a.cosine:
        expected = ref.swinv2_window_attention(q, k, v, logit_scales(a.heads),
                                               bias=bias, mask=mask)
    else:
        expected = ref.window_attention(q, k, v, bias=bias, mask=mask)
    if a.spelled_out:  # head-major [B, H, N, d]
        expected = expected.reshape(a.windows, n, a.heads, a.head_dim).transpose(0, 2, 1, 3)
    text = sys.stdin.read()
    if "data =" not in text:
        sys.exit(f"no memref printed; runner output:\n{text[:2000]}")
    numbers = re.findall(r"[-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|nan|inf)",
                         text.split("data =", 1)[1])
    got = np.array([float(x) for x in numbers])
    if got.size != expected.size:
        sys.exit(f"printed {got.size} numbers, expected {expected.size}")
    got = got.reshape(expected.shape)
    tolerance = (1e-5 if a.dtype == "f32" else 2e-3) * max(1.0, np.abs(expected).max())
    if a.cosine and a.dtype == "f32":
        tolerance *= 10
    error = np.abs(got - expected).max()
    print(f"max |error| = {error:.3g} (tolerance {tolerance:.3g})")
    if not error <= tolerance:
        sys.exit("MISMATCH")
    print("PASS")


if __name__ == "__main__":
    args = parse_args(sys.argv[1:])
    emit(args) if args.mode == "emit" else check(args)
