"""Compile rewritten code, faithfully, and cache it.

The located ``def`` (after the context's passes and the overdub rewrite) is wrapped in a synthetic
factory whose parameters are the function's free variables plus the hidden ``@`` names, and, for
methods, in a synthetic class of the original name so private names mangle as before.  The module
is compiled against the user's file name with the user's ``__future__`` flags; nothing in it is
executed: we take the function's code object out of the constants.

Cache key: ``(code identity, context class, pass fingerprint, intercepted categories)``.  Entries
are keyed by ``id(code)`` with a weak reference to the code (hashing a code object costs its size)
and evicted when the code dies; the context class is held weakly too (:func:`class_key`), and its
entries go when it dies, so programs that make context classes on the fly do not grow without
bound.  The value is a code object, never a function, so the cache keeps no module alive.
Publishing is "first writer wins"; rewriting is deterministic.  Rewrites without passes are
also kept on disk for the next process (:mod:`._persist`).
"""

from __future__ import annotations

import __future__
import ast
import contextlib
import copy
import dis
import gc
import inspect
import linecache
import re
import sys
import threading
import types
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from . import _frames, _generated, _persist, _primitives, _source
from ._rewrite import EMBEDDED, HIDDEN_CONSTANTS, Overdubber, copy_tree

_N = TypeVar("_N", bound=ast.AST)
_FUTURE_FLAGS = 0
for _feature in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _feature).compiler_flag


@dataclass(frozen=True)
class Rewritten:
    """A rewritten code object and how to build its closure."""

    code: types.CodeType
    # For each of code.co_freevars: the constant cell to use, or None for a user cell or a
    # per-context dispatcher cell (looked up by name when the function is built).
    constant_cells: tuple[types.CellType | None, ...]
    # The module globals the function assigns (``global x; x = ...``), comprehensions inside
    # included: a tagging context makes sure they hold plain values when its run ends.
    global_stores: frozenset[str] = frozenset()


_CONSTANT_CELLS = {name: types.CellType(value) for name, value in HIDDEN_CONSTANTS.items()}
# id(code) -> (weak ref to code, {cache key: Rewritten | NoSource, "source": Located | NoSource})
_by_code: dict[int, tuple[weakref.ref[types.CodeType], dict[Any, Any]]] = {}
_lock = threading.Lock()
# id(code) -> the code warned about (by identity: equal code objects of two files are equal)
_warned: dict[int, weakref.ref[types.CodeType]] = {}


def _entries(code: types.CodeType) -> dict[Any, Any]:
    slot = _by_code.get(id(code))
    if slot is not None and slot[0]() is code:
        return slot[1]
    key = id(code)

    def evict(_ref: weakref.ref[types.CodeType], key: int = key,
              _by_code: dict[int, Any] = _by_code) -> None:
        # No lock: this runs whenever a code object dies, also inside a garbage collection
        # triggered while this thread holds `_lock`.  Dict operations are atomic; at worst a
        # racing insert under a reused id is dropped, which is only a cache miss.
        slot = _by_code.get(key)
        if slot is not None and slot[0] is _ref:
            _by_code.pop(key, None)

    with _lock:
        slot = _by_code.get(key)
        if slot is None or slot[0]() is not code:
            slot = (weakref.ref(code, evict), {})
            _by_code[key] = slot
    return slot[1]


class ClassKey:
    """A context class as it appears in cache keys: compared by identity, holding the class
    weakly.  ``codes`` are the ids of the code objects with entries for it, dropped from the
    cache when the class dies."""

    __slots__ = ("ref", "codes")

    def __init__(self, cls: type) -> None:
        self.ref = weakref.ref(cls, self._class_died)
        self.codes: set[int] = set()

    def _class_died(self, _ref: weakref.ref[type]) -> None:
        # No lock, as in _entries' eviction: this can run inside a collection.  (Called only
        # while cache entries keep this key alive; with none, there is nothing to drop.)
        for code_id in list(self.codes):
            slot = _by_code.get(code_id)
            if slot is not None:
                entries = slot[1]
                for key in [k for k in list(entries) if type(k) is tuple and k[0] is self]:
                    entries.pop(key, None)


