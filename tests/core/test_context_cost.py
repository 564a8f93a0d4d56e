"""A context made per call (``overdub(CountContext(), f, x)``, Cassette's idiom) costs about what
a reused one does (issue #16): what only depends on the class is shared, and a context's
dispatchers pass to a new instance of its class once nothing can reach them any more.

These tests check what that must never share: hooks see their own instance, code that outlives
a run (a generator, a generator expression, a lazy ``map``, a copied ``contextvars.Context``)
keeps reporting to the instance that ran it, each instance keeps its own metadata, in threads
too, and verbs and primitives defined on the class after its first use are seen.  Each scenario
runs at least twice: later runs start with dispatchers a dead instance left behind.  (Costs are
measured by ``benchmarks/bench_core.py``, not here.)
"""

from __future__ import annotations

import contextvars
import copy
import gc
import importlib.util
import math
import operator
import sys
import textwrap
import threading
import weakref
from collections import Counter

import pytest

from overdub import Context, current_context, overdub, recurse
from overdub import _dispatch
from overdub.contexts import CountContext

pooling = pytest.mark.skipif(not _dispatch._POOLING,
                             reason="dispatchers pass between instances on CPython only")


class Recorder(Context):
    """Appends ``(its name, callee)`` to ``log`` for every call and operator."""

    def __init__(self, name: str, log: list) -> None:
        super().__init__(metadata=log)
        self.name = name

    def prehook(self, fn, /, *args, **kwargs):
        self.metadata.append((self.name, fn))


def f(x):
    return x * 2 + 1


def gen(n):
    for i in range(n):
        yield i * 3


def names(log):
    return {name for name, _ in log}


def state_of(ctx):
    """A weak reference to ``ctx``'s dispatch state (to check that one passed to a new
    instance: a strong one would keep it from passing)."""
    return weakref.ref(ctx._overdub_state)


@pooling
def test_a_dead_instances_dispatchers_pass_to_the_next_instance():
    # The mechanism the other tests exercise: without it they would pass trivially.
    for _ in range(2):
        first = Recorder("a", [])
        overdub(first, f, 1)
        state = state_of(first)
        del first
        second = Recorder("b", [])
        overdub(second, f, 1)
        assert second._overdub_state is state()
        held = Recorder("c", [])
        overdub(held, f, 1)  # `second` is alive: its dispatchers stay its own
        assert held._overdub_state is not second._overdub_state
        del second, held  # (their dispatchers go to the pool too, the most recent on top)


@pooling
def test_dispatchers_keep_passing_on_as_the_functions_they_ran_come_and_go():
    # The functions a State rewrote hold references to its cells, counted as they are built
    # and dropped: a lambda made per run dies after it, a function's code is reassigned, the
    # collector empties the pool.  None of this may keep the State from passing on.
    def g(x):
        return x - 1

    original = g.__code__
    try:
        ctx = Recorder("a", [])
        overdub(ctx, f, 1)
        state = state_of(ctx)
        del ctx
        for i in range(4):
            ctx = Recorder(str(i), [])
            assert overdub(ctx, lambda x: f(x) + g(x), i) == 3 * i - (i >= 2)
            assert ctx._overdub_state is state()
            del ctx
            if i == 1:
                g.__code__ = (lambda x: x - 2).__code__
            if i == 2:
                gc.collect()
    finally:
        g.__code__ = original


def test_hooks_of_fresh_instances_see_their_own_instance():
    expected = []
    overdub(Recorder("x", expected), f, 4)
    expected = [fn for _, fn in expected]
    assert expected == [f, operator.mul, operator.add]
    for _ in range(2):
        logs = {name: [] for name in "abc"}
        for name, log in logs.items():
            assert overdub(Recorder(name, log), f, 4) == 9
        for name, log in logs.items():
            assert log == [(name, fn) for fn in expected]


def test_a_reused_instance_sees_the_same_calls_as_fresh_ones():
    log = []
    ctx = Recorder("r", log)
    for _ in range(3):
        assert overdub(ctx, f, 2) == 5
    assert log == [("r", fn) for fn in [f, operator.mul, operator.add] * 3]


def test_a_generator_that_outlives_its_run_reports_to_its_instance():
    for _ in range(2):
        log = []
        numbers = overdub(Recorder("a", log), gen, 3)  # the instance is not kept
        overdub(Recorder("b", log), f, 1)
        del log[:]
        assert list(numbers) == [0, 3, 6]
        assert log and names(log) == {"a"}
        del log[:]
        overdub(Recorder("c", log), f, 1)
        assert names(log) == {"c"}


