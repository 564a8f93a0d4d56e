"""overdub_ad on the Python structure people write (issue #15, items 1-7): dataclasses and named
tuples (their methods are made by ``exec``), pytrees of them, code from ``python -c`` and stdin,
``custom_vjp``/``custom_jvp`` on methods, ``contextlib.contextmanager``, NumPy and ``math``
corners, and the consistency of the API (dtypes, ``argnums``, shapes, messages).

Every derivative is checked against central finite differences, in forward mode (``derivative``,
``jvp``, ``jacfwd``) and reverse mode (``grad``, ``vjp``, ``jacrev``), and nested where natural.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import math
import subprocess
import sys
import typing

import numpy as np
import pytest

from overdub import Context, has_metadata, metadata, overdub, tag, untag, why_no_source
from overdub_ad import (MissingRuleError, custom_jvp, custom_vjp, derivative, grad, hessian,
                        jacfwd, jacrev, jvp, register_pytree, value_and_grad, vjp)
from tests.conftest import fd


def both_modes(f, x, second=True):
    """``f'(x)`` by forward and by reverse mode, equal to finite differences; and ``f''(x)``
    by forward-over-forward, reverse-over-reverse and forward-over-reverse."""
    expected = fd(f, x)
    assert derivative(f)(x) == pytest.approx(expected, rel=1e-6, abs=1e-8)
    assert grad(f)(x) == pytest.approx(expected, rel=1e-6, abs=1e-8)
    if second:
        expected2 = fd(lambda y: fd(f, y, 5e-5), x, 5e-5)  # (f(x+h) - 2 f(x) + f(x-h)) / h**2
        for nested in (derivative(derivative(f)), grad(grad(f)), derivative(grad(f))):
            assert nested(x) == pytest.approx(expected2, rel=1e-4, abs=1e-6)


# =================================================================================================
# 1. Dataclasses and named tuples: their generated __init__/__new__ are differentiated through
# =================================================================================================

@dataclasses.dataclass
class State:
    pos: float
    vel: float


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: float
    b: float = 2.0


@dataclasses.dataclass(slots=True)
class Slotted:
    a: float
    b: float


@dataclasses.dataclass(kw_only=True)
class KwOnly:
    a: float
    b: float = 1.0


@dataclasses.dataclass
class PostInit:
    a: float
    b: float
    product: float = dataclasses.field(init=False)

    def __post_init__(self):
        self.product = self.a * self.b


@dataclasses.dataclass
class Factory:
    a: float
    items: list = dataclasses.field(default_factory=list)


class Point(typing.NamedTuple):
    x: float
    y: float = 1.0


Pair = collections.namedtuple("Pair", "left right", defaults=(3.0,))


def uses_every_variant(x):
    s = State(x, 2 * x)
    s.vel = s.vel * s.pos  # a mutable dataclass, written
    f = Frozen(x * x)
    k = KwOnly(a=x, b=math.sin(x))
    p = PostInit(x, x + 1.0)
    fa = Factory(x)
    fa.items.append(x * 3.0)
    sl = Slotted(x, 1.5)
    pt = Point(x, x * x)._replace(y=3.0 * x)
    pr = Pair(x)._replace(left=x * x)
    return (s.vel + f.a * f.b + k.a * k.b + p.product + fa.items[0] + sl.a * sl.b
            + pt.x * pt.y + pr.left * pr.right)


def test_every_dataclass_and_named_tuple_variant_in_both_modes_and_nested():
    both_modes(uses_every_variant, 0.7)


def test_lambda_and_method_styles():
    both_modes(lambda x: State(x, 2 * x).vel * Frozen(x).a, 1.5)

    class Model:
        def energy(self, x):
            p = Point(x, 2.0 * x)
            return p.x * p.y + Frozen(x, x).b

    both_modes(Model().energy, 1.2)


def test_a_dataclass_defined_in_a_function_and_one_defined_under_the_derivative():
    @dataclasses.dataclass(frozen=True)
    class Local:  # found through the objects referring to its __init__
        u: float
        v: float = 0.5

        def __post_init__(self):
            object.__setattr__(self, "v", self.v * self.u)

    both_modes(lambda x: Local(x).v * x, 0.9)

    def defines_its_own(x):  # the class (its exec) runs inside the context: source remembered
        Inner = collections.namedtuple("Inner", "p q")
        Made = dataclasses.make_dataclass("Made", [("w", float)], frozen=True)
        return Inner(x, x * x).q * Made(x).w

    both_modes(defines_its_own, 1.1)


def test_generated_methods_have_source_and_sourceless_code_says_why_in_both_modes():
    assert why_no_source(State.__init__) is None
    assert why_no_source(Point.__new__) is None
    assert why_no_source(Frozen.__setattr__) is None
    made = eval("lambda x: x * x")  # exec'd natively: no source anywhere
    assert "exec/eval/compile of a string" in why_no_source(made)
    for mode in (grad, derivative):
        with pytest.raises(MissingRuleError, match="exec/eval/compile of a string"):
            mode(made)(2.0)


class TagCtx(Context):
    pass


@dataclasses.dataclass(frozen=True)
class Bar:
    x: float
    y: float
    z: float


@dataclasses.dataclass(frozen=True)
class Foo:
    a: object
    b: object


def frozen_identity(x):
    """Cassette's "weird identity" with immutable structs: a value stored in frozen
    dataclasses, copied with ``replace``, into a mutable object, an array and a list."""
    bar = Bar(x, x + 1, x + 2)
    foo = Foo(bar, "ha")
    foo = dataclasses.replace(foo, b=bar)
    foo2 = Foo(Bar(foo.b.x, 5.0, 6.0), foo.b)
    holder = State(foo2.a.x, 0.0)  # a mutable one
    array = np.zeros(1)
    array[0] = holder.pos
    items = []
    items.append(array[0])
    return [items[0]][0]


def test_cassette_identity_with_frozen_dataclasses():
    ctx = TagCtx()
    out = overdub(ctx, frozen_identity, tag(1.0, ctx, 2.0))
    assert untag(out, ctx) == 1.0 and metadata(out, ctx) == 2.0
    assert not has_metadata(out, TagCtx())
    assert frozen_identity(1.5) == 1.5
    both_modes(lambda x: x * frozen_identity(x), 1.0)


# =================================================================================================
# 2. Named tuples and dataclass instances are pytrees; register_pytree for other classes
# =================================================================================================

@dataclasses.dataclass(frozen=True)
class Params:
    w: np.ndarray
    c: float


def loss(p):
    return np.sum(np.tanh(p.w) ** 2) * p.c


def fd_params(p):
    w = np.array([fd(lambda t, i=i: loss(Params(p.w + t * np.eye(len(p.w))[i], p.c)), 0.0)
                  for i in range(len(p.w))])
    return Params(w, fd(lambda t: loss(Params(p.w, p.c + t)), 0.0))


def test_gradients_with_respect_to_named_tuples_and_dataclasses_are_of_their_type():
    g = grad(lambda t: t.x * t.y ** 2)(Point(1.0, 2.0))
    assert type(g) is Point and g == pytest.approx(Point(4.0, 4.0))
    p = Params(np.array([0.3, -0.8]), 1.7)
    expected = fd_params(p)
    for g in (grad(loss)(p), value_and_grad(loss)(p)[1], vjp(loss, p)[1](1.0)[0]):
        assert type(g) is Params
        np.testing.assert_allclose(g.w, expected.w, rtol=1e-6)
        assert g.c == pytest.approx(expected.c, rel=1e-6)
    # forward mode: a tangent of the same type, and the Jacobian by reverse mode
    _, dout = jvp(loss, (p,), (Params(np.array([1.0, 0.0]), 0.0),))
    assert dout == pytest.approx(expected.w[0], rel=1e-6)
    j = jacrev(lambda t: t.x * np.array([1.0, t.y]))(Point(2.0, 3.0))
    assert type(j) is Point
    np.testing.assert_allclose(j.x, [1.0, 3.0])
    np.testing.assert_allclose(j.y, [0.0, 2.0])
    # forward mode's Jacobian of a pytree argument: the output's structure outside
    for jac in (jacfwd, jacrev):
        jp = jac(loss)(p)
        assert type(jp) is Params and jp.c == pytest.approx(expected.c, rel=1e-6)
        np.testing.assert_allclose(jp.w, expected.w, rtol=1e-6)
    h = hessian(lambda t: t.x * t.y ** 2)(Point(2.0, 3.0))
    assert type(h) is Point and type(h.x) is Point
    np.testing.assert_allclose([[h.x.x, h.x.y], [h.y.x, h.y.y]], [[0.0, 6.0], [6.0, 4.0]])
    # nested: the Hessian of a function of a named tuple, through a gradient of its type
    hxy = grad(lambda s: grad(lambda t: t.x * t.y ** 2)(Point(s, 2.0)).y)(1.5)
    assert hxy == pytest.approx(4.0)


def test_outputs_that_are_dataclasses_and_named_tuples_in_both_modes():
    def make(x):
        return Params(x * np.ones(2), 3.0 * x * x)

    for jac in (jacfwd, jacrev):
        j = jac(make)(2.0)
        assert type(j) is Params
        np.testing.assert_allclose(j.w, [1.0, 1.0])
        assert j.c == pytest.approx(12.0)
        k = jac(lambda x: Point(x * x, 3 * x))(2.0)
        assert type(k) is Point and k == pytest.approx(Point(4.0, 3.0))
    out, tangent = jvp(make, (2.0,), (1.0,))
    assert type(out) is Params and type(tangent) is Params and tangent.c == pytest.approx(12.0)


class Interval:
    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi


register_pytree(Interval, lambda i: ((i.lo, i.hi), None),
                lambda aux, children: Interval(*children))


def test_register_pytree():
    g = grad(lambda i: i.hi ** 2 - 2 * i.lo)(Interval(1.0, 3.0))
    assert type(g) is Interval and (g.lo, g.hi) == pytest.approx((-2.0, 6.0))
    j = jacfwd(lambda x: Interval(x, x * x))(3.0)
    assert type(j) is Interval and (j.lo, j.hi) == pytest.approx((1.0, 6.0))
    with pytest.raises(TypeError, match="not a class"):
        register_pytree(Interval(1, 2), lambda i: ((), None), lambda a, c: None)


def test_a_dataclass_with_an_attribute_that_is_not_a_field_is_refused():
    @dataclasses.dataclass
    class Derived:
        a: float

        def __post_init__(self):
            self.twice = 2 * self.a  # would be stale in a rebuilt instance

    with pytest.raises(TypeError, match="'twice' is not a dataclass field"):
        grad(lambda d: d.twice)(Derived(1.0))


def dict_state(a, steps=3):
    """State in a dict updated in place, copied with dict() each step (a benchmark's style)."""
    s = {"x": 1.0, "y": 0.5}
    for _ in range(steps):
        probe = dict(s)
        s["x"] = s["x"] + 0.1 * a * probe["y"]
        s["y"] = probe["y"] * (1.0 - 0.2 * probe["x"]) + 0.1 * a
    return s["x"] * s["y"]


def test_a_dict_copied_with_dict_keeps_its_values_derivatives():
    both_modes(dict_state, 0.7)


# =================================================================================================
# 3. Code from python -c and stdin
# =================================================================================================

def _python(args, stdin=None):
    return subprocess.run([sys.executable, *args], input=stdin, capture_output=True, text=True,
                          timeout=120)


def test_python_dash_c():
    for api in ("grad", "derivative"):
        run = _python(["-c", f"from overdub_ad import {api}; print({api}(lambda x: x*x)(3.0))"])
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == "6.0"


def test_stdin_says_why_in_both_modes():
    for api in ("grad", "derivative"):
        run = _python([], stdin=f"from overdub_ad import {api}\n{api}(lambda x: x*x)(3.0)\n")
        assert run.returncode != 0
        last = run.stderr.strip().splitlines()[-1]
        assert last.startswith(f"{MissingRuleError.__module__}.MissingRuleError")
        assert "read from standard input, and Python keeps no source for that" in last


# =================================================================================================
# 4. custom_vjp / custom_jvp on methods
# =================================================================================================

class Layer:
    def __init__(self, w):
        self.w = w

    @custom_vjp
    def act(self, x):
        return self.w * np.tanh(x)

    def _act_fwd(self, x):
        return self.w * np.tanh(x), (self.w, x)

    def _act_bwd(residuals, ct):
        w, x = residuals
        return None, 3.0 * ct * w * (1 - np.tanh(x) ** 2)  # 3x: shows the rule is used

    act.defvjp(_act_fwd, _act_bwd)

    @custom_jvp
    def soft(self, x):
        return self.w * np.tanh(x)

    @soft.defjvp
    def _soft_jvp(primals, tangents):
        (layer, x), (_, dx) = primals, tangents
        return layer.w * np.tanh(x), 3.0 * layer.w * (1 - np.tanh(x) ** 2) * dx


def test_custom_rules_on_methods():
    layer = Layer(2.0)
    assert layer.act(0.5) == Layer.act(layer, 0.5) == layer.soft(0.5) == 2.0 * np.tanh(0.5)
    true = fd(lambda x: layer.w * np.tanh(x), 0.5)
    assert grad(lambda x: layer.act(x))(0.5) == pytest.approx(3 * true, rel=1e-6)
    assert derivative(lambda x: layer.soft(x))(0.5) == pytest.approx(3 * true, rel=1e-6)
    # the other mode differentiates the body
    assert derivative(lambda x: layer.act(x))(0.5) == pytest.approx(true, rel=1e-6)


# =================================================================================================
# 5. contextlib.contextmanager
# =================================================================================================

@contextlib.contextmanager
def scaled(x, k):
    yield x * k


@contextlib.contextmanager
def bracketed(store):
    store.append(1.0)
    try:
        yield store
    finally:
        store.append(-1.0)


def with_managers(x):
    with scaled(x, 3.0) as y:
        z = y * x
    total = []
    with bracketed(total) as s:
        s.append(math.sin(x))
    with contextlib.ExitStack() as stack:
        w = stack.enter_context(scaled(x, 2.0))
    return z + sum(total) * w


def test_contextmanager_in_both_modes():
    both_modes(with_managers, 0.8)


# =================================================================================================
# 6. NumPy and math corners
# =================================================================================================

CORNERS = {
    "concatenate": lambda x: np.sum(np.concatenate([x, [1.0]]) ** 2),
    "add.at": lambda x: _scatter(x),
    "item": lambda x: x[0].item() * x[1],
    "copysign": lambda x: math.copysign(x[0], -1.0) * x[1],
    "fabs": lambda x: math.fabs(x[0] - 1.0) * x[1],
    "apply_along_axis": lambda x: np.sum(np.apply_along_axis(lambda r: r * r[0], 0, x)),
    "sort method": lambda x: _sorted_in_place(x),
}


def _sorted_in_place(x):
    y = x * np.array([1.0, -1.0, 0.5])
    y.sort()
    return y @ np.array([1.0, 2.0, 3.0])


def _scatter(x):
    a = np.zeros(3)
    np.add.at(a, [0, 0, 1], x[:3] * x[:3])
    return np.sum(a ** 2)


@pytest.mark.parametrize("name", sorted(CORNERS))
def test_numpy_and_math_corners_in_both_modes(name):
    f = CORNERS[name]
    x = np.array([0.3, 0.7, 1.2])
    expected = np.array([fd(lambda t: f(x + t * e), 0.0) for e in np.eye(3)])
    np.testing.assert_allclose(jacfwd(f)(x), expected, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(jacrev(f)(x), expected, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(grad(f)(x), expected, rtol=1e-6, atol=1e-8)


def test_the_methods_of_float_are_their_operators():
    assert grad(float.__mul__)(3.0, 2.0) == 2.0
    assert grad(float.__mul__, argnums=1)(3.0, 2.0) == 3.0
    assert grad(float.__rtruediv__)(2.0, 3.0) == pytest.approx(fd(lambda x: 3.0 / x, 2.0))
    both_modes(lambda x: float.__pow__(x, 3) + float.__neg__(x) * complex.__mul__(2j, x).imag,
               1.3)
    assert float.__mul__(3.0, "a") is NotImplemented
    assert grad(lambda x: (float.__mul__(x, "a") is NotImplemented) * x)(2.0) == 1.0


# =================================================================================================
# 7. API consistency
# =================================================================================================

def test_float32_inputs_give_float32_derivatives_in_every_api():
    x = np.array([0.5, 1.5], np.float32)
    f = lambda v: np.sum(np.sin(v) * v ** 2)  # noqa: E731
    results = {"grad": grad(f)(x), "jacrev": jacrev(lambda v: v ** 3)(x),
               "jacfwd": jacfwd(lambda v: v ** 3)(x), "derivative": derivative(np.sin)(x),
               "hessian": hessian(f)(x), "jvp": jvp(f, (x,), (np.ones(2, np.float32),))[1],
               "vjp": vjp(np.sin, x)[1](np.ones(2, np.float32))[0],
               "scalar grad": grad(lambda s: s * s)(np.float32(2.0)),
               "scalar derivative": derivative(lambda s: s * s)(np.float32(2.0)),
               "scalar hessian": hessian(lambda s: s * s * s)(np.float32(2.0))}
    assert {name: np.result_type(r) for name, r in results.items()} == \
        {name: np.float32 for name in results}
    np.testing.assert_allclose(results["hessian"],
                               np.diag(2 * np.cos(x) * 2 * x + (2 - x ** 2) * np.sin(x)),
                               rtol=1e-4)


def test_jacrev_holomorphic():
    z = np.array([1 + 1j, 2 - 1j])
    np.testing.assert_allclose(jacrev(lambda z: z * z, holomorphic=True)(z), np.diag(2 * z))
    np.testing.assert_allclose(jacrev(lambda z: z * z, holomorphic=True)(z),
                               jacfwd(lambda z: z * z, holomorphic=True)(z))
    with pytest.raises(TypeError, match="requires complex inputs"):
        jacrev(lambda z: z * z, holomorphic=True)(np.ones(2))


@pytest.mark.parametrize("api", [grad, value_and_grad, jacrev, jacfwd, hessian])
def test_argnums_is_checked(api):
    with pytest.raises(TypeError, match="must be an int or a sequence of ints"):
        api(lambda x, y: x * y, argnums="a")
    with pytest.raises(ValueError, match="repeats an argument"):
        api(lambda x, y: x * y, argnums=(0, 0))
    with pytest.raises(ValueError, match="twice"):
        api(lambda x, y: x * y, argnums=(0, -2))(1.0, 2.0)


@pytest.mark.parametrize("shape", [(1,), (1, 1)])
def test_grad_takes_an_output_with_one_element(shape):
    # (autograd and PyTorch take it; JAX refuses shape (1,): code written for autograd is kept)
    f = lambda x: np.ones(shape) * np.sum(x ** 3)  # noqa: E731
    x = np.array([0.5, 2.0])
    np.testing.assert_allclose(grad(f)(x), 3 * x ** 2)
    value, g = value_and_grad(f)(x)
    assert np.shape(value) == shape
    np.testing.assert_allclose(g, 3 * x ** 2)
    with pytest.raises(TypeError, match="scalar output"):
        grad(lambda x: x * 2)(x)


def test_a_jvp_tangent_of_the_wrong_shape_is_reported_at_the_api():
    with pytest.raises(ValueError, match=r"tangent of shape \(2,\) for a primal of shape \(3,\)"):
        jvp(lambda x: x * 2, (np.ones(3),), (np.ones(2),))
    out, tangent = jvp(lambda x: x * 2, (1.0,), (np.ones(2),))  # a batch of two directions
    np.testing.assert_allclose(tangent, [2.0, 2.0])


def one_argument(x):
    return x * x


def two_arguments(x, y=1.0):
    return x * y


@pytest.mark.parametrize("api", [grad, jacrev, jacfwd, derivative])
def test_argument_count_messages_count_only_the_users_parameters(api):
    if api is derivative:  # (the derivative is of a function of one argument: said so)
        with pytest.raises(TypeError, match=r"derivative\(.*one_argument\) is the derivative "
                                            r"of a function of one argument, called with 2"):
            api(one_argument)(1.0, 2.0)
    else:
        with pytest.raises(TypeError, match=r"one_argument\(\) takes 1 positional argument "
                                            r"but 2 were given"):
            api(one_argument)(1.0, 2.0)
    if api is not derivative:
        with pytest.raises(TypeError, match=r"takes from 1 to 2 positional arguments but 3"):
            api(two_arguments)(1.0, 2.0, 3.0)
