"""Attribute reads through ``super()``: the Python descriptor ``super``'s lookup finds (a
property, a ``functools.cached_property``, a class with a Python ``__get__``) runs through the
context, as it does for an ordinary attribute read of an instance.

``super`` is a C type, and the core took every operation on a C type for a native one: the
getter ran behind the context's back, unseen by its hooks, and metadata kept for the
attributes it read was lost (found by the eighth outside tester as a silent zero derivative).
"""

from __future__ import annotations

import functools
import operator

import pytest

from overdub import Context, Tagged, has_metadata, metadata, overdub, tag
from overdub.contexts import CountContext


class Base:
    def __init__(self, v):
        self.v = v

    @property
    def e(self):
        return self.v ** 2

    @functools.cached_property
    def c(self):
        return self.v ** 3

    def m(self):
        return self.v ** 2


class Zero(Base):
    @property
    def e(self):
        return super().e + 0.0

    @property
    def cached(self):
        return super().c - 0.0

    def m(self):
        return super().m() + 0.0


class Named(Base):
    @property
    def e(self):
        return super(Named, self).e + 0.0  # noqa: UP008 (the explicit form, tested)


class Scaled:
    def __get__(self, obj, typ=None):
        return typ.k * 3.0 if obj is None else obj.v * 10.0


class HasScaled:
    d = Scaled()
    k = 2.0

    def __init__(self, v):
        self.v = v


class ReadsScaled(HasScaled):
    def get(self):
        return super().d

    @classmethod
    def from_class(cls):
        return super().d


READS = {  # name: (thunk, the calls that must be seen)
    "super().property": (lambda: Zero(3.0).e, (Base.e.fget, operator.pow)),
    "super(C, self).property": (lambda: Named(3.0).e, (Base.e.fget, operator.pow)),
    "super().cached_property": (lambda: Zero(3.0).cached,
                                (functools.cached_property.__get__, Base.c.func, operator.pow)),
    "super(C, obj) outside a method": (lambda: super(Named, Named(3.0)).e,
                                       (Base.e.fget, operator.pow)),
    "super() descriptor __get__": (lambda: ReadsScaled(3.0).get(),
                                   (Scaled.__get__, operator.mul)),
    "super() descriptor __get__, class-bound": (lambda: ReadsScaled.from_class(),
                                                (Scaled.__get__, operator.mul)),
    "super().method()": (lambda: Zero(3.0).m(), (Base.m, operator.pow)),
}


@pytest.mark.parametrize("case", READS)
def test_a_count_context_sees_the_arithmetic_of_an_attribute_read_through_super(case):
    thunk, seen = READS[case]
    ctx = CountContext()
    assert overdub(ctx, thunk) == thunk()
    for fn in seen:
        assert ctx.counts[fn] == 1, (fn, ctx.counts)


def test_a_property_read_through_a_class_bound_super_is_the_property():
    class Sub(Base):
        @classmethod
        def prop(cls):
            return super().e

    ctx = CountContext()
    assert overdub(ctx, Sub.prop) is Base.e
    assert ctx.counts[Base.e.fget] == 0


class Carry(Context):
    """Keeps metadata only through the heap (no primitives): a tagged value stored as an
    attribute and read back by a getter keeps its tag only if the getter runs seen."""


class Raw(Base):
    @property
    def v2(self):
        return self.v


class Up(Raw):
    @property
    def v2(self):
        return super().v2


def stored_and_read_through_super(t):
    up = Up(t)
    return up.v2, super(Up, up).v2, up.v


def test_metadata_stored_in_an_attribute_survives_a_getter_reached_through_super():
    ctx = Carry()
    for got in overdub(ctx, stored_and_read_through_super, tag(3.0, ctx, "dx")):
        assert type(got) is Tagged and has_metadata(got, ctx) and metadata(got, ctx) == "dx"


class Raising(Base):
    @property
    def e(self):
        raise AttributeError("no e here")


class Doubled(Base):
    def __init__(self, v):
        super().__init__(v * 2)


class Below(Raising):
    @property
    def e(self):
        return getattr(super(), "e", -1.0)


TRANSPARENT = {
    "AttributeError from the getter, with a default": lambda: Below(3.0).e,
    "a name no base defines": lambda: getattr(super(Zero, Zero(1.0)), "missing", "dflt"),
    "a name no base defines, raised": lambda: super(Zero, Zero(1.0)).missing,
    "__class__ is super's own": lambda: super(Zero, Zero(1.0)).__class__,
    "an unbound super": lambda: super(Zero).__thisclass__,
    "the instance's dict does not hide the base's cached_property": lambda: (
        setattr(z := Zero(2.0), "c", 99.0), z.c, z.cached),
    "super().__init__": lambda: vars(Doubled(5.0)),
}


@pytest.mark.parametrize("case", TRANSPARENT)
def test_reads_through_super_are_transparent(case):
    thunk = TRANSPARENT[case]

    def outcome(run):
        try:
            return "ok", run()
        except Exception as exc:  # noqa: BLE001 (compared, not swallowed)
            return type(exc), str(exc)

    plain = outcome(thunk)
    for ctx in (Context(), CountContext(), Carry()):
        assert outcome(lambda: overdub(ctx, thunk)) == plain
