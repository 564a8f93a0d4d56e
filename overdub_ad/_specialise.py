"""Reverse mode on scalar code without a dispatch per operator: functions specialised for it.

Under :class:`ReverseContext` every operator of a function is a call into the context, which
records one tape entry per operation.  On a loop of float arithmetic (an ODE integrator, the
Rosenbrock sum) those calls cost some forty times the arithmetic itself.  This module compiles
its own version of a user function, from its source, in which

- each arithmetic expression (``+ - * / **``, unary ``-``/``+``) is one region: its leaves
  (names, constants, calls, subscripts...) are evaluated in Python's order; if all of them are
  plain numbers or this context's differentiated floats, the value is computed natively, with
  the local partial derivative of the value in each leaf (source-to-source differentiation of
  the expression), and the tape gets one entry for the whole expression;
- everything else -- and an expression whose leaves are arrays, other contexts' values, objects
  with operator methods, or hit a point the partials do not cover (``0 ** 0.5``) -- goes through
  the context as the core would send it (``overdub(ctx, operator.mul, a, b)``...): tagging,
  dispatch and the rule tables stay the general path;
- calls of other specialisable Python functions call their specialised versions directly.

The context uses a specialised version only when nothing encloses it (an enclosing context
must see the arithmetic) and outside the second-order tapes of :mod:`._hvp` (which need each
operation's function).  Functions using constructs this compiler does not handle (nested
functions, comprehensions, ``try``, ``with``, generators, ``global``...) are run by the core as
before.  The fused entries differentiate the same expressions; products of partial derivatives
are associated per expression rather than per operation, so gradients agree with the
operation-by-operation tape to rounding.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import math
import operator
import sys
import threading
import types
import weakref
from typing import Any

import numpy as np

from overdub import Tagged, carries_tags, is_opaque, overdub

from . import _rules

_PACKAGES = frozenset(("overdub", "overdub_ad", "overdub_gpu"))
# values an arithmetic region computes with natively: a differentiated float's value, or a
# plain number
_FLOATS = frozenset({float, np.float64})
_PLAIN = frozenset({float, int, bool, np.float64})
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
_PREFIX = "__odr_"  # names of the generated code (rejected in user code)
# calls that look at their caller's frame: a function making one is left to the core
_FRAME_SENSITIVE = {"locals", "vars", "dir", "globals", "eval", "exec", "breakpoint", "super"}


class _Unsupported(Exception):
    """The function uses something this compiler does not translate: the core runs it."""


# -- helpers the generated code calls -------------------------------------------------------------

def _through(ctx: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` as the context runs it from rewritten code: its own definition
    for what it takes as a primitive (the common case, without re-entering ``overdub``), else
    through the core (a Python function or operator method is recursed into)."""
    if ctx.is_primitive(fn, *args, **kwargs):
        return ctx.execute(fn, *args, **kwargs)
    return overdub(ctx, fn, *args, **kwargs)


def _bin(ctx: Any, op: Any, a: Any, b: Any) -> Any:
    if type(a) in _PLAIN and type(b) in _PLAIN:
        return op(a, b)
    if ctx.is_primitive(op, a, b):  # _through, inlined: arrays pass here every operation
        return ctx.execute(op, a, b)
    return overdub(ctx, op, a, b)


def _un(ctx: Any, op: Any, a: Any) -> Any:
    if type(a) in _PLAIN:
        return op(a)
    if ctx.is_primitive(op, a):
        return ctx.execute(op, a)
    return overdub(ctx, op, a)


def _compare(ctx: Any, op: Any, a: Any, b: Any) -> Any:
    if type(a) is not Tagged and type(b) is not Tagged and \
            (op is operator.is_ or op is operator.is_not or
             (type(a) in _PLAIN and type(b) in _PLAIN)):
        return op(a, b)
    return _through(ctx, op, a, b)


def _contains(ctx: Any, container: Any, item: Any) -> Any:
    return _through(ctx, operator.contains, container, item)


def _sub(ctx: Any, obj: Any, index: Any) -> Any:
    kind = type(obj)
    if kind is tuple or kind is list:
        return obj[index]  # what the context does for a native container
    if kind is Tagged and type(index) is int:
        return ctx._read(obj, index)
    return _through(ctx, operator.getitem, obj, index)


def _attr(ctx: Any, obj: Any, name: str) -> Any:
    if type(obj) is types.ModuleType:
        value = getattr(obj, name)
        if callable(value):  # np.sin: nothing to look for (as ReverseContext.execute)
            return value
    return _through(ctx, getattr, obj, name)


