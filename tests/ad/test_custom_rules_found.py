"""``custom_jvp`` rules as JAX runs them, and ``jacrev`` of complex outputs, as found by testing
from outside: a rule is used (not the body differentiated) for arguments that are tuples, lists
and dicts; it sees primal-shaped tangents under ``jacfwd``; it is given the defaults; ``jacrev``
of a real-to-complex function raises instead of dropping the imaginary part."""

import functools
import math

import numpy as np
import pytest

import overdub_ad as ad
from overdub_ad import custom_jvp, grad, hessian, jacfwd, jacrev, jvp
from tests.conftest import fd


# -- the rule is used for pytree arguments ----------------------------------------------------
# The rules below are deliberately not the body's derivative (7 and 11, not the other factor):
# a result equal to the rule's proves the rule ran, one equal to the body's that it was skipped.

@custom_jvp
def pair_product(t):
    return t[0] * t[1]


@pair_product.defjvp
def _pair_product_jvp(primals, tangents):
    (t,), (dt,) = primals, tangents
    return pair_product(t), 7.0 * dt[0] + 11.0 * dt[1]


@custom_jvp
def dict_product(d):
    return d["a"] * d["b"]


@dict_product.defjvp
def _dict_product_jvp(primals, tangents):
    (d,), (dd,) = primals, tangents
    return dict_product(d), 7.0 * dd["a"] + 11.0 * dd["b"]


@pytest.mark.parametrize("container", [tuple, list])
def test_rule_used_for_a_sequence_argument(container):
    t = container([1.0, 2.0])
    g = grad(pair_product)(t)
    assert type(g) is container and list(g) == [7.0, 11.0]
    assert list(grad(pair_product)(t)) == [7.0, 11.0]  # a repeated call too
    assert jvp(pair_product, (t,), (container([1.0, 0.0]),)) == (2.0, 7.0)
    assert jvp(pair_product, (t,), (container([0.0, 1.0]),)) == (2.0, 11.0)


def test_rule_used_for_a_dict_argument():
    d = {"a": 1.0, "b": 2.0}
    assert grad(dict_product)(d) == {"a": 7.0, "b": 11.0}
    assert jvp(dict_product, (d,), ({"a": 1.0, "b": 0.0},)) == (2.0, 7.0)
    assert jvp(dict_product, (d,), ({"a": 0.0, "b": 1.0},)) == (2.0, 11.0)


def built_in_place(x):
    """A dict filled by stores inside the differentiated code, one member plain."""
    d = {"a": x, "b": 3.0}
    d["b"] = d["b"] * x
    return dict_product(d)


def test_rule_used_for_containers_built_inside():
    # d/dx of the rule's tangent: 7 * 1 + 11 * 3, both modes
    assert grad(built_in_place)(2.0) == 40.0
    assert jvp(built_in_place, (2.0,), (1.0,)) == (12.0, 40.0)
    assert grad(lambda x: pair_product([x, 5.0]))(2.0) == 7.0
    assert jvp(lambda x: pair_product((5.0, x)), (2.0,), (1.0,)) == (10.0, 11.0)


def test_rule_gets_the_arguments_structure_with_zero_tangents():
    seen = []

    @custom_jvp
    def f(d):
        return d["x"] * d["n"][0]

    @f.defjvp
    def _f_jvp(primals, tangents):
        seen.append((primals, tangents))
        (d,), (dd,) = primals, tangents
        return f(d), dd["x"] * d["n"][0] + d["x"] * dd["n"][0]

    def outer(x):
        return f({"x": x, "n": (4.0,)})

    for derivative in (grad(outer)(3.0), jvp(outer, (3.0,), (1.0,))[1]):
        assert derivative == pytest.approx(fd(outer, 3.0))
    # forward mode's tangents are the direction's (reverse mode's stand for the argument)
    assert seen[1] == (({"x": 3.0, "n": (4.0,)},), ({"x": 1.0, "n": (0.0,)},))
    assert len(seen) == 2
    for primals, tangents in seen:
        assert primals == ({"x": 3.0, "n": (4.0,)},)
        assert type(primals[0]) is dict and type(primals[0]["n"]) is tuple
        assert type(tangents[0]) is dict and set(tangents[0]) == {"x", "n"}
        assert float(tangents[0]["n"][0]) == 0.0


