"""Rules for scalar Python: ``math``, ``cmath``, ``operator`` and builtins.

Abbreviations: ``x, y`` (``z`` for cmath) arguments, ``out`` the primal output, ``dx`` a
tangent, ``ct`` a cotangent.  Every rule is ``rule(dx, out, /, *args)`` (forward) or
``rule(ct, out, /, *args)`` (reverse), one per positional argument.

Conventions:

- ``math``/``cmath`` arguments are numbers; their tangents may be numbers or arrays of shape
  ``B`` (a batch of directions), so rules only multiply ``dx`` by numbers.
- ``operator`` rules also serve NumPy arrays (``a * b`` on arrays calls ``operator.mul``): they
  lift and broadcast tangents as the ufunc rules do (see ``_common``).
- Complex: ``cmath`` functions are holomorphic, their rules are written as for reals.  ``abs``
  and ``cmath.phase`` are real-valued: reverse rules follow autograd/JAX (gradient
  ``df/dx - i df/dy``), i.e. every reverse rule is the transpose of the forward one under
  ``Re(sum(a * b))``.
- Non-smooth points take documented Clarke elements: ``abs'(0) = 0``; a tie in ``min``/``max``
  between arguments that all carry a derivative splits evenly, and a tie with one that carries
  none (a constant) gives the constant's zero derivative to all of them (``max(x, 0.0)``, relu,
  has derivative 0 at 0); ``copysign`` is flat in its second argument.
- In-place operators (``iadd``...) have the rules of their pure siblings; the engine hands them
  the arguments as they were before the call (a mutated first argument must be copied).
- Variadic functions (``math.hypot``, ``max``) have rules for up to ``VARIADIC`` arguments.
"""

from __future__ import annotations

import builtins
import cmath
import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from .._rules import (BILINEAR, LINEAR, POWER, QUOTIENT, ZERO, Carried, MissingRuleError,
                      defelementwise, defjvp, defscalar, defshape, defstandin, defvjp,
                      is_carried, nondifferentiable, passed)
from ._common import cts, fill, fit, indexed, lift, like_items, select

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _unary(fn: Any, deriv: Any, scalar: Any = None, second: Any = None) -> None:
    """Register ``fn(x)`` with ``f'(x) = deriv(x, out)`` in both modes; ``scalar``: the same
    derivative declared for the fast routes on floats (see ``_rules.defscalar``): ``deriv``
    itself (True), or a guarded version of it; ``second``: ``f''(x)`` as ``second(x, out)``
    (the derivative of ``deriv``'s code), declared for the routes that write Hessian-vector
    products out (``_rules.defelementwise``)."""
    defjvp(fn, lambda dx, out, /, x: dx * deriv(x, out))
    defvjp(fn, lambda ct, out, /, x: ct * deriv(x, out))
    if scalar is not None:
        defscalar(fn, 1, deriv if scalar is True else scalar)
    if second is not None:
        defelementwise(fn, deriv, second)


def nonzero(deriv: Any) -> Any:
    """``deriv`` for a fast route, handing the point ``out == 0`` back to the rules."""
    def partial(x: Any, out: Any) -> Any:
        return None if out == 0 else deriv(x, out)
    return partial


# The partials of float arithmetic, declared for the fast routes (see _rules.defscalar).

def quotient_partials(a: Any, b: Any, out: Any, da: bool, db: bool) -> tuple[Any, ...] | None:
    """``a / b``: ``(1 / b, -out / b)``; a zero divisor goes to the rules."""
    if b == 0:
        return None
    return 1.0 / b, -out / b


def _finite(v: Any) -> bool:
    return bool(-math.inf < v < math.inf)


def power_partials(a: Any, b: Any, out: Any, da: bool, db: bool) -> tuple[Any, ...] | None:
    """``a ** b``: ``(b a^(b-1), out log a)``, for the differentiated operands; the points
    where one of them has no real derivative go to the rules (a negative base to a fraction,
    whose power NumPy makes nan, and Python's ``**`` on floats complex; an infinite or nan
    operand)."""
    if a < 0 and b % 1.0 != 0.0 or not (_finite(a) and _finite(b)):
        return None
    pa = pb = 0.0
    if da:
        if b == 0:
            pa = 0.0
        elif a == 0 and b < 1:
            return None
        else:
            pa = b * a ** (b - 1)
    if db:
        if a > 0:
            pb = out * math.log(a)
        elif a == 0:
            pb = 0.0
        else:
            return None
    return pa, pb


def quotient_second(a: Any, b: Any, out: Any, da: bool, db: bool) -> tuple[Any, ...] | None:
    """``a / b`` (the shape QUOTIENT): ``(pa, pb, haa, hab, hbb)``, its
    partials ``(1 / b, -out / b)`` and second partials ``(0, -1 / b^2, 2 out / b^2)``; None at
    ``b == 0`` (the rules decide)."""
    if b == 0:
        return None
    r = 1.0 / b
    q = out * r
    return r, -q, 0.0, -(r * r), 2.0 * q * r


