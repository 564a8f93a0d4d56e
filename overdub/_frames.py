"""Frames as user code sees them: overdub's dispatcher frames do not count.

Every overdubbed call puts a dispatcher frame between a caller and its callee.  Code that looks
at its caller's frame (``sys._getframe(1)`` in ``collections.namedtuple``, ``type(name, bases,
ns)`` naming ``__module__``, ``warnings.warn``'s ``stacklevel``) or walks frames and tracebacks
(``frame.f_back``, ``tb.tb_next``) would see those, and a rewritten frame's ``f_locals`` holds
hidden ``@`` names; these helpers leave them out.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable, Iterator

OVERDUB_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
DISPATCHER_FILE = "<overdub dispatcher"  # the generated dispatchers' file names start so


# The code of contexts' own verbs (a user's ``overdub`` or ``execute`` override): their frames
# stand between a caller and its callee as the dispatchers' do, so they do not count either.
# By id, the codes kept alive (few: a handful per context class).
_VERB_CODES: dict[int, types.CodeType] = {}


def add_verb(verb: object) -> None:
    """Count the frames of ``verb`` (a context class's method) as machinery."""
    code = getattr(getattr(verb, "__func__", verb), "__code__", None)
    if isinstance(code, types.CodeType):
        _VERB_CODES[id(code)] = code


def is_machinery(frame: types.FrameType) -> bool:
    code = frame.f_code
    filename = code.co_filename
    return (filename.startswith(OVERDUB_DIR) or filename.startswith(DISPATCHER_FILE)
            or id(code) in _VERB_CODES)


# Set to "off" (or 0/false/no) to keep overdub's frames in the tracebacks of errors that leave a
# run, for debugging overdub itself (JAX's JAX_TRACEBACK_FILTERING plays the same part).
FILTERING_SWITCH = "OVERDUB_TRACEBACK_FILTERING"


def _internal(frame: types.FrameType, also: tuple[str, ...] = ()) -> bool:
    """A frame of overdub's own code or of a generated dispatcher (not a context's verbs: a
    user's hook is the user's code, and where its bugs are), or of a directory in ``also``."""
    filename = frame.f_code.co_filename
    return filename.startswith(OVERDUB_DIR) or filename.startswith(DISPATCHER_FILE) or \
        (bool(also) and filename.startswith(also))


def hide_machinery(exc: BaseException, also: tuple[str, ...] = ()) -> None:
    """Drop overdub's frames from the traceback of ``exc`` (and of the exceptions it chains
    to) as it leaves a run: what the interpreter, ``traceback`` and pytest then print is the
    plain run's frames, the user's own lines kept.  The exception object itself is unchanged,
    and traceback entries are rebuilt, never edited (another reference may share them).
    ``also``: directories of a plug-in's own code (``overdub_ad/``), hidden too as the error
    leaves the plug-in's public entry points (``grad(f)(x)``)."""
    if os.environ.get(FILTERING_SWITCH, "").strip().lower() in ("off", "0", "false", "no"):
        return
    for current in chained(exc):
        entry = current.__traceback__
        kept: list[types.TracebackType] = []
        hidden = False
        while entry is not None:
            if _internal(entry.tb_frame, also):
                hidden = True
            else:
                kept.append(entry)
            entry = entry.tb_next
        if hidden:
            rebuilt: types.TracebackType | None = None
            for old in reversed(kept):
                rebuilt = types.TracebackType(rebuilt, old.tb_frame, old.tb_lasti, old.tb_lineno)
            current.__traceback__ = rebuilt


def chained(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception chained to it (``__cause__``, ``__context__``) or grouped in
    it (an ``ExceptionGroup``'s), each once."""
    pending: list[BaseException | None] = [exc]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending += (current.__cause__, current.__context__, *getattr(current, "exceptions", ()))


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


def past_machinery(value: object) -> object:
    """``x.f_back`` or ``x.tb_next`` as rewritten code reads it: a frame, or a traceback entry,
    of overdub's machinery is skipped for the next one that is the user's.  Code that walks the
    stack (``logging``'s caller, ``inspect.stack``, ``traceback.extract_stack``) or a traceback
    (``traceback.format_exc``, ``unittest``'s failure reports) then sees the plain run's frames.
    Any other value is returned as it is."""
    if type(value) is types.FrameType:
        frame: types.FrameType | None = value
        while frame is not None and is_machinery(frame):
            frame = frame.f_back
        return frame
    if type(value) is types.TracebackType:
        entry: types.TracebackType | None = value
        while entry is not None and is_machinery(entry.tb_frame):
            entry = entry.tb_next
        return entry
    return value


def user_locals(value: object) -> object:
    """``frame.f_locals`` as rewritten code reads it: a rewritten frame's namespace also holds
    overdub's hidden ``@`` names (dispatchers, temporaries), which the user's view leaves out
    (``inspect.getargvalues``, ``traceback``'s ``capture_locals``).  Namespaces without them,
    and any other value, are returned as they are."""
    if type(value) is dict and any(type(key) is str and key[:1] == "@" for key in value):
        return {key: item for key, item in value.items()
                if not (type(key) is str and key[:1] == "@")}
    return value


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
