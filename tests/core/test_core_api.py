"""The core's public API: errors on bad input, primitives and their dispatch, recurse /
can_recurse / opaque, the seed examples, the rewrite cache, threads and nesting."""

from __future__ import annotations

import ast
import gc
import importlib.util
import io
import math
import operator
import sys
import textwrap
import threading
import types
import uuid
import warnings
import weakref
from collections import Counter
from numbers import Real

import numpy as np
import pytest

import overdub._cache as overdub_cache
from overdub import Context, can_recurse, embed, opaque, overdub, recurse
from overdub.contexts import CountContext, LogContext, TraceContext


class Recorder(Context):
    """Records every call it sees as ``(fn, args)``."""

    def __init__(self, **options):
        options.setdefault("metadata", [])
        super().__init__(**options)

    def prehook(self, fn, /, *args, **kwargs):
        self.metadata.append((fn, args))

    @property
    def fns(self):
        return [fn for fn, _ in self.metadata]


def square_sum(x, y):
    return x * x + y * y


def uses_sin(x):
    return math.sin(x) * 2.0


def _load_module(tmp_path, source: str, name: str | None = None) -> types.ModuleType:
    """A fresh module from a file under tmp_path: new code objects, so the rewrite cache is cold."""
    name = name or f"_overdub_tmp_{uuid.uuid4().hex}"
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# -- bad input -----------------------------------------------------------------------------------
def test_overdub_non_callable_is_a_type_error():
    with pytest.raises(TypeError, match="callable"):
        overdub(Context(), 3)


@pytest.mark.parametrize("verb", [overdub, recurse, can_recurse])
def test_non_context_ctx_is_a_type_error(verb):
    for bad in (None, object(), CountContext, "ctx"):
        with pytest.raises(TypeError, match="Context"):
            verb(bad, square_sum, 1, 2)


@pytest.mark.parametrize("verb", [recurse, can_recurse])
def test_recurse_non_callable_is_a_type_error(verb):
    with pytest.raises(TypeError, match="callable"):
        verb(Context(), 3)


def test_primitive_for_non_callable_is_a_type_error():
    class P(Context):
        pass

    with pytest.raises(TypeError, match="not callable"):
        P.primitive(5)
    with pytest.raises(TypeError, match="not callable"):
        P.primitive(math.sin)(5)  # the implementation is not callable
    with pytest.raises(TypeError, match="types"):
        P.primitive(math.sin, types=(float, 3))(lambda ctx, x: x)


def test_context_without_super_init_is_a_clear_type_error():
    class Forgetful(Context):
        def __init__(self):
            self.counter = 0

        def prehook(self, fn, /, *args, **kwargs):
            self.counter += 1

    with pytest.raises(TypeError, match=r"super\(\).__init__"):
        overdub(Forgetful(), square_sum, 1, 2)


@pytest.mark.parametrize("passes", [5, [5], ["not a pass"]])
def test_bad_passes_argument_is_a_type_error(passes):
    with pytest.raises(TypeError, match="pass"):
        Context(passes=passes)


def test_opaque_non_callable_is_a_type_error():
    with pytest.raises(TypeError, match="callable"):
        opaque(3)


class ReturnsWrongNode(ast.NodeTransformer):
    def visit_FunctionDef(self, node):
        return ast.Pass()


def test_pass_returning_non_functiondef_is_a_value_error_naming_the_pass(tmp_path):
    mod = _load_module(tmp_path, """
        def f(x):
            return x + 1
    """)

    class WithPass(Context):
        def prehook(self, fn, /, *args, **kwargs):
            pass

    bad = ReturnsWrongNode()
    with pytest.raises(ValueError) as info:
        overdub(WithPass(passes=[bad]), mod.f, 1)
    message = str(info.value)
    assert "ReturnsWrongNode" in message and "FunctionDef" in message and "f" in message

    def returns_none(node):
        return None

    with pytest.raises(ValueError, match="returns_none"):
        overdub(WithPass(passes=[returns_none]), mod.f, 1)


class EmptiesBody(ast.NodeTransformer):
    def visit_FunctionDef(self, node):
        node.body = []  # a def needs a body: the compiler refuses it
        return node


class StoresIntoCall(ast.NodeTransformer):
    def visit_Return(self, node):
        node.value = ast.Name(id="x", ctx=ast.Store())  # a Store in a load position
        return node