def power_second(a: Any, b: Any, out: Any, da: bool, db: bool) -> tuple[Any, ...] | None:
    """``a ** b`` (the shape POWER): ``(pa, pb, haa, hab, hbb)`` --
    ``b a^(b-1)``, ``out log a``; ``b (b-1) a^(b-2)``, ``a^(b-1) (1 + b log a)``,
    ``out log^2 a`` -- for the differentiated operands (``da``, ``db``).  None where these
    are not the derivatives -- ``a <= 0`` with a differentiated exponent, ``a == 0`` with
    ``b < 2`` (but for ``b`` 0 or 1, where the power is constant or linear in ``a``) -- and
    the rules decide, as at a negative base to a fraction or an infinite or nan operand."""
    if a < 0 and b % 1.0 != 0.0 or not (_finite(a) and _finite(b)):
        return None
    if db:
        if not a > 0:
            return None
        log = math.log(a)
        pb = out * log
        pa = b * a ** (b - 1) if da else 0.0
        haa = b * (b - 1) * a ** (b - 2) if da else 0.0
        return pa, pb, haa, a ** (b - 1) * (1.0 + b * log), pb * log
    if b == 0:
        return 0.0, 0.0, 0.0, 0.0, 0.0
    if b == 1:
        return 1.0, 0.0, 0.0, 0.0, 0.0
    if a == 0 and b < 2:
        return None
    return b * a ** (b - 1), 0.0, b * (b - 1) * a ** (b - 2), 0.0, 0.0


defshape(QUOTIENT, quotient_partials, quotient_second)
defshape(POWER, power_partials, power_second)


def digamma(x: float) -> float:
    """The digamma function for real ``x`` in plain Python (``math`` has none), so that the
    rules of ``math.gamma``/``math.lgamma`` are themselves differentiable."""
    if x <= 0.0 and x == math.floor(x):
        return math.nan
    if x < 0.5:  # reflection: psi(1 - x) - psi(x) = pi / tan(pi x)
        return digamma(1.0 - x) - math.pi / math.tan(math.pi * x)
    acc = 0.0
    while x < 10.0:
        acc -= 1.0 / x
        x += 1.0
    inv2 = 1.0 / (x * x)
    series = inv2 * (1.0 / 12 - inv2 * (1.0 / 120 - inv2 * (1.0 / 252 - inv2 * (
        1.0 / 240 - inv2 * (1.0 / 132 - inv2 * (691.0 / 32760 - inv2 / 12.0))))))
    return acc + math.log(x) - 0.5 / x - series


def _sign(x: Any) -> Any:
    """sign with sign(0) = 0 (and nan's nan, as np.sign), for numbers and arrays."""
    if isinstance(x, (int, float)):  # NumPy's float64 too, whose comparisons give np.bool_:
        if x != x:
            return x
        return float(x > 0) - float(x < 0)  # (np.bool_ - np.bool_ is a TypeError)
    return np.sign(x)


# -- math: one argument -----------------------------------------------------------------------

_unary(math.sin, lambda x, out: math.cos(x), scalar=True, second=lambda x, out: -out)
_unary(math.cos, lambda x, out: -math.sin(x), scalar=True, second=lambda x, out: -out)
_unary(math.tan, lambda x, out: 1.0 + out * out, scalar=True,
       second=lambda x, out: 2.0 * out * (1.0 + out * out))
_unary(math.asin, lambda x, out: 1.0 / math.sqrt(1.0 - x * x))
_unary(math.acos, lambda x, out: -1.0 / math.sqrt(1.0 - x * x))
_unary(math.atan, lambda x, out: 1.0 / (1.0 + x * x), scalar=True,
       second=lambda x, out: -2.0 * x / ((1.0 + x * x) * (1.0 + x * x)))
_unary(math.sinh, lambda x, out: math.cosh(x), scalar=True, second=lambda x, out: out)
_unary(math.cosh, lambda x, out: math.sinh(x), scalar=True, second=lambda x, out: out)
_unary(math.tanh, lambda x, out: 1.0 - out * out, scalar=True,
       second=lambda x, out: -2.0 * out * (1.0 - out * out))
_unary(math.asinh, lambda x, out: 1.0 / math.sqrt(x * x + 1.0))
_unary(math.acosh, lambda x, out: 1.0 / math.sqrt(x * x - 1.0))
_unary(math.atanh, lambda x, out: 1.0 / (1.0 - x * x))
_unary(math.exp, lambda x, out: out, scalar=True, second=lambda x, out: out)
_unary(math.expm1, lambda x, out: out + 1.0, scalar=True, second=lambda x, out: out + 1.0)
if hasattr(math, "exp2"):  # Python 3.11+
    _unary(math.exp2, lambda x, out: out * _LN2)
_unary(math.log1p, lambda x, out: 1.0 / (1.0 + x), scalar=True,
       second=lambda x, out: -1.0 / ((1.0 + x) * (1.0 + x)))
_unary(math.log2, lambda x, out: 1.0 / (x * _LN2), scalar=True,
       second=lambda x, out: -1.0 / (x * x * _LN2))
_unary(math.log10, lambda x, out: 1.0 / (x * _LN10), scalar=True,
       second=lambda x, out: -1.0 / (x * x * _LN10))
_unary(math.sqrt, lambda x, out: 0.5 / out, scalar=nonzero(lambda x, out: 0.5 / out),
       second=lambda x, out: -0.25 / (out * out * out))
if hasattr(math, "cbrt"):  # Python 3.11+
    _unary(math.cbrt, lambda x, out: 1.0 / (3.0 * out * out))
_unary(math.erf, lambda x, out: _TWO_OVER_SQRT_PI * math.exp(-x * x), scalar=True,
       second=lambda x, out: -2.0 * x * _TWO_OVER_SQRT_PI * math.exp(-x * x))
_unary(math.erfc, lambda x, out: -_TWO_OVER_SQRT_PI * math.exp(-x * x))
_unary(math.gamma, lambda x, out: out * digamma(x))
_unary(math.lgamma, lambda x, out: digamma(x))
_unary(math.fabs, lambda x, out: _sign(x), scalar=True)
_unary(math.degrees, lambda x, out: 180.0 / math.pi)
_unary(math.radians, lambda x, out: math.pi / 180.0)

