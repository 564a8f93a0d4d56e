"""The dual route's numbers: levels, boxed duals and their arithmetic.

A specialised ``jvp`` (:mod:`._dual`) keeps tangents in local variables of the dual code.  A
value with a tangent that leaves those locals -- into a closure cell, a default, the argument
of a nested ``jvp`` -- is boxed as a :class:`_Dual` of its ``jvp``, its :class:`_Level`; code of
another level computes with it as with a number (dual arithmetic, the newer level outside),
which keeps nested derivatives free of perturbation confusion.

Also here, as every part of the route needs them: :class:`_Deopt`, which stops the route before
any effect, and the arithmetic of numbers and duals (``_TANGENTS`` and ``_Dual``'s operator
methods), made from the shapes of partials declared beside the operators' rules and remade
whenever the rules change; ``_WRITTEN_OUT`` names the operators whose shipped rules the pass's
expanded code writes out (while a user's rule replaces one of them, the general mode runs).
"""

from __future__ import annotations

import builtins
import itertools
import numbers
import operator
import types
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from overdub import Tagged

from .._shared import ENGINE_NUMBERS

from .. import _rules
from ..rules._common import shape_of


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

    Arithmetic (``+ - * / **``, negation, ``abs``, comparisons) is dual arithmetic for the
    newest level among the operands; any other use of a dual goes through the helpers of the
    specialised code, which deopt where they cannot follow it."""

    __slots__ = ("L", "v", "t")

    def __init__(self, level: _Level, v: Any, t: Any) -> None:
        self.L, self.v, self.t = level, v, t

    def __repr__(self) -> str:
        return f"_Dual({self.v!r}, {self.t!r})"

    # The arithmetic (+ - * / **, negation, abs) is installed by _install_arithmetic, made
    # from the shapes declared beside the operators' rules (_rules.scalar_shape).

    def __floordiv__(self, other: Any) -> Any:
        return _plain(self) // _plain(other)  # piecewise constant

    def __rfloordiv__(self, other: Any) -> Any:
        return _plain(other) // _plain(self)

    def __matmul__(self, other: Any) -> Any:
        raise _Deopt

    __rmatmul__ = __mod__ = __rmod__ = __matmul__

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


ENGINE_NUMBERS.add(_Dual)  # (a derivative's output inside another's: see _check_output)
_PLAIN_NUMBERS = frozenset((float, int))


def _plain(x: Any) -> Any:
    """``x`` without any level's tangent (what a piecewise-constant use of it sees)."""
    while x.__class__ is _Dual:
        x = x.v
    return x


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


# -- the arithmetic, made from the declared shapes ------------------------------------------
#
# Dual arithmetic implements the shapes of partials declared beside the operators' shipped
# rules (_rules.defscalar), not the operators: each operator's code is that of its declared
# shape (linear with its constants, bilinear, quotient, power), and an operator whose shape is
# None (the user registered a rule of their own) or another one stops the dual (_Deopt), so
# the general mode applies the rules.  Rebuilt on every change of the rules
# (_install_arithmetic).

