"""overdub_ad inside overdub_gpu: derivatives of NumPy code, computed in another array namespace.

``array_api_strict`` stands in for a GPU: it refuses NumPy arrays, so a derivative rule that
computed on the host would fail there or hand back a NumPy array, which the tests look for.
Dask stands in for the namespaces spelled the NumPy way (CuPy's swap table works like Dask's),
and the CuPy table is checked against every NumPy function these derivatives call.  Functions
under test live in this file: overdub rewrites functions from source.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from overdub import overdub
from overdub_ad import (MissingRuleError, derivative, grad, hessian, hvp, jacfwd, jacrev, jvp,
                        value_and_grad, vjp)
from overdub_ad import _arrays
from overdub_gpu import ArrayBackendContext, EnclosingTagError, to_device, to_host
from overdub_gpu import _table

if np.lib.NumpyVersion(np.__version__) < "2.1.0":
    pytest.skip("overdub_gpu's tests use NumPy 2.1's array-API functions", allow_module_level=True)
xps = pytest.importorskip("array_api_strict")



@pytest.fixture(autouse=True)
def no_hidden_host_copies(monkeypatch):
    """array_api_strict arrays refuse ``__array__`` (as they do on Python 3.12+ when their
    buffer cannot serve): an engine that copied one to the host behind ``to_host``'s back --
    a device round trip on a GPU -- fails here on every Python."""
    def refuse(self, dtype=None, copy=None):
        raise TypeError("an array_api_strict array was copied to the host")
    monkeypatch.setattr(type(xps.asarray(0.0)), "__array__", refuse)


RNG = np.random.default_rng(7)
W = RNG.standard_normal((4, 3))
B = RNG.standard_normal(4)
X = RNG.standard_normal(3)


def model(w, b):
    """The loss of a one-layer network, in plain NumPy: matmul, ufuncs, reductions, slices, an
    integer index, a maximum and ``math`` on a float."""
    def loss(x):
        h = np.tanh(w @ x + b)
        return np.sum(h ** 2) + np.mean(np.exp(x[1:]) * x[:-1]) + math.exp(0.5) * np.max(x) * x[0]
    return loss


def features(x):
    return np.sin(x) * np.sum(x ** 2)


def transforms(loss):
    """Every way of differentiating, each a function of the point ``x``."""
    return {
        "grad": grad(loss),
        "value_and_grad": value_and_grad(loss),
        "vjp": lambda x: vjp(features, x)[1](np.cos(x)),
        "jvp": lambda x: jvp(loss, (x,), (np.cos(x),)),
        "derivative": derivative(features),
        "jacrev": jacrev(features),
        "jacfwd": jacfwd(features),
        "hessian": hessian(loss),
        "hvp": lambda x: hvp(loss, x, np.cos(x)),
        "grad of grad": grad(lambda x: np.sum(grad(loss)(x) ** 2)),
    }


def _namespaces():
    out = [pytest.param(np, id="numpy"), pytest.param(xps, id="array_api_strict")]
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() > 0:  # (CI has no device, nor a driver)
            out.append(pytest.param(cupy, id="cupy"))
    except Exception:
        pass
    try:
        import dask.array as da
    except ImportError:
        return out
    return out + [pytest.param(da, id="dask")]


def _leaves(value):
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def _in(value, xp):
    return type(value).__module__.split(".")[0] == xp.__name__.split(".")[0]


@pytest.mark.parametrize("name", list(transforms(features)))
@pytest.mark.parametrize("xp", _namespaces())
def test_derivatives_of_numpy_code_run_in_the_namespace(xp, name):
    ctx = ArrayBackendContext(xp)
    w, b, x = to_device(ctx, (W, B, X))
    got = _leaves(overdub(ctx, transforms(model(w, b))[name], x))
    want = _leaves(transforms(model(W, B))[name](X))
    assert len(got) == len(want)
    for g, expected in zip(got, want):
        assert _in(g, xp), f"{name} gave a {type(g).__module__}.{type(g).__name__}"
        np.testing.assert_allclose(to_host(ctx, g), expected, rtol=1e-10, atol=1e-12)


class Recording(ArrayBackendContext):
    """Records every call it sees (``metadata`` is a list)."""

    def prehook(self, fn, /, *args, **kwargs):
        self.metadata.append(fn)


def test_the_derivative_rules_run_under_the_context_too():
    ctx = Recording(xps, metadata=[])
    x = to_device(ctx, X)
    for transform in (grad, lambda f: lambda a: jvp(f, (a,), (a,))[1]):
        ctx.metadata.clear()
        out = overdub(ctx, transform(lambda a: np.sum(np.sin(a))), x)
        assert _in(out, xps)
        assert np.cos in ctx.metadata  # sin's derivative rule, swapped for xps.cos
        np.testing.assert_allclose(to_host(ctx, out), np.cos(X) if transform is grad
                                   else np.sum(np.cos(X) * X))


def test_every_numpy_function_these_derivatives_call_has_a_cupy_counterpart():
    cupy = pytest.importorskip("cupy")  # cupy-cuda12x imports without a driver
    ctx = Recording(xps, metadata=[])
    w, b, x = to_device(ctx, (W, B, X))
    for transform in transforms(model(w, b)).values():
        overdub(ctx, transform, x)
    numpy_functions = {id(fn): fn for _, fn in _table.numpy_callables()}
    called = {id(fn): fn for fn in ctx.metadata if numpy_functions.get(id(fn)) is fn}
    assert np.cos in called.values() and np.matmul in called.values()
    backend = ArrayBackendContext(cupy).backend
    missing = sorted(getattr(fn, "__name__", repr(fn)) for fn in called.values()
                     if backend._lookup(fn)[1] is None)
    assert not missing, f"cupy has no counterpart for {missing}"
    # and what overdub_ad itself makes in an array's namespace (seeds, zeros, unit vectors)
    assert _arrays.is_foreign_array_type(cupy.ndarray)
    for name in ("ones_like", "zeros", "eye", "reshape", "asarray", "broadcast_to", "float64"):
        assert hasattr(cupy, name), name


def test_a_derivative_taken_outside_a_numpy_backend_context():
    ctx = ArrayBackendContext(np)
    loss = model(W, B)

    def inside(x):
        return overdub(ctx, loss, x)

    np.testing.assert_allclose(grad(inside)(X), grad(loss)(X), rtol=1e-12)
    np.testing.assert_allclose(jvp(inside, (X,), (X,))[1], jvp(loss, (X,), (X,))[1], rtol=1e-12)
    np.testing.assert_allclose(hessian(inside)(X), hessian(loss)(X), rtol=1e-12)


def wave(t):
    return math.sin(t) * math.exp(-t)


def test_a_derivative_taken_outside_another_namespace_is_refused_not_zero(monkeypatch):
    monkeypatch.undo()  # (outside the context, rules compute on the host: what is refused here)
    ctx = ArrayBackendContext(xps)
    w, b, x = to_device(ctx, (W, B, X))

    def inside(a):
        return overdub(ctx, model(w, b), a)

    with pytest.raises(EnclosingTagError, match=r"overdub\(ctx, grad\(f\), x\)"):
        grad(inside)(x)
    with pytest.raises(EnclosingTagError, match="numpy.tanh got a value tagged"):
        jvp(inside, (x,), (x,))
    # math on Python numbers is math's own, whatever the namespace: it is differentiated
    assert derivative(lambda t: overdub(ctx, wave, t))(0.3) == pytest.approx(derivative(wave)(0.3))


def written(x):
    a = np.zeros(3)
    a[0] = x[1]
    return np.sum(a * x)


def accumulated(x):
    total = np.zeros(())
    total += np.sum(x)
    return total * 2.0


@pytest.mark.parametrize("fn", [written, accumulated])
def test_in_place_writes_into_namespace_arrays_are_refused_not_dropped(fn):
    ctx = ArrayBackendContext(xps)
    x = to_device(ctx, X)
    for mode, transform in (("reverse", grad), ("forward", lambda f: lambda a: jvp(f, (a,), (a,)))):
        with pytest.raises(NotImplementedError, match=f"{mode} mode cannot follow an in-place"):
            overdub(ctx, transform(fn), x)
    numpy_ctx = ArrayBackendContext(np)  # NumPy arrays are followed through their memory
    np.testing.assert_allclose(overdub(numpy_ctx, grad(fn), X), grad(fn)(X))


def with_methods(x):
    return (x.reshape(1, 3) * x).sum() + x.T.mean() * x.max()


def test_methods_of_namespace_arrays_are_the_numpy_functions():
    da = pytest.importorskip("dask.array")
    ctx = ArrayBackendContext(da)
    x = to_device(ctx, X)
    for transform in (grad, lambda f: lambda a: jvp(f, (a,), (np.ones_like(a),))[1]):
        got = overdub(ctx, transform(with_methods), x)
        assert isinstance(got, da.Array)
        np.testing.assert_allclose(to_host(ctx, got), transform(with_methods)(X), rtol=1e-12)


class Sealed:
    """An array type with the array API's protocol whose numbers sit in an attribute."""

    def __init__(self, data):
        self.data = np.asarray(data, dtype=float)

    def __array_namespace__(self):
        return np

    shape = property(lambda self: self.data.shape)
    dtype = property(lambda self: self.data.dtype)


def read_data(a):
    return np.sum(a.data)


def test_numbers_read_out_of_a_differentiated_array_are_refused_not_dropped():
    a = Sealed([1.0, 2.0])
    for mode, transform in (("reverse", grad), ("forward", lambda f: lambda v: jvp(f, (v,), (v,)))):
        with pytest.raises(MissingRuleError, match=f"no {mode}-mode derivative for the attribute "
                                                   f"'data'"):
            transform(read_data)(a)


def test_numpy_promotion_across_kinds_on_a_strict_namespace():
    ctx = ArrayBackendContext(xps)
    x, n, flags = to_device(ctx, (X, np.array([2, 3, 1]), X > 0))
    got = overdub(ctx, lambda: (np.power(x, n), np.sum(flags), np.add(n, 0.5),
                                np.where(flags, n, x), np.result_type(n, x)))
    want = (np.power(X, [2, 3, 1]), np.sum(X > 0), np.add([2, 3, 1], 0.5),
            np.where(X > 0, [2, 3, 1], X))
    for g, w in zip(got, want):
        assert _in(g, xps)
        np.testing.assert_allclose(to_host(ctx, g), w)
    assert got[-1] == xps.float64
