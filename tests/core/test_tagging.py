"""Tagging (issue #3): per-instance tags, transparency, metadata through the heap, nesting,
no leaks, ``Context.metadata_type``, speed, shadow memory, and a hypothesis fuzz.

Every function run under a context lives in this file (overdub rewrites functions from their
source).  Tests marked ``xfail(strict=True)`` document overdub bugs found while writing this file;
each reason names the bug, and the test turns into a failure (XPASS strict) once it is fixed.
"""

from __future__ import annotations

import colorsys
import dataclasses
import functools
import gc
import math
import operator
import subprocess
import sys
import tracemalloc
import weakref
from collections import namedtuple
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from overdub import (Context, Tagged, TagError, has_metadata, metadata, opaque, overdub as run,
                     tag, untag)
from tests.conftest import weird_identity

# -- contexts ------------------------------------------------------------------------------------


class Plain(Context):
    """No primitives: tagged values keep metadata only through the heap."""


class Scale(Context):
    """One primitive, ``Tagged * float``, that propagates metadata (meta scales with the value)."""


@Scale.primitive(operator.mul, types=(Tagged, float))
def _scale_mul(ctx: Scale, a: Any, b: float) -> Any:
    return tag(untag(a, ctx) * b, ctx, metadata(a, ctx) * b)


class Dual(Context):
    """Forward-mode AD: metadata is the derivative.  ``typed=True`` declares float metadata."""

    def __init__(self, typed: bool = False) -> None:
        super().__init__()
        self.typed = typed

    def metadata_type(self, value_type: type) -> Any:
        if not self.typed:
            return object
        return float if issubclass(value_type, (float, int)) else None


def _parts(ctx: Dual, a: Any) -> tuple[Any, Any]:
    if has_metadata(a, ctx):
        return untag(a, ctx), metadata(a, ctx)
    return a, None


def _dual(ctx: Dual, value: Any, d: Any) -> Any:
    return value if d is None else tag(value, ctx, d)


def _d(d: Any) -> Any:
    return 0.0 if d is None else d


@Dual.primitive(operator.add)
def _dual_add(ctx, a, b):
    (av, ad), (bv, bd) = _parts(ctx, a), _parts(ctx, b)
    return _dual(ctx, av + bv, None if ad is None and bd is None else _d(ad) + _d(bd))


@Dual.primitive(operator.sub)
def _dual_sub(ctx, a, b):
    (av, ad), (bv, bd) = _parts(ctx, a), _parts(ctx, b)
    return _dual(ctx, av - bv, None if ad is None and bd is None else _d(ad) - _d(bd))


@Dual.primitive(operator.mul)
def _dual_mul(ctx, a, b):
    (av, ad), (bv, bd) = _parts(ctx, a), _parts(ctx, b)
    return _dual(ctx, av * bv, None if ad is None and bd is None else _d(ad) * bv + av * _d(bd))


@Dual.primitive(operator.truediv)
def _dual_div(ctx, a, b):
    (av, ad), (bv, bd) = _parts(ctx, a), _parts(ctx, b)
    d = None if ad is None and bd is None else (_d(ad) * bv - av * _d(bd)) / (bv * bv)
    return _dual(ctx, av / bv, d)


@Dual.primitive(operator.neg)
def _dual_neg(ctx, a):
    av, ad = _parts(ctx, a)
    return _dual(ctx, -av, None if ad is None else -ad)


def derivative(f: Any, x: float, typed: bool = False) -> float:
    """d f / d x at ``x`` with a fresh Dual context (usable inside another Dual's run)."""
    ctx = Dual(typed)
    out = run(ctx, f, tag(x, ctx, 1.0))
    return metadata(out, ctx) if has_metadata(out, ctx) else 0.0


class FloatsOnly(Context):
    """Declares that only floats may be tagged, and only with float metadata."""

    def metadata_type(self, value_type: type) -> Any:
        return float if issubclass(value_type, float) else None


def parts(x: Any, ctx: Context) -> Any:
    """(plain value, metadata) for a value tagged by ``ctx``; the value itself otherwise."""
    if type(x) is Tagged and has_metadata(x, ctx):
        return (untag(x, ctx), metadata(x, ctx))
    assert type(x) is not Tagged, f"unexpected foreign Tagged {x!r}"
    return x


def label_parts(ctx: Context) -> tuple[str, str]:
    return type(ctx).__name__, f"{id(ctx):#x}"


# -- user code run under the contexts ------------------------------------------------------------


class Box:
    pass


@dataclasses.dataclass
class DBox:
    a: Any
    b: Any = 0.0


class SBox:
    __slots__ = ("a", "b")

    def __init__(self, a: Any, b: Any = 0.0) -> None:
        self.a = a
        self.b = b


NBox = namedtuple("NBox", "a b")


def identity(x):
    return x


def probe_value(t):
    out = {}
    out["isinstance_float"] = isinstance(t, float)
    out["isinstance_tuple"] = isinstance(t, (int, float))
    out["isinstance_Tagged"] = isinstance(t, Tagged)
    out["type_is_float"] = type(t) is float
    out["type_name"] = type(t).__name__
    out["eq"] = t == 1.5
    out["req"] = 1.5 == t
    out["ne"] = t != 1.5
    out["lt"] = t < 2.0
    out["rgt"] = 2.0 > t
    out["le"] = t <= 1.5
    out["ge"] = t >= 1.5
    out["bool"] = bool(t)
    out["hash"] = hash(t) == hash(1.5)
    out["dict_key"] = {t: "hit"}[1.5]
    out["in_set"] = t in {1.5}
    out["int"] = int(t)
    out["float"] = float(t)
    out["fmt"] = f"{t:.3f}"
    out["fstr"] = f"{t}"
    out["format"] = "{:.2f}".format(t)
    out["percent"] = "%s" % t
    out["str"] = str(t)
    out["round"] = round(t, 1)
    out["floor"] = math.floor(t)
    out["sqrt"] = math.sqrt(t)
    out["np_sqrt"] = np.sqrt(t)
    out["max"] = max(t, 0.5)
    out["divmod"] = divmod(t, 1.0)
    out["method"] = t.is_integer()
    out["attr"] = t.real
    if t > 1.0:
        out["branch"] = "gt"
    else:
        out["branch"] = "le"
    n = 0
    while t > n:
        n += 1
    out["while"] = n
    out["ternary"] = "yes" if t else "no"
    out["not"] = not t
    return out


def probe_repr(t):
    return repr(t)


def probe_container(t):
    return list(t), [v for v in t], len(t), tuple(t), t[0], sorted(t), sum(t)


def unpack_pair(t):
    a, b = t
    return a, b


def builtin_view(t):
    return type(t), isinstance(t, Tagged), math.sqrt(t), abs(t), t + 1.0, -t


def scale_ops(t):
    return t * 3.0, 3.0 * t, t + 1.0


# storage round trips: each stores the tagged value and reads it back (plus an untouched neighbour)
def via_attr(t):
    b = Box()
    b.a = t
    b.b = 0.5
    return b.a, b.b


def via_setattr_getattr(t):
    b = Box()
    setattr(b, "a", t)
    return getattr(b, "a"), getattr(b, "missing", 0.5)


def via_dataclass(t):
    d = DBox(t)
    d2 = DBox(0.0)
    d2.a = d.a
    return d2.a, d2.b


def via_slots(t):
    s = SBox(t)
    s.b = s.a
    return s.b, SBox(0.5).a


def via_namedtuple(t):
    n = NBox(t, 0.5)
    return n.a, n.b


def via_namedtuple_index(t):
    n = NBox(0.5, t)
    return n[1], n[0]


def via_tuple(t):
    tp = (0.5, t)
    return tp[1], tp[0]


def via_list_literal(t):
    lst = [t, 0.5]
    return lst[0], lst[1]


