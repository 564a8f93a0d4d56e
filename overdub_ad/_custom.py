"""``custom_vjp`` and ``custom_jvp``: functions that carry the user's own derivative rule."""

from __future__ import annotations

import functools
import inspect
import operator
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from overdub import Tagged

from . import _arrays, _rules
from ._pytree import flatten, unflatten
from ._shared import _F, cell_values, _HEAPTYPE, _innermost


class custom_vjp:
    """A function with a user-defined reverse rule (JAX's API).

    ``fwd(*args) -> (out, residuals)`` runs instead of ``fn`` when differentiated in reverse
    mode; ``bwd(residuals, ct) -> tuple of cotangents`` (one per positional argument, ``None``
    for none).  Forward mode differentiates ``fn`` itself.  ``nondiff_argnums``: positions of
    arguments that are not differentiated (a function, a size, a flag), given to ``bwd`` first,
    ``bwd(*nondiff_args, residuals, ct)``, which returns cotangents for the others only (JAX's
    API: ``functools.partial(custom_vjp, nondiff_argnums=(0,))`` as a decorator).

    Example::

        @custom_vjp
        def f(x): return np.sin(x)
        def f_fwd(x): return np.sin(x), np.cos(x)
        def f_bwd(cos_x, ct): return (ct * cos_x,)
        f.defvjp(f_fwd, f_bwd)
    """

    _wants_inputs: bool  # set by checkpoint: bwd is told which inputs need a cotangent

    def __init__(self, fn: Callable[..., Any], nondiff_argnums: tuple[int, ...] = ()) -> None:
        if not callable(fn):
            raise TypeError(f"custom_vjp: {fn!r} is not callable")
        self.fn = fn
        self.nondiff_argnums = _positions("custom_vjp", nondiff_argnums)
        self.fwd: Callable[..., Any] | None = None
        self.bwd: Callable[..., Any] | None = None
        self.__wrapped__ = fn
        self.__name__ = getattr(fn, "__name__", "custom_vjp")

    def defvjp(self, fwd: Callable[..., Any], bwd: Callable[..., Any]) -> custom_vjp:
        if not (callable(fwd) and callable(bwd)):
            raise TypeError("custom_vjp.defvjp(fwd, bwd): both must be callable")
        if self.nondiff_argnums:
            fwd, bwd = _nondiff_vjp(self, fwd, bwd)
        self.fwd, self.bwd = fwd, bwd
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.fwd is None:  # JAX raises too: differentiated, the body would be (silently)
            raise TypeError(f"custom_vjp function {_rules._name(self.fn)} has no vjp rule: "
                            f"define one with {self.__name__}.defvjp(fwd, bwd)")
        return self.fn(*args, **kwargs)

    def positional(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """The arguments of a call as fwd receives them, and bwd gives cotangents for (see
        :func:`_positional`): one per parameter, however the call spelled them."""
        return _positional("custom_vjp", self.fn, args, kwargs)

    def fwd_pair(self, result: Any) -> tuple[Any, Any]:
        """What ``fwd`` returned, checked to be the pair ``(output, residuals)``."""
        if not (isinstance(result, (tuple, list)) and len(result) == 2):
            raise TypeError(f"the fwd of custom_vjp function {_rules._name(self.fn)} must "
                            f"return a pair (output, residuals), got {_described(result)}")
        return result[0], result[1]

    def check_nondiff(self, differentiated: list[bool]) -> None:
        """Refuse a differentiated argument among ``nondiff_argnums`` (see
        :func:`_refuse_differentiated_nondiff`): ``bwd`` gives it no cotangent."""
        _refuse_differentiated_nondiff(
            f"custom_vjp function {_rules._name(self.fn)}", self.nondiff_argnums, differentiated,
            "bwd gives no cotangent; pass it among the differentiated arguments and return its "
            "cotangent from bwd")

    def check_cotangents(self, parts: Any, primals: list[Any]) -> None:
        """``bwd``'s result checked as JAX checks it: a tuple with one cotangent per
        positional argument, each ``None`` (zero) or of its argument's structure, and each
        leaf of its leaf's shape (never summed or broadcast: a mistake would be a silently
        wrong derivative)."""
        name = _rules._name(self.fn)
        if not isinstance(parts, (tuple, list)) or len(parts) != len(primals):
            raise TypeError(f"the bwd of custom_vjp function {name} must return a tuple with "
                            f"one cotangent (or None) per positional argument, "
                            f"{len(primals)} here, got {_described(parts)}")
        for i, (part, x) in enumerate(zip(parts, primals)):
            _check_part(name, f"argument {i}", part, x)

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        """A method: ``layer.act(x)`` is ``act(layer, x)``, the instance its first argument
        (as for any function; JAX's wrappers do the same)."""
        return self if instance is None else functools.partial(self, instance)


class custom_jvp:
    """A function with its own forward rule, JAX's ``custom_jvp``.

    Example::

        @custom_jvp
        def log1pexp(x):
            return math.log1p(math.exp(x))

        @log1pexp.defjvp
        def log1pexp_jvp(primals, tangents):
            (x,), (dx,) = primals, tangents
            return log1pexp(x), dx / (1 + math.exp(-x))

    Called with differentiated arguments inside :func:`jvp` & co, the rule runs instead of
    the body: it gets the plain primals and their tangents (zeros for arguments, or elements
    of a tuple, list or dict argument, that have none), both as tuples with one entry per
    argument (defaults included) in the arguments' pytree structure, and returns ``(output,
    output_tangent)`` with matching pytree structures.  Its tangents are primal-shaped, as in
    JAX: under :func:`jacfwd` it runs once per direction.  Everywhere else the function is
    itself.  The rule is ordinary Python, so an enclosing derivative differentiates it.
    ``nondiff_argnums``: positions of arguments that are not differentiated (a function, a
    flag), given to the rule first, ``jvp(*nondiff_args, primals, tangents)``, the primals and
    tangents of the others only (JAX's API).

    See also: :func:`overdub_ad.defjvp` (per-argument rules for any callable).
    """

    __name__: str  # the function's, copied by functools.update_wrapper

    def __init__(self, fun: Callable[..., Any], nondiff_argnums: tuple[int, ...] = ()) -> None:
        if not callable(fun):
            raise TypeError(f"custom_jvp: {fun!r} is not callable")
        functools.update_wrapper(self, fun)  # sets __name__, __doc__, __wrapped__...
        self.fun = fun
        self.nondiff_argnums = _positions("custom_jvp", nondiff_argnums)
        self.jvp: Callable[..., Any] | None = None

    def defjvp(self, jvp: _F) -> _F:
        """Register ``jvp(primals, tangents) -> (out, tangent_out)`` (with ``nondiff_argnums``,
        ``jvp(*nondiff_args, primals, tangents)``); returns ``jvp``."""
        if not callable(jvp):
            raise TypeError(f"custom_jvp.defjvp: {jvp!r} is not callable")
        self.jvp = _nondiff_jvp(self.nondiff_argnums, jvp) if self.nondiff_argnums else jvp
        return jvp

    def defjvps(self, *jvps: Callable[..., Any] | None) -> None:
        """Register one rule per argument (JAX's ``defjvps``): ``jvps[i](t_i, out, *primals)``
        is argument ``i``'s part of the output tangent, ``t_i`` its tangent and ``out`` the
        output; None for an argument without one.  The parts are added leaf by leaf."""
        if self.nondiff_argnums:
            raise TypeError(f"custom_jvp.defjvps: {_rules._name(self.fun)} has "
                            f"nondiff_argnums; use defjvp")
        for rule in jvps:
            if rule is not None and not callable(rule):
                raise TypeError(f"custom_jvp.defjvps: {rule!r} is neither callable nor None")
        name = _rules._name(self.fun)

        def jvp(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Any, Any]:
            if len(jvps) != len(primals):
                raise TypeError(f"custom_jvp.defjvps of {name}: {len(jvps)} rule(s) for "
                                f"{len(primals)} argument(s); give one per argument (None for "
                                f"none)")
            out = self(*primals)  # (the function itself: an enclosing derivative uses the rule)
            leaves, tree = flatten(out)
            total: list[Any] | None = None
            for rule, t in zip(jvps, tangents):
                if rule is None:
                    continue
                part, part_tree = flatten(rule(t, out, *primals))
                if part_tree != tree:
                    raise TypeError(f"custom_jvp.defjvps of {name}: a rule returned "
                                    f"{_described(unflatten(part_tree, part))}, not a tangent "
                                    f"shaped as the output")
                total = part if total is None else [a + b for a, b in zip(total, part)]
            if total is None:  # every rule None: the output does not move
                total = [np.zeros_like(leaf) for leaf in leaves]
            return out, unflatten(tree, total)

        self.defjvp(jvp)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.jvp is None:  # JAX raises too: differentiated, the body would be (silently)
            raise TypeError(f"custom_jvp function {_rules._name(self.fun)} has no jvp rule: "
                            f"define one with @{self.__name__}.defjvp")
        return self.fun(*args, **kwargs)

    def check_nondiff(self, differentiated: list[bool]) -> None:
        """Refuse a differentiated argument among ``nondiff_argnums`` (see
        :func:`_refuse_differentiated_nondiff`): the rule gets no tangent for it."""
        _refuse_differentiated_nondiff(
            f"custom_jvp function {_rules._name(self.fun)}", self.nondiff_argnums, differentiated,
            "the rule gets no tangent; pass it among the differentiated arguments")

    def positional(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """The arguments of a call as the rule receives them (see :func:`_positional`)."""
        return _positional("custom_jvp", self.fun, args, kwargs)

    def rule_pair(self, result: Any) -> tuple[Any, Any]:
        """What the rule returned, as ``(primal_out, tangent_out)``: a pair, a tuple or a list
        of two (JAX's), else a ``TypeError`` naming the function."""
        if not (type(result) in (tuple, list) and len(result) == 2):
            raise TypeError(f"the jvp rule of {_rules._name(self.fun)} must return a pair "
                            f"(primal_out, tangent_out), got {_described(result)}")
        outs, tangents = flatten(result[0])[0], flatten(result[1])[0]
        if len(outs) == len(tangents):  # (a structure that differs: the engines say so)
            for out, tangent in zip(outs, tangents):
                _check_tangent(self.fun, _innermost(out), _innermost(tangent))
        return result[0], result[1]

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        """A method: ``layer.act(x)`` is ``act(layer, x)``, the instance its first argument
        (as for any function; JAX's wrappers do the same)."""
        return self if instance is None else functools.partial(self, instance)

    def __repr__(self) -> str:
        return f"<custom_jvp {_rules._name(self.fun)}>"


def _check_tangent(fun: Any, out: Any, tangent: Any) -> None:
    """A tangent a jvp rule returned for ``out``: a number or array of ``out``'s shape, else
    an error naming the function -- a tangent of another shape would be summed or broadcast
    into a wrong derivative (JAX refuses it too)."""
    if tangent is None:
        return
    if isinstance(tangent, (str, bytes)):
        raise TypeError(f"the jvp rule of {_rules._name(fun)} returned a tangent "
                        f"{_described(tangent)}: a tangent is a number or an array")
    shape, want = np.shape(tangent), np.shape(out)
    if shape != want:
        raise ValueError(f"the jvp rule of {_rules._name(fun)} returned a tangent of shape "
                         f"{shape} for an output of shape {want}: give it the output's shape")


def _positions(api: str, nondiff_argnums: Any) -> tuple[int, ...]:
    positions = (nondiff_argnums,) if isinstance(nondiff_argnums, int) else nondiff_argnums
    if not (isinstance(positions, tuple) and all(type(i) is int and i >= 0 for i in positions)
            and len(set(positions)) == len(positions)):
        raise TypeError(f"{api}: nondiff_argnums must be a tuple of distinct non-negative "
                        f"argument positions, got {nondiff_argnums!r}")
    return tuple(sorted(positions))


def _nondiff_jvp(positions: tuple[int, ...], jvp: Callable[..., Any]) -> Callable[..., Any]:
    """``jvp(*nondiff_args, primals, tangents)`` as the rule the engines call,
    ``rule(primals, tangents)`` over every argument."""
    def rule(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> Any:
        _check_count(positions, len(primals))
        kept = [i for i in range(len(primals)) if i not in positions]
        return jvp(*(primals[i] for i in positions), tuple(primals[i] for i in kept),
                   tuple(tangents[i] for i in kept))
    return rule


def _nondiff_vjp(fn: custom_vjp, fwd: Callable[..., Any],
                 bwd: Callable[..., Any]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``fwd`` and ``bwd(*nondiff_args, residuals, ct)`` as the pair the engines call: the
    non-differentiated arguments kept beside the residuals, and ``None`` cotangents put at
    their positions (``bwd`` returns exactly one per other argument)."""
    positions = fn.nondiff_argnums

    def forward(*args: Any, **kwargs: Any) -> Any:
        _check_count(positions, len(args))
        out, residuals = fn.fwd_pair(fwd(*args, **kwargs))
        return out, (tuple(args[i] for i in positions), len(args), residuals)

    def backward(kept: Any, ct: Any) -> tuple[Any, ...]:
        nondiff, count, residuals = kept
        parts = bwd(*nondiff, residuals, ct)
        if not isinstance(parts, (tuple, list)) or len(parts) != count - len(positions):
            raise TypeError(f"the bwd of custom_vjp function {_rules._name(fn.fn)} must "
                            f"return a tuple with one cotangent (or None) per argument not in "
                            f"nondiff_argnums, {count - len(positions)} here, got "
                            f"{_described(parts)}")
        cts = iter(parts)
        return tuple(None if i in positions else next(cts) for i in range(count))
    return forward, backward


_NUMBERS = (float, int, complex, np.ndarray, np.number)


def probe(primal: Any) -> Any:
    """The tangent value at which reverse mode records a ``custom_jvp`` rule: ones of the
    primal's shape (see :class:`LinearityCheck`)."""
    value = _innermost(primal)
    if isinstance(value, np.ndarray):
        return np.ones_like(value, dtype=np.result_type(value, 0.0))
    return 1.0 + 0.0 * value


class LinearityCheck:
    """Reverse mode transposes a ``custom_jvp`` rule's tangent map, which must be linear
    (JAX cannot transpose any other, and raises); transposed at zero, ``2 * x * dx ** 2``
    gives a silent zero.  The map ``f`` is recorded at the tangents ``p`` (:func:`probe`),
    between two pass-through entries whose joints see the cotangents: ``c`` of the map's
    output, then ``J(p)^T c`` of its input.  Linear, ``<J(p)^T c, p> = <c, J(p) p> = <c,
    f(p)>``; homogeneous of degree ``k`` (``dx ** 2``: 2), the left side is ``k`` times the
    right (Euler), and a constant term (``dx + 1``) breaks it too.  Checked in each backward
    sweep, at no cost of running the rule again (a rule may count its calls).  Positively
    homogeneous maps of degree one (``abs(dx)``) pass: transposed at ``p`` they give the
    derivative in the direction ``p``, the rule's own answer there."""

    __slots__ = ("fn", "probes", "values", "paired")

    def __init__(self, fn: custom_jvp, probes: list[Any]) -> None:
        self.fn, self.probes = fn, probes
        self.values: list[Any] = []  # f(p), the rule's tangent outputs
        self.paired: Any = None      # <c, f(p)> of the sweep under way

    def outputs(self, ct: tuple[Any, ...]) -> tuple[Any, ...]:
        """The joint of the entry after the map: notes ``<c, f(p)>``, passes ``c`` on."""
        self.paired = _pairing(ct, self.values)
        return ct

    def inputs(self, ct: tuple[Any, ...]) -> tuple[Any, ...]:
        """The joint of the entry before the map: compares ``<J^T c, p>`` with ``<c, f(p)>``
        and passes ``J^T c`` on to the arguments."""
        paired, self.paired = self.paired, None
        back = _pairing(ct, self.probes)
        if paired is not None and back is not None and \
                abs(back - paired) > 1e-8 * (abs(back) + abs(paired)) + 1e-300:
            raise TypeError(
                f"the jvp rule of custom_jvp function {_rules._name(self.fn.fun)} is not "
                f"linear in the tangents (the transposed map does not match it: "
                f"<J^T c, t> = {back!r}, <c, J t> = {paired!r}): reverse mode transposes the "
                f"rule, which needs a linear map of the tangents (a product or power of "
                f"tangents, or a constant term, is not)")
        return ct


def _pairing(cts: tuple[Any, ...], values: list[Any]) -> float | None:
    """``sum <c, v>`` over pairs of real numbers or arrays of one shape; None where a pair is
    anything else (complex: the check is for real maps)."""
    total = 0.0
    for c, v in zip(cts, values):
        a, b = np.asarray(_innermost(c)), np.asarray(_innermost(v))
        if a.dtype.kind not in "fiu" or b.dtype.kind not in "fiu" or a.shape != b.shape:
            return None
        total += float(np.sum(a * b))
    return total


def _described(x: Any) -> str:
    """A returned value for an error message: its type, and a sequence's length."""
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of length {len(x)}"
    return f"a {type(_innermost(x)).__name__}"  # (a differentiated value: its number's type)


def _check_part(name: str, where: str, part: Any, x: Any) -> None:
    """One cotangent ``bwd`` returned, against the argument (or the part of one) it is for."""
    if part is None:  # zero, as in JAX, for a whole argument or any part of one
        return
    kind = type(x)
    if kind is dict:
        if type(part) is not dict or set(part) != set(x):
            raise TypeError(f"the bwd of custom_vjp function {name} returned a cotangent "
                            f"{_described(part)} for {where}, a dict with keys "
                            f"{sorted(map(repr, x))}: it must have the same keys")
        for key in x:
            _check_part(name, f"{where}[{key!r}]", part[key], x[key])
        return
    if isinstance(x, (tuple, list)):
        plain = _innermost(part)
        if isinstance(plain, np.ndarray) and plain.shape[:1] == (len(x),):
            return  # a list of numbers is an array to NumPy: its cotangent may be one
        if not isinstance(part, (tuple, list)) or len(part) != len(x):
            raise TypeError(f"the bwd of custom_vjp function {name} returned a cotangent "
                            f"{_described(part)} for {where}, {_described(x)}: it must "
                            f"have the same structure")
        for j, (p, item) in enumerate(zip(part, x)):
            _check_part(name, f"{where}[{j}]", p, item)
        return
    value, plain = _innermost(x), _innermost(part)
    if isinstance(value, (float, complex, np.ndarray, np.floating, np.complexfloating)) and \
            isinstance(plain, (float, int, complex, np.ndarray, np.number)) and \
            np.shape(plain) != np.shape(value):
        raise ValueError(f"the bwd of custom_vjp function {name} returned a cotangent of "
                         f"shape {np.shape(plain)} for {where}, of shape {np.shape(value)}: "
                         f"each cotangent must have its argument's shape")


def structured_bwd(bwd: Callable[..., Any], tree: Any) -> Callable[..., Any]:
    """``bwd`` for an output of pytree structure ``tree`` (a dict, nested containers),
    recorded as the tuple of its leaves: the tuple of their cotangents is given to ``bwd``
    in the output's structure, as JAX does (a list output's cotangent a list)."""
    def backward(residuals: Any, ct: Any, *wanted: Any) -> Any:
        return bwd(residuals, unflatten(tree, list(ct)), *wanted)
    return backward


def output_leaves(out: Any) -> tuple[tuple[Any, ...], Any] | None:
    """A ``custom_vjp``'s output as the tuple of its leaves and its structure; None for an
    output that is one leaf or a flat tuple (recorded as it is)."""
    leaves, tree = flatten(out)
    if tree.kind == "leaf" or (tree.kind is tuple and
                               all(c.kind == "leaf" for c in tree.children)):
        return None
    return tuple(leaves), tree


def _check_count(positions: tuple[int, ...], count: int) -> None:
    if positions and positions[-1] >= count:
        raise TypeError(f"nondiff_argnums {positions} names argument {positions[-1]}, but the "
                        f"function was called with {count} positional arguments")


def _refuse_differentiated_nondiff(what: str, nondiff_argnums: Any, differentiated: list[bool],
                                   why: str) -> None:
    """A ``TypeError`` for a differentiated argument among ``nondiff_argnums``
    (``differentiated``: per positional argument): its rule leaves it out, so its derivative
    would be a silent zero (JAX raises too)."""
    for i in nondiff_argnums:
        if i < len(differentiated) and differentiated[i]:
            raise TypeError(f"{what}: argument {i} is differentiated, but it is in "
                            f"nondiff_argnums, for which {why}")


def _positional(kind: str, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
                ) -> tuple[Any, ...]:
    """The arguments of a call of ``fn`` as its rules receive them, in either mode: all by
    position, keywords bound to their parameters and defaults filled in (JAX's
    ``resolve_kwargs``: ``f(x)`` for ``def f(x, scale=2.0)`` gives the rules ``(x, 2.0)``, as
    ``f(x, 2.0)`` does); a keyword-only parameter cannot be passed so: a ``TypeError``."""
    signature = _signature(fn)
    if not kwargs and (signature is None or len(args) == len(signature.parameters)):
        return args  # (the commonest call, every parameter given by position: nothing to bind)
    if signature is not None:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        args, kwargs = bound.args, {k: v for k, v in bound.kwargs.items() if k in kwargs}
    if kwargs:
        raise TypeError(f"{kind} function {_rules._name(fn)}: pass the arguments "
                        f"{sorted(kwargs)} by position")
    return args


@functools.lru_cache(maxsize=256)
def _signature(fn: Any) -> inspect.Signature | None:
    """``fn``'s signature (None where it has none: the call taken as it is), read once."""
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


_CUSTOM = (custom_jvp, custom_vjp)
_CALLS = (custom_jvp.__call__, custom_vjp.__call__)


def as_called(fn: Any, args: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]] | None:
    """The call ``fn(*args)`` restated as the call of the callable it spells, or None for any
    other: ``f.__call__(x)`` of a C callable (a ufunc, a builtin, a Python function's
    method-wrapper) or of a custom rule's function is ``f(x)``, and so is
    ``type(f).__call__(f, x)`` of the latter; ``types.MethodType(f, obj)(x)`` of a custom
    rule's function is ``f(obj, x)``, as ``obj.f(x)`` is.  Spelled so, the call would run the
    custom function's body (its rule ignored: the body's derivative) or have no rule.  And
    ``Pair(items)`` of a ``tuple`` subclass that defines no ``__new__`` or ``__init__`` is
    ``tuple.__new__(Pair, items)``, which the modes follow (the class itself has no rule)."""
    kind = type(fn)
    if kind is type and (fn is float or fn is complex):
        return number_override(fn, args)  # float(obj) of a subclass with its own __float__
    if kind is type:
        return (tuple.__new__, (fn, *args)) if len(args) <= 1 and issubclass(fn, tuple) and \
            fn is not tuple and fn.__new__ is tuple.__new__ and \
            fn.__init__ is object.__init__ else None
    if kind is types.MethodWrapperType:
        if fn.__name__ != "__call__":
            return None
        owner = fn.__self__  # (its class's own call: not super().__call__, another class's)
        slot = getattr(type(owner), "__call__", None)
        if type(slot) is types.WrapperDescriptorType and fn == slot.__get__(owner):
            return owner, args
        if isinstance(owner, functools.partial) and \
                fn == vars(functools.partial)["__call__"].__get__(owner):
            # super().__call__(x) in a partial's subclass: the partial's call, as a plain one
            return functools.partial(owner.func, *owner.args, **owner.keywords), args
        return None
    if kind is types.MethodType:
        func, owner = fn.__func__, fn.__self__
        if isinstance(func, _CUSTOM):
            return func, (owner, *args)
        if isinstance(owner, _CUSTOM) and func is type(owner).__call__:
            return owner, args
        return None
    if (fn is _CALLS[0] or fn is _CALLS[1]) and args and isinstance(args[0], _CUSTOM) and \
            type(args[0]).__call__ is fn:
        return args[0], args[1:]
    return None


# Python's binary operators and the ufuncs NumPy's arrays and scalars run them as
_OPERATOR_UFUNCS = {id(op): u for op, u in (
    (operator.add, np.add), (operator.sub, np.subtract), (operator.mul, np.multiply),
    (operator.truediv, np.true_divide), (operator.floordiv, np.floor_divide),
    (operator.mod, np.remainder), (operator.pow, np.power), (operator.matmul, np.matmul))}


def numpy_override(fn: Any, args: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]] | None:
    """A ufunc call -- ``np.multiply(a, q)``, ``np.add.reduce(q)``, or ``a * q`` with a NumPy
    array or scalar ``a`` on the left, which NumPy runs as ``np.multiply(a, q)`` -- given an
    object ``q`` whose class overrides ufuncs in Python (``__array_ufunc__``, NEP 13),
    restated as the call NumPy makes, ``type(q).__array_ufunc__(q, np.multiply, "__call__",
    a, q)``, for the modes to follow (run by NumPy, it computes with ``a`` natively: its
    derivative lost).  None for any other call, and where several classes override."""
    for a in args:  # (the common call, arrays and numbers, at once)
        if type(a).__flags__ & _HEAPTYPE and type(a) is not Tagged:
            break
    else:
        return None
    kind = type(fn)
    if kind is np.ufunc:
        ufunc, method = fn, "__call__"
    elif kind is types.BuiltinMethodType and type(fn.__self__) is np.ufunc:
        ufunc, method = fn.__self__, fn.__name__
    else:
        ufunc, method = _OPERATOR_UFUNCS.get(id(fn)), "__call__"
        if ufunc is None or len(args) != 2 or \
                not isinstance(_innermost(args[0]), (np.ndarray, np.generic)):
            return None
    owners = {type(a) for a in args if type(a).__flags__ & _HEAPTYPE and type(a) is not Tagged
              and type(getattr(type(a), "__array_ufunc__", None)) is types.FunctionType
              and not _arrays.is_foreign_array_type(type(a))}  # (dask's: a namespace's)
    if len(owners) != 1:
        return None
    cls = owners.pop()
    owner = next(a for a in args if type(a) is cls)
    return _overridden, (cls.__array_ufunc__, owner, ufunc, method, *args)


def _overridden(override: Any, owner: Any, ufunc: Any, method: str, *inputs: Any,
                **kwargs: Any) -> Any:
    """``override(owner, ufunc, method, *inputs, **kwargs)`` (run through the context, as the
    call it restates), and NumPy's TypeError where it declines (``NotImplemented``)."""
    out = override(owner, ufunc, method, *inputs, **kwargs)
    if out is NotImplemented:
        kinds = ", ".join(f"'{type(_innermost(i)).__name__}'" for i in inputs)
        raise TypeError(f"operand type(s) all returned NotImplemented from "
                        f"__array_ufunc__({ufunc!r}, {method!r}, ...): {kinds}")
    return out



# an operator -> the method Python calls on its left operand, and on its right one (reflected)
_OPERATOR_METHODS = {id(op): names for op, names in (
    (operator.add, ("__add__", "__radd__")), (operator.sub, ("__sub__", "__rsub__")),
    (operator.mul, ("__mul__", "__rmul__")), (operator.truediv, ("__truediv__", "__rtruediv__")),
    (operator.floordiv, ("__floordiv__", "__rfloordiv__")), (operator.mod, ("__mod__", "__rmod__")),
    (operator.pow, ("__pow__", "__rpow__")), (operator.neg, ("__neg__", None)),
    (operator.pos, ("__pos__", None)), (abs, ("__abs__", None)),
    (float, ("__float__", None)), (complex, ("__complex__", None)))}
_NUMBER_BASES = (float, complex)
_PLAIN_NUMBERS = (int, float, complex, bool)


#: the ids of the callables :func:`number_override` restates (a caller's quick test)
NUMBER_OPERATORS = frozenset(_OPERATOR_METHODS)


def number_override(fn: Any, args: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]] | None:
    """An operator (or ``abs``, ``float``, ``complex``) given an instance of a ``float`` or
    ``complex`` subclass that defines the method Python calls for it (``class MulOv(float)``
    with its own ``__mul__``): that method's call, as Python makes it -- the left operand's,
    or the right one's reflected method beside a plain number -- for the modes to follow (as
    a float's arithmetic, its value would be the user's method's and its derivative float's).
    None for any other call."""
    names = _OPERATOR_METHODS.get(id(fn))
    if names is None or not args or len(args) > 2:
        return None
    left = _innermost(args[0])
    kind = type(left)
    if kind.__flags__ & _HEAPTYPE and isinstance(left, _NUMBER_BASES):
        method = _own_method(kind, names[0])
        if method is not None:
            return method, args
    if len(args) == 2 and names[1] is not None and type(left) in _PLAIN_NUMBERS:
        right = type(_innermost(args[1]))
        if right.__flags__ & _HEAPTYPE and issubclass(right, _NUMBER_BASES):
            method = _own_method(right, names[1])
            if method is not None:
                return method, (args[1], args[0])
    return None


def _own_method(kind: type, name: str) -> Any:
    """The Python function ``kind`` defines for ``name`` above its builtin number base."""
    for klass in kind.__mro__:
        found = klass.__dict__.get(name)
        if found is not None:
            return found if type(found) is types.FunctionType else None
    return None


_SPELLED = frozenset((types.MethodWrapperType, types.MethodType, types.FunctionType, type))
_UFUNC_KINDS = frozenset((np.ufunc, types.BuiltinMethodType, types.BuiltinFunctionType))
#: the kinds of callables whose calls :func:`restated` may restate (a caller's quick test)
RESTATABLE = _SPELLED | _UFUNC_KINDS


def restated(fn: Any, args: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]] | None:
    """The call ``fn(*args)`` as the call it amounts to, which both modes make instead
    (:func:`as_called`, :func:`numpy_override`, :func:`number_override`), or None."""
    kind = type(fn)
    if kind in _SPELLED:
        return as_called(fn, args)
    if kind in _UFUNC_KINDS:
        return numpy_override(fn, args) or (
            number_override(fn, args) if id(fn) in NUMBER_OPERATORS else None)
    return None


