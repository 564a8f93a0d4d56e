"""The pass of the specialised forward mode: a function's AST -> the AST of its *dual*.

The dual of ``f(x, y)`` is ``f(@T, x, y)``: ``@T`` holds the level of the ``jvp`` running it
(see ``_dual``) and the tangents of the positional parameters, every local variable
``v`` has a tangent local ``@d.v``, and every ``return v`` returns ``(v, tangent)``.
Arithmetic on floats (and ints) is expanded in place -- primal and tangent, no call -- behind
a guard on the operands' types; anything else goes to a helper of the runtime (``_dual``,
``_dual_helpers``; bound into the dual by :func:`overdub.embed`, shown
``@overdub_ad.<helper>`` below).  Before and after, simplified::

    def f(x, y):                        def f(@T, x, y):
        z = x * y                           @L, @d.x, @d.y = @T
        return math.sin(z) + y              if x.__class__ is float and y.__class__ is float:
                                                z = x * y
                                                @d.z = @d.x * y + @d.y * x
                                            else:
                                                z, @d.z = @overdub_ad.binop(@L, mul, x, ...)
                                            @t2, @d.@t2 = @overdub_ad.call(@L, 7, math.sin, ...)
                                            ...
                                            return (@t3, @d.@t3)

Expressions are evaluated in Python's order, each operand once (a temporary per value),
``and``/``or``, conditional expressions and comparison chains short-circuit as in Python.  A
lambda's dual is a lambda (assignments become ``:=``, branches conditional expressions).
Functions defined inside are rewritten with it (their duals are made when the enclosing dual
runs); local variables they capture hold boxed values in their cells.

A construct the pass does not handle becomes a stop (``@overdub_ad.deopt()``) where it is:
``try``, ``with``, ``del``, imports, classes, comprehensions, starred arguments, writes to
items and attributes; a function with ``global``/``nonlocal``/``yield`` or ``*args`` stops on
entry.  Deterministic and stateless between functions, as the core's rewrite cache requires
(site numbers are allocated once per rewrite).

This module compiles functions and their statements; expressions are compiled by
:mod:`._pass_expressions` (methods of :class:`_Function`), and what the dual code is written
with -- its names, the helpers it calls, the per-site cache -- is in :mod:`._pass_common`.
"""

from __future__ import annotations

import ast
from typing import Any

from . import _pass_comprehensions, _pass_expressions
from ._pass_common import (_class, _helper, _LEVEL, _load, _store, _tangent_name, _Unsupported,
                           _Val, _zero)


_FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


class _Scope:
    """What the pass knows of one function: its local names, which of them closures capture
    (kept boxed in their cells), the captured names of enclosing rewritten functions, and
    the names some ``:=`` assigns (read into temporaries, as Python reads them)."""

    def __init__(self, node: _FunctionNode, enclosing: _Scope | None) -> None:
        args = node.args
        self.params = [a.arg for a in (*args.posonlyargs, *args.args)]
        self.locals = set(self.params) | {a.arg for a in (*args.kwonlyargs, args.vararg,
                                                            args.kwarg) if a is not None}
        self.walrus: set[str] = set()
        self.declared = False  # global/nonlocal: not followed
        body: list[ast.AST] = [node.body] if isinstance(node, ast.Lambda) else list(node.body)
        for stmt in body:
            self._bind(stmt)
        self.cells = self.locals & _captured(body)
        self.outer: set[str] = set() if enclosing is None else (
            (enclosing.cells | enclosing.outer) - self.locals)

    def _bind(self, node: ast.AST) -> None:
        for child in _own_nodes(node):
            if isinstance(child, ast.Name) and isinstance(child.ctx, (ast.Store, ast.Del)):
                self.locals.add(child.id)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.locals.add(child.name)
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                self.locals.update((a.asname or a.name).partition(".")[0] for a in child.names)
            elif isinstance(child, (ast.Global, ast.Nonlocal)):
                self.declared = True
            elif isinstance(child, ast.NamedExpr):
                self.walrus.add(child.target.id)
                self.locals.add(child.target.id)
            elif isinstance(child, ast.ExceptHandler) and child.name:
                self.locals.add(child.name)


