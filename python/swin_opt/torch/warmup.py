"""Building a swapped model's kernels ahead of time and concurrently:
:func:`warmup` and :func:`build_kernels`.

Without it, each distinct kernel configuration is built by ``swin-aot`` the
first time a patched module meets it, one after the other, during the first
forward (about 1-3 s each; ``swin_base_patch4_window12_384`` needs 12 s).
:func:`warmup` runs one dry forward of a single item that only *records* the
configurations (the patched modules run their original forward meanwhile)
and builds each one, as soon as it is met, in a thread pool of ``swin-aot``
processes (so the builds overlap each other and the dry forward).

Progress: one line on stderr, rewritten in place, when ``progress=True``;
the default is ``$SWIN_OPT_PROGRESS`` (``1``/``0``), else whether stderr is
a terminal.  Otherwise each build says so in a line of its own, as every
build does (:func:`swin_opt.log.info`: the ``swin_opt`` logger at INFO, or
stderr when the application configured no logging).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable, Optional

from .. import log
from . import ops
from .tensors import require_torch

try:
    import torch
except ImportError:  # swin_opt.torch imports without PyTorch; its entry points need it
    torch = None


class _Builder:
    """Builds kernels in a thread pool of ``swin-aot`` processes as keys are submitted,
    with a progress line on stderr (instead of a line per build) when ``show``."""

    def __init__(self, workers: Optional[int], progress: Optional[bool]):
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.show = log.progress_enabled(progress)
        self._quiet = contextlib.ExitStack()
        if self.show:
            self._quiet.enter_context(log.quiet())
        self.pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="swin-aot")
        self.futures = {}
        self.lock = threading.Lock()
        self.done = self.failed = 0
        self.start = time.perf_counter()

    def submit(self, key: str, grad: bool = False) -> None:
        """Build ``key``'s kernel (and, with ``grad``, its backward's)."""
        for one in (key, ops.grad_key(key)) if grad else (key,):
            if ops.loaded(one) or one in self.futures:
                continue
            fut = self.pool.submit(self._one, one)
            with self.lock:
                self.futures[one] = fut
            self._line()

    def _one(self, key):
        try:
            ops.kernel_for(key)
        except Exception as exc:  # reported again, as a fallback, on first use
            log.logger.warning("swin_opt: kernel build failed: %s: %s", key, exc)
            with self.lock:
                self.failed += 1
        with self.lock:
            self.done += 1
        self._line()

    def _line(self, final=False):
        if not self.show:
            return
        with self.lock:
            text = (f"swin_opt: building kernels {self.done}/{len(self.futures)} "
                    f"({self.workers} parallel, {time.perf_counter() - self.start:.1f} s)")
            if self.failed:
                text += f", {self.failed} failed"
            sys.stderr.write("\r" + text + ("\n" if final else ""))
            sys.stderr.flush()

    def wait(self) -> int:
        self.pool.shutdown(wait=True)
        if self.futures:
            self._line(final=True)
        self._quiet.close()
        return len(self.futures)


def build_kernels(keys: Iterable[str], *, workers: Optional[int] = None,
                  progress: Optional[bool] = None) -> int:
    """Build (or load from the disk cache) the kernels named by ``keys`` (op config
    strings) concurrently; returns how many were not loaded in this process yet.
    Errors are not raised here: a configuration that fails to build is reported
    (warning) when a module first needs it, and that module falls back."""
    builder = _Builder(workers, progress)
    for key in keys:
        builder.submit(key)
    return builder.wait()


def _first_item(example):
    """Kernel configurations do not depend on the batch: dry-run one item of it."""
    if isinstance(example, torch.Tensor):
        return example[:1] if example.dim() >= 1 and example.shape[0] > 1 else example
    if isinstance(example, dict):
        return {k: _first_item(v) for k, v in example.items()}
    if isinstance(example, (tuple, list)):
        return type(example)(_first_item(v) for v in example)
    return example


def warmup(model, example, *, workers: Optional[int] = None,
           progress: Optional[bool] = None, chip: Optional[str] = None,
           grad: bool = False) -> int:
    """Build every kernel a swapped ``model`` needs for inputs like ``example``, concurrently.

    ``example``: an input tensor, a tuple/list of positional inputs, a dict of
    keyword inputs, or an input *shape* (a tuple of ints: a random tensor of
    the model's parameter dtype is made).  One dry forward of a single item
    (the batch does not change the kernels) under :func:`torch.no_grad` (not
    inference_mode: a framework may cache a tensor its first forward makes, as
    transformers does BEiT's relative index, and an inference tensor there would
    break later training) records the configurations; the patched modules run their original
    forward during it, while the kernels met so far are built by ``workers``
    (default: CPU count) ``swin-aot`` processes at once.  Returns the number
    of kernels built or loaded from the disk cache.  Run it once per input
    size (kernels are per feature-map size); calls after it find every
    kernel ready.  ``chip`` (``"sm_90"``): the GPU kernels of that chip instead,
    built without it, with the model on the CPU in the dtype the GPU will run
    (under CUDA autocast: the autocast dtype), e.g. on a build host. ``grad``:
    also what training runs: a second dry forward with autograd recording
    (where a patch picks another form, such as SwinV2's plain kernel on q and k
    normalized in torch rather than its cosine kernel) and each kernel it meets
    with its backward (``grad=True``; a configuration without one is reported,
    and trains through torch).
    """
    require_torch()
    if isinstance(example, (tuple, list)) and example and all(
            isinstance(d, int) and not isinstance(d, bool) for d in example):
        param = next(iter(model.parameters()), None)
        dtype = param.dtype if param is not None and param.is_floating_point() else None
        example = torch.randn((1,) + tuple(example)[1:], dtype=dtype,
                              device=None if param is None else param.device)
    example = _first_item(example)
    builder = _Builder(workers, progress)
    # (grad mode, the kernels' backward too) of each dry forward
    passes = [(torch.no_grad, False)] + ([(torch.enable_grad, True)] if grad else [])
    try:
        for mode, with_backward in passes:
            with ops.recording(on_key=lambda key: builder.submit(key, with_backward),
                               chip=chip), mode():
                if isinstance(example, dict):
                    model(**example)
                elif isinstance(example, (tuple, list)):
                    model(*example)
                else:
                    model(example)
    finally:
        n = builder.wait()
    return n
