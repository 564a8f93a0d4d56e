"""Forward mode: tangents ride on values as tag metadata of a per-call context.

``jvp(f, primals, tangents)`` makes a fresh :class:`ForwardContext`, tags each input with its
tangent and overdubs ``f``.  Inside, a C function (or a function with a registered rule) that
receives a tagged value is a primitive of the context: it runs on the plain values and the rule
table gives the output tangent.  Python functions without a rule are recursed into, so user code
needs no change.  Everything the context executes -- the primal call and the rules -- runs
through the enclosing context, if any, which is how nesting differentiates derivatives: a fresh
context (and tag) per call means no perturbation confusion.

A function-valued result is differentiated lazily (Manzyuk et al., JFP 2019): the derivative of
``x -> g_x`` at ``x0`` is the function ``y -> d/dx g_x(y)`` at ``x0``, each call a fresh
derivative, so ``derivative(shift)(3.0)`` composes correctly with itself.
"""

from __future__ import annotations

import functools
import numbers
import operator
import types
from typing import Any, Callable

import numpy as np

from overdub import (Context, Tagged, can_recurse, carries_tags, has_metadata, metadata, opaque,
                     overdub, tag, untag)

from . import _rules
from ._pytree import flatten, unflatten

_PYTHON_CODE = (types.FunctionType, types.MethodType, functools.partial)
# Uses of a differentiated value that ignore its tangent: the result carries no tangent.
_INDIFFERENT = {id(f): f for f in (type, isinstance, issubclass, len, id, hash, repr, str,
                                   format, print, bool, callable, hasattr, object.__repr__)}
# Differentiable attributes of numbers and arrays, and methods that are NumPy functions.
_ATTRIBUTES = {"real": np.real, "imag": np.imag, "T": np.transpose,
               "mT": lambda x: np.swapaxes(x, -1, -2)}
_METHODS = {name: getattr(np, name) for name in (
    "sum", "mean", "prod", "max", "min", "std", "var", "cumsum", "cumprod", "reshape", "ravel",
    "transpose", "squeeze", "swapaxes", "dot", "clip", "conj", "conjugate", "trace", "take",
    "repeat", "diagonal", "round", "argmax", "argmin", "argsort", "nonzero", "all", "any",
    "sort")}
_METHODS.update({"flatten": np.ravel, "copy": np.copy, "conjugate": np.conj,
                 "astype": lambda x, dtype, *a, **k: np.asarray(x).astype(dtype, *a, **k),
                 "item": lambda x, *a: np.asarray(x).item(*a),
                 "tolist": lambda x: np.asarray(x).tolist()})


