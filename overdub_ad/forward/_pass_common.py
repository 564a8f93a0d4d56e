"""What the dual code is written with, shared by the two modules of the pass that write it
(:mod:`._pass`: functions and statements; :mod:`._pass_expressions`: expressions) and by the
runtime that runs it (:mod:`._dual`): the helpers the dual code calls by name, the per-site
cache of its direct calls, the names it uses (``@L``, ``@d.x``...) and the pass's compiled
expression (:class:`_Val`).
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
_METHODS: list[Any] = []  # site -> the function whose bound methods the site calls directly
_NATIVE_SITES: list[bool] = []  # site -> whether it runs natively (calls duals) or dispatched
_FILLED: list[int] = []  # sites filled during the current outermost call
_SITE_NUMBERS = itertools.count()
_SITES_LOCK = threading.Lock()


def _new_site(native: bool) -> int:
    with _SITES_LOCK:
        site = next(_SITE_NUMBERS)
        _SITES.append(None)
        _METHODS.append(None)
        _NATIVE_SITES.append(native)
    return site


# What the dual code calls and compares with, by name: ``_dual`` registers its helpers
# (and the types of the guards) here when it is imported, before any function is rewritten.
HELPERS: dict[str, Any] = {"operator": operator, "sites": _SITES, "methods": _METHODS}


def _helper(name: str) -> ast.Name:
    """The helper ``name`` as an expression of the dual code (``overdub.embed``: bound in the
    rewritten function's closure under a name no user variable can shadow; called directly,
    not through the specialising context, which would only run it as a leaf)."""
    return embed(HELPERS[name], direct=True)


def _load(name: str) -> ast.Name:
    return ast.Name(name, ast.Load())


def _store(name: str) -> ast.Name:
    return ast.Name(name, ast.Store())


def _tangent_name(name: str) -> str:
    return "@d." + name


def _zero() -> ast.Constant:
    return ast.Constant(0.0)


_LEVEL = "@L"


class _Unsupported(Exception):
    """A construct the pass leaves to the general mode (the code deopts where it is)."""


class _Val:
    """A compiled expression: ``p`` (an atom: a name or a constant) and its tangent ``d`` (an
    atom, or None: statically zero); ``boolean``: ``p`` is a comparison's result."""

    __slots__ = ("p", "d", "boolean")

    def __init__(self, p: ast.expr, d: ast.expr | None, boolean: bool = False) -> None:
        self.p, self.d, self.boolean = p, d, boolean
