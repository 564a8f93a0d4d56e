"""Found by an outside tester (session 15): functions that C code of the standard library calls
back were run behind the context's back.

``re.sub``/``re.subn`` with a function as ``repl`` (and ``Pattern.sub``/``subn`` called on a
compiled pattern), ``contextvars.Context.run`` (through which asyncio's ``loop.call_soon`` runs
its callbacks), json's hooks (``object_hook``, ``object_pairs_hook``, ``parse_float``,
``parse_int``, ``parse_constant`` of ``json.loads``/``JSONDecoder``, called by json's C scanner;
``default`` of ``json.dumps``/``JSONEncoder``, called by its C encoder): a counting context saw
none of the calls those functions made (results stayed right), and a derivative through them
raised MissingRuleError.  ``overdub._callback_shims`` now runs that C code natively with, in
place of the user's function, a callable that calls it through the context: the calls are
seen, derivatives go through them (both routes), and the program sees the same results, the
same stored objects and the same exceptions as natively.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import re

import pytest

from overdub import Context, overdub, tag
from overdub.contexts import CountContext
from overdub_ad import grad
from overdub_ad.testing import REFERENCE, force_route

pytestmark = pytest.mark.every_route
ROUTES = pytest.mark.parametrize("route", [None, REFERENCE])


def cb(*args):
    abs(-1)
    return args[0] if args else 0


def repl(match):
    abs(-1)
    return "b"


def default(obj):
    abs(-1)
    return 1


async def soon():
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    loop.call_soon(lambda: future.set_result(cb(7)))
    return await future


DECODER = json.JSONDecoder(object_hook=cb)  # made outside any context, used inside one

PROGRAMS = {  # name: (program, abs calls its callbacks make)
    "re.sub": (lambda: re.sub("a", repl, "aa"), 2),
    "re.subn": (lambda: re.subn("a", repl, "aaa"), 3),
    "Pattern.sub bound": (lambda: re.compile("a").sub(repl, "xax"), 1),
    "Pattern.sub keywords": (lambda: re.compile("a").sub(repl=repl, string="aa", count=1), 1),
    "Pattern.subn unbound": (lambda: re.Pattern.subn(re.compile("a"), repl, "aa"), 2),
    "object_hook": (lambda: json.loads('{"a": {"b": 1}}', object_hook=cb), 2),
    "object_pairs_hook": (lambda: json.loads('{"a": 1}', object_pairs_hook=cb), 1),
    "parse_float and parse_int": (lambda: json.loads("[1.5, 2, 3]", parse_float=cb,
                                                     parse_int=cb), 3),
    "parse_constant": (lambda: json.loads("[NaN, -Infinity]", parse_constant=cb), 2),
    "decoder made outside": (lambda: DECODER.decode('[{"a": 1}]'), 1),
    "dumps default": (lambda: json.dumps([object(), object()], default=default), 2),
    "JSONEncoder default": (lambda: json.JSONEncoder(default=default).encode({"k": object()}),
                            1),
    "Context.run": (lambda: contextvars.copy_context().run(cb, 1), 1),
    "asyncio call_soon": (lambda: asyncio.run(soon()), 1),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_callbacks_calls_are_seen(name):
    program, calls = PROGRAMS[name]
    ctx = CountContext()
    assert overdub(ctx, program) == program()
    assert ctx.counts[abs] == calls
    assert ctx.counts[abs] == calls  # (the same on a second run)
    ctx = CountContext()
    overdub(ctx, program)
    assert ctx.counts[abs] == calls


class Boom(Exception):
    pass


def raising(*args):
    raise BOOM


BOOM = Boom("from the callback")
RAISING = {
    "re.sub": lambda: re.sub("a", raising, "a"),
    "Context.run": lambda: contextvars.copy_context().run(raising),
    "object_hook": lambda: json.loads("{}", object_hook=raising),
    "parse_float": lambda: json.loads("[1.5]", parse_float=raising),
    "default": lambda: json.dumps(object(), default=raising),
}


@pytest.mark.parametrize("name", RAISING)
def test_the_callbacks_errors_propagate_unchanged(name):
    ctx = CountContext()
    with pytest.raises(Boom) as info:
        overdub(ctx, RAISING[name])
    assert info.value is BOOM
    assert info.value.__context__ is None and not hasattr(info.value, "__notes__")
    assert ctx.counts[raising] == 1


def test_the_program_sees_the_same_objects():
    marker = object()
    var = contextvars.ContextVar("h111", default="outer")

    def inside(x, *, key):
        abs(-1)
        return var.get(), x, key

    def program():
        ctx = contextvars.copy_context()
        ctx.run(var.set, "copied")
        seen = ctx.run(inside, marker, key="k")
        decoder = json.JSONDecoder(object_hook=cb, parse_float=cb)
        pairs = [decoder.scan_once.object_hook, decoder.scan_once.parse_float,
                 decoder.scan_once.parse_int]
        hooked = json.loads('{"a": 1}', object_hook=lambda d: marker)
        bad = None
        try:
            re.sub("a", lambda m: 1, "a")
        except TypeError as exc:
            bad = str(exc)
        return seen, var.get(), pairs, hooked, bad

    counted = CountContext()
    seen, value, pairs, hooked, bad = overdub(counted, program)
    assert seen == ("copied", marker, "k") and seen[1] is marker
    assert value == "outer"
    assert pairs[0] is cb and pairs[1] is cb and pairs[2] is int
    assert hooked is marker
    assert bad == program()[4]
    assert counted.counts[abs] == 1
    # without a function of the user's, the C code runs as it is
    plain = CountContext()
    assert overdub(plain, lambda: (re.sub("a", "b", "aa"), json.loads('[NaN, 1.5, {"a": 2}]')[1:],
                                   json.dumps([1.5, {"a": None}]))) == \
        ("bb", [1.5, {"a": 2}], '[1.5, {"a": null}]')
    assert plain.counts[abs] == 0


def run_f(t):
    return contextvars.copy_context().run(lambda s: s * t, t)


def object_hook_f(t):
    return json.loads('{"a": 3.0}', object_hook=lambda d: d["a"] * t * t)


def parse_float_f(t):
    return sum(json.loads("[1.5, 2.5]", parse_float=lambda s: float(s) * t))


def sub_f(t):
    found = []
    re.sub("a", lambda m: (found.append(t * t), "b")[1], "aa")
    return found[0] + found[1]


DERIVATIVES = {run_f: lambda t: 2 * t, object_hook_f: lambda t: 6 * t,
               parse_float_f: lambda t: 4.0, sub_f: lambda t: 4 * t}


@ROUTES
@pytest.mark.parametrize("f", list(DERIVATIVES), ids=lambda f: f.__name__)
def test_derivatives_go_through_the_callbacks(f, route):
    with force_route(route):
        for _ in range(2):  # first and repeated calls
            assert grad(f)(2.0) == pytest.approx(DERIVATIVES[f](2.0))
            assert grad(f)(0.5) == pytest.approx(DERIVATIVES[f](0.5))


class _Tagging(Context):
    pass


def _substituted(s):
    return (re.sub("a", lambda m: "b", s), re.compile("a").sub(lambda m: "c", s),
            re.subn("a", lambda m: "d", s))


def _decoded(s):
    return json.loads(s, object_hook=lambda d: {**d, "seen": 1})


@pytest.mark.parametrize("program, text", [(_substituted, "aXa"), (_decoded, '{"a": 1}')],
                         ids=["re", "json"])
def test_a_tagged_text_is_the_leaf_call_it_was(program, text):
    """Given a tagged string, the C function refused the stand-in's call (``expected string
    or bytes-like object, got 'Tagged'``): such a call is left to the core as a leaf."""
    ctx = _Tagging()
    assert overdub(ctx, program, tag(text, ctx, "m")) == program(text)
