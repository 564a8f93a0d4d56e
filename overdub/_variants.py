"""Compile a variant of a user's function: other code, written from its source, that runs as it.

A plug-in that compiles its own version of a function (a differentiated one, a specialised
one) needs what the core's rewriter needs: the function's ``def`` as it actually runs (looked up
through the code object, found in ``python -c`` and ``exec``'d text, checked against the code so
an edited file is refused), the generated code placed at the user's lines and compiled against
the user's file (tracebacks and warnings point there), private names mangled by the class
around it, and names of its own that user code can never spell.  This module publishes that, so
the plug-ins share the core's lookup, stale check, caches and ``AST_LOCK`` instead of copies.

The steps, for a function ``fn``::

    node = function_source(fn)               # a copy of fn's def (or lambda), to read
    prefix = hidden_prefix(node, "_v_")      # a prefix no name of that def starts with
    text = f"def {prefix}target(x):\\n    return {prefix}k * x\\n"  # generated
    code = compile_variant(fn, text, hidden=prefix)    # _v_k becomes the unspellable @k
    variant = variant_function(fn, code, {"k": 3.0})   # @k: a free variable, its cell 3.0

Generated code is written as text with the prefix, since ``@`` names cannot be parsed; after
parsing, every name, parameter and function name starting with the prefix is renamed to an
``@`` name, and the prefix, being unused by the function, touches none of the user's names.
"""

from __future__ import annotations

import ast
import sys
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from . import _cache, _source

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# The wrappers' names: "@" + an identifier is what renaming makes, "@@" it never makes.
_FACTORY, _HOLDER = "@@factory", "@@holder"


class NoSourceError(LookupError):
    """A function's source cannot be found, or no longer compiles to its code; the message
    says which function and why (the reason :func:`why_no_source` gives)."""


def function_source(fn: Any) -> ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda:
    """The ``def`` or ``lambda`` node Python function ``fn`` runs: a copy, yours to change,
    at the lines and columns of ``fn``'s file.

    It is looked up through ``fn``'s code object (never ``__wrapped__``), in its file, an
    IPython cell, ``python -c``'s text or the text ``exec``/``compile`` made it from where
    overdub knows it, and only returned if it compiles to ``fn``'s code: a file edited since
    ``fn`` was defined is refused.  A method is looked through to its function.

    Raises :class:`NoSourceError` saying why where there is none (a lambda among others alike on
    its line on Python 3.10, text made by ``exec`` outside any context...), ``TypeError`` where
    ``fn`` is no Python function.

    Example::

        def f(x):
            return 2 * x

        assert function_source(f).body[0].lineno == f.__code__.co_firstlineno + 1

    See also :func:`why_no_source`, :func:`compile_variant`.
    """
    return _source.fresh_node(_located(_function(fn)))


def hidden_prefix(node: ast.AST, stem: str) -> str:
    """``stem``, or ``stem`` with a number, such that no name in ``node`` starts with it.

    Generated code written as text names its own variables and helpers with this prefix;
    :func:`compile_variant` then renames them to ``@`` names.  Since no name of the user's
    function (``node``, from :func:`function_source`) starts with the prefix, renaming touches
    none of the user's: a user variable called ``_v_k`` stays as it is.  Every string in
    ``node`` counts as a name here (attribute and keyword names, constants), which can only
    make the prefix longer.  ``stem`` must be an identifier, else ``ValueError``.
    """
    if not stem.isidentifier():
        raise ValueError(f"hidden_prefix: the stem must be an identifier, not {stem!r}")
    used = list(_strings(node))
    prefix, count = stem, 0
    while any(text.startswith(prefix) for text in used):
        count += 1  # (each string rules out one number at most: this ends)
        prefix = f"{stem}{count}_"
    return prefix


