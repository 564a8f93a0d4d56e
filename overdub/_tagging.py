"""Tagged values: metadata that follows a value through a context, safely under nesting.

``tag(value, ctx, meta)`` wraps ``value`` in a :class:`Tagged` layer owned by the context
*instance* ``ctx``.  Only ``ctx`` sees the layer: to every other context the value is what it
wraps, so nested contexts never confuse each other's metadata.  A value tagged by several
contexts carries one layer per context.

Inside ``ctx`` a tagged value behaves like its value:

- Python functions and ``ctx``'s primitives receive it as it is (primitives are where a context
  acts on its metadata: an AD rule computes the output tangent);
- a C function without a primitive receives the value without ``ctx``'s layer (``type(t) is
  float``, ``isinstance``, ``len``, ``hash``, ``math`` functions...); the metadata is dropped;
- natively evaluated protocols (truth tests, ``f"{t:.3f}"``, iteration, hashing as a dict key)
  act on the value.

Metadata survives the heap, and nothing leaks into it (Cassette's design): storing a tagged value
(``obj.a = t``, ``d[k] = t``, ``lst.append(t)``, ``arr[i] = t``) stores the *plain* value and
records the metadata in shadow storage owned by the context; reading the same place back inside
the context re-attaches it.  After the context returns, the heap holds plain values; a
:class:`Tagged` that escapes some other way (returned inside a container, stashed natively)
raises :class:`TagError` naming its context when used outside it.

Shadow keys: attributes by ``(object, name)``, dict items by ``(dict, key)``, list elements by
the identity of the stored element (so reordering a list keeps its metadata), NumPy arrays by a
metadata array and a mask of the array's shape (one array, not a Python object per element),
released when the array dies; a view's elements are those of the array owning the memory
(``a[1:][0]`` is ``a[1]``).  A stored value is re-tagged only if the place still holds the very
object that was stored.
"""

from __future__ import annotations

import _operator
import collections
import copy
import functools
import gc
import itertools
import math
import operator
import sys
import types
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from . import _active
from ._frames import chained


class TagError(TypeError):
    """A tagged value used where its context cannot give it meaning."""


class Tagged:
    """A value carrying one context's metadata (see :func:`tag`).  Never subclassed.

    Attributes: ``value`` (what it wraps: a plain value or another context's ``Tagged``),
    ``meta`` (the metadata), ``owner`` (weak reference to the owning context).
    """

    __slots__ = ("value", "meta", "owner", "_label", "__weakref__")

    def __init__(self, value: Any, meta: Any, owner: weakref.ref[Any], label: Any) -> None:
        self.value = value
        self.meta = meta
        self.owner = owner
        self._label = label  # the owner's Labels: named in errors even once it is gone

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise TypeError("Tagged cannot be subclassed")

    def _plain(self, use: str) -> Any:
        """The value, for a native use: allowed only while the owning context is running."""
        ctx = self.owner()
        if ctx is None:
            raise TagError(f"{use} of a value tagged by {self._label}, which was garbage-"
                           f"collected: untag values before their context goes away")
        if not _active.running(ctx):
            raise TagError(f"{use} of a value tagged by {self._label} outside that context: "
                           f"{ctx.escape_hint()}")
        return self.value

    def _computed(self, use: str, result: Any) -> Any:
        """``result``, computed natively from the value for ``use`` (arithmetic, a conversion,
        an item), once the owning context has been told (:meth:`Context.native_use`): code it
        does not see made a value from one it tagged, without the metadata."""
        ctx = self.owner()
        if ctx is not None:
            ctx.native_use(use, result)
        return result

    def __repr__(self) -> str:
        # While its context runs, the value's: C code formatting a container (``print([t])``,
        # ``"%r" % (t,)``, ``f"{t!r}"``) reaches the items' ``__repr__`` natively.  Outside
        # it, the debugging text, never a TagError (a debugger or a test report shows it).
        ctx = self.owner()
        if ctx is not None and _active.running(ctx):
            return repr(self.value)
        return f"Tagged({self.value!r}, meta={self.meta!r}, by {self._label})"

    def __getitem__(self, key: Any) -> Any:
        return self._computed("subscript", self._plain("subscript")[key])

    def __contains__(self, item: Any) -> bool:
        return item in self._plain("`in`")

    def __bool__(self) -> bool:
        return bool(self._plain("truth test"))

    def __hash__(self) -> int:
        return hash(self._plain("hash"))

    def __format__(self, spec: str) -> str:
        return format(self._plain("formatting"), spec)

    def __str__(self) -> str:
        return str(self._plain("str()"))

    def __iter__(self) -> Any:
        return iter(self._computed("iteration", self._plain("iteration")))

    def __len__(self) -> int:
        return len(self._plain("len()"))

    def __index__(self) -> int:
        return operator.index(self._plain("use as an index"))

    def __float__(self) -> float:
        return self._computed("float()", float(self._plain("float()")))  # type: ignore

    def __int__(self) -> int:
        return int(self._plain("int()"))

    def __complex__(self) -> complex:
        return self._computed("complex()", complex(self._plain("complex()")))  # type: ignore

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        import numpy
        use = "conversion to an array"
        return self._computed(use, numpy.asarray(self._plain(use), dtype=dtype))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        use = f"attribute {name!r}"
        return self._computed(use, getattr(self._plain(use), name))


def _binary(symbol: str, op: Any, reflected: bool = False) -> Any:
    use = f"operator {symbol}"

    def method(self: Tagged, other: Any) -> Any:
        value = self._plain(use)
        other = _strip_for(other, self.owner)
        return self._computed(use, op(other, value) if reflected else op(value, other))
    return method


def _comparison(symbol: str, op: Any) -> Any:
    use = f"operator {symbol}"

    def method(self: Tagged, other: Any) -> Any:
        return op(self._plain(use), _strip_for(other, self.owner))
    return method


def _power(self: Tagged, other: Any, modulo: Any = None) -> Any:
    """``self ** other``, or ``pow(self, other, modulo)`` (integers)."""
    value = self._plain("operator **")
    other = _strip_for(other, self.owner)
    out = value ** other if modulo is None else pow(value, other, _strip_for(modulo, self.owner))
    return self._computed("operator **", out)


def _integer_part(name: str, fn: Any) -> Any:
    """``round(x)``, ``math.trunc(x)``, ``math.floor(x)``, ``math.ceil(x)``: integer parts,
    like ``int()`` not reported (no metadata they could carry: their derivative is 0)."""
    def method(self: Tagged, *ndigits: Any) -> Any:
        return fn(self._plain(f"{name}()"), *ndigits)
    return method


_OPERATORS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
              "matmul": "@", "and": "&", "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>",
              "divmod": "divmod"}
for _name, _symbol in _OPERATORS.items():
    _op = divmod if _name == "divmod" else \
        getattr(operator, _name + ("_" if _name in ("and", "or") else ""))
    setattr(Tagged, f"__{_name}__", _binary(_symbol, _op))
    setattr(Tagged, f"__r{_name}__", _binary(_symbol, _op, reflected=True))
setattr(Tagged, "__pow__", _power)
setattr(Tagged, "__rpow__", _binary("**", operator.pow, reflected=True))
for _name, _part in (("round", round), ("trunc", math.trunc), ("floor", math.floor),
                     ("ceil", math.ceil)):
    setattr(Tagged, f"__{_name}__", _integer_part(_name, _part))
for _name, _symbol in (("eq", "=="), ("ne", "!="), ("lt", "<"), ("le", "<="), ("gt", ">"),
                       ("ge", ">=")):
    setattr(Tagged, f"__{_name}__", _comparison(_symbol, getattr(operator, _name)))
for _name in ("neg", "pos", "abs", "invert"):
    setattr(Tagged, f"__{_name}__",
            (lambda op, n: lambda self: self._computed(n, op(self._plain(n))))(
                getattr(operator, _name), f"unary {_name}"))


def _strip_for(x: Any, owner: weakref.ref[Any]) -> Any:
    return x.value if type(x) is Tagged and x.owner is owner else x


# -- the public API ----------------------------------------------------------------------------

def owner_of(ctx: Any) -> weakref.ref[Any]:
    """The weak reference that identifies ``ctx``'s tags (one per context instance)."""
    ref: weakref.ref[Any] | None = ctx.__dict__.get("_overdub_ref")
    if ref is None:
        ref = ctx.__dict__["_overdub_ref"] = weakref.ref(ctx)
    return ref


class _Label:
    """Names a context in messages (formatted only when one is shown)."""

    __slots__ = ("kind", "address")

    def __init__(self, ctx: Any) -> None:
        self.kind, self.address = type(ctx).__name__, id(ctx)

    def __str__(self) -> str:
        return f"{self.kind} context at {self.address:#x}"


def _label(ctx: Any) -> _Label:
    label: _Label | None = ctx.__dict__.get("_overdub_label")
    if label is None:
        label = ctx.__dict__["_overdub_label"] = _Label(ctx)
    return label


_Context: Any = None  # overdub.Context, bound on first use (the modules import each other)
_NO_FIELDS: dict[str, Any] = {}  # for objects without a __dict__ (not contexts)
_NO_OWNER = object()  # matches no Tagged.owner
_UNSEEN = object()  # a value type metadata_type was not yet asked about


def tag(value: Any, ctx: Any, meta: Any) -> Tagged:
    """``value`` carrying ``meta`` for the context instance ``ctx`` (and for no other).

    The context decides which metadata a value may carry (:meth:`Context.metadata_type`);
    anything else is a ``TypeError`` here, at the point of the mistake.  Tagging a value that
    ``ctx`` already tagged replaces its metadata.

    Example::

        ctx = MyContext()
        x = tag(1.0, ctx, 2.0)
        overdub(ctx, lambda v: v, x)    # the very value and metadata come back
        untag(x, ctx), metadata(x, ctx) # (1.0, 2.0)

    See also: :func:`untag`, :func:`metadata`, :func:`has_metadata`.
    """
    fields = getattr(ctx, "__dict__", _NO_FIELDS)
    allowed_for = fields.get("_overdub_allowed")
    if allowed_for is None:  # this context's first tag
        allowed_for = _start_tagging(ctx)
    plain = value
    if type(value) is Tagged:
        value = untag(value, ctx)
        plain = innermost(value)
    kind = type(plain)
    allowed = allowed_for.get(kind, _UNSEEN)
    if allowed is _UNSEEN:
        allowed = allowed_for[kind] = ctx.metadata_type(kind)
    if allowed is not object:
        _check_metadata(ctx, plain, meta, allowed)
    return Tagged(value, meta, fields["_overdub_ref"], fields["_overdub_label"])


def _start_tagging(ctx: Any) -> dict[type, Any]:
    """Check that ``ctx`` is a context and make it ready to tag: its identity and label, tag
    handling switched on, and the cache of ``metadata_type`` answers (asked once per type)."""
    global _Context
    if _Context is None:
        from ._context import Context as _Context
    if not isinstance(ctx, _Context):
        raise TypeError(f"tag(value, ctx, meta): ctx must be a Context instance, got {ctx!r}")
    _refuse_at_two_levels(ctx)
    owner_of(ctx)
    _label(ctx)
    _active.enable_tags(ctx)
    allowed_for: dict[type, Any] = ctx.__dict__.setdefault("_overdub_allowed", {})
    return allowed_for


def _refuse_at_two_levels(ctx: Any) -> None:
    """Raise if ``ctx`` runs at two levels of one nesting (entered again inside a context
    that runs inside it, or a generator it returned resumed there): its two runs would
    share the tag identity this first tag makes, and the outer run would read the inner
    one's metadata as its own.  (A context that tags already is refused at the inner
    ``overdub``: see ``_dispatch.reentry_refusal``.)"""
    state, first = _active.active.get(), None
    while state is not None:
        if state.ctx is ctx:
            if first is not None and first is not state:
                name = type(ctx).__name__
                raise RuntimeError(
                    f"tag(value, ctx, meta) with a {name} that runs at two levels of one "
                    f"nesting (inside {type(first.enclosing.ctx).__name__}, which runs inside "
                    f"that same {name} instance): a context that tags values cannot run at "
                    f"two levels of one nesting; give the inner run a context of its own "
                    f"(ctx.similar())")
            first = first or state
        state = state.enclosing


def _check_metadata(ctx: Any, plain: Any, meta: Any, allowed: Any) -> None:
    if allowed is None:
        raise TypeError(f"{type(ctx).__name__} cannot tag values of type "
                        f"{type(plain).__name__} (see {type(ctx).__name__}.metadata_type)")
    if not isinstance(innermost(meta), allowed):  # an enclosing context may tag the metadata
        raise TypeError(f"{type(ctx).__name__} allows metadata of type {_names(allowed)} on "
                        f"{type(plain).__name__} values, got {type(meta).__name__}")


