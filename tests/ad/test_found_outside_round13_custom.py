"""``custom_vjp`` and ``custom_jvp`` held to JAX's contract, as found by testing from outside
(round 13): a ``custom_vjp``'s rule is used for outputs that are dicts or nested containers and
for derivatives that reach it only through a container argument; what its ``fwd`` and ``bwd``
return is checked; a differentiated ``nondiff_argnums`` argument, a ``custom_jvp`` rule that is
not linear in the tangents, a function without a rule and a rule reading a differentiated value
from its closure raise instead of giving a silent zero or the body's derivative.

The rules below are deliberately not the body's derivative (factors 7, 11, 100): a result equal
to the rule's proves the rule ran, one equal to the body's that it was skipped.  Each expected
value is the finite difference of the function whose derivative the rule states."""

import functools

import numpy as np
import pytest

from overdub_ad import (MissingRuleError, custom_jvp, custom_vjp, derivative, grad, hessian,
                        jacrev, jvp, vjp)
from overdub_ad.testing import REFERENCE, force_route
from tests.conftest import fd


def both_routes(check):
    """``check()`` on the default route and on the reference route (every fast path off)."""
    check()
    with force_route(REFERENCE):
        check()


# -- W1: outputs that are dicts, nested containers, lists -------------------------------------
# JAX: bwd gets the cotangent in the output's pytree structure.

def test_dict_output_uses_the_rule():
    seen = []

    @custom_vjp
    def g(x):
        return {"s": 3 * x}

    def g_bwd(_, ct):
        seen.append(ct)
        return (100.0 * ct["s"],)  # the rule states g(x)["s"] = 100 x

    g.defvjp(lambda x: (g(x), None), g_bwd)

    def check():
        assert grad(lambda x: g(x)["s"])(1.0) == pytest.approx(fd(lambda x: 100 * x, 1.0))
        assert vjp(g, 1.0)[1]({"s": 2.0}) == (200.0,)

    both_routes(check)
    assert seen and all(type(ct) is dict and set(ct) == {"s"} for ct in seen)


def test_nested_tuple_and_list_outputs_use_the_rule():
    seen = []

    @custom_vjp
    def h(x):
        return (2 * x, [3 * x, 4 * x])

    def h_bwd(_, ct):
        seen.append(ct)
        # the rule states h(x) = (7 x, [11 x, 13 x])
        return (7.0 * ct[0] + 11.0 * ct[1][0] + 13.0 * ct[1][1],)

    h.defvjp(lambda x: (h(x), None), h_bwd)

    def check():
        assert grad(lambda x: h(x)[1][0])(1.0) == pytest.approx(fd(lambda x: 11 * x, 1.0))
        assert grad(lambda x: h(x)[0] + h(x)[1][1])(1.0) == pytest.approx(20.0)
        assert vjp(h, 1.0)[1]((1.0, [10.0, 100.0])) == (7.0 + 110.0 + 1300.0,)

    both_routes(check)
    assert all(type(ct) is tuple and type(ct[1]) is list for ct in seen)  # (JAX keeps the list)
    assert seen[0] == (0.0, [1.0, 0.0])  # the unused outputs' cotangents are zeros


# -- W2: the derivative reaches the rule only through a container argument ----------------------
# JAX: the rule is used for any differentiated leaf of any argument.

def test_tuple_argument_uses_the_rule():
    @custom_vjp
    def f(t):
        return t[0] * t[1]

    # the rule states f(t) = 7 t[0] + 11 t[1]
    f.defvjp(lambda t: (f(t), None), lambda _, ct: ((7.0 * ct, 11.0 * ct),))

    def check():
        assert grad(f)((2.0, 3.0)) == (7.0, 11.0)
        assert grad(lambda x: f((x, 3.0)))(2.0) == pytest.approx(
            fd(lambda x: 7 * x + 33.0, 2.0))
        assert grad(lambda d: f((d["a"], 3.0)))({"a": 2.0}) == {"a": 7.0}

    both_routes(check)


def test_argnums_selecting_a_container_argument_uses_the_rule():
    @custom_vjp
    def g(x, t):
        return x * t[0] * t[1]

    # the rule states g(x, t) = 100 x + 200 t[0] + 300 t[1]
    g.defvjp(lambda x, t: (g(x, t), None), lambda _, ct: (100.0 * ct, (200.0 * ct, 300.0 * ct)))

    def check():
        assert grad(g, argnums=1)(2.0, (3.0, 4.0)) == (200.0, 300.0)
        assert grad(lambda x: g(2.0, (x, 4.0)))(3.0) == pytest.approx(
            fd(lambda x: 200 * x, 3.0))
        assert grad(lambda x: g(x, (x, 4.0)))(3.0) == pytest.approx(300.0)

    both_routes(check)


