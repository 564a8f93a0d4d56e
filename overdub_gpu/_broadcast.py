"""Broadcast a scalar Python kernel over whole arrays: branches become ``where`` selections.

``broadcast(ctx, kernel, *arrays)`` runs ``kernel`` once, with whole arrays for its scalar
arguments, inside a sibling of ``ctx`` that carries the :class:`BranchesToWhere` pass.  The pass
rewrites what Python would decide per element (``if``/``elif``/``else``, early ``return``,
``x if c else y``, ``and``/``or``/``not``, chained comparisons) into code that computes every
branch for every element and selects with ``where``, so the kernel is a handful of array
operations instead of a Python loop.  The HM-LSTM kernel of the Cassette talk, before and after
the pass (``@embed1:overdub_gpu._broadcast`` is this module, put there with
:func:`overdub.embed`; the names starting with ``@`` cannot be spelled in source, so they never
collide with yours)::

    def hmlstm(z, zb, c, f, i, g):           def hmlstm(z, zb, c, f, i, g):
        if z == 1:  # FLUSH                      @gpu_c1 = z == 1
            return sigm(i) * tanh(g)              @gpu_r2 = sigm(i) * tanh(g)
        elif zb == 0:  # COPY                     @gpu_c3 = zb == 0
            return c                              @gpu_r4 = c
        else:  # UPDATE                  ->       @gpu_r5 = sigm(f) * c + ...
            return sigm(f) * c + ...              return @embed1:...where(@gpu_c1, @gpu_r2,
                                                      @embed1:...where(@gpu_c3, @gpu_r4, @gpu_r5))

Each branch sees the variables as they were before the ``if`` (a branch's assignments go to
renamed copies) and the ones both branches assign are merged with ``where`` after it.  What
cannot be turned into selections keeps Python's own control flow with a run-time check that
its condition does not depend on the element: ``while`` loops, ``for`` loops (over ranges or
sequences that are not arrays), an ``if`` containing ``break``, ``continue``, ``raise``, a call
made for its side effect, or a ``return`` inside a loop.  If the check sees an array, the
kernel gets a :class:`VectorizeError` naming the construct and its line.  So does a call, inside
the kernel, of a C function overdub cannot see into that receives an array (register a
primitive for it), and a variable assigned on some paths only and used after them.  That last
check needs every leaf call intercepted (and so every operator), so it is made on a kernel's
first run per context class and namespace, and again when a later, unchecked run fails.

The helpers the pass calls (:func:`where`, :func:`truth`, :func:`logical_and`...) are plain
NumPy when called outside a context and primitives of :class:`ArrayBackendContext`, so the pass
on its own produces ordinary vectorised NumPy code, and inside the context it runs on ``xp``.
"""

from __future__ import annotations

import ast
import copy
import operator
import sys
import types
import weakref
from collections.abc import Iterator, Sequence
from typing import Any, Literal, TypeVar, cast

import numpy as np

from overdub import embed, is_opaque, opaque, overdub, recurse

from ._context import ArrayBackendContext, HostArrayError
from ._table import MissingCounterpartError

__all__ = ["broadcast", "BranchesToWhere", "VectorizeError"]

_MODULE = __name__


class VectorizeError(NotImplementedError):
    """A kernel construct that ``broadcast`` cannot turn into array operations."""


# -- run-time helpers (NumPy outside a context, primitives inside one) ---------------------

def _is_nd(x: Any) -> bool:
    return isinstance(x, np.ndarray)


@opaque
def where(condition: Any, x: Any, y: Any) -> Any:
    """``x`` where ``condition`` holds, else ``y``, elementwise (a Python bool picks one);
    item by item for tuples (a kernel returning several values)."""
    if isinstance(condition, (bool, np.bool_)):
        return x if condition else y
    if isinstance(x, tuple) and isinstance(y, tuple) and len(x) == len(y):
        return tuple(where(condition, a, b) for a, b in zip(x, y))
    return np.where(condition, x, y)


@opaque
def truth(x: Any) -> Any:
    """Python's truth test, elementwise: ``bool(x)`` for a scalar, ``x != 0`` for an array."""
    if _is_nd(x):
        return x if x.dtype == np.bool_ else x != 0
    return bool(x)


@opaque
def logical_and(x: Any, y: Any) -> Any:
    return x and y if isinstance(x, bool) and isinstance(y, bool) else np.logical_and(x, y)


@opaque
def logical_or(x: Any, y: Any) -> Any:
    return x or y if isinstance(x, bool) and isinstance(y, bool) else np.logical_or(x, y)


@opaque
def logical_not(x: Any) -> Any:
    return not x if isinstance(x, bool) else np.logical_not(x)


@opaque
def static(value: Any, construct: str) -> Any:
    """``value``, checked not to be an array: ``construct`` needs one decision for all elements."""
    if _is_nd(value) and value.ndim > 0:
        raise _element_dependent(construct)
    return value


@opaque
def static_iter(iterable: Any, construct: str) -> Any:
    if _is_nd(iterable):
        raise _element_dependent(construct)
    return iterable


@opaque
def assert_all(test: Any) -> bool:
    return bool(np.all(test)) if _is_nd(test) else bool(test)


@opaque
def partial_return(done: Any, value: Any, construct: str) -> Any:
    """The kernel's result when it returns on some paths only: an error unless all returned."""
    if isinstance(done, (bool, np.bool_)):
        return value if done else None
    if bool(np.all(done)):
        return value
    raise VectorizeError(f"cannot vectorise {construct}: some elements reach the end of the "
                         f"function without a return (they would be None)")


