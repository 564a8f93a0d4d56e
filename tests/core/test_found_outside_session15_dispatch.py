"""Found by an outside tester (session 15): the core's dispatch, names and passes.

- The hooks of a context nested inside a context that tags values (an outer derivative) were
  given the outer context's ``Tagged`` wrappers, although to any other context a tagged value
  is simply the value it wraps (DESIGN section 3; primitives' dispatch already followed it):
  ``type(a) is float`` was False in them, so ``CountContext(types=float)`` inside ``grad`` or
  ``derivative`` counted nothing, a silent miscount.  Nested, the hooks (``prehook`` and
  ``posthook``, their inline form for operators, and those called by an overridden
  ``overdub`` through ``super().overdub``) now see the arguments and the result with other
  contexts' tags removed, the context's own kept; ``TraceContext`` records them so.  The
  values the call runs with and returns stay the wrapped ones: the outer context keeps its
  metadata (and an outer derivative is unchanged).
- ``describe(staticmethod)`` was ``"staticmethod.__func__"`` (``classmethod`` likewise), and
  ``describe(functools.partial(...))`` its whole repr: now ``"staticmethod"`` and
  ``"functools.partial(f)"``.
- A pass that left a required AST field None gave a bare ``AttributeError`` from the rewrite;
  it is now the promised ``ValueError`` naming the pass and the function.
"""

from __future__ import annotations

import ast
import functools
import io
import math
import operator

import pytest

from overdub import Context, has_metadata, metadata, overdub, tag, untag
from overdub.contexts import CountContext, LogContext, TraceContext, describe
from overdub_ad import derivative, grad, hessian, jvp
from overdub_ad.testing import REFERENCE, force_route

pytestmark = pytest.mark.every_route
ROUTES = pytest.mark.parametrize("route", [None, REFERENCE])


# -- 1. hooks of a nested context see values as that context sees them ------------------------

class Flops(Context):
    """Counts float arithmetic by the exact type of its operands (the tester's context)."""

    def prehook(self, fn, /, *args, **kwargs):
        if fn in (operator.add, operator.mul, math.sin) and all(type(a) is float for a in args):
            self.metadata.append(fn.__name__)


class Outer(Context):
    """Tags values; its primitive for ``*`` keeps the metadata (of the first tagged operand)."""


@Outer.primitive(operator.mul)
def _outer_mul(ctx, a, b):
    meta = next((metadata(v, ctx) for v in (a, b) if has_metadata(v, ctx)), None)
    out = untag(a, ctx) * untag(b, ctx)
    return out if meta is None else tag(out, ctx, meta)


def f(x):
    return math.sin(x) + x * 2.0


PLAIN_COUNTS = {f"{__name__}.f": 1, "math.sin": 1, "operator.mul": 1, "operator.add": 1}


def measure(x):
    flops, count = Flops(metadata=[]), CountContext(types=float)
    overdub(flops, f, x)
    overdub(count, f, x)
    return flops.metadata, {describe(k): n for k, n in count.counts.items()}


def test_hooks_inside_a_tagging_context_see_plain_values():
    outer = Outer()
    assert measure(0.5) == (["sin", "mul", "add"], PLAIN_COUNTS)
    for _ in range(2):
        assert overdub(outer, measure, tag(0.5, outer, "m")) == (["sin", "mul", "add"],
                                                                 PLAIN_COUNTS)


class Types(Context):
    """Records the exact types its hooks are given (posthook: the result's too)."""

    def prehook(self, fn, /, *args, **kwargs):
        self.metadata.append(("pre", fn, tuple(map(type, args)),
                              {k: type(v) for k, v in kwargs.items()}))

    def posthook(self, out, fn, /, *args, **kwargs):
        self.metadata.append(("post", fn, type(out), tuple(map(type, args)),
                              {k: type(v) for k, v in kwargs.items()}))


def scaled(x, *, by):
    return x * by


def calls_scaled(x):
    return scaled(x, by=x)


