"""Hessian-vector products by forward-over-reverse on the tape, with no nested contexts.

``hvp(f, x, v)`` is ``d/de grad(f)(x + e v)`` at ``e = 0``.  Taken as ``jvp(grad(f))`` it runs
the reverse context inside a forward context: every primitive of ``f`` and every operation
inside every reverse rule goes through the forward context's dispatch, which costs far more
than the NumPy work of a dozen array operations.  Here ``f`` runs once, under a reverse context
of its own that keeps each entry's function and values (:attr:`ReverseContext.second`); then

1. a tangent pass along the tape gives each entry's output tangent from its arguments'
   tangents (the forward rules, called on plain arrays, as the forward engine calls them);
2. the backward sweep carries pairs (cotangent, tangent of the cotangent): each rule's result
   as in ``grad``, and its derivative in the direction of (cotangent, output, arguments) --
   written out below for the functions that dominate array code (linear, bilinear, powers,
   common elementwise functions), else forward mode applied to the rule itself, which is what
   ``jvp(grad(f))`` does for every rule.

A straight-line NumPy function (assignments and a ``return`` of array expressions) skips the
tape altogether: :mod:`._compiled` writes these same passes out as code, once per function.

The result is ``jvp(grad(f))``'s, from the same formulas (the written-out ones may associate
products differently: equal up to rounding).  A tape this pass does not handle -- an entry of
``custom_vjp``/``checkpoint``, whose residuals have no tangents, or a non-scalar output --
makes :func:`tape_hvp` decline before any result is returned; the caller then takes the nested
route (which runs ``f`` again).  So does a result that is not finite: at a singular point the
nested route's forward mode leaves out the terms of exactly zero tangents on numbers, where
this pass multiplies them (``0 * inf = nan``), and takes an expression's operations one by one
where a record holds their second partials together (``inf`` and ``nan`` do not distribute).
"""

from __future__ import annotations

import math
import numbers
import operator
import types
from typing import Any

import numpy as np

from .. import _routes, _rules
from .._pytree import flatten, unflatten
from .._shared import _innermost, _reverse_rules_only
from ..forward._api import jvp
from ..reverse._plans import _NP_UNSTACK
from ..reverse._sweep import _forward
from ..reverse._tape import (_cast, _Linearised, _read_as_array, _ScalarRead, _Second,
                             _unbroadcast, _vjps, _write, _WRITE_VJPS, _zeros_like)


class NotScalarOutput(_routes.Declined):
    """The tape's function does not give a real scalar (or gives a constant): declined for
    its output, whatever the argument's values."""


class _Unsupported(Exception):
    """The tape has an entry this pass does not differentiate (see the module docstring)."""


def tape_hvp(f: Any, x: Any, v: Any) -> Any:
    """``H(x) @ v`` of scalar ``f`` at ``x`` (no enclosing context); raises
    :class:`overdub_ad._routes.Declined` for a tape it does not handle."""
    return tape_hvps(f, x, [v])[0]


def tape_hvps(f: Any, x: Any, directions: list[Any]) -> list[Any]:
    """``H(x) @ v`` for each ``v`` of ``directions`` (each of ``x``'s structure), from one
    recording of the tape: a sweep per direction (``hessian``'s columns)."""
    xleaves, xtree = flatten(x)
    tape, (tree, plain, out_nodes), nodes = _forward(f, (x,), {}, (0,), enclosed=False,
                                                     second=True)
    leaves, _, in_nodes = nodes[0]
    try:
        if len(plain) != 1 or np.ndim(plain[0]) != 0 or np.iscomplexobj(plain[0]) or \
                out_nodes[0] is None:
            # (not a real scalar: the nested route says so)
            raise NotScalarOutput("not a real scalar output, or a constant one")
        return [unflatten(xtree, _sweep(tape, in_nodes, leaves, out_nodes[0], flatten(v)[0]))
                for v in directions]
    finally:
        tape.clear()


