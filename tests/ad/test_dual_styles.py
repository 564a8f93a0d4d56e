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


def zipped(x):
    """zip and enumerate over tuples whose tangents the dual tracks, lists it made (values
    boxed), ranges and strings; consumed by loops, comprehensions and the C calls that move
    items; a list the loop extends while zipping it (zip reads it as it is then)."""
    t = (x, 2.0 * x, x * x)
    fresh = [x + 1.0, x - 1.0, 3.0]
    total = 0.0
    for a, b in zip(t, fresh):
        total += a * b
    total += sum(a * b * c for a, b, c in zip(t, fresh, range(1, 4)))
    for i, v in enumerate(t, 1):
        total += i * v
    total += sum([k * v for k, v in enumerate(t)])
    pairs = list(zip(t, "abc"))
    total += pairs[1][0] * len(pairs[2][1])
    total += dict(zip("pq", t))["q"] + sum(u * w for (u, w), z in zip(zip(t, t), fresh))
    grown = [x, 2.0]
    for a, b in zip(grown, (x, x, x, x)):
        if len(grown) < 4:
            grown.append(a * b)
        total += a - b
    return total + grown[-1]


class Slotted:
    __slots__ = ("a",)
    scale = 3.0

    def __init__(self, a):
        self.a = a

    @staticmethod
    def twice(v):
        return 2.0 * v

    @classmethod
    def made(cls, v):
        return cls(v)


class Plain:
    scale = 0.5

    def __init__(self, a):
        self.a = a
        self.own = self.twice  # a bound method in the instance dict

    def twice(self, v):
        return self.a * v

    @property
    def square(self):
        return self.a * self.a

    @property
    def biased(self, bias=1.0):  # (a getter with a default: called with its tangents)
        return self.a + bias


def attributes(x):
    """One attribute site read from objects of several classes in turn: instance attributes,
    slots, class constants, static and class methods, properties, named tuple fields with and
    without tangents tracked beside them."""
    objs = [Slotted(x), Plain(x * x)]
    objs += [objs[0].made(2.0), Plain(3.0)]
    total = 0.0
    for o in objs + objs:
        total += o.a * o.scale + o.twice(x)
    for o in (objs[1], objs[3], objs[1]):
        total += o.square + o.biased + o.own(x)
    for p in (Pair(x, 2.0), Pair(1.0, x), Pair(*[x, x])):
        total += p.u * p.v
    return total


def items(x):
    """Items of lists and dicts the run made, at int and str keys, negative indices, keys
    from a loop, and of a list argument."""
    xs = [x, x * x, 3.0, (x, 2.0)]
    d = {"a": x, 1: xs, "c": {"n": x * 3.0}}
    total = xs[0] * xs[-3] + xs[2] + xs[3][0] * xs[-1][1] + d[1][1] + d["c"]["n"]
    for k in ("a", "c"):
        v = d[k]
        total += v["n"] if k == "c" else v
    for i in range(3):
        total += xs[i] * d[1][i]
    return total


class Other(NamedTuple):
    a: Any
    b: Any
    c: Any = 0.5


def call_sites(x):
    """Call sites that see several callables in turn: closures (duals) called from the
    function's own body, named tuple classes, C functions of one float with rules (and the
    same one given an int, a NumPy float), appends to lists the run made and to one of an
    object it made."""
    def scaled(v, k):
        return v * k + x
    total = 0.0
    made = []
    m = Model(x, 2.0)
    for k, fn in enumerate((math.exp, math.sin, math.exp, math.sqrt, math.sin)):
        total += scaled(fn(x * k + 1.0), k)
        p = (Pair, Other, Pair)[k % 3](x, total)
        total += p[0] * p[1] + fn(k) + fn(np.float64(x))
        made.append(p)
        made.append(total * 0.5)
        m.history.append(p[0])
    made.append((x, x * x))
    return (total + made[1] + made[-1][1] + sum(m.history) + made[0][1] + made[2][2]
            + made[0].v * made[2].b + made[4].u)  # (fields read by name too)


SCALAR = [comprehensions, fresh_containers, objects, starred, zipped, attributes, items,
          call_sites]


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


class Changing:
    scale = 2.0

    def __init__(self, v):
        self.v = v


def reads_changing(x):
    return Changing(x).scale * x


@pytest.mark.default_routes
def test_what_a_site_recorded_holds_for_one_call_only():
    """A site records how a class's attribute reads, for the outermost call it ran in: a
    class changed between calls (its constant now a property) reads as it is then."""
    assert _on_dual(D, reads_changing, 3.0) == pytest.approx(2.0)
    Changing.scale = property(lambda self: math.exp(self.v))
    try:
        assert _on_dual(D, reads_changing, 3.0) == pytest.approx(math.exp(3.0) * 4.0)
    finally:
        Changing.scale = 2.0
    assert _on_dual(D, reads_changing, 3.0) == pytest.approx(2.0)


