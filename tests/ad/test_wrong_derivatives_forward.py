"""Issue 14, forward mode and its nestings: derivatives that came out silently wrong, kept fixed.

Each case is checked against central finite differences and against the other mode (``jacfwd``
/ ``derivative`` against ``jacrev`` / ``grad``), on a first and a repeated call, at several
random points; second derivatives by ``jacfwd(jacfwd)``, ``hessian`` (forward over reverse) and
``jacrev(jacfwd)`` against finite differences.  A case is written as a ``def``, a lambda and a
method where Python allows the construct in each.

The roots fixed: a constant written into a differentiated array gives the written elements a
zero tangent (the array's memory remembers it); a differentiated value read out of an array
written in place is read through the memory's tangents at every nesting level; an array
reshaped in place (``a.shape = s``, as ``np.meshgrid`` does) reshapes its tangent; a list of
arrays given to NumPy is one array to it, the tangent's batch dimensions in front; objects
iterated by Python code (``__iter__``, generators, ``__getitem__``) are iterated through the
context by the builtins that consume them; a tuple rebuilt by an enclosing context when stored
keeps the inner context's metadata; a dict's ``values()`` and a builtin's iteration keep an
enclosing context's tags; an operator between a user object and a value tagged by an enclosing
context runs the object's Python method; a NumPy scalar times a user object runs the object's
reflected method through the context; ``np.linalg.solve``'s rule lifts the matrix tangent
against a stack of right-hand sides (``jacfwd(jacfwd)`` through ``det``, ``qr``...).
"""

from __future__ import annotations

import collections
import functools
import heapq
import itertools
import math
import operator
import statistics

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overdub_ad import derivative, grad, hessian, jacfwd, jacrev, jvp
from tests.conftest import fd

RNG = np.random.default_rng(1414)


def fd_hessian(f, x):
    return fd(lambda z: fd(f, z, 1e-4), x, 1e-4)


def check(f, x, *, reverse=True, rtol=1e-5, atol=1e-6):
    """``f``'s Jacobian by forward mode (``jacfwd``, ``jvp`` along a random direction), first and
    repeated calls, against finite differences and, with ``reverse``, against ``jacrev``."""
    want = fd(f, x)
    scalar = isinstance(x, float)
    v = 1.0 if scalar else RNG.standard_normal(np.shape(x))
    for _ in range(2):
        np.testing.assert_allclose(jacfwd(f)(x), want, rtol=rtol, atol=atol)
        directional = want * v if scalar else np.tensordot(want, v, axes=np.ndim(x))
        np.testing.assert_allclose(jvp(f, (x,), (v,))[1], directional, rtol=rtol, atol=atol)
        if scalar:
            np.testing.assert_allclose(derivative(f)(x), want, rtol=rtol, atol=atol)
        if reverse:
            np.testing.assert_allclose(jacrev(f)(x), want, rtol=rtol, atol=atol)


def check_second(f, x, *, reverse=True, rtol=1e-4, atol=1e-5):
    """Second derivatives of scalar ``f``: forward over forward, forward over reverse
    (``hessian``) and reverse over forward, first and repeated calls, against finite
    differences of finite differences."""
    want = fd_hessian(f, x)
    for _ in range(2):
        if isinstance(x, float):
            np.testing.assert_allclose(derivative(derivative(f))(x), want, rtol=rtol, atol=atol)
            if reverse:
                np.testing.assert_allclose(grad(derivative(f))(x), want, rtol=rtol, atol=atol)
                np.testing.assert_allclose(derivative(grad(f))(x), want, rtol=rtol, atol=atol)
            continue
        np.testing.assert_allclose(jacfwd(jacfwd(f))(x), want, rtol=rtol, atol=atol)
        if reverse:
            np.testing.assert_allclose(hessian(f)(x), want, rtol=rtol, atol=atol)
            np.testing.assert_allclose(jacrev(jacfwd(f))(x), want, rtol=rtol, atol=atol)


def points(shape, n=3):
    if shape == ():
        return [float(v) for v in RNG.uniform(0.3, 1.7, n)]
    return [RNG.uniform(-1.5, 1.5, shape) for _ in range(n)]


# -- item 1: a constant written into a differentiated array ---------------------------------------

def element_write_def(x):
    y = x * x
    y[0] = 0.0
    return y


