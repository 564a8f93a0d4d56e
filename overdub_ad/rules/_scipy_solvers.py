"""Derivatives through SciPy's solvers: ``quad``, ``odeint``, ``solve_ivp``, the root finders and
``minimize`` (registered only when SciPy is importable).

A solver hands a Python callback to C code, which calls it natively: differentiating through
its code cannot work.  Each solver here is given a *stand-in* (see ``_rules.defstandin``): a
Python function that runs instead of it under a derivative and

1. finds the values the callback closes over and its extra ``args`` (``_callbacks.free_values``,
   closure conversion: ``quad(lambda s: exp(-k * s), 0, 1)`` depends on ``k``) -- ``theta``;
2. calls a *primitive* of this module on ``theta`` (and the limits, the initial state), which
   runs the SciPy solver natively on a copy of the callback and has rules: the derivative with
   respect to ``theta`` is obtained by differentiating the callback itself (``overdub_ad``'s own
   ``jvp``/``vjp``, with respect to ``theta``) at the solution, as the theorem for that solver
   says --

   - roots (``brentq``, ``bisect``, ``newton``, ``root_scalar``, ``fsolve``, ``root``...) and
     minima (``minimize``, ``minimize_scalar``: the root of the gradient): the implicit
     function theorem, ``dx = -F_x^{-1} F_theta dtheta`` at the solution ``x``;
   - ``quad``: Leibniz's rule, ``dI = int dF/dtheta ds + f(b) db - f(a) da``, the first term
     a ``quad`` of the callback's ``jvp``;
   - ``odeint``, ``solve_ivp``: forward sensitivities, the system extended with
     ``s' = f_y s + f_theta dtheta`` (``s(t0) = dy0``); reverse mode the adjoint method
     (:mod:`._ode_adjoint`: one backward solve of ``lam' = -f_y^T lam``,
     ``mu' = -f_theta^T lam``, whatever the number of parameters), except under an enclosing
     derivative, where it takes one sensitivity per differentiated number, all in one
     extended solve (see :func:`_by_adjoint`);

3. checks that the callback has no derivative left once ``theta`` is held constant (a value it
   reads from a list, an attribute or a global): :class:`MissingRuleError` if it has, never a
   silent zero.

The rules call the public solvers again (a ``quad`` of the ``jvp``, an ``odeint`` of the
extended system) and differentiate with ``overdub_ad``'s own transforms, so under an enclosing
derivative they are differentiated in turn: second derivatives (``hessian``, ``jacfwd(grad)``)
of a solve are right.

Abbreviations: ``theta`` the values the callback closes over (a tuple), ``dtheta`` their
tangents (a tuple, ``None`` for those without; leading batch dimensions allowed), ``ct`` a
cotangent, ``out`` the primal output.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from overdub import Tagged, current_context, opaque

from .._callbacks import free_values
from .._rules import (ZERO, Carried, MissingRuleError, defjvp, defstandin, defvjp, is_carried,
                      nondifferentiable)
from . import _ode_adjoint
from ._common import as_array_tangent

try:
    import scipy.integrate as _integrate
    import scipy.optimize as _optimize
except ImportError:  # pragma: no cover - overdub_ad works without SciPy
    _integrate = _optimize = None


# -- helpers -------------------------------------------------------------------------------------

@opaque
def detach(x: Any) -> Any:
    """``x`` without any derivative, for every context (tuples, lists and dicts of values).
    Declared nondifferentiable; arrays are copied, so that no engine finds a tangent it keeps
    for an array written in place."""
    if type(x) is Tagged:
        while type(x) is Tagged:
            x = x.value
        return detach(x)
    if type(x) in (tuple, list):
        return type(x)(detach(v) for v in x)
    if type(x) is dict:
        return {k: detach(v) for k, v in x.items()}
    if type(x) is np.ndarray:
        return np.array(x, copy=True)
    return x


@opaque
def checked(value: Any, probe: Any, public: str) -> Any:
    """``value``; its ``probe`` (the callback evaluated with ``theta`` held constant) must carry
    no derivative: the rule of ``probe`` raises."""
    return value


def _hidden(d: Any, out: Any, value: Any, probe: Any, public: str) -> Any:
    raise MissingRuleError(
        f"no derivative for {public}: its callback depends on a differentiated value that "
        f"overdub_ad cannot pass to the solver's rule (read from a list, a dict, an attribute "
        f"or a global rather than closed over or given in args=); close over the value itself "
        f"or pass it in args=")


@opaque
def refused(value: Any, theta: Any, why: str) -> Any:
    """``value``; a derivative with respect to ``theta`` raises (a feature without a rule)."""
    return value


def _refuse(d: Any, out: Any, value: Any, theta: Any, why: str) -> Any:
    raise MissingRuleError(f"no derivative rule for {why}")


def _identity_jvp(d: Any, out: Any, *args: Any) -> Any:
    return d


def _args_tuple(args: Any) -> tuple[Any, ...]:
    if args is None:
        return ()
    return args if isinstance(args, tuple) else (args,)


def _batch(dtheta: Any, theta: Any) -> tuple[int, ...]:
    for d, v in zip(dtheta, theta):
        if d is not None:
            return tuple(np.shape(d)[:np.ndim(d) - np.ndim(v)])
    return ()


def _direction(dtheta: Any, index: tuple[int, ...]) -> tuple[Any, ...]:
    return tuple(None if d is None else d[index] for d in dtheta)


def _per_direction(one: Callable[[Any], Any], dtheta: Any, theta: Any, out: Any) -> Any:
    """``one(direction)`` for each batch slice of the tangents ``dtheta``, stacked in front of
    ``out``'s shape (``jacfwd`` pushes several directions at once)."""
    batch = _batch(dtheta, theta)
    if not batch:
        return one(tuple(dtheta))
    parts = [one(_direction(dtheta, index)) for index in np.ndindex(*batch)]
    return np.reshape(np.stack(parts), batch + np.shape(out))


