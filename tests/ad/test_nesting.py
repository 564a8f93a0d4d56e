"""Nested derivatives and perturbation confusion, from the literature.

Cases come from Siskind & Pearlmutter, "Perturbation confusion and referential transparency"
(2005) and "Nesting forward-mode AD in a functional framework" (2008); the test suites of
DVL/VLAD (derivative-examples.dvl, reverse-examples.dvl, amazing-bug-*.dvl); Manzyuk,
Pearlmutter, Radul, Rush & Siskind, "Perturbation confusion in forward automatic
differentiation of higher-order functions" (JFP 2019, the "amazing bug" and its variants as
collected by Emmy/SICMUtils); Pearlmutter & Siskind's nested-optimisation benchmarks ("saddle"
and "particle", as specified by GradBench); ForwardDiff.jl's ConfusionTest and Zygote's forward
tests (closures that assign to captured variables); and JAX's nesting tests (jvp-of-grad,
grad-of-jvp, closures over outer tracers, custom rules under nesting).

Every combination of modes is exercised: forward-over-forward ("ff"), forward-over-reverse
("fr", hessian/hvp), reverse-over-forward ("rf"), reverse-over-reverse ("rr") and three levels.
Values are checked against closed forms, central finite differences and the other modes.
"""

from __future__ import annotations

import io
import math
import operator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overdub import Tagged, TagError, overdub
from overdub.contexts import CountContext, LogContext, TraceContext
from overdub_ad import (D, checkpoint, custom_jvp, custom_vjp, derivative, grad, hessian, hvp,
                        jacfwd, jacrev, jvp, value_and_grad, vjp)
from tests.conftest import fd

# -- helpers -------------------------------------------------------------------------------------


def assert_plain(tree):
    """No tagged value reaches the caller, anywhere in ``tree``."""
    if isinstance(tree, (tuple, list)):
        for item in tree:
            assert_plain(item)
    elif isinstance(tree, dict):
        for item in tree.values():
            assert_plain(item)
    else:
        assert not isinstance(tree, Tagged), tree
        if isinstance(tree, np.ndarray) and tree.dtype == object:
            for item in tree.flat:
                assert_plain(item)


def d_fwd(f):
    """The scalar derivative by forward mode."""
    return derivative(f)


def d_rev(f):
    """The scalar derivative by reverse mode."""
    return grad(f)


def d_jvp(f):
    """The scalar derivative through ``jvp``."""
    return lambda x: jvp(f, (x,), (1.0,))[1]


def d_vjp(f):
    """The scalar derivative through ``vjp`` and its pullback."""
    return lambda x: vjp(f, x)[1](1.0)[0]


DERIVATIVES = {"fwd": d_fwd, "rev": d_rev, "jvp": d_jvp, "vjp": d_vjp}
PAIRS = [(a, b) for a in DERIVATIVES for b in DERIVATIVES]


def pair_ids(pair):
    return f"{pair[0]}-over-{pair[1]}"


# -- Siskind & Pearlmutter 2005/2008 and the DVL suites -----------------------------------------


def test_the_original_perturbation_confusion_example():
    # d/dx [x * (d/dy (x + y))(1)] at 1: the inner derivative is 1, so the answer is 1, not 2
    assert D(lambda x: x * D(lambda y: x + y)(1))(1) == 1
    assert D(lambda x: x * D(lambda y: x + y, 1), 1) == 1
    assert D(lambda x: x * D(lambda y: x + y)(1.0))(1.0) == 1.0


def test_siskind_pearlmutter_2008_product():
    # d/dx [x * (d/dy (x * y))(2)] at 1 = d/dx x^2 = 2; confusion gives 3
    assert D(lambda x: x * D(lambda y: x * y)(2.0))(1.0) == 2.0
    assert D(lambda x: x * D(lambda y: x * y)(1))(4) == 8    # Zygote's forward test


@pytest.mark.parametrize("pair", PAIRS, ids=pair_ids)
def test_dvl_examples_in_every_mode_pair(pair):
    outer, inner = DERIVATIVES[pair[0]], DERIVATIVES[pair[1]]

    def one(x):
        return inner(lambda y: x + y)(3.0)

    assert outer(lambda x: x)(7.0) == 1.0
    assert outer(lambda x: 3.0)(7.0) == 0.0
    assert outer(lambda x: x + x)(7.0) == 2.0
    assert outer(one)(7.0) == 0.0                               # nested constant function
    assert outer(lambda x: x * one(x))(7.0) == 1.0              # don't conflate
    assert outer(lambda x: x * one(2.0 * x))(7.0) == 1.0        # don't confuse
    # d/dy [d/dx (x * x * y) at x = 3y] = d/dy (6 y^2) = 12 y = 60 at 5
    assert outer(lambda y: inner(lambda x: x * (x * y))(y * 3.0))(5.0) == 60.0
    # Siskind & Pearlmutter 2008: d/dx x * (d/dy x*y) = 2x
    assert outer(lambda x: x * inner(lambda y: x * y)(2.0))(1.0) == 2.0


def test_dvl_means_example():
    # reverse-examples.dvl: the gradient of a four-fold arithmetic-geometric mean step (checked
    # there against Mechanics)
    def means(x, y):
        return (x + y) / 2, math.sqrt(y * x)

    def f(x, y):
        return sum(means(*means(*means(*means(x, y)))))

    g = grad(f, argnums=(0, 1))(3.0, 4.0)
    assert g == pytest.approx((1.0775567911016182, 0.9328462448535719), rel=1e-12)
    assert jacfwd(f, argnums=(0, 1))(3.0, 4.0) == pytest.approx(g, rel=1e-12)


def test_dvl_products_and_norm():
    def product(xs):
        p = 1.0
        for x in xs:
            p = p * x
        return p

    assert grad(product)([1.0, 2.0, 3.0]) == [6.0, 3.0, 2.0]
    assert grad(product)([1.0, 2.0, 3.0, 4.0]) == [24.0, 12.0, 8.0, 6.0]
    g = grad(lambda x, y: math.sqrt(x * x + y * y), argnums=(0, 1))(3.0, 4.0)
    assert g == pytest.approx((0.6, 0.8), rel=1e-15)


# -- Zygote / ForwardDiff: closures that assign, tags whose lifetime ends ------------------------


@pytest.mark.parametrize("pair", PAIRS, ids=pair_ids)
def test_inner_derivative_assigning_an_outer_variable_twice(pair):
    outer_d, inner_d = DERIVATIVES[pair[0]], DERIVATIVES[pair[1]]

    def outer(x):
        def f(y):
            nonlocal x
            x = x * y
            return x
        inner_d(f)(1.0)
        return inner_d(f)(1.0)
    assert outer_d(outer)(1.0) == 1.0


@pytest.mark.parametrize("pair", PAIRS, ids=pair_ids)
def test_inner_derivative_rebinding_the_outer_variable_to_its_own_input(pair):
    outer_d, inner_d = DERIVATIVES[pair[0]], DERIVATIVES[pair[1]]

    def outer(x):
        def f(y):
            nonlocal x
            x = y
            return y
        return inner_d(f)(x) * x
    assert outer_d(outer)(1.0) == 1.0
    assert outer_d(outer)(2.5) == 1.0


