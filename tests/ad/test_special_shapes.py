"""Derivatives of scipy.special functions in their shape parameters and real orders (issue #15):
``gammainc``/``gammaincc`` in ``a``, ``betainc``/``betaincc`` in ``a, b``, ``chdtr``, ``stdtr``,
``fdtr`` in their degrees of freedom, ``jv``/``yv``/``iv``/``kv``/``ive``/``kve`` in the order;
and through them the scipy.stats distributions (gamma, t, beta, chi2, f, invgamma, chi...) in
every float parameter.

Each partial is checked in both modes (reverse: grad/jacrev/vjp, forward: derivative/jacfwd/jvp),
first and repeated call, against central finite differences over a grid of points, and against
closed forms known exactly (``dI_x(a, 1)/da = x^a ln x``, ``dJ_v/dv`` at ``v = 1/2`` in sine and
cosine integrals...) to near machine precision.  A second derivative in the parameter raises
MissingRuleError naming the function, mixed second derivatives (parameter and x) nest, and an
error met inside a scipy.stats method names that method first.
"""

from __future__ import annotations

import numpy as np
import pytest
from tests.conftest import fd

import overdub_ad as ad
from overdub_ad import MissingRuleError

sc = pytest.importorskip("scipy.special")
st = pytest.importorskip("scipy.stats")

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def both_modes(f, x, rtol=1e-6, atol=1e-9, h=1e-6):
    """``f``'s derivative (Jacobian) at ``x`` by reverse and forward mode, each twice, against
    central differences."""
    want = fd(f, x, h)
    scalar_out = np.ndim(f(x)) == 0
    reverse = ad.grad(f) if scalar_out else ad.jacrev(f)
    forward = ad.derivative(f) if np.ndim(x) == 0 else ad.jacfwd(f)
    for _ in range(2):
        np.testing.assert_allclose(reverse(x), want, rtol=rtol, atol=atol)
        np.testing.assert_allclose(forward(x), want, rtol=rtol, atol=atol)


def elementwise_both_modes(f, x, want, rtol):
    """An elementwise ``f`` at the array ``x``: ``jvp`` with a tangent of ones and ``vjp`` with a
    cotangent of ones both give the elementwise derivative, compared with ``want``."""
    ones = np.ones_like(x)
    for _ in range(2):
        np.testing.assert_allclose(ad.jvp(f, (x,), (ones,))[1], want, rtol=rtol)
        out, pullback = ad.vjp(f, x)
        np.testing.assert_allclose(pullback(np.ones_like(out))[0], want, rtol=rtol)


# -- each partial against finite differences, over a grid --------------------------------------

A = np.array([0.1, 0.4, 1.0, 2.5, 7.0, 20.0, 50.0])  # shape parameters
XG = np.array([0.01, 0.5, 1.3, 4.0, 9.0, 30.0, 80.0])  # arguments of the incomplete gamma
XB = np.array([1e-3, 0.05, 0.3, 0.5, 0.7, 0.95, 0.999])  # ... of the incomplete beta
V = np.array([-4.5, -2.3, -1.0, -0.5, 0.0, 0.3, 1.0, 2.5, 7.0, 14.0, 20.0])  # Bessel orders
XJ = np.array([0.05, 0.7, 2.0, 6.5, 15.0, 40.0, 95.0])

