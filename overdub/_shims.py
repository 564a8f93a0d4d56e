"""Context-aware stand-ins for C builtins that call back into Python.

``map(f, xs)`` is C: run natively it would call ``f`` behind the context's back.  For each such
builtin this table holds a Python equivalent that makes those calls through the context's
dispatcher ``od``, so a counting context run on ``list(map(str, range(10)))`` counts ten ``str``
calls.  A shim is looked up only after the context has seen the builtin call itself; each entry
says when it applies (``sorted`` without ``key`` calls no user code, so it stays native).

Shims keep the builtin's observable results: same values, same order and stability, same
exceptions with the same messages and no ``__context__`` of their own (an empty ``max`` is
delegated to the builtin so the message is the builtin's own).  Each entry applies only to calls
the builtin accepts: a call with the wrong arguments goes to the builtin, which rejects it
before calling any user code, in its own words.  Shims may return a different *iterator type*
(``map`` gives a generator): documented in ``docs/limitations.md``.
"""

from __future__ import annotations

import __future__
import functools
import itertools
import math
import numbers
import operator
import re
import struct
import sys
import types
import typing
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ._frames import getframe, module_of, user_frame, user_locals
from ._generated import remember
from ._protocols import _defines, is_static, lookup
from ._tagging import Tagged, list_reordered

_Function = type(lambda: None)
_Fn = Callable[..., Any]  # a builtin, a shim, or the context's step ``od``
_BuiltinMethod = types.BuiltinMethodType  # type(len)
_MISSING = object()


# The generators below end where the builtin's iterator would: a StopIteration raised by the
# user's function stops them (PEP 479 would turn it into a RuntimeError inside a generator).
# Like the builtins, they take their iterators when called (see _iterating).

def _iterating(position: int, generator: _Fn) -> _Fn:
    """The shim for a lazy builtin whose iterable is argument ``position`` (or the keyword
    ``iterable``): the iterator is taken at the call, as the builtin takes it, so a value that
    is not iterable is a TypeError there, with the builtin's message, rather than at the first
    ``next()``."""
    def shim(od: _Fn, *args: Any, **kwargs: Any) -> Any:
        if len(args) > position:
            args = (*args[:position], _iter(od, args[position]), *args[position + 1:])
        elif "iterable" in kwargs:
            kwargs["iterable"] = _iter(od, kwargs["iterable"])
        return generator(od, *args, **kwargs)
    return shim


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: set for classes defined in Python


def _iter(od: _Fn, iterable: Any) -> Iterator[Any]:
    """``iter(iterable)``, through the context for an object of a Python class, whose
    ``__iter__`` (or ``__getitem__``) the context then sees, as a ``for`` loop's; and for a
    list or tuple inside an enclosing context, which may keep metadata for its items."""
    kind = type(iterable)
    if (kind.__flags__ & _HEAPTYPE and kind is not Tagged) or \
            ((kind is list or kind is tuple) and od in NESTED):
        return od(iter, iterable)  # type: ignore[no-any-return]
    return iter(iterable)


#: The steps ``od`` of contexts running inside another (see ``_dispatch.State.set_parent``):
#: what they iterate natively, the enclosing context would see without its metadata.
NESTED: weakref.WeakSet[_Fn] = weakref.WeakSet()


def _map(od: _Fn, func: Any, *iterables: Iterable[Any]) -> Iterator[Any]:
    return _map_rows(od, func, zip(*[_iter(od, iterable) for iterable in iterables]))


def _map_rows(od: _Fn, func: Any, rows: Iterator[tuple[Any, ...]]) -> Iterator[Any]:
    for items in rows:
        try:
            value = od(func, *items)
        except StopIteration:
            return
        yield value


def _filter(od: _Fn, func: Any, iterable: Iterable[Any]) -> Iterator[Any]:
    for item in iterable:
        try:
            keep = od(func, item)
        except StopIteration:
            return
        if keep:
            yield item


def _filterfalse(od: _Fn, func: Any, iterable: Iterable[Any]) -> Iterator[Any]:
    for item in iterable:
        try:
            drop = od(func, item)
        except StopIteration:
            return
        if not drop:
            yield item


def _starmap(od: _Fn, func: Any, iterable: Iterable[Any]) -> Iterator[Any]:
    for items in iterable:
        if type(items) is not tuple:  # as starmap converts it (tuple()'s own TypeError)
            items = tuple(_iter(od, items))
        try:
            value = od(func, *items)
        except StopIteration:
            return
        yield value


def _takewhile(od: _Fn, pred: Any, iterable: Iterable[Any]) -> Iterator[Any]:
    for item in iterable:
        try:
            if not od(pred, item):
                return
        except StopIteration:
            return
        yield item


def _dropwhile(od: _Fn, pred: Any, iterable: Iterable[Any]) -> Iterator[Any]:
    iterator = iter(iterable)
    for item in iterator:
        try:
            dropping = od(pred, item)
        except StopIteration:
            return
        if not dropping:
            yield item
            break
    yield from iterator


def _accumulate(od: _Fn, iterable: Iterable[Any], func: Any = None, *,
                initial: Any = None) -> Iterator[Any]:
    iterator = iter(iterable)
    total = initial
    if initial is None:
        try:
            total = next(iterator)
        except StopIteration:
            return
    yield total
    for item in iterator:
        try:
            total = od(func, total, item)
        except StopIteration:
            return
        yield total


