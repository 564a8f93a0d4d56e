"""Golden rewrites: what the overdub rewrite turns a few tiny functions into.

Each test runs the function for real under a context (so the rewrite is the one the pipeline
produces: source located, passes, ``Overdubber``, compile) and captures the tree handed to the
compiler, then compares ``ast.unparse`` of it with the expected text.  The text is meant for
reviewers: ``@od`` is the call dispatcher, ``@op1``/``@op2``/``@op3`` the operator dispatchers by
arity, ``@mul`` and friends the ``operator`` functions, ``@t1``... temporaries.  When the rewrite
changes on purpose, update the text here and read the diff.

Each test uses a context class of its own, so the rewrite cache is cold for it.
"""

from __future__ import annotations

import ast
import functools
import inspect
import math
import sys
import textwrap

import pytest

import overdub._cache as overdub_cache
from overdub import Context, overdub
from overdub._context import _state


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    """These tests watch the rewrite itself: nothing is taken from the on-disk cache."""
    monkeypatch.setenv("OVERDUB_CACHE", "off")


@pytest.fixture
def captured(monkeypatch):
    """Every tree ``_cache._compile`` compiles: ``(code name, ast.unparse(tree), tree)``."""
    seen: list[tuple[str, str, ast.AST]] = []
    real_compile = overdub_cache._compile

    def spy(code, located, node, *args, **kwargs):
        seen.append((code.co_name, ast.unparse(node), node))
        return real_compile(code, located, node, *args, **kwargs)

    monkeypatch.setattr(overdub_cache, "_compile", spy)
    return seen


def rewritten_text(captured: list, name: str) -> str:
    """The last tree compiled for ``name``: the rewrite (an earlier compile of the unchanged
    source, if any, is the stale-source check)."""
    texts = [text for code_name, text, _ in captured if code_name == name]
    assert texts, f"{name} was not rewritten"
    return texts[-1]


