"""Route parity at singular points: quotients by zero, infinite first and second derivatives.

Where the plain computation is NumPy arithmetic (an operand is a NumPy scalar or array) it
follows IEEE: ``np.float64(1.0) / 0.0`` is ``inf`` with a warning, not an exception, so no
derivative may raise there either: the rules compute a partial ``1 / b`` as the quotient was
computed (``rules._scalar._divisor``), and the routes that write the arithmetic out hand a
zero divisor to the rules.  Every route -- reverse mode's specialised regions and its tape,
hvp's compiled and tape routes, forward mode's dual pass and boxed duals -- gives what the
reference route gives, first call and repeated, including forward mode's convention on numbers
that a term of an exactly zero tangent is left out (docs/limitations.md, "Infinite partial
derivatives"): a fast route that multiplies such a tangent by an infinite partial or value
(``0 * inf = nan``), or associates infinities otherwise than the reference's operations do,
declines where its result shows it (a nan tangent in the dual, a result that is not finite in
hvp's routes), for that call only.  Python floats keep Python's arithmetic: ``1.0 / x`` at
``x == 0.0`` raises plainly, and under every derivative.
"""

import math

import numpy as np
import pytest

from overdub_ad import derivative, explain, grad, hessian, hvp, jacfwd, jacrev, jvp
from overdub_ad.testing import ROUTES, force_route
from tests.conftest import same

# the default choice, then every route forced (a fast route forced serves its own APIs and
# leaves the others to the reference)
CHOICES = (None, *ROUTES)
F = np.float64
INF, NAN = math.inf, math.nan


pytestmark = pytest.mark.usefixtures("quiet_singular_points")


def on(route, compute):
    """``compute()`` on ``route``, a first call and a repeated one: the two results, or the
    exception's class."""
    results = []
    with force_route(route):
        for _ in range(2):
            try:
                results.append(compute())
            except Exception as error:  # (compared with the reference's: the same class)
                results.append(type(error))
    return results


def agree(got, want, what):
    """The results of :func:`on` are ``want`` (a value, or an exception's class)."""
    for call, result in zip(("first call", "repeated call"), got):
        if isinstance(want, type):
            assert result is want, (what, call, result, want)
        else:
            assert not isinstance(result, type), (what, call, result, want)
            same(result, want, f"{what} ({call})")


# -- the functions -------------------------------------------------------------------------------

def divided_in_place(x):
    y = x * 1.0
    y /= F(0.0)
    return y


def numerator_in_place(x):
    y = F(1.0)
    y /= x
    return y + x


def loop(x):
    s = 0.0
    for k in range(3):
        s = s + F(1.0) / (x - k)
    return s


def branch(x):
    if x > 0.5:
        return x * x
    return F(2.0) / x + x * 3.0


def quotient(a, b):
    return a / b


def through_a_helper(x):
    return quotient(np.sin(x), x) + quotient(F(1.0), x)


