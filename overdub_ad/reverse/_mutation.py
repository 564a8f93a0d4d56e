"""Writes into arrays, versioned: an array written in place stands for a new node, its views
follow, and values entries need are saved before they are overwritten.  (Methods of
:class:`ReverseContext`.)"""

from __future__ import annotations

import operator
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from overdub import Tagged, untag

from .. import _arrays, _rules
from .._shared import _innermost, plain_key, unfollowed_write
from . import _containers
from ._calls import _dict_storing, _INPLACE, _READS_TARGET, _replace, _stored
from ._tape import (_element_index, _Entry, _Joint, _Node, _placeholder, _root, _write,
                    _ZERO_IDS)

if TYPE_CHECKING:
    from ._context import ReverseContext


def _track(self: ReverseContext) -> None:
    """Start keeping ``held``: first the arrays the entries recorded so far hold."""
    self.tracking = True
    for entry in self.tape:
        if type(entry) is _Entry:
            self._hold(entry, entry.primals, entry.out)


def _save_before_write(self: ReverseContext, array: np.ndarray) -> None:
    """Entries that read ``array`` (or memory it shares) keep the values they read."""
    if not self.tracking:
        self._track()
    key = id(_root(array))
    slot = self.held.get(key)
    if not slot:
        return
    keep: list[Any] = []
    copies: dict[int, Any] = {}
    for value, entry, path in slot:
        if value is array or np.may_share_memory(value, array):
            # one copy per value held: under an enclosing context, per tagged value (the same
            # array given as two arguments is two values to it, each its own derivative)
            held = _stored(entry, path) if self.nested else value
            saved = copies.get(id(held))
            if saved is None:
                # (the enclosing context keeps the copy's derivative)
                saved = copies[id(held)] = self._run(np.copy, held) if self.nested else \
                    value.copy()
            _replace(entry, path, value, saved)
        else:
            keep.append((value, entry, path))
    if keep:
        self.held[key] = keep
    else:
        del self.held[key]


def _save_all(self: ReverseContext) -> None:
    """The tape outlives the run (``vjp``'s pullback): the caller may write into an array it
    holds -- an input (an optimiser's step), the output, an array from outside, a buffer --
    before the pullback is called, which must see the values the forward pass used (as JAX's
    does: its arrays cannot change).  Every array the tape holds is copied, once; an array
    only the tape held is freed as its copy is made, so memory grows by what the caller
    still holds, not by the tape.  ``grad`` sweeps before it returns and never pays this."""
    copies: dict[int, Any] = {}
    kept, zeros = self._kept, _ZERO_IDS
    ndarray = None if self.nested else np.ndarray  # (under an enclosing context: _kept)
    for entry in self.tape:
        if type(entry) is not _Entry:
            continue  # (floats, and placeholders of the arrays read)
        primals = entry.primals
        for i, value in enumerate(primals):
            if type(value) is ndarray:  # (the common case, as _kept does)
                if id(value.base) not in zeros:
                    saved = copies.get(id(value))
                    if saved is None:
                        saved = copies[id(value)] = value.copy()
                    primals[i] = saved
            elif type(value) in _HOLDERS or isinstance(value, tuple):
                primals[i] = kept(value, copies)
        out = entry.out
        if type(out) is ndarray:
            if id(out.base) not in zeros:
                saved = copies.get(id(out))
                if saved is None:
                    saved = copies[id(out)] = out.copy()
                entry.out = saved
        elif type(out) in _HOLDERS or isinstance(out, tuple):
            entry.out = kept(out, copies)
        if entry.kwargs:
            entry.kwargs = {name: kept(value, copies) for name, value in entry.kwargs.items()}
        if entry.joint is not None and type(entry.joint) is _Joint:
            entry.joint.residuals = kept(entry.joint.residuals, copies)
    self.held.clear()
# What may hold an array for _save_all: itself, an enclosing context's tag, a container.
_HOLDERS = frozenset({np.ndarray, Tagged, tuple, list, dict})


