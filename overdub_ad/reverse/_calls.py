"""Reverse mode's classification of calls: which builtins iterate, store or move values,
which in-place operators read their target, the local partial derivatives of float arithmetic
on the fast scalar path, and what a call's binding and source say about it."""

from __future__ import annotations

import bisect
import collections
import functools
import heapq
import io
import itertools
import math
import numbers
import operator
import types
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np

from overdub import Tagged

from .. import _rules
from .._array_methods import _REPLACEMENTS
from .._pytree import is_node
from .._shared import _innermost, partials_tables
from .._stores import CONTAINERS

_PYTHON_CODE = (types.FunctionType, types.MethodType, functools.partial)
_BuiltinMethod = types.BuiltinMethodType  # type([].append)
# isinstance tuples typed loosely: NumPy's stubs reject the numbers.Number they would narrow to
_NUMERIC: tuple[type[Any], ...] = (numbers.Number, np.ndarray, np.generic)
_SCALAR: tuple[type[Any], ...] = (float, complex, np.generic)
_INPLACE = {operator.iadd: operator.add, operator.isub: operator.sub,
            operator.imul: operator.mul, operator.itruediv: operator.truediv,
            operator.ipow: operator.pow, operator.imatmul: operator.matmul,
            operator.imod: operator.mod, operator.ifloordiv: operator.floordiv}
# In-place operators whose rules read the target's old value (add/sub only need its shape).
_READS_TARGET = {operator.imul, operator.itruediv, operator.ipow, operator.imatmul,
                 operator.imod}
_REAL_TYPES = frozenset({float, int, np.float64})
# Values _untag_bindings would skip: no closure (a Tagged one is not a function to it either)
_NOT_FUNCTIONS = frozenset({float, int, complex, np.float64, np.ndarray, Tagged})
_NATIVE_CONTAINERS = frozenset({tuple, list, range, dict, str})


# -- iteration made visible -----------------------------------------------------------------

# Builtins that iterate their arguments: a differentiated array given to them is first split
# into its (differentiated) elements.
_ITERATORS = {id(f): f for f in (
    iter, list, tuple, tuple.__new__, enumerate, zip, reversed, map, filter, sorted, set, frozenset,
    itertools.chain, itertools.chain.from_iterable, itertools.islice, itertools.zip_longest,
    itertools.product, itertools.permutations, itertools.combinations,
    itertools.combinations_with_replacement, itertools.cycle, itertools.tee, itertools.repeat,
    itertools.compress, itertools.dropwhile, itertools.takewhile, itertools.filterfalse,
    itertools.starmap, itertools.groupby, itertools.accumulate, functools.reduce,
    *[getattr(itertools, name) for name in ("pairwise", "batched") if hasattr(itertools, name)])}
# C functions that only compare and move values (heaps, sorted insertion): run natively with
# the tagged values themselves, which they store as they are.
_MOVING = {id(f): f for f in (heapq.heappush, heapq.heappop, heapq.heapify, heapq.heappushpop,
                              heapq.heapreplace, bisect.insort, bisect.insort_left,
                              bisect.insort_right, bisect.bisect, bisect.bisect_left,
                              bisect.bisect_right,
                              functools.partial,  # (its arguments kept, tags and all)
                              collections.deque.copy, collections.deque.__copy__,  # (copy.copy)
                              # the max-heaps of heapq.nsmallest (public in Python 3.14)
                              *[getattr(heapq, name) for name in (
                                  "_heapify_max", "_heappop_max", "_heapreplace_max",
                                  "heapify_max", "heappop_max", "heapreplace_max",
                                  "heappush_max", "heappushpop_max") if hasattr(heapq, name)])}


# -- fast scalar partials (no enclosing context) -----------------------------------------------

_NOT_ITERATORS = frozenset({int, float, complex, bool, str, bytes, list, tuple, dict, set,
                            frozenset, range, type(None), np.ndarray, Tagged, slice})


def _is_iterator(x: Any) -> bool:
    t = type(x)  # (a stream is a file to the functions given it: see _shared._is_iterator)
    return t not in _NOT_ITERATORS and hasattr(t, "__next__") and not isinstance(x, io.IOBase)


# Float arithmetic and math functions recorded with their partials on floats, as declared
# beside their shipped rules (_rules.defscalar): an entry is in _FAST1/_FAST2 only while its
# function's rules are the shipped ones (a rule the user registers wins), rebuilt on change.
_BINARY_OPERATIONS = frozenset(map(id, (
    operator.add, operator.sub, operator.mul, operator.truediv, operator.pow, operator.iadd,
    operator.isub, operator.imul, operator.itruediv, operator.ipow, np.add, np.subtract,
    np.multiply, np.true_divide, np.power, math.pow, pow)))
_FAST1, _FAST2, _FAST = partials_tables("reverse-partials")


