"""Infinite partial derivatives and exactly-zero tangents (docs/limitations.md, "Infinite
partial derivatives"; docs/ad.md, "Non-smooth points").

Forward mode on numbers leaves out a term ``partial * tangent`` whose tangent is exactly zero,
and calls no rule for a value without tangent (a constant), however it travelled: so
``np.sqrt(c) + y`` at ``c == 0`` has derivative 1 in ``y`` on every route, where the product
would be ``0 * inf = nan``.  Selections (``max``, ``np.maximum``, ``np.clip``...) send a
(co)tangent to the candidate they pick only: exactly 0 to the others, whatever it is.  NumPy's
functions given Python floats compute their derivatives as NumPy computes (``np.log'(0)`` is
``inf``, not a ``ZeroDivisionError``).  Each case runs every API on the default route and on
each route forced, twice (a first call and a repeated one), against closed forms at the point
and finite differences where the function is smooth around it.
"""

import functools
import math
from collections import namedtuple

import numpy as np
import pytest

from overdub_ad import derivative, grad, hessian, hvp, jacfwd, jacrev, jvp
from overdub_ad.testing import force_route, ROUTES
from tests.conftest import fd
from tests.conftest import same as _same

# the default choice, then every route forced (a fast route forced serves its own APIs and
# leaves the others to the reference)
CHOICES = (None, *ROUTES)
# for the largest grid (every singular function, every way a constant travels): the default
# choice against the reference (the other grids force each route)
DEFAULT_AND_REFERENCE = (None, "reference")


pytestmark = pytest.mark.usefixtures("quiet_singular_points")
# (an API answers one number for a constant array: it stands for the array)
same = functools.partial(_same, scalar_for_any_shape=True)


def twice(route, compute, want, what=""):
    """``compute()`` on ``route``, a first call and a repeated one, is ``want``."""
    with force_route(route):
        for call in ("first call", "repeated call"):
            same(compute(), want, f"{what} ({call})")


# -- a constant at a point where the function's slope is infinite ------------------------------

# (function, point, its value there): each has an infinite (or undefined) derivative there
SINGULAR = {
    "np.sqrt@0": (np.sqrt, 0.0),
    "math.sqrt@0": (math.sqrt, 0.0),  # its rule, 0.5 / out, would raise ZeroDivisionError
    "math.acos@1": (math.acos, 1.0),
    "math.asin@-1": (math.asin, -1.0),
    "math.asin@1": (math.asin, 1.0),
    "np.arccos@1": (np.arccos, 1.0),
    "np.arcsin@-1": (np.arcsin, -1.0),
    "np.log@0": (np.log, 0.0),  # (-inf: the value is infinite too)
    "np.log2@0": (np.log2, 0.0),
    "np.log10@0": (np.log10, 0.0),
    "np.arctanh@1": (np.arctanh, 1.0),
    "np.cbrt@0": (np.cbrt, 0.0),
    "**0.5@0": (lambda a: a ** 0.5, 0.0),
    "np.power(.,0.5)@0": (lambda a: np.power(a, 0.5), 0.0),
    "math.pow(.,0.5)@0": (lambda a: math.pow(a, 0.5), 0.0),
    "pow(.,0.3)@0": (lambda a: pow(a, 0.3), 0.0),
}


class Holder:
    def __init__(self, a):
        self.a = a


Pair = namedtuple("Pair", "a b")


