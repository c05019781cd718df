"""Why a patched module does not use its kernel: :class:`Fallback`, raised by
the patch code (the module then runs its original forward), and
:class:`KernelUnavailable`, raised to the caller instead when the model was
swapped with ``fallback=False``.

A fallback is said once per reason and process (:func:`warn_fallback`, a
:class:`FallbackWarning`): a swapped model that runs some of its layers
without the kernel should not do so in silence, nor warn on every call.
:func:`swin_opt.torch.patch_stats` counts every call. A :class:`Declined`
call is one the kernel is not meant for (a CPU-only kernel's module on a
GPU): counted, neither said nor refused.
"""

from __future__ import annotations

import threading
import warnings

__all__ = ["Fallback", "Declined", "KernelUnavailable", "FallbackWarning", "warn_fallback",
           "warned_reasons"]


class Fallback(Exception):
    """The kernel does not apply to this call; the message says why."""


class Declined(Fallback):
    """The kernel is not meant for this call (the MLP's CPU kernel on a CUDA
    tensor: the model runs on another device): the original runs without a
    warning, and ``fallback=False`` does not turn it into an error."""


class KernelUnavailable(RuntimeError):
    """Raised by patched modules with ``fallback=False`` when the kernel cannot be used."""


class FallbackWarning(UserWarning):
    """A patched module ran its original forward instead of the kernel (warned once
    per reason and process)."""


#: The fallback reasons this process has warned about.
warned_reasons: set = set()
_lock = threading.Lock()


def warn_fallback(reason: str, module: str, runs: str = "runs its original forward") -> None:
    """Warn that ``module`` (its framework and name) runs its original forward (or
    what ``runs`` says: a CUDA operator without a GPU kernel computes with torch's
    operators) for ``reason``, unless this process has warned about that reason
    already."""
    with _lock:
        if reason in warned_reasons:
            return
        warned_reasons.add(reason)
    warnings.warn(f"swin_opt: {module} {runs}: {reason} (said once per "
                  "reason; swin_opt.torch.patch_stats(model) counts every such call)",
                  FallbackWarning, stacklevel=3)
