"""Found from outside (session 15's round-2 testers) and fixed in session 16.

1. A differentiated dict key -- which the docs promise is "stored with it, so that iterating
   the dict later differentiates through it" -- lost its derivative in both modes when a C
   method stored it: ``d.update({x: 1})``, ``d |= {x: 1}``, a ``defaultdict``'s ``d[x] += 1``
   (the factory's item is stored first, and a dict keeps the first key object), and so
   ``Counter({x: 1})``, ``Counter.update({x: 1})`` and ``ChainMap({x: 1})``'s iteration.  Such a
   key is stored as ``d[x] = v`` stores it now.  ``Counter([x])`` raised MissingRuleError in
   reverse mode (its C counting helper): it counts through the context now, in both modes.
2. ``copy.copy``/``copy.deepcopy`` of a ``Counter`` gave 0 in forward mode: ``object.__reduce_ex__``
   called Counter's Python ``__reduce__`` natively.  A ``__reduce__`` written in Python is run
   through the context now whatever the class's bases.
3. Forward mode over an inner derivative (``derivative(lambda x: derivative(inner)(2.0))``), and
   forward over reverse: a list holding the inner derivative's values as they are (``[y * x]``,
   or filled by ``append``) beside a value only the outer derivative differentiates (``x``,
   stored by ``insert``/``append``/``c[i] = x``/``extend``/``heappush``/``bisect.insort``) was
   read natively by ``sum``, ``min``, ``np.array``, ``heapq``: the outer derivative kept that
   value's tangent aside, by position, and lost it -- 0 for the outer derivative (86 of 1,008
   cases of the matrix below; grad over either was right).
4. A derivative rule's own error, raised while the program runs (``0.5 / out`` of Python floats
   at ``math.sqrt(0)``, ``math.acos(1)``'s, NumPy's under ``np.errstate(all="raise")`` or with
   warnings made errors), reached the program's ``except`` clause in forward mode, and the
   function took a branch the plain program never takes: ``derivative`` returned that
   branch's slope (5.0) with no error.  A NumPy rule is now computed again with NumPy's errors
   ignored (the derivative is the inf NumPy gives, as in JAX); one that still fails raises
   MissingRuleError, which the derivative raises when it returns even if the program catches
   it.
5. Forward mode read a ``types.MappingProxyType`` -- a user's read-only view of a dict, or a
   class's ``vars(C)`` / ``C.__dict__`` -- as plain values: 0 for ``proxy["b"]``, ``.get``,
   ``.values()``, ``.items()``, ``dict(proxy)``, ``{**proxy}``, ``proxy | {}``; reverse mode too
   for a class attribute set during the derivative (``C.w = x * x; vars(C)["w"]``).
6. ``np.interp(x, xp, fp, period=p)`` was declared to have no derivative in ``p`` (0 in every
   mode), but ``p`` moves ``x mod p`` and the knots NumPy extends by one period.
7. ``copy.copy(deque([x]))`` raised TypeError in both modes: the deque given to
   ``deque.__copy__`` was handed over as a list, as for a C function reading its items.
8. ``functools.reduce(step, seq, p)`` with a differentiated array ``p`` as its initial value
   handed ``step`` the *list* of ``p``'s elements, as for the sequence it iterates (found by
   outside tester H115): ``w * 2`` repeated the list, so the program's value changed (6.0
   became 3.0) and the derivative with it, in every mode; a 2-d one raised.  So were
   ``next(it, p)``'s default and the object ``itertools.repeat(p)`` repeats.
9. (speed, found by H115) ``hvp`` of scalar code calling ``math.log`` (and ``log2``, ``log10``,
   ``sqrt``) or casting with ``float(p[0])`` took each such call through a nested forward pass
   of its rule: 16x the same code with ``np.log``.  Their second derivatives are declared now,
   and ``float`` is linear on the tape.  Checked here on the hvp-tape route, against the
   reference and finite differences of the gradient.
10. (H115) An arithmetic slot of an array or NumPy scalar called by name on its class --
    ``np.ndarray.__mul__(p, q)``, ``type(p).__add__(p, 1.0)``, ``np.float64.__add__(x, 1.0)``,
    ``np.ndarray.__neg__(p)`` -- raised MissingRuleError in reverse mode (and for the unary ones
    in forward mode): each is the ufunc it runs now.
11. (H117, from its program generator) Forward mode noted the lists whose members' tangents the
    core keeps aside by their ids alone; a list that died during the run (``copy.deepcopy``
    builds its copies with ``append``) could pass its id on to a new one, which was then taken
    for it: ``bisect.insort``/``heappush`` reordered a second copy and stored back the first,
    so the inserted value vanished and the program's own value changed (22 of 200 calls).  The
    lists are kept alive for the run now.
12. (H118, while extending the dual route) A NumPy function given its ``out`` array by position
    -- ``np.cumsum(p, 0, None, w)``, ``np.clip(p, 0, 1, w)``, ``np.dot(a, b, w)`` -- wrote it
    natively in both modes: the written values had no derivative (0.9 where finite differences
    give 1.5).  Its ``out`` is the ``out=`` keyword the modes follow now, as a ufunc's was.
    And forward mode lost the tangent of a 0-d ``out=`` of ``np.dot``, which NumPy writes and
    then returns a copy of (a NumPy scalar), not the array.
13. (H116, H117) A closure that leaked out of a derivative raised a TagError saying "use
    overdub.untag(x, ctx)", a context the user never holds: it says the value leaked out of a
    derivative that has returned now.
14. (H119) Reverse mode, ``sum(d)`` of a dict whose keys and values both carry the derivative:
    right on the first call, 0 from the second on (every route): the second call took a
    routing remembered for ``sum`` before the dict was read as its keys.
15. (H119) Forward over reverse: an inner ``grad``'s heap holding the outer derivative's value
    and its own -- the program's value changed under the outer ``jvp`` (3.4 became 0.0) after
    this session's first change; the members the outer derivative keeps aside are held as
    they read now, when a heap function moves them.
16. (H119) Forward mode, ``itertools.accumulate`` over a differentiated NumPy array (with or
    without ``func``, ``initial``): tangent 0 on every route.  And ``dict.fromkeys(array)``
    (``OrderedDict.fromkeys``) kept the keys plain in both modes.
17. (H119) ``np.power(x, 0.5)`` of a negative float: the reverse-partials and forward-partials
    routes gave a finite (or complex) derivative where the value and the reference's are nan.
18. (H119) A dict made by a display or ``dict.fromkeys`` with a differentiated key, read back by
    that key (``d = {x: 1.0}; d[x]``, ``max(d, key=d.get)``), raised MissingRuleError saying the
    item was stored before the derivative began: a key that is the very value read with was
    stored during this derivative.
19. (H119) ``OrderedDict.move_to_end(x)`` with a differentiated key raised MissingRuleError in
    forward mode: the key only finds the item, which keeps its own.
20. (H119) At nan and infinite inputs the routes with written-out partials disagreed with the
    reference (0 where it gives nan): ``abs``'s sign of nan was 0, and the power's partials
    (declared, and written out by the reverse-specialised compiler) were taken at infinite or
    nan operands; those points go to the rules now.
21. (H116 N-1) A ``custom_jvp`` given a function (``nondiff_argnums``) that closes over the
    differentiated value raised a MissingRuleError saying C code called it: it says now that the
    function reads a differentiated value from its closure, which its rule never sees (JAX
    refuses the program too); the same function closing over an enclosing derivative's value
    is right, as before.
22. (H119 E5, E7) Reverse mode: ``copy.deepcopy`` of a dict with a differentiated key raised a
    TagError when the derivative returned (the copy's keep-alive list held the dict, whose keys
    were left tagged); ``hessian`` of ``max(cm, key=cm.get)`` over a ChainMap raised a TagError
    on the hvp-tape route, which ran the key function again after the recording: a call given
    a function declines that route now.
23. (H120) A constant stored under a differentiated key and read back by that key raised a
    false MissingRuleError ("stored before this derivative began") under nested derivatives
    (``derivative(derivative(f))``, ``grad(grad(f))``, the reference route's ``hessian``): the
    store was the inner derivative's, which the outer did not see. A stored key that is itself
    a tagged value was stored while a derivative runs (an earlier one's memo holds plain
    keys again), so it is read as usual.  And reverse mode read ``MappingProxyType(d)[x]``
    with a differentiated key as if it iterated the view (a TypeError about a generator).
24. (H120) An array method given its ``out`` array by position (``a.sum(0, None, w)``,
    ``a.mean``, ``a.clip(lo, hi, w)``, ``a.dot(b, w)``, ``a.cumsum``, ``a.max(1, w)``,
    ``np.ndarray.sum(a, 0, None, w)``) wrote it natively in both modes: 0 where finite
    differences give the gradient.  Its ``out`` is the ``out=`` keyword now, as for the NumPy
    function of the same name (item 12).
"""

