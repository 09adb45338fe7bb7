"""Warnings that point at the user's line: `warn_caller`."""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["warn_caller"]

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_caller(message: str, category: type[Warning]) -> None:
    """`warnings.warn`, at the first frame outside this package: the line that called
    `learn_one`, `learn_many`, an attack, ... however deep inside the package the warning
    arose."""
    frame, level = sys._getframe(1), 2  # (stacklevel 1 is this function)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
