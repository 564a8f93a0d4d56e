"""hvp of scalar Python code: the tape route records the specialised code's arithmetic with its
second partials (``reverse._tape._Second``); every route must give ``jvp(grad(f))``'s numbers
(the reference) to rounding, and the finite differences of ``grad``, on first and repeated
calls, for every operator shape (``x ** y`` with a variable exponent, quotients, unary minus,
constants, a leaf used twice, the same name on both sides), loops, helpers, containers and
objects, at drawn points and directions."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overdub_ad import explain, grad, hvp, jvp
from overdub_ad.testing import FAST_ROUTES, REFERENCE, force_route
from tests.conftest import fd


def shapes(p):
    x, y, z = p
    return x ** y + x / y - -z * 2.0 + (x * x) / (y + 3.0) + x ** 3 + 2.0 ** z + (+x) \
        - y ** 0.5 + (1.0 + 2.0) * z / 4.0 - x * y * z


def same_name(p):
    x, y, z = p
    x = x * x + y
    x = x / (1.0 + x) - z ** 2
    y = y * y * y
    return x * y + z


class Point:
    def __init__(self, x: Any, y: Any) -> None:
        self.x, self.y = x, y

    def energy(self, z: Any) -> Any:
        return self.x * self.x + self.x / self.y - z * self.y ** 2


def leaf_twice(p):
    a = Point(p[0], p[1])  # a.x read twice: two leaves of one region, one node
    return a.x * a.x * p[2] + a.x / a.y + a.energy(p[2])


def _helper(u: Any, v: Any) -> Any:
    return u * v - u / v


def loops_and_helpers(p):
    x, y, z = p
    s = 0.0
    for k in range(4):
        s += _helper(x, y) * 0.1 + s * z * 0.01
        x = x + 0.05 * k * s
    n = 3
    return s + x ** n + (-y) ** 2


def containers(p):
    state = {"a": p[0], "b": [p[1], p[2]]}
    for _ in range(3):
        state["a"] = state["a"] * state["b"][0] * 0.5 + 0.1
        state["b"] = [state["b"][1] / 2.0, state["a"] - state["b"][0]]
    pair = (state["a"], state["b"][1])
    return sum(state["b"]) + pair[0] * pair[1]


def with_try(p):
    # a try statement: the compiler leaves it to the core, whose operations are recorded one
    # by one (their own second partials, from the context)
    x, y, z = p
    try:
        out = x * y / z + np.sin(x) * y ** z - (-x) ** 2
    except ZeroDivisionError:
        out = 0.0
    return out


def wide(p):
    # 30 leaves (each p[i] is one) in one expression: past what a record expands, each
    # operation recorded alone
    return (p[0] * p[1] + p[1] * p[2] + p[2] * p[0] + p[0] * p[0] + p[1] * p[1] + p[2] * p[2]
            + p[0] * p[1] * p[2] + p[0] / p[1] + p[1] / p[2] + p[2] / p[0] + p[0] ** p[1]
            + p[1] * p[0] * p[2] * p[1])


def math_calls(p):
    x, y, z = p
    return math.sin(x) * y + math.exp(z * y) / (1.0 + x * x)


def _user_activation(v: Any) -> Any:
    return v * v * 0.5 - v


def nested_math_calls(p):
    # calls of declared functions as vertices of their region (a call in a call's argument, a
    # name read twice through calls, NumPy's functions on floats, np.float64 constants), and
    # callees that change from turn to turn: a user's function, one without a declared second
    # derivative (math.sqrt, math.log: recorded by the context)
    x, y, z = p
    s = 0.0
    for k in range(4):
        g = (math.tanh, _user_activation, np.sin, math.sqrt)[k]
        s = s + x * math.exp(x * 0.5 - 0.1 * k) * g(y * z) + math.sin(math.cos(y) * z) \
            - np.float64(0.5) * np.tanh(x * y) * math.atan(z) + math.log(z + x) * s * 0.1
    return s + math.erf(x - y) * math.cosh(z) + abs(x - z - 3.0) * np.exp(np.float64(-0.25) * y)


def array_state(p):
    # a state array built from numbers each step (np.array, np.stack of items with tangents
    # and of constants) and updated by array arithmetic: their records' tangents are the items'
    s = np.array([1.0, p[2], 0.5])
    for _ in range(3):
        k = np.array([p[0] * (s[1] - s[0]), s[0] * (p[1] - s[2]) - s[1],
                      s[0] * s[1] - p[2] * s[2]])
        s = s + 0.05 * k + np.stack([s[2], p[0], 0.1]) * 0.01
    return np.sum(s * s) + s[0] * p[1]


FUNCTIONS = [shapes, same_name, leaf_twice, loops_and_helpers, containers, with_try, wide,
             math_calls, nested_math_calls, array_state]
points = st.tuples(*[st.floats(0.5, 2.0)] * 3)
directions = st.tuples(*[st.floats(-2.0, 2.0)] * 3)


def _reference(f: Any, p: Any, v: Any) -> np.ndarray:
    with force_route(REFERENCE):
        return np.asarray(jvp(grad(f), (p,), (v,))[1], dtype=float)


@pytest.mark.parametrize("f", FUNCTIONS, ids=lambda f: f.__name__)
@settings(max_examples=12, deadline=None)
@given(p=points, v=directions)
def test_every_route_gives_the_reference_and_the_finite_differences(f, p, v):
    want = _reference(f, p, v)
    pv, vv = np.array(p), np.array(v)
    slope = fd(lambda t: np.asarray(grad(f)(tuple(pv + t * vv)), dtype=float), 0.0, order=4)
    np.testing.assert_allclose(want, slope, rtol=1e-6, atol=1e-6)
    for route in (None, *FAST_ROUTES):
        with force_route(route):
            for call in ("first", "repeated"):
                got = np.asarray(hvp(f, p, v), dtype=float)
                np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12,
                                           err_msg=f"{f.__name__} on {route}, {call} call")


@pytest.mark.default_routes
@pytest.mark.parametrize("f", [shapes, same_name, leaf_twice, loops_and_helpers, containers,
                               math_calls, nested_math_calls, array_state],
                         ids=lambda f: f.__name__)
def test_the_tape_route_runs_the_specialised_code(f):
    report = explain(hvp, f, (1.1, 0.7, 1.3), (0.3, -1.0, 0.5))
    assert "hvp-tape" in report.ran and REFERENCE != report.ran[-1], str(report)
    assert not [d for d in report.decisions if not d[1]], str(report)
    np.testing.assert_allclose(report.result, _reference(f, (1.1, 0.7, 1.3), (0.3, -1.0, 0.5)),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("x, v", [(0.0, 1.0), (-1.5, 0.5), (2.0, -1.0)])
def test_powers_at_the_edges_of_their_partials(x, v):
    # x ** 2 and x ** 3 at 0, (-x) ** y with an integer-valued y, x ** 1 and x ** 0: points
    # where the shape's local derivatives stop (a == 0, a < 0) go to the rules, as the
    # reference does
    def f(p):
        a, y = p
        return a ** 2 * 3.0 + a ** 3 + (a * a) ** y + a ** 1 + a ** 0 + a ** 2.0 * y

    p, d = (x, 2.0), (v, 0.5)
    want = _reference(f, p, d)
    for call in ("first", "repeated"):
        np.testing.assert_allclose(np.asarray(hvp(f, p, d), dtype=float), want,
                                   rtol=1e-10, atol=1e-12, err_msg=call)


def test_a_quotient_by_zero_raises_as_the_function_does():
    def f(p):
        return p[0] / (p[1] - p[1]) + p[0]

    with pytest.raises(ZeroDivisionError):
        hvp(f, (1.0, 2.0), (1.0, 1.0))


def _at_edges(p, c):
    # the declared partials of math.sqrt and np.sqrt hand back None at 0 (here a plain 0), and
    # math.sqrt has no declared second derivative at all: the general path, as the reference
    x, y = p
    return y * np.sqrt(x * x + 1.0) + x * math.sqrt(c) * y + math.sqrt(y) * x + np.sqrt(c) * y


def test_points_where_a_declared_partial_gives_none_take_the_general_path():
    for point in ((0.0, 2.0), (1.5, 2.0)):
        want = _reference(lambda p: _at_edges(p, 0.0), point, (0.0, 1.0))
        for route in (None, *FAST_ROUTES):
            with force_route(route):
                for call in ("first", "repeated"):
                    got = np.asarray(hvp(lambda p: _at_edges(p, 0.0), point, (0.0, 1.0)),
                                     dtype=float)
                    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12,
                                               err_msg=f"{point} on {route}, {call} call")


def _exp_model(p):
    x, y = p
    return y * math.exp(x * y) + math.exp(y) * x


def test_a_user_rule_for_math_exp_registered_between_calls_wins_on_every_route():
    from overdub_ad import defjvp, defvjp
    from overdub_ad.testing import isolated_rules
    point, v = (0.4, 1.5), (0.3, -1.0)
    shipped = np.asarray(hvp(_exp_model, point, v), dtype=float)
    np.testing.assert_allclose(shipped, _reference(_exp_model, point, v), rtol=1e-12)
    with isolated_rules():
        # exp's derivative taken as 3 exp (a rule that is not exp's): every route must use it
        defvjp(math.exp, lambda ct, out, /, x: 3.0 * ct * out)
        defjvp(math.exp, lambda dx, out, /, x: 3.0 * dx * out)
        want = _reference(_exp_model, point, v)
        assert not np.allclose(want, shipped)
        for route in (None, *FAST_ROUTES):
            with force_route(route):
                for call in ("first", "repeated"):
                    np.testing.assert_allclose(np.asarray(hvp(_exp_model, point, v), dtype=float),
                                               want, rtol=1e-12, err_msg=f"{route}, {call}")
    np.testing.assert_allclose(np.asarray(hvp(_exp_model, point, v), dtype=float), shipped,
                               rtol=0, atol=0)


def _keywords_and_stars(p):
    x, y = p
    return np.exp(x * y, dtype=float) * y + math.exp(*(x,)) * y + np.tanh(x, out=None) * x


def test_calls_with_keywords_or_starred_arguments_run_as_before():
    point, v = (0.4, 1.5), (0.3, -1.0)
    want = _reference(_keywords_and_stars, point, v)
    slope = fd(lambda t: np.asarray(grad(_keywords_and_stars)(
        tuple(np.array(point) + t * np.array(v))), dtype=float), 0.0, order=4)
    np.testing.assert_allclose(want, slope, rtol=1e-6)
    for call in ("first", "repeated"):
        np.testing.assert_allclose(np.asarray(hvp(_keywords_and_stars, point, v), dtype=float),
                                   want, rtol=1e-12, err_msg=call)


def test_a_math_call_that_raises_raises_from_the_users_line():
    def f(p):
        return p[1] * math.log(p[0] - 2.0) + p[0]

    with pytest.raises(ValueError, match="math domain error") as info:
        hvp(f, (1.0, 2.0), (1.0, 0.0))
    assert [tb for tb in info.traceback if tb.name == "f"]