@pytest.mark.parametrize("modes", ["fff", "rrr", "frf", "rfr"])
def test_three_levels_assigning_an_outer_variable(modes):
    d1, d2, d3 = (DERIVATIVES["fwd" if m == "f" else "rev"] for m in modes)

    def outer(x):
        def middle(y):
            def inner(z):
                nonlocal x
                x = z * y
                return x
            return d3(inner)(3.0)
        d2(middle)(2.0)
        return x
    # x ends as the plain product 3 * 2, independent of the outer x
    assert d1(outer)(1.0) == 0.0
    assert outer(1.0) == 6.0


def test_forwarddiff_issue_83():
    assert D(lambda x: x * D(lambda y: x + y, 1.0), 1.0) == 1.0
    got = grad(lambda v: np.sum(v) * D(lambda y: y * np.linalg.norm(v), 1.0))(np.array([1.0]))
    want = grad(lambda v: np.sum(v) * np.linalg.norm(v))(np.array([1.0]))
    np.testing.assert_allclose(got, want)
    np.testing.assert_allclose(got, [2.0])


@pytest.mark.parametrize("outer", [jacfwd, jacrev])
@pytest.mark.parametrize("inner", [grad, lambda f: jacfwd(f)])
def test_forwarddiff_jacobian_of_gradient_is_the_bilinear_form(outer, inner, rng):
    a = rng.standard_normal((5, 4))
    x0, y0 = rng.standard_normal(4), rng.standard_normal(5)
    got = outer(lambda x: inner(lambda y: np.dot(y, a @ x))(y0))(x0)
    np.testing.assert_allclose(got, a, rtol=1e-13, atol=1e-14)


def test_forwarddiff_issue_238_lagrangian():
    m, g = 1.0, 9.8

    def lagrangian(t, q, qdot):
        return m / 2 * np.dot(qdot, qdot) - m * g * q[1]

    def dl_dqdot(t, q, qdot):
        return grad(lambda a: lagrangian(t, q, a))(qdot)

    q, qdot = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    np.testing.assert_array_equal(dl_dqdot(1.0, q, qdot), qdot)
    np.testing.assert_array_equal(jacfwd(lambda a: dl_dqdot(1.0, a, qdot))(q), np.zeros((2, 2)))
    np.testing.assert_array_equal(jacrev(lambda a: dl_dqdot(1.0, q, a))(qdot), np.eye(2))
    np.testing.assert_array_equal(jacfwd(lambda a: dl_dqdot(1.0, q, a))(qdot), np.eye(2))


def test_forwarddiff_legendre_transformation():
    # issue 238: a Hamiltonian from a Lagrangian by a Legendre transformation that takes a
    # Hessian and a gradient, differentiated again: dH/dq = (0, m g)
    m, g = 1.0, 9.8

    def lagrangian(t, q, qdot):
        return m / 2 * np.dot(qdot, qdot) - m * g * q[1]

    def legendre(f, w):
        z = np.zeros(np.shape(w))
        c = np.linalg.cholesky(hessian(f)(z))
        v = np.linalg.solve(c.T, np.linalg.solve(c, w - grad(f)(z)))
        return np.dot(w, v) - f(v)

    def hamiltonian(q, p):
        return legendre(lambda qdot: lagrangian(1.0, q, qdot), p)

    q, p = np.array([1.0, 2.0]), np.array([5.0, 6.0])
    assert hamiltonian(q, p) == pytest.approx(np.dot(p, p) / (2 * m) + m * g * q[1])
    np.testing.assert_allclose(grad(hamiltonian)(q, p), [0.0, g], atol=1e-12)
    np.testing.assert_allclose(jacfwd(hamiltonian)(q, p), [0.0, g], atol=1e-12)
    np.testing.assert_allclose(grad(hamiltonian, argnums=1)(q, p), p / m, rtol=1e-12)


def test_forwarddiff_derivative_of_a_constant_inner_derivative():
    assert D(lambda x: D(lambda y: x, x), 1.0) == 0.0
    assert grad(lambda x: grad(lambda y: x + 0.0 * y)(x))(1.0) == 0.0


CAPTURED = [None]
G_CAPTURED = None


def times_captured(x):
    return CAPTURED[0] * x ** 2


def times_global(x):
    return G_CAPTURED * x ** 2


def capture_then_differentiate(x):
    CAPTURED[0] = x
    return D(times_captured, 2.0)


def capture_product_then_differentiate(x):
    CAPTURED[0] = np.prod(x)
    return D(times_captured, 2.0)


def capture_globally_then_differentiate(x):
    global G_CAPTURED
    G_CAPTURED = x
    return grad(times_global)(2.0)


def test_forwarddiff_tags_not_ordered_by_containment():
    # the outer perturbation reaches the inner function through the heap, not its arguments
    assert D(capture_then_differentiate, 3.0) == 4.0
    x = np.array([3.0, 2.0])
    np.testing.assert_array_equal(grad(capture_product_then_differentiate)(x), [8.0, 12.0])
    np.testing.assert_array_equal(jacfwd(capture_product_then_differentiate)(x), [8.0, 12.0])
    np.testing.assert_array_equal(hessian(capture_product_then_differentiate)(x),
                                  [[0.0, 4.0], [4.0, 0.0]])
    assert D(capture_globally_then_differentiate, 3.0) == 4.0
    assert grad(capture_globally_then_differentiate)(3.0) == 4.0
    # nothing tagged is left behind, in the list or in the global variable
    assert type(CAPTURED[0]) in (float, np.float64) and CAPTURED[0] == 6.0
    assert type(G_CAPTURED) is float and G_CAPTURED == 3.0


def test_forwarddiff_seeding_keeps_the_outer_tag_outside():
    f = lambda x: x[0] ** 2 * x[1]  # noqa: E731   df/dx0 = 2 x0 x1 = 4 t^2 at (t, 2t)
    assert D(lambda t: grad(f)(np.array([t, 2 * t]))[0])(1.0) == 8.0
    assert D(lambda t: grad(f)([t, 2 * t])[0])(1.0) == 8.0
    assert D(lambda t: jacfwd(lambda x: np.array([f(x)]))(np.array([t, 2 * t]))[0, 0])(1.0) == 8.0
    assert D(lambda t: jacrev(lambda x: [f(x)])(np.array([t, 2 * t]))[0][0])(1.0) == 8.0
    assert D(lambda t: hessian(f)(np.array([t, 2 * t]))[0, 0])(1.0) == 4.0
    assert grad(lambda t: hessian(f)(np.array([t, 2 * t]))[0, 0])(1.0) == 4.0


class SineOfProduct:
    """A callable whose field holds the outer derivative's perturbed value."""

    def __init__(self, x):
        self.x = x

    def __call__(self, y):
        return math.sin(self.x * y)


