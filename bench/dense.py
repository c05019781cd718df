#!/usr/bin/env python3
"""Swin-T's dense layers through swin-opt's compiled kernels, against torch, in one process.

    python bench/dense.py                         # stages 1-4 and the whole model, batch 1 and 8
    python bench/dense.py --batch 8 --no-model    # the layers only
    python bench/dense.py --layers qkv proj --no-model
    python bench/dense.py --no-compile --json dense.json
    python bench/dense.py --rounds 1 --batch 1 --stages 4 --no-compile   # a smoke run

Two tables, each timed **alternately** in one process (every contender once
per round, best of ``--rounds``), after checking every output against a
float64 reference (1e-4 relative; the run fails otherwise):

* **The dense layers of each stage** (random weights; M = batch x tokens,
  C = 96 ... 768): the MLP (``fc2(GELU(fc1(x)))``, hidden 4C), the qkv
  (``C -> 3C``) and output (``C -> C``) projections, and the patch merging
  that ends the stage (``4C -> 2C``, no bias, a quarter of the tokens;
  stages 1-3). ``ours`` is what :func:`swin_opt.torch.swap_attention` runs
  (``torch.ops.swin_opt.mlp`` for the MLP, ``torch.ops.swin_opt.dense`` for
  one layer; weights packed once, at the first call), ``torch`` eager
  ``F.linear`` (MKL; ``F.gelu`` between the MLP's layers) and ``oneDNN``
  (``swin_opt::linear``: ``mkldnn._linear_pointwise``, what the swap used for
  projections before). GFLOP/s counts 2 M K N per layer.
* **The whole model**: timm ``swin_tiny_patch4_window7_224`` (random weights
  redrawn by ``swin_opt.testing.sharpen_weights``, eval, f32) as it is,
  attention-swapped (``swap_attention(mlp=False, linear=False)``: the attention
  and its projections) and swapped
  (``swap_attention()``: attention, MLPs, projections and merges on the
  kernels), eager and, unless ``--no-compile``, each under ``torch.compile``
  (inductor; three more compiles, minutes on 2 cores).

``--threads`` (default 2) sets torch's threads and, before torch is imported,
``OMP_NUM_THREADS`` (unless set): the kernels run on GNU libgomp, torch's
own OpenMP runtime, whose team size it sets.

Needs torch and timm, and ``swin-aot`` (``$SWIN_AOT`` or ``build/bin/swin-aot``).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import sys
from pathlib import Path
from typing import Dict, List

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "python"))
sys.path.insert(0, str(BENCH))

TOLERANCE = 1e-4
#: Swin-T's stages: (channels, tokens per image).
STAGES = {1: (96, 56 * 56), 2: (192, 28 * 28), 3: (384, 14 * 14), 4: (768, 7 * 7)}
#: The dense layers of a stage: name -> (widths for channels C, tokens divisor, bias)
LAYERS = {
    "mlp": (lambda c: (c, 4 * c, c), 1, True),
    "qkv": (lambda c: (c, 3 * c), 1, True),
    "proj": (lambda c: (c, c), 1, True),
    "merge": (lambda c: (4 * c, 2 * c), 4, False),
}


def _chain(F, linear, x, layers):
    """The layers ``[(w, b)]`` on ``x`` through ``linear``, GELU between them."""
    for i, (w, b) in enumerate(layers):
        x = linear(x, w, b)
        if i < len(layers) - 1:
            x = F.gelu(x)
    return x


def dense_rows(torch, batches: List[int], stages: List[int], names: List[str],
               rounds: int) -> List[dict]:
    import models  # bench/models.py: alternate, relative_error

    from swin_opt.torch import dense, mlp, ops

    F = torch.nn.functional
    dense.register()
    mlp.register()
    ops.register()  # swin_opt::linear
    rows = []
    for stage in stages:
        channels, tokens = STAGES[stage]
        for name in names:
            widths_of, divisor, with_bias = LAYERS[name]
            if name == "merge" and stage == max(STAGES):
                continue  # the last stage has no patch merging
            widths = widths_of(channels)
            gen = torch.Generator().manual_seed(stage)
            layers = [(torch.randn(n, k, generator=gen) / k ** 0.5,
                       torch.randn(n, generator=gen) if with_bias else None)
                      for k, n in zip(widths, widths[1:])]
            key = dense.dense_key(widths)
            if name == "mlp":
                (w1, b1), (w2, b2) = layers
                ours = lambda x: torch.ops.swin_opt.mlp(x, w1, b1, w2, b2, None, key)  # noqa: E731
            else:
                ((w, b),) = layers
                ours = lambda x: torch.ops.swin_opt.dense(x, w, b, None, key)  # noqa: E731
            for batch in batches:
                x = torch.randn(batch, tokens // divisor, widths[0], generator=gen)
                contenders = {
                    "ours": lambda: ours(x),
                    "torch": lambda: _chain(F, F.linear, x, layers),
                    "oneDNN": lambda: _chain(F, torch.ops.swin_opt.linear, x, layers),
                }
                with torch.inference_mode():
                    want = _chain(F, F.linear, x.double(),
                                  [(w.double(), None if b is None else b.double()) for w, b in layers])
                    errors = {c: models.relative_error(torch, fn().double(), want)
                              for c, fn in contenders.items()}
                    bad = {c: e for c, e in errors.items() if not e <= TOLERANCE}
                    if bad:
                        raise SystemExit(f"{name} stage {stage} batch {batch}: {bad} (relative error)")
                    best = models.alternate(torch, contenders, rounds)
                m = batch * tokens // divisor
                flops = sum(2 * m * k * n for k, n in zip(widths, widths[1:]))
                row = {"layer": name, "stage": stage, "batch": batch, "m": m, "widths": list(widths),
                       "gflop": flops / 1e9}
                for c, seconds in best.items():
                    row[f"{c}_ms"] = seconds * 1e3
                    row[f"{c}_gflops"] = flops / seconds / 1e9
                rows.append(row)
                print(f"  {name} stage {stage} batch {batch}: ours {row['ours_ms']:.2f} ms, torch "
                      f"{row['torch_ms']:.2f} ms, oneDNN {row['oneDNN_ms']:.2f} ms", file=sys.stderr)
    return rows


def model_rows(torch, batches: List[int], rounds: int, compile_too: bool) -> List[dict]:
    import models

    from swin_opt.torch import patch_stats, swap_attention

    original = models.random_model(torch, "timm")
    attention = copy.deepcopy(original)
    swap_attention(attention, mlp=False, linear=False)
    swapped = copy.deepcopy(original)
    swap_attention(swapped)
    variants = {"original": original, "attention": attention, "swapped": swapped}
    if compile_too:
        variants.update({f"compiled {name}": torch.compile(model)
                         for name, model in list(variants.items())})
    rows = []
    for batch in batches:
        x = torch.randn(batch, 3, 224, 224, generator=torch.Generator().manual_seed(batch))
        with torch.inference_mode():
            want = original(x)
            for name, model in variants.items():
                error = models.relative_error(torch, model(x), want)  # compiles, builds kernels
                if not error <= TOLERANCE:
                    raise SystemExit(f"{name} batch {batch}: relative error {error:.3g}")
            if not any(s["kind"] == "mlp" and s["kernel_calls"] for s in patch_stats(swapped)):
                raise SystemExit("the swapped model ran no MLP kernel")
            best = models.alternate(torch, {name: (lambda m=model: m(x))
                                            for name, model in variants.items()}, rounds)
        row = {"batch": batch, **{f"{name}_ms": s * 1e3 for name, s in best.items()}}
        rows.append(row)
        print(f"  swin_t batch {batch}: " + ", ".join(f"{n} {s * 1e3:.1f} ms"
                                                     for n, s in best.items()), file=sys.stderr)
    return rows


def print_tables(layers: List[dict], whole: List[dict]) -> None:
    if layers:
        print(f"{'layer':>6}{'stage':>6}{'batch':>6}{'M':>7}  {'widths':<14}{'ours':>8}{'torch':>9}"
              f"{'oneDNN':>9}  {'ours':>7}{'torch':>7}{'oneDNN':>7}  {'vs torch':>8}{'vs oneDNN':>10}")
        print(f"{'':>6}{'':>6}{'':>6}{'':>7}  {'':<14}{'ms':>8}{'ms':>9}{'ms':>9}  {'GFLOP/s':>21}")
        for r in layers:
            widths = "-".join(map(str, r["widths"]))
            print(f"{r['layer']:>6}{r['stage']:>6}{r['batch']:>6}{r['m']:>7}  {widths:<14}"
                  f"{r['ours_ms']:>8.2f}{r['torch_ms']:>9.2f}{r['oneDNN_ms']:>9.2f}  "
                  f"{r['ours_gflops']:>7.0f}{r['torch_gflops']:>7.0f}{r['oneDNN_gflops']:>7.0f}  "
                  f"{r['torch_ms'] / r['ours_ms']:>7.2f}x{r['oneDNN_ms'] / r['ours_ms']:>9.2f}x")
    if whole:
        names = [k[:-3] for k in whole[0] if k.endswith("_ms")]
        print()
        print(f"{'batch':>5}" + "".join(f"{n:>20}" for n in names) + "   (ms)")
        for r in whole:
            print(f"{r['batch']:>5}" + "".join(f"{r[n + '_ms']:>20.1f}" for n in names))


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    p.add_argument("--stages", type=int, nargs="+", default=sorted(STAGES), choices=sorted(STAGES))
    p.add_argument("--rounds", type=int, default=10, help="alternating rounds (best of)")
    p.add_argument("--threads", type=int, default=2, help="torch's and OpenMP's threads")
    p.add_argument("--layers", nargs="*", default=list(LAYERS), choices=list(LAYERS),
                   help="the per-stage layers to time (none: skip them)")
    p.add_argument("--no-model", action="store_true", help="skip the whole model")
    p.add_argument("--no-compile", action="store_true", help="the whole model in eager mode only")
    p.add_argument("--json", type=Path, help="write the rows to this file")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))  # before torch and the kernels
    try:
        import torch
    except ImportError:
        print("bench/dense.py needs torch", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    from swin_opt.dense import host_vector_width

    layers = dense_rows(torch, args.batch, args.stages, args.layers, args.rounds) if args.layers else []
    whole = [] if args.no_model else model_rows(torch, args.batch, args.rounds, not args.no_compile)
    print(f"Swin-T's dense layers and swin_tiny_patch4_window7_224, f32, random weights; torch "
          f"{torch.__version__}, {torch.get_num_threads()} threads (OMP_NUM_THREADS="
          f"{os.environ['OMP_NUM_THREADS']}); kernels of {host_vector_width()} lanes; "
          f"{platform.processor() or platform.machine()}; best of {args.rounds} alternating rounds")
    print_tables(layers, whole)
    if args.json:
        args.json.write_text(json.dumps({"torch": torch.__version__, "threads": args.threads,
                                         "rounds": args.rounds, "layers": layers, "model": whole},
                                        indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