def via_list_append_pop(t):
    lst = [0.5]
    lst.append(t)
    return lst.pop(), lst.pop()


def via_list_append_index(t):
    lst = []
    lst.append(0.5)
    lst.append(t)
    return lst[1], lst[0]


def via_list_setitem(t):
    lst = [0.0, 0.5]
    lst[0] = t
    return lst[0], lst[1]


def via_list_slice_setitem(t):
    lst = [0.0, 0.0, 0.5]
    lst[0:2] = [0.25, t]
    return lst[1], lst[2]


def via_list_insert(t):
    lst = [0.5]
    lst.insert(0, t)
    return lst[0], lst[1]


def via_list_extend(t):
    lst = [0.5]
    lst.extend([0.25, t])
    return lst[2], lst[1]


def via_list_reorder(t):
    lst = [0.5, 0.25]
    lst.append(t)
    lst.reverse()
    lst.sort()
    return lst[2], lst[0]


def via_list_slice_read(t):
    lst = [0.5]
    lst.append(t)
    both = lst[0:2]
    return both[1], both[0]


def via_dict_literal(t):
    d = {"k": t, "other": 0.5}
    return d["k"], d["other"]


def via_dict_setitem(t):
    d = {"other": 0.5}
    d["k"] = t
    return d["k"], d["other"]


def via_nested(t):
    outer = Box()
    outer.inner = {"xs": []}
    outer.inner["xs"].append(t)
    outer.inner["xs"].append(0.5)
    return outer.inner["xs"][0], outer.inner["xs"][1]


STORAGE = [via_attr, via_setattr_getattr, via_dataclass, via_slots, via_namedtuple,
           via_namedtuple_index, via_tuple, via_list_literal, via_list_append_pop,
           via_list_append_index, via_list_setitem, via_list_slice_setitem,
           via_list_insert, via_list_extend,
           via_list_reorder, via_list_slice_read, via_dict_literal,
           via_dict_setitem, via_nested]


def overwrite_with_plain(t):
    b = Box()
    b.a = t
    b.a = 2.0
    d = {}
    d["k"] = t
    d["k"] = 3.0
    lst = [0.0]
    lst[0] = t
    lst[0] = 4.0
    arr = np.zeros(2)
    arr[0] = t
    arr[0] = 5.0
    return b.a, d["k"], lst[0], arr[0]


def array_element(t, arr):
    arr[2] = t
    return arr[2], arr[0]


def array_slice_list(t, u):
    a = np.zeros(5)
    a[1:3] = [t, u]
    return a[1], a[2], a[0], a[3]


def array_slice_tuple(t, u):
    a = np.zeros(4)
    a[2:4] = (t, u)
    return a[2], a[3], a[1]


def array_2d(t):
    a = np.zeros((3, 3))
    a[1, 2] = t
    return a[1, 2], a[0, 0], a[2, 1]


def array_tagged_block(ta):
    a = np.zeros(4)
    a[1:3] = ta
    return a[1], a[2], a[0]


def array_append(t):
    a = np.zeros(2)
    b = np.append(a, t)
    return b[2], b[0], b.shape


def array_append_keeps_shadow(t, u):
    a = np.zeros(3)
    a[1] = t
    b = np.append(a, u)
    return b[1], b[3], b[0], b[2]


def array_meta_kinds(t, u):
    a = np.zeros(3)
    a[0] = t
    a[1] = u
    return a[0], a[1]


def array_fill_after_write(t):
    a = np.zeros(3)
    a[0] = t
    a.fill(7.0)
    return a[0]


def array_inplace_after_write(t):
    a = np.zeros(3)
    a[0] = t
    a *= 0.0
    return a[0]


def list_shared_small_int(t):
    lst = [1, 2]
    lst.append(t)
    return lst[0], lst[2]      # lst[0] is the cached int 1, the very object t wraps


def list_plain_copy_shares_identity(t):
    lst = [0.0, 0.0]
    lst[0] = t
    lst[1] = float(t)        # float() of a float is the very same object, without metadata
    return lst[1], lst[0]


def list_iterate(t):
    lst = [0.5]
    lst.append(t)
    return [v for v in lst]


def dict_get(t):
    d = {}
    d["k"] = t
    return d.get("k")


# -- 1. tags are per context instance ----------------------------------------------------------


def test_tag_untag_metadata_roundtrip():
    ctx = Plain()
    x = tag(1.0, ctx, 2.0)
    assert type(x) is Tagged
    assert untag(x, ctx) == 1.0 and type(untag(x, ctx)) is float
    assert metadata(x, ctx) == 2.0
    assert has_metadata(x, ctx)
    assert not has_metadata(1.0, ctx)
    # tagging again for the same context replaces the metadata (one layer, not two)
    y = tag(x, ctx, 3.0)
    assert metadata(y, ctx) == 3.0 and untag(y, ctx) == 1.0
    # the very value and metadata come back through an overdubbed identity
    out = run(ctx, identity, x)
    assert untag(out, ctx) == 1.0 and metadata(out, ctx) == 2.0


def test_two_live_instances_of_one_class_never_mix():
    c1, c2 = Plain(), Plain()
    a = tag(1.0, c1, "one")
    assert not has_metadata(a, c2)
    with pytest.raises(TagError) as err:
        metadata(a, c2)
    assert all(part in str(err.value) for part in label_parts(c2))
    assert untag(a, c2) is a                      # wrong context: untag is a no-op
    both = tag(a, c2, "two")
    assert metadata(both, c1) == "one" and metadata(both, c2) == "two"
    assert metadata(untag(both, c2), c1) == "one"
    assert metadata(untag(both, c1), c2) == "two"
    assert untag(untag(both, c1), c2) == 1.0
    assert untag(untag(both, c2), c1) == 1.0
    # order of layers does not matter to either context
    other = tag(tag(1.0, c2, "two"), c1, "one")
    assert metadata(other, c1) == "one" and metadata(other, c2) == "two"


def test_a_similar_context_is_a_new_tag_identity():
    """``similar`` copies the context's configuration, never its tags: a sibling made after the
    original tagged values (and so holds its private fields) must not read their metadata."""
    original = Plain()
    a = tag(1.0, original, "mine")
    sibling = original.similar()
    assert not has_metadata(a, sibling) and untag(a, sibling) is a
    b = tag(2.0, sibling, "theirs")
    assert not has_metadata(b, original) and metadata(b, sibling) == "theirs"


def test_shadow_storage_is_per_instance():
    c1, c2 = Plain(), Plain()
    tag(0.0, c2, None)                            # c2 handles tags too
    shared = Box()
    run(c1, setattr, shared, "a", tag(1.5, c1, "one"))
    assert type(shared.a) is float
    got = run(c2, getattr, shared, "a")
    assert type(got) is float and got == 1.5      # c1's shadow is invisible to c2
    assert not has_metadata(got, c2) and not has_metadata(got, c1)


def test_wrong_context_for_metadata_and_untag():
    ctx, never_tagged = Plain(), Plain()
    x = tag(1.0, ctx, 2.0)
    with pytest.raises(TagError) as err:
        metadata(1.0, ctx)
    assert all(part in str(err.value) for part in label_parts(ctx))
    with pytest.raises(TagError):
        metadata(x, never_tagged)
    assert isinstance(TagError("x"), TypeError)
    assert untag(1.0, ctx) == 1.0
    assert untag(x, never_tagged) is x
    assert not has_metadata(x, never_tagged)


def test_metadata_with_a_non_context_is_a_type_error():
    x = tag(1.0, Plain(), 2.0)
    with pytest.raises(TypeError):
        metadata(x, 5)
    with pytest.raises(TypeError):
        has_metadata(x, object())


def foreign_probe(t, inner):
    return isinstance(t, float), type(t) is float, t + 1.0, has_metadata(t, inner)


