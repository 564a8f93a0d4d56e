"""Forward mode: derivatives found silently wrong by the thirteenth round of outside testers,
kept fixed.

- A list or tuple stored into another container (``rows.append([x, 2 * x])``,
  ``rows.append((y, v))``, ``rows[0] = [x, 1]``, ``d["a"] = [x, y]``, ``m.h.append(...)``)
  lost its tangents when NumPy read the outer container (``np.array(rows)``, ``np.vstack``,
  ``np.asarray``, ``np.stack``, ``np.concatenate``, ``np.sum``): the core keeps the tangents
  of the inner list's members aside (two levels down), and forward mode looked them up for
  the outer list only.  ``jacfwd`` gave zeros where ``jacrev`` was right: a trajectory kept
  as ``hist.append((y, v))``, a generator yielding lists taken from a dict of state.
- An inner ``grad``/``jvp``/``vjp``/``jacfwd``/``jacrev``/``hessian``/``hvp``/
  ``value_and_grad`` given a dict, list, tuple, named tuple or dataclass kept on an object or
  inside another container (``grad(loss)(self.params)``, ``grad(f)(s["p"])``) dropped the
  enclosing forward derivative: the inner entry point, run natively, takes its arguments
  apart natively, and saw the plain values the core stores.  An MLP class that keeps
  ``self.params`` and runs three SGD steps with ``grad(self.loss)(self.params)`` had
  d(final loss)/d(lr) wrong by jacfwd (-1.24 where finite differences give -0.99998).

Each derivative is checked against central finite differences and against reverse mode, on
the forward routes, first and repeated calls; nested both ways (a forward derivative of an
inner gradient, a gradient of an inner forward derivative, jacfwd of jacrev).
"""

from __future__ import annotations

import collections
import dataclasses
import math
import types

import numpy as np
import pytest

from overdub_ad import (derivative, grad, hessian, hvp, jacfwd, jacrev, jvp, value_and_grad,
                        vjp)
from overdub_ad.testing import REFERENCE, force_route
from tests.conftest import fd

pytestmark = pytest.mark.every_route

FORWARD_ROUTES = [None, REFERENCE, "forward-dual"]


def _check_forward(f, x, want, repeats=2):
    """``jacfwd``, ``jvp`` and (of the summed output) ``derivative`` of ``f`` at ``x`` are
    ``want``, first and repeated calls."""
    for _ in range(repeats):
        np.testing.assert_allclose(jacfwd(f)(x), want, rtol=1e-6, atol=1e-9, err_msg="jacfwd")
        np.testing.assert_allclose(jvp(f, (x,), (1.0,))[1], want, rtol=1e-6, atol=1e-9,
                                   err_msg="jvp")
        np.testing.assert_allclose(derivative(lambda t: np.sum(f(t)), x), np.sum(want),
                                   rtol=1e-6, atol=1e-9, err_msg="derivative")


# -- lists and tuples inside containers, read by NumPy ----------------------------------------

def _appended_list(x):
    rows = []
    rows.append([x, 2.0 * x])
    return np.array(rows).ravel()


def _appended_tuple(x):
    rows = []
    rows.append((x, 1.0))
    return np.array(rows).ravel()


def _item_assigned(x):
    rows = [None]
    rows[0] = [x, 1.0]
    return np.array(rows).ravel()


def _vstacked(x):
    rows = []
    rows.append([x, 2.0 * x])
    rows.append([x * x, 1.0])
    return np.vstack(rows).ravel()


def _asarray_of_tuples(x):
    rows = []
    rows.append((x, 2.0 * x))
    return np.asarray(rows).ravel()


def _stacked(x):
    rows = []
    rows.append([x, 2.0 * x])
    rows.append((x, x * x))
    return np.stack(rows).ravel()


def _concatenated(x):
    rows = []
    rows.append([x, 2.0 * x])
    rows.append([x, 1.0])
    return np.concatenate(rows)


def _inserted(x):
    rows = [[1.0, 2.0]]
    rows.insert(0, [x, 3.0 * x])
    return np.array(rows).ravel()


def _extended(x):
    rows = []
    rows.extend([[x, 2.0], [3.0 * x, x]])
    return np.array(rows).ravel()


def _added_in_place(x):
    rows = []
    rows += [[x, 2.0], (3.0 * x, x)]
    return np.array(rows).ravel()


def _two_levels(x):
    rows = []
    rows.append([[x, 2.0 * x], [x * x, 1.0]])
    return np.array(rows).ravel()