def test_forwarddiff_outer_perturbation_entering_through_a_callable_field():
    want = math.cos(0.5) - 0.5 * math.sin(0.5)
    assert D(lambda x: D(SineOfProduct(x), 1.0), 0.5) == pytest.approx(want, rel=1e-15)
    assert grad(lambda x: grad(SineOfProduct(x))(1.0))(0.5) == pytest.approx(want, rel=1e-15)


@pytest.mark.parametrize("middle", [grad, jacfwd])
def test_forwarddiff_three_levels_with_perturbations_in_captures(middle):
    # the innermost derivative is seeded with a plain 1.0; the outer perturbations enter
    # through the closure: sum over u of 2 u * u, whose gradient 4 v sums to 12 x
    def inner_derivative(d):
        return D(lambda y: y ** 2 * d, 1.0)

    def outer(x):
        v = np.array([x, 2 * x])
        return np.sum(middle(lambda u: sum(inner_derivative(ui) * ui for ui in u))(v))

    assert D(outer, 0.5) == pytest.approx(12.0, rel=1e-15)
    assert grad(outer)(0.5) == pytest.approx(12.0, rel=1e-15)


# -- Manzyuk et al. 2019: derivatives of functions that return functions -------------------------


def test_amazing_bug():
    shift = lambda offset: lambda g: lambda a: g(a + offset)  # noqa: E731
    f_hat = D(shift)(3.0)
    assert f_hat(math.exp)(5.0) == pytest.approx(math.exp(8.0), rel=1e-14)
    # each application of f_hat differentiates its argument once more: exp''(5 + 3 + 3)
    assert f_hat(f_hat(math.exp))(5.0) == pytest.approx(math.exp(11.0), rel=1e-14)
    assert f_hat(f_hat(f_hat(math.sin)))(0.5) == pytest.approx(-math.cos(9.5), rel=1e-13)


def test_more_subtle_amazing_bug():
    # v_hat(identity) is the derivative operator, so v_hat(v_hat(identity)) is the second one
    v = lambda u: lambda f1: lambda f2: lambda x: f1(f2)(x + u)  # noqa: E731
    v_hat = D(v)(0.0)
    assert v_hat(v_hat(lambda f: f))(math.exp)(1.0) == pytest.approx(math.e, rel=1e-14)
    assert v_hat(v_hat(lambda f: f))(math.sin)(1.0) == pytest.approx(-math.sin(1.0), rel=1e-14)


def test_church_box_example():
    def box(x):
        return lambda m: m(x)

    def unbox(x):
        return x(lambda y: y)

    def wrap(f):
        return lambda x: box(f(unbox(x)))

    def unwrap(f):
        return lambda x: unbox(f(box(x)))

    def wrap2(f):
        return lambda g: lambda x: box(f(unwrap(g))(unbox(x)))

    def wrap2_result(f):
        return lambda x: wrap2(f(x))

    s = lambda x: lambda g: lambda y: g(x + y)  # noqa: E731
    wrapped_d_hat = D(wrap2_result(s))(0.0)
    got = unwrap(wrapped_d_hat(wrapped_d_hat(wrap(math.exp))))(1.0)
    assert got == pytest.approx(math.e, rel=1e-14)


def test_amazing_bug_two_pair_of_functions():
    # D of a function returning a pair of functions: each component is differentiated on its
    # own, and feeding one to the other must not confuse their perturbations
    def f(x):
        return (lambda y: math.sin(x * y), lambda g: lambda z: g(x + z))

    g_hat, f_hat = D(f)(3.0)
    y = 3.0 + math.pi
    assert g_hat(2.0) == pytest.approx(2.0 * math.cos(6.0), rel=1e-14)
    want = math.cos(3 * y) - 3 * y * math.sin(3 * y)
    assert f_hat(g_hat)(math.pi) == pytest.approx(want, rel=1e-12)


def test_amazing_bug_three_church_pair():
    def f(x):
        return lambda recipient: recipient(lambda y: math.sin(x * y),
                                           lambda g: lambda z: g(x + z))

    y = 3.0 + math.pi
    want = 3 * math.cos(3 * y) + y * math.cos(3 * y)
    got = D(f)(3.0)(lambda g_hat, f_hat: f_hat(g_hat)(math.pi))
    assert got == pytest.approx(want, rel=1e-12)


def test_amazing_bug_four_arguments_swapped():
    def f(recipient):
        return lambda x: recipient(lambda y: math.sin(x * y), lambda g: lambda z: g(x + z))

    def recip(g_hat, f_hat):
        return f_hat(g_hat)(math.pi)

    y = 3.0 + math.pi
    assert D(f(recip))(3.0) == pytest.approx(math.cos(3 * y) * (3 + y), rel=1e-12)


def test_amazing_bug_five_church_output():
    def church_output(f):
        return lambda x: lambda recipient: recipient(f(x))

    def flip(f):
        return lambda x: lambda y: f(y)(x)

    def square(x):
        return x * x

    s, c = math.sin(1.0), math.cos(1.0)
    assert square(D(math.sin)(1.0)) == c * c
    assert D(church_output(math.sin))(1.0)(square) == pytest.approx(2 * s * c, rel=1e-15)
    assert D(flip(church_output(math.sin))(square))(1.0) == pytest.approx(2 * s * c, rel=1e-15)
    assert D(lambda x: math.sin(x) * math.sin(x))(1.0) == pytest.approx(2 * s * c, rel=1e-15)


def a_of(x, y):
    return math.sin(x) * math.exp(2.0 * y)


def test_sams_amazing_bug_inside_and_outside_the_scope():
    # f's continuation gets f1 (closing over x, passing it as a's first argument) and f2
    # (passing x to its argument)
    def f(x):
        return lambda cont: cont(lambda y: a_of(x, y), lambda g: g(x))

    t = 0.4
    d0 = math.cos(t) * math.exp(2 * t)          # (partial 0) a at (t, t)
    d1 = 2 * math.sin(t) * math.exp(2 * t)      # (partial 1) a
    d01 = 2 * math.cos(t) * math.exp(2 * t)     # (partial 0)(partial 1) a
    assert D(f)(t)(lambda f1, f2: f1(t)) == pytest.approx(d0, rel=1e-14)
    assert D(f)(t)(lambda f1, f2: f2(math.exp)) == pytest.approx(math.exp(t), rel=1e-14)
    # inside the scope of D(f)(t): both captured x's are perturbed, a total derivative
    assert D(f)(t)(lambda f1, f2: f2(f1)) == pytest.approx(d0 + d1, rel=1e-14)
    assert D(lambda s: a_of(s, s))(t) == pytest.approx(d0 + d1, rel=1e-14)
    # outside it, f1 and f2 are separately differentiated: a mixed partial
    f1, f2 = D(f)(t)(lambda *fs: fs)
    assert f2(f1) == pytest.approx(d01, rel=1e-14)


def test_derivative_of_a_curried_function_applied_twice():
    curried = lambda x: lambda y: x * x * y  # noqa: E731   d/dx = 2 x y
    dc = D(curried)
    assert dc(3.0)(2.0) == 12.0
    h = dc(3.0)
    assert h(h(1.0)) == 36.0       # 2*3*(2*3*1)
    # the returned closure applied later to a value differentiated by an outer derivative
    assert D(lambda y: h(y) * y)(2.0) == 24.0                  # d/dy 6 y^2
    assert D(lambda z: dc(z)(z))(2.0) == 8.0                   # d/dz 2 z^2
    assert grad(lambda z: dc(z)(z))(2.0) == 8.0


