#!/usr/bin/env python3
"""Training with and without swin-opt's kernels: Swin-T steps and the attention core's backward.

    python bench/train.py [--quick] [--batch 8] [--repeat 5] [--threads 2]
                          [--models timm,torchvision,transformers] [--windows 2048]
                          [--parts model,core] [--json out.json]

**Whole model** (``--parts model``): for each model (Swin-T of timm, and of
torchvision / transformers when asked for; random weights, every dropout and
drop-path rate 0, train mode) it builds the original and a deep copy swapped
by :func:`swin_opt.torch.swap_attention`, and times one training step of each
**alternately**, ``--repeat`` rounds, best of each, in one process. A step is
``zero_grad(set_to_none=True)``, the forward on a fixed random batch, the
loss ``mean(logits ** 2)`` (transformers: of ``last_hidden_state``) and
``backward()``; there is no optimizer step (it is the same torch code in
both). Before timing it runs one step of each on the same batch and compares
the gradients (max relative error per parameter group, the
``relative_position_bias_table`` included), and it prints how many of the
swapped model's attention calls ran our kernels and how many fell back to
the original forward, with the reasons, per step: a fallback is visible, and
then the two columns time the same code.

**Attention core** (``--parts core``): Swin-T stage 1 (``--windows`` windows
of 7x7 = 49 tokens, 3 heads, head_dim 32, the shifted-window mask of a 56x56
map, f32): PyTorch eager autograd of Swin's own expression (the torch column
of ``bench/run.py``: ``(q*scale) @ kᵀ + table[index].view(N,N,H).permute(2,0,1)``
+ mask, ``softmax``, ``@ v``, transpose/reshape to ``[B_, N, C]``) against
``torch.ops.swin_opt.window_attention`` with autograd, timed alternately:
forward alone (no grad), forward + backward, and backward alone (one forward
kept, ``backward(retain_graph=True)`` repeated). Our column reads
``n/a (<reason>)`` when the op cannot be differentiated (no backward
registered) or has no kernel. When it runs, its forward and gradients are
compared with torch's.

The run exits non-zero (after printing) when a relative error, whole-model
gradient or core forward/gradient, exceeds ``GRAD_TOLERANCE`` (1e-3; for a model's
gradients, or twice the original's own float32 error against float64 when that is
larger).

Needs torch (and timm / torchvision / transformers for their rows) and
``swin-aot`` (``$SWIN_AOT`` or ``build/bin/swin-aot``).
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import platform
import re
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(1, str(BENCH_DIR.parent / "python"))

from models import alternate, first_tensor, relative_error  # noqa: E402
from run import torch_window_attention  # noqa: E402

from swin_opt import reference as ref  # noqa: E402

#: Max relative gradient error (per parameter / input, f32) above which the run
#: exits non-zero, after printing everything.
GRAD_TOLERANCE = 1e-3


# --------------------------------------------------------------------------- #
# Models, with every stochastic layer off (the frameworks' defaults are not:
# timm and transformers drop paths at 0.1, torchvision at 0.2)
# --------------------------------------------------------------------------- #
def timm_swin_t(torch):
    import timm

    return timm.create_model("swin_tiny_patch4_window7_224", pretrained=False,
                             drop_rate=0.0, proj_drop_rate=0.0, attn_drop_rate=0.0,
                             drop_path_rate=0.0)


def torchvision_swin_t(torch):
    import torchvision

    model = torchvision.models.swin_t(weights=None)  # swin_t fixes stochastic depth at 0.2
    for m in model.modules():
        if isinstance(m, torchvision.ops.StochasticDepth):
            m.p = 0.0
    return model


def transformers_swin_t(torch):
    import transformers

    return transformers.SwinModel(transformers.SwinConfig(
        drop_path_rate=0.0, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))


MODELS: Dict[str, Callable] = {
    "timm": timm_swin_t,
    "torchvision": torchvision_swin_t,
    "transformers": transformers_swin_t,
}

#: Parameter groups of the gradient comparison, as (group, pattern of the parameter
#: names of timm / torchvision / transformers); the first match decides, else "other".
GROUPS = (
    ("relative_position_bias_table", r"relative_position_bias_table"),
    ("patch_embed", r"patch_embed|^embeddings\.|^features\.0\."),
    ("downsample", r"downsample|^features\.\d+\.(norm|reduction)\."),
    ("qkv", r"\.qkv\.|\.[qkv]_proj\.|\.(query|key|value)\."),
    ("proj", r"attn\.proj\.|\.o_proj\.|attention\.output\."),
    ("mlp", r"mlp|intermediate|output\.dense"),
    ("head", r"^head"),
    ("norm", r"norm"),
)


def group_of(name: str) -> str:
    for group, pattern in GROUPS:
        if re.search(pattern, name):
            return group
    return "other"


def train_step(model, x):
    """One timed training step: zero_grad, forward, loss, backward (no optimizer step)."""
    model.zero_grad(set_to_none=True)
    y = first_tensor(model(x))
    y.float().square().mean().backward()


def gradient_errors(torch, model, reference) -> Dict[str, float]:
    """Per parameter group, max |g - g_ref| / max |g_ref| over the group's parameters.

    Normalised per group, not per parameter: a parameter whose exact gradient is
    zero (the key bias: softmax ignores a constant added to every score of a row)
    has rounding noise on both sides, which is no error."""
    diff: Dict[str, float] = {}
    size: Dict[str, float] = {}
    want = dict(reference.named_parameters())
    for name, p in model.named_parameters():
        g, g_ref = p.grad, want[name].grad
        group = group_of(name)
        if g_ref is None and g is None:
            continue
        if g is None or g_ref is None:
            diff[group] = float("inf")  # one model has a gradient the other lacks: a cut graph
            continue
        g_ref = g_ref.double()
        diff[group] = max(diff.get(group, 0.0), (g.double() - g_ref).abs().max().item())
        size[group] = max(size.get(group, 0.0), g_ref.abs().max().item())
    return {group: d / max(size.get(group, 0.0), 1e-300) for group, d in diff.items()}


def stats_total(patch_stats, model) -> dict:
    """Kernel and fallback calls of all of ``model``'s patches, with the reasons."""
    total = {"kernel_calls": 0, "fallback_calls": 0, "reasons": collections.Counter()}
    for s in patch_stats(model):
        total["kernel_calls"] += s["kernel_calls"]
        total["fallback_calls"] += s["fallback_calls"]
        total["reasons"].update(s["fallback_reasons"])
    return total


