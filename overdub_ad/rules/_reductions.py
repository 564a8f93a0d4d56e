"""Rules for NumPy reductions and scans: sum, mean, prod, max/min, std/var, median, cumsum...

Abbreviations: ``x`` the reduced array, ``out`` the primal output, ``dx`` a tangent (leading batch
dimensions allowed), ``ct`` a cotangent, ``ax`` the reduced axes as negative numbers (so that
they name the same axes of ``x`` and of a batched ``dx``).

Conventions:

- Rules take NumPy's own signatures (``axis``, ``dtype``, ``out``, ``keepdims``, ``initial``,
  ``where``); ``out=`` buffers and ``dtype=`` are the engine's business and are ignored.
- A reverse rule returns the cotangent at ``x``'s full shape (a broadcast view).
- ``prod`` and ``cumprod`` are exact with zeros (products of the other factors, no division).
- Ties in ``max``/``min``/``amax``/``amin``/``ptp`` (and the NaN-ignoring variants) split the
  derivative evenly among the tied entries.
- The NaN-ignoring reductions (``nansum``, ``nanmax``, ``nanmedian``...) ignore the tangent of a
  NaN entry too: a tangent there is NaN whenever the NaN came from a computation (``x**2`` at a
  NaN), and ``0 * nan`` would spread it to the whole result.  Their cotangent at a NaN entry is 0.
- ``median``/``nanmedian`` with ``overwrite_input=True`` raise ``MissingRuleError``: the call
  reorders ``x`` in place, so the rule can no longer tell which entry was the median.
- ``std`` where it is 0 (one element, or all equal) has derivative 0, as ``absolute`` at 0.
- Complex: ``sum``/``mean``/``prod``/``cumsum``/``cumprod`` are holomorphic; ``var``/``std`` are
  real-valued, with the autograd/JAX reverse convention (gradient ``df/dx - i df/dy``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._rules import ZERO, MissingRuleError, defjvp, defquick, defvjp, same_rules
from ._common import (bshape, cts, expand, eye, gather, neg_axes, neg_axis, positions, scatter,
                      select)

_NOVALUE = np._NoValue


def _kd(keepdims: Any) -> bool:
    return False if keepdims is _NOVALUE else bool(keepdims)


def _wh(where: Any) -> Any:
    return True if where is _NOVALUE else where


def _full(g: Any, x: Any) -> Any:
    """``g`` broadcast to ``x``'s shape."""
    return np.broadcast_to(g, np.shape(x))


def _count(x: Any, ax: Any, where: Any) -> Any:
    """Number of reduced elements, with keepdims (the ``where`` mask counted)."""
    if where is True:
        n = 1
        for a in ax:
            n *= np.shape(x)[a]
        return n
    return np.sum(np.broadcast_to(where, np.shape(x)), axis=ax, keepdims=True)


# -- sum, mean ------------------------------------------------------------------------------

def _sum_jvp(dx: Any, out: Any, /, x: Any, axis: Any = None, dtype: Any = None, _out: Any = None,
             keepdims: Any = False, initial: Any = None, where: Any = True, **kw: Any) -> Any:
    return np.sum(dx, axis=neg_axes(axis, np.ndim(x)), keepdims=_kd(keepdims), where=_wh(where))


def _sum_vjp(ct: Any, out: Any, /, x: Any, axis: Any = None, dtype: Any = None, _out: Any = None,
             keepdims: Any = False, initial: Any = None, where: Any = True, **kw: Any) -> Any:
    if axis is None and _wh(where) is True:  # (the common case, in few operations: each one
        return _full(ct, x)                  # is a dispatch under an enclosing context)
    ax = neg_axes(axis, np.ndim(x))
    g = _full(expand(ct, ax, _kd(keepdims)), x)
    where = _wh(where)
    return g if where is True else np.where(where, g, 0.0)


def _mean_jvp(dx: Any, out: Any, /, x: Any, axis: Any = None, dtype: Any = None, _out: Any = None,
              keepdims: Any = False, *, where: Any = True, **kw: Any) -> Any:
    return np.mean(dx, axis=neg_axes(axis, np.ndim(x)), keepdims=_kd(keepdims), where=_wh(where))


