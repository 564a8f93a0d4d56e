"""Derivatives of ``scipy.special`` functions in their parameters (registered only with SciPy).

SciPy computes the regularized incomplete gamma ``P(a, x)`` (``gammainc``), the regularized
incomplete beta ``I_x(a, b)`` (``betainc``) and the Bessel functions ``J, Y, I, K`` of real order
``v``, but no derivative in ``a``, ``b`` or ``v``; ``scipy.stats`` reaches them for the shape
parameters of ``gamma``, ``chi2``, ``t``, ``beta``, ``f``...  The partials are computed here,
elementwise, by methods chosen per element so that no step loses more than a few digits:

- ``dP/da`` (:func:`gammainc_da`): for ``x < a + 1`` the series ``P = x^a e^-x / Gamma(a+1)
  sum_n prod_{j<=n} x / (a + j)`` differentiated term by term (all terms of one sign); otherwise
  Legendre's continued fraction of ``Q = 1 - P``, differentiated along with its convergents
  (the method of Moore, Applied Statistics algorithm AS 187, 1982).
- ``dI/da``, ``dI/db`` (:func:`betainc_da`, :func:`betainc_db`): the continued fraction of
  ``I_x(a, b)`` (Numerical Recipes' ``betacf``) with its convergents' derivatives (Boik and
  Robison-Cox, J. Stat. Software 3(1), 1998), on the side of the mean where it converges fast:
  ``x < (a + 1) / (a + b + 2)``, and ``I_x(a, b) = 1 - I_{1-x}(b, a)`` otherwise.
- Bessel orders, for ``x > 0`` and ``mu = |v|`` (negative orders by the reflection formulas,
  DLMF 10.4 and 10.27, from ``J, Y, I, K`` of order ``mu`` and their ``mu``-derivatives):
  ``dK/dmu = int_0^inf t sinh(mu t) e^(-x cosh t) dt`` (DLMF 10.32.9 differentiated: a
  positive integrand); ``dJ``, ``dY``, ``dI`` from Schlaefli's integrals (DLMF 10.9.6, 10.9.7,
  10.32.4) differentiated in the order.  Where ``J`` or ``I`` is small beside those integrals'
  terms (the order large against ``x``) the power series differentiated term by term
  (DLMF 10.15.1, 10.38.1) is used instead: per element, whichever of the two has the smaller
  sum of absolute terms, i.e. the smaller rounding error.  Quadrature is composite
  Gauss-Legendre (16 points a panel, panels narrower than the integrand's peak) over
  ``[0, pi]`` and over ``[0, T]``, ``T`` where the integrand has fallen below ``e^-48`` of
  its largest value; ``I`` and ``K`` are computed scaled (``ive``, ``kve``), as SciPy's are.

No step is a finite difference.  Checked against mpmath (40 digits) at random points: relative
error below 1e-12 for ``a, b`` in ``[0.1, 50]`` (below 1e-10 out to ``[1e-3, 2000]``), any
``x``; for orders in ``[-5, 20]`` and ``x`` in ``[1e-3, 100]`` below 1e-12 (1e-11 for orders
to 60 and ``x`` to 1000) relative to ``max(|derivative|, 1e-3 (J^2 + Y^2)^(1/2))``: near a
zero of the derivative the error is that small in absolute terms.  For orders far above
``x`` (``J_100(50)``) ``dJ/dv`` is a sum of terms as large as ``I_v(x)``, and keeps fewer
digits (1e-10 there).  The Bessel quadratures cost about 50 microseconds an element.

Second derivatives: each partial is a primitive with rules of its own.  In ``x`` the rule is
closed-form (``d/dx dP/da = x^(a-1) e^-x (ln x - psi(a)) / Gamma(a)``, ``d/dx dJ_v/dv =
(dJ_(v-1)/dv - dJ_(v+1)/dv) / 2``...), so mixed second derivatives nest; in the parameter
itself it raises ``MissingRuleError`` naming the SciPy function: the numerical method above has
no derivative rule of its own, and differentiating through its iterations is not offered.

Outside the domain (``a, b <= 0``, ``x`` outside ``[0, inf]`` or ``[0, 1]``, a Bessel ``x <= 0``)
the partial is NaN, as SciPy's values there are; at ``x = 0`` and ``x = inf`` (``x = 1`` for
``I``), where ``P`` and ``I`` are constant in the parameter, it is 0.  Complex Bessel arguments
raise ``MissingRuleError``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from overdub import opaque

from .._rules import MissingRuleError, defjvp, defvjp
from ._common import fit, lift

try:
    import scipy.special as sc
except ImportError:  # pragma: no cover - overdub_ad works without SciPy
    sc = None

_EPS = 1e-16  # convergence: the next term below this much of the sum
_MAX_TERMS = 100_000  # more than any series or fraction here needs (about 10 sqrt(a) terms)
_DECAY = 48.0  # the quadrature stops where the integrand is below e**-48 of its peak
_ORDER = 16  # Gauss-Legendre points per panel
_NODES = 1 << 21  # the most quadrature nodes evaluated at once (memory: elements x nodes)


# -- the shape of an elementwise call --------------------------------------------------------

def _apply(kernel: Callable[..., Any], args: tuple[Any, ...], valid: Callable[..., Any],
           edge: Callable[..., Any] | None = None) -> Any:
    """``kernel(*args[valid])`` on the broadcast arguments, NaN where not ``valid``, 0 on
    ``edge``; a NumPy scalar for scalar arguments, in the arguments' float precision."""
    dtype = np.result_type(*(np.asarray(v) for v in args), np.float16)
    arrays = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in args))
    out = np.full(arrays[0].shape, np.nan)
    with np.errstate(all="ignore"):
        ok = valid(*arrays)
        if edge is not None:
            out[edge(*arrays) & ~ok] = 0.0
        if ok.any():
            out[ok] = kernel(*(v[ok] for v in arrays))
    out = out.astype(dtype, copy=False)
    return out[()] if out.ndim == 0 else out


