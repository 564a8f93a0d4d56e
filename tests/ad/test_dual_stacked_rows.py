"""The dual route (forward-dual) stacks ``np.array(rows)`` whose rows are tuples or lists of
numbers or arrays -- a trajectory of ``(x, y)`` pairs kept in a list, the common way to record
a simulation -- instead of declining to the reference route (30x slower there); it gives what
the reference gives."""

from __future__ import annotations

import numpy as np
import pytest

from overdub_ad import explain, jacfwd, jvp
from overdub_ad.testing import REFERENCE, force_route

# (about the fast route itself: that it runs, and gives what the reference gives)
pytestmark = pytest.mark.default_routes


def leapfrog(p):
    x, y, vx, vy = p
    trajectory = []
    for _ in range(10):
        r3 = (x * x + y * y) ** 1.5
        vx -= 0.05 * x / r3
        vy -= 0.05 * y / r3
        x += 0.05 * vx
        y += 0.05 * vy
        trajectory.append((x, y))
    return np.sum(np.array(trajectory) ** 2)


def rows_of_lists(p):
    a, b = p[0], p[1]
    return np.array([[a, 2.0 * b, 1.0], [b * a, 3.0, a]]) @ np.array([1.0, -2.0, 0.5])


def rows_of_arrays(p):
    v = np.array([p[0], p[1]])
    return np.sum(np.asarray([(v, 2.0 * v), (v * v, np.sin(v))]), axis=(1, 2))


P = np.array([1.0, 0.2, 0.1, 0.9])


@pytest.mark.parametrize("f", [leapfrog, rows_of_lists, rows_of_arrays])
def test_rows_stack_on_the_dual_route_as_on_the_reference(f) -> None:
    v = np.array([0.5, -1.0, 0.25, 2.0])
    with force_route(REFERENCE):
        want_jac = jacfwd(f)(P)
        want_jvp = jvp(f, (P,), (v,))
    for _ in range(3):
        assert np.allclose(jacfwd(f)(P), want_jac, rtol=1e-12, atol=1e-14)
        out, tangent = jvp(f, (P,), (v,))
        assert np.allclose(out, want_jvp[0]) and np.allclose(tangent, want_jvp[1], rtol=1e-12)
    assert explain(jvp, f, (P,), (v,)).ran == ["forward-dual"]
