"""Rules for the ``statistics`` module's means and spreads.

``statistics.mean``, ``variance``, ``stdev`` and the others sum their data exactly, as
fractions (``float.as_integer_ratio``), so their own code cannot be differentiated through: a
value turned into a pair of integers has lost its derivative.  These rules differentiate the
functions instead, with the textbook formulas of what they compute.  (``fmean``,
``geometric_mean``, the medians, ``quantiles`` and ``covariance`` compute in floats and are
differentiated through their own code.)

Abbreviations: ``xs`` the data (a list of numbers; its tangent a list of the same length,
``None`` for an element without one, see ``_common.fill``), ``n`` its length, ``m`` its mean,
``out`` the primal output, ``dxs`` a tangent, ``ct`` a cotangent.

A mean given to ``variance``/``stdev`` (``xbar``) or ``pvariance``/``pstdev`` (``mu``) changes
what the function computes from one Python version to another, so those calls have no rule:
differentiating their data raises ``MissingRuleError`` rather than guess.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

from .._rules import MissingRuleError, defjvp, defvjp
from ._common import fill, like_items


def _deviations(xs: Any) -> list[Any]:
    values = list(xs)
    m = math.fsum(values) / len(values)
    return [x - m for x in values]


def _no_given_mean(fn: Any, mean: tuple[Any, ...], given: dict[str, Any]) -> None:
    """``mean``/``given``: the positional or keyword (``xbar``, ``mu``) mean of the call."""
    if any(m is not None for m in (*mean, *given.values())):
        raise MissingRuleError(
            f"no derivative rule for statistics.{fn.__name__} with a mean given as its second "
            f"argument (what it computes then differs between Python versions); leave the "
            f"mean out, or compute the spread from numbers with rules")


def _spread(fn: Any, ddof: int, root: bool) -> tuple[Any, Any]:
    """Rules of ``fn(xs)``: the variance ``sum((x - m)**2) / (n - ddof)``, or its square root
    (``root``); returned too."""
    def scale(out: Any, n: int) -> float:
        # d variance / d x_i = 2 (x_i - m) / (n - ddof); d sqrt(v) = d v / (2 sqrt(v))
        return (1.0 / out if root else 2.0) / (n - ddof)

    def jvp(dxs: Any, out: Any, /, xs: Any, *mean: Any, **given: Any) -> Any:
        _no_given_mean(fn, mean, given)
        total: Any = 0.0
        for d, dx in zip(_deviations(xs), fill(dxs, list(xs))):
            total = total + d * dx
        return total * scale(out, len(xs))

    def vjp(ct: Any, out: Any, /, xs: Any, *mean: Any, **given: Any) -> Any:
        _no_given_mean(fn, mean, given)
        k = ct * scale(out, len(xs))
        return like_items(xs, [k * d for d in _deviations(xs)])

    defjvp(fn, jvp, None)
    defvjp(fn, vjp, None)
    return jvp, vjp


def _mean_jvp(dxs: Any, out: Any, /, xs: Any) -> Any:
    total: Any = 0.0
    for dx in fill(dxs, list(xs)):
        total = total + dx
    return total / len(xs)


def _mean_vjp(ct: Any, out: Any, /, xs: Any) -> Any:
    return like_items(xs, [ct / len(xs)] * len(xs))


defjvp(statistics.mean, _mean_jvp)
defvjp(statistics.mean, _mean_vjp)

_spread(statistics.variance, 1, False)
_spread(statistics.pvariance, 0, False)
_STDEV_JVP, _STDEV_VJP = _spread(statistics.stdev, 1, True)
_spread(statistics.pstdev, 0, True)

# NormalDist.from_samples(xs) is NormalDist(*_mean_stdev(xs)) since Python 3.11: the mean and
# the sample standard deviation in one pass, as floats
_MEAN_STDEV = getattr(statistics, "_mean_stdev", None)


def _mean_stdev_jvp(dxs: Any, out: Any, /, xs: Any) -> Any:
    return _mean_jvp(dxs, out[0], xs), _STDEV_JVP(dxs, out[1], xs)


def _mean_stdev_vjp(ct: Any, out: Any, /, xs: Any) -> Any:
    total = [0.0] * len(xs)
    for rule, c, o in ((_mean_vjp, ct[0], out[0]), (_STDEV_VJP, ct[1], out[1])):
        if c is not None:  # (None: no cotangent for that output)
            total = [a + b for a, b in zip(total, rule(c, o, xs))]
    return like_items(xs, total)


if _MEAN_STDEV is not None:
    defjvp(_MEAN_STDEV, _mean_stdev_jvp)
    defvjp(_MEAN_STDEV, _mean_stdev_vjp)


# harmonic_mean(xs, weights) = W / T with W = sum(weights), T = sum(w / x) (every w = 1
# without weights): d/dx_i = out**2 w_i / (W x_i**2), d/dw_i = (out / W) (1 - out / x_i); 0
# where the function returns 0 (a zero in the data)
def _weights(xs: Any, weights: Any) -> list[Any]:
    return [1.0] * len(xs) if weights is None else list(weights)


def _harmonic_partials(out: Any, xs: Any, weights: Any) -> Callable[[int], tuple[Any, Any]]:
    weights = _weights(xs, weights)
    total = math.fsum(weights)

    def partials(i: int) -> tuple[Any, Any]:
        x = xs[i]
        if out == 0:
            return 0.0, 0.0
        return out * out * weights[i] / (total * x * x), out / total * (1.0 - out / x)
    return partials


def _harmonic_jvp(which: int) -> Any:
    def jvp(d: Any, out: Any, /, xs: Any, weights: Any = None) -> Any:
        xs = list(xs)
        partials = _harmonic_partials(out, xs, weights)
        total: Any = 0.0
        for i, di in enumerate(fill(d, xs if which == 0 else _weights(xs, weights))):
            total = total + partials(i)[which] * di
        return total
    return jvp


def _harmonic_vjp(which: int) -> Any:
    def vjp(ct: Any, out: Any, /, xs: Any, weights: Any = None) -> Any:
        partials = _harmonic_partials(out, list(xs), weights)
        return like_items(xs if which == 0 else weights,
                     [ct * partials(i)[which] for i in range(len(xs))])
    return vjp


defjvp(statistics.harmonic_mean, _harmonic_jvp(0), _harmonic_jvp(1))
defvjp(statistics.harmonic_mean, _harmonic_vjp(0), _harmonic_vjp(1))


# NormalDist.inv_cdf's helper, x = mu + sigma * z(p) (C in CPython, Python elsewhere): its
# slope in p is the reciprocal of the density at x; in mu 1; in sigma the standard score z
def _inv_cdf_dp(out: Any, p: Any, mu: Any, sigma: Any) -> Any:
    z = (out - mu) / sigma
    return sigma * math.sqrt(2.0 * math.pi) * math.exp(z * z / 2.0)


_INV_CDF = statistics._normal_dist_inv_cdf  # type: ignore[attr-defined]
defjvp(_INV_CDF, lambda d, out, /, p, mu, sigma: d * _inv_cdf_dp(out, p, mu, sigma),
       lambda d, out, /, p, mu, sigma: d,
       lambda d, out, /, p, mu, sigma: d * ((out - mu) / sigma))
defvjp(_INV_CDF, lambda ct, out, /, p, mu, sigma: ct * _inv_cdf_dp(out, p, mu, sigma),
       lambda ct, out, /, p, mu, sigma: ct,
       lambda ct, out, /, p, mu, sigma: ct * ((out - mu) / sigma))
