"""Found from outside (session 15's round-2 testers), fixed in session 16: the core's tagging.

1. In a run nested in another tagging context, a list can hold the inner context's tagged
   values as they are (a display: ``[z]``) beside a value the *outer* context stored into it
   (``c.insert(0, y)`` of its own ``y``: stored plain, its metadata kept aside by position).
   The inner context read such a list natively -- ``d.extend(c)``, ``d[:] = c``, ``iter``,
   ``sum``/``min``/``sorted`` -- and the outer metadata of those members was lost.  It now
   reads it item by item through itself, which asks the outer context for the others, and
   ``keeps_heap_metadata(inner, c)`` says so to plug-ins that read natively.
2. ``copy.copy`` of a dict subclass with a ``__reduce__`` written in Python (``Counter``) ran that
   code natively, through ``object.__reduce_ex__``, so the copy's values lost their metadata.
   And a dict subclass without ``__init__`` of its own (``class R(dict)``), made from tagged
   values or from a dict holding metadata aside (``R(a=t)``, ``R(d)``), got plain values: it
   is made as ``dict(...)`` is now.
3. A ``types.MappingProxyType`` (a read-only view of a dict; a class's ``vars(C)``) was read
   natively: the metadata of the values stored into its dict (or as the class's attributes)
   was lost.
4. A tagged value used after its context's run raised a TagError telling the user to untag
   it with the context -- which a derivative's user never holds.  ``Context.escape_hint``
   says what to do; overdub_ad's contexts say the value leaked out of a derivative.
"""

from __future__ import annotations

import collections
import copy
import types
from typing import Any

import pytest

from overdub import (Context, TagError, has_metadata, keeps_heap_metadata, metadata, overdub,
                     tag)


class Plain(Context):
    """No primitives: tagged values keep metadata only through the heap."""


def _outer_meta(values: list[Any], outer: Context) -> list[Any]:
    return [metadata(v, outer) if has_metadata(v, outer) else None for v in values]


# -- 1. lists holding both contexts' values -----------------------------------------------------

def _extended(c: list[Any]) -> list[Any]:
    d: list[Any] = []
    d.extend(c)
    return d


def _slice_set(c: list[Any]) -> list[Any]:
    d = [0.0, 0.0]
    d[:] = c
    return d


def _iterated(c: list[Any]) -> list[Any]:
    return [v for v in c]


READERS = {"extend": _extended, "slice set": _slice_set, "iter": _iterated,
           "sorted": sorted, "list": list}


def _inner(z: Any, y: Any, inner: Context, read: Any) -> Any:
    c = [z]  # (the inner context's value, as it is)
    c.insert(0, y)  # (the outer context's, stored by it: plain here, its metadata kept aside)
    assert keeps_heap_metadata(inner, c)
    return read(c)


def _outer(y: Any, outer: Context, read: Any) -> list[Any]:
    inner = Plain()
    out = overdub(inner, _inner, tag(5.0, inner, "inner"), y, inner, read)
    return _outer_meta(out, outer)


def test_an_inner_context_reads_a_list_holding_both_contexts_values_through_itself():
    for name, read in READERS.items():
        outer = Plain()
        metas = overdub(outer, _outer, tag(1.0, outer, "y"), outer, read)
        assert sorted(map(str, metas)) == ["None", "y"], name


def test_a_list_of_one_context_s_values_is_not_read_item_by_item():
    def inner_run(z: Any, inner: Context) -> bool:
        return keeps_heap_metadata(inner, [z, z]) or keeps_heap_metadata(inner, [1.0, 2.0])

    def outer_run(y: Any) -> bool:
        inner = Plain()
        return overdub(inner, inner_run, tag(y, inner, "inner"), inner)

    outer = Plain()
    assert overdub(outer, outer_run, tag(1.0, outer, "y")) is False


# -- 2. copies made through a Python __reduce__ -------------------------------------------------

class _Reduced(dict):
    def __reduce__(self):
        return type(self), (dict(self),)


def test_a_copy_made_by_a_python_reduce_keeps_the_values_metadata():
    ctx = Plain()

    def run(t: Any) -> list[Any]:
        copies = [copy.copy(collections.Counter(a=t)), copy.deepcopy(collections.Counter(a=t)),
                  copy.copy(_Reduced(a=t))]
        return [type(c).__name__ + ":" + str(metadata(c["a"], ctx)) for c in copies]

    assert overdub(ctx, run, tag(2.0, ctx, "t")) == ["Counter:t", "Counter:t", "_Reduced:t"]
    assert copy.copy(_Reduced(a=1))["a"] == 1


class _Made(dict):
    pass


def test_a_dict_subclass_made_as_dict_keeps_the_values_metadata():
    ctx = Plain()

    def run(t: Any) -> list[Any]:
        d = {}
        d["a"] = t
        made = [_Made(a=t), _Made(d), _Made([("a", t)]), _Made(d, b=1)]
        assert all(type(m) is _Made for m in made)
        return [metadata(m["a"], ctx) for m in made]

    assert overdub(ctx, run, tag(2.0, ctx, "t")) == ["t"] * 4


# -- 3. read-only views ----------------------------------------------------------------------

class _Namespace:
    pass


def test_a_mapping_proxy_shows_the_metadata_of_its_mapping_s_values():
    ctx = Plain()

    def run(t: Any) -> list[Any]:
        d: dict[str, Any] = {}
        view = types.MappingProxyType(d)
        d["a"] = t
        _Namespace.a = t
        try:
            values = [view["a"], view.get("a"), list(view.values())[0], dict(view)["a"],
                      vars(_Namespace)["a"], _Namespace.__dict__.get("a")]
        finally:
            del _Namespace.a
        return [metadata(v, ctx) for v in values]

    assert overdub(ctx, run, tag(2.0, ctx, "t")) == ["t"] * 6


# -- 4. what a TagError tells the user -------------------------------------------------------------

class _Hinted(Context):
    def escape_hint(self) -> str:
        return "ask the hinted context"


def _closing_over(t: Any) -> Any:
    """A closure over ``t`` that leaves the run (its cell holds the tagged value itself)."""
    return lambda: t * 1.0


def test_a_value_used_after_its_context_s_run_names_what_to_do():
    for ctx, hint in ((Plain(), "overdub.untag(x, ctx)"), (_Hinted(), "ask the hinted context")):
        escaped = overdub(ctx, _closing_over, tag(2.0, ctx, "t"))
        with pytest.raises(TagError, match=type(ctx).__name__) as raised:
            escaped()
        assert hint in str(raised.value)
