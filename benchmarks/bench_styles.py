"""One computation in the styles users write it: derivative time / plain time, per style.

The workload is the project's scalar benchmark, an RK4 integration of the Lorenz system (200
steps), differentiated with respect to its parameters (sigma, rho, beta).  Each style below
computes exactly the same number the way some user would write it: floats with constants
inline, parameters in a NumPy array read by indexing (NumPy scalars) with helper functions, a
list, a closure, a model object with attributes and methods, a dict of state, `math` calls in
the loop, a frozen dataclass, a NamedTuple state, a tuple state returned by a step function,
`@property` parameters, `np.float64` constants, a NumPy array of state updated by array
arithmetic, states yielded by a generator, a `functools.partial` step and a step made by a
context manager.  Every style's derivative is checked against the first style's before anything is
timed, and the figures that count are each API's best, worst and worst/best over the styles (a
speed claim holds for the family, not for one shape).  HIPS autograd runs the same styles where
it can.

Run: python benchmarks/bench_styles.py [--quick]
"""

from __future__ import annotations

# _common first: it sets the thread counts before NumPy starts its pool
from _common import Clock, Figures, at_most, peer

import contextlib
import dataclasses
import functools
import math
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from overdub_ad import grad, hvp, jacfwd, jvp

H = 0.01
PARAMS = (10.0, 28.0, 8.0 / 3.0)
STEPS = 200


# -- the styles: each f(p) takes the parameters in its own container -----------------------------

def floats_inline(p: Any, steps: int) -> Any:
    sigma, rho, beta = p
    x, y, z = 1.0, 1.0, 1.0
    for _ in range(steps):
        k1x, k1y, k1z = sigma * (y - x), x * (rho - z) - y, x * y - beta * z
        x2, y2, z2 = x + 0.005 * k1x, y + 0.005 * k1y, z + 0.005 * k1z
        k2x, k2y, k2z = sigma * (y2 - x2), x2 * (rho - z2) - y2, x2 * y2 - beta * z2
        x3, y3, z3 = x + 0.005 * k2x, y + 0.005 * k2y, z + 0.005 * k2z
        k3x, k3y, k3z = sigma * (y3 - x3), x3 * (rho - z3) - y3, x3 * y3 - beta * z3
        x4, y4, z4 = x + 0.01 * k3x, y + 0.01 * k3y, z + 0.01 * k3z
        k4x, k4y, k4z = sigma * (y4 - x4), x4 * (rho - z4) - y4, x4 * y4 - beta * z4
        x = x + 0.01 / 6 * (k1x + 2 * k2x + 2 * k3x + k4x)
        y = y + 0.01 / 6 * (k1y + 2 * k2y + 2 * k3y + k4y)
        z = z + 0.01 / 6 * (k1z + 2 * k2z + 2 * k3z + k4z)
    return x + y + z


def _rhs_indexed(state: Any, p: Any) -> tuple[Any, Any, Any]:
    x, y, z = state
    return p[0] * (y - x), x * (p[1] - z) - y, x * y - p[2] * z


def _step_indexed(state: Any, p: Any) -> tuple[Any, Any, Any]:
    k1 = _rhs_indexed(state, p)
    k2 = _rhs_indexed([s + H / 2 * k for s, k in zip(state, k1)], p)
    k3 = _rhs_indexed([s + H / 2 * k for s, k in zip(state, k2)], p)
    k4 = _rhs_indexed([s + H * k for s, k in zip(state, k3)], p)
    return tuple(s + H / 6 * (a + 2 * b + 2 * c + d)
                 for s, a, b, c, d in zip(state, k1, k2, k3, k4))


def indexed_helpers(p: Any, steps: int) -> Any:
    """For a NumPy array of parameters (p[0] is an np.float64) or a list of floats."""
    state: Any = (1.0, 1.0, 1.0)
    for _ in range(steps):
        state = _step_indexed(state, p)
    return sum(state)


def closure(p: Any, steps: int) -> Any:
    sigma, rho, beta = p

    def rhs(x: Any, y: Any, z: Any) -> tuple[Any, Any, Any]:
        return sigma * (y - x), x * (rho - z) - y, x * y - beta * z

    x, y, z = 1.0, 1.0, 1.0
    for _ in range(steps):
        a = rhs(x, y, z)
        b = rhs(x + H / 2 * a[0], y + H / 2 * a[1], z + H / 2 * a[2])
        c = rhs(x + H / 2 * b[0], y + H / 2 * b[1], z + H / 2 * b[2])
        d = rhs(x + H * c[0], y + H * c[1], z + H * c[2])
        x = x + H / 6 * (a[0] + 2 * b[0] + 2 * c[0] + d[0])
        y = y + H / 6 * (a[1] + 2 * b[1] + 2 * c[1] + d[1])
        z = z + H / 6 * (a[2] + 2 * b[2] + 2 * c[2] + d[2])
    return x + y + z


