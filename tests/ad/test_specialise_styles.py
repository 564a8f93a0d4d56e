"""The reverse-specialised route on the constructs of the style family (issue 16): the function
``grad`` is given (with a tuple or list of differentiated values), bound methods, ``__init__``
storing attributes, classes of Python code, named tuples, properties, comprehensions,
generator expressions, ``*args``/``**kwargs`` calls, annotated assignments and lambdas.

Each construct's gradient is compared with finite differences and with the reference route's,
on a first and a repeated call, and ``explain`` shows the specialised route ran the function
itself with no fast route declining anything; what it does not compile it declines with a
reason that names the construct.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import math
from typing import Any, NamedTuple

import numpy as np
import pytest

from overdub_ad import explain, grad
from overdub_ad.testing import REFERENCE, force_route
from tests.conftest import fd

ROUTE = "reverse-specialised"


def _specialised(f: Any, *args: Any, argnums: Any = 0) -> Any:
    """``grad(f, argnums)(*args)``, checked: the specialised route ran ``f`` itself and no fast
    route declined; equal on a repeated call, to the reference route's and to finite
    differences (for the first argument)."""
    gradient = functools.partial(grad, argnums=argnums)
    with force_route(None):
        report = explain(gradient, f, *args)
        again = gradient(f)(*args)
    ran = [about for route, did, about in report.decisions if did and route == ROUTE]
    assert f.__qualname__ in [about.split(":")[0] for about in ran], str(report)
    assert all(did for _, did, _ in report.decisions), str(report)
    with force_route(REFERENCE):
        reference = gradient(f)(*args)
    got = np.asarray(report.result, dtype=float)
    np.testing.assert_allclose(np.asarray(again, dtype=float), got, rtol=0, atol=0)
    np.testing.assert_allclose(got, np.asarray(reference, dtype=float), rtol=1e-12, atol=1e-14)
    if argnums == 0:
        x = np.asarray(args[0], dtype=float)
        kind = type(args[0])
        rest = args[1:]

        def plain(v: Any) -> Any:
            held = v if kind is np.ndarray else (kind(v) if kind in (tuple, list)
                                                  else float(v))
            return f(held, *rest)
        np.testing.assert_allclose(got, fd(plain, x), rtol=1e-6, atol=1e-8)
    return got


def _declined(f: Any, *args: Any) -> str:
    with force_route(None):
        report = explain(grad, f, *args)
    return "\n".join(about for route, did, about in report.decisions
                     if route == ROUTE and not did)


# -- the function grad is given, and what it is given ------------------------------------------

def tuple_argument(p):
    a, b, c = p
    return a * b - c ** 2 / (1.0 + a * a)


def list_argument(p):
    total = 0.0
    for i in range(len(p)):
        total = total + (i + 1) * p[i] ** 3
    return total


def test_the_function_given_a_tuple_or_a_list_runs_specialised():
    _specialised(tuple_argument, (0.3, -1.2, 2.0))
    _specialised(list_argument, [0.5, 1.5, -0.7])
    _specialised(lambda p: p[0] * math.sin(p[1]), (0.4, 1.1))


# -- objects: methods, __init__, classes, properties, named tuples ------------------------------

class Oscillator:
    def __init__(self, k, c):
        self.k, self.c = k, c      # a tuple target of attributes
        self.energy: float = 0.0   # an annotated store

    @property
    def stiffness(self):
        return self.k * 2.0

    def force(self, x, v):
        return -self.stiffness * x - self.c * v

    def step(self, x, v, h=0.1):
        a = self.force(x, v)
        self.energy += 0.5 * v * v
        return x + h * v, v + h * a


def model(p):
    osc = Oscillator(*p)
    x, v = 1.0, 0.0
    for _ in range(5):
        x, v = osc.step(x, v)
    return x + v + osc.energy


class Point(NamedTuple):
    x: Any
    y: Any


def _moved(a: Point, b: Point, s: float) -> Point:
    return Point(a.x + s * b.x, a.y + s * b.y)


def named_tuples(p):
    a = Point(p[0], p[1])
    for _ in range(3):
        a = _moved(a, Point(a.y, -a.x), 0.1)
    return a.x * a.y


def test_methods_properties_constructors_and_named_tuples_run_specialised():
    _specialised(model, (1.3, 0.2))
    _specialised(named_tuples, (0.8, -0.3))


def _model_class() -> type:
    """A fresh class per call of the test (the test changes it)."""
    class Model:
        scale = 1.0

        def __init__(self, a):
            self.a = a

        def term(self, x):
            return self.a * x

        @property
        def weight(self):
            return self.a
    return Model


def _squared(self, x):
    return self.a * x * x


def _weight_squared(self):
    return self.a * self.a


def _change(cls, what, x):
    if what.startswith("method"):
        cls.term = _squared
    elif what == "property":
        cls.weight = property(_weight_squared)
    else:
        cls.scale = x


def _model_subclass() -> type:
    """A subclass that defines nothing: the test gives it a method of its own during the run,
    over the one its base defines."""
    return type("Derived", (_model_class(),), {})


def changed_during_the_run(p, cls, what):
    """The model's class gets a new method, property or class attribute half-way through the
    loop: the specialised code remembers how a class reads a name for the rest of the run,
    and must read the new one from then on."""
    m = cls(p[0])
    total = 0.0
    for i in range(4):
        total = total + m.term(p[1]) * m.weight * m.scale
        if i == 1:
            _change(cls, what, p[1])
    return total


@pytest.mark.default_routes
@pytest.mark.parametrize("what", ["method", "method of a subclass", "property",
                                  "class attribute"])
def test_a_class_changed_during_the_run_is_read_as_changed(what):
    a, x = 1.3, 0.7
    want = {"method": 2 * a * x * a + 2 * a * x * x * a,
            "property": 2 * a * x * a + 2 * a * x * a * a,
            "class attribute": 2 * a * x * a + 2 * a * x * a * x}[what.split(" of ")[0]]
    made = _model_subclass if what == "method of a subclass" else _model_class
    assert changed_during_the_run((a, x), made(), what) == pytest.approx(want, rel=1e-12)
    with force_route(None):
        report = explain(grad, changed_during_the_run, (a, x), made(), what)
        again = grad(changed_during_the_run)((a, x), made(), what)
    ran = [about.split(":")[0] for route, did, about in report.decisions
           if did and route == ROUTE]
    assert "changed_during_the_run" in ran, str(report)
    with force_route(REFERENCE):
        reference = grad(changed_during_the_run)((a, x), made(), what)
    np.testing.assert_allclose(report.result, again, rtol=0, atol=0)
    np.testing.assert_allclose(report.result, reference, rtol=1e-12)
    np.testing.assert_allclose(
        report.result,
        fd(lambda v: changed_during_the_run(tuple(v), made(), what), np.array([a, x])),
        rtol=1e-6)


class _Scaled:
    def __init__(self, a):
        self.a = a


def _doubled_a(self):
    return 2.0 * self.__dict__["a"]


def _set_a(self, value):
    self.__dict__["a"] = value


def read_at_one_site(p, objects):
    """One attribute site reading ``a`` from the objects of several classes."""
    total = 0.0
    for obj in objects:
        total = total + obj.a * p[1]
    return total


@pytest.mark.default_routes
def test_an_attribute_site_reads_each_class_as_python_does_in_every_run():
    """A site of specialised code remembers, for the run, a class whose objects' instance
    dicts it reads: objects of other classes at the same site (duck typing) read as Python
    reads them, and a property given to the class between runs is read by its getter."""
    class Other:
        @property
        def a(self):
            return self.b * self.b

        def __init__(self, b):
            self.b = b

    def loss(p):
        cls = type(_model_holder[0])
        return read_at_one_site(p, [cls(p[0]), Other(p[0]), cls(p[1]), Other(p[1])])

    a, x = 1.3, 0.7
    cls = type("Scaled", (_Scaled,), {})  # (a class of this test's own: it changes it)
    _model_holder[:] = [cls(0.0)]
    for run in range(3):
        if run == 2:  # between runs: a property over the name the objects hold
            cls.a = property(_doubled_a, _set_a)
        scale = 2.0 if run == 2 else 1.0
        want = (scale * x + 2 * a * x, scale * a + a * a + 2 * scale * x + 3 * x * x)
        with force_route(None):
            report = explain(grad, loss, (a, x))
            got = grad(loss)((a, x))
        assert any(did and route == ROUTE and about.startswith("read_at_one_site")
                   for route, did, about in report.decisions), str(report)
        np.testing.assert_allclose(report.result, got, rtol=0, atol=0)
        with force_route(REFERENCE):
            reference = grad(loss)((a, x))
        np.testing.assert_allclose(got, want, rtol=1e-12)
        np.testing.assert_allclose(got, reference, rtol=1e-12)


_model_holder: list[Any] = []


# -- method calls (_Compiler.method) ---------------------------------------------------------

class _Stepper:
    def __init__(self, a):
        self.a = a
        self.hook = None

    def f(self, x):
        return self.a * x


def _square(x):
    return x * x


def _cube(self, x):
    return self.a * x * x * x


def calling_methods(p, how):
    """A method called at one site on every pass: shadowed by the instance half-way, replaced
    on the class, or called on objects of two classes in turn; the site calls the method's
    specialised version itself once it has seen it, and must see each change."""
    objects = [_Stepper(p[0]), _Stepper(p[0])]
    total = 0.0
    for i, k in enumerate([0, 1, 0, 1, 0, 1]):
        obj = objects[k]
        term = obj.f(p[1])  # (a call of its own: in an expression it is a region's leaf)
        total = total + term
        if i == 2:
            if how == "shadowed":
                objects[0].f = _square
            elif how == "replaced":
                type(obj).f = _cube
            elif how == "other class":
                objects[1] = _OtherStepper(p[1])
        if i == 4 and how == "replaced":
            _Stepper.f = _STEPPER_F  # (and back again)
    return total


_STEPPER_F = _Stepper.f


class _OtherStepper:
    def __init__(self, a):
        self.a = a

    def f(self, x):
        return self.a + x


@pytest.mark.default_routes
@pytest.mark.parametrize("how", ["shadowed", "replaced", "other class"])
def test_a_method_call_site_sees_each_change(how):
    try:
        _specialised(calling_methods, (1.3, 0.7), how)
    finally:
        _Stepper.f = _STEPPER_F


def test_calling_an_attribute_that_is_no_function_raises_as_python_does():
    def loss(p):
        obj = _Stepper(p[0])
        return obj.hook(p[1])
    with pytest.raises(TypeError, match="'NoneType' object is not callable"):
        grad(loss)((1.0, 2.0))


# -- named tuples' fields at a site ---------------------------------------------------------

class _XY(NamedTuple):
    x: Any
    y: Any


class _YX(NamedTuple):
    y: Any
    x: Any


_XY_FIELD = _XY.__dict__["x"]


def _doubled_x(self):
    return 2.0 * self[0]


def reading_fields(p, replace):
    """The fields ``x`` and ``y`` read at one site from named tuples of two classes that hold
    them at different positions; with ``replace``, the first class's ``x`` becomes a property
    for two passes half-way through."""
    classes = [_XY, _YX]
    total = 0.0
    for i, k in enumerate([0, 1, 0, 1, 0, 1, 0, 1]):
        cls = classes[k]
        pair = cls(p[0], p[1]) if k == 0 else cls(p[1], p[0])
        total = total + pair.x * 3.0 + pair.y
        if i == 3 and replace:
            _XY.x = property(_doubled_x)
        if i == 5 and replace:
            _XY.x = _XY_FIELD
    return total


@pytest.mark.default_routes
@pytest.mark.parametrize("replace", [False, True])
def test_a_field_site_reads_each_named_tuple_class_at_its_position(replace):
    try:
        got = _specialised(reading_fields, (1.3, 0.7), replace)
    finally:
        _XY.x = _XY_FIELD
    # x is p[0] in both classes: 3 a pass, 6 at the one pass of _XY while it is a property
    np.testing.assert_allclose(got, [(27.0 if replace else 24.0), 8.0], rtol=1e-12)


# -- locals that need no box (_unboxed) -----------------------------------------------------

def stages_then_an_array(p, arr):
    """``a`` and ``b`` are read only as operands in the run that assigns them (no box); the
    region of ``c`` meets an array, takes the general path, and must box ``a`` first."""
    a = p[0] * p[1]
    b = a - p[0] / 3.0
    c = a * arr + b
    d = -b + a ** 2
    return np.sum(c) + d


def stages_in_a_loop(p):
    """An RK-like loop: the stages are boxless, ``x`` (read at the next pass and after the
    loop) is boxed; ``t`` is read after the loop, ``s`` inside an if: both boxed."""
    x, t = p[0], 0.0
    for i in range(6):
        k1 = x * p[1]
        k2 = (x + 0.1 * k1) * p[1]
        s = k1 + k2
        if i > 2:
            s = s * 2.0
        t = k1 - k2
        x = x + 0.05 * (k1 + k2) + 0.01 * s
    return x + t


def read_as_a_call_argument(p):
    """``a`` is also handed to a call and returned: it keeps its box."""
    a = p[0] * p[1]
    b = a * 3.0
    return math.exp(a) + b + float(a > 0) * a


def chained_targets(p):
    """``a`` needs no box, ``b`` (a call's argument) does: the value they share keeps it."""
    a = b = p[0] * p[1]
    c = a + 1.0
    return _cubed(b) + c


def _cubed(v):
    return v * v * v


@pytest.mark.default_routes
def test_locals_read_only_by_arithmetic_need_no_box():
    p = (0.7, 1.3)
    _specialised(chained_targets, p)
    _specialised(stages_in_a_loop, p)
    _specialised(read_as_a_call_argument, p)
    arr = np.array([0.5, -1.0, 2.0])
    _specialised(stages_then_an_array, p, arr)
    # the array itself: the general path's derivative, with the boxed local in it
    got = grad(stages_then_an_array, argnums=1)(p, arr)
    np.testing.assert_allclose(got, np.full(3, p[0] * p[1]), rtol=1e-12)


@pytest.mark.parametrize("source, names", [
    ("a = x * y\nb = a + 1.0\nreturn b * a", {"a", "b"}),  # (b: read only by arithmetic)
    ("a = x * y\nreturn a", set()),                       # returned: boxed
    ("a = x * y\nb = f(a)\nreturn b + 1.0", {"b"}),       # a: a call's argument
    ("a = x * y\nif x:\n    b = a * 2.0\nreturn x", {"b"}),  # a: read in another run
    ("for i in r:\n    k = x * y\n    x = x + k\nreturn x", {"k"}),  # x: read at the next pass
    ("a = 1.0\na += x\nreturn a * 2.0", set()),         # +=
    ("a = x * y\nb = [a * t for t in r]\nreturn b", set()),  # a comprehension ends the run
    ("a = x * y\nb = a * 2.0 if x else 0.0\nreturn b", set()),  # so does an if-expression
    ("b = a * 2.0\na = x * y\nreturn b + a", {"b"}),     # a: read before it is assigned
])
def test_which_locals_need_no_box(source, names):
    from overdub_ad.reverse import _specialise, _unboxed
    body = ast.parse(source).body
    assigned = {n.id for n in ast.walk(ast.Module(body=body, type_ignores=[]))
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    found, _ = _unboxed.unboxed(body, assigned - {"x"}, tuple(_specialise._ARITH),
                                tuple(_specialise._UNARY))
    assert found == names


# -- comprehensions and generator expressions --------------------------------------------------

def comprehensions(p):
    h, s = 0.5, 10.0
    scaled = [h * s for s in p]                          # h: a cell of the comprehension
    pairs = {i: s * t for i, (s, t) in enumerate(zip(p, scaled)) if i != 1}
    nested = [[s * t for t in p] for s in scaled]
    total = sum(x * x for x in scaled) + sum(pairs.values()) + s * p[0]  # s is still 10
    return total + sum(sum(row) for row in nested) + max(t for t in p) + len({*scaled})


def generator_consumed_lazily(p):
    squares = (q * q for q in p)
    first = next(squares)        # one item now, the rest by sum: as Python's generator
    return first * 3.0 + sum(squares)


def test_comprehensions_and_generators_run_specialised_with_their_own_scope():
    _specialised(comprehensions, (0.3, 1.7, -0.9))
    _specialised(generator_consumed_lazily, [1.5, -0.5, 2.0])


def raising_comprehension(p):
    return sum([1.0 / (s - 1.0) for s in p])


def test_a_comprehension_raises_what_the_reference_raises():
    for route in (None, REFERENCE):
        with force_route(route), pytest.raises(ZeroDivisionError):
            grad(raising_comprehension)((0.5, 1.0))


# -- tuple assignments, builtins over lists and tuples, dict and list state -------------------

def tuple_assignments(p):
    x, y, z = p
    for _ in range(3):
        a, b = x * y, y - z                    # x, y, z stay unwrapped across the assignment
        x, y = y, x                            # a swap: each name the other's old value
        (c, d), e = (a + x, b * y), z * a      # nested targets, then a list target
        [z, w] = [c - d, e]
        x = x + 0.1 * (w - z * z) + d
        a = b = a * x                          # one value, two names
        y = y + 0.01 * (a + b)
    return x * y + z


def builtins_over_sequences(p):
    state = [p[0], p[1] * 2.0, p[2]]
    total = 0.0
    for i, (s, t) in enumerate(zip(state, p), 1):
        total = total + i * s * t
    for s, t in zip(reversed(state), (1.0, 2.0)):       # the shorter one stops zip
        total = total + s * t
    back = tuple(state) + tuple(list(p))
    made = tuple(s * s for s in back) + tuple([s + 1.0 for s in state])
    kept = list(made)
    kept.append(made[0] * made[1])
    kept.extend([p[0], p[1] * p[2]])
    kept.insert(0, p[2] ** 3)
    return total + sum(kept) * kept[-1] + list(s * 2.0 for s in p)[2] * kept[0]


def dict_and_list_state(p):
    s = {"x": p[0], "y": 1.0, 2: p[1]}
    history = []
    for step in range(3):
        probe = dict(s)
        probe["x"] = probe["x"] * p[2]               # the copy written, s left as it was
        s["y"] = s["y"] + 0.5 * s["x"] * s[2]
        s[2] = s[2] - step * probe["x"]
        history.append({"x": s["x"], "y": s["y"]})
        history[-1]["x"] = history[-1]["x"] + s[2]
        s["x"] = s["x"] * 0.9 + history[-1]["y"] * 0.1
    cells = [0.0, 0.0]
    cells[1] = s["y"] * p[0]
    cells[-2] = cells[1] + history[0]["x"]
    s.update({"z": cells[0] * cells[1]})
    return s["x"] + s["y"] * s[2] + s["z"] + probe["x"] + sum(h["x"] for h in history)


def test_assignments_builtins_and_container_state_run_specialised():
    _specialised(tuple_assignments, (0.4, -0.7, 1.3))
    _specialised(builtins_over_sequences, (0.6, -1.4, 0.9))
    _specialised(builtins_over_sequences, [0.6, -1.4, 0.9])
    _specialised(dict_and_list_state, (0.8, -0.5, 1.2))


def _collects(p, out):
    pairs = list(zip(p, (2.0, 3.0)))
    out.append(tuple(pairs[0]))
    out.extend([p[0] * p[1], {"k": p[1]}])
    store = {}
    store["v"] = p[0] ** 2
    out.append(dict(store))
    return p[0] * p[1] + store["v"]


def test_containers_the_specialised_code_stores_into_get_plain_values_back():
    for route in (None, REFERENCE):
        out: list[Any] = []
        with force_route(route):
            got = grad(_collects)((1.5, -2.0), out)
        np.testing.assert_allclose(got, (-2.0 + 3.0, 1.5), rtol=1e-12)
        assert out == [(1.5, 2.0), -3.0, {"k": -2.0}, {"v": 2.25}]
        assert type(out[0][0]) is float and type(out[1]) is float
        assert type(out[2]["k"]) is float and type(out[3]["v"]) is float


# -- calls with *args and **kwargs, starred displays, lambdas ----------------------------------

def _weighted(x, y, z, *, w=1.0, v=0.0):
    return w * x * y + z + v


def starred_calls(p):
    options = {"w": 2.0, "v": p[0]}
    return _weighted(*p, **options) + _weighted(*(p[0], p[1]), *[p[2]], w=p[1])


def test_starred_arguments_run_specialised():
    _specialised(starred_calls, (0.4, -1.1, 2.5))
    _specialised(lambda p: (*p, p[0] * p[1])[-1] ** 2, (0.7, 1.9))


# -- what stays with the core, and why ---------------------------------------------------------

def nested_class(p):
    class Pair:
        scale = 2.0
    return Pair.scale * p[0] * p[1]


def with_try(p):
    try:
        return p[0] * p[1]
    except ZeroDivisionError:
        return 0.0


def test_what_the_route_does_not_compile_is_declined_with_its_reason():
    assert "nested_class: a nested class" in _declined(nested_class, (1.0, 2.0))
    assert "with_try: try" in _declined(with_try, (1.0, 2.0))
    for f in (nested_class, with_try):   # and the reference runs them
        np.testing.assert_allclose(grad(f)((1.5, 2.0)), fd(lambda v: f(tuple(v)), [1.5, 2.0]),
                                   rtol=1e-6)


@dataclasses.dataclass(frozen=True)
class _FrozenPair:
    a: float
    b: float


_MADE: list = []


def _frozen_pair_energy(p):
    pair = _FrozenPair(p[0], p[1] * p[0])  # object.__setattr__ stores, by the dataclass
    _MADE.append(pair)  # escapes the run: must hold plain numbers afterwards
    return pair.a * pair.b + pair.b ** 2


@pytest.mark.default_routes
def test_a_frozen_dataclass_stores_differentiated_values_and_gets_plain_ones_back():
    point = (1.5, 2.0)
    want = np.array([fd(lambda t: _frozen_pair_energy((t, point[1])), point[0]),
                     fd(lambda t: _frozen_pair_energy((point[0], t)), point[1])])
    for _ in range(2):
        _MADE.clear()
        report = explain(grad, _frozen_pair_energy, point)
        np.testing.assert_allclose(report.result, want, rtol=1e-6)
        assert ("reverse-specialised", True, "_FrozenPair.__init__") in report.decisions
        assert all(type(v) is float for v in (_MADE[0].a, _MADE[0].b))  # put back plainly
    with force_route("reference"):
        np.testing.assert_allclose(grad(_frozen_pair_energy)(point), report.result, rtol=1e-12)


def _loop_of_closures(x):
    makers = []
    for k in range(3):
        def term(v, k=k):          # a default evaluated at each def
            return v * k + offset   # a cell assigned after the def, shared by every term
        makers.append(term)
    offset = x * x
    return sum(m(x) for m in makers)


def _recursive_inner(x):
    def power(v, n):
        return 1.0 if n == 0 else v * power(v, n - 1)   # its own name: a cell
    return power(x, 3) + power(x * 0.5, 2)


def _returns_its_helper(x):
    scale = x * 2.0

    def scaled(v):
        return v * scale
    return scaled(x) + scaled(1.0)


def _default_from_a_differentiated_value(x):
    def shifted(v, by=x * 3.0):
        return v + by
    return shifted(x) * x


def _helper_defining_a_closure(v, c):
    def inner(w):                  # a new function at each call, over this call's cells
        return w * c + v * v
    return inner(v * c)


def _calls_a_helper_defining_a_closure(x):
    return sum([_helper_defining_a_closure(x * k, k + 0.5) for k in range(1, 4)])


NESTED = [_loop_of_closures, _recursive_inner, _returns_its_helper,
          _default_from_a_differentiated_value, _calls_a_helper_defining_a_closure]


@pytest.mark.parametrize("f", NESTED, ids=[f.__name__ for f in NESTED])
@pytest.mark.default_routes
def test_functions_defined_inside_are_made_as_python_makes_them(f):
    for x in (0.7, 1.9):
        want = fd(f, x)
        for _ in range(2):
            report = explain(grad, f, x)
            assert report.result == pytest.approx(want, rel=1e-6)
            assert ("reverse-specialised", True, f.__name__) in report.decisions, str(report)
        with force_route(REFERENCE):
            assert grad(f)(x) == pytest.approx(report.result, rel=1e-12)


# -- calls of math functions inside arithmetic: vertices of the region ----------------------------

def _user_activation(v):
    return v * v * 0.5 + v


def nested_math_calls(p):
    x, y, z = p
    s = 0.0
    for k in range(3):
        s = s + x * math.exp(x * 0.5 - 0.1 * k) + 0.3 * math.tanh(z) * y \
            + math.sin(math.cos(y) * z) - abs(x - y) + np.sqrt(z * z + 1.0) / (1.0 + s * s)
        x = x + 0.1 * math.atan(float(y) * s)
    return s + np.exp(-x) * math.log(z + 2.0) + math.log1p(y * y)


ACTIVATION = math.tanh


def rebound_callees(p):
    x, y, z = p
    s = 0.0
    for k in range(4):
        g = (math.sin, _user_activation, np.tanh, ACTIVATION)[k]  # rebound each turn
        s = s + g(x * k + y) * z + ACTIVATION(s) * 0.5
    return s


def numpy_float_arguments(p):
    x, y, z = p
    c = np.float64(0.25)
    return math.exp(np.float64(0.5) * x) * y + np.tanh(c * z) + math.sin(y) * np.float64(2.0)


def test_math_calls_nested_in_expressions_run_in_the_region():
    _specialised(nested_math_calls, (0.7, 1.3, 0.4))
    _specialised(nested_math_calls, (-0.3, 0.2, 1.9))


def test_a_callee_rebound_between_calls_and_turns_is_tested_where_it_is_called():
    global ACTIVATION
    try:
        for ACTIVATION in (math.tanh, _user_activation, math.sin, np.arctan):
            _specialised(rebound_callees, (0.7, 1.3, 0.4))
    finally:
        ACTIVATION = math.tanh


def test_numpy_float_arguments_and_results_run_in_the_region():
    got = _specialised(numpy_float_arguments, (0.7, 1.3, 0.4))
    _specialised(numpy_float_arguments, tuple(np.float64(v) for v in (0.7, 1.3, 0.4)))
    with force_route(None):
        np.testing.assert_allclose(
            grad(numpy_float_arguments)(tuple(np.float64(v) for v in (0.7, 1.3, 0.4))), got,
            rtol=1e-15)


def _sqrt_at_zero(p, c):
    # the declared partials of np.sqrt and math.sqrt hand back None at 0 (the rules decide):
    # the general path, with a differentiated argument (np.sqrt's rule: an infinite slope) and
    # with a plain one (no slope)
    x, y = p
    return y * np.sqrt(x - 1.0) + x * math.sqrt(c) * y + y * y


def _math_sqrt_at_zero(p):
    x, y = p
    return y * math.sqrt(x - 1.0) + y


@pytest.mark.parametrize("route", [None, REFERENCE])
def test_a_point_where_the_declared_partial_gives_none_takes_the_general_path(route):
    with force_route(REFERENCE):
        want = grad(_sqrt_at_zero)((1.0, 2.0), 0.0)
    assert want[0] == math.inf and want[1] == 4.0
    with force_route(route):
        for _ in range(2):
            assert grad(_sqrt_at_zero)((1.0, 2.0), 0.0) == want
            assert grad(_sqrt_at_zero)((2.0, 2.0), 0.0) == pytest.approx(
                fd(lambda v: _sqrt_at_zero((float(v[0]), float(v[1])), 0.0),
                   np.array([2.0, 2.0])), rel=1e-6)
            with pytest.raises(ZeroDivisionError):  # math.sqrt's rule on floats, at 0
                grad(_math_sqrt_at_zero)((1.0, 2.0))
            assert grad(_math_sqrt_at_zero)((2.0, 2.0)) == pytest.approx((1.0, 2.0))


def exp_twice(p):
    x, y = p
    return y * math.exp(x * 0.5) + math.exp(y)


def test_a_user_rule_for_math_exp_registered_between_calls_wins_on_every_route():
    from overdub_ad import defjvp, defvjp
    from overdub_ad.testing import FAST_ROUTES, isolated_rules
    point = (0.4, 1.5)
    shipped = _specialised(exp_twice, point)
    with isolated_rules():
        # a rule that is not exp's derivative: every route must use it
        defvjp(math.exp, lambda ct, out, /, x: 3.0 * ct * out)
        defjvp(math.exp, lambda dx, out, /, x: 3.0 * dx * out)
        x, y = point
        want = [y * 3.0 * math.exp(x * 0.5) * 0.5, math.exp(x * 0.5) + 3.0 * math.exp(y)]
        for route in (None, REFERENCE, *FAST_ROUTES):
            with force_route(route):
                for _ in range(2):
                    np.testing.assert_allclose(grad(exp_twice)(point), want, rtol=1e-14,
                                               err_msg=str(route))
    with force_route(None):
        np.testing.assert_allclose(grad(exp_twice)(point), shipped, rtol=0, atol=0)


def _weighted_activation(v, *, scale=1.0):
    return math.tanh(v) * scale


def keyword_calls(p):
    x, y, z = p
    return _weighted_activation(x * y, scale=z) * y + np.exp(z, dtype=float) * x \
        + math.exp(*(y,)) * z + round(x, ndigits=3) * y


def test_calls_with_keywords_or_starred_arguments_run_as_before():
    _specialised(keyword_calls, (0.7, 1.3, 0.4))


_EVENTS: list = []


def _event(v):
    _EVENTS.append(v)
    return v


def raising_math_call(p):
    x, y = p
    return y * math.log(x - 2.0) + _event(y) * x


def ordered_calls(p):
    x, y = p
    box = [1.0]
    return _pushed(box, x) * math.exp(y * 0.5) + box[-1] * y


def _pushed(box, v):
    box.append(3.0)
    return v * 2.0


def test_calls_keep_pythons_order_and_raise_from_the_users_line():
    for route in (None, REFERENCE):
        _EVENTS.clear()
        with force_route(route), pytest.raises(ValueError, match="math domain error") as info:
            grad(raising_math_call)((1.0, 2.0))
        assert not _EVENTS  # raised before the later call, as Python does
        user = [tb for tb in info.traceback if tb.name == "raising_math_call"]
        assert user and user[-1].lineno + 1 == raising_math_call.__code__.co_firstlineno + 2
    # box[-1] is read after _pushed ran: 3.0, not 1.0
    got = _specialised(ordered_calls, (0.7, 1.3))
    assert got[1] == pytest.approx(2.0 * 0.7 * 0.5 * math.exp(0.65) + 3.0, rel=1e-14)


def stacked_numbers(p):
    """Small states built with np.array / np.asarray / np.stack of numbers: tagged NumPy and
    Python floats, constants among them, an integer (which the general path stacks)."""
    x, y, z = p[0], p[1], float(p[2]) * 1.0
    s = np.array([x * y, 2.0, z])
    t = np.asarray((x, np.float64(0.5), y * z))
    u = np.stack([z, x])
    v = np.array([x, 3, y])  # (an int: the general path)
    return np.sum(s * t) + np.dot(u, u) + np.sum(v * v) + np.array([x])[0] * y


def test_arrays_stacked_from_numbers_are_recorded_as_the_general_path_records_them():
    """The specialised route's own recording of np.array([a, b, c]) of numbers (a state built
    at every step) gives what the general path's does (_specialised compares the reference
    route and finite differences), and hvp's tape, which reads the same entries, too."""
    from overdub_ad import hvp

    p = np.array([0.7, 1.3, -0.4])
    _specialised(stacked_numbers, p)
    v = np.array([0.3, -1.1, 0.5])
    with force_route(REFERENCE):
        want = hvp(stacked_numbers, p, v)
    for _ in range(2):
        np.testing.assert_allclose(hvp(stacked_numbers, p, v), want, rtol=1e-12, atol=1e-14)
