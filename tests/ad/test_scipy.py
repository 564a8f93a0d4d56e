"""Derivatives through SciPy: scipy.linalg, scipy.stats, scipy.special and the solvers (quad,
odeint, solve_ivp, the root finders, minimize), each against central finite differences of the
whole call, in forward and reverse mode; the solvers nested once; and the policy: a missing
rule is reported under the public SciPy function, never a silent zero."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

import overdub_ad as ad
from overdub_ad import MissingRuleError
from overdub_ad.testing import without_rules
from tests.conftest import fd

sla = pytest.importorskip("scipy.linalg")
si = pytest.importorskip("scipy.integrate")
so = pytest.importorskip("scipy.optimize")
sc = pytest.importorskip("scipy.special")
st = pytest.importorskip("scipy.stats")

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

rng = np.random.default_rng(7)


def both_modes(f, x, rtol=1e-5, atol=1e-7, h=1e-6):
    """``f``'s derivative at ``x`` by reverse mode (grad/jacrev) and forward mode
    (derivative/jacfwd), each against finite differences, twice (first and repeated call)."""
    want = fd(f, x, h)
    scalar_out = np.ndim(f(x)) == 0
    reverse = ad.grad(f) if scalar_out else ad.jacrev(f)
    forward = ad.derivative(f) if np.ndim(x) == 0 else ad.jacfwd(f)
    for _ in range(2):
        np.testing.assert_allclose(reverse(x), want, rtol=rtol, atol=atol)
        np.testing.assert_allclose(forward(x), want, rtol=rtol, atol=atol)


A = rng.standard_normal((3, 3)) + 3 * np.eye(3)
SPD = A @ A.T
B = rng.standard_normal(3)
B2 = rng.standard_normal((3, 2))


# -- scipy.linalg -------------------------------------------------------------------------------

LINALG = {
    "solve": lambda a: np.sum(np.sin(sla.solve(a, B2))),
    "solve_pos": lambda a: np.sum(sla.solve(a @ a.T, B, assume_a="pos") ** 2),
    "solve_transposed": lambda a: np.sum(sla.solve(a, B, transposed=True) ** 3),
    "inv": lambda a: np.sum(sla.inv(a) ** 2),
    "det": lambda a: sla.det(a),
    "solve_triangular": lambda a: np.sum(sla.solve_triangular(a, B2, lower=True) ** 2),
    "solve_triangular_T": lambda a: np.sum(np.cos(sla.solve_triangular(a, B, trans="T"))),
    "cholesky": lambda a: np.sum(sla.cholesky(a @ a.T) ** 2),
    "cho_factor_solve": lambda a: np.sum(sla.cho_solve(sla.cho_factor(a @ a.T), B) ** 2),
    "cho_solve_lower": lambda a: np.sum(sla.cho_solve(sla.cho_factor(a @ a.T, lower=True),
                                                      B2)),
    "lu": lambda a: np.sum(sla.lu_solve(sla.lu_factor(a), B) ** 2),
    "lu_trans": lambda a: np.sum(sla.lu_solve(sla.lu_factor(a), B2, trans=1) ** 2),
    "lu_factor": lambda a: np.sum(np.tanh(sla.lu_factor(a)[0])),
    "expm": lambda a: np.sum(sla.expm(0.3 * a) ** 2),
    "logm": lambda a: np.sum(np.real(sla.logm(a @ a.T)) ** 2),
    "sqrtm": lambda a: np.sum(np.real(sla.sqrtm(a @ a.T)) ** 2),
    "svdvals": lambda a: np.sum(sla.svdvals(a) ** 3),
    "norm": lambda a: sla.norm(a),
    "norm_1": lambda a: sla.norm(a[0], 3),
    "solve_sylvester": lambda a: np.sum(sla.solve_sylvester(a, a.T + np.eye(3), B2 @ B2.T) ** 2),
    "solve_banded": lambda a: np.sum(sla.solve_banded((1, 1), a, B) ** 2),
    "eigh_values": lambda a: np.sum(sla.eigh(a + a.T, eigvals_only=True) ** 3),
    "eigh_vectors": lambda a: np.sum((lambda w, v: v @ np.diag(w ** 2) @ v.T)(
        *sla.eigh(a + a.T))[0]),   # sign-invariant use of the vectors
}


@pytest.mark.parametrize("name", list(LINALG))
def test_linalg(name):
    both_modes(LINALG[name], A, rtol=1e-5, atol=1e-6)


def test_linalg_values_are_scipys():
    """The rules sit on the public functions: the value computed under a derivative is
    SciPy's own, not a restatement's."""
    for name, f in LINALG.items():
        value, _ = ad.vjp(f, A)
        assert value == f(A), name


def test_expm_derivative_is_the_frechet_derivative():
    """Issue 14, 11: grad(trace(expm(A))) is expm(A).T (it was the identity, I + A's)."""
    a = np.array([[0.3, 1.2], [-0.4, 0.1]])
    want = sla.expm(a).T
    np.testing.assert_allclose(ad.grad(lambda m: np.trace(sla.expm(m)))(a), want, rtol=1e-10)
    np.testing.assert_allclose(ad.jacfwd(lambda m: np.trace(sla.expm(m)))(a), want, rtol=1e-10)


@pytest.mark.parametrize("name", ["expm", "det", "solve_triangular", "lu", "cho_factor_solve",
                                  "solve_sylvester", "solve_banded"])
def test_linalg_second_derivatives(name):
    """hessian (forward over reverse) against differences of the gradient."""
    f = LINALG[name]
    want = fd(ad.grad(f), A, 1e-5)
    np.testing.assert_allclose(ad.hessian(f)(A), want, rtol=1e-4, atol=1e-6)


# -- scipy.stats --------------------------------------------------------------------------------

STATS = [
    ("norm.logpdf loc", lambda m: st.norm.logpdf(1.0, m, 2.0), 0.3),
    ("norm.logpdf scale", lambda s: st.norm.logpdf(1.0, 0.2, s), 1.3),
    ("norm.pdf x", lambda x: st.norm.pdf(x, 0.2, 1.5), 0.3),
    ("norm.cdf x", lambda x: st.norm.cdf(x, 0.2, 1.5), 0.3),
    ("norm.logcdf", lambda x: st.norm.logcdf(x), 0.3),
    ("norm.sf scale", lambda s: st.norm.sf(0.7, 0.1, s), 1.3),
    ("t.logpdf df", lambda d: st.t.logpdf(0.7, d), 3.5),
    ("t.pdf x", lambda x: st.t.pdf(x, 3.5), 0.7),
    ("t.cdf loc", lambda m: st.t.cdf(0.7, 3.5, m, 2.0), 0.1),
    ("t.sf scale", lambda s: st.t.sf(0.7, 3.5, 0.1, s), 2.0),
    ("gamma.logpdf a", lambda a: st.gamma.logpdf(1.7, a), 2.5),
    ("gamma.pdf scale", lambda s: st.gamma.pdf(1.7, 2.5, scale=s), 2.0),
    ("gamma.cdf x", lambda x: st.gamma.cdf(x, 2.5, scale=2.0), 1.7),
    ("gamma.sf scale", lambda s: st.gamma.sf(1.7, 2.5, scale=s), 2.0),
    ("beta.logpdf a", lambda a: st.beta.logpdf(0.3, a, 2.0), 1.5),
    ("beta.pdf b", lambda b: st.beta.pdf(0.3, 1.5, b), 2.0),
    ("beta.cdf x", lambda x: st.beta.cdf(x, 1.5, 2.0), 0.3),
    ("beta.sf x", lambda x: st.beta.sf(x, 1.5, 2.0), 0.3),
    ("expon.logpdf scale", lambda s: st.expon.logpdf(1.2, scale=s), 2.0),
    ("expon.cdf loc", lambda m: st.expon.cdf(1.2, m, 2.0), 0.1),
    ("expon.logsf x", lambda x: st.expon.logsf(x, 0.1, 2.0), 1.2),
    ("laplace.logpdf loc", lambda m: st.laplace.logpdf(1.2, m, 2.0), 0.3),
    ("laplace.cdf x", lambda x: st.laplace.cdf(x, 0.3, 2.0), 1.2),
    ("logistic.logpdf loc", lambda m: st.logistic.logpdf(1.2, m, 2.0), 0.3),
    ("logistic.logcdf scale", lambda s: st.logistic.logcdf(1.2, 0.3, s), 2.0),
    ("chi2.logpdf df", lambda d: st.chi2.logpdf(1.7, d), 3.5),
    ("chi2.cdf x", lambda x: st.chi2.cdf(x, 3.5), 1.7),
    ("chi2.sf scale", lambda s: st.chi2.sf(1.7, 3.5, scale=s), 1.2),
    ("poisson.pmf mu", lambda m: st.poisson.pmf(3, m), 2.5),
    ("poisson.logpmf mu", lambda m: st.poisson.logpmf(3, m), 2.5),
    ("poisson.cdf mu", lambda m: st.poisson.cdf(3, m), 2.5),
    ("poisson.sf mu", lambda m: st.poisson.sf(3, m), 2.5),
    ("binom.pmf p", lambda p: st.binom.pmf(3, 7, p), 0.4),
    ("binom.logpmf p", lambda p: st.binom.logpmf(3, 7, p), 0.4),
    ("binom.cdf p", lambda p: st.binom.cdf(3, 7, p), 0.4),
    ("frozen norm", lambda s: st.norm(0.2, s).logpdf(1.0), 1.3),
    ("dirichlet alpha", lambda a: st.dirichlet.logpdf(np.array([0.2, 0.3, 0.5]),
                                                      np.array([a, 2.0, 3.0])), 1.5),
    ("dirichlet pdf x", lambda t: st.dirichlet.pdf(np.array([t, 0.3]), np.array([1.5, 2.0, 3.0])),
     0.2),
    ("mvn x", lambda t: st.multivariate_normal.logpdf(np.array([t, 0.2]), np.array([0.1, 0.0]),
                                                      np.array([[2.0, 0.3], [0.3, 1.0]])), 0.4),
    ("mvn mean", lambda t: st.multivariate_normal.pdf(np.array([0.4, 0.2]), np.array([t, 0.0]),
                                                      np.array([[2.0, 0.3], [0.3, 1.0]])), 0.1),
    ("mvn cov", lambda t: st.multivariate_normal.logpdf(
        np.array([0.4, 0.2]), np.array([0.1, 0.0]), np.array([[2.0, t], [t, 1.0]])), 0.3),
    ("mvn singular allowed", lambda t: st.multivariate_normal.logpdf(
        np.array([0.4, 0.2]), None, np.array([[2.0, t], [t, 1.0]]), allow_singular=True), 0.3),
    ("mvn frozen", lambda t: st.multivariate_normal(
        np.array([0.1, t]), np.array([[2.0, 0.3], [0.3, 1.0]])).logpdf(np.array([0.4, 0.2])),
     0.3),
]


@pytest.mark.parametrize("name,f,x", STATS, ids=[c[0] for c in STATS])
def test_stats(name, f, x):
    both_modes(f, x)
    value, _ = ad.vjp(f, x)
    np.testing.assert_allclose(value, f(x), rtol=1e-12)  # SciPy's value, SciPy's type
    assert type(value) is type(f(x))


def test_stats_vectorized_and_outside_the_support():
    """Outside the support the value is SciPy's constant (-inf, 0, 1) and its derivative 0."""
    xs = np.array([-0.5, 0.3, 1.7, 4.0])
    for f in (lambda s: st.gamma.logpdf(xs, 2.5, scale=s),
              lambda s: st.beta.cdf(xs / 5, 1.5, 2.0, scale=s / 2),
              lambda s: st.norm.logsf(xs, 0.1, s)):
        want = np.nan_to_num(fd(f, 2.0), nan=0.0)  # (-inf - -inf: nan)
        np.testing.assert_allclose(ad.jacrev(f)(2.0), want, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(ad.derivative(f)(2.0), want, rtol=1e-5, atol=1e-7)
        np.testing.assert_array_equal(ad.vjp(f, 2.0)[0], f(2.0))
    both_modes(lambda m: st.norm.logpdf(xs, m, 1.5), np.array([0.1, 0.2, 0.3, 0.4]))


def test_stats_shape_derivative_without_rule_raises():
    """No derivative of chndtr in its noncentrality: the error names what the user called."""
    for transform in (ad.grad, ad.derivative):
        with pytest.raises(MissingRuleError,
                           match="^no derivative rule for scipy.stats.ncx2.cdf .*chndtr"):
            transform(lambda nc: st.ncx2.cdf(1.7, 3.0, nc))(2.5)


# -- scipy.special ------------------------------------------------------------------------------

SPECIAL = [
    ("zeta q", lambda q: sc.zeta(3.0, q), 1.5), ("polygamma", lambda x: sc.polygamma(2, x), 1.7),
    ("gammainc x", lambda x: sc.gammainc(2.0, x), 1.3),
    ("gammaincc x", lambda x: sc.gammaincc(2.0, x), 1.3),
    ("betainc x", lambda x: sc.betainc(2.0, 3.0, x), 0.3),
    ("betaincc x", lambda x: sc.betaincc(2.0, 3.0, x), 0.3),
    ("chdtr x", lambda x: sc.chdtr(3.0, x), 1.7), ("chdtrc x", lambda x: sc.chdtrc(3.0, x), 1.7),
    ("stdtr x", lambda x: sc.stdtr(4.0, x), 0.7), ("pdtr m", lambda m: sc.pdtr(3, m), 2.5),
    ("yn", lambda x: sc.yn(2, x), 1.7), ("jn", lambda x: sc.jn(2, x), 1.3),
    ("iv x", lambda x: sc.iv(1.5, x), 1.3), ("kv x", lambda x: sc.kv(1.5, x), 1.3),
    ("gammasgn", lambda x: sc.gammasgn(x) * x, -1.5), ("erfinv", sc.erfinv, 0.3),
    ("logit", sc.logit, 0.3), ("xlogy y", lambda y: sc.xlogy(2.0, y), 0.3),
    ("xlog1py y", lambda y: sc.xlog1py(2.0, y), 0.3), ("entr", sc.entr, 0.3),
    ("poch", lambda z: sc.poch(z, 0.6), 1.3),
]


@pytest.mark.parametrize("name,f,x", SPECIAL, ids=[c[0] for c in SPECIAL])
def test_special(name, f, x):
    both_modes(f, x)


@pytest.mark.parametrize("f", [lambda x: sc.zeta(x), lambda nc: sc.chndtr(1.3, 3.0, nc)])
def test_special_orders_without_rule_raise(f):
    for transform in (ad.grad, ad.derivative):
        with pytest.raises(MissingRuleError):
            transform(f)(1.7)


# -- solvers --------------------------------------------------------------------------------------

def quad_closure(k):
    return si.quad(lambda s: math.exp(-k * s) * math.sin(s), 0.0, 2.0, epsabs=1e-13,
                   epsrel=1e-13)[0]


def quad_args(k):
    def integrand(s, k, c):
        return np.exp(-k * s) * c
    return si.quad(integrand, 0.0, 1.0, args=(k, 2.0), epsabs=1e-13, epsrel=1e-13)[0]


def quad_limits(b):
    return si.quad(lambda s: s * np.cos(b * s), -0.5 * b, b, epsabs=1e-13, epsrel=1e-13)[0]


def quad_infinite(k):
    return si.quad(lambda s: np.exp(-k * s * s), 0.0, np.inf, epsabs=1e-13, epsrel=1e-13)[0]


class Integrand:
    def __init__(self, k):
        self.k = k

    def integrate(self):
        k = self.k  # a value read from an attribute is closed over: the rule sees it
        return si.quad(lambda s: np.exp(-k * s), 0.0, 1.0, epsabs=1e-13, epsrel=1e-13)[0]


def root_brentq(c):
    return so.brentq(lambda t: t ** 3 + t - c, -3.0, 3.0, xtol=1e-14)


def root_bisect(c):
    return so.bisect(lambda t, c: np.sin(t) - c * t + 0.1, 0.1, 3.0, args=(c,), xtol=1e-14)


def root_newton(c):
    return so.newton(lambda t: t ** 3 - c, 1.0, tol=1e-14)


def root_newton_fprime(c):
    return so.newton(lambda t: t ** 3 - c, 1.0, fprime=lambda t: 3 * t * t, tol=1e-14)


def root_scalar(c):
    return so.root_scalar(lambda t: np.exp(t) - c, bracket=(-3, 3), xtol=1e-14).root


def root_fsolve(c):
    x = so.fsolve(lambda x: [x[0] ** 3 + x[1] - c, x[1] ** 3 - x[0] - 0.3 * c], [1.0, 1.0],
                  xtol=1e-14)
    return x[0] + 2 * x[1]


def root_root(c):
    res = so.root(lambda x, c: np.array([x[0] + 0.5 * x[1] ** 3 - c, x[1] - np.sin(x[0])]),
                  np.zeros(2), args=(c,), tol=1e-14)
    return np.sum(res.x ** 2)


def minimum(c):
    res = so.minimize(lambda x: np.sum((x - c) ** 2) + np.sum(x ** 4), np.zeros(2),
                      method="BFGS", options={"gtol": 1e-12})
    return np.sum(np.sin(res.x)) + res.fun


def minimum_scalar(c):
    res = so.minimize_scalar(lambda x: (x - c) ** 2 + x ** 4, bracket=(-2.0, 2.0), tol=1e-14)
    return res.x


def ode_odeint(p, tol=1e-11):
    t = np.linspace(0.0, 1.0, 5)
    y = si.odeint(lambda y, t: np.array([-p * y[0] + y[1], -y[0] * p * p]),
                  np.array([1.0, p]), t, rtol=tol, atol=tol)
    return np.sum(y[-1] ** 2) + y[2, 0]


def ode_solve_ivp(p, tol=1e-11):
    res = si.solve_ivp(lambda t, y, p: -p * y + np.sin(t), (0.0, 1.5), np.array([1.0, 2.0 * p]),
                       args=(p,), rtol=tol, atol=tol, t_eval=[0.5, 1.5])
    return np.sum(res.y ** 2)


SOLVERS = [
    ("quad closure", quad_closure, 0.7), ("quad args", quad_args, 0.7),
    ("quad limits", quad_limits, 1.3), ("quad infinite", quad_infinite, 0.8),
    ("quad method", lambda k: Integrand(k).integrate(), 0.7),
    ("brentq", root_brentq, 2.0), ("bisect args", root_bisect, 0.5),
    ("newton", root_newton, 2.0), ("newton fprime", root_newton_fprime, 2.0),
    ("root_scalar", root_scalar, 2.0), ("fsolve", root_fsolve, 1.5), ("root", root_root, 1.5),
    ("minimize", minimum, 0.4), ("minimize_scalar", minimum_scalar, 0.4),
    ("odeint", ode_odeint, 0.7), ("solve_ivp", ode_solve_ivp, 0.7),
]


@pytest.mark.parametrize("name,f,x", SOLVERS, ids=[c[0] for c in SOLVERS])
def test_solver(name, f, x):
    both_modes(f, x, rtol=1e-5, atol=1e-7, h=1e-5)
    value, _ = ad.vjp(f, x)
    np.testing.assert_allclose(value, f(x), rtol=1e-12)


@pytest.mark.parametrize("name", ["quad closure", "quad limits", "brentq", "newton", "fsolve",
                                  "root", "minimize", "odeint", "solve_ivp"])
def test_solver_nested(name):
    """Second derivatives: forward over forward, and forward over reverse (hessian).  The ODE
    solvers at a tolerance of 1e-7 (a fifth of the steps at 1e-11; far inside the check's
    1e-4): each step is differentiated twice over."""
    f, x = {n: (f, x) for n, f, x in SOLVERS}[name]
    if name in ("odeint", "solve_ivp"):
        f = functools.partial(f, tol=1e-7)
    want = fd(ad.derivative(f), x, 1e-4)
    np.testing.assert_allclose(ad.derivative(ad.derivative(f))(x), want, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(ad.hessian(f)(x), want, rtol=1e-4, atol=1e-6)


def test_solver_vector_parameters():
    """Several closed-over arrays, jacobians of vector outputs, both modes."""
    w = np.array([0.3, 0.9])

    def f(w):
        return np.array([si.quad(lambda s: np.exp(-w[0] * s) * np.cos(w[1] * s), 0.0, 1.0,
                                 epsabs=1e-13, epsrel=1e-13)[0],
                         so.brentq(lambda t: t ** 3 + w[0] * t - w[1], -2.0, 2.0, xtol=1e-14)])
    want = fd(f, w)
    np.testing.assert_allclose(ad.jacrev(f)(w), want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ad.jacfwd(f)(w), want, rtol=1e-6, atol=1e-8)

    def ode(y0):
        return si.odeint(lambda y, t: -w[0] * y + w[1] * y[::-1], y0, [0.0, 0.5, 1.0],
                         rtol=1e-11, atol=1e-11)
    y0 = np.array([1.0, -0.5])
    want = fd(ode, y0)
    np.testing.assert_allclose(ad.jacrev(ode)(y0), want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ad.jacfwd(ode)(y0), want, rtol=1e-6, atol=1e-8)


def test_solver_results_keep_their_type():
    def f(c):
        res = so.root_scalar(lambda t: t ** 2 - c, bracket=(0, 3))
        assert isinstance(res, so.RootResults) and res.converged
        full = so.brentq(lambda t: t ** 2 - c, 0, 3, full_output=True)
        assert isinstance(full, tuple) and full[1].converged
        return res.root + res["root"] + full[0] + full[1].root
    np.testing.assert_allclose(ad.grad(f)(2.0), 4 * 0.5 / math.sqrt(2.0), rtol=1e-6)
    np.testing.assert_allclose(ad.derivative(f)(2.0), 4 * 0.5 / math.sqrt(2.0), rtol=1e-6)


# -- the policy: a differentiated value never vanishes into C code --------------------------------

def test_hidden_value_raises_not_zero():
    """A value the callback reads from a list (not closed over, not in args=) cannot be given
    to the solver's rule: an error, never a zero."""
    def f(k):
        box = [k]
        return si.quad(lambda s: box[0] * s, 0.0, 1.0)[0]
    for transform in (ad.grad, ad.derivative):
        with pytest.raises(MissingRuleError, match="scipy.integrate.quad"):
            transform(f)(0.7)


def test_unsupported_options_raise():
    with pytest.raises(MissingRuleError, match="minimize with constraints or bounds"):
        ad.grad(lambda c: so.minimize(lambda x: np.sum((x - c) ** 2), np.zeros(2),
                                      bounds=[(-1, 1)] * 2).x[0])(0.3)
    with pytest.raises(MissingRuleError, match="events"):
        ad.derivative(lambda p: si.solve_ivp(lambda t, y: -p * y, (0, 1), [1.0],
                                             events=lambda t, y: y[0] - 0.5).y[0, -1])(0.3)


@pytest.mark.parametrize("public,f", [
    ("scipy.integrate.quad", lambda k: si.quad(lambda s: math.exp(-k * s), 0, 1)[0]),
    ("scipy.optimize.brentq", lambda c: so.brentq(lambda t: t ** 3 - c, 0, 3)),
    ("scipy.optimize.fsolve", lambda c: so.fsolve(lambda x: x ** 3 - c, [1.0])[0]),
    ("scipy.integrate.odeint", lambda p: si.odeint(lambda y, t: -p * y, [1.0], [0, 1])[-1, 0]),
])
def test_c_callback_without_rule_names_the_public_function(public, f):
    """Issue 14, 12: with the solver's stand-in removed, the C routine that calls back into a
    closure over a differentiated value raises, naming the function the user called."""
    solver = {"scipy.integrate.quad": si.quad, "scipy.optimize.brentq": so.brentq,
              "scipy.optimize.fsolve": so.fsolve, "scipy.integrate.odeint": si.odeint}[public]
    with without_rules(solver):
        for transform in (ad.grad, ad.derivative):
            with pytest.raises(MissingRuleError) as caught:
                transform(f)(0.7)
            message = str(caught.value)
            assert message.startswith("no ") and f"rule for {public} " in message, message
    assert abs(ad.grad(f)(0.7)) > 0  # the stand-in is back


@pytest.mark.parametrize("public,fn,f", [
    ("scipy.linalg.solve_triangular", "solve_triangular",
     lambda a: np.sum(sla.solve_triangular(a, B))),
    ("scipy.linalg.eigh", "eigh", lambda a: np.sum(sla.eigh(a, eigvals_only=True))),
    ("scipy.linalg.cholesky", "cholesky", lambda a: np.sum(sla.cholesky(a))),
    ("scipy.linalg.lu_factor", "lu_factor", lambda a: np.sum(sla.lu_factor(a)[0])),
    ("scipy.special.zeta", "zeta", lambda a: np.sum(sc.zeta(3.0, a + 1.0))),
])
def test_missing_rule_names_the_public_function(public, fn, f):
    """With the public function's rule removed, the engine goes into SciPy's code and meets a
    LAPACK wrapper or a ufunc without a rule: the error names what the user called first."""
    target = getattr(sc if fn == "zeta" else sla, fn)
    with without_rules(target):
        for transform in (ad.grad, ad.jacfwd):
            with pytest.raises(MissingRuleError) as caught:
                transform(f)(SPD)
            assert f"rule for {public} " in str(caught.value), str(caught.value)
    ad.grad(f)(SPD)  # the rule is back


def test_missing_stats_standin_names_the_public_method():
    from scipy.stats._distn_infrastructure import rv_continuous
    with without_rules(rv_continuous.logpdf):
        for transform in (ad.grad, ad.derivative):
            with pytest.raises(MissingRuleError) as caught:
                transform(lambda m: st.norm.logpdf(1.0, m, 2.0))(0.3)
            assert "rule for scipy.stats.norm.logpdf " in str(caught.value)  # (the instance)


class Model:
    def __init__(self, k):
        self.k = k

    def rate(self, s):
        return np.exp(-self.k * s)


def test_bound_method_reading_a_differentiated_attribute_raises():
    """A callback that reads a differentiated attribute: not handed to the rule, so an error
    in both modes (the docs say: read it into a local and close over that)."""
    for transform in (ad.grad, ad.derivative):
        with pytest.raises(MissingRuleError, match="scipy.integrate.quad"):
            transform(lambda k: si.quad(Model(k).rate, 0.0, 1.0)[0])(0.7)


@pytest.mark.parametrize("f,x", [
    (lambda s: st.norm.logpdf(1.0, 0.2, s), 1.3), (lambda x: st.t.cdf(x, 3.5), 0.7),
    (lambda m: st.poisson.logpmf(3, m), 2.5), (lambda x: sc.chdtr(3.0, x), 1.7),
    (lambda p: st.binom.pmf(3, 7, p), 0.4), (lambda q: sc.zeta(3.0, q), 1.5)])
def test_stats_and_special_second_derivatives(f, x):
    want = fd(ad.grad(f), x, 1e-5)
    np.testing.assert_allclose(ad.hessian(f)(x), want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(ad.derivative(ad.derivative(f))(x), want, rtol=1e-5, atol=1e-7)
