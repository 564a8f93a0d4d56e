"""Rules for ``scipy.special`` (registered only when SciPy is importable).

Abbreviations: ``x`` (``z``) the argument, ``v``/``n`` an order, ``a``, ``b`` shape parameters,
``df`` degrees of freedom, ``out`` the primal output, ``dx`` a tangent (leading batch
dimensions allowed), ``ct`` a cotangent.

Conventions:

- Elementwise functions follow the ufunc conventions (broadcast tangents lifted against
  ``out``, cotangents returned at the broadcast shape).  Functions holomorphic where SciPy
  accepts complex input (``erf``, ``gamma``, ``loggamma``, ``expit``...) use the real formulas.
- An integer order or degree (``polygamma``'s ``n``, ``expn``'s ``n``) is ``ZERO``.
- The derivatives in a real order or shape parameter that SciPy gives no formula for --
  ``gammainc``'s ``a``, ``betainc``'s ``a, b`` (and through them ``chdtr``'s ``v``,
  ``stdtr``'s ``df``, ``fdtr``'s ``dfn, dfd``), the order ``v`` of ``jv``, ``yv``, ``iv``,
  ``kv``, ``ive``, ``kve`` -- are computed numerically by :mod:`._special_params` (series,
  continued fractions, quadrature of integral representations; never finite differences).
  Each of those partials is a primitive whose own derivative in ``x`` is closed-form, so
  mixed second derivatives nest; a second derivative in the parameter itself raises
  ``MissingRuleError``.  A real parameter with no rule at all (``zeta``'s ``x``,
  ``chndtr``'s non-centrality) raises ``MissingRuleError`` instead of returning a wrong zero.
- ``softmax``, ``log_softmax`` and ``logsumexp`` take NumPy's ``axis``/``keepdims``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .._rules import ZERO, defjvp, defvjp, nondifferentiable
from ._common import expand, fit, lift, near_zero, neg_axes
from ._special_params import (beta_density, betainc_da, betainc_db, gamma_density, gammainc_da,
                              ive_dv, jv_dv, kve_dv, yv_dv)

try:
    import scipy.special as sc
except ImportError:  # pragma: no cover - overdub_ad works without SciPy
    sc = None

_SQRT_PI = math.sqrt(math.pi)
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_DEGREE = math.pi / 180.0
# exprel(x) = (e^x - 1) / x = sum_k x^k / (k+1)!; its slope near 0 by the series
_EXPREL_SLOPE = [(k + 1) / math.factorial(k + 2) for k in range(14)]


def _get(name: Any) -> Any:
    return getattr(sc, name, None)


def _rule(deriv: Any, pos: int, nargs: int, mode: str) -> Callable[..., Any]:
    """The rule for argument ``pos`` of an ``nargs``-ary elementwise function whose partial
    derivative is ``deriv(*args, out)``."""
    def jvp(d: Any, out: Any, /, *args: Any, **kw: Any) -> Any:
        return fit(lift(d, args[pos], out) * deriv(*args[:nargs], out), d, args[pos], out)

    def vjp(ct: Any, out: Any, /, *args: Any, **kw: Any) -> Any:
        return ct * deriv(*args[:nargs], out)
    return jvp if mode == "fwd" else vjp


def _elementwise(name: Any, *partials: Any) -> None:
    """Register ``scipy.special.<name>`` with one partial derivative (or ZERO/None) per
    argument; each partial is ``partial(*args, out)``."""
    fn = _get(name)
    if fn is None:
        return
    n = len(partials)
    jv = [p if p is ZERO or p is None else _rule(p, k, n, "fwd") for k, p in enumerate(partials)]
    vj = [p if p is ZERO or p is None else _rule(p, k, n, "rev") for k, p in enumerate(partials)]
    defjvp(fn, *jv)
    defvjp(fn, *vj)


def _safe_div(a: Any, b: Any) -> Any:
    zero = np.equal(b, 0)
    return np.where(zero, 0.0, a / np.where(zero, 1.0, b))


if sc is not None:
    # gamma family
    _elementwise("gamma", lambda x, out: out * sc.psi(x))
    _elementwise("rgamma", lambda x, out: -out * sc.psi(x))
    _elementwise("gammaln", lambda x, out: sc.psi(x))
    _elementwise("loggamma", lambda x, out: sc.psi(x))
    _elementwise("digamma", lambda x, out: sc.polygamma(1, x))
    _elementwise("psi", lambda x, out: sc.polygamma(1, x))
    _elementwise("polygamma", ZERO, lambda n, x, out: sc.polygamma(np.add(n, 1), x))
    _elementwise("multigammaln", lambda a, d, out: np.sum(
        sc.psi(np.expand_dims(a, -1) - 0.5 * np.arange(int(d))), axis=-1), ZERO)
    _elementwise("beta", lambda a, b, out: out * (sc.psi(a) - sc.psi(a + b)),
                 lambda a, b, out: out * (sc.psi(b) - sc.psi(a + b)))
    _elementwise("betaln", lambda a, b, out: sc.psi(a) - sc.psi(a + b),
                 lambda a, b, out: sc.psi(b) - sc.psi(a + b))
    _elementwise("gammainc", lambda a, x, out: gammainc_da(a, x),
                 lambda a, x, out: gamma_density(a, x))
    _elementwise("gammaincc", lambda a, x, out: -gammainc_da(a, x),
                 lambda a, x, out: -gamma_density(a, x))
    _elementwise("betainc", lambda a, b, x, out: betainc_da(a, b, x),
                 lambda a, b, x, out: betainc_db(a, b, x),
                 lambda a, b, x, out: beta_density(a, b, x))

    # error functions and the normal distribution
    _elementwise("erf", lambda x, out: 2.0 / _SQRT_PI * np.exp(-x * x))
    _elementwise("erfc", lambda x, out: -2.0 / _SQRT_PI * np.exp(-x * x))
    _elementwise("erfi", lambda x, out: 2.0 / _SQRT_PI * np.exp(x * x))
    _elementwise("erfcx", lambda x, out: 2.0 * x * out - 2.0 / _SQRT_PI)
    _elementwise("erfinv", lambda x, out: _SQRT_PI / 2.0 * np.exp(out * out))
    _elementwise("erfcinv", lambda x, out: -_SQRT_PI / 2.0 * np.exp(out * out))
    _elementwise("dawsn", lambda x, out: 1.0 - 2.0 * x * out)
    _elementwise("ndtr", lambda x, out: np.exp(-0.5 * x * x) / _SQRT_2PI)
    _elementwise("log_ndtr", lambda x, out: np.exp(-0.5 * x * x - out) / _SQRT_2PI)
    _elementwise("ndtri", lambda x, out: _SQRT_2PI * np.exp(0.5 * out * out))

    # logistic and friends
    _elementwise("expit", lambda x, out: out * (1.0 - out))
    _elementwise("log_expit", lambda x, out: sc.expit(-x))
    _elementwise("logit", lambda x, out: 1.0 / (x * (1.0 - x)))
    _elementwise("xlogy", lambda x, y, out: np.log(y), lambda x, y, out: _safe_div(x, y))
    _elementwise("xlog1py", lambda x, y, out: np.log1p(y), lambda x, y, out: _safe_div(x, 1.0 + y))
    _elementwise("entr", lambda x, out: -(np.log(x) + 1.0))
    _elementwise("rel_entr", lambda x, y, out: np.log(x / y) + 1.0, lambda x, y, out: -x / y)
    _elementwise("kl_div", lambda x, y, out: np.log(x / y), lambda x, y, out: 1.0 - x / y)
    _elementwise("cbrt", lambda x, out: 1.0 / (3.0 * out * out))
    # spence(z) = integral from 1 to z of log(t) / (1 - t): its integrand, -1 at z = 1
    _elementwise("spence", lambda z, out: np.where(
        np.equal(z, 1.0), -1.0, np.log(z) / np.where(np.equal(z, 1.0), 2.0, 1.0 - z)))
    # huber(d, r): r^2 / 2 inside |r| <= d, d (|r| - d / 2) outside
    _elementwise("huber", lambda d, r, out: np.where(np.abs(r) <= d, 0.0, np.abs(r) - d),
                 lambda d, r, out: np.clip(r, -d, d))
    # pseudo_huber(d, r) = d^2 (s - 1), s = sqrt(1 + (r / d)^2)
    _elementwise("pseudo_huber",
                 lambda d, r, out: 2.0 * out / d - r * r / (d * np.sqrt(1.0 + (r / d) ** 2)),
                 lambda d, r, out: r / np.sqrt(1.0 + (r / d) ** 2))
    # binom(n, k) = Gamma(n + 1) / (Gamma(k + 1) Gamma(n - k + 1)), for real n and k
    _elementwise("binom", lambda n, k, out: out * (sc.psi(n + 1.0) - sc.psi(n - k + 1.0)),
                 lambda n, k, out: out * (sc.psi(n - k + 1.0) - sc.psi(k + 1.0)))
    _elementwise("expm1", lambda x, out: out + 1.0)
    _elementwise("log1p", lambda x, out: 1.0 / (1.0 + x))
    _elementwise("cosm1", lambda x, out: -np.sin(x))
    # trigonometric functions of degrees
    _elementwise("sindg", lambda x, out: _DEGREE * sc.cosdg(x))
    _elementwise("cosdg", lambda x, out: -_DEGREE * sc.sindg(x))
    _elementwise("tandg", lambda x, out: _DEGREE * (1.0 + out * out))
    _elementwise("cotdg", lambda x, out: -_DEGREE * (1.0 + out * out))
    _elementwise("exprel", lambda x, out: near_zero(
        x, _EXPREL_SLOPE, lambda x: (np.exp(x) - sc.exprel(x)) / x, 0.1))
    _elementwise("expi", lambda x, out: np.exp(x) / x)
    _elementwise("exp1", lambda x, out: -np.exp(-x) / x)
    _elementwise("expn", ZERO, lambda n, x, out: -sc.expn(np.subtract(n, 1), x))
    _elementwise("lambertw", lambda z, *rest: rest[-1] / (z * (1.0 + rest[-1])), ZERO, ZERO)

    # Bessel functions: x-derivatives by the recurrences
    _elementwise("j0", lambda x, out: -sc.j1(x))
    _elementwise("j1", lambda x, out: 0.5 * (sc.j0(x) - sc.jv(2, x)))
    _elementwise("y0", lambda x, out: -sc.y1(x))
    _elementwise("y1", lambda x, out: 0.5 * (sc.y0(x) - sc.yv(2, x)))
    _elementwise("i0", lambda x, out: sc.i1(x))
    # numpy.i0 as scipy.special.i0: traced, its code's np.abs(x) would make i0''(0) = 0
    # (abs'(0) = 0), not 1/2
    defjvp(np.i0, _rule(lambda x, out: sc.i1(x), 0, 1, "fwd"))
    defvjp(np.i0, _rule(lambda x, out: sc.i1(x), 0, 1, "rev"))
    _elementwise("i1", lambda x, out: 0.5 * (sc.i0(x) + sc.iv(2, x)))
    _elementwise("k0", lambda x, out: -sc.k1(x))
    _elementwise("k1", lambda x, out: -0.5 * (sc.k0(x) + sc.kv(2, x)))
    _elementwise("i0e", lambda x, out: sc.i1e(x) - np.sign(x) * out)
    _elementwise("i1e", lambda x, out: 0.5 * (sc.i0e(x) + sc.ive(2, x)) - np.sign(x) * out)
    _elementwise("k0e", lambda x, out: out - sc.k1e(x))
    _elementwise("k1e", lambda x, out: out - 0.5 * (sc.k0e(x) + sc.kve(2, x)))
    # ... and in a real order v, numerically (I and K scaled: ive_dv is e^-x dI/dv)
    _elementwise("jv", lambda v, x, out: jv_dv(v, x),
                 lambda v, x, out: 0.5 * (sc.jv(v - 1, x) - sc.jv(v + 1, x)))
    _elementwise("yv", lambda v, x, out: yv_dv(v, x),
                 lambda v, x, out: 0.5 * (sc.yv(v - 1, x) - sc.yv(v + 1, x)))
    _elementwise("iv", lambda v, x, out: np.exp(np.abs(x)) * ive_dv(v, x),
                 lambda v, x, out: 0.5 * (sc.iv(v - 1, x) + sc.iv(v + 1, x)))
    _elementwise("kv", lambda v, x, out: np.exp(-x) * kve_dv(v, x),
                 lambda v, x, out: -0.5 * (sc.kv(v - 1, x) + sc.kv(v + 1, x)))
    _elementwise("ive", lambda v, x, out: ive_dv(v, x),
                 lambda v, x, out: 0.5 * (sc.ive(v - 1, x) + sc.ive(v + 1, x))
                 - np.sign(np.real(x)) * out)
    _elementwise("kve", lambda v, x, out: kve_dv(v, x),
                 lambda v, x, out: out - 0.5 * (sc.kve(v - 1, x) + sc.kve(v + 1, x)))

    # complete elliptic integrals of the parameter m
    _elementwise("ellipk", lambda m, out: (sc.ellipe(m) - (1.0 - m) * out)
                 / (2.0 * m * (1.0 - m)))
    _elementwise("ellipe", lambda m, out: (out - sc.ellipk(m)) / (2.0 * m))

    # -- softmax, log_softmax, logsumexp (not elementwise) ------------------------------------

    def _softmax_jvp(dx: Any, out: Any, /, x: Any, axis: Any = None) -> Any:
        ax = neg_axes(axis, np.ndim(x))
        return out * (dx - np.sum(out * dx, axis=ax, keepdims=True))

    def _softmax_vjp(ct: Any, out: Any, /, x: Any, axis: Any = None) -> Any:
        ax = neg_axes(axis, np.ndim(x))
        return out * (ct - np.sum(out * ct, axis=ax, keepdims=True))

    def _log_softmax_jvp(dx: Any, out: Any, /, x: Any, axis: Any = None) -> Any:
        ax = neg_axes(axis, np.ndim(x))
        return dx - np.sum(np.exp(out) * dx, axis=ax, keepdims=True)

    def _log_softmax_vjp(ct: Any, out: Any, /, x: Any, axis: Any = None) -> Any:
        ax = neg_axes(axis, np.ndim(x))
        return ct - np.exp(out) * np.sum(ct, axis=ax, keepdims=True)

    defjvp(sc.softmax, _softmax_jvp)
    defvjp(sc.softmax, _softmax_vjp)
    defjvp(sc.log_softmax, _log_softmax_jvp)
    defvjp(sc.log_softmax, _log_softmax_vjp)

    def _lse_parts(a: Any, axis: Any, b: Any, keepdims: Any, return_sign: Any, out: Any) -> Any:
        """(axes, weights w = d out / d a, weights d out / d b) as arrays shaped like a."""
        ax = neg_axes(axis, np.ndim(a))
        value, sign = (out[0], out[1]) if return_sign else (out, 1.0)
        value_k = expand(value, ax, keepdims)
        sign_k = expand(sign, ax, keepdims) if return_sign else 1.0
        e = np.exp(a - value_k) / sign_k
        return ax, e if b is None else b * e, e

    def _lse_rule(pos: int, mode: str) -> Callable[..., Any]:
        def rule(d: Any, out: Any, /, a: Any, axis: Any = None, b: Any = None,
                 keepdims: Any = False, return_sign: Any = False, **kw: Any) -> Any:
            ax, wa, wb = _lse_parts(a, axis, b, keepdims, return_sign, out)
            w, arg = (wa, a) if pos == 0 else (wb, b)
            if mode == "rev":
                c = d
                if return_sign:
                    c = np.zeros(np.shape(out[0])) if d[0] is None else d[0]
                return expand(c, ax, keepdims) * w
            nd = np.ndim(w)
            dl = np.reshape(d, np.shape(d)[:np.ndim(d) - np.ndim(arg)]
                            + (1,) * (nd - np.ndim(arg)) + np.shape(arg))
            t = np.sum(dl * w, axis=ax, keepdims=keepdims)
            return (t, None) if return_sign else t
        return rule

    defjvp(sc.logsumexp, _lse_rule(0, "fwd"), ZERO, _lse_rule(2, "fwd"))
    defvjp(sc.logsumexp, _lse_rule(0, "rev"), ZERO, _lse_rule(2, "rev"))


# -- distribution functions and the rest of what scipy.stats calls ---------------------------
# (in x the densities; in a degree of freedom or shape parameter the partials of gammainc and
# betainc they are written with.  pdtr and _binom_* are differentiated in their float
# parameter.)

def _chi2_pdf(v: Any, x: Any) -> Any:
    return np.exp(sc.xlogy(v / 2.0 - 1.0, x) - x / 2.0 - sc.gammaln(v / 2.0)
                  - v / 2.0 * math.log(2.0))


def _t_pdf(df: Any, t: Any) -> Any:
    return np.exp(sc.gammaln((df + 1.0) / 2.0) - sc.gammaln(df / 2.0)
                  - 0.5 * np.log(df * math.pi) - (df + 1.0) / 2.0 * np.log1p(t * t / df))


def _stdtr_ddf(df: Any, t: Any, out: Any) -> Any:
    """d stdtr(df, t) / d df.  With ``z = df / (df + t^2)``, ``y = t^2 / (df + t^2)`` (each
    accurate on its own) ``stdtr = 1/2 + sign(t) I_y(1/2, df/2) / 2 = (1 + sign(t)) / 2 -
    sign(t) I_z(df/2, 1/2) / 2``; the partial is written on whichever of ``y``, ``z`` is the
    smaller (the incomplete beta's argument is then exact), and the chain rule's term
    ``density * dz/ddf = z^(df/2) y^(1/2) / (df B(df/2, 1/2))`` on both (``dz/ddf = y z / df``)."""
    q = df + t * t
    z, y = df / q, t * t / q
    s = np.sign(t)
    term = np.exp(df / 2.0 * np.log(z) - np.log(df) - sc.betaln(df / 2.0, 0.5)) * \
        np.abs(t) / np.sqrt(q)
    return np.where(y <= z, 0.5 * s * (0.5 * betainc_db(0.5, df / 2.0, y) - term),
                    -0.5 * s * (0.5 * betainc_da(df / 2.0, 0.5, z) + term))


def _fdtr_parts(m: Any, n: Any, x: Any) -> tuple[Any, Any, Any, Any]:
    """``(w, 1 - w, swapped, log(w^(m/2) (1-w)^(n/2) / B(m/2, n/2)))`` for ``fdtr(m, n, x) =
    I_w(m/2, n/2)``, ``w = m x / (n + m x)``: ``swapped`` where ``w > 1/2``, and there
    ``fdtr = 1 - I_(1-w)(n/2, m/2)`` is differentiated (its argument exact)."""
    q = n + m * x
    w, v = m * x / q, n / q
    return w, v, w > v, m / 2.0 * np.log(w) + n / 2.0 * np.log(v) - sc.betaln(m / 2.0, n / 2.0)


def _fdtr_dm(m: Any, n: Any, x: Any, out: Any) -> Any:
    """d fdtr / d dfn: ``I_a(m/2, n/2, w) / 2 + density * dw/dm``, ``dw/dm = w (1-w) / m``."""
    w, v, swapped, log_term = _fdtr_parts(m, n, x)
    inner = np.where(swapped, -betainc_db(n / 2.0, m / 2.0, v), betainc_da(m / 2.0, n / 2.0, w))
    return 0.5 * inner + np.exp(log_term) / m


def _fdtr_dn(m: Any, n: Any, x: Any, out: Any) -> Any:
    """d fdtr / d dfd: ``I_b(m/2, n/2, w) / 2 + density * dw/dn``, ``dw/dn = -w (1-w) / n``."""
    w, v, swapped, log_term = _fdtr_parts(m, n, x)
    inner = np.where(swapped, -betainc_da(n / 2.0, m / 2.0, v), betainc_db(m / 2.0, n / 2.0, w))
    return 0.5 * inner - np.exp(log_term) / n


def _fdtr_dx(m: Any, n: Any, x: Any, out: Any) -> Any:
    """d fdtr / dx, the F density: ``m^(m/2) n^(n/2) x^(m/2-1) / ((n + m x)^((m+n)/2)
    B(m/2, n/2))``."""
    q = n + m * x
    return np.exp(m / 2.0 * np.log(m / q) + sc.xlogy(m / 2.0 - 1.0, x) + n / 2.0 * np.log(n / q)
                  - sc.betaln(m / 2.0, n / 2.0))


def _poisson_pmf(k: Any, m: Any) -> Any:
    k = np.floor(k)
    return np.exp(sc.xlogy(k, m) - m - sc.gammaln(k + 1.0))


def _binom_pmf(k: Any, n: Any, p: Any) -> Any:
    return np.exp(sc.gammaln(n + 1.0) - sc.gammaln(k + 1.0) - sc.gammaln(n - k + 1.0)
                  + sc.xlogy(k, p) + sc.xlog1py(n - k, -p))


def _binom_pmf_dp(k: Any, n: Any, p: Any, out: Any) -> Any:
    """d/dp of ``n choose k p^k (1-p)^(n-k)``, written so that it is finite at p = 0 and 1."""
    return n * (_binom_pmf(k - 1.0, n - 1.0, p) - _binom_pmf(k, n - 1.0, p))


if sc is not None:
    import scipy.special._ufuncs as _scu

    _elementwise("betaincc", lambda a, b, x, out: -betainc_da(a, b, x),
                 lambda a, b, x, out: -betainc_db(a, b, x),
                 lambda a, b, x, out: -beta_density(a, b, x))
    _elementwise("chdtr", lambda v, x, out: 0.5 * gammainc_da(v / 2.0, x / 2.0),
                 lambda v, x, out: _chi2_pdf(v, x))
    _elementwise("chdtrc", lambda v, x, out: -0.5 * gammainc_da(v / 2.0, x / 2.0),
                 lambda v, x, out: -_chi2_pdf(v, x))
    _elementwise("stdtr", _stdtr_ddf, lambda df, t, out: _t_pdf(df, t))
    _elementwise("fdtr", _fdtr_dm, _fdtr_dn, _fdtr_dx)
    _elementwise("fdtrc", lambda m, n, x, out: -_fdtr_dm(m, n, x, out),
                 lambda m, n, x, out: -_fdtr_dn(m, n, x, out),
                 lambda m, n, x, out: -_fdtr_dx(m, n, x, out))
    _elementwise("pdtr", ZERO, lambda k, m, out: -_poisson_pmf(k, m))
    _elementwise("pdtrc", ZERO, lambda k, m, out: _poisson_pmf(k, m))
    _elementwise("yn", ZERO, lambda n, x, out: 0.5 * (sc.yn(np.subtract(n, 1), x)
                                                     - sc.yn(np.add(n, 1), x)))
    _elementwise("poch", lambda z, m, out: out * (sc.psi(z + m) - sc.psi(z)),
                 lambda z, m, out: out * sc.psi(z + m))
    defjvp(sc.zeta, None, _rule(lambda x, q, out: -x * sc.zeta(x + 1.0, q), 1, 2, "fwd"))
    defvjp(sc.zeta, None, _rule(lambda x, q, out: -x * sc.zeta(x + 1.0, q), 1, 2, "rev"))
    nondifferentiable(sc.gammasgn)
    # what scipy.stats.beta.pdf calls (Boost's beta density), in x, a and b
    if hasattr(_scu, "_beta_pdf"):
        _beta_partials = (
            lambda x, a, b, out: out * ((a - 1.0) / x - (b - 1.0) / (1.0 - x)),
            lambda x, a, b, out: out * (np.log(x) - sc.psi(a) + sc.psi(a + b)),
            lambda x, a, b, out: out * (np.log1p(-x) - sc.psi(b) + sc.psi(a + b)))
        defjvp(_scu._beta_pdf, *(_rule(p, i, 3, "fwd") for i, p in enumerate(_beta_partials)))
        defvjp(_scu._beta_pdf, *(_rule(p, i, 3, "rev") for i, p in enumerate(_beta_partials)))
    # what scipy.stats.binom calls (Boost's binomial distribution), in p
    for _fn, _partial in ((getattr(_scu, "_binom_pmf", None), _binom_pmf_dp),
                          (getattr(_scu, "_binom_cdf", None),
                           lambda k, n, p, out: -n * _binom_pmf(np.floor(k), n - 1.0, p)),
                          (getattr(_scu, "_binom_sf", None),
                           lambda k, n, p, out: n * _binom_pmf(np.floor(k), n - 1.0, p))):
        if _fn is not None:
            defjvp(_fn, ZERO, ZERO, _rule(_partial, 2, 3, "fwd"))
            defvjp(_fn, ZERO, ZERO, _rule(_partial, 2, 3, "rev"))
