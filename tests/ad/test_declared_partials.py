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


def _real_points(fn, firsts, seconds):
    """``(a, b, fn(a, b))`` over the grid where ``fn`` has a real value."""
    for a in firsts:
        for b in seconds:
            try:
                out = fn(a, b)
            except (ValueError, ZeroDivisionError):
                continue
            if not isinstance(out, complex):
                yield a, b, out


@pytest.mark.parametrize("fn,arity,partials", _declared(2),
                         ids=[getattr(e[0], "__name__", repr(e[0])) for e in _declared(2)])
def test_a_binary_partial_is_the_rules_derivative(fn, arity, partials):
    for a, b, out in _real_points(fn, POINTS, (1.5, -0.5, 2.0, 3.0)):
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


@pytest.mark.parametrize("fn", [operator.truediv, operator.pow, math.pow],
                         ids=["truediv", "pow", "math.pow"])
def test_a_shapes_second_partials_are_the_rules_second_derivatives(fn):
    # what hvp's scalar tapes compute with (``_Shape.second``): partials and second partials
    shape = next(partials for f, _, partials in declared_partials() if f is fn)
    for a, b, out in _real_points(fn, (*POINTS, 0.0), (1.5, -0.5, 2.0, 3.0, 0.0, 1.0)):
        for da, db in ((True, True), (True, False), (False, True)):
            declared = shape.second(a, b, out, da, db)
            if declared is None:
                continue
            with force_route("reference"):
                first = ad.grad(fn, argnums=(0, 1))(a, b)
                second = ad.hessian(fn, argnums=(0, 1))(a, b)
            want = [first[0] if da else None, first[1] if db else None,
                    second[0][0] if da else None, second[0][1] if da and db else None,
                    second[1][1] if db else None]
            for got, expected in zip(declared, want):
                if expected is not None:
                    assert got == pytest.approx(expected, rel=1e-12, abs=1e-14), \
                        (fn, a, b, da, db)


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


def _module(path, text):
    """A module written to ``path`` and imported: functions with source, as a user's are."""
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _on_arrays(fn):
    return type(fn) is np.ufunc


_ELEMENTWISE = declared_elementwise()
_IDS = [("np." if _on_arrays(e[0]) else "math.") + e[0].__name__ for e in _ELEMENTWISE]


@pytest.mark.default_routes
@pytest.mark.parametrize("fn,first,second", [e for e in _ELEMENTWISE if not _on_arrays(e[0])],
                         ids=[i for e, i in zip(_ELEMENTWISE, _IDS) if not _on_arrays(e[0])])
def test_declared_second_derivatives_of_math_functions_and_every_hvp_route_agrees(
        fn, first, second, tmp_path):
    # declared for the scalar hvp route (forward over the specialised reverse tape)
    checked = 0
    for x in POINTS:
        try:
            out = fn(x)
        except ValueError:  # (outside its domain: math.log of a negative number)
            continue
        checked += 1
        with force_route("reference"):
            slope = ad.derivative(fn, x)
            curvature = ad.derivative(lambda t: ad.derivative(fn, t), x)
        assert first(x, out) == pytest.approx(slope, rel=1e-12)
        assert second(x, out) == pytest.approx(curvature, rel=1e-10, abs=1e-14)
    assert checked >= 3
    module = _module(tmp_path / f"energy_math_{fn.__name__}.py",
                     f"import math\n\n\ndef energy(p):\n    a, b = p\n"
                     f"    return math.{fn.__name__}(a * b) * a + b * b\n")
    x, direction = (0.3, 0.7), (0.5, -1.0)
    with force_route("reference"):
        want = ad.hvp(module.energy, x, direction)
    for _ in range(2):
        report = ad.explain(ad.hvp, module.energy, x, direction)
        assert "hvp-tape" in report.ran, str(report)
        np.testing.assert_allclose(report.result, want, rtol=1e-10)


@pytest.mark.parametrize("fn,first,second", [e for e in _ELEMENTWISE if _on_arrays(e[0])],
                         ids=[i for e, i in zip(_ELEMENTWISE, _IDS) if _on_arrays(e[0])])
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
    module = _module(tmp_path / f"energy_{fn.__name__}.py",
                     f"import numpy as np\n\n\ndef energy(v):\n"
                     f"    return np.sum(np.{fn.__name__}(v) * v)\n")
    direction = np.array([0.5, -1.0, 2.0])
    with force_route("reference"):
        want = ad.hvp(module.energy, x, direction)
    for route in ("hvp-compiled", "hvp-tape"):
        with force_route(route):
            report = ad.explain(ad.hvp, module.energy, x, direction)
        assert route in report.ran, str(report)
        np.testing.assert_allclose(report.result, want, rtol=1e-10)