def _own_nodes(node: ast.AST) -> Any:
    """``node`` and its descendants in the same scope (nested functions' bodies excluded;
    comprehensions included, for their ``:=`` targets)."""
    pending = [node]
    while pending:
        child = pending.pop()
        yield child
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            pending.extend(child.decorator_list)
            pending.extend(child.args.defaults)
            pending.extend(d for d in child.args.kw_defaults if d is not None)
            continue
        if isinstance(child, ast.Lambda):
            pending.extend(child.args.defaults)
            pending.extend(d for d in child.args.kw_defaults if d is not None)
            continue
        if isinstance(child, ast.ClassDef):
            pending.extend(child.decorator_list)
            pending.extend(child.bases)
            continue
        pending.extend(ast.iter_child_nodes(child))


def _yield_statements(body: list[ast.AST]) -> set[int]:
    """The ids of the ``yield`` expressions of ``body`` (this function's own) that are
    statements whose value is not used (``yield state``): the yields a generator's dual
    follows."""
    return {id(n.value) for stmt in body for n in _own_nodes(stmt)
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Yield)}


def _leaves_early(body: list[ast.stmt], loops: int = 0) -> bool:
    """Whether ``body`` has a ``return``, or a ``break`` or ``continue`` of a loop around
    it (``loops``: how many loops of its own it is inside)."""
    for stmt in body:
        if isinstance(stmt, ast.Return) or (isinstance(stmt, (ast.Break, ast.Continue))
                                            and not loops):
            return True
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for name, value in ast.iter_fields(stmt):
            inner = loops + (name == "body" and isinstance(stmt, (ast.For, ast.While,
                                                                    ast.AsyncFor)))
            for part in value if isinstance(value, list) else ():
                nested = part.body if isinstance(part, (ast.ExceptHandler, ast.match_case)) \
                    else [part] if isinstance(part, ast.stmt) else []
                if _leaves_early(nested, inner):
                    return True
    return False


def _captured(body: list[ast.AST]) -> set[str]:
    """Names used inside the nested functions, lambdas, classes and comprehensions of
    ``body``: the locals among them live in cells (an over-approximation costs only a box)."""
    names: set[str] = set()
    pending = [(node, False) for node in body]
    while pending:
        node, inside = pending.pop()
        if inside and isinstance(node, ast.Name):
            names.add(node.id)
        # (comprehensions compile as loops of this function, their targets renamed)
        nested = inside or isinstance(node, _SCOPES)
        pending.extend((child, nested) for child in ast.iter_child_nodes(node))
    return names


class _ForwardPass:
    """The pass: a function's AST -> the AST of its dual (see the module docstring).

    Stateless between functions (a fresh :class:`_Function` per call); deterministic, as the
    rewrite cache requires.  A construct it does not handle becomes a deopt at that point (a
    whole function where the construct changes its scoping: ``global``, ``nonlocal``, ``yield``).
    """

    def __call__(self, node: _FunctionNode) -> _FunctionNode:
        return _Function(node, None, native=False).rewrite()

    def __repr__(self) -> str:
        return "overdub_ad forward specialisation"


_PASS = _ForwardPass()


