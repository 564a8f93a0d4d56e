"""A custom_jvp or custom_vjp function called with nothing the inner derivative differentiates,
inside another derivative that does (``grad(grad(F, 1), 0)`` where the rule is about argument 0):
the inner derivative recursed into the function's body, so the outer one saw the body's
operations and differentiated them instead of the user's rule (found from outside: 2.0 where
JAX, by the rule, gives 6.0).  Now the inner derivative makes the call whole, and the outer
one takes it by the rule.  The rules differ from the bodies' derivatives on purpose (factor
3 and 5): a result by the rule proves the rule ran."""

from __future__ import annotations

import contextlib

import pytest

from overdub_ad import custom_jvp, custom_vjp, derivative, grad, hessian
from overdub_ad.testing import REFERENCE, force_route

# (each test compares the routes itself: nothing for CI's reference-route pass to add)
pytestmark = pytest.mark.every_route


@custom_jvp
def by_jvp(x, y):
    return x + y  # the rule says d/dx = 3


@by_jvp.defjvp
def _by_jvp_rule(primals, tangents):
    (x, y), (dx, dy) = primals, tangents
    return by_jvp(x, y), 3.0 * dx + dy


@custom_jvp
def by_jvps(x, y):
    return x + y


by_jvps.defjvps(lambda t, out, x, y: 3.0 * t, lambda t, out, x, y: t)


@custom_vjp
def by_vjp(x, y):
    return x + y  # the rule says d/dx = 5


by_vjp.defvjp(lambda x, y: (x + y, None), lambda _, ct: (5.0 * ct, ct))


def _mixed(h):
    """d/dx d/dy of h(x, y)**2: 2 * dh/dx * dh/dy, the first factor from the rule."""
    F = lambda x, y: h(x, y) ** 2  # noqa: E731
    return {
        "rev_over_rev": lambda: grad(grad(F, 1), 0)(0.7, 1.9),
        "fwd_over_rev": lambda: derivative(lambda x: grad(F, 1)(x, 1.9), 0.7),
        "rev_over_fwd": lambda: grad(lambda x: derivative(lambda y: F(x, y), 1.9))(0.7),
        "fwd_over_fwd": lambda: derivative(lambda x: derivative(lambda y: F(x, y), 1.9), 0.7),
    }


@pytest.mark.parametrize("route", [None, REFERENCE], ids=["default", "reference"])
@pytest.mark.parametrize("order", ["rev_over_rev", "fwd_over_rev", "rev_over_fwd", "fwd_over_fwd"])
@pytest.mark.parametrize("h, factor", [(by_jvp, 3.0), (by_jvps, 3.0)], ids=["defjvp", "defjvps"])
def test_the_outer_derivative_takes_the_custom_jvp_rule(h, factor, order, route) -> None:
    with force_route(route) if route else contextlib.nullcontext():
        for _ in range(2):
            assert _mixed(h)[order]() == pytest.approx(2.0 * factor)


@pytest.mark.parametrize("route", [None, REFERENCE], ids=["default", "reference"])
@pytest.mark.parametrize("h, factor", [(by_jvp, 3.0), (by_jvps, 3.0), (by_vjp, 5.0)],
                         ids=["defjvp", "defjvps", "defvjp"])
def test_a_call_only_the_outer_derivative_differentiates_takes_the_rule(h, factor, route):
    # the inner derivative (in y) gives h(x, 2.0) nothing of its own: the outer (in x) sees it
    inner = lambda x: grad(lambda y: h(x, 2.0) * y)(1.0)  # noqa: E731
    with force_route(route) if route else contextlib.nullcontext():
        for _ in range(2):
            assert grad(inner)(0.7) == pytest.approx(factor)
            if h is not by_vjp:  # (forward mode differentiates a custom_vjp's body)
                assert derivative(inner, 0.7) == pytest.approx(factor)


def test_a_call_with_nothing_differentiated_still_computes_the_body() -> None:
    assert grad(lambda x: x * by_jvp(2.0, 3.0))(1.5) == 5.0
    assert grad(lambda x: x * by_vjp(2.0, 3.0))(1.5) == 5.0
    assert hessian(lambda x: by_jvp(x, 1.0) ** 2)(0.5) == pytest.approx(18.0)  # 2 * 3 * 3
