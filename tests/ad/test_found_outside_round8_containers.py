"""Wrong derivatives and errors found by the eighth outside tester (containers, evaluated text,
named tuples, user rules under hvp), kept fixed: every API, first and repeated calls, against
closed forms and finite differences.
"""

from __future__ import annotations

import collections
import fractions
import operator
import typing

import numpy as np
import pytest

from overdub import Tagged
from overdub_ad import (D, MissingRuleError, defjvp, defvjp, derivative, grad, hessian, hvp,
                        jacfwd, jvp)
from overdub_ad.testing import force_route, isolated_rules

_FIRST_ORDER = {"derivative": lambda f, x: derivative(f, x), "grad": lambda f, x: grad(f)(x),
                "jvp": lambda f, x: jvp(f, (x,), (1.0,))[1],
                "jacfwd": lambda f, x: float(jacfwd(f)(x))}


def _both_routes(check):
    for _ in range(2):  # first and repeated calls
        check()
        with force_route("reference"):
            check()


# -- keys stored in dict subclasses keep their derivative (OrderedDict, Counter, defaultdict...)

class _MyDict(dict):
    pass


_KINDS = {"OrderedDict": collections.OrderedDict, "defaultdict": lambda: collections.defaultdict(
    int), "Counter": collections.Counter, "subclass": _MyDict, "dict": dict}


@pytest.mark.parametrize("api", _FIRST_ORDER)
@pytest.mark.parametrize("kind", _KINDS)
def test_keys_of_dict_subclasses(kind, api):
    def f(x):
        d = _KINDS[kind]()
        d[x] = 1
        d[2 * x] = 3
        return sum(d) + min(d) + max(d)  # 3x + x + 2x
    _both_routes(lambda: _check(_FIRST_ORDER[api](f, 1.5), 6.0))


def test_counter_counts_differentiated_keys():
    def f(x):
        counts = collections.Counter()
        counts[x] += 1
        counts[x * x] += 1
        return sum(counts) + list(counts)[0]  # x + x^2 + x
    _both_routes(lambda: _check(derivative(f, 1.5), 2 + 2 * 1.5))
    _both_routes(lambda: _check(grad(f)(1.5), 2 + 2 * 1.5))


def test_sum_of_a_dict_is_of_its_keys():
    """Reverse mode took sum(d) for a sum of the values when those carried a derivative."""
    def f(x):
        d = {x: 7.0, 2.0: x * 3}
        return sum(d) + max(d) + min(d)  # (x + 2) + 2 + x
    for api in _FIRST_ORDER.values():
        _both_routes(lambda api=api: _check(api(f, 1.5), 2.0))


def test_an_ordered_dict_that_outlives_the_derivative_holds_plain_keys():
    kept = collections.OrderedDict()

    def f(x):
        kept[x] = x * x
        return sum(k * v for k, v in kept.items())
    for api in (grad, D):
        kept.clear()
        assert api(f)(2.0) == pytest.approx(12.0)
        assert [type(k) for k in kept] == [float] and 2.0 in kept


# -- accumulators built during the derivative are read as usual (not caches of earlier results)

def _defaultdict_accumulator(x):
    d = collections.defaultdict(float)
    d[x] += x
    return d[x]  # x


def _setdefault_accumulator(x):
    d = {}
    d.setdefault(x, 0.0)
    d[x] += x * x
    return d[x]  # x^2


def _histogram(x):
    seen = {}
    for k in (x, x, 2 * x):
        seen[k] = seen.get(k, 0.0) + k
    return sum(seen.values()) + sum(seen)  # (2x + 2x) + (x + 2x)


@pytest.mark.parametrize("f, slope", [(_defaultdict_accumulator, lambda x: 1.0),
                                      (_setdefault_accumulator, lambda x: 2 * x),
                                      (_histogram, lambda x: 7.0)])
@pytest.mark.parametrize("api", _FIRST_ORDER)
def test_accumulators_made_during_the_derivative(f, slope, api):
    _both_routes(lambda: _check(_FIRST_ORDER[api](f, 1.5), slope(1.5)))


def test_a_cache_from_an_earlier_derivative_still_raises():
    memo = {}

    def cube(x):
        if x in memo:
            return memo[x]
        memo[x] = r = x ** 3
        return r
    for api in (grad, D):
        memo.clear()
        assert api(cube)(2.0) == pytest.approx(12.0)
        with pytest.raises(MissingRuleError, match="differentiated key"):
            api(cube)(2.0)


