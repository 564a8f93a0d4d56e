"""Primitive tables: what a context class runs instead of a callable, by argument types.

``@MyCtx.primitive(fn, types=(A, B))`` records ``(types, impl)`` for ``fn`` on ``MyCtx`` only;
lookups merge the class's MRO, so subclasses inherit and may override (same ``fn`` and ``types``).
For a call, the candidates whose ``types`` match the positional arguments (``isinstance`` each;
``types=None`` matches any call) compete; the most specific wins: the one whose types are all
subclasses of every other candidate's.  If no single candidate is most specific the call is
ambiguous, a ``TypeError`` naming both; a duplicate registration on one class replaces the older.

Keys are ``id(fn)`` (registered callables are kept alive by the table), so looking up an arbitrary
callable never runs user ``__hash__``/``__eq__`` code.

Methods: a primitive registered for a method as found on its class (``Foo.bar``, ``str.upper``,
``np.ndarray.sum``) applies to calls of the bound method (``foo.bar(x)``, ``"ab".upper()``) as
to ``Foo.bar(foo, x)``: a bound method with no primitive of its own is looked up as the method it
binds (:func:`unbind`) with the object first, and the implementation receives that object first.
Python's own lookup picks the method, so the most-derived registration wins, and an override
without a registration is not its base class's primitive.
"""

from __future__ import annotations

import itertools
import threading
import types
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

from ._protocols import lookup
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


_BOUND_C = (types.BuiltinMethodType, types.MethodWrapperType)  # "ab".upper, (3).__add__
_C_METHODS = (types.MethodDescriptorType, types.WrapperDescriptorType)  # str.upper, int.__add__


def unbind(fn: Any) -> tuple[Any, Any] | None:
    """``(method, obj)`` for a bound method ``fn`` of ``obj``: the function or method
    descriptor that calling ``fn(*args)`` runs as ``method(obj, *args)``; None for anything
    else.

    ``unbind(foo.bar) == (Foo.bar, foo)`` (``Foo.bar`` as the class defines or inherits it),
    ``unbind("ab".upper) == (str.upper, "ab")``, ``unbind(arr.sum) == (numpy.ndarray.sum, arr)``.
    None for plain functions, module functions (``math.sin``) and C class methods
    (``dict.fromkeys``), which bind no instance.  For hooks, which receive the bound method
    ``obj.m`` for a call ``obj.m(...)``, and for plug-ins that look methods up in tables of
    their own.

    See also: :meth:`Context.primitive`.
    """
    kind = type(fn)
    if kind is types.MethodType:
        return fn.__func__, fn.__self__
    if kind is types.BuiltinMethodType or kind is types.MethodWrapperType:
        receiver = fn.__self__
        if receiver is None or type(receiver) is types.ModuleType:
            return None
        cls = type(receiver)
        method = lookup(cls, fn.__name__)
        # The class's method of that name, if calling fn is calling it (not, say, a base
        # class's method reached through super(), or a C class method bound to a class)
        if isinstance(method, _C_METHODS) and method.__get__(receiver, cls) == fn:
            return method, receiver
    return None


class MethodPrimitive:
    """A method's primitive found for a call of the bound method: ``impl`` is called with
    ``receiver`` first.  Inside an enclosing context the dispatch step calls ``impl`` itself
    through it (``parent(impl, ctx, receiver, ...)``), so that the enclosing context sees the
    user's implementation run, as for any primitive."""

    __slots__ = ("impl", "receiver")

    def __init__(self, impl: Callable[..., Any], receiver: Any) -> None:
        self.impl = impl
        self.receiver = receiver

    def __call__(self, ctx: Any, /, *args: Any, **kwargs: Any) -> Any:
        return self.impl(ctx, self.receiver, *args, **kwargs)


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
        # Whether a bound method may have a primitive as its method: some registered callable
        # binds (a function, a method descriptor: it has __get__; C functions and ufuncs do
        # not), and the method's name is one of theirs (the cheap tests before unbinding).
        binding = [entries[0].fn for entries in merged.values()
                   if hasattr(type(entries[0].fn), "__get__")]
        self.names = frozenset(getattr(fn, "__name__", None) for fn in binding)
        if binding:  # (only then: the common miss path of find stays as short as it was)
            self.find = self._find_or_method  # type: ignore[method-assign]

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

    def _find_or_method(self, fn: Any, args: tuple[Any, ...]) -> Callable[..., Any] | None:
        """:meth:`find` for a table with primitives that methods may bind: a bound method
        without a primitive of its own gets the primitive of the method it binds."""
        impl = Table.find(self, fn, args)
        if impl is None:
            kind = type(fn)
            if (kind is types.MethodType or kind in _BOUND_C) and fn.__name__ in self.names:
                return self._find_method(fn, args)
        return impl

    def _find_method(self, fn: Any, args: tuple[Any, ...]) -> Callable[..., Any] | None:
        """The primitive of the method bound method ``fn`` binds, given the object first."""
        found = unbind(fn)
        if found is None:
            return None
        method, receiver = found
        if id(method) not in self.entries:
            return None
        impl = self.find(method, (receiver, *args))
        return None if impl is None else MethodPrimitive(impl, receiver)

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