# math.log(x) and math.log(x, base) = log(x) / log(base)
defjvp(math.log,
       lambda dx, out, /, x, *base: dx / (x * math.log(*base)) if base else dx / x,
       lambda db, out, /, x, base: -db * out / (base * math.log(base)))
defvjp(math.log,
       lambda ct, out, /, x, *base: ct / (x * math.log(*base)) if base else ct / x,
       lambda ct, out, /, x, base: -ct * out / (base * math.log(base)))
defscalar(math.log, 1, lambda x, out: 1.0 / x)
defelementwise(math.log, lambda x, out: 1.0 / x, lambda x, out: -1.0 / (x * x))  # (one argument)


# -- math: several arguments ------------------------------------------------------------------

defjvp(math.atan2, lambda dy, out, /, y, x: dy * (x / (x * x + y * y)),
       lambda dx, out, /, y, x: dx * (-y / (x * x + y * y)))
defvjp(math.atan2, lambda ct, out, /, y, x: ct * (x / (x * x + y * y)),
       lambda ct, out, /, y, x: ct * (-y / (x * x + y * y)))


def _hypot_rule(i: int) -> Callable[..., Any]:
    # d hypot / d x_i = x_i / out, and 0 at the origin (a Clarke element)
    def rule(dx: Any, out: Any, /, *xs: Any) -> Any:
        return dx * (xs[i] / out if out else 0.0)
    return rule


defjvp(math.hypot, *indexed(_hypot_rule))
defvjp(math.hypot, *indexed(_hypot_rule))


def _pow_dx(x: Any, y: Any) -> Any:
    """d(x**y)/dx = y * x**(y-1), kept as that product at y == 0 (its value 0 there, its own
    derivative in y, x**-1, intact for second derivatives); 0 at x == y == 0, where x**(y-1)
    has no value."""
    if y == 0 and x == 0:
        return 0.0 * y
    if x == 0 and isinstance(x, (int, float)) and isinstance(y, (int, float)) and y < 1:
        # the infinite slope (as NumPy gives), not Python's ZeroDivisionError: computed by
        # np.power, whose own rule gives the second derivative (-inf for x ** 0.5), as hvp does
        with np.errstate(divide="ignore"):
            return y * float(np.power(x, y - 1))
    return y * x ** (y - 1)


def _pow_dy(x: Any, y: Any, out: Any) -> Any:
    """d(x**y)/dy = log(x) * x**y; 0 at x == 0 (y > 0), nan for negative x with real out:
    ``out * nan``, whose own derivatives (second derivatives of the power) are nan too, as
    they are undefined there -- a constant nan would give them 0."""
    if x == 0:
        return 0.0 * out
    if isinstance(x, (int, float)) and x < 0:
        return out * (cmath.log(x) if isinstance(out, complex) else math.nan)
    return out * (cmath.log(x) if isinstance(x, complex) else math.log(x))


defjvp(math.pow, lambda dx, out, /, x, y: dx * _pow_dx(x, y),
       lambda dy, out, /, x, y: dy * _pow_dy(x, y, out))
defvjp(math.pow, lambda ct, out, /, x, y: ct * _pow_dx(x, y),
       lambda ct, out, /, x, y: ct * _pow_dy(x, y, out))

# copysign(x, y) = |x| sign(y): flat in y
defjvp(math.copysign, lambda dx, out, /, x, y: dx * (_sign(x) * math.copysign(1.0, y)), ZERO)
defvjp(math.copysign, lambda ct, out, /, x, y: ct * (_sign(x) * math.copysign(1.0, y)), ZERO)


def _int_quot(x: Any, y: Any, out: Any) -> Any:
    """The integer quotient q with out == x - q * y (exact, read off the result)."""
    return float(round((x - out) / y))


# fmod(x, y) = x - trunc(x / y) * y ; remainder(x, y) = x - round(x / y) * y
_fn: Any  # the loops below run over callables of many types
for _fn in (math.fmod, math.remainder):
    defjvp(_fn, lambda dx, out, /, x, y: dx * 1.0,
           lambda dy, out, /, x, y: -dy * _int_quot(x, y, out))
    defvjp(_fn, lambda ct, out, /, x, y: ct * 1.0,
           lambda ct, out, /, x, y: -ct * _int_quot(x, y, out))

defjvp(math.ldexp, lambda dx, out, /, x, i: dx * 2.0 ** i, ZERO)
defvjp(math.ldexp, lambda ct, out, /, x, i: ct * 2.0 ** i, ZERO)
# nextafter(x, y) moves x by one ulp: the identity in x, flat in y
defjvp(math.nextafter, lambda dx, out, /, x, y, **kw: dx * 1.0, ZERO)
defvjp(math.nextafter, lambda ct, out, /, x, y, **kw: ct * 1.0, ZERO)

# frexp(x) = (m, e) with x = m * 2**e: m = x * 2**-e, e an integer
defjvp(math.frexp, lambda dx, out, /, x: (dx * 2.0 ** -out[1], None))
defvjp(math.frexp, lambda ct, out, /, x: 0.0 if ct[0] is None else ct[0] * 2.0 ** -out[1])
# modf(x) = (fractional part, integral part)
defjvp(math.modf, lambda dx, out, /, x: (dx * 1.0, None))
defvjp(math.modf, lambda ct, out, /, x: 0.0 if ct[0] is None else ct[0] * 1.0)


# -- math: iterables (container arguments) ----------------------------------------------------

