"""Source for code compiled from a string: ``exec``, ``eval``, ``compile``, ``python -c``.

Python keeps no source for such code (its file name is ``<string>``), yet the standard library
makes ordinary methods this way: a ``dataclass``'s ``__init__`` and a ``namedtuple``'s
``__new__`` are ``exec``'d text.  Without their source they would be leaves, and a derivative
through ``State(x, 2 * x)`` would be lost.  Three ways to get the source, tried in order:

- **Remembered.**  ``compile``/``exec``/``eval`` of a string inside a context go through the
  core's shims, which record the text for every code object it compiles to (:func:`remember`).
- **Replayed.**  Code made natively, before any context ran (a dataclass defined at import), is
  made again: its generator (``dataclasses.dataclass``, ``collections.namedtuple``) is run once
  more, under a context that records what it compiles, on a stand-in with the same fields.  The
  text is adopted only if it compiled to code *equal* to the original (bytecode, names,
  constants, line numbers), so a replay can never substitute different code; anything else is
  "no source".  No global hook and no patched module: ``sys.addaudithook`` would see every
  ``exec``, but it cannot be removed and slows every ``id()`` call in the process.
- **The command line.**  ``python -c CODE`` keeps ``CODE`` in ``sys.orig_argv``.

Where none applies, :func:`find` says why in one line.
"""

from __future__ import annotations

import collections
import contextvars
import dataclasses
import functools
import gc
import inspect
import sys
import threading
import types
import weakref
from collections.abc import Callable
from typing import Any


class Generated:
    """The text a code object was compiled from; ``parsed`` is the source module's cache slot.
    ``otherwise``: the text is only a candidate (``python -c``'s, for any code of
    ``__main__`` from ``<string>``), and this is why there is no source if it is not the
    code's."""

    __slots__ = ("lines", "parsed", "otherwise")

    def __init__(self, text: str, otherwise: str | None = None) -> None:
        self.lines = text.splitlines(keepends=True)
        self.parsed: Any = None
        self.otherwise = otherwise


# id(code) -> (weak ref to code, its source): by identity, since hashing a code object costs its
# size and equal code from two exec calls may come from different text.
_sources: dict[int, tuple[weakref.ref[types.CodeType], Generated]] = {}
_command: Generated | None = None  # python -c's text, once read
# Set while a replay runs: what the shims compile is also listed here.
_capture: contextvars.ContextVar[list[tuple[str, types.CodeType]] | None] = \
    contextvars.ContextVar("overdub_generated_capture", default=None)


def remember(source: Any, code: types.CodeType) -> None:
    """Record that ``code`` (and every code object nested in it) was compiled from ``source``."""
    if isinstance(source, (bytes, bytearray)):
        try:
            source = bytes(source).decode()
        except UnicodeDecodeError:
            return
    if not isinstance(source, str):
        return  # an AST: nothing to read back
    capture = _capture.get()
    if capture is not None:
        capture.append((source, code))
    generated = Generated(source)
    pending = [code]
    while pending:
        current = pending.pop()
        _store(current, generated)
        pending.extend(c for c in current.co_consts if isinstance(c, types.CodeType))


def _store(code: types.CodeType, generated: Generated) -> None:
    key = id(code)

    def evict(ref: weakref.ref[types.CodeType], key: int = key,
              sources: dict[int, Any] = _sources) -> None:
        slot = sources.get(key)
        if slot is not None and slot[0] is ref:
            sources.pop(key, None)

    _sources[key] = (weakref.ref(code, evict), generated)


def _remembered(code: types.CodeType) -> Generated | None:
    slot = _sources.get(id(code))
    return slot[1] if slot is not None and slot[0]() is code else None


def find(code: types.CodeType, module_globals: dict[str, Any] | None) -> Generated | str:
    """The source ``code`` was compiled from, or why there is none (one line)."""
    found = _remembered(code)
    if found is not None:
        return found
    if code.co_filename == "<string>":
        replayed = _replay(code, module_globals)
        if replayed is not None:
            return replayed
        if _from_command_line(module_globals):
            return _command_source()
        return _EXEC_REASON
    if code.co_filename == "<stdin>":
        return ("it was typed at the interactive prompt or read from standard input, and Python "
                "keeps no source for that (Python 3.13's prompt and IPython do)")
    return f"it was generated ({code.co_filename}) and Python keeps no source for it"


_EXEC_REASON = ("it was made by exec/eval/compile of a string outside any context, and Python "
                "keeps no source for that")


def _from_command_line(module_globals: dict[str, Any] | None) -> bool:
    main = sys.modules.get("__main__")
    argv = getattr(sys, "orig_argv", [])
    return (main is not None and module_globals is vars(main) and "-c" in argv
            and argv.index("-c") + 1 < len(argv))


def _command_source() -> Generated:
    global _command
    if _command is None:
        argv = sys.orig_argv
        _command = Generated(argv[argv.index("-c") + 1], otherwise=_EXEC_REASON)
    return _command


