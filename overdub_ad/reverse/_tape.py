"""The tape: nodes and entries, the views and versions of arrays written in place, and the
cotangent helpers every sweep shares (unbroadcasting, casting, zeros)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from overdub import Tagged, current_context, overdub

from .. import _arrays, _rules
from .._pytree import flatten, ordered_as, unflatten
from .._shared import _innermost
from ._calls import _NUMERIC, _SCALAR


class _Node:
    """A differentiated value on the tape (identity only).  ``gen``: for a view of an array
    that is written in place, the write generation of that array the view's value belongs to."""

    __slots__ = ("__weakref__", "gen")


class _Entry:
    """One primitive call: how to send its output cotangent back to its arguments."""

    __slots__ = ("fn", "primals", "kwargs", "out", "inputs", "outputs", "joint", "rules")

    def __init__(self, fn: Any, primals: list[Any], kwargs: dict[str, Any], out: Any,
                 inputs: list[Any], outputs: Any, joint: Callable[..., Any] | None = None,
                 rules: tuple[Any, ...] | None = None) -> None:
        self.fn, self.primals, self.kwargs, self.out = fn, primals, kwargs, out
        self.inputs = inputs    # per positional argument: a node, a (nested) list of them, None
        self.outputs = outputs  # a node, or a tuple of nodes (None for integer outputs)
        self.joint = joint      # custom_vjp / checkpoint: ct -> all argument cotangents
        self.rules = rules      # fn's reverse rules, when looked up already (else: the table)


# The two records made for every float operation and every float read of a scalar loop are
# exact tuples headed by their kind -- ``(_Partials, node, ...)``, ``(_ScalarRead, node, ...)``
# -- and the sweeps dispatch on that head.  Not instances of a class: a tuple comes from
# CPython's free list and is untracked by the garbage collector at its first collection, where
# an object of any class (a ``__slots__`` class, a tuple subclass) is allocated, stays tracked,
# and makes the 1,200 records of a small ODE gradient trigger a collection on every call --
# grad of a 200-step Lorenz loop 10-14% slower, measured (half of it the construction).


class _Partials:
    """The kind of a record of float arithmetic with its local partial derivatives:
    ``(_Partials, node, node_1, partial_1, node_2, partial_2, ...)`` -- the output's node (the
    record's position on the tape, an int) and, per operand, its node (None for a constant)
    and the partial of the output in it.  One operation makes one (``x * y``); the reverse
    scalar compiler makes one for a whole expression, with a pair per leaf.  (A head, never
    instantiated: see above.)"""

    __slots__ = ()


class _Second:
    """The kind of a record of float arithmetic on the tapes of :mod:`overdub_ad.hvp`
    (``ReverseContext.second``): ``(_Second, node, curvature, node_1, partial_1, ...)`` -- a
    :class:`_Partials` record with, in ``curvature``, the nonzero second partials of the
    output in its operands, a flat tuple of triples ``(i, j, h_ij)`` (``i <= j``, positions
    among the operands; empty for a linear expression).  The reverse scalar compiler makes
    one per arithmetic expression (``_regions.second_partials``); hvp's passes take the
    tangent of the output and of each partial from it, without the operations' rules.  (A
    head, never instantiated.)"""

    __slots__ = ()


class _ScalarRead:
    """The kind of a record of ``x[i]``, a float read out of a differentiated float array (in
    a loop): ``(_ScalarRead, node, the array's node, index, a placeholder of the array)`` --
    its cotangent is scattered into the array's at ``index``.  (A head, never instantiated.)"""

    __slots__ = ()


class _Linearised:
    """The mark on a tape for :mod:`overdub_ad.hvp` (``ReverseContext.second``) that a
    ``custom_jvp`` rule ran: its tangent map was recorded with primals the tape holds as
    constants, so the hvp passes, which differentiate the tape, would miss how the map
    depends on them.  They decline on this entry; the nested route differentiates the rule."""

    __slots__ = ()


