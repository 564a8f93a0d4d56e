"""Issue 14, reverse mode and hvp: derivatives that came out silently wrong, kept fixed.

Each case is checked against central finite differences and against the other mode (``grad``
and ``derivative``/``jacfwd``), on a first and a repeated call, at several random points; where
it has a Hessian, ``hvp`` against ``hessian @ v``, ``jvp(grad)`` and finite differences of the
gradient.  A case is written as a ``def`` (which reverse mode runs by its scalar compiler), a
lambda and a method where Python allows the construct in each.

The roots fixed: arrays written in place are versioned even when what is written, or the array
written, is not differentiated (a scratch buffer refilled, a constant boundary value); an
in-place operator's other operand read before the write when it shares the target's memory;
the object protocols (properties, ``__getattr__``, setters, ``__setattr__``, ``__getitem__``
with a tuple key, ``__enter__``) run through the context however the operation is reached; a
list NumPy broadcasts read as the array it becomes; the tangents of arrays written in place read
while an enclosing derivative still sees them.
"""

from __future__ import annotations

import contextlib
import functools
import operator

import numpy as np
import pytest

from overdub_ad import derivative, grad, hessian, hvp, jacfwd, jacrev, jvp, vjp
from tests.conftest import fd

RNG = np.random.default_rng(14)


def check(f, x, *, second=True, rtol=1e-5, atol=1e-6):
    """``f``'s gradient by both modes (first and repeated calls) against finite differences;
    with ``second``, for an array ``x``, hvp against the Hessian and its neighbours."""
    want = fd(f, x)
    forward = derivative if isinstance(x, float) else jacfwd
    for _ in range(2):
        np.testing.assert_allclose(grad(f)(x), want, rtol=rtol, atol=atol)
        np.testing.assert_allclose(forward(f)(x), want, rtol=rtol, atol=atol)
    if second and isinstance(x, np.ndarray):
        v = RNG.standard_normal(x.shape)
        want_hv = fd(lambda t: grad(f)(x + t * v), 0.0, 1e-5)
        for _ in range(2):
            got = hvp(f, x, v)
            np.testing.assert_allclose(got, want_hv, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(got, hessian(f)(x) @ v, rtol=1e-8, atol=1e-10)
            np.testing.assert_allclose(got, jvp(grad(f), (x,), (v,))[1], rtol=1e-8, atol=1e-10)


def points(shape, n=3):
    if shape == ():
        return [float(v) for v in RNG.uniform(0.3, 1.7, n)]
    return [RNG.uniform(-1.5, 1.5, shape) for _ in range(n)]


# -- item 2: hvp after a constant written inside a repeated step ----------------------------------

def step(u):
    un = u.copy()
    un[1:] = u[1:] + u[:-1]
    un[0] = 0.0
    return un


def twice_def(u):
    return np.sum(step(step(u)) ** 2)


def heat_def(u):
    """Three explicit steps of the heat equation, Dirichlet boundaries held at zero."""
    for _ in range(3):
        un = u.copy()
        un[1:-1] = u[1:-1] + 0.2 * (u[2:] - 2 * u[1:-1] + u[:-2])
        un[0] = 0.0
        un[-1] = 0.0
        u = un
    return np.sum(u ** 2 * np.sin(u))


class Steps:
    def twice(self, u):
        return np.sum(step(step(u)) ** 2)

    def heat(self, u):
        return heat_def(u)


@pytest.mark.parametrize("f", [twice_def, lambda u: np.sum(step(step(u)) ** 2), Steps().twice,
                               heat_def, lambda u: heat_def(u), Steps().heat],
                         ids=["twice-def", "twice-lambda", "twice-method", "heat-def",
                              "heat-lambda", "heat-method"])
def test_hvp_after_a_constant_write_in_a_repeated_step(f):
    for u in points((5,)):
        check(f, u)


def test_hvp_after_a_constant_write_the_reported_numbers():
    u, v = np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 0.0])
    np.testing.assert_allclose(hvp(twice_def, u, v), [4.0, 6.0, 2.0])
    np.testing.assert_allclose(hessian(twice_def)(u) @ v, [4.0, 6.0, 2.0])


# -- item 3: in-place arithmetic with an aliased operand -------------------------------------------

def square_in_place(x):
    y = x * 1.0
    y *= y
    return np.sum(y)


