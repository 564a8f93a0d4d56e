"""Forward mode: a ufunc's ``where=`` mask, and text formatting, found by the thirteenth round
of outside testers, kept fixed.

- A ufunc given ``out=`` and ``where=`` (``np.negative(a, out=a, where=x > 0.8)``,
  ``np.sin(x, out=np.full(n, 7.0), where=m)``) writes its value where the mask holds and
  leaves the other elements of ``out`` as they were.  Forward mode gave every element the
  ufunc's derivative (the rules ignore ufunc keywords, and the write of ``out=`` covered all
  of it): ``jacfwd`` gave ``[[-1, 0], [0, -1]]`` where ``jacrev`` and finite differences give
  ``[[1, 0], [0, -1]]``; ``hvp`` through the forward pass was wrong the same way.  The call is
  now the masked write it is: the ufunc computed whole, copied into ``out`` through the mask.
- ``"%.1f" % x`` (a ``str`` or ``bytes`` left operand of ``%``) is text formatting, whose
  result is text, a constant (docs/ad.md); forward mode ran the rule of the numeric modulo on
  it and raised ``TypeError: unsupported operand type(s) for -: 'str' and 'str'``.

Each derivative is checked against central finite differences and reverse mode, on the
forward routes (and the hvp routes for second derivatives), first and repeated calls.
"""

from __future__ import annotations

import numpy as np
import pytest

from overdub_ad import derivative, grad, hessian, hvp, jacfwd, jacrev, jvp, MissingRuleError
from overdub_ad.testing import REFERENCE, force_route
from tests.conftest import fd

pytestmark = pytest.mark.every_route

FORWARD_ROUTES = [None, REFERENCE, "forward-dual"]
HVP_ROUTES = [None, REFERENCE, "hvp-compiled", "hvp-tape"]

X = np.array([0.5, 1.0, 2.0, 3.0])
M = np.array([True, False, True, False])


def _check_forward(f, x, want, repeats=2):
    """``jacfwd``, ``jvp`` along each basis direction and ``derivative`` of the summed output
    of ``f`` at ``x`` are ``want`` (the Jacobian), first and repeated calls."""
    for _ in range(repeats):
        np.testing.assert_allclose(jacfwd(f)(x), want, rtol=1e-6, atol=1e-9, err_msg="jacfwd")
        for i, e in enumerate(np.eye(x.size)):
            np.testing.assert_allclose(jvp(f, (x,), (e,))[1], want[..., i], rtol=1e-6,
                                       atol=1e-9, err_msg="jvp")
        np.testing.assert_allclose(
            derivative(lambda t: np.sum(f(X + t * np.ones(4))), 0.0), np.sum(want),
            rtol=1e-6, atol=1e-9, err_msg="derivative")


# -- a ufunc's where= mask with out= ----------------------------------------------------------

def _negated_in_place(x):
    a = x.copy()
    np.negative(a, out=a, where=x > 0.8)  # (a mask computed from the differentiated values)
    return a


def _into_a_view(x):
    a = x * x
    np.sin(x[:2], out=a[1:3], where=[True, False])
    return a


def _mask_broadcast_over_rows(x):
    a = np.outer(x, x)
    np.exp(a, out=a, where=M[:, None])
    return a.ravel()


def _mask_broadcast_over_columns(x):
    a = np.outer(x, x)
    np.exp(a, out=a, where=M)
    return a.ravel()


def _two_outputs(x):
    frac, whole = x * 3.0, x * 5.0
    np.modf(x * 1.7, out=(frac, whole), where=M)
    return np.concatenate([frac, whole])


def _two_outputs_given_positionally(x):
    q, r = x * 3.0, x * 5.0
    np.divmod(x * 1.7, 2.0, q, r, where=M)
    return np.concatenate([q, r])


def _given_positionally(x):
    a = x ** 2
    np.sin(x, a, where=M)
    return a


