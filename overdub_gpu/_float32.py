"""The float32 literal pass: float literals become float32, so float32 data stays float32.

Python's ``0.5`` is a double.  NumPy 2 treats a bare Python float next to a float32 array as
"weak" and keeps float32, but as soon as a literal goes through a function first
(``np.exp(-0.5) * x``, ``np.full(n, 0.5)``, ``np.asarray(0.5)``) it is a float64 NumPy value and
promotes everything it touches.  Julia's answer (and Cassette's talk example) is to rewrite the
literals; this pass does that for every function a context recurses into::

    def damp(x):                            def damp(x):
        return x * np.exp(-0.5)    ->           return x * np.exp(-@embed1:float32(0.5))

(complex literals become ``complex64``; ``@embed1:float32`` is :func:`overdub.embed` of
``numpy.float32``, which no name in the user's code can shadow).  The result is plain NumPy
code, so the pass works in any context; inside :class:`~overdub_gpu.ArrayBackendContext` the
``numpy.float32(...)`` call is itself swapped for a float32 scalar of the context's namespace.
Literals in default arguments, annotations, decorators and ``match`` patterns are left alone
(they are not run as the body).
"""

from __future__ import annotations

import ast
from typing import Any

import numpy

from overdub import embed

__all__ = ["Float32Literals"]


class Float32Literals(ast.NodeTransformer):
    """``Float32Literals()``: an overdub pass turning ``1.5`` into ``numpy.float32(1.5)``.

    Give it to any context (``MyContext(passes=[Float32Literals()])``);
    ``ArrayBackendContext(xp, float32=True)`` adds it for you.  Stateless: one instance may be
    shared by any number of contexts.

    Example::

        ctx = ArrayBackendContext(numpy, float32=True)
        overdub(ctx, lambda x: x * np.exp(-0.5), np.ones(3, np.float32)).dtype  # float32

    See also: :class:`~overdub_gpu.ArrayBackendContext`.
    """

    def visit_Constant(self, node: ast.Constant) -> Any:
        if type(node.value) is float:
            return _scalar(node, "float32")
        if type(node.value) is complex:
            return _scalar(node, "complex64")
        return node

    # Not run as part of the body, or not allowed to hold a call: leave them be.
    def visit_arguments(self, node: ast.arguments) -> Any:
        return node

    def visit_arg(self, node: ast.arg) -> Any:
        return node

    def visit_JoinedStr(self, node: ast.JoinedStr) -> Any:
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                value.value = self.visit(value.value)
        return node

    def visit_match_case(self, node: ast.match_case) -> Any:
        if node.guard is not None:
            node.guard = self.visit(node.guard)
        node.body = [self.visit(s) for s in node.body]
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> Any:
        node.target = self.visit(node.target)
        if node.value is not None:
            node.value = self.visit(node.value)
        return node

    def visit_FunctionDef(self, node: Any) -> Any:
        node.body = [self.visit(s) for s in node.body]  # not decorators, defaults, annotations
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> Any:
        node.body = self.visit(node.body)
        return node


def _scalar(node: ast.Constant, dtype: str) -> ast.expr:
    call = ast.Call(embed(getattr(numpy, dtype)), [ast.Constant(node.value)], [])
    for new in ast.walk(call):
        ast.copy_location(new, node)
    return call