def _sweep(tape: list[Any], in_nodes: list[Any], leaves: list[Any], out_node: Any,
           vleaves: list[Any]) -> list[Any]:
    """One direction's tangent pass and backward sweep over the recorded tape: the leaves of
    ``H @ v``, each in its input leaf's type."""
    tangents: dict[Any, Any] = {}
    for node, leaf, d in zip(in_nodes, leaves, vleaves):
        if isinstance(leaf, np.ndarray):
            d = np.asarray(d)
            if d.dtype.kind in "biu":  # an integer direction: float, as the seed is
                d = d.astype(float)
        tangents[node] = d
    tangents.pop(None, None)  # (no node is None: a record's constant operand has none)
    try:
        entry_dargs: dict[int, list[Any]] = {}
        curvatures: dict[int, list[Any]] = {}
        _tangents(tape, tangents, entry_dargs, curvatures)
        pairs: dict[Any, list[Any]] = {out_node: [1.0, None]}
        _pairs(tape, pairs, tangents, entry_dargs, curvatures)
    except _Unsupported:
        raise _routes.Declined("a custom_vjp, checkpoint, custom_jvp or reverse-only rule, or "
                               "a call given a function (key=), on the tape") from None
    result = [_cast(pairs[n][1] if n in pairs and pairs[n][1] is not None else
                    _zeros_like(leaf), leaf) for n, leaf in zip(in_nodes, leaves)]
    if not all(map(_finite, result)):
        # (a singular point: where this pass and the nested route differ, see above, the
        # difference is an infinity or a nan in the result; the nested route computes it)
        raise _routes.Declined("a result that is not finite (a singular point)")
    return result


def _finite(value: Any) -> bool:
    """Whether a number or every element of an array is finite (None: an empty leaf)."""
    if value.__class__ is float:
        return math.isfinite(value)
    return value is None or bool(np.isfinite(value).all())


# -- the tangent pass --------------------------------------------------------------------------

def _tangents(tape: list[Any], tangents: dict[Any, Any], entry_dargs: dict[int, list[Any]],
              curvatures: dict[int, list[Any]]) -> None:
    """Each entry's output tangent, in tape order.  A record of float arithmetic with its
    second partials (``_Second``: most of a scalar loop's tape, so written out here) gives
    the output's tangent ``sum_i p_i t_i`` and, in ``curvatures``, each partial's tangent
    ``sum_j h_ij t_j``; other entries, :func:`_tangent`."""
    get = tangents.get
    second = _Second
    for entry in tape:
        if type(entry) is not tuple or entry[0] is not second:
            _tangent(entry, tangents, entry_dargs)
            continue
        out = None
        items = iter(entry)  # (node, partial) pairs read off one iterator, as the sweep does
        next(items)
        node = next(items)
        curvature = next(items)
        if not curvature:
            for n in items:
                p = next(items)
                t = get(n)
                if t is not None:
                    out = p * t if out is None else out + p * t
            if out is not None:
                tangents[node] = out
            continue
        moving = []
        for n in items:
            p = next(items)
            t = get(n)
            moving.append(t)
            if t is not None:
                out = p * t if out is None else out + p * t
        if out is None:
            continue  # (no operand moves: neither do the partials)
        tangents[node] = out
        dps: list[Any] = [None] * len(moving)
        for k in range(0, len(curvature), 3):
            i, j, h = curvature[k], curvature[k + 1], curvature[k + 2]
            t = moving[j]
            if t is not None:
                dps[i] = h * t if dps[i] is None else dps[i] + h * t
            if i != j:
                t = moving[i]
                if t is not None:
                    dps[j] = h * t if dps[j] is None else dps[j] + h * t
        curvatures[node] = dps


def _tangent_of(node: Any, tangents: dict[Any, Any]) -> Any:
    if node is None:
        return None
    if type(node) is list:
        parts = [_tangent_of(n, tangents) for n in node]
        return parts if any(p is not None for p in parts) else None
    return tangents.get(node)


def _python_callable(v: Any) -> bool:
    """A function or method given to a recorded call (a ``key=``): Python code to run."""
    return isinstance(v, (types.FunctionType, types.MethodType)) or (
        type(v) is types.BuiltinMethodType and not isinstance(v.__self__, types.ModuleType))


