"""Found from outside (session 11's many-styles tester), fixed at the root: what the modes give
for the same input differed -- a bool was differentiated by forward mode (as 1.0) and refused
by reverse mode; an np.float64 input's gradient was a Python float where its derivative and
tangent were np.float64 (np.float32 kept its type everywhere); jvp's tangent was a 0-d array
where its output was an np.float64 (or an np.float64 beside a float output), depending on the
route's arithmetic.  One rule now: a truth value is refused in both modes (held as it is with a
zero direction), and a number's derivative has its type."""

from __future__ import annotations

import math

import numpy as np
import pytest

import overdub_ad as ad
from overdub_ad.testing import REFERENCE, force_route

ROUTES = [None, REFERENCE]


def cube(x):
    return x * x * x * 3.0


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("point", [True, np.True_, np.array([True, False])],
                         ids=["bool", "np.bool_", "bool array"])
@pytest.mark.parametrize("api", ["grad", "derivative", "jvp", "jacfwd", "jacrev", "hessian",
                                 "hvp"])
def test_a_truth_value_is_refused_in_both_modes(route, point, api):
    f = cube if np.ndim(point) == 0 else (lambda a: np.sum(a * 2.0))
    calls = {"grad": lambda: ad.grad(f)(point), "derivative": lambda: ad.derivative(f, point),
             "jvp": lambda: ad.jvp(f, (point,), (np.ones_like(point, float),)),
             "jacfwd": lambda: ad.jacfwd(f)(point), "jacrev": lambda: ad.jacrev(f)(point),
             "hessian": lambda: ad.hessian(f)(point),
             "hvp": lambda: ad.hvp(f, point, np.ones_like(point, float))}
    with force_route(route):
        with pytest.raises(TypeError, match="cannot differentiate with respect to a bool"):
            calls[api]()


@pytest.mark.parametrize("route", ROUTES)
def test_a_truth_value_with_a_zero_direction_is_held(route):
    def scaled(x, flag):
        assert type(flag) is bool
        return x * 2.0 if flag else x

    with force_route(route):
        for _ in range(2):
            assert ad.jvp(scaled, (1.5, True), (1.0, 0.0)) == (3.0, 2.0)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("kind", [float, np.float64, np.float32], ids=lambda k: k.__name__)
def test_a_numbers_derivative_has_its_type(route, kind):
    def f(x):
        return x * x * x + np.sin(x)

    x = kind(2.0)
    want = 3 * 4.0 + math.cos(2.0)
    with force_route(route):
        for _ in range(2):
            got = {"grad": ad.grad(f)(x), "derivative": ad.derivative(f, x),
                   "jvp": ad.jvp(f, (x,), (kind(1.0),))[1], "hvp": ad.hvp(f, x, kind(1.0))}
            for api in ("grad", "hvp"):           # the input's type, as JAX's dtype
                assert type(got[api]) is kind, (api, type(got[api]))
            for api in ("derivative", "jvp"):     # the output's (np.sin(2.0): np.float64)
                assert type(got[api]) is type(f(x)), (api, type(got[api]))
            assert got["grad"] == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("route", ROUTES)
def test_jvps_tangent_is_the_kind_of_its_output(route):
    def trajectory(t):
        traj = np.zeros((3, 2))
        traj[0] = t[:2]
        traj[1] = traj[0] * t[2]
        return traj[-2] @ np.array([1.0, 0.5])         # an np.float64

    def mixed(x):
        return float(np.sum(x)) * 2.0, np.tanh(x[0]) * math.tanh(x[1])  # float, np.float64

    t = np.array([1.0, 2.0, 3.0])
    with force_route(route):
        for _ in range(2):
            out, tangent = ad.jvp(trajectory, (t,), (np.ones(3),))
            assert type(out) is type(tangent) is np.float64 and tangent == 6.5
            (a, b), (da, db) = ad.jvp(mixed, (t[:2],), (np.ones(2),))
            assert (type(da), type(db)) == (type(a), type(b))