def _mean_vjp(ct: Any, out: Any, /, x: Any, axis: Any = None, dtype: Any = None, _out: Any = None,
              keepdims: Any = False, *, where: Any = True, **kw: Any) -> Any:
    if axis is None and _wh(where) is True:  # (as in _sum_vjp)
        return _full(ct / np.size(x), x)
    ax = neg_axes(axis, np.ndim(x))
    where = _wh(where)
    g = _full(expand(ct, ax, _kd(keepdims)) / _count(x, ax, where), x)
    return g if where is True else np.where(where, g, 0.0)


defjvp(np.sum, _sum_jvp)
defvjp(np.sum, _sum_vjp)


def _sum_all_vjp(ct: Any, out: Any, /, x: Any) -> Any:
    """The cotangent of the array ``x`` in ``np.sum(x)``: the shipped rule's read-only
    broadcast of ``ct`` to ``x``'s shape, made directly (``np.broadcast_to`` and the rule's
    handling of axes and masks cost several times the gradient of a small array)."""
    ct = np.asarray(ct)
    view = np.ndarray(x.shape, ct.dtype, ct, 0, (0,) * x.ndim)
    view.flags.writeable = False
    return view


def _whole_array(mask: int, primals: list[Any], kwargs: dict[str, Any]) -> bool:
    """One NumPy array, nothing else (the reduction of all of it)."""
    return not kwargs and len(primals) == 1 and type(primals[0]) is np.ndarray


defquick(np.sum, _whole_array, (_sum_all_vjp,))  # np.sum(a), reverse mode's quick rule
defjvp(np.mean, _mean_jvp)
defvjp(np.mean, _mean_vjp)


def _nan_mask(x: Any) -> Any:
    return np.logical_not(np.isnan(x))


def _nan_free(dx: Any, x: Any) -> Any:
    """``dx`` with 0 at ``x``'s NaN entries (a select, not a product: that tangent may be NaN)."""
    return np.where(np.isnan(x), 0, dx)


defjvp(np.nansum, lambda dx, out, /, x, axis=None, dtype=None, _out=None, keepdims=False, **kw:
       np.sum(_nan_free(dx, x), axis=neg_axes(axis, np.ndim(x)), keepdims=_kd(keepdims)))
defvjp(np.nansum, lambda ct, out, /, x, axis=None, dtype=None, _out=None, keepdims=False, **kw:
       _sum_vjp(ct, out, x, axis, keepdims=keepdims) * _nan_mask(x))
defjvp(np.nanmean, lambda dx, out, /, x, axis=None, dtype=None, _out=None, keepdims=False, **kw:
       _mean_jvp(dx, out, x, axis, keepdims=keepdims, where=_nan_mask(x)))
defvjp(np.nanmean, lambda ct, out, /, x, axis=None, dtype=None, _out=None, keepdims=False, **kw:
       _mean_vjp(ct, out, x, axis, keepdims=keepdims, where=_nan_mask(x)))


# -- prod (exact with zeros) ------------------------------------------------------------------

def _exclusive_products(x: Any, ax: Any) -> Any:
    """For each entry of ``x``, the product of the other entries of its reduced group."""
    nd = np.ndim(x)
    if not ax or np.size(x) == 0:  # (an empty array has no entries: np.prod(v[:0]) is 1)
        return np.full(np.shape(x), 1, np.result_type(x, 0.0))
    dest = tuple(range(-len(ax), 0))
    moved = np.moveaxis(x, ax, dest)
    shape = np.shape(moved)
    flat = np.reshape(moved, shape[:nd - len(ax)] + (-1,))
    ones = np.full(shape[:nd - len(ax)] + (1,), 1, np.result_type(x, 0.0))
    left = np.concatenate([ones, np.cumprod(flat[..., :-1], axis=-1)], axis=-1)
    right = np.concatenate([np.flip(np.cumprod(np.flip(flat[..., 1:], -1), axis=-1), -1), ones],
                           axis=-1)
    return np.moveaxis(np.reshape(left * right, shape), dest, ax)


def _prod_parts(x: Any, axis: Any, initial: Any, where: Any) -> Any:
    x = np.asarray(x)  # (np.prod([a, b]): a list, which result_type would read as a dtype)
    ax = neg_axes(axis, np.ndim(x))
    where = _wh(where)
    xw = x if where is True else np.where(where, x, 1)
    others = _exclusive_products(xw, ax)
    if initial is not None and initial is not _NOVALUE:
        others = others * initial
    if where is not True:
        others = np.where(where, others, 0.0)
    return ax, others


