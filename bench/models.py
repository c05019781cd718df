#!/usr/bin/env python3
"""Whole Swin models with and without swin-opt's kernels, in one process.

    python bench/models.py [--batch 1 8] [--threads 2] [--repeat 6] [--compile]
                           [--models timm,torchvision,transformers] [--json out.json]

For each model (Swin-T of timm, torchvision and transformers; on request
SwinV2-T, MaxViT-T and CoAtNet-0 of timm; random
weights redrawn by ``swin_opt.testing.sharpen_weights``, eval mode,
``torch.inference_mode``) and batch size it builds the
original and a deep copy swapped by :func:`swin_opt.torch.swap_attention`,
checks that their outputs agree (1e-4 relative, or, where the original's own
float32 rounding is that large, no farther from a float64 copy of the
original than twice the original is: :func:`check_output`; the run fails
otherwise),
then times one forward of each **alternately**, ``--repeat`` times, and
reports the best of each: the speed-up is measured in the same process, on
the same warmed-up threads, under the same load.

It also reports where the swapped model's attention time goes: the time
spent in the kernel calls during the timed forwards (``in model``: through
``swin_opt.Kernel``, Python included) against the same calls, on the same
shapes, made back to back outside the model (``alone``). Their ratio is the
cost of running inside the model (threads, caches, first touches).

``--compile`` adds ``torch.compile`` (inductor) of the original and of the
swapped model, timed alternately in the same way. ``--openvino`` adds the
original converted by OpenVINO (``openvino.convert_model``, f32, the same
threads), the strongest whole-model CPU runtime installed here, timed in the
same rounds.

Needs torch, and timm / torchvision / transformers for their rows (a missing
one is skipped), and ``swin-aot`` (``$SWIN_AOT`` or ``build/bin/swin-aot``).
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "python"))

from swin_opt import Kernel  # noqa: E402
from swin_opt.testing import sharpen_weights  # noqa: E402

TOLERANCE = 1e-4


# --------------------------------------------------------------------------- #
# Models
# --------------------------------------------------------------------------- #
def timm_swin_t(torch):
    import timm

    return timm.create_model("swin_tiny_patch4_window7_224", pretrained=False)


def torchvision_swin_t(torch):
    import torchvision

    return torchvision.models.swin_t(weights=None)


def transformers_swin_t(torch):
    import transformers

    # SwinConfig's defaults are microsoft/swin-tiny-patch4-window7-224's.
    return transformers.SwinModel(transformers.SwinConfig())


def timm_swinv2_t(torch):
    import timm

    return timm.create_model("swinv2_tiny_window8_256", pretrained=False)


def timm_maxvit_t(torch):
    import timm

    # TensorFlow-layout relative position bias (RelPosBiasTf), block and grid attention
    return timm.create_model("maxvit_tiny_tf_224", pretrained=False)


def timm_coatnet_0(torch):
    import timm

    # whole-map attention (Attention2d, NCHW) on the 14x14 and 7x7 stages
    return timm.create_model("coatnet_0_rw_224", pretrained=False)


def monai_swinunetr(torch):
    from monai.networks.nets import SwinUNETR

    # Swin-UNETR as in MONAI's BTCV tutorial: 96^3 single-channel volumes, feature
    # size 48, 14 output classes; 3-D windows 7x7x7 (the last stage's 6^3 map
    # shrinks them, and its blocks fall back: see python/README.md)
    return SwinUNETR(in_channels=1, out_channels=14, feature_size=48, spatial_dims=3)


MODELS: Dict[str, Callable] = {
    "timm": timm_swin_t,
    "torchvision": torchvision_swin_t,
    "transformers": transformers_swin_t,
}
#: Models run only when named in --models: SwinV2 (cosine attention, the
#: continuous position bias), on its own 256x256 input; MaxViT-T and CoAtNet-0
#: (timm's MaxViT family, issue 28); MONAI's Swin-UNETR on a 96^3 volume (issue 28).
EXTRA_MODELS: Dict[str, Callable] = {"timm-swinv2": timm_swinv2_t,
                                     "timm-maxvit": timm_maxvit_t,
                                     "timm-coatnet": timm_coatnet_0,
                                     "monai-swinunetr": monai_swinunetr}
IMAGE_SIZE: Dict[str, int] = {"timm-swinv2": 256}
#: One sample's shape where it is not a 3-channel square image of IMAGE_SIZE.
INPUT_SHAPE: Dict[str, tuple] = {"monai-swinunetr": (1, 96, 96, 96)}


def input_shape(name: str, batch: int) -> tuple:
    """The benchmark input's shape for model ``name``."""
    size = IMAGE_SIZE.get(name, 224)
    return (batch,) + INPUT_SHAPE.get(name, (3, size, size))
ALL_MODELS: Dict[str, Callable] = {**MODELS, **EXTRA_MODELS}