def _constant_written(x):
    a = x ** 2
    np.sin(np.ones(4), out=a, where=M)  # (written elements: zero; the others keep 2x)
    return a


def _chained(x):
    a = x.copy()
    np.multiply(a, a, out=a, where=M)
    np.add(a, x, out=a, where=~M)
    return a


def _a_number_into_one_element(x):
    a = x ** 2
    np.sin(x[0] * 1.0, out=a[1:2], where=[False])
    return a


def _out_in_a_tuple(x):
    a = x ** 2
    np.sin(x, out=(a,), where=M)
    return a


MASKED = {f.__name__.strip("_"): f for f in (
    _negated_in_place, _into_a_view, _mask_broadcast_over_rows, _mask_broadcast_over_columns,
    _two_outputs, _two_outputs_given_positionally, _given_positionally, _constant_written,
    _chained, _a_number_into_one_element, _out_in_a_tuple)}
MASKED.update({
    "sin_into_a_constant": lambda x: np.sin(x, out=np.full(4, 7.0), where=M),
    "multiply_into_zeros": lambda x: np.multiply(x, 2.0, out=np.zeros(4), where=M),
    "maximum": lambda x: np.maximum(x, 1.5, out=x * 0 + 3.0, where=M),
    "true_divide": lambda x: np.true_divide(1.0, x, out=x.copy(), where=M),
    "add_a_list_mask": lambda x: np.add(x, x, out=x ** 2, where=[True, False, False, True]),
    "exp_where_first": lambda x: np.exp(x, where=M, out=x ** 2),
    "a_false_mask": lambda x: np.sin(x, out=x ** 2, where=False),
    "a_numpy_false_mask": lambda x: np.sin(x, out=x ** 2, where=np.bool_(False)),
    "floor_no_derivative": lambda x: np.floor(x * 1.3, out=x ** 2, where=M),
})


@pytest.mark.parametrize("route", FORWARD_ROUTES)
@pytest.mark.parametrize("name", sorted(MASKED))
def test_a_ufunc_writes_its_derivative_only_where_its_mask_holds(name, route):
    f = MASKED[name]
    want = fd(f, X)
    with force_route(route):
        np.testing.assert_allclose(jacrev(f)(X), want, rtol=1e-6, atol=1e-9)  # (the other
        _check_forward(f, X, want)                                             # mode)


@pytest.mark.parametrize("route", HVP_ROUTES)
@pytest.mark.parametrize("name", sorted(MASKED))
def test_second_derivatives_through_a_masked_ufunc(name, route):
    """hvp (forward over reverse, and its own routes) agrees with hessian @ v and finite
    differences of the gradient; nested the other way, jacfwd of jacrev too."""
    f = MASKED[name]

    def g(x):
        y = f(x)
        return np.sum(np.sin(y) * y)

    v = np.array([0.3, -0.7, 1.1, 0.4])
    want = fd(grad(g), X)
    with force_route(route):
        for _ in range(2):
            np.testing.assert_allclose(hvp(g, X, v), want @ v, rtol=1e-5, atol=1e-7,
                                       err_msg="hvp")
            np.testing.assert_allclose(hessian(g)(X) @ v, want @ v, rtol=1e-5, atol=1e-7,
                                       err_msg="hessian")
            np.testing.assert_allclose(jacfwd(jacrev(g))(X), want, rtol=1e-5, atol=1e-7,
                                       err_msg="jacfwd of jacrev")


def test_the_masked_write_keeps_numpy_values_and_errors():
    """The restated call computes what NumPy does (the masked elements keep what ``out``
    held) and refuses what NumPy refuses: a float value into integers under same_kind."""
    def f(x):
        a = np.full(4, 7.0)
        r = np.sin(x, out=a, where=M)
        assert r is a
        return a

    y, t = jvp(f, (X,), (np.ones(4),))
    np.testing.assert_array_equal(y, np.where(M, np.sin(X), 7.0))
    np.testing.assert_allclose(t, np.where(M, np.cos(X), 0.0))
    with pytest.raises(TypeError):
        jacfwd(lambda x: np.sin(x, out=np.zeros(4, int), where=M))(X)


