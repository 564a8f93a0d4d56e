"""Reverse mode on scalar code without a dispatch per operator: functions specialised for it.

Under :class:`ReverseContext` every operator of a function is a call into the context, which
records one tape entry per operation.  On a loop of float arithmetic (an ODE integrator, the
Rosenbrock sum) those calls cost some forty times the arithmetic itself.  This module compiles
its own version of a user function, from its source (found, compiled and placed at the user's
lines by the core's :func:`overdub.compile_variant`), in which

- each arithmetic expression (``+ - * / **``, unary ``-``/``+``) is one region: its leaves
  (names, constants, calls, subscripts...) are evaluated in Python's order; if all of them are
  plain numbers or this context's differentiated floats, the value is computed natively, with
  the local partial derivative of the value in each leaf (source-to-source differentiation of
  the expression), and the tape gets one entry for the whole expression (a ``_Partials``
  record, a pair per leaf); a call of one argument in it (``math.exp(x * 0.5)``) is made
  where it stands, natively when the callee is, at run time, a function of one float with
  partials declared beside its rules, and then enters the entry as an operation of its own
  (``_regions._Graph.call``);
- everything else -- and an expression whose leaves are arrays, other contexts' values, objects
  with operator methods, or hit a point the partials do not cover (``0 ** 0.5``) -- goes through
  the context as the core would send it (``overdub(ctx, operator.mul, a, b)``...): tagging,
  dispatch and the rule tables stay the general path;
- calls of other specialisable Python functions call their specialised versions directly.

The context uses a specialised version only when nothing encloses it (an enclosing context
must see the arithmetic); on the second-order tapes of :mod:`overdub_ad.hvp` it runs versions
compiled apart, whose records also hold each expression's second partials (a ``_Second``
record: ``_regions.second_partials``); it tries one wherever the core would recurse into a Python
function (the function ``grad`` is given, one given containers of differentiated values, a
bound method, a property's getter, a class's ``__init__``).  Functions using constructs this
compiler does not handle (nested functions, ``try``, ``with``, generators, ``global``...) are
run by the core as before, and the route records why (:func:`why_not`, for ``explain``).  The
fused entries differentiate the same expressions; products of partial derivatives are
associated per expression rather than per operation, so gradients agree with the
operation-by-operation tape to rounding.  An expression's graph, partials and code are in
:mod:`._regions`, the locals whose values need no box in :mod:`._unboxed`, attribute reads
and method calls in :mod:`._sites`, comprehensions in :mod:`._comprehensions`, the helpers
the generated code calls in :mod:`._spec_runtime`; here: the operator tables, which functions
are specialised, and the statements' translation.
"""

from __future__ import annotations

import __future__
import ast
import inspect
import math
import operator
import types
import weakref
from typing import Any

import numpy as np

from overdub import (NoSourceError, Tagged, carries_tags, compile_variant, function_source,
                     hidden_prefix, is_opaque, variant_maker)

from .. import _rules
from . import _comprehensions
from ._spec_runtime import (_attr, _bin, _call, _CALLS, _compare, _contains, _iter, _keywords,
                            _METHOD, _PLAIN, _SECOND_CALLS, _setattr, _setitem, _star, _sub, _un,
                            _unpack)
from ._regions import _is_name, _Unsupported, region
from ._sites import attribute, called_attribute
from ._tape import _Partials, _Second
from ._unboxed import unboxed

_PACKAGES = frozenset(("overdub", "overdub_ad", "overdub_gpu"))
# values an arithmetic region computes with natively: a differentiated float's value, or a
# plain number (_PLAIN)
_FLOATS = frozenset({float, np.float64})
_RESULTS = frozenset({float, np.float64})  # a differentiated result must be a real float
# operator node -> (symbol, function, in-place function)
_ARITH: dict[type, tuple[str, Any, Any]] = {
    ast.Add: ("+", operator.add, operator.iadd), ast.Sub: ("-", operator.sub, operator.isub),
    ast.Mult: ("*", operator.mul, operator.imul),
    ast.Div: ("/", operator.truediv, operator.itruediv),
    ast.Pow: ("**", operator.pow, operator.ipow)}
_UNARY: dict[type, tuple[str, Any]] = {ast.USub: ("-", operator.neg),
                                       ast.UAdd: ("+", operator.pos)}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
            ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
            ast.Is: operator.is_, ast.IsNot: operator.is_not}
# calls whose argument the iteration protocol is left to (they iterate it themselves)
_NO_WRAP = {"range", "iter", "enumerate", "zip", "reversed", "map", "filter", "sorted", "list",
            "tuple"}
