"""An outside tester's findings (session 11): NumPy code under ArrayBackendContext on Dask and
array_api_strict computing something other than NumPy, or refusing what it need not."""

from __future__ import annotations

import numpy as np
import pytest

from overdub import overdub
from overdub_gpu import (ArrayBackendContext, UnsupportedArgumentError, ViewWriteError,
                         to_device, to_host)

xps = pytest.importorskip("array_api_strict")


def _dask() -> ArrayBackendContext:
    return ArrayBackendContext(pytest.importorskip("dask.array"))


def _run(ctx: ArrayBackendContext, f, *args):
    return to_host(ctx, overdub(ctx, f, *to_device(ctx, args)))


def _same(got, want) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.allclose(got, want)


A = np.arange(12.0).reshape(3, 4)
S = np.array([[4.0, 2.0], [2.0, 3.0]])
V = np.array([3.0, 1.0, 2.0, 5.0, 0.5])

# Each takes its arguments as NumPy's function does; Dask's counterpart differs in a
# parameter's position or default.
SAME_AS_NUMPY = {
    "eye_n_m": (lambda a: np.eye(2, 3) + 0 * a[0, 0], A),
    "eye_n_m_k": (lambda a: np.eye(3, 2, k=-1) + 0 * a[0, 0], A),
    "cholesky_lower": (lambda s: np.linalg.cholesky(s), S),
    "cholesky_upper": (lambda s: np.linalg.cholesky(s, upper=True), S),
    "svd_values": (lambda a: np.linalg.svd(a, compute_uv=False), A),
    "take_flattens": (lambda a: np.take(a, np.array([0, 5, 11])), A),
    "take_2d_indices": (lambda a: np.take(a, np.array([[0, 11], [3, 4]])), A),
    "take_2d_axis": (lambda a: np.take(a, np.array([[0, 3], [1, 1]]), axis=1), A),
    "qr_r": (lambda a: np.abs(np.linalg.qr(a.T, mode="r")), A),
    "lstsq_rank_deficient": (lambda a: np.linalg.lstsq(a.T, np.ones(4), rcond=None)[0], A),
    "lstsq_rcond": (lambda a: np.linalg.lstsq(a.T + np.eye(4, 3) * 1e-4, np.ones(4),
                                              rcond=1e-3)[0], A),
    "median_all": (lambda a: np.median(a), A),
    "percentile_1d": (lambda v: np.percentile(v, 30), V),
    "histogram_default_range": (lambda v: np.histogram(v, 3)[0], V),
    "sort": (lambda v: np.sort(v), V), "argsort": (lambda v: np.argsort(v), V),
    "clip_keywords": (lambda v: np.clip(v, min=1.0, max=2.5), V),
    "pad": (lambda v: np.pad(v, (1, 2)), V),
    "asarray_dtype": (lambda v: np.asarray(v, np.float32), V),
    "arange_dtype": (lambda v: np.arange(0, 5, 2, np.float32) + 0 * v[0], V),
    "full_like_dtype": (lambda v: np.full_like(v, 3, np.int32), V),
    "reshape": (lambda a: np.reshape(a, (4, 3)), A),
}
STRICT_TOO = {"eye_n_m", "eye_n_m_k", "cholesky_lower", "cholesky_upper", "svd_values",
              "take_flattens", "take_2d_indices", "take_2d_axis", "qr_r", "clip_keywords",
              "asarray_dtype", "arange_dtype", "full_like_dtype", "reshape", "sort", "argsort"}


@pytest.mark.parametrize("name", sorted(SAME_AS_NUMPY))
def test_dask_computes_what_numpy_computes(name):
    f, *args = SAME_AS_NUMPY[name]
    ctx = _dask()
    for _ in range(2):  # the cached swap too
        _same(_run(ctx, f, *args), f(*args))


@pytest.mark.parametrize("name", sorted(STRICT_TOO))
def test_strict_computes_what_numpy_computes(name):
    f, *args = SAME_AS_NUMPY[name]
    _same(_run(ArrayBackendContext(xps), f, *args), f(*args))


def test_dask_svd_full_matrices_of_a_non_square_matrix_is_refused():
    ctx = _dask()
    with pytest.raises(UnsupportedArgumentError, match="full_matrices"):
        _run(ctx, lambda a: np.linalg.svd(a)[2], A)
    u, s, vh = _run(ctx, lambda a: np.linalg.svd(a, full_matrices=False), A)
    assert vh.shape == (3, 4) and np.allclose((u * s) @ vh, A)
    u, s, vh = _run(ctx, lambda s: np.linalg.svd(s), S)   # square: full is thin
    assert u.shape == vh.shape == (2, 2) and np.allclose((u * s) @ vh, S)


@pytest.mark.parametrize("call", [
    lambda v: np.max(v, initial=10.0), lambda a: np.linalg.qr(a, mode="raw"),
    lambda a: np.reshape(a, 12, "F"),
    lambda a: np.percentile(a, 30, axis=0)])
