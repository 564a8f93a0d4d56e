"""What the reverse scalar compiler's generated code (:mod:`._specialise`) calls at run time.

Each helper does what the context would do with the operation -- natively where the context
runs it natively (arithmetic on plain numbers, an item of a tuple, a differentiated value an
object holds as it is), through :meth:`ReverseContext.is_primitive`/``execute`` or the core
otherwise -- and calls of Python functions, bound methods and classes of Python code go to
their specialised versions (decided, and recorded for ``explain``, by the context's
``_specialised``).
"""

from __future__ import annotations

import collections
import functools
import operator
import types
from typing import Any

import numpy as np

from overdub import Tagged, carries_tags, keeps_heap_metadata, overdub

from .. import _rules
from .._array_methods import _replacement
from .._shared import _KEYED_READS, MISSING, class_attribute
from .._stores import STORES
from ._calls import _NOT_SIMPLE as NOT_SIMPLE

# values an arithmetic region computes with natively: plain numbers
_PLAIN = frozenset({float, int, bool, np.float64})
# Python's own attribute lookup (object's, and tuple's for named tuples): what _attr follows
_GETATTRIBUTE: Any = object.__getattribute__
_TUPLE_GETATTRIBUTE: Any = tuple.__getattribute__
_SETATTR: Any = object.__setattr__
_NEW: Any = object.__new__
_INIT: Any = object.__init__
_TUPLE_NEW: Any = tuple.__new__
_TUPLE_GETITEM: Any = tuple.__getitem__
_FIELD = type(collections.namedtuple("_Pair", "a b").__dict__["a"])  # a named tuple's field
#: what a method-calling site's lookup gives where the call is to be made by the site itself
#: (see _Compiler.method): no value an attribute can hold
_METHOD: Any = object()

# Calls of functions of one float that a region computes natively (see _regions._Graph.call),
# while their rules are the shipped ones (a rule the user registers wins: rebuilt on every
# change): id(fn) -> f'(x, out) as declared beside the rules (_rules.defscalar; None from it
# hands the point back to the rules).  Keyed by id alone: the rules' tables keep each function
# alive, so a live callee with that id is that function.
_CALLS: dict[int, Any] = {}
# for hvp's tapes (the records hold second partials): id(fn) -> (f'(x, out), f''(x, out)), the
# second derivative from fn's elementwise declaration (_rules.defelementwise); a function
# without one is left to the context, as its _second_step leaves it to the rules
_SECOND_CALLS: dict[int, tuple[Any, Any]] = {}


@_rules.on_change
def _call_tables() -> None:
    _CALLS.clear()
    _CALLS.update(_rules.scalar_partials(1))
    elementwise = _rules.declared_elementwise()
    _SECOND_CALLS.clear()
    _SECOND_CALLS.update({key: (partial, elementwise[key][2]) for key, partial in _CALLS.items()
                          if key in elementwise and elementwise[key][2] is not None})