# the generated code's names start so, or with a longer prefix no name of the user's function
# starts with (see overdub.hidden_prefix): compiled, they are unspellable @ names
_STEM = "_odr_"
# calls that look at their caller's frame: a function making one is left to the core
_FRAME_SENSITIVE = {"locals", "vars", "dir", "globals", "eval", "exec", "breakpoint", "super"}
# what the generated code refers to, as @<name> (closure cells, not globals: the user's module
# is left alone)
_HELPERS: dict[str, Any] = {
    "T": Tagged, "bin": _bin, "un": _un, "cmp": _compare, "contains": _contains, "sub": _sub,
    "attr": _attr, "setitem": _setitem, "setattr": _setattr, "iter": _iter, "unpack": _unpack,
    "call": _call, "star": _star, "keywords": _keywords, "F": _FLOATS, "P": _PLAIN,
    "R": _RESULTS, "E": _Partials, "E2": _Second, "log": math.log, "slice": slice,
    "len": len, "id": id, "type": type, "tuple": tuple, "list": list,
    "QUOTIENT": _rules.QUOTIENT, "POWER": _rules.POWER, "CALLS": _CALLS,
    "SECOND_CALLS": _SECOND_CALLS, "METHOD": _METHOD}
for _node, (_sym, _op, _iop) in _ARITH.items():
    _HELPERS["op_" + _op.__name__] = _op
    _HELPERS["op_" + _iop.__name__] = _iop
for _sym, _op in _UNARY.values():
    _HELPERS["op_" + _op.__name__] = _op
for _op in _COMPARE.values():
    _HELPERS["op_" + _op.__name__] = _op


# -- which functions, and their specialised versions -----------------------------------------

# fn -> (its code, defaults, keyword defaults, the specialised function or None); the versions
# for hvp's tapes (second partials in their records: see _Compiler.second) kept apart
_SPECS: weakref.WeakKeyDictionary[Any, tuple[Any, ...]] = weakref.WeakKeyDictionary()
_SECOND_SPECS: weakref.WeakKeyDictionary[Any, tuple[Any, ...]] = weakref.WeakKeyDictionary()
# the operators whose shipped partials the specialised code writes out: while the user has
# registered a rule of their own for one of them, the context records operation by operation
_WRITTEN_OUT = frozenset(id(f) for entry in (*_ARITH.values(), *_UNARY.values())
                         for f in entry[1:])
# code object -> the specialised code, or why there is none (unsupported); for hvp's tapes apart
_COMPILED: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_SECOND_COMPILED: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
# code object -> (it, the globals, a maker of the specialised versions of functions with that
# code: a def inside a loop's function makes a new one at every call); for hvp's tapes apart
_MAKERS: weakref.WeakKeyDictionary[Any, tuple[Any, Any, Any]] = weakref.WeakKeyDictionary()
_SECOND_MAKERS: weakref.WeakKeyDictionary[Any, tuple[Any, Any, Any]] = \
    weakref.WeakKeyDictionary()


def specialised(fn: types.FunctionType, second: bool = False) -> Any:
    """``fn``'s specialised version ``spec(ctx, *args, **kwargs)``, or None when the context
    must not (a rule, an opaque function, overdub's own code) or cannot use one (see
    :func:`why_not`).  ``second``: the version for the tapes of ``hvp``, whose records of
    arithmetic hold second partials too."""
    if _rules.vjp_rules(fn) is not None or _rules.is_nondifferentiable(fn) \
            or _rules.any_overridden(_WRITTEN_OUT) or \
            _rules.standin(fn, _rules.vjp_rules) is not None:
        return None  # (asked before compiling: code compiled under a user's rule is not kept)
    specs = _SECOND_SPECS if second else _SPECS
    found = specs.get(fn)
    code = fn.__code__
    if found is not None and found[0] is code and found[1] is fn.__defaults__ and \
            found[2] is fn.__kwdefaults__:
        return found[3]
    spec = _build(fn, second)
    specs[fn] = (code, fn.__defaults__, fn.__kwdefaults__, spec)
    return spec


def why_not(fn: types.FunctionType, second: bool = False) -> str | None:
    """Why :func:`specialised` gave no version of ``fn`` (what ``explain`` says), or None for a
    function that is no candidate (opaque, overdub's own, moved by the tag machinery): there
    is nothing to report about those."""
    if _not_a_candidate(fn):
        return None
    if _rules.vjp_rules(fn) is not None:
        return "a rule of its own"
    if _rules.is_nondifferentiable(fn):
        return "declared nondifferentiable"
    if _rules.standin(fn, _rules.vjp_rules) is not None:
        return "a stand-in of its own"
    if _rules.any_overridden(_WRITTEN_OUT):
        return "a user rule for an arithmetic operator"
    compiled = (_SECOND_COMPILED if second else _COMPILED).get(fn.__code__)
    return compiled if isinstance(compiled, str) else "outside the compiled subset"


def _not_a_candidate(fn: types.FunctionType) -> bool:
    return is_opaque(fn) or carries_tags(fn) or \
        (getattr(fn, "__module__", None) or "").partition(".")[0] in _PACKAGES


