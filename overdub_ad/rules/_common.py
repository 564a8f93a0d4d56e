"""Helpers shared by the rule families (not rules themselves).

Abbreviations as in every rule module: ``x, y`` arguments, ``out`` the primal output, ``dx`` a
tangent (with ``nb`` extra leading batch dimensions, ``B`` their shape), ``ct`` a cotangent.

Conventions every family follows (stated once here, relied on by the engine):

- A forward contribution has exactly the shape ``B + shape(out)``; broadcast inputs are lifted
  (:func:`lift`) so that the batch dimensions stay in front, and :func:`fit` broadcasts a
  contribution that does not depend on every output element.  Contributions may be read-only
  broadcast views: the engine combines them functionally (``a + b``), never in place.
- A reverse rule may return its cotangent at the broadcast shape (the engine sums away the
  broadcast dimensions); a reduction's cotangent is returned at the argument's full shape.
- A container argument (the list given to ``np.concatenate``, ``np.array``, ``math.fsum``...)
  has a tangent (cotangent) of the same structure; an element that carries no derivative may
  be ``None`` there, which rules read as zero (:func:`fill`).  A list of numbers given to a
  NumPy function is an array to NumPy: the forward engine stacks its tangent into one array
  (:func:`as_array_tangent`) before the rule sees it, so ufunc, reduction and product rules
  need no list case, and :func:`fill` accepts either form.
- A function with several outputs (``np.linalg.eigh``, ``np.split``, ``math.frexp``) has a tuple
  (list) of tangents, and receives a tuple (list) of cotangents; ``None`` in either stands for
  a zero component, and integer outputs always get ``None``.  (Summing the contributions of
  several arguments is then elementwise over the tuple, ``None`` being zero.)
- Rules receive the arguments as they were *before* the call: for an in-place operation
  (``operator.imul`` on an array) the engine passes a copy of the mutated argument.
- Rules are per *positional* argument: a differentiated value given by keyword
  (``np.clip(x, a_min=lo)`` with ``lo`` differentiated) has no rule unless the engine binds it
  to its position.  Float parameters whose derivative no rule provides (the ``ord`` of
  ``np.linalg.norm``, the order of ``scipy.special.jv``) have no rule either, so
  differentiating them raises ``MissingRuleError``.
- Rules run under the enclosing context, which may compute in another array namespace
  (overdub_gpu), so they ask only for what any namespace has: Python integers where NumPy takes
  an integer (a shift, an axis), ``np.take`` for integer-array selections, ``np.where`` rather
  than a product with booleans, slices by position rather than ``len()`` or iteration.  NumPy
  functions that are plain Python code without rules of their own (``np.ones``, ``np.eye``,
  ``np.tri``) are run as written under an enclosing derivative, writes through ``.flat``
  included: rules use ``np.full``, :func:`eye` and :func:`tri` instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

# Rules of variadic functions (math.hypot, np.einsum, builtin max...) are registered for this
# many positional arguments; a call with more raises MissingRuleError, never a silent zero.
VARIADIC = 32


def indexed(factory: Callable[[int], Any], n: int = VARIADIC) -> tuple[Any, ...]:
    """``(factory(0), ..., factory(n-1))``: per-argument rules of a variadic function."""
    return tuple(factory(i) for i in range(n))


def _ndim(x: Any) -> int:
    """``np.ndim(x)``, read off an array or a Python number without NumPy's dispatch (these
    helpers run for every operation on small arrays, where it is most of their cost)."""
    kind = x.__class__
    if kind is np.ndarray:
        return x.ndim  # type: ignore[no-any-return]
    if kind is float or kind is int or kind is complex or kind is bool:
        return 0
    return np.ndim(x)


def shape_of(x: Any) -> tuple[int, ...]:
    """``np.shape(x)``, as :func:`_ndim` reads it (the engines' checks of an operation on a
    small array use it too)."""
    kind = x.__class__
    if kind is np.ndarray or kind is np.float64:
        return x.shape  # type: ignore[no-any-return]
    if kind is float or kind is int or kind is complex or kind is bool:
        return ()
    return np.shape(x)


def nbatch(dx: Any, x: Any) -> int:
    """The number of leading batch dimensions of the tangent ``dx`` of ``x``."""
    return _ndim(dx) - _ndim(x)


def bshape(dx: Any, x: Any) -> tuple[int, ...]:
    """``B``, the batch shape of the tangent ``dx`` of ``x``."""
    return shape_of(dx)[:_ndim(dx) - _ndim(x)]


def lift(dx: Any, x: Any, out: Any) -> Any:
    """``dx`` reshaped so that it broadcasts against ``out`` with its batch dimensions in front."""
    nx, no, nd = _ndim(x), _ndim(out), _ndim(dx)
    if nd == nx or no <= nx:
        return dx
    s = shape_of(dx)
    return np.reshape(dx, s[:nd - nx] + (1,) * (no - nx) + s[nd - nx:])


def fit(t: Any, dx: Any, x: Any, out: Any) -> Any:
    """The contribution ``t`` broadcast to ``B + shape(out)`` (if it is not already)."""
    shape = shape_of(dx)[:_ndim(dx) - _ndim(x)] + shape_of(out)
    return t if shape_of(t) == shape else np.broadcast_to(t, shape)


def neg_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    """``axis`` (None, an int or a tuple) as a tuple of negative axes of an ``ndim`` array."""
    if axis is None:
        return tuple(range(-ndim, 0))
    if isinstance(axis, (tuple, list)):
        return tuple(int(a) % ndim - ndim for a in axis) if ndim else ()
    return (int(axis) % ndim - ndim,) if ndim else ()


def neg_axis(axis: int, ndim: int) -> int:
    return int(axis) % ndim - ndim


def expand(ct: Any, axes: tuple[int, ...], keepdims: bool) -> Any:
    """``ct`` of a reduction over the negative ``axes`` with its reduced axes back (size 1)."""
    if keepdims or not axes:
        return ct
    return np.expand_dims(ct, tuple(sorted(axes)))


def near_zero(x: Any, series: Sequence[float], formula: Callable[[Any], Any],
              radius: float) -> Any:
    """A derivative with a removable singularity at 0 (``sinc``'s, ``exprel``'s): its Taylor
    polynomial ``sum(series[k] * x**k)`` where ``|x| < radius``, ``formula(x)`` elsewhere.

    A rule is differentiated again for higher derivatives, so a constant put at the point (0
    for ``(cos(pi x) - sinc(x)) / x`` at 0) makes every next derivative there 0 -- silently
    wrong.  The polynomial has the right derivatives of every order; ``formula`` is given a
    value moved away from 0 where the polynomial is used, so that its derivatives there are
    finite and masked, never ``0 * nan``.  ``radius`` is chosen so that the first terms left
    out are below rounding."""
    small = np.less(np.abs(x), radius)
    total: Any = series[-1]
    for c in reversed(series[:-1]):
        total = total * x + c
    return np.where(small, total, formula(np.where(small, radius, x)))


def select(d: Any, w: Any) -> Any:
    """``d * w``, the share ``w`` of a candidate of a selection (``max``, ``np.maximum``,
    ``np.clip``: 1 for the one picked, 0 for the others, a fraction on ties) in the tangent or
    cotangent ``d``: exactly 0 where ``w`` is 0, whatever ``d`` holds, as JAX's ``select``.
    A product would make an infinite ``d`` -- the cotangent of ``np.sqrt`` at 0, the tangent
    of a candidate not picked -- ``0 * inf = nan`` for a candidate that has no part in the
    result (``np.sqrt(max(0.0, y - 2.0))`` below 2)."""
    if isinstance(d, np.ndarray) or np.ndim(w):
        product = d * w
        if type(product) is np.ndarray and not np.isnan(product).any():
            return product  # (the common case: no infinity met a zero share)
        # (and another namespace's arrays always: no round trip to the host to ask)
        return np.where(np.equal(w, 0), np.zeros_like(d), d) * w
    return d * w if w else 0.0  # (a number stays a number: w may be an array of no axes)


def zero_like(x: Any) -> Any:
    """A zero of the type and shape of ``x`` (a float, complex or array)."""
    if isinstance(x, (bool, int, float)):
        return 0.0
    if isinstance(x, complex):
        return 0j
    return np.zeros(np.shape(x), np.result_type(x, 0.0))


def fill(dxs: Iterable[Any], xs: Sequence[Any]) -> list[Any]:
    """The tangents ``dxs`` of the elements ``xs`` of a container, ``None`` made zeros that
    carry the batch shape of the others.  ``dxs`` may also be the container's tangent stacked
    into one array (``B + np.shape(xs)``, see :func:`as_array_tangent`)."""
    if isinstance(dxs, np.ndarray):
        nb = np.ndim(dxs) - np.ndim(xs)
        return [dxs[(slice(None),) * nb + (k,)] for k in range(len(list(xs)))]
    dxs, xs = list(dxs), list(xs)
    batch: tuple[int, ...] = ()
    for d, x in zip(dxs, xs):
        if d is not None:
            batch = bshape(d, x)
            break
    return [(np.zeros(batch + np.shape(x), np.result_type(x, 0.0)) if batch or np.ndim(x)
             else zero_like(x)) if d is None  # a number's zero is a number, as its tangent is
            else (d if bshape(d, x) == batch else np.broadcast_to(d, batch + np.shape(x)))
            for d, x in zip(dxs, xs)]


def cts(ct: Iterable[Any], like: Iterable[Any]) -> list[Any]:
    """The cotangent ``ct`` of a multi-output function with each ``None`` made a zero of the
    matching element of ``like`` (the primal output)."""
    return [zero_like(o) if c is None else c for c, o in zip(ct, like)]


def map_batch(f: Callable[[Any], Any], dx: Any, nd: int) -> Any:
    """``f`` (linear, written for an ``nd``-dimensional argument) applied to each batch slice of
    ``dx``; the fallback for linear maps that cannot be told about leading dimensions."""
    nb = np.ndim(dx) - nd
    if nb == 0:
        return f(dx)
    shape = np.shape(dx)
    # (the batch size spelled out: -1 cannot be inferred for an empty dx, a tangent of an
    # empty selection)
    count = math.prod(shape[:nb])
    flat = np.reshape(dx, (count,) + shape[nb:])
    # (slices by position: arrays of other namespaces need not have len() or iteration)
    res = np.stack([f(flat[k, ...]) for k in range(count)]) if count else None
    if res is None:
        res = np.zeros((0,) + np.shape(f(np.zeros(shape[nb:], dx.dtype))), dx.dtype)
    return np.reshape(res, shape[:nb] + np.shape(res)[1:])


def gather(dx: Any, x: Any, index: Any) -> Any:
    """Tangent of ``x.flat[index]``: ``index`` is an integer array of flat positions of ``x``.
    (``np.take``, not ``[..., index]``: the array API allows no integer arrays after an
    ellipsis, and Dask no n-d ones.)"""
    s = np.shape(dx)
    return np.take(np.reshape(dx, s[:np.ndim(dx) - np.ndim(x)] + (-1,)), index, axis=-1)


def scatter(ct: Any, x: Any, index: Any) -> Any:
    """Transpose of :func:`gather`: ``ct`` summed into the flat positions ``index`` of ``x``."""
    n = int(np.size(x))
    i = np.ravel(index)
    c = np.ravel(ct)
    if np.iscomplexobj(c):
        g = np.bincount(i, np.real(c), n) + 1j * np.bincount(i, np.imag(c), n)
    else:
        g = np.bincount(i, c, n)
    return np.reshape(g, np.shape(x))


def eye(n: int, m: int | None = None, k: int = 0, dtype: Any = float) -> Any:
    """``np.eye(n, m, k, dtype)`` (float or bool) built from ``np.arange`` and a comparison.
    Rules run under the enclosing context, where NumPy's own ``eye`` (Python code, with no
    rule of its own) is run as written under an enclosing derivative: it writes through
    ``.flat``, which other array namespaces lack."""
    hit = np.reshape(np.arange(n) + k, (n, 1)) == np.arange(n if m is None else m)
    return hit if dtype is bool else np.where(hit, 1.0, 0.0)


def tri(n: int, m: int, k: int = 0) -> Any:
    """``np.tri(n, m, k, dtype=bool)`` the same way (NumPy's ``tri`` has no counterpart in the
    array API)."""
    return np.reshape(np.arange(n) + k, (n, 1)) >= np.arange(m)


def positions(x: Any) -> Any:
    """The flat positions of ``x``'s elements, shaped like ``x`` (for index-map rules)."""
    return np.reshape(np.arange(np.size(x)), np.shape(x))