PARTIALS = [
    # (name, f(p) elementwise over the flat grid, parameter values)
    ("gammainc a", lambda a: sc.gammainc(a, np.repeat(XG, len(A))), np.tile(A, len(XG))),
    ("gammaincc a", lambda a: sc.gammaincc(a, np.repeat(XG, len(A))), np.tile(A, len(XG))),
    ("betainc a", lambda a: sc.betainc(a, 2.5, np.repeat(XB, len(A))), np.tile(A, len(XB))),
    ("betainc b", lambda b: sc.betainc(0.7, b, np.repeat(XB, len(A))), np.tile(A, len(XB))),
    ("betaincc a", lambda a: sc.betaincc(a, 7.0, np.repeat(XB, len(A))), np.tile(A, len(XB))),
    ("betaincc b", lambda b: sc.betaincc(20.0, b, np.repeat(XB, len(A))), np.tile(A, len(XB))),
    ("chdtr v", lambda v: sc.chdtr(v, np.repeat(XG, len(A))), np.tile(A, len(XG))),
    ("chdtrc v", lambda v: sc.chdtrc(v, np.repeat(XG, len(A))), np.tile(A, len(XG))),
    ("stdtr df", lambda d: sc.stdtr(d, np.repeat([-30.0, -2.0, -0.3, 1e-3, 0.7, 4.0], len(A))),
     np.tile(A, 6)),
    ("fdtr dfn", lambda m: sc.fdtr(m, 4.0, np.repeat([0.05, 0.8, 2.0, 15.0], len(A))),
     np.tile(A, 4)),
    ("fdtr dfd", lambda n: sc.fdtr(3.0, n, np.repeat([0.05, 0.8, 2.0, 15.0], len(A))),
     np.tile(A, 4)),
    ("fdtrc dfd", lambda n: sc.fdtrc(0.4, n, np.repeat([0.05, 0.8, 2.0, 15.0], len(A))),
     np.tile(A, 4)),
    ("jv v", lambda v: sc.jv(v, np.repeat(XJ, len(V))), np.tile(V, len(XJ))),
    ("yv v", lambda v: sc.yv(v, np.repeat(XJ, len(V))), np.tile(V, len(XJ))),
    ("iv v", lambda v: sc.iv(v, np.repeat(XJ, len(V))), np.tile(V, len(XJ))),
    ("kv v", lambda v: sc.kv(v, np.repeat(XJ, len(V))), np.tile(V, len(XJ))),
    ("ive v", lambda v: sc.ive(v, np.repeat(XJ, len(V))), np.tile(V, len(XJ))),
    ("kve v", lambda v: sc.kve(v, np.repeat(XJ, len(V))), np.tile(V, len(XJ))),
]


@pytest.mark.parametrize("name,f,p", PARTIALS, ids=[c[0] for c in PARTIALS])
def test_partial_against_finite_differences(name, f, p):
    """Both modes (a tangent, a cotangent of ones: f is elementwise), first and repeated call,
    against fourth-order differences (Richardson on the central ones: the grid spans tails
    where the derivative is 1e-10 of the value and 1e-150 of one).  The tolerance is what the
    differences can resolve: 1e-7 relative, plus their rounding error, 2e-11 of the value."""
    h = 1e-4
    want = np.diag(4 * fd(f, p, h) - fd(f, p, 2 * h)) / 3
    tolerance = 1e-7 * np.abs(want) + 2e-11 * np.abs(f(p))
    for _ in range(2):
        got_fwd = ad.jvp(f, (p,), (np.ones_like(p),))[1]
        out, pullback = ad.vjp(f, p)
        got_rev = pullback(np.ones_like(out))[0]
        np.testing.assert_array_equal(got_fwd, got_rev)
        bad = ~(np.abs(got_fwd - want) <= tolerance)
        assert not bad.any(), (name, p[bad], got_fwd[bad], want[bad])


@pytest.mark.parametrize("f,x", [
    (lambda a: sc.gammainc(a, 1.3), 2.5), (lambda a: sc.gammaincc(a, 7.0), 3.5),
    (lambda b: sc.betainc(2.0, b, 0.3), 1.5), (lambda a: sc.betaincc(a, 3.0, 0.6), 0.8),
    (lambda v: sc.chdtr(v, 2.2), 3.0), (lambda d: sc.stdtr(d, -1.1), 4.5),
    (lambda m: sc.fdtr(m, 6.0, 1.2), 2.5), (lambda v: sc.jv(v, 1.3), 2.5),
    (lambda v: sc.yv(v, 3.3), -1.7), (lambda v: sc.iv(v, 0.8), 0.6),
    (lambda v: sc.kv(v, 2.0), -3.2), (lambda v: sc.kve(v, 50.0), 4.0),
])
def test_scalar_partials(f, x):
    """grad and derivative of a scalar call (the NumPy scalar paths)."""
    both_modes(f, x)


def test_broadcast_and_every_argument():
    """Parameters and argument broadcast against each other; each one's Jacobian, both modes."""
    a = np.array([[0.7], [2.5], [9.0]])
    x = np.array([0.4, 1.7, 6.0, 12.0])
    both_modes(lambda a: sc.gammainc(a, x), a)
    both_modes(lambda x: sc.gammainc(a, x), x)
    both_modes(lambda b: sc.betainc(a, b, x / 13.0), np.array([0.5, 1.5, 4.0, 30.0]))
    both_modes(lambda v: sc.jv(v, x), a - 1.0)
    both_modes(lambda t: sc.stdtr(a, t), x - 6.0)
    both_modes(lambda n: sc.fdtr(a, n, x), np.array([0.5, 1.5, 4.0, 30.0]))


