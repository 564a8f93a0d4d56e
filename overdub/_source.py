"""Find the AST of the code that actually runs.

Source is looked up through the *code object* (never ``inspect.getsource(fn)``, which follows
``__wrapped__``), read with ``linecache`` so loader-backed modules and IPython cells work, and the
whole file is parsed once and indexed.  Failure is a value, :class:`NoSource`, carrying a reason
(builtin, no source, ambiguous lambda, ...), never an exception: the dispatcher turns it into a
leaf call.
"""

from __future__ import annotations

import ast
import linecache
import os
import tokenize
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from . import _generated, _rewrite

_Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda  # what code objects compile from


@dataclass(frozen=True)
class NoSource:
    """Why a code object cannot be rewritten; ``actionable`` reasons deserve one warning."""

    reason: str
    actionable: bool = False


@dataclass(frozen=True)
class Located:
    """A function's node in its parsed file, with what compiling it faithfully needs.

    ``node`` is shared with the parsed-file cache: deep-copy before changing it.
    ``class_name`` is the innermost enclosing class (private names are mangled with it).
    ``passes_applied``: the node already went through the context's passes.
    ``lines``: the text ``node`` was parsed from, where it is a file's (see :func:`fresh_node`).
    """

    node: _Def
    class_name: str | None
    passes_applied: bool = False  # a nested function compiled from a pass-transformed tree
    lines: list[str] | None = field(default=None, compare=False, repr=False)


@dataclass
class _ParsedFile:
    lines: list[str]  # the very list linecache returned: identity proves the text unchanged
    defs: dict[tuple[str, int], list[Located]]  # (name, co_firstlineno) -> candidates
    tree: ast.Module
    _lambdas: dict[int, list[Located]] | None = None

    @property
    def lambdas(self) -> dict[int, list[Located]]:
        """First line of each lambda -> candidates.  Indexed when first asked for: finding them
        means walking every expression of the file, where ``def`` statements are found walking
        the statements alone (a benign race: two threads index the same tree alike)."""
        if self._lambdas is None:
            self._lambdas = _index_lambdas(self.tree)
        return self._lambdas


_files: dict[str, _ParsedFile] = {}
_files_lock = threading.Lock()
# See _cache.AST_LOCK: CPython 3.11 cannot convert ASTs in two threads at once.
AST_LOCK = threading.Lock()


# The fields that hold statements (an ExceptHandler's or match_case's `body` included).
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def _index(tree: ast.Module, lines: list[str]) -> _ParsedFile:
    """The file's function definitions, each with the innermost class around it (whose name
    mangles its private names).  Only statements are walked: a ``def`` is one."""
    defs: dict[tuple[str, int], list[Located]] = {}
    pending: list[tuple[ast.AST, str | None]] = [(tree, None)]
    while pending:
        node, class_name = pending.pop()
        for name in _BLOCKS:
            block = getattr(node, name, None)
            if type(block) is not list:  # (a lambda's or an if-expression's body)
                continue
            for child in block:
                inner = class_name
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    first = child.decorator_list[0].lineno if child.decorator_list \
                        else child.lineno
                    defs.setdefault((child.name, first), []).append(
                        Located(child, class_name, lines=lines))
                elif isinstance(child, ast.ClassDef):
                    inner = child.name
                pending.append((child, inner))
    return _ParsedFile(lines, defs, tree)


def _index_lambdas(tree: ast.Module) -> dict[int, list[Located]]:
    lambdas: dict[int, list[Located]] = {}
    pending: list[tuple[ast.AST, str | None]] = [(tree, None)]
    while pending:
        node, class_name = pending.pop()
        for child in ast.iter_child_nodes(node):
            inner = class_name
            if isinstance(child, ast.Lambda):
                lambdas.setdefault(child.lineno, []).append(Located(child, class_name))
            elif isinstance(child, ast.ClassDef):
                inner = child.name
            pending.append((child, inner))
    return lambdas


