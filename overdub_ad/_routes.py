"""The routes a derivative can take, which one may run now, and what each did (for explain).

Every API has a *reference* route -- forward mode by tagged values in a ForwardContext,
reverse mode by the tape of a ReverseContext swept with the registered rules, ``hvp`` as
forward over that reverse mode -- and fast routes, strategies for code they recognise. A fast
route computes exactly what the reference computes or declines, before any side effect, and
the reference runs instead. This module is the one place that says which routes exist, lets
tests and users force one (:func:`force_route`, or ``OVERDUB_AD_ROUTE=name`` in the
environment), and records, while :func:`explain` listens, which route ran and why others
declined.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

_T = TypeVar("_T")

#: The name of the reference route of every API (what :func:`force_route` takes to turn every
#: fast route off).
REFERENCE = "reference"

#: The fast routes, each with the APIs it serves and what it does.
FAST_ROUTES: dict[str, str] = {
    "forward-dual": "jvp, derivative, jacfwd: Python on numbers (in tuples, lists, dicts, "
                    "objects and arrays) run as its dual, tangents in "
                    "local variables (forward._pass, forward._dual)",
    "forward-partials": "jvp, derivative, jacfwd: float arithmetic and math functions in the "
                        "general forward mode computed with written-out scalar partials "
                        "(forward._scalars)",
    "reverse-specialised": "grad, vjp, jacrev: scalar Python functions compiled to record one "
                           "tape entry per function instead of one per operator "
                           "(reverse._specialise)",
    "reverse-plans": "grad, vjp, jacrev: per-function plans and written-out formulas for NumPy "
                     "calls (reverse._plans)",
    "reverse-partials": "grad, vjp, jacrev: float arithmetic and math functions recorded with "
                        "written-out scalar partials (reverse._calls)",
    "hvp-compiled": "hvp: straight-line NumPy functions compiled from their source "
                    "(hvp._compiled)",
    "hvp-tape": "hvp, hessian: forward mode over the recorded tape, without nested "
                "contexts; scalar Python compiled to record each expression's partials and "
                "second partials (hvp._tape, reverse._specialise); hessian sweeps it once per "
                "column",
}
#: Every route's name: the reference's, then the fast routes'.
ROUTES = (REFERENCE, *FAST_ROUTES)


class Declined(Exception):
    """Raised by a fast route that cannot compute a derivative, before anything the user could
    see has happened, with the reason; :func:`first` then tries the next route."""


def first(routes: Sequence[tuple[str, Callable[..., _T]]], fn: Any, *args: Any) -> _T:
    """The result of the first of ``routes`` -- ``(name, compute)`` pairs, in order, the
    reference's last -- that does not decline ``compute(*args)``.  A fast route that is not
    :func:`enabled` is skipped; each decision is recorded for :func:`explain`.  The one place
    where an API chooses its route."""
    forced = _forced
    for name, compute in routes:
        if forced is not None and name != forced and name != REFERENCE:
            continue  # (enabled(name), inline: this runs on every derivative)
        try:
            result = compute(*args)
        except Declined as why:
            declined(name, str(why), fn)
            continue
        if _listening.get() is not None:
            ran(name, fn)
        return result
    raise AssertionError(f"no route ran for {fn!r}: the reference route must come last")


def _checked(name: str | None, where: str) -> str | None:
    if name is not None and name not in ROUTES:
        raise ValueError(f"{where}: unknown route {name!r}; the routes are {', '.join(ROUTES)}")
    return name


#: The forced route, process-wide (a switch for tests and for debugging, not per call).
_forced: str | None = _checked(os.environ.get("OVERDUB_AD_ROUTE") or None, "OVERDUB_AD_ROUTE")


def enabled(route: str) -> bool:
    """May the fast route ``route`` run now?  Every route may, unless one is forced: forcing
    the reference turns every fast route off, forcing a fast route turns the others off."""
    return _forced is None or _forced == route


@contextmanager
def force_route(name: str | None) -> Iterator[None]:
    """Run a block with every API on route ``name``: ``"reference"`` (the general route only)
    or a fast route (which still declines what it cannot compute, and the reference runs
    then); ``None`` for the default choice.  The switch is process-wide, as
    ``OVERDUB_AD_ROUTE=name`` in the environment is: for tests and debugging, not for code
    that runs derivatives in several threads at once."""
    global _forced
    from . import _rules
    before, _forced = _forced, _checked(name, "force_route")
    _rules._changed()               # tables of written-out formulas follow the switch
    try:
        yield
    finally:
        _forced = before
        _rules._changed()


@dataclass
class Explanation:
    """What :func:`explain` saw: the result, and each route decision in order, as
    ``(route, ran, reason)``."""

    result: Any
    decisions: list[tuple[str, bool, str]] = field(default_factory=list)

    @property
    def ran(self) -> list[str]:
        """The routes that ran, one entry per decision, in order: a nested or repeated
        derivative has several, and a route that compiles the functions it runs
        (``reverse-specialised``, ``hvp-tape``) is listed once for each function."""
        return [route for route, ran, _ in self.decisions if ran]

    def __str__(self) -> str:
        lines = [f"{route}: {'ran' if ran else 'declined'}{' (' + reason + ')' if reason else ''}"
                 for route, ran, reason in self.decisions]
        return "\n".join(lines) or "no route decision was recorded"


_listening: ContextVar[list[tuple[str, bool, str]] | None] = ContextVar(
    "overdub_ad_explain", default=None)


@contextmanager
def unheard() -> Iterator[None]:
    """Run a block whose route decisions are not the user's to see: a derivative an engine
    takes of its own code (hvp's tape differentiating a rule by forward mode)."""
    token = _listening.set(None)
    try:
        yield
    finally:
        _listening.reset(token)


def ran(route: str, fn: Any = None, what: str = "") -> None:
    """Record that ``route`` computed the derivative of ``fn`` (or ``what`` part of it), for
    :func:`explain`; nothing is formatted unless it listens."""
    decisions = _listening.get()
    if decisions is not None:
        decisions.append((route, True, _about(fn, what)))


def declined(route: str, reason: str, fn: Any = None) -> None:
    """Record that ``route`` declined ``fn``, and why (for :func:`explain`)."""
    decisions = _listening.get()
    if decisions is not None:
        decisions.append((route, False, _about(fn, reason)))


def _about(fn: Any, text: str) -> str:
    if fn is None:
        return text
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    return f"{name}: {text}" if text else name


def _transform(api: Any) -> bool:
    """Whether ``api`` is one of overdub_ad's transforms (or a ``functools.partial`` of one,
    ``partial(grad, argnums=1)``): another callable given first (``explain(np.sin, np.cos,
    1.0)``) would be called on ``f`` and fail somewhere unrelated."""
    target = api.func if isinstance(api, functools.partial) else api
    return (getattr(target, "__module__", None) or "").partition(".")[0] == "overdub_ad"


def explain(api: Callable[..., Any], f: Callable[..., Any], *args: Any,
            **kwargs: Any) -> Explanation:
    """Run ``api(f)(*args, **kwargs)`` -- ``api`` one of overdub_ad's transforms, such as
    ``grad``, ``jacfwd`` or ``hessian`` -- or, for the transforms that take the function and
    its arguments together (``jvp``, ``vjp``, ``hvp``, ``derivative``), ``api(f, *args)``;
    return its result and which route ran, with the reason each other route declined::

        report = explain(grad, f, 2.0)
        report.result       # grad(f)(2.0)
        print(report)       # reverse-specialised: ran ...
    """
    if not callable(api) or not callable(f):
        raise TypeError("explain(api, f, *args): api and f must be callable, e.g. "
                        "explain(grad, f, 2.0)")
    if not _transform(api):
        raise TypeError(f"explain(api, f, *args): api must be one of overdub_ad's transforms "
                        f"(grad, jvp, jacfwd, hessian...), got {_about(api, '')}; to explain "
                        f"the derivative of {_about(api, '')}, give it as f: explain(derivative, "
                        f"{getattr(api, '__name__', 'f')}, ...)")
    decisions: list[tuple[str, bool, str]] = []
    token = _listening.set(decisions)
    try:
        if getattr(api, "__name__", "") in ("jvp", "vjp", "hvp", "derivative", "D"):
            result = api(f, *args, **kwargs)
        else:
            result = api(f)(*args, **kwargs)
    finally:
        _listening.reset(token)
    return Explanation(result, decisions)
