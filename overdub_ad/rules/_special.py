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
- Functions of several outputs (``sici``, ``fresnel``, ``airy``, ``ellipj``...) follow the
  multi-output convention of ``._common``: a tuple of tangents, one per output, and a tuple of
  cotangents with ``None`` for an output not used (:func:`_several`).
- ``ellipkinc``/``ellipeinc`` (and through them ``ellipj``) in ``m``: the partials are
  primitives computed with Carlson's ``elliprd`` (no cancellation at ``m = 0``), closed-form
  in ``phi``; a second derivative in ``m`` raises ``MissingRuleError``.  ``airye``'s scaling
  of ``Bi`` is not holomorphic: a complex argument raises ``MissingRuleError``.
- Quantiles (``stdtrit``, ``gammaincinv``...) are differentiated as inverses
  (:func:`_inverse`); a real degree of the orthogonal polynomials, an order of ``struve``, the
  parameters of the hypergeometric functions have no rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from overdub import opaque

from .._rules import ZERO, MissingRuleError, defjvp, defvjp, nondifferentiable
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


# -- functions of several outputs, elliptic integrals, hypergeometric functions, inverses -----

# sin(x) / x and sinh(x) / x by their series near 0 (Si' and Shi', see ._common.near_zero)
_SIN_OVER_X = [0.0 if k % 2 else (-1.0) ** (k // 2) / math.factorial(k + 1) for k in range(17)]
_SINH_OVER_X = [0.0 if k % 2 else 1.0 / math.factorial(k + 1) for k in range(17)]
# d/dt (log1p(t) / t) = sum_j (-1)^(j+1) (j+1) t^j / (j+2), near 0 (inv_boxcox's lambda)
_LOG1P_OVER_T_SLOPE = [(-1.0) ** (j + 1) * (j + 1) / (j + 2) for j in range(18)]


def _tuple_rule(deriv: Any, pos: int, nargs: int, mode: str) -> Callable[..., Any]:
    """The rule for argument ``pos`` of an elementwise function with several outputs whose
    partial derivatives are ``deriv(*args, out)``: a tuple with one entry per output (None for
    an output that does not depend on the argument).  Tangents are a tuple of one per output,
    cotangents come as one (None for a zero one), as the multi-output convention of
    ``._common`` has them."""
    def jvp(d: Any, out: Any, /, *args: Any, **kw: Any) -> Any:
        x = args[pos]
        return tuple(None if p is None else fit(lift(d, x, o) * p, d, x, o)
                     for p, o in zip(deriv(*args[:nargs], out), out))

    def vjp(ct: Any, out: Any, /, *args: Any, **kw: Any) -> Any:
        total: Any = None
        for c, p in zip(ct, deriv(*args[:nargs], out)):
            if c is None or p is None:
                continue
            total = c * p if total is None else total + c * p
        return np.zeros(np.shape(out[0])) if total is None else total
    return jvp if mode == "fwd" else vjp


def _several(name: Any, *partials: Any) -> None:
    """Register ``scipy.special.<name>``, elementwise with several outputs: one partial (a
    function returning a tuple per output, see :func:`_tuple_rule`), ZERO or None per
    argument."""
    fn = _get(name)
    if fn is None:
        return
    n = len(partials)
    defjvp(fn, *(p if p is ZERO or p is None else _tuple_rule(p, k, n, "fwd")
                 for k, p in enumerate(partials)))
    defvjp(fn, *(p if p is ZERO or p is None else _tuple_rule(p, k, n, "rev")
                 for k, p in enumerate(partials)))


def _refuse_complex(name: str, *args: Any) -> None:
    """For a function SciPy accepts complex arguments for but that is not holomorphic there
    (``airye``'s scaling by ``exp(-|Re zeta|)``): a complex argument has no rule."""
    if any(np.iscomplexobj(v) for v in args):
        raise MissingRuleError(f"no derivative rule for scipy.special.{name} at a complex "
                               f"argument (it is not holomorphic there; real arguments only)")


def _positive_sqrt(x: Any) -> Any:
    """``sqrt(x)`` for ``x > 0``, 0 elsewhere; its derivative is finite (0) where it is 0 (the
    inner ``where`` keeps ``sqrt``'s infinite slope at 0 out of a second derivative)."""
    positive = np.greater(x, 0.0)
    return np.where(positive, np.sqrt(np.where(positive, x, 1.0)), 0.0)


def _exprel_slope(t: Any) -> Any:
    """``exprel'(t)``, ``exprel(t) = (e^t - 1) / t``: by its series near 0."""
    return near_zero(t, _EXPREL_SLOPE, lambda t: (np.exp(t) - sc.exprel(t)) / t, 0.1)


def _log1p_over_t_slope(t: Any) -> Any:
    """``d/dt (log1p(t) / t)``: by its series near 0."""
    return near_zero(t, _LOG1P_OVER_T_SLOPE,
                     lambda t: (t / (1.0 + t) - np.log1p(t)) / (t * t), 0.1)


def _delta2(phi: Any, m: Any) -> Any:
    """``1 - m sin^2 phi``, written ``cos^2 phi + (1 - m) sin^2 phi``: accurate where it is
    small (``m`` near 1, ``phi`` near ``pi / 2``)."""
    s, c = np.sin(phi), np.cos(phi)
    return c * c + (1.0 - m) * s * s


def _reduced(phi: Any) -> tuple[Any, Any]:
    """``(n, psi)`` with ``phi = n pi + psi``, ``|psi| <= pi / 2``: the integrands of the
    incomplete elliptic integrals have period ``pi``."""
    n = np.round(np.divide(phi, math.pi))
    return n, phi - n * math.pi


def _periods(n: Any, full: Callable[[Any], Any], m: Any) -> Any:
    """``n`` times an integral over a whole period, ``full(m)``; 0 where ``n`` is 0 (``full``
    may be NaN there, ``1 - m < 0``, where only ``|phi| < pi / 2`` is in the domain)."""
    whole = np.not_equal(n, 0.0)
    return np.where(whole, n * full(np.where(whole, m, 0.5)), 0.0)


@opaque
def ellipkinc_dm(phi: Any, m: Any) -> Any:
    """``d ellipkinc(phi, m) / dm = (1/2) int_0^phi sin^2 t / (1 - m sin^2 t)^(3/2) dt``, by
    Carlson's ``R_D``: ``int_0^psi = sin^3 psi R_D(cos^2 psi, 1, 1 - m sin^2 psi) / 3`` for
    ``|psi| <= pi/2``, ``(2/3) R_D(0, 1, 1 - m)`` a period (no cancellation at ``m = 0``,
    unlike ``(E - (1 - m) F) / (2 m (1 - m)) - ...``)."""
    n, psi = _reduced(phi)
    s, c = np.sin(psi), np.cos(psi)
    part = s ** 3 / 3.0 * sc.elliprd(c * c, 1.0, c * c + (1.0 - m) * s * s)
    return 0.5 * (part + _periods(n, lambda m: 2.0 / 3.0 * sc.elliprd(0.0, 1.0, 1.0 - m), m))


@opaque
def ellipeinc_dm(phi: Any, m: Any) -> Any:
    """``d ellipeinc(phi, m) / dm = -(1/2) int_0^phi sin^2 t / (1 - m sin^2 t)^(1/2) dt``
    (``= (E - F) / (2 m)``), by Carlson's ``R_D`` as :func:`ellipkinc_dm`:
    ``sin^3 psi R_D(cos^2 psi, 1 - m sin^2 psi, 1) / 3``, ``(2/3) R_D(0, 1 - m, 1)`` a period."""
    n, psi = _reduced(phi)
    s, c = np.sin(psi), np.cos(psi)
    part = s ** 3 / 3.0 * sc.elliprd(c * c, c * c + (1.0 - m) * s * s, 1.0)
    return -0.5 * (part + _periods(n, lambda m: 2.0 / 3.0 * sc.elliprd(0.0, 1.0 - m, 1.0), m))


def _elliptic_refusal(public: str) -> Callable[..., Any]:
    def rule(d: Any, out: Any, /, *args: Any) -> Any:
        raise MissingRuleError(
            f"no derivative rule for the second derivative of scipy.special.{public} in m: "
            f"the first derivative is computed with Carlson's elliprd, which has no rule of its "
            f"own (mixed second derivatives, once in m and once in phi or u, are supported)")
    return rule


def _ellipj_dm(u: Any, m: Any, out: Any) -> tuple[Any, Any, Any, Any]:
    """The partials of ``(sn, cn, dn, ph)`` in ``m``: ``u = F(ph | m)`` at fixed ``u`` gives
    ``d ph / dm = -dn dF/dm(ph, m)``; ``sn = sin ph``, ``cn = cos ph``, ``dn^2 = 1 - m sn^2``."""
    sn, cn, dn, ph = out
    dph = -dn * ellipkinc_dm(ph, m)
    return cn * dph, -sn * dph, -(sn * sn + 2.0 * m * sn * cn * dph) / (2.0 * dn), dph


def _airye_dz(z: Any, out: Any) -> tuple[Any, Any, Any, Any]:
    """``airye``: ``eAi = Ai e^zeta``, ``eBi = Bi e^-|Re zeta|``, ``zeta = (2/3) z^(3/2)``;
    for real ``z``, ``d zeta / dz = sqrt(z)`` where ``z > 0`` and ``Re zeta = 0`` where
    ``z < 0`` (where SciPy's ``eAi`` is NaN)."""
    _refuse_complex("airye", z)
    e_ai, e_aip, e_bi, e_bip = out
    s = _positive_sqrt(z)
    return e_aip + s * e_ai, z * e_ai + s * e_aip, e_bip - s * e_bi, z * e_bi - s * e_bip


def _struve_term(v: Any, x: Any) -> Any:
    """``(x/2)^v / (2 sqrt(pi) Gamma(v + 3/2))``, the term of the recurrences of ``struve``
    and ``modstruve`` (DLMF 11.4.24, 11.4.28) that keeps their derivative finite at 0 (the
    second derivative at exactly 0 goes through orders below ``v - 1``, infinite there: NaN)."""
    return np.power(0.5 * x, v) * sc.rgamma(v + 1.5) / (2.0 * _SQRT_PI)


def _inverse(*partials: Any) -> tuple[Any, ...]:
    """The partials of the inverse ``x(p, y)`` of ``y = F(p, x)`` (the quantile of a
    distribution function) from those of ``F``, given as ``partial(*params, x)`` with the
    one in ``x`` last: ``dx/dy = 1 / F_x``, ``dx/dp = -F_p / F_x`` (implicit function
    theorem); each evaluated at ``x = out``."""
    *params, in_x = partials

    def dy(*args: Any) -> Any:
        return 1.0 / in_x(*args[:-2], args[-1])

    def dp(partial: Any) -> Any:
        if partial is ZERO or partial is None:
            return partial
        return lambda *args: -partial(*args[:-2], args[-1]) / in_x(*args[:-2], args[-1])
    return (*(dp(p) for p in params), dy)


if sc is not None:
    _several("sici", lambda x, out: (near_zero(x, _SIN_OVER_X, lambda x: np.sin(x) / x, 0.1),
                                     np.cos(x) / x))
    _several("shichi", lambda x, out: (near_zero(x, _SINH_OVER_X,
                                                 lambda x: np.sinh(x) / x, 0.1),
                                       np.cosh(x) / x))
    _several("fresnel", lambda z, out: (np.sin(0.5 * math.pi * z * z),
                                        np.cos(0.5 * math.pi * z * z)))
    # Ai'' = z Ai, Bi'' = z Bi
    _several("airy", lambda z, out: (out[1], z * out[0], out[3], z * out[2]))
    _several("airye", _airye_dz)
    # Jacobi's elliptic functions (sn, cn, dn, ph = am) in u and in the parameter m
    _several("ellipj", lambda u, m, out: (out[1] * out[2], -out[0] * out[2],
                                          -m * out[0] * out[1], out[2]), _ellipj_dm)
    for _kernel, _in_phi in ((ellipkinc_dm, lambda phi, m: 0.5 * np.sin(phi) ** 2
                              / _delta2(phi, m) ** 1.5),
                             (ellipeinc_dm, lambda phi, m: -0.5 * np.sin(phi) ** 2
                              / np.sqrt(_delta2(phi, m)))):
        _public = "ellipkinc (or ellipj)" if _kernel is ellipkinc_dm else "ellipeinc"
        defjvp(_kernel, _rule(lambda phi, m, out, f=_in_phi: f(phi, m), 0, 2, "fwd"),
               _elliptic_refusal(_public))
        defvjp(_kernel, _rule(lambda phi, m, out, f=_in_phi: f(phi, m), 0, 2, "rev"),
               _elliptic_refusal(_public))
    _elementwise("ellipkinc", lambda phi, m, out: 1.0 / np.sqrt(_delta2(phi, m)),
                 lambda phi, m, out: ellipkinc_dm(phi, m))
    _elementwise("ellipeinc", lambda phi, m, out: np.sqrt(_delta2(phi, m)),
                 lambda phi, m, out: ellipeinc_dm(phi, m))

    # Struve functions in x (the order has no closed-form derivative)
    _elementwise("struve", None, lambda v, x, out: 0.5 * (sc.struve(v - 1.0, x)
                                                          - sc.struve(v + 1.0, x))
                 + _struve_term(v, x))
    _elementwise("modstruve", None, lambda v, x, out: 0.5 * (sc.modstruve(v - 1.0, x)
                                                             + sc.modstruve(v + 1.0, x))
                 + _struve_term(v, x))
    # T(h, a) = (1 / 2 pi) int_0^a exp(-h^2 (1 + t^2) / 2) / (1 + t^2) dt
    _elementwise("owens_t",
                 lambda h, a, out: -np.exp(-0.5 * h * h) / (2.0 * _SQRT_2PI)
                 * sc.erf(a * h / math.sqrt(2.0)),
                 lambda h, a, out: np.exp(-0.5 * h * h * (1.0 + a * a))
                 / (2.0 * math.pi * (1.0 + a * a)))
    _elementwise("wrightomega", lambda z, out: out / (1.0 + out))

    # hypergeometric functions in their argument
    _elementwise("hyp2f1", None, None, None,
                 lambda a, b, c, z, out: a * b / c * sc.hyp2f1(a + 1.0, b + 1.0, c + 1.0, z))
    _elementwise("hyp1f1", None, None,
                 lambda a, b, x, out: a / b * sc.hyp1f1(a + 1.0, b + 1.0, x))
    _elementwise("hyp0f1", None, lambda v, z, out: sc.hyp0f1(v + 1.0, z) / v)
    _elementwise("hyperu", None, None, lambda a, b, x, out: -a * sc.hyperu(a + 1.0, b + 1.0, x))
    # Wright's generalized Bessel function: d/dx Phi(a, b; x) = Phi(a, a + b; x)
    _elementwise("wright_bessel", None, None,
                 lambda a, b, x, out: sc.wright_bessel(a, a + b, x))
    _elementwise("log_wright_bessel", None, None,
                 lambda a, b, x, out: np.exp(sc.log_wright_bessel(a, a + b, x) - out))

    # Box-Cox: boxcox(x, l) = expm1(l log x) / l, so d/dl = log(x)^2 exprel'(l log x)
    _elementwise("boxcox", lambda x, lmbda, out: np.power(x, lmbda - 1.0),
                 lambda x, lmbda, out: np.log(x) ** 2 * _exprel_slope(lmbda * np.log(x)))
    _elementwise("boxcox1p", lambda x, lmbda, out: np.power(1.0 + x, lmbda - 1.0),
                 lambda x, lmbda, out: np.log1p(x) ** 2 * _exprel_slope(lmbda * np.log1p(x)))
    # inv_boxcox(y, l) = exp(log1p(l y) / l)
    _elementwise("inv_boxcox", lambda y, lmbda, out: out / (1.0 + lmbda * y),
                 lambda y, lmbda, out: out * y * y * _log1p_over_t_slope(lmbda * y))
    _elementwise("inv_boxcox1p", lambda y, lmbda, out: (out + 1.0) / (1.0 + lmbda * y),
                 lambda y, lmbda, out: (out + 1.0) * y * y * _log1p_over_t_slope(lmbda * y))

    _elementwise("ndtri_exp", lambda y, out: _SQRT_2PI * np.exp(y + 0.5 * out * out))
    _elementwise("exp2", lambda x, out: math.log(2.0) * out)
    _elementwise("exp10", lambda x, out: math.log(10.0) * out)
    _elementwise("powm1", lambda x, y, out: y * np.power(x, y - 1.0),
                 lambda x, y, out: sc.xlogy(out + 1.0, x))
    _elementwise("kn", ZERO, lambda n, x, out: -0.5 * (sc.kn(np.subtract(n, 1), x)
                                                      + sc.kn(np.add(n, 1), x)))

    # quantiles: the inverses of distribution functions, in the probability and (through the
    # numerical partials) in the shape parameters
    _elementwise("stdtrit", *_inverse(lambda df, t: _stdtr_ddf(df, t, None),
                                      lambda df, t: _t_pdf(df, t)))
    _elementwise("chdtri", *_inverse(lambda v, x: -0.5 * gammainc_da(v / 2.0, x / 2.0),
                                     lambda v, x: -_chi2_pdf(v, x)))
    _elementwise("gammaincinv", *_inverse(gammainc_da, gamma_density))
    _elementwise("gammainccinv", *_inverse(lambda a, x: -gammainc_da(a, x),
                                           lambda a, x: -gamma_density(a, x)))
    _elementwise("betaincinv", *_inverse(betainc_da, betainc_db, beta_density))
    _elementwise("betainccinv", *_inverse(lambda a, b, x: -betainc_da(a, b, x),
                                          lambda a, b, x: -betainc_db(a, b, x),
                                          lambda a, b, x: -beta_density(a, b, x)))
    _elementwise("fdtri", *_inverse(lambda m, n, x: _fdtr_dm(m, n, x, None),
                                    lambda m, n, x: _fdtr_dn(m, n, x, None),
                                    lambda m, n, x: _fdtr_dx(m, n, x, None)))
    _elementwise("pdtri", *_inverse(ZERO, lambda k, m: -_poisson_pmf(k, m)))
    # the binomial and negative binomial distributions in p (k and n are integers)
    _elementwise("bdtr", ZERO, ZERO, lambda k, n, p, out: -n * _binom_pmf(np.floor(k), n - 1.0, p))
    _elementwise("bdtrc", ZERO, ZERO, lambda k, n, p, out: n * _binom_pmf(np.floor(k), n - 1.0, p))
    _elementwise("bdtri", *_inverse(ZERO, ZERO,
                                    lambda k, n, p: -n * _binom_pmf(np.floor(k), n - 1.0, p)))
    # nbdtr(k, n, p) = I_p(n, k + 1)
    _elementwise("nbdtr", ZERO, ZERO,
                 lambda k, n, p, out: beta_density(np.floor(n), np.floor(k) + 1.0, p))
    _elementwise("nbdtrc", ZERO, ZERO,
                 lambda k, n, p, out: -beta_density(np.floor(n), np.floor(k) + 1.0, p))

    # orthogonal polynomials in x (a real degree n has no rule: MissingRuleError); for n = 0
    # the derivative is 0, written without the polynomial of degree -1
    def _lower(n: Any, f: Callable[[Any], Any]) -> Any:
        """``f(n - 1)`` for ``n != 0``, 0 for ``n == 0``."""
        zero = np.equal(n, 0)
        return np.where(zero, 0.0, f(np.where(zero, 1, n) - 1))

    _elementwise("eval_legendre", None, lambda n, x, out: _lower(
        n, lambda k: sc.eval_gegenbauer(k, 1.5, x)))
    _elementwise("eval_sh_legendre", None, lambda n, x, out: _lower(
        n, lambda k: 2.0 * sc.eval_gegenbauer(k, 1.5, 2.0 * x - 1.0)))
    _elementwise("eval_chebyt", None, lambda n, x, out: _lower(
        n, lambda k: (k + 1) * sc.eval_chebyu(k, x)))
    _elementwise("eval_sh_chebyt", None, lambda n, x, out: _lower(
        n, lambda k: 2.0 * (k + 1) * sc.eval_chebyu(k, 2.0 * x - 1.0)))
    _elementwise("eval_chebyc", None, lambda n, x, out: _lower(
        n, lambda k: (k + 1) * sc.eval_chebyu(k, 0.5 * x)))
    _elementwise("eval_chebyu", None, lambda n, x, out: _lower(
        n, lambda k: 2.0 * sc.eval_gegenbauer(k, 2.0, x)))
    _elementwise("eval_sh_chebyu", None, lambda n, x, out: _lower(
        n, lambda k: 4.0 * sc.eval_gegenbauer(k, 2.0, 2.0 * x - 1.0)))
    _elementwise("eval_chebys", None, lambda n, x, out: _lower(
        n, lambda k: sc.eval_gegenbauer(k, 2.0, 0.5 * x)))
    _elementwise("eval_gegenbauer", None, None, lambda n, alpha, x, out: _lower(
        n, lambda k: 2.0 * alpha * sc.eval_gegenbauer(k, alpha + 1.0, x)))
    _elementwise("eval_jacobi", None, None, None, lambda n, alpha, beta, x, out: _lower(
        n, lambda k: 0.5 * (k + alpha + beta + 2.0)
        * sc.eval_jacobi(k, alpha + 1.0, beta + 1.0, x)))
    _elementwise("eval_hermite", None, lambda n, x, out: _lower(
        n, lambda k: 2.0 * (k + 1) * sc.eval_hermite(k, x)))
    _elementwise("eval_hermitenorm", None, lambda n, x, out: _lower(
        n, lambda k: (k + 1) * sc.eval_hermitenorm(k, x)))
    _elementwise("eval_laguerre", None, lambda n, x, out: _lower(
        n, lambda k: -sc.eval_genlaguerre(k, 1.0, x)))
    _elementwise("eval_genlaguerre", None, None, lambda n, alpha, x, out: _lower(
        n, lambda k: -sc.eval_genlaguerre(k, alpha + 1.0, x)))
