"""The reverse-mode context: records primitive calls on a tape as ``f`` runs (see
:mod:`overdub_ad.reverse`)."""

from __future__ import annotations

import collections
import functools
import itertools
import operator
import types
import weakref
from typing import Any

import numpy as np

from overdub import (Context, Tagged, can_recurse, carries_tags, current_context,
                     overdub, recurse, tag)

from .. import _arrays, _callbacks, _routes, _rules
from .._array_methods import _replacement
from .._arraylike import operator_reads_arrays
from .._custom import custom_jvp, custom_vjp, RESTATABLE, restated
from .._shared import (_holds_stored, by_differentiated_key, cell_values, CONSUMERS,
                       derivative_entry,
                       _implementation, inert_library_call, INERT_ARGUMENTS, _INERT_VALUES,
                       _innermost, key_holds, made_here, iterate_through,
                       _KEYED_READS, keyed_read,
                       namespace_of, _public, given_out, out_as_keyword, part_write,
                       python_iterable,
                       run_stepped, set_part, _sourceless, STEPPED, stepped_builtin, summed_through,
                       _user_operator)
from . import _containers, _mutation, _recording, _scalars, _specialise
from .._stores import (ARRAY_WRITE_IDS, constructs_container, CONTAINERS, EXTENDS,
                       METHOD_KINDS, SEQUENCES, spelled_is_primitive, spelled_store, STORES)
from ._calls import (_BINARY_OPERATIONS, _binding_error, _BuiltinMethod,
                     _DECISIONS, _dict_storing, _FAST, _given_nodes,
                     _INPLACE_IDS, _ITERATORS, _MOVING,
                     _NATIVE_CONTAINERS, _NOT_SIMPLE, _outs, _PYTHON_CODE,
                     _REAL_TYPES, _RECURSIVE, _remember, _written_array)
from ._plans import _plan, _PLANS
from ._spec_runtime import _CALLS, _SECOND_CALLS
from ._regions import shape_second
from ._tape import (_element_index, _Entry, _Node, _placeholder, _root,
                    _ScalarRead, _Second)

_OBJECT_SETATTR: Any = object.__setattr__
_LRU_CACHE = _rules._LRU_CACHE  # functools.lru_cache's C wrapper (see _callbacks.native_holder)
_READ = (*SEQUENCES, dict)  # what a C function may read differentiated values out of
# Builtins with rules that iterate their first argument: given a dict, they see its keys (the
# rules' containers are read as their values otherwise)
_KEYS_ITERATED = frozenset(map(id, (sum, min, max, sorted, *CONSUMERS.values())))
_NATIVE_STORES = frozenset({list, dict, np.flatiter})  # (their writes are this context's)
_ENTRY_KINDS = frozenset({types.FunctionType, types.MethodType})  # (see _entry_given_nodes)
# INERT_ARGUMENTS (_shared): arguments that can neither be nor hold a differentiated value, nor
# be written into, nor call back, nor be iterated by Python code (a class whose metaclass is
# ``type``: an Enum's is not): a call given only these (positionally, or by keywords other
# than ``out``), by a C function that is not a method of an object, is this context's only
# for a stand-in (every other test of _held is about what its arguments are or hold, or about
# the object a method is bound to), and Python code is left to _indirect's own tests (its
# specialised version, or a NumPy function called whole).  Most calls of a function's
# bookkeeping are of this kind.

# Library functions that _general sends to _call (np.sin, np.sum, np.zeros): id -> (fn, the
# rules' version then, its public function, whether its callable arguments are guarded).
# Every test _general makes before that is of the function alone, given the rules, but for
# the ones about the call's arguments, which are made again (a callback, an iterator,
# ``out=``); the functions whose tests look at the arguments otherwise (operators a class may
# define, the consumers of iterables, in-place operators, methods bound to an object) are
# never kept.  Long-lived functions only: the entry keeps its function alive, so that its id
# stays its own.
_ROUTED: dict[int, tuple[Any, int, Any, bool]] = {}
_LIBRARY_KINDS = frozenset({np.ufunc, type(np.sum)})
_SORT_KEY = type(functools.cmp_to_key(operator.sub))  # functools.KeyWrapper
_EXHAUSTED = object()  # (next(it, _EXHAUSTED): the iterator had no item left)

# Float operations recorded with their second partials on the tapes of hvp (see
# ReverseContext._second_step), while their rules are the shipped ones: binary operations by
# their declared shape, id -> (fn, shape); functions of one float by the specialised code's
# table of their declared derivatives (_spec_runtime._SECOND_CALLS), unary - and + linear
_SECOND2: dict[int, tuple[Any, Any]] = {}


@_rules.on_change
def _second_tables() -> None:
    _SECOND2.clear()
    for fn, arity, _ in _rules.declared_partials():
        if arity == 2 and _rules.is_shipped(fn):
            shape = _rules.scalar_shape(fn)
            if type(shape) is tuple or shape is _rules.BILINEAR or shape is _rules.QUOTIENT \
                    or shape is _rules.POWER:  # (what shape_second covers)
                _SECOND2[id(fn)] = (fn, shape)


# -- the context --------------------------------------------------------------------------------

def _remember_route(fn: Any, public: Any) -> None:
    """Note in ``_ROUTED`` that ``_general`` took ``fn`` (a library function: a ufunc, a NumPy
    dispatcher, a module's builtin) to ``_call`` of ``public``, unless the tests for ``fn``
    depend on its arguments (an operator, a consumer of iterables, an in-place operator)."""
    kind = type(fn)
    if (kind in _LIBRARY_KINDS or (kind is _BuiltinMethod and
                                   type(fn.__self__) is types.ModuleType)) and \
            id(fn) not in _BINARY_OPERATIONS and id(fn) not in CONSUMERS and \
            id(fn) not in _INPLACE_IDS and len(_ROUTED) < 10_000:
        _ROUTED[id(fn)] = (fn, _rules.version, public,
                           _callbacks.c_callee(fn) and _rules.vjp_rules(fn) is None)


def _levels_apart(x: Any) -> bool:
    """Whether the list or tuple ``x`` holds tagged values as they are beside plain members,
    whose tangents an enclosing derivative may keep aside, by position (it stored them: see
    ``keeps_heap_metadata``): read natively, those would be lost."""
    return Tagged in map(type, x) and not all(type(v) is Tagged for v in x)


