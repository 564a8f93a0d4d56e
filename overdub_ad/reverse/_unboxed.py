"""Which arithmetic results of a specialised function need no box (:mod:`._specialise`).

Each arithmetic region of the generated code computes its value natively and, to hand it on,
wraps it with its tape node in a ``Tagged`` (the box: some 200 ns, a third of a region's cost
on an ODE step).  A region that reads a local the straight-line code before it assigned reads
the value and node the compiler still knows (``_Compiler.known``), never the box.  So a local
whose every read is such a read needs no box at all: the intermediate stages of an RK4 step
(``k1x``, ``x2``...) are made and consumed within the loop body and never read otherwise.

A local qualifies when all its uses lie in one *run* of simple statements (assignments to
names, expression statements, returns: no block, no comprehension, no ``and``/``or``/``if``
expression, whose code the compiler emits apart), the first of them, in the order Python
runs them, assigns it (so a loop's next pass, or the code after the run, never reads a value
of an earlier pass), and every read is an operand of an arithmetic operation (a leaf of a
region).  It is no parameter, no cell, and never the target of ``+=``.  Then the result of a
region assigned to it directly is left unboxed; where a region reading it must take the
general path after all (another operand is an array), the compiler boxes it first.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

#: expressions whose code the compiler emits apart from the statement's straight-line code
#: (the values it knows are forgotten there): a statement holding one ends a run
_APART = (ast.BoolOp, ast.IfExp, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
          ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)


def unboxed(body: list[ast.stmt], candidates: set[str], arith: tuple[type, ...],
            unary: tuple[type, ...]) -> tuple[set[str], set[int]]:
    """The locals of ``body`` that need no box (see the module docstring), and the ids of the
    arithmetic expressions (``ast.BinOp``/``ast.UnaryOp`` of the operators ``arith``/
    ``unary``) whose value is assigned directly to one; ``candidates``: the function's locals
    that are neither parameters nor cells."""
    uses: dict[str, list[tuple[int, bool, bool]]] = {}  # name -> (run, is a store, a leaf)
    runs: list[list[ast.stmt]] = []
    for run in _runs(body):
        runs.append(run)
        for stmt in run:
            for name, store, leaf in _uses(stmt, arith, unary):
                uses.setdefault(name, []).append((len(runs), store, leaf))
    for part in _outside_runs(body):
        for node in ast.walk(part):
            if isinstance(node, ast.Name):
                uses.setdefault(node.id, []).append((0, False, False))  # (run 0: none)
    qualified = {name for name, found in uses.items()
                 if name in candidates and found[0][1] and found[0][0] != 0
                 and all(run == found[0][0] and (store or leaf) for run, store, leaf in found)}
    out: set[int] = set()
    for run in runs:
        for stmt in run:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                # (a = b = x * y: one value for both names, boxed unless both need none)
                out.update(_assigned(stmt.targets[0], stmt.value, qualified, arith, unary))
    return qualified, out


def _runs(body: list[ast.stmt]) -> Iterator[list[ast.stmt]]:
    """The runs of simple statements of ``body`` and of the blocks inside it."""
    run: list[ast.stmt] = []
    for stmt in body:
        if _simple(stmt):
            run.append(stmt)
            continue
        if run:
            yield run
            run = []
        for field in ("body", "orelse"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt) and \
                    not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef,
                                          ast.ClassDef)):
                yield from _runs(inner)
    if run:
        yield run


def _outside_runs(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """What of ``body`` is in no run: the statements that are not simple (their headers, and
    whole for a nested def or class), the blocks' own runs left out."""
    for stmt in body:
        if _simple(stmt):
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield stmt
            continue
        for field, value in ast.iter_fields(stmt):
            if field in ("body", "orelse") and isinstance(value, list) and value and \
                    isinstance(value[0], ast.stmt):
                yield from _outside_runs(value)
            elif isinstance(value, ast.AST):
                yield value
            elif isinstance(value, list):
                yield from (v for v in value if isinstance(v, ast.AST))


def _simple(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Assign):
        if not all(isinstance(t, ast.Name) or (isinstance(t, (ast.Tuple, ast.List)) and all(
                isinstance(e, ast.Name) for e in t.elts)) for t in stmt.targets):
            return False
    elif not isinstance(stmt, (ast.Expr, ast.Return, ast.Pass)):
        return False
    return not any(isinstance(node, _APART) for node in ast.walk(stmt))


def _uses(stmt: ast.stmt, arith: tuple[type, ...], unary: tuple[type, ...]
          ) -> Iterator[tuple[str, bool, bool]]:
    """``stmt``'s names in the order Python reads and binds them: (name, a store, a read
    that is an operand of an arithmetic operation)."""
    if isinstance(stmt, ast.Assign):
        yield from _reads(stmt.value, arith, unary)
        for target in stmt.targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name):
                    yield node.id, True, False
    elif isinstance(stmt, (ast.Expr, ast.Return)) and stmt.value is not None:
        yield from _reads(stmt.value, arith, unary)


def _reads(expr: ast.expr, arith: tuple[type, ...], unary: tuple[type, ...]
           ) -> Iterator[tuple[str, bool, bool]]:
    operands = {id(operand) for node in ast.walk(expr) for operand in (
        (node.left, node.right) if isinstance(node, ast.BinOp) and isinstance(node.op, arith)
        else (node.operand,) if isinstance(node, ast.UnaryOp) and isinstance(node.op, unary)
        else ())}
    for node in ast.walk(expr):
        if isinstance(node, ast.Name):
            yield node.id, False, id(node) in operands


def _assigned(target: ast.expr, value: ast.expr, qualified: set[str],
              arith: tuple[type, ...], unary: tuple[type, ...]) -> Iterator[int]:
    """The arithmetic expressions of ``value`` that ``target`` binds to qualified names."""
    if isinstance(target, ast.Name):
        if target.id in qualified and _arithmetic(value, arith, unary):
            yield id(value)
    elif isinstance(target, (ast.Tuple, ast.List)) and \
            isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
        for element, item in zip(target.elts, value.elts):
            yield from _assigned(element, item, qualified, arith, unary)


def _arithmetic(value: ast.expr, arith: tuple[type, ...], unary: tuple[type, ...]) -> bool:
    return (isinstance(value, ast.BinOp) and isinstance(value.op, arith)) or \
        (isinstance(value, ast.UnaryOp) and isinstance(value.op, unary))