def times_reversed(x):
    y = x * 1.0
    y *= y[::-1]
    return np.sum(y * x)


def over_reversed(x):
    y = x + 3.0
    y /= y[::-1]
    return np.sum(y ** 2)


def power_of_itself(x):
    y = x * 0.5 + 2.0
    y **= y[:1]
    return np.sum(y)


def matmul_of_itself(x):
    y = np.reshape(x, (2, 2)) * 1.0
    y @= y
    return np.sum(np.sin(y))


class Aliased:
    def square(self, x):
        y = x * 1.0
        y *= y
        return np.sum(y)

    def reversed(self, x):
        y = x * 1.0
        y *= y[::-1]
        return np.sum(y * x)


@pytest.mark.parametrize("f", [square_in_place, times_reversed, over_reversed, power_of_itself,
                               Aliased().square, Aliased().reversed])
def test_inplace_arithmetic_with_an_aliased_operand(f):
    for x in points((4,)):
        check(f, np.abs(x) + 0.2)


def test_inplace_matmul_with_itself():
    for x in points((4,)):
        check(matmul_of_itself, x)


def test_aliased_inplace_the_reported_numbers():
    x = np.array([0.2, 0.7])
    np.testing.assert_allclose(grad(square_in_place)(x), 2 * x)
    np.testing.assert_allclose(jacfwd(square_in_place)(x), 2 * x)


# -- item 5: reads through @property and __getattr__ ---------------------------------------------

class Circle:
    def __init__(self, r):
        self.r = r

    @property
    def area(self):
        return 3 * self.r ** 2


class Wrap:
    def __init__(self, x):
        self.x = x

    def __getattr__(self, name):
        return self.x * len(name)


class Half:
    """A descriptor written in Python."""

    def __get__(self, obj, owner=None):
        return obj.r / 2


class Disk(Circle):
    radius_half = Half()


class Doubled:
    """``__getattribute__`` written in Python, reading through object's."""

    def __init__(self, v):
        self.v = v

    def __getattribute__(self, name):
        value = object.__getattribute__(self, name)
        return value * 2.0 if name == "v" else value


class Passing(Doubled):
    def __getattribute__(self, name):
        return super().__getattribute__(name)


class Slotted:
    __slots__ = ("_r",)

    def __init__(self, r):
        self._r = r

    @property
    def area(self):
        return 3 * self._r ** 2


class Cached:
    def __init__(self, r):
        self.r = r

    @functools.cached_property
    def square(self):
        return self.r * self.r


def getattribute_def(x):
    return Doubled(x).v * Passing(x).v


def cached_def(r):
    c = Cached(r)
    return c.square + c.square * Slotted(r).area


def property_def(r):
    return Circle(r).area


def getattr_def(x):
    return Wrap(x).anything * 3.0


def explicit_getattr_def(r):
    return getattr(Circle(r), "area") + getattr(Wrap(r), "ab")


def descriptor_def(r):
    return Disk(r).radius_half * Disk(r).area


class Reads:
    def property(self, r):
        return Circle(r).area

    def getattr(self, x):
        return Wrap(x).anything * 3.0


@pytest.mark.parametrize("f", [
    property_def, lambda r: Circle(r).area, Reads().property,
    getattr_def, lambda x: Wrap(x).anything * 3.0, Reads().getattr,
    explicit_getattr_def, lambda r: getattr(Circle(r), "area") + getattr(Wrap(r), "ab"),
    descriptor_def, lambda r: Disk(r).radius_half * Disk(r).area,
    getattribute_def, lambda x: Doubled(x).v * Passing(x).v,
    cached_def, lambda r: (lambda c: c.square + c.square * Slotted(r).area)(Cached(r))])
def test_reads_through_properties_and_getattr(f):
    for r in points(()):
        check(f, r)


def test_getattr_does_not_hide_an_instance_attribute():
    """``__getattr__`` runs only for a name the usual lookup misses: ``self.x`` inside it
    reads the differentiated value the instance holds."""
    np.testing.assert_allclose(grad(getattr_def)(2.0), 3.0 * len("anything"))


# -- item 6: property setters and __setattr__ ----------------------------------------------------

class Param:
    @property
    def v(self):
        return self._v

    @v.setter
    def v(self, value):
        self._v = value * 1.5


