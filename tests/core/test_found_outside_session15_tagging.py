"""Found by outside testers (session 15): the core's tagging containers.

1. A list whose items were *written* into it (``append``, ``insert``, ``extend``, ``L[i] = v``,
   ``L[:] = items``) keeps their metadata aside, by position.  Every list method the tagger did
   not know dropped all of it -- ``L.count(v)``, ``L.index(v)``, ``L.remove(v)``,
   ``del L[L.index(v)]`` -- and the operations it did not see as list operations left it at
   the wrong positions or lost it: ``L *= 2`` (the copies plain), the slots called as methods
   (``L.__delitem__(i)``, ``L.__setitem__(slice, [])``, ``L.__imul__(n)``, ``L.__iadd__(items)``,
   ``list.append(L, t)``), and the shim of ``L.sort(key=...)``, which sorts natively.  Now each
   list method, bound or unbound, and each slot called as a method, is the operation it is:
   methods that only read the list keep the metadata where it is, the others move it with the
   items; the shim of ``L.sort(key=...)`` tells the tagger the order it sorted into.
2. ``itertools.count(x, step)`` given a tagged value counted natively: its items were plain
   (only a context's own arithmetic can give ``x + step`` metadata).  It now counts by
   additions the context sees.
3. A lazy consumer given a list had *every* list argument replaced by a generator of its
   items, not only the ones it iterates: ``functools.reduce(step, seq, [])`` handed ``step`` a
   generator as its initial value (``TypeError: unsupported operand type(s) for +:
   'generator' and 'list'``), ``max(L1, L2)`` returned a copy.  Only the arguments a consumer
   iterates are replaced now.
4. C methods of a dict that store values (``d.__ior__(e)``, a subclass's ``super().update(e)``
   as in ``Counter.update``, ``OrderedDict.update``, ``dict.update(d, e)``,
   ``dict.__setitem__(d, k, t)``) and ``d |= e`` stored the tagged values themselves: a dict
   that existed before the run held ``Tagged`` objects after it.  They store as ``d[k] = t``
   does now: plain values, the metadata kept aside for the run (with dict's own item
   assignment where the method is dict's and a subclass has its own in Python, which
   ``dict.update`` does not call).
"""

from __future__ import annotations

import collections
import functools
import itertools
import operator
from typing import Any

import pytest

from overdub import Context, Tagged, has_metadata, metadata, overdub, tag
from tests.conftest import holds_tagged
from tests.core.test_tagging import Dual
from tests.core.test_tagging import derivative as dual_derivative

# -- helpers -------------------------------------------------------------------------------------


def _metas(ctx: Context, values: Any) -> list[Any]:
    """The metadata ``ctx`` gave each value (None where none)."""
    return [metadata(v, ctx) if has_metadata(v, ctx) else None for v in values]


def _written(x: Any, y: Any) -> list[Any]:
    """A list whose items were written after it was made: [y, 2.0, x]."""
    items: list[Any] = []
    items.append(y)
    items.append(2.0)
    items.append(x)
    return items


def _run(fn: Any) -> list[Any]:
    """``fn(x, y)`` under a plain tagging context, x tagged "x" and y tagged "y": the metadata
    of the values it returns."""
    ctx = Context()
    out = overdub(ctx, fn, tag(1.5, ctx, "x"), tag(7.0, ctx, "y"))
    return _metas(ctx, out)


# -- 1. list methods on written lists ------------------------------------------------------------

def count(x, y):
    items = _written(x, y)
    assert items.count(2.0) == 1
    return items[0], items[1], items[2]


def index(x, y):
    items = _written(x, y)
    assert items.index(2.0) == 1 and list.index(items, x) == 2
    assert 2.0 in items and items == [7.0, 2.0, 1.5] and items != [] and len(items) == 3
    assert items.__contains__(7.0) and items.__len__() == 3 and repr(items) == "[7.0, 2.0, 1.5]"
    return items[0], items[2]


