"""Rules for indexing and selection: ``x[idx]``, take, take_along_axis, choose, compress, sort...

Abbreviations: ``x`` the indexed array, ``idx`` the index, ``out`` the primal output, ``dx`` a
tangent with leading batch dimensions ``B``, ``ct`` a cotangent.

Conventions:

- Forward rules index the tangent the same way, behind its batch dimensions.  Where NumPy's
  rules would move the batch dimensions (advanced indices separated by a slice, ``axis=None``
  flattening), they gather through an index map instead: the selection applied to the flat
  positions ``arange(x.size)`` (see ``_common.gather``).
- Reverse rules scatter the cotangent into zeros of ``x``'s shape and *accumulate*, so an
  element selected twice (``x[[0, 0]]``, ``np.take`` with ``mode="clip"``) gets both
  contributions (``np.bincount`` on the index map; basic indices write into the fresh zeros).
- The selection indices themselves (``idx``, ``indices``, the condition of ``compress``, the
  ``a`` of ``choose``) are ``ZERO``.  ``argsort``, ``searchsorted`` & co. are nondifferentiable.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from .._rules import ZERO, defjvp, defvjp, nondifferentiable, same_rules
from ._common import (as_array_tangent, fill, fit, gather, lift, like_argument, map_batch,
                      nbatch, positions, scatter)


def _as_tuple(idx: Any) -> Any:
    return idx if isinstance(idx, tuple) else (idx,)


def _advanced(idx: Any) -> bool:
    """Whether ``idx`` uses advanced indexing: anything but integers, slices, ``None`` and
    ``...`` (lists, booleans, arrays of any namespace)."""
    return any(isinstance(i, (bool, np.bool_)) or not isinstance(i, _BASIC)
               for i in _as_tuple(idx))


_BASIC = (int, np.integer, slice, type(None), type(Ellipsis))


def _getitem_jvp(dx: Any, out: Any, /, x: Any, idx: Any) -> Any:
    if isinstance(x, (list, tuple)):  # a Python container: its tangent is one too
        return dx[idx]
    nb = nbatch(dx, x)
    if nb == 0:
        return np.asarray(dx)[idx] if np.ndim(dx) == 0 else dx[idx]  # (a number's: 0-d)
    if _advanced(idx):
        return gather(dx, x, positions(x)[idx])
    return dx[(slice(None),) * nb + _as_tuple(idx)]


def _getitem_vjp(ct: Any, out: Any, /, x: Any, idx: Any) -> Any:
    if isinstance(x, (list, tuple)):
        gs: list[Any] = [None] * len(x)
        if isinstance(idx, slice):
            for k, c in zip(range(*idx.indices(len(x))), ct):
                gs[k] = c
        else:
            gs[idx] = ct
        return gs
    if _advanced(idx):
        return scatter(ct, x, positions(x)[idx])
    if not isinstance(x, (np.ndarray, np.generic)):
        return _padded(ct, np.shape(x), idx)
    g = np.zeros(np.shape(x), np.result_type(ct, 0.0))
    g[idx] = ct
    return g


def _padded(ct: Any, shape: tuple[int, ...], idx: Any) -> Any:
    """``zeros(shape)`` with ``ct`` written at the basic index ``idx``, built without writing
    in place: zeros are joined around ``ct`` axis by axis.  For arrays of other namespaces,
    whose in-place writes the engines cannot follow (this cotangent may be differentiated)."""
    items = list(_as_tuple(idx))
    named = sum(1 for i in items if i is not None and i is not Ellipsis)
    at = next((k for k, i in enumerate(items) if i is Ellipsis), len(items))
    items[at:at + 1] = [slice(None)] * (len(shape) - named)
    g = ct
    axis, dim = 0, 0  # axis of g, dimension of x
    for item in items:
        if item is None:  # a new axis of length 1 in ct
            g = np.squeeze(g, axis=axis)
            continue
        n = shape[dim]
        if isinstance(item, slice):
            start, stop, step = item.indices(n)
        else:  # an integer: the axis ct lacks
            g = np.expand_dims(g, axis)
            start, stop, step = int(item) % n, int(item) % n + 1, 1
        g = _spread(g, axis, n, start, len(range(start, stop, step)), step)
        axis, dim = axis + 1, dim + 1
    return g


def _spread(g: Any, axis: int, n: int, start: int, m: int, step: int) -> Any:
    """``g``'s ``m`` entries along ``axis`` placed at ``start, start + step, ...`` of ``n``."""
    if step < 0:  # the same positions, ascending
        g, start, step = np.flip(g, axis=axis), start + (m - 1) * step, -step
    lead, rest = np.shape(g)[:axis], np.shape(g)[axis + 1:]
    dtype = np.result_type(g, 0.0)
    if m == 0:
        return np.zeros(lead + (n,) + rest, dtype)
    if step > 1:  # each entry followed by step - 1 zeros, the last one's dropped
        gaps = np.zeros(lead + (m, step - 1) + rest, dtype)
        g = np.reshape(np.concatenate([np.expand_dims(g, axis + 1), gaps], axis=axis + 1),
                       lead + (m * step,) + rest)
        g = g[(slice(None),) * axis + (slice(0, (m - 1) * step + 1),)]
    after = n - start - ((m - 1) * step + 1)
    return np.concatenate([np.zeros(lead + (start,) + rest, dtype), g,
                           np.zeros(lead + (after,) + rest, dtype)], axis=axis)