def _groupby(od: _Fn, iterable: Iterable[Any], key: Any = None
             ) -> Iterator[tuple[Any, Iterator[Any]]]:
    pairs = ((od(key, item), item) for item in iterable)
    for k, group in itertools.groupby(pairs, operator.itemgetter(0)):
        yield k, (item for _, item in group)


if sys.version_info >= (3, 12):
    _sort_flag: Callable[[Any], bool] = bool  # list.sort's ``reverse``: any object's truth
else:
    def _sort_flag(reverse: Any) -> bool:
        """``reverse`` read as list.sort reads it before 3.12: a C int (``None`` or ``1.0`` is
        a TypeError, ``2**40`` an OverflowError), before any key is computed."""
        flag = operator.index(reverse)
        if not -2**31 <= flag < 2**31:
            raise OverflowError("Python int too large to convert to C int")
        return flag != 0


def _sorted(od: _Fn, iterable: Iterable[Any], /, *, key: Any = None,
            reverse: Any = False) -> list[Any]:
    # sorted is list(iterable).sort(...): that new list is nobody else's, so no key sees it
    items = list(_iter(od, iterable))
    return _keyed_sort(od, items, key, _sort_flag(reverse), None)


def _list_sort(od: _Fn, items: list[Any], /, *, key: Any = None, reverse: Any = False) -> None:
    # As list.sort: the list is empty while the keys are computed and compared (a key that
    # reads it sees []), its items are put back after, and a key that changed it makes the
    # sort a ValueError.  Its storage is read and written with list's own methods, as the
    # builtin does for a subclass that overrides them.
    flag = _sort_flag(reverse)
    if od in NESTED and lookup(type(items), "__iter__") is list.__iter__:
        saved = list(od(iter, items))  # (what the enclosing context keeps for the items)
    else:
        saved = list.copy(items)
    list.clear(items)
    _keyed_sort(od, saved, key, flag, items)


def _keyed_sort(od: _Fn, saved: list[Any], key: Any, reverse: bool,
                emptied: list[Any] | None) -> list[Any]:
    """``saved`` sorted by ``key`` (called through the context, in order), also written to
    ``emptied``, the list that list.sort empties meanwhile.  The indexes are sorted by the keys
    as list.sort sorts the items along with them, same comparisons in the same order: when one
    raises, the items are left in the order the builtin leaves them (an error from a key
    leaves them as they were)."""
    order = list(range(len(saved)))
    done = False
    try:
        keys = [od(key, item) for item in saved]
        order.sort(key=keys.__getitem__, reverse=reverse)
        done = True
    finally:
        result = [saved[i] for i in order]
        if emptied is not None:
            modified = done and list.__len__(emptied) != 0
            list.clear(emptied)
            list.extend(emptied, result)
            list_reordered(emptied, order)  # (metadata a tagging context keeps, by position)
    if emptied is not None and modified:
        raise ValueError("list modified during sort")
    return result


def _extreme(builtin: _Fn) -> _Fn:
    better = operator.gt if builtin is max else operator.lt

    def shim(od: _Fn, *args: Any, key: Any, default: Any = _MISSING) -> Any:
        # Items are taken one at a time, each key computed before the next item, as natively.
        best: Any = _MISSING
        best_key: Any = _MISSING
        for item in _iter(od, args[0]) if len(args) == 1 else args:
            item_key = od(key, item)
            if best_key is _MISSING or better(item_key, best_key):
                best, best_key = item, item_key
        if best is _MISSING:  # the builtin's own result or error message
            return builtin((), key=key) if default is _MISSING else default
        return best

    return shim


def _extreme_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """``min``/``max`` with a key, called as the builtin accepts (no ``default`` with several
    positional arguments, at least one argument)."""
    return kwargs.get("key") is not None and bool(args) and \
        kwargs.keys() <= {"key", "default"} and not (len(args) > 1 and "default" in kwargs)


def _reduce(od: _Fn, func: Any, iterable: Iterable[Any], initial: Any = _MISSING) -> Any:
    try:
        iterator = _iter(od, iterable)
    except TypeError:
        iterator = None  # (raised below, outside this handler: no __context__, as natively)
    if iterator is None:
        raise TypeError("reduce() arg 2 must support iteration")
    total = next(iterator, _MISSING) if initial is _MISSING else initial
    if total is _MISSING:
        return functools.reduce(func, ())  # the builtin's own error
    for item in iterator:
        total = od(func, total, item)
    return total


def _reduce_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    if sys.version_info >= (3, 14) and kwargs.keys() == {"initial"} and len(args) == 2:
        return True  # (3.14 takes ``initial`` by keyword)
    return 2 <= len(args) <= 3 and not kwargs


def _c_number(x: Any) -> bool:
    kind = type(x)
    return kind in _PYTHON_NUMBERS or (is_static(kind) and isinstance(x, numbers.Number))


_PYTHON_NUMBERS = frozenset((int, float, complex, bool))