def run_inner_on_foreign(t, inner):
    return run(inner, foreign_probe, t, inner)


def test_outer_tag_is_an_ordinary_value_to_an_inner_context():
    outer, inner = Plain(), Plain()
    tag(0.0, inner, None)
    out = run(outer, run_inner_on_foreign, tag(1.5, outer, "o"), inner)
    assert out == (True, True, 2.5, False)


def test_tagged_cannot_be_subclassed():
    with pytest.raises(TypeError):
        class Sub(Tagged):  # noqa: F841
            pass


# -- 2. inside a context a tagged value behaves like its value ---------------------------------


def test_tagged_float_behaves_like_its_value():
    ctx = Plain()
    got = run(ctx, probe_value, tag(1.5, ctx, "m"))
    want = probe_value(1.5)
    want["isinstance_Tagged"] = False
    assert got == want
    assert got["isinstance_float"] and got["type_is_float"] and got["type_name"] == "float"
    assert got["fmt"] == "1.500" and got["int"] == 1 and got["branch"] == "gt"
    for value in got.values():
        assert type(value) is not Tagged


def test_repr_inside_context_is_the_values():
    ctx = Plain()
    assert run(ctx, probe_repr, tag(1.5, ctx, "m")) == "1.5"


@pytest.mark.parametrize("value", [(1.0, 2.0), [1.0, 2.0], np.array([1.0, 2.0])],
                         ids=["tuple", "list", "array"])
def test_tagged_container_iterates_like_its_value(value):
    ctx = Plain()
    got = run(ctx, probe_container, tag(value, ctx, "m"))
    want = probe_container(value)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert type(g) is type(w)
        assert g == w
        if isinstance(g, list):
            assert all(type(v) is not Tagged for v in g)
    assert run(ctx, unpack_pair, tag(value, ctx, "m")) == (1.0, 2.0)


def test_builtins_without_a_primitive_receive_the_plain_value():
    ctx = Plain()
    got = run(ctx, builtin_view, tag(4.0, ctx, "m"))
    assert got[0] is float and got[1] is False     # type() and isinstance() see the value
    assert got[2:] == (2.0, 4.0, 5.0, -4.0)
    assert all(type(v) is not Tagged for v in got)  # and the metadata is dropped
    # (max and min select one of their arguments, as of a list: that one, metadata and all)
    selected = run(ctx, lambda t: max(t, 0.0), tag(4.0, ctx, "m"))
    assert parts(selected, ctx) == (4.0, "m")


def test_primitive_on_tagged_propagates_metadata():
    ctx = Scale()
    prod, rprod, plus = run(ctx, scale_ops, tag(2.0, ctx, 0.5))
    assert untag(prod, ctx) == 6.0 and metadata(prod, ctx) == 1.5
    assert rprod == 6.0 and type(rprod) is float    # (float, Tagged) has no primitive
    assert plus == 3.0 and type(plus) is float


# -- 3. metadata through the heap ----------------------------------------------------------------


@pytest.mark.parametrize("fn", STORAGE, ids=lambda fn: fn.__name__)
def test_metadata_survives_store_and_read_back(fn):
    ctx = Plain()
    stored, neighbour = run(ctx, fn, tag(1.5, ctx, "m"))
    assert parts(stored, ctx) == (1.5, "m")
    assert neighbour == fn(1.5)[1] and type(neighbour) is not Tagged


def test_overwriting_with_a_plain_value_drops_the_metadata():
    ctx = Plain()
    got = run(ctx, overwrite_with_plain, tag(1.5, ctx, "m"))
    assert got == (2.0, 3.0, 4.0, 5.0)
    assert all(type(v) is not Tagged for v in got)


def test_numpy_element_write_into_an_existing_array():
    ctx = Plain()
    arr = np.zeros(4)
    stored, other = run(ctx, array_element, tag(1.5, ctx, 0.25), arr)
    assert parts(stored, ctx) == (1.5, 0.25)
    assert other == 0.0 and type(other) is not Tagged
    assert arr.dtype == np.float64 and arr[2] == 1.5


def test_numpy_slice_writes():
    ctx = Plain()
    a, b, zero, zero2 = run(ctx, array_slice_list, tag(1.5, ctx, 0.25), tag(2.5, ctx, 0.75))
    assert parts(a, ctx) == (1.5, 0.25) and parts(b, ctx) == (2.5, 0.75)
    assert type(zero) is not Tagged and type(zero2) is not Tagged
    a, b, zero = run(ctx, array_slice_tuple, tag(1.5, ctx, 0.25), 3.0)
    assert parts(a, ctx) == (1.5, 0.25)
    assert b == 3.0 and type(b) is not Tagged and type(zero) is not Tagged


def test_numpy_2d_and_tagged_block_writes():
    ctx = Plain()
    hit, miss1, miss2 = run(ctx, array_2d, tag(1.5, ctx, 0.25))
    assert parts(hit, ctx) == (1.5, 0.25)
    assert type(miss1) is not Tagged and type(miss2) is not Tagged
    block = tag(np.array([1.0, 2.0]), ctx, np.array([0.1, 0.2]))
    one, two, zero = run(ctx, array_tagged_block, block)
    assert parts(one, ctx) == (1.0, 0.1) and parts(two, ctx) == (2.0, 0.2)
    assert type(zero) is not Tagged


def test_numpy_append():
    ctx = Plain()
    run(ctx, identity, 0)  # make sure the context's tag handlers are set up (see the cold test)
    last, first, shape = run(ctx, array_append, tag(1.5, ctx, 0.25))
    assert shape == (3,)
    assert parts(last, ctx) == (1.5, 0.25)
    assert type(first) is not Tagged
    kept, appended, zero, zero2 = run(ctx, array_append_keeps_shadow, tag(1.5, ctx, 0.25),
                                      tag(2.5, ctx, 0.75))
    assert parts(kept, ctx) == (1.5, 0.25) and parts(appended, ctx) == (2.5, 0.75)
    assert type(zero) is not Tagged and type(zero2) is not Tagged


COLD_APPEND = '''
import numpy as np
from overdub import Context, overdub, tag, has_metadata

class Fresh(Context):
    pass

def appended(t):
    return np.append(np.zeros(2), t)[2]

ctx = Fresh()
x = tag(1.5, ctx, 0.25)          # the first thing this process does with tags
print(has_metadata(overdub(ctx, appended, x), ctx))
'''


