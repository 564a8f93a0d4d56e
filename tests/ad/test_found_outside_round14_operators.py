"""An array times a user object that NumPy's operators give way to (``__array_ufunc__ = None``
or a higher ``__array_priority__``): Python calls the object's reflected method, which the
engines must run as the user's code; they took the operator as their own, NumPy ran the
method natively, and the derivative was a silent 0 on every route (found from outside)."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from overdub_ad import derivative, grad, jacfwd, jacrev, jvp
from overdub_ad.testing import REFERENCE, force_route
from tests.conftest import fd

# (each test compares the routes itself: nothing for CI's reference-route pass to add)
pytestmark = pytest.mark.every_route


class Money:
    __array_ufunc__ = None  # NumPy gives way: a * m is Money.__rmul__(m, a)

    def __init__(self, v):
        self.v = v

    def __rmul__(self, k):
        return Money(k * self.v)

    def __radd__(self, k):
        return Money(k + 2.0 * self.v)


class Prioritised:
    __array_priority__ = 1000.0  # the legacy way to the same

    def __init__(self, v):
        self.v = v

    def __rmul__(self, k):
        return Prioritised(np.sin(k) * self.v)


CASES = {
    "ufunc_none_mul": lambda a: np.sum((a * Money(1.5)).v),
    "ufunc_none_add": lambda a: np.sum((a + Money(1.5)).v ** 2),
    "priority_mul": lambda a: np.sum((a * Prioritised(2.0)).v),
}


@pytest.mark.parametrize("route", [None, REFERENCE], ids=["default", "reference"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_object_s_reflected_method_is_differentiated(name, route) -> None:
    f = CASES[name]
    a = np.array([1.0, 2.0])
    want = fd(f, a)
    with force_route(route) if route else contextlib.nullcontext():
        for _ in range(3):
            assert np.allclose(grad(f)(a), want, rtol=1e-6)
            assert np.allclose(jacrev(f)(a), want, rtol=1e-6)
            assert np.allclose(jacfwd(f)(a), want, rtol=1e-6)
            assert np.isclose(jvp(f, (a,), (np.ones(2),))[1], np.sum(want), rtol=1e-6)
            assert np.isclose(derivative(f, a), np.sum(want), rtol=1e-6)
