"""Stand-ins for ``np.quantile``, ``np.percentile`` and their ``nan`` forms (the default
``method="linear"``; the ``nan`` forms for float64 data).

NumPy partitions the data in place (``ndarray.partition``, C code that moves the elements) and
reads the two neighbours of each quantile's position; a derivative cannot follow the moves.
Restated: the data sorted (``np.sort`` has rules), the neighbours taken, and NumPy's own linear
interpolation made with the same operations in the same order, so the value is NumPy's to the
bit.  The derivative goes to the two neighbours (and, for a differentiated ``q``, through the
interpolation weight); where a slice holds a NaN the result is NaN, as NumPy's.  Other methods,
``weights``, and ``out=`` raise ``MissingRuleError``.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from .._rules import MissingRuleError, defstandin


def _quantile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
              method: str = "linear", keepdims: bool = False, *, weights: Any = None,
              interpolation: Any = None) -> Any:
    weak = type(q) in (int, float)  # (NumPy's weak promotion of a Python number q)
    q = np.asanyarray(q)
    if not (np.all(q >= 0) and np.all(q <= 1)):
        raise ValueError("Quantiles must be in the range [0, 1]")
    return _linear("numpy.quantile", a, q, weak, axis, out, method, keepdims, weights,
                   interpolation)


def _percentile(a: Any, q: Any, axis: Any = None, out: Any = None,
                overwrite_input: bool = False, method: str = "linear", keepdims: bool = False,
                *, weights: Any = None, interpolation: Any = None) -> Any:
    weak = type(q) in (int, float)
    q = np.true_divide(q, 100)
    if not (np.all(q >= 0) and np.all(q <= 1)):
        raise ValueError("Percentiles must be in the range [0, 100]")
    return _linear("numpy.percentile", a, np.asanyarray(q), weak, axis, out, method, keepdims,
                   weights, interpolation)


def _nanquantile(a: Any, q: Any, axis: Any = None, out: Any = None,
                 overwrite_input: bool = False, method: str = "linear", keepdims: bool = False,
                 *, weights: Any = None, interpolation: Any = None) -> Any:
    if np.result_type(a) != np.float64:  # (NumPy's own code: its float32 results' dtypes
        # vary with the path it takes; a differentiated one meets its partition, no rule)
        return _NAN_CODE["nanquantile"](a, q, axis, out, overwrite_input, method, keepdims,
                                        **_given(weights, interpolation))
    weak = type(q) in (int, float)
    q = np.asanyarray(q)
    if not (np.all(q >= 0) and np.all(q <= 1)):
        raise ValueError("Quantiles must be in the range [0, 1]")
    return _linear("numpy.nanquantile", a, q, weak, axis, out, method, keepdims, weights,
                   interpolation, skip_nan=True)


def _nanpercentile(a: Any, q: Any, axis: Any = None, out: Any = None,
                   overwrite_input: bool = False, method: str = "linear",
                   keepdims: bool = False, *, weights: Any = None,
                   interpolation: Any = None) -> Any:
    if np.result_type(a) != np.float64:  # (see _nanquantile)
        return _NAN_CODE["nanpercentile"](a, q, axis, out, overwrite_input, method,
                                          keepdims, **_given(weights, interpolation))
    weak = type(q) in (int, float)
    q = np.true_divide(q, 100)
    if not (np.all(q >= 0) and np.all(q <= 1)):
        raise ValueError("Percentiles must be in the range [0, 100]")
    return _linear("numpy.nanpercentile", a, np.asanyarray(q), weak, axis, out, method,
                   keepdims, weights, interpolation, skip_nan=True)


def _linear(name: str, a: Any, q: Any, weak: bool, axis: Any, out: Any, method: str,
            keepdims: bool, weights: Any, interpolation: Any, skip_nan: bool = False) -> Any:
    if method != "linear" or weights is not None or interpolation is not None or \
            out is not None:
        raise MissingRuleError(f"{name}: only the default method='linear', without weights= "
                               f"or out=, is differentiated")
    a = np.asanyarray(a)
    if a.dtype.kind not in "fiub":
        raise MissingRuleError(f"{name} of a {a.dtype} array is not differentiated")
    reduced = tuple(range(a.ndim)) if axis is None else _axes(axis, a.ndim)
    data = np.moveaxis(a, reduced, tuple(range(len(reduced))))
    data = np.reshape(data, (-1, *np.shape(data)[len(reduced):]))
    n = np.shape(data)[0]
    data = np.sort(data, axis=0)
    if skip_nan and data.dtype.kind in "fc":  # each slice's own count (a NaN sorts last)
        return _skipping_nan(data, q, weak, reduced, a.shape, keepdims)
    virtual = np.asanyarray((n - 1) * q)
    if virtual.dtype.kind in "iu":  # a whole position: the point itself, no interpolation
        result = np.take(data, virtual, axis=0)
    else:
        previous = np.floor(virtual)  # (piecewise constant: the neighbours' positions)
        following = previous + 1
        last, first = np.greater_equal(virtual, n - 1), np.less(virtual, 0)
        previous = np.where(last, -1, np.where(first, 0, previous))
        following = np.where(last, -1, np.where(first, 0, following))
        previous, following = previous.astype(np.intp), following.astype(np.intp)
        low = np.take(data, previous, axis=0)
        high = np.take(data, following, axis=0)
        gamma = np.asanyarray(virtual - previous, dtype=virtual.dtype)
        gamma = float(gamma) if weak else np.reshape(
            gamma, virtual.shape + (1,) * (np.ndim(data) - 1))
        difference = high - low
        result = np.where(np.greater_equal(gamma, 0.5), high - difference * (1 - gamma),
                          low + difference * gamma)
    if data.dtype.kind in "fc":
        result = np.where(np.isnan(data[-1]), np.nan, result)  # (a NaN sorts last)
    if keepdims:
        kept = tuple(1 if i in reduced else s for i, s in enumerate(a.shape))
        result = np.reshape(result, np.shape(q) + kept)
    return result[()] if np.ndim(result) == 0 else result


def _skipping_nan(data: Any, q: Any, weak: bool, reduced: tuple[int, ...],
                  shape: tuple[int, ...], keepdims: bool) -> Any:
    """NumPy's nanquantile of the sorted ``data`` (reduced axis first, NaNs last): each
    slice's quantiles among its numbers, its positions ``(count - 1) q``; NaN for a slice of
    NaNs only."""
    rest = np.shape(data)[1:]
    counts = np.sum(~np.isnan(data), axis=0)
    virtual = np.multiply.outer(q, counts - 1)  # q.shape + rest
    previous = np.floor(virtual)
    last, first = np.greater_equal(virtual, counts - 1), np.less(virtual, 0)
    top = np.maximum(counts - 1, 0)
    previous = np.where(last, top, np.where(first, 0, previous)).astype(np.intp)
    following = np.where(last, top, np.where(first, 0, previous + 1)).astype(np.intp)
    flat = (-1, *rest)
    low = np.reshape(np.take_along_axis(data, np.reshape(previous, flat), axis=0),
                     np.shape(virtual))
    high = np.reshape(np.take_along_axis(data, np.reshape(following, flat), axis=0),
                      np.shape(virtual))
    gamma = virtual - previous
    if weak:
        gamma = gamma.astype(data.dtype)  # (a Python number's weak promotion)
    difference = high - low
    result = np.where(np.greater_equal(gamma, 0.5), high - difference * (1 - gamma),
                      low + difference * gamma)
    result = np.where(counts == 0, np.nan, result)
    if keepdims:
        kept = tuple(1 if i in reduced else s for i, s in enumerate(shape))
        result = np.reshape(result, np.shape(q) + kept)
    return result[()] if np.ndim(result) == 0 else result


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    """``axis`` (an int or a tuple of them) as non-negative axes, checked as NumPy checks."""
    axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
    normalised = []
    for ax in axes:
        ax = operator.index(ax)
        if not -ndim <= ax < ndim:
            raise np.exceptions.AxisError(ax, ndim)
        normalised.append(ax % ndim)
    if len(set(normalised)) != len(normalised):
        raise ValueError("repeated axis")
    return tuple(normalised)


def _given(weights: Any, interpolation: Any) -> dict[str, Any]:
    """The keywords given (NumPy versions differ in which they take)."""
    given = {"weights": weights, "interpolation": interpolation}
    return {k: v for k, v in given.items() if v is not None}


_NAN_CODE = {name: getattr(getattr(np, name), "_implementation", getattr(np, name))
             for name in ("nanquantile", "nanpercentile")}

defstandin(np.quantile, _quantile)
defstandin(np.percentile, _percentile)
defstandin(np.nanquantile, _nanquantile)
defstandin(np.nanpercentile, _nanpercentile)
