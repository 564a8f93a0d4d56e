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


def test_a_generator_resumed_inside_a_context_inside_its_own_raises():
    a, b = Pre(metadata=[]), Post(metadata=[])

    def numbers():
        yield 1
        yield 2

    def run(v):
        held = overdub(a, numbers)  # a generator whose resumptions are runs of a
        first = next(held)  # (inside a's run: fine)
        return overdub(b, lambda: next(held)) + first + v

    with pytest.raises(RuntimeError, match="resumed inside Post, which runs inside the same"):
        overdub(a, run, 3)
    assert overdub(a, lambda: sum(overdub(a, numbers))) == 3


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
