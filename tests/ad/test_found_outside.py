"""Derivatives through frame namespaces and caches, as found by testing from outside: text run
by one-argument ``exec``/``eval`` inside a function, and dict caches read with ``get``/``pop``/
``setdefault`` by a differentiated key."""

import numpy as np
import pytest

import overdub_ad as ad
from overdub_ad import MissingRuleError
from tests.conftest import fd


def exec_into_globals(x):
    exec("global _exec_result; _exec_result = x * x * 3.0")
    return _exec_result  # noqa: F821 (bound by the text)


def exec_into_locals(x):
    exec("z = x * x + 2.0 * x")
    return locals()["z"]


def exec_with_explicit_namespaces(x):
    exec("z = x ** 3", globals(), locals())
    return locals()["z"]


def exec_through_a_held_locals_dict(x):
    scope = locals()
    exec("z = np.sin(x) * x", globals(), scope)
    return scope["z"]


def eval_in_a_function(x):
    return eval("x * np.exp(x)")


CASES = [(exec_into_globals, lambda x: 6.0 * x),
         (exec_into_locals, lambda x: 2.0 * x + 2.0),
         (exec_with_explicit_namespaces, lambda x: 3.0 * x * x),
         (exec_through_a_held_locals_dict, lambda x: np.cos(x) * x + np.sin(x)),
         (eval_in_a_function, lambda x: np.exp(x) * (1.0 + x))]


@pytest.mark.parametrize("f,df", CASES, ids=[c[0].__name__ for c in CASES])
def test_text_run_in_a_function_frame_is_differentiated(f, df):
    for x in (0.7, -1.3, 0.7):  # first and repeated calls
        assert ad.grad(f)(x) == pytest.approx(df(x), rel=1e-12)
        assert ad.derivative(f, x) == pytest.approx(df(x), rel=1e-12)
        assert ad.derivative(ad.grad(f), x) == pytest.approx(
            (ad.grad(f)(x + 1e-6) - ad.grad(f)(x - 1e-6)) / 2e-6, rel=1e-6)


def test_text_run_in_a_function_frame_keeps_its_plain_result():
    for f, _ in CASES:
        assert ad.value_and_grad(f)(0.4)[0] == pytest.approx(f(0.4), rel=1e-15)


def _memoised(memo, read):
    def f(x):
        found = read(memo, x)
        if found is None:
            found = x * x
            memo[x] = found
        return found
    return f


READS = {"get": lambda memo, x: memo.get(x),
         "dict.get": lambda memo, x: dict.get(memo, x),
         "pop": lambda memo, x: memo.pop(x, None),
         "setdefault": lambda memo, x: memo.setdefault(x, None)}


@pytest.mark.parametrize("read", list(READS))
@pytest.mark.parametrize("transform", [ad.grad, lambda f: lambda x: ad.derivative(f, x)],
                         ids=["grad", "derivative"])
def test_a_cache_read_by_a_differentiated_key_is_not_a_silent_constant(read, transform):
    """A plain number stored before the derivative, read back for an equal key by a dict method,
    raises as ``memo[x]`` does (it has no derivative with respect to the key)."""
    memo = {}
    f = _memoised(memo, READS[read])
    assert f(3.0) == 9.0  # cached, plainly
    with pytest.raises(MissingRuleError, match="differentiated key"):
        transform(f)(3.0)


@pytest.mark.parametrize("read", ["get", "pop", "setdefault"])
def test_a_cache_filled_under_the_derivative_or_missing_the_key_differentiates(read):
    f = _memoised({}, READS[read])
    assert ad.grad(f)(2.5) == 5.0  # the key is not there: computed under the derivative
    assert ad.derivative(f, 1.5) == 3.0

    def twice(x):  # stored and read back within one derivative: carries its derivative
        memo = {}
        first = _memoised(memo, READS[read])(x)
        again = READS[read](memo, x)
        return first + (first if again is None else again)
    want = 4.0 * 1.25
    assert ad.grad(twice)(1.25) == want
    assert ad.derivative(twice, 1.25) == want


def test_a_cache_default_is_a_constant_as_written():
    def f(x):
        return {}.get(x, 2.0) * x
    assert ad.grad(f)(3.0) == 2.0
    assert ad.derivative(f, 3.0) == 2.0


# -- second derivatives through a rule given a list of arrays -------------------------------------

A2 = np.array([[1.0, 0.2], [0.1, 2.0]])
LIST_FUNCTIONS = {
    "multi_dot3": lambda t: np.sum(np.linalg.multi_dot([t * A2, t * A2, A2])),
    "multi_dot2": lambda t: np.sum(np.linalg.multi_dot([A2, t * A2]) * t),
    "concatenate": lambda t: np.sum(np.concatenate([t * A2, np.sin(t) * A2]) ** 2),
    "stack": lambda t: np.sum(np.stack([t * A2, A2]) ** 3),
    "block": lambda t: np.sum(np.block([[t * A2, A2], [A2, t * t * A2]]) ** 2),
}


