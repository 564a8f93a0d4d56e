"""The overdub rewrite: every intercepted call and operator becomes a call of the context.

Before and after, for a context that intercepts calls and binary operators::

    def f(x, y):                      def f(x, y):
        return math.sin(x) * y   ->       return @op(@mul, @od(math.sin, x), y)

``@od`` (calls) and ``@op`` (operators, fixed positional arguments) are the context's dispatchers;
``@mul`` is :func:`operator.mul`.  Names starting with ``@`` cannot be written in Python source, so
they never collide with user names; they are free variables of the rewritten code, filled per
context instance (see ``_cache``).  Every node we synthesise carries the position of the user node
it replaces, so tracebacks and debuggers point at the user's own line and columns.

What stays native: ``and``/``or``/``if``-expressions, truth tests, iteration, literals (passes can
reach those), ``yield``/``await``, frame-sensitive calls (zero-argument ``super()``, ``locals()``,
``sys._getframe()``...), and the *bodies* of nested functions, lambdas and methods: those are
rewritten when they are called, so a function that escapes the context is the user's own function.
"""

from __future__ import annotations

import ast
import builtins
import functools
import operator
import sys
import types
from collections.abc import Callable
from typing import Any, TypeVar, cast

from . import _frames
from ._protocols import lookup, python_mapping, static_types
from ._tagging import Tagged, innermost

CALL, BINOP, UNARYOP, COMPARE, SUBSCRIPT, ATTRIBUTE = (
    "call", "binop", "unaryop", "compare", "subscript", "attribute")
ALL_CATEGORIES = frozenset((CALL, BINOP, UNARYOP, COMPARE, SUBSCRIPT, ATTRIBUTE))
_N = TypeVar("_N", bound=ast.AST)
_Fn = Callable[..., Any]
# Iteration as a call of ``iter``: ``for`` loops, comprehensions, unpacking assignments and
# ``*`` arguments.  Not in ALL_CATEGORIES: only contexts with tagged values intercept it (reading
# a list's stored metadata back by iterating), so hooks do not see an ``iter`` per loop.
ITERATION = "iteration"

BINOPS: dict[type[ast.operator], _Fn] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.MatMult: operator.matmul, ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod, ast.Pow: operator.pow, ast.LShift: operator.lshift,
    ast.RShift: operator.rshift, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
    ast.BitAnd: operator.and_,
}
INPLACE_OPS: dict[type[ast.operator], _Fn] = {
    ast.Add: operator.iadd, ast.Sub: operator.isub, ast.Mult: operator.imul,
    ast.MatMult: operator.imatmul, ast.Div: operator.itruediv, ast.FloorDiv: operator.ifloordiv,
    ast.Mod: operator.imod, ast.Pow: operator.ipow, ast.LShift: operator.ilshift,
    ast.RShift: operator.irshift, ast.BitOr: operator.ior, ast.BitXor: operator.ixor,
    ast.BitAnd: operator.iand,
}
UNARYOPS: dict[type[ast.unaryop], _Fn] = {
    ast.UAdd: operator.pos, ast.USub: operator.neg, ast.Invert: operator.invert,
    ast.Not: operator.not_}
COMPAREOPS: dict[type[ast.cmpop], _Fn] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: operator.contains, ast.NotIn: operator.contains}
SUBSCRIPT_FNS = (operator.getitem, operator.setitem, operator.delitem)
ATTRIBUTE_FNS = (builtins.getattr, builtins.setattr, builtins.delattr)

# Which category a callable belongs to when a context registers a primitive for it.
CATEGORY_OF = {id(fn): BINOP for fn in (*BINOPS.values(), *INPLACE_OPS.values())}
CATEGORY_OF.update({id(fn): UNARYOP for fn in UNARYOPS.values()})
CATEGORY_OF.update({id(fn): COMPARE for fn in COMPAREOPS.values()})
CATEGORY_OF.update({id(fn): SUBSCRIPT for fn in SUBSCRIPT_FNS})
CATEGORY_OF.update({id(fn): ATTRIBUTE for fn in ATTRIBUTE_FNS})

# Hidden constants the rewritten code may reference, by hidden name.
HIDDEN_CONSTANTS: dict[str, object] = {"@" + fn.__name__: fn for fn in (
    *BINOPS.values(), *INPLACE_OPS.values(), *UNARYOPS.values(), *COMPAREOPS.values(),
    *SUBSCRIPT_FNS, *ATTRIBUTE_FNS)}
# Values passes put into rewritten code with embed(), by hidden name: the closure cell holding
# each (kept alive: few, long-lived).
EMBEDDED: dict[str, types.CellType] = {}
_embedded_names: dict[tuple[int, bool], str] = {}
# The embedded names a call of which is made directly, not through the context (see embed)
DIRECT: set[str] = set()


def embed(value: Any, *, direct: bool = False) -> ast.Name:
    """An expression node, for a pass, that evaluates to ``value`` itself.

    A pass that needs an object in the code it produces (a helper function, a module, an array
    namespace) cannot name it safely: any name it writes may be shadowed by the user's locals,
    globals or builtins, or be missing from the function's module.  ``embed(value)`` gives a
    name no Python source can spell (``@embed1:where``), bound to ``value`` in the rewritten
    function's closure.  Each call returns a new node; the same value always gets the same name.

    Example, a pass that turns every call of ``print`` into a call of ``log``::

        class PrintToLog(ast.NodeTransformer):
            def visit_Name(self, node):
                if node.id == "print" and isinstance(node.ctx, ast.Load):
                    return ast.copy_location(embed(log), node)
                return node

    A call of the value goes through the context like any call (its hooks see it).  With
    ``direct=True`` it is made directly: for the pass's own machinery (a helper that does the
    pass's bookkeeping), which the context would only run as a leaf, at the price of a
    dispatch per call.
    """
    key = (id(value), direct)
    name = _embedded_names.get(key)
    if name is None or EMBEDDED[name].cell_contents is not value:
        label = getattr(value, "__name__", type(value).__name__)
        name = f"@embed{len(EMBEDDED) + 1}:{label}"
        EMBEDDED[name] = types.CellType(value)
        _embedded_names[key] = name
        if direct:
            DIRECT.add(name)
    return ast.Name(id=name, ctx=ast.Load())


def _hide(namespace: Any, fn: Any) -> Any:
    """``locals()``/``vars()``/``dir()`` of a rewritten frame, without our ``@`` names, where
    ``fn``, what the name called, is the builtin (a function of the user's with that name gives
    what it gives)."""
    if fn is not locals and fn is not vars and fn is not dir:
        return namespace
    if isinstance(namespace, dict):  # in place: locals() is the frame's own dict (<= 3.12)
        for name in [k for k in namespace if type(k) is str and k.startswith("@")]:
            del namespace[name]
        return namespace
    return [name for name in namespace if not name.startswith("@")]


