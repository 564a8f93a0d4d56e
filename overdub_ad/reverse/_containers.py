"""Differentiated values stored into lists, dicts and objects (and given back plain when ``f``
returns), values read from objects, and iteration of differentiated arrays and iterators.
(Methods of :class:`ReverseContext`.)"""

from __future__ import annotations

import collections
import functools
import io
import itertools
import operator
import sys
import types
from typing import TYPE_CHECKING, Any

import numpy as np

from overdub import (Context, Tagged, can_recurse, keeps_heap_metadata, overdub, recurse,
                     untag)

from .. import _arrays, _rules
from .._array_methods import _ATTRIBUTES, _Flat, _METHODS, _Unsupported
from .._pytree import is_node, reveal_node
from .._shared import (_hides_arrays, _innermost, iterate_through, iterated_at, _method_of,
                       python_attribute,
                       namespace_of, plain_key, python_iterable)
from .._stores import ARRAY_WRITES, EXTENDS, KEYED, SEQUENCES, STORES
from ._calls import _BuiltinMethod, _is_iterator, _put_back
from ._plans import _NP_UNSTACK
from ._tape import _is_differentiable

if TYPE_CHECKING:
    from ._context import ReverseContext

# An array's data attributes that no derivative flows through (numbers, tuples, a dtype):
# ``x.ndim`` of a NumPy array, read at every call of many functions, is read at once
_ARRAY_DATA = frozenset({"ndim", "shape", "size", "dtype", "itemsize", "nbytes", "strides"}) \
    - {"flat", *_ATTRIBUTES, *_METHODS, *ARRAY_WRITES}


