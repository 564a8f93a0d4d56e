"""Tangents of arrays changed in place (kept by the context, found through any view of the
memory), and the forward context's helpers for writes, copies and bindings."""

from __future__ import annotations

import operator
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from overdub import Tagged, opaque

from .. import _arrays, _rules
from .._shared import _innermost, _INPLACE
from ..rules._common import as_array_tangent

if TYPE_CHECKING:
    from ._context import ForwardContext


_FLOAT_SCALARS = frozenset((float, np.float64, np.float32, np.float16, np.longdouble))


def _exactly_zero(t: Any) -> bool:
    """Whether the tangent ``t`` is an exact zero of a Python or NumPy float scalar (not an
    array, nor another context's value, whose own tangent may not be zero).

    Forward mode on numbers leaves out the term ``partial * t`` of such a tangent: it is
    exactly zero, even where the partial is infinite (``np.sqrt`` at 0, ``math.acos`` at 1,
    ``x ** y`` in ``y`` at a negative ``x``), where ``0 * inf`` would make it ``nan``.  A
    constant (a value without tangent) gets no rule called; a tangent given as ``0.0`` reads
    the same.  Arrays keep IEEE arithmetic elementwise, as in JAX."""
    return t.__class__ in _FLOAT_SCALARS and t == 0.0


def _reshapes(ctx: ForwardContext, args: tuple[Any, ...]) -> bool:
    """Whether ``setattr(*args)`` is ``a.shape = s`` for an array ``a`` tagged by ``ctx``."""
    return len(args) == 3 and args[1] == "shape" and type(args[0]) is Tagged and \
        args[0].owner() is ctx and isinstance(_innermost(args[0]), np.ndarray)


def _batch_of(tangent: Any, x: Any) -> tuple[int, ...]:
    """The batch dimensions of ``tangent``, the tangent of ``x`` (those in front of its own)."""
    shape: tuple[int, ...] = np.shape(_innermost(tangent))
    return shape[:len(shape) - np.ndim(_innermost(x))]