def _element_dependent(construct: str) -> VectorizeError:
    return VectorizeError(
        f"cannot vectorise {construct}: its decision depends on the element (it got an "
        f"array). broadcast turns if/elif/else, early returns and conditional expressions into "
        f"where(); loops and the other constructs must not depend on the element")


def _register_helpers() -> None:
    """The helpers above, as primitives of every array-backend context (run on ``xp``)."""
    ctx_cls = ArrayBackendContext

    @ctx_cls.primitive(where)
    @opaque
    def _where(ctx: Any, condition: Any, x: Any, y: Any) -> Any:
        be = ctx.backend
        if isinstance(condition, (bool, np.bool_)):
            return x if condition else y
        if isinstance(x, tuple) and isinstance(y, tuple) and len(x) == len(y):
            return tuple(_where(ctx, condition, a, b) for a, b in zip(x, y))
        if not be.numpy_like:
            if not be.is_array(x) and not be.is_array(y):
                x, y = be.arrays((x, y))
            elif not be.is_array(x) or not be.is_array(y):
                like = y if be.is_array(y) else x
                x, y = be.arrays((x, y), like=like)
        return be.xp.where(condition, x, y)

    @ctx_cls.primitive(truth)
    @opaque
    def _truth(ctx: Any, x: Any) -> Any:
        be = ctx.backend
        if not be.is_array(x):
            return bool(x)
        if x.dtype == be.dtype(np.bool_):
            return x
        return be.xp.not_equal(x, be.arrays((0,), like=x)[0] if not be.numpy_like else 0)

    def logical(name: str, python: Any) -> Any:
        def impl(ctx: Any, *args: Any) -> Any:
            be = ctx.backend
            if not any(be.is_array(a) for a in args):
                return python(*args)
            return getattr(be.xp, name)(*be.arrays(args))
        impl.__name__ = f"_{name}"
        return opaque(impl)

    ctx_cls.primitive(logical_and)(logical("logical_and", lambda x, y: bool(x) and bool(y)))
    ctx_cls.primitive(logical_or)(logical("logical_or", lambda x, y: bool(x) or bool(y)))
    ctx_cls.primitive(logical_not)(logical("logical_not", lambda x: not x))

    @ctx_cls.primitive(static)
    @opaque
    def _static(ctx: Any, value: Any, construct: str) -> Any:
        if ctx.backend.is_array(value) and getattr(value, "ndim", 0) > 0:
            raise _element_dependent(construct)
        return value

    @ctx_cls.primitive(static_iter)
    @opaque
    def _static_iter(ctx: Any, iterable: Any, construct: str) -> Any:
        if ctx.backend.is_array(iterable) or _is_nd(iterable):
            raise _element_dependent(construct)
        return iterable

    @ctx_cls.primitive(assert_all)
    @opaque
    def _assert_all(ctx: Any, test: Any) -> bool:
        if ctx.backend.is_array(test):
            return bool(ctx.backend.xp.all(test))
        return bool(test)

    @ctx_cls.primitive(partial_return)
    @opaque
    def _partial_return(ctx: Any, done: Any, value: Any, construct: str) -> Any:
        if not ctx.backend.is_array(done):
            return value if done else None
        if bool(ctx.backend.xp.all(done)):
            return value
        raise VectorizeError(f"cannot vectorise {construct}: some elements reach the end of "
                             f"the function without a return (they would be None)")


_register_helpers()


# -- the pass --------------------------------------------------------------------------------

class BranchesToWhere(ast.NodeTransformer):
    """``BranchesToWhere()``: an overdub pass that turns a scalar kernel's branches into
    ``where`` selections (see the module docstring for before and after).

    Stateless (each function is rewritten by a fresh :class:`_Vectoriser`), so one instance may
    serve any number of contexts.  :func:`broadcast` adds it for you; give it to a context
    yourself to run vectorised code with ordinary NumPy arrays, in any context.

    See also: :func:`broadcast`.
    """

    def visit_FunctionDef(self, node: ast.FunctionDef) -> Any:
        return _Vectoriser(node).function()

    def visit_Lambda(self, node: ast.Lambda) -> Any:
        return _Vectoriser(node).lambda_()


_P = "@gpu_"  # prefix of every name the pass invents
_N = TypeVar("_N", bound=ast.AST)


