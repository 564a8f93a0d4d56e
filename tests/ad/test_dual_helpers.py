"""The dual route runs the Python helpers that the general forward mode calls.

Where the dual route declines a function (a ``try`` statement, say), the general forward
mode runs it one operation at a time; a scalar helper it calls with numbers
and tuples of numbers (``rhs(state, p)``, ``step(x, y, z, sigma=s)``) runs as its dual, with
the tangents in local variables, and its result comes back tagged.  Every test here compares
the default route, the dual route forced and the reference (where no helper runs as a dual)
on first and repeated calls, and against finite differences; and the cases where a helper's
dual must give the call back to the general mode: an effect, an exception, a zero or nan
tangent, an integer result, a value held in a closure."""

from __future__ import annotations

import contextlib
import functools
import math

import numpy as np
import pytest

from overdub_ad import MissingRuleError, derivative, explain, jacfwd, jvp
from overdub_ad.testing import REFERENCE, force_route

pytestmark = pytest.mark.every_route

ROUTES = pytest.mark.parametrize("route", [None, "forward-dual", REFERENCE],
                                 ids=["default", "forward-dual", "reference"])


@contextlib.contextmanager
def _block():
    yield


def _rhs(state, k, c):
    x, v = state
    return v, -k * x - c * v - 0.1 * x * x * x


def _step(x, v, k, c=0.2, h=0.05):
    a, b = _rhs((x, v), k, c)
    return x + h * a, v + h * b


def _generator(k, c):
    x, v = 0.8, 0.5
    for _ in range(15):
        x, v = _step(x, v, k, c)
        yield x, v


def with_generator(p):
    """A with block and a generator (which the dual route follows since session 17)."""
    k, c = p
    with _block():
        for x, v in _generator(k, c):
            pass
    return math.exp(-x * x) + v / (1.0 + k * k)


def with_keywords(p):
    step = functools.partial(_step, k=p[0], c=p[1])  # (keywords: step(x, v, k=..., c=...))
    x, v = 0.8, 0.5
    with _block():
        for _ in range(15):
            x, v = step(x, v)
    return x * v


def with_try(p):
    x, v = 0.8, 0.5
    try:
        for _ in range(15):
            x, v = _step(x, v, p[0], p[1], h=0.05)
    except ZeroDivisionError:
        return 0.0
    return x - v * v


STYLES = [with_generator, with_keywords, with_try]


def _fd(f, p, i, h=1e-6):
    up, down = list(p), list(p)
    up[i] += h
    down[i] -= h
    return (f(tuple(up)) - f(tuple(down))) / (2 * h)


@ROUTES
@pytest.mark.parametrize("f", STYLES, ids=lambda f: f.__name__)
def test_helpers_of_declined_functions(route, f):
    p = (1.3, 0.4)
    want = np.array([_fd(f, p, i) for i in range(2)])
    with force_route(route):
        for _ in range(3):
            value, tangent = jvp(f, (p,), ((1.0, 0.0),))
            assert value == f(p)
            assert tangent == pytest.approx(want[0], rel=1e-6)
            np.testing.assert_allclose(np.ravel(jacfwd(f)(p)), want, rtol=1e-6)
            assert derivative(lambda c: f((1.3, c)))(0.4) == pytest.approx(want[1], rel=1e-6)


def test_explain_names_the_helpers_the_dual_ran():
    report = str(explain(jvp, with_try, ((1.3, 0.4),), ((1.0, 0.0),)))
    assert "forward-dual: declined (with_try" in report
    assert "forward-dual: ran (_step)" in report


# -- what a helper's dual gives back to the general mode ---------------------------------------

_LOG: list[float] = []


def _logged(x, y):
    _LOG.append(1.0)  # (an effect: the dual stops before it, the general mode runs the call)
    return x * y


def _effect(x):
    total = 0.0
    with _block():
        for _ in range(3):
            total += _logged(x, 2.0)
    return total


@ROUTES
def test_a_helper_with_an_effect_runs_once(route):
    with force_route(route):
        for _ in range(3):
            del _LOG[:]
            assert derivative(_effect)(1.5) == 6.0
            assert len(_LOG) == 3


def _raises(x):
    if x > 1.0:
        raise ValueError("too big")
    return math.sqrt(1.0 - x)


def _caught(x):
    with _block():
        try:
            return _raises(x) * x
        except ValueError:
            return -x * x


@ROUTES
@pytest.mark.parametrize("x, want", [(0.5, math.sqrt(0.5) - 0.5 / (2 * math.sqrt(0.5))),
                                     (2.0, -4.0)])
def test_a_helper_that_raises(route, x, want):
    with force_route(route):
        for _ in range(3):
            assert derivative(_caught)(x) == pytest.approx(want)


def _rule_fails(x):
    with _block():
        try:
            return _root(x)
        except ZeroDivisionError:
            return 5.0 * x


def _root(x):
    return math.sqrt(x - 1.0)  # (its derivative at 1: 0.5 / 0, the rule's own error)


@ROUTES
def test_a_rule_failing_in_a_helper_is_not_the_programs_exception(route):
    with force_route(route):
        for _ in range(2):
            with pytest.raises(MissingRuleError):
                derivative(_rule_fails)(1.0)
            with pytest.raises(MissingRuleError, match="math.sqrt"):
                derivative(_root)(1.0)  # (the dual route's own run: the same error)


def _pair(x):
    return x * 0.0, 3.0, max(0, x), int(x > 0)


def _zeros(x):
    with _block():
        a, b, c, n = _pair(x)
    return a + b + c + n


def _winner(x):
    with _block():
        return _pair(x)[2]


@ROUTES
@pytest.mark.parametrize("x", [2.0, -1.0])
def test_zero_tangents_and_integers(route, x):
    with force_route(route):
        for _ in range(3):
            assert derivative(_zeros)(x) == (1.0 if x > 0 else 0.0)
            assert derivative(_winner)(x) == (1.0 if x > 0 else 0.0)


def _singular_helper(x, y):
    return x * math.log(y)  # (at y = 0 the dual's tangent is 0 * inf = nan: the general
    # mode leaves the constant's term out)


def _singular(y):
    with _block():
        return _singular_helper(0.0, 1.0) + _singular_helper(y, 1.0) * y


@ROUTES
def test_a_nan_tangent_goes_back_to_the_general_mode(route):
    with force_route(route):
        for _ in range(2):
            assert derivative(_singular)(2.0) == 0.0


def _closure_over(x):
    def inner(y):
        return x * y  # (x in a cell: another context's value, for the dual)
    with _block():
        return inner(x) + inner(2.0)


def _nested(x):
    def helper(a):
        return a * derivative(lambda y: a * y)(3.0)  # (= a * a: no perturbation confusion)
    with _block():
        return helper(x) + x


@ROUTES
def test_closures_and_nested_derivatives(route):
    with force_route(route):
        for _ in range(3):
            assert derivative(_closure_over)(1.5) == pytest.approx(2 * 1.5 + 2.0)
            assert derivative(_nested)(1.5) == pytest.approx(2 * 1.5 + 1.0)
            assert derivative(lambda x: derivative(_nested)(x * x))(1.5) == pytest.approx(
                2.0 * 2 * 1.5)