class _Spread:
    """``f`` for a call that unpacks its arguments, ``f(*a)`` or ``f(**k)``, made through the
    dispatcher ``od``: the errors unpacking raises (``f() argument after ** must be a mapping``,
    ``f() got multiple values for keyword argument 'x'``) name the callable being called, which
    in ``od(f, **k)`` would be ``od``.  CPython names it by its ``__qualname__`` and
    ``__module__``, which this stand-in takes from ``f``."""

    __slots__ = ("od", "fn")

    def __init__(self, od: _Fn, fn: Any) -> None:
        self.od = od
        self.fn = fn

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        return self.od(self.fn, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # __qualname__, for those messages
        return getattr(self.fn, name)

    @property  # instead of this class's own module
    def __module__(self) -> Any:  # type: ignore[override]
        return getattr(self.fn, "__module__", None)

    def __str__(self) -> str:  # the message's name for a callable without __qualname__
        return str(self.fn)


class _Managed:
    """A context manager whose class defines ``__enter__`` or ``__exit__`` in Python, entered
    and exited through the dispatcher ``od`` (the ``with`` statement would call them natively,
    behind the context's back); Python's own ``with`` does the rest (exception handling, the
    ``__exit__`` result suppressing one)."""

    __slots__ = ("od", "manager", "enter", "exit")

    def __init__(self, od: _Fn, manager: Any, enter: Any, exit: Any) -> None:
        self.od, self.manager, self.enter, self.exit = od, manager, enter, exit

    def __enter__(self) -> Any:
        return self._call(self.enter)

    def __exit__(self, *exc: Any) -> Any:
        return self._call(self.exit, *exc)

    def _call(self, method: Any, *args: Any) -> Any:
        if type(method) is types.FunctionType:
            return self.od(method, self.manager, *args)
        return method.__get__(self.manager, type(self.manager))(*args)


def _managed(od: _Fn, manager: Any) -> Any:
    """``with manager:`` seen by the context: ``manager`` itself when its class's ``__enter__``
    and ``__exit__`` are C (a lock, a file) or missing (the ``with`` statement's own error)."""
    kind = type(manager)
    if kind in static_types:
        return manager
    enter, exit = lookup(kind, "__enter__"), lookup(kind, "__exit__")
    if enter is None or exit is None or not (type(enter) is types.FunctionType
                                             or type(exit) is types.FunctionType):
        return manager
    return _Managed(od, manager, enter, exit)


def _unpacked(od: _Fn, mapping: Any) -> Any:
    """``mapping`` for ``f(**mapping)`` or ``{**mapping}``: a dict's items read through the
    context (a context may keep metadata for the values it stored in it, which native
    unpacking would not see), in a new dict unpacked in its place; a mapping whose class is
    written in Python (``ChainMap``, ``UserDict``) likewise, its ``keys()`` and items read
    through the context (the unpacking would run them natively); a ``MappingProxyType`` as
    the dict it shows; other mappings as they are."""
    if type(mapping) is Tagged:  # (unpacked natively: a mapping's values, or the error
        mapping = innermost(mapping)  # naming what is not a mapping, as plain Python does)
    if type(mapping) is dict or type(mapping) is types.MappingProxyType:  # (a proxy reads
        return dict(od(mapping.items))  # its mapping's items: see _tagging._proxied_meta)
    if python_mapping(mapping):
        return {key: od(operator.getitem, mapping, key) for key in od(list, od(mapping.keys))}
    return mapping


def _iterable(od: _Fn, iterable: Any) -> Any:
    """What a ``for`` loop, comprehension, unpacking or ``*`` iterates: ``iter(iterable)`` seen
    by the context; or, where the value under the tags is not iterable at all, that plain
    value, for the statement to fail on natively: with its own message (``max() argument
    after * must be an iterable, not int``, ``cannot unpack non-iterable int object``) at its
    own position, as it does without a context."""
    try:
        return od(iter, iterable)
    except TypeError:
        plain = innermost(iterable)
        kind = type(plain)
        if lookup(kind, "__iter__") is not None or (
                lookup(kind, "__getitem__") is not None and not issubclass(kind, dict)):
            raise  # (iterable: the error is its iteration's own)
    return plain


def _delegated(od: _Fn, source: Any) -> Any:
    """What ``yield from source`` runs: a generator or coroutine (which ``yield from`` drives
    with ``send`` and ``throw``, and whose own code the context runs) as it is; any other
    iterable through ``iter`` seen by the context, as a ``for`` loop's is (a list a user
    generator delegates to may hold values whose metadata the context keeps)."""
    if hasattr(source, "send") and hasattr(source, "throw"):
        return source
    return od(iter, source)


def _value_last(value: Any, obj: Any, key: Any) -> tuple[Any, Any, Any]:
    """``(obj, key, value)``: a class body's ``obj[key] = value`` evaluates the value first."""
    return obj, key, value


# -- `match` statements under tags (see Overdubber.visit_Match) ------------------------------
# Type flags CPython's pattern matching reads: Py_TPFLAGS_SEQUENCE, Py_TPFLAGS_MAPPING,
# _Py_TPFLAGS_MATCH_SELF (int(n) binds the subject itself), Py_TPFLAGS_HEAPTYPE.
_SEQUENCE_FLAG, _MAPPING_FLAG, _MATCH_SELF_FLAG, _HEAP_TYPE_FLAG = 1 << 5, 1 << 6, 1 << 22, 1 << 9
_UNMATCHED = object()  # the default of a pattern's attribute and key reads: "not there"


def _match_sequence(subject: Any) -> bool:
    """Whether a sequence pattern may match ``subject``, as ``MATCH_SEQUENCE`` decides: by the
    type of the value under the tags (a list, a tuple, a registered ``Sequence``; not ``str``)."""
    return bool(type(innermost(subject)).__flags__ & _SEQUENCE_FLAG)


def _match_mapping(subject: Any) -> bool:
    """Whether a mapping pattern may match ``subject`` (``MATCH_MAPPING``), likewise."""
    return bool(type(innermost(subject)).__flags__ & _MAPPING_FLAG)


def _match_type(cls: Any) -> Any:
    """``cls``, the class of a class pattern; anything else fails as the native match does, with
    its own message (which differs between Python versions)."""
    if not isinstance(cls, type):
        match None:
            case cls():  # raises
                pass
    return cls


def _tp_name(kind: type) -> str:
    """A type's C-level name, as CPython's messages show it (``datetime.date``, ``Point``)."""
    if kind.__flags__ & _HEAP_TYPE_FLAG or kind.__module__ == "builtins":
        return kind.__name__
    return f"{kind.__module__}.{kind.__name__}"


class _ClassMatch:
    """The attributes a matching class pattern ``cls(p1, ..., k1=q1, ...)`` reads, named and
    checked as CPython's ``MATCH_CLASS`` does: ``__match_args__`` (a tuple) or, without it, the
    subject itself for a builtin's one positional sub-pattern; each name checked just before
    its attribute is read (a missing attribute fails the match before later names are
    checked)."""

    __slots__ = ("cls", "names", "itself", "seen")

    def __init__(self, cls: type, positional: int) -> None:
        self.cls, self.itself = cls, False
        self.names: tuple[Any, ...] = ()
        self.seen: set[str] = set()
        if not positional:
            return
        try:
            names = cls.__match_args__  # type: ignore[attr-defined]
        except AttributeError:
            names, self.itself = (), bool(cls.__flags__ & _MATCH_SELF_FLAG)
        else:
            if type(names) is not tuple:
                raise TypeError(f"{_tp_name(cls)}.__match_args__ must be a tuple "
                                f"(got {_tp_name(type(names))})")
        allowed = 1 if self.itself else len(names)
        if allowed < positional:
            raise TypeError(f"{_tp_name(cls)}() accepts {allowed} positional sub-pattern"
                            f"{'' if allowed == 1 else 's'} ({positional} given)")
        self.names = names

    def positional(self, index: int) -> str | None:
        """The attribute the ``index``-th positional sub-pattern matches; None: the subject."""
        if self.itself:
            return None
        name: Any = self.names[index]
        if type(name) is not str:
            raise TypeError(f"__match_args__ elements must be strings "
                            f"(got {_tp_name(type(name))})")
        return self.keyword(name)

    def keyword(self, name: str) -> str:
        if name in self.seen:
            raise TypeError(f"{_tp_name(self.cls)}() got multiple sub-patterns for attribute "
                            f"{name!r}")
        self.seen.add(name)
        return name


def _match_key(keys: tuple[Any, ...], index: int) -> Any:
    """``keys[index]``, a mapping pattern's key, unless an earlier key equals it (a value
    pattern's: ``MATCH_KEYS`` checks each key just before looking it up)."""
    key = keys[index]
    if key in set(keys[:index]):
        raise ValueError(f"mapping pattern checks duplicate key ({key!r})")
    return key


HIDDEN_CONSTANTS.update({"@eval": eval, "@exec": exec, "@globals": globals, "@namespace": locals,
                         "@iter": iter, "@slice": slice, "@type": type, "@S": static_types,
                         "@hide": _hide, "@getframe": _frames.getframe,
                         "@getframemodulename": _frames.getframemodulename,
                         "@past": _frames.past_machinery, "@locals": _frames.user_locals,
                         "@partial": functools.partial, "@value_last": _value_last,
                         "@spread": _Spread, "@managed": _managed, "@unpacked": _unpacked,
                         "@delegated": _delegated, "@iterable": _iterable,
                         "@innermost": innermost, "@len": len, "@isinstance": isinstance,
                         "@match_sequence": _match_sequence, "@match_mapping": _match_mapping,
                         "@match_type": _match_type, "@ClassMatch": _ClassMatch,
                         "@match_key": _match_key, "@unmatched": _UNMATCHED,
                         "@AssertionError": AssertionError})
# Per-context names: dispatchers for calls (@od) and operators by arity (@op1..@op3, @opr for
# `in`, whose operands are evaluated in the other order); for observe-only contexts the prehook
# itself (@pre), whether no enclosing context must see leaf operations (@flat), and the
# operator dispatchers without the prehook (@slow1..@slow3).
DISPATCHERS = ("@od", "@op1", "@op2", "@op3", "@opr", "@pre", "@flat", "@slow1", "@slow2",
               "@slow3")
# The hidden names rewritten code gets as closure cells (the factory's parameters, see _cache)
_BOUND = frozenset((*HIDDEN_CONSTANTS, *DISPATCHERS))

# Calls that must run in the user's own frame: they inspect the calling frame.
_FRAME_SENSITIVE_NAMES = {"super", "locals", "vars", "dir", "globals", "breakpoint"}
_FRAME_SENSITIVE_ATTRS = {"_getframe", "currentframe", "_getframemodulename"}
# Attribute reads of frames and tracebacks, and what their value goes through so that user code
# sees its own frames: the dispatchers' frames skipped, a frame's namespace without `@` names.
_FRAME_VIEWS = {"f_back": "@past", "tb_next": "@past", "f_locals": "@locals"}


def mangle(name: str, class_name: str | None) -> str:
    """Private-name mangling, as the compiler does it for ``self.__x`` inside ``class_name``."""
    if class_name is None or not name.startswith("__") or name.endswith("__") or "." in name:
        return name
    stripped = class_name.lstrip("_")
    return f"_{stripped}{name}" if stripped else name


def _place(node: _N, template: ast.AST) -> _N:
    """Give synthesised ``node`` (and its synthesised children) ``template``'s position.

    Nodes that already have a position (the user's, or placed before) are left alone, and so
    are their children: each node is visited about once however deep the nesting.  (Fields are
    read from the instance dictionary: ``ast.iter_child_nodes`` made this walk a fifth of a
    first call's rewriting time.)
    """
    at: Any = template  # positioned node classes (stmt, expr, arg...) share no base class
    lineno, col_offset = at.lineno, at.col_offset
    end_lineno, end_col_offset = at.end_lineno, at.end_col_offset
    pending: list[Any] = [node]
    while pending:
        child = pending.pop()
        fields = child.__dict__
        if "lineno" in child._attributes:
            if "lineno" in fields:
                continue
            child.lineno = lineno
            child.col_offset = col_offset
            child.end_lineno = end_lineno
            child.end_col_offset = end_col_offset
        for name in child._fields:
            value = fields.get(name)
            if type(value) is list:
                pending.extend([item for item in value if isinstance(item, ast.AST)])
            elif isinstance(value, ast.AST):
                pending.append(value)
    return node


def copy_tree(node: _N) -> _N:
    """A deep copy of an AST, several times faster than ``copy.deepcopy``."""
    cls = type(node)
    new = cls.__new__(cls)
    fields = new.__dict__
    for name, value in node.__dict__.items():
        if isinstance(value, ast.AST):
            fields[name] = copy_tree(value)
        elif isinstance(value, list):
            fields[name] = [copy_tree(v) if isinstance(v, ast.AST) else v for v in value]
        else:
            fields[name] = value
    return new


# Expression contexts carry no data: one shared instance each, as CPython's parser does.
_LOAD, _STORE = ast.Load(), ast.Store()
# 3.11 only: a failing assert whose test is a comparison raises at the comparison (3.12 at the
# statement, 3.13 at the test, whatever it is): see Overdubber.visit_Assert.
_ASSERT_AT_TEST = sys.version_info[:2] == (3, 11)

_C_CONSTANTS = (int, float, complex, str, bytes, bool, type(None), type(...))


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_COMPOUND = (ast.If, ast.While, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.Match,
             ast.Try)


def _suspends(statement: ast.stmt) -> bool:
    """Whether ``statement`` (a simple one) holds a ``yield`` or ``await`` of its own."""
    pending: list[ast.AST] = [statement]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await)):
            return True
        if not isinstance(node, ast.Lambda):  # (a lambda's body is its own scope)
            pending.extend(ast.iter_child_nodes(node))
    return False


def _is_simple(node: ast.expr) -> bool:
    """Operands that can be repeated without evaluating anything twice: temporaries, constants."""
    return isinstance(node, ast.Constant) or (isinstance(node, ast.Name) and node.id[0] == "@")


def _copy(node: ast.expr, at: dict[str, Any] | None = None) -> ast.expr:
    if isinstance(node, ast.Constant):
        return ast.Constant(node.value, **(at or {}))
    return ast.Name(cast(ast.Name, node).id, _LOAD, **(at or {}))  # simple: a temporary


def _position(template: ast.AST) -> dict[str, Any]:
    """Keyword arguments giving a new node ``template``'s position (cheaper than walking)."""
    at: Any = template  # as in _place
    return {"lineno": at.lineno, "col_offset": at.col_offset,
            "end_lineno": at.end_lineno, "end_col_offset": at.end_col_offset}


