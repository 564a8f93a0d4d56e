"""Methods of differentiated arrays restated as functions (``a.reshape``, ``a.fill``,
``a.flat``...), and in-place NumPy functions restated as Python writes (``np.put``,
``np.fill_diagonal``, ``ufunc.at``): both modes differentiate these instead of the C methods."""

from __future__ import annotations

import builtins
import functools
import operator
import types
from typing import Any, Literal

import numpy as np

from overdub import current_context, opaque

from . import _callbacks, _rules

_Order = Literal["K", "A", "C", "F"]  # NumPy's memory orders


class _Unsupported:
    """A method of a differentiated array with no derivative: calling it is an error."""

    def __init__(self, method: Any) -> None:
        self.method = method

    @opaque
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise _rules.missing(self.method, 0, "reverse", "ReverseContext")


# -- methods and attributes of differentiated arrays -------------------------------------------

_ATTRIBUTES = {"real": np.real, "imag": np.imag, "T": np.transpose}
if hasattr(np, "matrix_transpose"):  # (x.mT: NumPy 2)
    _ATTRIBUTES["mT"] = np.matrix_transpose


def _m_reshape(x: Any, *shape: Any, **kwargs: Any) -> Any:
    return np.reshape(x, shape[0] if len(shape) == 1 else shape, **kwargs)


def _m_transpose(x: Any, *axes: Any) -> Any:
    return np.transpose(x, axes[0] if len(axes) == 1 else (axes if axes else None))


def _m_flatten(x: Any, order: _Order = "C") -> Any:
    return np.copy(np.ravel(x, order))


def _m_copy(x: Any, order: _Order = "C") -> Any:
    return np.copy(x, order=order)


def _m_astype(x: Any, dtype: Any, order: str = "K", casting: str = "unsafe", subok: bool = True,
              copy: bool = True) -> Any:
    return np.astype(x, dtype, copy=copy)


def _m_item(x: Any, *args: Any) -> Any:
    if not args:
        v = np.reshape(x, ())
    elif len(args) == 1 and not isinstance(args[0], tuple):
        v = np.ravel(x)[args[0]]
    else:
        v = x[args[0] if len(args) == 1 else args]
    kind = np.result_type(v).kind
    if kind == "c":
        return complex(v)
    if kind == "f":
        return float(v)
    return np.asarray(v).item()


def _m_tolist(x: Any) -> Any:
    if np.ndim(x) == 0:
        return _m_item(x)
    return [_m_tolist(x[i]) for i in range(len(x))]


def _m_fill(x: Any, value: Any) -> None:
    x[...] = value


def _m_sort(x: Any, axis: int = -1, kind: Any = None, order: Any = None) -> None:
    x[...] = np.sort(x, axis=axis, kind=kind)


def _m_compress(x: Any, condition: Any, axis: Any = None) -> Any:
    return np.compress(condition, x, axis=axis)


def _m_array_wrap(x: Any, array: Any, context: Any = None, return_scalar: bool = False) -> Any:
    """``x.__array_wrap__(array)`` for a base ndarray ``x`` (NumPy's linalg wraps results so):
    ``array`` itself."""
    return array[()] if return_scalar and np.ndim(array) == 0 else array


def _m_view(x: Any, dtype: Any = None, type: Any = None) -> Any:
    if isinstance(dtype, builtins.type) and issubclass(dtype, np.ndarray):
        dtype, type = None, dtype  # (x.view(np.ndarray): NumPy reads a class as the type)
    if (dtype is None or np.dtype(dtype) == np.result_type(x)) and \
            (type is None or type is np.ndarray):
        return x[...]
    mode, context = _running()
    public = _callbacks.public_caller(np.ndarray.view)
    raise _rules.MissingRuleError(
        f"no {mode}-mode derivative for ndarray.view with another dtype or type (a masked "
        f"array, a record or integer view){'' if public is None else ', called by ' + public} "
        f"under {context}")


def _running() -> tuple[str, str]:
    """The mode of the engine running this code, and its context's class name: the methods
    here serve both modes, and an error says which one ran."""
    context = builtins.type(current_context())
    forward = any(c.__name__ == "ForwardContext" for c in context.__mro__)
    return "forward" if forward else "reverse", context.__name__


