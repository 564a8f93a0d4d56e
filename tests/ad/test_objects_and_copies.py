"""Objects, copies and custom rules, in both modes: derivatives that came out silently wrong.

Each case is checked against central finite differences with ``grad`` (reverse mode) and
``derivative`` (forward mode), on a first and a repeated call, and, where it has a second
derivative, ``hessian`` and ``hvp`` against finite differences of the derivative.  Cases are
written as a ``def``, a lambda or a method where Python allows it.

The roots fixed: ``a += x`` on an object runs Python's augmented-assignment protocol
(``__iadd__`` first, then ``__add__``/``__radd__``, NotImplemented falling through); dicts read
natively (``copy.copy``'s ``dict.copy``, ``y.__dict__.update(state)``, ``dict(pairs)``,
``f(**d)``, ``{**d}``, ``d | e``) get the metadata the core keeps for their values; an instance
``__dict__`` is read through that metadata in reverse mode too; a dict subclass that stores as
dict does (``defaultdict``) stores differentiated values; an array's operator methods called by
name (``v.__imul__(2.0)``) are the operators; ``checkpoint`` of a closure over a differentiated
value differentiates through it; reverse mode uses a ``custom_jvp`` rule (transposed), and
forward mode enters a function that has only reverse rules.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import math

import numpy as np
import pytest

from overdub_ad import (MissingRuleError, checkpoint, custom_jvp, custom_vjp, defvjp, derivative,
                        grad, hessian, hvp, jacfwd, jacrev)
from overdub_ad.testing import isolated_rules
from tests.conftest import fd

POINTS = (0.5, -1.3)


def check_scalar(f, second=True):
    """grad and derivative of scalar ``f`` against finite differences, twice each; the second
    derivative by hessian and hvp against finite differences of the derivative."""
    for x in POINTS:
        want = fd(f, x)
        for _ in range(2):
            assert grad(f)(x) == pytest.approx(want, rel=1e-6, abs=1e-6)
            assert derivative(f)(x) == pytest.approx(want, rel=1e-6, abs=1e-6)
        if second:
            want2 = fd(derivative(f), x)
            assert hessian(f)(x) == pytest.approx(want2, rel=1e-5, abs=1e-5)
            assert hvp(f, x, 1.0) == pytest.approx(want2, rel=1e-5, abs=1e-5)


# -- augmented assignment on objects ------------------------------------------------------

class Acc:
    def __init__(self, v):
        self.v = v

    def __iadd__(self, o):
        self.v += o * o
        return self

    def __imul__(self, o):
        self.v = self.v * o
        return self


class AccWithAdd(Acc):
    def __add__(self, o):  # a different result: += must not call it
        return AccWithAdd(self.v + 100.0 * o)


class DeclinesInPlace:
    def __init__(self, v):
        self.v = v

    def __iadd__(self, o):
        return NotImplemented

    def __add__(self, o):
        return DeclinesInPlace(self.v + 3.0 * o)


class OnlyReflected:
    def __init__(self, v):
        self.v = v

    def __radd__(self, o):
        return OnlyReflected(self.v + 5.0 * o)


class HoldsArray:
    def __init__(self, a):
        self.a = a

    def __isub__(self, o):
        self.a = self.a - o * o
        return self


def acc_add_mul(x):
    a = Acc(1.0)
    a += x
    a *= x
    return a.v


def acc_with_add(x):
    a = AccWithAdd(1.0)
    a += x
    return a.v


def declines(x):
    a = DeclinesInPlace(1.0)
    a += x
    return a.v


def reflected(x):
    a = 2.0
    a += OnlyReflected(x)  # float's += gives up: the reflected method runs
    return a.v


def holds_array(x):
    a = HoldsArray(np.array([1.0, 2.0, 3.0]))
    a -= x
    return np.sum(a.a ** 2)


def alias(x):
    a = Acc(x)
    b = a
    for _ in range(3):
        b += x
    return a.v


class Model:
    def __init__(self):
        self.acc = Acc(0.5)

    def step(self, x):
        self.acc += x
        return self.acc.v * x


@pytest.mark.parametrize("f", [
    acc_add_mul, acc_with_add, declines, reflected, holds_array, alias,
    lambda x: Model().step(x)], ids=["iadd_imul", "iadd_beside_add", "not_implemented",
                                    "reflected", "array_attribute", "alias", "method"])
def test_augmented_assignment_follows_python(f):
    check_scalar(f)


def test_augmented_assignment_values():
    assert acc_with_add(0.5) == 1.25  # __iadd__, not __add__
    assert declines(0.5) == 2.5
    assert reflected(0.5) == 10.5
    assert holds_array(0.5) == pytest.approx(0.75 ** 2 + 1.75 ** 2 + 2.75 ** 2)


# -- copies --------------------------------------------------------------------------------

class State:
    def __init__(self, x, v):
        self.x, self.v = x, v


@dataclasses.dataclass
class Point:
    x: float
    y: float


def stored(t):
    """A dict whose value was written under the derivative (the core keeps its metadata)."""
    s = {"x": 1.0}
    s["x"] = s["x"] + t * t
    return s


def via_instance_dict(t):
    s = State(t, t * t)
    y = State(0.0, 0.0)
    y.__dict__.update(s.__dict__)
    return y.v * y.x


def reads_vars(t):
    o = State(0.0, 0.0)
    o.a = t * t * t
    return o.__dict__["a"] + vars(o)["a"] * t


def keyword_unpacking(t):
    def scaled(x, k=1.0):
        return x * k
    return scaled(**stored(t), k=t)


def counts(t):
    d = collections.defaultdict(float)
    for k in ("a", "b", "a"):
        d[k] += t * t
    d["c"] = t
    return d["a"] * d["c"] + d["b"]


def written_buffer_copies(t):
    buf = np.zeros(2)
    buf[0] = t * t
    return copy.copy(buf)[0] + 2.0 * copy.deepcopy(buf)[0]


def appended_list_copies(t):
    items = []
    items.append(t * t)
    return copy.copy(items)[0] * copy.deepcopy(items)[0]


class Scaled(State):
    def scaled_copy(self, t):
        other = copy.copy(self)
        other.v = other.v * t
        return other


COPIES = {
    "written_buffer": written_buffer_copies,
    "appended_list": appended_list_copies,
    "method_copying_self": lambda t: Scaled(t, t * t).scaled_copy(t).v,
    "copy_object": lambda t: copy.copy(State(t, t * t)).v,
    "deepcopy_object": lambda t: copy.deepcopy(State(t, t * t)).v * t,
    "copy_array": lambda t: np.sum(copy.copy(np.array([t * t, t])) ** 2),
    "deepcopy_array": lambda t: np.sum(copy.deepcopy(np.array([t * t, t])) ** 2),
    "copy_list": lambda t: copy.copy([t, t * t])[1] * t,
    "deepcopy_list_of_arrays": lambda t: np.sum(copy.deepcopy([np.array([t * t]), t])[0]),
    "deepcopy_dict_of_arrays": lambda t: np.sum(copy.deepcopy({"a": np.array([t * t])})["a"]),
    "copy_dict": lambda t: copy.copy(stored(t))["x"] * t,
    "deepcopy_dict": lambda t: copy.deepcopy(stored(t))["x"] * t,
    "dataclass_replace": lambda t: dataclasses.replace(Point(t, t * t), x=0.0).y,
    "dataclass_asdict": lambda t: dataclasses.asdict(Point(t, t * t))["y"] * t,
    "dict_display_unpacking": lambda t: {**stored(t), "z": t}["x"] * t,
    "dict_union": lambda t: (stored(t) | {"y": 2.0})["x"] * t,
    "dict_union_right": lambda t: ({"x": 2.0} | stored(t))["x"] * t,
    "dict_with_keywords": lambda t: dict(stored(t), y=t)["x"] * dict(stored(t), y=t)["y"],
    "dict_of_dict": lambda t: dict(stored(t))["x"] * t,
    "instance_dict_update": via_instance_dict,
    "instance_dict_read": reads_vars,
    "keyword_unpacking": keyword_unpacking,
    "defaultdict_counts": counts,
}


@pytest.mark.parametrize("f", list(COPIES.values()), ids=list(COPIES))
def test_copies_keep_derivatives(f):
    check_scalar(f)


def test_dict_in_place_union_keeps_derivatives():
    def f(t):
        d = {"y": 2.0}
        d |= stored(t)
        return d["x"] * d["y"]
    check_scalar(f)


def test_defaultdict_outside_holds_plain_values():
    totals = collections.defaultdict(float)

    def f(t):
        totals["k"] += t * t
        return totals["k"]

    assert grad(f)(0.5) == pytest.approx(1.0)
    assert type(totals["k"]) is float and totals["k"] == 0.25


def test_operator_methods_of_arrays_called_by_name():
    x0 = np.array([0.3, -1.2, 2.5, 0.7, 1.1])

    def scaled_view(x):
        y = x * 1.0
        y.reshape(5)[::2].__imul__(2.0)
        return np.sum(y ** 2)

    def methods(x):
        return np.sum(x.__mul__(x) + x.__rsub__(3.0) ** 2 + x.__rtruediv__(1.0)
                      + x.__pow__(3))

    for f in (scaled_view, methods):
        want = np.array([fd(lambda s, i=i: f(x0 + s * np.eye(5)[i]), 0.0) for i in range(5)])
        for _ in range(2):
            assert np.allclose(grad(f)(x0), want, rtol=1e-6)
            assert np.allclose(jacfwd(f)(x0), want, rtol=1e-6)


# -- checkpoint, custom_jvp, reverse-only rules ---------------------------------------------

def test_checkpoint_of_a_closure_over_the_differentiated_argument():
    check_scalar(lambda w: checkpoint(lambda h: w * h * h)(w))

    def with_default(w):
        def layer(h, s=w):
            return s * np.sin(h)
        return checkpoint(layer)(w)
    check_scalar(with_default)


def test_custom_vjp_reading_a_differentiated_closure_raises():
    def f(w, h):
        @custom_vjp
        def scaled(h):
            return w * h
        scaled.defvjp(lambda h: (w * h, None), lambda _, ct: (ct * w,))
        return scaled(h)
    with pytest.raises(MissingRuleError, match="closure"):
        grad(lambda w: f(w, w))(3.0)
    with pytest.raises(MissingRuleError, match="closure"):  # (JAX raises too: the rule
        grad(lambda w: f(w, 2.0))(3.0)   # would be skipped for its body, docs/ad.md)


@custom_jvp
def tenfold(x):
    return x * x


tenfold.defjvp(lambda p, t: (tenfold(p[0]), 10.0 * p[0] * t[0]))  # not the body's 2x


@custom_jvp
def softplus(x):
    return np.log1p(np.exp(x))


@softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return softplus(x), dx / (1 + np.exp(-x))


@custom_jvp
def mixed(x, y):
    return x * y


mixed.defjvp(lambda p, t: (mixed(*p), p[1] * t[0] + 3.0 * p[0] * t[1]))


def test_reverse_mode_uses_the_custom_jvp_rule():
    for x in POINTS:
        for _ in range(2):
            assert grad(tenfold)(x) == derivative(tenfold)(x) == pytest.approx(10.0 * x)
            assert hessian(tenfold)(x) == pytest.approx(10.0)
            assert hvp(tenfold, x, 1.0) == pytest.approx(10.0)
            assert grad(lambda v: tenfold(v) * v)(x) == pytest.approx(11.0 * x * x)
    with np.errstate(over="ignore"):
        assert grad(softplus)(1000.0) == derivative(softplus)(1000.0) == 1.0
    check_scalar(softplus)
    assert grad(mixed, argnums=(0, 1))(2.0, 5.0) == pytest.approx((5.0, 6.0))
    a = np.array([0.4, -0.9])
    assert np.allclose(jacrev(lambda v: mixed(v[0], v[1]))(a), [-0.9, 1.2])
    assert np.allclose(jacrev(lambda v: mixed(v, v))(a), jacfwd(lambda v: mixed(v, v))(a))


def test_forward_mode_enters_a_function_with_reverse_rules_only():
    def cube(x):
        return x ** 3

    with isolated_rules():
        defvjp(cube, lambda ct, out, x: 3.0 * x * x * ct)
        check_scalar(lambda x: cube(x) + math.sin(x))
        assert jacfwd(cube)(np.array([1.0, 2.0])) == pytest.approx(np.diag([3.0, 12.0]))


# -- dicts keyed by a differentiated value ---------------------------------------------------

def keyed_by_x(x):
    d = {}
    d[x] = x * x
    return d[x] + {x: np.sin(x)}[x]


def test_dict_keyed_by_the_differentiated_value():
    check_scalar(keyed_by_x)
    for x in POINTS:
        want = fd(derivative(keyed_by_x), x)
        assert grad(grad(keyed_by_x))(x) == pytest.approx(want, rel=1e-5)
        assert derivative(derivative(keyed_by_x))(x) == pytest.approx(want, rel=1e-5)


@pytest.mark.parametrize("api", [grad, derivative, hessian], ids=["grad", "derivative", "hessian"])
def test_a_memo_read_back_in_a_later_derivative_raises(api):
    memo = {}

    def cube(x):
        if x in memo:
            return memo[x]
        memo[x] = r = x ** 3
        return r

    assert api(cube)(2.0) == pytest.approx(12.0)  # (3 x**2 and 6 x are both 12 at 2)
    assert all(type(k) is float and type(v) is float for k, v in memo.items())  # no leak
    with pytest.raises(MissingRuleError, match="differentiated key"):
        api(cube)(2.0)
    memo.clear()
    assert api(cube)(2.0) == pytest.approx(12.0)