# -- closed forms: the partials to near machine precision ---------------------------------------

def test_closed_forms_of_the_incomplete_functions():
    """I_x(a, 1) = x^a and I_x(1, b) = 1 - (1-x)^b give the beta partials exactly;
    dP/da at a = 1 is -(e^-x (ln x + Euler's gamma) + E1(x))."""
    x = np.array([1e-4, 0.02, 0.3, 0.5, 0.8, 0.999])
    a = np.array([0.2, 1.5, 3.0, 11.0, 40.0, 2.0])
    elementwise_both_modes(lambda a: sc.betainc(a, 1.0, x), a, x ** a * np.log(x), 1e-12)
    elementwise_both_modes(lambda b: sc.betainc(1.0, b, x), a,
                           -(1 - x) ** a * np.log1p(-x), 1e-12)
    elementwise_both_modes(lambda b: sc.betaincc(1.0, b, x), a,
                           (1 - x) ** a * np.log1p(-x), 1e-12)
    xs = np.array([1e-3, 0.4, 1.0, 1.9, 2.1, 8.0, 60.0])
    euler = 0.5772156649015329
    elementwise_both_modes(lambda a: sc.gammainc(a, xs), np.ones_like(xs),
                           -(np.exp(-xs) * (np.log(xs) + euler) + sc.exp1(xs)), 1e-12)


def test_closed_forms_of_the_bessel_order_derivatives():
    """DLMF 10.15 and 10.38: at order 0, dJ/dv = pi Y0 / 2, dY/dv = -pi J0 / 2, dI/dv = -K0,
    dK/dv = 0; at order 1/2 (and -1/2), the sine, cosine and exponential integrals."""
    x = np.array([0.01, 0.3, 1.7, 5.0, 12.0, 33.0, 90.0])
    zero, half = np.zeros_like(x), np.full_like(x, 0.5)
    si, ci = sc.sici(2 * x)
    c = np.sqrt(2 / (np.pi * x))
    e1, ei = sc.exp1(2 * x) * np.exp(x), sc.expi(2 * x) * np.exp(-x)
    checks = [
        (lambda v: sc.jv(v, x), zero, np.pi / 2 * sc.y0(x)),
        (lambda v: sc.yv(v, x), zero, -np.pi / 2 * sc.j0(x)),
        (lambda v: sc.iv(v, x), zero, -sc.k0(x)),
        (lambda v: sc.jv(v, x), half, c * (ci * np.sin(x) - si * np.cos(x))),
        (lambda v: sc.yv(v, x), half, c * (ci * np.cos(x) + (si - np.pi) * np.sin(x))),
        (lambda v: sc.kv(v, x), half, np.sqrt(np.pi / (2 * x)) * sc.exp1(2 * x) * np.exp(x)),
        (lambda v: sc.kv(v, x), -half, -np.sqrt(np.pi / (2 * x)) * sc.exp1(2 * x) * np.exp(x)),
        (lambda v: sc.iv(v, x), half, -(e1 + ei) / np.sqrt(2 * np.pi * x)),
        (lambda v: sc.iv(v, x), -half, (ei - e1) / np.sqrt(2 * np.pi * x)),
    ]
    for f, v, want in checks:
        elementwise_both_modes(f, v, want, 1e-11)
    np.testing.assert_array_equal(ad.jvp(lambda v: sc.kv(v, x), (zero,), (half,))[1], 0.0)


def test_values_at_the_ends():
    """Where the function is constant in its parameter (P(a, 0) = 0, I_1(a, b) = 1, stdtr at
    t = 0, J_v(0) for v > 0) the partial is 0, not NaN."""
    assert ad.grad(lambda a: sc.gammainc(a, 0.0))(2.5) == 0.0
    assert ad.derivative(lambda b: sc.betainc(2.0, b, 1.0))(2.5) == 0.0
    assert ad.grad(lambda d: sc.stdtr(d, 0.0))(2.5) == 0.0
    assert ad.derivative(lambda v: sc.jv(v, 0.0))(2.5) == 0.0


def test_complex_bessel_argument_raises():
    """Only real arguments: a complex one would otherwise be read as its real part."""
    for transform in (ad.grad, ad.derivative):
        with pytest.raises(MissingRuleError, match="scipy.special.jv .*complex"):
            transform(lambda v: np.real(sc.jv(v, 1.3 + 0.5j)))(1.5)


