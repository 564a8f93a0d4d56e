"""The fast routes write the arithmetic operators out as the *shapes* of partials declared
beside their rules (linear with its constants, bilinear, quotient, power), and the quick
reverse rules are declared beside the rules they speed up: a user's rule for an operator wins
on every route, on the first call and on later ones, and the shipped numbers are back once
the rule is withdrawn.

Each user rule below is 100 times the shipped partials, so the user's derivatives are 100
times the shipped ones.  The rules compute with NumPy's functions, not with the operator they
are for: the second derivatives differentiate the rule itself, which would otherwise go through
the user's rule again."""

from __future__ import annotations

import operator

import numpy as np
import pytest

import overdub_ad as ad
from overdub_ad.testing import force_route, isolated_rules

# the shipped partials of each operator, ((a, b) -> d/da, (a, b) -> d/db), for numbers and
# arrays
PARTIALS = {
    operator.add: (lambda a, b: 1.0, lambda a, b: 1.0),
    operator.sub: (lambda a, b: 1.0, lambda a, b: -1.0),
    operator.mul: (lambda a, b: b, lambda a, b: a),
    operator.truediv: (lambda a, b: np.divide(1.0, b),
                       lambda a, b: np.negative(np.divide(a, np.multiply(b, b)))),
    operator.pow: (lambda a, b: np.multiply(b, np.power(a, np.subtract(b, 1.0))),
                   lambda a, b: np.multiply(np.power(a, b), np.log(a))),
}
OPERATORS = list(PARTIALS)
IDS = [op.__name__ for op in OPERATORS]


def register_hundredfold(op):
    """Rules for ``op`` (both modes) giving 100 times its shipped partials."""
    da, db = PARTIALS[op]
    ad.defjvp(op, lambda dx, out, x, y: np.multiply(np.multiply(100.0, dx), da(x, y)),
              lambda dy, out, x, y: np.multiply(np.multiply(100.0, dy), db(x, y)))
    ad.defvjp(op, lambda ct, out, x, y: np.multiply(np.multiply(100.0, ct), da(x, y)),
              lambda ct, out, x, y: np.multiply(np.multiply(100.0, ct), db(x, y)))


# -- scalar functions: the dual (forward) and the reverse scalar compiler ------------------------

def left_add(x):
    return x + 1.5


def right_add(x):
    return 1.5 + x


def left_sub(x):
    return x - 1.5


def right_sub(x):
    return 1.5 - x


def left_mul(x):
    return x * 1.5


def right_mul(x):
    return 1.5 * x


def left_truediv(x):
    return x / 1.5


def right_truediv(x):
    return 1.5 / x


def left_pow(x):
    return x ** 1.5


def right_pow(x):
    return 1.5 ** x


SCALAR = {operator.add: (left_add, right_add), operator.sub: (left_sub, right_sub),
          operator.mul: (left_mul, right_mul), operator.truediv: (left_truediv, right_truediv),
          operator.pow: (left_pow, right_pow)}
X = 0.8


def shipped_slopes(op):
    """d/dx of ``x op 1.5`` and of ``1.5 op x`` at X, from the shipped partials."""
    da, db = PARTIALS[op]
    return da(X, 1.5), db(1.5, X)


def looped(f):
    """``f`` applied in a loop of float arithmetic: what the scalar routes are for."""
    def run(x):
        total = 0.0
        for _ in range(4):
            total = total + f(x)
        return total
    return run


@pytest.mark.default_routes
@pytest.mark.parametrize("op", OPERATORS, ids=IDS)
def test_the_dual_follows_a_user_rule_for_an_operator(op):
    slopes = shipped_slopes(op)
    for f, slope in zip(SCALAR[op], slopes):
        assert "forward-dual" in ad.explain(ad.derivative, f, X).ran
        assert ad.derivative(f, X) == pytest.approx(slope, rel=1e-12)
    with isolated_rules():
        register_hundredfold(op)
        for _ in range(2):  # first and repeated call
            for f, slope in zip(SCALAR[op], slopes):
                assert ad.derivative(f, X) == pytest.approx(100.0 * slope, rel=1e-12)
                assert ad.jvp(f, (X,), (1.0,))[1] == pytest.approx(100.0 * slope, rel=1e-12)
    for f, slope in zip(SCALAR[op], slopes):
        report = ad.explain(ad.derivative, f, X)
        assert "forward-dual" in report.ran
        assert report.result == pytest.approx(slope, rel=1e-12)


# A derivative inside a derivative whose inner function closes over the outer variable: the
# dual boxes ``x`` and computes with it and plain numbers (``_Dual``'s arithmetic).

def nested_add(x):
    return ad.derivative(lambda y: (x + 1.5) * y + (1.5 + x) * y, 2.0)


def nested_sub(x):
    return ad.derivative(lambda y: (x - 1.5) * y + (1.5 - x) * y * y, 2.0)


def nested_mul(x):
    return ad.derivative(lambda y: (x * 1.5) * y + (1.5 * x) * y * y, 2.0)