class _Vectoriser:
    """Rewrites one function (nested functions get their own).

    Attributes (for one function, never reset): ``node`` (the function being rewritten);
    ``count`` (temporaries made so far: names ``@gpu_<kind><count>``); ``defined`` (names that
    may have a value at the current point: parameters and assignments so far); ``partial``
    (name -> line: assigned on some paths only, so using it later is an error).
    """

    def __init__(self, node: ast.FunctionDef | ast.Lambda) -> None:
        self.node = node
        self.name = getattr(node, "name", "<lambda>")
        self.count = 0
        args = node.args
        self.defined = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                                         *(x for x in (args.vararg, args.kwarg) if x))}
        self.partial: dict[str, int] = {}

    # -- small AST makers ------------------------------------------------------------------
    def temp(self, kind: str) -> str:
        self.count += 1
        return f"{_P}{kind}{self.count}"

    def helper(self, name: str) -> ast.expr:
        return ast.Attribute(embed(sys.modules[_MODULE]), name, ast.Load())

    def call(self, name: str, *args: ast.expr) -> ast.expr:
        return ast.Call(self.helper(name), list(args), [])

    def where(self, c: ast.expr, x: ast.expr, y: ast.expr) -> ast.expr:
        return self.call("where", c, x, y)

    def what(self, construct: str, node: ast.stmt | ast.expr) -> ast.Constant:
        return ast.Constant(f"the {construct} at line {node.lineno} of {self.name}")

    def bind(self, kind: str, value: ast.expr, out: list[ast.stmt], at: ast.AST) -> ast.Name:
        """``@gpu_<kind>N = value`` appended to ``out``; the name, for reading."""
        name = self.temp(kind)
        out.append(_at(ast.Assign([ast.Name(name, ast.Store())], value), at))
        return ast.Name(name, ast.Load())

    # -- entry points --------------------------------------------------------------------
    def function(self) -> ast.FunctionDef:
        node = cast(ast.FunctionDef, self.node)  # made by visit_FunctionDef
        body = node.body
        docstring = body[:1] if body and _is_docstring(body[0]) else []
        out: list[ast.stmt] = []
        state = self.block(body[len(docstring):], _NONE, "vector", out, top=True)
        if state.done is not None and state.done is not True:  # returns on some paths only
            out.append(_at(ast.Return(self.call(
                "partial_return", state.done, state.value,
                self.what("function", node))), node))
        node.body = [*docstring, *out]
        return node

    def lambda_(self) -> ast.Lambda:
        node = cast(ast.Lambda, self.node)  # made by visit_Lambda
        node.body = self.expr(node.body)
        return node

    # -- statements ------------------------------------------------------------------------
    def block(self, stmts: list[ast.stmt], state: _State, mode: str, out: list[ast.stmt],
              top: bool = False) -> _State:
        """Rewrite ``stmts`` into ``out``; the return state after them.

        ``mode``: "vector" (a function body or a vectorised branch), "loop" (in a loop body:
        returns, break and continue keep Python's control flow) or "native" (inside try/with/
        match or a non-vectorised if: everything keeps Python's control flow).
        """
        for s in stmts:
            if state.done is True:
                break  # dead code: every element has returned
            self.check_partial(s)
            state = self.statement(s, state, mode, out, top)
        return state

    def statement(self, s: ast.stmt, state: _State, mode: str, out: list[ast.stmt],
                  top: bool) -> _State:
        if isinstance(s, ast.Return):
            value = self.expr(s.value) if s.value is not None else ast.Constant(None)
            if mode != "vector" or top:
                if state.done is not None:
                    value = self.where(state.done, state.value, value)
                out.append(_at(ast.Return(value), s))
                return _State(True, None) if mode == "vector" else state
            if state.done is None:
                if not isinstance(value, ast.Constant):
                    value = self.bind("r", value, out, s)
                return _State(True, value)
            return _State(True, self.bind("r", self.where(state.done, state.value, value),
                                          out, s))
        if isinstance(s, ast.If):
            reason = self.unvectorisable(s, mode)
            if reason is None:
                return self.vector_if(s, state, mode, out, top)
            test = self.call("static", self.expr(s.test),
                             self.what(f"if statement ({reason})", s))
            body: list[ast.stmt] = []
            orelse: list[ast.stmt] = []
            self.block(s.body, state, "native", body)
            self.block(s.orelse, state, "native", orelse)
            out.append(_at(ast.If(test, body or [ast.Pass()], orelse), s))
            self.defined |= _stores(body) | _stores(orelse)
            return state
        if isinstance(s, (ast.For, ast.While)):
            inner = "native" if mode == "native" else "loop"
            body, orelse = [], []
            if isinstance(s, ast.For):
                self.defined |= _target_names(s.target)
            self.block(s.body, state, inner, body)
            self.block(s.orelse, state, "native", orelse)
            if isinstance(s, ast.For):
                loop: ast.stmt = ast.For(s.target, self.loop_iter(s), body, orelse,
                                         getattr(s, "type_comment", None))
            else:
                loop = ast.While(self.call("static", self.expr(s.test),
                                           self.what("while loop", s)), body, orelse)
            out.append(_at(loop, s))
            self.defined |= _stores(body)
            return state
        if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name):
            # `x += v` on a scalar rebinds x; on an array it would write into the caller's array
            load = ast.Name(s.target.id, ast.Load())
            s = _at(ast.Assign([ast.Name(s.target.id, ast.Store())],
                               ast.BinOp(load, s.op, s.value)), s)
        if isinstance(s, ast.Assert):
            out.append(_at(ast.Assert(self.call("assert_all", self.test(s.test)),
                                      self.expr(s.msg) if s.msg else None), s))
            return state
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if isinstance(s, ast.FunctionDef):
                s = _Vectoriser(s).function()
            out.append(s)
            self.defined.add(s.name)
            return state
        if isinstance(s, (ast.Try, ast.With, ast.AsyncWith, ast.AsyncFor)) or \
                type(s).__name__ == "TryStar":
            for field in ("body", "orelse", "finalbody"):
                if hasattr(s, field):
                    inner_out: list[ast.stmt] = []
                    self.block(getattr(s, field), state, "native", inner_out)
                    setattr(s, field, inner_out or ([ast.Pass()] if field == "body" else []))
            for handler in getattr(s, "handlers", []):
                inner_out = []
                self.block(handler.body, state, "native", inner_out)
                handler.body = inner_out or [ast.Pass()]
            if isinstance(s, (ast.With, ast.AsyncWith)):
                for item in s.items:
                    item.context_expr = self.expr(item.context_expr)
            out.append(s)
            self.defined |= _stores([s])
            return state
        if isinstance(s, ast.Match):
            s.subject = self.expr(s.subject)
            for case in s.cases:
                inner_out = []
                self.block(case.body, state, "native", inner_out)
                case.body = inner_out or [ast.Pass()]
            out.append(s)
            self.defined |= _stores([s])
            return state
        if isinstance(s, _KEPT_AS_IS):
            out.append(s)
            self.defined |= _stores([s])
            return state
        # simple statements: assignments, expressions, raise, del, import, pass...
        s = _Expressions(self).visit(s)
        out.append(s)
        stored = _stores([s])
        self.defined |= stored
        for name in stored:
            self.partial.pop(name, None)
        return state

    def loop_iter(self, s: ast.For) -> ast.expr:
        it = s.iter
        what = self.what("for loop", s)
        if (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
                and it.func.id == "range" and not it.keywords):
            return _at(ast.Call(it.func, [self.call("static", self.expr(a), what)
                                          for a in it.args], []), it)
        return self.call("static_iter", self.expr(it), what)

    def vector_if(self, s: ast.If, state: _State, mode: str, out: list[ast.stmt],
                  top: bool) -> _State:
        c = self.bind("c", self.test(s.test), out, s)
        before = set(self.defined)
        partial_before = dict(self.partial)
        branches = []
        for stmts in (s.body, s.orelse):
            self.defined = set(before)
            self.partial = dict(partial_before)
            flat: list[ast.stmt] = []
            result = self.block(stmts, _NONE, mode, flat)
            branches.append((flat, result, set(self.defined)))
        (a_out, a, a_defined), (b_out, b, b_defined) = branches
        self.defined = before
        self.partial = partial_before
        a_vars, b_vars = _stores(a_out), _stores(b_out)
        # Emission order: a branch that always returns goes first, renamed (its assignments
        # are dead after the if); the other then writes the real names.  Two branches that both
        # fall through are both renamed and merged with where().
        if a.done is True or b.done is True:
            first, second = ((a_out, a_vars), (b_out, b_vars)) if a.done is True \
                else ((b_out, b_vars), (a_out, a_vars))
            out.extend(self.renamed(first[0], first[1], before, s))
            out.extend(second[0])
            live = b_defined if a.done is True else a_defined
            if a.done is True and b.done is True:
                live = before
            self.defined = live
            for name in second[1]:
                self.partial.pop(name, None)
        else:
            a_map = self.rename_map(a_vars)
            b_map = self.rename_map(b_vars)
            out.extend(self.renamed(a_out, a_vars, before, s, a_map))
            out.extend(self.renamed(b_out, b_vars, before, s, b_map))
            for name in sorted(a_vars | b_vars):
                in_a, in_b = name in a_vars, name in b_vars
                x = ast.Name(a_map[name] if in_a else name, ast.Load())
                y = ast.Name(b_map[name] if in_b else name, ast.Load())
                if (in_a and in_b) or name in before:
                    value = self.where(c, x, y)
                else:  # defined on one path only: fine unless used later
                    value = x if in_a else y
                    self.partial[name] = s.lineno
                out.append(_at(ast.Assign([ast.Name(name, ast.Store())], value), s))
                if (in_a and in_b) or name in before:
                    self.partial.pop(name, None)
            self.defined = before | a_vars | b_vars
        branch_state = self.combine(c, a, b, out, s)
        state = self.sequence(state, branch_state, out, s)
        if state.done is True and top:
            out.append(_at(ast.Return(state.value), s))
        return state

    def combine(self, c: ast.expr, a: _State, b: _State, out: list[ast.stmt],
                at: ast.AST) -> _State:
        """The return state of ``if c: A else: B`` from the states of A and B."""
        if a.done is None and b.done is None:
            return _NONE
        if a.done is True and b.done is True:
            return _State(True, self.where(c, a.value, b.value))
        if a.done is True and b.done is None:
            return _State(c, a.value)
        if a.done is None and b.done is True:
            return _State(self.bind("d", self.call("logical_not", c), out, at), b.value)
        done = self.where(c, _flag(a.done), _flag(b.done))
        value = self.where(c, a.value or b.value, b.value or a.value)
        return _State(self.bind("d", done, out, at), self.bind("r", value, out, at))

    def sequence(self, first: _State, then: _State, out: list[ast.stmt],
                 at: ast.AST) -> _State:
        """Returns in ``first``, then (for the elements still running) in ``then``."""
        if first.done is None:
            return then
        if then.done is None:
            return first
        value = self.bind("r", self.where(first.done, first.value, then.value), out, at)
        if then.done is True:
            return _State(True, value)
        done = self.bind("d", self.call("logical_or", first.done, then.done), out, at)
        return _State(done, value)

    def rename_map(self, names: set[str]) -> dict[str, str]:
        return {name: self.temp(f"{name}_") for name in sorted(names)}

    def renamed(self, stmts: list[ast.stmt], names: set[str], before: set[str], at: ast.AST,
                mapping: dict[str, str] | None = None) -> list[ast.stmt]:
        """``stmts`` writing renamed copies of ``names``; copies made first of those they read
        before writing (so a branch sees the values from before the if)."""
        if not names:
            return stmts
        mapping = mapping or self.rename_map(names)
        copies = [_at(ast.Assign([ast.Name(mapping[n], ast.Store())], ast.Name(n, ast.Load())),
                      at) for n in sorted(_read_first(stmts) & names & before)]
        renamer = _Renamer(mapping)
        return copies + [renamer.visit(s) for s in stmts]

    def check_partial(self, s: ast.stmt) -> None:
        if not self.partial:
            return
        for node in _loads(s):
            line = self.partial.get(node.id)
            if line is not None:
                raise VectorizeError(
                    f"cannot vectorise {self.name}: {node.id!r} is assigned on some paths of "
                    f"the if statement at line {line} only, and used at line {node.lineno}; "
                    f"give it a value before the if (elements on the other paths have none)")

    def unvectorisable(self, s: ast.If, mode: str) -> str | None:
        """Why ``s`` must keep Python's control flow, or None when it can become where()."""
        if mode == "native":
            return "inside a construct that keeps Python's control flow"
        return _Unvectorisable(in_loop=(mode == "loop")).reason(s.body + s.orelse)

    # -- expressions ----------------------------------------------------------------------
    def expr(self, e: ast.expr) -> ast.expr:
        rewritten: ast.expr = _Expressions(self).visit(e)
        return rewritten

    def test(self, e: ast.expr) -> ast.expr:
        """``e`` as an elementwise truth value (a bool array, or a Python bool)."""
        if isinstance(e, ast.BoolOp):
            parts = [self.test(v) for v in e.values]
            name = "logical_and" if isinstance(e.op, ast.And) else "logical_or"
            result = parts[-1]
            for part in reversed(parts[:-1]):
                result = self.call(name, part, result)
            return _at(result, e)
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            return _at(self.call("logical_not", self.test(e.operand)), e)
        if isinstance(e, ast.Compare) and not any(
                isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in e.ops):
            return self.expr(e)
        if isinstance(e, ast.Constant) and isinstance(e.value, bool):
            return e
        return _at(self.call("truth", self.expr(e)), e)