def test_rule_for_a_dict_argument_nested():
    # an enclosing derivative differentiates the rule (exact here): the body's Hessian
    @custom_jvp
    def g(d):
        return d["a"] * d["b"] ** 2

    @g.defjvp
    def _g_jvp(primals, tangents):
        (d,), (dd,) = primals, tangents
        return g(d), dd["a"] * d["b"] ** 2 + 2.0 * d["a"] * d["b"] * dd["b"]

    def h(x):
        return g({"a": x[0], "b": x[1]})

    x = np.array([1.5, -0.5])
    expected = np.array([[0.0, 2 * x[1]], [2 * x[1], 2 * x[0]]])
    np.testing.assert_allclose(hessian(h)(x), expected, rtol=1e-12)
    np.testing.assert_allclose(jacfwd(jacrev(h))(x), expected, rtol=1e-12)
    np.testing.assert_allclose(jacrev(jacfwd(h))(x), expected, rtol=1e-12)
    np.testing.assert_allclose(hessian(h)(x), fd(lambda v: fd(h, v), x), atol=1e-4)


# -- jacfwd: one direction at a time ---------------------------------------------------------

@custom_jvp
def scaled_by_sum(x):
    return x * np.sum(x)


@scaled_by_sum.defjvp
def _scaled_by_sum_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    assert np.shape(dx) == np.shape(x)  # primal-shaped, as in JAX
    return scaled_by_sum(x), dx * np.sum(x) + x * np.sum(dx)


def test_jacfwd_runs_a_reducing_rule_per_direction():
    x = np.array([1.0, 2.0])
    expected = np.array([[4.0, 1.0], [2.0, 5.0]])
    for _ in range(2):
        np.testing.assert_array_equal(jacfwd(scaled_by_sum)(x), expected)
    np.testing.assert_array_equal(jacrev(scaled_by_sum)(x), expected)
    np.testing.assert_allclose(expected, fd(lambda v: v * np.sum(v), x), rtol=1e-8)


def test_jacfwd_of_a_matrix_argument_and_an_unbatched_jvp():
    x = np.array([[1.0, -2.0], [0.5, 3.0]])
    expected = fd(lambda v: v * np.sum(v), x)
    assert expected.shape == (2, 2, 2, 2)
    np.testing.assert_allclose(jacfwd(scaled_by_sum)(x), expected, rtol=1e-8)
    np.testing.assert_allclose(jacrev(scaled_by_sum)(x), expected, rtol=1e-8)
    v = np.array([[0.3, 0.0], [-1.0, 2.0]])
    np.testing.assert_allclose(jvp(scaled_by_sum, (x,), (v,))[1],
                               np.tensordot(expected, v, axes=2), rtol=1e-8)


def test_jacfwd_of_a_scalar_output_rule():
    @custom_jvp
    def total(x):
        return np.sum(x) ** 2

    @total.defjvp
    def _total_jvp(primals, tangents):
        (x,), (dx,) = primals, tangents
        assert np.shape(dx) == np.shape(x)
        return total(x), 2.0 * np.sum(x) * np.sum(dx)

    x = np.array([1.0, 2.0, 4.0])
    np.testing.assert_array_equal(jacfwd(total)(x), np.full(3, 14.0))
    np.testing.assert_array_equal(grad(total)(x), np.full(3, 14.0))
    np.testing.assert_allclose(hessian(total)(x), np.full((3, 3), 2.0), rtol=1e-12)


# -- defaults ------------------------------------------------------------------------------

def test_rule_gets_the_defaults():
    seen = []

    @custom_jvp
    def kw(x, scale=2.0):
        return x * scale

    @kw.defjvp
    def _kw_jvp(primals, tangents):
        seen.append(primals)
        return kw(*primals), tangents[0] * primals[1] + tangents[1] * primals[0]

    assert jvp(kw, (1.0,), (1.0,)) == (2.0, 2.0)
    assert grad(kw)(1.0) == 2.0
    assert grad(lambda s: kw(1.5, scale=s))(3.0) == 1.5
    assert jvp(lambda x: kw(x, 5.0), (1.0,), (1.0,)) == (5.0, 5.0)
    assert seen == [(1.0, 2.0), (1.0, 2.0), (1.5, 3.0), (1.0, 5.0)]


# -- jacrev of complex outputs -----------------------------------------------------------------