def nested_truediv(x):
    return ad.derivative(lambda y: (x / 1.5) * y + (1.5 / x) * y * y, 2.0)


def nested_pow(x):
    return ad.derivative(lambda y: (x ** 1.5) * y + (1.5 ** x) * y * y, 2.0)


NESTED = {operator.add: nested_add, operator.sub: nested_sub, operator.mul: nested_mul,
          operator.truediv: nested_truediv, operator.pow: nested_pow}


@pytest.mark.default_routes
@pytest.mark.parametrize("op", OPERATORS, ids=IDS)
def test_nested_duals_follow_a_user_rule_for_an_operator(op):
    f = NESTED[op]
    left, right = shipped_slopes(op)
    shipped = left + right * (1.0 if op is operator.add else 4.0)  # d/dx, the inner at y = 2
    report = ad.explain(ad.derivative, f, X)
    assert "forward-dual" in report.ran
    assert report.result == pytest.approx(shipped, rel=1e-12)
    with isolated_rules():
        register_hundredfold(op)
        with force_route("reference"):
            want = ad.derivative(f, X)
        assert want != pytest.approx(shipped)
        for _ in range(2):
            assert ad.derivative(f, X) == pytest.approx(want, rel=1e-12)
    report = ad.explain(ad.derivative, f, X)
    assert "forward-dual" in report.ran
    assert report.result == pytest.approx(shipped, rel=1e-12)


@pytest.mark.default_routes
@pytest.mark.parametrize("op", OPERATORS, ids=IDS)
def test_the_reverse_scalar_compiler_follows_a_user_rule_for_an_operator(op):
    fs = [looped(f) for f in SCALAR[op]]
    slopes = [4.0 * s for s in shipped_slopes(op)]
    for f, slope in zip(fs, slopes):
        report = ad.explain(ad.grad, f, X)
        assert "reverse-specialised" in report.ran
        assert report.result == pytest.approx(slope, rel=1e-12)
    with isolated_rules():
        register_hundredfold(op)
        for _ in range(2):
            for f, slope in zip(fs, slopes):
                if op is operator.add:  # the loop's own sum is an addition too
                    with force_route("reference"):
                        want = ad.grad(f)(X)
                    assert want != pytest.approx(slope)
                else:
                    want = 100.0 * slope
                assert ad.grad(f)(X) == pytest.approx(want, rel=1e-12)
                assert ad.vjp(f, X)[1](1.0)[0] == pytest.approx(want, rel=1e-12)
    for f, slope in zip(fs, slopes):
        report = ad.explain(ad.grad, f, X)
        assert "reverse-specialised" in report.ran
        assert report.result == pytest.approx(slope, rel=1e-12)


# -- straight-line NumPy functions: the compiled hvp -------------------------------------------

def hvp_add(x):
    return np.sum(np.sin(x) + 1.5)


def hvp_radd(x):
    return np.sum(1.5 + np.sin(x))


def hvp_sub(x):
    return np.sum(np.sin(x) - 1.5)


def hvp_rsub(x):
    return np.sum(1.5 - np.sin(x))


def hvp_mul(x):  # (no other rule with a product: sin's rule, ct * cos(x), would be one)
    return np.sum(x * x)


def hvp_rmul(x):
    return np.sum(x[1:] * x[:-1])


def hvp_truediv(x):
    return np.sum(np.sin(x) / 1.5)


def hvp_rtruediv(x):
    return np.sum(1.5 / np.sin(x))


def hvp_pow(x):
    return np.sum(np.sin(x) ** 3)


HVP = {operator.add: (hvp_add, hvp_radd), operator.sub: (hvp_sub, hvp_rsub),
       operator.mul: (hvp_mul, hvp_rmul), operator.truediv: (hvp_truediv, hvp_rtruediv),
       operator.pow: (hvp_pow,)}
POINT = np.array([0.3, 0.9, 1.4])
DIRECTION = np.array([1.0, -0.5, 2.0])


@pytest.mark.default_routes
@pytest.mark.parametrize("op", OPERATORS, ids=IDS)
def test_the_compiled_hvp_follows_a_user_rule_for_an_operator(op):
    for f in HVP[op]:
        report = ad.explain(ad.hvp, f, POINT, DIRECTION)
        assert "hvp-compiled" in report.ran
        shipped = report.result
        with force_route("reference"):
            np.testing.assert_allclose(ad.hvp(f, POINT, DIRECTION), shipped, rtol=1e-12)
        with isolated_rules():
            register_hundredfold(op)
            with force_route("reference"):
                np.testing.assert_allclose(ad.hvp(f, POINT, DIRECTION), 100.0 * shipped,
                                           rtol=1e-12)
            for _ in range(2):
                np.testing.assert_allclose(ad.hvp(f, POINT, DIRECTION), 100.0 * shipped,
                                           rtol=1e-12)
                np.testing.assert_allclose(ad.hessian(f)(POINT) @ DIRECTION, 100.0 * shipped,
                                           rtol=1e-12)
        report = ad.explain(ad.hvp, f, POINT, DIRECTION)
        assert "hvp-compiled" in report.ran
        np.testing.assert_allclose(report.result, shipped, rtol=0)


