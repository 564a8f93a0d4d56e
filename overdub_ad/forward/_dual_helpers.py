"""The helpers the dual code calls where its inline guards fail: operators, items,
attributes, iteration, comparisons and truth tests of values that are not floats.

The pass (:mod:`._pass`) writes float arithmetic out in place behind type guards; anything
else calls one of these, bound into the dual by name (``HELPERS``, which :mod:`._dual` fills).
They apply the same rule tables as the general mode, follow tuples, ranges, lists and strings,
and raise :class:`._dual_numbers._Deopt`, before any effect, where they cannot follow a value
(arrays, user classes' dunders, a differentiated index).  Calls are :mod:`._dual`'s.

Each runs on values of the specialised code's level ``L``: tangents are numbers (or arrays
of a batch of directions), 0.0 where a value has none, None where the code knows statically
that there is none (a constant).
"""

from __future__ import annotations

import itertools
import operator
import types
from typing import Any, cast

import numpy as np

from overdub import Tagged, opaque

from .. import _rules
from . import _dual_objects
from ._tangents import _exactly_zero
from ._dual_numbers import (_array_operands, _box, _Deopt, _Dual, _in_precision, _Level, _named,
                            _numberlike, _plain, _sum, _TANGENTS, _unbox, _zero)


_AS_NUMBERS = {operator.iadd: operator.add, operator.isub: operator.sub,
               operator.imul: operator.mul, operator.itruediv: operator.truediv,
               operator.ipow: operator.pow, operator.ifloordiv: operator.floordiv}
_PURE_OPERANDS = frozenset((float, int, complex, bool, str, bytes, tuple, list, type(None),
                            range, frozenset))


@opaque
def _binop(level: _Level, op: Any, a: Any, da: Any, b: Any, db: Any) -> tuple[Any, Any]:
    """``op(a, b)`` and its tangent where the expanded code's type guard failed."""
    if type(a) is _Dual and a.L is level:
        a, da = a.v, _sum(da, a.t)
    if type(b) is _Dual and b.L is level:
        b, db = b.v, _sum(db, b.t)
    if (op is operator.mod or op is operator.imod) and isinstance(a, (str, bytes)):
        return _formatted(op, a, b), 0.0
    if (type(a) is np.ndarray or type(b) is np.ndarray) and op not in _IN_PLACE and \
            _array_operands(a, da, b, db):
        return _array_binop(op, a, da, b, db)
    if _exactly_zero(da):
        da = None  # no tangent at all: as the general mode, which leaves its rule out
    if _exactly_zero(db):
        db = None
    if type(a) is _Dual or type(b) is _Dual:
        op = _AS_NUMBERS.get(op, op)  # (total += v: a number's in-place operator is the
        if op is operator.floordiv:  # operator, as Python falls back to it)
            return op(a, b), 0.0
        tangent = _TANGENTS.get(op)
        if tangent is None:
            raise _Deopt
        out = op(a, b)
        t = tangent(a, da, b, db, out)
        return out, 0.0 if t is None else t
    if _numberlike(a) and _numberlike(b):
        rules = _rules.jvp_rules(op) if not _rules.is_nondifferentiable(op) else None
        out = op(a, b)
        if rules is None:
            return out, 0.0
        t = None
        for rule, d in ((rules[0], da), (rules[1], db)):
            if d is not None and rule is not _rules.ZERO:
                t = _sum(t, rule(d, out, a, b))
        return out, 0.0 if t is None else t
    if type(a) not in _PURE_OPERANDS or type(b) not in _PURE_OPERANDS:
        raise _Deopt(f"{op.__name__} on a {type(a).__name__} and a "
                     f"{type(b).__name__}")  # arrays (the general mode's), user classes
    if type(a) is list and (op is operator.iadd or op is operator.imul) \
            and not _dual_objects._fresh(a):
        raise _Deopt("a list that existed before the run extended in place")
    if not (_zero(da) and _zero(db)):
        if op is operator.add and type(a) is tuple and type(b) is tuple:
            return a + b, _tuple_tangent(a, da) + _tuple_tangent(b, db)
        if op is operator.mul and (type(a) is tuple) != (type(b) is tuple):
            seq, dseq, n = (a, da, b) if type(a) is tuple else (b, db, a)
            if type(n) is int:
                return op(a, b), _tuple_tangent(cast(tuple[Any, ...], seq), dseq) * n
        raise _Deopt
    return op(a, b), 0.0