from __future__ import annotations

import bisect
import collections
import copy
import functools
import heapq
import itertools
import math
import operator
import types
import warnings

import numpy as np
import pytest

from overdub_ad import (MissingRuleError, custom_jvp, derivative, grad, hessian, hvp, jacfwd,
                        jacrev, jvp)
from overdub_ad.testing import REFERENCE, force_route

pytestmark = pytest.mark.every_route

ROUTES = pytest.mark.parametrize("route", [None, REFERENCE], ids=["default", "reference"])
MODES = pytest.mark.parametrize("mode", [derivative, grad], ids=["forward", "reverse"])


def _twice(mode, f, x):
    return [float(mode(f)(x)) for _ in range(2)]


# -- 1. differentiated dict keys stored by C methods --------------------------------------------

def _updated(x):
    d = {}
    d.update({x: 1})
    return sum(d)


def _or_assigned(x):
    d = {"k": 0.0}
    d |= {2 * x: 1}
    return sum(k for k in d if k != "k")


def _default_counted(x):
    d = collections.defaultdict(int)
    d[x] += 1
    d[x] += 1
    return sum(d) * d[x]  # = 2x


def _counter_mapping(x):
    return sum(collections.Counter({x: 1}))


def _counter_items(x):
    c = collections.Counter([x, 3 * x, x])
    return sum(c) + c[x]  # = 4x + 2