class _Function:
    """Rewrites one function (and, recursively, the functions defined in it).

    Attributes: ``node`` (the FunctionDef or Lambda, changed in place), ``scope``, ``temps``
    (counter of ``@t`` temporaries), ``native`` (a function defined inside the rewritten one:
    its code runs as compiled here, without the core's rewrite)."""

    def __init__(self, node: _FunctionNode, enclosing: _Scope | None,
                 native: bool = True) -> None:
        self.node = node
        _pass_comprehensions.rename([node.body] if isinstance(node, ast.Lambda) else node.body)
        self.scope = _Scope(node, enclosing)
        self.temps = 0
        self.native = native
        self.generator = False  # (a yield in its body: its dual yields pairs)

    # -- the function ------------------------------------------------------------------------
    def rewrite(self) -> _FunctionNode:
        node = self.node
        args = node.args
        lam = isinstance(node, ast.Lambda)
        body_nodes: list[ast.AST] = [node.body] if isinstance(node, ast.Lambda) else list(
            node.body)
        yields = [n for stmt in body_nodes for n in _own_nodes(stmt)
                  if isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await))]
        self.generator = bool(yields)
        unsupported = (self.scope.declared or args.vararg or args.kwarg or args.kwonlyargs
                       or lam and yields or isinstance(node, ast.AsyncFunctionDef)
                       or not _yield_statements(body_nodes).issuperset(map(id, yields)))
        out: list[ast.stmt] = []
        params = self.scope.params
        unpacked: list[ast.expr] = [_store(_LEVEL)]
        unpacked += [_store(_tangent_name(p)) for p in params]
        out.append(ast.Assign([ast.Tuple(unpacked, ast.Store())], _load("@T")))
        for p in params:
            if p in self.scope.cells:
                out.append(self._assign_boxed(p, _Val(_load(p), _load(_tangent_name(p)))))
        final: ast.expr | None = None
        try:
            if unsupported:
                raise _Unsupported("global, nonlocal, a yield's value, yield from, *args, "
                                   "**kwargs or keyword-only parameters")
            if isinstance(node, ast.Lambda):
                val = self.expr(node.body, out)
                final = ast.Tuple([val.p, self.tangent(val)], ast.Load())
            else:
                out.extend(self.block(node.body))
                if not self.generator:
                    out.append(ast.Return(ast.Tuple([ast.Constant(None), _zero()],
                                                    ast.Load())))
        except _Unsupported as why:
            out.append(_stop(why))
            final = ast.Tuple([ast.Constant(None), _zero()], ast.Load()) if lam else None
        first = ast.arg("@T")
        if args.posonlyargs:
            args.posonlyargs.insert(0, first)
        else:
            args.args.insert(0, first)
        if isinstance(node, ast.Lambda):
            assert final is not None
            node.body = _as_expression(out, final)
        else:
            docstring = node.body[:1] if (node.body and isinstance(node.body[0], ast.Expr)
                                           and isinstance(node.body[0].value, ast.Constant)
                                           and isinstance(node.body[0].value.value, str)) else []
            node.body = docstring + out  # (decorators stay: compiled, never run)
        return node

    def temp(self) -> str:
        self.temps += 1
        return f"@t{self.temps}"

    def tangent(self, val: _Val) -> ast.expr:
        return _zero() if val.d is None else val.d

    def _assign_boxed(self, name: str, val: _Val) -> ast.stmt:
        return ast.Assign([_store(name)], ast.Call(_helper("box"), [
            _load(_LEVEL), val.p, self.tangent(val)], []))

    # -- statements ------------------------------------------------------------------------------
    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in stmts:
            try:
                produced = self.statement(stmt)
            except _Unsupported as why:
                produced = [_stop(why, stmt)]
            for new in produced:
                out.append(ast.copy_location(new, stmt))
        return out or [ast.Pass()]

    def statement(self, stmt: ast.stmt) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Yield):
            # a generator's dual yields (item, tangent) pairs (see _dual_objects._Generator)
            val = self.expr(stmt.value.value, out) if stmt.value.value is not None else \
                _Val(ast.Constant(None), None)
            out.append(ast.Expr(ast.Yield(ast.Tuple([val.p, self.tangent(val)], ast.Load()))))
        elif isinstance(stmt, ast.Expr):
            self.expr(stmt.value, out)
        elif isinstance(stmt, ast.Assign):
            val = self.expr(stmt.value, out)
            for target in stmt.targets:
                self.assign(target, val, out)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self.assign(stmt.target, self.expr(stmt.value, out), out)
        elif isinstance(stmt, ast.AugAssign):
            self.augmented(stmt, out)
        elif isinstance(stmt, ast.Return) and self.generator:
            if stmt.value is not None:
                raise _Unsupported("a generator's return value")
            out.append(stmt)
        elif isinstance(stmt, ast.Return):
            val = self.expr(stmt.value, out) if stmt.value is not None else _Val(
                ast.Constant(None), None)
            out.append(ast.Return(ast.Tuple([val.p, self.tangent(val)], ast.Load())))
        elif isinstance(stmt, ast.If):
            test = self.truth(self.expr(stmt.test, out), out)
            out.append(ast.If(test, self.block(stmt.body), self.block(stmt.orelse)
                              if stmt.orelse else []))
        elif isinstance(stmt, ast.While):
            out.extend(self.while_loop(stmt))
        elif isinstance(stmt, ast.For):
            out.extend(self.for_loop(stmt))
        elif isinstance(stmt, ast.With):
            out.extend(self.with_block(stmt))
        elif isinstance(stmt, (ast.Pass, ast.Break, ast.Continue)):
            out.append(stmt)
        elif isinstance(stmt, ast.FunctionDef):
            if stmt.decorator_list:
                raise _Unsupported("a decorated function definition")
            self.defaults(stmt.args, out)
            _Function(stmt, self.scope).rewrite()
            out.append(stmt)
            self.assign(ast.Name(stmt.name, ast.Store()), _Val(_load(stmt.name), None), out,
                        bind=False)
        elif isinstance(stmt, ast.Raise):
            exc = self.expr(stmt.exc, out).p if stmt.exc is not None else None
            cause = self.expr(stmt.cause, out).p if stmt.cause is not None else None
            out.append(ast.Raise(exc, cause))
        elif isinstance(stmt, ast.Assert):
            checked: list[ast.stmt] = []
            test = self.truth(self.expr(stmt.test, checked), checked)
            failed: list[ast.stmt] = []
            msg = [self.expr(stmt.msg, failed).p] if stmt.msg is not None else []
            failed.append(ast.Raise(ast.Call(_load("AssertionError"), msg, []), None))
            checked.append(ast.If(ast.UnaryOp(ast.Not(), test), failed, []))
            out.append(ast.If(_load("__debug__"), checked, []))
        else:
            raise _Unsupported(f"a {type(stmt).__name__} statement")  # try, with, del...
        return out

    def augmented(self, stmt: ast.AugAssign, out: list[ast.stmt]) -> None:
        """``target op= value``: an item's or attribute's object and key evaluated once, the
        item read, the operator applied, the result written back (as Python does it)."""
        target = stmt.target
        if isinstance(target, ast.Name):
            current = self.name(ast.Name(target.id, ast.Load()), out)
            val = self.binop(stmt.op, current, self.expr(stmt.value, out), out, inplace=True)
            self.assign(target, val, out)
            return
        if isinstance(target, ast.Attribute):
            obj = self.expr(target.value, out)
            obj = self.atom(obj.p, obj.d, out)
            current = self.attribute(ast.Attribute(target.value, target.attr, ast.Load()),
                                     out, obj)
            val = self.binop(stmt.op, current, self.expr(stmt.value, out), out, inplace=True)
            self.write_attribute(obj, target.attr, val, out)
            return
        if isinstance(target, ast.Subscript):
            obj = self.expr(target.value, out)
            obj = self.atom(obj.p, obj.d, out)
            key = self.index(target.slice, out)
            key = self.atom(key, None, out).p
            current = self.item(obj, key, out)
            val = self.binop(stmt.op, current, self.expr(stmt.value, out), out, inplace=True)
            self.write_item(obj, key, val, out)
            return
        raise _Unsupported("an augmented assignment to this target")

    def write_item(self, obj: _Val, key: ast.expr, val: _Val, out: list[ast.stmt]) -> None:
        """``obj[key] = val``: into a list or dict this run created (its values boxed), or
        a stop before the write.  Directly where the key is a str or an int and the value a
        float (or without tangent); anything else through the helper."""
        slow: list[ast.stmt] = [ast.Expr(ast.Call(_helper("setitem"), [
            _load(_LEVEL), obj.p, key, val.p, self.tangent(val)], []))]
        cls = _class(obj.p)
        tests: list[ast.expr | None] = [
            ast.BoolOp(ast.Or(), [ast.Compare(cls, [ast.Is()], [_helper(kind)])
                                  for kind in ("list", "dict")]),
            _pass_expressions._plain_key_test(key)]
        stored = val.p
        if val.d is not None:
            tests += [ast.Compare(ast.Attribute(e, "__class__", ast.Load()), [ast.Is()],
                                  [_helper("float")]) for e in (val.p, val.d)]
            stored = ast.IfExp(val.d, ast.Call(_helper("Dual"), [_load(_LEVEL), val.p, val.d],
                                               []), val.p)
        tests.append(ast.Call(_helper("fresh"), [obj.p], []))
        test = _pass_expressions._and_all(tests)
        assert test is not None
        out.append(ast.If(test, [ast.Assign([ast.Subscript(obj.p, key, ast.Store())], stored)],
                          slow))

    def write_attribute(self, obj: _Val, name: str, val: _Val, out: list[ast.stmt]) -> None:
        """``obj.name = val``: on an object this run created (the value boxed), or a stop
        before the write."""
        out.append(ast.Expr(ast.Call(_helper("setattr"), [
            _load(_LEVEL), obj.p, ast.Constant(name), val.p, self.tangent(val)], [])))

    def assign(self, target: ast.expr, val: _Val, out: list[ast.stmt],
               bind: bool = True) -> None:
        if isinstance(target, ast.Name):
            name = target.id
            if name in self.scope.cells:
                out.append(self._assign_boxed(name, val) if bind else ast.Pass())
                return
            if bind:
                out.append(ast.Assign([_store(name)], val.p))
            out.append(ast.Assign([_store(_tangent_name(name))], self.tangent(val)))
            return
        if isinstance(target, (ast.Tuple, ast.List)) and not any(
                isinstance(e, ast.Starred) for e in target.elts):
            n = len(target.elts)
            tmp = self.temp()
            dtmp = _tangent_name(tmp)
            out.append(ast.Assign([_store(tmp)], val.p))
            out.append(ast.Assign([_store(dtmp)], self.tangent(val)))
            # a tuple of tangents unpacks with the value; any other value or tangent (an
            # array's, a list holding boxed values, none) becomes a tuple of values and one
            # of tangents first (unboxed; a stop for what runs Python code to iterate)
            out.append(ast.If(
                ast.Compare(ast.Attribute(_load(dtmp), "__class__", ast.Load()),
                            [ast.IsNot()], [_helper("tuple")]),
                [ast.Assign([ast.Tuple([_store(tmp), _store(dtmp)], ast.Store())],
                            ast.Call(_helper("unpackable"), [_load(_LEVEL), _load(tmp),
                                                             _load(dtmp)], []))], []))
            # the value unpacks natively (ValueError as Python raises it), the tangents as
            # a tuple of the same length
            items = [self.temp() for _ in range(n)]
            out.append(ast.Assign([ast.Tuple([_store(t) for t in items], ast.Store())],
                                  _load(tmp)))
            out.append(ast.Assign([ast.Tuple([_store(_tangent_name(t)) for t in items],
                                             ast.Store())], _load(dtmp)))
            for elt, t in zip(target.elts, items):
                self.assign(elt, _Val(_load(t), _load(_tangent_name(t))), out)
            return
        if isinstance(target, ast.Subscript) and bind:
            obj = self.expr(target.value, out)
            key = self.index(target.slice, out)
            self.write_item(obj, key, val, out)
            return
        if isinstance(target, ast.Attribute) and bind:
            self.write_attribute(self.expr(target.value, out), target.attr, val, out)
            return
        raise _Unsupported("a starred assignment target")

    def while_loop(self, stmt: ast.While) -> list[ast.stmt]:
        pre: list[ast.stmt] = []
        test = self.truth(self.expr(stmt.test, pre), pre)
        body = self.block(stmt.body)
        orelse = self.block(stmt.orelse) if stmt.orelse else []
        if not pre:
            return [ast.While(test, body, orelse)]
        if orelse:
            raise _Unsupported("while ... else with a computed condition")
        stop = ast.If(ast.UnaryOp(ast.Not(), test), [ast.Break()], [])
        return [ast.While(ast.Constant(True), pre + [stop] + body, [])]

    def with_block(self, stmt: ast.With) -> list[ast.stmt]:
        """``with m as v: body`` for a ``contextlib.contextmanager``'s manager (the runtime's
        ``enter`` stops for any other): ``v`` is the first pair its generator yields, the
        rest of the generator runs where the block ends.  A block that may leave early
        (``return``, ``break``, ``continue``) is not followed; an exception ends the run."""
        if _leaves_early(stmt.body):
            raise _Unsupported("a return, break or continue inside a with block")
        out: list[ast.stmt] = []
        finishing: list[str] = []
        for item in stmt.items:
            manager = self.expr(item.context_expr, out)
            value, rest = self.temp(), self.temp()
            out.append(ast.Assign([ast.Tuple([_store(value), _store(_tangent_name(value)),
                                              _store(rest)], ast.Store())],
                                  ast.Call(_helper("enter"), [
                                      _load(_LEVEL), manager.p,
                                      manager.d or ast.Constant(None)], [])))
            if item.optional_vars is not None:
                self.assign(item.optional_vars, _Val(_load(value),
                                                     _load(_tangent_name(value))), out)
            finishing.append(rest)
        out.extend(self.block(stmt.body))
        out.extend(ast.Expr(ast.Call(_helper("leave"), [_load(rest)], []))
                   for rest in reversed(finishing))
        return out

    def for_loop(self, stmt: ast.For) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        body, loop = self.pair_loop(stmt.iter, stmt.target, out)
        body.extend(self.block(stmt.body))
        loop.orelse = self.block(stmt.orelse) if stmt.orelse else []
        return out

    def pair_loop(self, iterable: ast.expr, target: ast.expr, out: list[ast.stmt]
                  ) -> tuple[list[ast.stmt], ast.For]:
        """``for target in iterable`` over its (item, tangent) pairs, appended to ``out`` (a
        ``for`` statement's, or a comprehension's clause): the loop, and its body, which
        begins by assigning the target."""
        source = self.expr(iterable, out)
        item = self.temp()
        pairs = self.temp()
        out.append(ast.Assign([_store(pairs)], ast.Call(_helper("pairs"), [
            _load(_LEVEL), source.p, source.d or ast.Constant(None)], [])))
        body: list[ast.stmt] = []
        self.assign(target, _Val(_load(item), _load(_tangent_name(item))), body)
        loop = ast.For(ast.Tuple([_store(item), _store(_tangent_name(item))], ast.Store()),
                       _load(pairs), body, [])
        out.append(loop)
        return body, loop

    def defaults(self, args: ast.arguments, out: list[ast.stmt]) -> None:
        """A nested function's defaults, evaluated where the function is defined: values
        with tangents are boxed into them."""
        for i, default in enumerate(args.defaults):
            val = self.expr(default, out)
            args.defaults[i] = ast.Call(_helper("box"), [_load(_LEVEL), val.p,
                                                         self.tangent(val)], []) \
                if val.d is not None else val.p
        for i, kw_default in enumerate(args.kw_defaults):
            if kw_default is not None:
                args.kw_defaults[i] = self.expr(kw_default, out).p

    # -- expressions: see _pass_expressions --------------------------------------------------------
    atom = _pass_expressions.atom
    expr = _pass_expressions.expr
    _elements = _pass_expressions._elements
    plain = _pass_expressions.plain
    name = _pass_expressions.name
    guard = _pass_expressions.guard
    binop = _pass_expressions.binop
    expanded = _pass_expressions.expanded
    unop = _pass_expressions.unop
    compare = _pass_expressions.compare
    safe = _pass_expressions.safe
    truth = _pass_expressions.truth
    boolop = _pass_expressions.boolop
    ifexp = _pass_expressions.ifexp
    subscript = _pass_expressions.subscript
    index = _pass_expressions.index
    attribute = _pass_expressions.attribute
    call = _pass_expressions.call
    arguments = _pass_expressions.arguments
    displayed_items = _pass_expressions.displayed_items
    item = _pass_expressions.item
    boxed = _pass_expressions.boxed
    append = _pass_expressions.append
    made_call = _pass_expressions.made_call
    comprehension = _pass_comprehensions.comprehension


