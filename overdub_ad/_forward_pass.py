"""Forward mode, specialised: scalar Python rewritten to carry its tangents in local variables.

The general forward mode (:mod:`._forward`) tags values and dispatches every operation through
its context: right for anything, but each ``a * b`` costs a context call.  For code that
computes with Python floats this module does what source-to-source AD does.  A pass
(:class:`_ForwardPass`, given to a context of its own, :class:`_Specialising`) rewrites each
function it reaches into its *dual*: every local variable ``v`` gets a tangent local ``@d.v``,
arithmetic on floats is expanded in place (primal and tangent, no call), and the function takes
its arguments' tangents and returns ``(value, tangent)``.  Before and after (simplified: each
operation is guarded, see below)::

    def f(x, y):                        def f(@T, x, y):
        z = x * y                           @L, @d.x, @d.y = @T
        return math.sin(z) + y              if x.__class__ is float and y.__class__ is float:
                                                z = x * y
                                                @d.z = @d.x * y + @d.y * x
                                            else:
                                                z, @d.z = @overdub_ad.binop(@L, ...)
                                            @t1, @d.t1 = @overdub_ad.call(@L, 3, math.sin, (z,),
                                                                          (@d.z,), None, None)
                                            ...
                                            return (@t2, @d.t2)

Every operation is guarded by the types of its operands: floats (and ints) take the expanded
code; anything else a helper (``@overdub_ad.*``), which applies the same rule tables as the
general mode.  Calls of Python functions go to their duals (directly, through a per-site cache,
once a site has seen the function), calls of ``math``/``cmath``/builtins/NumPy on numbers to
their rules.  Tuples carry tuples of tangents.

What the specialised code does not handle -- arrays, lists or dicts receiving differentiated
values, attribute or item writes, ``try``/``with``, generators, comprehensions, C functions
without a rule, objects of user classes -- makes it stop with :class:`_Deopt`, *before* doing
anything with an effect: up to that point it has only computed with numbers and tuples, read
variables and called functions of the same kind.  The outermost specialised ``jvp`` then runs
the general mode from the start, so the result is the general mode's.  A function that stopped
once is not tried again (per code object).

Nested derivatives: a value with a tangent that leaves the locals of its function -- into a
closure cell, a default, the argument of a nested ``jvp`` -- is boxed as a :class:`_Dual` of its
``jvp`` (its *level*); code of another level computes with it as with a number (dual arithmetic,
the newer level outside), which keeps nested derivatives free of perturbation confusion.

The specialised path runs only when no other context is running (an enclosing context must see
the arithmetic as calls, which the general mode gives it).  The helpers and the per-site cache
are bound as names in ``builtins`` (see ``_BUILTIN_PREFIX``): the core has no way yet for a pass
to bind hidden names into the code it produces.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import itertools
import math
import numbers
import operator
import sys
import threading
import types
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from overdub import Context, Tagged, can_recurse, is_opaque, opaque, overdub, recurse

from . import _rules
from ._pytree import flatten, unflatten


class _Deopt(BaseException):
    """The specialised code met what it does not handle; raised before any effect.  A
    ``BaseException``, so that user code's ``except Exception`` does not catch it."""


# -- levels and boxed duals ---------------------------------------------------------------------

_ORDER = itertools.count()


class _Level:
    """One specialised ``jvp`` call: the identity of its tangents.  Newer levels (nested calls)
    have a higher ``order``."""

    __slots__ = ("order",)

    def __init__(self) -> None:
        self.order = next(_ORDER)


_NO_LEVEL = _Level()  # rules run on other levels' duals: no tangent of their own