class Doubling:
    def __setattr__(self, name, value):
        object.__setattr__(self, name, 2.0 * value)


class SuperDoubling:
    def __setattr__(self, name, value):
        super().__setattr__(name, 2.0 * value)


class Scale:
    """A data descriptor written in Python."""

    def __set__(self, obj, value):
        obj.__dict__["scaled"] = value * 3.0

    def __get__(self, obj, owner=None):
        return obj.__dict__["scaled"]


class Holder:
    scaled = Scale()


class ThroughDict:
    def __setattr__(self, name, value):
        self.__dict__[name] = value * 2.0


def through_dict_def(x):
    p = ThroughDict()
    p.v = x
    q = Param()
    vars(q)["w"] = np.sin(x)
    return np.sum(p.v * q.w + vars(p)["v"])


def setter_def(x):
    p = Param()
    p.v = x
    return np.sum(p._v * 2.0 * x)


def setattr_override_def(x):
    p = Doubling()
    p.v = x
    return np.sum(p.v * x)


def super_setattr_def(x):
    p = SuperDoubling()
    p.v = x
    return np.sum(p.v * np.sin(x))


def explicit_setattr_def(x):
    p = Param()
    setattr(p, "v", x)
    return np.sum(p.v ** 2)


def descriptor_set_def(x):
    h = Holder()
    h.scaled = x
    return np.sum(h.scaled * x)


class Writes:
    def setter(self, x):
        p = Param()
        p.v = x
        return np.sum(p._v * 2.0 * x)

    def override(self, x):
        p = Doubling()
        p.v = x
        return np.sum(p.v * x)


@pytest.mark.parametrize("f", [
    setter_def, Writes().setter, setattr_override_def, Writes().override, super_setattr_def,
    explicit_setattr_def, descriptor_set_def, through_dict_def,
    lambda x: (lambda p: (setattr(p, "v", x), np.sum(p.v ** 2))[1])(Param())])
@pytest.mark.parametrize("shape", [(), (3,)])
def test_writes_through_setters_and_setattr(f, shape):
    for x in points(shape):
        check(f, x)


def test_setter_the_reported_numbers():
    def loss(x):
        p = Param()
        p.v = x
        return p._v * 2.0
    assert grad(loss)(2.0) == pytest.approx(3.0)
    assert derivative(loss)(2.0) == pytest.approx(3.0)


# -- item 7: a value returned by __enter__ ---------------------------------------------------------

class Scaled:
    def __init__(self, k):
        self.k = k

    def __enter__(self):
        return self.k * 2.0

    def __exit__(self, *exc):
        self.k = None
        return False


class Suppressing(Scaled):
    def __exit__(self, kind, value, tb):
        return kind is ZeroDivisionError


@contextlib.contextmanager
def scaled(k):
    yield k ** 2


def enter_def(x):
    with Scaled(x) as k:
        return np.sum(k * x)


def nested_with_def(x):
    with Scaled(x) as a, scaled(x) as b:
        with Scaled(a) as c:
            return np.sum(a * b + c)


def suppressed_def(x):
    out = x * 0.0
    with Suppressing(x) as k:
        out = k * x
        1 / 0
    return np.sum(out)


class Managed:
    def enter(self, x):
        with Scaled(x) as k:
            return np.sum(k * x)


@pytest.mark.parametrize("f", [enter_def, nested_with_def, suppressed_def, Managed().enter])
@pytest.mark.parametrize("shape", [(), (3,)])
def test_a_value_returned_by_enter(f, shape):
    for x in points(shape):
        check(f, x)


def test_with_keeps_exceptions_and_exit():
    log = []

    class Logged:
        def __enter__(self):
            log.append("enter")
            return self

        def __exit__(self, kind, value, tb):
            log.append(kind.__name__ if kind else None)
            return False

    def f(x):
        with Logged():
            raise KeyError("inside")

    with pytest.raises(KeyError, match="inside"):
        grad(f)(1.0)
    assert log == ["enter", "KeyError"]


# -- item 15 and neighbours: __getitem__ given a tuple holding differentiated values ------------

A = np.arange(6.0).reshape(3, 2)
CT = np.arange(12.0).reshape(6, 2) + 1


def r_def(x):
    return np.r_[x, x]


