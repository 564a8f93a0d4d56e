"""Found by an outside tester (session 11): the core's stand-ins for C builtins (``_shims``).

Under a context, builtins that call back into Python (``sorted``, ``max``, ``sum``, ``iter``...)
run as Python stand-ins so that the context sees those calls.  They differed from the builtins:
``xs.sort(key=...)`` did not empty the list while sorting (a key reading ``len(xs)`` saw the
whole list, appends were lost instead of a ``ValueError``); calls the builtin rejects ran anyway
or failed in the stand-in's words (``sum(["a"], "")``, ``max(1, 2, key=f, default=0)``,
``max(key=f)``, ``iter(5, None)``, ``sorted(iterable=...)``, ``starmap(pow, [1])``); ``len``
returned what ``__len__`` returned (``True``, an ``IntEnum``, ``2**70``) where the builtin gives
an ``int`` or raises; ``iter`` accepted a non-iterator from ``__iter__``; ``reduce(f, [])`` had
a ``StopIteration`` as ``__context__``; ``cmp_to_key`` gave overdub's own class.  Each case runs
plainly and under several contexts (counting, tracing, hooks, nested) and must give the same
value, or the same exception type, message and ``__context__``.
"""

from __future__ import annotations

import collections.abc
import enum
import functools
import itertools
import operator
import types

import pytest

from overdub import Context, overdub
from overdub.contexts import CountContext, TraceContext
from tests.core._tb_contexts import Hooks, Observe


def _nested(fn):
    return overdub(CountContext(), lambda: overdub(TraceContext(), fn))


RUNS = [lambda fn: fn(), lambda fn: overdub(CountContext(), fn),
        lambda fn: overdub(TraceContext(), fn), lambda fn: overdub(Observe(), fn),
        lambda fn: overdub(Hooks(), fn), _nested]
RUN_IDS = ["plain", "count", "trace", "observe", "hooks", "nested"]


def outcome(run, fn):
    """What running ``fn`` gives: its value (with the type of each part), or its exception's
    type, message and ``__context__``."""
    try:
        value = run(fn)
    except Exception as exc:  # noqa: BLE001 (the exception is the outcome compared)
        context = exc.__context__
        return ("raised", type(exc), str(exc),
                None if context is None else (type(context), str(context)))
    return ("returned", repr(value), _types(value))


def _types(value):
    if isinstance(value, (list, tuple)):
        return [_types(v) for v in value]
    return type(value)


def same_as_plain(fn):
    expected = outcome(RUNS[0], fn)
    for run, name in zip(RUNS[1:], RUN_IDS[1:]):
        assert outcome(run, fn) == expected, name
    return expected


# -- list.sort and sorted ----------------------------------------------------------------------
def key_reads_the_list():
    xs = [3, 1, 2]
    seen = []
    xs.sort(key=lambda x: (seen.append(len(xs)), x)[1])
    return seen, xs


def key_appends_to_the_list():
    xs = [3, 1, 2]
    try:
        xs.sort(key=lambda x: (xs.append(0), x)[1])
    except ValueError as exc:
        return "ValueError", str(exc), exc.__context__, xs
    return "sorted", xs


def key_appends_to_the_list_reversed():
    xs = [3, 1, 2, 1]
    try:
        xs.sort(key=lambda x: (xs.append(9), -x)[1], reverse=True)
    except ValueError as exc:
        return "ValueError", str(exc), xs
    return "sorted", xs


def key_appends_without_the_list():
    # (an unbound call: list.sort(xs, ...))
    xs = [2, 1]
    try:
        list.sort(xs, key=lambda x: (xs.append(0), x)[1])
    except ValueError as exc:
        return str(exc), xs
    return xs


class _Fragile:
    """A key whose comparisons fail after a few: list.sort leaves the list as far as it got."""
    compared = 0

    def __init__(self, value):
        self.value = value

    def __lt__(self, other):
        _Fragile.compared += 1
        if _Fragile.compared > 6:
            raise ArithmeticError("compared too often")
        return self.value < other.value


def comparison_fails_midway():
    _Fragile.compared = 0
    xs = [5, 3, 8, 1, 9, 2, 7]
    try:
        xs.sort(key=_Fragile)
    except ArithmeticError as exc:
        return str(exc), xs
    return xs


