"""Forward mode's public functions: ``jvp``, ``derivative``/``D``, ``jacfwd``; each tries
the dual route first (see :mod:`overdub_ad._routes`)."""

from __future__ import annotations

import functools
import numbers
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from overdub import (Tagged, current_context, hide_machinery, keeps_heap_metadata, opaque, overdub,
                     tag, untag)

from .. import _arrays, _routes, _rules
from .._pytree import flatten, is_node, ordered_as, reveal_node, unflatten
from .._shared import (check_argnums, check_leaves, _check_differentiated, _check_output, _entry,
                       _forward_entry, _innermost, _normalize_argnums, not_differentiable,
                       not_differentiable_error, _numeric, _own_precision, _OWN_CODE,
                       _untag_bindings, _zero)
from . import _dual
from ._dual_numbers import _Dual
from ._context import ForwardContext


def _seed(ctx: ForwardContext, x: Any, dx: Any) -> Any:
    if not _numeric(x):
        raise TypeError(f"jvp: cannot differentiate with respect to a {type(x).__name__} "
                        f"(expected floats, complex numbers or arrays)")
    return tag(x, ctx, dx)


def _tangent_of(ctx: ForwardContext, y: Any, batch: tuple[int, ...] = ()) -> Any:
    """The tangent of an output leaf: its own, or a zero of its shape (None for leaves that
    are not numbers or arrays)."""
    tangent = ctx._tangent(y)
    if tangent is not None:
        return tangent
    return _zero(y, batch)  # None for leaves that are not numbers or arrays


def _revealed(ctx: ForwardContext, tree: Any) -> Any:
    """``tree`` with the lists and dicts in it re-reading their members through the context,
    so that values the core stored plainly (``out.append(t)``, ``d[k] = t``) keep their
    tangents when they are returned."""
    kind = type(tree)
    if kind is list:
        return [_revealed(ctx, e) for e in ctx.fallback(operator.getitem, tree, slice(None))]
    if kind is tuple:  # (one stored into the heap, an attribute: its members kept aside)
        return tuple(_revealed(ctx, e) for e in (
            [ctx.fallback(operator.getitem, tree, i) for i in range(len(tree))]
            if keeps_heap_metadata(ctx, tree) else tree))
    if kind is dict:
        return {k: _revealed(ctx, ctx.fallback(operator.getitem, tree, k)) for k in tree}
    return reveal_node(tree, ctx.overdub, lambda child: _revealed(ctx, child))  # a dataclass...


@opaque
def _call_and_reveal(ctx: ForwardContext, f: Callable[..., Any], *args: Any
                     ) -> tuple[Any, dict[int, Any]]:
    """``f(*args)`` under ``ctx``, its output revealed while the run still holds the heap's
    metadata (the core keeps it for the run only); and, by ``id``, the tangents of its leaves
    that are arrays written in place, read while the run lasts too, so that an enclosing
    derivative sees those reads.  Called inside ``ctx``'s run: the call of ``f`` is one more
    step of it (``ctx.overdub``), not a new run."""
    try:
        out = ctx.overdub(f, *args)
    except BaseException:
        ctx._release_stores()  # (f raised: containers get plain values back all the same)
        raise
    if callable(out) and not _numeric(out):
        ctx._release_stores()  # containers from outside get plain values back
        return out, {}
    out = _revealed(ctx, out)
    written = {id(y): ctx._tangent(y) for y in flatten(out)[0]
               if ctx.arrays and isinstance(_innermost(y), np.ndarray)
               and ctx.arrays.has(_innermost(y))}
    ctx._release_stores()
    return out, written


def _jvp(f: Callable[..., Any], primals: tuple[Any, ...], tangents: tuple[Any, ...],
         batch: tuple[int, ...] = (), api: str = "jvp") -> tuple[Any, Any]:
    if not all(type(p) is float or (type(p) is np.ndarray and p.dtype.kind in "fc")
               for p in primals):
        _refuse_truth_values(primals, tangents, api)
        primals = _real_points(primals, tangents)
    if not all(type(t) is float or (type(t) is np.ndarray and t.dtype.kind in "fc")
               for t in tangents):
        tangents = _real_points(tangents, tangents)  # (an integer direction: as floats)
    return _routes.first(_ROUTES[api], f, f, primals, tangents, batch)


