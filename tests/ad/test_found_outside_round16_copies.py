"""Found from outside, round 16: derivatives through ``copy.copy``/``copy.deepcopy`` of objects
whose state C code read.

Saving an integrator's state before a trial step (``saved = copy.copy(state)``) gave 0 on
every route and in every mode when the state was a slotted class, a dataclass with
``slots=True`` or ``statistics.NormalDist``; a class with its own ``__reduce__`` gave 0 in
forward mode.  (The core computes ``object.__reduce_ex__`` through the context now: see
tests/core/test_found_outside_session14.py.)
"""

from __future__ import annotations

import copy
import dataclasses
import statistics

import numpy as np
import pytest

from overdub_ad import derivative, grad, hessian, jacfwd, jacrev
from overdub_ad.testing import REFERENCE, force_route

# (each test runs on both routes itself: nothing for CI's reference-route pass to add)
pytestmark = pytest.mark.every_route

ROUTES = [pytest.param(None, id="default"), pytest.param(REFERENCE, id="reference")]
TRANSFORMS = [grad, derivative, jacfwd, jacrev]


class State:
    __slots__ = ("y", "t")

    def __init__(self, y, t):
        self.y, self.t = y, t


@dataclasses.dataclass(slots=True)
class SlotsState:
    y: float
    t: float


class Reduced:
    def __init__(self, y):
        self.y = y

    def __reduce__(self):
        return Reduced, (self.y * 1.0,)


def _trial_steps(make, copier):
    def run(k):
        s = make(1.0, 0.0)
        saved = s
        for _ in range(5):
            saved = copier(s)  # the state to roll back to
            s.y = s.y - 0.1 * k * s.y
            s.t += 0.1
        return saved.y  # (1 - 0.1 k) ** 4
    return run


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("copier", [copy.copy, copy.deepcopy], ids=["copy", "deepcopy"])
@pytest.mark.parametrize("make", [State, SlotsState], ids=["slots", "dataclass-slots"])
def test_a_saved_state_keeps_its_derivative(route, copier, make):
    k = 0.9
    want = -0.4 * (1 - 0.1 * k) ** 3
    want2 = 0.12 * (1 - 0.1 * k) ** 2
    f = _trial_steps(make, copier)
    with force_route(route):
        for _ in range(2):
            for transform in TRANSFORMS:
                assert np.allclose(transform(f)(k), want), transform.__name__
            assert np.allclose(hessian(f)(k), want2)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("copier", [copy.copy, copy.deepcopy], ids=["copy", "deepcopy"])
def test_a_copied_normal_distribution_and_an_own_reduce(route, copier):
    def mean_of_copy(mu):
        return copier(statistics.NormalDist(mu, 1.0)).mean * 3.0

    def reduced(y):
        return copier(Reduced(y)).y * 3.0

    with force_route(route):
        for f in (mean_of_copy, reduced):
            for transform in TRANSFORMS:
                assert transform(f)(0.7) == 3.0, (f.__name__, transform.__name__)


@pytest.mark.parametrize("route", ROUTES)
def test_a_slotted_array_attribute_keeps_its_derivative(route):
    class Holder:
        __slots__ = ("v",)

        def __init__(self, v):
            self.v = v

    def f(k):
        return np.sum(copy.deepcopy(Holder(np.array([k, 2.0 * k]))).v) * 3.0

    with force_route(route):
        for transform in TRANSFORMS:
            assert np.allclose(transform(f)(0.5), 9.0), transform.__name__