def test_dask_refuses_numpy_arguments_it_cannot_honour(call):
    arg = V if call.__code__.co_varnames[0] == "v" else A
    with pytest.raises(UnsupportedArgumentError):
        _run(_dask(), call, arg)


def test_unsupported_argument_message_names_the_argument_not_the_data():
    ctx = ArrayBackendContext(xps)
    x = to_device(ctx, np.arange(1000.0))
    with pytest.raises(UnsupportedArgumentError) as info:
        overdub(ctx, lambda x: np.multiply(x, 2.0, out=x), x)
    assert "out=<" in str(info.value) and "999" not in str(info.value)


def test_dask_write_through_a_slice_is_refused():
    def zero_middle(x):
        v = x[1:3]
        v[...] = 0.0
        return x

    ctx = _dask()
    with pytest.raises(ViewWriteError, match="slice"):
        overdub(ctx, zero_middle, to_device(ctx, np.arange(4.0)))

    def write_base_then_read_slice(x):
        v = x[1:3]
        x[...] = 0.0
        return v

    with pytest.raises(ViewWriteError, match="live slice"):
        overdub(ctx, write_base_then_read_slice, to_device(ctx, np.arange(4.0)))


def test_dask_in_place_operators_reach_the_callers_array():
    def normalize(x):
        x -= np.mean(x)
        x /= np.std(x)
        x[1:] = x[:-1]     # a slice read into its own base: allowed, as in NumPy
        first = x[0]
        x[1] = first        # an element, not a view
        return x

    want = np.array([1.0, 2.0, 3.0, 6.0])
    normalize(want)
    ctx = _dask()
    x = to_device(ctx, np.array([1.0, 2.0, 3.0, 6.0]))
    overdub(ctx, normalize, x)
    assert np.allclose(to_host(ctx, x), want)


def test_dask_copy_is_a_new_array():
    def f(x):
        for y in (np.array(x), np.copy(x), np.asarray(x, copy=True)):
            y[0] = 100.0
        return x

    ctx = _dask()
    assert np.allclose(_run(ctx, f, np.arange(3.0)), np.arange(3.0))


def test_float32_literals_in_lists_and_ranges():
    for ns in (xps, pytest.importorskip("dask.array")):
        ctx = ArrayBackendContext(ns, float32=True)
        for f, want in ((lambda: np.array([1.0, 2.0]), [1.0, 2.0]),
                        (lambda: np.arange(3.0), [0.0, 1.0, 2.0])):
            got = to_host(ctx, overdub(ctx, f))
            assert got.dtype == np.float32 and np.allclose(got, want)


def test_to_host_keeps_numpy_scalars():
    ctx = ArrayBackendContext(np)
    assert type(to_host(ctx, np.float64(1.5))) is np.float64


def test_float32_gradients_stay_float32():
    from overdub_ad import grad, hessian

    def f(x):
        return np.sum(x ** 3)

    x = np.linspace(-1, 1, 4).astype(np.float32)
    ctx = ArrayBackendContext(xps)
    g = to_host(ctx, overdub(ctx, grad(f), to_device(ctx, x)))
    assert g.dtype == np.float32 and np.allclose(g, grad(f)(x))
    ctx = _dask()
    h = to_host(ctx, overdub(ctx, hessian(f), to_device(ctx, x)))
    assert h.dtype == np.float32 and np.allclose(h, hessian(f)(x))


def test_dask_gradient_of_rfft_pads_and_rechunks():
    from overdub_ad import grad

    def f(v):
        return np.sum(np.fft.rfft(v).real * np.arange(2.0))

    x = np.array([-1.0, 0.2, 0.7])
    ctx = _dask()
    _same(_run(ctx, grad(f), x), grad(f)(x))
    def doubled(a):
        return np.fft.fft2(np.concatenate([a, a]))

    _same(_run(ctx, doubled, A), doubled(A))


@pytest.mark.parametrize("name", ["clip", "maximum", "minimum with a tie"])
def test_strict_gradients_of_extrema_select_without_bool_arithmetic(name):
    """The rules of maximum/minimum/clip weighed the arguments as a truth value times a number,
    which array-API namespaces refuse (TypeError under array_api_strict)."""
    from overdub_ad import grad

    f = {"clip": lambda v: np.sum(np.clip(v, -0.5, 0.5) * v),
         "maximum": lambda v: np.sum(np.maximum(v, 0.0) ** 2),
         "minimum with a tie": lambda v: np.sum(np.minimum(v, v[::-1]))}[name]
    x = np.array([-1.0, 0.2, 0.2, 0.7]) if name != "minimum with a tie" else \
        np.array([-1.0, 0.2, 0.2, -1.0])
    ctx = ArrayBackendContext(xps)
    np.testing.assert_allclose(to_host(ctx, overdub(ctx, grad(f), to_device(ctx, x))), grad(f)(x))
