"""Forward mode (issue #4): ``derivative``/``D``, ``jvp``, ``jacfwd``, ``custom_jvp``, ``defjvp``
and ``check_grads``, on ordinary Python and NumPy code.

Every function under test is defined in this file: overdub rewrites functions from their source.
Expected values are analytic wherever possible, otherwise central finite differences.
"""

from __future__ import annotations

import cmath
import copy
import functools
import itertools
import math
import operator
import types

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from overdub import Context, Tagged, overdub
from overdub_ad import (LINEAR, ZERO, D, GradCheckError, MissingRuleError, check_grads, custom_jvp,
                        defjvp, derivative, explain, jacfwd, jvp, testing)
from overdub_ad.testing import REFERENCE, force_route
from tests.conftest import fd, weird_identity

# -- helpers -----------------------------------------------------------------------------------


def assert_plain(tree):
    """No Tagged anywhere in an output (outside any context user code never receives one)."""
    if type(tree) is Tagged:
        raise AssertionError(f"a Tagged value escaped: {tree!r}")
    if isinstance(tree, (list, tuple)):
        for item in tree:
            assert_plain(item)
    elif isinstance(tree, dict):
        for item in tree.values():
            assert_plain(item)
    elif isinstance(tree, np.ndarray) and tree.dtype == object:
        for item in tree.ravel():
            assert_plain(item)


@pytest.fixture
def isolated_rules():
    """Rules registered by a test are forgotten afterwards (the tables are process-wide)."""
    with testing.isolated_rules():
        yield


# -- the API -------------------------------------------------------------------------------------


def test_D_is_derivative():
    assert D is derivative


def test_derivative_without_point_is_the_derivative_function():
    dsin = derivative(math.sin)
    assert dsin(1.0) == math.cos(1.0)
    assert dsin(0.5) == math.cos(0.5)


def test_jvp_returns_value_and_directional_derivative():
    out, t = jvp(lambda x, y: x * y + math.sin(x), (2.0, 3.0), (1.0, 0.5))
    assert out == 6.0 + math.sin(2.0)
    assert t == pytest.approx(3.0 + 2.0 * 0.5 + math.cos(2.0))


def pytree_fn(pair, mapping):
    a, (b, c) = pair
    return {"sum": a + b * c.sum(), "z": mapping["z"] ** 2, "list": [c * a, mapping["w"]]}


def test_jvp_with_pytrees_of_floats_complex_and_arrays():
    primals = ((2.0, (3.0, np.array([1.0, 2.0]))), {"z": 1.0 + 2.0j, "w": 7.0})
    tangents = ((1.0, (0.5, np.array([1.0, -1.0]))), {"z": 1.0, "w": 0.0})
    out, t = jvp(pytree_fn, primals, tangents)
    assert set(out) == {"sum", "z", "list"}
    assert out["sum"] == 2.0 + 3.0 * 3.0
    assert t["sum"] == pytest.approx(1.0 + 0.5 * 3.0 + 3.0 * 0.0)
    assert out["z"] == (1.0 + 2.0j) ** 2
    assert t["z"] == pytest.approx(2 * (1.0 + 2.0j))
    np.testing.assert_allclose(out["list"][0], [2.0, 4.0])
    np.testing.assert_allclose(t["list"][0], np.array([1.0, -1.0]) * 2.0 + np.array([1.0, 2.0]))
    assert t["list"][1] == 0.0
    assert_plain(out)
    assert_plain(t)


def test_jvp_tuple_output():
    out, t = jvp(lambda x: (x * x, x + 1.0), (3.0,), (1.0,))
    assert out == (9.0, 4.0)
    assert t == (6.0, 1.0)


def test_jvp_integer_primal_and_integer_output_leaf():
    out, t = jvp(lambda n: (n * n, len([n])), (3,), (1.0,))
    assert out == (9, 1)
    assert t == (6.0, 0.0)


def test_jvp_argument_errors():
    with pytest.raises(TypeError, match="callable"):
        jvp(3.0, (1.0,), (1.0,))
    with pytest.raises(TypeError, match="tuples or lists"):
        jvp(math.sin, 1.0, 1.0)
    with pytest.raises(ValueError, match="structure"):
        jvp(lambda a, b: a + b, (1.0, 2.0), (1.0,))
    with pytest.raises(TypeError, match="str"):
        jvp(lambda s: s, ("text",), (1.0,))
    with pytest.raises(TypeError, match="callable"):
        derivative("not a function", 1.0)


def test_derivative_of_array_is_elementwise_along_ones():
    x = np.array([0.1, 0.2, 0.3])
    np.testing.assert_allclose(derivative(np.sin, x), np.cos(x))


# -- jacfwd ---------------------------------------------------------------------------------------


def sin_times_first(x):
    return np.sin(x) * x[0]


def test_jacfwd_matches_the_analytic_jacobian():
    x = np.array([0.5, 1.0, 2.0])
    expected = np.diag(np.cos(x) * x[0])
    expected[:, 0] += np.sin(x)
    np.testing.assert_allclose(jacfwd(sin_times_first)(x), expected, rtol=1e-14)


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, None])
def test_jacfwd_chunks_agree(chunk):
    x = np.array([0.5, 1.0, 2.0, -0.3, 0.7])
    full = jacfwd(sin_times_first)(x)
    np.testing.assert_allclose(jacfwd(sin_times_first, chunk=chunk)(x), full, rtol=1e-14)


def test_jacfwd_one_pass_carries_a_block_of_directions():
    calls = []

    def f(x):
        calls.append(1)
        return np.tanh(x) * 2.0

    x = np.linspace(-1, 1, 5)
    jac = jacfwd(f)(x)
    assert len(calls) == 1  # all five directions in one pass
    np.testing.assert_allclose(jac, np.diag(2.0 / np.cosh(x) ** 2), rtol=1e-14)
    calls.clear()
    jacfwd(f, chunk=2)(x)
    assert len(calls) == 3  # ceil(5 / 2) passes


def test_jacfwd_shapes_follow_jax():
    m = np.arange(6.0).reshape(2, 3)
    jac = jacfwd(lambda a: a.T * 2.0)(m)
    assert jac.shape == (3, 2, 2, 3)
    np.testing.assert_allclose(jac[1, 0, 0, 1], 2.0)
    assert jac.sum() == pytest.approx(12.0)
    assert jacfwd(math.sin)(0.5) == pytest.approx(math.cos(0.5))
    grad = jacfwd(lambda v: (v ** 2).sum())(np.array([1.0, 2.0]))
    np.testing.assert_allclose(grad, [2.0, 4.0])


def two_args(x, y):
    return x * y.sum() + np.sin(y)