@pytest.mark.parametrize("bad_pass", [EmptiesBody(), StoresIntoCall()],
                         ids=["empty body", "store context in a load"])
def test_pass_producing_invalid_ast_is_a_value_error(tmp_path, bad_pass):
    mod = _load_module(tmp_path, """
        def f(x):
            return x + 1
    """)
    with pytest.raises(ValueError) as info:
        overdub(Context(passes=[bad_pass]), mod.f, 1)
    assert type(bad_pass).__name__ in str(info.value)
    assert "f" in str(info.value)


# -- primitives -----------------------------------------------------------------------------------
def test_primitive_replaces_sin_in_one_context_only():
    class CosInsteadOfSin(Context):
        pass

    @CosInsteadOfSin.primitive(math.sin)
    def _cos(ctx, x):
        return math.cos(x)

    class Other(Context):
        def prehook(self, fn, /, *args, **kwargs):
            pass

    assert overdub(CosInsteadOfSin(), uses_sin, 0.3) == math.cos(0.3) * 2.0
    assert overdub(Other(), uses_sin, 0.3) == math.sin(0.3) * 2.0
    assert overdub(Context(), uses_sin, 0.3) == math.sin(0.3) * 2.0
    assert uses_sin(0.3) == math.sin(0.3) * 2.0
    assert math.sin(0.3) != math.cos(0.3)


def test_most_specific_primitive_wins():
    class Dispatch(Context):
        pass

    @Dispatch.primitive(operator.add, types=(Real, Real))
    def _real(ctx, a, b):
        return ("real", a, b)

    @Dispatch.primitive(operator.add, types=(int, int))
    def _int(ctx, a, b):
        return ("int", a, b)

    @Dispatch.primitive(operator.add, types=(bool, int))
    def _bool(ctx, a, b):
        return ("bool", a, b)

    def add(a, b):
        return a + b

    ctx = Dispatch()
    assert overdub(ctx, add, 1, 2) == ("int", 1, 2)
    assert overdub(ctx, add, 1.5, 2) == ("real", 1.5, 2)
    assert overdub(ctx, add, True, 2) == ("bool", True, 2)
    assert overdub(ctx, add, "a", "b") == "ab"  # no match: the ordinary operator


def test_primitives_are_inherited_and_overridable():
    class Base(Context):
        pass

    @Base.primitive(math.sin)
    def _base_sin(ctx, x):
        return "base"

    @Base.primitive(math.cos)
    def _base_cos(ctx, x):
        return "base cos"

    class Child(Base):
        pass

    class Override(Base):
        pass

    @Override.primitive(math.sin)
    def _override_sin(ctx, x):
        return "override"

    def both(x):
        return math.sin(x), math.cos(x)

    assert overdub(Base(), both, 0.1) == ("base", "base cos")
    assert overdub(Child(), both, 0.1) == ("base", "base cos")
    assert overdub(Override(), both, 0.1) == ("override", "base cos")
    assert overdub(Base(), both, 0.1) == ("base", "base cos")  # the base is unchanged


def test_ambiguous_primitives_are_a_type_error_at_the_call():
    class Ambiguous(Context):
        pass

    @Ambiguous.primitive(operator.mul, types=(int, Real))
    def _left(ctx, a, b):
        return "left"

    @Ambiguous.primitive(operator.mul, types=(Real, int))
    def _right(ctx, a, b):
        return "right"

    def mul(a, b):
        return a * b

    ctx = Ambiguous()
    assert overdub(ctx, mul, 2, 1.5) == "left"
    assert overdub(ctx, mul, 1.5, 2) == "right"
    with pytest.raises(TypeError, match="ambiguous"):
        overdub(ctx, mul, 2, 3)


def test_primitive_registered_after_first_use_takes_effect():
    class Late(Context):
        pass

    def f(x, y):
        return math.sin(x) + x * y

    ctx = Late()
    assert overdub(ctx, f, 0.5, 2.0) == f(0.5, 2.0)

    @Late.primitive(math.sin)
    def _sin(ctx, x):
        return 100.0

    assert overdub(ctx, f, 0.5, 2.0) == 100.0 + 1.0
    assert overdub(Late(), f, 0.5, 2.0) == 100.0 + 1.0

    @Late.primitive(operator.mul)  # an operator: the rewrite must now intercept `*` too
    def _mul(ctx, a, b):
        return -1.0

    assert overdub(ctx, f, 0.5, 2.0) == 100.0 - 1.0