# -- scipy.stats: every float parameter, both modes ----------------------------------------------

STATS = [
    ("gamma.cdf a", lambda a: st.gamma.cdf(1.7, a, 0.2, 1.5), 2.5),
    ("gamma.cdf x", lambda x: st.gamma.cdf(x, 2.5, 0.2, 1.5), 1.7),
    ("gamma.cdf loc", lambda m: st.gamma.cdf(1.7, 2.5, m, 1.5), 0.2),
    ("gamma.cdf scale", lambda s: st.gamma.cdf(1.7, 2.5, 0.2, s), 1.5),
    ("gamma.sf a", lambda a: st.gamma.sf(4.0, a), 2.5),
    ("gamma.logcdf a", lambda a: st.gamma.logcdf(1.7, a), 2.5),
    ("gamma.logcdf x", lambda x: st.gamma.logcdf(x, 2.5), 1.7),
    ("gamma.logsf a", lambda a: st.gamma.logsf(4.0, a), 2.5),
    ("gamma.ppf a", lambda a: st.gamma.ppf(0.3, a, 0.2, 1.5), 2.5),
    ("gamma.ppf q", lambda q: st.gamma.ppf(q, 2.5, 0.2, 1.5), 0.3),
    ("gamma.isf a", lambda a: st.gamma.isf(0.1, a), 2.5),
    ("t.cdf df", lambda d: st.t.cdf(0.7, d, 0.1, 2.0), 3.5),
    ("t.cdf x", lambda x: st.t.cdf(x, 3.5, 0.1, 2.0), 0.7),
    ("t.cdf scale", lambda s: st.t.cdf(0.7, 3.5, 0.1, s), 2.0),
    ("t.sf df", lambda d: st.t.sf(-1.2, d), 3.5),
    ("t.logcdf df", lambda d: st.t.logcdf(-2.5, d), 3.5),
    ("t.logsf df", lambda d: st.t.logsf(2.5, d), 3.5),
    ("t.ppf df", lambda d: st.t.ppf(0.2, d), 3.5),
    ("t.isf df", lambda d: st.t.isf(0.05, d, 1.0, 3.0), 3.5),
    ("beta.cdf a", lambda a: st.beta.cdf(0.3, a, 2.0), 1.5),
    ("beta.cdf b", lambda b: st.beta.cdf(0.3, 1.5, b), 2.0),
    ("beta.cdf scale", lambda s: st.beta.cdf(0.3, 1.5, 2.0, 0.0, s), 1.2),
    ("beta.sf a", lambda a: st.beta.sf(0.8, a, 2.0), 1.5),
    ("beta.logcdf b", lambda b: st.beta.logcdf(0.1, 1.5, b), 2.0),
    ("beta.logsf a", lambda a: st.beta.logsf(0.9, a, 2.0), 1.5),
    ("beta.ppf a", lambda a: st.beta.ppf(0.3, a, 2.0), 1.5),
    ("beta.ppf b", lambda b: st.beta.ppf(0.3, 1.5, b), 2.0),
    ("beta.isf b", lambda b: st.beta.isf(0.3, 1.5, b), 2.0),
    ("chi2.cdf df", lambda d: st.chi2.cdf(1.7, d), 3.5),
    ("chi2.cdf x", lambda x: st.chi2.cdf(x, 3.5, 0.0, 1.2), 1.7),
    ("chi2.sf df", lambda d: st.chi2.sf(6.0, d), 3.5),
    ("chi2.logcdf df", lambda d: st.chi2.logcdf(1.7, d), 3.5),
    ("chi2.logsf df", lambda d: st.chi2.logsf(9.0, d), 3.5),
    ("chi2.ppf df", lambda d: st.chi2.ppf(0.7, d), 3.5),
    ("chi2.isf df", lambda d: st.chi2.isf(0.7, d), 3.5),
    ("f.cdf dfn", lambda m: st.f.cdf(1.3, m, 4.0), 2.5),
    ("f.cdf dfd", lambda n: st.f.cdf(1.3, 2.5, n), 4.0),
    ("f.cdf x", lambda x: st.f.cdf(x, 2.5, 4.0), 1.3),
    ("f.sf dfd", lambda n: st.f.sf(1.3, 2.5, n), 4.0),
    ("f.logcdf dfn", lambda m: st.f.logcdf(0.4, m, 4.0), 2.5),
    ("f.ppf dfn", lambda m: st.f.ppf(0.6, m, 4.0), 2.5),
    ("invgamma.cdf a", lambda a: st.invgamma.cdf(0.7, a), 2.5),
    ("chi.sf df", lambda d: st.chi.sf(1.2, d), 3.5),
    ("nakagami.cdf nu", lambda n: st.nakagami.cdf(0.9, n), 1.5),
    ("erlang.cdf a", lambda a: st.erlang.cdf(1.7, a), 3.0),
    ("frozen gamma", lambda a: st.gamma(a, scale=2.0).cdf(3.0), 2.5),
    ("gamma.cdf vectorized", lambda a: st.gamma.cdf(np.array([0.5, 1.7, 4.0, -1.0]), a), 2.5),
]