def slice_write_def(x):
    y = x * x
    y[1:] = 0.0
    return y


def mask_write_def(x):
    y = x * x
    y[y > 0.5] = 0.0
    return y


def copy_write_def(x):
    y = np.array(x)
    y[0] = 0.0
    return y


def list_write_def(x):
    y = np.sin(x)
    y[:2] = [0.5, 0.25]
    return y


def zeroed(y):
    y[0] = 0.0
    return y


class Clamp:
    def __init__(self, limit):
        self.limit = limit

    def apply(self, x):
        y = np.tanh(x) * 2.0
        y[np.abs(y) > self.limit] = self.limit
        return y


@pytest.mark.parametrize("f", [element_write_def, slice_write_def, mask_write_def,
                               copy_write_def, list_write_def,
                               lambda x: zeroed(x * x), Clamp(0.8).apply])
def test_constant_written_into_a_differentiated_array(f):
    for x in points((4,)):
        check(f, x)
        check_second(lambda x: np.sum(f(x) ** 3), x)


def test_constant_written_jacobian_diagonal():
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(jacfwd(element_write_def)(x), np.diag([0.0, 4.0, 6.0]))
    np.testing.assert_allclose(jacfwd(slice_write_def)(x), np.diag([2.0, 0.0, 0.0]))


@settings(max_examples=20, deadline=None)
@given(st.lists(st.floats(-2, 2), min_size=3, max_size=5),
       st.sampled_from(["int", "slice", "mask", "negative"]))
def test_constant_writes_any_key(values, kind):
    x = np.array(values)
    key = {"int": 1, "slice": slice(None, None, 2), "mask": x > 0, "negative": -1}[kind]

    def f(x):
        y = np.exp(x)
        y[key] = 0.5
        return y

    want = np.diag(np.exp(x))
    want[key] = 0.0
    np.testing.assert_allclose(jacfwd(f)(x), want, rtol=1e-12)
    np.testing.assert_allclose(jacfwd(f)(x), jacrev(f)(x), rtol=1e-12)


def view_write_def(x):
    y = x * x
    y[1:][0] = 0.0
    return y


def out_constant_def(x):
    y = x * x
    np.multiply(np.ones(3), 2.0, out=y)
    return y * x


def transposed_write_def(x):
    y = np.outer(x, x)
    y.T[0] = 0.0
    return y.ravel()


CONSTANT_WRITES = {
    "view": view_write_def, "out": out_constant_def, "transposed": transposed_write_def,
    "fill": lambda x: (lambda y: (y.fill(0.5), y * x)[1])(x * x),
    "put": lambda x: (lambda y: (np.put(y, [0], 0.5), y)[1])(x * x),
    "putmask": lambda x: (lambda y: (np.putmask(y, y > 0.5, 0.0), y)[1])(x * x),
    "place": lambda x: (lambda y: (np.place(y, y > 0.5, [0.0]), y)[1])(x * x),
    "copyto": lambda x: (lambda y: (np.copyto(y, 1.0), y * x)[1])(x * x),
    "fill_diagonal": lambda x: (lambda y: (np.fill_diagonal(y, 0.0), y.ravel())[1])(
        np.outer(x, x)),
}


@pytest.mark.parametrize("name", list(CONSTANT_WRITES))
def test_constant_writes_by_other_means(name):
    f = CONSTANT_WRITES[name]
    for x in (np.array([0.3, -0.4, 0.9]), *points((3,))):
        check(f, x)
    check_second(lambda x: np.sum(f(x) ** 2), points((3,), 1)[0])


# -- second derivatives through element writes ----------------------------------------------------

def scaled_element_def(x):
    a = np.tanh(x)
    a[0] *= 3
    return np.sum(a)


def sin_out_def(x):
    a = np.tanh(x)
    np.sin(a, out=a)
    return np.sum(a)


def copyto_def(x):
    a = np.zeros(x.shape)
    np.copyto(a, np.tanh(x))
    return np.sum(a ** 3)


def add_into_element_def(x):
    a = np.tanh(x)
    a[1] += a[0] ** 2
    return np.sum(a ** 3)


def read_back_def(x):
    a = np.tanh(x)
    v = a[0] * 3
    a[0] = v
    return a[0] * a[1]


@pytest.mark.parametrize("f", [scaled_element_def, sin_out_def, copyto_def,
                               add_into_element_def, read_back_def])
