"""What the patches need to know about ``torch.compile`` tracing: the functions
dynamo runs once, eagerly, at trace time (:func:`trace_constant`), and whether
a tensor is a fake one (non-strict ``torch.export``).

A function marked :func:`trace_constant` does a data-dependent check or a
kernel build on real module buffers (shift-mask identification, the relative
position index, a kernel's configuration); under ``torch.compile`` dynamo
calls it at trace time and keeps its result as a constant of the graph
(``torch.compiler.assume_constant_result``). Like every such assumption, a
change of the buffers' *contents* after compiling is not seen (call
``torch.compiler.reset()``).

The marks are applied by :func:`apply_trace_constants` (from
:func:`swin_opt.torch.ops.register`, when the first patch is made), not at
import: applying one imports ``torch._dynamo``, which takes a while and is
not needed by eager use.
"""

from __future__ import annotations

import threading
from typing import Callable, List

try:
    import torch
except ImportError:  # swin_opt.torch imports without PyTorch; its entry points need it
    torch = None

__all__ = ["trace_constant", "apply_trace_constants", "is_fake"]

_lock = threading.Lock()
_constants: List[Callable] = []
_applied = False


def trace_constant(fn: Callable) -> Callable:
    """Mark ``fn`` to run at trace time only under ``torch.compile`` (see the module
    docstring); returns ``fn``."""
    with _lock:
        _constants.append(fn)
        if _applied:
            torch.compiler.assume_constant_result(fn)
    return fn


def apply_trace_constants() -> None:
    """Apply :func:`trace_constant`'s marks (once; later marks are applied as they come)."""
    global _applied
    with _lock:
        if not _applied:
            for fn in _constants:
                torch.compiler.assume_constant_result(fn)
            _applied = True


def is_fake(t) -> bool:
    """Whether ``t`` is a fake tensor (non-strict ``torch.export``): no contents to read."""
    try:
        from torch._subclasses.fake_tensor import is_fake as _is_fake
    except ImportError:  # pragma: no cover
        return False
    return bool(_is_fake(t))
