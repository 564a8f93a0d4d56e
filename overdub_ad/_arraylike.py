"""Lists of numbers given to NumPy: arrays, to NumPy and to the derivative rules.

``np.sum([x, y])``, ``np.sin([x, 0.0])``, ``a @ [x, x]``: NumPy converts a list (or tuple) of
numbers to an array.  Both engines do the same before a rule sees such an argument, so that
ufunc, reduction and product rules, written for arrays, need no list case; a list that holds
arrays (``np.concatenate([a, b])``) is a sequence of arrays and stays a list, with the
container tangents of ``rules/_common.py``.
"""

from __future__ import annotations

import numbers
import operator
import types
from collections.abc import Sequence
from typing import Any

import numpy as np

from overdub import Tagged

_OPERATORS = {id(f) for f in vars(operator).values() if callable(f)}
_C_METHODS = (types.MethodDescriptorType, types.WrapperDescriptorType)


def _innermost(x: Any) -> Any:
    while type(x) is Tagged:
        x = x.value
    return x


def takes_arrays(fn: Any, primals: Sequence[Any]) -> bool:
    """Whether ``fn`` reads its list arguments as NumPy does, as arrays: a ufunc, a NumPy
    function, a method of arrays, or an operator with an array operand (``[x] + [y]`` alone is
    list concatenation)."""
    if id(fn) in _OPERATORS:
        return any(isinstance(_innermost(p), np.ndarray) for p in primals)
    if isinstance(fn, np.ufunc) or (getattr(fn, "__module__", None) or "").startswith("numpy"):
        return True
    return type(fn) in _C_METHODS and issubclass(getattr(fn, "__objclass__", object),
                                                 np.ndarray)


def array_like(x: Any) -> bool:
    """Whether ``x`` is a (nested) list or tuple of numbers only."""
    if type(x) in (list, tuple):
        return all(array_like(e) for e in x)
    return isinstance(_innermost(x), numbers.Number)