def test_a_generator_expression_made_in_a_run_reports_to_its_instance():
    for _ in range(2):
        log = []
        lazy = overdub(Recorder("a", log), lambda xs: (x * 2 for x in xs), [1, 2])
        overdub(Recorder("b", log), f, 1)
        del log[:]
        assert list(lazy) == [2, 4]
        assert log == [("a", operator.mul), ("a", operator.mul)]


def test_a_lazy_map_made_in_a_run_reports_to_its_instance():
    for _ in range(2):
        log = []
        lazy = overdub(Recorder("a", log), lambda xs: map(abs, xs), [-1, 2])
        overdub(Recorder("b", log), f, 1)
        del log[:]
        assert list(lazy) == [1, 2]
        assert log == [("a", abs), ("a", abs)]


def test_a_copied_contextvars_context_still_names_the_instance_that_ran():
    for _ in range(2):
        log = []
        copied = overdub(Recorder("a", log), contextvars.copy_context)
        overdub(Recorder("b", log), f, 1)
        assert copied.run(current_context).name == "a"


def test_a_failed_run_leaves_the_next_instances_alone():
    def fails(x):
        raise ValueError(x * 2)

    for _ in range(2):
        log = []
        with pytest.raises(ValueError) as info:
            overdub(Recorder("a", log), fails, 3)
        assert info.value.args == (6,)
        del log[:]
        overdub(Recorder("b", log), f, 1)
        assert names(log) == {"b"}


def test_a_copy_of_an_instance_runs_under_its_own_hooks():
    log = []
    original = Recorder("a", log)
    overdub(original, f, 1)
    twin = copy.copy(original)  # carries the original's dispatch state along in its __dict__
    twin.name = "b"
    del log[:]
    overdub(twin, f, 1)
    assert names(log) == {"b"}
    del log[:]
    overdub(original, f, 1)
    assert names(log) == {"a"}


def test_recurse_outside_a_run_uses_the_instance_it_is_given():
    for _ in range(2):
        log = []
        assert recurse(Recorder("a", log), f, 2) == 5
        assert log == [("a", operator.mul), ("a", operator.add)]
        del log[:]
        numbers = recurse(Recorder("b", log), gen, 2)
        overdub(Recorder("c", []), f, 1)
        assert list(numbers) == [0, 3] and names(log) == {"b"}


def test_fresh_instances_of_one_class_nest():
    def nested(x):
        return overdub(Recorder("inner", log), f, x)

    for _ in range(2):
        log = []
        assert overdub(Recorder("outer", log), nested, 3) == 7
        inner = [fn for name, fn in log if name == "inner"]
        outer = [fn for name, fn in log if name == "outer"]
        assert inner == [f, operator.mul, operator.add]
        # the outer context sees what the inner one executes: its leaf operations
        assert outer[0] is nested and outer.count(operator.mul) == 1
        assert outer.count(operator.add) == 1


def test_each_fresh_counting_context_keeps_its_own_counts():
    for _ in range(2):
        first = CountContext()
        overdub(first, f, 1)
        counts = first.metadata
        del first
        second = CountContext()
        overdub(second, f, 1)
        overdub(second, f, 2)
        assert counts == {f: 1, operator.mul: 1, operator.add: 1}
        assert second.metadata == {f: 2, operator.mul: 2, operator.add: 2}
        assert second.metadata is not counts


def test_threads_with_fresh_instances_see_only_their_own_calls():
    errors = []

    def work(name):
        try:
            for i in range(200):
                log = []
                assert overdub(Recorder(name, log), f, i) == 2 * i + 1
                assert log == [(name, f), (name, operator.mul), (name, operator.add)]
        except BaseException as exc:  # noqa: BLE001 -- reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(name,)) for name in "abcd"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors


def test_a_verb_defined_after_first_use_is_seen_by_old_and_new_instances():
    class Late(Context):
        pass

    held = Late()
    for _ in range(2):
        assert overdub(Late(), f, 2) == 5
    assert overdub(held, f, 2) == 5
    seen = []

    def prehook(self, fn, /, *args, **kwargs):
        seen.append((self, fn))

    Late.prehook = prehook
    try:
        for _ in range(2):
            fresh = Late()
            overdub(fresh, f, 2)
            assert seen == [(fresh, f), (fresh, operator.mul), (fresh, operator.add)]
            del seen[:]
        overdub(held, f, 2)
        assert seen == [(held, f), (held, operator.mul), (held, operator.add)]
    finally:
        del Late.prehook
    del seen[:]
    overdub(Late(), f, 2)
    overdub(held, f, 2)
    assert seen == []


