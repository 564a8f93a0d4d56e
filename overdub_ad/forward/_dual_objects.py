"""The dual route's containers and objects: what this run created, and what it may do with
them (:mod:`._dual`).

Values with tangents go into containers and objects *boxed* (a :class:`._dual_numbers._Dual`
of the run's level) and come out unboxed wherever the dual code reads them (items, attributes,
iteration, unpacking).  Writes -- items, attributes, ``append`` and the other mutating methods
-- are followed only on lists, dicts and objects that this run created (an identity table of
them, :func:`_new`, kept for the outermost run, so no identity is reused while it lasts):
anything that existed before the run is written only by the general mode, which reruns from
the start, so the route stops *before* such a write.  Objects of plain classes are created
here (``object.__new__`` and the dual of their ``__init__``), named tuples by the dual of their
``__new__`` (their tangents a tuple, as a tuple's); attribute reads follow the instance dict,
slots, named-tuple fields, methods (bound: the call runs the dual of the function) and
properties (the dual of the getter), and record at the reading site how the class's objects
read that name, for the site to read it so itself until the outermost call ends.  What runs
Python code the route cannot see (``__getattr__``, ``__setattr__``, descriptors of user
classes, metaclasses) is a stop.  ``zip`` and ``enumerate`` of tuples and lists with their
tangents beside them keep the tangents beside the iterator too (:class:`_Zipped`), in step.
"""

from __future__ import annotations

import collections
import inspect
import itertools
import threading
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from overdub import opaque

from .._shared import MISSING, class_attribute
from ._dual_numbers import _box, _Deopt, _Dual, _Level, _plain, _unbox, _zero
from ._pass_common import (_ATTR_FIELD, _ATTR_GETTER, _ATTR_GETTER_CLASS, _ATTR_INDEX,
                           _ATTR_NATIVE, _FILLED, _NATIVE_SITES, _TUPLES)


class _Run(threading.local):
    """Per thread: how many specialised ``jvp`` calls are running (nested ones stop instead of
    declining), and the objects the innermost one created, by id (None until it creates one:
    most runs create none, and the outermost ``jvp`` only clears what was made).  A nested
    ``jvp`` starts a table of its own and, when it ends, hands what it made to the run it is
    nested in (:func:`hand_over`): it may write only into what it made, as the outermost may
    (a value of its level stored into an enclosing run's list would outlive it, boxed, where
    the general mode keeps the value without the inner tangent), and no identity is reused
    while the outermost lasts."""

    depth = 0
    fresh: dict[int, Any] | None = None


_RUN = _Run()

#: The dual of a Python function called with values and tangents, ``(f, args, dargs,
#: kwargs, dkwargs) -> (out, tangent)`` at a level (:mod:`._dual` sets it: the calls are its).
CALL: list[Callable[..., tuple[Any, Any]]] = []


@opaque
def _fresh(obj: Any) -> bool:
    """Whether this run created ``obj`` (a list, dict, set or object it may write), or a run
    nested in it that has ended (not an enclosing run: see :class:`_Run`)."""
    fresh = _RUN.fresh
    return fresh is not None and fresh.get(id(obj)) is obj


def _register(obj: Any) -> Any:
    fresh = _RUN.fresh
    if fresh is None:
        if not _RUN.depth:
            raise _Deopt("a container created outside a specialised run")
        fresh = _RUN.fresh = {}
    fresh[id(obj)] = obj
    return obj


def hand_over(enclosing: dict[int, Any] | None) -> None:
    """End a nested run: the objects it made become those of the run it is nested in, whose
    own (``enclosing``) are this thread's again."""
    made = _RUN.fresh
    if made is None or enclosing is None:
        _RUN.fresh = made if enclosing is None else enclosing
        return
    if len(made) > len(enclosing):
        made, enclosing = enclosing, made
    enclosing.update(made)
    _RUN.fresh = enclosing


@opaque
def _new(obj: Any) -> Any:
    """A list, dict or set the dual code creates (``obj``, or a new one of the type ``obj``),
    recorded as this run's."""
    return _register(obj() if type(obj) is type else obj)


