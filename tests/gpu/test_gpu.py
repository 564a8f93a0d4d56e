"""overdub_gpu: the swap table, array-backend contexts, transfers, broadcast and float32.

Everything here runs without a GPU: NumPy and ``array_api_strict`` (a strict array-API
namespace; any NumPy array leaking into it is a type error) stand in for CuPy, the CuPy table is
checked against the real ``cupy`` namespace where it imports, and ``GPUContext()`` is checked to
fail clearly.  Kernels under test live in this file: overdub rewrites functions from source.
"""

from __future__ import annotations

import ast
import cmath
import inspect
import math
import re
import sys
import textwrap

import numpy as np
import pytest

import overdub_gpu
from overdub import Context, embed, overdub
from overdub_gpu import (ArrayBackendContext, BranchesToWhere, Float32Literals, GPUContext,
                         GPUUnavailableError, HostArrayError, MissingCounterpartError,
                         UnsupportedArgumentError, VectorizeError, broadcast, to_device, to_host)
from overdub_gpu import _table
from tests.conftest import ROOT

if np.lib.NumpyVersion(np.__version__) < "2.1.0":
    pytest.skip("overdub_gpu's tests use NumPy 2.1's array-API functions", allow_module_level=True)
xps = pytest.importorskip("array_api_strict")


def _gpu_present():
    """Whether CuPy imports and sees a CUDA device (CI has neither device nor driver)."""
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver (CUDARuntimeError), no device
        return False


def _namespaces():
    """NumPy, array_api_strict, and CuPy where a CUDA device is present."""
    out = [pytest.param(np, id="numpy"), pytest.param(xps, id="array_api_strict")]
    if _gpu_present():
        import cupy
        out.append(pytest.param(cupy, id="cupy"))
    return out


def _is_xp_array(x, xp):
    return type(x).__module__.split(".")[0] == xp.__name__.split(".")[0]


def _resolves(xp, dotted):
    obj = xp
    for part in dotted.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return callable(obj) or dotted in ("float32",)


# -- the table: every entry names something that exists ---------------------------------------

@pytest.mark.parametrize("xp", _namespaces()[:2])  # (CuPy's own table: the next test)
def test_every_default_entry_exists_in_the_namespace(xp):
    missing = sorted({rule.name for rule in _table.DEFAULT.values()
                      if not _resolves(xp, rule.name)})
    assert not missing, f"{xp.__name__} lacks {missing}"


def test_every_cupy_entry_exists_in_cupy():
    cupy = pytest.importorskip("cupy")  # cupy-cuda12x imports without a driver
    missing = sorted({rule.name for rule in _table.CUPY.values() if not _resolves(cupy, rule.name)})
    assert not missing, f"cupy lacks {missing}"
    # and the default entries CuPy does not override resolve there too
    fallbacks = sorted({rule.name for fn, rule in _table.DEFAULT.items()
                        if fn not in _table.CUPY and not _resolves(cupy, rule.name)})
    assert not fallbacks, f"cupy lacks the default names {fallbacks}"


def test_every_dask_entry_exists_in_dask_array():
    da = pytest.importorskip("dask.array")
    missing = sorted({rule.name for rule in _table.DASK.values() if not _resolves(da, rule.name)})
    assert not missing, f"dask.array lacks {missing}"


def test_tables_are_keyed_by_numpy_and_math_callables():
    for table in (_table.DEFAULT, _table.CUPY, _table.DASK):
        for fn, rule in table.items():
            module = getattr(fn, "__module__", None) or ""
            assert (module.startswith("numpy") or module == "math" or isinstance(fn, np.ufunc)
                    or (isinstance(fn, type) and issubclass(fn, np.generic))
                    or "random" in repr(fn)), (fn, rule)
            assert isinstance(rule, _table.Rule) and rule.kind in (
                "call", "elementwise", "creation", "random", "upload", "math")


def test_every_numpy_and_math_callable_is_a_primitive():
    ctx = ArrayBackendContext(np)
    for label, fn in (*_table.numpy_callables(), *_table.math_callables()):
        assert ctx.is_primitive(fn), label
    for fn in (*_table.DEFAULT, *_table.CUPY, *_table.DASK):
        assert ctx.is_primitive(fn), fn


def test_overlay_first_then_default():
    # dask spells math's asin the NumPy way: its own table wins over the default's name
    be = ArrayBackendContext(np).backend
    assert _table.DEFAULT[math.asin].name == "asin"
    assert _table.DASK[math.asin].name == "arcsin"
    strict = ArrayBackendContext(xps).backend
    rule, f, looked = strict._lookup(np.arcsin)
    assert rule.name == "asin" and f is xps.asin
    assert be.runner(np.arcsin, "numpy.arcsin") is np.arcsin  # NumPy is its own counterpart


