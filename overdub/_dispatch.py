"""The per-call step, specialised per context, and how a callable is recursed into.

Each context instance gets a :class:`State` holding its dispatchers -- the functions the rewritten
code calls (``@od`` for calls, ``@op``/``@op2``/``@opr`` for operators) -- and a cache of the
user's functions rewritten for it; what depends only on the context's class (its verbs, its
primitives, what it rewrites) is worked out once, in the class's :class:`ClassPlan`, and a State
whose instance has died passes to the next new instance of the class (see :class:`State`).  The
dispatchers are generated from a template for the methods the context class actually overrides,
so a counting context that only has a ``prehook`` pays for a prehook and nothing else.  Their
meaning is always the documented one::

    prehook(fn, *args, **kwargs)
    if is_primitive(fn, *args, **kwargs): out = execute(fn, *args, **kwargs)
    elif can_recurse(fn, *args, **kwargs): out = recurse(fn, *args, **kwargs)
    else:                                  out = fallback(fn, *args, **kwargs)
    posthook(out, fn, *args, **kwargs)

Nesting: when a context is entered inside another one's run, the outer context's ``@od`` becomes
the inner one's *parent*; what the inner context executes (leaf calls, primitive implementations)
is then called through the parent, so the outer context sees it.
"""

from __future__ import annotations

import ast
import functools
import gc
import operator
import sys
import types
import weakref
from collections.abc import Callable
from typing import Any, cast

from . import _active, _cache, _primitives, _tagging
from ._frames import DISPATCHER_FILE, OVERDUB_DIR, add_verb
from ._protocols import is_static, lookup, protocol_for, static_types
from ._rewrite import ALL_CATEGORIES, CALL, ITERATION
from ._shims import NESTED, register_numpy_shims, shim_for
from . import _callback_shims  # noqa: F401  (its registrations: C functions' callbacks)

_Function = types.FunctionType
_Method = types.MethodType
_Partial = functools.partial
_getitem = operator.getitem
_Tagged = _tagging.Tagged


_VERBS = ("prehook", "posthook", "overdub", "fallback", "is_primitive", "execute")
_verbs_of = operator.attrgetter(*_VERBS)  # a context class's verbs, as one tuple
# A rewritten function: (weak ref to the user's function, its code, its defaults, the rewrite)
_Entry = tuple[weakref.ref[Any], types.CodeType, tuple[Any, ...] | None,
               Callable[..., Any] | None]


def _overridden(cls: type, base: type, name: str) -> bool:
    return getattr(cls, name) is not getattr(base, name)


def note_inline_hook_failure(exc: BaseException, state: State) -> None:
    """Name the prehook when it raised from an inline call in rewritten code (observe mode:
    no dispatcher frame was there to add the note).  Found from the traceback, at the exit of
    ``overdub``, so the user's frames carry no handler."""
    inline = inline_prehook(state.ctx)
    code = getattr(getattr(inline, "__func__", None), "__code__", None)
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        inner = tb.tb_next
        if inner.tb_frame.f_code is code and not tb.tb_frame.f_code.co_filename.startswith(
                DISPATCHER_FILE):
            _hook_failed(exc, state.ctx, "prehook", inner.tb_frame.f_locals.get("fn"))
            return
        tb = inner


OPERATOR_FORM = "__overdub_operator_form__"


def inline_prehook(ctx: Any) -> Any:
    """What observe-mode code calls for each operator it runs (see _rewrite.Overdubber): the
    context's ``prehook``, or the form of it for operators that the prehook's function names
    in its attribute ``__overdub_operator_form__``: a function ``(self, fn, a, b=..., c=...,
    /)`` that does what the prehook does with one to three operands and no keywords (all an
    operator has), bound to what the prehook is bound to.  Without the ``*args, **kwargs`` a
    prehook needs for calls, a call of it builds no dict of keywords and takes the
    interpreter's fast path for Python calls: :class:`~overdub.contexts.CountContext`'s costs
    less to call than an empty prehook does, which is what keeps counting an operator within
    a third of what intercepting it costs (issue #16)."""
    hook = ctx.prehook
    if type(hook) is not _Method:
        return hook
    found = getattr(hook.__func__, "__dict__", None)  # (no attribute lookup that fails:
    form = found.get(OPERATOR_FORM) if type(found) is dict else None  # this runs per run)
    return hook if form is None else _Method(form, hook.__self__)


def _primitive_failed(exc: BaseException, ctx: Any, fn: Any, impl: Any) -> None:
    """Say which primitive ``exc`` came out of, as :func:`_hook_failed` says which hook (a
    primitive called with the wrong signature fails in the dispatcher, which names nothing).
    Not for a RecursionError, which the generated dispatchers let through as it is: at the
    limit, the call naming it would raise another, chained to it, in its place."""
    impl = getattr(impl, "impl", impl)  # (a MethodPrimitive: the user's implementation)
    _primitives.add_note(exc, f"(raised in {type(ctx).__name__}'s primitive "
                              f"{_primitives._name(impl)} while handling a call of "
                              f"{_primitives._name(fn)})")


def _hook_failed(exc: BaseException, ctx: Any, hook: str, fn: Any) -> None:
    _primitives.add_note(exc, f"(raised in {type(ctx).__name__}.{hook} while handling a call "
                              f"of {_primitives._name(fn)})")


def seen_value(owner: Any, x: Any) -> Any:
    """``x`` as the context whose tag identity is ``owner`` sees it (None: a context that has
    tagged nothing): the layers of other contexts' tags removed, its own kept (over the plain
    value: a new ``Tagged`` with the same metadata where another context's layer lay under
    it).  To any other context, another instance of the same class included, a tagged value is
    simply the value it wraps (DESIGN section 3): what the context's hooks are given, nested
    inside a context that tags (an outer derivative), so that ``type(x) is float`` holds in
    them as in a plain run."""
    while type(x) is _Tagged:
        if x.owner is owner:
            value = x.value
            if type(value) is not _Tagged:
                return x
            return _Tagged(seen_value(owner, value), x.meta, x.owner, x._label)
        x = x.value
    return x


