"""The pass of the specialised forward mode: a function's AST -> the AST of its *dual*.

The dual of ``f(x, y)`` is ``f(@T, x, y)``: ``@T`` holds the level of the ``jvp`` running it
(see ``_forward_dual``) and the tangents of the positional parameters, every local variable
``v`` has a tangent local ``@d.v``, and every ``return v`` returns ``(v, tangent)``.
Arithmetic on floats (and ints) is expanded in place -- primal and tangent, no call -- behind
a guard on the operands' types; anything else goes to a helper of ``_forward_dual`` (bound into
the dual by :func:`overdub.embed`, shown ``@overdub_ad.<helper>`` below).  Before and after,
simplified::

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
"""

from __future__ import annotations

import ast
import itertools
import operator
import threading
from typing import Any

from overdub import embed

# -- the per-site cache of direct calls ----------------------------------------------------------

# A call site in the specialised code first calls through _call; once it has called a Python
# function it remembers it and calls it directly while the same function comes.  Sites in a
# rewritten function's own body call through the context's dispatcher (which gives the dual of
# an ordinary function); sites in the functions defined inside it run natively and call duals
# (closures made by specialised code) as they are.
_SITES: list[Any] = []  # site -> the function the site calls directly, or None
_NATIVE_SITES: list[bool] = []  # site -> whether it runs natively (calls duals) or dispatched
_FILLED: list[int] = []  # sites filled during the current outermost call
_SITE_NUMBERS = itertools.count()
_SITES_LOCK = threading.Lock()


def _new_site(native: bool) -> int:
    with _SITES_LOCK:
        site = next(_SITE_NUMBERS)
        _SITES.append(None)
        _NATIVE_SITES.append(native)
    return site



# What the dual code calls and compares with, by name: ``_forward_dual`` registers its helpers
# (and the types of the guards) here when it is imported, before any function is rewritten.
HELPERS: dict[str, Any] = {"operator": operator, "sites": _SITES}


def _helper(name: str) -> ast.Name:
    """The helper ``name`` as an expression of the dual code (``overdub.embed``: bound in the
    rewritten function's closure under a name no user variable can shadow)."""
    return embed(HELPERS[name])


def _operator(fn: Any) -> ast.expr:
    """``operator.<name>``, read from the module bound in builtins (a native attribute read)."""
    return ast.Attribute(_helper("operator"), fn.__name__, ast.Load())


def _load(name: str) -> ast.Name:
    return ast.Name(name, ast.Load())


def _store(name: str) -> ast.Name:
    return ast.Name(name, ast.Store())


def _tangent_name(name: str) -> str:
    return "@d." + name


def _zero() -> ast.Constant:
    return ast.Constant(0.0)


def _pair(t: str, value: ast.expr) -> ast.stmt:
    """``t, @d.t = value``: a helper's (value, tangent)."""
    return ast.Assign([ast.Tuple([_store(t), _store(_tangent_name(t))], ast.Store())], value)


_LEVEL = "@L"
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.Pow: operator.pow, ast.Mod: operator.mod,
           ast.FloorDiv: operator.floordiv, ast.MatMult: operator.matmul,
           ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
           ast.LShift: operator.lshift, ast.RShift: operator.rshift}
_INPLACE = {operator.add: operator.iadd, operator.sub: operator.isub,
            operator.mul: operator.imul, operator.truediv: operator.itruediv,
            operator.pow: operator.ipow, operator.mod: operator.imod,
            operator.floordiv: operator.ifloordiv, operator.matmul: operator.imatmul}
_EXPANDED = (ast.Add, ast.Sub, ast.Mult, ast.Div)  # expanded in place on floats and ints
_COMPARISONS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
                ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
                ast.In: operator.contains, ast.NotIn: operator.contains}
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


class _Unsupported(Exception):
    """A construct the pass leaves to the general mode (the code deopts where it is)."""


class _Val:
    """A compiled expression: ``p`` (an atom: a name or a constant) and its tangent ``d`` (an
    atom, or None: statically zero); ``boolean``: ``p`` is a comparison's result."""

    __slots__ = ("p", "d", "boolean")

    def __init__(self, p: ast.expr, d: ast.expr | None, boolean: bool = False) -> None:
        self.p, self.d, self.boolean = p, d, boolean


_FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


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


def _captured(body: list[ast.AST]) -> set[str]:
    """Names used inside the nested functions, lambdas, classes and comprehensions of
    ``body``: the locals among them live in cells (an over-approximation costs only a box)."""
    names: set[str] = set()
    pending = [(node, False) for node in body]
    while pending:
        node, inside = pending.pop()
        if inside and isinstance(node, ast.Name):
            names.add(node.id)
        nested = inside or isinstance(node, (*_SCOPES, ast.ListComp, ast.SetComp, ast.DictComp,
                                             ast.GeneratorExp))
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
        self.scope = _Scope(node, enclosing)
        self.temps = 0
        self.native = native

    # -- the function ------------------------------------------------------------------------
    def rewrite(self) -> _FunctionNode:
        node = self.node
        args = node.args
        lam = isinstance(node, ast.Lambda)
        body_nodes: list[ast.AST] = [node.body] if isinstance(node, ast.Lambda) else list(
            node.body)
        unsupported = (self.scope.declared or args.vararg or args.kwarg or args.kwonlyargs
                       or any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await))
                              for stmt in body_nodes for n in _own_nodes(stmt))
                       or isinstance(node, ast.AsyncFunctionDef))
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
                raise _Unsupported
            if isinstance(node, ast.Lambda):
                val = self.expr(node.body, out)
                final = ast.Tuple([val.p, self.tangent(val)], ast.Load())
            else:
                out.extend(self.block(node.body))
                out.append(ast.Return(ast.Tuple([ast.Constant(None), _zero()], ast.Load())))
        except _Unsupported:
            out.append(ast.Expr(ast.Call(_helper("deopt"), [], [])))
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
            except _Unsupported:
                produced = [ast.Expr(ast.Call(_helper("deopt"), [], []))]
            for new in produced:
                out.append(ast.copy_location(new, stmt))
        return out or [ast.Pass()]

    def statement(self, stmt: ast.stmt) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        if isinstance(stmt, ast.Expr):
            self.expr(stmt.value, out)
        elif isinstance(stmt, ast.Assign):
            val = self.expr(stmt.value, out)
            for target in stmt.targets:
                self.assign(target, val, out)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                if not isinstance(stmt.target, ast.Name):
                    raise _Unsupported
                self.assign(stmt.target, self.expr(stmt.value, out), out)
        elif isinstance(stmt, ast.AugAssign):
            if not isinstance(stmt.target, ast.Name):
                raise _Unsupported  # an item or attribute written
            current = self.name(ast.Name(stmt.target.id, ast.Load()), out)
            val = self.binop(stmt.op, current, self.expr(stmt.value, out), out, inplace=True)
            self.assign(stmt.target, val, out)
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
        elif isinstance(stmt, (ast.Pass, ast.Break, ast.Continue)):
            out.append(stmt)
        elif isinstance(stmt, ast.FunctionDef):
            if stmt.decorator_list:
                raise _Unsupported
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
            raise _Unsupported  # try, with, del, import, class, global, match, async...
        return out

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
            # the value unpacks natively (ValueError as Python raises it); its tangent is a
            # tuple of the same length, or 0.0 for values without tangents
            items = [self.temp() for _ in range(n)]
            out.append(ast.Assign([ast.Tuple([_store(t) for t in items], ast.Store())],
                                  _load(tmp)))
            if val.d is None:
                dvals: list[ast.expr | None] = [None] * n
                out.append(ast.Assign([_store(dtmp)], _zero()))
            else:
                out.append(ast.Assign([_store(dtmp)], val.d))
                dvals = [_load(_tangent_name(t)) for t in items]
                out.append(ast.If(
                    ast.Compare(ast.Attribute(_load(dtmp), "__class__", ast.Load()),
                                [ast.Is()], [_helper("tuple")]),
                    [ast.Assign([ast.Tuple([_store(_tangent_name(t)) for t in items],
                                           ast.Store())], _load(dtmp))],
                    [ast.Assign([_store(_tangent_name(t))], _zero()) for t in items]))
            # items read back through unbox: an untracked container may hold boxed values
            for t, d in zip(items, dvals):
                if d is None:
                    out.append(ast.Assign([ast.Tuple([_store(t), _store(_tangent_name(t))],
                                                     ast.Store())],
                                          ast.Call(_helper("unbox"), [_load(_LEVEL), _load(t)],
                                                   [])))
            for elt, t in zip(target.elts, items):
                self.assign(elt, _Val(_load(t), _load(_tangent_name(t))), out)
            return
        raise _Unsupported  # items, attributes, starred targets

    def while_loop(self, stmt: ast.While) -> list[ast.stmt]:
        pre: list[ast.stmt] = []
        test = self.truth(self.expr(stmt.test, pre), pre)
        body = self.block(stmt.body)
        orelse = self.block(stmt.orelse) if stmt.orelse else []
        if not pre:
            return [ast.While(test, body, orelse)]
        if orelse:
            raise _Unsupported
        stop = ast.If(ast.UnaryOp(ast.Not(), test), [ast.Break()], [])
        return [ast.While(ast.Constant(True), pre + [stop] + body, [])]

    def for_loop(self, stmt: ast.For) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        iterable = self.expr(stmt.iter, out)
        item = self.temp()
        pairs = self.temp()
        out.append(ast.Assign([_store(pairs)], ast.Call(_helper("pairs"), [
            _load(_LEVEL), iterable.p, iterable.d or ast.Constant(None)], [])))
        loop_body: list[ast.stmt] = []
        self.assign(stmt.target, _Val(_load(item), _load(_tangent_name(item))), loop_body)
        loop_body.extend(self.block(stmt.body))
        target = ast.Tuple([_store(item), _store(_tangent_name(item))], ast.Store())
        out.append(ast.For(target, _load(pairs), loop_body,
                           self.block(stmt.orelse) if stmt.orelse else []))
        return out

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

    # -- expressions -----------------------------------------------------------------------------
    def atom(self, value: ast.expr, d: ast.expr | None, out: list[ast.stmt]) -> _Val:
        """Bind ``value`` to a temporary (and ``d`` to its tangent)."""
        t = self.temp()
        out.append(ast.Assign([_store(t)], value))
        if d is None:
            return _Val(_load(t), None)
        out.append(ast.Assign([_store(_tangent_name(t))], d))
        return _Val(_load(t), _load(_tangent_name(t)))

    def expr(self, node: ast.expr, out: list[ast.stmt]) -> _Val:
        if isinstance(node, ast.Constant):
            return _Val(node, None)
        if isinstance(node, ast.Name):
            return self.name(node, out)
        if isinstance(node, ast.BinOp):
            left = self.expr(node.left, out)
            return self.binop(node.op, left, self.expr(node.right, out), out)
        if isinstance(node, ast.UnaryOp):
            return self.unop(node, out)
        if isinstance(node, ast.Call):
            return self.call(node, out)
        if isinstance(node, ast.Subscript):
            return self.subscript(node, out)
        if isinstance(node, ast.Attribute):
            return self.attribute(node, out)
        if isinstance(node, ast.Compare):
            return self.compare(node, out)
        if isinstance(node, ast.BoolOp):
            return self.boolop(node, out)
        if isinstance(node, ast.IfExp):
            return self.ifexp(node, out)
        if isinstance(node, ast.Tuple):
            vals = [self.expr(e, out) for e in self._elements(node)]
            if all(v.d is None for v in vals):
                return self.atom(ast.Tuple([v.p for v in vals], ast.Load()), None, out)
            return self.atom(ast.Tuple([v.p for v in vals], ast.Load()),
                             ast.Tuple([self.tangent(v) for v in vals], ast.Load()), out)
        if isinstance(node, (ast.List, ast.Set)):
            vals = [self.expr(e, out) for e in self._elements(node)]
            self.plain(vals, out)
            built: ast.expr = ast.List([v.p for v in vals], ast.Load()) \
                if isinstance(node, ast.List) else ast.Set([v.p for v in vals])
            return self.atom(built, None, out)
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise _Unsupported  # {**d}
            vals = []
            for k, v in zip(node.keys, node.values):
                assert k is not None
                vals.append(self.expr(k, out))
                vals.append(self.expr(v, out))
            self.plain(vals, out)
            return self.atom(ast.Dict([v.p for v in vals[::2]], [v.p for v in vals[1::2]]),
                             None, out)
        if isinstance(node, ast.NamedExpr):
            val = self.expr(node.value, out)
            self.assign(ast.Name(node.target.id, ast.Store()), val, out)
            return self.name(ast.Name(node.target.id, ast.Load()), out)
        if isinstance(node, ast.Lambda):
            self.defaults(node.args, out)
            _Function(node, self.scope).rewrite()
            return self.atom(node, None, out)
        if isinstance(node, ast.JoinedStr):
            parts: list[ast.expr] = []
            for part in node.values:
                if isinstance(part, ast.FormattedValue):
                    if part.format_spec is not None:
                        raise _Unsupported
                    part.value = self.expr(part.value, out).p
                parts.append(part)
            return self.atom(ast.JoinedStr(parts), None, out)
        raise _Unsupported  # comprehensions, generators, starred, await, yield, slices

    def _elements(self, node: ast.Tuple | ast.List | ast.Set) -> list[ast.expr]:
        if any(isinstance(e, ast.Starred) for e in node.elts):
            raise _Unsupported
        return node.elts

    def plain(self, vals: list[_Val], out: list[ast.stmt]) -> None:
        """Values going into a list, set or dict must carry no tangent (checked at run time
        where not known statically)."""
        dynamic = [v.d for v in vals if v.d is not None]
        if dynamic:
            out.append(ast.Expr(ast.Call(_helper("plain"), dynamic, [])))

    def name(self, node: ast.Name, out: list[ast.stmt]) -> _Val:
        name = node.id
        scope = self.scope
        if name in scope.cells or name in scope.outer:
            # a cell: a boxed value where it has a tangent (a dual of this level unboxed here,
            # a tuple by the helper; another level's dual is a value like a number)
            t = self.temp()
            dt = _tangent_name(t)
            cls = ast.Attribute(_load(t), "__class__", ast.Load())
            out.append(ast.Assign([_store(t)], _load(name)))
            out.append(ast.If(
                ast.BoolOp(ast.And(), [
                    ast.Compare(cls, [ast.Is()], [_helper("Dual")]),
                    ast.Compare(ast.Attribute(_load(t), "L", ast.Load()), [ast.Is()],
                                [_load(_LEVEL)])]),
                [ast.Assign([_store(dt)], ast.Attribute(_load(t), "t", ast.Load())),
                 ast.Assign([_store(t)], ast.Attribute(_load(t), "v", ast.Load()))],
                [ast.If(ast.Compare(ast.Attribute(_load(t), "__class__", ast.Load()),
                                    [ast.Is()], [_helper("tuple")]),
                        [_pair(t, ast.Call(_helper("unbox"), [_load(_LEVEL), _load(t)], []))],
                        [ast.Assign([_store(dt)], _zero())])]))
            return _Val(_load(t), _load(dt))
        if name in scope.locals:
            if name in scope.walrus:  # read now: a later `:=` in the expression rebinds it
                return self.atom(_load(name), _load(_tangent_name(name)), out)
            return _Val(_load(name), _load(_tangent_name(name)))
        return _Val(_load(name), None)  # a global or a builtin: no tangent

    def guard(self, vals: list[_Val]) -> ast.expr | None:
        """``a.__class__ is float or ... is int`` for each operand not known to be a float."""
        tests: list[ast.expr] = []
        for v in vals:
            if isinstance(v.p, ast.Constant):
                if type(v.p.value) not in (float, int) or type(v.p.value) is bool:
                    return ast.Constant(False)
                continue
            cls = ast.Attribute(v.p, "__class__", ast.Load())
            tests.append(ast.BoolOp(ast.Or(), [
                ast.Compare(cls, [ast.Is()], [_helper("float")]),
                ast.Compare(ast.Attribute(v.p, "__class__", ast.Load()), [ast.Is()],
                            [_helper("int")])]))
        if not tests:
            return None
        return tests[0] if len(tests) == 1 else ast.BoolOp(ast.And(), tests)

    def binop(self, op: ast.operator, a: _Val, b: _Val, out: list[ast.stmt],
              inplace: bool = False) -> _Val:
        fn = _BINOPS[type(op)]
        if inplace:
            if fn not in _INPLACE:
                raise _Unsupported
            fn = _INPLACE[fn]
        t = self.temp()
        dt = _tangent_name(t)
        slow = [_pair(t, ast.Call(_helper("binop"), [
            _load(_LEVEL), _operator(fn), a.p, a.d or ast.Constant(None), b.p,
            b.d or ast.Constant(None)], []))]
        fast = self.expanded(op, a, b, t) if isinstance(op, _EXPANDED) or (
            isinstance(op, ast.Pow) and self._literal_exponent(b)) else None
        if fast is None:
            out.extend(slow)
        else:
            guard = self.guard([a, b])
            if guard is None:
                out.extend(fast)
            else:
                out.append(ast.If(guard, fast, slow))
        return _Val(_load(t), _load(dt))

    @staticmethod
    def _literal_exponent(b: _Val) -> bool:
        """``x ** c`` written out for a literal ``c >= 1``; below 1 the slope at ``x == 0`` is
        infinite (the rule's value, with its own derivative), which the helper applies."""
        return (isinstance(b.p, ast.Constant) and isinstance(b.p.value, (int, float))
                and type(b.p.value) is not bool and b.p.value >= 1)

    def expanded(self, op: ast.operator, a: _Val, b: _Val, t: str) -> list[ast.stmt]:
        """``t = a op b`` and its tangent, for floats and ints: the rule tables' expressions
        (``_TANGENTS``), terms of statically zero tangents left out."""
        out: list[ast.stmt] = [ast.Assign([_store(t)], ast.BinOp(a.p, op, b.p))]
        da, db = a.d, b.d
        kind = type(op)
        parts: list[ast.expr] = []
        if kind is ast.Pow:
            # d(x**c) = dx * (c * x**(c - 1)), the rule's _pow_dx for a constant c != 0
            assert isinstance(b.p, ast.Constant) and isinstance(b.p.value, (int, float))
            c = b.p.value
            if da is not None:
                parts.append(ast.BinOp(da, ast.Mult(), ast.BinOp(
                    ast.Constant(c), ast.Mult(), ast.BinOp(a.p, ast.Pow(),
                                                           ast.Constant(c - 1)))))
        elif kind is ast.Add:
            parts = [d for d in (da, db) if d is not None]
        elif kind is ast.Sub:
            if da is not None:
                parts.append(da)
            if db is not None:
                parts.append(ast.UnaryOp(ast.USub(), db) if da is None else db)
        elif kind is ast.Mult:
            if da is not None:
                parts.append(ast.BinOp(da, ast.Mult(), b.p))
            if db is not None:
                parts.append(ast.BinOp(db, ast.Mult(), a.p))
        else:  # Div
            if da is not None:
                parts.append(ast.BinOp(da, ast.Mult(), ast.BinOp(ast.Constant(1.0), ast.Div(),
                                                                 b.p)))
            if db is not None:
                parts.append(ast.BinOp(db, ast.Mult(), ast.BinOp(ast.UnaryOp(
                    ast.USub(), _load(t)), ast.Div(), b.p)))
        if not parts:
            tangent: ast.expr = _zero()
        elif len(parts) == 1:
            tangent = parts[0]
        else:
            joiner = ast.Sub() if kind is ast.Sub else ast.Add()
            tangent = ast.BinOp(parts[0], joiner, parts[1])
        out.append(ast.Assign([_store(_tangent_name(t))], tangent))
        return out

    def unop(self, node: ast.UnaryOp, out: list[ast.stmt]) -> _Val:
        a = self.expr(node.operand, out)
        if isinstance(node.op, ast.Not):
            val = self.atom(ast.UnaryOp(ast.Not(), self.truth(a, out)), None, out)
            val.boolean = True
            return val
        t = self.temp()
        dt = _tangent_name(t)
        fn = {ast.USub: operator.neg, ast.UAdd: operator.pos,
              ast.Invert: operator.invert}[type(node.op)]
        slow = [_pair(t, ast.Call(_helper("unop"), [
            _load(_LEVEL), _operator(fn), a.p, a.d or ast.Constant(None)], []))]
        if isinstance(node.op, ast.Invert):
            out.extend(slow)
            return _Val(_load(t), _load(dt))
        fast: list[ast.stmt] = [
            ast.Assign([_store(t)], ast.UnaryOp(node.op, a.p)),
            ast.Assign([_store(dt)], _zero() if a.d is None else ast.UnaryOp(node.op, a.d))]
        guard = self.guard([a])
        if guard is None:
            out.extend(fast)
        else:
            out.append(ast.If(guard, fast, slow))
        return _Val(_load(t), _load(dt))

    def compare(self, node: ast.Compare, out: list[ast.stmt]) -> _Val:
        """Comparisons (chains short-circuit, each operand evaluated once): native where both
        operands are of types whose comparison runs no Python code, else a helper."""
        result = self.temp()
        left = self.expr(node.left, out)
        block = out
        for i, (op, comparator) in enumerate(zip(node.ops, node.comparators)):
            right = self.expr(comparator, block)
            native = ast.Compare(left.p, [op], [right.p])
            if isinstance(op, (ast.Is, ast.IsNot)):
                block.append(ast.Assign([_store(result)], native))
            else:
                fn = _COMPARISONS[type(op)]
                helper: ast.expr = ast.Call(_helper("compare"), [_operator(fn), left.p, right.p]
                                  if fn is not operator.contains else
                                  [_operator(fn), right.p, left.p], [])
                if isinstance(op, ast.NotIn):
                    helper = ast.UnaryOp(ast.Not(), helper)
                guard = self.safe([left, right]) if fn is not operator.contains else None
                if guard is None and fn is not operator.contains:
                    block.append(ast.Assign([_store(result)], native))
                elif guard is None:
                    block.append(ast.Assign([_store(result)], helper))
                else:
                    block.append(ast.If(guard, [ast.Assign([_store(result)], native)],
                                        [ast.Assign([_store(result)], helper)]))
            if i < len(node.ops) - 1:
                inner: list[ast.stmt] = []
                block.append(ast.If(_load(result), inner, []))
                block = inner
            left = right
        return _Val(_load(result), None, boolean=True)

    def safe(self, vals: list[_Val]) -> ast.expr | None:
        """``a.__class__ in @safe and ...`` for the operands not known to be safe."""
        tests: list[ast.expr] = [
            ast.Compare(ast.Attribute(v.p, "__class__", ast.Load()), [ast.In()],
                        [_helper("safe")])
            for v in vals if not (v.boolean or isinstance(v.p, ast.Constant))]
        if not tests:
            return None
        return tests[0] if len(tests) == 1 else ast.BoolOp(ast.And(), tests)

    def truth(self, val: _Val, out: list[ast.stmt]) -> ast.expr:
        """``val.p`` for a truth test, which must not run a user class's ``__bool__``."""
        if not (val.boolean or isinstance(val.p, ast.Constant)):
            out.append(ast.If(ast.Compare(ast.Attribute(val.p, "__class__", ast.Load()),
                                          [ast.NotIn()], [_helper("truthful")]),
                              [ast.Expr(ast.Call(_helper("truth"), [val.p], []))], []))
        return val.p

    def boolop(self, node: ast.BoolOp, out: list[ast.stmt]) -> _Val:
        t = self.temp()
        dt = _tangent_name(t)
        block = out
        for i, value in enumerate(node.values):
            val = self.expr(value, block)
            block.append(ast.Assign([_store(t)], val.p))
            block.append(ast.Assign([_store(dt)], self.tangent(val)))
            if i < len(node.values) - 1:
                inner: list[ast.stmt] = []
                truth = self.truth(val, block)
                test: ast.expr = truth if isinstance(node.op, ast.And) else ast.UnaryOp(
                    ast.Not(), truth)
                block.append(ast.If(test, inner, []))
                block = inner
        return _Val(_load(t), _load(dt))

    def ifexp(self, node: ast.IfExp, out: list[ast.stmt]) -> _Val:
        test = self.expr(node.test, out)
        test.p = self.truth(test, out)
        t = self.temp()
        dt = _tangent_name(t)
        branches = []
        for value in (node.body, node.orelse):
            block: list[ast.stmt] = []
            val = self.expr(value, block)
            block.append(ast.Assign([_store(t)], val.p))
            block.append(ast.Assign([_store(dt)], self.tangent(val)))
            branches.append(block)
        out.append(ast.If(test.p, branches[0], branches[1]))
        return _Val(_load(t), _load(dt))

    def subscript(self, node: ast.Subscript, out: list[ast.stmt]) -> _Val:
        obj = self.expr(node.value, out)
        key = self.index(node.slice, out)
        if not isinstance(key, (ast.Name, ast.Constant)):  # a slice: built once, used twice
            key = self.atom(key, None, out).p
        t = self.temp()
        dt = _tangent_name(t)
        slow = ast.Assign([ast.Tuple([_store(t), _store(dt)], ast.Store())], ast.Call(
            _helper("getitem"), [_load(_LEVEL), obj.p, obj.d or ast.Constant(None), key], []))
        if obj.d is None:
            out.append(slow)
        else:
            fast: list[ast.stmt] = [
                ast.Assign([_store(t)], ast.Subscript(obj.p, key, ast.Load())),
                ast.Assign([_store(dt)], ast.Subscript(obj.d, key, ast.Load()))]
            out.append(ast.If(ast.Compare(ast.Attribute(obj.d, "__class__", ast.Load()),
                                          [ast.Is()], [_helper("tuple")]), fast, [slow]))
        return _Val(_load(t), _load(dt))

    def index(self, node: ast.expr, out: list[ast.stmt]) -> ast.expr:
        if isinstance(node, ast.Slice):
            parts = [None if p is None else self.expr(p, out).p
                     for p in (node.lower, node.upper, node.step)]
            return ast.Call(_load("slice"), [ast.Constant(None) if p is None else p
                                             for p in parts], [])
        if isinstance(node, ast.Tuple) and any(isinstance(e, ast.Slice) for e in node.elts):
            return ast.Tuple([self.index(e, out) for e in node.elts], ast.Load())
        return self.expr(node, out).p

    def attribute(self, node: ast.Attribute, out: list[ast.stmt]) -> _Val:
        obj = self.expr(node.value, out)
        t = self.temp()
        dt = _tangent_name(t)
        fast: list[ast.stmt] = [
            ast.Assign([_store(t)], ast.Attribute(obj.p, node.attr, ast.Load())),
            ast.Assign([_store(dt)], _zero())]
        slow = [_pair(t, ast.Call(_helper("getattr"), [
            _load(_LEVEL), obj.p, obj.d or ast.Constant(None), ast.Constant(node.attr)], []))]
        out.append(ast.If(ast.Compare(ast.Attribute(obj.p, "__class__", ast.Load()), [ast.Is()],
                                      [_helper("Module")]), fast, slow))
        return _Val(_load(t), _load(dt))

    def call(self, node: ast.Call, out: list[ast.stmt]) -> _Val:
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("super", "locals", "vars", "dir",
                                                      "globals", "eval", "exec",
                                                      "breakpoint"):
            raise _Unsupported  # they look at the calling frame
        f = self.expr(func, out)
        if any(isinstance(a, ast.Starred) for a in node.args) or any(
                k.arg is None for k in node.keywords):
            raise _Unsupported
        args = [self.expr(a, out) for a in node.args]
        kwargs = [(k.arg, self.expr(k.value, out)) for k in node.keywords]
        t = self.temp()
        dt = _tangent_name(t)
        site = _new_site(self.native) if not kwargs else None
        result = ast.Tuple([_store(t), _store(dt)], ast.Store())
        slow = ast.Assign([result], ast.Call(_helper("call"), [
            _load(_LEVEL), ast.Constant(site), f.p,
            ast.Tuple([a.p for a in args], ast.Load()),
            ast.Tuple([a.d or ast.Constant(None) for a in args], ast.Load()),
            ast.Dict([ast.Constant(k) for k, _ in kwargs], [v.p for _, v in kwargs])
            if kwargs else ast.Constant(None),
            ast.Dict([ast.Constant(k) for k, _ in kwargs],
                     [v.d or ast.Constant(None) for _, v in kwargs])
            if kwargs else ast.Constant(None)], []))
        if site is None:
            out.append(slow)
        else:
            # the function this site called last, if it has a dual: called directly
            cached = ast.Subscript(_helper("sites"), ast.Constant(site), ast.Load())
            direct = ast.Assign([ast.Tuple([_store(t), _store(dt)], ast.Store())], ast.Call(
                f.p, [ast.Tuple([_load(_LEVEL)] + [self.tangent(a) for a in args], ast.Load()),
                      *[a.p for a in args]], []))
            out.append(ast.If(ast.Compare(f.p, [ast.Is()], [cached]), [direct], [slow]))
        return _Val(_load(t), _load(dt))




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