def stats_delta(after: dict, before: dict) -> dict:
    reasons = after["reasons"] - before["reasons"]
    return {"kernel_calls": after["kernel_calls"] - before["kernel_calls"],
            "fallback_calls": after["fallback_calls"] - before["fallback_calls"],
            "fallback_reasons": dict(reasons)}


def bench_model(torch, name: str, batch: int, repeat: int) -> dict:
    from swin_opt.torch import patch_stats, swap_attention

    torch.manual_seed(0)
    original = MODELS[name](torch).train()
    swapped = copy.deepcopy(original)
    layers = swap_attention(swapped)
    x = torch.randn(batch, 3, 224, 224)
    row = {"model": name, "batch": batch, "layers": layers}

    # One step of each on the same batch: first use (kernel builds), patch statistics
    # of one step and the gradient check.
    before = stats_total(patch_stats, swapped)
    start = time.perf_counter()
    train_step(swapped, x)
    row["first_step_s"] = time.perf_counter() - start
    row["per_step"] = stats_delta(stats_total(patch_stats, swapped), before)
    train_step(original, x)
    # Both against the original in float64: a model's own float32 gradients can be
    # ill-conditioned (transformers' default init: 2e-2 from float64), so the swapped
    # model must be as close as the original is, or within GRAD_TOLERANCE.
    exact = copy.deepcopy(original).double()
    train_step(exact, x.double())
    row["grad_rel_error"] = gradient_errors(torch, swapped, exact)
    row["original_grad_rel_error"] = gradient_errors(torch, original, exact)
    del exact

    times = alternate(torch, {"original": lambda: train_step(original, x),
                              "swapped": lambda: train_step(swapped, x)}, repeat)
    row.update({f"{k}_ms": v * 1e3 for k, v in times.items()})
    row["speedup"] = times["original"] / times["swapped"]
    return row


def print_models(rows: List[dict]) -> None:
    print(f"{'model':<13}{'batch':>6}{'original':>11}{'swapped':>11}{'speed-up':>10}"
          f"{'kernel':>9}{'fallback':>10}  fallback reasons")
    print(f"{'':<13}{'':>6}{'ms/step':>11}{'ms/step':>11}{'':>10}{'calls':>9}{'calls':>10}")
    for r in rows:
        s = r["per_step"]
        reasons = "; ".join(f"{n}x {why}" for why, n in s["fallback_reasons"].items()) or "-"
        print(f"{r['model']:<13}{r['batch']:>6}{r['original_ms']:>11.1f}{r['swapped_ms']:>11.1f}"
              f"{r['speedup']:>9.2f}x{s['kernel_calls']:>9}{s['fallback_calls']:>10}  {reasons}")
    for r in rows:
        own = r["original_grad_rel_error"]
        errs = ", ".join(f"{g} {e:.1e} ({own.get(g, 0.0):.1e})"
                         for g, e in sorted(r["grad_rel_error"].items()))
        print(f"  {r['model']} batch {r['batch']}: gradient max rel error per group against "
              f"the original in float64, swapped (original): {errs}")