class Lorenz:
    def __init__(self, sigma: Any, rho: Any, beta: Any) -> None:
        self.sigma, self.rho, self.beta = sigma, rho, beta

    def rhs(self, x: Any, y: Any, z: Any) -> tuple[Any, Any, Any]:
        return self.sigma * (y - x), x * (self.rho - z) - y, x * y - self.beta * z

    def step(self, x: Any, y: Any, z: Any) -> tuple[Any, Any, Any]:
        a = self.rhs(x, y, z)
        b = self.rhs(x + H / 2 * a[0], y + H / 2 * a[1], z + H / 2 * a[2])
        c = self.rhs(x + H / 2 * b[0], y + H / 2 * b[1], z + H / 2 * b[2])
        d = self.rhs(x + H * c[0], y + H * c[1], z + H * c[2])
        return (x + H / 6 * (a[0] + 2 * b[0] + 2 * c[0] + d[0]),
                y + H / 6 * (a[1] + 2 * b[1] + 2 * c[1] + d[1]),
                z + H / 6 * (a[2] + 2 * b[2] + 2 * c[2] + d[2]))


def model_object(p: Any, steps: int) -> Any:
    model = Lorenz(*p)
    x, y, z = 1.0, 1.0, 1.0
    for _ in range(steps):
        x, y, z = model.step(x, y, z)
    return x + y + z


def dict_state(p: Any, steps: int) -> Any:
    sigma, rho, beta = p
    s = {"x": 1.0, "y": 1.0, "z": 1.0}
    for _ in range(steps):
        k = []
        probe = dict(s)
        for scale in (0.0, H / 2, H / 2, H):
            if k:
                probe = {name: s[name] + scale * k[-1][name] for name in s}
            k.append({"x": sigma * (probe["y"] - probe["x"]),
                      "y": probe["x"] * (rho - probe["z"]) - probe["y"],
                      "z": probe["x"] * probe["y"] - beta * probe["z"]})
        for name in s:
            s[name] = s[name] + H / 6 * (k[0][name] + 2 * k[1][name] + 2 * k[2][name]
                                         + k[3][name])
    return s["x"] + s["y"] + s["z"]


def math_calls(p: Any, steps: int) -> Any:
    """The same integration with math calls in every step that leave the numbers as they are
    (exp(0 * x) is 1, 0 * tanh(z) is 0), as models with activation functions call them."""
    sigma, rho, beta = p
    x, y, z = 1.0, 1.0, 1.0
    for _ in range(steps):
        a = (sigma * (y - x), x * (rho - z) - y, x * y - beta * z)
        xb, yb, zb = x + H / 2 * a[0], y + H / 2 * a[1], z + H / 2 * a[2]
        b = (sigma * (yb - xb), xb * (rho - zb) - yb, xb * yb - beta * zb)
        xc, yc, zc = x + H / 2 * b[0], y + H / 2 * b[1], z + H / 2 * b[2]
        c = (sigma * (yc - xc), xc * (rho - zc) - yc, xc * yc - beta * zc)
        xd, yd, zd = x + H * c[0], y + H * c[1], z + H * c[2]
        d = (sigma * (yd - xd), xd * (rho - zd) - yd, xd * yd - beta * zd)
        x = x + H / 6 * (a[0] + 2 * b[0] + 2 * c[0] + d[0]) * math.exp(0.0 * x)
        y = y + H / 6 * (a[1] + 2 * b[1] + 2 * c[1] + d[1])
        z = z + H / 6 * (a[2] + 2 * b[2] + 2 * c[2] + d[2]) + 0.0 * math.tanh(z)
    return x + y + z


@dataclasses.dataclass(frozen=True)
class Params:
    sigma: Any
    rho: Any
    beta: Any