def test_posthook_and_keywords_see_plain_values_and_the_call_keeps_the_tags():
    outer = Outer()

    def program(x):
        ctx = Types(metadata=[])
        out = overdub(ctx, calls_scaled, x)
        return out, ctx.metadata

    for _ in range(2):
        out, seen = overdub(outer, program, tag(3.0, outer, "m"))
        assert untag(out, outer) == 9.0 and metadata(out, outer) == "m"  # still the outer's
        assert ("pre", scaled, (float,), {"by": float}) in seen
        assert ("post", scaled, float, (float,), {"by": float}) in seen
        assert ("post", operator.mul, float, (float, float), {}) in seen
        assert all(t is not type(out) or t is float
                   for event in seen for t in (*event[-2], *event[-1].values()))


class StepAndHooks(Types):
    """Overrides the whole step (as TraceContext does): the hooks run through super()."""

    def overdub(self, fn, /, *args, **kwargs):
        return super().overdub(fn, *args, **kwargs)


def test_hooks_called_by_an_overridden_step_see_plain_values():
    outer = Outer()

    def program(x):
        ctx = StepAndHooks(metadata=[])
        return overdub(ctx, calls_scaled, x), ctx.metadata

    out, seen = overdub(outer, program, tag(3.0, outer, "m"))
    assert metadata(out, outer) == "m"
    assert ("pre", scaled, (float,), {"by": float}) in seen
    assert ("post", operator.mul, float, (float, float), {}) in seen


class TaggingWatcher(Context):
    """Tags values itself and watches the calls: its own tags stay in what its hooks see."""

    def prehook(self, fn, /, *args, **kwargs):
        if fn is operator.mul:
            self.metadata.append([(type(untag(a, self)), has_metadata(a, self)) for a in args])


def test_a_tagging_inner_context_keeps_its_own_tags_in_its_hooks():
    outer = Outer()

    def program(x):
        inner = TaggingWatcher(metadata=[])
        out = overdub(inner, lambda v: v * 2.0, tag(x, inner, "inner's"))
        return out, inner.metadata

    for _ in range(2):
        out, seen = overdub(outer, program, tag(1.5, outer, "m"))
        assert untag(out, outer) == 3.0 and metadata(out, outer) == "m"
        assert seen == [[(float, True), (float, False)]]


class Failing(Context):
    def prehook(self, fn, /, *args, **kwargs):
        if fn is operator.mul and type(args[0]) is float:
            raise KeyError("from the hook")


def test_a_failing_inline_prehook_is_still_named_when_nested():
    outer = Outer()

    def program(x):
        return overdub(Failing(), lambda v: v * 2.0, x)

    with pytest.raises(KeyError) as info:
        overdub(outer, program, tag(1.5, outer, "m"))
    assert info.value.__notes__ == [
        "(raised in Failing.prehook while handling a call of operator.mul)"]


@ROUTES
@pytest.mark.parametrize("api", ["grad", "derivative", "jvp"])
def test_count_context_by_type_inside_a_derivative_counts_as_in_a_plain_run(api, route):
    seen = []

    def counted(x):
        count = CountContext(types=float)
        out = overdub(count, f, x)
        seen.append({describe(k): n for k, n in count.counts.items()})
        return out

    expected = math.cos(0.5) + 2.0
    with force_route(route):
        for _ in range(2):  # first and repeated calls
            if api == "grad":
                assert grad(counted)(0.5) == pytest.approx(expected, rel=1e-12)
            elif api == "derivative":
                assert derivative(counted, 0.5) == pytest.approx(expected, rel=1e-12)
            else:
                out, tangent = jvp(counted, (0.5,), (1.0,))
                assert out == pytest.approx(f(0.5), rel=1e-12)
                assert tangent == pytest.approx(expected, rel=1e-12)
    assert seen == [PLAIN_COUNTS] * 2