def test_returned_closure_called_under_an_outer_derivative():
    # h(x) = lambda y: d/dx sin(x y) = y cos(x y); g(z) = h(z)(z) = z cos(z^2)
    def g(z):
        return derivative(lambda x: lambda y: math.sin(x * y))(z)(z)

    want = math.cos(1.0) - 2 * math.sin(1.0)
    assert derivative(g)(1.0) == pytest.approx(want, rel=1e-14)
    assert grad(g)(1.0) == pytest.approx(want, rel=1e-14)
    assert jvp(g, (1.0,), (2.0,))[1] == pytest.approx(2 * want, rel=1e-14)


def test_derivative_of_a_function_returning_a_closure_over_an_array():
    def make(w):
        return lambda v: np.sum(np.sin(w * v))

    w, v = np.array([0.3, -0.7, 1.1]), np.array([1.0, 2.0, -0.5])
    got = jvp(make, (w,), (np.ones(3),))[1](v)
    np.testing.assert_allclose(got, np.sum(v * np.cos(w * v)), rtol=1e-14)
    # and the returned closure differentiated again, by reverse mode, with respect to v
    dmake = jvp(make, (w,), (np.ones(3),))[1]
    want = np.cos(w * v) - w * v * np.sin(w * v)
    np.testing.assert_allclose(grad(dmake)(v), want, rtol=1e-13)


def test_reverse_mode_of_a_function_returning_a_closure():
    make = lambda x: lambda y: x * x * y  # noqa: E731
    assert grad(lambda x: make(x)(4.0) * x)(3.0) == 108.0     # d/dx 4 x^3
    # grad of a function-valued function: a function-valued gradient, like D's
    g = grad(make)(3.0)
    assert g(2.0) == 12.0
    assert grad(lambda z: grad(make)(z)(z))(2.0) == 8.0       # d/dz 2 z^2
    assert D(lambda z: grad(make)(z)(z))(2.0) == 8.0
    value, gradient = value_and_grad(make)(3.0)
    assert (value(1.0), gradient(1.0)) == (9.0, 6.0)
    shift = lambda o: lambda g: lambda a: g(a + o)  # noqa: E731
    f_hat = grad(shift)(3.0)
    assert f_hat(f_hat(math.exp))(5.0) == pytest.approx(math.exp(11.0), rel=1e-14)


@pytest.mark.parametrize("jac", [jacfwd, jacrev])
def test_jacobians_of_functions_returning_closures(jac):
    w, v = np.array([0.3, -0.7]), np.array([1.0, 2.0])
    jacobian = jac(lambda u: lambda t: np.sin(u * t))(w)
    np.testing.assert_allclose(jacobian(v), np.diag(v * np.cos(w * v)), rtol=1e-14)
    closure, norm = jac(lambda u: (lambda t: np.sin(u * t), np.sum(u ** 2)))(w)
    np.testing.assert_allclose(closure(v), np.diag(v * np.cos(w * v)), rtol=1e-14)
    np.testing.assert_allclose(norm, 2 * w, rtol=1e-15)

    # under an outer derivative: d/dc sum(diag(c t cos(c u t)))
    def traced(c):
        return np.sum(jac(lambda u: lambda t: np.sin(c * u * t))(w)(v))

    assert D(traced)(1.0) == pytest.approx(fd(traced, 1.0), rel=1e-8)
    assert grad(traced)(1.0) == pytest.approx(fd(traced, 1.0), rel=1e-8)


def test_the_pullback_of_a_function_valued_output_is_an_error():
    _, pullback = vjp(lambda x: lambda y: x * y, 2.0)
    with pytest.raises(TypeError, match="function"):
        pullback(1.0)


@pytest.mark.parametrize("api", ["jvp", "vjp", "value_and_grad"])
def test_the_primal_of_a_function_valued_function_is_a_plain_closure(api):
    make = lambda x: lambda y: x * y * math.sin(y)  # noqa: E731
    if api == "jvp":
        value = jvp(make, (2.0,), (1.0,))[0]
    elif api == "vjp":
        value = vjp(make, 2.0)[0]
    else:
        value = value_and_grad(make)(2.0)[0]
    assert value(3.0) == 2.0 * 3.0 * math.sin(3.0)
    assert_plain(value(3.0))
    assert D(value)(3.0) == pytest.approx(2.0 * (math.sin(3.0) + 3.0 * math.cos(3.0)))


def test_a_closure_escaping_its_derivative_by_a_side_effect_fails_loudly():
    # the closure, made inside the inner derivative, captured that derivative's perturbed y;
    # used after the derivative returned, it raises (JAX's leaked-tracer error), never a
    # silently wrong number
    kept = []

    def inner(y):
        kept.append(lambda: y * 2.0)
        return y * y

    with pytest.raises(TagError, match="ForwardContext"):
        D(lambda x: D(inner)(x) * kept[-1]())(1.5)
    with pytest.raises(TagError, match="ForwardContext"):
        kept[-1]()


# -- random nestings: every mode pair, several couplings of the two variables -------------------

UNARY = {
    "sin": math.sin, "atan": math.atan, "square": lambda v: v * v,
    "exp_tanh": lambda v: math.exp(math.tanh(v)), "log1p_sq": lambda v: math.log1p(v * v),
}
COUPLINGS = {
    "sum": lambda u, x, y: u(x + y),
    "product": lambda u, x, y: u(x * y),
    "scaled": lambda u, x, y: x * u(y),
    "separate": lambda u, x, y: u(x) + u(y) * y,
    "nested": lambda u, x, y: u(u(x) * y + x),
}
POINTS = {"constant": lambda x: 0.3, "same": lambda x: x, "scaled": lambda x: 2.0 * x - 0.1}


@settings(max_examples=25, deadline=None)
@given(outer=st.sampled_from(sorted(DERIVATIVES)), inner=st.sampled_from(sorted(DERIVATIVES)),
       unary=st.sampled_from(sorted(UNARY)), coupling=st.sampled_from(sorted(COUPLINGS)),
       point=st.sampled_from(sorted(POINTS)), x=st.floats(-1.5, 1.5))
def test_random_nestings_against_finite_differences(outer, inner, unary, coupling, point, x):
    u, couple, at = UNARY[unary], COUPLINGS[coupling], POINTS[point]

    def with_inner(d):
        return lambda v: v * d(lambda y: couple(u, v, y))(at(v))

    got = DERIVATIVES[outer](with_inner(DERIVATIVES[inner]))(x)
    assert got == pytest.approx(D(with_inner(D))(x), rel=1e-10, abs=1e-12)
    assert got == pytest.approx(fd(with_inner(D), x), rel=1e-6, abs=1e-8)


# -- every mode pair, and three levels ---------------------------------------------------------

