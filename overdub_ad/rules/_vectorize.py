"""NumPy functions that call a Python function the user gives them, restated so that the
context sees every call: ``np.vectorize``, ``np.apply_along_axis``, ``np.apply_over_axes``,
``np.piecewise``.

Each is a C object (an array-function dispatcher, a ufunc that ``np.frompyfunc`` makes) whose
calls of the user's function are made natively: a differentiated value the function closes
over (``np.vectorize(lambda t: k * t)(ts)`` with ``k`` differentiated) would be read there as
a plain number.  The dispatchers' own implementations are Python code, run here through the
context; ``np.vectorize``'s elementwise calls are made as a loop, each result an element of the
output array, as NumPy fills it (its output types, its extra first call that finds them unless
``cache=True``; arguments it ``excluded`` given as they are).  A vectorized function with a
``signature`` runs as NumPy runs it (its loop over the core dimensions is Python code, which the
context sees); a ufunc made by ``np.frompyfunc`` calls its function from C, where a use of a
differentiated value raises ``MissingRuleError``: see ``overdub.Context.native_use``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from overdub import current_context, recurse

from .._rules import defstandin


def _vectorized(self: np.vectorize, *args: Any, **kwargs: Any) -> Any:
    """``self(*args, **kwargs)``: ``self.pyfunc`` called element by element, in C order, over
    the broadcast arguments (those ``excluded`` given as they are, by position or name)."""
    excluded = self.excluded
    positions = [i for i in range(len(args)) if i not in excluded]
    names = [k for k in kwargs if k not in excluded]
    if self.signature is not None or not (positions or names):
        return _as_numpy_calls(self, *args, **kwargs)
    arrays = [np.asanyarray(args[i]) for i in positions] + \
        [np.asanyarray(kwargs[k]) for k in names]
    shape = np.broadcast_shapes(*[np.shape(a) for a in arrays])
    if not all(shape):  # (no element: NumPy's own error, or its empty result of otypes)
        return _as_numpy_calls(self, *args, **kwargs)
    arrays = [np.broadcast_to(a, shape) for a in arrays]

    def call(index: tuple[int, ...]) -> Any:
        given, keywords = list(args), dict(kwargs)
        for i, a in zip(positions, arrays):
            given[i] = a[index]
        for k, a in zip(names, arrays[len(positions):]):
            keywords[k] = a[index]
        return self.pyfunc(*given, **keywords)

    if not self.otypes and not self.cache:  # (NumPy's first call, which finds the types)
        call((0,) * len(shape))
    outputs = [call(index) for index in np.ndindex(*shape)]
    first = outputs[0]
    if type(first) is tuple:
        return tuple(_filled([out[k] for out in outputs], shape, self.otypes, k)
                     for k in range(len(first)))
    return _filled(outputs, shape, self.otypes, 0)


def _as_numpy_calls(self: np.vectorize, *args: Any, **kwargs: Any) -> Any:
    """``self(*args, **kwargs)`` by NumPy's own code, through the context (not this stand-in
    again)."""
    return recurse(current_context(), _NUMPY_CALL, self, *args, **kwargs)


_NUMPY_CALL = np.vectorize.__call__


def _filled(values: list[Any], shape: tuple[int, ...], otypes: str | None, k: int) -> Any:
    """The ``k``-th output: an array of ``shape`` holding ``values``, of the type ``otypes``
    names or else the first value's (``np.vectorize`` converts every output to it)."""
    dtype = np.dtype(otypes[k]) if otypes else np.asarray(values[0]).dtype
    return np.reshape(np.array(values, dtype=dtype), shape)


defstandin(np.vectorize.__call__, _vectorized)
_DISPATCHERS: tuple[Any, ...] = (np.apply_along_axis, np.apply_over_axes, np.piecewise)
for _dispatcher in _DISPATCHERS:
    defstandin(_dispatcher, _dispatcher._implementation)
