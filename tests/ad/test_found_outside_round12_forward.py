"""Forward mode: derivatives found silently wrong by the twelfth round of outside testers,
kept fixed.

- ``np.array([x, 2])``, ``np.asarray(x)``, ``np.full(2, x)`` of an integer ``x`` that carries
  a derivative (``derivative(f, 3)``) is an integer array that carries it: its rule made the
  tangent of every integer result zero, as if ``dtype=int`` had truncated floats (reverse mode
  was right).  A type asked for (``dtype=np.int32``, ``astype``) is still a cast, without
  derivative.
- A value written into an integer or bool array: a write was not followed at all (an integer
  array "dropped the derivative with the fractional part"), so ``s = p.copy(); s[0] = 7`` of
  an integer ``p`` kept ``p[0]``'s tangent in ``s[0]``.  Now a float written into an integer
  array is truncated and anything written into a bool array is a truth value (the element's
  derivative is 0, as ``int(x)``'s), and an integer written into an integer array keeps its
  derivative -- through ``a[i] = v``, ``a.fill``, ``np.copyto``, ``a.flat``, ``+=`` and
  ``out=`` (with ``casting="unsafe"``: what the operation computed decides).
- ``s.flat[i] = v`` into an array the derivative did not know yet was a native write of the
  plain number: a silent zero (``s.flat.__setitem__(i, v)`` raised MissingRuleError).  It is
  the index write it amounts to now, NumPy's cycling of the values over the positions
  included; a flat iterator taken before its array was written is read by index, and refused
  (MissingRuleError) for anything else, which would read plain numbers.

Each derivative is checked against central finite differences and, where it answers the same
question, reverse mode, on the forward routes, first and repeated calls.
"""

from __future__ import annotations

import numpy as np
import pytest

from overdub_ad import MissingRuleError, derivative, jacfwd, jacrev, jvp
from overdub_ad.testing import REFERENCE, force_route

pytestmark = pytest.mark.every_route

FORWARD_ROUTES = [None, REFERENCE, "forward-dual"]


def _central(f, x, h=1e-6):
    """Central differences of ``f`` at ``x`` (a float or a 1-D float array): the input's
    axis last."""
    if np.ndim(x) == 0:
        return (np.asarray(f(x + h), float) - np.asarray(f(x - h), float)) / (2 * h)
    columns = []
    for i in range(np.size(x)):
        e = np.zeros_like(x)
        e[i] = h
        columns.append((np.asarray(f(x + e), float) - np.asarray(f(x - e), float)) / (2 * h))
    return np.moveaxis(np.array(columns), 0, -1)


def _forward(f, x, direction):
    """``jacfwd``'s Jacobian and ``jvp``'s tangent along ``direction`` (and ``derivative``'s
    for a scalar input), as float arrays."""
    results = {"jacfwd": jacfwd(f)(x), "jvp": jvp(f, (x,), (direction,))[1]}
    if np.ndim(x) == 0:
        results["derivative"] = derivative(f, x)
    return {k: np.asarray(v, dtype=float) for k, v in results.items()}


# -- an array of differentiated integers --------------------------------------------------------

BUILT = {
    "array": lambda x: np.array([x, 2]) * 0.5,
    "asarray": lambda x: np.asarray(x) * 0.5,
    "array of x": lambda x: np.array(x) * 0.5,
    "sin": lambda x: np.sin(np.array([x, 1])),
    "squared": lambda x: np.array([x, x]) * x,
    "nested": lambda x: np.array([[x, 1], [2, x]]) @ np.array([0.5, 0.25]),
    "full": lambda x: np.full(2, x) * 0.5,
    "asanyarray": lambda x: np.asanyarray([x, 3 * x]) * 0.5,
}


@pytest.mark.parametrize("route", FORWARD_ROUTES)
@pytest.mark.parametrize("point", [3, np.int64(3), np.int32(3)], ids=["int", "int64", "int32"])
@pytest.mark.parametrize("name", BUILT)
def test_an_array_of_differentiated_integers_keeps_their_derivatives(name, point, route):
    f = BUILT[name]
    want = _central(f, 3.0)              # the same function at the same point, as floats
    assert np.any(want != 0.0)
    with force_route(route):
        np.testing.assert_allclose(jacrev(f)(point), want, rtol=1e-6)  # (the other mode)
        for _ in range(2):  # (first and repeated calls)
            for api, got in _forward(f, point, 1.0).items():
                np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=api)


CAST = {
    "dtype": lambda x: np.array([x, 2], dtype=np.int32) * 0.5,
    "astype": lambda x: np.array([x, 2]).astype(np.int32) * 0.5,
    "full dtype": lambda x: np.full(2, x, dtype=int) * 0.5,
    "full_like": lambda x: np.full_like(np.array([1, 2]), x) * 0.5,
}