def _unit_directions(carried: Any, position: int, theta: Any) -> list[tuple[Any, ...]]:
    """One direction per number of each carried element of ``theta``: the basis reverse
    mode pushes forward (each a tuple with ``None`` for the other elements)."""
    directions = []
    for j, v in enumerate(theta):
        if not is_carried(carried, position, j):
            continue
        for k in range(int(np.size(v))):
            e = np.zeros(np.size(v))
            e[k] = 1.0
            directions.append(tuple(np.reshape(e, np.shape(v)) if i == j else None
                                    for i in range(len(theta))))
    return directions


def _gather(carried: Any, position: int, theta: Any, values: list[Any]) -> tuple[Any, ...]:
    """The cotangent of ``theta`` from ``values``, one number per direction of
    :func:`_unit_directions` (``None`` for elements not carried)."""
    out: list[Any] = []
    k = 0
    for j, v in enumerate(theta):
        if not is_carried(carried, position, j):
            out.append(None)
            continue
        n = int(np.size(v))
        part = values[k:k + n]
        k += n
        out.append(part[0] if np.ndim(v) == 0 else np.reshape(np.stack(part), np.shape(v)))
    return tuple(out)


class _Call:
    """A solver call with its arguments bound: the callback and its ``args`` are replaced by a
    copy (``rebuild(theta)``), the other arguments are the call's, detached (its derivative
    with respect to them -- a starting point, a bracket, tolerances -- is zero)."""

    def __init__(self, solver: Any, callback: str, extra: str, arguments: dict[str, Any],
                 rebuild: Callable[[tuple[Any, ...]], Any]) -> None:
        self.solver, self.signature = solver, inspect.signature(solver)
        self.callback, self.extra = callback, extra
        self.arguments = arguments
        self.rebuild = rebuild
        self.result: Any = None  # the solver's full result, from the latest native run

    def run(self, obj: Any, **changes: Any) -> Any:
        f, fargs = obj
        arguments = dict(self.arguments, **{self.callback: f}, **changes)
        if self.extra in arguments and (fargs or arguments[self.extra] is not None):
            arguments[self.extra] = fargs
        bound = inspect.BoundArguments(self.signature, arguments)
        return self.solver(*bound.args, **bound.kwargs)


@opaque
def _bind(solver: Any, callback: str, extra: str, args: tuple[Any, ...],
          kwargs: dict[str, Any]) -> tuple[_Call, tuple[Any, ...], Any]:
    """``(call, theta, rebuild)`` for a stand-in.  Opaque: it sees the arguments as they are,
    derivatives and all (a tuple read back from a dict under a context would have lost its
    members' metadata), hands ``theta`` back as it found it, and detaches the rest."""
    bound = inspect.signature(solver).bind(*args, **kwargs)
    bound.apply_defaults()
    f, fargs = bound.arguments[callback], _args_tuple(bound.arguments.get(extra))
    theta, rebuild = free_values((f, fargs))
    arguments = {k: v if k in (callback, extra) else _aid(v)
                 for k, v in bound.arguments.items()}
    return _Call(solver, callback, extra, arguments, rebuild), theta, rebuild


def _aid(value: Any) -> Any:
    """A solver's other argument, detached.  A function among them (``fprime=``, ``jac=``,
    ``hess=``, ``callback=``, ``dblquad``'s limits) only helps the solver find what the
    callback defines, whose derivative comes from the callback: it is given the plain values
    it closes over (the solver calls it natively)."""
    if isinstance(value, (types.FunctionType, types.MethodType, functools.partial)):
        values, rebuild = free_values(value)
        return rebuild(detach(values)) if values else value
    return detach(value)


# -- roots and minima: the implicit function theorem ------------------------------------------

class _Implicit:
    """A root ``x`` of ``F(x, theta) = residual(rebuild(theta))(x)`` found by ``solve``."""

    def __init__(self, call: _Call, residual: Callable[[Any], Any],
                 solution: Callable[[Any], Any]) -> None:
        self.call, self.residual, self.solution = call, residual, solution

    def solve(self, theta: Any) -> Any:
        self.call.result = result = self.call.run(self.call.rebuild(theta))
        return self.solution(result)

    def jacobian(self, theta: Any, x: Any) -> Any:
        """``F_x`` at ``(x, theta)``."""
        from .. import derivative, jacfwd
        g = self.residual(self.call.rebuild(theta))
        return derivative(g, x) if np.ndim(x) == 0 else jacfwd(g)(x)