def _prod_jvp(dx: Any, out: Any, /, x: Any, axis: Any = None, dtype: Any = None, _out: Any = None,
              keepdims: Any = False, initial: Any = None, where: Any = True, **kw: Any) -> Any:
    ax, others = _prod_parts(x, axis, initial, where)
    return np.sum(dx * others, axis=ax, keepdims=_kd(keepdims))


def _prod_vjp(ct: Any, out: Any, /, x: Any, axis: Any = None, dtype: Any = None, _out: Any = None,
              keepdims: Any = False, initial: Any = None, where: Any = True, **kw: Any) -> Any:
    ax, others = _prod_parts(x, axis, initial, where)
    return expand(ct, ax, _kd(keepdims)) * others


defjvp(np.prod, _prod_jvp)
defvjp(np.prod, _prod_vjp)
defjvp(np.nanprod, lambda dx, out, /, x, axis=None, dtype=None, _out=None, keepdims=False, **kw:
       _prod_jvp(_nan_free(dx, x), out, x, axis, keepdims=keepdims, where=_nan_mask(x)))
defvjp(np.nanprod, lambda ct, out, /, x, axis=None, dtype=None, _out=None, keepdims=False, **kw:
       _prod_vjp(ct, out, x, axis, keepdims=keepdims, where=_nan_mask(x)))


# -- max, min (ties split evenly) -------------------------------------------------------------

def _extremum_weights(x: Any, out: Any, ax: Any, keepdims: Any, where: Any) -> Any:
    hit = np.equal(x, expand(out, ax, keepdims))
    where = _wh(where)
    if where is not True:
        hit = np.logical_and(hit, where)
    n = np.sum(hit, axis=ax, keepdims=True)
    weights = np.divide(hit, np.maximum(n, 1.0))  # a function: the array-backend context promotes
    precision = getattr(x, "dtype", None)
    if type(weights) is np.ndarray and precision is not None and precision.kind == "f":
        weights = weights.astype(precision, copy=False)  # float32 in, float32 derivatives out
    return weights


def _extremum_rules(fn: Any, nan: bool = False) -> None:
    def jvp(dx: Any, out: Any, /, x: Any, axis: Any = None, _out: Any = None, keepdims: Any = False,
            initial: Any = None, where: Any = True, **kw: Any) -> Any:
        ax = neg_axes(axis, np.ndim(x))
        w = _extremum_weights(x, out, ax, _kd(keepdims), where)
        if nan:
            dx = _nan_free(dx, x)
        return np.sum(dx * w, axis=ax, keepdims=_kd(keepdims))

    def vjp(ct: Any, out: Any, /, x: Any, axis: Any = None, _out: Any = None, keepdims: Any = False,
            initial: Any = None, where: Any = True, **kw: Any) -> Any:
        ax = neg_axes(axis, np.ndim(x))
        return select(expand(ct, ax, _kd(keepdims)),
                      _extremum_weights(x, out, ax, _kd(keepdims), where))
    defjvp(fn, jvp)
    defvjp(fn, vjp)


_fn: Any  # the loops below run over callables of many types
for _fn in (np.max, np.min, np.amax, np.amin):
    _extremum_rules(_fn)
for _fn in (np.nanmax, np.nanmin):
    _extremum_rules(_fn, nan=True)


def _ptp_weights(x: Any, axis: Any, keepdims: Any) -> Any:
    ax = neg_axes(axis, np.ndim(x))
    kd = _kd(keepdims)
    hi = _extremum_weights(x, np.max(x, axis=ax, keepdims=kd), ax, kd, True)
    lo = _extremum_weights(x, np.min(x, axis=ax, keepdims=kd), ax, kd, True)
    return ax, hi - lo


def _ptp_jvp(dx: Any, out: Any, /, x: Any, axis: Any = None, _out: Any = None,
             keepdims: Any = False) -> Any:
    ax, w = _ptp_weights(x, axis, keepdims)
    return np.sum(dx * w, axis=ax, keepdims=_kd(keepdims))


def _ptp_vjp(ct: Any, out: Any, /, x: Any, axis: Any = None, _out: Any = None,
             keepdims: Any = False) -> Any:
    ax, w = _ptp_weights(x, axis, keepdims)
    return select(expand(ct, ax, _kd(keepdims)), w)


defjvp(np.ptp, _ptp_jvp)
defvjp(np.ptp, _ptp_vjp)


