"""What the package tells its user while it works: one line per kernel build
(:func:`info`), and whether progress lines are shown (:func:`progress_enabled`).

Lines go to the ``swin_opt`` logger at INFO when the application has
configured logging (a handler on that logger or on an ancestor it propagates
to -- the root logger after :func:`logging.basicConfig` --, or a level set on
it): its levels and handlers decide what is shown. When nothing is
configured, logging would drop an INFO record (only warnings reach
:data:`logging.lastResort`), and a kernel build of seconds would pass in
silence: the line is written to stderr instead, as ``lastResort`` writes
warnings. Within :func:`quiet` (a progress line shows the same work) nothing
goes to stderr.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from typing import Optional

__all__ = ["logger", "info", "quiet", "logging_configured", "progress_enabled"]

logger = logging.getLogger("swin_opt")
_lock = threading.Lock()
_quiet = 0


def logging_configured() -> bool:
    """Whether the application configured logging that the ``swin_opt`` logger's
    records reach (see the module docstring)."""
    if logger.level != logging.NOTSET:
        return True
    current = logger
    while current is not None:
        if current.handlers:
            return True
        if not current.propagate:
            return False
        current = current.parent
    return False


def info(message: str) -> None:
    """Tell the user ``message`` (one line): INFO on the ``swin_opt`` logger, or on
    stderr when the application configured no logging."""
    if logging_configured():
        logger.info(message)
        return
    with _lock:
        if _quiet:
            return
        try:
            sys.stderr.write(message + "\n")
            sys.stderr.flush()
        except (AttributeError, OSError, ValueError):  # no usable stderr
            pass


@contextlib.contextmanager
def quiet():
    """Within the block (in any thread), :func:`info` writes nothing to stderr."""
    global _quiet
    with _lock:
        _quiet += 1
    try:
        yield
    finally:
        with _lock:
            _quiet -= 1


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
