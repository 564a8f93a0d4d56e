"""Forward mode, specialised: scalar Python run as its dual, tangents in local variables.

The general forward mode (:mod:`._context`) tags values and dispatches every operation through
its context: right for anything, but each ``a * b`` costs a context call.  For code that
computes with Python floats, :func:`jvp` here runs the function's *dual* instead -- the function
rewritten by the pass of :mod:`._pass`, given to a context of its own
(:class:`_Specialising`): every local variable carries a tangent variable, float arithmetic is
expanded in place, and the dual returns ``(value, tangent)``.  This module holds the route's
entry (:func:`jvp`) and the calls the dual code makes; the numbers it computes with (levels,
boxed duals) are :mod:`._dual_numbers`', the helpers its inline guards fall back on
(operators, items, attributes, iteration) :mod:`._dual_helpers`'.

- Calls apply the same rule tables as the general mode (``math``, ``cmath``, operators,
  builtins, NumPy on numbers) and call the duals of Python functions (a per-site cache lets a
  call site skip the helper while it sees the same function, named tuple class, C function of
  a float, or class of object it reads an attribute of: see ``_pass_common``); the helpers
  iterate, index and compare tuples, ranges, lists and strings.
- What the dual code does not handle -- arrays, lists or dicts receiving differentiated
  values, attribute or item writes, ``try``/``with``, generators, comprehensions, C functions
  without a rule, objects of user classes -- makes it stop with :class:`_Deopt`, *before*
  doing anything with an effect: up to that point it has only computed with numbers and
  tuples, read variables and called functions of the same kind.  The outermost specialised
  ``jvp`` then lets the general mode run from the start, so the result is the general mode's.
  A function that stopped once is not tried again (per code object).
- Nested derivatives: a value with a tangent that leaves the locals of its function -- into a
  closure cell, a default, the argument of a nested ``jvp`` -- is boxed as a :class:`_Dual` of
  its ``jvp`` (its *level*); code of another level computes with it as with a number (dual
  arithmetic, the newer level outside), which keeps nested derivatives free of perturbation
  confusion.  A nested ``jvp`` runs inside the same specialised run, or stops it.

The specialised path runs only when no other context is running (an enclosing context must see
the arithmetic as calls, which the general mode gives it): :func:`overdub.current_context` tells.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import threading
import types
import weakref
from typing import Any, NoReturn

import numpy as np

from overdub import (Context, Tagged, TagError, can_recurse, current_context, opaque, recurse,
                     tag)

from .. import _routes, _rules
from .._custom import as_called
from .._pytree import flatten, is_node, unflatten
from .._shared import _INPLACE, given_out, STEPPED, stepped_builtin
from . import _dual_objects
from ._dual_objects import _RUN
from ._dual_helpers import (_binop, _boxed, _compare, _CONTAINERS, _deopt, _getattr, _getitem,
                            _inert_values, _MODULE, _pairs, _plain_elements, _plain_key,
                            _PURE_OPERANDS, _SAFE, _safe_tree, _truth, _TRUTHFUL, _unboxed,
                            _unop)
from ._dual_numbers import (_array_operand, _AS_THEY_ARE, _at, _box, _Deopt, _Dual,
                            _in_precision, _Level, _named, _one_batch,
                            _numberlike, _plain, _PLAIN_NUMBERS, _sum, _top, _unbox,
                            _WRITTEN_OUT, _zero)
from ._pass import _PASS
from ._pass_common import (_DUALS, _empty_sites, _FILLED, _METHODS, _NATIVE_SITES, _SITES,
                           _UNARY, _UNARY_RULE, HELPERS)
from ._tangents import _exactly_zero


# -- calls the specialised code makes (values and tangents as in _dual_helpers) ---------------

# Functions whose result does not depend on their arguments' tangents and that ignore them
# (given values of _SAFE types, or any: the first group).
_ANY_ARGUMENTS = {id(f): f for f in (type, isinstance, issubclass, id, callable)}
_INDIFFERENT = {**_ANY_ARGUMENTS, **{id(f): f for f in (
    len, hash, repr, str, format, bool, ascii, chr, ord, int, round, math.floor, math.ceil,
    math.trunc)}}
# C functions without effects that may run on values without tangents.
_PURE_CALLS = {id(f): f for f in (range, tuple, list, dict, set, frozenset, min, max, sum, abs,
                                  pow, divmod, float, complex, enumerate, zip, reversed, sorted,
                                  all, any, slice, bin, hex, oct,
                                  # new arrays of constants (np.ones(3): a state's start)
                                  np.zeros, np.ones, np.empty, np.full, np.eye, np.identity,
                                  np.arange, np.linspace)}
_PURE_MODULES = frozenset(("math", "cmath", "builtins", "_operator", "operator"))


@opaque
def _call(level: _Level, site: int | None, f: Any, args: tuple[Any, ...],
          dargs: tuple[Any, ...], kwargs: dict[str, Any] | None,
          dkwargs: dict[str, Any] | None) -> tuple[Any, Any]:
    """``f(*args, **kwargs)`` and its tangent, for a call the specialised code cannot make
    directly (``site``'s cache missed)."""
    kind = type(f)
    if kind is types.MethodWrapperType or kind is types.MethodType or (
            kind is types.FunctionType and f.__name__ == "__call__"):
        called = as_called(f, args)  # np.sin.__call__(x), custom.__call__(x): that call
        if called is not None:
            shift = len(called[1]) - len(args)
            return _call(level, None, called[0], called[1],
                         (0.0, *dargs) if shift > 0 else dargs[-shift:], kwargs, dkwargs)
    if kind is types.FunctionType:
        code = f.__code__
        if code.co_argcount and code.co_varnames[0] == "@T":  # a dual already
            return _call_python(level, site, f, code.co_argcount - 1, True, args, dargs,
                                kwargs, dkwargs)
        if code is _CONTEXTMANAGER:  # a @contextlib.contextmanager function: its generator
            return _dual_objects.managed(level, _wrapped_generator(f), args, dargs, kwargs,
                                         dkwargs)
        info = _code_info(f)
        if info.api:  # (jvp, derivative: marked on their code, shared by their wrappers)
            return _call_api(level, f, args, dargs, kwargs, dkwargs)
        if info.arity is not None and not _own_rules(f):
            return _call_python(level, site, f, info.arity, False, args, dargs, kwargs,
                                dkwargs)
    elif kind is types.MethodType:
        return _call_method(level, site, f, args, dargs, kwargs, dkwargs)
    elif kind is functools.partial:
        return _call_partial(level, f, args, dargs, kwargs, dkwargs)
    elif f is functools.partial:
        return _partial(level, args, dargs, kwargs, dkwargs)
    for a in args:
        if type(a) is Tagged:
            raise _Deopt("a value of another context")
    if kind is np.ufunc and len(args) > f.nin:
        raise _Deopt("a ufunc given its out= positionally")  # (written: the general mode's)
    if (kwargs and kwargs.get("out") is not None) or given_out(f, args):
        # np.add(x, 1.0, out=w), np.cumsum(x, 0, None, w): a write into an array (a constant
        # one too, or a view of a parameter: its items would keep no tangent here)
        raise _Deopt(f"{getattr(f, '__name__', f)} given out=, which writes into an array")
    special = _dual_objects.special(level, site, f, args, dargs, kwargs, dkwargs)
    if special is not None:
        return special
    if kwargs and dkwargs and not all(_zero(t) for t in dkwargs.values()):
        raise _Deopt  # a differentiated keyword: the general mode binds it
    if not _inert(args, kwargs, f):
        # C code given a value of a Python class, or a function (sorted(xs, key=k)), would
        # run Python code -- with its effects -- which the general mode, after a later stop,
        # would run again
        raise _Deopt(f"{getattr(f, '__name__', f)} given a value whose class runs Python code")
    if _rules.is_nondifferentiable(f) or _INDIFFERENT.get(id(f)) is f:
        plain = tuple(_plain_tree(a) for a in args)
        if _ANY_ARGUMENTS.get(id(f)) is not f and not all(
                type(a) in _SAFE or (f is len and (type(a) in _CONTAINERS
                                                       or type(a) is np.ndarray))
                for a in plain):
            raise _Deopt(f"{getattr(f, '__name__', f)} of a value whose class decides it")
        return _result(f(*plain, **(kwargs or {})))
    if id(f) in STEPPED and stepped_builtin(f, args, kwargs or {}):
        raise _Deopt("sum of lists or tuples, max/min with a default, Counter(items) "
                     "(_shared.run_stepped)")
    rules = _rules.jvp_rules(f)
    if rules is not None and _pure_callable(f):
        if kwargs and any(_dual_function(v) for v in kwargs.values()) or \
                any(_dual_function(a) for a in args):
            raise _Deopt  # min(xs, key=lambda v: ...): a dual, which C code cannot call
        if kwargs and any(_holds_dual(v) for v in kwargs.values()):
            # (logsumexp(a, b=[x, 1.0]): a display's boxed items, which a rule cannot read)
            raise _Deopt("a differentiated value inside a keyword argument's container")
        out = _call_rules(level, f, rules, args, dargs, kwargs or {})
        if site is not None and len(args) == 1 and not kwargs and _unary(f, rules, args[0],
                                                                          dargs[0], out[0]):
            _UNARY[site], _UNARY_RULE[site] = f, rules[0]  # (see _apply_unary)
            _FILLED.append(site)
        return out
    pure: Any = _PURE_CALLS.get(id(f))
    if pure is f and all(map(_zero, dargs)) and not any(callable(a) for a in args):
        return _result(pure(*args, **(kwargs or {})))
    raise _Deopt(f"a call of {getattr(f, '__qualname__', None) or type(f).__name__}, which "
                 f"has no dual or rule the route applies")


# the code of the functions contextlib.contextmanager makes (``helper(*args, **kwds)``)
_CONTEXTMANAGER = contextlib.contextmanager(lambda: iter(())).__code__


def _wrapped_generator(f: types.FunctionType) -> Any:
    """The generator function a ``contextlib.contextmanager`` function ``f`` calls."""
    return f.__closure__[f.__code__.co_freevars.index("func")].cell_contents \
        if f.__closure__ else None


def _unary(f: Any, rules: tuple[Any, ...], x: Any, dx: Any, out: Any) -> bool:
    """Whether the call ``f(x)``, a C function of a float with a float tangent that gave a
    float, is what :func:`_apply_unary` computes for floats at its site: its rule for ``x`` is
    a function of ``(dx, out, x)`` (not a zero, linear or tie-carrying mark)."""
    rule = rules[0] if rules else None
    return (type(x) is float and type(dx) is float and type(out) is float
            and type(f) is not types.FunctionType and rule is not None
            and rule is not _rules.ZERO and rule is not _rules.LINEAR
            and type(rule) is not _rules.Carried)


@opaque
def _apply_unary(f: Any, rule: Any, x: float, dx: float) -> tuple[Any, Any]:
    """``f(x)`` and its tangent by ``f``'s rule, as :func:`_call_rules` computes them for a
    float ``x`` with a float tangent ``dx`` (its site calls it directly, with the rule it
    recorded: see :func:`_unary`)."""
    out = f(x)
    if dx == 0.0:  # a constant's tangent: its term is 0, whatever the rule (see _call_rules)
        return out, 0.0
    return out, rule(dx, out, x)


@opaque
def _apply(f: Any, tangents: tuple[Any, ...], *args: Any) -> tuple[Any, Any]:
    """``f(tangents, *args)``: a dual defined in the dual code, called as it is by a site of
    a rewritten function (whose own calls the specialising context would dispatch)."""
    return f(tangents, *args)  # type: ignore[no-any-return]


def _holds_dual(v: Any) -> bool:
    """Whether the list or tuple ``v`` holds a boxed dual, at any depth."""
    return (type(v) is list or type(v) is tuple) and any(
        type(e) is _Dual or _holds_dual(e) for e in v)


def _inert(args: tuple[Any, ...], kwargs: dict[str, Any] | None, f: Any) -> bool:
    """Whether a C function's arguments run no Python code in it: numbers, strings, boxed
    duals and containers of them, this run's containers (their items are boxed values or
    plain numbers), arrays; ``type`` and the like look at any value but call nothing (a class
    made by ``type(name, bases, ns)`` runs ``__init_subclass__``)."""
    if _ANY_ARGUMENTS.get(id(f)) is f:  # (not given the route's own objects: a generator
        return (f is not type or len(args) == 1) and not any(  # whose class is its own)
            type(a) in _dual_objects.INTERNAL for a in args)
    values = args if not kwargs else (*args, *kwargs.values())
    return all(_safe_tree(v) or type(v) is np.ndarray for v in values)


def _call_method(level: _Level, site: int | None, f: types.MethodType, args: tuple[Any, ...],
                 dargs: tuple[Any, ...], kwargs: dict[str, Any] | None,
                 dkwargs: dict[str, Any] | None) -> tuple[Any, Any]:
    """A bound method of a Python function: the dual of the function with the object first
    (the site remembers the function, and calls it so directly next time)."""
    func = f.__func__
    if type(func) is not types.FunctionType:
        raise _Deopt("a method of a function that is not a Python function")
    info = _code_info(func)
    if info.arity is None or _own_rules(func) or info.api:
        raise _Deopt(f"{func.__qualname__}: a method without a dual")
    if site is not None and not kwargs and len(args) + 1 == info.arity \
            and _NATIVE_SITES[site] is False and not func.__code__.co_flags & _GENERATOR:
        _METHODS[site] = func
        _FILLED.append(site)
    return _call_python(level, None, func, info.arity, False, (f.__self__, *args),
                        (0.0, *dargs), kwargs, dkwargs)


def _partial(level: _Level, args: tuple[Any, ...], dargs: tuple[Any, ...],
             kwargs: dict[str, Any] | None, dkwargs: dict[str, Any] | None) -> tuple[Any, Any]:
    """``functools.partial(func, *args, **kwargs)`` of a Python function, a method or a
    partial: the partial object holds the arguments boxed, as a container holds its items
    (read back unboxed by :func:`_call_partial`)."""
    if not args or type(args[0]) not in _PARTIAL_FUNCS or not _zero(dargs[0]):
        raise _Deopt("functools.partial of something other than a Python function")
    bound = [a if d is None or _zero(d) else _box(level, a, d)
             for a, d in zip(args[1:], dargs[1:])]
    keywords = {k: v if (d := (dkwargs or {}).get(k)) is None or _zero(d)
                else _box(level, v, d) for k, v in (kwargs or {}).items()}
    return functools.partial(args[0], *bound, **keywords), 0.0


_PARTIAL_FUNCS = frozenset((types.FunctionType, types.MethodType, functools.partial))


def _call_partial(level: _Level, f: functools.partial[Any], args: tuple[Any, ...],
                  dargs: tuple[Any, ...], kwargs: dict[str, Any] | None,
                  dkwargs: dict[str, Any] | None) -> tuple[Any, Any]:
    """A call of a ``functools.partial`` object whose function is Python's: that function's
    call, with the stored arguments first and the stored keywords under the given ones, each
    with its tangent (a partial made before the run holds plain values, tangent 0)."""
    if type(f.func) not in _PARTIAL_FUNCS:
        raise _Deopt("a functools.partial of a function that is not a Python function")
    stored = [_unbox(level, a) for a in f.args]
    keywords = {k: _unbox(level, v) for k, v in f.keywords.items()}
    if kwargs:
        for k in kwargs:
            keywords.pop(k, None)
    return _call(level, None, f.func, (*(v for v, _ in stored), *args),
                 (*(t for _, t in stored), *dargs),
                 {**{k: v for k, (v, _) in keywords.items()}, **(kwargs or {})} or None,
                 {**{k: t for k, (_, t) in keywords.items()}, **(dkwargs or {})} or None)


def _call_function(level: _Level, f: Any, args: tuple[Any, ...], dargs: tuple[Any, ...],
                   kwargs: dict[str, Any] | None, dkwargs: dict[str, Any] | None
                   ) -> tuple[Any, Any]:
    """The dual of the Python function ``f`` (an ``__init__``, a property's getter...)."""
    info = _code_info(f)
    if info.arity is None or _own_rules(f) or info.api:
        raise _Deopt(f"{f.__qualname__}: a function without a dual")
    return _call_python(level, None, f, info.arity, False, args, dargs, kwargs, dkwargs)


_dual_objects.CALL.append(_call_function)


def _plain_tree(x: Any) -> Any:
    if type(x) is tuple:
        return tuple(_plain_tree(e) for e in x)
    return _plain(x)


def _result(out: Any) -> tuple[Any, Any]:
    if type(out) is Tagged:
        raise _Deopt
    return out, 0.0


def _pure_callable(f: Any) -> bool:
    """A function with rules the specialised code may call: C functions of ``math``,
    ``cmath``, ``operator`` and builtins, NumPy's ufuncs and functions on numbers, and Python
    functions the user gave rules (their rules are what runs)."""
    if isinstance(f, (types.FunctionType, np.ufunc)):
        return True
    module = getattr(f, "__module__", None) or ""
    return module in _PURE_MODULES or module.startswith("numpy")


def _call_rules(level: _Level, f: Any, rules: tuple[Any, ...], args: tuple[Any, ...],
                dargs: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """A function with rules, on numbers (and NumPy float arrays with one direction, or a
    batch of them where the function broadcasts it): its value and the sum of its rules'
    contributions (what the general mode computes)."""
    carried = []
    arrays = False
    for i, (a, d) in enumerate(zip(args, dargs)):
        if _numberlike(a) or type(a) is tuple:
            if type(d) is tuple and _batched(d):
                if f not in _CONSTRUCTORS and (_nested(d) or _numpy_callable(f)):
                    raise _Deopt  # NumPy reads the tuple as an array: the general mode's
                dargs = dargs[:i] + (_container_tangent(d),) + dargs[i + 1:]
            if d is not None:
                carried.append(i)
        elif type(a) is np.ndarray and _array_operand(a, d) and "out" not in kwargs \
                and id(f) not in _INPLACE and type(getattr(f, "__self__", None)) \
                is not np.ndarray:
            arrays = True
            if type(d) is np.ndarray:  # (an array of floats and its direction:
                carried.append(i)  # np.sum(state); a 0.0 is no tangent, as a constant's)
        elif not ((type(a) in _PURE_OPERANDS or type(a) is _MODULE)
                  and (d is None or _zero(d))):
            raise _Deopt  # arrays of other kinds, batches, objects: the general mode's
    if arrays and not _one_batch(zip(args, dargs), elementwise=(
            isinstance(f, np.ufunc) and not kwargs) or (f is sum and _rules.is_shipped(sum))):
        # (a batch of directions only through what broadcasts them as it broadcasts the
        # values: a ufunc; an axis= would have to count them, as the shipped rule of Python's
        # sum of an array does: it adds the tangent's items along the array's first axis,
        # counted from the end, behind the batch)
        raise _Deopt("arrays whose tangents are batches the function does not broadcast")
    if type(f) is types.FunctionType and not _rules.is_shipped(f):
        followed = _rules.output_followed(f)
        if not followed:  # (its output decides, and it must not run twice: see _rules)
            name = getattr(f, "__name__", f)
            raise _Deopt(f"{name} returns a list, dict or object, which its rules give a "
                         f"tangent in the same structure") if followed is False else \
                _Unseen(f"{name}, a function with the user's rules, not yet run")
    out = _lifted(f, args, kwargs)
    if not carried:
        return _result(out)
    kind = type(out)
    if (kind is list or kind is dict or (kind is not tuple and is_node(out))) and \
            not _rules.is_shipped(f):  # a user's rules of a pytree output: the general mode
        raise _Deopt(f"{getattr(f, '__name__', f)} returned a {kind.__name__}, which its "
                     f"rules give a tangent in the same structure")
    tangent = None
    for i in carried:
        rule = rules[i] if i < len(rules) else None
        if rule is None:
            raise _Deopt  # the general mode raises MissingRuleError
        if rule is _rules.ZERO or (_exactly_zero(dargs[i]) and not arrays):
            continue  # (a constant's tangent, 0.0: its term is 0 even where the partial is
            # infinite, as the general mode gives a constant no rule: see _exactly_zero; with
            # an array, every term, as there: see _dual_helpers._array_binop)
        if rule is _rules.LINEAR:
            moved = list(args)
            moved[i] = dargs[i]
            part = _lifted(f, tuple(moved), kwargs)
        elif type(rule) is _rules.Carried:
            if _ambiguous_tie(args, dargs):
                raise _Deopt
            part = _lifted(rule.rule, (_rules.carried_pattern(dargs), dargs[i], out) + args,
                           kwargs)
        else:
            part = _lifted(rule, (dargs[i], out) + args, kwargs)
        tangent = _add(tangent, part)
    if tangent is None:
        return _result(out)
    if isinstance(out, tuple):  # several outputs (a named tuple's: slogdet's sign, logdet):
        tangent = tuple(0.0 if t is None else t for t in tangent)  # None, a zero tangent
    elif arrays:
        tangent = _in_precision(out, tangent)
    return out, tangent


# NumPy functions whose rules read a tuple argument's tangents as a container
_CONSTRUCTORS = frozenset((np.array, np.asarray, np.asanyarray))


def _batched(d: tuple[Any, ...]) -> bool:
    """Whether the tuple tangent ``d`` holds batched tangents (arrays of directions)."""
    return any(type(e) is np.ndarray or (type(e) is tuple and _batched(e)) for e in d)


def _nested(d: tuple[Any, ...]) -> bool:
    return any(type(e) is tuple for e in d)


def _numpy_callable(f: Any) -> bool:
    return isinstance(f, np.ufunc) or (getattr(f, "__module__", None) or "").startswith("numpy")


def _container_tangent(d: tuple[Any, ...]) -> tuple[Any, ...]:
    """A tuple argument's batched tangents as the rules read them: a number's 0.0 -- a
    constant's -- is None, a zero of whatever batch the others have; as a number it would set
    the batch of the whole tangent to none."""
    return tuple(None if (type(e) is float or type(e) is int) and e == 0 else e
                 for e in d)


def _add(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    if type(a) is tuple:
        return tuple(_add(x, y) for x, y in zip(a, b))
    return a + b


def _ambiguous_tie(args: tuple[Any, ...], dargs: tuple[Any, ...]) -> bool:
    """Whether ties decide a derivative that the specialised code cannot: a value whose tangent
    is zero may be a constant or a differentiated value (the general mode knows which), and it
    matters only where two candidates are equal."""
    if not any(d is not None and _zero(d) for d in dargs):
        return False
    values = [_plain(v) for a in args for v in (a if type(a) is tuple else (a,))
              if _numberlike(v)]
    return len(set(values)) < len(values)


def _lifted(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``fn(*args, **kwargs)`` where ``args`` may hold duals of other levels: the newest level
    is peeled off, ``fn`` runs on the values, and its tangent comes from the rules (or, for a
    Python function such as a rule, from its dual run at that level)."""
    level = _top(args)
    if level is None:
        return fn(*args, **kwargs)
    parts = [_at(a, level) for a in args]
    values = tuple(p for p, _ in parts)
    if type(fn) is types.FunctionType and not kwargs:
        dual = _is_dual(fn)
        if dual or _dual_arity(fn) is not None:
            out, t = _call_python(level, None, fn, fn.__code__.co_argcount - dual, dual, values,
                                  tuple(d for _, d in parts), None, None)
            return _box(level, out, t)
    rules = _rules.jvp_rules(fn)
    if rules is None:
        raise _Deopt
    out = _lifted(fn, values, kwargs)
    tangent = None
    for i, (_, d) in enumerate(parts):
        if d is None or _exactly_zero(d):
            continue
        rule = rules[i] if i < len(rules) else None
        if rule is None or rule is _rules.LINEAR or type(rule) is _rules.Carried:
            raise _Deopt
        if rule is not _rules.ZERO:
            tangent = _add(tangent, _lifted(rule, (d, out) + values, kwargs))
    return _box(level, out, tangent)


# -- calling Python functions ------------------------------------------------------------------

_GENERATOR = inspect.CO_GENERATOR
_CO_UNSUPPORTED = (inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
                   | inspect.CO_ITERABLE_COROUTINE | inspect.CO_VARARGS
                   | inspect.CO_VARKEYWORDS)


class _Code:
    """What is known of a code object: the number of positional parameters of its dual (None:
    it has none -- no source, a generator, ``*args``...), and where a specialised ``jvp``
    of it stopped, and why (then the general mode runs it directly: see :func:`_stop_key`)."""

    __slots__ = ("ref", "arity", "stopped", "api")

    def __init__(self, ref: weakref.ref[Any], arity: int | None, api: bool) -> None:
        self.ref, self.arity, self.api = ref, arity, api
        self.stopped: dict[tuple[Any, ...], str] = {}  # _stop_key -> why it stopped


_CODES: dict[int, _Code] = {}  # id(code) -> what is known of it, dropped with the code


def _code_info(f: types.FunctionType) -> _Code:
    code = f.__code__
    known = _CODES.get(id(code))
    if known is None or known.ref() is not code:
        arity = None
        if not (code.co_flags & _CO_UNSUPPORTED) and not code.co_kwonlyargcount \
                and can_recurse(_specialising(), f):
            arity = code.co_argcount
        key = id(code)

        def forget(_: Any, key: int = key) -> None:
            _CODES.pop(key, None)
        known = _CODES[key] = _Code(weakref.ref(code, forget), arity, _is_forward_api(f))
    return known


def _own_rules(f: types.FunctionType) -> bool:
    """Whether the function object ``f`` has rules or is opaque (then its body is not run).
    On every call of a Python function: the tables are read directly (an entry left by a dead
    function whose id ``f`` reuses only sends ``f`` to the general mode)."""
    key = id(f)
    return (key in _rules._TABLE or key in _rules._NONDIFFERENTIABLE or key in _rules._STANDINS
            or f.__dict__.get("__overdub_opaque__", False))


def _dual_arity(f: types.FunctionType) -> int | None:
    """The number of positional parameters of ``f``'s dual, or None where ``f`` has none (no
    source, opaque, a generator, ``*args``, keyword-only parameters, its own rules)."""
    arity = _code_info(f).arity
    if arity is None or _own_rules(f):
        return None
    return arity


_SHARED: dict[int, types.FunctionType] = {}  # id(code) -> a function of that code, no cells


def _shared(f: types.FunctionType) -> types.FunctionType:
    """A function equivalent to ``f`` whose dual the specialising context has made already.

    The core rewrites per function object; a lambda made afresh for each call
    (``derivative(lambda x: ..., x0)`` in a loop) would be rewritten each time.  A function
    without cells is its code, globals and defaults: an earlier one that shares them all runs
    the same (kept: one function per code object, like the core's own caches)."""
    if f.__closure__ is not None:
        return f
    code = f.__code__
    g = _SHARED.get(id(code))
    if g is not None and g.__code__ is code and g.__globals__ is f.__globals__ \
            and g.__defaults__ is f.__defaults__:
        return g  # (keyword-only defaults do not count: functions with a dual have none)
    _SHARED[id(code)] = f
    return f


def _dual_function(x: Any) -> bool:
    """Whether ``x`` is a function defined in specialised code (see :func:`_is_dual`)."""
    return type(x) is types.FunctionType and _is_dual(x)


def _is_dual(f: types.FunctionType) -> bool:
    """Whether ``f`` is a dual already: a function or lambda defined in specialised code
    (its code is the dual's), called as it is, never rewritten again."""
    code = f.__code__
    return code.co_argcount > 0 and code.co_varnames[0] == "@T"


def _call_python(level: _Level, site: int | None, f: types.FunctionType, count: int,
                 dual: bool, args: tuple[Any, ...], dargs: tuple[Any, ...],
                 kwargs: dict[str, Any] | None, dkwargs: dict[str, Any] | None
                 ) -> tuple[Any, Any]:
    """A Python function: its dual, with the tangents of its positional parameters (zeros
    for those left to their defaults).  ``dual``: ``f`` is a dual already (called as it is);
    otherwise the specialising context rewrites it."""
    if len(args) > count:
        raise _Deopt  # the general mode raises the TypeError with the user's signature
    tangents = [0.0 if d is None else d for d in dargs] + [0.0] * (count - len(args))
    if f.__code__.co_flags & _GENERATOR:  # its dual yields pairs: followed by the
        pairs = f((level, *tangents), *args, **(kwargs or {})) if dual else recurse(  # loops
            _specialising(), _shared(f), (level, *tangents), *args, **(kwargs or {}))
        return _dual_objects._Generator(level, pairs), 0.0  # (no site calls it directly)
    if kwargs:
        names = f.__code__.co_varnames[:count]
        for name, t in (dkwargs or {}).items():
            if name not in names or names.index(name) < len(args):
                raise _Deopt
            if t is not None:
                tangents[names.index(name)] = t
    elif site is not None and len(args) == count and _NATIVE_SITES[site] is dual:
        _SITES[site] = f  # the next call at this site goes straight to f's dual
        _FILLED.append(site)
    elif site is not None and len(args) == count and dual:
        _DUALS[site] = f  # (a rewritten function's site: called through _apply)
        _FILLED.append(site)
    result: tuple[Any, Any]
    if dual:
        result = f((level, *tangents), *args, **(kwargs or {}))
    else:
        result = recurse(_specialising(), _shared(f), (level, *tangents), *args,
                         **(kwargs or {}))
    return result


def nestable(fn: Any) -> Any:
    """Mark a forward-mode entry point (``jvp``, ``derivative``...) that the specialised code
    may call with its values boxed: inside it, a nested specialised ``jvp`` runs (or deopts)."""
    fn.__overdub_ad_forward__ = True
    return fn


def _is_forward_api(f: Any) -> bool:
    return getattr(f, "__overdub_ad_forward__", False) is True


def _call_api(level: _Level, f: Any, args: tuple[Any, ...], dargs: tuple[Any, ...],
              kwargs: dict[str, Any] | None, dkwargs: dict[str, Any] | None) -> tuple[Any, Any]:
    """A nested ``jvp``/``derivative``: its arguments carry this level's tangents as duals,
    its result is read back at this level (a nested level runs specialised too, or deopts)."""
    boxed = args
    for d in dargs:
        if d is not None:
            boxed = tuple(a if d is None else _box(level, a, d) for a, d in zip(args, dargs))
            break
    if dkwargs:
        kwargs = {k: v if dkwargs.get(k) is None else _box(level, v, dkwargs[k])
                  for k, v in (kwargs or {}).items()}
    out = f(*boxed, **kwargs) if kwargs else f(*boxed)
    if callable(out) and not _numberlike(out):
        raise _Deopt  # a derivative function returned: lazy, the general mode's business
    return _unbox(level, out)


# -- the specialised jvp ------------------------------------------------------------------------

class _Specialising(Context):
    """The context whose pass rewrites functions into their duals.  It intercepts calls only
    (no verb of its own), so the arithmetic the pass expands stays native Python.  One per
    thread, reused: it holds no state of any particular ``jvp``."""

    def __init__(self) -> None:
        super().__init__(passes=[_PASS])


class _Thread(threading.local):
    """Per thread: the specialising context (how many specialised ``jvp`` calls are running
    is ``_dual_objects._RUN.depth``, beside the objects they create)."""

    ctx: _Specialising | None = None


_LOCAL = _Thread()


def _specialising() -> _Specialising:
    ctx = _LOCAL.ctx
    if ctx is None:
        ctx = _LOCAL.ctx = _Specialising()
    return ctx


_LEAVES = frozenset((float, int, complex, _Dual, np.float64))
_INTEGRAL = (int, np.integer, np.bool_)
_TANGENTS_OK = frozenset((float, int, complex, _Dual, np.ndarray, type(None), np.float64))


def _leaf_ok(x: Any) -> bool:
    return type(x) in _LEAVES or (type(x) is np.ndarray and x.dtype.kind in "fc")


def _tangent_ok(t: Any) -> bool:
    return type(t) in _TANGENTS_OK and (type(t) is not np.ndarray or t.dtype.kind in "fc")


def _declined(depth: int, reason: str) -> NoReturn:
    """The route declines (raising :class:`_routes.Declined` with ``reason``), or, inside
    another specialised ``jvp``, stops that one."""
    if depth:
        raise _Deopt(reason)
    raise _routes.Declined(reason)


def jvp(f: Any, primals: tuple[Any, ...], tangents: tuple[Any, ...],
        batch: tuple[int, ...], helper: bool = False) -> tuple[Any, Any]:
    """``(out, tangent)`` of ``f`` by its dual, or :class:`_routes.Declined` (with the reason)
    where the general mode must run: ``f`` is not a plain Python function, an argument is not
    a number, a NumPy float array, or a tuple, list, dict or named tuple of them, a context is
    running (other than the general mode's calling a ``helper``: see :func:`run_helper`), or
    the dual stopped (:class:`_Deopt`).  Inside another specialised ``jvp`` it never declines:
    it raises :class:`_Deopt` for the outermost to handle."""
    run = _RUN
    depth = run.depth
    if type(f) is not types.FunctionType:
        _declined(depth, f"not a Python function (a {type(f).__name__})")
    if f.__code__.co_flags & _GENERATOR:
        _declined(depth, "a generator function (its generator is the general mode's)")
    if _rules.overridden and _rules.any_overridden(_WRITTEN_OUT):
        _declined(depth, "a rule of an operator the dual writes out is replaced")
    code = f.__code__
    dual = code.co_argcount > 0 and code.co_varnames[0] == "@T"
    info = None
    if dual:
        count: int | None = code.co_argcount - 1
    else:
        info = _code_info(f)
        count = None if info.arity is None or _own_rules(f) else info.arity
        if info.stopped and not depth:
            why = info.stopped.get(_stop_key(f, primals, batch))
            if why is not None:
                _declined(depth, f"stopped on an earlier call: {why}")
    if len(primals) == 1 and len(tangents) == 1 and type(primals[0]) in _LEAVES \
            and type(tangents[0]) in _PLAIN_NUMBERS:
        seeds = [tangents[0]]  # the most common case: derivative(f, x)
    elif len(primals) == len(tangents) and all(map(_leaf_ok, primals)) \
            and all(map(_tangent_ok, tangents)):
        seeds = [0.0 if t is None else t for t in tangents]  # numbers, arrays
    else:
        problem = _arguments_problem(primals, tangents)
        if problem:
            _declined(depth, problem)
        seeds = [_seed(p, t) for p, t in zip(primals, tangents)]
    if count is None or len(primals) > count:
        _declined(depth, "no dual: generator, *args, keyword-only parameters, rules or no "
                         "source" if count is None else "more arguments than parameters")
    if not depth and not helper and current_context() is not None:
        _declined(depth, "run inside a context")
    level = _Level()
    single = False
    if batch and batch == (1,) and all(map(_squeezable, seeds)):
        # one direction (jacfwd per leaf of a tuple): numbers, not arrays of one
        seeds, batch, single = [_squeezed(t) for t in seeds], (), True
    if count > len(seeds):
        seeds += [0.0] * (count - len(seeds))  # parameters left to their defaults
    run.depth = depth + 1
    enclosing = run.fresh  # (the objects of the runs this one is nested in: not this run's)
    if depth:
        run.fresh = None
    try:
        if dual:
            out, dout = f((level, *seeds), *primals)
        else:
            out, dout = recurse(_specialising(), _shared(f), (level, *seeds), *primals)
        if type(out) is float and type(dout) is float and not batch and not single:
            if dout == dout:
                return out, dout
            raise _Singular
        if isinstance(out, _INTEGRAL) and _zero(dout):
            # a constant, or a differentiated integer whose tangent is 0 (max(0, x) below
            # 0): the dual cannot tell them apart, the general mode can (see _check_differentiated)
            raise _Deopt("an integer result")
        value, tangent = _outputs(level, out, dout, batch)
        if not depth and _escaped(value, tangent):
            raise TagError(
                "the result holds the value of an inner derivative that escaped "
                "it (a closure, generator or object made inside the inner derivative and used "
                "after it returned): use it inside the inner derivative, or return it from "
                "there")
        if single:
            leaves, tree = flatten(tangent)
            tangent = unflatten(tree, [None if t is None else np.asarray(t)[None]
                                       for t in leaves])
        return value, tangent
    except TagError:
        raise
    except Exception as error:  # the program's own error, or a rule's (0.5 / 0 at
        if depth:  # math.sqrt(1.0 - 1.0)): the general mode raises them as the reference does
            raise  # (a rule's error as a MissingRuleError, which a program's except clause
        raise _routes.Declined(  # must not take for its own: see _rules.computed_as_ieee)
            f"raised {type(error).__name__}: the general mode raises it") from None
    except _Deopt as stop:
        if depth:
            raise
        reason = str(stop) or "a construct the route does not follow"
        if info is not None and type(stop) is not _Singular and \
                type(stop) is not _Unseen:
            info.stopped[_stop_key(f, primals, batch)] = reason
        raise _routes.Declined(f"stopped: {reason}") from None
    finally:
        run.depth = depth
        if depth:
            _dual_objects.hand_over(enclosing)
        else:
            if run.fresh is not None:
                run.fresh = None
            if _FILLED:
                _empty_sites()


class _Singular(_Deopt):
    """A result whose tangent has a nan: a singular point, where the general mode leaves out
    on numbers each term ``partial * tangent`` of an exactly zero tangent (see
    ``_tangents._exactly_zero``) that the dual's arithmetic written out in place multiplies,
    ``0.0 * inf = nan`` (``x * np.log(y)`` at ``y == 0`` with ``x`` held fixed).  Elsewhere the
    two agree: a term left out there is 0 here.  The general mode computes the result; the
    stop is not remembered (it depends on the point, not on the code)."""

    def __init__(self) -> None:
        super().__init__("a nan tangent (a singular point)")


class _Unseen(_Deopt):
    """A call of a function with the user's rules whose output the general mode has not seen
    yet (see ``_rules.note_output``): the stop is not remembered, so a later call, once the
    output is known to be one the route follows, takes the route."""


def _nan(t: Any) -> bool:
    """Whether the tangent ``t`` (a number, an array, or a dual of an outer derivative, whose
    value is looked at) has a nan."""
    if type(t) is float:
        return t != t
    t = _plain(t)
    if type(t) is np.ndarray:
        return t.dtype.kind in "fc" and bool(np.isnan(t).any())
    return isinstance(t, (float, complex, np.inexact)) and t != t


def _squeezable(t: Any) -> bool:
    """Whether the tangent ``t`` of a batch of one direction is arrays of float64 or
    complex128 only (their one direction, as numbers, computes the same)."""
    if type(t) is tuple:
        return all(map(_squeezable, t))
    if type(t) is dict:
        return all(map(_squeezable, t.values()))
    if type(t) is np.ndarray:
        return t.dtype in (np.float64, np.complex128) and t.shape[:1] == (1,)
    return _zero(t)


def _squeezed(t: Any) -> Any:
    if type(t) is tuple:
        return tuple(map(_squeezed, t))
    if type(t) is dict:
        return {k: _squeezed(v) for k, v in t.items()}
    if type(t) is np.ndarray:
        return t[0].item() if t.ndim == 1 else t[0]
    return t


def _stop_key(f: types.FunctionType, primals: tuple[Any, ...], batch: tuple[int, ...]
              ) -> tuple[Any, ...]:
    """What a stop is remembered for: the function's defaults and closure (a wrapper of the
    same code around another function may run wholly), its arguments' classes (a list where
    a tuple ran) and whether its directions come in a batch (jacfwd's pass stops where one
    direction runs).  Only speed depends on it: a stale key tries the dual again, or declines
    at once, and the result is the general mode's either way."""
    cells = f.__closure__
    return (id(f.__defaults__), tuple(type(p) for p in primals), bool(batch),
            None if cells is None else tuple(id(_content(c)) for c in cells))


def _content(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def _arguments_problem(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> str:
    """Why the arguments are not for the dual ('' where they are): numbers, NumPy float
    arrays, tuples, lists, dicts and named tuples of them, with tangents of the same
    structure."""
    if len(primals) != len(tangents):
        return "primals and tangents of different lengths"
    for i, (p, t) in enumerate(zip(primals, tangents)):
        problem = _argument_problem(p, t)
        if problem:
            return f"argument {i}: {problem}"
    return ""


def _argument_problem(p: Any, t: Any) -> str:
    kind = type(p)
    if kind is tuple or kind is list or _named(p):
        if t is None:
            return ""
        if not isinstance(t, (tuple, list)) or len(t) != len(p):
            return f"a {kind.__name__} with a tangent of another structure"
        return next((why for why in map(_argument_problem, p, t) if why), "")
    if kind is dict:
        if t is None:
            return ""
        if type(t) is not dict or t.keys() != p.keys():
            return "a dict with a tangent of another structure"
        return next((why for k in p if (why := _argument_problem(p[k], t[k]))), "")
    if _leaf_ok(p) and _tangent_ok(t):
        return ""
    if isinstance(p, np.ndarray):
        return f"an array of {p.dtype} (float and complex arrays only)"
    return f"a {kind.__name__} (numbers, float arrays, tuples, lists, dicts and named " \
           f"tuples of them only)"


def _seed(p: Any, t: Any) -> Any:
    """The tangent of argument ``p`` as the dual holds it: a tuple of tangents for a tuple,
    list or named tuple, a dict of them for a dict, 0.0 for none."""
    if t is None:
        return 0.0
    kind = type(p)
    if kind is tuple or kind is list or _named(p):
        return tuple(map(_seed, p, t))
    if kind is dict:
        return {k: _seed(p[k], t[k]) for k in p}
    return t


def _outputs(level: _Level, out: Any, dout: Any, batch: tuple[int, ...]) -> tuple[Any, Any]:
    """The dual's ``(value, tangent)`` as ``jvp`` returns them: a tangent per number leaf
    (zeros of the batch shape where it has none), None for other leaves; values that
    containers made in the run hold boxed are unboxed."""
    kind = type(out)
    if (kind is float or kind is _Dual) and not batch and type(dout) in _LEAVES:
        if kind is _Dual and out.L is level:
            out, dout = out.v, _sum(dout, out.t)
        if _nan(dout):
            raise _Singular
        return out, dout
    if callable(out) and not _numberlike(out):
        raise _Deopt("a function-valued result")  # the general mode applies it lazily
    if type(out) is _Dual or type(out) is tuple:
        out, extra = _unbox(level, out)
        if not _zero(extra):
            dout = extra if _zero(dout) else _add(dout, extra)
    leaves, tree = flatten(out)
    if len(leaves) == 1 and leaves[0] is out:
        dleaves = [dout]
    elif type(dout) is tuple and isinstance(out, (tuple, list)):
        dleaves = flatten(dout)[0]
        if len(dleaves) != len(leaves):
            raise _Deopt("a result whose tangents do not match its structure")
    elif type(dout) is dict and type(out) is dict:
        dleaves = flatten(dout)[0]
        if len(dleaves) != len(leaves) or list(dout) != list(out):
            raise _Deopt("a result whose tangents do not match its structure")
    elif _zero(dout):
        dleaves = [0.0] * len(leaves)
    else:
        raise _Deopt("a result whose tangents do not match its structure")
    values: list[Any] = []
    tangents: list[Any] = []
    for v, t in zip(leaves, dleaves):
        if type(v) is _Dual and v.L is level:  # boxed in a container made in the run
            v, t = v.v, _sum(t, v.t)
        if type(v) is Tagged or (callable(v) and not _numberlike(v)):
            raise _Deopt("a function or another context's value in the result")
        if not _numberlike(v) and type(v) is not np.ndarray and \
                _object_holds_dual(v, set(), 4):
            # an object of the user's (no pytree) holding a dual, which would escape with it
            raise _Deopt("an object holding a differentiated value in the result")
        values.append(v)
        if not _numberlike(v) and type(v) is not np.ndarray:  # np.array(x): one too
            tangents.append(None)
        elif _zero(t) and type(t) is not np.ndarray:
            tangents.append(_zero_tangent(v, batch))
        elif _nan(t):
            raise _Singular
        elif batch and type(t) is np.ndarray and t.shape != batch + np.shape(v):
            # a constant array's zeros, made without the directions (np.ones(4) * c)
            if t.any():
                raise _Deopt("a tangent without its directions")
            tangents.append(_zero_tangent(v, batch))
        else:
            tangents.append(t)
    return unflatten(tree, values), unflatten(tree, tangents)


def _object_holds_dual(x: Any, seen: set[int], depth: int) -> bool:
    """Whether an object's attributes, or a container's items, hold a dual (``depth`` levels
    down): ``Box(a)`` made in the run and returned, as ``jvp``'s ``aux``, say."""
    if type(x) is _Dual or type(x) in _dual_objects.INTERNAL:
        return True
    if depth == 0 or id(x) in seen or isinstance(x, (type, types.ModuleType, str, bytes)) \
            or type(x) in _LEAVES or type(x) is np.ndarray:
        return False
    seen.add(id(x))
    if type(x) is functools.partial:  # (what it holds is not in its __dict__)
        items: Any = (x.func, *x.args, *x.keywords.values())
    elif isinstance(x, (list, tuple, set, frozenset)):
        items = x
    elif isinstance(x, dict):
        items = (*x.keys(), *x.values())
    else:
        items = list(getattr(x, "__dict__", {}).values())
        for cls in type(x).__mro__:
            slots = cls.__dict__.get("__slots__", ())
            for name in (slots,) if isinstance(slots, str) else slots:
                if isinstance(name, str) and name not in ("__dict__", "__weakref__"):
                    items.append(getattr(x, name, None))
    return any(_object_holds_dual(item, seen, depth - 1) for item in items)


def _escaped(value: Any, tangent: Any) -> bool:
    """Whether the outermost dual's result still holds a dual: one of an inner derivative's
    level, which escaped it (only values of the outermost level are unboxed)."""
    if type(value) is float and type(tangent) is float:
        return False
    return any(type(leaf) is _Dual for leaf in (*flatten(value)[0], *flatten(tangent)[0]))


def _zero_tangent(v: Any, batch: tuple[int, ...]) -> Any:
    v = _plain(v)
    if batch or isinstance(v, np.ndarray):
        return np.zeros(batch + np.shape(v), np.result_type(v, 0.0))
    return 0j if isinstance(v, complex) else 0.0


HELPERS.update({
    "binop": _binop, "unop": _unop, "getitem": _getitem, "getattr": _getattr, "call": _call,
    "plain": _plain_elements, "box": _boxed, "unbox": _unboxed, "deopt": _deopt,
    "pairs": _pairs, "compare": _compare, "truth": _truth, "plain_key": _plain_key,
    "inert": _inert_values,
    "new": _dual_objects._new, "stacks": _dual_objects._stacks,
    "setitem": _dual_objects._setitem,
    "fresh": _dual_objects._fresh,
    "setattr": _dual_objects._setattr, "star": _dual_objects._star,
    "enter": _dual_objects.enter, "leave": _dual_objects.leave,
    "unpackable": _dual_objects._star, "consuming": _dual_objects._consuming,
    "safe": _SAFE, "truthful": _TRUTHFUL, "Dual": _Dual, "Module": _MODULE,
    "flat": _AS_THEY_ARE,
    "Method": types.MethodType,
    # the guards' types and the containers made, under names no user variable can shadow
    "float": float, "int": int, "str": str, "tuple": tuple, "float64": np.float64,
    "append": list.append, "add": set.add, "tuple_new": tuple.__new__, "apply": _apply,
    "apply_unary": _apply_unary,
    "list": list, "dict": dict, "set": set,
    "type": type,  # (an object's class, read without its __getattribute__: see _pass_common._class)
})


# -- helpers of the general forward mode -------------------------------------------------------

NOT_RUN = object()  # (run_helper: the general mode runs the call)
_OURS = ("overdub.", "overdub_ad.")
_HELPER_PLAIN = frozenset((float, int, bool, str, type(None), np.float64))
_HELPER_TANGENTS = frozenset((float, np.float64, np.ndarray))


def helper_arguments(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
                     ) -> tuple[Any, ...] | None:
    """The arguments of the call ``f(*args, **kwargs)`` by position, where ``f`` is a Python
    function with a dual and the keywords name the positional parameters that follow
    ``args`` (``step(x, y, z, sigma=s, rho=r, beta=b)``); None otherwise."""
    if _dual_arity(f) is None or _code_info(f).api or \
            str(f.__globals__.get("__name__")).startswith(_OURS):
        return None  # (a rule run through the context: its arithmetic is for it to see)
    code = f.__code__
    count = code.co_argcount
    if len(args) + len(kwargs) > count:
        return None
    if kwargs:
        names = code.co_varnames[len(args):len(args) + len(kwargs)]
        if set(names) != kwargs.keys():
            return None
        args = (*args, *(kwargs[name] for name in names))
    return args


def helper_call(ctx: Any, args: tuple[Any, ...]) -> bool:
    """Whether the general forward mode (``ctx``, with no context around it) may run a Python
    function with a dual given ``args`` (:func:`helper_arguments`) as that dual
    (:func:`run_helper`): numbers of ``ctx`` (or plain ones) and tuples of them, at least one
    with a tangent.  Where a function the dual route declines (a generator, a ``with`` block)
    calls scalar helpers (``rhs``, ``step``), their arithmetic runs native, with tangents in
    local variables, not one operation at a time."""
    carried = False
    for a in args:
        kind = type(a)
        if kind is Tagged:
            if a.owner() is not ctx or type(a.value) not in _HELPER_PLAIN or \
                    type(a.meta) not in _HELPER_TANGENTS:
                return False
            carried = True
        elif kind is tuple:
            for e in a:
                if type(e) is Tagged:
                    if e.owner() is not ctx or type(e.value) not in _HELPER_PLAIN or \
                            type(e.meta) not in _HELPER_TANGENTS:
                        return False
                    carried = True
                elif type(e) not in _HELPER_PLAIN:
                    return False
        elif kind not in _HELPER_PLAIN:
            return False
    return carried


def run_helper(ctx: Any, f: Any, args: tuple[Any, ...], batch: tuple[int, ...]) -> Any:
    """``f(*args)`` (:func:`helper_call` said yes) by ``f``'s dual, its numbers tagged for
    ``ctx`` with their tangents; or :data:`NOT_RUN` where the dual declines, raises, or gives
    a result that is not numbers and tuples of them (up to then it has done nothing with an
    effect: the general mode runs the call).  A result with a zero tangent is a plain
    number, as the general mode gives a constant, except an integer (whose tangent tells
    ``max(0, x)``'s constant winner, a derivative of 0, from a count: the general mode's to
    say)."""
    values = []
    tangents = []
    for a in args:
        if type(a) is Tagged:
            values.append(a.value)
            tangents.append(a.meta)
        elif type(a) is tuple:
            values.append(tuple(e.value if type(e) is Tagged else e for e in a))
            tangents.append(tuple(e.meta if type(e) is Tagged else 0.0 for e in a))
        else:
            values.append(a)
            tangents.append(None)
    try:
        out, dout = jvp(f, tuple(values), tuple(tangents), batch, helper=True)
    except _routes.Declined as why:
        _routes.declined("forward-dual", str(why), f)
        return NOT_RUN
    result = _tagged_result(ctx, out, dout)
    if result is not NOT_RUN:
        _routes.ran("forward-dual", f)
    return result


def _tagged_result(ctx: Any, out: Any, dout: Any) -> Any:
    kind = type(out)
    if kind is tuple:
        if type(dout) is not tuple or len(dout) != len(out):
            if not _zero(dout):
                return NOT_RUN
            dout = (0.0,) * len(out)  # (no tangent at all: each item's, an integer's too)
        parts = [_tagged_result(ctx, v, t) for v, t in zip(out, dout)]
        return NOT_RUN if any(p is NOT_RUN for p in parts) else tuple(parts)
    if kind is bool or kind is str or out is None:
        return out
    if kind not in _HELPER_PLAIN or (dout is not None and type(dout) not in _HELPER_TANGENTS):
        return NOT_RUN
    if dout is not None and _nan(dout):
        return NOT_RUN  # (a singular point: see _Singular)
    if dout is None or (not np.any(dout) if type(dout) is np.ndarray else dout == 0):
        return NOT_RUN if kind is int else out
    return tag(out, ctx, dout)
