"""Context-aware stand-ins for C builtins that call back into Python.

``map(f, xs)`` is C: run natively it would call ``f`` behind the context's back.  For each such
builtin this table holds a Python equivalent that makes those calls through the context's
dispatcher ``od``, so a counting context run on ``list(map(str, range(10)))`` counts ten ``str``
calls.  A shim is looked up only after the context has seen the builtin call itself; each entry
says when it applies (``sorted`` without ``key`` calls no user code, so it stays native).

Shims keep the builtin's observable results: same values, same order and stability, same
exceptions (an empty ``max`` is delegated to the builtin so the message is the builtin's own).
They may return a different *iterator type* (``map`` gives a generator): documented in
``docs/limitations.md``.
"""

from __future__ import annotations

import __future__
import functools
import itertools
import operator
import sys
import types
import typing
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ._frames import module_of, user_frame
from ._protocols import is_static, lookup
from ._tagging import Tagged

_Function = type(lambda: None)
_Fn = Callable[..., Any]  # a builtin, a shim, or the context's step ``od``
_BuiltinMethod = types.BuiltinMethodType  # type(len)
_MISSING = object()


# The generators below end where the builtin's iterator would: a StopIteration raised by the
# user's function stops them (PEP 479 would turn it into a RuntimeError inside a generator).
# Like the builtins, they take their iterators when called (see _iterating).

def _iterating(position: int, generator: _Fn) -> _Fn:
    """The shim for a lazy builtin whose iterable is argument ``position``: the iterator is
    taken at the call, as the builtin takes it, so a value that is not iterable is a TypeError
    there, with the builtin's message, rather than at the first ``next()``."""
    def shim(od: _Fn, *args: Any, **kwargs: Any) -> Any:
        if len(args) > position:
            args = (*args[:position], iter(args[position]), *args[position + 1:])
        return generator(od, *args, **kwargs)
    return shim


def _map(od: _Fn, func: Any, *iterables: Iterable[Any]) -> Iterator[Any]:
    return _map_rows(od, func, zip(*[iter(iterable) for iterable in iterables]))


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


def _sorted(od: _Fn, iterable: Iterable[Any], /, *, key: Any = None,
            reverse: bool = False) -> list[Any]:
    items = list(iterable)
    keys = [od(key, item) for item in items]
    return [items[i] for i in sorted(range(len(items)), key=keys.__getitem__, reverse=reverse)]


def _list_sort(od: _Fn, items: list[Any], /, *, key: Any = None, reverse: bool = False) -> None:
    items[:] = _sorted(od, items, key=key, reverse=reverse)


def _extreme(builtin: _Fn) -> _Fn:
    better = operator.gt if builtin is max else operator.lt

    def shim(od: _Fn, *args: Any, key: Any, default: Any = _MISSING) -> Any:
        items = list(args[0] if len(args) == 1 else args)
        if not items:  # the builtin's own result or error message
            return builtin([], key=key) if default is _MISSING else default
        best, best_key = items[0], od(key, items[0])
        for item in items[1:]:
            item_key = od(key, item)
            if better(item_key, best_key):
                best, best_key = item, item_key
        return best

    return shim


def _reduce(od: _Fn, func: Any, iterable: Iterable[Any], *initial: Any) -> Any:
    iterator = iter(iterable)
    if initial:
        total = initial[0]
    else:
        try:
            total = next(iterator)
        except StopIteration:
            return functools.reduce(func, (), *initial)  # the builtin's own error
    for item in iterator:
        total = od(func, total, item)
    return total


def _sum(od: _Fn, iterable: Iterable[Any], /, start: Any = 0) -> Any:
    # Items are taken one at a time, as the builtin does (a generator's side effects interleave
    # with the additions the same way); runs of C numbers are added by the builtin itself, which
    # keeps its exact float summation, and every other addition goes through the context.
    total = start
    run: list[Any] = []
    for item in iterable:
        if is_static(type(item)) and is_static(type(total)):
            run.append(item)
            continue
        if run:
            total = sum(run, total)
            run = []
        total = od(operator.add, total, item)
    return sum(run, total) if run else total


def _cmp_to_key(od: _Fn, cmp: Any) -> type:
    class K:
        __slots__ = ("obj",)
        __hash__ = None  # type: ignore[assignment]

        def __init__(self, obj: Any) -> None:
            self.obj = obj

        def __lt__(self, other: K) -> Any:  # whatever cmp(...) < 0 gives
            return od(cmp, self.obj, other.obj) < 0

        def __gt__(self, other: K) -> Any:
            return od(cmp, self.obj, other.obj) > 0

        def __eq__(self, other: object) -> Any:
            return od(cmp, self.obj, other.obj) == 0  # type: ignore[attr-defined]

        def __le__(self, other: K) -> Any:
            return od(cmp, self.obj, other.obj) <= 0

        def __ge__(self, other: K) -> Any:
            return od(cmp, self.obj, other.obj) >= 0

    return K


def _callable_iter(od: _Fn, func: Any, sentinel: Any) -> Iterator[Any]:
    while True:
        try:
            value = od(func)
        except StopIteration:
            return
        if value == sentinel:
            return
        yield value


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
    return compile(source, filename, mode, flags, True, *args, **kwargs)


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
        source = compile(source, "<string>", "exec", _user_future_flags(), True)
    return exec(source, *_namespaces(globals_, locals_), **kwargs)


