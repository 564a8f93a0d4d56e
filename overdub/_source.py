"""Find the AST of the code that actually runs.

Source is looked up through the *code object* (never ``inspect.getsource(fn)``, which follows
``__wrapped__``), read with ``linecache`` so loader-backed modules and IPython cells work.  A
``def`` is parsed from its own lines (:func:`locate_def`: the first call of a function in a large
module does not pay for parsing the module); lambdas, and anything that fails there, from the whole
file, parsed once and indexed (:func:`locate`).  Failure is a value, :class:`NoSource`, carrying a
reason (builtin, no source, ambiguous lambda, ...), never an exception: the dispatcher turns it
into a leaf call.
"""

from __future__ import annotations

import ast
import contextlib
import linecache
import operator
import os
import re
import tokenize
import threading
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from . import _generated, _rewrite

_Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda  # what code objects compile from


@dataclass(frozen=True)
class NoSource:
    """Why a code object cannot be rewritten; ``actionable`` reasons deserve one warning."""

    reason: str
    actionable: bool = False


class Located:
    """A function's node in its parsed file, with what compiling it faithfully needs.

    ``node`` is shared with the parsed-file cache: deep-copy before changing it.
    ``class_name`` is the innermost enclosing class (private names are mangled with it).
    ``passes_applied``: the node already went through the context's passes.
    ``lines``: the text ``node`` was parsed from, where it is a file's (see :func:`fresh_node`).

    A ``def`` found by :func:`locate_def` gives its node away to be rewritten (:meth:`detach`)
    and keeps only where it is in ``lines``: ``node`` parses it again when someone asks.
    """

    __slots__ = ("_node", "class_name", "passes_applied", "lines", "_span")

    def __init__(self, node: _Def, class_name: str | None, passes_applied: bool = False,
                 lines: list[str] | None = None) -> None:
        self._node: _Def | None = node
        self.class_name = class_name
        self.passes_applied = passes_applied  # a nested function compiled from a pass's tree
        self.lines = lines
        self._span: _Span | None = None  # where the detached node is in lines

    @property
    def node(self) -> _Def:
        node = self._node
        if node is None:  # detached: parsed again (a benign race: threads parse alike)
            assert self.lines is not None and self._span is not None
            node = _parse_span(self.lines, self._span)
            if node is None:  # pragma: no cover -- the same text parsed alike before
                raise RuntimeError("overdub: a located definition no longer parses")
            self._node = node
        return node

    def detach(self) -> _Def:
        """Give the node away (to be changed, by its only holder: call before this Located
        is shared) and keep where it is, to parse it again for whoever asks later."""
        node = self.node
        assert self.lines is not None and not isinstance(node, ast.Lambda)
        self._span = _span_of(node)
        self._node = None
        return node


# A def's place in its lines: (kind, name, first line (its first decorator's), line, column,
# end line, end column), as parsing its lines again must find it.
_Span = tuple[type, str, int, int, int, int, int]


def _span_of(node: ast.FunctionDef | ast.AsyncFunctionDef) -> _Span:
    first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
    return (type(node), node.name, first, node.lineno, node.col_offset,
            node.end_lineno or node.lineno, node.end_col_offset or 0)