def _real_points(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Any, ...]:
    """The primals, each integer leaf that has a tangent made floating point: a derivative at
    an integer point is the derivative of the function at that point of the real line, as
    reverse mode takes it (``reverse._sweep._seed``), so NumPy's integer dtypes -- an integer
    array that truncates what is written into it, ``p.copy()`` of an integer ``p`` -- do not
    change the function differentiated, and both modes run the same computation; an integer
    direction is one of floats too (``_real_points(tangents, tangents)``).  (An enclosing
    derivative's value is left as it is: that derivative made it floats.)"""
    out = []
    for p, t in zip(primals, tangents):
        leaves, tree = flatten(p)
        dleaves = flatten(t)[0] if len(flatten(t)[0]) == len(leaves) else [None] * len(leaves)
        out.append(unflatten(tree, [
            _arrays.to_float(x) if d is not None and _integer_point(x) and not _zero_direction(d)
            else x for x, d in zip(leaves, dleaves)]))
    return tuple(out)


def _refuse_truth_values(primals: tuple[Any, ...], tangents: tuple[Any, ...], api: str) -> None:
    """A bool (or bool array) given a direction is refused, as reverse mode refuses it; with a
    zero direction it is held as it is, as an integer leaf is (see :func:`_zero_direction`)."""
    for p, t in zip(primals, tangents):
        leaves = flatten(p)[0]
        dleaves = flatten(t)[0]
        if len(dleaves) != len(leaves):
            continue  # (the structures differ: the routes say so)
        for x, d in zip(leaves, dleaves):
            if d is not None and not _zero_direction(d) and \
                    isinstance(_innermost(x), (bool, np.bool_, np.ndarray)):
                what = not_differentiable(x)
                if what is not None:
                    raise not_differentiable_error(what, api)


def _zero_direction(d: Any) -> bool:
    """A zero direction: the integer leaf it goes with is held as it is, as JAX holds an
    integer leaf whose tangent is float0 (LU pivots, indices given beside the numbers a
    derivative moves: as floats they could not index)."""
    if type(d) is np.ndarray:
        return not d.any()
    return np.ndim(d) == 0 and d == 0


def _integer_point(x: Any) -> bool:
    """An integer (not a bool) or an array of integers, of no enclosing context."""
    return (type(x) is int or isinstance(x, np.integer) or
            (type(x) is np.ndarray and x.dtype.kind in "iu"))


def _structures_differ(primals: Sequence[Any], tangents: Sequence[Any], api: str = "jvp") -> str:
    """What is wrong where the tangents do not have the primals' structure: the argument whose
    tangent differs (a list given for an array is a pytree of numbers, not an array; a list
    for a tuple is another structure, as in JAX).  ``api`` names the function called."""
    if len(primals) != len(tangents):
        return (f"{api}: primals and tangents differ in structure: {len(primals)} primals but "
                f"{len(tangents)} tangents (one tangent per argument of f)")
    for i, (p, t) in enumerate(zip(primals, tangents)):
        tree, dtree = flatten(p)[1], flatten(t)[1]
        if len(flatten(p)[0]) != len(flatten(t)[0]) or tree != dtree:
            hint = (f"; a {type(t).__name__} is a pytree of numbers, not an array: give "
                    f"np.asarray(...)" if isinstance(t, (list, tuple)) and
                    not isinstance(p, (list, tuple, dict)) else "")
            return (f"{api}: the tangent of argument {i} has structure {dtree}, its primal "
                    f"{tree}{hint}")
    return f"{api}: primals and tangents differ in structure"


