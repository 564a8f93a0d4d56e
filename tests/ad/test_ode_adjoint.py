"""Reverse mode through ``odeint`` and ``solve_ivp`` by the adjoint method (issue #15, item 11).

Every derivative is checked against central finite differences of the whole solve, and against
forward mode (forward sensitivities, the other method) along a random direction; the solves
are tight (``rtol=1e-10``, ``atol=1e-12``) so that both agree to about 1e-5.  Forward mode is
checked along one direction only: it costs one extended solve per direction.

Cases: Lorenz with each method (explicit and implicit), a linear system whose solution is
known in closed form, parameters closed over and given in ``args=``, right-hand sides that are
methods, several outputs with the loss on all of them (or on some: the cotangent jumps only
where it enters), ``y0`` and the parameters differentiated together, repeated calls and
pullbacks, and derivatives nested once (which take forward sensitivities: see
``_scipy_solvers._by_adjoint``).
"""

from __future__ import annotations

import numpy as np
import pytest

import overdub_ad as ad
from overdub_ad import MissingRuleError
from overdub_ad.rules import _scipy_solvers
from tests.conftest import fd

si = pytest.importorskip("scipy.integrate")

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

TIGHT = {"rtol": 1e-10, "atol": 1e-12}
# for derivatives that differentiate each step again (second derivatives, forward mode through
# an implicit method): 1e-8, a quarter of the steps, still far inside the checks' rtol of 1e-5
NESTED = {"rtol": 1e-8, "atol": 1e-10}
METHODS = ["RK45", "DOP853", "LSODA", "Radau", "BDF"]


def direction(x, seed=0):
    return np.random.default_rng(seed).standard_normal(np.shape(x))


def assert_gradient(got, want, rtol=1e-5, *, noisy=False):
    """``got`` against finite differences ``want``, to ``rtol`` and ``atol=1e-8``.

    ``noisy``: LSODA (``odeint``'s method, and ``solve_ivp``'s ``"LSODA"``) switches step sizes
    and orders as the parameter moves, so its finite differences are noisy at about 1e-7 of
    the whole gradient (not of each component); there the absolute tolerance scales with the
    gradient, and the gradient is also held to forward mode (see ``check_grad``)."""
    atol = 1e-7 * np.max(np.abs(want)) if noisy else 1e-8
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def check_grad(loss, x, *, noisy=False):
    """``grad(loss)`` at ``x`` against finite differences, twice (first and repeated call), and
    against forward mode along a random direction."""
    g = ad.grad(loss)(x)
    assert_gradient(g, fd(loss, x), noisy=noisy)
    np.testing.assert_allclose(ad.grad(loss)(x), g, rtol=1e-12, atol=1e-14)
    v = direction(x)
    _, dl = ad.jvp(loss, (x,), (v,))
    np.testing.assert_allclose(dl, np.sum(g * v), rtol=1e-6)


@pytest.fixture
def no_sensitivities(monkeypatch):
    """First-order reverse mode must not fall back on forward sensitivities: they raise."""
    def refuse(*args, **kwargs):
        raise AssertionError("forward sensitivities in first-order reverse mode")
    monkeypatch.setattr(_scipy_solvers, "_sensitivities", refuse)


# -- Lorenz, every method ---------------------------------------------------------------------

T_LORENZ = np.array([0.05, 0.1, 0.15, 0.2])


def lorenz(p, method, tolerances=TIGHT):
    """The squares of the Lorenz trajectory at four times; ``p`` is (sigma, rho, beta) closed
    over by the right-hand side, then the initial state."""
    sigma, rho, beta = p[0], p[1], p[2]

    def f(t, y):
        return np.array([sigma * (y[1] - y[0]), y[0] * (rho - y[2]) - y[1],
                         y[0] * y[1] - beta * y[2]])
    res = si.solve_ivp(f, (0.0, 0.2), p[3:], method=method, t_eval=T_LORENZ, **tolerances)
    return np.sum(res.y ** 2)


P_LORENZ = np.array([10.0, 28.0, 8.0 / 3.0, 1.0, 0.5, 2.0])


@pytest.mark.parametrize("method", METHODS)
def test_lorenz_by_the_adjoint(method, no_sensitivities):
    """Parameters and ``y0`` in one array: the gradient against finite differences, first and
    repeated call, with no forward sensitivity taken."""
    g = ad.grad(lambda p: lorenz(p, method))(P_LORENZ)
    assert_gradient(g, fd(lambda p: lorenz(p, method), P_LORENZ), noisy=method == "LSODA")
    np.testing.assert_allclose(ad.grad(lambda p: lorenz(p, method))(P_LORENZ), g, rtol=1e-12)