def test_np_r_pullback_inside_a_def():
    for fun in (r_def, lambda x: np.r_[x, x]):
        for _ in range(2):
            np.testing.assert_allclose(vjp(fun, A)[1](CT)[0], CT[:3] + CT[3:])


class Grid:
    def __getitem__(self, key):
        a, b = key
        return a * b + a


def user_getitem_def(x):
    return np.sum(Grid()[x, np.sin(x)])


def c_def(x):
    return np.sum(np.sin(np.c_[x, 2 * x]))


def r_single_def(x):
    return np.sum(np.r_[x, ] ** 2)


def r_mixed_def(x):
    return np.sum(np.r_[x, 1.0, x[:1]] ** 3)


@pytest.mark.parametrize("f", [
    user_getitem_def, lambda x: np.sum(Grid()[x, np.sin(x)]),
    c_def, lambda x: np.sum(np.sin(np.c_[x, 2 * x])),
    r_single_def, lambda x: np.sum(np.r_[x, ] ** 2),
    r_mixed_def, lambda x: np.sum(np.r_[x, 1.0, x[:1]] ** 3)])
def test_getitem_given_a_tuple_of_differentiated_values(f):
    for x in points((3,)):
        check(f, x)
    assert jacrev(f)(np.ones(3)).shape == (3,)


# -- item 18, reverse-mode shapes ------------------------------------------------------------------

def list_broadcast_def(s):
    return np.sum(np.ones(3) + [s])


def list_and_array_def(x):
    return np.sum((x + [x[0]]) ** 2)


def list_sub_def(x):
    return np.sum(np.sin(x - [x[1], 2.0 * x[2], 0.5]))


def list_iadd_def(s):
    L = [2.0]
    L += [s]
    return L[0] * L[1] + L[1]


def list_iadd_array_def(x):
    L = [2.0]
    L += x  # NumPy's __radd__ answers before list.__iadd__: L becomes the array 2.0 + x
    return np.sum(L * x)


def test_list_broadcast_by_numpy():
    for s in points(()):
        check(list_broadcast_def, s)
        check(lambda s: np.sum(np.ones(3) + [s]), s)
    for x in points((3,)):
        check(list_and_array_def, x)
        check(lambda x: np.sum((x + [x[0]]) ** 2), x)
        check(list_sub_def, x)
    assert grad(list_broadcast_def)(2.0) == pytest.approx(3.0)
    np.testing.assert_allclose(grad(lambda x: np.sum(x + [x[0]]))(np.ones(3)), [4, 1, 1])


def test_list_extended_in_place():
    for s in points(()):
        for _ in range(2):
            assert grad(list_iadd_def)(s) == pytest.approx(fd(list_iadd_def, s))
    for x in points((2,)):
        for _ in range(2):
            np.testing.assert_allclose(grad(list_iadd_array_def)(x),
                                       fd(list_iadd_array_def, x), rtol=1e-6)


def test_list_plus_array_in_place_forward():
    x = np.array([0.5, 1.5])
    np.testing.assert_allclose(jacfwd(list_iadd_array_def)(x), fd(list_iadd_array_def, x),
                               rtol=1e-6)


def test_derivative_of_a_forward_over_reverse_hessian_reading_an_element():
    for x in points((3,)):
        def total(x):
            return np.sum(hessian(lambda z: z[2] ** 3)(x))
        want = np.array([0.0, 0.0, 6.0])
        for outer in (grad, jacfwd, jacrev):
            np.testing.assert_allclose(outer(total)(x), want, atol=1e-12)
        np.testing.assert_allclose(grad(lambda x: np.sum(hessian(lambda z: np.sin(z[0]) * z[1])(x)))
                                   (x), fd(lambda x: np.sum(hessian(
                                       lambda z: np.sin(z[0]) * z[1])(x)), x), rtol=1e-5, atol=1e-6)


def test_tangent_of_an_array_written_in_place_under_an_outer_derivative():
    def written(z):
        g = np.zeros(2)
        g[0] = z * z
        return g

    assert grad(lambda x: jvp(written, (x,), (1.0,))[1][0])(3.0) == pytest.approx(2.0)
    assert derivative(lambda x: jvp(written, (x,), (1.0,))[1][0])(3.0) == pytest.approx(2.0)


# scratch arrays that are not differentiated, written after the tape read them

def refilled(x):
    buf = np.zeros(2)
    out = 0.0
    for k in range(3):
        buf[:] = k + 1.0
        out = out + np.sum(buf * x * x)
    return out


