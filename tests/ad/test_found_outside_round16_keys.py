"""Found from outside (session 16, h98 sections 3 and 4).

1. A memo keyed by a hashable object holding the differentiated value -- a frozen dataclass
   ``Key(x)``, ``frozenset([x])``, a named tuple ``NT(x, 4)`` (reverse mode), a tuple inside a
   dataclass, a class hashing its attribute -- and filled by a plain call returned the stale
   plain value: a silent 0 on every route.  ``memo[x]`` and ``memo[(x, 4)]`` raised the
   documented MissingRuleError ("differentiated key"); these keys now do too (``memo.get``,
   ``pop`` and ``setdefault`` as well), and a ``functools.lru_cache`` function given such a key
   (a cache hit after a plain evaluation: nothing is called) raises as one given ``x`` does.
   A value stored during the derivative is read as usual.
2. A class with its own ``__getattribute__``: the machinery read ``obj.__class__`` through it
   (``isinstance``, the dual route's guards and helpers); the default forward route crashed with
   AttributeError inside ``__init__``.  It reads ``type(obj)`` now: the user's method sees what
   it sees natively.
"""

from __future__ import annotations

import dataclasses
import functools
import typing

import numpy as np
import pytest

from overdub_ad import MissingRuleError, derivative, grad, hessian, hvp, jacfwd, jacrev, jvp
from overdub_ad.testing import REFERENCE, force_route

# (each test runs on both routes itself: nothing for CI's reference-route pass to add)
pytestmark = pytest.mark.every_route

ROUTES = pytest.mark.parametrize("route", [None, REFERENCE], ids=["default", "reference"])


@dataclasses.dataclass(frozen=True)
class Key:
    k: typing.Any


@dataclasses.dataclass(frozen=True, slots=True)
class SlotKey:
    k: float


@dataclasses.dataclass(frozen=True)
class Outer:
    inner: Key
    tag: str = "a"


class NT(typing.NamedTuple):
    k: typing.Any
    n: int


class Hashed:
    """Hashed by its attribute (not by identity)."""

    def __init__(self, k):
        self.k = k

    def __hash__(self):
        return hash(self.k)

    def __eq__(self, other):
        return type(other) is Hashed and other.k == self.k


KEYS = {
    "frozenset": lambda k: frozenset([k]),
    "dataclass": Key,
    "slots dataclass": SlotKey,
    "nested dataclass": lambda k: Outer(Key(k)),
    "tuple of dataclass": lambda k: (Key(k), 2),
    "named tuple": lambda k: NT(k, 4),
    "dataclass of tuple": lambda k: Key((k, 1)),
    "own __hash__": Hashed,
    "named tuple of frozenset": lambda k: NT(frozenset([k]), 1),
}

READS = ("getitem", "get", "pop", "setdefault")

TRANSFORMS = {
    "grad": lambda f: grad(f)(1.3),
    "derivative": lambda f: derivative(f, 1.3),
    "jvp": lambda f: jvp(f, (1.3,), (1.0,))[1],
    "jacfwd": lambda f: jacfwd(f)(1.3),
    "jacrev": lambda f: jacrev(f)(1.3),
    "hessian": lambda f: hessian(f)(1.3),
    "hvp": lambda f: hvp(f, 1.3, 1.0),
}
WANT = {name: 6 * 1.3 if name in ("hessian", "hvp") else 3 * 1.3 ** 2 for name in TRANSFORMS}


def memoised(make_key, read):
    memo: dict[typing.Any, float] = {}

    def f(k):
        key = make_key(k)
        if key in memo:
            if read == "getitem":
                return memo[key]
            if read == "get":
                return memo.get(key)
            if read == "pop":
                v = memo.pop(key)
                memo[key] = v
                return v
            return memo.setdefault(key, 0.0)
        v = k ** 3
        memo[key] = v
        return v

    return f, memo


@ROUTES
@pytest.mark.parametrize("read", READS)
@pytest.mark.parametrize("make_key", KEYS.values(), ids=KEYS.keys())
def test_a_memo_filled_before_the_derivative_is_refused(route, read, make_key):
    f, memo = memoised(make_key, read)
    with force_route(route):
        for name, transform in TRANSFORMS.items():
            memo.clear()
            assert f(1.3) == 1.3 ** 3  # a plain evaluation fills the memo
            with pytest.raises(MissingRuleError, match="differentiated key"):
                transform(f)
            # (computed under the derivative: the item stored then is read as usual)
            memo.clear()
            np.testing.assert_allclose(float(np.squeeze(transform(f))), WANT[name])