@opaque
def implicit_solution(problem: _Implicit, theta: tuple[Any, ...]) -> Any:
    """The primitive of the root finders and minimisers: the solution for ``theta``."""
    return problem.solve(theta)


def _implicit_jvp(dtheta: Any, out: Any, problem: _Implicit, theta: Any) -> Any:
    from .. import jvp
    x = out
    J = problem.jacobian(theta, x)

    def F(th: Any) -> Any:
        return problem.residual(problem.call.rebuild(th))(x)

    def one(d: Any) -> Any:
        return -_solve(J, jvp(F, (theta,), (d,))[1])
    return _per_direction(one, dtheta, theta, out)


def _implicit_vjp(ct: Any, out: Any, problem: _Implicit, theta: Any) -> Any:
    from .. import vjp
    x = out
    J = problem.jacobian(theta, x)
    lam = ct / J if np.ndim(x) == 0 else np.linalg.solve(np.swapaxes(J, -1, -2), ct)

    def F(th: Any) -> Any:
        return problem.residual(problem.call.rebuild(th))(x)
    _, pullback = vjp(F, theta)
    return pullback(-lam)[0]


def _solve(J: Any, v: Any) -> Any:
    return v / J if np.ndim(J) == 0 else np.linalg.solve(J, v)


def _value(f: Any, fargs: Any, first: bool) -> Callable[[Any], Any]:
    """``x -> f(x, *fargs)`` (its first item where ``f`` returns a derivative beside it)."""
    if first:
        return lambda x: f(x, *fargs)[0]
    return lambda x: f(x, *fargs)


def _root_residual(first: bool) -> Callable[[Any], Callable[[Any], Any]]:
    def residual(obj: Any) -> Callable[[Any], Any]:
        f, fargs = obj
        value = _value(f, fargs, first)
        return lambda x: np.asarray(value(x)) if np.ndim(x) else value(x)
    return residual


def _gradient_residual(first: bool) -> Callable[[Any], Callable[[Any], Any]]:
    """The optimality condition of a minimum: the gradient of the objective is zero."""
    def residual(obj: Any) -> Callable[[Any], Any]:
        from .. import derivative, grad
        f, fargs = obj
        value = _value(f, fargs, first)
        return lambda x: derivative(value, x) if np.ndim(x) == 0 else grad(value)(x)
    return residual


def _implicit_standin(solver: Any, public: str, callback: str, extra: str,
                      kind: str) -> Callable[..., Any]:
    """The stand-in of a root finder or minimiser ``solver``.  ``kind`` says where the solution
    is in its result and what the residual is: ``"x"`` (a number or array), ``"x0"`` (the first
    item of a tuple with ``full_output``), ``"root"`` (``RootResults.root``), ``"opt"``
    (``OptimizeResult.x``, a root of ``fun``), ``"min"`` (``OptimizeResult.x``, a minimum),
    ``"xmin"`` (a minimum as ``"x"`` is a root: ``golden``, ``brent``, ``fmin``)."""
    def standin(*args: Any, **kwargs: Any) -> Any:
        call, theta, rebuild = _bind(solver, callback, extra, args, kwargs)
        arguments = call.arguments
        full = bool(arguments.get("full_output", False))
        first = arguments.get("fprime") is True or arguments.get("jac") is True
        if kind in ("min", "xmin"):
            residual = _gradient_residual(first)
        else:
            residual = _root_residual(first)
        problem = _Implicit(call, residual, _solution_of(kind, full))
        if kind == "min" and (arguments.get("constraints") or
                              arguments.get("bounds") is not None):
            # the optimality condition is the gradient's only where no bound or constraint is
            # active, which the stand-in does not check: refused
            theta_used: Any = refused(theta, theta, f"{public} with constraints or bounds")
        else:
            theta_used = theta
        x = implicit_solution(problem, theta_used)
        f, fargs = rebuild(detach(theta))
        x = checked(x, _value(f, fargs, first)(detach(x)), public)
        return _with_solution(kind, full, call.result, x, problem, theta)
    standin.__name__ = standin.__qualname__ = f"{solver.__name__}_standin"
    return standin


def _solution_of(kind: str, full: bool) -> Callable[[Any], Any]:
    if kind in ("x", "xmin"):
        return lambda result: result[0] if full else result
    if kind == "root":
        return lambda result: result.root
    return lambda result: result.x


def _with_solution(kind: str, full: bool, result: Any, x: Any, problem: _Implicit,
                   theta: Any) -> Any:
    """The solver's result with the differentiated solution ``x`` in it."""
    if kind in ("x", "xmin"):
        if not full:
            return x
        items = list(result)
        items[0] = x
        if kind == "xmin":  # (x, the minimum value, counts...): the value differentiated too
            f, fargs = problem.call.rebuild(theta)
            items[1] = _value(f, fargs, False)(x)
        if type(result) is not tuple and hasattr(result, "_fields"):
            return type(result)(*items)
        if len(items) == 2 and hasattr(items[1], "root"):  # brentq's (x, RootResults)
            items[1] = _solved(items[1])
            items[1].root = x
        return tuple(items)
    out = _solved(result)
    if kind == "root":
        out.root = x
        return out
    out.x = x
    if kind == "min":
        f, fargs = problem.call.rebuild(theta)
        first = problem.call.arguments.get("jac") is True
        out.fun = _value(f, fargs, first)(x)  # d fun = f_theta there: the gradient is zero
    return out