@ROUTES
def test_hooks_inside_a_second_derivative_see_plain_values(route):
    seen = []

    def watched(x):
        flops = Flops(metadata=[])
        out = overdub(flops, f, x)
        seen.append(flops.metadata)
        return out

    with force_route(route):
        for _ in range(2):
            h = hessian(watched)(0.5)
            assert float(h) == pytest.approx(-math.sin(0.5), rel=1e-9)
    assert seen and all(entry == ["sin", "mul", "add"] for entry in seen)


@ROUTES
def test_trace_and_log_inside_a_derivative_show_plain_values(route):
    with force_route(route):
        for _ in range(2):
            trace = TraceContext()
            assert grad(lambda x: overdub(trace, f, x))(0.5) == pytest.approx(
                math.cos(0.5) + 2.0, rel=1e-12)
            assert trace.trace[0][0] == (f, (0.5,))
            assert [(call[0], tuple(map(type, call[1]))) for call, _ in trace.trace[0][1]
                    if call[0] is not getattr] == [(math.sin, (float,)),
                                                   (operator.mul, (float, float)),
                                                   (operator.add, (float, float))]
            assert "Tagged" not in trace.render()

            log = io.StringIO()
            assert derivative(lambda x: overdub(LogContext(file=log), f, x), 0.5) == \
                pytest.approx(math.cos(0.5) + 2.0, rel=1e-12)
            lines = log.getvalue().splitlines()
            assert lines[0] == f"{__name__}.f(0.5)" and "math.sin(0.5)" in lines
            assert "Tagged" not in log.getvalue()


# -- 2. describe ------------------------------------------------------------------------------

class Shapes:
    @staticmethod
    def unit():
        return 1.0

    @classmethod
    def make(cls):
        return cls()


def test_describe_names_descriptor_classes_and_partials_shortly():
    assert describe(staticmethod) == "staticmethod"
    assert describe(classmethod) == "classmethod"
    assert describe(Shapes.unit) == f"{__name__}.Shapes.unit"
    assert describe(Shapes.make) == f"{__name__}.Shapes.make"
    long = functools.partial(f, **{f"k{i}": "x" * 50 for i in range(20)})
    assert describe(long) == f"functools.partial({__name__}.f)"
    assert describe(functools.partial(print, sep="")) == "functools.partial(print)"


def test_log_of_a_wrapped_function_is_one_short_line_per_call():
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args):
            return fn(*args)
        return wrapper

    log = io.StringIO()
    overdub(LogContext(file=log), lambda: deco(f)(0.5))
    calls = [line for line in log.getvalue().splitlines()
             if line.startswith("functools.partial(functools.update_wrapper)(")]
    assert len(calls) == 1 and len(calls[0]) < 120  # the call of the partial wraps makes


# -- 3. a pass that leaves a required field empty --------------------------------------------

class RightLeftEmpty(ast.NodeTransformer):
    def visit_BinOp(self, node):
        return ast.copy_location(ast.BinOp(left=node.left, op=ast.Add(), right=None), node)


def left_operand_dropped(node):
    """A function pass (not a transformer) leaving ``BinOp.left`` None."""
    node.body[0].value.left = None
    return node


def doubled(x):
    return x * 2


class Seeing(Context):
    def prehook(self, fn, /, *args, **kwargs):
        pass


@pytest.mark.parametrize("make", [Context, Seeing, CountContext])
@pytest.mark.parametrize("a_pass", [RightLeftEmpty(), left_operand_dropped],
                         ids=["transformer", "function"])
def test_a_pass_leaving_an_invalid_tree_is_a_value_error_naming_it(make, a_pass):
    for _ in range(2):
        with pytest.raises(ValueError) as info:
            overdub(make(passes=[a_pass]), doubled, 1.0)
        message = str(info.value)
        assert repr(a_pass) in message and "doubled" in message and __file__ in message
        assert "is required for BinOp" in message
    assert overdub(make(), doubled, 1.0) == 2.0  # without the pass, as before
