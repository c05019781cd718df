#!/usr/bin/env python3
"""GPU benchmark of the fused window-attention kernel (swin-aot --target=nvptx).

    python3 bench/gpu_bench.py [--dtype f16|bf16|f32] [--kernel warps|rows|both]
                               [--repeat 20] [--chip sm_90] [--record] [--model]
                               [--backward]

First measures the device's copy bandwidth (cuMemcpyDtoD of 1 GiB: read +
write), the yardstick of a kernel that is memory-bound at these sizes. Then,
for each configuration and kernel (warps: tensor cores; rows: a thread per
query row), prints the kernel time (CUDA events, median), the achieved
bandwidth (bytes of q, k, v read and out written, over the time; the table is
a few KiB and not counted) and its share of the copy bandwidth, GFLOP/s
(4 N^2 d per window-head) and, when PyTorch with CUDA is importable, the
ratio against torch.nn.functional.scaled_dot_product_attention with the bias
(and shift mask) passed as a float attention mask. Bounded to a few minutes;
exits with a clear message where no GPU is present. ``--record`` only
compiles every kernel it would run, for every dtype (no GPU needed; see
scripts/device/record.py), the model's too where torch and timm import.

``--backward``: the training figures instead, per configuration: the kernel
compiled with its backward (``grad=True``, the warp kernel), the forward's
and the backward's times (dq, dk, dv and the table's gradient), their ratio
(issue 26's target: the backward <= 2.5x the forward), and forward +
backward against the same step in PyTorch: SDPA with the bias gathered from
a table that requires grad (plus the shift mask), and FlexAttention
(``torch.compile``d) with a ``score_mod`` that reads the learnable table.
With ``--record`` the backward's kernels are recorded too.

``--model``: the model-level figures instead: timm's swin_tiny_patch4_window7_224
(random weights), inference at batch 128 (``torch.inference_mode``) under
float16 and bfloat16 autocast and in float32 with TF32 allowed (``tf32``:
``torch.backends.cuda.matmul.allow_tf32``, for both models; the swapped
one's attention then runs the warp kernel on bf16 terms), and a training
step at batch 64 (bfloat16
autocast, cross-entropy, backward, SGD), the original model against the same
model swapped (``swin_opt.torch.swap_attention``: the GPU kernels run by the
operators' CUDA implementations, the backward's in training), eager and with
``--compiled`` also under ``torch.compile``: ms per forward or step (CUDA
events, median), images/s, the speed-up, the largest difference of the
logits (of the first step's loss in training), and the swapped model's
kernel and fallback calls. ``--device cpu --model-batch 2 --train-batch 2``
runs the same code on the CPU (its test, without a GPU).
"""

import argparse
import contextlib
import sys
from pathlib import Path
from typing import NamedTuple, Optional, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from swin_opt import cuda  # noqa: E402
from swin_opt import reference as ref  # noqa: E402
from swin_opt import testing as T  # noqa: E402

class Config(NamedTuple):
    """One timed configuration: ``windows`` (window, head) items of ``heads``, the
    feature map (None: no mask) and shift, or BEiT's global attention with a class
    token (``window`` its patch grid, one "window" per image); ``cosine``: SwinV2's
    cosine attention."""

    label: str
    windows: int
    heads: int
    window: Tuple[int, ...]
    head_dim: int
    resolution: Optional[Tuple[int, ...]] = None
    shift: int = 0
    class_token: bool = False
    cosine: bool = False

    @property
    def tokens(self) -> int:
        return int(np.prod(self.window)) + int(self.class_token)

    def bias(self, table):
        """The ``[heads, N, N]`` bias of ``table`` (float64)."""
        lookup = ref.class_token_lookup if self.class_token else ref.lookup
        return lookup(table, self.window)

    @property
    def table_rows(self) -> int:
        return ref.table_rows(self.window) + 3 * int(self.class_token)


