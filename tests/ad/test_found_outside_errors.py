"""Valid code that raised, and errors that named internals, as found by testing from outside:
``hvp`` through ``np.split``, second derivatives of ``scipy.stats`` log-densities, distribution
entropies, ``np.ndenumerate``, ``np.vander``; and missing-rule messages that name the public
function the user called (``numpy.unique``, not ``numpy.lib._arraysetops_impl.unique``)."""

import functools
import re

import numpy as np
import pytest

import overdub_ad as ad
from overdub_ad import MissingRuleError
from tests.conftest import fd

sla = pytest.importorskip("scipy.linalg")
signal = pytest.importorskip("scipy.signal")
st = pytest.importorskip("scipy.stats")
interpolate = pytest.importorskip("scipy.interpolate")

MODES = [ad.grad, ad.derivative]  # reverse and forward mode, of a function of one number


def _slope(api, f, x):
    return api(f, x) if api is ad.derivative else api(f)(x)


# -- hvp through functions with a list of outputs ---------------------------------------------

SPLITS = {
    "split": lambda x: np.sum(np.split(x, [1])[1] ** 2),
    "split_three": lambda x: np.sum(np.split(x, [1, 3])[0] ** 3)
    + np.sum(np.sin(np.split(x, [1, 3])[2])) * np.split(x, [1, 3])[1][0],
    "array_split": lambda x: np.sum(np.array_split(x, 2)[0] ** 2 * np.array_split(x, 2)[1][0]),
    "hsplit": lambda x: np.sum(np.hsplit(x, [2])[1] ** 3),
}


@pytest.mark.default_routes
@pytest.mark.parametrize("name", SPLITS)
def test_hvp_through_split_on_the_tape_route(name):
    f = SPLITS[name]
    x, v = np.arange(1.0, 6.0), np.linspace(0.3, 1.1, 5)
    expected = fd(ad.grad(f), x) @ v
    for _ in range(2):  # first and repeated calls
        report = ad.explain(ad.hvp, f, x, v)
        assert ("hvp-tape", True) in [(route, ran) for route, ran, _ in report.decisions]
        np.testing.assert_allclose(report.result, expected, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ad.hessian(f)(x) @ v, expected, rtol=1e-6, atol=1e-8)


# -- second derivatives of scipy.stats log-densities ------------------------------------------

LOGPDFS = {"cauchy": lambda x: st.cauchy.logpdf(x), "t": lambda x: st.t.logpdf(x, 2.5),
           "t_in_df": lambda df: st.t.logpdf(0.7, df)}


@pytest.mark.parametrize("name", LOGPDFS)
def test_second_derivative_of_a_logpdf(name):
    f = LOGPDFS[name]
    x = 2.5 if name == "t_in_df" else 0.3
    expected = fd(lambda t: ad.derivative(f, t), x)
    for second in (ad.hessian(f), ad.jacfwd(ad.grad(f)), ad.jacrev(ad.D(f)),
                   lambda t: ad.derivative(ad.D(f), t)):
        assert float(second(x)) == pytest.approx(float(expected), rel=1e-6)


# -- entropy of scipy.stats distributions -------------------------------------------------------

ENTROPIES = {  # closed-form entropies (the distribution's own _entropy), and where
    "expon_frozen": (lambda s: st.expon(scale=s).entropy(), 1.5),
    "expon": (lambda s: st.expon.entropy(scale=s), 1.5),
    "norm_loc": (lambda m: st.norm.entropy(loc=m, scale=2.0), 0.3),
    "gamma_shape": (lambda a: st.gamma.entropy(a), 2.5),
    "gamma_frozen_shape": (lambda a: st.gamma(a, scale=3.0).entropy(), 2.5),
    "beta_shape": (lambda a: st.beta.entropy(a, 2.0), 1.5),  # (SciPy np.place's a 0-d array)
    "t_df": (lambda df: st.t.entropy(df), 3.5),
    "binom_p": (lambda p: st.binom.entropy(10, p), 0.3),
    "array_shapes": (lambda s: np.sum(st.gamma.entropy(np.array([1.5, 2.5]) * s, scale=s)), 1.2),
    "integer_shape": (lambda s: np.sum(st.truncpareto.entropy(np.array([-2, 2]), 5, scale=s)),
                      1.3),
    "numerical_entropy_in_scale": (lambda s: st.alpha.entropy(3.5, scale=s), 1.3),
}


