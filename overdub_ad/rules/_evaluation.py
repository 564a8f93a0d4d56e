"""Stand-ins for ``eval`` and ``exec`` of source text.

``eval("x * x", {"x": x})`` runs compiled text natively: the values it reads from its
namespaces are plain numbers there, so the derivative would be lost.  The source is right
there, though: these stand-ins (run wherever ``eval``/``exec`` is called under a derivative,
see ``_rules.defstandin``) compile the text as the body of a function -- through ``compile``,
whose shim remembers the text, so the context rewrites that function like any other -- and call
it.  Its names resolve as the text's would:

- every name the text (or a scope nested in it) uses that the namespaces hold is given its
  value first, read by a subscript of the namespace (the locals first), which the context
  sees: a value stored there by ``ns["y"] = y`` keeps its derivative, which a native name
  lookup would miss;
- ``eval``: the expression is returned by a function whose globals are the given globals;
- ``exec`` with one namespace (or the same dict twice): the names the text binds at its top
  level are declared ``global``, so they are stored in that namespace, as by ``exec``;
- ``exec`` with separate locals: the names the text binds are written back into the locals
  afterwards.

What cannot be restated so -- a code object, an ``exec`` without namespaces, text whose meaning
would change inside a function (``from m import *``, a multi-line string, which the function
body's indentation would alter) -- runs natively, guarded: if a value in its namespaces carries
a derivative, it raises ``MissingRuleError`` rather than drop it.
"""

from __future__ import annotations

import builtins
import io
import symtable
import sys
import tokenize
import types
from typing import Any

from overdub import opaque

from .._rules import ZERO, defjvp, defstandin, defvjp

_FUNCTION = "_overdub_evaluated"
_LOCALS = "_overdub_locals"
_GLOBALS = "_overdub_globals"


@opaque
def _run(run: Any, source: Any, globals_: Any, locals_: Any, **kwargs: Any) -> Any:
    """The builtin itself, as a leaf (the stand-in is not asked again)."""
    return run(source, globals_, locals_, **kwargs)


def _guard(run: Any) -> Any:
    """``run`` (``eval`` or ``exec``) called natively, with what its namespaces hold as a last
    argument that has no rule: one value carrying a derivative raises ``MissingRuleError``
    (named after ``run``) rather than be read as a plain number."""
    def guarded(source: Any, globals_: Any, locals_: Any, values: tuple[Any, ...],
                **kwargs: Any) -> Any:
        return _run(run, source, globals_, locals_, **kwargs)
    guarded.__module__ = "builtins"
    guarded.__name__ = guarded.__qualname__ = run.__name__
    defjvp(guarded, ZERO, ZERO, ZERO, None)
    defvjp(guarded, ZERO, ZERO, ZERO, None)
    return guarded


_GUARDED = {eval: _guard(eval), exec: _guard(exec)}


def _native(run: Any, source: Any, globals_: Any, locals_: Any, **kwargs: Any) -> Any:
    """``run`` natively, guarded (see :func:`_guard`)."""
    if globals_ is None:  # the caller's namespaces, as the builtin would take them
        caller = sys._getframe(2)
        globals_, locals_ = caller.f_globals, caller.f_locals if locals_ is None else locals_
    values = tuple(globals_.values()) + (() if locals_ is None or locals_ is globals_
                                         else tuple(locals_.values()))
    return _GUARDED[run](source, globals_, locals_, values, **kwargs)


def _text(source: Any) -> str | None:
    if isinstance(source, (bytes, bytearray)):
        try:
            return bytes(source).decode()
        except UnicodeDecodeError:
            return None
    return source if isinstance(source, str) else None


def _function(wrapper: str, globals_: dict[str, Any]) -> Any:
    """The function ``wrapper`` defines, compiled through the shim that remembers its text
    (so that the context rewrites it), with ``globals_`` as its globals: its own name is not
    stored there; ``__builtins__`` is, as eval and exec store it."""
    code = compile(wrapper, "<string>", "exec")
    inner = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    globals_.setdefault("__builtins__", builtins.__dict__)
    return types.FunctionType(inner, globals_, _FUNCTION)