def travelled(way, g, c):
    """``y -> g(c) + y`` with the constant ``c`` reaching ``g`` in the way ``way``."""
    if way == "closure":
        return lambda y: g(c) + y
    if way == "local":
        def local(y):
            a = c
            return g(a) + y
        return local
    if way == "if-expression":  # (y == 1: the constant branch)
        return lambda y: g(y - 5.0 if y > 5.0 else c) + y
    if way == "helper":
        def helper(a, b):
            return b + g(a)
        return lambda y: helper(c, y)
    if way == "lambda-helper":
        return lambda y: (lambda a, b: b + g(a))(c, y)
    if way == "attribute":
        return lambda y: g(Holder(c).a) + y
    if way == "list":
        return lambda y: g([c, y][0]) + y
    if way == "dict":
        return lambda y: g({"a": c, "b": y}["a"]) + y
    if way == "tuple":
        return lambda y: g((c, y)[0]) + y
    if way == "named-tuple":
        return lambda y: g(Pair(c, y).a) + y
    if way == "default":
        def default(y, a=c):
            return g(a) + y
        return default
    if way == "max":  # (y - 10 < c: max picks the constant)
        return lambda y: g(max(c, y - 10.0)) + y
    if way == "min":
        return lambda y: g(min(y + 10.0, c)) + y
    if way == "max-of-list":
        return lambda y: g(max([y - 10.0, c])) + y
    if way == "np.maximum":
        return lambda y: g(float(np.maximum(c, y - 10.0))) + y
    if way == "np.clip":
        return lambda y: g(float(np.clip(y - 10.0, c, None))) + y
    raise AssertionError(way)


WAYS = ("closure", "local", "if-expression", "helper", "lambda-helper", "attribute", "list",
        "dict", "tuple", "named-tuple", "default", "max", "min", "max-of-list", "np.maximum",
        "np.clip")


SELECTING = ("max", "min", "max-of-list", "np.maximum", "np.clip")
REVERSE_APIS = ("grad", "jacrev", "hessian", "hvp", "derivative(grad)")


def first_derivatives(f, y):
    """Every API's derivative of the scalar function ``f`` at ``y``."""
    return {"derivative": lambda: derivative(f, y),
            "jvp": lambda: jvp(f, (y,), (1.0,))[1],
            "jacfwd": lambda: jacfwd(f)(y),
            "grad": lambda: grad(f)(y),
            "jacrev": lambda: jacrev(f)(y)}


def second_derivatives(f, y):
    return {"hessian": lambda: hessian(f)(y),
            "hvp": lambda: hvp(f, y, 1.0),
            "derivative(derivative)": lambda: derivative(derivative(f))(y),
            "derivative(grad)": lambda: derivative(grad(f), y)}


@pytest.mark.every_route
@pytest.mark.parametrize("route", DEFAULT_AND_REFERENCE)
@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("name", list(SINGULAR))
def test_a_constant_at_an_infinite_slope_gets_no_rule(name, way, route):
    g, c = SINGULAR[name]
    f = travelled(way, g, c)
    # Reverse mode records what a selection returns, the constant it picked too, and calls
    # the rule of the function it is given to: math's rules raise at their singular points
    # (docs/limitations.md); NumPy's give inf, which the selection sends to no candidate.
    forward_only = way in SELECTING and name.startswith("math.") and name != "math.pow(.,0.5)@0"
    for api, compute in first_derivatives(f, 1.0).items():
        if not (forward_only and api in REVERSE_APIS):
            twice(route, compute, 1.0, api)
    for api, compute in second_derivatives(f, 1.0).items():
        if not (forward_only and api in REVERSE_APIS):
            twice(route, compute, 0.0, api)
    if forward_only:
        with force_route(route), pytest.raises(ZeroDivisionError):
            grad(f)(1.0)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("name", ["np.sqrt@0", "math.acos@1", "np.arcsin@-1", "**0.5@0"])
def test_a_travelled_constant_against_finite_differences(name, way):
    g, c = SINGULAR[name]
    f = travelled(way, g, c)
    assert math.isclose(fd(f, 1.0), 1.0, rel_tol=1e-8)
    assert math.isclose(fd(lambda y: derivative(f, y), 1.0), 0.0, abs_tol=1e-6)