# -- functions made by eval/exec read the namespace's differentiated values when called later

def _evaluated_lambda(x):
    h = eval("lambda t: t * x", {"x": x})
    return h(2.0)  # 2x


def _executed_def(x):
    ns = {"x": x}
    exec("def h(t):\n    return t * x\n", ns)
    return ns["h"](2.0)


def _executed_class(x):
    ns = {}
    ns["x"] = x
    exec("class C:\n    def twice(self):\n        return 2 * x\n", ns)
    return ns["C"]().twice()


@pytest.mark.parametrize("f", [_evaluated_lambda, _executed_def, _executed_class])
def test_functions_made_by_text_see_the_derivative(f):
    for api in _FIRST_ORDER.values():
        _both_routes(lambda api=api: _check(api(f, 1.0), 2.0))
    _check(D(D(lambda y: f(y) * y))(1.0), 4.0)


# -- named tuple subclasses on the fast forward route

class _Q(typing.NamedTuple):
    x: float
    y: float = 2.0


class _Q2(_Q):
    def total(self):
        return self.x * self.y


class _P(collections.namedtuple("_P", "a b")):
    __slots__ = ()

    @property
    def product(self):
        return self.a * self.b


class _R(collections.namedtuple("_R", "a b")):
    def __new__(cls, a, b):
        return super().__new__(cls, a * 2, b)


@pytest.mark.parametrize("f, slope", [
    (lambda x: _Q2(x, 3.0).total(), lambda x: 3.0), (lambda x: _Q2(x).total(), lambda x: 2.0),
    (lambda x: _P(x, x * x).product, lambda x: 3 * x * x), (lambda x: _R(x, 1.0).a, lambda x: 2.0)])
def test_named_tuple_subclasses(f, slope):
    for api in _FIRST_ORDER.values():
        _both_routes(lambda api=api: _check(api(f, 1.5), slope(1.5)))


# -- hvp's routes agree with the reference under a user rule for an operator

@pytest.mark.parametrize("op", ["mul", "add"])
@pytest.mark.parametrize("case", ["square", "cube", "quotient", "array"])
def test_hvp_routes_follow_a_user_rule_for_an_operator(op, case):
    f, x = {"square": (lambda x: x ** 2, 0.5), "cube": (lambda x: x ** 3, 0.5),
            "quotient": (lambda x: x / (x + 2), 0.5),
            "array": (lambda x: np.sum(x ** 2 + x / (x + 2)), np.array([0.5, 1.0]))}[case]
    v = np.ones_like(x) if isinstance(x, np.ndarray) else 1.0
    fn = getattr(operator, op)
    with isolated_rules():
        if op == "mul":
            defjvp(fn, lambda d, o, a, b: 3 * d * b, lambda d, o, a, b: 3 * a * d)
            defvjp(fn, lambda c, o, a, b: 3 * c * b, lambda c, o, a, b: 3 * a * c)
        else:
            defjvp(fn, lambda d, o, a, b: 3 * d, lambda d, o, a, b: 3 * d)
            defvjp(fn, lambda c, o, a, b: 3 * c, lambda c, o, a, b: 3 * c)
        for _ in range(2):
            with force_route("reference"):
                want = hvp(f, x, v)
            np.testing.assert_allclose(hvp(f, x, v), want, rtol=1e-12)


# -- a derivative that raises leaves no tagged value behind

@pytest.mark.parametrize("api", [grad, D])
def test_containers_are_plain_after_a_derivative_raises(api):
    cache, items = {}, []

    def f(x):
        cache["a"] = x * x
        cache[x] = 1.0
        items.append(3 * x)
        return float(fractions.Fraction(x))  # no rule: MissingRuleError
    with pytest.raises(MissingRuleError):
        api(f)(2.0)
    assert not any(type(v) is Tagged for v in (*cache, *cache.values(), *items))
    assert cache["a"] + 1 == 5.0 and 2.0 in cache and items[0] == 6.0


def _check(got, want):
    assert float(np.squeeze(got)) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("f", [lambda x: max([(x * x, "a"), (0.1, "b")])[0],
                               lambda x: max(zip([x * x, 0.1], ["a", "b"]))[0]])
def test_hvp_through_tuples_holding_labels(f):
    """hvp on the tape seeded a direction for every item of a list, labels included (TypeError:
    jvp cannot differentiate with respect to a str)."""
    _both_routes(lambda: _check(hvp(f, 0.7, 1.0), 2.0))
    _check(hessian(f)(0.7), 2.0)
