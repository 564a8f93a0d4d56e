"""Outside tester, round 16 (report h98, sections 2 and 5): Python code that C code runs
natively -- the function behind ``functools.lru_cache``, a class's ``__float__`` called by
``math.fsum``, ``np.float64``, ``np.array(..., dtype=float)``, a float array's item
assignment -- reading a differentiated value that an object given to it holds (an
attribute, a list or dict the object holds).  The core keeps such values aside (the object
holds the plain number), so that code read a plain number: forward mode and the reference
route returned 0.  Never a silent zero: every API on every route raises ``MissingRuleError``
(docs/ad.md), and the exemptions (``round``, ``math.isclose``) stay exempt on every route."""

from __future__ import annotations

import functools
import math
import statistics

import numpy as np
import pytest

from overdub_ad import (MissingRuleError, derivative, grad, hessian, hvp, jacfwd, jacrev,
                        jvp)
from overdub_ad.testing import force_route

# (each test runs on both routes itself: nothing for CI's reference-route pass to add)
pytestmark = pytest.mark.every_route

ROUTES = [None, "reference"]


def _apis(f):
    """Every API on ``f`` at 0.7 (each call must raise for the cases below)."""
    return [
        lambda: grad(f)(0.7),
        lambda: derivative(f, 0.7),
        lambda: jvp(f, (0.7,), (1.0,)),
        lambda: jacfwd(f)(0.7),
        lambda: jacrev(f)(0.7),
        lambda: hessian(f)(0.7),
        lambda: hvp(f, 0.7, 1.0),
    ]


class Body:
    def __init__(self, w):
        self.w = w

    def __float__(self):
        return self.w * 2.0


class Items:
    def __init__(self, w):
        self.items = [w]

    def __float__(self):
        return self.items[0] * 2.0


class Keyed:
    def __init__(self, w):
        self.d = {"w": w}

    def __float__(self):
        return self.d["w"] * 2.0


class Plain:
    def __init__(self, w):
        self.w = w

    def __float__(self):
        return self.w  # (the value itself, no arithmetic)


class Rounded:
    def __init__(self, w):
        self.w = w

    def __float__(self):
        return self.w * 2.0

    def __round__(self, n=None):
        return round(self.w * 2.0, n)


class Model:
    def __init__(self, w):
        self.w = w

    @functools.lru_cache(maxsize=None)  # noqa: B019 (the case reported)
    def term(self, i):
        return self.w * i


@functools.lru_cache(maxsize=None)
def term_of(m, i):
    return m.w * i


class Stiff:
    def __init__(self, k):
        self.k = k

    @property
    @functools.lru_cache(maxsize=None)  # noqa: B019 (the case reported)
    def matrix(self):
        return self.k * np.eye(2)


def _stored(w):
    a = np.zeros(2)
    a[0] = Body(w)
    return a[0]


def _stored_by_method(w):
    a = np.zeros(2)
    a.__setitem__(0, Body(w))
    return a[0]


NATIVE = {  # each would be 0.0 if the value were read as a plain number
    "fsum": lambda w: math.fsum([Body(w)]),
    "fsum_list_attr": lambda w: math.fsum([Items(w)]),
    "fsum_dict_attr": lambda w: math.fsum([Keyed(w)]),
    "fsum_plain_float": lambda w: math.fsum([Plain(w)]),
    "fmean": lambda w: statistics.fmean([Body(w), Body(w)]),
    "dist": lambda w: math.dist((Body(w),), (0.0,)),
    "np_float64": lambda w: np.float64(Body(w)) + 0.0,
    "np_array_float": lambda w: np.array([Body(w)], dtype=float)[0],
    "np_asarray_float": lambda w: np.sum(np.asarray([Body(w), Body(w)], dtype=np.float64)),
    "array_setitem": _stored,
    "array_setitem_method": _stored_by_method,
    "lru_method": lambda w: Model(w).term(3),
    "lru_object_argument": lambda w: term_of(Model(w), 3),
    "lru_property": lambda k: np.trace(Stiff(k).matrix),
}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", sorted(NATIVE))
def test_native_reads_raise_on_every_api(route, name):
    f = NATIVE[name]
    with force_route(route):
        for call in _apis(f):
            with pytest.raises(MissingRuleError):
                call()


