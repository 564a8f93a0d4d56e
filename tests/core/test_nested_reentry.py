"""Nesting that outlives a run or comes back to a running context (session 12).

- A context entered inside a context that runs inside it (``A -> B -> A``, the same instance of
  ``A`` twice): one set of dispatchers for both runs of ``A`` had one parent, so ``B`` ran
  what the inner ``A`` executed through ``A``, whose parent was ``B`` again: a RecursionError.
  The inner run now has dispatchers of its own, and every context sees what a fresh instance
  of ``A`` inside ``B`` would let it see.
- Code a context rewrote that runs after the run ended (a generator made in a nested run,
  resumed in the enclosing one) reaches the context running at that moment, as a nested run's
  leaf calls reach its parent; before, it ran natively and the enclosing context missed it.
"""

import operator

import pytest

from overdub import Context, Tagged, TagError, overdub, tag, untag


class Pre(Context):
    """Records each call it intercepts (a prehook: everything is intercepted)."""

    def prehook(self, fn, /, *args, **kwargs):
        self.metadata.append(getattr(fn, "__name__", "?"))


class Post(Context):
    def posthook(self, out, fn, /, *args, **kwargs):
        self.metadata.append(getattr(fn, "__name__", "?"))


class Table(Context):
    """Intercepts calls only (a primitive), no hook."""


@Table.primitive(abs)
def _abs(ctx, x):
    ctx.metadata.append("abs")
    return abs(x)


def f(v):
    return abs(v * 2 - 10) + 1


def _nested_thrice(outer, middle, inner, v):
    return overdub(outer, lambda w: overdub(middle, lambda u: overdub(inner, f, u), w), v)


@pytest.mark.parametrize("first, second", [(Pre, Post), (Post, Pre), (Pre, Table),
                                           (Table, Pre), (Pre, Pre)])
def test_a_context_re_entered_inside_a_context_it_encloses(first, second):
    """``a -> b -> a`` gives f's result and the records a fresh instance of ``a`` inside ``b``
    gives (each context seeing the same calls), first and repeated, after the contexts were
    nested the other ways too (which once widened for good what they intercept)."""
    a, b = first(metadata=[]), second(metadata=[])
    assert overdub(b, lambda u: overdub(a, f, u), 3) == f(3)  # a inside b
    assert overdub(a, lambda u: overdub(b, f, u), 3) == f(3)  # b inside a
    for _ in range(3):
        a.metadata.clear()
        b.metadata.clear()
        assert _nested_thrice(a, b, a, 3) == f(3)  # (a RecursionError before)
        fresh_a, fresh_b, fresh_inner = (first(metadata=[]), second(metadata=[]),
                                         first(metadata=[]))
        assert _nested_thrice(fresh_a, fresh_b, fresh_inner, 3) == f(3)
        assert sorted(a.metadata) == sorted(fresh_a.metadata + fresh_inner.metadata)
        assert b.metadata == fresh_b.metadata
        assert "mul" in a.metadata or first is Table


def test_the_outer_run_goes_on_after_the_inner_one():
    """The outer run's own operations after the inner run returned are its own again."""
    a, b = Pre(metadata=[]), Post(metadata=[])

    def outer(v):
        inner = overdub(b, lambda u: overdub(a, f, u), v)
        a.metadata.append("--")
        return operator.sub(inner, v)

    for _ in range(2):
        a.metadata.clear()
        b.metadata.clear()
        assert overdub(a, outer, 3) == f(3) - 3
        assert a.metadata[a.metadata.index("--") + 1:] == ["getattr", "sub"]
        assert "sub" in b.metadata and b.metadata.count("sub") == 1  # (f's own only)


class Forwarding(Context):
    def fallback(self, fn, /, *args, **kwargs):
        return super().fallback(fn, *args, **kwargs)


class Tagging(Context):
    pass


def test_re_entry_refused_where_the_runs_cannot_be_kept_apart():
    """A context whose verbs may read the run's parent (its own ``fallback`` calling the
    default) or that tags values: a clear error at the re-entry, naming the nesting."""
    forwarding, post = Forwarding(), Post(metadata=[])
    with pytest.raises(RuntimeError, match="Forwarding.*overrides fallback.*similar"):
        _nested_thrice(forwarding, post, forwarding, 3)
    assert _nested_thrice(forwarding, post, forwarding.similar(), 3) == f(3)
    tagging = Tagging()
    tag(1.0, tagging, "meta")
    with pytest.raises(RuntimeError, match="Tagging.*tags values"):
        _nested_thrice(tagging, post, tagging, 3)
    assert overdub(tagging, f, 3) == f(3)  # (the context is usable after)


def _numbers(v):
    yield operator.mul(v, 2)
    yield abs(operator.sub(v, 10))
    yield operator.add(v, 1)