def _stop(why: _Unsupported, where: ast.AST | None = None) -> ast.stmt:
    """The stop a construct the pass does not compile becomes, with the reason explain
    shows (and the line)."""
    reason = str(why) or "a construct the dual pass does not compile"
    line = getattr(where, "lineno", None)
    if line is not None:
        reason += f" (line {line})"
    return ast.Expr(ast.Call(_helper("deopt"), [ast.Constant(reason)], []))


def _as_expression(stmts: list[ast.stmt], final: ast.expr) -> ast.expr:
    """The statements of a lambda's dual as one expression (a lambda has no statements):
    assignments become ``:=``, ``if`` a conditional expression, and the value is ``final``."""
    return ast.Subscript(ast.Tuple([*_expressions(stmts), final], ast.Load()),
                         ast.Constant(-1), ast.Load())


def _expressions(stmts: list[ast.stmt]) -> list[ast.expr]:
    out: list[ast.expr] = []
    for stmt in stmts:
        if isinstance(stmt, ast.Assign):
            target, = stmt.targets
            if isinstance(target, ast.Name):
                out.append(ast.NamedExpr(ast.Name(target.id, ast.Store()), stmt.value))
            else:  # a tuple of names: through a temporary
                assert isinstance(target, ast.Tuple)
                tmp = "@pair"
                out.append(ast.NamedExpr(_store(tmp), stmt.value))
                for i, e in enumerate(target.elts):
                    assert isinstance(e, ast.Name)
                    out.append(ast.NamedExpr(_store(e.id), ast.Subscript(
                        _load(tmp), ast.Constant(i), ast.Load())))
        elif isinstance(stmt, ast.If):
            out.append(ast.IfExp(stmt.test, ast.Tuple(_expressions(stmt.body), ast.Load()),
                                 ast.Tuple(_expressions(stmt.orelse), ast.Load())))
        elif isinstance(stmt, ast.Expr):
            out.append(stmt.value)
        elif isinstance(stmt, ast.Pass):
            continue
        else:  # pragma: no cover - lambdas compile to the statements above only
            raise AssertionError(f"no expression form for {type(stmt).__name__}")
    return out


__all__: list[str] = []