def _cycled(values: Any, n: Any, positions: Any = None) -> Any:
    """``values`` repeated cyclically to ``n`` items (at ``positions``), as NumPy's put does."""
    flat = np.ravel(values)
    where = np.arange(n) if positions is None else positions
    return np.take(flat, where % np.size(flat))


def _write_at(a: Any, positions: Any, values: Any) -> None:
    """``a.flat[positions] = values`` as the index write it is (the engines follow those).
    A 0-d ``a`` has one position, which ``np.unravel_index`` gives no index for: written as
    ``a[()]`` (SciPy's ``np.place`` into a 0-d output: a distribution's ``entropy``)."""
    if np.ndim(a) == 0:
        if np.size(positions):
            a[()] = np.ravel(values)[-1]  # (the last write wins, as in NumPy)
        return
    a[np.unravel_index(positions, np.shape(a))] = values


def _put(a: Any, ind: Any, v: Any, mode: str = "raise") -> None:
    ind = np.ravel(np.asarray(ind))
    if ind.size == 0:
        return  # (np.put(a, [], []): nothing put; [] is an array of floats to NumPy)
    n = np.size(a)
    if mode == "clip":
        ind = np.clip(ind, 0, n - 1)
    elif mode == "wrap":
        ind = ind % n
    else:
        ind = np.where(ind < 0, ind + n, ind)
    _write_at(a, ind, _cycled(v, len(ind)))


def _putmask(a: Any, mask: Any, values: Any) -> None:
    pos = np.flatnonzero(np.broadcast_to(mask, np.shape(a)))
    _write_at(a, pos, _cycled(values, len(pos), pos))


def _place(arr: Any, mask: Any, vals: Any) -> None:
    pos = np.flatnonzero(np.broadcast_to(mask, np.shape(arr)))
    _write_at(arr, pos, _cycled(vals, len(pos)))


def _fill_diagonal(a: Any, val: Any, wrap: bool = False) -> None:
    shape = np.shape(a)
    if len(shape) == 2:
        step = shape[1] + 1
        end = None if wrap else shape[1] * shape[1]
    else:
        step = 1 + int(np.sum(np.cumprod(shape[:-1])))
        end = None
    idx = np.arange(np.size(a))[:end:step]
    a[np.unravel_index(idx, shape)] = _cycled(val, len(idx))


def _ufunc_at(ufunc: Any, a: Any, indices: Any, b: Any = None) -> None:
    """``ufunc.at(a, indices, b)``: unbuffered, each index in turn, a repeated one applied
    again to what the previous wrote.  ``add`` and ``subtract`` as one scatter-add; any other
    ufunc (``multiply``, ``maximum``...) element by element, each step an element read, the
    ufunc and an element write, which the engines differentiate as written."""
    shape = np.shape(a)
    pos = np.reshape(np.arange(np.size(a)), shape)[indices]
    if b is None and ufunc.nin == 2:
        raise ValueError("second operand needed for ufunc")  # (NumPy's words)
    if b is not None and (ufunc is np.add or ufunc is np.subtract):
        weights = np.ravel(np.broadcast_to(b, np.shape(pos)))
        total = np.reshape(np.bincount(np.ravel(pos), weights, np.size(a)), shape)
        a[...] = a + total if ufunc is np.add else a - total
        return
    flat = np.ravel(pos).tolist()
    if b is None:
        for p in flat:
            at = np.unravel_index(p, shape)
            a[at] = ufunc(a[at])
        return
    values = np.broadcast_to(b, np.shape(pos)).reshape(-1)
    for k, p in enumerate(flat):
        at = np.unravel_index(p, shape)
        a[at] = ufunc(a[at], values[k])


_REPLACEMENTS = {id(f): (f, r) for f, r in ((np.fill_diagonal, _fill_diagonal), (np.put, _put),
                                            (np.putmask, _putmask), (np.place, _place))}