# name -> (f, the point, (f'(x), f''(x)) where the derivatives have these values on every API,
# or None where the APIs differ by their conventions -- forward mode leaves out the terms of
# exactly zero tangents, reverse mode multiplies -- and each route is held to the reference)
CASES = {
    # quotients by zero whose value is NumPy's: d/dx 1/x = -inf, d2 = +inf at +0.0
    "np.float64(1.0) / x": (lambda x: F(1.0) / x, 0.0, (-INF, INF)),
    "1.0 / x at np.float64(0.0)": (lambda x: 1.0 / x, F(0.0), (-INF, INF)),
    "np.float64(1.0) / math.sin(x)": (lambda x: F(1.0) / math.sin(x), 0.0, (-INF, INF)),
    "2.0 / (np.float64(1.0) * x)": (lambda x: 2.0 / (F(1.0) * x), 0.0, (-INF, INF)),
    "np.sin(x) / x": (lambda x: np.sin(x) / x, 0.0, (NAN, NAN)),  # (JAX: nan)
    "np.exp(x) / x": (lambda x: np.exp(x) / x, 0.0, (NAN, NAN)),
    "np.sin(x) / x at np.float64(0.0)": (lambda x: np.sin(x) / x, F(0.0), (NAN, NAN)),
    "math.sin(x) / np.float64(x)": (lambda x: math.sin(x) / F(x), 0.0, (NAN, NAN)),
    "np.float64(0.0) / x": (lambda x: F(0.0) / x, 0.0, (NAN, NAN)),
    "x / np.float64(0.0)": (lambda x: x / F(0.0), 1.0, (INF, 0.0)),
    "x / x at np.float64(0.0)": (lambda x: x / x, F(0.0), (NAN, NAN)),
    "np.cos(x) / x * 2.0 + x": (lambda x: np.cos(x) / x * 2.0 + x, 0.0, None),
    "np.log(x) / x": (lambda x: np.log(x) / x, 0.0, None),
    "1.0 / (x * x) at np.float64(0.0)": (lambda x: 1.0 / (x * x), F(0.0), None),
    "np.float64(1.0) / (x - x) + x": (lambda x: F(1.0) / (x - x) + x, 1.0, None),
    "y /= np.float64(0.0)": (divided_in_place, 1.0, (INF, 0.0)),
    "y = np.float64(1.0); y /= x": (numerator_in_place, 0.0, (-INF, INF)),
    "a loop through 1 / (x - k)": (loop, 0.0, (-INF, INF)),
    "a branch": (branch, 0.0, (-INF, INF)),
    "a helper dividing": (through_a_helper, 0.0, (NAN, NAN)),
    # powers: negative exponents at a NumPy zero, negative NumPy bases
    "x ** -1 at np.float64(0.0)": (lambda x: x ** -1, F(0.0), (-INF, INF)),
    "pow(x, -1.0) at np.float64(0.0)": (lambda x: pow(x, -1.0), F(0.0), (-INF, INF)),
    "(np.float64(1.0) * x) ** np.float64(-1.0)": (lambda x: (F(1.0) * x) ** F(-1.0), 0.0,
                                                   (-INF, INF)),
    "np.float64(-2.0) ** x": (lambda x: F(-2.0) ** x * 1.0, 2.0, (NAN, NAN)),
    "np.float64(2.0) ** x": (lambda x: F(2.0) ** x, -1.0,
                             (0.5 * math.log(2.0), 0.5 * math.log(2.0) ** 2)),
    "x ** np.float64(2.0) at a negative x": (lambda x: x ** F(2.0), -1.5, (-3.0, 2.0)),
    # functions with infinite derivatives, inside expressions
    "np.sqrt(x * x)": (lambda x: np.sqrt(x * x), 0.0, None),
    "2.0 * np.sqrt(x * x)": (lambda x: 2.0 * np.sqrt(x * x), 0.0, None),
    "np.log(x) * 1.0": (lambda x: np.log(x) * 1.0, 0.0, (INF, -INF)),
    "np.log(x) * 2.0 + x": (lambda x: np.log(x) * 2.0 + x, 0.0, (INF, -INF)),
    "np.arctanh(x) * 1.0": (lambda x: np.arctanh(x) * 1.0, 1.0, (INF, INF)),
    "np.arcsin(x) + x": (lambda x: np.arcsin(x) + x, 1.0, (INF, INF)),
    "np.arcsin(x) * x": (lambda x: np.arcsin(x) * x, 1.0, (INF, INF)),
    "1.0 / np.sqrt(x)": (lambda x: 1.0 / np.sqrt(x), 0.0, (-INF, INF)),
    "np.log(x * x)": (lambda x: np.log(x * x), 0.0, None),
    # NumPy's functions where the math module's raise (cos(inf), cosh(800)): nan and inf
    "np.sin(np.log(x))": (lambda x: np.sin(np.log(x)), 0.0, (NAN, NAN)),
    "np.cos(np.float64(1.0) / x)": (lambda x: np.cos(F(1.0) / x), 0.0, (NAN, NAN)),
    "np.sin(x * 1.0) at inf": (lambda x: np.sin(x * 1.0), INF, (NAN, NAN)),
    "np.sinh(x * 1.0) at 800": (lambda x: np.sinh(x * 1.0), 800.0, (INF, INF)),
    "np.cosh(x * 1.0) at -800": (lambda x: np.cosh(x * 1.0), -800.0, (-INF, INF)),
    # a tangent that is exactly zero times an infinite value: left out in forward mode
    "(x - x) * np.float64(inf) + x": (lambda x: (x - x) * F(INF) + x, 1.0, None),
    "(x - x) * math.inf + x": (lambda x: (x - x) * math.inf + x, 1.0, None),
    "np.log(x - x + 1.0) * np.log(x * 0.0)": (lambda x: np.log(x - x + 1.0) * np.log(x * 0.0),
                                              1.0, None),
}