def _setitem(ctx: Any, obj: Any, index: Any, value: Any) -> None:
    _through(ctx, operator.setitem, obj, index, value)


def _setattr(ctx: Any, obj: Any, name: str, value: Any) -> None:
    _through(ctx, setattr, obj, name, value)


def _iter(ctx: Any, value: Any) -> Any:
    kind = type(value)
    if kind is range or kind is tuple or kind is list or kind is str or kind is dict:
        return iter(value)
    return _through(ctx, iter, value)


def _unpack(ctx: Any, value: Any) -> Any:
    kind = type(value)
    if kind is tuple or kind is list:
        return value
    return _through(ctx, iter, value)


def _call(ctx: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
    if type(fn) is types.FunctionType:
        found = ctx._specs.get(id(fn))  # this run's (a function called again and again)
        if found is not None and found[0] is fn:
            return found[1](ctx, *args, **kwargs)
        spec = specialised(fn)
        if spec is not None:
            ctx._specs[id(fn)] = (fn, spec)
            return spec(ctx, *args, **kwargs)
    elif fn is range and not kwargs and all(type(a) is int for a in args):
        return range(*args)
    elif fn is len and not kwargs and len(args) == 1 and type(args[0]) is not Tagged:
        return len(args[0])
    return _through(ctx, fn, *args, **kwargs)


# what the generated code refers to, as __odr_<name> (closure cells, not globals: the user's
# module is left alone)
_HELPERS: dict[str, Any] = {
    "T": Tagged, "bin": _bin, "un": _un, "cmp": _compare, "contains": _contains, "sub": _sub,
    "attr": _attr, "setitem": _setitem, "setattr": _setattr, "iter": _iter, "unpack": _unpack,
    "call": _call, "F": _FLOATS, "P": _PLAIN, "R": _RESULTS, "log": math.log, "slice": slice,
    "len": len}
for _node, (_sym, _op, _iop) in _ARITH.items():
    _HELPERS["op_" + _op.__name__] = _op
    _HELPERS["op_" + _iop.__name__] = _iop
for _sym, _op in _UNARY.values():
    _HELPERS["op_" + _op.__name__] = _op
for _op in _COMPARE.values():
    _HELPERS["op_" + _op.__name__] = _op


# -- which functions, and their specialised versions -----------------------------------------

# fn -> (its code, defaults, keyword defaults, the specialised function or None)
_SPECS: weakref.WeakKeyDictionary[Any, tuple[Any, ...]] = weakref.WeakKeyDictionary()
# the operators whose shipped partials the specialised code writes out: while the user has
# registered a rule of their own for one of them, the context records operation by operation
_WRITTEN_OUT = frozenset(id(f) for entry in (*_ARITH.values(), *_UNARY.values())
                         for f in entry[1:])
# code object -> (the specialised code, names of its free variables) or None (unsupported)
_COMPILED: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def specialised(fn: types.FunctionType) -> Any:
    """``fn``'s specialised version ``spec(ctx, *args, **kwargs)``, or None when the context
    must not (a rule, an opaque function, overdub's own code) or cannot use one."""
    found = _SPECS.get(fn)
    code = fn.__code__
    if found is not None and found[0] is code and found[1] is fn.__defaults__ and \
            found[2] is fn.__kwdefaults__:
        spec = found[3]
    else:
        spec = _build(fn)
        _SPECS[fn] = (code, fn.__defaults__, fn.__kwdefaults__, spec)
    if spec is None or _rules.vjp_rules(fn) is not None or _rules.is_nondifferentiable(fn) \
            or _rules.any_overridden(_WRITTEN_OUT):
        return None
    return spec


def _build(fn: types.FunctionType) -> Any:
    if is_opaque(fn) or carries_tags(fn) or \
            (getattr(fn, "__module__", None) or "").partition(".")[0] in _PACKAGES:
        return None
    code = fn.__code__
    compiled = _COMPILED.get(code, False)
    if compiled is False:
        with _lock:  # one compilation at a time (CPython 3.11's AST conversions share state)
            try:
                compiled = _compile(fn)
            except (_Unsupported, RecursionError, SystemError):
                compiled = None  # deeply nested code, or a conversion that went wrong: the core
            _COMPILED[code] = compiled
    if compiled is None:
        return None
    factory_code, free = compiled
    cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
    closure = tuple([cells[name] if name in cells else types.CellType(_HELPERS[name[len(_PREFIX):]])
                     for name in free])
    spec = types.FunctionType(factory_code, fn.__globals__, fn.__name__, fn.__defaults__,
                              closure)
    spec.__kwdefaults__ = fn.__kwdefaults__
    spec.__qualname__ = fn.__qualname__
    return spec


# -- finding the source ------------------------------------------------------------------------

_FILES: dict[str, tuple[list[str], ast.Module]] = {}


def _locate(fn: types.FunctionType) -> ast.FunctionDef:
    code = fn.__code__
    lines = linecache.getlines(code.co_filename, fn.__globals__)
    if not lines:
        raise _Unsupported
    cached = _FILES.get(code.co_filename)
    if cached is None or cached[0] is not lines:
        try:
            tree = ast.parse("".join(lines), code.co_filename)
        except (SyntaxError, ValueError):
            raise _Unsupported from None
        cached = _FILES[code.co_filename] = (lines, tree)
    found = [node for node in ast.walk(cached[1]) if isinstance(node, ast.FunctionDef)
             and node.name == code.co_name
             and (node.decorator_list[0].lineno if node.decorator_list else node.lineno)
             == code.co_firstlineno]
    if len(found) != 1:
        raise _Unsupported
    return found[0]


def _check_matches(node: ast.FunctionDef, code: types.CodeType) -> None:
    """The source found is the function's (not a file edited since it was imported)."""
    body: list[ast.stmt] = [node]
    if code.co_freevars:  # a closure: its free variables bound by an enclosing function
        outer = ast.parse(f"def {_PREFIX}outer():\n" + "".join(
            f"    {name} = None\n" for name in code.co_freevars)).body[0]
        outer.body.append(node)  # type: ignore[attr-defined]
        body = [outer]
    module = ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))
    try:
        compiled = compile(module, code.co_filename, "exec")
    except (SyntaxError, ValueError, TypeError):
        raise _Unsupported from None
    inner = next((c for c in compiled.co_consts if isinstance(c, types.CodeType)), None)
    if inner is not None and code.co_freevars:
        inner = next((c for c in inner.co_consts if isinstance(c, types.CodeType)), None)
    if inner is None or (inner.co_varnames, inner.co_argcount, inner.co_kwonlyargcount,
                         inner.co_posonlyargcount, inner.co_freevars, inner.co_names) != \
            (code.co_varnames, code.co_argcount, code.co_kwonlyargcount,
             code.co_posonlyargcount, code.co_freevars, code.co_names):
        raise _Unsupported


