"""``match`` under a context with tagged values (found by an outside tester, session 12).

A class pattern nested in a sequence or mapping pattern checked the type of the wrapper (``case
{"k": float(k)}`` took another branch), and a capture of an element or attribute lost its
metadata (``case P(x=x)`` read the attribute behind the context's back).  Under tags, such a
``match`` runs as the tests it stands for: it must take the plain run's branch, bind the same
values, call the subject's own methods (``__len__``, ``get``, ``__getitem__``, ``__eq__``,
``__getattr__``) in the same order, and raise the same errors; each capture gets what reading
that element or attribute in code gives.
"""

from __future__ import annotations

import collections.abc
import enum
from dataclasses import dataclass

import pytest

from overdub import Context, has_metadata, metadata, overdub, tag, untag
from overdub.contexts import CountContext

LOG: list = []


class Seq(collections.abc.Sequence):
    def __init__(self, *items):
        self.items = list(items)

    def __len__(self):
        LOG.append("len")
        return len(self.items)

    def __getitem__(self, i):
        LOG.append(("getitem", i))
        return self.items[i]


class Map(collections.abc.Mapping):
    def __init__(self, **items):
        self.items = items

    def __len__(self):
        LOG.append("len")
        return len(self.items)

    def __iter__(self):
        LOG.append("iter")
        return iter(self.items)

    def __getitem__(self, key):
        LOG.append(("getitem", key))
        return self.items[key]

    def get(self, key, default=None):
        LOG.append(("get", key))
        return self.items.get(key, default)


class Obj:
    __match_args__ = ("a", "b")

    def __init__(self, a, b):
        self.a, self.b = a, b

    def __getattr__(self, name):
        LOG.append(("getattr", name))
        raise AttributeError(name)

    def __eq__(self, other):
        LOG.append("eq")
        return isinstance(other, Obj) and other.a == self.a

    __hash__ = None


class NotATuple:
    __match_args__ = ["a"]


class NotAString:
    __match_args__ = ("a", 3)
    a = 1


class Color(enum.Enum):
    RED = 1
    BLUE = 2


class Keys:
    A = "a"
    B = "a"


def classify(x):
    match x:
        case 0 | 1:
            return "small"
        case True:
            return "true"
        case None:
            return "none"
        case [a, *_, b] if a == b:
            return ("ends", a, b)
        case [a, *rest, b]:
            return ("seq", a, rest, b)
        case [*_]:
            return "any sequence"
        case {"k": Color.RED, **rest}:
            return ("red", rest)
        case {"k": float(v) | int(v), "j": [w, *_]}:
            return ("kv", v, w)
        case {Keys.A: 1, Keys.B: 2}:
            return "duplicate keys"
        case Obj(a=Obj(a=1) as inner, b=q) if q:
            return ("obj in obj", inner.a, q)
        case Obj(1, b) | Obj(b, 1):
            return ("obj", b)
        case Obj(zz=1):
            return "zz"
        case NotATuple(1):
            return "not a tuple"
        case NotAString(1, 2):
            return "not a string"
        case float(-1.5) | complex(1 + 2j):
            return "literal"
        case str() as s:
            return ("str", s)
        case Color.BLUE:
            return "blue"
        case _:
            return "other"


VALUES = [0, 1, True, None, [1, 2, 1], [1, 2, 3], (4,), [], Seq(1, 2, 1), Seq(5),
          {"k": Color.RED, "z": 3}, Map(k=Color.RED, z=3), {"k": 2.5, "j": [7, 8]},
          Map(k=3, j=Seq(9)), {"a": 1}, {"a": 1, "b": 2}, Obj(Obj(1, 0), 5), Obj(1, 9),
          Obj(9, 1), Obj(2, 2), NotATuple(), NotAString(), -1.5, 1 + 2j, "abc", Color.BLUE,
          3.25, {"k": "no"}]


def _deep_untag(x, ctx):
    x = untag(x, ctx)
    if type(x) in (list, tuple):
        return type(x)(_deep_untag(i, ctx) for i in x)
    if type(x) is dict:
        return {k: _deep_untag(v, ctx) for k, v in x.items()}
    return x