# -- a numerical sweep over the default table (array_api_strict against NumPy) ------------------

RNG = np.random.default_rng(1)
V = RNG.uniform(0.1, 0.9, 6)
W = RNG.uniform(0.1, 0.9, 6)
M = RNG.uniform(0.1, 0.9, (2, 3))
S = RNG.uniform(0.1, 0.9, (3, 3)) + np.eye(3)
SPD = S @ S.T + np.eye(3)
T3 = RNG.uniform(0.1, 0.9, (2, 3, 4))
V3, W3 = RNG.uniform(0.1, 0.9, 3), RNG.uniform(0.1, 0.9, 3)
INTS = np.array([3, 1, 4, 1, 5, 9, 2, 6])
SHAPE_ONLY = {np.empty, np.empty_like}


def _case(*args, **kwargs):
    return (args, kwargs)


CASES = {
    np.clip: [_case(V, 0.3, 0.6)], np.round: [_case(V * 10), _case(V, 1)],
    np.where: [_case(V > 0.5, V, 0.0), _case(V > 0.5)],
    np.asarray: [_case([1.0, 2.0]), _case(V)], np.asanyarray: [_case([1.0, 2.0])],
    np.ascontiguousarray: [_case([1.0, 2.0])], np.array: [_case([[1, 2], [3, 4]])],
    np.copy: [_case(V)], np.zeros: [_case((2, 3))], np.ones: [_case(3, np.float32)],
    np.empty: [_case((2, 2))], np.full: [_case((2, 2), 3.0)], np.zeros_like: [_case(M)],
    np.ones_like: [_case(M)], np.empty_like: [_case(M)], np.full_like: [_case(M, 2.0)],
    np.arange: [_case(5), _case(1, 7, 2), _case(0.0, 1.0, 0.25)],
    np.linspace: [_case(0, 1, 5), _case(0, 1, 4, endpoint=False)],
    np.eye: [_case(3), _case(3, 4, k=1)], np.identity: [_case(3)],
    np.meshgrid: [_case(V3, W)], np.tril: [_case(S)], np.triu: [_case(S, 1)],
    np.sum: [_case(M, axis=0), _case(M)], np.prod: [_case(M, 1)], np.mean: [_case(M, axis=1)],
    np.max: [_case(M)], np.amax: [_case(M, axis=0)], np.min: [_case(M, keepdims=True)],
    np.amin: [_case(M)], np.all: [_case(M > 0.3)], np.any: [_case(M > 0.8, axis=0)],
    np.std: [_case(M, ddof=1)], np.var: [_case(M, axis=0)], np.argmax: [_case(M, axis=1)],
    np.argmin: [_case(V)], np.cumsum: [_case(M)], np.cumprod: [_case(M, axis=1)],
    np.cumulative_sum: [_case(V)], np.cumulative_prod: [_case(V)],
    np.count_nonzero: [_case(M > 0.5)], np.sort: [_case(V)], np.argsort: [_case(V)],
    np.unique: [_case(INTS)], np.unique_values: [_case(INTS)],
    np.searchsorted: [_case(np.sort(V), 0.5)], np.diff: [_case(V)],
    np.nonzero: [_case(V > 0.5)],
    np.reshape: [_case(M, (3, 2))], np.ravel: [_case(M)], np.transpose: [_case(T3)],
    np.swapaxes: [_case(T3, 0, 2)], np.matrix_transpose: [_case(T3)],
    np.moveaxis: [_case(T3, 0, -1)], np.squeeze: [_case(M[None])],
    np.expand_dims: [_case(M, 0)], np.concatenate: [_case([M, M]), _case((M, M), axis=1)],
    np.stack: [_case([V, W])], np.broadcast_to: [_case(V3, (2, 3))],
    np.broadcast_arrays: [_case(M, V3)], np.flip: [_case(M)], np.roll: [_case(V, 2)],
    np.tile: [_case(V3, 2)], np.repeat: [_case(V3, 2)], np.take: [_case(V, np.array([0, 2]))],
    np.take_along_axis: [_case(M, np.array([[0], [2]]), axis=1)],
    np.astype: [_case(M, np.float32)],
    np.matmul: [_case(S, S)], np.dot: [_case(S, V3), _case(V3, W3)],
    np.tensordot: [_case(S, S, axes=1)], np.vecdot: [_case(V, W)], np.outer: [_case(V3, W3)],
    np.trace: [_case(S)], np.diagonal: [_case(S)], np.cross: [_case(V3, W3)],
    np.linalg.inv: [_case(SPD)], np.linalg.det: [_case(SPD)],
    np.linalg.solve: [_case(SPD, V3[:, None])], np.linalg.cholesky: [_case(SPD)],
    np.linalg.qr: [_case(S)], np.linalg.svd: [_case(S), _case(S, compute_uv=False)],
    np.linalg.svdvals: [_case(S)], np.linalg.eigh: [_case(SPD)],
    np.linalg.eigvalsh: [_case(SPD)], np.linalg.eig: [_case(SPD)],
    np.linalg.eigvals: [_case(SPD)], np.linalg.norm: [_case(V), _case(S), _case(S, 2)],
    np.linalg.vector_norm: [_case(V)], np.linalg.matrix_norm: [_case(S)],
    np.linalg.pinv: [_case(S)], np.linalg.matrix_rank: [_case(S)],
    np.linalg.slogdet: [_case(SPD)], np.linalg.matrix_power: [_case(S, 3)],
    np.linalg.cross: [_case(V3, W3)], np.linalg.outer: [_case(V3, W3)],
    np.linalg.matmul: [_case(S, S)], np.linalg.tensordot: [_case(S, S, axes=1)],
    np.linalg.vecdot: [_case(V, W)], np.linalg.trace: [_case(S)],
    np.linalg.diagonal: [_case(S)], np.linalg.matrix_transpose: [_case(T3)],
    np.fft.fft: [_case(V)], np.fft.ifft: [_case(V)], np.fft.rfft: [_case(V)],
    np.fft.irfft: [_case(np.fft.rfft(V))], np.fft.hfft: [_case(np.fft.rfft(V))],
    np.fft.ihfft: [_case(V)], np.fft.fftn: [_case(S)], np.fft.ifftn: [_case(S)],
    np.fft.rfftn: [_case(S)], np.fft.irfftn: [_case(np.fft.rfftn(S))],
    np.fft.fft2: [_case(S)], np.fft.ifft2: [_case(S)], np.fft.rfft2: [_case(S)],
    np.fft.irfft2: [_case(np.fft.rfft2(S))], np.fft.fftfreq: [_case(8, 0.1)],
    np.fft.rfftfreq: [_case(8)], np.fft.fftshift: [_case(V)], np.fft.ifftshift: [_case(V)],
    math.log: [_case(V), _case(V, 2.0)], math.hypot: [_case(V, W), _case(V, W, V)],
    math.degrees: [_case(V)], math.radians: [_case(V)],
}
CASES.update({np.real: [_case(V)], np.imag: [_case(V)], np.around: [_case(V, 2)],
              np.unstack: [_case(M), _case(M, axis=1)],
              np.split: [_case(V, 3), _case(V, [1, 4, 9]), _case(M, [2, 1], axis=1)],
              np.array_split: [_case(V, 4)],
              np.result_type: [_case(M, 1.0), _case(INTS, V), _case(np.float32, float)],
              np.iscomplexobj: [_case(V), _case(V + 1j), _case(1.0)],
              np.isrealobj: [_case(V), _case(V * 1j)],
              np.issubdtype: [_case(np.float32, np.floating), _case(int, np.inexact)]})
