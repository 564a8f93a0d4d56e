"""Lazy values made inside an inner derivative and resumed after it returned, as found by testing
from outside (session 12): a generator, a generator expression, a lazy ``map`` or
``itertools.accumulate`` made in the inner run and advanced in the outer one, or a generator
returned as ``has_aux`` from an inner ``grad``.  Their code was rewritten for the inner
context; once its run ended they computed natively on the outer derivative's values, whose
dunders drop the tangent (0.0 or half the derivative, silently).  Now what they execute
reaches the context running at resumption (the outer derivative); a value of the finished
inner derivative itself raises TagError there, never a wrong number.  Also the re-entry of an
array-backend context inside a derivative inside the same context (a RecursionError once the
context had run inside a derivative before)."""

import contextlib
import itertools
import math

import numpy as np
import pytest

from overdub import TagError, overdub
from overdub_ad import D, derivative, grad
from overdub_ad.testing import REFERENCE, force_route
from tests.conftest import fd

INNER = {"derivative": lambda f: derivative(f, 1.0), "grad": lambda f: grad(f)(1.0)}
OUTER = [pytest.param(D, id="outer_D"), pytest.param(grad, id="outer_grad")]


def generator_made_inside(inner_api):
    def outer(x):
        held = []

        def inner(y):
            def gen():
                yield y
                yield x * x  # the outer variable only
            held.append(gen())
            return next(held[0]) * y
        INNER[inner_api](inner)
        return next(held[0]) * x  # x ** 3
    return outer


def generator_expression_made_inside(inner_api):
    def outer(x):
        held = []

        def inner(y):
            held.append(x * k for k in (1.0, 2.0))
            return y * y
        INNER[inner_api](inner)
        return next(held[0]) * x  # x ** 2
    return outer


def map_made_inside(inner_api):
    def outer(x):
        held = []

        def inner(y):
            held.append(map(lambda k: k * x, [1.0, 2.0]))
            return next(held[0]) * y
        INNER[inner_api](inner)
        return next(held[0]) * x  # 2 x ** 2
    return outer


def accumulate_made_inside(inner_api):
    def outer(x):
        held = []

        def inner(y):
            held.append(itertools.accumulate([x, x * x]))
            return next(held[0]) * y
        INNER[inner_api](inner)
        return next(held[0]) * math.sin(x)  # (x + x ** 2) sin x
    return outer


def generator_returned_as_aux(inner_api):
    def outer(x):
        def inner(y):
            def gen():
                yield x * x
            return y * y, gen()
        if inner_api == "grad":
            _, gen = grad(inner, has_aux=True)(1.0)
        else:
            gen = inner(1.0)[1]  # (derivative has no has_aux: the generator made in no run)
        return next(gen) * x  # x ** 3
    return outer


CASES = [generator_made_inside, generator_expression_made_inside, map_made_inside,
         accumulate_made_inside, generator_returned_as_aux]
PLAIN = {generator_made_inside: lambda x: x ** 3,
         generator_expression_made_inside: lambda x: x ** 2,
         map_made_inside: lambda x: 2 * x ** 2,
         accumulate_made_inside: lambda x: (x + x * x) * math.sin(x),
         generator_returned_as_aux: lambda x: x ** 3}


@pytest.mark.parametrize("outer_api", OUTER)
@pytest.mark.parametrize("inner_api", list(INNER))
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_resumed_after_the_inner_derivative_carries_the_outer_one(case, inner_api, outer_api):
    f = case(inner_api)
    x = 1.3
    assert f(x) == pytest.approx(PLAIN[case](x))  # (plain Python: what the derivative is of)
    want = fd(PLAIN[case], x)
    for _ in range(3):  # first and repeated calls
        assert outer_api(f)(x) == pytest.approx(want, rel=1e-6)