def test_primitive_receives_keyword_arguments_and_the_context():
    class Kw(Context):
        pass

    seen = []

    @Kw.primitive(sorted)
    def _sorted(ctx, items, **kwargs):
        seen.append((ctx, sorted(kwargs)))
        return "sorted!"

    def f(xs):
        return sorted(xs, key=abs, reverse=True)

    ctx = Kw()
    assert overdub(ctx, f, [1, -2]) == "sorted!"
    assert seen == [(ctx, ["key", "reverse"])]


def test_similar_makes_an_independent_sibling():
    class Tagging(Context):
        def prehook(self, fn, /, *args, **kwargs):
            self.metadata.append(fn)

    class Noop(ast.NodeTransformer):
        pass

    original = Tagging(metadata=[], passes=[Noop()])
    sibling = original.similar(metadata=[])
    assert type(sibling) is Tagging
    assert sibling.passes == original.passes
    assert sibling.metadata == [] and sibling.metadata is not original.metadata
    overdub(sibling, square_sum, 1, 2)
    assert sibling.metadata and original.metadata == []
    overdub(original, square_sum, 1, 2)
    assert original.metadata == sibling.metadata
    kept = original.similar()
    assert kept.metadata is original.metadata


def test_trace_context_similar_records_into_its_own_trace():
    original = TraceContext()
    sibling = original.similar(metadata=[])
    overdub(sibling, square_sum, 1, 2)
    assert original.trace == []
    assert sibling.trace and sibling.trace[0][0] == (square_sum, (1, 2))


# -- recurse, can_recurse, opaque --------------------------------------------------------------
def test_recurse_and_can_recurse_on_python_functions():
    ctx = Recorder()
    assert can_recurse(ctx, square_sum)
    assert recurse(ctx, square_sum, 2, 3) == 13
    # recurse runs the body: the hooks see what it calls, not the call of square_sum itself
    assert square_sum not in ctx.fns
    assert ctx.fns.count(operator.mul) == 2 and operator.add in ctx.fns


def test_builtins_are_leaves():
    ctx = Recorder()
    assert not can_recurse(ctx, len)
    assert not can_recurse(ctx, math.sin)
    assert recurse(ctx, len, [1, 2, 3]) == 3
    assert overdub(ctx, math.sin, 0.5) == math.sin(0.5)
    assert ctx.fns == [math.sin]


def test_methods_and_callable_objects_can_be_recursed():
    class Scaler:
        def __init__(self, k):
            self.k = k

        def __call__(self, x):
            return x * self.k

        def apply(self, x):
            return self(x)

    s = Scaler(3)
    ctx = Recorder()
    assert can_recurse(ctx, s) and can_recurse(ctx, s.apply) and can_recurse(ctx, Scaler)
    assert recurse(ctx, s.apply, 2) == 6
    assert (operator.mul, (2, 3)) in ctx.metadata


def test_lambdas_sharing_a_line_are_each_rewritten(recwarn):
    """3.11+ tells them apart by column, 3.10 by what each compiles to; a lambda written twice
    is either copy; lambdas nested in one another on one line too."""
    add, mul, sub, twin = (lambda a: a + 1), (lambda a: a * 2), (lambda a: a - 3), (lambda a: a + 1)
    outer = lambda a: (lambda b: b * a)(a + 1)  # noqa: E731
    first, second = (lambda x, y: x - 2 * y), (lambda x, y: y - 2 * x)  # same bytecode shape
    ctx = Recorder()
    results = [recurse(ctx, f, 5) for f in (add, mul, sub, twin, outer)]
    assert results == [6, 10, 2, 6, 30]
    assert all(can_recurse(ctx, f) for f in (add, mul, sub, twin, outer, first, second))
    assert [fn for fn in ctx.fns if fn in (operator.add, operator.mul, operator.sub)] == [
        operator.add, operator.mul, operator.sub, operator.add, operator.add, operator.mul]
    ctx = Recorder()
    assert (recurse(ctx, first, 1, 10), recurse(ctx, second, 1, 10)) == (-19, 8)
    assert [args for fn, args in ctx.metadata if fn is operator.sub] == [(1, 20), (10, 2)]
    assert not [w for w in recwarn if "overdub" in str(w.message)]