defjvp(operator.getitem, _getitem_jvp, ZERO)
defvjp(operator.getitem, _getitem_vjp, ZERO)


def _selection_rules(fn: Any, index_map: Any, *rest: Any, first: Any = 0) -> None:
    """Rules of ``fn``, which selects elements of its argument ``first``: ``index_map`` maps
    the call's arguments (with positions in place of that argument) to the selected ones."""
    def moved(x_pos: Any, args: Any, kwargs: Any) -> Any:
        args = list(args)
        args[first] = x_pos
        return index_map(*args, **kwargs)

    def jvp(dx: Any, out: Any, /, *args: Any, **kwargs: Any) -> Any:
        x = args[first]
        return gather(dx, x, moved(positions(x), args, kwargs))

    def vjp(ct: Any, out: Any, /, *args: Any, **kwargs: Any) -> Any:
        x = args[first]
        return scatter(ct, x, moved(positions(x), args, kwargs))
    rules: list[Any] = [ZERO] * (first + 1 + len(rest))
    jv, vj = list(rules), list(rules)
    jv[first], vj[first] = jvp, vjp
    defjvp(fn, *jv)
    defvjp(fn, *vj)


_selection_rules(np.take, lambda p, indices, axis=None, out=None, mode="raise":
                 np.take(p, indices, axis=axis, mode=mode), ZERO)
_selection_rules(np.take_along_axis, lambda p, indices, axis=-1, **kw:
                 np.take_along_axis(p, indices, axis=axis), ZERO)
_selection_rules(np.compress, lambda condition, p, axis=None, out=None:
                 np.compress(condition, p, axis=axis), first=1)
_selection_rules(np.extract, lambda condition, p: np.extract(condition, p), first=1)


def _sort_map(p: Any, x: Any, axis: Any = -1, kind: Any = None, order: Any = None,
              **kw: Any) -> Any:
    if axis is None:
        return np.take(np.ravel(p), np.argsort(np.ravel(x), kind="stable"))
    return np.take_along_axis(p, np.argsort(x, axis=axis, kind="stable"), axis=axis)


defjvp(np.sort, lambda dx, out, /, x, *a, **k: gather(dx, x, _sort_map(positions(x), x, *a, **k)))
defvjp(np.sort, lambda ct, out, /, x, *a, **k: scatter(ct, x, _sort_map(positions(x), x, *a,
                                                                        **k)))


