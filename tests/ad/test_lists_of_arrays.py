"""A list of arrays of one shape given to a NumPy function is one array to NumPy, and to the
derivative rules in both modes (``np.square([x, x ** 2])``, ``np.prod([x, 2 * x])``): reverse
mode gave the rules the list itself, which a rule's arithmetic or ``np.result_type`` misread
(TypeError) -- the same call on ``np.array([...])`` of the same values is the reference."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from overdub_ad import jacfwd, jacrev
from overdub_ad.testing import REFERENCE, force_route
from tests.conftest import fd

# (each test compares the routes itself: nothing for CI's reference-route pass to add)
pytestmark = pytest.mark.every_route

X = np.array([0.3, 0.5, 0.7])

CALLS = {
    "square": np.square, "log1p": np.log1p, "sqrt": np.sqrt, "cbrt": np.cbrt,
    "prod": np.prod, "prod_axis0": lambda a: np.prod(a, axis=0),
    "cumprod": np.cumprod, "var": np.var, "std": lambda a: np.std(a, axis=1),
    "median": np.median, "ptp": np.ptp, "norm": np.linalg.norm,
    "trace": lambda a: np.trace(np.concatenate([a, a[:1]])),
    "einsum": lambda a: np.einsum("ij,ij->i", a, a),
    "tensordot": lambda a: np.tensordot(a, a, axes=2),
    "clip": lambda a: np.clip(a, 0.35, 1.2), "percentile": lambda a: np.percentile(a, 30),
}


def _total(out):
    return np.sum(out)


@pytest.mark.parametrize("route", [None, REFERENCE], ids=["default", "reference"])
@pytest.mark.parametrize("api", [jacfwd, jacrev], ids=["jacfwd", "jacrev"])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_list_of_arrays_is_the_array_it_stacks_to(name, api, route) -> None:
    fn = CALLS[name]
    as_list = lambda x: _total(fn([x, x ** 2]))  # noqa: E731
    as_array = lambda x: _total(fn(np.array([x, x ** 2])))  # noqa: E731
    with force_route(route) if route else contextlib.nullcontext():
        for _ in range(3):  # first and repeated calls
            got = api(as_list)(X)
            assert np.allclose(got, api(as_array)(X), rtol=1e-10, atol=1e-12)
            assert np.allclose(got, fd(as_list, X), rtol=1e-5, atol=1e-7)


def test_a_sequence_function_keeps_the_list_as_its_operands() -> None:
    def f(x):
        return np.sum(np.concatenate([x, x ** 2]) * np.arange(6.0))
    want = np.arange(3.0) + 2 * X * np.arange(3.0, 6.0)
    assert np.allclose(jacrev(f)(X), want) and np.allclose(jacfwd(f)(X), want)
