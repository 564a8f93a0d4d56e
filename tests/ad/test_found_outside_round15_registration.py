"""Found outside (round 15): rules registered on what a call does not look up, and rules that
cannot be right.

- a rule on a bound method (``model.act``, ``random.uniform``, ``np.add.reduce``) was accepted
  and ignored: refused now, the error saying what to register;
- a classmethod registered as ``Cls.cm`` (a method bound to the class) was ignored: its rules
  (and a nondifferentiable declaration) apply to its function, the class first;
- a staticmethod object was ignored: its function is registered;
- ``obj(x)`` ignored the rules of ``Cls.__call__`` that ``obj.__call__(x)`` used, and a
  ``custom_jvp`` as ``__call__`` raised ``MissingRuleError`` naming the object;
- a rule without ``out``, too many rules, none at all: refused at registration naming the
  function; a rule's tangent or cotangent of a shape that cannot be the derivative's, or a
  string: an error naming the function and the rule, not a wrong number.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from overdub_ad import (ZERO, custom_jvp, custom_vjp, defjvp, defvjp, derivative, grad, jacfwd,
                        jvp, nondifferentiable)
from overdub_ad.testing import force_route, isolated_rules

ROUTES = [None, "reference"]
X = 0.5


@pytest.fixture(autouse=True)
def _isolated():
    with isolated_rules():
        yield


def both(f, x=X):
    """``derivative`` and ``grad`` of the scalar function ``f`` at ``x``."""
    return derivative(f, x), grad(f)(x)


# -- bound methods --------------------------------------------------------------------------


class Model:
    def act(self, y):
        return math.sin(y)

    @classmethod
    def cact(cls, y):
        return math.sin(y)

    @classmethod
    def cstep(cls, y):
        return math.sin(y)

    @staticmethod
    def sact(y):
        return math.sin(y)


class SubModel(Model):
    pass


@pytest.mark.parametrize("register", [defjvp, defvjp])
def test_a_rule_on_a_method_bound_to_an_object_is_refused(register):
    m = Model()
    act = m.act
    with pytest.raises(TypeError, match=r"Model\.act bound to .*register .*Model\.act itself"):
        register(act, lambda d, out, y: 2 * d * math.cos(y))
    with pytest.raises(TypeError, match=r"Model\.act bound to"):
        nondifferentiable(m.act)
    with pytest.raises(TypeError, match=r"Random\.uniform bound to"):
        register(random.uniform, ZERO, lambda d, out, a, b: d)


def test_a_rule_on_a_c_method_bound_to_an_object_is_refused():
    with pytest.raises(TypeError, match=r"ufunc\.reduce with a rule .*for the object first"):
        defjvp(np.add.reduce, lambda d, out, a: np.sum(d, axis=-1))
    with pytest.raises(TypeError, match=r"float\.__mul__"):
        defvjp((2.0).__mul__, lambda ct, out, y: 2.0 * ct)


@pytest.mark.parametrize("route", ROUTES)
def test_the_rules_of_the_class_function_apply_to_the_bound_method(route):
    # what the refusal says to do, done: the rules apply to m.act(x)
    m = Model()
    defjvp(Model.act, ZERO, lambda dy, out, self, y: 2 * dy * math.cos(y))
    defvjp(Model.act, ZERO, lambda ct, out, self, y: 2 * ct * math.cos(y))
    with force_route(route):
        assert both(lambda x: m.act(x)) == pytest.approx((2 * math.cos(X),) * 2)


@pytest.mark.parametrize("route", ROUTES)
def test_a_classmethod_registered_as_the_class_gives_it_has_its_rules(route):
    defjvp(Model.cact, lambda dy, out, y: 2 * dy * math.cos(y))
    defvjp(Model.cact, lambda ct, out, y: 2 * ct * math.cos(y))
    nondifferentiable(Model.cstep)
    want = 2 * math.cos(X)
    with force_route(route):
        assert both(lambda x: Model.cact(x)) == pytest.approx((want, want))
        assert both(lambda x: Model().cact(x)) == pytest.approx((want, want))
        assert both(lambda x: SubModel.cact(x)) == pytest.approx((want, want))
        assert both(lambda x: Model.cstep(x) + x) == (1.0, 1.0)


def test_a_classmethod_object_is_refused_with_what_to_register():
    with pytest.raises(TypeError, match=r"classmethod object.*defjvp\(Cls\.cact"):
        defjvp(Model.__dict__["cact"], lambda dy, out, y: dy)
    with pytest.raises(TypeError, match=r"classmethod object"):
        nondifferentiable(Model.__dict__["cstep"])


@pytest.mark.parametrize("route", ROUTES)
def test_a_staticmethod_object_registers_its_function(route):
    sm = Model.__dict__["sact"]
    assert defjvp(sm, lambda dy, out, y: 3 * dy * math.cos(y)) is sm
    defvjp(sm, lambda ct, out, y: 3 * ct * math.cos(y))
    with force_route(route):
        assert both(lambda x: Model.sact(x)) == pytest.approx((3 * math.cos(X),) * 2)


# -- __call__ --------------------------------------------------------------------------------


class Act:
    def __call__(self, y):
        return math.sin(y)


class Layer:
    @custom_jvp
    def __call__(self, y):
        return math.sin(y)


@Layer.__call__.defjvp
def _layer_jvp(primals, tangents):
    return primals[0](primals[1]), 2 * math.cos(primals[1]) * tangents[1]


class Reverse:
    @custom_vjp
    def __call__(self, y):
        return math.sin(y)


Reverse.__call__.defvjp(lambda self, y: (math.sin(y), y),
                        lambda y, ct: (None, 3 * math.cos(y) * ct))


@pytest.mark.parametrize("route", ROUTES)
def test_calling_an_object_uses_the_rules_of_its_class_call(route):
    defjvp(Act.__call__, ZERO, lambda dy, out, self, y: 2 * dy * math.cos(y))
    defvjp(Act.__call__, ZERO, lambda ct, out, self, y: 2 * ct * math.cos(y))
    act = Act()
    want = 2 * math.cos(X)
    with force_route(route):
        assert both(lambda x: act(x)) == pytest.approx((want, want))
        assert both(lambda x: act.__call__(x)) == pytest.approx((want, want))
        assert both(lambda x: act(x) * x) == pytest.approx((want * X + math.sin(X),) * 2)


@pytest.mark.parametrize("route", ROUTES)
def test_calling_an_object_whose_class_call_is_declared_nondifferentiable(route):
    nondifferentiable(Act.__call__)
    act = Act()
    with force_route(route):
        assert both(lambda x: act(x) + x) == (1.0, 1.0)


@pytest.mark.parametrize("route", ROUTES)
def test_a_custom_rule_as_call_applies_to_calling_the_object(route):
    layer, rev = Layer(), Reverse()
    with force_route(route):
        assert layer(X) == math.sin(X)
        assert both(lambda x: layer(x)) == pytest.approx((2 * math.cos(X),) * 2)
        assert grad(lambda x: rev(x))(X) == pytest.approx(3 * math.cos(X))


# -- rules that cannot be right ---------------------------------------------------------------


def my_special(y):
    return np.sin(y)


def two(x, k):
    return x * k


@pytest.mark.parametrize("register, kind", [(defjvp, "defjvp"), (defvjp, "defvjp")])
def test_a_rule_that_forgot_out_is_refused_naming_the_function(register, kind):
    with pytest.raises(TypeError, match=rf"{kind}\(.*my_special\): the rule for argument 0, "
                                        r"<lambda>\(d, y\), cannot be called as rule\("):
        register(my_special, lambda d, y: d * np.cos(y))
    # a rule taking *args, or keywords for a parameter given by keyword, is fine
    register(my_special, lambda d, out, *args: d)
    register(two, lambda d, out, x, **kw: d, ZERO)


def test_too_many_rules_or_none_are_refused():
    with pytest.raises(TypeError, match=r"2 rules for a function of 1 positional parameter "
                                        r"\(y\)"):
        defjvp(my_special, lambda dy, out, y: dy, lambda dy, out, y: dy)
    with pytest.raises(TypeError, match=r"defvjp\(.*my_special\) with no rule"):
        defvjp(my_special)
    with pytest.raises(TypeError, match=r"defjvp\(.*my_special\) with no rule"):
        defjvp(my_special)


@pytest.mark.parametrize("route", ROUTES)
def test_no_rule_takes_the_rules_away(route):
    def h(y):
        return math.sin(y)
    defjvp(h, lambda dy, out, y: 5 * dy)
    defvjp(h, lambda ct, out, y: 5 * ct)
    with force_route(route):
        assert both(h) == (5.0, 5.0)
    defjvp(h)
    defvjp(h)  # every rule taken away: h is entered again
    with force_route(route):
        assert both(h) == pytest.approx((math.cos(X),) * 2)


@pytest.mark.parametrize("route", ROUTES)
def test_a_rule_result_of_the_wrong_shape_is_an_error_naming_it(route):
    a = np.array([0.1, 0.2])
    defjvp(my_special, lambda dy, out, y: np.ones(5))
    defvjp(my_special, lambda ct, out, y: np.ones(5))

    def f(a):
        return np.sum(my_special(a))
    with force_route(route):
        with pytest.raises(ValueError, match=r"defjvp rule for argument 0 of .*my_special "
                                             r"returned a tangent of shape \(5,\)"):
            jvp(f, (a,), (a,))
        with pytest.raises(ValueError, match=r"defjvp rule for argument 0 of .*my_special"):
            jacfwd(f)(a)
        with pytest.raises(ValueError, match=r"defvjp rule for argument 0 of .*my_special "
                                             r"returned a cotangent of shape \(5,\), where "
                                             r"argument 0's shape \(2,\)"):
            grad(f)(a)
    defjvp(my_special, lambda dy, out, y: "oops")
    with force_route(route):
        with pytest.raises(TypeError, match=r"defjvp rule for argument 0 of .*my_special "
                                            r"returned str 'oops', not a tangent"):
            derivative(lambda x: my_special(x) * 2, 0.3)


@pytest.mark.parametrize("route", ROUTES)
def test_right_rules_still_pass_the_checks(route):
    # batch dimensions (jacfwd), a broadcast cotangent summed away, a scalar broadcast tangent
    a = np.array([0.1, 0.2, 0.3])
    defjvp(my_special, lambda dy, out, y: dy * np.cos(y))
    defvjp(my_special, lambda ct, out, y: ct * np.cos(y))

    def scale(x, s):
        return x * s
    defjvp(scale, lambda dx, out, x, s: dx * s, lambda ds, out, x, s: ds * x)
    defvjp(scale, lambda ct, out, x, s: ct * s, lambda ct, out, x, s: ct * x)  # (s summed)
    with force_route(route):
        np.testing.assert_allclose(jacfwd(lambda a: my_special(a))(a), np.diag(np.cos(a)))
        np.testing.assert_allclose(grad(lambda a: np.sum(my_special(a)))(a), np.cos(a))
        assert grad(lambda s: np.sum(scale(a, s)))(2.0) == pytest.approx(np.sum(a))
        assert derivative(lambda s: np.sum(scale(a, s)), 2.0) == pytest.approx(np.sum(a))