def _sum_tangents(dxs: Any, xs: Any) -> Any:
    total = 0.0
    for d in fill(dxs, xs):
        total = total + d
    return total


defjvp(math.fsum, lambda dxs, out, /, xs: _sum_tangents(dxs, xs))
defvjp(math.fsum, lambda ct, out, /, xs: ct * np.ones(np.shape(xs)) if isinstance(xs, np.ndarray)
       else [ct * 1.0 for _ in xs])


def _others(xs: Any, start: Any = 1) -> Any:
    """[start * prod(xs[j] for j != i)] without division (exact with zeros)."""
    n = len(xs)
    left = [start] * n
    for i in range(1, n):
        left[i] = left[i - 1] * xs[i - 1]
    right = [1] * n
    for i in range(n - 2, -1, -1):
        right[i] = right[i + 1] * xs[i + 1]
    return [a * b for a, b in zip(left, right)]


def _prod_jvp(dxs: Any, out: Any, /, xs: Any, *, start: Any = 1) -> Any:
    total = 0.0
    for d, o in zip(fill(dxs, xs), _others(list(xs), start)):
        total = total + d * o
    return total


defjvp(math.prod, _prod_jvp)
defvjp(math.prod, lambda ct, out, /, xs, *, start=1: like_items(
    xs, [ct * o for o in _others(list(xs), start)]))


def _dist_rule(sign: float) -> tuple[Callable[..., Any], Callable[..., Any]]:
    def jvp(dps: Any, out: Any, /, p: Any, q: Any) -> Any:
        total = 0.0
        for d, a, b in zip(fill(dps, p), p, q):
            total = total + d * (sign * (a - b) / out if out else 0.0)
        return total

    def vjp(ct: Any, out: Any, /, p: Any, q: Any) -> Any:
        return like_items(p if sign > 0 else q,
                          [ct * (sign * (a - b) / out if out else 0.0) for a, b in zip(p, q)])
    return jvp, vjp


defjvp(math.dist, _dist_rule(1.0)[0], _dist_rule(-1.0)[0])
defvjp(math.dist, _dist_rule(1.0)[1], _dist_rule(-1.0)[1])

if hasattr(math, "sumprod"):  # Python 3.12+
    defjvp(math.sumprod, lambda dps, out, /, p, q: _prod_pairs(fill(dps, p), q),
           lambda dqs, out, /, p, q: _prod_pairs(p, fill(dqs, q)))
    defvjp(math.sumprod, lambda ct, out, /, p, q: like_items(p, [ct * b for b in q]),
           lambda ct, out, /, p, q: like_items(q, [ct * a for a in p]))


def _prod_pairs(a: Any, b: Any) -> Any:
    total = 0.0
    for u, v in zip(a, b):
        total = total + u * v
    return total


if hasattr(math, "fma"):  # Python 3.13+: fma(x, y, z) = x * y + z
    defjvp(math.fma, lambda dx, out, /, x, y, z: dx * y, lambda dy, out, /, x, y, z: dy * x,
           lambda dz, out, /, x, y, z: dz * 1.0)
    defvjp(math.fma, lambda ct, out, /, x, y, z: ct * y, lambda ct, out, /, x, y, z: ct * x,
           lambda ct, out, /, x, y, z: ct * 1.0)

nondifferentiable(math.floor, math.ceil, math.trunc, math.isfinite, math.isinf, math.isnan,
                  math.isclose, math.factorial, math.comb, math.perm, math.gcd, math.lcm,
                  math.isqrt, math.ulp)


# -- cmath: holomorphic ---------------------------------------------------------------------

_unary(cmath.sin, lambda z, out: cmath.cos(z))
_unary(cmath.cos, lambda z, out: -cmath.sin(z))
_unary(cmath.tan, lambda z, out: 1.0 + out * out)
_unary(cmath.asin, lambda z, out: 1.0 / cmath.sqrt(1.0 - z * z))
_unary(cmath.acos, lambda z, out: -1.0 / cmath.sqrt(1.0 - z * z))
_unary(cmath.atan, lambda z, out: 1.0 / (1.0 + z * z))
_unary(cmath.sinh, lambda z, out: cmath.cosh(z))
_unary(cmath.cosh, lambda z, out: cmath.sinh(z))
_unary(cmath.tanh, lambda z, out: 1.0 - out * out)
_unary(cmath.asinh, lambda z, out: 1.0 / cmath.sqrt(z * z + 1.0))
_unary(cmath.acosh, lambda z, out: 1.0 / (cmath.sqrt(z - 1.0) * cmath.sqrt(z + 1.0)))
_unary(cmath.atanh, lambda z, out: 1.0 / (1.0 - z * z))
_unary(cmath.exp, lambda z, out: out)
_unary(cmath.log10, lambda z, out: 1.0 / (z * _LN10))
_unary(cmath.sqrt, lambda z, out: 0.5 / out)
defjvp(cmath.log,
       lambda dz, out, /, z, *base: dz / (z * cmath.log(*base)) if base else dz / z,
       lambda db, out, /, z, base: -db * out / (base * cmath.log(base)))
defvjp(cmath.log,
       lambda ct, out, /, z, *base: ct / (z * cmath.log(*base)) if base else ct / z,
       lambda ct, out, /, z, base: -ct * out / (base * cmath.log(base)))


# -- cmath: real-valued and real-argument functions -----------------------------------------