def test_numpy_append_in_a_fresh_process(tmp_path, child_env):
    script = tmp_path / "cold_append.py"
    script.write_text(COLD_APPEND)
    done = subprocess.run([sys.executable, str(script)], env=child_env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


@pytest.mark.parametrize("m1, m2", [(2, 2.5), ("m", "long"), (2.0, "s"), ((1, 2), (3, 4)),
                                    ("a\x00", "b")],
                         ids=["int-then-float", "short-then-long-str", "float-then-str",
                              "tuples", "trailing-nul"])
def test_numpy_shadow_keeps_any_metadata(m1, m2):
    ctx = Plain()
    a, b = run(ctx, array_meta_kinds, tag(1.0, ctx, m1), tag(3.0, ctx, m2))
    assert parts(a, ctx) == (1.0, m1)
    assert parts(b, ctx) == (3.0, m2)


@pytest.mark.parametrize("fn", [array_fill_after_write, array_inplace_after_write],
                         ids=lambda fn: fn.__name__)
def test_numpy_native_overwrite_drops_metadata(fn):
    ctx = Plain()
    out = run(ctx, fn, tag(1.5, ctx, "m"))
    assert type(out) is not Tagged


@pytest.mark.parametrize("fn, value", [(list_shared_small_int, 1),
                                       (list_plain_copy_shares_identity, 1.5)],
                         ids=["small-int", "float-of-tagged"])
def test_list_metadata_does_not_spread_to_the_same_object_stored_plainly(fn, value):
    ctx = Plain()
    plain, stored = run(ctx, fn, tag(value, ctx, "m"))
    assert parts(stored, ctx) == (value, "m")
    assert type(plain) is not Tagged


@pytest.mark.parametrize("fn", [list_iterate, dict_get], ids=lambda fn: fn.__name__)
def test_other_read_paths_keep_metadata(fn):
    ctx = Plain()
    out = run(ctx, fn, tag(1.5, ctx, "m"))
    last = out[-1] if isinstance(out, list) else out
    assert parts(last, ctx) == (1.5, "m")


def iterate_every_way(t, u):
    """Store tagged values into containers, then read them back by iterating."""
    lst = [0.5, t]
    lst.append(u)
    pairs = []
    pairs.append((t, 1))
    arr = np.zeros(3)
    arr[1] = t
    looped = []
    for v in lst:
        looped.append(v)
    first, middle, last = lst
    unpacked_pairs = [a for a, _ in pairs]
    nested = []
    nested.append((0.0, (t, [u, 2.0])))
    deep = [(b, c) for _, (b, [c, _]) in nested if b > 0]
    starred_target = [rest for *rest, _ in pairs]
    for a, b in pairs:
        looped_pair = a
    spread = (lambda *xs: xs[1])(*lst)
    rows = [v for v in arr]
    return {
        "for": looped[1], "comprehension": [v for v in lst][2], "generator": next(
            v for v in lst if v == 7.0), "unpack": middle, "unpack-last": last,
        "comprehension-target-unpack": unpacked_pairs[0], "for-target-unpack": looped_pair,
        "starred": spread, "array-rows": rows[1], "max": max(lst), "sorted": sorted(lst)[1],
        "list": list(lst)[1], "tuple": tuple(lst)[2], "enumerate": list(enumerate(lst))[1][1],
        "zip": list(zip(lst, lst))[2][0], "reversed": list(reversed(lst))[0],
        "min-key": min(lst, key=lambda v: -v),
        "comprehension-nested-targets": deep[0][1], "comprehension-starred-target":
            starred_target[0][0],
    }


EXPECTED_ITERATED = {"for": (1.5, "t"), "comprehension": (7.0, "u"), "generator": (7.0, "u"),
                     "unpack": (1.5, "t"), "unpack-last": (7.0, "u"),
                     "comprehension-target-unpack": (1.5, "t"), "for-target-unpack": (1.5, "t"),
                     "starred": (1.5, "t"), "array-rows": (1.5, "t"), "max": (7.0, "u"),
                     "sorted": (1.5, "t"), "list": (1.5, "t"), "tuple": (7.0, "u"),
                     "enumerate": (1.5, "t"), "zip": (7.0, "u"), "reversed": (7.0, "u"),
                     "min-key": (7.0, "u"), "comprehension-nested-targets": (7.0, "u"),
                     "comprehension-starred-target": (1.5, "t")}


def test_iteration_reads_stored_metadata_back():
    """for loops, comprehensions, unpacking, ``*`` arguments and the builtins that consume an
    iterable give the stored values back with their metadata, a comprehension's unpacking
    targets (nested, starred, with conditions) as a ``for`` statement's."""
    ctx = Plain()
    out = run(ctx, iterate_every_way, tag(1.5, ctx, "t"), tag(7.0, ctx, "u"))
    assert {k: parts(v, ctx) for k, v in out.items()} == EXPECTED_ITERATED
    assert iterate_every_way(1.5, 7.0) == {k: v[0] if isinstance(v, tuple) else v
                                           for k, v in EXPECTED_ITERATED.items()}


def iterate_while_mutating(t):
    lst = []
    lst.append(t)
    lst.extend([2.0, 3.0])
    seen = []
    for v in lst:
        seen.append(v)
        if len(lst) < 5:
            lst.append(v)
    return [v for v in seen]  # read back inside the run: the heap's metadata ends with it


def test_iterating_a_list_with_metadata_sees_its_changes_like_a_list_iterator():
    ctx = Plain()
    out = run(ctx, iterate_while_mutating, tag(1.0, ctx, "m"))
    assert [untag(v, ctx) for v in out] == iterate_while_mutating(1.0)
    assert [has_metadata(v, ctx) for v in out] == [True, False, False, True, False]


class Countdown:
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n, 0, -1))


def iterate_user_class(t):
    stored = [t]
    return [v for v in Countdown(3)], stored[0]


def test_iteration_under_tags_still_sees_user_iter_methods():
    class Calls(Context):
        def prehook(self, fn, /, *args, **kwargs):
            self.metadata.append(getattr(fn, "__name__", None))

    ctx = Calls(metadata=[])
    values, kept = run(ctx, iterate_user_class, tag(1.0, ctx, "m"))
    assert values == [3, 2, 1] and parts(kept, ctx) == (1.0, "m")
    assert "__iter__" in ctx.metadata  # Countdown.__iter__ ran inside the context


@pytest.mark.parametrize("ctx_class", [Plain, Dual], ids=["no-primitives", "dual"])
def test_weird_identity(ctx_class):
    ctx = ctx_class()
    out = run(ctx, weird_identity, tag(1.0, ctx, 2.0))
    assert type(out) is Tagged
    assert untag(out, ctx) == 1.0
    assert metadata(out, ctx) == 2.0
    assert weird_identity(1.0) == 1.0


# -- 4. nested contexts --------------------------------------------------------------------------


def nested_inner(z, outer, inner):
    holder = Box()
    holder.v = z
    v = holder.v
    return v, has_metadata(v, inner), has_metadata(v, outer)


def nested_outer(y, outer):
    inner = Plain()
    z = tag(y, inner, "inner")
    v, inner_saw_inner, inner_saw_outer = run(inner, nested_inner, z, outer, inner)
    return v, inner, inner_saw_inner, inner_saw_outer, has_metadata(v, outer)


def test_nested_contexts_keep_both_metadata():
    outer = Plain()
    v, inner, saw_inner, saw_outer, outer_sees = run(outer, nested_outer, tag(1.0, outer, "o"),
                                                     outer)
    assert saw_inner and saw_outer and outer_sees
    assert metadata(v, outer) == "o" and metadata(v, inner) == "inner"
    assert untag(untag(v, inner), outer) == 1.0
    assert metadata(untag(v, inner), outer) == "o"
    assert metadata(untag(v, outer), inner) == "inner"


def inner_overwrites(z, holder):
    holder.a = z
    holder.extra = z
    return 0


def outer_keeps(y, outer):
    holder = Box()
    holder.a = y
    inner = Plain()
    before = metadata(holder.a, outer)
    run(inner, inner_overwrites, tag(holder.a, inner, "inner"), holder)
    a, extra = holder.a, holder.extra
    return (before, has_metadata(a, outer) and metadata(a, outer), has_metadata(a, inner),
            has_metadata(extra, outer) and metadata(extra, outer), has_metadata(extra, inner),
            has_metadata(y, outer) and metadata(y, outer))


def test_leaving_the_inner_context_leaves_outer_metadata_intact():
    outer = Plain()
    got = run(outer, outer_keeps, tag(1.0, outer, "o"), outer)
    assert got == ("o", "o", False, "o", False, "o")


class Taint(Context):
    """Metadata is a set of labels; ``+``, ``*`` and comparisons propagate their union."""

    def metadata_type(self, value_type: type) -> Any:
        return frozenset


def _union_of_labels(fn: Any) -> Any:
    def impl(ctx: Taint, *args: Any) -> Any:
        labels = frozenset().union(*[metadata(a, ctx) for a in args if has_metadata(a, ctx)])
        out = fn(*[untag(a, ctx) for a in args])
        return tag(out, ctx, labels) if labels else out
    return impl


