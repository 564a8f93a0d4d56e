"""The forward-mode context (see :mod:`overdub_ad.forward`)."""

from __future__ import annotations

import collections
import functools
import itertools
import operator
import types
from collections.abc import Sequence
from typing import Any

import numpy as np

from overdub import (Context, Tagged, can_recurse, has_metadata, keeps_heap_metadata,
                     metadata, recurse, tag, untag)

from .. import _arrays, _callbacks, _rules
from . import _scalars
from .._array_methods import _Flat, _METHODS, _REPLACEMENTS
from .._arraylike import (one_array, operator_reads_arrays, SEQUENCE_FUNCTIONS, stackable,
                          takes_arrays)
from .._custom import custom_jvp, refuse_hidden, RESTATABLE, restated
from .._stores import (ARRAY_WRITE_IDS, constructs_container, CONTAINERS, EXTENDS, KEYED,
                       METHOD_KINDS, SEQUENCES, spelled_is_primitive, spelled_store)
from .._pytree import flatten, is_node, reveal_node, unflatten
from .._shared import (_ATTRIBUTES, _bind, _BUILTIN_METHOD, by_differentiated_key, derivative_entry,
                       inert_library_call, given_out, out_as_keyword, summed_through,
                       namespace_of, part_write, set_part, unfollowed_write,
                       key_holds, made_here, plain_key, run_stepped, STEPPED, stepped_builtin,
                       CONSUMERS, _FLOAT_DTYPES, _hides_arrays, _holds_stored, _INDIFFERENT,
                       _INERT_VALUES, _innermost, _INPLACE,
                       _is_iterator, _is_mover, iterate_through, iterated_at, _ITERATING,
                       keyed_read,
                       _LIST_WRITERS, _METHOD_DESCRIPTOR, _method_of, _no_derivative_lost,
                       python_attribute,
                       _numeric, _OPERATORS, _public, _PYTHON_CODE,
                       python_iterable, _rebuild, REORDERING, _RESTATED, _restated,
                       _REVEALABLE,
                       _reverse_rules_only, _sequence_or_iterator, _sourceless, _STRUCTURAL,
                       _untag_tree, _user_operator, _zero)
from ..rules._common import as_array_tangent
from ._tangents import (_ArrayTangents, _batch_of, _copyto, _dtype, _exactly_zero,
                        _foreign_method, _inplace_target, _masked, _masked_call, _reshapes,
                        _tolist)

# What a C function may read differentiated values out of: sequences (a subclass, a named
# tuple, a deque too) and a dict's values and items (of a dict subclass, which the core keeps
# no metadata of, they hold the tagged values themselves: see ForwardContext._store_as_is)
_READ: tuple[type[Any], ...] = (*SEQUENCES, type({}.values()), type({}.items()))
# The stores of a list or dict the core keeps the metadata of (item assignment aside)
_CORE_STORES: dict[type[Any], frozenset[str]] = {
    list: frozenset({"append", "insert", "extend"}), dict: frozenset({"setdefault", "update"})}


def _spelled_kind(fn: Any) -> bool:
    """Whether ``fn`` (of a kind in :data:`METHOD_KINDS`) may spell a store other than those
    of a list or a dict the core keeps the metadata of (``lst.append``, ``d.update``): a
    method descriptor or wrapper, or a method bound to another container."""
    if type(fn) is not _BUILTIN_METHOD:
        return True
    owner = fn.__self__
    return type(owner) not in (list, dict) and isinstance(owner, CONTAINERS)


def _base_write(container: Any) -> Any:
    """The C item assignment of ``container`` (a list, deque or dict subclass): its own, or
    its base class's where it has one in Python."""
    for base in (collections.deque, list, dict):
        if isinstance(container, base):
            own = type(container).__setitem__
            return base.__setitem__ if isinstance(own, types.FunctionType) else own
    return operator.setitem


def _enclosing_within(x: Any) -> bool:
    """Whether ``x``, or a member of a list or tuple ``x``, is a value an enclosing derivative
    tagged (a list given it is read with its members' tangents of every level, as the core
    holds them: read natively here, it would lose that derivative's)."""
    return type(x) is Tagged or (type(x) in (list, tuple) and Tagged in map(type, x))


def _revealable(x: Any) -> bool:
    """Whether ``x`` is a list or tuple with members (numbers, arrays) whose tangents the core
    may keep aside: stored into the heap, it stores them plain (see ForwardContext._reveal),
    or as an enclosing context stores them (tagged by it, under a gradient)."""
    return isinstance(x, (list, tuple)) and any(
        type(e) is Tagged or isinstance(e, _REVEALABLE) for e in x)