def first_derivatives(f, x):
    return {"derivative": lambda: derivative(f, x),
            "jvp": lambda: jvp(f, (x,), (1.0,))[1],
            "jacfwd": lambda: jacfwd(f)(x),
            "grad": lambda: grad(f)(x),
            "jacrev": lambda: jacrev(f)(x)}


def second_derivatives(f, x):
    return {"hvp": lambda: hvp(f, x, 1.0),
            "hessian": lambda: hessian(f)(x),
            "derivative(derivative)": lambda: derivative(derivative(f))(x),
            "derivative(grad)": lambda: derivative(grad(f), x)}


@pytest.mark.every_route
@pytest.mark.parametrize("name", list(CASES))
def test_every_route_computes_what_the_reference_computes(name):
    f, x, values = CASES[name]
    for order, apis in ((0, first_derivatives(f, x)), (1, second_derivatives(f, x))):
        for api, compute in apis.items():
            reference = on("reference", compute)
            want = reference[0]
            # an IEEE result, never an exception the plain computation does not raise
            assert not isinstance(want, type), (name, api, want)
            if values is not None:
                same(want, values[order], f"{name}: {api} on the reference route")
            for route in CHOICES:
                agree(on(route, compute), want, f"{name}: {api} on {route}")


@pytest.mark.every_route
def test_python_floats_keep_pythons_arithmetic():
    # 1.0 / 0.0 raises plainly: every derivative of it raises as the program does
    f = lambda x: 1.0 / x  # noqa: E731
    with pytest.raises(ZeroDivisionError):
        f(0.0)
    apis = {**first_derivatives(f, 0.0), **second_derivatives(f, 0.0)}
    for route in CHOICES:
        for api, compute in apis.items():
            agree(on(route, compute), ZeroDivisionError, f"{api} on {route}")


def numerator(x):
    # x is the outer derivative's boxed dual inside the inner one; NumPy hands it its scalar
    # numerator as a Python float, whose quotient by zero would raise
    return derivative(lambda y: F(1.0) / x + y * x, 1.0)


def denominator(x):
    # a boxed dual of NumPy's float divided by a Python zero
    return derivative(lambda y: y * ((x * F(1.0)) / 0.0), 1.0)


def sum_divided(x):
    return derivative(lambda y: (x * F(1.0)) / 0.0 + y * x, 1.0)


@pytest.mark.every_route
def test_a_boxed_dual_divides_as_numpy_does():
    for outer, want in ((numerator, 1.0), (denominator, INF), (sum_divided, 1.0)):
        for route in CHOICES:
            agree(on(route, lambda: derivative(outer, 0.0)), want,
                  f"{outer.__name__} on {route}")


# -- several numbers, and arrays ---------------------------------------------------------------

def reciprocal_and_square(v):
    return F(1.0) / v[0] + v[1] ** 2


def sinc_times(v):
    return np.sin(v[0]) / v[0] * v[1]


@pytest.mark.every_route
def test_a_zero_direction_of_a_number_is_exactly_zero():
    # numbers: the term of the direction 0.0 is left out, where H_00 is infinite
    cases = [
        (lambda: hvp(reciprocal_and_square, (0.0, 1.0), (0.0, 1.0)), (0.0, 2.0)),
        (lambda: hvp(reciprocal_and_square, (0.0, 1.0), (1.0, 0.0)), (INF, 0.0)),
        (lambda: hvp(sinc_times, (0.0, 1.0), (0.0, 1.0)), (NAN, 0.0)),
        (lambda: hvp(sinc_times, (0.0, 1.0), (1.0, 1.0)), (NAN, NAN)),
        (lambda: hessian(lambda x, y: F(1.0) / x + y * y, argnums=(0, 1))(0.0, 1.0),
         ((INF, 0.0), (0.0, 2.0))),
    ]
    for i, (compute, want) in enumerate(cases):
        agree(on("reference", compute), want, f"case {i} on the reference route")
        for route in CHOICES:
            agree(on(route, compute), want, f"case {i} on {route}")


def sum_of_reciprocals(a):
    return np.sum(1.0 / a)


def sum_of_sincs(a):
    return np.sum(np.sin(a) / a)


def norm(a):
    return np.sqrt(np.sum(a * a))


def log_of_sum(a):
    s = np.sum(a)
    return np.log(s) * 1.0


def reciprocal_of_norm(a):
    return 1.0 / np.sum(a * a)


def norm_plus_sum(a):
    s = np.sum(a * a)
    return np.sqrt(s) * 2.0 + np.sum(a)


