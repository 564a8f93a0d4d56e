"""The compiled Hessian-vector product of straight-line NumPy functions (overdub_ad.hvp._compiled).

Every function here is written to a module file of its own (the compiler reads source), and
each result is checked against the nested route ``jvp(grad(f))`` -- which shares no code with
the generated one -- and, for the random programs, against central differences of ``grad``.
Also checked: that the compiled route was taken where it should be, and that calls outside its
assumptions (rebound names, errors in the user's code, a non-scalar result) go to the tape with
the user's own behaviour.
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import sys
import tempfile
import traceback
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overdub_ad import explain, grad, hvp, jvp
from overdub_ad.testing import force_route
from tests.conftest import fd

_DIR = Path(tempfile.mkdtemp(prefix="overdub_hvp_"))
_COUNTER = itertools.count()


def _module(source: str, **values):
    """A fresh module from ``source`` (with ``values`` as its globals) in a file of its own."""
    name = f"_hvp_case_{next(_COUNTER)}"
    path = _DIR / f"{name}.py"
    path.write_text("import numpy as np\n\n" + source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    module.__dict__.update(values)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _reference(f, x, v):
    return jvp(grad(f), (x,), (v,))[1]


def _check(f, x, v, compiled=True):
    """``hvp(f, x, v)`` on the default routes, against the nested route; ``compiled``: whether
    the compiled route computed it (else it declined, and the tape did)."""
    with force_route(None):
        report = explain(hvp, f, x, v)
    assert ("hvp-compiled" in report.ran) == compiled, str(report)
    got = report.result
    want = _reference(f, x, v)
    assert got.shape == x.shape and got.dtype == x.dtype
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * (1 + np.max(np.abs(want))))
    return got


# -- random programs -----------------------------------------------------------------------------
# expressions of three kinds: "n" (length n), "m" (length n - 1) and "s" (a scalar), built so
# that values stay moderate (denominators and logarithms kept away from zero)

_UNARY = ["np.sin({})", "np.cos({})", "np.tanh({})", "np.exp(np.tanh({}))", "np.square({})",
          "np.sqrt(1.0 + {} ** 2)", "np.log(2.0 + np.sin({}))", "np.log1p({} ** 2)",
          "np.expm1(np.tanh({}))", "-{}", "+{}", "({}) ** 3", "({}) ** 2",
          "1.0 / (1.5 + np.cos({}))"]
_LEAVES = {"n": ["x", "c", "x * c"], "m": ["x[1:]", "x[:-1]", "x[1:] * x[:-1]"],
           "s": ["x[0]", "x[-1]", "2.5", "k"]}


@st.composite
def _expression(draw, kind, depth):
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(_LEAVES[kind]))
    choice = draw(st.integers(0, 3))
    if choice == 0:
        form = draw(st.sampled_from(_UNARY))
        return form.format(f"({draw(_expression(kind, depth - 1))})")
    if choice == 1 and kind == "s":
        inner = draw(st.sampled_from("nm"))
        reduce = draw(st.sampled_from(["np.sum", "np.mean"]))
        return f"{reduce}({draw(_expression(inner, depth - 1))})"
    op = draw(st.sampled_from(["+", "-", "*", "/"]))
    left = draw(_expression(kind, depth - 1))
    right_kind = draw(st.sampled_from([kind, "s"]))
    right = draw(_expression(right_kind, depth - 1))
    if draw(st.booleans()):
        left, right = right, left
    if op == "/":  # (after the swap: a denominator is always kept away from zero)
        right = f"(2.0 + np.sin({right}))"
    return f"({left} {op} {right})"


@st.composite
def _program(draw):
    """A function body: one to three assignments, then a reduced return."""
    lines = []
    names = []
    for i in range(draw(st.integers(0, 2))):
        kind = draw(st.sampled_from("nm"))
        lines.append(f"    y{i} = {draw(_expression(kind, 2))}")
        names.append((f"y{i}", kind))
    kind = draw(st.sampled_from("nm"))
    body = draw(_expression(kind, 3))
    for name, used_kind in names:
        if used_kind == kind:
            body = f"({body} + {name})"
        else:
            body = f"({body} * np.sum({name}))"
    reduce = draw(st.sampled_from(["np.sum", "np.mean"]))
    lines.append(f"    return {reduce}({body})")
    return "def f(x):\n" + "\n".join(lines) + "\n"


def _uses_x(source):
    return re.search(r"\bx\b", source.partition(":")[2]) is not None


@settings(max_examples=40, deadline=None)
@given(_program(), st.integers(3, 7), st.integers(0, 2**32 - 1))
def test_random_programs(source, n, seed):
    rng = np.random.default_rng(seed)
    f = _module(source, c=rng.standard_normal(n), k=0.7).f
    x, v = rng.standard_normal(n), rng.standard_normal(n)
    got = _check(f, x, v, compiled=_uses_x(source))  # a constant is left to the tape
    # and against central differences of the gradient along v
    want = fd(lambda t: grad(f)(x + t * v), 0.0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * (1 + np.max(np.abs(want))))


# -- the rest of the subset --------------------------------------------------------------------

def test_matrices_products_axes_and_transposes(rng):
    a, w = rng.standard_normal((4, 4)), rng.standard_normal((4, 3))
    m = _module('''
def quadratic(x):
    """x A x, the commonest Hessian."""
    return x @ a @ x

def layer(x):
    h = np.tanh(x @ w)
    return np.sum(h ** 2) + np.mean(np.dot(x.T, x))

def by_axis(x):
    r = np.sum(x * x, axis=1)
    s = np.mean(np.exp(-x), 0)
    return np.sum(np.sqrt(1.0 + r)) + np.sum(s * s) + np.sum(x[:, 1:] * x[:, :-1])

def matmul_call(x):
    return np.sum(np.matmul(x, x.T) ** 2) / x[0, 0] ** 2
''', a=a, w=w)
    x1 = rng.standard_normal(4)
    _check(m.quadratic, x1, rng.standard_normal(4))
    np.testing.assert_allclose(hvp(m.quadratic, x1, x1), (a + a.T) @ x1)
    x2 = rng.standard_normal((5, 4)) + 0.5
    for f in (m.layer, m.by_axis, m.matmul_call):
        _check(f, x2, rng.standard_normal(x2.shape))


def test_rosenbrock_closed_form(rng):
    m = _module('''
def rosenbrock(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)
''')
    x, v = rng.standard_normal(6), rng.standard_normal(6)
    h = np.zeros((6, 6))
    for i in range(5):  # the Hessian by hand
        h[i, i] += 1200 * x[i] ** 2 - 400 * x[i + 1] + 2
        h[i + 1, i + 1] += 200
        h[i, i + 1] = h[i + 1, i] = -400 * x[i]
    np.testing.assert_allclose(_check(m.rosenbrock, x, v), h @ v, rtol=1e-12)


def test_float32_and_integer_directions():
    m = _module("def f(x):\n    return np.sum(np.sin(x) * x ** 2)\n")
    x = np.linspace(0.1, 1.0, 5)
    got = hvp(m.f, x.astype(np.float32), np.arange(5))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, _reference(m.f, x, np.arange(5.0)), rtol=1e-5)


def test_closures_read_at_call_time():
    m = _module('''
def make(xp, scale):
    def f(x):
        return scale * xp.sum(xp.cos(x) * x)
    return f
''')
    x, v = np.linspace(-1, 1, 4), np.ones(4)
    f2, f3 = m.make(np, 2.0), m.make(np, 3.0)
    np.testing.assert_allclose(_check(f3, x, v), 1.5 * _check(f2, x, v))


def test_rebound_names_decline():
    """The generated code checks its assumptions on every call; a failed check sends the call
    to the tape, which sees the new bindings."""
    m = _module("def f(x):\n    return np.sum(k * np.exp(x))\n", k=2.0)
    x, v = np.zeros(3), np.ones(3)
    np.testing.assert_allclose(_check(m.f, x, v), 2.0 * v)
    m.k = 5.0  # still a real number: the generated code reads it
    np.testing.assert_allclose(_check(m.f, x, v), 5.0 * v)
    m.k = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(_check(m.f, x, v), m.k * v)

    class Wrapped:  # np rebound to something else: declined
        sum = staticmethod(lambda a: 2 * np.sum(a))
        exp = staticmethod(np.exp)

    m.np = Wrapped
    np.testing.assert_allclose(hvp(m.f, x, v), 2 * m.k * v)


@pytest.mark.parametrize("source", [
    "def f(x):\n    s = 0.0\n    for xi in x:\n        s = s + xi ** 2\n    return s\n",
    "def f(x):\n    return sum(x ** 2)\n",                 # a builtin
    "def f(x):\n    return np.sum(np.abs(x) ** 3)\n",      # outside the subset: abs
    "def f(x):\n    return np.sum(x ** 2.5)\n",            # a non-integer power
    "def f(x, y=2.0):\n    return np.sum(x ** 2) * y\n",    # two parameters
    "def f(x):\n    i = 1\n    return np.sum(x[i:] ** 2)\n",  # an index that is not literal
    "def f(x):\n    x[0] = 1.0\n    return np.sum(x ** 2)\n",  # a write
])
def test_outside_the_subset_the_tape_runs(source):
    m = _module(source)
    x = np.linspace(0.5, 1.5, 4)
    _check(m.f, x, np.ones(4), compiled=False)


def test_errors_come_from_the_users_code():
    m = _module('''
def f(x):
    unused = x[:2] + x[:3]
    return np.sum(x ** 2)
''')
    with pytest.raises(ValueError, match="broadcast") as info:
        hvp(m.f, np.ones(4), np.ones(4))
    frames = traceback.extract_tb(info.value.__traceback__)
    assert any(fr.filename == m.__file__ and fr.line.strip().startswith("unused =")
               for fr in frames)


def test_non_scalar_output_is_the_usual_error():
    m = _module("def f(x):\n    return x ** 2\n")
    with pytest.raises(TypeError, match="scalar output"):
        hvp(m.f, np.ones(3), np.ones(3))


@pytest.mark.default_routes   # the compiled route's promise (docs/limitations.md: the others)
def test_warnings_point_at_the_users_line():
    m = _module("def f(x):\n    return np.sum(np.log(x))\n")
    with pytest.warns(RuntimeWarning) as record:
        hvp(m.f, np.array([1.0, -1.0]), np.ones(2))
    assert any(w.filename == m.__file__ and w.lineno == 4 for w in record)
