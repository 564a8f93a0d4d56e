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
from overdub_ad import (D, MissingRuleError, checkpoint, defjvp, defvjp, derivative, grad,
                        hessian, hvp, jacfwd, jacrev, jvp)
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


# -- checkpoint (a custom_vjp) given a dict of parameters, called in a chain ---------------------

_W = np.array([[0.5, -0.2], [0.1, 0.3]])


def _cell(h, p):
    return np.tanh(h @ p["W"] + p["b"])


@pytest.mark.parametrize("steps, h0", [(2, 0.0), (2, 1.0), (5, 0.5)])
def test_checkpoint_with_a_dict_of_parameters(steps, h0):
    """A dict argument of a checkpointed (custom_vjp) function had no nodes: its cotangent was
    never asked for, and a chain of calls gave zeros (both routes)."""
    def checkpointed(p):
        h = np.full(2, h0)
        for _ in range(steps):
            h = checkpoint(_cell)(h, p)
        return np.sum(h ** 2)

    def plain(p):
        h = np.full(2, h0)
        for _ in range(steps):
            h = _cell(h, p)
        return np.sum(h ** 2)
    p = {"W": _W, "b": np.array([1.0, -0.5])}
    want = grad(plain)(p)

    def check():
        got = grad(checkpointed)(p)
        for key in p:
            np.testing.assert_allclose(got[key], want[key], rtol=1e-12, atol=1e-15)
    _both_routes(check)
    flat = np.concatenate([_W.ravel(), [1.0, -0.5]])

    def unpacked(v):
        return checkpointed({"W": v[:4].reshape(2, 2), "b": v[4:]})
    np.testing.assert_allclose(grad(unpacked)(flat), np.concatenate(
        [want["W"].ravel(), want["b"]]), rtol=1e-12)
    np.testing.assert_allclose(hvp(unpacked, flat, np.ones(6)),
                               hvp(lambda v: plain({"W": v[:4].reshape(2, 2), "b": v[4:]}),
                                   flat, np.ones(6)), rtol=1e-10, atol=1e-12)


# -- jacfwd and hessian over pytrees: one pass for all the leaves; fixed list arguments ----------

def test_jacfwd_of_a_pytree_takes_every_column_from_one_call():
    """jacfwd (and hessian) pushed the directions of each leaf of a dict in a pass of its own,
    so a function with state gave each column from a different call (a wrong Jacobian against
    jacrev's); all the leaves' directions now go in one pass."""
    rng = np.random.default_rng(0)
    xs = np.linspace(-1, 1, 6)
    calls = []

    def loss(p):
        calls.append(1)
        z = rng.normal(size=6)
        return np.sum((p["w"] * xs + 0.1 * z) ** 2) + np.sum(p["b"] ** 2 * z[:2])
    p = {"w": 0.5, "b": np.array([0.1, -0.2])}
    state = rng.bit_generator.state
    want = jacrev(loss)(p)
    rng.bit_generator.state = state
    calls.clear()
    got = jacfwd(loss)(p)
    assert len(calls) == 1
    np.testing.assert_allclose(got["w"], want["w"], rtol=1e-12)
    np.testing.assert_allclose(got["b"], want["b"], rtol=1e-12)


@pytest.mark.parametrize("chunk", [None, 1, 2])
def test_jacfwd_of_a_pytree_in_chunks(chunk):
    def f(p):
        return {"y": p["a"] * p["b"], "z": p["a"] ** 2 + p["c"][0]}
    p = {"a": np.array([1.0, 2.0]), "b": 3.0, "c": [np.array([0.5, 1.5])]}
    got = jacfwd(f, chunk=chunk)(p)
    want = jacrev(f)(p)
    for out in ("y", "z"):
        for key in ("a", "b"):
            np.testing.assert_allclose(got[out][key], want[out][key], rtol=1e-12)
        np.testing.assert_allclose(got[out]["c"][0], want[out]["c"][0], rtol=1e-12)


def test_fixed_list_arguments_and_pytree_argnums():
    """A list argument held fixed (labels) broke jacfwd and hessian (a tangent structure
    mismatch), and a tuple of argnums over a pytree argument paired the wrong Jacobians (a
    derivative lost)."""
    def loss(w, labels):
        return np.sum(w ** 2) * len(labels)
    np.testing.assert_allclose(hessian(loss)(np.ones(2), [0, 1]), 4 * np.eye(2))
    np.testing.assert_allclose(jacfwd(loss)(np.ones(2), [0, 1, 1]), [6.0, 6.0])

    def f(a, b):
        return np.sum(a ** 2 * b[0]) + np.sum(b[1] ** 2)
    a, b = np.array([1.0, 2.0]), [np.array([1.0, 2.0]), np.array([0.5])]
    h = hessian(f, argnums=(0, 1))(a, b)
    want = jacrev(grad(f, argnums=(0, 1)), argnums=(0, 1))(a, b)
    np.testing.assert_allclose(h[0][0], want[0][0])
    np.testing.assert_allclose(h[0][1][0], want[0][1][0])
    np.testing.assert_allclose(h[1][1][1][1], want[1][1][1][1])
    assert float(np.squeeze(h[1][1][1][1])) == 2.0


def test_derivative_of_a_function_of_several_arguments_says_so():
    def unrolled(lr, w0, steps):
        return lr * w0 * steps
    with pytest.raises(TypeError, match=r"derivative\(.*unrolled\) is the derivative of a "
                                        r"function of one argument, called with 2"):
        derivative(unrolled)(0.1, 2.0)