CASES.update({np.einsum: [_case("ij,jk->ik", M, T3[0]), _case("ii->i", S), _case("i,i", V, W),
                          _case("...j,jk", T3, T3[0].T)],
              np.bincount: [_case(INTS), _case(INTS, V[:1].repeat(8), 12)],
              np.tri: [_case(3), _case(3, 4, -1), _case(2, 3, 1, bool)]})
for _t in ("float32", "float64", "int8", "int16", "int32", "int64", "uint8",
           "complex64", "complex128", "bool_"):
    CASES[getattr(np, _t)] = [_case(1)]

_INT_UFUNCS = {"bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift",
               "right_shift", "bitwise_invert", "bitwise_left_shift", "bitwise_right_shift"}
_BOOL_UFUNCS = {"logical_and", "logical_or", "logical_xor", "logical_not"}


def _auto_case(fn, rule):
    """Elementwise and math entries: inputs in their domain, one per argument."""
    name = getattr(fn, "__name__", "")
    if rule.kind == "elementwise" and isinstance(fn, np.ufunc):
        nin = fn.nin
        if name in _INT_UFUNCS:
            return [_case(*[np.array([1, 2, 3])] * nin)]
        if name in _BOOL_UFUNCS:
            return [_case(*[V > 0.5, W > 0.5][:nin])]
        base = [V + 1.0 if name in ("arccosh", "acosh") else V, W][:nin]
        return [_case(*base)]
    if rule.kind == "math":
        nin = 2 if name in ("atan2", "copysign", "pow", "nextafter") else 1
        return [_case(*[V + 1.0 if name == "acosh" else V, W][:nin])]
    return None


def _all_cases():
    out = []
    for fn, rule in _table.DEFAULT.items():
        cases = CASES.get(fn) or _auto_case(fn, rule)
        label = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
        module = getattr(fn, "__module__", None) or "numpy"
        for i, (args, kwargs) in enumerate(cases or []):
            out.append(pytest.param(fn, args, kwargs, id=f"{module}.{label}-{i}"))
    return out


