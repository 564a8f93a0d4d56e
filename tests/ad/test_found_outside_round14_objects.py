"""AD errors on valid object-oriented code (found from outside, round 14), kept fixed.

- E1: ``hessian``/``hvp`` on the default route raised ValueError where code reduced a named
  tuple with ``sum``/``max``/``min`` (``sum(P2(t, 2 * t))``): the hvp tape took the rule's
  forward mode with a list tangent for the named tuple.
- E2: reverse mode on the default route raised MissingRuleError where ``sorted``,
  ``list.sort``, ``min`` or ``max`` compared objects whose ``__lt__`` reads ``float(self)``:
  the specialised code keeps a differentiated value in an object as it is, and the builtin ran
  the comparison on it natively.  The items are now compared through the context.
- E3: ``copy.deepcopy``/``copy.copy`` of a NumPy scalar (``np.float64``, ``np.float32``,
  ``np.complex128``) raised MissingRuleError on every route: ``np.generic.__copy__`` and
  ``__deepcopy__`` have rules now (the same number, the same tangent).
- E4: a subclass of ``float`` or ``complex`` (a unit type) called on a differentiated number
  raised MissingRuleError -- and with a Python ``__init__`` its derivative was silently 0,
  ``float.__new__`` run natively by the core.  Such a call is a cast, like ``float(x)``: the
  value is the subclass's instance, its derivative the argument's, in both modes.

Each is checked against finite differences and the reference route, in both modes, on first
and repeated calls.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import functools
import typing

import numpy as np
import pytest

from overdub_ad import (derivative, grad, hessian, hvp, jacfwd, jacrev, jvp, value_and_grad,
                        vjp)
from overdub_ad.testing import REFERENCE, force_route
from tests.conftest import fd


def _first_and_second(f, x):
    """Every API's first and second derivative of scalar ``f`` at ``x``, twice each (a
    repeated call runs what the first one cached)."""
    results = []
    for _ in range(2):
        results.append((
            float(derivative(f, x)), float(grad(f)(x)), float(value_and_grad(f)(x)[1]),
            float(jacrev(f)(x)), float(jacfwd(f)(x)), float(jvp(f, (x,), (1.0,))[1]),
            float(vjp(f, x)[1](1.0)[0]),
            float(hessian(f)(x)), float(hvp(f, x, 1.0)), float(grad(grad(f))(x)),
            float(derivative(grad(f), x))))
    return results


def _check(f, x, rel=1e-6, rel2=1e-4):
    """Every API agrees with finite differences and with the reference route."""
    first = fd(f, x)
    second = fd(lambda t: fd(f, t, h=1e-4), x, h=1e-4)
    results = _first_and_second(f, x)
    with force_route(REFERENCE):
        reference = _first_and_second(f, x)
    for got in results + reference:
        assert got[:7] == pytest.approx([first] * 7, rel=rel, abs=1e-8)
        assert got[7:] == pytest.approx([second] * 4, rel=rel2, abs=1e-5)
    for got, ref in zip(results, reference):
        assert got == pytest.approx(ref, rel=1e-9, abs=1e-12)


# -- E1: named tuples reduced by sum/max/min under hessian and hvp -----------------------------

class P2(typing.NamedTuple):
    x: float
    y: float


Q = collections.namedtuple("Q", "a b")


@pytest.mark.parametrize("f", [
    lambda t: sum(P2(t, 2.0 * t)) * t,
    lambda t: sum(Q(t, 2.0 * t)) * t,
    lambda t: max(P2(t, 2.0 * t)) * t,
    lambda t: min(Q(t * t, 2.0 * t)) * t,
    lambda t: sum([P2(t, t * t)[1], t]) * t,
    lambda t: max(P2(t * t, 1.0), key=lambda v: v) * t,
], ids=["sum", "sum-namedtuple", "max", "min", "field", "max-key"])
def test_a_named_tuple_reduced_by_a_builtin_has_second_derivatives(f):
    _check(f, 0.9)


def test_the_reported_named_tuple_hessian():
    def f(t):
        return sum(P2(t, 2.0 * t)) * t
    for _ in range(2):
        assert float(hessian(f)(0.9)) == pytest.approx(6.0)
        assert float(hvp(f, 0.9, 1.0)) == pytest.approx(6.0)


def test_a_named_tuple_argument_reduced_by_sum():
    def f(p):
        return sum(p) * p.x

    p = P2(0.9, 1.3)
    for _ in range(2):
        h = hessian(f)(p)
        assert isinstance(h, P2) and isinstance(h.x, P2)
        assert [h.x.x, h.x.y, h.y.x, h.y.y] == pytest.approx([2.0, 1.0, 1.0, 0.0])
        v = hvp(f, p, P2(1.0, 0.0))
        assert isinstance(v, P2) and [v.x, v.y] == pytest.approx([2.0, 1.0])


# -- E2: sorted/list.sort/min/max comparing objects whose __lt__ reads float(self) ------------

class Ratio:
    def __init__(self, n, d):
        self.n, self.d = n, d

    def __float__(self):
        return self.n / self.d

    def __lt__(self, other):
        return float(self) < float(other)


@functools.total_ordering
class Score:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return self.v == other.v

    def __gt__(self, other):
        return self.v * 1.0 > other.v * 1.0


@dataclasses.dataclass(order=True)
class Ordered:
    v: float


def sorted_ratios(t):
    return float(sorted([Ratio(t, 1.0), Ratio(2.0, t)])[0]) * t


def sort_in_place(t):
    rs = [Ratio(t, 1.0), Ratio(2.0, t), Ratio(t * t, 3.0)]
    rs.sort(reverse=True)
    return float(rs[0]) + float(rs[-1])


def min_and_max(t):
    return float(min(Ratio(t, 1.0), Ratio(2.0, t))) + float(max([Ratio(t, 1.0), Ratio(2.0, t)]))


def reflected(t):  # only __gt__ and __eq__ defined: < is the reflected >
    return max([Score(t), Score(2.0 - t), Score(t * t)]).v * t + min(Score(t), Score(2.0 - t)).v


def dataclass_order(t):
    return sorted([Ordered(t), Ordered(3.0 - t)], key=None)[0].v * t + \
        max(Ordered(t), Ordered(t * 0.5)).v


def with_default(t):
    return max([Ratio(t, 1.0), Ratio(2.0, t)], default=None).n * t


@pytest.mark.parametrize("f", [sorted_ratios, sort_in_place, min_and_max, reflected,
                               dataclass_order, with_default])
@pytest.mark.parametrize("x", [1.7, 0.8])
def test_builtins_comparing_objects_through_a_python_lt(f, x):
    _check(f, x)


def test_the_reported_sorted_gradient():
    def f(t):
        return float(sorted([Ratio(t, 1.0), Ratio(2.0, t)])[0])

    for _ in range(2):
        assert grad(f)(1.7) == pytest.approx(-2.0 / 1.7 ** 2)
        assert value_and_grad(f)(1.7)[1] == pytest.approx(-0.6920415224913495)


def test_the_sorted_items_are_the_objects_in_the_builtins_order():
    seen = []

    def f(t):
        rs = [Ratio(t, 1.0), Ratio(2.0, t), Ratio(1.0, 1.0)]
        ordered = sorted(rs)
        seen.append([rs.index(r) for r in ordered])
        return float(ordered[0]) * t

    f(1.7)
    grad(f)(1.7)
    derivative(f, 1.7)
    assert seen == [[2, 1, 0]] * 3


# -- E3: copy.copy and copy.deepcopy of every numeric kind -------------------------------------

@pytest.mark.parametrize("f", [
    lambda t: copy.deepcopy(np.float64(t)) * t,
    lambda t: copy.copy(np.float64(t)) * t,
    lambda t: copy.deepcopy(np.asarray(t)) * t,
    lambda t: (copy.deepcopy(complex(t, 1.0)) * t).real,
    lambda t: (copy.deepcopy(np.complex128(t)) * t).real,
    lambda t: (copy.copy(np.complex128(t) * 1j) * t).imag,
    lambda t: copy.deepcopy([np.float64(t), t])[0] * t,
    lambda t: copy.deepcopy({"a": (np.float64(t), "label")})["a"][0] * t,
    lambda t: np.float64(t).__deepcopy__({}) * t,
    lambda t: np.float64(t).__copy__() * t,
], ids=["f64-deep", "f64-copy", "0d-deep", "complex-deep", "c128-deep", "c128-copy",
        "list", "dict", "method-deep", "method-copy"])
def test_copies_of_numbers_carry_the_derivative(f):
    _check(f, 2.0, rel=1e-5)


def test_the_reported_deepcopies():
    def f(w):
        return copy.deepcopy([w[0], w[1]])[0] * w[1]

    w = np.array([1.0, 2.0])
    for _ in range(2):
        assert derivative(lambda t: copy.deepcopy(np.float64(t)) * t, 2.0) == pytest.approx(4.0)
        np.testing.assert_allclose(grad(f)(w), [2.0, 1.0])
        np.testing.assert_allclose(jacfwd(f)(w), [2.0, 1.0])
        np.testing.assert_allclose(hessian(f)(w), [[0.0, 1.0], [1.0, 0.0]])


@pytest.mark.parametrize("route", [None, REFERENCE], ids=["default", "reference"])
def test_a_copied_float32_keeps_its_precision(route):
    # (float32 finite differences are too coarse to compare with: exact values instead)
    def f(t):
        return copy.deepcopy(np.float32(t) * np.float32(2.0))

    with force_route(route):
        for _ in range(2):
            out, tangent = jvp(f, (1.5,), (1.0,))
            assert type(out) is np.float32 and out == 3.0 and tangent == 2.0
            out, pullback = vjp(lambda t: copy.copy(np.float32(t)) * t, 1.5)
            assert out == 2.25 and pullback(1.0)[0] == 3.0
            assert grad(lambda t: float(copy.deepcopy(np.float32(t))) * t)(2.0) == 4.0
            assert float(hessian(lambda t: float(copy.deepcopy(np.float32(t))) * t)(2.0)) == 2.0


def test_a_copied_complex_scalar_is_holomorphic():
    z = 0.5 + 0.25j
    for _ in range(2):
        assert derivative(lambda z: copy.deepcopy(np.complex128(z)) * z, z) == \
            pytest.approx(2 * z)


# -- E4: subclasses of float and complex: a cast ----------------------------------------------

class Meters(float):
    pass


class NewMeters(float):
    def __new__(cls, v):
        return super().__new__(cls, v)


class InitMeters(float):
    def __init__(self, v):
        self.unit = "m"


class UnitMeters(float):
    def __new__(cls, v, unit="m"):
        obj = super().__new__(cls, v)
        obj.unit = unit
        return obj

    def __mul__(self, other):
        return UnitMeters(float(self) * other, self.unit)


class Phasor(complex):
    pass


@pytest.mark.parametrize("f", [
    lambda t: Meters(t) * 2.0,
    lambda t: Meters(t * t) * t,
    lambda t: NewMeters(t * t) * 2.0,
    lambda t: InitMeters(t * t) * 2.0 if InitMeters(t).unit == "m" else 0.0,
    lambda t: float(UnitMeters(t * t, "km") * 2.0),
    lambda t: (Phasor(t, 2.0 * t) * t).imag,
    lambda t: (Phasor(t * t) * 1j).imag,
    lambda t: Meters(np.float64(t) * t) * 2.0,
    lambda t: t * (2.0 if type(Meters(t)) is Meters else 100.0),
], ids=["plain", "product", "new", "init", "new-and-attribute", "complex", "complex-one",
        "numpy", "type"])
def test_a_float_subclass_called_on_a_differentiated_number_is_a_cast(f):
    _check(f, 1.5)


def test_the_reported_unit_type():
    for _ in range(2):
        assert derivative(lambda t: Meters(t) * 2.0, 1.5) == 2.0
        assert grad(lambda t: Meters(t) * 2.0)(1.5) == 2.0


@pytest.mark.parametrize("route", [None, REFERENCE], ids=["default", "reference"])
def test_the_value_is_the_subclass_instance_in_both_modes(route):
    with force_route(route):
        out, tangent = jvp(lambda t: Meters(t * t), (1.5,), (1.0,))
        assert type(out) is Meters and out == 2.25 and tangent == 3.0
        out, pullback = vjp(lambda t: UnitMeters(t * t, "km"), 1.5)
        assert type(out) is UnitMeters and out.unit == "km" and pullback(1.0) == (3.0,)
        out, tangent = jvp(lambda t: InitMeters(2.0 * t), (1.5,), (1.0,))
        assert type(out) is InitMeters and out.unit == "m" and tangent == 2.0
