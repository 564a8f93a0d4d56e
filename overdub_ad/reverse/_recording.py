"""Primitive calls recorded on the tape: a rule's entry, the scalar fast path, plans for NumPy
calls on arrays, ``custom_jvp`` linearised.  (Methods of :class:`ReverseContext`.)"""

from __future__ import annotations

import marshal
import operator
import pickle
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from overdub import Tagged, recurse

from .. import _callbacks, _rules
from .._arraylike import one_array, takes_arrays
from .._custom import (custom_jvp, custom_vjp, LinearityCheck, output_leaves, probe,
                       refuse_hidden, structured_bwd)
from .._pytree import flatten, is_node, unflatten
from .._shared import (_holds_stored, _INERT_VALUES, _innermost, _no_derivative_lost,
                       _sourceless, unfollowed_write, _zero)
from ._calls import (_arrays_within, _C_ENCODER, _NOT_SIMPLE, _plain_tuple, _positional,
                     _reads_text, _SIMPLE_ARGS, _SIMPLE_VALUES)
from ._plans import _NP_UNSTACK, _Plan
from ._tape import (_carries_int, _Entry, _is_differentiable, _Joint, _LINEARISED, _Node,
                    _placeholder, _root, _RulesJoint)

if TYPE_CHECKING:
    from ._context import ReverseContext


# C functions that serialise the objects they are given to bytes (their items read natively)
# (id -> the function, its public name)
_SERIALISERS = {id(f): (f, name) for f, name in (
    (pickle.dumps, "pickle.dumps"), (pickle.dump, "pickle.dump"),
    (pickle.Pickler.dump, "pickle.Pickler.dump"), (marshal.dumps, "marshal.dumps"),
    (marshal.dump, "marshal.dump"))}


def _refuse_serialising(self: ReverseContext, fn: Any, args: tuple[Any, ...],
                        kwargs: dict[str, Any]) -> None:
    """MissingRuleError for ``pickle.dumps([1.0, x])``, ``pickle.dump({"y": x}, file)``: bytes
    made of a differentiated value (a tagged one, which no pickler can take, or its plain
    value, read natively from a container or an object: a silent zero)."""
    serialiser = _SERIALISERS.get(id(fn))
    if serialiser is not None and serialiser[0] is fn and (
            self._carries((args, kwargs)) or any(map(self._holds_kept, args))):
        raise _rules.MissingRuleError(
            f"no reverse-mode derivative rule for {serialiser[1]} under "
            f"{type(self).__name__}: it was given a differentiated value (or an object or "
            f"container holding one), and the bytes it makes cannot carry its derivative; "
            f"serialise plain values (outside the differentiated function), or register a "
            f"rule with overdub_ad.defvjp")


def _item_nodes(self: ReverseContext, d: dict[Any, Any]) -> dict[Any, Any] | None:
    """The nodes of the items of the dict ``d`` (nested dicts, lists and tuples too), or None
    where none is differentiated."""
    nodes = {k: _item_nodes(self, v) if type(v) is dict else self._inputs(v)
             for k, v in d.items()}
    return nodes if any(n is not None for n in nodes.values()) else None