def test_the_cases_found_outside():
    cases = [
        (lambda: derivative(lambda y: np.sqrt(y - 2.0 if y > 2.0 else 0.0) + y, 1.0), 1.0),
        (lambda: jacfwd(lambda x, y: np.sqrt(x) + y, argnums=1)(0.0, 1.0), 1.0),
        (lambda: jacfwd(lambda x, y: math.pow(x, y))(-1.5, 2.0), -3.0),
        (lambda: jacfwd(lambda x, y: np.power(x, y))(-1.5, 2.0), -3.0),
        (lambda: jacfwd(lambda x, y: x ** y)(-1.5, 2.0), -3.0),
        (lambda: derivative(lambda y: (lambda a, b: b + math.acos(a))(1.0, y), 1.0), 1.0),
        (lambda: derivative(lambda y: np.sqrt(Holder(0.0).a) + y, 1.0), 1.0),
        (lambda: derivative(lambda y: np.sqrt([0.0, y][0]) + y, 1.0), 1.0),
        (lambda: derivative(lambda y: np.sqrt({"a": 0.0}["a"]) + y, 1.0), 1.0),
        (lambda: jvp(lambda x, y: x ** y, (-1.5, 2.0), (1.0, 0.0))[1], -3.0),
        (lambda: jvp(lambda x, y: x ** 0.5 * y, (0.0, 1.0), (0.0, 1.0))[1], 0.0),
        (lambda: jvp(lambda x, y: (-2.0) ** y * x, (1.5, 2.0), (1.0, 0.0))[1], 4.0),
        (lambda: jvp(lambda x, y: math.pow(x, y), (-1.5, 2.0), (1.0, 0.0))[1], -3.0),
        (lambda: derivative(lambda y: np.sqrt(max(0.0, y - 2.0)) + y, 1.0), 1.0),
        (lambda: grad(lambda y: np.sqrt(max(0.0, y - 2.0)) + y)(1.0), 1.0),
        (lambda: derivative(lambda y: np.sqrt(np.maximum(0.0, y - 2.0)) + y, 1.0), 1.0),
        (lambda: grad(lambda y: np.sqrt(np.maximum(0.0, y - 2.0)) + y)(1.0), 1.0),
        (lambda: derivative(lambda y: max(0.0, y - 2.0) ** 0.5 + y, 1.0), 1.0),
        (lambda: grad(lambda y: max(0.0, y - 2.0) ** 0.5 + y)(1.0), 1.0),
        (lambda: derivative(np.log, 0.0), math.inf),
        (lambda: grad(np.log)(0.0), math.inf),
    ]
    for route in CHOICES:
        for i, (compute, want) in enumerate(cases):
            twice(route, compute, want, f"case {i}")


def helper_of_two(a, b):
    return b + np.sqrt(a)


def test_a_constant_through_a_module_level_helper():
    for route in CHOICES:
        for compute in first_derivatives(lambda y: helper_of_two(0.0, y), 1.0).values():
            twice(route, compute, 1.0)


# -- tangents given as zero ---------------------------------------------------------------------

POWERS = {"**": lambda x, y: x ** y, "pow": pow, "math.pow": math.pow, "np.power": np.power}


@pytest.mark.every_route
@pytest.mark.parametrize("route", CHOICES)
@pytest.mark.parametrize("power", list(POWERS))
def test_a_zero_tangent_is_exactly_zero(power, route):
    p = POWERS[power]
    # a negative base: d/dy has no real value, d/dx = y x^(y-1)
    twice(route, lambda: jvp(p, (-1.5, 2.0), (1.0, 0.0))[1], -3.0)
    twice(route, lambda: jvp(p, (-1.5, 2.0), (0.0, 1.0))[1], math.nan)
    twice(route, lambda: jacfwd(p)(-1.5, 2.0), -3.0)
    twice(route, lambda: jacfwd(p, argnums=(0, 1))(-1.5, 2.0), (-3.0, math.nan))
    twice(route, lambda: grad(p)(-1.5, 2.0), -3.0)
    # a zero base with an exponent below 1: d/dx infinite, d/dy 0 (the documented choice)
    twice(route, lambda: jvp(p, (0.0, 0.5), (0.0, 1.0))[1], 0.0)
    twice(route, lambda: jvp(p, (0.0, 0.5), (1.0, 0.0))[1], math.inf)
    twice(route, lambda: jvp(lambda x, y: p(x, 0.5) * y, (0.0, 1.0), (0.0, 1.0))[1], 0.0)
    # a constant base: 0 ** y has derivative 0 in y, (-2) ** y none in the reals
    twice(route, lambda: derivative(lambda y: p(0.0, y), 2.0), 0.0)
    twice(route, lambda: jvp(lambda x, y: p(-2.0, y) * x, (1.5, 2.0), (1.0, 0.0))[1], 4.0)