def _partition_map(p: Any, x: Any, kth: Any, axis: Any = -1, kind: Any = "introselect",
                   order: Any = None) -> Any:
    if axis is None:
        return np.take(np.ravel(p), np.argpartition(np.ravel(x), kth, kind=kind))
    return np.take_along_axis(p, np.argpartition(x, kth, axis=axis, kind=kind), axis=axis)


defjvp(np.partition, lambda dx, out, /, x, *a, **k: gather(
    dx, x, _partition_map(positions(x), x, *a, **k)), ZERO)
defvjp(np.partition, lambda ct, out, /, x, *a, **k: scatter(
    ct, x, _partition_map(positions(x), x, *a, **k)), ZERO)


# choose(a, choices): a picks, for each element, which choice it comes from
def _choose_jvp(dcs: Any, out: Any, /, a: Any, choices: Any, _out: Any = None,
                mode: Any = "raise") -> Any:
    return np.choose(a, [lift(d, c, out) for d, c in zip(fill(dcs, choices), choices)],
                     mode=mode)


def _choose_vjp(ct: Any, out: Any, /, a: Any, choices: Any, _out: Any = None,
                mode: Any = "raise") -> Any:
    picked = np.choose(a, np.arange(len(choices)), mode=mode)
    return [np.where(picked == j, ct, 0.0) for j in range(len(choices))]


defjvp(np.choose, ZERO, _choose_jvp)
defvjp(np.choose, ZERO, _choose_vjp)


# select(condlist, choicelist, default): the first true condition picks, else the default
def _select_picked(condlist: Any, choicelist: Any, out: Any) -> Any:
    """For each output element, the index of the choice it comes from (``len(choicelist)``
    for the default)."""
    n = len(choicelist)
    return np.broadcast_to(np.select(condlist, list(range(n)), default=n), np.shape(out))


def _select_jvp(pos: int) -> Any:
    def rule(d: Any, out: Any, /, condlist: Any, choicelist: Any, default: Any = 0) -> Any:
        picked = _select_picked(condlist, choicelist, out)
        if pos == 2:
            return fit(np.where(picked == len(choicelist), lift(d, default, out), 0.0),
                       d, default, out)
        ds = fill(d, choicelist)
        t = sum(np.where(picked == j, lift(dc, c, out), 0.0)
                for j, (dc, c) in enumerate(zip(ds, choicelist)))
        return fit(t, ds[0], choicelist[0], out)
    return rule


def _select_vjp(pos: int) -> Any:
    def rule(ct: Any, out: Any, /, condlist: Any, choicelist: Any, default: Any = 0) -> Any:
        picked = _select_picked(condlist, choicelist, out)
        if pos == 2:
            return np.where(picked == len(choicelist), ct, 0.0)
        return [np.where(picked == j, ct, 0.0) for j in range(len(choicelist))]
    return rule


defjvp(np.select, ZERO, _select_jvp(1), _select_jvp(2))
defvjp(np.select, ZERO, _select_vjp(1), _select_vjp(2))


# bincount(x, weights, minlength) is linear in the weights
defjvp(np.bincount, ZERO, lambda dw, out, /, x, weights=None, minlength=0: map_batch(
    lambda w: np.bincount(x, w, np.shape(out)[0]), dw, 1))
defvjp(np.bincount, ZERO, lambda ct, out, /, x, weights=None, minlength=0: np.take(ct, x, axis=0))


# interp(x, xp, fp): piecewise linear in x (flat outside [xp[0], xp[-1]] unless left/right
# are given, which are flat too), linear in fp.  With a period, NumPy reduces it to that case
# (_periodic): the rules differentiate the same reduction, each extended knot's derivative
# going to the knot it came from.
def _periodic(x: Any, xp: Any, fp: Any, period: Any) -> tuple[Any, ...]:
    """np.interp's reduction of a periodic interpolation: ``x`` and the knots modulo the
    period, the knots sorted and extended by one period on each side (left/right ignored);
    and, per extended knot, the index of the knot it is."""
    p = np.abs(period)
    xm = np.mod(np.asarray(xp), p)
    order = np.argsort(xm)
    source = np.concatenate((order[-1:], order, order[:1]))
    xp = np.concatenate((xm[order][-1:] - p, xm[order], xm[order][:1] + p))
    return np.mod(x, p), xp, np.asarray(fp)[source], source