@pytest.mark.parametrize("method", ["DOP853", "Radau", "LSODA"])
def test_lorenz_against_forward_mode(method):
    """The adjoint against forward sensitivities (one direction: forward mode solves the system
    extended by one sensitivity per direction, through overdub_ad's jvp of the callback), for
    an explicit, an implicit and a switching method.  (At 1e-8: forward mode through the
    implicit method's Python steps is the suite's slowest test at 1e-10, and the checks' 1e-5
    and 1e-6 are far outside either.)"""
    check_grad(lambda p: lorenz(p, method, NESTED), P_LORENZ, noisy=method == "LSODA")


def test_lorenz_odeint(no_sensitivities):
    def loss(p):
        sigma, rho, beta = p[0], p[1], p[2]

        def f(y, t):
            return np.array([sigma * (y[1] - y[0]), y[0] * (rho - y[2]) - y[1],
                             y[0] * y[1] - beta * y[2]])
        return np.sum(si.odeint(f, p[3:], np.linspace(0.0, 0.2, 5), **TIGHT) ** 2)
    assert_gradient(ad.grad(loss)(P_LORENZ), fd(loss, P_LORENZ), noisy=True)


# -- a linear system with a known solution ----------------------------------------------------

T_OUT = np.array([0.0, 0.4, 1.1, 2.0])


def spiral_exact(a, w, y0, t):
    """``y' = [[-a, w], [-w, -a]] y``: ``y(t) = exp(-a t) R(-w t) y0``."""
    c, s = np.cos(w * t), np.sin(w * t)
    return np.exp(-a * t) * np.array([c * y0[0] + s * y0[1], -s * y0[0] + c * y0[1]])


def spiral_loss(x, solver):
    """A loss on every output; ``x`` = (a, w, y0[0], y0[1])."""
    a, w, y0 = x[0], x[1], x[2:]
    if solver == "exact":
        ys = [spiral_exact(a, w, y0, t) for t in T_OUT]
    elif solver == "odeint":
        ys = list(si.odeint(lambda y, t: np.array([-a * y[0] + w * y[1], -w * y[0] - a * y[1]]),
                            y0, T_OUT, **TIGHT))
    else:
        res = si.solve_ivp(lambda t, y: np.array([-a * y[0] + w * y[1], -w * y[0] - a * y[1]]),
                           (0.0, 2.0), y0, method=solver, t_eval=T_OUT, **TIGHT)
        ys = list(res.y.T)
    return sum(np.sin(k + 1.0) * np.sum(y ** 2) + y[0] * (k - 1.0) for k, y in enumerate(ys))


