"""Forward mode: tangents ride on values as tag metadata of a per-call context.

``jvp(f, primals, tangents)`` makes a fresh :class:`ForwardContext`, tags each input with its
tangent and overdubs ``f``.  Inside, a C function (or a function with a registered rule) that
receives a tagged value is a primitive of the context: it runs on the plain values and the rule
table gives the output tangent.  Python functions without a rule are recursed into, so user code
needs no change.  Everything the context executes -- the primal call and the rules -- runs
through the enclosing context, if any, which is how nesting differentiates derivatives: a fresh
context (and tag) per call means no perturbation confusion.

This is the general mode.  Before it, ``_jvp`` tries the specialised one (``_forward_dual``):
scalar code rewritten into its dual, arithmetic expanded in place; it gives the same results
and hands back to the general mode, before any effect, whatever it does not handle.

What the engine does beyond "call the rule" (each one a convention of ``rules/_common.py``):

- a list or tuple argument whose elements carry tangents (``np.concatenate([a, b])``,
  ``math.fsum([x, y])``) gets a tangent of the same structure, ``None`` for plain elements,
  except a list of numbers given to NumPy (``np.sum([x, y])``), which is an array to NumPy
  and to its rule (see ``_arraylike``);
- a rule that must know which arguments carry a derivative (:class:`_rules.Carried`: the ties
  of ``max``) is told;
- a function with several outputs gets a tuple (list) of tangents, ``None`` meaning zero;
- a differentiated value passed by keyword is bound to its position (rules are positional);
- an in-place operation (``a += t``, ``np.add(x, y, out=a)``) gives its rules a copy of the
  mutated argument as it was before the call;
- methods of arrays and numbers are their classes' method descriptors (``x.reshape(2, 3)`` is
  ``np.ndarray.reshape(x, 2, 3)``), which is what the tables register.

Arrays are mutable, so a tangent cannot ride on an array the way it rides on a float: an array
that receives differentiated values in place (``cache[:] = 2 * y``, ``a += t``, ``out=a``,
``grid[i][j] = t``) keeps plain numbers and the tangent of its memory lives in the context
(:class:`_ArrayTangents`), found again through any array viewing that memory.

Iteration is native in Python; the core makes it a call, ``iter(x)``, under a context that tags
values (this one): iterating a differentiated array yields differentiated rows, and a list whose
members the core keeps metadata of (built by ``append``) yields tagged members.  C functions
that only move values (``list``, ``zip``, ``sorted``, ``dict``...) get the same treatment.

Nothing is silently dropped: a C function without a rule that receives a differentiated value
(directly, in a list, or from an iterator it consumes) raises :class:`MissingRuleError`, unless
what it returns carries no derivative at all (integers, booleans, strings: ``math.floor``,
comparisons, ``len``...); so does a Python function without source, which would run natively.

A function-valued result is differentiated lazily (Manzyuk et al., JFP 2019): the derivative of
``x -> g_x`` at ``x0`` is the function ``y -> d/dx g_x(y)`` at ``x0``, each call a fresh
derivative, so ``derivative(shift)(3.0)`` composes correctly with itself.
"""

from __future__ import annotations

import dis
import functools
import inspect
import itertools
import math
import operator
import os
import types
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from overdub import (Context, Tagged, can_recurse, has_metadata, hide_machinery, is_opaque,
                     metadata, opaque, overdub, recurse, tag, untag)

from . import _arrays, _callbacks, _forward_dual, _routes, _rules
from ._arraylike import SEQUENCE_FUNCTIONS, array_like, stackable, takes_arrays
from ._pytree import flatten, reveal_node, unflatten
from .rules._common import as_array_tangent

_F = TypeVar("_F", bound=Callable[..., Any])
_PYTHON_CODE = (types.FunctionType, types.MethodType, functools.partial)
_BUILTIN_METHOD = types.BuiltinMethodType
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: set for classes defined in Python
_METHOD_DESCRIPTOR = types.MethodDescriptorType  # type(dict.get)
_C_METHODS = (_METHOD_DESCRIPTOR, types.WrapperDescriptorType)


# NumPy's float dtypes, by their classes (another namespace's dtypes are not NumPy's: left as
# they are)
_FLOAT_DTYPES = frozenset(type(np.dtype(t)) for t in (np.float16, np.float32, np.float64,
                                                      np.longdouble))

def _ids(*fns: Any) -> dict[int, Any]:
    return {id(f): f for f in fns}


# Uses of a differentiated value that ignore its tangent: the core hands them the plain value.
_INDIFFERENT = _ids(type, isinstance, issubclass, len, id, hash, repr, str, format, print,
                    bool, callable, hasattr, object.__repr__)
# Heap writes the core keeps metadata through (shadow storage of attributes, items, lists).
_STRUCTURAL = _ids(setattr, delattr, operator.delitem, object.__setattr__, object.__delattr__,
                   types.SimpleNamespace)  # (its attributes set by the core: see _tagging)
# List methods the core keeps metadata through; the context notes which lists hold some.
_LIST_WRITERS = frozenset(("append", "insert", "extend"))
# ``operator`` functions treat lists as sequences (``[x] + [y]``), never as containers of
# differentiated arguments: their list operands are not looked into.
_OPERATORS = {id(f) for f in vars(operator).values() if callable(f)}
_ARRAY_OPERANDS = (np.ndarray, np.inexact)  # operands that make an operator read a list as an array
# In-place operators: a mutated first argument must reach the rules as it was before.
_INPLACE = _ids(operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ipow,
                operator.imod, operator.imatmul, operator.ifloordiv)
# C functions that only iterate their arguments or move references around: a differentiated
# array argument is handed to them as its differentiated rows, other values pass untouched.
_ITERATING = _ids(iter, next, list, tuple, zip, enumerate, reversed, sorted, set, frozenset, map,
                  filter, any, all, functools.reduce, itertools.chain, itertools.islice,
                  itertools.accumulate, itertools.starmap, itertools.zip_longest,
                  itertools.product, itertools.combinations, itertools.permutations,
                  itertools.compress, itertools.dropwhile, itertools.takewhile,
                  itertools.filterfalse, itertools.groupby, itertools.cycle, itertools.tee)
_MOVING = {**_ITERATING, **_ids(dict, tuple.__new__,  # (a named tuple's __new__ calls it)
                                 list.copy, dict.copy)}  # (and copy.copy these)
# in-place NumPy functions that reverse mode restates as Python writes (_reverse._REPLACEMENTS)
_RESTATED = _ids(np.fill_diagonal, np.put, np.putmask, np.place)
# C functions with rules that iterate every argument (numbers out of sequences)
CONSUMERS = _ids(*(getattr(math, name) for name in ("fsum", "prod", "sumprod", "dist")
                    if hasattr(math, name)))
_OVERDUB_PACKAGES = frozenset(("overdub", "overdub_ad", "overdub_gpu"))
_MOVING_MODULES = frozenset(("itertools", "collections", "_collections", "functools",
                             "_functools", "copy", "heapq", "_heapq", "bisect", "_bisect"))
# Differentiable attributes: ``x.real`` is ``np.real(x)``.
_ATTRIBUTES = {"real": np.real, "imag": np.imag, "T": np.transpose}
if hasattr(np, "matrix_transpose"):
    _ATTRIBUTES["mT"] = np.matrix_transpose


def _innermost(x: Any) -> Any:
    while type(x) is Tagged:
        x = x.value
    return x


# operator -> its method and reflected method (in-place operators: the binary ones Python
# falls back to when the class defines no in-place method)
_OPERATOR_METHODS: dict[Any, tuple[str, str]] = {
    operator.add: ("__add__", "__radd__"), operator.sub: ("__sub__", "__rsub__"),
    operator.mul: ("__mul__", "__rmul__"), operator.truediv: ("__truediv__", "__rtruediv__"),
    operator.floordiv: ("__floordiv__", "__rfloordiv__"), operator.mod: ("__mod__", "__rmod__"),
    operator.pow: ("__pow__", "__rpow__"), operator.matmul: ("__matmul__", "__rmatmul__")}
_OPERATOR_METHODS.update({inplace: _OPERATOR_METHODS[binary] for inplace, binary in (
    (operator.iadd, operator.add), (operator.isub, operator.sub), (operator.imul, operator.mul),
    (operator.itruediv, operator.truediv), (operator.ifloordiv, operator.floordiv),
    (operator.imod, operator.mod), (operator.ipow, operator.pow),
    (operator.imatmul, operator.matmul))})
_INPLACE_METHODS = {op: "__i" + _OPERATOR_METHODS[op][0][2:] for op in (
    operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
    operator.imod, operator.ipow, operator.imatmul)}
_SCALARS = (float, int, complex, np.number)