@pytest.mark.parametrize("top_level", ["", "ORIGINAL_SUPER = super\n"])
def test_super_methods_are_rewritten_whatever_the_module_says_of_super(tmp_path, recwarn,
                                                                       top_level):
    """3.12+ compiles ``super().name`` differently when the module's top level names ``super``:
    the recompiled method must still match the module's code."""
    mod = _load_module(tmp_path, """
        class Base:
            def scale(self, x):
                return x * 2

        class Child(Base):
            def scale(self, x):
                return super().scale(x) + 1
        """ + top_level)
    ctx = Recorder()
    assert overdub(ctx, mod.Child().scale, 5) == 11
    assert mod.Base.scale in [getattr(fn, "__func__", fn) for fn in ctx.fns]
    assert (operator.mul, (5, 2)) in ctx.metadata
    assert not [w for w in recwarn if "overdub" in str(w.message)]


def test_exec_defined_function_is_a_leaf_and_runs_correctly():
    namespace = {}
    exec("def made(x):\n    return [x * i for i in range(3)]\n", namespace)
    made = namespace["made"]
    ctx = Recorder()
    assert not can_recurse(ctx, made)
    assert overdub(ctx, made, 2) == [0, 2, 4]
    assert recurse(ctx, made, 3) == [0, 3, 6]
    assert ctx.fns == [made]  # the call itself is seen; its body is not


def test_exec_defined_function_with_source_in_linecache_is_recursed(tmp_path):
    import linecache

    filename = str(tmp_path / "generated_source.py")
    source = "def made(x):\n    return x * 7\n"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    try:
        namespace = {}
        exec(compile(source, filename, "exec"), namespace)
        ctx = Recorder()
        assert can_recurse(ctx, namespace["made"])
        assert overdub(ctx, namespace["made"], 3) == 21
        assert (operator.mul, (3, 7)) in ctx.metadata
    finally:
        linecache.cache.pop(filename, None)


def test_opaque_function_is_called_natively_but_still_seen():
    def inner(x):
        return x * 10

    def outer(x):
        return inner(x) + 1

    opaque(inner)
    ctx = Recorder()
    assert not can_recurse(ctx, inner)
    assert overdub(ctx, outer, 2) == 21
    assert inner in ctx.fns  # the call itself is seen
    assert operator.mul not in ctx.fns  # its body is not
    assert opaque(len) is len  # builtins are leaves already


def test_opaque_bound_method_marks_the_function():
    class A:
        def work(self, x):
            return x * 2

    a = A()
    assert opaque(a.work) == a.work
    ctx = Recorder()
    assert not can_recurse(ctx, a.work)
    assert overdub(ctx, a.work, 4) == 8 and operator.mul not in ctx.fns


def test_opaque_callable_object():
    class Doubler:
        def __call__(self, x):
            return x * 2

    d = opaque(Doubler())
    ctx = Recorder()
    assert overdub(ctx, d, 4) == 8
    assert not can_recurse(ctx, d)
    assert operator.mul not in ctx.fns


# -- the seed examples ---------------------------------------------------------------------------
def f_xyz(x, y, z):
    return x * y + y * z


def test_nested_tracing_is_exact():
    ctx = TraceContext()
    assert overdub(ctx, f_xyz, 2, 3, 4) == 18
    assert ctx.trace == [((f_xyz, (2, 3, 4)), [((operator.mul, (2, 3)), []),
                                               ((operator.mul, (3, 4)), []),
                                               ((operator.add, (6, 12)), [])])]


def test_nested_tracing_records_keywords_and_depth():
    def g(a, *, b):
        return f_xyz(a, b, 1)

    ctx = TraceContext()
    assert overdub(ctx, g, 2, b=3) == 9
    assert ctx.trace == [((g, (2,), {"b": 3}),
                          [((f_xyz, (2, 3, 1)), [((operator.mul, (2, 3)), []),
                                                 ((operator.mul, (3, 1)), []),
                                                 ((operator.add, (6, 3)), [])])])]