def golden(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def _full_context():
    """A fresh context class with both hooks: everything goes through the dispatchers."""

    class Full(Context):
        def prehook(self, fn, /, *args, **kwargs):
            pass

        def posthook(self, out, fn, /, *args, **kwargs):
            pass

    return Full()


# -- the tiny functions -------------------------------------------------------------------------
def scaled_sine(x, y):
    return math.sin(x) * y


def bump_item(d, k, v):
    d[k] += v
    return d


def between(a, b, c):
    return a < b < c


def store_and_delete(o, xs):
    o.total = xs[0] + o.n
    del xs[1:]
    return -o.total


class Counter:
    def __init__(self):
        self.__count = 0

    def bump(self, by):
        self.__count += by
        return self.__count


class _Obj:
    n = 2


def test_golden_call_and_operator(captured):
    assert overdub(_full_context(), scaled_sine, 0.5, 2.0) == scaled_sine(0.5, 2.0)
    assert rewritten_text(captured, "scaled_sine") == golden("""
        def scaled_sine(x, y):
            return @op2(@mul, @od(@op2(@getattr, math, 'sin'), x), y)
    """)


def test_golden_augmented_subscript_evaluates_target_once(captured):
    assert overdub(_full_context(), bump_item, {1: 2}, 1, 3) == {1: 5}
    assert rewritten_text(captured, "bump_item") == golden("""
        def bump_item(d, k, v):
            @t1 = d
            @t2 = k
            @t3 = @op2(@getitem, @t1, @t2)
            @t4 = @op2(@iadd, @t3, v)
            @op3(@setitem, @t1, @t2, @t4)
            del @t1, @t2, @t3, @t4
            return d
    """)


def test_golden_chained_comparison_short_circuits(captured):
    assert overdub(_full_context(), between, 1, 2, 3) is True
    assert rewritten_text(captured, "between") == golden("""
        def between(a, b, c):
            return @op2(@lt, a, (@t1 := b)) and @op2(@lt, @t1, c)
    """)


def test_golden_attribute_store_and_slice_delete(captured):
    obj, xs = _Obj(), [1, 2, 3]
    assert overdub(_full_context(), store_and_delete, obj, xs) == -3
    assert xs == [1] and obj.total == 3
    assert rewritten_text(captured, "store_and_delete") == golden("""
        def store_and_delete(o, xs):
            @t1 = @op2(@add, @op2(@getitem, xs, 0), @op2(@getattr, o, 'n'))
            @t2 = o
            @op3(@setattr, @t2, 'total', @t1)
            del @t1, @t2
            @t3 = xs
            @t4 = @slice(1, None, None)
            @op2(@delitem, @t3, @t4)
            del @t3, @t4
            return @op1(@neg, @op2(@getattr, o, 'total'))
    """)


def test_golden_private_names_are_mangled_with_the_class(captured):
    assert overdub(_full_context(), Counter().bump, 2) == 2
    assert rewritten_text(captured, "bump") == golden("""
        def bump(self, by):
            @t1 = self
            @t2 = @op2(@getattr, @t1, '_Counter__count')
            @t3 = @op2(@iadd, @t2, by)
            @op3(@setattr, @t1, '_Counter__count', @t3)
            del @t1, @t2, @t3
            return @op2(@getattr, self, '_Counter__count')
    """)


def test_golden_observe_mode_operator(captured):
    """A prehook-only context: the hook is called inline and C operands run natively."""

    class Observe(Context):
        def prehook(self, fn, /, *args, **kwargs):
            pass

    assert overdub(Observe(), between, 1, 2, 3) is True
    assert rewritten_text(captured, "between") == golden("""
        def between(a, b, c):
            return (a < @t2 if @pre(@lt, a, (@t2 := (@t1 := b))) is None and @flat and (@type(a) in @S) and (@type(@t2) in @S) else @slow2(@lt, a, @t2)) and (@t1 < c if @pre(@lt, @t1, c) is None and @flat and (@type(@t1) in @S) and (@type(c) in @S) else @slow2(@lt, @t1, c))
    """)  # noqa: E501


def calls_only(x, y, d, k):
    return math.sin(x) * y + d[k].real - (x < y)


def test_call_only_context_leaves_operators_subscripts_attributes_untouched(captured):
    class SinOnly(Context):
        pass

    @SinOnly.primitive(math.sin)
    def _sin(ctx, x):
        return 10.0

    ctx = SinOnly()
    assert overdub(ctx, calls_only, 1.0, 2.0, {1: 3}, 1) == 10.0 * 2.0 + 3 - 1
    assert _state(ctx).categories == {"call"}
    assert rewritten_text(captured, "calls_only") == golden("""
        def calls_only(x, y, d, k):
            return @od(math.sin, x) * y + d[k].real - (x < y)
    """)


def test_every_synthesised_node_has_a_user_position(captured):
    """Nodes we add carry the position of the user node they replace (no line 0, no line
    outside the function)."""

    for fn, args in ((bump_item, ({1: 2}, 1, 3)), (store_and_delete, (_Obj(), [1, 2, 3])),
                     (between, (1, 2, 3)), (Counter().bump, (1,))):
        captured.clear()
        overdub(_full_context(), fn, *args)
        first = fn.__code__.co_firstlineno
        last = first + len(inspect.getsource(fn).splitlines()) - 1
        tree = [node for name, _, node in captured if name == fn.__name__][-1]
        for node in ast.walk(tree):
            if "lineno" in node._attributes and node is not tree:
                assert first <= node.lineno <= last, (fn.__name__, ast.dump(node))
                assert node.end_lineno is not None and node.end_lineno <= last


def test_rewrite_is_deterministic(captured):
    """Two cold rewrites of the same function for the same context shape give the same text."""
    overdub(_full_context(), store_and_delete, _Obj(), [1, 2, 3])
    overdub(_full_context(), store_and_delete, _Obj(), [1, 2, 3])  # a new class: cold again
    texts = [text for name, text, _ in captured if name == "store_and_delete" and "@" in text]
    assert len(texts) == 2 and texts[0] == texts[1]


def test_bare_context_does_not_rewrite(monkeypatch):
    calls = []
    real_rewrite = overdub_cache._rewrite

    def spy(code, *args, **kwargs):
        calls.append(code.co_name)
        return real_rewrite(code, *args, **kwargs)

    monkeypatch.setattr(overdub_cache, "_rewrite", spy)

    def running_code():
        return sys._getframe().f_code

    assert overdub(Context(), scaled_sine, 0.5, 2.0) == scaled_sine(0.5, 2.0)
    assert overdub(Context(), running_code) is running_code.__code__
    assert calls == []


def _same(fn):
    return fn


def decorated_inside(seen):
    @functools.wraps(seen)
    @_same
    def helper():
        return 1

    return helper


def test_golden_decorators_are_calls_the_context_sees(captured):
    out = overdub(_full_context(), decorated_inside, len)
    assert out.__wrapped__ is len and out.__name__ == "len"  # functools.wraps applied
    assert rewritten_text(captured, "decorated_inside") == golden("""
        def decorated_inside(seen):
            @t1 = @od(@op2(@getattr, functools, 'wraps'), seen)
            @t2 = _same

            def helper():
                return 1
            helper = @od(@t1, @od(@t2, helper))
            del @t1, @t2
            return helper
    """)