# -- the compiler ----------------------------------------------------------------------------

_SIMPLE_STATEMENTS = (ast.Pass, ast.Break, ast.Continue)


def _compile(fn: types.FunctionType) -> tuple[types.CodeType, tuple[str, ...]]:
    code = fn.__code__
    if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE |
                        inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE):
        raise _Unsupported
    if code.co_cellvars:  # variables of nested functions
        raise _Unsupported
    node = _locate(fn)
    _check_matches(node, code)
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and (child.id.startswith(_PREFIX) or (
                child.id.startswith("__") and not child.id.endswith("__"))):
            raise _Unsupported  # our names, or private names mangled by a class
        if isinstance(child, ast.Attribute) and child.attr.startswith("__") and \
                not child.attr.endswith("__"):
            raise _Unsupported
        if isinstance(child, ast.Call) and (
                (isinstance(child.func, ast.Name) and child.func.id in _FRAME_SENSITIVE)
                or (isinstance(child.func, ast.Attribute)
                    and child.func.attr in ("_getframe", "currentframe"))):
            raise _Unsupported  # they would see the generated frame's variables
    compiler = _Compiler(set(code.co_varnames), code.co_filename)
    compiler.function(node)
    return compiler.finish(node, code)


class _Compiler:
    """Generated source, line by line, each line remembering the user node it comes from."""

    def __init__(self, local_names: set[str], filename: str) -> None:
        self.locals = local_names
        self.filename = filename
        self.lines: list[str] = []
        self.origins: list[ast.AST] = []
        self.indent = 1
        self.count = 0
        self.used: set[str] = set()
        # locals unwrapped in the current straight-line code: name -> (value, node, ok)
        self.known: dict[str, tuple[str, str, str]] = {}

    # -- emitting --------------------------------------------------------------------------
    def emit(self, text: str, origin: ast.AST) -> None:
        self.lines.append("    " * self.indent + text)
        self.origins.append(origin)

    def fresh(self, kind: str = "t") -> str:
        self.count += 1
        return f"{_PREFIX}{kind}{self.count}"

    def helper(self, name: str) -> str:
        self.used.add(name)
        return _PREFIX + name

    def finish(self, node: ast.FunctionDef, code: types.CodeType
               ) -> tuple[types.CodeType, tuple[str, ...]]:
        args = ast.unparse(node.args)
        ctx = _PREFIX + "ctx"
        signature = f"{ctx}, /, {args}" if args else f"{ctx}, /"
        # positional-only parameters of the user's signature follow ours
        if node.args.posonlyargs:
            signature = f"{ctx}, " + args
        # named so that the def binds nothing the body could see (a recursive function's own
        # name stays a global lookup)
        head = [f"def {_PREFIX}target({signature}):",
                f"    {_PREFIX}ref = {ctx}._ref",
                f"    {_PREFIX}lbl = {ctx}._label",
                f"    {_PREFIX}tape = {ctx}.tape",
                f"    {_PREFIX}app = {_PREFIX}tape.append"]
        params = ", ".join([_PREFIX + name for name in sorted(self.used)] +
                           list(code.co_freevars))
        source = "\n".join([f"def {_PREFIX}factory({params}):"] +
                           ["    " + line for line in head] +
                           ["    " + line for line in self.lines] +
                           [f"    return {_PREFIX}target"])
        try:
            tree = ast.parse(source, self.filename)
        except SyntaxError:  # pragma: no cover - a bug of ours: let the core run it
            raise _Unsupported from None
        self._locate_lines(tree, node, len(head) + 1)
        inner = _inner_code(tree, self.filename, code)
        return inner, inner.co_freevars

    def _locate_lines(self, tree: ast.Module, node: ast.FunctionDef, first: int) -> None:
        _place(tree, self.origins, first, node)

    # -- statements ------------------------------------------------------------------------
    def function(self, node: ast.FunctionDef) -> None:
        """The body (defaults and annotations stay the function object's)."""
        self.block(node.body)

    def block(self, body: list[ast.stmt]) -> None:
        if not body:
            raise _Unsupported
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
        elif isinstance(stmt, ast.If):
            test = self.expr(stmt.test, stmt)
            self.emit(f"if {test}:", stmt)
            self.indented(stmt.body)
            if stmt.orelse:
                self.emit("else:", stmt)
                self.indented(stmt.orelse)
        elif isinstance(stmt, ast.While):
            if stmt.orelse:
                raise _Unsupported
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
            raise _Unsupported

    def indented(self, body: list[ast.stmt]) -> None:
        """A nested block: what was unwrapped before it may be rebound in it, or not run."""
        self.known = {}
        self.indent += 1
        self.block(body)
        self.indent -= 1
        self.known = {}

    def for_loop(self, stmt: ast.For) -> None:
        target = self.target_names(stmt.target)
        source = stmt.iter
        value = self.expr(source, stmt)
        if not (isinstance(source, ast.Call) and isinstance(source.func, ast.Name)
                and source.func.id in _NO_WRAP):
            value = f"{self.helper('iter')}({_PREFIX}ctx, {value})"
        self.emit(f"for {target} in {value}:", stmt)
        self.indented(stmt.body)
        if stmt.orelse:
            self.emit("else:", stmt)
            self.indented(stmt.orelse)

    def target_names(self, target: ast.expr) -> str:
        """A loop target: names, or tuples of them (unpacked natively, as the core does)."""
        if isinstance(target, ast.Name):
            return target.id
        if isinstance(target, (ast.Tuple, ast.List)) and target.elts:
            return "(" + ", ".join(self.target_names(e) for e in target.elts) + ",)"
        raise _Unsupported

    def assign(self, stmt: ast.Assign) -> None:
        value = self.expr(stmt.value, stmt)
        if len(stmt.targets) > 1 and not _is_name(value):
            temp = self.fresh()
            self.emit(f"{temp} = {value}", stmt)
            value = temp
        for target in stmt.targets:
            self.store(target, value, stmt.value, stmt)

    def store(self, target: ast.expr, value: str, source: ast.expr, stmt: ast.stmt) -> None:
        ctx = _PREFIX + "ctx"
        if isinstance(target, ast.Name):
            self.emit(f"{target.id} = {value}", stmt)
            self.known.pop(target.id, None)
        elif isinstance(target, (ast.Tuple, ast.List)):
            names = self.target_names(target)
            self.known = {}
            if not isinstance(source, (ast.Tuple, ast.List)):
                value = f"{self.helper('unpack')}({ctx}, {value})"
            self.emit(f"{names} = {value}", stmt)
        elif isinstance(target, ast.Subscript):
            obj = self.hold(self.expr(target.value, stmt), stmt)
            index = self.hold(self.index(target.slice, stmt), stmt)
            self.emit(f"{self.helper('setitem')}({ctx}, {obj}, {index}, {value})", stmt)
        elif isinstance(target, ast.Attribute):
            obj = self.hold(self.expr(target.value, stmt), stmt)
            self.emit(f"{self.helper('setattr')}({ctx}, {obj}, {target.attr!r}, {value})", stmt)
        else:
            raise _Unsupported

    def hold(self, text: str, origin: ast.AST) -> str:
        """``text`` evaluated now, into a temporary (unless it is a name or a constant)."""
        if _is_name(text):
            return text
        temp = self.fresh()
        self.emit(f"{temp} = {text}", origin)
        return temp

    def augassign(self, stmt: ast.AugAssign) -> None:
        if type(stmt.op) not in _ARITH:
            raise _Unsupported
        target = stmt.target
        if isinstance(target, (ast.Subscript, ast.Attribute)):
            # x[i] += v: x and i once, the item read, combined in place, stored (Python's order)
            ctx = _PREFIX + "ctx"
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
        if not isinstance(target, ast.Name):
            raise _Unsupported
        name = target.id
        combined = ast.BinOp(left=ast.Name(id=name, ctx=ast.Load()), op=stmt.op,
                             right=stmt.value)
        ast.copy_location(combined, stmt)
        result = self.region(combined, stmt, inplace=True)
        self.emit(f"{name} = {result}", stmt)
        self.known.pop(name, None)

    # -- expressions, in Python's order of evaluation, into temporaries -----------------------
    def expr(self, node: ast.expr, origin: ast.AST) -> str:
        ctx = _PREFIX + "ctx"
        if isinstance(node, ast.Constant):
            return repr(node.value)
        if isinstance(node, ast.Name):
            if node.id in self.locals:
                return node.id
            return self.hold(node.id, origin)  # a global read now, in Python's order
        if isinstance(node, (ast.BinOp, ast.UnaryOp)):
            if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                return self.hold(f"(not {self.expr(node.operand, origin)})", origin)
            return self.region(node, origin)
        if isinstance(node, ast.Call):
            return self.call(node, origin)
        if isinstance(node, ast.Subscript):
            obj = self.hold(self.expr(node.value, origin), origin)
            index = self.hold(self.index(node.slice, origin), origin)
            # a tuple's item natively (what the context does), anything else through _sub
            return self.hold(f"({obj}[{index}] if type({obj}) is tuple else "
                             f"{self.helper('sub')}({ctx}, {obj}, {index}))", origin)
        if isinstance(node, ast.Attribute):
            obj = self.hold(self.expr(node.value, origin), origin)
            return self.hold(f"{self.helper('attr')}({ctx}, {obj}, {node.attr!r})", origin)
        if isinstance(node, (ast.Tuple, ast.List)):
            items = [self.hold(self.expr(e, origin), origin) for e in self._plain_elts(node)]
            if isinstance(node, ast.Tuple):
                return "(" + "".join(i + ", " for i in items) + ")"
            return "[" + ", ".join(items) + "]"
        if isinstance(node, ast.Compare):
            return self.hold(self.compare(node, origin, inline=False), origin)
        if isinstance(node, (ast.BoolOp, ast.IfExp, ast.Dict)):
            return self.hold(self.inline(node), origin)
        raise _Unsupported

    def _plain_elts(self, node: ast.Tuple | ast.List) -> list[ast.expr]:
        if any(isinstance(e, ast.Starred) for e in node.elts):
            raise _Unsupported
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
        ctx = _PREFIX + "ctx"
        fn = self.hold(self.expr(node.func, origin), origin)
        args = []
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                raise _Unsupported
            args.append(self.hold(self.expr(arg, origin), origin))
        for keyword in node.keywords:
            if keyword.arg is None:
                raise _Unsupported
            args.append(f"{keyword.arg}={self.hold(self.expr(keyword.value, origin), origin)}")
        return self.hold(f"{self.helper('call')}({ctx}, {fn}{''.join(', ' + a for a in args)})",
                         origin)

    def compare(self, node: ast.Compare, origin: ast.AST, inline: bool) -> str:
        if len(node.ops) != 1:
            raise _Unsupported
        ctx = _PREFIX + "ctx"
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
        ctx = _PREFIX + "ctx"
        if isinstance(node, ast.Constant):
            return repr(node.value)
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.BinOp):
            if type(node.op) not in _ARITH:
                raise _Unsupported
            op = self.helper("op_" + _ARITH[type(node.op)][1].__name__)
            return f"{self.helper('bin')}({ctx}, {op}, {self.inline(node.left)}, " \
                   f"{self.inline(node.right)})"
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                return f"(not {self.inline(node.operand)})"
            if type(node.op) not in _UNARY:
                raise _Unsupported
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
                raise _Unsupported
            args = [self.inline(a) for a in node.args] + \
                [f"{k.arg}={self.inline(k.value)}" for k in node.keywords]
            return f"{self.helper('call')}({ctx}, {self.inline(node.func)}" \
                   f"{''.join(', ' + a for a in args)})"
        if isinstance(node, ast.Subscript):
            if isinstance(node.slice, ast.Slice) or (
                    isinstance(node.slice, ast.Tuple)
                    and any(isinstance(e, ast.Slice) for e in node.slice.elts)):
                raise _Unsupported
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
                raise _Unsupported
            return "{" + ", ".join(f"{self.inline(k)}: {self.inline(v)}"  # type: ignore[arg-type]
                                   for k, v in zip(node.keys, node.values)) + "}"
        raise _Unsupported

    # -- arithmetic regions --------------------------------------------------------------------
    def region(self, node: ast.expr, origin: ast.AST, inplace: bool = False) -> str:
        """One arithmetic expression: its value, and one tape entry with the partial
        derivatives in its leaves, when they are numbers; else each operation through the
        context.  ``inplace``: the root is an augmented assignment's operator."""
        graph = _Graph(self, origin)
        root = graph.build(node)
        leaves = graph.leaves
        if not any(leaf.kind == "leaf" for leaf in leaves):
            # constants only: Python's own arithmetic, as the context runs it
            return self.hold(graph.generic(root, inplace), origin)
        result = self.fresh("r")
        ok = self.fresh("ok")
        T, F, P = self.helper("T"), self.helper("F"), self.helper("P")
        flags = []
        for leaf in leaves:
            if leaf.kind != "leaf":
                continue
            known = self.known.get(leaf.text)
            if known is not None:  # unwrapped already, and not rebound since
                leaf.value, leaf.node, flag = known
                flags.append(flag)
                continue
            v, n, raw, flag = leaf.value, leaf.node, leaf.text, self.fresh("ok")
            self.emit(f"if type({raw}) is {T}:", origin)
            self.emit(f"    {v} = {raw}.value", origin)
            self.emit(f"    {n} = {raw}.meta", origin)
            self.emit(f"    {flag} = {raw}.owner is {_PREFIX}ref and type({v}) in {F}", origin)
            self.emit(f"elif type({raw}) in {P}:", origin)
            self.emit(f"    {v} = {raw}", origin)
            self.emit(f"    {n} = None", origin)
            self.emit(f"    {flag} = True", origin)
            self.emit("else:", origin)
            self.emit(f"    {flag} = False", origin)
            if leaf.text in self.locals:
                self.known[leaf.text] = (v, n, flag)
            flags.append(flag)
        self.emit(f"{ok} = {' and '.join(flags)}", origin)
        self.emit(f"if {ok}:", origin)
        self.indent += 1
        graph.values()
        nodes = [leaf.node for leaf in leaves if leaf.kind == "leaf"]
        self.emit("if " + " and ".join(f"{n} is None" for n in nodes) + ":", origin)
        self.emit(f"    {result} = {root.value}", origin)
        self.emit("else:", origin)
        self.indent += 1
        partials = graph.partials(root, ok)
        self.emit(f"if {ok} and type({root.value}) in {self.helper('R')}:", origin)
        entry = self.fresh("n")
        self.emit(f"    {entry} = {self.helper('len')}({_PREFIX}tape)  # the entry's position",
                  origin)
        pairs = "".join(f", {n}, {p}" for n, p in zip(nodes, partials))
        self.emit(f"    {_PREFIX}app(({entry}{pairs}))", origin)
        self.emit(f"    {result} = {T}({root.value}, {entry}, {_PREFIX}ref, {_PREFIX}lbl)",
                  origin)
        self.emit("else:", origin)
        self.emit(f"    {ok} = False", origin)
        self.indent -= 2
        self.emit(f"if not {ok}:", origin)
        self.emit(f"    {result} = {graph.generic(root, inplace)}", origin)
        return result


