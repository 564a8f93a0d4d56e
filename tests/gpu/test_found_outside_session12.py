"""An outside tester's findings (session 12): NumPy code under ArrayBackendContext on
array_api_strict and Dask computing on the host, or something other than NumPy, without
saying so; and NumPy's promotions and argument forms the swap did not follow."""

from __future__ import annotations

import math

import numpy as np
import pytest

from overdub import overdub
from overdub_gpu import (ArrayBackendContext, HostArrayError, MissingCounterpartError,
                         ViewWriteError, to_device, to_host)

xps = pytest.importorskip("array_api_strict")


def _namespaces() -> list[object]:
    try:
        import dask.array as da  # noqa: PLC0415 (the dask extra)
    except ImportError:
        return [xps]
    return [xps, da]


def _run(ctx: ArrayBackendContext, f, *args):
    return to_host(ctx, overdub(ctx, f, *to_device(ctx, args)))


def _same(got, want) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    assert np.allclose(got, want)


# -- W1: code run as written (no source) does not convert arrays to NumPy behind one's back ----

def test_code_without_source_refuses_to_copy_to_the_host():
    made: dict[str, object] = {"np": np}
    exec("def leaf(v):\n    return np.linalg.det(v) + 1", made)  # no source: run as written
    for ns in _namespaces():
        ctx = ArrayBackendContext(ns)
        with pytest.raises(HostArrayError, match=r"in leaf \(<string>, line 2\)"):
            overdub(ctx, lambda v: made["leaf"](v), to_device(ctx, np.eye(2) * 2.0))
        # outside a run, and with host_fallback=True, the namespace converts as before
        assert np.allclose(made["leaf"](to_device(ctx, np.eye(2))), 2.0)
        host = ArrayBackendContext(ns, host_fallback=True)
        out = overdub(host, lambda v: made["leaf"](v), to_device(host, np.eye(2) * 2.0))
        assert np.allclose(to_host(host, out), 5.0)


# -- W2: NumPy's generator classes make NumPy arrays: refused where not swapped -----------------

@pytest.mark.parametrize("draw", [
    lambda: np.random.RandomState(0).rand(3),
    lambda: np.random.Generator(np.random.PCG64(0)).random(3),
])
def test_numpy_generators_are_not_run_on_the_host(draw):
    for ns in _namespaces():
        with pytest.raises(MissingCounterpartError, match=r"numpy\.random\.(RandomState|PCG64)"):
            overdub(ArrayBackendContext(ns), draw)
    assert type(overdub(ArrayBackendContext(np), draw)) is np.ndarray


# -- W3: on Dask, every write NumPy makes through a view is refused, never lost ----------------

