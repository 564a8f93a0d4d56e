"""Found by an outside tester (session 14): ``copy.copy``/``copy.deepcopy`` of an object whose
state C code reads.

``object.__reduce_ex__``, which both call, read a slotted object's values natively and ran a
class's own ``__getstate__`` or ``__reduce__`` unseen (a dataclass with ``slots=True`` has a
``__getstate__``): a copy's values lost the context's metadata (a derivative through
``saved = copy.copy(state)`` was 0).  It is now computed through the context for the instances
of classes defined in Python.  A copy must still be what it is natively, with the same errors,
under any context.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import gc
import io
import operator
import statistics
import weakref

import pytest

from overdub import Context, has_metadata, metadata, overdub, tag
from overdub.contexts import CountContext, TraceContext


class Slotted:
    __slots__ = ("y", "t")

    def __init__(self, y, t):
        self.y, self.t = y, t


class SlotsAndDict:
    __slots__ = ("y", "__dict__")

    def __init__(self, y, z):
        self.y, self.z = y, z


class Child(Slotted):  # (no __slots__: a __dict__ beside its base's slots)
    def __init__(self, y, t, z):
        super().__init__(y, t)
        self.z = z


class _Private:
    __slots__ = ("__y",)  # (mangled: _Private__y)

    def __init__(self, y):
        self.__y = y

    @property
    def y(self):
        return self.__y


@dataclasses.dataclass(slots=True)
class SlotsData:
    y: float
    t: float


class OwnState:
    def __init__(self, y):
        self.y = y

    def __getstate__(self):
        return {"y": self.y}

    def __setstate__(self, state):
        self.y = state["y"]


class OwnReduce:
    def __init__(self, y):
        self.y = y

    def __reduce__(self):
        return OwnReduce, (self.y,)


class HalfEmpty:
    __slots__ = ("y", "unset")

    def __init__(self, y):
        self.y = y


MAKERS = [
    pytest.param(lambda v: Slotted(v, 0.5), id="slots"),
    pytest.param(lambda v: SlotsAndDict(v, 2.0), id="slots-and-dict"),
    pytest.param(lambda v: Child(v, 0.5, 2.0), id="slotted-base"),
    pytest.param(_Private, id="mangled-slot"),
    pytest.param(lambda v: SlotsData(v, 0.5), id="dataclass-slots"),
    pytest.param(OwnState, id="getstate"),
    pytest.param(OwnReduce, id="reduce"),
    pytest.param(HalfEmpty, id="empty-slot"),
]
# (NormalDist converts its mean with float(), which drops a plain context's metadata: its
# copy is checked natively here, and with derivatives in tests/ad/test_found_outside_round16.py)
NATIVE_MAKERS = [*MAKERS, pytest.param(lambda v: statistics.NormalDist(v, 1.0), id="NormalDist")]


def _read(obj):
    return obj.mean if isinstance(obj, statistics.NormalDist) else obj.y


class _Tagging(Context):
    """A context that tags: a copy's value must carry the original's metadata."""

    def metadata_type(self, value_type):
        return str


@pytest.mark.parametrize("make", MAKERS)
@pytest.mark.parametrize("copier", [copy.copy, copy.deepcopy], ids=["copy", "deepcopy"])
def test_a_copy_keeps_the_metadata_of_what_the_object_held(make, copier):
    ctx = _Tagging()

    def f(v):
        original = make(tag(v, ctx, "m"))
        copied = copier(original)
        return has_metadata(_read(copied), ctx) and metadata(_read(copied), ctx), \
            type(copied) is type(original), _read(copied) == v

    for _ in range(2):
        assert overdub(ctx, f, 1.5) == ("m", True, True)


@pytest.mark.parametrize("make", NATIVE_MAKERS)
@pytest.mark.parametrize("copier", [copy.copy, copy.deepcopy], ids=["copy", "deepcopy"])
@pytest.mark.parametrize("ctx_class", [CountContext, TraceContext, Context])
def test_a_copy_is_what_it_is_natively(make, copier, ctx_class):
    def f(v):
        copied = copier(make(v))
        state = {name: getattr(copied, name) for name in ("y", "t", "z", "unset")
                 if hasattr(copied, name)}
        return type(copied).__name__, state, _read(copied)

    assert overdub(ctx_class(), f, 1.5) == f(1.5)


def test_a_failing_getstate_raises_as_natively():
    class Refuses:
        __slots__ = ("y",)

        def __getstate__(self):
            raise RuntimeError("not copyable")

    obj = Refuses()
    with pytest.raises(RuntimeError, match="not copyable"):
        copy.copy(obj)
    with pytest.raises(RuntimeError, match="not copyable"):
        overdub(CountContext(), copy.copy, obj)


def test_the_getstate_a_copy_calls_is_seen_by_the_context():
    ctx = CountContext()
    overdub(ctx, copy.copy, OwnState(1.0))
    assert any(getattr(fn, "__qualname__", "") == "OwnState.__getstate__"
               for fn in ctx.counts)


# -- a context class whose primitives tag their results -------------------------------------

class Box:
    pass


def _summing_class():
    """A context class whose primitive tags its result (the workaround of
    docs/limitations.md's "A context that makes its first tag inside a run")."""
    class Sums(Context):
        pass

    @Sums.primitive(operator.add, types=(int, int))
    def _sum(ctx, a, b):
        return tag(a + b, ctx, "sum")
    return Sums


def _stores(ctx, box, held, d):
    box.v = 1 + 1
    held.append(2 + 2)
    d["k"] = box.v
    return d["k"] is box.v, box.v.__class__ is int, isinstance(held[0], int), \
        metadata(box.v, ctx), metadata(held[0], ctx)


def test_tagging_before_the_first_run_keeps_that_run_plain_too():
    Sums = _summing_class()
    ctx = Sums()
    tag(0, ctx, "ready")
    box, held, d = Box(), [], {}
    assert overdub(ctx, _stores, ctx, box, held, d) == (True, True, True, "sum", "sum")
    assert box.v + 1 == 3 and held[0] + 1 == 5


# -- object.__setattr__ and the other object slots, read bound --------------------------------

class _Slots:
    def __init__(self, v):
        super().__setattr__("v", v)

    def set(self, v):
        self.__setattr__("w", v)


def test_bound_object_slots_are_what_they_are_natively_and_keep_metadata():
    ctx = _Tagging()

    def f(x):
        reads = [getattr(None, name).__self__ for name in ("__setattr__", "__delattr__",
                                                           "__getattribute__")]
        p = _Slots(x)
        p.set(x)
        object.__setattr__(p, "u", x)
        return reads, [metadata(v, ctx) for v in (p.v, p.w, p.u)]

    assert overdub(ctx, f, tag(1.5, ctx, "m")) == ([None] * 3, ["m", "m", "m"])


def test_unittest_mock_runs_under_a_tagging_context():
    from unittest.mock import Mock
    ctx = _Tagging()

    def use(x):
        log = Mock()
        log("value", x)
        return log.call_count, log.call_args[0][0]

    assert overdub(ctx, use, tag(1.5, ctx, "m")) == (1, "value")


# -- the reference contexts -------------------------------------------------------------------

def _greet(name):
    print("hello", name)


def _captured():
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        _greet("ada")
    return buffer.getvalue()


def test_a_log_is_not_captured_by_the_program_it_logs(capsys):
    from overdub.contexts import LogContext
    assert overdub(LogContext(), _captured) == _captured() == "hello ada\n"
    assert "_greet('ada')" in capsys.readouterr().out


def test_a_log_file_must_be_a_stream():
    from overdub.contexts import LogContext
    with pytest.raises(TypeError, match=r"LogContext\(file=...\): file must be a text stream"):
        LogContext(file="log.txt")


class _BadRepr:
    def __repr__(self):
        raise AttributeError("no name yet")

    def __call__(self, x):
        return x + 1


def test_a_callee_whose_repr_fails_is_logged_and_traced():
    from overdub.contexts import LogContext, TraceContext, describe
    out = io.StringIO()
    assert overdub(LogContext(file=out), lambda: _BadRepr()(1)) == 2
    assert "<_BadRepr (repr failed: AttributeError)>(1)" in out.getvalue()
    trace = TraceContext()
    assert overdub(trace, lambda: _BadRepr()(1)) == 2
    assert "repr failed" in trace.render()
    assert describe(_BadRepr()) == "<_BadRepr (repr failed: AttributeError)>"


def test_a_primitive_cannot_be_registered_on_context_itself():
    """(found from outside) ``Context().primitive(abs)(...)`` registered on the base class: every
    context class, CountContext's included, then ran the replacement."""
    with pytest.raises(TypeError, match="register primitives on a subclass of Context"):
        Context().primitive(abs)(lambda ctx, x: "polluted")
    with pytest.raises(TypeError, match="register primitives on a subclass of Context"):
        Context.primitive(abs)
    assert overdub(CountContext(), abs, -2) == 2


class _Celsius(float):
    def __float__(self):
        return self


class _Phasor(complex):
    def __complex__(self):
        return self


def _convert():
    return float(_Celsius(21.5)), complex(_Phasor(1 + 2j))


@pytest.mark.parametrize("ctx_class", [CountContext, TraceContext, _Tagging])
def test_a_conversion_returning_a_strict_subclass_converts_once_with_the_warning(ctx_class):
    """(found from outside) ``float(obj)`` whose ``__float__`` returns ``obj`` itself, a float
    subclass, recursed forever under a context."""
    with pytest.warns(DeprecationWarning) as native:
        want = _convert()
    with pytest.warns(DeprecationWarning) as seen:
        got = overdub(ctx_class(), _convert)
    assert got == want and [type(v) for v in got] == [float, complex]
    assert [str(w.message) for w in seen] == [str(w.message) for w in native]


def test_no_passes_may_be_said_with_none():
    assert Context(passes=None).passes == () and CountContext(passes=None).passes == ()
    assert overdub(Context(passes=None), abs, -2) == 2


class _Big:
    pass


def _use(obj):
    def inner():
        return obj
    return inner() is obj


def _alive_after_calls():
    refs = []
    for _ in range(50):
        obj = _Big()
        refs.append(weakref.ref(obj))
        _use(obj)
    del obj
    gc.collect()
    return sum(ref() is not None for ref in refs)


class _EmptyPrehook(Context):
    def prehook(self, fn, /, *args, **kwargs):
        pass


@pytest.mark.parametrize("ctx_class", [_EmptyPrehook, Context, _Tagging])
def test_a_closure_made_during_a_run_dies_with_its_last_reference(ctx_class):
    """(found from outside) each closure made and called during a run was kept, with what it
    captured, until the run ended: 5,000 calls held 51 MB."""
    assert _alive_after_calls() == 0
    ctx = ctx_class()
    for _ in range(2):  # (the second run: a State taken from the pool, for the prehook one)
        assert overdub(ctx, _alive_after_calls) == 0
