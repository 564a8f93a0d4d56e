"""The rule registry's policy: the user's rules win on every route, and a differentiated value
becomes a constant only through a documented exemption -- everything else is differentiated
(a rule, a stand-in) or raises ``MissingRuleError``, never a silent zero.

Every derivative here is checked against central finite differences and against the other
mode, for ``def`` and ``lambda`` alike, on a first and a repeated call.
"""

from __future__ import annotations

import fractions
import json
import math
import operator
import pickle
import statistics
import struct

import numpy as np
import pytest

from overdub_ad import (ZERO, MissingRuleError, defjvp, defvjp, derivative, grad, hessian, hvp,
                        jacfwd, jacrev, jvp, value_and_grad)
from overdub_ad.testing import isolated_rules
from tests.conftest import fd


def both_modes(f, x, want, rtol=1e-6, atol=1e-8):
    """``f``'s derivative at ``x`` by each mode, twice (the second call takes the kept
    routes), equals ``want``."""
    for _ in range(2):
        if np.ndim(x) == 0 and np.ndim(f(x)) == 0:
            got = [grad(f)(x), derivative(f, x), jacfwd(f)(x), jacrev(f)(x)]
        else:
            got = [jacfwd(f)(x), jacrev(f)(x)]
        for g in got:
            np.testing.assert_allclose(g, want, rtol=rtol, atol=atol)


def styles(body):
    """``body`` (a function of x) as a ``def`` and as a ``lambda`` calling it."""
    def as_def(x):
        return body(x)
    return [as_def, lambda x: body(x)]


# -- the user's rules win on every route (issue 13's sentinel) ------------------------------------

class Model:
    def __init__(self, k):
        self.k = k

    def energy(self, x):
        return self.k * math.sin(x)


def _register_hundred(fn, leading=0):
    """Rules of ``fn`` (after ``leading`` arguments without a derivative) that say the
    derivative is 100: unlike the shipped rule, so a route that ignores them is caught."""
    defjvp(fn, *(ZERO,) * leading, lambda dx, out, *args: 100.0 * dx)
    defvjp(fn, *(ZERO,) * leading, lambda ct, out, *args: 100.0 * ct)


@pytest.mark.parametrize("name", ["math.sin", "np.sin", "method", "bound method"])
def test_a_user_rule_wins_on_every_route(name):
    model = Model(2.0)
    call = {"math.sin": math.sin, "np.sin": np.sin,
            "method": lambda x: Model.energy(model, x),
            "bound method": lambda x: model.energy(x)}[name]
    registered = {"math.sin": math.sin, "np.sin": np.sin}.get(name, Model.energy)
    for attempt in range(2):  # a second registration, after the routes kept the first
        with isolated_rules():
            _register_hundred(registered, 0 if registered is not Model.energy else 1)
            for f in styles(call):
                for _ in range(2):
                    assert grad(f)(0.5) == 100.0
                    assert derivative(f, 0.5) == 100.0
                    assert jacfwd(f)(0.5) == 100.0 and jacrev(f)(0.5) == 100.0
            # d/dx (x * g(x)) = g(x) + 100 x: its derivative is 200 by the rule (whose own
            # derivative is 0), whichever route takes the second derivative
            for f in styles(lambda x: x * call(x)):
                assert hessian(f)(0.5) == 200.0 and hvp(f, 0.5, 1.0) == 200.0
            if name == "np.sin":
                x = np.array([0.5, -0.25, 1.0])
                np.testing.assert_array_equal(jacfwd(np.sin)(x), 100.0 * np.eye(3))
                np.testing.assert_array_equal(jacrev(np.sin)(x), 100.0 * np.eye(3))

                def straight_line(x):  # the compiled hvp route's subset
                    return np.sum(x * np.sin(x))
                np.testing.assert_array_equal(hvp(straight_line, x, np.array([1.0, 0, 0])),
                                              [200.0, 0.0, 0.0])
                np.testing.assert_array_equal(hessian(straight_line)(x), 200.0 * np.eye(3))
        # the shipped rule is back on every route
        for f in styles(call):
            want = 2.0 * math.cos(0.5) if registered is Model.energy else math.cos(0.5)
            assert grad(f)(0.5) == pytest.approx(want)
            assert derivative(f, 0.5) == pytest.approx(want)
        assert hvp(lambda x: np.sum(x * np.sin(x)), np.array([0.5]), np.array([1.0]))[0] == \
            pytest.approx(2 * math.cos(0.5) - 0.5 * math.sin(0.5))