VIEWS = {
    "T": lambda x: x.T, "transpose_method": lambda x: x.transpose(),
    "reshape_method": lambda x: x.reshape(-1), "ravel_method": lambda x: x.ravel(),
    "reshape": lambda x: np.reshape(x, (-1,)), "ravel": np.ravel, "transpose": np.transpose,
    "swapaxes": lambda x: np.swapaxes(x, 0, 1), "moveaxis": lambda x: np.moveaxis(x, 0, 1),
    "expand_dims": lambda x: np.expand_dims(x, 0), "squeeze": lambda x: np.squeeze(x[None]),
    "flip": np.flip, "split": lambda x: np.split(x, 2)[0], "atleast_3d": np.atleast_3d,
    "view_of_a_view": lambda x: x.T[1:],
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_dask_writes_through_views_are_refused(name):
    da = pytest.importorskip("dask.array")
    view = VIEWS[name]

    def into_view(x):
        y = view(x)
        y[(0,) * y.ndim] = 99.0
        return x

    def into_base(x):
        y = view(x)
        x[0, 0] = 7.0
        return y

    ctx = ArrayBackendContext(da)
    for f in (into_view, into_base):
        with pytest.raises(ViewWriteError):
            overdub(ctx, f, to_device(ctx, np.arange(6.0).reshape(2, 3)))


def test_dask_copies_and_new_arrays_take_writes_as_numpy():
    da = pytest.importorskip("dask.array")

    def f(x):
        for y in (np.copy(x), x + 1, x.flatten(), np.reshape(x, (-1,)) * 2):
            y[(0,) * y.ndim] = 99.0
        return x

    ctx = ArrayBackendContext(da)
    _same(_run(ctx, f, np.arange(6.0).reshape(2, 3)), f(np.arange(6.0).reshape(2, 3)))


# -- W5: float32=True: float32 is the default float type, as JAX without x64 -------------------

FLOAT32 = {
    "sqrt_of_int": lambda a: a * np.sqrt(2),
    "mean_of_mask": lambda a: a * np.mean(a > 0),
    "exp_of_ints": lambda a: a * np.exp(np.arange(3)),
    "divide_ints": lambda a: a * np.divide(np.arange(3), 2),
    "full_of_pi": lambda a: a * np.full(3, math.pi),
    "norm_of_ints": lambda a: a * np.linalg.norm(np.arange(3)),
}


@pytest.mark.parametrize("name", sorted(FLOAT32))
def test_float32_mode_defaults_to_float32(name):
    f = FLOAT32[name]
    x = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    for ns in (np, *_namespaces()):
        ctx = ArrayBackendContext(ns, float32=True)
        got = _run(ctx, f, x)
        assert got.dtype == np.float32, (ns, got.dtype)
        assert np.allclose(got, f(x.astype(np.float64)), rtol=1e-6)


def test_float32_mode_keeps_float64_that_was_asked_for():
    def f(a):
        return np.sqrt(np.ones(3, dtype=np.float64)) + np.sqrt(np.float64(2.0)) * a

    for ns in (np, *_namespaces()):
        ctx = ArrayBackendContext(ns, float32=True)
        assert _run(ctx, f, np.ones(3)).dtype == np.float64   # float64 data stays float64
        assert _run(ctx, lambda: np.sqrt(np.arange(3, dtype=np.float64))).dtype == np.float64


# -- E2: NumPy's promotion of integers and booleans in functions that compute in floats --------

PROMOTED = {
    "sqrt_of_int": (lambda: np.sqrt(2), ()),
    "mean_of_ints": (lambda: np.mean(np.arange(4)), ()),
    "exp_of_ints": (lambda i: np.exp(i), (np.arange(1, 5),)),
    "divide_ints": (lambda: np.divide(np.arange(3), 2), ()),
    "std_of_ints": (lambda i: np.std(i), (np.arange(1, 5),)),
    "var_axis": (lambda i: np.var(i, axis=0), (np.arange(1, 5),)),
    "log_int32": (lambda i: np.log(i), (np.arange(1, 5, dtype=np.int32),)),
    "arctan2_ints": (lambda i: np.arctan2(i, 1), (np.arange(1, 5),)),
}


@pytest.mark.parametrize("name", sorted(PROMOTED))
def test_strict_promotes_integers_as_numpy(name):
    f, args = PROMOTED[name]
    _same(_run(ArrayBackendContext(xps), f, *args), f(*args))


def test_a_float_type_the_namespace_lacks_is_named():
    with pytest.raises(MissingCounterpartError, match="numpy.sin computes in float16"):
        overdub(ArrayBackendContext(xps), lambda: np.sin(np.array([True, False])))


# -- E3: lists where NumPy takes an array --------------------------------------------------------

@pytest.mark.parametrize("f", [lambda v: np.sum([1.0, 2.0]) + 0 * v[0],
                               lambda v: np.max([v[0], v[1]]),
                               lambda v: np.maximum([v[0], 1.5], v),
                               lambda v: np.mean([v, v], axis=0)])
def test_lists_of_numbers_and_arrays(f):
    v = np.array([1.0, 2.0])
    for ns in _namespaces():
        _same(_run(ArrayBackendContext(ns), f, v), f(v))


# -- E8 ------------------------------------------------------------------------------------------

def test_linspace_step_is_a_numpy_float64():
    for ns in _namespaces():
        step = overdub(ArrayBackendContext(ns), lambda: np.linspace(0.0, 1.0, 5, retstep=True))[1]
        assert type(step) is np.float64 and step == 0.25
