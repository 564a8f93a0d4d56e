"""An outside tester's findings (session 13, report h93): Dask writes through views hidden by a
derivative or by iteration, derivatives taken outside a Dask context, and float32 mode rounding
derivatives of float64 data."""

from __future__ import annotations

import numpy as np
import pytest

from overdub import overdub
from overdub_ad import grad, hessian, jvp, value_and_grad
from overdub_gpu import (ArrayBackendContext, EnclosingTagError, ViewWriteError, to_device,
                         to_host)

da = pytest.importorskip("dask.array")


def _dask() -> ArrayBackendContext:
    return ArrayBackendContext(da)


def _fd(f, x, h=1e-6):
    out = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        out[i] = (f(x + e) - f(x - e)) / (2 * h)
    return out


# -- F1: a derivative taken inside the Dask context hid writes through views -----------------

def _doubled_row(x):
    a = np.ones((2, 3))
    r = a[0]            # a view of a in NumPy
    r *= 2.0            # doubles a[0]
    return np.sum(a * x)


def _write_seen_by_row(x):
    a = np.ones((2, 3))
    r = a[0]
    a[0, 0] = 5.0       # r sees it in NumPy
    return np.sum(r * x)


def _through_transpose(x):
    a = np.ones((3, 2))
    t = a.T
    t[0] = 3.0
    return np.sum(a[:, 0] * x)


def _through_ellipsis(x):
    a = np.ones((2, 3))
    r = a[1]
    r[...] = 2.0
    return np.sum(a * x)


@pytest.mark.parametrize("f", [_doubled_row, _write_seen_by_row, _through_transpose,
                               _through_ellipsis])
def test_dask_view_write_under_a_derivative_is_numpys_or_refused(f):
    x = np.array([0.4, -0.7, 1.1])
    want_value, want_grad = value_and_grad(f)(x)
    assert np.allclose(want_grad, _fd(f, x), atol=1e-6)
    ctx = _dask()
    xd = to_device(ctx, x)
    runs = {"value_and_grad": value_and_grad(f), "jvp": lambda v: jvp(f, (v,), (v,)),
            "grad": grad(f)}
    for name, transform in runs.items():
        try:
            out = to_host(ctx, overdub(ctx, transform, xd))
        except ViewWriteError:
            continue  # refused, as the plain run is: never a silently different result
        if name == "grad":
            assert np.allclose(out, want_grad)
        elif name == "value_and_grad":
            assert np.isclose(out[0], want_value) and np.allclose(out[1], want_grad)
        else:
            assert np.isclose(out[0], want_value) and np.isclose(out[1], want_grad @ x)


def test_dask_view_write_under_grad_raises_like_the_plain_run():
    ctx = _dask()
    xd = to_device(ctx, np.array([0.4, -0.7, 1.1]))
    with pytest.raises(ViewWriteError):
        overdub(ctx, _write_seen_by_row, xd)
    with pytest.raises(ViewWriteError):
        overdub(ctx, grad(_write_seen_by_row), xd)
    with pytest.raises(ViewWriteError):
        overdub(ctx, lambda v: jvp(_through_transpose, (v,), (v,)), xd)


# -- F3: rows from iterating a Dask array were silent copies ---------------------------------

def _zero_first_column(x):
    for row in x:
        row[0] = 0.0
    return x


def _rows_then_write(x):
    first, *rest = x
    x[0, 0] = 99.0
    return first


def _unpacked(x):
    a, b = x
    a[1] = -1.0
    return x


@pytest.mark.parametrize("f", [_zero_first_column, _rows_then_write, _unpacked])
def test_dask_rows_of_iteration_are_views_or_refused(f):
    want = f(np.arange(6.0).reshape(2, 3))
    ctx = _dask()
    try:
        got = to_host(ctx, overdub(ctx, f, to_device(ctx, np.arange(6.0).reshape(2, 3))))
    except ViewWriteError:
        return
    assert np.array_equal(got, want)


