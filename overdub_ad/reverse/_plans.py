"""Cached per-function plans for NumPy calls on plain arrays, and the table of quick rules
declared beside the shipped ones (``_rules.defquick``: the same numbers for the commonest
shapes -- 2-D ``@``, whole-array ``sum``, constant powers -- with fewer operations)."""

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


# np.power's quick rules for a constant exponent: hvp's tapes know them (they record them too)
_POW_CONSTANT: tuple[Any, ...] = (_rules.quick(np.power) or (None, ()))[1]
# id(fn) -> (fn, its shipped reverse rules, the test of a call (mask of differentiated
# arguments, primal arguments, keywords), the rules to record instead, whether second-order
# tapes may record them too): faster equivalents of shipped reverse rules for their commonest
# calls (x ** 2, a @ b, np.sum(a)), declared beside the rules (_rules.defquick)
_QUICK: dict[int, tuple[Any, ...]] = {}


@_rules.on_change
def _quick_table() -> None:
    """The quick rules of the functions whose rules are still the shipped ones (a rule the
    user registers wins: its function leaves the table, and a plan made before the change,
    whose version is stale, is made again)."""
    table = {key: (fn, _rules.vjp_rules(fn), applies, vjps, second)
             for key, (fn, applies, vjps, second) in _rules.quick_rules().items()}
    _QUICK.clear()
    _QUICK.update(table)
