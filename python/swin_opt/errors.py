"""The errors of building kernels: no ``swin-aot``, a ``swin-aot`` of another
version, or a configuration it rejects (or a build that fails)."""

from __future__ import annotations

from typing import Sequence

__all__ = ["CompileError", "SwinAotNotFoundError", "SwinAotVersionError"]


class SwinAotNotFoundError(FileNotFoundError):
    """The ``swin-aot`` executable could not be located."""


class CompileError(RuntimeError):
    """``swin-aot`` rejected a configuration or failed to build it."""

    def __init__(self, message: str, *, command: Sequence[str] = (), returncode: int = 0,
                 stderr: str = ""):
        super().__init__(message)
        self.command = list(command)
        self.returncode = returncode
        self.stderr = stderr


class SwinAotVersionError(CompileError):
    """``swin-aot`` is older than this package or speaks another kernel ABI: rebuild it."""