class _Vertex:
    """A node of an arithmetic expression: an operation, a leaf, or a constant."""

    __slots__ = ("kind", "op", "args", "value", "node", "text", "adjoint")

    def __init__(self, kind: str, op: Any = None, args: tuple[Any, ...] = ()) -> None:
        self.kind, self.op, self.args = kind, op, args
        self.value = ""   # the text of its value in the fast block
        self.node = ""    # a leaf's tape node variable
        self.text = ""    # a leaf's raw value (what the general path computes with)
        self.adjoint: list[str] = []


class _Graph:
    """An arithmetic expression as vertices: its leaves evaluated into variables as they are
    built (Python's order), then code for the values, the partials, or the general path."""

    def __init__(self, compiler: _Compiler, origin: ast.AST) -> None:
        self.c = compiler
        self.origin = origin
        self.leaves: list[_Vertex] = []
        self.by_name: dict[str, _Vertex] = {}
        self.ops: list[_Vertex] = []

    def build(self, node: ast.expr) -> _Vertex:
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
            left = self.build(node.left)
            right = self.build(node.right)
            vertex = _Vertex("op", type(node.op), (left, right))
            self.ops.append(vertex)
            return vertex
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            operand = self.build(node.operand)
            vertex = _Vertex("op", type(node.op), (operand,))
            self.ops.append(vertex)
            return vertex
        if isinstance(node, ast.Constant) and type(node.value) in (int, float) and \
                not isinstance(node.value, bool):
            vertex = _Vertex("const")
            vertex.value = vertex.text = repr(node.value)
            self.leaves.append(vertex)
            return vertex
        if isinstance(node, (ast.BinOp, ast.UnaryOp)):
            raise _Unsupported  # //, %, @, bit operations, not: left to the core
        text = self.c.expr(node, self.origin)
        if isinstance(node, ast.Name) and text in self.by_name:
            return self.by_name[text]  # a local read twice is one leaf
        if not _is_name(text):  # a constant of another type (a string, None...)
            text = self.c.hold(text, self.origin)
        vertex = _Vertex("leaf")
        vertex.text = text
        vertex.value = self.c.fresh("v")
        vertex.node = self.c.fresh("n")
        if isinstance(node, ast.Name):
            self.by_name[text] = vertex
        self.leaves.append(vertex)
        return vertex

    def generic(self, vertex: _Vertex, inplace: bool = False) -> str:
        """The expression with each operation through the context, on the raw leaves."""
        c = self.c
        ctx = _PREFIX + "ctx"
        if vertex.kind != "op":
            return vertex.text
        if vertex.op in _UNARY:
            op = c.helper("op_" + _UNARY[vertex.op][1].__name__)
            return f"{c.helper('un')}({ctx}, {op}, {self.generic(vertex.args[0])})"
        fn: Any = _ARITH[vertex.op][2 if inplace else 1]
        return f"{c.helper('bin')}({ctx}, {c.helper('op_' + fn.__name__)}, " \
               f"{self.generic(vertex.args[0])}, {self.generic(vertex.args[1])})"

    def values(self) -> None:
        """Each operation's value, natively (the leaves are numbers here)."""
        for vertex in self.ops:
            vertex.value = self.c.fresh("s")
            if vertex.op in _UNARY:
                text = f"{_UNARY[vertex.op][0]}{vertex.args[0].value}"
            else:
                a, b = vertex.args
                text = f"{a.value} {_ARITH[vertex.op][0]} {b.value}"
            self.c.emit(f"{vertex.value} = {text}", self.origin)

    def partials(self, root: _Vertex, ok: str) -> list[str]:
        """The partial derivative of the root in each leaf, by reverse accumulation over the
        expression (adjoints as text; ``1`` left out of products); on a point the local
        partials do not cover, ``ok`` becomes False."""
        emit, origin = self.c.emit, self.origin
        root.adjoint = ["1"]
        for vertex in reversed(self.ops):
            adjoint = self._total(vertex)
            if adjoint is None:
                continue
            if vertex.op in _UNARY:
                arg = vertex.args[0]
                arg.adjoint.append(adjoint if vertex.op is ast.UAdd else _neg(adjoint))
                continue
            a, b = vertex.args
            if vertex.op is ast.Add:
                a.adjoint.append(adjoint)
                b.adjoint.append(adjoint)
            elif vertex.op is ast.Sub:
                a.adjoint.append(adjoint)
                b.adjoint.append(_neg(adjoint))
            elif vertex.op is ast.Mult:
                a.adjoint.append(_times(adjoint, b.value))
                b.adjoint.append(_times(adjoint, a.value))
            elif vertex.op is ast.Div:
                if b.kind != "const" or float(b.value) == 0:
                    emit(f"if {b.value} == 0:", origin)
                    emit(f"    {ok} = False", origin)
                a.adjoint.append(f"{adjoint} / {b.value}" if adjoint != "1"
                                 else f"1.0 / {b.value}")
                b.adjoint.append(_times(_neg(adjoint), f"({vertex.value} / {b.value})"))
            else:  # a ** b
                self._power(vertex, adjoint, ok)
        partials = []
        for leaf in self.leaves:
            if leaf.kind != "leaf":
                continue
            total = self._total(leaf)
            partials.append("0.0" if total is None else total)
        return partials

    def _total(self, vertex: _Vertex) -> str | None:
        """The adjoint of ``vertex``, summed over its uses, into a variable."""
        parts = vertex.adjoint
        if not parts:
            return None
        text = " + ".join(parts) if len(parts) > 1 else parts[0]
        if text == "1" or _is_name(text):
            return text
        name = self.c.fresh("a")
        self.c.emit(f"{name} = {text}", self.origin)
        return name

    def _power(self, vertex: _Vertex, adjoint: str, ok: str) -> None:
        """The local partials of ``a ** b`` (as ReverseContext's scalar partials: 0 in a for
        b == 0, none at a == 0 for b < 1; in b ``out * log(a)``, 0 at a == 0, none below)."""
        emit, origin, c = self.c.emit, self.origin, self.c
        a, b = vertex.args
        pa = c.fresh("p")
        if b.kind == "const":
            exponent = float(b.value)
            if exponent == 0:
                emit(f"{pa} = 0.0", origin)
            elif exponent < 1:  # no finite partial at 0 (and 0 ** negative raises)
                emit(f"if {a.value} == 0:", origin)
                emit(f"    {ok} = False", origin)
                emit(f"    {pa} = 0.0", origin)
                emit("else:", origin)
                emit(f"    {pa} = {b.value} * {a.value} ** ({b.value} - 1)", origin)
            else:
                emit(f"{pa} = {b.value} * {a.value} ** ({b.value} - 1)", origin)
            a.adjoint.append(_times(adjoint, pa))
            return
        emit(f"if {b.value} == 0:", origin)
        emit(f"    {pa} = 0.0", origin)
        emit(f"elif {a.value} == 0 and {b.value} < 1:", origin)
        emit(f"    {ok} = False", origin)
        emit(f"    {pa} = 0.0", origin)
        emit("else:", origin)
        emit(f"    {pa} = {b.value} * {a.value} ** ({b.value} - 1)", origin)
        a.adjoint.append(_times(adjoint, pa))
        pb = c.fresh("p")
        depends = [leaf.node for leaf in self._leaves_under(b)]
        emit(f"{pb} = 0.0", origin)
        if depends:
            emit("if " + " or ".join(f"{n} is not None" for n in depends) + ":", origin)
            emit(f"    if {a.value} > 0:", origin)
            emit(f"        {pb} = {vertex.value} * {c.helper('log')}({a.value})", origin)
            emit(f"    elif {a.value} < 0:", origin)
            emit(f"        {ok} = False", origin)
        b.adjoint.append(_times(adjoint, pb))

    def _leaves_under(self, vertex: _Vertex) -> list[_Vertex]:
        if vertex.kind == "leaf":
            return [vertex]
        if vertex.kind == "const":
            return []
        found: list[_Vertex] = []
        for arg in vertex.args:
            for leaf in self._leaves_under(arg):
                if leaf not in found:
                    found.append(leaf)
        return found