def random_model(torch, name: str):
    """Model ``name`` with random weights, in eval mode: every parameter redrawn
    (:func:`swin_opt.testing.sharpen_weights`, as the tests do), so that the
    comparison with the swapped copy can fail. The frameworks' inits leave
    norm scales at 1 and biases at 0, and timm's SwinV2 zero-initialises its
    post-norms: its attention would not reach the output at all."""
    torch.manual_seed(0)
    return sharpen_weights(ALL_MODELS[name](torch))


def first_tensor(y):
    """The model's main output: logits, or transformers' last_hidden_state."""
    if hasattr(y, "last_hidden_state"):
        return y.last_hidden_state
    return y


# --------------------------------------------------------------------------- #
# Kernel time inside the model and alone
# --------------------------------------------------------------------------- #
class KernelClock:
    """Times every ``Kernel._run`` (the kernel call, Python included) while on,
    and remembers each call's kernel and shapes to replay them alone."""

    def __init__(self):
        self.on = False
        self.seconds = 0.0
        self.calls: List[tuple] = []
        self._original = Kernel._run

    def install(self):
        clock = self

        def timed_run(kernel, given, out):
            if not clock.on:
                return clock._original(kernel, given, out)
            start = time.perf_counter()
            result = clock._original(kernel, given, out)
            clock.seconds += time.perf_counter() - start
            clock.calls.append((kernel, {k: v for k, v in given.items()}))
            return result

        Kernel._run = timed_run

    def uninstall(self):
        Kernel._run = self._original

    def alone(self, torch, calls, repeat: int) -> float:
        """Best total time of ``calls`` made back to back on fresh tensors of the same shapes."""
        replay = []
        for kernel, given in calls:
            fresh = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in given.items()}
            replay.append((kernel, fresh))
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            for kernel, given in replay:
                self._original(kernel, given, None)
            best = min(best, time.perf_counter() - start)
        return best