class _State:
    """The returns seen so far: ``done`` None (none), True (every element returned) or a name
    holding the elementwise mask; ``value`` the returned values where ``done``."""

    __slots__ = ("done", "value")

    def __init__(self, done: Any, value: Any) -> None:
        self.done, self.value = done, value


_NONE = _State(None, None)
_KEPT_AS_IS = (ast.ClassDef, ast.Global, ast.Nonlocal, ast.Import, ast.ImportFrom)


def _flag(done: ast.expr | Literal[True] | None) -> ast.expr:
    if done is None:
        return ast.Constant(False)
    if done is True:
        return ast.Constant(True)
    return done


class _Expressions(ast.NodeTransformer):
    """Per-element expression constructs -> array operations (value positions)."""

    def __init__(self, v: _Vectoriser) -> None:
        self.v = v

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        v = self.v
        return _at(v.where(v.test(node.test), self.visit(node.body), self.visit(node.orelse)),
                   node)

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        # `a and b` is `b if a else a`, `a or b` is `a if a else b`, elementwise; a is computed
        # once (a walrus to a temporary), b always (kernels are pure).
        v = self.v
        values = [self.visit(x) for x in node.values]
        result = values[-1]
        for value in reversed(values[:-1]):
            name = v.temp("t")
            bound = ast.NamedExpr(ast.Name(name, ast.Store()), value)
            again = ast.Name(name, ast.Load())
            cond = v.call("truth", bound)
            result = (v.where(cond, result, again) if isinstance(node.op, ast.And)
                      else v.where(cond, again, result))
        return _at(result, node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        if isinstance(node.op, ast.Not):
            return _at(self.v.call("logical_not", self.v.test(node.operand)), node)
        return self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> Any:
        self.generic_visit(node)
        if len(node.ops) == 1:
            return node
        # a < b < c  ->  logical_and(a < (@t := b), @t < c): b computed once, no truth test
        parts = []
        left = node.left
        for i, (op, right) in enumerate(zip(node.ops, node.comparators)):
            if i < len(node.ops) - 1 and not isinstance(right, (ast.Constant, ast.Name)):
                name = self.v.temp("t")
                parts.append(ast.Compare(left, [op], [ast.NamedExpr(
                    ast.Name(name, ast.Store()), right)]))
                left = ast.Name(name, ast.Load())
            else:
                parts.append(ast.Compare(left, [op], [right]))
                left = right
        result: ast.expr = parts[-1]
        for part in reversed(parts[:-1]):
            result = self.v.call("logical_and", part, result)
        return _at(result, node)

    def visit_Lambda(self, node: ast.Lambda) -> Any:
        return _Vectoriser(node).lambda_()

    def visit_comprehension(self, node: ast.comprehension) -> Any:
        node.iter = self.v.call("static_iter", self.visit(node.iter),
                                self.v.what("comprehension", node.iter))
        node.ifs = [self.v.call("static", self.visit(test),
                                self.v.what("comprehension filter", test)) for test in node.ifs]
        return node


class _Unvectorisable(ast.NodeVisitor):
    """Finds what forbids turning an if into where(): a statement with an effect that cannot
    be undone per element.  Nested functions and classes are their own business."""

    def __init__(self, in_loop: bool) -> None:
        self.in_loop = in_loop
        self.loops = 0
        self.found: str | None = None

    def reason(self, stmts: list[ast.stmt]) -> str | None:
        for s in stmts:
            self.visit(s)
            if self.found:
                break
        return self.found

    def flag(self, why: str) -> None:
        if self.found is None:
            self.found = why

    def visit_FunctionDef(self, node: ast.AST) -> None:
        self.flag("it defines a function")

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.AST) -> None:
        self.flag("it defines a class")

    def visit_Lambda(self, node: ast.AST) -> None:
        pass

    def _loop(self, node: ast.AST) -> None:
        self.loops += 1
        self.generic_visit(node)
        self.loops -= 1

    visit_For = visit_While = _loop

    def visit_Break(self, node: ast.AST) -> None:
        if not self.loops:
            self.flag("it contains a break")

    def visit_Continue(self, node: ast.AST) -> None:
        if not self.loops:
            self.flag("it contains a continue")

    def visit_Return(self, node: ast.AST) -> None:
        if self.loops or self.in_loop:
            self.flag("it returns from inside a loop")
        self.generic_visit(node)

    def visit_Raise(self, node: ast.AST) -> None:
        self.flag("it contains a raise")

    def visit_Assert(self, node: ast.AST) -> None:
        self.flag("it contains an assert")

    def visit_Delete(self, node: ast.AST) -> None:
        self.flag("it contains a del")

    def visit_Expr(self, node: ast.Expr) -> None:
        if not isinstance(node.value, ast.Constant):
            self.flag("it makes a call for its side effect")

    def _assign(self, node: Any) -> None:
        targets = getattr(node, "targets", None) or [node.target]
        for target in targets:
            if any(isinstance(t, (ast.Subscript, ast.Attribute))
                   for t in ast.walk(target)):
                self.flag("it assigns to an item or attribute")
        self.generic_visit(node)

    visit_Assign = visit_AugAssign = visit_AnnAssign = _assign

    def _native(self, node: ast.AST) -> None:
        self.flag(f"it contains a {type(node).__name__.lower()} statement")

    visit_Try = visit_With = visit_AsyncWith = visit_AsyncFor = visit_Match = _native
    visit_Global = visit_Nonlocal = visit_Import = visit_ImportFrom = _native

    def visit_Yield(self, node: ast.AST) -> None:
        self.flag("it contains a yield")

    visit_YieldFrom = visit_Await = visit_Yield