def test_second_derivatives_through_element_writes(f):
    for x in points((3,)):
        check(f, x)
        check_second(f, x)


def test_scaled_element_hessian_value():
    x = np.array([0.3, -0.4])
    t = np.tanh(x)
    want = np.diag(-2 * t * (1 - t ** 2) * np.array([3.0, 1.0]))
    np.testing.assert_allclose(hessian(scaled_element_def)(x), want, rtol=1e-12)
    np.testing.assert_allclose(jacfwd(jacfwd(scaled_element_def))(x), want, rtol=1e-12)


def test_copyto_where_and_casting():
    def f(x):
        a = np.ones(2)
        np.copyto(a, x * 2, where=[True, False])
        return a

    def g(x):
        a = np.ones(2, dtype=int)
        np.copyto(a, x * 2)
        return a

    for x in points((2,)):
        check(f, x)
    with pytest.raises(TypeError, match="Cannot cast"):
        jacfwd(g)(np.ones(2))


# -- item 8: builtins iterating a user-defined iterable -------------------------------------------

class Bag:
    def __init__(self, a, b):
        self.items = [a, b]

    def __iter__(self):
        return iter(self.items)


class GenBag:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __iter__(self):
        yield self.a
        yield self.b


class IndexBag:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __getitem__(self, i):
        if i == 0:
            return self.a
        if i == 1:
            return self.b
        raise IndexError(i)


class CountBag:
    """Its own iterator, with a Python ``__next__``."""

    def __init__(self, a, b):
        self.values, self.i = (a, b), 0

    def __iter__(self):
        self.i = 0
        return self

    def __next__(self):
        if self.i == 2:
            raise StopIteration
        self.i += 1
        return self.values[self.i - 1]


CONSUMERS = {
    "sum": lambda bag: sum(bag),
    "max": lambda bag: max(bag),
    "min": lambda bag: min(bag),
    "list": lambda bag: list(bag)[1] * list(bag)[0],
    "tuple": lambda bag: tuple(bag)[1],
    "sorted": lambda bag: sorted(bag)[0],
    "zip": lambda bag: list(zip(bag, (1.0, 2.0)))[1][0],
    "enumerate": lambda bag: list(enumerate(bag))[1][1],
    "map": lambda bag: sum(map(math.sin, bag)),
    "for": lambda bag: [v * v for v in bag][1],
    "fsum": lambda bag: math.fsum(bag),
    "prod": lambda bag: math.prod(bag),
}


@pytest.mark.parametrize("bag", [Bag, GenBag, IndexBag, CountBag])
@pytest.mark.parametrize("consumer", list(CONSUMERS))
def test_builtins_consuming_a_user_iterable(bag, consumer):
    use = CONSUMERS[consumer]

    def f(x):
        return use(bag(x * x, 2.0 * x))

    for x in points(()):
        check(f, x)
        check(lambda x: use(bag(x * x, 2.0 * x)), x)
        check_second(f, x)


def unpacked_def(bag):
    a, b = bag
    return a * b


MORE_CONSUMERS = {
    "start": lambda bag: sum(bag, 1.0),
    "chain": lambda bag: list(itertools.chain(bag, [1.0]))[1],
    "islice": lambda bag: list(itertools.islice(bag, 1, 2))[0],
    "accumulate": lambda bag: list(itertools.accumulate(bag))[1],
    "reduce": lambda bag: functools.reduce(operator.mul, bag),
    "nlargest": lambda bag: heapq.nlargest(1, bag)[0],
    "fmean": lambda bag: statistics.fmean(bag),
    "array": lambda bag: np.sum(np.array(list(bag)) ** 2),
    "star": lambda bag: math.hypot(*bag),
    "unpacked": unpacked_def,
    "max key": lambda bag: max(bag, key=lambda v: -v),
    "dict": lambda bag: dict(zip("ab", bag))["b"],
}


class ReversibleBag(Bag):
    def __reversed__(self):
        return reversed(self.items)


class SizedIndexBag(IndexBag):
    def __len__(self):
        return 2


@pytest.mark.parametrize("bag", [ReversibleBag, SizedIndexBag])
def test_reversed_user_sequence(bag):
    for x in points(()):
        check(lambda x: list(reversed(bag(x * x, 3.0 * x)))[0], x)
    with pytest.raises(TypeError, match="not reversible"):
        derivative(lambda x: list(reversed(GenBag(x, x)))[0])(1.0)


