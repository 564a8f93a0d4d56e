"""What overdub_ad calls an array: NumPy's, or an array of another namespace.

Differentiated values are floats, complex numbers and arrays.  An array is a NumPy array or an
object of any type that says it is one the array API's way (``__array_namespace__``) or NumPy's
(``__array_function__``, as CuPy and Dask arrays do), with a ``shape`` and a ``dtype``: an
``array_api_strict``, CuPy or Dask array is differentiated like a NumPy one.  Such arrays reach
the engine inside an array-backend context (``overdub_gpu.ArrayBackendContext(xp)``), which
turns the NumPy code of the function *and of the derivative rules* into ``xp`` code; the helpers
here are what the engine itself needs to know about them, spelled so as never to copy one to
the host (``np.iscomplexobj`` would, for a namespace whose dtypes NumPy does not know).

NumPy stays the fast path: every helper decides NumPy values first, by their exact type, and
looks at a foreign type once (:func:`is_foreign_array_type` caches its answer per type).
"""

from __future__ import annotations

import importlib
import math
import numbers
from typing import Any

import numpy as np

from overdub import Tagged

from ._rules import MissingRuleError

_NUMPY = (numbers.Number, np.ndarray, np.generic)
_FOREIGN: dict[type, bool] = {}  # type -> whether it is an array of another namespace


def is_foreign_array_type(t: type) -> bool:
    """Whether ``t`` is the array type of a namespace other than NumPy (cached per type)."""
    known = _FOREIGN.get(t)
    if known is None:
        known = _FOREIGN[t] = (
            not issubclass(t, _NUMPY)
            and (hasattr(t, "__array_namespace__") or hasattr(t, "__array_function__"))
            and hasattr(t, "shape") and hasattr(t, "dtype"))
    return known


def is_numeric_type(t: type) -> bool:
    """Whether values of type ``t`` can be differentiated: numbers and arrays."""
    return issubclass(t, _NUMPY) or is_foreign_array_type(t)


def is_numeric(x: Any) -> bool:
    """Whether ``x`` (a plain value) is a number or an array of any namespace."""
    return isinstance(x, _NUMPY) or is_foreign_array_type(type(x))


def is_foreign_array(x: Any) -> bool:
    return is_foreign_array_type(type(x))


def kind(x: Any) -> str:
    """NumPy's one-letter dtype kind of ``x`` (``"b"``, ``"i"``, ``"u"``, ``"f"``, ``"c"``...),
    for a foreign array without converting it."""
    if not is_foreign_array_type(type(x)):
        return np.result_type(x).kind
    dtype = x.dtype
    try:
        letter: str = np.dtype(dtype).kind  # CuPy and Dask use NumPy's dtypes
        return letter
    except TypeError:
        pass
    isdtype = x.__array_namespace__().isdtype
    for letter, name in (("b", "bool"), ("i", "signed integer"), ("u", "unsigned integer"),
                         ("f", "real floating"), ("c", "complex floating")):
        if isdtype(dtype, name):
            return letter
    return "O"


def is_complex(x: Any) -> bool:
    """``np.iscomplexobj(x)``, without moving a foreign array to the host (a value tagged by
    an enclosing context too)."""
    while type(x) is Tagged:
        x = x.value
    if is_foreign_array_type(type(x)):
        return kind(x) == "c"
    return np.iscomplexobj(x)


def namespace(x: Any) -> Any:
    """The array namespace of the foreign array ``x`` (CuPy's and Dask's modules for theirs)."""
    get = getattr(x, "__array_namespace__", None)
    if get is not None:
        return get()
    module = type(x).__module__.split(".")[0]
    return importlib.import_module("dask.array" if module == "dask" else module)


def to_float(x: Any) -> Any:
    """An integer point (a number or an array) as floating point, in its own namespace."""
    if isinstance(x, np.ndarray):
        return np.asarray(x, dtype=float)
    if is_foreign_array_type(type(x)):
        xp = namespace(x)
        return xp.asarray(x, dtype=xp.float64)
    return float(x)


def one_like(x: Any) -> Any:
    """Ones of the foreign array ``x``'s shape and dtype, in its namespace (a seed)."""
    return namespace(x).ones_like(x)


def zeros(x: Any, batch: tuple[int, ...] = ()) -> Any:
    """A zero tangent of the foreign array ``x`` with leading batch dimensions ``batch``, in
    its namespace (``x``'s dtype if inexact, else float64)."""
    xp = namespace(x)
    return xp.zeros(tuple(batch) + tuple(x.shape), dtype=_inexact(x, xp))


def directions(x: Any, start: int, stop: int) -> Any:
    """Unit directions ``start`` to ``stop`` (in C order) over the elements of the foreign
    array ``x``, shaped ``(stop - start,) + x.shape``, in its namespace (``jacfwd``'s seeds);
    a direction outside ``0 .. x.size`` (another leaf's, in a pytree) is zero."""
    xp = namespace(x)
    n = math.prod(x.shape)
    return xp.reshape(xp.eye(stop - start, n, k=start, dtype=_inexact(x, xp)),
                      (stop - start,) + tuple(x.shape))


def _inexact(x: Any, xp: Any) -> Any:
    """The dtype of ``x``'s derivatives: its own if floating or complex, else float64."""
    return x.dtype if kind(x) in "fc" else xp.float64


def write_error(target: Any, mode: str) -> NotImplementedError:
    """The error for an in-place write involving differentiated values into a foreign array:
    the engines follow writes through NumPy's memory layout, which other namespaces do not
    share, and an unfollowed write would lose a derivative silently."""
    name = type(target).__module__.split(".")[0]
    return NotImplementedError(
        f"overdub_ad {mode} mode cannot follow an in-place write (a[i] = v, a += v, out=) into "
        f"an array of {name} when differentiated values are involved; build the array "
        f"functionally instead (np.where, np.concatenate, np.stack, a = a + v)")


def cast(ct: Any, x: Any) -> Any:
    """The cotangent ``ct`` of the foreign array ``x`` as an array of ``x``'s namespace and
    shape (a rule may give a number, or a cotangent at a broadcast shape)."""
    if is_foreign_array_type(type(ct)) and tuple(ct.shape) == tuple(x.shape):
        return ct
    xp = namespace(x)
    return xp.broadcast_to(xp.asarray(ct), tuple(x.shape))


def attribute_error(x: Any, name: str, mode: str) -> Exception:
    """The error for reading numbers out of a differentiated foreign array through an attribute
    (``x._array``, the library's own storage): they would come without their derivative."""
    return MissingRuleError(
        f"no {mode}-mode derivative for the attribute {name!r} of a differentiated "
        f"{type(x).__module__}.{type(x).__qualname__}: its values would lose their derivative; "
        f"compute with NumPy functions inside overdub_gpu.ArrayBackendContext(xp), which runs "
        f"them (and their derivative rules) with the namespace's own functions")
