"""Found by an outside tester (session 12): the core's findings.

1. ``match x: case int(n):`` with ``x`` tagged took another branch: class patterns checked
   ``isinstance`` natively on the wrapper.  Under tags a ``match`` with class patterns matches
   the value under the tags, and the names bound to the very subject get it back tagged.
2. A lambda whose default is another lambda on the same line ran natively, "its source changed
   after it was compiled": the check compiled it and took the default's code for its own.
3. A tagged value's wrapper showed in error messages (``'Tagged' object is not callable``,
   ``must be a mapping, not Tagged``) and a failing ``*x``, ``for``, unpacking gave ``iter``'s
   message at the iterable, not the statement's own at the statement's position.
4. A pass configured through ``__slots__`` got another configuration's cached rewrite.
5. A tagged value stored by syntax the context does not see (a class body, a default) escapes
   the run as the wrapper: used outside, it raises ``TagError``, never a wrong number.
6. An exception leaving the run held the wrapper in its arguments.
8. Closing an unstarted coroutine that ``overdub`` returned warned "never awaited".
9. A failing ``assert`` under a hooking context had the whole statement's columns (3.11).
10. ``Context(passes=[T])`` with ``T`` a NodeTransformer class failed only when first run.

PYTEST_DONT_REWRITE: the asserts of the functions run here are compared with plain Python's.
"""

from __future__ import annotations

import ast
import gc
import operator
import traceback
import warnings

import pytest

from overdub import Context, TagError, has_metadata, overdub, tag, untag
from overdub.contexts import CountContext, TraceContext


def _outcome(thunk):
    """(result) or (exception type, message, line, first column, last column) of the
    innermost frame of this file: what plain Python and a context must agree on."""
    try:
        return ("ok", thunk())
    except Exception as exc:
        frame = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == __file__][-1]
        return (type(exc), str(exc), frame.lineno, frame.colno, frame.end_colno)


# -- 1: match with class patterns on a tagged subject ---------------------------------------

class _Point:
    __match_args__ = ("x",)

    def __init__(self, x):
        self.x = x


def _classify(x):
    match x:
        case int(n):
            return ("int", n)
        case float() | complex() as v if v != 0:
            return ("number", v)
        case {"k": int(n)}:
            return ("mapping", n)
        case [int(a), *rest]:
            return ("sequence", a, rest)
        case _Point(x=int(q)):
            return ("point", q)
        case other:
            return ("other", other)


@pytest.mark.parametrize("value, whole", [(3, True), (2.5, True), (0.0, True), ({"k": 4}, False),
                                          ([1, 2], False), ("s", True)])
def test_match_class_patterns_see_the_value_under_the_tags(value, whole):
    ctx = Context()
    out = overdub(ctx, _classify, tag(value, ctx, "m"))
    assert [untag(v, ctx) for v in out] == list(_classify(value))
    # a name bound to the subject itself is the tagged subject: its metadata follows
    assert has_metadata(out[1], ctx) is whole
    assert overdub(ctx, _classify, tag(value, ctx, "m"))[0] == out[0]  # (cached rewrite)


def test_match_on_a_tagged_point_and_a_plain_subject():
    ctx = Context()
    assert overdub(ctx, _classify, tag(_Point(5), ctx, "m")) == ("point", 5)
    tag(0, ctx, "start tagging")
    assert overdub(ctx, _classify, [7, 8]) == ("sequence", 7, [8])


# -- 2: lambdas whose defaults are lambdas on the same line ---------------------------------

_module_lambda = lambda x, f=lambda z: z - 1: f(x)  # noqa: E731


def _lambdas(x):
    h = lambda a, b=lambda c: c + 1: b(a)  # noqa: E731
    k = lambda a=(lambda: 5)(): a + x  # noqa: E731
    m = lambda a, *, b=lambda c: c * 2: b(a) + 1  # noqa: E731
    return h(x) + k() + m(x)


def test_lambda_with_a_lambda_default_is_rewritten():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ctx = CountContext()
        assert overdub(ctx, _lambdas, 3) == _lambdas(3) == 19
        assert ctx.counts[operator.add] == 5 and ctx.counts[operator.mul] == 1
        ctx = CountContext()
        assert overdub(ctx, _module_lambda, 3) == 2
        assert ctx.counts[operator.sub] == 1


class _Hundred(ast.NodeTransformer):
    def visit_Constant(self, node):
        return ast.copy_location(ast.Constant(100), node) if node.value == 1 else node


def _lambdas_under_a_pass(x):
    h = lambda a, b=lambda c: c + 1: b(a) + 1  # noqa: E731
    return h(x)


def test_lambdas_on_one_line_keep_the_tree_a_pass_made():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert overdub(Context(passes=[_Hundred()]), _lambdas_under_a_pass, 3) == 203


# -- 3: error messages and positions name the value, not the wrapper -------------------------

def _call(x):
    return x()


def _double_star(x):
    return dict(**x)


def _double_star_after(x):
    return dict(a=1, **x)


def _star(x):
    return max(*x)


def _star_after(x):
    return max(1, *x)


def _loop(x):
    for _ in x:
        pass


def _list_display(x):
    return [*x]


def _dict_display(x):
    return {**x}


def _unpack(x):
    a, b = x
    return a, b


def _comprehension(x):
    return [v for v in x]


@pytest.mark.parametrize("fn", [_call, _double_star, _double_star_after, _star, _star_after,
                                _loop, _list_display, _dict_display, _unpack, _comprehension])