def _real_only(name: str, *args: Any) -> None:
    """A complex argument would be read as its real part: refuse it."""
    if any(np.iscomplexobj(v) for v in args):
        raise MissingRuleError(f"no derivative rule for scipy.special.{name} with respect to "
                               f"its order at a complex argument (real arguments only)")


def _settle(done: Any, now: Any, pairs: tuple[tuple[Any, Any], ...]) -> tuple[Any, ...]:
    """The values of ``pairs`` ``(kept, new)``: the kept value where an element had already
    converged (later iterations only add rounding), the new one elsewhere."""
    return tuple(np.where(done, kept, new) for kept, new in pairs)


# -- incomplete gamma ------------------------------------------------------------------------

def _p_series(a: Any, x: Any) -> Any:
    """dP/da for x < a + 1: ``P = x^a e^-x / Gamma(a+1) sum_n t_n``, ``t_n = prod_{j<=n}
    x/(a+j)``, so ``dP/da = P (ln x - psi(a+1)) - x^a e^-x / Gamma(a+1) sum_n t_n s_n`` with
    ``s_n = sum_{j<=n} 1/(a+j)`` (both sums of positive terms)."""
    t = np.ones_like(a)
    s = np.zeros_like(a)
    total, weighted = np.ones_like(a), np.zeros_like(a)
    done = np.zeros(a.shape, bool)
    for n in range(1, _MAX_TERMS):
        t = t * x / (a + n)
        s = s + 1.0 / (a + n)
        new_total, new_weighted = total + t, weighted + t * s
        ratio = x / (a + n + 1.0)  # the terms fall at least this fast from here on
        now = t * (1.0 + s) <= _EPS * (1.0 - ratio) * (new_total + new_weighted)
        total, weighted = _settle(done, now, ((total, new_total), (weighted, new_weighted)))
        done |= now
        if done.all():
            break
    prefactor = np.exp(a * np.log(x) - x - sc.gammaln(a + 1.0))
    value = prefactor * ((np.log(x) - sc.psi(a + 1.0)) * total - weighted)
    return np.where(done, value, np.nan)  # (not converged: NaN, never a truncated sum)