def _counter_updated(x):
    c = collections.Counter()
    c.update({x: 1})
    c.update([x * x])
    return sum(c.keys())


def _chained(x):
    return sum(k for k in collections.ChainMap({x: 1}, {2.0: 2}))


KEYED = [(_updated, 1.0), (_or_assigned, 2.0), (_default_counted, 2.0),
         (_counter_mapping, 1.0), (_counter_items, 4.0), (_counter_updated, 1.0 + 2 * 0.7),
         (_chained, 1.0)]


@ROUTES
@MODES
@pytest.mark.parametrize("f, expected", KEYED, ids=[f.__name__ for f, _ in KEYED])
def test_a_differentiated_key_stored_by_a_c_method_keeps_its_derivative(f, expected, mode,
                                                                          route):
    with force_route(route):
        assert _twice(mode, f, 0.7) == pytest.approx([expected] * 2)


@ROUTES
def test_counting_a_differentiated_value_keeps_the_counts(route):
    def counts(x):
        c = collections.Counter([x, x, 2 * x])
        assert c[x] == 2 and c.most_common(1)[0][1] == 2
        return sum(k * n for k, n in c.items())  # 2x + 2x

    with force_route(route):
        assert _twice(grad, counts, 0.7) == [4.0, 4.0]
        assert _twice(derivative, counts, 0.7) == [4.0, 4.0]


# -- 2. copies of a Counter ----------------------------------------------------------------------

@ROUTES
@MODES
@pytest.mark.parametrize("copier", [copy.copy, copy.deepcopy], ids=["copy", "deepcopy"])
def test_a_copied_counter_keeps_its_derivatives(copier, mode, route):
    def f(x):
        c = copier(collections.Counter(a=x, b=x * x))
        return c["a"] + c["b"] + c.total()

    with force_route(route):
        assert _twice(mode, f, 0.7) == pytest.approx([2 * (1 + 1.4)] * 2)


class _Reduced(dict):
    """A dict subclass reduced by Python code, as Counter is."""

    def __reduce__(self):
        return type(self), (dict(self),)


@ROUTES
def test_a_python_reduce_of_a_dict_subclass_runs_under_the_derivative(route):
    def f(x):
        return copy.copy(_Reduced(a=x))["a"] * x

    with force_route(route):
        assert _twice(derivative, f, 0.7) == pytest.approx([1.4, 1.4])
        assert _twice(grad, f, 0.7) == pytest.approx([1.4, 1.4])


# -- 3. lists mixing an inner derivative's values with the outer one's ---------------------------
# inner(y) builds a list holding y * x + 1 and x, and reads back x by a C function: inner's
# derivative is x, the outer derivative 1.

def _set(c, i, v):
    c[i] = v


BUILDS = {
    "display, insert": lambda x, y: (lambda c: (c.insert(0, x), c)[1])([y * x + 1]),
    "append": lambda x, y: (lambda c: (c.append(y * x + 1), c.append(x), c)[2])([]),
    "extend": lambda x, y: (lambda c: (c.extend([x]), c)[1])([y * x + 1]),
    "item set": lambda x, y: (lambda c: (_set(c, 1, x), c)[1])([y * x + 1, 0.0]),
    "__setitem__": lambda x, y: (lambda c: (c.__setitem__(1, x), c)[1])([y * x + 1, 0.0]),
    "heappush": lambda x, y: (lambda c: (heapq.heappush(c, y * x + 1),
                                         heapq.heappush(c, x), c)[2])([]),
    "insort": lambda x, y: (lambda c: (bisect.insort(c, x), c)[1])([y * x + 1]),
}
READS = {
    "min": min,
    "sum": lambda c: sum(c) - max(c),
    "sorted": lambda c: sorted(c)[0],
    "heapify": lambda c: (heapq.heapify(c), c[0])[1],
    "np.min": lambda c: np.min(np.array(c)),
    "reduce": lambda c: functools.reduce(min, c),
}
NESTINGS = {"forward over forward": (derivative, derivative),
            "forward over reverse": (derivative, grad),
            "reverse over forward": (grad, derivative),
            "reverse over reverse": (grad, grad)}