class _Renamer(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, str]) -> None:
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> Any:
        new = self.mapping.get(node.id)
        return node if new is None else _at(ast.Name(new, node.ctx), node)

    def visit_Lambda(self, node: ast.Lambda) -> Any:
        params = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        inner = _Renamer({k: v for k, v in self.mapping.items() if k not in params})
        node.body = inner.visit(node.body)
        return node


def _scope_walk(nodes: Sequence[ast.AST]) -> Iterator[ast.AST]:
    """ast.walk over ``nodes`` without entering nested functions, lambdas or classes."""
    pending = list(nodes)
    while pending:
        node = pending.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                      ast.ClassDef)):
                pending.append(child)


def _stores(stmts: Sequence[ast.AST]) -> set[str]:
    """User names (not ``@``) a list of statements may bind in the function's scope."""
    found = set()
    comprehension_targets = set()
    for node in _scope_walk(stmts):
        if isinstance(node, ast.comprehension):
            comprehension_targets |= {id(n) for n in ast.walk(node.target)}
    for node in _scope_walk(stmts):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and \
                not node.id.startswith("@") and id(node) not in comprehension_targets:
            found.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found |= {(a.asname or a.name).split(".")[0] for a in node.names}
    for s in stmts:  # the nested defs themselves (not walked into above)
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(s.name)
    return found


