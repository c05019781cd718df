#!/usr/bin/env python3
"""Swin-T's MLPs through swin-opt's compiled kernel, against torch, in one process.

    python bench/mlp.py                         # stages 1-4 and the whole model, batch 1 and 8
    python bench/mlp.py --batch 8 --no-model    # the MLPs only
    python bench/mlp.py --no-compile --json mlp.json
    python bench/mlp.py --rounds 1 --batch 1 --stages 4 --no-compile   # a smoke run

Two tables, each timed **alternately** in one process (every contender once
per round, best of ``--rounds``), after checking every output against a
reference (1e-4 relative; the run fails otherwise):

* **The MLP of each stage** (``fc2(GELU(fc1(x)))`` with the biases; M =
  batch x tokens, C = 96 ... 768, hidden 4C; random weights): ``ours``
  (``torch.ops.swin_opt.mlp``, the kernel :func:`swin_opt.torch.swap_attention`
  runs; its weights packed once, at the first call), ``torch`` (eager
  ``F.linear``, ``F.gelu``, ``F.linear``: MKL) and ``oneDNN``
  (``swin_opt::linear``, what the attention patches use for qkv and proj,
  with ``F.gelu`` between). GFLOP/s counts 2 M (C H + H C).
* **The whole model**: timm ``swin_tiny_patch4_window7_224`` (random weights
  redrawn by ``swin_opt.testing.sharpen_weights``, eval, f32) as it is,
  attention-swapped (``swap_attention(mlp=False)``) and attention+MLP-swapped
  (``swap_attention()``), eager and, unless ``--no-compile``, each under
  ``torch.compile`` (inductor; three more compiles, minutes on 2 cores).

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


def mlp_rows(torch, batches: List[int], stages: List[int], rounds: int) -> List[dict]:
    import models  # bench/models.py: alternate, relative_error

    from swin_opt.torch import mlp as mlp_op
    from swin_opt.torch import ops

    F = torch.nn.functional
    mlp_op.register()
    ops.register()  # swin_opt::linear
    rows = []
    for stage in stages:
        channels, tokens = STAGES[stage]
        hidden = 4 * channels
        gen = torch.Generator().manual_seed(stage)
        w1 = torch.randn(hidden, channels, generator=gen) / channels ** 0.5
        w2 = torch.randn(channels, hidden, generator=gen) / hidden ** 0.5
        b1, b2 = torch.randn(hidden, generator=gen), torch.randn(channels, generator=gen)
        key = mlp_op.mlp_key(channels, hidden, channels)
        for batch in batches:
            x = torch.randn(batch, tokens, channels, generator=gen)
            contenders = {
                "ours": lambda: torch.ops.swin_opt.mlp(x, w1, b1, w2, b2, None, key),
                "torch": lambda: F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2),
                "oneDNN": lambda: torch.ops.swin_opt.linear(
                    F.gelu(torch.ops.swin_opt.linear(x, w1, b1)), w2, b2),
            }
            with torch.inference_mode():
                want = F.linear(F.gelu(F.linear(x.double(), w1.double(), b1.double())),
                                w2.double(), b2.double())
                errors = {name: models.relative_error(torch, fn().double(), want)
                          for name, fn in contenders.items()}
                bad = {name: e for name, e in errors.items() if not e <= TOLERANCE}
                if bad:
                    raise SystemExit(f"stage {stage} batch {batch}: {bad} (relative error)")
                best = models.alternate(torch, contenders, rounds)
            flops = 2 * batch * tokens * 2 * channels * hidden
            row = {"stage": stage, "batch": batch, "m": batch * tokens, "channels": channels,
                   "hidden": hidden, "gflop": flops / 1e9}
            for name, seconds in best.items():
                row[f"{name}_ms"] = seconds * 1e3
                row[f"{name}_gflops"] = flops / seconds / 1e9
            rows.append(row)
            print(f"  stage {stage} batch {batch}: ours {row['ours_ms']:.2f} ms, torch "
                  f"{row['torch_ms']:.2f} ms, oneDNN {row['oneDNN_ms']:.2f} ms", file=sys.stderr)
    return rows


def model_rows(torch, batches: List[int], rounds: int, compile_too: bool) -> List[dict]:
    import models

    from swin_opt.torch import patch_stats, swap_attention

    original = models.random_model(torch, "timm")
    attention = copy.deepcopy(original)
    swap_attention(attention, mlp=False)
    both = copy.deepcopy(original)
    swap_attention(both)
    variants = {"original": original, "attention": attention, "attention+mlp": both}
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
            if not any(s["kind"] == "mlp" and s["kernel_calls"] for s in patch_stats(both)):
                raise SystemExit("the attention+mlp model ran no MLP kernel")
            best = models.alternate(torch, {name: (lambda m=model: m(x))
                                            for name, model in variants.items()}, rounds)
        row = {"batch": batch, **{f"{name}_ms": s * 1e3 for name, s in best.items()}}
        rows.append(row)
        print(f"  swin_t batch {batch}: " + ", ".join(f"{n} {s * 1e3:.1f} ms"
                                                     for n, s in best.items()), file=sys.stderr)
    return rows


def print_tables(mlp: List[dict], whole: List[dict]) -> None:
    if mlp:
        print(f"{'stage':>5}{'batch':>6}{'M':>7}{'C':>5}  {'ours':>8}{'torch':>9}{'oneDNN':>9}"
              f"  {'ours':>7}{'torch':>7}{'oneDNN':>7}  {'vs torch':>8}{'vs oneDNN':>10}")
        print(f"{'':>5}{'':>6}{'':>7}{'':>5}  {'ms':>8}{'ms':>9}{'ms':>9}  {'GFLOP/s':>21}")
        for r in mlp:
            print(f"{r['stage']:>5}{r['batch']:>6}{r['m']:>7}{r['channels']:>5}  "
                  f"{r['ours_ms']:>8.2f}{r['torch_ms']:>9.2f}{r['oneDNN_ms']:>9.2f}  "
                  f"{r['ours_gflops']:>7.0f}{r['torch_gflops']:>7.0f}{r['oneDNN_gflops']:>7.0f}  "
                  f"{r['torch_ms'] / r['ours_ms']:>7.2f}x{r['oneDNN_ms'] / r['ours_ms']:>9.2f}x")
    if whole:
        names = [k[:-3] for k in whole[0] if k.endswith("_ms")]
        print()
        print(f"{'batch':>5}" + "".join(f"{n:>24}" for n in names) + "   (ms)")
        for r in whole:
            print(f"{r['batch']:>5}" + "".join(f"{r[n + '_ms']:>24.1f}" for n in names))


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    p.add_argument("--stages", type=int, nargs="+", default=sorted(STAGES), choices=sorted(STAGES))
    p.add_argument("--rounds", type=int, default=10, help="alternating rounds (best of)")
    p.add_argument("--threads", type=int, default=2, help="torch's and OpenMP's threads")
    p.add_argument("--no-mlp", action="store_true", help="skip the per-stage MLPs")
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
        print("bench/mlp.py needs torch", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    from swin_opt.mlp import host_vector_width

    mlp = [] if args.no_mlp else mlp_rows(torch, args.batch, args.stages, args.rounds)
    whole = [] if args.no_model else model_rows(torch, args.batch, args.rounds, not args.no_compile)
    print(f"Swin-T MLPs and swin_tiny_patch4_window7_224, f32, random weights; torch "
          f"{torch.__version__}, {torch.get_num_threads()} threads (OMP_NUM_THREADS="
          f"{os.environ['OMP_NUM_THREADS']}); kernels of {host_vector_width()} lanes; "
          f"{platform.processor() or platform.machine()}; best of {args.rounds} alternating rounds")
    print_tables(mlp, whole)
    if args.json:
        args.json.write_text(json.dumps({"torch": torch.__version__, "threads": args.threads,
                                         "rounds": args.rounds, "mlp": mlp, "model": whole},
                                        indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
