"""Comprehensions and generator expressions in the reverse scalar compiler (:mod:`._specialise`).

Left to the core, ``[s + h * k for s, k in zip(state, k1)]`` would send every operator of a
helper through the context, one tape entry each; compiled here, its arithmetic is regions like
the function's own.  Python's semantics are kept:

- a list, set or dict comprehension is a loop of the specialised code that appends to a new
  container; its variables are renamed to hidden names (the comprehension's own scope: none of
  the function's variables is rebound, and none of the comprehension's is seen after it);
- the first iterable is evaluated, and iterated through the context, where the comprehension
  stands; the other iterables and the conditions in the loops, in order; the element last (a
  dict's key before its value);
- a generator expression is a generator function defined in the specialised code, given the
  first iterable's iterator and returned unstarted: lazy as Python's, its arithmetic runs
  when whoever consumes it (``sum``, ``tuple``, a loop) asks for the next item.
"""

from __future__ import annotations

import ast
import copy
from typing import TYPE_CHECKING

from ._regions import _Unsupported

if TYPE_CHECKING:  # (the compiler imports this module)
    from ._specialise import _Compiler

_Comprehension = ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp


def compile_comprehension(c: _Compiler, node: _Comprehension, origin: ast.AST) -> str:
    """The value of comprehension ``node``, computed by code emitted through compiler ``c``:
    the name of the new container, or of the generator."""
    if any(g.is_async for g in node.generators):
        raise _Unsupported("an asynchronous comprehension")
    first = node.generators[0].iter
    source = c.hold(c.iterable(c.expr(first, origin), first), origin)
    renamed = _renamed(c, node)
    indent = c.indent
    if isinstance(renamed, ast.GeneratorExp):
        generator, start = c.fresh("g"), c.fresh("it")
        c.emit(f"def {generator}({start}):", origin)
        c.indent += 1
        c.known = {}
        _loops(c, renamed, start, origin)
        c.emit(f"yield {c.expr(renamed.elt, origin)}", origin)
        c.indent, c.known = indent, {}
        return c.hold(f"{generator}({source})", origin)
    result = c.fresh("c")
    c.emit(f"{result} = {_EMPTY[type(renamed)]}", origin)
    _loops(c, renamed, source, origin)
    if isinstance(renamed, ast.DictComp):
        key = c.hold(c.expr(renamed.key, origin), origin)
        c.emit(f"{result}[{key}] = {c.expr(renamed.value, origin)}", origin)
    elif isinstance(renamed, ast.SetComp):
        c.emit(f"{result}.add({c.expr(renamed.elt, origin)})", origin)
    else:
        c.emit(f"{result}.append({c.expr(renamed.elt, origin)})", origin)
    c.indent, c.known = indent, {}
    return result


# a new container of each kind (no names the user's module could rebind)
_EMPTY = {ast.ListComp: "[]", ast.SetComp: "{*()}", ast.DictComp: "{}"}


def _loops(c: _Compiler, node: _Comprehension, source: str, origin: ast.AST) -> None:
    """The comprehension's loops and conditions, nested; ``c`` left inside the innermost."""
    for i, generator in enumerate(node.generators):
        value = source if i == 0 else c.iterable(c.expr(generator.iter, origin), generator.iter)
        c.loop_head(generator.target, value, origin)
        for condition in generator.ifs:
            c.emit(f"if {c.expr(condition, origin)}:", origin)
            c.indent += 1


def _renamed(c: _Compiler, node: _Comprehension) -> _Comprehension:
    """A copy of ``node`` with the names its loops bind renamed to new hidden names, in all of
    it but the first iterable (which the enclosing scope evaluates)."""
    bound: dict[str, str] = {}
    for generator in node.generators:
        for name in ast.walk(generator.target):
            if isinstance(name, ast.Name) and name.id not in bound:
                bound[name.id] = c.fresh("q")
    c.locals.update(bound.values())
    first = node.generators[0].iter
    copied = copy.deepcopy(node)
    _Rename(bound).visit(copied)
    copied.generators[0].iter = first
    return copied


class _Rename(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.Name:  # noqa: N802  (ast's visitor name)
        new = self.names.get(node.id)
        if new is not None:
            node.id = new
        return node