def key_fails():
    xs = [3, 1, 2]
    try:
        xs.sort(key=lambda x: 1 // (x - 1))
    except ZeroDivisionError as exc:
        return str(exc), xs
    return xs


def reverse_that_is_not_a_flag():
    # Before 3.12 list.sort reads `reverse` as a C int first: None is a TypeError, no key called
    calls = []
    xs = [2, 1]
    try:
        xs.sort(key=lambda x: (calls.append(x), x)[1], reverse=None)
    except TypeError as exc:
        return str(exc), calls, xs
    return calls, xs


def sorted_with_reverse_too_large():
    calls = []
    try:
        return sorted([2, 1], key=lambda x: (calls.append(x), x)[1], reverse=2**40)
    except OverflowError as exc:
        return str(exc), calls


class _OwnIteration(list):
    """A list subclass whose own iteration and length list.sort does not use."""

    def __iter__(self):
        raise AssertionError("list.sort iterated the list")

    def __len__(self):
        raise AssertionError("list.sort took the length")


def sort_a_list_subclass():
    xs = _OwnIteration([3, 1, 2])
    xs.sort(key=operator.neg)
    return list.copy(xs)


@pytest.mark.parametrize("fn", [
    key_reads_the_list, key_appends_to_the_list, key_appends_to_the_list_reversed,
    key_appends_without_the_list, comparison_fails_midway, key_fails,
    reverse_that_is_not_a_flag, sorted_with_reverse_too_large, sort_a_list_subclass])
def test_sort_as_list_sort_does(fn):
    same_as_plain(fn)


def test_a_key_sees_the_list_empty_and_a_change_is_an_error():
    assert same_as_plain(key_reads_the_list) == ("returned", repr(([0, 0, 0], [1, 2, 3])),
                                                 [[int, int, int], [int, int, int]])
    assert "list modified during sort" in same_as_plain(key_appends_to_the_list)[1]


def neg(x):
    return -x


BAD_CALLS = {
    "sorted without its iterable": lambda: sorted(iterable=[1], key=neg),
    "sorted with two": lambda: sorted([1], [2], key=neg),
    "sorted with an unknown keyword": lambda: sorted([1], key=neg, foo=1),
    "sort with a positional": lambda: [2, 1].sort(1, key=neg),
    "list.sort without a list": lambda: list.sort(key=neg),
    "list.sort of a tuple": lambda: list.sort((2, 1), key=neg),
    "sum of strings": lambda: sum(["a", "b"], ""),
    "sum of str subclass": lambda: sum([], type("S", (str,), {})("x")),
    "sum of bytes": lambda: sum([b"a"], b""),
    "sum of bytearray": lambda: sum([], bytearray()),
    "sum of a non-iterable from a string": lambda: sum(5, ""),
    "sum without its iterable": lambda: sum(iterable=[1]),
    "sum with three": lambda: sum([1], 2, 3),
    "sum with start twice": lambda: sum([1], 2, start=3),
    "max default with several": lambda: max(1, 2, key=neg, default=0),
    "min default with several": lambda: min(1, 2, key=neg, default=0),
    "max without arguments": lambda: max(key=neg),
    "min without arguments": lambda: min(key=neg),
    "max unknown keyword": lambda: max([1], key=neg, initial=0),
    "max empty": lambda: max([], key=neg),
    "max of a non-iterable": lambda: max(1, key=neg),
    "iter of a non-callable": lambda: iter(5, None),
    "iter with three": lambda: iter(neg, 1, 2),
    "reduce with initial by keyword": lambda: functools.reduce(max, [1], initial=0),
    "reduce of a non-iterable": lambda: functools.reduce(max, 5),
    "reduce of nothing": lambda: functools.reduce(operator.add, []),
    "reduce with four": lambda: functools.reduce(max, [1], 0, 0),
    "starmap of a non-iterable row": lambda: list(itertools.starmap(pow, [1])),
    "starmap by keyword": lambda: itertools.starmap(func=pow, iterable=[]),
    "starmap of one": lambda: itertools.starmap(pow),
    "takewhile of one": lambda: itertools.takewhile(neg),
    "dropwhile by keyword": lambda: itertools.dropwhile(neg, iterable=[1]),
    "accumulate of a non-iterable by keyword": lambda: itertools.accumulate(
        iterable=5, func=operator.add),
    "groupby of a non-iterable by keyword": lambda: itertools.groupby(iterable=5, key=neg),
    "chain.from_iterable of nothing": lambda: itertools.chain.from_iterable(),
    "cmp_to_key by keyword": lambda: type(functools.cmp_to_key(mycmp=operator.sub)(1)).__name__,
    "cmp_to_key with two": lambda: functools.cmp_to_key(operator.sub, 1),
}


@pytest.mark.parametrize("fn", BAD_CALLS.values(), ids=BAD_CALLS.keys())
def test_calls_the_builtin_rejects_or_judges(fn):
    same_as_plain(fn)


def test_sum_refuses_strings_in_its_words():
    assert same_as_plain(BAD_CALLS["sum of strings"])[1:3] == (
        TypeError, "sum() can't sum strings [use ''.join(seq) instead]")


def test_reduce_of_nothing_has_no_context():
    assert same_as_plain(BAD_CALLS["reduce of nothing"])[3] is None


# -- sum's phases ------------------------------------------------------------------------------
class _Half:
    """A Python number: sum() adds it on its own, and what follows as the builtin would (from
    3.12 its float loop compensates, so a run of floats summed apart differs in the last bits)."""

    def __add__(self, other):
        return 0.5 + other

    def __radd__(self, other):
        return other + 0.0


class _Zero:
    def __radd__(self, other):
        return other + 0


SUMS = {
    "floats after a Python item": lambda: sum([_Half(), 1e16, 1.0, -1e16]),
    "ints, a Python item, floats": lambda: sum([1, 2, _Half(), 1e16, 1.0, -1e16]),
    "floats, a Python item, floats": lambda: sum([1.5, _Half(), 1e16, 1.0, -1e16]),
    "an int after a Python item": lambda: sum([1, _Zero(), 1e16, 1.0, -1e16]),
    "a large int first": lambda: sum([2**70, _Half(), 1e16, 1.0, -1e16]),
    "two Python items": lambda: sum([1, _Half(), 1e16, 1.0, -1e16, _Half(), 1e16, 1.0, -1e16]),
    "a Python start": lambda: sum([1e16, 1.0, -1e16], _Half()),
    "a complex among floats": lambda: sum([1, _Half(), 1e16, 1j, 1.0, -1e16]),
}


@pytest.mark.parametrize("fn", SUMS.values(), ids=SUMS.keys())
def test_sum_adds_as_the_builtin_does(fn):
    same_as_plain(fn)


# -- lazy order: items taken one at a time ----------------------------------------------------
def max_interleaves_items_and_keys():
    events = []

    def items():
        for x in (2, 5, 1):
            events.append(("item", x))
            yield x
    best = max(items(), key=lambda x: (events.append(("key", x)), -x)[1])
    return best, events


def max_of_a_bad_item_after_good_ones():
    events = []

    def items():
        yield 1
        events.append("second asked")
        raise LookupError("no second")
    try:
        min(items(), key=lambda x: (events.append(x), x)[1])
    except LookupError as exc:
        return str(exc), events
    return events


def iter_stops_at_the_same_sentinel():
    nan = float("nan")
    answers = iter([nan, 1, 2])
    return repr(list(iter(lambda: next(answers), nan)))


@pytest.mark.parametrize("fn", [max_interleaves_items_and_keys, max_of_a_bad_item_after_good_ones,
                                iter_stops_at_the_same_sentinel])
def test_order_of_calls(fn):
    same_as_plain(fn)


# -- dunders read as the builtins read them ----------------------------------------------------
class _Three(enum.IntEnum):
    A = 3


def _sized(value):
    return type("Sized", (), {"__len__": lambda self: value, "__getitem__": lambda self, i: i})()


def _iterable(value):
    return type("Iterable", (), {"__iter__": lambda self: value})()


DUNDERS = {
    "len True": lambda: len(_sized(True)),
    "len IntEnum": lambda: len(_sized(_Three.A)),
    "len 2**70": lambda: len(_sized(2**70)),
    "len negative": lambda: len(_sized(-1)),
    "len float": lambda: len(_sized(1.5)),
    "reversed negative": lambda: reversed(_sized(-1)),
    "reversed True": lambda: list(reversed(_sized(True))),
    "reversed IntEnum": lambda: list(reversed(_sized(_Three.A))),
    "iter non-iterator": lambda: iter(_iterable(5)),
    "iter C non-iterator": lambda: iter(_iterable(types.SimpleNamespace())),
    "iter iterator": lambda: list(iter(_iterable(iter([1, 2])))),
    "str non-string": lambda: str(
        type("S", (), {"__str__": lambda self: types.SimpleNamespace()})()),
    "complex non-complex": lambda: complex(type("C", (), {"__complex__": lambda self: 1})()),
    "float C non-float": lambda: float(
        type("F", (), {"__float__": lambda self: types.SimpleNamespace()})()),
}


@pytest.mark.parametrize("fn", DUNDERS.values(), ids=DUNDERS.keys())
def test_dunder_results_checked_and_converted(fn):
    same_as_plain(fn)


def test_len_is_an_int_or_the_builtins_error():
    assert same_as_plain(DUNDERS["len True"])[1:] == ("1", int)
    assert same_as_plain(DUNDERS["len 2**70"])[1:3] == (
        OverflowError, "cannot fit 'int' into an index-sized integer")
    assert same_as_plain(DUNDERS["iter non-iterator"])[1:3] == (
        TypeError, "iter() returned non-iterator of type 'int'")


# -- functools.cmp_to_key ---------------------------------------------------------------------
def by_difference(a, b):
    return a - b


def key_wrapper_identity():
    key = functools.cmp_to_key(by_difference)(1)
    try:
        hash(key)
    except TypeError as exc:
        unhashable = str(exc)
    try:
        key < 3  # noqa: B015 (its error is the point)
    except TypeError as exc:
        compared = str(exc)
    return (type(key).__name__, type(key).__module__, unhashable, compared,
            isinstance(key, collections.abc.Hashable), key.obj,
            sorted([3, 1, 2], key=functools.cmp_to_key(by_difference)))


def test_cmp_to_key_gives_the_builtin_wrapper():
    assert "functools.KeyWrapper" in same_as_plain(key_wrapper_identity)[1]


def sort_by_cmp():
    return sorted([3, 1, 2], key=functools.cmp_to_key(by_difference))


def _callees(trace):
    for (call, subtrace) in trace:
        yield call[0]
        yield from _callees(subtrace)


def test_cmp_to_key_comparisons_are_seen_and_nothing_of_overdub_is():
    counter = CountContext()
    assert overdub(counter, sort_by_cmp) == [1, 2, 3]
    assert counter.counts[by_difference] >= 2
    tracer = TraceContext()
    overdub(tracer, sort_by_cmp)
    callees = list(_callees(tracer.trace))  # (by identity: a KeyWrapper compares only to one)
    assert any(c is by_difference for c in callees)
    assert not [c for c in callees if getattr(c, "__module__", "").startswith("overdub")]


def test_shims_still_seen_by_the_context():
    # (the stand-ins still route every user call through the context)
    counter = CountContext()

    def run():
        xs = [3, 1, 2]
        xs.sort(key=neg)
        return (xs, sorted(xs, key=neg), max(xs, key=neg), min(4, 5, key=neg),
                sum([1, 2], 0), list(itertools.starmap(operator.add, [[1, 2], (3, 4)])))
    assert overdub(counter, run) == run()
    assert counter.counts[neg] == 3 + 3 + 3 + 2


def _endless(n):
    return _endless(n + 1)


class _Recording(Context):
    def prehook(self, fn, /, *args, **kwargs):
        pass

    def posthook(self, out, fn, /, *args, **kwargs):
        pass


@pytest.mark.parametrize("make", [_Recording, CountContext], ids=["hooks", "count"])
def test_a_recursion_error_leaves_a_run_as_natively(make):
    """At the limit, naming the hook a RecursionError passed through would raise another, chained
    to it, in its place (D11): it passes through as it is."""
    for _ in range(2):  # (the first run rewrites _endless)
        with pytest.raises(RecursionError) as caught:
            overdub(make(), _endless, 0)
        assert caught.value.__context__ is None and caught.value.__cause__ is None
        assert str(caught.value) == "maximum recursion depth exceeded"
