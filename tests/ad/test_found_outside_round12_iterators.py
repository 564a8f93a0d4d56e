"""Heaps, merged iterators and sets, found by an outside tester (round twelve), kept fixed.

Forward mode handed the C heap functions (``heapq.heappush``, ``heappop``, ``heapify``,
``heapreplace``, ``heappushpop``) and ``bisect.insort`` a copy of a list whose members'
metadata the core keeps aside, with the members tagged again: they reordered the copy, never
the list.  ``heapq.merge`` (``while len(h) > 1: ... heappop(h)``) then looped forever, and a
heap built with ``append`` and ``heapify`` came back unordered (a wrong derivative).  The copy
is now stored back into the list through the core.  ``heapq.merge`` unpacks its entries in a
chained assignment (``value, order, next = s = h[0]``), which the rewrite left native: the
value came out plain (derivative 0).  A set that an inner derivative left its tagged value in
(it raised ``MissingRuleError`` for ``set.add``) made the outer forward derivative's clean-up
raise ``TagError`` in place of that error.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from overdub_ad import MissingRuleError, derivative, grad, hessian
from overdub_ad.testing import REFERENCE, force_route

X = 0.8


@contextmanager
def _deadline(seconds: int = 60) -> Iterator[None]:
    """Fail, instead of hanging the suite, where the derivative never returns."""
    def expired(*_: Any) -> None:
        raise TimeoutError(f"no result in {seconds} s")
    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _finite_difference(f: Callable[[float], float], x: float, h: float = 1e-6) -> float:
    return (f(x + h) - f(x - h)) / (2 * h)


def _pushed(x: float) -> float:
    h: list[Any] = []
    heapq.heappush(h, x * x)
    heapq.heappush(h, 2.0)
    heapq.heappush(h, 0.5 * x)
    return heapq.heappop(h) + 3 * heapq.heappop(h)


def _appended_then_heapified(x: float) -> float:
    h: list[Any] = []
    h.append(x)
    h.append(3.0)
    h.append(0.1 * x)
    heapq.heapify(h)
    return heapq.heappop(h) + 5 * heapq.heappop(h)


def _entries_replaced(x: float) -> float:
    h: list[Any] = []
    for i, v in enumerate([x, x * x, 0.3, 3 * x]):
        h.append([v, i])
    heapq.heapify(h)
    s = h[0]
    s[0] = 10 * x
    heapq.heapreplace(h, s)
    return h[0][0] + 3 * h[1][0] + 5 * h[2][0]


def _pushpop_of_appended(x: float) -> float:
    h: list[Any] = []
    for v in (x * x, 2 * x, 0.2):
        h.append((v, 0))
    heapq.heapify(h)
    a = heapq.heappushpop(h, (0.5 * x, 1))
    b = heapq.heapreplace(h, (4 * x, 2))
    return a[0] + 3 * b[0] + 7 * h[0][0] + 11 * h[1][0]


def _insorted(x: float) -> float:
    h: list[Any] = []
    h.append(0.1 * x)
    h.append(2.0)
    bisect.insort(h, x * x)
    return h[1] * 3 + h[0] + 5 * h[2]


HEAPS = {f.__name__: f for f in (_pushed, _appended_then_heapified, _entries_replaced,
                                 _pushpop_of_appended, _insorted)}


@pytest.mark.every_route
@pytest.mark.parametrize("route", [None, REFERENCE])
@pytest.mark.parametrize("name", HEAPS)
def test_heap_functions_on_lists_holding_differentiated_values(name, route):
    f = HEAPS[name]
    want = _finite_difference(f, X)
    with force_route(route), _deadline():
        for _ in range(2):  # (first and repeated calls)
            assert derivative(f, X) == pytest.approx(want, rel=1e-6)
            assert grad(f)(X) == pytest.approx(want, rel=1e-6)


MERGES = {
    "list(merge)[0]": lambda x: list(heapq.merge([x], [2.0]))[0],
    "next(merge)": lambda x: next(heapq.merge([x * x], [5.0])),
    "islice(merge)": lambda x: sum(itertools.islice(heapq.merge([x, 2 * x], [1.5 * x]), 2)),
    "weighted merge": lambda x: sum(a * (i + 1) for i, a in enumerate(
        heapq.merge([x, 2 * x], [1.5 * x, 9.0]))),
    "merge with key": lambda x: sum(a * (i + 1) for i, a in enumerate(
        heapq.merge([3 * x, 2 * x], [1.5 * x, 0.1], key=lambda v: -v))),
}


@pytest.mark.every_route
@pytest.mark.parametrize("route", [None, REFERENCE])
@pytest.mark.parametrize("name", MERGES)
def test_heapq_merge(name, route):
    """list(merge(...)) never returned; next(merge(...)) had derivative 0."""
    f = MERGES[name]
    want = _finite_difference(f, X)
    assert want != 0.0
    with force_route(route), _deadline():
        for _ in range(2):
            assert derivative(f, X) == pytest.approx(want, rel=1e-6)
            assert grad(f)(X) == pytest.approx(want, rel=1e-6)


def _chained_unpacking(x: float) -> float:
    h: list[Any] = []
    h.append([x * x, 0, None])
    value, order, _ = s = h[0]
    return value + s[0] * order


@pytest.mark.every_route
@pytest.mark.parametrize("route", [None, REFERENCE])
def test_chained_assignment_unpacking_a_list(route):
    """``a, b, c = s = h[0]``: the unpacking reads the list's members with their tangents."""
    with force_route(route):
        for _ in range(2):
            assert derivative(_chained_unpacking, X) == pytest.approx(2 * X)
            assert grad(_chained_unpacking)(X) == pytest.approx(2 * X)


