"""What both modes share: the classification of calls (operators, methods, builtins that
iterate or move values), checks of what a derivative may drop, and the entry point wrapper of
the public functions."""

from __future__ import annotations

import bisect
import collections
import dis
import functools
import heapq
import inspect
import io
import itertools
import math
import operator
import os
import types
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from overdub import (Context, has_metadata, hide_machinery, is_opaque, keeps_heap_metadata,
                     Tagged, untag)

from . import _arrays, _callbacks, _routes, _rules
from ._array_methods import _METHODS, _ufunc_at
from ._pytree import flatten

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
# In-place operators: a mutated first argument must reach the rules as it was before.
_INPLACE = _ids(operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ipow,
                operator.imod, operator.imatmul, operator.ifloordiv)
# C functions that only iterate their arguments or move references around: a differentiated
# array argument is handed to them as its differentiated rows, other values pass untouched.
_ITERATING = _ids(iter, next, list, tuple, tuple.__new__, zip, enumerate, reversed, sorted, set,
                  frozenset, map,
                  filter, any, all, functools.reduce, itertools.chain, itertools.islice,
                  itertools.accumulate, itertools.starmap, itertools.zip_longest,
                  itertools.product, itertools.combinations, itertools.permutations,
                  itertools.compress, itertools.dropwhile, itertools.takewhile,
                  itertools.filterfalse, itertools.groupby, itertools.cycle, itertools.tee,
                  itertools.combinations_with_replacement, itertools.chain.from_iterable,
                  *[getattr(itertools, name) for name in ("pairwise", "batched")
                    if hasattr(itertools, name)])
# The argument an iterating function keeps or hands on as it is, not iterating it:
# ``reduce``'s initial value, ``next``'s default, the object ``itertools.repeat`` repeats (a
# differentiated array there stays one).
_KEPT = {id(functools.reduce): 2, id(next): 1, id(itertools.repeat): 0}


def iterated_at(fn: Any, position: int) -> bool:
    """Whether the iterating function ``fn`` iterates its argument at ``position``."""
    return _KEPT.get(id(fn)) != position


_MOVING = {**_ITERATING, **_ids(dict,  # (tuple.__new__: a named tuple's __new__ calls it)
                                 list.copy, dict.copy, collections.deque.copy,
                                 collections.deque.__copy__)}  # (and copy.copy these)
# C functions that reorder or insert into the list they are given, in place (heaps, sorted
# insertion; the max-heaps of heapq.nsmallest, public in Python 3.14): handed a copy of it,
# they would change the copy
REORDERING = _ids(heapq.heappush, heapq.heappop, heapq.heapify, heapq.heappushpop,
                  heapq.heapreplace, bisect.insort, bisect.insort_left, bisect.insort_right,
                  *[getattr(heapq, name) for name in (
                      "_heapify_max", "_heappop_max", "_heapreplace_max", "heapify_max",
                      "heappop_max", "heapreplace_max", "heappush_max", "heappushpop_max")
                    if hasattr(heapq, name)])
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


#: What :func:`class_attribute` gives for a name no class defines (None is a value a class
#: attribute may have: ``__hash__ = None``).
MISSING: Any = object()


def class_attribute(cls: type, name: str) -> Any:
    """``name`` as a class dict in ``cls``'s MRO holds it, or :data:`MISSING`: the lookup of
    a special method, running no Python code (no metaclass ``__getattr__``, no descriptor)."""
    for klass in cls.__mro__:
        found = klass.__dict__.get(name, MISSING)
        if found is not MISSING:
            return found
    return MISSING


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_ARRAY_METHOD_KINDS = (types.BuiltinMethodType, types.MethodDescriptorType)
# id(fn) -> (fn, the position of its ``out`` parameter (-1: none), the positional parameters'
# names from ``out`` on): NumPy's functions, read once each (only theirs: a user's closure
# kept here would keep what it holds alive)
_OUT_AT: dict[int, tuple[Any, int, tuple[str, ...]]] = {}


def _out_at(fn: Any) -> tuple[int, tuple[str, ...]]:
    """Where a NumPy function takes ``out`` by position (``np.cumsum(a, axis, dtype, out)``:
    3), and the names from there on; ``(-1, ())`` for any other callable."""
    found = _OUT_AT.get(id(fn))
    if found is None or found[0] is not fn:
        if not (getattr(fn, "__module__", None) or "").startswith("numpy"):
            return -1, ()
        names: list[str] = []
        try:
            names = [p.name for p in inspect.signature(fn).parameters.values()
                     if p.kind in _POSITIONAL]
        except (TypeError, ValueError):  # (no signature: none of NumPy's that write)
            pass
        if len(_OUT_AT) > 4096:  # (callables NumPy makes afresh, np.vectorize's: bounded)
            _OUT_AT.clear()
        at = names.index("out") if "out" in names else -1
        found = _OUT_AT[id(fn)] = (fn, at, tuple(names[at:]) if at >= 0 else ())
    return found[1], found[2]


