"""The forward-partials route: float arithmetic and ``math`` functions in the reference's
forward mode given their tangents from the partials declared beside their shipped rules.

It serves what the dual route declines (a ``try`` statement, a property setter): every test
here runs such a function, or one the dual route follows (a generator, ``functools.partial``),
on this route alone and on the reference, and compares them; and the cases where the partials
hand the point back to the rules (a zero divisor, a domain edge, an infinite partial times a
zero tangent, a rule the user registered)."""

from __future__ import annotations

import contextlib
import functools
import math

import numpy as np
import pytest

from overdub_ad import defjvp, derivative, explain, jacfwd, jvp
from overdub_ad.testing import REFERENCE, force_route, isolated_rules

pytestmark = pytest.mark.every_route

ROUTE = "forward-partials"


@contextlib.contextmanager
def _block():
    yield


def _steps(k, c, x):
    """A damped oscillator, stepped by a generator."""
    v = 0.5
    for _ in range(20):
        a = -k * x - c * v - 0.1 * x * x * x
        x, v = x + 0.05 * v, v + 0.05 * a
        yield x, v


def oscillator(k, c, x0):
    with _block():
        try:  # (the dual route follows generators and with blocks, not try: it declines)
            for x, v in _steps(k, c, x0):
                pass
        except OverflowError:
            return 0.0
    return math.exp(-x * x) + v / (1.0 + k * k) - math.sqrt(c) * math.log(1.0 + x * x)


def _partial_style(p):
    step = functools.partial(lambda s, k: (s[0] + 0.1 * s[1], s[1] - 0.1 * k * s[0]), k=p[0])
    s = (p[1], p[2])
    for _ in range(10):
        s = step(s)
    return s[0] * s[1] ** 2 / (1.0 + p[0])


def test_the_dual_route_declines_these_functions():
    report = explain(derivative, lambda k: oscillator(k, 0.3, 0.8), 1.3)
    assert "forward-dual: declined" in str(report)


@pytest.mark.parametrize("point", [(1.3, 0.3, 0.8), (0.2, 2.0, -1.5), (3.0, 0.01, 0.0)])
def test_the_route_agrees_with_the_reference(point):
    directions = [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.3, -0.2, 0.5)]
    results = {}
    for route in (ROUTE, REFERENCE):
        with force_route(route):
            results[route] = [jvp(oscillator, point, t) for t in directions * 2]
    np.testing.assert_allclose(results[ROUTE], results[REFERENCE], rtol=1e-13, atol=1e-15)
    h = 1e-6
    for (_, tangent), t in zip(results[ROUTE], directions):
        up = [p + h * d for p, d in zip(point, t)]
        down = [p - h * d for p, d in zip(point, t)]
        assert tangent == pytest.approx((oscillator(*up) - oscillator(*down)) / (2 * h),
                                        rel=1e-6, abs=1e-8)


def test_numpy_parameters_and_jacfwd():
    p = np.array([0.7, 1.1, -0.4])
    with force_route(REFERENCE):
        expected = jacfwd(_partial_style)(p)
    with force_route(ROUTE):
        for _ in range(2):
            np.testing.assert_allclose(jacfwd(_partial_style)(p), expected, rtol=1e-13)
            out, tangent = jvp(_partial_style, (p,), (np.array([1.0, 0.0, 0.0]),))
            assert out == _partial_style(p) and tangent == pytest.approx(expected[0], rel=1e-13)


def _edges(x):
    with _block():
        a = 1.0 / (x - 1.0) if x != 1.0 else 0.0
        b = math.sqrt(x - x) + x ** 0.5  # sqrt's partial is infinite at 0: its tangent 0 there
        c = (x - 1.0) ** 2.0 + 0.0 ** x  # (0 ** x: a partial the power's rule decides)
    return a + b + c


@pytest.mark.parametrize("x", [1.0, 2.0, 0.25])
def test_points_the_partials_hand_back_to_the_rules(x):
    def scaled(v):  # (jacfwd: a batch of two directions, each operand's tangent an array;
        # sqrt's infinite partial times a zero direction is nan there, as in JAX)
        with _block():
            y = v[0]
            a = 1.0 / (y - 1.0) if y != 1.0 else 0.0
            return (a + np.sqrt(y - y) + y ** 0.5 + (y - 1.0) ** 2.0) * v[1]

    v = np.array([x, 2.0])
    with force_route(REFERENCE):
        expected = derivative(_edges)(x)
        expected_jacobian = jacfwd(scaled)(v)
    with force_route(ROUTE):
        got = [derivative(_edges)(x) for _ in range(2)]
        for _ in range(2):
            np.testing.assert_array_equal(jacfwd(scaled)(v), expected_jacobian)
    assert got == pytest.approx([expected] * 2, nan_ok=True)


def test_a_program_error_is_the_program_s():
    def divides(x):
        with _block():
            return x / (x - x)

    with force_route(ROUTE), pytest.raises(ZeroDivisionError):
        derivative(divides)(0.5)


def test_a_user_rule_wins_over_the_declared_partials():
    def f(x):
        with _block():
            return math.sin(x) * 2.0

    with isolated_rules():
        defjvp(math.sin, lambda dx, out, /, x: 10.0 * dx)  # (deliberately not cos)
        for route in (ROUTE, REFERENCE):
            with force_route(route):
                assert derivative(f)(0.3) == 20.0
    with force_route(ROUTE):
        assert derivative(f)(0.3) == pytest.approx(2.0 * math.cos(0.3))


def test_under_an_enclosing_derivative_every_operation_is_seen():
    def inner(x, y):
        with _block():
            return x * y * math.exp(x * y)

    def outer(x):
        return derivative(lambda y: inner(x, y))(0.5)

    def expected(x):  # d/dx of x e^(xy) (1 + xy) at y = 0.5
        return math.exp(0.5 * x) * (1.0 + 1.5 * x + 0.25 * x * x)

    with force_route(ROUTE):
        for _ in range(2):
            assert derivative(outer)(1.2) == pytest.approx(expected(1.2), rel=1e-12)