def _leaf(x: object) -> bool:
    return not isinstance(x, (list, tuple))


def _first_batch(dx: Any, x: Any) -> tuple[int, ...] | None:
    if dx is None:
        return None
    if _leaf(x):
        return bshape(dx, x)
    for d, item in zip(dx, x):
        b = _first_batch(d, item)
        if b is not None:
            return b
    return None


def _stack_tree(dx: Any, x: Any, batch: tuple[int, ...]) -> Any:
    if _leaf(x):
        if dx is None:
            return np.zeros(batch + np.shape(x))
        return np.broadcast_to(dx, batch + np.shape(x))
    return np.stack([_stack_tree(d, item, batch)
                     for d, item in zip([None] * len(x) if dx is None else dx, x)],
                    axis=len(batch))


def as_array_tangent(dx: Any, x: Any) -> Any:
    """The tangent of an array-like argument as an array ``B + np.shape(x)``: a (nested) list
    argument has a list tangent, stacked here behind its batch dimensions (unless the engine
    stacked it already)."""
    if _leaf(x) or isinstance(dx, np.ndarray):
        return dx
    return _stack_tree(dx, x, _first_batch(dx, x) or ())


def like_items(xs: Any, cts: list[Any]) -> Any:
    """The cotangents ``cts`` of the elements of a container ``xs`` as the cotangent of ``xs``
    itself: one array for an array of any namespace (a rule of a function that iterates its
    argument, such as ``math.fsum`` or ``np.concatenate``, is given an array too, whose other
    cotangents are arrays), the list for a list or tuple.  Stacked by ``np.stack``, which an
    enclosing context sees: under a forward-mode derivative of the gradient the cotangents
    carry tangents, which a native conversion would drop."""
    if isinstance(xs, (list, tuple)) or not hasattr(xs, "shape"):
        return cts
    return np.stack(cts)


def like_argument(g: Any, x: Any) -> Any:
    """The cotangent ``g`` (an array) in the structure of the argument ``x`` (nested lists)."""
    if _leaf(x):
        return np.reshape(g, np.shape(x))
    g = np.reshape(g, np.shape(np.asarray(x)))
    return [like_argument(g[i], item) for i, item in enumerate(x)]