def test_a_user_rule_for_an_operator_wins_in_scalar_code():
    """The dual (forward) and the specialised scalar code (reverse) write arithmetic out: a
    rule registered for the operator sends them to the route that applies it."""
    def poly(x):
        return x * x + 1.0

    for _ in range(2):
        assert derivative(poly, 3.0) == 6.0 and grad(poly)(3.0) == 6.0
        with isolated_rules():  # a product rule twice too large
            defjvp(operator.mul, lambda dx, out, x, y: 2.0 * dx * y,
                   lambda dy, out, x, y: 2.0 * dy * x)
            defvjp(operator.mul, lambda ct, out, x, y: 2.0 * ct * y,
                   lambda ct, out, x, y: 2.0 * ct * x)
            assert derivative(poly, 3.0) == 12.0 and grad(poly)(3.0) == 12.0
        assert derivative(poly, 3.0) == 6.0 and grad(poly)(3.0) == 6.0


def test_isolated_rules_restores_after_an_error_and_nests():
    with pytest.raises(RuntimeError):
        with isolated_rules():
            _register_hundred(math.sin)
            with isolated_rules():
                _register_hundred(math.cos)
                assert grad(math.cos)(0.5) == 100.0
            assert grad(math.cos)(0.5) == pytest.approx(-math.sin(0.5))
            assert grad(math.sin)(0.5) == 100.0
            raise RuntimeError
    assert grad(math.sin)(0.5) == pytest.approx(math.cos(0.5))


# -- Jacobians and Hessians with several argnums --------------------------------------------------

def test_hessian_with_two_argnums_has_blocks_in_order():
    def f(a, b):
        return np.sum(a) * np.sum(b ** 2) + a[0] * b[2]

    a, b = np.array([0.3, -1.1]), np.array([0.5, 2.0, -0.7])
    H = hessian(f, argnums=(0, 1))(a, b)
    assert [[block.shape for block in row] for row in H] == [[(2, 2), (2, 3)], [(3, 2), (3, 3)]]
    np.testing.assert_allclose(H[0][1], jacfwd(grad(f, 0), 1)(a, b))
    np.testing.assert_allclose(H[1][0], jacrev(grad(f, 1), 0)(a, b))
    np.testing.assert_allclose(H[0][1], fd(lambda bb: grad(f, 0)(a, bb), b), atol=1e-6)
    np.testing.assert_allclose(H[1][0], H[0][1].T)


def test_jacfwd_and_jacrev_agree_on_argnums_tuples_and_pytree_outputs():
    def f(x, y):
        return x * 2.0, np.sum(y) * np.ones(4)

    x, y = np.ones(2), np.array([1.0, 2.0, 3.0])
    forward, reverse = jacfwd(f, argnums=(0, 1))(x, y), jacrev(f, argnums=(0, 1))(x, y)
    for i in range(2):  # output i, argument j
        for j in range(2):
            np.testing.assert_allclose(forward[i][j], reverse[i][j])
    assert forward[1][1].shape == (4, 3)


# -- the statistics module (exact sums through integer ratios) ------------------------------------

STATISTICS = {
    "mean": lambda x: statistics.mean([x, 2 * x, 0.5 * x + 1, 3.0]),
    "variance": lambda x: statistics.variance([x, x * x, 0.5 * x + 1, 3.0]),
    "pvariance": lambda x: statistics.pvariance([x, x * x, 0.5 * x + 1, 3.0]),
    "stdev": lambda x: statistics.stdev([x, x * x, 0.5 * x + 1, 3.0]),
    "pstdev": lambda x: statistics.pstdev([x, x * x, 0.5 * x + 1, 3.0]),
    "harmonic_mean": lambda x: statistics.harmonic_mean([x, x * x, 0.5 * x + 1, 3.0]),
    "harmonic_mean_weights": lambda x: statistics.harmonic_mean([x, x * x, 3.0],
                                                                weights=[1.0, 2.0, x]),
    "fmean": lambda x: statistics.fmean([x, 2 * x, 0.5 * x + 1, 3.0]),
    "geometric_mean": lambda x: statistics.geometric_mean([x, x * x, 0.5 * x + 1, 3.0]),
    "median": lambda x: statistics.median([x, x * x, 0.5 * x + 1, 3.0]),
    "quantiles": lambda x: statistics.quantiles([x, x * x, 0.5 * x + 1, 3.0, 7.0], n=4)[1],
    "covariance": lambda x: statistics.covariance([x, x * x, 3.0], [1.0, x, 2.0]),
    "correlation": lambda x: statistics.correlation([x, x * x, 3.0], [1.0, x, 2.0]),
    "array": lambda x: statistics.mean(np.array([x, 2 * x])),
    "NormalDist": lambda x: statistics.NormalDist.from_samples([x, x * x, 3.0]).pdf(2.0),
}