def _q_fraction(a: Any, x: Any) -> Any:
    """dQ/da for x >= a + 1: ``Q = x^a e^-x / Gamma(a) / K``, ``K = b_0 + a_1 / (b_1 + a_2 /
    (b_2 + ...))`` with ``b_n = x + 2n + 1 - a``, ``a_n = -n (n - a)``.  The convergents
    ``A_n / B_n`` and their a-derivatives follow the three-term recurrence, rescaled by
    ``B_n`` at each step."""
    one, zero = np.ones_like(a), np.zeros_like(a)
    a0, b0, da0, db0 = one, zero, zero, zero  # n = -1
    a1, b1, da1, db1 = x + 1.0 - a, one, -one, zero  # n = 0
    k, dk = a1, da1
    done = np.zeros(a.shape, bool)
    for n in range(1, _MAX_TERMS):
        bn, an = x + 2.0 * n + 1.0 - a, -n * (n - a)
        a2, b2 = bn * a1 + an * a0, bn * b1 + an * b0
        da2 = -a1 + bn * da1 + n * a0 + an * da0
        db2 = -b1 + bn * db1 + n * b0 + an * db0
        scale = 1.0 / b2
        a0, b0, da0, db0 = a1 * scale, b1 * scale, da1 * scale, db1 * scale
        a1, b1, da1, db1 = a2 * scale, one, da2 * scale, db2 * scale
        new_k, new_dk = a1, da1 - a1 * db1
        now = (np.abs(new_k - k) <= _EPS * np.abs(new_k)) & \
            (np.abs(new_dk - dk) <= _EPS * np.abs(new_dk))
        k, dk = _settle(done, now, ((k, new_k), (dk, new_dk)))
        done |= now
        if done.all():
            break
    prefactor = np.exp(a * np.log(x) - x - sc.gammaln(a))
    return np.where(done, prefactor * ((np.log(x) - sc.psi(a)) / k - dk / (k * k)), np.nan)


def _gammainc_da(a: Any, x: Any) -> Any:
    series = x < a + 1.0
    out = np.empty_like(a)
    if series.any():
        out[series] = _p_series(a[series], x[series])
    if (~series).any():
        out[~series] = -_q_fraction(a[~series], x[~series])
    return out


def _gamma_valid(a: Any, x: Any) -> Any:
    return (a > 0) & (a < np.inf) & (x > 0) & (x < np.inf)


@opaque
def gammainc_da(a: Any, x: Any) -> Any:
    """``d gammainc(a, x) / da`` (``gammaincc``'s is its negative)."""
    return _apply(_gammainc_da, (a, x), _gamma_valid,
                  lambda a, x: (a > 0) & (a < np.inf) & ((x == 0) | (x == np.inf)))


def gamma_density(a: Any, x: Any) -> Any:
    """``d gammainc(a, x) / dx``: the gamma density."""
    return np.exp((a - 1.0) * np.log(x) - x - sc.gammaln(a))


# -- incomplete beta -------------------------------------------------------------------------