@pytest.mark.parametrize("api", MODES)
@pytest.mark.parametrize("name", ENTROPIES)
def test_entropy_is_differentiated(name, api):
    f, x = ENTROPIES[name]
    expected = float(fd(f, x))
    for _ in range(2):
        assert _slope(api, f, x) == pytest.approx(expected, rel=1e-6, abs=1e-9)


def test_entropy_keeps_its_value_and_has_a_second_derivative():
    f = lambda s: st.gamma.entropy(2.5, scale=s)  # noqa: E731
    assert ad.value_and_grad(f)(1.5)[0] == pytest.approx(float(f(1.5)), rel=1e-15)
    assert float(ad.hessian(f)(1.5)) == pytest.approx(-1.0 / 1.5 ** 2, rel=1e-12)
    assert float(ad.grad(f)(1.5)) == pytest.approx(1.0 / 1.5, rel=1e-12)


@pytest.mark.parametrize("api", MODES)
@pytest.mark.parametrize("dist,f", [
    ("poisson", lambda m: st.poisson.entropy(m)),
    ("alpha", lambda a: st.alpha.entropy(a)),
    ("alpha", lambda a: st.alpha(a, scale=2.0).entropy()),
])
def test_numerical_entropy_in_a_shape_parameter_raises(dist, f, api):
    with pytest.raises(MissingRuleError, match=rf"scipy\.stats\.{dist}\.entropy in its shape"):
        _slope(api, f, 1.5)


# -- np.place and np.put into a 0-d array -------------------------------------------------------

def _placed(x):
    out = np.zeros(())
    np.place(out, np.array(True), [2.0 * x])
    return out * x


def _put(x):
    out = np.zeros(())
    np.put(out, [0], [x * x])
    return out + x


@pytest.mark.parametrize("api", MODES)
@pytest.mark.parametrize("f,df", [(_placed, lambda x: 4.0 * x), (_put, lambda x: 2.0 * x + 1.0)])
def test_writes_into_a_zero_dimensional_array(f, df, api):
    for x in (0.7, -1.3):
        assert float(_slope(api, f, x)) == pytest.approx(df(x), rel=1e-12)


# -- np.ndenumerate and the flat iterator -----------------------------------------------------

def _enumerated(x):
    return sum(v * (1.0 + sum(k * (j + 0.5) for k, j in enumerate(i)))
               for i, v in np.ndenumerate(x))


@pytest.mark.parametrize("jac", [ad.jacrev, ad.jacfwd])
def test_ndenumerate(jac):
    for x in (np.linspace(0.5, 1.5, 3), np.arange(6.0).reshape(2, 3) + 0.5, np.array(2.0)):
        for _ in range(2):
            np.testing.assert_allclose(jac(lambda y: _enumerated(y) ** 2)(x),
                                       fd(lambda y: _enumerated(y) ** 2, x), rtol=1e-7)


@pytest.mark.parametrize("jac", [ad.jacrev, ad.jacfwd])
def test_flat_iterator_protocol(jac):
    def f(x):
        flat = x.flat
        assert flat.index == 0 and flat.coords == (0, 0)
        first = next(flat)
        assert flat.index == 1 and flat.coords == (0, 1)
        rest = sum(v * v for v in flat)
        assert flat.coords == (2, 0)  # past the end, as NumPy's
        return first * 3.0 + rest

    x = np.arange(6.0).reshape(2, 3) + 0.5
    np.testing.assert_allclose(jac(f)(x), fd(f, x), rtol=1e-7)