def _tangent(entry: Any, tangents: dict[Any, Any], entry_dargs: dict[int, list[Any]]) -> None:
    """The output tangent of ``entry`` (and, in ``entry_dargs``, its arguments' tangents)."""
    if type(entry) is tuple:  # a record, headed by its kind (see reverse._tape)
        if entry[0] is not _ScalarRead:
            raise _Unsupported  # local partials (_Partials): never recorded for this pass
        _, node, array_node, index, _ = entry  # x[i]
        d = tangents.get(array_node)
        if d is not None:
            # (a rule may give a 0-d array's tangent as a number: np.broadcast_arrays(x * x))
            tangents[node] = (d if type(d) is np.ndarray else np.asarray(d))[index]
        return
    if type(entry) is _Linearised or entry.joint is not None:
        raise _Unsupported
    dargs = [_tangent_of(n, tangents) for n in entry.inputs]
    if all(d is None for d in dargs):
        return
    fn, primals, kwargs, out = entry.fn, entry.primals, entry.kwargs, entry.out
    if kwargs and any(map(_python_callable, kwargs.values())):
        raise _Unsupported  # max(xs, key=cm.get): the function, run again after the recording,
        # would read the run's values (tagged by a context no longer running)
    kind = _KINDS.get(id(fn))
    d_out: Any = _GENERIC
    if kind is not None and kind[0] is fn and (kind[3] is _t_sum or kind[3] is _t_stacked):
        d_out = kind[3](fn, primals, kwargs, out, dargs)  # sum(state), np.array(items)
    # a list NumPy read as an array (recorded as that array: reverse._recording) has the
    # array's tangent, as the rules and their derivatives below take it (to them a list of
    # tangents is a sequence: ``ct * [t, u]`` raises, a None in it is no number)
    dargs = [_filled(d, x) if type(d) is list and type(x) is np.ndarray else d
             for d, x in zip(dargs, primals)]
    entry_dargs[id(entry)] = dargs
    if d_out is not _GENERIC:
        pass
    elif any(type(d) is list for d in dargs):  # a list's elements (np.sum([1.2, x]))
        d_out = _forward_mode(fn, primals, kwargs, dargs)
    elif kind is not None and kind[0] is fn and kind[3] is not None:
        d_out = kind[3](fn, primals, kwargs, out, dargs)
    if d_out is not _GENERIC:
        pass
    elif fn is _write:  # linear in what was there and what is written
        before, index = primals[0], primals[1]
        d = np.zeros(np.shape(before), np.result_type(before, float)) if dargs[0] is None \
            else np.array(dargs[0], dtype=np.result_type(dargs[0], float))
        # a constant written (u[0] = 0.0) has no tangent: the old one is overwritten too
        d[index] = 0.0 if dargs[2] is None else dargs[2]
        d_out = d
    else:
        rules = _rules.jvp_rules(fn)
        if _reverse_rules_only(fn):
            raise _Unsupported  # forward mode enters its body: the nested route does
        if rules is None:
            raise _rules.missing(fn, next(i for i, d in enumerate(dargs) if d is not None),
                                 "forward", "hvp")
        d_out = None
        for i, d in enumerate(dargs):
            if d is None:
                continue
            rule = rules[i] if i < len(rules) else None
            if rule is None:
                raise _rules.missing(fn, i, "forward", "hvp")
            if rule is _rules.ZERO:
                continue
            if rule is _rules.LINEAR:
                moved = list(primals)
                moved[i] = d
                part = fn(*moved, **kwargs)
            elif type(rule) is _rules.Carried:
                part = rule.rule(_rules.carried_pattern(dargs), d, out, *primals, **kwargs)
            else:
                part = rule(d, out, *primals, **kwargs)
            d_out = _sum(d_out, part)
    outputs = entry.outputs
    if type(outputs) is tuple:
        for node, d in zip(outputs, d_out if d_out is not None else ()):
            if node is not None and d is not None:
                tangents[node] = d
    elif d_out is not None:
        tangents[outputs] = d_out


def _sum(a: Any, b: Any) -> Any:
    """Contributions summed (several outputs: elementwise, None being zero), never in place."""
    if a is None:
        return b
    if b is None:
        return a
    if type(a) in (tuple, list):
        return type(a)([_sum(p, q) for p, q in zip(a, b)])
    return a + b


