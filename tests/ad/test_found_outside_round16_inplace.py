"""Found from outside, round 16: in-place ``%=`` and ``//=``, ``out=`` given a ufunc whose
differentiated argument has a zero partial, and writes through ``np.nditer`` operands.

- ``b %= a`` lost the divisor's partial ``-floor(b / a)`` in reverse mode (the operator's rule
  read the target after the write); ``s //= c`` on an array written in place before, and
  ``v //= c`` through a view held in a variable, passed the derivative through as if the
  floor division were the identity.  Both now take the path of ``+=``: recorded as
  ``b = b % a`` (the target's old value kept), ``//=`` as a write of constants.
- Forward mode kept ``out``'s old tangent where every differentiated argument's rule is
  ``ZERO`` (``np.heaviside(a, 0.5, out=b)``, ``np.copysign(1.5, a, out=b)``): it is zero now.
- A derivative written into an operand of ``np.nditer`` (``v[...] = a[k] ** 2``) was dropped
  (0 everywhere): it raises ``MissingRuleError`` naming ``numpy.nditer`` now, as reading a
  differentiated operand does; ``np.nditer([b, a], op_flags=[...])`` with a differentiated
  operand raised NumPy's ``ValueError`` about ``op_flags`` (the list of operands was read as
  one array) and raises that ``MissingRuleError`` too.
"""

from __future__ import annotations

import numpy as np
import pytest

from overdub_ad import (MissingRuleError, derivative, grad, hessian, hvp, jacfwd, jacrev, jvp,
                        value_and_grad, vjp)
from overdub_ad.testing import REFERENCE, force_route

# (each test runs on both routes itself: nothing for CI's reference-route pass to add)
pytestmark = pytest.mark.every_route

ROUTES = [pytest.param(None, id="default"), pytest.param(REFERENCE, id="reference")]
X = np.array([1.7, 2.3, 0.4])


def _fd(f, x, eps=1e-6):
    return np.array([(f(x + e) - f(x - e)) / (2 * eps) for e in np.eye(len(x)) * eps])


def _check(f, x, want, hess=None):
    """Every API's first derivative of scalar ``f`` at ``x`` against ``want`` (twice: the
    second call may take another, cached, path); ``hess``: the Hessian, where given."""
    assert np.allclose(_fd(f, x), want, atol=1e-5)  # (the closed form, checked itself)
    t = np.array([0.5, -1.0, 2.0])
    for _ in range(2):
        assert np.allclose(grad(f)(x), want), "grad"
        value, g = value_and_grad(f)(x)
        assert np.allclose(value, f(x)) and np.allclose(g, want), "value_and_grad"
        assert np.allclose(vjp(f, x)[1](1.0)[0], want), "vjp"
        assert np.allclose(jvp(f, (x,), (t,))[1], want @ t), "jvp"
        assert np.allclose(jacfwd(f)(x), want), "jacfwd"
        assert np.allclose(jacrev(f)(x), want), "jacrev"
        if hess is not None:
            assert np.allclose(hessian(f)(x), hess), "hessian"
            assert np.allclose(hvp(f, x, t), hess @ t), "hvp"


# -- %= and //= ------------------------------------------------------------------------------

def mod_by_x(a):
    b = a ** 2
    b %= a  # d/da (a^2 mod a) = 2a - floor(a)
    return np.sum(b)


def mod_fresh(a):
    s = np.full(3, 3.1)
    s %= a  # d/da (3.1 mod a) = -floor(3.1 / a)
    return np.sum(s)


def mod_view(a):
    b = a ** 2
    v = b[1:]
    v %= a[1:]
    return np.sum(b)


def fill_then_floordiv(a):
    s = np.zeros(3)
    s[:] = a
    s //= 1.0
    return np.sum(s * a)


def add_then_floordiv(a):
    b = a.copy()
    b += 0.05
    b //= 0.5
    return np.sum(b * a)


def add_then_slice_floordiv(a):
    b = a.copy()
    b += 0.05
    b[1:] //= 0.5
    return np.sum(b * a)


def view_floordiv(a):
    b = a.copy()
    v = b[1:]
    v //= 0.5
    return np.sum(b * a)


def reshape_view_floordiv(a):
    b = a.copy()
    v = b.reshape(3, 1)
    v //= 0.5
    return np.sum(b * a)


def fractional_part(a):  # squared fractional part of scaled positions
    pos = a * 4.0
    pos += 0.25
    cell = pos.copy()
    pos //= 1.0
    return np.sum((cell - pos) ** 2)


def floordiv_by_x(a):  # the divisor differentiated: a constant still
    b = np.full(3, 5.0)
    b //= a
    return np.sum(b * a)


CASES = [
    (mod_by_x, lambda a: 2 * a - np.floor(a), lambda a: np.diag(np.full(3, 2.0))),
    (mod_fresh, lambda a: -np.floor(3.1 / a), lambda a: np.zeros((3, 3))),
    (mod_view, lambda a: np.r_[2 * a[0], 2 * a[1:] - np.floor(a[1:])],
     lambda a: np.diag(np.full(3, 2.0))),
    (fill_then_floordiv, np.floor, lambda a: np.zeros((3, 3))),
    (add_then_floordiv, lambda a: np.floor((a + 0.05) / 0.5), lambda a: np.zeros((3, 3))),
    (add_then_slice_floordiv, lambda a: np.r_[2 * a[0] + 0.05, np.floor((a[1:] + 0.05) / 0.5)],
     lambda a: np.diag([2.0, 0.0, 0.0])),
    (view_floordiv, lambda a: np.r_[2 * a[0], np.floor(a[1:] / 0.5)],
     lambda a: np.diag([2.0, 0.0, 0.0])),
    (reshape_view_floordiv, lambda a: np.floor(a / 0.5), lambda a: np.zeros((3, 3))),
    (fractional_part, lambda a: 8.0 * (4 * a + 0.25 - np.floor(4 * a + 0.25)),
     lambda a: np.diag(np.full(3, 32.0))),
    (floordiv_by_x, lambda a: np.floor(5.0 / a), lambda a: np.zeros((3, 3))),
]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("f, want, hess", CASES, ids=[c[0].__name__ for c in CASES])
def test_inplace_mod_and_floordiv(route, f, want, hess):
    x = np.array([0.3, 0.55, 1.2]) if f is fractional_part else X
    with force_route(route):
        _check(f, x, want(x), hess(x))