for _op in (operator.add, operator.mul, operator.lt, operator.gt):
    Taint.primitive(_op)(_union_of_labels(_op))


def appended_then_summed(a):
    items = []
    items.append(a)
    return sum(items)


def appended_then_sorted(a):
    items = []
    items.append(a)
    items.append(a * 2.0)
    return sorted(items, key=lambda t: -t)[0]


def appended_then_max(a):
    items = []
    items.append(a)
    items.append(1.0)
    return max(items, key=lambda t: t)


def appended_then_reduced(a):
    items = []
    items.append(a)
    return functools.reduce(operator.add, items, 0.0)


def appended_then_mapped(a):
    items = []
    items.append(a)
    return list(map(lambda t: t * 3.0, items))[0]


def written_then_summed(a):
    items = [0.0]
    items[0] = a
    return sum(items)


def appended_to_an_attribute_then_summed(a):
    holder = Box()
    holder.items = []
    holder.items.append(a)
    holder.items.append(1.0)
    return sum(holder.items)


@pytest.mark.parametrize("inner_tags_too", [False, True])
@pytest.mark.parametrize("fn", [appended_then_summed, appended_then_sorted, appended_then_max,
                                appended_then_reduced, appended_then_mapped,
                                written_then_summed, appended_to_an_attribute_then_summed])
def test_an_inner_context_consuming_a_list_keeps_the_outer_metadata(fn, inner_tags_too):
    # the list is built inside the inner run; its items' outer metadata lives with the outer
    # context, which must see sum/sorted/max/reduce/map read them (found from outside: sum
    # gave the value without the outer label)
    outer, inner = Taint(), Taint()

    def in_the_inner_context(q):
        if inner_tags_too:
            tag(1.0, inner, frozenset({"inner"}))
        return fn(q)

    got = run(outer, lambda q: run(inner, in_the_inner_context, q),
              tag(3.0, outer, frozenset({"outer"})))
    assert has_metadata(got, outer) and metadata(got, outer) == frozenset({"outer"})
    assert untag(got, outer) == fn(3.0)


Fields = namedtuple("Fields", "u v")


class FieldsWithMethods(Fields):
    def total(self):
        return self.u + self.v


def named_tuple_fields_read_back(a):
    # stored into a list, a dict and an object, then read by field name: the tuple is kept
    # without the tags, its positions' metadata in the shadow
    made = []
    made.append(Fields(a, 2.0))
    slots = {"k": FieldsWithMethods(1.0, a)}
    holder = Box()
    holder.p = Fields(a, a)
    return (made[0].u, slots["k"].v, slots["k"].total(), holder.p.v, made[-1].v,
            operator.attrgetter("u")(made[0]), getattr(holder.p, "u"), made[0]._asdict()["u"])


def test_named_tuple_fields_keep_stored_metadata():
    ctx = Taint()
    got = run(ctx, named_tuple_fields_read_back, tag(3.0, ctx, frozenset({"x"})))
    tagged = [has_metadata(value, ctx) for value in got]
    assert tagged == [True, True, True, True, False, True, True, True]
    assert [untag(value, ctx) for value in got] == list(named_tuple_fields_read_back(3.0))


def confusion(x):
    def inner(y):
        return x + y
    return x * derivative(inner, 2.0)


def test_nested_derivatives_do_not_confuse_perturbations():
    # d/dx [x * d/dy (x + y)] = d/dx [x] = 1; with confused tags it would be 2
    assert derivative(confusion, 1.0) == 1.0


def times_three(v):
    return v * 3.0


def nested_scale_body(x):
    inner = Scale()                     # same class, another instance: x is not its value
    tag(0.0, inner, 0.0)                # the inner context handles tags too
    return run(inner, times_three, x)


def test_inner_primitive_on_tagged_ignores_the_outer_contexts_tags():
    outer = Scale()
    out = run(outer, nested_scale_body, tag(2.0, outer, 0.5))
    assert parts(out, outer) == (6.0, 1.5)


def mixed_partial(x, typed=False):
    def inner(y):
        return x * y
    return derivative(inner, 3.0, typed)


def mixed_partial_typed(x):
    return mixed_partial(x, True)


def test_nested_derivative_of_a_product():
    # d/dx d/dy (x * y) = 1
    assert derivative(mixed_partial, 5.0) == 1.0


def test_nested_derivative_with_declared_float_metadata():
    assert derivative(mixed_partial_typed, 5.0, typed=True) == 1.0


# -- 5. nothing leaks ----------------------------------------------------------------------------


GLOBAL_LIST: list = [0.0]
GLOBAL_DICT: dict = {}
GLOBAL_MEMO: dict = {}
GLOBAL_OBJECT = Box()
GLOBAL_ARRAY = np.zeros(3)
GLOBAL_OBJECT_ARRAY = np.empty(3, dtype=object)


def memo_square(x, key):
    if key not in GLOBAL_MEMO:
        GLOBAL_MEMO[key] = x * x
    return GLOBAL_MEMO[key]


def store_everywhere(x, passed_obj, passed_list, passed_array):
    GLOBAL_LIST[0] = x
    GLOBAL_LIST.append(x)
    GLOBAL_LIST.insert(0, x)
    GLOBAL_LIST.extend([x, 0.5])
    GLOBAL_LIST[1:2] = [x]
    GLOBAL_DICT["k"] = x
    GLOBAL_DICT.update(kw=x)
    GLOBAL_DICT.setdefault("sd", x)
    GLOBAL_OBJECT.a = x
    setattr(GLOBAL_OBJECT, "b", x)
    GLOBAL_OBJECT.__dict__["c"] = x
    GLOBAL_ARRAY[0] = x
    GLOBAL_OBJECT_ARRAY[0] = x
    GLOBAL_OBJECT_ARRAY[1:3] = [x, x]
    passed_obj.a = x
    passed_list.append(x)
    passed_array[1] = x
    return memo_square(x, "sq")


def store_containers(x):
    GLOBAL_LIST.append((x, 1.0))
    GLOBAL_LIST.append(NBox(x, 1.0))
    GLOBAL_DICT["nested"] = {"k": x}
    GLOBAL_OBJECT.items = [x]
    return 0


def store_by_iadd(x):
    lst = GLOBAL_LIST
    lst += [x]
    GLOBAL_DICT.update({"u": x})
    return 0


def contains_tagged(obj: Any, seen: set | None = None) -> bool:
    seen = set() if seen is None else seen
    if type(obj) is Tagged:
        return True
    if id(obj) in seen:
        return False
    seen.add(id(obj))
    if isinstance(obj, dict):
        return any(contains_tagged(k, seen) or contains_tagged(v, seen) for k, v in obj.items())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return any(contains_tagged(v, seen) for v in obj)
    if isinstance(obj, np.ndarray):
        return obj.dtype == object and any(contains_tagged(v, seen) for v in obj.ravel())
    if hasattr(obj, "__dict__"):
        return contains_tagged(vars(obj), seen)
    return False


def _reset_globals() -> None:
    GLOBAL_LIST[:] = [0.0]
    GLOBAL_DICT.clear()
    GLOBAL_MEMO.clear()
    GLOBAL_OBJECT.__dict__.clear()
    GLOBAL_ARRAY[:] = 0.0
    GLOBAL_OBJECT_ARRAY[:] = None


def _global_data() -> list:
    return [GLOBAL_LIST, GLOBAL_DICT, GLOBAL_MEMO, GLOBAL_OBJECT, GLOBAL_ARRAY,
            GLOBAL_OBJECT_ARRAY]