def class_key(cls: type) -> ClassKey:
    """The cache-key stand-in for context class ``cls`` (one per class, kept on it)."""
    found = cls.__dict__.get("_overdub_class_key")
    if type(found) is ClassKey and found.ref() is cls:
        return found
    made = ClassKey(cls)
    setattr(cls, "_overdub_class_key", made)
    return made


def cached_rewrite(code: types.CodeType, module_globals: dict[str, Any], key: tuple[Any, ...],
                   passes: tuple[Any, ...], categories: frozenset[str],
                   observe: bool) -> Rewritten | _source.NoSource:
    """The rewritten form of ``code`` for ``key`` (a :class:`ClassKey` first, then passes and
    categories).  A key whose pass fingerprint is None (passes whose configuration cannot be
    read exactly) is not cached: the rewrite is made for the caller alone."""
    entries = _entries(code)
    found: Rewritten | _source.NoSource | None = entries.get(key)
    if found is None:
        found = _rewrite_or_load(code, module_globals, passes, categories, observe)
        if key[1] is not None:
            found = entries.setdefault(key, found)
            key[0].codes.add(id(code))
        warned = _warned.get(id(code))
        if isinstance(found, _source.NoSource) and found.actionable and \
                (warned is None or warned() is not code):
            _warned[id(code)] = weakref.ref(code)
            name = code.co_qualname if hasattr(code, "co_qualname") else code.co_name
            warnings.warn(f"overdub: running {name} natively: {found.reason}", RuntimeWarning,
                          stacklevel=_user_stacklevel())
    return found