A, B = 0.7, 1.3
R_AB, PHI = math.hypot(A, B), math.atan2(B, A)


def expsin(x):
    return math.exp(A * x) * math.sin(B * x)


def expsin_n(n, x):
    """The n-th derivative of exp(a x) sin(b x): r^n exp(a x) sin(b x + n phi)."""
    return R_AB ** n * math.exp(A * x) * math.sin(B * x + n * PHI)


@pytest.mark.parametrize("pair", PAIRS, ids=pair_ids)
def test_second_derivative_in_every_mode_pair(pair):
    outer, inner = DERIVATIVES[pair[0]], DERIVATIVES[pair[1]]
    assert outer(inner(expsin))(0.4) == pytest.approx(expsin_n(2, 0.4), rel=1e-13)


@pytest.mark.parametrize("first", DERIVATIVES)
@pytest.mark.parametrize("second", DERIVATIVES)
@pytest.mark.parametrize("third", ["fwd", "rev"])
def test_third_derivative_three_levels(first, second, third):
    f3 = DERIVATIVES[first](DERIVATIVES[second](DERIVATIVES[third](expsin)))
    assert f3(0.4) == pytest.approx(expsin_n(3, 0.4), rel=1e-12)


def test_fourth_derivative_alternating_modes():
    f4 = D(grad(D(grad(expsin))))
    assert f4(-0.3) == pytest.approx(expsin_n(4, -0.3), rel=1e-12)
    f4 = grad(grad(grad(grad(expsin))))
    assert f4(-0.3) == pytest.approx(expsin_n(4, -0.3), rel=1e-12)


def cubic_form(x):
    return np.sum(np.sin(x) * x[0]) + x[1] ** 3 * x[2]


def cubic_form_hessian(x):
    n = len(x)
    h = np.diag(-np.sin(x) * x[0])
    h[0, 0] += 2 * math.cos(x[0])          # d2/dx0^2 of x0 sin(x0) = 2 cos(x0) - x0 sin(x0)
    for j in range(1, n):
        h[0, j] += math.cos(x[j])
        h[j, 0] += math.cos(x[j])
    h[1, 1] += 6 * x[1] * x[2]
    h[1, 2] += 3 * x[1] ** 2
    h[2, 1] += 3 * x[1] ** 2
    return h


HESSIANS = {
    "hessian": lambda f: hessian(f),
    "jacfwd-jacfwd": lambda f: jacfwd(jacfwd(f)),
    "jacfwd-jacrev": lambda f: jacfwd(jacrev(f)),
    "jacrev-jacfwd": lambda f: jacrev(jacfwd(f)),
    "jacrev-jacrev": lambda f: jacrev(jacrev(f)),
    "jacrev-grad": lambda f: jacrev(grad(f)),
    "jacfwd-grad": lambda f: jacfwd(grad(f)),
}


@pytest.mark.parametrize("how", HESSIANS)
def test_array_hessians_in_every_mode_pair(how):
    x = np.array([0.5, -1.2, 0.8, 2.0])
    got = HESSIANS[how](cubic_form)(x)
    want = cubic_form_hessian(x)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(want, fd(grad(cubic_form), x), rtol=1e-7, atol=1e-8)


def test_hvp_agrees_with_every_construction():
    x = np.array([0.5, -1.2, 0.8, 2.0])
    v = np.array([1.0, -2.0, 0.5, 0.25])
    want = cubic_form_hessian(x) @ v
    np.testing.assert_allclose(hvp(cubic_form, x, v), want, rtol=1e-12)
    np.testing.assert_allclose(jvp(grad(cubic_form), (x,), (v,))[1], want, rtol=1e-12)
    np.testing.assert_allclose(grad(lambda y: jvp(cubic_form, (y,), (v,))[1])(x), want,
                               rtol=1e-12)
    np.testing.assert_allclose(grad(lambda y: np.dot(grad(cubic_form)(y), v))(x), want,
                               rtol=1e-12)
    np.testing.assert_allclose(vjp(grad(cubic_form), x)[1](v)[0], want, rtol=1e-12)


def test_third_order_tensor_of_an_array_function():
    def f(x):
        return np.sum(x ** 3) * x[0] + np.prod(x)

    x = np.array([0.4, -0.9, 1.3])
    t_ff = jacfwd(jacfwd(jacfwd(f)))(x)
    t_rr = jacrev(jacrev(grad(f)))(x)
    t_fr = jacfwd(hessian(f))(x)
    t_rf = jacrev(jacfwd(jacrev(f)))(x)
    np.testing.assert_allclose(t_ff, fd(hessian(f), x), rtol=1e-6, atol=1e-7)
    for t in (t_rr, t_fr, t_rf):
        np.testing.assert_allclose(t, t_ff, rtol=1e-12, atol=1e-12)
    # symmetric in all three indices
    np.testing.assert_allclose(t_ff, np.transpose(t_ff, (1, 0, 2)), atol=1e-12)
    np.testing.assert_allclose(t_ff, np.transpose(t_ff, (2, 1, 0)), atol=1e-12)


# -- JAX's nesting tests -------------------------------------------------------------------------


def test_grad_of_jvp_with_a_closure_over_the_outer_value():
    # d/dx [d/dy sin(x y) at y = x] = d/dx x cos(x^2) = cos(x^2) - 2 x^2 sin(x^2)
    def f(x):
        return jvp(lambda y: math.sin(x * y), (x,), (1.0,))[1]

    x = 0.8
    want = math.cos(x * x) - 2 * x * x * math.sin(x * x)
    assert grad(f)(x) == pytest.approx(want, rel=1e-13)
    assert D(f)(x) == pytest.approx(want, rel=1e-13)


def test_jvp_of_grad_with_a_closure_over_the_outer_value():
    def f(x):
        return grad(lambda y: math.sin(x * y) * y)(x)     # sin(x^2) + x^2 cos(x^2)

    x = 0.8
    want = 2 * x * math.cos(x * x) + 2 * x * math.cos(x * x) - 2 * x ** 3 * math.sin(x * x)
    assert jvp(f, (x,), (1.0,))[1] == pytest.approx(want, rel=1e-13)
    assert grad(f)(x) == pytest.approx(want, rel=1e-13)
    assert fd(f, x) == pytest.approx(want, rel=1e-8)


def test_pullback_called_under_an_outer_derivative():
    # the pullback of x*y*y at y=2 is ct -> 4 x ct
    assert D(lambda x: vjp(lambda y: x * y * y, 2.0)[1](1.0)[0])(3.0) == 4.0
    _, pullback = vjp(math.sin, 2.0)
    assert D(lambda c: pullback(c)[0])(1.0) == pytest.approx(math.cos(2.0), rel=1e-15)
    assert grad(lambda c: pullback(c * c)[0])(3.0) == pytest.approx(6 * math.cos(2.0))
    # a cotangent that is itself the differentiated value: d/dx (x * x) = 2 x
    assert grad(lambda x: vjp(lambda y: y * x, 3.0)[1](x)[0])(2.0) == 4.0