# an array method's name -> where it takes ``out`` among its arguments (-1: nowhere), and the
# names from there on: its NumPy function's, less the array (``a.sum(axis, dtype, out)``)
_METHOD_OUT: dict[str, tuple[int, tuple[str, ...]]] = {}


def _method_out_at(fn: Any) -> tuple[int, tuple[str, ...]]:
    """:func:`_out_at` for an array's method, bound (``a.sum``) or not (``np.ndarray.sum``,
    the array first); ``(-1, ())`` for any other callable."""
    kind = type(fn)
    if kind is _BUILTIN_METHOD and isinstance(fn.__self__, np.ndarray):
        shift = 0
    elif kind is _METHOD_DESCRIPTOR and issubclass(fn.__objclass__, np.ndarray):
        shift = 1
    else:
        return -1, ()
    name = fn.__name__
    found = _METHOD_OUT.get(name)
    if found is None:
        function = getattr(np, name, None)
        found = (-1, ())
        if type(function) is np.ufunc:  # a.conj(w): the ufunc's out (see out_as_keyword)
            found = (0, ("out",))
        elif callable(function):
            names = _out_at(function)[1]
            try:
                first = next(iter(inspect.signature(function).parameters))
            except (TypeError, ValueError, StopIteration):
                first = ""
            if names and first in ("a", "x"):  # (the array first: np.compress's is not)
                found = (_out_at(function)[0] - 1, names)
        found = _METHOD_OUT[name] = found
    return (found[0] + shift if found[0] >= 0 else -1), found[1]


def given_out(fn: Any, args: tuple[Any, ...]) -> bool:
    """Whether ``fn(*args)`` is given an array to write into by position: a ufunc's outputs
    past its inputs (``np.sin(a, r)``), a NumPy function's ``out`` parameter
    (``np.cumsum(a, 0, None, w)``, ``np.dot(a, b, w)``), an array method's
    (``a.sum(0, None, w)``)."""
    if type(fn) is np.ufunc:
        return len(args) > fn.nin
    if not args:
        return False
    at = _method_out_at(fn)[0] if type(fn) in _ARRAY_METHOD_KINDS else \
        (_out_at(fn)[0] if len(args) > 1 else -1)
    return 0 <= at < len(args) and args[at] is not None


def out_as_keyword(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
                   ) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """A call with its output arrays given positionally (:func:`given_out`), restated with
    them as its ``out=``, the one spelling the modes look at (a positional ``out`` would be
    written natively, its derivative lost): a ufunc's past its ``nin`` inputs; a NumPy
    function's ``out`` and the parameters after it as keywords.  An array method that is a
    ufunc (``a.conj(w)``, which takes no keywords) becomes that ufunc's call
    (``np.conjugate(a, out=w)``).  A call that also names ``out=`` is left to NumPy to
    refuse."""
    if "out" in kwargs:
        return fn, args, kwargs
    if type(fn) in _ARRAY_METHOD_KINDS and type(getattr(np, fn.__name__, None)) is np.ufunc:
        if type(fn) is _BUILTIN_METHOD:
            args = (fn.__self__, *args)
        fn = getattr(np, fn.__name__)
    if type(fn) is not np.ufunc:
        at, names = _method_out_at(fn) if type(fn) in _ARRAY_METHOD_KINDS else _out_at(fn)
        return fn, args[:at], {**kwargs, **dict(zip(names, args[at:]))}
    outs = args[fn.nin:]
    out = outs[0] if fn.nout == 1 and len(outs) == 1 else \
        (*outs, *(None,) * (fn.nout - len(outs)))  # (missing ones NumPy allocates)
    return fn, args[:fn.nin], {**kwargs, "out": out}


def part_write(fn: Any, args: tuple[Any, ...]) -> bool:
    """Whether ``fn(*args)`` is ``z.real = v`` or ``z.imag = v`` on a NumPy array, which
    both modes run as :func:`set_part` (natively the attribute's setter stores plain numbers:
    the derivative would be lost)."""
    return fn is setattr and len(args) == 3 and type(_innermost(args[0])) is np.ndarray \
        and args[1] in ("real", "imag")


def set_part(array: Any, name: str, value: Any) -> None:
    """``array.real = value`` (``name``: "real" or "imag"): the element write
    ``array[...] = ...`` it amounts to, run through a context, which follows element writes.
    The part kept is added back as ``1j * part``, whose real part is NaN where ``part`` is
    infinite (0 * inf): refused there rather than computed wrong."""
    if array.dtype.kind != "c":
        if name == "imag":
            raise TypeError("array does not have imaginary part to set")
        array[...] = value  # (the real part of a real array is the array)
        return
    kept = array.imag if name == "real" else array.real
    if not np.isfinite(kept).all():
        raise _rules.MissingRuleError(
            f"z.{name} = v on a complex array whose {'imaginary' if name == 'real' else 'real'}"
            f" part is infinite or NaN: its derivative is not followed (write z[...] = ... "
            f"instead)")
    if name == "real":
        array[...] = np.real(value) + 1j * kept
    else:
        array[...] = kept + 1j * np.real(value)


