"""Found from outside (session 11's last tester, who checked that the stricter rules refuse
nothing valid): checkpoint and custom_vjp functions called with keyword arguments (checkpoint
raised naming its internal fwd; a custom_vjp's bwd had to give one cotangent per *given*
positional argument, a count that changed with which keyword was differentiated -- JAX binds
keywords to their parameters); a custom_jvp rule returning a list pair was refused (JAX takes
a list or tuple of two); jvp tangents, vjp cotangents and hvp directions that are dicts with
their items in another order were refused (a dict is one pytree, whatever the order)."""

from __future__ import annotations

import numpy as np
import pytest

from overdub_ad import (checkpoint, custom_jvp, custom_vjp, derivative, grad, hessian, hvp, jvp,
                        vjp)
from overdub_ad.testing import REFERENCE, force_route

ROUTES = [None, REFERENCE]


def layer(h, scale=1.0):
    return np.tanh(scale * h)


@custom_vjp
def scaled(x, k=1.0):
    return x * k


scaled.defvjp(lambda x, k=1.0: (x * k, (x, k)), lambda r, g: (g * r[1], g * r[0]))


@custom_jvp
def relu(x):
    return np.maximum(x, 0.0)


@relu.defjvp
def relu_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return [relu(x), np.where(x > 0, dx, 0.0)]     # a list of two, as JAX takes it


@pytest.mark.parametrize("route", ROUTES)
def test_keywords_reach_checkpoint_and_custom_vjp(route):
    want = 2.0 * (1 - np.tanh(1.0) ** 2)
    with force_route(route):
        for _ in range(2):
            assert grad(lambda h: checkpoint(layer)(h, scale=2.0))(0.5) == pytest.approx(want)
            assert derivative(lambda h: checkpoint(layer)(h, scale=2.0), 0.5) == \
                pytest.approx(want)
            assert grad(lambda x: scaled(x, k=3.0))(2.0) == pytest.approx(3.0)
            assert grad(lambda k: scaled(2.0, k=k))(3.0) == pytest.approx(2.0)
            assert grad(lambda x: scaled(x))(2.0) == pytest.approx(1.0)   # the default


@pytest.mark.parametrize("route", ROUTES)
def test_a_jvp_rule_may_return_a_list_pair(route):
    v = np.array([0.5, -1.0, 2.0])
    with force_route(route):
        for _ in range(2):
            np.testing.assert_allclose(grad(lambda u: np.sum(relu(u) ** 2))(v), [1.0, 0.0, 4.0])
            assert jvp(lambda u: np.sum(relu(u)), (v,), (np.ones(3),))[1] == 2.0
            np.testing.assert_allclose(hessian(lambda u: np.sum(relu(u) ** 2))(v),
                                       np.diag([2.0, 0.0, 2.0]))


@pytest.mark.parametrize("route", ROUTES)
def test_dicts_in_another_order_are_the_same_pytree(route):
    f = lambda d: d["a"] * np.sum(d["b"])                       # noqa: E731
    x = {"a": 2.0, "b": np.ones(3)}
    with force_route(route):
        for _ in range(2):
            out, tangent = jvp(f, (x,), ({"b": np.ones(3), "a": 1.0},))
            assert (out, tangent) == (6.0, 9.0)
            _, pullback = vjp(lambda p: {"u": p * 2, "v": p * 3}, 1.0)
            assert pullback({"v": 1.0, "u": 1.0}) == (5.0,)
            got = hvp(lambda d: d["a"] ** 2 * np.sum(d["b"] ** 2), x, {"b": np.ones(3), "a": 1.0})
            np.testing.assert_allclose(got["a"], 2 * 3 + 4 * 2 * 3)
            np.testing.assert_allclose(got["b"], 4 * 2 * 1 + 2 * 4 * 1)
    with pytest.raises(ValueError, match="structure"):           # other keys: another tree
        jvp(f, (x,), ({"c": np.ones(3), "a": 1.0},))