@ROUTES
@pytest.mark.parametrize("nesting", NESTINGS)
@pytest.mark.parametrize("read", READS)
@pytest.mark.parametrize("build", BUILDS)
def test_a_list_mixing_derivative_levels_keeps_the_outer_derivative(build, read, nesting, route):
    outer, inner = NESTINGS[nesting]
    made, reader = BUILDS[build], READS[read]

    def f(x):
        return inner(lambda y: reader(made(x, y)) * y)(2.0)

    with force_route(route):
        assert _twice(outer, f, 0.7) == pytest.approx([1.0, 1.0])


@ROUTES
def test_heap_and_priority_queue_inside_an_inner_derivative(route):
    import queue

    def pushed(x):
        def inner(y):
            h = []
            heapq.heappush(h, y * x)
            heapq.heappush(h, x)  # sifts x to the front
            return h[0] * y
        return derivative(inner)(2.0)

    def queued(x):
        def inner(y):
            q = queue.PriorityQueue()
            q.put(y * x)
            q.put(x)
            return q.get() * y
        return derivative(inner)(2.0)

    with force_route(route):
        for f in (pushed, queued):
            assert _twice(derivative, f, 0.7) == [1.0, 1.0]
            assert float(jvp(f, (0.7,), (1.0,))[1]) == 1.0
            assert _twice(grad, f, 0.7) == [1.0, 1.0]


def test_the_matrix_programs_read_back_x():
    # (what the matrix above differentiates: each reads back the outer derivative's x)
    for made in BUILDS.values():
        for reader in READS.values():
            assert reader(made(0.7, 2.0)) == pytest.approx(0.7)


# -- 4. a rule's own error inside the program's try ---------------------------------------------

def _math_sqrt(x):
    try:
        return math.sqrt(x - 0.7) + x
    except (ZeroDivisionError, ValueError):
        return 5.0 * x  # (never taken natively at 0.7)


def _math_acos(x):
    try:
        return math.acos(x + 0.3) * x
    except Exception:
        return 3.0 * x


def _raising_numpy(x):
    with np.errstate(all="raise"):
        try:
            return np.sqrt(x - 0.7) + x
        except FloatingPointError:
            return 5.0 * x


def _warnings_as_errors(x):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            return np.log(np.sqrt(x - 0.7) + 1.0) + x
        except RuntimeWarning:
            return 5.0 * x


FORWARD = {"derivative": lambda f, x: derivative(f)(x), "jacfwd": lambda f, x: jacfwd(f)(x),
           "jvp": lambda f, x: jvp(f, (x,), (1.0,))[1]}


@ROUTES
@pytest.mark.parametrize("api", FORWARD)
@pytest.mark.parametrize("f", [_math_sqrt, _math_acos], ids=["sqrt", "acos"])
def test_a_python_float_rule_failing_inside_the_program_s_try_raises(f, api, route):
    assert f(0.7) == pytest.approx(0.7 if f is _math_sqrt else 0.0)  # (natively: no error)
    with force_route(route):
        for _ in range(2):
            with pytest.raises(MissingRuleError, match="failed at this point") as raised:
                FORWARD[api](f, 0.7)
            causes = []  # (acos's caught by ``except Exception``: "caught there", chained)
            error = raised.value
            while error is not None:
                causes.append(type(error))
                error = error.__cause__
            assert causes[-1] is ZeroDivisionError