# -- the quick reverse rules (x ** c, a @ b of matrices, np.sum(a)) ----------------------------

A = np.array([[0.5, -1.0, 2.0], [1.5, 0.3, -0.7]])
B = np.array([[1.0, 0.2], [-0.4, 0.8], [0.6, -1.1]])


def constant_power(x):
    return np.sum(x ** 3.0)


def constant_np_power(x):
    return np.sum(np.power(x, 2.0))


def matrix_product(a):
    return np.sum(np.sin(a @ B))


def matrix_np_product(a):
    return np.sum(np.sin(np.matmul(a, B)))


def whole_sum(a):
    return np.sum(np.sin(a))


def hundredfold_matmul(fn):
    ad.defjvp(fn, lambda dx, out, x, y: 100.0 * (dx @ y),
              lambda dy, out, x, y: 100.0 * (x @ dy))
    ad.defvjp(fn, lambda ct, out, x, y: 100.0 * (ct @ y.T),
              lambda ct, out, x, y: 100.0 * (x.T @ ct))


def hundredfold_sum(fn):
    ad.defjvp(fn, lambda dx, out, x: 100.0 * np.sum(dx))
    ad.defvjp(fn, lambda ct, out, x: 100.0 * ct * np.ones_like(x))


def hundredfold_np_power(fn):
    ad.defjvp(fn, lambda dx, out, x, y: 100.0 * dx * y * x ** (y - 1), lambda dy, out, x, y: 0.0)
    ad.defvjp(fn, lambda ct, out, x, y: 100.0 * ct * y * x ** (y - 1), lambda ct, out, x, y: 0.0)


QUICK = [(operator.pow, register_hundredfold, constant_power, A),
         (np.power, hundredfold_np_power, constant_np_power, A),
         (operator.matmul, hundredfold_matmul, matrix_product, A),
         (np.matmul, hundredfold_matmul, matrix_np_product, A),
         (np.sum, hundredfold_sum, whole_sum, A)]


@pytest.mark.parametrize("fn,register,f,x", QUICK, ids=[q[2].__name__ for q in QUICK])
def test_the_quick_reverse_rules_follow_a_user_rule(fn, register, f, x):
    with force_route("reference"):
        shipped = ad.grad(f)(x)
    with force_route("reverse-plans"):  # (the quick rules are this route's)
        np.testing.assert_allclose(ad.grad(f)(x), shipped, rtol=1e-13)
        with isolated_rules():
            register(fn)
            for _ in range(2):
                np.testing.assert_allclose(ad.grad(f)(x), 100.0 * shipped, rtol=1e-12)
                np.testing.assert_allclose(ad.vjp(f, x)[1](1.0)[0], 100.0 * shipped,
                                           rtol=1e-12)
        np.testing.assert_allclose(ad.grad(f)(x), shipped, rtol=1e-13)
    with isolated_rules():  # on the default routes too
        register(fn)
        np.testing.assert_allclose(ad.grad(f)(x), 100.0 * shipped, rtol=1e-12)
    np.testing.assert_allclose(ad.grad(f)(x), shipped, rtol=1e-13)


@pytest.mark.parametrize("f", [constant_power, constant_np_power, matrix_product,
                               matrix_np_product, whole_sum])
def test_the_quick_rules_give_the_shipped_numbers_on_hvp_too(f):
    """The quick rule of ``x ** c`` is recorded on hvp's tapes as well (the others are not):
    every hvp route agrees with the reference."""
    direction = np.ones_like(A) * 0.5
    with force_route("reference"):
        want = ad.hvp(f, A, direction)
    for route in ("hvp-tape", "hvp-compiled", "reverse-plans"):
        with force_route(route):
            np.testing.assert_allclose(ad.hvp(f, A, direction), want, rtol=1e-12)


def test_second_order_routes_follow_a_user_rule_inside_shipped_rules():
    """A declared second derivative restates the derivative of a shipped rule's own code
    (``ct * np.cos(x)`` for ``np.sin``): while the user has replaced ``*``, the reference
    route differentiates that code with the user's rule, and so must every hvp route."""
    x, v = np.array([0.3, -0.7, 1.1]), np.array([1.0, 0.5, -2.0])

    def f(x):
        return np.sum(np.sin(x) * 1.5)
    with isolated_rules():
        ad.defjvp(operator.mul, lambda dx, out, x, y: 100 * dx * y,
               lambda dy, out, x, y: 100 * x * dy)
        ad.defvjp(operator.mul, lambda ct, out, x, y: 100 * ct * y,
               lambda ct, out, x, y: 100 * ct * x)
        for _ in range(2):
            with force_route("reference"):
                want = ad.hvp(f, x, v)
            np.testing.assert_allclose(ad.hvp(f, x, v), want, rtol=1e-12)
    np.testing.assert_allclose(ad.hvp(f, x, v), -1.5 * np.sin(x) * v, rtol=1e-12)