def _kept(self: ReverseContext, x: Any, copies: dict[int, Any], within: tuple[int, ...] = ()
          ) -> Any:
    """``x`` with copies of its arrays (through tuples, named tuples, lists and dicts, at any
    depth: NumPy reads nested lists to any depth), for :meth:`_save_all`.  ``within``: the
    ids of the containers on the way down (a container holding itself is kept as it is)."""
    value = _innermost(x)
    kind = type(value)
    if kind is np.ndarray:
        if id(value.base) in _ZERO_IDS:  # a placeholder
            return x
        # one copy per value held (see _save_before_write); the enclosing context keeps the
        # copy's derivative
        saved = copies.get(id(x))
        if saved is None:
            saved = copies[id(x)] = self._run(np.copy, x) if self.nested else value.copy()
        return saved
    if id(x) in within or not (kind in (list, tuple, dict) or (isinstance(x, tuple) and
                                                               hasattr(x, "_fields"))):
        return x
    within = (*within, id(x))
    if kind is dict:
        return {key: self._kept(item, copies, within) for key, item in x.items()}
    items = [self._kept(item, copies, within) for item in x]
    if kind is list:
        return items
    return kind(*items) if hasattr(x, "_fields") else tuple(items)


def _note_views(self: ReverseContext, primals: list[Any], inputs: list[Any], out: Any,
                outputs: Any) -> None:
    """A view of a differentiated array: remember that array's node (a write into the view
    updates it) and the write generation the view belongs to."""
    pairs = zip(out, outputs) if isinstance(out, (tuple, list)) else ((out, outputs),)
    for o, node in pairs:
        o = _innermost(o)
        if type(o) is not np.ndarray or not isinstance(o.base, np.ndarray) or node is None:
            continue
        root = _root(o)
        for p, n in zip(primals, inputs):
            p = _innermost(p)
            if p is root and type(n) is _Node and id(root) not in self.roots:
                self.roots[id(root)] = (weakref.ref(root), n)
        rslot = self.versions.get(id(root))
        if rslot is not None and rslot[0]() is root:
            node.gen = rslot[2]


def _root_node(self: ReverseContext, root: np.ndarray) -> Any:
    node = self._array_node(root, None)
    if node is None:
        slot = self.roots.get(id(root))
        if slot is not None and slot[0]() is root:
            node = slot[1]
    return node


def _holds(self: ReverseContext, array: np.ndarray) -> bool:
    """Whether tape entries hold values in ``array``'s memory: then a write into it, even
    of constants into an array that is not differentiated (a scratch buffer refilled),
    is recorded like any other, so that they keep the values they read."""
    if not self.tape:
        return False
    if not self.tracking:
        self._track()
    return id(_root(array)) in self.held


def _commit(self: ReverseContext, array: np.ndarray, node: Any) -> None:
    """``array`` now holds the value of ``node`` (None: a constant); if it is a view, the
    array it views gets a new version too."""
    if array.size == 0:
        return  # (A[:, mask] *= c selecting nothing: no memory written; NumPy's empty result
        # of such an index views a buffer of its own, not the array)
    root = _root(array)
    if node is None and self._root_node(root) is None:
        slot = self.versions.get(id(root))
        if slot is None or slot[0]() is not root:
            return  # a constant written into a plain array: it stays plain
    if root is array:
        self._bump(root, node)
        return
    old = self._root_node(root)
    index = _element_index(array, root)
    if index is None:
        raise NotImplementedError(
            f"overdub_ad reverse mode: an in-place write into a view of dtype {array.dtype} "
            f"of an array of dtype {root.dtype} is not supported")
    new = None
    if old is not None or node is not None:
        new = _Node()
        self.tape.append(_Entry(_write, [_placeholder(root), index, _placeholder(array)], {},
                                None, [old, None, node], new))
    gen = self._bump(root, new)
    self._set_slot(array, node, gen)


def _bump(self: ReverseContext, root: np.ndarray, node: Any) -> int:
    slot = self.versions.get(id(root))
    gen = slot[2] + 1 if slot is not None and slot[0]() is root else 1
    self._set_slot(root, node, gen)
    return gen