# -- containers ----------------------------------------------------------------------------
def _store(self: ReverseContext, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A C method ``fn`` of a list, dict or deque (a subclass's too; bound to it): the values
    it stores are stored as they are (the container given plain values back when ``f``
    returns); ``get``/``pop`` with a differentiated default give the default as it is."""
    container, name = fn.__self__, fn.__name__
    if name in STORES:
        self._note_store(container)
        if args and name in KEYED and isinstance(container, _KEYED_BY_VALUE):
            if isinstance(container, dict) and self._carries(args[0]):
                # d.setdefault(x, v): the key as it is (see ReverseContext._writes), its item
                # an accumulator's (see made_here)
                self.keys_written.add((id(container), plain_key(args[0])))
                return fn(*args, **kwargs)
            key = self._plain(args[0])  # (a key is hashed, an index read: stored plain)
            if type(key) is Tagged and self.nested:  # a key an enclosing context tagged: it
                # stores the key plain (and the value as it is), as it does for its stores
                return self.fallback(fn, key, *args[1:], **kwargs)
            if type(key) is slice and len(args) == 2 and self._differentiated_array(args[1]):
                args = (key, self._elements(args[1]))  # lst[i:j] = a: a's elements, each
            else:
                args = (key, *args[1:])
        elif args and name in EXTENDS and self._differentiated_array(args[0]):
            args = (self._elements(args[0]), *args[1:])  # its differentiated elements
        elif args and name in EXTENDS and fed(args[0]):
            args = (self._fed_items(args[0]), *args[1:])  # L.extend(x * t for t in ts)
        if name == "update" or name in EXTENDS:
            args = tuple([self._with_kept(a) for a in args])
            kwargs = {k: self._with_kept(v) for k, v in kwargs.items()}
        return fn(*args, **kwargs)
    if name in ("get", "pop") and len(args) == 2 and self._plain(args[0]) not in container:
        return args[1]  # the default, as it was given
    return self._run(fn, *[self._plain(a) for a in args], **kwargs)
_KEYED_BY_VALUE = (dict, list)  # (a deque's insert and item assignment take an int anyway)


def _with_kept(self: ReverseContext, x: Any) -> Any:
    """``x``, a dict or list whose items a store copies (``d.update(obj.__dict__)``,
    ``L.extend(src)``), as a copy holding its differentiated items as they are, where the core
    keeps the metadata of some aside (an object's namespace: its attributes stored through
    the tag machinery) -- a native copy would read those plain, a silent zero beside the
    items stored as they are; else ``x`` itself."""
    kind = type(x)
    if (kind is not dict and kind is not list) or not keeps_heap_metadata(self, x):
        return x
    read = self.fallback  # (the tag machinery's own read gives an item its metadata back)
    if kind is dict:
        return {key: read(operator.getitem, x, key) for key in list(dict.keys(x))}
    return [read(operator.getitem, x, i) for i in range(len(x))]


def fed(x: Any) -> bool:
    """Whether ``x``, the iterable a list or deque is extended with (``L.extend(x)``,
    ``L += x``, ``L[:] = x``), is one whose items this context reads only by iterating it: an
    iterator (a generator, ``map``, ``zip``, ``iter(L)``, ``reversed(L)``), a C iterable other
    than a list, tuple, dict or deque (``d.values()``, a set), or an object iterated by Python
    code.  Left to the tag machinery, its items would be stored with their metadata kept
    aside, where this context's native reads of the list (``L[1]``, ``for v in L``,
    ``heapq``) do not look: a silent zero."""
    return not issubclass(type(x), _CLEANED) and (_is_iterator(x) or _hides_arrays(x) or
                                            python_iterable(x))


def _fed_items(self: ReverseContext, x: Any) -> list[Any]:
    """The items of ``x`` (see :func:`fed`) as ``list(x)`` gives them in ``f``, differentiated
    values as they are, to be stored so."""
    return self.overdub(list, x)  # type: ignore[no-any-return]


def _construct(self: ReverseContext, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
               ) -> Any:
    """``dict(a=x)``, ``deque([x])``, ``OrderedDict(pairs)``, ``L([x])``, ``dict.fromkeys``:
    built from the values as they are (a differentiated array's elements, each, as ``list``
    does), the container noted to get plain values back when ``f`` returns."""
    if fn is not dict:  # (fromkeys: a key per item of its first argument; its value as it is)
        args = tuple([self._elements(a) if self._differentiated_array(a) and (
            i == 0 or type(fn) is not _BuiltinMethod) else a for i, a in enumerate(args)])
    out = fn(*args, **kwargs)
    self._note_store(out)
    return out


def _setattr(self: ReverseContext, obj: Any, name: str, value: Any, raw: bool = False) -> None:
    """``obj.name = value``, kept as it is and noted to get its plain value back when the run
    ends; ``raw``: by ``object.__setattr__`` (a frozen dataclass's own way), both times."""
    self.stores[(id(obj), name)] = (obj, name)
    if raw:
        _OBJECT_SETATTR(_innermost(obj), name, value)
    else:
        setattr(_innermost(obj), name, value)


_OBJECT_SETATTR: Any = object.__setattr__


def _note_store(self: ReverseContext, container: Any) -> None:
    stores = self.stores
    stores[(id(container), None)] = (container, None)
    if len(stores) > self._store_limit:  # forget containers nobody else holds any more
        for key in [k for k, (c, name) in stores.items() if sys.getrefcount(c) <= 3]:
            del stores[key]
        self._store_limit = max(256, 2 * len(stores))


def _release_stores(self: ReverseContext) -> None:
    """Containers get plain values back (nothing leaks into the heap).  Under an enclosing
    context a value put back may still carry that context's tag: it is put back through
    that context, which keeps the metadata in its own shadow as for any store it sees (a
    native write would leave its tag in the container after it returns)."""
    writes: list[tuple[Any, ...]] = []
    for container, name in list(self.stores.values()):
        if name is not None:
            own = getattr(container, "__dict__", None)
            if type(own) is dict and (not self.nested or namespace_of(container, name)
                                      is not None):
                # (read and put back where it was stored: the class may have changed since,
                # to one with a property of that name, o.__class__ = P; an enclosing context
                # sees a write as an attribute's -- but a module's, as the item of its globals
                # it is, which that context stores as it is: see namespace_of)
                value = own.get(name)
                cleaned = self._cleaned(value)
                if cleaned is not value:
                    writes.append((operator.setitem, own, name, cleaned))
                continue
            value = getattr(container, name, None)
            cleaned = self._cleaned(value)
            if cleaned is not value:
                # (a class whose own __setattr__ refuses, a frozen dataclass: its values were
                # stored by object.__setattr__, and are put back so)
                put = setattr if type(container).__setattr__ is _OBJECT_SETATTR else \
                    _OBJECT_SETATTR
                writes.append((put, container, name, cleaned))
        elif isinstance(container, _SEQUENCE_STORES):
            write = _base_write(container)
            for i, value in enumerate(list(container)):
                cleaned = self._cleaned(value)
                if cleaned is not value:
                    writes.append((write, container, i, cleaned))
        elif isinstance(container, dict):
            write = _base_write(container)
            # (read as a dict: an OrderedDict's own iteration would hash a tagged key,
            # which it can no longer do, this context's run being over)
            if any(self._cleaned(key) is not key for key in dict.keys(container)):
                items = list(dict.items(container))  # differentiated keys: the dict rebuilt
                type(container).clear(container)  # (an OrderedDict: its own order too)
                writes.extend((write, container, self._cleaned(key), self._cleaned(value))
                              for key, value in items)
                continue
            for key, value in list(container.items()):
                cleaned = self._cleaned(value)
                if cleaned is not value:
                    writes.append((write, container, key, cleaned))
    self.stores.clear()
    if writes and self.nested:
        overdub(Context(), _put_back, writes)
    elif writes:
        _put_back(writes)


def _cleaned(self: ReverseContext, value: Any, seen: dict[int, Any] | None = None) -> Any:
    """``value`` without this context's tags: a list, deque or dict (a subclass's too) put
    plain values back, through its base class's item assignment (a Python ``__setitem__``
    would transform them again); a tuple (a named tuple) is rebuilt.  At any depth (a tag
    left deeper would leak into the heap); ``seen``: id -> what each container cleaned so far
    became (one holding itself, or held twice, is cleaned once)."""
    if type(value) is Tagged:
        return value.value if value.owner is self._ref else value
    if not isinstance(value, _CLEANED):
        return value
    if seen is None:
        seen = {}
    elif id(value) in seen:
        return seen[id(value)]
    seen[id(value)] = value
    if isinstance(value, SEQUENCES):
        items = [self._cleaned(v, seen) for v in value]
        if any(a is not b for a, b in zip(items, value)):
            if isinstance(value, tuple):
                rebuilt = type(value)(*items) if hasattr(value, "_fields") else \
                    type(value)(items)
                seen[id(value)] = rebuilt
                return rebuilt
            write = _base_write(value)
            for i, (a, b) in enumerate(zip(items, list(value))):
                if a is not b:
                    write(value, i, a)
    if isinstance(value, dict):
        write = _base_write(value)
        items = list(dict.items(value))  # (read as a dict: see _release_stores)
        if any(self._cleaned(k) is not k for k, _ in items):  # differentiated keys: rebuilt
            type(value).clear(value)
            for k, v in items:
                write(value, self._cleaned(k, seen), self._cleaned(v, seen))
            return value
        for k, v in items:
            c = self._cleaned(v, seen)
            if c is not v:
                write(value, k, c)
    return value
_SEQUENCE_STORES = (list, collections.deque)
_CLEANED = (*SEQUENCES, dict)


def _base_write(container: Any) -> Any:
    """How a plain value is put back into ``container``: ``operator.setitem`` for a list,
    deque or dict (as the code that runs under an enclosing context sees any write), the
    base class's C item assignment for a subclass that has its own in Python."""
    if not isinstance(getattr(type(container), "__setitem__", None), types.FunctionType):
        return operator.setitem
    for base in (list, collections.deque, dict):
        if isinstance(container, base):
            return base.__setitem__
    return operator.setitem


def _consumes_with_rules(fn: Any) -> bool:
    """Whether ``fn`` is a builtin or ``math`` function whose rules take the items of the
    iterable it consumes (``max``, ``min``, ``math.fsum``): given an iterator or a C iterable
    other than a list or tuple (:func:`_read_natively`), the call is this context's, made on
    the list of its items (see :func:`_consume`).  Else the function would read the items
    natively: ``math.fsum(d.values())`` adding plain values; ``max`` and ``min``, which the
    tag machinery moves tagged values through, made under an enclosing context through that
    context, which would read this context's items as constants (the winner of
    ``max(x * x for ...)`` without its outer derivative)."""
    return _rules.vjp_rules(fn) is not None and \
        getattr(fn, "__module__", None) in ("builtins", "math", "cmath")


def _read_natively(x: Any) -> bool:
    """Whether a C function given ``x`` iterates it out of the context's sight: an iterator,
    or a C iterable that is not a list, tuple, dict or deque (whose items the context reads
    as a container's): ``d.values()``, a set."""
    return _is_iterator(x) or (_hides_arrays(x) and not isinstance(x, (dict, collections.deque)))


def _consumed(self: ReverseContext, fn: Any, args: tuple[Any, ...]) -> bool:
    """Whether the call ``fn(*args)`` is :func:`_consume`'s: an iterator argument (whose
    items may be differentiated), or a C iterable the function would read natively that a
    consumer with rules takes the items of (``max(d.values())``) or that holds a
    differentiated value (``np.fromiter(d.values(), float)``).  A file (an iterator of its
    lines: text, never differentiated) is not: ``pickle.load(f)`` reads it by its methods."""
    if id(fn) in _SET_ALGEBRA and all(isinstance(a, _SET_LIKE) for a in args):
        return False  # a | b, a == b of sets: their items moved or compared as they are
    if fn is operator.contains and args and isinstance(args[0], (*_SET_LIKE, _DICT_VALUES,
                                                                 types.MappingProxyType)):
        return False  # x in s: a lookup (given the set's items as a generator: False)
    if fn is operator.getitem:
        return False  # proxy[x]: a lookup, never an iteration
    return any(not issubclass(type(a), io.IOBase) and (_is_iterator(a) or (_read_natively(a) and (
        _consumes_with_rules(fn) or any(map(self._carries, a))))) for a in args)


_SET_STORES = (operator.ior, operator.iand, operator.isub, operator.ixor)
# the set operators that make a new set or compare sets (``s |= {x}`` stores into ``s``, as
# ``s.add(x)``: a differentiated item is refused there, see _consume)
_SET_LIKE: tuple[type, ...] = (set, frozenset, type({}.keys()), type({}.items()))
_DICT_VALUES: type = type({}.values())
_SET_ALGEBRA = frozenset(map(id, (operator.or_, operator.and_, operator.sub, operator.xor,
                                  operator.eq, operator.ne, operator.lt, operator.le,
                                  operator.gt, operator.ge)))


def _consume(self: ReverseContext, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Iterable arguments of a C function: a list for a rule of a builtin or ``math``
    function that consumes them (``math.fsum``, ``max``); for any other function an iterator
    that raises :class:`MissingRuleError` at the first differentiated item, given for an
    iterator or a C iterable holding differentiated values (``d.values()``).  An iterator
    whose ``__next__`` is Python is run through the context (natively, its code would compute
    with this context's tagged values behind its back)."""
    args = tuple([iterate_through(self, a) if _is_iterator(a) and python_iterable(a) else a
                  for a in args])
    if args and isinstance(args[0], set) and fn in _SET_STORES:  # s |= {x}: as s.add(x)
        raise _rules.missing(fn, 1, "reverse", type(self).__name__)
    if _consumes_with_rules(fn):
        args = tuple([list(a) if _read_natively(a) else a for a in args])
        return self._call(fn, args, kwargs)
    return self._run(fn, *[self._guard(fn, a) if _is_iterator(a) or (
        _read_natively(a) and any(map(self._carries, a))) else a for a in args], **kwargs)


def _guard(self: ReverseContext, fn: Any, iterator: Any) -> Any:
    for item in iterator:
        if self._carries(item):
            raise _rules.missing(fn, 0, "reverse", type(self).__name__)
        yield item


def _iterate(self: ReverseContext, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``list(x)``, ``zip(x, y)``, ``for v in x``... on a differentiated array: its
    elements, each differentiated (one tape entry for all of them)."""
    items = tuple([self._elements(a) if (type(_innermost(a)) is np.ndarray or
                                         _arrays.is_foreign_array(_innermost(a)))
                   and self._node(a) is not None and iterated_at(fn, i) else a
                   for i, a in enumerate(args)])
    if fn is itertools.accumulate and len(items) == 1 and kwargs.get("func") is None:
        items += (operator.add,)  # its default sum would add natively: the shim sees it
    if can_recurse(self, fn, *items, **kwargs):  # map, filter, sorted(key=...): shims
        return recurse(self, fn, *items, **kwargs)
    return self._run(fn, *items, **kwargs)


def _elements(self: ReverseContext, x: Any) -> list[Any]:
    if np.ndim(_innermost(x)) == 0:
        raise TypeError("iteration over a 0-d array")
    if _NP_UNSTACK is not None:
        return list(self._call(_NP_UNSTACK, (x,), {}))
    return [self._call(operator.getitem, (x, i), {}) for i in range(len(_innermost(x)))]


def _textual(self: ReverseContext, x: Any, memo: dict[int, Any], loose: bool = False) -> Any:
    """``x`` without this context's tags, in it and in the lists, tuples (named ones too),
    dicts and sets in it, at any depth, for a C function that makes text of them (see
    ``_calls._reads_text``): the very object where it holds none, else a copy made of copies
    -- of the same class, as a subclass's text is its own (an ``OrderedDict``'s repr), but
    for the JSON encoder (``loose``), which reads a subclass of a list or dict as one.
    ``memo``: id -> each container's copy so far (shared and circular ones stay so: the
    encoder's own check of cycles sees them)."""
    kind = type(x)
    if kind is Tagged:
        return x.value if x.owner is self._ref else x
    if loose and kind not in _TEXT_ITEMS and isinstance(x, (list, dict)):
        kind = list if isinstance(x, list) else dict  # (read as one by the encoder)
    elif kind not in _TEXT_ITEMS and not (isinstance(x, tuple) and hasattr(x, "_fields")):
        return x
    key = id(x)
    if key in memo:
        return memo[key]
    if kind is dict:
        new: Any = {}
        memo[key] = new  # (before the items: a dict may hold itself)
        new.update((self._textual(k, memo, loose), self._textual(v, memo, loose))
                   for k, v in x.items())
        changed = type(x) is not dict or any(
            a is not b or new[a] is not x[b] for a, b in zip(new, x))
    elif kind is list:
        new = []
        memo[key] = new
        new.extend([self._textual(v, memo, loose) for v in x])
        changed = type(x) is not list or any(a is not b for a, b in zip(new, x))
    else:
        memo[key] = x  # (a tuple or set reached again while its items are read: itself)
        items = [self._textual(v, memo, loose) for v in x]
        if all(a is b for a, b in zip(items, x)):
            return x
        new = kind(*items) if hasattr(x, "_fields") else kind(items)
        memo[key] = new
        return new
    if not changed:
        memo[key] = x
        return x
    return new
_TEXT_ITEMS = frozenset((list, tuple, dict, set, frozenset))


def _revealed(self: ReverseContext, x: Any, within: tuple[int, ...] = ()) -> Any:
    """``x`` with the children of its pytree nodes (dataclasses, named tuples, registered
    classes), in its lists, tuples and dicts too, read through this context, which gives back
    the metadata it keeps aside for an object's attributes: a pytree whose leaves show their
    derivatives.  Each is the very same object where nothing in it changed; ``within``: the
    ids of the containers on the way down."""
    kind = type(x)
    if kind is dict or kind is list or kind is tuple:
        if id(x) in within:
            return x
        within = (*within, id(x))
        if kind is dict:
            items = {k: self._revealed(v, within) for k, v in x.items()}
            return x if all(items[k] is v for k, v in x.items()) else items
        revealed = [self._revealed(v, within) for v in x]
        return x if all(a is b for a, b in zip(revealed, x)) else kind(revealed)
    if kind is Tagged or not is_node(x):
        return x
    return reveal_node(x, self.overdub, lambda child: self._revealed(child, within), keep=True)


# -- attributes ----------------------------------------------------------------------------
def _attribute(self: ReverseContext, obj: Any, name: Any, *default: Any) -> Any:
    if name in _ARRAY_DATA:
        plain = _innermost(obj)
        if type(plain) is np.ndarray:
            return getattr(plain, name)  # (what the tests below come to for it)
    if name == "flat":
        return _Flat(obj)
    if name in _ATTRIBUTES:
        return self._call(_ATTRIBUTES[name], (obj,), {})
    plain = _innermost(obj)
    found = python_attribute(plain, name)  # Meters(x).double(), .half
    if found is not None:
        return self.overdub(found.fget, obj) if type(found) is property else \
            functools.partial(found, obj)
    if isinstance(plain, (np.ndarray, np.generic)) or _arrays.is_foreign_array(plain):
        write = ARRAY_WRITES.get(name)
        if write is not None:  # a.__setitem__(i, v) is a[i] = v, a.__iadd__(b) is a += b
            return functools.partial(write, obj)
        method = _method_of(type(plain), name)
        if method is None or _rules.vjp_rules(method) is None:
            method = _METHODS.get(name)  # (a method with rules is run as itself)
        if method is not None:
            return functools.partial(method, obj)
        value = getattr(plain, name, *default)
        if callable(value) and not isinstance(value, (type, np.dtype)):
            if name.startswith("__"):
                # a special method called by name (copy.deepcopy calls x.__deepcopy__): its
                # class's C method with obj bound, so that the call is seen (a rule, or
                # MissingRuleError), never run on the plain value (a silent zero)
                unbound = getattr(type(plain), name, None)
                if unbound is not None and not isinstance(unbound, type):
                    return functools.partial(unbound, obj)
                return value
            return _Unsupported(getattr(type(plain), name, value))
        if _arrays.is_foreign_array(plain) and _is_differentiable(value):
            raise _arrays.attribute_error(plain, name, "reverse")
        return value
    if isinstance(plain, (float, complex)):
        # a method of a differentiated number (x.as_integer_ratio, x.__mul__): its class's
        # C method with x bound, so that the call is seen (its rule, or MissingRuleError)
        method = _method_of(type(plain), name)
        if method is not None:
            return functools.partial(method, obj)
    return self._run(getattr, untag(obj, self), name, *default)