def _abs_jvp(dz: Any, z: Any, r: Any) -> Any:
    """Tangent of |z|: Re(conj(z) dz) / |z| (0 at z = 0)."""
    if isinstance(z, complex):
        return (z.real * np.real(dz) + z.imag * np.imag(dz)) / r if r else 0.0 * np.real(dz)
    return dz * _sign(z)


def _abs_vjp(ct: Any, z: Any, r: Any) -> Any:
    if isinstance(z, complex):
        return ct * z.conjugate() / r if r else 0.0 * ct
    return ct * _sign(z)


def _phase_jvp(dz: Any, z: Any) -> Any:
    """Tangent of arg(z): Im(conj(z) dz) / |z|^2."""
    r2 = z.real * z.real + z.imag * z.imag
    return (z.real * np.imag(dz) - z.imag * np.real(dz)) / r2 if r2 else 0.0 * np.real(dz)


def _phase_vjp(ct: Any, z: Any) -> Any:
    z = complex(z)
    r2 = z.real * z.real + z.imag * z.imag
    return -1j * ct * z.conjugate() / r2 if r2 else 0.0 * ct


defjvp(cmath.phase, lambda dz, out, /, z: _phase_jvp(dz, complex(z)))
defvjp(cmath.phase, lambda ct, out, /, z: _phase_vjp(ct, z))


def _polar_jvp(dz: Any, out: Any, /, z: Any) -> Any:
    return (_abs_jvp(dz, complex(z), out[0]), _phase_jvp(dz, complex(z)))


def _polar_vjp(ct: Any, out: Any, /, z: Any) -> Any:
    c_abs, c_phase = cts(ct, out)
    return _abs_vjp(c_abs, complex(z), out[0]) + _phase_vjp(c_phase, z)


defjvp(cmath.polar, _polar_jvp)
defvjp(cmath.polar, _polar_vjp)
# rect(r, phi) = r * exp(i phi)
defjvp(cmath.rect, lambda dr, out, /, r, phi: dr * cmath.rect(1.0, phi),
       lambda dphi, out, /, r, phi: dphi * (1j * out))
defvjp(cmath.rect, lambda ct, out, /, r, phi: ct * cmath.rect(1.0, phi),
       lambda ct, out, /, r, phi: ct * (1j * out))
nondifferentiable(cmath.isfinite, cmath.isinf, cmath.isnan, cmath.isclose)


# -- operator (numbers and arrays) -------------------------------------------------------------

_PYTHON_NUMBERS = frozenset((float, int, bool, complex))


def _numbers(*xs: Any) -> bool:
    return all(type(x) in _PYTHON_NUMBERS for x in xs)


def _pass(dx: Any, x: Any, out: Any) -> Any:
    """The tangent of an argument that enters ``out`` with coefficient 1."""
    if type(x) in _PYTHON_NUMBERS and type(out) in _PYTHON_NUMBERS:
        return dx
    return fit(lift(dx, x, out), dx, x, out)


def _scaled(dx: Any, x: Any, out: Any, factor: Any) -> Any:
    if type(x) in _PYTHON_NUMBERS and type(out) in _PYTHON_NUMBERS:
        return dx * factor
    return fit(lift(dx, x, out) * factor, dx, x, out)


def _quot(x: Any, y: Any, out: Any) -> Any:
    """q with out == x - q * y for x % y (floor) and fmod-like results, read off ``out``."""
    if _numbers(x, y, out):
        return float(round((x - out) / y))
    return np.round((x - out) / y)


def _divisor(y: Any, out: Any) -> Any:
    """The divisor ``y`` of a quotient ``out`` as the division computed with it: a Python zero
    as NumPy's where the quotient is NumPy's (``np.float64(1.0) / 0.0`` is ``inf``, with
    NumPy's divide warning), so that the partial ``1 / y`` is ``inf`` (or ``nan``) as NumPy
    computes, not Python's ``ZeroDivisionError``; ``y`` itself elsewhere (a quotient of Python
    numbers by zero raised before any rule ran).  The partial in ``y``, ``-out / y``, divides
    NumPy's ``out`` already."""
    kind = y.__class__  # (the value's class, for another context's value too)
    if kind in _PYTHON_NUMBERS and out.__class__ not in _PYTHON_NUMBERS and y == 0:
        return np.complex128(y) if kind is complex else np.float64(y)
    return y


def _pow_dx_any(x: Any, y: Any) -> Any:
    if _numbers(x, y):
        return _pow_dx(x, y)
    return _pow_dx_array(x, y)


def _pow_dx_array(x: Any, y: Any) -> Any:
    """:func:`_pow_dx` elementwise: ``y * x**(y-1)``, 0 where x == y == 0 (no nan from
    ``0 * 0**-1`` there, and none in the derivative of this expression either).  A nonzero
    Python number ``y`` needs no selection (four operations fewer: each is a kernel launch on
    a GPU); the product still computes with ``y``, which an enclosing derivative may follow."""
    if type(y) in (int, float) and y != 0:
        return y * x ** (y - 1)
    both = np.logical_and(np.equal(x, 0), np.equal(y, 0))
    return np.where(both, 0.0, y * np.power(np.where(both, 1.0, x), y - 1))


def _pow_dy_any(x: Any, y: Any, out: Any) -> Any:
    if _numbers(x, y, out):
        return _pow_dy(x, y, out)
    x0 = np.equal(x, 0)
    return np.where(x0, 0.0, out * np.log(np.where(x0, 1, x)))


def _abs_any_jvp(dx: Any, out: Any, /, x: Any) -> Any:
    if _numbers(x):
        return _abs_jvp(dx, x, out)
    if np.iscomplexobj(x):
        safe = np.where(out == 0, 1.0, out)
        return np.where(out == 0, 0.0, np.real(np.conj(x) * dx) / safe)
    return dx * np.sign(x)


