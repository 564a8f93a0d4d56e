"""np.linalg.qr of a wide matrix (m < n: reduced, complete and 'r' modes), as JAX
differentiates it: [X | Y] with X square, Q R_X = X, R_Y = Q^H Y.  It raised
NotImplementedError; tall and square matrices keep their rules.  Checked against finite
differences in both modes, batched, complex, and to second order."""

from __future__ import annotations

import numpy as np
import pytest

from overdub_ad import grad, hessian, jacfwd, jacrev
from tests.conftest import fd

RNG = np.random.default_rng(0)


def _loss(mode):
    def f(a):
        out = np.linalg.qr(a, mode=mode)
        if mode == "r":
            return out * np.arange(out.size).reshape(out.shape)
        q, r = out
        return np.sum(q * np.cos(np.arange(q.size)).reshape(q.shape)) + np.sum(r ** 2 * 0.3)
    return f


@pytest.mark.parametrize("shape", [(3, 4), (2, 5), (3, 3), (4, 3), (2, 3, 4)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_of_every_shape_against_finite_differences(shape, mode) -> None:
    if mode == "complete" and shape[-2] > shape[-1]:
        pytest.skip("complete QR of a tall matrix: refused (see the next test)")
    a = RNG.normal(size=shape)
    f = _loss(mode)
    want = fd(f, a)
    assert np.allclose(jacfwd(f)(a), want, atol=1e-6)
    assert np.allclose(jacrev(f)(a), want, atol=1e-6)


def test_complete_qr_of_a_tall_matrix_still_says_it_has_no_rule() -> None:
    with pytest.raises(NotImplementedError, match="complete where m <= n"):
        jacrev(_loss("complete"))(RNG.normal(size=(4, 3)))


def test_wide_qr_complex_and_second_order() -> None:
    a = RNG.normal(size=(2, 4)) + 1j * RNG.normal(size=(2, 4))

    def g(ar, ai):
        q, r = np.linalg.qr(ar + 1j * ai)
        weights = np.arange(4).reshape(2, 2)
        return np.real(np.sum(np.abs(q * weights) ** 2 + np.abs(r[:, 2:]) ** 2 * (1 + weights)
                              + np.real(r[:, :2]) ** 3))

    ar, ai = np.real(a), np.imag(a)
    g_ar, g_ai = grad(g, (0, 1))(ar, ai)
    assert np.allclose(g_ar, fd(lambda z: g(z, ai), ar), atol=1e-6)
    assert np.allclose(g_ai, fd(lambda z: g(ar, z), ai), atol=1e-6)
    assert np.allclose(jacfwd(g, 1)(ar, ai), fd(lambda z: g(ar, z), ai), atol=1e-6)
    real = lambda x: np.sum(np.linalg.qr(x)[1] ** 3) + np.sum(np.linalg.qr(x)[0][0])  # noqa: E731
    x = RNG.normal(size=(2, 3))
    assert np.allclose(hessian(real)(x), fd(jacrev(real), x, 1e-5), rtol=1e-4, atol=1e-5)