def _interp_parts(x: Any, xp: Any, left: Any, right: Any) -> Any:
    xp = np.asarray(xp)
    i = np.clip(np.searchsorted(xp, x, side="right") - 1, 0, len(xp) - 2)
    t = (x - xp[i]) / (xp[i + 1] - xp[i])
    below, above = np.less(x, xp[0]), np.greater(x, xp[-1])
    return i, t, below, above


def _interp_x(x: Any, xp: Any, fp: Any, left: Any, right: Any, period: Any) -> Any:
    if period is not None:
        x, xp, fp, _ = _periodic(x, xp, fp, period)
        left = right = None
    i, t, below, above = _interp_parts(x, xp, left, right)
    fp = np.asarray(fp)
    slope = (fp[i + 1] - fp[i]) / (np.asarray(xp)[i + 1] - np.asarray(xp)[i])
    return np.where(below | above, 0.0, slope)


def _interp_fp_weights(x: Any, xp: Any, fp: Any, left: Any, right: Any, period: Any) -> Any:
    """(index of the lower knot, of the upper one, weight of each) for each x."""
    source = None
    if period is not None:
        x, xp, fp, source = _periodic(x, xp, fp, period)
        left = right = None
    i, t, below, above = _interp_parts(x, xp, left, right)
    w_lo = np.where(below, left is None, np.where(above, 0.0, 1.0 - t))
    w_hi = np.where(above, right is None, np.where(below, 0.0, t))
    # below the range fp[0] is used (index 0 = i), above it fp[-1] (index i + 1)
    lo, hi = (i, i + 1) if source is None else (source[i], source[i + 1])
    return lo, hi, w_lo * 1.0, w_hi * 1.0


def _knot_jvp(dk: Any, knots: Any, lo: Any, hi: Any, w_lo: Any, w_hi: Any) -> Any:
    dk = as_array_tangent(dk, knots)
    batch = np.shape(dk)[:-1]
    return np.reshape(np.take(dk, lo, axis=-1) * w_lo + np.take(dk, hi, axis=-1) * w_hi,
                      batch + np.shape(lo))


def _knot_vjp(ct: Any, knots: Any, lo: Any, hi: Any, w_lo: Any, w_hi: Any) -> Any:
    n = len(knots)
    g = scatter(np.concatenate([np.ravel(ct * w_lo), np.ravel(ct * w_hi)]), np.zeros(n),
                np.concatenate([np.ravel(lo), np.ravel(hi)]))
    return like_argument(g, knots)


def _interp_fp_jvp(dfp: Any, out: Any, /, x: Any, xp: Any, fp: Any, left: Any = None,
                   right: Any = None, period: Any = None) -> Any:
    return _knot_jvp(dfp, fp, *_interp_fp_weights(x, xp, fp, left, right, period))


def _interp_fp_vjp(ct: Any, out: Any, /, x: Any, xp: Any, fp: Any, left: Any = None,
                   right: Any = None, period: Any = None) -> Any:
    return _knot_vjp(ct, fp, *_interp_fp_weights(x, xp, fp, left, right, period))


def _interp_xp_weights(x: Any, xp: Any, fp: Any, left: Any, right: Any, period: Any) -> Any:
    """out = fp[i] + t (fp[i+1] - fp[i]) with t = (x - xp[i]) / (xp[i+1] - xp[i]): moving the
    knots moves t, d out = -slope ((1 - t) dxp[i] + t dxp[i+1]) inside the range, 0 outside
    (with a period, the extended knots move with the knots they are)."""
    source = None
    if period is not None:
        x, xp, fp, source = _periodic(x, xp, fp, period)
        left = right = None
    i, t, below, above = _interp_parts(x, xp, left, right)
    slope = -_interp_x(x, xp, fp, left, right, None)
    lo, hi = (i, i + 1) if source is None else (source[i], source[i + 1])
    return lo, hi, slope * (1.0 - t), slope * t


