#!/usr/bin/env python3
"""Execution tests of rpe.continuous_position_bias through mlir-runner.

`emit` writes a module whose `main` computes SwinV2's bias table from
seeded random MLP weights and prints it: with --folded the weights are
arith.constant (the op folds at compile time), otherwise they are read from
memref globals (not foldable: the op is lowered to its linalg MLP). `check`
recomputes the table with the independent NumPy reference
(swin_opt.reference.swinv2_cpb_table) and compares.

Tolerance: max |error| <= 1e-5 * 16 (the table lies in (0, 16); float32
rounding of the coordinates, the two layers and the sigmoid).
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
    p.add_argument("--pretrained-window")
    p.add_argument("--hidden", type=int, required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--folded", action="store_true")
    return p.parse_args(argv)


def ints(text):
    return [int(x) for x in text.split(",")] if text else None


def weights(a, rank):
    rng = np.random.default_rng(7)
    w1 = rng.standard_normal((a.hidden, rank)).astype(np.float32)
    b1 = (0.5 * rng.standard_normal(a.hidden)).astype(np.float32)
    w2 = (rng.standard_normal((a.heads, a.hidden)) / np.sqrt(a.hidden)).astype(np.float32)
    return w1, b1, w2


def dense(x):
    body = np.array2string(x, separator=", ", threshold=sys.maxsize, floatmode="unique",
                           max_line_width=sys.maxsize)
    return f"dense<{body}>"


def emit(a):
    window = ints(a.window)
    rank = len(window)
    rows = int(np.prod([2 * w - 1 for w in window]))
    ws = weights(a, rank)
    types = [f"tensor<{'x'.join(map(str, w.shape))}xf32>" for w in ws]
    lines = []
    if not a.folded:
        for name, w in zip(("w1", "b1", "w2"), ws):
            lines.append(f"memref.global \"private\" constant @{name} : "
                         f"memref<{'x'.join(map(str, w.shape))}xf32> = {dense(w)}")
    lines += ["func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}",
              "func.func @main() {"]
    for name, w, t in zip(("w1", "b1", "w2"), ws, types):
        if a.folded:
            lines.append(f"  %{name} = arith.constant {dense(w)} : {t}")
        else:
            m = t.replace("tensor", "memref")
            lines.append(f"  %m{name} = memref.get_global @{name} : {m}")
            lines.append(f"  %{name} = bufferization.to_tensor %m{name} restrict : {m} to {t}")
    attrs = f"window = array<i64: {', '.join(map(str, window))}>"
    if a.pretrained_window:
        attrs += f", pretrained_window = array<i64: {a.pretrained_window.replace(',', ', ')}>"
    out_t = f"tensor<{rows}x{a.heads}xf32>"
    lines += [
        f"  %t = rpe.continuous_position_bias %w1, %b1, %w2 {{{attrs}}} : "
        f"{types[0]}, {types[1]}, {types[2]} -> {out_t}",
        f"  %mem = bufferization.to_buffer %t : {out_t} to {out_t.replace('tensor', 'memref')}",
        f"  %u = memref.cast %mem : {out_t.replace('tensor', 'memref')} to memref<*xf32>",
        "  call @printMemrefF32(%u) : (memref<*xf32>) -> ()",
        "  return",
        "}",
    ]
    print("\n".join(lines))


def check(a):
    window = ints(a.window)
    w1, b1, w2 = weights(a, len(window))
    coords = ref.swinv2_relative_coords_table(window, ints(a.pretrained_window))
    expected = ref.swinv2_cpb_table(coords, w1, b1, w2)
    text = sys.stdin.read()
    if "data =" not in text:
        sys.exit(f"no memref printed; runner output:\n{text[:2000]}")
    numbers = re.findall(r"[-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|nan|inf)", text.split("data =", 1)[1])
    got = np.array([float(x) for x in numbers])
    if got.size != expected.size:
        sys.exit(f"printed {got.size} numbers, expected {expected.size}")
    error = np.abs(got.reshape(expected.shape) - expected).max()
    tolerance = 1e-5 * 16
    print(f"max |error| = {error:.3g} (tolerance {tolerance:.3g})")
    if not error <= tolerance:
        sys.exit("MISMATCH")
    print("PASS")


if __name__ == "__main__":
    args = parse_args(sys.argv[1:])
    emit(args) if args.mode == "emit" else check(args)
