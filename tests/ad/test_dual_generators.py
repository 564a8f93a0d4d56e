"""The dual route follows generators and ``contextlib.contextmanager`` blocks.

A generator function's dual yields ``(item, tangent)`` pairs, which a ``for`` loop of the dual
code reads; a ``with`` block on a ``contextmanager`` function's manager takes the first pair
its generator yields and runs the rest where the block ends.  Everything else done with such a
generator or manager (``next``, ``list``, ``type``, a return, a block that returns early, an
exception, a manager of another kind) stops the route, and the general mode computes the
result.  Each test compares the dual route, the default and the reference on first and
repeated calls, and the route that ran (explain)."""

from __future__ import annotations

import contextlib
import math
import types

import numpy as np
import pytest

from overdub_ad import derivative, explain, jacfwd, jvp
from overdub_ad.testing import REFERENCE, force_route

pytestmark = pytest.mark.every_route

ROUTES = pytest.mark.parametrize("route", [None, "forward-dual", REFERENCE],
                                 ids=["default", "forward-dual", "reference"])


def _fd(f, x, h=1e-6):
    return (f(x + h) - f(x - h)) / (2 * h)


def _check(f, x, route, dual_runs):
    want = _fd(f, x)
    with force_route(route):
        for _ in range(3):
            value, tangent = jvp(f, (x,), (1.0,))
            assert value == f(x)
            assert tangent == pytest.approx(want, rel=1e-6, abs=1e-9)
            assert derivative(f)(x) == pytest.approx(want, rel=1e-6, abs=1e-9)
            assert np.ravel(jacfwd(lambda p: f(p[0]))(np.array([x])))[0] == pytest.approx(
                want, rel=1e-6, abs=1e-9)
    report = str(explain(derivative, f, x))
    assert ("forward-dual: ran (" + f.__name__ + ")" in report) is dual_runs, report


# -- generators ---------------------------------------------------------------------------------

def _powers(x, n):
    y = 1.0
    for _ in range(n):
        y = y * x
        yield y


def generator_sum(x):
    total = 0.0
    for y in _powers(x, 4):
        total += math.sin(y)
    return total


def generator_break(x):
    for y in _powers(x, 10):
        if y > 2.0:
            break
    return y


def _nested_generators(x):
    for y in _powers(x, 3):
        yield y, y * x


def generator_of_tuples(x):
    total = 0.0
    for a, b in _nested_generators(x):
        total = total + a * b
    return total


def _closing(x):
    def gen():
        yield x * x
        yield math.exp(x)
        return
    return gen


def generator_closure(x):
    return _summed(_closing(x)())


def _summed(gen):
    total = 0.0
    for v in gen:
        total += v
    return total


def _empty(x):
    if x > 100.0:
        yield x


def generator_empty(x):
    for y in _empty(x):
        return y
    return x * 2.0


@ROUTES
@pytest.mark.parametrize("f", [generator_sum, generator_break, generator_of_tuples,
                               generator_closure, generator_empty], ids=lambda f: f.__name__)
def test_generators(route, f):
    _check(f, 1.3, route, dual_runs=True)


def generator_next(x):
    gen = _powers(x, 3)
    return next(gen) + next(gen)


def generator_list(x):
    return sum(list(_powers(x, 3)))


def generator_type(x):
    gen = _powers(x, 2)
    return x * 2.0 if isinstance(gen, types.GeneratorType) else x


def _tries(x):
    try:
        yield x * x
    finally:
        pass


def generator_with_try(x):
    total = 0.0
    for y in _tries(x):
        total += y
    return total


def _given_back(x):
    return _powers(x, 2)


def generator_returned(x):
    total = 0.0
    for y in _given_back(x):
        total += y
    return total


@ROUTES
@pytest.mark.parametrize("f", [generator_next, generator_list, generator_type,
                               generator_with_try], ids=lambda f: f.__name__)
def test_what_stops_on_generators(route, f):
    _check(f, 1.3, route, dual_runs=False)


