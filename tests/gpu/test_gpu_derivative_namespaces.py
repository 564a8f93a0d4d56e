"""Derivatives of common NumPy functions computed in array_api_strict and Dask, each checked
against the NumPy run's (value, dtype, shape): the derivative rules are NumPy code run in the
namespace, so each must ask only for what the namespace has (integer shifts, no ``.flat``,
``np.take`` rather than integer arrays after an ellipsis...), and the swap table supplies
what a namespace lacks (``einsum``, ``bincount``, ``tri``, a stable argsort on Dask)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from overdub import overdub
from overdub_ad import grad, hessian, jvp
from overdub_gpu import ArrayBackendContext, to_device, to_host

xps = pytest.importorskip("array_api_strict")


@pytest.fixture(autouse=True)
def no_hidden_host_copies(monkeypatch):
    def refuse(self, dtype=None, copy=None):
        raise TypeError("an array_api_strict array was copied to the host")
    monkeypatch.setattr(type(xps.asarray(0.0)), "__array__", refuse)


def _namespaces() -> list[object]:
    out = [pytest.param(xps, id="strict")]
    try:
        import dask.array as da  # noqa: PLC0415 (the dask extra)
    except ImportError:
        return out
    return [*out, pytest.param(da, id="dask")]


X = np.array([0.3, -1.2, 0.7, 2.0])


def _m(v):
    return np.reshape(v, (2, 2))


def _spd(v):
    m = _m(v)
    return m @ m.T + 3 * np.eye(2)


FUNCTIONS = {
    "roll": lambda v: np.sum(np.roll(v, 1) * v),
    "roll_numpy_int": lambda v: np.sum(np.roll(v, np.int64(2)) * v),
    "roll_axis": lambda v: np.sum(np.roll(_m(v), 1, axis=0) * _m(v)),
    "stack": lambda v: np.sum(np.stack([v, v]) ** 2),
    "stack_axis": lambda v: np.sum(np.stack([v, v * 2], axis=1) ** 3),
    "concatenate": lambda v: np.sum(np.concatenate([v, v ** 2]) ** 2),
    "diff": lambda v: np.sum(np.diff(v) ** 2),
    "diff_axis": lambda v: np.sum(np.diff(_m(v), axis=0) ** 2),
    "eye_plus": lambda v: np.sum((np.eye(2) + _m(v)) ** 2),
    "sort": lambda v: np.sort(v)[0] * np.sort(v)[-1],
    "sort_ties": lambda v: np.sum(np.sort(np.concatenate([v, v])) * np.arange(8.0)),
    "cumsum": lambda v: np.sum(np.cumsum(v) ** 2),
    "cumprod": lambda v: np.sum(np.cumprod(v)),
    "tril": lambda v: np.sum(np.tril(_m(v)) ** 2),
    "triu": lambda v: np.sum(np.triu(_m(v), 1) ** 2),
    "trace": lambda v: np.trace(_m(v)) ** 2,
    "dot": lambda v: np.dot(v, v) ** 2,
    "dot_matrices": lambda v: np.sum(np.dot(_m(v), _m(v))),
    "inv": lambda v: np.sum(np.linalg.inv(_spd(v))),
    "solve": lambda v: np.sum(np.linalg.solve(_spd(v), v[:2])),
    "svd": lambda v: np.sum(np.linalg.svd(_m(v))[1]),
    "norm": lambda v: np.linalg.norm(v),
    "norm_matrix": lambda v: np.linalg.norm(_m(v)),
    "where": lambda v: np.sum(np.where(v > 0, v ** 2, -v)),
    "clip": lambda v: np.sum(np.clip(v, -1.0, 1.0) ** 2),
    "take": lambda v: np.sum(np.take(v, [0, 2, 2]) ** 2),
    "integer_array_index": lambda v: np.sum(v[np.array([0, 2, 2])] ** 2),
    "argmax_index": lambda v: v[np.argmax(v)] ** 2,
    "tile": lambda v: np.sum(np.tile(v, 2) ** 2 * np.arange(8.0)),
    "repeat": lambda v: np.sum(np.repeat(v, 2) ** 2 * np.arange(8.0)),
    "outer": lambda v: np.sum(np.outer(v, v) ** 2),
}
STRICT_ONLY = {  # Dask lacks det and eigh; array_api_strict lacks median
    "det": lambda v: np.linalg.det(_spd(v)),
    "eigh": lambda v: np.sum(np.linalg.eigh(_spd(v))[0] ** 2),
    "einsum": lambda v: np.einsum("ij,jk->", _m(v), _m(v)) ** 2,
    "einsum_diagonal": lambda v: np.einsum("ii,j->j", _m(v), v) @ v,
    "boolean_mask": lambda v: np.sum(v[v > 0.2] ** 2),
}
DASK_ONLY = {"median": lambda v: np.median(v) ** 2}
MODES = {
    "grad": grad,
    "jvp": lambda f: (lambda v: jvp(f, (v,), (np.cos(v),))[1]),
    "hessian": hessian,
}


def _cases():
    for ns in _namespaces():
        extra = STRICT_ONLY if ns.id == "strict" else DASK_ONLY
        for name in sorted({**FUNCTIONS, **extra}):
            for mode in MODES:
                yield pytest.param(ns.values[0], name, mode, id=f"{ns.id}-{name}-{mode}")


@pytest.mark.parametrize("xp, name, mode", list(_cases()))
def test_derivative_in_the_namespace_matches_numpy(xp, name, mode):
    f = {**FUNCTIONS, **STRICT_ONLY, **DASK_ONLY}[name]
    want = np.asarray(MODES[mode](f)(X))
    ctx = ArrayBackendContext(xp)
    for _ in range(2):  # the first call and a repeated one (cached swaps)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # Dask on np.size
            out = overdub(ctx, MODES[mode](f), to_device(ctx, X))
        assert type(out).__module__.startswith(xp.__name__.split(".")[0])
        got = np.asarray(to_host(ctx, out))
        assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


# -- what the swap table now supplies, called directly ------------------------------------------

@pytest.mark.parametrize("f", [
    lambda a, b: np.einsum("ij,jk->ik", a, b),
    lambda a, b: np.einsum("ij,ij->i", a, b),
    lambda a, b: np.einsum("ii->", a) + np.einsum("ij->", b),
    lambda a, b: np.einsum("...j,jk", a, b),
    lambda a, b: np.einsum("ij,jk,kl->il", a, b, a),
    lambda a, b: np.tri(3, 4, 1) + np.tri(2)[0, 0],
    lambda a, b: np.bincount(np.array([0, 2, 2, 5]), np.ravel(a)[:4], 7),
    lambda a, b: np.bincount(np.array([1, 1, 3])),
    lambda a, b: np.diff(np.ravel(a), prepend=0, append=1.5),
    lambda a, b: np.roll(a, np.int64(1), axis=np.int64(0)),
])
def test_numpy_functions_the_namespace_lacks_run_as_numpys(f):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((3, 3)), rng.standard_normal((3, 3))
    want = f(a, b)
    ctx = ArrayBackendContext(xps)
    got = np.asarray(to_host(ctx, overdub(ctx, f, *to_device(ctx, (a, b)))))
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_dask_stable_argsort_keeps_ties_in_order():
    da = pytest.importorskip("dask.array")
    x = np.array([2.0, 1.0, 2.0, 1.0, 0.5, 2.0, 1.0])
    ctx = ArrayBackendContext(da)
    got = to_host(ctx, overdub(ctx, lambda v: np.argsort(v, kind="stable"), to_device(ctx, x)))
    np.testing.assert_array_equal(got, np.argsort(x, kind="stable"))
    m = np.reshape(np.concatenate([x, x[::-1]]), (2, 7))
    got = to_host(ctx, overdub(ctx, lambda v: np.argsort(v, axis=1, stable=True),
                               to_device(ctx, m)))
    np.testing.assert_array_equal(got, np.argsort(m, axis=1, stable=True))


@pytest.mark.parametrize("mode", sorted(MODES))
def test_dask_derivative_through_a_boolean_mask_is_refused_by_name(mode):
    da = pytest.importorskip("dask.array")
    ctx = ArrayBackendContext(da)
    f = MODES[mode](lambda v: np.sum(v[v > 0.2] ** 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        with pytest.raises(ValueError, match=r"unknown shape: indexing a Dask array with a "
                                             r"boolean mask \(x\[mask\]\).*np\.where"):
            overdub(ctx, f, to_device(ctx, X))
    # the same selection written with np.where works, and matches NumPy's
    g = MODES[mode](lambda v: np.sum(np.where(v > 0.2, v, 0.0) ** 2))
    got = to_host(ctx, overdub(ctx, g, to_device(ctx, X)))
    np.testing.assert_allclose(got, g(X))