@pytest.mark.parametrize("name", sorted(STATISTICS))
def test_statistics_are_differentiated(name):
    for f in styles(STATISTICS[name]):
        both_modes(f, 1.7, fd(f, 1.7), rtol=1e-5)


@pytest.mark.parametrize("call", [
    lambda x: statistics.variance([x, 2 * x, 3.0], 2.0),            # a mean given: no rule
    lambda x: statistics.mean(x * k for k in (1.0, 2.0)),           # a generator: its code
])
def test_statistics_without_a_rule_raise(call):
    for api in (grad, derivative):
        with pytest.raises(MissingRuleError):
            api(call)(1.5)


# -- the general hole: a float turned into integers or text by C code -----------------------------

LOSSLESS = {
    "as_integer_ratio": lambda x: (lambda r: r[0] / r[1])(x.as_integer_ratio()),
    "numpy as_integer_ratio": lambda x: (lambda r: r[0] / r[1])(
        np.float64(x).as_integer_ratio()),
    "Fraction": lambda x: float(fractions.Fraction(x)),
    "struct": lambda x: struct.unpack("d", struct.pack("d", x))[0],
    "tobytes": lambda x: np.frombuffer(np.float64(x).tobytes())[0],
    "pickle": lambda x: pickle.loads(pickle.dumps(x)),
}


@pytest.mark.parametrize("name", sorted(LOSSLESS))
def test_a_float_through_integers_or_bytes_raises(name):
    for f in styles(LOSSLESS[name]):
        for api in (grad, derivative):
            with pytest.raises(MissingRuleError):
                api(f)(2.5)


EXEMPT = {  # docs/ad.md's list: results that cannot carry a derivative
    "int": lambda x: int(x) * 1.0 + x,
    "round": lambda x: round(x, 2) + x,
    "floor": lambda x: math.floor(x) + x,
    "str": lambda x: float(str(x)) + x,
    "comparison": lambda x: (x > 1.0) * 1.0 + x,
    "len": lambda x: len([x, x]) + x,
    "is_integer": lambda x: x.is_integer() + x,
    "__round__": lambda x: x.__round__(3) + x,
    "__lt__": lambda x: x.__lt__(3.0) + x,
    "__repr__": lambda x: float(x.__repr__()) + x,
    "hex": lambda x: float.fromhex(x.hex()) + x,
    "json": lambda x: json.loads(json.dumps(x)) + x,
    "tuple.index": lambda x: (1.0, x).index(x) + x,
    "list.count": lambda x: [x, x, 3.0].count(x) + x,
}


@pytest.mark.parametrize("name", sorted(EXEMPT))
def test_documented_exemptions_are_constants(name):
    for f in styles(EXEMPT[name]):
        both_modes(f, 2.5, 1.0)


# -- arguments that were declared non-differentiable ----------------------------------------------

SAMPLES = np.array([0.1, 0.6, 0.9, 0.35])