def _build(fn: types.FunctionType, second: bool = False) -> Any:
    if _not_a_candidate(fn):
        return None
    code = fn.__code__
    cache = _SECOND_COMPILED if second else _COMPILED
    compiled = cache.get(code, False)
    if compiled is False:
        # (compiled outside any lock: two threads compile alike, and the first one's stays)
        try:
            compiled = _compile(fn, second)
        except _Unsupported as why:
            compiled = str(why) or "outside the compiled subset"
        except NoSourceError:
            compiled = "no source"
        except (RecursionError, SystemError):
            compiled = "too deeply nested"  # (or a conversion that went wrong: the core runs it)
        compiled = cache.setdefault(code, compiled)
    if isinstance(compiled, str):
        return None
    makers = _SECOND_MAKERS if second else _MAKERS
    found = makers.get(code)
    if found is None or found[0] is not code or found[1] is not fn.__globals__:
        # (the attribute sites shared by the versions of every function with this code: what a
        # site remembers is checked against the object it reads, and holds for one run; keyed
        # by the code itself, as code objects of equal content compare equal)
        compiled, sites = compiled
        found = makers[code] = (code, fn.__globals__, variant_maker(
            fn, compiled, {**_HELPERS, "consts": code.co_consts, "namespace": fn.__globals__,
                           "sites": [None] * sites}))
    spec = found[2](fn)
    spec.__defaults__ = fn.__defaults__  # (the user's parameters follow the context)
    spec.__kwdefaults__ = fn.__kwdefaults__
    return spec


# -- the compiler ----------------------------------------------------------------------------

_SIMPLE_STATEMENTS = (ast.Pass, ast.Break, ast.Continue)
# what explain says of a statement or an expression the compiler leaves to the core
_STATEMENTS = {ast.Try: "try", ast.With: "with", ast.Raise: "raise", ast.Global: "global",
               ast.Nonlocal: "nonlocal", ast.Delete: "del", ast.Match: "match",
               ast.Import: "import", ast.ImportFrom: "import", ast.FunctionDef: "a nested function",
               ast.ClassDef: "a nested class"}
_EXPRESSIONS = {ast.Lambda: "a lambda", ast.JoinedStr: "an f-string", ast.Set: "a set display",
                ast.ListComp: "a comprehension", ast.SetComp: "a comprehension",
                ast.DictComp: "a comprehension", ast.GeneratorExp: "a generator expression",
                ast.Starred: "a starred expression", ast.NamedExpr: "an assignment expression"}


# nested scopes the compiler leaves to the core, by what explain calls them
_NESTED = {ast.FunctionDef: "a nested function", ast.AsyncFunctionDef: "a nested function",
           ast.Lambda: "a lambda", ast.ClassDef: "a nested class"}


