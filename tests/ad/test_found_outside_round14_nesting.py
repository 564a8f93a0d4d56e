"""Nested derivatives found from outside (round 14): a value made inside an inner derivative
and used by the outer function after the inner one returned.  The docs promise it carries the
outer derivative or raises TagError, never a wrong number; the dual route returned its own
internal dual number instead (``print`` showed 6.0, ``r + 1`` a dual) where the reference
raised TagError."""

from __future__ import annotations

import contextlib

import pytest

from overdub import TagError
from overdub_ad import derivative, jvp
from overdub_ad.testing import REFERENCE, force_route

# (each test compares the routes itself: nothing for CI's reference-route pass to add)
pytestmark = pytest.mark.every_route


class Box:
    pass


def through_attribute(x):
    b = Box()

    def inner(y):
        b.f = lambda: x * y  # a closure over both levels escapes through an attribute
        return y * y
    derivative(inner, 1.0)
    return b.f() * x


def through_dict(x):
    d = {}

    def inner(y):
        d["f"] = lambda: x * y
        return y * y
    derivative(inner, 1.0)
    return d["f"]() * x


def through_list(x):
    held = []

    def inner(y):
        held.append(lambda: x * y)
        return y * y
    derivative(inner, 1.0)
    return held[0]() * x


@pytest.mark.parametrize("route", [None, REFERENCE], ids=["default", "reference"])
@pytest.mark.parametrize("f", [through_attribute, through_dict, through_list])
def test_an_escaped_inner_value_raises_tag_error_on_every_route(f, route) -> None:
    with force_route(route) if route else contextlib.nullcontext():
        for _ in range(3):
            with pytest.raises(TagError):
                derivative(f, 3.0)
            with pytest.raises(TagError):
                jvp(f, (3.0,), (1.0,))