@pytest.mark.parametrize("route", FORWARD_ROUTES)
@pytest.mark.parametrize("name", CAST)
def test_an_integer_type_asked_for_is_a_cast_without_derivative(name, route):
    """The other side of the line: an integer type asked for is the documented exemption
    (``x.astype(int)``), at an integer point too; reverse mode agrees."""
    f = CAST[name]
    with force_route(route):
        for _ in range(2):
            np.testing.assert_array_equal(jacrev(f)(3), [0.0, 0.0])
            for api, got in _forward(f, 3, 1.0).items():
                np.testing.assert_array_equal(got, [0.0, 0.0], err_msg=api)


# -- values written into integer and bool arrays --------------------------------------------------

def _copy_constant(p):
    s = p.copy()
    s[0] = 7                         # s[0] no longer depends on p
    return s


def _copy_truncated(p):
    s = p.copy()
    s[0] = p[1] * 0.5                # (p.copy() of a real point: floats, nothing truncated)
    return s


def _copy_integer(p):
    s = p.copy()
    s[0] = p[1] * 2                  # an integer stored as it is
    return s


def _fill_integer(p):
    s = p.copy()
    s.fill(p[2])
    return s


def _fill_truncated(p):
    s = p.copy()
    s.fill(p[2] * 0.5)
    return s


def _copyto_unsafe(p):
    s = p.copy()
    np.copyto(s, p * 0.5, casting="unsafe")
    return s


def _int32_rows(p):
    a = np.zeros((2, 3), dtype=np.int32)
    a[0, :] = p
    a[1, :] = p * 0.5
    return a


def _uint8(p):
    a = np.zeros(3, dtype=np.uint8)
    a[:] = p * 2
    return a


def _bool_target(p):
    m = np.zeros(3, dtype=bool)
    m[:] = p                         # truth values: the product's derivative is m
    return m * p


def _added_in_place(p):
    s = p.copy()
    s += p[::-1]
    return s


def _out_unsafe(p):
    s = p.copy()
    np.multiply(p, 0.5, out=s, casting="unsafe")
    return s


def _through_flat(p):
    s = p.copy()
    s.flat[1] = p[2] * 0.5
    s.flat[2] = p[0]
    return s