class ReverseContext(Context):
    """The reverse-mode context: one instance (and one tape) per ``vjp`` call.

    ``nested``: whether an enclosing context must see what this one computes (then every
    primal call and every rule runs through it); the API functions find out for themselves.
    """

    def __init__(self, nested: bool = True) -> None:
        super().__init__()
        self.nested = nested
        self.tape: list[Any] = []
        # Arrays written in place (and views read after a write): id -> [weak ref, node, gen]
        self.versions: dict[int, list[Any]] = {}
        # Differentiated arrays that views were taken of: id -> (weak ref, node)
        self.roots: dict[int, tuple[Any, ...]] = {}
        # Arrays the tape holds as values: id(root) -> [(array, entry, path)], so that an
        # in-place write first copies the values the entries need.  Kept from the first
        # in-place write on (``tracking``; the tape so far is scanned then): most functions
        # never write, and need not pay for it on every call.
        self.held: dict[int, list[Any]] = {}
        self.tracking = False
        # Whether the tape outlives the run (vjp's pullback): then it keeps copies of the
        # arrays it holds when f returns (see _mutation._save_all)
        self.keeps = False
        # Recording for a second derivative of the tape itself (see overdub_ad.hvp): every
        # entry keeps its function and all its values (no local partials, nothing left out),
        # but for the records of specialised code's arithmetic, which hold second partials
        # (_tape._Second)
        self.second = False
        # Containers holding this context's tagged values natively: id -> (container, name)
        self.stores: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        # (id(dict), plain key) of the items stored under a differentiated key (see made_here)
        self.keys_written: set[tuple[int, Any]] = set()
        self._store_limit = 256
        # id -> (Python function, is it a primitive, the rules' version then)
        self._functions: dict[int, tuple[Any, bool, int]] = {}
        # Python functions run by their specialised versions (see _specialise): id -> (fn, it)
        self._specs: dict[int, tuple[Any, Any]] = {}
        # (class, name) -> (the class attribute, the class dict holding it, the dicts before
        # it) read in this run by specialised code (see _spec_runtime._class_attribute)
        self._attributes: dict[tuple[type, str], tuple[Any, Any, tuple[Any, ...]]] = {}
        # classes whose calls specialised code makes itself in this run, or not (see
        # _spec_runtime._constructed_here)
        self._classes: dict[type, bool] = {}
        # the attribute sites of specialised code that read instance dicts in this run (see
        # _spec_runtime._attr): (the site table, the site)
        self._sites: list[tuple[list[Any], int]] = []
        self._ref: Any = None
        self._label = f"{type(self).__name__} context at {id(self):#x}"

    def metadata_type(self, value_type: type) -> Any:
        if _arrays.is_numeric_type(value_type):
            return _Node
        return None

    native_use = _callbacks.refuse_native_use  # (a derivative is never dropped silently)
    escape_hint = _callbacks.escape_hint

    # -- tagging ---------------------------------------------------------------------------
    def _wrap(self, value: Any, node: _Node) -> Tagged:
        ref = self._ref
        if ref is None:
            t = tag(value, self, node)
            self._ref = t.owner
            return t
        return Tagged(value, node, ref, self._label)

    def _node(self, x: Any) -> Any:
        """The node ``x`` stands for in this context, or None."""
        if type(x) is Tagged:
            if x.owner is not self._ref:
                # an enclosing context's array that this context wrote into: its version
                v = _innermost(x) if self.versions else None
                return self._array_node(v, None) if type(v) is np.ndarray else None
            if self.versions:
                v = _innermost(x.value)
                if type(v) is np.ndarray:
                    return self._array_node(v, x.meta)
            return x.meta
        if type(x) is np.ndarray and self.versions:
            return self._array_node(x, None)
        return None

    def _array_node(self, arr: np.ndarray, meta: Any) -> Any:
        """The current node of array ``arr`` (tagged with ``meta``, or plain: None)."""
        versions = self.versions
        slot = versions.get(id(arr))
        if slot is not None and slot[0]() is not arr:
            slot = None
        if not isinstance(arr.base, np.ndarray):
            return meta if slot is None else slot[1]
        root = _root(arr)
        rslot = versions.get(id(root))
        if rslot is None or rslot[0]() is not root:
            return meta if slot is None else slot[1]
        gen = rslot[2]
        if slot is not None:
            if slot[2] == gen:
                return slot[1]
        elif meta is not None and getattr(meta, "gen", 0) == gen:
            return meta
        # the array it views was written since: read this view's values from its new version
        node = None
        if rslot[1] is not None:
            node = self._gather(root, rslot[1], arr)
        self._set_slot(arr, node, gen)
        return node

    def _gather(self, root: np.ndarray, root_node: _Node, view: np.ndarray) -> _Node:
        index = _element_index(view, root)
        if index is None:
            raise NotImplementedError(
                f"overdub_ad reverse mode: cannot follow a view of dtype {view.dtype} into an "
                f"array of dtype {root.dtype} that was written in place")
        node = _Node()
        self.tape.append(_Entry(operator.getitem, [_placeholder(root), index], {}, None,
                                [root_node, None], node))
        return node

    def _set_slot(self, arr: np.ndarray, node: Any, gen: int) -> None:
        key = id(arr)
        versions = self.versions
        slot = versions.get(key)
        if slot is not None and slot[0]() is arr:
            slot[1], slot[2] = node, gen
            return
        ref = weakref.ref(arr, lambda _: versions.pop(key, None))
        versions[key] = [ref, node, gen]

    def _closes_over(self, fn: Any, depth: int = 0) -> bool:
        """Whether ``fn`` reads a value differentiated here other than through its arguments:
        from its closure cells, its defaults, a partial's arguments (and theirs, for the
        functions among them), a bound method's object or a callable object itself
        (``checkpoint(layer)``: ``self.w``)."""
        if isinstance(fn, functools.partial):
            captured = [fn.func, *fn.args, *fn.keywords.values()]
        elif isinstance(fn, custom_vjp) or type(fn) is custom_jvp:  # checkpoint(checkpoint(g))
            return depth < 4 and self._closes_over(
                fn.fn if isinstance(fn, custom_vjp) else fn.fun, depth + 1)
        else:
            if type(fn) is types.MethodType:
                if self._carries(fn.__self__) or _holds_stored(self, fn.__self__):
                    return True
                fn = fn.__func__
            elif type(fn) is not types.FunctionType and not isinstance(fn, type) and \
                    type(type(fn).__dict__.get("__call__")) is types.FunctionType:
                if _holds_stored(self, fn):  # a callable object of the user's class
                    return True
                fn = type(fn).__dict__["__call__"]
            if type(fn) is not types.FunctionType:
                return False
            captured = [*cell_values(fn), *(fn.__defaults__ or ()),
                        *(fn.__kwdefaults__ or {}).values()]
        return any(self._carries(v) or (depth < 4 and callable(v)
                                        and self._closes_over(v, depth + 1)) for v in captured)

    def _carries(self, x: Any, seen: set[int] | None = None) -> bool:
        """Whether ``x`` is differentiated here, or holds such a value (in a list, tuple,
        deque or dict, their subclasses too: a named tuple, an ``OrderedDict``) at any depth:
        NumPy reads nested lists natively to any depth, so a limit would be a silent zero.
        ``seen``: the containers looked into so far (a container holding itself, or shared
        by several, is looked into once)."""
        if self._node(x) is not None:
            return True
        if isinstance(x, SEQUENCES):
            items: Any = x
        elif isinstance(x, dict):
            items = x.values()
        else:
            return False
        if seen is None:
            seen = {id(x)}
        elif id(x) in seen:
            return False
        else:
            seen.add(id(x))
        return any(self._carries(v, seen) for v in items)

    # -- which calls are ours ----------------------------------------------------------------
    def is_primitive(self, fn: Any, /, *args: Any, **kwargs: Any) -> bool:
        if type(fn) in RESTATABLE and restated(fn, args) is not None:
            return True  # np.sin.__call__(x), custom.__call__(x), a * q with q's class
            # overriding ufuncs: the call it amounts to (execute)
        if given_out(fn, args):  # np.sin(a, r), np.cumsum(a, 0, None, r): r is its out=
            fn, args, kwargs = out_as_keyword(fn, args, kwargs)
        if fn is setattr and part_write(fn, args):  # z.real = v: an element write (set_part)
            return True
        if fn is setattr and len(args) == 3 and args[1] == "shape":  # a.shape = s: see
            array = _innermost(args[0])                              # _mutation._set_shape
            if type(array) is np.ndarray and (self._node(args[0]) is not None or
                                              self._holds(array)):
                return True
        if type(fn) is custom_jvp and fn.jvp is not None:  # its rule, for a differentiated
            return True  # value anywhere in its arguments' trees; without one, a leaf (_call)
        if isinstance(fn, custom_vjp) and fn.fwd is not None:  # its rule, for one anywhere in
            # its arguments' trees (argnums=1: g(x, t) with t a tuple); one only in its closure
            # is refused by _call (never the body differentiated instead of the rule); without
            # either, a leaf (_call)
            return True
        ref = self._ref
        for a in args:
            if type(a) is Tagged and a.owner is ref:
                if id(fn) in _FAST:  # always ours (a rule)
                    return True
                if fn is operator.getitem:  # ours, but for a key into an object whose
                    # __getitem__ is Python (np.r_[x]): that code is run, and sees the key
                    subject = args[0]
                    return type(subject) is Tagged or not isinstance(
                        getattr(type(subject), "__getitem__", None), types.FunctionType)
                if fn is setattr and len(args) == 3 and args[2] is a and \
                        namespace_of(args[0], args[1]) is not None:
                    # mod.name = x: stored as it is (_setattr), as the module's functions
                    # read their globals natively (see namespace_of); the core would keep
                    # the tag aside
                    return True
                if fn is next and len(args) == 2 and args[1] is a:
                    return True  # next(it, x): the default as it is (see _general)
                decision = _DECISIONS.get(id(fn))  # (_direct's answer for a C function)
                if decision is not None and decision[0] is fn:
                    return decision[1]
                return self._direct(fn, args, kwargs)
        if not self.nested and args:
            # run natively in execute: cheaper than the tag machinery's path
            if fn is getattr and type(args[0]) is types.ModuleType:
                return True  # np.sin
            if (fn is operator.getitem or fn is iter) and len(args) <= 2 \
                    and type(args[0]) in _NATIVE_CONTAINERS:
                return True
            if id(fn) in _FAST and not kwargs and type(args[0]) in _REAL_TYPES and \
                    type(args[-1]) in _REAL_TYPES:
                return True  # arithmetic on plain floats
        return self._indirect(fn, args, kwargs)

    def _direct(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Whether a call with a differentiated argument is a primitive."""
        if type(fn) is types.FunctionType:
            if self._entry_given_nodes(fn, args, kwargs):
                return True
            # user code, called again and again: the decision kept for this run, made below
            # by the same checks while the rules were as they are
            known = self._functions.get(id(fn))
            if known is not None and known[0] is fn and known[2] == _rules.version:
                return known[1]
        decision = _DECISIONS.get(id(fn))
        if decision is not None and decision[0] is fn:  # never a replacement nor an alias
            return decision[1]
        if type(fn) is types.FunctionType:
            seen = _RECURSIVE.get(fn)
            if seen is not None and seen[2] == _rules.version and seen[0] is fn.__code__ and \
                    seen[1] is type(self):
                return self._python_decision(fn, False)  # (see below: found before)
        if fn is getattr:  # x.ndim: ours (see _attribute), whatever the tests below would say
            return True
        if fn is operator.setitem or fn is operator.delitem:  # (never a kept decision)
            container = _innermost(args[0])
            if isinstance(container, np.ndarray) or type(container) in _NATIVE_STORES \
                    or _dict_storing(container) or _arrays.is_foreign_array(container):
                return True
            return not isinstance(getattr(type(container), "__setitem__", None),
                                  types.FunctionType)
        if type(fn) in METHOD_KINDS:
            spelled = spelled_store(fn, args)
            if spelled is not None:
                return spelled_is_primitive(self, spelled, kwargs, self._carries)
        if _rules.method_with_rules(fn, _rules.vjp_rules) is not None:
            return True  # model.energy(x), a.dot(y): the method's rules (see execute)
        if _replacement(fn) is not None:
            return True
        fn = _public(fn)
        decision = _DECISIONS.get(id(fn))
        if decision is not None and decision[0] is fn:
            return decision[1]
        if fn is dict or isinstance(fn, custom_vjp) or id(fn) in _ITERATORS \
                or (type(fn) is custom_jvp and fn.jvp is not None) \
                or id(fn) in _MOVING:
            return True
        if type(fn) is _BuiltinMethod and isinstance(fn.__self__, CONTAINERS) and (
                fn.__name__ in STORES or fn.__name__ in ("get", "pop")):
            return True  # (get and pop: a differentiated default, which the core would strip)
        if constructs_container(fn):
            return True  # deque([x]), OrderedDict(a=x), L([x]): the values stored as they are
        if _rules.vjp_rules(fn) is not None or _rules.is_nondifferentiable(fn):
            _remember(fn, True)
            return True
        if carries_tags(fn):
            _remember(fn, False)
            return False  # the tag machinery moves it (heap), or looks at the plain value
        if type(fn) is types.FunctionType:
            # kept across runs: whether the core can recurse into it (the same each time), and
            # with it the rules' version at which none of the tests above applied (each is of
            # the function alone, given the rules: the next run goes straight here)
            seen = _RECURSIVE.get(fn)
            if seen is not None and seen[0] is fn.__code__ and seen[1] is type(self):
                decided = False
            else:
                decided = _sourceless(fn) and not can_recurse(self, fn, *args, **kwargs)
            if not decided:
                _RECURSIVE[fn] = (fn.__code__, type(self), _rules.version)
            return self._python_decision(fn, decided)
        if type(fn) is types.MethodType and type(fn.__func__) is types.FunctionType and \
                not self.nested and self._specialising():
            if _sourceless(fn) and not can_recurse(self, fn, *args, **kwargs):
                return True
            return self._specialised(fn.__func__)  # model.step(x): step's version, self first
        python = isinstance(fn, _PYTHON_CODE) or isinstance(getattr(type(fn), "__call__", None),
                                                            types.FunctionType)
        if python:
            return _sourceless(fn) and not can_recurse(self, fn, *args, **kwargs)
        return not can_recurse(self, fn, *args, **kwargs)

    def _python_decision(self, fn: types.FunctionType, decided: bool) -> bool:
        """:meth:`_direct`'s answer for Python function ``fn``, given whether the core sees a
        primitive in it (no source, and it cannot recurse into it): else its specialised
        version, where one runs.  Kept for this run (a strong reference, so the id stays the
        function's)."""
        if not decided and not self.nested and self._specialising():
            decided = self._specialised(fn)
        self._functions[id(fn)] = (fn, decided, _rules.version)
        return decided

    def _specialised(self, fn: types.FunctionType) -> bool:
        """Whether Python function ``fn`` runs as its specialised version in this run (the
        decision kept in ``_specs``: the version, or None), recorded for ``explain``."""
        if current_context() is not self:
            # a call an inner context's rule makes (jacfwd inside jacrev): the specialised
            # code's calls through this context would re-enter it under the inner one
            return False
        found = self._specs.get(id(fn))
        if found is not None and found[0] is fn:
            return found[1] is not None
        second = self.second
        spec = _specialise.specialised(fn, second)
        self._specs[id(fn)] = (fn, spec)
        route = "hvp-tape" if second else "reverse-specialised"
        if spec is not None:  # run by execute, arithmetic expanded in place
            _routes.ran(route, fn)
            return True
        why = _specialise.why_not(fn, second)
        if why is not None:
            _routes.declined(route, why, fn)
        return False

    def _specialising(self) -> bool:
        """Whether Python functions may run as their specialised versions in this run (with no
        enclosing context: see :meth:`_specialised`): on the route that compiles them for
        ``grad``, or on ``hvp``'s tape (``second``: that route's own versions, whose records
        hold second partials)."""
        return self.second or _routes.enabled("reverse-specialised")

    def _entry_given_nodes(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
                           ) -> bool:
        """Whether the call is of a derivative's entry point given pytree nodes (``grad(loss)(
        P(w, b))``, ``grad(f)({"p": params})``): the core keeps the metadata of their
        attributes aside, so the call is this context's, made on them revealed (see
        :meth:`_entry_call`)."""
        return derivative_entry(fn) and (_given_nodes(args) or _given_nodes(kwargs))

    def _entry_call(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A derivative's entry point given pytree nodes: it takes them apart natively, where
        attributes this context's values were stored into read plain (the enclosing
        derivative silently lost: 0 for a gradient of a gradient of ``p.w ** 3 * p.b``); so it
        is given the pytrees with their children read through this context (copies where any
        changed: it only reads them), and run as any opaque function is."""
        return self._run(fn, *self._revealed(args), **self._revealed(kwargs))

    def _python_function(self, fn: Any) -> bool:
        """:meth:`_indirect` for a Python function or bound method given no differentiated
        value of its own (the function ``grad`` is given, with a tuple of them; a method
        reading them from its object): its specialised version where there is one."""
        func = fn if type(fn) is types.FunctionType else fn.__func__
        if type(func) is not types.FunctionType or self.nested or not self._specialising():
            return False
        return self._specialised(func)

    def _by_keyword(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
                    ) -> bool | None:
        """Whether a call is this context's for what its keywords hold (a differentiated
        value, an ``out=`` buffer), or None: the keywords do not decide it."""
        ref = self._ref
        if fn is types.SimpleNamespace:  # its attributes stored as this context stores them
            return any(map(self._carries, kwargs.values())) or None  # (see _general)
        for v in kwargs.values():
            if (type(v) is Tagged and v.owner is ref) or \
                    (type(v) in (list, tuple) and self._carries(v)):  # range=(lo, hi)
                return self._direct(fn, args, kwargs)
        out = kwargs.get("out")
        if out is not None and not isinstance(fn, _PYTHON_CODE) and (
                self.versions or any(map(self._carries, args))
                or any(map(self._holds, _outs(out)))):
            return True  # (NumPy's out=; a Python function's out= is a keyword like any)
        return None

    def _keyed_here(self, key: Any) -> bool:
        """Whether the dict key ``key`` is differentiated here: itself, or a member of a tuple
        key (``memo[(x, "a")]``), whose item must pass ``by_differentiated_key``."""
        if type(key) is Tagged:
            return key.owner is self._ref
        # (in a named tuple, a frozenset, a frozen dataclass too: see key_holds)
        return key_holds(self, key, self._mine)

    def _mine(self, x: Any) -> bool:
        return type(x) is Tagged and x.owner is self._ref

    def _holds_kept(self, x: Any) -> bool:
        """Whether the object or container ``x`` holds a value this context differentiates,
        at any depth (what Python without source would read natively: see holds_kept)."""
        return type(x) not in _INERT_VALUES and _callbacks.holds_kept(self, x, self._mine)

    def _indirect(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """A call without a differentiated argument of its own: written arrays, containers of
        differentiated values, keywords, ``out=`` buffers."""
        if type(fn) is types.FunctionType:
            decision = _DECISIONS.get(id(fn))  # (overdub_ad's own: a run's first step, given
            if decision is not None and decision[0] is fn:  # no differentiated value, or a
                return decision[1]  # pytree of them, is decided as one that is)
            if inert_library_call(fn, args, kwargs):
                return True  # np.ones(3): called whole (see execute)
        for a in args:
            if type(a) not in INERT_ARGUMENTS:
                break
        else:  # (np.zeros(3), n != 1, np.ones(2, dtype=float)): see INERT_ARGUMENTS
            if not kwargs or ("out" not in kwargs and
                              all(type(v) in INERT_ARGUMENTS for v in kwargs.values())):
                kind = type(fn)
                if kind is not types.FunctionType and kind is not types.MethodType and (
                        kind not in METHOD_KINDS or (kind is _BuiltinMethod and type(
                            fn.__self__) is types.ModuleType)):
                    return self._ref is not None and fn is not operator.getitem and \
                        fn is not operator.contains and bool(_rules._STANDINS) and \
                        _rules.standin(fn, _rules.vjp_rules) is not None
        if kwargs:
            decided = self._by_keyword(fn, args, kwargs)
            if decided is not None:
                return decided
        if self.versions:
            for a in args:
                a = _innermost(a)  # (an enclosing context's array too)
                if type(a) is np.ndarray and self._array_node(a, None) is not None:
                    return self._direct(fn, args, kwargs)
                if type(a) is np.flatiter and self._array_node(a.base, None) is not None:
                    return True  # a flat iterator of an array written since it was taken
        if self._ref is None:
            return False
        if type(fn) is types.FunctionType or type(fn) is types.MethodType:
            if self._entry_given_nodes(fn, args, kwargs):
                return True
            # where the core would recurse into it, its specialised version may run instead
            if self._held(fn, args, kwargs) or self._python_function(fn):
                return True
            # Python without source given an object holding differentiated values (kept aside
            # by the core: read natively they are plain): MissingRuleError, from _general
            return _sourceless(fn) and any(self._holds_kept(a) for a in args) and \
                not can_recurse(self, fn, *args, **kwargs)
        return self._held(fn, args, kwargs)

    def _held(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """:meth:`_indirect` for a call that no written array decides: differentiated values
        held in its arguments (lists, tuples, dicts, iterators)."""
        if _callbacks.native_holder(self, fn, args, kwargs, self._mine) is not None:
            return True  # C code running Python natively on an object holding differentiated
            # values (math.fsum([obj]) calling obj.__float__, an lru_cache'd method): execute
        if fn is next and len(args) == 2 and not kwargs:
            return self._carries(args[1])  # next(it, [x]): the default as it is (_general)
        serialiser = _recording._SERIALISERS.get(id(fn))
        if serialiser is not None and serialiser[0] is fn:  # pickle.dumps(obj): refused
            return any(map(self._carries, args)) or any(map(self._holds_kept, args))
        if fn is operator.getitem or fn is operator.contains:
            # d[(x, "a")]: a key holding a differentiated value (see execute)
            return fn is operator.getitem and len(args) == 2 and isinstance(args[0], dict) \
                and type(args[1]) is not Tagged and self._keyed_here(args[1])
        if type(fn) in METHOD_KINDS and any(type(a) not in _INERT_VALUES for a in args[:2]):
            keyed = keyed_read(fn, args)  # memo.get((1, x)): see execute
            if keyed is not None and self._keyed_here(keyed[1]):
                return True
        if _rules._STANDINS and _rules.standin(fn, _rules.vjp_rules) is not None:
            return True  # a library function restated for differentiation (SciPy's solvers)
        if _callbacks.has_callback(args, kwargs) and _callbacks.c_callee(fn) and \
                _rules.vjp_rules(fn) is None and not can_recurse(self, fn, *args, **kwargs):
            return True  # C code that calls back into Python: see _callbacks.call_guarded
        if fn is operator.setitem:
            return self._writes(*args)
        if fn is setattr or (fn is _OBJECT_SETATTR and len(args) == 3 and not kwargs):
            # (object.__setattr__: how a frozen dataclass's __init__ stores its fields)
            return self._carries(args[2]) and not isinstance(args[2], (Tagged,))
        if args and type(fn) in METHOD_KINDS:
            spelled = spelled_store(fn, args)
            if spelled is not None:
                method, rest = spelled
                if rest and getattr(method, "__name__", None) in EXTENDS and \
                        _containers.fed(rest[0]) and id(method) not in ARRAY_WRITE_IDS:
                    return True  # L.extend(x * t for t in ts): its items stored as they are
                return spelled_is_primitive(self, spelled, kwargs, self._carries)
        if self.tape:
            target = _written_array(fn, args, kwargs)
            if target is not None and self._holds(target):
                return True
        containers = [a for a in args if issubclass(type(a), _READ)]  # (no __class__ read)
        if id(fn) in CONSUMERS and any(map(python_iterable, args)):
            return True  # math.fsum(bag): the bag is iterated through the context
        if not containers:
            # an iterator or a dict's view consumed by a C function (math.fsum(x * k for k
            # in ks), np.fromiter(d.values())): its items may be differentiated values, which
            # the function would read natively; a function whose rules take them is ours even
            # where the tag machinery moves values through it (max(x * x for ...): see
            # _containers._consumes_with_rules)
            if _containers._consumes_with_rules(fn):
                return any(map(_containers._read_natively, args)) and \
                    not can_recurse(self, fn, *args, **kwargs)
            return self._consumed(fn, args) and not carries_tags(fn) and \
                id(fn) not in _ITERATORS and not isinstance(fn, _PYTHON_CODE) and \
                not can_recurse(self, fn, *args, **kwargs)
        if isinstance(fn, _PYTHON_CODE) and _sourceless(fn) and \
                not can_recurse(self, fn, *args, **kwargs) and any(map(self._carries, containers)):
            return True  # Python without source given a list of differentiated values: run
            # natively it would drop their derivatives (MissingRuleError says why)
        if type(fn) is _BuiltinMethod and isinstance(fn.__self__, CONTAINERS):
            return fn.__name__ in STORES and any(map(self._carries, containers))
        if id(fn) in _MOVING or constructs_container(fn):
            return any(map(self._carries, containers))
        if id(fn) in _ITERATORS or fn in (operator.add, operator.iadd, operator.mul,
                                          operator.imul, operator.concat):
            if fn is operator.iadd and type(args[0]) is list:  # L += [v]: stored as it is
                return self._carries(args[1]) or _containers.fed(args[1])  # (L += genexpr)
            if fn is not operator.concat and operator_reads_arrays(fn, args):
                # np.ones(3) + [s]: NumPy reads the list as an array (list concatenation and
                # repetition are for lists alone, and np.int64(2) * [s]: the core repeats it)
                return any(map(self._carries, containers))
            return fn is itertools.accumulate and any(map(self._carries, containers))
        fn = _public(fn)
        if _rules.vjp_rules(fn) is not None or fn is np.copyto:
            return any(map(self._carries, containers))
        if carries_tags(fn) or isinstance(fn, _PYTHON_CODE) or \
                isinstance(getattr(type(fn), "__call__", None), types.FunctionType):
            return False
        # a C function given differentiated values inside a list (np.block, np.select): it
        # would read them natively, dropping the derivative -- a rule or MissingRuleError
        return any(map(self._carries, containers)) and not can_recurse(self, fn, *args,
                                                                        **kwargs)

    def _writes(self, container: Any, index: Any, value: Any) -> bool:
        """Whether ``container[index] = value`` is this context's: a differentiated value
        stored, or a write into an array that is differentiated or written before."""
        if type(container) is dict or (isinstance(container, dict) and _dict_storing(container)):
            # d[x] = v: a key read back by iterating d has its node (an OrderedDict's too)
            return self._carries(value) or self._carries(index)
        if type(container) is list or _dict_storing(container):
            # (L[:] = genexpr: its items, stored as they are)
            return self._carries(value) or (type(index) is slice and _containers.fed(value))
        if isinstance(container, np.ndarray):
            return self._carries(value) or self._holds(container)
        if type(container) is np.flatiter:
            return self._carries(value) or (
                bool(self.versions) and self._array_node(container.base, None) is not None)
        return False

    # -- recording -----------------------------------------------------------------------------
    def execute(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        if type(fn) in RESTATABLE:
            called = restated(fn, args)
            if called is not None:
                return self.overdub(called[0], *called[1], **kwargs)
        if given_out(fn, args):  # np.sin(a, r), np.cumsum(a, 0, None, r): r is its out=
            fn, args, kwargs = out_as_keyword(fn, args, kwargs)
        if type(fn) is _LRU_CACHE or type(fn) is types.MethodType:
            at = _callbacks.native_holder(self, fn, args, kwargs, self._mine)
            if at is not None:  # lru_cache(f)(Params(x)): MissingRuleError (see native_holder)
                return _callbacks.read_natively(self, fn, args, kwargs, at, "reverse",
                                                self.fallback)
        if fn is setattr and part_write(fn, args):
            return self.overdub(set_part, *args)
        if fn is setattr and len(args) == 3 and args[1] == "shape" and \
                type(_innermost(args[0])) is np.ndarray:
            return self._set_shape(args[0], args[2])
        kind = type(fn)
        if kind is types.FunctionType or kind is types.MethodType:
            func = fn if kind is types.FunctionType else fn.__func__
            found = self._specs.get(id(func))
            if found is not None and found[0] is func and found[1] is not None:
                try:
                    if kind is types.FunctionType:
                        return found[1](self, *args, **kwargs)
                    return found[1](self, fn.__self__, *args, **kwargs)
                except TypeError as exc:
                    if exc.__traceback__ is not None and exc.__traceback__.tb_next is None:
                        _binding_error(fn, args, kwargs)  # raised by the call: say it as fn
                    raise
            if kind is types.FunctionType and inert_library_call(fn, args, kwargs):
                return self.fallback(fn, *args, **kwargs)
        if fn is operator.getitem and len(args) == 2 and isinstance(args[0], dict) and \
                self._keyed_here(args[1]):
            if made_here(self.keys_written, args[0], args[1]):
                return self.fallback(fn, *args)
            return by_differentiated_key(self.fallback(fn, *args), self._carries, "reverse",
                                         self)
        if not self.nested and not kwargs and not (
                args and type(args[0]) is Tagged and type(args[0].value) is np.ndarray
                and fn is not operator.getitem):  # (array code: none of these paths is its)
            if self.second:
                out = self._second_step(fn, args)
                if out is not _NOT_SIMPLE:
                    return out
            out = self._scalar_step(fn, args)
            if out is not _NOT_SIMPLE:
                return out
        # (a dict's method, d.get(k): after the paths above, none of which is a method's;
        # keyed_read's own test of the name first, for the operators, all method kinds)
        keyed = keyed_read(fn, args) if type(fn) in METHOD_KINDS and \
            fn.__name__ in _KEYED_READS else None
        if keyed is not None and self._keyed_here(keyed[1]):
            if made_here(self.keys_written, keyed[0], keyed[1]):
                return self.fallback(fn, *args, **kwargs)
            return by_differentiated_key(self.fallback(fn, *args, **kwargs), self._carries,
                                         "reverse", self)
        at = _callbacks.native_holder(self, fn, args, kwargs, self._mine)
        if at is not None:  # (never a silent zero: see _held)
            return _callbacks.read_natively(self, fn, args, kwargs, at, "reverse", self.fallback)
        if fn is getattr:  # x.ndim: _general's answer at once (no plan, never a callback's)
            return self._attribute(*args)
        if not self.nested and not self.versions:
            plan = _PLANS.get(id(fn))
            if plan is None or plan.fn is not fn or plan.version != _rules.version:
                plan = _plan(fn)
            if plan.simple:
                out = self._simple_call(fn, plan, args, kwargs)
                if out is not _NOT_SIMPLE:
                    return out
        return self._general(fn, args, kwargs)

    def _second_step(self, fn: Any, args: tuple[Any, ...]) -> Any:
        """Float arithmetic and elementwise functions of floats on a tape of ``hvp``
        (``second``): one ``_Second`` record, the operation's partials and second partials by
        its declared shape or declared derivatives; else ``_NOT_SIMPLE`` (an entry with the
        operation's function and values, as recorded for every other call)."""
        ref = self._ref
        if len(args) == 2:
            found = _SECOND2.get(id(fn))
            if found is None or found[0] is not fn:
                return _NOT_SIMPLE
            a, b = args
            na = nb = None
            if type(a) is Tagged:
                if a.owner is not ref:
                    return _NOT_SIMPLE
                na, a = a.meta, a.value
            if type(b) is Tagged:
                if b.owner is not ref:
                    return _NOT_SIMPLE
                nb, b = b.meta, b.value
            if (na is None and nb is None) or type(a) not in _REAL_TYPES or \
                    type(b) not in _REAL_TYPES or (b == 0 and found[1] is _rules.QUOTIENT):
                return _NOT_SIMPLE
            out = fn(a, b)
            if type(out) not in _REAL_TYPES:
                return _NOT_SIMPLE
            local = shape_second(found[1], a, b, out, na is not None, nb is not None)
            if local is None:
                return _NOT_SIMPLE
            pa, pb, haa, hab, hbb = local
            curvature = ((0, 0, haa) if haa else ()) + ((0, 1, hab) if hab else ()) + \
                ((1, 1, hbb) if hbb else ())
            node = len(self.tape)
            self.tape.append((_Second, node, curvature, na, pa, nb, pb))
            return Tagged(out, node, ref, self._label)
        if len(args) == 1:
            found = _SECOND_CALLS.get(id(fn))
            if found is not None:
                first, second = found
            elif fn is operator.neg or fn is operator.pos:
                first, second = _CALLS.get(id(fn)), None  # (None: the user's rule for it)
            else:
                return _NOT_SIMPLE
            a = args[0]
            if first is None or type(a) is not Tagged or a.owner is not ref or \
                    type(a.value) not in _REAL_TYPES:
                return _NOT_SIMPLE
            va = a.value
            out = fn(va)
            if type(out) not in _REAL_TYPES:
                return _NOT_SIMPLE
            p = first(va, out)
            if p is None:
                return _NOT_SIMPLE
            h = 0.0 if second is None else second(va, out)
            node = len(self.tape)
            self.tape.append((_Second, node, (0, 0, h) if h else (), a.meta, p))
            return Tagged(out, node, ref, self._label)
        return _NOT_SIMPLE

    def _general(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """What ``execute`` does for a call that no fast path took."""
        if (fn is operator.is_ or fn is operator.is_not or fn is id) and not kwargs:
            # identity: of the objects themselves (the plain values a C function is given are
            # copies of a list or tuple)
            return fn(*[_innermost(a) for a in args])
        if type(fn) in _ENTRY_KINDS and self._entry_given_nodes(fn, args, kwargs):
            return self._entry_call(fn, args, kwargs)
        if id(fn) in _recording._SERIALISERS:  # (before its file is taken for an iterator)
            _recording._refuse_serialising(self, fn, args, kwargs)
        if fn is next and len(args) == 2 and not kwargs:
            # next(it, x): the iterator's next item as next(it) gives it, else the default as
            # it is (the tag machinery would give it back without its derivative)
            item = self.overdub(next, args[0], _EXHAUSTED)
            return args[1] if item is _EXHAUSTED else item
        if id(fn) in STEPPED and stepped_builtin(fn, args, kwargs):
            return run_stepped(self, fn, args, kwargs)  # sum(rows, []), max(xs, default=x)
        if fn is types.SimpleNamespace and not args:
            # SimpleNamespace(v=[x]): an empty namespace, then ns.v = [x] as this context
            # stores it (the core's own setattr would keep the list's members aside, where this
            # context's reads do not look)
            namespace = fn()
            for name, value in kwargs.items():
                self.overdub(setattr, namespace, name, value)
            return namespace
        if type(fn) is types.MethodWrapperType and type(fn.__self__) is np.flatiter and \
                fn.__name__ == "__setitem__" and len(args) == 2:
            return self._setitem(operator.setitem, fn.__self__, *args)  # a.flat.__setitem__
        if self.versions and any(type(a) is np.flatiter for a in args):
            written = next((a for a in args if type(a) is np.flatiter
                            and self._array_node(a.base, None) is not None), None)
            if written is not None:
                return self._written_flat(fn, written, args)
        if fn is operator.setitem or fn is operator.delitem:  # (never given a callback to
            return self._setitem(fn, *args)  # call: the operator module is never guarded)
        if fn is operator.getitem and len(args) == 2 and \
                type(args[0]) is types.MappingProxyType:
            return self.fallback(fn, *args)  # proxy[k]: the item its dict holds, as it is
        if type(fn) is _SORT_KEY and len(args) == 1:
            # functools.cmp_to_key(cmp)(x): a sort key holding x as it is (its .obj is x),
            # compared by cmp through the context (the core's cmp_to_key)
            return fn(args[0])
        if args and isinstance(args[0], dict) and id(fn) in _KEYS_ITERATED:
            args = (list(dict.keys(args[0])), *args[1:])  # sum(d): its keys, as Python's
        if id(fn) in CONSUMERS:
            args = tuple(list(iterate_through(self, a)) if python_iterable(a) else a
                         for a in args)
        known = _ROUTED.get(id(fn))  # (after those: a later call takes the same arguments)
        if known is not None and known[0] is fn and known[1] == _rules.version:
            out = self._routed(fn, known, args, kwargs)
            if out is not _NOT_SIMPLE:
                return out
        if _callbacks.has_callback(args, kwargs) and _callbacks.c_callee(fn) and \
                _rules.vjp_rules(fn) is None and not any(map(self._carries, args)):
            return _callbacks.call_guarded(self, fn, args, kwargs, self._carries, "reverse",
                                           self._run)
        if id(fn) in _BINARY_OPERATIONS:
            for method, operands in _user_operator(fn, args):
                out = recurse(self, method, *operands)
                if out is not NotImplemented:
                    return out
        method = _rules.method_with_rules(fn, _rules.vjp_rules)
        if method is not None:  # a.dot(y) is np.ndarray.dot(a, y), as Python runs it
            return self.execute(method[0], method[1], *args, **kwargs)
        replacement = _replacement(fn)
        if replacement is not None:
            return recurse(self, replacement, *args, **kwargs)
        if fn is setattr:
            return self._setattr(*args)
        if fn is _OBJECT_SETATTR and len(args) == 3 and not kwargs:
            return self._setattr(*args, raw=True)
        if id(fn) in _ITERATORS:
            return self._iterate(fn, args, kwargs)
        if type(fn) in METHOD_KINDS:
            out = self._method_store(fn, args, kwargs)
            if out is not _NOT_SIMPLE:
                return out
        if id(fn) in _MOVING:
            for a in args:
                if isinstance(a, list):
                    self._note_store(a)
            if self.nested and args and type(args[0]) is list and _levels_apart(args[0]):
                # (heapify(h) of members an enclosing derivative keeps aside by position:
                # held as they read, with its tags, so that moving them moves those too)
                target = args[0]
                target[:] = [self.fallback(operator.getitem, target, i)
                             for i in range(len(target))]
            out = fn(*args, **kwargs)
            if type(out) is collections.deque:
                self._note_store(out)  # (a deque's copy holds the values as they are)
            return out
        if fn is dict or constructs_container(fn):  # dict(a=v), deque([v]): the values
            return self._construct(fn, args, kwargs)  # stored as they are
        if self._consumed(fn, args) and not (fn is operator.iadd and type(args[0]) is list):
            return self._consume(_public(fn), args, kwargs)  # (L += genexpr: _inplace's)
        if (fn is operator.or_ or fn is operator.ior) and len(args) == 2 and \
                type(args[0]) is dict and type(args[1]) is dict:
            # d | e, d |= e: a dict store, the values stored as they are, those the core keeps
            # aside (an object's namespace, o.__dict__ | {}) read with them (see _store)
            out = fn(self._with_kept(args[0]) if fn is operator.or_ else args[0],
                     self._with_kept(args[1]))
            self._note_store(out)
            return out
        if id(fn) in _INPLACE_IDS:  # (by identity: a callee may be unhashable)
            out = self._inplace(fn, args)
            if out is not _NOT_SIMPLE:
                return out
        if fn is np.copyto:
            return self._copyto(*args, **kwargs)
        if kwargs.get("out") is not None:
            return self._write_out(fn, args, kwargs)
        public = _public(fn)
        implementation = _implementation(public)
        if implementation is not None:
            return recurse(self, implementation, *args, **kwargs)
        if isinstance(fn, _PYTHON_CODE) and _sourceless(fn) and _rules.vjp_rules(fn) is None \
                and not can_recurse(self, fn, *args, **kwargs):
            held = [i for i, a in enumerate(args) if self._holds_kept(a)]
            if held:  # (an object holding differentiated values: see _indirect)
                raise _rules.missing(fn, held[0], "reverse", type(self).__name__)
        _remember_route(fn, public)
        return self._call(public, args, kwargs)

    def _routed(self, fn: Any, known: tuple[Any, ...], args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
        """A library function ``_general`` found ``_call`` for before (``known``, its
        ``_ROUTED`` entry): the tests about its arguments made again (the callback test only
        where ``fn`` may call back: guarded), else ``_NOT_SIMPLE``."""
        if known[3] and _callbacks.has_callback(args, kwargs) and \
                not any(map(self._carries, args)):
            return _callbacks.call_guarded(self, fn, args, kwargs, self._carries, "reverse",
                                           self._run)
        if kwargs.get("out") is None and not self._consumed(fn, args):
            return self._call(known[2], args, kwargs)
        return _NOT_SIMPLE

    def _method_store(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A C method that stores into a container (``d.setdefault(k, x)``), or a store spelled
        as a method call (``list.append(l, x)``, ``d.__setitem__(k, x)``, ``a.__iadd__(b)``);
        else ``_NOT_SIMPLE``."""
        spelled = spelled_store(fn, args)
        if spelled is not None:
            method, rest = spelled
            if id(method) in ARRAY_WRITE_IDS:
                return self.execute(method, *rest, **kwargs)
            return self._store(method, rest, kwargs)
        if type(fn) is _BuiltinMethod and isinstance(fn.__self__, CONTAINERS):
            return self._store(fn, args, kwargs)
        return _NOT_SIMPLE

    def _inplace(self, fn: Any, args: tuple[Any, ...]) -> Any:
        """``a += b`` and friends: written into an array (versioned) or a list (its values
        stored as they are); else ``_NOT_SIMPLE`` (the operator's rule)."""
        target = _innermost(args[0])
        if isinstance(target, np.ndarray):
            return self._write_inplace(fn, *args)
        if type(target) is list and fn is operator.iadd:
            other = _innermost(args[1])
            if isinstance(other, (np.ndarray, np.generic)) or _arrays.is_foreign_array(other):
                return self.execute(operator.add, *args)  # NumPy's __radd__ answers first
            self._note_store(target)  # L += [v]: extended, the values stored as they are
            target += self._fed_items(args[1]) if _containers.fed(args[1]) else args[1]
            return target
        if _arrays.is_foreign_array(target):
            raise _arrays.write_error(target, "reverse")
        return _NOT_SIMPLE

    def _read(self, container: Tagged, index: int) -> Any:
        """``x[i]`` of a differentiated array, for specialised code: a scalar read of a float
        array recorded as in ``execute``, anything else through the context."""
        array = container.value
        if container.owner is self._ref and type(array) is np.ndarray:
            out = array[index]
            if type(out) is np.float64:
                node = len(self.tape)
                self.tape.append((_ScalarRead, node, self._node(container), index,
                                  _placeholder(array)))
                return Tagged(out, node, self._ref, self._label)
        if self.is_primitive(operator.getitem, container, index):
            return self.execute(operator.getitem, container, index)
        return overdub(self, operator.getitem, container, index)

    def _written_flat(self, fn: Any, it: np.flatiter, args: tuple[Any, ...]) -> Any:
        """A call given ``it``, NumPy's flat iterator of an array written (differentiated)
        since ``it`` was taken, which would read the array's memory natively, plain: read
        by index through the array (``it[i]``, ``np.ravel(a)[i]``); anything else refused."""
        if fn is operator.getitem and len(args) == 2 and args[0] is it:
            return self.overdub(operator.getitem, self.overdub(np.ravel, it.base), args[1])
        raise _rules.MissingRuleError(
            f"no reverse-mode derivative rule for {_callbacks.describe(fn)} given a.flat of an "
            f"array written under {type(self).__name__} after the iterator was taken: it "
            f"would read the array's values natively, without their derivatives; index it "
            f"(it[i]) or take a.flat after the writes")

    def _run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Call ``fn`` on plain values: through the enclosing context if there is one."""
        if self.nested:
            if fn is sum and args and type(args[0]) is np.ndarray and not kwargs:
                return summed_through(self.fallback, *args)  # (see summed_through)
            return self.fallback(fn, *args, **kwargs)
        return fn(*args, **kwargs)

    def _plain(self, x: Any) -> Any:
        """``x`` without this context's tags (a list or tuple rebuilt, a named tuple as
        itself; another sequence -- a deque, a subclass -- as a plain list or tuple: what a C
        function reads of it)."""
        if type(x) is Tagged:
            return x.value if x.owner is self._ref else x
        if type(x) in (list, tuple) and x:
            items = [self.fallback(operator.getitem, x, i) for i in range(len(x))] \
                if self.nested and _levels_apart(x) else x
            return type(x)([self._plain(v) for v in items])
        if isinstance(x, SEQUENCES) and self._carries(x):
            items = [self._plain(v) for v in x]
            if hasattr(x, "_fields"):
                return type(x)(*items)
            return tuple(items) if isinstance(x, tuple) else items
        return x

    def _inputs(self, x: Any) -> Any:
        if isinstance(x, SEQUENCES) and x:
            nodes = [self._inputs(v) for v in x]
            return nodes if any(n is not None for n in nodes) else None
        return self._node(x)

    def _differentiated_array(self, x: Any) -> bool:
        plain = _innermost(x)
        return isinstance(plain, np.ndarray) and plain.ndim > 0 and self._node(x) is not None

    # primitive calls recorded on the tape: see _recording
    _call = _recording._call
    _through_jvp_rule = _recording._through_jvp_rule
    _simple_call = _recording._simple_call
    _stacked_numbers = _recording._stacked_numbers
    _record = _recording._record
    _hold = _recording._hold

    # writes into arrays, versioned: see _mutation
    _track = _mutation._track
    _save_before_write = _mutation._save_before_write
    _save_all = _mutation._save_all
    _kept = _mutation._kept
    _note_views = _mutation._note_views
    _root_node = _mutation._root_node
    _holds = _mutation._holds
    _commit = _mutation._commit
    _bump = _mutation._bump
    _setitem = _mutation._setitem
    _write_item = _mutation._write_item
    _write_inplace = _mutation._write_inplace
    _write_out = _mutation._write_out
    _copyto = _mutation._copyto
    _set_shape = _mutation._set_shape

    # values stored into containers and objects, and iteration: see _containers
    _store = _containers._store
    _scalar_step = _scalars._scalar_step
    _scalar_read = _scalars._scalar_read
    _arithmetic = _scalars._arithmetic
    _construct = _containers._construct
    _setattr = _containers._setattr
    _note_store = _containers._note_store
    _release_stores = _containers._release_stores
    _cleaned = _containers._cleaned
    _consumed = _containers._consumed
    _consume = _containers._consume
    _guard = _containers._guard
    _iterate = _containers._iterate
    _fed_items = _containers._fed_items
    _with_kept = _containers._with_kept
    _elements = _containers._elements
    _revealed = _containers._revealed
    _textual = _containers._textual
    _attribute = _containers._attribute
