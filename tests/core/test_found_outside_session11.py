"""Found by an outside tester (session 11): the core's smaller findings.

1. Rewriting gave the compiler's warnings again: a function with ``x is 1`` printed its
   SyntaxWarning a second time on its first run inside a context, and under an error filter
   (``pytest -W error``) that run failed with ``SyntaxError`` though the function runs natively;
   one with ``"\\d+"`` ran natively with a RuntimeWarning that its source does not parse.  The
   user's module gave those warnings when Python compiled it; the core's parse and compile of
   the same source give none, and leave the warning filters as they were.
2. A primitive registered with ``types=(float, float)`` did not run for a float the context
   itself had tagged (one tagged by another context did match).  A tagged argument dispatches on
   its value's type, as ``isinstance`` answers inside the run; ``Tagged`` asks for the
   context's own tagged values and is more specific than any class.
3. A hook raising the same exception instance run after run added its note each time.
4. A primitive with the wrong signature, or a pass that raised, gave an exception that named
   neither the primitive nor the pass: each adds a note, as hooks do; the exception is the same.
5. ``types="float"`` was reported as ``('f', 'l', 'o', 'a', 't')``.
6. ``TraceContext.similar()`` made a new trace, against the rule that a sibling shares
   ``ctx.metadata``; a pass transforms the functions nested in the one it is given, once.
7. A nested ``overdub`` was shown in a trace as ``overdub._context.overdub``.
"""

from __future__ import annotations

import ast
import importlib.util
import math
import operator
import re
import sys
import traceback
import warnings

import pytest

import overdub as overdub_module
from overdub import (Context, Tagged, compile_variant, function_source, metadata, overdub, tag,
                     untag)
from overdub.contexts import CountContext, TraceContext

# A module whose source Python warns about when compiling it: an assertion on a tuple and `is`
# with a literal (SyntaxWarning), an invalid escape (DeprecationWarning; 3.12+: SyntaxWarning).
_WARNED_SOURCE = '''\
import re


def same(x):
    assert (x, "x must be positive")
    return x is 1


def digits(s):
    return re.findall("\\d+", s)


def outer(s):
    def inner(t):
        return re.findall("\\d+", t)
    return inner(s)
'''
_COMPILER_WARNINGS = (SyntaxWarning, DeprecationWarning)


_imported = iter(range(10**6))


@pytest.fixture
def warned(tmp_path):
    """The module above, imported afresh for each test (nothing of it rewritten yet); its own
    compile warnings are Python's, not ours."""
    name = f"warned_by_python_{next(_imported)}"
    path = tmp_path / f"{name}.py"
    path.write_text(_WARNED_SOURCE)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec.loader.exec_module(module)
    assert {type(w.message) for w in caught} & set(_COMPILER_WARNINGS)  # Python's own
    sys.modules[name] = module
    yield module
    del sys.modules[name]


def _identity_pass(node):
    return node


# Three routes through the core's parsing and compiling: the first rewrite of each function,
# another context class (the def parsed again from its lines) and a pass (no cached rewrite).
_CONTEXTS = [CountContext, TraceContext, lambda: Context(passes=[_identity_pass])]


def test_a_second_context_class_parses_the_def_again_quietly(warned):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for make in _CONTEXTS:
            assert overdub(make(), warned.same, 1) is True
            assert overdub(make(), warned.outer, "x7") == ["7"]
    assert [str(w.message) for w in caught] == []


@pytest.mark.parametrize("make", _CONTEXTS)
def test_rewriting_gives_no_compiler_warnings(warned, make):
    filters = warnings.filters
    before = list(filters)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert overdub(make(), warned.same, 1) is True
        assert overdub(make(), warned.digits, "a12b3") == ["12", "3"]
        assert overdub(make(), warned.outer, "x7") == ["7"]
    assert [str(w.message) for w in caught] == []
    assert warnings.filters is filters and warnings.filters == before


@pytest.mark.parametrize("make", _CONTEXTS)
def test_an_error_filter_does_not_fail_the_rewrite(warned, make):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warned.same(1) is True
        ctx = make()
        assert overdub(ctx, warned.same, 1) is True
        assert overdub(ctx, warned.digits, "a12b3") == ["12", "3"]  # rewritten, not native:
        if isinstance(ctx, CountContext):
            assert ctx.counts[re.findall] == 1