@ROUTES
def test_a_generator_returned_by_a_helper(route):
    _check(generator_returned, 1.3, route, dual_runs=True)


@ROUTES
def test_a_generator_does_not_leave_the_route(route):
    with force_route(route):
        with pytest.raises(TypeError, match="got a value of type generator"):
            jvp(lambda x: (x * 2.0, _powers(x, 2)), (1.5,), (1.0,))


def test_a_generator_of_an_enclosing_derivative():
    def outer(x):
        gen = _powers(x, 3)  # (made at the outer level, read by the inner derivative)

        def inner(y):
            total = 0.0
            for v in gen:
                total += v * y
            return total
        return jvp(inner, (2.0,), (1.0,))[1]
    want = 1.0 + 2 * 1.3 + 3 * 1.3 ** 2  # (d/dx of x + x^2 + x^3)
    for route in (None, "forward-dual", REFERENCE):
        with force_route(route):
            for _ in range(2):
                assert derivative(outer)(1.3) == pytest.approx(want)
    assert "forward-dual: ran (test_a_generator_of_an_enclosing_derivative.<locals>.outer)" \
        in str(explain(derivative, outer, 1.3))


# -- with blocks ---------------------------------------------------------------------------------

@contextlib.contextmanager
def _scaled(x):
    yield x * 3.0


@contextlib.contextmanager
def _pair(x):
    yield x, math.cos(x)


@contextlib.contextmanager
def _plain():
    yield


def with_value(x):
    with _scaled(x) as s:
        y = s * s
    return y + x


def with_tuple_target(x):
    with _pair(x) as (a, b), _plain():
        total = a * b
    return total


def with_loop_inside(x):
    total = 0.0
    with _plain():
        for k in range(3):
            if k == 1:
                continue
            total += x ** k
    return total


@ROUTES
@pytest.mark.parametrize("f", [with_value, with_tuple_target, with_loop_inside],
                         ids=lambda f: f.__name__)
def test_with_blocks(route, f):
    _check(f, 0.7, route, dual_runs=True)


def with_return_inside(x):
    with _scaled(x) as s:
        return s * x


def with_errstate(x):
    with np.errstate(divide="ignore"):
        return x / 2.0


class _Manager:
    def __enter__(self):
        return 2.0

    def __exit__(self, *exc):
        return False


def with_user_class(x):
    with _Manager() as m:
        y = m * x
    return y


_CLEANUPS: list[int] = []


@contextlib.contextmanager
def _cleaning(x):
    yield x
    _CLEANUPS.append(1)  # (an effect after the yield: the route stops before it)


def with_effect_after(x):
    with _cleaning(x) as y:
        z = y * y
    return z


@contextlib.contextmanager
def _twice(x):
    yield x
    yield x


def with_yielding_twice(x):
    with _twice(x) as y:
        z = y * 2.0
    return z


@ROUTES
@pytest.mark.parametrize("f", [with_return_inside, with_errstate, with_user_class,
                               with_effect_after], ids=lambda f: f.__name__)
def test_what_stops_on_with_blocks(route, f):
    _CLEANUPS.clear()
    _check(f, 0.7, route, dual_runs=False)
    if f is with_effect_after:  # (finite differences 2, three rounds of 4, explain 1)
        assert len(_CLEANUPS) == 15


@ROUTES
def test_a_manager_whose_generator_yields_twice(route):
    with force_route(route):
        for _ in range(2):
            with pytest.raises(RuntimeError, match="generator didn't stop"):
                derivative(with_yielding_twice)(0.7)


def _raising(x):
    with _scaled(x) as s:
        if s > 1.0:
            raise ValueError("too large")
        y = s * x
    return y


@ROUTES
def test_an_exception_inside_a_with_block(route):
    with force_route(route):
        for _ in range(2):
            assert derivative(_raising)(0.2) == pytest.approx(6 * 0.2)
            with pytest.raises(ValueError, match="too large"):
                derivative(_raising)(0.5)