def _beta_fraction(a: Any, b: Any, x: Any) -> tuple[Any, Any]:
    """(dI/da, dI/db) for x < (a+1)/(a+b+2): ``I = x^a (1-x)^b / (a B(a, b)) / K``, ``K = 1 +
    d_1 / (1 + d_2 / (1 + ...))`` with ``d_(2m+1) = -(a+m)(a+b+m) x / ((a+2m)(a+2m+1))``,
    ``d_(2m) = m (b-m) x / ((a+2m-1)(a+2m))``; convergents and their a- and b-derivatives by
    the recurrence, rescaled at each step."""
    one, zero = np.ones_like(a), np.zeros_like(a)
    # A, B and their a- and b-derivatives at levels n-2 (suffix 0) and n-1 (suffix 1)
    p0, q0, pa0, qa0, pb0, qb0 = one, zero, zero, zero, zero, zero
    p1, q1, pa1, qa1, pb1, qb1 = one, one, zero, zero, zero, zero
    k, ka, kb = one, zero, zero
    done = np.zeros(a.shape, bool)
    for n in range(1, _MAX_TERMS):
        m = n // 2
        if n % 2:
            den = (a + 2 * m) * (a + 2 * m + 1.0)
            d = -(a + m) * (a + b + m) * x / den
            da = d * (1.0 / (a + m) + 1.0 / (a + b + m) - 1.0 / (a + 2 * m)
                      - 1.0 / (a + 2 * m + 1.0))
            db = -(a + m) * x / den
        else:
            den = (a + 2 * m - 1.0) * (a + 2 * m)
            d = m * (b - m) * x / den
            da = -d * (1.0 / (a + 2 * m - 1.0) + 1.0 / (a + 2 * m))
            db = m * x / den
        p2, q2 = p1 + d * p0, q1 + d * q0
        pa2, qa2 = pa1 + da * p0 + d * pa0, qa1 + da * q0 + d * qa0
        pb2, qb2 = pb1 + db * p0 + d * pb0, qb1 + db * q0 + d * qb0
        s = 1.0 / q2
        p0, q0, pa0, qa0, pb0, qb0 = p1 * s, q1 * s, pa1 * s, qa1 * s, pb1 * s, qb1 * s
        p1, q1, pa1, qa1, pb1, qb1 = p2 * s, one, pa2 * s, qa2 * s, pb2 * s, qb2 * s
        new_k, new_ka, new_kb = p1, pa1 - p1 * qa1, pb1 - p1 * qb1
        now = (n > 2) & (np.abs(new_k - k) <= _EPS * np.abs(new_k)) & \
            (np.abs(new_ka - ka) <= _EPS * np.abs(new_ka)) & \
            (np.abs(new_kb - kb) <= _EPS * np.abs(new_kb))
        k, ka, kb = _settle(done, now, ((k, new_k), (ka, new_ka), (kb, new_kb)))
        done |= now
        if done.all():
            break
    prefactor = np.exp(a * np.log(x) + b * np.log1p(-x) - np.log(a) - sc.betaln(a, b))
    both = sc.psi(a + b)
    la = np.log(x) - 1.0 / a - sc.psi(a) + both
    lb = np.log1p(-x) - sc.psi(b) + both
    return (np.where(done, prefactor * (la / k - ka / (k * k)), np.nan),
            np.where(done, prefactor * (lb / k - kb / (k * k)), np.nan))


def _betainc_partials(a: Any, b: Any, x: Any) -> tuple[Any, Any]:
    direct = x < (a + 1.0) / (a + b + 2.0)
    da, db = np.empty_like(a), np.empty_like(a)
    if direct.any():
        da[direct], db[direct] = _beta_fraction(a[direct], b[direct], x[direct])
    swap = ~direct
    if swap.any():  # I_x(a, b) = 1 - I_(1-x)(b, a); 1 - x is exact for x >= 1/2
        db_swapped, da_swapped = _beta_fraction(b[swap], a[swap], 1.0 - x[swap])
        da[swap], db[swap] = -da_swapped, -db_swapped
    return da, db


def _beta_valid(a: Any, b: Any, x: Any) -> Any:
    return (a > 0) & (a < np.inf) & (b > 0) & (b < np.inf) & (x > 0) & (x < 1)


def _beta_edge(a: Any, b: Any, x: Any) -> Any:
    return (a > 0) & (b > 0) & ((x == 0) | (x == 1))


@opaque
def betainc_da(a: Any, b: Any, x: Any) -> Any:
    """``d betainc(a, b, x) / da``."""
    return _apply(lambda a, b, x: _betainc_partials(a, b, x)[0], (a, b, x), _beta_valid,
                  _beta_edge)


@opaque
def betainc_db(a: Any, b: Any, x: Any) -> Any:
    """``d betainc(a, b, x) / db``."""
    return _apply(lambda a, b, x: _betainc_partials(a, b, x)[1], (a, b, x), _beta_valid,
                  _beta_edge)


def beta_density(a: Any, b: Any, x: Any) -> Any:
    """``d betainc(a, b, x) / dx``: the beta density."""
    return np.exp((a - 1.0) * np.log(x) + (b - 1.0) * np.log1p(-x) - sc.betaln(a, b))


# -- Bessel functions: quadrature ------------------------------------------------------------

_LEGENDRE = np.polynomial.legendre.leggauss(_ORDER)  # nodes and weights on [-1, 1]