def _formatted(op: Any, text: str | bytes, values: Any) -> Any:
    """``text % values``: formatting, whose result is text, a constant (docs/ad.md), made of
    the values the duals hold.  Values of other kinds (a dict or list made in the run holds
    duals boxed, which formatting would read as objects) are the general mode's."""
    items = values if type(values) is tuple else (values,)
    if not all(_numberlike(v) or v is None or isinstance(v, (str, bytes)) or (
            type(v) is np.ndarray and v.dtype.kind != "O") for v in items):
        raise _Deopt(f"text formatting of a {type(values).__name__}")
    plain = tuple(map(_plain, items))
    return op(text, plain if type(values) is tuple else plain[0])


# operators that write into an array: the general mode's (it follows the writes)
_IN_PLACE = frozenset((operator.iadd, operator.isub, operator.imul, operator.itruediv,
                       operator.ipow, operator.ifloordiv, operator.imod, operator.imatmul))


def _array_binop(op: Any, a: Any, da: Any, b: Any, db: Any) -> tuple[Any, Any]:
    """``op(a, b)`` on NumPy arrays and numbers (a small state, ``s + h * k``), its tangent
    from the operator's rules, as the general mode applies them to an array's operands: every
    rule of an operand with a tangent runs, a zero one's too (an operand the dual gives 0.0 is
    maybe a constant, whose term the general mode leaves out: where the two differ, a term
    ``0 * inf``, the tangent has a nan and the route declines, see ``_dual._Singular``)."""
    rules = _rules.jvp_rules(op) if not _rules.is_nondifferentiable(op) else None
    out = op(a, b)
    if rules is None:
        return out, 0.0
    if (type(a) is np.ndarray and type(da) is not np.ndarray) or type(a) is int:
        da = None  # (an array's 0.0: no tangent, as a constant array has none; nor a Python
        # integer's, ``a ** len(a)``: its term would compute out * log(a), warning for a < 0)
    if (type(b) is np.ndarray and type(db) is not np.ndarray) or type(b) is int:
        db = None
    t = None
    for rule, d in ((rules[0], da), (rules[1], db)):
        if d is not None and rule is not _rules.ZERO:
            t = _sum(t, rule(d, out, a, b))
    return out, 0.0 if t is None else _in_precision(out, t)


def _tuple_tangent(t: tuple[Any, ...], dt: Any) -> tuple[Any, ...]:
    return dt if type(dt) is tuple else (0.0,) * len(t)


@opaque
def _unop(level: _Level, op: Any, a: Any, da: Any) -> tuple[Any, Any]:
    """``op(a)`` (``-a``, ``+a``, ``~a``) where the type guard failed."""
    if type(a) is _Dual and a.L is level:
        a, da = a.v, _sum(da, a.t)
    if type(a) is Tagged or not (_numberlike(a) or type(a) in _PURE_OPERANDS):
        raise _Deopt
    out = op(a)
    if op is operator.invert or da is None or (_zero(da) and not _numberlike(a)):
        return out, 0.0
    return out, (-da if op is operator.neg else +da)


@opaque
def _plain_key(dkey: Any) -> None:
    """A stop before an item is read at a key with a tangent: the general mode follows the
    item's derivative, or refuses a plain one (a cache read by ``d[x]``), where the dual would
    give a silent constant."""
    if dkey is not None and not _zero(dkey):
        raise _Deopt("an item read at a differentiated key")