def test_every_default_rule_has_a_checked_case():
    unchecked = [fn for fn, rule in _table.DEFAULT.items()
                 if fn not in CASES and _auto_case(fn, rule) is None]
    assert not unchecked, f"no numerical case for {unchecked}"


def call(fn, *args, **kwargs):
    return fn(*args, **kwargs)


def _upload(ctx, value):
    if isinstance(value, np.ndarray):
        return to_device(ctx, value)
    if isinstance(value, (list, tuple)):
        return type(value)(_upload(ctx, v) for v in value)
    return value


def _flatten(value):
    if isinstance(value, (tuple, list)) and not isinstance(value, str):
        return [x for v in value for x in _flatten(v)]
    return [value]


@pytest.mark.parametrize("fn, args, kwargs", _all_cases())
def test_default_rule_matches_numpy_on_array_api_strict(fn, args, kwargs):
    ctx = ArrayBackendContext(xps)
    got = overdub(ctx, call, fn, *_upload(ctx, args), **kwargs)
    if _table.DEFAULT[fn].kind == "math":  # math takes numbers: the reference goes by element
        want = np.array([fn(*(float(np.broadcast_to(a, V.shape)[k]) for a in args))
                         for k in range(len(V))])
    else:
        want = fn(*args, **kwargs)
    if fn is np.unique_values:  # the standard leaves the order unspecified
        got, want = overdub(ctx, call, np.sort, got), np.sort(want)
    got_items, want_items = _flatten(got), _flatten(want)
    assert len(got_items) == len(want_items)
    for g, w in zip(got_items, want_items):
        if isinstance(w, np.dtype):  # a dtype query answers with the namespace's dtype
            assert g == getattr(xps, w.name)
        elif isinstance(w, (np.ndarray, np.generic)) or fn in SHAPE_ONLY:
            assert _is_xp_array(g, xps), f"a {type(g).__name__} leaked out of the context"
            host = to_host(ctx, g)
            assert host.shape == np.shape(w)
            if fn not in SHAPE_ONLY:
                np.testing.assert_allclose(host, w, rtol=1e-6, atol=1e-12)
                if _table.DEFAULT[fn].kind != "math":  # math.floor(array) is float, as np.floor
                    assert np.asarray(host).dtype.kind == np.asarray(w).dtype.kind
        else:
            assert g == pytest.approx(w)


# -- ArrayBackendContext ------------------------------------------------------------------------

def program(n):
    a = np.linspace(0.0, 1.0, n)
    b = np.ones((n, n)) * 2 + np.eye(n)
    c = b @ a
    mean = np.mean(np.sin(c)) + np.sum(a ** 2, axis=0)
    solved = np.linalg.solve(b, a)
    spectrum = np.abs(np.fft.fft(a))
    clipped = np.where(a > 0.5, a, 0.0)
    stacked = np.transpose(np.reshape(np.concatenate([a, a]), (2, n)))
    return mean, solved, spectrum, np.zeros_like(b), clipped, stacked, math.sqrt(mean)


@pytest.mark.parametrize("xp", _namespaces())
def test_numpy_program_runs_on_the_namespace_unchanged(xp):
    ctx = ArrayBackendContext(xp)
    got = overdub(ctx, program, 5)
    want = program(5)
    for g, w in zip(got, want):
        assert _is_xp_array(g, xp), type(g)          # nothing came back to NumPy by itself
        np.testing.assert_allclose(to_host(ctx, g), w, rtol=1e-12)


def scalar_math(x):
    return math.exp(x) + math.atan2(x, 2.0) + math.hypot(x, 1.0)


def test_math_functions_swap_for_arrays_only():
    ctx = ArrayBackendContext(xps)
    assert overdub(ctx, scalar_math, 0.5) == scalar_math(0.5)        # Python floats: math
    assert type(overdub(ctx, scalar_math, 0.5)) is float
    got = overdub(ctx, scalar_math, to_device(ctx, V))
    assert _is_xp_array(got, xps)
    np.testing.assert_allclose(to_host(ctx, got), [scalar_math(v) for v in V])


def draws():
    return np.random.normal(size=3)


def interpolate(x):
    return np.interp(x, np.array([0.0, 1.0]), np.array([10.0, 20.0]))


def test_missing_counterpart_is_a_clear_error():
    with pytest.raises(MissingCounterpartError) as info:
        overdub(ArrayBackendContext(xps), draws)
    message = str(info.value)
    assert "numpy.random.normal has no counterpart in array_api_strict" in message
    assert "host_fallback=True" in message and ".primitive(numpy.random.normal)" in message


def test_missing_math_counterpart_only_matters_for_arrays():
    def gamma_of(x):
        return math.gamma(x)
    ctx = ArrayBackendContext(xps)
    assert overdub(ctx, math_gamma, 3.0) == 2.0
    with pytest.raises(MissingCounterpartError, match="math.gamma has no counterpart"):
        overdub(ctx, math_gamma, to_device(ctx, V))


