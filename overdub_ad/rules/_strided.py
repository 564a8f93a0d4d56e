"""Strided views: ``sliding_window_view`` restated as indexing, ``as_strided`` refused.

Both build their view by handing NumPy an object with an ``__array_interface__`` that points
into the argument's memory: NumPy reads that memory natively, so the view would carry no
derivative.  ``sliding_window_view(x, w, axis)`` selects, for each window element, one element
of ``x``; the stand-in computes *which* (the same view of the flat positions
``arange(x.size)``, made natively: plain integers) and gathers ``x.reshape(-1)[positions]``,
whose rules are indexing's.  The result is a copy with the view's values and shape (the view is
read-only by default; ``writeable=True`` is refused under a derivative, as writes into a copy
would be lost).  ``as_strided`` reads arbitrary memory (overlapping, out of the array's order),
so it has no rule: differentiating its argument raises ``MissingRuleError``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided, sliding_window_view

from overdub import opaque

from .._rules import MissingRuleError, defjvp, defstandin, defvjp


@opaque
def _window_positions(shape: tuple[int, ...], window_shape: Any, axis: Any) -> Any:
    """Which flat element of an array of ``shape`` each element of its window view is."""
    positions = np.arange(int(np.prod(shape)), dtype=np.intp).reshape(shape)
    return sliding_window_view(positions, window_shape, axis)


def _sliding_window_view(x: Any, window_shape: Any, axis: Any = None, *, subok: bool = False,
                         writeable: bool = False) -> Any:
    if writeable:
        raise MissingRuleError(
            "no derivative rule for numpy.lib.stride_tricks.sliding_window_view with "
            "writeable=True: under a derivative it is restated as indexing (a copy), where "
            "writes would not reach the array; index the array instead")
    x = np.asanyarray(x) if subok else np.asarray(x)
    return np.reshape(x, -1)[_window_positions(np.shape(x), window_shape, axis)]


defstandin(sliding_window_view, _sliding_window_view)


def _refused(*args: Any, **kwargs: Any) -> Any:
    raise MissingRuleError(
        "no derivative rule for numpy.lib.stride_tricks.as_strided: its view reads the array's "
        "memory natively (any strides, overlapping), which no rule can follow; use "
        "sliding_window_view or indexing, which have rules")


defjvp(as_strided, _refused)
defvjp(as_strided, _refused)
