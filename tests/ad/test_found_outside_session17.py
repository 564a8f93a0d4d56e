"""Found from outside (session 16's testers and this session's) and fixed in session 17.

1. (H120) An array method that is a ufunc -- ``a.conj(w)``, ``a.conjugate(w)``,
   ``np.ndarray.conj(a, w)``, which take their output array by position only -- wrote it
   natively in both modes: 0 for every term through ``w``.  Such a call is the ufunc's
   (``np.conjugate(a, out=w)``) now.
2. (H122) A method or property of a ``float``/``complex`` subclass (``Meters(x).double()``,
   ``Meters(x).half``), which the docs present as a cast, ran bound to the plain number: 0 in
   both modes, every route.  The differentiated value itself is bound now.
3. (H122) A custom rule's function called as ``cs.__call__(x)``, ``type(cs).__call__(cs, x)``
   or bound by ``types.MethodType(Layer.act, layer)`` ran its body (the body's derivative, the
   rule ignored; 0 for the bound form); ``np.sin.__call__(x)``, ``math.sin.__call__(x)`` and
   a Python function's ``f.__call__(x)`` raised MissingRuleError.  Each is the call it spells.
4. (H122) ``checkpoint(layer)(x)`` / ``checkpoint(layer.forward)(x)`` with the parameter held
   by the object (``self.w``): 0 on the reference route, MissingRuleError on the default one.
   What a bound method's object or a callable object holds counts as read from the closure:
   differentiated through, nothing recomputed.  (H125) Nested, ``checkpoint(checkpoint(g))``
   with ``g`` closing over or holding the parameter: the reference route's Hessian was half
   the right one, its gradient wrong for an object; the default route raised.
5. (H122) NumPy functions run by their rules given an object of the user's class that NumPy
   reads as a sequence (``np.sum(Seq(x, 1.0))``, ``np.mean``, ``np.cumsum``, ``np.linalg.norm``,
   ``np.sum([seq, seq])``), and a NumPy scalar or array times such an object with a reflected
   method (``np.float64(2.0) * vec``: NumPy converts it, ``__rmul__`` never runs): 0.  They
   raise MissingRuleError now, as ``np.array(seq)`` did.
6. (H122) A ``tuple`` subclass without a ``__new__`` of its own, made from differentiated
   values (``Pair((x, 2.0))``), raised MissingRuleError (the class had no rule): it is
   ``tuple.__new__(Pair, items)`` now, which the modes follow.
7. (H122) A custom_jvp rule that returned no pair raised a TypeError naming the internal
   ``Tagged`` class in reverse mode ("got a Tagged"): it names the number's type.
8. (H122) A class overriding ufuncs in Python (``__array_ufunc__``, NEP 13) beside a
   differentiated array -- ``a * Q(a)``, ``np.multiply(a, Q(a))``, ``np.add.reduce(Q(a * a))``
   -- ran natively: 0 in forward mode and on the reference route, MissingRuleError on the
   default reverse route.  The call is the override's, as NumPy makes it, followed; (H125)
   an override declining (``NotImplemented``) raises NumPy's TypeError, which the program's
   ``except`` takes as it does natively.
9. (H123) ``json.dumps(obj, default=hook)`` whose hook returns a differentiated number: the C
   encoder did not take the tagged number for a float and called the hook again with it, so
   the program's own text changed under every API (``[0.7]`` became ``["<unserializable>"]``)
   or raised (``default=lambda o: o.__dict__``) on the default reverse route.  The core's
   encoder shim gives the hook's result with its numbers as their values.
10. (H123) ``functools.cmp_to_key(cmp)(x).obj`` lost the derivative in reverse mode (every
    route): the key held the plain value.  It holds ``x`` as it is now.
11. (H123) ``solve_ivp(..., events=...)`` read through ``sol.t`` (a terminal event ends the
    run at the event time, a function of the parameters): 0 in reverse mode, where the docs
    promise MissingRuleError (forward mode raised).  ``sol.t`` carries the refusal too; and
    (H125) with the derivative only in ``y0`` or in what the event function closes over,
    ``sol.t``, ``sol.y`` and the events' times and states gave 0 on every route.
12. (H121) ``np.prod`` (``nanprod``, ``multiply.reduce``) of an empty array -- stick-breaking
    weights ``np.prod(1 - v[:k])`` at ``k = 0`` -- crashed every transform inside the rule.
13. (H121) An in-place write into an empty fancy selection after a slice (``A[:, mask] *= c``
    with no column selected, ``A[:, []] += v``): reverse mode raised NotImplementedError about
    a view of another dtype.  A write into no element records nothing.
14. (H121) ``np.put(a, [], [])`` raised TypeError (an empty list is an array of floats).
15. (H121) ``np.diff`` with a differentiated ``prepend``/``append`` raised MissingRuleError;
    and a differentiated keyword bound to its position filled the parameters before it that
    NumPy marks "not given" with None, which ``np.diff`` takes as a value to append.
16. (H121, H123) ``permutation``, ``choice`` and ``shuffle`` of a differentiated array (a
    ``Generator``'s or the legacy ``np.random``'s: bootstrap resamples, minibatches) raised
    MissingRuleError.  They are the indexing they amount to, with the same draws.
17. (H122 E4, H123 F13) C code calling a class's ``__eq__``/``__lt__``/``__contains__``/
    ``__hash__`` on objects holding a differentiated value (``x in W(x)``, ``list.index``,
    ``list.remove``, a dict or set lookup, ``heapq``, ``bisect``, a dataclass's ordering):
    MissingRuleError on the default reverse route (which stores the value in the object as it
    is), the right value on the reference route.  What such a method computes natively goes
    only into a truth value or a hash: allowed, on every route.
18. (H125) An object of the user's class that C code reads as a sequence, an array or a
    number (``__len__``/``__getitem__``, ``__array__``, ``__float__``) beside a differentiated
    value in the same call -- ``x * seq``, ``np.dot(x, seq)``, ``np.maximum(x, seq)``,
    ``x * obj_with_array``, ``y[0] = obj_with_float`` into a differentiated array,
    ``math.hypot(obj, x)``, ``math.fsum([obj, x])``, ``np.full(2, obj)`` -- was read natively
    by the rules: its part of the derivative dropped (forward mode, the reference route), a
    zero for some.  Refused with MissingRuleError before the call runs, on every route.
19. (H125) A ``float``/``complex`` subclass with arithmetic of its own (``__mul__``,
    ``__rmul__``, ``__neg__``, ``__pow__``, ``__add__``/``__radd__`` through ``sum``,
    ``__abs__``, ``__float__`` calling ``float.__float__``) or a ``cached_property``: the value
    was the user's method's and the derivative float's arithmetic's (0 for the cached
    property).  The operator is the class's method, as Python calls it, followed.
20. (H125) An ``np.matrix`` given to a transform (``*`` is its matrix product, its reductions
    keep two dimensions): reverse mode's gradient was wrong, forward mode crashed inside
    NumPy.  It is refused with a TypeError naming ``np.asarray``.
21. (H125) ``jacfwd`` where a named tuple of differentiated values meets NumPy
    (``np.sum(NT(x[0], x[1] ** 2))``): its fields' batched tangents were read as an array of
    the tuple's own shape -- wrong columns with ``chunk=1`` or whenever the number of columns
    differed from the tuple's length, a shape error otherwise.  A named tuple is the sequence
    NumPy reads it as, stacked behind the batch like a tuple.
22. (H124) Reverse mode's default routes: a generator that a ``for`` loop broke out of was
    closed at the break, so code resuming it (another loop, ``next``, ``list``) got nothing:
    the gradient and the program's own value changed (0 for 6).  The core wrapped a generator
    returned by a nested ``overdub`` call (``iter(gen)`` of the compiled code's loop) as one
    given back to the caller; dropped, the wrapper closed the generator.
23. (H124) Forward mode: a differentiated value written into ``partial.keywords`` after the
    partial was made (``p.keywords["c"] = x``, ``.update(c=...)``) reached the call without
    its tangent (0 where the derivative is 1): the core read the keywords natively, where
    the dict holds the value plain.  They are read through the context now.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import functools
import heapq
import json
import math
import types

import numpy as np
import pytest

from overdub_ad import (MissingRuleError, checkpoint, custom_jvp, custom_vjp, derivative, grad,
                        hessian, jacfwd, jvp, value_and_grad)
from overdub_ad.testing import REFERENCE, force_route

pytestmark = pytest.mark.every_route

ROUTES = pytest.mark.parametrize("route", [None, REFERENCE], ids=["default", "reference"])


# -- 1. a ufunc's array method given its out by position ---------------------------------------

def _bound_conj(p):
    w = np.zeros(3)
    p.conj(w)
    return (w * w).sum()


def _unbound_conjugate(p):
    w = np.zeros(3)
    np.ndarray.conjugate(p, w)
    return (w * p).sum()


def _complex_conj(p):
    z = p * (1.0 + 2.0j)
    w = np.zeros(3, complex)
    z.conj(w)
    return (w * w).real.sum()  # (conj(z)^2 = p^2 (1 - 2j)^2: real part -3 p^2)


@ROUTES
@pytest.mark.parametrize("f, slope", [(_bound_conj, lambda p: 2 * p),
                                      (_unbound_conjugate, lambda p: 2 * p),
                                      (_complex_conj, lambda p: -6 * p)])
def test_ufunc_method_with_positional_out(route, f, slope):
    p = np.array([1.0, 2.0, 3.0])
    with force_route(route):
        for _ in range(3):
            np.testing.assert_allclose(grad(f)(p), slope(p))
            _, tangent = jvp(f, (p,), (np.ones(3),))
            np.testing.assert_allclose(tangent, slope(p).sum())
            np.testing.assert_allclose(derivative(lambda t: f(p * t))(1.0),
                                       (slope(p) * p).sum())


# -- 2. methods and properties of float and complex subclasses --------------------------------

class Meters(float):
    def double(self):
        return Meters(self * 2)

    def sq(self):
        return self * self

    @property
    def half(self):
        return self / 2


class Shifted(complex):
    def re2(self):
        return self.real * 2


@ROUTES
def test_methods_of_number_subclasses(route):
    with force_route(route):
        for _ in range(3):
            assert grad(lambda x: Meters(x).double())(0.7) == 2.0
            assert derivative(lambda x: Meters(x).double())(0.7) == 2.0
            assert grad(lambda x: Meters(x).half * x)(0.7) == pytest.approx(0.7)
            assert hessian(lambda x: Meters(x).half * x)(0.7) == pytest.approx(1.0)
            assert grad(lambda x: [Meters(x)][0].sq())(0.7) == pytest.approx(1.4)
            assert grad(lambda x: Shifted(x, 1.0).re2())(0.7) == 2.0
            assert derivative(lambda x: Shifted(x, 1.0).re2())(0.7) == 2.0
            assert jvp(lambda m: m.double(), (Meters(0.7),), (1.0,)) == (1.4, 2.0)
            assert float(jacfwd(lambda m: m.sq())(Meters(0.7))) == pytest.approx(1.4)


# -- 3. a call spelled through __call__ -------------------------------------------------------

@custom_jvp
def _steep_sin(x):
    return math.sin(x)


_steep_sin.defjvp(lambda p, t: (_steep_sin(p[0]), 100.0 * math.cos(p[0]) * t[0]))


@custom_vjp
def _steep_vjp(x):
    return math.sin(x)


_steep_vjp.defvjp(lambda x: (math.sin(x), math.cos(x)), lambda c, ct: (100.0 * c * ct,))


class _Layer:
    def __init__(self, s):
        self.s = s

    @custom_jvp
    def act(self, x):
        return math.sin(x) * self.s


@_Layer.act.defjvp
def _act_jvp(p, t):
    layer, x = p
    return layer.act(x), 100.0 * math.cos(x) * layer.s * t[1]


def _square(x):
    return x * x


@ROUTES
def test_calls_spelled_through_dunder_call(route):
    rule = 100.0 * math.cos(0.7)
    layer = _Layer(2.0)
    with force_route(route):
        for _ in range(3):
            assert grad(lambda x: _steep_sin.__call__(x))(0.7) == pytest.approx(rule)
            assert derivative(lambda x: getattr(_steep_sin, "__call__")(x))(0.7) == \
                pytest.approx(rule)
            assert grad(lambda x: type(_steep_sin).__call__(_steep_sin, x))(0.7) == \
                pytest.approx(rule)
            assert grad(lambda x: _steep_vjp.__call__(x))(0.7) == pytest.approx(rule)
            bound = types.MethodType(_Layer.act, layer)
            assert grad(lambda x: bound(x))(0.7) == pytest.approx(2 * rule)
            assert derivative(lambda x: bound(x))(0.7) == pytest.approx(2 * rule)
            assert grad(lambda x: np.sin.__call__(x))(0.7) == pytest.approx(math.cos(0.7))
            assert derivative(lambda x: math.sin.__call__(x))(0.7) == \
                pytest.approx(math.cos(0.7))
            assert grad(lambda x: _square.__call__(x))(0.7) == pytest.approx(1.4)


class _Logged(functools.partial):
    calls = 0

    def __call__(self, *args):
        _Logged.calls += 1
        return super().__call__(*args)  # (partial's own call: not this class's again)


@ROUTES
def test_super_call_is_the_base_class_call(route):
    with force_route(route):
        for api in (grad, derivative):
            _Logged.calls = 0
            assert api(lambda x: _Logged(math.sin)(x) * x)(0.7) == pytest.approx(
                math.cos(0.7) * 0.7 + math.sin(0.7))
            assert _Logged.calls == 1


@ROUTES
def test_a_rule_returning_no_pair_names_the_number(route):
    @custom_jvp
    def f(x):
        return math.sin(x)
    f.defjvp(lambda p, t: 3.0 * t[0])  # (the primal forgotten)
    with force_route(route):
        for api in (grad, derivative):
            with pytest.raises(TypeError, match="must return a pair .*got a float$"):
                api(f)(0.5)


# -- 4. checkpoint of an object holding the parameter -----------------------------------------

_X = np.linspace(0.1, 1.0, 4)


class _Dense:
    def __init__(self, w):
        self.w = w

    def __call__(self, h):
        return np.tanh(self.w * h)

    def forward(self, h):
        return np.tanh(self.w * h)


@ROUTES
def test_checkpoint_of_an_object_holding_the_parameter(route):
    want = float(np.sum(_X * (1 - np.tanh(0.9 * _X) ** 2)))
    second = float(np.sum(-2 * _X ** 2 * np.tanh(0.9 * _X) * (1 - np.tanh(0.9 * _X) ** 2)))
    with force_route(route):
        for _ in range(3):
            assert grad(lambda w: float(np.sum(checkpoint(_Dense(w))(_X))))(0.9) == \
                pytest.approx(want)
            assert grad(lambda w: float(np.sum(checkpoint(_Dense(w).forward)(_X))))(0.9) == \
                pytest.approx(want)
            assert hessian(lambda w: float(np.sum(checkpoint(_Dense(w).forward)(_X))))(0.9) == \
                pytest.approx(second)


def _nested_closure(x):
    return checkpoint(checkpoint(lambda y: np.sum(np.exp(y * x))))(x)


def _nested_object(x):
    return np.sum(checkpoint(checkpoint(_Dense(x[1])))(x))


@ROUTES
@pytest.mark.parametrize("f", [_nested_closure, _nested_object], ids=lambda f: f.__name__)
def test_nested_checkpoints_holding_the_parameter(route, f):
    x = np.array([0.3, 0.7])
    with force_route(route):
        plain = grad(lambda v: float(np.sum(_unchecked(f, v))))
        for _ in range(2):
            np.testing.assert_allclose(grad(f)(x), plain(x), rtol=1e-12)
            np.testing.assert_allclose(hessian(f)(x), hessian(
                lambda v: float(np.sum(_unchecked(f, v))))(x), rtol=1e-10, atol=1e-12)


def _unchecked(f, x):
    """``f`` without its checkpoints: the same function."""
    if f is _nested_closure:
        return np.exp(x * x)
    return np.tanh(x[1] * x)


# -- 5. user sequences read natively by NumPy ---------------------------------------------------

class _Seq:
    def __init__(self, *items):
        self.items = list(items)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class _Vec(_Seq):
    def __rmul__(self, s):
        return _Vec(*[a * s for a in self.items])


class _OptedOut(_Vec):
    __array_ufunc__ = None  # (NumPy's operators defer to __rmul__: followed)


@ROUTES
@pytest.mark.parametrize("f", [
    lambda x: np.sum(_Seq(x, 1.0)), lambda x: np.mean(_Seq(x, 1.0)),
    lambda x: np.cumsum(_Seq(x, 1.0))[-1], lambda x: np.linalg.norm(_Seq(x, 1.0)),
    lambda x: np.add.reduce(_Seq(x, 1.0)), lambda x: np.sum([_Seq(x, 1.0), _Seq(1.0, 1.0)]),
    lambda x: sum(np.float64(2.0) * _Vec(x, 1.0)),
    lambda x: float(np.sum(np.ones(2) * _Vec(x, 1.0)))])
def test_user_sequences_read_natively_by_numpy(route, f):
    with force_route(route):
        for api in (grad, derivative):
            with pytest.raises(MissingRuleError, match="an object holding a differentiated"):
                api(f)(0.7)


@ROUTES
def test_a_class_that_opts_out_of_numpy_operators(route):
    with force_route(route):
        for _ in range(2):
            assert grad(lambda x: sum(np.float64(2.0) * _OptedOut(x, 1.0)))(0.7) == 2.0
            assert derivative(lambda x: sum(np.float64(2.0) * _OptedOut(x, 1.0)))(0.7) == 2.0


# -- 6. a tuple subclass --------------------------------------------------------------------------

class _Pair(tuple):
    def dot(self, other):
        return sum(a * b for a, b in zip(self, other))


@ROUTES
def test_a_tuple_subclass(route):
    with force_route(route):
        for _ in range(3):
            for api in (grad, derivative):
                assert api(lambda x: _Pair((x, 2.0))[0] * x)(0.7) == pytest.approx(1.4)
                assert api(lambda x: _Pair([x, 2.0]).dot((x, 3.0)))(0.7) == pytest.approx(1.4)
                assert api(lambda x: _Pair((x, x * x))[1])(0.7) == pytest.approx(1.4)
            assert derivative(lambda x: x * (type(_Pair((x, 2.0))) is _Pair))(0.7) == 1.0


# -- 8. __array_ufunc__ overrides beside differentiated arrays ---------------------------------

class _Quantity:
    def __init__(self, v):
        self.v = v

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        values = [i.v if isinstance(i, _Quantity) else i for i in inputs]
        return _Quantity(getattr(ufunc, method)(*values, **kwargs))


@ROUTES
@pytest.mark.parametrize("f, want", [
    (lambda a: float(np.sum((a * _Quantity(a)).v)), lambda a: 2 * a),
    (lambda a: float(np.sum(np.multiply(a, _Quantity(a)).v)), lambda a: 2 * a),
    (lambda a: float(np.add.reduce(_Quantity(a * a)).v), lambda a: 2 * a),
    (lambda a: float(np.sum((np.float64(3.0) + _Quantity(a)).v ** 2)),
     lambda a: 2 * (3.0 + a)),
    (lambda a: float(np.sum(np.sin(_Quantity(a)).v)), np.cos)])
def test_array_ufunc_overrides(route, f, want):
    a = np.array([0.3, 0.5])
    with force_route(route):
        for _ in range(3):
            np.testing.assert_allclose(grad(f)(a), want(a))
            assert derivative(lambda t: f(a * t))(1.0) == pytest.approx(float(want(a) @ a))


# -- 9. json's default hook -----------------------------------------------------------------

class _State:
    def __init__(self, t):
        self.t = t


def _hooked(x):
    def hook(o):
        return o.t if isinstance(o, _State) else "<unserializable>"
    return x * x, json.dumps([_State(x)], default=hook)


def _by_dict(x):
    return x * x, json.dumps({"state": _State(x)}, default=lambda o: o.__dict__)


@ROUTES
def test_json_default_hook_returning_a_number(route):
    with force_route(route):
        for _ in range(2):
            assert grad(_hooked, has_aux=True)(0.7)[1] == _hooked(0.7)[1] == "[0.7]"
            assert jvp(_hooked, (0.7,), (1.0,), has_aux=True)[2] == "[0.7]"
            assert grad(_by_dict, has_aux=True)(0.7) == (1.4, '{"state": {"t": 0.7}}')
            assert jvp(_by_dict, (0.7,), (1.0,), has_aux=True)[2] == '{"state": {"t": 0.7}}'


# -- 10. a cmp_to_key key's object ------------------------------------------------------------

_BY_DIFFERENCE = functools.cmp_to_key(lambda a, b: a - b)


@ROUTES
def test_the_object_of_a_comparison_key(route):
    with force_route(route):
        for _ in range(3):
            for api in (grad, derivative):
                assert api(lambda x: _BY_DIFFERENCE(x).obj * x)(0.7) == pytest.approx(1.4)
            assert hessian(lambda x: _BY_DIFFERENCE(x).obj * x)(0.7) == pytest.approx(2.0)


# -- 11. solve_ivp's times with events ------------------------------------------------------------

def _event_time(k):
    integrate = pytest.importorskip("scipy.integrate")

    def half(t, y):
        return y[0] - 0.5
    half.terminal = True
    sol = integrate.solve_ivp(lambda t, y: -k * y, (0.0, 5.0), [1.0], events=half)
    return float(sol.t[-1])


def _landing(v):
    integrate = pytest.importorskip("scipy.integrate")

    def ground(t, y):
        return y[0]
    ground.terminal, ground.direction = True, -1
    sol = integrate.solve_ivp(lambda t, y: [y[1], -9.81], (0.0, 10.0), [0.0, v], events=ground)
    return sol.t[-1] + sol.y[1, -1]


def _crossing(v):
    integrate = pytest.importorskip("scipy.integrate")

    def level(t, y):
        return y[0] - v / 10
    level.terminal = True
    return integrate.solve_ivp(lambda t, y: [-y[0]], (0.0, 10.0), [1.0], events=level).t[-1]


@ROUTES
@pytest.mark.parametrize("f", [_event_time, _landing, _crossing], ids=lambda f: f.__name__)
def test_solve_ivp_times_with_events_raise(route, f):
    with force_route(route):
        for api in (grad, derivative):
            with pytest.raises(MissingRuleError, match="solve_ivp with events"):
                api(f)(0.7)


# -- 12-15. NumPy edge cases ---------------------------------------------------------------------

def _fd_gradient(f, x, h=1e-6):
    return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(len(x))])


_V = np.array([0.5, 1.0, 2.0, 0.3])


@ROUTES
@pytest.mark.parametrize("f", [
    lambda v: np.prod(1 - v[:0]) * v[0] + np.prod(1 - v[:2]) * v[2],
    lambda v: np.nanprod(v[:0]) + v[0], lambda v: np.multiply.reduce(v[:0]) * v[1],
    lambda v: np.prod(v.reshape(2, 2)[:, :0], axis=1).sum() + v[3]], ids=str)
def test_prod_of_an_empty_array(route, f):
    with force_route(route):
        for _ in range(2):
            np.testing.assert_allclose(grad(f)(_V), _fd_gradient(f, _V), atol=1e-8)
            np.testing.assert_allclose(jacfwd(f)(_V), _fd_gradient(f, _V), atol=1e-8)


def _empty_selection(x):
    a = x.reshape(2, 2) * 1.0
    a[:, a[0] < 0] *= 3.0  # (no column selected)
    a[:, []] += x[0]
    np.copyto(a[:, np.zeros(2, bool)], 1.0)
    b = a[:, a[0] > 0.4]  # (a copy)
    b *= 2.0
    np.put(a, [], [])
    return np.sum(a ** 2) + np.sum(b)


@ROUTES
def test_writes_into_no_element(route):
    with force_route(route):
        for _ in range(2):
            np.testing.assert_allclose(grad(_empty_selection)(_V), 2 * _V + 2, atol=1e-12)
            np.testing.assert_allclose(jacfwd(_empty_selection)(_V), 2 * _V + 2, atol=1e-12)


@ROUTES
@pytest.mark.parametrize("f", [
    lambda x: np.sum(np.diff(x, prepend=x[0] * 2) ** 2),
    lambda x: np.sum(np.diff(x, n=2, append=x[:2] ** 2) ** 3),
    lambda x: np.sum(np.sin(np.diff(x, prepend=x[-1], append=[x[1], 3.0]))),
    lambda x: np.sum(np.diff(x.reshape(2, 2), axis=0, prepend=x[0]) ** 2),
    lambda x: np.sum(np.diff(x.reshape(2, 2), axis=1, prepend=x[:2].reshape(2, 1)) ** 2)],
    ids=str)
def test_diff_with_differentiated_edges(route, f):
    with force_route(route):
        for _ in range(2):
            np.testing.assert_allclose(grad(f)(_V), _fd_gradient(f, _V), rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(jacfwd(f)(_V), _fd_gradient(f, _V), rtol=1e-6,
                                       atol=1e-6)
            np.testing.assert_allclose(hessian(f)(_V), hessian(f)(_V).T, atol=1e-9)


# -- 16. random permutations and choices of a differentiated array ---------------------------

def _bootstrap(x):
    rng = np.random.default_rng(0)
    total = 0.0
    for _ in range(3):
        total = total + np.mean(rng.choice(x, size=6) ** 2)
    return total + np.sum(rng.choice(x.reshape(2, 3), 2, replace=False, axis=1))


def _permuted(x):
    rng = np.random.default_rng(1)
    y = x * 1.0
    rng.shuffle(y)
    return np.sum(rng.permutation(x) * np.arange(6.0)) + np.sum(y * np.arange(6.0) ** 2) + \
        np.sum(rng.permutation(x.reshape(3, 2), axis=1)[0] ** 2)


def _legacy(x):
    np.random.seed(3)
    y = x * 2.0
    np.random.shuffle(y)
    order = np.random.permutation(6)  # (an int: the indices themselves)
    return np.sum(np.random.permutation(y) * order) + \
        np.random.choice(y, 3, replace=False).sum() + np.random.RandomState(4).choice(x)


_W = np.linspace(0.2, 1.4, 6)


@ROUTES
@pytest.mark.parametrize("f", [_bootstrap, _permuted, _legacy], ids=lambda f: f.__name__)
def test_random_permutations_and_choices(route, f):
    with force_route(route):
        for _ in range(2):
            value, gradient = value_and_grad(f)(_W)
            assert value == f(_W)  # (the same draws)
            np.testing.assert_allclose(gradient, _fd_gradient(f, _W), atol=1e-6)
            np.testing.assert_allclose(jacfwd(f)(_W), _fd_gradient(f, _W), atol=1e-6)


@ROUTES
def test_choice_with_differentiated_probabilities(route):
    def f(x):  # (the indices drawn are constant in p almost everywhere: the items' derivative)
        p = x / np.sum(x)
        return np.sum(np.random.default_rng(0).choice(x, 3, p=p) ** 2)
    with force_route(route):
        for _ in range(2):
            np.testing.assert_allclose(grad(f)(_W), _fd_gradient(f, _W), atol=1e-6)
            np.testing.assert_allclose(jacfwd(f)(_W), _fd_gradient(f, _W), atol=1e-6)


# -- 17. truth methods C code calls ---------------------------------------------------------------

class _Near:
    def __init__(self, c):
        self.c = c

    def __contains__(self, v):
        return abs(v - self.c) < 0.5


class _Ordered:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return abs(self.v - other.v) < 1e-9

    def __lt__(self, other):
        return self.v - other.v < 0

    def __hash__(self):
        return 7


@dataclasses.dataclass(order=True)
class _Job:
    cost: object


def _inserted(x):
    jobs = [_Ordered(3.0)]
    bisect.insort(jobs, _Ordered(x))
    return jobs[0].v * x


def _removed(x):
    jobs = [_Ordered(1.0), _Ordered(x)]
    jobs.remove(_Ordered(x))
    return len(jobs) * x


@ROUTES
@pytest.mark.parametrize("f, slope, second", [
    (lambda x: x * x if x in _Near(x) else 0.0, 1.4, 2.0),
    (lambda x: x * [_Ordered(0.1), _Ordered(x)].index(_Ordered(x)), 1.0, 0.0),
    (lambda x: {_Ordered(x): x * x}[_Ordered(x)], 1.4, 2.0),
    (lambda x: len({_Ordered(x), _Ordered(x)}) * x, 1.0, 0.0),
    (lambda x: heapq.nsmallest(1, [_Ordered(2 * x), _Ordered(x)])[0].v * x, 1.4, 2.0),
    (_inserted, 1.4, 2.0), (_removed, 1.0, 0.0),
    (lambda x: min(_Job(_Ordered(2 * x)), _Job(_Ordered(x))).cost.v * x, 1.4, 2.0)], ids=str)
def test_truth_methods_called_by_c_code(route, f, slope, second):
    with force_route(route):
        for _ in range(3):
            assert grad(f)(0.7) == pytest.approx(slope)
            assert derivative(f)(0.7) == pytest.approx(slope)
            assert hessian(f)(0.7) == pytest.approx(second)


# -- 18. objects read natively beside a differentiated value --------------------------------------

class _Items:
    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class _AsArray:
    def __init__(self, v):
        self.v = v

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.v, dtype=dtype)


class _AsFloat:
    def __init__(self, v):
        self.v = v

    def __float__(self):
        return float(self.v) * 2.0


def _element_written(x):
    y = x * 1.0
    y[0] = _AsFloat(x[0])
    return np.sum(y ** 2)


_P2 = np.array([0.3, 0.7])


@ROUTES
@pytest.mark.parametrize("f", [
    lambda x: np.sum(x * _Items([x[0], x[1]])),
    lambda x: np.dot(x, _Items([x[0], x[1] ** 2])),
    lambda x: np.sum(np.maximum(x * 0.5, _Items([x[0], x[1] ** 2]))),
    lambda x: np.sum(x * _AsArray(x)), _element_written,
    lambda x: math.hypot(_AsFloat(x[0]), x[0]), lambda x: math.fsum([_AsFloat(x[0]), x[0]]),
    lambda x: np.sum(np.full(2, _AsFloat(x[0]), dtype=float))], ids=str)
def test_objects_read_natively_beside_a_differentiated_value(route, f):
    with force_route(route):
        for api in (grad, lambda f: lambda v: derivative(lambda t: f(v + t))(0.0)):
            with pytest.raises(MissingRuleError, match="an object holding a differentiated"):
                api(f)(_P2)


@ROUTES
def test_python_protocols_beside_a_differentiated_value_are_followed(route):
    import collections
    with force_route(route):
        for _ in range(2):
            assert derivative(lambda x: sum(collections.UserList([x]) + [x * x]))(1.5) == 4.0
            assert grad(lambda x: sum(_Items([x[0], x[1]])) * x[0])(_P2) == pytest.approx(
                [1.3, 0.3])


# -- 19. number subclasses with arithmetic of their own ----------------------------------------

class _Tripled(float):
    def __neg__(self):
        return _Tripled(float(self) * 3)


class _Scaled(float):
    def __mul__(self, other):
        return _Scaled(float(self) * float(other) * 10)

    __rmul__ = __mul__


class _Exp(float):
    def __pow__(self, p):
        return _Exp(math.exp(float(self) * p))


class _Doubled(float):
    def __float__(self):
        return 2.0 * float.__float__(self)


class _Norm2(complex):
    def __abs__(self):
        return math.hypot(self.real, self.imag) * 2


class _Skewed(float):
    def __add__(self, other):
        return _Skewed(float(self) + 2 * other)

    def __radd__(self, other):
        return _Skewed(2 * other + float(self))


class _Cached(float):
    @functools.cached_property
    def ex(self):
        return math.exp(self)


@ROUTES
@pytest.mark.parametrize("f, want", [
    (lambda x: -_Tripled(x), 3.0), (lambda x: _Scaled(x) * 3.0, 30.0),
    (lambda x: 2.0 * _Scaled(x), 20.0), (lambda x: _Exp(x) ** 2, 2 * math.exp(0.8)),
    (lambda x: float(_Doubled(x)), 2.0), (lambda x: abs(_Norm2(x, 1.0)), 0.8 / math.hypot(0.4, 1)),
    (lambda x: _Skewed(x) + x, 3.0), (lambda x: x + _Skewed(x * x), 2.8),
    (lambda x: sum([_Skewed(x), _Skewed(x)]), 3.0), (lambda x: _Cached(x).ex, math.exp(0.4))],
    ids=str)
def test_number_subclasses_with_arithmetic_of_their_own(route, f, want):
    with force_route(route):
        for _ in range(3):
            assert grad(f)(0.4) == pytest.approx(want)
            assert derivative(f)(0.4) == pytest.approx(want)


class _Declining:
    def __array_ufunc__(self, *args, **kwargs):
        return NotImplemented


def _falls_back(x):
    try:
        y = x * _Declining()
    except TypeError:
        y = x * 5.0
    return np.sum(y)


@ROUTES
def test_an_array_ufunc_override_declining(route):
    x = np.array([0.3, 0.7])
    with force_route(route):
        for _ in range(2):
            np.testing.assert_allclose(grad(_falls_back)(x), [5.0, 5.0])
            assert derivative(lambda t: _falls_back(x * t))(1.0) == pytest.approx(5.0)


@ROUTES
def test_a_matrix_is_refused(route):
    m = np.matrix([[0.3, 0.7], [1.1, -0.4]])
    with force_route(route):
        for api in (grad, jacfwd, hessian):
            with pytest.raises(TypeError, match="np.matrix"):
                api(lambda m: np.sum(m * m))(m)


# -- 21. named tuples meeting NumPy under jacfwd ------------------------------------------------

_Pair2 = collections.namedtuple("_Pair2", "a b")
_Triple = collections.namedtuple("_Triple", "a b c")


@ROUTES
@pytest.mark.parametrize("f", [
    lambda x: np.sum(_Pair2(x[0], x[1] ** 2)), lambda x: np.sum(x[:2] * _Pair2(x[0], x[1] ** 2)),
    lambda x: np.sum(_Triple(x[0], x[1] ** 2, x[0] * x[1])),
    lambda x: np.linalg.norm(_Pair2(x[0], x[1]))], ids=str)
def test_named_tuples_meeting_numpy_under_jacfwd(route, f):
    x = np.array([0.3, 0.7, 1.1])
    want = _fd_gradient(f, x)
    with force_route(route):
        for chunk in (None, 1, 2):
            np.testing.assert_allclose(jacfwd(f, chunk=chunk)(x), want, atol=1e-6)
        np.testing.assert_allclose(grad(f)(x), want, atol=1e-6)


# -- 22. a generator resumed after a break -------------------------------------------------------

def _counting(x, log):
    for i in range(4):
        log.append(i)
        yield x * x * i


def _resumed_after_break(x, log):
    it = _counting(x, log)
    for v in it:
        break
    total = 0.0
    for w in it:
        total += w
    return total + v + next(_counting(x, log)) + sum(list(_counting(x, [])))


@ROUTES
def test_a_generator_resumed_after_a_break(route):
    with force_route(route):
        for _ in range(3):
            log: list[int] = []
            value, slope = value_and_grad(lambda x: _resumed_after_break(x, log))(1.0)
            assert (value, slope) == (12.0, 24.0)
            assert log == [0, 1, 2, 3, 0]
            assert hessian(lambda x: _resumed_after_break(x, []))(1.0) == pytest.approx(24.0)
            assert derivative(lambda x: _resumed_after_break(x, []))(1.0) == pytest.approx(24.0)


# -- 23. a partial's keywords written after it was made -------------------------------------------

def _scaled_by(a, b=1.0, c=1.0):
    return a * b * c


def _keyword_written(x):
    p = functools.partial(_scaled_by, 1.0)
    p.keywords["c"] = x
    return p()


def _keywords_updated(x):
    p = functools.partial(_scaled_by, x)
    p.keywords.update(c=x * x)
    return p(2.0)


@ROUTES
def test_a_partials_keywords_written_after_it_was_made(route):
    with force_route(route):
        for _ in range(3):
            assert derivative(_keyword_written)(3.0) == grad(_keyword_written)(3.0) == 1.0
            assert derivative(_keywords_updated)(0.3) == pytest.approx(6 * 0.09)
            assert derivative(derivative(_keywords_updated))(0.3) == pytest.approx(3.6)
            assert hessian(_keywords_updated)(0.3) == pytest.approx(3.6)