def _general_jvp(f: Callable[..., Any], primals: tuple[Any, ...], tangents: tuple[Any, ...],
                 batch: tuple[int, ...] = (), api: str = "jvp") -> tuple[Any, Any]:
    """:func:`_jvp` by the general mode: tagged values in a fresh :class:`ForwardContext`
    (``api`` names the entry point in errors)."""
    ctx = ForwardContext()
    ctx.nested = current_context() is not None
    if not ctx.nested and _routes.enabled("forward-dual"):
        ctx.helpers = (_dual.helper_arguments, _dual.helper_call, _dual.run_helper,
                       _dual.NOT_RUN, batch)
    leaves, tree = flatten(list(primals))
    dleaves, dtree = flatten(list(tangents))
    if len(dleaves) != len(leaves):
        raise ValueError(_structures_differ(primals, tangents, api))
    if batch == (1,) and _one_number_direction(leaves, dleaves):
        # one direction of numbers (jacfwd of a function of a float): computed as numbers, as
        # derivative computes it -- an array of one would make a zero tangent's term
        # 0 * inf = nan where the number's is exactly 0 (see _tangents._exactly_zero)
        out, tangent = _general_jvp(f, primals, unflatten(dtree, [
            None if d is None else d[0].item() for d in dleaves]), (), api)
        return out, _with_batch_of_one(tangent)
    seeded = unflatten(tree, [x if dx is None else _seed(ctx, x, dx)
                              for x, dx in zip(leaves, dleaves)])
    try:
        out, written = overdub(ctx, _call_and_reveal, ctx, f, *seeded)
    finally:
        _untag_bindings(ctx, f)
    if callable(out) and not _numeric(out):
        _untag_bindings(ctx, out)  # the primal: a closure of plain values, like any other output
        return out, _FunctionDerivative(f, primals, tangents)
    outs, otree = flatten(out)
    _untag_bindings(ctx, *outs)
    if len(outs) == 1 and outs[0] is out:  # (tagged by an enclosing derivative: carried too)
        _check_differentiated(out, type(out) is Tagged or id(out) in written, api)
    values = [untag(y, ctx) for y in outs]
    derivs = [_FunctionDerivative(_output_leaf(f, i), primals, tangents)
              if callable(y) and not _numeric(y) else
              written[id(y)] if id(y) in written else _tangent_of(ctx, y, batch)
              for i, y in enumerate(outs)]
    return unflatten(otree, values), unflatten(otree, derivs)


def _one_number_direction(leaves: list[Any], dleaves: list[Any]) -> bool:
    """Whether the tangents ``dleaves`` of ``leaves`` are one direction (a batch of one) of
    float64 or complex128 numbers, no context running (whose values they could be)."""
    return current_context() is None and all(
        d is None or (type(d) is np.ndarray and d.shape == (1,)
                      and d.dtype in (np.float64, np.complex128)
                      and type(x) in (float, int, complex, np.float64, np.complex128))
        for x, d in zip(leaves, dleaves))


def _with_batch_of_one(tangent: Any) -> Any:
    """The output tangents of one direction given back its batch dimension."""
    leaves, tree = flatten(tangent)
    return unflatten(tree, [t if t is None or isinstance(t, _FunctionDerivative) else
                            np.asarray(t)[None] for t in leaves])


# jvp's routes, in order (see _routes.first), for each entry point the reference's errors name:
# the dual route (scalar code run as its dual) takes the arguments as they are, without a frame
# of its own (nested derivatives pass here once per level)
_ROUTES = {api: (("forward-dual", _dual.jvp),
                 (_routes.REFERENCE, functools.partial(_general_jvp, api=api)))
           for api in ("jvp", "derivative", "jacfwd")}
_DERIVATIVE_ROUTES = _ROUTES["derivative"]


def _output_leaf(f: Callable[..., Any], i: int) -> Callable[..., Any]:
    """``f`` narrowed to leaf ``i`` of its output pytree: a function among the leaves (a pair
    of closures, DVL's "amazing bug two") is differentiated on its own, lazily."""
    return lambda *xs: flatten(f(*xs))[0][i]