class Float32Literals(ast.NodeTransformer):
    """Turn every float literal into ``np.float32(literal)`` (every new node positioned)."""

    def visit_Constant(self, node):
        if type(node.value) is float:
            call = ast.Call(func=ast.Attribute(ast.Name("np", ast.Load()), "float32", ast.Load()),
                            args=[ast.Constant(node.value)], keywords=[])
            for new in ast.walk(call):
                ast.copy_location(new, node)
            return call
        return node


class Float32LiteralsOuterPositionOnly(ast.NodeTransformer):
    """The same, positioning only the replacing node (``ast.copy_location`` on the Call), as
    passes are commonly written; compile() itself would accept it after
    ``ast.fix_missing_locations``."""

    def visit_Constant(self, node):
        if type(node.value) is float:
            call = ast.Call(func=ast.Attribute(ast.Name("np", ast.Load()), "float32", ast.Load()),
                            args=[ast.Constant(node.value)], keywords=[])
            return ast.copy_location(call, node)
        return node


def half_plus_one(x):
    return x * 0.5 + 1.0


def test_float_literal_pass_keeps_float32():
    class F32(Context):
        pass

    ctx = F32(passes=[Float32Literals()])
    out = overdub(ctx, half_plus_one, np.float32(3.0))
    assert type(out) is np.float32 and out == np.float32(2.5)
    # a Python float input shows the literals really became float32
    plain = half_plus_one(3.0)
    assert type(plain) is float
    out = overdub(ctx, half_plus_one, 3.0)
    assert type(out) is np.float32 and out == np.float32(2.5)
    # arrays keep float32 too
    arr = overdub(ctx, half_plus_one, np.arange(3, dtype=np.float32))
    assert arr.dtype == np.float32 and arr.tolist() == [1.0, 1.5, 2.0]


def test_float_literal_pass_calls_are_seen_by_a_recording_context():
    ctx = Recorder(passes=[Float32Literals()])
    out = overdub(ctx, half_plus_one, 3.0)
    assert type(out) is np.float32 and out == np.float32(2.5)
    assert [args for fn, args in ctx.metadata if fn is np.float32] == [(0.5,), (1.0,)]


class _PostOnly(Context):
    def posthook(self, out, fn, /, *args, **kwargs):
        pass



@pytest.mark.parametrize("make_ctx", [
    pytest.param(_PostOnly),
    pytest.param(Recorder),
], ids=["posthook", "prehook-only"])
def test_pass_with_partially_positioned_nodes(make_ctx):
    """Either the pass's output is compiled (positions filled in as compile() would need after
    ast.fix_missing_locations), or a clear ValueError names the pass; nothing else."""
    ctx = make_ctx(passes=[Float32LiteralsOuterPositionOnly()])
    try:
        out = overdub(ctx, half_plus_one, 3.0)
    except ValueError as exc:
        assert "Float32LiteralsOuterPositionOnly" in str(exc)
    else:
        assert type(out) is np.float32 and out == np.float32(2.5)


_printed = []


def _capture(*args):
    _printed.append(args)


class PrintToCapture(ast.NodeTransformer):
    """Calls of ``print`` become calls of ``_capture``, embedded: no name lookup involved."""

    def visit_Name(self, node):
        if node.id == "print" and isinstance(node.ctx, ast.Load):
            return ast.copy_location(embed(_capture), node)
        return node


def prints_through_a_closure(x, _capture=None):
    print("outer", x)  # the user's own `_capture` (a parameter) must not be what is called

    def inner(y):
        print("inner", y)
        return y + 1

    return inner


def test_embed_binds_a_value_no_user_name_can_shadow():
    _printed.clear()
    ctx = Context(passes=[PrintToCapture()])
    inner = overdub(ctx, prints_through_a_closure, 1, _capture="not callable")
    assert _printed == [("outer", 1)]
    assert overdub(ctx, inner, 5) == 6  # the nested function, rewritten from the pass's tree
    assert inner(7) == 8  # and run natively: its embedded name is bound in its closure too
    assert _printed == [("outer", 1), ("inner", 5), ("inner", 7)]
    assert embed(_capture).id == embed(_capture).id != embed(print).id
    assert embed(_capture).id.startswith("@")


class _HelperForEveryCall(ast.NodeTransformer):
    """Wraps each call ``f(a)`` as ``helper(f(a))``, the helper embedded ``direct`` or not."""

    def __init__(self, direct):
        self.direct = direct

    def visit_Call(self, node):
        self.generic_visit(node)
        return ast.copy_location(ast.Call(embed(_noted, direct=self.direct), [node], []), node)