@pytest.mark.parametrize("bag", [Bag, GenBag, IndexBag, CountBag])
@pytest.mark.parametrize("consumer", list(MORE_CONSUMERS))
def test_more_consumers_of_a_user_iterable(bag, consumer):
    use = MORE_CONSUMERS[consumer]
    for x in points(()):
        check(lambda x: use(bag(x * x, 3.0 * x)), x)


def test_accumulate_of_a_list():
    for x in points(()):
        check(lambda x: list(itertools.accumulate([x * x, 3.0 * x]))[1], x)


class Portfolio:
    """The method style: a method consuming an iterable object it builds."""

    def __init__(self, weight):
        self.weight = weight

    def value(self, x):
        return self.weight * sum(GenBag(x * x, math.sin(x))) + max(IndexBag(x, 2.0 * x))

    def value_fsum(self, x):
        return math.fsum(CountBag(self.weight * x, x ** 3))


def test_methods_consuming_a_user_iterable():
    book = Portfolio(1.5)
    for x in points(()):
        check(book.value, x)
        check(book.value_fsum, x)
        check_second(book.value, x)


def test_user_iterable_values():
    assert derivative(lambda x: sum(Bag(x, 2 * x)), 1.5) == 3.0
    assert grad(lambda x: math.fsum(GenBag(x, 2 * x)))(1.5) == 3.0
    assert derivative(lambda x: math.prod(IndexBag(x, 2 * x)), 1.5) == pytest.approx(6.0)
    assert grad(lambda x: math.prod(IndexBag(x, 2 * x)))(1.5) == pytest.approx(6.0)


def test_next_of_a_generator():
    def f(x):
        g = (v * 2 for v in [x, 3.0])
        return next(g)

    for x in points(()):
        check(f, x)


# -- item 16 and neighbours: containers overwritten under nested forward mode ---------------------

def overwrites_outer_tuple(x):
    def inner(y):
        out = [x]
        out[0] = y
        return out[0][0] * out[0][1]
    return jvp(inner, (x,), ((1.0, 0.0),))[1]  # = x[1]


def unary_to_nary(fun, argnum):
    """autograd's wrapper: differentiate ``fun`` with respect to one of its arguments."""
    def nary(*args):
        def unary(x):
            subargs = list(args)
            subargs[argnum] = x
            return fun(*subargs)
        return derivative(unary, args[argnum])
    return nary


def test_forward_over_forward_with_an_overwritten_tuple():
    for _ in range(2):
        assert overwrites_outer_tuple((2.0, 3.0)) == 3.0
        assert jvp(overwrites_outer_tuple, ((2.0, 3.0),), ((0.0, 1.0),)) == (3.0, 1.0)
        assert jvp(overwrites_outer_tuple, ((2.0, 3.0),), ((1.0, 0.0),)) == (3.0, 0.0)


def test_helper_built_argument_lists_under_nesting():
    d_first = unary_to_nary(lambda a, b: a * a * b, 0)       # 2 a b

    def via_partial(a, b):
        return derivative(functools.partial(lambda b, a: a * a * b, b), a)

    for a, b in zip(points(()), points(())):
        for _ in range(2):
            assert d_first(a, b) == pytest.approx(2 * a * b)
            assert derivative(lambda a: d_first(a, b))(a) == pytest.approx(2 * b)
            assert derivative(lambda b: d_first(a, b))(b) == pytest.approx(2 * a)
            assert grad(lambda b: d_first(a, b))(b) == pytest.approx(2 * a)
            assert derivative(lambda a: via_partial(a, b))(a) == pytest.approx(2 * b)


def several_argnums(fun, argnums):
    """A wrapper differentiating ``fun`` along its first ``argnums`` argument, the arguments
    substituted into a list built from the ones closed over (autograd's ``subvals``)."""
    def nary(*args):
        def unary(x):
            subargs = list(args)
            for i, n in enumerate(argnums):
                subargs[n] = x[i]
            return fun(*subargs)
        start = tuple(args[n] for n in argnums)
        seed = tuple(np.ones_like(v) if i == 0 else np.zeros_like(v) for i, v in enumerate(start))
        return jvp(unary, (start,), (seed,))[1]
    return nary


