"""The adjoint method: reverse mode through an ODE solve at the cost of one backward solve.

For ``y' = f(y, t, theta)``, ``y(t0) = y0``, observed at the output times ``t_i`` with the
cotangents ``ct_i`` of ``y(t_i)``, the pullback of ``L = sum_i ct_i . y(t_i)`` is

- ``lam`` (the adjoint state) solved backwards from the last output time to ``t0``:
  ``lam' = -f_y^T lam``, starting from ``lam = ct_last`` and jumping by ``ct_i`` at each earlier
  output time ``t_i`` (the cotangent of ``y(t_i)`` enters there);
- ``mu`` beside it, ``mu' = -f_theta^T lam`` from ``mu = 0``;

and then ``dL/dy0 = lam(t0)``, ``dL/dtheta = mu(t0)``.  Both products are one ``vjp`` of the
user's right-hand side at ``(y(t), theta)``, so a step costs about one evaluation of ``f``
whatever the number of parameters -- where forward sensitivities solve one extra system of
size ``n`` per parameter.  ``y(t)`` is read from the forward solve's interpolant (its dense
output), not integrated backwards with ``lam``: a dissipative system (``y' = -100 y``) is
unstable run backwards, while ``lam`` is as stable backwards as ``y`` is forwards.

This module holds the mathematics only; the solver rules of :mod:`._scipy_solvers` give it
the right-hand side, the interpolant and how to integrate a system between two times with
the user's solver, and decide when it applies (first derivatives of real solves).  The
derivative of the backward pass itself (a second derivative) is not taken here: its
interpolant carries no derivative, so those rules use forward sensitivities under an enclosing
derivative.

Abbreviations: ``n`` the size of the state, ``P`` the number of differentiated numbers in
``theta``, ``z`` the backward system's state ``[lam, mu]`` (size ``n + P``), ``ct`` the
cotangent of the trajectory, ``(len(times), n)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

_Field = Callable[[Any, Any, tuple[Any, ...]], Any]
"""``(y, t, params) -> f(y, t)``, with the differentiated parameters ``params`` in place."""

_Integrate = Callable[[Callable[[Any, float], Any], Callable[[Any, float], Any] | None, Any,
                      float, float], Any]
"""``(rhs, jac, z, a, b) -> z(b)``: the system ``z' = rhs(z, t)`` (Jacobian ``jac(z, t)`` for
implicit methods, None for explicit ones) solved from ``z(a) = z`` to ``b`` by the user's
solver."""


def pullback(field: _Field, solution: Callable[[], Callable[[float], Any]],
             params: Sequence[Any], times: Any, t0: float, ct: Any, integrate: _Integrate,
             jacobian: bool) -> tuple[Any, list[Any]]:
    """``(lam(t0), [cotangent of each of params])``: the pullback of ``ct`` through the solve
    whose outputs at ``times`` it is the cotangent of.  ``solution()``: the forward solution's
    interpolant ``t -> y(t)``, asked for once, before the backward solve starts, and only if
    there is one; ``jacobian``: whether ``integrate`` needs the backward system's Jacobian (an
    implicit method)."""
    params = tuple(params)
    sizes = [int(np.size(p)) for p in params]
    ct = np.asarray(ct, dtype=float)
    m = len(times)
    ct = np.reshape(ct, (m, -1))
    n = np.shape(ct)[1]
    size = n + sum(sizes)
    entering = [i for i in range(m) if np.any(ct[i])]  # the output times where lam jumps
    z = np.zeros(size)
    if any(float(times[i]) != float(t0) for i in entering):
        trajectory = solution()
        rhs = _backward_field(field, trajectory, params, n)
        jac = _backward_jacobian(field, trajectory, params, n, size) if jacobian else None
        last = entering[-1]
        z[:n] = ct[last]
        here = float(times[last])
        for i in reversed(entering[:-1]):
            z = _across(integrate, rhs, jac, z, here, float(times[i]))
            z[:n] += ct[i]
            here = float(times[i])
        z = _across(integrate, rhs, jac, z, here, float(t0))
    else:  # the cotangent enters at t0 only (odeint's first output is y0): no solve
        z[:n] = np.sum(ct[entering], axis=0)
    return z[:n], _split(z[n:], params, sizes)


def _across(integrate: _Integrate, rhs: Callable[[Any, float], Any],
            jac: Callable[[Any, float], Any] | None, z: Any, a: float, b: float) -> Any:
    """``z`` carried from ``a`` back to ``b`` (unchanged over an empty interval: repeated
    output times, or the first output at ``t0``)."""
    if a == b:
        return z
    return np.array(integrate(rhs, jac, z, a, b), dtype=float)


def _split(mu: Any, params: tuple[Any, ...], sizes: list[int]) -> list[Any]:
    """``mu`` cut into the cotangents of ``params``, each of its parameter's shape."""
    out = []
    k = 0
    for p, size in zip(params, sizes):
        part = mu[k:k + size]
        k += size
        out.append(part[0] if np.ndim(p) == 0 else np.reshape(part, np.shape(p)))
    return out


def _vjp_at(field: _Field, y: Any, t: float, params: tuple[Any, ...]) -> Callable[[Any], Any]:
    """The pullback of ``(y, params) -> f(y, t)`` at ``(y, params)``: one trace of the
    user's function, by :func:`overdub_ad.vjp`, whatever ``f`` does."""
    from .. import vjp

    def f(yy: Any, *ps: Any) -> Any:
        return np.ravel(field(yy, t, ps))
    pullback: Callable[[Any], Any] = vjp(f, y, *params)[1]
    return pullback


def _flat(parts: Sequence[Any]) -> Any:
    return np.concatenate([np.ravel(np.asarray(p, dtype=float)) for p in parts])


def _backward_field(field: _Field, trajectory: Callable[[float], Any], params: tuple[Any, ...],
                    n: int) -> Callable[[Any, float], Any]:
    """``z -> [-f_y^T lam, -f_theta^T lam]`` at ``y(t)``: the backward system."""
    def rhs(z: Any, t: float) -> Any:
        return -_flat(_vjp_at(field, trajectory(t), t, params)(z[:n]))
    return rhs


def _backward_jacobian(field: _Field, trajectory: Callable[[float], Any],
                       params: tuple[Any, ...], n: int,
                       size: int) -> Callable[[Any, float], Any]:
    """The backward system's Jacobian, ``[[-f_y^T, 0], [-f_theta^T, 0]]`` (it is linear in
    ``lam`` and does not depend on ``mu``): ``n`` pullbacks of one trace, exact, where an
    implicit method would otherwise take ``n + P`` evaluations of the system for a
    finite-difference estimate."""
    def jac(z: Any, t: float) -> Any:
        pull = _vjp_at(field, trajectory(t), t, params)
        rows = np.stack([_flat(pull(e)) for e in np.eye(n)])  # row k: d f_k / d (y, theta)
        out = np.zeros((size, size))
        out[:, :n] = -rows.T
        return out
    return jac