_notes = []


@opaque
def _noted(value):
    _notes.append(value)
    return value


def _abs_of_neg(x):
    return abs(-x)


@pytest.mark.parametrize("direct", [False, True])
def test_embed_direct_calls_bypass_the_context(direct):
    """A pass's helper embedded with ``direct=True`` is called directly: the context's hooks do
    not see it (they see it without), and it runs the same."""
    _notes.clear()
    ctx = CountContext(passes=[_HelperForEveryCall(direct)])
    assert overdub(ctx, _abs_of_neg, 3.0) == 3.0
    assert _notes == [3.0]
    assert (ctx.counts[_noted] == 0) is direct
    assert ctx.counts[abs] == 1
    assert embed(_noted, direct=True).id != embed(_noted).id


def logged(x):
    y = math.sin(x) * 2 + 1
    return y - x


def test_log_context_shows_the_arithmetic():
    out = io.StringIO()
    result = overdub(LogContext(file=out), logged, 0.5)
    assert result == logged(0.5)
    s = math.sin(0.5)
    lines = out.getvalue().splitlines()
    assert lines == [
        f"{logged.__module__}.logged(0.5)",
        f"getattr({repr(math)[:57]}..., 'sin')",  # reprs are cut at 60 characters
        "math.sin(0.5)",
        f"operator.mul({s!r}, 2)",
        f"operator.add({s * 2!r}, 1)",
        f"operator.sub({s * 2 + 1!r}, 0.5)",
    ]


def test_log_context_prints_to_stdout_by_default(capsys):
    overdub(LogContext(), f_xyz, 1, 2, 3)
    printed = capsys.readouterr().out.splitlines()
    assert printed[1:] == ["operator.mul(1, 2)", "operator.mul(2, 3)", "operator.add(2, 6)"]


def test_count_context_with_types():
    def work():
        return list(map(str, range(1, 11)))

    ctx = CountContext(types=(str, int))
    assert overdub(ctx, work) == [str(i) for i in range(1, 11)]
    assert ctx.counts[str] == 10
    assert ctx.counts[range] == 1  # range(1, 11): all ints
    assert ctx.counts[list] == 0  # list(<map>): the argument is not str/int


def test_count_context_counts_everything_without_types():
    ctx = CountContext()
    overdub(ctx, f_xyz, 1, 2, 3)
    assert ctx.counts == Counter({f_xyz: 1, operator.mul: 2, operator.add: 1})
    assert ctx.total == 4


# -- the rewrite cache --------------------------------------------------------------------------
def test_second_call_does_not_rewrite_again(tmp_path, monkeypatch):
    mod = _load_module(tmp_path, """
        import math

        def g(x):
            return math.sqrt(x) + x

        def f(x):
            return g(x) * 2
    """)
    calls = []
    real = overdub_cache._rewrite

    def spy(code, *args, **kwargs):
        calls.append(code.co_name)
        return real(code, *args, **kwargs)

    monkeypatch.setattr(overdub_cache, "_rewrite", spy)
    ctx = CountContext()
    assert overdub(ctx, mod.f, 4.0) == 12.0
    assert sorted(calls) == ["f", "g"]
    assert overdub(ctx, mod.f, 9.0) == 24.0
    assert overdub(CountContext(), mod.f, 9.0) == 24.0  # a new instance of the same class
    assert sorted(calls) == ["f", "g"]


def test_edited_and_reloaded_module_is_rewritten_again(tmp_path):
    """The cache is keyed on the code object: a reloaded module's new function is seen anew."""
    import linecache

    mod = _load_module(tmp_path, """
        def f(x):
            return x + 1
    """)
    ctx = Recorder()
    assert overdub(ctx, mod.f, 1) == 2
    assert (operator.add, (1, 1)) in ctx.metadata
    path = mod.__file__
    with open(path, "w") as file:
        file.write("\n\n# edited\ndef f(x):\n    return x * 5\n")
    linecache.checkcache(path)
    spec = importlib.util.spec_from_file_location(mod.__name__, path)
    spec.loader.exec_module(mod)
    ctx.metadata.clear()
    assert overdub(ctx, mod.f, 2) == 10
    assert (operator.mul, (2, 5)) in ctx.metadata