# Where CPython puts instructions differs on 3.10 (see _attribute_at, _method_call_at); no
# method-call form takes as many arguments as _STACK_USE_GUIDELINE.
_PY310 = sys.version_info < (3, 11)
_STACK_USE_GUIDELINE = 30


class _At(ast.AST):
    """A position that no user node has, as a template for :func:`_place` and
    :func:`_position`: where CPython puts an instruction that is not at its node's start.
    (Never part of a tree.)"""

    def __init__(self, lineno: int, col_offset: int, end_lineno: int, end_col_offset: int
                 ) -> None:
        self.lineno, self.col_offset = lineno, col_offset
        self.end_lineno, self.end_col_offset = end_lineno, end_col_offset


def _attribute_at(node: ast.Attribute) -> ast.AST:
    """Where CPython puts the instruction that loads, stores or deletes attribute ``node``: for
    an attribute spread over lines (``(obj\\n .name)``, a chain of method calls), at the name,
    on its last line, not at the object on the first (the compiler's
    ``update_start_location_to_match_attr``; 3.10 moves the line alike, but not a delete's).
    The column is the end column (in UTF-8 bytes) less the name's length in characters, as
    CPython computes it.  A traceback through the rewritten operation then shows the native
    line and carets."""
    if node.lineno == node.end_lineno or (_PY310 and type(node.ctx) is ast.Del):
        return node
    end_line, end_col = cast(int, node.end_lineno), cast(int, node.end_col_offset)
    if len(node.attr) > end_col:  # (CPython drops the columns of such a made-up node)
        return node
    return _At(end_line, end_col - len(node.attr), end_line, end_col)


def _method_call_at(node: ast.Call, func: ast.Attribute) -> _At | None:
    """Where CPython puts the instruction that makes ``node``, a call of ``func``, an attribute
    spread over lines, if it takes the method-call form; None if not (the call's own position).

    Natively, ``obj.name(args)`` takes that form, whose call instruction CPython puts where the
    attribute's name starts (see :func:`_attribute_at`): ``return K(\\n).m(\\n 1)`` fails
    inside ``m`` at the line of ``).m(``, not of ``K(``.  The form is not taken with ``*`` or
    ``**`` arguments, with too many arguments (CPython's ``STACK_USE_GUIDELINE``), on 3.10 with
    keywords, nor, on 3.11+, when the object is a name the module imports at its top level
    (``json\\n.loads(...)``, the compiler's ``is_import_originated``): that last one is left to
    the caller (see :func:`_method_form`).
    """
    args, keywords = node.args, node.keywords
    if any(type(a) is ast.Starred for a in args) or any(k.arg is None for k in keywords):
        return None
    if _PY310:
        if keywords or len(args) >= _STACK_USE_GUIDELINE:
            return None
    elif len(args) + len(keywords) + bool(keywords) >= _STACK_USE_GUIDELINE:
        return None
    start = _attribute_at(func)
    if type(start) is not _At:
        return None
    return _At(start.lineno, start.col_offset, cast(int, node.end_lineno),
               cast(int, node.end_col_offset))


def _positions(code: types.CodeType | None) -> set[Any] | None:
    """The positions of ``code``'s instructions and those of the code compiled inside it
    (comprehensions, rewritten with it; functions, whose calls
    :meth:`Overdubber._note_imported` looks at), or None where code has no columns (3.10) or
    is not known."""
    if code is None or not hasattr(code, "co_positions"):
        return None
    positions: set[Any] = set()
    pending = [code]
    while pending:
        current = pending.pop()
        positions.update(current.co_positions())
        pending.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    return positions


def _method_form(at: _At, positions: set[Any] | None) -> bool:
    """Whether the native code, with its instructions at ``positions``, makes a call at
    ``at``: whether a call of a name's attribute took the method-call form, which 3.11+ does
    not take for a name the module imports (which only the module's symbol table knows).
    Always on 3.10, which takes it for imported names too."""
    return positions is None or (at.lineno, at.end_lineno, at.col_offset, at.end_col_offset) \
        in positions


_COMPREHENSION_NAMES = frozenset(("<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>"))


def _defines_functions(code: types.CodeType | None) -> bool:
    """Whether ``code`` (or a comprehension in it) makes functions (or classes)."""
    pending = [code] if code is not None else []
    while pending:
        for const in pending.pop().co_consts:
            if isinstance(const, types.CodeType):
                if const.co_name not in _COMPREHENSION_NAMES:
                    return True
                pending.append(const)
    return False


# The dispatcher of an operator with 1, 2 or 3 operands, by their number
_OPERATOR_DISPATCHERS = {1: "@op1", 2: "@op2", 3: "@op3"}
# The Overdubber method that visits each node class, looked up once.
_VISITORS: dict[type, Callable[..., Any]] = {}
# Nodes the rewrite never changes and whose children it never needs to visit.
_LEAVES = frozenset((ast.Name, ast.Constant, ast.Load, ast.Store, ast.Del, *BINOPS, *UNARYOPS,
                     *COMPAREOPS, ast.And, ast.Or))
# Observe mode: how many operators outside loops a function may have, all inlined; above it,
# only those inside loops are (see Overdubber).  About 2.5 ms of first-call rewriting.
INLINE_BUDGET = 64
# The operator nodes that count against it, by the category that intercepts them...
_COUNTED: dict[type, str] = {ast.BinOp: BINOP, ast.AugAssign: BINOP, ast.UnaryOp: UNARYOP,
                             ast.Compare: COMPARE, ast.Subscript: SUBSCRIPT,
                             ast.Attribute: ATTRIBUTE}
# ... and what is not straight-line code: loops, and scopes with bodies of their own (rewritten
# when called) or that take the call form anyway (comprehensions).
_SUSPENDING = frozenset((ast.Yield, ast.YieldFrom, ast.Await))
_NOT_STRAIGHT = frozenset((ast.For, ast.AsyncFor, ast.While, ast.FunctionDef,
                           ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
                           ast.SetComp, ast.DictComp, ast.GeneratorExp))


# Patterns whose native matching looks into a tagged subject behind the context's back.
_LOOKING_PATTERNS = (ast.MatchClass, ast.MatchSequence, ast.MatchMapping, ast.MatchSingleton)


def _is_wildcard(pattern: ast.pattern) -> bool:
    """``_`` or ``*_``: matches anything, binds nothing."""
    return isinstance(pattern, (ast.MatchAs, ast.MatchStar)) and pattern.name is None and \
        getattr(pattern, "pattern", None) is None


def _pattern_value(node: ast.expr) -> ast.expr:
    """A value pattern's or a mapping key's expression as the compiler has it: a dotted name
    (read when matched), or a constant (``-1``, ``1 + 2j`` folded: no operator to see)."""
    if isinstance(node, (ast.Name, ast.Attribute, ast.Constant)):
        return node
    return _place(ast.Constant(ast.literal_eval(node)), node)


