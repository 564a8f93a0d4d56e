"""Reference contexts, written only against overdub's public API.

- :class:`LogContext` prints every call with its arguments (Cassette's ``PrintCtx``).
- :class:`CountContext` counts calls, optionally only those whose arguments all have given types.
- :class:`TraceContext` records the nested call tree ``[((fn, args), subtrace), ...]``, renders it
  as text and exports Graphviz DOT.
"""

from __future__ import annotations

import sys
from types import MethodType, ModuleType
from collections import Counter
from typing import Any, Iterable, TextIO

from . import Context

__all__ = ["LogContext", "CountContext", "TraceContext", "describe"]


def describe(fn: Any) -> str:
    """A short readable name for a callable: ``math.sin``, ``operator.mul``, ``Point.__init__``."""
    func = getattr(fn, "__func__", fn)
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None)
    if name is None:
        return repr(fn)
    module = getattr(func, "__module__", None)
    module = {"_operator": "operator"}.get(module, module)
    if module in (None, "builtins", "__main__"):
        return name
    return f"{module}.{name}"


def _short(value: Any, limit: int = 60) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # a broken __repr__ must not break logging
        text = f"<{type(value).__name__} (repr failed: {type(exc).__name__})>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _call_text(fn: Any, args: tuple, kwargs: dict) -> str:
    parts = [_short(a) for a in args] + [f"{k}={_short(v)}" for k, v in kwargs.items()]
    return f"{describe(fn)}({', '.join(parts)})"


class LogContext(Context):
    """Print each call the overdubbed code makes, with its arguments.

    ``LogContext(file=sys.stdout)``.  Example::

        overdub(LogContext(), lambda x: math.sin(x) * 2, 1.0)
        # prints <lambda>(1.0), getattr(<module 'math' ...>, 'sin'), math.sin(1.0) and
        # operator.mul(0.8414709848078965, 2), one per line
    """

    def __init__(self, *, file: TextIO | None = None, **options: Any) -> None:
        super().__init__(**options)
        self.file = file

    def prehook(self, fn: Any, /, *args: Any, **kwargs: Any) -> None:
        print(_call_text(fn, args, kwargs), file=self.file or sys.stdout)


_BuiltinMethod = type(len)


class CountContext(Context):
    """Count calls by callee (operators included).

    ``CountContext(types=None)``: with ``types`` (a class or tuple of classes) only calls whose
    positional and keyword arguments are *all* instances of ``types`` are counted.  ``metadata``
    is a plain dict ``{callee: count}`` (a bound method is counted under its function or method
    descriptor, ``Point.norm`` or ``list.append``, keeping no instance alive); ``counts`` gives it
    as a ``collections.Counter``.  Example::

        ctx = CountContext(types=(str, int))
        overdub(ctx, lambda: list(map(str, range(1, 11))))
        ctx.counts[str]  # 10 (and ctx.total is 12: the argument-less lambda and range(1, 11))
    """

    def __init__(self, *, types: type | tuple[type, ...] | None = None, **options: Any) -> None:
        options.setdefault("metadata", {})
        super().__init__(**options)
        self.types = types

    @property
    def counts(self) -> Counter:
        return Counter(self.metadata)

    @property
    def total(self) -> int:
        return sum(self.metadata.values())

    def prehook(self, fn: Any, /, *args: Any, **kwargs: Any) -> None:
        # The hottest code in a counted run: a plain dict, no Counter.__missing__.
        types = self.types
        if types is not None and not (all(isinstance(a, types) for a in args)
                                      and all(isinstance(v, types) for v in kwargs.values())):
            return
        if type(fn) is MethodType:
            fn = fn.__func__
        elif type(fn) is _BuiltinMethod and not isinstance(fn.__self__, ModuleType):
            # m.tobytes -> memoryview.tobytes: count the method, do not keep `m` alive
            fn = getattr(type(fn.__self__), fn.__name__, fn)
        counts = self.metadata
        counts[fn] = counts.get(fn, 0) + 1


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
        super().__init__(**options)
        self._open = [self.metadata]

    @property
    def trace(self) -> list:
        return self.metadata

    def similar(self, metadata: Any = None) -> "TraceContext":
        """A sibling recording into ``metadata`` (a new list by default)."""
        sibling = super().similar([] if metadata is None else metadata)
        sibling._open = [sibling.metadata]
        return sibling

    def overdub(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        subtrace: list = []
        call = (fn, args, kwargs) if kwargs else (fn, args)
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

    def to_dot(self, max_depth: int | None = None) -> str:
        """The trace as a Graphviz DOT digraph (one node per call, edges caller -> callee)."""
        lines = ["digraph trace {", '  node [shape=box, fontname="monospace"];']
        counter = iter(range(1 << 62))

        def emit(trace: list, parent: str | None, depth: int) -> None:
            if max_depth is not None and depth >= max_depth:
                return
            for call, sub in trace:
                node = f"n{next(counter)}"
                label = _call_text(call[0], call[1], call[2] if len(call) > 2 else {})
                label = label.replace("\\", "\\\\").replace('"', '\\"')
                lines.append(f'  {node} [label="{label}"];')
                if parent is not None:
                    lines.append(f"  {parent} -> {node};")
                emit(sub, node, depth + 1)

        emit(self.trace, None, 0)
        lines.append("}")
        return "\n".join(lines) + "\n"


def render(trace: list, max_depth: int | None = None, modules: Iterable[str] | None = None) -> str:
    """Indented text for a ``TraceContext`` trace (see :meth:`TraceContext.render`)."""
    prefixes = tuple(modules) if modules is not None else None
    lines: list[str] = []

    def keep(fn: Any) -> bool:
        if prefixes is None:
            return True
        module = getattr(getattr(fn, "__func__", fn), "__module__", None) or ""
        return module.startswith(prefixes)

    def emit(trace: list, depth: int) -> None:
        if max_depth is not None and depth >= max_depth:
            return
        for call, sub in trace:
            if keep(call[0]):
                kwargs = call[2] if len(call) > 2 else {}
                lines.append("  " * depth + _call_text(call[0], call[1], kwargs))
                emit(sub, depth + 1)
            else:
                emit(sub, depth)

    emit(trace, 0)
    return "\n".join(lines)