def math_gamma(x):
    return math.gamma(x)


def test_host_fallback_is_explicit():
    ctx = ArrayBackendContext(xps, host_fallback=True)
    out = overdub(ctx, draws)
    assert _is_xp_array(out, xps) and out.shape == (3,)
    got = overdub(ctx, interpolate, to_device(ctx, np.array([0.25, 0.5])))
    assert _is_xp_array(got, xps)
    np.testing.assert_allclose(to_host(ctx, got), [12.5, 15.0])


class WithInterp(ArrayBackendContext):
    pass


@WithInterp.primitive(np.interp)
def _interp(ctx, x, xp_, fp):
    # linear interpolation on two points, in the context's namespace
    return fp[0] + (x - xp_[0]) * (fp[1] - fp[0]) / (xp_[1] - xp_[0])


def test_a_user_primitive_fills_a_gap():
    ctx = WithInterp(xps)
    got = overdub(ctx, interpolate, to_device(ctx, np.array([0.25, 0.5])))
    assert _is_xp_array(got, xps)
    np.testing.assert_allclose(to_host(ctx, got), [12.5, 15.0])
    with pytest.raises(MissingCounterpartError):      # the parent class is unchanged
        overdub(ArrayBackendContext(xps), interpolate, to_device(ctx, np.array([0.5])))


def sine(a):
    return np.sin(a)


def test_host_arrays_are_refused_not_copied():
    ctx = ArrayBackendContext(xps)
    with pytest.raises(HostArrayError, match=r"to_device\(ctx, a\)"):
        overdub(ctx, sine, np.ones(3))
    # np.asarray of host data inside the context *is* the upload the user wrote
    got = overdub(ctx, call, np.asarray, np.ones(3))
    assert _is_xp_array(got, xps)


def sum_into(x):
    return np.sum(x, out=x)


def test_unsupported_numpy_arguments_are_refused():
    ctx = ArrayBackendContext(xps)
    with pytest.raises(UnsupportedArgumentError, match=r"numpy.sum\(out="):
        overdub(ctx, sum_into, to_device(ctx, V))
    mask = to_device(ctx, V > 0.5)
    with pytest.raises(UnsupportedArgumentError, match=r"where="):
        overdub(ctx, masked_add, to_device(ctx, V), mask)


def masked_add(x, mask):
    return np.add(x, 1.0, where=mask)


@pytest.mark.parametrize("xp", _namespaces())
def test_transfers_round_trip(xp):
    ctx = ArrayBackendContext(xp)
    dev = to_device(ctx, {"a": M, "b": (V, 2.0)})
    assert _is_xp_array(dev["a"], xp) and _is_xp_array(dev["b"][0], xp)
    assert to_device(ctx, dev["a"]) is dev["a"]                     # already there
    host = to_host(ctx, dev)
    assert type(host["a"]) is np.ndarray and host["b"][1] == 2.0
    np.testing.assert_array_equal(host["a"], M)
    assert to_device(ctx, np.ones(2, np.float32)).dtype == to_device(ctx, np.float32(1)).dtype


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="array namespace"):
        ArrayBackendContext("numpy")
    with pytest.raises(TypeError, match="ArrayBackendContext"):
        to_host(Context(), V)
    with pytest.raises(TypeError, match="kernel must be callable"):
        broadcast(ArrayBackendContext(np), 3, V)


def test_repr_and_similar():
    ctx = ArrayBackendContext(xps, float32=True)
    assert repr(ctx) == "ArrayBackendContext(array_api_strict, float32=True)"
    sibling = ctx.similar(metadata=[])
    assert sibling.xp is xps and sibling.metadata == [] and sibling.float32


# -- GPUContext with and without a GPU -------------------------------------------------------

@pytest.mark.skipif(not _gpu_present(), reason="needs a CUDA device")
def test_gpu_context_runs_numpy_code_on_the_device():
    import cupy
    ctx = GPUContext()
    rng = np.random.default_rng(3)
    w, x = rng.standard_normal((5, 4)), rng.standard_normal(4)

    def loss(w, x):
        return np.sum(np.tanh(w @ x) ** 2) + math.exp(0.1) * np.max(x)
    value = overdub(ctx, loss, *to_device(ctx, (w, x)))
    assert isinstance(value, cupy.ndarray)
    np.testing.assert_allclose(to_host(ctx, value), loss(w, x), rtol=1e-12)
    assert float(to_host(ctx, broadcast(ctx, lambda a: a * 2 if a > 0 else -a,
                                        to_device(ctx, x)))[0]) == abs(x[0]) * (
        2 if x[0] > 0 else 1)


