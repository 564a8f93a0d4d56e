"""Fit the parameters of an ODE to data with SciPy's BFGS, given exact gradients by overdub_ad.

    python examples/ode_fit.py

A damped spring, x'' = -k x - c x', integrated by a hand-written fourth-order Runge-Kutta loop
in plain Python and NumPy.  From noisy measurements of x(t) we recover the stiffness k and the
damping c by minimising the squared error with scipy.optimize.minimize(loss, x0,
jac=grad(loss)): grad differentiates straight through the integrator's loop, with no change to
the code.  Needs SciPy (pip install scipy).
"""

import numpy as np
from scipy.optimize import minimize

from overdub_ad import grad

DT, STEPS = 0.05, 200                 # integrate over t in [0, 10]
START = np.array([1.0, 0.0])          # x(0) = 1, x'(0) = 0
TRUE = np.array([4.0, 0.5])           # k (so omega = 2) and c
NOISE = 0.01                          # standard deviation of the measurement noise


def spring(state, params):
    """The right-hand side of the ODE as a first-order system in (x, v)."""
    k, c = params
    x, v = state
    return np.array([v, -k * x - c * v])


def simulate(params):
    """x(t) at t = 0, DT, ..., STEPS * DT, by classic RK4."""
    state = START
    xs = [state[0]]
    for _ in range(STEPS):
        k1 = spring(state, params)
        k2 = spring(state + DT / 2 * k1, params)
        k3 = spring(state + DT / 2 * k2, params)
        k4 = spring(state + DT * k3, params)
        state = state + DT / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        xs.append(state[0])
    return np.array(xs)


def measurements(seed=0):
    rng = np.random.default_rng(seed)
    return simulate(TRUE) + NOISE * rng.standard_normal(STEPS + 1)


DATA = measurements()


def loss(params):
    return np.mean((simulate(params) - DATA) ** 2)


def central_differences(f, x, h=1e-6):
    return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(len(x))])


def fit(x0):
    return minimize(loss, x0, jac=grad(loss), method="BFGS")


def main():
    x0 = np.array([3.0, 1.0])
    exact, numeric = grad(loss)(x0), central_differences(loss, x0)
    print(f"gradient at k={x0[0]}, c={x0[1]}:  grad(loss) = {exact}")
    print(f"                       central differences = {numeric}")
    assert np.allclose(exact, numeric, rtol=1e-6, atol=1e-10)

    result = fit(x0)
    k, c = result.x
    print(f"BFGS: {result.message} ({result.nit} iterations, {result.njev} gradients)")
    print(f"fitted k = {k:.3f}, c = {c:.3f}   (true k = {TRUE[0]}, c = {TRUE[1]})")
    print(f"residual mean square {result.fun:.2e}   (noise variance {NOISE ** 2:.0e})")
    assert result.success
    assert np.allclose(result.x, TRUE, rtol=0.01)
    assert result.fun < 1.5 * NOISE ** 2       # the fit explains all but the noise
    assert np.linalg.norm(grad(loss)(result.x)) < 1e-4


if __name__ == "__main__":
    main()
