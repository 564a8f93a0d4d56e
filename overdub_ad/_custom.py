"""``custom_vjp`` and ``custom_jvp``: functions that carry the user's own derivative rule."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any
from . import _rules
from ._shared import _F


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
            fwd, bwd = _nondiff_vjp(self.nondiff_argnums, fwd, bwd)
        self.fwd, self.bwd = fwd, bwd
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

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

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fun(*args, **kwargs)

    def positional(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """The arguments of a call as the rule receives them, in either mode: all by position,
        keywords bound to their parameters and defaults filled in (JAX's ``resolve_kwargs``:
        ``f(x)`` for ``def f(x, scale=2.0)`` gives the rule ``(x, 2.0)``, as ``f(x, 2.0)``)."""
        try:
            signature = inspect.signature(self.fun)
        except (TypeError, ValueError):  # (no signature: the call as it is)
            signature = None
        if signature is not None:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            args, kwargs = bound.args, {k: v for k, v in bound.kwargs.items() if k in kwargs}
        if kwargs:
            raise TypeError(f"custom_jvp function {_rules._name(self.fun)}: pass the "
                            f"arguments {sorted(kwargs)} by position")
        return args

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        """A method: ``layer.act(x)`` is ``act(layer, x)``, the instance its first argument
        (as for any function; JAX's wrappers do the same)."""
        return self if instance is None else functools.partial(self, instance)

    def __repr__(self) -> str:
        return f"<custom_jvp {_rules._name(self.fun)}>"


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


def _nondiff_vjp(positions: tuple[int, ...], fwd: Callable[..., Any],
                 bwd: Callable[..., Any]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``fwd`` and ``bwd(*nondiff_args, residuals, ct)`` as the pair the engines call: the
    non-differentiated arguments kept beside the residuals, and ``None`` cotangents put at
    their positions."""
    def forward(*args: Any, **kwargs: Any) -> Any:
        _check_count(positions, len(args))
        out, residuals = fwd(*args, **kwargs)
        return out, (tuple(args[i] for i in positions), len(args), residuals)

    def backward(kept: Any, ct: Any) -> tuple[Any, ...]:
        nondiff, count, residuals = kept
        cts = iter(tuple(bwd(*nondiff, residuals, ct)))
        return tuple(None if i in positions else next(cts, None) for i in range(count))
    return forward, backward


def _check_count(positions: tuple[int, ...], count: int) -> None:
    if positions and positions[-1] >= count:
        raise TypeError(f"nondiff_argnums {positions} names argument {positions[-1]}, but the "
                        f"function was called with {count} positional arguments")