def _names(allowed: Any) -> str:
    if isinstance(allowed, tuple):
        return " or ".join(t.__name__ for t in allowed)
    name: str = allowed.__name__
    return name


_CONTEXT_CLASSES: set[type] = set()  # the Context classes untag has been given


def _context_fields(ctx: Any, verb: str) -> dict[str, Any]:
    global _Context
    if _Context is None:
        from ._context import Context as _Context
    if not isinstance(ctx, _Context):
        raise TypeError(f"{verb}(x, ctx): ctx must be a Context instance, got {ctx!r}")
    fields: dict[str, Any] = ctx.__dict__
    return fields


def _layer(x: Any, ctx: Any, verb: str = "metadata") -> Tagged | None:
    return _owned_layer(x, _context_fields(ctx, verb).get("_overdub_ref"))


def _owned_layer(x: Any, owner: Any) -> Tagged | None:
    """The layer of ``x`` that the context ``owner`` refers to added, under other contexts'
    layers too, or None."""
    while type(x) is Tagged:
        if x.owner is owner:
            return x
        x = x.value
    return None


def untag(x: Any, ctx: Any) -> Any:
    """``x`` without ``ctx``'s layer (other contexts' layers stay); ``x`` itself if ``ctx`` did
    not tag it."""
    if type(x) is not Tagged:
        if type(ctx) not in _CONTEXT_CLASSES:  # (checked as for a tagged x: at the mistake)
            _context_fields(ctx, "untag")
            _CONTEXT_CLASSES.add(type(ctx))
        return x
    if x.owner is getattr(ctx, "__dict__", _NO_FIELDS).get("_overdub_ref", _NO_OWNER):
        return x.value  # the common case, without the checks below
    owner = _context_fields(ctx, "untag").get("_overdub_ref")
    if owner is None:
        return x
    if x.owner is owner:
        return x.value
    inner = untag(x.value, ctx)
    if inner is x.value:
        return x
    return Tagged(inner, x.meta, x.owner, x._label)


def metadata(x: Any, ctx: Any) -> Any:
    """The metadata ``ctx`` attached to ``x``; ``TagError`` if ``ctx`` did not tag it."""
    if (type(x) is Tagged
            and x.owner is getattr(ctx, "__dict__", _NO_FIELDS).get("_overdub_ref", _NO_OWNER)):
        return x.meta  # the common case, without the checks of _layer
    layer = _layer(x, ctx)
    if layer is None:
        raise TagError(f"the value {_short(x)} carries no metadata for {_label(ctx)}")
    return layer.meta


def has_metadata(x: Any, ctx: Any) -> bool:
    """Whether ``ctx`` tagged ``x``."""
    return _layer(x, ctx, "has_metadata") is not None


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) < 60 else text[:57] + "..."


def innermost(x: Any) -> Any:
    while type(x) is Tagged:
        x = x.value
    return x



# -- inside a context: calls with tagged arguments, and the shadow heap -----------------------

_Args = tuple[Any, ...]
_Kwargs = dict[str, Any]


def _own(x: Any, owner: weakref.ref[Any]) -> bool:
    return type(x) is Tagged and x.owner is owner


_MISSING = object()