@pytest.mark.parametrize("route", ROUTES)
def test_the_message_names_the_c_function_and_the_method(route):
    with force_route(route):
        for api in (grad, jacfwd):
            with pytest.raises(MissingRuleError, match=r"math\.fsum.*Body.*__float__"):
                api(lambda w: math.fsum([Body(w)]))(0.7)
            with pytest.raises(MissingRuleError, match=r"term_of.*lru_cache"):
                api(lambda w: term_of(Model(w), 3))(0.7)


@pytest.mark.parametrize("route", ROUTES)
def test_followed_conversions_still_differentiate(route):
    """``float(obj)``, ``math.sin(obj)``, ``complex(obj)`` run the method through the context
    (docs/ad.md): derivatives, not errors."""
    cases = [
        (lambda w: float(Body(w)), 2.0),
        (lambda w: math.sin(Body(w)), 2 * math.cos(1.4)),
        (lambda w: complex(Body(w)).real, 2.0),
        (lambda w: math.fsum([float(Body(w)), w]), 3.0),
        (lambda w: np.float64(float(Body(w))) * 1.0, 2.0),
        (lambda w: math.fsum([Body(0.5)]) * w, 1.0),  # (an object holding a constant)
        (lambda w: term_of(Model(0.5), 3) * w, 1.5),
    ]
    with force_route(route):
        for f, want in cases:
            for api in (grad, jacfwd, jacrev):
                assert api(f)(0.7) == pytest.approx(want)
            assert derivative(f, 0.7) == pytest.approx(want)


@pytest.mark.parametrize("route", ROUTES)
def test_exempt_results_are_constants_on_every_route(route):
    """Section 5: ``round(obj, 3)`` (its ``__round__``) and ``math.isclose(obj, ...)`` (its
    ``__float__``) are exemptions (docs/ad.md): a constant on every route and mode; the
    default route's reverse mode raised."""
    rounded = lambda w: round(Rounded(w), 3) * w  # noqa: E731
    close = lambda w: w * math.isclose(Rounded(w), 1.4)  # noqa: E731
    with force_route(route):
        for api in (grad, jacfwd, jacrev):
            assert api(rounded)(0.7) == pytest.approx(1.4)
            assert api(close)(0.7) == pytest.approx(1.0)
        assert derivative(rounded, 0.7) == pytest.approx(1.4)
        assert derivative(close, 0.7) == pytest.approx(1.0)
        assert hessian(rounded)(0.7) == pytest.approx(0.0)
        assert hvp(close, 0.7, 1.0) == pytest.approx(0.0)


@functools.lru_cache(maxsize=None)
def _stiffness(p):
    return p.k * np.array([[2.0, -1.0], [-1.0, 2.0]])


class _Params:  # hashed by identity: a fresh object never hits the cache
    def __init__(self, k):
        self.k = k


def _energy(k):
    u = np.array([0.1, 0.4])
    return 0.5 * u @ _stiffness(_Params(k)) @ u


@pytest.mark.parametrize("route", ROUTES)
def test_cached_setup_after_a_plain_evaluation(route):
    """The tester's workflow: evaluate once, then differentiate; each derivative raises (the
    cached function would read ``p.k`` as a plain number), and the plain value stays right."""
    assert _energy(1.3) == pytest.approx(0.169)
    with force_route(route):
        for call in _apis(_energy):
            with pytest.raises(MissingRuleError, match="lru_cache"):
                call()
    assert _energy(1.3) == pytest.approx(0.169)
