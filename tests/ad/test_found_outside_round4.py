"""Python code that C code runs for the function (a ``key=`` function, ``__format__``,
``__hash__``, ``__index__``, ``__lt__``, ``__init_subclass__``) runs once under a derivative, as
it does plainly, found by the fourth outside tester: the dual route ran it natively, then
stopped at a later line, and the reference route ran it again (a counter read by the function
made the first derivative wrong: 4.0 for 2.0).  The dual route now stops before such a call.
"""

from __future__ import annotations

import pytest

from overdub_ad import derivative, explain, grad, jvp
from overdub_ad.testing import REFERENCE, force_route
from tests.conftest import fd

RAN = [0]


def _counted(v):
    RAN[0] += 1
    return v


class _Hook:
    def __init__(self, k=1):
        self.k = k

    def __format__(self, spec):
        RAN[0] += 1
        return "hook"

    def __hash__(self):
        RAN[0] += 1
        return hash(self.k)

    def __eq__(self, other):
        return isinstance(other, _Hook) and self.k == other.k

    def __index__(self):
        RAN[0] += 1
        return 0

    def __lt__(self, other):
        RAN[0] += 1
        return self.k < other.k


class _Base:
    def __init_subclass__(cls, **kwargs):
        RAN[0] += 1
        super().__init_subclass__(**kwargs)


def _then_a_stop(x):
    a, *rest = (x, 1.0)  # (a starred target: the dual route stops here)
    return a * RAN[0]


HOOKS = {
    "sorted key": lambda x: (sorted([2.0, 1.0], key=_counted), _then_a_stop(x))[1],
    "min key": lambda x: (min([2.0, 1.0], key=_counted), _then_a_stop(x))[1],
    "f-string": lambda x: (f"{_Hook()}", _then_a_stop(x))[1],
    "set display": lambda x: ({_Hook()}, _then_a_stop(x))[1],
    "dict display": lambda x: ({_Hook(2): 1.0}, _then_a_stop(x))[1],
    "index": lambda x: ([1.0][_Hook()], _then_a_stop(x))[1],
    "sorted objects": lambda x: (sorted([_Hook(2), _Hook(1)]), _then_a_stop(x))[1],
    "class made by type": lambda x: (type("Sub", (_Base,), {}), _then_a_stop(x))[1],
}


@pytest.mark.parametrize("hook", list(HOOKS))
@pytest.mark.default_routes
def test_python_code_that_c_code_calls_runs_once_as_plainly(hook):
    f = HOOKS[hook]
    RAN[0] = 0
    f(3.0)
    plain_runs = RAN[0]
    want = fd(lambda x: (RAN.__setitem__(0, 0), f(x))[1], 3.0)
    for api in (lambda: derivative(f, 3.0), lambda: jvp(f, (3.0,), (1.0,))[1],
                lambda: grad(f)(3.0)):
        for _ in range(2):
            RAN[0] = 0
            assert api() == pytest.approx(want, rel=1e-9)
            assert RAN[0] == plain_runs
    RAN[0] = 0
    with force_route(REFERENCE):
        assert derivative(f, 3.0) == pytest.approx(want, rel=1e-9)
    RAN[0] = 0
    report = explain(derivative, f, 3.0)
    assert RAN[0] == plain_runs and "forward-dual" not in report.ran


class _Box:
    def __init__(self, items):
        self.items = items


SEQUENCE_READS = {
    "list attribute +": lambda x: sum(_Box([x]).items + [0.5 * x]),
    "list attribute *": lambda x: sum(_Box([x * x]).items * 2),
    "2 * list attribute": lambda x: sum(2 * _Box([x * x]).items),
    "list attribute copy": lambda x: sum(_Box([x, x * x]).items.copy()),
    "tuple attribute +": lambda x: sum(_Box((x,)).items + (x * x,)),
    "UserList +": lambda x: sum(__import__("collections").UserList([x]) + [x * x]),
    "UserList *": lambda x: sum(__import__("collections").UserList([x * x]) * 2),
}


@pytest.mark.parametrize("case", list(SEQUENCE_READS))
def test_a_list_read_from_an_object_and_concatenated_keeps_its_tangents(case):
    f = SEQUENCE_READS[case]
    first = fd(f, 1.5)
    second = fd(lambda t: fd(f, t, h=1e-4), 1.5, h=1e-4)
    for route in (None, REFERENCE):
        with force_route(route):
            for _ in range(2):
                assert derivative(f, 1.5) == pytest.approx(first, rel=1e-6)
                assert grad(f)(1.5) == pytest.approx(first, rel=1e-6)
                assert derivative(lambda t: derivative(f, t), 1.5) == pytest.approx(
                    second, rel=1e-4, abs=1e-6)