def _user_operator(fn: Any, args: tuple[Any, ...]) -> list[tuple[Any, tuple[Any, ...]]]:
    """For ``a op b`` between a differentiated value and an object whose class defines the
    operator in Python (``Money() * x``): the methods Python would try, in its order, with
    their arguments, which the engines run as the user's code (overdubbed) until one returns
    something other than NotImplemented, instead of taking the operator as their own primitive
    -- the rule for ``*`` is right only if the method multiplies.  Empty for any other call.

    Python tries the left operand's in-place method first (``a += x``), then its binary method;
    the right operand's reflected method comes next when the left is a number, whose own method
    gives up on an unknown type (an array's would broadcast over the object instead: left to
    the rule)."""
    names = _OPERATOR_METHODS.get(fn) if type(fn) is types.BuiltinFunctionType else None
    if names is None or len(args) != 2:
        return []
    a, b = args
    if type(a) is not Tagged:
        if _arrays.is_foreign_array(a):  # (an array library written in Python: the rules' own)
            return []
        found = (getattr(type(a), name, None) for name in (_INPLACE_METHODS.get(fn, ""), names[0]))
        return [(method, (a, b)) for method in found if type(method) is types.FunctionType]
    if type(b) is not Tagged and isinstance(_innermost(a), _SCALARS) and \
            not _arrays.is_foreign_array(b):
        method = getattr(type(b), names[1], None)
        if type(method) is types.FunctionType:
            return [(method, (b, a))]
    return []


def _no_derivative_lost(out: Any, only_within: bool) -> bool:
    """Whether a C function without a rule that received a differentiated value may return
    ``out`` as a constant (docs/ad.md's exemptions): text, or pieces of it (a rendering of the
    value, as str() gives it: json.dumps, "{}".format), or -- ``only_within``: the
    differentiated values were elements of a container it received -- an integer or a string
    read from the *other* elements (a sort key).  Integers or bytes made from a differentiated
    value itself (float.as_integer_ratio, struct.pack, pickle.dumps) are not: they raise
    MissingRuleError."""
    inner = _innermost(out)
    text = isinstance(inner, str) or (type(inner) in (list, tuple) and bool(inner) and
                                      all(isinstance(part, str) for part in inner))
    return text or (only_within and _flat(inner))


def _not_a_number(out: Any) -> bool:
    """Whether a function's result is no number at all: ``None``, a string, bytes."""
    return out is None or isinstance(out, (str, bytes)) or \
        (isinstance(out, np.ndarray) and out.dtype.kind in "SU")


def _check_output(out: Any, api: str) -> None:
    """A result that is no number (``None``, a string) has no derivative to take: a
    ``TypeError``, as for ``grad`` of a list, never a zero.  (An integer or a boolean is a
    number: the result of a piecewise-constant function, ``max(0, x)`` below 0 or ``x > 0``,
    whose derivative is 0 -- or, at an integer point, one that carries a derivative.)"""
    inner = _innermost(out)
    if _not_a_number(inner):
        got = "None" if inner is None else f"an array of {inner.dtype}" \
            if isinstance(inner, np.ndarray) else f"a value of type {type(inner).__name__}"
        raise TypeError(f"{api} requires a numeric output, got {got}, which has no "
                        f"derivative")


def _check_differentiated(out: Any, carried: bool, api: str) -> None:
    """An integer or a truth value that carries no derivative (``int(x)``, ``x > 0``, a
    count, a constant) is no output to differentiate: a ``TypeError``, as for ``None``, never
    a silent zero (JAX and autograd raise too).  One that carries a derivative is a number
    like any other: ``x * x`` at an integer point, ``max(0, x)`` (whose constant winner
    carries a zero derivative: see the rules of ``max``)."""
    inner = _innermost(out)
    if not carried and isinstance(inner, (int, np.integer, np.bool_)):
        raise TypeError(f"{api} requires a real or complex output, got a value of type "
                        f"{type(inner).__name__} that carries no derivative (an integer or a "
                        f"truth value made without the input: a count, a comparison, int(x))")


def _flat(out: Any) -> bool:
    """Whether ``out`` carries no derivative at all: integers, booleans, strings (a result of a
    piecewise-constant function).  ``None`` is not flat: it is what in-place functions return."""
    out = _innermost(out)
    if isinstance(out, (bool, int, str, bytes, range, np.integer, np.bool_)):
        return True
    if isinstance(out, np.ndarray):
        return out.dtype.kind in "biuSU"
    if _arrays.is_foreign_array(out):
        return _arrays.kind(out) in "biu"
    if type(out) in (tuple, list):
        return all(_flat(o) for o in out)
    return False


def _numeric(x: Any) -> bool:
    return _arrays.is_numeric(_innermost(x))


def _rebuild(like: Any, items: list[Any]) -> Any:
    """A list or tuple (named tuples included) of the type of ``like`` holding ``items``."""
    kind = type(like)
    if kind is list or kind is tuple:
        return kind(items)
    if isinstance(like, tuple) and hasattr(like, "_fields"):
        return kind(*items)
    return kind(items)


def python_iterable(x: Any) -> bool:
    """Whether iterating ``x`` runs Python code (its class's ``__iter__``, or ``__getitem__``
    where it has no ``__iter__``)."""
    kind = type(x)
    if kind is Tagged or not kind.__flags__ & _HEAPTYPE:
        return False
    method = getattr(kind, "__iter__", None)
    if method is None:
        method = getattr(kind, "__getitem__", None)
    return type(method) is types.FunctionType


def _hides_arrays(x: Any) -> bool:
    """Whether ``x`` is a C container other than a list or tuple (``d.values()``, a deque):
    iterated natively by ``sum``'s shim, a plain array written in place among its items would
    be added natively, without the tangent its memory has."""
    kind = type(x)
    return kind not in (list, tuple, str, range, np.ndarray, Tagged) and \
        not kind.__flags__ & _HEAPTYPE and hasattr(kind, "__iter__") and not _is_iterator(x)


def iterate_through(ctx: Context, iterable: Any) -> Any:
    """The items of an object iterated by Python code, iterated through ``ctx``: a C function
    consuming it (``math.fsum(bag)``) would run that code natively, reading the heap without
    the metadata the context keeps for it.  Both modes use it."""
    iterator = ctx.overdub(iter, iterable)
    while True:
        try:
            item = ctx.overdub(next, iterator)
        except StopIteration:
            return
        yield item


def _is_iterator(x: Any) -> bool:
    return type(x) not in (float, int, str, np.ndarray, Tagged) and hasattr(type(x), "__next__")


_REVEALABLE = (float, complex, np.inexact, np.ndarray)


def _sequence_or_iterator(x: Any) -> bool:
    kind = type(x)
    return kind is list or kind is tuple or _is_iterator(x)


def _is_mover(fn: Any) -> bool:
    if id(fn) in _MOVING:
        return True
    if type(fn) is _BUILTIN_METHOD and isinstance(fn.__self__, (set, tuple)):
        return True
    return getattr(fn, "__module__", None) in _MOVING_MODULES


def _own_precision(x: Any) -> Any:
    """The dtype of directions for input ``x``: its own if it is a float or complex one (a
    float32 input's Jacobian is float32, as JAX's and reverse mode's), float for integers."""
    dtype = np.result_type(x)
    return dtype if dtype.kind in "fc" else np.result_type(dtype, float)


def _restated(fn: Any) -> Any:
    """Reverse mode's Python restatement of a NumPy method without a rule, differentiated
    through: ``np.add.at(a, i, v)`` (a scatter-add), ``x[0].item()``; None if there is none."""
    from ._reverse import _METHODS, _ufunc_at
    if type(fn) is _BUILTIN_METHOD and isinstance(fn.__self__, np.ufunc) and fn.__name__ == "at":
        return functools.partial(_ufunc_at, fn.__self__)
    if isinstance(fn, _C_METHODS) and issubclass(fn.__objclass__, (np.ndarray, np.generic)):
        return _METHODS.get(fn.__name__)
    return None


def by_differentiated_key(value: Any, carries: Callable[[Any], bool], mode: str) -> Any:
    """``value``, read as ``d[x]`` for a differentiated key ``x``.  A plain float (complex,
    inexact array) there was stored before this derivative -- a memo of earlier results,
    say, read back for an equal key -- and has no derivative with respect to the key: that is
    MissingRuleError, not a silent constant.  Values written during the derivative carry
    theirs; other values (text, integers, objects) pass."""
    if type(value) is Tagged or carries(value):
        return value  # (differentiated here, or by a context this derivative runs in)
    plain = _innermost(value)
    if isinstance(plain, (float, complex, np.inexact)) or (
            isinstance(plain, np.ndarray) and plain.dtype.kind in "fc"):
        raise _rules.MissingRuleError(
            f"a dict item looked up by a differentiated key holds a plain number (stored "
            f"before this {mode}-mode derivative began: a cache of earlier results?), which "
            f"has no derivative with respect to the key; compute it under the derivative, or "
            f"key the cache by something else")
    return value


_KEYED_READS = frozenset({"get", "pop", "setdefault"})  # dict methods returning a stored item


def keyed_read(fn: Any, args: tuple[Any, ...]) -> tuple[dict[Any, Any], Any] | None:
    """``(d, key)`` when ``fn(*args)`` returns the item stored in dict ``d`` under ``key`` --
    ``d.get(key)``, ``d.pop(key)``, ``d.setdefault(key, ...)``, bound or called as
    ``dict.get(d, key)`` -- and that item is there (a default returned is not stored), else
    None: the item read through the method must pass :func:`by_differentiated_key` as
    ``d[key]`` does."""
    if type(fn) is _BUILTIN_METHOD and isinstance(fn.__self__, dict):
        d, rest = fn.__self__, args
    elif type(fn) is _METHOD_DESCRIPTOR and fn.__objclass__ is dict and args \
            and isinstance(args[0], dict):
        d, rest = args[0], args[1:]
    else:
        return None
    if fn.__name__ not in _KEYED_READS or not rest:
        return None
    try:
        return (d, rest[0]) if _innermost(rest[0]) in d else None
    except TypeError:  # (an unhashable key: the call raises it)
        return None


