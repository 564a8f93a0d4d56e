"""The backward sweep: over the tape alone (buffers it owns, in place) or, under an enclosing
context, as code that context sees (so that ``grad(grad(f))`` differentiates it); running
``f`` forward to record the tape; gradients rebuilt into the inputs' shapes."""

from __future__ import annotations

import operator
import threading
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from overdub import (Context, Tagged, TagError, current_context, opaque, overdub, recurse,
                     tags_values, untag)

from .. import _arrays, _routes, _rules
from .._pytree import flatten, node_children, rebuild_node, reveal, unflatten
from .._shared import _innermost, not_differentiable, not_differentiable_error, _untag_bindings
from ._calls import _DECISIONS, _NOT_FUNCTIONS, _REAL_TYPES
from ._context import ReverseContext
from ._tape import (_basic, _cast, _Entry, _Joint, _Node, _Partials, _read_as_array,
                    _RulesJoint, _shape, _summed, _unbroadcast, _vjps, _zero_like, _zeros_like)


class _Forwarding(Context):
    """A context that changes nothing but hands the enclosing context, whole, each call of a
    function with rules or a stand-in (``scipy.linalg.expm``, SciPy's ``quad`` in a rule):
    recursing into its Python code, it would show the enclosing context only the C routines
    at the bottom, which have no rules."""

    def is_primitive(self, fn: Any, /, *args: Any, **kwargs: Any) -> bool:
        return (type(fn) is types.FunctionType and _rules.vjp_rules(fn) is not None) or (
            bool(_rules._STANDINS) and _rules.standin(fn) is not None)

    def execute(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        return self.fallback(fn, *args, **kwargs)


class _NestedSweep:
    """The backward sweep under an enclosing context.  The bookkeeping (which node gets which
    cotangent) runs natively: values are only moved, and a dict keeps the enclosing context's
    tagged values as they are.  Every computation on values -- the rules, the sums over
    broadcast dimensions, the accumulation -- runs through the enclosing context (a bare
    context forwards it there), which sees it and may differentiate it."""

    __slots__ = ("cts", "bare")

    def __init__(self, cts: dict[Any, Any]) -> None:
        self.cts = cts
        # an enclosing context without tags (one that swaps NumPy for CuPy, or counts) runs
        # the rules itself: one dispatch per operation instead of two; one with tags (an
        # enclosing derivative) through a bare context, which hands it each function with
        # rules whole and never runs it a second time over its own tagged values
        enclosing = current_context()
        self.bare = _Forwarding() if enclosing is None or tags_values(enclosing) \
            else enclosing

    def compute(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return overdub(self.bare, fn, *args, **kwargs)

    def add(self, node: Any, part: Any) -> None:
        cts = self.cts
        if node in cts:
            cts[node] = self.compute(operator.add, cts[node], part)
        else:
            cts[node] = part

    def send(self, node: Any, part: Any, x: Any) -> None:
        if node is None or part is None:
            return
        if type(node) is dict:  # a dict argument of a custom_vjp (checkpoint): its items'
            for key, n in node.items():
                self.send(n, self.compute(operator.getitem, part, key), x[key])
            return
        if type(node) is list:
            if _read_as_array(part, x):
                part = _unbroadcast(part, x, self.compute)
            for k, (n, item) in enumerate(zip(node, _innermost(x))):
                # an array's rows, and a list's members, read through the enclosing context,
                # which keeps their tags (a list a rule returns may hold its members plain,
                # their metadata in that context's shadow); the argument's own items, which
                # give only shapes, natively
                self.send(n, self.compute(operator.getitem, part, k), item)
            return
        if type(part) in (list, tuple) and hasattr(x, "shape"):
            # an array argument's cotangent as a list of its rows' (a rule written for a list
            # argument): stacked through the enclosing context, which keeps their tangents
            part = self.compute(np.stack, part)
        # (shapes read natively: NumPy would convert a tagged number to read its shape, a use
        # of the value behind the enclosing context's back)
        if _shape(part) != _shape(x) or (_arrays.is_complex(part)
                                         and not _arrays.is_complex(x)):
            part = _unbroadcast(part, x, self.compute)
        self.add(node, part)

    def run(self, tape: list[Any]) -> dict[Any, Any]:
        cts = self.cts
        for entry in reversed(tape):
            if type(entry) is tuple:  # a record, headed by its kind (see _tape)
                ct = cts.pop(entry[1], None)
                if ct is None:
                    continue
                kind = entry[0]
                if kind is _Partials:
                    items = iter(entry)
                    next(items)
                    next(items)
                    for node, p in zip(items, items):  # (node, partial) pairs
                        if node is not None:
                            self.add(node, self.compute(operator.mul, ct, p))
                else:  # _ScalarRead, x[i]
                    _, _, node, index, x = entry
                    self.send(node, self.compute(_vjps(operator.getitem)[0], ct, None, x, index),
                              x)
                continue
            outputs = entry.outputs
            if type(outputs) is tuple:
                ct = tuple([cts.pop(n, None) if n is not None else None for n in outputs])
                if all(c is None for c in ct):
                    continue
            else:
                ct = cts.pop(outputs, None)
                if ct is None:
                    continue
            if entry.joint is not None:
                if type(ct) is tuple:
                    ct = tuple([_zero_like(o) if c is None else c for c, o in zip(ct, entry.out)])
                parts: Any
                if type(entry.joint) is _RulesJoint:  # (its rules shown to the enclosing
                    parts = entry.joint(ct, self.compute)  # context one by one)
                else:
                    parts = self.compute(entry.joint, ct)
                if type(entry.joint) is _Joint and entry.joint.wanted is None:
                    entry.fn.check_cotangents(parts, entry.primals)  # (as _Sweep.joint)
                for node, part, x in zip(entry.inputs, parts, entry.primals):
                    self.send(node, part, x)
                parts = part = ct = None
                continue
            rules = _vjps(entry.fn)
            for i, node in enumerate(entry.inputs):
                if node is None or rules[i] is _rules.ZERO:
                    continue
                if rules[i] is _rules.passed:
                    part = ct
                elif type(rules[i]) is _rules.Carried:  # told which arguments are differentiated
                    part = self.compute(rules[i].rule, _rules.carried_pattern(entry.inputs), ct,
                                        entry.out, *entry.primals, **entry.kwargs)
                else:
                    part = self.compute(rules[i], ct, entry.out, *entry.primals, **entry.kwargs)
                self.send(node, part, entry.primals[i])
        return cts


class _Sweep:
    """The backward sweep with no enclosing context: plain NumPy, accumulating in place into
    cotangent buffers it allocated itself."""

    __slots__ = ("cts", "owned", "scalars")

    def __init__(self, cts: dict[Any, Any], size: int) -> None:
        self.cts = cts
        self.owned: set[Any] = set()
        self.scalars: list[Any] = [None] * size  # the cotangents of int nodes, by position

    def add(self, node: Any, part: Any) -> None:
        if type(node) is int:
            scalars = self.scalars
            c = scalars[node]
            scalars[node] = part if c is None else c + part
            return
        cts = self.cts
        c = cts.get(node)
        if c is None:
            cts[node] = part
            return
        if node in self.owned and (
                (type(part) is np.ndarray and part.shape == c.shape and part.dtype == c.dtype)
                or (np.shape(part) == c.shape and np.result_type(c, part) == c.dtype)):
            c += part
            return
        s = c + part
        cts[node] = s
        if type(s) is np.ndarray and s.ndim:
            self.owned.add(node)
        else:
            self.owned.discard(node)

    def send(self, node: Any, part: Any, x: Any) -> None:
        if node is None or part is None:
            return
        if type(node) is dict:  # a dict argument of a custom_vjp (checkpoint): its items'
            for key, n in node.items():
                self.send(n, part[key], x[key])
            return
        if type(node) is list:
            if _read_as_array(part, x):
                part = _summed(part, x)
            for n, p, item in zip(node, part, x):
                self.send(n, p, item)
            return
        kind = type(part)
        if kind is np.ndarray:  # most often already of x's shape and kind
            if not (type(x) is np.ndarray and part.shape == x.shape
                    and (part.dtype.kind != "c" or x.dtype.kind == "c")):
                part = _summed(part, x)
        elif not ((kind is float or kind is np.float64) and type(x) in _REAL_TYPES):
            part = _unbroadcast(part, x)
        self.add(node, part)

    def scatter(self, node: Any, ct: Any, x: np.ndarray, index: Any) -> None:
        """``x[index]``'s cotangent added into ``node``'s buffer, in place."""
        cts, owned = self.cts, self.owned
        buf = cts.get(node)
        if node not in owned or buf is None:
            dtype = np.result_type(x.dtype, 0.0)
            new = np.zeros(x.shape, dtype)
            if buf is not None:
                new += buf
            buf = cts[node] = new
            owned.add(node)
        if type(ct) not in _REAL_TYPES and _arrays.is_complex(ct) and not _arrays.is_complex(buf):
            ct = np.real(ct)
        buf[index] += ct

    def joint(self, entry: _Entry, ct: Any) -> None:
        """A ``custom_vjp`` or ``checkpoint`` entry: one function gives every argument's
        cotangent."""
        if type(ct) is tuple:
            ct = tuple([_zero_like(o) if c is None else c for c, o in zip(ct, entry.out)])
        joint = entry.joint
        assert joint is not None
        parts = joint(ct)
        if type(joint) is _Joint and joint.wanted is None:  # a custom_vjp's bwd (checkpoint's
            entry.fn.check_cotangents(parts, entry.primals)  # is ours)
        for node, part, x in zip(entry.inputs, parts, entry.primals):
            self.send(node, part, x)

    def run(self, tape: list[Any], consume: bool = False) -> dict[Any, Any]:
        """``consume``: the tape is used once; each entry (and the values only it holds) is
        let go as soon as it is done, so memory falls as cotangents grow."""
        cts = self.cts
        pop, get = cts.pop, cts.get
        getitem = operator.getitem
        zero, carried = _rules.ZERO, _rules.Carried
        scalars = self.scalars
        send, ndarray, node_type = self.send, np.ndarray, _Node
        partials = _Partials
        owned = self.owned
        entries = tape if consume else list(tape)
        take = entries.pop
        while entries:
            entry = take()
            if type(entry) is tuple:  # a record, headed by its kind (see _tape)
                ct = scalars[entry[1]]
                if ct is None:
                    continue
                if entry[0] is not partials:  # _ScalarRead, x[i]
                    self.scatter(entry[2], ct, entry[4], entry[3])
                    continue
                items = iter(entry)
                next(items)
                next(items)
                for node in items:  # (node, partial) pairs: a node, then its partial
                    p = next(items)  # (a quarter faster than pairing them with zip)
                    if type(node) is int:
                        c = scalars[node]
                        scalars[node] = ct * p if c is None else c + ct * p
                    elif node is not None:
                        c = get(node)
                        if c is None:
                            cts[node] = ct * p
                        elif type(c) is float:  # never an owned buffer: what add would do
                            cts[node] = c + ct * p
                        else:
                            self.add(node, ct * p)
                continue
            outputs = entry.outputs
            if type(outputs) is tuple:
                ct = tuple([pop(n, None) if n is not None else None for n in outputs])
                if all(c is None for c in ct):
                    continue
            else:
                ct = pop(outputs, None)
                if ct is None:
                    continue
                if owned:
                    owned.discard(outputs)
            fn = entry.fn
            if entry.joint is not None:
                self.joint(entry, ct)
                ct = None  # a recomputed block's cotangents go now
                continue
            if fn is getitem:
                x, index = entry.primals
                node = entry.inputs[0]
                if node is not None and type(x) is np.ndarray and _basic(index):
                    self.scatter(node, ct, x, index)
                    continue
            rules = entry.rules
            if rules is None:
                rules = _vjps(fn)
            inputs, out, primals, kwargs = entry.inputs, entry.out, entry.primals, entry.kwargs
            for i, node in enumerate(inputs):
                if node is None:
                    continue
                rule = rules[i]
                if rule is zero:
                    continue
                if type(rule) is carried:  # told which arguments are differentiated
                    part = rule.rule(_rules.carried_pattern(inputs), ct, out, *primals, **kwargs)
                elif kwargs:
                    part = rule(ct, out, *primals, **kwargs)
                else:
                    part = rule(ct, out, *primals)
                x = primals[i]
                # send's most common case: the first cotangent of an array, of its dtype
                if type(part) is ndarray and type(x) is ndarray and type(node) is node_type \
                        and part.dtype is x.dtype and get(node) is None:
                    cts[node] = part if part.shape == x.shape else _summed(part, x)
                else:
                    send(node, part, x)
        return cts


def _enclosed() -> bool:
    """Whether an enclosing context must see (and may differentiate) what we compute."""
    return current_context() is not None


def _pull(tape: list[Any], out_nodes: list[Any], ct_leaves: list[Any], nodes: dict[Any, Any],
          argnums: tuple[int, ...], fast: bool, consume: bool = False) -> tuple[Any, ...]:
    if fast:
        sweep = _Sweep({}, len(tape))
        for node, c in zip(out_nodes, ct_leaves):
            if node is not None and c is not None:
                sweep.add(node, c)
        return _gradients(nodes, argnums, sweep.run(tape, consume), unflatten)
    nested = _NestedSweep({})
    for node, c in zip(out_nodes, ct_leaves):
        if node is not None and c is not None:
            nested.add(node, c)
    return _gradients(nodes, argnums, nested.run(tape))


def _sweep(tape: list[Any], out_nodes: list[Any], ct_leaves: list[Any], nodes: dict[Any, Any],
           argnums: tuple[int, ...], consume: bool = False,
           enclosed: bool | None = None) -> tuple[Any, ...]:
    """The backward sweep, from output cotangents to input gradients.  Under an enclosing
    context what it computes runs through that context, so that an enclosing derivative
    differentiates it (see :class:`_NestedSweep`).  ``consume``: the tape is not needed
    afterwards (it is emptied as the sweep goes).  ``enclosed``: whether there is an
    enclosing context, if the caller knows already."""
    if enclosed is None:
        enclosed = _enclosed()
    return _pull(tape, out_nodes, ct_leaves, nodes, argnums, not enclosed, consume)


# -- the public API ------------------------------------------------------------------------

def _seeds(ctx: ReverseContext, leaves: list[Any]) -> tuple[list[Any], list[_Node]]:
    """The input ``leaves`` tagged, each with a new node; and the nodes."""
    tagged: list[Any] = []
    nodes: list[_Node] = []
    ref, label = ctx._ref, ctx._label
    for x in leaves:
        node = _Node()
        nodes.append(node)
        kind = type(x)
        if ref is not None and ((kind is np.ndarray and x.dtype.kind in "fc") or kind is float):
            tagged.append(Tagged(x, node, ref, label))  # the common case, as _seed does
        else:
            tagged.append(_seed(ctx, x, node))
            ref = ctx._ref  # (set by the first tag of a new context)
    return tagged, nodes


def _seed(ctx: ReverseContext, x: Any, node: _Node) -> Any:
    """Input ``x`` tagged with its ``node``.  ``None`` stays ``None``: an empty pytree (as in
    JAX), with nothing to differentiate and the gradient ``None``."""
    if x is None:
        return None
    kind = type(x)
    if (kind is np.ndarray and x.dtype.kind in "fc") or kind is float:
        return ctx._wrap(x, node)
    plain = _innermost(x)
    what = not_differentiable(plain)
    if what is not None:
        raise not_differentiable_error(what)
    if _arrays.kind(plain) in "iu":  # an integer point, as floats (an enclosing context's
        # value through that context, which follows it: hessian at an integer point)
        x = _arrays.to_float(x) if type(x) is not Tagged else \
            overdub(_Forwarding(), _arrays.to_float, x)
    return ctx._wrap(untag(x, ctx), node)


def _forward(f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
             argnums: tuple[int, ...], enclosed: bool | None = None,
             second: bool = False, keeps: bool = False) -> tuple[Any, ...]:
    """Run ``f`` on tagged inputs; returns the tape, the output (its tree, plain leaves and
    their nodes) and the input nodes.  The tape is detached from the context (which is part of
    reference cycles through its dispatchers): it is freed as soon as its holder lets go.
    ``enclosed``: whether there is an enclosing context, if the caller knows already;
    ``second``: the tape is for :mod:`._hvp` (see :attr:`ReverseContext.second`); ``keeps``:
    the tape is swept after the caller got the output back (see :attr:`ReverseContext.keeps`)."""
    ctx = _context(_enclosed() if enclosed is None else enclosed)
    ctx.second = second
    ctx.keeps = keeps
    if not second:  # (hvp's tape: that route's decision, recorded as its own)
        _routes.ran(_routes.REFERENCE, f, "reverse mode, the tape")
    inputs = list(args)
    nodes: dict[int, tuple[Any, ...]] = {}
    for num in argnums:
        leaves, tree = flatten(inputs[num])
        tagged, seeds = _seeds(ctx, leaves)
        inputs[num] = unflatten(tree, tagged)
        nodes[num] = (leaves, tree, seeds)
    try:
        if ctx.nested:
            out = overdub(ctx, _call_and_reveal, ctx, f, *inputs, **kwargs)
        else:
            ctx._specs[id(_reveal_run)] = _REVEAL_RUN  # (a primitive: see _reveal_run)
            run: Callable[..., Any] = _reveal_run  # (given ctx by execute)
            out = overdub(ctx, run, f, *inputs, **kwargs)
    except BaseException:
        if ctx.stores:  # (f raised: what it stored is given plain values back all the same)
            ctx._release_stores()
        raise
    finally:
        ctx.roots.clear()
        ctx.keys_written.clear()  # (the context is used again: see made_here)
        for sites, site in ctx._sites:  # (what they remember holds for this run only)
            sites[site] = None
        ctx._sites.clear()
        _untag_bindings(ctx, f)
    leaves, tree = flatten(out)
    out_nodes: list[Any] = []
    plain: list[Any] = []
    functions: list[Any] = []
    for y in leaves:
        out_nodes.append(ctx._node(y))
        plain.append(untag(y, ctx))
        if type(y) not in _NOT_FUNCTIONS:
            functions.append(y)
    if functions:
        _untag_bindings(ctx, *functions)  # closures among the outputs hold plain values
    if ctx.stores:
        ctx._release_stores()
    ctx.versions.clear()
    ctx.held.clear()
    ctx._functions.clear()
    ctx._specs.clear()
    ctx._attributes.clear()
    ctx._classes.clear()
    ctx.tracking = False
    tape, ctx.tape = ctx.tape, _ENDED
    _done(ctx)
    return tape, (tree, plain, out_nodes), nodes


class _EndedTape(list[Any]):
    """The tape of a context between its runs: code made in a run and resumed after it (a
    generator, a lazy ``map``) that computes with the run's own values would record on it,
    and its entries would never be swept (an outer gradient of them: a silent zero)."""

    def append(self, entry: Any) -> None:
        raise TagError("a value of a reverse-mode derivative that has returned was computed "
                       "with after it returned (by a generator, generator expression or lazy "
                       "map made inside it and resumed after): use the value inside the "
                       "derivative, or return it from there")


_ENDED = _EndedTape()


@opaque
def _call_and_reveal(ctx: ReverseContext, f: Callable[..., Any], /, *args: Any,
                     **kwargs: Any) -> Any:
    """``f(*args, **kwargs)`` under ``ctx``, the dataclasses and named tuples of its output
    read while the run still holds the metadata of their attributes (see ``_pytree.reveal``).
    Called inside ``ctx``'s run: the call of ``f`` is one more step of it (as forward mode's
    ``_call_and_reveal``)."""
    out = reveal(ctx.overdub(f, *args, **kwargs), ctx.overdub)
    if ctx.keeps:  # (in the run: an enclosing context sees the copies made)
        ctx._save_all()
    return out


# Not a primitive, and opaque: it runs natively, at once (no rule lookup at every gradient).
_DECISIONS[id(_call_and_reveal)] = (_call_and_reveal, False)


@opaque
def _reveal_run(ctx: ReverseContext, f: Callable[..., Any], /, *args: Any, **kwargs: Any
                ) -> Any:
    """:func:`_call_and_reveal` for a run with no enclosing context (none to show the call
    to), as a primitive of ``ctx``: ``execute`` runs it at once, as it runs a specialised
    function (its entry in ``ctx._specs``, made by :func:`_forward`), without the dispatcher's
    steps for an opaque function's call.  The call of ``f`` is the step ``ctx.overdub`` takes
    (:class:`ReverseContext` has no hooks), without looking them up."""
    if ctx.is_primitive(f, *args, **kwargs):
        out = ctx.execute(f, *args, **kwargs)
    else:
        out = recurse(ctx, f, *args, **kwargs)
    out = reveal(out, ctx.overdub)
    if ctx.keeps:
        ctx._save_all()
    return out


_DECISIONS[id(_reveal_run)] = (_reveal_run, True)
_REVEAL_RUN = (_reveal_run, _reveal_run)


# Idle reverse contexts of this thread.  A context's first run builds its dispatchers and
# rewrites the functions it meets (tens of microseconds, more than a small gradient's own work),
# so one that finished a run serves the next: runs in progress (nested ones) take others.
_IDLE = threading.local()


def _context(nested: bool) -> ReverseContext:
    idle = getattr(_IDLE, "contexts", None)
    if idle:
        ctx: ReverseContext = idle.pop()
        ctx.nested = nested
        ctx.tape = []
        return ctx
    return ReverseContext(nested=nested)


def _done(ctx: ReverseContext) -> None:
    """``ctx`` finished its run (and holds nothing of it): it may serve the next one."""
    idle = getattr(_IDLE, "contexts", None)
    if idle is None:
        idle = _IDLE.contexts = []
    if len(idle) < 4 and type(ctx) is ReverseContext:
        idle.append(ctx)


def _release(tape: list[Any]) -> None:
    """The tape's values are no longer needed."""
    tape.clear()


def _gradients(nodes: dict[Any, Any], argnums: tuple[int, ...], cts: dict[Any, Any],
               build: Callable[[Any, list[Any]], Any] | None = None) -> tuple[Any, ...]:
    """The gradients of the arguments ``argnums``, in their pytrees.  ``build``: how a pytree is
    rebuilt from its leaves (:func:`_rebuild`, unless the caller knows there is no enclosing
    context: then the faster :func:`unflatten`)."""
    # Built with displays and comprehensions, never list.append: under an enclosing context a
    # stored value's metadata lives in that context's shadow, which the caller cannot read.
    rebuild = _rebuild if build is None else build
    return tuple([rebuild(nodes[num][1], [_cast(cts[n], x) if n in cts else _zeros_like(x)
                                          for n, x in zip(nodes[num][2], nodes[num][0])])
                  for num in argnums])


# Pytree helpers for code that may run under an enclosing context: no list.append, no
# iterators consumed by C functions (the enclosing context sees every value move).
def _rebuild(treedef: Any, leaves: list[Any]) -> Any:
    return _rebuild_at(treedef, leaves, 0)[0]


def _rebuild_at(node: Any, leaves: list[Any], start: int) -> tuple[Any, ...]:
    if node.kind == "leaf":
        return leaves[start], start + 1
    children, start = _rebuild_children(node.children, leaves, start)
    if node.kind is dict:
        return {k: c for k, c in zip(node.keys, children)}, start
    if node.kind is tuple or node.kind is list:
        return (list(children) if node.kind is list else children), start
    return rebuild_node(node, list(children)), start  # a named tuple, dataclass...


def _rebuild_children(children: tuple[Any, ...], leaves: list[Any], start: int) -> tuple[Any, ...]:
    if not children:
        return (), start
    first, start = _rebuild_at(children[0], leaves, start)
    rest, start = _rebuild_children(children[1:], leaves, start)
    return (first,) + rest, start


def _tree_leaves(tree: Any) -> list[Any]:
    kind = type(tree)
    if kind is tuple or kind is list:
        return [leaf for child in tree for leaf in _tree_leaves(child)]
    if kind is dict:
        return [leaf for key in tree for leaf in _tree_leaves(tree[key])]
    children = node_children(tree)  # a named tuple, dataclass...
    return [tree] if children is None else [leaf for c in children for leaf in _tree_leaves(c)]