def test_several_argnums_wrapper_under_nesting():
    scalar = several_argnums(lambda a, b, c: a * a * b + c * b, (0, 2))   # 2 a b
    arrays = several_argnums(lambda a, b: np.sum(a * a * b), (0, 1))     # sum(2 a b)
    for a, b in zip(points(()), points(())):
        for _ in range(2):
            assert scalar(a, b, 5.0) == pytest.approx(2 * a * b)
            assert jvp(lambda b: scalar(a, b, 5.0), (b,), (1.0,))[1] == pytest.approx(2 * a)
            assert grad(lambda a: scalar(a, b, 5.0))(a) == pytest.approx(2 * b)
    for a, b in zip(points((2,)), points((2,))):
        for _ in range(2):
            np.testing.assert_allclose(jacfwd(lambda b: arrays(a, b))(b), 2 * a)
            np.testing.assert_allclose(jacfwd(lambda a: arrays(a, b))(a), 2 * b)


def test_tuples_stored_under_nesting():
    def in_dict(x):
        def inner(y):
            d = {"k": x}
            d["k"] = (y, x[1])
            return d["k"][0] * d["k"][1]
        return derivative(inner, x[0])

    class Holder:
        pass

    def in_attribute(x):
        def inner(y):
            h = Holder()
            h.pair = (y, x[1])
            return h.pair[0] * h.pair[1] ** 2
        return derivative(inner, x[0])

    def appended(x):
        def inner(y):
            out = []
            out.append((y, x[1]))
            out.insert(0, (x[1], y))
            out.extend([(y, y)])
            return out[1][0] * out[0][0] + out[2][1]
        return derivative(inner, x[0])

    for f, want in ((in_dict, (0.0, 1.0)), (in_attribute, (0.0, 6.0)), (appended, (0.0, 1.0))):
        for _ in range(2):
            assert jvp(f, ((2.0, 3.0),), ((0.0, 1.0),))[1] == pytest.approx(want[1])
            assert jvp(f, ((2.0, 3.0),), ((1.0, 0.0),))[1] == pytest.approx(want[0])


def dict_values_def(s):
    d = {}
    d["a"] = s
    return sum(d.values()) ** 2


def test_dict_values_under_nesting():
    for s in points(()):
        check(dict_values_def, s)
        check_second(dict_values_def, s)
        check_second(lambda s: list({"a": s}.values())[0] ** 3, s)
    assert derivative(derivative(dict_values_def))(1.5) == 2.0


# -- item 18: lists of differentiated arrays given to NumPy ---------------------------------------

def sin_of_a_list_def(x):
    return np.sum(np.sin([x, 2 * x]))


def det_of_nested_list_def(x):
    return np.linalg.det([[x[0], x[0]], x])


def meshgrid_def(x):
    grid_x, grid_y = np.meshgrid(x, np.array([1.0, 2.0, 3.0]))
    return np.sum(grid_x ** 2 * grid_y)


def ragged_concatenate_def(x):
    return np.concatenate([[x[0]], x, [1.0, x[1]]])


@pytest.mark.parametrize("f", [sin_of_a_list_def, det_of_nested_list_def, meshgrid_def,
                               lambda x: np.sum(np.sin([x])), lambda x: np.sum([x] + x),
                               lambda x: np.prod(np.stack([x, x ** 2])),
                               lambda x: np.sum(np.dot([[1.0, x[0]], x], x) ** 2),
                               lambda x: np.sum(np.einsum("ij,j->i", [x, np.sin(x)], x) ** 2),
                               lambda x: np.sum(np.broadcast_arrays([x, x], 1.0)[0] ** 3),
                               lambda x: np.sum(np.array([x, np.cos(x)]) ** 2)])
def test_batched_forward_through_a_list_of_arrays(f):
    for x in points((2,)):
        check(f, x)
        check_second(f, x)
        np.testing.assert_allclose(jacfwd(f, chunk=1)(x), fd(f, x), rtol=1e-5, atol=1e-6)


def test_sin_of_a_list_value():
    x = np.array([0.3, -0.4])
    np.testing.assert_allclose(jacfwd(sin_of_a_list_def)(x), np.cos(x) + 2 * np.cos(2 * x))


