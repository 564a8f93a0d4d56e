"""Second derivatives: ``hessian`` (forward over reverse) and ``hvp``, which tries its routes
in order (compiled from source, on the tape, then ``jvp(grad(f))``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from overdub import opaque

from .. import _routes, _rules
from .._pytree import flatten, ordered_as, unflatten
from .._shared import check_argnums, _entry, _normalize_argnums
from ..forward._api import _check_complex_inputs, jacfwd, jvp
from ..reverse._api import _grad, jacrev, NotScalar
from ..reverse._sweep import _enclosed
from ..reverse._tape import _cast
from ._compiled import compiled_hvp, DECLINED
from ._tape import NotScalarOutput, tape_hvp, tape_hvps


@opaque
@_entry
def hessian(f: Callable[..., Any], argnums: int | tuple[int, ...] = 0,
            has_aux: bool = False, holomorphic: bool = False) -> Callable[..., Any]:
    """The Hessian of ``f``: forward-over-reverse (``jacfwd(grad(f))``); for an output that is
    not a scalar, the second derivatives of each element, ``jacfwd(jacrev(f))``, of shape
    ``out.shape + x.shape + x.shape`` (as JAX's; ``f`` then runs once more, to find the
    output's shape).  With ``has_aux=True``, ``f`` returns ``(value, aux)`` and the Hessian
    function returns ``(hessian, aux)`` (JAX's API).  Keyword arguments of the call pass to
    ``f``, not differentiated.  Complex inputs need ``holomorphic=True`` (as for
    :func:`jacfwd`, and in JAX): the second complex derivative of a holomorphic ``f``."""
    if not callable(f):
        raise TypeError(f"hessian: f must be callable, got {f!r}")
    argnums = check_argnums("hessian", argnums)
    gradient = _grad(f, argnums, has_aux, holomorphic, "hessian")
    jacobian = jacrev(f, argnums, holomorphic=holomorphic, has_aux=has_aux)

    def first_derivatives(*args: Any, **kwargs: Any) -> Any:
        try:
            return gradient(*args, **kwargs)
        except NotScalar:
            return jacobian(*args, **kwargs)
    second = jacfwd(first_derivatives, argnums, has_aux=has_aux, holomorphic=holomorphic)
    declined: set[tuple[int, ...]] = set()  # argument shapes giving a non-scalar output

    def columns(f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                nums: tuple[int, ...]) -> Any:
        return _columns(f, args, kwargs, nums, declined)
    def nested(f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
               nums: tuple[int, ...]) -> Any:
        return second(*args, **kwargs)
    routes = (("hvp-tape", columns), (_routes.REFERENCE, nested)) \
        if type(argnums) is int and not has_aux and not holomorphic else \
        ((_routes.REFERENCE, nested),)

    @opaque
    @_entry
    def hessian_function(*args: Any, **kwargs: Any) -> Any:
        nums = _normalize_argnums(argnums, len(args), "hessian")  # (its errors name hessian)
        _check_complex_inputs(args, nums, holomorphic, "hessian")
        return _routes.first(routes, f, f, args, kwargs, nums)
    return hessian_function


def _columns(f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
             nums: tuple[int, ...], declined: set[tuple[int, ...]]) -> Any:
    """hessian's route on the tape, for a real scalar ``f`` of one float or float array
    argument: column ``j`` is ``H @ e_j``, each a sweep of one recording (``tape_hvps``), as
    ``jacfwd(grad(f))`` takes column ``j`` along ``e_j``.  Anything else declines; an output
    found not to be a scalar is not recorded again for that argument shape, as the recording
    would be lost work at every call."""
    _outermost()
    if _rules.overridden:
        raise _routes.Declined("a shipped rule is replaced by the user's")
    (at,) = nums
    x: Any = args[at]
    if not (type(x) is float or (isinstance(x, (np.ndarray, np.floating)) and
                                 x.dtype.kind == "f")):
        raise _routes.Declined("the argument is not a float or a float array")
    shape = np.shape(x)
    size = int(np.prod(shape))
    if not 0 < size <= _MOST_COLUMNS:
        raise _routes.Declined(f"an argument of {size} elements (one sweep each: jacfwd's "
                               f"batch is cheaper past {_MOST_COLUMNS})")
    if shape in declined:
        raise _routes.Declined("not a real scalar output at an earlier call with an argument "
                               "of this shape")
    before, after = args[:at], args[at + 1:]

    def of_x(x: Any) -> Any:
        return f(*before, x, *after, **kwargs)
    if type(x) is float or isinstance(x, np.floating):
        basis = [type(x)(1.0)]
    else:
        basis = list(np.eye(size, dtype=np.result_type(x)).reshape((size, *shape)))
    try:
        columns = tape_hvps(of_x, x, basis)
    except NotScalarOutput:
        declined.add(shape)
        raise
    return np.stack([np.asarray(c) for c in columns], axis=-1).reshape(shape + shape)


# hessian's route on the tape sweeps once per element of the argument; past this many,
# jacfwd(grad(f))'s one batched pass is cheaper
_MOST_COLUMNS = 64


@opaque
@_entry
def hvp(f: Callable[..., Any], x: Any, v: Any) -> Any:
    """``H(x) @ v`` for scalar ``f``, by forward-over-reverse without forming ``H``.

    With no enclosing context the forward mode runs over the recorded tape (see
    :mod:`overdub_ad.hvp._tape`); inside one, or for a tape it does not handle, it is
    ``jvp(grad(f), (x,), (v,))``.
    """
    if not callable(f):
        raise TypeError(f"hvp: f must be callable, got {f!r}")
    xleaves, xtree = flatten(x)
    vleaves, vtree = flatten(v)
    if vtree != xtree:  # (a dict's items in another order: the same pytree, as in JAX)
        v = ordered_as(xtree, v)
        vleaves, vtree = flatten(v)
    if vtree != xtree:
        raise ValueError(f"hvp: the direction's structure {vtree} does not match x's {xtree}")
    for leaf, d in zip(xleaves, vleaves):
        if d is not None and np.shape(d) != np.shape(leaf):
            raise ValueError(f"hvp: a direction of shape {np.shape(d)} for an argument of "
                             f"shape {np.shape(leaf)}")
    # (the compiled route is for one float array: for any other argument it is no candidate,
    # and says nothing)
    return _routes.first(_ROUTES if type(x) is np.ndarray else _ROUTES[1:], f, f, x, v)


def _compiled(f: Callable[..., Any], x: Any, v: Any) -> Any:
    """The compiled route (``x`` is an array, see :func:`hvp`): a float array argument, a
    straight-line function of the subset."""
    _outermost()
    if x.dtype.kind != "f":
        raise _routes.Declined("the argument is not a float array")
    direction = np.asarray(v)
    if direction.dtype.kind in "biu":
        direction = direction.astype(float)
    if direction.dtype.kind != "f":
        raise _routes.Declined("the direction is not real")
    result = compiled_hvp(f, x, direction)
    if result is DECLINED:
        raise _routes.Declined("not a straight-line function of the subset, a guard failed, "
                               "or a result that is not finite (a singular point)")
    return result


def _on_the_tape(f: Callable[..., Any], x: Any, v: Any) -> Any:
    _outermost()
    if _rules.overridden:
        # the reference differentiates the sweep and the shipped rules' own code with the
        # user's rules (a rule for `+` applies to the sum of two cotangents, too)
        raise _routes.Declined("a shipped rule is replaced by the user's")
    return tape_hvp(f, x, v)


def _outermost() -> None:
    """The fast routes compute on plain values: none runs inside an enclosing context."""
    if _enclosed():
        raise _routes.Declined("inside an enclosing context")


def _nested(f: Callable[..., Any], x: Any, v: Any) -> Any:
    """The reference route: ``jvp(grad(f), (x,), (v,))``, each leaf in its argument's type,
    as the other routes give it (a float for a float, an array for a 0-d array)."""
    out = jvp(_grad(f, 0, False, False, "hvp"), (x,), (v,))[1]
    leaves, tree = flatten(out)
    xleaves = flatten(x)[0]
    if len(leaves) != len(xleaves):  # (a structure grad changed: as it is)
        return out
    return unflatten(tree, [t if t is None or leaf is None else _cast(t, leaf)
                            for t, leaf in zip(leaves, xleaves)])


_ROUTES = (("hvp-compiled", _compiled), ("hvp-tape", _on_the_tape), (_routes.REFERENCE, _nested))
