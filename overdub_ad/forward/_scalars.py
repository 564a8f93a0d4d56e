"""Float arithmetic and ``math`` functions in the general forward mode with no enclosing
context: the ``forward-partials`` route (``ForwardContext.execute``'s first path).

Where the dual route declines a function (a generator, a ``with`` block, ``functools.partial``,
a property setter...), every operation runs through the general forward mode, whose rules are
written for arrays and batches of directions.  On a float with a float tangent, the partials
declared beside the shipped rules (``_rules.defscalar``, the same the reverse-partials route
records) give the tangent directly: ``d(a * b) = b da + a db``, with no rule call.  Anything
else -- an array, a batch of directions (``jacfwd``), a partial the declaration hands back to
the rules (a domain edge), a rule the user registered -- takes the rules' path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from overdub import Tagged, tag

from .. import _rules
from .._shared import partials_tables

if TYPE_CHECKING:
    from ._context import ForwardContext

# id(fn) -> partials, while fn's rules are the shipped ones and the route is enabled
FAST1, FAST2, FAST = partials_tables("forward-partials")
NOT_SIMPLE = object()  # (the rules' path)
_REAL = frozenset({float, int, np.float64})
# (one direction: a number; a batch of directions, jacfwd's: an array)
_TANGENT = frozenset({float, np.float64, np.ndarray})


_INF = float("inf")


def _split(ctx: ForwardContext, x: Any) -> tuple[Any, Any]:
    """``(value, tangent)`` of an operand: this context's finite number with a number
    tangent (or jacfwd's batch of them, an array), or a finite plain number (tangent None);
    ``(NOT_SIMPLE, None)`` for anything else (at an infinity or nan the rules decide, as the
    partials were written for finite points)."""
    if type(x) is Tagged:
        if x.owner() is ctx and type(x.value) in _REAL and type(x.meta) in _TANGENT and \
                -_INF < x.value < _INF:
            return x.value, x.meta
        return NOT_SIMPLE, None
    return (x, None) if type(x) in _REAL and -_INF < x < _INF else (NOT_SIMPLE, None)


def _term(partial: Any, tangent: Any) -> Any:
    """``partial * tangent``: exactly 0 for a number tangent that is 0, even where the partial
    is infinite (the rules' path leaves such a term out); elementwise for a batch, as JAX."""
    if type(tangent) is not np.ndarray and tangent == 0:
        return 0.0
    return partial * tangent


def scalar_step(ctx: ForwardContext, fn: Any, args: tuple[Any, ...]) -> Any:
    """``fn(*args)`` with its tangent from the declared partials, or ``NOT_SIMPLE``."""
    if len(args) == 2:
        partials = FAST2.get(id(fn))
        if partials is None:
            return NOT_SIMPLE
        va, ta = _split(ctx, args[0])
        vb, tb = _split(ctx, args[1])
        if va is NOT_SIMPLE or vb is NOT_SIMPLE or (ta is None and tb is None):
            return NOT_SIMPLE
        try:
            out = fn(va, vb)
        except ArithmeticError:  # (the rules' path raises it as the program would see it)
            return NOT_SIMPLE
        if type(out) not in _REAL:
            return NOT_SIMPLE
        if partials is _rules.BILINEAR:
            pa, pb = vb, va
        elif type(partials) is tuple:
            pa, pb = partials
        else:
            p = partials(va, vb, out, ta is not None, tb is not None)
            if p is None:
                return NOT_SIMPLE
            pa, pb = p
        tangent = _term(pa, ta) if tb is None else \
            _term(pb, tb) if ta is None else _term(pa, ta) + _term(pb, tb)
    elif len(args) == 1:
        partial = FAST1.get(id(fn))
        if partial is None:
            return NOT_SIMPLE
        va, ta = _split(ctx, args[0])
        if va is NOT_SIMPLE or ta is None:
            return NOT_SIMPLE
        try:
            out = fn(va)
        except (ArithmeticError, ValueError):  # (math's domain error: the rules' path)
            return NOT_SIMPLE
        if type(out) not in _REAL:
            return NOT_SIMPLE
        if type(ta) is not np.ndarray and ta == 0:
            tangent = 0.0  # (see _term)
        else:
            p = partial(va, out)
            if p is None:
                return NOT_SIMPLE
            tangent = p * ta
    else:
        return NOT_SIMPLE
    return tag(out, ctx, tangent)