def _compile(fn: types.FunctionType, second: bool = False) -> tuple[types.CodeType, int]:
    """The specialised code and its number of attribute sites (see _spec_runtime._attr)."""
    code = fn.__code__
    if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE |
                        inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE):
        raise _Unsupported("a generator or coroutine")
    node = function_source(fn)  # (NoSourceError: the core runs it, as it can)
    if isinstance(node, ast.Lambda):  # compiled as the def it stands for
        body: list[ast.stmt] = [ast.copy_location(ast.Return(value=node.body), node.body)]
    elif isinstance(node, ast.FunctionDef):
        body = node.body
    else:
        raise _Unsupported("an asynchronous function")
    for child in _outer_nodes(node):
        if child is not node and type(child) in _NESTED and not _nested_def(child):
            # (comprehensions are compiled here: the cells they make are the generated code's)
            raise _Unsupported(_NESTED[type(child)])
        if isinstance(child, ast.Name) and child.id.startswith("__") and \
                not child.id.endswith("__"):
            raise _Unsupported("a private name")  # mangled by a class
        if isinstance(child, ast.Attribute) and child.attr.startswith("__") and \
                not child.attr.endswith("__"):
            # (the helpers look attributes up by their names, unmangled)
            raise _Unsupported("a private attribute")
        if isinstance(child, ast.Call) and (
                (isinstance(child.func, ast.Name) and child.func.id in _FRAME_SENSITIVE)
                or (isinstance(child.func, ast.Attribute)
                    and child.func.attr in ("_getframe", "currentframe"))):
            # they would see the generated frame's variables
            raise _Unsupported("a call that reads its caller's frame")
        if isinstance(child, (ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
            raise _Unsupported(f"an expression {type(child).__name__}")
    compiler = _Compiler(set(code.co_varnames) | set(code.co_cellvars),
                         hidden_prefix(node, _STEM), code, second)
    parameters = code.co_argcount + code.co_kwonlyargcount + \
        bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    compiler.unboxed, compiler.boxless = unboxed(
        body, set(code.co_varnames[parameters:]) - set(code.co_cellvars), tuple(_ARITH),
        tuple(_UNARY))
    compiler.block(body)
    return compiler.finish(fn, node), compiler.sites


def _outer_nodes(node: ast.AST) -> Any:
    """``ast.walk(node)``, not into the bodies of the functions defined inside: they run as
    the user's own code (see :meth:`_Compiler.nested_def`)."""
    pending = [node]
    while pending:
        child = pending.pop()
        yield child
        if child is not node and _nested_def(child):
            assert isinstance(child, ast.FunctionDef)
            pending.extend([*child.args.defaults, *[d for d in child.args.kw_defaults if d]])
        else:
            pending.extend(ast.iter_child_nodes(child))


def _nested_def(node: ast.AST) -> bool:
    """A ``def`` inside the function that the compiler makes as Python would: no decorator,
    annotations only where they are not evaluated (``from __future__ import annotations``:
    checked when the function is made)."""
    return isinstance(node, ast.FunctionDef) and not node.decorator_list


def _display_items(value: str, source: ast.expr | None, count: int) -> list[str | None]:
    """The names or constants a tuple or list display ``source`` was compiled to (its text
    ``value``: ``(a, b, )``), one per target of an assignment of ``count`` targets; None for
    each where ``source`` is no such display (``x, y = f()``: the items are not known)."""
    if isinstance(source, (ast.Tuple, ast.List)) and len(source.elts) == count and \
            not any(isinstance(e, ast.Starred) for e in source.elts):
        items = value[1:-1].split(", ")
        if items and items[-1] == "":
            items.pop()
        if len(items) == count and all(_is_name(i) for i in items):
            return list(items)
    return [None] * count


def _made_function(code: types.CodeType, namespace: dict[str, Any], defaults: Any,
                   kwdefaults: Any, annotations: Any, *cells: Any) -> types.FunctionType:
    """What a ``def`` statement makes, from its code object (the user's, found among the
    enclosing function's constants, so that its source is found and it is specialised in
    turn) and the cells of the generated function for its free variables."""
    made = types.FunctionType(code, namespace, code.co_name, defaults or None, cells or None)
    made.__qualname__ = getattr(code, "co_qualname", made.__qualname__)
    made.__kwdefaults__ = kwdefaults or None
    made.__annotations__ = dict(annotations)
    return made


_HELPERS["made_function"] = _made_function
_FUTURE_ANNOTATIONS = __future__.annotations.compiler_flag


class _Compiler:
    """Generated source, line by line, each line remembering the user node it comes from.

    ``hidden`` starts every name the generated code makes (``ctx``: the context parameter)."""

    def __init__(self, local_names: set[str], hidden: str, code: types.CodeType,
                 second: bool = False) -> None:
        self.locals = local_names
        self.second = second  # records for hvp's tapes (see region)
        self.code = code
        self.cells = frozenset(code.co_cellvars)  # (never kept unwrapped: see nested_def)
        self.hidden = hidden
        self.ctx = hidden + "ctx"
        self.lines: list[str] = []
        self.origins: list[ast.AST] = []
        self.indent = 1
        self.count = 0
        self.sites = 0  # attributes read (see attribute)
        # locals unwrapped in the current straight-line code: name -> (value, node, ok)
        self.known: dict[str, tuple[str, str, str]] = {}
        # the locals that need no box, and the ids of the regions assigned to them (_unboxed)
        self.unboxed: set[str] = set()
        self.boxless: set[int] = set()

    # -- emitting --------------------------------------------------------------------------
    def emit(self, text: str, origin: ast.AST) -> None:
        self.lines.append("    " * self.indent + text)
        self.origins.append(origin)

    def fresh(self, kind: str = "t") -> str:
        self.count += 1
        return f"{self.hidden}{kind}{self.count}"

    def helper(self, name: str) -> str:
        """The generated name of one of the ``_HELPERS``."""
        return self.hidden + name

    def finish(self, fn: types.FunctionType, node: ast.FunctionDef | ast.Lambda
               ) -> types.CodeType:
        """The specialised function's code: ``spec(ctx, *args, **kwargs)`` (defaults and
        annotations stay the function object's)."""
        args = ast.unparse(node.args)
        ctx, p = self.ctx, self.hidden
        signature = f"{ctx}, /, {args}" if args else f"{ctx}, /"
        # positional-only parameters of the user's signature follow ours
        if node.args.posonlyargs:
            signature = f"{ctx}, " + args
        # named so that the def binds nothing the body could see (a recursive function's own
        # name stays a global lookup)
        head = [f"def {p}target({signature}):",
                f"    {p}ref = {ctx}._ref",
                f"    {p}lbl = {ctx}._label",
                f"    {p}tape = {ctx}.tape",
                f"    {p}app = {p}tape.append"]
        origins: list[ast.AST | None] = [None] * len(head)  # the header: at the user's def
        origins.extend(self.origins)
        try:
            return compile_variant(fn, "\n".join(head + self.lines), origins=origins, hidden=p)
        except SyntaxError:  # pragma: no cover - a bug of ours: let the core run it
            raise _Unsupported("generated code that does not compile") from None

    # -- statements ------------------------------------------------------------------------
    def block(self, body: list[ast.stmt]) -> None:
        if not body:
            raise _Unsupported("an empty block")
        for stmt in body:
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, _SIMPLE_STATEMENTS):
            self.emit(type(stmt).__name__.lower(), stmt)
        elif isinstance(stmt, ast.Expr):
            if isinstance(stmt.value, ast.Constant):
                return  # a docstring or a bare constant
            self.emit(self.expr(stmt.value, stmt), stmt)
        elif isinstance(stmt, ast.Return):
            value = "None" if stmt.value is None else self.expr(stmt.value, stmt)
            self.emit(f"return {value}", stmt)
        elif isinstance(stmt, ast.Assign):
            self.assign(stmt)
        elif isinstance(stmt, ast.AugAssign):
            self.augassign(stmt)
        elif isinstance(stmt, ast.AnnAssign):  # (a local's annotation is never evaluated)
            if stmt.value is not None:
                self.store(stmt.target, self.expr(stmt.value, stmt), stmt.value, stmt)
            elif not isinstance(stmt.target, ast.Name):
                raise _Unsupported("an annotation of an attribute or item")
        elif isinstance(stmt, ast.FunctionDef) and _nested_def(stmt):
            self.nested_def(stmt)
        elif isinstance(stmt, ast.If):
            test = self.expr(stmt.test, stmt)
            self.emit(f"if {test}:", stmt)
            self.indented(stmt.body)
            if stmt.orelse:
                self.emit("else:", stmt)
                self.indented(stmt.orelse)
        elif isinstance(stmt, ast.While):
            if stmt.orelse:
                raise _Unsupported("while ... else")
            self.known = {}
            start = len(self.lines)
            self.indent += 1
            test = self.expr(stmt.test, stmt)
            self.indent -= 1
            prelude = self.lines[start:], self.origins[start:]
            del self.lines[start:], self.origins[start:]
            self.emit("while True:", stmt)
            self.lines.extend(prelude[0])
            self.origins.extend(prelude[1])
            self.emit(f"    if not {test}:", stmt)
            self.emit("        break", stmt)
            self.indented(stmt.body)
        elif isinstance(stmt, ast.For):
            self.for_loop(stmt)
        elif isinstance(stmt, ast.Assert):  # inline: under -O nothing of it runs
            test = self.inline(stmt.test)
            message = "" if stmt.msg is None else f", {self.inline(stmt.msg)}"
            self.emit(f"assert {test}{message}", stmt)
        else:
            raise _Unsupported(_STATEMENTS.get(type(stmt), f"a {type(stmt).__name__} statement"))

    def nested_def(self, stmt: ast.FunctionDef) -> None:
        """``def name(...): ...`` inside the function: the function Python would make, from
        the user's code object, its defaults evaluated here, its free variables the generated
        function's cells (``(lambda: v).__closure__[0]`` makes ``v`` one, shared with the
        code that assigns it, as in the user's function)."""
        found = [k for k, const in enumerate(self.code.co_consts)
                 if isinstance(const, types.CodeType) and const.co_name == stmt.name
                 and const.co_firstlineno == stmt.lineno]
        if len(found) != 1:
            raise _Unsupported("a nested function whose code is not found")
        inner = self.code.co_consts[found[0]]
        args = stmt.args
        annotated = [a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                                            args.vararg, args.kwarg) if a and a.annotation]
        if (annotated or stmt.returns) and not self.code.co_flags & _FUTURE_ANNOTATIONS:
            raise _Unsupported("a nested function with annotations evaluated when it is made")
        annotations = {a.arg: ast.unparse(a.annotation)
                       for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg,
                                 args.kwarg) if a and a.annotation}
        if stmt.returns:
            annotations["return"] = ast.unparse(stmt.returns)
        defaults = "(" + "".join(f"{self.expr(d, stmt)}, " for d in args.defaults) + ")"
        kwdefaults = "{" + ", ".join(f"{a.arg!r}: {self.expr(d, stmt)}" for a, d in zip(
            args.kwonlyargs, args.kw_defaults) if d is not None) + "}"
        for name in inner.co_freevars:
            if not name.isidentifier():
                raise _Unsupported("a nested function with a hidden free variable")
        cells = "".join(f", (lambda: {name}).__closure__[0]" for name in inner.co_freevars)
        self.emit(f"{stmt.name} = {self.helper('made_function')}({self.helper('consts')}"
                  f"[{found[0]}], {self.helper('namespace')}, {defaults}, {kwdefaults}, "
                  f"{annotations!r}{cells})", stmt)
        self.known.pop(stmt.name, None)

    def indented(self, body: list[ast.stmt]) -> None:
        """A nested block: what was unwrapped before it may be rebound in it, or not run."""
        self.known = {}
        self.indent += 1
        self.block(body)
        self.indent -= 1
        self.known = {}

    def for_loop(self, stmt: ast.For) -> None:
        source = stmt.iter
        value = self.iterable(self.expr(source, stmt), source)
        self.loop_head(stmt.target, value, stmt)
        self.block(stmt.body)
        self.indent -= 1
        self.known = {}
        if stmt.orelse:
            self.emit("else:", stmt)
            self.indented(stmt.orelse)

    def iterable(self, value: str, source: ast.expr) -> str:
        """What a loop iterates: ``value``, through the context unless a call iterating it
        itself (``range``, ``zip``...)."""
        if isinstance(source, ast.Call) and isinstance(source.func, ast.Name) and \
                source.func.id in _NO_WRAP:
            return value
        return f"{self.helper('iter')}({self.ctx}, {value})"

    def loop_head(self, target: ast.expr, value: str, stmt: ast.AST) -> None:
        """``for target in value:``, the body's indentation entered: a name bound by the loop,
        anything else (``a, b``, ``self.x``) stored from a temporary as an assignment does."""
        self.known = {}
        if isinstance(target, ast.Name):
            self.emit(f"for {target.id} in {value}:", stmt)
            self.indent += 1
            return
        temp = self.fresh("i")
        self.emit(f"for {temp} in {value}:", stmt)
        self.indent += 1
        self.store(target, temp, None, stmt)

    def assign(self, stmt: ast.Assign) -> None:
        value = self.expr(stmt.value, stmt)
        if len(stmt.targets) > 1 and not _is_name(value):
            temp = self.fresh()
            self.emit(f"{temp} = {value}", stmt)
            value = temp
        for target in stmt.targets:
            self.store(target, value, stmt.value, stmt)

    def store(self, target: ast.expr, value: str, source: ast.expr | None,
              stmt: ast.AST) -> None:
        ctx = self.ctx
        if isinstance(target, ast.Name):
            self.emit(f"{target.id} = {value}", stmt)
            self.rebound([target.id], [value])
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not target.elts or any(isinstance(e, ast.Starred) for e in target.elts):
                raise _Unsupported("a starred or empty assignment target")
            items = _display_items(value, source, len(target.elts))
            if not isinstance(source, (ast.Tuple, ast.List)):
                value = f"{self.helper('unpack')}({ctx}, {value})"
            if all(isinstance(e, ast.Name) for e in target.elts):
                names = [e.id for e in target.elts]  # type: ignore[attr-defined]
                self.emit(f"({''.join(n + ', ' for n in names)}) = {value}", stmt)
                self.rebound(names, items)
                return
            # unpacked (its length checked) first, then stored left to right, as Python does
            temps = [self.fresh() for _ in target.elts]
            self.emit(f"({''.join(t + ', ' for t in temps)}) = {value}", stmt)
            for temp, element in zip(temps, target.elts):
                self.store(element, temp, None, stmt)
        elif isinstance(target, ast.Subscript):
            obj = self.hold(self.expr(target.value, stmt), stmt)
            index = self.hold(self.index(target.slice, stmt), stmt)
            self.emit(f"{self.helper('setitem')}({ctx}, {obj}, {index}, {value})", stmt)
        elif isinstance(target, ast.Attribute):
            obj = self.hold(self.expr(target.value, stmt), stmt)
            self.emit(f"{self.helper('setattr')}({ctx}, {obj}, {target.attr!r}, {value})", stmt)
        else:
            raise _Unsupported(f"an assignment to a {type(target).__name__}")

    def rebound(self, names: list[str], values: list[str | None]) -> None:
        """``names`` were just bound, each to the value of a name or constant of ``values``
        (None: another value): what was unwrapped of that value (a local's, a region's
        result) stands for the name now, and nothing of what the name held before.  Only
        names are rebound by an assignment: what is unwrapped of the other locals stays
        (a tuple assignment of an RK4 stage keeps ``x, y, z`` unwrapped)."""
        carried = [self.known.get(v) if v is not None else None for v in values]
        for name in names:
            self.known.pop(name, None)
        for name, known in zip(names, carried):
            if known is not None and name in self.locals and name not in self.cells:
                self.known[name] = known

    def hold(self, text: str, origin: ast.AST) -> str:
        """``text`` evaluated now, into a temporary (unless it is a name or a constant)."""
        if _is_name(text):
            return text
        temp = self.fresh()
        self.emit(f"{temp} = {text}", origin)
        return temp

    def unwrap(self, raw: str, origin: ast.AST, names: tuple[str, str] | None = None
               ) -> tuple[str, str, str]:
        """``(value, node, flag)``: the names holding the number ``raw`` (a name) holds and
        its tape node (None: a plain number), valid where ``flag``, which says it is one a
        region computes with natively; unwrapped here (into ``names`` if given) unless it was
        already in this straight-line code (a local not rebound since)."""
        known = self.known.get(raw)
        if known is not None:
            return known
        value, node = names if names is not None else (self.fresh("v"), self.fresh("n"))
        found = (value, node, self.fresh("ok"))
        self.unwrap_into(raw, found, origin)
        if raw in self.locals and raw not in self.cells:
            self.known[raw] = found
        return found

    def unwrap_into(self, raw: str, names: tuple[str, str, str], origin: ast.AST) -> None:
        """The code of :meth:`unwrap`, into ``names`` (value, node, flag)."""
        T, F, P = self.helper("T"), self.helper("F"), self.helper("P")
        v, n, flag = names
        ty = self.helper("type")  # (never the user's name: a parameter called type)
        self.emit(f"if {ty}({raw}) is {T}:", origin)
        self.emit(f"    {v} = {raw}.value", origin)
        self.emit(f"    {n} = {raw}.meta", origin)
        self.emit(f"    {flag} = {raw}.owner is {self.hidden}ref and {ty}({v}) in {F}", origin)
        self.emit(f"elif {ty}({raw}) in {P}:", origin)
        self.emit(f"    {v} = {raw}", origin)
        self.emit(f"    {n} = None", origin)
        self.emit(f"    {flag} = True", origin)
        self.emit("else:", origin)
        self.emit(f"    {flag} = False", origin)

    def augassign(self, stmt: ast.AugAssign) -> None:
        if type(stmt.op) not in _ARITH:
            raise _Unsupported(f"the operator {type(stmt.op).__name__}=")
        target = stmt.target
        if isinstance(target, (ast.Subscript, ast.Attribute)):
            # x[i] += v: x and i once, the item read, combined in place, stored (Python's order)
            ctx = self.ctx
            obj = self.hold(self.expr(target.value, stmt), stmt)
            if isinstance(target, ast.Subscript):
                key = self.hold(self.index(target.slice, stmt), stmt)
                read = f"{self.helper('sub')}({ctx}, {obj}, {key})"
            else:
                read = f"{self.helper('attr')}({ctx}, {obj}, {target.attr!r})"
            current = self.fresh()
            self.emit(f"{current} = {read}", stmt)
            combined = ast.BinOp(left=ast.Name(id=current, ctx=ast.Load()), op=stmt.op,
                                 right=stmt.value)
            ast.copy_location(combined, stmt)
            result = self.region(combined, stmt, inplace=True)
            if isinstance(target, ast.Subscript):
                self.emit(f"{self.helper('setitem')}({ctx}, {obj}, {key}, {result})", stmt)
            else:
                self.emit(f"{self.helper('setattr')}({ctx}, {obj}, {target.attr!r}, {result})",
                          stmt)
            return
        if not isinstance(target, ast.Name):  # pragma: no cover - (Python allows no other)
            raise _Unsupported("an augmented assignment to a pattern")
        name = target.id
        combined = ast.BinOp(left=ast.Name(id=name, ctx=ast.Load()), op=stmt.op,
                             right=stmt.value)
        ast.copy_location(combined, stmt)
        result = self.region(combined, stmt, inplace=True)
        self.emit(f"{name} = {result}", stmt)
        self.known.pop(name, None)

    # -- expressions, in Python's order of evaluation, into temporaries -----------------------
    def expr(self, node: ast.expr, origin: ast.AST) -> str:
        ctx = self.ctx
        if isinstance(node, ast.Constant):
            return repr(node.value)
        if isinstance(node, ast.Name):
            if node.id in self.locals:
                return node.id
            return self.hold(node.id, origin)  # a global read now, in Python's order
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) and \
                isinstance(node.operand, ast.Constant) and \
                isinstance(node.operand.value, (int, float)) and \
                not isinstance(node.operand.value, bool):
            # -1 (an index: k[-1]): Python's own constant, as the context computes it
            value = node.operand.value
            return repr(-value if isinstance(node.op, ast.USub) else +value)
        if isinstance(node, (ast.BinOp, ast.UnaryOp)):
            if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                return self.hold(f"(not {self.expr(node.operand, origin)})", origin)
            return self.region(node, origin)
        if isinstance(node, ast.Call):
            return self.call(node, origin)
        if isinstance(node, ast.Subscript):
            obj = self.hold(self.expr(node.value, origin), origin)
            index = self.hold(self.index(node.slice, origin), origin)
            # a tuple's or list's item natively (what the context does), anything else
            # through _sub
            ty, tup, lst = self.helper("type"), self.helper("tuple"), self.helper("list")
            return self.hold(f"({obj}[{index}] if {ty}({obj}) is {tup} or {ty}({obj}) is {lst} "
                             f"else {self.helper('sub')}({ctx}, {obj}, {index}))", origin)
        if isinstance(node, ast.Attribute):
            return attribute(self, node, origin)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = [self.argument(e, origin) for e in node.elts]
            if isinstance(node, ast.Tuple):
                return "(" + "".join(i + ", " for i in items) + ")"
            if isinstance(node, ast.Set):
                return self.hold("{" + ", ".join(items) + "}", origin)
            return "[" + ", ".join(items) + "]"
        if isinstance(node, ast.Compare):
            return self.hold(self.compare(node, origin, inline=False), origin)
        if isinstance(node, ast.Dict) and all(k is not None for k in node.keys):
            pairs = [f"{self.hold(self.expr(k, origin), origin)}: "  # type: ignore[arg-type]
                     f"{self.hold(self.expr(v, origin), origin)}"
                     for k, v in zip(node.keys, node.values)]
            return "{" + ", ".join(pairs) + "}"
        if isinstance(node, (ast.BoolOp, ast.IfExp, ast.Dict)):
            return self.hold(self.inline(node), origin)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            return _comprehensions.compile_comprehension(self, node, origin)
        raise _Unsupported(_EXPRESSIONS.get(type(node), f"an expression {type(node).__name__}"))

    def argument(self, node: ast.expr, origin: ast.AST) -> str:
        """An item of a call's arguments or of a display: ``*it`` iterated where it stands."""
        if isinstance(node, ast.Starred):
            value = self.expr(node.value, origin)
            return "*" + self.hold(f"{self.helper('star')}({self.ctx}, {value})", origin)
        return self.hold(self.expr(node, origin), origin)

    def _plain_elts(self, node: ast.Tuple | ast.List) -> list[ast.expr]:
        if any(isinstance(e, ast.Starred) for e in node.elts):
            raise _Unsupported("a starred item inside and/or/if-else")
        return node.elts

    def index(self, node: ast.expr, origin: ast.AST) -> str:
        if isinstance(node, ast.Slice):
            parts = [self.hold(self.expr(p, origin), origin) if p is not None else "None"
                     for p in (node.lower, node.upper, node.step)]
            return f"{self.helper('slice')}({', '.join(parts)})"
        if isinstance(node, ast.Tuple) and any(isinstance(e, ast.Slice) for e in node.elts):
            return "(" + "".join(self.index(e, origin) + ", " for e in node.elts) + ")"
        return self.expr(node, origin)

    def call(self, node: ast.Call, origin: ast.AST) -> str:
        ctx = self.ctx
        method = None
        if isinstance(node.func, ast.Attribute):
            fn, method = called_attribute(self, node.func, origin)
        else:
            fn = self.hold(self.expr(node.func, origin), origin)
        args = [self.argument(arg, origin) for arg in node.args]
        for keyword in node.keywords:
            value = self.hold(self.expr(keyword.value, origin), origin)
            if keyword.arg is None:  # **mapping
                args.append("**" + self.hold(f"{self.helper('keywords')}({ctx}, {value})",
                                             origin))
            else:
                args.append(f"{keyword.arg}={value}")
        listed = "".join(", " + a for a in args)
        general = f"{self.helper('call')}({ctx}, {fn}{listed})"
        if method is None:
            return self.hold(general, origin)
        known, obj = method
        return self.hold(f"({known}[3]({ctx}, {obj}{listed}) if {fn} is "
                         f"{self.helper('METHOD')} else {general})", origin)

    def compare(self, node: ast.Compare, origin: ast.AST, inline: bool) -> str:
        if len(node.ops) != 1:
            raise _Unsupported("a chained comparison")
        ctx = self.ctx
        sub = self.inline if inline else (lambda n: self.hold(self.expr(n, origin), origin))
        left, right = sub(node.left), sub(node.comparators[0])
        op = node.ops[0]
        if isinstance(op, (ast.In, ast.NotIn)):
            text = f"{self.helper('contains')}({ctx}, {right}, {left})"
            return f"(not {text})" if isinstance(op, ast.NotIn) else text
        fn = _COMPARE[type(op)]
        return f"{self.helper('cmp')}({ctx}, {self.helper('op_' + fn.__name__)}, {left}, {right})"

    # -- expressions inside short-circuits: one helper call per operation, no temporaries ----
    def inline(self, node: ast.expr) -> str:
        ctx = self.ctx
        if isinstance(node, ast.Constant):
            return repr(node.value)
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.BinOp):
            if type(node.op) not in _ARITH:
                raise _Unsupported(f"the operator {type(node.op).__name__}")
            op = self.helper("op_" + _ARITH[type(node.op)][1].__name__)
            return f"{self.helper('bin')}({ctx}, {op}, {self.inline(node.left)}, " \
                   f"{self.inline(node.right)})"
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                return f"(not {self.inline(node.operand)})"
            if type(node.op) not in _UNARY:
                raise _Unsupported(f"the operator {type(node.op).__name__}")
            op = self.helper("op_" + _UNARY[type(node.op)][1].__name__)
            return f"{self.helper('un')}({ctx}, {op}, {self.inline(node.operand)})"
        if isinstance(node, ast.BoolOp):
            word = " and " if isinstance(node.op, ast.And) else " or "
            return "(" + word.join(self.inline(v) for v in node.values) + ")"
        if isinstance(node, ast.IfExp):
            return f"({self.inline(node.body)} if {self.inline(node.test)} else " \
                   f"{self.inline(node.orelse)})"
        if isinstance(node, ast.Compare):
            return self.compare(node, node, inline=True)
        if isinstance(node, ast.Call):
            if any(isinstance(a, ast.Starred) for a in node.args) or \
                    any(k.arg is None for k in node.keywords):
                raise _Unsupported("*args or **kwargs inside and/or/if-else")
            args = [self.inline(a) for a in node.args] + \
                [f"{k.arg}={self.inline(k.value)}" for k in node.keywords]
            return f"{self.helper('call')}({ctx}, {self.inline(node.func)}" \
                   f"{''.join(', ' + a for a in args)})"
        if isinstance(node, ast.Subscript):
            if isinstance(node.slice, ast.Slice) or (
                    isinstance(node.slice, ast.Tuple)
                    and any(isinstance(e, ast.Slice) for e in node.slice.elts)):
                raise _Unsupported("a slice inside and/or/if-else")
            return f"{self.helper('sub')}({ctx}, {self.inline(node.value)}, " \
                   f"{self.inline(node.slice)})"
        if isinstance(node, ast.Attribute):
            return f"{self.helper('attr')}({ctx}, {self.inline(node.value)}, {node.attr!r})"
        if isinstance(node, (ast.Tuple, ast.List)):
            items = [self.inline(e) for e in self._plain_elts(node)]
            if isinstance(node, ast.Tuple):
                return "(" + "".join(i + ", " for i in items) + ")"
            return "[" + ", ".join(items) + "]"
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise _Unsupported("a **mapping in a dict display")
            return "{" + ", ".join(f"{self.inline(k)}: {self.inline(v)}"  # type: ignore[arg-type]
                                   for k, v in zip(node.keys, node.values)) + "}"
        raise _Unsupported(_EXPRESSIONS.get(type(node), f"an expression {type(node).__name__}")
                           + " inside and/or/if-else")

    # -- arithmetic regions --------------------------------------------------------------------
    def region(self, node: ast.expr, origin: ast.AST, inplace: bool = False) -> str:
        """One arithmetic expression: its value, and one tape entry with the partial
        derivatives in its leaves, when they are numbers; else each operation through the
        context (``_regions.region``).  ``inplace``: the root is an augmented assignment's
        operator."""
        return region(self, node, origin, _ARITH, _UNARY, inplace)
