"""A differentiated value that code the context does not see computes with: NumPy's functions
that call a function the user gives them (np.vectorize, np.apply_along_axis, np.apply_over_axes,
np.piecewise) are differentiated through, the values the function closes over included; a
callback that C code calls natively (np.frompyfunc's ufunc) raises MissingRuleError at the use,
never a silent zero (found from outside: all three gave 0.0 on every route)."""

from __future__ import annotations

import numpy as np
import pytest

import overdub_ad as ad
from overdub import Context, overdub, tag
from overdub_ad import MissingRuleError
from tests.conftest import fd

A = np.array([[0.5, 1.0], [1.5, 2.0]])
T = np.array([0.5, 1.0, 1.5])

CASES = {
    "vectorize closure": lambda b: np.sum(np.vectorize(lambda t: b * t)(T)),
    "vectorize sin": lambda b: np.sum(np.vectorize(lambda t: np.sin(b * t))(T)),
    "vectorize two arguments": lambda b: np.sum(np.vectorize(lambda t, s: b * t * s)(T, 2.0)),
    "vectorize of an argument": lambda b: np.sum(np.vectorize(lambda t: t * t)(b * T)),
    "vectorize otypes": lambda b: np.sum(np.vectorize(lambda t: b * t, otypes=[float])(T)),
    "vectorize cache": lambda b: np.sum(np.vectorize(lambda t: b ** 2 * t, cache=True)(T)),
    "vectorize two outputs": lambda b: np.sum(np.vectorize(lambda t: (b * t, t * t))(T)[0]),
    "vectorize 2-d": lambda b: np.sum(np.vectorize(lambda t: np.exp(b * t))(A)),
    "apply_along_axis rows": lambda b: np.sum(np.apply_along_axis(lambda r: b * r, 1, A)),
    "apply_along_axis reduce": lambda b: np.sum(
        np.apply_along_axis(lambda r: np.sum(b * r ** 2), 0, A)),
    "apply_over_axes": lambda b: np.sum(
        np.apply_over_axes(lambda a, axis: np.sum(b * a, axis), A, [0])),
    "vectorize excluded position": lambda b: np.sum(
        np.vectorize(lambda t, k: t * k, excluded={1})(T, b)),
    "vectorize excluded keyword": lambda b: np.sum(
        np.vectorize(lambda t, k=1.0: t * k * k, excluded={"k"})(T, k=b)),
    "vectorize keyword": lambda b: np.sum(np.vectorize(lambda t, k: t * k)(T, k=b * T)),
    "vectorize excluded list": lambda b: np.sum(
        np.vectorize(lambda t, ws: t * ws[0] * ws[1], excluded={1})(T, [b, 2.0])),
    "vectorize signature": lambda b: np.sum(
        np.vectorize(lambda r: np.sum(r) * b, signature="(n)->()")(A)),
    "vectorize signature of an argument": lambda b: np.sum(
        np.vectorize(lambda r: np.sum(r * r), signature="(n)->()")(b * A)),
    "piecewise": lambda b: np.sum(
        np.piecewise(T, [T < 1, T >= 1], [lambda t: b * t, lambda t: b * b + 0 * t])),
}


@pytest.mark.parametrize("name", list(CASES))
def test_callbacks_given_to_numpy_are_differentiated(name):
    f = CASES[name]
    want = fd(f, 0.7)
    assert want != 0
    for _ in range(2):  # (a first and a repeated call)
        assert ad.grad(f)(0.7) == pytest.approx(want, rel=1e-6)
        assert ad.derivative(f, 0.7) == pytest.approx(want, rel=1e-6)
        assert ad.jvp(f, (0.7,), (1.0,))[1] == pytest.approx(want, rel=1e-6)
    second = fd(lambda b: ad.derivative(f, b), 0.7)
    assert ad.hessian(f)(0.7) == pytest.approx(second, rel=1e-5, abs=1e-8)


def test_vectorize_calls_the_function_as_numpy_does():
    """The same calls, in the same order (NumPy's extra first call that finds the output type
    included, none with cache=True), and the output type of the first result."""
    for cache in (False, True):
        seen = []

        def f(b):
            def g(t):
                seen.append(float(t))
                return b * t
            return np.sum(np.vectorize(g, cache=cache)(T))

        native = []
        np.vectorize(lambda t: native.append(float(t)) or t, cache=cache)(T)
        ad.grad(f)(0.7)
        assert seen == native


    def first_int(b):  # (NumPy makes every output the first one's type: int, truncated)
        return np.vectorize(lambda t: 1 if t < 0.7 else b * t)(T)

    value = ad.jvp(first_int, (0.7,), (1.0,))[0]
    assert value.dtype == first_int(0.7).dtype == np.int_
    assert np.array_equal(value, first_int(0.7))


def test_frompyfunc_callback_raises_at_the_users_line():
    def f(b):
        return np.sum(np.frompyfunc(lambda t: b * t, 1, 1)(T).astype(float))

    for api in (ad.grad(f), ad.derivative(f)):
        with pytest.raises(MissingRuleError, match="called by C code") as error:
            api(0.7)
        assert error.traceback[-1].frame.code.name == "<lambda>"


def test_native_use_is_the_contexts_choice():
    """The core tells the context that tagged the value (Context.native_use); a context that
    does not override it sees the plain result, as the value behaves like its untagged self."""
    told = []

    class Watching(Context):
        def native_use(self, use, result):
            told.append((use, result))

    def run(x):
        y = tag(x, ctx, "meta")
        return np.frompyfunc(lambda t: y * t, 1, 1)(np.array([2.0]))[0]

    ctx = Watching()
    assert overdub(ctx, run, 3.0) == 6.0
    assert told == [("operator *", 6.0)]
    assert overdub(Context(), lambda x: np.frompyfunc(lambda t: x * t, 1, 1)(2.0), 3.0) == 6.0
