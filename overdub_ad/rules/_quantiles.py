"""Stand-ins for ``np.quantile`` and ``np.percentile`` (the default ``method="linear"``).

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


def _linear(name: str, a: Any, q: Any, weak: bool, axis: Any, out: Any, method: str,
            keepdims: bool, weights: Any, interpolation: Any) -> Any:
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


defstandin(np.quantile, _quantile)
defstandin(np.percentile, _percentile)
