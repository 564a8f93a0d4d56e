"""Writes into arrays that lost the derivative silently, found by the twelfth round of outside
testers, kept fixed in both modes.

- A ufunc given its output array positionally (``np.subtract(a[1:], a[:-1], r)``,
  ``np.sin(a, r)``, ``np.modf(x, r1, r2)``) wrote plain numbers into ``r``: the modes only
  looked at ``out=`` given by keyword.  ``np.ediff1d(a, to_begin=...)`` does this inside
  NumPy, and ``np.ediff1d(a, to_end=a[0])`` raised MissingRuleError for ``np.subtract``'s
  argument 2.  A ufunc's arguments past its inputs are its ``out=`` now, for both modes and
  every route; forward mode keeps the tangents of several output arrays (``modf``'s).
- ``z.real = v`` and ``z.imag = v`` set the part natively, without its derivative.  They are
  the element write ``z[...] = v + 1j * z.imag`` (``z.real + 1j * v``) they amount to now.
  ``z.real[:] = v`` (a write into a view of another dtype) raises MissingRuleError in forward
  mode (reverse mode said so already) instead of a zero.
- A differentiated value written into a structured (record) array or one of its fields gave
  0 in forward mode, an IndexError or an unrelated NotImplementedError in reverse mode: it
  raises MissingRuleError naming structured arrays in both.

Each derivative is checked against central finite differences and the other mode, first and
repeated calls, on every route.
"""

from __future__ import annotations

import numpy as np
import pytest

from overdub_ad import MissingRuleError, derivative, grad, jacfwd, jacrev
from overdub_ad.testing import ROUTES, force_route

pytestmark = pytest.mark.every_route

EVERY_ROUTE = [None, *ROUTES]
A = np.array([0.3, 1.2, -0.5])


def _central(f, x, h=1e-6):
    """Central differences of a scalar ``f`` at the 1-D array ``x``."""
    columns = []
    for i in range(np.size(x)):
        e = np.zeros_like(x)
        e[i] = h
        columns.append((f(x + e) - f(x - e)) / (2 * h))
    return np.array(columns)


def _check(f, x):
    want = _central(f, x)
    assert np.any(np.abs(want) > 1e-3)
    for _ in range(2):  # (first and repeated calls)
        np.testing.assert_allclose(grad(f)(x), want, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(jacrev(f)(x), want, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(jacfwd(f)(x), want, rtol=1e-6, atol=1e-9)


# -- a ufunc's out given positionally -------------------------------------------------------------

def _subtract_into(a):
    r = np.zeros(2)
    np.subtract(a[1:], a[:-1], r)
    return np.sum(r ** 2)


def _subtract_into_view(a):
    r = np.zeros(3)
    np.subtract(a[1:], a[:-1], r[1:])
    return np.sum(r ** 2)


def _sin_into(a):
    r = np.zeros(3)
    np.sin(a, r)
    return np.sum(r ** 2)


def _add_returned(a):
    r = np.zeros(3)
    return np.sum(np.add(a, a, r) * a)


def _modf_into(a):
    r1, r2 = np.zeros(3), np.zeros(3)
    np.modf(3 * a, r1, r2)
    return np.sum(r1 ** 2 + r2 * a)


def _modf_first_only(a):
    r1 = np.zeros(3)
    fractional, whole = np.modf(3 * a, r1)
    return np.sum(r1 ** 2 + whole * a)


def _overwritten_by_constant(a):
    r = a * 2.0
    r = r + 0.0  # (a differentiated array, then a constant written over it)
    np.sin(np.ones(3), r)
    return np.sum(r * a)


POSITIONAL_OUT = {
    "subtract": _subtract_into,
    "subtract into a view": _subtract_into_view,
    "sin": _sin_into,
    "add, its result": _add_returned,
    "modf": _modf_into,
    "modf, one out": _modf_first_only,
    "a constant written": _overwritten_by_constant,
    "ediff1d to_begin": lambda a: np.sum(np.ediff1d(a, to_begin=0.5) ** 2),
    "ediff1d to_end": lambda a: np.sum(np.ediff1d(a, to_end=a[0]) ** 2),
}


@pytest.mark.parametrize("route", EVERY_ROUTE)
@pytest.mark.parametrize("name", POSITIONAL_OUT)
def test_a_ufunc_writes_its_positional_out_with_the_derivative(name, route):
    with force_route(route):
        _check(POSITIONAL_OUT[name], A)


# -- z.real = v, z.imag = v ----------------------------------------------------------------------

def _set_real(a):
    z = np.zeros(3, dtype=complex)
    z.real = a ** 2
    return np.sum(z * z).real


def _set_imag(a):
    z = np.ones(3, dtype=complex)
    z.imag = a ** 2
    return np.sum(z * z).real


def _set_real_of_differentiated(a):
    z = a * (1 + 2j)
    z.real = 3 * a
    return np.sum(z * z).real


def _set_imag_constant(a):
    z = a * (1 + 2j)
    z.imag = 1.0  # (the imaginary part's derivative is gone)
    return np.sum(z * z).real


def _set_real_of_floats(a):
    z = np.zeros(3)
    z.real = a ** 2
    return np.sum(z * a)


PARTS = {"real": _set_real, "imag": _set_imag, "real of x": _set_real_of_differentiated,
         "imag constant": _set_imag_constant, "real of floats": _set_real_of_floats}


@pytest.mark.parametrize("route", EVERY_ROUTE)
@pytest.mark.parametrize("name", PARTS)
def test_setting_a_part_of_an_array_is_the_write_it_amounts_to(name, route):
    with force_route(route):
        _check(PARTS[name], A)


def _real_view_written(a):
    z = np.zeros(3, dtype=complex)
    z.real[:] = a ** 2
    return np.sum(z).real


@pytest.mark.parametrize("route", EVERY_ROUTE)
def test_a_write_into_a_real_view_is_refused_in_forward_mode(route):
    with force_route(route):
        for _ in range(2):
            with pytest.raises(MissingRuleError, match="view of dtype float64"):
                jacfwd(_real_view_written)(A)
            with pytest.raises(NotImplementedError, match="view of dtype float64"):
                grad(_real_view_written)(A)


def test_a_real_array_has_no_imaginary_part_to_set():
    def f(a):
        z = np.zeros(3)
        z.imag = a
        return np.sum(z)
    for api in (grad(f), jacfwd(f)):
        with pytest.raises(TypeError, match="imaginary part"):
            api(A)


# -- structured arrays ---------------------------------------------------------------------------

def _field_written(a):
    s = np.zeros(3, dtype=[("x", float), ("n", int)])
    s["x"] = a ** 2
    return np.sum(s["x"])


def _record_array(a):
    return np.sum(np.rec.fromarrays([a, 2 * a]).f1)


@pytest.mark.parametrize("route", EVERY_ROUTE)
@pytest.mark.parametrize("f", [_field_written, _record_array], ids=["field", "record"])
def test_a_derivative_written_into_a_structured_array_is_refused(f, route):
    with force_route(route):
        for _ in range(2):
            for api in (grad(f), jacfwd(f), jacrev(f), lambda a: derivative(
                    lambda t: f(a * t), 1.0)):
                with pytest.raises(MissingRuleError, match="structured"):
                    api(A)


def test_a_structured_array_of_constants_still_runs():
    def f(a):
        s = np.zeros(3, dtype=[("x", float), ("n", int)])
        s["x"] = [1.0, 2.0, 3.0]
        return np.sum(s["x"] * a ** 2)
    _check(f, A)
