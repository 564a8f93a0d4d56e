"""Helpers for tests: rules registered for one block only, and every API on one route.

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

from . import _routes, _rules
from ._routes import force_route

__all__ = ["isolated_rules", "force_route", "ROUTES", "FAST_ROUTES", "REFERENCE"]

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