class ForwardContext(Context):
    """The forward-mode context: one instance per ``jvp`` call (its tags are its own)."""

    def __init__(self) -> None:
        super().__init__()

    def metadata_type(self, value_type: type) -> Any:
        if issubclass(value_type, (numbers.Number, np.ndarray, np.generic)):
            return object  # a tangent: a number, an array, or another context's Tagged
        return None

    def _tagged(self, x: Any) -> bool:
        return type(x) is Tagged and x.owner() is self

    def is_primitive(self, fn: Any, /, *args: Any, **kwargs: Any) -> bool:
        if not (any(map(self._tagged, args)) or any(map(self._tagged, kwargs.values()))):
            return False
        if fn is getattr:
            return True
        if _rules.jvp_rules(fn) is not None or _rules.is_nondifferentiable(fn):
            return True
        if id(fn) in _INDIFFERENT or carries_tags(fn):
            return False  # the tag machinery: plain value, or metadata kept in the heap
        # Python code (recursed into, or run natively with its tags) vs a C function, which
        # needs a rule: MissingRuleError rather than a silently dropped derivative.
        python = isinstance(fn, _PYTHON_CODE) or isinstance(getattr(type(fn), "__call__", None),
                                                            types.FunctionType)
        return not python and not can_recurse(self, fn, *args, **kwargs)

    def execute(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        if fn is getattr:
            return self._attribute(*args)
        primals = [untag(a, self) for a in args]
        tangents = [metadata(a, self) if self._tagged(a) else None for a in args]
        plain_kwargs = {k: untag(v, self) for k, v in kwargs.items()}
        run = self.fallback  # runs under the enclosing context, which sees it
        if _rules.is_nondifferentiable(fn):
            return run(fn, *primals, **plain_kwargs)
        rules = _rules.jvp_rules(fn)
        carried = [i for i, dx in enumerate(tangents) if dx is not None]
        if rules is None or any(i >= len(rules) or rules[i] is None for i in carried) or \
                any(self._tagged(v) for v in kwargs.values()):
            first = next((i for i in carried if rules is None or i >= len(rules)
                          or rules[i] is None), carried[0] if carried else 0)
            raise _rules.missing(fn, first, "forward", type(self).__name__)
        out = run(fn, *primals, **plain_kwargs)
        tangent = None
        for i in carried:
            rule = rules[i]
            if rule is _rules.ZERO:
                continue
            if rule is _rules.LINEAR:
                moved = list(primals)
                moved[i] = tangents[i]
                part = run(fn, *moved, **plain_kwargs)
            else:
                part = run(rule, tangents[i], out, *primals, **plain_kwargs)
            tangent = part if tangent is None else run(operator.add, tangent, part)
        return out if tangent is None else tag(out, self, tangent)

    def _attribute(self, obj: Any, name: str, *default: Any) -> Any:
        if name in _ATTRIBUTES:
            return self.execute(_ATTRIBUTES[name], obj)
        if name in _METHODS:
            return functools.partial(_METHODS[name], obj)
        return getattr(untag(obj, self), name, *default)


def _seed(ctx: ForwardContext, x: Any, dx: Any) -> Any:
    if not isinstance(x, (numbers.Number, np.ndarray, np.generic, Tagged)):
        raise TypeError(f"jvp: cannot differentiate with respect to a {type(x).__name__} "
                        f"(expected floats, complex numbers or arrays)")
    return tag(x, ctx, dx)


def _tangent_of(ctx: ForwardContext, y: Any, batch: tuple = ()) -> Any:
    if has_metadata(y, ctx):
        return metadata(y, ctx)
    plain = untag(y, ctx)
    return np.zeros(batch + np.shape(plain), dtype=np.result_type(plain, float)) \
        if batch or isinstance(plain, np.ndarray) else 0.0 * plain


def _jvp(f: Callable, primals: tuple, tangents: tuple, batch: tuple = ()) -> tuple:
    ctx = ForwardContext()
    leaves, tree = flatten(list(primals))
    dleaves, dtree = flatten(list(tangents))
    if len(dleaves) != len(leaves):
        raise ValueError(f"jvp: primals and tangents differ in structure ({tree} vs {dtree})")
    seeded = unflatten(tree, [x if dx is None else _seed(ctx, x, dx)
                              for x, dx in zip(leaves, dleaves)])
    out = overdub(ctx, f, *seeded)
    if callable(out) and not isinstance(out, (np.ndarray, Tagged)):
        return out, _FunctionDerivative(f, primals, tangents)
    outs, otree = flatten(out)
    values = [untag(y, ctx) for y in outs]
    derivs = [_tangent_of(ctx, y, batch) for y in outs]
    return unflatten(otree, values), unflatten(otree, derivs)


@opaque
def jvp(f: Callable, primals: Any, tangents: Any) -> tuple:
    """``(f(*primals), J_f(primals) @ tangents)``: value and directional derivative.

    ``primals`` and ``tangents`` are sequences (one entry per argument of ``f``) of pytrees of
    floats, complex numbers and arrays with matching structure.  Forward mode: one pass.

    Example::

        jvp(math.sin, (1.0,), (1.0,))   # (sin(1), cos(1))

    See also: :func:`derivative`, :func:`jacfwd`, :func:`overdub_ad.vjp`.
    """
    if not callable(f):
        raise TypeError(f"jvp: f must be callable, got {f!r}")
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("jvp(f, primals, tangents): primals and tangents must be tuples or lists "
                        "with one entry per argument of f")
    return _jvp(f, tuple(primals), tuple(tangents))


class _FunctionDerivative:
    """The derivative of a function-valued function, applied lazily (a fresh tag per call)."""

    def __init__(self, f: Callable, primals: tuple, tangents: tuple) -> None:
        self.f, self.primals, self.tangents = f, primals, tangents

    @opaque
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        f = self.f
        return _jvp(lambda *xs: f(*xs)(*args, **kwargs), self.primals, self.tangents)[1]


@opaque
def derivative(f: Callable, x: Any = None, /) -> Any:
    """``f'(x)`` for a function of one argument; ``derivative(f)`` is the function ``f'``.

    ``x`` is a float, a complex number (holomorphic derivative) or an array (elementwise
    directional derivative along ones).  ``D`` is the same function.  A function-valued ``f``
    gets a function-valued derivative, correct under any nesting.

    Example::

        D(lambda x: x * D(lambda y: x * y, 3.0), 5.0)   # 10.0
    """
    if not callable(f):
        raise TypeError(f"derivative: f must be callable, got {f!r}")
    if x is None:
        return functools.wraps(f)(opaque(lambda x: derivative(f, x)))
    one = np.ones_like(x) if isinstance(x, np.ndarray) else _one_like(x)
    return _jvp(f, (x,), (one,))[1]


def _one_like(x: Any) -> Any:
    plain = x
    while type(plain) is Tagged:
        plain = plain.value
    return 1.0 + 0.0 * plain if isinstance(plain, complex) else 1.0


D = derivative


@opaque
def jacfwd(f: Callable, argnums: int | tuple = 0, chunk: int | None = None) -> Callable:
    """The Jacobian of ``f`` with respect to argument(s) ``argnums``, by forward mode.

    Tangents carry ``chunk`` directions at once (ForwardDiff's chunks; default: all inputs in
    one pass), so an ``n``-input Jacobian costs ``ceil(n / chunk)`` passes.  The result has
    shape ``out.shape + x.shape`` (JAX's convention).

    See also: :func:`overdub_ad.jacrev`.
    """
    if not callable(f):
        raise TypeError(f"jacfwd: f must be callable, got {f!r}")
    multiple = isinstance(argnums, tuple)
    nums = argnums if multiple else (argnums,)

    @opaque
    def jacobian(*args: Any) -> Any:
        results = []
        for num in nums:
            x = np.asarray(args[num], dtype=np.result_type(args[num], float))
            n = x.size
            k = n if chunk is None else max(1, min(chunk, n))
            columns = []
            for start in range(0, n, k):
                stop = min(start + k, n)
                seed = np.zeros((stop - start, n), dtype=x.dtype)
                seed[np.arange(stop - start), np.arange(start, stop)] = 1.0
                seed = seed.reshape((stop - start,) + x.shape)
                primals = list(args)
                primals[num] = x if isinstance(args[num], np.ndarray) else args[num]
                tangents = [np.zeros((stop - start,) + np.shape(a)) if i != num else
                            (seed if isinstance(args[num], np.ndarray)
                             else seed.reshape(stop - start))
                            for i, a in enumerate(args)]
                _, tangent = _jvp(f, tuple(primals), tuple(_only(tangents, num)),
                                  batch=(stop - start,))
                columns.append(np.asarray(tangent))
            block = np.concatenate(columns, axis=0)  # (n, *out.shape)
            block = np.moveaxis(block, 0, -1).reshape(block.shape[1:] + x.shape)
            results.append(block)
        return tuple(results) if multiple else results[0]

    return jacobian


def _only(tangents: list, num: int) -> list:
    """Tangents for a jacobian pass: the chosen argument's seed; zeros elsewhere are skipped by
    giving the other arguments no tangent at all (they are not tagged)."""
    return [t if i == num else None for i, t in enumerate(tangents)]
