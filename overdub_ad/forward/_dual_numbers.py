"""The dual route's numbers: levels, boxed duals and their arithmetic.

A specialised ``jvp`` (:mod:`._dual`) keeps tangents in local variables of the dual code.  A
value with a tangent that leaves those locals -- into a closure cell, a default, the argument
of a nested ``jvp`` -- is boxed as a :class:`_Dual` of its ``jvp``, its :class:`_Level`; code of
another level computes with it as with a number (dual arithmetic, the newer level outside),
which keeps nested derivatives free of perturbation confusion.

Also here, as every part of the route needs them: :class:`_Deopt`, which stops the route before
any effect, and the operator rules written out for numbers and duals (``_TANGENTS``; with
``_WRITTEN_OUT``, the operators whose shipped rules the route writes out: while a user's rule
replaces one of them, the general mode runs instead).
"""

from __future__ import annotations

import itertools
import numbers
import operator
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from overdub import Tagged

from .. import _rules


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
            return _Dual(self.L, self.v / other, self.t * (1.0 / cast(float, other)))
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


# The operators' tangents for numbers and duals, (x, dx, y, dy, out) -> tangent (None for an
# operand without one), made from the partials declared beside their shipped rules
# (_rules.defscalar): the same expressions as the rules', so the same bits.
_TANGENTS: dict[Any, Callable[..., Any]] = {}


def _tangent_rule(partials: Any) -> Callable[..., Any]:
    """The tangent ``dx * px + dy * py`` for declared ``partials`` (a unit partial passes the
    tangent through: no multiplication by 1.0)."""
    if partials is _rules.BILINEAR:
        return lambda x, dx, y, dy, out: _sum(None if dx is None else dx * y,
                                              None if dy is None else dy * x)
    if type(partials) is tuple:
        px, py = partials

        def linear(x: Any, dx: Any, y: Any, dy: Any, out: Any) -> Any:
            return _sum(None if dx is None else dx if px == 1.0 else dx * px,
                        None if dy is None else dy if py == 1.0 else
                        -dy if py == -1.0 else dy * py)
        return linear

    def general(x: Any, dx: Any, y: Any, dy: Any, out: Any) -> Any:
        p = partials(x, y, out, dx is not None, dy is not None)
        if p is None:
            raise _Deopt  # a point the rules decide
        return _sum(None if dx is None else dx * p[0], None if dy is None else dy * p[1])
    return general


@_rules.on_change
def _tangent_table() -> None:
    declared = _rules.scalar_partials(2)
    _TANGENTS.clear()
    _TANGENTS.update({op: _tangent_rule(declared[id(op)]) for op in
                      (operator.add, operator.sub, operator.mul, operator.truediv)
                      if id(op) in declared})


# the operators whose shipped rules the dual code and _TANGENTS write out: while the user has
# registered a rule of their own for one of them, the general mode (which applies it) runs
_WRITTEN_OUT = frozenset(map(id, (
    operator.add, operator.sub, operator.mul, operator.truediv, operator.pow, operator.neg,
    operator.pos, operator.iadd, operator.isub, operator.imul, operator.itruediv,
    operator.ipow)))


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
    if kind is np.float64:
        return bool(t == 0)
    return False


def _box(level: _Level, v: Any, t: Any) -> Any:
    """``v`` carrying the tangent ``t`` of ``level`` (``v`` itself for a zero tangent)."""
    if v.__class__ is tuple and t.__class__ is tuple:
        return tuple(_box(level, e, te) for e, te in zip(v, t))
    if _zero(t):
        return v
    if t.__class__ is tuple and _named(v):  # (as the named tuple's own _make builds it)
        return tuple.__new__(v.__class__, [_box(level, e, te) for e, te in zip(v, t)])
    if v.__class__ is tuple or not _numberlike(v):
        raise _Deopt  # a tangent on something that is not a number (a list, an array...)
    return _Dual(level, v, t)


def _unbox(level: _Level, x: Any) -> tuple[Any, Any]:
    """``(value, tangent at level)`` of a value read from a cell, a container, a default or a
    nested ``jvp``'s result (tangent 0.0 where it has none)."""
    kind = x.__class__
    if kind is _Dual:
        if x.L is level:
            return x.v, x.t
        if x.v.__class__ is np.ndarray:  # (an object of another level's run holds an array)
            raise _Deopt("an array with a tangent of another derivative")
        return x, 0.0
    if kind is tuple:
        parts = [_unbox(level, e) for e in x]
        if all(t.__class__ is float and t == 0 for _, t in parts):
            return x, 0.0
        return tuple(p for p, _ in parts), tuple(t for _, t in parts)
    if kind is Tagged:
        raise _Deopt("a value of another context")  # (the general mode says what)
    if _named(x):
        parts = [_unbox(level, e) for e in x]
        if all(t.__class__ is float and t == 0 for _, t in parts):
            return x, 0.0
        return tuple.__new__(kind, [p for p, _ in parts]), tuple(t for _, t in parts)
    return x, 0.0


def _named(x: Any) -> bool:
    """Whether ``x`` is an instance of a named tuple class (``collections.namedtuple``,
    ``typing.NamedTuple``), whose items the dual follows as a tuple's."""
    kind = x.__class__
    return bool(kind is not tuple and isinstance(x, tuple) and "_fields" in vars(kind))


_NUMBERS = (float, int, complex)


def _numberlike(v: Any) -> bool:
    kind = v.__class__
    return kind in _NUMBERS or kind is _Dual or isinstance(v, (numbers.Number, np.generic))
