"""float32 in, float32 out: every API keeps the input's precision, as JAX does, first and second
derivatives alike (forward-mode tangents are kept in their value's precision), and the values
agree with the float64 ones."""

from __future__ import annotations

import numpy as np
import pytest

from overdub_ad import grad, hessian, hvp, jacfwd, jacrev, jvp

W = np.array([[1, 2, 0], [0.5, -1, 1], [0, 0, 2]], dtype=np.float32)
X = np.array([0.5, -0.3, 0.8], dtype=np.float32)
V = np.ones(3, np.float32)

FUNCTIONS = {
    "sum": lambda x: np.sum(x ** 3), "mean": lambda x: np.mean(x ** 3),
    "max": lambda x: np.max(x ** 3), "min": lambda x: np.min(np.sin(x)),
    "prod": lambda x: np.prod(x + 2), "std": lambda x: np.std(x), "var": lambda x: np.var(x),
    "norm": lambda x: np.linalg.norm(x), "matmul": lambda x: np.sum((W @ x) ** 2),
    "logsumexp": lambda x: np.log(np.sum(np.exp(x))), "sort": lambda x: np.sort(x)[0] * 2,
    "cumsum": lambda x: np.sum(np.cumsum(x) ** 2),
    "where": lambda x: np.sum(np.where(x > 0, x ** 2, -x)),
    "solve": lambda x: np.sum(np.linalg.solve(W + 3 * np.eye(3, dtype=np.float32), x) ** 2),
    "clip": lambda x: np.sum(np.clip(x, -0.2, 0.6) ** 2), "abs": lambda x: np.sum(np.abs(x) ** 3),
    "index": lambda x: x[0] * x[2] + x[1] ** 2, "sqrt": lambda x: np.sum(np.sqrt(x * x + 1)),
    "maximum": lambda x: np.sum(np.maximum(x, 0.1) ** 2), "dot": lambda x: np.dot(x, x) * 3,
    "einsum": lambda x: np.einsum("i,ij,j", x, W, x), "tanh": lambda x: np.sum(np.tanh(x)) * 2.0,
    "median": lambda x: np.median(x ** 3), "det": lambda x: np.linalg.det(W + np.outer(x, x)),
}
FIRST_ORDER = {
    "grad": lambda f: grad(f)(X.copy()), "jacfwd": lambda f: jacfwd(f)(X.copy()),
    "jacrev": lambda f: jacrev(f)(X.copy()), "jvp": lambda f: jvp(f, (X.copy(),), (V,))[1],
}
@pytest.mark.parametrize("api", list(FIRST_ORDER))
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_first_derivatives_and_tangents_keep_float32(name, api):
    result = np.asarray(FIRST_ORDER[api](FUNCTIONS[name]))
    assert result.dtype == np.float32, (name, api, result.dtype)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_second_derivatives_keep_float32(name):
    f = FUNCTIONS[name]
    want = hessian(f)(X.astype(np.float64))
    for h in (hessian(f)(X.copy()), jacfwd(jacrev(f))(X.copy()), jacrev(jacrev(f))(X.copy()),
              jacfwd(jacfwd(f))(X.copy())):
        assert np.asarray(h).dtype == np.float32, name
        np.testing.assert_allclose(h, want, rtol=2e-4, atol=2e-4)
    hv = hvp(f, X.copy(), V)
    assert hv.dtype == np.float32, name
    np.testing.assert_allclose(hv, want @ V, rtol=2e-4, atol=2e-4)
