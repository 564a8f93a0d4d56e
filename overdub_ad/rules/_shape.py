"""Rules for NumPy's shape, joining, splitting and array-building functions.

Abbreviations: ``x`` the array argument, ``xs`` a list of arrays, ``out`` the primal output,
``dx`` a tangent with ``nb`` leading batch dimensions of shape ``B``, ``ct`` a cotangent.

Conventions:

- Every function here is linear in its array arguments.  A forward rule applies the same
  operation to ``dx``, with axis arguments turned negative so that they name the same axes of
  ``x`` and of a batched ``dx``.  Operations that move elements around in ways that do not
  translate that simply (``pad``, ``repeat``, ``diag``) use an *index map*: the operation
  applied to the positions ``arange(x.size)``, gathered from ``dx`` (forward) and summed back
  with ``bincount`` (reverse), which is exact for repeated positions.
- A container argument (``np.concatenate``'s list) has a list tangent/cotangent; ``None`` in a
  tangent list is a zero.  A function with several outputs (``np.split``) has a list or tuple of
  tangents, and receives one of cotangents in which ``None`` is a zero.
- ``np.array``/``np.asarray`` of a (nested) list of scalars or arrays stack the tangents; the
  reverse rule splits the cotangent back into the same nested structure.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from overdub import opaque

from .. import _arrays
from .._rules import (LINEAR, ZERO, MissingRuleError, defjvp, defstandin, defvjp,
                      nondifferentiable, same_rules)
from ._common import (as_array_tangent, bshape, cts, fill, fit, gather, indexed, like_argument,
                      like_items,
                      lift, map_batch, nbatch, neg_axes, neg_axis, positions, scatter, tri,
                      zero_like)


def _to_shape(dx: Any, x: Any, out: Any) -> Any:
    """``dx`` reshaped to ``B + out.shape`` (for operations that only reshape)."""
    return np.reshape(dx, bshape(dx, x) + np.shape(out))


def _back(ct: Any, out: Any, /, x: Any, *a: Any, **k: Any) -> Any:
    return np.reshape(ct, np.shape(x))


def _reshape_order(x: Any, order: Any) -> Any:
    if order == "A":
        return "F" if np.isfortran(np.asarray(x)) else "C"
    return order


# -- reshaping ------------------------------------------------------------------------------

def _reshape_jvp(dx: Any, out: Any, /, x: Any, *args: Any, order: Any = "C", **kw: Any) -> Any:
    order = _reshape_order(x, args[1] if len(args) > 1 else order)
    if order == "C":
        return _to_shape(dx, x, out)
    return map_batch(lambda t: np.reshape(t, np.shape(out), order=order), dx, np.ndim(x))


def _reshape_vjp(ct: Any, out: Any, /, x: Any, *args: Any, order: Any = "C", **kw: Any) -> Any:
    order = _reshape_order(x, args[1] if len(args) > 1 else order)
    if order == "C":  # NumPy's default, the only order other namespaces have
        return np.reshape(ct, np.shape(x))
    return np.reshape(ct, np.shape(x), order=order)


defjvp(np.reshape, _reshape_jvp, ZERO)
defvjp(np.reshape, _reshape_vjp, ZERO)
defjvp(np.ravel, lambda dx, out, /, x, order="C": _reshape_jvp(dx, out, x, -1, order))
defvjp(np.ravel, lambda ct, out, /, x, order="C": _reshape_vjp(ct, out, x, -1, order))
_fn: Any  # the loops below run over callables of many types
for _fn in (np.squeeze, np.expand_dims, np.copy, np.ascontiguousarray, np.asfortranarray):
    defjvp(_fn, lambda dx, out, /, x, *a, **k: _to_shape(dx, x, out), ZERO)
    defvjp(_fn, _back, ZERO)


def _transpose_perm(x: Any, axes: Any) -> Any:
    nd = np.ndim(x)
    return tuple(range(nd - 1, -1, -1)) if axes is None else tuple(int(a) % nd for a in axes)


def _inverse(perm: tuple[int, ...]) -> tuple[int, ...]:
    """The inverse permutation, in Python: axes are host data, whatever namespace ``x`` is in."""
    return tuple(sorted(range(len(perm)), key=perm.__getitem__))


def _transpose_jvp(dx: Any, out: Any, /, x: Any, axes: Any = None) -> Any:
    nb = nbatch(dx, x)
    return np.transpose(dx, tuple(range(nb)) + tuple(nb + p for p in _transpose_perm(x, axes)))


defjvp(np.transpose, _transpose_jvp, ZERO)
defvjp(np.transpose, lambda ct, out, /, x, axes=None:
       np.transpose(ct, _inverse(_transpose_perm(x, axes))), ZERO)
if hasattr(np, "matrix_transpose"):  # NumPy 2
    defjvp(np.matrix_transpose, LINEAR)
    defvjp(np.matrix_transpose, lambda ct, out, /, x: np.matrix_transpose(ct))
defjvp(np.moveaxis, lambda dx, out, /, x, source, destination: np.moveaxis(
    dx, neg_axes(source, np.ndim(x)), neg_axes(destination, np.ndim(x))), ZERO, ZERO)
defvjp(np.moveaxis, lambda ct, out, /, x, source, destination:
       np.moveaxis(ct, destination, source), ZERO, ZERO)
defjvp(np.swapaxes, lambda dx, out, /, x, axis1, axis2: np.swapaxes(
    dx, neg_axis(axis1, np.ndim(x)), neg_axis(axis2, np.ndim(x))), ZERO, ZERO)
defvjp(np.swapaxes, lambda ct, out, /, x, axis1, axis2: np.swapaxes(ct, axis1, axis2),
       ZERO, ZERO)
if hasattr(np, "matrix_transpose"):  # (NumPy 2: also what x.mT reads)
    defjvp(np.matrix_transpose, lambda dx, out, /, x: np.swapaxes(dx, -1, -2))
    defvjp(np.matrix_transpose, lambda ct, out, /, x: np.swapaxes(ct, -1, -2))


# -- broadcasting -----------------------------------------------------------------------------

defjvp(np.broadcast_to, lambda dx, out, /, x, shape, **kw: np.broadcast_to(
    lift(dx, x, out), bshape(dx, x) + np.shape(out)), ZERO)
defvjp(np.broadcast_to, lambda ct, out, /, x, shape, **kw: ct, ZERO)


def _broadcast_arrays_rule(i: int, mode: str) -> Callable[..., Any]:
    def rule(d: Any, out: Any, /, *xs: Any, **kw: Any) -> Any:
        if mode == "rev":
            return zero_like(out[i]) if d[i] is None else d[i]
        t = fit(lift(d, xs[i], out[i]), d, xs[i], out[i])
        return tuple(t if k == i else None for k in range(len(xs)))
    return rule


defjvp(np.broadcast_arrays, *indexed(lambda i: _broadcast_arrays_rule(i, "fwd")))
defvjp(np.broadcast_arrays, *indexed(lambda i: _broadcast_arrays_rule(i, "rev")))


def _atleast_rule(i: int, mode: str) -> Callable[..., Any]:
    def rule(d: Any, out: Any, /, *xs: Any) -> Any:
        if len(xs) == 1:
            return _to_shape(d, xs[0], out) if mode == "fwd" else np.reshape(d, np.shape(xs[0]))
        if mode == "rev":
            return np.reshape(cts(d, out)[i], np.shape(xs[i]))
        return tuple(_to_shape(d, xs[i], out[i]) if k == i else None for k in range(len(xs)))
    return rule


for _fn in (np.atleast_1d, np.atleast_2d, np.atleast_3d):
    defjvp(_fn, *indexed(lambda i: _atleast_rule(i, "fwd")))
    defvjp(_fn, *indexed(lambda i: _atleast_rule(i, "rev")))


# -- joining and splitting --------------------------------------------------------------------

def _concat_parts(xs: Any, axis: Any) -> Any:
    """(arrays as concatenated, negative axis) for np.concatenate(xs, axis)."""
    if axis is None:
        return [np.ravel(x) for x in xs], -1
    nd = np.ndim(xs[0])
    return list(xs), neg_axis(axis, nd)


def _concat_jvp(dxs: Any, out: Any, /, xs: Any, axis: Any = 0, *a: Any, **kw: Any) -> Any:
    dxs = fill(dxs, xs)
    if axis is None:
        dxs = [np.reshape(d, bshape(d, x) + (-1,)) for d, x in zip(dxs, xs)]
        return np.concatenate(dxs, axis=-1)
    return np.concatenate(dxs, axis=neg_axis(axis, np.ndim(xs[0])))


def _split_back(ct: Any, pieces: Any, ax: Any) -> Any:
    """``ct`` split along ``ax`` into parts as long as ``pieces`` are along it."""
    sizes = [np.shape(p)[ax] for p in pieces]  # host data: Python's sums, not an array's
    return np.split(ct, list(itertools.accumulate(sizes))[:-1], axis=ax)


def _concat_vjp(ct: Any, out: Any, /, xs: Any, axis: Any = 0, *a: Any, **kw: Any) -> Any:
    parts, ax = _concat_parts(xs, axis)
    return like_items(xs, [np.reshape(g, np.shape(x))
                           for g, x in zip(_split_back(ct, parts, ax), xs)])


for _fn in {np.concatenate, getattr(np, "concat", np.concatenate)}:
    defjvp(_fn, _concat_jvp)
    defvjp(_fn, _concat_vjp)


def _stack_jvp(dxs: Any, out: Any, /, xs: Any, axis: Any = 0, *a: Any, **kw: Any) -> Any:
    return np.stack(fill(dxs, xs), axis=neg_axis(axis, np.ndim(out)))


def _stack_vjp(ct: Any, out: Any, /, xs: Any, axis: Any = 0, *a: Any, **kw: Any) -> Any:
    ax = neg_axis(axis, np.ndim(out))
    return like_items(xs, [np.take(ct, i, axis=ax) for i in range(len(xs))])


defjvp(np.stack, _stack_jvp)
defvjp(np.stack, _stack_vjp)


def _column(x: Any) -> Any:
    return np.reshape(x, (-1, 1)) if np.ndim(x) < 2 else x


# function: (promotion of each input, axis of the promoted inputs)
_STACKERS: dict[Any, tuple[Callable[..., Any], Callable[[int], int]]] = {
    np.hstack: (np.atleast_1d, lambda nd: 0 if nd == 1 else 1),
    np.vstack: (np.atleast_2d, lambda nd: 0),
    np.dstack: (np.atleast_3d, lambda nd: 2),
    np.column_stack: (_column, lambda nd: 1),
}


def _stacker_rules(fn: Any) -> None:
    promote, axis_of = _STACKERS[fn]

    def parts(xs: Any) -> Any:
        arrays = [promote(np.asarray(x)) for x in xs]
        return arrays, neg_axis(axis_of(np.ndim(arrays[0])), np.ndim(arrays[0]))

    def jvp(dxs: Any, out: Any, /, xs: Any, **kw: Any) -> Any:
        arrays, ax = parts(xs)
        dxs = [np.reshape(d, bshape(d, x) + np.shape(p))
               for d, x, p in zip(fill(dxs, xs), xs, arrays)]
        return np.concatenate(dxs, axis=ax)

    def vjp(ct: Any, out: Any, /, xs: Any, **kw: Any) -> Any:
        arrays, ax = parts(xs)
        return like_items(xs, [np.reshape(g, np.shape(x))
                               for g, x in zip(_split_back(ct, arrays, ax), xs)])
    defjvp(fn, jvp)
    defvjp(fn, vjp)


for _fn in _STACKERS:
    _stacker_rules(_fn)


def _append_jvp(pos: int) -> Callable[..., Any]:
    def rule(d: Any, out: Any, /, arr: Any, values: Any, axis: Any = None) -> Any:
        d = as_array_tangent(d, (arr, values)[pos])
        arr, values = np.asarray(arr), np.asarray(values)
        xs = [arr, values]
        dxs = [d if k == pos else None for k in range(2)]
        if axis is None:
            dxs = [None if t is None else np.reshape(t, bshape(t, x) + (-1,))
                   for t, x in zip(dxs, xs)]
            return np.concatenate(fill(dxs, [np.ravel(x) for x in xs]), axis=-1)
        return np.concatenate(fill(dxs, xs), axis=neg_axis(axis, np.ndim(arr)))
    return rule


def _append_vjp(pos: int) -> Callable[..., Any]:
    def rule(ct: Any, out: Any, /, arr: Any, values: Any, axis: Any = None) -> Any:
        parts, ax = _concat_parts([np.asarray(arr), np.asarray(values)], axis)
        return like_argument(_split_back(ct, parts, ax)[pos], (arr, values)[pos])
    return rule


defjvp(np.append, _append_jvp(0), _append_jvp(1))
defvjp(np.append, _append_vjp(0), _append_vjp(1))


_SPLIT_AXIS = {np.split: None, np.array_split: None, np.hsplit: "h", np.vsplit: 0,
               np.dsplit: 2}


def _split_axis(fn: Any, x: Any, args: Any, kwargs: Any) -> Any:
    fixed = _SPLIT_AXIS[fn]
    if fixed is None:
        return args[0] if args else kwargs.get("axis", 0)
    if fixed == "h":
        return 1 if np.ndim(x) > 1 else 0
    return fixed


def _split_rules(fn: Any) -> None:
    def jvp(dx: Any, out: Any, /, x: Any, ios: Any, *args: Any, **kwargs: Any) -> Any:
        ax = neg_axis(_split_axis(fn, x, args, kwargs), np.ndim(x))
        return list(np.array_split(dx, ios, axis=ax))

    def vjp(ct: Any, out: Any, /, x: Any, ios: Any, *args: Any, **kwargs: Any) -> Any:
        ax = neg_axis(_split_axis(fn, x, args, kwargs), np.ndim(x))
        return np.concatenate(cts(ct, out), axis=ax)
    defjvp(fn, jvp, ZERO)
    defvjp(fn, vjp, ZERO)


for _fn in _SPLIT_AXIS:
    _split_rules(_fn)

if hasattr(np, "unstack"):  # NumPy 2.1+
    defjvp(np.unstack, lambda dx, out, /, x, *, axis=0:
           tuple(np.unstack(dx, axis=neg_axis(axis, np.ndim(x)))))
    defvjp(np.unstack, lambda ct, out, /, x, *, axis=0: np.stack(cts(ct, out), axis=axis))


# -- repeating, rolling, flipping, padding ------------------------------------------------------

def _index_rules(fn: Any, index_map: Any, *rest: Any) -> None:
    """Rules of a linear ``fn`` that only moves elements: ``index_map(x, *args, **kwargs)``
    gives, for each output element, the flat position of ``x`` it comes from (-1: a zero)."""
    def jvp(dx: Any, out: Any, /, x: Any, *args: Any, **kwargs: Any) -> Any:
        idx = index_map(x, *args, **kwargs)
        t = gather(dx, x, np.maximum(idx, 0))
        return t if np.all(idx >= 0) else np.where(idx >= 0, t, 0.0)

    def vjp(ct: Any, out: Any, /, x: Any, *args: Any, **kwargs: Any) -> Any:
        idx = index_map(x, *args, **kwargs)
        keep = idx >= 0
        return scatter(np.where(keep, ct, 0.0), x, np.maximum(idx, 0))
    defjvp(fn, jvp, *rest)
    defvjp(fn, vjp, *rest)


def _padded_positions(x: Any, f: Any) -> Any:
    """``f`` applied to positions + 1, minus 1: the zeros that ``f`` inserts become -1."""
    return f(positions(x) + 1) - 1


_index_rules(np.repeat, lambda x, repeats, axis=None: np.repeat(positions(x), repeats, axis),
             ZERO)
_index_rules(np.tile, lambda x, reps: np.tile(positions(x), reps), ZERO)
_index_rules(np.diag, lambda x, k=0: _padded_positions(x, lambda p: np.diag(p, k)) if np.ndim(x)
             == 1 else np.diag(positions(x), k))
_index_rules(np.diagflat, lambda x, k=0: _padded_positions(x, lambda p: np.diagflat(p, k)))


# np.pad: the modes that copy elements (constant, edge, reflect, symmetric, wrap) are index
# maps, with rules; the others (mean, maximum, minimum, median, linear_ramp, odd reflection, a
# function) are NumPy's own code, differentiated through (statistics of edge slices written
# into the padded array)
_COPYING = ("constant", "edge", "reflect", "symmetric", "wrap")
_PAD_CODE = getattr(np.pad, "_implementation", None)


@opaque
def _pad_copying(x: Any, pad_width: Any, mode: Any = "constant", **kwargs: Any) -> Any:
    """``np.pad`` itself, for a mode that copies elements."""
    return np.pad(x, pad_width, mode=mode, **kwargs)


def _pad_map(x: Any, pad_width: Any, mode: Any = "constant", **kwargs: Any) -> Any:
    if mode == "constant":
        return np.pad(positions(x), pad_width, mode="constant", constant_values=-1)
    return np.pad(positions(x), pad_width, mode=mode)


_index_rules(_pad_copying, _pad_map, ZERO, ZERO)


def _pad(array: Any, pad_width: Any, mode: Any = "constant", **kwargs: Any) -> Any:
    if (isinstance(mode, str) and mode in _COPYING
            and kwargs.get("reflect_type", "even") == "even") or _PAD_CODE is None:
        return _pad_copying(array, pad_width, mode, **kwargs)
    return _PAD_CODE(array, pad_width, mode, **kwargs)


defstandin(np.pad, _pad)


def _roll_jvp(dx: Any, out: Any, /, x: Any, shift: Any, axis: Any = None) -> Any:
    if axis is None:
        flat = np.reshape(dx, bshape(dx, x) + (-1,))
        return np.reshape(np.roll(flat, shift, axis=-1), np.shape(dx))
    return np.roll(dx, shift, axis=neg_axes(axis, np.ndim(x)) if isinstance(axis, (tuple, list))
                   else neg_axis(axis, np.ndim(x)))


def _negated(shift: Any) -> Any:
    """The opposite shift, of the kind given (a number stays a number: ``np.roll`` in other
    array namespaces takes Python integers or tuples of them, not arrays)."""
    return tuple(-s for s in shift) if isinstance(shift, (tuple, list)) else -shift


defjvp(np.roll, _roll_jvp, ZERO)
defvjp(np.roll, lambda ct, out, /, x, shift, axis=None: np.roll(ct, _negated(shift), axis),
       ZERO)
defjvp(np.flip, lambda dx, out, /, x, axis=None: np.flip(dx, neg_axes(axis, np.ndim(x))))
defvjp(np.flip, lambda ct, out, /, x, axis=None: np.flip(ct, axis))
defjvp(np.flipud, lambda dx, out, /, x: np.flip(dx, neg_axis(0, np.ndim(x))))
defvjp(np.flipud, lambda ct, out, /, x: np.flipud(ct))
defjvp(np.fliplr, lambda dx, out, /, x: np.flip(dx, neg_axis(1, np.ndim(x))))
defvjp(np.fliplr, lambda ct, out, /, x: np.fliplr(ct))
defjvp(np.rot90, lambda dx, out, /, x, k=1, axes=(0, 1):  # axes: two, NumPy checked them
       np.rot90(dx, k, axes=neg_axes(axes, np.ndim(x))))  # type: ignore[arg-type]
defvjp(np.rot90, lambda ct, out, /, x, k=1, axes=(0, 1): np.rot90(ct, -k, axes=axes))


# -- triangles and diagonals -----------------------------------------------------------------

def _tri_mask(x: Any, k: Any, upper: Any) -> Any:
    n, m = np.shape(x)[-2:]
    lower = tri(n, m, k - 1 if upper else k)
    return np.logical_not(lower) if upper else lower


# (a selection, as NumPy's own tril/triu make it: array namespaces other than NumPy need not
# multiply by booleans)
defjvp(np.triu, lambda dx, out, /, x, k=0: np.where(_tri_mask(x, k, True), dx, 0.0))
defvjp(np.triu, lambda ct, out, /, x, k=0: np.where(_tri_mask(x, k, True), ct, 0.0))
defjvp(np.tril, lambda dx, out, /, x, k=0: np.where(_tri_mask(x, k, False), dx, 0.0))
defvjp(np.tril, lambda ct, out, /, x, k=0: np.where(_tri_mask(x, k, False), ct, 0.0))


def _diagonal_jvp(dx: Any, out: Any, /, x: Any, offset: Any = 0, axis1: Any = 0,
                  axis2: Any = 1) -> Any:
    nd = np.ndim(x)
    return np.diagonal(dx, offset, neg_axis(axis1, nd), neg_axis(axis2, nd))


defjvp(np.diagonal, _diagonal_jvp)
defvjp(np.diagonal, lambda ct, out, /, x, offset=0, axis1=0, axis2=1: scatter(
    ct, x, np.diagonal(positions(x), offset, axis1, axis2)))
if hasattr(np.linalg, "diagonal"):  # NumPy 2: the last two axes
    defjvp(np.linalg.diagonal, lambda dx, out, /, x, *, offset=0: np.diagonal(dx, offset, -2, -1))
    defvjp(np.linalg.diagonal, lambda ct, out, /, x, *, offset=0: scatter(
        ct, x, np.diagonal(positions(x), offset, -2, -1)))


# -- differences ----------------------------------------------------------------------------

def _diff_extra(v: Any, x: Any, ax: Any, batch: Any) -> Any:
    """The zero tangent of a ``prepend``/``append`` value ``v`` (or None)."""
    if v is np._NoValue or v is None:
        return None
    shape = list(batch + np.shape(x))
    shape[ax] = 1 if np.ndim(v) == 0 else np.shape(v)[ax]
    return np.zeros(shape)


def _diff_jvp(dx: Any, out: Any, /, x: Any, n: Any = 1, axis: Any = -1, prepend: Any = np._NoValue,
              append: Any = np._NoValue) -> Any:
    ax = neg_axis(axis, np.ndim(x))
    batch = bshape(dx, x)
    parts = [p for p in (_diff_extra(prepend, x, ax, batch), dx,
                         _diff_extra(append, x, ax, batch)) if p is not None]
    t = np.concatenate(parts, axis=ax) if len(parts) > 1 else dx
    return np.diff(t, n, axis=ax)


def _diff_vjp(ct: Any, out: Any, /, x: Any, n: Any = 1, axis: Any = -1, prepend: Any = np._NoValue,
              append: Any = np._NoValue) -> Any:
    ax = neg_axis(axis, np.ndim(x))
    g = ct
    for _ in range(n):
        g = -np.diff(g, axis=ax, prepend=0, append=0)
    start = 0 if _diff_extra(prepend, x, ax, ()) is None else \
        np.shape(_diff_extra(prepend, x, ax, ()))[ax]
    return np.take(g, np.arange(start, start + np.shape(x)[ax]), axis=ax)


def _diff_edge_jvp(at: int) -> Callable[..., Any]:
    """The forward rule of ``np.diff``'s ``prepend`` (``at`` 0) or ``append`` (``at`` 2):
    the differences of the concatenation with the tangent there and zeros elsewhere."""
    def rule(dv: Any, out: Any, /, x: Any, n: Any = 1, axis: Any = -1,
             prepend: Any = np._NoValue, append: Any = np._NoValue) -> Any:
        ax = neg_axis(axis, np.ndim(x))
        batch = bshape(dv, prepend if at == 0 else append)
        extras = (prepend, x, append)
        zeros = [np.zeros(batch + np.shape(x)) if i == 1 else _diff_extra(v, x, ax, batch)
                 for i, v in enumerate(extras)]
        if np.ndim((prepend, x, append)[at]) == 0:  # a number prepended: a row of it
            dv = np.reshape(dv, batch + (1,) * np.ndim(x))
        zeros[at] = zeros[at] + dv
        return np.diff(np.concatenate([z for z in zeros if z is not None], axis=ax), n,
                       axis=ax)
    return rule


def _diff_edge_vjp(at: int) -> Callable[..., Any]:
    """The reverse rule of ``np.diff``'s ``prepend`` (``at`` 0) or ``append`` (``at`` 2):
    the cotangent of the concatenation, at the part the value filled (summed to its shape
    by the engine, where it was broadcast)."""
    def rule(ct: Any, out: Any, /, x: Any, n: Any = 1, axis: Any = -1,
             prepend: Any = np._NoValue, append: Any = np._NoValue) -> Any:
        ax = neg_axis(axis, np.ndim(x))
        g = ct
        for _ in range(n):
            g = -np.diff(g, axis=ax, prepend=0, append=0)
        before = _diff_extra(prepend, x, ax, ())
        start = 0 if before is None else np.shape(before)[ax]
        stop = start + np.shape(x)[ax]
        if at == 0:
            return np.take(g, np.arange(0, start), axis=ax)
        return np.take(g, np.arange(stop, np.shape(g)[ax]), axis=ax)
    return rule


defjvp(np.diff, _diff_jvp, ZERO, ZERO, _diff_edge_jvp(0), _diff_edge_jvp(2))
defvjp(np.diff, _diff_vjp, ZERO, ZERO, _diff_edge_vjp(0), _diff_edge_vjp(2))


# -- building arrays ------------------------------------------------------------------------

def _cast_tangent(t: Any, out: Any) -> Any:
    """The tangent of a cast: in the output's precision (a float32 result has a float32
    tangent, as in JAX), real for a real result, zero for an integer one."""
    dtype = np.asarray(out).dtype
    if not np.issubdtype(dtype, np.inexact):
        return np.zeros(np.shape(t))
    t = np.real(t) if not np.issubdtype(dtype, np.complexfloating) else t
    return t if np.result_type(t) == dtype else np.asarray(t, dtype=dtype)


def _array_jvp(dx: Any, out: Any, /, obj: Any, *a: Any, **kw: Any) -> Any:
    """A dtype asked for is a cast, as ``x.astype(int)`` is (an integer or bool one truncates:
    no derivative); without one the array has its items' own type, and an integer array of
    integers that carry derivatives (``np.array([x, 2])`` at an integer point) keeps theirs."""
    t = as_array_tangent(dx, obj)
    t = np.reshape(t, bshape(t, obj) + np.shape(out))
    if (a[0] if a else kw.get("dtype")) is None and _arrays.kind(np.asarray(out)) in "iu":
        return t
    return _cast_tangent(t, out)


def _array_vjp(ct: Any, out: Any, /, obj: Any, *a: Any, **kw: Any) -> Any:
    return like_argument(ct, obj)


for _fn in (np.array, np.asarray, np.asanyarray):
    defjvp(_fn, _array_jvp, ZERO)
    defvjp(_fn, _array_vjp, ZERO)
# x.__array_wrap__(array): ``array`` as x's type (NumPy's linalg wraps its results so)
defjvp(np.ndarray.__array_wrap__, ZERO, lambda dy, out, /, x, y, *a, **kw: dy)
defvjp(np.ndarray.__array_wrap__, ZERO, lambda ct, out, /, x, y, *a, **kw: ct)
# NumPy's scalar types called on a value (np.float32(x), np.complex128(z), np.int64(w)) cast it
for _fn in (np.float32, np.float64, np.longdouble, np.complex64, np.complex128, np.clongdouble):
    defjvp(_fn, lambda dx, out, /, x, *a, **kw: _cast_tangent(dx, out))
    defvjp(_fn, lambda ct, out, /, x, *a, **kw: ct)
nondifferentiable(np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                  np.uint32, np.uint64)
if hasattr(np, "astype"):  # NumPy 2
    defjvp(np.astype, lambda dx, out, /, x, dtype, **kw: _cast_tangent(dx, out), ZERO)
    defvjp(np.astype, lambda ct, out, /, x, dtype, **kw: ct, ZERO)


def _fill_jvp(like: bool) -> Callable[..., Any]:
    """The tangent rule of ``np.full`` (``like``: ``np.full_like``).  A dtype asked for -- a
    ``dtype`` argument, or ``full_like``'s prototype's -- is a cast, as ``x.astype(int)`` is:
    an integer or bool one holds the value truncated, without a derivative.  ``np.full(2, k)``
    of an integer ``k`` that carries a derivative keeps it."""
    def rule(dv: Any, out: Any, /, *args: Any, **kw: Any) -> Any:
        v = args[1] if len(args) > 1 else kw["fill_value"]
        t = np.broadcast_to(lift(dv, v, out), bshape(dv, v) + np.shape(out))
        asked = like or len(args) > 2 or kw.get("dtype") is not None
        return _cast_tangent(t, out) if asked else t
    return rule


for _fn, _like in ((np.full, False), (np.full_like, True)):
    defjvp(_fn, ZERO, _fill_jvp(_like))
    defvjp(_fn, ZERO, lambda ct, out, /, *args, **kw: ct)


def _linspace_t(start: Any, stop: Any, num: Any, endpoint: Any, axis: Any, out: Any) -> Any:
    """(fractions t shaped along the sample axis, the axis, the samples output)."""
    samples = out[0] if isinstance(out, tuple) else out
    ax = int(axis) % np.ndim(samples)
    t = np.linspace(0.0, 1.0, num, endpoint=endpoint)
    shape = [1] * np.ndim(samples)
    shape[ax] = num
    return np.reshape(t, shape), ax, samples


def _linspace_rule(pos: int, mode: str) -> Callable[..., Any]:
    def rule(d: Any, out: Any, /, start: Any, stop: Any, num: Any = 50, endpoint: Any = True,
             retstep: Any = False, dtype: Any = None, axis: Any = 0, **kw: Any) -> Any:
        t, ax, samples = _linspace_t(start, stop, num, endpoint, axis, out)
        w = 1.0 - t if pos == 0 else t
        div = (num - 1 if endpoint else num) or 1
        sign = -1.0 if pos == 0 else 1.0
        arg = (start, stop)[pos]
        if mode == "rev":
            c, c_step = cts(d, out) if retstep else (d, 0.0)
            g = np.sum(c * w, axis=ax) + sign * c_step / div
            return g
        batch = bshape(d, arg)
        nd = np.ndim(samples) - 1
        lifted = np.reshape(d, batch + (1,) * (nd - np.ndim(arg)) + np.shape(arg))
        t_samples = np.expand_dims(lifted, len(batch) + ax) * w
        t_samples = _cast_tangent(np.broadcast_to(t_samples, batch + np.shape(samples)),
                                  samples)  # (dtype=int: samples truncated)
        if not retstep:
            return t_samples
        return (t_samples, fit(sign * lifted / div, d, arg, out[1]))
    return rule


defjvp(np.linspace, _linspace_rule(0, "fwd"), _linspace_rule(1, "fwd"), ZERO)
defvjp(np.linspace, _linspace_rule(0, "rev"), _linspace_rule(1, "rev"), ZERO)


def _vander_slope(out: Any, increasing: Any) -> Any:
    """``d vander(x) / dx`` row by row: the column of ``x ** p`` has slope ``p x ** (p - 1)``,
    its neighbour's column times ``p`` (read from ``out``: exact, and no ``0 * inf`` at
    ``x = 0``); the column of ``x ** 0`` has slope 0."""
    n, cols = np.shape(out)
    zero = np.zeros((n, min(cols, 1)), np.result_type(out, 0.0))
    if increasing:
        return np.concatenate([zero, out[:, :-1] * np.arange(1, cols)], axis=1)
    return np.concatenate([out[:, 1:] * np.arange(cols - 1, 0, -1), zero], axis=1)


# vander(x, N, increasing): out[i, j] = x[i] ** p_j, elementwise in x (NumPy builds it with
# multiply.accumulate into a buffer, out=, which no rule follows)
defjvp(np.vander, lambda dx, out, /, x, N=None, increasing=False: np.expand_dims(
    as_array_tangent(dx, x), -1) * _vander_slope(out, increasing), ZERO, ZERO)
defvjp(np.vander, lambda ct, out, /, x, N=None, increasing=False: like_argument(
    np.sum(ct * _vander_slope(out, increasing), axis=-1), x), ZERO, ZERO)

nondifferentiable(*(getattr(np, name) for name in (
    "argwhere", "nonzero", "flatnonzero", "count_nonzero", "argmax", "argmin", "nanargmax",
    "nanargmin", "digitize", "unravel_index", "ravel_multi_index", "all", "any", "isin",
    "may_share_memory", "shares_memory")  # (answers about memory: booleans)
    if hasattr(np, name)))


# -- ndarray methods ----------------------------------------------------------------------------

def _method_shape(args: Any) -> Any:
    """The shape given to ``x.reshape(*shape)``: a tuple or the integers themselves."""
    return tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else args


def _method_reshape_jvp(dx: Any, out: Any, /, x: Any, *shape: Any, order: Any = "C") -> Any:
    return _reshape_jvp(dx, out, x, _method_shape(shape), order)


def _method_reshape_vjp(ct: Any, out: Any, /, x: Any, *shape: Any, order: Any = "C") -> Any:
    return _reshape_vjp(ct, out, x, _method_shape(shape), order)


defjvp(np.ndarray.reshape, _method_reshape_jvp)
defvjp(np.ndarray.reshape, _method_reshape_vjp)


def _method_axes(x: Any, axes: Any) -> Any:
    axes = _method_shape(axes)
    return None if not axes or axes == (None,) else axes


defjvp(np.ndarray.transpose, lambda dx, out, /, x, *axes: _transpose_jvp(dx, out, x,
                                                                         _method_axes(x, axes)))
defvjp(np.ndarray.transpose, lambda ct, out, /, x, *axes: np.transpose(
    ct, np.argsort(_transpose_perm(x, _method_axes(x, axes)))))
for _method, _fn in ((np.ndarray.ravel, np.ravel), (np.ndarray.flatten, np.ravel),
                     (np.ndarray.squeeze, np.squeeze), (np.ndarray.swapaxes, np.swapaxes),
                     (np.ndarray.repeat, np.repeat), (np.ndarray.copy, np.copy),
                     (np.ndarray.__copy__, np.copy), (np.ndarray.__deepcopy__, np.copy),
                     (np.ndarray.diagonal, np.diagonal)):
    same_rules(_method, _fn)
# a NumPy scalar's copies (what copy.copy and copy.deepcopy call; the memo is bookkeeping):
# the same number, so the same tangent
defjvp(np.generic.__copy__, lambda dx, out, /, x: dx)
defvjp(np.generic.__copy__, lambda ct, out, /, x: ct)
defjvp(np.generic.__deepcopy__, lambda dx, out, /, x, memo: dx, ZERO)
defvjp(np.generic.__deepcopy__, lambda ct, out, /, x, memo: ct, ZERO)
defjvp(np.ndarray.astype, lambda dx, out, /, x, dtype, *a, **kw: _cast_tangent(dx, out), ZERO)
defvjp(np.ndarray.astype, lambda ct, out, /, x, dtype, *a, **kw: ct, ZERO)
nondifferentiable(np.ndarray.argmax, np.ndarray.argmin, np.ndarray.argsort, np.ndarray.nonzero,
                  np.ndarray.all, np.ndarray.any, np.ndarray.round)


# -- NumPy 2's _array_converter ---------------------------------------------------------------

class _ArrayConverter:
    """NumPy's C helper ``_array_converter(*array_likes)``, restated with ``np.asarray`` so
    that the functions converting their inputs with it (``np.apply_along_axis``,
    ``np.linspace``, ``np.diagflat``, ``np.delete``, ``np.insert``...) are differentiated
    through.  NumPy's own subclass wrapping (``__array_wrap__``) is not restated: an array
    subclass is refused, never silently turned into an ndarray."""

    def __init__(self, *objects: Any) -> None:
        for o in objects:
            if isinstance(o, np.ndarray) and type(o) is not np.ndarray:
                raise MissingRuleError(f"no derivative through numpy's _array_converter for "
                                       f"the array subclass {type(o).__name__}")
        self.scalar_input = tuple(isinstance(o, (int, float, complex)) and
                                  not isinstance(o, np.generic) for o in objects)
        self._objects = objects
        self._arrays = tuple(np.asarray(o) for o in objects)

    def __getitem__(self, i: Any) -> Any:
        return self._arrays[i]

    def __len__(self) -> int:
        return len(self._arrays)

    def as_arrays(self, subok: bool = True, pyscalars: str = "convert_if_no_array") -> Any:
        if pyscalars == "convert" or (pyscalars == "convert_if_no_array"
                                      and all(self.scalar_input)):
            return self._arrays
        return tuple(o if s else a for o, a, s in
                     zip(self._objects, self._arrays, self.scalar_input))

    def result_type(self, extra_dtype: Any = None, ensure_inexact: bool = False) -> Any:
        items = [o if s else a.dtype for o, a, s in
                 zip(self._objects, self._arrays, self.scalar_input)]
        items += ([] if extra_dtype is None else [extra_dtype]) + ([0.0] if ensure_inexact else [])
        return np.result_type(*items)

    def wrap(self, arr: Any, /, to_scalar: Any = None) -> Any:
        if to_scalar is None:
            to_scalar = all(self.scalar_input)
        arr = np.asarray(arr)
        return arr[()] if to_scalar and np.ndim(arr) == 0 else arr


_CONVERTER = getattr(getattr(np, "_core", None), "_multiarray_umath", None)
if _CONVERTER is not None and hasattr(_CONVERTER, "_array_converter"):  # NumPy 2
    defstandin(_CONVERTER._array_converter, _ArrayConverter)