def _replacement(fn: Any) -> Any:
    """A differentiable Python version of an in-place NumPy function (None: there is none)."""
    found = _REPLACEMENTS.get(id(fn))
    if found is not None and found[0] is fn:
        return found[1]
    standin = _rules.standin(fn, _rules.vjp_rules)  # (SciPy's solvers, restated by the rule
    # modules; a rule registered for fn wins)
    if standin is not None:
        return standin
    if type(fn) is types.MethodDescriptorType and fn.__name__ in _METHODS and \
            issubclass(fn.__objclass__, (np.ndarray, np.generic)) and \
            _rules.vjp_rules(fn) is None:  # (rules registered for the method win)
        return _METHODS[fn.__name__]  # np.ndarray.tolist(x): a method spelled through its class
    if type(fn) is types.BuiltinMethodType:
        owner = fn.__self__
        if isinstance(owner, np.ufunc) and fn.__name__ == "at":
            return functools.partial(_ufunc_at, owner)
        if isinstance(owner, (np.ndarray, np.generic)) and fn.__name__ in _METHODS:
            # a method of a plain array given a differentiated argument (a.dot(x), a.fill(x))
            return functools.partial(_METHODS[fn.__name__], owner)
    return None


class _Flat:
    """``x.flat`` of a differentiated array.  NumPy's flat iterator reads and writes the
    array's memory natively, so its elements would lose their derivatives; this stand-in is
    Python code, which the context runs: elements read and written by their position.  An
    iterator as NumPy's is (``iter(x.flat)`` is itself), with the ``index`` and ``coords`` of
    the next element, which ``np.ndenumerate`` reads."""

    def __init__(self, base: Any) -> None:
        self.base = base
        self.index = 0

    @property
    def coords(self) -> tuple[int, ...]:
        shape: tuple[int, ...] = np.shape(self.base)
        if self.index >= np.size(self.base):  # past the end: NumPy's (n, 0, ...) (ndenumerate
            return shape[:1] + (0,) * (len(shape) - 1)  # reads it before its last next)
        return tuple(int(i) for i in np.unravel_index(self.index, shape))

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        if self.index >= np.size(self.base):
            raise StopIteration
        value = self.base[self.coords]  # (a read of one element: the engines' cheapest)
        self.index += 1
        return value

    def __len__(self) -> int:
        return int(np.size(self.base))

    def __getitem__(self, i: Any) -> Any:
        return np.ravel(self.base)[i]

    def __setitem__(self, i: Any, value: Any) -> None:
        base = self.base
        positions = np.arange(np.size(base))[i]
        if np.ndim(positions) == 0:  # one position: the value's first element, as NumPy's
            _write_at(base, positions, np.ravel(value)[0] if np.ndim(value) else value)
        else:  # the values cycled over the positions (or cut short), as NumPy's
            _write_at(base, positions, _cycled(value, np.size(positions)))

    def copy(self) -> Any:
        return np.copy(np.ravel(self.base))

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        return np.ravel(self.base)


_METHODS: dict[str, Any] = {
    name: getattr(np, name) for name in (
        "sum", "mean", "prod", "max", "min", "std", "var", "cumsum", "cumprod", "ravel",
        "squeeze", "swapaxes", "dot", "clip", "conj", "conjugate", "trace", "take", "repeat",
        "diagonal", "round", "argmax", "argmin", "argsort", "nonzero", "all", "any",
        "searchsorted") if hasattr(np.ndarray, name)}
_METHODS.update({"reshape": _m_reshape, "transpose": _m_transpose, "flatten": _m_flatten,
                 "copy": _m_copy, "astype": _m_astype, "item": _m_item, "tolist": _m_tolist,
                 "fill": _m_fill, "sort": _m_sort, "compress": _m_compress, "view": _m_view,
                 "put": _put, "__array_wrap__": _m_array_wrap})


def _swapped(op: Any) -> Any:
    def reflected(x: Any, other: Any) -> Any:  # x.__radd__(other) is other + x
        return op(other, x)
    return reflected


# An operator's method called by name (x.__mul__(y), y.__imul__(2.0)) is the operator, which
# the engines differentiate (in place for __imul__ and the like)
for _name, _pure, _inplace in (
        ("add", operator.add, operator.iadd), ("sub", operator.sub, operator.isub),
        ("mul", operator.mul, operator.imul), ("truediv", operator.truediv, operator.itruediv),
        ("floordiv", operator.floordiv, operator.ifloordiv), ("mod", operator.mod, operator.imod),
        ("pow", operator.pow, operator.ipow), ("matmul", operator.matmul, operator.imatmul)):
    _METHODS.update({f"__{_name}__": _pure, f"__r{_name}__": _swapped(_pure),
                     f"__i{_name}__": _inplace})