_LINEARISED = _Linearised()


class _Joint:
    """The backward rule of a ``custom_vjp`` or ``checkpoint`` entry, ``ct -> the cotangents of
    all arguments``: ``bwd`` with the residuals ``fwd`` returned (and, for ``checkpoint``, the
    arguments that need a cotangent).  The residuals are an attribute, not a closure's cell,
    so that an array among them that is written in place later -- an argument the caller
    overwrites (``h[:] = checkpoint(layer)(h, w)``) -- is replaced by a copy of what it held,
    as an entry's own values are (see ``_save_before_write``)."""

    __slots__ = ("bwd", "residuals", "wanted")

    def __init__(self, bwd: Callable[..., Any], residuals: Any,
                 wanted: tuple[int, ...] | None) -> None:
        self.bwd, self.residuals, self.wanted = bwd, residuals, wanted

    def __call__(self, ct: Any) -> Any:
        if self.wanted is None:
            return self.bwd(self.residuals, ct)
        return self.bwd(self.residuals, ct, self.wanted)


class _RulesJoint:
    """The backward step of a call of a function with the user's reverse rules whose output
    has several leaves (see ``_recording._user_structure``): each differentiated argument's rule
    gets the cotangent of the output in the output's structure -- a dict for a dict, a
    dataclass for a dataclass -- with zeros where a leaf got none (never None, which a
    rule's arithmetic cannot take)."""

    __slots__ = ("rules", "tree", "out", "primals", "kwargs", "inputs")

    def __init__(self, rules: tuple[Any, ...], tree: Any, out: Any, primals: list[Any],
                 kwargs: dict[str, Any], inputs: list[Any]) -> None:
        self.rules, self.tree, self.out = rules, tree, out
        self.primals, self.kwargs, self.inputs = primals, kwargs, inputs

    def __call__(self, ct: Any, compute: Callable[..., Any] | None = None) -> list[Any]:
        """The cotangent of each argument (None for one not differentiated), each rule run
        by ``compute`` (by default called directly; under an enclosing context, the sweep's,
        which shows it each rule: this bookkeeping runs natively, as a list built under the
        enclosing context would keep its members' derivatives aside)."""
        if compute is None:
            compute = _applied
        rules, inputs, primals, kwargs = self.rules, self.inputs, self.primals, self.kwargs
        structured = unflatten(self.tree, list(ct))
        parts: list[Any] = []
        for i, node in enumerate(inputs):
            rule = rules[i] if i < len(rules) else None
            if node is None or rule is None or rule is _rules.ZERO:
                parts.append(None)
            elif type(rule) is _rules.Carried:
                parts.append(compute(rule.rule, _rules.carried_pattern(inputs), structured,
                                     self.out, *primals, **kwargs))
            else:
                parts.append(compute(rule, structured, self.out, *primals, **kwargs))
        return parts


def _is_differentiable(x: Any) -> bool:
    """A float or complex number or array (an enclosing context's tags looked through)."""
    x = _innermost(x)
    t = type(x)
    if t is float or t is np.float64:
        return True
    if t is int:
        return False
    if isinstance(x, _NUMERIC):
        return not isinstance(x, bool) and np.result_type(x).kind in "fc"
    return _arrays.is_foreign_array_type(t) and _arrays.kind(x) in "fc"


def _root(a: np.ndarray) -> np.ndarray:
    """The array whose memory ``a`` views (``a`` itself if it owns its data)."""
    base = a.base
    while isinstance(base, np.ndarray):
        a, base = base, base.base
    return a


_PLACEHOLDERS: dict[tuple[Any, ...], np.ndarray] = {}  # (shape, dtype) -> placeholder
_ZEROS: dict[Any, np.ndarray] = {}  # dtype -> the zero placeholders of that dtype broadcast
_ZERO_IDS: set[int] = set()  # (their ids: see _is_placeholder)