def _given_trees(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a list, tuple or dict, or a named tuple, dataclass or registered pytree node,
    is among the arguments."""
    return any(type(a) in _TREES or is_node(a) for a in args) or \
        any(type(v) in _TREES or is_node(v) for v in kwargs.values())


_LRU_CACHE = _rules._LRU_CACHE  # functools.lru_cache's C wrapper (see _callbacks.native_holder)
_TREES = frozenset((list, tuple, dict))


def _read_or_iterated(x: Any) -> bool:
    return _sequence_or_iterator(x) or issubclass(type(x), _READ)  # (no __class__ read)


_FLAT_SETITEM = np.flatiter.__setitem__


def _flat_store(fn: Any, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """``(it, key, value)`` for ``it.__setitem__(key, value)`` or
    ``np.flatiter.__setitem__(it, key, value)`` spelled as a call (``it`` the flat iterator
    ``a.flat``: NumPy's, or the :class:`_Flat` of a differentiated array): the store
    ``it[key] = value`` it is; None for any other call."""
    if type(fn) is types.MethodWrapperType and type(fn.__self__) is np.flatiter:
        return (fn.__self__, *args) if fn.__name__ == "__setitem__" and len(args) == 2 \
            else None
    if fn is _FLAT_SETITEM and len(args) == 3 and type(args[0]) in (np.flatiter, _Flat):
        return args
    return None


def _flat_given(fn: Any, args: tuple[Any, ...]) -> bool:
    """Whether a call of C code ``fn`` may be given NumPy's flat iterator (a cheap test
    first; Python code is run through the context, which sees what it does with it)."""
    return (np.flatiter in map(type, args)
            or type(getattr(fn, "__self__", None)) is np.flatiter) and \
        not isinstance(fn, _PYTHON_CODE)


# Numbers (not arrays nor tuples): outputs whose tangent leaves out exactly-zero terms
_NUMBERS = frozenset((float, int, complex, np.float64, np.float32, np.float16, np.longdouble,
                      np.complex128, np.complex64, np.int64, np.int32))
_COMPLEX = frozenset((complex, np.complex128, np.complex64))

_SET_STORES = frozenset({"add", "update", "__ior__", "symmetric_difference_update"})
# The methods of a dict that store items (item assignment aside): into a module's globals,
# made one item assignment at a time (ForwardContext._update_globals)
_GLOBAL_UPDATES = frozenset({"update", "setdefault"})


def _stored_as_is(container: Any) -> bool:
    """A container of :data:`CONTAINERS` other than a list or dict itself (a subclass, a
    deque) whose item assignment is C code: the core keeps no metadata of what it holds for
    every native read of it (``od.values()``, ``np.sum(deque)``), so differentiated values
    are stored in it as they are."""
    return type(container) not in (list, dict) and isinstance(container, CONTAINERS) and \
        not isinstance(getattr(type(container), "__setitem__", None), types.FunctionType)


def _target_holder(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The array an in-place call writes as the code named it (``out=``, or the first operand
    of ``v //= c``, a view perhaps), tag included, for :meth:`ForwardContext._write_constant`."""
    out_arg = kwargs.get("out")
    if out_arg is None and id(fn) in _INPLACE and args:
        return args[0]
    return out_arg[0] if type(out_arg) is tuple and len(out_arg) == 1 else out_arg


def _broadcast_into(out_arg: Any, operands: Sequence[Any]) -> bool:
    """Whether a ufunc's ``out=`` array (or any of its tuple's) is larger than its operands
    broadcast: NumPy broadcast the result into it."""
    if out_arg is None:
        return False
    natural = np.broadcast_shapes(*(np.shape(_innermost(p)) for p in operands))
    return any(a is not None and np.shape(_innermost(a)) != natural
               for a in (out_arg if type(out_arg) is tuple else (out_arg,)))


# itertools functions that compute with what they are given -- count adds its step to its
# start, accumulate adds its items -- which the core runs through the context (each addition
# the context's, with its rule): run natively as movers, their items lost their tangents
_COUNTING = frozenset(map(id, (itertools.count, itertools.accumulate)))


class ForwardContext(Context):
    """The forward-mode context: one instance per ``jvp`` call (its tags are its own).

    Attributes: ``arrays`` (:class:`_ArrayTangents`, tangents of plain arrays changed in place),
    ``lists`` (ids of lists that the core holds differentiated members of) and ``stores``
    (containers that hold tagged values themselves).
    """

    def __init__(self) -> None:
        super().__init__()
        self.arrays = _ArrayTangents(self.fallback)
        # The lists the core keeps members' tangents of (read back through it): id -> the list,
        # kept alive for the run so that a new list never takes a dead one's id
        self.lists: dict[int, Any] = {}
        # Containers holding this context's tagged values as they are (see _store_as_is):
        # id -> container, given plain values back when the run ends (_release_stores)
        self.stores: dict[int, Any] = {}
        # Global variables holding this context's tagged values as they are (see
        # _store_global): id(namespace) -> (namespace, names), plain again as the run ends
        self.globals_stored: dict[int, tuple[dict[str, Any], set[str]]] = {}
        # (id(dict), plain key) of the items stored under a differentiated key (see made_here)
        self.keys_written: set[tuple[int, Any]] = set()
        # whether code run here read an ``a.flat`` (see _written_flat_given)
        self.flats = False
        # whether an enclosing context sees what this one computes (then every operation
        # runs through it, and the forward-partials route is off): set by the API
        self.nested = True
        # where the dual route runs Python helpers called with this context's numbers (see
        # _dual.helper_call): (helper_arguments, helper_call, run_helper, NOT_RUN, batch),
        # set by the API
        self.helpers: tuple[Any, Any, Any, Any, tuple[int, ...]] | None = None

    def metadata_type(self, value_type: type) -> Any:
        if _arrays.is_numeric_type(value_type):
            return object  # a tangent: a number, an array, or another context's Tagged
        return None

    native_use = _callbacks.refuse_native_use  # (a derivative is never dropped silently)
    escape_hint = _callbacks.escape_hint

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

    def _carries_within(self, x: Any, seen: set[int] | None = None) -> bool:
        """Whether ``x`` or, for sequences (lists, tuples, deques, their subclasses, a dict's
        values and items), one of its elements has a tangent, at any depth (``seen``: the
        sequences on the way, for one that holds itself)."""
        if self._carries(x):
            return True
        if type(x) is list and id(x) in self.lists:
            return True
        if type(x) in (list, tuple) or isinstance(x, _READ):
            if seen is None:
                seen = set()
            elif id(x) in seen:
                return False
            seen.add(id(x))
            if any(self._carries_within(e, seen) for e in x):
                return True
            # a list or tuple stored into the heap (``d[k] = (x, y)``), or inside one stored
            # there (``rows.append([x, y])``: the core keeps the members' metadata aside two
            # levels down), comes back with its members plain: revealed, noted as a list (one
            # of numbers or arrays: a shape or axes cannot hold a derivative)
            if self._stored_members(x):
                self.lists[id(x)] = x
                return True
        return False

    def _keyed(self, key: Any) -> bool:
        """Whether the dict key ``key`` holds a value with a tangent here, as its hash reads
        it (in a tuple, a named tuple, a frozenset, a frozen dataclass: see key_holds); an
        item read under it must pass ``by_differentiated_key``."""
        return self._carries_within(key) or key_holds(self, key, self._carries)

    def _stored_members(self, x: Any) -> bool:
        """Whether the list or tuple ``x`` has members whose tangents the core keeps aside
        (see :meth:`_reveal`)."""
        return self._kept_aside(x) and any(map(self._carries, self._reveal(x)))

    def _kept_aside(self, x: Any) -> bool:
        """Whether ``x`` is a list or tuple of numbers or arrays that the core keeps metadata
        of members of (to be read again through it: :meth:`_reveal`)."""
        return _revealable(x) and keeps_heap_metadata(self, x)

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
        if type(x) in (list, tuple) or isinstance(x, _READ):
            # (a list inside one NumPy reads, ``np.array(rows)``, may hold its members' tangents
            # aside too: its own, not its container's, see _carries_within)
            items = self._reveal(x) if id(x) in self.lists or self._kept_aside(x) else x
            parts = [self._split(e) for e in items]
            if all(t is None for _, t in parts):
                return x, None
            if hasattr(x, "_fields"):  # a named tuple as itself
                return type(x)(*[p for p, _ in parts]), type(x)(*[t for _, t in parts])
            # (another sequence as what a C function reads of it: a list or a tuple)
            kind = type(x) if type(x) in (list, tuple) else \
                tuple if isinstance(x, tuple) else list
            return kind(p for p, _ in parts), kind(t for _, t in parts)
        return x, None

    def _reveal(self, items: list[Any] | tuple[Any, ...]) -> Any:
        """The list (tuple) with the metadata the core keeps for its members re-attached (the
        core stores plain values in lists and re-tags them when they are read back)."""
        return self.fallback(operator.getitem, items, slice(None))

    # -- the step ------------------------------------------------------------------------------
    def _container_method(self, fn: Any, args: tuple[Any, ...]) -> bool:
        """Whether a method of a list or dict is this context's (and lists that receive
        differentiated members are noted)."""
        receiver = fn.__self__
        if type(receiver) is dict and fn.__name__ in _GLOBAL_UPDATES and \
                namespace_of(receiver) is not None:
            return True  # globals().update(name=x): see _update_globals
        if type(receiver) is list and fn.__name__ == "extend" and args and \
                self._differentiated_array(args[0]):
            return True  # extended by the array's differentiated rows
        if type(receiver) is list and fn.__name__ in _LIST_WRITERS and (
                any(map(self._carries_within, args)) or any(map(_enclosing_within, args))
                or (fn.__name__ == "extend" and type(args[0]) not in (list, tuple))):
            self.lists[id(receiver)] = receiver
        if type(receiver) is dict and fn.__name__ in ("get", "pop") and len(args) == 2 \
                and self._carries(args[1]):
            return True  # a differentiated default, which the core would strip
        if args and (keyed_read(fn, args) is not None
                     or (type(receiver) is dict and fn.__name__ == "setdefault")) and \
                self._keyed(args[0]):
            return True  # memo.get(x): see by_differentiated_key; d.setdefault(x, v) stores
        # the core keeps the metadata of list and dict members; a copy is ours to make
        return fn.__name__ == "copy" and id(receiver) in self.lists

    def is_primitive(self, fn: Any, /, *args: Any, **kwargs: Any) -> bool:
        if id(fn) in _scalars.FAST and not kwargs:  # (float arithmetic: see execute)
            for a in args:
                if type(a) is Tagged and a.owner() is self:
                    return True
        if type(fn) in RESTATABLE and restated(fn, args) is not None:
            return True  # np.sin.__call__(x), custom.__call__(x), a * q with q's class
            # overriding ufuncs: the call it amounts to (execute)
        if type(fn) is types.FunctionType and self.helpers is not None:
            given = self.helpers[0](fn, args, kwargs)
            if given is not None and self.helpers[1](self, given):
                return True  # rhs(x, y, p): its dual's (see execute)
        if given_out(fn, args):  # np.sin(a, r), np.cumsum(a, 0, None, r): r is its out=
            fn, args, kwargs = out_as_keyword(fn, args, kwargs)
        if fn is setattr and part_write(fn, args):  # z.real = v: an element write (set_part)
            return True
        if type(fn) is custom_jvp:  # its rule, for a tangent anywhere in its arguments' trees;
            # without one, a leaf (see _custom)
            return fn.jvp is not None or \
                any(map(self._carries, flatten(self._revealed((args, kwargs)))[0]))
        if fn is getattr and _callbacks.native_holder(self, fn, args, kwargs,
                                                      self._carries) is not None:
            return True  # obj.matrix, a property behind functools.lru_cache: see execute
        if fn is getattr:
            if len(args) > 1 and args[1] == "flat":
                self.flats = True
            return bool(args) and self._carries(args[0])
        if fn is setattr and _reshapes(self, args):
            return True  # a.shape = s reshapes the array in place: its tangent too
        if fn is setattr and len(args) == 3 and self._global_store(*args):
            return True  # mod.name = x: stored as it is (see _store_global)
        if fn is operator.getitem:
            return bool(args) and (self._carries(args[0]) or (
                len(args) == 2 and isinstance(args[0], dict) and self._keyed(args[1]))
                or (type(args[0]) is np.flatiter and self._written_flat(args[0])))
        if _callbacks.native_holder(self, fn, args, kwargs, self._carries) is not None:
            return True  # C code running Python natively on an object holding differentiated
            # values (math.fsum([obj]) calling obj.__float__, an lru_cache'd method): execute
        if fn is operator.setitem:
            return self._writes(args)
        if fn is operator.iadd and len(args) == 2 and type(args[0]) is list and \
                type(args[1]) in (list, tuple):  # L += items is L.extend(items) (an array's
            return self.is_primitive(args[0].extend, args[1])  # __radd__ answers first)
        if type(fn) in METHOD_KINDS and _spelled_kind(fn):
            spelled = spelled_store(fn, args)
            if spelled is not None:
                return spelled_is_primitive(self, spelled, kwargs, self._carries_within)
            flat = _flat_store(fn, args)
            if flat is not None:  # it.__setitem__(i, x), for it = a.flat
                return self._writes(flat)
        if self.flats and self.arrays and _flat_given(fn, args) and \
                self._written_flat_given(fn, args):
            return True  # anything else done with a flat iterator of a written array: refused
        if type(fn) is _BUILTIN_METHOD and type(fn.__self__) in (list, dict):
            return self._container_method(fn, args)
        if type(fn) is _BUILTIN_METHOD and type(fn.__self__) is set and \
                fn.__name__ in _SET_STORES and any(map(self._carries_within, args)):
            return True  # s.add((x, 1)): noted, to be given plain values back (see _move)
        if _rules._STANDINS and _rules.standin(fn, _rules.jvp_rules) is not None:
            return True  # a library function restated for differentiation (SciPy's solvers)
        direct = any(map(self._carries, args)) or any(map(self._carries, kwargs.values()))
        if not direct and inert_library_call(fn, args, kwargs):
            return True  # np.ones(3): called whole (see execute)
        if isinstance(fn, _PYTHON_CODE) and derivative_entry(fn) and \
                _given_trees(args, kwargs):
            return True  # grad(f)(m.params): the pytrees revealed first (see _entry_call)
        if not direct and isinstance(fn, _PYTHON_CODE):
            for a in args:  # (numbers, the common case, hold nothing: no call made for them)
                if type(a) not in _INERT_VALUES and _sourceless(fn) and \
                        _callbacks.holds_kept(self, a, self._carries) and \
                        self._sourceless(fn, args, kwargs):
                    return True  # Python without source given an object holding
                    # differentiated values (kept aside by the core: read natively, they are
                    # plain): MissingRuleError
        if not direct:
            if id(fn) in CONSUMERS and (any(map(python_iterable, args)) or
                                        any(map(_hides_arrays, args))):
                # math.fsum(bag): the bag is iterated through the context; math.fsum(s) of a
                # set (a C iterable other than a list or tuple): its items, each with its
                # tangent, given as a list (natively, fsum would add plain values)
                return True
            if fn is sum and self.arrays and args and _hides_arrays(args[0]):
                return True  # sum(d.values()): a plain array written in place among them
            if _callbacks.has_callback(args, kwargs) and _callbacks.c_callee(fn) and \
                    _rules.jvp_rules(fn) is None and not can_recurse(self, fn, *args, **kwargs):
                return True  # C code that calls back into Python: see _callbacks.call_guarded
            given = (*args, *kwargs.values()) if kwargs else args  # (range=(lo, hi) too)
            if not any(map(_read_or_iterated, given)) or (
                    id(fn) in _OPERATORS and not operator_reads_arrays(fn, args)):
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
                or _rules.is_nondifferentiable(fn) or fn is _tolist):
            return True
        if _rules.method_with_rules(fn, _rules.jvp_rules) is not None:
            return True  # model.energy(x), a.dot(y): the method's rules (see execute)
        if id(fn) in _INDIFFERENT or id(fn) in _STRUCTURAL:
            return False
        if id(fn) in _COUNTING:  # (given a differentiated array: its rows first, see _move)
            return any(map(self._differentiated_array, args))
        # Python code (recursed into, or run natively with its tags) vs a C function, which
        # needs a rule: MissingRuleError rather than a silently dropped derivative.
        if isinstance(fn, _PYTHON_CODE) or isinstance(getattr(type(fn), "__call__", None),
                                                     types.FunctionType):
            # (Python without source given a differentiated value, in a list too: run natively
            # it would drop the derivative)
            return (direct or any(map(self._carries_within, args))) and \
                self._sourceless(fn, args, kwargs)
        if constructs_container(fn):  # deque([x]): built here, to give plain values back
            return direct or any(map(self._carries_within, args))
        if _is_mover(fn):  # before can_recurse: map's shim would iterate a tagged array whole
            return direct or any(type(a) is list and id(a) in self.lists for a in args)
        return not can_recurse(self, fn, *args, **kwargs)

    def _spelled(self, spelled: tuple[Any, tuple[Any, ...]], kwargs: dict[str, Any]) -> Any:
        """A store spelled as a call of a C method, made as the store it is: into an array
        as ``a[i] = v`` (``a += b``); into a list or dict through the core, which keeps the
        metadata of their members; into another container as it is."""
        method, rest = spelled
        if id(method) in ARRAY_WRITE_IDS:
            return self.execute(method, *rest, **kwargs)
        owner, name = method.__self__, method.__name__
        if type(owner) in (list, dict):
            if name == "__setitem__":
                return self.overdub(operator.setitem, owner, *rest)
            if name in _CORE_STORES[type(owner)]:
                return self.overdub(getattr(owner, name), *rest, **kwargs)
        return self._store_as_is(method, rest, kwargs)

    def _store_as_is(self, method: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``method`` (a C method bound to a container) stores the values as they are, tags
        and all (see :func:`_stored_as_is`): a key plain (it is hashed), a differentiated
        array given to ``extend`` as its rows, each with its tangent."""
        name = method.__name__
        if args and name in KEYED:
            # (a dict's key as it is: its tangent is given back by iterating the dict, and
            # the key made plain as the run ends; a list's or deque's index plain)
            key = args[0] if isinstance(method.__self__, dict) else untag(args[0], self)
            if isinstance(method.__self__, dict):  # (an accumulator's item: see made_here)
                self.keys_written.add((id(method.__self__), plain_key(key)))
            if type(key) is slice and len(args) == 2 and self._differentiated_array(args[1]):
                args = (key, self._rows(args[1]))
            else:
                args = (key, *args[1:])
        elif args and name in EXTENDS and self._differentiated_array(args[0]):
            args = (self._rows(args[0]), *args[1:])
        self.stores[id(method.__self__)] = method.__self__
        return method(*args, **kwargs)

    def _global_store(self, container: Any, key: Any, value: Any) -> bool:
        """Whether ``container[key] = value`` (``container.key = value``) stores a value
        differentiated here into a module's globals (see :func:`namespace_of`)."""
        return type(value) is Tagged and namespace_of(container, key) is not None and \
            self._mine(value)

    def _store_global(self, container: Any, name: str, value: Tagged) -> None:
        """``globals()[name] = value`` or ``mod.name = value`` (``value`` differentiated
        here): stored as it is, as an assignment to a ``global`` stores it -- the core would
        keep its tangent aside, where the module's functions, which read their globals
        natively, never look -- and made plain as the run ends (:meth:`_release_stores`)."""
        namespace = container if type(container) is dict else vars(container)  # (a module)
        self.globals_stored.setdefault(id(namespace), (namespace, set()))[1].add(name)
        namespace[name] = value

    def _update_globals(self, method: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
                        ) -> Any:
        """``globals().update(...)`` or ``globals().setdefault(name, v)``: each name stored
        as ``globals()[name] = v`` stores it (see :meth:`_store_global`; the core would keep
        the tangents aside, where a read of the global variable never looks), from the
        arguments as the context holds them (a dict the core keeps the members of aside,
        revealed).  A call that does not bind is made as it is, to raise as natively."""
        namespace = method.__self__
        if method.__name__ == "setdefault":
            if kwargs or len(args) not in (1, 2):
                return self.fallback(method, *args, **kwargs)
            name = args[0]
            if name not in namespace:
                self._set_global(namespace, name, args[1] if len(args) == 2 else None)
            return self.fallback(operator.getitem, namespace, name)
        items = dict(*self._revealed(args), **self._revealed(kwargs))  # (as update binds them)
        for name, value in items.items():
            self._set_global(namespace, name, value)
        return None

    def _set_global(self, namespace: dict[str, Any], name: Any, value: Any) -> None:
        """``namespace[name] = value``: as it is for a value differentiated here, else through
        the context (an enclosing derivative's value is that one's to store)."""
        if self._global_store(namespace, name, value):
            self._store_global(namespace, name, value)
        else:
            self.fallback(operator.setitem, namespace, name, value)

    def _release_stores(self) -> None:
        """The containers that hold this context's tagged values as they are get plain values
        back, as the core leaves the heap (called as the run ends, after the output was read:
        ``_call_and_reveal``).  Written through the context, so that an enclosing one sees
        the writes (and keeps its own tags), with the base class's item assignment (a Python
        ``__setitem__`` would transform the values again)."""
        stores, self.stores = self.stores, {}
        self.keys_written.clear()
        namespaces, self.globals_stored = self.globals_stored, {}
        for namespace, names in namespaces.values():
            for name in names:
                value = namespace.get(name)
                if type(value) is Tagged and self._mine(value):
                    # (through the context: an enclosing derivative's tag stays, as it
                    # stores it)
                    self.fallback(operator.setitem, namespace, name, untag(value, self))
        for container in stores.values():
            write = _base_write(container)
            if type(container) is set:
                # the items changed, taken out and put back plain; one whose outer layer is
                # another context's is left to it (an inner context's that raised before it
                # could give it back: hashed after its run, it would raise TagError in place
                # of the user's error)
                changed = [(v, p) for v in container
                           if not (type(v) is Tagged and v.owner() is not self)
                           for p in (self._plain_tree(v),) if p is not v]
                for item, _ in changed:
                    container.remove(item)
                for _, plain in changed:
                    self.fallback(container.add, plain)
                continue
            if isinstance(container, dict) and any(self._plain_tree(k) is not k
                                                   for k in container):
                items = list(container.items())  # differentiated keys: the dict rebuilt
                type(container).clear(container)  # (an OrderedDict: its own order too)
                for key, value in items:
                    self.fallback(write, container, self._plain_tree(key),
                                  self._plain_tree(value))
                continue
            items = list(container.items()) if isinstance(container, dict) else \
                list(enumerate(container))
            for key, value in items:
                plain = self._plain_tree(value)
                if plain is not value:
                    self.fallback(write, container, key, plain)

    def _plain_tree(self, value: Any, seen: set[int] | None = None) -> Any:
        """``value`` without this context's tags (through tuples and lists, at any depth,
        rebuilt; ``seen``: those on the way, for one that holds itself)."""
        if type(value) is Tagged:
            return untag(value, self)
        if type(value) in (list, tuple):
            if seen is None:
                seen = set()
            elif id(value) in seen:
                return value
            seen = seen | {id(value)}  # (the path: a list held twice is made plain twice)
            items = [self._plain_tree(v, seen) for v in value]
            if any(a is not b for a, b in zip(items, value)):
                return type(value)(items)
        return value

    def _sourceless(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """A Python function the core would run natively for want of source (``exec``, the
        classic prompt): its arithmetic on tagged values would silently drop their tangents,
        so it is a primitive without a rule (see ``_shared._sourceless``)."""
        return _sourceless(fn) and not can_recurse(self, fn, *args, **kwargs)

    def _writes(self, args: tuple[Any, ...]) -> bool:
        """``container[key] = value``: arrays are this context's business; lists, dicts and
        objects the core's (it keeps the metadata), which this context only takes note of."""
        if len(args) != 3:
            return False
        container, _, value = args
        if self._global_store(*args):
            return True  # globals()[name] = x: stored as it is (see _store_global)
        target = _innermost(container)
        if type(target) is np.flatiter or type(target) is _Flat:  # a.flat[i] = v
            return self._carries_within(value) or self._carries(target.base)
        if isinstance(target, np.ndarray):
            return (self._carries_within(value) or self._carries(container)
                    or (bool(self.arrays) and self.arrays.has(target)))
        if _arrays.is_foreign_array(target):  # _write refuses it: never a silent zero
            return self._carries_within(value) or self._carries(container)
        if type(target) is list and (self._carries_within(value) or _enclosing_within(value)):
            self.lists[id(target)] = target
            return type(args[1]) is slice and self._differentiated_array(value)
        if isinstance(target, dict) and self._carries_within(args[1]) and \
                (type(target) is dict or _stored_as_is(target)):
            return True  # d[x] = v: the key keeps its tangent (see _write)
        return _stored_as_is(target) and self._carries_within(value)

    def _differentiated_array(self, x: Any) -> bool:
        """Whether ``x`` is an array (not a number) with a tangent here."""
        return self._carries(x) and np.ndim(_innermost(x)) > 0

    def execute(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        if not self.nested and id(fn) in _scalars.FAST and not kwargs:
            out = _scalars.scalar_step(self, fn, args)  # (the forward-partials route)
            if out is not _scalars.NOT_SIMPLE:
                return out
        if id(fn) in STEPPED and stepped_builtin(fn, args, kwargs):
            return run_stepped(self, fn, args, kwargs)  # sum(rows, []), max(xs, default=x)
        if type(fn) in RESTATABLE:
            called = restated(fn, args)
            if called is not None:
                return self.overdub(called[0], *called[1], **kwargs)
        helpers = self.helpers
        if type(fn) is types.FunctionType and helpers is not None:
            given = helpers[0](fn, args, kwargs)
            if given is not None and helpers[1](self, given):
                out = helpers[2](self, fn, given, helpers[4])  # a Python helper, by its dual
                return recurse(self, fn, *args, **kwargs) if out is helpers[3] else out
        if given_out(fn, args):  # np.sin(a, r), np.cumsum(a, 0, None, r): r is its out=
            fn, args, kwargs = out_as_keyword(fn, args, kwargs)
        if fn is setattr and part_write(fn, args):
            return self.overdub(set_part, *args)
        if type(fn) is _LRU_CACHE or type(fn) is types.MethodType:
            at = _callbacks.native_holder(self, fn, args, kwargs, self._carries)
            if at is not None:  # lru_cache(f)(Params(x)): MissingRuleError (see native_holder)
                return _callbacks.read_natively(self, fn, args, kwargs, at, "forward",
                                                self.fallback)
        at = _callbacks.native_holder(self, fn, args, kwargs, self._carries)
        if at is not None:  # (never a silent zero: see is_primitive)
            return _callbacks.read_natively(self, fn, args, kwargs, at, "forward", self.fallback)
        if type(fn) is types.FunctionType and inert_library_call(fn, args, kwargs):
            return self.fallback(fn, *args, **kwargs)
        if fn is getattr:
            return self._attribute(*args)
        if fn is setattr and _reshapes(self, args):
            return self._set_shape(*args)
        if fn is setattr and len(args) == 3 and self._global_store(*args):
            return self._store_global(*args)
        if type(fn) is _BUILTIN_METHOD and fn.__name__ in _GLOBAL_UPDATES and \
                namespace_of(fn.__self__) is not None:
            return self._update_globals(fn, args, kwargs)
        if fn is operator.setitem:
            return self._write(*args)
        if type(fn) in METHOD_KINDS and _spelled_kind(fn):
            spelled = spelled_store(fn, args)
            if spelled is not None:  # list.append(l, x), d.__setitem__(k, x), a.__iadd__(b)
                return self._spelled(spelled, kwargs)
            flat = _flat_store(fn, args)
            if flat is not None:
                return self._write(*flat)
        if self.flats and self.arrays and _flat_given(fn, args) and \
                self._written_flat_given(fn, args):
            return self._through_flat(fn, args)
        if fn is operator.getitem and isinstance(args[0], dict) and \
                self._keyed(args[1]):  # (x itself, or x in a tuple key, a frozen dataclass...)
            if made_here(self.keys_written, args[0], args[1]):
                return self.fallback(fn, *args)
            return by_differentiated_key(self.fallback(fn, *args), self._carries, "forward",
                                         self)
        keyed = keyed_read(fn, args) if type(fn) in METHOD_KINDS else None  # (a dict's method)
        if keyed is not None and self._keyed(keyed[1]):
            at = 1 if type(fn) is _METHOD_DESCRIPTOR else 0  # (dict.get(d, key): key second)
            plain = (*args[:at], _innermost(args[at]), *args[at + 1:])  # a key is hashed
            if made_here(self.keys_written, keyed[0], keyed[1]):
                return self.fallback(fn, *plain, **kwargs)
            return by_differentiated_key(self.fallback(fn, *plain, **kwargs), self._carries,
                                         "forward", self)
        if fn is operator.getitem and type(args[0]) is not Tagged:
            if type(args[0]) is np.flatiter:  # (taken before the run: see _written_flat_given)
                return self._through_flat(fn, args)
            return self._read(*args)
        if type(fn) is custom_jvp:
            return self._custom(fn, args, kwargs)
        if isinstance(fn, _PYTHON_CODE) and derivative_entry(fn):
            return self._entry_call(fn, args, kwargs)
        if fn is _tolist:
            return self._tolist(*args)
        standin = _rules.standin(fn, _rules.jvp_rules)
        if standin is not None:  # given its tuples revealed: quad(f, a, b, args=kept[0])
            # (only tuples: a stand-in may write into a list or dict it is given, exec's
            # namespace, which must stay the caller's own)
            return recurse(self, standin, *[self._revealed(a) if type(a) is tuple else a
                                            for a in args],
                           **{k: self._revealed(v) if type(v) is tuple else v
                              for k, v in kwargs.items()})
        if fn is np.copyto:  # a write: the tangents of dst's memory follow it
            return recurse(self, _copyto, *args, **kwargs)
        if type(fn) is np.ufunc and kwargs and _masked(kwargs):  # a write through a mask
            return recurse(self, _masked_call, fn, *args, **kwargs)
        if id(fn) in _RESTATED and _rules.jvp_rules(fn) is None:
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
            if fn.__name__ == "setdefault":  # d.setdefault(x, v): stored with x's tangent
                return self._store_as_is(fn, args, kwargs)
            if untag(args[0], self) in fn.__self__:
                return self.fallback(fn, args[0])  # the stored value, its tangent from the core
            return args[1]
        if type(fn) is _BUILTIN_METHOD and fn.__name__ == "move_to_end" and args and \
                isinstance(fn.__self__, collections.OrderedDict):
            # od.move_to_end(x): the key only finds the item, which keeps its own key
            return self.fallback(fn, untag(args[0], self), *args[1:], **kwargs)
        if isinstance(fn, _PYTHON_CODE) and _rules.jvp_rules(fn) is None and \
                self._sourceless(fn, args, kwargs):
            held = [i for i, a in enumerate(args) if _holds_stored(self, a)]
            if held:  # (an object holding differentiated values: see is_primitive)
                raise _rules.missing(fn, held[0], "forward", type(self).__name__)
        return self._differentiate(fn, args, kwargs)

    def _differentiate(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A call ``execute`` has no special case for: a user operator, an array method, a
        NumPy function through its own code, or the function's rules applied."""
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
            method = _METHODS.get(fn.__name__)  # (the table of methods as functions)
            if method is not None:  # a plain array's method given a differentiated argument
                return recurse(self, functools.partial(method, fn.__self__), *args, **kwargs)
        rules = _rules.jvp_rules(fn)
        if rules is None and not _rules.is_nondifferentiable(fn):
            fn = _public(fn)
            rules = _rules.jvp_rules(fn)
        if rules is None and not _rules.is_nondifferentiable(fn):
            if _is_mover(fn) or constructs_container(fn):
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
            args = tuple(list(iterate_through(self, a)) if python_iterable(a) else
                         list(a) if _hides_arrays(a) else a for a in args)
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
        if any(isinstance(t, (list, tuple)) for _, t in split) and \
                takes_arrays(fn, [p for p, _ in split], kwargs):
            split = [self._as_arrays(fn, p, t) if isinstance(t, (list, tuple)) else (p, t)
                     for p, t in split]
        primals = [p for p, _ in split]
        carried = [i for i, (_, t) in enumerate(split) if t is not None]
        if _sourceless(fn):  # Python without source reads what an object or dict holds too
            for i, a in enumerate(args):
                if i not in carried and type(a) not in _INERT_VALUES and \
                        _callbacks.holds_kept(self, a, self._carries):
                    raise _rules.missing(fn, i, "forward", type(self).__name__)
        target = _inplace_target(fn, primals, plain_kwargs) \
            if plain_kwargs or id(fn) in _INPLACE else None
        error = None if target is None or not (carried or differentiated_kwargs) else \
            unfollowed_write(target, "forward")  # (np.sin(a, out=z.real))
        if error is not None:
            raise error
        if _rules.is_nondifferentiable(fn) or not (carried or differentiated_kwargs):
            out = run(fn, *primals, **plain_kwargs)
            if target is not None:  # overwritten by something with no derivative
                self._write_constant(target, Ellipsis, target, _target_holder(fn, args, kwargs))
            else:
                self._put_outputs(fn, kwargs.get("out"), out, None)
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
                # (the function's own error first, as natively -- a.reshape(x) of a float x
                # raises TypeError, which the program may catch -- as reverse mode does)
                run(fn, *primals, **plain_kwargs)
                raise _rules.missing(fn, i, "forward", type(self).__name__)
        before = primals if target is None else [  # (y *= y[::-1]: a view of it too)
            run(np.copy, p) if _innermost(p) is target or (
                type(_innermost(p)) is np.ndarray and np.may_share_memory(_innermost(p), target))
            else p for p in primals]
        if fn is sum and type(primals[0]) is np.ndarray:
            out = summed_through(run, *primals)
        else:
            out = run(fn, *primals, **plain_kwargs)
        if isinstance(_innermost(out), (str, bytes)):
            return out  # text ("%.2f" % x, str.__mod__ of its values): a constant, docs/ad.md
        if type(out) is np.ndarray and out.dtype.names is not None:
            error = unfollowed_write(out, "forward")  # (np.array of tuples, a record dtype)
            assert error is not None
            raise error
        if "out" in plain_kwargs:
            plain_kwargs = {k: v for k, v in plain_kwargs.items() if k != "out"}
        given_out = out  # (what the rules see: the ufunc's result before out= broadcast it)
        if type(fn) is np.ufunc and fn.signature is None and \
                _broadcast_into(kwargs.get("out"), before):  # (a gufunc's shapes are its own)
            given_out = run(fn, *before, **plain_kwargs)
        number = _innermost(out).__class__ in _NUMBERS  # (a tuple, an array: every rule runs)
        terms = (fn, rules, carried, split, before, given_out, plain_kwargs, number)
        try:
            tangent, skipped = self._terms(*terms)
        except _rules.RULE_FAILURES as failure:  # (the program's own except must not see it)
            tangent, skipped = _rules.computed_as_ieee(fn, failure, self._terms, *terms)
        if tangent is None and skipped:  # (a zero still: max(0, x) is a differentiated int)
            tangent = 0j if _innermost(out).__class__ in _COMPLEX else 0.0
        # (np.dot(a, b, out=w) with a 0-d w writes w and returns a NumPy scalar, a copy)
        copied = target is not None and _innermost(out) is not target and \
            np.ndim(target) == 0 and isinstance(_innermost(out), np.generic)
        if target is not None and (_innermost(out) is target or copied):
            # changed in place: the array keeps plain numbers, its tangent lives here (an
            # array of integers or booleans given out= what fn computes: a float result
            # truncated with casting="unsafe" has the tangent zero, see _ArrayTangents.write;
            # a += b of them casts nothing else)
            computed = None if target.dtype.kind in "fc" or tangent is None or \
                id(fn) in _INPLACE else fn(*map(_innermost, before), **{
                    k: _innermost(v) for k, v in plain_kwargs.items()})
            if tangent is None:  # (only ZERO rules: np.heaviside(a, 0.5, out=b) forgets b's)
                self._write_constant(target, Ellipsis, target, _target_holder(fn, args, kwargs))
                return out
            if given_out is not out:
                tangent = self._spread_to(tangent, _innermost(given_out), target)
            self.arrays.put(target, tangent, computed)
            return self._attach(out, tangent) if copied else out
        if self._put_outputs(fn, kwargs.get("out"), out, tangent, given_out):
            return out
        if type(fn) is types.FunctionType and not _rules.is_shipped(fn):
            kind = type(_innermost(out))
            _rules.note_output(fn, not (kind is list or kind is dict or (
                kind is not tuple and is_node(_innermost(out)))))  # (as the dual route asks)
        if tangent is not None and (type(out) is dict or (not isinstance(out, tuple)
                                                          and is_node(out))):
            return self._attach_tree(fn, out, tangent)  # (a named tuple: as a tuple, below)
        return self._attach(out, tangent)

    def _terms(self, fn: Any, rules: tuple[Any, ...], carried: list[int],
               split: list[tuple[Any, Any]], before: list[Any], given_out: Any,
               plain_kwargs: dict[str, Any], number: bool) -> tuple[Any, bool]:
        """The output tangent of ``_apply``'s call: the sum of the rules' terms of the
        arguments that carry one (None if none ran), and whether a term was skipped as
        exactly zero."""
        run = self.fallback
        tangent = None
        skipped = False
        for i in carried:
            rule = rules[i]
            if rule is _rules.ZERO:
                continue
            if number and _exactly_zero(split[i][1]):
                skipped = True  # its term is exactly 0, even where the partial is infinite
                continue
            if rule is _rules.LINEAR:
                moved = list(before)
                moved[i] = split[i][1]
                part = run(fn, *moved, **plain_kwargs)
            elif type(rule) is _rules.Carried:
                part = run(rule.rule, _rules.carried_pattern([t for _, t in split]),
                           split[i][1], given_out, *before, **plain_kwargs)
            else:
                part = run(rule, split[i][1], given_out, *before, **plain_kwargs)
            tangent = self._add(tangent, part)
        return tangent, skipped

    def _attach_tree(self, fn: Any, out: Any, tangent: Any) -> Any:
        """``out``, a dict, named tuple, dataclass or registered pytree ``fn``'s rules gave
        ``tangent`` for, with each leaf carrying its tangent; the tangent must have the
        output's structure (else a ``TypeError``: a leaf would silently lose it)."""
        leaves, tree = flatten(out)
        parts, tangent_tree = flatten(tangent)
        if tangent_tree != tree and (len(parts) != len(leaves) or tangent_tree.kind
                                     is not tree.kind or tangent_tree.keys != tree.keys):
            raise TypeError(f"the forward rule of {_rules._name(fn)} returned a tangent of "
                            f"structure {tangent_tree} for an output of structure {tree}: "
                            f"give the tangent in the output's structure")
        return unflatten(tree, [self._attach(o, t) for o, t in zip(leaves, parts)])

    def _spread_to(self, tangent: Any, result: Any, target: np.ndarray) -> Any:
        """The tangent of a ufunc's ``result`` (``jacfwd``'s directions in front), spread over
        the larger ``out=`` array NumPy broadcast it into (``np.sin(x[0], out=a[1:2])``: a
        number written into one element; ``np.exp(x, out=rows)``: a row into each)."""
        own = np.shape(result)
        shape = np.shape(_innermost(tangent))
        batch = shape[:len(shape) - len(own)]
        lifted = self.fallback(np.reshape, tangent,
                               batch + (1,) * (target.ndim - len(own)) + own)
        return self.fallback(np.broadcast_to, lifted, batch + target.shape)

    def _put_outputs(self, fn: Any, out_arg: Any, out: Any, tangent: Any,
                     results: Any = None) -> bool:
        """A ufunc of several outputs given arrays for them (``np.modf(x, r1, r2)``): each
        array written keeps its output's tangent (None: zero), as one ``out=`` array does
        (see _inplace_target), spread over it where NumPy broadcast ``results`` (the outputs
        before) into larger arrays.  False where ``out=`` is not such a tuple.  A tangent
        written into integers (``casting="unsafe"``) would need the value before its cast:
        refused."""
        if type(out_arg) is not tuple or len(out_arg) < 2 or type(out) is not tuple:
            return False
        tangents = tangent if type(tangent) in (tuple, list) else (None,) * len(out)
        if results is not None and results is not out:
            tangents = [t if t is None else self._spread_to(t, _innermost(r), array)
                        for t, r, array in zip(tangents, results, out)]
        for given, array, t in zip(out_arg, out, tangents):
            if given is None:
                continue  # (allocated by NumPy: a new array, whose tangent the tuple holds)
            if t is None:
                self._write_constant(array, Ellipsis, array, given)
                continue
            if array.dtype.kind not in "fc":
                raise _rules.missing(fn, "out", "forward", type(self).__name__)
            error = unfollowed_write(array, "forward")
            if error is not None:
                raise error
            self.arrays.put(array, t)
        return True

    def _as_arrays(self, fn: Any, p: Any, t: Any) -> tuple[Any, Any]:
        """A list argument ``p`` (tangent ``t``, a list) as NumPy reads it: a list of numbers,
        or of arrays of one shape, is an array, to its rule too, with the tangent stacked
        behind its batch dimensions; for a function that reads a sequence of arrays
        (``np.concatenate``) each list in the sequence is one (see ``_arraylike``)."""
        run = self.fallback
        if one_array(fn, p):
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
        if type(a) is dict or is_node(a):  # (the rules of a function returning a pytree)
            leaves, tree = flatten(a)
            return unflatten(tree, [self._add(x, y) for x, y in zip(leaves, flatten(b)[0])])
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
                f"its elements would lose their derivatives (object arrays are not "
                f"differentiable; np.vectorize is, without otypes=[object])")
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
        found = python_attribute(_innermost(obj), name)  # Meters(x).double(), .half
        if found is not None:
            return self.overdub(found.fget, obj) if type(found) is property else \
                functools.partial(found, obj)
        method = _method_of(kind, name)
        if method is not None:
            return functools.partial(method, obj)
        return self.fallback(getattr, untag(obj, self), name, *default)

    def _foreign_attribute(self, obj: Any, name: str, default: tuple[Any, ...]) -> Any:
        """``obj.name`` of a differentiated array of another namespace: a method is the NumPy
        function of that name (reverse mode's table; an array-backend context runs it in the
        namespace), and data read out of the array otherwise would lose its tangent."""
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
        if self._global_store(container, key, value):
            self._store_global(container, key, value)
            return
        if type(container) is list:  # lst[i:j] = a: the array's differentiated rows
            self.overdub(operator.setitem, container, key, self._rows(value))
            return
        if _stored_as_is(container) or type(container) is dict:  # od[k] = x, a deque's, a
            # list subclass's; d[x] = v, whose key, read back by iterating d, keeps its tangent
            self._store_as_is(type(container).__setitem__.__get__(container), (key, value), {})
            return
        if type(container) is np.flatiter or type(container) is _Flat:
            self._write_flat(container, key, value)
            return
        target = untag(container, self)
        if _arrays.is_foreign_array(_innermost(target)):
            raise _arrays.write_error(_innermost(target), "forward")
        plain_key = untag(key, self)
        plain, dvalue = self._split(value)
        array = _innermost(target)
        if dvalue is not None and array.dtype.kind == "O":
            raise self._object_write()
        if dvalue is not None or self._mine(container) or (
                type(array.base) is np.ndarray and self.arrays.has(array.base)):
            error = unfollowed_write(array, "forward")  # (s["x"] = v, z.real[:] = v)
            if error is not None:
                raise error
        self.fallback(operator.setitem, target, plain_key, plain)
        if dvalue is None:
            self._write_constant(array, plain_key, plain, container)
        else:
            self.arrays.write(array, plain_key, dvalue, plain)

    def _object_write(self) -> _rules.MissingRuleError:
        """The error for a differentiated value written into an object array: its element
        would be a Python object read back natively, without derivative (a silent zero)."""
        return _rules.MissingRuleError(
            f"a differentiated value written into an object array under "
            f"{type(self).__name__}: NumPy stores it as a Python object, whose derivative "
            f"this mode does not follow (object arrays are not differentiable)")

    def _write_flat(self, flat: Any, key: Any, value: Any) -> None:
        """``a.flat[key] = value`` (``flat`` NumPy's flat iterator of a plain array, or the
        :class:`_Flat` of a differentiated one): NumPy writes the positions ``key`` selects, in
        C order, the value's elements cycled over them (``a.flat[:4] = [1, 2]`` writes 1, 2,
        1, 2; the last write to a repeated position wins).  Made the index write
        ``a[rows, cols] = elements`` it amounts to (an enclosing context follows that too),
        whose tangents are followed as any."""
        holder = flat.base
        plain_array = untag(holder, self)
        array = _innermost(plain_array)
        plain_key = untag(key, self)
        plain, dvalue = self._split(value)
        if dvalue is not None and array.dtype.kind == "O":
            raise self._object_write()
        count = int(np.size(_innermost(plain)))
        if not count:  # (nothing to write, or NumPy's error)
            self.fallback(operator.setitem, np.ndarray.flat.__get__(array), plain_key, plain)
            return
        order = np.full(array.shape, -1, np.intp)  # which element of the value goes where
        order.flat[plain_key] = np.arange(count) if count > 1 else 0  # (NumPy's errors)
        positions = np.flatnonzero(order >= 0)
        taken = order.reshape(-1)[positions]
        if array.ndim:
            index: Any = np.unravel_index(positions, array.shape)
        else:  # (one position, the last element written to it)
            index, taken = (), taken[-1]
        elements = self.fallback(operator.getitem, self.fallback(np.ravel, plain), taken)
        self.fallback(operator.setitem, plain_array, index, elements)
        if dvalue is None:
            self._write_constant(array, index, elements, holder)
            return
        if type(plain) in (list, tuple):
            dvalue = self.fallback(as_array_tangent, dvalue, plain)
        batch = _batch_of(dvalue, plain)
        dflat = self.fallback(np.reshape, dvalue, batch + (count,))
        self.arrays.write(array, index, self.fallback(operator.getitem, dflat, (Ellipsis, taken)),
                          elements)

    def _written_flat(self, x: Any) -> bool:
        """Whether ``x`` is NumPy's flat iterator of an array written here with tangents."""
        return type(x) is np.flatiter and self.arrays.has(x.base)

    def _written_flat_given(self, fn: Any, args: tuple[Any, ...]) -> bool:
        """Whether a call of ``fn`` (a method of it too) is given such an iterator: looked
        for once code run here read an ``a.flat`` (``self.flats``), which is how it gets one
        (an iterator made before the run is caught where it is indexed only: looking at
        every call's arguments would cost every differentiated program with writes)."""
        return self._written_flat(getattr(fn, "__self__", None)) or \
            any(map(self._written_flat, args))

    def _through_flat(self, fn: Any, args: tuple[Any, ...]) -> Any:
        """A call given NumPy's flat iterator of an array written here with tangents (taken
        before the write: ``a.flat`` of it now is a :class:`_Flat`): a read ``it[i]`` is
        ``a.flat[i]``'s; anything else (iterating it, ``np.sum(it)``) would read the plain
        numbers natively."""
        if fn is operator.getitem and len(args) == 2:
            return self.overdub(operator.getitem, _Flat(args[0].base), args[1])
        raise _rules.MissingRuleError(
            f"{_rules._name(fn)} given the flat iterator (a.flat) of an array written with "
            f"differentiated values under {type(self).__name__}: it reads the plain numbers; "
            f"take a.flat again after the write")

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
    def _move(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
              reordering: bool = False) -> Any:
        """``list(x)``, ``zip(x, y)``, ``dict(a=t)``...: differentiated arrays are handed over
        as lists of their differentiated rows, lists whose members the core holds metadata of
        as lists of tagged members (a copy), other values untouched (not stripped)."""
        if not reordering and id(fn) in REORDERING and args and type(args[0]) is list and (
                id(args[0]) in self.lists or any(map(self._carries, args[1:]))
                or Tagged in map(type, args[1:])):
            # (a differentiated value pushed into a list made before the run, or empty:
            # natively, the list would keep the tagged value itself)
            return self._reorder(fn, args, kwargs)
        if id(fn) in _ITERATING or constructs_container(fn):  # (fromkeys: its keys only)
            fromkeys = type(fn) is _BUILTIN_METHOD and fn.__name__ == "fromkeys" and \
                isinstance(fn.__self__, type)
            args = tuple(self._rows(a) if self._carries(a) and np.ndim(_innermost(a))
                         and iterated_at(fn, i) and (i == 0 or not fromkeys) else a
                         for i, a in enumerate(args))
        args = tuple(self._reveal(a) if type(a) is list and id(a) in self.lists else a
                     for a in args)
        if can_recurse(self, fn, *args, **kwargs):  # map, filter, sorted(key=...): shims
            return recurse(self, fn, *args, **kwargs)
        if any(map(self._carries, args)) or any(map(self._carries, kwargs.values())):
            if fn is dict and args and not isinstance(args[0], dict) and \
                    hasattr(type(args[0]), "keys"):
                args = (self.fallback(dict, args[0]), *args[1:])  # dict(UserDict(...), y=t):
                # the mapping read through the context first (the core reads a Python one)
            if fn is dict and args and type(args[0]) is dict:
                # dict(d, y=t): d's members tagged again (the core keeps their metadata)
                args = (dict(self.fallback(args[0].items)), *args[1:])
            out = fn(*args, **kwargs)  # stored as they are: a dict built from tagged values
        else:
            out = self.fallback(fn, *args, **kwargs)
        if type(out) not in (list, dict) and isinstance(out, CONTAINERS):
            self.stores[id(out)] = out  # (deque([x]), OrderedDict(a=x), L([x]))
        elif type(fn) is _BUILTIN_METHOD and type(fn.__self__) is set and \
                fn.__name__ in _SET_STORES:
            self.stores[id(fn.__self__)] = fn.__self__  # s.add(x): x as it is, until the end
        return out

    def _reorder(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``heapq.heappop(h)``, ``bisect.insort(h, x)``... of a list ``h`` the core holds the
        metadata of its members of: run on its copy with them tagged again, which is then
        stored back into ``h`` through the core (the core keeps metadata by position, which
        the function moves; given the copy alone, it would change the copy, and ``h`` never:
        heapq.merge's loop never ended)."""
        target = args[0]
        items = self._reveal(target)
        out = self._move(fn, (items, *args[1:]), kwargs, reordering=True)
        self.fallback(operator.setitem, target, slice(None), items)
        self.lists[id(target)] = target  # (its members' tangents now kept aside by the core)
        return out

    def _rows(self, x: Any) -> list[Any]:
        """A differentiated array as the list of its differentiated rows."""
        plain, tangent = self._split(x)
        nb = np.ndim(tangent) - np.ndim(_innermost(plain))
        return [self._attach(self.fallback(operator.getitem, plain, i), self._row(tangent, nb, i))
                for i in range(len(_innermost(plain)))]

    # -- user rules -------------------------------------------------------------------------------
    def _custom(self, fn: custom_jvp, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A :class:`custom_jvp` function: its rule gets the plain primals and the tangents
        (zeros for elements without one), both with the arguments' pytree structure, and gives
        the output and its tangent.  As in JAX the rule sees primal-shaped tangents: under a
        batch of directions (jacfwd) it runs once per direction and its tangents are stacked,
        since a rule that reduces its tangent (``np.sum(t)``) would mix directions."""
        if fn.jvp is None:
            raise TypeError(f"custom_jvp function {_rules._name(fn.fun)} has no jvp rule: "
                            f"define one with @{fn.__name__}.defjvp")
        refuse_hidden("custom_jvp", fn.fun, args, kwargs, lambda x: _holds_stored(self, x),
                      self._carries)
        positional = self._revealed(fn.positional(args, kwargs))
        fn.check_nondiff([any(map(self._carries, flatten(a)[0])) for a in positional])
        leaves, tree = flatten(list(positional))
        parts = [self._split(leaf) for leaf in leaves]
        if all(t is None for _, t in parts):
            # nothing this derivative differentiates: the call as it is, which an enclosing
            # derivative sees whole and takes by its rule (never the body's operations)
            return self.fallback(fn, *args, **kwargs)
        batch: tuple[int, ...] = next((np.shape(t)[:np.ndim(t) - np.ndim(_innermost(p))]
                                       for p, t in parts if t is not None), ())
        primals = tuple(unflatten(tree, [p for p, _ in parts]))
        directions = [[_zero(p, ()) if t is None else
                       self.fallback(operator.getitem, t, at) if batch else t for p, t in parts]
                      for at in np.ndindex(batch)]  # (one, ``()``, when unbatched)
        otree: Any = None
        outs: list[Any] = []
        per_direction: list[list[Any]] = []
        for tangents in directions:
            result = fn.rule_pair(self.fallback(fn.jvp, primals,
                                                tuple(unflatten(tree, tangents))))
            outs, otree = flatten(result[0])
            douts, dtree = flatten(result[1])
            if len(outs) != len(douts):
                raise TypeError(f"the jvp rule of {_rules._name(fn.fun)} returned a tangent of "
                                f"structure {dtree} for an output of structure {otree}")
            per_direction.append(douts)
        if batch:
            per_direction = [[self._stacked(batch, list(ds)) for ds in zip(*per_direction)]]
        return unflatten(otree, [self._attach(o, d) for o, d in zip(outs, per_direction[0])])

    def _stacked(self, batch: tuple[int, ...], tangents: list[Any]) -> Any:
        """One output's tangents, one per direction of ``batch`` (in ``np.ndindex`` order), as
        its batched tangent; None where the rule gave none."""
        if all(t is None for t in tangents):
            return None
        stacked = self.fallback(np.stack, [self.fallback(np.asarray, t) for t in tangents])
        return self.fallback(np.reshape, stacked, batch + np.shape(stacked)[1:])

    def _revealed(self, x: Any, seen: set[int] | None = None) -> Any:
        """``x`` with the members of its lists, tuples and dicts, and the children of its
        other pytree nodes (dataclasses, registered classes), tagged again where the core
        holds their metadata aside (see :meth:`_reveal`), at any depth: a pytree whose leaves
        show their tangents.  Each is the very same object where nothing in it changed
        (``seen``: the containers on the way; one that holds itself is left as it is)."""
        if type(x) is dict or isinstance(x, (list, tuple)) or is_node(x):
            if seen is None:
                seen = set()
            elif id(x) in seen:
                return x
            seen = seen | {id(x)}
        else:
            return x
        if type(x) is dict:
            items = [(k, self._revealed(v, seen)) for k, v in self.fallback(x.items)]
            return x if all(a is b for (_, a), b in zip(items, x.values())) and \
                all(a is b for (a, _), b in zip(items, x)) else dict(items)
        if isinstance(x, (list, tuple)):
            given = self._reveal(x) if self._kept_aside(x) else x
            items = [self._revealed(e, seen) for e in given]
            return x if all(a is b for a, b in zip(items, x)) else _rebuild(x, items)
        # (a node's children read through the context)
        return reveal_node(x, self.overdub, lambda child: self._revealed(child, seen),
                           keep=True)

    def _entry_call(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A derivative's entry point given pytrees (``grad(f)(m.params)``, ``jvp(f, (s[0],),
        ...)``): it takes them apart natively, where the members the core keeps the tangents
        of aside (``m.params = {"w": w}`` stored ``w`` plain) would lose them; so it is given
        the pytrees with those tagged again (copies: it only reads them), and run as any
        opaque function is."""
        return self.fallback(fn, *self._revealed(args), **self._revealed(kwargs))