@pytest.mark.parametrize("name,f,x", STATS, ids=[c[0] for c in STATS])
def test_stats(name, f, x):
    """Reverse and forward mode against finite differences; the value is SciPy's."""
    both_modes(f, x, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(ad.vjp(f, x)[0], f(x), rtol=1e-12)


EVERY_PARAMETER = {  # distribution: (shape parameters, the point x), loc 0.1 and scale 1.3
    "gamma": ((2.5,), 1.9), "t": ((3.5,), -0.6), "beta": ((1.5, 2.5), 0.5),
    "chi2": ((3.5,), 2.7), "f": ((2.5, 6.0), 1.1),
}


@pytest.mark.parametrize("method", ["cdf", "sf", "logcdf", "logsf", "ppf", "isf"])
@pytest.mark.parametrize("dist", sorted(EVERY_PARAMETER))
def test_stats_every_float_parameter(dist, method):
    """grad with respect to all of the method's float arguments at once (x or q, the shapes,
    loc, scale), and jvp along each, against differences of SciPy's own method."""
    shapes, x = EVERY_PARAMETER[dist]
    point = 0.3 if method in ("ppf", "isf") else x
    fn = getattr(getattr(st, dist), method)
    args = (point, *shapes, 0.1, 1.3)
    got = ad.grad(fn, argnums=tuple(range(len(args))))(*args)
    for i, g in enumerate(got):
        want = fd(lambda v, i=i: fn(*args[:i], v, *args[i + 1:]), args[i])
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-10)
        moved = tuple(1.0 if k == i else 0.0 for k in range(len(args)))
        np.testing.assert_allclose(ad.jvp(fn, args, moved)[1], want, rtol=1e-6, atol=1e-10)


# -- second derivatives ---------------------------------------------------------------------------

SECOND = [
    ("gammainc", "a", lambda a: sc.gammainc(a, 1.3), 2.5),
    ("gammainc", "a", lambda d: sc.chdtrc(d, 1.3), 2.5),
    ("betainc", "a or b", lambda b: sc.betainc(2.0, b, 0.3), 2.5),
    ("betainc", "a or b", lambda d: sc.stdtr(d, 0.4), 2.5),
    ("betainc", "a or b", lambda m: sc.fdtr(m, 3.0, 0.4), 2.5),
    ("jv", "the order v", lambda v: sc.jv(v, 1.3), 2.5),
    ("yv", "the order v", lambda v: sc.yv(v, 1.3), 2.5),
    ("iv", "the order v", lambda v: sc.iv(v, 1.3), 2.5),
    ("kv", "the order v", lambda v: sc.kve(v, 1.3), 2.5),
]


@pytest.mark.parametrize("public,parameter,f,x", SECOND, ids=[f"{c[0]} {i}"
                                                             for i, c in enumerate(SECOND)])
def test_second_derivative_in_the_parameter_raises(public, parameter, f, x):
    """The first derivative is numerical (series, fraction, quadrature): its own derivative in
    the parameter is refused, naming the SciPy function -- never a silent zero -- in every
    nesting (forward over reverse, forward over forward, reverse over reverse)."""
    assert np.isfinite(ad.grad(f)(x))  # (once is fine)
    for second in (ad.hessian(f), ad.derivative(ad.derivative(f)), ad.grad(ad.grad(f))):
        with pytest.raises(MissingRuleError) as caught:
            second(x)
        message = str(caught.value)
        assert message.startswith(f"no derivative rule for the second derivative of "
                                  f"scipy.special.{public} in {parameter}:"), message