# -- writes --------------------------------------------------------------------------------
def _setitem(self: ReverseContext, fn: Any, container: Any, index: Any, *value: Any) -> Any:
    target = _innermost(container)
    if type(target) in (list, dict) or _dict_storing(target):
        # stored as it is, so that native iteration keeps the derivative
        self._note_store(target)
        if type(index) is slice and value and self._differentiated_array(value[0]):
            value = (self._elements(value[0]),)  # lst[i:j] = a: a's elements, each
        elif type(index) is slice and value and _containers.fed(value[0]):
            value = (self._fed_items(value[0]),)  # lst[:] = genexpr: its items, each
        # a dict's key as it is (its derivative is read back by iterating the dict; the
        # key is made plain when f returns), a list's index plain
        key = index if isinstance(target, dict) and self._carries(index) else \
            self._plain(index)
        if key is index and isinstance(target, dict):  # (an accumulator's item: made_here)
            self.keys_written.add((id(target), plain_key(key)))
        if type(key) is Tagged and key.owner is not self._ref and self.nested:
            # a key an enclosing context tagged: it stores the key plain (and the value as
            # it is), as it does for its stores
            return self.fallback(fn, target, key, *value)
        return fn(target, key, *value)
    if type(target) is np.flatiter:  # a.flat[i] = v
        array = target.base
        positions = np.arange(array.size)[self._plain(index)]
        written, n = value[0], np.size(self._plain(value[0]))
        if np.ndim(self._plain(written)) and n != np.size(positions):
            # the values cycled over the positions, or cut short (one: the first), as NumPy's
            flat = self.execute(np.ravel, written)
            written = self.execute(operator.getitem, flat, 0) if np.ndim(positions) == 0 \
                else self.execute(np.take, flat, np.arange(np.size(positions)) % n)
        index = np.unravel_index(positions, array.shape)
        return self._write_item(array, index, written)
    if _arrays.is_foreign_array(target):
        raise _arrays.write_error(target, "reverse")
    if not isinstance(target, np.ndarray):
        raise _rules.missing(getattr(type(target), "__setitem__", fn), 0, "reverse",
                             type(self).__name__)
    if fn is operator.delitem:
        return self._run(fn, untag(container, self), index)
    return self._write_item(container, self._plain(index), value[0])


def _write_item(self: ReverseContext, container: Any, index: Any, value: Any) -> None:
    """``a[index] = value`` on an array: a functional update on the tape, in place."""
    array = _innermost(container)
    if _arrays.is_foreign_array(array):  # an out= buffer
        raise _arrays.write_error(array, "reverse")
    if type(value) in (list, tuple) and self._carries(value):
        value = self._call(np.array, (value,), {})
    old = self._node(container)
    value_node = self._node(value)
    if old is not None or value_node is not None:
        error = unfollowed_write(array, "reverse")  # (s["x"] = v)
        if error is not None:
            raise error
    plain_value = self._plain(value)
    if value_node is not None and _truncated(array, plain_value):
        value_node = None  # the elements written are constants, as int(x) is
    self._save_before_write(array)
    self._run(operator.setitem, untag(container, self), index, plain_value)
    node = None
    if old is not None or value_node is not None:
        node = _Node()
        self.tape.append(_Entry(_write, [_placeholder(array), index,
                                         _placeholder(plain_value)], {}, None,
                                [old, None, value_node], node))
    self._commit(array, node)


def _truncated(array: np.ndarray, value: Any) -> bool:
    """Whether writing ``value`` into ``array`` keeps none of its derivative: a float or
    complex value written into an integer array is truncated, anything into a bool array
    becomes True or False; both are constant near the point, as ``int(x)`` and ``bool(x)``
    are (``np.array([x], dtype=int)`` is not differentiated either).  A differentiated
    integer (``max(0, x)`` below 0) written into an integer array is kept as it is, as
    forward mode keeps it."""
    kind = array.dtype.kind
    if kind not in "biu":
        return False
    return kind == "b" or np.result_type(_innermost(value)).kind not in "biu"