def test_compile_variant_gives_no_compiler_warnings(warned):
    source = ast.unparse(function_source(warned.same))
    assert " is 1" in source
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code = compile_variant(warned.same, source)
    assert code.co_name == "same"


def test_warnings_of_the_run_itself_still_show():
    def warns():
        warnings.warn("from the user's code", UserWarning)
        return 1

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert overdub(CountContext(), warns) == 1
    assert [str(w.message) for w in caught] == ["from the user's code"]
    assert caught[0].filename == __file__


class _Floats(Context):
    pass


@_Floats.primitive(operator.mul, types=(float, float))
def _mul_floats(ctx, a, b):
    return ("floats", untag(a, ctx) * untag(b, ctx))


class _Both(Context):
    pass


@_Both.primitive(operator.mul, types=(float, float))
def _both_floats(ctx, a, b):
    return "floats"


@_Both.primitive(operator.mul, types=(Tagged, float))
def _both_tagged(ctx, a, b):
    return ("tagged", metadata(a, ctx))


def test_a_tagged_argument_dispatches_on_its_value_type():
    ctx = _Floats()

    def times(a, b):
        return a * b

    assert overdub(ctx, times, 3.0, 2.0) == ("floats", 6.0)
    assert overdub(ctx, times, tag(3.0, ctx, "m"), 2.0) == ("floats", 6.0)  # was 6.0: skipped
    assert overdub(ctx, times, 2.0, tag(3.0, ctx, "m")) == ("floats", 6.0)
    assert overdub(ctx, times, tag(3, ctx, "m"), 2.0) == 6.0  # an int's tag: not a float
    assert overdub(ctx, lambda a: a * 2.0, tag(3.0, ctx, "m")) == ("floats", 6.0)  # again


def test_tagged_is_more_specific_than_the_value_type():
    ctx = _Both()
    assert overdub(ctx, lambda a, b: a * b, 3.0, 2.0) == "floats"
    assert overdub(ctx, lambda a, b: a * b, tag(3.0, ctx, "m"), 2.0) == ("tagged", "m")
    assert overdub(ctx, lambda a, b: a * b, 2.0, tag(3.0, ctx, "m")) == "floats"
    outer = Context()  # another context's tag is not this one's: the plain value's type
    assert overdub(outer, lambda x: overdub(ctx, lambda a: a * 2.0, x),
                   tag(3.0, outer, "o")) == "floats"


def test_the_choice_kept_for_tagged_operands_is_per_tag_and_value_type():
    """The binary dispatcher keeps its choice for tagged operands: by whose tag and the value's
    type, so the same operation alternating between them chooses each time as find would."""
    ctx, outer = _Both(), Context()

    def times(a, b):
        return a * b

    def mixed(other):
        results = []
        for value in (tag(3.0, ctx, "m"), other, tag(3, ctx, "i"), tag(4.0, ctx, "n")):
            results.append(overdub(ctx, times, value, 2.0))
        return results

    got = overdub(outer, mixed, tag(3.0, outer, "o"))
    assert got == [("tagged", "m"), "floats", ("tagged", "i"), ("tagged", "n")]


def test_a_hook_raising_one_instance_notes_it_once():
    class Raises(Context):
        def prehook(self, fn, /, *args, **kwargs):
            if fn is len:
                raise self.metadata

    shared = RuntimeError("shared")
    for _ in range(3):
        with pytest.raises(RuntimeError) as caught:
            overdub(Raises(metadata=shared), lambda: len([1]))
        assert caught.value is shared
        assert caught.value.__notes__ == [
            "(raised in Raises.prehook while handling a call of len)"]


class _WrongSignature(Context):
    pass


@_WrongSignature.primitive(math.sqrt)
def _no_ctx(x):
    return x


class _Failing(Context):
    pass


_FAILURE = ArithmeticError("the primitive's own")


@_Failing.primitive(math.sqrt)
def _fails(ctx, x):
    raise _FAILURE


