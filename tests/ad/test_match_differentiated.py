"""``match`` on differentiated values (found by an outside tester, session 12).

A class pattern nested in a sequence, mapping or class pattern took the other branch under
``grad``/``jvp`` (``case [float(k), 1]`` checked the type of the wrapper), and a capture of an
attribute (``case P(x=x)``) lost its derivative.  Each function here must give, on every
route, the plain run's value and the derivative that finite differences give.  The fast routes
(forward-dual, reverse-specialised) decline ``match`` statements: the reference runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from overdub_ad import grad, jvp
from overdub_ad.testing import force_route


@dataclass
class P:
    x: float
    y: float


class Box:
    __match_args__ = ("inner",)

    def __init__(self, inner):
        self.inner = inner


def in_list(v):
    match [v, 1]:
        case [float(k), 1]:
            return k ** 3
        case _:
            return -v


def in_dict(v):
    match {"k": v}:
        case {"k": float(k)}:
            return k ** 3
        case _:
            return -v


def in_tuple_as(v):
    match (v,):
        case (float() as k,):
            return k ** 3
        case _:
            return -v


def two_captures(v):
    match v, v * 2:
        case (float(a), float(b)):
            return a * b ** 2
        case _:
            return -v


def or_as(v):
    match (v, v):
        case ((float() | int()) as k, _):
            return k ** 3
        case _:
            return -v


def attribute_keyword(v):
    match P(v, 2.0):
        case P(x=x):
            return x ** 3
    return -v


def attribute_positional(v):
    match P(v, 2.0):
        case P(x, y):
            return x ** 3 * y
    return -v


def attribute_class_pattern(v):
    match P(v, 2.0):
        case P(x=float(x)):
            return x ** 3
        case _:
            return -v


def nested_classes_and_guard(v):
    match Box(P(v, v * v)):
        case Box(P(x=float(x), y=y)) if x > 10:
            return -x
        case Box(inner=P(x, y=float(y))):
            return x * y
    return 0.0


def built_by_writes(v):
    items, table = [], {}
    items.append(v)
    table["k"] = v * 3
    match items, table:
        case [[float(a)], {"k": b, **rest}] if not rest:
            return a * b
    return -v


def star_capture(v):
    match [1.0, v, v * v]:
        case [float(), *rest]:
            return rest[0] * rest[1]
    return -v


def star_wildcard(v):
    match [v, 0.0, v * 2]:
        case [float(a), *_, float(b)]:
            return a * b
    return -v


FUNCTIONS = [in_list, in_dict, in_tuple_as, two_captures, or_as, attribute_keyword,
             attribute_positional, attribute_class_pattern, nested_classes_and_guard,
             built_by_writes, star_capture, star_wildcard]


def _finite_difference(f, x, h=1e-6):
    return (f(x + h) - f(x - h)) / (2 * h)


@pytest.mark.parametrize("route", [None, "reference"], ids=["default", "reference"])
@pytest.mark.parametrize("f", FUNCTIONS, ids=lambda f: f.__name__)
def test_match_takes_the_plain_branch_and_differentiates(f, route):
    x = 0.5
    expected = _finite_difference(f, x)
    assert f(x) != -x  # the branch under test, not the fallback
    with force_route(route):
        for _ in range(2):  # first and repeated calls (cached rewrite)
            assert grad(f)(x) == pytest.approx(expected, rel=1e-6, abs=1e-9)
            value, tangent = jvp(f, (x,), (1.0,))
            assert value == f(x)
            assert tangent == pytest.approx(expected, rel=1e-6, abs=1e-9)


def test_second_derivative_through_a_nested_class_pattern():
    def g(v):
        return grad(attribute_positional)(v)
    x = 0.5
    for route in (None, "reference"):
        with force_route(route):
            assert grad(g)(x) == pytest.approx(_finite_difference(g, x), rel=1e-5)
            assert grad(g)(x) == pytest.approx(6 * x * 2.0)