_MEMBER = type(type.__dict__["__dict__"])  # getset descriptors...
_SLOT = types.MemberDescriptorType
_FIELD = type(collections.namedtuple("_N", "a").__dict__["a"])  # a named tuple's field
_HEAPTYPE = 1 << 9  # a class defined in Python (builtin types are not)


def _namedtuple(cls: type) -> bool:
    return tuple in cls.__mro__ and cls is not tuple and isinstance(
        class_attribute(cls, "_fields"), tuple)


def _plain_class(cls: Any) -> bool:
    """Whether attribute reads and writes of ``cls``'s instances run no Python code of their
    own (no metaclass, ``__getattribute__``, ``__getattr__`` or ``__setattr__`` of theirs).
    Without a metaclass, the class's own attribute lookup (CPython's cached one) finds what
    its MRO's dicts hold for these names (``type`` defines neither)."""
    return type(cls) is type and cls.__getattribute__ in _GENERIC and \
        not hasattr(cls, "__getattr__")


_GENERIC = (vars(object)["__getattribute__"], vars(tuple)["__getattribute__"])


def _attribute(level: _Level, site: int, obj: Any, dobj: Any, name: str) -> tuple[Any, Any]:
    """``obj.name`` of an object of a user class (see the module docstring); the ``site``
    records how to read the name from the class's objects next time, where that runs no
    Python code the route does not see (see ``_pass_common``)."""
    cls = type(obj)
    if not _plain_class(cls) or cls in INTERNAL:
        raise _Deopt(f"{cls.__name__}.{name}: a class whose attribute reads run code of its own")
    found = getattr(cls, name, MISSING)  # a field read first, by the class's cached lookup
    if type(found) is not _FIELD:  # (a field descriptor gives itself on the class)
        found = class_attribute(cls, name)
    kind = type(found)
    if kind is _FIELD and _namedtuple(cls):
        value = getattr(obj, name)
        index = cls._fields.index(name)
        _record(site, _ATTR_FIELD, cls, _ATTR_INDEX, index)
        if type(dobj) is tuple:
            return value, dobj[index]
        return _unbox(level, value)
    if not _zero(dobj):
        raise _Deopt(f"{cls.__name__}.{name}: an attribute of a differentiated object")
    if kind is property:
        getter = found.fget
        if type(getter) is not types.FunctionType:
            raise _Deopt(f"{cls.__name__}.{name}: a property without a Python getter")
        out = CALL[0](level, getter, (obj,), (0.0,), None, None)
        if not _NATIVE_SITES[site] and getter.__code__.co_argcount == 1 and \
                not getter.__code__.co_flags & inspect.CO_GENERATOR:
            # (a native site would call the getter, not its dual; the site gives the getter
            # the tangent of its one parameter)
            _record(site, _ATTR_GETTER_CLASS, cls, _ATTR_GETTER, getter)
        return out
    if kind is _SLOT:
        _record(site, _ATTR_NATIVE, cls)
        return _unbox(level, found.__get__(obj, cls))
    if found is not MISSING and (hasattr(kind, "__set__") or hasattr(kind, "__delete__")):
        raise _Deopt(f"{cls.__name__}.{name}: a data descriptor")
    native = found is MISSING or kind in _NATIVE_READS or (
        kind is classmethod and type(found.__func__) is types.FunctionType) or not (
        hasattr(kind, "__get__"))
    own = getattr(obj, "__dict__", None)
    if own is not None and type(own) is dict and name in own:
        if native:
            _record(site, _ATTR_NATIVE, cls)
        return _unbox(level, own[name])
    if found is MISSING:
        return getattr(obj, name), 0.0  # raises AttributeError, as Python does
    if native:
        _record(site, _ATTR_NATIVE, cls)
    if kind is types.FunctionType:
        return types.MethodType(found, obj), 0.0
    if kind is staticmethod or kind is classmethod:
        return found.__get__(obj, cls), 0.0
    if hasattr(kind, "__get__") and kind not in (types.BuiltinFunctionType, _MEMBER):
        raise _Deopt(f"{cls.__name__}.{name}: a descriptor of a user class")
    return _unbox(level, getattr(obj, name))


# Kinds of class attributes whose read from an instance runs no Python code (a function's
# ``__get__`` binds it, a static method's gives the function)
_NATIVE_READS = frozenset((types.FunctionType, staticmethod, types.BuiltinFunctionType))


