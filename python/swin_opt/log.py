"""What the package tells its user while it works: the ``swin_opt`` logger and
whether progress lines are shown (:func:`progress_enabled`)."""

from __future__ import annotations

import logging
import os
import sys
from typing import Optional

__all__ = ["logger", "progress_enabled"]

logger = logging.getLogger("swin_opt")


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
