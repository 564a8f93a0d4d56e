"""Stand-ins for the methods of NumPy's binary ufuncs: ``outer``, ``reduce``, ``accumulate``,
``reduceat``.

``np.multiply.outer(x, y)`` or ``np.maximum.reduce(x)`` is a C method of the ufunc object, with
no rule of its own.  Each is restated here with what has rules (see ``_rules.defstandin``; the
stand-in of the method descriptor ``np.ufunc.outer`` serves every ufunc's bound method):

- ``outer``: the ufunc itself on ``x`` reshaped to broadcast against ``y``;
- ``reduceat`` of ``np.add``: NumPy's own, with rules (a linear map: each output the sum of a
  slice); other ufuncs' raise ``MissingRuleError``;
- ``reduce``/``accumulate``: the reduction NumPy ships for the ufunc (``add.reduce`` is
  ``np.sum``, ``maximum.reduce`` is ``np.max``, with its rule's tie convention; ``add.accumulate``
  is ``np.cumsum``), and for any other binary ufunc (``hypot``, ``subtract``, ``fmax``...) the
  ufunc applied along the axis, element after element, as NumPy does.

A call the stand-ins do not restate (``out=``, ``where=``, ``dtype=`` for a ufunc without a
shipped reduction, several axes or an empty axis for a ufunc reduced element by element, a
ufunc of one argument) runs the method natively, guarded: a differentiated argument raises
``MissingRuleError`` naming the method rather than be read as plain numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from overdub import opaque

from .._rules import ZERO, defjvp, defstandin, defvjp

_NO_VALUE: Any = getattr(np, "_NoValue", None)
_REDUCTIONS: dict[Any, Any] = {np.add: np.sum, np.multiply: np.prod, np.maximum: np.max,
                               np.minimum: np.min}
_TYPED = (np.add, np.multiply)  # (their reductions take dtype=)
_ACCUMULATIONS: dict[Any, Any] = {np.add: np.cumsum, np.multiply: np.cumprod}


@opaque
def _run(method: Any, /, *args: Any, **kwargs: Any) -> Any:
    """The method itself, as a leaf (the stand-in is not asked again)."""
    return method(*args, **kwargs)


def _guard(name: str) -> Any:
    """``ufunc.<name>`` called natively; its arguments (a tuple) have no rule, so one that
    carries a derivative raises ``MissingRuleError`` naming ``numpy.ufunc.<name>``."""
    method = getattr(np.ufunc, name)

    def guarded(ufunc: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return _run(method, ufunc, *args, **kwargs)
    guarded.__module__ = "numpy"
    guarded.__name__, guarded.__qualname__ = name, f"ufunc.{name}"
    defjvp(guarded, ZERO, None, ZERO)
    defvjp(guarded, ZERO, None, ZERO)
    return guarded


_NATIVE = {name: _guard(name) for name in ("outer", "reduce", "accumulate", "reduceat")}


def _outer(ufunc: Any, a: Any, b: Any, /, **kwargs: Any) -> Any:
    if ufunc.nin != 2 or "out" in kwargs or "where" in kwargs:
        return _NATIVE["outer"](ufunc, (a, b), kwargs)
    return ufunc(np.reshape(a, np.shape(a) + (1,) * np.ndim(b)), b, **kwargs)


def _plain_call(ufunc: Any, dtype: Any, out: Any, where: Any) -> bool:
    """Whether a reduce/accumulate call is one the stand-ins restate."""
    return ufunc.nin == 2 and out is None and (where is True or where is np.True_) and \
        (dtype is None or ufunc in _TYPED)


def _along(array: Any, axis: Any) -> Any:
    """``array`` with ``axis`` first (flattened for ``axis=None``), or None where the ufunc
    cannot be applied element after element (several axes, an empty axis)."""
    if axis is None:
        flat = np.ravel(array)
        return flat if len(flat) else None
    if isinstance(axis, tuple):
        if len(axis) != 1:
            return None
        axis = axis[0]
    moved = np.moveaxis(np.asarray(array), axis, 0)
    return moved if len(moved) else None


def _reduce(ufunc: Any, array: Any, axis: Any = 0, dtype: Any = None, out: Any = None,
            keepdims: bool = False, initial: Any = _NO_VALUE, where: Any = True) -> Any:
    args = (array, axis, dtype, out, keepdims, initial, where)
    if not _plain_call(ufunc, dtype, out, where):
        return _NATIVE["reduce"](ufunc, args, {})
    given = {} if initial is _NO_VALUE else {"initial": initial}
    reduction = _REDUCTIONS.get(ufunc)
    if reduction is not None:
        typed = {"dtype": dtype} if dtype is not None else {}
        return reduction(array, axis=axis, keepdims=keepdims, **typed, **given)
    items = _along(array, axis)
    if items is None:
        return _NATIVE["reduce"](ufunc, args, {})
    total = items[0] if initial is _NO_VALUE else ufunc(initial, items[0])
    for item in items[1:]:
        total = ufunc(total, item)
    if keepdims:
        total = np.expand_dims(total, tuple(range(np.ndim(array))) if axis is None else axis)
    return total


def _accumulate(ufunc: Any, array: Any, axis: int = 0, dtype: Any = None,
                out: Any = None) -> Any:
    args = (array, axis, dtype, out)
    if not _plain_call(ufunc, dtype, out, True):
        return _NATIVE["accumulate"](ufunc, args, {})
    accumulation = _ACCUMULATIONS.get(ufunc)
    if accumulation is not None:
        return accumulation(array, axis=axis, **({"dtype": dtype} if dtype is not None else {}))
    items = _along(array, axis)
    if items is None or np.ndim(array) == 0:
        return _NATIVE["accumulate"](ufunc, args, {})
    partial = [items[0]]
    for item in items[1:]:
        partial.append(ufunc(partial[-1], item))
    return np.moveaxis(np.stack(partial), 0, axis)


@opaque
def _add_reduceat(array: Any, indices: Any, axis: int) -> Any:
    """``np.add.reduceat(array, indices, axis)`` itself (NumPy's numbers), with rules."""
    return np.add.reduceat(array, indices, axis=axis)


def _reduceat_matrix(indices: Any, n: int) -> Any:
    """Which elements along the axis (columns) each output sums (rows): ``a[i:j]`` for
    ``indices[k] = i < j = indices[k + 1]`` (the last one to the end), ``a[i]`` alone
    otherwise, as NumPy's ``reduceat`` does."""
    starts = np.asarray(indices, dtype=np.intp)
    stops = np.append(starts[1:], n)
    stops = np.where(stops > starts, stops, starts + 1)
    positions = np.arange(n)
    return (positions >= starts[:, None]) & (positions < stops[:, None])


def _reduceat_vjp(ct: Any, out: Any, /, array: Any, indices: Any, axis: int) -> Any:
    m = _reduceat_matrix(indices, np.shape(array)[axis]) * 1.0
    back = np.tensordot(m.T, np.moveaxis(ct, axis, 0), axes=1)
    return np.moveaxis(back, 0, axis)


defjvp(_add_reduceat, lambda d, out, /, array, indices, axis: np.add.reduceat(
    d, indices, axis=axis - np.ndim(array)), ZERO, ZERO)
defvjp(_add_reduceat, _reduceat_vjp, ZERO, ZERO)


def _reduceat(ufunc: Any, array: Any, indices: Any, axis: int = 0, dtype: Any = None,
              out: Any = None) -> Any:
    """``np.add.reduceat`` (a linear map: NumPy computes it, its rules above); another
    ufunc's, or a call with ``dtype=``/``out=``, runs natively, guarded."""
    if ufunc is not np.add or dtype is not None or out is not None:
        return _NATIVE["reduceat"](ufunc, (array, indices, axis, dtype, out), {})
    array = np.asarray(array)
    return _add_reduceat(array, indices, axis % max(np.ndim(array), 1))


defstandin(np.ufunc.outer, _outer)
defstandin(np.ufunc.reduce, _reduce)
defstandin(np.ufunc.accumulate, _accumulate)
defstandin(np.ufunc.reduceat, _reduceat)
