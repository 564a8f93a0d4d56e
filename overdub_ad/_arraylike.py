"""Lists of numbers given to NumPy: arrays, to NumPy and to the derivative rules.

``np.sum([x, y])``, ``np.sin([x, 0.0])``, ``a @ [x, x]``: NumPy converts a list (or tuple) of
numbers to an array.  Both engines do the same before a rule sees such an argument, so that
ufunc, reduction and product rules, written for arrays, need no list case (:func:`one_array`).
A list of arrays of one shape (``np.sin([x, x])``, ``np.linalg.det([[a, b], x])``) is one
array too, to every function but those that read a *sequence* of arrays
(:data:`SEQUENCE_FUNCTIONS`, ``np.concatenate([a, b])``), where it stays a list, with the
container tangents of ``rules/_common.py``; forward mode makes each list inside such a
sequence one array (``np.concatenate([[s], x])``), as a batched tangent (``jacfwd``'s
directions in front) cannot be left as a list: NumPy would put the list's own dimension
first.
"""

from __future__ import annotations

import numbers
import operator
import types
from collections.abc import Sequence
from typing import Any

import numpy as np


from ._shared import _innermost

_OPERATORS = {id(f) for f in vars(operator).values() if callable(f)}
# NumPy functions whose list argument is a sequence of arrays, each its own operand
SEQUENCE_FUNCTIONS = frozenset(id(f) for f in (
    np.concatenate, getattr(np, "concat", np.concatenate), np.stack, np.hstack, np.vstack,
    np.dstack, np.column_stack, getattr(np, "row_stack", np.vstack), np.block,
    np.choose, np.select, np.piecewise, np.linalg.multi_dot))
_C_METHODS = (types.MethodDescriptorType, types.WrapperDescriptorType)


def takes_arrays(fn: Any, primals: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """Whether ``fn`` reads its list arguments as NumPy does, as arrays: a ufunc, a NumPy
    function or a SciPy array function, a method of arrays, or an operator with an array
    operand (``[x] + [y]`` alone is list concatenation).  Not an array made with a structured
    dtype, whose tuples are records (``np.array([(a, 2.0)], dtype=[("p", float), ...])``)."""
    if id(fn) in _OPERATORS:
        return operator_reads_arrays(fn, primals)
    if fn is np.nditer:  # (np.nditer([b, a], op_flags=[...]): a list of operands)
        return False
    dtype = kwargs.get("dtype", primals[1] if len(primals) > 1 and id(fn) in _MAKERS else None)
    if dtype is not None and id(fn) in _MAKERS and _records(dtype):
        return False
    if isinstance(fn, np.ufunc) or (getattr(fn, "__module__", None) or "").startswith(
            _ARRAY_MODULES):
        return True
    return type(fn) in _C_METHODS and issubclass(getattr(fn, "__objclass__", object),
                                                 np.ndarray)


_MAKERS = frozenset(map(id, (np.array, np.asarray, np.asanyarray, np.ascontiguousarray)))


def _records(dtype: Any) -> bool:
    try:
        return np.dtype(dtype).names is not None
    except TypeError:
        return False


# modules whose functions read a list as an array (np.asarray of it): NumPy's, and SciPy's array
# functions (scipy.special.logsumexp([x, 1.0]), scipy.linalg.expm([[x, 1.0], [0.0, 2.0]])); not
# its solvers, whose ``args=(x,)`` tuples are argument lists
_ARRAY_MODULES = ("numpy", "scipy.special", "scipy.linalg", "scipy.signal", "scipy.fft",
                  "scipy.stats")


def operator_reads_arrays(fn: Any, operands: Sequence[Any]) -> bool:
    """Whether the operator ``fn`` reads a list operand as an array, as NumPy makes it: beside
    an array, or beside a NumPy float (``np.float64(2.0) - [s, t]``) except in a product, where
    Python's sequence repetition answers first (``np.float64(2.0) * [s]`` raises TypeError,
    ``np.int64(2) * [s]`` repeats the list)."""
    if any(isinstance(_innermost(p), np.ndarray) for p in operands):
        return True
    return fn not in _PRODUCTS and any(isinstance(_innermost(p), np.inexact) for p in operands)


_PRODUCTS = (operator.mul, operator.imul)


def array_like(x: Any) -> bool:
    """Whether ``x`` is a (nested) list or tuple of numbers only."""
    if type(x) in (list, tuple):
        return all(array_like(e) for e in x)
    return isinstance(_innermost(x), numbers.Number)


def one_array(fn: Any, x: Any) -> bool:
    """Whether NumPy function ``fn`` reads list ``x`` as one array, to its rule too: a list of
    numbers, or one of arrays of one shape given to anything but a function that reads a
    sequence of arrays (``np.square([a, b])`` is one array, ``np.concatenate([a, b])`` two)."""
    return stackable(x) and (array_like(x) or id(fn) not in SEQUENCE_FUNCTIONS)


def stackable(x: Any) -> bool:
    """Whether ``x`` is a (nested) list or tuple of numbers and NumPy arrays that NumPy reads as
    one array: at each level, every element has the same shape."""
    if not isinstance(x, (list, tuple)):  # (a named tuple too: NumPy reads its fields)
        return False
    return _shape(x) is not None


def _shape(x: Any) -> tuple[int, ...] | None:
    """The shape NumPy gives ``x`` (a number, an array or a list of them), None if ragged."""
    if isinstance(x, (list, tuple)):
        shapes = {_shape(e) for e in x}
        if len(shapes) > 1:
            return None
        inner = shapes.pop() if shapes else ()
        return None if inner is None else (len(x),) + inner
    plain = _innermost(x)
    if isinstance(plain, numbers.Number):
        return ()
    if isinstance(plain, np.ndarray) and plain.dtype.kind in "biufc":
        return tuple(plain.shape)
    return None