def _record(site: int, table: list[Any], cls: type, extra: list[Any] | None = None,
            value: Any = None) -> None:
    """Record at ``site`` of the dual code that objects of ``cls`` are read as ``table``
    says (and ``extra``'s value for it), until the outermost call ends."""
    table[site] = cls
    if extra is not None:
        extra[site] = value
    _FILLED.append(site)


@opaque
def _setattr(level: _Level, obj: Any, name: str, v: Any, dv: Any) -> None:
    """``obj.name = v`` on an object this run created, ``v`` boxed; a stop before writing
    anything else."""
    cls: Any = type(obj)  # (its __setattr__ compared below: a function of the class)
    if not _fresh(obj):
        raise _Deopt(f"attribute {name!r} written on a {cls.__name__} that existed before the "
                     f"run")
    if cls.__setattr__ is not object.__setattr__:
        raise _Deopt(f"attribute {name!r} written on a {cls.__name__}: its own __setattr__")
    _write_attribute(level, obj, name, v, dv)


def _write_attribute(level: _Level, obj: Any, name: str, v: Any, dv: Any) -> None:
    """``object.__setattr__(obj, name, v)`` on an object this run created (the generated
    ``__init__`` of a frozen dataclass writes so)."""
    cls = type(obj)
    found = class_attribute(cls, name) if type(cls) is type else MISSING
    if not _fresh(obj) or (found is not MISSING and type(found) is not _SLOT and (
            hasattr(type(found), "__set__") or hasattr(type(found), "__delete__"))):
        raise _Deopt(f"attribute {name!r} written through a descriptor or on an object that "
                     f"existed before the run")
    object.__setattr__(obj, name, _stored(level, v, dv))


def _stored(level: _Level, v: Any, dv: Any) -> Any:
    """``v`` as a list, dict, cell or object of this run holds it: boxed where it has a
    tangent, a float array with its tangent array too (unboxed where it is read)."""
    if type(v) is np.ndarray and type(dv) is np.ndarray:
        return _Dual(level, v, dv)
    return _box(level, v, dv)


def _key_ok(key: Any) -> bool:
    """A key whose hash and comparison run no Python code and carry no tangent."""
    kind = type(key)
    if kind is tuple:
        return all(_key_ok(k) for k in key)
    return kind in _KEYS


_KEYS = frozenset((str, int, float, bool, bytes, type(None), complex, np.int64, np.float64))


@opaque
def _setitem(level: _Level, obj: Any, key: Any, v: Any, dv: Any) -> None:
    """``obj[key] = v`` into a list or dict this run created, ``v`` boxed; a stop before
    writing into anything else."""
    kind = type(obj)
    if not ((kind is list or kind is dict) and _fresh(obj)):
        raise _Deopt(f"an item written into a {kind.__name__} that existed before the run"
                     if kind in (list, dict) else f"an item written into a {kind.__name__}")
    if type(key) is slice and kind is list:
        if type(v) not in (list, tuple):
            raise _Deopt("a slice of a list assigned from an iterator")
        obj[key] = [_box(level, e, t) for e, t in zip(*_items(level, v, dv))]
        return
    if not _key_ok(key):
        raise _Deopt("an item written under a key whose hash or comparison runs code")
    obj[key] = _stored(level, v, dv)


