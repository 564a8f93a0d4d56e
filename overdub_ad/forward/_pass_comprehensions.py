"""Comprehensions in the dual: compiled as loops in the enclosing function.

A comprehension has a scope of its own: its targets are not the function's variables.  Before
the pass reads a function's scope, :func:`rename` gives every comprehension's targets names
of their own (``@c1.x``), in its element, its conditions and the iterables after the first
(the first is evaluated where the comprehension is, as Python does); then
:func:`comprehension` compiles it as nested ``for`` loops that fill a new list, set or dict,
created in this run (so that values with tangents go into it boxed).  A generator expression
is compiled so only as the one argument of a builtin that consumes it whole (``tuple``,
``sum``, ``min``...), where a list holds the same items in the same order; checked where the
call runs, before the items are computed.  What the loops cannot follow -- ``:=`` or a lambda
inside (they see the comprehension's scope), ``async`` -- is a stop.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ._pass_common import _helper, _load, _store, _Unsupported, _Val

if TYPE_CHECKING:
    from ._pass import _Function

_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SCOPED = (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)


def rename(body: Iterable[ast.AST]) -> None:
    """Give the targets of every comprehension in ``body`` (nested functions excluded) names
    no other scope uses; innermost comprehensions first, so an inner target that shadows an
    outer one keeps its own name."""
    counter = itertools.count(1)

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return  # (their own pass)
        for child in ast.iter_child_nodes(node):
            visit(child)
        if isinstance(node, _COMPREHENSIONS) and not any(
                isinstance(n, _SCOPED) for n in ast.walk(node)):
            n = next(counter)
            names: dict[str, str] = {}
            for gen in node.generators:
                for target in ast.walk(gen.target):
                    if isinstance(target, ast.Name):
                        names[target.id] = f"@c{n}.{target.id}"
            parts: list[ast.AST] = [g.target for g in node.generators]
            parts += [cond for g in node.generators for cond in g.ifs]
            parts += [g.iter for g in node.generators[1:]]
            parts += [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            for part in parts:
                for name in ast.walk(part):
                    if isinstance(name, ast.Name) and name.id in names:
                        name.id = names[name.id]

    for stmt in body:
        visit(stmt)


def comprehension(self: _Function, node: Any, out: list[ast.stmt]) -> _Val:
    """A list, set or dict comprehension (or a consumed generator expression, as a list):
    a new container, created in this run, filled by nested loops."""
    if isinstance(self.node, ast.Lambda):
        raise _Unsupported("a comprehension in a lambda")
    if any(isinstance(n, _SCOPED) for n in ast.walk(node)) or any(
            g.is_async for g in node.generators):
        raise _Unsupported("a comprehension with :=, a lambda or async inside")
    kind = {ast.SetComp: "set", ast.DictComp: "dict"}.get(type(node), "list")
    result = self.temp()
    out.append(ast.Assign([_store(result)], ast.Call(_helper("new"), [_helper(kind)], [])))

    def innermost(block: list[ast.stmt]) -> None:
        if isinstance(node, ast.DictComp):
            key = self.expr(node.key, block)
            value = self.expr(node.value, block)
            self.plain([key], block)
            block.append(ast.Assign([ast.Subscript(_load(result), key.p, ast.Store())],
                                    self.boxed(value)))
            return
        value = self.expr(node.elt, block)
        if kind == "set":
            self.plain([value], block)
        # (the new list's or set's own method, called directly: ``list.append(result, v)``)
        method = "add" if kind == "set" else "append"
        block.append(ast.Expr(ast.Call(_helper(method), [_load(result), self.boxed(value)],
                                       [])))

    out.extend(_loops(self, node.generators, innermost))
    return _Val(_load(result), None)


def _loops(self: _Function, generators: list[ast.comprehension], innermost: Any
           ) -> list[ast.stmt]:
    gen = generators[0]
    out: list[ast.stmt] = []
    block, _ = self.pair_loop(gen.iter, gen.target, out)
    for cond in gen.ifs:
        test = self.truth(self.expr(cond, block), block)
        inner: list[ast.stmt] = []
        block.append(ast.If(test, inner, []))
        block = inner
    if len(generators) > 1:
        block.extend(_loops(self, generators[1:], innermost))
    else:
        innermost(block)
    if not block:
        block.append(ast.Pass())
    return out