_SOLVED: dict[type, type] = {}


def _field(self: Any, key: Any) -> Any:
    """``result[key]``: a differentiated field is an attribute (see :func:`_solved`)."""
    if type(key) is str and key in vars(self):
        return getattr(self, key)
    return dict.__getitem__(self, key)


@opaque
def _solved(result: Any) -> Any:
    """A copy of a SciPy result (an ``OptimizeResult``, a dict) whose differentiated fields,
    set afterwards, are ordinary attributes -- read back with their derivatives by ``res.x``
    and ``res["x"]`` alike (the dict's own items would keep plain numbers)."""
    cls = type(result)
    solved = _SOLVED.get(cls)
    if solved is None:
        solved = _SOLVED[cls] = type(cls.__name__, (cls,), {
            "__setattr__": object.__setattr__, "__getitem__": _field,
            "__module__": cls.__module__, "__doc__": cls.__doc__})
    out: Any = dict.__new__(solved)
    dict.update(out, result)
    return out


# -- quad: Leibniz's rule ---------------------------------------------------------------------

class _Quadrature:
    """``quad(f, a, b, args=fargs, **options)`` with ``(f, fargs) = rebuild(theta)``."""

    def __init__(self, call: _Call) -> None:
        self.call = call
        self.options = {k: v for k, v in call.arguments.items()
                        if k not in ("func", "a", "b", "args", "full_output")}

    def integrand(self, theta: Any) -> Callable[[Any], Any]:
        f, fargs = self.call.rebuild(theta)
        return lambda s: f(s, *fargs)

    def integrate(self, f: Callable[[Any], Any], a: Any, b: Any) -> Any:
        """The public ``quad`` (itself differentiated under an enclosing derivative)."""
        return _integrate.quad(f, a, b, **self.options)[0]


@opaque
def integral(problem: _Quadrature, theta: tuple[Any, ...], a: Any, b: Any) -> Any:
    """The primitive of ``quad``: the integral for ``theta`` over ``[a, b]``."""
    call = problem.call
    call.result = call.run(call.rebuild(theta), a=a, b=b)
    return call.result[0]


def _tangent_integrand(problem: _Quadrature, theta: Any, d: Any) -> Callable[[Any], Any]:
    from .. import jvp

    def integrand(s: Any) -> Any:
        return jvp(lambda th: problem.integrand(th)(s), (theta,), (d,))[1]
    return integrand


def _integral_jvp(dtheta: Any, out: Any, problem: _Quadrature, theta: Any, a: Any,
                  b: Any) -> Any:
    def one(d: Any) -> Any:
        return problem.integrate(_tangent_integrand(problem, theta, d), a, b)
    return _per_direction(one, dtheta, theta, out)


def _integral_vjp(carried: Any, ct: Any, out: Any, problem: _Quadrature, theta: Any, a: Any,
                  b: Any) -> Any:
    values = [ct * problem.integrate(_tangent_integrand(problem, theta, d), a, b)
              for d in _unit_directions(carried, 1, theta)]
    return _gather(carried, 1, theta, values)


def _limit(sign: float, which: int) -> Callable[..., Any]:
    """The rule of a limit: ``f(b)`` for ``b``, ``-f(a)`` for ``a``."""
    def rule(d: Any, out: Any, problem: _Quadrature, theta: Any, a: Any, b: Any) -> Any:
        if problem.options.get("weight") is not None:
            raise MissingRuleError("no derivative rule for scipy.integrate.quad with respect "
                                   "to a limit of a weighted integral (weight=)")
        return sign * d * problem.integrand(theta)((a, b)[which])
    return rule


