"""NumPy's creation functions written in Python (np.ones, np.full, np.eye, np.identity,
np.linspace) inside a derivative inside ArrayBackendContext: the derivative's context calls them
whole, so the enclosing context swaps them as the user wrote them (before, the derivative
recursed into NumPy's body, whose ``copyto`` into ``np.empty`` has no counterpart elsewhere)."""

from __future__ import annotations

import numpy as np
import pytest

from overdub import overdub
from overdub_ad import grad, hessian, jacfwd, jvp
from overdub_gpu import ArrayBackendContext, to_device, to_host

xps = pytest.importorskip("array_api_strict")


def _namespaces() -> list[object]:
    found = [xps]
    try:
        import dask.array as da  # noqa: PLC0415 (the dask extra)
    except ImportError:
        return found
    return [*found, da]


def _built(x):
    """Each creation function, given only numbers, shapes and dtypes, times the input."""
    return np.sum(np.ones(3) * x + np.full(3, 2.0) * x ** 2 + np.eye(3)[0, :] * x
                  + np.linspace(0.0, 1.0, 3) * x + np.identity(2)[1, 1] * x
                  + np.ones((2, 3), dtype=np.float64)[1, :] * x ** 3
                  + np.full((3,), 0.5, np.float64) * np.sin(x))


def _like(x):
    """ones_like / full_like are given the differentiated value: still differentiated."""
    return np.sum(np.ones_like(x) * x + np.full_like(x, 3.0) * x ** 2)


APIS = {
    "grad": lambda f: grad(f),
    "jvp": lambda f: (lambda x: jvp(f, (x,), (x * 0 + 1.0,))[1]),
    "jacfwd": lambda f: jacfwd(f),
    "hessian": lambda f: hessian(f),
}


@pytest.mark.parametrize("api", sorted(APIS))
@pytest.mark.parametrize("f", [_built, _like], ids=["inert", "like"])
@pytest.mark.parametrize("xp", _namespaces(), ids=lambda m: m.__name__)
def test_creation_functions_under_a_derivative_match_numpy(xp, f, api) -> None:
    x = np.array(1.5)
    want = APIS[api](f)(x)
    ctx = ArrayBackendContext(xp)
    for _ in range(3):  # first and repeated calls
        got = to_host(ctx, overdub(ctx, APIS[api](f), *to_device(ctx, (x,))))
        assert np.asarray(got).shape == np.asarray(want).shape
        assert np.allclose(np.asarray(got, dtype=float), want, rtol=1e-12)


def test_the_numpy_run_is_the_derivative_by_hand() -> None:
    x = 1.5
    by_hand = 3 + 12 * x + 1 + 1.5 + 3 + 9 * x ** 2 + 1.5 * np.cos(x)  # (3 elements each)
    assert grad(_built)(x) == pytest.approx(by_hand, rel=1e-12)
    assert jvp(_built, (x,), (1.0,))[1] == pytest.approx(by_hand, rel=1e-12)