@pytest.mark.skipif(_gpu_present(), reason="a CUDA device is present")
def test_gpu_context_without_a_device_says_what_is_missing():
    with pytest.raises(GPUUnavailableError) as info:
        GPUContext()
    message = str(info.value)
    assert "ArrayBackendContext(numpy)" in message
    try:
        import cupy  # noqa: F401
    except Exception:
        assert "CuPy" in message and 'pip install "overdub[gpu]"' in message
    else:
        assert "no CUDA device" in message and "driver" in message


def test_gpu_context_without_cupy_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # makes `import cupy` fail
    with pytest.raises(GPUUnavailableError) as info:
        GPUContext()
    message = str(info.value)
    assert "GPUContext needs CuPy" in message and "cupy-cuda12x" in message
    assert "ArrayBackendContext(numpy)" in message


# -- broadcast: the HM-LSTM kernel of the Cassette talk ----------------------------------------

def sigm(x):
    return 1 / (1 + math.exp(-x))


def hmlstm(z, zb, c, f, i, g):
    if z == 1:  # FLUSH
        return sigm(i) * math.tanh(g)
    elif zb == 0:  # COPY
        return c
    else:  # UPDATE
        return sigm(f) * c + sigm(i) * math.tanh(g)


def _hmlstm_inputs(n, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.integers(0, 2, (n, 1)).astype(dtype)
    zb = rng.integers(0, 2, (n, 1)).astype(dtype)
    c, f, i, g = rng.standard_normal((4, n, n)).astype(dtype)
    return z, zb, c, f, i, g


def _hmlstm_loop(z, zb, c, f, i, g):
    n, m = c.shape
    out = np.empty((n, m))
    for a in range(n):
        for b in range(m):
            out[a, b] = hmlstm(float(z[a, 0]), float(zb[a, 0]), float(c[a, b]),
                               float(f[a, b]), float(i[a, b]), float(g[a, b]))
    return out


@pytest.mark.parametrize("xp", _namespaces())
def test_hmlstm_broadcast_matches_a_per_element_loop(xp):
    inputs = _hmlstm_inputs(24)
    ctx = ArrayBackendContext(xp)
    out = broadcast(ctx, hmlstm, *to_device(ctx, inputs))
    assert _is_xp_array(out, xp) and tuple(out.shape) == (24, 24)
    want = _hmlstm_loop(*inputs)
    np.testing.assert_allclose(to_host(ctx, out), want, rtol=1e-12, atol=1e-15)
    assert len({*np.unique(inputs[0]), *np.unique(inputs[1])}) == 2  # all three branches taken


def test_hmlstm_pass_output_reads_like_hand_written_where_code():
    node = ast.parse(textwrap.dedent(inspect.getsource(hmlstm))).body[0]
    after = ast.unparse(BranchesToWhere().visit(node))
    vx = embed(sys.modules["overdub_gpu._broadcast"]).id  # the pass's helpers, embedded
    assert after == textwrap.dedent(f"""\
        def hmlstm(z, zb, c, f, i, g):
            @gpu_c1 = z == 1
            @gpu_r2 = sigm(i) * math.tanh(g)
            @gpu_c3 = zb == 0
            @gpu_r4 = c
            @gpu_r5 = sigm(f) * c + sigm(i) * math.tanh(g)
            return {vx}.where(@gpu_c1, @gpu_r2, {vx}.where(@gpu_c3, @gpu_r4, @gpu_r5))""")


# -- broadcast: more kernels ------------------------------------------------------------------

def guard(x):
    if x < 0:
        return 0.0
    y = x * 2
    if y > 3 and x < 10:
        y = y - 1
    else:
        t = 5
        y = y + t
    return y


def classify(x, y):
    sign = 1.0 if x >= 0 else -1.0
    if not (0.2 < abs(x) < 0.8) or y > 0.5:
        sign = sign * 10
        if x > y:
            return sign * 2
    elif x < -0.5:
        sign = -sign
    return sign + max(x, y) - min(x, 0.0)


def accumulate(x):
    total = 0.0
    for k in range(3):  # trip count independent of the element
        if x > k * 0.3:
            total = total + x ** k
        else:
            total -= 1.0
    return total


def with_bools(x, y):
    return (x > 0 and y > 0) or (x < -1 and not y < 0)


def in_place(x):
    x += 1.0  # rebinds x, as for a float; never writes into the caller's array
    return x


def constant(x):
    if x > 100:
        return 1.0
    return 2.0


def pair(x):
    if x > 0:
        return x, -x
    return -x, x


def helper_with_branch(x):
    return relu(x) + relu(-x) * 0.5


def relu(x):
    if x > 0:
        return x
    return 0.0


KERNELS = [guard, classify, accumulate, with_bools, in_place, constant, helper_with_branch]
XS = np.linspace(-2.0, 2.0, 23)
YS = np.linspace(1.0, -1.0, 23)


@pytest.mark.parametrize("xp", _namespaces())
@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.__name__)
def test_kernels_match_python_elementwise(kernel, xp):
    ctx = ArrayBackendContext(xp)
    nargs = len(inspect.signature(kernel).parameters)
    host_args = (XS, YS)[:nargs]
    args = [to_device(ctx, a.copy()) for a in host_args]
    out = broadcast(ctx, kernel, *args)
    want = [kernel(*(float(a[k]) for a in host_args)) for k in range(len(XS))]
    assert _is_xp_array(out, xp) and tuple(out.shape) == XS.shape
    np.testing.assert_allclose(to_host(ctx, out).astype(float), np.asarray(want, float))
    np.testing.assert_array_equal(to_host(ctx, args[0]), XS)          # inputs untouched


