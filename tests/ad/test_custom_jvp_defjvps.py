"""``custom_jvp.defjvps``: one rule per argument, JAX's convenience form of ``defjvp``; the
parts of the output tangent are added, and an enclosing derivative differentiates the rules.

The rules state the derivative of ``sin(x) * y`` scaled by 7 in ``x`` and 11 in ``y``: a
result with those factors proves the rules ran, not the body's derivative."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from overdub_ad import custom_jvp, derivative, grad, hessian, jacfwd, jacrev, jvp

from tests.conftest import fd


def assert_close(got, want) -> None:
    assert np.allclose(got, want, rtol=1e-7, atol=1e-9), (got, want)


@custom_jvp
def scaled_sin(x, y):
    return np.sin(x) * y


scaled_sin.defjvps(lambda t, out, x, y: 7.0 * np.cos(x) * y * t,
                   lambda t, out, x, y: 11.0 * np.sin(x) * t)


@custom_jvp
def halves(x, y):
    return {"a": x * y, "b": (x - y, 2.0 * x)}


halves.defjvps(lambda t, out, x, y: {"a": y * t, "b": (t, 2.0 * t)},
               lambda t, out, x, y: {"a": x * t, "b": (-t, 0.0 * t)})


@custom_jvp
def only_first(x, y):
    return x ** 3 + np.floor(y)


only_first.defjvps(lambda t, out, x, y: 3.0 * x ** 2 * t, None)


def test_defjvps_gives_the_function_s_derivatives_in_every_api() -> None:
    x, y = 0.3, 2.0
    for _ in range(3):  # first and repeated calls
        assert_close(grad(scaled_sin)(x, y), 7.0 * np.cos(x) * y)
        assert_close(grad(scaled_sin, 1)(x, y), 11.0 * np.sin(x))
        assert_close(jvp(scaled_sin, (x, y), (1.0, 0.5))[1],
                     7.0 * np.cos(x) * y + 11.0 * np.sin(x) * 0.5)
        # the rules are differentiated by the enclosing derivative: d/dx of 7 cos(x) y
        assert_close(hessian(scaled_sin)(x, y), fd(lambda a: 7.0 * np.cos(a) * y, x))
        assert_close(derivative(lambda a: derivative(lambda b: scaled_sin(a, b))(y))(x),
                     fd(lambda a: 11.0 * np.sin(a), x))
        xs = np.array([0.3, 0.4])
        assert_close(jacfwd(scaled_sin)(xs, y), np.diag(7.0 * np.cos(xs) * y))
        assert_close(jacrev(scaled_sin)(xs, y), np.diag(7.0 * np.cos(xs) * y))


def test_defjvps_adds_the_parts_leaf_by_leaf_in_a_pytree_output() -> None:
    out, tangent = jvp(halves, (1.5, 2.0), (1.0, 0.25))
    assert out == {"a": 3.0, "b": (-0.5, 3.0)}
    assert_close(tangent["a"], 2.0 * 1.0 + 1.5 * 0.25)
    assert_close(tangent["b"][0], 1.0 - 0.25)
    assert_close(tangent["b"][1], 2.0)


def test_a_none_rule_gives_that_argument_no_derivative() -> None:
    assert_close(grad(only_first)(2.0, 0.7), 12.0)
    assert grad(only_first, 1)(2.0, 0.7) == 0.0
    assert_close(hessian(only_first)(2.0, 0.7), 12.0)


def test_defjvps_refuses_what_it_cannot_mean() -> None:
    @custom_jvp
    def two(x, y):
        return x * y

    two.defjvps(lambda t, out, x, y: y * t)  # one rule, two arguments
    with pytest.raises(TypeError, match=r"defjvps of .*two.*1 rule\(s\) for 2 argument"):
        grad(two)(1.0, 2.0)
    with pytest.raises(TypeError, match="neither callable nor None"):
        two.defjvps(3, None)

    @functools.partial(custom_jvp, nondiff_argnums=(0,))
    def power(n, x):
        return x ** n

    with pytest.raises(TypeError, match="nondiff_argnums; use defjvp"):
        power.defjvps(lambda t, out, n, x: n * t)

    @custom_jvp
    def pair(x):
        return (x, 2.0 * x)

    pair.defjvps(lambda t, out, x: t)  # a leaf for a tuple output
    with pytest.raises(TypeError, match="not a tangent shaped as the output"):
        jvp(pair, (1.0,), (1.0,))