def remove(x, y):
    items = _written(x, y)
    items.remove(2.0)
    return items[0], items[1]


def remove_first_of_equal(x, y):
    items = [1.0]
    items.append(y)
    items.append(x)
    items.append(y)
    items.remove(7.0)  # the first 7.0 (y) goes, the second stays
    return items[1], items[2]


def delete_found(x, y):
    items = _written(x, y)
    del items[items.index(2.0)]
    return items[0], items[1]


def repeat_in_place(x, y):
    items = _written(x, y)
    items *= 2
    return tuple(items)


def repeat_in_place_methods(x, y):
    items = _written(x, y)
    items.__imul__(2)
    other = _written(x, y)
    operator.imul(other, 2)
    return (*items, *other)


def repeat_zero(x, y):
    items = _written(x, y)
    items *= 0
    items.append(x)
    return tuple(items)


def slots_as_methods(x, y):
    items = _written(x, y)
    items.__delitem__(1)            # [y, x]
    items.__setitem__(slice(0, 0), [])
    items.__setitem__(0, x)         # [x, x]
    assert items.__iadd__([y]) is items      # [x, x, y]
    assert items.__imul__(1) is items
    list.append(items, y)           # [x, x, y, y]
    list.__setitem__(items, 1, y)   # [x, y, y, y]
    list.insert(items, 0, 2.0)      # [2.0, x, y, y, y]
    return items.__getitem__(1), items[2], items[4], list.pop(items), items.pop(0)


def slice_set_then_count(x, y):
    items = [0.0, 0.0]
    items[:] = [x, 2.0, y]
    assert items.count(2.0) == 1
    return items[0], items[2]


class Holder:
    def __init__(self):
        self.items = []


def attribute_list(x, y):
    holder = Holder()
    holder.items.append(x)
    holder.items.append(2.0)
    holder.items.append(y)
    holder.items.remove(2.0)
    assert holder.items.index(y) == 1
    return holder.items[0], holder.items[1]


def slots_that_read(x, y):
    items = []
    items.append(y)
    items.append(x)
    forward = list(items.__iter__())
    backward = list(items.__reversed__())
    joined = items.__add__([x])
    doubled = items.__mul__(2)
    doubled_left = items.__rmul__(2)
    return (*forward, *backward, joined[2], doubled[3], doubled_left[2])


def clear_then_append(x, y):
    items = _written(x, y)
    items.clear()
    items.append(2.0)
    items.append(x)
    assert items.index(x) == 1
    return items[0], items[1]


def sort_and_reverse(x, y):
    items = _written(x, y)    # [7.0 y, 2.0, 1.5 x]
    items.sort()              # [1.5 x, 2.0, 7.0 y]
    first = items[0], items[2]
    items.reverse()           # [7.0 y, 2.0, 1.5 x]
    assert items.count(x) == 1
    return (*first, items[0], items[2])


LIST_CASES = {
    count: ["y", None, "x"],
    index: ["y", "x"],
    remove: ["y", "x"],
    remove_first_of_equal: ["x", "y"],
    delete_found: ["y", "x"],
    repeat_in_place: ["y", None, "x", "y", None, "x"],
    repeat_in_place_methods: ["y", None, "x"] * 4,
    repeat_zero: ["x"],
    slots_as_methods: ["x", "y", "y", "y", None],
    slice_set_then_count: ["x", "y"],
    attribute_list: ["x", "y"],
    slots_that_read: ["y", "x", "x", "y", "x", "x", "y"],
    clear_then_append: [None, "x"],
    sort_and_reverse: ["x", "y", "y", "x"],
}


@pytest.mark.parametrize("fn", list(LIST_CASES), ids=lambda fn: fn.__name__)
def test_list_methods_keep_the_metadata_of_written_items(fn):
    assert _run(fn) == LIST_CASES[fn]
    assert _run(fn) == LIST_CASES[fn]  # (a second run: the rewritten code cached)
    plain = fn(1.5, 7.0)  # the same values as natively
    ctx = Context()
    out = overdub(ctx, fn, tag(1.5, ctx, "x"), tag(7.0, ctx, "y"))
    assert [v.value if type(v) is Tagged else v for v in out] == list(plain)