@ROUTES
def test_a_memo_filled_in_the_same_derivative_is_read(route):
    memo: dict[typing.Any, float] = {}

    def cube(k):
        key = Key(k)
        if key not in memo:
            memo[key] = k ** 3
        return memo[key]

    def f(k):
        return cube(k) + cube(k)  # the second call reads what the first stored

    with force_route(route):
        for transform in (lambda: grad(f)(1.3), lambda: derivative(f, 1.3),
                          lambda: jacrev(f)(1.3), lambda: jacfwd(f)(1.3)):
            memo.clear()
            np.testing.assert_allclose(float(np.squeeze(transform())), 6 * 1.3 ** 2)


@ROUTES
def test_a_missed_lookup_and_membership_tests_are_untouched(route):
    memo = {Key(2.0): 8.0, frozenset([2.0]): 8.0}
    seen = {Key(1.3)}

    def f(k):
        out = k ** 3
        if Key(k) in seen:  # (a truth: no derivative lost)
            out = out * 2.0
        return out + memo.get(Key(k), 0.0) + memo.get(frozenset([k]), 0.0)

    with force_route(route):
        for _ in range(2):
            assert grad(f)(1.3) == pytest.approx(6 * 1.3 ** 2)
            assert derivative(f, 1.3) == pytest.approx(6 * 1.3 ** 2)


@ROUTES
def test_an_identity_hashed_object_key_reads_its_item(route):
    class Layer:  # hashed by identity: an equal key is the same object
        def __init__(self):
            self.w = 1.0

    layer = Layer()
    scales = {layer: 2.0}

    def f(w):
        layer.w = w
        return layer.w * scales[layer]

    with force_route(route):
        assert grad(f)(1.3) == pytest.approx(2.0)
        assert derivative(f, 1.3) == pytest.approx(2.0)


@dataclasses.dataclass(frozen=True)
class Params:
    k: float


@functools.lru_cache(maxsize=None)
def stiffness(p):
    return p.k * np.array([[2.0, -1.0], [-1.0, 2.0]])


class Model(typing.NamedTuple):
    w: float

    @functools.lru_cache(maxsize=None)  # noqa: B019  (the pattern under test)
    def term(self, i):
        return self.w * i


def energy(k):
    u = np.array([0.1, 0.4])
    return 0.5 * u @ stiffness(Params(k)) @ u


@ROUTES
@pytest.mark.parametrize("transform", [grad, derivative, jacfwd, jacrev, hessian],
                         ids=["grad", "derivative", "jacfwd", "jacrev", "hessian"])
def test_an_lru_cache_hit_on_a_key_holding_the_value_is_refused(route, transform):
    stiffness.cache_clear()
    Model.term.cache_clear()
    assert energy(1.3) == pytest.approx(0.169)  # the usual workflow: evaluate first
    assert Model(1.3).term(3) == pytest.approx(3.9)
    with force_route(route):
        for f in (energy, lambda w: Model(w).term(3)):
            for _ in range(2):
                with pytest.raises(MissingRuleError, match="lru_cache"):
                    transform(f)(1.3)


class Needs:
    """Every attribute read requires ``w`` to exist (a proxy checking its target first)."""

    def __init__(self, w):
        self.w = w

    def __getattribute__(self, name):
        object.__getattribute__(self, "w")
        return object.__getattribute__(self, name)


class Frozen:
    def __init__(self, w):
        object.__setattr__(self, "w", w)

    def __getattribute__(self, name):
        v = object.__getattribute__(self, "w")
        return v * 2.0 if name == "double" else object.__getattribute__(self, name)


LOG: list[str] = []


class Logged:
    def __init__(self, w):
        self.w = w

    def __getattribute__(self, name):
        LOG.append(name)
        return object.__getattribute__(self, name)


@ROUTES
def test_a_class_with_its_own_getattribute(route):
    cases = [(lambda w: Needs(w).w * 3.0, 3.0), (lambda w: Frozen(w).double, 2.0),
             (lambda w: Frozen(w).w * 3.0, 3.0)]
    with force_route(route):
        for f, want in cases:
            for _ in range(2):
                assert derivative(f, 0.7) == pytest.approx(want)
                assert jvp(f, (0.7,), (1.0,))[1] == pytest.approx(want)
                assert jacfwd(f)(0.7) == pytest.approx(want)
                assert grad(f)(0.7) == pytest.approx(want)
                assert jacrev(f)(0.7) == pytest.approx(want)


@ROUTES
def test_the_machinery_reads_no_class_through_getattribute(route):
    def f(w):
        return Logged(w).w * 3.0

    LOG.clear()
    f(0.7)
    native = list(LOG)
    assert native == ["w"]
    with force_route(route):
        for transform in (lambda: derivative(f, 0.7), lambda: grad(f)(0.7)):
            for _ in range(2):
                LOG.clear()
                assert transform() == pytest.approx(3.0)
                assert "__class__" not in LOG
