"""Outputs that are not numbers, arrays or pytrees of them (found from outside): grad of a
function returning a dataclass gave its first field's derivative, and an object no pytree
takes apart gave 0.0 (grad, jacrev) or None (derivative, jvp, jacfwd) -- silently.  The docs
promise a TypeError for an output with no number to differentiate, never a silent zero."""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np
import pytest

from overdub_ad import (MissingRuleError, derivative, grad, hessian, jacfwd, jacrev, jvp,
                        register_pytree, value_and_grad)
from overdub_ad.reverse._api import NotScalar
from overdub_ad.testing import REFERENCE, force_route


@dataclasses.dataclass
class Out:
    a: float
    b: float


class Plain:
    def __init__(self, a, b):
        self.a, self.b = a, b


class Registered:
    def __init__(self, a, b):
        self.a, self.b = a, b


register_pytree(Registered, lambda r: ((r.a, r.b), None), lambda _, kids: Registered(*kids))

ROUTES = pytest.mark.parametrize("route", [None, REFERENCE], ids=["default", "reference"])


def _on(route):
    return force_route(route) if route else contextlib.nullcontext()


@ROUTES
@pytest.mark.parametrize("make", [Out, Registered, lambda a, b: (a, b)],
                         ids=["dataclass", "registered", "tuple"])
def test_grad_of_a_pytree_output_is_not_a_scalar(make, route) -> None:
    f = lambda x: make(x * x, 3.0 * x)  # noqa: E731
    with _on(route):
        for api in (grad, value_and_grad):
            with pytest.raises(NotScalar, match="requires a scalar output"):
                api(f)(2.0)
        # the Jacobian of each field, as for any pytree output
        for api in (jacrev, jacfwd):
            got = api(f)(2.0)
            fields = (got.a, got.b) if not isinstance(got, tuple) else got
            assert np.allclose(fields, (4.0, 3.0))


@ROUTES
@pytest.mark.parametrize("call", [
    lambda f: grad(f)(2.0), lambda f: value_and_grad(f)(2.0), lambda f: jacrev(f)(2.0),
    lambda f: jacfwd(f)(2.0), lambda f: derivative(f, 2.0), lambda f: jvp(f, (2.0,), (1.0,)),
    lambda f: hessian(f)(2.0),
    lambda f: jvp(lambda x: (x, f(x)), (2.0,), (1.0,)),  # inside a tuple too
], ids=["grad", "value_and_grad", "jacrev", "jacfwd", "derivative", "jvp", "hessian",
        "jvp_in_tuple"])
def test_an_object_no_pytree_takes_apart_is_refused(call, route) -> None:
    with _on(route), pytest.raises(TypeError, match="no pytree takes apart"):
        call(lambda x: Plain(x * x, 3.0 * x))


def test_numbers_arrays_functions_and_text_leaves_are_still_outputs() -> None:
    assert jvp(lambda x: (x * x, "label", None), (2.0,), (1.0,))[1][0] == 4.0
    assert grad(lambda x: np.float32(x) * 2)(np.float32(1.0)) == 2.0
    assert derivative(lambda x: lambda y: x * y, 2.0)(3.0) == 3.0


@ROUTES
def test_a_structured_array_of_differentiated_values_is_refused_with_its_plain_value(route):
    # found from outside: the tuples were read as rows of a float array first, so the primal
    # was a (2, 2) array of records and the Jacobian zeros; now the value is NumPy's and the
    # derivative refused, as for writes into structured arrays (limitations.md)
    records = [("p", float), ("q", float)]

    def sim(a):
        return np.array([(a, 2.0), (3.0, a)], dtype=records)

    assert sim(0.5).shape == (2,)
    with _on(route):
        for call in (lambda: jvp(sim, (0.5,), (1.0,)), lambda: jacfwd(sim)(0.5),
                     lambda: jacrev(sim)(0.5), lambda: grad(lambda a: sim(a)["q"].sum())(0.5)):
            with pytest.raises(MissingRuleError, match="structured .record. array"):
                call()
    from overdub import overdub
    from overdub.contexts import CountContext
    assert overdub(CountContext(), sim, 0.5).tolist() == [(0.5, 2.0), (3.0, 0.5)]