@pytest.mark.every_route
@pytest.mark.parametrize("route", CHOICES)
@pytest.mark.parametrize("name", list(SINGULAR))
def test_a_zero_tangent_at_an_infinite_slope(name, route):
    g, c = SINGULAR[name]

    def f(x, y):
        return g(x) + y
    twice(route, lambda: jvp(f, (c, 1.0), (0.0, 1.0))[1], 1.0)
    twice(route, lambda: jvp(f, (c, 1.0), (None, 1.0))[1], 1.0)
    twice(route, lambda: jacfwd(f, argnums=1)(c, 1.0), 1.0)
    twice(route, lambda: grad(f, argnums=1)(c, 1.0), 1.0)
    twice(route, lambda: jacrev(f, argnums=1)(c, 1.0), 1.0)


@pytest.mark.every_route
@pytest.mark.parametrize("route", CHOICES)
def test_a_difference_that_cancels_has_a_zero_tangent_in_forward_mode(route):
    # x - x has the tangent 1 - 1 == 0 exactly: forward mode leaves its term out; reverse
    # mode sends inf to both operands, whose sum is inf - inf = nan (docs/limitations.md)
    def f(v):
        return (v[0] - v[0]) ** 0.5 + v[1]
    twice(route, lambda: jacfwd(lambda x, y: (x - x) ** 0.5 + y, argnums=(0, 1))(0.3, 1.0),
          (0.0, 1.0))
    twice(route, lambda: jvp(f, ((0.3, 1.0),), ((1.0, 1.0),))[1], 1.0)
    twice(route, lambda: derivative(lambda y: np.sqrt(y - y) + y, 1.0), 1.0)
    twice(route, lambda: grad(lambda y: np.sqrt(y - y) + y)(1.0), math.nan)


def test_arrays_keep_ieee_arithmetic():
    # a batch of directions is an array: its zero direction times inf is nan, as in JAX (the
    # leaves of a tuple argument too, whose directions jacfwd pushes together)
    for route in CHOICES:
        twice(route, lambda: jacfwd(lambda a: np.sqrt(a[0]) + a[1])(np.array([0.0, 1.0])),
              np.array([math.inf, math.nan]))
        twice(route, lambda: jacfwd(lambda v: (v[0] - v[0]) ** 0.5 + v[1])((0.3, 1.0)),
              (math.nan, math.nan))


# -- selections ----------------------------------------------------------------------------------

# y -> the selection, at y == 1 where it picks the constant 0 (or, for the last ones, where the
# candidate it does not pick has an infinite slope)
SELECTIONS = {
    "max": lambda y: max(0.0, y - 2.0),
    "max-reversed": lambda y: max(y - 2.0, 0.0),
    "min": lambda y: -min(0.0, 2.0 - y),
    "max-of-list": lambda y: max([0.0, y - 2.0]),
    "max-of-tuple": lambda y: max((y - 2.0, 0.0)),
    "np.maximum": lambda y: np.maximum(0.0, y - 2.0),
    "np.minimum": lambda y: -np.minimum(0.0, 2.0 - y),
    "np.fmax": lambda y: np.fmax(y - 2.0, 0.0),
    "np.fmin": lambda y: -np.fmin(2.0 - y, 0.0),
    "np.clip-lower": lambda y: np.clip(y - 2.0, 0.0, None),
    "np.clip-both": lambda y: np.clip(y - 2.0, 0.0, 5.0),
    "np.clip-upper": lambda y: -np.clip(2.0 - y, None, 0.0),
}