# The operators' tangents for numbers and duals, (x, dx, y, dy, out) -> tangent (None for an
# operand without one): the same expressions as the rules', so the same bits.
_TANGENTS: dict[Any, Callable[..., Any]] = {}
_BINARY: tuple[tuple[str, Any], ...] = (
    ("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
    ("truediv", operator.truediv), ("pow", operator.pow))
_UNARY: tuple[tuple[str, Any], ...] = (
    ("neg", operator.neg), ("pos", operator.pos), ("abs", builtins.abs))


def _tangent_rule(shape: Any) -> Callable[..., Any] | None:
    """The tangent ``dx * px + dy * py`` for a declared ``shape`` (a unit partial passes the
    tangent through: no multiplication by 1.0), or None for a shape not implemented here."""
    if shape is _rules.BILINEAR:
        return lambda x, dx, y, dy, out: _sum(None if dx is None else dx * y,
                                              None if dy is None else dy * x)
    if type(shape) is tuple and len(shape) == 2:
        px, py = shape

        def linear(x: Any, dx: Any, y: Any, dy: Any, out: Any) -> Any:
            return _sum(None if dx is None else dx if px == 1.0 else dx * px,
                        None if dy is None else dy if py == 1.0 else
                        -dy if py == -1.0 else dy * py)
        return linear
    if shape is _rules.QUOTIENT:
        partials = shape.partials

        def quotient(x: Any, dx: Any, y: Any, dy: Any, out: Any) -> Any:
            p = partials(x, y, out, dx is not None, dy is not None)
            if p is None:
                raise _Deopt  # a point the rules decide
            return _sum(None if dx is None else dx * p[0], None if dy is None else dy * p[1])
        return quotient
    if shape is _rules.POWER:
        exponentials = shape.partials

        def power(x: Any, dx: Any, y: Any, dy: Any, out: Any) -> Any:
            if dx is None and dy is None:
                return None
            if x.__class__ not in _REAL_VALUES or y.__class__ not in _REAL_VALUES or \
                    out.__class__ not in _REAL_VALUES:
                raise _Deopt  # (the partials are declared for real numbers)
            p = exponentials(x, y, out, dx is not None, dy is not None)
            if p is None:
                raise _Deopt  # a point the rules decide
            return _sum(None if dx is None else dx * p[0], None if dy is None else dy * p[1])
        return power
    return None


def _stop(self: _Dual, other: Any = None) -> Any:
    """The method of an operator the dual does not follow: the general mode runs."""
    raise _Deopt


def _binary_methods(op: Any, shape: Any) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``_Dual``'s methods ``self op other`` and ``other op self`` for ``op`` of the declared
    ``shape``: with a plain number (the common case of nested derivatives) the shape's tangent
    written out, anything else through :func:`_dual2`."""
    if type(shape) is tuple and len(shape) == 2:  # linear: constant partials
        return _linear_method(op, shape[0], False), _linear_method(op, shape[1], True)
    if shape is _rules.BILINEAR:
        def product(self: _Dual, other: Any) -> Any:
            if other.__class__ in _PLAIN_NUMBERS:
                return _Dual(self.L, op(self.v, other), self.t * other)
            return _dual2(op, self, other)

        def reflected_product(self: _Dual, other: Any) -> Any:
            if other.__class__ in _PLAIN_NUMBERS:
                return _Dual(self.L, op(other, self.v), self.t * other)
            return _dual2(op, other, self)
        return product, reflected_product
    if shape is _rules.QUOTIENT:  # (1 / b, -out / b)
        def quotient(self: _Dual, other: Any) -> Any:
            if other.__class__ in _PLAIN_NUMBERS and other:
                return _Dual(self.L, op(self.v, other), self.t * (1.0 / cast(float, other)))
            return _dual2(op, self, other)  # (a zero divisor: the point the rules decide)

        def reflected_quotient(self: _Dual, other: Any) -> Any:
            return _dual2(op, other, self)
        return quotient, reflected_quotient
    if shape is _rules.POWER:
        return _power_method(op, shape.partials, False), _power_method(op, shape.partials, True)
    return _stop, _stop  # a rule of the user's


def _power_method(op: Any, partials: Any, reflected: bool) -> Callable[..., Any]:
    """``self ** other`` (``other ** self``) with a plain number, by the declared partials
    ``(b a^(b-1), out log a)`` on real numbers; anything else, and the points the partials
    leave to the rules, stop the dual."""
    def power(self: _Dual, other: Any) -> Any:
        v = self.v
        if other.__class__ in _PLAIN_NUMBERS and v.__class__ in _REAL_VALUES:
            out = op(other, v) if reflected else op(v, other)
            if out.__class__ in _REAL_VALUES:
                p = partials(other, v, out, False, True) if reflected else \
                    partials(v, other, out, True, False)
                if p is not None:
                    return _Dual(self.L, out, self.t * p[1 if reflected else 0])
        raise _Deopt
    return power


def _linear_method(op: Any, c: float, reflected: bool) -> Callable[..., Any]:
    """The method for the operand of ``op`` whose constant partial is ``c``."""
    if c == 1.0:
        if reflected:
            def unit_reflected(self: _Dual, other: Any) -> Any:
                if other.__class__ in _PLAIN_NUMBERS:
                    return _Dual(self.L, op(other, self.v), self.t)
                return _dual2(op, other, self)
            return unit_reflected

        def unit(self: _Dual, other: Any) -> Any:
            if other.__class__ in _PLAIN_NUMBERS:
                return _Dual(self.L, op(self.v, other), self.t)
            return _dual2(op, self, other)
        return unit
    if reflected:
        def scaled_reflected(self: _Dual, other: Any) -> Any:
            if other.__class__ in _PLAIN_NUMBERS:
                return _Dual(self.L, op(other, self.v), self.t * c)
            return _dual2(op, other, self)
        return scaled_reflected

    def scaled(self: _Dual, other: Any) -> Any:
        if other.__class__ in _PLAIN_NUMBERS:
            return _Dual(self.L, op(self.v, other), self.t * c)
        return _dual2(op, self, other)
    return scaled


def _unary_method(op: Any, partial: Any) -> Callable[..., Any]:
    """``_Dual``'s method ``op(self)`` from the derivative ``partial(x, out)`` declared beside
    ``op``'s rules for real numbers.  The unary operators are piecewise linear (``-``, ``+``,
    ``abs``): their derivative is constant between kinks, so it is read at the plain value
    (a value that is itself a dual of an older level has no tangent in it)."""
    if partial is None:  # the user's rule: the general mode applies it
        return _stop

    def method(self: _Dual) -> Any:
        v = self.v
        x = _plain(v)
        if x.__class__ not in _REAL_VALUES:
            raise _Deopt  # complex: the partials are declared for real numbers
        p = partial(x, op(x))
        if p is None:
            raise _Deopt  # a point the rules decide
        return _Dual(self.L, op(v), self.t * p)
    return method


_REAL_VALUES = frozenset((float, int, np.float64))


@_rules.on_change
def _install_arithmetic() -> None:
    """``_TANGENTS`` and ``_Dual``'s arithmetic for the shapes declared now."""
    shapes = {op: _rules.scalar_shape(op) for _, op in _BINARY + _UNARY}
    tangents = {op: rule for _, op in _BINARY if (rule := _tangent_rule(shapes[op])) is not None}
    _TANGENTS.clear()
    _TANGENTS.update(tangents)
    for name, op in _BINARY:
        forward, reflected = _binary_methods(op, shapes[op])
        setattr(_Dual, f"__{name}__", forward)
        setattr(_Dual, f"__r{name}__", reflected)
    for name, op in _UNARY:
        setattr(_Dual, f"__{name}__", _unary_method(op, shapes[op]))