def test_tuple_results_and_broadcast_shapes():
    ctx = ArrayBackendContext(np)
    a, b = broadcast(ctx, pair, XS)
    np.testing.assert_allclose(a, np.abs(XS))
    np.testing.assert_allclose(b, -np.abs(XS))
    out = broadcast(ctx, hmlstm, 1.0, np.zeros((3, 1)), np.ones((3, 4)), 0.0, 0.0, 0.0)
    assert out.shape == (3, 4)
    assert broadcast(ctx, constant, np.zeros((2, 3))).shape == (2, 3)


def test_broadcast_refuses_host_arrays_on_another_namespace():
    with pytest.raises(HostArrayError, match="to_device"):
        broadcast(ArrayBackendContext(xps), relu, XS)


# -- broadcast: what it cannot vectorise, named -------------------------------------------------

def halvings(x):
    n = 0
    while x > 1:
        x = x / 2
        n = n + 1
    return n


def element_range(n):
    total = 0.0
    for k in range(n):
        total = total + k
    return total


def complex_root(x):
    return cmath.sqrt(x).real


def early_break(x):
    total = 0.0
    for k in range(5):
        if x > k:
            break
        total = total + 1
    return total


def one_sided(x):
    if x > 0:
        y = x * 2
    return y


def sometimes_returns(x):
    if x > 0:
        return x


_namespace = {}
exec("def no_source(x):\n    return x * 2\n", _namespace)
no_source = _namespace["no_source"]


def calls_no_source(x):
    return no_source(x) + 1


@pytest.mark.parametrize("kernel, message", [
    (halvings, r"while loop at line \d+ of halvings: its decision depends on the element"),
    (element_range, r"for loop at line \d+ of element_range"),
    (complex_root, r"call of cmath.sqrt inside the kernel: it is a C function"),
    (calls_no_source, r"call of no_source inside the kernel: it has no Python source"),
    (early_break, r"if statement \(it contains a break\) at line \d+ of early_break"),
    (one_sided, r"'y' is assigned on some paths of the if statement at line \d+ only"),
    (sometimes_returns, r"some elements reach the end of the function without a return"),
], ids=lambda v: getattr(v, "__name__", "message"))
def test_unvectorisable_kernels_name_the_construct(kernel, message):
    for xp in (np, xps):
        ctx = ArrayBackendContext(xp)
        with pytest.raises(VectorizeError, match=message):
            broadcast(ctx, kernel, to_device(ctx, np.array([0.5, 3.0, -1.0])))


_namespace2 = {}
exec("def branchy(x):\n    return x if x > 0 else 0.0\n", _namespace2)
branchy = _namespace2["branchy"]


def calls_branchy(x):
    return branchy(x) * 2


def test_a_later_failure_is_named_too():
    ctx = ArrayBackendContext(np)
    assert broadcast(ctx, calls_branchy, 2.0) == 4.0      # first run, checked: no array there
    with pytest.raises(VectorizeError, match="call of branchy inside the kernel"):
        broadcast(ctx, calls_branchy, XS)                 # fast path fails, then is named


def test_constructs_that_do_not_depend_on_the_element_keep_python_control_flow():
    ctx = ArrayBackendContext(np)
    assert early_break(-1.0) == 5.0
    np.testing.assert_allclose(broadcast(ctx, early_break, -1.0), 5.0)  # a scalar: fine
    np.testing.assert_allclose(broadcast(ctx, sometimes_returns, np.array([1.0, 2.0])),
                               [1.0, 2.0])


def test_the_pass_alone_gives_plain_numpy_code():
    # Any context, plain NumPy arrays: the helpers are ordinary NumPy outside our contexts.
    got = overdub(Context(passes=[BranchesToWhere()]), guard, XS)
    np.testing.assert_allclose(got, [guard(float(x)) for x in XS])