def test_the_outer_derivative_of_a_generator_advanced_inside_and_after_the_inner_one():
    """Half the values in the inner run, half after it: each from the run it is taken in."""
    def outer(x):
        held = []

        def inner(y):
            held.append(x * k for k in (1.0, 2.0, 3.0))
            return next(held[0]) * y  # x, at the inner run
        first = derivative(inner, 1.0)
        return first * next(held[0]) + next(held[0])  # x * 2x + 3x
    for api in (D, grad):
        for _ in range(2):
            assert api(outer)(0.7) == pytest.approx(4 * 0.7 + 3.0)


@pytest.mark.parametrize("inner_api", list(INNER))
@pytest.mark.parametrize("outer_api", OUTER)
def test_a_value_of_the_finished_inner_derivative_raises(inner_api, outer_api):
    """A generator resumed after its inner derivative returned, computing with that derivative's
    own variable: the inner derivative is over, so its value cannot carry meaning (JAX: an
    escaped tracer); a TagError naming the context, never a number."""
    def outer(x):
        held = []

        def inner(y):
            def gen():
                yield x * y
            held.append(gen())
            return y * y
        INNER[inner_api](inner)
        return next(held[0]) * x
    for _ in range(2):
        with pytest.raises(TagError, match="outside that context|after it returned"):
            outer_api(outer)(3.0)


def test_a_generator_consumed_in_its_own_run_is_unchanged():
    """The common case: made and consumed inside one inner derivative, nested in another."""
    def outer(x):
        def inner(y):
            return sum(v * y for v in (x * k for k in (1.0, 2.0)))  # 3 x y
        return derivative(inner, 2.0) * x  # 3 x ** 2
    for api in (D, grad):
        assert api(outer)(1.5) == pytest.approx(9.0)


# -- an array-backend context re-entered inside a derivative inside the same context ---------

ENERGY = lambda u: np.sum(np.sin(u) ** 2)  # noqa: E731


def test_array_backend_context_re_entered_inside_a_derivative_inside_it():
    ctx = pytest.importorskip("overdub_gpu").ArrayBackendContext(np)
    x = np.array([0.3, -1.2])
    want = 2 * np.sin(x) * np.cos(x)
    # Running inside a derivative first widened for good what ctx intercepts, and the
    # same-instance nesting below then sent each attribute read between ctx and the
    # derivative forever (a RecursionError); on its own it worked once, then looped.
    np.testing.assert_allclose(grad(lambda v: overdub(ctx, ENERGY, v))(x), want)
    for _ in range(3):
        got = overdub(ctx, grad(lambda v: overdub(ctx, ENERGY, v)), x)
        np.testing.assert_allclose(got, want, rtol=1e-12)
        np.testing.assert_allclose(np.asarray(got), fd(ENERGY, x), rtol=1e-6)


def test_other_namespace_re_entered_inside_a_derivative_inside_it_names_the_nesting():
    gpu = pytest.importorskip("overdub_gpu")
    xp = pytest.importorskip("array_api_strict")
    ctx = gpu.ArrayBackendContext(xp)
    x = gpu.to_device(ctx, np.array([0.3, -1.2]))
    with pytest.raises(gpu.EnclosingTagError):
        grad(lambda v: overdub(ctx, ENERGY, v))(x)
    for _ in range(2):  # (a RecursionError before)
        with pytest.raises(gpu.EnclosingTagError):
            overdub(ctx, grad(lambda v: overdub(ctx, ENERGY, v)), x)


@pytest.mark.parametrize("route", [None, REFERENCE], ids=["default", "reference"])
@pytest.mark.parametrize("outer", ["grad", "derivative"])
def test_a_finished_reverse_derivative_s_own_value_computed_with_later_raises(outer, route):
    # a generator made inside grad(inner) yields x * y, y the inner derivative's own variable,
    # resumed after grad(inner) returned: the product would be recorded on a tape nobody
    # sweeps (an outer grad of it: a silent 0.0 before)
    def f(x):
        held = []

        def inner(y):
            def gen():
                yield x * y
            held.append(gen())
            return y * y
        grad(inner)(1.0)
        return next(held[0])

    api = (lambda: grad(f)(3.0)) if outer == "grad" else (lambda: derivative(f, 3.0))
    with force_route(route) if route else contextlib.nullcontext():
        with pytest.raises(TagError, match="after it returned"):
            api()
