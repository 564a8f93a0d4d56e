"""Edges of the public AD API: outputs that carry no derivative, NumPy scalars' methods, lists
beside NumPy scalars, user rules against shipped stand-ins, tracebacks, scipy.stats quantiles and
moments, builtins with ``key=``, ``None`` leaves, ODE solutions of a list.

Each derivative is checked against central finite differences in both modes, on a first and a
repeated call (the specialised routes cache per function)."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import overdub_ad as ad
from overdub_ad import MissingRuleError, defjvp, defvjp
from overdub_ad.testing import isolated_rules
from tests.conftest import fd

st = pytest.importorskip("scipy.stats")
integrate = pytest.importorskip("scipy.integrate")


def both_modes(f, x, expected=None, tol=1e-6):
    """derivative and grad of scalar ``f`` at ``x``, twice each, against ``expected`` (central
    differences by default)."""
    want = fd(f, x) if expected is None else expected
    for _ in range(2):
        assert ad.derivative(f)(x) == pytest.approx(want, rel=tol, abs=tol)
        assert ad.grad(f)(x) == pytest.approx(want, rel=tol, abs=tol)


# -- outputs: a constant winner is differentiated; a constant integer is no output -------------

def relu_def(x):
    return max(0, x)


@pytest.mark.parametrize("f", [
    relu_def, lambda x: max(0, x), lambda x: min(x, 0), lambda x: max(0, x) + max(0, 2 * x),
    lambda x: max(0, x) * 3, lambda x: max([0, x]), lambda x: np.maximum(0, x),
    lambda x: np.minimum(x, 0), lambda x: np.fmax(0, x), lambda x: np.clip(x, 0, 1)],
    ids=["def", "max", "min", "sum", "times", "list", "np.maximum", "np.minimum", "np.fmax",
         "np.clip"])
@pytest.mark.parametrize("x", [-1.5, 0.0] + [2.5])
def test_constant_winner_is_differentiated_with_derivative_zero(f, x):
    both_modes(f, x, expected=0.0 if x == 0.0 else None)  # (a tie with a constant: 0)
    value, g = ad.value_and_grad(f)(x)
    assert value == f(x)
    out, tangent = ad.jvp(f, (x,), (1.0,))
    assert out == f(x) and tangent == g
    assert ad.jacfwd(f)(x) == ad.jacrev(f)(x) == g
    assert ad.hessian(f)(x) == 0.0


@pytest.mark.parametrize("f", [
    lambda x: 3, lambda x: int(x), lambda x: x > 0.0, lambda x: np.bool_(x > 0.0),
    lambda x: round(x), lambda x: math.floor(x), lambda x: len([x]),
    lambda x: np.allclose(x, x * 3.0 / 3.0)],
    ids=["int", "int()", "bool", "np.bool_", "round", "floor", "len", "allclose"])
def test_integer_or_truth_output_without_derivative_is_a_type_error(f):
    apis = [lambda: ad.grad(f)(1.5), lambda: ad.value_and_grad(f)(1.5),
            lambda: ad.derivative(f)(1.5), lambda: ad.derivative(f, np.float64(1.5)),
            lambda: ad.jacfwd(f)(1.5), lambda: ad.jacrev(f)(1.5),
            lambda: ad.jvp(f, (1.5,), (1.0,)), lambda: ad.hessian(f)(1.5)]
    for _ in range(2):
        for api in apis:
            with pytest.raises(TypeError, match="carries no derivative"):
                api()


def test_integer_output_that_carries_a_derivative_is_a_number():
    for x in (3, -2):
        assert ad.derivative(lambda x: x * x)(x) == 2 * x
        assert ad.grad(lambda x: x * x)(x) == 2 * x
        assert ad.derivative(ad.derivative(lambda x: x ** 3))(x) == 6 * x
        assert ad.grad(ad.grad(lambda x: x ** 3))(x) == 6 * x
    # the value of max(0, x), an int, is kept as it is
    assert ad.value_and_grad(lambda x: max(0, x))(-1.0) == (0, 0.0)


@pytest.mark.parametrize("outer", [ad.grad, ad.derivative])
@pytest.mark.parametrize("inner", [ad.grad, ad.derivative, ad.jacfwd, ad.jacrev])
def test_inner_output_carrying_only_an_outer_derivative_is_a_number(outer, inner):
    """max(0, x) below 0 is the int 0 carrying the *outer* derivative: the inner derivative
    (in y, which it does not read) is 0, not an error; a plain constant still is one."""
    for _ in range(2):
        assert outer(lambda x: inner(lambda y: max(0, x))(1.0))(-2.0) == 0.0
        with pytest.raises(TypeError, match="carries no derivative"):
            outer(lambda x: inner(lambda y: 3)(1.0) * x)(-2.0)


# -- NumPy scalars: their methods, and lists beside them -----------------------------------------

@pytest.mark.parametrize("f", [
    lambda a: np.sum(np.array([a, 2.0])).squeeze(), lambda a: np.sum(np.array([a, 2.0])).ravel()[0],
    lambda a: np.sum(np.array([a * a, 2.0])).conjugate(), lambda a: np.sum(np.array([a, a])).sum(),
    lambda a: np.float64(a * a).squeeze(), lambda a: np.sum(np.array([a, 2.0])).item() * a,
    lambda a: np.float64(a).reshape(1)[0] ** 2],
    ids=["squeeze", "ravel", "conjugate", "sum", "float64", "item", "reshape"])
def test_methods_of_a_differentiated_numpy_scalar(f):
    both_modes(f, 1.5)


@pytest.mark.parametrize("f", [
    lambda s: np.sum(np.float64(2.0) - [s, 2 * s]),
    lambda s: np.sum(np.float64(2.0) + (s, s * s)),
    lambda s: np.sum([s, 2 * s] - np.float64(1.0)),
    lambda s: np.sum(np.float32(2.0) * np.array([s])),
    lambda s: np.sum(np.float64(3.0) / [s, 1.0])],
    ids=["sub", "tuple", "list-left", "float32", "div"])
def test_list_beside_a_numpy_scalar_is_an_array(f):
    both_modes(f, 1.5, tol=1e-5)


def test_list_times_a_numpy_integer_repeats_it():
    f = lambda s: sum(np.int64(2) * [s, 3 * s])  # noqa: E731  (list repetition: 2s + 6s)
    both_modes(f, 1.5, expected=8.0)


# -- x.conjugate(), min/max with key= -------------------------------------------------------------

def test_conjugate_of_a_number_in_both_modes():
    both_modes(lambda x: x.conjugate(), 1.5, expected=1.0)
    both_modes(lambda x: (x * x * x).conjugate(), 1.5, expected=6.75)
    z = 1.5 + 0.5j
    assert ad.derivative(lambda z: (z * z).conjugate())(z) == pytest.approx(np.conj(2 * z))
    assert ad.grad(lambda z: ((z * z).conjugate()).real)(z) == \
        pytest.approx(ad.grad(lambda z: np.conj(z * z).real)(z))
    assert ad.hessian(lambda x: (x * x * x).conjugate())(1.5) == pytest.approx(9.0)


@pytest.mark.parametrize("x", [0.7, 3.0])
def test_min_max_with_key(x):
    both_modes(lambda t: min(t * t, 2.0, key=lambda v: v), x)
    both_modes(lambda t: max([t, 2.0 * t, 1.0], key=abs), x)
    both_modes(lambda t: min(t * t, 2.0, key=lambda v: -v) * t, x)


# -- a user's rule wins over a shipped stand-in --------------------------------------------------

def test_user_rule_for_a_method_with_a_standin_wins_in_both_modes():
    def cube(x):
        return x.__pow__(3.0)
    assert ad.grad(cube)(2.0) == 12.0 == ad.derivative(cube)(2.0)
    with isolated_rules():
        defvjp(float.__pow__, lambda ct, out, x, y: 100.0 * ct, lambda ct, out, x, y: 0.0 * ct)
        defjvp(float.__pow__, lambda dx, out, x, y: 100.0 * dx, lambda dy, out, x, y: 0.0 * dy)
        for _ in range(2):
            assert ad.grad(cube)(2.0) == 100.0
            assert ad.derivative(cube)(2.0) == 100.0
            assert ad.vjp(cube, 2.0)[1](1.0) == (100.0,)
    with isolated_rules():  # one mode's rule: the other mode keeps the stand-in
        defvjp(float.__pow__, lambda ct, out, x, y: 100.0 * ct, lambda ct, out, x, y: 0.0 * ct)
        assert ad.grad(cube)(2.0) == 100.0 and ad.derivative(cube)(2.0) == 12.0
    assert ad.grad(cube)(2.0) == 12.0 == ad.derivative(cube)(2.0)


# -- tracebacks -----------------------------------------------------------------------------------

_UNCAUGHT = textwrap.dedent("""
    import numpy as np
    import overdub_ad as ad

    def helper_of_the_user(y):
        return y["missing"]

    def loss_of_the_user(x):
        return helper_of_the_user(np.sin(x) * 2.0)

    ad.{call}
