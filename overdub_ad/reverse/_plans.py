"""Cached per-function plans for NumPy calls on plain arrays, and the quick rules that give
the same numbers as the shipped ones for the commonest shapes (2-D ``@``, whole-array ``sum``,
constant powers)."""

from __future__ import annotations

import operator
import types
from typing import Any

import numpy as np

from .. import _routes, _rules
from .._array_methods import _replacement
from .._custom import custom_vjp
from .._shared import _public
from ._calls import _BuiltinMethod, _INPLACE, _ITERATORS, _MOVING, _PYTHON_CODE, _reads_table


class _Plan:
    """What the rule tables say about recording the calls of one function, looked up once and
    trusted while :data:`_rules.version` is still ``version`` (every registration bumps it).

    ``simple``: whether its calls may take :meth:`ReverseContext._simple_call` (a C function or
    ufunc with rules, or none needed, that none of ``execute``'s special cases handles);
    ``rules``, ``nondifferentiable``: its table entries; ``quick``: its entry in
    :data:`_QUICK`, if its rules are the shipped ones; ``masks``: per mask of differentiated
    arguments (bit ``i``: argument ``i``), the arguments whose values no rule reads -- None if
    one of them has no rule -- and whether no rule reads the output (see :meth:`recording`).
    """

    __slots__ = ("fn", "version", "simple", "rules", "nondifferentiable", "quick", "masks")

    def __init__(self, fn: Any, special: bool) -> None:
        self.fn = fn
        self.version = _rules.version
        self.rules = _rules.vjp_rules(fn)
        self.nondifferentiable = _rules.is_nondifferentiable(fn)
        quick = _QUICK.get(id(fn))
        self.quick = quick if quick is not None and quick[0] is fn and \
            quick[1] is self.rules else None
        self.masks: dict[int, tuple[Any, bool]] = {}
        self.simple = not special and (self.rules is not None or self.nondifferentiable)

    def recording(self, mask: int) -> tuple[Any, bool]:
        """How a call whose differentiated arguments are the bits of ``mask`` is recorded:
        the differentiated arguments whose values no rule reads (kept as placeholders; None if
        one of them has no rule), and whether no rule reads the output."""
        rules = self.rules
        positions = [i for i in range(mask.bit_length()) if mask >> i & 1]
        how: tuple[Any, bool]
        if rules is None or any(i >= len(rules) or rules[i] is None for i in positions):
            how = (None, False)
        else:
            reads = _READS.get(id(self.fn))
            if reads is not None and reads[0] is self.fn and reads[1] is rules:
                needed = frozenset().union(*[reads[2][i] for i in positions])
                how = (tuple([i for i in positions if i not in needed]), -1 not in needed)
            else:
                how = ((), False)
        self.masks[mask] = how
        return how


# id(fn) -> the plan of a C function or ufunc (Python code and bound methods get a fresh plan
# per call: a kept one would keep them alive, and they never take _simple_call anyway)
_PLANS: dict[int, _Plan] = {}


def _plan(fn: Any) -> _Plan:
    """``fn``'s plan, made from the rule tables as they are now (and kept, see _PLANS)."""
    bound = (type(fn) is _BuiltinMethod and not isinstance(fn.__self__, types.ModuleType)) \
        or type(fn) is types.MethodWrapperType  # (d.__setitem__: made at each access)
    special = (fn is getattr or fn is setattr or fn is operator.setitem or fn is dict
               or fn is operator.delitem or fn is np.copyto or id(fn) in _ITERATORS
               or id(fn) in _MOVING or isinstance(fn, custom_vjp) or bound
               or isinstance(fn, _PYTHON_CODE) or _replacement(fn) is not None
               or _public(fn) is not fn)
    try:
        special = special or fn in _INPLACE
    except TypeError:  # unhashable
        special = True
    # forcing another route re-plans every function (force_route changes the rule version)
    plan = _Plan(fn, special or not _routes.enabled("reverse-plans"))
    if not (isinstance(fn, _PYTHON_CODE) or bound) and len(_PLANS) < 100_000:
        _PLANS[id(fn)] = plan
    return plan


