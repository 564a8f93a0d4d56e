"""Found from outside (helper H41): an object whose class defines ``__array__`` in Python, given
to a ufunc (``np.sin(obj)``, ``np.sin(np.poly1d(a))``), was converted by
NumPy's C code, which read the object's attributes natively: a derivative of 0 (forward mode),
or ValueError (reverse mode: ``__array__`` gave back a differentiated value NumPy did not know).
The conversion now runs through the context, as ``np.asarray(obj)`` already did."""

import contextlib

import numpy as np
import pytest

from overdub_ad import derivative, grad
from overdub_ad.testing import force_route


class Wrap:
    def __init__(self, c):
        self.c = c

    def __array__(self, dtype=None, copy=None):
        return self.c


A = np.array([0.3, 1.2])
CASES = {
    "ufunc": (lambda a: np.sum(np.sin(Wrap(a))), np.cos(A)),
    "ufunc_poly1d": (lambda a: np.sum(np.sin(np.poly1d(a))), np.cos(A)),
    "two_objects": (lambda a: np.sum(np.multiply(Wrap(a), Wrap(np.exp(a)))), (1 + A) * np.exp(A)),
}


def _fd(f, a, h=1e-6):
    return np.array([(f(a + h * e) - f(a - h * e)) / (2 * h) for e in np.eye(a.size)])


@pytest.mark.parametrize("route", [None, "reference"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_array_like_given_to_numpy_c_code(name, route):
    f, expected = CASES[name]
    assert np.allclose(_fd(f, A), expected, atol=1e-6)
    with force_route(route) if route else contextlib.nullcontext():
        for _ in range(2):  # first and repeated calls
            reverse = grad(f)(A)
            forward = np.array([derivative(lambda t, e=e: f(A + t * e), 0.0) for e in np.eye(2)])
            assert np.allclose(reverse, expected)
            assert np.allclose(forward, expected)