def _items(level: _Level, value: Any, dvalue: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The items of a tuple, list, named tuple, range, string or array (its elements, or
    rows) with their tangents, as two tuples (items unboxed); a stop for anything whose
    iteration runs Python code."""
    kind = type(value)
    if type(dvalue) is tuple and isinstance(value, (tuple, list)):
        return tuple(value), dvalue
    if kind is tuple or kind is list or (isinstance(value, tuple) and _namedtuple(kind)):
        if dvalue is not None and not _zero(dvalue):
            raise _Deopt(f"a {kind.__name__} with a tangent of its own")
        parts = [_unbox(level, e) for e in value]
        return tuple(p for p, _ in parts), tuple(t for _, t in parts)
    if kind is np.ndarray and value.ndim:  # (elements, or rows: views, only read)
        if type(dvalue) is np.ndarray:
            batch = dvalue.ndim - value.ndim  # (jacfwd's directions lead: items behind them)
            if not batch:
                return tuple(value), tuple(dvalue)
            if batch > 0:
                lead = (slice(None),) * batch
                return tuple(value), tuple(dvalue[lead + (i,)] for i in range(len(value)))
        elif dvalue is None or _zero(dvalue):
            return tuple(value), (0.0,) * len(value)
    if kind in (range, str, bytes) and (dvalue is None or _zero(dvalue)):
        items = tuple(value)
        return items, (0.0,) * len(items)
    raise _Deopt(f"items of a {kind.__name__} taken out")


@opaque
def _star(level: _Level, value: Any, dvalue: Any) -> tuple[Any, Any]:
    """``*value`` in a call, or the right side of an unpacking assignment: its items and
    their tangents as tuples."""
    return _items(level, value, dvalue)


# C functions that only move values around: they may take containers holding boxed values
# (their results hold them as they were); the movers also take tuples and lists with tangents
# (boxed for them)
_MOVERS = frozenset(map(id, (zip, enumerate, reversed, list, tuple, dict, sorted, iter)))
_STRUCTURAL = _MOVERS | frozenset(map(id, (sum, min, max, len)))
_CONSUMING = frozenset(map(id, (tuple, list, sorted, sum, min, max)))
_VIEWS: tuple[type, ...] = (type({}.keys()), type({}.values()), type({}.items()))
_ITERATORS = frozenset((zip, enumerate, reversed, type(iter([])), type(iter(())), *_VIEWS))


@opaque
def _consuming(f: Any) -> None:
    """``f(x for ...)`` runs as ``f([x for ...])`` only where ``f`` consumes the generator
    whole and in order (checked before the items are computed)."""
    if id(f) not in _CONSUMING:
        raise _Deopt(f"a generator expression given to {getattr(f, '__name__', f)!r}")


def _holds(x: Any, depth: int = 2) -> bool:
    """Whether ``x`` is a list, dict, set or iterator that may hold values boxed by the dual
    (tuples in the dual's locals carry their tangents beside them)."""
    kind = type(x)
    if kind in _ITERATORS:
        return True
    if depth and (kind is list or kind is dict or kind is set):
        items = x.values() if kind is dict else x
        return any(type(e) is _Dual or (type(e) is tuple and _holds(list(e), depth - 1))
                   or _holds(e, depth - 1) for e in items)
    return False


class _Generator:
    """A generator the dual code made by calling a generator function's dual, which yields
    ``(item, tangent)`` pairs at the level of the call that made it.  Only a ``for`` loop of
    the dual code iterates it (:func:`pairs`): anything else done with it -- ``next``,
    ``list``, a C function, a return -- stops, as for any object whose class runs Python
    code."""

    __slots__ = ("level", "pairs")

    def __init__(self, level: _Level, pairs: Any) -> None:
        self.level, self.pairs = level, pairs


def generated_pairs(level: _Level, generator: _Generator) -> Any:
    """The ``(item, tangent)`` pairs of ``generator`` for a loop at ``level``: as they come
    at the generator's own level, its items boxed at another (a generator made by an
    enclosing derivative's code and iterated inside a nested one)."""
    if generator.level is level:
        return generator.pairs
    return ((_box(generator.level, v, t), 0.0) for v, t in generator.pairs)


class _Managed:
    """The context manager of a ``contextlib.contextmanager`` function called by the dual
    code: its function's generator, a :class:`_Generator`.  Only a ``with`` statement of the
    dual code uses it (:func:`enter`, :func:`leave`)."""

    __slots__ = ("generator", "entered")

    def __init__(self, generator: _Generator) -> None:
        self.generator, self.entered = generator, False


#: The classes of this module's objects, which the user's code must not see (their type,
#: their attributes): the dual route stops where it would.
INTERNAL = frozenset((_Generator, _Managed))


def managed(level: _Level, f: Any, args: tuple[Any, ...], dargs: tuple[Any, ...],
            kwargs: dict[str, Any] | None, dkwargs: dict[str, Any] | None) -> tuple[Any, Any]:
    """A call of the function ``contextlib.contextmanager`` made of the generator function
    ``f``: a :class:`_Managed` of the generator of ``f``'s dual."""
    if type(f) is not types.FunctionType:
        raise _Deopt("a contextmanager of something other than a Python function")
    generator, _ = CALL[0](level, f, args, dargs, kwargs, dkwargs)
    if type(generator) is not _Generator:
        raise _Deopt("a contextmanager function whose generator has no dual")
    return _Managed(generator), 0.0


@opaque
def enter(level: _Level, manager: Any, dmanager: Any) -> tuple[Any, Any, Any]:
    """``with manager as v``: ``(v, its tangent, the pairs to finish)`` -- the first pair
    its generator yields (a ``contextmanager``'s ``__enter__``).  The dual code leaves the
    block only by its end (a block with ``return``, ``break`` or ``continue`` is not
    followed), or by an exception, which ends the specialised run: the general mode then runs
    the call from the start."""
    if type(manager) is not _Managed or manager.entered:
        raise _Deopt(f"a with statement on a {type(manager).__name__}")
    manager.entered = True
    pairs = generated_pairs(level, manager.generator)
    for value, tangent in pairs:
        return value, tangent, pairs
    raise _Deopt("a contextmanager's generator that did not yield")


@opaque
def leave(pairs: Any) -> None:
    """The end of a ``with`` block: the rest of the generator (``__exit__`` with no
    exception), which must not yield again."""
    for _ in pairs:
        raise _Deopt("a contextmanager's generator that yielded twice")


class _Zipped:
    """The tangent of a ``zip`` or ``enumerate`` of tuples and lists whose items' tangents the
    dual tracks (a tuple of them beside the value): the tangents of the items it yields, in
    step with it -- a tuple per item, None where the item's value holds its own (boxed in a
    list this run made: unboxed when it comes).  Only iteration in step follows it (a ``for``
    loop, a call that moves the items: :func:`_zipped_items`); any other use stops, as for a
    tangent on a value that is not a number.  Iterating the value's items stays lazy and
    reads the containers themselves, so a loop that changes a list it zips sees the change,
    as Python's ``zip`` does."""

    __slots__ = ("tangents", "whole")

    def __init__(self, tangents: Any, whole: bool) -> None:
        self.tangents, self.whole = tangents, whole


_INERT_ITERABLES = frozenset((tuple, list, range, str, bytes, dict))


def _zipped(level: _Level, f: Any, args: tuple[Any, ...], dargs: tuple[Any, ...]
            ) -> tuple[Any, Any] | None:
    """``zip(*args)`` or ``enumerate(*args)`` with a :class:`_Zipped` tangent, where an
    argument is a tuple or list with its tangents beside it and the others are containers
    whose iteration runs no Python code (None: the caller boxes them instead)."""
    start = ()
    if f is enumerate:
        if len(args) == 2 and type(args[1]) is int and _zero(dargs[1]):
            args, dargs, start = args[:1], dargs[:1], args[1:]
        elif len(args) != 1:
            return None  # (a start that is not an int: its __index__ is Python's)
    parts: list[Any] = []
    tracked = False
    for a, d in zip(args, dargs):
        kind = type(a)
        if type(d) is tuple and (kind is tuple or kind is list or _namedtuple(kind)) \
                and len(d) == len(a):
            parts.append(d)
            tracked = True
        elif kind is np.ndarray and type(d) is np.ndarray and a.ndim:
            parts.append(_items(level, a, d)[1])  # (its elements' or rows' tangents)
            tracked = True
        elif (d is None or _zero(d)) and (kind in _INERT_ITERABLES or _namedtuple(kind)
                                          or (kind is np.ndarray and a.ndim)):
            parts.append(None)
        else:
            return None
    if not tracked:
        return None
    if f is enumerate:
        return enumerate(*args, *start), _Zipped(zip(itertools.repeat(0.0), parts[0]), True)
    whole = all(p is not None for p in parts)
    return zip(*args), _Zipped(zip(*[itertools.repeat(None) if p is None else p
                                      for p in parts]), whole)


def _zipped_items(level: _Level, iterable: Any, tangents: _Zipped) -> Any:
    """``(items, their tangents)`` for each item of a zip or enumerate with a
    :class:`_Zipped` tangent, in step."""
    if tangents.whole:
        return zip(iterable, tangents.tangents)
    return _unboxing(level, zip(iterable, tangents.tangents))


def _unboxing(level: _Level, pairs: Any) -> Any:
    for items, tangents in pairs:
        values = []
        ts = []
        for v, t in zip(items, tangents):
            if t is None:
                v, t = _unbox(level, v)
            values.append(v)
            ts.append(t)
        yield tuple(values), tuple(ts)


def _structural(level: _Level, f: Any, args: tuple[Any, ...], dargs: tuple[Any, ...],
                kwargs: dict[str, Any] | None) -> tuple[Any, Any] | None:
    """A C call on containers holding values with tangents (boxed, or a tuple's tangents):
    ``zip``, ``sum``, ``min``, ``list``... run on the boxed values, their result unboxed (a
    list or dict they make is this run's); None where no argument holds any."""
    if (f is zip or f is enumerate) and not kwargs:
        zipped = _zipped(level, f, args, dargs)
        if zipped is not None:
            return zipped
    if (f is tuple or f is list) and len(args) == 1 and not kwargs and \
            type(args[0]) is np.ndarray and type(dargs[0]) is np.ndarray and args[0].ndim:
        # tuple(p[:2]), list(p): the elements (or rows) with their tangents beside them, or
        # boxed in a list of this run's
        items, tangents = _items(level, args[0], dargs[0])
        if f is tuple:
            return items, tangents
        return _register([_stored(level, v, t) for v, t in zip(items, tangents)]), 0.0
    moved = id(f) in _MOVERS
    if _stacks(f) and len(args) == 1 and \
            not kwargs and type(args[0]) in (list, tuple) and (
                (type(dargs[0]) is tuple and not _zero(dargs[0])) or _holds(args[0])):
        return _stacked(level, f, args[0], dargs[0])
    if not any((moved and type(d) is tuple and not _zero(d)) or _holds(a)
               for a, d in zip(args, dargs)):
        return None
    if id(f) not in _STRUCTURAL or kwargs:
        raise _Deopt(f"a container holding differentiated values given to "
                     f"{getattr(f, '__name__', f)!r}")
    values = tuple(_boxed_argument(level, a, d) for a, d in zip(args, dargs))
    if f is min or f is max:
        items = values[0] if len(values) == 1 else values
        if type(items) not in (list, tuple):
            raise _Deopt("min or max of an iterator of differentiated values")
        plain = [_plain(e) for e in items]
        if any(a == b for k, a in enumerate(plain) for b in plain[k + 1:]):
            raise _Deopt("min or max with a tie between differentiated values")
    out = f(*values)
    if type(out) is list or type(out) is dict:
        return _register(out), 0.0
    return _unbox(level, out)


def _stacks(f: Any) -> bool:
    """Whether ``f`` stacks a list of numbers (or of arrays of one shape) into an array, as
    :func:`_stacked` follows it: the dual code gives such a call a list display's items with
    their tangents beside them, as a tuple display's (no list of boxed values made and
    unboxed again: ``np.array([a, b, c])``, a small state built at every step)."""
    return f is np.array or f is np.asarray or f is np.stack


def _stacked(level: _Level, f: Any, items: Any, ditems: Any) -> tuple[Any, Any]:
    """``np.array([a, b, c])`` (or ``np.asarray``, ``np.stack``) of numbers, or of float
    arrays of one shape, some with tangents (a state built from its components at every
    step): ``f`` of their values, and their tangents stacked as ``f`` stacks the values, behind
    the batch dimensions of jacfwd's directions (zeros for a constant); a row that is a tuple
    or list of them is stacked first; anything else (ragged rows, integers) stops."""
    values, tangents = _items(level, items, ditems if ditems is not None else 0.0)
    if any(type(v) is tuple or type(v) is list for v in values):
        # rows (np.array(trajectory) of (x, y) pairs): each row an array first
        rows = [_stacked(level, np.asarray, v, t) if type(v) is tuple or
                type(v) is list else (v, t) for v, t in zip(values, tangents)]
        values, tangents = tuple(v for v, _ in rows), tuple(t for _, t in rows)
    if all(type(v) in _SCALARS for v in values) and \
            all(type(t) in _SCALARS for t in tangents):
        value = f(values)  # (numbers with one direction each: their tangents, an array too)
        if value.dtype.kind != "f":
            raise _Deopt("an array of differentiated integers")
        return value, np.array(tangents, dtype=value.dtype)
    shapes = {np.shape(v) for v in values}
    if len(shapes) != 1 or not all(
            type(v) in _NUMBERS or (type(v) is np.ndarray and v.dtype.kind in "fc")
            for v in values):
        raise _Deopt("an array made of items that are not numbers or arrays of one shape")
    shape = shapes.pop()
    n = len(shape)
    batches = {np.shape(t)[:np.ndim(t) - n] for t in tangents
               if not (type(t) in (float, int) and t == 0)}
    if len(batches) != 1 or not all(
            np.shape(t)[np.ndim(t) - n:] == shape for t in tangents
            if not (type(t) in (float, int) and t == 0)):
        raise _Deopt("an array made of items whose tangents are not of their shape")
    batch = batches.pop()  # (jacfwd's directions: the items stacked behind them)
    parts = [np.zeros(batch + shape) if type(t) in (float, int) and t == 0 else t
             for t in tangents]
    value = f(values)
    if value.dtype.kind not in "fc":
        raise _Deopt("an array of differentiated integers")
    return value, np.asarray(np.stack(parts, axis=len(batch)), dtype=value.dtype)


# (the numbers np.array of a list makes an array of, with their own tangents)
_NUMBERS = frozenset((float, int, np.float64, np.float32, complex, np.complex128))
# (real numbers of one precision, and their tangents, that make a float64 array)
_SCALARS = frozenset((float, int, np.float64))


def _boxed_argument(level: _Level, a: Any, d: Any) -> Any:
    if type(d) is _Zipped:  # its items, as tuples of boxed values (in step, lazily)
        return (tuple(map(_box, itertools.repeat(level), values, tangents))
                for values, tangents in _zipped_items(level, a, d))
    if d is None or _zero(d):
        return a
    if type(a) is list and type(d) is tuple:  # a list argument: its tangents beside it
        return [_box(level, e, t) for e, t in zip(a, d)]
    return _box(level, a, d)


_LIST_READS = frozenset(("copy",))
_LIST_WRITES = frozenset(("append", "extend", "insert", "pop", "clear", "reverse"))
_DICT_READS = frozenset(("get", "keys", "values", "items", "copy"))
_DICT_WRITES = frozenset(("setdefault", "pop", "clear", "popitem", "update"))
_KEYED_READS = frozenset(("get", "pop", "setdefault"))


def _container_method(level: _Level, f: Any, args: tuple[Any, ...], dargs: tuple[Any, ...],
                      kwargs: dict[str, Any] | None) -> tuple[Any, Any]:
    """A method of a list or dict: reads on any, writes on those this run created (their
    arguments boxed); a stop for the rest, before any effect."""
    obj = f.__self__
    name = f.__name__
    kind = type(obj)
    reads, writes = (_LIST_READS, _LIST_WRITES) if kind is list else (_DICT_READS, _DICT_WRITES)
    if kwargs or not (name in reads or (name in writes and _fresh(obj))):
        raise _Deopt(f"{kind.__name__}.{name} on a {kind.__name__} that existed before the run"
                     if name in writes else f"the method {kind.__name__}.{name}")
    if kind is dict and args and not _key_ok(args[0]):
        raise _Deopt("a dict key whose hash or comparison runs code")
    if kind is dict and name in _KEYED_READS and dargs and dargs[0] is not None and \
            not _zero(dargs[0]):
        raise _Deopt(f"dict.{name} at a differentiated key")  # (see _dual_helpers._plain_key)
    if name in ("extend", "update"):
        if args and type(args[0]) not in (list, tuple, dict):
            raise _Deopt(f"{kind.__name__}.{name} from an iterator")
        if args and type(args[0]) is dict:
            return _unbox(level, f(args[0]))
        if args:
            items, tangents = _items(level, args[0], dargs[0])
            args = ([_box(level, e, t) for e, t in zip(items, tangents)],)
            dargs = (None,)
    values = tuple(a if d is None else _stored(level, a, d) for a, d in zip(args, dargs))
    out = f(*values)
    if name == "copy":
        return _register(out), 0.0
    return _unbox(level, out)


def _construct(level: _Level, site: int | None, cls: type, args: tuple[Any, ...],
               dargs: tuple[Any, ...], kwargs: dict[str, Any] | None,
               dkwargs: dict[str, Any] | None) -> tuple[Any, Any]:
    """``cls(*args, **kwargs)`` for a plain class (``object.__new__``, the dual of its
    ``__init__``; the object is this run's) or a named tuple (the dual of its ``__new__``;
    the ``site`` records a named tuple whose generated ``__new__`` it made here, to make the
    next one so itself)."""
    if type(cls) is not type or class_attribute(cls, "__del__") is not MISSING:
        raise _Deopt(f"{cls.__name__}: a metaclass or a __del__")
    call = CALL[0]
    new: Any = cls.__new__
    init = class_attribute(cls, "__init__")
    if new is object.__new__:
        obj = _register(object.__new__(cls))
        if init is _OBJECT_INIT:
            if args or kwargs:
                raise _Deopt(f"{cls.__name__}() with arguments and no __init__")
            return obj, 0.0
        if type(init) is not types.FunctionType:
            raise _Deopt(f"{cls.__name__}: an __init__ that is not a Python function")
        out, _ = call(level, init, (obj, *args), (0.0, *dargs), kwargs, dkwargs)
        if out is not None:
            raise _Deopt(f"{cls.__name__}.__init__ returned a value")
        return obj, 0.0
    if _namedtuple(cls) and type(new) is types.FunctionType and init is _OBJECT_INIT:
        if not kwargs and len(args) == len(class_attribute(cls, "_fields")) and \
                _generated_new(new):
            if site is not None:
                _record(site, _TUPLES, cls)
            return _tuple_new(level, (cls, args), (  # what its __new__ does
                None, tuple(0.0 if d is None else d for d in dargs)))
        return call(level, new, (cls, *args), (0.0, *dargs), kwargs, dkwargs)
    raise _Deopt(f"{cls.__name__}: a class with its own __new__ or a builtin base")


_OBJECT_INIT = vars(object)["__init__"]


def _generated_new(new: types.FunctionType) -> bool:
    """Whether ``new`` is the ``__new__`` that ``collections.namedtuple`` (and so
    ``typing.NamedTuple``) generates, ``lambda _cls, a, b: tuple.__new__(_cls, (a, b))``: given
    every field by position, it makes the tuple of them."""
    return new.__code__.co_name == "<lambda>" and \
        new.__globals__.get("_tuple_new") is tuple.__new__ and \
        str(new.__globals__.get("__name__", "")).startswith("namedtuple_")


def _tuple_new(level: _Level, args: tuple[Any, ...], dargs: tuple[Any, ...]) -> tuple[Any, Any]:
    """``tuple.__new__(cls, items)``, as a named tuple's ``__new__`` makes itself: the tuple's
    tangents are the items'."""
    cls = args[0]
    if len(args) != 2 or not (isinstance(cls, type) and _namedtuple(cls)):
        raise _Deopt("tuple.__new__ of a class that is not a named tuple")
    items, tangents = _items(level, args[1], dargs[1] if dargs[1] is not None else 0.0)
    return tuple.__new__(cls, items), tangents


def special(level: _Level, site: int | None, f: Any, args: tuple[Any, ...],
            dargs: tuple[Any, ...], kwargs: dict[str, Any] | None,
            dkwargs: dict[str, Any] | None) -> tuple[Any, Any] | None:
    """The calls of this module's kind -- a class, a list's or dict's method,
    ``object.__setattr__``, ``tuple.__new__``, a C function given containers holding
    differentiated values -- or None for any other call."""
    kind = type(f)
    if kind is type and f.__flags__ & _HEAPTYPE:
        return _construct(level, site, f, args, dargs, kwargs, dkwargs)
    if kind is types.BuiltinMethodType:
        owner = getattr(f, "__self__", None)
        if type(owner) is list or type(owner) is dict:
            return _container_method(level, f, args, dargs, kwargs)
        if f is tuple.__new__ or (owner is tuple and f.__name__ == "__new__"):
            return _tuple_new(level, args, dargs)
    if f is object.__setattr__ and len(args) == 3 and not kwargs:
        _write_attribute(level, args[0], args[1], args[2], dargs[2])
        return None, 0.0
    return _structural(level, f, args, dargs, kwargs)