def frozen_dataclass(p: Any, steps: int) -> Any:
    q = Params(*p)
    x, y, z = 1.0, 1.0, 1.0
    for _ in range(steps):
        a = (q.sigma * (y - x), x * (q.rho - z) - y, x * y - q.beta * z)
        xb, yb, zb = x + H / 2 * a[0], y + H / 2 * a[1], z + H / 2 * a[2]
        b = (q.sigma * (yb - xb), xb * (q.rho - zb) - yb, xb * yb - q.beta * zb)
        xc, yc, zc = x + H / 2 * b[0], y + H / 2 * b[1], z + H / 2 * b[2]
        c = (q.sigma * (yc - xc), xc * (q.rho - zc) - yc, xc * yc - q.beta * zc)
        xd, yd, zd = x + H * c[0], y + H * c[1], z + H * c[2]
        d = (q.sigma * (yd - xd), xd * (q.rho - zd) - yd, xd * yd - q.beta * zd)
        x = x + H / 6 * (a[0] + 2 * b[0] + 2 * c[0] + d[0])
        y = y + H / 6 * (a[1] + 2 * b[1] + 2 * c[1] + d[1])
        z = z + H / 6 * (a[2] + 2 * b[2] + 2 * c[2] + d[2])
    return x + y + z


class State(NamedTuple):
    x: Any
    y: Any
    z: Any


def _rhs_state(s: State, sigma: Any, rho: Any, beta: Any) -> State:
    return State(sigma * (s.y - s.x), s.x * (rho - s.z) - s.y, s.x * s.y - beta * s.z)


def _shifted(s: State, k: State, scale: float) -> State:
    return State(s.x + scale * k.x, s.y + scale * k.y, s.z + scale * k.z)


def namedtuple_state(p: Any, steps: int) -> Any:
    sigma, rho, beta = p
    s = State(1.0, 1.0, 1.0)
    for _ in range(steps):
        a = _rhs_state(s, sigma, rho, beta)
        b = _rhs_state(_shifted(s, a, H / 2), sigma, rho, beta)
        c = _rhs_state(_shifted(s, b, H / 2), sigma, rho, beta)
        d = _rhs_state(_shifted(s, c, H), sigma, rho, beta)
        s = State(s.x + H / 6 * (a.x + 2 * b.x + 2 * c.x + d.x),
                  s.y + H / 6 * (a.y + 2 * b.y + 2 * c.y + d.y),
                  s.z + H / 6 * (a.z + 2 * b.z + 2 * c.z + d.z))
    return s.x + s.y + s.z


def _tuple_step(x: Any, y: Any, z: Any, sigma: Any, rho: Any, beta: Any
                ) -> tuple[Any, Any, Any]:
    def f(x: Any, y: Any, z: Any) -> tuple[Any, Any, Any]:
        return sigma * (y - x), x * (rho - z) - y, x * y - beta * z
    a = f(x, y, z)
    b = f(x + H / 2 * a[0], y + H / 2 * a[1], z + H / 2 * a[2])
    c = f(x + H / 2 * b[0], y + H / 2 * b[1], z + H / 2 * b[2])
    d = f(x + H * c[0], y + H * c[1], z + H * c[2])
    return (x + H / 6 * (a[0] + 2 * b[0] + 2 * c[0] + d[0]),
            y + H / 6 * (a[1] + 2 * b[1] + 2 * c[1] + d[1]),
            z + H / 6 * (a[2] + 2 * b[2] + 2 * c[2] + d[2]))


def tuple_state(p: Any, steps: int) -> Any:
    state = (1.0, 1.0, 1.0)
    for _ in range(steps):
        state = _tuple_step(*state, *p)
    return state[0] + state[1] + state[2]


class PropertyModel:
    def __init__(self, p: Any) -> None:
        self._p = p

    @property
    def sigma(self) -> Any:
        return self._p[0]

    @property
    def rho(self) -> Any:
        return self._p[1]

    @property
    def beta(self) -> Any:
        return self._p[2]


def property_params(p: Any, steps: int) -> Any:
    m = PropertyModel(p)
    x, y, z = 1.0, 1.0, 1.0
    for _ in range(steps):
        a = (m.sigma * (y - x), x * (m.rho - z) - y, x * y - m.beta * z)
        xb, yb, zb = x + H / 2 * a[0], y + H / 2 * a[1], z + H / 2 * a[2]
        b = (m.sigma * (yb - xb), xb * (m.rho - zb) - yb, xb * yb - m.beta * zb)
        xc, yc, zc = x + H / 2 * b[0], y + H / 2 * b[1], z + H / 2 * b[2]
        c = (m.sigma * (yc - xc), xc * (m.rho - zc) - yc, xc * yc - m.beta * zc)
        xd, yd, zd = x + H * c[0], y + H * c[1], z + H * c[2]
        d = (m.sigma * (yd - xd), xd * (m.rho - zd) - yd, xd * yd - m.beta * zd)
        x = x + H / 6 * (a[0] + 2 * b[0] + 2 * c[0] + d[0])
        y = y + H / 6 * (a[1] + 2 * b[1] + 2 * c[1] + d[1])
        z = z + H / 6 * (a[2] + 2 * b[2] + 2 * c[2] + d[2])
    return x + y + z


