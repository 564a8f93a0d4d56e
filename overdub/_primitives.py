"""Primitive tables: what a context class runs instead of a callable, by argument types.

``@MyCtx.primitive(fn, types=(A, B))`` records ``(types, impl)`` for ``fn`` on ``MyCtx`` only;
lookups merge the class's MRO, so subclasses inherit and may override (same ``fn`` and ``types``).
For a call, the candidates whose ``types`` match the positional arguments (``isinstance`` each;
``types=None`` matches any call) compete; the most specific wins: the one whose types are all
subclasses of every other candidate's.  A tagged argument is an instance of its value's classes
(as ``isinstance`` says inside the run) and, if the context itself tagged it, of ``Tagged``,
which counts as more specific than any class.  If no single candidate is most specific the call
is ambiguous, a ``TypeError`` naming both; a duplicate registration on one class replaces the older.

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
import sys
import threading
import types
from dataclasses import dataclass
from collections.abc import Callable, Sequence
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

    def matches(self, kinds: tuple[_Kind, ...]) -> bool:
        return self.types is None or (
            len(kinds) == len(self.types) and all(map(_instance_of, kinds, self.types)))

    def at_least_as_specific(self, other: Primitive, arity: int) -> bool:
        mine = self.types or (object,) * arity
        theirs = other.types or (object,) * arity
        # `Tagged` asks for the context's tagged values: narrower than any class of values.
        return all(a is Tagged or (b is not Tagged and issubclass(a, b))
                   for a, b in zip(mine, theirs))


# What dispatch sees of an argument: its type, or, for a value the context tagged,
# (Tagged, the type of its value).
_Kind = Any


def _instance_of(kind: _Kind, cls: type) -> bool:
    """Whether an argument of ``kind`` matches ``cls`` in ``types``: one the context tagged is
    an instance of ``Tagged`` and of its value's classes, as ``isinstance`` says in the run."""
    if type(kind) is tuple:
        return cls is Tagged or issubclass(kind[1], cls)
    return issubclass(kind, cls)


def checked_types(cls: type, fn: Any, types: Any) -> tuple[type, ...] | None:
    """``types`` as a primitive of ``cls`` for ``fn`` keeps it: None, or a tuple of classes
    from a class or a sequence of them (in order: one per positional argument; a set has no
    order to match arguments by, a string holds no classes); else a ``TypeError``."""
    if types is None:
        return None
    found = types
    if isinstance(types, type):
        found = (types,)
    elif isinstance(types, Sequence) and not isinstance(types, (str, bytes)):
        found = tuple(types)
    if type(found) is not tuple or not all(isinstance(t, type) for t in found):
        raise TypeError(f"{cls.__name__}.primitive({_name(fn)}): types must be None, a class "
                        f"or a sequence (tuple, list) of classes, one per positional argument; "
                        f"got {types!r}")
    return found


def register(cls: type, fn: Any, types: Any, impl: Callable[..., Any]) -> None:
    global current_generation
    if not callable(fn):
        raise TypeError(f"{cls.__name__}.primitive: {fn!r} is not callable, so it cannot be "
                        f"a primitive")
    if not callable(impl):
        raise TypeError(f"{cls.__name__}.primitive({_name(fn)}): the implementation {impl!r} "
                        f"is not callable")
    types = checked_types(cls, fn, types)
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
        # A tagged argument dispatches on its value's type, and matches `Tagged` too if the
        # tag is this context's (see _kind).  (Binary operators are spelled out:
        # `tuple(map(type, args))` is several times slower.)
        kinds: tuple[_Kind, ...]
        if len(args) == 2:
            a, b = args
            kinds = (type(a), type(b))
            if kinds[0] is Tagged or kinds[1] is Tagged:
                kinds = (self._kind(a), self._kind(b))
        else:
            kinds = tuple([type(arg) for arg in args])
            if Tagged in kinds:
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

    def _kind(self, arg: Any) -> _Kind:
        """What dispatch sees of a tagged argument: another context's tagged value is just its
        plain value (this context does not see that tag); one this context tagged is
        ``(Tagged, its value's type)``, matching both (see ``_instance_of``)."""
        own = False
        while type(arg) is Tagged:
            own = own or arg.owner is self.owner
            arg = arg.value
        return (Tagged, type(arg)) if own else type(arg)

    def _choose(self, entries: list[Primitive], kinds: tuple[_Kind, ...]
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
                f"types {tuple(map(_kind_name, kinds))}: types={_types(a)} and "
                f"types={_types(b)} both match and neither is more specific; register one for "
                f"the intersection")
        return best[0].impl


def _kind_name(kind: _Kind) -> str:
    return f"Tagged({kind[1].__name__})" if type(kind) is tuple else str(kind.__name__)


def _types(p: Primitive) -> str:
    return "None" if p.types is None else "(" + ", ".join(t.__name__ for t in p.types) + ")"


def _name(fn: Any) -> str:
    module = module_of(fn)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{module}.{name}" if module and module != "builtins" else name


def module_of(fn: Any) -> str:
    """The module users find ``fn`` in (``""`` if none): ``operator`` for ``_operator.mul`` and
    ``heapq`` for ``_heapq.heappush`` (C accelerators re-exported by a Python module), the class's
    module for a method descriptor such as ``list.append``."""
    func = fn if isinstance(fn, type) else getattr(fn, "__func__", fn)  # (a class: its own)
    module = getattr(func, "__module__", None)
    if module is None:
        module = getattr(getattr(func, "__objclass__", None), "__module__", None)
    if not isinstance(module, str):
        return ""
    if module.startswith("_"):
        public = sys.modules.get(module[1:])
        if public is not None and getattr(public, getattr(func, "__name__", ""), None) is func:
            return module[1:]
    return module


def add_note(exc: BaseException, note: str) -> None:
    """``note`` added to ``exc`` unless it has it already: an exception instance raised again
    (a hook raising one it keeps, run after run) says where it came from once."""
    if note in (getattr(exc, "__notes__", None) or ()):
        return
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    else:  # 3.10: PEP 678's attribute by hand (its tracebacks do not print it; pytest does)
        exc.__notes__ = [*getattr(exc, "__notes__", ()), note]  # type: ignore[attr-defined]