def _parse_span(lines: list[str], span: _Span) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The ``def`` at ``span`` parsed again from its own lines, or None if that is not what
    they hold."""
    found = _parse_def(lines, span[2], span[5], span[4] > 0)
    return found if found is not None and _span_of(found) == span else None


_REPARSED = "<overdub: a def parsed again>"  # (the file name its parse's warnings would name)


def _parse_def(lines: list[str], first: int, end: int, indented: bool
               ) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The ``def`` statement that ``lines`` ``first`` to ``end`` hold, parsed from them alone at
    their line numbers and columns (an indented one inside ``if 1:`` on the line before), or
    None."""
    if first <= indented or end > len(lines):
        return None
    head = "\n" * (first - 1 - indented) + ("if 1:\n" if indented else "")
    try:
        with compiling(_REPARSED):
            tree = ast.parse(head + "".join(lines[first - 1:end]), _REPARSED)
    except (SyntaxError, ValueError):
        return None
    body = cast(ast.If, tree.body[0]).body if indented and tree.body else tree.body
    if len(body) != 1 or not isinstance(body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    return body[0]


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
# CPython 3.11's conversions between Python and C ASTs (compile() of an AST, ast.parse) count
# their recursion depth in state shared by all threads: concurrent calls can fail with
# "SystemError: AST constructor recursion depth mismatch".  The core's take turns (see
# `compiling`).
AST_LOCK = threading.Lock()


@contextlib.contextmanager
def compiling(filename: str) -> Iterator[None]:
    """``AST_LOCK`` held, with the warnings that parsing or compiling text as ``filename``
    gives ignored: every place the core parses or compiles user source does it in here.

    Python warned about that source (``"is" with a literal``, ``invalid escape sequence``) when
    it compiled the user's module; doing it again for our copy would print them twice, and
    under an error filter (``pytest -W error``) fail a function that runs natively.  Not
    ``warnings.catch_warnings``, which swaps the global filter list (another thread's
    ``simplefilter`` meanwhile would be undone, its warnings ignored too): one filter goes at
    the front of the list and out again, and it matches only warnings whose module is the one
    the compiler names after ``filename`` (its path less ``.py``), which a warning issued at
    run time (named after the module's ``__name__``) does not have.  An "ignore" filter
    records nothing in the warning registries, so nothing else changes."""
    module = filename[:-3] if filename.endswith(".py") else filename
    entry = ("ignore", None, Warning, re.compile(re.escape(module) + r"\Z"), 0)
    with AST_LOCK:
        filters = cast("list[Any]", warnings.filters)  # (a list: typeshed says Sequence)
        filters.insert(0, entry)
        try:
            yield
        finally:
            for index, found in enumerate(filters):
                if found is entry:
                    del filters[index]
                    break


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
        with compiling(filename):
            tree = ast.parse("".join(lines), filename)
    except (SyntaxError, ValueError) as exc:
        return NoSource(f"source of {filename!r} does not parse: {exc}", actionable=True)
    return _index(tree, lines)


def fresh_node(located: Located) -> _Def:
    """A copy of ``located.node`` to change: a ``def`` parsed again from its own lines of the
    file, at their line numbers and columns (the parser, in C, is a few times faster than
    copying the tree in Python), or, for lambdas, nodes from other trees and anything that does
    not parse back to the same definition, a copy."""
    lines = located.lines
    if lines is not None:
        span = located._span
        if span is None:
            node = located.node
            if not isinstance(node, ast.Lambda) and node.end_lineno is not None:
                span = _span_of(node)
        if span is not None:
            found = _parse_span(lines, span)
            if found is not None:
                return found
    return _rewrite.copy_tree(located.node)


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


def lambdas_at(code: types.CodeType, candidates: list[Located]) -> list[Located] | None:
    """Which of the lambdas ``candidates`` (all on ``code``'s first line) compiled to ``code``,
    told by where its body's instructions are (the innermost body holding their start: a
    lambda's body may hold another's; several if that does not tell them apart), or None
    without column positions (3.10)."""
    start = _lambda_columns(code)
    if start is None:
        return None
    placed = [c for c in candidates if _body_start(c.node) <= start <= _body_end(c.node)]
    innermost = max((_body_start(c.node) for c in placed), default=None)
    return [c for c in placed if _body_start(c.node) == innermost]


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
            placed = lambdas_at(code, candidates)
            if placed is None:
                scores = [likeness(c) for c in candidates]
                candidates = [c for c, score in zip(candidates, scores)
                              if score and score == max(scores)]
                if len({ast.dump(c.node) for c in candidates}) == 1:
                    candidates = candidates[:1]  # the same lambda twice: either one is the source
            else:
                candidates = placed
    else:
        candidates = parsed.defs.get((code.co_name, code.co_firstlineno), [])
    if otherwise is not None and (len(candidates) != 1 or not likeness(candidates[0])):
        return NoSource(otherwise)
    if len(candidates) != 1:
        what = "no matching definition" if not candidates else "several matching definitions"
        return NoSource(f"{what} for {code.co_name} at {filename}:{code.co_firstlineno}",
                        actionable=True)
    return candidates[0]


def locate_def(code: types.CodeType, module_globals: dict[str, Any] | None) -> Located | None:
    """``code``'s ``def`` parsed from its own lines alone, without parsing its whole file, or
    None where that cannot be done (a lambda, no file, Python 3.10, an enclosing class its
    qualified name does not tell): then :func:`locate` parses the file.

    The lines run from ``co_firstlineno`` (its first decorator) to the last line of the last
    statement, and its innermost enclosing class is read off ``co_qualname`` (a name followed
    by ``<locals>`` is a function's; any other, a class's).  A guess about the class, like one
    about where the ``def`` ends, is only used if it compiles to ``code`` (the caller checks).
    """
    filename = code.co_filename
    qualname = getattr(code, "co_qualname", None)
    if qualname is None or code.co_name.startswith("<") or filename.startswith("<"):
        return None
    class_name = None
    parts = qualname.split(".")[:-1]
    for index in range(len(parts) - 1, -1, -1):
        part = parts[index]
        if part.startswith("<"):
            if part == "<locals>":
                continue
            return None  # (3.12+ "<generic parameters of f>" and the like)
        if index + 1 < len(parts) and parts[index + 1] == "<locals>":
            continue  # a function around it
        class_name = part
        break
    lines = linecache.getlines(filename, module_globals)
    first = code.co_firstlineno
    if not first <= len(lines):
        return None
    head = lines[first - 1]
    indent = len(head) - len(head.lstrip())
    # The last statement starts on the last line an instruction starts on (code defined
    # inside is made by instructions spanning its definition) and may go on past it (closing
    # brackets, a string's last lines): up to the next line of code indented no deeper than
    # the def, which is not the def's...
    end = max(filter(None, map(_line_of, code.co_lines())), default=first)
    while end < len(lines):
        text = lines[end]  # (the line after line `end`)
        stripped = text.lstrip()
        if stripped and stripped[0] != "#" and len(text) - len(stripped) <= indent:
            break
        end += 1
    found = _parse_def(lines, first, end, indent > 0)
    if found is None:  # ... unless a bracket or string went on at that indent: where the
        # instructions' positions end, which takes longer to read
        last = max(filter(None, map(_end_line_of, cast(Any, code).co_positions())), default=first)
        if last != end:
            found = _parse_def(lines, first, last, indent > 0)
    if found is None or found.name != code.co_name or _span_of(found)[2] != first:
        return None
    return Located(found, class_name, lines=lines)


_line_of, _end_line_of = operator.itemgetter(2), operator.itemgetter(1)


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
