"""Why a patched module does not use its kernel: :class:`Fallback`, raised by
the patch code (the module then runs its original forward), and
:class:`KernelUnavailable`, raised to the caller instead when the model was
swapped with ``fallback=False``."""

from __future__ import annotations

__all__ = ["Fallback", "KernelUnavailable"]


class Fallback(Exception):
    """The kernel does not apply to this call; the message says why."""


class KernelUnavailable(RuntimeError):
    """Raised by patched modules with ``fallback=False`` when the kernel cannot be used."""