def _dict_items_in_a_new_list(x):
    d = {}
    d["a"] = [x, 2.0 * x]
    d["b"] = (x * x, 1.0)
    return np.array([d["a"], d["b"]]).ravel()  # (the new list itself holds no tangent)


def _dict_values(x):
    d = {}
    d["a"] = [x, 2.0 * x]
    d["b"] = (x * x, 1.0)
    return np.array(list(d.values())).ravel()


def _on_an_object(x):
    m = types.SimpleNamespace()
    m.p = [[x, 2.0 * x]]
    return np.array(m.p).ravel()


def _history_on_an_object(x):
    m = types.SimpleNamespace()
    m.h = []
    m.h.append((x, 2.0 * x))
    m.h.append((x * x, 3.0))
    return np.array(m.h).ravel()


def _trajectory(x):
    y, v = x, 0.0
    hist = []
    for _ in range(3):
        v = v - 0.1 * y
        y = y + 0.1 * v
        hist.append((y, v))
    return np.array(hist).ravel()


def _generator_of_state(x):
    state = {"y": [x, 1.0]}

    def steps():
        for _ in range(3):
            state["y"] = [state["y"][0] * x, state["y"][1] + x]
            yield state["y"]

    return np.array(list(steps())).ravel()


def _reductions(x):
    rows = []
    rows.append([x, 2.0 * x])
    rows.append((x * x, 1.0))
    return np.array([np.sum(rows), np.mean(rows), np.max(rows)])


def _python_reads(x):
    rows = []
    rows.append([x, 2.0 * x])
    rows.append((x * x, 1.0))
    return np.array([sum(r) for r in rows] + [math.fsum(rows[0]), rows[1][0] * rows[0][1]])


NESTED = {f.__name__.strip("_"): f for f in (
    _appended_list, _appended_tuple, _item_assigned, _vstacked, _asarray_of_tuples, _stacked,
    _concatenated, _inserted, _extended, _added_in_place, _two_levels,
    _dict_items_in_a_new_list, _dict_values, _on_an_object, _history_on_an_object,
    _trajectory, _generator_of_state, _reductions, _python_reads)}


@pytest.mark.parametrize("route", FORWARD_ROUTES)
@pytest.mark.parametrize("name", NESTED)
def test_a_list_inside_a_container_keeps_its_tangents_when_numpy_reads_it(name, route):
    f = NESTED[name]
    want = fd(f, 0.7)
    assert np.any(want != 0.0)
    with force_route(route):
        np.testing.assert_allclose(jacrev(f)(0.7), want, rtol=1e-6, atol=1e-9)  # (the other
        _check_forward(f, 0.7, want)                                            # mode)


SECOND = ["appended_list", "item_assigned", "vstacked", "trajectory", "history_on_an_object",
          "dict_items_in_a_new_list", "generator_of_state"]


@pytest.mark.parametrize("route", FORWARD_ROUTES)
@pytest.mark.parametrize("name", SECOND)
def test_second_derivatives_of_a_list_inside_a_container(name, route):
    """Nested both ways: under an enclosing gradient the inner list's members are that
    gradient's tagged values, their forward tangents kept aside all the same."""
    f = NESTED[name]

    def g(x):
        return np.sum(f(x) ** 2)

    want = fd(grad(g), 0.7)
    assert want != 0.0
    with force_route(route):
        for _ in range(2):
            for what, got in (("grad of derivative", grad(lambda t: derivative(g, t))(0.7)),
                              ("derivative of grad", derivative(grad(g), 0.7)),
                              ("derivative of derivative",
                               derivative(lambda t: derivative(g, t), 0.7)),
                              ("jacrev of jacfwd", jacrev(jacfwd(g))(0.7))):
                np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=what)


def test_three_levels_down_read_by_numpy():
    """Deeper than the core keeps aside: the innermost members are stored as they are."""
    def f(x):
        rows = []
        rows.append([[[x, 2.0 * x]], [[x * x, 1.0]]])
        return np.array(rows).ravel()

    for route in FORWARD_ROUTES:
        with force_route(route):
            _check_forward(f, 0.7, fd(f, 0.7))


# -- pytrees kept on objects or in containers, given to an inner derivative ---------------------

@dataclasses.dataclass
class _Params:
    w: float
    b: float


_Pair = collections.namedtuple("_Pair", "w b")


def _dict_on_an_object(lr):
    m = types.SimpleNamespace()
    m.p = {"w": 0.5 - lr}
    return grad(lambda p: p["w"] ** 3)(m.p)["w"]