def _set_grown(x: float) -> float:
    s = {x}
    s.add(x * x)
    return sum(s)


@pytest.mark.every_route
@pytest.mark.parametrize("route", [None, REFERENCE])
def test_set_add_under_nesting_raises_the_documented_error(route):
    """hessian and derivative(grad) raised TagError (internal advice) where grad raises
    MissingRuleError for set.add; forward mode follows the set."""
    with force_route(route):
        for _ in range(2):
            assert derivative(_set_grown, X) == pytest.approx(1 + 2 * X)
            for api in (grad, hessian, lambda f: derivative(grad(f))):
                with pytest.raises(MissingRuleError, match="set.add"):
                    api(_set_grown)(X)


GROWN: set[Any] = set()


def test_a_set_from_outside_gets_plain_values_back():
    def f(x: float) -> float:
        GROWN.add(3 * x)
        return sum(GROWN)
    GROWN.clear()
    GROWN.add(0.5)
    assert derivative(f, X) == pytest.approx(3.0)
    assert GROWN == {0.5, 3 * X}
    assert all(type(v) is float for v in GROWN)


def _appended(x: float) -> list[Any]:
    items: list[Any] = []
    items.append(x)
    items.append(x * x)
    return items


CHAINS = {
    "literal lists": lambda x: sum(a * (i + 1) for i, a in enumerate(
        itertools.chain.from_iterable([[x, x * x], (3 * x,)]))),
    "appended list": lambda x: sum(a * (i + 1) for i, a in enumerate(
        itertools.chain.from_iterable([_appended(x), (3 * x,)]))),
    "generator": lambda x: sum(itertools.chain.from_iterable([x * k] for k in range(1, 4))),
    "list of": lambda x: list(itertools.chain.from_iterable([[x, x * x]]))[1],
}


@pytest.mark.every_route
@pytest.mark.parametrize("route", [None, REFERENCE])
@pytest.mark.parametrize("name", CHAINS)
def test_chain_from_iterable_moves_values_as_chain_does(name, route):
    """It raised MissingRuleError in both modes (chain(*lists) did not)."""
    f = CHAINS[name]
    want = _finite_difference(f, X)
    second = _finite_difference(lambda t: _finite_difference(f, t, 1e-4), X, 1e-4)
    with force_route(route):
        for _ in range(2):
            assert derivative(f, X) == pytest.approx(want, rel=1e-6)
            assert grad(f)(X) == pytest.approx(want, rel=1e-6)
            assert hessian(f)(X) == pytest.approx(second, abs=1e-4)
            assert derivative(grad(f))(X) == pytest.approx(second, abs=1e-4)


def test_chain_from_iterable_of_a_non_iterable_raises_at_the_call():
    with pytest.raises(TypeError, match="not iterable"):
        derivative(lambda x: itertools.chain.from_iterable(3), X)
