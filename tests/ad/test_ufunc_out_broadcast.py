"""A ufunc given an ``out=`` array larger than its operands broadcast (NumPy broadcasts the
result into it): ``np.sin(x[0], out=a[1:2])`` writes a number into one element,
``np.exp(x, out=rows)`` a row into each.  Forward mode gave the rules the written array as the
output (a shape error) and wrote the tangent unbroadcast; every mode and route agrees now."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from overdub_ad import hessian, hvp, jacfwd, jacrev, jvp
from overdub_ad.testing import REFERENCE, force_route
from tests.conftest import fd

# (each test compares the routes itself: nothing for CI's reference-route pass to add)
pytestmark = pytest.mark.every_route

X = np.array([0.3, 0.5, 0.7])


def one_element(x):
    a = np.zeros(3)
    np.sin(x[0] * 1.0, out=a[1:2])
    np.multiply(x[1:2], x[2], out=a[2:])
    np.add(x[0], 1.0, a[0:1])  # out given positionally
    return a * a


def into_rows(x):
    rows = np.zeros((2, 3))
    np.exp(x, out=rows)
    np.multiply(rows, x[:, None][0], out=rows)
    return rows ** 2


def two_outputs_into_rows(x):
    fraction, whole = np.zeros((2, 3)), np.zeros((2, 3))
    np.modf(x * 3.3, fraction, whole)  # found from outside: a reshape error in forward mode
    return fraction * x + whole


@pytest.mark.parametrize("route", [None, REFERENCE], ids=["default", "reference"])
@pytest.mark.parametrize("f", [one_element, into_rows, two_outputs_into_rows])
def test_out_broadcast_by_every_mode(f, route) -> None:
    want = fd(f, X)
    v = np.array([1.0, -2.0, 0.5])
    with force_route(route) if route else contextlib.nullcontext():
        for _ in range(3):  # first and repeated calls
            assert np.allclose(jacfwd(f)(X), want, rtol=1e-6, atol=1e-8)
            assert np.allclose(jacrev(f)(X), want, rtol=1e-6, atol=1e-8)
            assert np.allclose(jvp(f, (X,), (v,))[1], want @ v, rtol=1e-6, atol=1e-8)
            total = lambda x: np.sum(f(x))  # noqa: E731
            h = fd(jacrev(total), X)
            assert np.allclose(hessian(total)(X), h, rtol=1e-5, atol=1e-7)
            assert np.allclose(hvp(total, X, v), h @ v, rtol=1e-5, atol=1e-7)