def test_dict_argument_uses_the_rule():
    @custom_vjp
    def energy(p):
        return np.sum(p["w"] * p["b"][0]) + p["b"][1]

    # the rule states energy(p) = 10 sum(w) + 100 b0 + 1000 b1
    energy.defvjp(lambda p: (energy(p), None),
                  lambda _, ct: ({"w": 10.0 * ct * np.ones(2), "b": (100.0 * ct, 1000.0 * ct)},))
    g = grad(energy)({"w": np.ones(2), "b": (3.0, 1.0)})
    np.testing.assert_array_equal(g["w"], [10.0, 10.0])
    assert g["b"] == (100.0, 1000.0)


# -- W3: what bwd returns, and nondiff_argnums ---------------------------------------------------
# JAX: bwd must return a tuple with one cotangent (or None) per argument, each of its argument's
# structure and shape (TypeError / ValueError otherwise); differentiating a nondiff argument
# raises.

def test_differentiated_nondiff_argument_raises():
    @functools.partial(custom_vjp, nondiff_argnums=(1,))
    def power(x, n):
        return x ** n

    power.defvjp(lambda x, n: (x ** n, x), lambda n, x, ct: (ct * n * x ** (n - 1),))
    assert grad(lambda x: power(x, 3.0))(2.0) == 12.0  # (the allowed use still works)
    with pytest.raises(TypeError, match=r"power: argument 1 .*nondiff_argnums"):
        grad(lambda n: power(2.0, n))(3.0)

    @functools.partial(custom_jvp, nondiff_argnums=(1,))
    def scaled(x, k):
        return k * x

    @scaled.defjvp
    def _scaled_jvp(k, primals, tangents):
        return scaled(primals[0], k), k * tangents[0]

    assert grad(lambda x: scaled(x, 3.0))(2.0) == derivative(lambda x: scaled(x, 3.0), 2.0) == 3.0
    for differentiate in (grad, derivative):
        with pytest.raises(TypeError, match=r"scaled: argument 1 .*nondiff_argnums"):
            differentiate(lambda k: scaled(2.0, k))(3.0)


def test_bwd_returning_too_few_or_too_many_cotangents_raises():
    @custom_vjp
    def mul(x, y):
        return x * y

    mul.defvjp(lambda x, y: (x * y, (x, y)), lambda r, ct: (ct * r[1],))  # y's forgotten
    with pytest.raises(TypeError, match=r"bwd of custom_vjp function .*mul.*2 here"):
        grad(mul, argnums=1)(2.0, 3.0)

    @custom_vjp
    def twice(x):
        return 2 * x

    twice.defvjp(lambda x: (twice(x), None), lambda _, ct: (2 * ct, 5.0, 6.0))
    with pytest.raises(TypeError, match=r"twice.*got a tuple of length 3"):
        grad(twice)(2.0)
    twice.defvjp(lambda x: (twice(x), None), lambda _, ct: 2 * ct)  # not a tuple
    with pytest.raises(TypeError, match=r"twice.*got a float"):
        grad(twice)(2.0)

    @functools.partial(custom_vjp, nondiff_argnums=(0,))
    def shift(k, x, y):
        return k + x + y

    shift.defvjp(lambda k, x, y: (shift(k, x, y), None), lambda k, _, ct: (ct,))
    with pytest.raises(TypeError, match=r"shift.*not in nondiff_argnums, 2 here"):
        grad(lambda y: shift(1.0, 2.0, y))(3.0)


def test_none_cotangents_are_zeros():
    @custom_vjp
    def mul(x, y):
        return x * y

    mul.defvjp(lambda x, y: (x * y, (x, y)), lambda r, ct: (7.0 * ct, None))
    assert grad(mul, argnums=(0, 1))(2.0, 3.0) == (7.0, 0.0)

    @custom_vjp
    def pair(t):
        return t[0] * t[1]

    pair.defvjp(lambda t: (pair(t), None), lambda _, ct: ((7.0 * ct, None),))
    assert grad(pair)((2.0, 3.0)) == (7.0, 0.0)


def test_bwd_cotangent_of_the_wrong_shape_raises():
    @custom_vjp
    def g(x):
        return np.sum(x)

    g.defvjp(lambda x: (g(x), None), lambda _, ct: (ct * np.ones(3),))
    np.testing.assert_array_equal(grad(g)(np.zeros(3)), np.ones(3))
    with pytest.raises(ValueError, match=r"g returned a cotangent of shape \(3,\) for argument "
                                         r"0, of shape \(\)"):
        grad(g)(1.0)  # (was summed: 3.0)
    with pytest.raises(ValueError, match=r"shape \(3,\) for argument 0, of shape \(2,\)"):
        grad(g)(np.zeros(2))  # (was an error deep in NumPy)

    @custom_vjp
    def keyed(d):
        return d["a"]

    keyed.defvjp(lambda d: (keyed(d), None), lambda _, ct: ({"b": ct},))
    with pytest.raises(TypeError, match=r"keyed.*same keys"):
        grad(keyed)({"a": 1.0})