def _abs_any_vjp(ct: Any, out: Any, /, x: Any) -> Any:
    if _numbers(x):
        return _abs_vjp(ct, x, out)
    if np.iscomplexobj(x):
        safe = np.where(out == 0, 1.0, out)
        return np.where(out == 0, 0.0, ct * np.conj(x) / safe)
    return ct * np.sign(x)


_ADD = (lambda dx, out, /, x, y: _pass(dx, x, out), lambda dy, out, /, x, y: _pass(dy, y, out))
_ADD_T = (passed, passed)
_SUB = (lambda dx, out, /, x, y: _pass(dx, x, out), lambda dy, out, /, x, y: -_pass(dy, y, out))
_SUB_T = (passed, lambda ct, out, /, x, y: -ct)
_MUL = (lambda dx, out, /, x, y: _scaled(dx, x, out, y),
        lambda dy, out, /, x, y: _scaled(dy, y, out, x))
_MUL_T = (lambda ct, out, /, x, y: ct * y, lambda ct, out, /, x, y: ct * x)
_DIV = (lambda dx, out, /, x, y: _scaled(dx, x, out, 1.0 / _divisor(y, out)),
        lambda dy, out, /, x, y: _scaled(dy, y, out, -out / y))
_DIV_T = (lambda ct, out, /, x, y: ct / _divisor(y, out), lambda ct, out, /, x, y: -ct * out / y)
_MOD = (lambda dx, out, /, x, y: _pass(dx, x, out),
        lambda dy, out, /, x, y: _scaled(dy, y, out, -_quot(x, y, out)))
_MOD_T = (lambda ct, out, /, x, y: ct * 1.0, lambda ct, out, /, x, y: -ct * _quot(x, y, out))
# (builtins.pow's parameter names: pow(a, exp=2.0) passes one by keyword)
_POW = (lambda dx, out, /, base, exp, mod=None: _scaled(dx, base, out, _pow_dx_any(base, exp)),
        lambda dy, out, /, base, exp, mod=None: _scaled(dy, exp, out,
                                                        _pow_dy_any(base, exp, out)))
_POW_T = (lambda ct, out, /, base, exp, mod=None: ct * _pow_dx_any(base, exp),
          lambda ct, out, /, base, exp, mod=None: ct * _pow_dy_any(base, exp, out))

for _fns, _jvps, _vjps in (((operator.add, operator.iadd), _ADD, _ADD_T),
                           ((operator.sub, operator.isub), _SUB, _SUB_T),
                           ((operator.mul, operator.imul), _MUL, _MUL_T),
                           ((operator.truediv, operator.itruediv), _DIV, _DIV_T),
                           ((operator.mod, operator.imod), _MOD, _MOD_T),
                           ((operator.pow, operator.ipow, builtins.pow), _POW, _POW_T)):
    for _fn in _fns:
        defjvp(_fn, *_jvps)
        defvjp(_fn, *_vjps)
# ... and the shapes of their partials on floats, declared for the fast routes (the code they
# generate for an operator is the code of its shape: _rules.scalar_shape)
_DECLARED: tuple[tuple[tuple[Any, ...], Any], ...] = (
    ((operator.add, operator.iadd), (1.0, 1.0)), ((operator.sub, operator.isub), (1.0, -1.0)),
    ((operator.mul, operator.imul), BILINEAR), ((operator.truediv, operator.itruediv), QUOTIENT),
    ((operator.pow, operator.ipow, builtins.pow, math.pow), POWER))
for _operators, _partials in _DECLARED:
    for _fn in _operators:
        defscalar(_fn, 2, _partials)


def _dunder_standin(kind: type, name: str, op: Callable[..., Any], reflected: bool,
                    accepted: tuple[type, ...]) -> Callable[..., Any]:
    """``float.__mul__(x, y)`` restated as the operator it implements, so that
    ``grad(float.__mul__)`` has the operator's rules: ``NotImplemented`` for an operand the
    method does not take, as the method returns it."""
    def standin(x: Any, *other: Any) -> Any:
        if not isinstance(x, kind):
            raise TypeError(f"descriptor '{name}' requires a '{kind.__name__}' object but "
                            f"received a '{type(x).__name__}'")
        if not other:
            return op(kind(x))
        if not isinstance(other[0], accepted):
            return NotImplemented
        return op(other[0], kind(x)) if reflected else op(kind(x), other[0])
    standin.__name__ = standin.__qualname__ = f"{kind.__name__}{name}"
    return standin


for _kind, _accepted in ((float, (int, float)), (complex, (int, float, complex))):
    for _op in (operator.add, operator.sub, operator.mul, operator.truediv, operator.pow,
                operator.neg, operator.pos, operator.abs, operator.mod, operator.floordiv):
        for _reflected in (False, True):
            _dunder = f"__{'r' if _reflected else ''}{_op.__name__}__"
            if _reflected and _op in (operator.neg, operator.pos, operator.abs):
                continue
            if hasattr(_kind, _dunder):  # (complex has no floor division nor modulo)
                defstandin(getattr(_kind, _dunder),
                           _dunder_standin(_kind, _dunder, _op, _reflected, _accepted))



