"""User rules of functions whose outputs are not plain tuples (found from outside, round 15).

- ``defjvp``/``defvjp`` rules of a function returning a dict, list, dataclass or named tuple:
  the reverse tape recorded a dict or dataclass output as a constant (grad 0, the rule never
  called); forward mode attached no tangent to a dict's or dataclass's leaves (reference
  route), and the dual route lost a list's (derivative 0).  Now the output is a pytree: its
  leaves are differentiated, the forward rule gives the tangent in the output's structure,
  and the reverse rule gets the cotangent in it.
- a ``defvjp`` rule of a function returning several outputs got None as the cotangent of an
  output nothing used (``ct[1] * ...``: a TypeError); now zeros of that output's shape, as a
  ``custom_vjp``'s bwd gets.
- a ``custom_jvp`` rule returning a dataclass tangent: the reverse reference route read the
  tangent's fields natively, plain, and gave 0 (and hessian 0 on every route).
- a ``custom_jvp``/``custom_vjp`` function called with a plain object (not a pytree) holding
  the differentiated value: 0, or a misleading MissingRuleError; now a TypeError naming the
  function and saying what to do.

The rules below are 3 times the bodies' derivatives on purpose: a result by the rule proves
the rule ran (the body's derivative would be a third of it)."""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import numpy as np
import pytest

from overdub_ad import (custom_jvp, custom_vjp, defjvp, defvjp, derivative, grad, hessian,
                        hvp, jacfwd, jacrev, jvp)
from overdub_ad.testing import REFERENCE, force_route

# (each test runs on both routes itself: nothing for CI's reference-route pass to add)
pytestmark = pytest.mark.every_route

ROUTES = [None, REFERENCE]


@dataclasses.dataclass
class SC:
    s: float
    c: float


class SCTuple(NamedTuple):
    s: float
    c: float


def sc_dict(y):
    return {"s": math.sin(y), "c": math.cos(y)}


def sc_list(y):
    return [math.sin(y), math.cos(y)]


def sc_dataclass(y):
    return SC(math.sin(y), math.cos(y))


def sc_named(y):
    return SCTuple(math.sin(y), math.cos(y))


defjvp(sc_dict, lambda dy, out, y: {"s": 3 * dy * math.cos(y), "c": -3 * dy * math.sin(y)})
defvjp(sc_dict, lambda ct, out, y: 3 * (ct["s"] * math.cos(y) - ct["c"] * math.sin(y)))
defjvp(sc_list, lambda dy, out, y: [3 * dy * math.cos(y), -3 * dy * math.sin(y)])
defvjp(sc_list, lambda ct, out, y: 3 * (ct[0] * math.cos(y) - ct[1] * math.sin(y)))
defjvp(sc_dataclass, lambda dy, out, y: SC(3 * dy * math.cos(y), -3 * dy * math.sin(y)))
defvjp(sc_dataclass, lambda ct, out, y: 3 * (ct.s * math.cos(y) - ct.c * math.sin(y)))
defjvp(sc_named, lambda dy, out, y: SCTuple(3 * dy * math.cos(y), -3 * dy * math.sin(y)))
defvjp(sc_named, lambda ct, out, y: 3 * (ct.s * math.cos(y) - ct.c * math.sin(y)))

USES = {
    "dict": lambda x: 2 * sc_dict(x)["s"] + sc_dict(x)["c"],
    "list": lambda x: 2 * sc_list(x)[0] + sc_list(x)[1],
    "dataclass": lambda x: 2 * sc_dataclass(x).s + sc_dataclass(x).c,
    "namedtuple": lambda x: 2 * sc_named(x).s + sc_named(x).c,
}

X = 0.4
FIRST = 3 * (2 * math.cos(X) - math.sin(X))    # by the rules
SECOND = 3 * (-2 * math.sin(X) - math.cos(X))  # the derivative of the reverse rule


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("kind", list(USES))
def test_rules_of_a_pytree_output_first_order(kind, route):
    f = USES[kind]
    with force_route(route):
        assert grad(f)(X) == pytest.approx(FIRST)
        assert derivative(f, X) == pytest.approx(FIRST)
        assert jvp(f, (X,), (2.0,))[1] == pytest.approx(2 * FIRST)
        assert float(jacfwd(f)(X)) == pytest.approx(FIRST)
        assert float(jacrev(f)(X)) == pytest.approx(FIRST)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("kind", list(USES))
def test_rules_of_a_pytree_output_second_order(kind, route):
    f = USES[kind]
    with force_route(route):
        assert float(hessian(f)(X)) == pytest.approx(SECOND)
        assert float(hvp(f, X, 2.0)) == pytest.approx(2 * SECOND)


def sc_arrays(a):
    return {"s": np.sin(a), "c": np.cos(a)}


defjvp(sc_arrays, lambda da, out, a: {"s": 3 * da * np.cos(a), "c": -3 * da * np.sin(a)})
defvjp(sc_arrays, lambda ct, out, a: 3 * (ct["s"] * np.cos(a) - ct["c"] * np.sin(a)))


