"""Routes: every fast route computes what the reference computes, with the rules in force, and
says when it declines; `force_route` puts every API on one route.

The whole AD suite also runs with OVERDUB_AD_ROUTE=reference in CI (.ci/run); here, a corpus of
programs (the fuzzer's) runs on each route and is compared with the reference route."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import overdub_ad
from overdub_ad import (defjvp, defvjp, derivative, explain, grad, hessian, hvp, jacfwd, jacrev,
                        jvp)
from overdub_ad.testing import FAST_ROUTES, REFERENCE, ROUTES, force_route, isolated_rules
from tests.ad.fuzz import RandomDraw, generate


@pytest.fixture(autouse=True)
def default_routes():
    """These tests choose routes themselves, whatever OVERDUB_AD_ROUTE says for the run."""
    with force_route(None):
        yield


def scalar(x):
    return x * math.sin(x) + math.exp(-x * x)


def energy(x):
    return np.sum(np.tanh(x) ** 2) + np.sum(x[1:] * x[:-1])


def test_explain_names_the_route_that_ran_and_the_reference_runs_alone_when_forced():
    assert "reverse-specialised" in explain(grad, scalar, 0.7).ran
    assert "forward-dual" in explain(derivative, scalar, 0.7).ran
    assert "hvp-compiled" in explain(hvp, energy, np.ones(4), np.arange(4.0)).ran
    with force_route(REFERENCE):
        for api, f, args in [(grad, scalar, (0.7,)), (derivative, scalar, (0.7,)),
                             (hvp, energy, (np.ones(4), np.arange(4.0))),
                             (jacfwd, energy, (np.ones(4),)), (jacrev, energy, (np.ones(4),))]:
            report = explain(api, f, *args)
            assert set(report.ran) == {REFERENCE}, (api.__name__, str(report))


def test_a_route_that_declines_says_why():
    report = explain(hvp, lambda x: np.sum(np.sort(x) ** 3), np.ones(3), np.ones(3))
    declined = [(route, reason) for route, ran, reason in report.decisions if not ran]
    assert ("hvp-compiled" in dict(declined)) and all(reason for _, reason in declined)
    assert "declined" in str(report)


def test_force_route_rejects_an_unknown_route_and_restores_the_choice():
    with pytest.raises(ValueError, match="unknown route 'fast'.*reference"):
        with force_route("fast"):
            pass
    with force_route("forward-dual"):
        assert explain(grad, scalar, 0.7).ran == [REFERENCE]      # reverse routes off
        assert explain(derivative, scalar, 0.7).ran == ["forward-dual"]
    assert "reverse-specialised" in explain(grad, scalar, 0.7).ran
    assert set(ROUTES) == {REFERENCE, *FAST_ROUTES}
    assert overdub_ad.explain is explain


class Model:
    def __init__(self, k):
        self.k = k

    def energy(self, x):
        return self.k * x * x


SENTINEL_CASES = {
    "math.sin": (math.sin, lambda x: math.sin(x), 0.5),
    "np.sin": (np.sin, lambda x: np.sin(x), 0.5),
    "user method": (Model.energy, lambda x: Model(3.0).energy(x), 0.5),
}


@pytest.mark.every_route
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("case", list(SENTINEL_CASES))
def test_a_users_rule_wins_on_every_route_and_every_api(case, route):
    target, f, x = SENTINEL_CASES[case]
    with isolated_rules(), force_route(route):
        if case == "user method":
            defvjp(target, None, lambda ct, out, self, x: 100.0 * ct)
            defjvp(target, None, lambda dx, out, self, x: 100.0 * dx)
        else:
            defvjp(target, lambda ct, out, x: 100.0 * ct)
            defjvp(target, lambda dx, out, x: 100.0 * dx)
        for call in ("first", "repeated"):
            assert grad(f)(x) == 100.0, call
            assert derivative(f, x) == 100.0, call
            assert jvp(f, (x,), (1.0,))[1] == 100.0, call
            assert float(np.squeeze(jacfwd(f)(x))) == 100.0, call
            assert float(np.squeeze(jacrev(f)(x))) == 100.0, call
            # the rule's slope is constant: no curvature, whichever route takes the hvp
            assert hvp(f, x, 1.0) == 0.0 and float(np.squeeze(hessian(f)(x))) == 0.0, call
    assert math.isclose(grad(f)(x), 3.0 if case == "user method" else math.cos(0.5))


def _derivatives(f, x):
    """What each API gives for one program, as flat arrays (None where it raised)."""
    direction = np.linspace(0.5, -0.3, x.size) if isinstance(x, np.ndarray) else 1.0
    arg = (lambda: x.copy()) if isinstance(x, np.ndarray) else (lambda: x)
    out = {}
    for name, call in [("grad", lambda: grad(f)(arg())),
                       ("jvp", lambda: jvp(f, (arg(),), (direction,))),
                       ("jacfwd", lambda: jacfwd(f)(arg())),
                       ("hvp", lambda: hvp(f, arg(), direction)),
                       ("hessian", lambda: hessian(f)(arg())),
                       ("repeated grad", lambda: grad(f)(arg()))]:
        try:
            out[name] = np.asarray(call(), dtype=float).ravel()
        except Exception as error:        # the reference raising must be matched, not hidden
            out[name] = type(error).__name__
    return out


def _same(value, reference):
    """Equal results, or the same exception raised."""
    if isinstance(value, str) or isinstance(reference, str):
        return value == reference
    return value.shape == reference.shape and \
        np.allclose(value, reference, rtol=1e-9, atol=1e-12, equal_nan=True)


@pytest.mark.every_route
def test_every_fast_route_agrees_with_the_reference_on_the_fuzzers_programs(tmp_path: Path):
    accepted: Counter[str] = Counter()
    mismatches = []
    for index in range(120):
        program = generate(RandomDraw(10_000 + index))
        f = program.load(tmp_path, f"parity_{index}")
        rng = np.random.default_rng(index)
        x = rng.uniform(-1.5, 1.5, 3) if program.array_input else float(rng.uniform(-1.5, 1.5))
        try:
            f(x.copy() if isinstance(x, np.ndarray) else x)
        except Exception:
            continue                      # the program fails natively: nothing to compare
        with force_route(REFERENCE):
            want = _derivatives(f, x)
        for route in FAST_ROUTES:
            with force_route(route):
                got = _derivatives(f, x)
            for api, value in got.items():
                reference = want[api]
                if not _same(value, reference):
                    mismatches.append(f"program {index}, {route}, {api}: {value} vs the "
                                      f"reference's {reference}\n" + "\n".join(program.lines))
        for route in FAST_ROUTES:
            with force_route(route):
                for api, args in [(grad, (x,)), (derivative, (x,)), (hvp, (x, np.ones(3)))]:
                    if api is hvp and not program.array_input:
                        continue
                    try:
                        report = explain(api, f, *args)
                    except Exception:         # compared above, raised on every route alike
                        continue
                    accepted.update(r for r in report.ran if r != REFERENCE)
    assert not mismatches, "\n\n".join(mismatches[:3]) + f"\n({len(mismatches)} in all)"
    # each fast route took part somewhere in the corpus (the parity above covered it there)
    assert set(accepted) >= {"forward-dual", "reverse-specialised", "hvp-tape"}, accepted


def rosenbrock(x):
    a = x[1:] - x[:-1] ** 2
    return np.sum(100.0 * a ** 2 + (1.0 - x[:-1]) ** 2)


def damped(x):
    top = np.sum(np.exp(x) * np.sin(x))
    return top / (1.0 + np.sum(x ** 2))


def mixed(x):
    c = np.cos(x) @ x
    return np.mean(np.log1p(x * x) - c)


STRAIGHT_LINE = [energy, rosenbrock, damped, mixed]    # the compiled hvp's subset


@pytest.mark.every_route
@pytest.mark.parametrize("index", range(len(STRAIGHT_LINE)))
@pytest.mark.parametrize("route", FAST_ROUTES)
def test_straight_line_numpy_agrees_on_every_route(route, index):
    f = STRAIGHT_LINE[index]
    x, v = np.linspace(-0.8, 1.1, 5), np.linspace(1.0, -0.5, 5)
    with force_route(REFERENCE):
        want = _derivatives(f, x)
    with force_route(route):
        got = _derivatives(f, x)
        if route == "hvp-compiled":
            assert "hvp-compiled" in explain(hvp, f, x, v).ran
    for api in want:
        assert not isinstance(want[api], str) and _same(got[api], want[api]), \
            (api, got[api], want[api])