def test_cache_does_not_keep_dead_functions_alive(tmp_path):
    mod = _load_module(tmp_path, """
        def f(x):
            return [x * i for i in range(3)]

        class K:
            def m(self, x):
                return x + 1
    """)
    ctx = CountContext()
    assert overdub(ctx, mod.f, 2) == [0, 2, 4]
    assert overdub(ctx, mod.K().m, 1) == 2
    refs = [weakref.ref(mod.f), weakref.ref(mod.f.__code__), weakref.ref(mod.K),
            weakref.ref(mod)]
    del sys.modules[mod.__name__]
    del mod, ctx
    gc.collect()
    assert [r() for r in refs] == [None, None, None, None]


def test_live_context_does_not_keep_dead_closures_alive():
    # A long-lived context runs closures made on the fly (a lambda per call is common): each
    # dies when its user drops it, so the context's memory does not grow with them.
    class Silent(Context):  # intercepts everything, stores nothing
        def prehook(self, fn, /, *args, **kwargs):
            pass

    def make(k):
        return lambda x: x * k

    ctx = Silent()
    refs = []
    for k in range(50):
        f = make(k)
        assert overdub(ctx, f, 2) == 2 * k
        refs.append(weakref.ref(f))
    del f
    gc.collect()
    assert [r() for r in refs] == [None] * 50
    assert overdub(ctx, square_sum, 1, 2) == 5  # the context still works


THREAD_SOURCE = """
import math

def leaf(x):
    return math.sqrt(x * x + 1.0)

def middle(xs):
    total = 0.0
    for x in xs:
        total += leaf(x) * 2
    return total

def top(n):
    data = [float(i) for i in range(n)]
    words = sorted(map(str, data), key=lambda s: (len(s), s))
    return middle(data) + len(words), [w.upper() for w in words]
"""


@pytest.mark.parametrize("round_", range(4))
def test_threads_with_their_own_contexts_racing_on_a_cold_cache(tmp_path, round_):
    mod = _load_module(tmp_path, THREAD_SOURCE)
    n_threads = 8
    barrier = threading.Barrier(n_threads)
    results: list = [None] * n_threads
    errors: list = []

    def worker(i):
        try:
            ctx = CountContext()
            barrier.wait()
            out = overdub(ctx, mod.top, 20)
            results[i] = (out, ctx.counts)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    finally:
        sys.setswitchinterval(old_interval)
    assert not errors, errors
    reference_ctx = CountContext()
    reference = overdub(reference_ctx, mod.top, 20)
    assert reference == mod.top(20)
    assert reference_ctx.counts[mod.leaf] == 20
    assert _by_name(reference_ctx.counts)[("str", "upper")] == 20
    for out, counts in results:
        assert out == reference
        assert _by_name(counts) == _by_name(reference_ctx.counts)


def _by_name(counts: Counter) -> Counter:
    """Counts keyed by something stable across runs: bound builtin methods (``w.upper``) by
    type and method name, functions by their code."""
    out: Counter = Counter()
    for fn, n in counts.items():
        owner = getattr(fn, "__self__", None)
        if getattr(fn, "__objclass__", None) is not None:  # CountContext's key for w.upper
            out[(fn.__objclass__.__name__, fn.__name__)] += n
        elif owner is not None and not isinstance(owner, types.ModuleType):
            out[(type(owner).__name__, fn.__name__)] += n
        elif isinstance(fn, types.FunctionType):
            out[fn.__code__] += n  # a lambda is a new function object on every run
        else:
            out[fn] += n
    return out


def test_two_contexts_in_two_threads_never_see_each_others_calls():
    barrier = threading.Barrier(2)
    seen = {}

    def run(name, fn, *args):
        ctx = Recorder()
        barrier.wait()
        for _ in range(50):
            overdub(ctx, fn, *args)
        seen[name] = set(ctx.fns)

    a = threading.Thread(target=run, args=("a", square_sum, 3, 4))
    b = threading.Thread(target=run, args=("b", uses_sin, 0.5))
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        a.start()
        b.start()
        a.join()
        b.join()
    finally:
        sys.setswitchinterval(old_interval)
    assert math.sin not in seen["a"] and operator.add in seen["a"]
    assert operator.add not in seen["b"] and math.sin in seen["b"]