class Overdubber(ast.NodeTransformer):
    """Rewrites one function's body for a set of intercepted categories.

    Attributes: ``categories`` (what to intercept, fixed); ``class_name`` (for mangling attribute
    names, changes inside class bodies); ``observe`` (fixed: the context only has a prehook, so
    operators become an inline prehook call plus the native operation when the operands are C
    types -- one Python-level call per operator); ``used`` (hidden names the output references,
    grows); ``_temps`` (counter naming ``@t`` temporaries, one per site so a generator
    expression and its enclosing function never share one); ``_no_walrus`` (depth inside
    comprehensions and class bodies, where the compiler forbids binding temporaries with ``:=``:
    operators there use the dispatcher call form); ``_compact`` (fixed: the inline form is kept
    for operators inside loops only, see below); ``_loops`` (depth inside loop statements).

    An operator in observe mode, ``a * b``::

        (@t1 * @t2) if (@pre(@mul, @t1 := a, @t2 := b) is None and @flat
                        and @type(@t1) in @S and @type(@t2) in @S) else @slow2(@mul, @t1, @t2)

    and otherwise ``@op2(@mul, a, b)``.  The inline form is about six times the nodes of the
    call form, so it costs about three times as much to build and compile, and it saves a
    Python-level call each time it runs.  A function with more than ``INLINE_BUDGET`` operators
    outside its loops (straight-line code: a test, a setup function, generated code) runs each
    of those once per call, which rarely repays compiling them inline; there they take the call
    form and only operators inside loops are inlined.  Both forms mean the same: the call form
    is the one comprehensions and class bodies use anyway.
    """

    def __init__(self, categories: frozenset[str], class_name: str | None,
                 observe: bool = False, fast_locals: frozenset[str] = frozenset(),
                 code: types.CodeType | None = None) -> None:
        self.categories = categories
        self.class_name = class_name
        self.observe = observe
        self.fast_locals = fast_locals
        self.used: set[str] = set()
        self._temps = 0
        self._no_walrus = 0
        self._class_bodies = 0  # depth inside class bodies, where locals() is the namespace
        self._walrus_targets: set[str] = set()  # user names some `:=` binds (set per function)
        self._fresh: list[str] = []  # `:=` temporaries made in the statement being visited
        self._compact = False  # operators outside loops take the call form (set per function)
        self._loops = 0
        self._may_suspend = True  # the function may hold a `yield` or `await` (set per function)
        self._code = code  # the code being rewritten, as compiled (see _method_form)
        self._native_positions: set[Any] | None = None  # its instructions' positions, if asked
        # The names the module imports, as the compiler must know them (see _note_imported)
        self.imported: list[str] = []
        self._defines_functions = sys.version_info >= (3, 11) and _defines_functions(code)

    # -- helpers ---------------------------------------------------------------------------
    def _name(self, hidden: str, ctx: ast.expr_context | None = None,
              at: dict[str, Any] | None = None) -> ast.Name:
        if hidden in _BOUND:
            self.used.add(hidden)
        node = ast.Name(hidden, ctx or _LOAD)
        if at:  # (positional fields and the position set apart: half the time of keywords)
            node.__dict__.update(at)
        return node

    def _fn(self, fn: _Fn, at: dict[str, Any] | None = None) -> ast.Name:
        return self._name("@" + fn.__name__, at=at)

    def _temp(self) -> str:
        self._temps += 1
        return f"@t{self._temps}"

    def _call_at(self, node: ast.Call, func: ast.expr) -> ast.AST:
        """Where CPython puts the instruction that makes call ``node`` of (unvisited) ``func``:
        a method call's at its method's name (see :func:`_method_call_at`).  Rewritten, it is a
        call of the dispatcher, placed there too."""
        if type(func) is not ast.Attribute or func.lineno == func.end_lineno:
            return node  # (almost every call)
        at = _method_call_at(node, func)
        if at is None:
            return node
        if type(func.value) is ast.Name and not self._method_form(at):
            return node
        return at

    def _method_form(self, at: _At) -> bool:
        if self._native_positions is None:
            self._native_positions = _positions(self._code)
        return _method_form(at, self._native_positions)

    def _note_imported(self, body: ast.AST | list[ast.stmt]) -> None:
        """Note in ``imported`` the names that ``body``, a function's or lambda's defined inside
        the one rewritten, calls methods of over lines where the module imports those names
        (see :func:`_method_call_at`).  The body is rewritten when called; until then it is
        compiled with the rewritten function, in a module of the rewrite's own, which imports
        nothing: those calls would take the method-call form there, and a traceback through
        them show another line than the native one.  The compiler is told of the imports
        (``_cache._compile``).  Only where the native code defines functions (3.11+)."""
        pending: list[Any] = list(body) if isinstance(body, list) else [body]
        while pending:
            node = pending.pop()
            fields = node.__dict__  # (as _place walks)
            if type(node) is ast.Call:
                func = fields["func"]
                if type(func) is ast.Attribute and type(func.value) is ast.Name \
                        and func.lineno != func.end_lineno:
                    at = _method_call_at(node, func)
                    if at is not None and not self._method_form(at) \
                            and func.value.id not in self.imported:
                        self.imported.append(func.value.id)
            for name in node._fields:
                value = fields.get(name)
                if type(value) is list:
                    pending.extend([item for item in value if isinstance(item, ast.AST)])
                elif isinstance(value, ast.AST) and type(value) not in _LEAVES:
                    pending.append(value)

    def _dispatch(self, dispatcher: str, fn: _Fn, args: list[ast.expr],
                  template: ast.AST) -> ast.Call:
        at = _position(template)
        for arg in args:
            if "lineno" not in arg.__dict__:  # (_place would stop there too)
                _place(arg, template)
        # (what _name and _fn do, written out: the commonest node the rewrite builds)
        name = "@" + fn.__name__
        self.used.update((dispatcher, name))
        func, first = ast.Name(dispatcher, _LOAD), ast.Name(name, _LOAD)
        func.__dict__.update(at)
        first.__dict__.update(at)
        call = ast.Call(func, [first, *args], [])
        call.__dict__.update(at)
        return call

    def _guard(self, fn: _Fn, hook_args: list[ast.expr], subjects: list[ast.expr],
               first: list[ast.expr], at: dict[str, Any]) -> ast.expr:
        """``@pre(fn, ...) is None and @flat and @type(s) in @S ...`` for observe mode."""
        hook = ast.Call(func=self._name("@pre", at=at), args=[self._fn(fn, at), *hook_args],
                        keywords=[], **at)
        tests = [*first, ast.Compare(hook, [ast.Is()], [ast.Constant(None, **at)], **at),
                 self._name("@flat", at=at)]
        for subject in subjects:
            if isinstance(subject, ast.Constant) and type(subject.value) in _C_CONSTANTS:
                continue
            kind = ast.Call(func=self._name("@type", at=at), args=[subject], keywords=[], **at)
            tests.append(ast.Compare(kind, [ast.In()], [self._name("@S", at=at)], **at))
        return ast.BoolOp(op=ast.And(), values=tests, **at)

    def _inline(self) -> bool:
        """Whether an operator here takes the inline observe-mode form."""
        return self.observe and not self._no_walrus and (self._loops > 0 or not self._compact)

    def _operator(self, fn: _Fn, operands: list[ast.expr],
                  native: Callable[[list[ast.expr]], ast.expr], template: ast.AST,
                  subjects: tuple[int, ...], swap: bool = False) -> ast.expr:
        """``fn(*operands)`` seen by the context; ``native`` builds the plain operation.

        ``subjects`` are the operands whose types decide whether Python dunders can be involved;
        ``swap`` is for ``in``: evaluated as written, called as ``contains(container, item)``.
        """
        if not self._inline():
            dispatcher = "@opr" if swap else _OPERATOR_DISPATCHERS[len(operands)]
            return self._dispatch(dispatcher, fn, operands, template)
        at = _position(template)
        refs, binds = [], []
        for operand in operands:
            # A plain local needs no temporary: only a `:=` in this function could rebind it
            # between its evaluation and the operation.
            if _is_simple(operand) or (isinstance(operand, ast.Name)
                                       and operand.id in self.fast_locals
                                       and operand.id not in self._walrus_targets):
                refs.append(operand)
                binds.append(_copy(operand, at))
            else:
                temp = self._temp()
                self._fresh.append(temp)
                refs.append(ast.Name(temp, _LOAD, **at))
                binds.append(ast.NamedExpr(ast.Name(temp, _STORE, **at), operand, **at))
        order = list(range(len(operands)))[::-1] if swap else list(range(len(operands)))
        if swap:  # evaluate in source order first, then call the hook in call order
            test = self._guard(fn, [_copy(refs[i], at) for i in order],
                               [_copy(refs[i], at) for i in subjects],
                               [ast.Tuple(binds, _LOAD, **at)], at)
        else:
            test = self._guard(fn, binds, [_copy(refs[i], at) for i in subjects], [], at)
        slow = ast.Call(func=self._name(f"@slow{len(operands)}", at=at),
                        args=[self._fn(fn, at), *[_copy(refs[i], at) for i in order]],
                        keywords=[], **at)
        fast = _place(native([_copy(r, at) for r in refs]), template)
        return ast.IfExp(test=test, body=fast, orelse=slow, **at)

    def _operator_stmt(self, fn: _Fn, operands: list[ast.expr], native: ast.stmt,
                       template: ast.AST, subjects: tuple[int, ...], target: ast.expr
                       ) -> list[ast.stmt]:
        """Statement form of :meth:`_operator` for stores and deletes (operands are simple):
        the statements at ``template``'s position, the operation at the native instruction's,
        ``target``'s (see :meth:`_target_at`)."""
        where = self._target_at(target)
        if not self._inline():
            call = self._dispatch(f"@op{len(operands)}", fn, operands, where)
            return [_place(ast.Expr(call), template)]
        at = _position(where)
        test = self._guard(fn, [_copy(o, at) for o in operands],
                           [_copy(operands[i], at) for i in subjects], [], at)
        slow = _place(ast.Call(func=self._name(f"@slow{len(operands)}"),
                               args=[self._fn(fn), *[_copy(o) for o in operands]], keywords=[]),
                      where)
        return [_place(ast.If(test=test, body=[native], orelse=[ast.Expr(slow)]), template)]

    @staticmethod
    def _target_at(target: ast.expr) -> ast.AST:
        """Where CPython puts the instruction that stores into or deletes ``target`` (an
        attribute or a subscription): at the target, not at its statement (a failing property
        setter's traceback shows ``obj.x`` in ``obj.x = v``)."""
        return _attribute_at(target) if type(target) is ast.Attribute else target

    def _iterated(self, node: ast.expr) -> ast.expr:
        """``node`` (visited) as ``iter(node)`` seen by the context, where iteration is
        intercepted; a display iterates its own elements, so it stays."""
        if ITERATION not in self.categories or isinstance(
                node, (ast.Tuple, ast.List, ast.Set, ast.Constant)):
            return node
        return _place(ast.Call(self._name("@iterable"), [self._name("@od"), node], []), node)

    def _index(self, node: ast.expr) -> ast.expr:
        """A subscript's index as an ordinary expression (slices become ``slice(...)``)."""
        if isinstance(node, ast.Slice):
            parts = [self.visit(p) if p is not None else ast.Constant(None)
                     for p in (node.lower, node.upper, node.step)]
            return _place(ast.Call(func=self._name("@slice"), args=parts, keywords=[]), node)
        if isinstance(node, ast.Tuple) and any(isinstance(e, ast.Slice) for e in node.elts):
            return _place(ast.Tuple(elts=[self._index(e) for e in node.elts], ctx=_LOAD), node)
        index: ast.expr = self.visit(node)
        return index

    def _attr_name(self, node: ast.Attribute) -> ast.Constant:
        return _place(ast.Constant(mangle(node.attr, self.class_name)), node)

    def _assign_temp(self, value: ast.expr, template: ast.AST, temps: list[str]) -> ast.expr:
        """Bind ``value`` to a fresh temporary (recorded in ``temps``); simple values stay."""
        if _is_simple(value):
            return value
        temp = self._temp()
        temps.append(temp)
        self._pending.append(_place(ast.Assign([ast.Name(temp, _STORE)], value), template))
        return ast.Name(temp, _LOAD)

    # -- traversal: NodeTransformer's, without its per-node string building ----------------
    def _visit_node(self, node: ast.AST) -> Any:
        visitor = _VISITORS.get(type(node))
        if visitor is None:
            visitor = getattr(Overdubber, "visit_" + type(node).__name__, None)
            visitor = _VISITORS[type(node)] = visitor or Overdubber.generic_visit
        return visitor(self, node)

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for field in node._fields:
            value = getattr(node, field, None)
            if type(value) is list:
                new_values = []
                for item in value:
                    if isinstance(item, ast.AST) and type(item) not in _LEAVES:
                        item = self.visit(item)
                        if item is None:
                            continue
                        if not isinstance(item, ast.AST):
                            new_values.extend(item)
                            continue
                    new_values.append(item)
                value[:] = new_values
            elif isinstance(value, ast.AST) and type(value) not in _LEAVES:
                new_node = self.visit(value)
                if new_node is None:
                    delattr(node, field)
                else:
                    setattr(node, field, new_node)
        return node

    # -- statements and the temporaries their expressions made ----------------------------
    def visit(self, node: ast.AST) -> Any:
        if not isinstance(node, ast.stmt) or isinstance(node, _SCOPES):
            visitor = _VISITORS.get(type(node))  # (_visit_node's work, for expressions)
            return self._visit_node(node) if visitor is None else visitor(self, node)
        # A statement that suspends its frame (`yield cache.popleft()[1]`) would keep its `:=`
        # temporaries, and the objects in them, alive while suspended: one more step than the
        # plain code.  Its operators take the dispatcher call form, which needs none.
        suspends = (self.observe and self._may_suspend and not isinstance(node, _COMPOUND)
                    and _suspends(node))
        self._no_walrus += suspends
        outer, self._fresh = self._fresh, []
        result = self._visit_node(node)
        made, self._fresh = self._fresh, outer
        self._no_walrus -= suspends
        if not made or isinstance(node, (ast.Return, ast.Raise)):
            return result
        # Clear the `:=` temporaries once the statement is done with them, so they keep no
        # object alive longer than the plain code would (a memoryview blocking a resize).
        def cleanup() -> ast.stmt:
            return _place(ast.Assign([ast.Name(t, _STORE) for t in made],
                                     ast.Constant(None)), node)
        if isinstance(node, _COMPOUND):
            for field in ("body", "orelse"):
                block = getattr(node, field, None)
                if block:
                    block.insert(0, cleanup())
            if isinstance(node, ast.While):
                return [result, cleanup()]
            return result
        return [*(result if isinstance(result, list) else [result]), cleanup()]

    # -- scopes ----------------------------------------------------------------------------
    def rewrite_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda,
                         text: str | None = None) -> None:
        """Rewrite the body of the function being overdubbed (its header is not executed).
        Once per Overdubber: it notes what it found in ``node``.

        ``text``: the source ``node`` was parsed from, where no pass changed it.  Without
        ``:=``, ``yield`` or ``await`` in it (nor, then, a pass's embedded names), the scan
        has only operators to count, and stops once they are too many to inline.
        """
        self._walrus_targets = set()
        if text is not None and not any(word in text for word in (":=", "yield", "await")):
            if self.observe:
                self._scan(node, operators_only=True)
        elif self.observe or EMBEDDED:  # (else there is nothing to look for)
            self._scan(node)
        if isinstance(node, ast.Lambda):
            node.body = self.visit(node.body)
            return
        node.body = self._statements(node.body)

    def _scan(self, node: ast.AST, operators_only: bool = False) -> None:
        """Note the names ``:=`` binds, a pass's embedded names, whether anything suspends, and
        whether the operators outside loops are too many to inline (see the class docstring);
        ``operators_only``: only the last (``node`` has nothing of the others)."""
        straight, suspending = 0, False
        categories = self.categories
        skip = _LEAVES - {ast.Name} if EMBEDDED and not operators_only else _LEAVES
        pending: list[tuple[Any, bool]] = [(node, True)]
        while pending:
            child, counted = pending.pop()
            kind = type(child)
            if kind is ast.NamedExpr and type(child.target) is ast.Name:
                self._walrus_targets.add(child.target.id)
            elif kind is ast.Name and child.id in EMBEDDED:
                self.used.add(child.id)  # a pass's embed(): bound for nested bodies too
            elif counted and _COUNTED.get(kind) in categories:
                straight += 1
                if operators_only and straight > INLINE_BUDGET:
                    break  # (enough to know)
            elif kind in _SUSPENDING:
                suspending = True
            counted = counted and (child is node or kind not in _NOT_STRAIGHT)
            fields = child.__dict__
            for name in child._fields:
                value = fields.get(name)
                if type(value) is list:
                    pending.extend([(item, counted) for item in value
                                    if isinstance(item, ast.AST) and type(item) not in skip])
                elif isinstance(value, ast.AST) and type(value) not in skip:
                    pending.append((value, counted))
        self._compact = straight > INLINE_BUDGET
        self._may_suspend = suspending

    def _statements(self, body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in body:
            new = self.visit(stmt)
            out.extend(new if isinstance(new, list) else [new])
        return out

    def _visit_header(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        # Decorators and defaults run in the enclosing scope; the body runs when called and is
        # rewritten then.  Annotations stay native (they may be strings under __future__).
        if not isinstance(node, ast.Lambda):
            node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.args.defaults = [self.visit(d) for d in node.args.defaults]
        node.args.kw_defaults = [d if d is None else self.visit(d) for d in node.args.kw_defaults]

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
                          ) -> ast.AST | list[ast.stmt]:
        self._visit_header(node)
        if self._defines_functions:
            self._note_imported(node.body)
        if isinstance(node, ast.Lambda):
            return node
        return self._decorate(node)

    def _decorate(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
                  ) -> ast.AST | list[ast.stmt]:
        """Apply the (visited) decorators as calls the context sees::

            @d1                      @t1 = d1
            @d2(arg)                 @t2 = d2(arg)
            def f(): ...       ->    def f(): ...       (starting on @d1's line, like the original)
                                     f = @od(@t1, @od(@t2, f))
                                     del @t1, @t2

        The decorator expressions are evaluated first, then the definition, then the calls,
        innermost first: Python's order.
        """
        if CALL not in self.categories or not node.decorator_list:
            return node
        if self._class_bodies:
            # A class namespace may watch every binding (an Enum's does): no temporaries there,
            # and the name is bound once, by the decorators themselves: @d -> @partial(@od, d).
            node.decorator_list = [
                _place(ast.Call(self._name("@partial"), [self._name("@od"), d], []), d)
                for d in node.decorator_list]
            return node
        out: list[ast.stmt] = []
        refs: list[ast.expr] = []
        temps: list[str] = []
        for decorator in node.decorator_list:
            if _is_simple(decorator):
                refs.append(decorator)
                continue
            temp = self._temp()
            temps.append(temp)
            out.append(_place(ast.Assign([ast.Name(temp, _STORE)], decorator), decorator))
            refs.append(ast.Name(temp, _LOAD))
        first = node.decorator_list[0]
        node.decorator_list = []
        node.lineno, node.col_offset = first.lineno, first.col_offset  # co_firstlineno as before
        out.append(node)
        value: ast.expr = ast.Name(node.name, _LOAD)
        for ref in reversed(refs):
            value = ast.Call(func=self._name("@od"), args=[ref, value], keywords=[])
        out.append(_place(ast.Assign([ast.Name(node.name, _STORE)], value), first))
        if temps:
            out.append(_place(ast.Delete([ast.Name(t, ast.Del()) for t in temps]), first))
        return out

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST | list[ast.stmt]:
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        generic = bool(getattr(node, "type_params", None))  # 3.12+ `class C[T](Base[T])`:
        self._no_walrus += generic  # its bases are evaluated in the type parameters' scope
        node.bases = [self.visit(b) for b in node.bases]
        node.keywords = [self.visit(k) for k in node.keywords]
        self._no_walrus -= generic
        outer, self.class_name = self.class_name, node.name
        self._no_walrus += 1
        self._class_bodies += 1
        node.body = self._statements(node.body)
        self._class_bodies -= 1
        self._no_walrus -= 1
        self.class_name = outer
        return self._decorate(node)

    def visit_TypeAlias(self, node: ast.AST) -> ast.AST:
        # 3.12+ `type X = ...`: its value is evaluated lazily, like an annotation: native.
        return node

    def visit_Match(self, node: ast.Match) -> ast.AST | list[ast.stmt]:
        """Under tags, a ``match`` whose patterns look into the subject (class, sequence,
        mapping patterns, ``None``/``True``/``False``) becomes the tests it stands for, each
        made as code would make it, through the context: ``isinstance``, ``len``, ``==``, the
        attributes, items and keys read (a capture gets what reading that element, attribute
        or key gives: its metadata, its derivative); the type checks themselves
        (``MATCH_SEQUENCE``, ``MATCH_MAPPING``, a class pattern's positional names) on the
        value under the tags.  Natively, ``case float(k)`` checks the wrapper's type, and
        ``case P(x=x)`` reads the attribute behind the context's back.  CPython's order is
        kept (a sequence pattern unpacks by iterating, or by indexing where it has ``*_``; a
        class pattern reads its attributes before matching them; names are bound once the
        pattern matched, before the guard)::

            match s:                      @t1 = s; @t2 = False
                case float(k) if k > 0:   @t4 = @match_type(float)
                    body                  if @od(@isinstance, @t1, @t4):
                                              @t5 = @ClassMatch(@t4, 1); @t6 = @t5.positional(0)
                                              @t7 = @t1 if @t6 is None else @od(@getattr, ...)
                                              if @t7 is not @unmatched:
                                                  @t3 = @t7   (k's)
                                                  k = @t3
                                                  if k > 0: @t2 = True; body
                                          (the next case under `if not @t2:`)

        Other ``match`` statements stay native (a capture or a value pattern sees the tagged
        subject as code does), and so do those in class bodies, where temporaries would be
        class attributes."""
        if ITERATION not in self.categories or self._class_bodies or not any(
                isinstance(p, _LOOKING_PATTERNS)
                for case in node.cases for p in ast.walk(case.pattern)):
            self.generic_visit(node)
            return node
        subject, done = self._temp(), self._temp()
        temps = [subject, done]
        out: list[ast.stmt] = [
            _place(ast.Assign([ast.Name(subject, _STORE)], self.visit(node.subject)),
                   node.subject),
            _place(ast.Assign([ast.Name(done, _STORE)], ast.Constant(False)), node)]
        for index, case in enumerate(node.cases):
            names: dict[str, str] = {}
            for p in ast.walk(case.pattern):
                for name in (getattr(p, "name", None), getattr(p, "rest", None)):
                    if name and name not in names:
                        names[name] = self._temp()
            temps += names.values()
            success: list[ast.stmt] = [
                _place(ast.Assign([ast.Name(done, _STORE)], ast.Constant(True)), case.pattern),
                *self._statements(case.body)]
            if case.guard is not None:
                success = [_place(ast.If(self.visit(case.guard), success, []), case.guard)]
            bind = [_place(ast.Assign([ast.Name(name, _STORE)], ast.Name(temp, _LOAD)),
                           case.pattern) for name, temp in names.items()]
            tests = self._pattern(case.pattern, subject, names, [*bind, *success], temps)
            if index:
                tests = [_place(ast.If(ast.UnaryOp(ast.Not(), ast.Name(done, _LOAD)), tests,
                                       []), case.pattern)]
            out += tests
        out.append(_place(ast.Assign([ast.Name(t, _STORE) for t in temps], ast.Constant(None)),
                          node))
        return out

    def _pattern(self, pattern: ast.pattern, subject: str, names: dict[str, str],
                 then: list[ast.stmt], temps: list[str]) -> list[ast.stmt]:
        """Statements that match ``pattern`` against the temporary ``subject``, binding its
        captures to their temporaries (``names``), and run ``then`` if it matched."""
        def put(node: _N) -> _N:
            return _place(node, pattern)

        def load(name: str) -> ast.Name:
            return put(ast.Name(name, _LOAD))

        def temp() -> str:
            made = self._temp()
            temps.append(made)
            return made

        def assign(name: str, value: ast.expr) -> ast.stmt:
            return put(ast.Assign([ast.Name(name, _STORE)], value))

        if isinstance(pattern, (ast.MatchAs, ast.MatchStar)):
            inner = getattr(pattern, "pattern", None)
            if pattern.name is not None:
                then = [assign(names[pattern.name], load(subject)), *then]
            return then if inner is None else self._pattern(inner, subject, names, then, temps)
        if isinstance(pattern, ast.MatchValue):
            test = self.visit(put(ast.Compare(load(subject), [ast.Eq()],
                                              [_pattern_value(pattern.value)])))
            return [put(ast.If(test, then, []))]
        if isinstance(pattern, ast.MatchSingleton):
            plain = ast.Call(self._name("@innermost"), [load(subject)], [])
            return [put(ast.If(ast.Compare(plain, [ast.Is()], [ast.Constant(pattern.value)]),
                               then, []))]
        if isinstance(pattern, ast.MatchOr):
            ok = temp()
            out = [assign(ok, ast.Constant(False))]
            for index, alternative in enumerate(pattern.patterns):
                tests = self._pattern(alternative, subject, names,
                                      [assign(ok, ast.Constant(True))], temps)
                out += tests if not index else [
                    put(ast.If(ast.UnaryOp(ast.Not(), load(ok)), tests, []))]
            return [*out, put(ast.If(load(ok), then, []))]
        if isinstance(pattern, ast.MatchSequence):
            return self._sequence_pattern(pattern, subject, names, then, temps, put, temp)
        if isinstance(pattern, ast.MatchMapping):
            return self._mapping_pattern(pattern, subject, names, then, temps, put, temp)
        assert isinstance(pattern, ast.MatchClass)
        return self._class_pattern(pattern, subject, names, then, temps, put, temp)

    def _length(self, subject: str, template: ast.AST) -> ast.Call:
        return self._dispatch("@od", len, [ast.Name(subject, _LOAD)], template)

    def _sequence_pattern(self, pattern: ast.MatchSequence, subject: str,
                          names: dict[str, str], then: list[ast.stmt], temps: list[str],
                          put: Callable[[Any], Any], temp: Callable[[], str]) -> list[ast.stmt]:
        patterns = pattern.patterns
        size = len(patterns)
        star = next((i for i, p in enumerate(patterns) if isinstance(p, ast.MatchStar)), -1)
        inner = then
        if not all(_is_wildcard(p) for p in patterns):
            items = [temp() for _ in patterns]
            for item, sub in reversed(list(zip(items, patterns))):
                inner = self._pattern(sub, item, names, inner, temps)
            if star >= 0 and _is_wildcard(patterns[star]):  # `[a, *_, b]`: by index
                reads = []
                for index, (item, sub) in enumerate(zip(items, patterns)):
                    if _is_wildcard(sub):
                        continue
                    at: ast.expr = ast.Constant(index) if index < star else ast.BinOp(
                        self._length(subject, pattern), ast.Sub(), ast.Constant(size - index))
                    read = self._operator(operator.getitem, [put(ast.Name(subject, _LOAD)),
                                                             put(at)],
                                          lambda n: ast.Subscript(n[0], n[1], _LOAD),
                                          pattern, (0,))
                    reads.append(put(ast.Assign([ast.Name(item, _STORE)], read)))
            else:  # by iterating, as unpacking does (`*rest` a list)
                targets: list[ast.expr] = [
                    ast.Starred(ast.Name(item, _STORE), _STORE) if index == star
                    else ast.Name(item, _STORE) for index, item in enumerate(items)]
                reads = [put(ast.Assign([ast.Tuple(targets, _STORE)],
                                        self._iterated(put(ast.Name(subject, _LOAD)))))]
            inner = [*reads, *inner]
        if star < 0:
            inner = [put(ast.If(ast.Compare(self._length(subject, pattern), [ast.Eq()],
                                            [ast.Constant(size)]), inner, []))]
        elif size > 1:
            inner = [put(ast.If(ast.Compare(self._length(subject, pattern), [ast.GtE()],
                                            [ast.Constant(size - 1)]), inner, []))]
        check = ast.Call(self._name("@match_sequence"), [ast.Name(subject, _LOAD)], [])
        return [put(ast.If(check, inner, []))]

    def _mapping_pattern(self, pattern: ast.MatchMapping, subject: str,
                         names: dict[str, str], then: list[ast.stmt], temps: list[str],
                         put: Callable[[Any], Any], temp: Callable[[], str]) -> list[ast.stmt]:
        size = len(pattern.keys)
        keys, get = (temp(), temp()) if size else ("", "")
        values = [temp() for _ in pattern.keys]
        inner = then
        if pattern.rest is not None:  # `**rest`, once the values matched: the other items,
            rest = names[pattern.rest]  # read through the context
            copied = ast.Dict([None], [self._unpacked(put(ast.Name(subject, _LOAD)))])
            inner = [put(ast.Assign([ast.Name(rest, _STORE)], copied)), *[
                put(ast.Delete([ast.Subscript(ast.Name(rest, _LOAD), ast.Subscript(
                    ast.Name(keys, _LOAD), ast.Constant(index), _LOAD), ast.Del())]))
                for index in range(size)], *inner]
        for value, sub in reversed(list(zip(values, pattern.patterns))):
            inner = self._pattern(sub, value, names, inner, temps)
        if size:
            checked = not all(isinstance(_pattern_value(k), ast.Constant)
                              for k in pattern.keys)
            for index in reversed(range(size)):
                key: ast.expr = ast.Subscript(ast.Name(keys, _LOAD), ast.Constant(index), _LOAD)
                if checked:  # (value patterns: two may be equal)
                    key = ast.Call(self._name("@match_key"),
                                   [ast.Name(keys, _LOAD), ast.Constant(index)], [])
                read = ast.Call(self._name("@od"), [ast.Name(get, _LOAD), key,
                                                    self._name("@unmatched")], [])
                inner = [put(ast.Assign([ast.Name(values[index], _STORE)], read)),
                         put(ast.If(ast.Compare(ast.Name(values[index], _LOAD), [ast.IsNot()],
                                                [self._name("@unmatched")]), inner, []))]
            method = self.visit(put(ast.Attribute(ast.Name(subject, _LOAD), "get", _LOAD)))
            key_values = [self.visit(put(_pattern_value(k))) for k in pattern.keys]
            inner = [put(ast.Assign([ast.Name(keys, _STORE)], ast.Tuple(key_values, _LOAD))),
                     put(ast.Assign([ast.Name(get, _STORE)], method)), *inner]
            inner = [put(ast.If(ast.Compare(self._length(subject, pattern), [ast.GtE()],
                                            [ast.Constant(size)]), inner, []))]
        check = ast.Call(self._name("@match_mapping"), [ast.Name(subject, _LOAD)], [])
        return [put(ast.If(check, inner, []))]

    def _class_pattern(self, pattern: ast.MatchClass, subject: str,
                       names: dict[str, str], then: list[ast.stmt], temps: list[str],
                       put: Callable[[Any], Any], temp: Callable[[], str]) -> list[ast.stmt]:
        cls, attrs = temp(), [temp() for _ in (*pattern.patterns, *pattern.kwd_patterns)]
        inner = then
        for value, sub in reversed(list(zip(attrs, (*pattern.patterns,
                                                    *pattern.kwd_patterns)))):
            inner = self._pattern(sub, value, names, inner, temps)
        if attrs:
            match, name = temp(), temp()
            count = len(pattern.patterns)
            for index in reversed(range(len(attrs))):
                value = attrs[index]
                if index < count:
                    which = ast.Call(ast.Attribute(ast.Name(match, _LOAD), "positional", _LOAD),
                                     [ast.Constant(index)], [])
                else:
                    which = ast.Call(ast.Attribute(ast.Name(match, _LOAD), "keyword", _LOAD),
                                     [ast.Constant(pattern.kwd_attrs[index - count])], [])
                read: ast.expr = self._dispatch(
                    "@od", getattr, [ast.Name(subject, _LOAD), ast.Name(name, _LOAD),
                                     self._name("@unmatched")], pattern)
                if index < count:  # (None: a builtin's positional sub-pattern, the subject)
                    read = ast.IfExp(ast.Compare(ast.Name(name, _LOAD), [ast.Is()],
                                                 [ast.Constant(None)]),
                                     ast.Name(subject, _LOAD), read)
                inner = [put(ast.Assign([ast.Name(name, _STORE)], which)),
                         put(ast.Assign([ast.Name(value, _STORE)], read)),
                         put(ast.If(ast.Compare(ast.Name(value, _LOAD), [ast.IsNot()],
                                                [self._name("@unmatched")]), inner, []))]
            inner = [put(ast.Assign([ast.Name(match, _STORE)], ast.Call(
                self._name("@ClassMatch"), [ast.Name(cls, _LOAD), ast.Constant(count)], []))),
                *inner]
        test = self._dispatch("@od", isinstance, [ast.Name(subject, _LOAD),
                                                  ast.Name(cls, _LOAD)], pattern)
        checked = ast.Call(self._name("@match_type"), [self.visit(pattern.cls)], [])
        return [put(ast.Assign([ast.Name(cls, _STORE)], checked)), put(ast.If(test, inner, []))]

    def visit_match_case(self, node: ast.match_case) -> ast.AST:
        # Patterns are not expressions: their dotted names must stay attribute lookups.
        if node.guard is not None:
            node.guard = self.visit(node.guard)
        node.body = self._statements(node.body)
        return node

    def _comprehension(self, node: ast.AST) -> ast.AST:
        self._no_walrus += 1
        self.generic_visit(node)
        self._no_walrus -= 1
        if ITERATION in self.categories:
            generators: list[ast.comprehension] = []
            for clause in node.generators:  # type: ignore[attr-defined]
                generators += self._unpacked_clauses(clause)
            node.generators = generators  # type: ignore[attr-defined]
        return node

    def _unpacked_clauses(self, clause: ast.comprehension) -> list[ast.comprehension]:
        """A clause unpacking its items (``for a, b in it``) as ``for @t in it for a, b in
        (iter(@t),)``, nested targets alike: the unpacking reads each item through the
        context, as a ``for`` statement's does (a tuple that a list holds with its metadata
        gives its members their metadata back); its conditions stay on the last clause."""
        if clause.is_async or not isinstance(clause.target, (ast.Tuple, ast.List)):
            return [clause]
        temp = self._temp()
        target = clause.target
        clause.target = _place(ast.Name(temp, _STORE), target)
        unpacked = _place(ast.Tuple([self._dispatch("@od", iter, [ast.Name(temp, _LOAD)],
                                                    target)], _LOAD), target)
        clauses = [clause, ast.comprehension(target=target, iter=unpacked, ifs=[], is_async=0),
                   *self._nested_clauses(target)]
        clauses[-1].ifs, clause.ifs = clause.ifs, []
        return clauses

    def _nested_clauses(self, target: ast.Tuple | ast.List) -> list[ast.comprehension]:
        # (a, (b, c)) unpacked natively from iter(@t) gives (b, c) as the item; its members
        # are unpacked through the context in a clause of their own
        out: list[ast.comprehension] = []
        for i, element in enumerate(target.elts):
            inner = element.value if isinstance(element, ast.Starred) else element
            if isinstance(inner, (ast.Tuple, ast.List)) and not isinstance(element, ast.Starred):
                temp = self._temp()
                target.elts[i] = _place(ast.Name(temp, _STORE), inner)
                clause = ast.comprehension(target=inner, iter=_place(ast.Tuple(
                    [self._dispatch("@od", iter, [ast.Name(temp, _LOAD)], inner)], _LOAD),
                    inner), ifs=[], is_async=0)
                out += [clause, *self._nested_clauses(inner)]
        return out

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def visit_comprehension(self, node: ast.comprehension) -> ast.AST:
        self.generic_visit(node)
        if not node.is_async:
            node.iter = self._iterated(node.iter)
        return node

    def _unpacked(self, node: ast.expr) -> ast.expr:
        """``node`` (visited), a mapping unpacked by ``**``, with its values read through the
        context where iteration is intercepted (see :func:`_unpacked`)."""
        if ITERATION not in self.categories:
            return node
        return _place(ast.Call(self._name("@unpacked"), [self._name("@od"), node], []), node)

    def visit_Dict(self, node: ast.Dict) -> ast.AST:
        self.generic_visit(node)
        node.values = [self._unpacked(v) if k is None else v
                       for k, v in zip(node.keys, node.values)]
        return node

    def visit_YieldFrom(self, node: ast.YieldFrom) -> ast.AST:
        self.generic_visit(node)
        if ITERATION in self.categories:
            node.value = _place(ast.Call(self._name("@delegated"), [self._name("@od"),
                                                                    node.value], []), node)
        return node

    def visit_Starred(self, node: ast.Starred) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load):
            node.value = self._iterated(node.value)
        return node

    # -- expressions -----------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> ast.AST:
        func = node.func
        frame_sensitive = (
            (isinstance(func, ast.Name) and func.id in _FRAME_SENSITIVE_NAMES)
            or (isinstance(func, ast.Name) and func.id in ("eval", "exec") and len(node.args) < 2
                and not node.keywords)
            or (isinstance(func, ast.Attribute) and func.attr in _FRAME_SENSITIVE_ATTRS))
        node.args = [a if type(a) in _LEAVES else self.visit(a) for a in node.args]
        node.keywords = [self.visit(k) for k in node.keywords]
        for k in node.keywords:
            if k.arg is None:
                k.value = self._unpacked(k.value)
        if frame_sensitive:
            if (isinstance(func, ast.Attribute) and func.attr == "_getframe"
                    and len(node.args) == 1 and not node.keywords):
                # sys._getframe(n): count the user's frames, not the dispatchers between them
                here = ast.Call(func, [], [])
                return _place(ast.Call(self._name("@getframe"), [here, node.args[0]], []), node)
            if isinstance(func, ast.Attribute) and func.attr == "_getframemodulename":
                # 3.12+: the same for the module name (namedtuple, Enum, typing use it)
                return _place(ast.Call(self._name("@getframemodulename"), [func, *node.args],
                                       node.keywords), node)
            if (isinstance(func, ast.Name) and func.id in ("locals", "vars", "dir")
                    and not node.args and not self._class_bodies):
                # The frame's namespace without our hidden `@` names (a snapshot either way).
                return _place(ast.Call(self._name("@hide"), [node, ast.Name(func.id, _LOAD)],
                                       []), node)
            if (isinstance(func, ast.Name) and func.id in ("eval", "exec")
                    and len(node.args) == 1 and not isinstance(node.args[0], ast.Starred)
                    and not node.keywords and CALL in self.categories
                    and not self._class_bodies):
                # eval(text) and exec(text) read the frame's namespaces: given to them
                # explicitly (locals() is the frame's own dict, where exec's writes stay), the
                # call goes through the context as eval(text, globals(), locals()) would (under
                # a derivative, the text is differentiated).  Where the name is not the builtin
                # (a function of the user's called exec), it is called with the text alone.
                namespace = self._name("@namespace")
                scope = [ast.Call(self._name("@globals"), [], []),
                         ast.Call(self._name("@hide"), [ast.Call(namespace, [], []), namespace],
                                  [])]
                builtin = ast.Compare(ast.Name(func.id, _LOAD), [ast.Is()],
                                      [self._name("@" + func.id)])
                chosen = ast.IfExp(builtin,
                                   ast.Call(self._name("@od"), [func, node.args[0], *scope], []),
                                   ast.Call(self._name("@od"), [ast.Name(func.id, _LOAD),
                                                                copy_tree(node.args[0])], []))
                return _place(chosen, node)
            return node
        node.func = self.visit(func)
        if CALL not in self.categories or (type(func) is ast.Name and func.id in DIRECT):
            return node  # (a pass's own helper, embedded to be called directly)
        if any(k.arg is None for k in node.keywords) or (
                len(node.args) == 1 and isinstance(node.args[0], ast.Starred)):
            # f(**k), f(*a): unpacking errors name the callee -> @spread(@od, f)(**k)
            spread = ast.Call(self._name("@spread"), [self._name("@od"), node.func], [])
            return _place(ast.Call(func=spread, args=node.args, keywords=node.keywords), node)
        template = self._call_at(node, func)
        at = _position(template)
        for part in (node.func, *node.args, *node.keywords):
            if "lineno" not in part.__dict__:  # (_place's work, where it has any)
                _place(part, template)
        call = ast.Call(self._name("@od", at=at), [node.func, *node.args], node.keywords)
        call.__dict__.update(at)
        return call

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        if type(node.left) not in _LEAVES:  # (generic_visit's work, for the common operator)
            node.left = self.visit(node.left)
        if type(node.right) not in _LEAVES:
            node.right = self.visit(node.right)
        if BINOP not in self.categories:
            return node
        if not self._inline():  # (what _operator does then, without making its `native`)
            return self._dispatch("@op2", BINOPS[type(node.op)], [node.left, node.right], node)
        return self._operator(BINOPS[type(node.op)], [node.left, node.right],
                              lambda n: ast.BinOp(n[0], node.op, n[1]), node, (0, 1))

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if UNARYOP not in self.categories:
            return node
        return self._operator(UNARYOPS[type(node.op)], [node.operand],
                              lambda n: ast.UnaryOp(node.op, n[0]), node, (0,))

    def _compare(self, op: ast.cmpop, left: ast.expr, right: ast.expr, node: ast.AST) -> ast.expr:
        if isinstance(op, (ast.In, ast.NotIn)):
            contains = self._operator(operator.contains, [left, right],
                                      lambda n: ast.Compare(n[0], [ast.In()], [n[1]]), node,
                                      (1,), swap=True)
            if isinstance(op, ast.In):
                return contains
            return _place(ast.UnaryOp(op=ast.Not(), operand=contains), node)
        subjects = () if isinstance(op, (ast.Is, ast.IsNot)) else (0, 1)
        return self._operator(COMPAREOPS[type(op)], [left, right],
                              lambda n: ast.Compare(n[0], [op], [n[1]]), node, subjects)

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if COMPARE not in self.categories:
            return node
        if len(node.ops) == 1:
            return self._compare(node.ops[0], node.left, node.comparators[0], node)
        if self._no_walrus:  # a chain needs a temporary, which the compiler forbids here
            return node
        # a < b < c  ->  (a < (@t := b)) and (@t < c), each seen: short-circuits, b once.
        parts, left = [], node.left
        for i, (op, right) in enumerate(zip(node.ops, node.comparators)):
            if i < len(node.ops) - 1:
                temp = self._temp()
                self._fresh.append(temp)
                bound = _place(ast.NamedExpr(target=ast.Name(temp, _STORE), value=right), right)
                parts.append(self._compare(op, left, bound, node))
                left = _place(ast.Name(temp, _LOAD), right)
            else:
                parts.append(self._compare(op, left, right, node))
        return _place(ast.BoolOp(op=ast.And(), values=parts), node)

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        if SUBSCRIPT not in self.categories or not isinstance(node.ctx, ast.Load):
            self.generic_visit(node)
            return node
        return self._operator(operator.getitem, [self.visit(node.value), self._index(node.slice)],
                              lambda n: ast.Subscript(n[0], n[1], _LOAD), node, (0,))

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if not isinstance(node.ctx, ast.Load):
            self.generic_visit(node)
            return node
        read: ast.expr = node
        if ATTRIBUTE not in self.categories:
            self.generic_visit(node)
        else:
            read = self._operator(getattr, [self.visit(node.value), self._attr_name(node)],
                                  lambda n: ast.Attribute(n[0], node.attr, _LOAD),
                                  _attribute_at(node), (0,))
        view = _FRAME_VIEWS.get(node.attr)
        if view is not None:
            return _place(ast.Call(self._name(view), [read], []), node)
        return read

    # -- statements that store ------------------------------------------------------------
    def _intercepted_target(self, target: ast.expr) -> bool:
        if self._class_bodies:
            return False  # stores there need temporaries: native (but see _store_in_class_body)
        if isinstance(target, ast.Attribute):
            return ATTRIBUTE in self.categories
        if isinstance(target, ast.Subscript):
            return SUBSCRIPT in self.categories
        if isinstance(target, (ast.Tuple, ast.List)):
            # (a nested target, `a, (b, c) = v`, unpacks its item through the context too)
            return any(self._intercepted_target(e) or (
                ITERATION in self.categories and isinstance(e, (ast.Tuple, ast.List)))
                for e in target.elts)
        if isinstance(target, ast.Starred):
            return self._intercepted_target(target.value)
        return False

    def _begin(self) -> tuple[list[ast.stmt], list[str]]:
        self._pending: list[ast.stmt] = []
        return self._pending, []

    def _finish(self, out: list[ast.stmt], temps: list[str], template: ast.AST) -> list[ast.stmt]:
        if temps:  # temporaries are cleared after use
            out.append(_place(ast.Delete([ast.Name(t, ast.Del()) for t in temps]), template))
        return out

    def _load(self, obj: ast.expr, key: ast.expr, attr: str | None, target: ast.expr
              ) -> ast.expr:
        """Read ``obj.attr`` / ``obj[key]`` (operands simple), seen if the category is, where
        CPython reads ``target`` (an augmented assignment's)."""
        native: Callable[[list[ast.expr]], ast.expr]
        where = self._target_at(target)
        if attr is not None:
            native = lambda n: ast.Attribute(n[0], attr, _LOAD)  # noqa: E731
            if ATTRIBUTE not in self.categories:
                return _place(native([_copy(obj)]), target)
            return self._operator(getattr, [_copy(obj), _copy(key)], native, where, (0,))
        native = lambda n: ast.Subscript(n[0], n[1], _LOAD)  # noqa: E731
        if SUBSCRIPT not in self.categories:
            return _place(native([_copy(obj), _copy(key)]), target)
        return self._operator(operator.getitem, [_copy(obj), _copy(key)], native, where, (0,))

    def _store(self, target: ast.expr, value: ast.expr, template: ast.AST,
               temps: list[str]) -> None:
        """Append to ``self._pending`` the statements storing simple ``value`` into ``target``.

        Python's order: the value first (already done), then the target's object, then its index.
        """
        if isinstance(target, ast.Attribute) and ATTRIBUTE in self.categories:
            obj = self._assign_temp(self.visit(target.value), template, temps)
            native = ast.Assign([_place(ast.Attribute(_copy(obj), target.attr, _STORE),
                                              target)], _copy(value))
            self._pending += self._operator_stmt(
                setattr, [obj, self._attr_name(target), value], _place(native, template),
                template, (0,), target)
        elif isinstance(target, ast.Subscript) and SUBSCRIPT in self.categories:
            obj = self._assign_temp(self.visit(target.value), template, temps)
            key = self._assign_temp(self._index(target.slice), template, temps)
            native = ast.Assign([_place(ast.Subscript(_copy(obj), _copy(key), _STORE),
                                              target)], _copy(value))
            self._pending += self._operator_stmt(
                operator.setitem, [obj, key, value], _place(native, template), template, (0,),
                target)
        elif isinstance(target, (ast.Tuple, ast.List)) and self._intercepted_target(target):
            names, later = [], []
            for elt in target.elts:
                temp = self._temp()
                temps.append(temp)
                store: ast.expr = ast.Name(temp, _STORE)
                names.append(ast.Starred(store, _STORE) if isinstance(elt, ast.Starred)
                             else store)
                later.append((elt.value if isinstance(elt, ast.Starred) else elt, temp))
            unpack = ast.Assign(targets=[ast.Tuple(names, _STORE)], value=_copy(value))
            self._pending.append(_place(unpack, template))
            for elt, temp in later:
                item: ast.expr = _place(ast.Name(temp, _LOAD), template)
                if isinstance(elt, (ast.Tuple, ast.List)):
                    item = self._assign_temp(self._iterated(item), template, temps)
                self._store(elt, item, template, temps)
        else:
            self._pending.append(_place(ast.Assign([self.visit(target)], _copy(value)), template))

    def _store_in_class_body(self, node: ast.Assign) -> ast.AST | None:
        """``obj.a = v`` or ``obj[k] = v`` in a class body, seen, without temporaries (the class
        namespace may watch every binding, as an ``Enum``'s does)::

            obj[k] = v   ->   @op3(@setitem, *@value_last(v, obj, k))

        keeping Python's order (the value first).  None for other assignments: stores with
        several targets or unpacking stay native in class bodies."""
        target = node.targets[0]
        if len(node.targets) > 1:
            return None
        fn: _Fn
        key: ast.expr
        if isinstance(target, ast.Attribute) and ATTRIBUTE in self.categories:
            fn, key = setattr, self._attr_name(target)
        elif isinstance(target, ast.Subscript) and SUBSCRIPT in self.categories:
            fn, key = operator.setitem, self._index(target.slice)
        else:
            return None
        ordered = ast.Call(self._name("@value_last"),
                           [self.visit(node.value), self.visit(target.value), key], [])
        call = ast.Call(self._name("@op3"), [self._fn(fn), ast.Starred(ordered, _LOAD)], [])
        return _place(ast.Expr(_place(call, self._target_at(target))), node)

    def visit_Assign(self, node: ast.Assign) -> ast.AST | list[ast.stmt]:
        if self._class_bodies:
            stored = self._store_in_class_body(node)
            if stored is not None:
                return stored
        unpacks = len(node.targets) == 1 and isinstance(node.targets[0], (ast.Tuple, ast.List))
        # ``a, b = s = v``: each unpacking target iterates the value through the context (the
        # value itself, not an iterator of it, is bound to the other targets)
        several = len(node.targets) > 1 and ITERATION in self.categories and \
            not self._class_bodies and \
            any(isinstance(t, (ast.Tuple, ast.List)) for t in node.targets)
        if not several and not any(self._intercepted_target(t) for t in node.targets):
            self.generic_visit(node)
            if unpacks:
                node.value = self._iterated(node.value)
            return node
        out, temps = self._begin()
        value = self.visit(node.value)
        value = self._assign_temp(self._iterated(value) if unpacks else value, node, temps)
        for target in node.targets:
            if several and isinstance(target, (ast.Tuple, ast.List)):
                items = self._iterated(_place(_copy(value), node))
                self._store(target, self._assign_temp(items, node, temps), node, temps)
            else:
                self._store(target, value, node, temps)
        return self._finish(out, temps, node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST | list[ast.stmt]:
        if node.value is None or not self._intercepted_target(node.target):
            if node.value is not None:
                node.value = self.visit(node.value)
            if not isinstance(node.target, ast.Name):
                node.target = self.visit(node.target)
            return node
        out, temps = self._begin()
        value = self._assign_temp(self.visit(node.value), node, temps)
        self._store(node.target, value, node, temps)
        return self._finish(out, temps, node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST | list[ast.stmt]:
        target = node.target
        if BINOP not in self.categories and not self._intercepted_target(target):
            self.generic_visit(node)
            return node
        if self._class_bodies and not isinstance(target, ast.Name):
            self.generic_visit(node)  # it needs temporaries, and a class body has none: native
            return node
        inplace = INPLACE_OPS[type(node.op)]
        if isinstance(target, ast.Name):  # here BINOP is intercepted
            value = self.visit(node.value)
            load = ast.Name(target.id, _LOAD)
            load.__dict__.update(_position(target))
            combined = self._operator(inplace, [load, value],
                                      lambda n: ast.Call(self._fn(inplace), n, []), node, (0, 1))
            at = _position(node)
            name = ast.Name(target.id, _STORE)
            name.__dict__.update(at)
            assign = ast.Assign([name], combined)
            assign.__dict__.update(at)
            return assign
        # x.a += v / x[i] += v: evaluate x (and i) once, load, combine, store (Python's order).
        out, temps = self._begin()
        obj = self._assign_temp(self.visit(target.value), node, temps)
        attr = target.attr if isinstance(target, ast.Attribute) else None
        if isinstance(target, ast.Attribute):
            key: ast.expr = self._attr_name(target)
        else:
            key = self._assign_temp(self._index(target.slice), node, temps)
        current = self._assign_temp(self._load(obj, key, attr, target), node, temps)
        value = self.visit(node.value)
        if BINOP in self.categories:
            combined = self._operator(inplace, [current, value],
                                      lambda n: ast.Call(self._fn(inplace), n, []), node, (0, 1))
        else:
            combined = ast.Call(self._fn(inplace), [_copy(current), value], [])
        result = self._assign_temp(_place(combined, node), node, temps)
        store = _place(ast.Attribute(_copy(obj), attr, _STORE) if attr is not None
                             else ast.Subscript(_copy(obj), _copy(key), _STORE), target)
        if self._intercepted_target(target):
            # the object and key are already evaluated: store through the simple temporaries
            fn = setattr if attr is not None else operator.setitem
            self._pending += self._operator_stmt(
                fn, [obj, key, result], _place(ast.Assign([store], _copy(result)), node), node,
                (0,), target)
        else:
            self._pending.append(_place(ast.Assign([store], _copy(result)), node))
        return self._finish(out, temps, node)

    def visit_Delete(self, node: ast.Delete) -> ast.AST | list[ast.stmt]:
        if not any(self._intercepted_target(t) for t in node.targets):
            self.generic_visit(node)
            return node
        out, temps = self._begin()

        def delete(target: ast.expr) -> None:
            if isinstance(target, (ast.Tuple, ast.List)):
                for elt in target.elts:
                    delete(elt)
            elif isinstance(target, ast.Attribute) and ATTRIBUTE in self.categories:
                obj = self._assign_temp(self.visit(target.value), node, temps)
                native = ast.Delete([_place(
                    ast.Attribute(_copy(obj), target.attr, ast.Del()), target)])
                self._pending += self._operator_stmt(
                    delattr, [obj, self._attr_name(target)], _place(native, node), node, (0,),
                    target)
            elif isinstance(target, ast.Subscript) and SUBSCRIPT in self.categories:
                obj = self._assign_temp(self.visit(target.value), node, temps)
                key = self._assign_temp(self._index(target.slice), node, temps)
                native = ast.Delete([_place(
                    ast.Subscript(_copy(obj), _copy(key), ast.Del()), target)])
                self._pending += self._operator_stmt(
                    operator.delitem, [obj, key], _place(native, node), node, (0,), target)
            else:
                self._pending.append(_place(ast.Delete([self.visit(target)]), node))

        for target in node.targets:
            delete(target)
        return self._finish(out, temps, node)

    def _loop_target(self, node: ast.For | ast.AsyncFor) -> ast.AST:
        if (ITERATION in self.categories and isinstance(node.target, (ast.Tuple, ast.List))
                and not isinstance(node, ast.AsyncFor) and not self._class_bodies):
            # for a, b in it: ...  ->  for @t in iter(it): a, b = iter(@t); ...
            temp = self._temp()
            unpack = ast.Assign([node.target], ast.Name(temp, _LOAD))
            node.target = _place(ast.Name(temp, _STORE), node.target)
            node.body.insert(0, _place(unpack, unpack.targets[0]))
        if not self._intercepted_target(node.target):
            self.generic_visit(node)
            if not isinstance(node, ast.AsyncFor):
                node.iter = self._iterated(node.iter)
            return node
        # for obj.x in it: ...  ->  for @t in it: obj.x = @t; ...
        temp = self._temp()
        target = node.target
        node.target = _place(ast.Name(temp, _STORE), target)
        node.iter = self.visit(node.iter)
        if not isinstance(node, ast.AsyncFor):
            node.iter = self._iterated(node.iter)
        stores, temps = self._begin()
        self._store(target, ast.Name(temp, _LOAD), target, temps)
        node.body = self._finish(stores, temps, target) + self._statements(node.body)
        node.orelse = self._statements(node.orelse)
        return node

    def _loop(self, node: ast.For | ast.AsyncFor | ast.While) -> ast.AST:
        self._loops += 1  # (inline operators here: see _inline)
        if isinstance(node, ast.While):
            result = self.generic_visit(node)
        else:
            result = self._loop_target(node)
        self._loops -= 1
        return result

    visit_For = visit_AsyncFor = visit_While = _loop

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        compared = type(node.test) is ast.Compare
        at = _position(node.test)
        self.generic_visit(node)
        if not (_ASSERT_AT_TEST and compared) or type(node.test) is ast.Compare:
            return node
        # 3.11 puts a failing assert's raise where its test left the compiler: a comparison's
        # position, but the whole statement's after a call (what the rewrite made of the
        # comparison).  Spelled out, the raise goes where it natively is; `__debug__` is a
        # constant to the compiler, so `python -O` drops the check as it drops the assert.
        error = ast.Call(self._name("@AssertionError", at=at), [node.msg] if node.msg else [],
                         [], **at)
        check = ast.If(ast.UnaryOp(ast.Not(), node.test, **at), [ast.Raise(error, None, **at)],
                       [])
        return _place(ast.If(ast.Name("__debug__", _LOAD), [_place(check, node)], []), node)

    def visit_With(self, node: ast.With) -> ast.AST:
        """``with m as v: ...``  ->  ``with @managed(@od, m) as v: ...``: a manager's Python
        ``__enter__``/``__exit__`` run through the context (see :func:`_managed`)."""
        self.generic_visit(node)
        if CALL in self.categories:
            for item in node.items:
                item.context_expr = _place(ast.Call(
                    func=self._name("@managed"), args=[self._name("@od"), item.context_expr],
                    keywords=[]), item.context_expr)
        return node