def seen_args(owner: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
              ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args`` and ``kwargs`` as the context ``owner`` sees them (see :func:`seen_value`)."""
    return (tuple([seen_value(owner, a) for a in args]),
            {key: seen_value(owner, value) for key, value in kwargs.items()})


def _seen_inline(inline: list[Any]) -> Callable[..., Any]:
    """The inline prehook of observe-mode code (``@pre``) in a nested run: the context's own
    (``inline``: [the hook, the context, its tag identity], kept by its State: see
    :meth:`State._pre`) given the operands as the context sees them (see :func:`seen_args`).
    It names the hook in a note when it raises, as the dispatchers do
    (:func:`note_inline_hook_failure` looks for a caller in user code)."""
    def pre(fn: Any, *operands: Any) -> Any:
        for a in operands:
            if type(a) is _Tagged:
                operands = tuple([seen_value(inline[2], a) for a in operands])
                break
        try:
            return inline[0](fn, *operands)
        except BaseException as exc:
            if exc.__class__ is not RecursionError:
                _hook_failed(exc, inline[1], "prehook", fn)
            raise
    return pre


_TEMPLATE_CACHE: dict[tuple[bool, ...], Callable[..., Any]] = {}
_OPERAND_NAMES = {1: "a", 2: "a, b", 3: "a, b, c"}
_SUBJECT_TEST = {  # which operands' types decide whether Python dunders may be involved
    1: "(type(a) in static or is_static(type(a)))",
    2: "(type(a) in static or is_static(type(a))) and (type(b) in static or is_static(type(b)))",
    3: "(type(a) in static or is_static(type(a)))",
}


def _make_dispatchers(flags: tuple[bool, ...]) -> Callable[..., Any]:
    """Compile (once per combination of overridden verbs) a maker of specialised dispatchers.

    ``flags``: (prehook, posthook, custom is_primitive/execute, primitive table, fallback,
    tags).  With ``tags``, structural functions go to the context's tag handlers first and leaf
    calls go through its :class:`_tagging.Tagger` (metadata kept through the heap).
    The maker returns ``od, op1, op2, op3, opr, slow1, slow2, slow3, set_parent, bind,
    set_enclosed`` (``set_enclosed(True)`` gives the hooks values as the context sees them,
    when its parent is an enclosing context's: see :meth:`State.set_parent`)
    (``bind(ctx)`` points the dispatchers at an instance, or at None: see :meth:`State.bind`).
    """
    maker = _TEMPLATE_CACHE.get(flags)
    if maker is not None:
        return maker
    pre, post, custom_primitive, table, custom_fallback, tags = flags
    src = ["def make(find, resolve, rewritten, functions, protocol_for, is_static, static,",
           "         hook_failed, Function, Method, tagger, handlers, Tagged, plain_operators,",
           "         MethodPrimitive, primitive_failed, seen_args, seen_value):",
           "    ctx = prehook = posthook = is_primitive = execute = fallback = None",
           "    own_prehook = own_posthook = None",
           "    tag_leaf = tagger and tagger.leaf",
           "    tag_unhandled = tagger and tagger.unhandled_leaf",
           "    owner = tagger.owner if tagger else None  # (whose tags the hooks keep)",
           "    parent = None",
           "    nested = False  # (parent is an enclosing context's: see State.set_parent)",
           "    chosen_for_operands = {}",
           "    MISSING = object()",
           # Nested, the hooks see arguments as this context sees them: other contexts' tags
           # removed (see seen_args).  Swapped in by set_enclosed, so a run that no context
           # encloses, the common case, calls the context's own hooks with nothing added.
           # (a loop, not `Tagged in map(type, args)`: twice as fast for a few arguments)
           "    def seen_prehook(fn, /, *args, **kwargs):",
           "        for a in (*args, *kwargs.values()) if kwargs else args:",
           "            if type(a) is Tagged:",
           "                args, kwargs = seen_args(owner, args, kwargs)",
           "                break",
           "        return own_prehook(fn, *args, **kwargs)",
           "    def seen_posthook(out, fn, /, *args, **kwargs):",
           "        for a in (*args, *kwargs.values()) if kwargs else args:",
           "            if type(a) is Tagged:",
           "                args, kwargs = seen_args(owner, args, kwargs)",
           "                break",
           "        if type(out) is Tagged:",
           "            out = seen_value(owner, out)",
           "        return own_posthook(out, fn, *args, **kwargs)",
           "    def set_parent(new):",
           "        nonlocal parent",
           "        old, parent = parent, new",
           "        return old",
           "    def set_enclosed(now):",
           "        nonlocal prehook, posthook, nested",
           "        nested = now",
           *(["        if ctx is not None:",
              f"            prehook = {'seen_prehook if now else own_prehook' if pre else None}",
              f"            posthook = {'seen_posthook if now else own_posthook' if post else None}"
              ] if pre or post else []),
           "    def bind(new):",
           "        nonlocal ctx, prehook, posthook, is_primitive, execute, fallback",
           "        nonlocal own_prehook, own_posthook",
           "        ctx = new",
           "        if new is None:",
           "            prehook = posthook = is_primitive = execute = fallback = None",
           "            own_prehook = own_posthook = None",
           "            return",
           f"        own_prehook = {'new.prehook' if pre else 'None'}",
           f"        own_posthook = {'new.posthook' if post else 'None'}",
           f"        prehook = {'seen_prehook if nested else own_prehook' if pre else 'None'}",
           f"        posthook = {'seen_posthook if nested else own_posthook' if post else 'None'}",
           f"        is_primitive = {'new.is_primitive' if custom_primitive else 'None'}",
           f"        execute = {'new.execute' if custom_primitive else 'None'}",
           f"        fallback = {'new.fallback' if custom_fallback else 'None'}"]

    def step(name: str, params: str, call: str, body: list[str], hooks: bool = True) -> None:
        """One dispatcher: ``call`` spells the arguments (``*args, **kwargs`` or ``a, b``)."""
        src.append(f"    def {name}({params}):")
        if pre and hooks:
            src.extend(["        try:",
                        f"            prehook(fn, {call})",
                        "        except BaseException as exc:",
                        "            if exc.__class__ is not RecursionError:",
                        "                hook_failed(exc, ctx, 'prehook', fn)",
                        "            raise"])
        indent = "        "
        if custom_primitive and hooks:
            src.extend([f"{indent}if is_primitive(fn, {call}):",
                        f"{indent}    out = execute(fn, {call})",
                        f"{indent}else:"])
            indent += "    "
        elif table and hooks and call == "a, b":
            # Binary operators (immortal `operator` functions, so their ids are safe keys) keep
            # the choice per operand types here, without calling find() again.
            src.extend([f"{indent}ka = type(a)",
                        f"{indent}kb = type(b)",
                        f"{indent}if ka is Tagged or kb is Tagged:",
                        # (a tagged operand's choice rests on whose tag it is and its value's
                        # type: kept per both; a tag of a tag, which find walks, is not kept)
                        f"{indent}    key = (id(fn),",
                        f"{indent}           (a.owner, type(a.value)) if ka is Tagged else ka,",
                        f"{indent}           (b.owner, type(b.value)) if kb is Tagged else kb)",
                        f"{indent}    impl = chosen_for_operands.get(key, MISSING)",
                        f"{indent}    if impl is MISSING:",
                        f"{indent}        impl = find(fn, (a, b))",
                        f"{indent}        if Tagged not in (type(key[1]) is tuple and key[1][1],",
                        f"{indent}                          type(key[2]) is tuple and key[2][1]):",
                        f"{indent}            chosen_for_operands[key] = impl",
                        f"{indent}else:",
                        f"{indent}    impl = chosen_for_operands.get((id(fn), ka, kb), MISSING)",
                        f"{indent}    if impl is MISSING:",
                        f"{indent}        impl = chosen_for_operands[id(fn), ka, kb] = (",
                        f"{indent}            find(fn, (a, b)))",
                        f"{indent}if impl is not None:",
                        f"{indent}    try:",
                        f"{indent}        out = (impl(ctx, {call}) if parent is None",
                        f"{indent}               else parent(impl, ctx, {call}))",
                        f"{indent}    except BaseException as exc:",
                        f"{indent}        if exc.__class__ is not RecursionError:",
                        f"{indent}            primitive_failed(exc, ctx, fn, impl)",
                        f"{indent}        raise",
                        f"{indent}else:"])
            indent += "    "
        elif table and hooks:
            packed = "args" if call.startswith("*") else f"({call},)"
            src.extend([f"{indent}impl = find(fn, {packed})",
                        f"{indent}if impl is not None:",
                        f"{indent}    try:",
                        f"{indent}        if parent is None:",
                        f"{indent}            out = impl(ctx, {call})",
                        f"{indent}        elif type(impl) is MethodPrimitive:  # obj.method(...)",
                        f"{indent}            out = parent(impl.impl, ctx, impl.receiver, {call})",
                        f"{indent}        else:",
                        f"{indent}            out = parent(impl, ctx, {call})",
                        f"{indent}    except BaseException as exc:",
                        f"{indent}        if exc.__class__ is not RecursionError:",
                        f"{indent}            primitive_failed(exc, ctx, fn, impl)",
                        f"{indent}        raise",
                        f"{indent}else:"])
            indent += "    "
        packed_args = "args" if call.startswith("*") else f"({call},)"
        native = f"(fn({call}) if parent is None else parent(fn, {call}))"
        handled = None  # what a structural function's call runs (``od`` with tags only)
        if custom_fallback and hooks:
            leaf = f"fallback(fn, {call})"
        elif tags and call.startswith("*"):  # `od` checked the handlers itself: see below
            leaf = "tag_unhandled(fn, args, kwargs)"
            handled = "handler[1](tagger, fn, args, kwargs)"
        elif tags:  # an operator: native unless an operand is tagged or the heap is involved
            untagged = " and ".join(f"type({name}) is not Tagged" for name in call.split(", "))
            if call.count(",") == 1:  # (lists and tuples: `+` and `*` carry stored metadata)
                untagged += "".join(f" and type({name}) not in (list, tuple)"
                                    for name in call.split(", "))
            leaf = (f"({native} if id(fn) in plain_operators and {untagged} "
                    f"else tag_leaf(fn, {packed_args}, {{}}))")
        else:
            leaf = native
        src.extend(indent + line.replace("HANDLED", handled or leaf).replace("LEAF", leaf)
                   for line in body)
        if post and hooks:
            src.extend(["        try:",
                        f"            posthook(out, fn, {call})",
                        "        except BaseException as exc:",
                        "            if exc.__class__ is not RecursionError:",
                        "                hook_failed(exc, ctx, 'posthook', fn)",
                        "            raise"])
        src.append("        return out")

    function_target = [
        "entry = functions.get(id(FN))",
        "if (entry is not None and entry[0]() is FN and entry[1] is FN.__code__",
        "        and entry[2] is FN.__defaults__):",
        "    target = entry[3]",
        "else:",
        "    target = rewritten(FN)"]
    structural = ["handler = handlers.get(id(fn))",
                  "if handler is not None and handler[0] is fn:",
                  "    out = HANDLED",
                  "el"] if tags else [""]
    step("od", "fn, /, *args, **kwargs", "*args, **kwargs", [
        "kind = type(fn)",
        *structural[:-1],
        structural[-1] + "if kind is Function:",
        *("    " + line.replace("FN", "fn") for line in function_target),
        "    out = LEAF if target is None else target(*args, **kwargs)",
        "elif kind is Method and type(fn.__func__) is Function:",
        "    func = fn.__func__",
        *("    " + line.replace("FN", "func") for line in function_target),
        "    out = LEAF if target is None else target(fn.__self__, *args, **kwargs)",
        "else:",
        "    target = resolve(fn, args, kwargs)",
        "    out = LEAF if target is None else target(*args, **kwargs)"])
    for arity, names in _OPERAND_NAMES.items():
        body = [f"if {_SUBJECT_TEST[arity]}:",
                "    out = LEAF",
                "else:",
                f"    target = protocol_for(od, fn, ({names},))",
                f"    out = LEAF if target is None else target({names})"]
        step(f"op{arity}", f"fn, {names}", names, body)
        step(f"slow{arity}", f"fn, {names}", names, body, hooks=False)
    src.extend(["    def opr(fn, item, container):",
                "        return op2(fn, container, item)",
                "    return (od, op1, op2, op3, opr, slow1, slow2, slow3, set_parent, bind,",
                "            set_enclosed)"])
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(src), f"{DISPATCHER_FILE} {flags}>", "exec"), namespace)
    return _TEMPLATE_CACHE.setdefault(flags, namespace["make"])


def _nested(od: Callable[..., Any], parent: Callable[..., Any] | None) -> None:
    """Tell the shims whether ``od`` runs inside an enclosing context (see _shims.NESTED)."""
    if parent is None or type(parent) is AfterRun:
        NESTED.discard(od)
    else:
        NESTED.add(od)


class AfterRun:
    """The parent of a context between its runs (see :meth:`State.leave`): what code it
    rewrote executes after a run ended -- a generator, generator expression or lazy ``map``
    made in the run and resumed later, not wrapped by ``overdub`` (kept in a list, returned
    inside a tuple) -- runs through whichever context is running at that moment, as this
    context's parent would run it in a run nested there; natively outside any run.  Without
    it, a generator made inside an inner derivative and resumed in the outer one computed
    natively on the outer derivative's values, whose dunders drop the tangent: a silent zero.
    Costs nothing in a run (:meth:`State.enter` sets the run's parent) and is called only by
    such code.

    The running context is found from the innermost one, passing over the context itself and
    any that is not running (a task or thread started in a run copies the variable that names
    the innermost one, and steps after the run ended).

    A value the context tagged, given to what such code executes (a derivative rule for the
    inner derivative's own variable), raises TagError: the run that gave it meaning is over,
    and the rule's result would carry a tag nobody reads (an outer gradient of it: zero)."""

    __slots__ = ("state",)

    def __init__(self, state: State) -> None:
        self.state = state

    def __call__(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        state, own = _active.active.get(), self.state
        tagger = own.tagger
        if tagger is not None:
            owner, tagged = tagger.owner, _tagging.Tagged
            for value in (*args, *kwargs.values()):
                if type(value) is tagged and value.owner is owner:
                    raise _tagging.TagError(
                        f"{_primitives._name(fn)} of a value tagged by {tagger.label} after "
                        f"that context's run ended: code made in the run (a generator, "
                        f"generator expression or lazy map resumed later) computed with it; "
                        f"use the value inside the run, or return it from there")
        while state is not None and (state is own or not state.depth):
            state = state.enclosing
        if state is None:
            try:
                return fn(*args, **kwargs)
            except _tagging.TagError:
                label = next((value._label for value in (*args, *kwargs.values())
                              if type(value) is _tagging.Tagged), None)
                if label is None:  # (not a value given here: the error says what it is)
                    raise
            # (raised here, without the native frames below and the generic message)
            raise _tagging.TagError(
                f"{_primitives._name(fn)} of a value tagged by {label} after that context's "
                f"run ended, outside any run: code made in a run (a generator, generator "
                f"expression or lazy map resumed later, or closed when it was garbage-"
                f"collected) computed with it; use the value inside the run, or return it "
                f"from there")
        return state.od(fn, *args, **kwargs)


def reentry_refusal(state: State, enclosing: State, subject: str) -> RuntimeError | None:
    """The error for ``state``'s context run again inside ``enclosing``, which runs inside
    its running run (``subject``: what runs again, ``overdub(Ctx(), ...)`` say), where the two
    runs cannot be kept apart: None where they can.  They cannot for a context that tags
    values (both runs' values would carry one tag identity, and the metadata each keeps for
    the heap would be the other's to miss) or that overrides a verb whose override may call
    the default (``overdub``, ``fallback``, ``is_primitive``, ``execute``), which finds the
    context's one current State, not the run it was called for."""
    overridden = sorted(state.overridden & {"overdub", "fallback", "is_primitive", "execute"})
    tags = state.tags or bool(getattr(state.ctx, "_overdub_tags", False))
    if not (tags or overridden):
        return None
    name = type(state.ctx).__name__
    why = "tags values" if tags else f"overrides {', '.join(overridden)}"
    return RuntimeError(
        f"{subject} inside {type(enclosing.ctx).__name__}, which runs inside that same {name} "
        f"instance: a context that {why} cannot run at two levels of one nesting; give the "
        f"inner run a context of its own (ctx.similar())")


def _pass_fingerprint(passes: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """Passes are part of the cache key: a function by identity, any other pass by its type
    and its state (its ``__dict__`` and ``__slots__``; a ``functools.partial``'s function and
    arguments), read exactly (:func:`_exact`).  None where some state cannot be read so: then
    nothing rewritten with these passes is shared with another context instance."""
    prints: list[Any] = []
    try:
        for a_pass in passes:
            if isinstance(a_pass, _Function):
                prints.append(a_pass)
            elif type(a_pass) is functools.partial:  # (its own __dict__ is empty: what it wraps)
                prints.append((functools.partial, _pass_fingerprint((a_pass.func,)),
                               _exact(a_pass.args), _exact(a_pass.keywords)))
                if prints[-1][1] is None:
                    return None
            else:
                prints.append((type(a_pass), _state(a_pass)))
    except (_Unreadable, RecursionError):
        return None
    return tuple(prints)


class _Unreadable(Exception):
    """A pass holds a value whose equality does not say the pass acts alike (see _exact)."""


def _state(obj: Any) -> tuple[Any, ...]:
    """``obj``'s attributes, ``__dict__`` and ``__slots__`` (every class's in its MRO), as
    (name, exact value) pairs in name order; an unset slot is left out."""
    found = dict(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        for name, member in vars(cls).items():
            if type(member) is types.MemberDescriptorType and name not in found:
                try:
                    found[name] = member.__get__(obj, cls)
                except AttributeError:  # (an unset slot)
                    continue
    return tuple(sorted((name, _exact(value)) for name, value in found.items()))


_SAME_IF_EQUAL = frozenset((type(None), bool, int, str, bytes, type(...)))


def _exact(value: Any) -> Any:
    """A hashable stand-in for ``value`` that is equal for two values only where a pass holding
    either acts alike: the type goes with the value (``1``, ``1.0`` and ``True`` are equal,
    their literals are not), floats by ``repr`` (``0.0 == -0.0``), containers item by item,
    classes, functions, methods and modules by their own equality (identity), an AST by its
    dump.  Raises _Unreadable for any other object (whose ``==`` may say nothing of how it
    acts)."""
    kind = type(value)
    if kind in _SAME_IF_EQUAL:
        return kind, value
    if kind is float or kind is complex:
        return kind, repr(value)
    if kind is tuple or kind is list:
        return kind, tuple(map(_exact, value))
    if kind is frozenset or kind is set:
        return kind, frozenset(map(_exact, value))
    if kind is dict:
        return kind, tuple((_exact(k), _exact(v)) for k, v in value.items())
    if isinstance(value, (_Function, _Method, types.BuiltinFunctionType, types.ModuleType)) \
            or isinstance(value, type) and cast(Any, kind).__eq__ is object.__eq__:  # (a metaclass
        return kind, value  # may define equality)
    if isinstance(value, ast.AST):
        return kind, ast.dump(value, include_attributes=True)
    raise _Unreadable(kind)


def _positions(index: dict[int, int], new: Any) -> list[int]:
    """The positions in a State's ``expected`` (``index``: by cell id) of the cells of the
    rewritten function ``new``."""
    return [index[id(cell)] for cell in getattr(new, "__closure__", None) or ()
            if id(cell) in index]


class ClassPlan:
    """What the States of one context class share, made once per class (and again when its
    verbs change or a primitive is registered): its verbs and which of them it overrides, its
    primitives table for instances without tags, per configuration what to rewrite, and the
    pool of States whose instances died (see :class:`State`)."""

    __slots__ = ("cls", "verbs", "overridden", "table", "class_key", "configs", "pool",
                 "__weakref__")

    def __init__(self, cls: type, base: type) -> None:
        self.cls = cls
        self.verbs = _verbs_of(cls)
        self.overridden = frozenset(verb for verb in _VERBS if _overridden(cls, base, verb))
        for verb in self.overridden:
            add_verb(getattr(cls, verb))
            add_verb(getattr(getattr(cls, verb), OPERATOR_FORM, None))
        # No tag identity: an instance without tags owns no tagged value, so every Tagged it
        # meets is another context's, a plain value to its dispatch, whichever instance it is.
        # An instance that tags gets a table of its own (State._configure).
        self.table = _primitives.Table(cls)
        self.class_key = _cache.class_key(cls)
        # (tags, has passes, inherited categories) -> (categories, observe, dispatcher flags)
        self.configs: dict[tuple[bool, bool, frozenset[str]],
                           tuple[frozenset[str], bool, tuple[bool, ...]]] = {}
        self.pool: list[State] = []
        _plans[id(self)] = weakref.ref(self)

    def config(self, tags: bool, passes: bool, inherited: frozenset[str]
               ) -> tuple[frozenset[str], bool, tuple[bool, ...]]:
        """What an instance rewrites (categories), whether it is observe-only, and which
        dispatchers it gets (:func:`_make_dispatchers`' flags)."""
        found = self.configs.get((tags, passes, inherited))
        if found is not None:
            return found
        overridden, table = self.overridden, self.table
        if overridden or tags:
            categories = ALL_CATEGORIES | ({ITERATION} if tags else set()) | inherited
        else:
            categories = table.categories | ({CALL} if passes else set()) | inherited
            if categories:
                categories |= {CALL}  # to reach what is intercepted inside called functions
        # Observe-only (a prehook and nothing else that could act on an operator): operators
        # call the prehook inline and run natively on C types (see _rewrite.Overdubber).
        observe = overridden == {"prehook"} and table.categories <= {CALL} and not tags
        flags = ("prehook" in overridden, "posthook" in overridden,
                 bool(overridden & {"is_primitive", "execute"}), bool(table.entries),
                 "fallback" in overridden, tags)
        return self.configs.setdefault((tags, passes, inherited),
                                       (frozenset(categories), observe, flags))


# id -> the live plans, whose pools _forget_idle empties of rewritten functions
_plans: dict[int, weakref.ref[ClassPlan]] = {}


def _forget_idle(phase: str, _info: dict[str, Any], plans: dict[int, Any] = _plans) -> None:
    """At the start of each garbage collection, the States in pools drop their rewritten
    functions.  Those hold the user's modules (their globals): kept by a pool, they live until
    the next collection, as they did when a dead context's State waited for the collector."""
    if phase != "start":
        return
    for key, ref in list(plans.items()):
        plan = ref()
        if plan is None:
            plans.pop(key, None)
        else:
            for state in plan.pool:
                state.forget_functions()


gc.callbacks.append(_forget_idle)


def plan_of(cls: type, base: type) -> ClassPlan:
    """``cls``'s plan, made again if its verbs changed or a primitive was registered since."""
    plan = cls.__dict__.get("_overdub_plan")
    if (type(plan) is not ClassPlan or plan.cls is not cls
            or plan.table.generation != _primitives.current_generation
            or _verbs_of(cls) != plan.verbs):
        plan = ClassPlan(cls, base)
        setattr(cls, "_overdub_plan", plan)
    return plan


# Whether a State may be unbound and pass to a new instance (see State): that rests on reference
# counts, exact where the interpreter counts every reference and one thread runs at a time.
_POOLING = sys.implementation.name == "cpython" and (
    not hasattr(sys, "_is_gil_enabled") or sys._is_gil_enabled())
_POOL_SIZE = 8  # unbound States kept per class for new instances


def _unused_cell_count() -> int:
    """What :meth:`State.refcounts` counts for a cell no function uses: held by ``cells`` and
    ``_watched`` (measured, not assumed: interpreters differ in what a call adds)."""
    cell = types.CellType()
    cells, watched = {"@": cell}, (cell,)
    del cell
    count: int = list(map(sys.getrefcount, watched))[0]
    del cells
    return count


_UNUSED_CELL = _unused_cell_count()


class State:
    """A context instance's dispatchers and rewritten functions (what only depends on its class
    is in the class's :class:`ClassPlan`).

    ``cells`` holds the cells rewritten code reads its dispatchers from (``@od``, ``@pre``...),
    made when a rewritten function first needs one and refilled when the dispatchers change.

    Reuse (issue #16: a context made per call, ``overdub(CountContext(), f, x)``, should cost
    about what a reused one does).  The dispatchers hold the instance (``ctx``, its bound
    verbs): they are *bound* to it.  A *poolable* State (an instance without tags or passes,
    whose class keeps the default ``overdub`` step; CPython only) is unbound when a run ends
    with nothing left that could call it: the State, ``od`` and each cell referenced exactly as
    when it was clean (:meth:`refcounts` against ``expected``, which follows the closures of
    the rewritten functions it builds and drops).  A generator, generator expression, lazy
    ``map``, traceback or copied ``contextvars.Context`` that outlives the run keeps it bound,
    as before.  Unbound, it holds its instance weakly, so an instance nobody keeps dies at
    once; its State then goes to its class's pool, and the next new instance of the class takes
    it (after counting again that it is clean) with its rewritten functions built.  The
    instance's next run binds it again.  A garbage collection empties pooled States of their
    rewritten functions (:func:`_forget_idle`).
    """

    def __init__(self, ctx: Any, base: type) -> None:
        self.ctx = ctx  # None while unbound
        self.base = base
        self.passes = ctx.passes
        self.parent: Callable[..., Any] | None = None
        # Whether the parent is an enclosing context's (not None, nor the AfterRun between
        # runs): the hooks are then given values as this context sees them (see seen_args)
        self.enclosed = False
        self.enclosing: State | None = None  # the State running when this one was entered
        self.depth = 0  # runs of this context in progress (overdub() calls not yet returned)
        self.functions: dict[int, _Entry] = {}
        self.cells: dict[str, types.CellType] = {}
        self._take_verbs()
        tags = bool(getattr(ctx, "_overdub_tags", False))
        self.poolable = (_POOLING and not tags and not self.passes
                         and "overdub" not in self.overridden)
        # Made once: the weak references to its owners share it, so the State's own reference
        # count does not change with them (see refcounts)
        self.on_death = self._owner_died
        self.after_run = AfterRun(self)  # (the parent between runs: see leave)
        # [inline prehook, context, its tag identity] while bound, and the @pre made on it
        # for nested runs (see _pre; neither refers to the State: see refcounts)
        self._inline: list[Any] = [None, None, None]
        self._seen_pre: Callable[..., Any] | None = None
        self.owner = weakref.ref(ctx, self.on_death if self.poolable else None)
        # The positions in `expected` of the cells of the rewritten functions dropped since the
        # last count (their counts fell with them; the functions themselves are not kept: a
        # closure made at each call holds what it captured)
        self.dropped: list[int] = []
        # What refcounts() counts: the State, `od`, and each cell once made (_cell); and
        # the counts when clean and those expected now, with the rewritten functions'
        # closures.  The first two are counted by the caller, which holds the State as an
        # overdub() run does when it counts (see refcounts).
        self._watched: tuple[Any, ...] = ()
        self._index: dict[int, int] = {}  # id(cell) -> its place in _watched
        self.clean: list[int] = []
        self.expected: list[int] = []
        self._configure(tags)
        self._watched = (self, self.od)

    def _configure(self, tags: bool, inherited: frozenset[str] = frozenset()) -> None:
        """Choose what to rewrite and generate the dispatchers (again, when tags start or an
        enclosing context intercepts more: ``inherited``)."""
        if self.cells:  # configured before: the counts no longer describe a clean State
            self.poolable = False
            self.dropped.clear()
        ctx, plan, overridden = self.ctx, self.plan, self.overridden
        self.categories, self.observe, flags = plan.config(tags, bool(self.passes), inherited)
        self.tags = tags
        if tags:
            _tagging.register_numpy_handlers()
            register_numpy_shims()
            self.table = _primitives.Table(type(ctx), _tagging.owner_of(ctx))
        else:
            self.table = plan.table
        self.tagger = _tagging.Tagger(self) if tags else None
        self.key = (plan.class_key, _pass_fingerprint(self.passes), self.categories,
                    self.observe)
        self.functions.clear()
        (self.od, self.op1, self.op2, self.op3, self.opr, slow1, slow2, slow3,
         set_parent, self._bind, self._set_enclosed) = _make_dispatchers(flags)(
            self.table.find, self.resolve, self.rewritten, self.functions,
            protocol_for, is_static, static_types, _hook_failed, _Function, _Method,
            self.tagger, _tagging.handlers(),
            _tagging.Tagged, _tagging.PLAIN_OPERATORS, _primitives.MethodPrimitive,
            _primitive_failed, seen_args, seen_value)
        self._set_enclosed(self.enclosed)
        self._bind(ctx)
        set_parent(self.parent)
        _nested(self.od, self.parent)
        self._set_parent = set_parent
        self._slow = (slow1, slow2, slow3)
        if "overdub" in overridden:  # the user's step handles operators too
            od = self.od = self.op1 = self.op2 = self.op3 = ctx.overdub
            self.opr = lambda fn, item, container: od(fn, container, item)
        for name, cell in self.cells.items():  # code already running keeps its cells
            cell.cell_contents = self._cell_value(name)

    def _cell_value(self, name: str) -> Any:
        """What rewritten code finds in its cell ``name`` (one of _rewrite.DISPATCHERS)."""
        if name == "@flat":  # no enclosing context must see leaf operations, nor tags
            return self._flat()
        if name == "@pre":
            return self._pre()
        if name.startswith("@slow"):
            return self._slow[int(name[5:]) - 1]
        return getattr(self, name[1:])  # @od, @op1, @op2, @op3, @opr

    def _cell(self, name: str) -> types.CellType:
        cell = self.cells.get(name)
        if cell is None:
            cell = types.CellType(self._cell_value(name))
            if self.poolable:  # counted from now on, as held by `cells` and `_watched` only
                # (not len(): this runs inside a user's call, where a profiler would show it)
                self._index[id(cell)] = self._watched.__len__()
                self._watched += (cell,)
                self.clean.append(_UNUSED_CELL)
                self.expected.append(_UNUSED_CELL)
                if name == "@od":  # the cell holds `od`, which is counted too
                    self.clean[1] += 1
                    self.expected[1] += 1
            self.cells[name] = cell
        return cell

    # -- binding to an instance (see the class docstring) ----------------------------------
    def bind(self, ctx: Any, owner: weakref.ref[Any]) -> None:
        """Point the dispatchers at ``ctx``, again after a run unbound them (``owner`` is
        ``self.owner``) or as a new instance's, taken from the pool (``owner``: a weak
        reference to ``ctx`` calling :attr:`on_death`)."""
        self.owner = owner
        self.ctx = ctx
        self._bind(ctx)
        pre = self.cells.get("@pre")
        if pre is not None:
            pre.cell_contents = self._pre() if self.enclosed else inline_prehook(ctx)

    def unbind(self) -> None:
        """Hold the owner weakly: called when a run ends and :meth:`refcounts` shows that
        nothing but the State's own structures holds its cells, ``od`` or itself."""
        self.ctx = None
        self._bind(None)
        pre = self.cells.get("@pre")
        if pre is not None:
            pre.cell_contents = None
        if self._inline[1] is not None:  # (unbound, the instance is held weakly)
            self._inline[:] = (None, None, None)

    def refcounts(self) -> list[int]:
        """The reference counts of the cells, ``od`` and the State itself.  Called as
        ``state.refcounts()`` by a frame holding the State in one variable (``_new_state``,
        ``overdub()``, the owner's death callback), so that the two references the call adds
        are the same each time; everything else that holds them is the State's own: the
        owner's attribute, the dispatchers, ``cells``, the rewritten functions' closures
        (``expected`` counts those)."""
        return list(map(sys.getrefcount, self._watched))

    def count_dropped(self) -> None:
        """Take the rewritten functions dropped since the last count out of ``expected``."""
        dropped, expected = self.dropped, self.expected
        while dropped:
            expected[dropped.pop()] -= 1


    def _owner_died(self, ref: weakref.ref[Any], size: int = _POOL_SIZE) -> None:
        """The owner is gone: an unbound State goes to the pool, where the next new instance
        of the class takes it if it is still clean (counted then, not here: the owner may die
        while a frame that held it, and the State, is being torn down)."""
        pool = self.plan.pool  # (size: a default argument, as module globals go at exit;
        # __len__, not len(): the owner dies in the user's code, where a profiler would see it)
        if ref is self.owner and self.ctx is None and self.poolable and pool.__len__() < size:
            pool.append(self)

    def forget_functions(self) -> None:
        """Drop the rewritten functions (a pooled State, at a garbage collection)."""
        self.functions.clear()
        self.dropped.clear()
        self.expected = list(self.clean)

    def _take_verbs(self) -> None:
        """The verbs of the context's class as they are now, and which of them it overrides
        (their frames are machinery, as the dispatchers' are)."""
        self.plan = plan = plan_of(type(self.ctx), self.base)
        self.verbs = plan.verbs
        self.overridden = plan.overridden

    def follow_class(self) -> None:
        """Take up verbs defined, replaced or deleted on the context's class since the state was
        made: Python classes are open, and a context made before a hook was defined sees it
        (Cassette's "world age" test), and passes whose state changed between runs (a pass
        is configured by its attributes: an instance changed since is another pass).  Run at
        every ``overdub()`` entry: one C call when nothing changed and there are no passes."""
        if _verbs_of(type(self.ctx)) != self.verbs:
            self._take_verbs()
            self._configure(self.tags, self.categories)
        elif self.passes and not self.depth and \
                _pass_fingerprint(self.passes) != self.key[1]:
            self._configure(self.tags, self.categories)

    def enable_tags(self) -> None:
        if not self.tags:
            if self.ctx is None:  # unbound after a run: bound for good now (tags)
                owner = self.owner()
                if owner is None:  # a dead instance's, reached through a copy of it
                    return
                self.bind(owner, self.owner)
            self._configure(True, self.categories)

    def include(self, categories: frozenset[str]) -> None:
        """Intercept at least ``categories`` (an enclosing context's): what this context would
        leave native must reach the enclosing context, which runs what this one executes."""
        if not categories <= self.categories:
            self._configure(self.tags, self.categories | categories)

    def set_parent(self, parent: Callable[..., Any] | None) -> Callable[..., Any] | None:
        """Make ``parent`` (an enclosing context's ``od``) run what this context executes."""
        old: Callable[..., Any] | None = self._set_parent(parent)
        self.parent = parent
        _nested(self.od, parent)
        flat = self.cells.get("@flat")
        if flat is not None:
            flat.cell_contents = self._flat()
        # (between runs the parent is the AfterRun: no change at a run's start and end)
        enclosed = parent is not None and type(parent) is not AfterRun
        if enclosed is not self.enclosed:
            self.enclosed = enclosed
            self._set_enclosed(enclosed)
            pre = self.cells.get("@pre")
            if pre is not None:
                pre.cell_contents = self._pre(bound=False)
        return old

    def _pre(self, bound: bool = True) -> Any:
        """The inline prehook of observe-mode code (``@pre``): the context's own, or, nested
        (when the dispatchers' hooks see arguments as the context sees them: see
        ``seen_args``), one that gives it its operands so: made once per State, it reads the
        hook from ``_inline``, which binding fills (``bound``: it is, as in the State's
        bind; else it only changes whether the run is nested)."""
        ctx = self.ctx
        if ctx is None:
            return None
        inline = self._inline
        if bound or inline[1] is not ctx:
            inline[:] = (inline_prehook(ctx), ctx,
                         None if self.tagger is None else self.tagger.owner)
        if not self.enclosed:
            return inline[0]
        seen = self._seen_pre
        if seen is None:
            seen = self._seen_pre = _seen_inline(inline)
        return seen

    def _flat(self) -> bool:
        """Whether observe-mode code may run a leaf operation natively: not when an enclosing
        context must see it, nor once tags are on (a tag made during the run, in a frame
        rewritten before it, must still be stored in shadow storage by writes after it)."""
        return self.parent is None and not self.tags

    def enter(self) -> tuple[Any, Any, Any, Any]:
        """Make this context's run the active one -- a call of ``overdub``, or a resumption
        of a generator it returned (see :mod:`._resumed`) -- inside whatever run is active:
        that one runs what this one executes.  Returns what :meth:`leave` puts back."""
        enclosing = _active.active.get()
        below = None
        if self.depth and enclosing is not None and enclosing is not self and \
                self.encloses(enclosing):
            # (a resumption: overdub() gives its own such run a State of its own, see
            # _context._run_reentered)
            below = self._resumed_below_itself(enclosing)
        parent = self.parent if enclosing is None or enclosing is self else enclosing.od
        if type(parent) is AfterRun:  # (a run outside any other: nothing encloses it)
            parent = None
        if enclosing is not None and enclosing is not self:
            self.include(enclosing.categories)
        previous = self.set_parent(parent)
        previous_enclosing = self.enclosing
        if enclosing is not self:  # re-entering a running context keeps its own enclosing one
            self.enclosing = enclosing
        token = _active.active.set(self)
        self.depth += 1
        return previous, previous_enclosing, token, below

    def _resumed_below_itself(self, enclosing: State) -> tuple[State, Any, Any, State]:
        """A generator or coroutine this context returned, resumed inside ``enclosing``, which
        runs inside this context's running run: the step is a run of the context nested
        there, as a fresh instance's would be.  Its code is this State's (the rewritten
        generator reads this State's cells), so the outer run gives up its place for the
        step: the context entered directly inside it, on ``enclosing``'s chain, gets as
        parent a State of its own for the context, whose parent is the outer run's (one
        parent for both would send what the step executes to ``enclosing`` and back,
        forever).  Refused, before anything is touched, where the runs cannot be kept
        apart (see :func:`reentry_refusal`): none of the body runs, but the wrapper around it
        that ``overdub`` returned (a Python generator or coroutine: see :mod:`._resumed`)
        ends, as a generator that raises does.  Returns what :meth:`leave` puts back."""
        refusal = reentry_refusal(self, enclosing, f"a generator or coroutine that overdub("
                                                   f"{type(self.ctx).__name__}(), ...) returned, "
                                                   f"resumed")
        if refusal is not None:
            raise refusal
        nearest = enclosing
        while nearest.enclosing is not self:
            nearest = cast(State, nearest.enclosing)
        stand_in = State(self.ctx, self.base)  # (not poolable: it holds a bound instance)
        stand_in.poolable = False
        stand_in.include(self.categories)
        stand_in.set_parent(self.parent)
        stand_in.enclosing, stand_in.depth = self.enclosing, 1
        below = (nearest, nearest.set_parent(stand_in.od), nearest.enclosing, stand_in)
        nearest.enclosing = stand_in
        return below

    def encloses(self, state: State | None) -> bool:
        """Whether ``state`` is running inside a run of this context (on this one's chain)."""
        while state is not None:
            if state is self:
                return True
            state = state.enclosing
        return False

    def leave(self, entered: tuple[Any, Any, Any, Any]) -> None:
        """End what :meth:`enter` began."""
        previous, previous_enclosing, token, below = entered
        if below is not None:  # (see _resumed_below_itself)
            nearest, nearest_parent, nearest.enclosing, stand_in = below
            nearest.set_parent(nearest_parent)
            stand_in.depth = 0  # (code it rewrote that runs later: see AfterRun)
            stand_in.set_parent(stand_in.after_run)
        self.depth -= 1
        if self.depth == 0 and self.tagger is not None:
            self.tagger.end_run()  # the heap's metadata lasts for the run, no longer
        _active.active.reset(token)
        self.enclosing = previous_enclosing
        # The last run over: code made in it that runs later reaches the context running then
        self.set_parent(previous if self.depth or previous is not None else self.after_run)

    def generic_step(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The documented step through the context's methods (``Context.overdub``'s default)."""
        ctx = self.ctx
        seen, seen_kwargs = args, kwargs  # (what the hooks see: see seen_args)
        enclosed = self.enclosed
        if enclosed and (_Tagged in map(type, args) or (
                kwargs and _Tagged in map(type, kwargs.values()))):
            owner = None if self.tagger is None else self.tagger.owner
            seen, seen_kwargs = seen_args(owner, args, kwargs)
        try:
            ctx.prehook(fn, *seen, **seen_kwargs)
        except BaseException as exc:
            if exc.__class__ is not RecursionError:  # (see _primitive_failed)
                _hook_failed(exc, ctx, "prehook", fn)
            raise
        if ctx.is_primitive(fn, *args, **kwargs):
            out = ctx.execute(fn, *args, **kwargs)
        else:
            target = self.resolve(fn, args, kwargs)
            out = ctx.fallback(fn, *args, **kwargs) if target is None else target(*args, **kwargs)
        try:
            if not enclosed:
                ctx.posthook(out, fn, *args, **kwargs)
            else:
                owner = None if self.tagger is None else self.tagger.owner
                ctx.posthook(seen_value(owner, out), fn, *seen, **seen_kwargs)
        except BaseException as exc:
            if exc.__class__ is not RecursionError:  # (see _primitive_failed)
                _hook_failed(exc, ctx, "posthook", fn)
            raise
        return out

    # -- recursion -------------------------------------------------------------------------
    def rewritten(self, fn: types.FunctionType) -> Callable[..., Any] | None:
        """``fn`` rewritten for this context, or None when it runs natively (a leaf).

        ``functions`` maps ``id(fn)`` to ``(weak ref to fn, code, defaults, rewritten)``: a
        reassigned ``__code__``/``__defaults__`` rebuilds, and a dead function's entry goes.
        """
        key = id(fn)
        entry = self.functions.get(key)
        code = fn.__code__
        if (entry is not None and entry[0]() is fn and entry[1] is code
                and entry[2] is fn.__defaults__):
            return entry[3]
        built = None
        if self.categories and not (code.co_filename.startswith(OVERDUB_DIR)
                                    or getattr(fn, "__overdub_opaque__", False)):
            found = _cache.cached_rewrite(code, fn.__globals__, self.key, self.passes,
                                          self.categories, self.observe)
            if isinstance(found, _cache.Rewritten):
                built = self._build(fn, found)
                if found.global_stores and self.tagger is not None:
                    self.tagger.assigns_globals(fn.__globals__, found.global_stores)
        functions, dropped = self.functions, self.dropped if self.poolable else None
        index = self._index  # (not the State: the callback must not hold it, see refcounts)

        def forget(_: Any, positions: Any = _positions) -> None:  # fn died (positions: bound
            gone = functions.pop(key, None)  # here, as module globals go at exit)
            if dropped is not None and gone is not None:
                dropped.extend(positions(index, gone[3]))

        if dropped is not None:
            if entry is not None:  # replaced: fn's code or defaults were reassigned
                dropped.extend(_positions(index, entry[3]))
            if built is not None:
                expected, index = self.expected, self._index
                for cell in built.__closure__ or ():
                    position = index.get(id(cell))
                    if position is not None:
                        expected[position] += 1
        functions[key] = (weakref.ref(fn, forget), code, fn.__defaults__, built)
        return built

    def rewritten_source(self, fn: types.FunctionType) -> str:
        """``fn``'s source as this context runs it, or a comment saying why it runs natively."""
        name = fn.__qualname__
        if not self.categories:
            return f"# {name} runs natively: {type(self.ctx).__name__} intercepts nothing"
        if fn.__code__.co_filename.startswith(OVERDUB_DIR):
            return f"# {name} runs natively: it is overdub's own"
        if getattr(fn, "__overdub_opaque__", False):
            return f"# {name} runs natively: it is marked opaque"
        found = _cache.rewritten_source(fn.__code__, fn.__globals__, self.passes,
                                        self.categories, self.observe)
        if isinstance(found, str):
            return found
        return f"# {name} runs natively: {found.reason}"

    def _build(self, fn: types.FunctionType, found: _cache.Rewritten) -> Callable[..., Any]:
        cells, names = self.cells, found.code.co_freevars
        if fn.__closure__:
            user_cells = dict(zip(fn.__code__.co_freevars, fn.__closure__))
            closure = tuple([constant or user_cells.get(name) or cells.get(name)
                             or self._cell(name)
                             for name, constant in zip(names, found.constant_cells)])
        else:
            closure = tuple([constant or cells.get(name) or self._cell(name)
                             for name, constant in zip(names, found.constant_cells)])
        new = types.FunctionType(found.code, fn.__globals__, fn.__name__, fn.__defaults__,
                                 closure)
        if fn.__kwdefaults__ is not None:
            new.__kwdefaults__ = fn.__kwdefaults__
        new.__qualname__ = fn.__qualname__
        new.__module__ = fn.__module__
        new.__doc__ = fn.__doc__
        new.__annotations__ = fn.__annotations__
        if fn.__dict__:
            new.__dict__.update(fn.__dict__)
        return new

    def resolve(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                rewritten: Callable[[types.FunctionType], Callable[..., Any] | None] | None = None
                ) -> Callable[..., Any] | None:
        """A callable that runs ``fn(*args, **kwargs)`` with its body seen by this context.

        ``rewritten`` (default :meth:`rewritten`) gives the body of a Python function, or None
        where it runs natively; :meth:`can_run` passes one that answers even where nothing
        needs rewriting."""
        t = type(fn)
        if t is _Function:  # (the common case first, without binding a method)
            return self.rewritten(fn) if rewritten is None else rewritten(fn)
        rewritten = rewritten or self.rewritten
        if t is _Method:
            func = fn.__func__
            if type(func) is _Function:
                new = rewritten(func)
                return None if new is None else _Partial(new, fn.__self__)
            return None
        if t is _Partial:
            od, inner = self.od, fn
            places = self.tagger.shadow.places if self.tagger is not None else None
            if places and any((id(inner.keywords), "item", name) in places
                              for name in inner.keywords):
                # p.keywords["c"] = x after it was made: the dict holds x plain, its metadata
                # kept aside, and each item is read back through the context
                def call(*a: Any, **k: Any) -> Any:
                    keywords = {name: od(_getitem, inner.keywords, name)
                                for name in inner.keywords}
                    return od(inner.func, *inner.args, *a, **{**keywords, **k})
                return call
            return lambda *a, **k: od(inner.func, *inner.args, *a, **{**inner.keywords, **k})
        if t is staticmethod:
            return self.resolve(fn.__func__, args, kwargs, rewritten)
        shim = shim_for(fn, args, kwargs)
        if shim is not None:
            return _Partial(shim, self.od)
        if isinstance(fn, type):
            if getattr(fn, "__overdub_opaque__", False):  # @opaque on a class: built natively
                return None
            return self._constructor(fn, rewritten)
        if t is types.MethodWrapperType and fn.__name__ == "__call__" and \
                isinstance(fn.__self__, type) and fn == type.__call__.__get__(fn.__self__):
            return self._type_call(fn.__self__)  # super().__call__(...) in a metaclass
        if is_static(t):
            return protocol_for(self.od, fn, args)
        call = lookup(t, "__call__")
        if type(call) is _Function and not getattr(fn, "__overdub_opaque__", False):
            new = rewritten(call)
            return None if new is None else _Partial(new, fn)
        return None

    def can_run(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Whether this context can run ``fn``'s body itself (``can_recurse``): the answer does
        not depend on whether it needs to, so a context that intercepts nothing (and runs
        everything natively, as it may) still says yes for a Python function with source."""
        if self.categories:
            return self.resolve(fn, args, kwargs) is not None
        return self.resolve(fn, args, kwargs, self._readable) is not None

    def _readable(self, fn: types.FunctionType) -> Callable[..., Any] | None:
        """``fn`` itself if its body could be rewritten (source found and current, not opaque,
        not overdub's own), else None."""
        code = fn.__code__
        if code.co_filename.startswith(OVERDUB_DIR) or getattr(fn, "__overdub_opaque__", False):
            return None
        return fn if _cache.has_source(code, fn.__globals__) else None

    def _constructor(self, cls: type,
                     rewritten: Callable[[types.FunctionType], Callable[..., Any] | None]
                     ) -> Callable[..., Any] | None:
        """``cls(...)`` as ``type.__call__`` runs it, with Python ``__new__``/``__init__`` seen."""
        meta_call = lookup(type(cls), "__call__")
        if type(meta_call) is _Function:
            new = rewritten(meta_call)
            return None if new is None else _Partial(new, cls)
        if meta_call is not type.__call__:
            return None
        return self._type_call(cls)

    def _type_call(self, cls: type) -> Callable[..., Any] | None:
        """What ``type.__call__`` runs for ``cls`` (also called by name: a metaclass's
        ``__call__`` calling ``super().__call__(...)``), with Python ``__new__``/``__init__``
        seen; None where both are C."""
        new_raw = lookup(cls, "__new__")
        new_func = new_raw.__func__ if isinstance(new_raw, staticmethod) else new_raw
        python_new = type(new_func) is _Function
        python_init = type(lookup(cls, "__init__")) is _Function
        if not (python_new or python_init):
            return None
        od = self.od

        def construct(*args: Any, **kwargs: Any) -> Any:
            if python_new:
                obj = od(new_func, cls, *args, **kwargs)
            elif new_func is object.__new__:
                obj = object.__new__(cls)
            else:
                obj = new_func(cls, *args, **kwargs)
            if isinstance(obj, cls):
                init = lookup(type(obj), "__init__")
                result = od(init, obj, *args, **kwargs) if type(init) is _Function \
                    else init(obj, *args, **kwargs)
                if result is not None:
                    raise TypeError(f"__init__() should return None, not "
                                    f"'{type(result).__name__}'")
            return obj

        return construct