def _ufunc_slot_standin(kind: type, name: str, ufunc: Any, reflected: bool) -> Any:
    """``np.ndarray.__mul__(x, y)``, ``np.float64.__add__(x, y)``: an arithmetic slot of an
    array or NumPy scalar called by name on its class, restated as the ufunc it runs (never
    the operator, which would call a subclass's own ``__mul__`` back); ``NotImplemented`` for
    an operand that defers to its own (``__array_ufunc__ = None``), as the slot returns it."""
    def standin(x: Any, *rest: Any) -> Any:
        if not isinstance(x, kind):
            raise TypeError(f"descriptor '{name}' requires a '{kind.__name__}' object but "
                            f"received a '{type(x).__name__}'")
        if rest and getattr(type(rest[0]), "__array_ufunc__", True) is None:
            return NotImplemented
        return ufunc(rest[0], x) if reflected else ufunc(x, *rest)
    standin.__name__ = standin.__qualname__ = f"{kind.__name__}{name}"
    return standin


_SLOT_UFUNCS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
                "pow": np.power, "matmul": np.matmul, "neg": np.negative, "pos": np.positive,
                "abs": np.absolute}
_NUMPY_KINDS: tuple[type, ...] = (np.ndarray, np.float64, np.float32, np.complex128)
for _numpy_kind in _NUMPY_KINDS:
    for _name, _ufunc in _SLOT_UFUNCS.items():
        for _reflected in (False, True):
            if _reflected and _ufunc.nin == 1:
                continue
            _dunder = f"__{'r' if _reflected else ''}{_name}__"
            _slot = getattr(_numpy_kind, _dunder, None)
            if _slot is not None and (_numpy_kind is np.ndarray or _name != "matmul"):
                defstandin(_slot, _ufunc_slot_standin(_numpy_kind, _dunder, _ufunc, _reflected))

defjvp(operator.neg, LINEAR)
defvjp(operator.neg, lambda ct, out, /, x: -ct)
defscalar(operator.neg, 1, lambda x, out: -1.0)
defjvp(operator.pos, LINEAR)
defvjp(operator.pos, lambda ct, out, /, x: ct)
defscalar(operator.pos, 1, lambda x, out: 1.0)
for _fn in (operator.abs, builtins.abs):
    defjvp(_fn, _abs_any_jvp)
    defvjp(_fn, _abs_any_vjp)
    defscalar(_fn, 1, lambda x, out: _sign(x))

nondifferentiable(operator.floordiv, operator.ifloordiv, operator.lt, operator.le, operator.eq,
                  operator.ne, operator.ge, operator.gt, operator.not_, operator.truth,
                  operator.is_, operator.is_not, operator.and_, operator.or_, operator.xor,
                  operator.iand, operator.ior, operator.ixor, operator.invert, operator.inv,
                  operator.lshift, operator.rshift, operator.ilshift, operator.irshift,
                  operator.index, operator.contains, operator.countOf, operator.indexOf,
                  operator.length_hint)


# -- builtins -----------------------------------------------------------------------------------

def _to_scalar_jvp(dx: Any, out: Any, /, x: Any = 0.0, *rest: Any) -> Any:
    # float(x) / complex(x) of a number or a one-element array: the tangent keeps its batch
    return np.reshape(dx, np.shape(dx)[:np.ndim(dx) - np.ndim(x)]) if np.ndim(x) else dx


def _to_scalar_vjp(ct: Any, out: Any, /, x: Any = 0.0, *rest: Any) -> Any:
    return np.reshape(ct, np.shape(x)) if np.ndim(x) else ct


defjvp(builtins.float, _to_scalar_jvp)
defvjp(builtins.float, _to_scalar_vjp)
defscalar(builtins.float, 1, lambda x, out: 1.0)
# complex(re, im) = re + 1j * im
defjvp(builtins.complex, _to_scalar_jvp,
       lambda dy, out, /, x, y: 1j * _to_scalar_jvp(dy, out, y))
defvjp(builtins.complex, _to_scalar_vjp,
       lambda ct, out, /, x, y: _to_scalar_vjp(1j * ct, out, y))
# float.__new__(cls, x), complex.__new__(cls, re, im): the same casts, building an instance of
# cls (a subclass: Meters(x), super().__new__(cls, x) in its __new__); the class is no number
defjvp(float.__new__, ZERO, lambda dx, out, /, cls, x: _to_scalar_jvp(dx, out, x))
defvjp(float.__new__, ZERO, lambda ct, out, /, cls, x: _to_scalar_vjp(ct, out, x))
defjvp(complex.__new__, ZERO, lambda dx, out, /, cls, x, y=0.0: _to_scalar_jvp(dx, out, x),
       lambda dy, out, /, cls, x, y: 1j * _to_scalar_jvp(dy, out, y))
defvjp(complex.__new__, ZERO, lambda ct, out, /, cls, x, y=0.0: _to_scalar_vjp(ct, out, x),
       lambda ct, out, /, cls, x, y: _to_scalar_vjp(1j * ct, out, y))


def _extremum_weights(out: Any, xs: Any, carried: list[bool]) -> Any:
    """Weights of the candidates of min/max: 1 on the winner; a tie splits evenly among the
    tied candidates if all of them carry a derivative, and gives 0 to all of them if one is
    a constant (whose derivative, zero, is the one taken)."""
    hits = [x == out for x in xs]
    if any(h and not c for h, c in zip(hits, carried)):
        return [0.0] * len(hits)
    n = sum(hits)
    return [h / n if n else 0.0 for h in hits]


def _picked(items: list[Any], out: Any) -> int:
    """The position of the candidate ``max``/``min`` returned: that very object, else the first
    one equal to it (an array's items are new objects at each reading; an earlier item equal
    to the result would have had the same key, and been picked).  Never ``StopIteration``,
    which would end the loop of a user's ``__next__`` that calls ``max`` silently."""
    for k, x in enumerate(items):
        if x is out:
            return k
    for k, x in enumerate(items):
        if bool(np.all(x == out)):
            return k
    raise MissingRuleError(f"no derivative rule for max/min: the result {out!r} is none of "
                           f"the candidates (a NaN?)")