def test_pullback_created_under_an_outer_derivative_and_used_there():
    def f(x):
        out, pullback = vjp(lambda y: np.sin(x * y), np.array([0.5, 1.0]))
        return np.sum(pullback(np.ones(2))[0]) + np.sum(out)

    x = 0.7
    assert D(f)(x) == pytest.approx(fd(f, x), rel=1e-8)
    assert grad(f)(x) == pytest.approx(fd(f, x), rel=1e-8)


def test_hessian_of_a_closure_over_the_outer_value():
    v0 = np.array([0.3, -0.4, 1.2])

    def trace_of_hessian(c):
        return np.trace(hessian(lambda v: c * np.sum(v ** 3) + np.sin(c) * v[0] * v[1])(v0))

    # trace = c * 6 * sum(v)
    c = 1.7
    assert trace_of_hessian(c) == pytest.approx(6 * c * np.sum(v0), rel=1e-13)
    assert grad(trace_of_hessian)(c) == pytest.approx(6 * np.sum(v0), rel=1e-13)
    assert D(trace_of_hessian)(c) == pytest.approx(6 * np.sum(v0), rel=1e-13)


def test_grad_of_grad_closing_over_outer_arrays():
    w0 = np.array([0.3, -0.5, 0.9])

    def inner_gradient_norm(w):
        g = grad(lambda v: np.sum(np.sin(v * w)) + np.dot(v, w) ** 2)(w ** 2)
        return np.sum(g * g)

    want = fd(inner_gradient_norm, w0)
    np.testing.assert_allclose(grad(inner_gradient_norm)(w0), want, rtol=1e-7)
    np.testing.assert_allclose(jacfwd(inner_gradient_norm)(w0), want, rtol=1e-7)


def test_value_and_grad_nested_with_aux():
    def loss(w, x):
        inner_value, g = value_and_grad(lambda u: np.sum((u * x) ** 2))(w)
        return inner_value + np.sum(g), g

    w, x = np.array([0.5, -1.0]), np.array([2.0, 3.0])
    g, aux = grad(loss, has_aux=True)(w, x)
    np.testing.assert_allclose(aux, 2 * w * x * x)
    np.testing.assert_allclose(g, 2 * w * x * x + 2 * x * x)


# -- derivatives inside counting, tracing and logging contexts ----------------------------------


def test_nested_derivatives_inside_a_counting_context():
    counter = CountContext()
    got = overdub(counter, lambda x: D(D(expsin))(x), 0.4)
    assert got == pytest.approx(expsin_n(2, 0.4), rel=1e-13)
    assert counter.counts[math.exp] >= 1
    counter = CountContext()
    got = overdub(counter, grad(grad(expsin)), 0.4)
    assert got == pytest.approx(expsin_n(2, 0.4), rel=1e-13)
    assert counter.counts[operator.mul] > 0


@pytest.mark.parametrize("make", [CountContext, TraceContext,
                                  lambda: LogContext(file=io.StringIO())],
                         ids=["count", "trace", "log"])
def test_every_mode_pair_inside_a_reference_context(make):
    x = np.array([0.5, -1.2, 0.8, 2.0])
    want = cubic_form_hessian(x)
    for how in ("hessian", "jacrev-jacrev", "jacfwd-jacfwd"):
        got = overdub(make(), HESSIANS[how](cubic_form), x)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
        assert_plain(got)
    assert overdub(make(), lambda: D(grad(expsin))(0.4)) == pytest.approx(expsin_n(2, 0.4))
    assert overdub(make(), lambda: grad(D(expsin))(0.4)) == pytest.approx(expsin_n(2, 0.4))


def test_log_context_sees_the_inner_derivatives_arithmetic():
    stream = io.StringIO()
    got = overdub(LogContext(file=stream), lambda: D(lambda x: x * D(lambda y: x * y)(2.0))(1.0))
    assert got == 2.0
    assert "mul" in stream.getvalue()


def test_derivative_of_a_context_that_runs_a_gradient():
    # the outer derivative differentiates through the counting context and the inner grad
    def f(y):
        return overdub(CountContext(), grad(expsin), y) * y

    want = expsin_n(2, 0.4) * 0.4 + expsin_n(1, 0.4)
    assert D(f)(0.4) == pytest.approx(want, rel=1e-13)
    assert grad(f)(0.4) == pytest.approx(want, rel=1e-13)
    assert overdub(TraceContext(), grad(f), 0.4) == pytest.approx(want, rel=1e-13)
    # a counting context running the derivative of a function that calls grad
    counter = CountContext()
    got = overdub(counter, D(lambda y: grad(expsin)(y) * y), 0.4)
    assert got == pytest.approx(want, rel=1e-13)
    assert counter.counts[math.sin] > 0 and counter.counts[math.cos] > 0


def test_gradient_through_a_tracing_context_inside_a_gradient():
    def traced(x):
        tracer = TraceContext()
        return overdub(tracer, lambda v: np.sum(np.sin(v) * v), x)

    x = np.array([0.1, 0.7, -0.4])
    want = np.sin(x) + x * np.cos(x)
    np.testing.assert_allclose(grad(traced)(x), want, rtol=1e-14)
    np.testing.assert_allclose(jacfwd(grad(traced))(x),
                               np.diag(2 * np.cos(x) - x * np.sin(x)), rtol=1e-13, atol=1e-15)


def test_counting_context_nested_between_two_derivatives():
    def middle(x):
        return overdub(CountContext(), lambda u: D(lambda y: u * y * y)(u), x)   # 2 u^2

    assert D(middle)(1.5) == pytest.approx(6.0)
    assert grad(middle)(1.5) == pytest.approx(6.0)


# -- custom rules and checkpointing under nesting ----------------------------------------------


@custom_jvp
def softplus(x):
    return math.log1p(math.exp(x))


@softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return softplus(x), dx / (1.0 + math.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


def test_custom_jvp_differentiated_twice():
    x = 0.3
    s = sigmoid(x)
    assert D(softplus)(x) == pytest.approx(s, rel=1e-15)
    assert D(D(softplus))(x) == pytest.approx(s * (1 - s), rel=1e-14)
    assert D(D(D(softplus)))(x) == pytest.approx(s * (1 - s) * (1 - 2 * s), rel=1e-13)
    assert grad(D(softplus))(x) == pytest.approx(s * (1 - s), rel=1e-14)


def test_custom_jvp_used_by_reverse_mode_and_nested():
    x = 0.3
    s = sigmoid(x)
    assert grad(softplus)(x) == pytest.approx(s, rel=1e-15)
    assert grad(grad(softplus))(x) == pytest.approx(s * (1 - s), rel=1e-14)
    assert D(grad(softplus))(x) == pytest.approx(s * (1 - s), rel=1e-14)


def test_custom_jvp_closing_over_an_outer_differentiated_value():
    def outer(x):
        @custom_jvp
        def scaled_square(y):
            return x * y * y

        @scaled_square.defjvp
        def _rule(primals, tangents):
            (y,), (dy,) = primals, tangents
            return x * y * y, 2.0 * x * y * dy

        return D(scaled_square)(2.0 * x)       # 2 x (2 x) = 4 x^2

    assert outer(1.5) == pytest.approx(9.0)
    assert D(outer)(1.5) == pytest.approx(12.0)
    assert grad(outer)(1.5) == pytest.approx(12.0)


@custom_vjp
def sin_vjp(x):
    return np.sin(x)


def _sin_fwd(x):
    return np.sin(x), np.cos(x)


def _sin_bwd(cos_x, ct):
    return (ct * cos_x,)


sin_vjp.defvjp(_sin_fwd, _sin_bwd)


def test_custom_vjp_differentiated_twice():
    x = 0.9
    assert grad(sin_vjp)(x) == pytest.approx(math.cos(x), rel=1e-15)
    assert grad(grad(sin_vjp))(x) == pytest.approx(-math.sin(x), rel=1e-14)
    assert D(grad(sin_vjp))(x) == pytest.approx(-math.sin(x), rel=1e-14)
    assert grad(D(sin_vjp))(x) == pytest.approx(-math.sin(x), rel=1e-14)
    assert grad(grad(grad(sin_vjp)))(x) == pytest.approx(-math.cos(x), rel=1e-14)
    v = np.array([0.1, 0.5, -0.3])
    np.testing.assert_allclose(hessian(lambda u: np.sum(sin_vjp(u)))(v), np.diag(-np.sin(v)),
                               rtol=1e-14, atol=1e-15)


def test_custom_vjp_closing_over_an_outer_differentiated_value():
    def outer(c):
        @custom_vjp
        def scale(y):
            return c * y

        def fwd(y):
            return c * y, None

        def bwd(_, ct):
            return (c * ct,)

        scale.defvjp(fwd, bwd)
        return grad(lambda y: scale(y) * y)(3.0)     # d/dy c y^2 = 2 c y = 6 c

    assert outer(0.5) == pytest.approx(3.0)
    assert grad(outer)(0.5) == pytest.approx(6.0)
    assert D(outer)(0.5) == pytest.approx(6.0)


def test_checkpoint_under_nesting():
    def layer(x):
        return np.tanh(x) * np.sin(x)

    def net(x):
        return np.sum(checkpoint(layer)(checkpoint(layer)(x)))

    def plain(x):
        return np.sum(layer(layer(x)))

    x = np.array([0.2, -0.6, 1.1])
    np.testing.assert_allclose(grad(net)(x), grad(plain)(x), rtol=1e-14)
    np.testing.assert_allclose(hessian(net)(x), hessian(plain)(x), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(jacrev(grad(net))(x), hessian(plain)(x), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(hessian(plain)(x), fd(grad(plain), x), rtol=1e-7, atol=1e-9)
    s = 0.7
    assert D(grad(lambda u: checkpoint(math.sin)(u) * u))(s) == pytest.approx(
        2 * math.cos(s) - s * math.sin(s), rel=1e-14)


def fixed_point_of(f):
    """JAX's implicit-function ``fixed_point`` (custom derivatives notebook): the solution of
    ``x = f(a, x)``, whose VJP solves the adjoint fixed point with ``vjp`` of ``f``, itself
    by ``fixed_point``.  ``f`` is fixed per instance (JAX passes it as a nondiff argument)."""
    @custom_vjp
    def fixed_point(a, x_guess):
        x_prev, x = x_guess, f(a, x_guess)
        while abs(x_prev - x) > 1e-12:
            x_prev, x = x, f(a, x)
        return x

    def fwd(a, x_guess):
        x_star = fixed_point(a, x_guess)
        return x_star, (a, x_star)

    def rev_iter(packed, u):
        a, x_star, x_star_bar = packed
        return x_star_bar + vjp(lambda x: f(a, x), x_star)[1](u)[0]

    def bwd(res, x_star_bar):
        a, x_star = res
        w = fixed_point_of(rev_iter)((a, x_star, x_star_bar), x_star_bar)
        return vjp(lambda b: f(b, x_star), a)[1](w)[0], 0.0 * x_star

    fixed_point.defvjp(fwd, bwd)
    return fixed_point


def newton_sqrt(a):
    return fixed_point_of(lambda b, x: 0.5 * (x + b / x))(a, a)


def test_implicit_fixed_point_custom_vjp_differentiated_twice():
    assert newton_sqrt(2.0) == pytest.approx(math.sqrt(2.0), rel=1e-15)
    assert grad(newton_sqrt)(2.0) == pytest.approx(0.5 / math.sqrt(2.0), rel=1e-12)
    second = -0.25 * 2.0 ** -1.5
    assert grad(grad(newton_sqrt))(2.0) == pytest.approx(second, rel=1e-10)
    assert D(grad(newton_sqrt))(2.0) == pytest.approx(second, rel=1e-10)


# -- NumPy arrays and in-place mutation under nesting -------------------------------------------


def scratch(x):
    buf = np.zeros(3)
    buf[0] = x[0] * x[1]
    buf[1:] += np.sin(x[1:])
    buf *= x[2]
    return np.sum(buf ** 2)


@pytest.mark.parametrize("how", HESSIANS)
def test_hessian_of_in_place_writes(how):
    x = np.array([0.4, -0.8, 1.3])
    got = HESSIANS[how](scratch)(x)
    np.testing.assert_allclose(got, fd(grad(scratch), x), rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(grad(scratch)(x), fd(scratch, x), rtol=1e-8)
    v = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(hvp(scratch, x, v), got @ v, rtol=1e-12, atol=1e-13)


CACHE = np.zeros(2)


def uses_cache(y, x):
    CACHE[0] = x * y
    CACHE[1] += y
    return CACHE[0] * y + CACHE[1]


def test_nested_derivatives_writing_a_preallocated_global():
    CACHE[:] = 0.0

    def outer(x):
        return D(lambda y: uses_cache(y, x))(x)        # d/dy (x y^2 + c + y) = 2 x y + 1

    assert outer(1.5) == pytest.approx(2 * 1.5 * 1.5 + 1)
    assert D(outer)(1.5) == pytest.approx(4 * 1.5)
    assert grad(outer)(1.5) == pytest.approx(4 * 1.5)
    assert not isinstance(CACHE[0], Tagged) and CACHE.dtype == float


class Holder:
    value = 0.0


HOLDER = Holder()
STORE = {"v": 0.0}
SLOTS = [0.0]


@pytest.mark.parametrize("pair", PAIRS, ids=pair_ids)
def test_an_inner_derivative_writing_outer_values_into_existing_containers(pair):
    outer_d, inner_d = DERIVATIVES[pair[0]], DERIVATIVES[pair[1]]
    CACHE[:] = 0.0

    def outer(x):
        def f(y):
            HOLDER.value = x * y
            STORE["v"] = x * y
            SLOTS[0] = x * y
            CACHE[0] = x * y
            return HOLDER.value + STORE["v"] + SLOTS[0] + CACHE[0]

        d = inner_d(f)(2.0)                                      # 4 x
        return d * (HOLDER.value + STORE["v"] + SLOTS[0] + CACHE[0])   # 4 x * 8 x

    assert outer_d(outer)(1.5) == pytest.approx(64 * 1.5)
    # the containers hold plain values once the derivatives return: neither the inner nor
    # the outer derivative's tags
    for value in (HOLDER.value, STORE["v"], SLOTS[0], CACHE[0]):
        assert type(value) in (float, np.float64) and value == 3.0


def test_nested_derivatives_of_list_accumulation():
    def outer(x):
        acc = []

        def inner(y):
            acc.append(x * y)
            acc.append(y * y)
            return acc[-2] + acc[-1]

        d = grad(inner)(x)          # x + 2 x = 3 x
        return d * acc[0]           # 3 x * x^2

    assert D(outer)(1.2) == pytest.approx(9 * 1.2 ** 2)
    assert grad(outer)(1.2) == pytest.approx(9 * 1.2 ** 2)


def test_jacobian_of_an_inner_gradient_with_in_place_updates():
    def descent(w):
        # three steps of gradient descent on a quadratic bowl centred on w, differentiated
        v = np.zeros(2)
        for _ in range(3):
            v -= 0.25 * grad(lambda u: np.sum((u - w) ** 2 * np.array([1.0, 3.0])))(v)
        return v

    w = np.array([1.0, -2.0])
    # v_{k+1} = v_k - 0.5 c (v_k - w): v_3 = (1 - (1 - 0.5 c)^3) w, c = (1, 3)
    factor = 1 - (1 - 0.5 * np.array([1.0, 3.0])) ** 3
    np.testing.assert_allclose(descent(w), factor * w, rtol=1e-14)
    np.testing.assert_allclose(jacfwd(descent)(w), np.diag(factor), rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(jacrev(descent)(w), np.diag(factor), rtol=1e-14, atol=1e-15)


# -- Pearlmutter & Siskind's nested optimisation: saddle and particle --------------------------


GRADIENTS = {"f": jacfwd, "r": grad}   # the benchmarks' forward ("F") and reverse ("R") gradients
COMBOS = [a + b for a in GRADIENTS for b in GRADIENTS]


def _argmin(gradient, f, x, steps):
    """Fixed-step gradient descent, differentiable end to end."""
    g = gradient(f)
    for _ in range(steps):
        x = x - 0.2 * g(x)
    return x


def _saddle_value(inner_gradient, p1):
    """max over p2 of f(p1, p2) by six steps of gradient ascent, for the saddle of the
    benchmark, f = |p1|^2 - |p2|^2, with p2's optimum shifted by p1 (so that it depends on the
    outer variable)."""
    def objective(p2):
        return (p1[0] ** 2 + p1[1] ** 2) - ((p2[0] - 0.5 * p1[1]) ** 2 + p2[1] ** 2)

    p2 = _argmin(inner_gradient, lambda p: -objective(p), np.array([1.0, 1.0]), 6)
    return objective(p2)


@pytest.mark.parametrize("combo", COMBOS)
def test_saddle_point_gradient_in_every_mode_pair(combo):
    outer, inner = GRADIENTS[combo[0]], GRADIENTS[combo[1]]
    p1 = np.array([0.6, -0.3])

    def value(p):
        return _saddle_value(inner, p)

    g = outer(value)(p1)
    np.testing.assert_allclose(g, fd(value, p1), rtol=1e-7)
    # outer descent steps on the value of the inner maximisation
    r1 = _argmin(outer, value, np.array([1.0, 1.0]), 3)
    np.testing.assert_allclose(r1, _argmin(lambda f: (lambda p: fd(f, p)), value,
                                           np.array([1.0, 1.0]), 3), rtol=1e-7)


def _particle_miss(gradient, w):
    """Squared x-distance from the origin where a charged particle, pushed by two charges
    (one at (10, 10 - w)), crosses the x axis; naive Euler integration, dt = 0.1."""
    def potential(x):
        return (1.0 / np.sqrt((x[0] - 10.0) ** 2 + (x[1] - 10.0 + w) ** 2)
                + 1.0 / np.sqrt((x[0] - 10.0) ** 2 + x[1] ** 2))

    x = np.array([0.0, 8.0])
    xdot = np.array([0.75, 0.0])
    dt = 0.1
    while True:
        xddot = -gradient(potential)(x)
        x_new = x + dt * xdot
        if x_new[1] <= 0.0:
            break
        x = x_new
        xdot = xdot + dt * xddot
    dt_f = -x[1] / xdot[1]
    x_f = x + dt_f * xdot
    return x_f[0] * x_f[0]


@pytest.mark.parametrize("combo", COMBOS)
def test_particle_gradient_in_every_mode_pair(combo):
    # the control w is a scalar: its derivative by D ("f") or grad ("r"); the force inside the
    # Euler loop is a gradient in two dimensions by forward or reverse mode
    outer = derivative if combo[0] == "f" else grad
    inner = GRADIENTS[combo[1]]
    d = outer(lambda w: _particle_miss(inner, w))(0.0)
    assert d == pytest.approx(fd(lambda w: _particle_miss(grad, w), 0.0, h=1e-6), rel=1e-6)


# -- a differentiated key into an object whose __getitem__ is Python --------------------------

class _Squares:
    """A lookup table written in Python: its __getitem__ is code to differentiate."""

    def __getitem__(self, key):
        return 3.0 * key * key


def test_a_differentiated_key_is_seen_by_a_python_getitem():
    def f(x):
        return _Squares()[x]
    assert D(f, 2.0) == 12.0 and grad(f)(2.0) == 12.0
    assert D(D(f), 2.0) == 6.0 and grad(grad(f))(2.0) == 6.0 and D(grad(f), 2.0) == 6.0


def test_np_r_of_one_differentiated_array():
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(grad(lambda x: np.sum(np.r_[x] ** 2))(x), 2 * x)
    np.testing.assert_allclose(jvp(lambda x: np.sum(np.r_[x] ** 2), (x,), (np.ones(2),))[1], 6.0)


# -- operators between a differentiated value and a class defining them in Python -------------

class _Triple:
    """Multiplies by 3 from the left, by 5 from the right: the rule for * cannot know."""

    def __mul__(self, other):
        return other * 3.0

    def __rmul__(self, other):
        return other * 5.0


class _Squarer:
    def __rmul__(self, other):
        return other ** 2

    def __radd__(self, other):
        return 7.0 * other


def _twice_triple(x):
    y = _Triple() * x
    return y * x  # 3 x^2


@pytest.mark.parametrize("f, x, first, second", [
    (lambda x: _Triple() * x, 2.0, 3.0, 0.0),
    (lambda x: x * _Triple(), 2.0, 5.0, 0.0),     # float * _Triple: the reflected method
    (lambda x: x * _Squarer(), 3.0, 6.0, 2.0),
    (lambda x: x + _Squarer(), 1.0, 7.0, 0.0),
    (_twice_triple, 2.0, 12.0, 6.0),
])
def test_a_class_operator_method_is_run_not_replaced_by_the_rule(f, x, first, second):
    assert D(f, x) == first and grad(f)(x) == first
    assert D(D(f), x) == second and grad(grad(f))(x) == second and D(grad(f), x) == second