def test_dask_iteration_reads_still_work_and_outside_runs_are_dasks():
    def row_sums(x):
        return np.stack([np.sum(row) for row in x])

    ctx = _dask()
    x = np.arange(6.0).reshape(2, 3)
    assert np.allclose(to_host(ctx, overdub(ctx, row_sums, to_device(ctx, x))), x.sum(axis=1))
    plain = da.from_array(x)
    rows = list(plain)          # outside a run: Dask's own iteration, copies
    rows[0][0] = 7.0
    y = plain
    y *= 2.0                    # outside a run: Dask's rebinding, plain is untouched
    assert np.array_equal(plain.compute(), x) and np.array_equal(y.compute(), 2 * x)


def test_dask_iteration_under_grad_is_refused_not_a_zero_gradient():
    def f(x):
        a = np.zeros((3, 3))
        for row in a:
            row[0] = 1.0
        return np.sum(a[:, 0] * x ** 2)

    x = np.array([0.4, -0.7, 1.1])
    assert np.allclose(grad(f)(x), 2 * x)
    ctx = _dask()
    with pytest.raises(ViewWriteError):
        overdub(ctx, grad(f), to_device(ctx, x))


# -- F2: a derivative taken outside the Dask context gave zeros ------------------------------

def test_dask_derivative_outside_the_context_raises_enclosing_tag_error():
    import math

    def f(x):
        return x[0] * x[1] + x[2] ** 3

    def h(x):
        return math.sin(x[0]) * x[1]

    x = np.array([0.3, -1.1, 0.8])
    ctx = _dask()
    xd = to_device(ctx, x)
    for fn in (f, h):
        with pytest.raises(EnclosingTagError, match=r"overdub\(ctx, grad\(f\), x\)"):
            grad(lambda v, fn=fn: overdub(ctx, fn, v))(xd)
        assert np.allclose(to_host(ctx, overdub(ctx, grad(fn), xd)), grad(fn)(x))
    with pytest.raises(EnclosingTagError):
        jvp(lambda v: overdub(ctx, f, v), (xd,), (xd,))


# -- F4: float32=True rounded derivatives of float64 data to float32 -------------------------

@pytest.mark.parametrize("namespace", ["numpy", "dask"])
def test_float32_mode_keeps_float64_derivatives_exact(namespace):
    xp = np if namespace == "numpy" else da
    ctx = ArrayBackendContext(xp, float32=True)
    x = np.array([0.3, 1.7, 2.9])
    xd = to_device(ctx, x)
    cases = [(grad(np.mean), np.full(3, 1 / 3)),
             (grad(lambda v: np.sum(np.deg2rad(v))), np.full(3, np.pi / 180)),
             (grad(lambda v: np.sum(np.rad2deg(v))), np.full(3, 180 / np.pi)),
             (hessian(np.var), hessian(np.var)(x))]
    for transform, want in cases:
        got = to_host(ctx, overdub(ctx, transform, xd))
        assert got.dtype == np.float64
        assert np.allclose(got, want, rtol=1e-14, atol=0), (got, want)


def test_float32_mode_still_gives_float32_derivatives_of_float32_data():
    ctx = ArrayBackendContext(np, float32=True)
    x = np.array([0.3, 1.7, 2.9], dtype=np.float32)
    for transform in (grad(np.mean), grad(lambda v: np.sum(np.deg2rad(v) * 0.5)),
                      hessian(np.var)):
        assert overdub(ctx, transform, x).dtype == np.float32
    assert np.allclose(overdub(ctx, grad(np.mean), x), 1 / 3, rtol=1e-6)


# -- F7: x[i] += v on Dask was a false ViewWriteError ----------------------------------------

def _running_sum(x):
    for i in range(1, x.shape[0]):
        x[i] += x[i - 1]
    return x


def _scale_column(x):
    x[:, 0] *= 2.0
    x[0] += 1.0
    x[1, 1] -= 5.0
    return x


def _row_doubled_then_read(x):
    r = x[0]
    r *= 2.0            # through the view into x, as NumPy writes
    return x, r


