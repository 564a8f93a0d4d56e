"""Stores both modes recognise however they are spelled: a write into a container or an array
made by calling its C method (``list.append(l, x)``, ``dict.__setitem__(d, k, x)``,
``super().__setitem__(k, x)`` in a dict subclass, ``a.__setitem__(i, x)``, ``a.__iadd__(b)``),
and the C constructors that build a container from the values they are given (``deque([x])``,
``OrderedDict(a=x)``, a list subclass ``L([x])``, ``dict.fromkeys(keys, x)``).

Each is the store it stands for: written as ``l.append(x)`` or ``a[i] = x`` it would be
differentiated, so spelled otherwise it must be too -- not refused with ``MissingRuleError``,
and never run natively on an array whose values a derivative depends on."""

from __future__ import annotations

import collections
import inspect
import operator
import types
from typing import Any

import numpy as np

from ._shared import _innermost

# Containers whose C code stores a value as it is given (a list, a dict, a deque; their
# subclasses, OrderedDict, defaultdict): a differentiated value can be stored in them as it is.
CONTAINERS = (list, dict, collections.deque)
SEQUENCES = (list, tuple, collections.deque)  # (the sequences a C function reads values from)
# The methods of CONTAINERS that store the values they are given (``__init__``: a subclass's
# ``super().__init__(items)``)
STORES = frozenset({"append", "insert", "extend", "__setitem__", "setdefault", "update",
                    "appendleft", "extendleft", "__init__"})
EXTENDS = frozenset({"extend", "extendleft", "__init__"})  # (given an iterable: its items)
KEYED = frozenset({"__setitem__", "setdefault", "insert"})  # (a key or an index first)
# An array's own methods that write into it, as the operations Python runs for them
# (``a.__setitem__(i, v)`` is ``a[i] = v``, ``a.__iadd__(b)`` is ``a += b``)
ARRAY_WRITES = {"__setitem__": operator.setitem, "__delitem__": operator.delitem,
                **{f"__i{name}__": getattr(operator, f"i{name}") for name in (
                    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and",
                    "or", "xor", "lshift", "rshift")}}
ARRAY_WRITE_IDS = frozenset(map(id, ARRAY_WRITES.values()))
_DESCRIPTORS = (types.MethodDescriptorType, types.WrapperDescriptorType)  # list.append
# The kinds of callables spelled_store looks at (a cheap test first)
METHOD_KINDS = frozenset({types.MethodDescriptorType, types.WrapperDescriptorType,
                          types.MethodWrapperType, types.BuiltinMethodType})


def spelled_store(fn: Any, args: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]] | None:
    """A store spelled as a call of a C method, as the store itself: ``(bound method,
    arguments)`` for a container of :data:`CONTAINERS` (the method of its own class, or of
    the base that ``super()`` or an unbound call names, bound to it: ``list.append(l, x)``,
    ``dict.__setitem__(d, k, x)``, ``L().append(x)``); for an array the operation
    (``(operator.setitem, (a, i, x))`` for ``a.__setitem__(i, x)`` or
    ``np.ndarray.__setitem__(a, i, x)``, ``(operator.iadd, (a, b))`` for ``a.__iadd__(b)``);
    None for any other call."""
    kind = type(fn)
    if kind in _DESCRIPTORS:
        if not args or not isinstance(_innermost(args[0]), fn.__objclass__):
            return None
        owner, rest = args[0], args[1:]
    elif kind is types.MethodWrapperType or kind is types.BuiltinMethodType:
        owner, rest = fn.__self__, args
        if type(owner) is types.ModuleType:  # (math.sin, len: the common case, at once)
            return None
    else:
        return None
    name = fn.__name__
    plain = _innermost(owner)
    if issubclass(type(plain), np.ndarray):  # (type: a user's __getattribute__ unseen)
        write = ARRAY_WRITES.get(name)
        return None if write is None else (write, (owner, *rest))
    if not issubclass(type(plain), CONTAINERS) or name not in STORES:
        return None
    return (fn.__get__(owner) if kind in _DESCRIPTORS else fn), rest


def spelled_is_primitive(ctx: Any, spelled: tuple[Any, tuple[Any, ...]],
                         kwargs: dict[str, Any], carries: Any) -> bool:
    """A context's ``is_primitive`` for a store spelled as a call of a C method
    (:func:`spelled_store`): as for the store itself -- an array's write as the context decides
    it, any other store when a value it stores ``carries`` a derivative."""
    method, rest = spelled
    if id(method) in ARRAY_WRITE_IDS:
        return bool(ctx.is_primitive(method, *rest, **kwargs))
    return any(map(carries, rest)) or any(map(carries, kwargs.values()))


def constructs_container(fn: Any) -> bool:
    """Whether ``fn`` builds a container of :data:`CONTAINERS` from the values it is given, in
    C: ``deque``, ``OrderedDict``, a subclass without a Python ``__init__`` or ``__new__``
    (``L([x])``; one with them is run, and its ``super().__init__`` is a store), a
    ``fromkeys``.  (``list`` and ``dict`` themselves each mode handles on its own.)"""
    if type(fn) is types.BuiltinMethodType:  # dict.fromkeys("ab", x)
        owner = fn.__self__
        return isinstance(owner, type) and issubclass(owner, dict) and fn.__name__ == "fromkeys"
    return isinstance(fn, type) and issubclass(fn, CONTAINERS) and fn is not list and \
        fn is not dict and not isinstance(getattr(fn, "__init__", None), types.FunctionType) \
        and not isinstance(inspect.getattr_static(fn, "__new__", None),
                           (types.FunctionType, staticmethod))