def _quad_standin(func: Any, a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
    call, theta, rebuild = _bind(_integrate.quad, "func", "args", (func, a, b, *args), kwargs)
    problem = _Quadrature(call)
    value = integral(problem, theta, a, b)
    f, fargs = rebuild(detach(theta))
    value = checked(value, f(_inside(detach(a), detach(b)), *fargs), "scipy.integrate.quad")
    raw = inspect.signature(_integrate.quad).bind(func, a, b, *args, **kwargs).arguments
    value = refused(value, raw.get("wvar"),  # (arguments: detached)
                    "scipy.integrate.quad with respect to the weight's variable wvar=")
    return (value,) + tuple(call.result[1:])


def _inside(a: Any, b: Any) -> float:
    """A point of ``[a, b]`` to evaluate the integrand at (the limits may be infinite)."""
    lo, hi = float(a), float(b)
    if np.isfinite(lo) and np.isfinite(hi):
        return 0.5 * (lo + hi)
    if np.isfinite(lo):
        return lo + 1.0
    if np.isfinite(hi):
        return hi - 1.0
    return 0.0


# -- odeint and solve_ivp: forward sensitivities, and the adjoint for reverse mode ------------

class _Flow:
    """An initial-value problem ``y' = f(y, t)`` with ``f`` from ``rebuild(theta)``, solved by
    ``odeint`` or ``solve_ivp`` at fixed output times."""

    def __init__(self, call: _Call, ivp: bool) -> None:
        self.call, self.ivp = call, ivp
        self.times: Any = None  # solve_ivp's output times, fixed by the first native run
        # (theta, y0, interpolant) of the latest forward solve with an interpolant: solve_ivp's
        # dense output from its native run, or for odeint an LSODA re-solve made on demand
        self.dense: Any = None
        # (ct, theta, y0, indices of theta pulled back, result) of the latest adjoint: the
        # reverse rules of theta and of y0, called one after the other, share one backward solve
        self.pulled: Any = None

    def rhs(self, theta: Any) -> Callable[[Any, Any], Any]:
        """``(y, t) -> y'``, whichever order the user's function takes."""
        f, fargs = self.call.rebuild(theta)
        if self.ivp or self.call.arguments.get("tfirst"):
            return lambda y, t: np.asarray(f(t, y, *fargs))
        return lambda y, t: np.asarray(f(y, t, *fargs))

    def native(self, theta: Any, y0: Any) -> Any:
        """The trajectory, ``(len(t), n)``, from the solver run natively.  ``solve_ivp`` is
        asked for its dense output (the same steps and outputs; the interpolants it builds for
        ``t_eval`` anyway, kept), which the adjoint reads the forward solution from; the
        user's result gets it only if they asked for it."""
        call = self.call
        if not self.ivp:
            call.result = call.run(call.rebuild(theta), y0=y0)
            return call.result[0] if call.arguments.get("full_output") else call.result
        changes = {"y0": y0, "dense_output": True}
        if self.times is not None:
            changes["t_eval"] = self.times
        call.result = result = call.run(call.rebuild(theta), **changes)
        self.dense = (detach(theta), detach(y0), result.sol)
        if not call.arguments.get("dense_output"):
            result.sol = None
        if self.times is None:
            self.times = result.t
        return np.swapaxes(result.y, 0, 1)

    def integrate(self, rhs: Callable[[Any, Any], Any], z0: Any) -> Any:
        """The public solver on the extended system (differentiated in turn when nested)."""
        arguments = self.call.arguments
        if not self.ivp:
            options = {k: arguments[k] for k in ("rtol", "atol", "tcrit", "h0", "hmax", "hmin",
                                                  "mxstep", "mxordn", "mxords")}
            return _integrate.odeint(rhs, z0, arguments["t"], **options)
        options = dict(arguments.get("options") or {})
        options.pop("vectorized", None)
        solution = _integrate.solve_ivp(lambda t, z: rhs(z, t), arguments["t_span"], z0,
                                        method=arguments["method"], t_eval=self.times, **options)
        return np.swapaxes(solution.y, 0, 1)

    # -- what the adjoint needs (see ._ode_adjoint) --

    def start(self) -> float:
        """``t0``."""
        arguments = self.call.arguments
        return float((arguments["t_span"] if self.ivp else arguments["t"])[0])

    def output_times(self) -> Any:
        return self.times if self.ivp else np.asarray(self.call.arguments["t"], dtype=float)

    def implicit(self) -> bool:
        """Whether the solver is an implicit method, which the backward system's Jacobian
        spares a finite-difference estimate (odeint is LSODA: implicit once it finds the
        problem stiff)."""
        if not self.ivp:
            return True
        method = self.call.arguments["method"]
        implicit = (_integrate.Radau, _integrate.BDF, _integrate.LSODA)
        if isinstance(method, str):
            return method in [m.__name__ for m in implicit]
        return isinstance(method, type) and issubclass(method, implicit)

    def interpolant(self, theta: Any, y0: Any) -> Any:
        """The forward solution's interpolant (``t -> y(t)``) for these ``theta`` and ``y0``.
        Made before the backward solve starts, never from inside it: odeint's LSODA and
        solve_ivp's share ODEPACK's state, and a solve started from odeint's callback breaks
        the one in progress."""
        dense = self.dense
        if dense is None or not (_same(dense[0], theta) and _same(dense[1], y0)):
            # a rule called at other values than the latest solve's (the rule checker)
            if self.ivp:
                self.native(theta, y0)
            else:
                self.dense = (detach(theta), detach(y0), self._lsoda(theta, y0))
        return self.dense[2]

    def _lsoda(self, theta: Any, y0: Any) -> Any:
        """odeint keeps no interpolant: the problem solved again by the same LSODA, through
        ``solve_ivp`` (which keeps one), at odeint's tolerances and step limits."""
        arguments = self.call.arguments
        t = self.output_times()
        rhs = self.rhs(theta)
        options: dict[str, Any] = {"rtol": _ODEINT_TOL if arguments["rtol"] is None
                                   else arguments["rtol"],
                                   "atol": _ODEINT_TOL if arguments["atol"] is None
                                   else arguments["atol"]}
        for odeint_name, ivp_name in (("h0", "first_step"), ("hmax", "max_step"),
                                      ("hmin", "min_step")):
            if arguments[odeint_name]:
                options[ivp_name] = arguments[odeint_name]
        solution = _integrate.solve_ivp(lambda s, y: rhs(y, s), (t[0], t[-1]),
                                        np.ravel(np.asarray(y0, dtype=float)), method="LSODA",
                                        dense_output=True, **options)
        _succeeded(solution.success, solution.message, "odeint", "the forward solution")
        return solution.sol

    def backward(self, rhs: Callable[[Any, float], Any], jac: Callable[[Any, float], Any] | None,
                 z: Any, a: float, b: float) -> Any:
        """``z(b)`` for ``z' = rhs(z, t)``, ``z(a) = z``, ``b`` before ``a``: the user's solver,
        method and tolerances (the absolute tolerance the smallest of the user's: the
        backward state is not ``y``)."""
        arguments = self.call.arguments
        if not self.ivp:
            options = {k: arguments[k] for k in ("hmax", "hmin", "mxstep", "mxordn", "mxords")}
            rtol = _ODEINT_TOL if arguments["rtol"] is None else arguments["rtol"]
            atol = _ODEINT_TOL if arguments["atol"] is None else np.min(arguments["atol"])
            out, info = _integrate.odeint(rhs, z, [a, b], Dfun=jac, rtol=rtol, atol=atol,
                                          full_output=True, **options)
            _succeeded(info["message"] == "Integration successful.", info["message"], "odeint",
                       "the adjoint")
            return out[-1]
        user = arguments.get("options") or {}
        options = {k: user[k] for k in ("rtol", "max_step", "min_step") if k in user}
        if "atol" in user:
            options["atol"] = float(np.min(user["atol"]))
        if jac is not None:
            options["jac"] = lambda t, z: jac(z, t)
        solution = _integrate.solve_ivp(lambda t, z: rhs(z, t), (a, b), z,
                                        method=arguments["method"], **options)
        _succeeded(solution.success, solution.message, "solve_ivp", "the adjoint")
        return solution.y[:, -1]


_ODEINT_TOL = 1.49012e-8  # odeint's default rtol and atol


def _succeeded(success: bool, message: str, public: str, what: str) -> None:
    if not success:
        raise RuntimeError(f"scipy.integrate.{public}: the solve of {what} for reverse mode "
                           f"failed: {message}")


def _same(a: Any, b: Any) -> bool:
    """Whether two values (tuples of numbers and arrays) are equal, shapes and all."""
    if type(a) in (tuple, list) or type(b) in (tuple, list):
        return type(a) in (tuple, list) and type(b) in (tuple, list) and len(a) == len(b) and \
            all(_same(u, v) for u, v in zip(a, b))
    return bool(np.shape(a) == np.shape(b) and np.array_equal(a, b))


def _sensitivities(flow: _Flow, theta: Any, y0: Any, dthetas: tuple[Any, ...],
                   dy0s: tuple[Any, ...]) -> Any:
    """``(len(t), k, n)``: the trajectory's derivative along ``k`` directions
    ``(dthetas[i], dy0s[i])``, from one solve of the system extended with ``k`` sensitivities."""
    from .. import jvp
    y0 = np.ravel(y0)
    n, k = np.size(y0), len(dthetas)
    dthetas = tuple((None,) * len(theta) if d is None else d for d in dthetas)
    rhs = flow.rhs(theta)

    def extended(z: Any, t: Any) -> Any:
        y = z[:n]
        s = np.reshape(z[n:], (k, n))
        columns = [jvp(lambda yy, th: flow.rhs(th)(yy, t), (y, theta), (s[i], dthetas[i]))[1]
                   for i in range(k)]
        return np.concatenate([rhs(y, t)] + [np.ravel(c) for c in columns])

    z0 = np.concatenate([y0] + [np.zeros(n) if d is None else np.ravel(d) for d in dy0s])
    z = flow.integrate(extended, z0)
    return np.reshape(z[:, n:], (np.shape(z)[0], k, n))


@opaque
def trajectory(flow: _Flow, theta: tuple[Any, ...], y0: Any) -> Any:
    """The primitive of ``odeint``/``solve_ivp``: the solution at the output times,
    ``(len(t), n)``."""
    return flow.native(theta, y0)


def _flow_jvp(position: int) -> Callable[..., Any]:
    def rule(d: Any, out: Any, flow: _Flow, theta: Any, y0: Any) -> Any:
        if position == 1:
            batch = _batch(d, theta)
            directions = tuple(_direction(d, i) for i in np.ndindex(*batch)) if batch else (d,)
            s = _sensitivities(flow, theta, y0, directions, (None,) * len(directions))
        else:
            d = as_array_tangent(d, y0)  # odeint(rhs, [y0], t): a list's batched tangent
            batch = tuple(np.shape(d)[:np.ndim(d) - np.ndim(y0)])
            flat = np.reshape(d, (-1,) + np.shape(y0)) if batch else np.reshape(d, (1, -1))
            s = _sensitivities(flow, theta, y0, (None,) * len(flat), tuple(flat))
        s = np.moveaxis(s, 1, 0)  # (k, len(t), n)
        return np.reshape(s, batch + np.shape(out))
    return rule


def _by_adjoint(theta: Any, y0: Any, out: Any) -> bool:
    """Whether reverse mode takes this pullback by the adjoint method: a first derivative
    (no context encloses the backward sweep) of a real solve.

    - Under an enclosing context the backward sweep may itself be differentiated (``hessian``,
      ``grad(grad(f))``, ``jvp(grad(f))``), and the adjoint's backward system reads ``y(t)``
      from the forward solve's interpolant, a number with no derivative: differentiated, it
      would give a silently wrong second derivative.  Forward sensitivities carry the
      trajectory's own derivative, through the public solver, and are right there.
    - A complex state or parameter takes forward sensitivities too (the adjoint here pulls
      back real cotangents only)."""
    return current_context() is None and \
        not any(np.iscomplexobj(v) for v in (*theta, y0, out))


def _adjoint(flow: _Flow, carried: Any, ct: Any, theta: Any,
             y0: Any) -> tuple[Any, dict[int, Any]]:
    """``(cotangent of y0, {j: cotangent of theta[j]})`` for the carried elements of
    ``theta`` (none when ``carried`` is None), by one backward solve
    (:func:`._ode_adjoint.pullback`)."""
    which = tuple(j for j in range(len(theta))
                  if carried is not None and is_carried(carried, 1, j))
    pulled = flow.pulled
    if pulled is None or not (set(which) <= set(pulled[3]) and _same(pulled[0], ct) and
                              _same(pulled[1], theta) and _same(pulled[2], y0)):
        def field(y: Any, t: Any, params: tuple[Any, ...]) -> Any:
            values = list(theta)
            for j, p in zip(which, params):
                values[j] = p
            return flow.rhs(tuple(values))(y, t)
        lam, mus = _ode_adjoint.pullback(
            field, lambda: flow.interpolant(theta, y0), [theta[j] for j in which],
            flow.output_times(), flow.start(), ct, flow.backward, flow.implicit())
        flow.pulled = pulled = (np.array(ct, copy=True), detach(theta), detach(y0), which,
                                (np.reshape(lam, np.shape(y0)), dict(zip(which, mus))))
    lam, mus = pulled[4]
    return np.array(lam, copy=True), {j: np.array(mus[j], copy=True) for j in which}


def _flow_vjp_theta(carried: Any, ct: Any, out: Any, flow: _Flow, theta: Any, y0: Any) -> Any:
    """The cotangent of ``theta``: by the adjoint (see :func:`_by_adjoint` for when not)."""
    if not _by_adjoint(theta, y0, out):
        return _sensitivity_vjp_theta(carried, ct, flow, theta, y0)
    mus = _adjoint(flow, carried, ct, theta, y0)[1]
    return tuple(None if j not in mus else mus[j][()] if np.ndim(theta[j]) == 0 else mus[j]
                 for j in range(len(theta)))


def _flow_vjp_y0(ct: Any, out: Any, flow: _Flow, theta: Any, y0: Any) -> Any:
    """The cotangent of ``y0``: ``lam(t0)`` (see :func:`_by_adjoint` for when not)."""
    if not _by_adjoint(theta, y0, out):
        return _sensitivity_vjp_y0(ct, flow, theta, y0)
    return _adjoint(flow, None, ct, theta, y0)[0]


def _sensitivity_vjp_theta(carried: Any, ct: Any, flow: _Flow, theta: Any, y0: Any) -> Any:
    """The cotangent of ``theta`` by forward sensitivities: one per differentiated number."""
    directions = tuple(_unit_directions(carried, 1, theta))
    s = _sensitivities(flow, theta, y0, directions, (None,) * len(directions))
    ct = np.reshape(ct, (np.shape(s)[0], 1, np.shape(s)[2]))
    values = list(np.sum(ct * s, axis=(0, 2)))
    return _gather(carried, 1, theta, values)


def _sensitivity_vjp_y0(ct: Any, flow: _Flow, theta: Any, y0: Any) -> Any:
    """The cotangent of ``y0`` by forward sensitivities: one per number of ``y0``."""
    n = int(np.size(y0))
    s = _sensitivities(flow, theta, y0, (None,) * n, tuple(np.eye(n)))
    ct = np.reshape(ct, (np.shape(s)[0], 1, n))
    return np.reshape(np.sum(ct * s, axis=(0, 2)), np.shape(y0))


def _odeint_standin(func: Any, y0: Any, t: Any, *args: Any, **kwargs: Any) -> Any:
    call, theta, rebuild = _bind(_integrate.odeint, "func", "args", (func, y0, t, *args), kwargs)
    for unsupported in ("Dfun", "ml", "mu"):
        if call.arguments.get(unsupported) is not None:
            theta = refused(theta, theta, f"scipy.integrate.odeint with {unsupported}=")
    flow = _Flow(call, ivp=False)
    y = trajectory(flow, theta, y0)
    probe = flow.rhs(detach(theta))(np.ravel(detach(y0)), call.arguments["t"][0])
    y = checked(y, probe, "scipy.integrate.odeint")
    y = refused(y, t, "scipy.integrate.odeint with respect to its times t")
    if call.arguments.get("full_output"):
        return (y,) + tuple(call.result[1:])
    return y


def _solve_ivp_standin(fun: Any, t_span: Any, y0: Any, *args: Any, **kwargs: Any) -> Any:
    call, theta, rebuild = _bind(_integrate.solve_ivp, "fun", "args", (fun, t_span, y0, *args),
                                 kwargs)
    arguments = call.arguments
    refusals = {unsupported: f"scipy.integrate.solve_ivp with {unsupported}="
                for unsupported in ("events", "dense_output") if arguments.get(unsupported)}
    for why in refusals.values():
        theta = refused(theta, theta, why)
    flow = _Flow(call, ivp=True)
    y = trajectory(flow, theta, y0)
    probe = flow.rhs(detach(theta))(np.ravel(detach(y0)), arguments["t_span"][0])
    y = checked(y, probe, "scipy.integrate.solve_ivp")
    times = inspect.signature(_integrate.solve_ivp).bind(fun, t_span, y0, *args, **kwargs)
    y = refused(y, (t_span, times.arguments.get("t_eval")),  # (arguments: detached)
                "scipy.integrate.solve_ivp with respect to its times t_span and t_eval")
    out = _solved(call.result)
    out.y = np.swapaxes(y, 0, 1)
    # what SciPy computed natively besides y (the interpolant, the events) carries the
    # refusal, for reverse mode, whose refusal waits for a cotangent to reach it
    if "dense_output" in refusals and out.sol is not None:
        out.sol = _Refused(out.sol, theta, refusals["dense_output"])
    if "events" in refusals:
        # (where the run ends, and the events' times and states, move with the parameters, the
        # initial state and what the event functions close over)
        against = (theta, y0, free_values(times.arguments.get("events"))[0])
        for name in ("t_events", "y_events"):
            if out.get(name) is not None:
                setattr(out, name, [refused(e, against, refusals["events"]) for e in out[name]])
        out.t = refused(out.t, against, refusals["events"])
        out.y = refused(out.y, against, refusals["events"])
    return out


class _Refused:
    """An interpolant computed natively (``solve_ivp``'s ``sol``): its values carry the
    refusal of the derivative with respect to ``theta``."""

    def __init__(self, sol: Any, theta: Any, why: str) -> None:
        self.sol, self.theta, self.why = sol, theta, why

    def __call__(self, t: Any) -> Any:
        return refused(self.sol(t), self.theta, self.why)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sol, name)


