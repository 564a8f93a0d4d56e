"""Mechanics from a Lagrangian alone: the Hessian gives the mass matrix, derivatives give the
equations of motion.

    python examples/lagrangian_hessian.py

A double pendulum (masses M1, M2 on rods L1, L2; angles q from the vertical).  All we write is
its Lagrangian L(q, q') = T - V, in plain NumPy.  overdub_ad then gives
  - the mass matrix, the Hessian of L in the velocities: M(q) = d2L/dq'2,
  - the equations of motion (Euler-Lagrange, solved for the accelerations):
        q'' = M(q)^-1 (dL/dq - d2L/(dq' dq) q'),
  - the energy E = q' . dL/dq' - L (which must equal T + V),
and we check each against the textbook formulas, then integrate and watch E stay constant.
"""

import math

import numpy as np

from overdub_ad import grad, hessian, jacfwd

M1, M2, L1, L2, G = 1.0, 2.0, 1.5, 1.0, 9.81


def kinetic(q, qdot):
    t1, t2 = q
    w1, w2 = qdot
    return (0.5 * (M1 + M2) * L1**2 * w1**2 + 0.5 * M2 * L2**2 * w2**2
            + M2 * L1 * L2 * w1 * w2 * np.cos(t1 - t2))


def potential(q):
    t1, t2 = q
    return -(M1 + M2) * G * L1 * np.cos(t1) - M2 * G * L2 * np.cos(t2)


def lagrangian(q, qdot):
    return kinetic(q, qdot) - potential(q)


mass_matrix = hessian(lagrangian, argnums=1)                    # d2L/dq'2, at (q, q')
momentum = grad(lagrangian, argnums=1)                          # dL/dq'
force = grad(lagrangian, argnums=0)                             # dL/dq
mixed = jacfwd(momentum, argnums=0)                             # d2L/(dq' dq)


def acceleration(q, qdot):
    """q'' from the Euler-Lagrange equations d/dt dL/dq' = dL/dq."""
    rhs = force(q, qdot) - mixed(q, qdot) @ qdot
    return np.linalg.solve(mass_matrix(q, qdot), rhs)


def energy(q, qdot):
    return qdot @ momentum(q, qdot) - lagrangian(q, qdot)


# -- the textbook formulas, to check against ------------------------------------------------------

def textbook_mass_matrix(q):
    coupling = M2 * L1 * L2 * math.cos(q[0] - q[1])
    return np.array([[(M1 + M2) * L1**2, coupling], [coupling, M2 * L2**2]])


def textbook_acceleration(q, qdot):
    (t1, t2), (w1, w2) = q, qdot
    d = t1 - t2
    den = M1 + M2 - M2 * math.cos(d) ** 2
    a1 = (-M2 * L1 * w1**2 * math.sin(d) * math.cos(d) - M2 * L2 * w2**2 * math.sin(d)
          - (M1 + M2) * G * math.sin(t1) + M2 * G * math.sin(t2) * math.cos(d)) / (L1 * den)
    a2 = ((M1 + M2) * L1 * w1**2 * math.sin(d) + M2 * L2 * w2**2 * math.sin(d) * math.cos(d)
          + (M1 + M2) * G * math.sin(t1) * math.cos(d) - (M1 + M2) * G * math.sin(t2)) / (L2 * den)
    return np.array([a1, a2])


def textbook_energy(q, qdot):
    return kinetic(q, qdot) + potential(q)


def rk4_step(q, qdot, dt):
    def f(state):
        return np.concatenate([state[2:], acceleration(state[:2], state[2:])])
    s = np.concatenate([q, qdot])
    k1 = f(s)
    k2 = f(s + dt / 2 * k1)
    k3 = f(s + dt / 2 * k2)
    k4 = f(s + dt * k3)
    s = s + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return s[:2], s[2:]


def main():
    q, qdot = np.array([0.3, -0.8]), np.array([1.2, 0.4])
    m = mass_matrix(q, qdot)
    print(f"mass matrix at q = {q}, the Hessian of L in q':\n{m}")
    assert np.allclose(m, textbook_mass_matrix(q), rtol=1e-12)
    assert np.allclose(m, m.T) and np.all(np.linalg.eigvalsh(m) > 0)   # symmetric, positive

    rng = np.random.default_rng(1)
    for _ in range(5):                         # a few random states, not just the one above
        q, qdot = rng.uniform(-math.pi, math.pi, 2), rng.normal(0, 2, 2)
        assert np.allclose(mass_matrix(q, qdot), textbook_mass_matrix(q), rtol=1e-12)
        assert np.allclose(acceleration(q, qdot), textbook_acceleration(q, qdot),
                           rtol=1e-9, atol=1e-12)
        assert math.isclose(energy(q, qdot), textbook_energy(q, qdot), rel_tol=1e-12)
    q, qdot = np.array([0.3, -0.8]), np.array([1.2, 0.4])
    print(f"q'' from the Euler-Lagrange equations: {acceleration(q, qdot)}")
    print(f"q'' from the textbook formula:         {textbook_acceleration(q, qdot)}")

    start = energy(q, qdot)
    dt, steps = 0.01, 100
    for _ in range(steps):
        q, qdot = rk4_step(q, qdot, dt)
    drift = abs(energy(q, qdot) - start) / abs(start)
    print(f"energy {start:.6f} at t=0, {energy(q, qdot):.6f} at t={dt * steps:g} "
          f"(relative drift {drift:.1e}, RK4 with dt={dt})")
    assert drift < 1e-6


if __name__ == "__main__":
    main()