def _sqrt_plus_one(x):
    return math.sqrt(x) + 1


def test_an_exception_out_of_a_primitive_names_it():
    with pytest.raises(TypeError, match="positional argument") as caught:
        overdub(_WrongSignature(), _sqrt_plus_one, 4.0)
    assert caught.value.__notes__ == [
        f"(raised in _WrongSignature's primitive {__name__}._no_ctx while handling a call of "
        f"math.sqrt)"]
    for _ in range(2):  # the same instance, noted once, raised at the primitive's line
        with pytest.raises(ArithmeticError) as caught:
            overdub(_Failing(), _sqrt_plus_one, 4.0)
        assert caught.value is _FAILURE and len(_FAILURE.__notes__) == 1
        assert "_Failing's primitive" in _FAILURE.__notes__[0]
        assert traceback.extract_tb(caught.value.__traceback__)[-1].name == "_fails"


def test_an_exception_out_of_a_pass_names_it():
    failure = LookupError("the pass's own")

    def failing_pass(node):
        raise failure

    def target(x):
        return x + 1

    with pytest.raises(LookupError) as caught:
        overdub(Context(passes=[failing_pass]), target, 1)
    assert caught.value is failure
    (note,) = failure.__notes__
    assert note.startswith(f"(raised in the overdub pass {failing_pass!r} while rewriting "
                           f"target ({__file__}:")
    assert traceback.extract_tb(caught.value.__traceback__)[-1].name == "failing_pass"


def test_types_name_the_value_given_and_take_a_sequence():
    class Typed(Context):
        pass

    def impl(ctx, x):
        return -1.0

    for bad in ("float", {float}, (1,), 3):
        with pytest.raises(TypeError) as caught:
            Typed.primitive(math.sqrt, types=bad)   # at the call that gives them
        assert str(caught.value).endswith(f"got {bad!r}")
    assert overdub(Typed(), math.sqrt, 4.0) == 2.0  # nothing was registered
    Typed.primitive(math.sqrt, types=[float])(impl)
    assert overdub(Typed(), math.sqrt, 4.0) == -1.0
    assert overdub(Typed(), math.sqrt, 4) == 2.0


def test_a_trace_sibling_shares_the_trace():
    def f(x):
        return x + 1

    ctx = TraceContext()
    overdub(ctx, f, 1)
    sibling = ctx.similar()
    overdub(sibling, f, 2)
    assert sibling.trace is ctx.trace and len(ctx.trace) == 2
    assert [(call, [sub for sub, _ in calls]) for call, calls in ctx.trace] == [
        ((f, (1,)), [(operator.add, (1, 1))]), ((f, (2,)), [(operator.add, (2, 1))])]
    own = ctx.similar(metadata=[])
    overdub(own, f, 3)
    assert own.trace == [((f, (3,)), [((operator.add, (3, 1)), [])])] and len(ctx.trace) == 2


def test_a_pass_transforms_a_nested_function_once():
    class Double(ast.NodeTransformer):
        def visit_Constant(self, node):
            if type(node.value) is int:
                return ast.copy_location(ast.Constant(node.value * 2), node)
            return node

    def outer(x):
        def inner(y):
            return y + 10
        return inner(x) + 1

    for _ in range(2):
        assert overdub(Context(passes=[Double()]), outer, 0) == 22


def test_the_public_api_names_its_public_module():
    for name in overdub_module.__all__:
        assert getattr(overdub_module, name).__module__ == "overdub", name
    inner = TraceContext()
    outer = TraceContext()
    overdub(outer, lambda: overdub(inner, abs, -1))
    assert "  overdub.overdub(<overdub.contexts.TraceContext object" in outer.render()
    assert "overdub._context" not in outer.render()


def test_untag_checks_its_context_as_tag_does():
    for bad in (None, object(), "ctx"):
        with pytest.raises(TypeError, match="untag.x, ctx.: ctx must be a Context instance"):
            untag(1.0, bad)
        with pytest.raises(TypeError, match="tag.*ctx must be a Context instance"):
            tag(1.0, bad, "m")
    assert untag(1.0, Context()) == 1.0
