"""The backend swap table: what each NumPy (and scalar ``math``) callable becomes in ``xp``.

Rules are data.  Each table maps the NumPy callable itself (``numpy.sin``, ``numpy.linalg.inv``,
``math.exp``...) to a :class:`Rule`: the dotted name of its counterpart in the array namespace
``xp`` (``"asin"``, ``"linalg.inv"``) and, where the signatures differ, a small adapter written
beside it.  Tables, looked up in this order (backends overlay, they don't fork):

1. the backend's own table, chosen by ``xp.__name__``: :data:`CUPY` (NumPy's names, as CuPy
   spells them, plus ``random`` and ``einsum``) and :data:`DASK` (``dask.array``);
2. :data:`DEFAULT`: the array-API standard's names, which every conforming namespace has
   (``array_api_strict``, NumPy 2, CuPy...).

A callable found in neither is a NumPy function with no counterpart: calling it inside the
context raises :class:`MissingCounterpartError` naming it (unless the user registers a primitive
or allows host fallback).  With ``xp`` being NumPy itself every NumPy callable is its own
counterpart and no table is consulted for it.

Conventions, stated once so the rules can be one line:

- An adapter is ``adapt(f, be, *args, **kwargs)``: ``f`` the resolved ``xp`` callable, ``be``
  the :class:`~overdub_gpu._context.Backend` (``be.xp``, ``be.dtype(d)`` translates a NumPy
  dtype, ``be.arrays(args)`` turns Python/NumPy scalars into ``xp`` arrays the way NumPy's weak
  scalars would), then NumPy's own parameters.  It returns what NumPy would, in ``xp``.
- ``kind`` says what the context does around the call: ``"elementwise"`` (scalars become
  arrays for strict namespaces; NumPy's ``out=``/``where=`` are refused), ``"creation"`` and
  ``"random"`` (float64 results become float32 under ``float32=True`` unless a dtype was
  given), ``"upload"`` (``np.asarray(host_array)`` may take host data: it *is* the upload),
  ``"math"`` (a ``math`` function: runs natively on Python numbers, swapped only for arrays),
  ``"call"`` (everything else).
- A parameter NumPy has and the counterpart lacks raises
  :class:`UnsupportedArgumentError` naming both, never silently dropped.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np


class MissingCounterpartError(NotImplementedError):
    """A NumPy or ``math`` callable has no counterpart in the context's array namespace."""


class UnsupportedArgumentError(TypeError):
    """A NumPy argument (``out=``, ``order='F'``...) that the counterpart cannot honour."""


class Rule(NamedTuple):
    """``name``: dotted attribute path in ``xp``; ``adapt``: see the module docstring."""

    name: str
    adapt: Callable[..., Any] | None = None
    kind: str = "call"


# -- helpers the adapters share ------------------------------------------------------------

_NO = object()  # "argument not given"


def _refuse(fn: str, f: Any, **given: Any) -> None:
    """Raise for any NumPy-only argument given a value other than its harmless default."""
    for name, (value, harmless) in given.items():
        if value is not _NO and value is not harmless and not (
                isinstance(value, (str, int, float, bool)) and value == harmless):
            raise UnsupportedArgumentError(
                f"numpy.{fn}({name}={_shown(value)}) has no counterpart in "
                f"{getattr(f, '__module__', None) or 'xp'}.{getattr(f, '__name__', '?')}; "
                f"call it without {name}= inside the context")


def _shown(value: Any) -> str:
    """An argument as an error message shows it: a number or a string as written, anything
    else by its type (an array's repr would print all its data)."""
    if value is None or isinstance(value, (str, int, float, bool, complex)):
        return repr(value)
    return f"<{type(value).__module__}.{type(value).__qualname__}>"


def _stacked(be: Any, a: Any) -> Any:
    """A (nested) list of ``xp`` arrays and numbers as one ``xp`` array (``np.array([x0, 1.0])``
    with 0-d arrays, float32 literals included): a strict namespace refuses nested arrays,
    so the pieces are stacked."""
    if not isinstance(a, (list, tuple)) or not _holds_array(be, a):
        return a
    parts = be.arrays(tuple(_stacked(be, v) for v in a))
    return be.resolve_name("stack")(list(be.promoted(parts)))


def _holds_array(be: Any, a: Any) -> bool:
    return any(be.is_array(v) or isinstance(v, (list, tuple)) and _holds_array(be, v)
               for v in a)


def _elementwise(f: Any, be: Any, *args: Any, out: Any = _NO, where: Any = _NO,
                 casting: Any = _NO, order: Any = _NO, dtype: Any = None, subok: Any = _NO,
                 signature: Any = _NO) -> Any:
    _refuse(getattr(f, "__name__", "ufunc"), f, out=(out, None), where=(where, True),
            casting=(casting, "same_kind"), order=(order, "K"), subok=(subok, True),
            signature=(signature, None))
    result = f(*be.promoted(be.arrays(args)))
    return result if dtype is None else be.astype(result, dtype)


def _unary_only(f: Any, be: Any, x: Any, **kwargs: Any) -> Any:
    return _elementwise(f, be, x, **kwargs)


def _clip(f: Any, be: Any, a: Any, a_min: Any = None, a_max: Any = None, out: Any = None,
          **kwargs: Any) -> Any:
    _refuse("clip", f, out=(out, None))
    lo = kwargs.pop("min", None) if a_min is None else a_min  # NumPy 2.1 spells them both ways
    hi = kwargs.pop("max", None) if a_max is None else a_max
    return f(be.arrays((a,))[0], min=lo, max=hi)


def _round(f: Any, be: Any, a: Any, decimals: int = 0, out: Any = None) -> Any:
    _refuse("round", f, out=(out, None))
    (x,) = be.arrays((a,))
    if decimals == 0:
        return f(x)
    scale = 10.0 ** decimals
    return f(x * scale) / scale


def _real_part(f: Any, be: Any, val: Any) -> Any:
    (x,) = be.arrays((val,))  # NumPy takes real input too; the standard only complex
    return f(x) if be.numpy_like or _kind_of(be, x) == "complex floating" else x


def _imag_part(f: Any, be: Any, val: Any) -> Any:
    (x,) = be.arrays((val,))
    if be.numpy_like or _kind_of(be, x) == "complex floating":
        return f(x)
    return be.resolve_name("zeros_like")(x)


def _where(f: Any, be: Any, condition: Any, x: Any = _NO, y: Any = _NO) -> Any:
    if x is _NO and y is _NO:
        return be.resolve_name("nonzero")(condition)
    (condition,) = be.arrays((condition,))
    x, y = be.arrays((x, y))  # a number takes the other branch's dtype, not the condition's
    return f(condition, *be.promoted((x, y)))


# -- creation ------------------------------------------------------------------------------

def _asarray(f: Any, be: Any, a: Any, dtype: Any = None, order: Any = _NO, *, copy: Any = None,
             like: Any = _NO, ndmin: Any = _NO, device: Any = None) -> Any:
    _refuse("asarray", f, order=(order, "K"), like=(like, None), ndmin=(ndmin, 0))
    if isinstance(a, np.generic):
        a = a.item()
    a = _stacked(be, a)
    return f(a, dtype=be.dtype(dtype), copy=copy) if copy is not None else \
        f(a, dtype=be.dtype(dtype))


def _array(f: Any, be: Any, a: Any, dtype: Any = None, *, copy: bool = True, order: Any = _NO,
           subok: Any = _NO, ndmin: Any = _NO, like: Any = _NO) -> Any:
    # (subok= keeps NumPy's subclasses of ndarray, which another namespace has none of: the
    # namespace's array either way, as np.r_'s own code asks for)
    _refuse("array", f, order=(order, "K"), like=(like, None))
    if isinstance(a, np.generic):
        a = a.item()
    out = f(_stacked(be, a), dtype=be.dtype(dtype), copy=True if copy else None)
    if ndmin is not _NO and ndmin > out.ndim:
        out = be.resolve_name("reshape")(out, (1,) * (ndmin - out.ndim) + tuple(out.shape))
    return out


def _copy(f: Any, be: Any, a: Any, order: Any = _NO, subok: Any = _NO) -> Any:
    _refuse("copy", f, order=(order, "K"))
    return f(a, copy=True)


def _filled(fn: str) -> Callable[..., Any]:
    """zeros/ones/empty(shape, dtype=None, order='C')"""
    def adapt(f: Any, be: Any, shape: Any, dtype: Any = None, order: Any = _NO, *,
              like: Any = _NO, device: Any = None) -> Any:
        _refuse(fn, f, order=(order, "C"), like=(like, None))
        return f(shape, dtype=be.dtype(dtype))
    return adapt


def _full(f: Any, be: Any, shape: Any, fill_value: Any, dtype: Any = None, order: Any = _NO, *,
          like: Any = _NO, device: Any = None) -> Any:
    _refuse("full", f, order=(order, "C"), like=(like, None))
    fill_value, dtype = be.python_scalar(fill_value, dtype)
    return f(shape, fill_value, dtype=be.dtype(dtype))


def _like(fn: str) -> Callable[..., Any]:
    """zeros_like/ones_like/empty_like(a, dtype=None, order='K', subok=True, shape=None)"""
    def adapt(f: Any, be: Any, a: Any, dtype: Any = None, order: Any = _NO, subok: Any = _NO,
              shape: Any = None, *, device: Any = None) -> Any:
        _refuse(fn, f, order=(order, "K"), subok=(subok, True))
        (x,) = be.arrays((a,))
        if shape is not None:
            return be.resolve_name(fn[:-len("_like")])(shape, dtype=be.dtype(dtype) or x.dtype)
        return f(x, dtype=be.dtype(dtype))
    return adapt


def _full_like(f: Any, be: Any, a: Any, fill_value: Any, dtype: Any = None, order: Any = _NO,
               subok: Any = _NO, shape: Any = None, *, device: Any = None) -> Any:
    _refuse("full_like", f, order=(order, "K"), subok=(subok, True))
    (x,) = be.arrays((a,))
    fill_value, _ = be.python_scalar(fill_value, None)
    if shape is not None:
        return be.resolve_name("full")(shape, fill_value, dtype=be.dtype(dtype) or x.dtype)
    return f(x, fill_value, dtype=be.dtype(dtype))


def _arange(f: Any, be: Any, start: Any, stop: Any = None, step: Any = 1, dtype: Any = None, *,
            like: Any = _NO, device: Any = None) -> Any:
    _refuse("arange", f, like=(like, None))
    for value in (start, stop, step):
        dtype = be.python_scalar(value, dtype)[1]
    start, stop, step = (be.python_scalar(v, None)[0] for v in (start, stop, step))
    return f(start, stop, step, dtype=be.dtype(dtype))