@pytest.mark.parametrize("ctx_class", [Plain, Dual], ids=["no-primitives", "dual"])
def test_data_that_existed_before_the_call_holds_plain_values(ctx_class):
    _reset_globals()
    ctx = ctx_class()
    passed_obj, passed_list, passed_array = Box(), [], np.zeros(2)
    out = run(ctx, store_everywhere, tag(1.5, ctx, 0.5), passed_obj, passed_list, passed_array)
    assert untag(out, ctx) == 2.25
    for data in [*_global_data(), passed_obj, passed_list, passed_array]:
        assert not contains_tagged(data), data
    assert GLOBAL_LIST == [1.5, 1.5, 1.5, 1.5, 0.5]
    assert all(type(v) is float for v in GLOBAL_LIST)
    assert GLOBAL_DICT == {"k": 1.5, "kw": 1.5, "sd": 1.5}
    assert vars(GLOBAL_OBJECT) == {"a": 1.5, "b": 1.5, "c": 1.5}
    assert list(GLOBAL_OBJECT_ARRAY) == [1.5, 1.5, 1.5]
    assert all(type(v) is float for v in GLOBAL_OBJECT_ARRAY)
    assert GLOBAL_ARRAY[0] == 1.5 and passed_array[1] == 1.5
    assert passed_obj.a == 1.5 and passed_list == [1.5]
    assert GLOBAL_MEMO == {"sq": 2.25} and type(GLOBAL_MEMO["sq"]) is float
    _reset_globals()


@pytest.mark.parametrize("fn", [store_containers, store_by_iadd], ids=lambda fn: fn.__name__)
def test_containers_made_inside_do_not_leak_tags_into_old_data(fn):
    _reset_globals()
    ctx = Plain()
    try:
        run(ctx, fn, tag(1.5, ctx, 0.5))
        for data in _global_data():
            assert not contains_tagged(data), data
    finally:
        _reset_globals()


def return_in_container(x):
    return [x, (x,)]


def test_escaped_value_raises_naming_its_context():
    ctx = Plain()
    escaped = run(ctx, return_in_container, tag(1.5, ctx, 0.5))[0]
    assert type(escaped) is Tagged
    name, address = label_parts(ctx)
    uses = [lambda: escaped + 1.0, lambda: 1.0 + escaped, lambda: escaped * 2,
            lambda: bool(escaped), lambda: float(escaped), lambda: int(escaped),
            lambda: hash(escaped), lambda: f"{escaped:.3f}", lambda: str(escaped),
            lambda: escaped == 1.5, lambda: 1.5 == escaped, lambda: escaped < 2.0,
            lambda: -escaped, lambda: math.sqrt(escaped), lambda: {escaped: 1},
            lambda: escaped.is_integer(), lambda: np.asarray(escaped)]
    for use in uses:
        with pytest.raises(TagError) as err:
            use()
        assert name in str(err.value) and address in str(err.value)
        assert "outside" in str(err.value)
    seq = tag((1.0, 2.0), ctx, "m")
    for use in (lambda: len(seq), lambda: list(seq), lambda: tuple(seq)):
        with pytest.raises(TagError):
            use()
    # the escaped value is still usable with the public API
    assert untag(escaped, ctx) == 1.5 and metadata(escaped, ctx) == 0.5


@pytest.mark.parametrize("use", [lambda seq: seq[0], lambda seq: 1.0 in seq],
                         ids=["index", "contains"])
def test_indexing_an_escaped_tagged_container_names_its_context(use):
    ctx = Plain()
    seq = tag((1.0, 2.0), ctx, "m")
    with pytest.raises(TagError) as err:
        use(seq)
    assert all(part in str(err.value) for part in label_parts(ctx))


def add_one(v):
    return v + 1.0


def test_tagged_value_used_inside_another_context_raises():
    owner, other = Plain(), Plain()
    x = tag(1.5, owner, 0.5)
    with pytest.raises(TagError) as err:
        run(other, add_one, x)
    assert all(part in str(err.value) for part in label_parts(owner))


@pytest.mark.xfail(strict=True, reason="overdub bug: isinstance() on an escaped Tagged does not "
                   "touch its dunders and silently answers False (a __class__ property that "
                   "checks the context would make it raise / answer for the value)")
def test_isinstance_on_an_escaped_value_is_not_silently_false():
    ctx = Plain()
    escaped = run(ctx, return_in_container, tag(1.5, ctx, 0.5))[0]
    with pytest.raises(TagError):
        isinstance(escaped, float)


def test_value_of_a_garbage_collected_context_raises():
    ctx = Plain()
    x = tag(1.5, ctx, 0.5)
    name, address = label_parts(ctx)
    ref = weakref.ref(ctx)
    del ctx
    gc.collect()
    assert ref() is None
    for use in (lambda: x + 1.0, lambda: float(x), lambda: bool(x), lambda: f"{x}"):
        with pytest.raises(TagError) as err:
            use()
        assert "garbage-collected" in str(err.value)
        assert name in str(err.value) and address in str(err.value)
    with pytest.raises(TagError):
        run(Plain(), add_one, x)


STALE_STORE: dict = {}


def store_global_item(x):
    STALE_STORE["k"] = x
    return 0


def read_global_item():
    return STALE_STORE["k"]


def test_a_later_run_does_not_see_an_earlier_runs_metadata():
    ctx = Plain()
    try:
        run(ctx, store_global_item, tag(1.5, ctx, 0.5))
        assert type(STALE_STORE["k"]) is float
        out = run(ctx, read_global_item)
        assert type(out) is not Tagged and out == 1.5
    finally:
        STALE_STORE.clear()


class WeakDict(dict):
    pass


class WeakList(list):
    pass


def make_tagged_objects(x):
    b = Box()
    b.a = x
    d = WeakDict()
    d["k"] = x
    lst = WeakList([0.0])
    lst[0] = x
    return weakref.ref(b), weakref.ref(d), weakref.ref(lst)


def test_shadow_does_not_keep_dropped_objects_alive():
    ctx = Plain()
    refs = run(ctx, make_tagged_objects, tag(1.5, ctx, 0.5))
    gc.collect()
    assert [ref() for ref in refs] == [None, None, None]
    assert ctx is not None  # the context is alive all along


# -- 6. Context.metadata_type ------------------------------------------------------------------


def test_metadata_type_is_enforced_by_tag():
    ctx = FloatsOnly()
    x = tag(1.0, ctx, 2.0)
    assert metadata(x, ctx) == 2.0
    with pytest.raises(TypeError) as err:
        tag(1.0, ctx, "not a float")
    assert "FloatsOnly" in str(err.value) and "str" in str(err.value)
    with pytest.raises(TypeError) as err:
        tag("text", ctx, 1.0)
    assert "FloatsOnly" in str(err.value) and "str" in str(err.value)
    with pytest.raises(TypeError):
        tag(1, ctx, 1.0)
    # the value type is the plain value's: another context's layer does not matter
    other = Plain()
    layered = tag(tag(1.0, other, "o"), ctx, 3.0)
    assert metadata(layered, ctx) == 3.0 and metadata(layered, other) == "o"


@pytest.mark.parametrize("not_a_context", [5, None, Plain, object(), "ctx"],
                         ids=["int", "None", "class", "object", "str"])
def test_tag_with_a_non_context_is_a_type_error(not_a_context):
    with pytest.raises(TypeError) as err:
        tag(1.0, not_a_context, 2.0)
    assert "Context" in str(err.value)


# -- 7. shadow memory (speed is measured by benchmarks/bench_tagging.py, not asserted) ---------


def fill_every(arr, t, step, block):
    for i in range(0, len(arr), step):
        arr[i] = t
    arr[1:3] = [t, t]
    arr[1::2] = block
    return arr[100], arr[2], arr[7], arr[4]


