"""Frames as user code sees them: overdub's dispatcher frames do not count.

Every overdubbed call puts a dispatcher frame between a caller and its callee.  Code that looks
at its caller's frame (``sys._getframe(1)`` in ``collections.namedtuple``, ``type(name, bases,
ns)`` naming ``__module__``, ``warnings.warn``'s ``stacklevel``) would see those; these helpers
skip them.
"""

from __future__ import annotations

import os
import sys
from typing import Any

OVERDUB_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
DISPATCHER_FILE = "<overdub dispatcher"  # the generated dispatchers' file names start so


def is_machinery(frame: Any) -> bool:
    filename = frame.f_code.co_filename
    return filename.startswith(OVERDUB_DIR) or filename.startswith(DISPATCHER_FILE)


def user_frame(depth: int = 1) -> Any:
    """The ``depth``-th frame up from the caller that is not overdub's machinery."""
    frame, users = sys._getframe(1), 0
    while frame is not None:
        if not is_machinery(frame):
            users += 1
            if users == depth:
                return frame
        frame = frame.f_back
    return None


def getframe(frame: Any, depth: int = 0) -> Any:
    """``sys._getframe(depth)`` seen from rewritten code: overdub's frames do not count."""
    for _ in range(depth):
        frame = frame.f_back
        while frame is not None and is_machinery(frame):
            frame = frame.f_back
        if frame is None:
            raise ValueError("call stack is not deep enough")
    return frame
