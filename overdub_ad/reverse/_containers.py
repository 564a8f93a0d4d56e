"""Differentiated values stored into lists, dicts and objects (and given back plain when ``f``
returns), values read from objects, and iteration of differentiated arrays and iterators.
(Methods of :class:`ReverseContext`.)"""

from __future__ import annotations

import functools
import itertools
import operator
import sys
from typing import TYPE_CHECKING, Any

import numpy as np

from overdub import Context, Tagged, can_recurse, overdub, recurse, untag

from .. import _arrays, _rules
from .._array_methods import _ATTRIBUTES, _Flat, _METHODS, _Unsupported
from .._shared import _innermost, _method_of
from ._calls import _is_iterator, _put_back, _STORES
from ._plans import _NP_UNSTACK
from ._tape import _is_differentiable

if TYPE_CHECKING:
    from ._context import ReverseContext

# -- containers ----------------------------------------------------------------------------
def _store(self: ReverseContext, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    container = fn.__self__
    if fn.__name__ in _STORES:
        self._note_store(container)
        if fn.__name__ == "setdefault" and args and type(container) is dict:
            args = (self._plain(args[0]), *args[1:])  # a key is hashed: stored plain
        if fn.__name__ == "extend" and args and self._differentiated_array(args[0]):
            args = (self._elements(args[0]),)  # its differentiated elements, stored
        return fn(*args, **kwargs)
    if fn.__name__ in ("get", "pop") and len(args) == 2 and \
            self._plain(args[0]) not in container:
        return args[1]  # the default, as it was given
    return self._run(fn, *[self._plain(a) for a in args], **kwargs)
def _setattr(self: ReverseContext, obj: Any, name: str, value: Any) -> None:
    self.stores[(id(obj), name)] = (obj, name)
    return setattr(_innermost(obj), name, value)
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
            value = getattr(container, name, None)
            cleaned = self._cleaned(value)
            if cleaned is not value:
                writes.append((setattr, container, name, cleaned))
        elif type(container) is list:
            for i, value in enumerate(container):
                cleaned = self._cleaned(value)
                if cleaned is not value:
                    writes.append((operator.setitem, container, i, cleaned))
        elif isinstance(container, dict):
            for key, value in list(container.items()):
                cleaned = self._cleaned(value)
                if cleaned is not value:
                    writes.append((operator.setitem, container, key, cleaned))
    self.stores.clear()
    if writes and self.nested:
        overdub(Context(), _put_back, writes)
    elif writes:
        _put_back(writes)
def _cleaned(self: ReverseContext, value: Any, depth: int = 0) -> Any:
    if type(value) is Tagged:
        return value.value if value.owner is self._ref else value
    if depth < 8 and type(value) in (list, tuple):
        items = [self._cleaned(v, depth + 1) for v in value]
        if any(a is not b for a, b in zip(items, value)):
            if type(value) is list:
                value[:] = items
                return value
            return tuple(items)
    if depth < 8 and type(value) is dict:
        for k, v in list(value.items()):
            c = self._cleaned(v, depth + 1)
            if c is not v:
                value[k] = c
    return value
def _consume(self: ReverseContext, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Iterator arguments of a C function: a list for a rule of a builtin or ``math``
    function that consumes them (``math.fsum``, ``sum``, ``max``); for any other function an
    iterator that raises :class:`MissingRuleError` at the first differentiated item."""
    if _rules.vjp_rules(fn) is not None and \
            getattr(fn, "__module__", None) in ("builtins", "math", "cmath"):
        args = tuple([list(a) if _is_iterator(a) else a for a in args])
        return self._call(fn, args, kwargs)
    return self._run(fn, *[self._guard(fn, a) if _is_iterator(a) else a for a in args],
                     **kwargs)
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
                   and self._node(a) is not None else a for a in args])
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
# -- attributes ----------------------------------------------------------------------------
def _attribute(self: ReverseContext, obj: Any, name: Any, *default: Any) -> Any:
    if name == "flat":
        return _Flat(obj)
    if name in _ATTRIBUTES:
        return self._call(_ATTRIBUTES[name], (obj,), {})
    plain = _innermost(obj)
    if isinstance(plain, (np.ndarray, np.generic)) or _arrays.is_foreign_array(plain):
        method = _method_of(type(plain), name)
        if method is None or _rules.vjp_rules(method) is None:
            method = _METHODS.get(name)  # (a method with rules is run as itself)
        if method is not None:
            return functools.partial(method, obj)
        value = getattr(plain, name, *default)
        if callable(value) and not isinstance(value, (type, np.dtype)) and \
                not name.startswith("__"):
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
