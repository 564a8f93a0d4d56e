"""The partials declared beside the shipped rules for the fast routes (``defscalar``) are the
rules' own derivatives: each agrees with the rules (through ``derivative``/``grad`` on the
reference route) at many points, and the fast route follows a user's rule instead."""

import importlib.util
import math
import operator

import numpy as np
import pytest

import overdub_ad as ad
from overdub_ad.testing import (BILINEAR, declared_elementwise, declared_partials, force_route,
                                isolated_rules, shipped_rules)

POINTS = [0.3, 0.7, 1.9, -0.4, 2.5]


def _declared(arity):
    return [entry for entry in declared_partials() if entry[1] == arity]


@pytest.mark.parametrize("fn,arity,partials", _declared(1),
                         ids=[getattr(e[0], "__name__", repr(e[0])) for e in _declared(1)])
def test_a_unary_partial_is_the_rules_derivative(fn, arity, partials):
    for x in POINTS:
        try:
            out = fn(x)
        except ValueError:  # outside the domain (math.log of a negative number)
            continue
        if isinstance(out, complex) or not math.isfinite(out):
            continue
        declared = partials(x, out)
        if declared is None:
            continue
        with force_route("reference"):
            want = ad.derivative(fn, x)
        assert declared == pytest.approx(want, rel=1e-13, abs=1e-15), (fn, x)


@pytest.mark.parametrize("fn,arity,partials", _declared(2),
                         ids=[getattr(e[0], "__name__", repr(e[0])) for e in _declared(2)])
def test_a_binary_partial_is_the_rules_derivative(fn, arity, partials):
    for a in POINTS:
        for b in (1.5, -0.5, 2.0, 3.0):
            try:
                out = fn(a, b)
            except (ValueError, ZeroDivisionError):
                continue
            if isinstance(out, complex):
                continue
            if partials is BILINEAR:
                declared = (b, a)
            elif type(partials) is tuple:
                declared = partials
            else:
                declared = partials(a, b, out, True, True)
            if declared is None:
                continue
            with force_route("reference"):
                want = ad.grad(fn, argnums=(0, 1))(a, b)
            assert declared == pytest.approx(want, rel=1e-13, abs=1e-15), (fn, a, b)


def test_every_fast_partial_is_declared_beside_a_shipped_rule():
    shipped = {id(fn) for fn in shipped_rules()}
    for fn, _, _ in declared_partials():
        assert id(fn) in shipped, fn


@pytest.mark.parametrize("fn", [math.sin, np.sin, operator.mul, math.pow])
def test_a_user_rule_replaces_the_declared_partials(fn):
    one = fn in (math.sin, np.sin)

    def f(x):  # a loop of float arithmetic: what the routes with written-out partials take
        total = 0.0
        for _ in range(6):
            total = total + (fn(x) if one else fn(x, 2.0))
        return total
    with isolated_rules():
        if one:
            ad.defvjp(fn, lambda ct, out, x: 100.0 * ct)
        else:
            ad.defvjp(fn, lambda ct, out, x, y: 100.0 * ct, lambda ct, out, x, y: 0.0 * ct)
        for _ in range(2):
            assert ad.grad(f)(0.5) == 600.0 and ad.grad(lambda x: f(x) + 1.0)(0.5) == 600.0
    with force_route("reference"):
        want = ad.grad(f)(0.5)
    assert ad.grad(f)(0.5) == pytest.approx(want, rel=1e-13) != 600.0  # the shipped rule back


@pytest.mark.parametrize("fn,first,second", declared_elementwise(),
                         ids=[e[0].__name__ for e in declared_elementwise()])
def test_declared_second_derivatives_are_the_rules_and_every_hvp_route_agrees(
        fn, first, second, tmp_path):
    x = np.array([0.3, 0.7, 1.2])
    out = fn(x)
    with force_route("reference"):
        slope = ad.jacfwd(fn)(x).diagonal()
        curvature = ad.jacfwd(lambda t: ad.jacfwd(fn)(t).diagonal())(x).diagonal()
    np.testing.assert_allclose(first(x, out), slope, rtol=1e-12)
    np.testing.assert_allclose(second(x, out), curvature, rtol=1e-10)
    # a straight-line function of the compiled route's subset, written as a user would
    path = tmp_path / f"energy_{fn.__name__}.py"
    path.write_text(f"import numpy as np\n\n\ndef energy(v):\n"
                    f"    return np.sum(np.{fn.__name__}(v) * v)\n")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    direction = np.array([0.5, -1.0, 2.0])
    with force_route("reference"):
        want = ad.hvp(module.energy, x, direction)
    for route in ("hvp-compiled", "hvp-tape"):
        with force_route(route):
            report = ad.explain(ad.hvp, module.energy, x, direction)
        assert route in report.ran, str(report)
        np.testing.assert_allclose(report.result, want, rtol=1e-10)