# -- var, std -------------------------------------------------------------------------------

def _var_parts(x: Any, axis: Any, ddof: Any, keepdims: Any, where: Any, mean: Any,
               correction: Any) -> Any:
    """(axes, keepdims, coefficient array c): d var = Re(sum(c * dx)) over the axes."""
    ax = neg_axes(axis, np.ndim(x))
    kd = _kd(keepdims)
    where = _wh(where)
    if correction is not _NOVALUE and correction is not None:
        ddof = correction
    if mean is _NOVALUE or mean is None:
        mean = np.mean(x, axis=ax, keepdims=True, where=where)
    centered = x - mean
    if where is not True:
        centered = np.where(where, centered, 0.0)
    n = _count(x, ax, where)
    return ax, kd, 2.0 * np.conj(centered) / (n - ddof)


def _half_over(t: Any, out: Any) -> Any:
    """``t / (2 * out)``, the chain rule of ``std = sqrt(var)``, with 0 where ``std == 0``: a
    single element (its std is constant) or equal ones (0 is in the subdifferential there)."""
    zero = np.equal(out, 0)
    return np.where(zero, 0.0, t / np.where(zero, 1.0, 2.0 * out))


def _var_rules(fn: Any, std: Any, nan: Any = False) -> None:
    def parts(x: Any, axis: Any, ddof: Any, keepdims: Any, where: Any, mean: Any,
              correction: Any) -> Any:
        if nan:
            where = _nan_mask(x) if where is _NOVALUE else np.logical_and(where, _nan_mask(x))
            x = np.where(np.isnan(x), 0.0, x)
        return _var_parts(x, axis, ddof, keepdims, where, mean, correction)

    def jvp(dx: Any, out: Any, /, x: Any, axis: Any = None, dtype: Any = None, _out: Any = None,
            ddof: Any = 0, keepdims: Any = _NOVALUE, *, where: Any = _NOVALUE, mean: Any = _NOVALUE,
            correction: Any = _NOVALUE, **kw: Any) -> Any:
        ax, kd, c = parts(x, axis, ddof, keepdims, where, mean, correction)
        if nan:
            dx = _nan_free(dx, x)
        t = np.sum(np.real(c * dx), axis=ax, keepdims=kd)
        return _half_over(t, out) if std else t

    def vjp(ct: Any, out: Any, /, x: Any, axis: Any = None, dtype: Any = None, _out: Any = None,
            ddof: Any = 0, keepdims: Any = _NOVALUE, *, where: Any = _NOVALUE, mean: Any = _NOVALUE,
            correction: Any = _NOVALUE, **kw: Any) -> Any:
        ax, kd, c = parts(x, axis, ddof, keepdims, where, mean, correction)
        if std:
            ct = _half_over(ct, out)
        return expand(ct, ax, kd) * c
    defjvp(fn, jvp)
    defvjp(fn, vjp)


_var_rules(np.var, std=False)
_var_rules(np.std, std=True)
_var_rules(np.nanvar, std=False, nan=True)
_var_rules(np.nanstd, std=True, nan=True)


# -- median: the mean of the middle one or two entries of each group --------------------------