SIXTH, HALF = np.float64(H / 6), np.float64(H / 2)


def numpy_constants(p: Any, steps: int) -> Any:
    sigma, rho, beta = p
    x, y, z = np.float64(1.0), np.float64(1.0), np.float64(1.0)
    for _ in range(steps):
        a = (sigma * (y - x), x * (rho - z) - y, x * y - beta * z)
        xb, yb, zb = x + HALF * a[0], y + HALF * a[1], z + HALF * a[2]
        b = (sigma * (yb - xb), xb * (rho - zb) - yb, xb * yb - beta * zb)
        xc, yc, zc = x + HALF * b[0], y + HALF * b[1], z + HALF * b[2]
        c = (sigma * (yc - xc), xc * (rho - zc) - yc, xc * yc - beta * zc)
        xd, yd, zd = x + H * c[0], y + H * c[1], z + H * c[2]
        d = (sigma * (yd - xd), xd * (rho - zd) - yd, xd * yd - beta * zd)
        x = x + SIXTH * (a[0] + 2 * b[0] + 2 * c[0] + d[0])
        y = y + SIXTH * (a[1] + 2 * b[1] + 2 * c[1] + d[1])
        z = z + SIXTH * (a[2] + 2 * b[2] + 2 * c[2] + d[2])
    return x + y + z


def _rhs_array(s: Any, p: Any) -> Any:
    return np.array([p[0] * (s[1] - s[0]), s[0] * (p[1] - s[2]) - s[1],
                     s[0] * s[1] - p[2] * s[2]])


def array_state(p: Any, steps: int) -> Any:
    """The state a NumPy array of 3, updated by array arithmetic (``s + h * k``)."""
    s = np.array([1.0, 1.0, 1.0])
    for _ in range(steps):
        k1 = _rhs_array(s, p)
        k2 = _rhs_array(s + H / 2 * k1, p)
        k3 = _rhs_array(s + H / 2 * k2, p)
        k4 = _rhs_array(s + H * k3, p)
        s = s + H / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return s[0] + s[1] + s[2]


#: style name -> (f(p, steps), the parameters as that style's users hold them)
def _states(p: Any, steps: int) -> Any:
    state = (1.0, 1.0, 1.0)
    for _ in range(steps):
        state = _tuple_step(*state, *p)
        yield state


def generator_steps(p: Any, steps: int) -> Any:
    """The states yielded by a generator, the loop consuming them."""
    total = 0.0
    for state in _states(p, steps):
        total = state[0] + state[1] + state[2]
    return total


def partial_step(p: Any, steps: int) -> Any:
    """A step function with the parameters bound by functools.partial."""
    step = functools.partial(_tuple_step, sigma=p[0], rho=p[1], beta=p[2])
    state = (1.0, 1.0, 1.0)
    for _ in range(steps):
        state = step(*state)
    return state[0] + state[1] + state[2]


@contextlib.contextmanager
def _integrating(p: Any) -> Any:
    yield functools.partial(_tuple_step, sigma=p[0], rho=p[1], beta=p[2])


def with_block(p: Any, steps: int) -> Any:
    """The step made by a context manager, the loop inside its ``with`` block."""
    state = (1.0, 1.0, 1.0)
    with _integrating(p) as step:
        for _ in range(steps):
            state = step(*state)
    return state[0] + state[1] + state[2]


STYLES: dict[str, tuple[Callable[[Any, int], Any], Callable[[], Any]]] = {
    "floats, constants inline": (floats_inline, lambda: PARAMS),
    "NumPy array read by indexing, helpers": (indexed_helpers, lambda: np.array(PARAMS)),
    "list of floats, helpers": (indexed_helpers, lambda: list(PARAMS)),
    "closure over the parameters": (closure, lambda: PARAMS),
    "model object: attributes and methods": (model_object, lambda: PARAMS),
    "dict of state updated each step": (dict_state, lambda: PARAMS),
    "math calls in the loop": (math_calls, lambda: PARAMS),
    "frozen dataclass of parameters": (frozen_dataclass, lambda: PARAMS),
    "NamedTuple state": (namedtuple_state, lambda: PARAMS),
    "tuple state returned by a step function": (tuple_state, lambda: PARAMS),
    "@property parameters": (property_params, lambda: np.array(PARAMS)),
    "np.float64 constants": (numpy_constants, lambda: PARAMS),
    "NumPy array state (s + h * k)": (array_state, lambda: np.array(PARAMS)),
    "states from a generator": (generator_steps, lambda: PARAMS),
    "functools.partial step": (partial_step, lambda: PARAMS),
    "with block (context manager)": (with_block, lambda: PARAMS),
}