def unfollowed_write(array: np.ndarray, mode: str) -> _rules.MissingRuleError | None:
    """The error for a derivative written into ``array`` where neither mode follows one: a
    structured (record) array or one of its fields (a view of another dtype, as the
    tangents and the tape know an array's elements only by number), or, in forward mode, any
    view of an array of another dtype (``z.real[:] = v``: reverse mode says so itself when it
    commits the write); None where it is followed."""
    base = array.base
    structured = array.dtype.names is not None or (
        type(base) is np.ndarray and base.dtype.names is not None)
    if structured:
        return _rules.MissingRuleError(
            f"overdub_ad {mode} mode: a derivative written into a structured (record) array "
            f"or one of its fields is not followed; keep each differentiated field in an "
            f"array of its own")
    if isinstance(base, np.nditer):
        return _rules.MissingRuleError(
            f"no {mode}-mode derivative rule for numpy.nditer: a derivative written into an "
            f"operand of np.nditer (v[...] = x in a read-write loop) is not followed; write "
            f"into the array itself (b[k] = x)")
    if mode == "forward" and isinstance(base, np.ndarray) and base.dtype != array.dtype:
        return _rules.MissingRuleError(
            f"overdub_ad forward mode: a derivative written into a view of dtype "
            f"{array.dtype} of an array of dtype {base.dtype} (z.real[:] = v) is not "
            f"followed; write the whole array (z.real = v, z[...] = v)")
    return None


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
    gives up on an unknown type, or an array whose operator gives way to the object (see
    :func:`_numpy_defers`); otherwise an array's would broadcast over the object: left to the
    rule."""
    names = _OPERATOR_METHODS.get(fn) if type(fn) is types.BuiltinFunctionType else None
    if names is None or len(args) != 2:
        return []
    a, b = args
    if type(a) is not Tagged:
        if _arrays.is_foreign_array(a):  # (an array library written in Python: the rules' own)
            return []
        found = (getattr(type(a), name, None) for name in (_INPLACE_METHODS.get(fn, ""), names[0]))
        return [(method, (a, b)) for method in found if type(method) is types.FunctionType]
    if type(b) is not Tagged and not _arrays.is_foreign_array(b):
        left = _innermost(a)
        if isinstance(left, _SCALARS) or (isinstance(left, np.ndarray) and
                                          fn not in _INPLACE_METHODS and _numpy_defers(b)):
            method = getattr(type(b), names[1], None)
            if type(method) is types.FunctionType:
                return [(method, (b, a))]
    return []


def _numpy_defers(b: Any) -> bool:
    """Whether an array's binary operator gives way to ``b`` (returns NotImplemented, so that
    Python calls ``b``'s reflected method), as NumPy decides: ``b``'s class sets
    ``__array_ufunc__ = None``, or, without ``__array_ufunc__``, has an ``__array_priority__``
    above an array's (0) and is no array itself."""
    if isinstance(b, (np.ndarray, np.generic)):
        return False
    ufunc = getattr(type(b), "__array_ufunc__", _ABSENT)
    if ufunc is not _ABSENT:
        return ufunc is None
    priority = getattr(b, "__array_priority__", 0.0)
    return isinstance(priority, (int, float)) and priority > 0.0


_ABSENT = object()


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
    return text or (only_within and not isinstance(inner, (bytes, bytearray)) and _flat(inner))


def _not_a_number(out: Any) -> bool:
    """Whether a function's result is no number at all: ``None``, a string, bytes."""
    return out is None or isinstance(out, (str, bytes)) or \
        (isinstance(out, np.ndarray) and out.dtype.kind in "SU")


def _check_output(out: Any, api: str) -> None:
    """A result that is no number (``None``, a string) has no derivative to take: a
    ``TypeError``, as for ``grad`` of a list, never a zero.  (An integer or a boolean is a
    number: the result of a piecewise-constant function, ``max(0, x)`` below 0 or ``x > 0``,
    whose derivative is 0 -- or, at an integer point, one that carries a derivative.)  Nor has
    an object that no pytree takes apart, in the result or any of its containers: the
    derivatives of its fields would be lost."""
    inner = _innermost(out)
    if _not_a_number(inner):
        got = "None" if inner is None else f"an array of {inner.dtype}" \
            if isinstance(inner, np.ndarray) else f"a value of type {type(inner).__name__}"
        raise TypeError(f"{api} requires a numeric output, got {got}, which has no "
                        f"derivative")
    check_leaves(out, api)