def test_sequences_with_lists_and_scalars():
    for x in points((2,)):
        check(ragged_concatenate_def, x)
        check(lambda x: np.concatenate([[x[0]], x, [1.0, x[1]]]), x)
    for s in points(()):
        check(lambda s: np.sum(np.concatenate([[s], [1.0, 2.0], np.array([s, s])]) ** 2), s)
        check(lambda s: np.array((0.05, s)), s)
        check(lambda s: np.sum(np.array((0.05, s)) ** 2), s)
        check(lambda s: np.hstack([[s, 1.0], np.array([s])]) * s, s)
        check(lambda s: np.concatenate([[s], [1.0, 2.0]]), s)
        check(lambda s: np.stack(((s, 1.0), (2.0, s))), s)
        check(lambda s: np.dot((1.0, s), (s, 3.0)), s)
        check(lambda s: np.linalg.det([[1.0, s], [s, 2.0]]), s)
        np.testing.assert_allclose(jacfwd(lambda s: np.dot((1.0, s), (s, 3.0)), chunk=1)(s),
                                   4.0)


def test_jacfwd_wrt_an_argument_the_output_ignores():
    x, y = np.array([0.3, -0.4]), np.ones(3)
    for f in (lambda a, b: np.sum(a), lambda a, b: a * 2.0, lambda a, b: 3.0,
              lambda a, b: np.cumsum(a)):
        out = np.shape(f(x, y))
        np.testing.assert_array_equal(jacfwd(f, argnums=1)(x, y), np.zeros(out + (3,)))
        np.testing.assert_array_equal(jacfwd(f, argnums=1)(x, 2.0), np.zeros(out))
        np.testing.assert_array_equal(jacrev(f, argnums=1)(x, y), np.zeros(out + (3,)))
    assert jacfwd(lambda a, b: a * a, argnums=1)(1.5, 2.0) == 0.0


# -- item 18: user operators under nesting, NumPy scalars times user objects ----------------------

class Vec:
    def __init__(self, a):
        self.a = a

    def __mul__(self, other):
        return Vec(self.a * other)

    def __rmul__(self, other):
        return Vec(other * self.a)


def user_mul_nested(x):
    return derivative(lambda z: (Vec(z * z) * x).a, 3.0)  # 6 x


def test_user_operator_receives_an_outer_differentiated_value():
    for x in points(()):
        for _ in range(2):
            assert user_mul_nested(x) == pytest.approx(6 * x)
            assert jvp(user_mul_nested, (x,), (1.0,)) == pytest.approx((6 * x, 6.0))
            assert grad(user_mul_nested)(x) == pytest.approx(6.0)
            assert derivative(lambda x: derivative(lambda z: (x * Vec(z * z)).a, 3.0))(x) == \
                pytest.approx(6.0)
    assert jvp(lambda x: derivative(lambda z: (Vec(z * z) * x).a, 3.0), (1.5,), (1.0,)) == \
        (9.0, 6.0)


@pytest.mark.parametrize("scalar", [np.float64(0.25), np.float32(0.25), np.int64(3)])
def test_numpy_scalar_times_a_user_object(scalar):
    def f(x):
        return (scalar * Vec(x * x)).a

    for x in points(()):
        check(f, x)
        check(lambda x: (scalar * Vec(x * x)).a, x)
        check_second(f, x)


# -- item 18: list operations on differentiated values --------------------------------------------

def list_iadd_def(x):
    values = [x]
    values += [x]
    return sum(values)


def list_iadd_stored_def(s):
    held = []
    held.append(s)
    values = [1.0]
    values += held
    values.extend(held)
    return values[1] * values[2] * 2


def test_list_extended_in_place():
    for x in points((2,)):
        check(list_iadd_def, x)
        np.testing.assert_allclose(jacfwd(list_iadd_def)(x), 2 * np.eye(2))
    for s in points(()):
        check(list_iadd_stored_def, s)
        check_second(list_iadd_stored_def, s)


def slice_assign_def(x):
    values = [0.0, 0.0]
    values[:] = np.sin(x)
    return values[0] + 2 * values[1]


def extend_def(x):
    values = []
    values.extend(np.sin(x))
    return values[0] + 2 * values[1]


def flat_list_def(x):
    a = np.sin(x)
    return sum(list(a.flat) * np.array([1.0, 2.0]))


def flat_item_def(x):
    a = np.sin(x)
    return a.flat[0] + 2 * a.flat[1]