def _inplace_target(fn: Any, primals: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """The array ``fn`` changes in place: the first operand of ``a += b``, or ``out=``."""
    out = kwargs.get("out")
    if isinstance(out, tuple) and len(out) == 1:
        out = out[0]
    out = _innermost(out)
    if isinstance(out, np.ndarray):
        return out
    if id(fn) in _INPLACE and primals and isinstance(_innermost(primals[0]), np.ndarray):
        return _innermost(primals[0])
    for target in (out, _innermost(primals[0]) if id(fn) in _INPLACE and primals else None):
        if _arrays.is_foreign_array(target):
            raise _arrays.write_error(target, "forward")
    return None


@opaque
def _foreign_method(method: Any, *args: Any, **kwargs: Any) -> Any:
    """A method of a differentiated array of another namespace with no NumPy counterpart."""
    raise _rules.missing(method, 0, "forward", "ForwardContext")


def _copyto(dst: Any, src: Any, casting: Any = "same_kind", where: Any = True) -> None:
    """``np.copyto`` as the element write it is (run by the context, which follows writes
    into arrays), after NumPy's own check of the cast."""
    if not np.can_cast(np.result_type(src), np.result_type(dst), casting):
        raise TypeError(f"Cannot cast array data from {np.result_type(src)} to "
                        f"{np.result_type(dst)} according to the rule {casting!r}")
    if where is True:
        dst[...] = src
    else:
        dst[...] = np.where(where, src, dst)


def _masked_call(ufunc: Any, /, *args: Any, out: Any, where: Any, **kwargs: Any) -> Any:
    """``ufunc(*args, out=out, where=where)`` as the masked write it is (run by the context):
    NumPy stores the ufunc's value into ``out`` where ``where`` holds and leaves the other
    elements as they were, tangents included.  The rules ignore ufunc keywords and the
    context's write of ``out=`` covers all of it, so the call is restated: the ufunc computed
    whole, then copied through the mask (:func:`_copyto`), as reverse mode records it."""
    value = ufunc(*args, **kwargs)
    casting = kwargs.get("casting", "same_kind")
    targets = out if type(out) is tuple else (out,)
    values = value if ufunc.nout > 1 else (value,)
    for target, computed in zip(targets, values):
        if target is not None:
            _copyto(target, computed, casting, where)
    if ufunc.nout == 1:
        return targets[0]
    return tuple(computed if target is None else target  # (out=(r1, None): NumPy's own)
                 for target, computed in zip(targets, values))


def _masked(kwargs: dict[str, Any]) -> bool:
    """Whether a ufunc's keywords ask for a masked write: ``where=`` other than ``True`` into
    arrays given as ``out=`` (without them NumPy leaves the masked elements undefined)."""
    if "where" not in kwargs or kwargs["where"] is True:
        return False
    out = kwargs.get("out")
    return out is not None and out is not Ellipsis and not (
        type(out) is tuple and all(o is None for o in out))


def _tolist(x: Any) -> Any:
    """``x.tolist()`` of a differentiated array: a primitive whose elements keep their
    tangents (the tables have no rule for ``np.ndarray.tolist``)."""
    return np.ndarray.tolist(x)


class _ArrayTangents:
    """Tangents of NumPy arrays changed in place by differentiated values.

    ``a[i] = t``, ``a += t`` and ``np.add(x, y, out=a)`` change memory that other names, objects
    and views share, so the tangent cannot ride on a new value: the array keeps plain numbers
    (nothing leaks into it) and the tangent of its *memory* lives here, keyed by the array that
    owns the memory and released with it.  Any array viewing that memory -- the array itself,
    ``a[1:]``, ``a.T``, the row ``a[i]`` of ``a[i][j] = t`` -- reads and writes the same
    tangent through its memory slots (element offsets into the owner's buffer).

    Per owner: the tangent of each memory slot, ``B + (size,)`` (``B`` the batch of
    directions), and which slots were written here.  A plain array's unwritten slots have
    a zero tangent; a tagged array's have its tag's (see :meth:`get`).  All arithmetic on
    tangents goes through ``run`` (the context's ``fallback``): under an enclosing derivative
    the tangents are themselves differentiated values.
    """

    def __init__(self, run: Callable[..., Any]) -> None:
        self._run = run
        # id(owner) -> (weakref, tangents, written mask)
        self._owners: dict[int, tuple[weakref.ref[np.ndarray], Any, np.ndarray]] = {}
        # id(a) -> (weakref, layout, memory slots of a)
        self._slots: dict[int, tuple[weakref.ref[np.ndarray], Any, np.ndarray]] = {}

    def __bool__(self) -> bool:
        return bool(self._owners)

    def has(self, a: np.ndarray) -> bool:
        """Whether ``a``'s memory was written with tangents here."""
        entry = self._owners.get(id(_owner(a)))
        return entry is not None and entry[0]() is _owner(a)

    def get(self, a: np.ndarray, meta: Any = None) -> Any:
        """``a``'s tangent, ``B + a.shape``: written slots from here, the others from
        ``meta`` (the tag's tangent of a tagged array; None: zero)."""
        _, tangents, written = self._owners[id(_owner(a))]
        slots = self.slots(a)
        here = self._run(operator.getitem, tangents, (Ellipsis, slots))
        if np.ndim(slots) == 0:  # (a 0-d array: a view of the buffer, as in read)
            here = self._run(np.copy, here)
        if meta is None:
            return here
        return self._run(np.where, written[slots], here, meta)

    def read(self, a: np.ndarray, key: Any) -> Any:
        """The tangent of ``a[key]`` for a plain ``a`` (unwritten elements: zero)."""
        tangents = self._owners[id(_owner(a))][1]
        slots = self.slots(a)[key]
        out = self._run(operator.getitem, tangents, (Ellipsis, slots))
        # one element's tangent is a view of the buffer that later writes into ``a`` change
        # (x = a[1]; a *= 2 must leave x's tangent as it was): a copy
        return self._run(np.copy, out) if np.ndim(slots) == 0 else out

    def put(self, a: np.ndarray, tangent: Any, computed: Any = None) -> None:
        """All of ``a`` was written: its tangent becomes ``tangent`` (None: zero).
        ``computed``: what was stored, as computed before it was cast to ``a``'s type (an
        in-place operation's own result; ``a`` itself where no cast can truncate it)."""
        self.write(a, Ellipsis, tangent, a if computed is None else computed)

    def write(self, a: np.ndarray, key: Any, dvalue: Any, value: Any) -> None:
        """``a[key] = value`` happened, ``dvalue`` the tangent of ``value`` (None: zero).

        An array of integers or booleans holds a value as a number only where it copies it
        exactly (see :func:`_truncated`); otherwise the written elements' tangent is zero, as
        ``int(x)``'s."""
        kind = a.dtype.kind
        if kind not in "fciub":
            return  # text or dates: no number (an object array the context refuses)
        if dvalue is not None and kind in "iub" and _truncated(kind, value):
            if type(value) in (list, tuple):
                dvalue = self._run(as_array_tangent, dvalue, value)
            dvalue = np.zeros(np.shape(_innermost(dvalue)), _dtype(a))  # (its batch kept)
        if dvalue is None and not self.has(a):
            return  # zero where everything is zero already
        run = self._run
        slots = self.slots(a)[key]
        if dvalue is None:
            entry = self._owners[id(_owner(a))]
            run(operator.setitem, entry[1], (Ellipsis, slots), 0.0)
            entry[2][slots] = True
            return
        if type(value) in (list, tuple):
            dvalue = run(as_array_tangent, dvalue, value)
        vshape = np.shape(value)[max(0, np.ndim(value) - slots.ndim):]
        batch = np.shape(dvalue)[:np.ndim(dvalue) - np.ndim(value)]
        entry = self._entry(a, batch)
        lifted = run(np.reshape, dvalue, batch + (1,) * (slots.ndim - len(vshape)) + vshape)
        spread = run(np.broadcast_to, lifted, batch + slots.shape)
        if not np.iscomplexobj(a) and np.iscomplexobj(_innermost(spread)):
            spread = run(np.real, spread)  # a real array drops imaginary parts
        run(operator.setitem, entry[1], (Ellipsis, slots), spread)
        entry[2][slots] = True

    def slots(self, a: np.ndarray) -> np.ndarray:
        """The memory slots of ``a``'s elements in its owner's buffer, shaped like ``a``."""
        layout = (a.__array_interface__["data"][0], a.shape, a.strides)
        cached = self._slots.get(id(a))
        if cached is not None and cached[0]() is a and cached[1] == layout:
            return cached[2]
        slots = _memory_slots(a, _owner(a))
        key, table = id(a), self._slots
        table[key] = (weakref.ref(a, lambda _: table.pop(key, None)), layout, slots)
        return slots

    def _entry(self, a: np.ndarray, batch: tuple[int, ...]
               ) -> tuple[weakref.ref[np.ndarray], Any, np.ndarray]:
        owner = _owner(a)
        entry = self._owners.get(id(owner))
        if entry is None or entry[0]() is not owner:
            key, table = id(owner), self._owners
            ref = weakref.ref(owner, lambda _: table.pop(key, None))
            entry = table[key] = (ref, np.zeros(batch + (owner.size,), _dtype(owner)),
                                  np.zeros(owner.size, bool))
        return entry


def _owner(a: np.ndarray) -> np.ndarray:
    """The array owning ``a``'s memory (NumPy links a view to the owner directly), when ``a``
    is a plain view of it; otherwise ``a`` itself."""
    base = a.base
    if (isinstance(base, np.ndarray) and base.dtype == a.dtype and base.base is None
            and (base.flags.c_contiguous or base.flags.f_contiguous)):
        return base
    return a


def _memory_slots(a: np.ndarray, owner: np.ndarray) -> np.ndarray:
    """Element offsets of ``a``'s elements from the start of ``owner``'s buffer."""
    itemsize = owner.itemsize
    start = a.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
    if owner is not a and (start % itemsize or any(s % itemsize for s in a.strides)):
        raise TypeError("overdub_ad: cannot follow the tangent of an array view whose strides "
                        "are not whole elements of the array it views")
    if owner is a and not (a.flags.c_contiguous or a.flags.f_contiguous):
        return np.arange(a.size).reshape(a.shape)  # owns scattered memory: its own order
    counter = np.arange(owner.size)
    first = counter[start // itemsize:]
    slots: np.ndarray = np.lib.stride_tricks.as_strided(
        first, a.shape, tuple(s // itemsize * counter.itemsize for s in a.strides)).copy()
    return slots


def _dtype(a: np.ndarray) -> Any:
    return np.result_type(a.dtype, 0.0)


def _truncated(kind: str, value: Any) -> bool:
    """Whether storing ``value`` into an array of integers (``kind`` ``"i"`` or ``"u"``) or
    booleans (``"b"``) is a step function of it: a float or complex number made an integer
    (truncated), anything made a truth value.  An integer (or a boolean) stored among
    integers is copied as it is -- one carrying a derivative keeps it, as ``np.array([x, 2])``
    of an integer ``x`` does (wrapping around a narrower type is piecewise the identity)."""
    return kind == "b" or not _integral(value)


def _integral(value: Any) -> bool:
    """Whether ``value`` (a number, an array, nested lists of them) holds integers and
    booleans only."""
    inner = _innermost(value)
    kind = np.asarray(inner).dtype.kind
    if kind == "O" and type(inner) in (list, tuple):  # (values an enclosing context tagged)
        return all(map(_integral, inner))
    return kind in "biu"
