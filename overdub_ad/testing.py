"""Helpers for tests: rules registered (or removed) for one block only, every API on one route,
and what the shipped tables hold, for tests that check every rule.

The rule tables are process-wide: a rule registered by one test (``defvjp(math.sin, ...)``)
would be used by every later one.  :func:`isolated_rules` keeps such registrations to a block::

    import math

    from overdub_ad import defvjp, grad
    from overdub_ad.testing import isolated_rules

    with isolated_rules():
        defvjp(math.sin, lambda ct, out, x: 100.0 * ct)
        assert grad(math.sin)(0.5) == 100.0
    assert grad(math.sin)(0.5) == math.cos(0.5)       # the shipped rule again
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from . import _routes, _rules
from ._routes import force_route

__all__ = ["isolated_rules", "without_rules", "force_route", "shipped_rules",
           "declared_partials", "declared_elementwise", "BILINEAR", "ROUTES", "FAST_ROUTES",
           "REFERENCE"]

#: The reference route's name: ``force_route(REFERENCE)`` turns every fast route off.
REFERENCE = _routes.REFERENCE
#: Every route's name, the reference's first.
ROUTES = _routes.ROUTES
#: The fast routes: name -> the APIs it serves and what it does.
FAST_ROUTES = _routes.FAST_ROUTES


@contextmanager
def isolated_rules() -> Iterator[None]:
    """Run a block whose rule registrations (``defjvp``, ``defvjp``, ``nondifferentiable``,
    stand-ins) are undone when it ends, however it ends.

    The tables are put back exactly as they were -- the very rule objects, so the fast routes,
    which use formulas written out for the shipped rules, apply them again -- and every engine
    is told of the change, as after a registration."""
    state = _rules.snapshot()
    try:
        yield
    finally:
        _rules.restore(state)


@contextmanager
def without_rules(*fns: Any) -> Iterator[None]:
    """Run a block in which ``fns`` have no rules (both modes, stand-ins too), as if none had
    ever been registered: what a user meets calling a function overdub_ad has no rule for.
    The tables are put back when the block ends (as :func:`isolated_rules` does)."""
    with isolated_rules():
        for fn in fns:
            if not _rules.remove(fn):
                raise ValueError(f"without_rules: {fn!r} has no rules to remove")
        yield


def shipped_rules(differentiable: bool | None = None) -> list[Any]:
    """Every callable overdub_ad ships a rule (or a nondifferentiable declaration) for, without
    the user's registrations: what a test that checks every rule runs over.  With
    ``differentiable=True`` only those with derivative rules, ``False`` only those declared
    nondifferentiable."""
    return [fn for fn in _rules.shipped()
            if differentiable is None or differentiable != _rules.is_nondifferentiable(fn)]


def declared_partials() -> list[tuple[Any, int, Any]]:
    """The scalar partial derivatives declared beside the shipped rules for the fast routes
    (float arithmetic recorded without running the rules), as ``(function, number of
    arguments, partials)``: a one-argument ``partials(x, out)``; for two arguments a tuple of
    constants, :data:`BILINEAR`, or ``partials(a, b, out, da, db)``.  A test holds each to its
    rule's derivative."""
    return _rules.declared_partials()


def declared_elementwise() -> list[tuple[Any, Any, Any]]:
    """The first and second derivatives declared beside the rules of elementwise NumPy
    functions for the routes that write Hessian-vector products out, as ``(function,
    first(x, out), second(x, out))``.  A test holds each to its rule's derivatives."""
    return list(_rules.declared_elementwise().values())


#: The declared partials of a product ``a * b``: ``(b, a)`` (see :func:`declared_partials`).
BILINEAR = _rules.BILINEAR