def sorted_by_key(x):
    items = []
    for k in range(1, 5):
        items.append(x * k if k != 2 else 9.0)
    items.sort(key=lambda v: -v)
    return items[1] + 10 * items[3]


def test_list_sorted_by_key_keeps_metadata():
    assert dual_derivative(sorted_by_key, 1.0) == 14.0
    assert dual_derivative(sorted_by_key, 1.0) == 14.0


def counted(x):
    items = []
    items.append(3 * x)
    items.append(2.0)
    items.append(x)
    n = items.count(2.0)
    return items[0] + items[2] + n


def removed_and_repeated(x):
    items = []
    items.append(3 * x)
    items.append(2.0)
    items.append(x)
    items.remove(2.0)
    items *= 2
    del items[items.index(x)]  # [3x, 3x, x]
    return items[0] + 10 * items[2]


def test_the_outside_repro_with_a_dual_context():
    assert dual_derivative(counted, 1.0) == 4.0
    assert dual_derivative(counted, 1.0) == 4.0
    assert dual_derivative(removed_and_repeated, 1.0) == 13.0
    assert dual_derivative(removed_and_repeated, 1.0) == 13.0


def test_a_list_passed_in_holds_plain_values_after_the_run():
    log = [0.0]

    def f(x, y):
        log.append(x)
        log.__iadd__([y])
        operator.imul(log, 2)
        log.__setitem__(0, y)
        list.append(log, x)
        log.remove(0.0)
        log.__init__([*log])
        return tuple(log)

    ctx = Context()
    out = overdub(ctx, f, tag(1.5, ctx, "x"), tag(7.0, ctx, "y"))
    assert _metas(ctx, out) == ["y", "x"] * 3
    assert log == [7.0, 1.5] * 3 and not holds_tagged(log)


# -- 2. itertools.count ------------------------------------------------------------------------

def test_count_items_are_counted_through_the_context():
    assert dual_derivative(lambda x: sum(itertools.islice(itertools.count(x, 0.5), 4)),
                           1.0) == 4.0
    assert dual_derivative(lambda s: sum(itertools.islice(itertools.count(1.0, s), 4)),
                           1.0) == 6.0
    assert dual_derivative(lambda s: sum(itertools.islice(itertools.count(step=s), 4)),
                           2.0) == 6.0
    assert dual_derivative(lambda x: next(itertools.count(x)), 3.0) == 1.0
    # without tagged arguments: the builtin itself, and its own errors
    ctx = Dual()

    def f(x):
        counter = itertools.count(2, 3)
        return type(counter), list(itertools.islice(counter, 3))

    kind, items = overdub(ctx, f, tag(1.0, ctx, 1.0))
    assert kind is itertools.count and items == [2, 5, 8]
    with pytest.raises(TypeError, match="a number is required"):
        overdub(ctx, lambda x: itertools.count(x, "a"), tag(1.0, ctx, 1.0))




# -- 3. consumers given lists they do not iterate ------------------------------------------------

def reductions(x, y):
    items = _written(x, y)
    pairs = functools.reduce(lambda a, t: a + [t], [1.0, 2.0], [])
    nested = functools.reduce(lambda a, t: [a, t], [1.0], [[0.0]])
    joined = functools.reduce(operator.concat, [[1.0], [2.0]], [])
    added = functools.reduce(operator.iadd, [[1.0], [2.0]], [])
    union = functools.reduce(lambda s, v: s | {v}, [1.0, 2.0], set())
    over_written = functools.reduce(lambda a, t: a + [t], items, [])
    return pairs, nested, joined, added, union, over_written