def test_guard_before_and_after():
    node = ast.parse(textwrap.dedent(inspect.getsource(relu))).body[0]
    vx = embed(sys.modules["overdub_gpu._broadcast"]).id
    assert ast.unparse(BranchesToWhere().visit(node)) == textwrap.dedent(f"""\
        def relu(x):
            @gpu_c1 = x > 0
            @gpu_r2 = x
            return {vx}.where(@gpu_c1, @gpu_r2, 0.0)""")


# -- float32 ------------------------------------------------------------------------------------

def damp(x):
    return x * np.exp(-0.5), np.zeros(3), np.zeros(3, dtype=np.float64), np.full(2, 0.5)


@pytest.mark.parametrize("xp", _namespaces())
def test_float32_keeps_float32(xp):
    x = to_device(ArrayBackendContext(xp), np.ones(3, np.float32))
    plain = overdub(ArrayBackendContext(xp), damp, x)
    narrow = overdub(ArrayBackendContext(xp, float32=True), damp, x)
    f32, f64 = to_device(ArrayBackendContext(xp), np.float32(0)).dtype, plain[2].dtype
    assert plain[0].dtype == f64                   # a float64 literal promoted the result
    assert [a.dtype for a in narrow] == [f32, f32, f64, f32]   # explicit dtype is kept


@pytest.mark.parametrize("xp", _namespaces())
def test_float32_hmlstm_end_to_end(xp):
    ctx = ArrayBackendContext(xp, float32=True)
    inputs = _hmlstm_inputs(8, np.float32)
    out = broadcast(ctx, hmlstm, *to_device(ctx, inputs))
    host = to_host(ctx, out)
    assert host.dtype == np.float32
    np.testing.assert_allclose(host, _hmlstm_loop(*inputs), rtol=1e-5, atol=1e-6)


def test_float32_pass_alone_before_and_after():
    def scaled(x):
        return x * np.exp(-0.5) + 2 + 1j
    node = ast.parse(textwrap.dedent(inspect.getsource(scaled))).body[0]
    assert ast.unparse(Float32Literals().visit(node)).splitlines()[1].strip() == (
        f"return x * np.exp(-{embed(np.float32).id}(0.5)) + 2 + {embed(np.complex64).id}(1j)")
    out = overdub(Context(passes=[Float32Literals()]), damp, np.ones(3, np.float32))
    assert out[0].dtype == np.float32


# -- beyond one machine: dask.array -------------------------------------------------------------

def statistics(n):
    x = np.random.random((n, n))
    y = np.sin(x) ** 2 + np.cos(x) ** 2
    return np.mean(y), np.std(x, axis=0), x @ x.T


def test_dask_array_turns_numpy_code_into_a_chunked_graph():
    da = pytest.importorskip("dask.array")
    dask = pytest.importorskip("dask")
    ctx = ArrayBackendContext(da)
    with dask.config.set({"array.chunk-size": "256KiB", "scheduler": "synchronous"}):
        mean, std, gram = overdub(ctx, statistics, 400)
        assert isinstance(gram, da.Array) and gram.numblocks[0] > 1   # lazy and chunked
        np.testing.assert_allclose(to_host(ctx, mean), 1.0)
        assert to_host(ctx, std).shape == (400,) and type(to_host(ctx, gram)) is np.ndarray
        inputs = _hmlstm_inputs(16)
        out = broadcast(ctx, hmlstm, *to_device(ctx, inputs))
        assert isinstance(out, da.Array)
        np.testing.assert_allclose(to_host(ctx, out), _hmlstm_loop(*inputs), rtol=1e-12)


# -- the plug-in's seams -----------------------------------------------------------------------

def test_public_api():
    for name in overdub_gpu.__all__:
        assert hasattr(overdub_gpu, name), name
    assert {"ArrayBackendContext", "GPUContext", "to_device", "to_host", "broadcast",
            "Float32Literals", "BranchesToWhere"} <= set(overdub_gpu.__all__)


def test_uses_only_overdubs_public_names():
    import overdub
    for path in (ROOT / "overdub_gpu").glob("*.py"):
        source = path.read_text(encoding="utf-8")
        assert not re.search(r"\boverdub\._|from overdub\.\w+ import|import overdub\.", source), \
            path.name
        for match in re.finditer(r"from overdub import \(?([^)\n]+)", source):
            names = {n.strip() for n in match.group(1).split(",") if n.strip()}
            assert names <= set(overdub.__all__), (path.name, names)


def test_sealing_a_namespace_touches_only_its_own_code():
    import collections
    import typing
    ArrayBackendContext(xps)
    try:
        import dask.array as da
        ArrayBackendContext(da)
    except ImportError:
        pass
    for module in (collections, typing):
        for obj in vars(module).values():
            for fn in (obj, *(vars(obj).values() if isinstance(obj, type) else ())):
                assert not getattr(fn, "__overdub_opaque__", False), (module.__name__, fn)
    assert getattr(xps.asarray, "__overdub_opaque__", False)    # its own functions are leaves
