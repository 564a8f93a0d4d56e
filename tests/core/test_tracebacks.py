"""Errors and positions: what a user sees when something fails inside a context.

- A user exception comes out unchanged: the very object raised, same type, message, attributes,
  cause and context, and no note added.
- The traceback's frames in the user's file are the plain run's frames: same functions, same
  lines and (3.11+) the same columns of the failing expression.
- Positions: while the function runs, every call it makes happens at the same source position
  (line and columns) as in the plain run, and a line tracer sees the same lines.
- A hook that raises gets a note naming the hook and the call it was handling.
"""

from __future__ import annotations

import math
import operator
import sys
import traceback

import pytest

from overdub import Context, overdub
from overdub import _context as overdub_context
from overdub import _dispatch as overdub_dispatch
from overdub.contexts import CountContext, TraceContext

from tests.core._tb_contexts import Hooks, Observe, PrimitiveOnly, Stepping

HERE = __file__.removesuffix("c")  # the .py file, also when run from a .pyc


# -- contexts (in a helper module, so their frames are not "user frames" of this file) --------
CONTEXTS = [Context, Observe, Hooks, Stepping, PrimitiveOnly, CountContext, TraceContext]
IDS = [c.__name__ for c in CONTEXTS]


# -- user code that fails -------------------------------------------------------------------
class AppError(Exception):
    def __init__(self, code, detail):
        super().__init__(f"app error {code}: {detail}")
        self.code = code
        self.detail = detail


PREBUILT = AppError(3, "prebuilt")


def raise_prebuilt():
    raise PREBUILT


def raise_app_error(n):
    value = n * 2
    raise AppError(value, "bad value")


def chained():
    try:
        {}["missing"]
    except KeyError as exc:
        raise RuntimeError("wrapped") from exc


def implicit_context():
    try:
        1 / 0
    except ZeroDivisionError:
        return undefined_name  # noqa: F821


def divide_on_second_line(a, b):
    total = a + b
    return (total +
            a / b)


def nested_call_failure(x):
    return helper_level_1(x) + 1


def helper_level_1(x):
    return [helper_level_2(x)][0]


def helper_level_2(x):
    return math.sqrt(x)  # ValueError: math domain error for x < 0


class Account:
    def __init__(self, balance):
        self.balance = balance

    @property
    def ratio(self):
        return 10 / self.balance

    def __add__(self, other):
        raise TypeError(f"cannot add {type(other).__name__} to Account")

    def withdraw(self, amount):
        if amount > self.balance:
            raise AppError(402, f"insufficient funds: {self.balance} < {amount}")
        self.balance -= amount


def method_failure():
    acc = Account(5)
    acc.withdraw(3)
    acc.withdraw(10)


def property_failure():
    return Account(0).ratio


def dunder_failure():
    return Account(1) + 3


def lambda_failure():
    f = lambda x: x[5]  # noqa: E731
    return f([1, 2])


