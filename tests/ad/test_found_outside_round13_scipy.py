"""Found from outside (session 11's autograd-suite tester), fixed at the root: a list or tuple
holding a differentiated number given to a SciPy array function (scipy.special.logsumexp,
softmax, scipy.linalg.expm/sqrtm/solve_triangular) raised in forward mode -- with a different
TypeError on each route -- where reverse mode gave the derivative.  SciPy's array functions
read a list as an array, as NumPy's do (docs/ad.md: "a list given to NumPy is read as an
array, in both modes"); a differentiated value inside a keyword argument's list leaves the
dual route for the general mode, which binds it."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.special as sc

import overdub_ad as ad
from overdub_ad.testing import REFERENCE, force_route
from tests.conftest import fd

CASES = {
    "logsumexp([x, 1])": lambda x: sc.logsumexp([x, 1.0]),
    "logsumexp(b=[x, 1])": lambda x: sc.logsumexp([1.0, 2.0], b=[x, 1.0]),
    "logsumexp((x, x*x), b=(1, x))": lambda x: sc.logsumexp((x, x * x), b=(1.0, x)),
    "softmax([x, 1, 0.5])[0]": lambda x: sc.softmax([x, 1.0, 0.5])[0],
    "expm([[x, 1], [0, 2]])": lambda x: np.sum(sla.expm([[x, 1.0], [0.0, 2.0]])),
    "sqrtm([[x+2, 1], [1, 3]])": lambda x: np.sum(sla.sqrtm([[x + 2.0, 1.0], [1.0, 3.0]])),
    "solve_triangular": lambda x: np.sum(sla.solve_triangular([[x, 0.0], [1.0, 2.0]], [1.0, x],
                                                              lower=True)),
    "np.sum(b=...) beside": lambda x: sc.logsumexp(np.array([x, 0.5]), b=[2.0, x]),
}


@pytest.mark.parametrize("name", CASES)
def test_lists_given_to_scipy_array_functions(name):
    f = CASES[name]
    x = 0.7
    want = fd(f, x)
    for route in (None, REFERENCE):
        with force_route(route):
            for _ in range(3):
                assert ad.derivative(f, x) == pytest.approx(want, rel=1e-6)
                assert ad.grad(f)(x) == pytest.approx(want, rel=1e-6)
                assert ad.jvp(f, (x,), (1.0,))[1] == pytest.approx(want, rel=1e-6)
            assert ad.hessian(f)(x) == pytest.approx(fd(ad.grad(f), x), rel=1e-5, abs=1e-8)


def test_solver_argument_tuples_are_not_arrays():
    """scipy.integrate and scipy.optimize take ``args=(x,)`` as an argument list: left one."""
    import scipy.integrate as si

    def f(x):
        return si.quad(lambda t, k, c: np.sin(k * t) * c, 0.0, 1.0, args=(x, 2.0))[0]

    want = fd(f, 0.9)
    assert ad.derivative(f, 0.9) == pytest.approx(want, rel=1e-6)
    assert ad.grad(f)(0.9) == pytest.approx(want, rel=1e-6)