def _zero(x: Any) -> Any:
    x = _innermost(x)
    if isinstance(x, np.ndarray):
        return np.zeros(x.shape, np.result_type(x, float))
    if type(x) in (list, tuple):
        return type(x)([_zero(item) for item in x])
    if _named(x):
        return type(x)._make([_zero(item) for item in x])
    if not isinstance(x, (numbers.Number, np.generic)):
        return None  # (a label held beside the numbers: no direction for it)
    return 0.0 * x if isinstance(x, (complex, np.complexfloating)) else 0.0


def _forward_mode(fn: Any, args: list[Any], kwargs: dict[str, Any], dargs: list[Any]) -> Any:
    """The tangent of ``fn(*args, **kwargs)`` for the argument tangents ``dargs`` (None: the
    argument is held fixed), by the forward engine: any function it differentiates."""
    moving = [i for i, d in enumerate(dargs) if d is not None]

    def call(*values: Any) -> Any:
        return fn(*_placed(args, moving, values), **kwargs)

    primals = tuple([args[i] for i in moving])
    directions = tuple([_filled(dargs[i], args[i]) for i in moving])
    with _routes.unheard():  # (the rule's forward mode: this route's own work)
        return jvp(call, primals, directions)[1]


def _placed(args: Any, moving: list[int], values: tuple[Any, ...]) -> list[Any]:
    """``args`` with ``values`` at the positions ``moving``, built as a new list: a value
    written into a list under the forward context would be stored without the tangents of
    what it holds (a list of arrays: select's choices, concatenate's operands)."""
    at = dict(zip(moving, values))
    return [at[i] if i in at else a for i, a in enumerate(args)]


def _filled(d: Any, x: Any) -> Any:
    """A tangent with zeros where it has None (a container argument's fixed elements)."""
    if d is None:
        return _zero(x)
    if type(d) in (list, tuple):
        filled = [_filled(p, item) for p, item in zip(d, x)]
        # a list the tape took as an array (np.array([x, y])) has an array tangent; otherwise
        # the tangent has the value's own container (np.split's list of outputs has a tuple of
        # tangents, and jvp wants a direction shaped as its primal)
        if isinstance(x, np.ndarray):
            return np.array(filled)
        if _named(x):  # (sum(P(t, 2 * t)): jvp wants the named tuple, not a list)
            return type(x)._make(filled)
        return type(x)(filled) if type(x) in (list, tuple) else type(d)(filled)
    return d


def _named(x: Any) -> bool:
    """Whether ``x`` is a named tuple (a pytree node of its own class, rebuilt by ``_make``)."""
    return isinstance(x, tuple) and hasattr(x, "_fields") and hasattr(x, "_make")


# -- the backward sweep on pairs ---------------------------------------------------------------

def _pairs(tape: list[Any], pairs: dict[Any, list[Any]], tangents: dict[Any, Any],
           entry_dargs: dict[int, list[Any]], curvatures: dict[int, list[Any]]) -> None:
    """The backward sweep: each entry's pair ``(c, e)`` -- cotangent, and its tangent -- sent
    to its arguments, in reverse tape order.  A ``_Second`` record's (written out here) gives
    operand ``i`` ``c_i += p_i c`` and ``e_i += p_i e + dp_i c``, ``dp_i`` the tangent of its
    partial; other entries, :func:`_pull`."""
    pop, find = pairs.pop, pairs.get
    second = _Second
    for entry in reversed(tape):
        if type(entry) is not tuple or entry[0] is not second:
            _pull(entry, pairs, tangents, entry_dargs)
            continue
        pair = pop(entry[1], None)
        if pair is None:
            continue
        ct, dct = pair
        items = iter(entry)  # (node, partial) pairs read off one iterator, as the sweep does
        next(items)
        next(items)
        dps = curvatures.get(entry[1]) if next(items) else None
        if dps is None:  # no curvature (or no operand's partial moves)
            for node in items:
                p = next(items)
                if node is None:
                    continue
                found = find(node)
                if dct is None:
                    if found is None:
                        pairs[node] = [p * ct, None]
                    else:
                        found[0] = found[0] + p * ct
                elif found is None:
                    pairs[node] = [p * ct, p * dct]
                else:
                    found[0] = found[0] + p * ct
                    found[1] = p * dct if found[1] is None else found[1] + p * dct
            continue
        k = 0
        for node in items:
            p = next(items)
            dp = dps[k]
            k += 1
            if node is None:
                continue
            e = None if dct is None else p * dct
            if dp is not None:
                e = dp * ct if e is None else e + dp * ct
            found = find(node)
            if found is None:
                pairs[node] = [p * ct, e]
            else:
                found[0] = found[0] + p * ct
                if e is not None:
                    found[1] = e if found[1] is None else found[1] + e


