"""Silent wrong derivatives found by the eighth outside tester, kept fixed: a property (or any
Python descriptor) read through ``super()``.

``super().e`` is an attribute read on a ``super`` object, a C type: the core took its
operations for native ones, so the property's getter ran behind the context's back and its
arithmetic was never seen -- ``B(x).e`` with ``B.e = super().e + 0.0`` over ``A.e = v ** 2``
had derivative 0 instead of 6 at 3, in every API and route; a frozen dataclass whose ``ke``
adds to ``super().ke`` lost the base's part.  The core now runs the descriptor that
``super``'s lookup finds through the context (``overdub._protocols._super_get``), as it does
for ordinary attribute reads of instances; the method form ``super().m()`` was right already.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

from overdub_ad import derivative, grad, hessian, hvp, jacfwd, jacrev, jvp, vjp
from overdub_ad.testing import force_route
from tests.conftest import fd


class A:
    def __init__(self, v):
        self.v = v

    @property
    def e(self):
        return self.v ** 2

    @functools.cached_property
    def c(self):
        return self.v ** 3

    def m(self):
        return self.v ** 2


class B(A):
    @property
    def e(self):
        return super().e + 0.0

    @property
    def cached(self):
        return super().c * 2.0

    def m(self):
        return super().m() + 0.0


class C(A):
    @property
    def e(self):
        return super(C, self).e * self.v  # noqa: UP008 (the explicit form, tested): v ** 3


class Scaled:
    """A descriptor with a Python ``__get__``, through an instance and through a class."""

    def __get__(self, obj, typ=None):
        return typ.k * 3.0 if obj is None else obj.v * 10.0 + obj.v ** 2


class HasScaled:
    d = Scaled()
    k = 1.0

    def __init__(self, v):
        self.v = v


class ReadsScaled(HasScaled):
    def get(self):
        return super().d

    @classmethod
    def from_class(cls):
        return super().d


class SetsK(ReadsScaled):
    pass


@dataclasses.dataclass(frozen=True)
class Body:
    m: float
    v: float

    @property
    def ke(self):
        return 0.5 * self.m * self.v ** 2


@dataclasses.dataclass(frozen=True)
class Charged(Body):
    q: float = 1.0

    @property
    def ke(self):
        return super().ke + self.q * self.v


def _class_bound(x):
    SetsK.k = x * x  # the descriptor reads typ.k: 3 x^2
    try:
        return SetsK.from_class() * x
    finally:
        SetsK.k = 1.0


CASES = {  # name: (f, f'(x0) in closed form)
    "super().property": (lambda x: B(x).e, lambda x: 2 * x),
    "super(C, self).property": (lambda x: C(x).e, lambda x: 3 * x ** 2),
    "super().cached_property": (lambda x: B(x).cached + B(2 * x).cached,
                                lambda x: 6 * x ** 2 + 48 * x ** 2),
    "super(C, obj) outside a method": (lambda x: super(C, C(x)).e * x, lambda x: 3 * x ** 2),
    "super(C, obj).cached_property": (lambda x: super(C, C(x)).c, lambda x: 3 * x ** 2),
    "descriptor __get__ via super()": (lambda x: ReadsScaled(x).get(), lambda x: 10 + 2 * x),
    "descriptor __get__ via super(), class-bound": (_class_bound, lambda x: 9 * x ** 2),
    "frozen dataclass super().ke": (lambda x: Charged(2.0, x, q=3.0).ke, lambda x: 2 * x + 3),
    "frozen dataclass, q differentiated": (lambda x: Charged(2.0, x, q=x).ke, lambda x: 4 * x),
    "super().method() (right before)": (lambda x: B(x).m(), lambda x: 2 * x),
}
X0 = 0.7

FIRST = {
    "derivative": lambda f, x: derivative(f, x),
    "derivative(f)": lambda f, x: derivative(f)(x),
    "grad": lambda f, x: grad(f)(x),
    "jvp": lambda f, x: jvp(f, (x,), (1.0,))[1],
    "vjp": lambda f, x: vjp(f, x)[1](1.0)[0],
    "jacfwd": lambda f, x: jacfwd(f)(x),
    "jacrev": lambda f, x: jacrev(f)(x),
}
SECOND = {
    "derivative(derivative)": lambda f, x: derivative(derivative(f))(x),
    "grad(grad)": lambda f, x: grad(grad(f))(x),
    "grad(derivative)": lambda f, x: grad(derivative(f))(x),
    "jvp(grad)": lambda f, x: jvp(grad(f), (x,), (1.0,))[1],
    "hessian": lambda f, x: hessian(f)(x),
    "hvp": lambda f, x: hvp(f, x, 1.0),
}


def _routed(route, compute):
    if route is None:
        return compute()
    with force_route(route):
        return compute()


@pytest.mark.parametrize("route", [None, "reference"])
@pytest.mark.parametrize("api", FIRST)
@pytest.mark.parametrize("case", CASES)
def test_first_derivative_through_super(case, api, route):
    f, slope = CASES[case]
    want = float(fd(f, X0))
    assert want == pytest.approx(slope(X0), rel=1e-6)  # the closed form is the right one
    for _ in range(2):  # first and repeated calls
        got = _routed(route, lambda: FIRST[api](f, X0))
        assert float(np.squeeze(got)) == pytest.approx(want, rel=1e-7, abs=1e-9)


@pytest.mark.parametrize("route", [None, "reference"])
@pytest.mark.parametrize("api", SECOND)
@pytest.mark.parametrize("case", CASES)
def test_second_derivative_through_super(case, api, route):
    f, slope = CASES[case]
    want = float(fd(slope, X0))
    for _ in range(2):
        got = _routed(route, lambda: SECOND[api](f, X0))
        assert float(np.squeeze(got)) == pytest.approx(want, rel=1e-6, abs=1e-8)


def test_the_class_attribute_the_class_bound_read_set_is_plain_again():
    assert grad(_class_bound)(X0) == pytest.approx(9 * X0 ** 2)
    assert type(SetsK.k) is float and SetsK.k == 1.0


def test_super_attribute_errors_and_defaults_are_python_s():
    """An AttributeError from the getter, and a name no base defines, behave as natively."""
    class Raising(A):
        @property
        def e(self):
            raise AttributeError("no e here")

    class Below(Raising):
        @property
        def e(self):
            return getattr(super(), "e", self.v * 5.0)

    def f(x):
        return Below(x).e + getattr(super(B, B(x)), "missing", x * x)

    assert grad(f)(X0) == pytest.approx(5.0 + 2 * X0)
    assert derivative(f, X0) == pytest.approx(5.0 + 2 * X0)
    with pytest.raises(AttributeError, match="missing"):
        grad(lambda x: super(B, B(x)).missing)(X0)
