#!/usr/bin/env python3
"""Every family with a 2-D (or 3-D) relative position bias table (issue 28): the
attention core of each at its default size, and whole models, in one process.

    python bench/families.py                          # cores (forward) and whole models
    python bench/families.py --backward               # cores: forward + backward too
    python bench/families.py --parts core --cores beit,maxvit-1
    python bench/families.py --batch 1 8 --no-compile --json families.json
    python bench/families.py --rounds 1 --no-compile  # a correctness run

**Attention core** (``--parts core``), random q/k/v (``[B_, heads, N, d]``) and
an N(0, 1) table, float32, one image:

=============  ==========================================================
``beit``       BEiT-base: the 14x14 patch grid and the class token (N 197),
               12 heads of 64, one "window" per image (``class_token``)
``maxvit-1/2`` MaxViT-T stage 1 / 2: 7x7 partitions of the 56x56 / 28x28
               map (64 / 16 per image), 2 / 4 heads of 32.  Block and grid
               attention have the same core (the grid partition only gathers
               the tokens differently), so one row is both
``swin-t-1``   Swin-T stage 1 for reference: 64 windows of 7x7, 3 heads of 32
``swinunetr``  Swin-UNETR (feature size 48) stage 1 on a 96^3 volume: 7^3
               windows of the padded 49^3 map (343), 3 heads of 16; only when
               monai is importable
=============  ==========================================================

Contenders, timed **alternately** (each once per round, best of ``--rounds``):
``ours`` (``torch.ops.swin_opt.window_attention``, the operator
:func:`swin_opt.torch.swap_attention` runs, with its autograd), ``eager``
(PyTorch eager: the bias gathered from the table, ``(q*scale) @ kᵀ + bias``,
``softmax``, ``@ v``: ``bench/run.py``'s ``torch_window_attention``) and
``sdpa`` (the same gathered bias as a float ``attn_mask`` of
``F.scaled_dot_product_attention``).  Every contender gathers the bias from
the table inside the timed call, as the models do each forward (and as it
must under ``--backward``, where the table gets its gradient too).  Each
output (and with ``--backward`` each gradient: q, k, v, the table) is first
checked against a float64 copy of the eager expression, 1e-4 relative; the
run fails otherwise.

**Whole models** (``--parts model``): timm ``beit_base_patch16_224`` and
``maxvit_tiny_tf_224`` (224x224 images) and, when monai is importable,
``SwinUNETR(in_channels=1, out_channels=14, feature_size=48)`` on a 96^3
volume; random weights redrawn by ``swin_opt.testing.sharpen_weights``, eval,
``torch.inference_mode``.  The original and a deep copy swapped by
``swap_attention`` are checked (``bench/models.py``'s ``check_output``: 1e-4
relative, or no farther from float64 than twice the original), then timed
alternately, eager and, unless ``--no-compile``, each under ``torch.compile``
(the compiled swapped model checked the same way against the compiled
original: inductor's fusions round differently from eager).
The table says how many attention layers were patched and how many kernel
calls a forward made (0 where ``swap_attention`` does not know the model's
modules yet: a swapped column then times the original code).

``--threads`` (default 2) sets torch's threads and, before torch is
imported, ``OMP_NUM_THREADS`` (unless set).

Needs torch and timm (monai for the Swin-UNETR rows), and ``swin-aot``
(``$SWIN_AOT`` or ``build/bin/swin-aot``).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import sys
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Tuple

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "python"))
sys.path.insert(0, str(BENCH))

TOLERANCE = 1e-4


class Core(NamedTuple):
    """One family's attention core: ``windows`` per image of the ``window`` grid
    (plus a class token), ``heads`` of ``head_dim``."""

    family: str
    window: Tuple[int, ...]
    windows: int
    heads: int
    head_dim: int
    class_token: bool = False
    needs: str = ""  # a module that must be importable for the row


CORES: Dict[str, Core] = {
    "beit": Core("BEiT-base 14x14+cls", (14, 14), 1, 12, 64, class_token=True),
    "maxvit-1": Core("MaxViT-T stage 1 block/grid", (7, 7), 64, 2, 32),
    "maxvit-2": Core("MaxViT-T stage 2 block/grid", (7, 7), 16, 4, 32),
    "swin-t-1": Core("Swin-T stage 1", (7, 7), 64, 3, 32),
    "swinunetr": Core("SwinUNETR 96^3 stage 1", (7, 7, 7), 343, 3, 16, needs="monai"),
}


def importable(name: str) -> bool:
    if not name:
        return True
    try:
        __import__(name)
    except ImportError:
        return False
    return True


# --------------------------------------------------------------------------- #
# Attention cores
# --------------------------------------------------------------------------- #
def core_index(torch, core: Core):
    from swin_opt import reference as ref

    index = (ref.class_token_relative_index(core.window) if core.class_token
             else ref.relative_index(core.window))
    return torch.from_numpy(index.astype("int64"))


def sdpa_attention(torch, q, k, v, table, index, scale):
    """The core through ``F.scaled_dot_product_attention``, the gathered bias as its
    float mask."""
    b_, heads, n, d = q.shape
    bias = table[index.view(-1)].view(n, n, heads).permute(2, 0, 1)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias.unsqueeze(0),
                                                           scale=scale)
    return out.transpose(1, 2).reshape(b_, n, heads * d)


def core_rows(torch, names: List[str], batch: int, rounds: int, backward: bool) -> List[dict]:
    import models  # bench/models.py: alternate, relative_error
    from run import torch_window_attention  # bench/run.py: the eager expression

    from swin_opt.torch import ops

    ops.register()
    rows = []
    for name in names:
        core = CORES[name]
        if not importable(core.needs):
            print(f"  {name}: skipped ({core.needs} is not importable)", file=sys.stderr)
            continue
        index = core_index(torch, core)
        tokens = index.shape[0]
        rows_in_table = int(index.max()) + 1
        scale = core.head_dim ** -0.5
        config = (("class_token", True),) if core.class_token else ()
        spec = ops.resolve_spec(core.window, core.heads, core.head_dim, None, "float32", config, ())
        if spec.error is not None:
            raise SystemExit(f"{name}: {spec.error}")
        kern = ops.KernelCall(spec)
        gen = torch.Generator().manual_seed(len(rows))
        shape = (batch * core.windows, core.heads, tokens, core.head_dim)
        q, k, v = (torch.randn(shape, generator=gen) for _ in range(3))
        table = torch.randn(rows_in_table, core.heads, generator=gen)
        forward = {
            "ours": lambda q, k, v, t: kern(q, k, v, t),
            "eager": lambda q, k, v, t: torch_window_attention(q, k, v, t, index, None, scale),
            "sdpa": lambda q, k, v, t: sdpa_attention(torch, q, k, v, t, index, scale),
        }
        row = {"core": name, "family": core.family, "batch": batch, "windows": shape[0],
               "tokens": tokens, "heads": core.heads, "head_dim": core.head_dim}
        inputs = (q, k, v, table)
        want = torch_window_attention(*(t.double() for t in inputs), index, None, scale)
        with torch.no_grad():
            for who, fn in forward.items():
                error = models.relative_error(torch, fn(*inputs).double(), want)
                if not error <= TOLERANCE:
                    raise SystemExit(f"{name} {who}: forward relative error {error:.3g}")
            best = models.alternate(torch, {who: (lambda fn=fn: fn(*inputs))
                                            for who, fn in forward.items()}, rounds)
        row.update({f"{who}_ms": s * 1e3 for who, s in best.items()})
        if backward:
            leaves = [t.clone().requires_grad_() for t in inputs]
            dout = torch.randn(want.shape, generator=gen)
            exact = [t.double().detach().requires_grad_() for t in inputs]
            torch_window_attention(*exact, index, None, scale).backward(dout.double())

            def step(fn):
                for t in leaves:
                    t.grad = None
                fn(*leaves).backward(dout)

            for who, fn in forward.items():
                step(fn)
                for what, got, ref_t in zip(("dq", "dk", "dv", "dtable"), leaves, exact):
                    error = models.relative_error(torch, got.grad.double(), ref_t.grad)
                    if not error <= TOLERANCE:
                        raise SystemExit(f"{name} {who}: {what} relative error {error:.3g}")
            best = models.alternate(torch, {who: (lambda fn=fn: step(fn))
                                            for who, fn in forward.items()}, rounds)
            row.update({f"{who}_fwd_bwd_ms": s * 1e3 for who, s in best.items()})
        rows.append(row)
        print(f"  {name}: " + ", ".join(f"{k} {v:.2f}" for k, v in row.items()
                                        if k.endswith("_ms")), file=sys.stderr)
    return rows


# --------------------------------------------------------------------------- #
# Whole models
# --------------------------------------------------------------------------- #
def timm_beit_base(torch):
    import timm

    return timm.create_model("beit_base_patch16_224", pretrained=False)


def timm_maxvit_t(torch):
    import timm

    return timm.create_model("maxvit_tiny_tf_224", pretrained=False)


def monai_swinunetr(torch):
    from monai.networks.nets import SwinUNETR

    return SwinUNETR(in_channels=1, out_channels=14, feature_size=48)


#: name -> (constructor, input shape after the batch, a module that must be importable)
WHOLE_MODELS: Dict[str, Tuple[Callable, Tuple[int, ...], str]] = {
    "beit_base_patch16_224": (timm_beit_base, (3, 224, 224), "timm"),
    "maxvit_tiny_tf_224": (timm_maxvit_t, (3, 224, 224), "timm"),
    "swinunetr_96": (monai_swinunetr, (1, 96, 96, 96), "monai"),
}


def model_rows(torch, names: List[str], batches: List[int], rounds: int,
               compile_too: bool) -> List[dict]:
    import warnings

    import models  # bench/models.py: alternate, check_output, first_tensor

    from swin_opt.testing import sharpen_weights
    from swin_opt.torch import patch_stats, swap_attention

    def calls(model):
        return sum(s["kernel_calls"] for s in patch_stats(model) if s["kind"] == "attention")

    rows = []
    for name in names:
        make, shape, needs = WHOLE_MODELS[name]
        if not importable(needs):
            print(f"  {name}: skipped ({needs} is not importable)", file=sys.stderr)
            continue
        torch.manual_seed(0)
        original = sharpen_weights(make(torch)).eval()
        swapped = copy.deepcopy(original)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # patched nothing: reported in the row
            layers = swap_attention(swapped)
        variants = {"original": original, "swapped": swapped}
        if compile_too:
            variants.update({"compiled": torch.compile(original),
                             "compiled swapped": torch.compile(swapped)})
        for batch in batches:
            x = torch.randn(batch, *shape, generator=torch.Generator().manual_seed(batch))
            row = {"model": name, "batch": batch, "layers": layers}
            with torch.inference_mode():
                want = models.first_tensor(original(x))
                before = calls(swapped)
                got = models.first_tensor(swapped(x))
                row["kernel_calls_per_forward"] = calls(swapped) - before
                models.check_output(torch, name, batch, original, x, got, want, row)
                if compile_too:  # compiled swapped against compiled original (inductor rounds)
                    checked = {}
                    models.check_output(
                        torch, f"{name} (compiled)", batch, original, x,
                        models.first_tensor(variants["compiled swapped"](x)),
                        models.first_tensor(variants["compiled"](x)), checked)
                    row.update({f"compiled_{k}": v for k, v in checked.items()})
                best = models.alternate(torch, {who: (lambda m=m: m(x))
                                                for who, m in variants.items()}, rounds)
            row.update({f"{who}_ms": s * 1e3 for who, s in best.items()})
            rows.append(row)
            print(f"  {name} batch {batch}: " + ", ".join(
                f"{who} {s * 1e3:.1f} ms" for who, s in best.items()), file=sys.stderr)
    return rows


def print_tables(cores: List[dict], whole: List[dict]) -> None:
    if cores:
        bwd = "ours_fwd_bwd_ms" in cores[0]
        head = (f"{'core':<30}{'B_':>5}{'N':>5}{'H':>4}{'d':>4}  {'ours':>8}{'eager':>8}"
                f"{'sdpa':>8}  {'vs eager':>8}{'vs sdpa':>8}")
        if bwd:
            head += f"  {'fwd+bwd ours':>12}{'eager':>8}{'sdpa':>8}  {'vs eager':>8}{'vs sdpa':>8}"
        print(head + "   (ms)")
        for r in cores:
            line = (f"{r['family']:<30}{r['windows']:>5}{r['tokens']:>5}{r['heads']:>4}"
                    f"{r['head_dim']:>4}  {r['ours_ms']:>8.2f}{r['eager_ms']:>8.2f}"
                    f"{r['sdpa_ms']:>8.2f}  {r['eager_ms'] / r['ours_ms']:>7.2f}x"
                    f"{r['sdpa_ms'] / r['ours_ms']:>7.2f}x")
            if bwd:
                line += (f"  {r['ours_fwd_bwd_ms']:>12.2f}{r['eager_fwd_bwd_ms']:>8.2f}"
                         f"{r['sdpa_fwd_bwd_ms']:>8.2f}  "
                         f"{r['eager_fwd_bwd_ms'] / r['ours_fwd_bwd_ms']:>7.2f}x"
                         f"{r['sdpa_fwd_bwd_ms'] / r['ours_fwd_bwd_ms']:>7.2f}x")
            print(line)
    if whole:
        names = [k[:-3] for k in whole[0] if k.endswith("_ms")]
        print()
        print(f"{'model':<24}{'batch':>6}{'layers':>7}{'calls':>6}"
              + "".join(f"{n:>18}" for n in names) + "   (ms)")
        for r in whole:
            print(f"{r['model']:<24}{r['batch']:>6}{r['layers']:>7}"
                  f"{r['kernel_calls_per_forward']:>6}"
                  + "".join(f"{r[n + '_ms']:>18.1f}" for n in names))


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parts", default="core,model", help="comma-separated: core, model")
    p.add_argument("--cores", default=",".join(CORES), help="comma-separated, of %(default)s")
    p.add_argument("--models", default=",".join(WHOLE_MODELS),
                   help="comma-separated, of %(default)s")
    p.add_argument("--batch", type=int, nargs="+", default=[1],
                   help="whole models' batch sizes (the cores run one image)")
    p.add_argument("--rounds", type=int, default=10, help="alternating rounds (best of)")
    p.add_argument("--threads", type=int, default=2, help="torch's and OpenMP's threads")
    p.add_argument("--backward", action="store_true", help="cores: forward + backward too")
    p.add_argument("--no-compile", action="store_true", help="whole models in eager mode only")
    p.add_argument("--json", type=Path, help="write the rows to this file")
    args = p.parse_args(argv)
    for option, known in (("parts", ("core", "model")), ("cores", CORES),
                          ("models", WHOLE_MODELS)):
        chosen = [s for s in getattr(args, option).split(",") if s]
        bad = sorted(set(chosen) - set(known))
        if bad:
            p.error(f"--{option}: unknown {bad}; expected some of {list(known)}")
        setattr(args, option, chosen)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))  # before torch and the kernels
    try:
        import torch
    except ImportError:
        print("bench/families.py needs torch", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    cores = (core_rows(torch, args.cores, 1, args.rounds, args.backward)
             if "core" in args.parts else [])
    whole = (model_rows(torch, args.models, args.batch, args.rounds, not args.no_compile)
             if "model" in args.parts else [])
    print(f"Relative position bias families, f32, random weights; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads (OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}); "
          f"{platform.processor() or platform.machine()}; best of {args.rounds} alternating rounds")
    print_tables(cores, whole)
    if args.json:
        args.json.write_text(json.dumps({"torch": torch.__version__, "threads": args.threads,
                                         "rounds": args.rounds, "core": cores, "model": whole},
                                        indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