def flat_write_def(x):
    a = np.sin(x) * 1.0
    a.flat[0] = 5 * a.flat[1]
    return a


@pytest.mark.parametrize("f", [slice_assign_def, extend_def, flat_list_def, flat_item_def,
                               flat_write_def])
def test_array_elements_consumed_by_a_list_or_flat(f):
    for x in points((2,)):
        check(f, x)
    x = np.array([0.3, -0.4])
    if f is not flat_write_def:
        np.testing.assert_allclose(jacfwd(f)(x), np.cos(x) * [1.0, 2.0])


def test_list_plus_array_is_numpys_addition():
    def f(x):
        values = [2.0]
        values += x
        return np.sum(values * x)

    for x in points((2,)):
        check(f, x)


def summed_from_a_dict_def(x):
    y = x * 1.0
    y *= y                       # y: written in place, its tangent held for its memory
    held = {"a": y, "b": np.sin(x)}
    return sum(held.values()) * 1.5


def summed_from_a_deque_def(x):
    y = np.cos(x)
    y[0] = x[1] ** 2
    return sum(collections.deque([y, x]))


# (reverse mode has no rule for collections.deque: a MissingRuleError, so forward mode only)
@pytest.mark.parametrize("f, reverse", [(summed_from_a_dict_def, True),
                                        (summed_from_a_deque_def, False)])
def test_sum_of_a_container_holding_an_array_written_in_place(f, reverse):
    for x in points((3,)):
        check(f, x, reverse=reverse)
        check_second(lambda x: np.sum(f(x) ** 2), x, reverse=reverse)


def test_builtin_sum_of_an_array_second_derivatives():
    def f(x):
        return sum(x) ** 3

    for x in points((3,)):
        check(f, x)
        check_second(f, x)
        np.testing.assert_allclose(jacfwd(jacfwd(f))(x), 6 * np.sum(x) * np.ones((3, 3)))


# -- item 18: jacfwd(jacfwd) through np.linalg (two stacked batch dimensions) ---------------------

LINALG = {
    "det": lambda a: np.linalg.det(a),
    "slogdet": lambda a: np.linalg.slogdet(a)[1],
    "solve": lambda a: np.sum(np.linalg.solve(a, np.array([1.0, 2.0]))),
    "solve_matrix": lambda a: np.sum(np.linalg.solve(a, np.eye(2) + a)),
    "inv": lambda a: np.sum(np.linalg.inv(a) ** 2),
    "cholesky": lambda a: np.sum(np.linalg.cholesky(a @ a.T + np.eye(2))),
    "qr": lambda a: np.sum(np.linalg.qr(a)[1]),
}


@pytest.mark.parametrize("name", list(LINALG))
def test_forward_over_forward_through_linalg(name):
    f = LINALG[name]
    for _ in range(2):
        a = np.array([[2.0, 0.5], [0.3, 1.5]]) + RNG.uniform(-0.2, 0.2, (2, 2))
        check(f, a)
        check_second(f, a, rtol=1e-3, atol=1e-4)


class DelegatingBag:
    """__iter__ delegates with ``yield from`` to a list (or tuple) stored on the object."""

    def __init__(self, *items, as_tuple=False):
        self.items = tuple(items) if as_tuple else list(items)

    def __iter__(self):
        yield from self.items


@pytest.mark.parametrize("as_tuple", [False, True], ids=["list", "tuple"])
@pytest.mark.parametrize("consumer", [sum, max, min, lambda b: sorted(b)[-1],
                                      lambda b: list(b)[1]], ids=["sum", "max", "min",
                                                                   "sorted", "list"])
def test_yield_from_a_stored_container_keeps_derivatives(consumer, as_tuple):
    def f(x):
        return consumer(DelegatingBag(x, 2.0 * x * x, as_tuple=as_tuple))
    x = 1.5
    want = (f(x + 1e-6) - f(x - 1e-6)) / 2e-6
    for _ in range(2):
        assert derivative(f, x) == pytest.approx(want, rel=1e-6)
        assert grad(f)(x) == pytest.approx(want, rel=1e-6)