def _sum(od: _Fn, iterable: Iterable[Any], /, start: Any = 0) -> Any:
    # Items are taken one at a time, as the builtin does (a generator's side effects interleave
    # with the additions the same way).  The builtin adds exact ints in C while it can, then, if
    # the total is a float, exact floats and C-long ints in C (compensated from 3.12), and each
    # further item on its own.  Here the builtin adds each run of C numbers itself, in the
    # phase it would be in, and every addition of another item goes through the context (an
    # array, too: a context may keep metadata for its memory, as forward mode does for arrays
    # written in place).
    iterator = _iter(od, iterable)  # (first, as the builtin: sum(5, "") is about the 5)
    for kind, refused in _SUMMED_BY_JOIN:
        if isinstance(start, kind):
            raise TypeError(f"sum() can't sum {refused} instead]")
    total = start
    if _c_number(start):
        phase = 2 if type(start) is int else 1  # runs of C numbers the builtin would add
        while phase:
            run = []
            for item in iterator:
                if _c_number(item):
                    run.append(item)
                    continue
                floats_next = phase == 2 and _adds_in_c_long(total, run)
                total = od(operator.add, sum(run, total), item)
                phase = 1 if floats_next and type(total) is float else 0
                break
            else:
                return sum(run, total)
    for item in iterator:
        if _c_number(item) and _c_number(total):
            total = total + item
        else:
            total = od(operator.add, total, item)
    return total


_LONG_LIMIT: int = 2 ** (8 * struct.calcsize("l") - 1)  # the C long sum()'s int loop uses


def _adds_in_c_long(start: int, run: list[Any]) -> bool:
    """Whether sum(run, start) ends in the builtin's C-long loop, which moves to its float
    loop when the next (Python) item's addition gives a float: ints and bools only, every
    partial sum a C long."""
    total: int = start
    for item in run:
        if not -_LONG_LIMIT <= total < _LONG_LIMIT or (type(item) is not int and
                                                         type(item) is not bool):
            return False
        total += item
    return -_LONG_LIMIT <= total < _LONG_LIMIT


_SUMMED_BY_JOIN = ((str, "strings [use ''.join(seq)"), (bytes, "bytes [use b''.join(seq)"),
                   (bytearray, "bytearray [use b''.join(seq)"))  # sum() refuses as ``start``


def _sum_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return (len(args) == 1 and kwargs.keys() <= {"start"}) or (len(args) == 2 and not kwargs)


def _cmp_to_key(od: _Fn, mycmp: Any) -> Any:
    """The builtin's own key wrapper (its type, hashing, errors), comparing through the
    context: ``partial`` is C, so no frame of overdub's comes between them."""
    return functools.cmp_to_key(functools.partial(od, mycmp))


def _callable_iter(od: _Fn, func: Any, sentinel: Any) -> Iterator[Any]:
    if not callable(func):  # at the call, as the builtin checks
        raise TypeError("iter(v, w): v must be callable")
    return _calls_until(od, func, sentinel)


def _calls_until(od: _Fn, func: Any, sentinel: Any) -> Iterator[Any]:
    while True:
        try:
            value = od(func)
        except StopIteration:
            return
        if value is sentinel or sentinel == value:  # as the builtin compares (same object first)
            return
        yield value


def _sequence_iter(od: _Fn, obj: Any) -> Iterator[Any]:
    """``iter(obj)`` for a class iterated through its Python ``__getitem__`` (no ``__iter__``):
    indexes 0, 1, 2... through the context, until IndexError or StopIteration, as the builtin
    sequence iterator does natively (behind the context's back)."""
    getitem = lookup(type(obj), "__getitem__")

    def items() -> Iterator[Any]:
        index = 0
        while True:
            try:
                item = od(getitem, obj, index)
            except (IndexError, StopIteration):
                return
            yield item
            index += 1
    return items()


def _sequence_reversed(od: _Fn, obj: Any) -> Iterator[Any]:
    """``reversed(obj)`` for a class with Python ``__len__`` and ``__getitem__`` (no
    ``__reversed__``): indexes from the end through the context, as the builtin does natively."""
    getitem = lookup(type(obj), "__getitem__")
    index = _as_length(od(lookup(type(obj), "__len__"), obj))

    def items() -> Iterator[Any]:
        for i in range(index - 1, -1, -1):
            try:
                item = od(getitem, obj, i)
            except (IndexError, StopIteration):
                return
            yield item
    return items()