@opaque
def _getitem(level: _Level, obj: Any, dobj: Any, key: Any) -> tuple[Any, Any]:
    """``obj[key]`` and its tangent, where ``obj`` is not a tuple with tracked tangents."""
    kind = type(obj)
    if kind is np.ndarray and type(key) is int and obj.ndim == 1:
        # (the common case of _element first: p[0] of a vector of parameters)
        if type(dobj) is np.ndarray:  # (unbatched: a NumPy scalar, as the element is)
            return obj[key], dobj[key] if dobj.ndim == 1 else dobj[..., key]
        if dobj is None or _zero(dobj):
            return obj[key], 0.0
    if type(key) is Tagged or type(key) is _Dual:
        raise _Deopt("an item read at a differentiated index")
    if kind is np.ndarray:  # (its indices checked there: integers and slices only)
        return _element(obj, dobj, key)
    if not (_safe_tree(key) or (type(key) is slice and _safe_tree(
            (key.start, key.stop, key.step)))):
        raise _Deopt("an index whose class runs Python code (__index__, __hash__)")
    if kind is tuple or kind is list or (kind is not str and _named(obj)):
        value = obj[key]
        if type(dobj) is tuple:  # (a list or named tuple argument: a tuple of tangents)
            return value, dobj[key]
        return _unbox(level, value)
    if kind is dict:
        value = obj[key]
        if type(dobj) is dict:  # a dict argument: a dict of tangents
            return value, dobj.get(key, 0.0)
        return _unbox(level, value)
    if kind in (str, range, bytes):
        return obj[key], 0.0
    raise _Deopt(f"an item of a {kind.__name__}")  # user classes (their __getitem__)


# (exactly these: a subclass's __index__ may be Python's)
_INDICES = frozenset((int, np.int64, np.int32, np.int16, np.int8, np.uint64, np.uint32,
                      np.uint16, np.uint8))
_ALL = slice(None)


def _element(array: np.ndarray, darray: Any, key: Any) -> tuple[Any, Any]:
    """``array[key]`` by integers and slices (basic indexing): an element (a NumPy scalar)
    where an integer indexes each axis, else a view (``p[:2]``, ``p[::-1]``, a row ``P[0]``),
    which the dual only reads (writes into any array stop: ``_dual_objects._setitem``, the
    in-place operators); its tangent the tangent's same item, after any batch dimensions
    (jacfwd's directions lead).  A stop for anything else done with an array (masks, arrays
    of indices, ``None``, ``...``: the general mode's)."""
    keys = key if type(key) is tuple else (key,)
    if len(keys) > array.ndim or not all(map(_basic_index, keys)):
        raise _Deopt("an array indexed other than by integers and slices")
    value = array[key]
    if type(darray) is np.ndarray:  # (unbatched: a NumPy scalar, as the element is)
        batch = darray.ndim - array.ndim
        if batch < 0:
            raise _Deopt("an array with a tangent of fewer dimensions")
        return value, darray[keys] if not batch else darray[(_ALL,) * batch + keys]
    if darray is None or _zero(darray):
        return value, 0.0
    raise _Deopt("an array with a tangent that is not an array")


def _basic_index(k: Any) -> bool:
    """An integer (not a bool), or a slice of integers and Nones: basic indexing, which
    runs no Python code and gives an element or a view."""
    if type(k) is slice:
        return all(b is None or type(b) in _INDICES for b in (k.start, k.stop, k.step))
    return type(k) in _INDICES


_MODULE = types.ModuleType


@opaque
def _getattr(level: _Level, site: int, obj: Any, dobj: Any, name: str) -> tuple[Any, Any]:
    """``obj.name`` where ``obj`` is not a module (nor of a class the ``site`` recorded)."""
    kind = type(obj)
    if kind is _Dual and obj.L is level:
        obj, dobj = obj.v, obj.t
        kind = type(obj)
    if kind in (float, int, complex, bool) and name in ("real", "imag"):
        value = getattr(obj, name)
        if dobj is None or _zero(dobj):
            return value, 0.0
        return value, (np.real(dobj) if name == "real" else np.imag(dobj))
    if kind in (str, bytes, tuple, range) or (kind in (float, int, complex, bool)
                                             and (dobj is None or _zero(dobj))):
        return getattr(obj, name), 0.0  # a pure method of an immutable value
    if kind is type and obj.__module__ == "builtins":
        return getattr(obj, name), 0.0
    if (kind is list or kind is dict) and _zero(dobj):  # a method: its call checks the rest
        return getattr(obj, name), 0.0
    if kind is np.ndarray and name in ("shape", "ndim", "size", "dtype"):
        return getattr(obj, name), 0.0
    if kind.__flags__ & _dual_objects._HEAPTYPE and kind is not _Dual:
        return _dual_objects._attribute(level, site, obj, dobj, name)
    raise _Deopt(f"attribute {name!r} of a {kind.__name__}")  # a number's method...


