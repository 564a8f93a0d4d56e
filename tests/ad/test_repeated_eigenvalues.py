"""eigh, eig and svd at repeated eigen- or singular values, with only the values used: the
derivative exists (the values' sum of squares is ||a||_F^2 here), and reverse mode gave nan
(the vectors' zero cotangent times an infinite gap); forward mode gave it with RuntimeWarnings.
Where the vectors are used the derivative does not exist, and stays non-finite (never a
silently finite number), as in JAX -- even where the cotangent's projection happens to be zero
at the tie."""

from __future__ import annotations

import contextlib
import warnings

import numpy as np
import pytest

from overdub_ad import grad, jacfwd, jacrev, jvp, vjp
from overdub_ad.testing import REFERENCE, force_route

A = 2.0 * np.eye(3)

VALUES_ONLY = {
    "eigh": lambda a: np.sum(np.linalg.eigh(a)[0] ** 2),
    "eigh_cubes": lambda a: np.sum(np.linalg.eigh(a)[0] ** 3),
    "eig": lambda a: np.real(np.sum(np.linalg.eig(a)[0] ** 2)),
    "svd": lambda a: np.sum(np.linalg.svd(a, full_matrices=False)[1] ** 2),
    "svd_square_full": lambda a: np.sum(np.linalg.svd(a)[1] ** 2),
}
# d/da of each at A (a multiple of the identity): 2a, 3 a^2 (lower triangle for eigh), 2a, 2a
WANT = {"eigh": 2 * A, "eigh_cubes": 3 * A @ A, "eig": 2 * A, "svd": 2 * A,
        "svd_square_full": 2 * A}


@pytest.mark.parametrize("name", sorted(VALUES_ONLY))
def test_only_the_values_used_have_a_derivative_at_a_repeated_value(name) -> None:
    f = VALUES_ONLY[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning from the rules either
        for _ in range(2):
            assert np.allclose(grad(f)(A), WANT[name])
            assert np.allclose(jacrev(f)(A), WANT[name])
            assert np.allclose(jacfwd(f)(A), WANT[name])
            direction = np.arange(9.0).reshape(3, 3) / 10
            assert np.isclose(jvp(f, (A,), (direction,))[1], np.sum(WANT[name] * direction))
            assert np.allclose(vjp(f, A)[1](1.0)[0], WANT[name])


VECTORS = {
    "eigh_weighted": lambda a: np.sum(np.linalg.eigh(a)[1] * np.arange(9.0).reshape(3, 3)),
    # the cotangent's projection is zero exactly where the values tie (found from outside:
    # a finite gradient of zeros came back, where finite differences blow up)
    "eigh_cubes": lambda a: np.sum(np.linalg.eigh(a)[1] ** 3),
    "eig_cubes": lambda a: np.real(np.sum(np.linalg.eig(a)[1] ** 3)),
    "svd_u_cubes": lambda a: np.sum(np.linalg.svd(a)[0] ** 3),
    "svd_vh_cubes": lambda a: np.sum(np.linalg.svd(a, full_matrices=False)[2] ** 3),
}


@pytest.mark.parametrize("route", [None, REFERENCE], ids=["default", "reference"])
@pytest.mark.parametrize("name", sorted(VECTORS))
def test_the_vectors_at_a_repeated_value_have_no_derivative(name, route) -> None:
    f = VECTORS[name]
    at = np.diag([2.0, 2.0, 5.0])
    e = np.zeros((3, 3))
    e[1, 0] = e[0, 1] = 1e-7
    assert abs(f(at + e) - f(at)) / 1e-7 > 1e4  # no derivative: a jump
    with force_route(route) if route else contextlib.nullcontext(), \
            np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert not np.all(np.isfinite(grad(f)(at)))
        assert not np.all(np.isfinite(jacrev(f)(at)))
        assert not np.all(np.isfinite(jacfwd(f)(at)))


def test_distinct_values_are_unchanged() -> None:
    a = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, 0.2], [0.1, 0.2, 3.0]])
    f = lambda a: np.sum(np.linalg.eigh(a)[1][:, 0] ** 3) + np.sum(np.linalg.svd(a)[0][0])  # noqa: E731
    from tests.conftest import fd
    assert np.allclose(jacrev(f)(a), fd(f, a), rtol=1e-5, atol=1e-7)
    assert np.allclose(jacfwd(f)(a), fd(f, a), rtol=1e-5, atol=1e-7)