# --------------------------------------------------------------------------- #
# Attention core: torch autograd vs the custom op's
# --------------------------------------------------------------------------- #
#: Swin-T stage 1: 56x56 map, window 7, shift 3, 3 heads of 32.
STAGE1 = {"resolution": (56, 56), "window": (7, 7), "shift": (3, 3), "heads": 3, "head_dim": 32}


class Unavailable(Exception):
    """Our column cannot be timed; the message says why."""


def core_inputs(torch, windows: int):
    cfg = STAGE1
    heads, d = cfg["heads"], cfg["head_dim"]
    n = ref.window_tokens(cfg["window"])
    mask = ref.shift_mask(cfg["resolution"], cfg["window"], cfg["shift"])
    if windows % mask.shape[0]:
        raise SystemExit(f"--windows must be a multiple of {mask.shape[0]} (windows per image)")
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(windows, heads, n, d, generator=g).requires_grad_()
               for _ in range(3))
    table = (0.02 * torch.randn(ref.table_rows(cfg["window"]), heads, generator=g)).requires_grad_()
    dout = torch.randn(windows, n, heads * d, generator=g)
    return {"q": q, "k": k, "v": v, "table": table, "dout": dout,
            "index": torch.from_numpy(ref.relative_index(cfg["window"])),
            "mask": torch.from_numpy(mask).float(), "scale": d ** -0.5}


def our_attention(torch) -> Callable:
    """``(q, k, v, table) -> out`` through ``torch.ops.swin_opt.window_attention`` with
    the stage-1 kernel, or :class:`Unavailable`."""
    try:
        from swin_opt.torch import ops

        ops.register()
        cfg = STAGE1
        key = ops.kernel_key(cfg["window"], cfg["heads"], cfg["head_dim"],
                             resolution=cfg["resolution"], shift=cfg["shift"], dtype="float32")
        ops.kernel_for(key)  # build (or load) it outside the timings
    except Exception as exc:  # noqa: BLE001 - no kernel, whatever the cause: say why
        raise Unavailable(f"no kernel: {_reason(exc)}") from None

    def run(q, k, v, table):
        return torch.ops.swin_opt.window_attention(q, k, v, table, None, key)

    return run


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if len(text) <= 90 else text[:87] + "..."


def bench_core(torch, windows: int, repeat: int) -> dict:
    a = core_inputs(torch, windows)
    q, k, v, table, dout = a["q"], a["k"], a["v"], a["table"], a["dout"]
    leaves = (q, k, v, table)

    def eager(q, k, v, table):
        return torch_window_attention(q, k, v, table, a["index"], a["mask"], a["scale"])

    impls: Dict[str, Callable] = {"torch": eager}
    row = {"windows": windows, **{k_: list(v_) if isinstance(v_, tuple) else v_
                                  for k_, v_ in STAGE1.items()}}
    unavailable: Dict[str, str] = {}
    try:
        ours = our_attention(torch)
        with torch.no_grad():
            want = eager(q, k, v, table)
            try:
                got = ours(q, k, v, table)
            except Exception as exc:  # noqa: BLE001 - reported as the reason
                raise Unavailable(f"forward failed: {_reason(exc)}") from None
            row["forward_rel_error"] = relative_error(torch, got, want)
        impls["ours"] = ours
    except Unavailable as exc:
        unavailable["ours"] = str(exc)

    grads: Dict[str, list] = {}

    def backward_of(fn):
        for t in leaves:
            t.grad = None
        fn(q, k, v, table).backward(dout)
        return [t.grad.clone() for t in leaves]

    grads["torch"] = backward_of(eager)
    differentiable = {"torch"}
    if "ours" in impls:
        try:
            grads["ours"] = backward_of(impls["ours"])
            differentiable.add("ours")
        except Exception as exc:  # noqa: BLE001 - any failure is reported as the reason
            unavailable["ours backward"] = f"no backward: {_reason(exc)}"
    if "ours" in grads:
        row["grad_rel_error"] = {name: relative_error(torch, g, w)
                                 for name, g, w in zip(("q", "k", "v", "table"), grads["ours"],
                                                       grads["torch"])}

    fns: Dict[str, Callable] = {}
    kept = {}  # the graph each backward-alone timing replays
    for name, fn in impls.items():
        def forward(fn=fn):
            with torch.no_grad():
                fn(q, k, v, table)

        fns[f"{name} forward"] = forward
        if name not in differentiable:
            continue

        def forward_backward(fn=fn):
            for t in leaves:
                t.grad = None
            fn(q, k, v, table).backward(dout)

        def backward(name=name):
            for t in leaves:
                t.grad = None
            kept[name].backward(dout, retain_graph=True)

        kept[name] = fn(q, k, v, table)
        fns[f"{name} forward+backward"] = forward_backward
        fns[f"{name} backward"] = backward
    times = alternate(torch, fns, repeat)
    row["ms"] = {k_: v_ * 1e3 for k_, v_ in times.items()}
    row["unavailable"] = unavailable
    return row