def check_leaves(out: Any, api: str) -> None:
    """:func:`_check_output`'s second half, for ``jvp``, whose output may be ``None`` (an
    empty pytree, as in JAX): a leaf that is an object no pytree takes apart is refused."""
    if out.__class__ in _NUMBER_OUTPUTS:
        return
    for leaf in flatten(out)[0]:
        plain = _innermost(leaf)
        if not (plain is None or _arrays.is_numeric(plain) or callable(plain)
                or isinstance(plain, (str, bytes)) or type(plain) in ENGINE_NUMBERS):
            raise TypeError(f"{api} requires numbers, arrays or pytrees of them as the output, "
                            f"got a value of type {type(plain).__name__}, which no pytree "
                            f"takes apart: "
                            f"return its numbers, or register its class "
                            f"(overdub_ad.register_pytree) to differentiate its fields")


_NUMBER_OUTPUTS = frozenset((float, np.float64, np.ndarray, complex))
#: the engines' own number types (the dual route's dual numbers, registered where they are
#: defined): an inner derivative's output is one while an enclosing derivative runs
ENGINE_NUMBERS: set[type] = set()


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


def derivative_entry(fn: Any) -> bool:
    """Whether Python code ``fn`` is an entry point of a derivative (``jvp``, ``vjp``,
    ``grad(f)``'s gradient, ``jacrev``'s, a pullback...): overdub_ad's, opaque (run natively,
    given tagged values as they are), no rule's helper and without rules of its own.  It takes
    the pytrees it is given apart natively, where values an enclosing derivative stored into
    them read plain: the engines give it the pytrees revealed (``_entry_call``)."""
    target = fn.__func__ if type(fn) is types.MethodType else fn
    if not is_opaque(target):
        return False
    module = getattr(target, "__module__", None) or ""
    return module.startswith("overdub_ad.") and not module.startswith("overdub_ad.rules") \
        and _rules.jvp_rules(fn) is None and _rules.vjp_rules(fn) is None