# Swin-T at 224x224 (56x56, 28x28, 14x14 token maps), larger windows, BEiT-base
# (a 14x14 patch grid and the class token, N = 197, at batch 32) and SwinV2-T at
# 256x256 (64x64 tokens in 8x8 windows, cosine attention).
CONFIGS = [
    Config("swin-t stage1 b128", 128 * 64, 3, (7, 7), 32, (56, 56), 3),
    Config("swin-t stage1 b32", 32 * 64, 3, (7, 7), 32, (56, 56), 3),
    Config("swin-t stage2 b32", 32 * 16, 6, (7, 7), 32, (28, 28), 3),
    Config("swin-t stage3 b32", 32 * 4, 12, (7, 7), 32),
    Config("window 8 (N=64)", 2048, 3, (8, 8), 32),
    Config("window 12 (N=144)", 1024, 4, (12, 12), 32),
    Config("window 16 (N=256)", 512, 4, (16, 16), 32),
    Config("beit-base b32", 32, 12, (14, 14), 64, class_token=True),
    Config("swinv2-t stage1 b128", 128 * 64, 3, (8, 8), 32, (64, 64), 4, cosine=True),
]


def _torch_events_ms(fn, repeat, warmup=1):
    """Median milliseconds of ``fn()`` on torch's current stream, by CUDA events,
    after ``warmup`` untimed calls."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repeat):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return float(np.median(times))


def torch_training_steps(windows, heads, window, d, mask, dtype, device="cuda"):
    """One attention step, forward + backward, in PyTorch with a learnable bias
    table, per path: ``{"SDPA": step, "FlexAttention": step}`` (callables). The
    table ``[T, heads]`` (float32, requires grad) is gathered by Swin's relative
    index into the bias each step (plus the shift mask ``[nW, N, N]`` when
    given), so that its gradient is part of the backward as in our kernel's."""
    import torch

    tdtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[dtype]
    n = int(np.prod(window))
    q, k, v = (torch.randn(windows, heads, n, d, device=device, dtype=tdtype,
                           requires_grad=True) for _ in range(3))
    dout = torch.randn(windows, heads, n, d, device=device, dtype=tdtype)
    table = torch.randn(ref.table_rows(window), heads, device=device, requires_grad=True)
    index = torch.as_tensor(ref.relative_index(window), device=device)
    shift = None if mask is None else torch.as_tensor(mask, device=device, dtype=torch.float32)
    nw = 1 if shift is None else shift.shape[0]

    def sdpa_step():
        bias = table[index].permute(2, 0, 1)  # [heads, N, N]
        if shift is None:
            attn = bias.expand(windows, heads, n, n)
        else:  # window w of an image takes mask w: windows are image-major
            attn = (bias[None, None] + shift[None, :, None]).expand(
                windows // nw, nw, heads, n, n).reshape(windows, heads, n, n)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attn.to(tdtype))
        out.backward(dout)

    def score_mod(score, b, h, q_idx, kv_idx):
        score = score + table[index[q_idx, kv_idx], h]
        if shift is not None:
            score = score + shift[b % nw, q_idx, kv_idx]
        return score

    flex = None

    def flex_step():
        nonlocal flex
        if flex is None:
            from torch.nn.attention.flex_attention import flex_attention
            flex = torch.compile(flex_attention)
        flex(q, k, v, score_mod=score_mod).backward(dout)

    return {"SDPA": sdpa_step, "FlexAttention": flex_step}


def torch_training_ms(windows, heads, window, d, mask, dtype, repeat):
    """:func:`torch_training_steps` timed on the GPU: ``{path: ms}`` (None for a
    path that fails, with its error printed), or None without torch on a GPU."""
    try:
        import torch
        if not torch.cuda.is_available():
            return None
    except ImportError:
        return None
    results = {}
    for path, step in torch_training_steps(windows, heads, window, d, mask, dtype).items():
        try:
            results[path] = _torch_events_ms(step, repeat)
        except Exception as exc:  # a backend that refuses the configuration: say so, go on
            print(f"gpu_bench: {path} training step failed: {type(exc).__name__}: {exc}")
            results[path] = None
    return results


def training_figures(args):
    """The ``--backward`` table (see the module docstring)."""
    name = cuda.available()
    if name is None:
        print("gpu_bench: no CUDA driver or GPU on this machine; nothing to measure.")
        return 0
    driver = cuda.Driver()
    np_type = {"f16": np.float16, "bf16": np.uint16, "f32": np.float32}[args.dtype]
    itemsize = np.dtype(np_type).itemsize
    print(f"device: {driver.name}, dtype {args.dtype}; forward and backward (grad=True, warps)")
    print(f"{'config':22} {'fwd ms':>8} {'bwd ms':>8} {'bwd/fwd':>8} {'f+b ms':>8} "
          f"{'SDPA f+b':>9} {'vs SDPA':>8} {'Flex f+b':>9} {'vs Flex':>8}")
    rng = np.random.default_rng(0)
    # (the torch training steps gather Swin's bias: BEiT's configuration is timed
    # forward only; the cosine form has no backward kernel)
    for label, windows, heads, window, d, resolution, shift, *_ in (
            c for c in CONFIGS if not c.class_token and not c.cosine):
        n = int(np.prod(window))
        rows = ref.table_rows(window)
        q, k, v, dout = (T.to_storage(rng.standard_normal((windows, heads, n, d)).astype(np.float32),
                                      args.dtype) for _ in range(4))
        table = T.to_storage(rng.standard_normal((rows, heads)).astype(np.float32), args.dtype)
        inputs = [driver.to_device(a) for a in (q, k, v, table, dout)]
        out, dq, dk, dv = (driver.alloc(windows * heads * n * d * itemsize) for _ in range(4))
        dtable = driver.alloc(rows * heads * 4)
        kernel = compile_kernel(window, heads, d, resolution, shift, args.dtype, args.chip,
                                "warps", grad=True)
        fwd = driver.time_ms(lambda: kernel(*inputs[:4], out, windows), repeat=args.repeat)
        bwd = driver.time_ms(lambda: kernel.backward(*inputs[:4], out, inputs[4], dq, dk, dv,
                                                     dtable, windows), repeat=args.repeat)
        mask = ref.shift_mask(resolution, window, (shift, shift)) if shift else None
        theirs = torch_training_ms(windows, heads, window, d, mask, args.dtype, args.repeat) or {}

        def versus(key):
            ms = theirs.get(key)
            return (f"{ms:9.3f} {ms / (fwd + bwd):7.2f}x" if ms else f"{'n/a':>9} {'n/a':>8}")

        print(f"{label:22} {fwd:8.3f} {bwd:8.3f} {bwd / fwd:7.2f}x {fwd + bwd:8.3f} "
              f"{versus('SDPA')} {versus('FlexAttention')}")
        for p in inputs + [out, dq, dk, dv, dtable]:
            driver.free(p)
    return 0


def torch_sdpa_ms(windows, heads, n, d, bias, mask, dtype, repeat, cosine=False):
    """SDPA's median ms with the bias (and shift mask) as a float mask; ``cosine``:
    q and k normalized first, in the timed call (SwinV2 on SDPA)."""
    try:
        import torch
        if not torch.cuda.is_available():
            return None
    except ImportError:
        return None
    tdtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[dtype]
    q, k, v = (torch.randn(windows, heads, n, d, device="cuda", dtype=tdtype) for _ in range(3))
    attn_mask = torch.as_tensor(bias, device="cuda", dtype=tdtype)[None]
    if mask is not None:
        nw = mask.shape[0]
        attn_mask = (attn_mask + torch.as_tensor(mask, device="cuda", dtype=tdtype)[:, None]
                     ).repeat(windows // nw, 1, 1, 1)
    functional = torch.nn.functional
    if cosine:
        scale = torch.linspace(10, 100, heads, device="cuda", dtype=tdtype)[:, None, None]
        return _torch_events_ms(lambda: functional.scaled_dot_product_attention(
            functional.normalize(q, dim=-1) * scale, functional.normalize(k, dim=-1), v,
            attn_mask=attn_mask, scale=1.0), repeat)
    return _torch_events_ms(
        lambda: functional.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask), repeat)


MODEL = "swin_tiny_patch4_window7_224"
MODEL_BATCH = 128
#: The inference rows: autocast in f16 and bf16, and float32 with TF32 allowed.
MODEL_DTYPES = ("f16", "bf16", "tf32")
#: Issue 26's training step: bf16 autocast, batch 64.
TRAIN_BATCH = 64
TRAIN_DTYPE = "bf16"


def _torch_dtype(name):
    import torch

    return {"f16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32}[name]


@contextlib.contextmanager
def _tf32_allowed(allowed):
    """``torch.backends.cuda.matmul.allow_tf32`` set to ``allowed`` within."""
    import torch

    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allowed
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def _model(torch_dtype=None):
    """swin_tiny with random weights (eval), or None without torch and timm."""
    try:
        import timm
        import torch
    except ImportError:
        return None
    torch.manual_seed(0)
    model = timm.create_model(MODEL, pretrained=False).eval()
    return model if torch_dtype is None else model.to(torch_dtype)


def record_model_kernels(chip):
    """Build the GPU kernels the swapped model needs under each autocast dtype, here,
    without a GPU: the model runs once on the CPU in that dtype (autocast's); the
    training step's dtype also gets the backward kernels."""
    try:
        import torch  # noqa: F401
        from swin_opt import torch as st
    except ImportError:
        print("gpu_bench: no torch: the model's kernels are not recorded")
        return
    for dtype in MODEL_DTYPES:
        model = _model(_torch_dtype(dtype))
        if model is None:
            print("gpu_bench: no timm: the model's kernels are not recorded")
            return
        st.swap_attention(model, mlp=False)  # (the attention's kernels: the MLPs' are the CPU's)
        with _tf32_allowed(dtype == "tf32"):
            st.warmup(model, (1, 3, 224, 224), chip=chip, progress=False,
                      grad=dtype == TRAIN_DTYPE)


def _timer(device, repeat):
    """``time(fn) -> ms``: CUDA events (median) on a GPU; on the CPU (the ``--device
    cpu`` check of this code) the median of wall-clock times."""
    import time

    if device != "cpu":
        return lambda fn: _torch_events_ms(fn, repeat, warmup=2)

    def time_ms(fn):
        fn()
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1e3)
        return float(np.median(times))

    return time_ms


def model_figures(repeat, device="cuda", batch=MODEL_BATCH, train_batch=TRAIN_BATCH,
                  compiled=False, dtypes=MODEL_DTYPES):
    """The ``--model`` tables (see the module docstring): inference per autocast
    dtype and the training step, the original against the swapped model, eager and
    (``compiled``) under ``torch.compile``."""
    import torch
    from swin_opt import torch as st

    if device != "cpu" and not torch.cuda.is_available():
        print("gpu_bench: torch sees no CUDA device; nothing to measure.")
        return 0
    model = _model()
    if model is None:
        print("gpu_bench: --model needs timm")
        return 0
    model = model.to(device)
    time_ms = _timer(device, repeat)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch, 3, 224, 224, generator=gen).to(device)
    modes = [("eager", lambda m: m)]
    if compiled:
        modes.append(("compiled", torch.compile))

    def calls():
        stats = st.patch_stats(model)
        reasons = sorted({r for s in stats for r in s["fallback_reasons"]})
        return (f"{sum(s['kernel_calls'] for s in stats)}/"
                f"{sum(s['fallback_calls'] for s in stats)}"), reasons

    def compare(label, run, items):
        """A row per mode of ``items`` images: ``run(wrap)`` -> (the timed function,
        its first result), for the original and then the swapped model."""
        for mode, wrap in modes:
            st.restore_attention(model)
            fn, want = run(wrap)
            original_ms = time_ms(fn)
            st.swap_attention(model)
            fn, got = run(wrap)
            swapped_ms = time_ms(fn)
            count, reasons = calls()
            diff = (got.float() - want.float()).abs().max().item()
            print(f"{label:18} {mode:8} {original_ms:12.2f} {swapped_ms:11.2f} "
                  f"{items * 1e3 / original_ms:11.0f} {items * 1e3 / swapped_ms:11.0f} "
                  f"{original_ms / swapped_ms:8.2f}x {diff:11.3g} {count:>22}")
            for reason in reasons:
                print(f"  fallback: {reason}")
            if mode == "compiled":  # the next row compiles its own graphs
                torch._dynamo.reset()

    def inference(dtype):
        """Under autocast in ``dtype``, or float32 without it."""
        def run(wrap):
            forward_model = wrap(model)

            def forward():
                with torch.inference_mode(), torch.autocast(
                        device, dtype=dtype, enabled=dtype != torch.float32):
                    return forward_model(x)
            return forward, forward()
        return run

    def training(dtype):
        """One SGD step (forward under autocast, cross-entropy, backward, update)
        from the same weights each time: a copy is restored before the step whose
        loss is compared."""
        xt = torch.randn(train_batch, 3, 224, 224, generator=gen).to(device)
        labels = torch.randint(0, 1000, (train_batch,), generator=gen).to(device)
        weights = {k: v.clone() for k, v in model.state_dict().items()}

        def run(wrap):
            model.load_state_dict(weights)
            model.train()
            step_model = wrap(model)
            optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)

            def step():
                optimizer.zero_grad(set_to_none=True)
                with torch.autocast(device, dtype=dtype):
                    loss = torch.nn.functional.cross_entropy(step_model(xt), labels)
                loss.backward()
                optimizer.step()
                return loss.detach()
            loss = step()
            model.load_state_dict(weights)
            return step, loss
        return run

    where = torch.cuda.get_device_name() if device != "cpu" else "CPU"
    print(f"device: {where}; {MODEL}, inference batch {batch}, training step batch "
          f"{train_batch} ({TRAIN_DTYPE} autocast, SGD)")
    print(f"{'autocast':18} {'mode':8} {'original ms':>12} {'swapped ms':>11} "
          f"{'img/s orig':>11} {'img/s swap':>11} {'speed-up':>9} {'max |diff|':>11} "
          f"{'kernel/fallback calls':>22}")
    for name in dtypes:
        with _tf32_allowed(name == "tf32"):
            compare(f"{name} inference", inference(_torch_dtype(name)), batch)
    compare(f"train {TRAIN_DTYPE} step", training(_torch_dtype(TRAIN_DTYPE)), train_batch)
    model.eval()
    return 0


