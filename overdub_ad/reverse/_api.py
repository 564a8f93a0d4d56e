"""Reverse mode's public functions: ``vjp``, ``grad``, ``value_and_grad``, ``jacrev``,
``checkpoint``."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from overdub import Context, Tagged, hide_machinery, opaque, overdub

from .. import _arrays, _rules
from .._custom import custom_vjp
from .._pytree import flatten, is_node, unflatten
from .._shared import (check_argnums, _check_differentiated, _check_output, _entry, _innermost,
                       _normalize_argnums, not_differentiable,
                       not_differentiable_error, _OWN_CODE)
from ._calls import _REAL_TYPES
from ._sweep import _enclosed, _forward, _pull, _rebuild, _release, _sweep, _tree_leaves
from ._tape import _check_ct


@opaque
@_entry
def vjp(f: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """``(f(*primals), pullback)``; ``pullback(ct)`` gives the cotangent of every primal.
    With ``has_aux=True``, ``f`` returns ``(output, aux)`` and ``vjp`` returns
    ``(output, pullback, aux)``, ``aux`` not differentiated (as JAX's).

    Primals and the output are pytrees of floats, complex numbers and arrays.  The tape lives
    as long as ``pullback`` does; ``pullback`` may be called any number of times, and uses the
    values the forward pass used even if the primals, the output or other arrays it read are
    written in place meanwhile (an optimiser's step): the tape keeps copies of the arrays it
    holds.

    Example::

        out, pullback = vjp(lambda x: np.sin(x) * 2, np.ones(3))
        pullback(np.ones(3))   # (2 * cos(1) * ones(3),)

    See also: :func:`grad`, :func:`jacrev`, :func:`overdub_ad.jvp`.
    """
    if not callable(f):
        raise TypeError(f"vjp: f must be callable, got {f!r}")
    argnums = tuple(range(len(primals)))
    tape, (tree, plain, out_nodes), nodes = _forward(f, primals, {}, argnums, keeps=True)
    aux = None
    if has_aux:
        tree, plain, out_nodes, aux = _split_aux(tree, plain, out_nodes, "vjp")

    @opaque
    @_entry
    def pullback(ct: Any) -> tuple[Any, ...]:
        cts = _check_ct(tree, plain, ct)
        _check_ct_kinds(plain, cts)
        return _sweep(tape, out_nodes, cts, nodes, argnums)

    out = unflatten(tree, plain)
    return (out, pullback, aux) if has_aux else (out, pullback)


def _check_ct_kinds(outputs: list[Any], cts: list[Any]) -> None:
    """A complex cotangent for a real output is refused (JAX raises too): a real output's
    cotangent is real, and the sweep would drop the imaginary part without a word."""
    for y, c in zip(outputs, cts):
        y = _innermost(y)
        if c is not None and _arrays.is_numeric(y) and not _arrays.is_complex(y) and \
                _arrays.is_complex(c):
            raise ValueError(
                f"vjp: the pullback was given a complex cotangent for a real output (a "
                f"{getattr(y, 'dtype', type(y).__name__)}): its imaginary part has no meaning "
                f"there; pass a real cotangent (for the derivative of a complex output, make "
                f"the output complex)")


def _split_aux(tree: Any, plain: list[Any], out_nodes: list[Any], api: str
               ) -> tuple[Any, list[Any], list[Any], Any]:
    """``f``'s output ``(output, aux)`` with ``has_aux=True``: the output's structure, leaves
    and nodes, and ``aux`` (whose leaves are not differentiated: their nodes are dropped)."""
    pair = unflatten(tree, plain)
    if not (isinstance(pair, tuple) and len(pair) == 2):
        raise TypeError(f"{api}(has_aux=True): f must return a pair (output, auxiliary data), "
                        f"got {type(_innermost(pair)).__name__}")
    leaves, out_tree = flatten(pair[0])
    return out_tree, plain[:len(leaves)], out_nodes[:len(leaves)], pair[1]


@opaque
@_entry
def value_and_grad(f: Callable[..., Any], argnums: int | tuple[int, ...] = 0,
                   has_aux: bool = False, holomorphic: bool = False) -> Callable[..., Any]:
    """A function returning ``(f(*args), grad)`` (``((value, aux), grad)`` with ``has_aux``)."""
    if not callable(f):
        raise TypeError(f"value_and_grad: f must be callable, got {f!r}")
    argnums = check_argnums("value_and_grad", argnums)
    return opaque(_entry(_value_and_grad(f, argnums, has_aux, holomorphic, "value_and_grad")))


def _checked_inputs(args: tuple[Any, ...], nums: tuple[int, ...], holomorphic: bool,
                    api: str) -> None:
    """The differentiated arguments refused before anything runs, naming ``api``: one that
    is no number (a bool, a str, an object), or, with ``holomorphic=True``, a real one (JAX's
    rule: a holomorphic derivative is of a function of complex numbers).  A float or a float
    array, the common case, passes at once."""
    for num in nums:
        x = args[num]
        if (type(x) is float or (type(x) is np.ndarray and x.dtype.kind == "f")) and \
                not holomorphic:
            continue
        for leaf in flatten(x)[0]:
            if leaf is None:
                continue
            what = not_differentiable(leaf)
            if what is not None:
                raise not_differentiable_error(what, api)
            if holomorphic and not _arrays.is_complex(leaf):
                plain = _innermost(leaf)
                raise TypeError(f"{api}(holomorphic=True) requires complex inputs, got "
                                f"{getattr(plain, 'dtype', type(plain).__name__)} (argument "
                                f"{num})")


def _value_and_grad(f: Callable[..., Any], argnums: int | tuple[int, ...], has_aux: bool,
                    holomorphic: bool, api: str) -> Callable[..., tuple[Any, ...]]:
    """:func:`value_and_grad`'s function, its arguments checked, bare: ``grad`` calls it from
    its own entry point (one entry point per call, not two: ``grad(f)`` is often made per
    call, as in a training loop, and each costs a ``functools.wraps``).  ``api``: the function
    the user called (``grad``, ``hessian``, ``hvp``...), named in the errors."""

    def value_and_gradient(*args: Any, **kwargs: Any) -> tuple[Any, ...]:
        nums = _normalize_argnums(argnums, len(args), api)
        _checked_inputs(args, nums, holomorphic, api)
        enclosed = _enclosed()
        tape, (tree, plain, out_nodes), nodes = _forward(f, args, kwargs, nums, enclosed)
        out = unflatten(tree, plain)
        aux = None
        value_nodes = out_nodes
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise TypeError(f"{api}(has_aux=True): f must return a pair (output, "
                                f"auxiliary data), got {type(_innermost(out)).__name__}")
            out, aux = out
            value_nodes = out_nodes[:len(flatten(out)[0])]
        value = out
        inner = _innermost(value)
        seed: Any = 1.0
        if type(inner) not in _REAL_TYPES and not _arrays.is_numeric(inner) and \
                not callable(inner):
            _release(tape)
            _check_output(value, api)  # None, a str, an object no pytree takes apart: raises
        if type(inner) is not float and value_nodes and value_nodes[0] is None and \
                type(value) is not Tagged:  # (not an enclosing derivative's either)
            _release(tape)
            _check_differentiated(inner, False, api)  # a constant int, a bool: raises
        if type(inner) not in _REAL_TYPES:  # (a real number passes every check below)
            if callable(inner) and not _arrays.is_numeric(inner):
                _release(tape)
                lazy = _FunctionGradient(f, args, kwargs, argnums, has_aux, holomorphic)
                return ((value, aux), lazy) if has_aux else (value, lazy)
            pytree = isinstance(inner, (tuple, list, dict)) or is_node(inner)
            if pytree or math.prod(np.shape(inner)) != 1:
                # (one element in any shape, (1,) or (1, 1), is a scalar: autograd and
                # PyTorch take it; JAX refuses it -- code written for autograd is kept)
                got = f"a value of type {type(inner).__name__}" if pytree else \
                    f"shape {np.shape(inner)}"
                _release(tape)
                raise NotScalar(f"{api} requires a scalar output, got {got}; use jacrev for a "
                                f"Jacobian or vjp for a vector-Jacobian product")
            if _arrays.is_complex(inner) and not holomorphic:
                _release(tape)
                raise TypeError(f"{api} of a complex-valued function: pass holomorphic=True "
                                f"for the complex derivative, or take the real part")
            # a foreign array's seed is one of its namespace, so that the rules compute there
            # NumPy's: in the output's precision, so that a float32 function's backward pass
            # (and a derivative of it, hessian) stays in float32
            seed = _arrays.one_like(inner) if _arrays.is_foreign_array(inner) else \
                np.ones_like(inner) if isinstance(inner, np.ndarray) else \
                inner.dtype.type(1) if isinstance(inner, np.generic) else \
                1.0 + 0.0 * inner if _arrays.is_complex(inner) else 1.0
        grads = _pull(tape, value_nodes, [seed], nodes, nums, not enclosed, consume=True)
        _release(tape)
        result = grads if isinstance(argnums, tuple) else grads[0]
        return ((value, aux), result) if has_aux else (value, result)

    return value_and_gradient


class NotScalar(TypeError):
    """``grad`` of a function whose output is not a scalar (``hessian`` then takes the
    Jacobian's Jacobian, as JAX's)."""


class _FunctionGradient:
    """The gradient of a function-valued function, applied lazily, like forward mode's
    derivative of one (Manzyuk et al., JFP 2019): the gradient of ``x -> g_x`` at ``x0`` is
    the function ``y -> grad(x -> g_x(y))(x0)``, each call a fresh tape."""

    def __init__(self, f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                 argnums: int | tuple[int, ...], has_aux: bool, holomorphic: bool) -> None:
        self.f, self.args, self.kwargs = f, args, kwargs
        self.argnums, self.has_aux, self.holomorphic = argnums, has_aux, holomorphic

    @opaque
    @_entry
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        f, outer_kwargs, has_aux = self.f, self.kwargs, self.has_aux

        def applied(*xs: Any) -> Any:
            out = f(*xs, **outer_kwargs)
            return (out[0] if has_aux else out)(*args, **kwargs)

        return grad(applied, self.argnums, holomorphic=self.holomorphic)(*self.args)


@opaque
@_entry
def grad(f: Callable[..., Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False,
         holomorphic: bool = False) -> Callable[..., Any]:
    """The gradient of scalar-valued ``f`` with respect to argument(s) ``argnums``.

    For real-valued ``f`` of complex ``z = x + iy`` the gradient is ``df/dx - i df/dy`` (JAX's
    and autograd's convention; PyTorch returns its conjugate).  ``holomorphic=True`` gives the
    complex derivative ``f'(z)`` of a holomorphic ``f`` (and requires complex inputs).

    The output is a number or an array of one element (shape ``()``, ``(1,)``: as autograd
    and PyTorch take it; JAX refuses ``(1,)``).  ``argnums``
    is an int or a sequence of ints (then the gradients come as a tuple); keyword arguments
    of the call pass to ``f``, not differentiated.

    Example::

        grad(lambda x: np.sum(np.sin(x)))(np.zeros(3))   # ones(3)
    """
    if not callable(f):
        raise TypeError(f"grad: f must be callable, got {f!r}")
    return _grad(f, check_argnums("grad", argnums), has_aux, holomorphic, "grad")


def _grad(f: Callable[..., Any], argnums: int | tuple[int, ...], has_aux: bool,
          holomorphic: bool, api: str) -> Callable[..., Any]:
    """:func:`grad`'s function, its arguments checked; ``api`` names the function the user
    called in its errors (``hessian`` and ``hvp`` take gradients too)."""
    value_and_gradient = _value_and_grad(f, argnums, has_aux, holomorphic, api)

    @opaque
    def gradient(*args: Any, **kwargs: Any) -> Any:
        # _entry's work written out: grad(f) is often made per call (a training loop), and
        # _entry's functools.wraps costs more than a small gradient's own recording
        made, token = _rules.running_derivative()
        try:
            out = value_and_gradient(*args, **kwargs)
        except BaseException as exc:
            hide_machinery(exc, _OWN_CODE)
            raise
        finally:
            _rules._RUNNING.reset(token)
        if made:  # (a MissingRuleError the program caught: see caught_missing)
            raise _rules.caught_missing(made)
        return (out[1], out[0][1]) if has_aux else out[1]

    return gradient


def _assemble(rows: list[Any], y: Any, nodes: dict[Any, Any], nums: tuple[int, ...],
              multiple: bool) -> Any:
    """Jacobian blocks from the rows (one sweep per element of output ``y``).  Built with
    comprehensions: it may run under an enclosing context (no list.append)."""
    shape = np.shape(_innermost(y))
    per_num = [_rebuild(nodes[num][1], [_block(rows, i, j, shape, x)
                                        for j, x in enumerate(nodes[num][0])])
               for i, num in enumerate(nums)]
    return tuple(per_num) if multiple else per_num[0]


def _block(rows: list[Any], i: int, j: int, shape: tuple[int, ...], x: Any) -> Any:
    if x is None:  # an empty pytree (see _seed)
        return None
    xshape = np.shape(_innermost(x))
    if not rows:
        return np.zeros(shape + xshape)
    leaves = [_tree_leaves(r[i])[j] for r in rows]
    # (an array of another namespace as it is: asarray would copy it to the host)
    stacked = np.stack([leaf if _arrays.is_foreign_array(leaf) else np.asarray(leaf)
                        for leaf in leaves])
    return np.reshape(stacked, shape + xshape)


@opaque
@_entry
def jacrev(f: Callable[..., Any], argnums: int | tuple[int, ...] = 0,
           holomorphic: bool = False, has_aux: bool = False) -> Callable[..., Any]:
    """The Jacobian of ``f`` by reverse mode: one pullback per output element.

    Shape ``out.shape + x.shape`` (JAX's convention), for each output leaf and each input
    leaf of pytrees; ``jacobian`` is the same function.  A complex output needs
    ``holomorphic=True`` (as in JAX), which gives the complex derivatives ``df_i/dz_j`` of a
    holomorphic ``f`` and checks that the inputs and outputs are complex: without it a
    complex output raises ``TypeError`` (for a non-holomorphic ``f`` the pullbacks of unit
    cotangents are no Jacobian; of real inputs, a real input's cotangent cannot hold the
    derivative of the imaginary part, which :func:`jacfwd` gives).  A real output of complex
    inputs gives ``df/dx - i df/dy``, as :func:`grad`.  Keyword arguments of the call pass to
    ``f``, not differentiated.  With ``has_aux=True``, ``f`` returns ``(output, aux)`` and the
    Jacobian function returns ``(jacobian, aux)`` (as JAX's).
    """
    if not callable(f):
        raise TypeError(f"jacrev: f must be callable, got {f!r}")
    argnums = check_argnums("jacrev", argnums)

    @opaque
    @_entry
    def jacobian(*args: Any, **kwargs: Any) -> Any:
        nums = _normalize_argnums(argnums, len(args), "jacrev")
        if holomorphic:
            _check_complex("inputs", [leaf for num in nums for leaf in flatten(args[num])[0]])
        tape, (tree, plain, out_nodes), nodes = _forward(f, args, kwargs, nums)
        aux = None
        if has_aux:
            tree, plain, out_nodes, aux = _split_aux(tree, plain, out_nodes, "jacrev")
        if holomorphic:
            _check_complex("outputs", plain)
        elif any(_arrays.is_complex(_innermost(y)) for y in plain) and any(
                _arrays.is_numeric(x) and not _arrays.is_complex(x)
                for num in nums for x in map(_innermost, flatten(args[num])[0])):
            # a real input's cotangent is real: the derivative of the output's imaginary
            # part would be dropped (complex inputs get the holomorphic Jacobian, documented)
            _release(tape)
            raise TypeError("jacrev of a complex-valued function of real inputs: use jacfwd "
                            "for the complex Jacobian, or take the real and imaginary parts")
        elif any(_arrays.is_complex(_innermost(y)) for y in plain):
            # (JAX's rule: the complex Jacobian is that of a holomorphic f, which the user
            # says; for any other, a pullback of unit cotangents is no Jacobian, and it would
            # silently disagree with jacfwd's)
            _release(tape)
            raise TypeError("jacrev of a complex-valued function of complex inputs: pass "
                            "holomorphic=True for the complex Jacobian df/dz of a holomorphic "
                            "f; for any other f, take the real and imaginary parts, or use vjp")
        if (len(plain) == 1 and _innermost(plain[0]) is None) or any(
                not (_arrays.is_numeric(_innermost(y)) or callable(_innermost(y)) or
                     _innermost(y) is None) for y in plain):
            _release(tape)
            _check_output(unflatten(tree, plain), "jacrev")  # a str, an object: raises
        if tree.kind == "leaf" and out_nodes[0] is None and type(plain[0]) is not Tagged:
            _release(tape)
            _check_differentiated(plain[0], False, "jacrev")  # a constant int, a bool: raises
        blocks: list[Any] = []
        enclosed = _enclosed()
        for k, y in enumerate(plain):
            inner = _innermost(y)
            if inner is None:  # (an empty pytree among the outputs: its Jacobian is None, as
                blocks.append(None)  # jacfwd's and JAX's)
                continue
            if callable(inner) and not _arrays.is_numeric(inner):
                blocks.append(_FunctionJacobian(f, k, args, kwargs, argnums))
                continue
            size = math.prod(np.shape(inner))
            # unit cotangents: in the output's namespace for an array of another one
            units = _arrays.directions(inner, 0, size) if _arrays.is_foreign_array(inner) \
                else None
            if units is None:
                inner = np.asarray(inner)
                dtype = inner.dtype if inner.dtype.kind in "fc" else np.dtype(float)
            rows = []
            for e in range(size):
                cts: list[Any] = [None] * len(plain)
                if units is not None:
                    cts[k] = units[e, ...]
                else:
                    basis = np.zeros(inner.size, dtype=dtype)
                    basis[e] = 1.0
                    cts[k] = basis.reshape(inner.shape) if inner.ndim else basis[0]
                rows.append(_sweep(tape, out_nodes, cts, nodes, nums))
            args_ = (rows, y, nodes, nums, isinstance(argnums, tuple))
            blocks.append(overdub(Context(), _assemble, *args_) if enclosed
                          else _assemble(*args_))
        _release(tape)
        return (unflatten(tree, blocks), aux) if has_aux else unflatten(tree, blocks)

    return jacobian


jacobian = jacrev


def _check_complex(what: str, leaves: list[Any]) -> None:
    for leaf in leaves:
        plain = _innermost(leaf)
        if not (callable(plain) and not _arrays.is_numeric(plain)) and \
                not _arrays.is_complex(plain):
            raise TypeError(f"jacrev(holomorphic=True) requires complex {what}, got "
                            f"{getattr(plain, 'dtype', type(plain).__name__)}")


class _FunctionJacobian:
    """The Jacobian of output leaf ``leaf`` of ``f`` when that leaf is a function: a function
    too, ``y -> jacrev(x -> f(x)[leaf](y))(x0)``, applied lazily like :class:`_FunctionGradient`."""

    def __init__(self, f: Callable[..., Any], leaf: int, args: tuple[Any, ...],
                 kwargs: dict[str, Any], argnums: int | tuple[int, ...]) -> None:
        self.f, self.leaf, self.args, self.kwargs, self.argnums = f, leaf, args, kwargs, argnums

    @opaque
    @_entry
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        f, leaf, outer_kwargs = self.f, self.leaf, self.kwargs
        return jacrev(lambda *xs: flatten(f(*xs, **outer_kwargs))[0][leaf](*args, **kwargs),
                      self.argnums)(*self.args)


@opaque
@_entry
def checkpoint(f: Callable[..., Any]) -> Callable[..., Any]:
    """``f`` that stores nothing on the tape but its inputs: the backward pass recomputes it.

    Trades time for memory (gradient checkpointing): a 100-layer network's gradient keeps one
    layer's intermediates at a time instead of all of them.  The recomputation reads the
    inputs as they were at the call (one written in place later is kept as it was); ``f``
    must be pure, as JAX's ``checkpoint`` assumes: a random draw or a change of state is
    made again by the recomputation, which is then differentiated.
    """
    if not callable(f):
        raise TypeError(f"checkpoint: {f!r} is not callable")
    checkpointed = custom_vjp(f)

    def fwd(*args: Any) -> tuple[Any, ...]:
        return f(*args), args

    def bwd(args: tuple[Any, ...], ct: Any,
            wanted: tuple[int, ...] | None = None) -> tuple[Any, ...]:
        return _recompute(f, args, ct, tuple(range(len(args))) if wanted is None else wanted)

    checkpointed.defvjp(fwd, bwd)
    checkpointed._wants_inputs = True
    return checkpointed


@opaque
def _recompute(f: Callable[..., Any], args: tuple[Any, ...], ct: Any,
               wanted: tuple[int, ...]) -> tuple[Any, ...]:
    """The cotangents of the arguments ``wanted`` of ``f`` (None for the others), by a fresh
    forward pass whose tape is released at once."""
    tape, (tree, plain, out_nodes), nodes = _forward(f, args, {}, wanted)
    try:
        grads = _sweep(tape, out_nodes, _check_ct(tree, plain, ct), nodes, wanted, consume=True)
    finally:
        _release(tape)
    return tuple([grads[wanted.index(i)] if i in wanted else None for i in range(len(args))])