@pytest.mark.every_route
@pytest.mark.parametrize("route", CHOICES)
@pytest.mark.parametrize("outer", ["np.sqrt", "**0.5", "np.arcsin"])
@pytest.mark.parametrize("name", list(SELECTIONS))
def test_a_selection_of_a_constant_sends_nothing_on(name, outer, route):
    s = SELECTIONS[name]
    g = {"np.sqrt": np.sqrt, "**0.5": lambda a: a ** 0.5,
         "np.arcsin": lambda a: np.arcsin(1.0 - a)}[outer]

    def f(y):
        return g(s(y)) + y
    for api, compute in first_derivatives(f, 1.0).items():
        twice(route, compute, 1.0, api)
    for api, compute in second_derivatives(f, 1.0).items():
        twice(route, compute, 0.0, api)
    assert math.isclose(fd(f, 1.0), 1.0, rel_tol=1e-8)


@pytest.mark.every_route
@pytest.mark.parametrize("route", CHOICES)
def test_a_selection_leaves_out_the_tangent_of_what_it_does_not_pick(route):
    # sqrt(y - 1) at y == 1 has an infinite tangent; max picks the constant 0.5
    def f(y):
        return max(np.sqrt(y - 1.0), 0.5) + y

    def g(y):
        return np.maximum(0.5, np.sqrt(y - 1.0)) + y
    for h in (f, g):
        twice(route, lambda: derivative(h, 1.0), 1.0)
        twice(route, lambda: jvp(h, (1.0,), (1.0,))[1], 1.0)


@pytest.mark.every_route
@pytest.mark.parametrize("route", CHOICES)
def test_a_reduction_sends_an_infinite_cotangent_to_its_maximum_only(route):
    def f(a):
        return np.sqrt(np.max(a)) + np.sum(a)
    twice(route, lambda: grad(f)(np.array([0.0, -1.0, -2.0])), np.array([math.inf, 1.0, 1.0]))
    twice(route, lambda: grad(lambda a: np.sqrt(np.ptp(a)) + np.sum(a))(np.array([1.0, 1.0])),
          np.array([1.0, 1.0]))
    # elementwise selections of arrays: the candidate not picked gets 0, not 0 * inf
    for pick in (lambda a: np.maximum(0.0, a - 2.0), lambda a: np.clip(a - 2.0, 0.0, None),
                 lambda a: -np.minimum(0.0, 2.0 - a)):
        twice(route, lambda: grad(lambda a: np.sum(np.sqrt(pick(a))) + np.sum(a))(
            np.array([1.0, 3.0])), np.array([1.0, 1.5]))


def test_a_selection_of_a_differentiated_value_at_its_kink_keeps_the_convention():
    # at the kink itself the conventions of docs/ad.md hold: a tie with a constant is the
    # constant's zero derivative, in both modes
    for route in CHOICES:
        twice(route, lambda: derivative(lambda x: np.sqrt(max(x, 0.0)), 0.0), 0.0)
        twice(route, lambda: grad(lambda x: np.sqrt(max(x, 0.0)))(0.0), 0.0)
        twice(route, lambda: grad(lambda x: np.sqrt(np.maximum(x, 0.0)))(0.0), 0.0)
        # away from it the selected candidate's infinite slope is kept
        twice(route, lambda: derivative(lambda x: np.sqrt(max(x - 1.0, 0.0)), 1.0), 0.0)
        twice(route, lambda: grad(lambda x: max(np.sqrt(x), -1.0))(0.0), math.inf)
        twice(route, lambda: derivative(lambda x: max(np.sqrt(x), -1.0), 0.0), math.inf)