_EYE = np.eye(3)
# the Jacobians at p = [0, 1, 2], an integer array: differentiated as the real point it is (both
# modes make it floats), so p.copy() holds floats and only the arrays of integers made here
# (np.zeros(..., dtype=int32)) truncate what is written into them
AT_AN_INTEGER_POINT = {
    "copy constant": (_copy_constant, np.diag([0.0, 1.0, 1.0])),
    "copy of a half": (_copy_truncated, [[0.0, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]),
    "copy integer": (_copy_integer, [[0.0, 2.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]),
    "fill integer": (_fill_integer, [[0.0, 0.0, 1.0]] * 3),
    "fill with a half": (_fill_truncated, [[0.0, 0.0, 0.5]] * 3),
    "copyto unsafe": (_copyto_unsafe, 0.5 * _EYE),
    "int32 rows": (_int32_rows, np.zeros((2, 3, 3))),
    "uint8": (_uint8, np.zeros((3, 3))),
    "bool": (_bool_target, np.diag([0.0, 1.0, 1.0])),
    "+=": (_added_in_place, _EYE + _EYE[::-1]),
    "out= unsafe": (_out_unsafe, 0.5 * _EYE),
    "flat": (_through_flat, [[1.0, 0.0, 0.0], [0.0, 0.0, 0.5], [1.0, 0.0, 0.0]]),
}


@pytest.mark.parametrize("route", FORWARD_ROUTES)
@pytest.mark.parametrize("name", AT_AN_INTEGER_POINT)
def test_a_write_into_an_integer_array_at_an_integer_point(name, route):
    """Both modes differentiate the function at the real point (found from outside: forward
    mode kept integer semantics, truncating p[1] * 0.5 written into p.copy(), where reverse
    mode differentiated floats: 0 against 0.5)."""
    f, want = AT_AN_INTEGER_POINT[name]
    direction = np.array([1.0, 2.0, 3.0])
    with force_route(route):
        for _ in range(2):
            np.testing.assert_allclose(jacrev(f)(np.arange(3)), want, err_msg=name)
            got = _forward(f, np.arange(3), direction)
            np.testing.assert_allclose(got["jacfwd"], want, err_msg=name)
            np.testing.assert_allclose(got["jvp"], np.asarray(want) @ direction, err_msg=name)
            np.testing.assert_allclose(got["jacfwd"], jacfwd(f)(np.arange(3.0)), err_msg=name)


def _set_rows(p):
    a = np.zeros(3, dtype=int)
    a[:] = p * 10                    # [7, 15, 3]: constant near p
    return a * p


def _fill_rows(p):
    a = np.zeros((2, 3), dtype=np.int32)
    a.fill(p[0] * 10)
    return a * p


def _copyto_rows(p):
    a = np.zeros(3, dtype=np.uint8)
    np.copyto(a, p * 10, casting="unsafe")
    return a * p


def _flat_rows(p):
    a = np.zeros(3, dtype=int)
    a.flat[:] = p * 10
    return a * p


def _bool_rows(p):
    m = np.zeros(3, dtype=bool)
    m[1:] = p[1:]
    return m * p


def _added_unsafe(p):
    a = np.array([1, 2, 3])
    np.add(a, p * 10, out=a, casting="unsafe")
    return a * p


AT_A_FLOAT_POINT = {f.__name__[1:]: f for f in (
    _set_rows, _fill_rows, _copyto_rows, _flat_rows, _bool_rows, _added_unsafe)}


@pytest.mark.parametrize("route", FORWARD_ROUTES)
@pytest.mark.parametrize("name", AT_A_FLOAT_POINT)
def test_a_float_written_into_an_integer_array_is_truncated(name, route):
    f = AT_A_FLOAT_POINT[name]
    p = np.array([0.73, 1.51, 0.32])
    direction = np.array([1.0, -2.0, 0.5])
    want = _central(f, p)
    with force_route(route):
        np.testing.assert_allclose(jacrev(f)(p), want, rtol=1e-6)
        for _ in range(2):
            got = _forward(f, p, direction)
            np.testing.assert_allclose(got["jacfwd"], want, rtol=1e-6)
            np.testing.assert_allclose(got["jvp"], want @ direction, rtol=1e-6)


def test_a_differentiated_value_written_into_an_object_array_is_refused():
    """NumPy keeps it as a Python object, which forward mode does not follow: an error, not the
    zero it gave (reverse mode follows it)."""
    def f(x):
        s = np.empty(2, dtype=object)
        s[0] = x
        s[1] = 1.0
        return np.array([s[0], s[1]], dtype=float)
    np.testing.assert_array_equal(jacrev(f)(1.5), [1.0, 0.0])
    for route in FORWARD_ROUTES:
        with force_route(route), pytest.raises(MissingRuleError, match="object array"):
            derivative(f, 1.5)


# -- writes through a.flat ---------------------------------------------------------------------

def _flat_one(p):
    s = np.zeros(3)
    s.flat[1] = p[0] * p[1]
    return s


def _flat_slice(p):
    s = np.zeros(4)
    s.flat[2:] = p[1:]
    return s


def _flat_cycled(p):
    s = np.zeros(5)
    s.flat[:4] = p[:2] * 2.0         # NumPy cycles the values: 2 p0, 2 p1, 2 p0, 2 p1
    return s


def _flat_short(p):
    s = np.zeros(3)
    s.flat[2:] = p[1:]               # one position: the first value
    return s


def _flat_matrix(p):
    s = np.zeros((2, 3))
    s.flat[[0, 4]] = p[:2]
    s.flat[5] = p[2] ** 2
    return s


def _flat_repeated(p):
    s = np.zeros(3)
    s.flat[[0, 0, 2]] = p            # the last write to a position wins
    return s


def _flat_of_a_view(p):
    s = np.zeros((3, 2)).T           # C order of the view, not of its memory
    s.flat[1] = p[0] * 3.0
    s.flat[5] = p[2]
    return s


def _flat_mask(p):
    s = np.ones(3)
    s.flat[np.array([True, False, True])] = p[:2] * p[2]
    return s


def _flat_of_a_differentiated_array(p):
    s = p * 1.0
    s.flat[0] = 2.0
    s.flat[1:3] = p[:2] ** 2
    return s


def _flat_cycled_differentiated(p):
    s = np.concatenate([p, p])
    s.flat[1:5] = p[:2] * 3.0
    return s


def _flat_spelled(p):
    s = np.zeros(3)
    s.flat.__setitem__(0, p[0] * p[2])
    np.flatiter.__setitem__(s.flat, 2, p[1] ** 2)
    return s


def _flat_rewritten(p):
    s = np.zeros(3)
    s.flat[0] = p[0] * 5.0
    s.flat[0] = 1.0
    s.flat[1] = p[1]
    return s


def _flat_zero_dimensional(p):
    s = np.zeros(())
    s.flat[0] = p[1] * p[2]
    return s * 1.0


def _flat_held(p):
    s = np.zeros(3)
    it = s.flat                      # taken before the array held derivatives
    s[1] = p[0] * 2.0
    it[2] = p[2]
    return it[1] * p[1] + it[2]


FLAT = {f.__name__[6:]: f for f in (
    _flat_one, _flat_slice, _flat_cycled, _flat_short, _flat_matrix, _flat_repeated,
    _flat_of_a_view, _flat_mask, _flat_of_a_differentiated_array, _flat_cycled_differentiated,
    _flat_spelled, _flat_rewritten, _flat_zero_dimensional, _flat_held)}
# (reverse mode does not cycle values, nor read a flat iterator taken before the write, nor
# take a spelled flatiter.__setitem__)
REVERSE_FLAT = ("one", "slice", "matrix", "repeated", "of_a_view", "mask",
                "of_a_differentiated_array", "rewritten", "zero_dimensional")


@pytest.mark.parametrize("route", FORWARD_ROUTES)
@pytest.mark.parametrize("name", FLAT)
def test_a_write_through_flat_is_followed(name, route):
    f = FLAT[name]
    p = np.array([0.5, 1.5, 0.3])
    direction = np.array([1.0, -2.0, 0.5])
    want = _central(f, p)
    assert np.any(want != 0.0)
    with force_route(route):
        if name in REVERSE_FLAT:
            np.testing.assert_allclose(jacrev(f)(p), want, rtol=1e-6, atol=1e-9)
        for _ in range(2):
            got = _forward(f, p, direction)
            np.testing.assert_allclose(got["jacfwd"], want, rtol=1e-6, atol=1e-9)
            np.testing.assert_allclose(got["jvp"], want @ direction, rtol=1e-6, atol=1e-9)
            np.testing.assert_array_equal(jvp(f, (p,), (direction,))[0], f(p))  # (values)


@pytest.mark.parametrize("name", ["one", "cycled", "of_a_differentiated_array", "held"])
def test_a_write_through_flat_under_a_second_derivative(name):
    """Nested forward mode, and reverse over forward: the inner context's write is an index
    write to the outer one."""
    f = FLAT[name]

    def g(p):
        return np.sum(np.asarray(f(p)) ** 2)
    p = np.array([0.5, 1.5, 0.3])
    want = _central(lambda q: _central(g, q, 1e-5), p, 1e-4)
    np.testing.assert_allclose(jacfwd(jacfwd(g))(p), want, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(jacrev(jacfwd(g))(p), want, rtol=1e-4, atol=1e-6)


def test_the_scalar_derivative_through_flat():
    """The reproducer's ``derivative``: a scalar written through ``s.flat.__setitem__``."""
    def f(x):
        s = np.zeros(2)
        s.flat.__setitem__(0, x * x)
        s.flat[1] = 3.0 * x
        return s
    for route in FORWARD_ROUTES:
        with force_route(route):
            for _ in range(2):
                np.testing.assert_allclose(derivative(f, 0.3), [0.6, 3.0])
                np.testing.assert_allclose(jvp(f, (0.3,), (2.0,))[1], [1.2, 6.0])


def test_iterating_a_flat_iterator_taken_before_the_write_is_refused():
    """NumPy's iterator reads the plain numbers of the array: refused, never a zero; taken
    again after the write (``a.flat`` of a differentiated array) it is followed."""
    def held(x):
        s = np.zeros(3)
        it = s.flat
        s[1] = x * 2.0
        return np.array(list(it))

    def taken_again(x):
        s = np.zeros(3)
        s[1] = x * 2.0
        return np.array(list(s.flat))
    for route in FORWARD_ROUTES:
        with force_route(route):
            with pytest.raises(MissingRuleError, match="take a.flat again"):
                derivative(held, 1.5)
            np.testing.assert_array_equal(derivative(taken_again, 1.5), [0.0, 2.0, 0.0])


def test_a_flat_iterator_made_before_the_run_is_read_by_index():
    """A buffer and its flat iterator made outside ``f``: the buffer written inside, read
    back through the iterator (a plain number, natively: a zero)."""
    buffer = np.zeros(3)
    it = buffer.flat

    def f(x):
        buffer[:] = 0.0
        buffer[1] = x * 2.0
        return it[1] * x
    want = _central(f, 1.5)
    for route in FORWARD_ROUTES:
        with force_route(route):
            for _ in range(2):
                assert derivative(f, 1.5) == pytest.approx(want, rel=1e-6)
                assert jvp(f, (1.5,), (2.0,))[1] == pytest.approx(2.0 * want, rel=1e-6)
