#!/usr/bin/env python3
"""A stand-in for ``swin-aot`` used by the driver tests (test_driver.py).

It implements the ``swin-aot`` command-line contract and C ABI with a naive C
kernel compiled by the system C compiler, so that the Python driver (cache,
ctypes calls, argument checking, CLI) can be tested without the real tool.
It is *not* a second reference: the kernel gathers tokens with closed-form
index arithmetic, which cross-checks the NumPy reference's roll / partition /
padding code from a different angle.

Like the real tool it answers ``--version`` with ``swin-aot <semver> (kernel
ABI <n>)`` and writes the ABI description ``<output>.json`` beside the
header (the format swin_opt.abi reads).  ``--emit=so`` builds the CPU kernel;
``--target=nvptx --emit=ptx|cubin|fatbin`` writes a placeholder image and a
host runtime ``.c`` with the GPU ABI that initialises the driver and then
reports that it cannot run (enough to test building and loading the runtime
without a GPU).  ``--packed-qkv`` is refused.  Environment knobs:

``FAKE_SWIN_AOT_VERSION``  text printed by ``--version`` (default ``swin-aot 0.4.0 (kernel ABI 1)``).
``FAKE_SWIN_AOT_NO_ABI``   if ``1``, do not write the ABI description (an older tool).
``FAKE_SWIN_AOT_LOG``      file to which each build appends one line (to count builds).
``FAKE_SWIN_AOT_DESCRIBE`` a JSON object merged into the ABI description (a tool that
                           built something else than it was asked for).
``CC``                     C compiler (default ``cc``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

HELP = """usage: swin-aot --window=WH,WW --heads=H --head-dim=D [--scale=F]
                [--resolution=H,W --shift=S|SH,SW] [--table=FILE]
                [--layout=windows|tokens] [--padding=pad-then-shift|shift-then-pad]
                [--dtype=f32|f16|bf16] [--target=cpu|nvptx] [--chip=sm_90] [--name=NAME]
                --emit=so|ptx|cubin|fatbin -o PATH   (fake swin-aot for tests)"""
VERSION = "swin-aot 0.4.0 (kernel ABI 1)"


def fail(msg: str) -> None:
    print(f"swin-aot: error: {msg}", file=sys.stderr)
    sys.exit(1)


def ints(text: str, what: str) -> list:
    try:
        vals = [int(x) for x in text.split(",")]
    except ValueError:
        fail(f"invalid {what} '{text}'")
    return vals


def parse(argv):
    if "--version" in argv:
        print(os.environ.get("FAKE_SWIN_AOT_VERSION", VERSION))
        sys.exit(0)
    if "--help" in argv:
        print(HELP)
        sys.exit(0)
    p = argparse.ArgumentParser(prog="swin-aot", add_help=False)
    for flag in ("--window", "--heads", "--head-dim", "--scale", "--resolution", "--shift",
                 "--table", "--dtype", "--target", "--name", "--emit", "-o", "--layout",
                 "--padding", "--chip", "--cuda-toolkit", "--cpu", "--kernel"):
        p.add_argument(flag)
    # Accepted and ignored: they change how the real tool generates code, not the ABI.
    p.add_argument("--no-parallel", action="store_true")
    p.add_argument("--packed-qkv", action="store_true")
    args, unknown = p.parse_known_args(argv)
    if unknown:
        fail(f"unknown argument '{unknown[0]}'")
    if args.packed_qkv:
        fail("the fake swin-aot does not implement --packed-qkv")
    return args


def validate(a):
    if not a.window or not a.heads or not a.head_dim or not a.o:
        fail("--window, --heads, --head-dim and -o are required")
    win = ints(a.window, "window")
    if len(win) not in (2, 3) or min(win) < 1:
        fail(f"window must have 2 or 3 positive extents, got '{a.window}'")
    heads, dim = int(a.heads), int(a.head_dim)
    if heads < 1 or dim < 1:
        fail("heads and head-dim must be positive")
    layout = a.layout or "windows"
    padding = a.padding
    if layout not in ("windows", "tokens"):
        fail(f"bad layout '{layout}'")
    if padding not in (None, "pad-then-shift", "shift-then-pad"):
        fail(f"bad padding '{padding}'")
    res = shift = None
    if a.resolution:
        res = ints(a.resolution, "resolution")
        if len(res) != len(win) or min(res) < 1:
            fail("resolution must have one positive entry per window axis")
        shift = ints(a.shift or "0", "shift")
        if len(shift) == 1:
            shift = shift * len(win)
        if len(shift) != len(win) or any(s < 0 or s >= w for s, w in zip(shift, win)):
            fail(f"shift must satisfy 0 <= shift < window on every axis, got '{a.shift}'")
        if any(r % w for r, w in zip(res, win)) and (layout == "windows" or padding is None):
            fail(f"resolution {a.resolution} is not divisible by window {a.window}")
    elif a.shift or layout == "tokens":
        fail("--shift and --layout=tokens require --resolution")
    dtype = a.dtype or "f32"
    if dtype not in ("f32", "f16", "bf16"):
        fail(f"unsupported dtype '{dtype}'")
    target = a.target or "cpu"
    emits = {"cpu": ("so",), "nvptx": ("ptx", "cubin", "fatbin")}
    if target not in emits:
        fail(f"unsupported target '{target}'")
    if (a.emit or "so") not in emits[target]:
        fail(f"the fake swin-aot does not support --emit={a.emit} for --target={target}")
    name = a.name or "swin_window_attention"
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        fail(f"bad name '{name}'")
    table = None
    rows = math.prod(2 * w - 1 for w in win)
    if a.table:
        data = open(a.table, "rb").read()
        if len(data) != rows * heads * 4:
            fail(f"table file has {len(data)} bytes, expected {rows * heads * 4}")
        import array

        table = array.array("f")
        table.frombytes(data)
        if sys.byteorder != "little":
            table.byteswap()
    scale = float(a.scale) if a.scale is not None else dim ** -0.5
    return dict(win=win, heads=heads, dim=dim, res=res, shift=shift, layout=layout,
                padding=padding, dtype=dtype, name=name, table=table, rows=rows, scale=scale,
                target=target)


C_TEMPLATE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#define RANK {rank}
#define N {n}
#define H {heads}
#define D {dim}
#define C (H * D)
#define TOKENS {tokens}
#define SHIFTED {shifted}
#define NWPI {nwpi}
#define L {l}
#define PAD_THEN_SHIFT {pad_then_shift}
static const int WIN[3] = {{{win}}};
static const int RES[3] = {{{res}}};   /* padded for the mask */
static const int IMG[3] = {{{img}}};   /* unpadded image (token layout) */
static const int SHIFT[3] = {{{shift}}};
static const float SCALE = {scale};
{table_decl}

{storage}

static void coords(int64_t t, const int *ext, int *out) {{
  for (int a = RANK - 1; a >= 0; --a) {{ out[a] = (int)(t % ext[a]); t /= ext[a]; }}
}}

static int rel_index(int i, int j) {{
  int ci[3], cj[3], idx = 0;
  coords(i, WIN, ci); coords(j, WIN, cj);
  for (int a = 0; a < RANK; ++a) idx = idx * (2 * WIN[a] - 1) + (ci[a] - cj[a] + WIN[a] - 1);
  return idx;
}}

/* Position (per axis) of token t of window w (w counted inside one image). */
static void position(int64_t w, int t, int *p) {{
  int cnt[3], wc[3], tc[3];
  for (int a = 0; a < RANK; ++a) cnt[a] = RES[a] / WIN[a];
  coords(w, cnt, wc); coords(t, WIN, tc);
  for (int a = 0; a < RANK; ++a) p[a] = wc[a] * WIN[a] + tc[a];
}}

static int label(int64_t w, int t) {{
  int p[3], lab = 0;
  position(w, t, p);
  for (int a = 0; a < RANK; ++a) {{
    int n = RES[a], l = p[a] < n - WIN[a] ? 0 : (p[a] < n - SHIFT[a] ? 1 : 2);
    lab = lab * 3 + l;
  }}
  return lab;
}}

/* Token layout: flat image index of token t of window w, or -1 for a pad token. */
static int64_t source(int64_t w, int t) {{
  int p[3];
  int64_t flat = 0;
  position(w, t, p);
  for (int a = 0; a < RANK; ++a) {{
    int u;
    if (PAD_THEN_SHIFT) {{
      u = (p[a] + SHIFT[a]) % RES[a];
      if (u >= IMG[a]) return -1;
    }} else {{
      if (p[a] >= IMG[a]) return -1;
      u = (p[a] + SHIFT[a]) % IMG[a];
    }}
    flat = flat * IMG[a] + u;
  }}
  return flat;
}}

int {name}(const st_t *q, const st_t *k, const st_t *v, const st_t *table, st_t *out,
           int64_t count{extra_param}) {{
  if (!q || !k || !v || !out || count < 0) return 1;
  if (!BAKED && !table) return 1;
#if TOKENS
  static const float zero_pad[3 * C];
  if (!pad_qkv) pad_qkv = zero_pad; /* NULL: padding tokens are zeros */
#endif
#if !TOKENS
  if (NWPI && count % NWPI) return 2;
  const int64_t nwin = count;
#else
  const int64_t nwin = count * NWPI;
#endif
  float logit[N];
  int64_t src[N];
  for (int64_t b = 0; b < nwin; ++b) {{
    int64_t wi = NWPI ? b % NWPI : 0;
#if TOKENS
    int64_t img = b / NWPI;
    for (int t = 0; t < N; ++t) src[t] = source(wi, t);
#define AT(ptr, which, t, h, d) (src[t] < 0 ? pad_qkv[(which) * C + (h) * D + (d)] \
        : ld(ptr[(img * L + src[t]) * C + (h) * D + (d)]))
#else
#define AT(ptr, which, t, h, d) ld(ptr[((b * H + (h)) * N + (t)) * D + (d)])
#endif
    for (int h = 0; h < H; ++h) {{
      for (int i = 0; i < N; ++i) {{
        float mx = -INFINITY;
        for (int j = 0; j < N; ++j) {{
          float s = 0.f;
          for (int d = 0; d < D; ++d) s += AT(q, 0, i, h, d) * SCALE * AT(k, 1, j, h, d);
          int r = rel_index(i, j);
          s += BAKED ? TABLE[r * H + h] : ld(table[r * H + h]);
          if (SHIFTED && label(wi, i) != label(wi, j)) s += -100.0f;
          logit[j] = s;
          if (s > mx) mx = s;
        }}
        float sum = 0.f;
        for (int j = 0; j < N; ++j) {{ logit[j] = expf(logit[j] - mx); sum += logit[j]; }}
        for (int d = 0; d < D; ++d) {{
          float acc = 0.f;
          for (int j = 0; j < N; ++j) acc += logit[j] * AT(v, 2, j, h, d);
#if TOKENS
          if (src[i] >= 0) out[(img * L + src[i]) * C + h * D + d] = stv(acc / sum);
#else
          out[(b * N + i) * C + h * D + d] = stv(acc / sum);
#endif
        }}
      }}
    }}
  }}
  return 0;
}}
"""