def test_reduce_gets_its_initial_value_as_it_is():
    expected = reductions(1.5, 7.0)
    ctx = Context()
    out = overdub(ctx, reductions, tag(1.5, ctx, "x"), tag(7.0, ctx, "y"))
    assert out[:5] == expected[:5]
    assert [type(v) for v in out[:5]] == [list, list, list, list, set]
    assert _metas(ctx, out[5]) == ["y", None, "x"]


def test_consumers_keep_arguments_they_do_not_iterate():
    first, second = [1.0], [2.0]

    def f(x, y):
        items = _written(x, y)
        larger = max(first, second)
        smaller = min(items, [100.0])
        assert smaller is items
        total = sum([[x], items], [])
        return larger, (smaller[0], smaller[2]), total

    ctx = Context()
    larger, smaller, total = overdub(ctx, f, tag(1.5, ctx, "x"), tag(7.0, ctx, "y"))
    assert larger is second
    assert _metas(ctx, smaller) == ["y", "x"]
    assert _metas(ctx, total) == ["x", "y", None, "x"]


# -- 4. dict methods that store ------------------------------------------------------------------

def test_dict_stores_keep_nothing_tagged_after_the_run():
    def f(x, y, settings):
        counts.update({"k": x})
        merged.__ior__({"m": y})
        operator.ior(called, {"c": x})
        dict.update(unbound, {"u": y})
        dict.__setitem__(unbound, "s", x)
        settings |= {"scale": y}
        return (counts["k"], merged["m"], called["c"], unbound["u"], unbound["s"],
                settings["scale"], merged.__getitem__("m"))

    for _ in range(2):
        counts: collections.Counter[str] = collections.Counter()
        merged: dict[str, Any] = {}
        called: dict[str, Any] = {}
        unbound: dict[str, Any] = {}
        settings = {"a": 1}
        ctx = Context()
        out = overdub(ctx, f, tag(1.5, ctx, "x"), tag(7.0, ctx, "y"), settings)
        assert _metas(ctx, out) == ["x", "y", "x", "y", "x", "y", "y"]
        for d in (counts, merged, called, unbound, settings):
            assert not holds_tagged(d), d
    assert counts == {"k": 1.5} and settings == {"a": 1, "scale": 7.0}
    assert unbound == {"u": 7.0, "s": 1.5} and merged == {"m": 7.0} and called == {"c": 1.5}


def test_list_add_in_place_as_a_method_stores_plain_values():
    log: list[Any] = []

    def f(x):
        log.__iadd__([x])
        return log[-1]

    ctx = Context()
    assert has_metadata(overdub(ctx, f, tag(1.5, ctx, "x")), ctx)
    assert log == [1.5] and type(log[0]) is float


class Logged(dict):
    """A dict whose item assignment is Python (which ``dict.update`` does not call)."""

    def __setitem__(self, key, value):
        super().__setitem__(key, ("logged", value))


def test_dict_subclass_stores_as_their_methods_store():
    def f(x, ordered, logged):
        ordered.update({"k": x})
        ordered.setdefault("s", x)
        logged.update({"u": x})       # dict.update: Logged.__setitem__ not called
        dict.__setitem__(logged, "v", x)
        logged["w"] = x               # Logged.__setitem__
        return ordered["k"], ordered["s"], logged["u"], logged["v"], logged["w"][1]

    for _ in range(2):
        ordered: collections.OrderedDict[str, Any] = collections.OrderedDict(a=1)
        logged = Logged()
        ctx = Context()
        out = overdub(ctx, f, tag(1.5, ctx, "x"), ordered, logged)
        assert _metas(ctx, out) == ["x"] * 5
        assert not holds_tagged(ordered) and not holds_tagged(logged)
        assert list(ordered.items()) == [("a", 1), ("k", 1.5), ("s", 1.5)]
        assert logged == {"u": 1.5, "v": 1.5, "w": ("logged", 1.5)}
    native = collections.OrderedDict(a=1), Logged()
    f(1.5, *native)
    assert native == (ordered, logged)