@ROUTES
@pytest.mark.parametrize("api", FORWARD)
@pytest.mark.parametrize("f", [_raising_numpy, _warnings_as_errors], ids=["errstate", "warnings"])
def test_a_numpy_rule_failing_inside_the_program_s_try_gives_numpy_s_inf(f, api, route):
    assert f(0.7) == 0.7
    with force_route(route), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (reverse mode's sweep runs outside the program)
        for _ in range(2):
            assert float(FORWARD[api](f, 0.7)) == math.inf
        assert float(grad(f)(0.7)) == math.inf


@ROUTES
def test_a_rule_at_a_regular_point_and_the_program_s_own_errors_are_untouched(route):
    def own(x):  # natively the domain error is raised, and the fallback taken
        try:
            return math.sqrt(x - 0.8) + x
        except ValueError:
            return 5.0 * x

    with force_route(route):
        for api in FORWARD.values():
            assert float(api(own, 0.7)) == 5.0
            assert float(api(_math_sqrt, 0.9)) == pytest.approx(0.5 / math.sqrt(0.2) + 1.0)
        assert float(hessian(own)(0.7)) == 0.0


# -- 5. read-only mapping views -------------------------------------------------------------------

PROXY_READS = {"item": lambda p: p["b"], "get": lambda p: p.get("b"),
               "values": lambda p: sum(p.values()), "items": lambda p: sum(v for _, v in p.items()),
               "dict": lambda p: dict(p)["b"], "copy": lambda p: p.copy()["b"],
               "unpacked": lambda p: {**p}["b"], "union": lambda p: (p | {})["b"]}


@ROUTES
@MODES
@pytest.mark.parametrize("read", PROXY_READS)
def test_a_mapping_proxy_reads_its_dict_s_derivatives(read, mode, route):
    def f(x):
        d = {"a": 0.5}
        view = types.MappingProxyType(d)
        d["b"] = x * x  # (written after the view was made: it shows it)
        return PROXY_READS[read](view)

    with force_route(route):
        assert _twice(mode, f, 0.7) == pytest.approx([1.4, 1.4])


class _Settings:
    pass


@ROUTES
@MODES
def test_a_class_namespace_read_by_vars_has_the_attribute_s_derivative(mode, route):
    def f(x):
        _Settings.w = x * x
        try:
            return vars(_Settings)["w"] + _Settings.__dict__.get("w") + \
                sum(v for k, v in vars(_Settings).items() if k == "w")
        finally:
            del _Settings.w

    with force_route(route):
        assert _twice(mode, f, 0.7) == pytest.approx([4.2, 4.2])


# -- 6. np.interp's period ---------------------------------------------------------------------

_KNOTS = np.array([0.1, 2.3, 1.1, 4.0])
_VALUES = np.array([1.0, -2.0, 0.5, 3.0])
_AT = np.array([-3.7, 0.3, 1.9, 5.5, 7.25, 2.0])


def _interpolated(p):
    return np.interp(_AT, _KNOTS, _VALUES, period=p)


@ROUTES
@pytest.mark.parametrize("period", [4.7, 5.3, -4.9, 6.1])
def test_np_interp_is_differentiated_in_its_period(period, route):
    h = 1e-6
    expected = (_interpolated(period + h) - _interpolated(period - h)) / (2 * h)
    assert np.any(np.abs(expected) > 0.1)
    weighted = lambda p: np.sum(_interpolated(p) * np.arange(1.0, 7.0))  # noqa: E731
    with force_route(route):
        for _ in range(2):
            np.testing.assert_allclose(jacfwd(_interpolated)(period), expected, atol=1e-5)
            np.testing.assert_allclose(jacrev(_interpolated)(period), expected, atol=1e-5)
            assert float(derivative(weighted)(period)) == pytest.approx(
                float(expected @ np.arange(1.0, 7.0)), abs=1e-4)
            assert float(grad(weighted)(period)) == pytest.approx(
                float(expected @ np.arange(1.0, 7.0)), abs=1e-4)


# -- 7. copies of a deque --------------------------------------------------------------------------

@ROUTES
@MODES
def test_a_copied_deque_keeps_its_derivatives(mode, route):
    def f(x):
        d = collections.deque([1.0, x])
        d.append(x * x)
        return copy.copy(d)[1] + d.copy()[2] + copy.deepcopy(d)[2]

    with force_route(route):
        assert _twice(mode, f, 0.7) == pytest.approx([1.0 + 2.8] * 2)


# -- 8. an array kept, not iterated, by an iterating builtin ------------------------------------

def _doubled(p):
    return functools.reduce(lambda w, _: w * 2, range(1), p)[1]


def _scaled(p):
    return np.sum(functools.reduce(lambda w, c: w * c, [2.0, 3.0], p.reshape(1, 2)))


def _defaulted(p):
    return np.sum(next(iter([]), p * 3.0))


def _repeated(p):
    pairs = zip(itertools.repeat(p), [1.0, 2.0])
    return sum(np.sum(a * x) for a, x in pairs) - np.sum(list(itertools.repeat(p, 2))[1]) * 1.5


@ROUTES
@pytest.mark.parametrize("f, value, gradient", [(_doubled, 6.0, [0.0, 2.0]),
                                               (_scaled, 21.0, [6.0, 6.0]),
                                               (_defaulted, 10.5, [3.0, 3.0]),
                                               (_repeated, 5.25, [1.5, 1.5])],
                         ids=["reduce", "reduce 2-d", "next", "repeat"])
def test_an_initial_or_default_array_is_handed_over_as_it_is(f, value, gradient, route):
    p = np.array([0.5, 3.0])
    assert f(p) == value
    with force_route(route):
        for _ in range(2):
            np.testing.assert_allclose(grad(f)(p), gradient)
            out, tangent = jvp(f, (p,), (np.array([1.0, 1.0]),))
            assert (out, tangent) == (value, sum(gradient))
            np.testing.assert_allclose(jacfwd(f)(p), gradient)


# -- 9. math functions and float casts on the hvp tape ------------------------------------------

def _scalar_logs(p):
    a, b = float(p[0]), float(p[1])
    s = 0.0
    for i in range(1, 4):
        s = s + math.log(1.0 + math.exp(a * i)) * b + math.log2(1.0 + b * b) * math.sqrt(a * a + i)
        s = s + math.log10(2.0 + a * b * i) * a
    return s


@pytest.mark.parametrize("route", [None, "hvp-tape", REFERENCE])
def test_hvp_of_math_functions_and_float_casts(route):
    p = np.array([0.4, -0.7])
    v = np.array([1.0, 0.5])
    h = 1e-6
    expected = (grad(_scalar_logs)(p + h * v) - grad(_scalar_logs)(p - h * v)) / (2 * h)
    with force_route(route):
        for _ in range(2):
            np.testing.assert_allclose(hvp(_scalar_logs, p, v), expected, rtol=1e-6)
            np.testing.assert_allclose(hessian(_scalar_logs)(p) @ v, expected, rtol=1e-6)


# -- 10. arithmetic slots called by name ---------------------------------------------------------

SLOTS = {
    "ndarray.__mul__": (lambda p: np.sum(np.ndarray.__mul__(p, p)), [1.0, 6.0]),
    "ndarray.__rmul__": (lambda p: np.sum(np.ndarray.__rmul__(p, 2.0)), [2.0, 2.0]),
    "type(p).__add__": (lambda p: np.sum(type(p).__add__(p, 1.0) * p), [2.0, 7.0]),
    "float64.__add__": (lambda p: float(np.float64.__add__(p[0], 1.0)) * p[1], [3.0, 1.5]),
    "float64.__mul__": (lambda p: np.float64.__mul__(p[0], p[1]), [3.0, 0.5]),
    "ndarray.__neg__": (lambda p: np.sum(np.ndarray.__neg__(p)), [-1.0, -1.0]),
    "ndarray.__matmul__": (lambda p: np.ndarray.__matmul__(p, p), [1.0, 6.0]),
}


def _every_reverse_and_forward_api(f, p, gradient, route):
    """grad, jacfwd and jacrev of ``f`` at ``p`` on ``route``, twice each, are ``gradient``."""
    with force_route(route):
        for api in (grad, jacfwd, jacrev):
            for _ in range(2):
                np.testing.assert_allclose(api(f)(p), gradient)


@ROUTES
@pytest.mark.parametrize("slot", SLOTS)
def test_an_arithmetic_slot_called_by_name_is_its_ufunc(slot, route):
    f, gradient = SLOTS[slot]
    _every_reverse_and_forward_api(f, np.array([0.5, 3.0]), gradient, route)


# -- 11. a list noted by a dead list's id ----------------------------------------------------------

def _inserted(a):
    x, y = a[0], float(a[1])
    copy.deepcopy([[x, y], {"k": 0.3 - x}])  # (lists made and dropped: their ids come free)
    s = sorted([x, y, x])
    bisect.insort(s, math.sqrt(1.0 + x * x))
    h = [y, x]
    heapq.heapify(h)
    heapq.heappush(h, x * x)
    assert len(s) == 4 and len(h) == 3
    return s[-1] + len(s) + h[0]


@ROUTES
def test_lists_made_after_others_died_keep_their_inserted_values(route):
    rng = np.random.default_rng(1)
    with force_route(route):
        for _ in range(150):
            p = rng.uniform(-1.5, 1.5, 2)
            value, tangent = jvp(_inserted, (p,), (np.ones(2),))
            assert value == _inserted(p)
            assert float(tangent) == pytest.approx(float(np.sum(grad(_inserted)(p))))


# -- 12. out given by position -----------------------------------------------------------------

def _cumulated(p):
    w = np.zeros(3)
    np.cumsum(p, 0, None, w)
    return w[1] * p[0]


def _clipped(p):
    w = np.zeros(3)
    np.clip(p, 0.0, 1.0, w)
    return w[0] * p[1] + w[2]


def _dotted(p):
    w = np.zeros(())
    np.dot(p, p, w)
    return float(w) * p[2]


@ROUTES
@pytest.mark.parametrize("f", [_cumulated, _clipped, _dotted], ids=["cumsum", "clip", "dot"])
def test_an_out_array_given_by_position_is_followed(f, route):
    p = np.array([0.4, 0.5, 0.25])
    h = 1e-6
    expected = np.array([(f(p + h * e) - f(p - h * e)) / (2 * h) for e in np.eye(3)])
    with force_route(route):
        for _ in range(2):
            np.testing.assert_allclose(grad(f)(p), expected, rtol=1e-6)
            np.testing.assert_allclose(jacfwd(f)(p), expected, rtol=1e-6)
            assert float(jvp(f, (p,), (np.ones(3),))[1]) == pytest.approx(expected.sum(), rel=1e-6)


# -- 13. a value leaked out of a derivative -------------------------------------------------------

@ROUTES
@MODES
def test_a_value_leaked_out_of_a_derivative_says_so(mode, route):
    kept = {}

    def f(x):
        def inner(y):
            kept["h"] = lambda z: z * y * x
            return kept["h"](y)
        return mode(inner)(x * 0.5) + kept["h"](2.0)

    with force_route(route), pytest.raises(TypeError, match="derivative that has returned"):
        f(0.7)


# -- 14-17. found by H119 ------------------------------------------------------------------------

def _keys_and_values(x):
    d = {x: x * x}
    e = {}
    e[2.0 * x] = x
    return sum(d) + sum(e)


@ROUTES
def test_sum_of_a_dict_whose_keys_and_values_are_differentiated(route):
    with force_route(route):
        assert [float(grad(_keys_and_values)(0.7)) for _ in range(3)] == [3.0, 3.0, 3.0]
        assert [float(derivative(_keys_and_values)(0.7)) for _ in range(2)] == [3.0, 3.0]


def _heap_outer(x):
    def inner(y):
        h = []
        heapq.heappush(h, x * 1.5)
        heapq.heappush(h, y + 0.25)
        heapq.heappush(h, 2.0 * y * x)
        heapq.heappop(h)
        return heapq.heappop(h)  # 2 x y
    return grad(inner)(0.6)  # 2 x


@ROUTES
def test_an_inner_gradient_s_heap_of_both_derivatives_values(route):
    assert _heap_outer(1.7) == pytest.approx(3.4)
    with force_route(route):
        for _ in range(2):
            out, tangent = jvp(_heap_outer, (1.7,), (1.0,))
            assert (float(out), float(tangent)) == pytest.approx((3.4, 2.0))
            assert float(grad(_heap_outer)(1.7)) == pytest.approx(2.0)


ARRAY_ITERATIONS = {
    "accumulate": (lambda p: list(itertools.accumulate(p))[-1] * p[0], [3.0, 0.5]),
    "accumulate func": (lambda p: list(itertools.accumulate(p, operator.mul))[-1], [2.0, 0.5]),
    "accumulate initial": (lambda p: list(itertools.accumulate(p, initial=1.0))[-1], [1.0, 1.0]),
    "fromkeys": (lambda p: sum(dict.fromkeys(p)) * p[0], [3.0, 0.5]),
    "OrderedDict.fromkeys": (lambda p: sum(collections.OrderedDict.fromkeys(p, 1.0)), [1.0, 1.0]),
    "fromkeys value": (lambda p: np.sum(dict.fromkeys("ab", p)["a"] * p), [1.0, 4.0]),
}


@ROUTES
@pytest.mark.parametrize("case", ARRAY_ITERATIONS)
def test_an_array_iterated_by_accumulate_or_fromkeys(case, route):
    f, gradient = ARRAY_ITERATIONS[case]
    _every_reverse_and_forward_api(f, np.array([0.5, 2.0]), gradient, route)


@pytest.mark.parametrize("route", [None, REFERENCE, "reverse-partials", "forward-partials"])
def test_a_fractional_power_of_a_negative_base_has_no_derivative(route):
    with force_route(route), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for f in (lambda x: np.power(x, 0.5) + x, lambda x: np.float64(x) ** 1.5 * x):
            assert math.isnan(float(grad(f)(-2.0)))
            d = derivative(f)(-2.0)
            assert isinstance(d, (float, np.floating)) and math.isnan(float(d))


def _read_by_its_key(x):
    d = {x: 1.0, 2 * x: 3.0}
    e = dict.fromkeys([x], 2.0)
    return d[x] * x + max(d, key=d.get) + d.get(x) + e[x] * x  # = x + 2x + 1 + 2x


@ROUTES
@MODES
def test_a_dict_display_read_by_its_differentiated_key(mode, route):
    with force_route(route):
        assert _twice(mode, _read_by_its_key, 0.7) == pytest.approx([5.0, 5.0])


def _moved_to_end(x):
    od = collections.OrderedDict()
    od[x] = 1.0
    od[2 * x] = 2.0
    od.move_to_end(x)
    od.move_to_end(2 * x, last=False)
    return next(iter(od)) * 3 + list(od)[-1]  # 6x + x


@ROUTES
@MODES
def test_move_to_end_by_a_differentiated_key(mode, route):
    with force_route(route):
        assert _twice(mode, _moved_to_end, 0.7) == pytest.approx([7.0, 7.0])


def _abs(x):
    return abs(x) + x


def _np_abs(x):
    return np.abs(x) * 2.0


def _pow_zero(x):
    return math.pow(x, 0.0) * x


def _cube(x):
    return x ** 3.0


def _zero_to_the(x):
    return 0.0 ** x * 3.0


def _two_to_the(x):
    return 2.0 ** x


NON_FINITE = {"abs": _abs, "np.abs": _np_abs, "math.pow(x, 0)": _pow_zero, "x ** 3": _cube,
              "0 ** x": _zero_to_the, "2 ** x": _two_to_the}


@pytest.mark.parametrize("route", ["forward-partials", "reverse-partials", "forward-dual",
                                   "reverse-specialised"])
@pytest.mark.parametrize("f", NON_FINITE.values(), ids=NON_FINITE.keys())
@pytest.mark.parametrize("x", [math.nan, math.inf, -math.inf])
def test_the_scalar_partials_agree_with_the_reference_at_non_finite_points(f, x, route):
    def both(api):
        try:
            return str(float(api(f)(x)))
        except Exception as error:  # (the reference raises there too)
            return type(error).__name__

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with force_route(REFERENCE):
            expected = [both(derivative), both(grad)]
        with force_route(route):
            assert [both(derivative), both(grad)] == expected


@functools.partial(custom_jvp, nondiff_argnums=(0,))
def _apply(f, x):
    return f(x)


@_apply.defjvp
def _apply_jvp(f, primals, tangents):
    (x,), (dx,) = primals, tangents
    return f(x), dx * derivative(f, x)


@ROUTES
def test_a_custom_rule_s_function_argument_closing_over_the_differentiated_value(route):
    with force_route(route):
        for _ in range(2):  # (the enclosing derivative's value in the closure: right)
            assert derivative(lambda x: derivative(
                lambda z: _apply(lambda y: x * y * y, z))(2.0))(1.5) == pytest.approx(4.0)
        for outer in (derivative, grad):
            with pytest.raises(TypeError, match="reads a differentiated value from its closure"):
                outer(lambda x: _apply(lambda y: x * y * y, 2.0))(1.5)


def _deep_copied_keys(x):
    e = copy.deepcopy({x: [x * x, {2 * x: x}]})
    return sum(e) + sum(e[next(iter(e))][1])  # x + 2x


def _chain_argmax(x):
    cm = collections.ChainMap({x: 1}, {x * x: 2})
    return max(cm, key=cm.get)  # x * x


@ROUTES
def test_deep_copies_and_key_functions_over_differentiated_keys(route):
    with force_route(route):
        for _ in range(2):
            assert float(grad(_deep_copied_keys)(1.3)) == pytest.approx(3.0)
            assert float(derivative(_deep_copied_keys)(1.3)) == pytest.approx(3.0)
            assert float(hessian(_chain_argmax)(1.3)) == pytest.approx(2.0)
            assert float(grad(_chain_argmax)(1.3)) == pytest.approx(2.6)


def _constant_under_a_key(x):
    d = {}
    d[x * 2] = 3.0
    e = dict.fromkeys([x], 2.0)
    return d[x * 2] * x + e[x] * x * x  # 3x + 2x^2


def _viewed_by_key(x):
    d = {x: x * x}
    return types.MappingProxyType(d)[x] + (1.0 if x in types.MappingProxyType(d) else 0.0)


NESTINGS2 = {"D(D)": lambda f: derivative(derivative(f)), "grad(grad)": lambda f: grad(grad(f)),
             "grad(D)": lambda f: grad(derivative(f)), "D(grad)": lambda f: derivative(grad(f)),
             "hessian": lambda f: hessian(f)}


@ROUTES
@pytest.mark.parametrize("nesting", NESTINGS2)
def test_second_derivatives_of_items_stored_under_differentiated_keys(nesting, route):
    with force_route(route):
        for _ in range(2):
            assert float(NESTINGS2[nesting](_constant_under_a_key)(0.7)) == pytest.approx(4.0)
            assert float(NESTINGS2[nesting](_viewed_by_key)(0.7)) == pytest.approx(2.0)
        assert float(grad(_viewed_by_key)(0.7)) == pytest.approx(1.4)


def _summed_into(p):
    w = np.zeros(2)
    p.reshape(2, 2).sum(0, None, w)
    return w @ w


def _clipped_into(p):
    w = np.zeros(4)
    p.clip(0.0, 1.0, w)
    return w @ p


def _dotted_into(p):
    w = np.zeros(())
    p.dot(p, w)
    return float(w) * p[0]


def _unbound_into(p):
    w = np.zeros(2)
    np.ndarray.mean(p.reshape(2, 2), 1, None, w)
    v = np.zeros(2)
    p.reshape(2, 2).max(1, v)
    return w @ w + v @ v


@ROUTES
@pytest.mark.parametrize("f", [_summed_into, _clipped_into, _dotted_into, _unbound_into],
                         ids=["sum", "clip", "dot", "unbound mean, max"])
def test_an_array_method_given_out_by_position(f, route):
    p = np.array([0.3, 1.2, 0.7, 0.9])
    h = 1e-6
    expected = np.array([(f(p + h * e) - f(p - h * e)) / (2 * h) for e in np.eye(4)])
    _every_reverse_and_forward_api(f, p, expected, route)