def compile_kernel(window, heads, d, resolution, shift, dtype, chip, which, grad=False,
                   class_token=False, cosine=False):
    """``which``: "warps", "rows", "warps1": the warp kernel one warp a block,
    in dynamic shared memory where it needs it (BEiT-base: 66,800 bytes, which
    the default gives the rows), or for f32 "bf16x3" / "bf16x6": the warp kernel
    on the operands' bf16 terms (``f32_mma``; "bf16x3" is what the swap runs where
    the user allows TF32)."""
    options = {"grad": True} if grad else {}
    if class_token:
        options["class_token"] = True
    if cosine:
        options["cosine"] = True
    if which == "warps1":
        which, options["warps_per_block"] = "warps", 1
    if which in F32_MMA_KERNELS:
        which, options["f32_mma"] = "warps", which
    return cuda.compile_gpu(window, heads, d, resolution=resolution,
                            shift=(shift, shift) if shift else None, dtype=dtype, chip=chip,
                            kernel=which, **options)


#: The f32 warp kernels (``f32_mma``), timed beside f32's rows.
F32_MMA_KERNELS = ("bf16x3", "bf16x6")


def _kernels_of(config, kernels, dtype):
    """The kernels timed for ``config``: BEiT-base's tensor-core blocks too, and
    for f32 (whose "warps" is the rows) the warp kernel on bf16 terms."""
    if "warps" not in kernels:
        return kernels
    extra = ["warps1"] if config.class_token else []
    if dtype == "f32":
        extra += list(F32_MMA_KERNELS)
    return kernels + extra


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dtype", default="f16", choices=["f16", "bf16", "f32"])
    parser.add_argument("--kernel", default="both", choices=["warps", "rows", "both"])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--chip", default="sm_90")
    parser.add_argument("--record", action="store_true",
                        help="compile the kernels of every dtype, run nothing")
    parser.add_argument("--backward", action="store_true",
                        help="the training figures: forward and backward against SDPA and "
                             "FlexAttention with a learnable table")
    parser.add_argument("--model", action="store_true",
                        help=f"the model-level figures ({MODEL}, inference at batch "
                             f"{MODEL_BATCH}, a training step at {TRAIN_BATCH})")
    parser.add_argument("--compiled", action="store_true",
                        help="--model: also both models under torch.compile")
    parser.add_argument("--device", default="cuda",
                        help="--model: cpu checks this code without a GPU (small batches)")
    parser.add_argument("--model-batch", type=int, default=MODEL_BATCH)
    parser.add_argument("--train-batch", type=int, default=TRAIN_BATCH)
    parser.add_argument("--model-dtypes", default=",".join(MODEL_DTYPES),
                        help="--model: the inference rows' autocast dtypes")
    args = parser.parse_args()
    kernels = ["warps", "rows"] if args.kernel == "both" else [args.kernel]
    if args.record:
        for dtype in ("f16", "bf16", "f32"):
            for config in CONFIGS:
                _, _, heads, window, d, resolution, shift, class_token, cosine = config
                for which in _kernels_of(config, kernels, dtype):
                    compile_kernel(window, heads, d, resolution, shift, dtype, args.chip, which,
                                   class_token=class_token, cosine=cosine)
                if args.backward and not class_token and not cosine:
                    compile_kernel(window, heads, d, resolution, shift, dtype, args.chip,
                                   "warps", grad=True)
        record_model_kernels(args.chip)
        return 0
    if args.backward:
        return training_figures(args)
    if args.model:
        return model_figures(args.repeat, args.device, args.model_batch, args.train_batch,
                             args.compiled, tuple(args.model_dtypes.split(",")))
    name = cuda.available()
    if name is None:
        print("gpu_bench: no CUDA driver or GPU on this machine; nothing to measure.")
        return 0
    driver = cuda.Driver()
    # Storage: bf16 as raw uint16 bits (the kernels take bits).
    np_type = {"f16": np.float16, "bf16": np.uint16, "f32": np.float32}[args.dtype]

    def storage(x):
        return T.to_storage(x.astype(np.float32), args.dtype)

    gib = 1 << 30
    src, dst = driver.alloc(gib), driver.alloc(gib)
    copy_ms = driver.time_ms(lambda: driver.copy_device(dst, src, gib), repeat=args.repeat)
    copy_gbs = 2 * gib / copy_ms / 1e6
    driver.free(src)
    driver.free(dst)
    print(f"device: {driver.name}, dtype {args.dtype}; copy bandwidth {copy_gbs:.0f} GB/s")
    print(f"{'config':22} {'kernel':6} {'ms':>9} {'GB/s':>8} {'% copy':>7} {'GFLOP/s':>9} "
          f"{'vs SDPA':>8}")
    rng = np.random.default_rng(0)
    for config in CONFIGS:
        label, windows, heads, window, d, resolution, shift, class_token, cosine = config
        n = config.tokens
        q, k, v = (storage(rng.standard_normal((windows, heads, n, d))) for _ in range(3))
        table = storage(rng.standard_normal((config.table_rows, heads)))
        # The cosine kernels' logit scales (float32, after the table).
        logit_scale = [np.log(np.linspace(10, 100, heads)).astype(np.float32)] if cosine else []
        pointers = [driver.to_device(a) for a in (q, k, v, table, *logit_scale)]
        out = driver.alloc(windows * n * heads * d * np.dtype(np_type).itemsize)
        nbytes = 4 * windows * heads * n * d * np.dtype(np_type).itemsize
        flops = 4.0 * n * n * d * windows * heads
        bias = config.bias(T.to_float64(table, args.dtype))
        mask = ref.shift_mask(resolution, window, (shift, shift)) if shift else None
        sdpa = torch_sdpa_ms(windows, heads, n, d, bias, mask, args.dtype, args.repeat,
                             cosine=cosine)
        for which in _kernels_of(config, kernels, args.dtype):
            kernel = compile_kernel(window, heads, d, resolution, shift, args.dtype, args.chip,
                                    which, class_token=class_token, cosine=cosine)
            ms = driver.time_ms(lambda: kernel(*pointers, out, windows), repeat=args.repeat)
            gbs = nbytes / ms / 1e6
            ratio = f"{sdpa / ms:7.2f}x" if sdpa else "    n/a"
            print(f"{label:22} {which:6} {ms:9.3f} {gbs:8.1f} {100 * gbs / copy_gbs:6.1f}% "
                  f"{flops / ms / 1e6:9.1f} {ratio:>8}")
        for p in pointers + [out]:
            driver.free(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