def _through(ctx: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` as the context runs it from rewritten code: its own definition
    for what it takes as a primitive (the common case, without re-entering ``overdub``), else
    through the core (a Python function or operator method is recursed into)."""
    if ctx.is_primitive(fn, *args, **kwargs):
        return ctx.execute(fn, *args, **kwargs)
    return overdub(ctx, fn, *args, **kwargs)


def _bin(ctx: Any, op: Any, a: Any, b: Any) -> Any:
    if type(a) in _PLAIN and type(b) in _PLAIN:
        return op(a, b)
    if ctx.is_primitive(op, a, b):  # _through, inlined: arrays pass here every operation
        return ctx.execute(op, a, b)
    return overdub(ctx, op, a, b)


def _un(ctx: Any, op: Any, a: Any) -> Any:
    if type(a) in _PLAIN:
        return op(a)
    if ctx.is_primitive(op, a):
        return ctx.execute(op, a)
    return overdub(ctx, op, a)


def _compare(ctx: Any, op: Any, a: Any, b: Any) -> Any:
    if type(a) is not Tagged and type(b) is not Tagged and \
            (op is operator.is_ or op is operator.is_not or
             (type(a) in _PLAIN and type(b) in _PLAIN)):
        return op(a, b)
    return _through(ctx, op, a, b)


def _contains(ctx: Any, container: Any, item: Any) -> Any:
    return _through(ctx, operator.contains, container, item)


def _sub(ctx: Any, obj: Any, index: Any) -> Any:
    kind = type(obj)
    if kind is tuple or kind is list:
        return obj[index]  # what the context does for a native container
    if kind is dict and (type(index) is str or type(index) is int):
        item = obj[index]  # (a key of these types runs no code of the user's)
        if type(item) is Tagged:
            return item  # stored as it is (see _scalar_read): read so
    if kind is dict and type(index) is not Tagged and type(index) is not tuple and \
            not ctx._keyed_here(index):
        return ctx._scalar_read(obj, index)  # (what the context's execute does, unnested;
        # a tuple key may hold a differentiated value: see ReverseContext._keyed_here)
    if kind is Tagged and type(index) is int:
        return ctx._read(obj, index)
    return _through(ctx, operator.getitem, obj, index)


def _attr(ctx: Any, obj: Any, name: str, sites: list[Any] | None = None, site: int = 0,
          called: bool = False) -> Any:
    """``obj.name`` as the context reads it.  ``sites[site]``, when given, is the reading
    site's slot (see ``_Compiler.attribute``), set for the rest of the run (``ctx._sites``,
    wiped when it ends): to ``obj``'s class when its objects read ``name`` from their instance
    dict (no class in the MRO defines it: only a data descriptor, a ``__getattribute__`` or a
    ``__getitem__`` given to the class during the run would go unseen), or, for a named
    tuple's field, to ``(class, its dict, the field, its position)``.  At a site that calls
    the attribute (``called``: see ``_Compiler.method``), it is set for a method of the
    object's class."""
    kind = type(obj)
    if kind is types.ModuleType:
        value = getattr(obj, name)
        if callable(value):  # np.sin: nothing to look for (as ReverseContext.execute)
            return value
    elif kind is list or kind is dict:
        return getattr(obj, name)  # (their methods are C: a call of one is the context's)
    elif kind is not Tagged and (kind.__getattribute__ is _GETATTRIBUTE
                                 or kind.__getattribute__ is _TUPLE_GETATTRIBUTE):
        # a user object, read as Python reads it: a property's getter, a method (bound here,
        # specialised when called), a differentiated value stored in its __dict__ as it is
        # (see _setattr) or a named tuple's field; anything else (a plain value, whose
        # metadata the core may keep aside) through the context
        key = (kind, name)
        held = ctx._attributes.get(key)
        if held is not None and (held[1] is None or (
                held[1].get(name, MISSING) is held[0]
                and (not held[2] or not any(name in d for d in held[2])))):
            found = held[0]
        else:
            held = _class_attribute(ctx, key)
            found = held[0]
        if found is MISSING:
            value = getattr(obj, "__dict__", None)
            if type(value) is dict:
                value = value.get(name)
                if type(value) is Tagged and value.owner is ctx._ref:
                    if sites is not None and not called and sites[site] is None:
                        sites[site] = kind
                        ctx._sites.append((sites, site))
                    return value
        elif type(found) is types.FunctionType:
            own = getattr(obj, "__dict__", None)
            if type(own) is dict and name not in own:
                if called and sites is not None and not held[2] and sites[site] is None \
                        and ctx._specialised(found):
                    # (a method of the object's own class: the calling site calls its
                    # specialised version itself, see _Compiler.call)
                    sites[site] = (kind, held[1], found, ctx._specs[id(found)][1])
                    ctx._sites.append((sites, site))
                return types.MethodType(found, obj)
        elif type(found) is _FIELD:
            fields = getattr(kind, "_fields", ())
            if sites is not None and not called and not held[2] and sites[site] is None and \
                    name in fields and kind.__getitem__ is _TUPLE_GETITEM:
                # (a named tuple's field: the site reads the item at its position itself)
                sites[site] = (kind, held[1], found, fields.index(name))
                ctx._sites.append((sites, site))
            return found.__get__(obj, kind)  # an item of the tuple, as the context reads it
        elif type(found) is property and type(found.fget) is types.FunctionType and \
                getattr(kind, "__getattr__", None) is None:  # (AttributeError: __getattr__)
            return _call(ctx, found.fget, obj)
    return _through(ctx, getattr, obj, name)


def _class_attribute(ctx: Any, key: tuple[type, str]) -> tuple[Any, Any, tuple[Any, ...]]:
    """:func:`class_attribute`, remembered for the rest of the run in ``ctx._attributes`` (a
    model's parameters and methods are read at every step, and the lookup through the classes
    costs more than the read): ``(found, the class dict holding it, the dicts of the classes
    before that one in the MRO)``, which ``_attr`` asks again each time (the name still there,
    and in none before it), so a method or property replaced during the run, or given to a
    subclass over its base's, is seen.  A name no class defines is read from the instance (or
    the context) each time: only a data descriptor added to the class during the run, over a
    name its instances hold, would go unseen."""
    cls, name = key
    earlier: list[Any] = []
    for klass in cls.__mro__:
        holder = klass.__dict__
        found = holder.get(name, MISSING)
        if found is not MISSING:
            held: tuple[Any, Any, tuple[Any, ...]] = (found, holder, tuple(earlier))
            ctx._attributes[key] = held
            return held
        earlier.append(holder)
    missing: tuple[Any, Any, tuple[Any, ...]] = (MISSING, None, ())
    ctx._attributes[key] = missing
    return missing


def _constructed_here(ctx: Any, cls: type) -> bool:
    """Whether the specialised code may run ``cls(...)`` as ``type.__call__`` does: a class of
    Python code (its ``__new__`` or ``__init__``, or both) without rules of its own.  Decided
    once a run (``ctx._classes``: a state's class is made at every step)."""
    decided: bool | None = ctx._classes.get(cls)
    if decided is not None:
        return decided
    held: Any = cls
    new, init = held.__new__, held.__init__
    if new is _NEW:
        python = type(init) is types.FunctionType  # (object's own __new__ refuses arguments)
    else:
        python = type(new) is types.FunctionType and \
            (init is _INIT or type(init) is types.FunctionType)
    ctx._classes[cls] = decided = python and _rules.vjp_rules(cls) is None and \
        not _rules.is_nondifferentiable(cls) and not carries_tags(cls)
    return decided


def _construct(ctx: Any, cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``cls(*args, **kwargs)`` as ``type.__call__`` runs it, its Python ``__new__`` and
    ``__init__`` specialised."""
    held: Any = cls
    new, init = held.__new__, held.__init__
    obj = _NEW(cls) if new is _NEW else _call(ctx, new, cls, *args, **kwargs)
    if init is not _INIT and isinstance(obj, cls):
        out = _call(ctx, init, obj, *args, **kwargs)
        if out is not None:
            raise TypeError(f"__init__() should return None, not '{type(out).__name__}'")
    return obj


def _setitem(ctx: Any, obj: Any, index: Any, value: Any) -> None:
    kind = type(obj)
    if (kind is dict or kind is list) and type(value) is Tagged and value.owner is ctx._ref:
        # the context's store, as its is_primitive answers for a differentiated value and its
        # execute makes it (its first test): stored as it is
        ctx._setitem(operator.setitem, obj, index, value)
    else:
        _through(ctx, operator.setitem, obj, index, value)


def _setattr(ctx: Any, obj: Any, name: str, value: Any) -> None:
    setter: Any = type(obj).__setattr__
    if type(value) is not Tagged or setter is not _SETATTR or \
            not _store_own(ctx, obj, name, value):
        _through(ctx, setattr, obj, name, value)


def _store_own(ctx: Any, obj: Any, name: str, value: Tagged, raw: bool = False) -> bool:
    """``obj.name = value`` for a differentiated ``value`` into a user object's ``__dict__``:
    stored as it is, as the context stores a container of such values (it puts the plain
    value back when the run ends), so that the specialised code reads it back natively;
    False (nothing done) for anything else: a data descriptor, an object without a
    ``__dict__`` or with a ``__getattribute__`` of its own, a class or a module.  ``raw``:
    the store is ``object.__setattr__``'s, past the class's own ``__setattr__`` (a frozen
    dataclass), and so is the putting back."""
    kind = type(obj)
    if value.owner is not ctx._ref or kind is Tagged or issubclass(kind, (type, types.ModuleType)):
        return False
    getter: Any = kind.__getattribute__
    if getter is not _GETATTRIBUTE:
        return False  # (a __getattribute__ of Python code reads it: the core runs that)
    found = class_attribute(kind, name)
    if found is not MISSING and (hasattr(type(found), "__set__")
                                  or hasattr(type(found), "__delete__")):
        return False
    if type(getattr(obj, "__dict__", None)) is not dict:
        return False
    ctx._setattr(obj, name, value, raw)
    return True


def _iter(ctx: Any, value: Any) -> Any:
    kind = type(value)
    if kind is range or kind is tuple or kind is list or kind is str or kind is dict:
        return iter(value)
    return _through(ctx, iter, value)


def _unpack(ctx: Any, value: Any) -> Any:
    kind = type(value)
    if kind is tuple or kind is list:
        return value
    return _through(ctx, iter, value)


def _star(ctx: Any, value: Any) -> tuple[Any, ...]:
    """``*value`` in a call or a display: its items now (Python iterates it where it stands)."""
    if type(value) is tuple:
        return value
    return tuple(value if type(value) is list else _through(ctx, iter, value))


def _keywords(ctx: Any, value: Any) -> dict[Any, Any]:
    """``**value`` in a call: a copy of a dict, or a mapping read through the context."""
    if type(value) is dict:
        return dict(value)
    out: dict[Any, Any] = _through(ctx, dict, value)
    return out


_BUILTIN = types.BuiltinMethodType  # (a C method bound to its object: k.append)
# (list or dict, a method of STORES) -> the rules' version at which ReverseContext.execute
# was found to take a call of it that stores a differentiated value straight to its _store
_STORED: dict[tuple[type, str], int] = {}


def _stored_as_given(fn: Any) -> bool:
    """Whether ``execute`` makes ``fn(*args)`` -- ``fn`` a store method of a list or dict,
    bound to it, a differentiated value among ``args`` -- by ``_store``: unless the method is
    a keyed read (``setdefault``) or the user gave it rules or a stand-in (every other path
    of ``execute`` is for other functions)."""
    key = (type(fn.__self__), fn.__name__)
    if _STORED.get(key) == _rules.version:
        return True
    if fn.__name__ in _KEYED_READS or \
            _rules.method_with_rules(fn, _rules.vjp_rules) is not None or \
            _replacement(fn) is not None:
        return False
    _STORED[key] = _rules.version
    return True


def _native_items(fn: Any, args: tuple[Any, ...]) -> bool:
    """Whether ``fn(*args)`` -- ``fn`` one of ``zip``, ``enumerate``, ``reversed``, ``tuple``,
    ``list`` -- reads only lists and tuples (a generator for ``tuple`` and ``list``; an int
    start for ``enumerate``).  These builtins iterate their arguments as a list's or tuple's
    own iterator does and build an iterator or a sequence of the items as they are; the
    context leaves such a call to the core, which makes it natively (the items are this
    context's values as it stores them, in lists and tuples as they are: as _sub and _iter
    read them).  A generator is the specialised code's, or one the core runs."""
    if fn is zip:
        return all(type(a) is tuple or type(a) is list for a in args)
    if not args or len(args) > (2 if fn is enumerate else 1):
        return False
    kind = type(args[0])
    if len(args) == 2 and type(args[1]) is not int:
        return False
    return kind is tuple or kind is list or \
        (kind is types.GeneratorType and (fn is tuple or fn is list))


# the comparisons sorted, list.sort, min and max make of their items
_ORDERINGS = ("__lt__", "__gt__", "__le__", "__ge__")


def _compared_in_python(fn: Any, args: tuple[Any, ...]) -> bool:
    """Whether ``fn(*args)`` -- ``sorted``, ``min``, ``max`` (of an iterable or of several
    items) or ``items.sort`` -- orders a list or tuple of objects at least one of which
    compares by Python code of its class (``__lt__`` reading ``float(self)``)."""
    if fn is min or fn is max:
        items = args[0] if len(args) == 1 else args
    elif fn is sorted:
        items = args[0] if len(args) == 1 else None
    else:
        items = fn.__self__ if not args else None
    if type(items) is not list and type(items) is not tuple:
        return False
    for item in items:
        kind = type(item)
        if kind is not Tagged and kind not in _PLAIN and any(
                type(getattr(kind, name, None)) is types.FunctionType for name in _ORDERINGS):
            return True
    return False


class _Compared:
    """An item as ``sorted``, ``list.sort``, ``min`` and ``max`` compare it: through the
    context (see :func:`_ordered`)."""

    __slots__ = ("ctx", "item")

    def __init__(self, ctx: Any, item: Any) -> None:
        self.ctx = ctx
        self.item = item

    def __lt__(self, other: _Compared) -> Any:
        return _through(self.ctx, operator.lt, self.item, other.item)

    def __gt__(self, other: _Compared) -> Any:
        return _through(self.ctx, operator.gt, self.item, other.item)


def _ordered(ctx: Any, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``fn(*args, **kwargs)`` (see :func:`_compared_in_python`) with the items compared
    through the context.  This code stores a differentiated value into an object as it is
    (:func:`_store_own`), so a comparison the builtin made natively would run the class's
    ``__lt__`` behind the context's back on it, and ``float(self)`` there would be refused.
    The builtin compares the items wrapped as its key: the same comparisons (``<`` for
    sorted and min, ``>`` for max, Python's reflection kept by the operator), the same
    order and stability, and the result holds the items themselves."""
    def key(item: Any) -> _Compared:
        return _Compared(ctx, item)

    return fn(*args, key=key, **{name: v for name, v in kwargs.items() if name != "key"})


def _call(ctx: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
    kind = type(fn)
    if kind is types.FunctionType:
        found = ctx._specs.get(id(fn))  # this run's (a function called again and again)
        if found is not None and found[0] is fn:
            if found[1] is not None:
                return found[1](ctx, *args, **kwargs)
        elif ctx._specialised(fn):  # (decided, and recorded for explain, by the context)
            return ctx._specs[id(fn)][1](ctx, *args, **kwargs)
    elif kind is types.MethodType and type(fn.__func__) is types.FunctionType:
        func = fn.__func__  # model.step(x): step's specialised version, the object first
        found = ctx._specs.get(id(func))
        if found is not None and found[0] is func:
            if found[1] is not None:
                return found[1](ctx, fn.__self__, *args, **kwargs)
        elif ctx._specialised(func):
            return ctx._specs[id(func)][1](ctx, fn.__self__, *args, **kwargs)
    elif kind is functools.partial:  # step(*state): its function's call, as the core makes it
        return _call(ctx, fn.func, *fn.args, *args, **{**fn.keywords, **kwargs})
    elif kind is type and _constructed_here(ctx, fn):
        return _construct(ctx, fn, args, kwargs)
    elif kind is type and (fn is zip or fn is enumerate or fn is reversed or fn is tuple
                           or fn is list) and not kwargs and not ctx.nested and \
            _native_items(fn, args):
        return fn(*args)  # zip(state, k): the context leaves it to the core, which does so
        # (under an enclosing context, through that one: not here)
    elif fn is dict and len(args) == 1 and not kwargs and type(args[0]) is dict and \
            not ctx.nested and not keeps_heap_metadata(ctx):
        # dict(s): the context leaves it to the core, which copies it natively (and the
        # metadata it keeps of the items, here none)
        return dict(args[0])
    elif kind is _BUILTIN and not kwargs and fn.__name__ in STORES and \
            (type(fn.__self__) is list or type(fn.__self__) is dict) and \
            any(map(ctx._carries, args)) and _stored_as_given(fn):
        # k.append({"x": v}): a store of a differentiated value, the context's own (as its
        # is_primitive answers for one), made as its execute makes it
        return ctx._store(fn, args, kwargs)
    elif fn is _TUPLE_NEW and not kwargs and len(args) == 2 and type(args[1]) is tuple and \
            isinstance(args[0], type) and issubclass(args[0], tuple):
        return _TUPLE_NEW(*args)  # a named tuple's items, stored as they are (as the context)
    elif fn is range and not kwargs and all(type(a) is int for a in args):
        return range(*args)
    elif (fn is np.array or fn is np.asarray or fn is np.stack) and not kwargs and \
            len(args) == 1 and (type(args[0]) is list or type(args[0]) is tuple) and \
            not ctx.nested:
        stacked = ctx._stacked_numbers(fn, args[0])  # np.array([a, b, c]): a small state
        if stacked is not NOT_SIMPLE:
            return stacked
    elif fn is len and not kwargs and len(args) == 1 and type(args[0]) is not Tagged:
        return len(args[0])
    elif (fn is sorted or fn is min or fn is max or (kind is _BUILTIN and fn.__name__ == "sort"
                                                   and type(fn.__self__) is list)) and \
            kwargs.get("key") is None and _compared_in_python(fn, args):
        return _ordered(ctx, fn, args, kwargs)
    elif fn is _SETATTR and not kwargs and len(args) == 3 and type(args[2]) is Tagged and \
            type(args[1]) is str and _store_own(ctx, args[0], args[1], args[2], raw=True):
        return None  # object.__setattr__(self, name, x): a frozen dataclass's __init__
    return _through(ctx, fn, *args, **kwargs)