def _linspace(f: Any, be: Any, start: Any, stop: Any, num: int = 50, endpoint: bool = True,
              retstep: bool = False, dtype: Any = None, axis: int = 0, *,
              device: Any = None) -> Any:
    _refuse("linspace", f, axis=(axis, 0))
    dtype = be.python_scalar(stop, be.python_scalar(start, dtype)[1])[1]
    start, stop = be.python_scalar(start, None)[0], be.python_scalar(stop, None)[0]
    out = f(start, stop, num, endpoint=endpoint, dtype=be.dtype(dtype))
    if retstep:
        step = (stop - start) / ((num - 1) if endpoint else num) if num > (1 if endpoint else 0) \
            else float("nan")
        return out, np.float64(step)  # NumPy's step is a NumPy float64
    return out


def _eye(f: Any, be: Any, N: int, M: int | None = None, k: int = 0, dtype: Any = None,
         order: Any = _NO, *, like: Any = _NO, device: Any = None) -> Any:
    _refuse("eye", f, order=(order, "C"), like=(like, None))
    return f(N, M, k=k, dtype=be.dtype(dtype))


def _identity(f: Any, be: Any, n: int, dtype: Any = None, *, like: Any = _NO) -> Any:
    _refuse("identity", f, like=(like, None))
    return f(n, dtype=be.dtype(dtype))


def _meshgrid(f: Any, be: Any, *xi: Any, copy: bool = True, sparse: bool = False,
              indexing: str = "xy") -> Any:
    _refuse("meshgrid", f, sparse=(sparse, False))
    return tuple(f(*be.arrays(xi), indexing=indexing))


def _tri(f: Any, be: Any, m: Any, k: int = 0) -> Any:
    return f(be.arrays((m,))[0], k=k)


def _tri_matrix(f: Any, be: Any, N: int, M: int | None = None, k: int = 0, dtype: Any = float,
                *, like: Any = _NO) -> Any:
    """numpy.tri, which the array API lacks: ``j <= i + k``, from two ``arange``s."""
    _refuse("tri", f, like=(like, None))
    xp = be.xp
    hit = xp.reshape(f(N) + k, (N, 1)) >= f(N if M is None else M)
    return hit if dtype is bool else be.astype(hit, np.float64 if dtype is None else dtype)


def _scalar(dtype_name: str) -> Callable[..., Any]:
    """numpy.float32(v) and friends: a 0-d array of that dtype in xp."""
    def adapt(f: Any, be: Any, value: Any = 0) -> Any:
        if isinstance(value, np.generic):
            value = value.item()
        return f(value, dtype=be.dtype(dtype_name))
    return adapt


# -- reductions and sorting ----------------------------------------------------------------

_COUNTING = {"sum": np.int64, "prod": np.int64, "mean": np.float64}


def _reduce(fn: str, with_dtype: bool = True) -> Callable[..., Any]:
    """sum/prod/max/min/all/any/mean(a, axis=None, dtype=None, out=None, keepdims=False, ...)"""
    def adapt(f: Any, be: Any, a: Any, axis: Any = None, *rest: Any, dtype: Any = None,
              out: Any = None, keepdims: bool = False, initial: Any = _NO,
              where: Any = _NO) -> Any:
        if rest:  # NumPy's positional order: (axis, dtype, out, keepdims) or (axis, out, ...)
            names = ("dtype", "out", "keepdims") if with_dtype else ("out", "keepdims")
            given = dict(zip(names, rest))
            dtype, out = given.get("dtype", dtype), given.get("out", out)
            keepdims = given.get("keepdims", keepdims)
        _refuse(fn, f, out=(out, None), initial=(initial, _NO), where=(where, True))
        (x,) = be.arrays((a,))
        if fn in _COUNTING and dtype is None and not be.numpy_like and \
                be.xp.isdtype(x.dtype, "bool"):
            x = be.astype(x, _COUNTING[fn])  # NumPy counts booleans; the standard refuses
        extra = {"dtype": be.dtype(dtype)} if with_dtype and dtype is not None else {}
        result = f(x, axis=_axis(axis), keepdims=keepdims, **extra)
        if dtype is not None and not with_dtype:
            result = be.astype(result, dtype)
        return result
    return adapt


def _axis(axis: Any) -> Any:
    return tuple(axis) if isinstance(axis, list) else axis


def _arg_reduce(fn: str) -> Callable[..., Any]:
    def adapt(f: Any, be: Any, a: Any, axis: Any = None, out: Any = None, *,
              keepdims: bool = False) -> Any:
        _refuse(fn, f, out=(out, None))
        return f(be.arrays((a,))[0], axis=axis, keepdims=keepdims)
    return adapt


def _moment(fn: str) -> Callable[..., Any]:
    """std/var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False)"""
    def adapt(f: Any, be: Any, a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
              ddof: Any = 0, keepdims: bool = False, *, where: Any = _NO, mean: Any = _NO,
              correction: Any = _NO) -> Any:
        _refuse(fn, f, out=(out, None), where=(where, True), mean=(mean, _NO))
        (x,) = be.arrays((a,))
        if dtype is not None:
            x = be.astype(x, dtype)
        corr = ddof if correction is _NO else correction
        return f(x, axis=_axis(axis), correction=corr, keepdims=keepdims)
    return adapt


def _cumulative(fn: str) -> Callable[..., Any]:
    """cumsum/cumprod(a, axis=None, dtype=None, out=None): axis=None flattens first."""
    def adapt(f: Any, be: Any, a: Any, axis: Any = None, dtype: Any = None,
              out: Any = None) -> Any:
        _refuse(fn, f, out=(out, None))
        (x,) = be.arrays((a,))
        if axis is None:
            x, axis = be.resolve_name("reshape")(x, (-1,)), 0
        return f(x, axis=axis, dtype=be.dtype(dtype))
    return adapt


def _sort(fn: str) -> Callable[..., Any]:
    def adapt(f: Any, be: Any, a: Any, axis: Any = -1, kind: Any = None, order: Any = None, *,
              stable: Any = None) -> Any:
        _refuse(fn, f, order=(order, None))
        (x,) = be.arrays((a,))
        if axis is None:
            x, axis = be.resolve_name("reshape")(x, (-1,)), -1
        return f(x, axis=axis, stable=bool(stable) or kind == "stable")
    return adapt


def _count_nonzero(f: Any, be: Any, a: Any, axis: Any = None, *, keepdims: bool = False) -> Any:
    return f(be.arrays((a,))[0], axis=_axis(axis), keepdims=keepdims)


