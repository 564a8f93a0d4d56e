"""``hessian`` of a real scalar function of one float or float array takes the route on the
tape (hvp-tape): one recording, a sweep per column.  It gives what the reference
(``jacfwd(grad(f))``) gives -- values, shape, dtype, first and repeated calls -- and declines
to it for anything else (a vector output, has_aux, several argnums, a big argument)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from overdub_ad import explain, hessian
from overdub_ad.testing import REFERENCE, force_route
from tests.conftest import fd

# (about the fast route itself: that it runs, and gives what the reference gives)
pytestmark = pytest.mark.default_routes


def newton_implicit_euler(p):
    """Scalar code with loops and a Newton solve: the reference route's worst case."""
    a, b = p[0], p[1]
    y = 1.0
    for _ in range(8):
        z = y
        for _ in range(4):
            g = z - y - 0.05 * (-a * z ** 3 + b * math.sin(z))
            dg = 1 - 0.05 * (-3 * a * z ** 2 + b * math.cos(z))
            z = z - g / dg
        y = z
    return y


def scalar(x):
    return x * math.sin(x) + x ** 3


def arrays(x):
    return np.sum(np.tanh(x) ** 2) * np.sin(np.sum(x)) + np.prod(x)


def two_args(k, x, scale=1.0):
    return scale * k * np.sum(x ** 3) + np.sum(np.exp(k * x))


CASES = [
    (newton_implicit_euler, (np.array([0.7, 0.3]),), {}),
    (scalar, (0.7,), {}),
    (scalar, (np.float64(0.7),), {}),
    (scalar, (np.float32(0.7),), {}),
    (arrays, (np.array(0.4),), {}),
    (arrays, (np.array([0.3, -0.2, 0.5]),), {}),
    (arrays, (np.array([[0.3, 0.5], [0.1, 0.2]]),), {}),
    (arrays, (np.array([0.3, -0.2], np.float32),), {}),
]


@pytest.mark.parametrize("f, args, kwargs", CASES)
def test_the_route_on_the_tape_gives_the_reference_s_hessian(f, args, kwargs) -> None:
    with force_route(REFERENCE):
        want = hessian(f)(*args, **kwargs)
    h = hessian(f)
    for _ in range(3):  # first and repeated calls
        got = h(*args, **kwargs)
        assert type(got) is type(want) and got.dtype == want.dtype
        assert got.shape == want.shape
        tolerance = 1e-5 if want.dtype == np.float32 else 1e-10
        assert np.allclose(got, want, rtol=tolerance, atol=tolerance)
    assert explain(hessian, f, *args).ran[0] == "hvp-tape"
    x = np.asarray(args[0], dtype=float)
    assert np.allclose(np.asarray(got, float), fd(lambda y: fd(f, y, 1e-4), x, 1e-4),
                       rtol=1e-4, atol=1e-5)


def test_another_argnum_and_keywords_go_to_f() -> None:
    x = np.array([0.3, -0.4])
    h = hessian(two_args, argnums=1)
    with force_route(REFERENCE):
        want = hessian(two_args, argnums=1)(0.7, x, scale=2.0)
    assert np.allclose(h(0.7, x, scale=2.0), want, rtol=1e-12)
    assert explain(hessian, lambda x: two_args(0.7, x, scale=2.0), x).ran[0] == "hvp-tape"


@pytest.mark.parametrize("make, args", [
    (lambda: hessian(lambda x: np.sin(x) * x), (np.array([0.3, 0.5]),)),       # a vector output
    (lambda: hessian(lambda x, y: np.sum(x * y) ** 2, argnums=(0, 1)), (np.ones(2), np.ones(2))),
    (lambda: hessian(lambda x: (np.sum(x ** 3), "aux"), has_aux=True), (np.ones(2),)),
    (lambda: hessian(lambda x: np.sum(x ** 3)), (np.ones(65),)),                # 65 sweeps
    (lambda: hessian(lambda n: float(n) ** 3), (3,)),                           # an integer
])
def test_what_the_route_declines_the_reference_computes(make, args) -> None:
    h = make()
    with force_route(REFERENCE):
        want = make()(*args)
    for _ in range(2):
        got = h(*args)
        flat_got = got[0] if isinstance(got, tuple) and got[1] == "aux" else got
        flat_want = want[0] if isinstance(want, tuple) and want[1] == "aux" else want
        assert np.allclose(np.asarray(flat_got, float), np.asarray(flat_want, float))


def test_a_declined_tape_says_why() -> None:
    report = explain(hessian, lambda x: np.sin(x) * x, np.array([0.3, 0.5]))
    why = dict((r, why) for r, ran, why in report.decisions if not ran)["hvp-tape"]
    assert why.endswith(": not a real scalar output, or a constant one")
    assert report.ran[-1] == REFERENCE


def test_a_vector_output_is_recorded_once_per_argument_shape() -> None:
    calls = []

    def vector(x):
        calls.append(1)
        return np.sin(x) * x

    h = hessian(vector)
    x = np.array([0.3, 0.5])
    h(x)
    first = len(calls)
    h(x)
    assert len(calls) - first == first - 1  # the route's own recording is skipped now