def _write_inplace(self: ReverseContext, fn: Any, target: Any, other: Any) -> Any:
    """``a += b`` on an array: recorded as ``a = a + b``, the array object kept."""
    array = _innermost(target)
    inputs = [self._node(target), self._inputs(other)]
    if inputs[0] is not None or inputs[1] is not None:
        error = unfollowed_write(array, "reverse")  # (v += x, v an operand of np.nditer)
        if error is not None:
            raise error
    plain_other = self._plain(other)
    target_p = untag(target, self)
    pure = _INPLACE[fn]
    self._save_before_write(array)
    other_array = _innermost(plain_other)
    if fn in _READS_TARGET and type(other_array) is np.ndarray and \
            np.may_share_memory(other_array, array):
        # y *= y, y *= y[::-1]: the rules read the operand as it was before the write
        plain_other = self._run(np.copy, plain_other) if self.nested else other_array.copy()
    if self.nested:
        # functionally, through the enclosing context (which sees the new values), then
        # copied into the array
        before = self._run(np.copy, target_p) if fn in _READS_TARGET else \
            _placeholder(array)
        new = self._run(pure, target_p, plain_other)
        self._run(operator.setitem, target_p, Ellipsis, new)
    else:
        before = array.copy() if fn in _READS_TARGET else _placeholder(array)
        fn(array, plain_other)
        new = array
    node = None
    if _rules.is_nondifferentiable(pure):  # a //= b: constants now, written as a[...] = c is
        if inputs[0] is not None:
            node = _Node()
            self.tape.append(_Entry(_write, [_placeholder(array), Ellipsis, _placeholder(array)],
                                    {}, None, [inputs[0], None, None], node))
    elif inputs[0] is not None or inputs[1] is not None:
        node = _Node()
        entry = _Entry(pure, [before, plain_other], {}, new, inputs, node)
        self.tape.append(entry)
        self._hold(entry, [None, plain_other], new)
    self._commit(array, node)
    return target


def _write_out(self: ReverseContext, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``np.add(a, b, out=c)``: ``c`` gets the new value (and node); recorded without out."""
    out = kwargs["out"]
    targets = out if isinstance(out, tuple) else (out,)
    rest = {k: v for k, v in kwargs.items() if k not in ("out", "where")}
    where = kwargs.get("where", True)
    if out is Ellipsis:  # (NumPy 2: out=... asks for an array, 0-d too; nothing is written)
        return self.execute(np.asarray, self.execute(fn, *args, **{**rest, **(
            {} if where is True else {"where": where})}))
    result = self.execute(fn, *args, **rest)
    results = result if isinstance(result, tuple) and len(targets) > 1 else (result,)
    for target, value in zip(targets, results):
        if target is None:
            continue
        if where is not True:
            value = self._call(np.where, (where, value, target), {})
        self._write_item(target, Ellipsis, value)
    if len(targets) == 1:
        return targets[0]
    return tuple(value if target is None else target  # (out=(r1, None): NumPy's own second)
                 for target, value in zip(targets, results))


def _copyto(self: ReverseContext, dst: Any, src: Any, casting: str = "same_kind",
            where: Any = True) -> None:
    if where is not True:
        src = self._call(np.where, (where, src, dst), {})
    self._write_item(dst, Ellipsis, src)


def _set_shape(self: ReverseContext, container: Any, shape: Any) -> None:
    """``a.shape = s``: the array object keeps its memory and takes a new shape, so the node
    it stands for from here on is a reshape of the one before (the cotangent of a value the
    array held, written in place, has that value's shape); entries that hold the array keep
    a copy of it in its shape before (as before a write: their rules read it).  Views keep
    their nodes: no value changed."""
    array = _innermost(container)
    old = self._node(container)
    self._save_before_write(array)
    before = _placeholder(array)
    self._run(setattr, untag(container, self), "shape", self._plain(shape))
    if old is None:
        return
    node = _Node()
    self.tape.append(_Entry(np.reshape, [before, array.shape], {}, None, [old, None], node))
    slot = self.versions.get(id(_root(array)))
    self._set_slot(array, node, slot[2] if slot is not None and slot[0]() is _root(array)
                   else 0)