def test_array_shadow_costs_one_array_not_an_object_per_element():
    ctx = Plain()
    t = tag(1.5, ctx, 0.25)
    arr = np.zeros(10**6)
    half = 10**6 // 2
    block = tag(np.full(half, 2.0), ctx, np.linspace(0.0, 1.0, half))
    run(ctx, identity, 0)
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        # 10^4 single-element writes, a slice of two, then half the array from a tagged block;
        # the shadow lives while the run does (it is measured at its peak, inside the run)
        hit, hit2, from_block, miss = run(ctx, fill_every, arr, t, 100, block)
        grown = tracemalloc.get_traced_memory()[1] - base
        assert parts(hit, ctx) == (1.5, 0.25) and parts(hit2, ctx) == (1.5, 0.25)
        assert parts(from_block, ctx) == (2.0, metadata(block, ctx)[3])
        assert type(miss) is not Tagged
        # a float metadata array (1x) and a boolean mask (1/8x); a Python object per tagged
        # element (510,000 of them) would be several times the array
        assert arr.nbytes * 0.9 <= grown <= arr.nbytes * 1.5, grown / arr.nbytes
        nbytes = arr.nbytes
        del arr, hit, hit2, from_block, miss
        gc.collect()
        left = tracemalloc.get_traced_memory()[0] - base
        assert left <= 0.05 * nbytes, left / nbytes   # the shadow is released after the run
    finally:
        tracemalloc.stop()


# -- 8. fuzz: tagged and plain runs agree --------------------------------------------------------


ARITHMETIC = ["add", "radd", "sub", "rsub", "mul", "rmul", "div"]
STORES = ["attr", "dataclass", "slots", "namedtuple", "tuple", "list_append", "dict",
          "array_slice", "nested"]
DROPS = ["float", "abs"]


def run_ops(x, ops):
    for op in ops:
        kind = op[0]
        if kind == "add":
            x = x + op[1]
        elif kind == "radd":
            x = op[1] + x
        elif kind == "sub":
            x = x - op[1]
        elif kind == "rsub":
            x = op[1] - x
        elif kind == "mul":
            x = x * op[1]
        elif kind == "rmul":
            x = op[1] * x
        elif kind == "div":
            x = x / op[1]
        elif kind == "neg":
            x = -x
        elif kind == "branch":
            if x > op[1]:
                x = x + 1.0
            else:
                x = x * 2.0
        elif kind == "attr":
            b = Box()
            b.v = x
            x = b.v
        elif kind == "dataclass":
            x = DBox(x).a
        elif kind == "slots":
            x = SBox(0.0, x).b
        elif kind == "namedtuple":
            x = NBox(0.0, x).b
        elif kind == "tuple":
            x = (0.0, x)[1]
        elif kind == "list_append":
            lst = [0.0]
            lst.append(x)
            x = lst.pop()
        elif kind == "list_set":
            lst = [0.0, 0.0]
            lst[op[1]] = x
            lst.reverse()
            x = lst[1 - op[1]]
        elif kind == "dict":
            d = {}
            d["k"] = x
            x = d["k"]
        elif kind == "array":
            a = np.zeros(4)
            a[op[1]] = x
            x = a[op[1]]
        elif kind == "array_slice":
            a = np.zeros(4)
            a[1:3] = [x, x]
            x = a[2]
        elif kind == "nested":
            b = Box()
            b.items = {"xs": [0.0]}
            b.items["xs"].append(x)
            x = b.items["xs"][1]
        elif kind == "float":
            x = float(x)
        elif kind == "abs":
            x = abs(x)
    return x


NO_META = object()  # the reference's "this value carries no metadata" (None is a valid metadata)


def expected_metadata(x0, ops, meta, mode):
    """What the tagged run's result must carry: ``meta`` (Plain: heap only), the derivative
    (Dual), or NO_META (dropped)."""
    x, m = x0, meta
    for op in ops:
        kind = op[0]
        if m is not NO_META:
            if kind in DROPS:
                m = NO_META
            elif mode == "plain" and kind in ARITHMETIC + ["neg", "branch"]:
                m = NO_META
            elif mode == "dual":
                k = op[1] if len(op) > 1 else None
                if kind in ("rsub", "neg"):
                    m = -m
                elif kind in ("mul", "rmul"):
                    m = m * k
                elif kind == "div":
                    m = m / k
                elif kind == "branch" and not x > k:
                    m = m * 2.0
        x = run_ops(x, [op])
    return m


constants = st.one_of(st.floats(min_value=0.5, max_value=3.0),
                      st.floats(min_value=-3.0, max_value=-0.5))
operations = st.one_of(
    st.tuples(st.sampled_from(ARITHMETIC), constants),
    st.tuples(st.sampled_from(STORES + DROPS + ["neg"])),
    st.tuples(st.just("branch"), constants),
    st.tuples(st.just("list_set"), st.integers(0, 1)),
    st.tuples(st.just("array"), st.integers(0, 3)),
)
programs = st.lists(operations, max_size=25)
starts = st.floats(min_value=-10.0, max_value=10.0, allow_nan=False)
# (text without NUL: NumPy's shadow strips trailing NULs, see test_numpy_shadow_keeps_any_metadata)
metas = st.one_of(st.floats(min_value=-5, max_value=5, allow_nan=False),
                  st.text(alphabet="abcxyz", max_size=3), st.none())
FUZZ = settings(max_examples=200, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])
SHARED_PLAIN = Plain()


def _same_plain(got: Any, want: Any) -> None:
    assert type(got) is not Tagged
    assert got == want or (math.isnan(got) and math.isnan(want)), (got, want)


@FUZZ
@given(starts, programs, metas)
def test_fuzz_plain_context_matches_plain_run(x0, ops, meta):
    ctx = SHARED_PLAIN                 # one instance across examples: shadows must not interfere
    want = run_ops(x0, ops)
    out = run(ctx, run_ops, tag(x0, ctx, meta), ops)
    _same_plain(untag(out, ctx), want)
    expected = expected_metadata(x0, ops, meta, "plain")
    if _touches_value(ops):
        assert expected is NO_META and not has_metadata(out, ctx)
    else:
        assert has_metadata(out, ctx)
        assert metadata(out, ctx) == expected == meta


@FUZZ
@given(starts, programs)
def test_fuzz_dual_context_matches_plain_run_and_derivative(x0, ops):
    ctx = Dual()                       # a fresh instance per example
    want = run_ops(x0, ops)
    out = run(ctx, run_ops, tag(x0, ctx, 1.0), ops)
    _same_plain(untag(out, ctx), want)
    expected = expected_metadata(x0, ops, 1.0, "dual")
    if expected is NO_META:
        assert not has_metadata(out, ctx)
    else:
        assert has_metadata(out, ctx)
        assert math.isclose(metadata(out, ctx), expected, rel_tol=1e-9, abs_tol=1e-12)


def nested_fuzz_body(x, ops, meta):
    inner = Plain()
    return run(inner, run_ops, tag(x, inner, meta), ops), inner


def _touches_value(ops: list) -> bool:
    return any(op[0] in DROPS + ARITHMETIC + ["neg", "branch"] for op in ops)


@FUZZ
@given(starts, programs, metas)
def test_fuzz_nested_contexts_keep_their_own_metadata(x0, ops, meta):
    outer = Plain()
    out, inner = run(outer, nested_fuzz_body, tag(x0, outer, "outer"), ops, meta)
    want = run_ops(x0, ops)
    if _touches_value(ops):            # no primitives: arithmetic drops both layers
        _same_plain(out, want)
    else:
        assert metadata(out, inner) == meta and metadata(out, outer) == "outer"
        assert metadata(untag(out, inner), outer) == "outer"
        _same_plain(untag(untag(out, outer), inner), want)


# stateful fuzz: values go in and out of long-lived places (an object, a list, a dict, an array)
# and are overwritten by later stores, tagged or not

SLOT_OPS = ["box_store", "box_load", "lst_store", "lst_load", "dict_store", "dict_load",
            "arr_store", "arr_load"]


