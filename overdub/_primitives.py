"""Primitive tables: what a context class runs instead of a callable, by argument types.

``@MyCtx.primitive(fn, types=(A, B))`` records ``(types, impl)`` for ``fn`` on ``MyCtx`` only;
lookups merge the class's MRO, so subclasses inherit and may override (same ``fn`` and ``types``).
For a call, the candidates whose ``types`` match the positional arguments (``isinstance`` each;
``types=None`` matches any call) compete; the most specific wins: the one whose types are all
subclasses of every other candidate's.  If no single candidate is most specific the call is
ambiguous, a ``TypeError`` naming both; a duplicate registration on one class replaces the older.

Keys are ``id(fn)`` (registered callables are kept alive by the table), so looking up an arbitrary
callable never runs user ``__hash__``/``__eq__`` code.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

from ._rewrite import CALL, CATEGORY_OF
from ._tagging import Tagged

_generation = itertools.count(1)
_UNCHOSEN: Any = object()  # no choice cached yet for a signature (None is a cached "no primitive")
current_generation = 0  # bumped by every registration; merged tables compare against it
_lock = threading.Lock()


@dataclass(frozen=True)
class Primitive:
    fn: Any
    types: tuple[type, ...] | None
    impl: Callable[..., Any]
    owner: type

    def matches(self, kinds: tuple[type, ...]) -> bool:
        return self.types is None or (
            len(kinds) == len(self.types) and all(map(issubclass, kinds, self.types)))

    def at_least_as_specific(self, other: Primitive, arity: int) -> bool:
        mine = self.types or (object,) * arity
        theirs = other.types or (object,) * arity
        return all(issubclass(a, b) for a, b in zip(mine, theirs))


def register(cls: type, fn: Any, types: Any, impl: Callable[..., Any]) -> None:
    global current_generation
    if not callable(fn):
        raise TypeError(f"{cls.__name__}.primitive: {fn!r} is not callable, so it cannot be "
                        f"a primitive")
    if not callable(impl):
        raise TypeError(f"{cls.__name__}.primitive({_name(fn)}): the implementation {impl!r} "
                        f"is not callable")
    if types is not None:
        if isinstance(types, type):
            types = (types,)
        types = tuple(types)
        if not all(isinstance(t, type) for t in types):
            raise TypeError(f"{cls.__name__}.primitive({_name(fn)}): types must be a tuple of "
                            f"classes, got {types!r}")
    with _lock:
        own = cls.__dict__.get("_overdub_primitives")
        if own is None:
            own = {}
            setattr(cls, "_overdub_primitives", own)
        entries = [p for p in own.get(id(fn), []) if p.types != types]
        own[id(fn)] = [*entries, Primitive(fn, types, impl, cls)]
        current_generation = next(_generation)


class Table:
    """The merged primitives of one context class, with a per-signature choice cache."""

    def __init__(self, cls: type, owner: Any = None) -> None:
        self.owner = owner  # the context's tag identity: only its own tags match `Tagged`
        merged: dict[int, list[Primitive]] = {}
        for klass in reversed(cls.__mro__):
            for key, entries in klass.__dict__.get("_overdub_primitives", {}).items():
                kept = [p for p in merged.get(key, []) if p.types not in {e.types for e in entries}]
                merged[key] = kept + list(entries)
        self.entries = merged
        self.cls = cls
        self.generation = current_generation
        self._chosen: dict[tuple[Any, ...], Callable[..., Any] | None] = {}
        # callables with a single primitive for any argument types: no choice to make
        self._untyped = {key: entries[0].impl for key, entries in merged.items()
                         if len(entries) == 1 and entries[0].types is None}
        self.categories = frozenset(CATEGORY_OF.get(key, CALL) for key in merged)

    def find(self, fn: Any, args: tuple[Any, ...]) -> Callable[..., Any] | None:
        """The implementation for calling ``fn`` with ``args``, or None."""
        key = id(fn)
        entries = self.entries.get(key)
        if entries is None:
            return None
        impl = self._untyped.get(key)
        if impl is not None:
            return impl
        # Whose tag it is matters: foreign tags dispatch as plain values.  (Binary operators
        # are spelled out: `tuple(map(type, args))` is several times slower.)
        owner = self.owner
        if len(args) == 2:
            a, b = args
            kinds: tuple[type, ...] = (type(a), type(b))
            foreign = ((kinds[0] is Tagged and a.owner is not owner)
                       or (kinds[1] is Tagged and b.owner is not owner))
        else:
            kinds = tuple([type(arg) for arg in args])
            foreign = Tagged in kinds and any(
                type(arg) is Tagged and arg.owner is not owner for arg in args)
        if foreign:
            kinds = tuple([self._kind(arg) for arg in args])
        chosen: Callable[..., Any] | None = self._chosen.get((key, kinds), _UNCHOSEN)
        if chosen is _UNCHOSEN:
            chosen = self._chosen[key, kinds] = self._choose(entries, kinds)
        return chosen

    def _kind(self, arg: Any) -> type:
        """The type dispatch sees: another context's tagged value is just its plain value."""
        kind = type(arg)
        if kind is Tagged and arg.owner is not self.owner:
            while type(arg) is Tagged and arg.owner is not self.owner:
                arg = arg.value
            kind = type(arg)
        return kind

    def _choose(self, entries: list[Primitive], kinds: tuple[type, ...]
                ) -> Callable[..., Any] | None:
        candidates = [p for p in entries if p.matches(kinds)]
        if not candidates:
            return None
        arity = len(kinds)
        best = [p for p in candidates
                if all(p.at_least_as_specific(q, arity) for q in candidates)]
        if len(best) != 1:
            a, b = (best or candidates)[:2]
            raise TypeError(
                f"ambiguous primitives on {self.cls.__name__} for {_name(a.fn)} with argument "
                f"types {tuple(k.__name__ for k in kinds)}: types={_types(a)} and "
                f"types={_types(b)} both match and neither is more specific; register one for "
                f"the intersection")
        return best[0].impl


def _types(p: Primitive) -> str:
    return "None" if p.types is None else "(" + ", ".join(t.__name__ for t in p.types) + ")"


def _name(fn: Any) -> str:
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{module}.{name}" if module and module != "builtins" else name