def _add(pairs: dict[Any, list[Any]], node: Any, ct: Any, dct: Any) -> None:
    pair = pairs.get(node)
    if pair is None:
        pairs[node] = [ct, dct]
        return
    pair[0] = pair[0] + ct
    if dct is not None:
        pair[1] = dct if pair[1] is None else pair[1] + dct


def _send(pairs: dict[Any, list[Any]], node: Any, part: Any, dpart: Any, x: Any) -> None:
    if node is None or part is None:
        return
    if type(node) is list:
        if _read_as_array(part, x):  # a list NumPy broadcast as an array
            part = _fitted(part, x)
            dpart = None if dpart is None else _fitted(dpart, x)
        for i, (n, item) in enumerate(zip(node, x)):
            _send(pairs, n, part[i], None if dpart is None else dpart[i], item)
        return
    _add(pairs, node, _fitted(part, x), None if dpart is None else _fitted(dpart, x))


def _fitted(part: Any, x: Any) -> Any:
    """``part`` summed to ``x``'s shape (and real for real ``x``), most often as it is."""
    if type(part) is np.ndarray and type(x) is np.ndarray and part.shape == x.shape and \
            (part.dtype.kind != "c" or x.dtype.kind == "c"):
        return part
    return _unbroadcast(part, x)


def _pull(entry: Any, pairs: dict[Any, list[Any]], tangents: dict[Any, Any],
          entry_dargs: dict[int, list[Any]]) -> None:
    if type(entry) is tuple:  # x[i] (a _ScalarRead: _tangent let no other record through)
        pair = pairs.pop(entry[1], None)
        if pair is None:
            return
        _, _, array_node, index, x = entry
        ct, dct = pair
        dtype = np.result_type(x.dtype, float)
        part = np.zeros(x.shape, dtype)
        part[index] = ct
        dpart = None
        if dct is not None:
            dpart = np.zeros(x.shape, dtype)
            dpart[index] = dct
        _add(pairs, array_node, part, dpart)
        return
    outputs = entry.outputs
    if type(outputs) is tuple:
        got = [pairs.pop(n, None) if n is not None else None for n in outputs]
        if all(g is None for g in got):
            return
        ct = tuple([None if g is None else g[0] for g in got])
        dct = tuple([None if g is None else g[1] for g in got])
        if all(d is None for d in dct):
            dct = None
        d_out = _tuple_tangent(outputs, tangents)
    else:
        pair = pairs.pop(outputs, None)
        if pair is None:
            return
        ct, dct = pair
        d_out = tangents.get(outputs)
    fn, primals, kwargs, out, inputs = entry.fn, entry.primals, entry.kwargs, entry.out, \
        entry.inputs
    rules = entry.rules if entry.rules is not None else _vjps(fn)
    dargs = entry_dargs.get(id(entry)) or [None] * len(inputs)
    for i, node in enumerate(inputs):
        if node is None:
            continue
        rule = rules[i]
        if rule is _rules.ZERO:
            continue
        if type(rule) is _rules.Carried:
            pattern = _rules.carried_pattern(inputs)
            part = rule.rule(pattern, ct, out, *primals, **kwargs)
        else:
            part = rule(ct, out, *primals, **kwargs)
        dpart = _second(fn, rules, i, ct, dct, out, d_out, primals, dargs, kwargs)
        _send(pairs, node, part, dpart, primals[i])


def _tuple_tangent(outputs: tuple[Any, ...], tangents: dict[Any, Any]) -> Any:
    ds = tuple([tangents.get(n) if n is not None else None for n in outputs])
    return None if all(d is None for d in ds) else ds


# -- derivatives of the rules --------------------------------------------------------------------

