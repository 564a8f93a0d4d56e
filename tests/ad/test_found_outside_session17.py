"""Found from outside (session 16's testers and this session's) and fixed in session 17.

1. (H120) An array method that is a ufunc -- ``a.conj(w)``, ``a.conjugate(w)``,
   ``np.ndarray.conj(a, w)``, which take their output array by position only -- wrote it
   natively in both modes: 0 for every term through ``w``.  Such a call is the ufunc's
   (``np.conjugate(a, out=w)``) now.
"""

from __future__ import annotations

import numpy as np
import pytest

from overdub_ad import derivative, grad, jvp
from overdub_ad.testing import REFERENCE, force_route

pytestmark = pytest.mark.every_route

ROUTES = pytest.mark.parametrize("route", [None, REFERENCE], ids=["default", "reference"])


# -- 1. a ufunc's array method given its out by position ---------------------------------------

def _bound_conj(p):
    w = np.zeros(3)
    p.conj(w)
    return (w * w).sum()


def _unbound_conjugate(p):
    w = np.zeros(3)
    np.ndarray.conjugate(p, w)
    return (w * p).sum()


def _complex_conj(p):
    z = p * (1.0 + 2.0j)
    w = np.zeros(3, complex)
    z.conj(w)
    return (w * w).real.sum()  # (conj(z)^2 = p^2 (1 - 2j)^2: real part -3 p^2)


@ROUTES
@pytest.mark.parametrize("f, slope", [(_bound_conj, lambda p: 2 * p),
                                      (_unbound_conjugate, lambda p: 2 * p),
                                      (_complex_conj, lambda p: -6 * p)])
def test_ufunc_method_with_positional_out(route, f, slope):
    p = np.array([1.0, 2.0, 3.0])
    with force_route(route):
        for _ in range(3):
            np.testing.assert_allclose(grad(f)(p), slope(p))
            _, tangent = jvp(f, (p,), (np.ones(3),))
            np.testing.assert_allclose(tangent, slope(p).sum())
            np.testing.assert_allclose(derivative(lambda t: f(p * t))(1.0),
                                       (slope(p) * p).sum())
