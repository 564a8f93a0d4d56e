"""``check_grads``: a function's derivatives against finite differences, for users' own rules.

``overdub_ad._check.check_rule`` checks one table entry by calling its rules directly; this
checks what a user gets from the engine for a whole function -- their ``custom_jvp`` or
``defjvp`` rule used inside real code, nested derivatives included -- the way JAX's
``check_grads`` does:

- forward (``"fwd"``): ``jvp(f, args, v)`` along a random direction ``v`` against a
  fourth-order central difference of ``f`` along ``v``;
- reverse (``"rev"``): the dot-product test ``pair(ct, J v) == pair(J^T ct, v)`` for random
  ``ct`` and ``v``, ``J v`` by finite differences and ``J^T ct`` from ``overdub_ad.vjp``, with
  ``pair(a, b) = Re(sum(a * b))`` (the reverse rule is the plain transpose of the forward one:
  the autograd/JAX complex convention);
- ``order=2`` (or more) checks the derivative maps themselves: ``xs -> jvp(f, xs, v)[1]``
  (forward) and ``xs -> vjp(f, *xs)[1](ct)`` (reverse) are checked to first order in turn.

Arguments are pytrees of floats, complex numbers and arrays; integers and booleans are held
fixed (not differentiated).  Non-numeric output leaves are ignored.
"""

from __future__ import annotations

import importlib
import numbers
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from ._pytree import flatten, unflatten
from .forward._api import jvp

__all__ = ["check_grads", "GradCheckError"]

_Tol = tuple[float, float, float]  # (eps, atol, rtol)


class GradCheckError(AssertionError):
    """A derivative computed by overdub_ad disagrees with finite differences."""


def check_grads(f: Callable[..., Any], args: Sequence[Any], order: int = 1,
                modes: str | Iterable[str] | None = None, *, eps: float = 1e-4,
                atol: float = 1e-7, rtol: float = 1e-6, seed: int = 0) -> None:
    """Check the derivatives of ``f`` at ``args`` against finite differences; raise
    :class:`GradCheckError` (an ``AssertionError``) on a mismatch, return None otherwise.

    ``args`` is a tuple (one entry per argument of ``f``).  ``order`` is the highest order
    checked (1 or 2, or more); ``modes`` a sequence of ``"fwd"`` and ``"rev"`` -- by default
    every mode this installation provides (reverse needs ``overdub_ad.vjp``).  A mismatch is
    ``|ad - fd| > atol + rtol * max(|ad|, |fd|)`` in the largest element; ``eps`` is the
    finite-difference step, ``seed`` seeds the random directions.

    Example::

        @custom_jvp
        def softplus(x):
            return math.log1p(math.exp(x))

        @softplus.defjvp
        def _(primals, tangents):
            (x,), (dx,) = primals, tangents
            return softplus(x), dx / (1 + math.exp(-x))

        check_grads(softplus, (0.3,), order=2)

    See also: :func:`overdub_ad.jvp`, ``overdub_ad._check.check_rule`` (one table entry).
    """
    if not callable(f):
        raise TypeError(f"check_grads: f must be callable, got {f!r}")
    if not isinstance(args, (tuple, list)):
        raise TypeError("check_grads(f, args): args must be a tuple with one entry per argument "
                        "of f")
    if not (isinstance(order, int) and order >= 1):
        raise ValueError(f"check_grads: order must be a positive integer, got {order!r}")
    chosen = _modes(modes)
    rng = np.random.default_rng(seed)
    tol = (eps, atol, rtol)
    for mode in chosen:
        _check(f, tuple(args), order, mode, rng, tol, 1)


def _modes(modes: str | Iterable[str] | None) -> tuple[str, ...]:
    available = ("fwd", "rev") if _vjp() is not None else ("fwd",)
    if modes is None:
        return available
    chosen = (modes,) if isinstance(modes, str) else tuple(modes)
    for mode in chosen:
        if mode not in ("fwd", "rev"):
            raise ValueError(f"check_grads: unknown mode {mode!r} (expected 'fwd' or 'rev')")
        if mode not in available:
            raise NotImplementedError("check_grads: mode 'rev' needs overdub_ad.vjp, which this "
                                      "installation does not provide")
    return chosen


def _vjp() -> Callable[..., Any] | None:
    vjp: Callable[..., Any] | None = getattr(importlib.import_module("overdub_ad"), "vjp", None)
    return vjp


def _check(f: Callable[..., Any], args: tuple[Any, ...], order: int, mode: str,
           rng: np.random.Generator, tol: _Tol, level: int) -> None:
    v = _direction(rng, args)
    if mode == "fwd":
        _check_jvp(f, args, v, tol, level)
        nxt = lambda *xs: jvp(f, xs, v)[1]  # noqa: E731
    else:
        out = f(*args)
        ct = _direction(rng, out)
        _check_vjp(f, args, v, ct, tol, level)
        vjp = _vjp()
        assert vjp is not None  # _modes offers "rev" only with it
        nxt = lambda *xs: vjp(f, *xs)[1](ct)  # noqa: E731
    if order > 1:
        _check(nxt, args, order - 1, mode, rng, tol, level + 1)