def _dict_copied(lr):
    m = types.SimpleNamespace()
    m.p = {"w": 0.5 - lr}
    return grad(lambda p: p["w"] ** 3)(dict(m.p))["w"]


def _list_to_jvp(lr):
    m = types.SimpleNamespace()
    m.p = [0.5 - lr]
    return jvp(lambda p: p[0] ** 3, (m.p,), ([1.0],))[1]


def _list_to_jvp_by_keyword(lr):
    m = types.SimpleNamespace()
    m.p = [0.5 - lr]
    return jvp(lambda p: p[0] ** 3, primals=(m.p,), tangents=([1.0],))[1]


def _tuple_to_vjp(lr):
    m = types.SimpleNamespace()
    m.p = (0.5 - lr, 2.0)
    return vjp(lambda p: p[0] ** 3 * p[1], m.p)[1](1.0)[0][0]


def _dict_in_a_dict(lr):
    s = {}
    s["p"] = {"w": 0.5 - lr}
    return grad(lambda p: p["w"] ** 3)(s["p"])["w"]


def _list_in_a_list(lr):
    s = [None]
    s[0] = [0.5 - lr]
    return grad(lambda p: p[0] ** 3)(s[0])[0]


def _list_in_a_dict_on_an_object(lr):
    m = types.SimpleNamespace()
    m.s = {"p": [0.5 - lr, 2.0]}
    return grad(lambda p: p[0] ** 3 * p[1])(m.s["p"])[0]


def _array_in_a_dict(lr):
    m = types.SimpleNamespace()
    m.p = {"w": np.array([0.5 - lr, 2.0 * lr])}
    return grad(lambda p: np.sum(p["w"] ** 3))(m.p)["w"][0]


def _to_jacfwd(lr):
    m = types.SimpleNamespace()
    m.p = {"w": 0.5 - lr}
    return jacfwd(lambda p: p["w"] ** 3)(m.p)["w"]


def _to_jacrev(lr):
    m = types.SimpleNamespace()
    m.p = [0.5 - lr, lr]
    return jacrev(lambda p: p[0] ** 3 * p[1])(m.p)[0]


def _to_hessian(lr):
    m = types.SimpleNamespace()
    m.p = [0.5 - lr]
    return hessian(lambda p: p[0] ** 4)(m.p)[0][0]


def _to_hvp(lr):
    m = types.SimpleNamespace()
    m.p = {"w": np.array([0.5 - lr, lr])}
    return hvp(lambda p: np.sum(p["w"] ** 4), m.p, {"w": np.array([1.0, 0.0])})["w"][0]


def _to_value_and_grad(lr):
    m = types.SimpleNamespace()
    m.p = {"w": 0.5 - lr}
    value, g = value_and_grad(lambda p: p["w"] ** 3)(m.p)
    return value + g["w"]


def _named_tuple_on_an_object(lr):
    m = types.SimpleNamespace()
    m.p = _Pair(0.5 - lr, 2.0)
    return grad(lambda p: p.w ** 3 * p.b)(m.p).w


def _cotangent_on_an_object(lr):
    m = types.SimpleNamespace()
    m.ct = [2.0 * lr]
    return vjp(lambda p: [p * 3.0], 0.5)[1](m.ct)[0]


def _stored_outside_a_middle_derivative(lr):
    m = types.SimpleNamespace()
    m.p = {"w": 0.5 - lr}
    return derivative(lambda t: grad(lambda p: p["w"] ** 3 * t)(m.p)["w"], 1.0)


def _stored_inside_a_middle_derivative(lr):
    def middle(t):
        m = types.SimpleNamespace()
        m.p = {"w": (0.5 - lr) * t}
        return grad(lambda p: p["w"] ** 3)(m.p)["w"]
    return derivative(middle, 1.0)


def _jacfwd_of_jacrev(lr):
    m = types.SimpleNamespace()
    m.p = [0.5 - lr, lr]
    return jacfwd(jacrev(lambda p: p[0] ** 3 * p[1]))(m.p)[0][0]


def _gradient_steps_in_a_dict(lr):
    s = {"p": {"w": np.array([0.5, -0.2])}}
    for _ in range(3):
        g = grad(lambda p: np.sum(p["w"] ** 4))(s["p"])
        s["p"] = {"w": s["p"]["w"] - lr * g["w"]}
    return np.sum(s["p"]["w"] ** 2)


def _history_of_tuples(lr):
    hist = []
    for i in range(3):
        hist.append((lr * i, {"a": [lr ** 2]}))
    return grad(lambda h: sum(t[0] * t[1]["a"][0] for t in h))(hist)[2][1]["a"][0]