# -- replays -------------------------------------------------------------------------------
_replay_lock = threading.RLock()  # a replay may meet generated code and replay it


def _replay(code: types.CodeType, module_globals: dict[str, Any] | None) -> Generated | None:
    """Make ``code``'s generator produce it again under a recording context, and adopt the
    source of what it compiled to code equal to ``code``."""
    try:
        if module_globals is not None and code.co_name == "<lambda>" and \
                str(module_globals.get("__name__", "")).startswith("namedtuple_"):
            compiled = _namedtuple_again(code, module_globals)
        else:
            owner = _dataclass_owner(code, module_globals)
            compiled = [] if owner is None else _dataclass_again(owner)
    except Exception:  # a class the stand-in cannot be made for: no source, as before
        return None
    for text, outer in compiled:
        pending = [outer]
        while pending:
            twin = pending.pop()
            if twin == code:  # equal bytecode, names, constants, lines: the same function
                remember(text, code)
                return _remembered(code)
            pending.extend(c for c in twin.co_consts if isinstance(c, types.CodeType))
    return None


def _code_of(value: Any) -> types.CodeType | None:
    """The code of a function in a class's namespace (through ``functools.wraps``: a
    dataclass's ``__repr__``)."""
    try:
        value = inspect.unwrap(value) if isinstance(value, types.FunctionType) else value
    except ValueError:  # a __wrapped__ cycle
        return None
    return value.__code__ if isinstance(value, types.FunctionType) else None


@functools.cache
def _recorder() -> Any:
    """The context replays run under (one class, so its rewrites are cached)."""
    from ._context import Context

    class Recorder(Context):
        def prehook(self, fn: Any, /, *args: Any, **kwargs: Any) -> None:
            """Seeing every call routes exec/eval/compile through the shims."""

    return Recorder()


def _recorded(generator: Callable[..., Any], *args: Any, **kwargs: Any
              ) -> list[tuple[str, types.CodeType]]:
    """What ``generator(*args, **kwargs)`` compiles from strings, run under a context so that
    its compiles are seen, and outside any enclosing context (a replay is bookkeeping, not the
    user's computation)."""
    from ._context import overdub

    def run() -> list[tuple[str, types.CodeType]]:
        compiled: list[tuple[str, types.CodeType]] = []
        _capture.set(compiled)
        overdub(_recorder(), generator, *args, **kwargs)
        return compiled

    with _replay_lock:
        return contextvars.Context().run(run)  # (errors: see _replay)


def _namedtuple_again(code: types.CodeType, module_globals: dict[str, Any]
                      ) -> list[tuple[str, types.CodeType]]:
    typename = str(module_globals["__name__"])[len("namedtuple_"):]
    fields = code.co_varnames[1:code.co_argcount]  # lambda _cls, a, b: ...
    return _recorded(collections.namedtuple, typename, fields, rename=True)


def _dataclass_owner(code: types.CodeType, module_globals: dict[str, Any] | None) -> type | None:
    """The dataclass one of whose methods has ``code``: looked for among the module's classes,
    then (a class made inside a function) through the objects that refer to the code."""
    def owns(cls: Any) -> bool:
        return isinstance(cls, type) and "__dataclass_fields__" in vars(cls) and any(
            _code_of(v) is code for v in vars(cls).values())

    for value in list((module_globals or {}).values()):
        if owns(value):
            return value  # type: ignore[no-any-return]
    for func in gc.get_referrers(code):
        if isinstance(func, types.FunctionType):
            for namespace in gc.get_referrers(func):
                if isinstance(namespace, dict):
                    for cls in gc.get_referrers(namespace):
                        if owns(cls):
                            return cls  # type: ignore[no-any-return]
    return None


def _dataclass_again(cls: type) -> list[tuple[str, types.CodeType]]:
    """A stand-in class with ``cls``'s fields, in order, decorated as ``cls`` was.  It has no
    bases (their ``__init_subclass__`` or metaclass must not see a second class): the inherited
    fields are declared as its own, which gives the same field list."""
    params = vars(cls)["__dataclass_params__"]
    options = {name: getattr(params, name) for name in
               ("init", "repr", "eq", "order", "unsafe_hash", "frozen")}
    options["slots"] = "__slots__" in vars(cls)
    namespace: dict[str, Any] = {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                                 "__annotations__": {}}
    for name, f in vars(cls)["__dataclass_fields__"].items():
        namespace["__annotations__"][name] = f.type
        namespace[name] = dataclasses.field(
            default=f.default, default_factory=f.default_factory, init=f.init, repr=f.repr,
            hash=f.hash, compare=f.compare, metadata=f.metadata, kw_only=f.kw_only)
    if hasattr(cls, "__post_init__"):
        namespace["__post_init__"] = cls.__post_init__
    stand_in = type(cls.__name__, (), namespace)
    return _recorded(dataclasses.dataclass, stand_in, **options)