def first_over_each(a):
    return np.sum(a[0] / a)


def over_reversed(a):
    return np.sum(a / a[::-1])


ZERO_ONE = np.array([0.0, 1.0])
ONE_ZERO = np.array([1.0, 0.0])
ZEROS = np.zeros(2)


@pytest.mark.every_route
def test_arrays_keep_ieee_arithmetic():
    # elementwise: a direction's zero element times an infinite second derivative is nan, as
    # in JAX (docs/limitations.md); the scalars inside (sqrt(sum(a * a)) at 0) leave out the
    # terms of their exactly zero tangents, as numbers do; hvp's compiled and tape routes,
    # which cannot follow that (nor infinities through their own association of the terms),
    # decline a result that is not finite
    cases = [
        (lambda: grad(sum_of_reciprocals)(ZERO_ONE), np.array([-INF, -1.0])),
        (lambda: hvp(sum_of_reciprocals, ZERO_ONE, np.ones(2)), np.array([INF, 2.0])),
        (lambda: hvp(sum_of_reciprocals, ZERO_ONE, np.array([0.0, 1.0])),
         np.array([NAN, 2.0])),
        (lambda: jacfwd(lambda a: 1.0 / a)(ZERO_ONE), np.array([[-INF, NAN], [-0.0, -1.0]])),
        (lambda: hvp(sum_of_sincs, ZERO_ONE, np.array([0.0, 1.0])), None),
        (lambda: hvp(norm, ZEROS, np.ones(2)), np.array([INF, INF])),
        (lambda: hvp(log_of_sum, np.array([1.0, -1.0]), np.ones(2)), np.array([-INF, -INF])),
        (lambda: hvp(reciprocal_of_norm, ZEROS, np.ones(2)), np.array([-INF, -INF])),
        (lambda: hvp(norm_plus_sum, ZEROS, np.ones(2)), np.array([INF, INF])),
        (lambda: hvp(first_over_each, ONE_ZERO, np.ones(2)), np.array([-INF, NAN])),
        # (elementwise too, infinities do not distribute: (1 - 0 * 1) / 0 is inf where
        # 1 / 0 - 0 / 0 is nan, and the compiled route leaves it to the others)
        (lambda: hvp(over_reversed, ZERO_ONE, np.ones(2)), np.array([NAN, -INF])),
    ]
    for i, (compute, want) in enumerate(cases):
        reference = on("reference", compute)
        if want is None:
            want = reference[0]
        else:
            agree(reference, want, f"case {i} on the reference route")
        for route in CHOICES:
            agree(on(route, compute), want, f"case {i} on {route}")


def declined(report, route):
    """Whether ``route`` declined in ``report`` (an :func:`explain`) for a result that is
    not finite."""
    return any(name == route and not ran and "not finite" in why
               for name, ran, why in report.decisions)


@pytest.mark.default_routes
def test_hvp_declines_a_result_that_is_not_finite_and_runs_again_away_from_it():
    # compiled and tape routes differ from the nested one only where the result has an
    # infinity or a nan (terms of exactly zero tangents, infinities that do not distribute):
    # there they decline, for that call only
    for x in (np.array([1.0, 2.0]), ZEROS, np.array([3.0, 4.0])):
        report = explain(hvp, norm, x, np.ones(2))
        if x is ZEROS:
            assert declined(report, "hvp-compiled") and declined(report, "hvp-tape"), report
            same(report.result, np.array([INF, INF]))
        else:
            assert report.ran == ["hvp-compiled"], report
    for x in (2.0, 0.0, 3.0):
        report = explain(hvp, lambda x: np.sqrt(x * x) * 2.0, x, 1.0)
        assert declined(report, "hvp-tape") == (x == 0.0), report
        same(report.result, INF if x == 0.0 else 0.0)


def product_with_a_log(x, y):
    return x * np.log(y)


@pytest.mark.default_routes
def test_the_dual_declines_a_nan_tangent_and_runs_again_away_from_it():
    # x's tangent is exactly 0.0: the general mode leaves out its term 0.0 * log(0) = nan
    for y in (2.0, 0.0, 3.0):
        report = explain(jvp, product_with_a_log, (1.0, y), (0.0, 1.0))
        if y == 0.0:
            assert any(name == "forward-dual" and not ran and "nan" in why
                       for name, ran, why in report.decisions), report
            same(report.result[1], INF)
        else:
            assert report.ran == ["forward-dual"], report
            same(report.result[1], 1.0 / y)