# -- nesting --------------------------------------------------------------------------------------
class Taylor(Context):
    """Replaces ``math.sin`` by its cubic Taylor polynomial."""


@Taylor.primitive(math.sin)
def _taylor_sin(ctx, x):
    return x - x ** 3 / 6


def test_outer_count_sees_the_inner_primitives_arithmetic():
    outer = CountContext()
    result = overdub(outer, lambda: overdub(Taylor(), uses_sin, 0.5))
    assert result == (0.5 - 0.5 ** 3 / 6) * 2.0
    assert outer.counts[_taylor_sin] == 1
    assert outer.counts[operator.pow] == 1
    assert outer.counts[operator.truediv] == 1
    assert outer.counts[operator.sub] == 1
    assert outer.counts[math.sin] == 0  # replaced by the inner context, never called


def test_inner_context_leaf_calls_run_under_the_outer_context():
    inner = CountContext()
    outer = Recorder()
    assert overdub(outer, lambda: overdub(inner, uses_sin, 0.5)) == uses_sin(0.5)
    assert inner.counts[math.sin] == 1 and inner.counts[operator.mul] == 1
    assert math.sin in outer.fns and operator.mul in outer.fns


def test_nesting_restores_the_outer_context_afterwards():
    inner = Taylor()
    outer = Recorder()

    def run():
        a = overdub(inner, uses_sin, 0.5)
        return a, math.sin(0.5)

    a, b = overdub(outer, run)
    assert a == (0.5 - 0.5 ** 3 / 6) * 2.0 and b == math.sin(0.5)
    assert math.sin in outer.fns  # the second sin is the outer's own call
    # and the inner context works again on its own, with no parent left behind
    assert overdub(inner, uses_sin, 0.5) == a


def test_do_nothing_inner_context_hides_nothing_from_the_outer():
    outer = CountContext()
    assert overdub(outer, lambda: overdub(Context(), uses_sin, 0.5)) == uses_sin(0.5)
    assert outer.counts[math.sin] == 1
    assert outer.counts[operator.mul] == 1


# -- functions of pytest test modules ---------------------------------------------------------

def test_functions_with_asserts_in_pytest_modules_are_rewritten():
    """pytest rewrites the asserts of the modules it imports as tests (this one): such a
    function's code no longer compiles from its source as written, yet it is overdubbed (its
    calls seen), not run natively as code whose source changed."""
    def checked(x):
        assert abs(x) < 10, "too large"
        return x * 2

    assert "@py_assert" in " ".join(checked.__code__.co_varnames)  # pytest did rewrite it
    ctx = CountContext()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "running natively" warning
        assert overdub(ctx, checked, 3) == 6
    assert ctx.counts[abs] == 1
    with pytest.raises(AssertionError, match="too large"):
        overdub(CountContext(), checked, 30)


def test_count_context_counts_unhashable_callees_by_identity():
    # toolz.curry-style objects hash their keywords: with a dict among them they cannot be hashed
    from overdub.contexts import ByIdentity, CountContext

    class Curried:
        def __init__(self, func, **keywords):
            self.func, self.keywords = func, keywords

        def __call__(self, *args):
            return self.func(*args, **self.keywords)

        def __hash__(self):
            return hash((self.func, tuple(self.keywords.items())))

    def lookup(key, table):
        return table[key]

    find = Curried(lookup, table={"a": 1, "b": 2})
    ctx = CountContext()
    assert overdub(ctx, lambda: [find("a"), find("b"), find("a")]) == [1, 2, 1]
    assert ctx.counts[ByIdentity(find)] == 3 and ctx.counts[lookup] == 3


def _replace_two(node, new):
    class Replace(ast.NodeTransformer):
        def visit_Constant(self, constant):
            if constant.value == 2:
                return ast.copy_location(ast.Constant(new), constant)
            return constant
    return Replace().visit(node)


def _doubled(x):
    return x * 2


def test_passes_made_by_functools_partial_are_told_apart():
    import functools
    got = [overdub(Context(passes=[functools.partial(_replace_two, new=n)]), _doubled, 1)
           for n in (5, 3, 5)]
    assert got == [5, 3, 5]  # (a partial's own attributes are empty: what it wraps decides)