def compile_variant(fn: Any, source: str, *, origins: Sequence[ast.AST | None] = (),
                    hidden: str | None = None) -> types.CodeType:
    """The code of a variant of Python function ``fn``: the function ``source`` defines,
    compiled as the core compiles ``fn``'s own rewritten code.

    ``source`` is the text of one function definition at column 0 (its name and signature are
    yours; its body may use ``fn``'s globals and free variables, which the variant shares, see
    :func:`variant_function`).  Names, parameters and function names in it that start with
    ``hidden`` (from :func:`hidden_prefix`) become ``@`` names, which no user code can spell:
    those read but not bound in the variant are its free variables, given values by
    :func:`variant_function`.

    Each generated node takes the position of ``origins[k]`` for line ``k + 1`` of ``source``
    (a node of :func:`function_source`'s tree), or, where that is None or missing, of ``fn``'s
    ``def``: tracebacks and warnings show the user's file and lines.  The text is compiled
    against ``fn``'s file name, with its ``__future__`` flags, inside a class of the name of the
    class around ``fn`` (private names mangle as in ``fn``), under the core's ``AST_LOCK``;
    nothing of it runs.  The code is named as ``fn``'s (``co_name``, ``co_qualname``).

    Raises :class:`NoSourceError` as :func:`function_source` does, ``ValueError`` if ``source``
    is not one function definition or a name of ``fn``'s starts with ``hidden``, and
    ``SyntaxError`` if it does not parse.  Cache the code (per ``fn.__code__``), not functions.

    See also :func:`variant_function`.
    """
    func = _function(fn)
    code = func.__code__
    located = _located(func)
    if hidden is not None and (not hidden.isidentifier()
                               or any(t.startswith(hidden) for t in _strings(located.node))):
        raise ValueError(f"compile_variant: {hidden!r} is not a hidden prefix for "
                         f"{func.__qualname__} (see hidden_prefix)")
    with _source.compiling(code.co_filename):
        tree = ast.parse(source, code.co_filename)
    if len(tree.body) != 1 or not isinstance(tree.body[0], _FUNCTIONS):
        raise ValueError("compile_variant: the source must be one function definition")
    variant = tree.body[0]
    free = _rename_and_place(tree, hidden, origins, located.node)
    body: list[ast.stmt] = [variant]
    synthetic: list[ast.AST] = []
    if located.class_name is not None:
        for name in (located.class_name, _HOLDER):
            body = [ast.ClassDef(name=name, bases=[], keywords=[], body=body, decorator_list=[])]
            synthetic.append(body[0])
    # fn's free variables and the hidden names the variant reads become the factory's
    # parameters (one the variant binds itself is harmlessly unused); `__class__` comes from
    # the class, as in a method.
    params = [ast.arg(arg=name) for name in dict.fromkeys((*code.co_freevars, *sorted(free)))
              if name != variant.name and (name != "__class__" or located.class_name is None)]
    arguments = ast.arguments(posonlyargs=[], args=params, vararg=None, kwonlyargs=[],
                              kw_defaults=[], kwarg=None, defaults=[])
    factory = ast.FunctionDef(name=_FACTORY, args=arguments, body=body, decorator_list=[],
                              returns=None)
    for wrapper in (factory, arguments, *params, *synthetic):
        wrapper.lineno = wrapper.end_lineno = variant.lineno  # type: ignore[attr-defined]
        wrapper.col_offset = wrapper.end_col_offset = 0  # type: ignore[attr-defined]
        if "type_params" in wrapper._fields:  # 3.12+
            wrapper.type_params = []  # type: ignore[attr-defined]
    module = ast.Module(body=[factory], type_ignores=[])
    with _source.compiling(code.co_filename):
        compiled = compile(module, code.co_filename, "exec",
                           flags=code.co_flags & _cache._FUTURE_FLAGS, dont_inherit=True)
    found = _find(compiled, variant.name)
    path = (_HOLDER, located.class_name) if located.class_name is not None else ()
    made = ".".join((_FACTORY, "<locals>", *path, variant.name))
    original = func.__qualname__  # (3.10: code objects have no qualified name)
    if sys.version_info >= (3, 11):
        original = code.co_qualname
    return _cache._requalify(found.replace(co_name=code.co_name), made, original)


def variant_function(fn: Any, code: types.CodeType,
                     hidden: Mapping[str, Any] | None = None) -> types.FunctionType:
    """A function running ``code`` as ``fn``'s variant.

    ``code`` comes from :func:`compile_variant` for ``fn``.  The function has ``fn``'s globals
    (the very dict: ``global`` statements write to ``fn``'s module), the very cells of ``fn``'s
    closure for the free variables they share (``nonlocal`` writes are seen both ways), a new
    cell holding ``hidden[label]`` for each free ``@label``, and ``fn``'s name and qualified
    name; no defaults (set ``__defaults__``/``__kwdefaults__`` where its signature takes them).
    A free ``@label`` missing from ``hidden`` is a ``ValueError``.
    """
    return variant_maker(fn, code, hidden)(fn)