@_dual.nestable
@opaque
@_forward_entry
def jvp(f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any],
        has_aux: bool = False) -> tuple[Any, ...]:
    """``(f(*primals), J_f(primals) @ tangents)``: value and directional derivative.

    ``primals`` and ``tangents`` are sequences (one entry per argument of ``f``) of pytrees of
    floats, complex numbers and arrays with matching structure (``None`` for a leaf that is
    not differentiated).  Forward mode: one pass.  A tangent may carry extra leading batch
    dimensions (several directions at once, as :func:`jacfwd` does).  With complex numbers the
    tangent is the real-linear directional derivative: ``f'(z) * t`` for a holomorphic ``f``.
    With ``has_aux=True``, ``f`` returns ``(output, aux)`` and ``jvp`` returns ``(output,
    tangent, aux)``, ``aux`` not differentiated (JAX's API).

    Example::

        jvp(math.sin, (1.0,), (1.0,))   # (sin(1), cos(1))

    See also: :func:`derivative`, :func:`jacfwd`, :func:`check_grads`.
    """
    if not callable(f):
        raise TypeError(f"jvp: f must be callable, got {f!r}")
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("jvp(f, primals, tangents): primals and tangents must be tuples or lists "
                        "with one entry per argument of f")
    leaves, tree = flatten(list(primals))
    dleaves, dtree = flatten(list(tangents))
    if dtree != tree:  # (a dict's items in another order: the same pytree, as in JAX)
        tangents = ordered_as(tree, list(tangents))
        dleaves, dtree = flatten(list(tangents))
    if len(dleaves) != len(leaves) or dtree != tree:  # (a list for a tuple too: JAX refuses it)
        raise ValueError(_structures_differ(primals, tangents))
    batches = set()
    for x, dx in zip(leaves, dleaves):
        if dx is None or not _numeric(x):
            continue
        if _arrays.is_complex(dx) and not _arrays.is_complex(x):
            # (the derivative along an imaginary direction of a real argument: no direction
            # the function has; JAX refuses it too.  An integer direction is taken as floats)
            raise TypeError(f"jvp: a complex tangent for a real primal (a {_dtype_name(x)}); "
                            f"give a real tangent, or a complex primal for a complex direction")
        shape, dshape = np.shape(x), np.shape(dx)
        batch = len(dshape) - len(shape)  # leading directions (see above)
        if batch < 0 or dshape[batch:] != shape:
            raise ValueError(f"jvp: a tangent of shape {dshape} for a primal of shape {shape} "
                             f"(the shapes must match, after any leading batch dimensions)")
        batches.add(dshape[:batch])
    if len(batches) > 1:
        raise ValueError(f"jvp: the tangents' leading batch dimensions differ: "
                         f"{sorted(batches)}")
    out, tangent = _jvp(f, tuple(primals), tuple(tangents))
    if out.__class__ is not tangent.__class__ or out.__class__ in _CONTAINERS:
        tangent = _typed_like(out, tangent)
    if has_aux:
        _check_pair(out, "jvp")
        check_leaves(out[0], "jvp")
        return out[0], tangent[0], out[1]
    check_leaves(out, "jvp")
    return out, tangent


_SCALARS = (float, complex, np.floating, np.complexfloating)
_CONTAINERS = frozenset((tuple, list, dict))


def _typed_like(out: Any, tangent: Any) -> Any:
    """``tangent`` with each number leaf of the type of its output leaf: a Python float's
    tangent a float, a NumPy scalar's a NumPy scalar of its type (not a 0-d array, whatever
    the route computed it as), as the output and its tangent are one kind of value in JAX."""
    if isinstance(out, _SCALARS) and not isinstance(out, bool):
        t: Any = tangent[()] if type(tangent) is np.ndarray and tangent.ndim == 0 else tangent
        if not (isinstance(t, numbers.Number) or isinstance(t, np.generic)) or (
                np.iscomplexobj(tangent) and not np.iscomplexobj(out)):
            return tangent
        kind: Any = type(out)
        return kind(t)
    if type(out) in _CONTAINERS or is_node(out):
        leaves, tree = flatten(out)
        dleaves, dtree = flatten(tangent)
        if len(leaves) != len(dleaves):
            return tangent
        return unflatten(dtree, [d if d is None or d.__class__ is y.__class__ else
                                 _typed_like(y, d) for y, d in zip(leaves, dleaves)])
    return tangent


def _check_pair(out: Any, api: str) -> None:
    if not (isinstance(out, tuple) and len(out) == 2):
        raise TypeError(f"{api}(has_aux=True): f must return a pair (output, auxiliary data), "
                        f"got {type(_innermost(out)).__name__}")  # (the user's type, not a
        # tag an enclosing derivative put on it)


class _FunctionDerivative:
    """The derivative of a function-valued function, applied lazily (a fresh tag per call)."""

    def __init__(self, f: Callable[..., Any], primals: tuple[Any, ...],
                 tangents: tuple[Any, ...]) -> None:
        self.f, self.primals, self.tangents = f, primals, tangents

    @opaque
    @_entry
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        f = self.f
        return _jvp(lambda *xs: f(*xs)(*args, **kwargs), self.primals, self.tangents,
                    api="derivative")[1]


