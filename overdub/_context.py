"""Contexts and the verbs that run code inside them: ``overdub``, ``recurse``, ``can_recurse``."""

from __future__ import annotations

import ast
import copy
import sys
import types
import weakref
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from . import _active, _dispatch, _primitives, _tagging
from ._frames import hide_machinery
from ._resumed import SUSPENDED, suspended

F = TypeVar("F", bound=Callable[..., Any])
_P = ParamSpec("_P")
_C = TypeVar("_C", bound="Context")
_R = TypeVar("_R")
_KEEP: Any = object()
_NOTHING: Any = object()  # (keeps_heap_metadata given no object)
_NO_POOL: list[Any] = []  # (never added to)


class Context:
    """Base class of every context: subclass it and override the verbs you need.

    ``Context(metadata=None, passes=())``. ``metadata`` is yours (a counter, a trace, a tape);
    ``passes`` are ``ast.NodeTransformer`` instances or functions ``FunctionDef -> FunctionDef``
    run on every function this context recurses into, before the overdub rewrite.

    Verbs (all take the callee positionally only, so a user's ``fn=``/``out=`` keywords pass
    through): :meth:`prehook`, :meth:`posthook`, :meth:`overdub` (the whole per-call step),
    :meth:`is_primitive` / :meth:`execute`, :meth:`fallback`; and :meth:`native_use`, told when
    code the context does not see computes with a value it tagged.  A context pays only for what
    it overrides: operators stay native Python unless a hook or an operator primitive needs them.

    Example::

        class Count(Context):
            def prehook(self, fn, /, *args, **kwargs):
                self.metadata[fn] = self.metadata.get(fn, 0) + 1

        counts = {}
        overdub(Count(metadata=counts), statistics.mean, [1, 2, 3])

    See also: :func:`overdub`, :meth:`primitive`, :mod:`overdub.contexts`.
    """

    # The instance's dispatchers and rewritten functions (a _dispatch.State), made at its first
    # run; and whether it has tagged values (set by ``tag``).
    _overdub_state: _dispatch.State | None = None
    _overdub_tags = False

    def __init__(self, *, metadata: Any = None, passes: Any = ()) -> None:
        self.metadata = metadata
        if (type(passes) is tuple and not passes) or passes is None:
            # (the common case, contexts made per call; None, as for metadata, is none)
            self.passes: tuple[Any, ...] = ()
            return
        try:
            passes = tuple(passes)
        except TypeError:
            raise TypeError(f"{type(self).__name__}(passes=...) takes a list of passes, "
                            f"got {passes!r}") from None
        for a_pass in passes:
            if isinstance(a_pass, type) and issubclass(a_pass, ast.NodeVisitor):
                # (callable, but called with the function's AST it would fail only then)
                base = next(b for b in (ast.NodeTransformer, ast.NodeVisitor)
                            if issubclass(a_pass, b))
                raise TypeError(f"{type(self).__name__}(passes=...): {a_pass.__name__} is an "
                                f"ast.{base.__name__} class, not an instance: did you mean "
                                f"{a_pass.__name__}()?")
            if not (isinstance(a_pass, ast.NodeTransformer) or callable(a_pass)):
                raise TypeError(f"{type(self).__name__}(passes=...): {a_pass!r} is neither an "
                                f"ast.NodeTransformer nor a function on a function's AST")
        self.passes = passes

    # -- the verbs -------------------------------------------------------------------------
    def prehook(self, fn: Any, /, *args: Any, **kwargs: Any) -> None:
        """Called before every intercepted call ``fn(*args, **kwargs)``; its result is ignored."""

    def posthook(self, out: Any, fn: Any, /, *args: Any, **kwargs: Any) -> None:
        """Called after every intercepted call, with its result ``out``."""

    def overdub(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        """The whole step for one call: hooks, then primitive, recursion or fallback.

        Override it for contexts that must wrap the step (nested tracing) and call
        ``super().overdub(fn, *args, **kwargs)`` inside.
        """
        return _state(self).generic_step(fn, args, kwargs)

    def is_primitive(self, fn: Any, /, *args: Any, **kwargs: Any) -> bool:
        """Whether this context runs its own definition of ``fn`` (default: the primitive table)."""
        return _state(self).table.find(fn, args) is not None

    def execute(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        """Run this context's definition of ``fn`` (default: the registered primitive)."""
        state = _state(self)
        impl = state.table.find(fn, args)
        if impl is None:
            raise TypeError(f"{type(self).__name__} has no primitive for "
                            f"{_primitives._name(fn)} with argument types "
                            f"{tuple(type(a).__name__ for a in args)}")
        if state.parent is None:
            return impl(self, *args, **kwargs)
        if type(impl) is _primitives.MethodPrimitive:  # obj.method(...): see _primitives
            return state.parent(impl.impl, self, impl.receiver, *args, **kwargs)
        return state.parent(impl, self, *args, **kwargs)

    def fallback(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        """Run a call this context does not recurse into (C functions, no source): call it.

        Inside an enclosing context the call is made through that context, which sees it.
        Arguments this context tagged lose their tag (the metadata is dropped), except in the
        heap operations that keep it (attribute and item access, ``list.append``...).
        """
        state = _state(self)
        if state.tagger is not None:
            return state.tagger.leaf(fn, args, kwargs)
        if state.parent is None:
            return fn(*args, **kwargs)
        return state.parent(fn, *args, **kwargs)

    def native_use(self, use: str, result: Any) -> None:
        """Called when code this context does not see (a Python function that C code calls
        back, ``np.frompyfunc``'s say; a function run natively) computes ``result`` from a value
        this context tagged, natively: ``use`` says how (``"operator *"``, ``"float()"``,
        ``"subscript"``...; truth tests, comparisons, hashing, ``format`` and f-strings,
        ``len``, ``int()``, ``round`` and the other integer parts, and indexing are not
        reported; ``"%.1f" % x`` reads ``float()``).  The result carries no metadata.
        Default: nothing (a tagged value behaves like its untagged self).  A context whose
        metadata the result should have carried (an AD context: a derivative) raises here, at
        the point of the use, rather than let a plain number go on silently."""

    def escape_hint(self) -> str:
        """What the :class:`TagError` raised for a value this context tagged, used after its
        run (kept in a closure, a container or an object that outlived it), tells the user to
        do.  Default: untag it with this context.  A context whose users never hold it (an AD
        context, made by a derivative's call) says what to do instead."""
        return "use overdub.untag(x, ctx) to get the plain value"

    def metadata_type(self, value_type: type) -> Any:
        """The metadata a value of ``value_type`` may carry in this context (a class or tuple
        of classes for ``isinstance``), or None if such values cannot be tagged.

        Cassette's ``metadatatype``.  Default: any value, any metadata.  An AD context, say,
        returns ``float`` for real numbers and None for strings.  Asked once per value type
        and context instance (``tag`` remembers the answer), so it must not change over time.
        """
        return object

    def __getstate__(self) -> dict[str, Any]:
        """What a copy (``copy.copy``, ``copy.deepcopy``) or a pickle of a context holds: its
        attributes, without its dispatch state and tag identity, which are the original's (a
        copy gets its own when it runs)."""
        return {key: value for key, value in self.__dict__.items()
                if not key.startswith("_overdub_")}

    def similar(self: _C, metadata: Any = _KEEP) -> _C:
        """A sibling context: same class and passes, fresh state, ``metadata`` if given."""
        sibling = copy.copy(self)
        for private in [key for key in sibling.__dict__ if key.startswith("_overdub_")]:
            del sibling.__dict__[private]  # its own state and tag identity, not a share of ours
        if metadata is not _KEEP:
            sibling.metadata = metadata
        return sibling

    @classmethod
    def primitive(cls, fn: Any, types: Any = None) -> Callable[[F], F]:
        """Register ``impl(ctx, *args, **kwargs)`` to run instead of ``fn`` inside this class.

        ``types`` (a class, or a sequence of classes, one per positional argument) restricts
        the primitive to calls whose arguments are instances of them -- a tagged argument
        matches its value's classes, and ``Tagged`` too where this context tagged it; the
        most specific match wins and an ambiguous call is a ``TypeError``.  Subclasses
        inherit primitives and may override them.

        Example::

            @MyCtx.primitive(math.sin)
            def _sin(ctx, x):
                return math.cos(x)
        """
        if cls is Context:  # (every context class would inherit it: CountContext, a plug-in's)
            raise TypeError("Context.primitive: register primitives on a subclass of Context "
                            "(class MyContext(Context): ...; @MyContext.primitive(fn)), not on "
                            "Context itself or through an instance of it")
        if not callable(fn):
            raise TypeError(f"{cls.__name__}.primitive: {fn!r} is not callable, so it cannot "
                            f"be a primitive")
        _primitives.checked_types(cls, fn, types)  # (at the call that gives them)

        def register(impl: F) -> F:
            _primitives.register(cls, fn, types, impl)
            return impl

        return register


def keeps_heap_metadata(ctx: Context, obj: Any = _NOTHING) -> bool:
    """Whether the tagging context ``ctx`` keeps, in its shadow, metadata of values stored into
    the heap during its runs (an attribute, an item of a list, dict or array); given ``obj``,
    of values stored into ``obj`` itself (its attributes, items or elements).

    A plain value is what such a store leaves in the object itself; code that reads the object
    natively (``obj.__dict__[name]`` in C, a function without source) would miss the metadata,
    and a plug-in that takes shortcuts around the context, or lets code run natively, asks this
    before it does.  In a run nested in another tagging context, a list or tuple holding
    ``ctx``'s tagged values beside plain ones counts too: the enclosing context may keep the
    metadata of those (it stored them), which only reading through ``ctx`` gives back."""
    if not isinstance(ctx, Context):
        raise TypeError(f"keeps_heap_metadata(ctx): ctx must be a Context instance, got {ctx!r}")
    tagger = _state(ctx).tagger
    if tagger is None:
        return False
    shadow = tagger.shadow
    if obj is _NOTHING:
        return bool(shadow.places)
    key = id(obj)  # (the shadow keeps its containers alive: an id is theirs while it holds it)
    return key in shadow.sequences or key in shadow.arrays or any(
        place[0] == key for place in shadow.places) or _tagging.mixes_levels(tagger, obj)


def tags_values(ctx: Context) -> bool:
    """Whether ``ctx`` has tagged values in its runs (:func:`tag` was called with it, as a
    derivative's context does); a context that only replaces or watches calls has none.

    For a plug-in handing work to an enclosing context: one without tags can be given a
    function to run directly (``overdub(enclosing, f, ...)``); values tagged by one must not
    meet a second run of it, so such work goes through a context of the plug-in's own."""
    if not isinstance(ctx, Context):
        raise TypeError(f"tags_values(ctx): ctx must be a Context instance, got {ctx!r}")
    return _state(ctx).tagger is not None


def _state(ctx: Context) -> _dispatch.State:
    """``ctx``'s State, bound to it."""
    state = ctx._overdub_state
    if (state is None or state.ctx is not ctx
            or state.table.generation != _primitives.current_generation):
        return _own_state(ctx, state)
    return state


def _own_state(ctx: Context, state: _dispatch.State | None) -> _dispatch.State:
    """``ctx``'s State where the quick test fails: bound again if its last run left it unbound
    (see ``_dispatch.State``); else a new one (none yet, made stale by a primitive registered
    since, or one that came with a copy of another instance)."""
    if (state is not None and state.ctx is None and state.owner() is ctx
            and state.table.generation == _primitives.current_generation):
        state.bind(ctx, state.owner)
        return state
    return _new_state(ctx, state)


def _new_state(ctx: Context, stale: _dispatch.State | None) -> _dispatch.State:
    """A State for ``ctx``: one its class's pool holds, or a new one.  Kept on ``ctx`` as an
    attribute: its ``__dict__`` is never read, which on CPython 3.11 would turn it into a
    dict for good and make every ``self.x`` in the context's hooks slower."""
    if not isinstance(ctx, Context):
        raise TypeError(f"expected a Context instance, got {ctx!r}")
    try:
        passes = ctx.passes
    except AttributeError:
        raise TypeError(f"{type(ctx).__name__}.__init__ must call super().__init__()") from None
    parent = None
    if stale is not None and stale.owner() is ctx:  # stale: a primitive was registered
        stale.poolable = False
        parent = stale.parent
        if type(parent) is _dispatch.AfterRun:  # (stale's own, between its runs)
            parent = None
    # The class's pool, if its plan is current (if its verbs changed since, the State taken
    # from it is made again at once: overdub() calls follow_class)
    plan = type(ctx).__dict__.get("_overdub_plan")
    pool = plan.pool if (type(plan) is _dispatch.ClassPlan and plan.cls is type(ctx)
                         and plan.table.generation == _primitives.current_generation) else _NO_POOL
    while pool and parent is None and not passes and not ctx._overdub_tags:
        try:
            state = pool.pop()
        except IndexError:  # another thread took the last one
            break
        object.__setattr__(ctx, "_overdub_state", state)
        state.count_dropped()
        if state.refcounts() == state.expected:  # still clean: see _dispatch.State
            state.bind(ctx, weakref.ref(ctx, state.on_death))
            return state
        state.poolable = False  # something kept a way into it since: it is nobody's now
    state = _dispatch.State(ctx, Context)
    if parent is not None:
        state.set_parent(parent)
    object.__setattr__(ctx, "_overdub_state", state)
    if state.poolable:
        state.clean = state.refcounts()  # clean: nothing else can reach it yet
        state.expected = list(state.clean)
    return state


def _check(ctx: Any, fn: Any, verb: str) -> None:
    if not isinstance(ctx, Context):
        raise TypeError(f"{verb}(ctx, fn, ...): ctx must be a Context instance, got {ctx!r}")
    if not callable(fn):
        raise TypeError(f"{verb}(ctx, fn, ...): fn must be callable, got {fn!r} of type "
                        f"{type(fn).__name__}")


def overdub(ctx: Context, fn: Callable[_P, _R], /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
    """Run ``fn(*args, **kwargs)`` inside ``ctx`` and return (or raise) what it does.

    Every call and operator ``fn`` makes -- to any depth, through methods, closures, generators
    and C higher-order builtins -- goes through ``ctx``'s hooks and primitives.  Called inside
    another context's run, ``ctx`` handles calls first and what it executes runs under the
    enclosing context.

    Example::

        overdub(LogContext(), statistics.mean, [1, 2, 3])

    See also: :class:`Context`, :func:`recurse`.
    """
    _check(ctx, fn, "overdub")
    state = ctx._overdub_state
    if (state is None or state.ctx is not ctx
            or state.table.generation != _primitives.current_generation):
        state = _own_state(ctx, state)
    state.follow_class()
    if state.depth and _reentered(state):
        return _run_reentered(state, fn, args, kwargs)  # type: ignore[no-any-return]
    outermost = not state.depth
    entered = state.enter()
    try:
        out: _R = state.od(fn, *args, **kwargs)
        if type(out) in SUSPENDED and outermost:  # (one made inside a run is consumed in it,
            return suspended(state, out)  # type: ignore[no-any-return]  # as the run's own:
        return out  # wrapped again, iter(gen)'s wrapper would close gen when dropped)
    except BaseException as exc:
        if state.observe:
            _dispatch.note_inline_hook_failure(exc, state)
        if state.tagger is not None and state.depth == 1:  # (leaving the outermost run)
            state.tagger.plain_exception(exc)
        hide_machinery(exc)
        raise
    finally:
        state.leave(entered)
        if state.depth == 0 and state.poolable:
            # Unbound when nothing the run made can still call it (see _dispatch.State; the
            # counts are taken here, with the State in one variable, as when it was made).
            if state.dropped:
                state.count_dropped()
            if state.refcounts() == state.expected:
                state.unbind()


def _reentered(state: _dispatch.State) -> bool:
    """Whether a run of ``state``'s context, which is running, starts inside another context
    that itself runs inside it (``overdub(ctx, grad(lambda v: overdub(ctx, f, v)), x)``)."""
    enclosing = _active.active.get()
    return enclosing is not None and enclosing is not state and state.encloses(enclosing)


def _run_reentered(outer: _dispatch.State, fn: Any, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Any:
    """``overdub(ctx, fn, ...)`` for a context re-entered inside a context that runs inside
    it (see :func:`_reentered`): the inner run gets a State of its own -- dispatchers, cells
    and rewritten functions -- whose parent is the context it runs in, while the outer run's
    dispatchers keep theirs.  One State for both would have one parent for both runs: the
    context in between would run what the inner run executes through the outer run, whose
    parent would be that context again, forever (a RecursionError).  While the inner run lasts
    the inner State is the context's (what the verbs' defaults read, ``fallback`` called by a
    primitive's implementation say); the outer run's dispatchers, which the context in between
    calls, call none of those defaults for a context that overrides none of the verbs that
    would (``overdub``, ``fallback``, ``is_primitive``, ``execute``).

    Refused, with an error saying so, for a context that overrides one of them (its override
    may call the default, which would find the inner run's parent in the outer run) or tags
    values (see :func:`_dispatch.reentry_refusal`); one whose first tag is made while both
    runs last is refused at that tag (``_tagging._refuse_at_two_levels``)."""
    ctx = outer.ctx
    refusal = _dispatch.reentry_refusal(outer, _active.active.get(),
                                        f"overdub({type(ctx).__name__}(), ...)")
    if refusal is not None:
        raise refusal
    inner = _dispatch.State(ctx, Context)
    inner.poolable = False
    object.__setattr__(ctx, "_overdub_state", inner)
    try:
        return overdub(ctx, fn, *args, **kwargs)
    finally:
        object.__setattr__(ctx, "_overdub_state", outer)


def recurse(ctx: Context, fn: Callable[_P, _R], /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
    """Run ``fn``'s own body with its calls overdubbed by ``ctx`` (no hooks for ``fn`` itself).

    For a callable that cannot be recursed into (see :func:`can_recurse`) this is
    ``ctx.fallback(fn, ...)``.
    """
    # (_check, _state, follow_class and, for a function, the cache check of State.rewritten
    # written out, as the dispatchers write it: a forward-mode derivative recurses once per
    # call of the function it differentiates)
    if not isinstance(ctx, Context) or not callable(fn):
        _check(ctx, fn, "recurse")
    state = ctx._overdub_state
    if (state is None or state.ctx is not ctx
            or state.table.generation != _primitives.current_generation):
        state = _own_state(ctx, state)
    if _dispatch._verbs_of(type(ctx)) != state.verbs:
        state.follow_class()
    if type(fn) is types.FunctionType:
        entry = state.functions.get(id(fn))
        if (entry is not None and entry[0]() is fn and entry[1] is fn.__code__
                and entry[2] is fn.__defaults__):
            target = entry[3]
        else:
            target = state.rewritten(fn)
    else:
        target = state.resolve(fn, args, kwargs)
    out: _R = ctx.fallback(fn, *args, **kwargs) if target is None else target(*args, **kwargs)
    return out


def can_recurse(ctx: Context, fn: Callable[_P, Any], /, *args: _P.args,
                **kwargs: _P.kwargs) -> bool:
    """Whether ``ctx`` can run ``fn``'s body itself (Python source available, or a shim).

    False for C functions without a shim, functions without source (``exec`` strings, the
    classic REPL), functions marked :func:`opaque`, and overdub's own internals.  The answer
    does not depend on whether ``ctx`` needs to run the body: a context that intercepts nothing
    runs everything natively, yet can recurse into a Python function with source.
    """
    _check(ctx, fn, "can_recurse")
    state = _state(ctx)
    state.follow_class()
    return state.can_run(fn, args, kwargs)


def show_rewrite(ctx: Context, fn: Any, /, *, file: Any = None) -> str:
    """Print, and return, the source of ``fn`` as ``ctx`` runs it: after ``ctx``'s passes and
    the overdub rewrite, for ``ctx``'s class (what it intercepts decides what is rewritten).

    ``fn`` is a function, a method, a class (its ``__init__`` is shown) or an object with a
    Python ``__call__``; ``file`` is where to print (default ``sys.stdout``).  Names starting
    with ``@`` are overdub's: ``@od`` is the context's step for calls, ``@op1``/``@op2``/
    ``@op3`` for operators, ``@getattr``, ``@mul``... the functions they stand for, ``@t1``...
    temporaries.  For a callable the context does not recurse into, a comment saying why.

    Example, for a context whose only primitive is for ``math.sin`` (so it intercepts calls
    and nothing else)::

        def f(x, y):
            return math.sin(x) * y

        show_rewrite(SinOnly(), f)
        # def f(x, y):
        #     return @od(math.sin, x) * y

    See also: :func:`can_recurse`, ``Context(passes=...)``.
    """
    _check(ctx, fn, "show_rewrite")
    state = _state(ctx)
    state.follow_class()
    target = fn
    if isinstance(fn, type):
        target = getattr(fn, "__init__", None)
    elif not isinstance(target, types.FunctionType):
        target = getattr(fn, "__func__", None)
        if not isinstance(target, types.FunctionType):
            target = getattr(type(fn), "__call__", None)
    if isinstance(target, types.FunctionType):
        text = state.rewritten_source(target)
    else:
        text = f"# {_primitives._name(fn)} runs natively: it has no Python code"
    print(text, file=file if file is not None else sys.stdout)
    return text


def opaque(fn: F) -> F:
    """Mark ``fn`` so contexts call it natively (its body unseen) instead of recursing into it.

    Hooks and primitives still see the call itself.  Plugins use it for their entry points
    (``overdub_ad.grad`` is opaque: an enclosing context sees what it executes, not its
    bookkeeping).  On a class, the mark is a class attribute: constructing the class, or a
    subclass, is a leaf (``__new__``/``__init__`` unseen), and so is calling an instance.
    """
    if not callable(fn):
        raise TypeError(f"opaque: {fn!r} is not callable")
    target = getattr(fn, "__func__", fn)
    if isinstance(target, types.FunctionType) or hasattr(target, "__dict__"):
        setattr(target, "__overdub_opaque__", True)  # a function, or a callable object
    return fn  # C functions have no Python code: they are leaves already


def is_opaque(fn: Any) -> bool:
    """Whether ``fn`` (a function, method or callable object) was marked with :func:`opaque`."""
    return bool(getattr(getattr(fn, "__func__", fn), "__overdub_opaque__", False))