def refuse_hidden(kind: str, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                  holds: Callable[[Any], bool], carries: Callable[[Any], bool]) -> None:
    """A ``TypeError`` naming ``fn`` (a ``custom_jvp`` or ``custom_vjp`` function, ``kind``)
    where one of its arguments, or a leaf of one, is a plain object -- not a pytree --
    holding a value differentiated here (``holds``: the context's test, ``_holds_stored``),
    or a function that reads one from its closure (``carries``: whether a value has a
    derivative here): the rule is given the object or the function, never a tangent or
    cotangent for what it holds, so that value's derivative would be lost."""
    for where, value in [*((f"argument {i}", a) for i, a in enumerate(args)),
                         *((f"argument {k!r}", v) for k, v in kwargs.items())]:
        try:
            leaves = flatten(value)[0]
        except TypeError:  # (a dataclass with attributes that are not fields: one object)
            leaves = [value]
        for leaf in leaves:
            if type(leaf) is types.FunctionType and any(
                    carries(v) for v in cell_values(leaf)):
                raise TypeError(
                    f"{kind} function {_rules._name(fn)} was given a function "
                    f"{_rules._name(leaf)} ({where}) that reads a differentiated value from "
                    f"its closure: the rule gets no tangent or cotangent for it, and that "
                    f"derivative would be lost; pass the value as an argument of "
                    f"{_rules._name(fn)} instead")
            if holds(leaf):
                name = type(leaf).__name__
                raise TypeError(
                    f"{kind} function {_rules._name(fn)} was given a {name} ({where}) that "
                    f"holds a differentiated value: a {name} is not a pytree, so its rule "
                    f"gets no tangent or cotangent for what it holds, and that derivative "
                    f"would be lost; pass the value itself as an argument, or make {name} a "
                    f"pytree (a dataclass, a NamedTuple, or overdub_ad.register_pytree)")