@pytest.mark.parametrize("solver", ["odeint", "RK45", "Radau"])
def test_linear_system_known_solution(solver, no_sensitivities):
    x = np.array([0.3, 1.7, 1.0, -0.5])
    want = ad.grad(lambda x: spiral_loss(x, "exact"))(x)
    np.testing.assert_allclose(want, fd(lambda x: spiral_loss(x, "exact"), x), rtol=1e-7)
    got = ad.grad(lambda x: spiral_loss(x, solver))(x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


def test_linear_system_forward_mode():
    x = np.array([0.3, 1.7, 1.0, -0.5])
    check_grad(lambda x: spiral_loss(x, "odeint"), x)


def test_twenty_parameters(no_sensitivities):
    """``y' = A(theta) y + b(theta) sin(t)``, 16 + 4 parameters: one backward solve."""
    theta = np.concatenate([0.3 * direction(np.zeros(16), 1), direction(np.zeros(4), 2)])

    def loss(theta):
        def f(t, y):
            return (np.reshape(theta[:16], (4, 4)) - 2.0 * np.eye(4)) @ y + \
                theta[16:] * np.sin(t)
        res = si.solve_ivp(f, (0.0, 2.0), np.ones(4), t_eval=np.linspace(0.0, 2.0, 6), **TIGHT)
        return np.sum(res.y ** 2)
    assert_gradient(ad.grad(loss)(theta), fd(loss, theta))


# -- parameters closed over and given in args=; y0 and parameters together --------------------

def decay_ivp(k, y0, method="RK45"):
    """``k`` in ``args=``, ``k[0] * 2`` closed over, outputs at several times."""
    c = 2.0 * k[0]

    def f(t, y, k):
        return np.array([-k[0] * y[0] + c * np.sin(y[1]), -k[1] * y[1] * y[0] + np.cos(t)])
    res = si.solve_ivp(f, (0.0, 1.5), y0, method=method, t_eval=[0.3, 0.9, 1.5], args=(k,),
                       **TIGHT)
    return res.y


def decay_odeint(k, y0):
    c = 2.0 * k[0]

    def f(t, y, k0, k1):
        return [-k0 * y[0] + c * np.sin(y[1]), -k1 * y[1] * y[0] + np.cos(t)]
    return si.odeint(f, y0, [0.0, 0.3, 0.9, 1.5], args=(k[0], k[1]), tfirst=True, **TIGHT).T


K = np.array([0.7, 0.4])
Y0 = np.array([1.0, -0.3])


@pytest.mark.parametrize("solve", [decay_ivp, decay_odeint], ids=["solve_ivp", "odeint"])
def test_args_closure_and_y0_together(solve, no_sensitivities):
    def loss(k, y0):
        y = solve(k, y0)
        return np.sum(np.tanh(y) * np.arange(1.0, 1.0 + np.size(y)).reshape(np.shape(y)))
    gk, gy0 = ad.grad(loss, argnums=(0, 1))(K, Y0)
    np.testing.assert_allclose(gk, fd(lambda k: loss(k, Y0), K), rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(gy0, fd(lambda y0: loss(K, y0), Y0), rtol=1e-5, atol=1e-9)
    again = ad.grad(loss, argnums=(0, 1))(K, Y0)
    np.testing.assert_allclose(again[0], gk, rtol=1e-12)
    np.testing.assert_allclose(again[1], gy0, rtol=1e-12)


@pytest.mark.parametrize("solve", [decay_ivp, decay_odeint], ids=["solve_ivp", "odeint"])
def test_args_against_forward_mode(solve):
    x = np.concatenate([K, Y0])
    check_grad(lambda x: np.sum(solve(x[:2], x[2:]) ** 3), x)


# -- right-hand sides that are methods --------------------------------------------------------

class Oscillator:
    def __init__(self, k):
        self.k = k

    def rhs(self, t, y):
        return np.array([y[1], -self.k * y[0] - 0.1 * y[1]])

    def rhs_args(self, t, y, k):
        return np.array([y[1], -k * y[0] - 0.1 * y[1]])

    def solve(self, y0):
        res = si.solve_ivp(self.rhs, (0.0, 2.0), y0, t_eval=[1.0, 2.0], **TIGHT)
        return np.sum(res.y ** 2)

    def solve_with_args(self, y0):
        res = si.solve_ivp(self.rhs_args, (0.0, 2.0), y0, t_eval=[1.0, 2.0], args=(self.k,),
                           **TIGHT)
        return np.sum(res.y ** 2)


def test_method_rhs_constant_attribute(no_sensitivities):
    """A bound method reading ``self.k`` (a constant here): ``y0`` is differentiated."""
    model = Oscillator(3.0)
    y0 = np.array([1.0, 0.2])
    np.testing.assert_allclose(ad.grad(model.solve)(y0), fd(model.solve, y0), rtol=1e-5)


def test_method_rhs_parameter_in_args(no_sensitivities):
    """``self.k`` differentiated, handed to the method in ``args=``: the rule sees it."""
    y0 = np.array([1.0, 0.2])

    def loss(k):
        return Oscillator(k).solve_with_args(y0)
    np.testing.assert_allclose(ad.grad(loss)(3.0), fd(loss, 3.0), rtol=1e-5)


def test_method_rhs_differentiated_attribute_raises():
    """``self.k`` differentiated and read by the method from its object: the solver's rule
    cannot be given it, and says so in both modes -- never a silent zero."""
    y0 = np.array([1.0, 0.2])
    for transform in (ad.grad, ad.derivative):
        with pytest.raises(MissingRuleError, match="scipy.integrate.solve_ivp"):
            transform(lambda k: Oscillator(k).solve(y0))(3.0)


# -- several outputs: the cotangent jumps where it enters -------------------------------------

@pytest.mark.parametrize("solver", ["odeint", "solve_ivp"])
def test_jacobian_of_every_output(solver, no_sensitivities):
    """``jacrev`` of the whole trajectory pulls back one output at a time: the cotangent is
    zero after (and before) the output it enters at."""
    def trajectory(x):
        k, y0 = x[:2], x[2:]
        return decay_ivp(k, y0) if solver == "solve_ivp" else decay_odeint(k, y0)
    x = np.concatenate([K, Y0])
    np.testing.assert_allclose(ad.jacrev(trajectory)(x), fd(trajectory, x), rtol=1e-5,
                               atol=1e-8)


def test_every_step_output_and_backwards_in_time(no_sensitivities):
    """``t_eval=None``, an output at every step, and solves run backwards in time."""
    def final(k):
        res = si.solve_ivp(lambda t, y: -k * y * (1.0 - y), (0.0, 1.0), [0.3], **TIGHT)
        return np.sin(res.y[0, -1]) + res.y[0, 0]

    def backwards(k):
        ys = si.odeint(lambda y, t: -k * np.sin(y) + t, [0.3, 1.0], [1.0, 0.6, 0.0], **TIGHT)
        res = si.solve_ivp(lambda t, y: -k * y ** 3, (2.0, 0.5), [0.8], t_eval=[1.5, 0.5],
                           method="DOP853", **TIGHT)
        return np.sum(ys ** 2) + np.sum(res.y)
    for loss in (final, backwards):
        assert_gradient(ad.grad(loss)(0.7), fd(loss, 0.7))


def test_every_step_output_against_forward_mode():
    """A loss on every step's output: the step times move with ``k``, so finite differences
    (which see them move) do not apply; the two modes, which hold the times fixed, agree."""
    def every_step(k):
        res = si.solve_ivp(lambda t, y: -k * y * (1.0 - y), (0.0, 1.0), [0.3], **TIGHT)
        return np.sum(np.sin(res.y) * np.arange(1.0, 1.0 + np.size(res.y)))
    np.testing.assert_allclose(ad.grad(every_step)(0.7), ad.derivative(every_step)(0.7),
                               rtol=1e-7)


def test_repeated_pullbacks_with_other_cotangents(no_sensitivities):
    """One ``vjp``, its pullback called with several cotangents (the rules of theta and y0
    share a backward solve: never another cotangent's)."""
    x = np.concatenate([K, Y0])

    def trajectory(x):
        return decay_ivp(x[:2], x[2:])
    out, pullback = ad.vjp(trajectory, x)
    jac = fd(trajectory, x)
    rng = np.random.default_rng(3)
    cts = [rng.standard_normal(np.shape(out)) for _ in range(3)]
    for ct in cts + cts[:1]:
        np.testing.assert_allclose(pullback(ct)[0], np.tensordot(ct, jac, 2), rtol=1e-5,
                                   atol=1e-8)


# -- nested once ------------------------------------------------------------------------------

def growth(k):
    y = si.odeint(lambda y, t: k * y * (1.0 - y), [0.2], [0.0, 0.5, 1.0], **NESTED)
    res = si.solve_ivp(lambda t, y: -k * y + np.sin(t), (0.0, 1.0), [k], t_eval=[0.5, 1.0],
                       **NESTED)
    return np.sum(y ** 2) + np.sum(res.y ** 2)


def test_nested_once():
    """Second derivatives (forward over reverse, reverse over reverse), and ``jvp`` of
    ``grad``, against finite differences of the first derivative."""
    k = 0.8
    want = fd(ad.grad(growth), k, 1e-4)
    np.testing.assert_allclose(ad.hessian(growth)(k), want, rtol=1e-5)
    np.testing.assert_allclose(ad.grad(ad.grad(growth))(k), want, rtol=1e-5)
    np.testing.assert_allclose(ad.jvp(ad.grad(growth), (k,), (1.0,))[1], want, rtol=1e-5)


def test_complex_state_takes_forward_sensitivities():
    """A complex state: reverse mode as before the adjoint (forward sensitivities), right."""
    def loss(w):
        res = si.solve_ivp(lambda t, y: 1j * w * y - 0.2 * y, (0.0, 1.0),
                           np.array([1.0 + 0.5j]), t_eval=[0.5, 1.0], **TIGHT)
        return np.sum(np.real(res.y) ** 2 + 3.0 * np.imag(res.y))
    np.testing.assert_allclose(ad.grad(loss)(1.3), fd(loss, 1.3), rtol=1e-5)
