"""Found by an outside tester (session 11): tagged values in containers, generators run later.

1. A tagged value inside a container built with a display reached C code as the ``Tagged``
   wrapper: ``print([x])``, ``"%r" % (x,)`` and ``f"{x!r}"`` showed ``Tagged(5.0, meta=...)``,
   ``json.dumps([x])`` raised "Object of type Tagged is not JSON serializable" and
   ``"-".join([s, "b"])`` "expected str instance, Tagged found".  A tagged value now
   represents itself as its value while its context runs, and the C functions that read a
   container's items to check their types (the methods of strings, the JSON encoder) are
   given copies holding the plain values; the containers themselves keep their metadata.
2. A generator (coroutine, asynchronous generator) returned by ``overdub`` and consumed after
   it returned ran its body outside the context: ``current_context()`` was None, and a nested
   ``overdub`` in it was not seen by the context.  Each resumption is now a run of the
   context; what it yields, returns and raises is unchanged, and tracebacks show the user's
   frames.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import io
import json
import math
import os
import traceback

import pytest

from overdub import Context, TagError, current_context, has_metadata, overdub, tag
from overdub.contexts import CountContext

HERE = os.path.abspath(__file__)


# -- 1. tagged values in containers reaching C code ----------------------------------------------

def formats(x, s):
    buf = io.StringIO()
    print([x], (x,), {"k": x}, file=buf)
    return [buf.getvalue(), "%r" % (x,), "%s and %r" % (x, [x]), f"{x!r}", f"{[x]}",
            "{!r}".format(x), "{}".format({"k": (x, s)}), str([s]), repr({x: s}),
            "%(a)r" % {"a": x}]


def readers(x, s):
    out = [json.dumps([x]), json.dumps({"a": [x, (x, 1)], "b": {x: 2}}), json.dumps((x, s)),
           json.dumps({"k": x}, sort_keys=True), json.dumps([x], indent=1),
           "-".join([s, "b"]), "".join((s,)), "".join(t for t in (s, "c")),
           str.join("+", [s, s]), ",".join({s}), s.startswith(("z", s)), "a".endswith((s,))]
    loop = [x]
    loop.append(loop)
    try:
        json.dumps(loop)
    except ValueError as exc:
        out.append(str(exc))
    return out


def holders(x, s):
    buf = io.StringIO()
    print(dict(zip(["a"], [x])), dict.fromkeys([x]), {x} | {1.0}, sorted([x, 1.0]),
          collections.OrderedDict(a=x), file=buf)
    return buf.getvalue()


@pytest.mark.parametrize("fn", [formats, readers, holders])
def test_tagged_items_reach_c_code_as_their_values(fn):
    plain = fn(5.0, "a")
    ctx = Context()
    assert overdub(ctx, fn, tag(5.0, ctx, "m"), tag("a", ctx, "m")) == plain
    assert overdub(Context(), fn, 5.0, "a") == plain  # (untagged: the same)


def test_the_containers_keep_their_metadata():
    def f(x, s):
        pairs = [x, s]
        d = {"k": x}
        text = json.dumps(d) + "-".join([pairs[1], "b"]) + json.dumps(pairs)
        return text, pairs[0], d["k"], pairs[1]

    ctx = Context()
    text, *kept = overdub(ctx, f, tag(5.0, ctx, "m"), tag("a", ctx, "m"))
    assert text == '{"k": 5.0}a-b[5.0, "a"]'
    assert [has_metadata(v, ctx) for v in kept] == [True, True, True]


def test_outside_its_context_a_tagged_value_shows_its_tag():
    ctx = Context()
    x = tag(5.0, ctx, "m")
    assert repr(x).startswith("Tagged(5.0, meta='m', by Context context at")
    assert repr([x]) == f"[{x!r}]"
    with pytest.raises(TagError):
        str(x)  # (a use of its value, as before)


class Tags(Context):
    """A second tagging context, for nesting."""


def test_nested_contexts_each_give_plain_values():
    def inner(x, y, s):
        return json.dumps([x, {"y": y}]) + "-".join([s, "b"]) + repr([x, y])

    def outer(x, s):
        ctx = Tags()
        return overdub(ctx, inner, x, tag(2.0, ctx, "n"), s)

    expected = inner(5.0, 2.0, "a")
    for outer_ctx in (Context(), CountContext()):
        args = (5.0, "a")
        if type(outer_ctx) is Context:
            args = (tag(5.0, outer_ctx, "m"), tag("a", outer_ctx, "m"))
        assert overdub(outer_ctx, outer, *args) == expected
    ctx = Context()  # a counting context inside a tagging one
    assert overdub(ctx, lambda x, s: overdub(CountContext(), inner, x, x, s),
                   tag(5.0, ctx, "m"), tag("a", ctx, "m")) == inner(5.0, 5.0, "a")


def test_derivatives_of_code_that_writes_text():
    ad = pytest.importorskip("overdub_ad")

    def f(x):
        buf = io.StringIO()
        print([x], {"k": x}, file=buf)
        text = json.dumps([x]) + "%r" % (x,) + f"{[x]}" + buf.getvalue()
        assert text == "[2.0]2.0[2.0][2.0] {'k': 2.0}\n", text
        return json.loads(json.dumps([x]))[0] * x  # the text's number: a constant

    def g(x):  # (forward mode: reverse mode calls the JSON encoder itself, given the dict)
        return json.loads(json.dumps({"a": x}))["a"] * x

    for mode in (ad.grad, ad.derivative):
        assert mode(f)(2.0) == 2.0
    assert ad.derivative(g)(2.0) == 2.0


# -- 2. generators and coroutines consumed after overdub returned -------------------------------

def watching():
    yield current_context()
    got = yield overdub(CountContext(), math.sqrt, 4.0)  # a nested run inside the generator
    try:
        yield got
    except KeyError as exc:
        yield ("caught", exc.args[0], current_context())
    try:
        yield "last"
    finally:
        FINALLY.append(current_context())
    return "done"


FINALLY: list = []


def test_a_generator_consumed_later_runs_inside_its_context():
    ctx = CountContext()
    it = overdub(ctx, watching)
    assert inspect.isgenerator(it) and it.__name__ == "watching"
    assert next(it) is ctx
    assert next(it) == 2.0
    assert ctx.counts[math.sqrt] == 1  # as when it is consumed inside the run
    assert it.send(7) == 7
    assert it.throw(KeyError("k")) == ("caught", "k", ctx)
    assert next(it) == "last"
    FINALLY.clear()
    it.close()
    assert FINALLY == [ctx] and current_context() is None

    eager = CountContext()
    assert overdub(eager, lambda: list(watching()))[0] is eager
    assert eager.counts[math.sqrt] == 1


def test_a_generator_gives_back_what_it_returns_and_raises():
    def counted(n):
        yield from range(n)
        return n * 10

    it = overdub(CountContext(), counted, 2)
    assert next(it) == 0 and next(it) == 1
    with pytest.raises(StopIteration) as stop:
        next(it)
    assert stop.value.value == 20
    assert list(overdub(CountContext(), counted, 3)) == [0, 1, 2]

    def failing():
        yield 1
        1 / 0  # noqa: B018

    it = overdub(CountContext(), failing)
    next(it)
    with pytest.raises(ZeroDivisionError) as failure:
        next(it)
    frames = [(fs.filename, fs.name) for fs in traceback.extract_tb(failure.value.__traceback__)]
    assert frames[-1] == (HERE, "failing")
    assert all(os.path.basename(os.path.dirname(name)) != "overdub" for name, _ in frames)


def test_a_generator_consumed_inside_another_run_is_seen_by_it():
    def roots():
        yield math.sqrt(9.0)

    it = overdub(CountContext(), roots)
    outer = CountContext()
    assert overdub(outer, list, it) == [3.0]
    assert outer.counts[math.sqrt] == 1  # executed by the inner context, under the outer one


def test_tagged_values_in_a_generator_consumed_later():
    def double(x):
        yield x * 2
        yield f"{x:.1f}"

    ctx = Context()
    it = overdub(ctx, double, tag(3.0, ctx, "m"))
    assert next(it) == 6.0 and next(it) == "3.0"  # (outside its run: TagError)


def test_a_coroutine_returned_by_overdub_runs_inside_its_context():
    async def work(n):
        await asyncio.sleep(0)
        return current_context(), overdub(CountContext(), math.sqrt, n)

    ctx = CountContext()
    coroutine = overdub(ctx, work, 4.0)
    assert inspect.iscoroutine(coroutine) and coroutine.__name__ == "work"
    seen, root = asyncio.run(coroutine)
    assert seen is ctx and root == 2.0 and ctx.counts[math.sqrt] == 1

    async def failing():
        await asyncio.sleep(0)
        raise ValueError("x")

    with pytest.raises(ValueError, match="x") as failure:
        asyncio.run(overdub(CountContext(), failing))
    names = [fs.name for fs in traceback.extract_tb(failure.value.__traceback__)
             if "overdub" + os.sep in fs.filename]
    assert names == []


def test_an_asynchronous_generator_returned_by_overdub():
    async def stream():
        yield current_context()
        got = yield overdub(CountContext(), math.sqrt, 9.0)
        yield got

    async def drive():
        ctx = CountContext()
        agen = overdub(ctx, stream)
        out = [await agen.__anext__(), await agen.__anext__(), await agen.asend(11)]
        await agen.aclose()
        return ctx, out

    ctx, out = asyncio.run(drive())
    assert out == [ctx, 3.0, 11] and ctx.counts[math.sqrt] == 1


def test_functions_that_return_no_generator_are_unchanged():
    values = [1, 2]
    assert overdub(CountContext(), lambda: values) is values
    iterator = iter(values)
    assert overdub(CountContext(), lambda: iterator) is iterator  # (not a generator)


def test_subclassed_containers_reach_text_functions_plain():
    """An OrderedDict, a defaultdict or a list subclass holding a tagged value reached the JSON
    encoder and str.join as the Tagged wrapper (only exact lists, tuples and dicts were copied);
    the copy keeps its class, so the text is the plain run's."""
    import collections
    import json

    class Names(list):
        pass

    def text(x, name):
        return (json.dumps(collections.OrderedDict(a=x, b=[x])),
                json.dumps(collections.defaultdict(list, a=[x])),
                "-".join(Names([name, "b"])), "%r" % (collections.OrderedDict(a=x),))

    want = text(5.0, "a")
    ctx = Context()
    assert overdub(ctx, text, tag(5.0, ctx, "m"), tag("a", ctx, "m")) == want