class _Dual:
    """``v`` with the tangent ``t`` of level ``L``, where it leaves the locals that track it.

    Arithmetic (``+ - * /``, negation, ``abs``, comparisons) is dual arithmetic for the newest
    level among the operands; any other use of a dual goes through the helpers of the
    specialised code, which deopt where they cannot follow it."""

    __slots__ = ("L", "v", "t")

    def __init__(self, level: _Level, v: Any, t: Any) -> None:
        self.L, self.v, self.t = level, v, t

    def __repr__(self) -> str:
        return f"_Dual({self.v!r}, {self.t!r})"

    # With a plain number the expressions of _TANGENTS are written out (the common case of
    # nested derivatives); anything else goes through _dual2.
    def __add__(self, other: Any) -> Any:
        if other.__class__ in _PLAIN_NUMBERS:
            return _Dual(self.L, self.v + other, self.t)
        return _dual2(operator.add, self, other)

    def __radd__(self, other: Any) -> Any:
        if other.__class__ in _PLAIN_NUMBERS:
            return _Dual(self.L, other + self.v, self.t)
        return _dual2(operator.add, other, self)

    def __sub__(self, other: Any) -> Any:
        if other.__class__ in _PLAIN_NUMBERS:
            return _Dual(self.L, self.v - other, self.t)
        return _dual2(operator.sub, self, other)

    def __rsub__(self, other: Any) -> Any:
        if other.__class__ in _PLAIN_NUMBERS:
            return _Dual(self.L, other - self.v, -self.t)
        return _dual2(operator.sub, other, self)

    def __mul__(self, other: Any) -> Any:
        if other.__class__ in _PLAIN_NUMBERS:
            return _Dual(self.L, self.v * other, self.t * other)
        return _dual2(operator.mul, self, other)

    def __rmul__(self, other: Any) -> Any:
        if other.__class__ in _PLAIN_NUMBERS:
            return _Dual(self.L, other * self.v, self.t * other)
        return _dual2(operator.mul, other, self)

    def __truediv__(self, other: Any) -> Any:
        if other.__class__ in _PLAIN_NUMBERS:
            return _Dual(self.L, self.v / other, self.t * (1.0 / other))
        return _dual2(operator.truediv, self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return _dual2(operator.truediv, other, self)

    def __floordiv__(self, other: Any) -> Any:
        return _plain(self) // _plain(other)  # piecewise constant

    def __rfloordiv__(self, other: Any) -> Any:
        return _plain(other) // _plain(self)

    def __neg__(self) -> Any:
        return _Dual(self.L, -self.v, -self.t)

    def __pos__(self) -> Any:
        return _Dual(self.L, +self.v, +self.t)

    def __abs__(self) -> Any:
        v = self.v
        return _Dual(self.L, abs(v), self.t * _sign(v))

    def __pow__(self, other: Any) -> Any:
        raise _Deopt

    __rpow__ = __mod__ = __rmod__ = __matmul__ = __rmatmul__ = __pow__

    def __eq__(self, other: Any) -> Any:
        return _plain(self) == _plain(other)

    def __ne__(self, other: Any) -> Any:
        return _plain(self) != _plain(other)

    def __lt__(self, other: Any) -> Any:
        return _plain(self) < _plain(other)

    def __le__(self, other: Any) -> Any:
        return _plain(self) <= _plain(other)

    def __gt__(self, other: Any) -> Any:
        return _plain(self) > _plain(other)

    def __ge__(self, other: Any) -> Any:
        return _plain(self) >= _plain(other)

    def __hash__(self) -> int:
        return hash(_plain(self))

    def __bool__(self) -> bool:
        return bool(_plain(self))

    def __format__(self, spec: str) -> str:
        return format(_plain(self), spec)

    def __str__(self) -> str:
        return str(_plain(self))


_PLAIN_NUMBERS = frozenset((float, int))


def _plain(x: Any) -> Any:
    """``x`` without any level's tangent (what a piecewise-constant use of it sees)."""
    while x.__class__ is _Dual:
        x = x.v
    return x


def _sign(v: Any) -> Any:
    return (v > 0) - (v < 0) + 0.0


def _top(values: Any) -> _Level | None:
    """The newest level among the duals in ``values`` (one level of tuples looked into)."""
    top = None
    for v in values:
        if v.__class__ is tuple:
            level = _top(v)
        elif v.__class__ is _Dual:
            level = v.L
        else:
            continue
        if level is not None and (top is None or level.order > top.order):
            top = level
    return top


def _at(x: Any, level: _Level) -> tuple[Any, Any]:
    """``(value, tangent)`` of ``x`` at ``level`` (tangent None: none at that level)."""
    if x.__class__ is _Dual and x.L is level:
        return x.v, x.t
    if x.__class__ is tuple and _top(x) is level:
        parts = [_at(e, level) for e in x]
        return tuple(p for p, _ in parts), tuple(0.0 if t is None else t for _, t in parts)
    return x, None


def _sum(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else a + b


# The rule tables' operator rules, written out for numbers and duals: (x, dx, y, dy, out) ->
# tangent, None for an operand without one (the same expressions, so the same bits).
_TANGENTS: dict[Any, Callable[..., Any]] = {
    operator.add: lambda x, dx, y, dy, out: _sum(dx, dy),
    operator.sub: lambda x, dx, y, dy, out: _sum(dx, None if dy is None else -dy),
    operator.mul: lambda x, dx, y, dy, out: _sum(None if dx is None else dx * y,
                                                 None if dy is None else dy * x),
    operator.truediv: lambda x, dx, y, dy, out: _sum(None if dx is None else dx * (1.0 / y),
                                                     None if dy is None else dy * (-out / y)),
}


def _dual2(op: Any, a: Any, b: Any) -> Any:
    """``op(a, b)`` with at least one dual operand: dual arithmetic at the newest level."""
    if a.__class__ is Tagged or b.__class__ is Tagged:
        raise _Deopt
    level = _top((a, b))
    assert level is not None
    av, at = _at(a, level)
    bv, bt = _at(b, level)
    if av.__class__ is tuple or bv.__class__ is tuple:
        raise _Deopt
    out = op(av, bv)
    return _box(level, out, _TANGENTS[op](av, at, bv, bt, out))


def _zero(t: Any) -> bool:
    """Whether the tangent ``t`` is zero (None, a zero number, an all-zero array)."""
    kind = t.__class__
    if t is None or ((kind is float or kind is int) and t == 0):
        return True
    if kind is np.ndarray:
        return not t.any()
    if kind is tuple:
        return all(_zero(e) for e in t)
    return False


def _box(level: _Level, v: Any, t: Any) -> Any:
    """``v`` carrying the tangent ``t`` of ``level`` (``v`` itself for a zero tangent)."""
    if v.__class__ is tuple and t.__class__ is tuple:
        return tuple(_box(level, e, te) for e, te in zip(v, t))
    if _zero(t):
        return v
    if v.__class__ is tuple or not _numberlike(v):
        raise _Deopt  # a tangent on something that is not a number (a list, an array...)
    return _Dual(level, v, t)


def _unbox(level: _Level, x: Any) -> tuple[Any, Any]:
    """``(value, tangent at level)`` of a value read from a cell, a container, a default or a
    nested ``jvp``'s result (tangent 0.0 where it has none)."""
    kind = x.__class__
    if kind is _Dual:
        return (x.v, x.t) if x.L is level else (x, 0.0)
    if kind is tuple:
        parts = [_unbox(level, e) for e in x]
        if all(t.__class__ is float and t == 0 for _, t in parts):
            return x, 0.0
        return tuple(p for p, _ in parts), tuple(t for _, t in parts)
    if kind is Tagged:
        raise _Deopt  # another context's value (used outside it: the general mode says so)
    return x, 0.0


_NUMBERS = (float, int, complex)


def _numberlike(v: Any) -> bool:
    kind = v.__class__
    return kind in _NUMBERS or kind is _Dual or isinstance(v, (numbers.Number, np.generic))


# -- helpers the specialised code calls -----------------------------------------------------------
# Each runs on values of the specialised code's level ``L``: tangents are numbers (or arrays
# of a batch of directions), 0.0 where a value has none, None where the code knows statically
# that there is none (a constant).

_PURE_OPERANDS = frozenset((float, int, complex, bool, str, bytes, tuple, list, type(None),
                            range, frozenset))


@opaque
def _binop(level: _Level, op: Any, a: Any, da: Any, b: Any, db: Any) -> tuple[Any, Any]:
    """``op(a, b)`` and its tangent where the expanded code's type guard failed."""
    if a.__class__ is _Dual and a.L is level:
        a, da = a.v, _sum(da, a.t)
    if b.__class__ is _Dual and b.L is level:
        b, db = b.v, _sum(db, b.t)
    if da.__class__ is float and da == 0.0:
        da = None  # no tangent at all: as the general mode, which leaves its rule out
    if db.__class__ is float and db == 0.0:
        db = None
    if a.__class__ is _Dual or b.__class__ is _Dual:
        if op is operator.floordiv:
            return op(a, b), 0.0
        tangent = _TANGENTS.get(op)
        if tangent is None:
            raise _Deopt
        out = op(a, b)
        t = tangent(a, da, b, db, out)
        return out, 0.0 if t is None else t
    if _numberlike(a) and _numberlike(b) and a.__class__ is not bool \
            and b.__class__ is not bool:
        rules = _rules.jvp_rules(op) if not _rules.is_nondifferentiable(op) else None
        out = op(a, b)
        if rules is None:
            return out, 0.0
        t = None
        for rule, x, d in ((rules[0], a, da), (rules[1], b, db)):
            if d is not None and rule is not _rules.ZERO:
                t = _sum(t, rule(d, out, a, b))
        return out, 0.0 if t is None else t
    if a.__class__ not in _PURE_OPERANDS or b.__class__ not in _PURE_OPERANDS:
        raise _Deopt  # arrays (the general mode's), user classes (their dunders)
    if not (_zero(da) and _zero(db)):
        if op is operator.add and a.__class__ is tuple and b.__class__ is tuple:
            return a + b, _tuple_tangent(a, da) + _tuple_tangent(b, db)
        if op is operator.mul and (a.__class__ is tuple) != (b.__class__ is tuple):
            seq, dseq, n = (a, da, b) if a.__class__ is tuple else (b, db, a)
            if n.__class__ is int:
                return op(a, b), _tuple_tangent(seq, dseq) * n
        raise _Deopt
    return op(a, b), 0.0


def _tuple_tangent(t: tuple[Any, ...], dt: Any) -> tuple[Any, ...]:
    return dt if dt.__class__ is tuple else (0.0,) * len(t)


@opaque
def _unop(level: _Level, op: Any, a: Any, da: Any) -> tuple[Any, Any]:
    """``op(a)`` (``-a``, ``+a``, ``~a``) where the type guard failed."""
    if a.__class__ is _Dual and a.L is level:
        a, da = a.v, _sum(da, a.t)
    if a.__class__ is Tagged or not (_numberlike(a) or a.__class__ in _PURE_OPERANDS):
        raise _Deopt
    out = op(a)
    if op is operator.invert or da is None or (_zero(da) and not _numberlike(a)):
        return out, 0.0
    return out, (-da if op is operator.neg else +da)


@opaque
def _getitem(level: _Level, obj: Any, dobj: Any, key: Any) -> tuple[Any, Any]:
    """``obj[key]`` and its tangent, where ``obj`` is not a tuple with tracked tangents."""
    kind = obj.__class__
    if kind is tuple:
        value = obj[key]
        if dobj.__class__ is tuple:
            return value, dobj[key]
        return _unbox(level, value)
    if kind in (list, str, range, bytes, dict) and key.__class__ not in (Tagged, _Dual):
        return _unbox(level, obj[key])
    raise _Deopt  # arrays, user classes (their __getitem__), a differentiated index


_MODULE = types.ModuleType


@opaque
def _getattr(level: _Level, obj: Any, dobj: Any, name: str) -> tuple[Any, Any]:
    """``obj.name`` where ``obj`` is not a module."""
    kind = obj.__class__
    if kind is _Dual and obj.L is level:
        obj, dobj = obj.v, obj.t
        kind = obj.__class__
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
    raise _Deopt  # an object's attribute (properties, __getattr__), a number's method


@opaque
def _plain_elements(*tangents: Any) -> None:
    """Values with tangents are going into a list, set or dict: not followed here."""
    for t in tangents:
        if not _zero(t):
            raise _Deopt


@opaque
def _boxed(level: _Level, v: Any, t: Any) -> Any:
    return _box(level, v, t)


@opaque
def _unboxed(level: _Level, x: Any) -> tuple[Any, Any]:
    return _unbox(level, x)


@opaque
def _deopt() -> None:
    raise _Deopt


_ITERABLES = (range, list, str, bytes, dict, enumerate, zip, reversed)


@opaque
def _pairs(level: _Level, iterable: Any, tangents: Any) -> Any:
    """``(item, tangent)`` for each item of what a ``for`` loop of the specialised code
    iterates: a tuple with tracked tangents pairs them; ranges, lists, strings, dicts (and
    enumerate/zip/reversed of them) hold values without tangents; anything else (a generator,
    an iterator of a user class, an array) is not followed."""
    kind = iterable.__class__
    if kind is tuple:
        if tangents.__class__ is tuple:
            return zip(iterable, tangents)
        return (_unbox(level, item) for item in iterable)
    if kind in _ITERABLES and (tangents is None or _zero(tangents)):
        return zip(iterable, itertools.repeat(0.0))
    raise _Deopt


# Functions whose result does not depend on their arguments' tangents and that ignore them.
_INDIFFERENT = {id(f): f for f in (type, isinstance, issubclass, len, id, hash, repr, str,
                                   format, bool, callable, hasattr, ascii, chr, ord, int,
                                   round, math.floor, math.ceil, math.trunc)}
# C functions without effects that may run on values without tangents.
_PURE_CALLS = {id(f): f for f in (range, tuple, list, dict, set, frozenset, min, max, sum, abs,
                                  pow, divmod, float, complex, enumerate, zip, reversed, sorted,
                                  all, any, slice, bin, hex, oct)}
_PURE_MODULES = frozenset(("math", "cmath", "builtins", "_operator", "operator"))


@opaque
def _call(level: _Level, site: int | None, f: Any, args: tuple[Any, ...],
          dargs: tuple[Any, ...], kwargs: dict[str, Any] | None,
          dkwargs: dict[str, Any] | None) -> tuple[Any, Any]:
    """``f(*args, **kwargs)`` and its tangent, for a call the specialised code cannot make
    directly (``site``'s cache missed)."""
    kind = f.__class__
    if kind is types.FunctionType:
        if _is_dual(f):
            return _call_python(level, site, f, f.__code__.co_argcount - 1, True, args, dargs,
                                kwargs, dkwargs)
        count = _dual_arity(f)
        if count is not None:
            return _call_python(level, site, f, count, False, args, dargs, kwargs, dkwargs)
    for a in args:
        if a.__class__ is Tagged:
            raise _Deopt
    if _is_forward_api(f):
        return _call_api(level, f, args, dargs, kwargs, dkwargs)
    if kwargs and dkwargs and not all(_zero(t) for t in dkwargs.values()):
        raise _Deopt  # a differentiated keyword: the general mode binds it
    if _rules.is_nondifferentiable(f) or _INDIFFERENT.get(id(f)) is f:
        plain = tuple(_plain_tree(a) for a in args)
        return _result(f(*plain, **(kwargs or {})))
    rules = _rules.jvp_rules(f)
    if rules is not None and _pure_callable(f):
        return _call_rules(level, f, rules, args, dargs, kwargs or {})
    if _PURE_CALLS.get(id(f)) is f and all(map(_zero, dargs)) \
            and not any(callable(a) for a in args):
        return _result(f(*args, **(kwargs or {})))
    raise _Deopt


def _plain_tree(x: Any) -> Any:
    if x.__class__ is tuple:
        return tuple(_plain_tree(e) for e in x)
    return _plain(x)


def _result(out: Any) -> tuple[Any, Any]:
    if out.__class__ is Tagged:
        raise _Deopt
    return out, 0.0


def _pure_callable(f: Any) -> bool:
    """A function with rules the specialised code may call: C functions of ``math``,
    ``cmath``, ``operator`` and builtins, NumPy's ufuncs and functions on numbers, and Python
    functions the user gave rules (their rules are what runs)."""
    if isinstance(f, (types.FunctionType, np.ufunc)):
        return True
    module = getattr(f, "__module__", None) or ""
    return module in _PURE_MODULES or module.startswith("numpy")


def _call_rules(level: _Level, f: Any, rules: tuple[Any, ...], args: tuple[Any, ...],
                dargs: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """A function with rules, on numbers: its value and the sum of its rules'
    contributions (what the general mode computes)."""
    for a in args:
        if not (_numberlike(a) or a.__class__ is tuple or a.__class__ is str
                or a is None):
            raise _Deopt  # arrays, lists of differentiated values: the general mode's
    carried = [i for i, d in enumerate(dargs) if d is not None]
    out = _lifted(f, args, kwargs)
    if not carried:
        return _result(out)
    tangent = None
    for i in carried:
        rule = rules[i] if i < len(rules) else None
        if rule is None:
            raise _Deopt  # the general mode raises MissingRuleError
        if rule is _rules.ZERO:
            continue
        if rule is _rules.LINEAR:
            moved = list(args)
            moved[i] = dargs[i]
            part = _lifted(f, tuple(moved), kwargs)
        elif type(rule) is _rules.Carried:
            if _ambiguous_tie(args, dargs):
                raise _Deopt
            part = _lifted(rule.rule, (_rules.carried_pattern(dargs), dargs[i], out) + args,
                           kwargs)
        else:
            part = _lifted(rule, (dargs[i], out) + args, kwargs)
        tangent = _add(tangent, part)
    if tangent is None:
        return _result(out)
    if out.__class__ is tuple:  # several outputs: None stands for a zero tangent
        tangent = tuple(0.0 if t is None else t for t in tangent)
    return out, tangent


def _add(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    if a.__class__ is tuple:
        return tuple(_add(x, y) for x, y in zip(a, b))
    return a + b


def _ambiguous_tie(args: tuple[Any, ...], dargs: tuple[Any, ...]) -> bool:
    """Whether ties decide a derivative that the specialised code cannot: a value whose tangent
    is zero may be a constant or a differentiated value (the general mode knows which), and it
    matters only where two candidates are equal."""
    if not any(d is not None and _zero(d) for d in dargs):
        return False
    values = [_plain(v) for a in args for v in (a if a.__class__ is tuple else (a,))
              if _numberlike(v)]
    return len(set(values)) < len(values)


def _lifted(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``fn(*args, **kwargs)`` where ``args`` may hold duals of other levels: the newest level
    is peeled off, ``fn`` runs on the values, and its tangent comes from the rules (or, for a
    Python function such as a rule, from its dual run at that level)."""
    level = _top(args)
    if level is None:
        return fn(*args, **kwargs)
    parts = [_at(a, level) for a in args]
    values = tuple(p for p, _ in parts)
    if fn.__class__ is types.FunctionType and not kwargs:
        dual = _is_dual(fn)
        if dual or _dual_arity(fn) is not None:
            out, t = _call_python(level, None, fn, fn.__code__.co_argcount - dual, dual, values,
                                  tuple(d for _, d in parts), None, None)
            return _box(level, out, t)
    rules = _rules.jvp_rules(fn)
    if rules is None:
        raise _Deopt
    out = _lifted(fn, values, kwargs)
    tangent = None
    for i, (_, d) in enumerate(parts):
        if d is None:
            continue
        rule = rules[i] if i < len(rules) else None
        if rule is None or rule is _rules.LINEAR or type(rule) is _rules.Carried:
            raise _Deopt
        if rule is not _rules.ZERO:
            tangent = _add(tangent, _lifted(rule, (d, out) + values, kwargs))
    return _box(level, out, tangent)


# -- calling Python functions -----------------------------------------------------------------------

_CO_UNSUPPORTED = (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
                   | inspect.CO_ITERABLE_COROUTINE | inspect.CO_VARARGS
                   | inspect.CO_VARKEYWORDS)
_ARITY: dict[int, tuple[weakref.ref[Any], int | None]] = {}


def _dual_arity(f: types.FunctionType) -> int | None:
    """The number of positional parameters of ``f``'s dual, or None where ``f`` has none (no
    source, opaque, a generator, ``*args``, keyword-only parameters, its own rules)."""
    code = f.__code__
    known = _ARITY.get(id(code))
    if known is None or known[0]() is not code:
        arity = None
        if not (code.co_flags & _CO_UNSUPPORTED) and not code.co_kwonlyargcount \
                and can_recurse(_specialising(), f):
            arity = code.co_argcount
        key = id(code)
        known = _ARITY[key] = (weakref.ref(code, lambda _, key=key: _ARITY.pop(key, None)),
                               arity)
    if known[1] is None or getattr(f, "__overdub_opaque__", False) \
            or _rules.jvp_rules(f) is not None or _rules.is_nondifferentiable(f):
        return None  # (opaque and rules belong to the function object, not to its code)
    return known[1]


def _is_dual(f: types.FunctionType) -> bool:
    """Whether ``f`` is a dual already: a function or lambda defined in specialised code
    (its code is the dual's), called as it is, never rewritten again."""
    code = f.__code__
    return code.co_argcount > 0 and code.co_varnames[0] == "@T"


def _call_python(level: _Level, site: int | None, f: types.FunctionType, count: int,
                 dual: bool, args: tuple[Any, ...], dargs: tuple[Any, ...],
                 kwargs: dict[str, Any] | None, dkwargs: dict[str, Any] | None
                 ) -> tuple[Any, Any]:
    """A Python function: its dual, with the tangents of its positional parameters (zeros
    for those left to their defaults).  ``dual``: ``f`` is a dual already (called as it is);
    otherwise the specialising context rewrites it."""
    if len(args) > count:
        raise _Deopt  # the general mode raises the TypeError with the user's signature
    tangents = [0.0 if d is None else d for d in dargs] + [0.0] * (count - len(args))
    if kwargs:
        names = f.__code__.co_varnames[:count]
        for name, t in (dkwargs or {}).items():
            if name not in names or names.index(name) < len(args):
                raise _Deopt
            if t is not None:
                tangents[names.index(name)] = t
    elif site is not None and len(args) == count and _NATIVE_SITES[site] is dual:
        _SITES[site] = f  # the next call at this site goes straight to f's dual
        _FILLED.append(site)
    if dual:
        return f((level, *tangents), *args, **(kwargs or {}))
    return recurse(_specialising(), f, (level, *tangents), *args, **(kwargs or {}))


def nestable(fn: Any) -> Any:
    """Mark a forward-mode entry point (``jvp``, ``derivative``...) that the specialised code
    may call with its values boxed: inside it, a nested specialised ``jvp`` runs (or deopts)."""
    fn.__overdub_ad_forward__ = True
    return fn


def _is_forward_api(f: Any) -> bool:
    return getattr(f, "__overdub_ad_forward__", False) is True


def _call_api(level: _Level, f: Any, args: tuple[Any, ...], dargs: tuple[Any, ...],
              kwargs: dict[str, Any] | None, dkwargs: dict[str, Any] | None) -> tuple[Any, Any]:
    """A nested ``jvp``/``derivative``: its arguments carry this level's tangents as duals,
    its result is read back at this level (a nested level runs specialised too, or deopts)."""
    boxed = tuple(a if d is None else _box(level, a, d) for a, d in zip(args, dargs))
    kw = kwargs or {}
    if dkwargs:
        kw = {k: v if dkwargs.get(k) is None else _box(level, v, dkwargs[k])
              for k, v in kw.items()}
    out = f(*boxed, **kw)
    if callable(out) and not _numberlike(out):
        raise _Deopt  # a derivative function returned: lazy, the general mode's business
    return _unbox(level, out)


# -- the specialised jvp ------------------------------------------------------------------------

class _Specialising(Context):
    """The context whose pass rewrites functions into their duals.  It intercepts calls only
    (no verb of its own), so the arithmetic the pass expands stays native Python.  One per
    thread, reused: it holds no state of any particular ``jvp``."""

    def __init__(self) -> None:
        super().__init__(passes=[_PASS])


class _Thread(threading.local):
    """Per thread: the specialising context, the probe of :func:`_enclosed`, and how many
    specialised ``jvp`` calls are running (nested ones deopt instead of returning None)."""

    ctx: _Specialising | None = None
    probe: Context | None = None
    depth = 0


_LOCAL = _Thread()


def _specialising() -> _Specialising:
    ctx = _LOCAL.ctx
    if ctx is None:
        ctx = _LOCAL.ctx = _Specialising()
    return ctx


_STOPPED: dict[int, weakref.ref[Any]] = {}  # id(code) -> code of functions that deopted


def _probe() -> bool:
    """True when run rewritten, i.e. inside an enclosing context."""
    return sys._getframe().f_code is not _PROBE_CODE


_PROBE_CODE = _probe.__code__


def _enclosed() -> bool:
    """Whether a context is running (it must see what we compute, as calls).  The probe
    context is reused while it has only run on its own."""
    probe = _LOCAL.probe or Context()
    inside = overdub(probe, _probe)
    _LOCAL.probe = None if inside else probe
    return inside


_LEAVES = frozenset((float, int, complex, _Dual))
_TANGENTS_OK = frozenset((float, int, complex, _Dual, np.ndarray, type(None)))


def _leaf_ok(x: Any) -> bool:
    return x.__class__ in _LEAVES


def _tangent_ok(t: Any) -> bool:
    return t.__class__ in _TANGENTS_OK and (t.__class__ is not np.ndarray or t.dtype.kind in "fc")


def jvp(f: Any, primals: tuple[Any, ...], tangents: tuple[Any, ...],
        batch: tuple[int, ...]) -> tuple[Any, Any] | None:
    """``(out, tangent)`` of ``f`` by its dual, or None where the general mode must run:
    ``f`` is not a plain Python function, an argument is not a number (or a tuple of them),
    a context is running, or the dual stopped (:class:`_Deopt`).  Inside another specialised
    ``jvp`` it never returns None: it raises :class:`_Deopt` for the outermost to handle."""
    local = _LOCAL
    depth = local.depth
    if f.__class__ is not types.FunctionType:
        if depth:
            raise _Deopt
        return None
    code = f.__code__
    dual = _is_dual(f)
    if not depth and not dual:
        stopped = _STOPPED.get(id(code))
        if stopped is not None and stopped() is code:
            return None
    if len(primals) == 1 and len(tangents) == 1 and primals[0].__class__ in _LEAVES \
            and tangents[0].__class__ in _PLAIN_NUMBERS:
        seeds = [tangents[0]]  # the most common case: derivative(f, x)
    elif len(primals) == len(tangents) and all(map(_leaf_ok, primals)) \
            and all(map(_tangent_ok, tangents)):
        seeds = [0.0 if t is None else t for t in tangents]  # numbers
    else:
        leaves, tree = flatten(list(primals))
        dleaves, _ = flatten(list(tangents))
        if not (len(dleaves) == len(leaves) and _structure_ok(primals)
                and all(map(_leaf_ok, leaves)) and all(map(_tangent_ok, dleaves))):
            if depth:
                raise _Deopt
            return None
        seeds = unflatten(tree, [0.0 if d is None else d for d in dleaves])
    count = code.co_argcount - 1 if dual else _dual_arity(f)
    if count is None or len(primals) > count:
        if depth:
            raise _Deopt
        return None
    if not depth and _enclosed():
        return None
    level = _Level()
    seeds += [0.0] * (count - len(seeds))  # parameters left to their defaults
    local.depth = depth + 1
    try:
        if dual:
            out, dout = f((level, *seeds), *primals)
        else:
            out, dout = recurse(_specialising(), f, (level, *seeds), *primals)
        if out.__class__ is float and dout.__class__ is float and not batch:
            return out, dout
        return _outputs(level, out, dout, batch)
    except _Deopt:
        if depth:
            raise
        key = id(code)
        _STOPPED[key] = weakref.ref(code, lambda _, key=key: _STOPPED.pop(key, None))
        return None
    finally:
        local.depth = depth
        if not depth and _FILLED:
            for site in _FILLED:  # the cache keeps no function alive past the call
                _SITES[site] = None
            _FILLED.clear()


def _structure_ok(primals: Any) -> bool:
    """Arguments are numbers or tuples of them (lists and dicts: the general mode)."""
    return all(type(p) is tuple and _structure_ok(p) if type(p) in (list, tuple, dict)
               else True for p in primals)


def _outputs(level: _Level, out: Any, dout: Any, batch: tuple[int, ...]) -> tuple[Any, Any]:
    """The dual's ``(value, tangent)`` as ``jvp`` returns them: a tangent per number leaf
    (zeros of the batch shape where it has none), None for other leaves."""
    kind = out.__class__
    if (kind is float or kind is _Dual) and not batch and dout.__class__ in _LEAVES:
        if kind is _Dual and out.L is level:
            return out.v, _sum(dout, out.t)
        return out, dout
    if callable(out) and not _numberlike(out):
        raise _Deopt  # a function-valued result: derivative applied lazily, by the general mode
    if out.__class__ is _Dual or out.__class__ is tuple:
        out, extra = _unbox(level, out)
        if not _zero(extra):
            dout = extra if _zero(dout) else _add(dout, extra)
    leaves, tree = flatten(out)
    if len(leaves) == 1 and leaves[0] is out:
        dleaves = [dout]
    elif dout.__class__ is tuple and out.__class__ is tuple:
        dleaves = flatten(dout)[0]
        if len(dleaves) != len(leaves):
            raise _Deopt
    elif _zero(dout):
        dleaves = [0.0] * len(leaves)
    else:
        raise _Deopt
    values, tangents = [], []
    for v, t in zip(leaves, dleaves):
        if v.__class__ is Tagged or v.__class__ is list or v.__class__ is dict:
            raise _Deopt
        values.append(v)
        if not _numberlike(v):
            tangents.append(None)
        elif _zero(t) and t.__class__ is not np.ndarray:
            tangents.append(_zero_tangent(v, batch))
        else:
            tangents.append(t)
    return unflatten(tree, values), unflatten(tree, tangents)


def _zero_tangent(v: Any, batch: tuple[int, ...]) -> Any:
    v = _plain(v)
    if batch or isinstance(v, np.ndarray):
        return np.zeros(batch + np.shape(v), np.result_type(v, float))
    return 0j if isinstance(v, complex) else 0.0


# -- the per-site cache of direct calls ----------------------------------------------------------

# A call site in the specialised code first calls through _call; once it has called a Python
# function it remembers it and calls it directly while the same function comes.  Sites in a
# rewritten function's own body call through the context's dispatcher (which gives the dual of
# an ordinary function); sites in the functions defined inside it run natively and call duals
# (closures made by specialised code) as they are.
_SITES: list[Any] = []  # site -> the function the site calls directly, or None
_NATIVE_SITES: list[bool] = []  # site -> whether it runs natively (calls duals) or dispatched
_FILLED: list[int] = []  # sites filled during the current outermost call
_SITE_NUMBERS = itertools.count()
_SITES_LOCK = threading.Lock()


def _new_site(native: bool) -> int:
    with _SITES_LOCK:
        site = next(_SITE_NUMBERS)
        _SITES.append(None)
        _NATIVE_SITES.append(native)
    return site


# -- the pass -------------------------------------------------------------------------------------

_BUILTIN_PREFIX = "@overdub_ad."
_HELPERS: dict[str, Any] = {
    "binop": _binop, "unop": _unop, "getitem": _getitem, "getattr": _getattr, "call": _call,
    "plain": _plain_elements, "box": _boxed, "unbox": _unboxed, "deopt": _deopt,
    "pairs": _pairs,
    "sites": _SITES, "Dual": _Dual, "Module": _MODULE, "operator": operator,
    # the guards' types, under names no user variable can shadow
    "float": float, "int": int, "tuple": tuple,
}
# The core binds hidden names only for its own dispatchers: ours resolve through builtins,
# under names no Python source can spell.
for _name, _value in _HELPERS.items():
    vars(builtins)[_BUILTIN_PREFIX + _name] = _value


def _helper(name: str) -> ast.Name:
    return ast.Name(_BUILTIN_PREFIX + name, ast.Load())


def _operator(fn: Any) -> ast.expr:
    """``operator.<name>``, read from the module bound in builtins (a native attribute read)."""
    return ast.Attribute(_helper("operator"), fn.__name__, ast.Load())


def _load(name: str) -> ast.Name:
    return ast.Name(name, ast.Load())


def _store(name: str) -> ast.Name:
    return ast.Name(name, ast.Store())


def _tangent_name(name: str) -> str:
    return "@d." + name


_LEVEL = "@L"
_ZERO = ast.Constant(0.0)
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.Pow: operator.pow, ast.Mod: operator.mod,
           ast.FloorDiv: operator.floordiv, ast.MatMult: operator.matmul,
           ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
           ast.LShift: operator.lshift, ast.RShift: operator.rshift}
_EXPANDED = (ast.Add, ast.Sub, ast.Mult, ast.Div)  # expanded in place on floats and ints
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


class _Unsupported(Exception):
    """A construct the pass leaves to the general mode (the code deopts where it is)."""


class _Val:
    """A compiled expression: ``p`` (an atom: a name or a constant) and its tangent ``d`` (an
    atom, or None: statically zero)."""

    __slots__ = ("p", "d")

    def __init__(self, p: ast.expr, d: ast.expr | None) -> None:
        self.p, self.d = p, d


class _Scope:
    """What the pass knows of one function: its local names, which of them closures capture
    (kept boxed in their cells), the captured names of enclosing rewritten functions, and
    the names some ``:=`` assigns (read into temporaries, as Python reads them)."""

    def __init__(self, node: ast.AST, enclosing: _Scope | None) -> None:
        args = node.args
        self.params = [a.arg for a in (*args.posonlyargs, *args.args)]
        self.locals = set(self.params) | {a.arg for a in (*args.kwonlyargs, args.vararg,
                                                            args.kwarg) if a is not None}
        self.walrus: set[str] = set()
        self.declared = False  # global/nonlocal: not followed
        body = node.body if isinstance(node.body, list) else [node.body]
        for stmt in body:
            self._bind(stmt)
        self.cells = self.locals & _captured(body)
        self.outer = set() if enclosing is None else (
            (enclosing.cells | enclosing.outer) - self.locals)

    def _bind(self, node: ast.AST) -> None:
        for child in _own_nodes(node):
            if isinstance(child, ast.Name) and isinstance(child.ctx, (ast.Store, ast.Del)):
                self.locals.add(child.id)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.locals.add(child.name)
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                self.locals.update((a.asname or a.name).partition(".")[0] for a in child.names)
            elif isinstance(child, (ast.Global, ast.Nonlocal)):
                self.declared = True
            elif isinstance(child, ast.NamedExpr):
                self.walrus.add(child.target.id)
                self.locals.add(child.target.id)
            elif isinstance(child, ast.ExceptHandler) and child.name:
                self.locals.add(child.name)


def _own_nodes(node: ast.AST) -> Any:
    """``node`` and its descendants in the same scope (nested functions' bodies excluded;
    comprehensions included, for their ``:=`` targets)."""
    pending = [node]
    while pending:
        child = pending.pop()
        yield child
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            pending.extend(child.decorator_list)
            pending.extend(child.args.defaults)
            pending.extend(d for d in child.args.kw_defaults if d is not None)
            continue
        if isinstance(child, ast.Lambda):
            pending.extend(child.args.defaults)
            pending.extend(d for d in child.args.kw_defaults if d is not None)
            continue
        if isinstance(child, ast.ClassDef):
            pending.extend(child.decorator_list)
            pending.extend(child.bases)
            continue
        pending.extend(ast.iter_child_nodes(child))


def _captured(body: list[ast.AST]) -> set[str]:
    """Names used inside the nested functions, lambdas, classes and comprehensions of
    ``body``: the locals among them live in cells (an over-approximation costs only a box)."""
    names: set[str] = set()
    pending = [(node, False) for node in body]
    while pending:
        node, inside = pending.pop()
        if inside and isinstance(node, ast.Name):
            names.add(node.id)
        nested = inside or isinstance(node, (*_SCOPES, ast.ListComp, ast.SetComp, ast.DictComp,
                                             ast.GeneratorExp))
        pending.extend((child, nested) for child in ast.iter_child_nodes(node))
    return names


class _ForwardPass:
    """The pass: a function's AST -> the AST of its dual (see the module docstring).

    Stateless between functions (a fresh :class:`_Function` per call); deterministic, as the
    rewrite cache requires.  A construct it does not handle becomes a deopt at that point (a
    whole function where the construct changes its scoping: ``global``, ``nonlocal``, ``yield``).
    """

    def __call__(self, node: ast.AST) -> ast.AST:
        return _Function(node, None, native=False).rewrite()

    def __repr__(self) -> str:
        return "overdub_ad forward specialisation"


_PASS = _ForwardPass()


class _Function:
    """Rewrites one function (and, recursively, the functions defined in it).

    Attributes: ``node`` (the FunctionDef or Lambda, changed in place), ``scope``, ``temps``
    (counter of ``@t`` temporaries), ``native`` (a function defined inside the rewritten one:
    its code runs as compiled here, without the core's rewrite)."""

    def __init__(self, node: ast.AST, enclosing: _Scope | None, native: bool = True) -> None:
        self.node = node
        self.scope = _Scope(node, enclosing)
        self.temps = 0
        self.native = native

    # -- the function ------------------------------------------------------------------------
    def rewrite(self) -> ast.AST:
        node = self.node
        args = node.args
        lam = isinstance(node, ast.Lambda)
        body_nodes = [node.body] if lam else node.body
        unsupported = (self.scope.declared or args.vararg or args.kwarg or args.kwonlyargs
                       or any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await))
                              for stmt in body_nodes for n in _own_nodes(stmt))
                       or isinstance(node, ast.AsyncFunctionDef))
        out: list[ast.stmt] = []
        params = self.scope.params
        out.append(ast.Assign([ast.Tuple([_store(_LEVEL)] + [
            _store(_tangent_name(p)) for p in params], ast.Store())], _load("@T")))
        for p in params:
            if p in self.scope.cells:
                out.append(self._assign_boxed(p, _Val(_load(p), _load(_tangent_name(p)))))
        final: ast.expr | None = None
        try:
            if unsupported:
                raise _Unsupported
            if lam:
                val = self.expr(node.body, out)
                final = ast.Tuple([val.p, self.tangent(val)], ast.Load())
            else:
                out.extend(self.block(node.body))
                out.append(ast.Return(ast.Tuple([ast.Constant(None), _ZERO], ast.Load())))
        except _Unsupported:
            out.append(ast.Expr(ast.Call(_helper("deopt"), [], [])))
            final = ast.Tuple([ast.Constant(None), _ZERO], ast.Load()) if lam else None
        first = ast.arg("@T")
        if args.posonlyargs:
            args.posonlyargs.insert(0, first)
        else:
            args.args.insert(0, first)
        if lam:
            assert final is not None
            node.body = _as_expression(out, final)
        else:
            docstring = node.body[:1] if (node.body and isinstance(node.body[0], ast.Expr)
                                           and isinstance(node.body[0].value, ast.Constant)
                                           and isinstance(node.body[0].value.value, str)) else []
            node.body = docstring + out
            node.decorator_list = node.decorator_list  # kept: compiled, never run
        return node

    def temp(self) -> str:
        self.temps += 1
        return f"@t{self.temps}"

    def tangent(self, val: _Val) -> ast.expr:
        return _ZERO if val.d is None else val.d

    def _assign_boxed(self, name: str, val: _Val) -> ast.stmt:
        return ast.Assign([_store(name)], ast.Call(_helper("box"), [
            _load(_LEVEL), val.p, self.tangent(val)], []))

    # -- statements ------------------------------------------------------------------------------
    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in stmts:
            try:
                produced = self.statement(stmt)
            except _Unsupported:
                produced = [ast.Expr(ast.Call(_helper("deopt"), [], []))]
            for new in produced:
                out.append(ast.copy_location(new, stmt))
        return out or [ast.Pass()]

    def statement(self, stmt: ast.stmt) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        kind = type(stmt)
        if kind is ast.Expr:
            self.expr(stmt.value, out)
        elif kind is ast.Assign:
            val = self.expr(stmt.value, out)
            for target in stmt.targets:
                self.assign(target, val, out)
        elif kind is ast.AnnAssign:
            if stmt.value is not None:
                if not isinstance(stmt.target, ast.Name):
                    raise _Unsupported
                self.assign(stmt.target, self.expr(stmt.value, out), out)
        elif kind is ast.AugAssign:
            if not isinstance(stmt.target, ast.Name):
                raise _Unsupported  # an item or attribute written
            current = self.name(ast.Name(stmt.target.id, ast.Load()), out)
            val = self.binop(stmt.op, current, self.expr(stmt.value, out), out, inplace=True)
            self.assign(stmt.target, val, out)
        elif kind is ast.Return:
            val = self.expr(stmt.value, out) if stmt.value is not None else _Val(
                ast.Constant(None), None)
            out.append(ast.Return(ast.Tuple([val.p, self.tangent(val)], ast.Load())))
        elif kind is ast.If:
            test = self.expr(stmt.test, out)
            out.append(ast.If(test.p, self.block(stmt.body), self.block(stmt.orelse)
                              if stmt.orelse else []))
        elif kind is ast.While:
            out.extend(self.while_loop(stmt))
        elif kind is ast.For:
            out.extend(self.for_loop(stmt))
        elif kind in (ast.Pass, ast.Break, ast.Continue):
            out.append(stmt)
        elif kind is ast.FunctionDef:
            if stmt.decorator_list:
                raise _Unsupported
            self.defaults(stmt.args, out)
            _Function(stmt, self.scope).rewrite()
            out.append(stmt)
            self.assign(ast.Name(stmt.name, ast.Store()), _Val(_load(stmt.name), None), out,
                        bind=False)
        elif kind is ast.Raise:
            exc = self.expr(stmt.exc, out).p if stmt.exc is not None else None
            cause = self.expr(stmt.cause, out).p if stmt.cause is not None else None
            out.append(ast.Raise(exc, cause))
        elif kind is ast.Assert:
            test = self.expr(stmt.test, out)
            failed: list[ast.stmt] = []
            msg = [self.expr(stmt.msg, failed).p] if stmt.msg is not None else []
            failed.append(ast.Raise(ast.Call(_load("AssertionError"), msg, []), None))
            out.append(ast.If(_load("__debug__"), [ast.If(
                ast.UnaryOp(ast.Not(), test.p), failed, [])], []))
        else:
            raise _Unsupported  # try, with, del, import, class, global, match, async...
        return out

    def assign(self, target: ast.expr, val: _Val, out: list[ast.stmt],
               bind: bool = True) -> None:
        if isinstance(target, ast.Name):
            name = target.id
            if name in self.scope.cells:
                out.append(self._assign_boxed(name, val) if bind else ast.Pass())
                return
            if bind:
                out.append(ast.Assign([_store(name)], val.p))
            out.append(ast.Assign([_store(_tangent_name(name))], self.tangent(val)))
            return
        if isinstance(target, (ast.Tuple, ast.List)) and not any(
                isinstance(e, ast.Starred) for e in target.elts):
            n = len(target.elts)
            tmp = self.temp()
            dtmp = _tangent_name(tmp)
            out.append(ast.Assign([_store(tmp)], val.p))
            # the value unpacks natively (ValueError as Python raises it); its tangent is a
            # tuple of the same length, or 0.0 for values without tangents
            items = [self.temp() for _ in range(n)]
            out.append(ast.Assign([ast.Tuple([_store(t) for t in items], ast.Store())],
                                  _load(tmp)))
            if val.d is None:
                dvals: list[ast.expr | None] = [None] * n
                out.append(ast.Assign([_store(dtmp)], _ZERO))
            else:
                out.append(ast.Assign([_store(dtmp)], val.d))
                dvals = [_load(_tangent_name(t)) for t in items]
                out.append(ast.If(
                    ast.Compare(ast.Attribute(_load(dtmp), "__class__", ast.Load()),
                                [ast.Is()], [_helper("tuple")]),
                    [ast.Assign([ast.Tuple([_store(_tangent_name(t)) for t in items],
                                           ast.Store())], _load(dtmp))],
                    [ast.Assign([_store(_tangent_name(t))], _ZERO) for t in items]))
            # items read back through unbox: an untracked container may hold boxed values
            for t, d in zip(items, dvals):
                if d is None:
                    out.append(ast.Assign([ast.Tuple([_store(t), _store(_tangent_name(t))],
                                                     ast.Store())],
                                          ast.Call(_helper("unbox"), [_load(_LEVEL), _load(t)],
                                                   [])))
            for elt, t in zip(target.elts, items):
                self.assign(elt, _Val(_load(t), _load(_tangent_name(t))), out)
            return
        raise _Unsupported  # items, attributes, starred targets

    def while_loop(self, stmt: ast.While) -> list[ast.stmt]:
        pre: list[ast.stmt] = []
        test = self.expr(stmt.test, pre)
        body = self.block(stmt.body)
        orelse = self.block(stmt.orelse) if stmt.orelse else []
        if not pre:
            return [ast.While(test.p, body, orelse)]
        if orelse:
            raise _Unsupported
        stop = ast.If(ast.UnaryOp(ast.Not(), test.p), [ast.Break()], [])
        return [ast.While(ast.Constant(True), pre + [stop] + body, [])]

    def for_loop(self, stmt: ast.For) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        iterable = self.expr(stmt.iter, out)
        item = self.temp()
        pairs = self.temp()
        out.append(ast.Assign([_store(pairs)], ast.Call(_helper("pairs"), [
            _load(_LEVEL), iterable.p, iterable.d or ast.Constant(None)], [])))
        loop_body: list[ast.stmt] = []
        self.assign(stmt.target, _Val(_load(item), _load(_tangent_name(item))), loop_body)
        loop_body.extend(self.block(stmt.body))
        target = ast.Tuple([_store(item), _store(_tangent_name(item))], ast.Store())
        out.append(ast.For(target, _load(pairs), loop_body,
                           self.block(stmt.orelse) if stmt.orelse else []))
        return out

    def defaults(self, args: ast.arguments, out: list[ast.stmt]) -> None:
        """A nested function's defaults, evaluated where the function is defined: values
        with tangents are boxed into them."""
        for i, default in enumerate(args.defaults):
            val = self.expr(default, out)
            args.defaults[i] = ast.Call(_helper("box"), [_load(_LEVEL), val.p,
                                                         self.tangent(val)], []) \
                if val.d is not None else val.p
        for i, default in enumerate(args.kw_defaults):
            if default is not None:
                val = self.expr(default, out)
                args.kw_defaults[i] = val.p

    # -- expressions -----------------------------------------------------------------------------
    def atom(self, value: ast.expr, d: ast.expr | None, out: list[ast.stmt]) -> _Val:
        """Bind ``value`` to a temporary (and ``d`` to its tangent)."""
        t = self.temp()
        out.append(ast.Assign([_store(t)], value))
        if d is None:
            return _Val(_load(t), None)
        out.append(ast.Assign([_store(_tangent_name(t))], d))
        return _Val(_load(t), _load(_tangent_name(t)))

    def expr(self, node: ast.expr, out: list[ast.stmt]) -> _Val:
        kind = type(node)
        if kind is ast.Constant:
            return _Val(node, None)
        if kind is ast.Name:
            return self.name(node, out)
        if kind is ast.BinOp:
            return self.binop(node.op, self.expr(node.left, out),
                              self.right(node.right, node.left, out), out)
        if kind is ast.UnaryOp:
            return self.unop(node, out)
        if kind is ast.Call:
            return self.call(node, out)
        if kind is ast.Subscript:
            return self.subscript(node, out)
        if kind is ast.Attribute:
            return self.attribute(node, out)
        if kind is ast.Compare:
            return self.compare(node, out)
        if kind is ast.BoolOp:
            return self.boolop(node, out)
        if kind is ast.IfExp:
            return self.ifexp(node, out)
        if kind is ast.Tuple:
            vals = [self.expr(e, out) for e in self._elements(node)]
            if all(v.d is None for v in vals):
                return self.atom(ast.Tuple([v.p for v in vals], ast.Load()), None, out)
            return self.atom(ast.Tuple([v.p for v in vals], ast.Load()),
                             ast.Tuple([self.tangent(v) for v in vals], ast.Load()), out)
        if kind in (ast.List, ast.Set):
            vals = [self.expr(e, out) for e in self._elements(node)]
            self.plain(vals, out)
            return self.atom(kind([v.p for v in vals], ast.Load()) if kind is ast.List
                             else ast.Set([v.p for v in vals]), None, out)
        if kind is ast.Dict:
            if any(k is None for k in node.keys):
                raise _Unsupported  # {**d}
            vals = []
            for k, v in zip(node.keys, node.values):
                vals.append(self.expr(k, out))
                vals.append(self.expr(v, out))
            self.plain(vals, out)
            return self.atom(ast.Dict([v.p for v in vals[::2]], [v.p for v in vals[1::2]]),
                             None, out)
        if kind is ast.NamedExpr:
            val = self.expr(node.value, out)
            self.assign(ast.Name(node.target.id, ast.Store()), val, out)
            return self.name(ast.Name(node.target.id, ast.Load()), out)
        if kind is ast.Lambda:
            self.defaults(node.args, out)
            _Function(node, self.scope).rewrite()
            return self.atom(node, None, out)
        if kind is ast.JoinedStr:
            parts = []
            for part in node.values:
                if isinstance(part, ast.FormattedValue):
                    if part.format_spec is not None:
                        raise _Unsupported
                    part.value = self.expr(part.value, out).p
                parts.append(part)
            return self.atom(ast.JoinedStr(parts), None, out)
        raise _Unsupported  # comprehensions, generators, starred, await, yield, slices

    def _elements(self, node: ast.expr) -> list[ast.expr]:
        if any(isinstance(e, ast.Starred) for e in node.elts):
            raise _Unsupported
        return node.elts

    def right(self, right: ast.expr, left: ast.expr, out: list[ast.stmt]) -> _Val:
        return self.expr(right, out)

    def plain(self, vals: list[_Val], out: list[ast.stmt]) -> None:
        """Values going into a list, set or dict must carry no tangent (checked at run time
        where not known statically)."""
        dynamic = [v.d for v in vals if v.d is not None]
        if dynamic:
            out.append(ast.Expr(ast.Call(_helper("plain"), dynamic, [])))

    def name(self, node: ast.Name, out: list[ast.stmt]) -> _Val:
        name = node.id
        scope = self.scope
        if name in scope.cells or name in scope.outer:
            # a cell: a boxed value where it has a tangent
            pair = ast.Call(_helper("unbox"), [_load(_LEVEL), _load(name)], [])
            t = self.temp()
            test = ast.BoolOp(ast.Or(), [
                ast.Compare(ast.Attribute(_load(name), "__class__", ast.Load()), [ast.Is()],
                            [_helper("Dual")]),
                ast.Compare(ast.Attribute(_load(name), "__class__", ast.Load()), [ast.Is()],
                            [_helper("tuple")])])
            out.append(ast.If(test, [
                ast.Assign([ast.Tuple([_store(t), _store(_tangent_name(t))], ast.Store())],
                           pair)],
                [ast.Assign([_store(t)], _load(name)),
                 ast.Assign([_store(_tangent_name(t))], _ZERO)]))
            return _Val(_load(t), _load(_tangent_name(t)))
        if name in scope.locals:
            if name in scope.walrus:  # read now: a later `:=` in the expression rebinds it
                return self.atom(_load(name), _load(_tangent_name(name)), out)
            return _Val(_load(name), _load(_tangent_name(name)))
        return _Val(_load(name), None)  # a global or a builtin: no tangent

    def guard(self, vals: list[_Val]) -> ast.expr | None:
        """``a.__class__ is float or ... is int`` for each operand not known to be a float."""
        tests: list[ast.expr] = []
        for v in vals:
            if isinstance(v.p, ast.Constant):
                if type(v.p.value) not in (float, int) or type(v.p.value) is bool:
                    return ast.Constant(False)
                continue
            cls = ast.Attribute(v.p, "__class__", ast.Load())
            tests.append(ast.BoolOp(ast.Or(), [
                ast.Compare(cls, [ast.Is()], [_helper("float")]),
                ast.Compare(ast.Attribute(v.p, "__class__", ast.Load()), [ast.Is()],
                            [_helper("int")])]))
        if not tests:
            return None
        return tests[0] if len(tests) == 1 else ast.BoolOp(ast.And(), tests)

    def binop(self, op: ast.operator, a: _Val, b: _Val, out: list[ast.stmt],
              inplace: bool = False) -> _Val:
        fn = _BINOPS[type(op)]
        if inplace:
            fn = {operator.add: operator.iadd, operator.sub: operator.isub,
                  operator.mul: operator.imul, operator.truediv: operator.itruediv,
                  operator.pow: operator.ipow, operator.mod: operator.imod,
                  operator.floordiv: operator.ifloordiv,
                  operator.matmul: operator.imatmul}.get(fn)
            if fn is None:
                raise _Unsupported
        t = self.temp()
        dt = _tangent_name(t)
        slow = [ast.Assign([ast.Tuple([_store(t), _store(dt)], ast.Store())], ast.Call(
            _helper("binop"), [_load(_LEVEL), _operator(fn), a.p,
                               a.d or ast.Constant(None), b.p, b.d or ast.Constant(None)],
            []))]
        fast = self.expanded(op, a, b, t) if isinstance(op, _EXPANDED) or (
            isinstance(op, ast.Pow) and self._literal_exponent(b)) else None
        if fast is None:
            out.extend(slow)
        else:
            guard = self.guard([a, b])
            if guard is None:
                out.extend(fast)
            else:
                out.append(ast.If(guard, fast, slow))
        return _Val(_load(t), _load(dt))

    @staticmethod
    def _literal_exponent(b: _Val) -> bool:
        return (isinstance(b.p, ast.Constant) and type(b.p.value) in (int, float)
                and b.p.value != 0)

    def expanded(self, op: ast.operator, a: _Val, b: _Val, t: str) -> list[ast.stmt]:
        """``t = a op b`` and its tangent, for floats and ints: the rule tables' expressions
        (``_TANGENTS``), terms of statically zero tangents left out."""
        out: list[ast.stmt] = [ast.Assign([_store(t)], ast.BinOp(a.p, op, b.p))]
        da, db = a.d, b.d
        kind = type(op)
        parts: list[ast.expr] = []
        if kind is ast.Pow:
            # d(x**c) = dx * (c * x**(c - 1)), the rule's _pow_dx for a constant c != 0
            c = b.p.value
            if da is not None:
                parts.append(ast.BinOp(da, ast.Mult(), ast.BinOp(
                    ast.Constant(c), ast.Mult(), ast.BinOp(a.p, ast.Pow(),
                                                           ast.Constant(c - 1)))))
        elif kind is ast.Add:
            parts = [d for d in (da, db) if d is not None]
        elif kind is ast.Sub:
            if da is not None:
                parts.append(da)
            if db is not None:
                parts.append(ast.UnaryOp(ast.USub(), db) if da is None else db)
        elif kind is ast.Mult:
            if da is not None:
                parts.append(ast.BinOp(da, ast.Mult(), b.p))
            if db is not None:
                parts.append(ast.BinOp(db, ast.Mult(), a.p))
        else:  # Div
            if da is not None:
                parts.append(ast.BinOp(da, ast.Mult(), ast.BinOp(ast.Constant(1.0), ast.Div(),
                                                                 b.p)))
            if db is not None:
                parts.append(ast.BinOp(db, ast.Mult(), ast.BinOp(ast.UnaryOp(
                    ast.USub(), _load(t)), ast.Div(), b.p)))
        if not parts:
            tangent: ast.expr = _ZERO
        elif len(parts) == 1:
            tangent = parts[0]
        else:
            joiner = ast.Sub() if kind is ast.Sub else ast.Add()
            tangent = ast.BinOp(parts[0], joiner, parts[1])
        out.append(ast.Assign([_store(_tangent_name(t))], tangent))
        return out

    def unop(self, node: ast.UnaryOp, out: list[ast.stmt]) -> _Val:
        a = self.expr(node.operand, out)
        if isinstance(node.op, ast.Not):
            return self.atom(ast.UnaryOp(ast.Not(), a.p), None, out)
        t = self.temp()
        dt = _tangent_name(t)
        fn = {ast.USub: operator.neg, ast.UAdd: operator.pos,
              ast.Invert: operator.invert}[type(node.op)]
        slow = [ast.Assign([ast.Tuple([_store(t), _store(dt)], ast.Store())], ast.Call(
            _helper("unop"), [_load(_LEVEL), _operator(fn), a.p,
                              a.d or ast.Constant(None)], []))]
        if isinstance(node.op, ast.Invert):
            out.extend(slow)
            return _Val(_load(t), _load(dt))
        fast: list[ast.stmt] = [
            ast.Assign([_store(t)], ast.UnaryOp(node.op, a.p)),
            ast.Assign([_store(dt)], _ZERO if a.d is None else ast.UnaryOp(node.op, a.d))]
        guard = self.guard([a])
        if guard is None:
            out.extend(fast)
        else:
            out.append(ast.If(guard, fast, slow))
        return _Val(_load(t), _load(dt))

    def compare(self, node: ast.Compare, out: list[ast.stmt]) -> _Val:
        left = self.expr(node.left, out)
        if len(node.ops) == 1:
            right = self.expr(node.comparators[0], out)
            return self.atom(ast.Compare(left.p, node.ops, [right.p]), None, out)
        # a < b < c: short-circuits, each operand evaluated once
        result = self.temp()
        block = out
        for i, (op, comparator) in enumerate(zip(node.ops, node.comparators)):
            right = self.expr(comparator, block)
            block.append(ast.Assign([_store(result)], ast.Compare(left.p, [op], [right.p])))
            if i < len(node.ops) - 1:
                inner: list[ast.stmt] = []
                block.append(ast.If(_load(result), inner, []))
                block = inner
            left = right
        return _Val(_load(result), None)

    def boolop(self, node: ast.BoolOp, out: list[ast.stmt]) -> _Val:
        t = self.temp()
        dt = _tangent_name(t)
        block = out
        for i, value in enumerate(node.values):
            val = self.expr(value, block)
            block.append(ast.Assign([_store(t)], val.p))
            block.append(ast.Assign([_store(dt)], self.tangent(val)))
            if i < len(node.values) - 1:
                inner: list[ast.stmt] = []
                test: ast.expr = _load(t) if isinstance(node.op, ast.And) else ast.UnaryOp(
                    ast.Not(), _load(t))
                block.append(ast.If(test, inner, []))
                block = inner
        return _Val(_load(t), _load(dt))

    def ifexp(self, node: ast.IfExp, out: list[ast.stmt]) -> _Val:
        test = self.expr(node.test, out)
        t = self.temp()
        dt = _tangent_name(t)
        branches = []
        for value in (node.body, node.orelse):
            block: list[ast.stmt] = []
            val = self.expr(value, block)
            block.append(ast.Assign([_store(t)], val.p))
            block.append(ast.Assign([_store(dt)], self.tangent(val)))
            branches.append(block)
        out.append(ast.If(test.p, branches[0], branches[1]))
        return _Val(_load(t), _load(dt))

    def subscript(self, node: ast.Subscript, out: list[ast.stmt]) -> _Val:
        obj = self.expr(node.value, out)
        key = self.index(node.slice, out)
        t = self.temp()
        dt = _tangent_name(t)
        slow = ast.Assign([ast.Tuple([_store(t), _store(dt)], ast.Store())], ast.Call(
            _helper("getitem"), [_load(_LEVEL), obj.p, obj.d or ast.Constant(None), key], []))
        if obj.d is None:
            out.append(slow)
        else:
            fast = [ast.Assign([_store(t)], ast.Subscript(obj.p, key, ast.Load())),
                    ast.Assign([_store(dt)], ast.Subscript(obj.d, key, ast.Load()))]
            out.append(ast.If(ast.Compare(ast.Attribute(obj.d, "__class__", ast.Load()),
                                          [ast.Is()], [_helper("tuple")]), fast, [slow]))
        return _Val(_load(t), _load(dt))

    def index(self, node: ast.expr, out: list[ast.stmt]) -> ast.expr:
        if isinstance(node, ast.Slice):
            parts = [None if p is None else self.expr(p, out).p
                     for p in (node.lower, node.upper, node.step)]
            return ast.Call(_load("slice"), [ast.Constant(None) if p is None else p
                                             for p in parts], [])
        if isinstance(node, ast.Tuple) and any(isinstance(e, ast.Slice) for e in node.elts):
            return ast.Tuple([self.index(e, out) for e in node.elts], ast.Load())
        return self.expr(node, out).p

    def attribute(self, node: ast.Attribute, out: list[ast.stmt]) -> _Val:
        obj = self.expr(node.value, out)
        t = self.temp()
        dt = _tangent_name(t)
        fast = [ast.Assign([_store(t)], ast.Attribute(obj.p, node.attr, ast.Load())),
                ast.Assign([_store(dt)], _ZERO)]
        slow = [ast.Assign([ast.Tuple([_store(t), _store(dt)], ast.Store())], ast.Call(
            _helper("getattr"), [_load(_LEVEL), obj.p, obj.d or ast.Constant(None),
                                 ast.Constant(node.attr)], []))]
        out.append(ast.If(ast.Compare(ast.Attribute(obj.p, "__class__", ast.Load()), [ast.Is()],
                                      [_helper("Module")]), fast, slow))
        return _Val(_load(t), _load(dt))

    def call(self, node: ast.Call, out: list[ast.stmt]) -> _Val:
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("super", "locals", "vars", "dir",
                                                      "globals", "eval", "exec",
                                                      "breakpoint"):
            raise _Unsupported  # they look at the calling frame
        f = self.expr(func, out)
        if any(isinstance(a, ast.Starred) for a in node.args) or any(
                k.arg is None for k in node.keywords):
            raise _Unsupported
        args = [self.expr(a, out) for a in node.args]
        kwargs = [(k.arg, self.expr(k.value, out)) for k in node.keywords]
        t = self.temp()
        dt = _tangent_name(t)
        site = _new_site(self.native) if not kwargs else None
        result = ast.Tuple([_store(t), _store(dt)], ast.Store())
        slow = ast.Assign([result], ast.Call(_helper("call"), [
            _load(_LEVEL), ast.Constant(site), f.p,
            ast.Tuple([a.p for a in args], ast.Load()),
            ast.Tuple([a.d or ast.Constant(None) for a in args], ast.Load()),
            ast.Dict([ast.Constant(k) for k, _ in kwargs], [v.p for _, v in kwargs])
            if kwargs else ast.Constant(None),
            ast.Dict([ast.Constant(k) for k, _ in kwargs],
                     [v.d or ast.Constant(None) for _, v in kwargs])
            if kwargs else ast.Constant(None)], []))
        if site is None:
            out.append(slow)
        else:
            # the function this site called last, if it has a dual: called directly
            cached = ast.Subscript(_helper("sites"), ast.Constant(site), ast.Load())
            direct = ast.Assign([ast.Tuple([_store(t), _store(dt)], ast.Store())], ast.Call(
                f.p, [ast.Tuple([_load(_LEVEL)] + [self.tangent(a) for a in args], ast.Load()),
                      *[a.p for a in args]], []))
            out.append(ast.If(ast.Compare(f.p, [ast.Is()], [cached]), [direct], [slow]))
        return _Val(_load(t), _load(dt))




def _as_expression(stmts: list[ast.stmt], final: ast.expr) -> ast.expr:
    """The statements of a lambda's dual as one expression (a lambda has no statements):
    assignments become ``:=``, ``if`` a conditional expression, and the value is ``final``."""
    return ast.Subscript(ast.Tuple([*_expressions(stmts), final], ast.Load()),
                         ast.Constant(-1), ast.Load())


def _expressions(stmts: list[ast.stmt]) -> list[ast.expr]:
    out: list[ast.expr] = []
    for stmt in stmts:
        if isinstance(stmt, ast.Assign):
            target, = stmt.targets
            if isinstance(target, ast.Name):
                out.append(ast.NamedExpr(ast.Name(target.id, ast.Store()), stmt.value))
            else:  # a tuple of names: through a temporary
                tmp = "@pair"
                out.append(ast.NamedExpr(_store(tmp), stmt.value))
                out.extend(ast.NamedExpr(_store(e.id), ast.Subscript(
                    _load(tmp), ast.Constant(i), ast.Load())) for i, e in enumerate(target.elts))
        elif isinstance(stmt, ast.If):
            out.append(ast.IfExp(stmt.test, ast.Tuple(_expressions(stmt.body), ast.Load()),
                                 ast.Tuple(_expressions(stmt.orelse), ast.Load())))
        elif isinstance(stmt, ast.Expr):
            out.append(stmt.value)
        elif isinstance(stmt, ast.Pass):
            continue
        else:  # pragma: no cover - lambdas compile to the statements above only
            raise AssertionError(f"no expression form for {type(stmt).__name__}")
    return out


__all__: list[str] = []