def _consume_nested(outer, middle, held, v):
    """``held`` consumed by one next() inside ``middle`` inside ``outer``, between two of the
    outer run's own operations."""
    def run(w):
        before = operator.mul(w, 3)
        item = overdub(middle, lambda: next(held))
        return operator.add(before, item)
    return overdub(outer, run, v)


@pytest.mark.parametrize("first, second", [(Pre, Post), (Post, Pre), (Table, Pre), (Pre, Table),
                                           (Pre, Pre)])
def test_a_generator_resumed_inside_a_context_inside_its_own(first, second):
    """A generator ``a`` returned, resumed inside ``b`` inside ``a`` (refused with a
    RuntimeError before, which also ended it): the step is a run of ``a`` nested in ``b``,
    as if another instance had made the generator, and the generator goes on after."""
    for _ in range(2):
        a, b = first(metadata=[]), second(metadata=[])
        maker, outer, fresh_b = first(metadata=[]), first(metadata=[]), second(metadata=[])
        held, fresh_held = overdub(a, _numbers, 4), overdub(maker, _numbers, 4)
        assert next(held) == next(fresh_held) == 8  # (inside no run)
        a.metadata.clear()
        maker.metadata.clear()
        assert _consume_nested(a, b, held, 5) == _consume_nested(outer, fresh_b, fresh_held,
                                                                 5) == 21
        assert sorted(a.metadata) == sorted(maker.metadata + outer.metadata)
        assert b.metadata == fresh_b.metadata
        assert "sub" in a.metadata or first is Table
        assert list(held) == list(fresh_held) == [5]  # (it goes on: before, it was over)
        assert _consume_nested(a, b, iter([7]), 1) == 10  # (the contexts work as before)


def test_a_coroutine_resumed_inside_a_context_inside_its_own():
    async def work(v):
        return abs(operator.sub(v, 10))

    a, b, maker, outer = Pre(metadata=[]), Post(metadata=[]), Pre(metadata=[]), Pre(metadata=[])
    results = []
    for ctx, coroutine in ((a, overdub(a, work, 3)), (outer, overdub(maker, work, 3))):
        with pytest.raises(StopIteration) as stop:
            overdub(ctx, lambda: overdub(b, lambda: coroutine.send(None)))
        results.append(stop.value.value)
    assert results == [7, 7]
    assert sorted(a.metadata) == sorted(maker.metadata + outer.metadata)


class Overriding(Context):
    def is_primitive(self, fn, /, *args, **kwargs):
        return super().is_primitive(fn, *args, **kwargs)


class Tags(Context):
    pass


@pytest.mark.parametrize("make", [Overriding, Tags])
def test_a_generator_resumed_inside_a_context_inside_its_own_refused(make):
    """Where the two runs cannot be kept apart (an override that may call a default, a
    context that tags): a RuntimeError before any of the generator's code runs."""
    a, ran = make(), []

    def numbers():
        ran.append(1)
        yield 1
        ran.append(2)
        yield 2

    held = overdub(a, numbers)
    if make is Tags:
        tag(1.0, a, "meta")
    assert next(held) == 1 and ran == [1]
    with pytest.raises(RuntimeError, match=f"returned, resumed inside Post, which runs inside "
                                           f"that same {make.__name__} instance"):
        overdub(a, lambda: overdub(Post(metadata=[]), lambda: next(held)))
    assert ran == [1]  # (refused before its code ran)
    assert overdub(a, lambda: list(overdub(a, numbers))) == [1, 2]  # (usable after)


def _tags_inner(ctx, inner, v):
    """In a run of ``ctx``: a value ``inner`` tagged inside a CountContext inside ``ctx``,
    and what ``ctx`` reads of it."""
    from overdub import has_metadata, metadata
    from overdub.contexts import CountContext

    def run(w):
        t = overdub(CountContext(), lambda u: overdub(inner, lambda x: tag(x, inner, "inner"),
                                                      u), w)
        return has_metadata(t, ctx), (metadata(t, ctx) if has_metadata(t, ctx) else None)
    return overdub(ctx, run, v)


def test_a_first_tag_in_an_inner_run_of_the_same_instance_is_refused():
    """``a -> b -> a`` where the inner run tags first (refused at the inner overdub only where
    the outer run had tagged already): the outer run read the inner run's tag as its own
    (``(True, 'inner')`` where a fresh inner instance gives ``(False, None)``)."""
    a = Tags()
    assert _tags_inner(a, a.similar(), 3.0) == (False, None)
    with pytest.raises(RuntimeError, match="tag.*Tags that runs at two levels.*inside "
                                           "CountContext.*similar"):
        _tags_inner(a, a, 3.0)
    assert _tags_inner(a, a.similar(), 3.0) == (False, None)  # (usable after, tagging too)
    t = tag(2.0, a, "own")
    assert overdub(a, lambda x: untag(x, a) * 2, t) == 4.0