def _inner_code(tree: ast.Module, filename: str, code: types.CodeType) -> types.CodeType:
    """The function defined inside the factory that ``tree`` defines, compiled against the
    user's file and named as the user's function ``code`` (tracebacks show its name)."""
    compiled = compile(tree, filename, "exec")
    factory = next(c for c in compiled.co_consts if isinstance(c, types.CodeType))
    inner = next(c for c in factory.co_consts if isinstance(c, types.CodeType))
    inner = inner.replace(co_name=code.co_name)
    if sys.version_info >= (3, 11):  # code objects have qualified names since 3.11
        inner = inner.replace(co_qualname=code.co_qualname)
    return inner


def _place(tree: ast.Module, origins: list[ast.AST], first: int, default: ast.AST) -> None:
    """Every generated node takes the position of the user node its line comes from
    (``origins[k]`` for generated line ``first + k``, from 0), so that tracebacks and warnings
    point at the user's code; the other lines (a header) take ``default``'s."""
    child: Any
    for child in ast.walk(tree):
        if "lineno" not in child._attributes or not hasattr(child, "lineno"):
            continue
        k = child.lineno - 1 - first
        origin: Any = origins[k] if 0 <= k < len(origins) else default
        child.lineno = origin.lineno
        child.end_lineno = origin.end_lineno
        child.col_offset = origin.col_offset
        child.end_col_offset = origin.end_col_offset


def _is_name(text: str) -> bool:
    return text.isidentifier() or _is_number(text)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _neg(text: str) -> str:
    if text == "1":
        return "-1.0"
    return f"-{text}" if _is_name(text) else f"-({text})"


def _times(adjoint: str, factor: str) -> str:
    if adjoint == "1":
        return factor
    return f"{adjoint} * {factor}"