def run_stateful(x, ops):
    box = Box()
    box.v = 0.0
    lst = [0.0, 0.0, 0.0]
    d = {0: 0.0, 1: 0.0, 2: 0.0}
    arr = np.zeros(3)
    for op in ops:
        kind = op[0]
        if kind == "box_store":
            box.v = x
        elif kind == "box_load":
            x = box.v
        elif kind == "lst_store":
            lst[op[1]] = x
        elif kind == "lst_load":
            x = lst[op[1]]
        elif kind == "dict_store":
            d[op[1]] = x
        elif kind == "dict_load":
            x = d[op[1]]
        elif kind == "arr_store":
            arr[op[1]] = x
        elif kind == "arr_load":
            x = arr[op[1]]
        else:
            x = run_ops(x, [op])
    return x


def stateful_reference(x0, meta, ops, mode):
    """(plain result, metadata the tagged run's result must carry or NO_META), by simulation."""
    x, m = x0, meta
    places = {("box", 0): (0.0, NO_META)}
    for i in range(3):
        places[("lst", i)] = places[("dict", i)] = (0.0, NO_META)
        places[("arr", i)] = (np.float64(0.0), NO_META)
    for op in ops:
        kind = op[0]
        if kind in SLOT_OPS:
            where = (kind.split("_")[0], op[1] if len(op) > 1 else 0)
            if kind.endswith("store"):
                places[where] = (np.float64(x) if where[0] == "arr" else x, m)
            else:
                x, m = places[where]
        else:
            m = expected_metadata(x, [op], m, mode)
            x = run_ops(x, [op])
    return x, m


slot_operations = st.one_of(
    st.tuples(st.sampled_from(["box_store", "box_load"])),
    st.tuples(st.sampled_from(SLOT_OPS[2:]), st.integers(0, 2)),
)
def stateful_programs(with_float: bool) -> Any:
    """Without "float": float(x) of a float is the very same object, which hits the list
    identity bug (test_list_metadata_does_not_spread_to_the_same_object_stored_plainly)."""
    basic = operations if with_float else operations.filter(lambda op: op[0] != "float")
    return st.lists(st.one_of(slot_operations, slot_operations, basic), max_size=30)


def _check_stateful(ctx, x0, ops, meta, mode):
    want, expected = stateful_reference(x0, meta, ops, mode)
    assert run_stateful(x0, ops) == want
    out = run(ctx, run_stateful, tag(x0, ctx, meta), ops)
    _same_plain(untag(out, ctx), want)
    if expected is NO_META:
        assert not has_metadata(out, ctx)
    else:
        assert has_metadata(out, ctx)
        if mode == "dual":
            assert math.isclose(metadata(out, ctx), expected, rel_tol=1e-9, abs_tol=1e-12)
        else:
            assert metadata(out, ctx) == expected


@FUZZ
@given(starts, stateful_programs(with_float=False), metas)
def test_fuzz_stateful_plain_context(x0, ops, meta):
    _check_stateful(SHARED_PLAIN, x0, ops, meta, "plain")


@FUZZ
@given(starts, stateful_programs(with_float=False))
def test_fuzz_stateful_dual_context(x0, ops):
    _check_stateful(Dual(), x0, ops, 1.0, "dual")


class _Cubes:
    """A lookup written in Python: a tagged key must reach its __getitem__ as it is."""

    def __getitem__(self, key):
        return key * key * key


def test_a_tagged_key_reaches_a_python_getitem():
    assert derivative(lambda x: _Cubes()[x], 2.0) == 12.0
    table = _Cubes()
    assert derivative(lambda x: table[x] + table[2.0 * x], 1.0) == 3.0 + 24.0


def test_tags_values_tells_a_tagging_context_from_one_that_only_watches():
    from overdub import tags_values
    watching, tagging = Plain(), Plain()
    run(watching, lambda: 1.0 + 2.0)
    assert not tags_values(watching)
    tag(1.0, tagging, "m")
    assert tags_values(tagging)
    with pytest.raises(TypeError, match=r"tags_values\(ctx\): ctx must be a Context"):
        tags_values(object())


def returned_in_a_display(t):
    return [t], {"k": t}


def returned_in_a_filled_list(t):
    items = []
    items.append(t)
    return items


def test_what_a_run_returns_keeps_metadata_as_the_concepts_page_says():
    # docs/concepts.md: displays returned hold the tagged values; a list filled through the
    # heap holds plain values once the context returns
    ctx = Plain()
    listed, mapped = run(ctx, returned_in_a_display, tag(1.0, ctx, "m"))
    assert metadata(listed[0], ctx) == "m" and metadata(mapped["k"], ctx) == "m"
    filled = run(ctx, returned_in_a_filled_list, tag(1.0, ctx, "m"))
    assert filled == [1.0] and type(filled[0]) is float


# -- found from outside (session 10): metadata through reduce and max(a, b); natively run code ---

def test_reduce_over_a_list_filled_by_append_keeps_metadata():
    ctx = Context()

    def f(t):
        items = [1.0]
        items.append(t)
        return items[1], functools.reduce(lambda a, b: b, items)

    out = run(ctx, f, tag(2.0, ctx, "m"))
    assert [has_metadata(v, ctx) for v in out] == [True, True]


def test_max_and_min_of_positional_arguments_keep_metadata():
    ctx = Context()

    def f(t):
        return max(t, 0.1), min(t, 5.0), max(0.1, t, 0.2), max(t, -1.0, key=abs)

    out = run(ctx, f, tag(2.0, ctx, "m"))
    assert [has_metadata(v, ctx) for v in out] == [True] * 4
    assert run(Context(), f, 2.0) == f(2.0)
    hsv = run(ctx, lambda r: colorsys.rgb_to_hsv(r, 0.5, 0.2), tag(0.9, ctx, "m"))
    assert has_metadata(hsv[2], ctx)  # v = max(r, g, b)


def test_natively_run_code_computes_with_a_tagged_value_as_with_its_value():
    """divmod, round, math.trunc/floor/ceil and three-argument pow raised TypeError on a
    tagged value in code run natively (an opaque function)."""
    @opaque
    def native(x):
        return (divmod(x, 1), divmod(5, x), round(x), round(x, 1), math.trunc(x),
                math.floor(x), math.ceil(x), x ** 2, 2 ** x)

    ctx = Context()
    assert run(ctx, lambda v: native(tag(v, ctx, "m")), 7.3) == native(7.3)
    counted = opaque(lambda n: pow(n, 2, 5))
    ctx = Context()
    assert run(ctx, lambda v: counted(tag(v, ctx, "m")), 7) == 4


def test_native_use_is_told_what_unseen_code_computes_and_not_its_inspections():
    told = []

    class Watch(Context):
        def native_use(self, use, result):
            told.append(use)

    @opaque
    def native(x):
        return (x * 2.0, -x, float(x), divmod(x, 1.0), x > 1.0, bool(x), hash(x),
                f"{x:.1f}", int(x), round(x), math.floor(x))

    ctx = Watch()
    run(ctx, lambda v: native(tag(v, ctx, "m")), 2.5)
    assert told == ["operator *", "unary neg", "float()", "operator divmod"]


def test_a_metaclass_calling_super_call_runs_init_seen():
    """``super().__call__(...)`` in a metaclass's ``__call__`` is ``type.__call__`` called by
    name: the class's Python ``__init__`` runs through the context, as for ``cls(...)``."""
    from overdub.contexts import TraceContext

    class Meta(type):
        def __call__(cls, *args):
            return super().__call__(*args)

    class Point(metaclass=Meta):
        def __init__(self, x):
            self.x = x * 2

    ctx = TraceContext()
    point = run(ctx, lambda: Point(3))
    assert point.x == 6
    names = []

    def walk(trace):
        for call, sub in trace:
            names.append(getattr(call[0], "__name__", ""))
            walk(sub)

    walk(ctx.trace)
    assert "__init__" in names
