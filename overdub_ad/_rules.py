"""Derivative-rule tables shared by forward and reverse mode.

A rule is registered per callable and per positional argument (autograd's design, which its
test suite exercises):

- ``defjvp(fn, *per_argument)`` -- forward mode.  For argument ``i`` give
  ``rule(dx, out, *args, **kwargs) -> tangent contribution`` where ``dx`` is argument ``i``'s
  tangent; the output tangent is the sum of the contributions of the arguments that carry a
  tangent.  Tangents may have extra *leading* batch dimensions (``dx.shape == B + shape(x)``,
  used by ``jacfwd`` to push several directions at once): rules use negative axes and
  broadcasting so they work for any ``B``.
- ``defvjp(fn, *per_argument)`` -- reverse mode.  For argument ``i`` give
  ``rule(ct, out, *args, **kwargs) -> cotangent for argument i``.  The engine sums away
  broadcast dimensions (and drops the imaginary part for real arguments), so a rule may return
  the cotangent at the broadcast shape.

In place of a rule, ``ZERO`` says the argument has no derivative (an integer, a shape, an
index) and ``LINEAR`` says ``fn`` is linear in it, the other arguments held as parameters:
its tangent is ``fn`` applied to the tangent, with the call's keywords (forward mode only;
reverse mode needs the explicit transpose).  Because the tangent may carry leading batch
dimensions, ``LINEAR`` is right only where ``fn`` treats leading dimensions as a stack and
takes no ``out=`` buffer (``operator.neg``, ``np.real``, ``np.matrix_transpose``); ``reshape``,
``sum(axis=0)`` or ``x * y`` with broadcasting need a written rule.  ``None`` for an argument
means "no rule registered": differentiating through it raises :class:`MissingRuleError`.

A rule wrapped in :class:`Carried` is also told which arguments carry a derivative in the
call (the non-smooth functions need it: at a tie of ``max(x, 0.0)`` the constant wins, so
``relu'(0) = 0``, while a tie between two differentiated arguments splits evenly).

``nondifferentiable(fn, ...)`` lists functions whose derivative is zero almost everywhere
(``floor``, ``sign``, comparisons, ``argmax``): every mode passes them through, giving zero
tangents and cotangents.

Complex numbers follow autograd and JAX: rules for holomorphic functions are written as for
reals (``ct * cos(x)``); for a real-valued ``f`` of ``z = x + iy`` the gradient is
``df/dx - i df/dy``.  Rule modules state their abbreviations: ``x, y`` arguments, ``out`` the
primal output, ``dx`` a tangent, ``ct`` a cotangent.
"""

from __future__ import annotations

import threading
from typing import Any


class _Marker:
    def __init__(self, name: str, meaning: str) -> None:
        self.name = name
        self.__doc__ = meaning

    def __repr__(self) -> str:
        return self.name


ZERO = _Marker("ZERO", "this argument has no derivative (integer, shape, index)")
LINEAR = _Marker("LINEAR", "fn is linear in this argument: its tangent is fn(tangent, ...)")


class Carried:
    """A rule that must know which arguments carry a derivative (ties of ``max``, ``min``,
    ``clip``...): engines call ``rule.rule(carried, d, out, *args, **kwargs)``.

    ``carried`` has one entry per positional argument of the call: True or False, or for a
    list or tuple argument a tuple with one such entry per element (see :func:`is_carried`).
    Called as a plain rule, ``rule(d, out, *args, **kwargs)``, every argument counts as
    carried (what a numerical check of the rule assumes).
    """

    __slots__ = ("rule",)

    def __init__(self, rule: Any) -> None:
        self.rule = rule

    def __call__(self, d: Any, out: Any, /, *args: Any, **kwargs: Any) -> Any:
        return self.rule(ALL_CARRIED, d, out, *args, **kwargs)


ALL_CARRIED = _Marker("ALL_CARRIED", "every argument of the call carries a derivative")


def is_carried(carried: Any, i: int, j: int | None = None) -> bool:
    """Whether argument ``i`` (element ``j`` of it, for a list or tuple argument) carries a
    derivative, given the ``carried`` of a :class:`Carried` rule."""
    if carried is ALL_CARRIED:
        return True
    flag = carried[i] if i < len(carried) else False
    if type(flag) is tuple:
        return flag[j] if j is not None else any(flag)
    return bool(flag)


def carried_pattern(parts: Any) -> tuple[Any, ...]:
    """``carried`` for a call whose arguments' tangents (cotangent nodes) are ``parts``: None
    for an argument without one, a list or tuple for a container argument."""
    return tuple(tuple(e is not None for e in p) if type(p) in (list, tuple) else p is not None
                 for p in parts)


class MissingRuleError(TypeError):
    """A differentiated value reached a function with no derivative rule for that argument."""


class _Entry:
    __slots__ = ("fn", "jvps", "vjps")

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.jvps: tuple[Any, ...] = ()
        self.vjps: tuple[Any, ...] = ()


