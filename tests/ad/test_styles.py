"""One computation in the styles users write it: every API gives the same derivative on every
route, in every style, and the fast routes cover the styles this file says they cover.

The computation is benchmarks/bench_styles.py's (an RK4 integration of the Lorenz system,
differentiated in its parameters), written here again, shorter, with a few styles more.  Each
style's derivative is compared with finite differences, with the reference route's, and with
itself on a repeated call.  ``FAST`` records, per API, the styles a fast route runs wholly
(``explain`` shows a fast route ran the function itself and none declined anything): a route
that starts covering a style, or stops, changes this table, so coverage is a tested fact
rather than a hope.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import numpy as np
import pytest

from overdub_ad import explain, grad, hvp, jacfwd, jacrev, jvp
from overdub_ad.testing import FAST_ROUTES, REFERENCE, force_route
from tests.conftest import fd

H = 0.01
STEPS = 4


def _rhs(x: Any, y: Any, z: Any, sigma: Any, rho: Any, beta: Any) -> tuple[Any, Any, Any]:
    return sigma * (y - x), x * (rho - z) - y, x * y - beta * z


def floats_inline(p):
    sigma, rho, beta = p
    x, y, z = 1.0, 1.0, 1.0
    for _ in range(STEPS):
        k1x, k1y, k1z = sigma * (y - x), x * (rho - z) - y, x * y - beta * z
        x2, y2, z2 = x + 0.005 * k1x, y + 0.005 * k1y, z + 0.005 * k1z
        k2x, k2y, k2z = sigma * (y2 - x2), x2 * (rho - z2) - y2, x2 * y2 - beta * z2
        x = x + 0.01 * k2x
        y = y + 0.01 * k2y
        z = z + 0.01 * k2z
    return x + y + z


def _rhs_indexed(state, p):
    x, y, z = state
    return p[0] * (y - x), x * (p[1] - z) - y, x * y - p[2] * z


def _step_indexed(state, p):
    k1 = _rhs_indexed(state, p)
    k2 = _rhs_indexed([s + H / 2 * k for s, k in zip(state, k1)], p)
    return tuple(s + H * b for s, b in zip(state, k2))


def indexed_helpers(p):
    state = (1.0, 1.0, 1.0)
    for _ in range(STEPS):
        state = _step_indexed(state, p)
    return sum(state)


def closure(p):
    sigma, rho, beta = p

    def rhs(x, y, z):
        return sigma * (y - x), x * (rho - z) - y, x * y - beta * z

    x, y, z = 1.0, 1.0, 1.0
    for _ in range(STEPS):
        a = rhs(x, y, z)
        b = rhs(x + H / 2 * a[0], y + H / 2 * a[1], z + H / 2 * a[2])
        x, y, z = x + H * b[0], y + H * b[1], z + H * b[2]
    return x + y + z


class Lorenz:
    def __init__(self, sigma, rho, beta):
        self.sigma, self.rho, self.beta = sigma, rho, beta

    def rhs(self, x, y, z):
        return self.sigma * (y - x), x * (self.rho - z) - y, x * y - self.beta * z

    def step(self, x, y, z):
        a = self.rhs(x, y, z)
        b = self.rhs(x + H / 2 * a[0], y + H / 2 * a[1], z + H / 2 * a[2])
        return x + H * b[0], y + H * b[1], z + H * b[2]


def model_object(p):
    model = Lorenz(*p)
    x, y, z = 1.0, 1.0, 1.0
    for _ in range(STEPS):
        x, y, z = model.step(x, y, z)
    return x + y + z


def dict_state(p):
    sigma, rho, beta = p
    s = {"x": 1.0, "y": 1.0, "z": 1.0}
    for _ in range(STEPS):
        k = {"x": sigma * (s["y"] - s["x"]), "y": s["x"] * (rho - s["z"]) - s["y"],
             "z": s["x"] * s["y"] - beta * s["z"]}
        for name in s:
            s[name] = s[name] + H * k[name]
    return s["x"] + s["y"] + s["z"]


def math_calls(p):
    sigma, rho, beta = p
    x, y, z = 1.0, 1.0, 1.0
    for _ in range(STEPS):
        a = _rhs(x, y, z, sigma, rho, beta)
        x = x + H * a[0] * math.exp(0.1 * x)
        y = y + H * math.tanh(a[1])
        z = z + H * a[2] + 0.01 * math.sin(z)
    return x + y + z


@dataclasses.dataclass(frozen=True)
class Params:
    sigma: Any
    rho: Any
    beta: Any


def frozen_dataclass(p):
    q = Params(*p)
    x, y, z = 1.0, 1.0, 1.0
    for _ in range(STEPS):
        a = (q.sigma * (y - x), x * (q.rho - z) - y, x * y - q.beta * z)
        x, y, z = x + H * a[0], y + H * a[1], z + H * a[2]
    return x + y + z


class State(NamedTuple):
    x: Any
    y: Any
    z: Any


def namedtuple_state(p):
    sigma, rho, beta = p
    s = State(1.0, 1.0, 1.0)
    for _ in range(STEPS):
        a = State(*_rhs(s.x, s.y, s.z, sigma, rho, beta))
        s = State(s.x + H * a.x, s.y + H * a.y, s.z + H * a.z)
    return s.x + s.y + s.z


def _tuple_step(x, y, z, sigma, rho, beta):
    a = _rhs(x, y, z, sigma, rho, beta)
    return x + H * a[0], y + H * a[1], z + H * a[2]


def tuple_state(p):
    state = (1.0, 1.0, 1.0)
    for _ in range(STEPS):
        state = _tuple_step(*state, *p)
    return state[0] + state[1] + state[2]


class PropertyModel:
    def __init__(self, p):
        self._p = p

    @property
    def sigma(self):
        return self._p[0]

    @property
    def rho(self):
        return self._p[1]

    @property
    def beta(self):
        return self._p[2]


def property_params(p):
    m = PropertyModel(p)
    x, y, z = 1.0, 1.0, 1.0
    for _ in range(STEPS):
        a = (m.sigma * (y - x), x * (m.rho - z) - y, x * y - m.beta * z)
        x, y, z = x + H * a[0], y + H * a[1], z + H * a[2]
    return x + y + z


STEP = np.float64(H)


def numpy_constants(p):
    sigma, rho, beta = p
    x, y, z = np.float64(1.0), np.float64(1.0), np.float64(1.0)
    for _ in range(STEPS):
        a = (sigma * (y - x), x * (rho - z) - y, x * y - beta * z)
        x, y, z = x + STEP * a[0], y + STEP * a[1], z + STEP * a[2]
    return x + y + z


def history_list(p):
    """The trajectory kept in a list that grows each step; the result reads it back."""
    sigma, rho, beta = p
    path = [(1.0, 1.0, 1.0)]
    for _ in range(STEPS):
        x, y, z = path[-1]
        a = _rhs(x, y, z, sigma, rho, beta)
        path.append((x + H * a[0], y + H * a[1], z + H * a[2]))
    return sum(x + y + z for x, y, z in path)


def params_dict(p):
    """Parameters in a dict keyed by name, read in every step."""
    q = {"sigma": p[0], "rho": p[1], "beta": p[2]}
    x, y, z = 1.0, 1.0, 1.0
    for _ in range(STEPS):
        a = _rhs(x, y, z, q["sigma"], q["rho"], q["beta"])
        x, y, z = x + H * a[0], y + H * a[1], z + H * a[2]
    return x + y + z


def _as_tuple(v):
    return tuple(float(t) for t in v)


def _as_list(v):
    return [float(t) for t in v]


def _as_array(v):
    return np.array(v, dtype=float)


#: style -> (f(p), how that style's users hold the parameters: a function of a vector)
STYLES: dict[str, tuple[Any, Any]] = {
    "floats inline": (floats_inline, _as_tuple),
    "NumPy array, helpers": (indexed_helpers, _as_array),
    "list, helpers": (indexed_helpers, _as_list),
    "closure": (closure, _as_tuple),
    "model object": (model_object, _as_tuple),
    "dict state": (dict_state, _as_tuple),
    "math calls": (math_calls, _as_tuple),
    "frozen dataclass": (frozen_dataclass, _as_tuple),
    "NamedTuple state": (namedtuple_state, _as_tuple),
    "tuple state": (tuple_state, _as_tuple),
    "@property": (property_params, _as_array),
    "np.float64 constants": (numpy_constants, _as_tuple),
    "history list": (history_list, _as_tuple),
    "parameters dict": (params_dict, _as_tuple),
}

#: API -> the styles a fast route covers wholly (see the module's docstring)
FAST: dict[str, set[str]] = {
    "grad": set(STYLES),
    "jvp": set(STYLES),
    # (a float array argument: hvp's compiled route, tried first, declines these functions)
    "hvp": set(STYLES) - {"NumPy array, helpers", "@property"},
    "jacfwd": set(STYLES),
}

POINTS = [(10.0, 28.0, 8.0 / 3.0), (1.5, -0.7, 2.25)]


def _flat(value: Any) -> np.ndarray:
    return np.asarray(value, dtype=float).ravel()


def _ones(p: Any) -> Any:
    return np.ones_like(p) if isinstance(p, np.ndarray) else type(p)(1.0 for _ in p)


def _apis(f: Any, make: Any, point: Any) -> dict[str, Any]:
    """Each API's derivative of ``f`` at ``point`` held as ``make`` holds it, as flat arrays."""
    direction = np.array([0.3, -1.1, 0.7])
    calls = {
        "grad": lambda: grad(f)(make(point)),
        "jvp": lambda: jvp(f, (make(point),), (make(direction),))[1],
        "jacfwd": lambda: jacfwd(f)(make(point)),
        "jacrev": lambda: jacrev(f)(make(point)),
        "hvp": lambda: hvp(f, make(point), make(direction)),
    }
    return {api: _flat(call()) for api, call in calls.items()}