def _quadrature(integrand: Callable[..., Any], end: Any, panels: Any,
                *params: Any) -> tuple[Any, Any]:
    """``(int_0^end integrand(t, *params) dt, the sum of the absolute weighted values)`` per
    element, by composite Gauss-Legendre with (at least) ``panels`` panels.  Elements are
    grouped by panel count (rounded up to a power of two) and evaluated a block at a time."""
    nodes, weights = _LEGENDRE
    value, size = np.empty_like(end), np.empty_like(end)
    counts = 2 ** np.ceil(np.log2(np.maximum(panels, 8))).astype(int)
    for count in np.unique(counts):
        members = np.flatnonzero(counts == count)
        block = max(1, _NODES // (int(count) * _ORDER))
        for start in range(0, len(members), block):
            sel = members[start:start + block]
            width = end[sel, None, None] / count
            t = width * (np.arange(count)[None, :, None] + 0.5 * (nodes + 1.0))
            t = t.reshape(len(sel), -1)
            w = np.broadcast_to(0.5 * width * weights, (len(sel), count, _ORDER))
            terms = integrand(t, *(p[sel, None] for p in params)) * w.reshape(len(sel), -1)
            value[sel], size[sel] = terms.sum(axis=1), np.abs(terms).sum(axis=1)
    return value, size


def _cutoff(exponent: Callable[[Any], Any], peak: Any) -> Any:
    """The point beyond ``peak`` where the concave ``exponent`` has fallen ``_DECAY`` below its
    value at ``peak``: doubling, then bisection."""
    top = exponent(peak)
    lo, hi = peak.copy(), peak + 1.0
    for _ in range(64):
        past = exponent(hi) < top - _DECAY
        if past.all():
            break
        hi = np.where(past, hi, peak + 2.0 * (hi - peak))
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        past = exponent(mid) < top - _DECAY
        lo, hi = np.where(past, lo, mid), np.where(past, mid, hi)
    return hi


def _laplace(mu: Any, x: Any, cosh: bool, sign: int,
             factor: Callable[[Any, Any], Any]) -> tuple[Any, Any]:
    """``int_0^inf factor(t, mu) exp(sign mu t - x f(t)) dt`` with ``f = cosh - 1`` or
    ``sinh`` (``mu >= 0``; ``factor`` grows at most like ``t``), and the sum of its absolute
    weighted values; computed relative to the exponent's peak, multiplied back at the end."""
    f: Callable[[Any], Any] = (lambda t: np.cosh(t) - 1.0) if cosh else np.sinh
    if sign > 0:  # the peak: mu = x f'(t)
        peak = np.arcsinh(mu / x) if cosh else np.arccosh(np.maximum(mu / x, 1.0))
    else:
        peak = np.zeros_like(x)

    def exponent(t: Any) -> Any:
        return sign * mu * t - x * f(t) + np.log(np.maximum(t, 1.0))
    top = exponent(peak)
    end = _cutoff(exponent, peak)
    # the integrand's narrowest feature is about 1/sqrt(max(mu, x)) wide (the peak's width
    # 1/sqrt(|exponent''|) there): panels at most twice as wide
    panels = 24 + end * np.sqrt(np.maximum(mu, x)) / 2.0

    def integrand(t: Any, mu: Any, x: Any, top: Any) -> Any:
        return factor(t, mu) * np.exp(sign * mu * t - x * f(t) - top)
    value, size = _quadrature(integrand, end, panels, mu, x, top)
    scale = np.exp(top)
    return value * scale, size * scale


def _one(t: Any, mu: Any) -> Any:
    return np.ones_like(t)


def _t(t: Any, mu: Any) -> Any:
    return t


def _k_scaled(mu: Any, x: Any) -> Any:
    """``e^x dK_mu(x)/dmu = int_0^inf t sinh(mu t) e^(-x (cosh t - 1)) dt``, with ``sinh(mu t)
    = e^(mu t) (1 - e^(-2 mu t)) / 2`` (no cancellation for small ``mu t``)."""
    return _laplace(mu, x, True, 1, lambda t, mu: -0.5 * t * np.expm1(-2.0 * mu * t))[0]


def _sincospi(v: Any) -> tuple[Any, Any]:
    """``sin(pi v), cos(pi v)``, exactly 0 at integers (half-integers)."""
    n = np.round(v)
    sign = np.where(np.mod(n, 2.0) == 0.0, 1.0, -1.0)
    f = v - n
    return sign * np.sin(np.pi * f), sign * np.where(np.abs(f) == 0.5, 0.0, np.cos(np.pi * f))


def _series(mu: Any, x: Any, alternating: bool, shift: Any) -> tuple[Any, Any]:
    """``(x/2)^mu sum_k (-+x^2/4)^k / (k! Gamma(mu+k+1)) (ln(x/2) - psi(mu+k+1)) e^-shift``
    (``dJ/dmu``, or ``dI/dmu`` without the alternating sign) and the sum of its terms'
    absolute values, the terms computed by their logarithms."""
    half = np.log(0.5 * x)
    log_t = mu * half - sc.gammaln(mu + 1.0) - shift
    psi = sc.psi(mu + 1.0)
    total, size = np.zeros_like(x), np.zeros_like(x)
    done = np.zeros(x.shape, bool)
    past_peak = 0.5 * x + 2.0  # the terms grow until k (k + mu) ~ x^2/4
    for k in range(_MAX_TERMS):
        if k:
            log_t = log_t + 2.0 * half - math.log(k) - np.log(mu + k)
            psi = psi + 1.0 / (mu + k)
        term = np.exp(log_t) * (half - psi)
        new_total = total + (-term if alternating and k % 2 else term)
        new_size = size + np.abs(term)
        now = (k > past_peak) & (np.abs(term) <= _EPS * new_size)
        total, size = _settle(done, now, ((total, new_total), (size, new_size)))
        done |= now
        if done.all():
            break
    return total, np.where(done, size, np.inf)  # (not converged: never chosen)


def _finite_j(t: Any, mu: Any, x: Any) -> Any:
    return t * np.sin(x * np.sin(t) - mu * t) / np.pi


def _finite_y(t: Any, mu: Any, x: Any) -> Any:
    return -t * np.cos(x * np.sin(t) - mu * t) / np.pi


def _finite_i(t: Any, mu: Any, x: Any) -> Any:
    return -t * np.sin(mu * t) * np.exp(x * (np.cos(t) - 1.0)) / np.pi


def _choose(integral: Any, integral_size: Any, mu: Any, x: Any, alternating: bool,
            shift: Any) -> Any:
    """The integral, or the series where its rounding error (the sum of its absolute terms)
    is smaller; the series is only tried where it cannot overflow (x <= 2 mu + 60)."""
    out = integral.copy()
    tried = x <= 2.0 * mu + 60.0
    if tried.any():
        series, size = _series(mu[tried], x[tried], alternating, shift[tried])
        better = np.isfinite(size) & (size < integral_size[tried])
        out[np.flatnonzero(tried)[better]] = series[better]
    return out


def _j_positive(mu: Any, x: Any) -> Any:
    """dJ_mu(x)/dmu, mu >= 0: DLMF 10.9.6 differentiated,
    ``(1/pi) int_0^pi t sin(x sin t - mu t) dt - cos(mu pi) int_0^inf e^(-x sinh t - mu t) dt
    + sin(mu pi)/pi int_0^inf t e^(-x sinh t - mu t) dt``, or the series."""
    s, c = _sincospi(mu)
    finite, finite_size = _quadrature(_finite_j, np.full_like(x, np.pi), 8 + (x + mu) / 3.0,
                                      mu, x)
    e0, e0_size = _laplace(mu, x, False, -1, _one)
    e1, e1_size = _laplace(mu, x, False, -1, _t)
    integral = finite - c * e0 + s / np.pi * e1
    size = finite_size + np.abs(c) * e0_size + np.abs(s) / np.pi * e1_size
    return _choose(integral, size, mu, x, True, np.zeros_like(x))


def _y_positive(mu: Any, x: Any) -> Any:
    """dY_mu(x)/dmu, mu >= 0: DLMF 10.9.7 differentiated,
    ``-(1/pi) int_0^pi t cos(x sin t - mu t) dt - (1/pi) int_0^inf t (e^(mu t) - e^(-mu t)
    cos(mu pi)) e^(-x sinh t) dt + sin(mu pi) int_0^inf e^(-mu t - x sinh t) dt``."""
    s, c = _sincospi(mu)
    finite = _quadrature(_finite_y, np.full_like(x, np.pi), 8 + (x + mu) / 3.0, mu, x)[0]
    up = _laplace(mu, x, False, 1, _t)[0]
    down1 = _laplace(mu, x, False, -1, _t)[0]
    down0 = _laplace(mu, x, False, -1, _one)[0]
    return finite - (up - c * down1) / np.pi + s * down0


def _i_positive(mu: Any, x: Any) -> Any:
    """``e^-x dI_mu(x)/dmu``, mu >= 0: DLMF 10.32.4 differentiated,
    ``-(1/pi) int_0^pi t sin(mu t) e^(x cos t) dt - cos(mu pi) int_0^inf e^(-x cosh t - mu t) dt
    + sin(mu pi)/pi int_0^inf t e^(-x cosh t - mu t) dt``, or the series."""
    s, c = _sincospi(mu)
    # e^(x (cos t - 1)) is below e^-_DECAY beyond arccos(1 - _DECAY/x)
    end = np.where(x > 0.5 * _DECAY, np.arccos(np.clip(1.0 - _DECAY / x, -1.0, 1.0)), np.pi)
    finite, finite_size = _quadrature(_finite_i, end, 8 + (mu * end + np.sqrt(x)) / 3.0, mu, x)
    twice = np.exp(-2.0 * x)
    e0, e0_size = _laplace(mu, x, True, -1, _one)
    e1, e1_size = _laplace(mu, x, True, -1, _t)
    integral = finite - twice * (c * e0 - s / np.pi * e1)
    size = finite_size + twice * (np.abs(c) * e0_size + np.abs(s) / np.pi * e1_size)
    return _choose(integral, size, mu, x, False, x)


def _jv_dv(v: Any, x: Any) -> Any:
    mu = np.abs(v)
    out = _j_positive(mu, x)
    neg = v < 0
    if neg.any():  # J_-mu = cos(mu pi) J_mu - sin(mu pi) Y_mu, differentiated in mu
        m, z = mu[neg], x[neg]
        s, c = _sincospi(m)
        out[neg] = (np.pi * s * sc.jv(m, z) - c * out[neg] + np.pi * c * sc.yv(m, z)
                    + s * _y_positive(m, z))
    return out


def _yv_dv(v: Any, x: Any) -> Any:
    mu = np.abs(v)
    out = _y_positive(mu, x)
    neg = v < 0
    if neg.any():  # Y_-mu = sin(mu pi) J_mu + cos(mu pi) Y_mu, differentiated in mu
        m, z = mu[neg], x[neg]
        s, c = _sincospi(m)
        out[neg] = (-np.pi * c * sc.jv(m, z) - s * _j_positive(m, z) + np.pi * s * sc.yv(m, z)
                    - c * out[neg])
    return out


def _ive_dv(v: Any, x: Any) -> Any:
    mu = np.abs(v)
    out = _i_positive(mu, x)
    neg = v < 0
    if neg.any():  # I_-mu = I_mu + (2/pi) sin(mu pi) K_mu, differentiated in mu
        m, z = mu[neg], x[neg]
        s, c = _sincospi(m)
        twice = np.exp(-2.0 * z)
        out[neg] = -out[neg] - twice * (2.0 * c * sc.kve(m, z) + 2.0 / np.pi * s * _k_scaled(m, z))
    return out


def _kve_dv(v: Any, x: Any) -> Any:
    return np.sign(v) * _k_scaled(np.abs(v), x)  # K_-mu = K_mu


def _bessel_valid(v: Any, x: Any) -> Any:
    return np.isfinite(v) & (x > 0) & (x < np.inf)


@opaque
def jv_dv(v: Any, x: Any) -> Any:
    """``d jv(v, x) / dv`` for real ``x > 0`` (NaN elsewhere, 0 at ``x = 0`` for ``v > 0``,
    where ``J_v`` vanishes for every order near ``v``)."""
    _real_only("jv", v, x)
    return _apply(_jv_dv, (v, x), _bessel_valid, lambda v, x: (x == 0) & (v > 0))


@opaque
def yv_dv(v: Any, x: Any) -> Any:
    """``d yv(v, x) / dv`` for real ``x > 0`` (NaN elsewhere)."""
    _real_only("yv", v, x)
    return _apply(_yv_dv, (v, x), _bessel_valid)


@opaque
def ive_dv(v: Any, x: Any) -> Any:
    """``e^-x d iv(v, x) / dv`` (``ive``'s order derivative) for real ``x > 0`` (NaN
    elsewhere, 0 at ``x = 0`` for ``v > 0``)."""
    _real_only("iv", v, x)
    return _apply(_ive_dv, (v, x), _bessel_valid, lambda v, x: (x == 0) & (v > 0))


@opaque
def kve_dv(v: Any, x: Any) -> Any:
    """``e^x d kv(v, x) / dv`` (``kve``'s order derivative) for real ``x > 0`` (NaN
    elsewhere)."""
    _real_only("kv", v, x)
    return _apply(_kve_dv, (v, x), _bessel_valid)


# -- the partials' own rules: closed form in x, refused in the parameter ----------------------

def _refusal(public: str, parameter: str, method: str) -> Callable[..., Any]:
    """The rule of a partial in its parameter: the partial is numerical, with no formula to
    differentiate, so a second derivative in the parameter raises (never a silent zero)."""
    def rule(d: Any, out: Any, /, *args: Any) -> Any:
        raise MissingRuleError(
            f"no derivative rule for the second derivative of scipy.special.{public} in "
            f"{parameter}: the first derivative is computed numerically ({method}) and has no "
            f"rule of its own (mixed second derivatives, once in {parameter} and once in x, "
            f"are supported)")
    return rule


def _closed(partial: Callable[..., Any], pos: int, mode: str) -> Callable[..., Any]:
    """The elementwise rule (``mode``: ``"fwd"`` or ``"rev"``) of argument ``pos`` whose partial
    derivative is ``partial(*args)``."""
    if mode == "fwd":
        def jvp(d: Any, out: Any, /, *args: Any) -> Any:
            return fit(lift(d, args[pos], out) * partial(*args), d, args[pos], out)
        return jvp

    def vjp(ct: Any, out: Any, /, *args: Any) -> Any:
        return ct * partial(*args)
    return vjp


def _register(kernel: Any, refusals: tuple[Callable[..., Any], ...],
              in_x: Callable[..., Any]) -> None:
    """``kernel``'s rules: the refusals for its leading parameters, ``in_x`` for its last
    argument."""
    pos = len(refusals)
    defjvp(kernel, *refusals, _closed(in_x, pos, "fwd"))
    defvjp(kernel, *refusals, _closed(in_x, pos, "rev"))


if sc is not None:
    _GAMMA = "series or continued fraction"
    _register(gammainc_da, (_refusal("gammainc", "a", _GAMMA),),
              lambda a, x: gamma_density(a, x) * (np.log(x) - sc.psi(a)))
    _BETA = "continued fraction"
    _register(betainc_da, (_refusal("betainc", "a or b", _BETA),) * 2,
              lambda a, b, x: beta_density(a, b, x) * (np.log(x) - sc.psi(a) + sc.psi(a + b)))
    _register(betainc_db, (_refusal("betainc", "a or b", _BETA),) * 2,
              lambda a, b, x: beta_density(a, b, x) * (np.log1p(-x) - sc.psi(b)
                                                       + sc.psi(a + b)))
    _BESSEL = "quadrature of its integral representation or its power series"
    _register(jv_dv, (_refusal("jv", "the order v", _BESSEL),),
              lambda v, x: 0.5 * (jv_dv(v - 1.0, x) - jv_dv(v + 1.0, x)))
    _register(yv_dv, (_refusal("yv", "the order v", _BESSEL),),
              lambda v, x: 0.5 * (yv_dv(v - 1.0, x) - yv_dv(v + 1.0, x)))
    _register(ive_dv, (_refusal("iv", "the order v", _BESSEL),),
              lambda v, x: 0.5 * (ive_dv(v - 1.0, x) + ive_dv(v + 1.0, x)) - ive_dv(v, x))
    _register(kve_dv, (_refusal("kv", "the order v", _BESSEL),),
              lambda v, x: kve_dv(v, x) - 0.5 * (kve_dv(v - 1.0, x) + kve_dv(v + 1.0, x)))
