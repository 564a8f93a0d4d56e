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


def test_jvp_and_jacfwd_with_aux():
    """Forward mode takes ``has_aux`` too (it raised TypeError): ``jvp`` returns ``(output,
    tangent, aux)``, ``jacfwd`` ``(jacobian, aux)``; aux as computed, not differentiated, and
    ``f`` runs once per forward pass (one pass here)."""
    x, v = np.array([0.3, -0.2, 0.5]), np.array([1.0, 0.5, -2.0])
    calls = []

    def counted(x):
        calls.append(1)
        return f(x)
    for _ in range(2):
        calls.clear()
        out, tangent, aux = ad.jvp(counted, (x,), (v,), has_aux=True)
        assert len(calls) == 1
        np.testing.assert_allclose(out, f(x)[0], rtol=1e-15)
        np.testing.assert_allclose(tangent, ad.jacrev(lambda x: f(x)[0])(x) @ v, rtol=1e-12)
        assert aux["steps"] == 3 and type(aux["hidden"]) is np.ndarray
        np.testing.assert_allclose(aux["hidden"], f(x)[1]["hidden"], rtol=1e-15)
        calls.clear()
        jac, aux = ad.jacfwd(counted, has_aux=True)(x)
        assert len(calls) == 1
        np.testing.assert_allclose(jac, ad.jacrev(lambda x: f(x)[0])(x), rtol=1e-12)
        np.testing.assert_allclose(aux["norm"], f(x)[1]["norm"], rtol=1e-15)


def test_jacfwd_and_hessian_with_aux_several_arguments():
    def g(x, y):
        return np.sum(x ** 2 * y), ("label", x * y)
    x, y = np.array([1.0, 2.0]), np.array([0.5, -1.0])
    (jx, jy), aux = ad.jacfwd(g, argnums=(0, 1), has_aux=True)(x, y)
    np.testing.assert_allclose(jx, 2 * x * y)
    np.testing.assert_allclose(jy, x ** 2)
    assert aux[0] == "label"
    np.testing.assert_allclose(aux[1], x * y)
    h, aux = ad.hessian(g, has_aux=True)(x, y)
    np.testing.assert_allclose(h, np.diag(2 * y))
    np.testing.assert_allclose(aux[1], x * y)
    # nested: the outer derivative differentiates through the inner jvp's tangent, not its aux
    grad_of_tangent = ad.grad(lambda x: ad.jvp(lambda x: g(x, y), (x,), (y,), has_aux=True)[1])
    np.testing.assert_allclose(grad_of_tangent(x), 2 * y * y)


@pytest.mark.parametrize("api", ["jvp", "jacfwd", "hessian"])
def test_forward_aux_needs_a_pair(api):
    call = {"jvp": lambda: ad.jvp(np.sin, (1.0,), (1.0,), has_aux=True),
            "jacfwd": lambda: ad.jacfwd(np.sin, has_aux=True)(1.0),
            "hessian": lambda: ad.hessian(np.sin, has_aux=True)(1.0)}[api]
    with pytest.raises(TypeError, match=r"has_aux=True\)?: f must return a pair"):
        call()
