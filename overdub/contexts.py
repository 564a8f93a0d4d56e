"""Reference contexts, written against overdub's public API (and two private helpers: the form of
CountContext's prehook for operators, ``__overdub_operator_form__``, which the core calls instead
of the prehook for each operator, see ``_dispatch.inline_prehook``; and ``_dispatch.seen_args``,
which gives TraceContext the arguments of a call as its hooks see them).

- :class:`LogContext` prints every call with its arguments (Cassette's ``PrintCtx``).
- :class:`CountContext` counts calls, optionally only those whose arguments all have given types.
- :class:`TraceContext` records the nested call tree ``[((fn, args), subtrace), ...]``, renders it
  as text and exports Graphviz DOT.
"""

from __future__ import annotations

import functools
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, MutableMapping, MutableSequence
from typing import Any, TextIO

from . import Context, Tagged, unbind
from ._context import _KEEP
from ._dispatch import seen_args
from ._primitives import module_of

__all__ = ["LogContext", "CountContext", "TraceContext", "ByIdentity", "describe"]

_ABSENT: Any = object()  # an operand that was not passed (CountContext.prehook)


def describe(fn: Any) -> str:
    """A short readable name for a callable: ``math.sin``, ``operator.mul``, ``Point.__init__``;
    ``functools.partial(f)`` for a partial of ``f`` (its arguments left out, as its repr, which
    holds them all, can be as long as they are)."""
    try:
        if isinstance(fn, functools.partial):
            return f"{describe(type(fn))}({describe(fn.func)})"
        # (a class is named as itself: `staticmethod.__func__` is a descriptor of the class)
        func = fn if isinstance(fn, type) else getattr(fn, "__func__", fn)
        name: Any = getattr(func, "__qualname__", None) or getattr(func, "__name__", None)
    except Exception:  # a callable object whose attribute reads fail: its repr, guarded
        func, name = fn, None
    if not isinstance(name, str):
        return _repr(fn)
    module = module_of(func)
    if module in ("", "builtins", "__main__"):
        return name
    return f"{module}.{name}"


def _repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception as exc:  # a broken __repr__ must not break logging
        return f"<{type(value).__name__} (repr failed: {type(exc).__name__})>"