""")


@pytest.mark.parametrize("call", ["grad(loss_of_the_user)(1.0)",
                                  "derivative(loss_of_the_user)(1.0)",
                                  "jvp(loss_of_the_user, (1.0,), (1.0,))",
                                  "hessian(loss_of_the_user)(1.0)",
                                  "hvp(loss_of_the_user, 1.0, 1.0)",
                                  "jacfwd(loss_of_the_user)(np.ones(2))",
                                  "vjp(loss_of_the_user, 1.0)",
                                  "grad(lambda x: ad.grad(loss_of_the_user)(x))(1.0)"])
def test_uncaught_error_under_an_ad_api_shows_no_overdub_ad_frames(call, child_env, tmp_path):
    script = tmp_path / "user_script.py"
    script.write_text(_UNCAUGHT.format(call=call))
    env = dict(child_env)
    env.pop("OVERDUB_TRACEBACK_FILTERING", None)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=120)
    assert run.returncode == 1
    assert "IndexError" in run.stderr
    assert "in loss_of_the_user" in run.stderr and "in helper_of_the_user" in run.stderr
    assert "overdub_ad" not in run.stderr and "overdub dispatcher" not in run.stderr
    env["OVERDUB_TRACEBACK_FILTERING"] = "off"  # kept for debugging overdub_ad itself
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=120)
    assert "overdub_ad" in run.stderr and "in helper_of_the_user" in run.stderr


# -- scipy.stats: quantiles and moments -----------------------------------------------------------

@pytest.mark.parametrize("f,x", [
    (lambda q: st.norm.ppf(q), 0.3), (lambda s: st.norm.ppf(0.3, 1.0, s), 2.0),
    (lambda m: st.norm.ppf(0.8, m, 2.0), 0.4), (lambda q: st.norm.isf(q, 0.5, 2.0), 0.3),
    (lambda q: st.expon.ppf(q, scale=2.0), 0.3), (lambda s: st.expon.isf(0.3, scale=s), 2.0),
    (lambda q: st.gamma.ppf(q, 2.0), 0.3), (lambda m: st.norm(m, 2.0).ppf(0.3), 0.4),
    (lambda s: st.gamma(2.0, scale=s).median(), 2.0),
    (lambda m: st.norm(m, 2.0).mean(), 1.0), (lambda s: st.norm(1.0, s).std(), 2.0),
    (lambda s: st.norm(1.0, s).var(), 2.0), (lambda a: st.gamma(a, scale=2.0).mean(), 2.0),
    (lambda a: st.gamma(a, scale=2.0).std(), 2.0), (lambda m: st.poisson(m).mean(), 2.0),
    (lambda s: st.lognorm.var(s), 0.5), (lambda a: sum(st.gamma.stats(a, moments="mv")), 2.0),
    (lambda s: st.norm.interval(0.9, 0.0, s)[1], 2.0)],
    ids=["norm.ppf", "ppf-scale", "ppf-loc", "isf", "expon.ppf", "expon.isf", "gamma.ppf",
         "frozen-ppf", "median", "mean", "std", "var", "gamma.mean", "gamma.std",
         "poisson.mean", "lognorm.var", "stats", "interval"])
def test_stats_quantiles_and_moments(f, x):
    both_modes(f, x, tol=1e-5)


def test_stats_quantiles_vectorized_second_order_and_ends():
    q = np.array([0.1, 0.5, 0.9])
    f = lambda p: st.norm.ppf(q, p[0], p[1]) + st.expon.isf(q, scale=p[1])  # noqa: E731
    p = np.array([0.5, 2.0])
    numeric = fd(f, p)
    np.testing.assert_allclose(ad.jacfwd(f)(p), numeric, rtol=1e-5)
    np.testing.assert_allclose(ad.jacrev(f)(p), numeric, rtol=1e-5)
    g = st.norm.ppf
    second = (g(0.3 + 1e-4) - 2 * g(0.3) + g(0.3 - 1e-4)) / 1e-8
    assert ad.hessian(g)(0.3) == pytest.approx(second, rel=1e-4)
    assert ad.derivative(ad.derivative(g))(0.3) == pytest.approx(second, rel=1e-4)
    # q = 0 and 1 give the support's ends, as in SciPy; the others keep their derivatives
    ends = lambda s: st.norm.ppf(np.array([0.0, 0.3, 1.0]), 0.0, s)  # noqa: E731
    np.testing.assert_array_equal(ends(2.0)[[0, 2]], [-np.inf, np.inf])
    assert ad.jacfwd(ends)(2.0)[1] == pytest.approx(st.norm.ppf(0.3))
    assert ad.jacrev(ends)(2.0)[1] == pytest.approx(st.norm.ppf(0.3))


@pytest.mark.parametrize("mode", [ad.grad, ad.derivative])
def test_stats_without_a_rule_raise_naming_what_is_missing(mode):
    with pytest.raises(MissingRuleError, match="scipy.stats.ncx2.ppf"):
        mode(lambda nc: st.ncx2.ppf(0.3, 3.0, nc))(2.0)  # no derivative of chndtr in nc
    with pytest.raises(MissingRuleError, match="skewness or kurtosis of scipy.stats.gamma"):
        mode(lambda a: st.gamma.stats(a, moments="s"))(2.0)
    with pytest.raises(MissingRuleError, match=r"scipy\.stats\.poisson\.ppf \("):
        mode(lambda m: st.poisson.ppf(0.4, m))(2.0)


# -- None leaves: empty pytrees, as in JAX --------------------------------------------------------

def test_none_leaf_of_an_argument_has_gradient_none():
    f = lambda p: p[0] ** 3 * (2.0 if p[1] is None else p[1])  # noqa: E731
    for _ in range(2):
        assert ad.grad(f)((1.5, None)) == (pytest.approx(13.5), None)
        assert ad.value_and_grad(f)((1.5, None))[1] == (pytest.approx(13.5), None)
        assert ad.vjp(f, (1.5, None))[1](1.0) == ((pytest.approx(13.5), None),)
        assert ad.grad(lambda d: d["a"] ** 2)({"a": 1.5, "b": None}) == {"a": 3.0, "b": None}
        assert ad.grad(lambda x, y: x ** 2, argnums=1)(1.5, None) is None
        g = lambda p: np.array([p[0] ** 2, p[2] * p[0]])  # noqa: E731
        for jac in (ad.jacfwd, ad.jacrev):
            J = jac(g)((1.5, None, 2.0))
            np.testing.assert_allclose(J[0], [3.0, 2.0])
            assert J[1] is None
            np.testing.assert_allclose(J[2], [0.0, 1.5])
        H = ad.hessian(lambda p: p[0] ** 2 * p[2])((1.5, None, 2.0))
        assert H[0][0] == pytest.approx(4.0) and H[0][2] == pytest.approx(3.0)
        # (the gradient's leaf None is an output leaf None: its Jacobian is None, as JAX's)
        assert H[1] is None and H[0][1] is None
        assert ad.hvp(lambda p: p[0] ** 3, (1.5, None), (1.0, None)) == (pytest.approx(9.0), None)


# -- an ODE solved from a list of differentiated values -------------------------------------------

def test_odeint_of_a_list_initial_value_in_both_modes():
    ts = np.linspace(0.0, 1.0, 4)

    def f(p):
        k, y0 = p
        return integrate.odeint(lambda y, t: -k * y, [y0], ts)[:, 0]

    def exact(p):
        return p[1] * np.exp(-p[0] * ts)

    p = np.array([0.7, 1.3])
    want = fd(exact, p)
    for _ in range(2):
        np.testing.assert_allclose(ad.jacfwd(f)(p), want, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(ad.jacrev(f)(p), want, rtol=1e-5, atol=1e-7)