STORAGE = {
    "f32": "typedef float st_t;\nstatic inline float ld(st_t x) { return x; }\n"
           "static inline st_t stv(float x) { return x; }",
    "f16": "typedef uint16_t st_t;\n"
           "static inline float ld(st_t x) { _Float16 h; memcpy(&h, &x, 2); return (float)h; }\n"
           "static inline st_t stv(float x) { _Float16 h = (_Float16)x; st_t b; memcpy(&b, &h, 2); return b; }",
    "bf16": "typedef uint16_t st_t;\n"
            "static inline float ld(st_t x) { uint32_t u = (uint32_t)x << 16; float f; memcpy(&f, &u, 4); return f; }\n"
            "static inline st_t stv(float x) {\n"
            "  uint32_t u; memcpy(&u, &x, 4);\n"
            "  if ((u & 0x7fffffffu) > 0x7f800000u) return (st_t)((u >> 16) | 0x40);\n"
            "  return (st_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);\n"
            "}",
}


def generate(cfg) -> str:
    win = cfg["win"]
    rank = len(win)
    img = cfg["res"] or win
    padded = [-(-r // w) * w for r, w in zip(img, win)]
    shift = cfg["shift"] or [0] * rank
    tokens = cfg["layout"] == "tokens"
    nwpi = math.prod(p // w for p, w in zip(padded, win)) if cfg["res"] else 0
    if cfg["table"] is not None:
        vals = ",".join(repr(float(x)) + "f" for x in cfg["table"])
        table_decl = f"#define BAKED 1\nstatic const float TABLE[] = {{{vals}}};"
    else:
        table_decl = "#define BAKED 0\nstatic const float TABLE[1] = {0};"
    pad3 = lambda xs: ",".join(str(x) for x in list(xs) + [1] * (3 - len(xs)))  # noqa: E731
    sig_extra = ", const float *pad_qkv" if tokens else ""
    src = C_TEMPLATE.format(
        rank=rank, n=math.prod(win), heads=cfg["heads"], dim=cfg["dim"], tokens=int(tokens),
        shifted=int(any(shift)), nwpi=nwpi, l=math.prod(img),
        pad_then_shift=int(cfg["padding"] != "shift-then-pad"), win=pad3(win),
        res=pad3(padded), img=pad3(img), shift=",".join(map(str, list(shift) + [0] * (3 - rank))),
        scale=repr(float(cfg["scale"])) + "f",
        table_decl=table_decl, storage=STORAGE[cfg["dtype"]], name=cfg["name"],
        extra_param=sig_extra)
    return src


def abi_arguments(cfg) -> list:
    """The kernel's C arguments in order, as the ABI description lists them."""
    gpu = cfg["target"] == "nvptx"
    tokens = cfg["layout"] == "tokens"
    dtype, heads, dim = cfg["dtype"], cfg["heads"], cfg["dim"]
    n, channels = math.prod(cfg["win"]), heads * dim
    count = "batch" if tokens else "num_windows"
    scalar = "float" if dtype == "f32" else "uint16_t"

    def buffer(name, role, shape, const=True, nullable=False, elem=dtype):
        host = scalar if elem == dtype else "float"
        ctype = "CUdeviceptr" if gpu else ("const " if const else "") + host + " *"
        return dict(name=name, role=role, ctype=ctype, dtype=elem, shape=shape, nullable=nullable)

    length = math.prod(cfg["res"]) if tokens else None
    if cfg.get("packed"):
        args = [buffer("qkv", "input", [count, length, 3, heads, dim])]
    else:
        qkv_shape = [count, length, channels] if tokens else [count, heads, n, dim]
        args = [buffer(x, "input", qkv_shape) for x in ("q", "k", "v")]
    args.append(buffer("table", "table", [cfg["rows"], heads], nullable=cfg["table"] is not None))
    args.append(buffer("out", "output", [count, length, channels] if tokens else [count, n, channels],
                       const=False))
    args.append(dict(name=count, role="count", ctype="int64_t"))
    if tokens:
        # The CPU kernels take the padding in f32, the GPU's in the element type.
        args.append(buffer("pad_qkv", "padding", [3, channels], nullable=True,
                           elem=dtype if gpu else "f32"))
    if gpu:
        args.append(dict(name="stream", role="stream", ctype="CUstream"))
    return args


def prototype(cfg, args) -> str:
    params = ", ".join(f"{a['ctype']}{'' if a['ctype'].endswith('*') else ' '}{a['name']}"
                       for a in args)
    return f"int {cfg['name']}({params})"


def abi_json(cfg, args) -> str:
    description = {"format": "swin-opt-kernel-abi", "version": 1, "name": cfg["name"],
                   "target": cfg["target"], "dtype": cfg["dtype"], "layout": cfg["layout"],
                   "packed_qkv": bool(cfg.get("packed")), "window": list(cfg["win"]),
                   "heads": cfg["heads"], "head_dim": cfg["dim"], "returns": "int32",
                   "arguments": args}
    description.update(json.loads(os.environ.get("FAKE_SWIN_AOT_DESCRIBE", "{}")))
    return json.dumps(description, indent=1)


GPU_RUNTIME = r"""/* fake swin-aot GPU runtime: initialises the driver, then cannot run. */
#include "{header}"
#include <stdio.h>

static char error_text[256];
const char *{name}_last_error(void) {{ return error_text; }}

{prototype} {{
  if (!out || {count} < 0) {{
    snprintf(error_text, sizeof error_text, "{name}: invalid arguments");
    return 1;
  }}
  CUresult s = cuInit(0);
  if (s != CUDA_SUCCESS) {{
    snprintf(error_text, sizeof error_text, "{name}: cuInit failed (CUDA error %d)", (int)s);
    return (int)s;
  }}
  snprintf(error_text, sizeof error_text, "{name}: the fake swin-aot's kernel does not run");
  return 1;
}}
"""


def build_cpu(cfg, out) -> None:
    src = generate(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        c_file = os.path.join(tmp, "kernel.c")
        with open(c_file, "w") as f:
            f.write(src)
        cc = os.environ.get("CC", "cc")
        proc = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", out, c_file, "-lm"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            fail("C compiler failed: " + " | ".join(proc.stderr.strip().splitlines()[:3]))


def main(argv=None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    cfg = validate(args)
    out = args.o
    abi = abi_arguments(cfg)
    proto = prototype(cfg, abi)
    gpu = cfg["target"] == "nvptx"
    # Side files are named after the whole output, as swin-aot's: k.so.h.
    if gpu:
        with open(out, "w") as f:
            f.write(f"// fake {args.emit} image for {cfg['name']}\n")
        with open(out + ".c", "w") as f:
            f.write(GPU_RUNTIME.format(header=os.path.basename(out + ".h"), name=cfg["name"],
                                       prototype=proto,
                                       count=next(a["name"] for a in abi if a["role"] == "count")))
    else:
        build_cpu(cfg, out)
    with open(out + ".h", "w") as f:
        f.write("#pragma once\n#include <stdint.h>\n" + ("#include <cuda.h>\n" if gpu else "")
                + f"/* fake swin-aot kernel */\n{proto};\n"
                + (f"const char *{cfg['name']}_last_error(void);\n" if gpu else ""))
    if os.environ.get("FAKE_SWIN_AOT_NO_ABI") != "1":
        with open(out + ".json", "w") as f:
            f.write(abi_json(cfg, abi) + "\n")
    log = os.environ.get("FAKE_SWIN_AOT_LOG")
    if log:
        with open(log, "a") as f:
            f.write(" ".join(sys.argv[1:]) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