# -- out= of a ufunc whose differentiated argument has a zero partial --------------------

def heaviside_out(a):
    b = a * 2.0
    np.heaviside(a, 0.5, out=b)
    return np.sum(b)


def copysign_out(a):
    b = a * 2.0
    np.copysign(1.5, a, out=b)
    return np.sum(b)


def heaviside_aliased(a):
    b = a.copy()
    np.heaviside(b, 0.5, out=b)
    return np.sum(b * a)


def heaviside_aliased_view(a):
    b = a.copy()
    v = b[1:]
    np.heaviside(v, 0.5, out=v)
    return np.sum(b * a)


def heaviside_out_slice(a):
    b = a * 3.0
    np.heaviside(a[:2], 0.5, out=b[:2])
    return np.sum(b)


ZERO_OUT = [
    (heaviside_out, lambda a: np.zeros(3)),
    (copysign_out, lambda a: np.zeros(3)),
    (heaviside_aliased, lambda a: np.heaviside(a, 0.5)),
    (heaviside_aliased_view, lambda a: np.r_[2 * a[0], np.heaviside(a[1:], 0.5)]),
    (heaviside_out_slice, lambda a: np.r_[0.0, 0.0, 3.0]),
]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("f, want", ZERO_OUT, ids=[c[0].__name__ for c in ZERO_OUT])
def test_out_given_a_zero_partial_forgets_its_old_tangent(route, f, want):
    x = np.array([0.3, 1.7, -2.6])
    with force_route(route):
        _check(f, x, want(x))
        assert np.allclose(derivative(f)(x), want(x) @ np.ones(3))


# -- np.nditer -------------------------------------------------------------------------------

def nditer_fill(a):
    b = np.zeros(3)
    with np.nditer(b, op_flags=["readwrite"]) as it:
        for k, v in enumerate(it):
            v[...] = a[k] ** 2
    return np.sum(b)


def nditer_iadd(a):
    b = np.zeros(3)
    with np.nditer(b, op_flags=["readwrite"]) as it:
        for k, v in enumerate(it):
            v += a[k] ** 2
    return np.sum(b)


def nditer_out(a):
    b = np.zeros(3)
    with np.nditer(b, op_flags=["readwrite"]) as it:
        for k, v in enumerate(it):
            np.multiply(a[k], a[k], out=v)
    return np.sum(b)


def nditer_buffered(a):
    b = np.zeros(3)
    with np.nditer(b, flags=["buffered"], op_flags=["readwrite"]) as it:
        for k, v in enumerate(it):
            v[...] = a[k] ** 2
    return np.sum(b)


def nditer_closure(a):
    b = np.zeros(3)
    with np.nditer([b, np.ones(3)], op_flags=[["readwrite"], ["readonly"]]) as it:
        for v, w in it:
            v[...] = a[0] * w
    return np.sum(b)


def nditer_two_operands(a):
    b = np.zeros(3)
    with np.nditer([b, a], op_flags=[["readwrite"], ["readonly"]]) as it:
        for v, w in it:
            v[...] = w * w
    return np.sum(b)


NDITER = [nditer_fill, nditer_iadd, nditer_out, nditer_buffered, nditer_closure,
          nditer_two_operands]
APIS = [
    pytest.param(lambda f, x: grad(f)(x), id="grad"),
    pytest.param(lambda f, x: value_and_grad(f)(x), id="value_and_grad"),
    pytest.param(lambda f, x: vjp(f, x)[1](1.0), id="vjp"),
    pytest.param(lambda f, x: jvp(f, (x,), (np.ones(3),)), id="jvp"),
    pytest.param(lambda f, x: jacfwd(f)(x), id="jacfwd"),
    pytest.param(lambda f, x: jacrev(f)(x), id="jacrev"),
    pytest.param(lambda f, x: hessian(f)(x), id="hessian"),
    pytest.param(lambda f, x: hvp(f, x, np.ones(3)), id="hvp"),
]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("f", NDITER, ids=[f.__name__ for f in NDITER])
def test_a_derivative_written_through_nditer_is_refused(route, api, f):
    x = np.array([0.3, 1.7, -2.6])
    assert np.isclose(f(x), np.sum(x ** 2) if f is not nditer_closure else 3 * x[0])
    with force_route(route), pytest.raises(MissingRuleError, match="numpy.nditer"):
        api(f, x)


def nditer_constants(a):  # only constants written through the iterator: followed
    b = np.zeros(3)
    with np.nditer(b, op_flags=["readwrite"]) as it:
        for k, v in enumerate(it):
            v[...] = k
    return np.sum(b * a)


@pytest.mark.parametrize("route", ROUTES)
def test_constants_written_through_nditer(route):
    x = np.array([0.3, 1.7, -2.6])
    with force_route(route):
        _check(nditer_constants, x, np.array([0.0, 1.0, 2.0]), np.zeros((3, 3)))