INNER = {f.__name__.strip("_"): f for f in (
    _dict_on_an_object, _dict_copied, _list_to_jvp, _list_to_jvp_by_keyword, _tuple_to_vjp,
    _dict_in_a_dict, _list_in_a_list, _list_in_a_dict_on_an_object, _array_in_a_dict,
    _to_jacfwd, _to_jacrev, _to_hessian, _to_hvp, _to_value_and_grad,
    _named_tuple_on_an_object, _cotangent_on_an_object, _stored_outside_a_middle_derivative,
    _stored_inside_a_middle_derivative, _jacfwd_of_jacrev, _gradient_steps_in_a_dict,
    _history_of_tuples)}


@pytest.mark.parametrize("route", FORWARD_ROUTES)
@pytest.mark.parametrize("name", INNER)
def test_an_inner_derivative_of_a_stored_pytree_keeps_the_outer_derivative(name, route):
    f = INNER[name]
    want = fd(f, 0.3)
    assert want != 0.0
    with force_route(route):
        np.testing.assert_allclose(grad(f)(0.3), want, rtol=1e-6)  # (reverse over it)
        _check_forward(f, 0.3, want)


@pytest.mark.parametrize("route", FORWARD_ROUTES)
def test_an_inner_gradient_of_a_stored_dataclass_keeps_the_outer_derivative(route):
    def f(lr):
        m = types.SimpleNamespace()
        m.p = _Params(0.5 - lr, 2.0)
        return grad(lambda p: p.w ** 3 * p.b)(m.p).w

    with force_route(route):
        _check_forward(f, 0.3, fd(f, 0.3))


class _MLP:
    """The tester's model: parameters kept on the object, SGD steps by an inner gradient."""

    def __init__(self, lr):
        self.lr = lr
        self.params = {"W": np.array([[0.3, -0.2], [0.1, 0.4]]), "b": np.array([0.05, -0.1])}
        self.x = np.array([[1.0, 0.5], [-0.3, 0.8], [0.2, -0.6]])
        self.y = np.array([0.3, -0.2, 0.5])

    def loss(self, p):
        h = np.tanh(self.x @ p["W"] + p["b"])
        return np.mean((h.sum(axis=1) - self.y) ** 2)

    def train(self, steps=3):
        for _ in range(steps):
            g = grad(self.loss)(self.params)
            self.params = {k: self.params[k] - self.lr * g[k] for k in self.params}
        return self.loss(self.params)


@pytest.mark.parametrize("route", FORWARD_ROUTES)
def test_training_with_parameters_kept_on_the_model(route):
    f = lambda lr: _MLP(lr).train()  # noqa: E731
    want = fd(f, 0.3)
    with force_route(route):
        np.testing.assert_allclose(grad(f)(0.3), want, rtol=1e-6)
        _check_forward(f, 0.3, want)


def test_an_inner_derivative_is_given_the_very_containers_that_hold_nothing_aside():
    """Pytrees are revealed for an inner derivative only where the core holds something
    aside: a container with nothing aside is the caller's own object (its changes seen)."""
    def f(x):
        log = [1.0]
        state = {"calls": 0}

        def loss(w, log, state):
            log.append(2.0)
            state["calls"] += 1
            return w * x

        g = grad(loss)(3.0, log, state)
        return g * len(log) * state["calls"]

    for route in FORWARD_ROUTES:
        with force_route(route):
            for _ in range(2):
                assert derivative(f, 0.5) == 2.0
                assert jacfwd(f)(0.5) == 2.0


def _wrapped(depth):
    def f(x):
        v = [x, 2.0 * x * x]
        for _ in range(depth):
            v = [v]
        rows = []
        rows.append(v)
        return np.array(rows).ravel()
    return f


@pytest.mark.every_route
@pytest.mark.parametrize("depth", [3, 7, 8, 9, 20])
def test_lists_at_any_depth_keep_their_tangents(depth):
    """Forward mode looked for tangents eight levels down at most: deeper, jacfwd gave zeros."""
    f = _wrapped(depth)
    want = [1.0, 2.8]
    for route in (None, REFERENCE):
        with force_route(route):
            for _ in range(2):
                np.testing.assert_allclose(jacfwd(f)(0.7), want, rtol=1e-12)
                np.testing.assert_allclose(jacrev(f)(0.7), want, rtol=1e-12)
                assert derivative(lambda x: np.sum(f(x)), 0.7) == pytest.approx(3.8)
            assert derivative(grad(lambda x: np.sum(f(x))), 0.7) == pytest.approx(4.0)