def _second(fn: Any, rules: tuple[Any, ...], i: int, ct: Any, dct: Any, out: Any, d_out: Any,
            primals: list[Any], dargs: list[Any], kwargs: dict[str, Any]) -> Any:
    """The derivative of ``rules[i](ct, out, *primals)`` in the direction ``(dct, d_out,
    dargs)`` (None: zero)."""
    rule = rules[i]
    moving = [j for j, d in enumerate(dargs) if d is not None]
    if dct is None and not moving:
        return None
    kind = _KINDS.get(id(fn))
    if kind is not None and kind[0] is fn and rules in kind[1]:
        done = kind[2](rule, i, ct, dct, out, d_out, primals, dargs, kwargs)
        if done is not _GENERIC:
            return done
    return _rule_tangent(rule, i, ct, dct, out, d_out, primals, dargs, kwargs)


_GENERIC = object()


def _rule_tangent(rule: Any, i: int, ct: Any, dct: Any, out: Any, d_out: Any,
                  primals: list[Any], dargs: list[Any], kwargs: dict[str, Any]) -> Any:
    """The derivative of a rule by forward mode through its own code (what ``jvp(grad(f))``
    does for every rule)."""
    moving = [j for j, d in enumerate(dargs) if d is not None]
    carried = _rules.carried_pattern(dargs) if type(rule) is _rules.Carried else None
    with_out = d_out is not None
    if isinstance(out, tuple) and type(out) is not tuple:
        # a named tuple (np.linalg.qr's): its rule may read fields by name, and forward mode
        # cannot build one; the nested route differentiates such tapes
        raise _Unsupported

    def call(ct_: Any, *values: Any) -> Any:
        full = _placed(primals, moving, values[1:] if with_out else values)
        out_ = values[0] if with_out else out
        if carried is not None:
            return rule.rule(carried, ct_, out_, *full, **kwargs)
        return rule(ct_, out_, *full, **kwargs)

    if type(out) in (tuple, list):  # several outputs (np.split's are a list): zero for the
        # ones without a cotangent
        ct = tuple([_zero(o) if c is None else c for c, o in zip(ct, out)])
    values = ((out,) if with_out else ()) + tuple([primals[j] for j in moving])
    directions = ((_filled(d_out, out),) if with_out else ()) + tuple(
        [_filled(dargs[j], primals[j]) for j in moving])
    d_ct = _filled(dct, ct) if dct is not None else _zero(ct)
    with _routes.unheard():  # (the rule's forward mode: this route's own work)
        return jvp(call, (ct, *values), (d_ct, *directions))[1]


def _linear(rule: Any, i: int, ct: Any, dct: Any, out: Any, d_out: Any, primals: list[Any],
            dargs: list[Any], kwargs: dict[str, Any]) -> Any:
    """fn linear in its arguments: the rule is linear in the cotangent, free of the values."""
    return None if dct is None else rule(dct, out, *primals, **kwargs)


def _bilinear(rule: Any, i: int, ct: Any, dct: Any, out: Any, d_out: Any, primals: list[Any],
              dargs: list[Any], kwargs: dict[str, Any]) -> Any:
    """fn(x, y) bilinear (x * y, x @ y): rule i is linear in the cotangent and in the other
    argument."""
    if len(primals) != 2:
        return _GENERIC
    other = 1 - i
    part = None if dct is None else rule(dct, out, *primals, **kwargs)
    if dargs[other] is not None:
        moved = list(primals)
        moved[other] = dargs[other]
        part = _sum(part, rule(ct, out, *moved, **kwargs))
    return part


def _quotient(rule: Any, i: int, ct: Any, dct: Any, out: Any, d_out: Any, primals: list[Any],
              dargs: list[Any], kwargs: dict[str, Any]) -> Any:
    """x / c for a fixed c: linear."""
    if i != 0 or len(primals) != 2 or dargs[1] is not None:
        return _GENERIC
    return None if dct is None else rule(dct, out, *primals, **kwargs)


def _power(rule: Any, i: int, ct: Any, dct: Any, out: Any, d_out: Any, primals: list[Any],
           dargs: list[Any], kwargs: dict[str, Any]) -> Any:
    """x ** c for a fixed number c: the rule is ct * (c * x ** (c - 1))."""
    if i != 0 or len(primals) != 2 or dargs[1] is not None or kwargs or \
            type(primals[1]) not in (int, float):
        return _GENERIC
    x, c = primals
    part = None if dct is None else rule(dct, out, *primals)
    dx = dargs[0]
    if dx is not None and c != 1 and c != 0:  # (x ** 0 is constant: no curvature, even at 0)
        curvature = c * (c - 1) * (1.0 if c == 2 else np.power(x, c - 2))
        part = _sum(part, ct * (curvature * dx))
    return part