# -- np.vander ------------------------------------------------------------------------------------

VANDER = [{}, {"N": 3}, {"N": 5, "increasing": True}, {"N": 1}]


@pytest.mark.parametrize("kwargs", VANDER)
def test_vander_both_modes(kwargs):
    x = np.array([1.5, -2.0, 0.0, 0.7])  # (0: the slope of x ** 1 is 1, not 0 * inf)
    f = lambda y: np.vander(y, **kwargs)  # noqa: E731
    for jac in (ad.jacfwd, ad.jacrev):
        np.testing.assert_allclose(jac(f)(x), fd(f, x), atol=1e-7)


def test_vander_second_derivative():
    x = np.array([1.5, -2.0, 0.0, 0.7])
    g = lambda y: np.sum(np.vander(y, 4) ** 2)  # noqa: E731
    np.testing.assert_allclose(ad.hessian(g)(x), fd(ad.grad(g), x), rtol=1e-6, atol=1e-6)


# -- missing-rule messages name the public function --------------------------------------------

@functools.lru_cache(maxsize=None)
def cached_square(x):
    return x * x


MATRIX = np.eye(2) * 2.0
MESSAGES = {  # name: (function of one array or number, point, what the message must say)
    # (scipy.linalg.svd and qr have rules now: functions that still have none)
    "schur": (lambda a: np.sum(sla.schur(a)[0]), MATRIX,
              r"rule for scipy\.linalg\.schur \(argument 1 of its internal function dgees\)"),
    "lu": (lambda a: np.sum(sla.lu(a)[2]), MATRIX,
           r"rule for scipy\.linalg\.lu \(argument 0 of its internal function "),
    "unique": (lambda a: np.sum(np.unique(a)), np.array([1.0, 2.0]),
               r"rule for numpy\.unique \("),
    "cubic_spline": (lambda t: interpolate.CubicSpline([0.0, 1.0, 2.0], [0.0, 1.0, 0.0])(t),
                     0.5, r"rule for scipy\.interpolate\.CubicSpline\.__call__ \("),
    "sosfilt": (lambda x: np.sum(signal.sosfilt(np.array([[1.0, 0.0, 0.0, 1.0, -0.5, 0.0]]), x)),
                np.ones(3), r"rule for scipy\.signal\.sosfilt \("),  # (lfilter has rules)
    "entropy": (lambda m: st.poisson.entropy(m), 3.5,
                r"rule for scipy\.stats\.poisson\.entropy in its shape parameters"),
    "lru_cache": (lambda x: cached_square(x) * x, 1.5,
                  r"cached_square is behind functools\.lru_cache .*call "
                  r"cached_square\.__wrapped__\(\.\.\.\)"),
}


@pytest.mark.parametrize("mode,api", [("reverse", ad.jacrev), ("forward", ad.jacfwd)])
@pytest.mark.parametrize("name", MESSAGES)
def test_message_names_the_public_function(name, mode, api):
    f, x, says = MESSAGES[name]
    with pytest.raises(MissingRuleError) as info:
        api(f)(x)
    message = str(info.value)
    assert re.search(says, message), message
    assert "function function" not in message
    assert not re.search(r"\._[^_]", message.split(" (")[0]), message  # no private module
    if name != "entropy":  # (a stand-in's message: the same in both modes)
        assert f"no {mode}-mode derivative rule" in message


@pytest.mark.parametrize("mode,api", [("reverse", ad.grad), ("forward", ad.derivative)])
def test_masked_array_view_says_the_mode_that_ran(mode, api):
    def f(x):
        return float(np.ma.sum(np.ma.masked_array([x, 2 * x], mask=[False, True])))
    with pytest.raises(MissingRuleError, match=rf"no {mode}-mode derivative .*numpy\.ma\."
                                               rf"MaskedArray\.__new__"):
        _slope(api, f, 1.5)