def _interp_xp_jvp(dxp: Any, out: Any, /, x: Any, xp: Any, fp: Any, left: Any = None,
                   right: Any = None, period: Any = None) -> Any:
    return _knot_jvp(dxp, xp, *_interp_xp_weights(x, xp, fp, left, right, period))


def _interp_xp_vjp(ct: Any, out: Any, /, x: Any, xp: Any, fp: Any, left: Any = None,
                   right: Any = None, period: Any = None) -> Any:
    return _knot_vjp(ct, xp, *_interp_xp_weights(x, xp, fp, left, right, period))


def _interp_side(which: Any, mode: Any) -> Callable[..., Any]:
    """Rules for ``left``/``right``: the value taken below/above the knots (never with a
    period, which NumPy gives them no use)."""
    def rule(d: Any, out: Any, /, x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None,
             period: Any = None) -> Any:
        _, _, below, above = _interp_parts(x, xp, left, right)
        mask = (below if which == "left" else above) * (period is None) * 1.0
        if mode == "rev":
            return d * mask
        return lift(d, (left, right)[which == "right"], out) * mask
    return rule


def _interp_period(x: Any, xp: Any, fp: Any, period: Any) -> Any:
    """d out / d period: the period moves ``x mod p`` (by ``-floor(x / p)``) and every
    extended knot (``xp mod p``, and one period less or more at the ends), which move the
    output as ``x`` and ``xp`` do (see _interp_x, _interp_xp_weights)."""
    p = np.abs(period)
    xp = np.asarray(xp)
    at, knots, values, _ = _periodic(x, xp, fp, period)
    moved = -np.floor(xp / p)[np.argsort(np.mod(xp, p))]  # (the knots in _periodic's order)
    d_knots = np.concatenate((moved[-1:] - 1.0, moved, moved[:1] + 1.0))
    i, t, _, _ = _interp_parts(at, knots, None, None)
    slope = _interp_x(at, knots, values, None, None, None)
    return slope * (-np.floor(x / p) - (1.0 - t) * d_knots[i] - t * d_knots[i + 1]) * \
        np.sign(period)


def _interp_period_rule(mode: str) -> Callable[..., Any]:
    def rule(d: Any, out: Any, /, x: Any, xp: Any, fp: Any, left: Any = None,
             right: Any = None, period: Any = None) -> Any:
        partial = _interp_period(x, xp, fp, period)
        return d * partial if mode == "rev" else lift(d, period, out) * partial
    return rule


defjvp(np.interp, lambda dx, out, /, x, xp, fp, left=None, right=None, period=None:
       dx * _interp_x(x, xp, fp, left, right, period), _interp_xp_jvp, _interp_fp_jvp,
       _interp_side("left", "fwd"), _interp_side("right", "fwd"), _interp_period_rule("fwd"))
defvjp(np.interp, lambda ct, out, /, x, xp, fp, left=None, right=None, period=None:
       ct * _interp_x(x, xp, fp, left, right, period), _interp_xp_vjp, _interp_fp_vjp,
       _interp_side("left", "rev"), _interp_side("right", "rev"), _interp_period_rule("rev"))

nondifferentiable(np.argsort, np.searchsorted, np.lexsort, np.argpartition)


# -- ndarray methods ----------------------------------------------------------------------------

same_rules(np.ndarray.take, np.take)


def _item_position(x: Any, args: Any) -> Any:
    """The flat position that ``x.item(*args)`` reads."""
    return positions(x).item(*args)


# x.item(*index): a Python scalar; its tangent keeps the batch dimensions
defjvp(np.ndarray.item, lambda dx, out, /, x, *args: gather(dx, x, _item_position(x, args)))
defvjp(np.ndarray.item, lambda ct, out, /, x, *args: scatter(ct, x, _item_position(x, args)))