def _target_names(target: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _loads(s: ast.AST) -> list[ast.Name]:
    return [n for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]


def _read_first(stmts: list[ast.stmt]) -> set[str]:
    """Names the statements read (in source order) before writing them: what a renamed branch
    must copy in.  A loop body may read in one iteration what it wrote in the previous one, so
    every name a loop reads counts unless written before the loop."""
    written: set[str] = set()
    read: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.For, ast.While)):
            read.update(n for n in _loads_in([node]) if n not in written)
        if isinstance(node, (ast.Assign, ast.NamedExpr)):
            visit(node.value)
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                visit(target)
            return
        if isinstance(node, ast.For):
            for child in (node.iter, node.target, *node.body, *node.orelse):
                visit(child)
            return
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load) and node.id not in written:
                read.add(node.id)
            elif isinstance(node.ctx, ast.Store):
                written.add(node.id)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    for s in stmts:
        visit(s)
    return read


def _loads_in(nodes: list[ast.AST]) -> set[str]:
    return {n.id for node in nodes for n in ast.walk(node)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _is_docstring(s: ast.stmt) -> bool:
    return isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and \
        isinstance(s.value.value, str)


def _at(new: _N, old: ast.AST) -> _N:
    """``new`` (and its unpositioned children) at ``old``'s source position."""
    for node in ast.walk(new):
        if "lineno" in node._attributes and not hasattr(node, "lineno"):
            ast.copy_location(node, old)
    return new


# -- running a kernel --------------------------------------------------------------------

_ARRAY_SAFE_BUILTINS = {id(f) for f in (
    getattr, setattr, hasattr, delattr, isinstance, issubclass, type, len, abs, id, repr, str,
    print, format, tuple, list, dict, set, frozenset, iter, next, zip, enumerate, range,
    reversed, sum, pow, divmod, callable, hash, __import__, super, object)}
_ARRAY_SAFE_BUILTINS |= {id(getattr(operator, name)) for name in dir(operator)
                         if not name.startswith("_") and callable(getattr(operator, name))}


class _Broadcasting(ArrayBackendContext):
    """What ``broadcast`` runs a kernel in: the user's context plus the pass, and Python's
    scalar builtins (``max``, ``float``...) lifted to arrays.  Only calls are intercepted, so
    the kernel's operators are NumPy's own (which reuse temporaries: a Python-level step per
    operator would cost a fifth of the time at n = 2048)."""


class _Checking(_Broadcasting):
    """The same, plus a check that no array reaches a function overdub cannot see into.  A
    ``fallback`` intercepts every operator too, so ``broadcast`` uses it for a kernel's first
    run (per context class), and to name what went wrong when a later run fails."""

    def fallback(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        if id(fn) not in _ARRAY_SAFE_BUILTINS:
            be = self.backend
            for a in (*args, *kwargs.values()):
                if be.is_array(a) or (type(a) is np.ndarray):
                    self._refuse(fn)
        return super().fallback(fn, *args, **kwargs)

    def _refuse(self, fn: Any) -> None:
        be = self.backend
        if is_opaque(fn):
            return  # our helpers, and the user's opaque functions: their choice
        owner = getattr(fn, "__self__", None)
        if be.is_array(owner):
            return  # a method of the array itself (x.astype, x.reshape...)
        module = getattr(fn, "__module__", None) or getattr(type(fn), "__module__", "") or ""
        if module == be.name or module.startswith(be.name + ".") or (
                be.numpy_like and module.startswith(be.name.split(".")[0])):
            return  # the namespace's own functions work on its arrays
        if be.is_numpy and isinstance(fn, np.ufunc):
            return  # a NumPy ufunc from elsewhere (scipy.special) is elementwise by nature
        name = _name(fn)
        why = ("it has no Python source" if isinstance(fn, types.FunctionType)
               else "it is a C function overdub cannot see into")
        raise VectorizeError(
            f"cannot vectorise the call of {name} inside the kernel: {why}, and it got an "
            f"array where the kernel expects one element; register a primitive for it "
            f"(@ArrayBackendContext.primitive({name}) on your context class), or call it "
            f"outside the kernel")


def _name(fn: Any) -> str:
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{module}.{name}" if module and module != "builtins" else name


def _any_array(ctx: Any, args: tuple[Any, ...]) -> bool:
    return any(ctx.backend.is_array(a) for a in args)


def _register_builtins() -> None:
    """Python's scalar builtins, elementwise on arrays (inside broadcast only)."""
    cls = _Broadcasting

    def extremum(name: str, builtin: Any) -> Any:
        def impl(ctx: Any, *args: Any, **kwargs: Any) -> Any:
            if len(args) < 2 or kwargs or not _any_array(ctx, args):
                return recurse(ctx, builtin, *args, **kwargs)
            be = ctx.backend
            f = getattr(be.xp, name)
            result = args[0]
            for a in args[1:]:
                result = f(*be.arrays((result, a)))
            return result
        return opaque(impl)

    cls.primitive(max)(extremum("maximum", max))
    cls.primitive(min)(extremum("minimum", min))

    @cls.primitive(float)
    @opaque
    def _float(ctx: Any, x: Any = 0.0) -> Any:
        if not ctx.backend.is_array(x):
            return float(x)
        return ctx.backend.astype(x, np.float32 if ctx.float32 else np.float64)

    @cls.primitive(int)
    @opaque
    def _int(ctx: Any, x: Any = 0, *rest: Any) -> Any:
        if not ctx.backend.is_array(x):
            return int(x, *rest)
        return ctx.backend.astype(ctx.backend.xp.trunc(x), np.int64)

    @cls.primitive(bool)
    @opaque
    def _bool(ctx: Any, x: Any = False) -> Any:
        if not ctx.backend.is_array(x):
            return bool(x)
        return _truth_of(ctx, x)

    @cls.primitive(round)
    @opaque
    def _round(ctx: Any, x: Any, ndigits: Any = None) -> Any:
        if not ctx.backend.is_array(x):
            return round(x) if ndigits is None else round(x, ndigits)
        be = ctx.backend
        if ndigits is None or ndigits == 0:
            return be.xp.round(x)
        scale = 10.0 ** ndigits
        return be.xp.round(x * scale) / scale


def _truth_of(ctx: Any, x: Any) -> Any:
    be = ctx.backend
    if x.dtype == be.dtype(np.bool_):
        return x
    return be.xp.not_equal(x, be.arrays((0,), like=x)[0] if not be.numpy_like else 0)


_register_builtins()

_CLASSES: dict[tuple[type, type], type] = {}


def _broadcasting(ctx: ArrayBackendContext, kind: type) -> ArrayBackendContext:
    """``ctx``'s sibling for kernels (cached on ``ctx``): its class and primitives plus
    ``kind``'s (:class:`_Broadcasting` or :class:`_Checking`), its passes plus
    :class:`BranchesToWhere`."""
    key = f"_overdub_gpu_{kind.__name__}"
    cached: ArrayBackendContext | None = ctx.__dict__.get(key)
    if cached is not None:
        return cached
    cls = type(ctx)
    kernel_cls = _CLASSES.get((cls, kind))
    if kernel_cls is None:
        kernel_cls = cls if issubclass(cls, kind) else type(
            f"{kind.__name__[1:]}{cls.__name__}", (kind, cls), {"__module__": _MODULE})
        kernel_cls = _CLASSES.setdefault((cls, kind), kernel_cls)
    sibling = copy.copy(ctx)
    for name in ("_overdub_state", "_overdub_gpu__Broadcasting", "_overdub_gpu__Checking"):
        sibling.__dict__.pop(name, None)
    sibling.__class__ = kernel_cls
    sibling.passes = (*ctx.passes, _PASS)
    ctx.__dict__[key] = sibling
    return sibling


_PASS = BranchesToWhere()


@opaque
def broadcast(ctx: ArrayBackendContext, kernel: Any, *arrays: Any) -> Any:
    """``broadcast(ctx, kernel, *arrays)``: ``kernel`` applied elementwise, NumPy-broadcast.

    ``kernel`` is a Python function written for scalars: arithmetic, comparisons, ``math``
    and NumPy functions, calls of other such functions, ``if``/``elif``/``else`` with early
    returns, conditional expressions, ``and``/``or``/``not``, loops that do not depend on the
    element.  It runs once, on whole arrays of ``ctx``'s namespace: the
    :class:`BranchesToWhere` pass turns its branches into ``where`` selections.  The result
    (or each item of a returned tuple) is an array of the broadcast shape of ``arrays``.
    Raises :class:`VectorizeError` naming the construct it cannot vectorise.

    Example::

        def relu(x):
            if x > 0:
                return x
            return 0.0

        broadcast(ArrayBackendContext(numpy), relu, np.array([-1.0, 2.0]))  # [0., 2.]

    See also: :class:`BranchesToWhere`, :class:`ArrayBackendContext`.
    """
    if not isinstance(ctx, ArrayBackendContext):
        raise TypeError(f"broadcast(ctx, kernel, *arrays): ctx must be an ArrayBackendContext "
                        f"(or GPUContext), got {ctx!r}")
    if not callable(kernel):
        raise TypeError(f"broadcast(ctx, kernel, *arrays): kernel must be callable, got "
                        f"{kernel!r}")
    be = ctx.backend
    shapes = []
    for i, a in enumerate(arrays):
        if type(a) is np.ndarray and not be.is_numpy:
            raise HostArrayError(
                f"broadcast: argument {i} is a NumPy (host) array but the context computes "
                f"with {be.name}: move it with to_device(ctx, a) first")
        shapes.append(tuple(getattr(a, "shape", ())))
    shape = _broadcast_shape(shapes)
    code = getattr(getattr(kernel, "__func__", kernel), "__code__", None)
    checked = _CHECKED.setdefault(code, set()) if code is not None else set()
    if (type(ctx), be.name) not in checked:
        # The first run of a kernel (per context class) checks every leaf call; later runs
        # make the same calls (every branch is computed), so they take the fast path.
        out = _run(_broadcasting(ctx, _Checking), kernel, arrays)
        checked.add((type(ctx), be.name))
        return _result(ctx, out, shape)
    try:
        out = _run(_broadcasting(ctx, _Broadcasting), kernel, arrays)
    except (VectorizeError, MissingCounterpartError, HostArrayError):
        raise
    except Exception as error:
        # Kernels are pure, so running one again is safe: this time every leaf call is
        # checked, to name a call overdub cannot see into that got an array.  Anything else
        # is the kernel's own error, raised as it was.
        try:
            _run(_broadcasting(ctx, _Checking), kernel, arrays)
        except VectorizeError as named:
            raise named from error
        except Exception:
            pass
        raise
    return _result(ctx, out, shape)


# Kernels whose first run was checked, with the (context class, namespace) it was checked for.
_CHECKED: weakref.WeakKeyDictionary[types.CodeType, set[tuple[type, Any]]] = \
    weakref.WeakKeyDictionary()


def _result(ctx: ArrayBackendContext, out: Any, shape: tuple[int, ...]) -> Any:
    if isinstance(out, tuple):
        return tuple(_fill(ctx, o, shape) for o in out)
    return _fill(ctx, out, shape)


def _run(kernel_ctx: ArrayBackendContext, kernel: Any, arrays: tuple[Any, ...]) -> Any:
    if kernel_ctx.backend.is_numpy:
        # Every branch is computed for every element; the ones not selected may overflow or
        # divide by zero harmlessly, as in hand-written np.where code.
        with np.errstate(all="ignore"):
            return overdub(kernel_ctx, kernel, *arrays)
    return overdub(kernel_ctx, kernel, *arrays)


def _broadcast_shape(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    ndim = max((len(s) for s in shapes), default=0)
    result = []
    for axis in range(ndim):
        sizes = {s[axis - ndim + len(s)] for s in shapes if axis - ndim + len(s) >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            raise ValueError(f"broadcast: shapes {shapes} cannot be broadcast together")
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


def _fill(ctx: ArrayBackendContext, out: Any, shape: tuple[int, ...]) -> Any:
    """``out`` as a fresh array of ``shape`` (a kernel may return a constant or a narrower
    array on some inputs)."""
    be = ctx.backend
    if out is None:
        return None
    if not be.is_array(out) or be.is_numpy and isinstance(out, np.generic):
        out = be.arrays((out,))[0] if not be.numpy_like else be.xp.asarray(out)
        if ctx.float32 and getattr(out, "dtype", None) == be.dtype(np.float64):
            out = be.astype(out, np.float32)
    if tuple(out.shape) == shape:
        return out
    full = be.xp.broadcast_to(out, shape)
    return be.xp.asarray(full, copy=True) if not be.numpy_like else (
        full.copy() if hasattr(full, "copy") else full)