@pytest.mark.parametrize("f,x", [
    (lambda w: np.histogram(SAMPLES, bins=2, range=(0, 1), weights=w)[0],
     np.array([1.0, 2.0, 0.5, 1.5])),
    (lambda w: np.histogram(SAMPLES, bins=[0.0, 0.3, 0.5, 1.0], weights=w, density=True)[0],
     np.array([1.0, 2.0, 0.5, 1.5])),
    (lambda r: np.histogram(SAMPLES, bins=2, range=(r[0], r[1]), density=True)[0],
     np.array([0.0, 1.0])),
    (lambda a: np.histogram(a, bins=3)[1], SAMPLES),
    (lambda h: np.heaviside(np.array([-1.0, 0.0, 2.0]), h), np.array([0.3, 0.5, 0.7])),
], ids=["weights", "weights-density", "range-keyword", "edges", "heaviside-h0"])
def test_histogram_and_heaviside_are_differentiated(f, x):
    both_modes(f, x, fd(f, x), atol=1e-6)


def test_histogram_weights_example_of_the_issue():
    g = grad(lambda w: np.histogram([0.1, 0.6, 0.9], bins=2, range=(0, 1), weights=w)[0][1])
    np.testing.assert_array_equal(g(np.ones(3)), [0.0, 1.0, 1.0])


# -- eval and exec -------------------------------------------------------------------------------

def _exec_shared(x):
    namespace = {"x": x, "math": math}
    exec("x = x * 3.0\nfor i in range(2):\n    x = math.sin(x)", namespace)
    return namespace["x"]


def _exec_separate(x):
    names = {"x": x}
    exec("y = x * x\nx = x + 1.0\ndef g(u):\n    return u * 2\nz = g(y)", {}, names)
    return names["z"] + names["x"]


def _eval_frame(x):
    return eval("x ** 3 + x")


EVALUATED = {
    "eval-namespace": lambda x: eval("x * x", {"x": x}),
    "eval-locals": lambda x: eval("x * y", {"y": 3.0}, {"x": x}),
    "eval-numpy": lambda x: eval("np.sin(x) * x", {"x": x, "np": np}),
    "eval-frame": _eval_frame,
    "eval-lambda-frame": lambda x: eval("x * x"),
    "exec-shared": _exec_shared,
    "exec-separate": _exec_separate,
}


@pytest.mark.parametrize("name", sorted(EVALUATED))
def test_eval_and_exec_are_differentiated(name):
    f = EVALUATED[name]
    both_modes(f, 1.5, fd(f, 1.5), rtol=1e-5)
    np.testing.assert_allclose(hessian(f)(1.5), fd(lambda x: grad(f)(x), 1.5), rtol=1e-5)


def test_eval_and_exec_keep_their_results_and_errors():
    def build(x):
        scope = {}
        exec("import math\nk = math.pi", scope)
        return x * scope["k"] + eval("len('abc')")
    assert grad(build)(2.0) == pytest.approx(math.pi)
    with pytest.raises(NameError):
        grad(lambda x: eval("missing * x", {"x": x}))(1.0)
    with pytest.raises(SyntaxError):
        grad(lambda x: eval("x *", {"x": x}))(1.0)


@pytest.mark.parametrize("f", [
    lambda x: eval(compile("x * 2.0", "<s>", "eval"), {"x": x}),      # a code object
    lambda x: (lambda ns: (exec('s = """a\nb"""\ny = x * 2.0', ns), ns["y"])[1])({"x": x}),
], ids=["code-object", "multi-line-string"])
def test_eval_and_exec_of_what_cannot_be_restated_raise(f):
    for api in (grad, derivative):
        with pytest.raises(MissingRuleError, match="eval|exec"):
            api(f)(1.5)


# -- outputs without a derivative -----------------------------------------------------------------

@pytest.mark.parametrize("out", ["text", None, b"bytes"], ids=["str", "None", "bytes"])
def test_outputs_that_are_no_number_raise_a_type_error(out):
    for f in styles(lambda x: out):
        for api in (grad, derivative, jacfwd, jacrev, value_and_grad, hessian):
            with pytest.raises(TypeError, match="numeric output"):
                api(f)(1.5)


@pytest.mark.parametrize("out", [lambda x: 3, lambda x: x > 0, lambda x: np.int64(2),
                                 lambda x: np.bool_(x > 0)],
                         ids=["int", "bool", "np.int64", "np.bool_"])
def test_integer_and_boolean_outputs_without_derivative_raise_a_type_error(out):
    """An integer or a truth value that carries no derivative (a count, a comparison) is no
    output to differentiate (issue 14; JAX and autograd raise too): a TypeError, never 0."""
    for f in styles(out):
        for api in (grad, derivative, jacfwd, jacrev, value_and_grad, hessian):
            with pytest.raises(TypeError, match="carries no derivative"):
                api(f)(-1.5)