_NP_UNSTACK = getattr(np, "unstack", None)
_READS = _reads_table()


def _pow_constant_vjp(ct: Any, out: Any, /, x: Any, y: Any, *m: Any) -> Any:
    """The cotangent of ``x`` in ``x ** y`` for a constant number ``y != 0``: what the shipped
    rules compute, ``ct * (y * x ** (y - 1))`` (their guard for ``x == y == 0`` never applies),
    without their masks; ``x ** 1`` is ``x`` exactly.  Below 1 the slope at ``x == 0`` is
    infinite, as the shipped rules give it (without NumPy's warning)."""
    if y < 1:
        with np.errstate(divide="ignore"):
            return ct * (y * np.power(x, y - 1))
    return ct * (y * (x if y == 2 else np.power(x, y - 1)))


def _matmul_matrices_vjp_x(ct: Any, out: Any, /, x: Any, y: Any) -> Any:
    """The cotangent of the matrix ``x`` in ``x @ y`` for a matrix ``y``: the shipped rule's
    ``np.matmul(ct, np.swapaxes(y, -1, -2))``, without its cases for vectors and stacks."""
    return np.matmul(ct, y.T)


def _matmul_matrices_vjp_y(ct: Any, out: Any, /, x: Any, y: Any) -> Any:
    return np.matmul(x.T, ct)


def _sum_all_vjp(ct: Any, out: Any, /, x: Any) -> Any:
    """The cotangent of the array ``x`` in ``np.sum(x)``: the shipped rule's read-only
    broadcast of ``ct`` to ``x``'s shape, made directly (``np.broadcast_to`` and the rule's
    handling of axes and masks cost several times the gradient of a small array)."""
    ct = np.asarray(ct)
    view = np.ndarray(x.shape, ct.dtype, ct, 0, (0,) * x.ndim)
    view.flags.writeable = False
    return view


_POW_CONSTANT = (_pow_constant_vjp, _rules.ZERO)
_CONSTANT_POWERS = frozenset({int, float})


def _constant_power(mask: int, primals: list[Any], kwargs: dict[str, Any]) -> bool:
    """``x ** y`` for a constant number ``y != 0``, only ``x`` differentiated."""
    return mask == 1 and len(primals) == 2 and not kwargs and \
        type(primals[1]) in _CONSTANT_POWERS and primals[1] != 0


def _matrices(mask: int, primals: list[Any], kwargs: dict[str, Any]) -> bool:
    """Two NumPy matrices, nothing else."""
    return not kwargs and len(primals) == 2 and \
        type(primals[0]) is np.ndarray and primals[0].ndim == 2 and \
        type(primals[1]) is np.ndarray and primals[1].ndim == 2


def _whole_array(mask: int, primals: list[Any], kwargs: dict[str, Any]) -> bool:
    """One NumPy array, nothing else (the reduction of all of it)."""
    return not kwargs and len(primals) == 1 and type(primals[0]) is np.ndarray


def _quick_table() -> dict[int, tuple[Any, ...]]:
    """Faster equivalents of shipped reverse rules, for their commonest calls: the same
    numbers, fewer operations.  ``id(fn) -> (fn, its shipped rules, the test of a call
    (mask of differentiated arguments, primal arguments, keywords), the rules to record
    instead, whether second-order tapes may record them too)`` -- :mod:`._hvp` knows
    :data:`_POW_CONSTANT`, not the others.  A rule the user registered later is not in it (its
    identity differs)."""
    table = {}
    for fns, test, quick, second in (
            ((operator.pow, np.power), _constant_power, _POW_CONSTANT, True),
            ((operator.matmul, np.matmul), _matrices,
             (_matmul_matrices_vjp_x, _matmul_matrices_vjp_y), False),
            ((np.sum,), _whole_array, (_sum_all_vjp,), False)):
        for fn in fns:
            rules = _rules.vjp_rules(fn)
            if rules is not None:
                table[id(fn)] = (fn, rules, test, quick, second)
    return table


_QUICK = _quick_table()