def _extremum_rule(i: int, mode: str) -> Carried:
    def rule(carried: Any, d: Any, out: Any, /, *xs: Any, **kw: Any) -> Any:
        if isinstance(out, (tuple, list)):
            # candidates compared as sequences (max of (value, label) pairs): the result is
            # one of them, whole, its derivative that candidate's
            items = list(xs[0]) if len(xs) == 1 else list(xs)
            first = _picked(items, out)
            if len(xs) > 1:
                return d if i == first else None
            if mode == "rev":
                return [d if k == first else None for k in range(len(items))]
            return list(d)[first]  # (its tangent as it is: a tuple's, None for a constant)
        if len(xs) == 1:  # max(iterable)
            items = list(xs[0])
            if "key" in kw:  # the first item the key picked
                first = _picked(items, out)
                w = [float(k == first) for k in range(len(items))]
            else:
                w = _extremum_weights(out, items, [is_carried(carried, 0, k)
                                                   for k in range(len(items))])
            if isinstance(xs[0], np.ndarray):  # an array iterates over its rows (elements)
                rows = np.ndim(xs[0])
                shares = np.reshape(np.array(w), (len(w),) + (1,) * (rows - 1))
                if mode == "fwd":
                    return np.sum(select(d, shares), axis=-rows)
                return select(np.expand_dims(d, -rows), shares)  # (a row's cotangent, spread)
            if mode == "rev":
                return [select(d, wk) for wk in w]
            return _sum_tangents([select(dk, wk) for dk, wk in zip(fill(d, items), w)], items)
        if "key" in kw:
            first = _picked(list(xs), out)
            return select(d, float(i == first))
        return select(d, _extremum_weights(out, xs, [is_carried(carried, k)
                                                     for k in range(len(xs))])[i])
    return Carried(rule)


for _fn in (builtins.max, builtins.min):
    defjvp(_fn, *indexed(lambda i: _extremum_rule(i, "fwd")))
    defvjp(_fn, *indexed(lambda i: _extremum_rule(i, "rev")))


def _builtin_sum_jvp(dxs: Any, out: Any, /, xs: Any, start: Any = 0) -> Any:
    if isinstance(xs, np.ndarray):
        return np.sum(dxs, axis=-xs.ndim)
    return _sum_tangents(dxs, xs)


def _builtin_sum_vjp(ct: Any, out: Any, /, xs: Any, start: Any = 0) -> Any:
    if isinstance(xs, np.ndarray):
        return np.broadcast_to(np.expand_dims(ct, 0), xs.shape)
    return [ct * 1.0 if not isinstance(x, np.ndarray) else ct * np.ones(np.shape(x))
            for x in xs]


defjvp(builtins.sum, _builtin_sum_jvp, lambda ds, out, /, xs, start=0: _pass(ds, start, out))
defvjp(builtins.sum, _builtin_sum_vjp, lambda ct, out, /, xs, start=0: ct)

# divmod(x, y) = (x // y, x % y): the quotient is flat
defjvp(builtins.divmod,
       lambda dx, out, /, x, y: (None, _pass(dx, x, out[1])),
       lambda dy, out, /, x, y: (None, _scaled(dy, y, out[1], -_quot(x, y, out[1]))))
defvjp(builtins.divmod,
       lambda ct, out, /, x, y: 0.0 * x if ct[1] is None else ct[1] * 1.0,
       lambda ct, out, /, x, y: 0.0 * y if ct[1] is None else -ct[1] * _quot(x, y, out[1]))

nondifferentiable(builtins.round, builtins.int, builtins.bool, builtins.len, builtins.hash)

# x.conjugate(): the identity on a float, the conjugate on a complex number (as np.conjugate)
defjvp(float.conjugate, lambda dx, out, /, x: dx)
defvjp(float.conjugate, lambda ct, out, /, x: ct)
defjvp(complex.conjugate, lambda dz, out, /, z: np.conj(dz))
defvjp(complex.conjugate, lambda ct, out, /, z: np.conj(ct))
# float.__float__(x), complex.__complex__(z): the number itself (a subclass's own __float__
# calling its base's, as `return 2.0 * float.__float__(self)` does)
defjvp(float.__float__, lambda dx, out, /, x: dx)
defvjp(float.__float__, lambda ct, out, /, x: ct)
if hasattr(complex, "__complex__"):  # (Python 3.11 on)
    defjvp(getattr(complex, "__complex__"), lambda dz, out, /, z: dz)
    defvjp(getattr(complex, "__complex__"), lambda ct, out, /, z: ct)
# The same exemptions (docs/ad.md) called as methods of the number: int(), round(), text
# (str(), repr(), format(), float.hex()), hash(), truth and comparisons.  Other C methods of a
# number (as_integer_ratio) have no rule: a derivative reaching them raises MissingRuleError.
NUMBER_EXEMPTIONS = ("is_integer", "__int__", "__trunc__", "__floor__", "__ceil__",
                     "__round__", "__repr__", "__str__", "__format__", "hex", "__hash__",
                     "__bool__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__")
nondifferentiable(*(kind.__dict__[name] for kind in (float, complex)
                    for name in NUMBER_EXEMPTIONS if name in kind.__dict__))
nondifferentiable(tuple.index, tuple.count, list.index, list.count)  # positions and counts