def _user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning issued by :func:`cached_rewrite` name the user's
    line that made the call (the nearest frame that is not overdub's machinery), where a
    warning can be acted on, not the dispatcher's."""
    target = _frames.user_frame(1)
    frame: types.FrameType | None = sys._getframe(1)  # cached_rewrite's
    level = 1
    while frame is not None and frame is not target:
        frame, level = frame.f_back, level + 1
    return level if frame is not None else 2


def _rewrite_or_load(code: types.CodeType, module_globals: dict[str, Any],
                     passes: tuple[Any, ...], categories: frozenset[str], observe: bool
                     ) -> Rewritten | _source.NoSource:
    """:func:`_rewrite`, or what an earlier process rewrote the same way (see
    :mod:`._persist`: rewrites without passes, kept on disk with the trees of the functions
    defined inside, which :func:`_record_nested` remembers again)."""
    name = None if passes else _persist.key(code, module_globals, categories, observe)
    if name is not None:
        kept = _persist.load(name)
        if kept is not None:
            new, stores, nested = kept
            _attach_nested(new, nested)
            return Rewritten(new, _cells(new), stores)
    with _collector_paused():
        found = _rewrite(code, module_globals, passes, categories, observe)
    if name is not None and not isinstance(found[0], _source.NoSource):
        _persist.store(name, found[0].code, found[0].global_stores, found[1])
    return found[0]


_pause_lock = threading.Lock()
_pauses = 0  # rewrites in progress, in all threads
_collector_was_on = False


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a function is rewritten.  A rewrite builds
    thousands of AST nodes, alive until it ends and then freed by their reference counts: the
    collections their allocation triggers would only scan them, and a full one, scanning every
    object of the program, can cost the first call as much as its rewriting (a millisecond in
    a program that imported NumPy).  The first rewrite to start turns the collector off, if it
    was on, and the last to end turns it back on."""
    global _pauses, _collector_was_on
    with _pause_lock:
        if _pauses == 0:
            _collector_was_on = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses -= 1
            if _pauses == 0 and _collector_was_on:
                gc.enable()


def has_source(code: types.CodeType, module_globals: dict[str, Any]) -> bool:
    """Whether ``code``'s source can be found and still compiles to it."""
    return isinstance(_checked_source(code, module_globals), _source.Located)


def _checked_source(code: types.CodeType, module_globals: dict[str, Any]
                    ) -> _source.Located | _source.NoSource:
    """Locate ``code``'s source and make sure it still compiles to ``code`` (not edited since)."""
    return _checked(code, module_globals, take=False)[0]


def _checked(code: types.CodeType, module_globals: dict[str, Any], take: bool
             ) -> tuple[_source.Located | _source.NoSource, _source._Def | None]:
    """:func:`_checked_source`, and, if ``take``, the node this call parsed to check it where
    it did and no one else holds it: a copy to change (then the first rewrite parses nothing
    of its own)."""
    entries = _entries(code)
    found: _source.Located | _source.NoSource | None = entries.get("source")
    if found is not None:
        return found, None
    fingerprint = _fingerprint(code)

    def likeness(candidate: _source.Located) -> int:
        """2: compiles to the very bytecode; 1: to the same fingerprint; 0: neither."""
        compiled = _compile(code, candidate, candidate.node, [])
        if _fingerprint(compiled) != fingerprint:
            as_pytest = _with_pytest_asserts(code, candidate.node, module_globals)
            if as_pytest is None or \
                    _fingerprint(_compile(code, candidate, as_pytest, [])) != fingerprint:
                return 0
            return 1
        return 2 if compiled.co_code == code.co_code else 1

    spare = None
    quick = _source.locate_def(code, module_globals)  # (a def: its lines alone parsed)
    if quick is not None and likeness(quick):
        found = quick
        if take:
            spare = quick.detach()  # (not shared yet)
    else:
        found = _located(code, module_globals, likeness)
        if isinstance(found, _source.NoSource) and found.actionable:
            if _made_up(code.co_filename):
                found = _compiled_text(code, module_globals, likeness)
            elif not code.co_filename.startswith("<"):
                # linecache may hold the file as it was when first read: a module edited and
                # reloaded since (importlib.reload) was compiled from the new text, on disk.
                on_disk = _located(code, module_globals, likeness, on_disk=True)
                if isinstance(on_disk, _source.Located):
                    found = on_disk
    published = entries.setdefault("source", found)
    return published, spare if published is found else None


def _located(code: types.CodeType, module_globals: dict[str, Any],
             likeness: Callable[[_source.Located], int], on_disk: bool = False
             ) -> _source.Located | _source.NoSource:
    """``code``'s node in its source as ``linecache`` has it (or as the file is ``on_disk``),
    if it compiles to ``code``."""
    found = _source.locate(code, module_globals, likeness, on_disk)
    if isinstance(found, _source.Located) and not likeness(found):
        return _source.NoSource(f"its source in {code.co_filename} changed after it was "
                                f"compiled", actionable=True)
    return found


def _made_up(filename: str) -> bool:
    """Whether ``filename`` is a name that ``compile`` was given for text of no file, which
    ``linecache`` does not know it should refuse: ``<string>`` and the like it refuses, but for
    ``<class 'networkx.utils.decorators.argmap'> compilation 4`` it returns the lines of the
    module whose globals it is given (its loader's ``get_source``, meant for that module's own
    file), which do not hold the code."""
    return filename.startswith("<") and not filename.endswith(">")


def _compiled_text(code: types.CodeType, module_globals: dict[str, Any],
                   likeness: Callable[[_source.Located], int]
                   ) -> _source.Located | _source.NoSource:
    """``code``'s ``def`` in the text it was compiled from, where its file name is made up
    (:func:`_made_up`) and what ``linecache`` gave for that name does not hold it: the text a
    context saw given to ``compile`` (``_generated``), as networkx compiles its ``argmap``
    wrappers when one is first called.  Without it (compiled before any context ran), no
    source and no warning: the user cannot act on a library's way of making code."""
    generated = _generated.find(code, module_globals)
    if isinstance(generated, str):
        return _source.NoSource(generated)
    if generated.parsed is None:  # (a benign race, as in _source: both parse the same text)
        generated.parsed = _source._parse(generated.lines, code.co_filename)
    parsed = generated.parsed
    if isinstance(parsed, _source.NoSource):
        return parsed
    candidates = parsed.defs.get((code.co_name, code.co_firstlineno), [])
    if len(candidates) == 1 and likeness(candidates[0]):
        return cast(_source.Located, candidates[0])
    return _source.NoSource(f"it was generated ({code.co_filename}) and the text compiled "
                            f"there does not hold it")


def _with_pytest_asserts(code: types.CodeType, node: _source._Def,
                         module_globals: dict[str, Any]) -> _source._Def | None:
    """``node`` with its ``assert`` statements rewritten as pytest rewrites them when it
    imports a test module (or a conftest or plugin), for comparing with ``code``; None if
    ``code`` shows no such rewriting.  The function is then rewritten from its source as
    written: a failing assert raises a plain ``AssertionError`` under a context."""
    if "@pytest_ar" not in code.co_names and \
            not any(name.startswith("@py_assert") for name in code.co_varnames):
        return None
    rewrite = sys.modules.get("_pytest.assertion.rewrite")  # imported by pytest, if running
    if rewrite is None or not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return None
    module = ast.Module(body=[copy_tree(node)], type_ignores=[])
    source = "".join(linecache.getlines(code.co_filename, module_globals)).encode()
    try:
        rewrite.rewrite_asserts(module, source, code.co_filename, None)
    except Exception:  # a pytest that rewrites differently: the function runs natively
        return None
    defs = [n for n in module.body if isinstance(n, type(node))]  # after pytest's imports
    return defs[0] if len(defs) == 1 else None


# The compiler picks among these by what it knows of the *module* (3.11+ loads an imported
# module's attribute with LOAD_ATTR, not LOAD_METHOD), which a lone function cannot reproduce;
# jump offsets (and so EXTENDED_ARG) move with them.  CACHE entries are not instructions.
_CONTEXT_DEPENDENT = bytes(dis.opmap[name] for name in (
    "LOAD_METHOD", "LOAD_ATTR", "PUSH_NULL", "PRECALL", "CALL", "CALL_METHOD", "CALL_FUNCTION",
    "PRECALL_METHOD", "EXTENDED_ARG", "CACHE", "NOP")
    if dis.opmap.get(name, 256) < 256)  # 3.12+ lists pseudo-opcodes (LOAD_METHOD) from 256 up


def _fingerprint(code: types.CodeType) -> tuple[Any, ...]:
    """What must agree between a function's code and its source compiled again (cheap: the
    opcode sequence, the arguments of the instructions whose argument is the operation --
    ``+`` or ``-``, ``<`` or ``>`` are one opcode, told apart by it --, names, constants and
    variables, compared as byte strings and tuples) -- and the same of the code nested in it
    (a ``lambda``, ``def``, comprehension or class body), which a context rewrites with it: an
    edit there is an edit of the function)."""
    raw = code.co_code
    opcodes = raw[::2]
    operations = bytes(arg for op, arg in zip(opcodes, raw[1::2]) if op in _OPERATIONS)
    consts = tuple((c.co_name, _fingerprint(c)) if isinstance(c, types.CodeType) else
                   sorted(map(repr, c)) if isinstance(c, frozenset) else repr(c)  # hash order
                   for c in code.co_consts)
    return opcodes.translate(None, _CONTEXT_DEPENDENT), operations, consts, code.co_names, \
        _names_used(code), code.co_varnames, code.co_argcount, code.co_kwonlyargcount


# Instructions whose argument names a global or attribute (index into co_names, shifted past
# flag bits where the version packs some in), the name being the same whichever form of the
# instruction the compiler picks: ``sum(a)`` and ``np.sum(a)`` have the same names and, without
# the context-dependent attribute loads, the same opcodes.
_NAME_SHIFTS = {dis.opmap[name]: shift for name, shift in (
    ("LOAD_GLOBAL", 1 if sys.version_info >= (3, 11) else 0),
    ("LOAD_ATTR", 1 if sys.version_info >= (3, 12) else 0), ("LOAD_METHOD", 0),
    ("LOAD_SUPER_ATTR", 2), ("STORE_ATTR", 0), ("DELETE_ATTR", 0), ("LOAD_NAME", 0),
    ("STORE_GLOBAL", 0), ("DELETE_GLOBAL", 0), ("IMPORT_NAME", 0), ("IMPORT_FROM", 0))
    if dis.opmap.get(name, 256) < 256}
_EXTENDED_ARG = dis.opmap["EXTENDED_ARG"]
_NAME_OPCODES = re.compile(b"[" + b"".join(re.escape(bytes([op])) for op in _NAME_SHIFTS)
                           + b"]")


def _names_used(code: types.CodeType) -> tuple[str, ...]:
    """The names ``code``'s instructions load, store and import, in order (the instructions
    found by a search of the opcodes: a function's first call computes this twice)."""
    raw, names, shifts = code.co_code, code.co_names, _NAME_SHIFTS
    opcodes = raw[::2]
    used = []
    for found in _NAME_OPCODES.finditer(opcodes):
        at = found.start()
        arg, before, shift = raw[2 * at + 1], at - 1, 8
        while before >= 0 and opcodes[before] == _EXTENDED_ARG:
            arg |= raw[2 * before + 1] << shift
            before, shift = before - 1, shift + 8
        used.append(names[arg >> shifts[opcodes[at]]])
    return tuple(used)


# Instructions whose argument says which operation they make (3.11+'s BINARY_OP for every
# binary operator; comparisons, `is`, `in`) or on what (a local variable, a constant: `f(a, b)`
# and `f(b, a)` differ only there), the same wherever the function is compiled
_OPERATIONS = frozenset(dis.opmap[name] for name in (
    "BINARY_OP", "COMPARE_OP", "IS_OP", "CONTAINS_OP", "LOAD_CONST", "LOAD_FAST",
    "STORE_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "LOAD_FAST_LOAD_FAST",
    "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST", "LOAD_DEREF", "STORE_DEREF")
    if dis.opmap.get(name, 256) < 256)


def _apply_pass(a_pass: ast.NodeTransformer | Callable[[ast.AST], Any], node: _N,
                code: types.CodeType) -> _N:
    try:
        result = a_pass.visit(node) if isinstance(a_pass, ast.NodeTransformer) else a_pass(node)
    except BaseException as exc:  # the pass's own error, unchanged but for where it arose
        _primitives.add_note(exc, f"(raised in the overdub pass {a_pass!r} while rewriting "
                                  f"{code.co_name} ({code.co_filename}:{code.co_firstlineno}))")
        raise
    if not isinstance(result, type(node)):
        raise ValueError(f"overdub pass {a_pass!r} returned {type(result).__name__} for "
                         f"{code.co_name} ({code.co_filename}:{code.co_firstlineno}); "
                         f"a pass must return the {type(node).__name__} it was given")
    return result


def _check_tree(a_pass: Any, node: _N, code: types.CodeType) -> None:
    """A ``ValueError`` naming the pass and the function if the tree ``a_pass`` returned is not
    one CPython's compiler accepts (a required field left None, a statement where an
    expression goes): said at the pass, not as an error of the overdub rewrite that would
    trip over it next.  The compiler's own validation says what is wrong; a ``SyntaxError``
    is not the tree's shape but its place (a ``nonlocal`` compiled outside its function),
    checked when the rewritten function is compiled where it belongs.  Runs once per
    function and passes: the result is cached."""
    lambda_ = isinstance(node, ast.Lambda)
    tree = ast.Expression(node) if isinstance(node, ast.Lambda) else \
        ast.Module([cast(ast.stmt, node)], [])
    try:
        with _source.compiling(code.co_filename):  # (its warnings: the user's, given once)
            compile(tree, code.co_filename, "eval" if lambda_ else "exec", dont_inherit=True)
    except SyntaxError:
        return
    except (ValueError, TypeError) as exc:
        raise ValueError(f"overdub pass {a_pass!r} produced an invalid tree for {code.co_name} "
                         f"({code.co_filename}:{code.co_firstlineno}): {exc}") from None


def _rewritten_tree(code: types.CodeType, module_globals: dict[str, Any],
                    passes: tuple[Any, ...], categories: frozenset[str], observe: bool
                    ) -> tuple[_source.Located, _source._Def, Overdubber] | _source.NoSource:
    """``code``'s located source, its tree after the passes and the overdub rewrite, and the
    rewriter (which knows the hidden names the tree uses)."""
    located, spare = _checked(code, module_globals, take=True)
    if isinstance(located, _source.NoSource):
        return located
    node = spare if spare is not None else _source.fresh_node(located)
    if not located.passes_applied and passes:
        for a_pass in passes:
            node = _apply_pass(a_pass, node, code)
            ast.fix_missing_locations(node)  # passes may leave new nodes unpositioned
            _check_tree(a_pass, node, code)
    fast_locals = frozenset(code.co_varnames) - frozenset(code.co_cellvars)
    rewriter = Overdubber(categories, located.class_name, observe, fast_locals, code)
    text = None  # the source of the node, if no pass made it
    if located.lines is not None and not passes and not located.passes_applied \
            and not isinstance(node, ast.Lambda) and node.end_lineno is not None:
        first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        text = "".join(located.lines[first - 1:node.end_lineno])
    rewriter.rewrite_function(node, text)
    return located, node, rewriter


def rewritten_source(code: types.CodeType, module_globals: dict[str, Any],
                     passes: tuple[Any, ...], categories: frozenset[str], observe: bool
                     ) -> str | _source.NoSource:
    """The source of ``code`` as a context with these passes and categories runs it."""
    found = _rewritten_tree(code, module_globals, passes, categories, observe)
    if isinstance(found, _source.NoSource):
        return found
    return ast.unparse(found[1])


def _rewrite(code: types.CodeType, module_globals: dict[str, Any], passes: tuple[Any, ...],
             categories: frozenset[str], observe: bool
             ) -> tuple[Rewritten | _source.NoSource, _Nested]:
    """The rewritten code, with the trees of the functions defined inside it."""
    found = _rewritten_tree(code, module_globals, passes, categories, observe)
    if isinstance(found, _source.NoSource):
        return found, {}
    located, node, rewriter = found
    try:
        new = _compile(code, located, node, sorted(rewriter.used), rewriter.imported)
    except (SyntaxError, ValueError, TypeError) as exc:
        if not passes:
            raise  # our own bug: let it be seen
        raise ValueError(f"overdub: the passes {list(passes)!r} produced invalid code for "
                         f"{code.co_name} ({code.co_filename}:{code.co_firstlineno}): {exc}"
                         ) from exc
    nested = _record_nested(new, node, located.class_name, bool(passes))
    return Rewritten(new, _cells(new), _global_stores(code)), nested


def _cells(new: types.CodeType) -> tuple[types.CellType | None, ...]:
    return tuple(_CONSTANT_CELLS.get(name) or EMBEDDED.get(name) for name in new.co_freevars)


_STORES_GLOBAL = frozenset((dis.opmap["STORE_GLOBAL"], dis.opmap["DELETE_GLOBAL"]))
_STORE_GLOBAL_OPS = tuple(bytes([op]) for op in _STORES_GLOBAL)
_COMPREHENSIONS = frozenset(("<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>"))


def _global_stores(code: types.CodeType) -> frozenset[str]:
    """The global names ``code`` (or a comprehension compiled inside it) assigns or deletes.
    Other functions defined inside are rewritten, and looked at, when they are called."""
    names: frozenset[str] = frozenset()
    opcodes = code.co_code[::2]  # (the odd bytes are arguments)
    if any(op in opcodes for op in _STORE_GLOBAL_OPS):
        names = frozenset(instruction.argval for instruction in dis.get_instructions(code)
                          if instruction.opcode in _STORES_GLOBAL)
    for const in code.co_consts:
        if isinstance(const, types.CodeType) and const.co_name in _COMPREHENSIONS:
            names |= _global_stores(const)
    return names


# (name, first line) of a function defined inside rewritten code -> its candidate trees
_Nested = dict[tuple[str, int], list[_source.Located]]


def _record_nested(compiled: types.CodeType, node: ast.AST, class_name: str | None,
                   passes_applied: bool) -> _Nested:
    """Remember the AST of the functions defined inside ``compiled`` (and return them, to be
    kept on disk with it).

    Their bodies were compiled from our (pass-transformed) tree, not from the file: when one is
    called and recursed into, it is rewritten from that tree, without looking the source up
    again (the file would not match a body the passes changed).
    """
    if not any(isinstance(const, types.CodeType) for const in compiled.co_consts):
        return {}  # nothing defined inside: skip walking the (large, rewritten) tree
    nested: _Nested = {}
    # each function with the innermost class around it, which mangles its private names
    to_visit = [(child, class_name) for child in ast.iter_child_nodes(node)]
    while to_visit:
        child, enclosing_class = to_visit.pop()
        key = None
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            key = (child.name, child.decorator_list[0].lineno if child.decorator_list
                   else child.lineno)
        elif isinstance(child, ast.Lambda):
            key = ("<lambda>", child.lineno)
        if key is not None:
            nested.setdefault(key, []).append(_source.Located(
                cast(_source._Def, child), enclosing_class, passes_applied=passes_applied))
        inner = child.name if isinstance(child, ast.ClassDef) else enclosing_class
        to_visit.extend((grandchild, inner) for grandchild in ast.iter_child_nodes(child))
    _attach_nested(compiled, nested)
    return nested


def _attach_nested(compiled: types.CodeType, nested: _Nested) -> None:
    """Give each code object defined inside ``compiled`` its tree among ``nested``."""
    pending = list(compiled.co_consts) if nested else []
    while pending:
        const = pending.pop()
        if not isinstance(const, types.CodeType):
            continue
        pending.extend(const.co_consts)
        candidates = nested.get((const.co_name, const.co_firstlineno), [])
        if len(candidates) > 1 and const.co_name == "<lambda>":  # several on one line
            candidates = _source.lambdas_at(const, candidates) or []  # (ambiguous: skipped)
        if len(candidates) == 1:  # a class body or comprehension has no node here: skipped
            _entries(const).setdefault("source", candidates[0])


def _compile(code: types.CodeType, located: _source.Located, node: _source._Def,
             hidden: list[str], imported: Sequence[str] = ()) -> types.CodeType:
    """``node`` compiled as ``code`` was, with the ``hidden`` names as free variables and
    the module's ``imported`` names known to the compiler (see
    ``Overdubber._note_imported``)."""
    synthetic: list[ast.AST] = []  # the wrapper nodes we add, positioned at the function
    target: ast.stmt
    if isinstance(node, ast.Lambda):
        # Its defaults are evaluated where it is made, not by its code: constants in their
        # place, so that a lambda among them (`lambda a, b=lambda c: c + 1: b(a)`) compiles to
        # no second lambda of this line for `_find_code` to take for it.
        node = _without_defaults(node)
        target = ast.Expr(node)
        synthetic.append(target)
    else:
        # A renamed shallow copy, so the def binds nothing the function could see (a recursive
        # `fib` inside `fib` must stay a global lookup, not a free variable of the factory) and
        # the shared parsed tree is not changed.
        renamed = copy.copy(node)
        renamed.name = "@target"
        target = renamed
    body: list[ast.stmt] = [target]
    if located.class_name is not None:
        # class @holder: class Name: def f -- the class mangles private names as before, and
        # binding it inside a class body keeps `Name` out of f's scope (it stays global).
        for name in (located.class_name, "@holder"):
            body = [ast.ClassDef(name=name, bases=[], keywords=[], body=body, decorator_list=[])]
            synthetic.append(body[0])
    params = [ast.arg(arg=name) for name in dict.fromkeys((*code.co_freevars, *hidden))
              if name != "__class__" or located.class_name is None]
    arguments = ast.arguments(posonlyargs=[], args=params, vararg=None, kwonlyargs=[],
                              kw_defaults=[], kwarg=None, defaults=[])
    factory = ast.FunctionDef(name="@factory", args=arguments, body=body, decorator_list=[],
                              returns=None)
    module = ast.Module(body=[factory], type_ignores=[])
    if _super_unoptimised(code):
        # 3.12+ compiles `super().name` to LOAD_SUPER_ATTR unless the module's top level names
        # `super`; the user's module did: so does ours (the statement is never executed).
        mention = ast.Expr(ast.Name("super", ast.Load()))
        module.body.append(mention)
        synthetic.extend((mention, mention.value))
    if imported:
        # Names the user's module imports, which functions defined inside call methods of:
        # the compiler gives such calls the form it gave them there (never executed either).
        aliases = [ast.alias(name) for name in imported]
        module.body.append(ast.Import(aliases))
        synthetic.extend((module.body[-1], *aliases))
    for wrapper in (factory, arguments, *params, *synthetic):
        wrapper.lineno = wrapper.end_lineno = node.lineno  # type: ignore[attr-defined]
        wrapper.col_offset = wrapper.end_col_offset = 0  # type: ignore[attr-defined]
        if "type_params" in wrapper._fields:  # 3.12+
            wrapper.type_params = []  # type: ignore[attr-defined]
    with _source.compiling(code.co_filename):
        compiled = compile(module, code.co_filename, "exec",
                           flags=code.co_flags & _FUTURE_FLAGS, dont_inherit=True)
    found = _find_code(compiled, "<lambda>" if isinstance(node, ast.Lambda) else "@target",
                       code.co_firstlineno)
    # types.coroutine marks a generator's code as awaitable; the compiler cannot know that.
    found = found.replace(co_name=code.co_name,
                          co_flags=found.co_flags | (code.co_flags & inspect.CO_ITERABLE_COROUTINE))
    if sys.version_info >= (3, 11):  # the user's qualified names, nested ones too
        found = _requalify(found, found.co_qualname, code.co_qualname)
    else:
        original = _qualname_310(code)
        if original is not None:  # else nothing is defined inside: no qualified name to fix
            synthetic_path = ("@holder", located.class_name) if located.class_name else ()
            compiled = ".".join(("@factory.<locals>", *synthetic_path,
                                 "<lambda>" if isinstance(node, ast.Lambda) else "@target"))
            found = _requalify(found, compiled, original)
    return found


def _without_defaults(node: ast.Lambda) -> ast.Lambda:
    """A shallow copy of ``node`` whose default values are ``None`` constants."""
    args = copy.copy(node.args)
    args.defaults = [ast.copy_location(ast.Constant(None), d) for d in args.defaults]
    args.kw_defaults = [d if d is None else ast.copy_location(ast.Constant(None), d)
                        for d in args.kw_defaults]
    lam = copy.copy(node)
    lam.args = args
    return lam


def _super_unoptimised(code: types.CodeType) -> bool:
    """3.12+: ``code`` (or code nested in it) names ``super`` but never loads an attribute
    through ``LOAD_SUPER_ATTR``."""
    if _LOAD_SUPER_ATTR is None:
        return False
    codes, names_super = [code], False
    for current in codes:
        if current.co_code[::2].find(_LOAD_SUPER_ATTR) >= 0:
            return False
        names_super = names_super or "super" in current.co_names
        codes.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    return names_super


_LOAD_SUPER_ATTR = bytes([dis.opmap["LOAD_SUPER_ATTR"]]) if "LOAD_SUPER_ATTR" in dis.opmap else None


def _qualname_310(code: types.CodeType) -> str | None:
    """The qualified name ``code`` was compiled under, on 3.10 (code objects have none).

    3.10 passes the qualified name of a function, lambda or comprehension defined inside as a
    string constant that follows its code constant, and a class body stores its own as its
    ``__qualname__`` constant: ``f.<locals>.<genexpr>`` names ``f``.  None when nothing is
    defined inside.
    """
    consts = code.co_consts
    for index, const in enumerate(consts):
        if isinstance(const, types.CodeType):
            suffix = ".<locals>." + const.co_name
            for name in (*consts[index + 1:index + 2], *const.co_consts):
                if isinstance(name, str) and name.endswith(suffix):
                    return name[:-len(suffix)]
    return None


def _requalify(code: types.CodeType, compiled: str, original: str) -> types.CodeType:
    """Replace the synthetic ``@factory.<locals>...@target`` prefix of qualified names: in
    nested code objects' ``co_qualname`` (3.11+) and in string constants (a class body's
    ``__qualname__``; on 3.10 every nested function's qualified name)."""
    consts = tuple(_requalify(c, compiled, original) if isinstance(c, types.CodeType) else c
                   for c in code.co_consts)
    consts = tuple(original + c[len(compiled):]
                   if isinstance(c, str) and c.startswith(compiled + ".") else c for c in consts)
    if sys.version_info < (3, 11):
        return code.replace(co_consts=consts)
    qualname = code.co_qualname
    if qualname.startswith(compiled):
        qualname = original + qualname[len(compiled):]
    return code.replace(co_consts=consts, co_qualname=qualname)


def _find_code(container: types.CodeType, name: str, firstlineno: int) -> types.CodeType:
    pending = [container]
    while pending:
        current = pending.pop(0)
        for const in current.co_consts:
            if isinstance(const, types.CodeType):
                if const.co_name == name and const.co_firstlineno == firstlineno:
                    return const
                pending.append(const)
    raise ValueError(f"overdub: compiled code for {name} not found")  # pragma: no cover