@pytest.mark.parametrize("g,x", [
    (lambda x: ad.grad(lambda a: sc.gammainc(a, x))(2.5), 1.3),
    (lambda x: ad.grad(lambda a: sc.gammaincc(a, x))(0.5), 3.3),
    (lambda x: ad.grad(lambda a: sc.betainc(a, 3.0, x))(2.5), 0.3),
    (lambda x: ad.grad(lambda b: sc.betainc(2.0, b, x))(2.5), 0.7),
    (lambda x: ad.grad(lambda v: sc.jv(v, x))(2.5), 1.3),
    (lambda x: ad.grad(lambda v: sc.yv(v, x))(-1.5), 2.3),
    (lambda x: ad.grad(lambda v: sc.iv(v, x))(2.5), 1.3),
    (lambda x: ad.grad(lambda v: sc.kv(v, x))(0.4), 1.3),
    (lambda x: ad.grad(lambda v: sc.ive(v, x))(2.5), 1.3),
    (lambda x: ad.grad(lambda v: sc.kve(v, x))(2.5), 1.3),
    (lambda t: ad.grad(lambda d: sc.stdtr(d, t))(2.5), 0.4),
    (lambda t: ad.grad(lambda d: st.t.cdf(t, d))(2.5), -1.4),
    (lambda x: ad.grad(lambda d: sc.chdtr(d, x))(2.5), 1.3),
    (lambda x: ad.grad(lambda m: sc.fdtr(m, 4.0, x))(2.5), 1.3),
    (lambda x: ad.grad(lambda a: st.gamma.cdf(x, a))(2.5), 1.7),
])
def test_mixed_second_derivatives(g, x):
    """Once in the parameter, once in x: the partial's own rule in x is closed-form, so the
    nesting works, in both outer modes."""
    want = fd(g, x, 1e-5)
    np.testing.assert_allclose(ad.derivative(g)(x), want, rtol=1e-6, atol=1e-10)
    np.testing.assert_allclose(ad.grad(g)(x), want, rtol=1e-6, atol=1e-10)


def test_second_derivatives_in_x_are_unchanged():
    """Differentiating twice in x alone never reaches the parameter's partial."""
    for f, x in ((lambda x: st.gamma.cdf(x, 2.5), 1.7), (lambda x: sc.jv(2.5, x), 1.3),
                 (lambda x: st.t.logcdf(x, 3.5), -0.4), (lambda x: sc.fdtr(2.5, 4.0, x), 1.3)):
        want = fd(ad.grad(f), x, 1e-5)
        np.testing.assert_allclose(ad.hessian(f)(x), want, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(ad.derivative(ad.derivative(f))(x), want, rtol=1e-6,
                                   atol=1e-9)


# -- errors name what the user called ------------------------------------------------------------

@pytest.mark.parametrize("public,inner,f", [
    ("scipy.stats.ncx2.cdf", "scipy.special.chndtr", lambda nc: st.ncx2.cdf(1.3, 3.0, nc)),
    ("scipy.stats.ncx2.sf", "_ncx2_sf", lambda nc: st.ncx2.sf(1.3, 3.0, nc)),
    ("scipy.stats.ncx2.ppf", "scipy.special.chndtr", lambda nc: st.ncx2.ppf(0.3, 3.0, nc)),
    ("scipy.stats.ncx2.logcdf", "scipy.special.chndtr", lambda nc: st.ncx2(3.0, nc).logcdf(1.3)),
])
def test_missing_rule_inside_stats_names_the_method_first(public, inner, f):
    """A shape parameter SciPy's special functions have no derivative for (ncx2's
    non-centrality goes through chndtr): the error starts with the scipy.stats method the user
    called (frozen or not), then says which internal function lacks the rule."""
    for transform in (ad.grad, ad.derivative):
        with pytest.raises(MissingRuleError) as caught:
            transform(f)(1.5)
        message = str(caught.value)
        assert message.startswith(f"no derivative rule for {public} "), message
        assert f"internal function {inner}" in message, message


def test_second_derivative_inside_stats_names_the_method_first():
    """Forward over forward meets the refusal inside the stats method's stand-in: named
    first; the reverse-mode sweep meets it outside any call, and names scipy.special."""
    f = lambda a: st.gamma.cdf(1.7, a)  # noqa: E731
    with pytest.raises(MissingRuleError) as caught:
        ad.derivative(ad.derivative(f))(2.5)
    message = str(caught.value)
    assert message.startswith("no derivative rule for scipy.stats.gamma.cdf "), message
    assert "second derivative of scipy.special.gammainc in a" in message
    with pytest.raises(MissingRuleError, match="^no derivative rule for the second derivative "
                                               "of scipy.special.gammainc in a"):
        ad.hessian(f)(2.5)

