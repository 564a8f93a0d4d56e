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
# function it remembers it and calls it directly while the same function comes (and so for a
# function defined in the dual code, a named tuple class, a C function of one float with a
# rule: what the call does is known from the callable, for as long as the rules and classes
# stay as they are, which they do while the outermost call runs).  Sites in a
# rewritten function's own body call through the context's dispatcher (which gives the dual of
# an ordinary function); sites in the functions defined inside it run natively and call duals
# (closures made by specialised code) as they are.
#
# Attribute reads (``obj.name``) have sites too: the first read of a class's attribute asks the
# helper (``_dual_objects._attribute``), which records, for classes whose read of that name runs
# no Python code of theirs, how the site may read it next time: natively (an instance's
# attribute, a method, a slot, a class constant), as a named tuple's field (its tangent the
# tuple tangent's item), or through a property's getter (its dual, called directly).  What a
# class's attributes are cannot change while the outermost call runs (the dual code writes only
# attributes of objects it created), and every site filled is emptied when it ends.
_SITES: list[Any] = []  # site -> the function the site calls directly, or None
_METHODS: list[Any] = []  # site -> the function whose bound methods the site calls directly
_NATIVE_SITES: list[bool] = []  # site -> whether it runs natively (calls duals) or dispatched
_ATTR_NATIVE: list[Any] = []  # site -> a class whose attribute of the site's name reads natively
_ATTR_FIELD: list[Any] = []  # site -> a named tuple class whose field the site reads
_ATTR_INDEX: list[Any] = []  # site -> that field's index
_ATTR_GETTER_CLASS: list[Any] = []  # site -> a class whose property the site reads
_ATTR_GETTER: list[Any] = []  # site -> that property's getter
_DUALS: list[Any] = []  # site -> a function defined in dual code, called as it is
_TUPLES: list[Any] = []  # site -> a named tuple class, made as its generated __new__ makes it
_UNARY: list[Any] = []  # site -> a C function of one float with a rule
_UNARY_RULE: list[Any] = []  # site -> that rule
_FILLED: list[int] = []  # sites filled during the current outermost call
_SITE_TABLES = (_SITES, _METHODS, _ATTR_NATIVE, _ATTR_FIELD, _ATTR_INDEX, _ATTR_GETTER_CLASS,
                _ATTR_GETTER, _DUALS, _TUPLES, _UNARY, _UNARY_RULE)  # (emptied when filled)
_SITE_NUMBERS = itertools.count()
_SITES_LOCK = threading.Lock()


def _new_site(native: bool) -> int:
    with _SITES_LOCK:
        site = next(_SITE_NUMBERS)
        for table in _SITE_TABLES:
            table.append(None)
        _NATIVE_SITES.append(native)
    return site


def _empty_sites() -> None:
    """Empty the sites filled during the outermost call that ends (the cache keeps no function
    or class alive past the call, and answers for no later state of a class)."""
    for site in _FILLED:
        for table in _SITE_TABLES:
            table[site] = None
    _FILLED.clear()


# What the dual code calls and compares with, by name: ``_dual`` registers its helpers
# (and the types of the guards) here when it is imported, before any function is rewritten.
HELPERS: dict[str, Any] = {
    "operator": operator, "sites": _SITES, "methods": _METHODS, "attr_native": _ATTR_NATIVE,
    "attr_field": _ATTR_FIELD, "attr_index": _ATTR_INDEX, "attr_getter_class": _ATTR_GETTER_CLASS,
    "attr_getter": _ATTR_GETTER, "duals": _DUALS, "tuples": _TUPLES, "unary": _UNARY,
    "unary_rule": _UNARY_RULE}


def _helper(name: str) -> ast.Name:
    """The helper ``name`` as an expression of the dual code (``overdub.embed``: bound in the
    rewritten function's closure under a name no user variable can shadow; called directly,
    not through the specialising context, which would only run it as a leaf)."""
    return embed(HELPERS[name], direct=True)


def _class(value: ast.expr) -> ast.expr:
    """``type(value)``, for a value that may be an object of the user's: its class read
    without running its ``__getattribute__`` (``value.__class__`` would; a context must not
    change what user code observes).  Guards on what is a number in all but rare cases keep
    ``value.__class__``."""
    return ast.Call(_helper("type"), [value], [])


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