@pytest.mark.parametrize("route", ROUTES)
def test_rules_of_a_dict_of_arrays(route):
    a = np.array([0.4, 0.9])

    def f(a):
        d = sc_arrays(a)
        return np.sum(2 * d["s"] + d["c"])

    want = 3 * (2 * np.cos(a) - np.sin(a))
    with force_route(route):
        np.testing.assert_allclose(grad(f)(a), want)
        np.testing.assert_allclose(jacfwd(f)(a), want)
        np.testing.assert_allclose(jacrev(f)(a), want)
        np.testing.assert_allclose(hessian(f)(a), np.diag(3 * (-2 * np.sin(a) - np.cos(a))),
                                   atol=1e-12)


def polar(r, th):
    return r * math.cos(th), r * math.sin(th)


defvjp(polar, lambda ct, out, r, th: ct[0] * math.cos(th) + ct[1] * math.sin(th),
       lambda ct, out, r, th: -ct[0] * r * math.sin(th) + ct[1] * r * math.cos(th))
defjvp(polar, lambda dr, out, r, th: (dr * math.cos(th), dr * math.sin(th)),
       lambda dth, out, r, th: (-dth * r * math.sin(th), dth * r * math.cos(th)))


def polar_arrays(r):
    return r * 2.0, np.sum(r)


seen: list[object] = []


def _polar_arrays_vjp(ct, out, r):
    seen.append(ct[1])
    return ct[0] * 2.0 + ct[1] * np.ones_like(r)


defvjp(polar_arrays, _polar_arrays_vjp)


@pytest.mark.parametrize("route", ROUTES)
def test_unused_output_gets_zeros(route):
    with force_route(route):
        assert grad(lambda r: polar(r, 0.3)[0])(2.0) == pytest.approx(math.cos(0.3))
        assert grad(lambda th: polar(2.0, th)[1], )(0.3) == pytest.approx(2 * math.cos(0.3))
        jac = jacrev(polar, argnums=(0, 1))(2.0, 0.3)
        want = ((math.cos(0.3), -2 * math.sin(0.3)), (math.sin(0.3), 2 * math.cos(0.3)))
        np.testing.assert_allclose(np.array(jac, dtype=float), want)
        seen.clear()
        r = np.array([1.0, 2.0, 3.0])
        np.testing.assert_allclose(grad(lambda r: np.sum(polar_arrays(r)[0]))(r), 2.0)
        assert seen and all(np.shape(ct) == () and ct == 0.0 for ct in seen)


@dataclasses.dataclass
class Pair:
    s: np.ndarray
    c: np.ndarray


@custom_jvp
def pair(y):
    return Pair(np.sin(y), np.cos(y))


@pair.defjvp
def _pair_jvp(p, t):
    return pair(p[0]), Pair(3 * t[0] * np.cos(p[0]), -3 * t[0] * np.sin(p[0]))


@pytest.mark.parametrize("route", ROUTES)
def test_custom_jvp_returning_a_dataclass(route):
    a = np.array([0.4, 0.9])

    def f(a):
        return np.sum(2 * pair(a).s + pair(a).c)

    with force_route(route):
        np.testing.assert_allclose(grad(f)(a), 3 * (2 * np.cos(a) - np.sin(a)))
        np.testing.assert_allclose(jacfwd(f)(a), 3 * (2 * np.cos(a) - np.sin(a)))
        # the rule's tangent map (3 t cos p) differentiated in p
        np.testing.assert_allclose(hessian(f)(a), np.diag(3 * (-2 * np.sin(a) - np.cos(a))),
                                   atol=1e-12)


class Params:  # a plain object, not a pytree
    def __init__(self, w):
        self.w = w


@custom_jvp
def scale(p, y):
    return p.w * y


@scale.defjvp
def _scale_jvp(primals, tangents):
    (p, y), (_, dy) = primals, tangents
    return scale(p, y), p.w * dy


def _cv_body(p, y):
    return p.w * y


cv = custom_vjp(_cv_body)
cv.defvjp(lambda p, y: (p.w * y, p), lambda p, ct: (None, ct * p.w))


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("api", [grad, derivative])
def test_custom_jvp_given_a_plain_object_holding_the_variable(api, route):
    with force_route(route), pytest.raises(TypeError, match=r"scale.*Params.*pytree"):
        api(lambda w: scale(Params(w), 2.0))(3.0)


@pytest.mark.parametrize("route", ROUTES)
def test_custom_vjp_given_a_plain_object_holding_the_variable(route):
    with force_route(route):
        with pytest.raises(TypeError, match=r"_cv_body.*Params.*pytree"):
            grad(lambda w: cv(Params(w), 2.0))(3.0)
        # forward mode differentiates the body: right
        assert derivative(lambda w: cv(Params(w), 2.0))(3.0) == pytest.approx(2.0)
        # a plain object holding nothing differentiated is fine
        assert grad(lambda y: cv(Params(3.0), y))(2.0) == pytest.approx(3.0)
        assert grad(lambda y: scale(Params(3.0), y))(2.0) == pytest.approx(3.0)