def _outcome(thunk, ctx=None):
    """(result or (exception type, message), the subject's methods called, in order)."""
    LOG.clear()
    try:
        out = ("ok", thunk() if ctx is None else _deep_untag(thunk(), ctx))
    except Exception as exc:
        out = (type(exc), str(exc))
    return out, list(LOG)


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_match_runs_as_the_plain_match(value):
    expected = _outcome(lambda: classify(value))
    ctx = Context()
    tag(0, ctx, "start tagging")
    subjects = [value]
    if not isinstance(value, (Seq, Map, Obj, NotATuple, NotAString)):
        subjects.append(tag(value, ctx, "m"))
    for subject in subjects:
        for _ in range(2):  # first and repeated calls (cached rewrite)
            assert _outcome(lambda: overdub(ctx, classify, subject), ctx) == expected


def _in_containers(x):
    return (classify([x, 2, x]), classify([x, 2, 3]), classify({"k": x, "j": [x, 1]}),
            classify({"k": Color.RED, "z": x}), classify(Obj(x, 1)), classify(Obj(1, x)),
            classify(Obj(Obj(x, 0), x)))


@pytest.mark.parametrize("value", [0, 1, 2.5, -1.5, True, None, "abc", Color.RED, 1 + 2j],
                         ids=repr)
def test_tagged_elements_and_attributes_match_as_plain_ones(value):
    expected = _outcome(lambda: _in_containers(value))
    ctx = Context()
    for _ in range(2):
        assert _outcome(lambda: overdub(ctx, _in_containers, tag(value, ctx, "m")),
                        ctx) == expected


def test_the_corpus_reaches_every_kind_of_outcome():
    outcomes = [_outcome(lambda: classify(v))[0] for v in VALUES]
    assert (ValueError, "mapping pattern checks duplicate key ('a')") in outcomes
    assert (TypeError, "NotATuple.__match_args__ must be a tuple (got list)") in outcomes
    assert (TypeError, "__match_args__ elements must be strings (got int)") in outcomes
    assert (TypeError, "complex() accepts 0 positional sub-patterns (1 given)") in outcomes
    assert len({repr(o) for o in outcomes}) > 15


@dataclass
class P:
    x: float
    y: float


def _nested(v):
    out = []
    match [v, 1]:
        case [float(k), 1]:
            out.append(k)
    match {"k": v}:
        case {"k": float(k)}:
            out.append(k)
    match (v,):
        case (float() as k,):
            out.append(k)
    match (v, v):
        case ((float() | int()) as k, _):
            out.append(k)
    match P(v, 2.0):
        case P(x=x):
            out.append(x)
    match P(v, 2.0):
        case P(x, y):
            out.append(x)
    match P(v, 2.0):
        case P(x=float(x)):
            out.append(x)
    items, table = [], {}
    items.append(v)
    table["k"] = v
    match items:
        case [float(k)]:
            out.append(k)
    match table:
        case {"k": float(k), **rest}:
            out.append(k)
            out.append(len(rest))
    return (*out,)  # (a display holds the tagged values themselves)


def test_captures_keep_their_metadata():
    ctx = Context()
    for _ in range(2):
        out = overdub(ctx, _nested, tag(0.5, ctx, "m"))
        assert [untag(v, ctx) for v in out] == list(_nested(0.5)) == [0.5] * 9 + [0]
        assert [metadata(v, ctx) for v in out[:9]] == ["m"] * 9
        assert not has_metadata(out[9], ctx)


def test_outside_tester_reproducer_takes_the_plain_branch():
    def f(v):
        match {"k": v}:
            case {"k": float(k)}:
                return "A"
            case _:
                return "B"
    ctx = Context()
    assert f(0.5) == overdub(ctx, f, tag(0.5, ctx, "m")) == "A"


def test_guard_sees_the_captures_as_bound():
    def f(v):
        match [v]:
            case [float(k)] if k > 0:
                return k
            case [k]:
                return ("other", k)
    ctx = Context()
    out = overdub(ctx, f, tag(0.5, ctx, "m"))
    assert untag(out, ctx) == 0.5 and metadata(out, ctx) == "m"
    out = overdub(ctx, f, tag(-0.5, ctx, "n"))
    assert out[0] == "other" and untag(out[1], ctx) == -0.5 and metadata(out[1], ctx) == "n"


def test_a_failed_pattern_binds_nothing():
    def f(v):
        k = "before"
        match [v, 2]:
            case [float(k), 3]:
                return "matched"
        return k
    ctx = Context()
    assert f(0.5) == overdub(ctx, f, tag(0.5, ctx, "m")) == "before"


def test_without_tags_match_stays_native():
    # a context without tagged values sees no call the match makes
    def f(v):
        match v:
            case [float(k), *_]:
                return k
        return None
    ctx = CountContext()
    assert overdub(ctx, f, [0.5, 1]) == 0.5
    assert len not in ctx.counts and isinstance not in ctx.counts
