"""The dual route (forward-dual) on the constructs users write scalar code with: containers
and objects the run creates, comprehensions, methods and properties, named tuples, starred
calls, NumPy arrays read element by element, and lists and dicts as arguments.  Each result is
checked against finite differences and the reference route, on a first and a repeated call,
and ``explain`` must show the dual route ran the function; writes into anything that existed
before the run must stop the route before they happen (the effect happens once)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import numpy as np
import pytest

from overdub_ad import D, explain, jacfwd, jvp
from overdub_ad.testing import REFERENCE, force_route
from tests.conftest import fd


class Model:
    def __init__(self, a, b):
        self.a = a
        self.b = b
        self.history = []

    @property
    def ratio(self):
        return self.a / self.b

    def step(self, x):
        y = self.a * x + self.ratio
        self.history.append(y)
        return y


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: Any
    b: Any = 2.0


class Pair(NamedTuple):
    u: Any
    v: Any


def comprehensions(x):
    xs = [x * k for k in range(1, 5) if k != 2]
    squares = {k: v * v for k, v in enumerate(xs)}
    nested = [a * b for a in xs for b in (x, 1.0)]
    return sum(xs) + squares[1] + max(nested) + sum(v for v in xs) + tuple(v for v in xs)[1]


def fresh_containers(x):
    out = []
    for k in range(3):
        out.append(x ** k)
    d = {"a": x}
    d["b"] = d["a"] * 2.0
    d["a"] += out[-1]
    out[0] = d["b"]
    first, _ = (out[0], 0.0)
    return out[0] + out[1] + d["a"] + first + min(out) + len(d)


def objects(x):
    m = Model(x, 3.0)
    y = m.step(x) + m.step(2.0)
    f = Frozen(x * x)
    p = Pair(x, f.a)
    p2 = p._replace(u=1.0) if False else Pair(*p)
    return y + m.history[0] + f.a * f.b + p.u * p.v + p2[1] + m.ratio


def starred(x):
    def three(a, b, c):
        return a * b - c
    args = (x, 2.0)
    return three(*args, x) + three(*[x, x], *(1.0,))


def array_elements(p):
    a, b, c = p
    return p[0] * p[1] - math.sin(p[2]) + a * b * c + len(p)


def list_and_dict(q, w):
    return q[0] * w["k"] + sum(v for v in q) + w["j"] * q[-1]


SCALAR = [comprehensions, fresh_containers, objects, starred]


def _on_dual(api, f, *args):
    report = explain(api, f, *args)
    assert report.ran and set(report.ran) == {"forward-dual"}, str(report)
    return report.result


@pytest.mark.default_routes
@pytest.mark.parametrize("f", SCALAR, ids=lambda f: f.__name__)
@pytest.mark.parametrize("x", [0.7, 1.9])
def test_constructs_run_on_the_dual_route_and_agree(f, x):
    for _ in range(2):  # first and repeated calls
        value, tangent = _on_dual(jvp, f, (x,), (1.0,))
        with force_route(REFERENCE):
            want_value, want_tangent = jvp(f, (x,), (1.0,))
        assert value == pytest.approx(want_value, rel=1e-14)
        assert tangent == pytest.approx(want_tangent, rel=1e-12)
        assert tangent == pytest.approx(fd(f, x), rel=1e-6)


@pytest.mark.default_routes
def test_arrays_lists_and_dicts_as_arguments():
    p = np.array([1.5, -0.5, 0.25])
    dp = np.array([0.3, 1.0, -2.0])
    value, tangent = _on_dual(jvp, array_elements, (p,), (dp,))
    with force_route(REFERENCE):
        want = jvp(array_elements, (p,), (dp,))
    assert value == pytest.approx(want[0], rel=1e-14)
    assert tangent == pytest.approx(want[1], rel=1e-12)
    assert tangent == pytest.approx(fd(array_elements, p) @ dp, rel=1e-6)
    jac = _on_dual(jacfwd, array_elements, p)                   # a batch of directions
    np.testing.assert_allclose(jac, fd(array_elements, p), rtol=1e-6)
    q, w = [1.0, 2.0, 3.0], {"k": 0.5, "j": -1.5}
    dq, dw = [1.0, 0.0, -1.0], {"k": 2.0, "j": 0.25}
    got = _on_dual(jvp, list_and_dict, (q, w), (dq, dw))
    with force_route(REFERENCE):
        want = jvp(list_and_dict, (q, w), (dq, dw))
    assert got[1] == pytest.approx(want[1], rel=1e-12)
    assert got[1] == pytest.approx(1.0 * 0.5 + 1.0 * 2.0 + 0.0 + 0.25 * 3.0 - 1.5 * -1.0)
    np.testing.assert_allclose(_on_dual(jacfwd, lambda t: list_and_dict(list(t), w),
                                        (1.0, 2.0, 3.0)),
                               [0.5 + 1.0, 1.0, 1.0 - 1.5], rtol=1e-12)


@pytest.mark.default_routes
def test_nested_derivatives_through_objects_and_lists():
    def inner(x):
        return D(lambda y: Model(x, y).step(y) * sum([x * y, y]), 2.0)
    got = _on_dual(D, inner, 1.3)
    with force_route(REFERENCE):
        want = D(inner, 1.3)
    assert got == pytest.approx(want, rel=1e-12)
    assert got == pytest.approx(fd(inner, 1.3), rel=1e-6)


LOG: list[Any] = []


class Holder:
    def __init__(self):
        self.value = 0.0


HOLDER = Holder()


def appends_to_a_global(x):
    y = [x * 3.0 for _ in range(2)]
    LOG.append(y[0])
    return y[1] * x


def writes_into_its_argument(x, out):
    out["y"] = x * x
    return out["y"] * x


def writes_an_old_object(x):
    HOLDER.value = x * 2.0
    return HOLDER.value * x


@pytest.mark.default_routes
def test_writes_into_what_existed_before_the_run_stop_it_before_the_write():
    LOG.clear()
    report = explain(D, appends_to_a_global, 2.0)
    assert report.result == 12.0 and LOG == [6.0], str(report)
    assert "list.append on a list that existed before the run" in str(report)
    box: dict[str, Any] = {}
    report = explain(jvp, writes_into_its_argument, (2.0, box), (1.0, {}))
    assert report.result[1] == pytest.approx(12.0) and "existed before the run" in str(report)
    report = explain(D, writes_an_old_object, 1.5)
    assert report.result == pytest.approx(6.0) and "existed before the run" in str(report)
    assert HOLDER.value == 3.0
    # a stop is remembered per function, defaults and argument classes
    LOG.clear()
    assert "stopped on an earlier call" in str(explain(D, appends_to_a_global, 2.0))
    assert LOG == [6.0]