@pytest.mark.parametrize("name", list(LIST_FUNCTIONS))
def test_second_derivatives_through_a_list_of_arrays(name):
    """Forward over reverse through a rule whose argument is a list (np.linalg.multi_dot's
    was 0: the list the rule returned held its members plain)."""
    f = LIST_FUNCTIONS[name]
    want = fd(ad.grad(f), 1.5)
    for _ in range(2):
        for got in (ad.hessian(f)(1.5), ad.derivative(ad.grad(f))(1.5),
                    ad.grad(ad.grad(f))(1.5), ad.derivative(ad.derivative(f))(1.5),
                    ad.jacfwd(ad.jacrev(f))(1.5)):
            assert got == pytest.approx(want, rel=1e-6)


# -- an inner reverse-mode derivative writing into an array built from outer values ---------------

def _write_back(x, y):
    b = np.array([x, 0.0])
    b[0] = b[0] * y
    return b[0]


def _augmented(x, y):
    b = np.array([x, 0.0])
    b[0] *= y
    return b[0]


def _other_slot(x, y):
    b = np.array([x, 1.0]) * 1.0
    b[1] = b[0] * y
    return b[1] * y


INNER = {
    "grad": lambda g, x: ad.grad(lambda y: g(x, y))(3.0),
    "jacrev": lambda g, x: ad.jacrev(lambda y: g(x, y))(3.0),
    "vjp": lambda g, x: ad.vjp(lambda y: g(x, y), 3.0)[1](1.0)[0],
    "value_and_grad": lambda g, x: ad.value_and_grad(lambda y: g(x, y))(3.0)[1],
    "hvp": lambda g, x: ad.hvp(lambda y: y * g(x, y), 3.0, 1.0),
}


@pytest.mark.parametrize("inner", list(INNER))
@pytest.mark.parametrize("body", [_write_back, _augmented, _other_slot])
def test_outer_derivative_through_an_inner_reverse_write(inner, body):
    """The inner reverse-mode derivative writes a value it differentiates into an array that
    carries the outer derivative (it was 0: the array's new version was not seen as this
    derivative's through the outer tag)."""
    h = lambda x: INNER[inner](body, x)  # noqa: E731
    want = fd(h, 1.5)
    assert h(1.5) == pytest.approx(INNER[inner](body, 1.5))
    for outer in (ad.grad(h), lambda x: ad.derivative(h, x), lambda x: ad.jvp(h, (x,), (1.0,))[1]):
        for _ in range(2):
            assert outer(1.5) == pytest.approx(want, rel=1e-6, abs=1e-9)


# -- an element read from an array, then the array written in place (found by the fuzzer) ---------

def _scale_after_read(x):
    a = x.copy()
    a += x
    s = a[1]
    a *= 2.0
    return s + np.sum(a) * 0.5


def _constant_after_read(x):
    a = x.copy()
    a += np.concatenate([x[1:], x[:1]])
    s = a[1] * a[2]
    a[1] = 7.0
    return s * np.sum(a)


def _out_after_read(x):
    a = x * 1.0
    a += x ** 2
    s = a[0]
    np.sin(a, out=a)
    a *= a
    return s * a[2] + np.sum(a)


def _loop_of_reads(x):
    a = x.copy()
    total = 0.0
    for i in range(3):
        a += x
        total = total + a[i] * a[(i + 1) % 3]
        a[i] = 0.5 * a[i]
    return total


@pytest.mark.parametrize("f", [_scale_after_read, _constant_after_read, _out_after_read,
                               _loop_of_reads])
def test_an_element_read_keeps_its_tangent_when_the_array_is_written_later(f):
    """The tangent of ``a[i]`` (an array written in place before) was a view of the array's
    tangents, so a later write into the array changed it: forward mode disagreed with reverse
    mode and finite differences."""
    x = np.array([1.5, 1.2, 0.9])
    want = np.array([fd(lambda t: f(x + t * e), 0.0) for e in np.eye(3)])
    for _ in range(2):
        np.testing.assert_allclose(ad.jacfwd(f)(x), want, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(ad.grad(f)(x), want, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(ad.jvp(f, (x,), (np.ones(3),))[1], want.sum(), rtol=1e-6)
    np.testing.assert_allclose(ad.hessian(f)(x), ad.jacrev(ad.jacrev(f))(x), rtol=1e-6,
                               atol=1e-8)


def test_out_ellipsis_asks_for_an_array_and_writes_nothing():
    """NumPy 2's ``out=...`` (an array even for a 0-d result; np.nanpercentile's own code uses
    it) crashed reverse mode."""
    f = lambda x: np.floor(x[0], out=...) + np.sin(x[1], out=...) * x[2]  # noqa: E731
    x = np.array([0.3, 0.7, 1.9])
    want = np.array([0.0, np.cos(0.7) * 1.9, np.sin(0.7)])
    for _ in range(2):
        np.testing.assert_allclose(ad.grad(f)(x), want, rtol=1e-12)
        np.testing.assert_allclose(ad.jacfwd(f)(x), want, rtol=1e-12)
    assert type(ad.value_and_grad(f)(x)[0]) is type(f(x))