def _parsed_file(filename: str, module_globals: dict[str, Any] | None) -> _ParsedFile | NoSource:
    lines = linecache.getlines(filename, module_globals)
    if not lines:
        return NoSource(f"no source for {filename!r}")
    cached = _files.get(filename)
    if cached is not None and cached.lines is lines:
        return cached
    parsed = _parse(lines, filename)
    if isinstance(parsed, NoSource):
        return parsed
    with _files_lock:  # first writer wins; a duplicate parse is harmless
        _files.setdefault(filename, parsed)
        if _files[filename].lines is not lines:
            _files[filename] = parsed
    return parsed


# filename -> ((modification time, size), the file parsed as it was then)
_disk_files: dict[str, tuple[tuple[int, int], _ParsedFile | NoSource]] = {}


def _parsed_from_disk(filename: str) -> _ParsedFile | NoSource:
    """``filename`` as it is on disk now.  ``linecache`` keeps a file's text as it was first
    read, while a module reloaded after an edit (``importlib.reload``) runs code compiled from
    the new text; the cache there is left as it is (the module's other functions, compiled
    from the old text, still match it)."""
    try:
        stat = os.stat(filename)
        stamp = (stat.st_mtime_ns, stat.st_size)
        cached = _disk_files.get(filename)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        with tokenize.open(filename) as file:
            lines = file.readlines()
    except (OSError, SyntaxError, UnicodeDecodeError) as exc:
        return NoSource(f"cannot read {filename!r}: {exc}")
    parsed = _parse(lines, filename)
    _disk_files[filename] = (stamp, parsed)
    return parsed


def _parse(lines: list[str], filename: str) -> _ParsedFile | NoSource:
    try:
        with AST_LOCK:
            tree = ast.parse("".join(lines), filename)
    except (SyntaxError, ValueError) as exc:
        return NoSource(f"source of {filename!r} does not parse: {exc}", actionable=True)
    return _index(tree, lines)


def fresh_node(located: Located) -> _Def:
    """A copy of ``located.node`` to change: a ``def`` parsed again from its own lines of the
    file, at their line numbers and columns (the parser, in C, is a few times faster than
    copying the tree in Python), or, for lambdas, nodes from other trees and anything that does
    not parse back to the same definition, a copy."""
    node = located.node
    lines = located.lines
    if lines is not None and not isinstance(node, ast.Lambda) and node.end_lineno is not None:
        first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        indented = node.col_offset > 0  # then inside `if 1:` on the line before
        if first > indented:
            head = "\n" * (first - 1 - indented) + ("if 1:\n" if indented else "")
            try:
                with AST_LOCK:
                    tree = ast.parse(head + "".join(lines[first - 1:node.end_lineno]))
                found = tree.body[0]
                if indented:
                    found = cast(ast.If, found).body[0]
            except (SyntaxError, ValueError, IndexError):
                found = None
            if (type(found) is type(node) and isinstance(found, type(node))
                    and found.name == node.name and found.lineno == node.lineno
                    and found.col_offset == node.col_offset
                    and found.end_lineno == node.end_lineno
                    and found.end_col_offset == node.end_col_offset):
                return found
    return _rewrite.copy_tree(node)


def _generated_file(code: types.CodeType, module_globals: dict[str, Any] | None
                    ) -> tuple[_ParsedFile | NoSource, str | None]:
    """The parsed text ``code`` was compiled from by exec/eval/compile (see ``_generated``),
    and why there is no source if that text is only a candidate that turns out not to be."""
    found = _generated.find(code, module_globals)
    if isinstance(found, str):
        return NoSource(found), None
    if found.parsed is None:  # a benign race: both threads parse the same text
        found.parsed = _parse(found.lines, code.co_filename)
    parsed: _ParsedFile | NoSource = found.parsed
    return parsed, found.otherwise


def _lambda_columns(code: types.CodeType) -> tuple[int, int] | None:
    """Line and column where the lambda's body starts (3.11+ positions)."""
    positions = getattr(code, "co_positions", None)
    if positions is None:
        return None
    starts = [(line, col) for line, _, col, _ in positions()
              if line is not None and col is not None]
    starts = [p for p in starts if p != (code.co_firstlineno, 0)]
    return min(starts) if starts else None