def _elementwise(curvature: Any) -> Any:
    """fn(x) elementwise with rule ``ct * f'(x)``; ``curvature(x, out)`` is ``f''(x)``, declared
    beside the rules (the tangent of ``f'(x)`` is ``f''(x) * dx``)."""
    def second(rule: Any, i: int, ct: Any, dct: Any, out: Any, d_out: Any, primals: list[Any],
               dargs: list[Any], kwargs: dict[str, Any]) -> Any:
        if len(primals) != 1 or kwargs:
            return _GENERIC
        part = None if dct is None else rule(dct, out, *primals)
        if dargs[0] is not None:
            part = _sum(part, ct * (curvature(primals[0], out) * dargs[0]))
        return part
    return second


# -- tangents, written out ---------------------------------------------------------------------
# tangent(fn, primals, kwargs, out, dargs): the output tangent, or _GENERIC

def _t_linear(partials: tuple[float, float]) -> Any:
    """The tangent of a function linear in its two arguments with the declared constant
    ``partials`` (x + y: (1, 1); x - y: (1, -1)), a unit partial passing the tangent through."""
    px, py = partials

    def term(d: Any, p: float) -> Any:
        return d if p == 1.0 else -d if p == -1.0 else d * p

    def tangent(fn: Any, primals: list[Any], kwargs: dict[str, Any], out: Any,
                dargs: list[Any]) -> Any:
        if len(dargs) != 2 or kwargs:
            return _GENERIC
        dx, dy = dargs
        if dy is None:
            d = term(dx, px)
        elif dx is None:
            d = term(dy, py)
        else:
            d = term(dx, px) + term(dy, py)
        return d if np.shape(d) == np.shape(out) else np.broadcast_to(d, np.shape(out))
    return tangent


def _t_sum(fn: Any, primals: list[Any], kwargs: dict[str, Any], out: Any,
           dargs: list[Any]) -> Any:
    """``sum(items)`` of a list or tuple of numbers: linear, the tangent the sum of the items'
    tangents (None: a fixed item)."""
    if kwargs or len(dargs) != 1 or type(dargs[0]) is not list or \
            type(primals[0]) not in (list, tuple):
        return _GENERIC
    parts = [d for d in dargs[0] if d is not None]
    if not parts or any(type(d) in (list, tuple) for d in parts):
        return _GENERIC
    d = parts[0]
    for part in parts[1:]:
        d = d + part
    return d if np.shape(d) == np.shape(out) else np.broadcast_to(d, np.shape(out))


def _t_stacked(fn: Any, primals: list[Any], kwargs: dict[str, Any], out: Any,
               dargs: list[Any]) -> Any:
    """``np.array(items)`` (``np.asarray``, ``np.stack``) of a list or tuple of numbers or of
    arrays of one shape (recorded as the array NumPy read it as): linear, the tangent the same
    function of the items' tangents (zeros for a fixed item)."""
    if kwargs or len(dargs) != 1 or type(dargs[0]) is not list or \
            not isinstance(primals[0], (list, tuple, np.ndarray)) or \
            np.ndim(primals[0]) == 0 or len(dargs[0]) != len(primals[0]):
        return _GENERIC
    parts = []
    for d, item in zip(dargs[0], primals[0]):
        if type(d) in (list, tuple) or np.shape(d) != np.shape(item):
            return _GENERIC  # (nested lists: the general way)
        parts.append(np.zeros(np.shape(item)) if d is None else d)
    d_out = fn(parts)
    return d_out if np.shape(d_out) == np.shape(out) else _GENERIC


def _t_first(fn: Any, primals: list[Any], kwargs: dict[str, Any], out: Any,
             dargs: list[Any]) -> Any:
    """fn linear in its first argument, the others parameters (an index, a shape, axes)."""
    if any(d is not None for d in dargs[1:]):
        return _GENERIC
    d = dargs[0]
    if type(d) is float and type(primals[0]) is not float:
        d = np.asarray(d)  # (a NumPy scalar's tangent as a number: x[()] of it is NumPy's)
    return fn(d, *primals[1:], **kwargs)