@_dual.nestable
@opaque
def derivative(f: Callable[..., Any], x: Any = None, /) -> Any:
    """``f'(x)`` for a function of one argument; ``derivative(f)`` is the function ``f'``.

    ``x`` is a float, a complex number or an array (elementwise directional derivative along
    ones).  ``D`` is the same function.  A function-valued ``f`` gets a function-valued
    derivative, correct under any nesting.

    Complex ``x``: for a holomorphic ``f`` this is the complex derivative ``f'(z)``.  For any
    other ``f`` it is the directional derivative along the real axis, ``df/dx`` at
    ``z = x + iy`` (``= df/dz + df/dz*``); ``jvp(f, (z,), (1j,))`` gives ``df/dy``.

    Example::

        D(lambda x: x * D(lambda y: x * y, 3.0), 5.0)   # 10.0
    """
    made, token = _rules.running_derivative()  # (see _rules.caught_missing)
    failed = False
    try:  # (not _forward_entry's wrapper: one frame less per nested level)
        if not callable(f):
            raise TypeError(f"derivative: f must be callable, got {f!r}")
        if x is None:
            def of(*xs: Any) -> Any:
                if len(xs) != 1:
                    raise TypeError(
                        f"derivative({_rules._name(f)}) is the derivative of a function of one "
                        f"argument, called with {len(xs)}: for several use jvp(f, primals, "
                        f"tangents), or grad/jacfwd with argnums")
                return derivative(f, xs[0])
            # named as f, inside too
            return _dual.nestable(functools.wraps(f)(opaque(_forward_entry(
                functools.wraps(f)(of)))))
        if type(x) is float:  # the common case, without the questions arrays need (nor _jvp's
            # frame: nested derivatives pass here once per level)
            out, tangent = _routes.first(_DERIVATIVE_ROUTES, f, f, (x,), (1.0,), ())
            if out.__class__ is not float and out.__class__ is not _Dual:  # (a nested level's
                _check_output(out, "derivative")  # dual is a number: nothing to check)
                if out.__class__ is not tangent.__class__:
                    return _typed_like(out, tangent)
            return tangent
        plain = _innermost(x)
        if isinstance(plain, (list, tuple, dict)) or is_node(plain):
            raise TypeError(f"derivative: x must be a float, a complex number or an array, got "
                            f"a {type(plain).__name__} (np.asarray(x) for an array of its "
                            f"numbers; jvp or jacfwd for a pytree)")
        one: Any
        if isinstance(plain, np.ndarray):
            one = np.ones(plain.shape, _own_precision(plain))
        elif _arrays.is_foreign_array(plain):  # in the array's namespace
            one = _arrays.one_like(plain if _arrays.kind(plain) in "fc"
                                   else _arrays.to_float(plain))
        else:
            one = 1.0 + 0j if isinstance(plain, complex) else 1.0
        out, tangent = _jvp(f, (x,), (one,), api="derivative")
        _check_output(out, "derivative")
        return tangent if out.__class__ is tangent.__class__ else _typed_like(out, tangent)
    except BaseException as exc:
        failed = True
        hide_machinery(exc, _OWN_CODE)
        raise
    finally:
        _rules._RUNNING.reset(token)
        if made and not failed:  # (a MissingRuleError the program caught)
            raise _rules.caught_missing(made)


D = derivative


@opaque
@_entry
def jacfwd(f: Callable[..., Any], argnums: int | tuple[int, ...] = 0,
           chunk: int | None = None, has_aux: bool = False,
           holomorphic: bool = False) -> Callable[..., Any]:
    """The Jacobian of ``f`` with respect to argument(s) ``argnums``, by forward mode.

    Tangents carry ``chunk`` directions at once (ForwardDiff's chunks; default: all inputs in
    one pass), so an ``n``-input Jacobian costs ``ceil(n / chunk)`` passes.  For an output leaf
    ``y`` and input ``x`` the result has shape ``y.shape + x.shape`` (JAX's convention); a
    pytree output gives the same pytree of Jacobians, a tuple ``argnums`` a tuple of them.
    With ``has_aux=True``, ``f`` returns ``(output, aux)`` and the Jacobian function returns
    ``(jacobian, aux)``, ``aux`` not differentiated (JAX's API).  Keyword arguments of the
    call pass to ``f`` and are not differentiated.

    Complex inputs need ``holomorphic=True`` (as in JAX), which gives the complex derivatives
    ``df_i/dz_j`` of a holomorphic ``f`` and requires complex inputs and outputs: for any
    other ``f`` a forward pass gives the derivative along the real axis only, which is no
    Jacobian (``jacrev`` of a real-valued ``f`` gives ``df/dx - i df/dy``, as ``grad``;
    ``jvp`` along ``1`` and ``1j`` gives both directional derivatives).

    Example::

        jacfwd(np.sin)(np.zeros(3))   # the identity matrix

    See also: :func:`jvp`.
    """
    if not callable(f):
        raise TypeError(f"jacfwd: f must be callable, got {f!r}")
    argnums = check_argnums("jacfwd", argnums)
    multiple = isinstance(argnums, tuple)
    if chunk is not None and (not isinstance(chunk, numbers.Integral) or
                              isinstance(chunk, bool)):
        raise TypeError(f"jacfwd: chunk must be an int (the directions per pass) or None, got "
                        f"{chunk!r}")
    if chunk is not None and chunk < 1:
        raise ValueError(f"jacfwd: chunk must be a positive number of directions, got {chunk}")

    @opaque
    @_entry
    def jacobian(*args: Any, **kwargs: Any) -> Any:
        nums = _normalize_argnums(argnums, len(args), "jacfwd")
        _check_complex_inputs(args, nums, holomorphic)
        # (keyword arguments are not differentiated: f with them bound)
        g = f if not kwargs else lambda *xs: f(*xs, **kwargs)
        outputs: list[Any] = []  # (the primal output of the first pass)
        passes = _Passes(args, chunk is not None or len(nums) > 1)
        results = [_jacobian_wrt(g, args, num, chunk, outputs,
                                 tuple(other for other in nums if other != num), has_aux,
                                 passes)
                   for num in nums]
        out_tree, _ = results[0]
        # as jacrev and JAX: the output's structure outside, a tuple over argnums per leaf
        # (so hessian(f, argnums=(0, 1))[0][1] is d/d(args[1]) of the gradient in args[0])
        if holomorphic:
            _check_complex_outputs(outputs[0][0] if has_aux else outputs[0])
        per_output = [None if results[0][1][i] is None else  # (an output leaf None: None)
                      tuple(blocks[i] for _, blocks in results) if multiple else
                      results[0][1][i] for i in range(len(results[0][1]))]
        jacobians = unflatten(out_tree, per_output)
        return (jacobians, outputs[0][1]) if has_aux else jacobians

    return jacobian


