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
released when the array dies.  A stored value is re-tagged only if the place still holds the very
object that was stored.
"""

from __future__ import annotations

import operator
import sys
import weakref
from typing import Any

from . import _active


class TagError(TypeError):
    """A tagged value used where its context cannot give it meaning."""


class Tagged:
    """A value carrying one context's metadata (see :func:`tag`).  Never subclassed.

    Attributes: ``value`` (what it wraps: a plain value or another context's ``Tagged``),
    ``meta`` (the metadata), ``owner`` (weak reference to the owning context).
    """

    __slots__ = ("value", "meta", "owner", "_label", "__weakref__")

    def __init__(self, value: Any, meta: Any, owner: weakref.ref, label: str) -> None:
        self.value = value
        self.meta = meta
        self.owner = owner
        self._label = label

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise TypeError("Tagged cannot be subclassed")

    def _plain(self, use: str) -> Any:
        """The value, for a native use: allowed only while the owning context is running."""
        ctx = self.owner()
        if ctx is None:
            raise TagError(f"{use} of a value tagged by {self._label}, which was garbage-"
                           f"collected: untag values before their context goes away")
        if not _running(ctx):
            raise TagError(f"{use} of a value tagged by {self._label} outside that context: "
                           f"use overdub.untag(x, ctx) to get the plain value")
        return self.value

    def __repr__(self) -> str:
        return f"Tagged({self.value!r}, meta={self.meta!r}, by {self._label})"

    def __bool__(self) -> bool:
        return bool(self._plain("truth test"))

    def __hash__(self) -> int:
        return hash(self._plain("hash"))

    def __format__(self, spec: str) -> str:
        return format(self._plain("formatting"), spec)

    def __str__(self) -> str:
        return str(self._plain("str()"))

    def __iter__(self) -> Any:
        return iter(self._plain("iteration"))

    def __len__(self) -> int:
        return len(self._plain("len()"))

    def __index__(self) -> int:
        return operator.index(self._plain("use as an index"))

    def __float__(self) -> float:
        return float(self._plain("float()"))

    def __int__(self) -> int:
        return int(self._plain("int()"))

    def __complex__(self) -> complex:
        return complex(self._plain("complex()"))

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        import numpy
        return numpy.asarray(self._plain("conversion to an array"), dtype=dtype)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return getattr(self._plain(f"attribute {name!r}"), name)


def _binary(symbol: str, op: Any, reflected: bool = False) -> Any:
    def method(self: Tagged, other: Any) -> Any:
        value = self._plain(f"operator {symbol}")
        other = _strip_for(other, self.owner)
        return op(other, value) if reflected else op(value, other)
    return method


_OPERATORS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
              "pow": "**", "matmul": "@", "and": "&", "or": "|", "xor": "^", "lshift": "<<",
              "rshift": ">>"}
for _name, _symbol in _OPERATORS.items():
    _op = getattr(operator, _name + ("_" if _name in ("and", "or") else ""))
    setattr(Tagged, f"__{_name}__", _binary(_symbol, _op))
    setattr(Tagged, f"__r{_name}__", _binary(_symbol, _op, reflected=True))
for _name, _symbol in (("eq", "=="), ("ne", "!="), ("lt", "<"), ("le", "<="), ("gt", ">"),
                       ("ge", ">=")):
    setattr(Tagged, f"__{_name}__", _binary(_symbol, getattr(operator, _name)))
for _name in ("neg", "pos", "abs", "invert"):
    setattr(Tagged, f"__{_name}__",
            (lambda op, n: lambda self: op(self._plain(f"unary {n}")))(
                getattr(operator, _name), _name))


def _strip_for(x: Any, owner: weakref.ref) -> Any:
    return x.value if type(x) is Tagged and x.owner is owner else x


def _running(ctx: Any) -> bool:
    return _active.running(ctx)


# -- the public API ----------------------------------------------------------------------------

def _owner(ctx: Any) -> weakref.ref:
    ref = ctx.__dict__.get("_overdub_ref")
    if ref is None:
        ref = ctx.__dict__["_overdub_ref"] = weakref.ref(ctx)
    return ref


def _label(ctx: Any) -> str:
    return f"{type(ctx).__name__} context at {id(ctx):#x}"


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
    from ._context import Context  # the one cycle: tags are checked against contexts
    if not isinstance(ctx, Context):
        raise TypeError(f"tag(value, ctx, meta): ctx must be a Context instance, got {ctx!r}")
    owner = _owner(ctx)
    value = untag(value, ctx)
    plain = value
    while type(plain) is Tagged:
        plain = plain.value
    allowed = ctx.metadata_type(type(plain))
    if allowed is None:
        raise TypeError(f"{type(ctx).__name__} cannot tag values of type "
                        f"{type(plain).__name__} (see {type(ctx).__name__}.metadata_type)")
    if not isinstance(meta, allowed):
        raise TypeError(f"{type(ctx).__name__} allows metadata of type {_names(allowed)} on "
                        f"{type(plain).__name__} values, got {type(meta).__name__}")
    _active.enable_tags(ctx)
    return Tagged(value, meta, owner, _label(ctx))


def _names(allowed: Any) -> str:
    if isinstance(allowed, tuple):
        return " or ".join(t.__name__ for t in allowed)
    return allowed.__name__


def _layer(x: Any, ctx: Any) -> Tagged | None:
    owner = ctx.__dict__.get("_overdub_ref")
    while type(x) is Tagged:
        if x.owner is owner:
            return x
        x = x.value
    return None


def untag(x: Any, ctx: Any) -> Any:
    """``x`` without ``ctx``'s layer (other contexts' layers stay); ``x`` itself if ``ctx`` did
    not tag it."""
    owner = ctx.__dict__.get("_overdub_ref") if hasattr(ctx, "__dict__") else None
    if type(x) is not Tagged or owner is None:
        return x
    if x.owner is owner:
        return x.value
    inner = untag(x.value, ctx)
    if inner is x.value:
        return x
    return Tagged(inner, x.meta, x.owner, x._label)


def metadata(x: Any, ctx: Any) -> Any:
    """The metadata ``ctx`` attached to ``x``; ``TagError`` if ``ctx`` did not tag it."""
    layer = _layer(x, ctx)
    if layer is None:
        raise TagError(f"the value {_short(x)} carries no metadata for {_label(ctx)}")
    return layer.meta


def has_metadata(x: Any, ctx: Any) -> bool:
    """Whether ``ctx`` tagged ``x``."""
    return _layer(x, ctx) is not None


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) < 60 else text[:57] + "..."


def innermost(x: Any) -> Any:
    while type(x) is Tagged:
        x = x.value
    return x



# -- inside a context: calls with tagged arguments, and the shadow heap -----------------------

def _own(x: Any, owner: weakref.ref) -> bool:
    return type(x) is Tagged and x.owner is owner


class Shadow:
    """A context's metadata for values it stored into the heap (plain values are stored).

    ``places``: ``(id(container), kind, key) -> (container, stored object, meta)`` for
    attributes and mapping items (the container is kept alive so its id stays unique);
    ``members``: ``id(list) -> (list, {id(element): (element, meta)})`` for list elements;
    ``arrays``: ``id(array) -> (weakref, meta array, mask)`` for NumPy element writes.
    """

    def __init__(self) -> None:
        self.places: dict[tuple, tuple] = {}
        self.members: dict[int, tuple] = {}
        self.arrays: dict[int, tuple] = {}

    def __bool__(self) -> bool:
        return bool(self.places or self.members or self.arrays)

    # places (attributes, dict items)
    def put(self, container: Any, kind: str, key: Any, stored: Any, meta: Any) -> None:
        self.places[(id(container), kind, key)] = (container, innermost(stored), meta)

    def forget(self, container: Any, kind: str, key: Any) -> None:
        self.places.pop((id(container), kind, key), None)

    def get(self, container: Any, kind: str, key: Any, value: Any) -> Any:
        entry = self.places.get((id(container), kind, key))
        if entry is None or entry[1] is not innermost(value):
            return _MISSING
        return entry[2]

    # list members, by identity
    def add_member(self, container: list, stored: Any, meta: Any) -> None:
        slot = self.members.get(id(container))
        if slot is None:
            slot = self.members[id(container)] = (container, {})
        plain = innermost(stored)
        slot[1][id(plain)] = (plain, meta)

    def member(self, container: Any, value: Any) -> Any:
        slot = self.members.get(id(container))
        if slot is None:
            return _MISSING
        plain = innermost(value)
        entry = slot[1].get(id(plain))
        return entry[1] if entry is not None and entry[0] is plain else _MISSING

    # NumPy arrays: one metadata array and one mask, released with the array
    def array_slot(self, array: Any, meta: Any) -> tuple:
        slot = self.arrays.get(id(array))
        if slot is not None and slot[0]() is array:
            return slot
        np = sys.modules["numpy"]
        sample = np.asarray(meta)
        dtype = sample.dtype if sample.dtype != object else object
        key = id(array)
        ref = weakref.ref(array, lambda _, key=key: self.arrays.pop(key, None))
        slot = (ref, np.zeros(array.shape, dtype=dtype), np.zeros(array.shape, dtype=bool))
        self.arrays[key] = slot
        return slot

    def array_meta(self, array: Any, index: Any) -> Any:
        slot = self.arrays.get(id(array))
        if slot is None or slot[0]() is not array:
            return _MISSING
        mask = slot[2][index]
        if not mask.any():
            return _MISSING
        return slot[1][index]


_MISSING = object()


def _is_array(x: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.ndarray)


def _hashable(key: Any) -> bool:
    try:
        hash(key)
    except TypeError:
        return False
    return True


class Tagger:
    """How one context instance runs calls that involve its tagged values."""

    def __init__(self, state: Any) -> None:
        self.state = state
        self.owner = _owner(state.ctx)
        self.label = _label(state.ctx)
        self.shadow = Shadow()

    def wrap(self, value: Any, meta: Any) -> Tagged:
        return Tagged(value, meta, self.owner, self.label)

    def plain_call(self, fn: Any, args: tuple, kwargs: dict) -> Any:
        parent = self.state.parent
        return fn(*args, **kwargs) if parent is None else parent(fn, *args, **kwargs)

    def strip(self, x: Any) -> Any:
        return x.value if type(x) is Tagged and x.owner is self.owner else x

    def leaf(self, fn: Any, args: tuple, kwargs: dict) -> Any:
        """A call the context does not recurse into: keep metadata through the heap, drop it
        for other C functions (they receive values without this context's layer)."""
        handler = _HANDLERS.get(id(fn))
        if handler is not None and handler[0] is fn:
            return handler[1](self, fn, args, kwargs)
        kind = type(fn)
        if kind is _Function or (kind is _Method and type(fn.__func__) is _Function) or (
                kind.__flags__ & _HEAPTYPE and isinstance(getattr(kind, "__call__", None),
                                                                  _Function)):
            # Python code run natively (no source, opaque, overdub's own API) gets the tagged
            # values themselves: it can pass them on, and their dunders act on the value.
            return self.plain_call(fn, args, kwargs)
        self_ = getattr(fn, "__self__", None)
        if type(fn) is _BuiltinMethod and type(self_) is list:
            method = _LIST_METHODS.get(fn.__name__)
            if method is not None:
                return method(self, self_, args)
        owner = self.owner
        if any(type(a) is Tagged and a.owner is owner for a in args) or \
                any(type(v) is Tagged and v.owner is owner for v in kwargs.values()):
            args = tuple(a.value if type(a) is Tagged and a.owner is owner else a for a in args)
            kwargs = {k: v.value if type(v) is Tagged and v.owner is owner else v
                      for k, v in kwargs.items()}
        return self.plain_call(fn, args, kwargs)


_BuiltinMethod = type(len)
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: set for classes defined in Python
_Function = type(_own)
_Method = type(Shadow().__bool__)


def _getattr(t: Tagger, fn: Any, args: tuple, kwargs: dict) -> Any:
    obj = t.strip(args[0])
    value = t.plain_call(fn, (obj, *args[1:]), kwargs)
    if t.shadow and isinstance(args[1], str):
        meta = t.shadow.get(obj, "attr", args[1], value)
        if meta is not _MISSING:
            return t.wrap(value, meta)
    return value


def _setattr(t: Tagger, fn: Any, args: tuple, kwargs: dict) -> Any:
    obj, name, value = t.strip(args[0]), args[1], args[2]
    if _own(value, t.owner):
        out = t.plain_call(fn, (obj, name, value.value), kwargs)
        t.shadow.put(obj, "attr", name, value.value, value.meta)
        return out
    t.shadow.forget(obj, "attr", name)
    return t.plain_call(fn, (obj, name, value), kwargs)


def _delattr(t: Tagger, fn: Any, args: tuple, kwargs: dict) -> Any:
    obj = t.strip(args[0])
    t.shadow.forget(obj, "attr", args[1])
    return t.plain_call(fn, (obj, *args[1:]), kwargs)


def _getitem(t: Tagger, fn: Any, args: tuple, kwargs: dict) -> Any:
    container, key = t.strip(args[0]), t.strip(args[1])
    value = t.plain_call(fn, (container, key), kwargs)
    if not t.shadow:
        return value
    if _is_array(container):
        meta = t.shadow.array_meta(container, key)
        return value if meta is _MISSING else t.wrap(value, meta)
    if type(container) is list or isinstance(container, list):
        if isinstance(key, slice):
            return [_rewrap(t, container, v) for v in value]
        return _rewrap(t, container, value)
    if _hashable(key):
        meta = t.shadow.get(container, "item", key, value)
        if meta is not _MISSING:
            return t.wrap(value, meta)
    return value


def _rewrap(t: Tagger, container: list, value: Any) -> Any:
    meta = t.shadow.member(container, value)
    return value if meta is _MISSING else t.wrap(value, meta)


def _setitem(t: Tagger, fn: Any, args: tuple, kwargs: dict) -> Any:
    container, key, value = t.strip(args[0]), t.strip(args[1]), args[2]
    if _is_array(container):
        return _set_array(t, fn, container, key, value)
    if isinstance(container, list):
        if isinstance(key, slice) and isinstance(value, (list, tuple)):
            plain = [t.strip(v) for v in value]
            out = t.plain_call(fn, (container, key, plain), kwargs)
            for v, p in zip(value, plain):
                if _own(v, t.owner):
                    t.shadow.add_member(container, p, v.meta)
            return out
        if _own(value, t.owner):
            out = t.plain_call(fn, (container, key, value.value), kwargs)
            t.shadow.add_member(container, value.value, value.meta)
            return out
        return t.plain_call(fn, (container, key, value), kwargs)
    if _own(value, t.owner):
        out = t.plain_call(fn, (container, key, value.value), kwargs)
        if _hashable(key):
            t.shadow.put(container, "item", key, value.value, value.meta)
        return out
    if t.shadow and _hashable(key):
        t.shadow.forget(container, "item", key)
    return t.plain_call(fn, (container, key, value), kwargs)


def _set_array(t: Tagger, fn: Any, array: Any, key: Any, value: Any) -> Any:
    np = sys.modules["numpy"]
    if _own(value, t.owner):
        out = t.plain_call(fn, (array, key, value.value), {})
        _, metas, mask = t.shadow.array_slot(array, value.meta)
        metas[key] = value.meta
        mask[key] = True
        return out
    if isinstance(value, (list, tuple)) and any(_own(v, t.owner) for v in value):
        plain = [t.strip(v) for v in value]
        out = t.plain_call(fn, (array, key, plain), {})
        sample = next(v.meta for v in value if _own(v, t.owner))
        _, metas, mask = t.shadow.array_slot(array, sample)
        zero = np.zeros_like(np.asarray(sample))
        metas[key] = [v.meta if _own(v, t.owner) else zero for v in value]
        mask[key] = [_own(v, t.owner) for v in value]
        return out
    slot = t.shadow.arrays.get(id(array))
    if slot is not None and slot[0]() is array:
        slot[2][key] = False
    return t.plain_call(fn, (array, key, value), {})


def _delitem(t: Tagger, fn: Any, args: tuple, kwargs: dict) -> Any:
    container, key = t.strip(args[0]), t.strip(args[1])
    if not isinstance(container, list) and not _is_array(container) and _hashable(key):
        t.shadow.forget(container, "item", key)
    return t.plain_call(fn, (container, key), kwargs)


def _list_append(t: Tagger, lst: list, args: tuple) -> Any:
    value = args[0] if args else None
    if _own(value, t.owner):
        lst.append(value.value) if t.state.parent is None else t.plain_call(lst.append,
                                                                             (value.value,), {})
        t.shadow.add_member(lst, value.value, value.meta)
        return None
    return t.plain_call(lst.append, args, {})


def _list_insert(t: Tagger, lst: list, args: tuple) -> Any:
    index, value = args
    if _own(value, t.owner):
        t.plain_call(lst.insert, (index, value.value), {})
        t.shadow.add_member(lst, value.value, value.meta)
        return None
    return t.plain_call(lst.insert, args, {})


def _list_extend(t: Tagger, lst: list, args: tuple) -> Any:
    items = list(args[0])
    plain = [t.strip(v) for v in items]
    t.plain_call(lst.extend, (plain,), {})
    for v, p in zip(items, plain):
        if _own(v, t.owner):
            t.shadow.add_member(lst, p, v.meta)
    return None


def _list_pop(t: Tagger, lst: list, args: tuple) -> Any:
    value = t.plain_call(lst.pop, tuple(t.strip(a) for a in args), {})
    return _rewrap(t, lst, value) if t.shadow else value


def _np_append(t: Tagger, fn: Any, args: tuple, kwargs: dict) -> Any:
    """``np.append(arr, values)``: the result's shadow is the inputs' metadata, concatenated."""
    np = sys.modules["numpy"]
    arr, values = args[0], args[1]
    if not (any(_own(v, t.owner) for v in (arr, values))
            or (isinstance(values, (list, tuple)) and any(_own(v, t.owner) for v in values))
            or (_is_array(arr) and t.shadow.array_meta(arr, ...) is not _MISSING)):
        return t.plain_call(fn, args, kwargs)
    items = list(values) if isinstance(values, (list, tuple)) else [values]
    plain_items = [t.strip(v) for v in items]
    out = t.plain_call(fn, (t.strip(arr), plain_items, *args[2:]), kwargs)
    if kwargs.get("axis") is not None or len(args) > 2:
        return out  # metadata for appends along an axis is not tracked (docs/limitations.md)
    metas = [v.meta for v in items if _own(v, t.owner)]
    base = t.shadow.array_meta(t.strip(arr), ...) if _is_array(t.strip(arr)) else _MISSING
    sample = metas[0] if metas else base
    _, out_meta, out_mask = t.shadow.array_slot(out, np.asarray(sample).ravel()[0])
    n = np.size(t.strip(arr))
    if base is not _MISSING:
        slot = t.shadow.arrays[id(t.strip(arr))]
        out_meta[:n] = np.ravel(slot[1])
        out_mask[:n] = np.ravel(slot[2])
    for i, v in enumerate(items):
        if _own(v, t.owner):
            out_meta[n + i] = v.meta
            out_mask[n + i] = True
    return out


_LIST_METHODS = {"append": _list_append, "insert": _list_insert, "extend": _list_extend,
                 "pop": _list_pop}
_HANDLERS: dict[int, tuple] = {}
for _fn, _handler in ((getattr, _getattr), (setattr, _setattr), (delattr, _delattr),
                      (operator.getitem, _getitem), (operator.setitem, _setitem),
                      (operator.delitem, _delitem)):
    _HANDLERS[id(_fn)] = (_fn, _handler)


def register_numpy_handlers() -> None:
    """Add NumPy's structural functions once NumPy is in use (the core never imports it)."""
    np = sys.modules.get("numpy")
    if np is not None and id(np.append) not in _HANDLERS:
        _HANDLERS[id(np.append)] = (np.append, _np_append)


def handlers() -> dict[int, tuple]:
    """The structural functions tagged values keep their metadata through (by ``id``)."""
    return _HANDLERS


_MOVERS = {id(f): f for f in (zip, enumerate, reversed, iter, next, list, tuple, dict, set,
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
    if _HANDLERS.get(id(fn), (None,))[0] is fn or _MOVERS.get(id(fn)) is fn:
        return True
    return (type(fn) is _BuiltinMethod and type(getattr(fn, "__self__", None)) in (list, dict)
            and fn.__name__ in ("append", "insert", "extend", "pop", "get", "setdefault",
                                "copy", "index", "count", "keys", "values", "items"))