def comprehension_failure():
    return [10 // x for x in (2, 1, 0)]


def generator_failure():
    def gen():
        yield 1
        raise LookupError("from generator")

    return list(gen())


def closure_failure():
    items = {}

    def get(key):
        return items[key]

    return get("k")


def attribute_failure():
    obj = Account(1)
    return obj.missing_attribute


def multiline_call_failure():
    return int(
        "12",
        base=
        1,
    )


FAILING = [
    (raise_prebuilt, ()), (raise_app_error, (4,)), (chained, ()), (implicit_context, ()),
    (divide_on_second_line, (1, 0)), (nested_call_failure, (-1.0,)), (method_failure, ()),
    (property_failure, ()), (dunder_failure, ()), (lambda_failure, ()),
    (comprehension_failure, ()), (generator_failure, ()), (closure_failure, ()),
    (attribute_failure, ()), (multiline_call_failure, ()),
]
FAILING_IDS = [f.__name__ for f, _ in FAILING]


def _catch(thunk):
    PREBUILT.__traceback__ = None  # raising an exception object again extends its traceback
    try:
        thunk()
    except Exception as exc:  # noqa: BLE001
        return exc
    raise AssertionError("expected an exception")


def _user_frames(exc: BaseException) -> list[tuple]:
    """The traceback's frames in this file (not the test functions that call and catch)."""
    frames = []
    for fs in traceback.extract_tb(exc.__traceback__):
        harness = (fs.name == "_catch" or fs.name.startswith("test_")
                   or (fs.name == "<lambda>" and ("overdub(" in fs.line or "fn(*args)" in fs.line)))
        if fs.filename != HERE or harness:
            continue
        frames.append((fs.name, fs.lineno, fs.line, getattr(fs, "colno", None),
                       getattr(fs, "end_colno", None), getattr(fs, "end_lineno", None)))
    return frames


def _describe(exc: BaseException | None) -> tuple | None:
    if exc is None:
        return None
    return (type(exc), str(exc), exc.args, getattr(exc, "__notes__", None))


# -- exceptions propagate unchanged ---------------------------------------------------------
@pytest.mark.parametrize("make_ctx", CONTEXTS, ids=IDS)
@pytest.mark.parametrize("fn, args", FAILING, ids=FAILING_IDS)
def test_user_exception_unchanged(make_ctx, fn, args):
    plain = _catch(lambda: fn(*args))
    got = _catch(lambda: overdub(make_ctx(), fn, *args))
    assert type(got) is type(plain)
    assert str(got) == str(plain)
    assert got.args == plain.args
    assert getattr(got, "__notes__", None) == getattr(plain, "__notes__", None)
    assert _describe(got.__cause__) == _describe(plain.__cause__)
    assert _describe(got.__context__) == _describe(plain.__context__)
    assert got.__suppress_context__ == plain.__suppress_context__
    if isinstance(plain, AppError):
        assert (got.code, got.detail) == (plain.code, plain.detail)


@pytest.mark.parametrize("make_ctx", CONTEXTS, ids=IDS)
def test_the_very_exception_object_comes_out(make_ctx):
    got = _catch(lambda: overdub(make_ctx(), raise_prebuilt))
    assert got is PREBUILT
    assert not hasattr(got, "__notes__")


@pytest.mark.parametrize("make_ctx", CONTEXTS, ids=IDS)
@pytest.mark.parametrize("fn, args", FAILING, ids=FAILING_IDS)
def test_traceback_user_frames_match_plain_run(make_ctx, fn, args):
    plain = _user_frames(_catch(lambda: fn(*args)))
    got = _user_frames(_catch(lambda: overdub(make_ctx(), fn, *args)))
    assert plain, "the plain traceback has frames in this file"
    assert got == plain


@pytest.mark.parametrize("make_ctx", CONTEXTS, ids=IDS)
def test_traceback_points_at_the_failing_expression(make_ctx):
    """Spelled out for one case: the failing frame is the user's, at `a / b` on its own line."""
    exc = _catch(lambda: overdub(make_ctx(), divide_on_second_line, 1, 0))
    assert isinstance(exc, ZeroDivisionError)
    frames = [fs for fs in traceback.extract_tb(exc.__traceback__)
              if fs.filename == HERE and fs.name == "divide_on_second_line"]
    assert len(frames) == 1
    fs = frames[0]
    source_line = divide_on_second_line.__code__.co_firstlineno + 3
    assert fs.lineno == source_line
    assert fs.line == "a / b)"
    if sys.version_info >= (3, 11):
        line_text = open(HERE).read().splitlines()[source_line - 1]
        start = line_text.index("a / b")
        assert (fs.colno, fs.end_colno) == (start, start + len("a / b"))
    text = "".join(traceback.format_exception(exc))
    assert f'File "{HERE}", line {source_line}, in divide_on_second_line' in text


# -- positions --------------------------------------------------------------------------------
def _position_of(frame) -> tuple:
    """(function, line, end line, column, end column) of the instruction a frame is executing."""
    code = frame.f_code
    if sys.version_info >= (3, 11):
        positions = list(code.co_positions())[frame.f_lasti // 2]
        return (code.co_name, *positions)
    return (code.co_name, frame.f_lineno)


def _user_caller(frame):
    """The nearest frame at or above ``frame`` running code from this file."""
    while frame is not None and frame.f_code.co_filename != HERE:
        frame = frame.f_back
    return frame


def positions_workload(xs):
    """Calls on several lines, nested calls, methods, operators, a comprehension."""
    acc = Account(
        sum(xs))
    total = helper_sum(
        xs,
        scale=math.sqrt(
            len(xs)),
    )
    acc.withdraw(min(
        xs))
    squares = [helper_square(x) for x in xs
               if x > 1]
    words = sorted(map(str, xs), key=lambda s: (
        len(s), s))
    return total, acc.balance, squares, words


def lines_workload(xs):
    """Statements over several lines, loops, an ``if``, calls, a comprehension."""
    acc = Account(
        sum(xs))
    total = 0
    for x in xs:
        if x > 1 and x != 5:
            total += helper_square(
                x)
        else:
            total -= 1
    acc.withdraw(min(
        xs))
    squares = [helper_square(x) for x in xs]
    while total > 10:
        total //= 2
    return total, acc.balance, squares


def comprehension_with_condition(xs):
    return [helper_square(x) for x in xs
            if x > 1]


def helper_sum(values, scale=1.0):
    out = 0
    for v in values:
        out += helper_square(v) * scale
    return out


def helper_square(x):
    return x * x


def _record_calls(thunk) -> list[tuple]:
    """For every call of a Python function from this file, and every call of ``math.sqrt``,
    ``len`` or ``min``: (callee, the position it was called from).  (``sum`` and ``sorted``
    with a key are run by context-aware shims, so they are not C calls under a context.)"""
    watched_c = {math.sqrt, len, min}
    events = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename == HERE:
            caller = _user_caller(frame.f_back)
            if caller is not None and caller.f_code.co_name not in _HARNESS:
                events.append((frame.f_code.co_name, _position_of(caller)))
        elif event == "c_call" and any(arg is w for w in watched_c) and (
                frame.f_code.co_filename == HERE
                or frame.f_code.co_filename.startswith("<overdub dispatcher")
                or frame.f_code.co_filename in _STEP_FILES):
            # called by user code, or as a leaf by the dispatch step on its behalf (not by
            # overdub's other machinery: protocols, shims)
            caller = _user_caller(frame)
            if caller is not None and caller.f_code.co_name not in _HARNESS:
                events.append((arg.__name__, _position_of(caller)))

    old = sys.getprofile()
    sys.setprofile(profile)
    try:
        result = thunk()
    finally:
        sys.setprofile(old)
    return result, events


_STEP_FILES = {overdub_context.__file__, overdub_dispatch.__file__}
_HARNESS = {"_record_calls", "_record_lines", "<lambda>", "profile", "tracer"} | {
    name for name in globals() if name.startswith("test_")}


def _record_lines(thunk) -> list[tuple]:
    events = []

    def tracer(frame, event, arg):
        if frame.f_code.co_filename != HERE or frame.f_code.co_name in _HARNESS:
            return None
        if event in ("call", "line", "return", "exception"):
            events.append((event, frame.f_code.co_name, frame.f_lineno))
        return tracer

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        result = thunk()
    finally:
        sys.settrace(old)
    return result, events


@pytest.mark.parametrize("make_ctx", CONTEXTS, ids=IDS)
def test_call_positions_match_plain_run(make_ctx):
    xs = [3, 1, 2]
    plain, plain_events = _record_calls(lambda: positions_workload(xs))
    ctx = make_ctx()
    overdub(ctx, positions_workload, xs)  # warm the cache: rewriting runs code of its own
    got, got_events = _record_calls(lambda: overdub(make_ctx(), positions_workload, xs))
    assert got == plain
    assert len(plain_events) > 10
    # the lambda is called by the builtin `sorted` natively, by a shim under some contexts
    keep = lambda events: [e for e in events if e[0] != "<lambda>"]  # noqa: E731
    assert keep(got_events) == keep(plain_events)


def _line_cases():
    for make_ctx in CONTEXTS:
        marks = ()
        if sys.version_info[:2] == (3, 12) and make_ctx in (Observe, CountContext):
            marks = pytest.mark.xfail(strict=True, reason=(
                "CPython 3.12 line tracing: a Python function returning straight onto a jump "
                "target reports its line again (plain code too; line events depend on the "
                "previous instruction, python/cpython#109333); prehook-only contexts rewrite "
                "an attribute or operator into `native if @pre(...) ... else @slow(...)`, "
                "whose calls land on such a target mid-line"))
        yield pytest.param(make_ctx, lines_workload, marks=marks,
                           id=f"{make_ctx.__name__}-statements")
        marks = ()
        if make_ctx not in (Context, PrimitiveOnly) and sys.version_info < (3, 12):
            # 3.12+ inlines comprehensions (PEP 709): the jumps fall as in the plain run
            marks = pytest.mark.xfail(strict=True, reason=(
                "overdub bug: a comprehension condition `if x > 1` rewritten into a call "
                "(`if @op2(@gt, x, 1)`) changes where CPython places the loop's jumps, so a "
                "line tracer sees the two lines in a different order (_rewrite.Overdubber: the "
                "Compare -> Call rewrite; positions of the synthesised jump are the "
                "compiler's)"))
        yield pytest.param(make_ctx, comprehension_with_condition, marks=marks,
                           id=f"{make_ctx.__name__}-comprehension_condition")


@pytest.mark.parametrize("make_ctx, workload", list(_line_cases()))
def test_line_events_match_plain_run(make_ctx, workload):
    xs = [3, 1, 2, 7]
    plain, plain_events = _record_lines(lambda: workload(xs))
    overdub(make_ctx(), workload, xs)  # warm the cache
    got, got_events = _record_lines(lambda: overdub(make_ctx(), workload, xs))
    assert got == plain
    assert len(plain_events) > 10
    assert got_events == plain_events


@pytest.mark.parametrize("make_ctx", CONTEXTS, ids=IDS)
def test_line_events_on_failure_match_plain_run(make_ctx):
    _, plain_events = _record_lines(lambda: _catch(lambda: divide_on_second_line(1, 0)))
    overdub(make_ctx(), divide_on_second_line, 1, 2)  # warm the cache
    _, got_events = _record_lines(
        lambda: _catch(lambda: overdub(make_ctx(), divide_on_second_line, 1, 0)))
    assert got_events == plain_events


# -- hooks that raise -----------------------------------------------------------------------
def hook_target(x):
    return math.sin(x) * 2


class PreRaises(Context):
    def prehook(self, fn, /, *args, **kwargs):
        if fn is self.metadata:
            raise ValueError("prehook broke")


class PostRaises(Context):
    def posthook(self, out, fn, /, *args, **kwargs):
        if fn is self.metadata:
            raise ValueError("posthook broke")


class PreRaisesWithPost(PreRaises):
    def posthook(self, out, fn, /, *args, **kwargs):
        pass


def _hook_cases():
    for ctx_cls, hook in [(PreRaises, "prehook"), (PostRaises, "posthook"),
                          (PreRaisesWithPost, "prehook")]:
        for callee in (math.sin, operator.mul):
            marks = ()
            yield pytest.param(ctx_cls, hook, callee, marks=marks,
                               id=f"{ctx_cls.__name__}-{callee.__name__}")


@pytest.mark.parametrize("ctx_cls, hook, callee", list(_hook_cases()))
def test_hook_error_gets_a_note(ctx_cls, hook, callee):
    exc = _catch(lambda: overdub(ctx_cls(metadata=callee), hook_target, 0.5))
    assert type(exc) is ValueError
    assert str(exc) == f"{hook} broke"  # the hook's own exception, not a wrapper
    notes = getattr(exc, "__notes__", None)
    assert notes is not None and len(notes) == 1, notes
    note = notes[0]
    assert f"{ctx_cls.__name__}.{hook}" in note
    assert callee.__name__ in note  # the call it was handling


def test_hook_error_note_in_a_nested_call_is_added_once():
    def outer(x):
        return hook_target(x) + hook_target(x + 1)

    exc = _catch(lambda: overdub(PreRaisesWithPost(metadata=math.sin), outer, 0.5))
    assert str(exc) == "prehook broke"
    assert len(exc.__notes__) == 1


def test_user_exception_passing_through_hooks_gets_no_note():
    class Both(Context):
        def prehook(self, fn, /, *args, **kwargs):
            pass

        def posthook(self, out, fn, /, *args, **kwargs):
            pass

    exc = _catch(lambda: overdub(Both(), nested_call_failure, -1.0))
    assert isinstance(exc, ValueError)
    assert not hasattr(exc, "__notes__")


def test_hook_error_in_a_stepping_context_gets_a_note():
    class StepPre(Context):
        def prehook(self, fn, /, *args, **kwargs):
            if fn is math.sin:
                raise KeyError("step prehook broke")

        def overdub(self, fn, /, *args, **kwargs):
            return super().overdub(fn, *args, **kwargs)

    exc = _catch(lambda: overdub(StepPre(), hook_target, 0.5))
    assert type(exc) is KeyError and exc.args == ("step prehook broke",)
    assert len(exc.__notes__) == 1
    assert "StepPre.prehook" in exc.__notes__[0] and "sin" in exc.__notes__[0]