def _median_map(x: Any, axis: Any, nan: bool) -> Any:
    """(axes, flat positions of the two middle entries of each reduced group in sorted order --
    one entry twice for an odd count -- shaped ``out.shape + (2,)`` without kept axes, and
    whether each group has an entry: a ``nanmedian`` group of NaNs only has none).

    NaNs sort last, so with ``nan`` the middle of a group of ``k`` non-NaN entries is found at
    sorted positions ``(k - 1) // 2`` and ``k // 2``."""
    ax = neg_axes(axis, np.ndim(x))
    dest = tuple(range(-len(ax), 0))
    lead = np.shape(np.moveaxis(x, ax, dest))[:np.ndim(x) - len(ax)]
    xs = np.reshape(np.moveaxis(x, ax, dest), lead + (-1,))
    ps = np.reshape(np.moveaxis(positions(x), ax, dest), lead + (-1,))
    order = np.argsort(xs, axis=-1, kind="stable")
    if nan:
        k = np.sum(_nan_mask(xs), axis=-1, keepdims=True)
        middle = np.take_along_axis(order, np.concatenate([np.maximum(k - 1, 0) // 2, k // 2],
                                                          axis=-1), axis=-1)
        some = k[..., 0] > 0
    else:
        n = np.shape(xs)[-1]
        middle = np.take(order, [(n - 1) // 2, n // 2], axis=-1)
        some = np.full(lead, True)
    return ax, np.take_along_axis(ps, middle, axis=-1), some


def _median_rules(fn: Any, nan: bool) -> None:
    def parts(x: Any, axis: Any, overwrite_input: Any) -> Any:
        if overwrite_input:
            raise MissingRuleError(
                f"no derivative for numpy.{fn.__name__} with overwrite_input=True: the call "
                f"reorders its input in place, which hides where the median came from; leave "
                f"overwrite_input False when differentiating")
        return _median_map(x, axis, nan)

    def jvp(dx: Any, out: Any, /, x: Any, axis: Any = None, _out: Any = None,
            overwrite_input: Any = False, keepdims: Any = False) -> Any:
        ax, middle, some = parts(x, axis, overwrite_input)
        t = np.where(some, np.mean(gather(dx, x, middle), axis=-1), 0)
        return np.expand_dims(t, tuple(sorted(ax))) if keepdims else t

    def vjp(ct: Any, out: Any, /, x: Any, axis: Any = None, _out: Any = None,
            overwrite_input: Any = False, keepdims: Any = False) -> Any:
        ax, middle, some = parts(x, axis, overwrite_input)
        if keepdims:
            ct = np.squeeze(ct, axis=ax)
        half = np.where(some, ct, 0) / 2.0
        return scatter(np.broadcast_to(np.expand_dims(half, -1), np.shape(middle)), x, middle)
    defjvp(fn, jvp)
    defvjp(fn, vjp)


_median_rules(np.median, nan=False)
_median_rules(np.nanmedian, nan=True)


# -- average --------------------------------------------------------------------------------

def _average_args(a: Any, axis: Any, weights: Any) -> Any:
    """(axes, weights broadcast against a, sum of weights with keepdims)."""
    ax = neg_axes(axis, np.ndim(a))
    if weights is None:
        w = np.full(np.shape(a), 1.0)
    else:
        w = _weights_like(weights, a, axis, ())
    return ax, w, np.sum(np.broadcast_to(w, np.shape(a)), axis=ax, keepdims=True)


def _weights_like(w: Any, a: Any, axis: Any, batch: Any) -> Any:
    """``w`` (1-D along ``axis``, or a's shape) shaped to broadcast against a (with batch)."""
    if np.ndim(w) - len(batch) == np.ndim(a):
        return w
    shape = [1] * np.ndim(a)
    shape[int(axis) % np.ndim(a)] = -1
    return np.reshape(w, tuple(batch) + tuple(shape))


def _average_out(out: Any, returned: Any) -> Any:
    return (out[0], out[1]) if returned else (out, None)


def _average_jvp(pos: int) -> Callable[..., Any]:
    def rule(d: Any, out: Any, /, a: Any, axis: Any = None, weights: Any = None,
             returned: Any = False, *, keepdims: Any = False, **kw: Any) -> Any:
        avg, _ = _average_out(out, returned)
        kd = _kd(keepdims)
        ax, w, sw = _average_args(a, axis, weights)
        if pos == 0:
            t = np.sum(d * w, axis=ax, keepdims=True) / sw
            dsw = None
        else:
            dw = _weights_like(d, a, axis, bshape(d, weights))
            t = np.sum(dw * (a - expand(avg, ax, kd)), axis=ax, keepdims=True) / sw
            dsw = np.sum(np.broadcast_to(dw, np.shape(dw)[:np.ndim(dw) - np.ndim(a)]
                                         + np.shape(a)), axis=ax, keepdims=kd)
        if not kd:
            t = np.squeeze(t, axis=ax)
        if not returned:
            return t
        return (t, np.zeros(np.shape(t)) if dsw is None else np.broadcast_to(dsw, np.shape(t)))
    return rule


def _average_vjp(pos: int) -> Callable[..., Any]:
    def rule(ct: Any, out: Any, /, a: Any, axis: Any = None, weights: Any = None,
             returned: Any = False, *, keepdims: Any = False, **kw: Any) -> Any:
        avg, _ = _average_out(out, returned)
        kd = _kd(keepdims)
        ax, w, sw = _average_args(a, axis, weights)
        if returned:
            ct, ct_sw = cts(ct, out)
        else:
            ct_sw = 0.0
        c = expand(ct, ax, kd) / sw
        if pos == 0:
            return _full(c * w, a)
        g = _full(c * (a - expand(avg, ax, kd)) + expand(ct_sw, ax, kd), a)
        if np.ndim(weights) != np.ndim(a):  # 1-D weights along axis
            keep = int(axis) % np.ndim(a)
            g = np.sum(g, axis=tuple(i for i in range(np.ndim(a)) if i != keep))
        return g
    return rule


defjvp(np.average, _average_jvp(0), ZERO, _average_jvp(2))
defvjp(np.average, _average_vjp(0), ZERO, _average_vjp(2))


# -- scans ----------------------------------------------------------------------------------

def _scan_axis(x: Any, axis: Any) -> Any:
    """(flattened?, negative axis) of a scan over ``axis`` (None: the flattened array)."""
    if axis is None and np.ndim(x) != 1:
        return True, -1
    return False, neg_axis(0 if axis is None else axis, max(np.ndim(x), 1))


def _flat_tangent(dx: Any, x: Any, flat: Any) -> Any:
    return np.reshape(dx, bshape(dx, x) + (-1,)) if flat else dx


def _rev_cumsum(ct: Any, axis: Any) -> Any:
    return np.flip(np.cumsum(np.flip(ct, axis), axis=axis), axis)


defjvp(np.cumsum, lambda dx, out, /, x, axis=None, dtype=None, _out=None, **kw: np.cumsum(
    _flat_tangent(dx, x, _scan_axis(x, axis)[0]), axis=_scan_axis(x, axis)[1]))
defvjp(np.cumsum, lambda ct, out, /, x, axis=None, dtype=None, _out=None, **kw: np.reshape(
    _rev_cumsum(ct, _scan_axis(x, axis)[1]), np.shape(x)))


def _initial_slice(t: Any, axis: Any, include_initial: Any) -> Any:
    """Drop the initial element (0 or 1) that ``include_initial`` prepended along ``axis``."""
    if not include_initial:
        return t
    return np.take(t, np.arange(1, np.shape(t)[axis]), axis=axis)


if hasattr(np, "cumulative_sum"):  # NumPy 2.1+
    def _csum_jvp(dx: Any, out: Any, /, x: Any, *, axis: Any = None, dtype: Any = None,
                  out_: Any = None, include_initial: Any = False, **kw: Any) -> Any:
        ax = neg_axis(0 if axis is None else axis, np.ndim(x))
        return np.cumulative_sum(dx, axis=ax, include_initial=include_initial)

    def _csum_vjp(ct: Any, out: Any, /, x: Any, *, axis: Any = None, dtype: Any = None,
                  include_initial: Any = False, **kw: Any) -> Any:
        ax = neg_axis(0 if axis is None else axis, np.ndim(x))
        g = _rev_cumsum(ct, ax)
        return _initial_slice(g, ax, include_initial)

    defjvp(np.cumulative_sum, _csum_jvp)
    defvjp(np.cumulative_sum, _csum_vjp)


def _cumprod_matrix(x: Any, ax: Any) -> Any:
    """J[..., i, j] = d cumprod(x)_i / d x_j along the negative axis ``ax`` moved last (exact
    with zeros; O(n^2), used only when x has zeros)."""
    xm = np.moveaxis(x, ax, -1)
    n = np.shape(xm)[-1]
    k = np.arange(n)
    later = k[None, :] > k[:, None]                          # [j, k]: k > j
    m = np.where(later, xm[..., None, :], 1)                 # [..., j, k]
    c = np.cumprod(m, axis=-1)                               # [..., j, i] = prod_{j<k<=i} x_k
    ones = np.full(np.shape(xm)[:-1] + (1,), 1, np.result_type(x, 0.0))
    left = np.concatenate([ones, np.cumprod(xm[..., :-1], axis=-1)], axis=-1)  # prod_{k<j}
    jac = np.swapaxes(c * left[..., :, None], -1, -2)        # [..., i, j]
    return np.where(k[:, None] >= k[None, :], jac, 0)


def _cumprod_jvp_core(dx: Any, x: Any, out: Any, ax: Any) -> Any:
    if np.all(x != 0):
        return out * np.cumsum(dx / x, axis=ax)
    jac = _cumprod_matrix(x, ax)
    t = np.einsum("...ij,...j->...i", jac, np.moveaxis(dx, ax, -1))
    return np.moveaxis(t, -1, ax)


def _cumprod_vjp_core(ct: Any, x: Any, out: Any, ax: Any) -> Any:
    if np.all(x != 0):
        return _rev_cumsum(ct * out, ax) / x
    jac = _cumprod_matrix(x, ax)
    g = np.einsum("...ij,...i->...j", jac, np.moveaxis(ct, ax, -1))
    return np.moveaxis(g, -1, ax)


def _cumprod_jvp(dx: Any, out: Any, /, x: Any, axis: Any = None, dtype: Any = None,
                 _out: Any = None, **kw: Any) -> Any:
    flat, ax = _scan_axis(x, axis)
    xf = np.reshape(x, (-1,)) if flat else x
    return _cumprod_jvp_core(_flat_tangent(dx, x, flat), xf, out, ax)


def _cumprod_vjp(ct: Any, out: Any, /, x: Any, axis: Any = None, dtype: Any = None,
                 _out: Any = None, **kw: Any) -> Any:
    flat, ax = _scan_axis(x, axis)
    xf = np.reshape(x, (-1,)) if flat else x
    return np.reshape(_cumprod_vjp_core(ct, xf, out, ax), np.shape(x))


defjvp(np.cumprod, _cumprod_jvp)
defvjp(np.cumprod, _cumprod_vjp)

if hasattr(np, "cumulative_prod"):  # NumPy 2.1+
    def _cprod_core(x: Any, axis: Any, out: Any, include_initial: Any) -> Any:
        ax = neg_axis(0 if axis is None else axis, np.ndim(x))
        return ax, _initial_slice(out, ax, include_initial)

    def _cprod_jvp(dx: Any, out: Any, /, x: Any, *, axis: Any = None, dtype: Any = None,
                   include_initial: Any = False, **kw: Any) -> Any:
        ax, core = _cprod_core(x, axis, out, include_initial)
        t = _cumprod_jvp_core(dx, x, core, ax)
        if include_initial:
            pad = [(0, 0)] * np.ndim(t)
            pad[ax] = (1, 0)
            t = np.pad(t, pad)
        return t

    def _cprod_vjp(ct: Any, out: Any, /, x: Any, *, axis: Any = None, dtype: Any = None,
                   include_initial: Any = False, **kw: Any) -> Any:
        ax, core = _cprod_core(x, axis, out, include_initial)
        return _cumprod_vjp_core(_initial_slice(ct, ax, include_initial), x, core, ax)

    defjvp(np.cumulative_prod, _cprod_jvp)
    defvjp(np.cumulative_prod, _cprod_vjp)


# -- trace ----------------------------------------------------------------------------------

def _trace_jvp(dx: Any, out: Any, /, x: Any, offset: Any = 0, axis1: Any = 0, axis2: Any = 1,
               dtype: Any = None, _out: Any = None, **kw: Any) -> Any:
    nd = np.ndim(x)
    return np.trace(dx, offset, neg_axis(axis1, nd), neg_axis(axis2, nd))


def _trace_vjp(ct: Any, out: Any, /, x: Any, offset: Any = 0, axis1: Any = 0, axis2: Any = 1,
               dtype: Any = None, _out: Any = None, **kw: Any) -> Any:
    nd = np.ndim(x)
    a1, a2 = int(axis1) % nd, int(axis2) % nd
    g = np.reshape(ct, np.shape(ct) + (1, 1)) * eye(np.shape(x)[a1], np.shape(x)[a2], k=offset)
    return np.moveaxis(g, (-2, -1), (a1, a2)) if (a1, a2) != (nd - 2, nd - 1) else g


defjvp(np.trace, _trace_jvp)
defvjp(np.trace, _trace_vjp)


# -- the same reductions as ndarray methods (``x.sum(axis)`` is ``np.ndarray.sum(x, axis)``) ----

for _method, _fn in ((np.ndarray.sum, np.sum), (np.ndarray.mean, np.mean),
                     (np.ndarray.prod, np.prod), (np.ndarray.max, np.max),
                     (np.ndarray.min, np.min), (np.ndarray.std, np.std), (np.ndarray.var, np.var),
                     (np.ndarray.cumsum, np.cumsum), (np.ndarray.cumprod, np.cumprod),
                     (np.ndarray.trace, np.trace)):
    same_rules(_method, _fn)