def _check_complex_inputs(args: tuple[Any, ...], nums: tuple[int, ...], holomorphic: bool,
                          api: str = "jacfwd") -> None:
    """JAX's rule for jacfwd's inputs: complex ones only with ``holomorphic=True``, and then
    only complex ones.  A forward pass along the unit directions of a complex input gives the
    derivative along the real axis, ``df/dx``, which is the Jacobian only for a holomorphic
    ``f``: for any other (``abs(z) ** 2``) it would silently disagree with ``jacrev``.
    ``api`` names the function called (``hessian`` checks through it too)."""
    for num in nums:
        for leaf in flatten(args[num])[0]:
            if leaf is None or not _numeric(leaf):
                continue  # (what is not a number: _jacobian_wrt says so)
            if _arrays.is_complex(leaf) and not holomorphic:
                raise TypeError(
                    f"{api} of a function of complex inputs (argument {num}): pass "
                    f"holomorphic=True for the complex Jacobian df/dz of a holomorphic f; for "
                    f"any other f, jvp along 1 and 1j gives df/dx and df/dy, and jacrev of a "
                    f"real-valued f gives df/dx - i df/dy (as grad)")
            if holomorphic and not _arrays.is_complex(leaf):
                raise TypeError(f"{api}(holomorphic=True) requires complex inputs, got "
                                f"{_dtype_name(leaf)} (argument {num})")


def _dtype_name(x: Any) -> str:
    plain = _innermost(x)
    return str(getattr(plain, "dtype", type(plain).__name__))


def _check_complex_outputs(out: Any) -> None:
    """With ``holomorphic=True`` the outputs are complex too (JAX's rule): a real output of a
    complex input is no holomorphic function (unless it is constant)."""
    for leaf in flatten(out)[0]:
        plain = _innermost(leaf)
        if _arrays.is_numeric(plain) and not _arrays.is_complex(plain):
            raise TypeError(f"jacfwd(holomorphic=True) requires complex outputs, got "
                            f"{_dtype_name(plain)}")