def _check_jvp(f: Callable[..., Any], args: tuple[Any, ...], v: tuple[Any, ...], tol: _Tol,
               level: int) -> None:
    _, ad = jvp(f, args, v)
    fd = _difference(f, args, v, tol[0])
    ad_leaves, fd_leaves = flatten(ad)[0], flatten(fd)[0]
    for k, (a, b) in enumerate(zip(ad_leaves, fd_leaves)):
        if b is None:
            continue
        _compare(a, b, tol, f"the forward-mode derivative (order {level}) of {_name(f)}, "
                            f"output leaf {k}")


def _check_vjp(f: Callable[..., Any], args: tuple[Any, ...], v: tuple[Any, ...], ct: Any,
               tol: _Tol, level: int) -> None:
    vjp = _vjp()
    assert vjp is not None  # _modes offers "rev" only with it
    _, pullback = vjp(f, *args)
    g = pullback(ct)  # one cotangent per argument, a tuple as in JAX
    if len(args) == 1 and not (isinstance(g, tuple) and len(g) == 1):
        g = (g,)
    fd = _difference(f, args, v, tol[0])
    lhs = _pair_trees(g, v)
    rhs = _pair_trees(ct, fd)
    _compare(lhs, rhs, tol, f"the reverse-mode derivative (order {level}) of {_name(f)} "
                            f"(dot-product test <J^T ct, v> == <ct, J v>)")


def _compare(a: Any, b: Any, tol: _Tol, what: str) -> None:
    _, atol, rtol = tol
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise GradCheckError(f"check_grads: {what} has shape {a.shape}, finite differences "
                             f"give {b.shape}")
    err = float(np.max(np.abs(a - b), initial=0.0))
    scale = float(max(np.max(np.abs(a), initial=0.0), np.max(np.abs(b), initial=0.0)))
    if not err <= atol + rtol * scale:  # also catches NaN
        raise GradCheckError(f"check_grads: {what} disagrees with finite differences: "
                             f"overdub_ad gives {a!r}, finite differences {b!r} (largest error "
                             f"{err:.3g}, allowed {atol + rtol * scale:.3g})")


# -- pytrees of numbers ---------------------------------------------------------------------

def _differentiable(x: Any) -> bool:
    if isinstance(x, (bool, np.bool_)):
        return False
    if isinstance(x, (float, complex, np.floating, np.complexfloating)):
        return True
    return isinstance(x, np.ndarray) and np.issubdtype(x.dtype, np.inexact)


def _direction(rng: np.random.Generator, tree: Any) -> Any:
    """A random tree like ``tree``: normal numbers at differentiable leaves, None elsewhere."""
    leaves, treedef = flatten(tree)
    return unflatten(treedef, [_random_like(rng, x) if _differentiable(x) else None
                               for x in leaves])


def _random_like(rng: np.random.Generator, x: Any) -> Any:
    shape = np.shape(x)
    r = rng.standard_normal(shape)
    if np.iscomplexobj(x):
        r = r + 1j * rng.standard_normal(shape)
    if isinstance(x, np.ndarray):
        return r.astype(np.result_type(x, float))
    return complex(r) if isinstance(x, (complex, np.complexfloating)) else float(r)


def _moved(args: tuple[Any, ...], v: tuple[Any, ...], h: float) -> tuple[Any, ...]:
    leaves, treedef = flatten(list(args))
    dirs = flatten(list(v))[0]
    return tuple(unflatten(treedef, [x if d is None else x + h * d
                                     for x, d in zip(leaves, dirs)]))


def _difference(f: Callable[..., Any], args: tuple[Any, ...], v: tuple[Any, ...],
                h: float) -> Any:
    """Fourth-order central difference of ``f`` at ``args`` along ``v`` (per output leaf)."""
    outs = [flatten(f(*_moved(args, v, s * h)))
            for s in (-2.0, -1.0, 1.0, 2.0)]
    treedef = outs[0][1]
    leaves: list[Any] = []
    for m2, m1, p1, p2 in zip(*(o[0] for o in outs)):
        if not _numeric(p1):
            leaves.append(None)
            continue
        m2, m1, p1, p2 = (np.asarray(y) for y in (m2, m1, p1, p2))
        d = (m2 - 8.0 * m1 + 8.0 * p1 - p2) / (12.0 * h)
        leaves.append(d if d.ndim else d[()])
    return unflatten(treedef, leaves)


def _numeric(x: Any) -> bool:
    return isinstance(x, (numbers.Number, np.ndarray, np.generic)) and not isinstance(x, bool)


def _pair_trees(a: Any, b: Any) -> float:
    total = 0.0
    for x, y in zip(flatten(a)[0], flatten(b)[0]):
        if x is None or y is None:
            continue
        total += float(np.real(np.sum(np.asarray(x) * np.asarray(y))))
    return total


def _name(f: Callable[..., Any]) -> str:
    name: str = getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or repr(f)
    return name