def _reverse_rules_only(fn: Any) -> bool:
    """A Python function with reverse rules (``defvjp``) and no forward rule: forward mode
    differentiates its body (a C function would need the rule: MissingRuleError)."""
    return type(fn) is types.FunctionType and not any(_rules.jvp_rules(fn) or ())


def _method_of(kind: type, name: str) -> Any:
    """The C method descriptor ``name`` of ``kind`` (``np.ndarray.reshape``), or None."""
    for klass in kind.__mro__:
        found = klass.__dict__.get(name)
        if found is not None:
            return found if isinstance(found, _C_METHODS) else None
    return None


class ForwardContext(Context):
    """The forward-mode context: one instance per ``jvp`` call (its tags are its own).

    Attributes: ``arrays`` (:class:`_ArrayTangents`, tangents of plain arrays changed in place)
    and ``lists`` (ids of lists that the core holds differentiated members of).
    """

    def __init__(self) -> None:
        super().__init__()
        self.arrays = _ArrayTangents(self.fallback)
        self.lists: set[int] = set()

    def metadata_type(self, value_type: type) -> Any:
        if _arrays.is_numeric_type(value_type):
            return object  # a tangent: a number, an array, or another context's Tagged
        return None

    # -- which values carry a tangent ----------------------------------------------------------
    def _mine(self, x: Any) -> bool:
        return type(x) is Tagged and (x.owner() is self or has_metadata(x, self))

    def _carries(self, x: Any) -> bool:
        """Whether ``x`` itself has a tangent here (a tag, or an array changed in place)."""
        if type(x) is Tagged:
            if self._mine(x):
                return True
            x = _innermost(x)
        return bool(self.arrays) and isinstance(x, np.ndarray) and self.arrays.has(x)

    def _carries_within(self, x: Any, depth: int = 8) -> bool:
        """Whether ``x`` or, for lists and tuples, one of its elements has a tangent."""
        if self._carries(x):
            return True
        if type(x) is list and id(x) in self.lists:
            return True
        if depth and type(x) in (list, tuple):
            if any(self._carries_within(e, depth - 1) for e in x):
                return True
            # a list or tuple stored into the heap (``d[k] = (x, y)``) comes back with its
            # members plain, the core keeping their metadata aside: revealed, noted as a list
            # (one of numbers or arrays: a shape or axes cannot hold a derivative)
            if depth == 8 and any(isinstance(e, _REVEALABLE) for e in x) and \
                    any(map(self._carries, self._reveal(x))):
                self.lists.add(id(x))
                return True
        return False

    def _tangent(self, x: Any) -> Any:
        """The tangent of ``x`` (None if it has none): for an array whose memory was written
        in place, the written elements' tangents, the tag's for the others."""
        plain = untag(x, self) if type(x) is Tagged else x
        meta = metadata(x, self) if plain is not x else None
        if self.arrays:
            array = _innermost(plain)
            if isinstance(array, np.ndarray) and self.arrays.has(array):
                return self.arrays.get(array, meta)
        return meta

    def _split(self, x: Any) -> tuple[Any, Any]:
        """``(plain, tangent)``; a list or tuple with differentiated elements splits into a
        container of plain values and one of tangents (None for plain elements)."""
        kind = type(x)
        if kind is Tagged and x.owner() is self and not (
                self.arrays and isinstance(_innermost(x.value), np.ndarray)):
            return x.value, x.meta  # the common case: this context's layer outermost
        if kind in (float, int, complex, bool):
            return x, None
        if kind is Tagged or isinstance(x, np.ndarray):
            return untag(x, self), self._tangent(x)
        if type(x) in (list, tuple):
            items = self._reveal(x) if id(x) in self.lists else x
            parts = [self._split(e) for e in items]
            if all(t is None for _, t in parts):
                return x, None
            return type(x)(p for p, _ in parts), type(x)(t for _, t in parts)
        return x, None

    def _reveal(self, items: list[Any] | tuple[Any, ...]) -> Any:
        """The list (tuple) with the metadata the core keeps for its members re-attached (the
        core stores plain values in lists and re-tags them when they are read back)."""
        return self.fallback(operator.getitem, items, slice(None))

    # -- the step ------------------------------------------------------------------------------
    def is_primitive(self, fn: Any, /, *args: Any, **kwargs: Any) -> bool:
        if fn is getattr:
            return bool(args) and self._carries(args[0])
        if fn is setattr and _reshapes(self, args):
            return True  # a.shape = s reshapes the array in place: its tangent too
        if fn is operator.getitem:
            return bool(args) and (self._carries(args[0]) or (
                len(args) == 2 and isinstance(args[0], dict) and self._carries(args[1])))
        if fn is operator.setitem:
            return self._writes(args)
        if fn is operator.iadd and len(args) == 2 and type(args[0]) is list and \
                type(args[1]) in (list, tuple):  # L += items is L.extend(items) (an array's
            return self.is_primitive(args[0].extend, args[1])  # __radd__ answers first)
        if type(fn) is _BUILTIN_METHOD and type(fn.__self__) in (list, dict):
            receiver = fn.__self__
            if type(receiver) is list and fn.__name__ == "extend" and args and \
                    self._differentiated_array(args[0]):
                return True  # extended by the array's differentiated rows
            if type(receiver) is list and fn.__name__ in _LIST_WRITERS and (
                    any(map(self._carries_within, args))
                    or (fn.__name__ == "extend" and type(args[0]) not in (list, tuple))):
                self.lists.add(id(receiver))
            if type(receiver) is dict and fn.__name__ in ("get", "pop") and len(args) == 2 \
                    and self._carries(args[1]):
                return True  # a differentiated default, which the core would strip
            if args and self._carries(args[0]) and keyed_read(fn, args) is not None:
                return True  # memo.get(x): see by_differentiated_key
            # the core keeps the metadata of list and dict members; a copy is ours to make
            return fn.__name__ == "copy" and id(receiver) in self.lists
        if _rules._STANDINS and _rules.standin(fn, _rules.jvp_rules) is not None:
            return True  # a library function restated for differentiation (SciPy's solvers)
        direct = any(map(self._carries, args)) or any(map(self._carries, kwargs.values()))
        if not direct:
            if id(fn) in CONSUMERS and any(map(python_iterable, args)):
                return True  # math.fsum(bag): the bag is iterated through the context
            if fn is sum and self.arrays and args and _hides_arrays(args[0]):
                return True  # sum(d.values()): a plain array written in place among them
            if _callbacks.has_callback(args, kwargs) and _callbacks.c_callee(fn) and \
                    _rules.jvp_rules(fn) is None and not can_recurse(self, fn, *args, **kwargs):
                return True  # C code that calls back into Python: see _callbacks.call_guarded
            given = (*args, *kwargs.values()) if kwargs else args  # (range=(lo, hi) too)
            if not any(map(_sequence_or_iterator, given)) or (
                    id(fn) in _OPERATORS
                    and not any(isinstance(_innermost(a), _ARRAY_OPERANDS) for a in args)):
                return False  # (an operator takes a list as an array only beside an array
                # or a NumPy float: np.float64(2.0) - [s, t]; np.int64(2) * [s] repeats it)
            if not any(map(self._carries_within, given)):
                # an iterator may yield differentiated values: a C function consuming it
                # natively would drop their tangents (see _consume)
                return any(map(_is_iterator, args)) and not (
                    isinstance(fn, _PYTHON_CODE) or _is_mover(fn)
                    or id(fn) in _INDIFFERENT or id(fn) in _STRUCTURAL
                    or _rules.is_nondifferentiable(fn)
                    or isinstance(getattr(type(fn), "__call__", None), types.FunctionType)
                    or can_recurse(self, fn, *args, **kwargs))
        if ((_rules.jvp_rules(fn) is not None and not _reverse_rules_only(fn))
                or _rules.is_nondifferentiable(fn) or type(fn) is custom_jvp or fn is _tolist):
            return True
        if _rules.method_with_rules(fn, _rules.jvp_rules) is not None:
            return True  # model.energy(x), a.dot(y): the method's rules (see execute)
        if id(fn) in _INDIFFERENT or id(fn) in _STRUCTURAL:
            return False
        # Python code (recursed into, or run natively with its tags) vs a C function, which
        # needs a rule: MissingRuleError rather than a silently dropped derivative.
        if isinstance(fn, _PYTHON_CODE) or isinstance(getattr(type(fn), "__call__", None),
                                                     types.FunctionType):
            return direct and self._sourceless(fn, args, kwargs)
        if _is_mover(fn):  # before can_recurse: map's shim would iterate a tagged array whole
            return direct or any(type(a) is list and id(a) in self.lists for a in args)
        return not can_recurse(self, fn, *args, **kwargs)

    def _sourceless(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """A Python function the core would run natively for want of source (``exec``, the
        classic prompt): its arithmetic on tagged values would silently drop their tangents,
        so it is a primitive without a rule.  Opaque functions and overdub's own API mean to
        receive tagged values and are left alone."""
        if _callbacks.compiled_method(fn):
            return True  # (C code: a rule, or MissingRuleError)
        target = fn.__func__ if type(fn) is types.MethodType else fn
        if type(target) is not types.FunctionType or is_opaque(target):
            return False
        if (getattr(target, "__module__", None) or "").partition(".")[0] in _OVERDUB_PACKAGES:
            return False
        return not can_recurse(self, fn, *args, **kwargs)

    def _writes(self, args: tuple[Any, ...]) -> bool:
        """``container[key] = value``: arrays are this context's business; lists, dicts and
        objects the core's (it keeps the metadata), which this context only takes note of."""
        if len(args) != 3:
            return False
        container, _, value = args
        target = _innermost(container)
        if isinstance(target, np.ndarray):
            return (self._carries_within(value) or self._carries(container)
                    or (bool(self.arrays) and self.arrays.has(target)))
        if _arrays.is_foreign_array(target):  # _write refuses it: never a silent zero
            return self._carries_within(value) or self._carries(container)
        if type(target) is list and self._carries_within(value):
            self.lists.add(id(target))
            return type(args[1]) is slice and self._differentiated_array(value)
        return False

    def _differentiated_array(self, x: Any) -> bool:
        """Whether ``x`` is an array (not a number) with a tangent here."""
        return self._carries(x) and np.ndim(_innermost(x)) > 0

    def execute(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        if fn is getattr:
            return self._attribute(*args)
        if fn is setattr and _reshapes(self, args):
            return self._set_shape(*args)
        if fn is operator.setitem:
            return self._write(*args)
        if fn is operator.getitem and isinstance(args[0], dict) and self._carries(args[1]):
            return by_differentiated_key(self.fallback(fn, *args), self._carries, "forward")
        keyed = keyed_read(fn, args)
        if keyed is not None and self._carries(keyed[1]):
            at = 1 if type(fn) is _METHOD_DESCRIPTOR else 0  # (dict.get(d, key): key second)
            plain = (*args[:at], _innermost(args[at]), *args[at + 1:])  # a key is hashed
            return by_differentiated_key(self.fallback(fn, *plain, **kwargs), self._carries,
                                         "forward")
        if fn is operator.getitem and type(args[0]) is not Tagged:
            return self._read(*args)
        if type(fn) is custom_jvp:
            return self._custom(fn, args, kwargs)
        if fn is _tolist:
            return self._tolist(*args)
        standin = _rules.standin(fn, _rules.jvp_rules)
        if standin is not None:
            return recurse(self, standin, *args, **kwargs)
        if fn is np.copyto:  # a write: the tangents of dst's memory follow it
            return recurse(self, _copyto, *args, **kwargs)
        if id(fn) in _RESTATED and _rules.jvp_rules(fn) is None:
            from ._reverse import _REPLACEMENTS  # in-place NumPy functions restated as writes
            return recurse(self, _REPLACEMENTS[id(fn)][1], *args, **kwargs)
        if _callbacks.has_callback(args, kwargs) and _callbacks.c_callee(fn) and \
                _rules.jvp_rules(fn) is None and not any(map(self._carries_within, args)):
            return _callbacks.call_guarded(self, fn, args, kwargs, self._carries_within,
                                           "forward", self.fallback)
        if type(fn) is _BUILTIN_METHOD and type(fn.__self__) is list:
            if fn.__name__ == "extend":  # lst.extend(a), for a differentiated array a
                return self.overdub(fn, self._rows(args[0]))
            return self._reveal(fn.__self__)  # lst.copy()
        if type(fn) is _BUILTIN_METHOD and type(fn.__self__) is dict:  # d.get(key, default)
            if untag(args[0], self) in fn.__self__:
                return self.fallback(fn, args[0])  # the stored value, its tangent from the core
            return args[1]
        method = _rules.method_with_rules(fn, _rules.jvp_rules)
        if method is not None:  # a.dot(y) is np.ndarray.dot(a, y), as Python runs it
            fn, args = method[0], (method[1], *args)
        elif type(fn) is types.MethodType:
            fn, args = fn.__func__, (fn.__self__, *args)
        if type(fn) is types.BuiltinFunctionType and len(args) == 2:
            for method, operands in _user_operator(fn, args):  # Money() * x: the class's
                out = recurse(self, method, *operands)  # own method, run
                if out is not NotImplemented:
                    return out
        if type(fn) is _BUILTIN_METHOD and isinstance(fn.__self__, (np.ndarray, np.generic)):
            from ._reverse import _METHODS  # (reverse mode's table of methods as functions)
            method = _METHODS.get(fn.__name__)
            if method is not None:  # a plain array's method given a differentiated argument
                return recurse(self, functools.partial(method, fn.__self__), *args, **kwargs)
        rules = _rules.jvp_rules(fn)
        if rules is None and not _rules.is_nondifferentiable(fn):
            from ._reverse import _public  # the C function NumPy's code calls, as its public one
            fn = _public(fn)
            rules = _rules.jvp_rules(fn)
        if rules is None and not _rules.is_nondifferentiable(fn):
            if _is_mover(fn):
                return self._move(fn, args, kwargs)
            restated = _restated(fn)
            if restated is not None:  # (through the context: np.squeeze is a C dispatcher
                return self.overdub(restated, *args, **kwargs)  # with rules, not code)
            implementation = getattr(fn, "_implementation", None)
            if type(implementation) is types.FunctionType and type(fn) is not types.FunctionType:
                # a NumPy function without a rule (np.real_if_close, np.gradient): its own
                # Python code, differentiated through (as reverse mode does)
                return recurse(self, implementation, *args, **kwargs)
        if id(fn) in CONSUMERS:
            args = tuple(list(iterate_through(self, a)) if python_iterable(a) else a
                         for a in args)
        elif fn is sum and args and _hides_arrays(args[0]):
            args = (list(args[0]), *args[1:])  # its items, each with its tangent
        if any(map(_is_iterator, args)):
            args = tuple(self._consume(fn, rules, a) if _is_iterator(a) else a for a in args)
        return self._apply(fn, rules, args, kwargs)


    def _consume(self, fn: Any, rules: tuple[Any, ...] | None, iterator: Any) -> Any:
        """An iterator argument of a C function: a list for the rule of a builtin or ``math``
        function that consumes it (``math.fsum(x * k for k in ks)``); for any other function
        an iterator that raises :class:`MissingRuleError` at the first differentiated item,
        since the function would consume it natively and drop the tangent."""
        if python_iterable(iterator):  # its __next__ is Python: run through the context
            iterator = iterate_through(self, iterator)
        if rules is not None and getattr(fn, "__module__", None) in ("builtins", "math",
                                                                     "cmath"):
            return list(iterator)
        return self._guard(fn, iterator)

    def _guard(self, fn: Any, iterator: Any) -> Any:
        """``iterator``'s items, until one carries a tangent ``fn`` would drop."""
        for item in iterator:
            if self._carries_within(item):
                raise _rules.missing(fn, 0, "forward", type(self).__name__)
            yield item

    def _apply(self, fn: Any, rules: tuple[Any, ...] | None, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
        """Run ``fn`` on plain values; the output tangent is the sum of the rules'
        contributions of the arguments that carry one."""
        run = self.fallback  # runs under the enclosing context, which sees it
        if kwargs:
            args, plain_kwargs, differentiated_kwargs = self._keywords(fn, rules, args, kwargs)
        else:
            plain_kwargs, differentiated_kwargs = kwargs, ()
        split = [self._split(a) for a in args]
        if any(type(t) in (list, tuple) for _, t in split) and \
                takes_arrays(fn, [p for p, _ in split]):
            split = [self._as_arrays(fn, p, t) if type(t) in (list, tuple) else (p, t)
                     for p, t in split]
        primals = [p for p, _ in split]
        carried = [i for i, (_, t) in enumerate(split) if t is not None]
        target = _inplace_target(fn, primals, plain_kwargs) \
            if plain_kwargs or id(fn) in _INPLACE else None
        if _rules.is_nondifferentiable(fn) or not (carried or differentiated_kwargs):
            out = run(fn, *primals, **plain_kwargs)
            if target is not None:  # overwritten by something with no derivative
                out_arg = kwargs.get("out")
                holder = out_arg[0] if type(out_arg) is tuple and len(out_arg) == 1 else out_arg
                self._write_constant(target, Ellipsis, target, holder)
            return out
        if rules is None:
            out = run(fn, *primals, **plain_kwargs)
            if _no_derivative_lost(out, not differentiated_kwargs and all(
                    type(t) in (list, tuple) for _, t in split if t is not None)):
                return out
            first = carried[0] if carried else differentiated_kwargs[0]
            raise _rules.missing(fn, first, "forward", type(self).__name__)  # (says why, for
            # Python code without source)
        for i in carried:
            if i >= len(rules) or rules[i] is None:
                raise _rules.missing(fn, i, "forward", type(self).__name__)
        before = primals if target is None else [  # (y *= y[::-1]: a view of it too)
            run(np.copy, p) if _innermost(p) is target or (
                type(_innermost(p)) is np.ndarray and np.may_share_memory(_innermost(p), target))
            else p for p in primals]
        out = run(fn, *primals, **plain_kwargs)
        if "out" in plain_kwargs:
            plain_kwargs = {k: v for k, v in plain_kwargs.items() if k != "out"}
        tangent = None
        for i in carried:
            rule = rules[i]
            if rule is _rules.ZERO:
                continue
            if rule is _rules.LINEAR:
                moved = list(before)
                moved[i] = split[i][1]
                part = run(fn, *moved, **plain_kwargs)
            elif type(rule) is _rules.Carried:
                part = run(rule.rule, _rules.carried_pattern([t for _, t in split]),
                           split[i][1], out, *before, **plain_kwargs)
            else:
                part = run(rule, split[i][1], out, *before, **plain_kwargs)
            tangent = self._add(tangent, part)
        if target is not None and _innermost(out) is target:
            # changed in place: the array keeps plain numbers, its tangent lives here
            self.arrays.put(target, tangent)
            return out
        return self._attach(out, tangent)

    def _as_arrays(self, fn: Any, p: Any, t: Any) -> tuple[Any, Any]:
        """A list argument ``p`` (tangent ``t``, a list) as NumPy reads it: a list of numbers,
        or of arrays of one shape, is an array, to its rule too, with the tangent stacked
        behind its batch dimensions; for a function that reads a sequence of arrays
        (``np.concatenate``) each list in the sequence is one (see ``_arraylike``)."""
        run = self.fallback
        if stackable(p) and (array_like(p) or id(fn) not in SEQUENCE_FUNCTIONS):
            return run(np.asarray, p), run(as_array_tangent, t, p)
        if id(fn) not in SEQUENCE_FUNCTIONS:
            return p, t
        parts = [self._as_arrays(np.asarray, e, d) if type(d) in (list, tuple) else
                 (run(np.asarray, e), d) if stackable(e) else (e, d) for e, d in zip(p, t)]
        return type(p)(e for e, _ in parts), type(p)(d for _, d in parts)

    def _keywords(self, fn: Any, rules: tuple[Any, ...] | None, args: tuple[Any, ...],
                  kwargs: dict[str, Any]
                  ) -> tuple[tuple[Any, ...], dict[str, Any], Sequence[str]]:
        """``(args, plain keywords, names of differentiated keywords)``: a differentiated
        keyword is moved to its position where it has one (rules are positional); one that
        stays a keyword has no rule.  ``out=`` is a buffer: what it held does not matter."""
        if any(self._carries_within(v) for k, v in kwargs.items() if k != "out"):
            args, kwargs = _bind(fn, args, kwargs, self._carries_within)
        plain_kwargs: dict[str, Any] = {}
        differentiated: list[str] = []
        for name, value in kwargs.items():
            if name == "out":
                plain_kwargs[name] = _untag_tree(value, self)
                continue
            plain_kwargs[name], dvalue = self._split(value)
            if dvalue is not None:
                if rules is not None:
                    raise _rules.missing(fn, name, "forward", type(self).__name__)
                differentiated.append(name)
        return args, plain_kwargs, differentiated

    def _add(self, a: Any, b: Any) -> Any:
        """Sum of two contributions; tuples and lists (several outputs) elementwise, None
        standing for zero.  Never in place: a contribution may be a read-only view."""
        if a is None:
            return b
        if b is None:
            return a
        if type(a) in (tuple, list):
            return type(a)(self._add(x, y) for x, y in zip(a, b))
        return self.fallback(operator.add, a, b)

    def _attach(self, out: Any, tangent: Any) -> Any:
        """``out`` carrying ``tangent``: several outputs get one tangent each; a (nested)
        list output of an array tangent (``x.tolist()``) gets its elements' tangents."""
        if tangent is None:
            return out
        if isinstance(out, (tuple, list)):
            if isinstance(tangent, (tuple, list)):
                items = [self._attach(o, t) for o, t in zip(out, tangent)]
            else:
                nb = np.ndim(tangent) - np.ndim(_innermost(out))
                items = [self._attach(o, self._row(tangent, nb, i)) for i, o in enumerate(out)]
            return _rebuild(out, items)
        if isinstance(out, np.ndarray) and out.dtype == object:  # as reverse mode says
            raise _rules.MissingRuleError(
                f"a differentiated value became an object array under {type(self).__name__}: "
                f"its elements would lose their derivatives (np.vectorize and object arrays "
                f"are not differentiable)")
        if type(out) is not float and not _numeric(out):
            return out
        precision = getattr(_innermost(out), "dtype", None)
        if precision is not None and type(precision) in _FLOAT_DTYPES:
            wider = getattr(_innermost(tangent), "dtype", precision)
            if type(wider) in _FLOAT_DTYPES and wider.itemsize > precision.itemsize:
                # a tangent in its value's precision (float32 stays float32, as in JAX)
                tangent = self.fallback(np.asarray, tangent, precision)
        return tag(out, self, tangent)

    def _row(self, tangent: Any, nb: int, i: int) -> Any:
        return self.fallback(operator.getitem, tangent, (slice(None),) * nb + (i,))

    # -- attributes and methods ---------------------------------------------------------------
    def _attribute(self, obj: Any, name: str, *default: Any) -> Any:
        """``obj.name`` of a differentiated value: a differentiable attribute is a function
        applied to ``obj``; a method is its class's method descriptor with ``obj`` bound."""
        if name in _ATTRIBUTES:
            return self.execute(_ATTRIBUTES[name], obj)
        kind = type(_innermost(obj))
        if kind is np.ndarray and name == "tolist":
            return functools.partial(_tolist, obj)
        if kind is np.ndarray and name == "flat":
            return _Flat(obj)
        if _arrays.is_foreign_array_type(kind):
            return self._foreign_attribute(obj, name, default)
        method = _method_of(kind, name)
        if method is not None:
            return functools.partial(method, obj)
        return self.fallback(getattr, untag(obj, self), name, *default)

    def _foreign_attribute(self, obj: Any, name: str, default: tuple[Any, ...]) -> Any:
        """``obj.name`` of a differentiated array of another namespace: a method is the NumPy
        function of that name (reverse mode's table; an array-backend context runs it in the
        namespace), and data read out of the array otherwise would lose its tangent."""
        from ._reverse import _METHODS
        method = _METHODS.get(name)
        if method is not None:
            return functools.partial(method, obj)
        plain = _innermost(obj)
        value = self.fallback(getattr, untag(obj, self), name, *default)
        if callable(value) and not name.startswith("__") and not isinstance(value, type):
            return functools.partial(_foreign_method, getattr(type(plain), name, value))
        if _arrays.is_numeric(value) and _arrays.kind(value) in "fc":
            raise _arrays.attribute_error(plain, name, "forward")
        return value

    def _set_shape(self, x: Tagged, name: str, shape: Any) -> None:
        """``x.shape = shape`` on a differentiated array: the array object takes the new shape
        in place (for every name bound to it), so its tag's tangent is reshaped likewise."""
        plain = untag(x, self)
        batch = _batch_of(x.meta, plain)
        self.fallback(setattr, plain, name, shape)
        x.meta = self.fallback(np.reshape, x.meta, batch + np.shape(_innermost(plain)))

    def _tolist(self, x: Any) -> Any:
        plain, tangent = self._split(x)
        return self._attach(self.fallback(np.ndarray.tolist, plain), tangent)

    # -- arrays changed in place ----------------------------------------------------------------
    def _write(self, container: Any, key: Any, value: Any) -> None:
        """``array[key] = value``: the array gets the plain value, its tangent the value's."""
        if type(container) is list:  # lst[i:j] = a: the array's differentiated rows
            self.overdub(operator.setitem, container, key, self._rows(value))
            return
        target = untag(container, self)
        if _arrays.is_foreign_array(_innermost(target)):
            raise _arrays.write_error(_innermost(target), "forward")
        plain_key = untag(key, self)
        plain, dvalue = self._split(value)
        self.fallback(operator.setitem, target, plain_key, plain)
        array = _innermost(target)
        if dvalue is None:
            self._write_constant(array, plain_key, plain, container)
        else:
            self.arrays.write(array, plain_key, dvalue, plain)

    def _write_constant(self, array: np.ndarray, key: Any, value: Any, holder: Any) -> None:
        """``array[key] = value`` happened with a ``value`` without derivative: the written
        elements' tangent is zero.  Where ``holder`` (the array as the code named it) carries
        this context's tag, the array's memory must remember it (the tag has the old one)."""
        if self.arrays.has(array) or not self._mine(holder):
            self.arrays.write(array, key, None, value)
            return
        batch = _batch_of(metadata(holder, self), array)
        self.arrays.write(array, key, np.zeros(batch + np.shape(_innermost(value)),
                                               _dtype(array)), value)

    def _read(self, container: Any, key: Any) -> Any:
        """``array[key]`` of an array changed in place: its tangent is read at ``key``."""
        plain_key = untag(key, self)
        out = self.fallback(operator.getitem, container, plain_key)
        return self._attach(out, self.arrays.read(_innermost(container), plain_key))

    # -- iteration and moving references --------------------------------------------------------
    def _move(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``list(x)``, ``zip(x, y)``, ``dict(a=t)``...: differentiated arrays are handed over
        as lists of their differentiated rows, lists whose members the core holds metadata of
        as lists of tagged members (a copy), other values untouched (not stripped)."""
        if id(fn) in _ITERATING:
            args = tuple(self._rows(a) if self._carries(a) and np.ndim(_innermost(a)) else a
                         for a in args)
        args = tuple(self._reveal(a) if type(a) is list and id(a) in self.lists else a
                     for a in args)
        if can_recurse(self, fn, *args, **kwargs):  # map, filter, sorted(key=...): shims
            return recurse(self, fn, *args, **kwargs)
        if any(map(self._carries, args)) or any(map(self._carries, kwargs.values())):
            if fn is dict and args and type(args[0]) is dict:
                # dict(d, y=t): d's members tagged again (the core keeps their metadata)
                args = (dict(self.fallback(args[0].items)), *args[1:])
            return fn(*args, **kwargs)  # stored as they are: a dict built from tagged values
        return self.fallback(fn, *args, **kwargs)

    def _rows(self, x: Any) -> list[Any]:
        """A differentiated array as the list of its differentiated rows."""
        plain, tangent = self._split(x)
        nb = np.ndim(tangent) - np.ndim(_innermost(plain))
        return [self._attach(self.fallback(operator.getitem, plain, i), self._row(tangent, nb, i))
                for i in range(len(_innermost(plain)))]

    # -- user rules -------------------------------------------------------------------------------
    def _custom(self, fn: custom_jvp, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A :class:`custom_jvp` function: its rule gets the plain primals and the tangents
        (zeros for arguments without one) and gives the output and its tangent."""
        if fn.jvp is None:
            raise TypeError(f"custom_jvp function {_rules._name(fn.fun)} has no jvp rule: "
                            f"define one with @{fn.__name__}.defjvp")
        leaves, tree = flatten(list(fn.positional(args, kwargs)))
        parts = [self._split(leaf) for leaf in leaves]
        batch = next((np.shape(t)[:np.ndim(t) - np.ndim(_innermost(p))]
                      for p, t in parts if t is not None), ())
        primals = unflatten(tree, [p for p, _ in parts])
        tangents = unflatten(tree, [_zero(p, batch) if t is None else t for p, t in parts])
        result = self.fallback(fn.jvp, tuple(primals), tuple(tangents))
        if not (isinstance(result, tuple) and len(result) == 2):
            raise TypeError(f"the jvp rule of {_rules._name(fn.fun)} must return a pair "
                            f"(primal_out, tangent_out), got {type(result).__name__}")
        out, dout = result
        outs, otree = flatten(out)
        douts, dtree = flatten(dout)
        if len(outs) != len(douts):
            raise TypeError(f"the jvp rule of {_rules._name(fn.fun)} returned a tangent of "
                            f"structure {dtree} for an output of structure {otree}")
        return unflatten(otree, [self._attach(o, d) for o, d in zip(outs, douts)])


def _zero(x: Any, batch: tuple[int, ...]) -> Any:
    """A zero tangent for ``x`` with batch dimensions ``batch`` (None for non-numbers)."""
    x = _innermost(x)
    if not _numeric(x):
        return None
    if _arrays.is_foreign_array(x):
        return _arrays.zeros(x, batch)
    if isinstance(x, np.ndarray) or batch:
        return np.zeros(batch + np.shape(x), np.result_type(x, 0.0))
    return 0j if isinstance(x, complex) else 0.0


def _reshapes(ctx: ForwardContext, args: tuple[Any, ...]) -> bool:
    """Whether ``setattr(*args)`` is ``a.shape = s`` for an array ``a`` tagged by ``ctx``."""
    return len(args) == 3 and args[1] == "shape" and type(args[0]) is Tagged and \
        args[0].owner() is ctx and isinstance(_innermost(args[0]), np.ndarray)


def _batch_of(tangent: Any, x: Any) -> tuple[int, ...]:
    """The batch dimensions of ``tangent``, the tangent of ``x`` (those in front of its own)."""
    shape: tuple[int, ...] = np.shape(_innermost(tangent))
    return shape[:len(shape) - np.ndim(_innermost(x))]


def _bind(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], wanted: Callable[[Any], bool]
          ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``(args, kwargs)`` with each keyword argument for which ``wanted(value)`` holds moved
    to its position (earlier positions filled from the call or the defaults), because rules
    are per position.  Unchanged where the signature is unknown or the keyword has no
    position."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return args, kwargs
    positional = [p for p in signature.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = [p.name for p in positional]
    moved = [names.index(k) for k, v in kwargs.items()
             if k in names and k != "out" and wanted(v)]
    if not moved:
        return args, kwargs
    new_args, new_kwargs = list(args), dict(kwargs)
    for p in positional[len(args):max(moved) + 1]:
        if p.name in new_kwargs:
            new_args.append(new_kwargs.pop(p.name))
        elif p.default is np._NoValue:
            new_args.append(None)  # NumPy's "not given" means "given as None" when positional
        elif p.default is not p.empty:
            new_args.append(p.default)
        else:
            return args, kwargs
    return tuple(new_args), new_kwargs


def _untag_tree(x: Any, ctx: ForwardContext) -> Any:
    if type(x) in (tuple, list):
        return type(x)(untag(e, ctx) for e in x)
    return untag(x, ctx)


def _untag_bindings(ctx: Context, *roots: Any) -> None:
    """Remove ``ctx``'s layer from the values bound to the closure cells reachable from
    ``roots`` -- and to the global variables of those of them that assign globals -- once
    ``ctx``'s run is over.  The core keeps the heap free of tags, but ``nonlocal`` and
    ``global`` assignments are not calls it sees: without this, ``x = x * y`` inside a
    differentiated closure would leave the enclosing function's ``x`` tagged by a finished
    derivative (Zygote's ``D(x -> D(y -> x = y, x) * x, 1) == 1``), and a closure returned as an
    output would hold tagged values.  Functions held in cells are followed, so the cells that
    the closures of a derivative nested three deep share are cleaned too; roots that are not
    functions are skipped."""
    pending, seen = list(roots), set()
    while pending:
        fn = pending.pop()
        fn = getattr(fn, "__func__", fn)
        fn = fn.func if isinstance(fn, functools.partial) else fn
        if type(fn) is not types.FunctionType or id(fn) in seen:
            continue
        seen.add(id(fn))
        if _assigns_globals(fn.__code__):
            namespace = fn.__globals__
            for name, value in list(namespace.items()):
                if type(value) is Tagged:
                    namespace[name] = untag(value, ctx)
        for cell in fn.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:  # a cell not assigned yet
                continue
            if type(value) is Tagged:
                cell.cell_contents = untag(value, ctx)
            elif isinstance(value, _PYTHON_CODE):
                pending.append(value)


# id(code) -> (weak reference to the code, whether it or code nested in it assigns or deletes
# a global variable); keyed by identity: code objects hash their whole content
_GLOBAL_WRITERS: dict[int, tuple[weakref.ref[types.CodeType], bool]] = {}


def _assigns_globals(code: types.CodeType) -> bool:
    key = id(code)
    known = _GLOBAL_WRITERS.get(key)
    if known is None or known[0]() is not code:
        writes = any(i.opname in ("STORE_GLOBAL", "DELETE_GLOBAL")
                     for i in dis.get_instructions(code))
        nested = any(_assigns_globals(c) for c in code.co_consts if type(c) is types.CodeType)
        ref = weakref.ref(code, lambda _: _GLOBAL_WRITERS.pop(key, None))
        known = _GLOBAL_WRITERS[key] = (ref, writes or nested)
    return known[1]


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
    raise _rules.missing(method, 0, "forward", ForwardContext.__name__)


class _Flat:
    """``a.flat`` of a differentiated array ``a``.  NumPy's flat iterator reads and writes the
    array's memory natively, so its elements would lose their tangents; this stand-in is
    Python code, which the context runs: elements by their index into ``a`` raveled."""

    def __init__(self, base: Any) -> None:
        self.base = base

    def __len__(self) -> int:
        return int(np.size(self.base))

    def __iter__(self) -> Any:
        return iter(np.ravel(self.base))

    def __getitem__(self, key: Any) -> Any:
        return np.ravel(self.base)[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        base = self.base
        base[np.unravel_index(np.arange(np.size(base))[key], np.shape(base))] = value

    def copy(self) -> Any:
        return np.ravel(self.base).copy()

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        return np.ravel(self.base)


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
        if meta is None:
            return here
        return self._run(np.where, written[slots], here, meta)

    def read(self, a: np.ndarray, key: Any) -> Any:
        """The tangent of ``a[key]`` for a plain ``a`` (unwritten elements: zero)."""
        tangents = self._owners[id(_owner(a))][1]
        return self._run(operator.getitem, tangents, (Ellipsis, self.slots(a)[key]))

    def put(self, a: np.ndarray, tangent: Any) -> None:
        """All of ``a`` was written: its tangent becomes ``tangent`` (None: zero)."""
        self.write(a, Ellipsis, tangent, a)

    def write(self, a: np.ndarray, key: Any, dvalue: Any, value: Any) -> None:
        """``a[key] = value`` happened, ``dvalue`` the tangent of ``value`` (None: zero)."""
        if not np.issubdtype(a.dtype, np.inexact):
            return  # an integer array drops the derivative with the fractional part
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




# -- the API -----------------------------------------------------------------------------------

# overdub_ad's own code: its frames leave the traceback of an error as it leaves a public entry
# point, as the core's leave it as it leaves a run (OVERDUB_TRACEBACK_FILTERING=off keeps them)
_OWN_CODE = (os.path.dirname(os.path.abspath(__file__)) + os.sep,)


def _entry(fn: _F) -> _F:
    """``fn``, a public entry point (``grad(f)``'s gradient), hiding overdub_ad's frames from
    the traceback of an error it raises: the user reads their own lines, not the engine's."""
    @functools.wraps(fn)
    def entry(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BaseException as exc:
            hide_machinery(exc, _OWN_CODE)
            raise
    return entry  # type: ignore[return-value]


def _forward_entry(fn: _F) -> _F:
    """:func:`_entry` for forward mode's nestable entry points (``jvp``, ``derivative``): a
    code of their own, since the specialised forward mode marks nestable ones by their code."""
    @functools.wraps(fn)
    def forward_entry(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BaseException as exc:
            hide_machinery(exc, _OWN_CODE)
            raise
    return forward_entry  # type: ignore[return-value]


def _seed(ctx: ForwardContext, x: Any, dx: Any) -> Any:
    if not _numeric(x):
        raise TypeError(f"jvp: cannot differentiate with respect to a {type(x).__name__} "
                        f"(expected floats, complex numbers or arrays)")
    return tag(x, ctx, dx)


def _tangent_of(ctx: ForwardContext, y: Any, batch: tuple[int, ...] = ()) -> Any:
    """The tangent of an output leaf: its own, or a zero of its shape (None for leaves that
    are not numbers or arrays)."""
    tangent = ctx._tangent(y)
    if tangent is not None:
        return tangent
    return _zero(y, batch)  # None for leaves that are not numbers or arrays


def _revealed(ctx: ForwardContext, tree: Any) -> Any:
    """``tree`` with the lists and dicts in it re-reading their members through the context,
    so that values the core stored plainly (``out.append(t)``, ``d[k] = t``) keep their
    tangents when they are returned."""
    kind = type(tree)
    if kind is list:
        return [_revealed(ctx, e) for e in ctx.fallback(operator.getitem, tree, slice(None))]
    if kind is tuple:
        return tuple(_revealed(ctx, e) for e in tree)
    if kind is dict:
        return {k: _revealed(ctx, ctx.fallback(operator.getitem, tree, k)) for k in tree}
    return reveal_node(tree, ctx.overdub, lambda child: _revealed(ctx, child))  # a dataclass...


@opaque
def _call_and_reveal(ctx: ForwardContext, f: Callable[..., Any], *args: Any
                     ) -> tuple[Any, dict[int, Any]]:
    """``f(*args)`` under ``ctx``, its output revealed while the run still holds the heap's
    metadata (the core keeps it for the run only); and, by ``id``, the tangents of its leaves
    that are arrays written in place, read while the run lasts too, so that an enclosing
    derivative sees those reads.  Called inside ``ctx``'s run: the call of ``f`` is one more
    step of it (``ctx.overdub``), not a new run."""
    out = ctx.overdub(f, *args)
    if callable(out) and not _numeric(out):
        return out, {}
    out = _revealed(ctx, out)
    written = {id(y): ctx._tangent(y) for y in flatten(out)[0]
               if ctx.arrays and isinstance(_innermost(y), np.ndarray)
               and ctx.arrays.has(_innermost(y))}
    return out, written


def _jvp(f: Callable[..., Any], primals: tuple[Any, ...], tangents: tuple[Any, ...],
         batch: tuple[int, ...] = (), api: str = "jvp") -> tuple[Any, Any]:
    if _routes.enabled("forward-dual"):
        specialised = _forward_dual.jvp(f, primals, tangents, batch)  # scalar code: its dual
        if specialised is not None:
            _routes.ran("forward-dual", f)
            return specialised
        _routes.declined("forward-dual", "not scalar code of numbers that the dual pass "
                         "handles, or run inside a context", f)
    _routes.ran(_routes.REFERENCE, f, "forward mode")
    return _general_jvp(f, primals, tangents, batch, api)


def _general_jvp(f: Callable[..., Any], primals: tuple[Any, ...], tangents: tuple[Any, ...],
                 batch: tuple[int, ...] = (), api: str = "jvp") -> tuple[Any, Any]:
    """:func:`_jvp` by the general mode: tagged values in a fresh :class:`ForwardContext`
    (``api`` names the entry point in errors)."""
    ctx = ForwardContext()
    leaves, tree = flatten(list(primals))
    dleaves, dtree = flatten(list(tangents))
    if len(dleaves) != len(leaves):
        raise ValueError(f"jvp: primals and tangents differ in structure ({tree} vs {dtree})")
    seeded = unflatten(tree, [x if dx is None else _seed(ctx, x, dx)
                              for x, dx in zip(leaves, dleaves)])
    try:
        out, written = overdub(ctx, _call_and_reveal, ctx, f, *seeded)
    finally:
        _untag_bindings(ctx, f)
    if callable(out) and not _numeric(out):
        _untag_bindings(ctx, out)  # the primal: a closure of plain values, like any other output
        return out, _FunctionDerivative(f, primals, tangents)
    outs, otree = flatten(out)
    _untag_bindings(ctx, *outs)
    if len(outs) == 1 and outs[0] is out:  # (tagged by an enclosing derivative: carried too)
        _check_differentiated(out, type(out) is Tagged or id(out) in written, api)
    values = [untag(y, ctx) for y in outs]
    derivs = [_FunctionDerivative(_output_leaf(f, i), primals, tangents)
              if callable(y) and not _numeric(y) else
              written[id(y)] if id(y) in written else _tangent_of(ctx, y, batch)
              for i, y in enumerate(outs)]
    return unflatten(otree, values), unflatten(otree, derivs)


def _output_leaf(f: Callable[..., Any], i: int) -> Callable[..., Any]:
    """``f`` narrowed to leaf ``i`` of its output pytree: a function among the leaves (a pair
    of closures, DVL's "amazing bug two") is differentiated on its own, lazily."""
    return lambda *xs: flatten(f(*xs))[0][i]


@_forward_dual.nestable
@opaque
@_forward_entry
def jvp(f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any]
        ) -> tuple[Any, Any]:
    """``(f(*primals), J_f(primals) @ tangents)``: value and directional derivative.

    ``primals`` and ``tangents`` are sequences (one entry per argument of ``f``) of pytrees of
    floats, complex numbers and arrays with matching structure (``None`` for a leaf that is
    not differentiated).  Forward mode: one pass.  A tangent may carry extra leading batch
    dimensions (several directions at once, as :func:`jacfwd` does).  With complex numbers the
    tangent is the real-linear directional derivative: ``f'(z) * t`` for a holomorphic ``f``.

    Example::

        jvp(math.sin, (1.0,), (1.0,))   # (sin(1), cos(1))

    See also: :func:`derivative`, :func:`jacfwd`, :func:`check_grads`.
    """
    if not callable(f):
        raise TypeError(f"jvp: f must be callable, got {f!r}")
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("jvp(f, primals, tangents): primals and tangents must be tuples or lists "
                        "with one entry per argument of f")
    leaves, tree = flatten(list(primals))
    dleaves, dtree = flatten(list(tangents))
    if len(dleaves) != len(leaves):
        raise ValueError(f"jvp: primals and tangents differ in structure ({tree} vs {dtree})")
    batches = set()
    for x, dx in zip(leaves, dleaves):
        if dx is None or not _numeric(x):
            continue
        shape, dshape = np.shape(x), np.shape(dx)
        batch = len(dshape) - len(shape)  # leading directions (see above)
        if batch < 0 or dshape[batch:] != shape:
            raise ValueError(f"jvp: a tangent of shape {dshape} for a primal of shape {shape} "
                             f"(the shapes must match, after any leading batch dimensions)")
        batches.add(dshape[:batch])
    if len(batches) > 1:
        raise ValueError(f"jvp: the tangents' leading batch dimensions differ: "
                         f"{sorted(batches)}")
    return _jvp(f, tuple(primals), tuple(tangents))


class _FunctionDerivative:
    """The derivative of a function-valued function, applied lazily (a fresh tag per call)."""

    def __init__(self, f: Callable[..., Any], primals: tuple[Any, ...],
                 tangents: tuple[Any, ...]) -> None:
        self.f, self.primals, self.tangents = f, primals, tangents

    @opaque
    @_entry
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        f = self.f
        return _jvp(lambda *xs: f(*xs)(*args, **kwargs), self.primals, self.tangents,
                    api="derivative")[1]


@_forward_dual.nestable
@opaque
@_forward_entry
def derivative(f: Callable[..., Any], x: Any = None, /) -> Any:
    """``f'(x)`` for a function of one argument; ``derivative(f)`` is the function ``f'``.

    ``x`` is a float, a complex number or an array (elementwise directional derivative along
    ones).  ``D`` is the same function.  A function-valued ``f`` gets a function-valued
    derivative, correct under any nesting.

    Complex ``x``: for a holomorphic ``f`` this is the complex derivative ``f'(z)``.  For any
    other ``f`` it is the directional derivative along the real axis, ``df/dx`` at
    ``z = x + iy`` (``= df/dz + df/dz*``); ``jvp(f, (z,), (1j,))`` gives ``df/dy``.

    Example::

        D(lambda x: x * D(lambda y: x * y, 3.0), 5.0)   # 10.0
    """
    if not callable(f):
        raise TypeError(f"derivative: f must be callable, got {f!r}")
    if x is None:
        # named as f, inside too: a call with the wrong arguments says "f() takes ..."
        return _forward_dual.nestable(functools.wraps(f)(opaque(_forward_entry(
            functools.wraps(f)(lambda x: derivative(f, x))))))
    if type(x) is float:  # the common case, without the questions arrays need
        out, tangent = _jvp(f, (x,), (1.0,), api="derivative")
        if type(out) is not float:
            _check_output(out, "derivative")
        return tangent
    plain = _innermost(x)
    one: Any
    if isinstance(plain, np.ndarray):
        one = np.ones(plain.shape, _own_precision(plain))
    elif _arrays.is_foreign_array(plain):  # in the array's namespace
        one = _arrays.one_like(plain if _arrays.kind(plain) in "fc" else _arrays.to_float(plain))
    else:
        one = 1.0 + 0j if isinstance(plain, complex) else 1.0
    out, tangent = _jvp(f, (x,), (one,), api="derivative")
    _check_output(out, "derivative")
    return tangent


D = derivative


@opaque
@_entry
def jacfwd(f: Callable[..., Any], argnums: int | tuple[int, ...] = 0,
           chunk: int | None = None) -> Callable[..., Any]:
    """The Jacobian of ``f`` with respect to argument(s) ``argnums``, by forward mode.

    Tangents carry ``chunk`` directions at once (ForwardDiff's chunks; default: all inputs in
    one pass), so an ``n``-input Jacobian costs ``ceil(n / chunk)`` passes.  For an output leaf
    ``y`` and input ``x`` the result has shape ``y.shape + x.shape`` (JAX's convention); a
    pytree output gives the same pytree of Jacobians, a tuple ``argnums`` a tuple of them.

    Example::

        jacfwd(np.sin)(np.zeros(3))   # the identity matrix

    See also: :func:`jvp`.
    """
    if not callable(f):
        raise TypeError(f"jacfwd: f must be callable, got {f!r}")
    from ._reverse import check_argnums
    check_argnums("jacfwd", argnums)
    multiple = isinstance(argnums, tuple)
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    if chunk is not None and chunk < 1:
        raise ValueError(f"jacfwd: chunk must be a positive number of directions, got {chunk}")

    @opaque
    @_entry
    def jacobian(*args: Any) -> Any:
        for num in nums:
            if not -len(args) <= num < len(args):
                raise IndexError(f"jacfwd: argnums {num} is out of range for {len(args)} "
                                 f"arguments")
        if len({num % len(args) for num in nums}) != len(nums):  # (0, -2) with two arguments
            raise ValueError(f"jacfwd: argnums {argnums!r} names an argument twice")
        results = [_jacobian_wrt(f, args, num, chunk) for num in nums]
        if not multiple:
            return results[0]
        # as jacrev and JAX: the output's structure outside, a tuple over argnums per leaf
        # (so hessian(f, argnums=(0, 1))[0][1] is d/d(args[1]) of the gradient in args[0])
        flat = [flatten(r) for r in results]
        return unflatten(flat[0][1], [tuple(per_arg) for per_arg in
                                      zip(*[leaves for leaves, _ in flat])])

    return jacobian


def _jacobian_wrt(f: Callable[..., Any], args: tuple[Any, ...], num: int,
                  chunk: int | None) -> Any:
    """The Jacobian with respect to ``args[num]``.  For a pytree argument (a tuple, dict,
    named tuple, dataclass...) one Jacobian per leaf, arranged as JAX arranges them: the
    output's structure outside, the argument's inside."""
    leaves, tree = flatten(args[num])
    if len(leaves) == 1 and leaves[0] is args[num]:  # a number or an array
        return _jacobian_leaf(f, args, num, chunk, leaves[0], lambda seed: seed)
    per_leaf: list[Any] = []
    for j, leaf in enumerate(leaves):
        if leaf is None:  # an empty pytree, as in JAX: nothing to differentiate, None for it
            per_leaf.append(None)
            continue

        def place(seed: Any, j: int = j) -> Any:  # the direction on leaf j, none elsewhere
            return unflatten(tree, [seed if i == j else None for i in range(len(leaves))])
        per_leaf.append(flatten(_jacobian_leaf(f, args, num, chunk, leaf, place)))
    found = [jac for jac in per_leaf if jac is not None]
    if not found:
        raise TypeError(f"jacfwd: argument {num} has nothing to differentiate ({tree})")
    outputs, out_tree = found[0]
    per_leaf = [([None] * len(outputs), out_tree) if jac is None else jac for jac in per_leaf]
    return unflatten(out_tree, [unflatten(tree, [jac[0][i] for jac in per_leaf])
                                for i in range(len(outputs))])


def _jacobian_leaf(f: Callable[..., Any], args: tuple[Any, ...], num: int, chunk: int | None,
                   leaf: Any, place: Callable[[Any], Any]) -> Any:
    """The Jacobian with respect to ``leaf`` of ``args[num]`` (``place`` puts a block of
    directions for it into a tangent of the argument), ``ceil(n / chunk)`` forward passes,
    each pushing a block of unit directions as one batched tangent."""
    plain = _innermost(leaf)
    if not _numeric(plain):
        raise TypeError(f"jacfwd: argument {num} is or holds a {type(plain).__name__}, "
                        f"expected a float, complex number or array")
    shape = np.shape(plain)
    n = int(np.prod(shape, dtype=int))
    k = n if chunk is None else max(1, min(chunk, n))
    foreign = _arrays.is_foreign_array(plain)
    dtype = None if foreign else _own_precision(plain)
    blocks, tree, ctx = [], None, None
    for start in range(0, max(n, 1), max(k, 1)):
        stop = min(start + k, n)
        tangents: list[Any] = [None] * len(args)
        if foreign:  # the directions live in the argument's namespace
            tangents[num] = place(_arrays.directions(plain, start, stop))
        else:
            seed = np.zeros((stop - start, n), dtype)
            seed[np.arange(stop - start), np.arange(start, stop)] = 1.0
            tangents[num] = place(seed.reshape((stop - start,) + shape))
        out, tangent = _jvp(f, tuple(args), tuple(tangents), batch=(stop - start,),
                            api="jacfwd")
        _check_output(out, "jacfwd")
        leaves, tree = flatten(tangent)
        blocks.append(leaves)
    ctx = ForwardContext()  # routes the assembly through any enclosing context
    jacobians = [_FunctionJacobian(_output_leaf(f, i), args, num, chunk)
                 if isinstance(blocks[0][i], _FunctionDerivative)
                 else None if blocks[0][i] is None  # an output leaf None (an empty pytree)
                 else overdub(ctx, _assemble, [b[i] for b in blocks], shape)
                 for i in range(len(blocks[0]))]
    assert tree is not None  # the loop ran at least once
    return unflatten(tree, jacobians)


class _FunctionJacobian:
    """The Jacobian of a function-valued output: a function, applied lazily like
    :class:`_FunctionDerivative` (``y -> jacfwd(x -> f(x)(y))(x0)``)."""

    def __init__(self, f: Callable[..., Any], args: tuple[Any, ...], num: int,
                 chunk: int | None) -> None:
        self.f, self.args, self.num, self.chunk = f, args, num, chunk

    @opaque
    @_entry
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        f = self.f
        return _jacobian_wrt(lambda *xs: f(*xs)(*args, **kwargs), self.args, self.num,
                             self.chunk)


def _assemble(blocks: list[Any], shape: tuple[int, ...]) -> Any:
    """Columns ``(k, *out.shape)`` of several passes as a Jacobian ``out.shape + x.shape``.
    Run under a context so that an enclosing derivative sees it (the tangents may be its
    differentiated values)."""
    block = np.concatenate(blocks, axis=0) if len(blocks) > 1 else blocks[0]
    block = np.moveaxis(block, 0, -1)
    return np.reshape(block, np.shape(block)[:-1] + shape)


class custom_jvp:
    """A function with its own forward rule, JAX's ``custom_jvp``.

    Example::

        @custom_jvp
        def log1pexp(x):
            return math.log1p(math.exp(x))

        @log1pexp.defjvp
        def log1pexp_jvp(primals, tangents):
            (x,), (dx,) = primals, tangents
            return log1pexp(x), dx / (1 + math.exp(-x))

    Called with differentiated arguments inside :func:`jvp` & co, the rule runs instead of
    the body: it gets the plain primals and their tangents (zeros for arguments that have
    none), both as tuples with one entry per argument, and returns ``(output,
    output_tangent)`` with matching pytree structures.  Everywhere else the function is
    itself.  The rule is ordinary Python, so an enclosing derivative differentiates it.

    See also: :func:`overdub_ad.defjvp` (per-argument rules for any callable).
    """

    __name__: str  # the function's, copied by functools.update_wrapper

    def __init__(self, fun: Callable[..., Any]) -> None:
        if not callable(fun):
            raise TypeError(f"custom_jvp: {fun!r} is not callable")
        functools.update_wrapper(self, fun)  # sets __name__, __doc__, __wrapped__...
        self.fun = fun
        self.jvp: Callable[..., Any] | None = None

    def defjvp(self, jvp: _F) -> _F:
        """Register ``jvp(primals, tangents) -> (out, tangent_out)``; returns ``jvp``."""
        if not callable(jvp):
            raise TypeError(f"custom_jvp.defjvp: {jvp!r} is not callable")
        self.jvp = jvp
        return jvp

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fun(*args, **kwargs)

    def positional(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """The arguments of a call as the rule receives them: all by position (keywords bound
        to their parameters), in either mode."""
        if kwargs:
            args, kwargs = _bind(self.fun, args, kwargs, lambda v: True)
            if kwargs:
                raise TypeError(f"custom_jvp function {_rules._name(self.fun)}: pass the "
                                f"arguments {sorted(kwargs)} by position")
        return args

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        """A method: ``layer.act(x)`` is ``act(layer, x)``, the instance its first argument
        (as for any function; JAX's wrappers do the same)."""
        return self if instance is None else functools.partial(self, instance)

    def __repr__(self) -> str:
        return f"<custom_jvp {_rules._name(self.fun)}>"