# the operators whose shipped rules the dual code (the pass's expanded float arithmetic) writes
# out: while the user has registered a rule of their own for one of them, the general mode
# (which applies it) runs
_WRITTEN_OUT = frozenset(map(id, (
    operator.add, operator.sub, operator.mul, operator.truediv, operator.pow, operator.neg,
    operator.pos, operator.iadd, operator.isub, operator.imul, operator.itruediv,
    operator.ipow)))


def _dual2(op: Any, a: Any, b: Any) -> Any:
    """``op(a, b)`` with at least one dual operand: dual arithmetic at the newest level."""
    if a.__class__ is Tagged or b.__class__ is Tagged:
        raise _Deopt
    tangent = _TANGENTS.get(op)
    if tangent is None:
        raise _Deopt  # no declared shape the dual implements: the general mode runs
    level = _top((a, b))
    assert level is not None
    av, at = _at(a, level)
    bv, bt = _at(b, level)
    if av.__class__ is tuple or bv.__class__ is tuple:
        raise _Deopt
    try:
        out = op(av, bv)
    except ZeroDivisionError:
        # NumPy hands a dual its scalar operand as a Python float (np.float64(1.0) / d calls
        # d.__rtruediv__(1.0)), whose quotient by zero raises where NumPy's is inf: the
        # general mode computes it as the program does (and raises where Python does)
        raise _Deopt("a division by zero") from None
    return _box(level, out, tangent(av, at, bv, bt, out))


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
    if kind in _AS_THEY_ARE:
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