def test_yield_from_a_generator_still_delegates_send_and_throw():
    # (sending a differentiated value into a generator raises MissingRuleError: generator.send)
    def inner():
        got = yield 1.0
        try:
            yield got * 2.0
        except KeyError:
            yield -1.0

    def outer():
        return (yield from inner())

    def f(x):
        gen = outer()
        first = next(gen) * x
        sent = gen.send(5.0) * x
        return first + sent + gen.throw(KeyError) * x * x
    for _ in range(2):
        assert derivative(f, 3.0) == pytest.approx(5.0) and grad(f)(3.0) == pytest.approx(5.0)


# -- a comprehension unpacking items that a list holds with their tangents ------------------------
# (forward mode keeps a list's members' tangents beside it; `for a, b in path` in a
# comprehension unpacked the tuples natively, dropping them: a silent zero)

def _trajectory(x):
    path = [(1.0, 2.0)]
    for _ in range(3):
        a, b = path[-1]
        path.append((a + x * b, b * math.sin(x)))
    return sum(a + b for a, b in path)


def _nested_targets(x):
    rows = []
    rows.append((x, (x * x, [3.0, x])))
    rows.append((2.0, (x, [x, 1.0])))
    return sum([a * b + c * d for a, (b, [c, d]) in rows if a > 0])


def _starred_and_dict(x):
    rows = []
    rows.append((x, 2.0, x * x))
    by_name = {}
    by_name["u"] = (x, 3.0)
    firsts = [first * sum(rest) for first, *rest in rows]
    return firsts[0] + sum({k: u * v for k, (u, v) in by_name.items()}.values())


def _generator_and_set(x):
    pairs = []
    pairs.append([x, 3.0])
    pairs.append([2.0, x])
    return max(u * v for u, v in pairs) + sum({u for u, _ in pairs}) + \
        (lambda: [u / v for u, v in pairs])()[1]


@pytest.mark.parametrize("f", [_trajectory, _nested_targets, _starred_and_dict,
                               _generator_and_set])
def test_a_comprehension_unpacking_stored_tuples_keeps_their_tangents(f):
    for x in (0.7, 1.9):
        want = fd(f, x)
        for _ in range(2):
            assert derivative(f, x) == pytest.approx(want, rel=1e-6)
            assert jvp(f, (x,), (1.0,))[1] == pytest.approx(want, rel=1e-6)
            assert grad(f)(x) == pytest.approx(want, rel=1e-6)
            assert float(jacfwd(f)(x)) == pytest.approx(want, rel=1e-6)
        second = fd(lambda t: grad(f)(t), x)
        assert float(hessian(f)(x)) == pytest.approx(second, rel=1e-5)
        assert derivative(lambda t: derivative(f, t), x) == pytest.approx(second, rel=1e-5)


# -- forward over forward through tuples nested in what a list, dict or object holds ---------------
# (the enclosing context rebuilds a stored tuple without its tags; the positions the inner
# context kept for a tuple *inside* it, or inside a stored list, were left on the old one: the
# second derivative was a silent zero)

class _Holder:
    pass


def _in_list(x):
    rows = []
    rows.append((1.0, (x * x * x, 1.0)))
    return rows[0][1][0]


def _in_list_in_list(x):
    rows = []
    rows.append([(x * x * x, 1.0)])
    return rows[0][0][0]


def _in_dict(x):
    d = {}
    d["a"] = (1.0, ((x * x * x,),))
    return d["a"][1][0][0]


def _in_attribute(x):
    o = _Holder()
    o.a = (1.0, (x * x * x, 1.0))
    return o.a[1][0]


def _item_assigned_and_unpacked(x):
    rows = [0.0]
    rows[0] = (x, (x * x * x, 2.0))
    a, (b, c) = rows[0]
    return a * b * c


@pytest.mark.parametrize("f", [_in_list, _in_list_in_list, _in_dict, _in_attribute,
                               _item_assigned_and_unpacked])
def test_second_derivatives_through_tuples_nested_in_stored_values(f):
    for x in (0.7, -1.3):
        first = fd(f, x)
        second = fd(lambda t: grad(f)(t), x)
        for _ in range(2):
            assert derivative(f, x) == pytest.approx(first, rel=1e-6)
            assert derivative(lambda t: derivative(f, t), x) == pytest.approx(second, rel=1e-5)
            assert float(jacfwd(jacfwd(f))(x)) == pytest.approx(second, rel=1e-5)
            assert float(hessian(f)(x)) == pytest.approx(second, rel=1e-5)
            assert grad(lambda t: derivative(f, t))(x) == pytest.approx(second, rel=1e-5)