_TABLE: dict[int, _Entry] = {}  # id(fn) -> rules; fn kept alive by the entry
_NONDIFFERENTIABLE: dict[int, Any] = {}
_lock = threading.Lock()
# Bumped by every registration (defjvp, defvjp, nondifferentiable), after the tables changed:
# an engine that keeps what it looked up in them (its plan for recording a call) trusts the
# plan while the version it was made at is still this one, without reading the tables again.
# Code that changes the tables otherwise (a test swapping in a copy) calls _changed() too.
version = 0


def _changed() -> None:
    global version
    version += 1


def _name(fn: Any) -> str:
    module = getattr(fn, "__module__", None) or ""
    module = {"_operator": "operator", "numpy.core.umath": "numpy", "builtins": ""}.get(module,
                                                                                       module)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{module}.{name}" if module else name


def _check(kind: str, fn: Any, rules: tuple[Any, ...]) -> None:
    if not callable(fn):
        raise TypeError(f"{kind}: {fn!r} is not callable")
    for i, rule in enumerate(rules):
        if not (rule is None or rule is ZERO or rule is LINEAR or callable(rule)):
            raise TypeError(f"{kind}({_name(fn)}): the rule for argument {i} must be callable, "
                            f"ZERO, LINEAR or None, got {rule!r}")


def _entry(fn: Any) -> _Entry:
    entry = _TABLE.get(id(fn))
    if entry is None or entry.fn is not fn:
        entry = _TABLE[id(fn)] = _Entry(fn)
    return entry


def defjvp(fn: Any, *rules: Any) -> Any:
    """Register forward-mode rules for ``fn``, one per positional argument; returns ``fn``.

    Example::

        defjvp(math.hypot, lambda dx, out, x, y: x * dx / out,
                           lambda dy, out, x, y: y * dy / out)
    """
    _check("defjvp", fn, rules)
    with _lock:
        _entry(fn).jvps = rules
        _changed()
    return fn


def defvjp(fn: Any, *rules: Any) -> Any:
    """Register reverse-mode rules for ``fn``, one per positional argument; returns ``fn``.

    Example::

        defvjp(math.hypot, lambda ct, out, x, y: ct * x / out,
                           lambda ct, out, x, y: ct * y / out)
    """
    _check("defvjp", fn, rules)
    if any(rule is LINEAR for rule in rules):
        raise TypeError(f"defvjp({_name(fn)}): LINEAR is for forward rules; reverse mode needs "
                        f"the transpose written out")
    with _lock:
        _entry(fn).vjps = rules
        _changed()
    return fn


def nondifferentiable(*fns: Any) -> None:
    """Declare functions whose derivative is zero wherever it exists (piecewise constant)."""
    for fn in fns:
        if not callable(fn):
            raise TypeError(f"nondifferentiable: {fn!r} is not callable")
        _NONDIFFERENTIABLE[id(fn)] = fn
        _changed()


def is_nondifferentiable(fn: Any) -> bool:
    return _NONDIFFERENTIABLE.get(id(fn)) is fn


def jvp_rules(fn: Any) -> tuple[Any, ...] | None:
    """The per-argument forward rules of ``fn`` (``()`` if none registered), by identity."""
    entry = _TABLE.get(id(fn))
    return entry.jvps if entry is not None and entry.fn is fn else None


def vjp_rules(fn: Any) -> tuple[Any, ...] | None:
    entry = _TABLE.get(id(fn))
    return entry.vjps if entry is not None and entry.fn is fn else None


def same_rules(alias: Any, fn: Any) -> None:
    """Register ``fn``'s forward and reverse rules for ``alias`` too (``np.ndarray.sum`` for
    ``np.sum``)."""
    jvps, vjps = jvp_rules(fn), vjp_rules(fn)
    if jvps is None or vjps is None:
        raise TypeError(f"same_rules: {_name(fn)} has no forward and reverse rules to share with "
                        f"{_name(alias)}")
    defjvp(alias, *jvps)
    defvjp(alias, *vjps)


def registered() -> list[Any]:
    """Every callable with a rule or a nondifferentiable declaration."""
    return [e.fn for e in _TABLE.values()] + list(_NONDIFFERENTIABLE.values())


_SHIPPED: list[Any] = []


def mark_shipped() -> None:
    """Record the tables overdub_ad ships (called once its rule modules are imported)."""
    _SHIPPED[:] = registered()


def shipped() -> list[Any]:
    """The callables of the shipped tables, without the user's registrations (the meta-test's
    subject: every one of them has a checked case)."""
    return list(_SHIPPED)


def missing(fn: Any, argument: int | str, mode: str, context: str) -> MissingRuleError:
    register = "defjvp" if mode == "forward" else "defvjp"
    return MissingRuleError(
        f"no {mode}-mode derivative rule for {_name(fn)} (argument {argument}) under {context}; "
        f"register one with overdub_ad.{register}({_name(fn)}, ...) or declare it with "
        f"overdub_ad.nondifferentiable if its derivative is zero")