def test_a_primitive_registered_after_first_use_is_seen_by_fresh_instances():
    class Sines(Context):
        pass

    def g(x):
        return math.sin(x)

    for _ in range(2):
        assert overdub(Sines(), g, 0.5) == math.sin(0.5)

    @Sines.primitive(math.sin)
    def _sin(ctx, x):
        return 42.0

    for _ in range(2):
        assert overdub(Sines(), g, 0.5) == 42.0


def test_fresh_contexts_do_not_keep_dead_modules_alive(tmp_path):
    path = tmp_path / "_cost_module.py"
    path.write_text(textwrap.dedent("""
        def f(x):
            return [x * i for i in range(3)]
    """))
    spec = importlib.util.spec_from_file_location("_cost_module", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["_cost_module"] = mod
    spec.loader.exec_module(mod)
    for _ in range(3):
        assert overdub(CountContext(), mod.f, 2) == [0, 2, 4]
        assert overdub(Recorder("a", []), mod.f, 2) == [0, 2, 4]
    refs = [weakref.ref(mod.f), weakref.ref(mod.f.__code__), weakref.ref(mod)]
    del sys.modules["_cost_module"]
    del mod
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


class Point:
    def __init__(self, x):
        self.x = x

    def scaled(self, k):
        return self.x * k


def test_count_context_counts_bound_methods_under_their_function_in_any_mapping():
    # A Counter answers 0 for a missing key: counting must still not store the bound method
    # (the key would keep its instance alive).
    for metadata in ({}, Counter()):
        for _ in range(2):
            point = Point(3)
            ctx = CountContext(metadata=metadata.copy())
            assert overdub(ctx, lambda: point.scaled(2) + point.scaled(3)) == 15
            assert ctx.metadata[Point.scaled] == 2
            assert not any(type(key) is type(point.scaled) for key in ctx.metadata)
            alive = weakref.ref(point)
            del point
            gc.collect()
            assert alive() is None


def test_count_context_filters_by_type_across_operand_counts_and_keywords():
    def ops(i, x):
        return i + i, x + i, -i, pow(i, 2, 5), int("3", base=10), divmod(i, 1)

    for _ in range(2):
        ctx = CountContext(types=int)
        assert overdub(ctx, ops, 2, 1.5) == (4, 3.5, -2, 4, 3, (2, 0))
        assert ctx.counts[operator.add] == 1  # 2 + 2, not 1.5 + 2
        assert ctx.counts[operator.neg] == 1
        assert ctx.counts[pow] == 1 and ctx.counts[divmod] == 1
        assert ctx.counts[int] == 0 and ctx.counts[ops] == 0
        everything = CountContext()
        overdub(everything, ops, 2, 1.5)
        assert everything.counts[operator.add] == 2 and everything.counts[int] == 1
        assert everything.counts[ops] == 1


class _CountingAsThePrehookSays(CountContext):
    """CountContext's prehook for every call and operator: no form for operators (the
    subclass's prehook function does not name one), so rewritten code calls this."""

    def prehook(self, fn, /, *args, **kwargs):
        super().prehook(fn, *args, **kwargs)


def _operators_of_every_arity(x, k):
    total = -x + x * 2 - (x ** 2) / 3 + k[0] + abs(x)
    items = [1, 2, 3]
    items[0] = total
    total += items[1] + (1 if x in items else 0) + (x < 4) + (~k[1])
    return total, len(items), str(total)[:3]


@pytest.mark.parametrize("make", [
    lambda cls: cls(), lambda cls: cls(types=int), lambda cls: cls(types=(float, int)),
    lambda cls: cls(metadata=Counter())], ids=["plain", "ints", "numbers", "Counter"])
def test_counting_an_operator_by_its_operator_form_counts_as_the_prehook(make):
    # CountContext's prehook names a cheaper form of itself for operators (no keywords):
    # what it counts must be what the prehook itself counts, with every option
    fast, slow = make(CountContext), make(_CountingAsThePrehookSays)
    assert overdub(fast, _operators_of_every_arity, 1.5, [2, 3]) == \
        overdub(slow, _operators_of_every_arity, 1.5, [2, 3])
    assert fast.counts == slow.counts and fast.counts
    assert operator.mul in fast.counts or fast.types is int