def locate(code: types.CodeType, module_globals: dict[str, Any] | None,
           likeness: Callable[[Located], int], on_disk: bool = False) -> Located | NoSource:
    """The AST node that compiled to ``code``, or why there is none.

    ``likeness`` tells lambdas on one line apart where code has no column positions (3.10): it
    compiles a candidate and says how closely the result matches ``code`` (0: it does not).
    ``on_disk``: look in the file as it is on disk now, not as ``linecache`` keeps it.
    """
    filename = code.co_filename
    otherwise = None  # a candidate text that is not the code's: why there is no source
    frozen = _frozen_source(filename, module_globals)
    if frozen is not None:  # (the likeness check makes sure the file is what was frozen)
        parsed = _parsed_file(frozen, None)
    elif on_disk:
        parsed = _parsed_from_disk(filename)
    elif filename.startswith("<") and not linecache.getlines(filename, module_globals):
        parsed, otherwise = _generated_file(code, module_globals)
    else:
        parsed = _parsed_file(filename, module_globals)
    if isinstance(parsed, NoSource):
        return parsed
    if code.co_name == "<lambda>":
        candidates = parsed.lambdas.get(code.co_firstlineno, [])
        if len(candidates) > 1:
            start = _lambda_columns(code)
            if start is None:
                scores = [likeness(c) for c in candidates]
                candidates = [c for c, score in zip(candidates, scores)
                              if score and score == max(scores)]
                if len({ast.dump(c.node) for c in candidates}) == 1:
                    candidates = candidates[:1]  # the same lambda twice: either one is the source
            else:
                candidates = [c for c in candidates
                              if _body_start(c.node) <= start <= _body_end(c.node)]
                if len(candidates) > 1:  # nested lambdas: the innermost body containing start
                    candidates = [max(candidates, key=lambda c: _body_start(c.node))]
    else:
        candidates = parsed.defs.get((code.co_name, code.co_firstlineno), [])
    if otherwise is not None and (len(candidates) != 1 or not likeness(candidates[0])):
        return NoSource(otherwise)
    if len(candidates) != 1:
        what = "no matching definition" if not candidates else "several matching definitions"
        return NoSource(f"{what} for {code.co_name} at {filename}:{code.co_firstlineno}",
                        actionable=True)
    return candidates[0]


def _frozen_source(filename: str, module_globals: dict[str, Any] | None) -> str | None:
    """The file a frozen standard-library module (``<frozen _collections_abc>``, Python 3.11+)
    was frozen from, which its ``__file__`` names: its functions have source after all."""
    if not filename.startswith("<frozen ") or module_globals is None:
        return None
    path = module_globals.get("__file__")  # (the module's __name__ may differ: _collections_abc
    # calls itself collections.abc)
    frozen_name = filename[len("<frozen "):-1].rpartition(".")[2]
    if type(path) is not str or os.path.basename(path) != f"{frozen_name}.py":
        return None
    return path


def _body_start(node: _Def) -> tuple[int, int]:
    body = cast(ast.Lambda, node).body  # only lambdas' candidates are compared by position
    return (body.lineno, body.col_offset)


def _body_end(node: _Def) -> tuple[int, int]:
    body = cast(ast.Lambda, node).body
    return (body.end_lineno or body.lineno, body.end_col_offset or 0)


def why_no_source(fn: Any) -> str | None:
    """Why overdub cannot read the source of Python function ``fn``, for an error message
    (one line), or None: it can, or ``fn`` is no Python function (C functions are leaves by
    nature).  Methods are looked through to their function.

    Example::

        why_no_source(eval("lambda x: x"))   # 'it was made by exec/eval/compile of a string...'
    """
    func = getattr(fn, "__func__", fn)
    if not isinstance(func, types.FunctionType):
        return None
    from . import _cache  # (which imports this module)
    found = _cache._checked_source(func.__code__, func.__globals__)
    return found.reason if isinstance(found, NoSource) else None