# -- registration ------------------------------------------------------------------------------

if _optimize is not None:
    nondifferentiable(detach)
    defjvp(checked, _identity_jvp, _hidden, ZERO)
    defvjp(checked, lambda ct, out, *args: ct, _hidden, ZERO)
    defjvp(refused, _identity_jvp, _refuse, ZERO)
    defvjp(refused, lambda ct, out, *args: ct, _refuse, ZERO)
    defjvp(implicit_solution, ZERO, _implicit_jvp)
    defvjp(implicit_solution, ZERO, _implicit_vjp)
    defjvp(integral, ZERO, _integral_jvp, _limit(-1.0, 0), _limit(1.0, 1))
    defvjp(integral, ZERO, Carried(_integral_vjp), _limit(-1.0, 0), _limit(1.0, 1))
    defjvp(trajectory, ZERO, _flow_jvp(1), _flow_jvp(2))
    defvjp(trajectory, ZERO, Carried(_flow_vjp_theta), _flow_vjp_y0)
    for _name, _public, _callback, _extra, _kind in [
            ("brentq", "scipy.optimize.brentq", "f", "args", "x"),
            ("brenth", "scipy.optimize.brenth", "f", "args", "x"),
            ("bisect", "scipy.optimize.bisect", "f", "args", "x"),
            ("ridder", "scipy.optimize.ridder", "f", "args", "x"),
            ("toms748", "scipy.optimize.toms748", "f", "args", "x"),
            ("newton", "scipy.optimize.newton", "func", "args", "x"),
            ("fsolve", "scipy.optimize.fsolve", "func", "args", "x"),
            ("root_scalar", "scipy.optimize.root_scalar", "f", "args", "root"),
            ("root", "scipy.optimize.root", "fun", "args", "opt"),
            ("minimize", "scipy.optimize.minimize", "fun", "args", "min"),
            ("minimize_scalar", "scipy.optimize.minimize_scalar", "fun", "args", "min"),
            ("golden", "scipy.optimize.golden", "func", "args", "xmin"),
            ("brent", "scipy.optimize.brent", "func", "args", "xmin"),
            ("fmin", "scipy.optimize.fmin", "func", "args", "xmin")]:
        _solver = getattr(_optimize, _name)
        defstandin(_solver, _implicit_standin(_solver, _public, _callback, _extra, _kind))
    defstandin(_integrate.quad, _quad_standin)
    defstandin(_integrate.odeint, _odeint_standin)
    defstandin(_integrate.solve_ivp, _solve_ivp_standin)