def _bincount(f: Any, be: Any, x: Any, weights: Any = None, minlength: int = 0) -> Any:
    """numpy.bincount, which the array API lacks: each block of ``x`` compared with every bin
    and the matches summed (exact, as NumPy's; time ``len(x) * bins``, memory bounded by the
    blocks).  ``f`` is ``xp.sum``."""
    xp = be.xp
    (x,) = be.arrays((x,))
    if x.ndim != 1:
        raise ValueError("numpy.bincount takes a 1-d array of non-negative integers")
    n = x.shape[0]
    bins = operator.index(minlength)
    if n:
        if int(xp.min(x)) < 0:
            raise ValueError("numpy.bincount: 'x' must have no negative elements")
        bins = max(bins, int(xp.max(x)) + 1)
    ar = xp.arange(bins, dtype=x.dtype)
    w = None if weights is None else be.astype(be.arrays((weights,))[0], np.float64)
    total = xp.zeros(bins, dtype=be.dtype(np.intp if w is None else np.float64))
    step = max(1, 2 ** 22 // max(bins, 1))
    for lo in range(0, n, step):
        hi = min(lo + step, n)  # (a strict namespace refuses slices past the end)
        hit = xp.reshape(x[lo:hi], (-1, 1)) == ar
        if w is None:
            total = total + f(be.astype(hit, np.intp), axis=0)
        else:
            part = xp.reshape(w[lo:hi], (-1, 1))
            total = total + f(xp.where(hit, part, xp.zeros_like(part)), axis=0)
    return total


def _unique(f: Any, be: Any, ar: Any, return_index: bool = False, return_inverse: bool = False,
            return_counts: bool = False, axis: Any = None, *, equal_nan: bool = True,
            sorted: bool = True) -> Any:
    _refuse("unique", f, return_index=(return_index, False),
            return_inverse=(return_inverse, False), return_counts=(return_counts, False),
            axis=(axis, None))
    return be.resolve_name("sort")(f(be.arrays((ar,))[0]))


def _searchsorted(f: Any, be: Any, a: Any, v: Any, side: str = "left",
                  sorter: Any = None) -> Any:
    if be.name == "dask.array":  # (Dask takes arrays of at least one dimension only)
        v = v if be.is_array(v) else be.xp.asarray(v)
        if v.ndim == 0:
            return f(a, be.xp.reshape(v, (1,)), side=side, sorter=sorter)[0]
    return f(*be.arrays((a, v)), side=side, sorter=sorter)


def _diff(f: Any, be: Any, a: Any, n: int = 1, axis: int = -1, prepend: Any = None,
          append: Any = None) -> Any:
    (x,) = be.arrays((a,))
    return f(x, axis=axis, n=n, prepend=_diff_edge(be, x, prepend, axis),
             append=_diff_edge(be, x, append, axis))


def _diff_edge(be: Any, x: Any, v: Any, axis: int) -> Any:
    """``prepend=``/``append=`` as NumPy reads them: a number, or an array missing the axis,
    is one slice along ``axis``, broadcast to the other dimensions (the standard takes
    arrays of the full rank only)."""
    if v is None or be.numpy_like or be.is_array(v) and v.ndim == x.ndim:
        return v
    (v,) = be.arrays((v,), like=x)
    shape = list(x.shape)
    shape[axis] = 1
    return be.resolve_name("broadcast_to")(v, tuple(shape))


def _nonzero(f: Any, be: Any, a: Any) -> Any:
    return f(be.arrays((a,))[0])


# -- shape and indexing --------------------------------------------------------------------

def _reshape(f: Any, be: Any, a: Any, shape: Any = None, order: Any = _NO, *,
             newshape: Any = None, copy: Any = None) -> Any:
    _refuse("reshape", f, order=(order, "C"))
    shape = newshape if shape is None else shape
    return f(a, tuple(shape) if isinstance(shape, (list, tuple)) else (shape,), copy=copy)


def _ravel(f: Any, be: Any, a: Any, order: Any = _NO) -> Any:
    _refuse("ravel", f, order=(order, "C"))
    return f(a, (-1,))


def _transpose(f: Any, be: Any, a: Any, axes: Any = None) -> Any:
    axes = tuple(range(a.ndim))[::-1] if axes is None else tuple(axes)
    return f(a, axes)


def _swapaxes(f: Any, be: Any, a: Any, axis1: int, axis2: int) -> Any:
    axes = list(range(a.ndim))
    axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
    return f(a, tuple(axes))


def _squeeze(f: Any, be: Any, a: Any, axis: Any = None) -> Any:
    (a,) = be.arrays((a,))
    if axis is None:
        axis = tuple(i for i, n in enumerate(a.shape) if n == 1)
    return f(a, axis=axis)


def _expand_dims(f: Any, be: Any, a: Any, axis: Any) -> Any:
    return f(be.arrays((a,))[0], axis=axis)


def _concat(f: Any, be: Any, arrays: Any, axis: Any = 0, out: Any = None, *, dtype: Any = None,
            casting: Any = _NO) -> Any:
    _refuse("concatenate", f, out=(out, None), casting=(casting, "same_kind"))
    if not be.numpy_like and any(not be.is_array(a) for a in arrays):
        # np.concatenate([x[:1], [9.0], x[2:]]): NumPy reads the lists as arrays
        arrays = be.promoted(tuple(a if be.is_array(a) else be.xp.asarray(_stacked(be, a))
                                   for a in arrays))
    result = f(tuple(arrays), axis=axis)
    return result if dtype is None else be.astype(result, dtype)


def _stack(f: Any, be: Any, arrays: Any, axis: int = 0, out: Any = None, *, dtype: Any = None,
           casting: Any = _NO) -> Any:
    _refuse("stack", f, out=(out, None), casting=(casting, "same_kind"))
    result = f(tuple(arrays), axis=axis)
    return result if dtype is None else be.astype(result, dtype)


def _broadcast_to(f: Any, be: Any, array: Any, shape: Any, subok: Any = _NO) -> Any:
    return f(be.arrays((array,))[0], tuple(shape) if isinstance(shape, (list, tuple))
             else (shape,))


def _broadcast_arrays(f: Any, be: Any, *args: Any, subok: Any = _NO) -> Any:
    return tuple(f(*be.arrays(args)))


def _flip(f: Any, be: Any, m: Any, axis: Any = None) -> Any:
    return f(m, axis=axis)


def _roll(f: Any, be: Any, a: Any, shift: Any, axis: Any = None) -> Any:
    return f(a, _integers(shift), axis=None if axis is None else _integers(axis))


def _integers(v: Any) -> Any:
    """An integer argument (NumPy integers, a sequence or a NumPy array of them) as the Python
    ``int`` or tuple of them that ``roll`` and the like take outside NumPy."""
    if isinstance(v, (list, tuple)) or isinstance(v, np.ndarray) and v.ndim:
        return tuple(int(operator.index(i)) for i in v)
    return operator.index(v)


def _tile(f: Any, be: Any, A: Any, reps: Any) -> Any:
    return f(be.arrays((A,))[0], tuple(reps) if isinstance(reps, (list, tuple)) else (reps,))


def _repeat(f: Any, be: Any, a: Any, repeats: Any, axis: Any = None) -> Any:
    (x,) = be.arrays((a,))
    if be.name == "dask.array":  # Dask wants an axis, and one count for every element
        if axis is None:
            x, axis = be.xp.ravel(x), 0
        if isinstance(repeats, (list, tuple, np.ndarray)) and np.ndim(repeats) == 1:
            counts = np.asarray(repeats)
            if counts.size != x.shape[axis]:
                raise ValueError(f"np.repeat: {counts.size} counts for an axis of length "
                                 f"{x.shape[axis]}")
            return be.xp.take(x, np.repeat(np.arange(counts.size), counts), axis=axis)
        return f(x, repeats, axis=axis)
    if isinstance(repeats, (list, tuple, np.ndarray)):
        repeats = be.xp.asarray(np.asarray(repeats))
    return f(x, repeats, axis=axis)


def _moveaxis(f: Any, be: Any, a: Any, source: Any, destination: Any) -> Any:
    return f(a, source, destination)


def _split(even: bool) -> Callable[..., Any]:
    """split/array_split(ary, indices_or_sections, axis=0) by slicing (``f`` is ``moveaxis``:
    the axis goes to the front, each piece comes back)."""
    def adapt(f: Any, be: Any, ary: Any, indices_or_sections: Any,
              axis: int = 0) -> list[Any]:
        front = f(ary, axis, 0)
        n = front.shape[0]
        if isinstance(indices_or_sections, (list, tuple, np.ndarray)) or \
                be.is_array(indices_or_sections):
            cuts = [int(i) for i in indices_or_sections]
        else:
            k = int(indices_or_sections)
            if even and n % k:
                raise ValueError("array split does not result in an equal division")
            size, extra = divmod(n, k)
            cuts = [i * size + min(i, extra) for i in range(1, k)]
        ends = [min(max(c + n if c < 0 else c, 0), n) for c in cuts]  # Python's slice rules,
        bounds = zip([0, *ends], [*ends, n])                            # which strict ones lack
        return [f(front[lo:max(lo, hi), ...], 0, axis) for lo, hi in bounds]
    return adapt


def _take(f: Any, be: Any, a: Any, indices: Any, axis: Any = None, out: Any = None,
          mode: Any = _NO) -> Any:
    _refuse("take", f, out=(out, None), mode=(mode, "raise"))
    ind = indices if be.is_array(indices) else be.upload(np.asarray(indices))
    reshape = be.resolve_name("reshape")
    if axis is None:
        a, axis = reshape(a, (-1,)), 0
    if ind.ndim == 1:
        return f(a, ind, axis=axis)
    # the standard's take (and Dask's) takes 1-d indices: NumPy's n-d ones are flattened, and
    # the result's taken axis becomes the indices' shape
    axis = axis % a.ndim
    out = f(a, reshape(ind, (-1,)), axis=axis)
    return reshape(out, (*a.shape[:axis], *ind.shape, *a.shape[axis + 1:]))


def _take_along_axis(f: Any, be: Any, arr: Any, indices: Any, axis: Any = -1) -> Any:
    return f(arr, indices, axis=axis)


def _astype(f: Any, be: Any, x: Any, dtype: Any, /, *, copy: bool = True,
            device: Any = None) -> Any:
    return f(x, be.dtype(dtype), copy=copy)


# -- dtype queries: answered from the dtype, never by copying an array to the host ---------------

def _result_type(f: Any, be: Any, *arrays_and_dtypes: Any) -> Any:
    """Python types and NumPy dtypes become ``xp``'s; Python numbers stay weak, as in NumPy."""
    args = [a if be.is_array(a) or type(a) in (bool, int, float, complex) else be.dtype(a)
            for a in arrays_and_dtypes]
    try:
        return f(*args)
    except TypeError:  # kinds the array API does not promote together: NumPy's answer
        return be.dtype(np.result_type(*[
            a if type(a) in (bool, int, float, complex)
            else be.numpy_dtype(a.dtype if be.is_array(a) else a) for a in args]))


def _iscomplexobj(f: Any, be: Any, x: Any) -> bool:
    """``f`` is ``xp.result_type``: ``x``'s dtype, of which NumPy's kind letter is asked."""
    if not be.is_array(x):
        return bool(np.iscomplexobj(x))  # a Python number or a dtype-less value: no array
    dtype = f(x)
    if be.numpy_like:
        return bool(np.dtype(dtype).kind == "c")
    return bool(be.xp.isdtype(dtype, "complex floating"))


def _isrealobj(f: Any, be: Any, x: Any) -> bool:
    return not _iscomplexobj(f, be, x)


# NumPy's abstract scalar types as the array API's dtype kinds
_KINDS: dict[Any, Any] = {
    np.bool_: "bool", np.integer: "integral", np.signedinteger: "signed integer",
    np.unsignedinteger: "unsigned integer", np.floating: "real floating",
    np.complexfloating: "complex floating", np.inexact: ("real floating", "complex floating"),
    np.number: "numeric"}


def _issubdtype(f: Any, be: Any, arg1: Any, arg2: Any) -> bool:
    """``f`` is ``xp.result_type``; a dtype of ``xp`` is asked about its kind with
    ``xp.isdtype``, anything NumPy knows is NumPy's question."""
    if be.numpy_like or isinstance(arg1, (type, np.dtype, str)):
        return bool(np.issubdtype(arg1, arg2))
    dtype = f(arg1)
    kind = _KINDS.get(arg2)
    if kind is None:
        return bool(dtype == be.dtype(arg2))
    return bool(be.xp.isdtype(dtype, kind))


# -- linear algebra ------------------------------------------------------------------------

def _matmul(f: Any, be: Any, x1: Any, x2: Any, /, out: Any = None, **kwargs: Any) -> Any:
    _refuse("matmul", f, out=(out, None))
    return f(*be.arrays((x1, x2)))


def _dot(f: Any, be: Any, a: Any, b: Any, out: Any = None) -> Any:
    _refuse("dot", f, out=(out, None))
    a, b = be.arrays((a, b))
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    if a.ndim > 2 or b.ndim > 2:
        raise UnsupportedArgumentError(
            f"numpy.dot of {a.ndim}-d and {b.ndim}-d arrays has no counterpart in "
            f"{be.name}.matmul (it only agrees with numpy.dot up to 2-d); use numpy.tensordot "
            f"or numpy.einsum")
    return f(a, b)


def _tensordot(f: Any, be: Any, a: Any, b: Any, axes: Any = 2) -> Any:
    return f(a, b, axes=axes)


def _vecdot(f: Any, be: Any, x1: Any, x2: Any, /, *, axis: int = -1, **kwargs: Any) -> Any:
    return f(x1, x2, axis=axis)


def _outer(f: Any, be: Any, a: Any, b: Any, out: Any = None) -> Any:
    _refuse("outer", f, out=(out, None))
    a, b = be.arrays((a, b))
    reshape = be.resolve_name("reshape")
    return f(reshape(a, (-1,)), reshape(b, (-1,)))


def _trace(f: Any, be: Any, a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1,
           dtype: Any = None, out: Any = None) -> Any:
    _refuse("trace", f, out=(out, None))
    if a.ndim != 2 and (axis1 % a.ndim, axis2 % a.ndim) != (a.ndim - 2, a.ndim - 1):
        raise UnsupportedArgumentError(
            f"numpy.trace over axes ({axis1}, {axis2}) of a {a.ndim}-d array has no counterpart "
            f"in {be.name}.linalg.trace (the last two axes)")
    return f(a, offset=offset, dtype=be.dtype(dtype))


def _diagonal(f: Any, be: Any, a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    if a.ndim != 2 and (axis1 % a.ndim, axis2 % a.ndim) != (a.ndim - 2, a.ndim - 1):
        raise UnsupportedArgumentError(
            f"numpy.diagonal over axes ({axis1}, {axis2}) of a {a.ndim}-d array has no "
            f"counterpart in {be.name}.linalg.diagonal (the last two axes)")
    return f(a, offset=offset)


def _einsum(f: Any, be: Any, *operands: Any, out: Any = None, dtype: Any = None,
            order: Any = _NO, casting: Any = _NO, optimize: Any = False) -> Any:
    """numpy.einsum, which the array API lacks (``f`` is ``xp.matmul``): an operand's repeated
    letters become its diagonal, letters no later step needs are summed, and the operands are
    contracted left to right, two at a time, by one batched ``matmul``.  ``optimize`` only
    chooses an order in NumPy: the result is the same."""
    _refuse("einsum", f, out=(out, None), order=(order, "K"), casting=(casting, "safe"))
    if not isinstance(operands[0], str):
        raise UnsupportedArgumentError(
            f"numpy.einsum(operand, sublist, ...) has no counterpart in {be.name}; write the "
            f"subscripts as a string inside the context")
    spec = operands[0].replace(" ", "")
    ops = list(be.arrays(tuple(operands[1:])))
    ins, arrow, out_subs = spec.partition("->")
    subs = ins.split(",")
    if len(subs) != len(ops):
        raise ValueError(f"numpy.einsum: {len(subs)} subscripts for {len(ops)} operands")
    spare = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in spec]
    ranks = [op.ndim - len(s) + 3 for s, op in zip(subs, ops) if "..." in s]
    ell = "".join(spare[:max(ranks, default=0)])
    subs = [s.replace("...", ell[len(ell) - op.ndim + len(s) - 3:]) if "..." in s else s
            for s, op in zip(subs, ops)]
    if arrow:
        out_subs = out_subs.replace("...", ell)
    else:  # NumPy's implicit output: the ellipsis, then the letters used once, sorted
        letters = "".join(subs)
        out_subs = ell + "".join(sorted(c for c in set(letters) - set(ell)
                                        if letters.count(c) == 1))
    for s, op in zip(subs, ops):
        if len(s) != op.ndim:
            raise ValueError(f"numpy.einsum: subscripts {s!r} for a {op.ndim}-d operand")
    acc, acc_s = _einsum_diagonals(be, ops[0], subs[0])
    for k in range(1, len(ops)):
        b, b_s = _einsum_diagonals(be, ops[k], subs[k])
        later = set(out_subs).union(*(set(t) for t in subs[k + 1:]))
        acc, acc_s = _einsum_keep(be, acc, acc_s, later | set(b_s))
        b, b_s = _einsum_keep(be, b, b_s, later | set(acc_s))
        acc, acc_s = _einsum_pair(f, be, acc, acc_s, b, b_s, later)
    acc, acc_s = _einsum_keep(be, acc, acc_s, set(out_subs))
    result = be.xp.permute_dims(acc, tuple(acc_s.index(c) for c in out_subs))
    return result if dtype is None else be.astype(result, dtype)


def _einsum_diagonals(be: Any, x: Any, s: str) -> tuple[Any, str]:
    """``x`` (subscripts ``s``) with each repeated letter's axes made one, their diagonal."""
    xp = be.xp
    while len(set(s)) != len(s):
        c = next(c for c in s if s.count(c) > 1)
        i = s.index(c)
        j = s.index(c, i + 1)
        rest = [a for a in range(x.ndim) if a not in (i, j)]
        x = xp.permute_dims(x, (*rest, i, j))
        n = x.shape[-1]
        on = xp.reshape(xp.arange(n), (n, 1)) == xp.arange(n)
        x = xp.sum(xp.where(on, x, xp.zeros_like(x)), axis=-1)
        s = "".join(s[a] for a in rest) + c
    return x, s


def _einsum_keep(be: Any, x: Any, s: str, keep: set[str]) -> tuple[Any, str]:
    """``x`` summed over the letters of ``s`` not in ``keep``."""
    axes = tuple(i for i, c in enumerate(s) if c not in keep)
    if not axes:
        return x, s
    return be.xp.sum(x, axis=axes), "".join(c for c in s if c in keep)


def _einsum_pair(f: Any, be: Any, a: Any, a_s: str, b: Any, b_s: str,
                 later: set[str]) -> tuple[Any, str]:
    """The product of ``a`` and ``b`` summed over their shared letters not in ``later``: the
    shared letters kept are a batch, the rest of each operand its rows or columns."""
    xp = be.xp
    size = {c: n for s, x in ((a_s, a), (b_s, b)) for c, n in zip(s, x.shape) if n != 1}
    batch = [c for c in a_s if c in b_s and c in later]
    inner = [c for c in a_s if c in b_s and c not in later]
    rows = [c for c in a_s if c not in b_s]
    cols = [c for c in b_s if c not in a_s]

    def arranged(x: Any, s: str, order: list[str]) -> Any:
        x = xp.permute_dims(x, tuple(s.index(c) for c in order))
        return xp.broadcast_to(x, tuple(size.get(c, 1) for c in order))

    def count(letters: list[str]) -> int:
        return math.prod(size.get(c, 1) for c in letters)

    left = xp.reshape(arranged(a, a_s, batch + rows + inner),
                      (count(batch), count(rows), count(inner)))
    right = xp.reshape(arranged(b, b_s, batch + inner + cols),
                       (count(batch), count(inner), count(cols)))
    product = f(*be.promoted((left, right)))
    letters = batch + rows + cols
    return xp.reshape(product, tuple(size.get(c, 1) for c in letters)), "".join(letters)


def _cross(f: Any, be: Any, a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1,
           axis: Any = None) -> Any:
    return f(a, b, axis=-1 if axis is None else axis)


def _qr(f: Any, be: Any, a: Any, mode: str = "reduced") -> Any:
    if mode == "r":  # NumPy's R alone; the standard has "reduced" and "complete" only
        return f(a, mode="reduced")[1]
    if mode not in ("reduced", "complete"):
        raise UnsupportedArgumentError(
            f"numpy.linalg.qr(mode={mode!r}) has no counterpart in {be.name}.linalg.qr")
    return tuple(f(a, mode=mode))


def _svd(f: Any, be: Any, a: Any, full_matrices: bool = True, compute_uv: bool = True,
         hermitian: bool = False) -> Any:
    if not compute_uv:
        return be.resolve_name("linalg.svdvals")(a)
    return tuple(f(a, full_matrices=full_matrices))


def _eig(f: Any, be: Any, a: Any, *rest: Any, **kwargs: Any) -> Any:
    return tuple(f(a, *rest, **kwargs))


def _real_if_real(be: Any, a: Any, out: Any) -> Any:
    """NumPy's eig/eigvals of a real matrix are real when every imaginary part is zero."""
    if _kind_of(be, a) == "complex floating" or be.numpy_like:
        return out
    imag = be.xp.imag(out)
    return be.xp.real(out) if not bool(be.xp.any(imag != 0)) else out


def _eig_general(f: Any, be: Any, a: Any) -> Any:
    w, v = f(a)
    if _kind_of(be, a) != "complex floating" and not be.numpy_like and not bool(
            be.xp.any(be.xp.imag(w) != 0)):
        return be.xp.real(w), be.xp.real(v)
    return w, v


def _eigvals(f: Any, be: Any, a: Any) -> Any:
    return _real_if_real(be, a, f(a))


def _slogdet(f: Any, be: Any, a: Any) -> Any:
    return tuple(f(a))


def _norm(f: Any, be: Any, x: Any, ord: Any = None, axis: Any = None,
          keepdims: bool = False) -> Any:
    if axis is None and x.ndim == 2 and ord not in (None, 2.0) or (
            isinstance(axis, tuple) and len(axis) == 2):
        return be.resolve_name("linalg.matrix_norm")(
            x, ord="fro" if ord is None else ord, keepdims=keepdims)
    if axis is None and x.ndim == 2 and ord == 2:
        return be.resolve_name("linalg.matrix_norm")(x, ord=2, keepdims=keepdims)
    return f(x, ord=2 if ord is None else ord, axis=axis, keepdims=keepdims)


def _pinv(f: Any, be: Any, a: Any, rcond: Any = None, hermitian: bool = False, *,
          rtol: Any = None) -> Any:
    return f(a, rtol=rtol if rcond is None else rcond)


def _matrix_rank(f: Any, be: Any, A: Any, tol: Any = None, hermitian: bool = False, *,
                 rtol: Any = None) -> Any:
    _refuse("linalg.matrix_rank", f, tol=(tol, None))
    return f(A, rtol=rtol)


def _cholesky(f: Any, be: Any, a: Any, /, *, upper: bool = False) -> Any:
    return f(a, upper=upper)


# -- fft -----------------------------------------------------------------------------------

def _fft_input(be: Any, a: Any, complex_in: bool) -> Any:
    """NumPy's fft takes any numbers; the standard's takes complex (fft, ifft, irfft, hfft) or
    real floating (rfft, ihfft) input: cast like NumPy does internally."""
    (x,) = be.arrays((a,))
    if be.numpy_like:
        return x
    kind = _kind_of(be, x)
    if complex_in and kind != "complex floating":
        wide = kind != "real floating" or x.dtype == be.xp.float64
        return be.astype(x, np.complex128 if wide else np.complex64)
    if not complex_in and kind != "real floating":
        return be.astype(x, np.float64)
    return x


def _kind_of(be: Any, x: Any) -> str | None:
    for kind in ("bool", "integral", "real floating", "complex floating"):
        if be.xp.isdtype(x.dtype, kind):
            return kind
    return None


def _fft1(complex_in: bool) -> Callable[..., Any]:
    def adapt(f: Any, be: Any, a: Any, n: Any = None, axis: int = -1, norm: Any = None,
              out: Any = None) -> Any:
        _refuse("fft", f, out=(out, None))
        return f(_fft_input(be, a, complex_in), n=n, axis=axis, norm=norm or "backward")
    return adapt


def _fftn(complex_in: bool) -> Callable[..., Any]:
    def adapt(f: Any, be: Any, a: Any, s: Any = None, axes: Any = None, norm: Any = None,
              out: Any = None) -> Any:
        _refuse("fft", f, out=(out, None))
        return f(_fft_input(be, a, complex_in), s=s, axes=axes, norm=norm or "backward")
    return adapt


def _fft2(complex_in: bool) -> Callable[..., Any]:
    inner = _fftn(complex_in)

    def adapt(f: Any, be: Any, a: Any, s: Any = None, axes: Any = (-2, -1), norm: Any = None,
              out: Any = None) -> Any:
        return inner(f, be, a, s, axes, norm, out)
    return adapt


def _fftfreq(f: Any, be: Any, n: int, d: float = 1.0, device: Any = None) -> Any:
    return f(n, d=d)


def _shift(f: Any, be: Any, x: Any, axes: Any = None) -> Any:
    return f(x, axes=axes)


# -- scalar math -------------------------------------------------------------------------

def _math_log(f: Any, be: Any, x: Any, base: Any = None) -> Any:
    (x,) = be.arrays((x,))
    return f(x) if base is None else f(x) / f(be.arrays((base,), like=x)[0])


def _math_hypot(f: Any, be: Any, *coordinates: Any) -> Any:
    arrays = be.arrays(coordinates)
    if len(arrays) == 2:
        return f(*arrays)
    sqrt = be.resolve_name("sqrt")
    return sqrt(sum(a * a for a in arrays))


def _math_degrees(f: Any, be: Any, x: Any) -> Any:
    return f(be.arrays((x,))[0], 180.0 / math.pi)


def _math_radians(f: Any, be: Any, x: Any) -> Any:
    return f(be.arrays((x,))[0], math.pi / 180.0)


# -- the tables ----------------------------------------------------------------------------

def _np(path: str) -> Any:
    """``numpy.<path>``, or None where this NumPy lacks it (then the entry is left out)."""
    obj: Any = np
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _family(pairs: dict[str, Any], kind: str = "call", adapt: Any = None,
            source: Any = None) -> dict[Any, Rule]:
    """``{numpy name: xp name or Rule}`` -> ``{numpy callable: Rule}`` (absent names skipped)."""
    table: dict[Any, Rule] = {}
    for np_name, target in pairs.items():
        fn = getattr(source, np_name, None) if source is not None else _np(np_name)
        if fn is None:
            continue
        table[fn] = target if isinstance(target, Rule) else Rule(target, adapt, kind)
    return table


def _names(words: str) -> dict[str, str]:
    """``"sin cos linalg.inv"`` -> ``{"sin": "sin", ...}``: a counterpart of the same name."""
    return {w: w for w in words.split()}


# The array-API standard (2024.12 and later): what every conforming namespace provides.
_DEFAULT_UNARY = {
    "absolute": "abs", "fabs": "abs", "negative": "negative", "positive": "positive",
    "sqrt": "sqrt", "square": "square", "exp": "exp", "expm1": "expm1", "log": "log",
    "log1p": "log1p", "log2": "log2", "log10": "log10", "sin": "sin", "cos": "cos",
    "tan": "tan", "arcsin": "asin", "arccos": "acos", "arctan": "atan", "sinh": "sinh",
    "cosh": "cosh", "tanh": "tanh", "arcsinh": "asinh", "arccosh": "acosh",
    "arctanh": "atanh", "floor": "floor", "ceil": "ceil", "trunc": "trunc", "rint": "round",
    "sign": "sign", "signbit": "signbit", "isnan": "isnan", "isinf": "isinf",
    "isfinite": "isfinite", "logical_not": "logical_not", "invert": "bitwise_invert",
    "conjugate": "conj", "reciprocal": "reciprocal",
}
_DEFAULT_BINARY = {
    "add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide",
    "floor_divide": "floor_divide", "remainder": "remainder", "power": "pow",
    "arctan2": "atan2", "hypot": "hypot", "copysign": "copysign", "nextafter": "nextafter",
    "maximum": "maximum", "minimum": "minimum", "logaddexp": "logaddexp",
    "logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor",
    "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor",
    "left_shift": "bitwise_left_shift", "right_shift": "bitwise_right_shift",
    "equal": "equal", "not_equal": "not_equal", "less": "less", "less_equal": "less_equal",
    "greater": "greater", "greater_equal": "greater_equal",
}
# NumPy 2's own array-API spellings (numpy.asin, numpy.concat...) are the same callables as
# the classic ones or thin aliases; listing them keeps code written either way on the device.
_DEFAULT_ALIASES = {"acos": "acos", "asin": "asin", "atan": "atan", "atan2": "atan2",
                    "acosh": "acosh", "asinh": "asinh", "atanh": "atanh", "pow": "pow",
                    "bitwise_invert": "bitwise_invert",
                    "bitwise_left_shift": "bitwise_left_shift",
                    "bitwise_right_shift": "bitwise_right_shift"}

# The creation functions, adapted alike for every namespace that needs NumPy's signatures
# (its dtype=, shape forms and defaults) read into its own
_CREATION: dict[str, Rule] = {
    "zeros": Rule("zeros", _filled("zeros"), "creation"),
    "ones": Rule("ones", _filled("ones"), "creation"),
    "empty": Rule("empty", _filled("empty"), "creation"),
    "full": Rule("full", _full, "creation"),
    "zeros_like": Rule("zeros_like", _like("zeros_like"), "creation"),
    "ones_like": Rule("ones_like", _like("ones_like"), "creation"),
    "empty_like": Rule("empty_like", _like("empty_like"), "creation"),
    "full_like": Rule("full_like", _full_like, "creation"),
    "arange": Rule("arange", _arange, "creation"),
    "linspace": Rule("linspace", _linspace, "creation"),
}


DEFAULT: dict[Any, Rule] = {
    # elementwise (NumPy ufuncs)
    **_family(_DEFAULT_UNARY, "elementwise", _unary_only),
    **_family(_DEFAULT_BINARY, "elementwise", _elementwise),
    **_family(_DEFAULT_ALIASES, "elementwise", _elementwise),
    **_family({"clip": Rule("clip", _clip, "elementwise"),
               "round": Rule("round", _round, "elementwise"),
               "around": Rule("round", _round, "elementwise"),
               "where": Rule("where", _where),
               "real": Rule("real", _real_part, "elementwise"),
               "imag": Rule("imag", _imag_part, "elementwise")}),
    # creation
    **_family({"asarray": Rule("asarray", _asarray, "upload"),
               "asanyarray": Rule("asarray", _asarray, "upload"),
               "ascontiguousarray": Rule("asarray", _asarray, "upload"),
               "array": Rule("asarray", _array, "upload"),
               "copy": Rule("asarray", _copy),
               **_CREATION,
               "eye": Rule("eye", _eye, "creation"),
               "identity": Rule("eye", _identity, "creation"),
               "meshgrid": Rule("meshgrid", _meshgrid),
               "tril": Rule("tril", _tri), "triu": Rule("triu", _tri),
               "tri": Rule("arange", _tri_matrix, "creation"),
               "float32": Rule("asarray", _scalar("float32")),
               "float64": Rule("asarray", _scalar("float64")),
               "int8": Rule("asarray", _scalar("int8")),
               "int16": Rule("asarray", _scalar("int16")),
               "int32": Rule("asarray", _scalar("int32")),
               "int64": Rule("asarray", _scalar("int64")),
               "uint8": Rule("asarray", _scalar("uint8")),
               "complex64": Rule("asarray", _scalar("complex64")),
               "complex128": Rule("asarray", _scalar("complex128")),
               "bool_": Rule("asarray", _scalar("bool"))}),
    # reductions, sorting, searching
    **_family({"sum": Rule("sum", _reduce("sum")), "prod": Rule("prod", _reduce("prod")),
               "mean": Rule("mean", _reduce("mean", with_dtype=False)),
               "max": Rule("max", _reduce("max", with_dtype=False)),
               "amax": Rule("max", _reduce("amax", with_dtype=False)),
               "min": Rule("min", _reduce("min", with_dtype=False)),
               "amin": Rule("min", _reduce("amin", with_dtype=False)),
               "all": Rule("all", _reduce("all", with_dtype=False)),
               "any": Rule("any", _reduce("any", with_dtype=False)),
               "std": Rule("std", _moment("std")), "var": Rule("var", _moment("var")),
               "argmax": Rule("argmax", _arg_reduce("argmax")),
               "argmin": Rule("argmin", _arg_reduce("argmin")),
               "cumsum": Rule("cumulative_sum", _cumulative("cumsum")),
               "cumprod": Rule("cumulative_prod", _cumulative("cumprod")),
               "cumulative_sum": Rule("cumulative_sum"),
               "cumulative_prod": Rule("cumulative_prod"),
               "count_nonzero": Rule("count_nonzero", _count_nonzero),
               "bincount": Rule("sum", _bincount),
               "sort": Rule("sort", _sort("sort")),
               "argsort": Rule("argsort", _sort("argsort")),
               "unique": Rule("unique_values", _unique),
               "unique_values": Rule("unique_values"),
               "searchsorted": Rule("searchsorted", _searchsorted),
               "diff": Rule("diff", _diff),
               "nonzero": Rule("nonzero", _nonzero)}),
    # shape and indexing
    **_family({"reshape": Rule("reshape", _reshape), "ravel": Rule("reshape", _ravel),
               "transpose": Rule("permute_dims", _transpose),
               "permute_dims": Rule("permute_dims", _transpose),
               "swapaxes": Rule("permute_dims", _swapaxes),
               "matrix_transpose": Rule("matrix_transpose"),
               "moveaxis": Rule("moveaxis", _moveaxis),
               "split": Rule("moveaxis", _split(True)),
               "array_split": Rule("moveaxis", _split(False)),
               "unstack": Rule("unstack"),
               "squeeze": Rule("squeeze", _squeeze),
               "expand_dims": Rule("expand_dims", _expand_dims),
               "concatenate": Rule("concat", _concat), "concat": Rule("concat", _concat),
               "stack": Rule("stack", _stack),
               "broadcast_to": Rule("broadcast_to", _broadcast_to),
               "broadcast_arrays": Rule("broadcast_arrays", _broadcast_arrays),
               "flip": Rule("flip", _flip), "roll": Rule("roll", _roll),
               "tile": Rule("tile", _tile), "repeat": Rule("repeat", _repeat),
               "take": Rule("take", _take),
               "take_along_axis": Rule("take_along_axis", _take_along_axis),
               "astype": Rule("astype", _astype)}),
    # dtype queries
    **_family({"result_type": Rule("result_type", _result_type),
               "iscomplexobj": Rule("result_type", _iscomplexobj),
               "isrealobj": Rule("result_type", _isrealobj),
               "issubdtype": Rule("result_type", _issubdtype)}),
    # linear algebra
    **_family({"matmul": Rule("matmul", _matmul), "dot": Rule("matmul", _dot),
               "einsum": Rule("matmul", _einsum),
               "tensordot": Rule("tensordot", _tensordot),
               "vecdot": Rule("vecdot", _vecdot),
               "outer": Rule("linalg.outer", _outer),
               "trace": Rule("linalg.trace", _trace),
               "diagonal": Rule("linalg.diagonal", _diagonal),
               "cross": Rule("linalg.cross", _cross),
               "linalg.inv": Rule("linalg.inv"), "linalg.det": Rule("linalg.det"),
               "linalg.solve": Rule("linalg.solve"),
               "linalg.cholesky": Rule("linalg.cholesky", _cholesky),
               "linalg.qr": Rule("linalg.qr", _qr), "linalg.svd": Rule("linalg.svd", _svd),
               "linalg.svdvals": Rule("linalg.svdvals"),
               "linalg.eigh": Rule("linalg.eigh", _eig),
               "linalg.eigvalsh": Rule("linalg.eigvalsh"),
               "linalg.eig": Rule("linalg.eig", _eig_general),
               "linalg.eigvals": Rule("linalg.eigvals", _eigvals),
               "linalg.norm": Rule("linalg.vector_norm", _norm),
               "linalg.vector_norm": Rule("linalg.vector_norm"),
               "linalg.matrix_norm": Rule("linalg.matrix_norm"),
               "linalg.pinv": Rule("linalg.pinv", _pinv),
               "linalg.matrix_rank": Rule("linalg.matrix_rank", _matrix_rank),
               "linalg.slogdet": Rule("linalg.slogdet", _slogdet),
               "linalg.matrix_power": Rule("linalg.matrix_power"),
               "linalg.cross": Rule("linalg.cross"), "linalg.outer": Rule("linalg.outer"),
               "linalg.matmul": Rule("linalg.matmul"),
               "linalg.tensordot": Rule("linalg.tensordot"),
               "linalg.vecdot": Rule("linalg.vecdot"),
               "linalg.trace": Rule("linalg.trace"),
               "linalg.diagonal": Rule("linalg.diagonal"),
               "linalg.matrix_transpose": Rule("linalg.matrix_transpose")}),
    # fft
    **_family({**{f"fft.{n}": Rule(f"fft.{n}", _fft1(n not in ("rfft", "ihfft")))
                  for n in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")},
               **{f"fft.{n}": Rule(f"fft.{n}", _fftn(n != "rfftn"))
                  for n in ("fftn", "ifftn", "rfftn", "irfftn")},
               **{f"fft.{n}2": Rule(f"fft.{n}n", _fft2(n != "rfft"))
                  for n in ("fft", "ifft", "rfft", "irfft")},
               "fft.fftfreq": Rule("fft.fftfreq", _fftfreq),
               "fft.rfftfreq": Rule("fft.rfftfreq", _fftfreq),
               "fft.fftshift": Rule("fft.fftshift", _shift),
               "fft.ifftshift": Rule("fft.ifftshift", _shift)}),
    # scalar math: swapped only when an argument is an array (kind "math")
    **_family({"exp": "exp", "expm1": "expm1", "log1p": "log1p", "log2": "log2",
               "log10": "log10", "sqrt": "sqrt", "sin": "sin", "cos": "cos", "tan": "tan",
               "asin": "asin", "acos": "acos", "atan": "atan", "atan2": "atan2",
               "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "asinh": "asinh",
               "acosh": "acosh", "atanh": "atanh", "floor": "floor", "ceil": "ceil",
               "trunc": "trunc", "fabs": "abs", "copysign": "copysign", "pow": "pow",
               "isnan": "isnan", "isinf": "isinf", "isfinite": "isfinite",
               "nextafter": "nextafter",
               "log": Rule("log", _math_log, "math"),
               "hypot": Rule("hypot", _math_hypot, "math"),
               "degrees": Rule("multiply", _math_degrees, "math"),
               "radians": Rule("multiply", _math_radians, "math")},
              "math", _elementwise, source=math),
}

# -- CuPy: NumPy's names, as CuPy spells them ------------------------------------------------
# Same signatures as NumPy, so no adapters: the arguments go through untouched.
_NUMPY_LIKE_UFUNCS = (
    "absolute fabs negative positive sqrt cbrt square exp exp2 expm1 log log1p log2 log10 sin "
    "cos tan arcsin arccos arctan sinh cosh tanh arcsinh arccosh arctanh deg2rad rad2deg "
    "degrees radians floor ceil trunc rint fix sign signbit isnan isinf isfinite logical_not "
    "invert conjugate real imag reciprocal angle add subtract multiply divide floor_divide "
    "remainder fmod power float_power arctan2 hypot copysign nextafter maximum minimum fmax "
    "fmin logaddexp logaddexp2 logical_and logical_or logical_xor bitwise_and bitwise_or "
    "bitwise_xor left_shift right_shift equal not_equal less less_equal greater greater_equal "
    "clip round around sinc heaviside nan_to_num i0 gcd lcm ldexp frexp modf")
_NUMPY_LIKE_REST = (
    "where asarray asanyarray ascontiguousarray array copy zeros ones empty full zeros_like "
    "ones_like empty_like full_like arange linspace logspace eye identity meshgrid tril triu "
    "diag diagflat sum prod mean std var max amax min amin all any argmax argmin cumsum cumprod "
    "nansum nanprod nanmean nanstd nanvar nanmax nanmin nanargmax nanargmin median "
    "nanmedian percentile quantile average ptp count_nonzero sort argsort unique searchsorted "
    "diff nonzero argwhere flatnonzero reshape ravel transpose swapaxes moveaxis squeeze "
    "expand_dims concatenate stack vstack hstack dstack column_stack split array_split "
    "broadcast_to broadcast_arrays flip fliplr flipud roll rot90 tile repeat take "
    "take_along_axis put_along_axis atleast_1d atleast_2d atleast_3d matmul dot vdot inner "
    "outer tensordot einsum kron trace diagonal cross cov corrcoef histogram bincount "
    "isclose allclose array_equal interp convolve correlate float16 float32 float64 int8 int16 "
    "int32 int64 uint8 complex64 complex128 bool_ "
    "linalg.inv linalg.det linalg.solve linalg.cholesky linalg.qr linalg.svd linalg.eigh "
    "linalg.eigvalsh linalg.norm linalg.pinv linalg.matrix_rank linalg.slogdet "
    "linalg.matrix_power linalg.lstsq linalg.tensorinv linalg.tensorsolve "
    "fft.fft fft.ifft fft.fft2 fft.ifft2 fft.fftn fft.ifftn fft.rfft fft.irfft fft.rfft2 "
    "fft.irfft2 fft.rfftn fft.irfftn fft.hfft fft.ihfft fft.fftfreq fft.rfftfreq fft.fftshift "
    "fft.ifftshift")
_RANDOM = (
    "rand randn random random_sample ranf sample uniform normal standard_normal randint "
    "choice permutation shuffle seed beta binomial exponential gamma poisson lognormal "
    "laplace standard_exponential default_rng")

# NumPy 2's array-API additions CuPy spells the NumPy 1 way.
def _np_vecdot(f: Any, be: Any, x1: Any, x2: Any, /, *, axis: int = -1, **kwargs: Any) -> Any:
    return f(be.xp.conj(x1) * x2, axis=axis)


def _np_vector_norm(f: Any, be: Any, x: Any, /, *, axis: Any = None, keepdims: bool = False,
                    ord: Any = 2) -> Any:
    if axis is None:
        x, axis = x.reshape(-1), 0
    return f(x, ord=ord, axis=axis, keepdims=keepdims)


def _np_matrix_norm(f: Any, be: Any, x: Any, /, *, keepdims: bool = False,
                    ord: Any = "fro") -> Any:
    return f(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def _np_last_two(f: Any, be: Any, x: Any, /, *, offset: int = 0, **kwargs: Any) -> Any:
    return f(x, offset=offset, axis1=-2, axis2=-1, **kwargs)


def _np_svdvals(f: Any, be: Any, x: Any, /) -> Any:
    return f(x, compute_uv=False)


def _np_tensordot(f: Any, be: Any, x1: Any, x2: Any, /, *, axes: Any = 2) -> Any:
    return f(x1, x2, axes=axes)


def _np_reduction(f: Any, be: Any, *args: Any, where: Any = _NO, initial: Any = _NO,
                  **kwargs: Any) -> Any:
    """NumPy's reductions take ``where=`` and ``initial=``, CuPy's and Dask's do not:
    ``where=True`` (what NumPy code such as overdub_ad's rules passes for "everywhere") is
    dropped, other masks and any ``initial`` refused."""
    _refuse(getattr(f, "__name__", "reduction"), f, where=(where, True),
            initial=(initial, _NO))
    return f(*args, **kwargs)


def _np_unstack(f: Any, be: Any, x: Any, /, *, axis: int = 0) -> tuple[Any, ...]:
    """``unstack`` (NumPy 2.1, the array API) where the namespace lacks it (``f`` is
    ``moveaxis``)."""
    front = f(x, axis, 0)
    return tuple(front[i, ...] for i in range(front.shape[0]))


# NumPy's reductions, with where=, in namespaces spelled the NumPy way
_NUMPY_LIKE_REDUCTIONS = {n: Rule(n, _np_reduction) for n in (
    "sum prod mean std var max min all any nansum nanmean nanstd nanvar nanmax nanmin").split()}


_CUPY_ARRAY_API = {
    "vecdot": Rule("sum", _np_vecdot), "linalg.vecdot": Rule("sum", _np_vecdot),
    "linalg.vector_norm": Rule("linalg.norm", _np_vector_norm),
    "linalg.matrix_norm": Rule("linalg.norm", _np_matrix_norm),
    "linalg.trace": Rule("trace", _np_last_two),
    "linalg.diagonal": Rule("diagonal", _np_last_two),
    "linalg.outer": Rule("outer"), "linalg.tensordot": Rule("tensordot", _np_tensordot),
    "linalg.svdvals": Rule("linalg.svd", _np_svdvals),
}

CUPY: dict[Any, Rule] = {
    **_family(_CUPY_ARRAY_API),
    **_family(_names(_NUMPY_LIKE_UFUNCS), "elementwise"),
    **_family(_names(_NUMPY_LIKE_REST)),
    **_family({**_NUMPY_LIKE_REDUCTIONS, **{n: Rule(n, _np_reduction) for n in (
        "amax", "amin", "nanprod")}, "unstack": Rule("moveaxis", _np_unstack)}),
    **_family({n: Rule(n, None, "creation") for n in (
        "zeros ones empty full zeros_like ones_like empty_like full_like arange linspace "
        "logspace eye identity").split()}),
    **_family({n: Rule(n, None, "upload") for n in (
        "asarray asanyarray ascontiguousarray array").split()}),
    **_family({f"random.{n}": Rule(f"random.{n}", None, "random") for n in _RANDOM.split()}),
    **_family({"random.RandomState": "random.RandomState"}),  # NumPy's methods, in CuPy
}

# -- Dask: NumPy's names with Dask's own signatures ------------------------------------------
# dask.array spells most functions the NumPy way but not always with NumPy's parameters: a
# positional argument may mean something else there (``da.eye(N, chunks, M)``), a default may
# differ (``da.take``'s ``axis=0``, ``da.linalg.cholesky``'s upper factor).  Each such name
# gets an adapter here; the rest take NumPy's arguments as they are.

def _dask_eye(f: Any, be: Any, N: int, M: int | None = None, k: int = 0, dtype: Any = float,
              order: Any = _NO, *, like: Any = _NO, device: Any = None) -> Any:
    _refuse("eye", f, order=(order, "C"), like=(like, None))
    dtype = float if dtype is None else dtype
    if M is None or M == N:
        return f(N, k=k, dtype=dtype)  # da.eye's 2nd parameter is chunks, not M
    side = max(N, M)  # da.eye(N, M=M) with N != M builds a graph that cannot be computed
    return f(side, k=k, dtype=dtype)[:N, :M]


def _dask_asarray(f: Any, be: Any, a: Any, dtype: Any = None, order: Any = None, *,
                  device: Any = None, copy: Any = None, like: Any = _NO) -> Any:
    """``da.asarray``'s second parameter is ``allow_unknown_chunksizes``, not ``dtype``."""
    _refuse("asarray", f, like=(like, None))
    if order not in (None, "K", "A", "C"):
        _refuse("asarray", f, order=(order, "C"))
    out = f(_stacked(be, a), dtype=dtype)
    return _dask_fresh(be, a, out) if copy else out


def _dask_array(f: Any, be: Any, a: Any, dtype: Any = None, *, copy: bool = True,
                order: Any = _NO, subok: Any = _NO, ndmin: Any = _NO, like: Any = _NO) -> Any:
    _refuse("array", f, order=(order, "K"), like=(like, None))  # (subok=: see _array)
    out = f(_stacked(be, a), dtype=dtype)
    out = _dask_fresh(be, a, out) if copy else out
    if ndmin is not _NO and ndmin > out.ndim:
        out = out.reshape((1,) * (ndmin - out.ndim) + tuple(out.shape))
    return out


def _dask_fresh(be: Any, a: Any, out: Any) -> Any:
    """NumPy's copy is a new array: ``da.asarray(x)`` returns ``x`` itself, and a later
    ``y[i] = v`` would write into the caller's ``x``."""
    return out.copy() if out is a else out


def _dask_copy(f: Any, be: Any, a: Any, order: Any = _NO, subok: Any = _NO) -> Any:
    _refuse("copy", f, order=(order, "K"))
    return _dask_fresh(be, a, f(a))


def _dask_scalar(dtype_name: str) -> Callable[..., Any]:
    """``numpy.float32(v)``: a NumPy scalar, which Dask takes where NumPy does (``arange``'s
    bounds, a fill value); of an array, the array cast."""
    def adapt(f: Any, be: Any, value: Any = 0) -> Any:
        if be.is_array(value):
            return be.astype(value, dtype_name)
        return np.dtype(dtype_name).type(value)
    return adapt


def _dask_reshape(f: Any, be: Any, a: Any, shape: Any = None, order: Any = _NO, *,
                  newshape: Any = None, copy: Any = None) -> Any:
    _refuse("reshape", f, order=(order, "C"))  # da.reshape's 3rd is merge_chunks
    _refuse("reshape", f, copy=(copy, None))
    return f(a, newshape if shape is None else shape)


def _dask_ravel(f: Any, be: Any, a: Any, order: Any = _NO) -> Any:
    _refuse("ravel", f, order=(order, "C"))
    return f(a)


def _dask_clip(f: Any, be: Any, a: Any, a_min: Any = None, a_max: Any = None, out: Any = None,
               **kwargs: Any) -> Any:
    _refuse("clip", f, out=(out, None))
    lo = kwargs.pop("min", None) if a_min is None else a_min
    hi = kwargs.pop("max", None) if a_max is None else a_max
    return f(a, lo, hi)  # da.clip takes its bounds positionally only


def _dask_cholesky(f: Any, be: Any, a: Any, /, *, upper: bool = False) -> Any:
    return f(a, lower=not upper)  # da.linalg.cholesky gives the upper factor by default


def _dask_svd(f: Any, be: Any, a: Any, full_matrices: bool = True, compute_uv: bool = True,
              hermitian: bool = False) -> Any:
    """``da.linalg.svd(a, coerce_signs, full_matrices=False)``: thin only.  NumPy's default
    ``full_matrices=True`` is the thin one for a square matrix, and refused otherwise."""
    _refuse("linalg.svd", f, hermitian=(hermitian, False))
    if full_matrices and compute_uv and a.shape[-1] != a.shape[-2]:
        raise UnsupportedArgumentError(
            f"numpy.linalg.svd(full_matrices=True) of a non-square {a.shape[-2]}x"
            f"{a.shape[-1]} matrix has no counterpart in dask.array.linalg.svd (thin only); "
            f"pass full_matrices=False inside the context")
    u, s, vh = f(a, full_matrices=False)
    return (u, s, vh) if compute_uv else s


def _dask_qr(f: Any, be: Any, a: Any, mode: str = "reduced") -> Any:
    """``da.linalg.qr(a)`` is NumPy's ``mode="reduced"``; ``"r"`` is its R; ``"complete"``
    is the reduced one when the matrix has no more rows than columns."""
    if mode == "complete" and a.shape[-2] <= a.shape[-1]:
        mode = "reduced"
    if mode not in ("reduced", "r"):
        raise UnsupportedArgumentError(
            f"numpy.linalg.qr(mode={mode!r}) has no counterpart in dask.array.linalg.qr "
            f"(mode='reduced' or 'r' only here)")
    q, r = f(a)
    return r if mode == "r" else (q, r)


def _dask_lstsq(f: Any, be: Any, a: Any, b: Any, rcond: Any = None) -> Any:
    """NumPy's least squares (LAPACK's gelsd) by the SVD: the minimum-norm solution, singular
    values under ``rcond * s_max`` dropped.  ``da.linalg.lstsq`` solves by QR, which is
    another answer for a rank-deficient ``a``.  ``f`` is ``da.linalg.svd``.  The residuals
    are the sums of squares (NumPy gives an empty array where ``a`` is rank-deficient or
    wide)."""
    m, n = a.shape
    if rcond is None or rcond == "warn":
        rcond = np.finfo(np.dtype(a.dtype)).eps * max(m, n)
    wide = m < n
    u, s, vh = f(a.T if wide else a, full_matrices=False)
    if wide:
        u, vh = vh.T, u.T
    where = be.resolve_name("where")
    keep = s > rcond * s.max()
    s_inv = where(keep, 1.0 / where(keep, s, 1.0), 0.0)
    column = b.ndim == 1
    rhs = b[:, None] if column else b
    x = vh.T @ (s_inv[:, None] * (u.T @ rhs))
    residuals = ((rhs - a @ x) ** 2).sum(axis=0)
    rank = keep.sum()
    return (x[:, 0], residuals, rank, s) if column else (x, residuals, rank, s)


def _dask_median(f: Any, be: Any, a: Any, axis: Any = None, out: Any = None,
                 overwrite_input: bool = False, keepdims: bool = False) -> Any:
    _refuse("median", f, out=(out, None))
    if axis is None:  # da.median works along an axis only: NumPy's axis=None flattens
        return f(be.resolve_name("ravel")(a), axis=0, keepdims=False) if not keepdims else \
            be.resolve_name("reshape")(f(be.resolve_name("ravel")(a), axis=0),
                                       (1,) * a.ndim)
    return f(a, axis=axis, keepdims=keepdims)


def _dask_percentile(f: Any, be: Any, a: Any, q: Any, axis: Any = None, out: Any = None,
                     overwrite_input: bool = False, method: str = "linear",
                     keepdims: bool = False, *, weights: Any = None) -> Any:
    """``da.percentile(a, q, method)`` is for 1-d arrays only (its third is ``method``)."""
    _refuse("percentile", f, out=(out, None), keepdims=(keepdims, False),
            weights=(weights, None))
    if axis is None:
        a = be.resolve_name("ravel")(a)
    elif a.ndim != 1 or axis not in (0, -1):
        raise UnsupportedArgumentError(
            f"numpy.percentile(axis={axis!r}) of a {a.ndim}-d array has no counterpart in "
            f"dask.array.percentile (1-d arrays only); use axis=None")
    return f(a, q, method=method)


def _dask_histogram(f: Any, be: Any, a: Any, bins: Any = 10, range: Any = None,
                    density: Any = None, weights: Any = None) -> Any:
    """``da.histogram(a, bins, range, normed, ...)``: no default ``bins``, a required
    ``range`` for a number of bins (NumPy's is the data's, here computed lazily)."""
    if range is None and not be.is_array(bins) and np.ndim(bins) == 0:
        range = (be.resolve_name("min")(a), be.resolve_name("max")(a))
    return f(a, bins=bins, range=range, density=density, weights=weights)


def _dask_sort(argsort: bool) -> Callable[..., Any]:
    """sort/argsort by ``da.topk``/``da.argtopk`` with ``k = -n``: the n smallest, ascending."""
    def adapt(f: Any, be: Any, a: Any, axis: Any = -1, kind: Any = None, order: Any = None, *,
              stable: Any = None) -> Any:
        name = "argsort" if argsort else "sort"
        _refuse(name, f, order=(order, None))
        if axis is None:
            a, axis = be.resolve_name("ravel")(a), -1
        if argsort:  # (Dask's argtopk fails across chunks of the sorted axis: one chunk)
            a = a.rechunk({axis % a.ndim: -1})
            if stable or kind == "stable":
                return _dask_stable_argsort(be, a, axis)
        return f(a, -a.shape[axis], axis=axis)
    return adapt


def _dask_stable_argsort(be: Any, a: Any, axis: int) -> Any:
    """argsort with ties in the order of their positions (NumPy's ``kind="stable"``), which
    ``da.argtopk`` does not promise: the positions are sorted again by the key (rank of the
    value among the distinct values, position), integers all different, so without ties."""
    xp = be.xp
    a = xp.moveaxis(a, axis, -1)
    n = a.shape[-1]
    if n < 2:
        return xp.moveaxis(xp.argtopk(a, -n, axis=-1), -1, axis)
    order = xp.argtopk(a, -n, axis=-1)
    values = xp.topk(a, -n, axis=-1)
    step = (values[..., 1:] != values[..., :-1]).astype(np.int64)
    rank = xp.concatenate([xp.zeros_like(step[..., :1]), xp.cumsum(step, axis=-1)], axis=-1)
    return xp.moveaxis(xp.topk(rank * n + order, -n, axis=-1) % n, -1, axis)


def _dask_bincount(f: Any, be: Any, x: Any, weights: Any = None, minlength: int = 0) -> Any:
    """``da.bincount`` wants the weights chunked as ``x`` is."""
    if weights is not None and be.is_array(x) and be.is_array(weights):
        weights = weights.rechunk(x.chunks)
    return f(x, weights, minlength)


def _dask_take_along_axis(f: Any, be: Any, arr: Any, indices: Any, axis: Any = -1) -> Any:
    """numpy.take_along_axis, which Dask lacks (``f`` is ``da.take``): the indices made flat
    positions, row by row, and taken from the flattened array."""
    xp = be.xp
    if axis is None:
        return f(xp.ravel(arr), indices)
    arr, indices = xp.moveaxis(arr, axis, -1), xp.moveaxis(indices, axis, -1)
    lead = np.broadcast_shapes(arr.shape[:-1], indices.shape[:-1])
    arr = xp.broadcast_to(arr, (*lead, arr.shape[-1]))
    indices = xp.broadcast_to(indices, (*lead, indices.shape[-1]))
    n, rows = arr.shape[-1], math.prod(lead)
    flat = xp.reshape(indices % n if n else indices, (rows, -1)) \
        + xp.reshape(xp.arange(rows) * n, (rows, 1))
    taken = xp.reshape(f(xp.ravel(arr), xp.ravel(flat)), indices.shape)
    return xp.moveaxis(taken, -1, axis)


def _dask_solve(f: Any, be: Any, a: Any, b: Any) -> Any:
    """``da.linalg.solve`` takes one matrix and a 1-d or 2-d ``b``: NumPy's stacked right-hand
    sides against one matrix (``b`` of more dimensions) are solved as its columns."""
    if a.ndim != 2 or b.ndim <= 2:
        return f(a, b)
    xp = be.xp
    n = b.shape[-2]
    x = f(a, xp.reshape(xp.moveaxis(b, -2, 0), (n, -1)))
    return xp.moveaxis(xp.reshape(x, (n, *b.shape[:-2], b.shape[-1])), 0, -2)


def _dask_randint(f: Any, be: Any, low: Any, high: Any = None, size: Any = None,
                  dtype: Any = int) -> Any:
    return f(low, high, size, dtype=dtype)  # da.random.randint's 4th is chunks


def _dask_fft(n_d: bool, axes_default: Any) -> Callable[..., Any]:
    """Dask's fft transforms along axes of one chunk only: NumPy's has no chunks, so the
    axes are rechunked to one (a padded or concatenated input comes in several)."""
    def adapt(f: Any, be: Any, a: Any, n: Any = None, axis: Any = axes_default,
              norm: Any = None, out: Any = None, *, s: Any = _NO, axes: Any = _NO) -> Any:
        _refuse("fft", f, out=(out, None))
        if n_d:  # fftn(a, s, axes): the same places, NumPy's names
            n, axis = (n if s is _NO else s), (axis if axes is _NO else axes)
        axes = (tuple(range(a.ndim)) if n is None else tuple(range(-len(n), 0))) \
            if axis is None else (axis if n_d else (axis,))
        a = a.rechunk({ax % a.ndim: -1 for ax in axes})
        return f(a, n, axis, norm=norm)
    return adapt


_DASK_ADAPTED: dict[str, Rule] = {
    **{f"fft.{n}": Rule(f"fft.{n}", _dask_fft(False, -1))
       for n in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")},
    **{f"fft.{n}": Rule(f"fft.{n}", _dask_fft(True, None))
       for n in ("fftn", "ifftn", "rfftn", "irfftn")},
    **{f"fft.{n}": Rule(f"fft.{n}", _dask_fft(True, (-2, -1)))
       for n in ("fft2", "ifft2", "rfft2", "irfft2")},
    "eye": Rule("eye", _dask_eye, "creation"),
    "take": Rule("take", _take),
    "searchsorted": Rule("searchsorted", _searchsorted), "repeat": Rule("repeat", _repeat),
    "linalg.cholesky": Rule("linalg.cholesky", _dask_cholesky),
    "linalg.svd": Rule("linalg.svd", _dask_svd),
    "linalg.qr": Rule("linalg.qr", _dask_qr),
    "linalg.lstsq": Rule("linalg.svd", _dask_lstsq),
    "linalg.solve": Rule("linalg.solve", _dask_solve),
    "take_along_axis": Rule("take", _dask_take_along_axis),
    "bincount": Rule("bincount", _dask_bincount),
    "reshape": Rule("reshape", _dask_reshape), "ravel": Rule("ravel", _dask_ravel),
    "clip": Rule("clip", _dask_clip),
    "concatenate": Rule("concatenate", _concat), "stack": Rule("stack", _stack),
    "broadcast_to": Rule("broadcast_to", _broadcast_to),
    "argmax": Rule("argmax", _arg_reduce("argmax")),
    "argmin": Rule("argmin", _arg_reduce("argmin")),
    "median": Rule("median", _dask_median), "percentile": Rule("percentile", _dask_percentile),
    "histogram": Rule("histogram", _dask_histogram),
    "sort": Rule("topk", _dask_sort(False)), "argsort": Rule("argtopk", _dask_sort(True)),
    "pad": Rule("pad"), "select": Rule("select"),
    "meshgrid": Rule("meshgrid", _meshgrid),
    **_CREATION,
    "asarray": Rule("asarray", _dask_asarray, "upload"),
    "asanyarray": Rule("asarray", _dask_asarray, "upload"),
    "array": Rule("asarray", _dask_array, "upload"),
    "copy": Rule("asarray", _dask_copy),
    "random.randint": Rule("random.randint", _dask_randint, "random"),
    **{n: Rule("asarray", _dask_scalar(n if n != "bool_" else "bool")) for n in (
        "float32 float64 int8 int16 int32 int64 uint8 complex64 complex128 bool_").split()},
}

# -- dask.array: NumPy's names that Dask provides (lazily, chunked) -------------------------
_DASK_NAMES = (
    "absolute fabs negative positive sqrt cbrt square exp exp2 expm1 log log1p log2 log10 "
    "sin cos tan arcsin arccos arctan sinh cosh tanh arcsinh arccosh arctanh deg2rad rad2deg "
    "degrees radians floor ceil trunc rint fix sign signbit isnan isinf isfinite logical_not "
    "invert real imag reciprocal angle add subtract multiply divide floor_divide remainder "
    "fmod power float_power arctan2 hypot copysign nextafter maximum minimum fmax fmin "
    "logaddexp logaddexp2 logical_and logical_or logical_xor bitwise_and bitwise_or "
    "bitwise_xor left_shift right_shift equal not_equal less less_equal greater "
    "greater_equal round around conj where tril triu diag sum prod mean std var max min all "
    "any cumsum cumprod nansum nanmean nanstd nanvar nanmax nanmin average ptp count_nonzero "
    "argwhere flatnonzero nonzero unique searchsorted diff transpose swapaxes moveaxis "
    "squeeze expand_dims vstack hstack dstack broadcast_arrays flip fliplr flipud roll rot90 "
    "tile repeat atleast_1d atleast_2d atleast_3d matmul dot vdot outer tensordot einsum "
    "trace diagonal cov corrcoef bincount isclose allclose linalg.inv linalg.norm "
    "linalg.solve fft.fftfreq fft.rfftfreq fft.fftshift fft.ifftshift")

DASK: dict[Any, Rule] = {
    **_family(_names(_DASK_NAMES)),
    **_family({**_NUMPY_LIKE_REDUCTIONS, "unstack": Rule("moveaxis", _np_unstack)}),
    **_family({f"random.{n}": Rule(f"random.{n}", None, "random") for n in (
        "random random_sample uniform normal standard_normal choice permutation seed "
        "beta binomial exponential gamma poisson lognormal laplace default_rng").split()}),
    **_family(_DASK_ADAPTED),
    # math's array-API names (asin, atan2, pow) are spelled the NumPy way in dask.array
    **_family({"asin": "arcsin", "acos": "arccos", "atan": "arctan", "atan2": "arctan2",
               "asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh", "pow": "power"},
              "math", _elementwise, source=math),
}

# The backends that have their own table, by ``xp.__name__``.
BACKENDS: dict[str, dict[Any, Rule]] = {"cupy": CUPY, "dask.array": DASK}

# NumPy callables that do no array computation (printing, error state, type queries): they run
# natively in every backend and are not swapped.
HOST_UTILITIES = frozenset(
    "seterr geterr seterrcall geterrcall errstate set_printoptions get_printoptions "
    "printoptions array2string array_repr array_str format_float_positional "
    "format_float_scientific isscalar ndim shape size promote_types can_cast "
    "min_scalar_type common_type iterable get_include show_config show_runtime info "
    "isdtype typename mintypecode base_repr binary_repr broadcast_shapes "
    "may_share_memory shares_memory test".split())


def numpy_callables() -> list[tuple[str, Any]]:
    """Every public NumPy function (``numpy``, ``linalg``, ``fft``, ``random``), with its name.

    These are what an array-backend context must not let run on the host unseen: each is either
    in a table or, called inside the context, a :class:`MissingCounterpartError`.  Classes are
    left out except the scalar types the tables list (``numpy.float32(0.5)``) and ``random``'s
    (``RandomState``, ``Generator``, the bit generators), whose methods make NumPy arrays.
    """
    found: dict[int, tuple[str, Any]] = {}
    tabled = {id(fn) for table in (DEFAULT, *BACKENDS.values()) for fn in table}
    for prefix, module in (("", np), ("linalg.", np.linalg), ("fft.", np.fft),
                           ("random.", np.random)):
        for name in dir(module):
            if name.startswith("_") or (not prefix and name in HOST_UTILITIES):
                continue
            obj = getattr(module, name, None)
            if obj is None or not callable(obj) or type(obj).__name__ == "module":
                continue
            if isinstance(obj, type) and id(obj) not in tabled and prefix != "random.":
                continue  # (NumPy's generators, RandomState too, make NumPy arrays)
            if type(obj).__name__ == "PytestTester":
                continue
            found.setdefault(id(obj), (f"numpy.{prefix}{name}", obj))
    return list(found.values())


def math_callables() -> list[tuple[str, Any]]:
    """Every public ``math`` function: swapped for arrays where tabled, an error otherwise."""
    return [(f"math.{name}", getattr(math, name)) for name in dir(math)
            if not name.startswith("_") and callable(getattr(math, name))]