def print_core(row: dict) -> None:
    print(f"Attention core, Swin-T stage 1: {row['windows']} windows x {row['heads']} heads, "
          f"N=49, d={row['head_dim']}, shifted mask, f32")
    print(f"{'':<18}{'torch eager':>13}{'swin_opt op':>13}{'speed-up':>12}")
    for what in ("forward", "forward+backward", "backward"):
        t = row["ms"][f"torch {what}"]
        o = row["ms"].get(f"ours {what}")
        if o is None:
            why = row["unavailable"].get("ours") or row["unavailable"].get("ours backward")
            print(f"{what:<18}{t:>10.1f} ms   n/a ({why})")
        else:
            print(f"{what:<18}{t:>10.1f} ms{o:>10.1f} ms{t / o:>11.2f}x")
    if "forward_rel_error" in row:
        print(f"  forward max rel error (ours vs torch): {row['forward_rel_error']:.1e}")
    if "grad_rel_error" in row:
        errs = ", ".join(f"d{n} {e:.1e}" for n, e in row["grad_rel_error"].items())
        print(f"  gradient max rel error (ours vs torch): {errs}")


# --------------------------------------------------------------------------- #
def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parts", default="model,core", help="comma-separated, of %(default)s")
    p.add_argument("--models", default="timm",
                   help=f"comma-separated, of {','.join(MODELS)} (default %(default)s)")
    p.add_argument("--batch", type=int, default=None,
                   help="whole-model batch (default 8; 2 with --quick)")
    p.add_argument("--windows", type=int, default=None,
                   help="attention-core windows (default 2048 = batch 32; 512 with --quick)")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    p.add_argument("--repeat", type=int, default=None,
                   help="alternating rounds, best of (default 5; 2 with --quick)")
    p.add_argument("--quick", action="store_true", help="smaller batch and fewer rounds")
    p.add_argument("--json", type=Path, help="write the results to this file")
    args = p.parse_args(argv)
    args.batch = args.batch or (2 if args.quick else 8)
    args.windows = args.windows or (512 if args.quick else 2048)
    args.repeat = args.repeat or (2 if args.quick else 5)
    for what in ("batch", "windows", "repeat", "threads"):
        if getattr(args, what) < 1:
            p.error(f"--{what} must be at least 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        import torch
    except ImportError:
        print("bench/train.py needs torch", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    parts = [x for x in args.parts.split(",") if x]
    names = [m for m in args.models.split(",") if m]
    bad = (set(parts) - {"model", "core"}) | (set(names) - set(MODELS))
    if bad:
        print(f"unknown part(s)/model(s) {sorted(bad)}; parts: model, core; models: "
              f"{list(MODELS)}", file=sys.stderr)
        return 2
    result: dict = {"torch": torch.__version__, "threads": torch.get_num_threads(),
                    "repeat": args.repeat, "models": [], "core": None}
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"{platform.processor() or platform.machine()}; best of {args.repeat} "
          "alternating rounds")
    if "model" in parts:
        for name in names:
            try:
                MODELS[name](torch)
            except ImportError as exc:
                print(f"skipping {name}: {exc}", file=sys.stderr)
                continue
            result["models"].append(bench_model(torch, name, args.batch, args.repeat))
            print(f"  {name}: {result['models'][-1]['speedup']:.2f}x", file=sys.stderr)
        print(f"Training step of Swin-T 224x224 (train mode, no dropout/drop-path, random "
              f"weights): zero_grad + forward + mean(out**2) + backward, batch {args.batch}")
        print_models(result["models"])
    if "core" in parts:
        result["core"] = bench_core(torch, args.windows, args.repeat)
        print_core(result["core"])
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    bad = [f"{r['model']} {group}" for r in result["models"]
           for group, err in r["grad_rel_error"].items()
           if not err <= max(GRAD_TOLERANCE, 2 * r["original_grad_rel_error"].get(group, 0.0))]
    if result["core"]:
        errors = dict(result["core"].get("grad_rel_error", {}))
        errors["forward"] = result["core"].get("forward_rel_error", 0.0)
        bad += [f"core {what}" for what, err in errors.items() if not err <= GRAD_TOLERANCE]
    if bad:
        print(f"error: relative errors above {GRAD_TOLERANCE:g}: {', '.join(bad)}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