def _jacobian_wrt(f: Callable[..., Any], args: tuple[Any, ...], num: int,
                  chunk: int | None, outputs: list[Any] | None = None,
                  others: tuple[int, ...] = (), has_aux: bool = False,
                  passes: _Passes | None = None) -> tuple[Any, list[Any]]:
    """The Jacobian with respect to ``args[num]``, as ``(output tree, one block per output
    leaf)``.  For a pytree argument (a tuple, dict, named tuple, dataclass...) each block is the
    argument's structure of one Jacobian per leaf (JAX's arrangement: the output's structure
    outside, the argument's inside).  The directions of all its leaves are pushed together,
    ``ceil(n / chunk)`` forward passes of batched unit directions over the ``n`` numbers of
    the argument: one pass by default, so a function with state (a random generator, a
    counter) gives every column from the same call; the first pass's primal output is
    appended to ``outputs`` if that is empty.  The arguments ``others`` (the other argnums of
    a tuple) are differentiated too, with zero tangents: what depends on whether an argument
    is differentiated -- a tie of ``max(x, y)``, split between two differentiated candidates,
    won by a constant -- is as in one derivative in all of them (jacrev's, grad's), and a zero
    tangent of a number is exactly zero (no nan from an infinite partial in the other).  With
    ``has_aux``, ``f`` returns ``(output, aux)``: the Jacobian is the output's, and the aux
    (returned as it is, as grad's and jacrev's) may be any object.  Each pass starts from the
    arguments ``passes`` gives it (see :class:`_Passes`)."""
    if passes is None:
        passes = _Passes(args, chunk is not None)
    leaves, tree = flatten(args[num])
    single = len(leaves) == 1 and leaves[0] is args[num]  # a number or an array
    plains = [None if leaf is None else _innermost(leaf) for leaf in leaves]
    for plain in plains:
        if plain is not None and not _numeric(plain):
            raise TypeError(f"jacfwd: argument {num} is or holds a {type(plain).__name__}, "
                            f"expected a float, complex number or array")
    if all(plain is None for plain in plains):
        # an empty pytree, as in JAX: nothing to differentiate
        raise TypeError(f"jacfwd: argument {num} has nothing to differentiate ({tree})")
    shapes = [() if plain is None else np.shape(plain) for plain in plains]
    sizes = [0 if plain is None else int(np.prod(shape, dtype=int))
             for plain, shape in zip(plains, shapes)]
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(int)
    n = int(offsets[-1])
    k = n if chunk is None else max(1, min(chunk, n))
    blocks: list[list[Any]] = []
    out_tree = None
    for start in range(0, max(n, 1), max(k, 1)):
        stop = min(start + k, n)
        seeds = [None if plain is None else _directions(plain, shape, start, stop, lo, size)
                 for plain, shape, lo, size in zip(plains, shapes, offsets, sizes)]
        tangents: list[Any] = [_no_tangent(a) for a in args]
        for other in others:  # (zero directions: lo past the batch's last one)
            other_leaves, other_tree = flatten(args[other])
            zeros = [None if leaf is None or not _numeric(_innermost(leaf)) else
                     _directions(_innermost(leaf), np.shape(_innermost(leaf)), start, stop, stop,
                                 int(np.prod(np.shape(_innermost(leaf)), dtype=int)))
                     for leaf in other_leaves]  # (what is not a number: its own pass says)
            tangents[other] = zeros[0] if len(other_leaves) == 1 and \
                other_leaves[0] is args[other] else unflatten(other_tree, zeros)
        tangents[num] = seeds[0] if single else unflatten(tree, seeds)
        out, tangent = _jvp(f, passes.next(), tuple(tangents), batch=(stop - start,),
                            api="jacfwd")
        if has_aux:
            _check_pair(out, "jacfwd")
            tangent = tangent[0]
        _check_output(out[0] if has_aux else out, "jacfwd")
        if outputs is not None and not outputs:
            outputs.append(out)
        out_leaves, out_tree = flatten(tangent)
        blocks.append(out_leaves)
    assert out_tree is not None  # the loop ran at least once

    def block(i: int) -> Any:
        if isinstance(blocks[0][i], _FunctionDerivative):
            return _FunctionJacobian(_output_leaf(f, i), args, num, chunk)
        if blocks[0][i] is None:  # an output leaf None (an empty pytree): its Jacobian is
            return None  # None, whatever the argument (as JAX's, and jacrev's)
        per_leaf = [None if plain is None else
                    _assembled([b[i] for b in blocks], shape, lo, lo + size)
                    for plain, shape, lo, size in zip(plains, shapes, offsets, sizes)]
        return per_leaf[0] if single else unflatten(tree, per_leaf)
    return out_tree, [block(i) for i in range(len(blocks[0]))]