# -- NumPy's functions compute their derivatives as NumPy computes ---------------------------------

# (function, point, first derivative, second derivative there; None: not checked)
NUMPY_SINGULAR = {
    "log": (np.log, 0.0, math.inf, -math.inf),
    "log2": (np.log2, 0.0, math.inf, -math.inf),
    "log10": (np.log10, 0.0, math.inf, -math.inf),
    "log1p": (np.log1p, -1.0, math.inf, -math.inf),
    "arctanh": (np.arctanh, 1.0, math.inf, math.inf),
    "reciprocal": (np.reciprocal, 0.0, -math.inf, math.inf),
    "sqrt": (np.sqrt, 0.0, math.inf, -math.inf),
    "cbrt": (np.cbrt, 0.0, math.inf, None),
    "arcsin": (np.arcsin, 1.0, math.inf, math.inf),
    "arccos": (np.arccos, 1.0, -math.inf, -math.inf),
    "1/x": (lambda x: np.divide(1.0, x), 0.0, -math.inf, math.inf),
    "power": (lambda x: np.power(x, 0.5), 0.0, math.inf, -math.inf),
}


@pytest.mark.every_route
@pytest.mark.parametrize("route", CHOICES)
@pytest.mark.parametrize("name", list(NUMPY_SINGULAR))
def test_numpy_on_a_python_float_differentiates_as_numpy_computes(name, route):
    f, x, d1, d2 = NUMPY_SINGULAR[name]
    for api, compute in first_derivatives(f, x).items():
        twice(route, compute, d1, api)
    if d2 is not None:
        for api, compute in second_derivatives(f, x).items():
            twice(route, compute, d2, api)
    # and as the same function on a NumPy float does
    with force_route(route):
        same(derivative(f, x), derivative(f, np.float64(x)))
        same(grad(f)(x), grad(f)(np.float64(x)))


def test_math_keeps_pythons_arithmetic():
    with pytest.raises(ValueError):
        derivative(math.log, 0.0)  # math.log(0.0) itself raises
    with pytest.raises(ZeroDivisionError):
        derivative(math.sqrt, 0.0)  # as documented: 0.5 / math.sqrt(0.0)


# -- second derivatives of a power at a negative base ----------------------------------------------

@pytest.mark.every_route
@pytest.mark.parametrize("route", CHOICES)
@pytest.mark.parametrize("power", list(POWERS))
def test_second_derivatives_of_a_power_are_nan_only_where_undefined(power, route):
    p = POWERS[power]

    def f(v):
        return p(v[0], v[1])
    # at a negative base H_xx = y (y-1) x^(y-2) = 2; H_xy and H_yy have no real value
    twice(route, lambda: hvp(f, (-1.5, 2.0), (1.0, 0.0)), (2.0, math.nan))
    twice(route, lambda: hvp(f, (-1.5, 2.0), (0.0, 1.0)), (math.nan, math.nan))
    twice(route, lambda: hessian(p, argnums=(0, 1))(-1.5, 2.0),
          ((2.0, math.nan), (math.nan, math.nan)))
    # at a positive base, all of it (closed forms, and finite differences of the gradient)
    x, y = 1.5, 2.0
    hxy = x ** (y - 1) * (1.0 + y * math.log(x))
    want = ((y * (y - 1) * x ** (y - 2), hxy), (hxy, x ** y * math.log(x) ** 2))
    with force_route(route):
        for _ in range(2):
            got = hessian(p, argnums=(0, 1))(x, y)
            assert np.allclose(np.array(got, dtype=float), want, rtol=1e-12)
            h = hvp(f, (x, y), (1.0, 0.0))
            assert np.allclose(h, [want[0][0], want[1][0]], rtol=1e-12)
    column = fd(lambda t: np.array(grad(p, argnums=(0, 1))(x + t, y)), 0.0)
    assert np.allclose(column, [want[0][0], want[1][0]], rtol=1e-6)