def variant_maker(fn: Any, code: types.CodeType, hidden: Mapping[str, Any] | None = None
                  ) -> Callable[[Any], types.FunctionType]:
    """``make(g)``: :func:`variant_function`'s variant for any function ``g`` with ``fn``'s code.

    A ``def`` inside a function makes a new function, with new cells, each time it runs: a
    plug-in that keeps a variant per function object would otherwise work out the same
    closure again for each.  The maker reads ``code``'s free variables once and makes the
    cells of ``hidden`` once, shared by every variant it makes (a hidden value is the
    plug-in's: a mutable one is seen by them all); ``g``'s own cells are ``g``'s.
    """
    func = _function(fn)
    values = hidden or {}
    own = {name: i for i, name in enumerate(func.__code__.co_freevars)}
    layout: list[tuple[int, Any]] = []  # (position in g's closure, or -1 and a hidden cell)
    for name in code.co_freevars:
        if name in own:
            layout.append((own[name], None))
        elif name[:1] == "@" and name[1:] in values:
            layout.append((-1, types.CellType(values[name[1:]])))
        else:
            raise ValueError(f"variant_function: no value for the free variable {name!r} of "
                             f"the variant of {func.__qualname__}")
    original = func.__code__

    def make(g: Any) -> types.FunctionType:
        g = _function(g)
        if g.__code__ is not original:
            raise ValueError(f"variant_maker: {g.__qualname__} does not run the code of "
                             f"{func.__qualname__}")
        cells = g.__closure__ or ()
        closure = tuple([cells[i] if i >= 0 else cell for i, cell in layout])
        made = types.FunctionType(code, g.__globals__, g.__name__, None, closure)
        made.__qualname__ = g.__qualname__
        return made

    return make


def _function(fn: Any) -> types.FunctionType:
    func = getattr(fn, "__func__", fn)
    if not isinstance(func, types.FunctionType):
        raise TypeError(f"a variant needs a Python function, not {type(fn).__name__}")
    return func


def _located(func: types.FunctionType) -> _source.Located:
    """``func``'s node, through the core's cache (shared with its rewriter)."""
    found = _cache._checked_source(func.__code__, func.__globals__)
    if isinstance(found, _source.NoSource):
        raise NoSourceError(f"no source for {func.__qualname__}: {found.reason}")
    return found


def _strings(node: ast.AST) -> Iterator[str]:
    """Every string held by ``node`` and the nodes under it (names, constants...)."""
    for child in ast.walk(node):
        for field in child._fields:
            value = getattr(child, field, None)
            if isinstance(value, str):
                yield value
            elif isinstance(value, list):
                yield from (item for item in value if isinstance(item, str))


def _rename_and_place(tree: ast.Module, hidden: str | None, origins: Sequence[ast.AST | None],
                      default: ast.AST) -> set[str]:
    """Rename ``hidden``-prefixed names to ``@`` names and give each node its line's origin's
    position; the ``@`` names read (candidates for free variables)."""
    read: set[str] = set()
    size = len(hidden) if hidden else 0
    child: Any
    for child in ast.walk(tree):
        if hidden:
            kind = type(child)
            if kind is ast.Name and child.id.startswith(hidden):
                child.id = "@" + child.id[size:]
                if type(child.ctx) is ast.Load:
                    read.add(child.id)
            elif kind is ast.arg and child.arg.startswith(hidden):
                child.arg = "@" + child.arg[size:]
            elif isinstance(child, (*_FUNCTIONS, ast.ClassDef)) and \
                    child.name.startswith(hidden):
                child.name = "@" + child.name[size:]
        if "lineno" in child._attributes and hasattr(child, "lineno"):
            k = child.lineno - 1
            origin: Any = origins[k] if 0 <= k < len(origins) else None
            if origin is None:
                origin = default
            child.lineno = origin.lineno
            child.end_lineno = origin.end_lineno
            child.col_offset = origin.col_offset
            child.end_col_offset = origin.end_col_offset
    return read


def _find(container: types.CodeType, name: str) -> types.CodeType:
    """The code named ``name`` compiled inside ``container`` (the outermost, breadth first)."""
    pending = [container]
    while pending:
        current = pending.pop(0)
        for const in current.co_consts:
            if isinstance(const, types.CodeType):
                if const.co_name == name:
                    return const
                pending.append(const)
    raise ValueError(f"overdub: compiled code for {name} not found")  # pragma: no cover