class Shadow:
    """A context's metadata for values it stored into the heap (plain values are stored).

    ``places``: ``(id(container), kind, key) -> (container, stored object, meta)`` for
    attributes and mapping items; ``sequences``: ``id(list or tuple) -> (sequence, [entry or
    None per position])`` with ``entry = (stored object, meta)``, kept in step with the list
    operations the context sees (a read checks that the position still holds that object);
    ``arrays``: ``id(array) -> [weak ref, metadata array, mask, positions]`` for NumPy element
    writes (one metadata array of the array's shape and memory order, widened to another dtype
    when needed, released with the array; ``positions``, made when a view first needs it, numbers
    the array's elements in memory order).  A plain view of an array (``a[1:]``, ``a.T``,
    ``a.reshape(...)``: see :func:`_view_owner`) has no entry of its own: its elements are read
    and written in its owner's, at their offsets in the owner's memory, so a write through one
    view is read through another.  Containers are kept alive until :meth:`clear` (the end of
    the context's run), so their ids stay unique.
    """

    def __init__(self) -> None:
        self.places: dict[tuple[int, str, Any], tuple[Any, Any, Any]] = {}
        self.sequences: dict[int, tuple[Any, list[Any]]] = {}
        self.arrays: dict[int, list[Any]] = {}

    def __bool__(self) -> bool:
        return bool(self.places or self.sequences or self.arrays)

    def clear(self) -> None:
        self.places.clear()
        self.sequences.clear()
        self.arrays.clear()

    # attributes and mapping items
    def put(self, container: Any, kind: str, key: Any, stored: Any, meta: Any) -> None:
        self.places[(id(container), kind, key)] = (container, innermost(stored), meta)

    def forget(self, container: Any, kind: str, key: Any) -> None:
        self.places.pop((id(container), kind, key), None)

    def get(self, container: Any, kind: str, key: Any, value: Any) -> Any:
        entry = self.places.get((id(container), kind, key))
        if entry is None or entry[1] is not innermost(value):
            return _MISSING
        return entry[2]

    # lists and tuples, by position
    def positions(self, sequence: Any) -> list[Any]:
        """The per-position entries of ``sequence``, padded to its length."""
        slot = self.sequences.get(id(sequence))
        if slot is None or slot[0] is not sequence:
            slot = self.sequences[id(sequence)] = (sequence, [])
        entries = slot[1]
        if len(entries) < len(sequence):
            entries.extend([None] * (len(sequence) - len(entries)))
        return entries

    def at(self, sequence: Any, index: int, value: Any) -> Any:
        slot = self.sequences.get(id(sequence))
        if slot is None or slot[0] is not sequence:
            return _MISSING
        try:
            entry = slot[1][index]
        except (IndexError, TypeError):
            return _MISSING
        if entry is None or entry[0] is not innermost(value):
            return _MISSING
        return entry[1]

    # NumPy arrays
    def array_slot(self, array: Any, meta: Any) -> list[Any]:
        """The metadata array and mask of ``array``, able to hold ``meta``."""
        np = sys.modules["numpy"]
        sample = np.asarray(innermost(meta))
        slot = self.arrays.get(id(array))
        if slot is None or slot[0]() is not array:
            dtype = sample.dtype if sample.dtype.kind in "biufc" and type(innermost(meta)) \
                is not Tagged and sample.ndim == 0 else object
            slot = self._new_slot(array, dtype)
        elif slot[1].dtype != object:
            if not (sample.dtype.kind in "biufc" and sample.ndim == 0) or type(meta) is Tagged:
                slot[1] = slot[1].astype(object)
            elif np.result_type(slot[1].dtype, sample.dtype) != slot[1].dtype:
                slot[1] = slot[1].astype(np.result_type(slot[1].dtype, sample.dtype))
        return slot

    def _new_slot(self, array: Any, dtype: Any) -> list[Any]:
        np = sys.modules["numpy"]
        key, arrays = id(array), self.arrays
        ref = weakref.ref(array, lambda _: arrays.pop(key, None))
        # in the array's memory order: a view's offsets index them too (see _positions)
        order = "F" if array.flags.f_contiguous and not array.flags.c_contiguous else "C"
        slot = arrays[key] = [ref, np.zeros(array.shape, dtype=dtype, order=order),
                              np.zeros(array.shape, dtype=bool, order=order), None]
        return slot

    def array_cells(self, array: Any, index: Any, meta: Any) -> tuple[Any, Any, Any]:
        """``(metadata, mask, where)``: ``metadata[where]`` and ``mask[where]`` are the shadow
        of ``array[index]``, to write, able to hold ``meta``: ``array``'s own entry, or, for a
        plain view, its owner's at the view's offsets."""
        owner = None if array.base is None else _view_owner(array)
        if owner is not None:
            slot = self.array_slot(owner, meta)
            positions = self._positions(array, owner, slot)
            if positions is not None:
                return _in_memory_order(slot[1]), _in_memory_order(slot[2]), positions[index]
        slot = self.array_slot(array, meta)
        return slot[1], slot[2], index

    def _held(self, array: Any, index: Any) -> tuple[Any, Any, Any] | None:
        """:meth:`array_cells` for an array that has metadata already, or None."""
        slot = self.arrays.get(id(array))
        if slot is not None and slot[0]() is array:
            return slot[1], slot[2], index
        owner = _view_owner(array)
        if owner is None:
            return None
        slot = self.arrays.get(id(owner))
        if slot is None or slot[0]() is not owner:
            return None
        positions = self._positions(array, owner, slot)
        if positions is None:
            return None
        return _in_memory_order(slot[1]), _in_memory_order(slot[2]), positions[index]

    @staticmethod
    def _positions(array: Any, owner: Any, slot: list[Any]) -> Any:
        """The offsets, in elements, of ``array``'s elements from the start of ``owner``'s
        memory (an integer array of ``array``'s shape, a view made in constant time), or None
        when ``array``'s strides are not whole elements."""
        np = sys.modules["numpy"]
        itemsize = owner.itemsize
        start = array.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
        if not itemsize or start % itemsize or any(s % itemsize for s in array.strides):
            return None
        counter = slot[3]
        if counter is None:
            counter = slot[3] = np.arange(owner.size)
        return np.lib.stride_tricks.as_strided(
            counter[start // itemsize:], array.shape,
            tuple(s // itemsize * counter.itemsize for s in array.strides))

    def array_meta(self, array: Any, index: Any) -> Any:
        slot = self.arrays.get(id(array))
        if slot is None or slot[0]() is not array:
            held = self._held(array, index) if array.base is not None else None
            if held is None:
                return _MISSING
            metas, masks, index = held
        else:
            metas, masks = slot[1], slot[2]
        mask = masks[index]
        if not mask.any():
            return _MISSING
        return metas[index]

    def array_selection(self, array: Any, index: Any) -> tuple[Any, Any] | None:
        """The metadata and mask of ``array[index]``, or None where none is kept."""
        held = self._held(array, index)
        if held is None:
            return None
        metas, masks, where = held
        mask = masks[where]
        return (metas[where], mask) if mask.any() else None

    def adopt(self, array: Any, metas: Any, mask: Any) -> None:
        """Keep ``metas`` (where ``mask``) for ``array``, a new array copied from one whose
        metadata they are (``a.copy()``, ``a[[0, 2]]``)."""
        slot = self._new_slot(array, metas.dtype)
        slot[1][...] = metas
        slot[2][...] = mask

    def forget_elements(self, array: Any, index: Any) -> None:
        """``array[index]`` was written with values without metadata."""
        held = self._held(array, index)
        if held is not None:
            held[1][held[2]] = False

    def drop_array(self, array: Any) -> None:
        """``array`` was changed in a way we cannot follow: its metadata is gone."""
        self.forget_elements(array, ...)


def _view_owner(array: Any) -> Any:
    """The array owning ``array``'s memory, where ``array`` is a plain view of it: NumPy links a
    view to the owner directly (``a[1:][::2]``'s base is ``a``), of the same dtype, the owner
    contiguous (its elements in memory in its C or Fortran order); else None."""
    base = array.base
    if base is None or not _is_array(base):
        return None
    if base.base is not None or base.dtype != array.dtype or not (
            base.flags.c_contiguous or base.flags.f_contiguous):
        return None
    return base


def _in_memory_order(cells: Any) -> Any:
    """``cells`` (a shadow array, contiguous) as a flat view in memory order, which a view's
    offsets index (see ``Shadow._positions``)."""
    return cells.ravel(order="K")


def _is_array(x: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.ndarray)


def _hashable(key: Any) -> bool:
    try:
        hash(key)
    except TypeError:
        return False
    return True


# ndarray methods and functions that change an array in place in ways the shadow cannot follow
_ARRAY_MUTATORS = {"fill", "sort", "put", "resize", "partition", "itemset", "setfield",
                   "byteswap", "setflags"}
# ndarray methods that copy an array's elements, which keep their metadata (_array_copy)
_ARRAY_RESHAPES = {"flatten", "ravel", "reshape"}  # (copies where a view cannot be made)
_ARRAY_COPIES = {"copy", "__copy__", "__deepcopy__", "tolist", *_ARRAY_RESHAPES}
_INPLACE_OPERATORS = {id(op): op for op in (
    operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
    operator.imod, operator.ipow, operator.imatmul, operator.iand, operator.ior, operator.ixor,
    operator.ilshift, operator.irshift)}


class Tagger:
    """How one context instance runs calls that involve its tagged values."""

    def __init__(self, state: Any) -> None:
        self.state = state
        self.owner = owner_of(state.ctx)
        self.label = _label(state.ctx)
        self.shadow = Shadow()
        # id(module globals) -> (the globals, names functions this context ran assign there)
        self.globals_written: dict[int, tuple[dict[str, Any], set[str]]] = {}

    def assigns_globals(self, namespace: dict[str, Any], names: frozenset[str]) -> None:
        """A function this context runs assigns ``names`` in ``namespace`` (see end_run)."""
        slot = self.globals_written.setdefault(id(namespace), (namespace, set()))
        slot[1].update(names)

    def end_run(self) -> None:
        """The context's outermost run is over: the globals its functions assign hold plain
        values (DESIGN's no-leak rule; nested lists, dicts and tuples two levels down too),
        and the heap's metadata is dropped."""
        ctx = self.state.ctx
        for namespace, names in self.globals_written.values():
            for name in names:
                value = namespace.get(name, _MISSING)
                if value is _MISSING:
                    continue
                plain = self.scrub(untag(value, ctx))  # scrub moves tags to the shadow...
                if type(plain) is Tagged:  # an enclosing context's tag: stored as it stores
                    self.plain_call(operator.setitem, (namespace, name, plain), {})
                elif plain is not value:
                    namespace[name] = plain
        self.shadow.clear()  # ...which goes

    def plain_exception(self, exc: BaseException) -> None:
        """``exc`` leaves the context's outermost run: its arguments (``AssertionError(("bad",
        t))``, ``ValueError(t)``), and those of the exceptions chained to it or grouped in it,
        hold plain values, as the heap does (see :meth:`scrub`)."""
        for current in chained(exc):
            args = current.args
            plain = self.scrub(args, 3)
            if plain is not args:
                current.args = plain

    def wrap(self, value: Any, meta: Any) -> Tagged:
        return Tagged(value, meta, self.owner, self.label)

    def plain_call(self, fn: Any, args: _Args, kwargs: _Kwargs) -> Any:
        parent = self.state.parent
        return fn(*args, **kwargs) if parent is None else parent(fn, *args, **kwargs)

    def strip(self, x: Any) -> Any:
        return x.value if type(x) is Tagged and x.owner is self.owner else x

    def scrub(self, value: Any, depth: int = 2) -> Any:
        """``value`` ready to be stored into the heap: this context's tags inside lists, dicts
        and tuples (two levels down) move to the shadow; a tuple is rebuilt without them."""
        if depth == 0:
            return value
        kind = type(value)
        owner = self.owner
        if kind is list:
            entries = None
            for i, item in enumerate(value):
                if type(item) is Tagged and item.owner is owner:
                    entries = entries or self.shadow.positions(value)
                    value[i] = item.value
                    entries[i] = (innermost(item.value), item.meta)
                elif type(item) in (list, tuple, dict):
                    new = self.scrub(item, depth - 1)
                    if new is not item:
                        value[i] = new
        elif kind is dict:
            for key, item in list(value.items()):
                if type(item) is Tagged and item.owner is owner:
                    value[key] = item.value
                    if _hashable(key):
                        self.shadow.put(value, "item", key, item.value, item.meta)
                elif type(item) in (list, tuple, dict):
                    value[key] = self.scrub(item, depth - 1)
        elif isinstance(value, tuple) and (kind is tuple or hasattr(kind, "_make")):
            if not any(type(v) is Tagged and v.owner is owner or type(v) in (list, tuple, dict)
                       for v in value):
                return value
            items = [self.strip(v) if type(v) is Tagged else self.scrub(v, depth - 1)
                     for v in value]
            if all(new is old for new, old in zip(items, value)):
                return value  # nothing of ours inside: the very tuple is stored, as natively
            new = kind(items) if kind is tuple else kind._make(items)
            entries = self.shadow.positions(new)
            for i, v in enumerate(value):
                if type(v) is Tagged and v.owner is owner:
                    entries[i] = (innermost(v.value), v.meta)
            return new
        return value

    def leaf(self, fn: Any, args: _Args, kwargs: _Kwargs) -> Any:
        """A call the context does not recurse into: keep metadata through the heap, drop it
        for other C functions (they receive values without this context's layer)."""
        handler = _HANDLERS.get(id(fn))
        if handler is not None and handler[0] is fn:
            return handler[1](self, fn, args, kwargs)
        return self.unhandled_leaf(fn, args, kwargs)

    def unhandled_leaf(self, fn: Any, args: _Args, kwargs: _Kwargs) -> Any:
        """:meth:`leaf` for a callable without a structural handler."""
        if self.shadow.sequences and len(args) == 2 and (fn is operator.add or
                                                         fn is operator.mul):
            out = _sequence_operation(self, fn, args)
            if out is not None:
                return out
        if type(fn) is _BuiltinMethod and fn.__self__ is _operator_module and \
                Tagged not in map(type, args) and id(fn) not in _INPLACE_OPERATORS:
            return self.plain_call(fn, args, kwargs)  # arithmetic on plain values: the hot path
        kind = type(fn)
        if kind is _Function or (kind is _Method and type(fn.__func__) is _Function) or (
                kind.__flags__ & _HEAPTYPE and isinstance(getattr(kind, "__call__", None),
                                                                  _Function)):
            # Python code run natively (no source, opaque, overdub's own API) gets the tagged
            # values themselves: it can pass them on, and their dunders act on the value.
            return self.plain_call(fn, args, kwargs)
        if kind is Tagged and fn.owner is self.owner:  # a tagged callee: its value is called,
            return self.state.od(fn.value, *args, **kwargs)  # (or says it is not callable)
        if _INPLACE_OPERATORS.get(id(fn)) is fn and args:
            target = args[0]
            if type(target) is list and fn is operator.iadd and len(args) == 2 and \
                    not hasattr(type(args[1]), "__radd__"):  # (L += array: NumPy's __radd__)
                _list_extend(self, target, args[1:])
                return target
            if type(target) is list and fn is operator.imul and len(args) == 2 and \
                    type(self.strip(args[1])) in (int, bool):  # L *= n
                return _list_repeat(self, target, args[1:])
            if type(target) is dict and fn is operator.ior and len(args) == 2 and \
                    isinstance(args[1], dict):  # (d |= e as a call: the statement's is
                return _dict_ior(self, target, args[1:])  # _dict_union's)
            target = self.strip(target)  # (a view read with its metadata: ``v = a[1:]``)
            if self.shadow.arrays and _is_array(target):
                self.shadow.drop_array(target)
        elif (kind is _MethodDescriptor or kind is _WrapperDescriptor) and args and \
                fn.__objclass__ in (list, dict) and isinstance(self.strip(args[0]),
                                                               fn.__objclass__):
            # list.append(lst, t), dict.update(d, e), list.__setitem__(lst, i, t): as the
            # bound method (natively, the values would be stored without their metadata)
            receiver = self.strip(args[0])
            out = _container_method(self, fn.__get__(receiver, type(receiver)), receiver,
                                    args[1:], kwargs)
            if out is not _UNHANDLED:
                return out
        elif kind is _BuiltinMethod or kind is _MethodWrapper:
            receiver = fn.__self__
            if type(receiver) in _TEXT and kind is _BuiltinMethod:
                return self._read_items(fn, args, kwargs)
            if type(receiver) is types.MappingProxyType and self.shadow:
                return _proxied_read(self, fn, receiver, args, kwargs)
            if isinstance(receiver, (list, dict)):
                out = _container_method(self, fn, receiver, args, kwargs)
                if out is not _UNHANDLED:
                    return out
            elif self.shadow.arrays and _is_array(receiver) and kind is _BuiltinMethod:
                if fn.__name__ in _ARRAY_MUTATORS:
                    self.shadow.drop_array(receiver)
                elif fn.__name__ in _ARRAY_COPIES:
                    return _array_copy(self, fn, receiver, args, kwargs)
        elif isinstance(fn, type) and issubclass(fn, dict) and \
                _protocols.lookup(fn, "__init__") is dict.__init__ and \
                _protocols.lookup(fn, "__new__") is dict.__new__:
            return _dict_new(self, fn, args, kwargs)  # (a subclass made as dict makes it)
        elif kind is _JSON_ENCODER or (kind is _MethodDescriptor and fn.__objclass__ in _TEXT):
            return self._read_items(fn, args, kwargs)  # json.dumps([x]), str.join(s, [t])
        elif kind is _MethodDescriptor and self.shadow.arrays and args and \
                fn.__name__ in _ARRAY_COPIES and _is_array(self.strip(args[0])):
            return _array_copy(self, fn, self.strip(args[0]), args, kwargs)  # copy.copy(a)
        if self.shadow.arrays and _is_array(kwargs.get("out")):
            self.shadow.drop_array(kwargs["out"])
        owner = self.owner
        if (Tagged in map(type, args) or (kwargs and Tagged in map(type, kwargs.values()))) and (
                any(type(a) is Tagged and a.owner is owner for a in args)
                or any(type(v) is Tagged and v.owner is owner for v in kwargs.values())):
            args = tuple(a.value if type(a) is Tagged and a.owner is owner else a for a in args)
            kwargs = {k: v.value if type(v) is Tagged and v.owner is owner else v
                      for k, v in kwargs.items()}
        elif len(args) == 2 and kind is _BuiltinMethod and fn.__self__ is _operator_module:
            out = _python_operator(self, fn, args)
            if out is not NotImplemented:
                return out
        return self.plain_call(fn, args, kwargs)

    def _read_items(self, fn: Any, args: _Args, kwargs: _Kwargs) -> Any:
        """A C function that reads the items of the containers it is given, checking their
        types, and keeps none of them (``str.join``, the other methods of a string, the JSON
        encoder that ``json.dumps`` calls): given copies without this context's tags, as a C
        function is given its arguments.  (Natively, ``"-".join([t, "b"])`` would find a
        ``Tagged`` where it expects a string.)  A generator given to ``join`` is read into a
        list first, as ``join`` itself reads it."""
        if not kwargs and not any(type(a) in _READ or isinstance(a, _CONTAINERS) for a in args):
            return self.plain_call(fn, args, kwargs)  # ("a b".split(), s.upper(): the most)
        if args and type(args[-1]) is types.GeneratorType and type(fn) is not _JSON_ENCODER \
                and fn.__name__ == "join":  # (bound, or str.join(sep, items))
            args = (*args[:-1], list(args[-1]))
        owner = self.owner
        memo: dict[int, Any] = {}
        args = tuple(_without_tags(owner, a, memo) for a in args)
        if kwargs:
            kwargs = {k: _without_tags(owner, v, memo) for k, v in kwargs.items()}
        return self.plain_call(fn, args, kwargs)


_TEXT = (str, bytes, bytearray)
_JSON_ENCODER: Any = None  # the C encoder json.dumps calls (without it, json's Python
try:                       # encoder runs in the context, seen as any Python code)
    from _json import make_encoder as _JSON_ENCODER
except ImportError:
    pass
_COPIED = (list, tuple, dict, set, frozenset)  # copied exactly (a subclass's repr is its own)
_READ = frozenset((*_COPIED, Tagged, types.GeneratorType))  # (what _read_items changes)
_CONTAINERS = (list, tuple, dict)  # (their subclasses too)


def _without_tags(owner: Any, value: Any, memo: dict[int, Any]) -> Any:
    """``value`` without ``owner``'s tags, in it and inside the lists, tuples (named ones too),
    dicts and sets in it, to any depth: the very object where it holds none, else a copy made
    of copies (``memo`` keeps shared and circular containers shared and circular)."""
    kind = type(value)
    if kind is Tagged:
        return _without_tags(owner, value.value, memo) if value.owner is owner else value
    base = list if isinstance(value, list) else dict if isinstance(value, dict) else None
    if kind not in _COPIED and base is None and not (isinstance(value, tuple)
                                                     and hasattr(kind, "_make")):
        return value
    key = id(value)
    if key in memo:
        return memo[key]
    if base is not None:
        # a subclass (OrderedDict, defaultdict, a user's list) copied as itself, its items
        # replaced through the base class's own methods
        new: Any = kind() if kind is base else copy.copy(value)
        memo[key] = new  # (before the items: a list may hold itself)
        if base is list:
            list.clear(new)
            list.extend(new, [_without_tags(owner, item, memo) for item in list.__iter__(value)])
            changed = any(a is not b for a, b in zip(list.__iter__(new), list.__iter__(value)))
        else:
            dict.clear(new)
            dict.update(new, [(_without_tags(owner, k, memo), _without_tags(owner, v, memo))
                              for k, v in dict.items(value)])
            changed = any(a is not b or dict.__getitem__(new, a) is not dict.__getitem__(value, b)
                          for a, b in zip(dict.__iter__(new), dict.__iter__(value)))
        if not changed:
            memo[key] = value
            return value
        return new
    memo[key] = value  # (a tuple or set reached again while its items are read: itself)
    items = [_without_tags(owner, item, memo) for item in value]
    if all(a is b for a, b in zip(items, value)):
        return value
    new = kind(items) if kind in _COPIED else kind._make(items)
    memo[key] = new
    return new


def _same_memory(a: Any, b: Any) -> bool:
    """Whether arrays ``a`` and ``b`` are the same memory's (one, or both, a plain view)."""
    owner_a, owner_b = _view_owner(a), _view_owner(b)
    return (a if owner_a is None else owner_a) is (b if owner_b is None else owner_b)


def _array_copy(t: Tagger, fn: Any, array: Any, args: _Args, kwargs: _Kwargs) -> Any:
    """``array.copy()`` (``copy.copy``, ``copy.deepcopy``), ``flatten``, ``ravel``,
    ``reshape`` and ``tolist`` of an array holding stored metadata: the copy holds it too
    (natively, plain values).  A ``ravel`` or ``reshape`` that is a view needs nothing (its
    elements are the array's), and one in memory order (``"K"``, ``"A"``) keeps none.
    (``astype`` computes new values: its metadata is dropped, as for any C function.)"""
    out = t.plain_call(fn, tuple(t.strip(a) for a in args),
                       {k: t.strip(v) for k, v in kwargs.items()})
    selection = t.shadow.array_selection(array, ...)
    if selection is None or out is array:
        return out
    metas, mask = selection
    name = fn.__name__
    if name == "tolist":
        if isinstance(out, list):
            _list_metadata(t, out, metas, mask)
        return out
    if not _is_array(out) or _same_memory(out, array):
        return out
    if name in _ARRAY_RESHAPES:
        # the same method on the metadata and mask, in an order that does not depend on
        # the memory's (theirs is not the array's)
        options = args[1:] if type(fn) is _MethodDescriptor else args  # (after the array)
        order = kwargs.get("order", options[0] if options and name != "reshape" else "C")
        if order not in ("C", "F"):
            return out
        metas, mask = (getattr(cells, name)(*options, **kwargs) for cells in (metas, mask))
    if metas.shape == out.shape:
        t.shadow.adopt(out, metas, mask)
    return out


def _list_metadata(t: Tagger, items: list[Any], metas: Any, mask: Any) -> None:
    """Keep ``metas`` (where ``mask``) for the numbers of ``items``, an array's ``tolist()``
    (lists nested as deep as the array has dimensions)."""
    np = sys.modules["numpy"]
    if mask.ndim > 1:
        for row, row_metas, row_mask in zip(items, metas, mask):
            _list_metadata(t, row, row_metas, row_mask)
        return
    entries = t.shadow.positions(items)
    for i in np.flatnonzero(mask):
        entries[i] = (innermost(items[i]), metas[i])


_ARRAY_PROTOCOLS = ("__array_namespace__", "__array_function__", "__array_ufunc__")


def _python_operator(t: Tagger, fn: Any, args: _Args) -> Any:
    """``v * x`` where ``x`` is tagged by an *enclosing* context (an ordinary value to this one)
    and ``v``'s class defines the operator in Python: that method runs, seen by this context,
    as it would for a plain ``x`` (the protocol leaves tagged operands alone); the reflected
    method for a number on the left.  NotImplemented when no such method is involved."""
    a, b = args
    user = type(a if type(a) is not Tagged else b)
    if not user.__flags__ & _HEAPTYPE or user is Tagged:
        return NotImplemented  # (the common case: numbers and arrays)
    if any(hasattr(user, name) for name in _ARRAY_PROTOCOLS):
        return NotImplemented  # an array library written in Python: the contexts' rules
    from ._protocols import _BINARY, lookup  # (_protocols imports this module)
    names = _BINARY.get(fn)
    if names is None:
        return NotImplemented
    if type(a) is not Tagged:
        method = lookup(type(a), names[0])
        if type(method) is _Function:
            return t.state.od(method, a, b)
    elif type(b) is not Tagged and isinstance(innermost(a), (int, float, complex)):
        method = lookup(type(b), names[1])
        if type(method) is _Function:
            return t.state.od(method, b, a)
    return NotImplemented


_BuiltinMethod = types.BuiltinMethodType  # type(len)
_MethodDescriptor = types.MethodDescriptorType  # type(list.append)
_operator_module = _operator  # operator.add.__self__
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: set for classes defined in Python
_Function = type(_own)
_Method = type(Shadow().clear)


_MethodWrapper = type(object().__setattr__)
_WrapperDescriptor = type(list.__setitem__)
_OBJECT_SLOTS = {"__setattr__": object.__setattr__, "__delattr__": object.__delattr__,
                 "__getattribute__": object.__getattribute__}


def _object_slot(fn: Any) -> Any:
    """``object.__setattr__`` (``__delattr__``, ``__getattribute__``) when ``fn`` is it bound
    to an object, as ``super().__setattr__`` gives it; else None."""
    slot = _OBJECT_SLOTS.get(fn.__name__) if type(fn) is _MethodWrapper else None
    if slot is None:
        return None
    receiver = fn.__self__
    bound = slot.__get__(receiver, type(receiver))  # (None's too: __get__(None) is refused)
    return slot if fn == bound else None


def _unbound_slot(value: Any) -> Any:
    """An attribute read that gave ``object.__setattr__`` (or another slot of
    :data:`_OBJECT_SLOTS`) bound to an object, as ``super().__setattr__`` does: the same as a
    call of the unbound slot, which its structural handler keeps metadata through (the bound
    method-wrapper would get plain values)."""
    slot = _object_slot(value)
    return value if slot is None else functools.partial(slot, value.__self__)


def _store_value(t: Tagger, value: Any) -> tuple[Any, Any]:
    """(what to store, its metadata or _MISSING)."""
    if type(value) is Tagged and value.owner is t.owner:
        return value.value, value.meta
    return t.scrub(value), _MISSING


def _layout(stored: Any) -> Any:
    """What :func:`_stored_as` compares with the heap after an enclosing context stored
    ``stored``: a tuple itself (immutable), a list's items (the enclosing context replaces the
    tuples inside in place), else None: nothing to follow."""
    if isinstance(stored, tuple):
        return stored
    if type(stored) is list and any(isinstance(v, tuple) for v in stored):
        return list(stored)
    return None


def _stored_as(t: Tagger, layout: Any, actual: Any) -> None:
    """A value stored as :func:`_layout` gave ``layout``, reached the heap as ``actual``: an
    enclosing tagging context rebuilt the tuples in it without its own tags.  The positions
    this context keeps for each tuple (nested ones too) move to its rebuilt one, which is what
    later reads find."""
    if type(layout) is list and type(actual) is list:
        for inner, rebuilt in zip(layout, actual):
            _stored_as(t, inner, rebuilt)
        return
    if actual is layout or type(actual) is not type(layout) or not isinstance(layout, tuple):
        return
    slot = t.shadow.sequences.pop(id(layout), None)
    if slot is not None and slot[0] is layout:
        t.shadow.sequences[id(actual)] = (actual, slot[1])
    if len(layout) == len(actual):
        for inner, rebuilt in zip(layout, actual):
            if isinstance(inner, tuple):
                _stored_as(t, inner, rebuilt)


def _getattr(t: Tagger, fn: Any, args: _Args, kwargs: _Kwargs) -> Any:
    obj = t.strip(args[0])
    value = t.plain_call(fn, (obj, *args[1:]), kwargs)
    if type(value) is _MethodWrapper:
        return _unbound_slot(value)
    if t.shadow and issubclass(type(obj), tuple) and id(obj) in t.shadow.sequences and \
            isinstance(args[1], str):  # (type: a user's __getattribute__ is not called)
        index = _field_position(type(obj), args[1])  # a named tuple's field: its position
        if index is not None:
            return _rewrap(t, obj, index, value)
    if t.shadow and isinstance(args[1], str):
        meta = t.shadow.get(obj, "attr", args[1], value)
        if meta is _MISSING and t.shadow.places:
            namespace = _protocols._instance_dict(obj, type(obj))
            if type(namespace) is dict:  # written as self.__dict__[name] = v
                meta = t.shadow.get(namespace, "item", args[1], value)
            if meta is _MISSING:  # a class attribute, read through an instance or subclass
                meta = _class_attribute_meta(t, obj, args[1], value)
        if meta is not _MISSING:
            return t.wrap(value, meta)
    return value


def _field_position(kind: type, name: str) -> int | None:
    """The position that reading the attribute ``name`` of a ``kind`` tuple reads, if it is a
    named tuple's field (``collections.namedtuple``'s C getter, or its Python fallback, a
    property of an ``itemgetter``); else None."""
    for klass in kind.__mro__:
        attribute = klass.__dict__.get(name, _MISSING)
        if attribute is _MISSING:
            continue
        if type(attribute) is _TUPLE_GETTER:
            index = attribute.__reduce__()[1][0]
            return index if type(index) is int else None
        if type(attribute) is property and type(attribute.fget) is operator.itemgetter:
            index = attribute.fget.__reduce__()[1]
            return index[0] if len(index) == 1 and type(index[0]) is int else None
        return None
    return None


_TUPLE_GETTER = type(collections.namedtuple("_Pair", "a").__dict__["a"])


def _class_attribute_meta(t: Tagger, obj: Any, name: str, value: Any) -> Any:
    """The metadata stored with the class attribute ``name`` that reading it from ``obj`` (an
    instance, or a class) found: ``C.k = x`` then ``C().k`` or ``Sub.k``."""
    for klass in (obj.__mro__ if isinstance(obj, type) else type(obj).__mro__):
        if name in klass.__dict__:
            return t.shadow.get(klass, "attr", name, value) if klass is not obj else _MISSING
    return _MISSING


def _proxied_meta(t: Tagger, proxy: types.MappingProxyType[Any, Any], key: Any,
                  value: Any) -> Any:
    """The metadata of ``proxy[key]`` (``value``): a read-only view (``MappingProxyType(d)``,
    a class's ``vars(C)``) reads what its mapping holds, an item of a dict, or an attribute
    of the class whose namespace it is (``C.w = x`` then ``vars(C)["w"]``)."""
    if not t.shadow or not _hashable(key):
        return _MISSING
    mapping = gc.get_referents(proxy)[0]  # (its only referent: the mapping it shows)
    meta = t.shadow.get(mapping, "item", key, value)
    if meta is not _MISSING:
        return meta
    for (_, kind, name), (owner, _, _) in list(t.shadow.places.items()):
        if kind == "attr" and name == key and isinstance(owner, type) and \
                gc.get_referents(owner.__dict__)[0] is mapping:
            return t.shadow.get(owner, "attr", key, value)
    return _MISSING


def _proxied_read(t: Tagger, fn: Any, proxy: Any, args: _Args, kwargs: _Kwargs) -> Any:
    """``proxy.get(key)``, ``.values()``, ``.items()``, ``.copy()`` of a ``MappingProxyType``:
    its items with the metadata :func:`_proxied_meta` finds (natively, plain values)."""
    def item(key: Any) -> Any:
        value = proxy[key]
        meta = _proxied_meta(t, proxy, key, value)
        return value if meta is _MISSING else t.wrap(value, meta)

    name = fn.__name__
    if name == "get" and args and not kwargs:
        key = t.strip(args[0])
        return item(key) if _hashable(key) and key in proxy else \
            (args[1] if len(args) > 1 else None)
    if name == "values" and not args:
        return [item(key) for key in proxy]
    if name == "items" and not args:
        return [(key, item(key)) for key in proxy]
    if name == "copy" and not args:
        return _proxied_copy(t, proxy)
    return t.plain_call(fn, args, kwargs)


def _proxied_copy(t: Tagger, proxy: Any) -> Any:
    """``proxy.copy()``: its mapping's copy (a dict, for a dict), its items' metadata kept for
    it (see :func:`_proxied_meta`); what ``dict(proxy)``, ``{**proxy}`` and ``proxy | e``
    copy too."""
    new = proxy.copy()
    if type(new) is dict:
        for key in new:
            value = new[key]
            meta = _proxied_meta(t, proxy, key, value)
            if meta is not _MISSING:
                t.shadow.put(new, "item", key, value, meta)
    return new


def _setattr(t: Tagger, fn: Any, args: _Args, kwargs: _Kwargs) -> Any:
    obj, name = t.strip(args[0]), args[1]
    stored, meta = _store_value(t, args[2])
    layout = _layout(stored) if t.state.parent is not None else None
    out = t.plain_call(fn, (obj, name, stored), kwargs)
    if layout is not None:
        _stored_as(t, layout, getattr(obj, "__dict__", {}).get(name, stored))
    if meta is _MISSING:
        t.shadow.forget(obj, "attr", name)
    else:
        t.shadow.put(obj, "attr", name, stored, meta)
        namespace = _protocols._instance_dict(obj, type(obj))
        if type(namespace) is dict and namespace.get(name) is innermost(stored):
            t.shadow.put(namespace, "item", name, stored, meta)  # read as vars(obj)[name]
    return out


def _namespace_new(t: Tagger, fn: Any, args: _Args, kwargs: _Kwargs) -> Any:
    """``types.SimpleNamespace(a=x)``: a C constructor that sets attributes, made as an empty
    namespace and one ``setattr`` per keyword, so tagged values keep their metadata (stored
    plain, as ``ns.a = x`` stores them)."""
    if args:  # (a positional mapping, Python 3.13+)
        return t.unhandled_leaf(fn, args, kwargs)
    namespace = t.plain_call(fn, (), {})
    for name, value in kwargs.items():
        _setattr(t, setattr, (namespace, name, value), {})
    return namespace


def _delattr(t: Tagger, fn: Any, args: _Args, kwargs: _Kwargs) -> Any:
    obj = t.strip(args[0])
    t.shadow.forget(obj, "attr", args[1])
    return t.plain_call(fn, (obj, *args[1:]), kwargs)


def _getitem(t: Tagger, fn: Any, args: _Args, kwargs: _Kwargs) -> Any:
    if type(args[0]) is not Tagged and type(args[1]) is Tagged:
        # a tagged key into an object whose __getitem__ is Python (np.r_[x]): that code runs,
        # overdubbed, and sees the key as it is (stripped, its metadata would be lost)
        from ._protocols import protocol_for  # (_protocols imports this module)
        target = protocol_for(t.state.od, fn, args)
        if target is not None:
            return target(*args)
    container, key = t.strip(args[0]), t.strip(args[1])
    if type(container) is types.MappingProxyType:
        value = t.plain_call(fn, (container, key), kwargs)
        meta = _proxied_meta(t, container, key, value)
        return value if meta is _MISSING else t.wrap(value, meta)
    if isinstance(container, dict) and not kwargs and _hashable(key) and key not in container:
        missing = _missing(t, container, args[1])
        if missing is not _MISSING:
            return missing
    value = t.plain_call(fn, (container, key), kwargs)
    if not t.shadow or (type(value) is Tagged and _owned_layer(value, t.owner) is not None):
        return value  # (tagged here already: a global a function stored natively)
    if _is_array(container):
        meta = t.shadow.array_meta(container, key)
        if meta is _MISSING:
            return value
        if _is_array(value) and not _same_memory(value, container):
            # a copy (``a[[0, 2]]``, ``a[a > 0]``): its elements keep their metadata
            selection = t.shadow.array_selection(container, key)
            if selection is not None:
                t.shadow.adopt(value, *selection)
        return t.wrap(value, meta)
    if isinstance(container, (list, tuple)):
        if isinstance(key, slice):
            indices = range(len(container))[key]
            if not isinstance(value, (list, tuple)) or len(indices) != len(value):
                return value
            items = [_rewrap(t, container, i, v) for i, v in zip(indices, value)]
            return type(value)(items) if type(value) in (list, tuple) else value
        if isinstance(key, int):
            return _rewrap(t, container, key, value)
        return value
    if _hashable(key):
        meta = t.shadow.get(container, "item", key, value)
        if meta is not _MISSING:
            return t.wrap(value, meta)
    return value


def _missing(t: Tagger, container: dict[Any, Any], key: Any) -> Any:
    """``d[key]`` for a key ``d`` lacks, where C would call back into Python: a
    ``defaultdict``'s factory (whose value is stored, as ``d[key] = value``) or a dict
    subclass's Python ``__missing__``, each called through the context.  ``_MISSING`` when
    neither applies (the native ``KeyError``, or a C ``__missing__`` without Python code).
    ``key`` as the program gave it: a differentiated key is stored as the context stores
    ``d[x] = v``."""
    kind = type(container)
    method = _protocols.lookup(kind, "__missing__")
    if type(method) is _Function:
        return t.state.od(method, container, key)
    if isinstance(container, collections.defaultdict) and \
            method is collections.defaultdict.__missing__ and \
            container.default_factory is not None:
        value = t.state.od(container.default_factory)
        t.state.od(operator.setitem, container, key, value)
        return value
    return _MISSING


def _rewrap(t: Tagger, sequence: Any, index: int, value: Any) -> Any:
    meta = t.shadow.at(sequence, index, value)
    return value if meta is _MISSING else t.wrap(value, meta)


def _setitem(t: Tagger, fn: Any, args: _Args, kwargs: _Kwargs) -> Any:
    container, key, value = t.strip(args[0]), t.strip(args[1]), args[2]
    if _is_array(container):
        return _set_array(t, fn, container, key, value)
    if isinstance(container, list):
        if isinstance(key, slice):
            items = _items(t, value)
            stored = [_store_value(t, v) for v in items]
            entries = t.shadow.positions(container)
            indices = range(len(container))[key]
            out = t.plain_call(fn, (container, key, [s for s, _ in stored]), kwargs)
            if key.step is None or key.step == 1:  # a resize: the entries move like the list
                entries[indices.start:indices.stop] = [
                    None if m is _MISSING else (innermost(s), m) for s, m in stored]
            else:
                for i, (s, m) in zip(indices, stored):
                    entries[i] = None if m is _MISSING else (innermost(s), m)
            return out
        stored, meta = _store_value(t, value)
        layout = _layout(stored) if t.state.parent is not None else None
        out = t.plain_call(fn, (container, key, stored), kwargs)
        if layout is not None:
            _stored_as(t, layout, container[key])
        kept = t.shadow.positions(container) if (meta is not _MISSING
                                                 or id(container) in t.shadow.sequences) \
            else None
        if kept is not None:
            kept[key] = None if meta is _MISSING else (innermost(stored), meta)
        return out
    stored, meta = _store_value(t, value)
    layout = _layout(stored) if t.state.parent is not None else None
    out = t.plain_call(fn, (container, key, stored), kwargs)
    if layout is not None and type(container) is dict:
        _stored_as(t, layout, container.get(key, stored))
    if _hashable(key):
        if meta is _MISSING:
            t.shadow.forget(container, "item", key)
        else:
            t.shadow.put(container, "item", key, stored, meta)
    return out


def _set_array(t: Tagger, fn: Any, array: Any, key: Any, value: Any) -> Any:
    np = sys.modules["numpy"]
    if _own(value, t.owner):
        out = t.plain_call(fn, (array, key, value.value), {})
        meta = innermost(value.meta)  # an array value carries one metadata per element
        elementwise = np.ndim(innermost(value.value)) > 0 and np.ndim(meta) > 0
        metas, masks, where = t.shadow.array_cells(
            array, key, np.ravel(meta)[0] if elementwise else value.meta)
        metas[where] = value.meta
        masks[where] = True
        return out
    if isinstance(value, (list, tuple)) and any(_own(v, t.owner) for v in value):
        plain = [t.strip(v) for v in value]
        out = t.plain_call(fn, (array, key, plain), {})
        for v in value:  # (each widens the metadata's dtype where it needs to)
            if _own(v, t.owner):
                metas, masks, where = t.shadow.array_cells(array, key, v.meta)
        zero = np.zeros((), dtype=metas.dtype)[()] if metas.dtype != object else None
        metas[where] = [v.meta if _own(v, t.owner) else zero for v in value]
        masks[where] = [_own(v, t.owner) for v in value]
        return out
    held = t.shadow.arrays.get(id(array))
    if held is not None and held[0]() is array:
        held[2][key] = False
    elif array.base is not None and t.shadow.arrays:
        t.shadow.forget_elements(array, key)  # (a view: its owner's elements)
    return t.plain_call(fn, (array, key, value), {})


def _delitem(t: Tagger, fn: Any, args: _Args, kwargs: _Kwargs) -> Any:
    container, key = t.strip(args[0]), t.strip(args[1])
    if isinstance(container, list):
        if id(container) in t.shadow.sequences:
            del t.shadow.positions(container)[key]
    elif not _is_array(container) and _hashable(key):
        t.shadow.forget(container, "item", key)
    return t.plain_call(fn, (container, key), kwargs)


def _list_append(t: Tagger, lst: list[Any], args: _Args) -> Any:
    stored, meta = _store_value(t, args[0]) if args else (None, _MISSING)
    entries = t.shadow.positions(lst) if meta is not _MISSING or \
        id(lst) in t.shadow.sequences else None
    layout = _layout(stored) if t.state.parent is not None else None
    t.plain_call(lst.append, (stored,), {})
    if layout is not None:
        _stored_as(t, layout, lst[-1])
    if entries is not None:
        entries.append(None if meta is _MISSING else (innermost(stored), meta))
    return None


def _list_insert(t: Tagger, lst: list[Any], args: _Args) -> Any:
    index, value = args
    stored, meta = _store_value(t, value)
    entries = t.shadow.positions(lst) if meta is not _MISSING or \
        id(lst) in t.shadow.sequences else None
    n = len(lst)
    layout = _layout(stored) if t.state.parent is not None else None
    t.plain_call(lst.insert, (index, stored), {})
    if layout is not None:
        i = operator.index(index)
        _stored_as(t, layout, lst[min(i, n) if i >= 0 else max(n + i, 0)])
    if entries is not None:
        entries.insert(index, None if meta is _MISSING else (innermost(stored), meta))
    return None


def _items(t: Tagger, values: Any) -> list[Any]:
    """The items of an iterable about to be stored, with the metadata a list, tuple or array
    holding stored metadata keeps for them (native iteration would read them plain), or that
    an object whose iteration is Python code gives them, iterated through the context."""
    if (t.shadow or t.state.enclosed) and _holds_metadata(t, values):
        return list(_sequence_items(t, t.strip(values)))
    if _python_iterable(values):
        return t.state.od(list, values)  # type: ignore[no-any-return]
    return list(values)


def _list_extend(t: Tagger, lst: list[Any], args: _Args) -> Any:
    stored = [_store_value(t, v) for v in _items(t, args[0])]
    entries = t.shadow.positions(lst) if any(m is not _MISSING for _, m in stored) or \
        id(lst) in t.shadow.sequences else None
    layouts = [_layout(s) for s, _ in stored] if t.state.parent is not None else []
    t.plain_call(lst.extend, ([s for s, _ in stored],), {})
    if layouts:
        for layout, actual in zip(layouts, lst[len(lst) - len(stored):]):
            _stored_as(t, layout, actual)
    if entries is not None:
        entries.extend(None if m is _MISSING else (innermost(s), m) for s, m in stored)
    return None


def _list_pop(t: Tagger, lst: list[Any], args: _Args) -> Any:
    index = t.strip(args[0]) if args else -1
    slot = t.shadow.sequences.get(id(lst))
    entry = None
    if slot is not None and slot[0] is lst:
        entries = t.shadow.positions(lst)
        entry = entries.pop(index) if entries else None
    value = t.plain_call(lst.pop, (index,), {})
    if entry is not None and entry[0] is innermost(value):
        return t.wrap(value, entry[1])
    return value


_UNHANDLED = object()  # a container method left to the generic path (run on plain values)


def _container_method(t: Tagger, fn: Any, receiver: Any, args: _Args, kwargs: _Kwargs) -> Any:
    """A C method of a list or a dict (``fn``, bound to ``receiver``: a builtin method or a
    slot's method-wrapper such as ``lst.__setitem__``), run as the operation it is, so stored
    metadata follows the items (``lst.remove(v)``, ``lst.__imul__(2)``, ``d.__ior__(e)``,
    ``Counter``'s ``super().update(e)``); ``_UNHANDLED`` for a method that only reads the
    container (``count``, ``index``, ``__contains__``, ``__eq__``...: the generic path runs it
    on plain values, the metadata kept where it is)."""
    name = fn.__name__
    if isinstance(receiver, list):
        if type(receiver) is not list:
            return _UNHANDLED  # (a subclass's own Python methods are seen by the context)
        method = _LIST_METHODS.get(name)
        if method is not None and not kwargs:
            return method(t, receiver, args)
        method = _LIST_CALLS.get(name)
        if method is not None:
            return method(t, fn, receiver, args, kwargs)
        if name not in _LIST_READERS and id(receiver) in t.shadow.sequences:
            t.shadow.sequences.pop(id(receiver), None)  # an effect we cannot follow: dropped
        return _UNHANDLED
    # a dict or a subclass: stored (read) as its method stores, with the class's own item
    # assignment (``d[k] = v``, as OrderedDict's methods store), or with dict's where the
    # method is dict's and the class has its own in Python (dict.update bypasses it)
    kind = type(receiver)
    if name in ("update", "setdefault") or (name == "__ior__" and len(args) == 1
                                             and not kwargs):
        setter = operator.setitem if kind is dict or kind.__setitem__ is dict.__setitem__ or \
            isinstance(receiver, collections.OrderedDict) else dict.__setitem__
        getter = operator.getitem if kind is dict or kind.__getitem__ is dict.__getitem__ \
            else dict.__getitem__
        out = _dict_store(t, fn, receiver, args, kwargs, setter, getter)
        return receiver if name == "__ior__" else out
    slot = _DICT_SLOTS.get(name)
    if slot is not None and len(args) == slot[1] and not kwargs:
        # d.__setitem__(k, t): the slot it is bound to, the class's own (an operator) or
        # dict's (``dict.__setitem__(d, k, t)``, called as it is)
        own = getattr(kind, name)
        called = slot[2] if fn == own.__get__(receiver, kind) else getattr(dict, name)
        return slot[0](t, called, (receiver, *args), {})
    if name in _DICT_READERS and t.shadow.places and _reads_as_dict(receiver) and (
            kind is dict or getattr(kind, name, None) in (getattr(dict, name),
                                                          _ORDERED_VIEWS.get(name))):
        # (a subclass's own method where it is dict's: defaultdict's get, Counter's values,
        # and an OrderedDict's values and items, read in its order)
        return _DICT_READERS[name](t, fn, receiver, args, kwargs)
    return _UNHANDLED


def _dict_ior(t: Tagger, target: dict[Any, Any], args: _Args) -> Any:
    """``operator.ior(d, e)`` called as a function, ``d`` a dict: ``d.update(e)``."""
    _dict_store(t, target.update, target, args, {})
    return target


def _list_sort(t: Tagger, fn: Any, lst: list[Any], args: _Args, kwargs: _Kwargs) -> Any:
    """``lst.sort()`` without a key (a key is a callback: the shim runs that sort, and tells
    :func:`list_reordered`): the metadata moves with the items, in the sort's stable order."""
    if args or kwargs.get("key") is not None or not kwargs.keys() <= {"key", "reverse"} or \
            id(lst) not in t.shadow.sequences:
        return _UNHANDLED
    entries = t.shadow.positions(lst)
    order = sorted(range(len(lst)), key=lst.__getitem__, reverse=bool(kwargs.get("reverse")))
    out = t.plain_call(fn, args, kwargs)  # the same stable order as `order`
    entries[:] = [entries[i] for i in order]
    return out


def _list_reverse(t: Tagger, fn: Any, lst: list[Any], args: _Args, kwargs: _Kwargs) -> Any:
    if args or kwargs or id(lst) not in t.shadow.sequences:
        return _UNHANDLED
    entries = t.shadow.positions(lst)
    out = t.plain_call(fn, args, kwargs)
    entries.reverse()
    return out


def _list_remove(t: Tagger, fn: Any, lst: list[Any], args: _Args, kwargs: _Kwargs) -> Any:
    """``lst.remove(v)``: the entry of the first item equal to ``v`` goes with it."""
    if len(args) != 1 or kwargs or id(lst) not in t.shadow.sequences:
        return _UNHANDLED
    entries = t.shadow.positions(lst)
    before = list.copy(lst)
    out = t.plain_call(fn, (t.strip(args[0]),), {})
    # which item went, found without comparing items again: the first position whose item
    # moved, back to the start of the run of that very object there (remove takes the first
    # equal item, and an item is equal to itself)
    moved = next((i for i, item in enumerate(lst) if item is not before[i]), len(lst))
    index = moved
    while index > 0 and before[index - 1] is before[moved]:
        index -= 1
    del entries[index]
    return out


def _list_clear(t: Tagger, fn: Any, lst: list[Any], args: _Args, kwargs: _Kwargs) -> Any:
    t.shadow.sequences.pop(id(lst), None)
    return _UNHANDLED  # (run natively: the list is empty, nothing is kept for it)


def _list_repeat(t: Tagger, lst: list[Any], args: _Args) -> Any:
    """``lst *= n`` (``lst.__imul__(n)``): the entries repeat with the items."""
    n = len(lst)
    entries = t.shadow.positions(lst) if id(lst) in t.shadow.sequences else None
    out = t.plain_call(operator.imul, (lst, *(t.strip(a) for a in args)), {})
    if entries is not None:
        entries[:] = entries[:n] * (len(lst) // n if n else 0)
    return out


def _list_init(t: Tagger, fn: Any, lst: list[Any], args: _Args, kwargs: _Kwargs) -> Any:
    """``lst.__init__(items)``: emptied, then extended with the items (and their metadata)."""
    if kwargs or len(args) > 1:
        return _UNHANDLED
    items = _items(t, args[0]) if args else []
    t.shadow.sequences.pop(id(lst), None)
    t.plain_call(list.clear, (lst,), {})
    _list_extend(t, lst, (items,))
    return None


def _list_slot(operation: Any, arity: int, *, in_place: bool = False) -> Any:
    """A list slot called as a method (``lst.__setitem__(i, v)``, ``lst.__iadd__(items)``):
    the operation the statement would run (``operation(lst, *args)``); an in-place operator
    returns the list."""
    def method(t: Tagger, fn: Any, lst: list[Any], args: _Args, kwargs: _Kwargs) -> Any:
        if len(args) != arity or kwargs:
            return _UNHANDLED  # (the method's own TypeError)
        out = operation(t, lst, args)
        return lst if in_place else out
    return method


def _list_operation(op: Any, reflected: bool = False) -> Any:
    """``lst.__add__(other)``, ``lst.__mul__(n)``, ``lst.__rmul__(n)``: a new list made of the
    items with their metadata, as ``lst + other`` and ``lst * n`` make it."""
    def method(t: Tagger, fn: Any, lst: list[Any], args: _Args, kwargs: _Kwargs) -> Any:
        if len(args) != 1 or kwargs:
            return _UNHANDLED
        other = t.strip(args[0])
        if op is operator.add and type(other) is not list:
            return _UNHANDLED  # (NotImplemented, or the method's own TypeError)
        out = _sequence_operation(t, op, (other, lst) if reflected else (lst, other))
        return _UNHANDLED if out is None else out
    return method


def list_reordered(items: list[Any], order: list[int]) -> None:
    """``items`` was sorted natively by the shim of ``items.sort(key=...)`` (a callback, so
    not a leaf the context handles): ``items[j]`` is now the item that was at ``order[j]``.
    The metadata each running context keeps for its items moves along (else each position
    would keep the entry of the item that was there before, and find another object: a value
    without its metadata)."""
    state = _active.active.get()
    while state is not None:
        tagger = getattr(state, "tagger", None)
        slot = None if tagger is None else tagger.shadow.sequences.get(id(items))
        if slot is not None and slot[0] is items:
            entries = slot[1]
            entries[:] = [entries[i] if i < len(entries) else None for i in order]
        state = state.enclosing


_LIST_CALLS: dict[str, Any] = {
    "sort": _list_sort, "reverse": _list_reverse, "remove": _list_remove, "clear": _list_clear,
    "__init__": _list_init,
    "__setitem__": _list_slot(lambda t, lst, a: _setitem(t, operator.setitem, (lst, *a), {}), 2),
    "__delitem__": _list_slot(lambda t, lst, a: _delitem(t, operator.delitem, (lst, *a), {}), 1),
    "__getitem__": _list_slot(lambda t, lst, a: _getitem(t, operator.getitem, (lst, *a), {}), 1),
    "__iadd__": _list_slot(lambda t, lst, a: _list_extend(t, lst, a), 1, in_place=True),
    "__imul__": _list_slot(lambda t, lst, a: _list_repeat(t, lst, a), 1),
    "__iter__": _list_slot(lambda t, lst, a: _iter(t, iter, (lst,), {}), 0),
    "__reversed__": _list_slot(lambda t, lst, a: _consume(t, reversed, (lst,), {}), 0),
    "__add__": _list_operation(operator.add), "__mul__": _list_operation(operator.mul),
    "__rmul__": _list_operation(operator.mul, reflected=True)}
# list methods that change nothing (run on plain values, the metadata stays where it is)
_LIST_READERS = frozenset((
    "count", "index", "__contains__", "__len__", "__eq__", "__ne__", "__lt__", "__le__",
    "__gt__", "__ge__", "__sizeof__", "__repr__", "__str__", "__format__", "__reduce__",
    "__reduce_ex__", "__getattribute__", "__dir__", "__hash__", "__class_getitem__",
    "__init_subclass__", "__subclasshook__", "__getstate__", "__setattr__", "__delattr__"))


def _dict_store(t: Tagger, fn: Any, target: dict[Any, Any], args: _Args, kwargs: _Kwargs,
                setter: Any = operator.setitem, getter: Any = operator.getitem) -> Any:
    """``d.update(...)`` / ``d.setdefault(k, v)`` (``d.__ior__(e)``) with this context's tagged
    values, stored with ``setter`` (read with ``getter``): the operators, or dict's own slots
    for a subclass whose own are Python that the method does not call."""
    if fn.__name__ == "setdefault":
        key = args[0]
        if key in target:
            return _getitem(t, getter, (target, key), {})
        _setitem(t, setter, (target, key, args[1] if len(args) > 1 else None), {})
        return args[1] if len(args) > 1 else None
    source = t.strip(args[0]) if args else None
    if type(source) is types.MappingProxyType and t.shadow:
        args = (_proxied_copy(t, source), *args[1:])
        source = args[0]
    if len(args) == 1 and _protocols.python_mapping(source):
        # d.update(ChainMap(...)): read through the context, as dict(m)
        args = (_from_mapping(t, dict, (), source, {}),)
        source = args[0]
    elif len(args) == 1 and _python_iterable(source):  # d.update(ItemsView(e)): as dict(pairs)
        args = (_from_pairs(t, dict, (), source, {}),)
        source = args[0]
    items = dict(*args, **kwargs)
    if isinstance(source, dict) and _reads_as_dict(source) and t.shadow:  # (its values with
        # the metadata it holds for them)
        items.update((key, _getitem(t, operator.getitem, (source, key), {}))
                     for key in source if key not in kwargs)
    for key, value in items.items():
        if _owned_layer(key, t.owner) is not None:  # a differentiated key: stored as the
            t.state.od(setter, target, key, value)  # context stores ``d[x] = v`` (its
        else:  # metadata kept where the context keeps it), not stripped here
            _setitem(t, setter, (target, key, value), {})
    return None


def _dict_get(t: Tagger, fn: Any, d: dict[Any, Any], args: _Args, kwargs: _Kwargs) -> Any:
    """``d.get(key)`` / ``d.pop(key)``: the stored value with its metadata."""
    key = t.strip(args[0]) if args else None
    present = _hashable(key) and key in d
    value = t.plain_call(fn, (key, *args[1:]), kwargs)
    if not present:
        return value
    meta = t.shadow.get(d, "item", key, value)
    if fn.__name__ == "pop":
        t.shadow.forget(d, "item", key)
    return value if meta is _MISSING else t.wrap(value, meta)


def _dict_view(t: Tagger, fn: Any, d: dict[Any, Any], args: _Args, kwargs: _Kwargs) -> Any:
    """``d.values()`` / ``d.items()`` of a dict holding metadata: a list of re-tagged entries
    (a list, not a live view: a view would read the plain values natively)."""
    if not any(key[0] == id(d) for key in t.shadow.places):
        return t.plain_call(fn, args, kwargs)

    def item(key: Any) -> Any:
        value = t.plain_call(operator.getitem, (d, key), {})  # an enclosing context's tags too
        meta = t.shadow.get(d, "item", key, value) if _hashable(key) else _MISSING
        return value if meta is _MISSING else t.wrap(value, meta)

    if fn.__name__ == "values":
        return [item(key) for key in d]
    return [(key, item(key)) for key in d]


def _dict_copy(t: Tagger, fn: Any, d: dict[Any, Any], args: _Args, kwargs: _Kwargs) -> Any:
    """``d.copy()``: the copy gets the original's metadata."""
    new = t.plain_call(fn, args, kwargs)
    _copy_item_metadata(t, d, new)
    return new


def _reads_as_dict(x: Any) -> bool:
    """Whether ``x`` is a dict, or a subclass whose items are read as a dict's are, without
    Python code (``Counter``, ``defaultdict``, ``OrderedDict``: no ``__getitem__`` or
    ``__iter__`` written in Python)."""
    kind = type(x)
    return kind is dict or (isinstance(x, dict) and type(kind.__getitem__) is not _Function
                            and type(kind.__iter__) is not _Function)


def _copy_item_metadata(t: Tagger, d: dict[Any, Any], new: dict[Any, Any]) -> None:
    """``d``'s items' metadata for the same items of ``new``, a copy of it.  (Compared as the
    shadow compares them, innermost: under an enclosing context the dict may hold that
    context's tagged value, which it keeps as it is.)"""
    for (key_id, kind, key), (_, stored, meta) in list(t.shadow.places.items()):
        if key_id == id(d) and kind == "item" and key in new and \
                innermost(new[key]) is stored:
            t.shadow.put(new, "item", key, stored, meta)


def _dict_popitem(t: Tagger, fn: Any, d: dict[Any, Any], args: _Args,
                  kwargs: _Kwargs) -> Any:
    """``d.popitem()``: the last pair, its value with its metadata."""
    key, value = t.plain_call(fn, args, kwargs)
    meta = t.shadow.get(d, "item", key, value) if _hashable(key) else _MISSING
    if meta is not _MISSING:
        t.shadow.forget(d, "item", key)
    return key, value if meta is _MISSING else t.wrap(value, meta)


# a dict's slots called as methods (``d.__setitem__(k, t)``): (handler, arity, operator)
_DICT_SLOTS = {"__setitem__": (_setitem, 2, operator.setitem),
               "__getitem__": (_getitem, 1, operator.getitem),
               "__delitem__": (_delitem, 1, operator.delitem)}
_ORDERED_VIEWS = {name: getattr(collections.OrderedDict, name) for name in ("values", "items")}
_DICT_READERS = {"get": _dict_get, "pop": _dict_get, "values": _dict_view, "items": _dict_view,
                 "copy": _dict_copy, "popitem": _dict_popitem}


def _copy_unbound(t: Tagger, fn: Any, args: _Args, kwargs: _Kwargs) -> Any:
    """``dict.copy(d)`` / ``list.copy(lst)``, as ``copy.copy`` calls them: the copy gets the
    original's metadata (``d.copy()`` and ``lst.copy()`` are handled as bound methods)."""
    new = t.plain_call(fn, args, kwargs)
    original = t.strip(args[0]) if len(args) == 1 else None
    if type(original) is dict and type(new) is dict:
        _copy_item_metadata(t, original, new)
    elif type(original) is list and type(new) is list and id(original) in t.shadow.sequences:
        t.shadow.positions(new)[:] = t.shadow.positions(original)
    return new


def _dict_union(t: Tagger, fn: Any, args: _Args, kwargs: _Kwargs) -> Any:
    """``d | e`` and ``d |= e`` of dicts: the result keeps the metadata of the values it got
    from either (natively, their plain values only); any other ``|`` as it would run."""
    if len(args) == 2 and not kwargs and t.shadow and types.MappingProxyType in map(type, args):
        args = tuple(_proxied_copy(t, a) if type(a) is types.MappingProxyType else a
                     for a in args)  # (proxy | e: a dict, as the copy's)
    if len(args) != 2 or kwargs or type(args[0]) is not dict or type(args[1]) is not dict:
        return t.unhandled_leaf(fn, args, kwargs)
    if fn is operator.ior:  # d |= e stores e's values in d: as d.update(e) stores them
        return _dict_ior(t, args[0], args[1:])
    out = t.plain_call(fn, args, kwargs)
    if t.shadow.places and type(out) is dict:
        for source in (args if fn is operator.or_ else args[1:]):
            _copy_item_metadata(t, source, out)
    return out


def _dict_new(t: Tagger, fn: Any, args: _Args, kwargs: _Kwargs) -> Any:
    """``dict(d, **kw)``, ``dict(pairs)`` (and the dicts C makes alike: ``OrderedDict(d)``,
    ``defaultdict(factory, d)``): made natively, tagged values given in the pairs or the
    keywords stored as they are; a copied dict's metadata goes to the new dict too (natively,
    ``dict(d)`` copies ``d``'s plain values only)."""
    first = 1 if fn is collections.defaultdict else 0  # (after the factory)
    if len(args) == first + 1 and type(args[first]) is types.MappingProxyType and t.shadow:
        args = (*args[:first], _proxied_copy(t, args[first]))
    if len(args) == first + 1 and _protocols.python_mapping(args[first]):
        return _from_mapping(t, fn, args[:first], args[first], kwargs)
    if len(args) == first + 1 and _python_iterable(args[first]):
        return _from_pairs(t, fn, args[:first], args[first], kwargs)
    new = t.plain_call(fn, args, kwargs)
    args = args[first:]
    if t.shadow and args and _reads_as_dict(args[0]) and isinstance(new, dict):
        _copy_item_metadata(t, args[0], new)  # (dict(counter), a Counter's copy and reduce)
    elif t.shadow.sequences and args and type(args[0]) in (list, tuple) and type(new) is dict:
        for pair in _sequence_items(t, args[0]):  # pairs stored with metadata, as
            if type(pair) in (list, tuple) and len(pair) == 2 and pair[0] not in kwargs:
                key, value = _sequence_items(t, pair)  # dataclasses.asdict makes them
                _setitem(t, operator.setitem, (new, key, value), {})
    return new


def _from_mapping(t: Tagger, fn: Any, first: _Args, mapping: Any, kwargs: _Kwargs) -> Any:
    """``dict(mapping)`` of a Python mapping (``_protocols.python_mapping``): its ``keys()``
    and items read through the context, which runs their Python code and gives the values
    their metadata (natively they would read the heap plain), and stored through it, as
    ``d[key] = value`` is (a context may store values its own way: reverse mode keeps them
    as they are)."""
    od = t.state.od
    new = t.plain_call(fn, first, {})
    for key in od(list, od(od(getattr, mapping, "keys"))):  # (stored as the context stores)
        od(operator.setitem, new, key, od(operator.getitem, mapping, key))
    for key, value in kwargs.items():
        od(operator.setitem, new, key, value)
    return new


def _from_pairs(t: Tagger, fn: Any, first: _Args, source: Any, kwargs: _Kwargs) -> Any:
    """``dict(pairs)`` of an object whose iteration is Python code (``ItemsView(d)``, a class
    yielding pairs): its pairs read through the context (natively, its code would run behind
    the context's back, reading the heap plain), each stored through it, as ``d[key] = value``
    is, then the keywords."""
    od = t.state.od
    pairs = od(list, source)
    new = t.plain_call(fn, first, {})
    for index, pair in enumerate(pairs):
        try:
            items = od(tuple, pair)
        except TypeError:
            raise TypeError(f"cannot convert dictionary update sequence element #{index} to "
                            f"a sequence") from None
        if len(items) != 2:
            raise ValueError(f"dictionary update sequence element #{index} has length "
                             f"{len(items)}; 2 is required")
        od(operator.setitem, new, items[0], items[1])
    for key, value in kwargs.items():
        od(operator.setitem, new, key, value)
    return new


def _iter(t: Tagger, fn: Any, args: _Args, kwargs: _Kwargs) -> Any:
    """``iter(x)`` (also every ``for`` loop, comprehension and unpacking under tags): a list,
    tuple or NumPy array holding stored metadata yields its items with their metadata; a list
    always does, reading each item when it is reached (a value stored with metadata after the
    loop began -- ``l[i + 1] = v * x`` in ``for i, v in enumerate(l)`` -- keeps it)."""
    if len(args) == 1 and not kwargs and (type(t.strip(args[0])) is list or (
            (t.shadow or t.state.enclosed) and _holds_metadata(t, args[0]))):
        return _sequence_items(t, t.strip(args[0]))
    iterator = _call_on(t, fn, args, kwargs)
    if len(args) == 1 and type(iterator).__flags__ & _HEAPTYPE and type(iterator) is not Tagged:
        from ._protocols import lookup  # (_protocols imports this module)
        if type(lookup(type(iterator), "__next__")) is _Function:
            # a loop would call its Python __next__ natively, behind the context's back
            return _drain(t.state.od, iterator)
    return iterator


def _call_on(t: Tagger, fn: Any, args: _Args, kwargs: _Kwargs) -> Any:
    """Go on with a call as the dispatcher would have without the handler: into a shim or the
    Python code that runs it (seen by the context), else natively."""
    target = t.state.resolve(fn, args, kwargs)
    return t.unhandled_leaf(fn, args, kwargs) if target is None else target(*args, **kwargs)


def _sequence_items(t: Tagger, sequence: Any) -> Iterator[Any]:
    """What iterating ``sequence`` gives, read by index through the context (so its metadata,
    and any enclosing context's, comes back); like a list iterator, it sees later changes."""
    index = 0
    while True:
        try:
            item = _getitem(t, operator.getitem, (sequence, index), {})
        except IndexError:
            return
        yield item
        index += 1


def _consume(t: Tagger, fn: Any, args: _Args, kwargs: _Kwargs) -> Any:
    """A builtin that reads its iterable arguments (``sum``, ``max``, ``sorted``, ``list``...):
    lists, tuples and arrays holding stored metadata are passed as lists of their items with
    the metadata, then the call goes on as any other (shims such as ``sum``'s see the items)."""
    # only the arguments the consumer iterates are replaced by their items: the others it
    # keeps or hands on as they are (reduce's initial value, sum's start, max(a, b)'s)
    iterated = range(1) if fn is reversed else _iterated(fn, args)
    if id(fn) not in _SNAPSHOT:
        # a lazy consumer (enumerate, zip, map...) given a list: its items read when reached,
        # as the list's own iterator would (it sees the list change)
        args = tuple(_sequence_items(t, t.strip(a)) if i in iterated and
                     type(t.strip(a)) is list else a for i, a in enumerate(args))
    if t.shadow or t.state.enclosed:
        args = tuple(list(_sequence_items(t, t.strip(a))) if i in iterated and
                     _holds_metadata(t, a) else a for i, a in enumerate(args))
    if fn is itertools.accumulate and len(args) == 1 and kwargs.get("func") is None:
        args += (operator.add,)  # its default, the additions seen (natively, tags dropped)
    if (fn is max or fn is min) and len(args) > 1:
        args = (list(args),)  # max(a, b): max([a, b]), whose items keep their metadata
    if any(type(a).__flags__ & _HEAPTYPE for a in args):
        # an object iterated by Python code (its class's __iter__ or __getitem__): iterated
        # through the context, whose iterator the builtin consumes (natively, the builtin
        # would run that code behind the context's back, reading the heap without metadata);
        # a value tagged by an enclosing context: iterated by that context, which gives its
        # items their metadata (natively, the items would be plain)
        iterated = _iterated(fn, args)
        if any(_python_iterable(a) for i, a in enumerate(args) if i in iterated):
            # the call again, with the items: the context decides on them (a rule for min)
            return t.state.od(fn, *[_iterate(t, fn, a) if i in iterated and _python_iterable(a)
                                    else a for i, a in enumerate(args)], **kwargs)
        args = tuple(t.plain_call(iter, (a,), {}) if i in iterated and type(a) is Tagged
                     and a.owner is not t.owner else a for i, a in enumerate(args))
    if fn is itertools.zip_longest and kwargs:  # its fillvalue, kept as repeat keeps a value
        return t.plain_call(fn, args, kwargs)
    return _call_on(t, fn, args, kwargs)


# consumers that read their whole iterable at once: given a list, which an enclosing context
# can read too (an iterator would hand it this context's tagged items)
_EAGER = frozenset(id(f) for f in (sum, max, min, sorted, list, tuple, set, frozenset))
# consumers given their lists' items as they are when called (all at once, or a sequence:
# reversed needs one)
_SNAPSHOT = _EAGER | {id(reversed), id(any), id(all)}


def _iterate(t: Tagger, fn: Any, x: Any) -> Any:
    """``x`` iterated through the context, for the consumer ``fn``: an iterator whose
    ``__next__`` is Python is drained through the context as well; an eager consumer gets
    the list of the items."""
    from ._protocols import lookup  # (_protocols imports this module)
    od = t.state.od
    iterator = od(iter, x)
    step = lookup(type(iterator), "__next__")
    if step is None:
        raise TypeError(f"iter() returned non-iterator of type '{type(iterator).__name__}'")
    if type(step) is _Function:
        iterator = _drain(od, iterator)
    return list(iterator) if id(fn) in _EAGER else iterator


def _drain(od: Callable[..., Any], iterator: Any) -> Iterator[Any]:
    while True:
        try:
            item = od(next, iterator)
        except StopIteration:
            return
        yield item


def _iterated(fn: Any, args: _Args) -> range:
    """The positions of the arguments that the consumer ``fn`` iterates."""
    if fn is zip or fn in _ALL_ITERATED:
        return range(len(args))
    if fn is map:
        return range(1, len(args))
    if fn is filter or fn is functools.reduce:
        return range(1, 2)
    if ((fn is max or fn is min) and len(args) != 1) or fn is reversed:
        return range(0)  # max(a, b) compares its arguments; reversed has its own protocol
    return range(1)


def _python_iterable(x: Any) -> bool:
    """Whether iterating ``x`` runs Python code: its class's ``__iter__``, or its
    ``__getitem__`` where it has no ``__iter__``."""
    from ._protocols import lookup  # (_protocols imports this module)
    kind = type(x)
    if kind is Tagged:
        return False
    method = lookup(kind, "__iter__")
    if method is None:
        method = lookup(kind, "__getitem__")
    return type(method) is _Function


def mixes_levels(t: Tagger, x: Any) -> bool:
    """Whether ``x``, in a run an enclosing context encloses, is a list or tuple holding this
    context's tagged values as they are (made by a display, ``[y * x]``), beside which the
    enclosing context may keep metadata of members it stored (``c.insert(0, x)`` of its own
    ``x``): read natively here, those would lose it."""
    return t.state.enclosed and type(x) in (list, tuple) and Tagged in map(type, x) and \
        not all(type(v) is Tagged for v in x)


def _holds_metadata(t: Tagger, x: Any) -> bool:
    """Whether ``x``'s items must be read one by one through the context to keep their
    metadata: it holds metadata this context stored; or, in a run an enclosing context
    encloses, a list or tuple holds this context's tagged values as they are (made by a
    display, ``[y * x]``) beside values the enclosing context may keep the metadata of (stored
    by it: ``c.insert(0, x)`` of its own ``x``), which reading it natively would lose."""
    x = t.strip(x)
    if isinstance(x, (list, tuple)):
        slot = t.shadow.sequences.get(id(x))
        return (slot is not None and slot[0] is x and any(slot[1])) or mixes_levels(t, x)
    if _is_array(x):
        return x.ndim > 0 and t.shadow.array_selection(x, ...) is not None
    return False


def _np_append(t: Tagger, fn: Any, args: _Args, kwargs: _Kwargs) -> Any:
    """``np.append(arr, values)``: the result's shadow is the inputs' metadata, concatenated."""
    np = sys.modules["numpy"]
    arr, values = t.strip(args[0]), args[1]
    items = list(values) if isinstance(values, (list, tuple)) else [values]
    own = [_own(v, t.owner) for v in items]
    base = t.shadow.array_selection(arr, ...) if _is_array(arr) else None
    if not any(own) and base is None:
        return t.plain_call(fn, (arr, values, *args[2:]), kwargs)
    out = t.plain_call(fn, (arr, [t.strip(v) for v in items], *args[2:]), kwargs)
    if kwargs.get("axis") is not None or len(args) > 2:
        return out  # metadata for appends along an axis is not tracked (docs/limitations.md)
    n = np.size(arr)
    if base is not None:
        metas, mask = base
        slot = t.shadow.array_slot(out, np.ravel(metas)[0] if metas.size else 0.0)
        slot[1][:n] = np.ravel(metas)
        slot[2][:n] = np.ravel(mask)
    for i, v in enumerate(items):
        if own[i]:
            slot = t.shadow.array_slot(out, v.meta)
            slot[1][n + i] = v.meta
            slot[2][n + i] = True
    return out


def _list_copy(t: Tagger, lst: list[Any], args: _Args) -> Any:
    """``lst.copy()``: a list of its items with their metadata (natively, plain values)."""
    if args or not _holds_metadata(t, lst):
        return t.plain_call(lst.copy, args, {})
    return list(_sequence_items(t, lst))


def _sequence_operation(t: Tagger, fn: Any, args: _Args) -> Any:
    """``a + b`` and ``a * n`` of lists or tuples holding stored metadata: made of their items
    with it (natively, the result would hold the plain values); None for other operations."""
    a, b = t.strip(args[0]), t.strip(args[1])
    if fn is operator.add and type(a) is type(b) and type(a) in (list, tuple) and (
            _holds_metadata(t, a) or _holds_metadata(t, b)):
        return type(a)(list(_sequence_items(t, a)) + list(_sequence_items(t, b)))
    if fn is operator.mul:
        sequence, count = (a, b) if type(a) in (list, tuple) else (b, a)
        if type(sequence) in (list, tuple) and type(count) is int and \
                _holds_metadata(t, sequence):
            return type(sequence)(list(_sequence_items(t, sequence)) * count)
    return None


_LIST_METHODS = {"append": _list_append, "insert": _list_insert, "extend": _list_extend,
                 "pop": _list_pop, "copy": _list_copy}
# itertools functions that iterate what they are given: they move its items (accumulate adds
# them, through its shim, with its default function made explicit by _consume)
_ITERTOOLS_MOVERS = tuple(getattr(itertools, name) for name in (
    "chain", "islice", "compress", "cycle", "tee", "zip_longest", "product", "pairwise",
    "combinations", "combinations_with_replacement", "permutations", "batched", "accumulate")
    if hasattr(itertools, name))
_ALL_ITERATED = (itertools.chain, itertools.zip_longest, itertools.product, itertools.compress)
_Handler = Callable[[Tagger, Any, _Args, _Kwargs], Any]  # (tagger, fn, args, kwargs)


def _stores_as_is(t: Tagger, fn: Any, args: _Args, kwargs: _Kwargs) -> Any:
    """``itertools.repeat(x, n)``: a C constructor that keeps the value it is given, to hand
    it back: made with the tagged value itself, which its iteration gives back (stripped, as
    for other C functions, it would come back plain)."""
    return t.plain_call(fn, args, kwargs)


def _count(t: Tagger, fn: Any, args: _Args, kwargs: _Kwargs) -> Any:
    """``itertools.count(start, step)`` given a value this context tagged: its items counted
    by additions the context sees (``start``, ``start + step``, ``start + step + step``...,
    as the builtin adds them), so each carries what the context makes of them (natively, the
    first item would be the plain start and the others plain sums: their metadata dropped)."""
    given = (*args, *kwargs.values())
    if not any(type(v) is Tagged and v.owner is t.owner for v in given):
        return t.unhandled_leaf(fn, args, kwargs)
    t.plain_call(fn, tuple(t.strip(a) for a in args),  # (the builtin's checks and errors)
                 {k: t.strip(v) for k, v in kwargs.items()})
    start, step = _count_arguments(*args, **kwargs)
    return _Counting(t.state.od, start, step)


def _count_arguments(start: Any = 0, step: Any = 1) -> tuple[Any, Any]:
    return start, step


class _Counting:
    """The iterator :func:`_count` returns: ``next()`` gives the current count, then adds the
    step to it through the context's dispatcher ``od``."""

    __slots__ = ("od", "current", "step")

    def __init__(self, od: Callable[..., Any], start: Any, step: Any) -> None:
        self.od, self.current, self.step = od, start, step

    def __iter__(self) -> _Counting:
        return self

    def __next__(self) -> Any:
        value = self.current
        self.current = self.od(operator.add, value, self.step)
        return value

    def __repr__(self) -> str:
        return f"count({self.current!r}, {self.step!r})"


_HANDLERS: dict[int, tuple[Any, _Handler]] = {}
for _fn, _handler in ((getattr, _getattr), (setattr, _setattr), (delattr, _delattr),
                      # what a frozen dataclass's __init__ and __setattr__ overrides call
                      (object.__setattr__, _setattr), (object.__delattr__, _delattr),
                      (object.__getattribute__, _getattr),  # and __getattribute__ overrides
                      (dict, _dict_new), (collections.OrderedDict, _dict_new),
                      (collections.defaultdict, _dict_new),
                      (dict.copy, _copy_unbound), (list.copy, _copy_unbound),
                      (types.SimpleNamespace, _namespace_new),
                      (operator.getitem, _getitem), (operator.setitem, _setitem), (iter, _iter),
                      *((consumer, _consume) for consumer in (
                          sum, max, min, sorted, list, tuple, set, frozenset, enumerate, zip,
                          reversed, any, all, map, filter, functools.reduce,
                          *_ITERTOOLS_MOVERS)),
                      (operator.delitem, _delitem), (itertools.repeat, _stores_as_is),
                      (itertools.count, _count)):
    _HANDLERS[id(_fn)] = (_fn, _handler)
# ``|`` and ``|=`` compute with most operands: handled (for dicts) without carrying tags
_UNIONS = {id(operator.or_): operator.or_, id(operator.ior): operator.ior}
for _fn in _UNIONS.values():
    _HANDLERS[id(_fn)] = (_fn, _dict_union)


def _subject_protocol(handler: _Handler) -> _Handler:
    """``handler`` for a *call* of an operation on a subject -- ``getattr(obj, name)``,
    ``operator.getitem(obj, key)``, as written or as a context's own code makes it -- that
    first runs the subject's Python protocol (a property, ``__getattr__``, a setter,
    ``__setattr__``, ``__getitem__``...) through the context, as the operator dispatchers do
    before they reach :meth:`Tagger.leaf`: natively, that code would run behind the context's
    back."""
    def handle(t: Tagger, fn: Any, args: _Args, kwargs: _Kwargs) -> Any:
        if args and not kwargs and type(args[0]) is not Tagged and \
                not _protocols.is_static(type(args[0])):
            target = _protocols.protocol_for(t.state.od, fn, args)
            if target is not None:
                return target(*args)
        return handler(t, fn, args, kwargs)
    return handle


# What the dispatcher ``od`` runs for a structural function it is given as a call (the operator
# dispatchers try the protocol themselves, then reach leaf(), which uses _HANDLERS)
_CALLED: dict[int, tuple[Any, _Handler]] = dict(_HANDLERS)
for _fn in (getattr, setattr, delattr, operator.getitem, operator.setitem, operator.delitem):
    _CALLED[id(_fn)] = (_fn, _subject_protocol(_HANDLERS[id(_fn)][1]))


# Operators that leaf() runs as plain calls when no argument is tagged: the dispatchers skip
# leaf() for them (the hot path of arithmetic on untagged values inside a tagging context).
PLAIN_OPERATORS = frozenset(
    id(f) for f in vars(operator).values()
    if type(f) is _BuiltinMethod and f.__self__ is _operator_module
    and id(f) not in _INPLACE_OPERATORS and id(f) not in _HANDLERS)


def register_numpy_handlers() -> None:
    """Add NumPy's structural functions once NumPy is in use (the core never imports it)."""
    np = sys.modules.get("numpy")
    if np is not None and id(np.append) not in _HANDLERS:
        _HANDLERS[id(np.append)] = _CALLED[id(np.append)] = (np.append, _np_append)


def handlers() -> dict[int, tuple[Any, _Handler]]:
    """The structural functions tagged values keep their metadata through (by ``id``), as
    the dispatcher ``od`` runs them when they are called."""
    return _CALLED


_MOVERS = {id(f): f for f in (zip, enumerate, reversed, iter, next, list, tuple, dict, set,
                               tuple.__new__,  # a named tuple's __new__ calls it
                               frozenset, id, type, isinstance, issubclass, len, repr, str,
                               format, print, hash, callable, hasattr)}


def carries_tags(fn: Any) -> bool:
    """Whether tagged values go through ``fn`` without it computing with them.

    True for heap operations that keep metadata (attribute and item access, ``list.append``,
    ``list.pop``...), for functions that only move values (``zip``, ``list``, ``iter``...) and
    for those that only look at them (``type``, ``len``, ``isinstance``...).  A context that
    must not drop metadata silently (automatic differentiation) needs rules for everything
    else a tagged value reaches.
    """
    if (_HANDLERS.get(id(fn), (None,))[0] is fn and _UNIONS.get(id(fn)) is not fn) or \
            _MOVERS.get(id(fn)) is fn:
        return True
    return (type(fn) is _BuiltinMethod and type(getattr(fn, "__self__", None)) in (list, dict)
            and fn.__name__ in ("append", "insert", "extend", "pop", "get", "setdefault",
                                "copy", "index", "count", "keys", "values", "items", "update",
                                "popitem"))


from . import _protocols  # noqa: E402  (it imports this module: bound once both exist)