def _call(self: ReverseContext, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A primitive call: run on plain values, record an entry with the argument nodes."""
    if type(fn) is custom_jvp:
        refuse_hidden("custom_jvp", fn.fun, args, kwargs, lambda x: _holds_stored(self, x),
                      self._carries)
        if not self._carries((args, kwargs)):
            return self.fallback(fn, *args, **kwargs)  # (a leaf: see the custom_vjp case)
        return self._through_jvp_rule(fn, args, kwargs)
    if _reads_text(fn) and _rules.vjp_rules(fn) is None:  # json.dumps({"a": x}): a constant
        memo: dict[int, Any] = {}
        loose = type(fn) is _C_ENCODER
        return self._run(fn, *[self._textual(a, memo, loose) for a in args],
                         **{k: self._textual(v, memo, loose) for k, v in kwargs.items()})
    _refuse_serialising(self, fn, args, kwargs)
    if kwargs and any(self._carries(v) for v in kwargs.values()):
        args, kwargs = _positional(fn, args, kwargs)
        if any(self._carries(v) for v in kwargs.values()):
            name = next(k for k, v in kwargs.items() if self._carries(v))
            raise _rules.MissingRuleError(
                f"no reverse-mode derivative rule for {_callbacks.describe(fn)} with "
                f"respect to its keyword argument {name!r} under {type(self).__name__} (one "
                f"that cannot be passed positionally); register a rule with "
                f"overdub_ad.defvjp")
    primals = [self._plain(a) for a in args]
    inputs = [self._inputs(a) for a in args]
    if _sourceless(fn):  # Python without source reads what an object or dict holds too
        for i, a in enumerate(args):
            if inputs[i] is None and type(a) not in _INERT_VALUES and \
                    _callbacks.holds_kept(self, a, self._mine):
                raise _rules.missing(fn, i, "reverse", type(self).__name__)
    if any(type(n) is list for n in inputs) and takes_arrays(fn, primals, kwargs):
        # a list of numbers is an array to NumPy: to its rule too (see _arraylike)
        primals = [self._run(np.asarray, p) if type(n) is list and one_array(fn, p) else p
                   for p, n in zip(primals, inputs)]
    plain_kwargs = {k: self._plain(v) for k, v in kwargs.items()} if kwargs else kwargs
    if isinstance(fn, custom_vjp):
        if fn.fwd is None:
            return fn(*args, **kwargs)  # (raises: no rule)
        refuse_hidden("custom_vjp", fn.fn, args, kwargs, lambda x: _holds_stored(self, x),
                      self._carries)
        if not self._carries((args, kwargs)) and not self._closes_over(fn.fn):
            # nothing this derivative differentiates: the call as it is, which an enclosing
            # derivative sees whole and takes by its rule (never the body's operations)
            return self.fallback(fn, *args, **kwargs)
        positional = fn.positional(args, kwargs)
        if kwargs or len(positional) != len(args):
            # (keywords bound to their positions, defaults filled in: bwd gives one cotangent
            # per parameter, as JAX's)
            return _call(self, fn, positional, {})
        if self._closes_over(fn.fn):
            if getattr(fn, "_wants_inputs", False):  # checkpoint: differentiated through,
                return recurse(self, fn.fn, *args, **kwargs)  # nothing recomputed
            raise _rules.MissingRuleError(
                f"custom_vjp function {_rules._name(fn.fn)} reads a differentiated value "
                f"from its closure or defaults, which its vjp rule gives no cotangent for: "
                f"pass that value as an argument")
        # a dict argument (a model's parameters) has its items' nodes, as a list's
        inputs = [_item_nodes(self, a) if type(a) is dict else n for a, n in zip(args, inputs)]
        primals = [{k: self._plain(v) for k, v in a.items()} if type(a) is dict and
                   n is not None else p for a, n, p in zip(args, inputs, primals)]
        fn.check_nondiff([n is not None for n in inputs])
        out, residuals = fn.fwd_pair(self._run(fn.fwd, *primals, **plain_kwargs))
        assert fn.bwd is not None  # defvjp sets fwd and bwd together
        wanted = tuple([i for i, n in enumerate(inputs) if n is not None]) \
            if getattr(fn, "_wants_inputs", False) else None  # checkpoint: only what is needed
        structured = output_leaves(out)  # a dict or nested output: recorded as its leaves
        if structured is None:
            return self._record(fn, primals, plain_kwargs, out, inputs,
                                joint=_Joint(fn.bwd, residuals, wanted))
        recorded = self._record(fn, primals, plain_kwargs, structured[0], inputs,
                                joint=_Joint(structured_bwd(fn.bwd, structured[1]), residuals,
                                             wanted))
        return unflatten(structured[1], list(recorded))
    if _rules.is_nondifferentiable(fn) or all(n is None for n in inputs):
        return self._run(fn, *primals, **plain_kwargs)
    rules = _rules.vjp_rules(fn)
    for i, node in enumerate(inputs):
        if node is not None and (rules is None or i >= len(rules) or rules[i] is None):
            out = self._run(fn, *primals, **plain_kwargs)
            if _no_derivative_lost(out, all(type(n) is list for n in inputs
                                            if n is not None)):
                return out  # (text, a sort key's string): nothing lost, as forward mode
            raise _rules.missing(fn, i, "reverse", type(self).__name__)
    out = self._run(fn, *primals, **plain_kwargs)
    if type(out) is np.ndarray and out.dtype.names is not None:
        error = unfollowed_write(out, "reverse")  # (np.array of tuples, a record dtype)
        assert error is not None
        raise error
    return self._record(fn, primals, plain_kwargs, out, inputs,
                        shape_only=fn is operator.getitem or fn is _NP_UNSTACK)


def _through_jvp_rule(self: ReverseContext, fn: custom_jvp, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
    """A :class:`custom_jvp` function, differentiated by its rule as JAX does.  The rule's
    tangent map is linear: it is recorded with the primals plain here and each
    differentiated argument's tangent standing for the argument itself (``x - x``, zero in
    value, with ``x``'s node), and added to the rule's output.  The cotangents are then
    the transposed map's; an enclosing derivative sees the map's coefficients depend on
    the primals.  The tangents are recorded at a probe value (ones), not zero, between two
    pass-through entries that check the map linear (see ``LinearityCheck``)."""
    positional = fn.positional(args, kwargs)
    fn.check_nondiff([any(self._node(v) is not None for v in flatten(a)[0])
                      for a in positional])
    leaves, tree = flatten(list(positional))
    primals = [self._plain(leaf) for leaf in leaves]
    given = [i for i, leaf in enumerate(leaves) if self._node(leaf) is not None]
    check = LinearityCheck(fn, [probe(primals[i]) for i in given])
    tangents = [_zero(p, ()) for p in primals]
    probes = self._record(probe, [primals[i] for i in given], {}, tuple(check.probes),
                          [self._node(leaves[i]) for i in given], joint=check.inputs)
    for i, t in zip(given, probes):
        tangents[i] = t
    # (revealed: a dataclass or registered object the rule built under this context keeps
    # its fields' metadata aside, where a native read would find them plain -- a silent zero)
    result = fn.rule_pair(self._revealed(self.overdub(fn.jvp, tuple(unflatten(tree, primals)),
                                                      tuple(unflatten(tree, tangents)))))
    if self.second:
        self.tape.append(_LINEARISED)
    outs, out_tree = flatten(result[0])
    douts, dout_tree = flatten(result[1])
    if len(outs) != len(douts):
        raise TypeError(f"the jvp rule of {_rules._name(fn.fun)} returned a tangent of "
                        f"structure {dout_tree} for an output of structure {out_tree}")
    mapped = [k for k, d in enumerate(douts) if self._node(d) is not None]
    if not mapped:
        return unflatten(out_tree, outs)
    check.values = [self._plain(douts[k]) for k in mapped]
    zeros = self._record(probe, list(check.values), {},
                         tuple([_zero(v, ()) for v in check.values]),
                         [self._node(douts[k]) for k in mapped], joint=check.outputs)
    for k, z in zip(mapped, zeros):  # the output plus a zero carrying the map's derivative
        outs[k] = self.execute(operator.add, self._plain(outs[k]), z)
    return unflatten(out_tree, outs)


def _simple_call(self: ReverseContext, fn: Any, plan: _Plan, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Any:
    """What :meth:`_call` does for the common call -- a function with rules, on arrays
    and numbers, no enclosing context, no array versioned yet -- without its generality
    (containers of differentiated values, keywords that carry them, ``out=``), from
    ``fn``'s plan.  ``_NOT_SIMPLE`` for any other call, before anything ran."""
    ref = self._ref
    primals = list(args)
    inputs: list[Any] = [None] * len(primals)
    mask = 0  # bit i: argument i is differentiated
    i = 0
    for a in args:
        kind = type(a)
        if kind is Tagged:
            value = a.value
            if a.owner is not ref or type(value) not in _SIMPLE_VALUES:
                return _NOT_SIMPLE
            primals[i] = value
            inputs[i] = a.meta
            mask |= 1 << i
        elif kind not in _SIMPLE_ARGS and not (kind is tuple and _plain_tuple(a)):
            return _NOT_SIMPLE
        i += 1
    if kwargs:
        if "out" in kwargs:
            return _NOT_SIMPLE
        for v in kwargs.values():
            if not (type(v) in _SIMPLE_ARGS or (type(v) is tuple and _plain_tuple(v))):
                return _NOT_SIMPLE
    if not mask or plan.nondifferentiable:
        return fn(*primals, **kwargs)
    how = plan.masks.get(mask)
    if how is None:
        how = plan.recording(mask)
    unread = how[0]
    if unread is None:
        return _NOT_SIMPLE  # MissingRuleError, from _call
    rules = plan.rules
    out = fn(*primals, **kwargs) if kwargs else fn(*primals)
    kind = type(out)
    if (kind is np.ndarray and out.base is None and out.dtype.kind in "fc"
            and fn is not operator.getitem) or kind is float or kind is np.float64:
        node = _Node()
        kept = out
        # values no rule of a differentiated argument reads are not kept: they are freed
        # as in the plain run (memory, and time: the allocator reuses them)
        if not self.second:
            for i in unread:
                primals[i] = _placeholder(primals[i])
            if how[1]:
                kept = _placeholder(out)
        quick = plan.quick
        if quick is not None and (quick[4] or not self.second) and \
                quick[2](mask, primals, kwargs):
            rules = quick[3]  # x ** 2, a @ b, np.sum(a): the same numbers, faster
        entry = _Entry(fn, primals, kwargs, kept, inputs, node, None, rules)
        self.tape.append(entry)
        if self.tracking:  # (a plain array the tape holds was written in place)
            self._hold(entry, primals, kept)
        return Tagged(out, node, ref, self._label)
    if fn is operator.getitem and kind is np.ndarray and out.dtype.kind in "fc":
        # x[1:]: _record's work for a view of x, where x owns its data (x's node is the
        # one a write into the view updates) or is itself a view (nothing to note)
        x = primals[0]
        if out.base is x and type(inputs[0]) is _Node and id(x) not in self.roots:
            self.roots[id(x)] = (weakref.ref(x), inputs[0])
        node = _Node()
        primals[0] = _placeholder(x)
        entry = _Entry(fn, primals, kwargs, out, inputs, node, None, rules)
        self.tape.append(entry)
        if self.tracking:
            self._hold(entry, primals, out)
        return Tagged(out, node, ref, self._label)
    return self._record(fn, primals, kwargs, out, inputs,
                        shape_only=fn is operator.getitem or fn is _NP_UNSTACK)


def _stacked_numbers(self: ReverseContext, fn: Any, items: Any) -> Any:
    """``fn(items)`` (``np.array``, ``np.asarray``, ``np.stack``) of floats some of which
    this context tagged -- a small state built from its components at every step -- recorded
    as :meth:`_call` records it (the list read as the array NumPy makes of it, its members'
    nodes), without its generality; ``_NOT_SIMPLE`` for anything else, before anything ran."""
    ref = self._ref
    values: list[Any] = []
    nodes: list[Any] = []
    for item in items:
        kind = type(item)
        if kind is Tagged:
            if item.owner is not ref or type(item.value) not in _STACKED_NUMBERS:
                return _NOT_SIMPLE
            values.append(item.value)
            nodes.append(item.meta)
        elif kind in _STACKED_NUMBERS:
            values.append(item)
            nodes.append(None)
        else:
            return _NOT_SIMPLE
    if all(n is None for n in nodes):
        return _NOT_SIMPLE
    primal = np.asarray(values)
    return self._record(fn, [primal], {}, fn(primal), [nodes])


_STACKED_NUMBERS = frozenset((float, np.float64))


def _record(self: ReverseContext, fn: Any, primals: list[Any], kwargs: dict[str, Any], out: Any,
            inputs: list[Any], joint: Callable[..., Any] | None = None,
            shape_only: bool = False) -> Any:
    outputs: tuple[_Node | None, ...] | _Node
    result: Any
    if joint is None:
        structured = _user_structure(fn, out)
        if structured is not None:  # a user's rules, of an output of several leaves
            leaves, tree = structured
            rules = _rules.vjp_rules(fn)
            assert rules is not None
            recorded = self._record(fn, primals, kwargs, tuple(leaves), inputs,
                                    joint=_RulesJoint(rules, tree, out, primals, kwargs, inputs))
            return unflatten(tree, list(recorded))
    if isinstance(out, (tuple, list)):
        outputs = tuple([_Node() if _is_differentiable(o) else None for o in out])
        if all(n is None for n in outputs):
            return out
        items = [o if n is None else self._wrap(o, n) for o, n in zip(out, outputs)]
        result = type(out)(*items) if hasattr(out, "_fields") else type(out)(items)
    elif _is_differentiable(out) or (type(_innermost(out)) is int
                                     and _carries_int(fn, inputs, joint)):
        outputs = _Node()
        result = self._wrap(out, outputs)
    else:
        if isinstance(out, np.ndarray) and out.dtype == object:
            raise _rules.MissingRuleError(
                f"{_rules._name(fn)} turned a differentiated value into an object array "
                f"under {type(self).__name__}: its elements would lose their derivatives "
                f"(object arrays are not differentiable; np.vectorize is, without "
                f"otypes=[object])")
        return out
    self._note_views(primals, inputs, out, outputs)
    if shape_only:  # the rule needs only the first argument's shape and dtype
        primals[0] = _placeholder(primals[0])
    entry = _Entry(fn, primals, kwargs, out, inputs, outputs, joint)
    self.tape.append(entry)
    if self.tracking:
        self._hold(entry, primals, out)
    return result


def _user_structure(fn: Any, out: Any) -> tuple[list[Any], Any] | None:
    """The leaves and structure of ``out``, the output of a function with reverse rules the
    user registered (``defvjp``), where it is a tuple, list, dict, named tuple, dataclass or
    registered pytree: its rules are then given the cotangent in that structure, zeros for
    the leaves nothing used (as a ``custom_vjp``'s bwd is; see :class:`_RulesJoint`).  None
    for anything else, and for the rules overdub_ad ships (they take tuples, None for
    zero)."""
    kind = type(out)
    if not (kind is dict or kind is tuple or kind is list or is_node(out)) or \
            _rules.vjp_rules(fn) is None or _rules.is_shipped(fn) or fn is _NP_UNSTACK:
        return None
    leaves, tree = flatten(out)
    if tree.kind == "leaf" or not any(map(_is_differentiable, leaves)):
        return None
    return leaves, tree


# -- values the tape needs, and views ------------------------------------------------------
def _hold(self: ReverseContext, entry: _Entry, primals: list[Any], out: Any) -> None:
    held = self.held
    for i, value in enumerate(primals):
        v = _innermost(value)
        if type(v) is np.ndarray:
            held.setdefault(id(_root(v)), []).append((v, entry, (i,)))
        elif type(value) in (list, tuple):  # (NumPy reads the arrays in nested lists)
            for w, path in _arrays_within(value, (i,)):
                held.setdefault(id(_root(w)), []).append((w, entry, path))
    if isinstance(out, (tuple, list)):
        for j, item in enumerate(out):
            w = _innermost(item)
            if type(w) is np.ndarray:
                held.setdefault(id(_root(w)), []).append((w, entry, ("out", j)))
    else:
        w = _innermost(out)
        if type(w) is np.ndarray:
            held.setdefault(id(_root(w)), []).append((w, entry, ("out",)))
    if entry.kwargs:  # np.clip(x, a_min=lo): a rule reads lo
        for name, value in entry.kwargs.items():
            w = _innermost(value)
            if type(w) is np.ndarray:
                held.setdefault(id(_root(w)), []).append((w, entry, ("kw", name)))
    if type(entry.joint) is _Joint:  # what a custom_vjp's fwd kept for its bwd
        for w, path in _arrays_within(entry.joint.residuals, ("res",)):
            held.setdefault(id(_root(w)), []).append((w, entry, path))