class _Passes:
    """The arguments of a Jacobian's forward passes: the caller's for the first, and for each
    later one, copies of the NumPy arrays they held before the first (in fresh lists, tuples,
    dicts: the arguments' pytrees rebuilt), so that a function that writes into its argument
    (``u *= 2``) is differentiated at the point it was given in every pass, and the caller's
    arrays end as one call of the function leaves them.  ``several``: whether more than one
    pass may run (else nothing is copied)."""

    def __init__(self, args: tuple[Any, ...], several: bool) -> None:
        self.args = args
        self.first = True
        self.kept: list[tuple[bool, list[Any], Any]] | None = None
        trees = [(a, *flatten(a)) for a in args]
        if several and any(type(_innermost(leaf)) is np.ndarray for _, leaves, _ in trees
                           for leaf in leaves):
            made: dict[int, Any] = {}
            self.kept = [(len(leaves) == 1 and leaves[0] is a, _copies(leaves, made), tree)
                         for a, leaves, tree in trees]

    def next(self) -> tuple[Any, ...]:
        """The arguments of the next pass."""
        if self.first or self.kept is None:
            self.first = False
            return tuple(self.args)
        made: dict[int, Any] = {}
        return tuple(copies[0] if single else unflatten(tree, copies)
                     for single, leaves, tree in self.kept
                     for copies in (_copies(leaves, made),))


def _copies(leaves: list[Any], made: dict[int, Any]) -> list[Any]:
    """``leaves`` with each NumPy array copied (once: an array given twice, ``f(u, u)``, is
    one copy given twice)."""
    out = []
    for leaf in leaves:
        if type(_innermost(leaf)) is np.ndarray:
            copy = made.get(id(leaf))
            if copy is None:  # (an enclosing derivative's array: copied where it sees it)
                copy = made[id(leaf)] = leaf.copy() if type(leaf) is np.ndarray else \
                    overdub(ForwardContext(), np.copy, leaf)
            leaf = copy
        out.append(leaf)
    return out


def _directions(plain: Any, shape: tuple[int, ...], start: int, stop: int, lo: int,
                size: int) -> Any:
    """The tangent of the leaf holding the numbers ``lo .. lo + size`` of its argument, for
    the unit directions ``start .. stop`` of all of them: ``(stop - start,) + shape``."""
    if _arrays.is_foreign_array(plain):  # the directions live in the argument's namespace
        return _arrays.directions(plain, start - lo, stop - lo)
    seed = np.zeros((stop - start, size), _own_precision(plain))
    first, last = max(start, lo), min(stop, lo + size)
    if first < last:
        seed[np.arange(first - start, last - start), np.arange(first - lo, last - lo)] = 1.0
    return seed.reshape((stop - start,) + shape)


def _no_tangent(x: Any) -> Any:
    """The tangent of an argument held fixed: None for each of its leaves (labels given as a
    list, ``[0, 1]``, are two leaves)."""
    leaves, tree = flatten(x)
    return None if len(leaves) == 1 and leaves[0] is x else unflatten(tree, [None] * len(leaves))


class _FunctionJacobian:
    """The Jacobian of a function-valued output: a function, applied lazily like
    :class:`_FunctionDerivative` (``y -> jacfwd(x -> f(x)(y))(x0)``)."""

    def __init__(self, f: Callable[..., Any], args: tuple[Any, ...], num: int,
                 chunk: int | None) -> None:
        self.f, self.args, self.num, self.chunk = f, args, num, chunk

    @opaque
    @_entry
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        f = self.f
        out_tree, blocks = _jacobian_wrt(lambda *xs: f(*xs)(*args, **kwargs), self.args,
                                         self.num, self.chunk)
        return unflatten(out_tree, blocks)


def _assembled(blocks: list[Any], shape: tuple[int, ...], lo: int, hi: int) -> Any:
    """:func:`_assemble` through a context of its own where another context is running, so
    that an enclosing derivative sees it (the tangents may be its differentiated values).  With
    none running, NumPy arrays have no tangent that anything could see: they are assembled
    natively (what that context would compute, without its dispatch on every call)."""
    if current_context() is None and all(type(b) is np.ndarray for b in blocks):
        return _assemble(blocks, shape, lo, hi)
    return overdub(ForwardContext(), _assemble, blocks, shape, lo, hi)


def _assemble(blocks: list[Any], shape: tuple[int, ...], lo: int, hi: int) -> Any:
    """Columns ``(k, *out.shape)`` of several passes, the directions ``lo .. hi`` of them (one
    leaf's), as a Jacobian ``out.shape + x.shape``.  Run under a context so that an enclosing
    derivative sees it (the tangents may be its differentiated values)."""
    block = np.concatenate(blocks, axis=0) if len(blocks) > 1 else blocks[0]
    if lo != 0 or hi != np.shape(block)[0]:
        block = block[lo:hi]
    block = np.moveaxis(block, 0, -1)
    return np.reshape(block, np.shape(block)[:-1] + shape)