def test_errors_of_tagged_values_are_plain_pythons(fn):
    plain = _outcome(lambda: fn(3))
    assert plain[0] is TypeError
    ctx = Context()
    assert _outcome(lambda: overdub(ctx, fn, tag(3, ctx, "m"))) == plain
    counting = CountContext()
    assert _outcome(lambda: overdub(counting, fn, tag(3, counting, "m"))) == plain
    assert _outcome(lambda: overdub(TraceContext(), fn, 3)) == plain


def test_tagged_callables_and_iterables_still_work():
    ctx = Context()
    assert overdub(ctx, _call, tag(lambda: 4, ctx, "m")) == 4
    assert overdub(ctx, _star, tag([1, 5, 2], ctx, "m")) == 5
    assert overdub(ctx, _double_star, tag({"a": 1}, ctx, "m")) == {"a": 1}
    assert overdub(ctx, _unpack, tag((1, 2), ctx, "m")) == (1, 2)


# -- 4: a pass's configuration in __slots__ --------------------------------------------------

class _SlotConstant(ast.NodeTransformer):
    __slots__ = ("k",)

    def __init__(self, k):
        self.k = k

    def visit_Constant(self, node):
        if node.value == 1 and type(node.value) is int:
            return ast.copy_location(ast.Constant(self.k), node)
        return node


class _Holder:
    """A value whose equality says nothing of what the pass does with it."""

    def __init__(self, k):
        self.k = k

    def __eq__(self, other):
        return True

    __hash__ = object.__hash__


class _HeldConstant(_SlotConstant):
    __slots__ = ()

    def visit_Constant(self, node):
        if node.value == 1 and type(node.value) is int:
            return ast.copy_location(ast.Constant(self.k.k), node)
        return node


def _one():
    return 1


def test_pass_configuration_includes_slots_and_value_types():
    assert [overdub(Context(passes=[_SlotConstant(k)]), _one) for k in (10, 20, 10)] == \
        [10, 20, 10]
    # equal configurations that are not alike: the literals differ
    outs = [overdub(Context(passes=[_SlotConstant(k)]), _one) for k in (1.0, True, 0.0, -0.0)]
    assert [repr(o) for o in outs] == ["1.0", "True", "0.0", "-0.0"]


def test_pass_configuration_that_cannot_be_read_is_not_cached():
    shared = _HeldConstant(_Holder(10))
    assert overdub(Context(passes=[shared]), _one) == 10
    shared.k.k = 30  # changed in place: another context does not reuse the rewrite
    assert overdub(Context(passes=[shared]), _one) == 30
    assert overdub(Context(passes=[_HeldConstant(_Holder(40))]), _one) == 40


# -- 5: values stored by syntax the context does not see ------------------------------------

def _stash(x):
    class Kept:
        a = x

    def default(d=x):
        return d

    return Kept, default


def test_escaped_wrappers_raise_outside_never_a_wrong_number():
    ctx = Context()
    kept, default = overdub(ctx, _stash, tag(3, ctx, "m"))
    with pytest.raises(TagError, match="outside that context"):
        kept.a + 1
    with pytest.raises(TagError, match="outside that context"):
        default() + 1


# -- 6: exceptions leaving the run hold plain values ----------------------------------------

def _check(x):
    assert x < 0, ("bad", x)


def _raise(x):
    raise ValueError(x, [x], {"k": x})


def test_exception_arguments_are_plain_after_the_run():
    for fn in (_check, _raise):
        try:
            fn(3)
        except Exception as exc:
            plain = repr(exc)
        ctx = Context()
        with pytest.raises((AssertionError, ValueError)) as info:
            overdub(ctx, fn, tag(3, ctx, "m"))
        assert repr(info.value) == plain


# -- 8: an unstarted coroutine closed ----------------------------------------------------------

async def _coroutine():
    return 1


def test_closing_an_unstarted_coroutine_is_silent():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        overdub(CountContext(), _coroutine).close()
        gc.collect()
    assert [str(w.message) for w in caught] == []


def test_a_coroutine_returned_by_overdub_still_runs():
    import asyncio
    assert asyncio.run(overdub(CountContext(), _coroutine)) == 1


# -- 9: a failing assert's position ------------------------------------------------------------

class _Prehook(Context):
    def prehook(self, fn, /, *args, **kwargs):
        pass


class _BothHooks(_Prehook):
    def posthook(self, out, fn, /, *args, **kwargs):
        pass


def _asserts(x):
    assert x < 0, "neg"


def _asserts_chained(x):
    assert 0 < x < 2


def _asserts_a_call(x):
    assert abs(x) < 0


@pytest.mark.parametrize("fn", [_asserts, _asserts_chained, _asserts_a_call, _check])
def test_failing_assert_position_is_plain_pythons(fn):
    plain = _outcome(lambda: fn(3))
    assert plain[0] is AssertionError
    for ctx in (_Prehook(), _BothHooks(), TraceContext(), CountContext()):
        assert _outcome(lambda: overdub(ctx, fn, 3)) == plain
        assert _outcome(lambda: overdub(ctx, fn, 3)) == plain  # (cached rewrite)
    ctx = Context()
    assert _outcome(lambda: overdub(ctx, fn, tag(3, ctx, "m"))) == plain


def test_passing_assert_under_hooks():
    ctx = TraceContext()
    assert overdub(ctx, _asserts, -1) is None


# -- 10: a NodeTransformer class given as a pass ---------------------------------------------

def test_a_pass_class_is_refused_at_construction():
    with pytest.raises(TypeError, match=r"_SlotConstant is an ast.NodeTransformer class, not "
                                        r"an instance: did you mean _SlotConstant\(\)\?"):
        Context(passes=[_SlotConstant])
