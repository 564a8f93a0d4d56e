"""``has_aux=True`` on ``jacrev`` and ``vjp`` as on ``grad`` (JAX's API): ``f`` returns
``(output, aux)``; the auxiliary data comes back as computed, plain, and is not differentiated."""

import numpy as np
import pytest

import overdub_ad as ad

W = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])


def f(x):
    y = np.tanh(W @ x)
    return y, {"norm": np.sum(y ** 2), "steps": 3, "hidden": y * 2.0}


def test_jacrev_with_aux():
    x = np.array([0.3, -0.2, 0.5])
    for _ in range(2):
        jac, aux = ad.jacrev(f, has_aux=True)(x)
        np.testing.assert_allclose(jac, ad.jacrev(lambda x: f(x)[0])(x), rtol=1e-14)
        np.testing.assert_allclose(jac, ad.jacfwd(lambda x: f(x)[0])(x), rtol=1e-12)
        want = f(x)[1]
        assert aux["steps"] == 3 and type(aux["norm"]) is type(want["norm"])
        np.testing.assert_allclose(aux["norm"], want["norm"], rtol=1e-15)
        assert type(aux["hidden"]) is np.ndarray
        np.testing.assert_allclose(aux["hidden"], want["hidden"], rtol=1e-15)


def test_vjp_with_aux():
    x = np.array([0.3, -0.2, 0.5])
    ct = np.array([1.0, -2.0])
    out, pullback, aux = ad.vjp(f, x, has_aux=True)
    np.testing.assert_allclose(out, f(x)[0], rtol=1e-15)
    assert aux["steps"] == 3 and type(aux["hidden"]) is np.ndarray
    want = ad.vjp(lambda x: f(x)[0], x)[1](ct)[0]
    for _ in range(2):
        np.testing.assert_allclose(pullback(ct)[0], want, rtol=1e-14)


def test_aux_under_an_outer_derivative_carries_the_outer_tangent():
    """The auxiliary data is not differentiated by the inner transform, but an enclosing one
    sees it: d/ds of the aux ``s * x[0]`` through jacrev's aux is ``x[0]``."""
    def g(s):
        jac, aux = ad.jacrev(lambda x: (x * s, s * x[0]), has_aux=True)(np.array([2.0, 3.0]))
        return aux + np.sum(jac)
    assert ad.derivative(g, 1.5) == pytest.approx(2.0 + 2.0)
    assert ad.grad(g)(1.5) == pytest.approx(4.0)


@pytest.mark.parametrize("api", ["jacrev", "vjp"])
def test_has_aux_needs_a_pair(api):
    x = np.ones(2)
    with pytest.raises(TypeError, match=f"{api}\\(has_aux=True\\): f must return a pair"):
        if api == "jacrev":
            ad.jacrev(lambda x: x * 2.0, has_aux=True)(x)
        else:
            ad.vjp(lambda x: x * 2.0, x, has_aux=True)