@pytest.mark.parametrize("f", [_running_sum, _scale_column, _row_doubled_then_read])
def test_dask_augmented_item_writes_are_numpys(f):
    want = f(np.arange(6.0).reshape(3, 2).copy())
    ctx = _dask()
    xd = to_device(ctx, np.arange(6.0).reshape(3, 2))
    got = to_host(ctx, overdub(ctx, f, xd))
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        assert np.array_equal(g, w)
    first = want[0] if isinstance(want, tuple) else want
    assert np.array_equal(to_host(ctx, xd), first)          # the caller's array, as NumPy's


def test_dask_write_through_a_view_under_derivatives_is_exact():
    x = np.array([0.4, -0.7, 1.1])
    ctx = _dask()
    xd = to_device(ctx, x)
    value, slope = to_host(ctx, overdub(ctx, value_and_grad(_doubled_row), xd))
    assert np.isclose(value, 3 * np.sum(x)) and np.allclose(slope, 3.0)
    value, tangent = to_host(ctx, overdub(ctx, lambda v: jvp(_doubled_row, (v,), (v,)), xd))
    assert np.isclose(value, 3 * np.sum(x)) and np.isclose(tangent, 3 * np.sum(x))


def test_dask_write_through_refused_where_another_view_would_miss_it():
    def overlapping(x):
        x[1:] += x[:-1]
        return x

    def kept_view(x):
        whole = x[0:2]
        row = x[0]
        row *= 2.0      # `whole` would see it in NumPy
        return whole

    ctx = _dask()
    for f in (overlapping, kept_view):
        with pytest.raises(ViewWriteError):
            overdub(ctx, f, to_device(ctx, np.arange(6.0).reshape(3, 2)))


# -- F5: np.size (and the derivatives using it) computed the Dask graph ----------------------

def test_dask_size_and_sort_derivative_compute_nothing():
    from dask.callbacks import Callback

    computed = []

    class Count(Callback):
        def _start(self, dsk):
            computed.append(1)

    ctx = _dask()
    x = np.array([0.3, -1.0, 2.0])
    xd = to_device(ctx, x)
    with Count():
        sized = overdub(ctx, lambda v: np.size(v) * v + np.size(v, 0), xd)
        slope = overdub(ctx, grad(lambda v: np.sum(np.sort(v) * np.arange(3.0))), xd)
        assert not computed
    assert np.allclose(to_host(ctx, sized), 3 * x + 3)
    assert np.allclose(to_host(ctx, slope), grad(lambda v: np.sum(np.sort(v) * np.arange(3.0)))(x))


# -- F6: a NumPy generator made outside the context computed on the host ---------------------

def test_numpy_generator_passed_in_is_refused_or_explicitly_on_the_host():
    from overdub_gpu import MissingCounterpartError

    def noisy(x, gen):
        return x + gen.normal(size=x.shape)

    ctx = _dask()
    xd = to_device(ctx, np.zeros(3))
    with pytest.raises(MissingCounterpartError, match="Generator.normal"):
        overdub(ctx, noisy, xd, np.random.default_rng(0))
    with pytest.raises(MissingCounterpartError, match="RandomState.uniform"):
        overdub(ctx, lambda x, g: x + g.uniform(size=3), xd, np.random.RandomState(0))
    on_host = ArrayBackendContext(da, host_fallback=True)
    got = overdub(on_host, noisy, xd, np.random.default_rng(0))
    assert isinstance(got, da.Array)
    assert np.allclose(to_host(on_host, got), np.random.default_rng(0).normal(size=3))
    same = overdub(ArrayBackendContext(np), noisy, np.zeros(3), np.random.default_rng(0))
    assert np.array_equal(same, np.random.default_rng(0).normal(size=3))


# -- F10: HostArrayError named overdub's dispatcher instead of the user's code ---------------