def inert_library_call(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether ``fn`` is a NumPy function written in Python (``np.ones``, ``np.eye``,
    ``np.linspace``) given only values that hold no derivative (numbers, text, shapes, dtypes):
    nothing can flow through it, so it runs as the one call it is rather than be recursed into.
    An enclosing context then sees ``np.ones(3)`` as the user wrote it: overdub_gpu's swaps it
    whole, where NumPy's own body (``copyto`` into ``np.empty``) has no counterpart."""
    if type(fn) is not types.FunctionType or not (
            getattr(fn, "__module__", None) or "").startswith("numpy"):
        return False
    return all(map(_inert_argument, args)) and all(map(_inert_argument, kwargs.values()))


def _inert_argument(x: Any) -> bool:
    kind = type(x)
    if kind is tuple:
        return all(type(v) is int for v in x)  # a shape
    # (a dtype of another namespace, array_api_strict's DType, is none of NumPy's)
    return kind in INERT_ARGUMENTS or isinstance(x, np.dtype) or kind.__name__ == "DType"


#: plain arguments that hold no derivative (numbers not tagged, text, classes as dtypes): a
#: call given only these has nothing to differentiate
INERT_ARGUMENTS = frozenset({int, float, bool, complex, str, type(None), np.float64, type})


def not_differentiable(x: Any) -> str | None:
    """What ``x`` is, where no derivative can be taken with respect to it -- no number or
    array of numbers, or a truth value (a bool, a bool array; JAX refuses them too) -- for
    both modes' message; None for a value that can be differentiated."""
    plain = _innermost(x)
    if isinstance(plain, np.matrix):  # (its * and ** are matrix products, its reductions
        return "np.matrix (give np.asarray(m))"  # keep two dimensions: not followed)
    if _arrays.is_numeric(plain) and not isinstance(plain, (bool, np.bool_)) and \
            _arrays.kind(plain) != "b":
        return None
    return f"{plain.dtype} array" if hasattr(plain, "dtype") and \
        not isinstance(plain, np.generic) else type(plain).__name__


def not_differentiable_error(what: str, api: str = "") -> TypeError:
    article = "an" if what[:1].lower() in "aeiou" else "a"
    return TypeError(f"{api + ': ' if api else ''}cannot differentiate with respect to "
                     f"{article} {what} (expected floats, complex numbers or arrays of them)")


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
        not kind.__flags__ & _HEAPTYPE and hasattr(kind, "__iter__") and not _is_iterator(x) \
        and not isinstance(x, io.IOBase)


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
    """Whether ``x`` is an iterator whose items a C function given it may consume natively.
    Not a stream (``io.BytesIO``, an open file): its items are lines read from its buffer,
    never a differentiated value, and the functions given one take it as a file, not an
    iterable (``io.TextIOWrapper(stream)``, ``np.save(stream, a)``, ``np.loadtxt(f)``):
    handed a generator in its place, they failed, and iterating it to look for
    differentiated values would consume it."""
    return type(x) not in (float, int, str, np.ndarray, Tagged) and \
        hasattr(type(x), "__next__") and not isinstance(x, io.IOBase)


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
    if type(fn) is _BUILTIN_METHOD and isinstance(fn.__self__, np.ufunc) and fn.__name__ == "at":
        return functools.partial(_ufunc_at, fn.__self__)
    if isinstance(fn, _C_METHODS) and issubclass(fn.__objclass__, (np.ndarray, np.generic)):
        return _METHODS.get(fn.__name__)
    return None


def by_differentiated_key(value: Any, carries: Callable[[Any], bool], mode: str,
                          ctx: Any) -> Any:
    """``value``, read as ``d[x]`` for a differentiated key ``x``.  A plain float (complex,
    inexact array) there was stored before this derivative -- a memo of earlier results,
    say, read back for an equal key -- and has no derivative with respect to the key: that is
    MissingRuleError, not a silent constant.  Values written during the derivative carry
    theirs; other values (text, integers, objects) pass.  A number tagged only by an enclosing
    derivative (stored by the outer one of a nesting) is as constant here: it raises too.  The
    key may hold ``x`` inside a tuple (``d[(x, "a")]``), a named tuple, a frozenset or an object
    hashed by value (a frozen dataclass): see :func:`key_holds`."""
    if carries(value) or has_metadata(value, ctx):
        return value  # (differentiated here: tagged by ctx, under an inner derivative's tag too)
    plain = _innermost(value)
    if isinstance(plain, (float, complex, np.inexact)) or (
            isinstance(plain, np.ndarray) and plain.dtype.kind in "fc"):
        raise _rules.MissingRuleError(
            f"a dict item looked up by a differentiated key holds a plain number, stored "
            f"before this {mode}-mode derivative began (a cache of earlier results?) or under "
            f"a key that was not differentiated, which has no derivative with respect to the "
            f"key; compute it under the derivative from the key, or key the dict by something "
            f"else")
    return value


def plain_key(key: Any) -> Any:
    """``key`` as a dict hashes it: without any context's tags (in a tuple key too)."""
    if type(key) is Tagged:
        return _innermost(key)
    if type(key) is tuple:
        return tuple(plain_key(k) for k in key)
    if type(key) is frozenset:
        return frozenset(plain_key(k) for k in key)
    return key


_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement (the user's)


def key_holds(ctx: Any, key: Any, direct: Callable[[Any], bool],
              seen: set[int] | None = None) -> bool:
    """Whether the dict key (set element, cache argument) ``key`` holds a value ``ctx``
    differentiates -- ``direct(v)`` for the value ``v`` itself -- in what its hash and equality
    read: a member of a tuple (a named tuple too) or a frozenset, or an attribute of an object
    of the user's class hashed by value (a frozen dataclass; a class with its own
    ``__hash__``), stored into it and kept aside by the core or held as it is, at any depth.
    Such a key hashes as its plain value does: an item found under it may be a memo of earlier
    results (see :func:`by_differentiated_key`).  Objects hashed by identity are not looked
    into (an equal key is the same object).  Reads no attribute through the user's code."""
    if direct(key):
        return True
    kind = type(key)
    if kind in _INERT_VALUES or kind is Tagged:
        return False
    if issubclass(kind, (tuple, frozenset)):  # (not isinstance: it reads __class__)
        members: Any = key
        if issubclass(kind, tuple) and not any(map(direct, key)) and any(
                issubclass(type(m), _REVEALABLE) for m in key) and keeps_heap_metadata(ctx, key):
            return True  # a tuple stored into the heap (an attribute): its members kept aside
    elif kind.__flags__ & _HEAP_TYPE and getattr(kind, "__hash__", None) not in (
            None, object.__hash__):  # (hashed by value: its own __hash__, a frozen dataclass)
        if keeps_heap_metadata(ctx, key):
            return True
        members = _callbacks.held_by(key, kind)
    else:
        return False
    if seen is None:
        seen = set()
    elif id(key) in seen:
        return False
    seen.add(id(key))
    return any(key_holds(ctx, m, direct, seen) for m in members)


# The builtins some of whose calls are stepped (the cheap test before stepped_builtin's)
STEPPED = frozenset(map(id, (sum, max, min, collections._count_elements)))  # type: ignore[attr-defined]


def cell_values(fn: types.FunctionType) -> list[Any]:
    """The values in ``fn``'s closure cells (an empty one, a name not assigned yet, has none)."""
    values = []
    for cell in fn.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:
            continue
    return values


def partials_tables(route: str) -> tuple[dict[int, Any], dict[int, Any], dict[int, Any]]:
    """The tables of the routes that give float arithmetic its written-out partials (declared
    beside the shipped rules: ``_rules.defscalar``): ``id(fn) -> partials`` of one argument,
    of two, and both, filled while ``route`` is enabled with the functions whose rules are
    still the shipped ones (a rule the user registers wins), rebuilt on every change."""
    one: dict[int, Any] = {}
    two: dict[int, Any] = {}
    both: dict[int, Any] = {}

    @_rules.on_change
    def rebuild() -> None:
        on = _routes.enabled(route)
        for table, arity in ((one, 1), (two, 2)):
            table.clear()
            if on:
                table.update(_rules.scalar_partials(arity))
        both.clear()
        both.update({**one, **two})

    return one, two, both


def stepped_builtin(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether ``fn(*args, **kwargs)`` is a builtin call a context computes in steps through
    itself (:func:`run_stepped`): ``sum`` of lists or tuples (``sum(rows, [])``), whose rule is
    addition's, of numbers and arrays, and of numbers whose class adds in Python;
    ``max``/``min`` with a ``default``, which no rule takes (the default is never compared,
    nor differentiated); ``Counter(items)``'s counting, which stores the items as keys
    (differentiated keys: see ``d[x] = v``)."""
    if fn is collections._count_elements:  # type: ignore[attr-defined]
        return len(args) == 2 and not kwargs
    if fn is sum:
        if len(args) + len(kwargs) == 2 and \
                type(args[1] if len(args) == 2 else kwargs.get("start")) in (list, tuple):
            return True
        return bool(args) and type(args[0]) in (list, tuple) and _adds_itself(args[0])
    return (fn is max or fn is min) and len(args) == 1 and "default" in kwargs


def _adds_itself(items: Any) -> bool:
    """Whether ``items`` holds a number of a ``float``/``complex`` subclass whose class adds in
    Python (its own ``__add__`` or ``__radd__``): Python's ``sum`` calls it, which the rule
    of ``sum`` (float addition) would not."""
    for item in items:
        kind = type(item)
        if kind is float or kind is int:
            continue
        item = _innermost(item)
        kind = type(item)
        if kind.__flags__ & _HEAPTYPE and isinstance(item, (float, complex)) and any(
                type(getattr(kind, name, None)) is types.FunctionType
                for name in ("__add__", "__radd__")):
            return True
    return False


def run_stepped(ctx: Any, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A :func:`stepped_builtin` call, each step through ``ctx``: ``sum(rows, [])`` as Python's
    sum computes it, ``start + rows[0] + rows[1] + ...``; ``max(xs, default=x)`` the default as
    it is where ``xs`` is empty, else ``max(xs)``; ``_count_elements(counter, items)`` as its
    Python version in ``collections`` counts."""
    if fn is collections._count_elements:  # type: ignore[attr-defined]
        counter, items = args
        for item in ctx.overdub(iter, items):
            count = ctx.overdub(counter.get, item, 0)
            ctx.overdub(operator.setitem, counter, item, ctx.overdub(operator.add, count, 1))
        return None
    if fn is sum:
        out = args[1] if len(args) == 2 else kwargs.get("start", 0)
        for item in ctx.overdub(list, args[0]):
            out = ctx.overdub(operator.add, out, item)
        return out
    items = ctx.overdub(list, args[0])
    if not items:
        return kwargs["default"]
    return ctx.overdub(fn, items, **{k: v for k, v in kwargs.items() if k != "default"})


def made_here(written: set[tuple[int, Any]], d: Any, key: Any) -> bool:
    """Whether the item ``d[key]`` (``key`` differentiated) was written during this derivative
    (``written``: the ``(id(dict), plain key)`` of its stores under differentiated keys), or is
    made by the read itself (a ``defaultdict``'s default, ``setdefault``'s: noted as written):
    an accumulator, read as usual, not a cache of earlier results (see
    :func:`by_differentiated_key`); or whose stored key is the very value read with, or is
    itself a tagged value -- which a dict holds only while the derivative that tagged it runs
    (``{x: 1.0}``, a display, or ``dict.fromkeys``: stored by C code; an inner derivative's
    store, which this one did not see) -- holding a constant (a value another level tagged is
    that level's, a cache to this one: it still raises, as a memo of an earlier derivative,
    whose keys are plain again, does)."""
    k = plain_key(key)
    try:
        if k not in d:
            written.add((id(d), k))
            return True
    except TypeError:  # (unhashable: the read raises it)
        return False
    if (id(d), k) in written:
        return True
    for stored in dict.keys(d):
        if stored is key:
            return True
        if type(stored) is Tagged and _innermost(stored) == k:
            return type(dict.__getitem__(d, stored)) is not Tagged
    return False


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


def python_attribute(plain: Any, name: str) -> Any:
    """For a number or an array of a subclass defined in Python (``class Meters(float)``, an
    ``ndarray`` subclass): what its class defines for ``name`` in Python -- a function, a
    method the value must be bound to, or a property, whose getter must be given the value --
    or None.  Bound to the plain value, as ``getattr`` would, its body would compute without
    the derivative: the modes bind the differentiated value itself."""
    kind = type(plain)
    if not kind.__flags__ & _HEAPTYPE or not issubclass(kind, _SUBCLASSED):
        return None  # (another namespace's array, a Python class itself: its own methods)
    for klass in kind.__mro__:
        found = klass.__dict__.get(name, MISSING)
        if found is not MISSING:
            break
    else:
        return None
    if type(found) is property and type(found.fget) is types.FunctionType:
        return found
    if name in getattr(plain, "__dict__", ()):
        return None  # (the instance's own: a method shadowed, a cached property computed)
    if type(found) is types.FunctionType:
        return found
    if type(found) is functools.cached_property and type(found.func) is types.FunctionType:
        return property(found.func)  # (computed each time: its cache would keep it plain)
    return None


_SUBCLASSED = (float, complex, np.ndarray, np.generic)


def _method_of(kind: type, name: str) -> Any:
    """The C method descriptor ``name`` of ``kind`` (``np.ndarray.reshape``), or None."""
    for klass in kind.__mro__:
        found = klass.__dict__.get(name)
        if found is not None:
            return found if isinstance(found, _C_METHODS) else None
    return None


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


def namespace_of(container: Any, key: Any = None) -> dict[str, Any] | None:
    """The globals dict that ``container[key] = v`` or ``container.key = v`` (``key`` a
    name) stores into -- ``globals()[name] = v``, a dict ``exec`` ran in, ``mod.name = v`` on a
    plain module -- or None for any other store.  The core keeps the metadata of a value stored
    into a dict or an object aside and stores the plain value, which its own reads re-tag; but
    a global variable is read natively (``LOAD_GLOBAL`` in the module's functions): there the
    derivative would be silently lost.  So both modes store differentiated values into a
    namespace as they are, as an assignment to a ``global`` does, and give plain values back
    when their run ends (an enclosing derivative keeps its own tag the same way)."""
    if type(container) is dict:
        return container if "__builtins__" in container else None  # (what Python adds to
        # the globals of any code it runs)
    if type(container) is types.ModuleType and type(key) is str and \
            not hasattr(type(getattr(types.ModuleType, key, None)), "__set__"):
        return vars(container)  # (not __dict__ nor __class__: the module type's own)
    return None


def _untag_tree(x: Any, ctx: Context) -> Any:
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




# -- the API -----------------------------------------------------------------------------------

# overdub_ad's own code: its frames leave the traceback of an error as it leaves a public entry
# point, as the core's leave it as it leaves a run (OVERDUB_TRACEBACK_FILTERING=off keeps them)
_OWN_CODE = (os.path.dirname(os.path.abspath(__file__)) + os.sep,)


def _entry(fn: _F) -> _F:
    """``fn``, a public entry point (``grad(f)``'s gradient), hiding overdub_ad's frames from
    the traceback of an error it raises: the user reads their own lines, not the engine's."""
    @functools.wraps(fn)
    def entry(*args: Any, **kwargs: Any) -> Any:
        made, token = _rules.running_derivative()
        try:
            out = fn(*args, **kwargs)
        except BaseException as exc:
            hide_machinery(exc, _OWN_CODE)
            raise
        finally:
            _rules._RUNNING.reset(token)
        if made:  # (a MissingRuleError the program caught: see caught_missing)
            raise _rules.caught_missing(made)
        return out
    return entry  # type: ignore[return-value]


def _forward_entry(fn: _F) -> _F:
    """:func:`_entry` for forward mode's nestable entry points (``jvp``, ``derivative``): a
    code of their own, since the specialised forward mode marks nestable ones by their code."""
    @functools.wraps(fn)
    def forward_entry(*args: Any, **kwargs: Any) -> Any:
        made, token = _rules.running_derivative()
        try:
            out = fn(*args, **kwargs)
        except BaseException as exc:
            hide_machinery(exc, _OWN_CODE)
            raise
        finally:
            _rules._RUNNING.reset(token)
        if made:  # (a MissingRuleError the program caught: see caught_missing)
            raise _rules.caught_missing(made)
        return out
    return forward_entry  # type: ignore[return-value]


_NONE_IS_A_VALUE = frozenset(("prepend", "append"))


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
        elif p.default is np._NoValue:  # NumPy's "not given" is "given as None" by position
            new_args.append(p.default if p.name in _NONE_IS_A_VALUE else None)  # (np.clip's
            # a_min), but for the parameters where None is a value (np.diff prepends it)
        elif p.default is not p.empty:
            new_args.append(p.default)
        else:
            return args, kwargs
    return tuple(new_args), new_kwargs


def _holds_stored(ctx: Any, x: Any) -> bool:
    """Whether ``x``, an object or container that code without source would read natively,
    holds values ``ctx`` differentiates: stored into it and kept aside by the core (its
    shadow, see ``keeps_heap_metadata``), or as they are (tagged, in its ``__dict__``)."""
    if type(x) in _INERT_VALUES or type(x) is Tagged:
        return False
    if keeps_heap_metadata(ctx, x):
        return True
    try:
        own = object.__getattribute__(x, "__dict__")
    except AttributeError:
        return False
    return type(own) is dict and any(type(v) is Tagged for v in own.values())


# values that hold nothing stored (what _holds_stored need not look into)
_INERT_VALUES = frozenset((float, int, complex, bool, str, bytes, type(None), np.float64, type,
                           types.FunctionType, types.ModuleType))


def _sourceless(fn: Any) -> bool:
    """A Python function the core would run natively for want of source (``exec``, the classic
    prompt): its arithmetic on tagged values would silently drop their derivatives, so it is a
    primitive without a rule.  Opaque functions and overdub's own API mean to receive tagged
    values and are left alone."""
    if _callbacks.compiled_method(fn):
        return True  # (C code: a rule, or MissingRuleError)
    target = fn.__func__ if type(fn) is types.MethodType else fn
    if type(target) is not types.FunctionType or is_opaque(target):
        return False
    return (getattr(target, "__module__", None) or "").partition(".")[0] not in _OVERDUB_PACKAGES


_ALIASES: dict[Any, Any] = {}


def _public(fn: Any) -> Any:
    """The public NumPy function with a rule for the C function NumPy's own Python code calls
    directly (``_multiarray_umath.concatenate`` for ``np.concatenate``); ``fn`` otherwise."""
    if not _ALIASES:
        for f in _rules.registered():
            impl = getattr(f, "_implementation", None)
            if impl is not None and type(impl) is not types.FunctionType and callable(impl):
                _ALIASES[id(impl)] = (impl, f)
        _ALIASES[0] = (None, None)  # built
    found = _ALIASES.get(id(fn))
    return found[1] if found is not None and found[0] is fn else fn


def _implementation(fn: Any) -> Any:
    """The Python implementation behind a NumPy function without a rule (``np.polyval``,
    ``np.cov``, ``np.trapezoid``...): differentiated through its own code.  None otherwise."""
    impl = getattr(fn, "_implementation", None)
    if type(impl) is not types.FunctionType or type(fn) is types.FunctionType:
        return None
    if _rules.vjp_rules(fn) is not None or _rules.is_nondifferentiable(fn):
        return None
    return impl


def check_argnums(api: str, argnums: Any) -> int | tuple[int, ...]:
    """``argnums`` checked where the API is given it, as JAX's rule: an int, or a non-empty
    sequence (a tuple, a list) of distinct ints, which is returned as a tuple (a sequence
    selects several arguments: the results come as a tuple).  Whether they are in range is
    known at the call (:func:`_normalize_argnums`)."""
    if type(argnums) is int:  # the common case, at once: grad(f) is often made per call
        return argnums
    nums = tuple(argnums) if isinstance(argnums, (tuple, list)) else (argnums,)
    if not all(isinstance(num, int) and not isinstance(num, bool) for num in nums):
        raise TypeError(f"{api}: argnums must be an int or a sequence of ints, got "
                        f"{argnums!r}")
    if not nums:
        raise ValueError(f"{api}: argnums={argnums!r} selects no argument to differentiate")
    if len(set(nums)) != len(nums):
        raise ValueError(f"{api}: argnums {argnums!r} repeats an argument")
    return nums if isinstance(argnums, (tuple, list)) else argnums


def _normalize_argnums(argnums: Any, n: int, api: str) -> tuple[int, ...]:
    """The positions ``argnums`` (checked by :func:`check_argnums`) select among ``n``
    positional arguments, each in ``range(n)``; ``api`` names the function the user called in
    the errors."""
    if type(argnums) is int and 0 <= argnums < n:  # the common case
        return (argnums,)
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    for num in nums:
        if not -n <= num < n:
            if n == 0:
                raise ValueError(f"{api}: the function was called with no positional "
                                 f"arguments, so argnums={argnums!r} selects none to "
                                 f"differentiate (keyword arguments are not differentiated)")
            raise ValueError(f"{api}: argnums {argnums!r} is out of range for {n} positional "
                             f"argument{'s' if n != 1 else ''}")
    normalized = tuple(num % n for num in nums)
    if len(set(normalized)) != len(normalized):  # (0, -2) with two arguments
        twice = next(num for num in normalized if normalized.count(num) > 1)
        raise ValueError(f"{api}: argnums {argnums!r} names argument {twice} twice")
    return normalized


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


def summed_through(run: Any, array: np.ndarray, start: Any = 0) -> Any:
    """``sum(array, start)`` as the builtin adds (one item after the other: for an array's
    items, NumPy scalars or rows, the builtin takes no faster path), each item read and added
    through ``run``: an enclosing derivative keeps the tangents of an array written in place
    in its own record of the memory, which reading the items natively would skip (the
    primal's tangent of ``sum(a)`` after ``a[0] = t`` was lost: second derivatives 0).  Both
    modes compute the builtin's primal so where an argument is an array."""
    total = start
    for i in range(len(array)):
        total = run(operator.add, total, run(operator.getitem, array, i))
    return total