#: API -> (the issue's target on every style's ratio, how to call it on f at p)
APIS: dict[str, tuple[float, Callable[[Callable[[Any], Any], Any], Any]]] = {
    "grad": (30.0, lambda f, p: grad(f)(p)),
    "jvp": (15.0, lambda f, p: jvp(f, (p,), (_ones_like(p),))),
    "hvp": (60.0, lambda f, p: hvp(f, p, _ones_like(p))),
    "jacfwd": (15.0, lambda f, p: jacfwd(f)(p)),
}


def _ones_like(p: Any) -> Any:
    if isinstance(p, np.ndarray):
        return np.ones_like(p)
    return type(p)(1.0 for _ in p)


def _flat(result: Any) -> np.ndarray:
    """A derivative's numbers, whatever container the style returns them in."""
    if isinstance(result, tuple) and len(result) == 2 and not isinstance(result[0], tuple) \
            and np.ndim(result[0]) == 0 and not isinstance(result[1], float):
        result = result[1]                                    # jvp: (value, tangent)
    return np.asarray(result, dtype=float).ravel()


def main(quick: bool = False) -> Figures:
    clock = Clock(quick)
    steps = 3 if quick else STEPS
    fig = Figures()
    autograd = peer("autograd")
    reference: dict[str, np.ndarray] = {}
    ratios: dict[str, list[float]] = {api: [] for api in APIS}
    for style, (body, params) in STYLES.items():
        def f(p: Any, body: Callable[[Any, int], Any] = body) -> Any:
            return body(p, steps)
        plain = clock.best(lambda: f(params()))  # noqa: B023  (called within this iteration)
        for api, (target, call) in APIS.items():
            workload = f"{api}: {style}"
            fig.workload(workload, plain, at_most(target))
            try:
                got = _flat(call(f, params()))
            except Exception as error:        # a style that fails is a figure too
                fig.note(workload, "overdub", f"fails: {type(error).__name__}")
                continue
            want = reference.setdefault(api, got)
            if not np.allclose(got, want, rtol=1e-9, atol=1e-9):
                fig.note(workload, "overdub", "wrong: differs from the first style")
                continue
            seconds = clock.best(lambda: call(f, params()),  # noqa: B023  (within this iteration)
                                 repeat=3, min_time=0.0)
            fig.time(workload, "overdub", seconds)
            ratios[api].append(seconds / plain)
            if autograd is not None and api in ("grad", "jvp"):
                _autograd_time(fig, clock, autograd, api, workload, f, params, want)
            elif api in ("grad", "jvp"):
                fig.note(workload, "autograd", "not installed")
    for api, values in ratios.items():
        if values:
            best, worst = min(values), max(values)
            fig.figure(f"{api}: best style", best, target=None)
            fig.figure(f"{api}: worst style", worst, target=at_most(APIS[api][0]))
            fig.figure(f"{api}: worst / best style", worst / best, target=at_most(2.0))
    return fig


def _autograd_time(fig: Figures, clock: Clock, autograd: Any, api: str, workload: str,
                   f: Callable[[Any], Any], params: Callable[[], Any], want: np.ndarray) -> None:
    if api == "grad":
        def run() -> Any:
            return autograd.grad(f)(params())
    else:
        def run() -> Any:
            return autograd.make_jvp(f)(params())(_ones_like(params()))
    try:
        got = _flat(run())
    except Exception as error:
        fig.note(workload, "autograd", f"refuses: {type(error).__name__}")
        return
    if not np.allclose(got, want, rtol=1e-9, atol=1e-9):
        fig.note(workload, "autograd", "wrong")
        return
    fig.time(workload, "autograd", clock.slow(run))


if __name__ == "__main__":
    figures = main(quick="--quick" in sys.argv)
    for label, value in figures.items():
        print(f"{value:10.2f}  {label}")
    for (workload, tool), text in figures.notes.items():
        print(f"{'':10s}  {workload} | {tool}: {text}")
