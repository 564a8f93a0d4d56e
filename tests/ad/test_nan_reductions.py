"""The NaN-ignoring reductions and scans, differentiated where the input holds NaNs.

Found by testing from outside: ``nanmedian`` put the derivative on the wrong entries (NumPy's
``nanmedian`` calls ``median(..., overwrite_input=True)``, which reorders the array the rule
then read), and forward mode of ``nanmax``/``nansum``/``nanprod``/``nanvar`` returned NaN
everywhere (a NaN entry's tangent, NaN when the NaN was computed, times a 0 weight).  Each
function is composed with ``x * x`` so that the NaN entry's tangent is NaN, as in real code;
the derivatives are compared with finite differences on the non-NaN entries (perturbing a NaN
leaves it NaN), in both modes, called twice.
"""

import warnings

import numpy as np
import pytest

from overdub_ad import MissingRuleError, grad, jacfwd, jacrev, jvp
from tests.conftest import fd

XN = np.array([0.5, np.nan, 2.0, -1.0, 3.0])
MN = np.array([[3.0, 1.0, np.nan, 2.0, 0.7],
               [1.5, -2.0, 3.0, np.nan, np.nan],
               [0.2, 0.9, -0.4, 1.1, 2.5]])

FUNCS = [np.nansum, np.nanmean, np.nanprod, np.nanmax, np.nanmin, np.nanvar, np.nanstd,
         np.nanmedian, np.nancumsum, np.nancumprod]
CASES = ([(fn, XN, {}) for fn in FUNCS]
         + [(fn, MN, {"axis": ax}) for fn in FUNCS for ax in (0, 1)]
         + [(fn, MN, {}) for fn in FUNCS if fn not in (np.nancumsum, np.nancumprod)]
         + [(np.nanmedian, MN, {"axis": 1, "keepdims": True}),
            (np.nanmedian, MN[:, :4], {"axis": (0, 1)}),
            (np.nanmax, MN, {"axis": 0, "keepdims": True}),
            (np.nanvar, MN, {"axis": 1, "ddof": 1})])


def _id(case):
    fn, x, kw = case
    return f"{fn.__name__}-{x.ndim}d-" + ",".join(f"{k}={v}" for k, v in kw.items())


def _squared(fn, kw):
    return lambda x: fn(x * x, **kw)


def _real_columns(jac, x):
    """The Jacobian's columns at the non-NaN entries of ``x``."""
    return np.reshape(jac, np.shape(jac)[:np.ndim(jac) - x.ndim] + (-1,))[..., ~np.isnan(x).ravel()]


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_jacobians_match_finite_differences(case):
    fn, x, kw = case
    f = _squared(fn, kw)
    want = _real_columns(fd(f, x), x)
    assert np.all(np.isfinite(want))
    for _ in range(2):
        forward, reverse = jacfwd(f)(x), jacrev(f)(x)
        assert np.all(np.isfinite(forward))  # a NaN entry's column is 0, not NaN everywhere
        np.testing.assert_allclose(_real_columns(forward, x), want, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(_real_columns(reverse, x), want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_jvp_along_a_direction_through_the_nans(case):
    fn, x, kw = case
    f = _squared(fn, kw)
    v = np.linspace(0.3, 1.7, x.size).reshape(x.shape)  # nonzero on the NaN entries too
    want = fd(lambda t: f(x + t * v), 0.0)
    for _ in range(2):
        value, tangent = jvp(f, (x,), (v,))
        np.testing.assert_allclose(value, f(x))
        np.testing.assert_allclose(tangent, want, rtol=1e-6, atol=1e-8)


def test_nanmedian_gradients_reported():
    for x, want in (([3.0, 1.0, np.nan, 2.0, 5.0], [0.5, 0, 0, 0.5, 0]),
                    ([0.5, np.nan, 2.0, -1.0], [1.0, 0, 0, 0])):
        x = np.array(x)
        for _ in range(2):
            np.testing.assert_array_equal(grad(np.nanmedian)(x), want)
            np.testing.assert_array_equal(jacfwd(np.nanmedian)(x), want)


def test_forward_nanmax_and_nansum_reported():
    for _ in range(2):
        np.testing.assert_array_equal(jacfwd(lambda x: np.nanmax(x ** 2))(XN), [0, 0, 0, 0, 6])
        rev = jacrev(lambda x: np.nanmax(x ** 2))(XN)
        np.testing.assert_array_equal(rev[[0, 2, 3, 4]], [0, 0, 0, 6])
        _, t = jvp(lambda x: np.nansum(x ** 2), (XN,), (np.array([1.0, 0, 1, 1, 1]),))
        assert t == 9.0


def test_nanmedian_group_of_nans_only_has_derivative_zero():
    x = np.array([[np.nan, np.nan, np.nan], [2.0, np.nan, -1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # All-NaN slice
        for _ in range(2):
            forward = jacfwd(lambda a: np.nanmedian(a, axis=1))(x)
            reverse = jacrev(lambda a: np.nanmedian(a, axis=1))(x)
            _, t = jvp(lambda a: np.nanmedian(a, axis=1), (x,), (np.ones_like(x),))
            want = np.zeros((2, 2, 3))
            want[1, 1, [0, 2]] = 0.5
            np.testing.assert_array_equal(forward, want)
            np.testing.assert_array_equal(reverse, want)
            np.testing.assert_array_equal(t, [0.0, 1.0])


@pytest.mark.parametrize("fn", [np.median, np.nanmedian])
def test_overwrite_input_raises_rather_than_misplace_the_derivative(fn):
    x = np.array([3.0, 1.0, 5.0, 2.0])
    f = lambda a: fn(a * 1.0, overwrite_input=True)  # noqa: E731
    for derivative in (grad, jacfwd):
        with pytest.raises(MissingRuleError, match="overwrite_input"):
            derivative(f)(x)
    np.testing.assert_array_equal(grad(lambda a: fn(a * 1.0))(x), [0.5, 0, 0, 0.5])