def test_a_ufunc_method_with_where_is_refused_not_wrong():
    """``np.add.reduce(..., where=)`` has no restated form: it raises MissingRuleError in both
    modes rather than give a derivative of the unmasked reduction."""
    def f(x):
        return np.add.reduce(x * x, where=M)

    for api in (jacfwd, jacrev):
        with pytest.raises(MissingRuleError):
            api(f)(X)


# -- text formatting ---------------------------------------------------------------------------

def _formatted_in_place(x):
    text = "%.2f"
    text %= x
    return x * x


FORMATTED = {
    "formatted_in_place": _formatted_in_place,
    "percent_a_number": lambda x: ("%.1f" % x, x * x)[1],
    "percent_a_tuple": lambda x: ("%.1f %s" % (x, 2 * x), x * x)[1],
    "percent_a_dict": lambda x: ("%(a).2f" % {"a": x}, x * x)[1],
    "percent_a_list": lambda x: ("%s" % [x], x * x)[1],
    "percent_bytes": lambda x: (b"%.1f" % x, x * x)[1],
    "percent_bytes_a_tuple": lambda x: (b"%.1f %d" % (x, 3), x * x)[1],
    "percent_a_numpy_float": lambda x: ("%.3f" % np.float64(x), x * x)[1],
    "percent_an_array_element": lambda x: ("%.3f" % (np.array([x, 1.0]) * 2)[0], x * x)[1],
    "percent_an_array": lambda x: ("%s" % np.array([x, 2 * x]), x * x)[1],
    "percent_a_numpy_str": lambda x: (np.str_("%.1f") % x, x * x)[1],
    "percent_read_back": lambda x: float("%.3f" % x) * 0.0 + x * x,
    "str_format": lambda x: ("{:.2f}".format(x), x * x)[1],
    "f_string": lambda x: (f"{x:.2f} {x!r}", x * x)[1],
    "format_builtin": lambda x: (format(x, ".2f"), x * x)[1],
}


@pytest.mark.parametrize("route", FORWARD_ROUTES)
@pytest.mark.parametrize("name", sorted(FORMATTED))
def test_text_formatting_is_a_constant(name, route):
    f = FORMATTED[name]
    want = fd(f, 0.7)
    np.testing.assert_allclose(want, 1.4, rtol=1e-6)
    with force_route(route):
        for _ in range(2):
            for what, got in (("derivative", derivative(f, 0.7)), ("jacfwd", jacfwd(f)(0.7)),
                              ("jvp", jvp(f, (0.7,), (1.0,))[1]), ("grad", grad(f)(0.7)),
                              ("second", derivative(lambda t: derivative(f, t), 0.7)),
                              ("jacfwd of grad", jacfwd(grad(f))(0.7))):
                np.testing.assert_allclose(got, 2.0 if what in ("second", "jacfwd of grad")
                                           else 1.4, rtol=1e-6, err_msg=what)


def test_formatting_gives_the_text_numpy_and_python_give():
    def f(x):
        texts.append(("%.3f|%s" % (x, np.float64(x) * 2), b"%.2f" % x))
        return x * x

    texts: list = []
    derivative(f, 0.7)
    jacfwd(f)(0.7)
    assert texts == [("0.700|1.4", b"0.70")] * 2


def test_numeric_modulo_keeps_its_derivative():
    """``%`` of numbers is still the modulo, with its rule."""
    f = lambda x: (x * 3.0) % 2.0 + x % np.array([0.5, 0.3])  # noqa: E731
    for route in FORWARD_ROUTES:
        with force_route(route):
            np.testing.assert_allclose(jacfwd(f)(0.7), fd(f, 0.7), rtol=1e-6)