def _placeholder(x: Any) -> Any:
    """A stand-in for ``x`` with its shape and dtype and no memory (for rules that need only
    those): a read-only broadcast of one zero."""
    if type(x) is not np.ndarray:
        x = _innermost(x)
        if not isinstance(x, np.ndarray):
            return 0.0 * x if isinstance(x, _SCALAR) else x
    key = (x.shape, x.dtype)
    ph = _PLACEHOLDERS.get(key)
    if ph is None:
        if len(_PLACEHOLDERS) > 4096:
            _PLACEHOLDERS.clear()
        zero = _ZEROS.get(x.dtype)
        if zero is None:
            zero = _ZEROS[x.dtype] = np.zeros((), x.dtype)
            _ZERO_IDS.add(id(zero))
        ph = _PLACEHOLDERS[key] = np.broadcast_to(zero, x.shape)
    return ph


def _is_placeholder(x: np.ndarray) -> bool:
    """Whether ``x`` is one of :func:`_placeholder`'s stand-ins (its memory is no one's), also
    one made before the table was last emptied."""
    return id(x.base) in _ZERO_IDS


def _element_index(view: np.ndarray, root: np.ndarray) -> tuple[Any, ...] | None:
    """The elements of ``root`` that ``view`` shows, as an advanced index of ``root`` with the
    view's shape; None if ``view`` does not map element-wise onto ``root``."""
    if view.dtype != root.dtype:
        return None
    item = root.itemsize
    start = view.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    if start % item or any(s % item for s in view.strides) or \
            any(s % item for s in root.strides):
        return None
    pos = np.full(view.shape, start // item, dtype=np.intp)
    for k, (n, s) in enumerate(zip(view.shape, view.strides)):
        shape = [1] * view.ndim
        shape[k] = n
        pos = pos + (np.arange(n, dtype=np.intp) * (s // item)).reshape(shape)
    strides = [s // item for s in root.strides]
    order = sorted((k for k in range(root.ndim) if root.shape[k] > 1), key=lambda k: -strides[k])
    if any(strides[k] <= 0 for k in order):
        return None
    index = [np.zeros(view.shape, np.intp) for _ in range(root.ndim)]
    rest = pos
    for k in order:
        index[k], rest = np.divmod(rest, strides[k])
    if np.any(rest != 0) or any(np.any(i >= n) for i, n in zip(index, root.shape)):
        return None
    return tuple(index)


def _advanced(index: Any) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, (list, np.ndarray, bool, np.bool_)) for i in items)


def _basic(index: Any) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return all(i is None or i is Ellipsis or type(i) in (int, slice) or isinstance(i, np.integer)
               for i in items)


# -- in-place writes as functions ------------------------------------------------------------

def _write(before: np.ndarray, index: Any, value: Any = None) -> np.ndarray:
    out: np.ndarray = before.copy()
    out[index] = value
    return out


def _written(before: Any, index: Any) -> Any:
    mask = np.zeros(np.shape(before), dtype=bool)
    mask[index] = True
    return mask


def _write_ct_array(ct: Any, out: Any, before: Any, index: Any, value: Any = None) -> Any:
    return np.where(_written(before, index), 0.0 * ct, ct)


def _write_ct_value(ct: Any, out: Any, before: Any, index: Any, value: Any) -> Any:
    picked = np.asarray(ct)[index]
    if _advanced(index):  # a position written twice keeps the last value written there
        ids = np.arange(np.size(picked)).reshape(np.shape(picked))
        owner = np.full(np.shape(before), -1)
        owner[index] = ids
        picked = np.where(owner[index] == ids, picked, 0.0 * picked)
    return picked


# The engine's own: not in the public rule tables (it is never called, only recorded).
_WRITE_VJPS = (_write_ct_array, _rules.ZERO, _write_ct_value)


def _carries_int(fn: Any, inputs: list[Any], joint: Any) -> bool:
    """Whether the integer result of ``fn`` on differentiated ``inputs`` carries their
    derivative, as in forward mode: a rule that is not ``ZERO`` reads one of them.  So
    ``max(0, x)`` below 0 -- the constant 0 won -- is differentiated, with derivative 0 (the
    rules of ``max``), and so is ``max(0, x) + max(0, y)``; ``math.floor(x)`` is not."""
    if joint is not None:
        return True
    rules = _rules.vjp_rules(fn)
    return rules is not None and any(
        node is not None and i < len(rules) and rules[i] is not None
        and rules[i] is not _rules.ZERO for i, node in enumerate(inputs))


def _vjps(fn: Any) -> tuple[Any, ...]:
    rules = _WRITE_VJPS if fn is _write else _rules.vjp_rules(fn)
    assert rules is not None  # only functions with rules are recorded
    return rules


# -- the backward sweep --------------------------------------------------------------------

def _applied(fn: Any, *args: Any, **kwargs: Any) -> Any:
    return fn(*args, **kwargs)


def _shape(x: Any) -> tuple[int, ...]:
    """``x``'s shape, read natively: shapes carry no tags, and an array of another namespace
    keeps its own (``np.shape`` would ask NumPy)."""
    x = _innermost(x)
    shape = getattr(x, "shape", None)
    return tuple(shape) if shape is not None else np.shape(x)


def _unbroadcast(ct: Any, x: Any, compute: Any = _applied) -> Any:
    """``ct`` summed to ``x``'s shape (broadcast dimensions), real if ``x`` is real.

    The axes are found natively; ``compute(fn, *args)`` makes the sums (the sweep under an
    enclosing context passes its own, which shows them to that context: a few calls, where
    running this function through it would dispatch each of its lines)."""
    shape = _shape(x)
    if _shape(ct) != shape:
        extra = len(_shape(ct)) - len(shape)
        if extra > 0:
            ct = compute(np.sum, ct, axis=tuple(range(extra)))
        axes = tuple([i for i, n in enumerate(shape) if n == 1 and _shape(ct)[i] != 1])
        if axes:
            ct = compute(np.sum, ct, axis=axes, keepdims=True)
        if _shape(ct) != shape:
            ct = compute(np.reshape, ct, shape)
    if _arrays.is_complex(ct) and not _arrays.is_complex(x):
        ct = compute(np.real, ct)
    return ct


def _summed(ct: Any, x: Any) -> Any:
    """:func:`_unbroadcast` for the sweep with no enclosing context: its common case -- a
    cotangent with extra leading axes, as for a bias added to every row of a batch -- is one
    reduction, without ``np.sum``'s Python layers."""
    if type(ct) is np.ndarray and type(x) is np.ndarray and x.ndim:
        extra = ct.ndim - x.ndim
        if extra > 0 and ct.shape[extra:] == x.shape and \
                (ct.dtype.kind != "c" or x.dtype.kind == "c"):
            return np.add.reduce(ct, axis=0 if extra == 1 else tuple(range(extra)))
    return _unbroadcast(ct, x)


def _read_as_array(part: Any, x: Any) -> bool:
    """Whether ``part``, the cotangent of a list that NumPy read as the array ``x``
    (``np.ones(3) + [s]``), is first summed over the dimensions ``x`` was broadcast along."""
    return type(part) not in (list, tuple) and type(_innermost(x)) is np.ndarray and \
        np.shape(_innermost(part)) != _innermost(x).shape


def _zero_like(x: Any) -> Any:
    x = _innermost(x)
    if isinstance(x, np.ndarray):
        return np.zeros_like(x, dtype=np.result_type(x, 0.0))
    if _arrays.is_foreign_array(x):
        return _arrays.zeros(x)
    return 0.0 * x if isinstance(x, (complex, np.complexfloating)) else 0.0


def _zeros_like(x: Any) -> Any:
    plain = _innermost(x)
    if plain is None:  # an empty pytree's gradient (see _seed)
        return None
    if isinstance(plain, np.ndarray):
        return np.zeros_like(plain, dtype=np.result_type(plain, 0.0))
    if _arrays.is_foreign_array(plain):
        return _arrays.zeros(plain)
    return 0.0 * plain if isinstance(plain, (complex, np.complexfloating)) else 0.0


def _cast(ct: Any, x: Any) -> Any:
    """A cotangent in the type of its input: a float for a float, an array for an array."""
    kind = type(ct)
    if kind is np.ndarray and type(x) is np.ndarray and ct.dtype is x.dtype and \
            ct.shape == x.shape:  # the common case, as below
        return ct if ct.flags.writeable else ct.copy()
    if type(x) is float and (kind is float or kind is np.float64):
        return float(ct)
    plain = _innermost(x)
    if kind is Tagged:  # an enclosing context's derivative: cast as that context sees it
        return _retyped(ct, plain)
    if isinstance(plain, np.ndarray):
        ct = np.asarray(ct)
        if ct.shape != plain.shape:
            ct = np.broadcast_to(ct, plain.shape)
        if plain.dtype.kind in "fc" and ct.dtype != plain.dtype:
            return ct.astype(plain.dtype)  # a float32 input's gradient is float32 (as autograd)
        return ct if ct.flags.writeable else ct.copy()
    if _arrays.is_foreign_array(plain):
        return _arrays.cast(ct, plain)
    if isinstance(plain, np.generic) and plain.dtype.kind in "fc" and np.ndim(ct) == 0:
        # a NumPy scalar's gradient is one of its type (np.float32, np.float64), as forward
        # mode's tangent is
        return plain.dtype.type(ct if plain.dtype.kind == "c" else np.real(ct))
    if isinstance(plain, (float, int)) and not isinstance(plain, bool) and np.ndim(ct) == 0:
        return float(np.real(ct))
    if isinstance(plain, complex) and np.ndim(ct) == 0:
        return complex(ct)
    return ct


def _retyped(ct: Tagged, x: Any) -> Any:
    """``ct`` (tagged by an enclosing context: a second derivative) in the precision of a
    float32 input ``x``, or complex for a complex ``x`` (as without an enclosing context),
    cast under that context so that its derivative is cast too."""
    value = _innermost(ct)
    if not isinstance(x, (np.ndarray, np.generic)) or x.dtype.kind not in "fc" or \
            not isinstance(value, (np.ndarray, np.generic, float)) or \
            np.result_type(value) == x.dtype or \
            (x.dtype.kind == "c" and np.result_type(value).kind != "f"):
        return ct  # (another namespace's arrays keep their own dtype rules)
    dtype = x.dtype
    ctx = current_context()
    return ct if ctx is None else overdub(ctx, _as_dtype, ct, dtype, isinstance(x, np.ndarray))


def _as_dtype(a: Any, dtype: Any, array: bool) -> Any:
    return np.asarray(a, dtype=dtype) if array else dtype.type(a)


def _check_ct(tree: Any, leaves: list[Any], ct: Any) -> list[Any]:
    ct_leaves, ct_tree = flatten(ct)
    if ct_tree != tree:  # (a dict's items in another order: the same pytree, as in JAX)
        ct_leaves, ct_tree = flatten(ordered_as(tree, ct))
    if ct_tree != tree:
        raise ValueError(f"pullback: the cotangent's structure {ct_tree} does not match the "
                         f"output's {tree}")
    for y, c in zip(leaves, ct_leaves):
        if c is not None and callable(y) and not _arrays.is_numeric(y):
            raise TypeError(f"pullback: an output is the function {y!r}, which has no "
                            f"cotangent; pull back through the function applied (vjp of "
                            f"x -> f(x)(y)), or use grad or jacrev, whose result is then a "
                            f"function")
        if c is not None and np.shape(_innermost(c)) != np.shape(_innermost(y)):
            raise ValueError(f"pullback: a cotangent of shape {np.shape(_innermost(c))} for an "
                             f"output of shape {np.shape(_innermost(y))}")
    return ct_leaves