@opaque
def _plain_elements(*tangents: Any) -> None:
    """Values with tangents are going into a list, set or dict: not followed here."""
    for t in tangents:
        if not _zero(t):
            raise _Deopt


@opaque
def _boxed(level: _Level, v: Any, t: Any) -> Any:
    if type(v) is float and type(t) is float:  # the common case, as _box does it
        return _Dual(level, v, t) if t else v
    return _box(level, v, t)


@opaque
def _unboxed(level: _Level, x: Any) -> tuple[Any, Any]:
    return _unbox(level, x)


@opaque
def _deopt(reason: str) -> None:
    raise _Deopt(reason)


_ITERABLES = frozenset((range, str, bytes))
_BOXING = frozenset((list, dict, enumerate, zip, reversed, *_dual_objects._VIEWS))


@opaque
def _pairs(level: _Level, iterable: Any, tangents: Any) -> Any:
    """``(item, tangent)`` for each item of what a ``for`` loop of the specialised code
    iterates: a tuple with tracked tangents pairs them; ranges, lists, strings, dicts (and
    enumerate/zip/reversed of them) hold values without tangents; an array gives its elements
    (or rows) and their tangents; anything else (a generator, an iterator of a user class) is
    not followed."""
    kind = type(iterable)
    if type(tangents) is tuple and (kind is tuple or kind is list or _named(iterable)):
        return zip(iterable, tangents)  # (a list or named tuple argument: a tuple of them)
    if kind is _dual_objects._Generator:
        return _dual_objects.generated_pairs(level, iterable)
    if type(tangents) is _dual_objects._Zipped:
        return _dual_objects._zipped_items(level, iterable, tangents)
    if tangents is None or _zero(tangents):
        if kind is tuple or kind in _BOXING or _named(iterable):  # items may be boxed
            return (_unbox(level, item) for item in iterable)
        if kind in _ITERABLES:
            return zip(iterable, itertools.repeat(0.0))
    if kind is dict and type(tangents) is dict:  # a dict argument: its keys
        return zip(iterable, itertools.repeat(0.0))
    if kind is np.ndarray and iterable.ndim:  # (elements, or rows)
        return zip(*_dual_objects._items(level, iterable, tangents))
    raise _Deopt(f"iteration over a {kind.__name__}")


# Values whose comparison, truth, hash, length and text run no Python code (no effect).
_SAFE = frozenset((float, int, bool, complex, str, bytes, type(None), _Dual, range,
                   np.float64, np.float32, np.int64, np.int32, np.bool_, np.complex128))
_CONTAINERS = frozenset((tuple, list, dict, set, frozenset))
_TRUTHFUL = _SAFE | _CONTAINERS  # truth of a container is its length


def _safe_tree(x: Any, depth: int = 3) -> bool:
    """Whether comparing or hashing ``x`` runs no Python code (containers looked into)."""
    kind = type(x)
    if kind in _SAFE:
        return True
    if depth and kind in _CONTAINERS:
        items = x.items() if kind is dict else x
        return all(_safe_tree(e, depth - 1) for e in itertools.chain.from_iterable(items)) \
            if kind is dict else all(_safe_tree(e, depth - 1) for e in items)
    return False


@opaque
def _inert_values(*values: Any) -> None:
    """A stop before values are hashed (a set or dict display) or formatted (an f-string)
    whose class would run Python code doing it (its effects would run again in the general
    mode after a later stop)."""
    if not all(map(_safe_tree, values)):
        raise _Deopt("a value whose class runs Python code, hashed or formatted")


@opaque
def _compare(op: Any, a: Any, b: Any) -> Any:
    """``op(a, b)`` for a comparison the inline guard did not pass: containers of plain
    values compare natively; objects with comparison methods of their own are not followed."""
    if not (_safe_tree(a) and _safe_tree(b)):
        raise _Deopt
    return op(a, b)


@opaque
def _truth(x: Any) -> None:
    """A truth test of a value whose ``__bool__``/``__len__`` may be Python: not followed."""
    raise _Deopt