def test_fwd_not_returning_a_pair_raises():
    @custom_vjp
    def g(x):
        return 2 * x

    g.defvjp(lambda x: 2 * x, lambda _, ct: (2 * ct,))  # the residuals forgotten
    with pytest.raises(TypeError, match=r"fwd of custom_vjp function .*g must return a pair"):
        grad(g)(1.0)


# -- W4: a custom_jvp rule that is not linear in the tangents -------------------------------------
# JAX: jvp uses the rule as it is; grad transposes it and raises for a nonlinear map.

def test_nonlinear_jvp_rule_raises_in_reverse_mode():
    @custom_jvp
    def f(x):
        return x ** 2

    @f.defjvp
    def _f_jvp(primals, tangents):
        (x,), (dx,) = primals, tangents
        return x ** 2, 2 * x * dx ** 2  # (a user's bug)

    assert derivative(f, 3.0) == 6.0  # forward mode uses the rule as it is, as JAX does
    for route in (None, REFERENCE):
        with force_route(route) if route else _nothing():
            with pytest.raises(TypeError, match=r"f is not linear in the tangents"):
                grad(f)(3.0)  # (was a silent 0.0)
    with pytest.raises(TypeError, match=r"not linear in the tangents"):
        jacrev(lambda x: f(x) * np.ones(2))(3.0)

    @custom_jvp
    def affine(x):
        return 2 * x

    @affine.defjvp
    def _affine_jvp(primals, tangents):
        return 2 * primals[0], 2 * tangents[0] + 1.0  # a constant term
    with pytest.raises(TypeError, match=r"affine is not linear in the tangents"):
        grad(affine)(3.0)


def test_linear_jvp_rules_still_transpose():
    @custom_jvp
    def f(x, y):
        return np.sin(x) * y

    @f.defjvp
    def _f_jvp(primals, tangents):
        (x, y), (dx, dy) = primals, tangents
        # the rule states f(x, y) = sin(x) y + 7 (x + y): its tangent adds 7 (dx + dy)
        return f(x, y), np.cos(x) * y * dx + np.sin(x) * dy + 7.0 * (dx + dy)

    def stated(x, y):
        return np.sin(x) * y + 7.0 * (x + y)

    x = np.array([0.1, 0.5, 0.9])

    def check():
        gx, gy = grad(lambda x, y: np.sum(f(x, y)), argnums=(0, 1))(x, 2.0)
        np.testing.assert_allclose(gx, fd(lambda x: np.sum(stated(x, 2.0)), x), rtol=1e-7)
        assert gy == pytest.approx(fd(lambda y: np.sum(stated(x, y)), 2.0), rel=1e-7)
        np.testing.assert_allclose(hessian(lambda x: np.sum(f(x, 2.0)))(x),
                                   np.diag(-2.0 * np.sin(x)), atol=1e-9)

    both_routes(check)


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


# -- sections 2-4: no rule, a rule closing over a differentiated value ----------------------------

def test_function_without_a_rule_raises():
    # JAX: "No VJP defined for custom_vjp function f using defvjp" (and likewise for jvp)
    @custom_vjp
    def f(x):
        return 2 * x

    @custom_jvp
    def h(x):
        return 2 * x

    for fn, kind in ((f, "custom_vjp function .*f has no vjp rule"),
                     (h, "custom_jvp function .*h has no jvp rule")):
        with pytest.raises(TypeError, match=kind):
            fn(1.0)
        with pytest.raises(TypeError, match=kind):
            grad(fn)(1.0)
        with pytest.raises(TypeError, match=kind):
            jvp(fn, (1.0,), (1.0,))


def test_rule_reading_only_a_differentiated_closure_value_raises():
    calls = []

    def outer(w):
        @custom_vjp
        def f(x):
            return w * x

        f.defvjp(lambda x: (calls.append("fwd") or f(x), x), lambda x, ct: (ct * w,))
        return f(3.0)  # the argument is a constant: only w, in the closure, is differentiated

    with pytest.raises(MissingRuleError, match=r"f reads a differentiated value from its "
                                               r"closure"):
        grad(outer)(2.0)  # (was 3.0: the body differentiated, the rule never run)
    assert calls == []
