"""Found by an outside tester (session 13): the core's findings.

1. (tests/core/test_variants.py) An edit inside code nested in a function -- a lambda, a
   ``def``, a comprehension, a class body -- went unnoticed: the context ran the new text.
2. A tag made during a run, in a frame rewritten before tags started (observe mode: a
   prehook only), was stored plain by ``list.append``/``insert`` and NumPy element writes after
   it: the metadata was lost.
3. ``@opaque`` on a class was accepted, but its ``__init__`` ran under the context.
4. A pass changed between two runs of the same context instance kept its old rewrite.
5. ``CountContext(types="int")``, ``CountContext(metadata=5)`` and ``TraceContext(metadata={})``
   failed only when run, in the hook; ``copy.deepcopy`` and ``pickle`` of a context that had
   run failed on its dispatch state.
6. A hook's error note named operators by their C module (``_operator.add``).
7. A subcommand's usage line repeated the whole command's usage.
"""

from __future__ import annotations

import ast
import copy
import math
import operator
import pickle

import numpy as np
import pytest

from overdub import Context, has_metadata, metadata, opaque, overdub, tag
from overdub._cli import main as cli_main
from overdub.contexts import CountContext, TraceContext


class _EmptyPrehook(Context):
    def prehook(self, fn, *args, **kwargs):
        pass


@pytest.mark.parametrize("cls", [CountContext, _EmptyPrehook], ids=["count", "prehook"])
def test_a_tag_made_during_the_first_run_is_kept_by_later_stores(cls):
    ctx = cls()

    def f(x):
        t = tag(x, ctx, "m")
        held = []
        held.append(t)
        held.insert(0, t)
        a = np.zeros(2)
        a[1] = t
        d = {"k": t}
        return [has_metadata(v, ctx) for v in (held[0], held[1], a[1], d["k"])], \
            metadata(a[1], ctx)

    for _ in range(2):  # the first run (tags start inside it) and a second
        assert overdub(ctx, f, 1.5) == ([True] * 4, "m")


def test_an_opaque_class_is_constructed_natively():
    @opaque
    class Leaf:
        def __init__(self):
            self.v = math.floor(2.5)

    class Sub(Leaf):
        def __init__(self):
            super().__init__()
            self.w = math.ceil(2.5)

    ctx = CountContext()
    assert overdub(ctx, lambda: (Leaf().v, Sub().w)) == (2, 3)
    assert ctx.counts[Leaf] == 1 and ctx.counts[Sub] == 1
    assert ctx.counts[math.floor] == 0 and ctx.counts[math.ceil] == 0
    assert ctx.counts[Leaf.__init__] == 0


class _Replace(ast.NodeTransformer):
    def __init__(self, value):
        self.value = value

    def visit_Constant(self, node):
        if node.value == 10:
            return ast.copy_location(ast.Constant(self.value), node)
        return node


def _ten():
    return 10


def test_a_pass_changed_between_runs_is_taken_up():
    ctx = Context(passes=[_Replace(50)])
    assert overdub(ctx, _ten) == 50
    ctx.passes[0].value = 60
    assert overdub(ctx, _ten) == 60
    assert overdub(ctx, _ten) == 60
    assert overdub(Context(passes=[_Replace(50)]), _ten) == 50


@pytest.mark.parametrize("make, message", [
    (lambda: CountContext(types="int"), r"CountContext\(types=\.\.\.\).*got 'int'"),
    (lambda: CountContext(types=[int]), r"CountContext\(types=\.\.\.\)"),
    (lambda: CountContext(metadata=5), r"CountContext\(metadata=\.\.\.\).*got int"),
    (lambda: TraceContext(metadata={}), r"TraceContext\(metadata=\.\.\.\).*got dict"),
])
def test_bad_settings_are_refused_when_the_context_is_made(make, message):
    with pytest.raises(TypeError, match=message):
        make()


def test_valid_settings_are_accepted():
    ctx = CountContext(types=int | float)
    overdub(ctx, lambda: 2 * 3.0 + len("ab"))
    assert ctx.counts[operator.mul] == 1 and ctx.counts[len] == 0


@pytest.mark.parametrize("duplicate", [copy.copy, copy.deepcopy,
                                       lambda c: pickle.loads(pickle.dumps(c))],
                         ids=["copy", "deepcopy", "pickle"])
def test_a_copy_of_a_context_that_ran_is_a_context_of_its_own(duplicate):
    ctx = CountContext()
    overdub(ctx, math.sin, 1.0)
    twin = duplicate(ctx)
    assert overdub(twin, math.cos, 0.0) == 1.0
    assert twin.counts[math.cos] == 1 and twin.counts[math.sin] == 1
    assert overdub(ctx, math.sin, 1.0) == math.sin(1.0)
    trace = TraceContext()
    overdub(trace, math.sin, 1.0)
    copied = duplicate(trace)
    overdub(copied, math.cos, 1.0)
    assert len(trace.trace) == 1 + (duplicate is copy.copy) and len(copied.trace) == 2


def test_a_hook_error_names_the_operator_as_users_know_it():
    class Failing(Context):
        def posthook(self, out, fn, *args, **kwargs):
            raise ValueError("no")

    with pytest.raises(ValueError) as caught:
        overdub(Failing(), lambda a: a + 1, 1)
    assert caught.value.__notes__ == [
        "(raised in Failing.posthook while handling a call of operator.add)"]


def test_a_subcommand_usage_line_names_the_subcommand(capsys):
    assert cli_main(["trace", "math:sqrt", "2", "--depth", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: python -m overdub trace [-h]"), err
    assert "{trace,count,log}" not in err
