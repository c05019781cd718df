#!/usr/bin/env python3
"""Swap the attention core of a timm Swin model for swin-aot kernels.

Builds a timm Swin model (random weights by default: no download), runs it
with PyTorch's own attention, then with ``swin_opt.torch.swap_attention``,
and prints the max difference of the logits, how many layers used the kernel,
and the time per forward pass before and after (min over ``--repeat`` runs,
after a warm-up that also compiles the kernels).

    PYTHONPATH=python python python/examples/torch_swap.py
    PYTHONPATH=python python python/examples/torch_swap.py --model swin_small_patch4_window7_224 --batch 8
    PYTHONPATH=python python python/examples/torch_swap.py --layout windows --threads 4

Needs torch and timm (``pip install torch timm``) and swin-aot (``$SWIN_AOT``,
``build/bin/swin-aot`` or ``PATH``).
"""

from __future__ import annotations

import argparse
import sys
import time


def timed(model, x, repeat: int) -> tuple:
    import torch

    times = []
    with torch.inference_mode():
        for _ in range(repeat):
            start = time.perf_counter()
            y = model(x)
            times.append(time.perf_counter() - start)
    return min(times), y


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="swin_tiny_patch4_window7_224",
                        help="timm model name (default: %(default)s)")
    parser.add_argument("--pretrained", action="store_true",
                        help="load pretrained weights (downloads them)")
    parser.add_argument("--img", type=int, default=None,
                        help="input size (default: the model's); timm needs img_size to match")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--layout", choices=("auto", "windows"), default="auto",
                        help="auto: token-layout kernels per block; windows: per attention module")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    args = parser.parse_args(argv)

    try:
        import torch
        import timm
    except ImportError as exc:
        print(f"this example needs torch and timm: {exc}", file=sys.stderr)
        return 2
    import swin_opt
    from swin_opt.torch import patch_stats, restore_attention, swap_attention

    try:
        swin_opt.find_swin_aot()
    except swin_opt.SwinAotNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 2

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    kwargs = {"img_size": args.img} if args.img else {}
    model = timm.create_model(args.model, pretrained=args.pretrained, **kwargs).eval()
    if not args.pretrained:
        # timm's SwinV2 zero-initialises the post-norms of the residual branches:
        # untrained, its attention would not reach the logits at all.
        with torch.no_grad():
            for name, p in model.named_parameters():
                if p.dim() == 1 and name.endswith("weight") and not p.any():
                    p.fill_(1.0)
    size = args.img or model.pretrained_cfg.get("input_size", (3, 224, 224))[-1]
    x = torch.randn(args.batch, 3, size, size)

    timed(model, x, 1)  # warm-up
    t_torch, want = timed(model, x, args.repeat)

    patched = swap_attention(model, layout=args.layout)
    start = time.perf_counter()
    timed(model, x, 1)  # warm-up: compiles (or loads cached) kernels
    t_first = time.perf_counter() - start
    t_kernel, got = timed(model, x, args.repeat)
    stats = patch_stats(model)
    restore_attention(model)

    used = sum(s["kernel_calls"] for s in stats) // (args.repeat + 1)
    fallbacks = {}
    for s in stats:
        for reason, n in s["fallback_reasons"].items():
            fallbacks[reason] = fallbacks.get(reason, 0) + n
    diff = (got - want).abs().max().item()
    scale = want.abs().max().item()
    print(f"model {args.model}  input {tuple(x.shape)}  torch threads {torch.get_num_threads()}")
    print(f"attention layers patched: {patched}  using the kernel per forward: {used}"
          + (f"  fallbacks: {fallbacks}" if fallbacks else ""))
    print(f"max |logits difference|: {diff:.3e}  (relative {diff / max(scale, 1e-30):.3e})")
    print(f"forward, PyTorch attention : {t_torch * 1e3:9.1f} ms")
    print(f"forward, swin_opt kernels  : {t_kernel * 1e3:9.1f} ms  "
          f"(speed-up {t_torch / t_kernel:.2f}x; first call incl. compile {t_first:.1f} s)")
    return 0 if diff <= 1e-4 * max(scale, 1.0) else 1


if __name__ == "__main__":
    sys.exit(main())