def _dict_storing(x: Any) -> bool:
    """A container of :data:`CONTAINERS` whose item assignment is C code (``defaultdict``,
    ``OrderedDict``, a subclass that adds methods): ``c[k] = v`` stores a differentiated
    value in it as it is (a Python ``__setitem__`` is run instead, and sees the value)."""
    return isinstance(x, CONTAINERS) and \
        not isinstance(getattr(type(x), "__setitem__", None), types.FunctionType)


_INPLACE_IDS = frozenset(map(id, _INPLACE))
_ARRAY_MUTATORS = frozenset({"fill", "sort", "put"})  # the methods in _METHODS that write


def _written_array(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The plain array that a call with no differentiated argument writes into (``a += 1``,
    ``np.copyto(a, b)``, ``np.put(a, i, v)``, ``np.add.at(a, i, v)``, ``a.fill(0)``), or None."""
    if not (id(fn) in _INPLACE_IDS or fn is np.copyto or id(fn) in _REPLACEMENTS):
        if type(fn) is not _BuiltinMethod:
            return None
        owner = fn.__self__  # (np.copyto and operator.iadd are of this type too)
        if type(owner) is np.ndarray:
            return owner if fn.__name__ in _ARRAY_MUTATORS else None
        if not (isinstance(owner, np.ufunc) and fn.__name__ == "at"):
            return None
    return args[0] if args and type(args[0]) is np.ndarray else None


def _reads_text(fn: Any) -> bool:
    """Whether ``fn`` is a C function that makes text of the items of the containers it is
    given (the JSON encoder ``json.dumps`` calls, a method of ``str`` or ``bytes``): text is
    a constant, and C code expects the items' own types (see ``ReverseContext._textual``)."""
    kind = type(fn)
    if kind is _C_ENCODER:
        return True
    if kind is _BuiltinMethod:
        return type(fn.__self__) in _TEXT
    return kind is types.MethodDescriptorType and fn.__objclass__ in _TEXT


_TEXT = (str, bytes, bytearray)
_C_ENCODER: Any = None  # (without it json's Python encoder runs, seen as any Python code)
try:
    from _json import make_encoder as _C_ENCODER
except ImportError:  # pragma: no cover
    pass


def _given_nodes(x: Any, within: tuple[int, ...] = ()) -> bool:
    """Whether ``x`` is, or holds in its lists, tuples and dicts, a pytree node other than
    those containers (a dataclass, a named tuple, a registered class): the attributes of an
    object are stored with their metadata kept aside by the core, where a derivative's entry
    point, taking them apart natively, would read them plain.  ``within``: the ids of the
    containers on the way down."""
    kind = type(x)
    if kind in (list, tuple, dict):
        if id(x) in within:
            return False
        within = (*within, id(x))
        return any(_given_nodes(v, within) for v in (x.values() if kind is dict else x))
    return kind is not Tagged and is_node(x)


def _outs(out: Any) -> list[np.ndarray]:
    """The plain arrays of an ``out=`` argument."""
    return [o for o in (out if type(out) is tuple else (out,)) if type(o) is np.ndarray]


def _put_back(writes: list[tuple[Any, ...]]) -> None:
    """Run the ``(setattr or operator.setitem, container, key, value)`` writes: Python code,
    so that an enclosing context sees them."""
    for write, container, key, value in writes:
        write(container, key, value)


def _arrays_within(x: Any, path: tuple[Any, ...], within: tuple[int, ...] = ()
                   ) -> Iterator[tuple[np.ndarray, tuple[Any, ...]]]:
    """The NumPy arrays in ``x`` (a primal argument, or the residuals of a ``custom_vjp``:
    through tuples, named tuples, lists and dicts, at any depth -- NumPy reads nested lists to
    any depth), each with its path from ``path``.  ``within``: the ids of the containers on
    the way down (a container holding itself is not entered again)."""
    value = _innermost(x)
    if type(value) is np.ndarray:
        yield value, path
    elif type(x) in (tuple, list, dict) or (isinstance(x, tuple) and hasattr(x, "_fields")):
        if id(x) in within:
            return
        within = (*within, id(x))
        for key, item in (x.items() if type(x) is dict else enumerate(x)):
            yield from _arrays_within(item, path + (key,), within)


def _stored(entry: Any, path: tuple[Any, ...]) -> Any:
    """What ``entry`` holds at ``path`` (an enclosing context's tagged value, or an array):
    ``(i, ...)`` in its primal argument ``i`` (then the keys into its containers),
    ``("out", ...)`` its output, ``("kw", name)`` a keyword argument, ``("res", ...)`` its
    ``custom_vjp`` residuals."""
    kind = path[0]
    if kind == "out":
        return entry.out if len(path) == 1 else entry.out[path[1]]
    if kind == "kw":
        return entry.kwargs[path[1]]
    if kind == "res":
        value = entry.joint.residuals
        for key in path[1:]:
            value = value[key]
        return value
    value = entry.primals[path[0]]
    for key in path[1:]:
        value = value[key]
    return value


def _swapped(container: Any, keys: tuple[Any, ...], value: Any, saved: Any) -> Any:
    """``container`` with ``saved`` where ``keys`` lead to ``value`` (rebuilt along the way:
    the residuals' containers may be the user's own)."""
    if not keys:
        return saved if _innermost(container) is value else container
    item = container[keys[0]]
    new = _swapped(item, keys[1:], value, saved)
    if new is item:
        return container
    if type(container) is dict:
        return {**container, keys[0]: new}
    items = list(container)
    items[keys[0]] = new
    if type(container) is list:
        return items
    return type(container)(*items) if hasattr(container, "_fields") else tuple(items)


def _replace(entry: Any, path: tuple[Any, ...], value: Any, saved: Any) -> None:
    """``entry`` holds ``saved`` instead of ``value`` at ``path`` (see :func:`_stored`)."""
    if path[0] == "kw":
        if _innermost(entry.kwargs[path[1]]) is value:
            entry.kwargs = {**entry.kwargs, path[1]: saved}
    elif path[0] == "res":
        entry.joint.residuals = _swapped(entry.joint.residuals, path[1:], value, saved)
    elif path[0] == "out":
        if len(path) == 1:
            if _innermost(entry.out) is value:
                entry.out = saved
        elif _innermost(entry.out[path[1]]) is value:
            out = list(entry.out)
            out[path[1]] = saved
            entry.out = type(entry.out)(*out) if hasattr(entry.out, "_fields") else \
                type(entry.out)(out)
    else:
        entry.primals[path[0]] = _swapped(entry.primals[path[0]], path[1:], value, saved)


_DECISIONS: dict[int, tuple[Any, bool]] = {}
# Python functions known not to be primitives (the core recurses into them): fn -> (its code,
# the context class that found out, the rules' version when no rule, stand-in or other test
# of ReverseContext._direct applied to it)
_RECURSIVE: weakref.WeakKeyDictionary[Any, tuple[Any, type, int]] = weakref.WeakKeyDictionary()


def _reads_table() -> dict[int, tuple[Any, ...]]:
    """What the shipped reverse rules of common functions read, per argument: the positions
    of the primal arguments (-1 for the output) whose values rule ``i`` uses -- beyond shapes
    and dtypes, which a placeholder keeps.  ``id(fn) -> (fn, its shipped rules, reads)``;
    a rule registered later by the user is not in it (its identity differs), so its entries
    keep every value."""
    none: frozenset[int] = frozenset()
    x, y, out = frozenset({0}), frozenset({1}), frozenset({-1})
    table = {}
    for fns, reads in (((operator.add, np.add, operator.sub, np.subtract), (none, none)),
                       ((operator.neg, np.negative, operator.pos, np.positive, np.sum, np.mean),
                        (none,)),
                       ((operator.mul, np.multiply, operator.matmul, np.matmul), (y, x)),
                       ((operator.truediv, np.true_divide), (y, y | out)),
                       ((operator.pow, np.power), (x | y, x | y | out)),
                       ((np.tanh, np.exp, np.sqrt, np.tan, np.expm1, np.reciprocal, np.cbrt),
                        (out,)),
                       ((np.sin, np.cos, np.log, np.log1p, np.log2, np.log10, np.square,
                         np.arctan, np.sinh, np.cosh, np.arcsin, np.arccos, np.arcsinh,
                         np.arctanh), (x,))):
        for fn in fns:
            rules = _rules.vjp_rules(fn)
            if rules is not None:
                table[id(fn)] = (fn, rules, reads)
    return table

_NOT_SIMPLE = object()
_SIMPLE_VALUES = frozenset({np.ndarray, float, np.float64, complex, np.complex128})
_SIMPLE_ARGS = frozenset({np.ndarray, float, int, bool, complex, str, type(None), slice,
                          type(Ellipsis), type, np.float64, np.int64, np.intp, np.bool_})


def _plain_tuple(t: tuple[Any, ...]) -> bool:
    """A tuple of plain numbers, indices and arrays (a shape, an index, axes)."""
    for item in t:
        if type(item) not in _SIMPLE_ARGS:
            return False
    return True


def _binding_error(fn: types.FunctionType, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> None:
    """Raise the TypeError ``fn(*args, **kwargs)`` raises natively if the arguments do not
    bind to its parameters: the specialised version's own message would count its hidden
    first parameter ("takes 2 positional arguments but 3 were given" for one too many)."""
    import inspect
    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        try:
            fn(*args, **kwargs)  # fails to bind, as natively, before any of fn's code runs
        except TypeError as native:
            raise native.with_traceback(None) from None


def _remember(fn: Any, decision: bool) -> None:
    if not isinstance(fn, _PYTHON_CODE) and len(_DECISIONS) < 100_000:
        _DECISIONS[id(fn)] = (fn, decision)


def _positional(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
                ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Keyword arguments bound to their positions where ``fn``'s signature says so."""
    import inspect
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return args, kwargs
    items, named = list(args), dict(kwargs)
    for i, p in enumerate(params):
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        if i < len(items):
            continue
        if p.name in named:
            items.append(named.pop(p.name))
        elif p.default is not p.empty and any(q.name in named for q in params[i + 1:]):
            items.append(p.default)
        else:
            break
    return tuple(items), named
