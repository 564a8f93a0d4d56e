"""Rules for NumPy's elementwise functions: ufuncs and their function cousins.

Abbreviations: ``x, y`` arguments, ``out`` the primal output, ``dx`` a tangent (leading batch
dimensions allowed), ``ct`` a cotangent.  Rules are ``rule(dx, out, /, x, y, **kwargs)``.

Conventions:

- Broadcasting: a forward contribution is the argument's tangent lifted against ``out`` (batch
  dimensions stay in front) and broadcast to ``B + out.shape``; a reverse rule returns its
  cotangent at the broadcast shape and the engine sums it down to the argument's shape.
- ufunc keywords (``out=``, ``where=``, ``dtype=``, ``casting=``) are ignored by the rules: the
  engine owns writes into ``out=`` buffers.
- Complex: holomorphic ufuncs (``exp``, ``sin``, ``power``...) use the real formulas;
  ``absolute``, ``angle``, ``real``, ``imag``, ``conjugate`` follow autograd/JAX (a reverse rule
  is the transpose of the forward rule under ``Re(sum(a * b))``; the gradient of a real ``f`` at
  ``z = x + iy`` is ``df/dx - i df/dy``).
- Non-smooth points: ``absolute'(0) = 0``; a tie in ``maximum``/``minimum``/``fmax``/``fmin``
  (and at the bounds of ``clip``, which is ``minimum(maximum(x, lo), hi)``) splits evenly
  between two arguments that carry a derivative, and against one that carries none (a
  constant bound, the 0 of ``maximum(x, 0)``) gives the constant's zero derivative.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from .._rules import (BILINEAR, LINEAR, POWER, QUOTIENT, ZERO, Carried, defelementwise, defjvp,
                      defquick, defscalar, defvjp, is_carried, nondifferentiable, passed,
                      same_rules)
from ._common import fit, lift, near_zero, select
from ._scalar import _sign, nonzero

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


def _unary(fn: Any, deriv: Any, scalar: Any = None, second: Any = None) -> None:
    """Register the elementwise ``fn(x)`` with ``f'(x) = deriv(x, out)``; ``scalar``: the same
    derivative on Python floats, declared for the fast routes (``_rules.defscalar``);
    ``second``: ``f''(x)`` as ``second(x, out)``, declared for the routes that write
    Hessian-vector products out (``_rules.defelementwise``)."""
    defjvp(fn, lambda dx, out, /, x, *a, **k: dx * deriv(_as_numpy(x), out))
    defvjp(fn, lambda ct, out, /, x, *a, **k: ct * deriv(_as_numpy(x), out))
    if scalar is not None:
        defscalar(fn, 1, deriv if scalar is True else scalar)
    if second is not None:  # (the routes that write them out call them on Python floats)
        defelementwise(fn, lambda x, out: deriv(_as_numpy(x), out),
                       lambda x, out: second(_as_numpy(x), out))


def _as_numpy(x: Any) -> Any:
    """``x`` as the ufunc computed with it: a Python number as NumPy's float64, so that a
    derivative's formula computes as NumPy does (``1.0 / x`` at 0 is ``inf``, with NumPy's
    divide warning, as ``np.log(0.0)`` is ``-inf``; Python's float division would raise
    ``ZeroDivisionError``).  ``math``'s rules keep Python's arithmetic, as ``math`` does."""
    kind = x.__class__
    return np.float64(x) if kind is float or kind is int else x


def _contribution(dx: Any, arg: Any, out: Any, factor: Any = None) -> Any:
    t = lift(dx, arg, out)
    if factor is not None:
        t = t * factor
    return fit(t, dx, arg, out)


def _selected(dx: Any, arg: Any, out: Any, w: Any) -> Any:
    """The contribution of a candidate of a selection whose share of ``out`` is ``w`` (see
    :func:`._common.select`: 0 where it is not picked, whatever its tangent)."""
    return fit(select(lift(dx, arg, out), w), dx, arg, out)


def _binary(fn: Any, dfx: Any, dfy: Any) -> None:
    """Register ``fn(x, y)`` with partial derivatives ``dfx(x, y, out)``, ``dfy(x, y, out)``
    (``None`` for the constant 1, or ``ZERO``)."""
    def jvp(d: Any, pos: Any) -> Any:
        if d is ZERO:
            return ZERO
        if d is None:
            return lambda dx, out, /, x, y, *a, **k: _contribution(dx, (x, y)[pos], out)
        return lambda dx, out, /, x, y, *a, **k: _contribution(
            dx, (x, y)[pos], out, d(_as_numpy(x), _as_numpy(y), out))

    def vjp(d: Any) -> Any:
        if d is ZERO:
            return ZERO
        if d is None:
            return passed
        return lambda ct, out, /, x, y, *a, **k: ct * d(_as_numpy(x), _as_numpy(y), out)
    defjvp(fn, jvp(dfx, 0), jvp(dfy, 1))
    defvjp(fn, vjp(dfx), vjp(dfy))


def _safe_div(a: Any, b: Any) -> Any:
    """a / b, with 0 where b == 0."""
    zero = np.equal(b, 0)
    return np.where(zero, 0.0, a / np.where(zero, 1.0, b))


# -- unary ----------------------------------------------------------------------------------

_unary(np.negative, lambda x, out: -1.0, scalar=True)
_unary(np.positive, lambda x, out: 1.0)
_unary(np.exp, lambda x, out: out, scalar=True, second=lambda x, out: out)
_unary(np.exp2, lambda x, out: out * _LN2)
_unary(np.expm1, lambda x, out: out + 1.0, scalar=True, second=lambda x, out: out + 1.0)
_unary(np.log, lambda x, out: 1.0 / x, scalar=lambda x, out: None if x <= 0 else 1.0 / x,
       second=lambda x, out: -1.0 / (x * x))
_unary(np.log2, lambda x, out: 1.0 / (x * _LN2))
_unary(np.log10, lambda x, out: 1.0 / (x * _LN10))
_unary(np.log1p, lambda x, out: 1.0 / (1.0 + x),
       scalar=lambda x, out: None if x <= -1 else 1.0 / (1.0 + x),
       second=lambda x, out: -1.0 / ((1.0 + x) * (1.0 + x)))
_unary(np.sqrt, lambda x, out: 0.5 / out, scalar=nonzero(lambda x, out: 0.5 / out),
       second=lambda x, out: -0.25 / (out * out * out))
_unary(np.cbrt, lambda x, out: 1.0 / (3.0 * out * out))
_unary(np.square, lambda x, out: 2.0 * x, scalar=True, second=lambda x, out: 2.0)
_unary(np.reciprocal, lambda x, out: -out * out)
# (the math functions raise where NumPy's give inf or nan -- cos(inf), cosh(1000) -- so a
# scalar partial hands such a point to the rules: None)
_unary(np.sin, lambda x, out: np.cos(x), scalar=lambda x, out: math.cos(x) if out == out else None,
       second=lambda x, out: -out)
_unary(np.cos, lambda x, out: -np.sin(x),
       scalar=lambda x, out: -math.sin(x) if out == out else None, second=lambda x, out: -out)
_unary(np.tan, lambda x, out: 1.0 + out * out, scalar=True,
       second=lambda x, out: 2.0 * out * (1.0 + out * out))
_unary(np.arcsin, lambda x, out: 1.0 / np.sqrt(1.0 - x * x))
_unary(np.arccos, lambda x, out: -1.0 / np.sqrt(1.0 - x * x))
_unary(np.arctan, lambda x, out: 1.0 / (1.0 + x * x), scalar=True,
       second=lambda x, out: -2.0 * x / ((1.0 + x * x) * (1.0 + x * x)))
_unary(np.sinh, lambda x, out: np.cosh(x),
       scalar=lambda x, out: math.cosh(x) if -700.0 < x < 700.0 else None,
       second=lambda x, out: out)
_unary(np.cosh, lambda x, out: np.sinh(x),
       scalar=lambda x, out: math.sinh(x) if -700.0 < x < 700.0 else None,
       second=lambda x, out: out)
_unary(np.tanh, lambda x, out: 1.0 - out * out, scalar=True,
       second=lambda x, out: -2.0 * out * (1.0 - out * out))
_unary(np.arcsinh, lambda x, out: 1.0 / np.sqrt(x * x + 1.0))
_unary(np.arccosh, lambda x, out: 1.0 / (np.sqrt(x - 1.0) * np.sqrt(x + 1.0)))
_unary(np.arctanh, lambda x, out: 1.0 / (1.0 - x * x))
_fn: Any  # the loops below run over callables of many types
for _fn in (np.deg2rad, np.radians):
    _unary(_fn, lambda x, out: np.pi / 180.0)
for _fn in (np.rad2deg, np.degrees):
    _unary(_fn, lambda x, out: 180.0 / np.pi)
_unary(np.fabs, lambda x, out: np.sign(x))
# sinc(x) = sin(pi x) / (pi x); sinc'(x) = (cos(pi x) - sinc(x)) / x, near 0 its series
# sum_k (-1)^k pi^2k 2k x^(2k-1) / (2k+1)! (so that sinc''(0) = -pi^2 / 3, not 0)
_SINC_SLOPE = [0.0] * 15
for _k in range(1, 8):
    _SINC_SLOPE[2 * _k - 1] = (-1) ** _k * math.pi ** (2 * _k) * 2 * _k / math.factorial(2 * _k + 1)
_unary(np.sinc, lambda x, out: near_zero(
    x, _SINC_SLOPE, lambda x: (np.cos(np.pi * x) - np.sinc(x)) / x, 0.1))
# nan_to_num: the identity on finite entries, flat on the replaced ones
_unary(np.nan_to_num, lambda x, out: np.isfinite(x) * 1.0)


# -- unary, complex-aware ---------------------------------------------------------------------

def _abs_jvp(dx: Any, out: Any, /, x: Any, *a: Any, **k: Any) -> Any:
    if np.iscomplexobj(x):
        return _safe_div(np.real(np.conj(x) * dx), out)
    return dx * np.sign(x)


def _abs_vjp(ct: Any, out: Any, /, x: Any, *a: Any, **k: Any) -> Any:
    if np.iscomplexobj(x):
        return _safe_div(ct * np.conj(x), out)
    return ct * np.sign(x)


defjvp(np.absolute, _abs_jvp)
defvjp(np.absolute, _abs_vjp)
defscalar(np.absolute, 1, lambda x, out: _sign(x))
for _fn in (np.conjugate, np.conj):  # the same ufunc in NumPy 2; listed for older versions
    defjvp(_fn, lambda dx, out, /, x, *a, **k: np.conj(dx))
    defvjp(_fn, lambda ct, out, /, x, *a, **k: np.conj(ct))
defjvp(np.real, LINEAR)
defvjp(np.real, lambda ct, out, /, x: ct * 1.0)
defjvp(np.imag, LINEAR)
defvjp(np.imag, lambda ct, out, /, x: -1j * ct)


def _angle_scale(deg: Any) -> Any:
    return 180.0 / np.pi if deg else 1.0


def _angle_jvp(dz: Any, out: Any, /, z: Any, deg: Any = False) -> Any:
    # d arg(z) = Im(conj(z) dz) / |z|^2; 0 for real z (arg is 0 or pi there)
    if not np.iscomplexobj(z):
        return np.zeros(np.shape(dz))
    return _safe_div(np.imag(np.conj(z) * dz), np.real(z * np.conj(z))) * _angle_scale(deg)


def _angle_vjp(ct: Any, out: Any, /, z: Any, deg: Any = False) -> Any:
    return _safe_div(-1j * ct * np.conj(z), np.real(z * np.conj(z))) * _angle_scale(deg)


defjvp(np.angle, _angle_jvp)
defvjp(np.angle, _angle_vjp)


# -- binary ---------------------------------------------------------------------------------

def _quot(x: Any, y: Any, out: Any) -> Any:
    """The integer q with out == x - q * y (fmod, remainder), read off the result."""
    return np.round((x - out) / y)


def _pow_dx(x: Any, y: Any, out: Any) -> Any:
    # y * x**(y-1), also at y == 0 (its derivative in y survives there); 0 at x == y == 0
    both = np.logical_and(np.equal(x, 0), np.equal(y, 0))
    return np.where(both, 0.0, y * np.power(np.where(both, 1.0, x), y - 1))


def _pow_dy(x: Any, y: Any, out: Any) -> Any:
    x0 = np.equal(x, 0)
    return np.where(x0, 0.0, out * np.log(np.where(x0, 1, x)))


def _max_weight(x: Any, y: Any, split: bool = True) -> Any:
    """Weight of x in maximum(x, y): 1 where x wins; on ties 1/2 if ``split`` (the other
    argument carries a derivative too), else 0 (the other is a constant: its zero derivative
    is the one taken)."""
    # (selected by np.where, not a truth value times a number: array-API namespaces refuse
    # arithmetic on bools)
    return np.where(np.greater(x, y), 1.0, np.where(np.equal(x, y), 0.5 if split else 0.0, 0.0))


def _fmax_weight(x: Any, y: Any, split: bool = True) -> Any:
    """As :func:`_max_weight` but NaN loses (fmax ignores NaNs)."""
    return np.where(np.isnan(y), 1.0, np.where(np.isnan(x), 0.0, _max_weight(x, y, split)))


def _extremum(fn: Any, weight: Callable[[Any, Any, bool], Any]) -> None:
    """Register the elementwise ``fn(x, y)`` whose derivative in ``x`` is ``weight(x, y,
    split)`` (in ``y`` the same with the roles swapped), ``split`` telling whether the other
    argument carries a derivative: ties need to know, so the rules are :class:`Carried`."""
    def rule(pos: int, mode: str) -> Carried:
        def apply(carried: Any, d: Any, out: Any, /, x: Any, y: Any, *a: Any, **k: Any) -> Any:
            args = (x, y)
            w = weight(args[pos], args[1 - pos], is_carried(carried, 1 - pos))
            return select(d, w) if mode == "rev" else _selected(d, args[pos], out, w)
        return Carried(apply)
    defjvp(fn, rule(0, "fwd"), rule(1, "fwd"))
    defvjp(fn, rule(0, "rev"), rule(1, "rev"))


def _hypot_r(x: Any, y: Any, out: Any) -> Any:
    return _safe_div(x, out)


_binary(np.add, None, None)
_binary(np.subtract, None, lambda x, y, out: -1.0)
_binary(np.multiply, lambda x, y, out: y, lambda x, y, out: x)
for _fn in (np.divide, np.true_divide):
    _binary(_fn, lambda x, y, out: 1.0 / y, lambda x, y, out: -out / y)
for _fn in (np.power, np.float_power):
    _binary(_fn, _pow_dx, _pow_dy)
# their partials on floats, declared for the fast routes (as the operators')
for _fn, _partials in ((np.add, (1.0, 1.0)), (np.subtract, (1.0, -1.0)), (np.multiply, BILINEAR),
                       (np.true_divide, QUOTIENT), (np.power, POWER)):
    defscalar(_fn, 2, _partials)


def _pow_constant_vjp(ct: Any, out: Any, /, x: Any, y: Any, *m: Any) -> Any:
    """The cotangent of ``x`` in ``x ** y`` for a constant number ``y != 0``: what the shipped
    rules compute, ``ct * (y * x ** (y - 1))`` (their guard for ``x == y == 0`` never applies),
    without their masks; ``x ** 1`` is ``x`` exactly.  Below 1 the slope at ``x == 0`` is
    infinite, as the shipped rules give it (without NumPy's warning)."""
    if y < 1:
        with np.errstate(divide="ignore"):
            return ct * (y * np.power(x, y - 1))
    return ct * (y * (x if y == 2 else np.power(x, y - 1)))


_CONSTANT_POWERS = frozenset({int, float})


def _constant_power(mask: int, primals: list[Any], kwargs: dict[str, Any]) -> bool:
    """``x ** y`` for a constant number ``y != 0``, only ``x`` differentiated."""
    return mask == 1 and len(primals) == 2 and not kwargs and \
        type(primals[1]) in _CONSTANT_POWERS and primals[1] != 0


# x ** c, the commonest power, by fewer operations than the rules' masks (reverse mode's quick
# rules; the tapes of hvp know them, so second-order tapes record them too).  operator.pow's
# rules are _scalar's, for numbers and arrays alike; the quick rules serve both.
_POW_CONSTANT = (_pow_constant_vjp, ZERO)
for _fn in (operator.pow, np.power):
    defquick(_fn, _constant_power, _POW_CONSTANT, second_order=True)
_binary(np.arctan2, lambda x, y, out: _safe_div(y, x * x + y * y),
        lambda x, y, out: _safe_div(-x, x * x + y * y))
_binary(np.hypot, lambda x, y, out: _safe_div(x, out), lambda x, y, out: _safe_div(y, out))
_extremum(np.maximum, _max_weight)
_extremum(np.minimum, lambda x, y, c: _max_weight(y, x, c))
_extremum(np.fmax, _fmax_weight)
_extremum(np.fmin, lambda x, y, c: _fmax_weight(-x, -y, c))
_binary(np.logaddexp, lambda x, y, out: np.exp(x - out), lambda x, y, out: np.exp(y - out))
_binary(np.logaddexp2, lambda x, y, out: np.exp2(x - out), lambda x, y, out: np.exp2(y - out))
_binary(np.copysign, lambda x, y, out: np.sign(x) * np.copysign(1.0, y), ZERO)
for _fn in (np.fmod, np.remainder, np.mod):
    _binary(_fn, lambda x, y, out: 1.0, lambda x, y, out: -_quot(x, y, out))
_binary(np.ldexp, lambda x, y, out: np.exp2(y), ZERO)
# heaviside(x, h0) is 0 below 0, 1 above and h0 at 0: flat in x, the identity in h0 at x == 0
_binary(np.heaviside, ZERO, lambda x, y, out: np.where(np.equal(x, 0), 1.0, 0.0))
_binary(np.nextafter, lambda x, y, out: 1.0, ZERO)


# -- several outputs ------------------------------------------------------------------------

def _first(ct: Any, like: Any) -> Any:
    return np.zeros(np.shape(like)) if ct is None else ct


# divmod(x, y) = (floor_divide(x, y), mod(x, y)): the quotient is flat
defjvp(np.divmod,
       lambda dx, out, /, x, y, *a, **k: (None, _contribution(dx, x, out[1])),
       lambda dy, out, /, x, y, *a, **k: (None, _contribution(dy, y, out[1],
                                                             -_quot(x, y, out[1]))))
defvjp(np.divmod,
       lambda ct, out, /, x, y, *a, **k: _first(ct[1], out[1]) * 1.0,
       lambda ct, out, /, x, y, *a, **k: -_first(ct[1], out[1]) * _quot(x, y, out[1]))
# frexp(x) = (m, e), x = m * 2**e ; modf(x) = (fractional part, integral part)
defjvp(np.frexp, lambda dx, out, /, x, *a, **k: (dx * np.exp2(-out[1]), None))
defvjp(np.frexp, lambda ct, out, /, x, *a, **k: _first(ct[0], x) * np.exp2(-out[1]))
defjvp(np.modf, lambda dx, out, /, x, *a, **k: (dx * 1.0, None))
defvjp(np.modf, lambda ct, out, /, x, *a, **k: _first(ct[0], x) * 1.0)


# -- clip and where ---------------------------------------------------------------------------

_NO = object()


def _clip_args(args: Any, kwargs: Any) -> Any:
    """(x, lo, hi) of np.clip(a, a_min, a_max, out, *, min, max); None for a missing bound."""
    x = args[0]
    lo = args[1] if len(args) > 1 else kwargs.get("a_min", kwargs.get("min", None))
    hi = args[2] if len(args) > 2 else kwargs.get("a_max", kwargs.get("max", None))
    return x, lo, hi


def _clip_weights(x: Any, lo: Any, hi: Any, carried: Any) -> Any:
    """Weights of (x, lo, hi) in clip = minimum(maximum(x, lo), hi), with the ties of
    :func:`_max_weight` (a constant bound takes a tie)."""
    cx, clo, chi = (is_carried(carried, i) for i in range(3))
    if lo is None:
        m, cm, wx_m, wlo = x, cx, 1.0, 0.0
    else:
        m, cm = np.maximum(x, lo), cx or clo
        wx_m, wlo = _max_weight(x, lo, clo), _max_weight(lo, x, cx)
    if hi is None:
        return wx_m, wlo, 0.0
    w_m, whi = _max_weight(hi, m, chi), _max_weight(m, hi, cm)
    return wx_m * w_m, wlo * w_m, whi


def _clip_rule(pos: int, mode: str) -> Carried:
    def rule(carried: Any, d: Any, out: Any, /, *args: Any, **kwargs: Any) -> Any:
        x, lo, hi = _clip_args(args, kwargs)
        w = _clip_weights(x, lo, hi, carried)[pos]
        if mode == "rev":
            return select(d, w)
        return _selected(d, (x, lo, hi)[pos], out, w)
    return Carried(rule)


defjvp(np.clip, _clip_rule(0, "fwd"), _clip_rule(1, "fwd"), _clip_rule(2, "fwd"))
defvjp(np.clip, _clip_rule(0, "rev"), _clip_rule(1, "rev"), _clip_rule(2, "rev"))


def _where_rule(pos: int, mode: str) -> Callable[..., Any]:
    def rule(d: Any, out: Any, /, cond: Any, x: Any, y: Any) -> Any:
        keep = cond if pos == 1 else np.logical_not(cond)
        if mode == "rev":
            return np.where(keep, d, 0.0)
        return fit(np.where(keep, lift(d, (x, y)[pos - 1], out), 0.0), d, (x, y)[pos - 1], out)
    return rule


defjvp(np.where, ZERO, _where_rule(1, "fwd"), _where_rule(2, "fwd"))
defvjp(np.where, ZERO, _where_rule(1, "rev"), _where_rule(2, "rev"))


# -- piecewise constant --------------------------------------------------------------------

nondifferentiable(*(getattr(np, name) for name in (
    "sign", "floor", "ceil", "rint", "trunc", "fix", "round", "around",
    "floor_divide", "spacing", "signbit", "isnan", "isinf", "isfinite", "isneginf", "isposinf",
    "isreal", "iscomplex", "isclose", "allclose", "array_equal", "array_equiv",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "logical_and", "logical_or", "logical_xor", "logical_not",
    "bitwise_and", "bitwise_or", "bitwise_xor", "invert", "bitwise_not", "left_shift",
    "right_shift", "gcd", "lcm", "isnat", "iscomplexobj", "isrealobj", "isscalar",
    "zeros_like", "ones_like", "empty_like", "shape", "ndim", "size", "result_type",
    "can_cast", "min_scalar_type") if hasattr(np, name)))


# -- ndarray methods ----------------------------------------------------------------------------

for _method, _fn in ((np.ndarray.conj, np.conjugate), (np.ndarray.conjugate, np.conjugate),
                     (np.ndarray.clip, np.clip)):
    same_rules(_method, _fn)