def _short(value: Any, limit: int = 60) -> str:
    text = _repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _call_text(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    parts = [_short(a) for a in args] + [f"{k}={_short(v)}" for k, v in kwargs.items()]
    return f"{describe(fn)}({', '.join(parts)})"


class LogContext(Context):
    """Print each call the overdubbed code makes, with its arguments.

    ``LogContext(file=None)``: the lines go to ``file``, a text stream, or to what
    ``sys.stdout`` is when the context is made (so that a program that redirects its own
    output, ``contextlib.redirect_stdout``, does not capture the log).  Example::

        overdub(LogContext(), lambda x: math.sin(x) * 2, 1.0)
        # prints <lambda>(1.0), getattr(<module 'math' ...>, 'sin'), math.sin(1.0) and
        # operator.mul(0.8414709848078965, 2), one per line
    """

    def __init__(self, *, file: TextIO | None = None, **options: Any) -> None:
        if file is not None and not callable(getattr(file, "write", None)):
            raise TypeError(f"LogContext(file=...): file must be a text stream (an open file, "
                            f"io.StringIO(), sys.stderr), got {file!r}")
        super().__init__(**options)
        self.file = sys.stdout if file is None else file

    def prehook(self, fn: Any, /, *args: Any, **kwargs: Any) -> None:
        print(_call_text(fn, args, kwargs), file=self.file)


class CountContext(Context):
    """Count calls by callee (operators included).

    ``CountContext(types=None)``: with ``types`` (a class or tuple of classes) only calls whose
    positional and keyword arguments are *all* instances of ``types`` are counted.  ``metadata``
    is a plain dict ``{callee: count}`` (a bound method is counted under its function or method
    descriptor, ``Point.norm`` or ``list.append``, keeping no instance alive; a callee that
    cannot be hashed under :class:`ByIdentity`); ``counts`` gives it as a
    ``collections.Counter``.  Example::

        ctx = CountContext(types=(str, int))
        overdub(ctx, lambda: list(map(str, range(1, 11))))
        ctx.counts[str]  # 10 (and ctx.total is 12: the argument-less lambda and range(1, 11))
    """

    def __init__(self, *, types: type | tuple[type, ...] | None = None, metadata: Any = None,
                 passes: Any = ()) -> None:
        if types is not None:
            try:
                isinstance(None, types)
            except TypeError:
                raise TypeError(f"CountContext(types=...): types must be None, a class or a "
                                f"tuple of classes (as isinstance takes), got {types!r}") from None
        if metadata is not None and not isinstance(metadata, MutableMapping):
            raise TypeError(f"CountContext(metadata=...): the counts are kept in a mapping "
                            f"(a dict, a Counter), got {type(metadata).__name__}")
        super().__init__(metadata={} if metadata is None else metadata, passes=passes)
        self.types = types

    @property
    def counts(self) -> Counter[Any]:
        return Counter(self.metadata)

    @property
    def total(self) -> int:
        return sum(self.metadata.values())

    def prehook(self, fn: Any, a: Any = _ABSENT, b: Any = _ABSENT, c: Any = _ABSENT, /,
                *more: Any, **kwargs: Any) -> None:
        """Count ``fn(*args, **kwargs)``.  The hottest code of a counted run, called for every
        operator with one to three operands: they arrive as ``a``, ``b``, ``c`` (no tuple of
        them is built), and a callee seen before is counted with one lookup and one store
        (``get``, not ``counts[fn] += 1``: a ``Counter`` given as ``metadata`` would answer
        0 for a bound method and store it, keeping its instance alive)."""
        if self.types is None:
            counts = self.metadata
            try:
                seen = counts.get(fn)
            except TypeError:  # fn cannot be hashed: see _count
                seen = None
            if seen is not None:
                counts[fn] = seen + 1
                return
        self._count(fn, (a, b, c, *more) if c is not _ABSENT else (a, b) if b is not _ABSENT
                    else (a,) if a is not _ABSENT else (), kwargs)

    def _count_operator(self, fn: Any, a: Any, b: Any = _ABSENT, c: Any = _ABSENT, /) -> None:
        """:meth:`prehook` for an operator (one to three operands, no keywords), which
        rewritten code calls inline for each operator it runs: its form for operators (see
        ``_dispatch.inline_prehook``), cheaper to call than a method taking ``*more,
        **kwargs`` (no dict of keywords is made).  An operator's function can be hashed."""
        if self.types is None:
            counts = self.metadata
            seen = counts.get(fn)
            if seen is not None:
                counts[fn] = seen + 1
                return
        self._count(fn, (a,) if b is _ABSENT else (a, b) if c is _ABSENT else (a, b, c), {})

    def _count(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """:meth:`prehook`'s other cases: the ``types`` filter, a callee seen for the first
        time, a bound method (counted under its method: ``m.tobytes`` as
        ``memoryview.tobytes``, keeping no ``m`` alive), a callee that cannot be hashed (a set
        subclass, a curried function whose keywords hold a dict: counted by identity)."""
        types = self.types
        if types is not None and not (all(isinstance(x, types) for x in args)
                                      and all(isinstance(v, types) for v in kwargs.values())):
            return
        method = unbind(fn)
        if method is not None:
            fn = method[0]
        counts = self.metadata
        try:
            counts[fn] = counts.get(fn, 0) + 1
        except TypeError:
            fn = ByIdentity(fn)
            counts[fn] = counts.get(fn, 0) + 1


# Observe-mode code calls the operator form for operators (see _dispatch.inline_prehook)
setattr(CountContext.prehook, "__overdub_operator_form__", CountContext._count_operator)


class ByIdentity:
    """The key under which :class:`CountContext` counts a callee that cannot be hashed: equal
    only to a key for the same object (``ByIdentity(f) == ByIdentity(f)``), so
    ``ctx.counts[ByIdentity(f)]`` reads its count."""

    __slots__ = ("callee",)

    def __init__(self, callee: Any) -> None:
        self.callee = callee

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ByIdentity) and other.callee is self.callee

    def __hash__(self) -> int:
        return id(self.callee)

    def __repr__(self) -> str:
        return f"ByIdentity({self.callee!r})"


class TraceContext(Context):
    """Record the nested call tree of a run in ``ctx.trace``.

    The trace is a list of ``((fn, args), subtrace)`` for each call, ``subtrace`` being the calls
    made inside it (``((fn, args, kwargs), subtrace)`` when keywords were passed).  Example::

        ctx = TraceContext()
        overdub(ctx, f, 1, 2, 3)   # f(x, y, z) = x*y + y*z
        ctx.trace == [((f, (1, 2, 3)), [((operator.mul, (1, 2)), []),
                                         ((operator.mul, (2, 3)), []),
                                         ((operator.add, (2, 6)), [])])]
    """

    def __init__(self, **options: Any) -> None:
        options.setdefault("metadata", [])
        if not isinstance(options["metadata"], MutableSequence):
            raise TypeError(f"TraceContext(metadata=...): the trace is kept in a list, got "
                            f"{type(options['metadata']).__name__}")
        super().__init__(**options)
        self._open = [self.metadata]

    @property
    def trace(self) -> list[Any]:
        trace: list[Any] = self.metadata
        return trace

    def similar(self, metadata: Any = _KEEP) -> TraceContext:
        """A sibling recording into ``metadata`` if given, else into this context's trace, as
        every context's sibling shares its metadata (its runs are further top-level calls of
        the one trace); ``similar(metadata=[])`` for a trace of its own."""
        sibling = super().similar(metadata)
        sibling._open = [sibling.metadata]  # (not a share of this context's open calls)
        return sibling

    def overdub(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        subtrace: list[Any] = []
        shown, shown_kwargs = args, kwargs  # (as hooks see them: other contexts' tags removed,
        if Tagged in map(type, args) or (   # so an enclosing derivative's stay out of the trace)
                kwargs and Tagged in map(type, kwargs.values())):
            shown, shown_kwargs = seen_args(getattr(self, "_overdub_ref", None), args, kwargs)
        call = (fn, shown, shown_kwargs) if kwargs else (fn, shown)
        self._open[-1].append((call, subtrace))
        self._open.append(subtrace)
        try:
            return super().overdub(fn, *args, **kwargs)
        finally:
            self._open.pop()

    def render(self, max_depth: int | None = None, modules: Iterable[str] | None = None) -> str:
        """The trace as indented text; ``modules`` keeps calls whose callee's module starts with
        one of the given prefixes (their callees are still shown under kept calls)."""
        return render(self.trace, max_depth, modules)

    def to_dot(self, max_depth: int | None = None, modules: Iterable[str] | None = None) -> str:
        """The trace as a Graphviz DOT digraph (one node per call, edges caller -> callee);
        ``max_depth`` and ``modules`` select calls as in :meth:`render`."""
        lines = ["digraph trace {", '  node [shape=box, fontname="monospace"];']
        for node, (_, parent, text) in enumerate(_shown_calls(self.trace, max_depth, modules)):
            label = text.replace("\\", "\\\\").replace('"', '\\"')
            lines.append(f'  n{node} [label="{label}"];')
            if parent is not None:
                lines.append(f"  n{parent} -> n{node};")
        lines.append("}")
        return "\n".join(lines) + "\n"


def render(trace: list[Any], max_depth: int | None = None,
           modules: Iterable[str] | None = None) -> str:
    """Indented text for a ``TraceContext`` trace (see :meth:`TraceContext.render`)."""
    shown = _shown_calls(trace, max_depth, modules)
    return "\n".join("  " * depth + text for depth, _, text in shown)


def _shown_calls(trace: list[Any], max_depth: int | None,
                 modules: Iterable[str] | None) -> Iterator[tuple[int, int | None, str]]:
    """``(depth, parent, text)`` for each call of ``trace`` that is shown, in call order.

    ``parent`` numbers the nearest shown caller in that order (``None`` at the top).  With
    ``modules`` only calls of callees from modules starting with one of those prefixes are shown,
    a hidden call's callees taking its place; ``max_depth`` counts shown levels.
    """
    prefixes = tuple(modules) if modules is not None else None
    shown = 0

    def walk(trace: list[Any], depth: int,
             parent: int | None) -> Iterator[tuple[int, int | None, str]]:
        nonlocal shown
        if max_depth is not None and depth >= max_depth:
            return
        for call, sub in trace:
            if prefixes is None or module_of(call[0]).startswith(prefixes):
                here, shown = shown, shown + 1
                yield depth, parent, _call_text(call[0], call[1], call[2] if len(call) > 2 else {})
                yield from walk(sub, depth + 1, here)
            else:
                yield from walk(sub, depth, parent)

    return walk(trace, 0, None)