def test_host_array_errors_name_the_users_call():
    from overdub_gpu import HostArrayError

    def shares(x):
        return np.shares_memory(x, x)

    def normal_around(n):
        return np.random.normal(np.zeros(n), 1.0)   # Dask computes an array loc itself

    ctx = _dask()
    for f, arg, words in ((shares, to_device(ctx, np.arange(3.0)), "runs natively"),
                          (normal_around, 3, "dask.array's own code")):
        with pytest.raises(HostArrayError) as info:
            overdub(ctx, f, arg)
        message = str(info.value)
        assert f.__name__ in message and words in message
        assert "dispatcher" not in message and "make.<locals>" not in message


# -- F9: np.r_ / np.c_ failed on every other namespace ---------------------------------------

def test_r_and_c_concatenate_in_the_namespace():
    xs = pytest.importorskip("array_api_strict")

    def joined(a, b):
        return np.r_[a, 0.0, b, 0:2], np.c_[a, 2.0 * b], np.r_[a, 0:1:3j]

    def loss(x):
        return np.sum(np.r_[x, 0.0, x * 2] ** 2)

    a, b = np.arange(3.0), np.ones(3)
    for namespace in (xs, da):
        ctx = ArrayBackendContext(namespace)
        got = to_host(ctx, overdub(ctx, joined, *to_device(ctx, (a, b))))
        for g, w in zip(got, joined(a, b)):
            assert g.shape == w.shape and np.allclose(g, w)
        slope = to_host(ctx, overdub(ctx, grad(loss), to_device(ctx, a)))
        assert np.allclose(slope, grad(loss)(a))


# -- F11: bare backend errors where NumPy's arguments could be adapted -----------------------

def test_searchsorted_repeat_cumsum_concatenate_take_numpys_arguments():
    xs = pytest.importorskip("array_api_strict")
    a = np.array([[0.5, 1.5, 2.5], [3.0, 4.0, 5.0]])
    programs = [lambda x: np.searchsorted(x[0, ...], 1.0),
                lambda x: np.searchsorted(x[0, ...], [1.0, 2.0]),
                lambda x: np.repeat(x, 2),
                lambda x: np.repeat(x, [1, 2, 0], axis=1),
                lambda x: np.cumsum(x > 1.0),
                lambda x: np.concatenate([x[0, :1], [9.0], x[0, 2:]])]
    for namespace in (xs, da):
        ctx = ArrayBackendContext(namespace)
        for f in programs:
            want = f(a)
            got = to_host(ctx, overdub(ctx, f, to_device(ctx, a)))
            assert np.shape(got) == np.shape(want) and np.array_equal(got, want)
            assert np.asarray(got).dtype == want.dtype


def test_dask_code_under_another_context_computes_as_natively():
    # Dask's own subscripts follow NumPy's views only in runs of the Dask context or of a
    # derivative: another context (a CountContext) sees Dask code compute as it does natively
    from overdub.contexts import CountContext

    _dask()  # a Dask context made: Dask's methods are wrapped from now on

    def f(a):
        r = a[0]
        r *= 2
        return a.sum().compute(), r.sum().compute()

    a = da.from_array(np.arange(6.0).reshape(2, 3), chunks=2)
    native = f(a)
    assert overdub(CountContext(), f, da.from_array(np.arange(6.0).reshape(2, 3), chunks=2)) \
        == native


@pytest.mark.parametrize("second", ["hessian", "jacfwd(grad)", "jacrev(grad)"])
def test_second_derivatives_of_prod_on_array_api_strict(second):
    # found from outside: an array_api_strict dtype (no NumPy dtype) made np.full in the
    # rules of prod a call to recurse into, whose np.copyto has no counterpart
    xp = pytest.importorskip("array_api_strict")
    from overdub_ad import jacfwd, jacrev
    apis = {"hessian": hessian, "jacfwd(grad)": lambda f: jacfwd(grad(f)),
            "jacrev(grad)": lambda f: jacrev(grad(f))}
    x = np.array([1.0, 2.0, 3.0])
    got = overdub(ArrayBackendContext(xp), lambda x: apis[second](np.prod)(x), xp.asarray(x))
    np.testing.assert_allclose(np.asarray(got), hessian(np.prod)(x))
