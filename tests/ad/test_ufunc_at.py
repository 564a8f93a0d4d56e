"""``ufunc.at`` for every ufunc, not only ``add``/``subtract``: ``np.multiply.at``,
``np.maximum.at``, ``np.divide.at``, ``np.power.at`` and unary ``np.negative.at`` are applied
index by index (a repeated index twice), and differentiated as those element reads, ufunc
calls and writes, in both modes and on every route (they raised MissingRuleError, and the
forward-mode message named reverse mode)."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from overdub_ad import hessian, jacfwd, jacrev, jvp, value_and_grad
from overdub_ad.testing import REFERENCE, force_route
from tests.conftest import fd

# (each test compares the routes itself: nothing for CI's reference-route pass to add)
pytestmark = pytest.mark.every_route

X = np.array([0.5, 2.0, 3.0])


def multiply_repeated(x):
    u = np.ones(3)
    np.multiply.at(u, [0, 1, 1], x)
    return u * np.arange(1.0, 4.0)


def maximum_from_a_scalar(x):
    u = x.copy()
    np.maximum.at(u, [0, 2, 2], np.array([1.0, 2.5, 0.1]) * x[1])
    return u


def rows_and_unary(x):
    u = np.ones((2, 3))
    np.multiply.at(u, (0, slice(None)), x)
    np.negative.at(u, [1])
    np.divide.at(u, (1, [0, 0]), x[0])
    return u


def power_twice(x):
    u = x ** 2
    np.power.at(u, [0, 0], 1.5)
    return u


CASES = [multiply_repeated, maximum_from_a_scalar, rows_and_unary, power_twice]


@pytest.mark.parametrize("route", [None, REFERENCE], ids=["default", "reference"])
@pytest.mark.parametrize("f", CASES)
def test_ufunc_at_differentiates_index_by_index(f, route) -> None:
    want = fd(f, X)
    total = lambda x: np.sum(f(x) ** 2)  # noqa: E731
    with force_route(route) if route else contextlib.nullcontext():
        for _ in range(3):
            assert np.allclose(jacfwd(f)(X), want, rtol=1e-6, atol=1e-8)
            assert np.allclose(jacrev(f)(X), want, rtol=1e-6, atol=1e-8)
            value, _ = value_and_grad(total)(X)
            assert value == total(X)  # the primal as NumPy's own ufunc.at computes it
            assert np.allclose(jvp(f, (X,), (np.ones(3),))[1], want @ np.ones(3), rtol=1e-6)
            assert np.allclose(hessian(total)(X), fd(jacrev(total), X), rtol=1e-5, atol=1e-6)


def test_a_binary_ufunc_without_its_operand_is_numpy_s_error() -> None:
    def f(x):
        u = x.copy()
        np.multiply.at(u, [0])
        return u

    with pytest.raises(ValueError, match="second operand needed for ufunc"):
        f(X)
    with pytest.raises(ValueError, match="second operand needed for ufunc"):
        jacrev(f)(X)