# --------------------------------------------------------------------------- #
def alternate(torch, fns: Dict[str, Callable], repeat: int) -> Dict[str, float]:
    """Best time of each function, called in turn ``repeat`` times."""
    best = {name: float("inf") for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def relative_error(torch, got, want) -> float:
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()


def check_output(torch, name: str, batch: int, original, x, got, want, row: dict) -> None:
    """Fail unless the swapped model's output ``got`` is the original's ``want``.

    The gate is 1e-4 relative.  Deep models with redrawn weights can round
    that much in float32 on their own (MaxViT-T: the original is ~1e-4 from
    float64), so where the two differ by more, both are compared with a
    float64 copy of the original instead (``f64_error_original`` /
    ``f64_error_swapped``): the swapped model passes when its error is at most
    ``max(1e-4, 2 * the original's)``, i.e. the kernels add no more than
    float32 rounding."""
    row["rel_error"] = relative_error(torch, got, want)
    if row["rel_error"] <= TOLERANCE:
        return
    exact = first_tensor(copy.deepcopy(original).double()(x.double()))
    row["f64_error_original"] = relative_error(torch, want.double(), exact)
    row["f64_error_swapped"] = relative_error(torch, got.double(), exact)
    if row["f64_error_swapped"] <= max(TOLERANCE, 2 * row["f64_error_original"]):
        return
    raise SystemExit(f"{name} batch {batch}: swapped output differs from the original by "
                     f"{row['rel_error']:.3g} (relative); from float64 "
                     f"{row['f64_error_swapped']:.3g} against the original's "
                     f"{row['f64_error_original']:.3g}")


def openvino_forward(torch, model, x, threads: int):
    """``model`` converted and compiled by OpenVINO for the CPU (f32, ``threads``),
    as a function of no arguments on ``x``, or None without openvino."""
    try:
        import openvino
    except ImportError:
        return None
    converted = openvino.convert_model(model, example_input=x)
    compiled = openvino.Core().compile_model(
        converted, "CPU", {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32",
                           "PERFORMANCE_HINT": "LATENCY"})
    request = compiled.create_infer_request()
    inputs = {0: x.numpy()}
    return lambda: request.infer(inputs)[0]


def bench_model(torch, name: str, batch: int, repeat: int, compile_too: bool,
                clock: KernelClock, openvino_too: bool = False) -> dict:
    from swin_opt.torch import patch_stats, swap_attention

    original = random_model(torch, name)
    swapped = copy.deepcopy(original)
    layers = swap_attention(swapped)
    x = torch.randn(input_shape(name, batch))
    row = {"model": name, "batch": batch, "layers": layers}
    with torch.inference_mode():
        start = time.perf_counter()
        got = first_tensor(swapped(x))
        row["first_call_s"] = time.perf_counter() - start  # compiles (or loads) kernels
        want = first_tensor(original(x))
        check_output(torch, name, batch, original, x, got, want, row)
        kernel_calls = sum(s["kernel_calls"] for s in patch_stats(swapped))
        row["kernel_calls_per_forward"] = kernel_calls
        fns = {"original": lambda: original(x), "swapped": lambda: swapped(x)}
        if openvino_too:
            ov = openvino_forward(torch, original, x, torch.get_num_threads())
            if ov is not None:
                ov_out = torch.from_numpy(ov())
                row["openvino_rel_error"] = relative_error(
                    torch, ov_out.reshape(want.shape), want)
                fns["openvino"] = ov
        times = alternate(torch, fns, repeat)
        row.update({f"{k}_ms": v * 1e3 for k, v in times.items()})
        row["speedup"] = times["original"] / times["swapped"]

        # Kernel time inside the swapped model (one forward, best of a few) and alone.
        clock.calls = []
        in_model = float("inf")
        for _ in range(max(2, repeat // 2)):
            clock.seconds, clock.calls, clock.on = 0.0, [], True
            swapped(x)
            clock.on = False
            in_model = min(in_model, clock.seconds)
        row["kernel_in_model_ms"] = in_model * 1e3
        row["kernel_alone_ms"] = clock.alone(torch, clock.calls, repeat) * 1e3
        row["kernel_calls"] = len(clock.calls)

    if compile_too:
        compiled_original = torch.compile(original)
        compiled_swapped = torch.compile(swapped)
        with torch.inference_mode():
            before = sum(s["kernel_calls"] for s in patch_stats(swapped))
            got = first_tensor(compiled_swapped(x))
            want = first_tensor(compiled_original(x))
            row["compiled_rel_error"] = relative_error(torch, got, want)
            row["compiled_kernel_calls"] = sum(s["kernel_calls"]
                                               for s in patch_stats(swapped)) - before
            times = alternate(torch, {"original": lambda: compiled_original(x),
                                      "swapped": lambda: compiled_swapped(x)}, repeat)
        row["compiled_original_ms"] = times["original"] * 1e3
        row["compiled_swapped_ms"] = times["swapped"] * 1e3
        row["compiled_speedup"] = times["original"] / times["swapped"]
    return row


def print_table(rows: List[dict], compile_too: bool) -> None:
    head = (f"{'model':<13}{'batch':>6}{'original':>11}{'swapped':>11}{'speed-up':>10}"
            f"{'kernels':>10}{'alone':>9}{'ratio':>7}")
    if compile_too:
        head += f"{'compiled':>11}{'+swapped':>11}{'speed-up':>10}"
    openvino = any("openvino_ms" in r for r in rows)
    if openvino:
        head += f"{'OpenVINO':>10}"
    print(head)
    print(f"{'':<13}{'':>6}{'ms':>11}{'ms':>11}{'':>10}{'in model':>10}{'ms':>9}")
    for r in rows:
        line = (f"{r['model']:<13}{r['batch']:>6}{r['original_ms']:>11.1f}{r['swapped_ms']:>11.1f}"
                f"{r['speedup']:>9.2f}x{r['kernel_in_model_ms']:>9.1f} {r['kernel_alone_ms']:>8.1f}"
                f"{r['kernel_in_model_ms'] / r['kernel_alone_ms']:>6.2f}x")
        if compile_too:
            line += (f"{r['compiled_original_ms']:>11.1f}{r['compiled_swapped_ms']:>11.1f}"
                     f"{r['compiled_speedup']:>9.2f}x")
        if openvino:
            line += f"{r.get('openvino_ms', float('nan')):>10.1f}"
        print(line)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(MODELS),
                   help="comma-separated, of %(default)s and " + ",".join(EXTRA_MODELS))
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument("--repeat", type=int, default=6, help="alternating rounds (best of)")
    p.add_argument("--compile", action="store_true", help="also time torch.compile (inductor)")
    p.add_argument("--openvino", action="store_true",
                   help="also time the original converted by OpenVINO (when installed)")
    p.add_argument("--json", type=Path, help="write the rows to this file")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        import torch
    except ImportError:
        print("bench/models.py needs torch", file=sys.stderr)
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    names = [m for m in args.models.split(",") if m]
    unknown = set(names) - set(ALL_MODELS)
    if unknown:
        print(f"unknown model(s) {sorted(unknown)}; choose from {list(ALL_MODELS)}",
              file=sys.stderr)
        return 2
    clock = KernelClock()
    clock.install()
    rows = []
    try:
        for name in names:
            try:
                ALL_MODELS[name](torch)
            except ImportError as exc:
                print(f"skipping {name}: {exc}", file=sys.stderr)
                continue
            for batch in args.batch:
                rows.append(bench_model(torch, name, batch, args.repeat, args.compile, clock,
                                        args.openvino))
                print(f"  {name} batch {batch}: {rows[-1]['speedup']:.2f}x", file=sys.stderr)
    finally:
        clock.uninstall()
    print(f"224x224 (SwinV2-T 256x256), f32, random weights; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; {platform.processor() or platform.machine()}; "
          f"best of {args.repeat} alternating rounds")
    print_table(rows, args.compile)
    if args.json:
        args.json.write_text(json.dumps({"torch": torch.__version__,
                                         "threads": torch.get_num_threads(),
                                         "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