def _t_product(fn: Any, primals: list[Any], kwargs: dict[str, Any], out: Any,
               dargs: list[Any]) -> Any:
    """x * y, x @ y."""
    if len(dargs) != 2 or kwargs:
        return _GENERIC
    x, y = primals
    dx, dy = dargs
    d: Any = None if dx is None else fn(dx, y)
    if dy is not None:
        d = _sum(d, fn(x, dy))
    return d if np.shape(d) == np.shape(out) else np.broadcast_to(d, np.shape(out))


def _t_quotient(fn: Any, primals: list[Any], kwargs: dict[str, Any], out: Any,
                dargs: list[Any]) -> Any:
    """x / c for a fixed c."""
    if len(dargs) != 2 or kwargs or dargs[1] is not None:
        return _GENERIC
    return fn(dargs[0], primals[1])


def _t_power(fn: Any, primals: list[Any], kwargs: dict[str, Any], out: Any,
             dargs: list[Any]) -> Any:
    """x ** c for a fixed number c != 0."""
    if len(dargs) != 2 or kwargs or dargs[1] is not None or \
            type(primals[1]) not in (int, float) or primals[1] == 0:
        return _GENERIC
    x, c = primals
    return dargs[0] * (c * (x if c == 2 else np.power(x, c - 1)))


def _t_elementwise(derivative: Any) -> Any:
    """fn(x) elementwise with f'(x) = ``derivative(x, out)``."""
    def tangent(fn: Any, primals: list[Any], kwargs: dict[str, Any], out: Any,
                dargs: list[Any]) -> Any:
        if len(dargs) != 1 or kwargs:
            return _GENERIC
        return dargs[0] * derivative(primals[0], out)
    return tangent


def _kinds() -> dict[int, tuple[Any, ...]]:
    """``id(fn) -> (fn, the reverse rules it is for, how their derivative is taken)``: the
    shipped rules, of the functions whose rules are still the shipped ones (a function the
    user registered a rule for is differentiated by forward mode through that rule)."""
    table: dict[int, tuple[Any, ...]] = {}

    def add(fns: Any, how: Any, tangent: Any, rules: Any = None) -> None:
        for fn in fns:
            if fn is not None and (fn is _write or _rules.is_shipped(fn)):
                found = rules if rules is not None else _rules.vjp_rules(fn)
                if found is not None:
                    table[id(fn)] = (fn, (found,), how, tangent)

    # the arithmetic operators, by the shape of their partials declared beside their rules
    for fn in (operator.add, np.add, operator.sub, np.subtract, operator.mul, np.multiply,
               operator.truediv, np.true_divide):
        shape = _rules.scalar_shape(fn)
        if type(shape) is tuple:
            add((fn,), _linear, _t_linear(shape))
        elif shape is _rules.BILINEAR:
            add((fn,), _bilinear, _t_product)
        elif shape is _rules.QUOTIENT:
            add((fn,), _quotient, _t_quotient)
    add((operator.neg, np.negative, operator.pos, np.positive, operator.getitem, np.sum,
         np.mean, np.reshape, np.transpose, np.ravel, np.squeeze, np.expand_dims,
         np.broadcast_to, np.swapaxes, np.moveaxis, np.cumsum, np.real, _NP_UNSTACK, float),
        _linear, _t_first)
    add((np.concatenate,), _linear, None)
    add((np.array, np.asarray, np.stack), _linear, _t_stacked)
    add((sum,), _linear, _t_sum)
    add((_write,), _linear, None, _WRITE_VJPS)
    add((operator.matmul, np.matmul), _bilinear, _t_product)
    for fn in (operator.pow, np.power):  # shipped, or its quick rule for a constant exponent
        quick = _rules.quick(fn)
        if _rules.scalar_shape(fn) is _rules.POWER and quick is not None:
            table[id(fn)] = (fn, (_rules.vjp_rules(fn), quick[1]), _power, _t_power)
    for fn, first, second in _rules.declared_elementwise().values():
        add((fn,), _elementwise(second), _t_elementwise(first))
    return table


_KINDS: dict[int, tuple[Any, ...]] = {}


@_rules.on_change
def _rebuild_kinds() -> None:
    _KINDS.clear()
    _KINDS.update(_kinds())
