"""Building a swapped model's kernels ahead of time and concurrently:
:func:`warmup` and :func:`build_kernels`.

Without it, each distinct kernel configuration is built by ``swin-aot`` the
first time a patched module meets it, one after the other, during the first
forward (about 1-3 s each; ``swin_base_patch4_window12_384`` needs 12 s).
:func:`warmup` runs one dry forward that only *records* the configurations
(the patched modules run their original forward meanwhile), then builds the
missing ones in a thread pool of ``swin-aot`` processes.

Progress: one line on stderr, rewritten in place, when ``progress=True``;
the default is ``$SWIN_OPT_PROGRESS`` (``1``/``0``), else whether stderr is
a terminal.  Every build is also logged (logger ``swin_opt``, INFO).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Iterable, List, Optional

from . import ops as _ops
from .tensors import _torch

log = logging.getLogger("swin_opt")


def progress_enabled(progress: Optional[bool] = None) -> bool:
    """``progress`` if given, else ``$SWIN_OPT_PROGRESS``, else whether stderr is a terminal."""
    if progress is not None:
        return bool(progress)
    env = os.environ.get("SWIN_OPT_PROGRESS", "").strip().lower()
    if env:
        return env not in ("0", "false", "no", "off")
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def recording():
    """Within the block, patched modules record the kernel configurations they need
    (and run their original forward) instead of building kernels.  Yields the list
    of recorded config strings (filled when the block exits)."""
    keys: List[str] = []
    with _ops._lock:
        if _ops._recording is not None:
            raise RuntimeError("swin_opt: warmup is already recording in this process")
        _ops._recording = {}
    try:
        yield keys
    finally:
        with _ops._lock:
            keys.extend(_ops._recording)
            _ops._recording = None


def build_kernels(keys: Iterable[str], *, workers: Optional[int] = None,
                  progress: Optional[bool] = None) -> int:
    """Build (or load from the disk cache) the kernels named by ``keys`` (op config
    strings) concurrently; returns how many were not loaded in this process yet.
    Errors are not raised here: a configuration that fails to build is reported
    (warning) when a module first needs it, and that module falls back."""
    todo = [k for k in dict.fromkeys(keys) if k not in _ops._kernels]
    if not todo:
        return 0
    show = progress_enabled(progress)
    workers = max(1, min(len(todo), workers or os.cpu_count() or 1))
    start = time.perf_counter()
    done = 0
    failed = 0
    lock = threading.Lock()

    def line(final=False):
        text = (f"swin_opt: building kernels {done}/{len(todo)} ({workers} parallel, "
                f"{time.perf_counter() - start:.1f} s)")
        if failed:
            text += f", {failed} failed"
        sys.stderr.write("\r" + text + ("\n" if final else ""))
        sys.stderr.flush()

    def one(key):
        t = time.perf_counter()
        _ops.kernel_for(key)
        return time.perf_counter() - t

    if show:
        line()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="swin-aot") as pool:
        futures = {pool.submit(one, key): key for key in todo}
        for fut in as_completed(futures):
            with lock:
                done += 1
                try:
                    secs = fut.result()
                    log.info("swin_opt: kernel ready (%.1f s): %s", secs, futures[fut])
                except Exception as exc:  # reported again, as a fallback, on first use
                    failed += 1
                    log.warning("swin_opt: kernel build failed: %s: %s", futures[fut], exc)
                if show:
                    line()
    if show:
        line(final=True)
    return len(todo)


def warmup(model, example, *, workers: Optional[int] = None,
           progress: Optional[bool] = None) -> int:
    """Build every kernel a swapped ``model`` needs for inputs like ``example``, concurrently.

    ``example``: an input tensor, a tuple/list of positional inputs, a dict of
    keyword inputs, or an input *shape* (a tuple of ints: a random tensor of
    the model's parameter dtype is made).  One dry forward under
    :func:`torch.inference_mode` records the configurations (the patched
    modules run their original forward during it), then the missing kernels
    are built by ``workers`` (default: CPU count) ``swin-aot`` processes at
    once.  Returns the number of kernels built or loaded.  Run it once per
    input shape (kernels are per feature-map size); calls after it find
    every kernel ready.
    """
    torch = _torch()
    if isinstance(example, (tuple, list)) and example and all(
            isinstance(d, int) and not isinstance(d, bool) for d in example):
        param = next(iter(model.parameters()), None)
        dtype = param.dtype if param is not None and param.is_floating_point() else None
        example = torch.randn(tuple(example), dtype=dtype)
    with recording() as keys:
        with torch.inference_mode():
            if isinstance(example, dict):
                model(**example)
            elif isinstance(example, (tuple, list)):
                model(*example)
            else:
                model(example)
    return build_kernels(keys, workers=workers, progress=progress)