def test_a_constant_winner_of_max_is_differentiated():
    """max(0, x) below 0 returns the constant 0 -- an int carrying the derivative 0, in every
    mode (the rules of max), so that relu's derivative is 0 there, not an error."""
    for f in styles(lambda x: max(0, x)):
        for api in (grad, derivative, jacfwd, jacrev):
            assert api(f)(-1.5) == 0.0


def test_grad_of_a_list_output_still_names_jacrev():
    with pytest.raises(TypeError, match="jacrev"):
        grad(lambda x: [x, x])(1.0)


# -- x ** c at 0: one convention in every mode ----------------------------------------------------

@pytest.mark.filterwarnings("ignore:divide by zero", "ignore:invalid value")
@pytest.mark.parametrize("c", [0.5, 0.25])
def test_fractional_power_at_zero_agrees_across_modes(c):
    for f in styles(lambda x: x ** c):
        for g in (grad(f)(0.0), derivative(f, 0.0), jacfwd(f)(0.0), jacrev(f)(0.0)):
            assert g == math.inf
        for second in (hessian(f)(0.0), hvp(f, 0.0, 1.0), derivative(derivative(f), 0.0),
                       grad(grad(f))(0.0), derivative(grad(f), 0.0), grad(derivative(f))(0.0)):
            assert second == -math.inf
        x = 0.3  # away from 0: the formulas
        assert derivative(f, x) == pytest.approx(c * x ** (c - 1))
        assert hvp(f, x, 1.0) == pytest.approx(c * (c - 1) * x ** (c - 2))


def test_negative_power_at_zero_raises_as_python_does():
    for api in (grad, derivative):
        with pytest.raises(ZeroDivisionError):
            api(lambda x: x ** -0.5)(0.0)


# -- ufunc methods ---------------------------------------------------------------------------------

Y = np.array([1.5, 0.5])
UFUNC_METHODS = {
    "add.outer": lambda x: np.add.outer(x, Y),
    "multiply.outer": lambda x: np.multiply.outer(x, x),
    "subtract.outer": lambda x: np.subtract.outer(Y, x),
    "power.outer": lambda x: np.power.outer(np.abs(x) + 1, Y),
    "add.reduce": lambda x: np.add.reduce(x),
    "multiply.reduce": lambda x: np.multiply.reduce(x),
    "maximum.reduce": lambda x: np.maximum.reduce(x),
    "minimum.reduce-axis": lambda x: np.minimum.reduce(np.outer(x, x), axis=0),
    "add.reduce-keepdims": lambda x: np.add.reduce(np.outer(x, x), axis=1, keepdims=True),
    "hypot.reduce": lambda x: np.hypot.reduce(x),
    "subtract.reduce-initial": lambda x: np.subtract.reduce(x, initial=1.0),
    "add.accumulate": lambda x: np.add.accumulate(x),
    "multiply.accumulate": lambda x: np.multiply.accumulate(x),
    "maximum.accumulate": lambda x: np.maximum.accumulate(x),
}


@pytest.mark.parametrize("name", sorted(UFUNC_METHODS))
def test_ufunc_methods_are_differentiated(name):
    f, x = UFUNC_METHODS[name], np.array([0.3, -1.2, 2.0])
    both_modes(f, x, fd(f, x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jvp(f, (x,), (np.ones(3),))[0], f(x))  # the method's value
    scalar = lambda x: np.sum(np.sin(f(x)))  # noqa: E731
    np.testing.assert_allclose(hvp(scalar, x, np.array([1.0, 0.0, 0.5])),
                               hessian(scalar)(x) @ np.array([1.0, 0.0, 0.5]), rtol=1e-6)


def test_ufunc_methods_the_stand_ins_leave_to_numpy_raise():
    where = np.array([True, False, True])
    with pytest.raises(MissingRuleError, match="ufunc.reduce"):
        grad(lambda x: np.add.reduce(x, where=where))(np.ones(3))
    # without a derivative the guarded call is NumPy's own
    assert grad(lambda x: x * np.add.reduce(np.ones(3), where=where))(1.5) == 2.0
