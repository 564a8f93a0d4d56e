"""The dual route (forward-dual) on slices and iteration of a NumPy parameter array.

Found (outside tester, speed #16): ``jvp``/``derivative``/``jacfwd`` of scalar code that
unpacks a parameter vector the ordinary way -- ``k, c = p[:2]``, ``p[1:]``, ``tuple(p[:2])``,
``list(p)``, ``zip(p, q)``, ``enumerate(p)``, ``sum(p[1:])``, a row ``P[0]`` of a matrix --
made the dual route decline ("an array indexed other than element by element", "a call of
list/zip/enumerate"), so the whole call ran on the general forward mode, 20x slower on the
tester's example.  Only element reads ``p[0]`` and ``for v in p`` ran on the route.

Fixed: the dual reads an array by integers and slices (basic indexing: an element or a view,
its tangent the tangent's same item behind jacfwd's batch dimensions), iterates arrays of any
rank (elements or rows), takes ``tuple``/``list`` of them, zips and enumerates them with their
tangents in step, and runs Python's ``sum`` of an array with a batch of directions (its shipped
rule counts the array's axis from the end).  A view is only read: every write into an array
(``a[0] = ...``, ``a *= ...``, ``np.add(..., out=a)``) stops the route before it happens, and
the general mode computes the result -- ``out=`` of a constant array, which the route took
with a silent wrong tangent before (``np.multiply(x, 2.0, out=w)``, by keyword, or by
position: ``np.cumsum(p, 0, None, w)``), stops now too.

Each style runs under jvp, derivative and jacfwd, twice, on the default routes and on the
reference route, compared with each other and with finite differences; ``explain`` shows the
dual route ran each style.
"""

from __future__ import annotations

import numpy as np
import pytest

from overdub_ad import derivative, explain, jacfwd, jvp
from overdub_ad.testing import REFERENCE, force_route
from tests.conftest import fd

pytestmark = pytest.mark.every_route


def outside_example(p):
    """The outside tester's example: a parameter vector unpacked by a slice."""
    k, c = p[:2]
    x = p[2]
    for _ in range(50):
        x = x - 0.1 * (k * x + c * x * x)
    return x


def head_slice(p):
    a = p[:2]
    return a[0] * a[1] + p[2]


def tail_slice(p):
    a = p[1:]
    return a[0] * a[1] - a[-1] ** 2


def stepped_slice(p):
    a = p[::2]
    return a[0] * a[1]


def reversed_slice(p):
    a = p[::-1]
    b = p[-1:0:-2]
    return a[0] * a[2] + a[1] * b[0]


def tuple_of_slice(p):
    a, b = tuple(p[:2])
    return a * b + p[2]


def list_of_array(p):
    items = list(p)
    return items[0] * items[1] * items[2] + items[-1]


def unpacked_slice(p):
    a, b = p[:2]
    return a * b


def unpacked_array(p):
    a, b, c = p
    return a * b + c


def for_loop(p):
    total = 0.0
    for v in p:
        total = total * v + v
    return total


def zipped(p):
    q = np.array([1.0, 2.0, 3.0])
    total = 0.0
    for a, b in zip(p, q):
        total += a * a * b
    for a, b in zip(p[1:], p):
        total += a * b
    return total


def enumerated(p):
    total = 0.0
    for i, v in enumerate(p):
        total += i * v * v
    for i, v in enumerate(p[1:], 1):
        total += i * v
    return total


def python_sum(p):
    return sum(p[1:]) * p[0] + sum(p[:0])


def matrix_rows(P):
    r = P[0]
    c = P[:, 1]
    total = r[0] * r[1] + P[1][0] * P[1, 1] + c[0] * c[1]
    for row in P:
        for v in row:
            total = 0.5 * total + v * v
    first, second = P
    return total + first[1] * second[0] + sum(P)[0] + list(P)[1][1]


VECTOR = [outside_example, head_slice, tail_slice, stepped_slice, reversed_slice,
          tuple_of_slice, list_of_array, unpacked_slice, unpacked_array, for_loop, zipped,
          enumerated, python_sum]
P = np.array([1.3, 0.2, 0.8])
DP = np.array([1.0, -0.5, 0.25])
M = np.array([[1.3, 0.2], [0.8, -0.4]])
DM = np.array([[1.0, 0.5], [-2.0, 0.25]])


def _cases():
    return [(f, P, DP) for f in VECTOR] + [(matrix_rows, M, DM)]


def _id(case):
    return case[0].__name__


@pytest.mark.default_routes
@pytest.mark.parametrize("case", _cases(), ids=_id)
def test_the_dual_route_runs_the_style(case):
    f, p, dp = case
    for _ in range(2):
        report = explain(jvp, f, (p,), (dp,))
        assert report.ran == ["forward-dual"], str(report)
        report = explain(jacfwd, f, p)
        assert report.ran == ["forward-dual"], str(report)