def _reversed_by_getitem(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    if len(args) != 1 or kwargs or type(args[0]) is Tagged:
        return False
    kind = type(args[0])
    return not _defines(kind, "__reversed__") and isinstance(
        lookup(kind, "__getitem__"), _Function) and isinstance(lookup(kind, "__len__"), _Function)


def _iterated_by_getitem(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    if len(args) != 1 or kwargs or type(args[0]) is Tagged:
        return False
    kind = type(args[0])
    # (__iter__ = None makes a class not iterable, whatever its __getitem__: iter() raises)
    return not _defines(kind, "__iter__") and isinstance(lookup(kind, "__getitem__"), _Function)


def _warn(od: _Fn, message: Any, category: Any = None, stacklevel: int = 1,
          *args: Any, **kwargs: Any) -> None:
    """``warnings.warn`` counting only the user's frames: the dispatcher frames between a
    caller and a leaf call would otherwise get the blame (file ``<overdub dispatcher>``)."""
    target = user_frame(max(stacklevel, 1))
    depth = 1
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None and frame is not target:
        frame, depth = frame.f_back, depth + 1
    warnings.warn(message, category, depth + 1 if frame is not None else stacklevel, *args,
                  **kwargs)


_FUTURE_FLAGS = functools.reduce(operator.or_, (getattr(__future__, feature).compiler_flag
                                                for feature in __future__.all_feature_names))
_SOURCE = (str, bytes, bytearray)
_COMPILE_KEYWORDS = {"source", "filename", "mode", "flags", "dont_inherit", "optimize",
                     "_feature_version"}


def _user_future_flags() -> int:
    """The ``__future__`` flags of the user's calling code: ``compile``, ``exec`` and ``eval``
    inherit them natively from the frame calling them, which here would be overdub's (whose
    ``annotations`` future would turn the annotations of a ``dataclass``'s ``__init__``, made
    by ``exec``, into strings)."""
    frame = user_frame()
    return 0 if frame is None else frame.f_code.co_flags & _FUTURE_FLAGS


def _compile(od: _Fn, source: Any, filename: Any, mode: Any, flags: int = 0,
             dont_inherit: bool = False, *args: Any, **kwargs: Any) -> Any:
    if not dont_inherit:
        flags |= _user_future_flags()
    code = compile(source, filename, mode, flags, True, *args, **kwargs)
    if isinstance(code, types.CodeType):  # not an AST (PyCF_ONLY_AST)
        remember(source, code)
    return code


def _compiled(source: str | bytes | bytearray, mode: str) -> types.CodeType:
    """The string ``exec``/``eval`` runs, compiled as they would (with the user's future
    flags), its text remembered: a dataclass's ``__init__`` made here has source to rewrite."""
    code: types.CodeType = compile(source, "<string>", mode, _user_future_flags(), True)
    remember(source, code)
    return code


def _namespaces(globals_: Any, locals_: Any) -> tuple[Any, Any]:
    """``exec``'s and ``eval``'s namespaces: without globals, the user's calling frame's globals
    and locals, as natively (called from overdub's frames they would be a dispatcher's)."""
    if globals_ is None:
        frame = user_frame()
        if frame is not None:
            return frame.f_globals, frame.f_locals if locals_ is None else locals_
    return globals_, locals_


def _exec(od: _Fn, source: Any, globals_: Any = None, locals_: Any = None, /,
          **kwargs: Any) -> Any:
    if isinstance(source, _SOURCE):
        source = _compiled(source, "exec")
    return exec(source, *_namespaces(globals_, locals_), **kwargs)


def _eval(od: _Fn, source: Any, globals_: Any = None, locals_: Any = None, /) -> Any:
    if isinstance(source, str):
        source = source.lstrip(" \t")  # as eval does
    elif isinstance(source, (bytes, bytearray)):
        source = source.lstrip(b" \t")
    if isinstance(source, _SOURCE):
        source = _compiled(source, "eval")
    return eval(source, *_namespaces(globals_, locals_))


# What reads its caller's frame, called by another name (``L = locals; L()``,
# ``from sys import _getframe as gf``): rewritten code leaves the builtins' own names as they
# are, in the user's frame (see _rewrite); called through the context, they read the user's
# frame, not a dispatcher's.

def _frame_locals(od: _Fn) -> Any:
    frame = user_frame()
    return locals() if frame is None else user_locals(dict(frame.f_locals))


def _frame_names(od: _Fn) -> Any:
    frame = user_frame()
    if frame is None:
        return dir()
    return sorted(name for name in frame.f_locals if not (type(name) is str and name[:1] == "@"))


def _frame_globals(od: _Fn) -> Any:
    frame = user_frame()
    return globals() if frame is None else frame.f_globals


def _frame(od: _Fn, depth: int = 0, /) -> Any:
    frame = user_frame()
    return sys._getframe(depth) if frame is None else getframe(frame, depth)


def _type3(od: _Fn, name: str, bases: tuple[type, ...], namespace: dict[str, Any],
           **kwargs: Any) -> type:
    """``type(name, bases, ns)`` names the module of the *user's* calling frame, as natively."""
    if "__module__" not in namespace:
        frame = user_frame()
        if frame is not None and "__name__" in frame.f_globals:
            namespace = {**namespace, "__module__": frame.f_globals["__name__"]}
    return type(name, bases, namespace, **kwargs)


def _construct(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return cls(*args, **kwargs)


def _named_by_caller(cls: type) -> _Fn:
    """3.12+ ``TypeVar``, ``ParamSpec``, ``TypeVarTuple``, ``TypeAliasType`` (C) take their
    ``__module__`` from the function calling them, which would be overdub's: construct them
    from a function that carries the user's module instead (``__module__`` cannot be set on a
    ``TypeAliasType`` afterwards)."""
    def shim(od: _Fn, *args: Any, **kwargs: Any) -> Any:
        frame = user_frame()
        module = module_of(frame) if frame is not None else None
        construct = types.FunctionType(_construct.__code__, _construct.__globals__)
        construct.__module__ = module  # type: ignore[assignment]  # None as natively
        return construct(cls, args, kwargs)
    return shim


def _dunder_builtin(name: str, check: Callable[[Any], Any] | None = None) -> _Fn:
    """The builtin calling the class's Python ``name``, its result checked and converted by
    ``check`` as the builtin does (``len`` gives an ``int``, whatever int-like came back)."""
    def shim(od: _Fn, obj: Any) -> Any:
        out = od(lookup(type(obj), name), obj)
        return out if check is None else check(out)
    shim.dunder = name  # type: ignore[attr-defined]
    return shim


def _type_name(kind: type) -> str:
    """The name CPython's messages give a type (``tp_name``): a static C type's is dotted with
    its module (``types.SimpleNamespace``), a class's is its ``__name__``.  (A C extension's heap
    type, ``collections.deque`` from 3.12, is named as a class: its dotted name is not exposed.)"""
    if kind.__flags__ & _HEAPTYPE or kind.__module__ == "builtins":
        return kind.__name__
    return f"{kind.__module__}.{kind.__name__}"


def _must_be_str(name: str) -> Callable[[Any], Any]:
    def check(out: Any) -> Any:
        if not isinstance(out, str):
            raise TypeError(f"{name} returned non-string (type {_type_name(type(out))})")
        return out
    return check


def _as_length(out: Any) -> int:
    """What ``__len__`` returned, as ``len`` reads it: an ``int`` (``True`` is 1), >= 0, fitting
    a C ``Py_ssize_t``."""
    length = operator.index(out)  # (an exact int)
    if length < 0:
        raise ValueError("__len__() should return >= 0")
    if length > sys.maxsize:
        raise OverflowError("cannot fit 'int' into an index-sized integer")
    return length


def _must_be_iterator(out: Any) -> Any:
    if lookup(type(out), "__next__") is None:
        raise TypeError(f"iter() returned non-iterator of type '{_type_name(type(out))}'")
    return out


def _sort_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """``xs.sort(...)`` with a key, as the builtin accepts it (keywords only)."""
    return not args and kwargs.get("key") is not None and kwargs.keys() <= {"key", "reverse"}


def _python_dunder(name: str) -> _Applies:
    # A Tagged value's dunders are not user code: the context's tag handling deals with it.
    return lambda args, kwargs: (len(args) == 1 and not kwargs and type(args[0]) is not Tagged
                                 and isinstance(lookup(type(args[0]), name), _Function))


def _reduce_ex(od: _Fn, obj: Any, protocol: int) -> Any:
    """``obj.__reduce_ex__(protocol)`` -- what ``copy.copy`` and ``copy.deepcopy`` call -- as
    ``object.__reduce_ex__`` computes it, for the objects :func:`_python_reduction` picks, with
    the Python it runs and the state it reads seen by the context.  Natively a ``__reduce__`` or
    ``__getstate__`` of the class (a dataclass with ``slots=True`` has one) runs unseen and the
    slots' values are read by C code, so values the context tagged would lose their metadata
    in the copy."""
    import copyreg
    cls = type(obj)
    if type(lookup(cls, "__reduce__")) is types.FunctionType:
        return od(getattr(obj, "__reduce__"))  # (the builtin calls an override, and only it)
    getstate = lookup(cls, "__getstate__")
    if type(getstate) is types.FunctionType:
        state = od(getstate, obj)
    else:
        state = None
        namespace = getattr(obj, "__dict__", None)
        if namespace:  # (the dict itself, as the default state is)
            state = namespace
        slots: dict[str, Any] = {}
        for name in copyreg._slotnames(cls):  # type: ignore[attr-defined]
            try:
                value = od(getattr, obj, name)
            except AttributeError:  # an empty slot is left out
                continue
            od(operator.setitem, slots, name, value)
        if slots:
            state = (state, slots)
    return copyreg.__newobj__, (cls,), state, None, None  # type: ignore[attr-defined]


def _python_reduction(obj: Any, protocol: Any) -> bool:
    """Whether :func:`_reduce_ex` computes ``obj.__reduce_ex__(protocol)``: the method is
    ``object``'s, and the class has a ``__reduce__`` written in Python (which the builtin only
    calls: ``Counter``'s too, a dict); or, for protocol 2 or more, the class (every base too,
    but ``object``) is defined in Python and has slots or its own ``__getstate__``, and no
    ``__getnewargs__`` or ``__getnewargs_ex__``."""
    cls = type(obj)
    if type(protocol) is not int or lookup(cls, "__reduce_ex__") is not object.__reduce_ex__:
        return False
    if type(lookup(cls, "__reduce__")) is types.FunctionType:
        return True
    bases = cls.__mro__[:-1]
    if not all(base.__flags__ & _HEAPTYPE for base in bases) or cls.__itemsize__:
        return False
    if protocol < 2 or lookup(cls, "__reduce__") is not object.__reduce__ or \
            lookup(cls, "__getnewargs_ex__") is not None or \
            lookup(cls, "__getnewargs__") is not None:
        return False
    return type(lookup(cls, "__getstate__")) is types.FunctionType or \
        any("__slots__" in vars(base) for base in bases)


_Applies = Callable[[tuple[Any, ...], dict[str, Any]], bool]  # when a shim applies
_always: _Applies = lambda args, kwargs: True  # noqa: E731


def _binds(params: tuple[str, ...], keyword_only: set[str], given: str) -> _Applies:
    """Calls that bind to ``(params..., *, keyword_only...)`` with ``params[0]`` and a
    ``given`` that is not None (what the shim is for)."""
    def applies(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        if len(args) > len(params) or not kwargs.keys() <= {*params[len(args):], *keyword_only}:
            return False
        bound = {**dict(zip(params, args)), **kwargs}
        return params[0] in bound and bound.get(given) is not None
    return applies

# id(builtin) -> [(builtin, when the shim applies, the shim), ...]
SHIMS: dict[int, list[tuple[Any, _Applies, _Fn]]] = {}


def _register(builtin: Any, applies: _Applies, shim: _Fn) -> None:
    SHIMS.setdefault(id(builtin), []).append((builtin, applies, shim))


_two_positional: _Applies = lambda a, k: len(a) == 2 and not k  # noqa: E731
_register(map, lambda a, k: len(a) >= 2 and not k, _map)
_register(filter, lambda a, k: len(a) == 2 and a[0] is not None and not k,
          _iterating(1, _filter))
_register(itertools.filterfalse, lambda a, k: len(a) == 2 and a[0] is not None and not k,
          _iterating(1, _filterfalse))
_register(itertools.starmap, _two_positional, _iterating(1, _starmap))
_register(itertools.takewhile, _two_positional, _iterating(1, _takewhile))
_register(itertools.dropwhile, _two_positional, _iterating(1, _dropwhile))
_register(itertools.accumulate, _binds(("iterable", "func"), {"initial"}, "func"),
          _iterating(0, _accumulate))
_register(itertools.groupby, _binds(("iterable", "key"), set(), "key"), _iterating(0, _groupby))
_register(sorted, lambda a, k: len(a) == 1 and _sort_call((), k), _sorted)
_register(list.sort, lambda a, k: len(a) == 1 and isinstance(a[0], list) and _sort_call((), k),
          _list_sort)
_register(min, _extreme_call, _extreme(min))
_register(max, _extreme_call, _extreme(max))
_register(functools.reduce, _reduce_call, _reduce)
_register(sum, _sum_call, _sum)
_register(functools.cmp_to_key, lambda a, k: len(a) + len(k) == 1 and k.keys() <= {"mycmp"},
          _cmp_to_key)
_register(warnings.warn, _always, _warn)
# exec/eval called by name with one argument run in the user's own frame (see _rewrite); other
# calls are made from overdub's frames, whose namespaces and future flags are not the user's.
_register(compile, lambda a, k: len(a) + len(k) >= 3 and k.keys() <= _COMPILE_KEYWORDS, _compile)
_register(exec, lambda a, k: 1 <= len(a) <= 3 and k.keys() <= {"closure"}, _exec)
_register(eval, lambda a, k: 1 <= len(a) <= 3 and not k, _eval)
_register(type, lambda a, k: len(a) == 3 and isinstance(a[2], dict), _type3)
_no_arguments: _Applies = lambda a, k: not a and not k  # noqa: E731
for _reader, _shim in ((locals, _frame_locals), (vars, _frame_locals), (dir, _frame_names),
                       (globals, _frame_globals)):
    _register(_reader, _no_arguments, _shim)
_register(sys._getframe, lambda a, k: len(a) <= 1 and not k, _frame)
if sys.version_info >= (3, 12):  # PEP 695 moved them to C
    for _cls in (typing.TypeVar, typing.ParamSpec, typing.TypeVarTuple, typing.TypeAliasType):
        _register(_cls, _always, _named_by_caller(_cls))
_register(iter, lambda a, k: len(a) == 2 and not k, _callable_iter)
_register(iter, _python_dunder("__iter__"), _dunder_builtin("__iter__", _must_be_iterator))
_register(iter, _iterated_by_getitem, _sequence_iter)
_register(reversed, _python_dunder("__reversed__"), _dunder_builtin("__reversed__"))
_register(reversed, _reversed_by_getitem, _sequence_reversed)
for _builtin, _name, _check in (
        (len, "__len__", _as_length), (repr, "__repr__", _must_be_str("__repr__")),
        (str, "__str__", _must_be_str("__str__")), (next, "__next__", None),
        (abs, "__abs__", None)):  # abs(x) is a call, so its dunder is shimmed here
    _register(_builtin, _python_dunder(_name), _dunder_builtin(_name, _check))


# -- conversions C calls a class's special method for ------------------------------------------
# ``float(obj)``, ``complex(obj)``, ``math.sin(obj)`` (which reads ``obj.__float__``),
# ``np.asarray(obj)`` (``obj.__array__``) call the class's Python method from C: these shims call
# it through the context, then convert its result as the builtin would.

def _innermost(x: Any) -> Any:
    while type(x) is Tagged:
        x = x.value
    return x


def _converted(name: str, kind: type) -> _Fn:
    def shim(od: _Fn, obj: Any) -> Any:
        out = od(lookup(type(obj), name), obj)
        given = type(_innermost(out))
        owner = f"{_type_name(type(obj))}." if kind is float else ""  # (as CPython words it)
        if not issubclass(given, kind):
            raise TypeError(f"{owner}{name} returned non-{kind.__name__} "
                            f"(type {_type_name(given)})")
        if given is kind:
            return out
        # a strict subclass (a float subclass whose __float__ returns itself): its value, by
        # the base type's own slot, with CPython's warning (the builtin again would call the
        # subclass's method again, forever)
        warnings.warn(f"{owner}{name} returned non-{kind.__name__} (type {_type_name(given)}).  "
                      f"The ability to return an instance of a strict subclass of "
                      f"{kind.__name__} is deprecated, and may be removed in a future version "
                      f"of Python.", DeprecationWarning, stacklevel=2)
        return od(getattr(kind, name), out)
    return shim


def _converts_to_float(x: Any) -> bool:
    kind = type(x)
    return kind is not Tagged and not is_static(kind) and \
        isinstance(lookup(kind, "__float__"), _Function)


def _math_shim(builtin: _Fn) -> _Fn:
    """``math.sin(obj)`` is ``math.sin(float(obj))``, its ``__float__`` seen by the context."""
    def shim(od: _Fn, *args: Any) -> Any:
        return od(builtin, *(od(float, a) if _converts_to_float(a) else a for a in args))
    return shim


def _any_converts_to_float(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return not kwargs and any(map(_converts_to_float, args))


def _as_array(builtin: _Fn) -> _Fn:
    """``np.asarray(obj)``, ``np.array(obj)``: the array ``obj.__array__()`` gives, seen by the
    context, then converted as the builtin would (dtype, copy)."""
    def shim(od: _Fn, obj: Any, *args: Any, **kwargs: Any) -> Any:
        return od(builtin, od(lookup(type(obj), "__array__"), obj), *args, **kwargs)
    return shim


def _python_array(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return bool(args) and type(args[0]) is not Tagged and not is_static(type(args[0])) and \
        isinstance(lookup(type(args[0]), "__array__"), _Function) and \
        not _duck_array(type(args[0]))


_MATH_FUNCTIONS = ("sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh",
                   "asinh", "acosh", "atanh", "exp", "expm1", "log", "log2", "log10", "log1p",
                   "sqrt", "pow", "hypot", "fabs", "copysign", "erf", "erfc", "gamma", "lgamma",
                   "degrees", "radians", "fmod", "exp2", "cbrt")


def _array_ufunc(ufunc: Any) -> _Fn:
    """``np.sin(obj)`` for an ``obj`` whose class defines ``__array_ufunc__`` in Python: NumPy
    calls that method from C; here the context sees it, in NumPy's order (subclasses first,
    then left to right), ``NotImplemented`` passing to the next one."""
    def shim(od: _Fn, *args: Any, **kwargs: Any) -> Any:
        overrides: list[type] = []
        for a in args:
            kind = type(a)
            if _overrides_ufuncs(a) and kind not in overrides:
                at = next((i for i, o in enumerate(overrides) if issubclass(kind, o)), None)
                overrides.insert(len(overrides) if at is None else at, kind)
        for kind in overrides:
            owner = next(a for a in args if type(a) is kind)
            out = od(lookup(kind, "__array_ufunc__"), owner, ufunc, "__call__", *args, **kwargs)
            if out is not NotImplemented:
                return out
        raise TypeError(f"operand type(s) all returned NotImplemented from __array_ufunc__"
                        f"({ufunc!r}, '__call__', ...)")
    return shim


def _overrides_ufuncs(x: Any) -> bool:
    kind = type(x)
    return kind is not Tagged and not is_static(kind) and \
        isinstance(lookup(kind, "__array_ufunc__"), _Function) and not _duck_array(kind)


def _duck_array(kind: type) -> bool:
    """An array library's array written in Python (``dask.array.Array``): it implements
    NumPy's whole API (``__array_function__``, NEP 18), and a context that swaps NumPy for it
    computes with it as NumPy would; only other classes' conversion methods are run here."""
    return lookup(kind, "__array_function__") is not None


_UFUNC: list[type] = []  # NumPy's ufunc type, once NumPy is in use


def register_numpy_shims() -> None:
    """Add NumPy's conversions once NumPy is in use (the core never imports it)."""
    np = sys.modules.get("numpy")
    if np is not None and id(np.asarray) not in SHIMS:
        for builtin in (np.asarray, np.array, np.asanyarray):
            _register(builtin, _python_array, _as_array(builtin))
        _UFUNC.append(np.ufunc)


_register(float, _python_dunder("__float__"), _converted("__float__", float))
_register(complex, _python_dunder("__complex__"), _converted("__complex__", complex))
_register(complex,  # complex(obj) of a class with __float__ alone: complex(float(obj))
          lambda a, k: len(a) == 1 and not k and _converts_to_float(a[0]) and
          lookup(type(a[0]), "__complex__") is None,
          lambda od, obj: od(complex, od(float, obj)))
for _name in _MATH_FUNCTIONS:
    if hasattr(math, _name):
        _register(getattr(math, _name), _any_converts_to_float, _math_shim(getattr(math, _name)))


def _getter(fn: Any) -> _Fn:
    """``operator.attrgetter``/``itemgetter``/``methodcaller`` objects called: the lookups and
    the call they stand for, each made through the context (natively, a C getter reads an
    attribute or item behind its back: a tagging context's metadata would be lost)."""
    maker, made_with = fn.__reduce__()[:2]
    if type(fn) is operator.attrgetter:
        def lookup_one(od: _Fn, obj: Any, name: str) -> Any:
            for part in name.split("."):
                obj = od(getattr, obj, part)
            return obj

        def attrs(od: _Fn, obj: Any) -> Any:
            if len(made_with) == 1:
                return lookup_one(od, obj, made_with[0])
            return tuple([lookup_one(od, obj, name) for name in made_with])
        return attrs
    if type(fn) is operator.itemgetter:
        def items(od: _Fn, obj: Any) -> Any:
            if len(made_with) == 1:
                return od(operator.getitem, obj, made_with[0])
            return tuple([od(operator.getitem, obj, key) for key in made_with])
        return items
    # methodcaller: (methodcaller, (name, *args)), or (partial(methodcaller, name, **kw), args)
    if type(maker) is functools.partial:
        name, arguments, keywords = maker.args[0], made_with, maker.keywords
    else:
        name, arguments, keywords = made_with[0], made_with[1:], {}

    def call(od: _Fn, obj: Any) -> Any:
        return od(od(getattr, obj, name), *arguments, **keywords)
    return call


_GETTERS = (operator.attrgetter, operator.itemgetter, operator.methodcaller)


def _chain_from_iterable(od: _Fn, iterables: Iterable[Any]) -> Iterator[Any]:
    """``itertools.chain.from_iterable(iterables)``: each iterable iterated through the
    context, as ``chain(*iterables)``'s are (natively, the items of a list whose members'
    metadata the context keeps aside would come back without it); the outer one at the call,
    as chain's own, which raises there for what is not iterable."""
    return _chained(od, od(iter, iterables))


def _chained(od: _Fn, iterables: Iterator[Any]) -> Iterator[Any]:
    for iterable in iterables:
        yield from od(iter, iterable)


# Filled by _callback_shims: owner type -> {method name: the C method descriptor whose shims
# its bound methods use (``pattern.sub``: ``re.Pattern.sub`` with the owner first)}; and C type
# -> (when a call of its instance is shimmed, the shim given the instance first: json's scanner)
BOUND: dict[type, dict[str, Any]] = {}
CALLED: dict[type, tuple[_Applies, _Fn]] = {}
_CMethod = type(re.compile("").sub)  # ``builtin_method`` (METH_METHOD), a subclass of it


def shim_for(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Fn | None:
    """The shim for calling builtin ``fn`` with these arguments, or None to call it natively."""
    for builtin, applies, shim in SHIMS.get(id(fn), ()):
        if builtin is fn and applies(args, kwargs):
            return shim
    kind = type(fn)
    if kind is _BuiltinMethod or kind is _CMethod:
        methods = BOUND.get(type(fn.__self__))
        if methods is not None and fn.__name__ in methods:
            owner = fn.__self__
            unbound = shim_for(methods[fn.__name__], (owner, *args), kwargs)
            if unbound is not None:
                return lambda od, *a, **k: unbound(od, owner, *a, **k)
    elif kind in CALLED and CALLED[kind][0]((fn, *args), kwargs):
        instance, call = fn, CALLED[kind][1]
        return lambda od, *a, **k: call(od, instance, *a, **k)
    if type(fn) in _GETTERS and len(args) == 1 and not kwargs:
        return _getter(fn)
    if type(fn) is _BuiltinMethod and fn.__self__ is itertools.chain and \
            fn.__name__ == "from_iterable" and len(args) == 1 and not kwargs:
        return _chain_from_iterable  # (a class method: bound anew at each access)
    if (type(fn) is _BuiltinMethod and fn.__name__ == "sort" and _sort_call(args, kwargs)
            and isinstance(fn.__self__, list)
            and lookup(type(fn.__self__), "sort") is list.sort):  # xs.sort(key=...)
        items = fn.__self__
        return lambda od, *args, **kwargs: _list_sort(od, items, *args, **kwargs)
    if type(fn) is _BuiltinMethod and fn.__name__ == "__reduce_ex__" and len(args) == 1 and \
            not kwargs and _python_reduction(fn.__self__, args[0]):  # copy.copy(obj)
        obj = fn.__self__
        return lambda od, protocol: _reduce_ex(od, obj, protocol)
    if _UFUNC and type(fn) is _UFUNC[0] and any(map(_overrides_ufuncs, args)):
        return _array_ufunc(fn)
    if _UFUNC and _converts_arrays(fn) and (any(map(_converts_to_array, args)) or
                                            any(map(_converts_to_array, kwargs.values()))):
        return _arrays_converted(fn)  # (NumPy's C functions only: no other call scans its
    return None  # arguments here)


def _converts_to_array(x: Any) -> bool:
    """An array-like of a Python class (``__array__`` in Python), not a duck array nor an
    array of another namespace (``__array_namespace__``: its own functions serve it)."""
    kind = type(x)
    return kind is not Tagged and not is_static(kind) and \
        isinstance(lookup(kind, "__array__"), _Function) and not _duck_array(kind) and \
        not hasattr(kind, "__array_namespace__")


def _converts_arrays(fn: Any) -> bool:
    """Whether ``fn`` is NumPy's C code, which converts an array-like argument itself: a ufunc,
    a ufunc's method (``np.add.reduce``), a function of NumPy's C
    modules (``np.convolve``'s ``correlate``)."""
    if type(fn) is _UFUNC[0]:
        return True
    return type(fn) is _BuiltinMethod and (
        type(fn.__self__) is _UFUNC[0]
        or (getattr(fn, "__module__", None) or "").partition(".")[0] == "numpy")


def _arrays_converted(fn: Any) -> _Fn:
    """``np.sin(obj)``, ``np.add.reduce(obj)`` for an ``obj`` whose class defines ``__array__``
    in Python: NumPy would call that method from C, reading the object's attributes natively
    (a tagging context keeps their metadata aside: a derivative of 0); here each such argument
    is converted by ``np.asarray`` through the context first, as NumPy converts it."""
    def shim(od: _Fn, *args: Any, **kwargs: Any) -> Any:
        asarray = sys.modules["numpy"].asarray

        def converted(x: Any) -> Any:
            return od(asarray, x) if _converts_to_array(x) else x
        return od(fn, *map(converted, args), **{k: converted(v) for k, v in kwargs.items()})
    return shim