def _eval(od: _Fn, source: Any, globals_: Any = None, locals_: Any = None, /) -> Any:
    if isinstance(source, str):
        source = source.lstrip(" \t")  # as eval does
    elif isinstance(source, (bytes, bytearray)):
        source = source.lstrip(b" \t")
    if isinstance(source, _SOURCE):
        source = compile(source, "<string>", "eval", _user_future_flags(), True)
    return eval(source, *_namespaces(globals_, locals_))


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


def _dunder_builtin(name: str, check: Callable[[Any], None] | None = None) -> _Fn:
    def shim(od: _Fn, obj: Any) -> Any:
        out = od(lookup(type(obj), name), obj)
        if check is not None:
            check(out)
        return out
    shim.dunder = name  # type: ignore[attr-defined]
    return shim


def _must_be_str(name: str) -> Callable[[Any], None]:
    def check(out: Any) -> None:
        if not isinstance(out, str):
            raise TypeError(f"{name} returned non-string (type {type(out).__name__})")
    return check


def _check_len(out: Any) -> None:
    index = operator.index(out)
    if index < 0:
        raise ValueError("__len__() should return >= 0")


def _has_key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return kwargs.get("key") is not None


def _python_dunder(name: str) -> _Applies:
    # A Tagged value's dunders are not user code: the context's tag handling deals with it.
    return lambda args, kwargs: (len(args) == 1 and not kwargs and type(args[0]) is not Tagged
                                 and isinstance(lookup(type(args[0]), name), _Function))


_Applies = Callable[[tuple[Any, ...], dict[str, Any]], bool]  # when a shim applies
_always: _Applies = lambda args, kwargs: True  # noqa: E731

# id(builtin) -> [(builtin, when the shim applies, the shim), ...]
SHIMS: dict[int, list[tuple[Any, _Applies, _Fn]]] = {}


def _register(builtin: Any, applies: _Applies, shim: _Fn) -> None:
    SHIMS.setdefault(id(builtin), []).append((builtin, applies, shim))


_register(map, lambda a, k: len(a) >= 2 and not k, _map)
_register(filter, lambda a, k: len(a) == 2 and a[0] is not None and not k,
          _iterating(1, _filter))
_register(itertools.filterfalse, lambda a, k: len(a) == 2 and a[0] is not None and not k,
          _iterating(1, _filterfalse))
_register(itertools.starmap, _always, _iterating(1, _starmap))
_register(itertools.takewhile, _always, _iterating(1, _takewhile))
_register(itertools.dropwhile, _always, _iterating(1, _dropwhile))
_register(itertools.accumulate,
          lambda a, k: (len(a) > 1 and a[1] is not None) or k.get("func") is not None,
          _iterating(0, _accumulate))
_register(itertools.groupby,
          lambda a, k: (len(a) > 1 and a[1] is not None) or k.get("key") is not None,
          _iterating(0, _groupby))
_register(sorted, _has_key, _sorted)
_register(list.sort, _has_key, _list_sort)
_register(min, _has_key, _extreme(min))
_register(max, _has_key, _extreme(max))
_register(functools.reduce, _always, _reduce)
_register(sum, _always, _sum)
_register(functools.cmp_to_key, _always, _cmp_to_key)
_register(warnings.warn, _always, _warn)
# exec/eval called by name with one argument run in the user's own frame (see _rewrite); other
# calls are made from overdub's frames, whose namespaces and future flags are not the user's.
_register(compile, lambda a, k: len(a) + len(k) >= 3 and k.keys() <= _COMPILE_KEYWORDS, _compile)
_register(exec, lambda a, k: 1 <= len(a) <= 3 and k.keys() <= {"closure"}, _exec)
_register(eval, lambda a, k: 1 <= len(a) <= 3 and not k, _eval)
_register(type, lambda a, k: len(a) == 3 and isinstance(a[2], dict), _type3)
if sys.version_info >= (3, 12):  # PEP 695 moved them to C
    for _cls in (typing.TypeVar, typing.ParamSpec, typing.TypeVarTuple, typing.TypeAliasType):
        _register(_cls, _always, _named_by_caller(_cls))
_register(iter, lambda a, k: len(a) == 2 and not k, _callable_iter)
_register(iter, _python_dunder("__iter__"), _dunder_builtin("__iter__"))
for _builtin, _name, _check in (
        (len, "__len__", _check_len), (repr, "__repr__", _must_be_str("__repr__")),
        (str, "__str__", _must_be_str("__str__")), (next, "__next__", None),
        (abs, "__abs__", None)):  # abs(x) is a call, so its dunder is shimmed here
    _register(_builtin, _python_dunder(_name), _dunder_builtin(_name, _check))


def shim_for(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Fn | None:
    """The shim for calling builtin ``fn`` with these arguments, or None to call it natively."""
    for builtin, applies, shim in SHIMS.get(id(fn), ()):
        if builtin is fn and applies(args, kwargs):
            return shim
    if (type(fn) is _BuiltinMethod and type(fn.__self__) is list and fn.__name__ == "sort"
            and _has_key(args, kwargs)):  # xs.sort(key=...)
        items = fn.__self__
        return lambda od, *args, **kwargs: _list_sort(od, items, *args, **kwargs)
    return None