# -- small arrays of state (s + h * k), made from numbers -------------------------------------

def _rhs_array(s, p):
    return np.array([p[0] * (s[1] - s[0]), s[0] * (p[1] - s[2]) - s[1], s[0] * s[1] - p[2] * s[2]])


def array_state(p):
    """An RK4 step whose state is a NumPy array built from its components: array arithmetic
    and np.array of numbers with tangents run on the dual route."""
    s = np.array([1.0, 1.0, 1.0])
    for _ in range(3):
        k1 = _rhs_array(s, p)
        k2 = _rhs_array(s + 0.005 * k1, p)
        k3 = _rhs_array(s + 0.005 * k2, p)
        k4 = _rhs_array(s + 0.01 * k3, p)
        s = s + 0.01 / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return np.sum(s * s) + s[0]


def mixed_arrays(p):
    """Numbers, constants and arrays mixed: np.stack of scalars, a constant item, array
    operators both ways round, a NumPy function of an array and np.zeros."""
    a = np.stack([p[0], 2.0, p[1] * p[2]])
    b = np.array([1.0, p[0], 3.0]) / (1.0 + a * a)
    c = np.zeros(3) + np.exp(b) - 2.0 * a
    return np.sum(c * b) + np.dot(a, b) + np.array([p[2], p[2]])[1]


@pytest.mark.default_routes
@pytest.mark.parametrize("f", [array_state, mixed_arrays], ids=lambda f: f.__name__)
def test_small_arrays_made_from_numbers_run_on_the_dual_route(f):
    p = np.array([10.0, 28.0, 8.0 / 3.0]) if f is array_state else np.array([0.3, -1.2, 0.7])
    dp = np.array([0.5, -1.0, 2.0])
    for _ in range(2):  # first and repeated calls
        value, tangent = _on_dual(jvp, f, (p,), (dp,))
        with force_route(REFERENCE):
            want = jvp(f, (p,), (dp,))
        assert value == pytest.approx(want[0], rel=1e-14)
        assert tangent == pytest.approx(want[1], rel=1e-11)
        assert tangent == pytest.approx(fd(f, p) @ dp, rel=1e-6)
    # a batch of directions (jacfwd): the tangents behind the batch dimensions, on the dual
    # route through what broadcasts them (a reduction with an axis sends the rest to the
    # general mode)
    for _ in range(2):
        jac = jacfwd(f)(p)
        with force_route(REFERENCE):
            np.testing.assert_allclose(jac, jacfwd(f)(p), rtol=1e-11)
        np.testing.assert_allclose(jac, fd(f, p), rtol=1e-6)


def written_in_place(p):
    s = np.array([p[0], p[1]])
    s += np.array([1.0, p[0]])   # in place: the general mode follows the write
    return np.sum(s * s)


@pytest.mark.default_routes
def test_an_array_written_in_place_stops_the_dual_route():
    p = np.array([0.5, 1.5])
    report = explain(jvp, written_in_place, (p,), (np.ones(2),))
    assert "forward-dual" not in report.ran, str(report)
    with force_route(REFERENCE):
        want = jvp(written_in_place, (p,), (np.ones(2),))
    assert report.result[1] == pytest.approx(want[1], rel=1e-12)


_C = np.array([1.0, 2.0, 3.0])
# numbers and arrays mixed, as many directions as elements (a batch misaligned with the
# array's axis would go unnoticed in the shapes)
MIXED = {
    "number times array": lambda p: p[0] * _C + p[1],
    "array times number": lambda p: _C * p[1] - p[2] / _C,
    "stack with a constant": lambda p: np.stack([p[0], p[1] * 2.0, 1.0]) * _C,
    "ufuncs": lambda p: np.exp(np.array([p[0], p[1], p[2]]) * _C) + np.maximum(_C, p[0]),
    "a reduction": lambda p: np.sum(np.array([p[0], p[1]]) * p[2]) * _C,
    "arrays of numbers": lambda p: np.array([p[0], p[1]]) * np.array([p[2], 1.0]),
}


@pytest.mark.parametrize("name", MIXED)
@pytest.mark.parametrize("kind", [np.array, tuple])
def test_numbers_and_arrays_mixed_give_the_references_derivatives(name, kind):
    f, p = MIXED[name], kind([0.3, -1.2, 0.7])
    with force_route(REFERENCE):
        want_jac = np.asarray(jacfwd(f)(p), dtype=float)
        want = jvp(f, (p,), (kind([1.0, 0.5, -2.0]),))
    for _ in range(2):
        np.testing.assert_allclose(np.asarray(jacfwd(f)(p), dtype=float), want_jac,
                                   rtol=1e-12, atol=1e-14)
        got = jvp(f, (p,), (kind([1.0, 0.5, -2.0]),))
        np.testing.assert_allclose(got[1], want[1], rtol=1e-12, atol=1e-14)