@pytest.mark.every_route
@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("style", list(STYLES))
def test_every_style_and_route_gives_the_finite_differences_derivative(style, point):
    f, make = STYLES[style]
    vector = np.array(point)
    direction = np.array([0.3, -1.1, 0.7])
    want_grad = fd(lambda v: f(make(v)), vector)
    want_hvp = fd(lambda t: _flat(grad(f)(make(vector + t * direction))), 0.0)
    with force_route(REFERENCE):
        reference = _apis(f, make, point)
    np.testing.assert_allclose(reference["grad"], want_grad, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(reference["jacrev"], want_grad, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(reference["jacfwd"], want_grad, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(reference["jvp"], want_grad @ direction, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(reference["hvp"], want_hvp, rtol=1e-5, atol=1e-7)
    for route in (None, *FAST_ROUTES):
        with force_route(route):
            for call in ("first", "repeated"):
                got = _apis(f, make, point)
                for api, value in got.items():
                    np.testing.assert_allclose(
                        value, reference[api], rtol=1e-10, atol=1e-12,
                        err_msg=f"{style}: {api} on route {route or 'default'}, {call} call")


def _fast(report: Any, f: Any) -> bool:
    """A fast route ran ``f`` itself, and no fast route declined anything on the way."""
    whole = [route for route, ran, about in report.decisions
             if ran and route != REFERENCE and about.split(":")[0] == f.__qualname__]
    declined = [route for route, ran, _ in report.decisions if not ran]
    return bool(whole) and not declined


@pytest.mark.parametrize("api", list(FAST))
@pytest.mark.default_routes
def test_the_fast_routes_cover_the_styles_the_table_says(api):
    covered = set()
    reports = {}
    for style, (f, make) in STYLES.items():
        p = make(np.array(POINTS[0]))
        args = {"grad": (p,), "jvp": ((p,), (_ones(p),)), "hvp": (p, _ones(p)),
                "jacfwd": (p,)}[api]
        call = {"grad": grad, "jvp": jvp, "hvp": hvp, "jacfwd": jacfwd}[api]
        reports[style] = explain(call, f, *args)
        if _fast(reports[style], f):
            covered.add(style)
    detail = "\n".join(f"-- {style}:\n{reports[style]}" for style in
                       sorted(covered ^ FAST[api]))
    assert covered == FAST[api], detail