def _eval(source: Any, globals_: Any = None, locals_: Any = None, /) -> Any:
    text = _text(source)
    if text is None or globals_ is None:
        return _native(eval, source, globals_, locals_)
    text = text.lstrip(" \t")  # as eval does
    compile(text, "<string>", "eval")  # its SyntaxError, as eval's
    used = _names(symtable.symtable(text, "<string>", "eval"))
    header = _bindings(used, [], globals_, locals_)
    try:
        function = _function(_wrapped([f"return (\n{text}\n)"], header, []), globals_)
    except SyntaxError:  # (text that is an expression alone only: `yield` in it...)
        return _native(eval, source, globals_, locals_)
    return function(locals_, globals_)


def _bindings(used: list[str], bound: list[str], globals_: Any, locals_: Any) -> list[str]:
    """Lines giving the text's names their values first, each read by a subscript of its
    namespace, which the context sees: a value stored there by ``ns["y"] = y`` has its
    derivative kept beside the dict, where a name looked up natively would miss it (a silent
    zero).  A name separate locals hold, or one the text binds as a local (exec with separate
    locals), becomes a local; a name of the globals is declared ``global`` and given the value
    read, so that scopes nested in the text see it too, functions it defines included, when
    called later in the derivative (the core gives the globals a run assigns plain values
    when the run ends)."""
    separate = locals_ is not None and locals_ is not globals_
    lines, refreshed = [], []
    for name in used:
        if separate and name in locals_:
            lines.append(f"{name} = {_LOCALS}[{name!r}]")
        elif name in globals_ and not (name.startswith("__") and name.endswith("__")):
            if separate and name in bound:
                lines.append(f"{name} = {_GLOBALS}[{name!r}]")
            else:
                refreshed.append(name)
    if refreshed:
        lines[:0] = [f"global {', '.join(refreshed)}",
                     *(f"{name} = {_GLOBALS}[{name!r}]" for name in refreshed)]
    return lines


def _wrapped(body: list[str], header: list[str], trailer: list[str]) -> str:
    """The function running ``body`` (the text's lines) after ``header``, then ``trailer``."""
    return "\n".join([f"def {_FUNCTION}({_LOCALS}, {_GLOBALS}):",
                      *(" " + line for line in header),
                      *(" " + line if line.strip() else line for line in body), " pass",
                      *(" " + line for line in trailer), ""])


def _names(table: symtable.SymbolTable) -> list[str]:
    """The names ``table``'s code and the scopes nested in it use (once each, in order)."""
    found = {symbol.get_name(): None for symbol in table.get_symbols()
             if symbol.is_referenced() or symbol.is_assigned()}
    for child in table.get_children():
        found.update(dict.fromkeys(_names(child)))
    return list(found)


def _top_level(text: str) -> tuple[list[str], list[str]]:
    """The names ``text`` binds at its top level, and all the names it and its nested scopes
    use (but those it declares ``global`` at its top level: the function's own ``global``
    statement finds them)."""
    table = symtable.symtable(text, "<string>", "exec")
    symbols = [s for s in table.get_symbols() if not s.is_declared_global()]
    declared = {s.get_name() for s in table.get_symbols() if s.is_declared_global()}
    bound = [s.get_name() for s in symbols
             if s.is_assigned() or s.is_imported() or s.is_namespace()]
    return bound, [name for name in _names(table) if name not in declared]


def _indentable(text: str) -> bool:
    """Whether indenting every line of ``text`` keeps its meaning: no token (a string) spans
    lines, where the added indentation would become part of it."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return False
    layout = (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT,
              tokenize.ENDMARKER)
    return all(t.start[0] == t.end[0] for t in tokens if t.type not in layout)


def _exec(source: Any, globals_: Any = None, locals_: Any = None, /, **kwargs: Any) -> Any:
    text = _text(source)
    if text is None or globals_ is None or kwargs or not _indentable(text):
        return _native(exec, source, globals_, locals_, **kwargs)
    compile(text, "<string>", "exec")  # its SyntaxError, as exec's
    bound, used = _top_level(text)
    header = _bindings(used, bound, globals_, locals_)
    trailer: list[str] = []
    if locals_ is None or locals_ is globals_:
        if bound:  # stored into the one namespace, as exec's top level stores them
            header.insert(0, f"global {', '.join(bound)}")
    else:  # stored into the locals afterwards
        for name in bound:
            trailer += ["try:", f" {_LOCALS}[{name!r}] = {name}", "except NameError:", " pass"]
    try:
        function = _function(_wrapped(text.splitlines(), header, trailer), globals_)
    except SyntaxError:  # (from m import *, a global declared after use...)
        return _native(exec, source, globals_, locals_)
    function(locals_, globals_)
    return None


defstandin(eval, _eval)
defstandin(exec, _exec)
