"""Frames as user code sees them: overdub's dispatcher frames do not count.

Every overdubbed call puts a dispatcher frame between a caller and its callee.  Code that looks
at its caller's frame (``sys._getframe(1)`` in ``collections.namedtuple``, ``type(name, bases,
ns)`` naming ``__module__``, ``warnings.warn``'s ``stacklevel``) would see those; these helpers
skip them.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable

OVERDUB_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
DISPATCHER_FILE = "<overdub dispatcher"  # the generated dispatchers' file names start so


def is_machinery(frame: types.FrameType) -> bool:
    filename = frame.f_code.co_filename
    return filename.startswith(OVERDUB_DIR) or filename.startswith(DISPATCHER_FILE)


def user_frame(depth: int = 1) -> types.FrameType | None:
    """The ``depth``-th frame up from the caller that is not overdub's machinery."""
    frame: types.FrameType | None = sys._getframe(1)
    users = 0
    while frame is not None:
        if not is_machinery(frame):
            users += 1
            if users == depth:
                return frame
        frame = frame.f_back
    return None


def getframe(frame: types.FrameType, depth: int = 0) -> types.FrameType:
    """``sys._getframe(depth)`` seen from rewritten code: overdub's frames do not count."""
    for _ in range(depth):
        up = frame.f_back
        while up is not None and is_machinery(up):
            up = up.f_back
        if up is None:
            raise ValueError("call stack is not deep enough")
        frame = up
    return frame


def getframemodulename(native: Callable[..., str | None], depth: int = 0) -> str | None:
    """``sys._getframemodulename(depth)`` (3.12+) called from rewritten code: the module of the
    function ``depth`` frames up, overdub's frames not counted (as ``namedtuple``, ``Enum`` and
    ``typing`` name the module that created a class)."""
    caller = sys._getframe(1)  # the rewritten code: it calls us directly
    if native is not getattr(sys, "_getframemodulename", None):
        return native(depth)  # some other object's method of that name
    try:
        target = getframe(caller, depth)
    except ValueError:
        return None  # the native answer for a stack not that deep
    return module_of(target)


def module_of(target: types.FrameType) -> str | None:
    """3.12+: the ``__module__`` of the function running in ``target``, a frame of the caller's
    stack.  A frame does not expose its function; ``sys._getframemodulename`` reads it, given
    the frame's depth from here."""
    frame: types.FrameType | None = sys._getframe()
    depth = 0
    while frame is not None and frame is not target:
        frame, depth = frame.f_back, depth + 1
    result: str | None = sys._getframemodulename(depth)  # type: ignore[attr-defined]
    return result