def _on_routes(compute):
    """``compute()`` twice on the default routes and twice on the reference route: the
    results agree with each other (all four)."""
    got = [compute() for _ in range(2)]
    with force_route(REFERENCE):
        got += [compute() for _ in range(2)]
    for other in got[1:]:
        np.testing.assert_allclose(other, got[0], rtol=1e-12, atol=1e-15)
    return got[0]


@pytest.mark.default_routes
@pytest.mark.parametrize("case", _cases(), ids=_id)
def test_jvp_agrees_with_the_reference_and_finite_differences(case):
    f, p, dp = case
    value = _on_routes(lambda: jvp(f, (p,), (dp,))[0])
    tangent = _on_routes(lambda: jvp(f, (p,), (dp,))[1])
    assert value == pytest.approx(f(p), rel=1e-14)
    jac = fd(f, p)
    assert tangent == pytest.approx(np.tensordot(jac, dp, axes=dp.ndim), rel=1e-6)


@pytest.mark.default_routes
@pytest.mark.parametrize("case", _cases(), ids=_id)
def test_derivative_agrees_with_the_reference_and_finite_differences(case):
    f, p, _ = case
    d = _on_routes(lambda: derivative(f, p))
    assert d == pytest.approx(np.sum(fd(f, p)), rel=1e-6)


@pytest.mark.default_routes
@pytest.mark.parametrize("case", _cases(), ids=_id)
def test_jacfwd_agrees_with_the_reference_and_finite_differences(case):
    f, p, _ = case
    jac = _on_routes(lambda: jacfwd(f)(p))
    np.testing.assert_allclose(jac, fd(f, p), rtol=1e-6)


def returns_views(p):
    return p[1:], p[::-1][0], p[:2] * p[2]


@pytest.mark.default_routes
def test_a_slice_returned_carries_the_tangents_slice():
    for _ in range(2):
        report = explain(jvp, returns_views, (P,), (DP,))
        assert report.ran == ["forward-dual"], str(report)
        (view, last, scaled), (dview, dlast, dscaled) = report.result
        with force_route(REFERENCE):
            _, want = jvp(returns_views, (P,), (DP,))
        np.testing.assert_array_equal(view, P[1:])
        np.testing.assert_allclose(dview, DP[1:], rtol=0)
        np.testing.assert_allclose(dview, want[0], rtol=0)
        assert dlast == want[1] == DP[-1]
        np.testing.assert_allclose(dscaled, want[2], rtol=1e-14)
        np.testing.assert_allclose(jacfwd(returns_views)(P)[0], np.eye(3)[1:])


def written_item(p):
    a = p[1:]
    a[0] = a[0] * 2.0   # a write into p, through the view
    return a[0] + p[1] * p[0]


def written_in_place(p):
    a = p[1:]
    a *= p[0]           # in place, through the view
    return a[0] + p[1] * p[2]


def written_by_out(p):
    a = p[1:]
    np.add(p[0], 1.0, out=a)
    return a[0] * p[2]


W = np.zeros(3)


def written_constant(p):
    w = W[1:]
    np.multiply(p[0], 2.0, out=w)   # a constant array given a value with a tangent
    return w[0] * p[1]


def written_constant_whole(p):
    np.multiply(p[0], 2.0, out=W)   # (the route took this with a zero tangent for W[0])
    return W[0] * p[1]


def written_positionally(p):
    np.cumsum(p, 0, None, W)   # out= by position
    np.cumsum(p[1:], 0, None, W[1:])
    return W[2] * p[0]


@pytest.mark.default_routes
def test_out_given_by_position_stops_the_dual_route():
    # (the general mode's tangent leaves the write out too, as of this test: reported)
    for _ in range(2):
        W[:] = 0.0
        report = explain(jvp, written_positionally, (P.copy(),), (DP,))
        assert "forward-dual" not in report.ran, str(report)
        assert "given out=" in str(report), str(report)


@pytest.mark.default_routes
@pytest.mark.parametrize("f", [written_item, written_in_place, written_by_out,
                               written_constant, written_constant_whole],
                         ids=lambda f: f.__name__)
def test_a_write_into_a_slice_stops_the_dual_route_with_the_references_answer(f):
    for _ in range(2):
        W[:] = 0.0
        report = explain(jvp, f, (P.copy(),), (DP,))
        assert "forward-dual" not in report.ran, str(report)
        W[:] = 0.0
        with force_route(REFERENCE):
            want = jvp(f, (P.copy(),), (DP,))
        assert report.result[0] == pytest.approx(want[0], rel=1e-14)
        assert report.result[1] == pytest.approx(want[1], rel=1e-12)
        W[:] = 0.0
        jac = jacfwd(f)(P.copy())
        W[:] = 0.0
        with force_route(REFERENCE):
            np.testing.assert_allclose(jac, jacfwd(f)(P.copy()), rtol=1e-12)

    def along(t):  # the program's own derivative: the write is part of the function
        W[:] = 0.0
        return f(P + t * DP)  # (a new array each time: P is not written)
    direction = fd(along, 0.0)
    assert report.result[1] == pytest.approx(direction, rel=1e-6)