def test_jacrev_of_a_real_to_complex_function_raises():
    with pytest.raises(TypeError, match="jacrev of a complex-valued function of real inputs"):
        jacrev(lambda t: t * 1j)(2.0)
    with pytest.raises(TypeError, match="use jacfwd"):
        jacrev(lambda t: np.exp(1j * t))(np.array([0.5, 1.0]))
    with pytest.raises(TypeError, match="requires complex inputs"):
        jacrev(lambda t: t * 1j, holomorphic=True)(2.0)
    assert jacfwd(lambda t: t * 1j)(2.0) == 1j
    # the parts, each real, are what jacrev gives
    assert jacrev(lambda t: (t * (1 + 2j)).imag)(2.0) == 2.0


def test_jacrev_of_complex_inputs_is_still_holomorphic():
    z = np.array([1 + 1j, 2 - 1j])
    np.testing.assert_allclose(jacrev(lambda z: z * z, holomorphic=True)(z), np.diag(2 * z))
    np.testing.assert_allclose(jacrev(lambda z: z * z, holomorphic=True)(z),
                               jacfwd(lambda z: z * z, holomorphic=True)(z))
    # without holomorphic=True a complex-valued function of complex inputs is refused, as in
    # JAX: for a non-holomorphic one (z * |z|) the pullbacks of unit cotangents are no Jacobian
    with pytest.raises(TypeError, match="holomorphic=True"):
        jacrev(lambda z: z * z)(z)


# -- nondiff_argnums (JAX's API) ------------------------------------------------------------------



@functools.partial(ad.custom_jvp, nondiff_argnums=(0, 2))
def _apply_scaled(f, x, scale):
    return f(x) * scale


@_apply_scaled.defjvp
def _apply_scaled_jvp(f, scale, primals, tangents):
    (x,), (dx,) = primals, tangents
    return f(x) * scale, dx * ad.derivative(f, x) * scale * 10.0  # marked: 10x


@pytest.mark.parametrize("api", ["derivative", "grad", "hessian-ish"])
def test_custom_jvp_nondiff_argnums(api):
    """The rule gets the non-differentiated arguments first, then the others' primals and
    tangents; reverse mode uses the same rule (its transpose), first and repeated calls."""
    for _ in range(2):
        if api == "derivative":
            got = ad.derivative(lambda x: _apply_scaled(math.sin, x, 2.0), 0.3)
        elif api == "grad":
            got = ad.grad(lambda x: _apply_scaled(math.sin, x, 2.0))(0.3)
        else:
            got = ad.derivative(lambda y: ad.grad(lambda x: _apply_scaled(math.sin, x, y))(0.3),
                                2.0)
            assert got == pytest.approx(10.0 * math.cos(0.3))
            continue
        assert got == pytest.approx(20.0 * math.cos(0.3))


@functools.partial(ad.custom_vjp, nondiff_argnums=(1,))
def _power(x, n):
    return x ** n


def _power_fwd(x, n):
    return x ** n, x


def _power_bwd(n, x, ct):
    return (ct * n * x ** (n - 1) * 10.0,)  # marked: 10x


_power.defvjp(_power_fwd, _power_bwd)


def test_custom_vjp_nondiff_argnums():
    x = np.array([1.0, 2.0, -0.5])
    for _ in range(2):
        assert ad.grad(lambda x: _power(x, 3))(2.0) == pytest.approx(120.0)
        np.testing.assert_allclose(ad.grad(lambda x: np.sum(_power(x, 2)))(x), 20.0 * x)
        np.testing.assert_allclose(ad.jacrev(lambda x: _power(x, 2))(x), np.diag(20.0 * x))
        assert ad.derivative(lambda x: _power(x, 3), 2.0) == pytest.approx(12.0)  # fn itself


def test_nondiff_argnums_is_checked():
    with pytest.raises(TypeError, match="nondiff_argnums must be a tuple"):
        ad.custom_jvp(lambda x: x, nondiff_argnums=(-1,))
    with pytest.raises(TypeError, match="nondiff_argnums must be a tuple"):
        ad.custom_vjp(lambda x: x, nondiff_argnums=(0, 0))
    f = ad.custom_vjp(lambda x: x, nondiff_argnums=(3,))
    f.defvjp(lambda x: (x, None), lambda n, r, ct: (ct,))
    with pytest.raises(TypeError, match="names argument 3"):
        ad.grad(f)(1.0)