# Values that are never boxed nor hold boxed values where unboxing looks (a list, dict or
# set made in the run holds its items boxed, unboxed where they are read): unboxed as they are,
# with a zero tangent
_AS_THEY_ARE = frozenset((float, int, bool, complex, str, bytes, type(None), np.float64,
                          np.ndarray, list, dict, set, range, types.MethodType,
                          types.FunctionType, types.BuiltinFunctionType))


def _named(x: Any) -> bool:
    """Whether ``x`` is an instance of a named tuple class (``collections.namedtuple``,
    ``typing.NamedTuple``), whose items the dual follows as a tuple's."""
    kind = x.__class__
    return bool(kind is not tuple and isinstance(x, tuple) and "_fields" in vars(kind))


_NUMBERS = (float, int, complex)


def _numberlike(v: Any) -> bool:
    kind = v.__class__
    return kind in _NUMBERS or kind is _Dual or isinstance(v, (numbers.Number, np.generic))


def _array_operand(x: Any, dx: Any) -> bool:
    """Whether ``x`` is a NumPy array of floats (or a number) whose tangent ``dx`` is one
    direction of its own shape, a batch of them (leading dimensions: jacfwd's), or none: what
    the rules of a function take as the general mode gives them (integer arrays and objects
    are that mode's)."""
    if x.__class__ is np.ndarray:
        if x.dtype.kind not in "fc" or not x.ndim:  # (0-d: NumPy makes scalars of them)
            return False
    elif not _numberlike(x) or x.__class__ is _Dual:
        return False
    if dx is None or (dx.__class__ in (float, int) and dx == 0):
        return True
    shape, n = shape_of(dx), shape_of(x)
    return len(shape) >= len(n) and shape[len(shape) - len(n):] == n


def _one_batch(pairs: Any, elementwise: bool = True) -> bool:
    """Whether the tangents of the ``(value, tangent)`` pairs (:func:`_array_operand`'s) share
    their batch dimensions, leaving out the ones that are no tangent (None, a number's 0.0):
    none, or jacfwd's where the operation is ``elementwise`` (it broadcasts them as it
    broadcasts the values)."""
    batches = set()
    for x, d in pairs:
        if d is not None and not (d.__class__ in (float, int) and d == 0):
            shape = shape_of(d)
            batches.add(shape[:len(shape) - len(shape_of(x))])
    return len(batches) <= 1 and (elementwise or not any(batches))


def _array_operands(a: Any, da: Any, b: Any, db: Any) -> bool:
    """Whether both operands of an operator are :func:`_array_operand`'s whose tangents share
    their batch dimensions (:func:`_one_batch`, elementwise): the two checks at once, for the
    two operands of every operator on a small array."""
    batch = None
    for x, dx in ((a, da), (b, db)):
        kind = x.__class__
        if kind is np.ndarray:
            if x.dtype.kind not in "fc" or not x.ndim:  # (0-d: NumPy makes scalars of them)
                return False
            shape = x.shape
        elif kind is float or kind is np.float64 or kind is int:
            shape = ()
        elif not _numberlike(x) or kind is _Dual:
            return False
        else:
            shape = np.shape(x)
        if dx is None or (dx.__class__ in (float, int) and dx == 0):
            continue
        dshape = shape_of(dx)
        n = len(dshape) - len(shape)
        if n < 0 or dshape[n:] != shape or (batch is not None and dshape[:n] != batch):
            return False
        batch = dshape[:n]
    return True


def _in_precision(out: Any, t: Any) -> Any:
    """An array's tangent in the array's precision (float32 stays float32, as the general
    mode keeps it, as JAX does)."""
    if out.__class__ is np.ndarray and t.__class__ is np.ndarray and \
            out.dtype.kind == "f" and t.dtype.kind == "f" and t.dtype.itemsize > out.dtype.itemsize:
        return t.astype(out.dtype)
    return t