def zeroed_after_use(x):
    buf = np.ones(2)
    out = np.sum(buf * np.sin(x))
    buf[:] = 0.0
    return out


def augmented(x):
    buf = np.ones(2)
    out = 0.0
    for _ in range(3):
        out = out + np.sum(np.sin(buf * x))
        buf += 1.0
    return out


def by_methods_and_functions(x):
    buf = np.ones(2)
    out = 0.0
    for k in range(2):
        out = out + np.sum(buf * x ** 2)
        buf.fill(k + 2.0)
        out = out + np.sum(np.tanh(buf * x))
        np.copyto(buf, np.full(2, k + 3.0))
        out = out + np.sum(buf @ np.outer(x, x))
        np.multiply(buf, 2.0, out=buf)
        out = out + np.sum(buf * x)
        np.add.at(buf, [0], 1.5)
    return out + np.sum(buf * x)


def through_a_view(x):
    buf = np.ones(3)
    view = buf[1:]
    out = 0.0
    for k in range(3):
        out = out + np.sum(view * x ** 2)
        buf[:] = k + 2.0
    return out


def constant_matrix(x):
    w = np.array([[1.0, 2.0], [3.0, 4.0]])
    y = np.tanh(w @ x)
    w[0, 0] = 10.0
    z = w @ y
    w *= 0.0
    return np.sum(z ** 2)


class Scratch:
    def __init__(self):
        self.buf = np.zeros(2)   # a preallocated buffer outside the function

    def loss(self, x):
        out = 0.0
        for k in range(3):
            self.buf[:] = k + 1.0
            out = out + np.sum(self.buf * x * x)
        return out


@pytest.mark.parametrize("f", [refilled, zeroed_after_use, augmented, by_methods_and_functions,
                               through_a_view, constant_matrix, Scratch().loss])
def test_a_constant_array_written_after_use(f):
    for x in points((2,)):
        check(f, x)


def test_refilled_buffer_the_reported_numbers():
    np.testing.assert_allclose(grad(lambda x: refilled(x))(np.array([1.0, 2.0])), [12.0, 24.0])
    np.testing.assert_allclose(grad(zeroed_after_use)(np.zeros(2)), [1.0, 1.0])


# hvp

def select_def(x):
    return np.sum(np.select([x > 0.2, x < -0.2], [x ** 3, np.sin(x)], default=x ** 2))


def select_product_def(x):
    """Differentiated choices and default, twice: the hvp's tangent of each select."""
    return np.sum(np.select([x > 0], [x], default=x * x) * np.select([x < 0], [x ** 2], x))


def power_zero_def(x):
    return np.sum(x ** 0 + x ** 2)


@pytest.mark.parametrize("f", [select_def, lambda x: np.sum(np.select([x > 0.2], [x ** 3],
                                                                       default=np.cos(x))),
                               select_product_def,
                               lambda x: np.sum(np.select([x < 0], [x ** 2], default=x) * x),
                               power_zero_def])
def test_hvp_agrees_with_the_hessian(f):
    for x in points((4,)):
        check(f, x)
    zeros = np.zeros(4)
    v = np.arange(1.0, 5.0)
    assert np.all(np.isfinite(hvp(f, zeros, v)))
    np.testing.assert_allclose(hvp(f, zeros, v), hessian(f)(zeros) @ v)


def test_hvp_of_a_scalar_through_a_list():
    assert hvp(lambda s: np.sum([1.2, s]) ** 2, 1.0, 1.0) == pytest.approx(2.0)
    assert hvp(lambda s: np.sum([1.2, s]), 1.0, 1.0) == pytest.approx(0.0)
    x, v = np.array([0.5, -1.0]), np.array([1.0, 2.0])
    f = lambda x: np.sum([1.2, x[0] * x[1]]) ** 2  # noqa: E731
    np.testing.assert_allclose(hvp(f, x, v), hessian(f)(x) @ v)


def test_operator_getitem_written_as_a_call_runs_the_protocol():
    """``operator.getitem(obj, key)`` is ``obj[key]``: a user ``__getitem__`` runs through
    the context either way."""
    f = lambda x: np.sum(operator.getitem(Grid(), (x, x)))  # noqa: E731
    for x in points((3,)):
        check(f, x)
