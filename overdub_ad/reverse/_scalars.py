"""Scalar code on the tape with no enclosing context: ``ReverseContext.execute``'s paths for
float arithmetic and ``math`` functions (one ``_Partials`` record each, from the partials
declared beside their rules: ``_calls._FAST1``/``_FAST2``), items of native containers, and
floats read from differentiated arrays in a loop (one ``_ScalarRead`` record)."""

from __future__ import annotations

import operator
import types
from typing import TYPE_CHECKING, Any

import numpy as np

from overdub import Tagged, keeps_heap_metadata

from .._rules import BILINEAR as _BILINEAR
from ._calls import _FAST1, _FAST2, _NATIVE_CONTAINERS, _NOT_SIMPLE, _REAL_TYPES
from ._tape import _Partials, _placeholder, _ScalarRead

if TYPE_CHECKING:
    from ._context import ReverseContext


def _scalar_step(self: ReverseContext, fn: Any, args: tuple[Any, ...]) -> Any:
    """``execute``'s paths for scalar code with no enclosing context: a module's function
    read, iteration of a native container, float arithmetic and ``math`` functions (one
    ``_Partials`` record each), items of containers and floats read from arrays; else
    ``_NOT_SIMPLE``."""
    p: Any  # the local partial derivative on the unary path
    if fn is getattr and type(args[0]) is types.ModuleType:
        value = getattr(*args)
        if callable(value):  # np.sin: no metadata to look for
            return value
        return self.fallback(fn, *args)
    if fn is iter and args and type(args[0]) in _NATIVE_CONTAINERS:
        return fn(*args)
    if len(args) == 2:
        partials = _FAST2.get(id(fn))
        if partials is not None:
            out = self._arithmetic(fn, partials, *args)
            if out is not _NOT_SIMPLE:
                return out
    elif len(args) == 1:
        partial = _FAST1.get(id(fn))
        if partial is not None:
            a = args[0]
            if type(a) in _REAL_TYPES:
                return fn(a)
            if type(a) is Tagged and a.owner is self._ref and type(a.value) in _REAL_TYPES:
                va = a.value
                out = fn(va)
                p = partial(va, out) if type(out) in _REAL_TYPES else None
                if p is not None and not self.second:
                    node = len(self.tape)
                    self.tape.append((_Partials, node, a.meta, p))
                    return Tagged(out, node, self._ref, self._label)
    if fn is operator.getitem and (type(args[0]) in _NATIVE_CONTAINERS or
                                   type(args[1]) is int or type(args[1]) is tuple):
        return self._scalar_read(*args)
    return _NOT_SIMPLE

def _scalar_read(self: ReverseContext, container: Any, index: Any) -> Any:
    """``x[i]`` with no enclosing context: an item of a Python container, or a float read
    from a differentiated array in a loop (one ``_ScalarRead`` record); else ``_NOT_SIMPLE``."""
    if type(container) in _NATIVE_CONTAINERS:
        item = container[index]
        if type(container) is dict and type(item) is not Tagged and keeps_heap_metadata(self):
            # a plain item may have metadata in the core's shadow (vars(obj)[name]); a tagged
            # one was stored as it is, as this context stores differentiated values
            return self.fallback(operator.getitem, container, index)
        return item
    if type(container) is Tagged and container.owner is self._ref and \
            (type(index) is int or (type(index) is tuple and
                                    all(type(i) is int for i in index))):
        array = container.value
        if type(array) is np.ndarray:
            out = array[index]
            if type(out) is np.float64:  # x[i] of a float array, in a loop
                node = len(self.tape)
                self.tape.append((_ScalarRead, node, self._node(container), index,
                                  _placeholder(array)))
                return Tagged(out, node, self._ref, self._label)
    return _NOT_SIMPLE

def _arithmetic(self: ReverseContext, fn: Any, partials: Any, a: Any, b: Any) -> Any:
    """Float arithmetic with no enclosing context: the local partials recorded (one
    ``_Partials`` record), or ``_NOT_SIMPLE`` (the general path)."""
    p: Any  # the local partial derivatives: a pair
    ref = self._ref
    if type(a) is Tagged and a.owner is ref:
        na, va = a.meta, a.value
    else:
        na, va = None, a
    if type(b) is Tagged and b.owner is ref:
        nb, vb = b.meta, b.value
    else:
        nb, vb = None, b
    if type(va) in _REAL_TYPES and type(vb) in _REAL_TYPES:
        if na is None and nb is None:
            return fn(va, vb)
        if partials is _BILINEAR:
            out, p = fn(va, vb), (vb, va)
        elif type(partials) is tuple:  # linear: constant partials
            out, p = fn(va, vb), partials
        else:
            try:
                out = fn(va, vb)
            except ZeroDivisionError:
                out = None
            p = None if out is None or type(out) not in _REAL_TYPES else \
                partials(va, vb, out, na is not None, nb is not None)
        if p is not None and not self.second:
            node = len(self.tape)
            self.tape.append((_Partials, node, na, p[0], nb, p[1]))
            return Tagged(out, node, ref, self._label)
    return _NOT_SIMPLE