def test_jacfwd_argnums_tuple():
    x, y = np.array([1.0, 2.0]), np.array([0.5, -0.5])
    jx, jy = jacfwd(two_args, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(jx, np.eye(2) * y.sum())
    np.testing.assert_allclose(jy, np.outer(x, np.ones(2)) + np.diag(np.cos(y)))
    np.testing.assert_allclose(jacfwd(two_args, argnums=1)(x, y), jy)


def test_jacfwd_pytree_output():
    x = np.array([1.0, 2.0, 3.0])
    total, doubled = jacfwd(lambda v: (v.sum(), {"d": v * 2.0}))(x)
    np.testing.assert_allclose(total, np.ones(3))
    np.testing.assert_allclose(doubled["d"], 2.0 * np.eye(3))
    assert_plain((total, doubled))


def test_jacfwd_errors():
    with pytest.raises(TypeError, match="callable"):
        jacfwd(1)
    with pytest.raises(ValueError, match="jacfwd: argnums"):  # (as grad's and jacrev's)
        jacfwd(math.sin, argnums=2)(1.0)
    with pytest.raises(ValueError, match="chunk"):
        jacfwd(math.sin, chunk=0)


def cube_sum(x):
    return (x ** 3).sum() + x[0] * x[1]


def test_hessian_by_jacfwd_of_jacfwd():
    x = np.array([1.0, 2.0, 3.0])
    hess = jacfwd(jacfwd(cube_sum))(x)
    expected = np.diag(6.0 * x)
    expected[0, 1] = expected[1, 0] = 1.0
    np.testing.assert_allclose(hess, expected, rtol=1e-13)


# -- the seed cases of the issue -------------------------------------------------------------------


def test_seed_sin():
    assert D(math.sin, 1.0) == math.cos(1.0)


def test_seed_sin_times_cos():
    got = D(lambda x: math.sin(x) * math.cos(x), 1.0)
    assert got == pytest.approx(math.cos(1.0) ** 2 - math.sin(1.0) ** 2, rel=1e-15)


def test_seed_nested():
    assert D(lambda x: x * D(lambda y: x * y, 3.0), 5.0) == 10.0


class Bar:
    def __init__(self, x, y, z):
        self.x = x
        self.y = y
        self.z = z


class Foo:
    def __init__(self, a):
        self.a = a


def weird_identity_tolist(x):
    foo = Foo(Bar(x, 0.0, 0.0))
    store = np.zeros(2)
    store[0] = foo.a.x
    return store.tolist()[0]


def test_weird_identity():
    assert weird_identity(1.5) == 1.5
    assert D(lambda x: x * weird_identity(x), 1.0) == 2.0
    assert D(lambda x: x * weird_identity_tolist(x), 1.0) == 2.0


# -- perturbation confusion ---------------------------------------------------------------------


def test_confusion_sum_inside_product():
    assert D(lambda x: x * D(lambda y: x + y, 1), 1) == 1


def test_confusion_product_inside_product():
    assert D(lambda x: x * D(lambda y: x * y, 2.0), 1.0) == 2.0


class Confuser:
    """Its call differentiates a new instance of its own class."""

    def __init__(self, x):
        self.x = x

    def plus(self, other):
        return self.x + other

    def __call__(self, y):
        # x * d/dz (z + x) at y: correct answer x; perturbation confusion gives 2x
        return self.x * D(lambda z: type(self)(z).plus(self.x), y)


def test_confusion_callable_object_differentiating_its_own_class():
    assert D(lambda x: Confuser(x)(1.0), 1.0) == 1.0


def test_confusion_nested_hypot():
    got = D(lambda x: D(lambda y: math.hypot(x, y, 1.0), 2.0), 3.0)
    assert got == pytest.approx(-6.0 / 14 ** 1.5, rel=1e-14)


def test_confusion_function_valued_shift():
    shift = lambda o: lambda g: lambda a: g(a + o)  # noqa: E731
    fh = derivative(shift)(3.0)
    assert fh(fh(math.exp))(5.0) == pytest.approx(math.e ** 11, rel=1e-13)


def test_function_valued_derivative_closure():
    scale = derivative(lambda x: lambda y: x * y * y)
    assert scale(2.0)(3.0) == 9.0
    assert_plain(scale(2.0)(3.0))


# -- user code keeps concrete types; nothing leaks ----------------------------------------------


SEEN_TYPES = []


def typed_square(x):
    SEEN_TYPES.append((isinstance(x, float), type(x) is float, isinstance(x, (int, float))))
    return x * x if isinstance(x, float) else 0.0


def test_isinstance_float_holds_inside():
    # (no assert statements inside: pytest rewrites them, and overdub then runs the function
    # natively because its bytecode no longer matches its source)
    SEEN_TYPES.clear()
    assert D(typed_square, 3.0) == 6.0
    assert SEEN_TYPES == [(True, True, True)]


CACHE = np.zeros(3)


def use_cache(y):
    CACHE[:] = 2 * y
    return (CACHE * y).sum()


def test_preallocated_array_cache():
    y = np.array([1.0, 2.0, 3.0])
    v = np.array([1.0, 0.0, -1.0])
    out, t = jvp(use_cache, (y,), (v,))
    assert out == pytest.approx((2 * y * y).sum())
    assert t == pytest.approx((4 * y * v).sum())
    assert CACHE.dtype == np.float64
    np.testing.assert_array_equal(CACHE, 2 * y)
    assert all(type(v) is np.float64 for v in CACHE)


def scalar_cache(x):
    CACHE[0] = 2 * x
    return CACHE[0] * x


def test_preallocated_array_element_write():
    assert D(scalar_cache, 3.0) == 12.0
    assert CACHE[0] == 6.0 and type(CACHE[0]) is np.float64


LIST_CACHE = [0.0, 0.0]


def list_cache(x):
    LIST_CACHE[0] = 3 * x
    LIST_CACHE.append(x * x)
    return LIST_CACHE[0] + LIST_CACHE[-1]


def test_list_cache_holds_plain_floats_after():
    assert D(list_cache, 2.0) == 3.0 + 4.0
    assert all(type(v) is float for v in LIST_CACHE)
    del LIST_CACHE[2:]


class Buffer:
    def __init__(self, n):
        self.data = np.zeros(n)
        self.scale = 1.0


def through_object(x, buf):
    buf.data[:] = x * x
    buf.scale = x
    return buf.data.sum() * buf.scale


def test_object_fields_hold_plain_values_after():
    buf = Buffer(2)
    x = np.array([1.0, 2.0])
    out, t = jvp(lambda x: through_object(x, buf), (x,), (np.array([1.0, 0.0]),))
    # f = sum(x^2) * x: along v, 2 (x . v) x + sum(x^2) v
    np.testing.assert_allclose(out, 5.0 * x)
    np.testing.assert_allclose(t, 2.0 * 1.0 * x + 5.0 * np.array([1.0, 0.0]))
    assert type(buf.scale) is np.ndarray and not isinstance(buf.scale, Tagged)
    assert buf.data.dtype == np.float64
    assert_plain(vars(buf))


def test_outputs_of_every_api_are_plain():
    assert_plain(D(math.sin, 1.0))
    assert_plain(jvp(lambda x: [x, (x * 2, {"k": x})], (1.0,), (1.0,)))
    assert_plain(jacfwd(np.sin)(np.ones(2)))
    assert_plain(derivative(lambda x: lambda y: x * y)(1.0)(2.0))


# -- control flow -------------------------------------------------------------------------------


def branchy(x):
    if x > 0:
        return x ** 2
    return -x ** 3


def newton_sqrt(a):
    x = a
    while abs(x * x - a) > 1e-12 * a:
        x = (x + a / x) / 2
    return x


def power(x, n):
    return 1.0 if n == 0 else x * power(x, n - 1)


def early(x):
    total = 0.0
    for k in range(10):
        if k * x > 3.0:
            return total
        total += math.sin(k * x)
    return total


def test_if_branch():
    assert D(branchy, 2.0) == 4.0
    assert D(branchy, -2.0) == -12.0


def test_while_loop():
    assert D(newton_sqrt, 4.0) == pytest.approx(0.25, rel=1e-9)


def test_recursion():
    assert D(lambda x: power(x, 5), 2.0) == 80.0


def test_early_return():
    x = 0.7  # returns at k = 5 (5 * 0.7 > 3)
    expected = sum(k * math.cos(k * x) for k in range(5))
    assert D(early, x) == pytest.approx(expected, rel=1e-14)


def loop_rows(x):
    total = 0.0
    for row in x:
        total = total + row * row
    return total


def zipped(x, y):
    return sum(a * b for a, b in zip(x, y))


def unpacked(x):
    a, b = x
    first, *rest = x
    return a * b + first * sum(rest)


def shadows_iter(x):
    total = 0.0
    for iter in range(2):            # a user's own `iter` does not break the iteration pass
        for row in x:
            total = total + row * iter
    return total


def test_iterating_a_differentiated_array():
    x = np.array([1.0, 2.0, 3.0])
    v = np.array([1.0, -1.0, 2.0])
    assert jvp(loop_rows, (x,), (v,))[1] == pytest.approx((2 * x * v).sum())
    y = np.array([0.5, 0.25, 2.0])
    assert jvp(zipped, (x, y), (v, 0 * y))[1] == pytest.approx((v * y).sum())
    assert jvp(lambda x: list(x)[2] * enumerate(x).__next__()[1], (x,), (v,))[1] == \
        pytest.approx(v[2] * x[0] + x[2] * v[0])
    xy = np.array([2.0, 3.0])
    assert jvp(unpacked, (xy,), (np.array([1.0, 0.0]),))[1] == pytest.approx(3.0 + 3.0)
    assert jvp(shadows_iter, (x,), (v,))[1] == pytest.approx(v.sum())


# -- complex numbers ---------------------------------------------------------------------------


def test_holomorphic_derivatives():
    z = 0.3 + 0.4j
    assert D(cmath.sin, z) == pytest.approx(cmath.cos(z))
    assert D(lambda z: z ** 3 + cmath.exp(z), z) == pytest.approx(3 * z ** 2 + cmath.exp(z))
    assert D(lambda z: 1 / (1 + z * z), z) == pytest.approx(-2 * z / (1 + z * z) ** 2)
    zs = np.array([0.1 + 0.2j, -1.0 + 0.5j])
    np.testing.assert_allclose(D(np.sin, zs), np.cos(zs))
    np.testing.assert_allclose(D(lambda w: np.exp(2 * w), zs), 2 * np.exp(2 * zs))


def test_non_holomorphic_convention_is_the_real_direction():
    # derivative(f, z) of a non-holomorphic f is df/dx at z = x + iy; jvp along 1j gives df/dy
    z = 3.0 + 4.0j
    assert D(abs, z) == pytest.approx(3.0 / 5.0)
    assert jvp(abs, (z,), (1j,))[1] == pytest.approx(4.0 / 5.0)
    sq = lambda w: w * np.conj(w)  # noqa: E731  |w|^2
    assert D(sq, z) == pytest.approx(2 * z.real)
    assert jvp(sq, (z,), (1j,))[1] == pytest.approx(2 * z.imag)


# -- non-smooth points --------------------------------------------------------------------------


def relu_builtin(x):
    return max(x, 0.0)


def relu_numpy(x):
    return np.maximum(x, 0.0)


def test_abs_at_zero_is_zero():
    assert D(abs, 0.0) == 0.0
    assert D(np.abs, 0.0) == 0.0
    assert D(math.fabs, 0.0) == 0.0
    np.testing.assert_array_equal(D(np.abs, np.array([0.0, -2.0, 2.0])), [0.0, -1.0, 1.0])


@pytest.mark.parametrize("relu", [relu_builtin, relu_numpy])
def test_relu_away_from_zero(relu):
    assert D(relu, 2.0) == 1.0
    assert D(relu, -2.0) == 0.0


def relu_reversed(x):
    return max(0, x)


def relu_numpy_int(x):
    return np.maximum(0, x)


@pytest.mark.parametrize("relu", [relu_builtin, relu_numpy, relu_reversed, relu_numpy_int,
                                  lambda x: max([x, 0.0]), lambda x: np.fmax(x, 0.0)])
def test_relu_at_zero_is_zero(relu):
    # a tie against a constant gives the constant's zero derivative
    assert D(relu, 0.0) == 0.0
    assert D(relu, 1e-300) == 1.0 and D(relu, -1e-300) == 0.0


def test_ties_split_evenly_between_differentiated_arguments():
    v = np.array([1.0, 1.0, 0.0])
    assert jvp(np.max, (v,), (np.array([1.0, 0.0, 0.0]),))[1] == 0.5
    assert jvp(lambda a, b: max(a, b), (2.0, 2.0), (1.0, 0.0))[1] == 0.5
    assert jvp(lambda a, b: min(a, b), (2.0, 2.0), (0.0, 1.0))[1] == 0.5
    assert jvp(lambda a, b: np.maximum(a, b), (2.0, 2.0), (1.0, 0.0))[1] == 0.5
    assert jvp(lambda a, b: max([a, b, 1.0]), (2.0, 2.0), (1.0, 0.0))[1] == 0.5
    assert D(lambda x: max(x, x), 1.0) == 1.0
    assert D(lambda x: np.maximum(x, x), 1.0) == 1.0
    assert D(lambda x: min(x, 2 * x - 1.0), 1.0) == 1.5      # both sides differentiated


def test_ties_with_a_constant_take_its_zero_derivative():
    assert D(lambda x: min(x, 1.0), 1.0) == 0.0
    assert D(lambda x: max(x, 2.0 * x, 0.0), 0.0) == 0.0    # a constant among the tied
    assert D(lambda x: max(x, 2.0 * x, -1.0), 0.0) == 1.5   # tied, none constant
    assert D(lambda x: np.clip(x, 0.0, 1.0), 1.0) == 0.0     # a constant bound
    assert D(lambda x: np.clip(x, 0.0, 1.0), 0.0) == 0.0
    assert D(lambda x: np.clip(x, 0.0, 1.0), 0.5) == 1.0
    assert D(lambda lo: np.clip(2.0, lo, 3.0), 2.0) == 0.0   # the constant x takes the tie
    assert D(lambda x: np.clip(x, 0.0, x), 1.0) == 1.0       # differentiated bound: split
    np.testing.assert_array_equal(D(lambda x: np.maximum(x, [0.0, 0.0, 1.0]),
                                    np.array([0.0, 1.0, 1.0])), [0.0, 1.0, 0.0])


# -- missing rules and piecewise-constant functions ----------------------------------------------


def uses_polyval(x):
    return np.polyval(np.array([1.0, 2.0, 3.0]), x)


def uses_fromiter(x):
    return np.fromiter(iter([x, 2.0]), float)[0]


def test_missing_rule_raises_naming_the_function_and_the_fix():
    with pytest.raises(MissingRuleError) as info:
        D(uses_fromiter, 2.0)
    message = str(info.value)
    assert "numpy.fromiter" in message
    assert "defjvp" in message and "nondifferentiable" in message


def test_numpy_python_code_is_differentiated_without_a_rule():
    assert D(uses_polyval, 2.0) == 2 * 2.0 + 2.0  # through np.polyval's own code


def test_missing_rule_for_an_array_method():
    # (x.sort() is differentiated through reverse mode's restatement: tests/
    # test_python_structure.py; partition has none)
    with pytest.raises(MissingRuleError, match="ndarray.partition"):
        jvp(lambda x: x.partition(1), (np.array([2.0, 1.0]),), (np.ones(2),))


def test_registering_a_rule_fixes_a_missing_rule(isolated_rules):
    defjvp(np.polyval, ZERO, lambda dx, out, p, x: np.polyval(np.polyder(p), x) * dx)
    assert D(uses_polyval, 2.0) == 2 * 2.0 + 2.0


@pytest.mark.parametrize("f, x", [
    (lambda x: math.floor(x) + x, 2.5),
    (lambda x: np.floor(x) * 3.0 + x, 2.5),
    (lambda x: np.sign(x) * 5.0 + x, -2.0),
    (lambda x: float(int(x)) + x, 2.5),
    (lambda x: round(x) + x, 2.5),
    (lambda x: (x > 1.0) * 3.0 + x, 2.5),
    (lambda x: 3.0 + x if x.is_integer() else x, 2.5),  # a C method returning a bool
    (lambda x: float(len(x.hex())) + x, 2.5),             # ...and a str
])
def test_piecewise_constant_functions_give_zero_tangents(f, x):
    assert D(f, x) == 1.0


def test_argmax_index_is_flat():
    x = np.array([1.0, 5.0, 2.0])
    assert jvp(lambda v: v[np.argmax(v)] * 2.0, (x,), (np.array([0.0, 1.0, 0.0]),))[1] == 2.0


# -- the rule-table conventions the engine follows -------------------------------------------------


def test_several_outputs_get_tuple_tangents():
    assert D(lambda x: math.frexp(x)[0], 3.0) == 0.25  # 3 = 0.75 * 2**2
    assert D(lambda x: divmod(x, 2.0)[1], 5.5) == 1.0
    # both arguments carry a tuple of contributions, summed elementwise (None = zero)
    assert D(lambda x: divmod(2 * x, x + 1.0)[1], 1.5) == 1.0
    a = np.diag([1.0, 3.0])
    w_dot = jvp(lambda m: np.linalg.eigh(m)[0], (a,), (np.diag([0.5, 2.0]),))[1]
    np.testing.assert_allclose(w_dot, [0.5, 2.0], atol=1e-14)
    parts = jvp(lambda v: np.split(v, 2), (np.arange(4.0),), (np.arange(4.0) + 1,))[1]
    np.testing.assert_allclose(parts[0], [1.0, 2.0])
    np.testing.assert_allclose(parts[1], [3.0, 4.0])


def test_list_arguments_get_list_tangents():
    a, b = np.array([1.0, 2.0]), np.array([3.0])
    da, db = np.array([1.0, -1.0]), np.array([2.0])
    np.testing.assert_allclose(jvp(lambda a, b: np.concatenate([a, b]), (a, b), (da, db))[1],
                               [1.0, -1.0, 2.0])
    np.testing.assert_allclose(jvp(lambda a, b: np.concatenate((a, b * 2)), (a, b), (da, db))[1],
                               [1.0, -1.0, 4.0])
    np.testing.assert_allclose(D(lambda x: np.array([x, 2 * x, 5.0]), 1.0), [1.0, 2.0, 0.0])
    np.testing.assert_allclose(D(lambda x: np.array([[x, 1.0], [2.0, x * x]]), 3.0),
                               [[1.0, 0.0], [0.0, 6.0]])
    np.testing.assert_allclose(D(lambda x: np.stack([x, np.ones(2)]), np.ones(2)),
                               [[1.0, 1.0], [0.0, 0.0]])
    assert D(lambda x: math.fsum([x, 2 * x, 1.0]), 1.0) == 3.0
    assert D(lambda x: sum([x, x * x]), 3.0) == 7.0
    assert D(lambda x: max([x, 2 * x, -1.0]), 1.0) == 2.0


def appended_then_stacked(x):
    rows = []
    for k in range(3):
        rows.append(x * k)
    return np.array(rows).sum()


def built_in_dict(x):
    d = {}
    d["a"] = x * 3.0
    d.setdefault("b", x * x)
    return d["a"] + d["b"]


def returns_containers(x):
    out = []
    out.append(x * 2.0)
    table = {"k": x * 3.0}
    table["m"] = x * 4.0
    return out, table


def test_values_stored_in_lists_and_dicts_keep_tangents():
    assert D(appended_then_stacked, 2.0) == 3.0
    assert D(built_in_dict, 2.0) == 3.0 + 4.0
    out, t = jvp(returns_containers, (1.0,), (1.0,))
    assert out == ([2.0], {"k": 3.0, "m": 4.0})
    assert t == ([2.0], {"k": 3.0, "m": 4.0})


def appended(x):
    values = []
    for k in range(1, 4):
        values.append(x * k)
    return values


def iterate_appended(x):
    total = 0.0
    for v in appended(x):                    # native iteration, made a call by the pass
        total = total + v * v
    first, *rest = appended(x)
    pairs = list(zip(appended(x), sorted(appended(x))))
    return total + first * sum(rest) + pairs[2][1] + appended(x).copy()[1]


def test_lists_built_by_append_iterate_with_their_tangents():
    # total = 14 x^2, first * sum(rest) = 5 x^2, then 3 x and 2 x
    assert D(iterate_appended, 2.0) == pytest.approx(28.0 * 2.0 + 10.0 * 2.0 + 3.0 + 2.0)


def test_keyword_passed_differentiated_values_are_bound_to_positions():
    assert D(lambda lo: np.clip(1.0, a_min=lo, a_max=5.0), 2.0) == 1.0
    assert D(lambda hi: np.clip(9.0, a_max=hi), 2.0) == 1.0
    assert D(lambda x: np.sum(a=x * 2.0), 1.0) == 2.0
    assert D(lambda x: np.power(x, 2.0), 3.0) == 6.0


def test_keyword_only_differentiated_value_without_a_position_raises():
    with pytest.raises(MissingRuleError, match="argument min"):
        D(lambda lo: np.clip(1.0, min=lo, max=5.0), 2.0)


def test_array_methods_use_the_method_rules():
    x = np.arange(1.0, 5.0)
    v = np.array([1.0, 0.0, 2.0, -1.0])
    cases = [
        (lambda x: x.reshape(2, 2)[1, 0], v[2]),
        (lambda x: x.reshape((4,)).sum(), v.sum()),
        (lambda x: x.reshape(2, 2).sum(axis=0)[1], v[1] + v[3]),
        (lambda x: x.reshape(2, 2).T[0, 1], v[2]),
        (lambda x: x.mean(), v.mean()),
        (lambda x: x.dot(x), 2 * x.dot(v)),
        (lambda x: x.astype(float)[3], v[3]),
        (lambda x: x.copy()[0], v[0]),
        (lambda x: x.tolist()[2], v[2]),
        (lambda x: x.item(1), v[1]),
        (lambda x: x.max(), v[3]),
        (lambda x: x.ravel()[0], v[0]),
        (lambda x: x.reshape(2, 2).transpose(1, 0)[1, 0], v[1]),
        (lambda x: x.clip(0.0, 2.5).sum(), v[0] + v[1]),
        (lambda x: x.cumsum()[-1], v.sum()),
        (lambda x: x.real[0] + x.imag.sum(), v[0]),
    ]
    for f, expected in cases:
        assert jvp(f, (x,), (v,))[1] == pytest.approx(expected), f


def inplace_ops(x):
    y = x.copy()
    y *= x            # the rule needs y before the write: x * x
    y += 1.0
    acc = np.zeros(3)
    acc += y          # a plain array changed in place by a differentiated one
    buf = np.empty(3)
    np.multiply(acc, 2.0, out=buf)
    return buf


def test_in_place_operators_and_out():
    x = np.array([1.0, 2.0, 3.0])
    v = np.array([1.0, 1.0, -1.0])
    out, t = jvp(inplace_ops, (x,), (v,))
    np.testing.assert_allclose(out, 2 * (x * x + 1))
    np.testing.assert_allclose(t, 4 * x * v)
    assert_plain((out, t))


def element_writes(x):
    out = np.empty(3)
    for i in range(3):
        out[i] = x[i] ** 2
    out[0] = 7.0      # a plain write clears that element's tangent
    return out


def test_element_writes_and_plain_overwrites():
    x = np.array([1.0, 2.0, 3.0])
    out, t = jvp(element_writes, (x,), (np.ones(3),))
    np.testing.assert_allclose(out, [7.0, 4.0, 9.0])
    np.testing.assert_allclose(t, [0.0, 4.0, 6.0])


def writes_into_slices(x):
    grid = np.zeros((2, 3))
    grid[0] = x
    grid[1, 1:] = [x[0] * 2, 5.0]
    grid[:, 0] *= 3.0
    return grid


def test_slice_and_list_writes():
    x = np.array([1.0, 2.0, 3.0])
    out, t = jvp(writes_into_slices, (x,), (np.array([1.0, 10.0, 100.0]),))
    np.testing.assert_allclose(out, [[3.0, 2.0, 3.0], [0.0, 2.0, 5.0]])
    np.testing.assert_allclose(t, [[3.0, 10.0, 100.0], [0.0, 2.0, 0.0]])


def chained_indexing(x):
    grid = np.zeros((2, 2))
    for i in range(2):
        for j in range(2):
            grid[i][j] = x[i] * x[j]     # writes through the row view grid[i]
    row = grid[1]
    row *= 2.0                           # in place through a view
    return grid


def test_writes_through_views_reach_the_array():
    x = np.array([1.0, 2.0])
    out, t = jvp(chained_indexing, (x,), (np.array([1.0, 0.0]),))
    np.testing.assert_allclose(out, [[1.0, 2.0], [4.0, 8.0]])
    # d(x_i x_j) along e0: [[2 x0, x1], [x1, 0]], second row doubled
    np.testing.assert_allclose(t, [[2.0, 2.0], [4.0, 0.0]])


def views_of_all_kinds(x):
    store = np.zeros((3, 2), order="F")
    store.T[1] = x                # a transposed view of a Fortran-ordered array
    backwards = store[::-1, 0]
    backwards[0] = x[0] * 10.0    # a negative-stride view: store[2, 0]
    return store


def test_views_with_other_layouts():
    x = np.array([1.0, 2.0, 3.0])
    out, t = jvp(views_of_all_kinds, (x,), (np.array([1.0, 0.5, 0.25]),))
    np.testing.assert_allclose(out, [[0.0, 1.0], [0.0, 2.0], [10.0, 3.0]])
    np.testing.assert_allclose(t, [[0.0, 1.0], [0.0, 0.5], [10.0, 0.25]])


def write_into_a_tagged_view(x):
    y = np.sin(x)
    part = y[1:]
    part[0] = 5.0 * x[0]          # y[1] changes through the view part
    return y


def test_writes_into_differentiated_arrays_keep_the_other_tangents():
    x = np.array([0.1, 0.2, 0.3])
    v = np.array([1.0, 1.0, 1.0])
    out, t = jvp(write_into_a_tagged_view, (x,), (v,))
    np.testing.assert_allclose(out, [math.sin(0.1), 0.5, math.sin(0.3)])
    np.testing.assert_allclose(t, [math.cos(0.1), 5.0, math.cos(0.3)])


def overwrite_by_nondifferentiable(x):
    buf = np.zeros(2)
    buf[:] = x * 3.0
    np.floor(buf, out=buf)        # no derivative: the tangent is gone with the old values
    return buf + x


def overwrite_out_buffer(x):
    buf = np.zeros(2)
    buf[:] = x * 3.0
    np.multiply(x, 5.0, out=buf)  # the old tangent of the buffer does not matter
    return buf


def test_out_buffers_take_the_new_tangent():
    x = np.array([1.5, 2.5])
    np.testing.assert_allclose(jvp(overwrite_by_nondifferentiable, (x,), (np.ones(2),))[1],
                               [1.0, 1.0])
    np.testing.assert_allclose(jvp(overwrite_out_buffer, (x,), (np.ones(2),))[1], [5.0, 5.0])


def fills_in_place(x):
    buf = np.zeros(2)
    np.copyto(buf, x)
    return buf


def fills_with(x):
    buf = np.zeros(2)
    buf.fill(x * x)
    return buf[1]


def test_in_place_functions():
    # np.copyto is the element write it is: the buffer's memory takes the source's tangent
    _, tangent = jvp(fills_in_place, (np.ones(2),), (np.array([1.0, 2.0]),))
    np.testing.assert_allclose(tangent, [1.0, 2.0])
    assert D(fills_with, 3.0) == 6.0


def test_jacfwd_through_array_writes():
    # batched tangents (one pass, several directions) go through the array writes too
    x = np.array([1.0, 2.0, 3.0])
    jac = jacfwd(lambda x: element_writes(x) + 0.0)(x)
    np.testing.assert_allclose(jac, np.diag([0.0, 4.0, 6.0]))
    np.testing.assert_allclose(jacfwd(use_cache)(x), 4 * x)


def test_nested_derivative_through_array_writes():
    def inner(x, y):
        store = np.zeros(2)
        store[0] = x * y
        store[1] = y
        return store[0] * store[1]   # x y^2
    got = D(lambda x: D(lambda y: inner(x, y), 3.0), 2.0)
    assert got == pytest.approx(6.0)   # d/dx (2 x y) at y = 3


def test_c_functions_that_only_move_values():
    x = np.array([3.0, 1.0, 2.0])
    v = np.array([1.0, 10.0, 100.0])
    assert jvp(lambda a: sorted(a)[0], (x,), (v,))[1] == 10.0
    assert jvp(lambda a: sum(map(lambda t: t * t, a)), (x,), (v,))[1] == \
        pytest.approx((2 * x * v).sum())
    assert jvp(lambda a: sum(filter(lambda t: t > 1.5, a)), (x,), (v,))[1] == 101.0
    assert jvp(lambda a: functools.reduce(operator.mul, a), (x,), (v,))[1] == \
        pytest.approx(1.0 * 1 * 2 + 3 * 10 * 2 + 3 * 1 * 100)
    assert jvp(lambda a: tuple(reversed(a))[0], (x,), (v,))[1] == 100.0
    assert D(lambda t: dict(a=t * 2.0)["a"], 1.0) == 2.0
    assert D(lambda t: max(set([t, 2.0 * t])), 1.0) == 2.0
    assert D(lambda t: list(itertools.chain([t], [t * 3.0]))[1], 1.0) == 3.0


def generated_sum(x):
    return math.fsum(x * k for k in range(4))


def generated_array(x):
    return np.fromiter((x * k for k in range(4)), float).sum()


def test_iterators_consumed_by_c_functions():
    assert D(generated_sum, 1.0) == 6.0
    assert D(lambda x: max(x * k for k in range(4)), 1.0) == 3.0
    with pytest.raises(MissingRuleError, match="fromiter"):
        D(generated_array, 1.0)      # no rule: never a silent zero
    assert D(lambda x: np.fromiter((float(k) for k in range(4)), float).sum() * x, 1.0) == 6.0


def test_python_without_source_is_not_run_silently():
    namespace = {}
    exec("def hidden(x):\n    return x * x\n", namespace)  # no source overdub can read
    with pytest.raises(MissingRuleError, match="without source"):
        D(lambda x: namespace["hidden"](x), 3.0)


def into_dict_then_values(x):
    d = {}
    d["a"] = x * 2.0
    return sum(d.values())


def into_dict_then_splat(x):
    d = {}
    d["a"] = x * 2.0
    return {**d}["a"]


class Box:
    def __init__(self, v):
        self.v = v


def into_object_then_copy(x):
    box = Box(0.0)
    box.v = x * 3.0
    return copy.copy(box).v


@pytest.mark.parametrize("f, expected", [(into_dict_then_values, 2.0),
                                         (into_dict_then_splat, 2.0),
                                         (into_object_then_copy, 3.0)])
def test_heap_read_natively_keeps_tangents(f, expected):
    assert D(f, 1.0) == expected


@pytest.mark.parametrize("f, x, expected", [
    (lambda z: z.conjugate() * 2.0, 1.0 + 1.0j, 2.0),  # (the rules of complex.conjugate)
])
def test_missing_table_entries(f, x, expected):
    assert D(f, x) == expected


def test_numpy_scalar_item_through_reverse_modes_restatement():
    assert D(lambda x: np.sum(np.array([x, x])).item(), 1.0) == 2.0


def test_numpy_scalar_types_called_on_a_value():
    assert D(lambda x: np.float64(x) * 2.0, 1.0) == 2.0
    assert D(lambda x: float(np.float32(x)) * 2.0, 1.0) == 2.0


@pytest.mark.parametrize("f, expected", [
    (lambda x: np.dot([x, 1.0], [2.0, 3.0]), 2.0),
    (lambda x: np.sin([x, 0.0])[0], 1.0),
    (lambda x: np.add([x, 1.0], 1.0).sum(), 1.0),
    (lambda x: np.sum([x, 3.0 * x]), 4.0),
    (lambda x: np.array([x, 2 * x]).sum(), 3.0),
    (lambda x: np.prod([x, x, 2.0]), 0.0),
    (lambda x: np.linalg.norm([x, 3.0]), 0.0),
    (lambda x: (np.array([[1.0, 2.0]]) @ [x, x])[0], 3.0),     # an operator beside an array
    (lambda x: np.sum([[x, 1.0], [2.0, x * x]]), 1.0),           # nested
    (lambda x: np.mean((x, 2.0 * x)), 1.5),                      # a tuple
    (lambda x: np.stack([x, 1.0])[0], 1.0),                      # container rules take it too
    (lambda x: np.hstack([x, x])[1], 1.0),
])
def test_array_like_list_arguments(f, expected):
    assert D(f, 0.0) == expected
    assert_plain(D(f, 0.5))
    assert D(f, 0.5) == pytest.approx(fd(f, 0.5, 1e-4, order=4), rel=1e-8, abs=1e-10)


def test_lists_are_still_sequences_to_operators_and_python():
    assert D(lambda x: ([x] + [2 * x])[1], 1.0) == 2.0
    assert D(lambda x: ([x] * 2)[1] * x, 3.0) == 6.0
    assert D(lambda x: np.concatenate([[x], np.ones(2)])[0], 1.0) == 1.0


# -- user rules: defjvp and custom_jvp -------------------------------------------------------------


def my_cube(x):
    return x * x * x


def scale(x, k):
    return x * k


def test_defjvp_rule_is_used_for_a_python_function(isolated_rules):
    defjvp(my_cube, lambda dx, out, x: 100.0 * dx)  # deliberately not 3 x^2: proves it is used
    assert D(lambda x: my_cube(x) + x, 2.0) == 101.0
    defjvp(scale, LINEAR, lambda dk, out, x, k: 2.0 * x * dk)   # 2: proves the rule is used
    assert D(lambda k: scale(5.0, k=k), 3.0) == 10.0   # a keyword bound to its position
    assert D(lambda x: scale(x, 4.0), 3.0) == 4.0      # LINEAR: scale(dx, 4.0)


@custom_jvp
def safe_sqrt(x):
    return math.sqrt(x)


@safe_sqrt.defjvp
def safe_sqrt_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    out = safe_sqrt(x)
    return out, (0.0 * dx if out == 0.0 else dx / (2.0 * out))


@custom_jvp
def twice_cos(x):
    return math.sin(x)


@twice_cos.defjvp
def twice_cos_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return math.sin(x), 2.0 * math.cos(x) * dx   # deliberately "wrong": proves it is used


@custom_jvp
def weighted(pair, w):
    a, b = pair
    return {"s": a * w + b}


@weighted.defjvp
def weighted_jvp(primals, tangents):
    (a, b), w = primals
    (da, db), dw = tangents
    return {"s": a * w + b}, {"s": da * w + a * dw + db}


def test_custom_jvp_rule_replaces_the_body():
    assert safe_sqrt(4.0) == 2.0                      # outside: the function itself
    assert D(safe_sqrt, 4.0) == 0.25
    assert D(safe_sqrt, 0.0) == 0.0                   # math.sqrt' would divide by zero
    assert D(twice_cos, 0.5) == 2.0 * math.cos(0.5)
    assert D(lambda x: twice_cos(x * x), 0.5) == pytest.approx(2.0 * math.cos(0.25) * 1.0)


def test_custom_jvp_pytrees_and_undifferentiated_arguments():
    out, t = jvp(lambda a, w: weighted((a, 2.0), w), (3.0, 5.0), (1.0, 0.0))
    assert out == {"s": 17.0}
    assert t == {"s": 5.0}
    out, t = jvp(lambda w: weighted((3.0, 1.0), w), (5.0,), (1.0,))   # zeros for the pair
    assert t == {"s": 3.0}
    assert_plain((out, t))


def test_custom_jvp_is_differentiated_by_an_enclosing_derivative():
    # the rule is ordinary code: d/dx of 2 cos(x) is -2 sin(x)
    assert D(lambda x: D(twice_cos, x), 0.5) == pytest.approx(-2.0 * math.sin(0.5))
    assert D(derivative(safe_sqrt), 4.0) == pytest.approx(-1.0 / 32.0)   # -x^(-3/2) / 4


def test_custom_jvp_errors():
    @custom_jvp
    def no_rule(x):
        return x

    with pytest.raises(TypeError, match="defjvp"):
        D(no_rule, 1.0)

    @custom_jvp
    def bad_rule(x):
        return x

    bad_rule.defjvp(lambda primals, tangents: primals[0])
    with pytest.raises(TypeError, match="pair"):
        D(bad_rule, 1.0)
    with pytest.raises(TypeError, match="callable"):
        custom_jvp(3)


# -- check_grads -----------------------------------------------------------------------------------


def smooth(x, y):
    return np.sin(x) * y + math.exp(y) * x.sum()


def test_check_grads_passes_correct_derivatives():
    x = np.array([0.3, -0.2, 1.1])
    check_grads(smooth, (x, 0.5), order=2, modes=["fwd"])
    check_grads(smooth, (x, 0.5), order=1)                      # every available mode
    check_grads(lambda z: z * z + np.exp(z), (0.3 + 0.2j,), order=2, modes=["fwd"])
    check_grads(pytree_fn, ((2.0, (3.0, np.array([1.0, 2.0]))), {"z": 1.0 + 2.0j, "w": 7.0}),
                modes=["fwd"])
    check_grads(safe_sqrt, (2.0,), order=2, modes=["fwd"])
    check_grads(lambda x, n: x ** n, (1.3, 3), order=2, modes=["fwd"])  # integer held fixed


def test_check_grads_catches_wrong_rules(isolated_rules):
    with pytest.raises(GradCheckError, match="forward-mode"):
        check_grads(twice_cos, (0.5,), modes=["fwd"])
    defjvp(my_cube, lambda dx, out, x: 3.0 * x * x * dx)
    check_grads(my_cube, (0.7,), modes=["fwd"])
    defjvp(my_cube, lambda dx, out, x: 3.0 * x * dx)            # wrong
    with pytest.raises(AssertionError):
        check_grads(my_cube, (0.7,), modes=["fwd"])


@custom_jvp
def cos_wrong_slope(x):
    return math.cos(x)


@cos_wrong_slope.defjvp
def cos_wrong_slope_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return math.cos(x), math.sin(x) * dx   # wrong sign


@custom_jvp
def sin_with_bad_second(x):
    return math.sin(x)


@sin_with_bad_second.defjvp
def sin_with_bad_second_jvp(primals, tangents):
    # the right first derivative, computed by a function whose own derivative is wrong
    (x,), (dx,) = primals, tangents
    return math.sin(x), cos_wrong_slope(x) * dx


def test_check_grads_catches_wrong_second_derivatives():
    f = sin_with_bad_second
    check_grads(f, (0.5,), order=1, modes=["fwd"])
    with pytest.raises(GradCheckError, match="order 2"):
        check_grads(f, (0.5,), order=2, modes=["fwd"])


def test_check_grads_arguments():
    with pytest.raises(ValueError, match="mode"):
        check_grads(math.sin, (1.0,), modes=["sideways"])
    with pytest.raises(ValueError, match="order"):
        check_grads(math.sin, (1.0,), order=0)
    with pytest.raises(TypeError, match="callable"):
        check_grads(1.0, (1.0,))
    assert issubclass(GradCheckError, AssertionError)


# -- the specialised path: scalar code rewritten to its dual ---------------------------------------
# Scalar code runs as its dual (overdub_ad.forward._dual); whatever the dual does not handle
# stops it before any effect and the general mode runs instead.  The results must be the
# general mode's, to the bit.


# The tests of the dual route itself are marked default_routes: they run on the default routes
# even when the run forces the reference route.

def on_dual(api, f, *args):
    """``api``'s result for ``f`` (as :func:`overdub_ad.explain` runs it), which the dual route
    alone computed: no general-mode run, at any level of nesting."""
    report = explain(api, f, *args)
    assert report.ran and set(report.ran) == {"forward-dual"}, str(report)
    return report.result


def in_general_mode(api, f, *args):
    """``api``'s result for ``f``, which the general mode computed, the dual having declined."""
    report = explain(api, f, *args)
    assert report.ran == [REFERENCE] and ("forward-dual", False) in [
        decision[:2] for decision in report.decisions], str(report)
    return report.result


def same(a, b):
    """The same values of the same types, to the bit, except for the sign of a zero (a term
    the general mode leaves out, the dual may add as 0.0: -0.0 + 0.0 is 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and all(map(same, a.ravel(),
                                                                    b.ravel()))
    return a == b or repr(a) == repr(b)   # (nan)


def general_only(fn, *args):
    """``fn(*args)`` on the reference route (the specialised path switched off)."""
    with force_route(REFERENCE):
        return fn(*args)


G_SCALE = 2.5


def s_poly(x):
    return 3.0 * x ** 3 - 2.0 * x + 1.0 + x ** -1.5 * 0.0


def s_loops(x):
    total = 0.0
    for k in range(5):
        total += math.sin(k * x) / (k + 1)
    i = 0
    while i < 3:
        total = total * x - i
        i += 1
    return total


def s_branches(x):
    if x > 0 and x < 10:
        y = x * x
    elif x <= 0 or x > 100:
        y = -x
    else:
        y = 1.0
    return y if y > 1 else y * 2


def s_tuples(x):
    a, b = x, 2 * x
    (c, d), e = (a * b, a - b), b / a
    t = (a, b, c)
    for v in t[1:]:
        a = a + v
    return t[0] + t[-1] + a, c * e + d


def s_closures(x):
    def scale(v):
        return v * x

    g = lambda w: scale(w) + x  # noqa: E731
    return g(x) + scale(2.0)


def s_defaults(x):
    def h(v, w=x * 2.0):
        return v * w
    return h(x) + h(1.0, 3.0)


def s_recursion(x, n=4):
    return 1.0 if n == 0 else x * s_recursion(x, n - 1)


def s_builtins(x):
    return abs(x - 1.0) + max(x, 1.5) + min(x * x, 3.0) + float(x) + pow(x, 2) + sum((x, x))


def s_math(x):
    return (math.exp(math.tanh(x)) + math.hypot(x, 2.0) + math.atan2(x, 1.5)
            + math.log(x + 3.0, 2.0) + math.fsum((x, 1.0)) + round(x) + x * math.pi)


def s_ints_and_walrus(x):
    total = x
    for k in range(1, 4):
        total = total * k + k / 2
    y = (z := total * 2) + z
    return y * z + -x + (+x) * -(x * x)


def s_chains(x):
    first = x * 3 if 0 < x < 5 <= 5.0 else x
    second = (x > 0) and x * 2 or 3.0
    return first + second + (not x) + (1.0 if x in (0.5, 0.7) else 0.0)


def s_augmented(x):
    y = x
    y *= 3
    y -= 1.0
    y /= 2
    y **= 2
    return y + x ** x + 2.0 ** x


def s_nested(x):
    inner = D(lambda y: x * y + y * y, 3.0)              # d/dy: x + 2y
    two = D(lambda y: D(lambda z: x * y * z, 1.0), 2.0)   # d/dy d/dz: x
    out, t = jvp(lambda a, b: a * b + x, (x, 2.0), (1.0, x))
    return x * inner + two * x + out + t + D(lambda y: math.sin(x * y), 1.0)


def s_globals_and_raise(x):
    if x < -100:  # (no assert: pytest rewrites asserts, then overdub runs the function natively)
        raise ValueError("too small")
    return x * G_SCALE + len((1, 2)) + (x if isinstance(x, float) else 0.0)


SPECIALISED = [s_poly, s_loops, s_branches, s_tuples, s_closures, s_defaults, s_recursion,
               s_builtins, s_math, s_ints_and_walrus, s_chains, s_augmented, s_nested,
               s_globals_and_raise]


@pytest.mark.default_routes
@pytest.mark.parametrize("f", SPECIALISED, ids=lambda f: f.__name__)
@pytest.mark.parametrize("x", [0.7, 1.3, 2.2, 0.4])
def test_specialised_path_runs_scalar_code_and_agrees_with_the_general_mode(f, x):
    got = on_dual(jvp, f, (x,), (1.0,))
    expected = general_only(jvp, f, (x,), (1.0,))
    assert same(got, expected)                         # the same numbers, to the bit
    want = fd(lambda t: np.asarray(f(t)), x, 1e-4, order=4)
    assert got[1] == pytest.approx(want, rel=1e-6, abs=1e-9)


@pytest.mark.default_routes
def test_specialised_path_with_several_arguments_tuples_complex_and_batches():
    def f(x, pair, n):
        a, b = pair
        return x * a + b ** 2 * n, (x * n, a)
    for args, dargs in [((1.5, (2.0, 3.0), 2), (1.0, (0.5, -1.0), None)),
                        ((1.5, (2.0, 3.0), 2), (np.array([1.0, 0.0]), (np.zeros(2), np.ones(2)),
                                                None))]:
        got = on_dual(jvp, f, args, dargs)
        assert same(got, general_only(jvp, f, args, dargs))
    z = 0.3 + 0.4j
    got = on_dual(jvp, lambda w: cmath.exp(w) * w + cmath.sqrt(w + 2), (z,), (1.0,))
    assert same(got, general_only(jvp, lambda w: cmath.exp(w) * w + cmath.sqrt(w + 2), (z,),
                                  (1.0,)))
    jac = on_dual(jacfwd, lambda x: (x * x, math.sin(x)), 0.5)   # the columns in one dual run
    assert same(jac, general_only(jacfwd(lambda x: (x * x, math.sin(x))), 0.5))


LOG = []


def appends_midway(x):
    y = x * 3.0
    LOG.append(y)           # a list method: the dual stops here, before the append
    return y * x


class NoisyEquality:
    calls = 0

    def __eq__(self, other):
        NoisyEquality.calls += 1
        return False

    __hash__ = object.__hash__


NOISY = NoisyEquality()


def compares_with_an_object(x):
    y = x * 2
    if NOISY == y:          # a user __eq__: the dual stops before calling it
        return y
    return y * x


COUNTS = {"calls": 0}


def counts_in_a_dict_that_existed(x):
    y = [x * 2.0, 1.0][0]   # a list made in the run: the dual keeps going
    COUNTS["calls"] += 1    # a dict from before the run: the dual stops before the write
    return y * x


@pytest.mark.parametrize("f, expected", [(appends_midway, 12.0),
                                         (compares_with_an_object, 8.0),
                                         (counts_in_a_dict_that_existed, 8.0)])
@pytest.mark.default_routes
def test_specialised_path_stops_before_any_effect(f, expected):
    LOG.clear()
    NoisyEquality.calls = 0
    COUNTS["calls"] = 0
    assert in_general_mode(D, f, 2.0) == expected    # the general mode gave the result
    assert LOG in ([], [6.0]) and NoisyEquality.calls <= 1   # each effect once
    assert COUNTS["calls"] in (0, 1)
    assert in_general_mode(D, f, 2.0) == expected    # (and again on the next call)


def try_finally(x):
    try:
        return x * x
    finally:
        pass


@pytest.mark.parametrize("f, x, expected", [
    (try_finally, 3.0, 6.0),
    (lambda x: sum(x * k for k in range(3)), 2.0, 3.0),       # a generator
    (lambda x: np.sin(np.array([x, 1.0]))[0], 0.0, 1.0),      # arrays
    (lambda x: math.sqrt(x) + [1.0, 2.0][1], 4.0, 0.25),       # a list without tangents: fine
])
def test_specialised_path_falls_back_where_it_must(f, x, expected):
    assert D(f, x) == pytest.approx(expected, rel=1e-15)


@pytest.mark.default_routes
def test_specialised_nesting_has_no_perturbation_confusion():
    assert on_dual(D, lambda x: x * D(lambda y: x * y, 3.0), 5.0) == 10.0
    assert on_dual(D, lambda x: x * D(lambda y: x + y, 1.0), 1.0) == 1.0
    assert on_dual(D, lambda x: x * D(lambda y: x * y, 2.0), 1.0) == 2.0

    def three(x):  # three levels, closures over two: d/dx [x d/dy (x y d/dz (x y z))] = 6 x^2 y
        return x * D(lambda y: x * y * D(lambda z: x * y * z, 1.0), 2.0)
    assert on_dual(D, three, 1.5) == 6 * 1.5 ** 2 * 2.0
    assert general_only(D, three, 1.5) == 6 * 1.5 ** 2 * 2.0
    # d/dx of a closure over x called at another level
    assert D(lambda x: D(lambda y: (lambda z: z * x * y)(y), 2.0), 3.0) == 4.0


def make_scaler(k):
    def scaled(x, k=k):
        return x * k
    return scaled


def scaled_by_global(x):
    return x * G_SCALE


@pytest.mark.default_routes
def test_functions_sharing_their_code_keep_their_defaults_and_globals():
    # (the specialised path reuses the dual of an earlier function of the same code)
    for _ in range(2):
        assert on_dual(D, lambda x: x * 4.0, 1.0) == 4.0        # a fresh lambda each time
        assert on_dual(D, make_scaler(2.0), 1.0) == 2.0
        assert on_dual(D, make_scaler(3.0), 1.0) == 3.0
        assert on_dual(D, scaled_by_global, 1.0) == G_SCALE
        other = types.FunctionType(scaled_by_global.__code__, {"G_SCALE": 7.0})
        assert on_dual(D, other, 1.0) == 7.0


def test_specialised_path_in_threads():
    import threading

    results = {}

    def work(k):
        x0 = 0.5 + k
        results[k] = [jvp(s_loops, (x0,), (1.0,)) for _ in range(20)]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, runs in results.items():
        expected = general_only(jvp, s_loops, (0.5 + k,), (1.0,))
        assert all(same(r, expected) for r in runs)


def test_specialised_path_leaves_the_function_unchanged():
    assert s_loops(0.7) == pytest.approx(general_only(jvp, s_loops, (0.7,), (1.0,))[0])
    D(s_loops, 0.7)
    assert s_loops(0.7) == pytest.approx(general_only(jvp, s_loops, (0.7,), (1.0,))[0])
    assert s_closures.__code__.co_varnames[0] == "x"


# -- nesting with other contexts ------------------------------------------------------------------


class CountCalls(Context):
    def prehook(self, fn, /, *args, **kwargs):
        name = getattr(fn, "__name__", repr(fn))
        self.metadata[name] = self.metadata.get(name, 0) + 1


def test_derivative_inside_a_counting_context():
    counts = {}
    got = overdub(CountCalls(metadata=counts), lambda: D(lambda x: math.sin(x) * x, 1.0))
    assert got == pytest.approx(math.cos(1.0) + math.sin(1.0))
    assert counts.get("cos", 0) >= 1   # the rule's arithmetic is seen by the enclosing context


# -- property tests: random compositions against finite differences -------------------------------

UNARY = {
    "sin": math.sin, "cos": math.cos, "tanh": math.tanh, "atan": math.atan,
    "exp_tanh": lambda v: math.exp(math.tanh(v)), "log1p_sq": lambda v: math.log1p(v * v),
    "sqrt1p": lambda v: math.sqrt(1.0 + v * v), "erf": math.erf, "square": lambda v: v * v,
    "neg": lambda v: -v, "abs_shift": lambda v: abs(v - 10.0), "sinh_small": lambda v: math.sinh(
        math.tanh(v)),
}
BINARY = {
    "add": lambda v, x: v + x, "mul": lambda v, x: v * x, "sub": lambda v, x: x - v,
    "div": lambda v, x: v / (1.0 + x * x), "hypot": lambda v, x: math.hypot(v, x, 0.5),
    "atan2": lambda v, x: math.atan2(v, 2.0 + x * x), "pow": lambda v, x: (1.0 + v * v) ** (
        0.5 * math.tanh(x)),
}
ARRAY_OPS = {
    "sin": np.sin, "tanh": np.tanh, "exp_tanh": lambda a: np.exp(np.tanh(a)),
    "square": np.square, "cumsum": np.cumsum, "roll": lambda a: np.roll(a, 1),
    "flip": lambda a: a[::-1], "scale": lambda a: a * np.arange(1.0, a.size + 1),
    "norm_mix": lambda a: a + np.linalg.norm(a), "softmax": lambda a: np.exp(a) / np.exp(a).sum(),
    "matvec": lambda a: np.arange(float(a.size * a.size)).reshape(a.size, a.size) @ a * 0.1,
    "concat_half": lambda a: np.concatenate([a[1:], a[:1] * 2.0]),
    "where": lambda a: np.where(a > 0.3, a * a, -a),
}


def composed(ops, x):
    v = x
    for kind, name in ops:
        v = UNARY[name](v) if kind == "u" else BINARY[name](v, x)
    return v


def array_composed(ops, x):
    v = x
    for name in ops:
        v = ARRAY_OPS[name](v)
    return v


scalar_ops = st.lists(st.one_of(st.tuples(st.just("u"), st.sampled_from(sorted(UNARY))),
                                st.tuples(st.just("b"), st.sampled_from(sorted(BINARY)))),
                      min_size=1, max_size=6)


def intermediates(ops, x):
    values, v = [], x
    for kind, name in ops:
        v = UNARY[name](v) if kind == "u" else BINARY[name](v, x)
        values.append(v)
    return values


def well_conditioned(ops, x):
    """Values stay moderate and away from the kink of abs_shift (finite differences are
    meaningless across a kink and lose digits on huge values)."""
    try:
        values = intermediates(ops, x)
    except (OverflowError, ValueError, ZeroDivisionError):
        return False
    return all(abs(v) < 1e3 and abs(v - 10.0) > 1e-2 for v in [x, *values])


@settings(max_examples=80, deadline=None)
@given(ops=scalar_ops, x=st.floats(-2.0, 2.0))
def test_property_scalar_compositions_match_finite_differences(ops, x):
    assume(well_conditioned(ops, x))
    f = lambda t: composed(ops, t)  # noqa: E731
    got = D(f, x)
    expected = fd(f, x, h=1e-5, order=4)
    assert got == pytest.approx(expected, rel=1e-6, abs=1e-6)


@settings(max_examples=60, deadline=None)
@given(ops=scalar_ops, x=st.floats(-2.0, 2.0), v=st.floats(-2.0, 2.0))
def test_property_specialised_path_agrees_with_the_general_mode(ops, x, v):
    f = lambda t: composed(ops, t)  # noqa: E731
    try:
        expected = general_only(jvp, f, (x,), (v,))
    except (OverflowError, ValueError, ZeroDivisionError) as error:
        with pytest.raises(type(error)):
            jvp(f, (x,), (v,))
        return
    assert same(jvp(f, (x,), (v,)), expected)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(st.sampled_from(sorted(ARRAY_OPS)), min_size=1, max_size=5),
       seed=st.integers(0, 2 ** 16))
def test_property_array_compositions_match_finite_differences(ops, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, 4)
    v = rng.standard_normal(4)
    value = x
    for name in ops:  # stay away from the kink of np.where
        assume(name != "where" or np.all(np.abs(value - 0.3) > 1e-3))
        value = ARRAY_OPS[name](value)
        # moderate values all along (sin of a huge value turns finite differences into noise)
        assume(np.all(np.abs(value) < 1e3))
    f = lambda a: array_composed(ops, a)  # noqa: E731
    _, got = jvp(f, (x,), (v,))
    expected = fd(lambda t: f(x + t * v), 0.0, h=1e-5, order=4)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("power", [operator.pow, math.pow, np.power])
def test_mixed_second_derivative_of_pow_at_exponent_zero(power):
    # d/dy d/dx x**y = x**(y-1) (1 + y log x): 1/x at y = 0
    assert D(lambda y: D(lambda x: power(x, y), 2.0), 0.0) == pytest.approx(0.5, rel=1e-15)
    assert D(lambda x: D(lambda y: power(x, y), 0.0), 2.0) == pytest.approx(0.5, rel=1e-15)


@pytest.mark.parametrize("power", [operator.pow, math.pow, np.power])
def test_pow_at_base_zero(power):
    # d/dy 0**y = 0 for y > 0 (NumPy's and JAX's choice); d/dx at x = 0 has no nan for
    # integer-like exponents, 0 included (0**-1 has no value: the derivative there is 0)
    assert D(lambda y: power(0.0, y), 2.0) == 0.0
    assert D(lambda y: power(0.0, y), 0.5) == 0.0
    for y, expected in ((0.0, 0.0), (1.0, 1.0), (2.0, 0.0), (3.0, 0.0)):
        assert D(lambda x: power(x, y), 0.0) == expected
    assert D(lambda x: D(lambda t: power(t, 2.0), x), 0.0) == 2.0
    assert D(lambda x: D(lambda t: power(t, 1.0), x), 0.0) == 0.0
    assert D(lambda y: power(3.0, y), 0.0) == pytest.approx(math.log(3.0), rel=1e-15)


def test_pow_array_exponents_mixed_with_zeros():
    x = np.array([0.0, 0.0, 2.0, 0.0])
    y = np.array([0.0, 1.0, 0.0, 2.0])
    dx = jvp(lambda a: np.power(a, y), (x,), (np.ones(4),))[1]
    np.testing.assert_array_equal(dx, [0.0, 1.0, 0.0, 0.0])
    dy = jvp(lambda b: np.power(x, b), (y,), (np.ones(4),))[1]
    np.testing.assert_allclose(dy, [0.0, 0.0, math.log(2.0), 0.0])
    mixed = D(lambda t: jvp(lambda a: np.power(a, y + t), (x,), (np.ones(4),))[1], 0.0)
    # x**(y-1) (1 + y log x) at x = 2, y = 0; at x = 0 with d/dy 0**t = 0: 0**(y-1), or 0
    # where that has no value (y = 0)
    np.testing.assert_allclose(mixed, [0.0, 1.0, 0.5, 0.0])


@settings(max_examples=25, deadline=None)
@given(ops=scalar_ops, x=st.floats(-1.5, 1.5))
def test_property_second_derivatives_by_check_grads(ops, x):
    assume(well_conditioned(ops, x))
    check_grads(lambda t: composed(ops, t), (x,), order=2, modes=["fwd"], eps=1e-3,
                rtol=1e-5, atol=1e-6)