def test_a_first_tag_made_by_a_primitive_at_two_levels_is_refused():
    """A primitive that tags, run by both runs of one instance (the inner run's own calls and,
    through the context in between, what that one executes): refused at the first tag."""
    class Marks(Context):
        pass

    @Marks.primitive(abs)
    def _marks_abs(ctx, x):
        tag(x, ctx, "outer")
        return abs(x)

    def nested(outer, inner):
        return overdub(outer, lambda v: overdub(Table(metadata=[]),
                                                lambda u: overdub(inner, f, u), v), 3)

    a = Marks()
    assert nested(a, a.similar()) == f(3)
    a = Marks()
    with pytest.raises(RuntimeError, match="tag.*Marks that runs at two levels"):
        nested(a, a)
    assert nested(a, a.similar()) == f(3)


def test_a_generator_made_in_a_nested_run_reports_to_the_enclosing_one_when_resumed():
    """Made in ``inner``'s run inside ``outer``'s, resumed after ``inner`` returned: what the
    generator executes reaches ``outer``, as it did while ``inner`` ran."""
    inner, outer = Table(metadata=[]), Pre(metadata=[])

    def program(v):
        held = []

        def make():
            def gen():
                yield operator.mul(v, 3)
                yield operator.truediv(v, 4)
            held.append(gen())
            return next(held[0])
        first = overdub(inner, make)
        outer.metadata.append("--")
        return first + next(held[0])

    for _ in range(2):
        outer.metadata.clear()
        assert overdub(outer, program, 8) == program(8)
        after = outer.metadata[outer.metadata.index("--"):]
        assert "truediv" in after  # (not seen before: it ran natively)
        assert "mul" in outer.metadata[:outer.metadata.index("--")]


def test_a_generator_made_in_a_nested_run_resumed_outside_any_run():
    inner, outer = Table(metadata=[]), Pre(metadata=[])
    held = []

    def make(v):
        def gen():
            yield abs(v)
            yield abs(-v * 2)
        held.append(gen())
        return next(held[0])

    assert overdub(outer, lambda: overdub(inner, make, -2)) == 2
    assert next(held[0]) == 4  # (natively: no context runs)
    assert inner.metadata == ["abs", "abs"]  # (inner's primitive: its rewritten code)


class Marking(Context):
    """Tags what its primitive computes from a value it tagged."""


@Marking.primitive(operator.mul, types=(Tagged, object))
def _marked_mul(ctx, a, b):
    return tag(untag(a, ctx) * b, ctx, "marked")


def test_a_resumed_generator_computing_with_a_value_of_the_finished_run_raises():
    """The value's context is over: its primitive would make a value tagged for nobody."""
    marking, outer = Marking(), Pre(metadata=[])
    held = []

    def make():
        t = tag(3, marking, "marked")

        def gen():
            yield operator.mul(t, 2)
            yield operator.mul(t, 5)
        held.append(gen())
        return untag(next(held[0]), marking)

    def program():
        first = overdub(marking, make)
        return first + next(held[0])

    assert overdub(marking, make) == 6  # (first made and consumed in the run)
    held.clear()
    with pytest.raises(TagError, match="after that context's run ended"):
        overdub(outer, program)


def test_code_of_a_finished_run_computing_with_a_tagged_value_outside_any_run():
    """A generator made in an inner run, computing with a value the outer context tagged, run
    after both runs ended (resumed, or closed when garbage-collected): the TagError says so,
    where it gave the one for a value used outside its context."""
    import gc
    import math
    import sys

    outer, inner, held, closing = Tags(), Table(metadata=[]), [], []

    def program(v):
        t = tag(v, outer, "outer's")

        def make():
            def gen():
                try:
                    yield 1.0
                    yield math.sqrt(t)
                finally:
                    if closing:  # (the second generator: closed when collected)
                        math.sqrt(t)
            held.append(gen())
            return next(held[-1])
        return overdub(inner, make)

    expected = ("math.sqrt of a value tagged by Tags .* after that context's run ended, "
                "outside any run")
    assert overdub(outer, program, 4.0) == 1.0
    with pytest.raises(TagError, match=expected):
        next(held.pop())
    assert overdub(outer, program, 4.0) == 1.0
    seen = []
    hook, sys.unraisablehook = sys.unraisablehook, seen.append
    try:
        closing.append(True)
        held.clear()
        gc.collect()
    finally:
        sys.unraisablehook = hook
    assert len(seen) == 1 and type(seen[0].exc_value) is TagError
    assert type(seen[0].exc_value.__context__) is GeneratorExit  # (not the generic TagError)
    import re
    assert re.search(expected, str(seen[0].exc_value))
